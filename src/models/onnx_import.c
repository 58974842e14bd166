/*
 * onnx_import.c -- pgdl.import_onnx: an ONNX model (protobuf bytes, unpacked
 * by protobuf-c) read into pgdl's layers and weights and stored as a new row
 * of pgdl.models.
 *
 * The graph must be a chain: from its one real input (inputs that are
 * initializers are weights) through nodes that each take the previous node's
 * output and constants, to its one output.  Each node becomes at most one
 * layer; anything pgdl cannot compute exactly as ONNX does is refused with an
 * error that names the node, its op_type and why.  A trailing Softmax or
 * LogSoftmax (or Sigmoid) is the loss's, not a layer: pgdl.predict applies it.
 * Operators are known by the names of spec/spec.h's table (PgdlOnnxOp); how
 * each is read is this file's.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/jsonapi.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "models/models.h"
#include "models/onnx_depth.h"
#include "models/onnx_reader.h"

/* ---- errors ---- */

void
onnx_node_error(Reader *r, int code, const char *fmt,...)
{
	char		why[1024];
	char		label[256];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (r->node->name && r->node->name[0])
		snprintf(label, sizeof(label), "\"%s\"", pgdl_echo(r->node->name));
	else
		snprintf(label, sizeof(label), "#%d", r->index);
	ereport(ERROR,
			(errcode(code),
			 errmsg("cannot import ONNX node %s (%s)", label,
					r->node->op_type ? pgdl_echo(r->node->op_type) : ""),
			 errdetail("%s", why)));
}

void
onnx_model_error(int code, const char *fmt,...)
{
	char		why[1024];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	ereport(ERROR,
			(errcode(code),
			 errmsg("cannot import the ONNX model"),
			 errdetail("%s", why)));
}

/* Text from the file goes into messages and jsonb: it must be valid in the database's encoding. */
const char *
onnx_checked_text(const char *s, const char *what)
{
	if (s == NULL)
		return "";
	if (!pg_verifymbstr(s, strlen(s), true))
		onnx_model_error(ERRCODE_DATA_CORRUPTED, "The %s is not valid text in the database's encoding.", what);
	return s;
}

/* ---- unpacking: protobuf-c allocating in CurrentMemoryContext ---- */

static void *
onnx_alloc(void *data, size_t size)
{
	return palloc_extended(size, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
}

static void
onnx_free(void *data, void *pointer)
{
	if (pointer != NULL)
		pfree(pointer);
}

#define FILL(s) ((s) = (s) ? (s) : "")

/* Optional strings that are absent are NULL: make them empty, so that every name below is a string. */
static void
fill_strings(Onnx__ModelProto *m)
{
	Onnx__GraphProto *g = m->graph;

	FILL(m->producer_name);
	FILL(m->producer_version);
	FILL(g->name);
	for (size_t i = 0; i < m->n_opset_import; i++)
		FILL(m->opset_import[i]->domain);
	for (size_t i = 0; i < m->n_metadata_props; i++)
	{
		FILL(m->metadata_props[i]->key);
		FILL(m->metadata_props[i]->value);
	}
	for (size_t i = 0; i < g->n_node; i++)
	{
		FILL(g->node[i]->name);
		FILL(g->node[i]->op_type);
		FILL(g->node[i]->domain);
	}
	for (size_t i = 0; i < g->n_initializer; i++)
		FILL(g->initializer[i]->name);
	for (size_t i = 0; i < g->n_input; i++)
		FILL(g->input[i]->name);
	for (size_t i = 0; i < g->n_output; i++)
		FILL(g->output[i]->name);
}

/* Why the depth scan's copy of onnx.proto (onnx_depth.c) differs from one message's descriptor, or NULL. */
static const char *
depth_table_differs(const ProtobufCMessageDescriptor *d, int message)
{
	int			n_message_fields = 0;

	if (message < 0)
		return psprintf("It lacks the message %s.", d->name);
	for (unsigned i = 0; i < d->n_fields; i++)
	{
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		int			got = pgdl_onnx_scan_field_message(message, f->id);
		const char *want = f->type == PROTOBUF_C_TYPE_MESSAGE ?
			((const ProtobufCMessageDescriptor *) f->descriptor)->name : NULL;

		if (want ? got < 0 || strcmp(pgdl_onnx_scan_message_name(got), want) != 0 : got >= 0)
			return psprintf("It has field %u of %s wrong.", f->id, d->name);
		if (want && pgdl_onnx_scan_field_repeated(message, f->id) != (f->label == PROTOBUF_C_LABEL_REPEATED))
			return psprintf("It has field %u of %s repeated where protobuf-c does not, or not where it does.",
							f->id, d->name);
		n_message_fields += want != NULL;
	}
	if (n_message_fields != pgdl_onnx_scan_n_fields(message))
		return psprintf("It has fields of %s that protobuf-c does not.", d->name);
	return NULL;
}

/*
 * The scan descends only where its table says a field holds a message; a
 * message field it missed would be unpacked with no bound.  protoc-c generated
 * onnx.pb-c.c from whichever onnx.proto the build found, so the table is
 * checked against it, every message ModelProto reaches, once per backend.
 */
static void
check_depth_table(void)
{
	static bool checked = false;
	const ProtobufCMessageDescriptor *todo[64];
	int			n_todo = 0;
	int			n_seen = 0;
	const char *why = NULL;

	if (checked)
		return;
	todo[n_todo++] = &onnx__model_proto__descriptor;
	while (n_seen < n_todo && why == NULL)
	{
		const ProtobufCMessageDescriptor *d = todo[n_seen++];
		int			message = -1;

		for (int m = 0; m < pgdl_onnx_scan_n_messages(); m++)
			if (strcmp(pgdl_onnx_scan_message_name(m), d->name) == 0)
				message = m;
		why = depth_table_differs(d, message);
		for (unsigned i = 0; i < d->n_fields && why == NULL; i++)
		{
			const ProtobufCMessageDescriptor *sub = d->fields[i].descriptor;
			bool		seen = d->fields[i].type != PROTOBUF_C_TYPE_MESSAGE;

			for (int j = 0; j < n_todo && !seen; j++)
				seen = todo[j] == sub;
			if (!seen && n_todo == lengthof(todo))
				why = "ModelProto reaches too many messages.";
			else if (!seen)
				todo[n_todo++] = sub;
		}
	}
	if (why == NULL && n_todo != pgdl_onnx_scan_n_messages())
		why = psprintf("It has %d messages, ModelProto reaches %d.", pgdl_onnx_scan_n_messages(), n_todo);
	if (why != NULL)
		elog(ERROR, "pgdl: onnx_depth.c's copy of onnx.proto is not the one this build unpacks with: %s", why);
	checked = true;
}

static Onnx__ModelProto *
unpack(const uint8 *data, size_t len)
{
	ProtobufCAllocator allocator = {onnx_alloc, onnx_free, NULL};
	Onnx__ModelProto *model;
	size_t		where = 0;
	PgdlOnnxScan scan;

	if (len == 0)
		onnx_model_error(ERRCODE_INVALID_PARAMETER_VALUE, "The bytes are empty.");
	check_depth_table();
	/* protobuf-c recurses once per level with no bound: the scan bounds it first */
	scan = pgdl_onnx_scan(data, len, &where);
	if (scan == PGDL_ONNX_SCAN_TOO_DEEP)
		onnx_model_error(ERRCODE_INVALID_PARAMETER_VALUE, "Its protobuf messages nest more than %d deep (at byte %zu).",
					PGDL_ONNX_MAX_DEPTH, where);
	if (scan == PGDL_ONNX_SCAN_MERGES)
		onnx_model_error(ERRCODE_INVALID_PARAMETER_VALUE,
					"A protobuf message holds one of its fields of a single message more than %d times (at byte %zu).",
					PGDL_ONNX_MAX_MERGES, where);
	/* wire data the scan cannot walk protobuf-c refuses too: the same words either way */
	model = scan == PGDL_ONNX_SCAN_OK ? onnx__model_proto__unpack(&allocator, len, data) : NULL;
	if (model == NULL)
		onnx_model_error(ERRCODE_INVALID_PARAMETER_VALUE, "The bytes are not an ONNX ModelProto (protobuf could not read them).");
	if (model->graph == NULL)
		onnx_model_error(ERRCODE_INVALID_PARAMETER_VALUE, "The model has no graph.");
	fill_strings(model);
	return model;
}

/* ---- attributes ---- */

const Onnx__AttributeProto *
onnx_attr(Reader *r, const char *name, Onnx__AttributeProto__AttributeType type)
{
	for (size_t i = 0; i < r->node->n_attribute; i++)
	{
		const Onnx__AttributeProto *a = r->node->attribute[i];

		if (a->name == NULL || strcmp(a->name, name) != 0)
			continue;
		if (a->has_type && a->type != type)
			MALFORMED(r, "Attribute \"%s\" has type %d, not %d.", name, (int) a->type, (int) type);
		return a;
	}
	return NULL;
}

int64
onnx_attr_int(Reader *r, const char *name, int64 dflt)
{
	const Onnx__AttributeProto *a = onnx_attr(r, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);

	return a ? a->i : dflt;
}

float
onnx_attr_float(Reader *r, const char *name, float dflt)
{
	const Onnx__AttributeProto *a = onnx_attr(r, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);

	return a ? a->f : dflt;
}

/* The ints of attribute `name`, all equal to one value: that value, or dflt when absent. */
int64
onnx_attr_ints_same(Reader *r, const char *name, int count, int64 dflt)
{
	const Onnx__AttributeProto *a = onnx_attr(r, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);

	if (a == NULL || a->n_ints == 0)
		return dflt;
	if (a->n_ints != (size_t) count)
		UNSUPPORTED(r, "Attribute \"%s\" has %zu values; pgdl takes %d here.", name, a->n_ints, count);
	for (size_t i = 1; i < a->n_ints; i++)
		if (a->ints[i] != a->ints[0])
			UNSUPPORTED(r, "Attribute \"%s\" differs between dimensions; pgdl's windows are square and symmetric.", name);
	return a->ints[0];
}

bool
onnx_attr_string_is(Reader *r, const char *name, const char *value)
{
	const Onnx__AttributeProto *a = onnx_attr(r, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);

	return a != NULL && a->has_s && a->s.len == strlen(value) && memcmp(a->s.data, value, a->s.len) == 0;
}

/*
 * SAME_*'s padding of a side of `in` values: ceil(in / stride) outputs, the
 * pads they need split in two, the odd one at the end (UPPER) or the start
 * (LOWER); -1 where they are odd.
 */
static int64
same_pad(int64 in, int64 kernel, int64 stride)
{
	int64		out = (in + stride - 1) / stride;
	int64		total = Max((out - 1) * stride + kernel - in, 0);

	return total % 2 == 0 ? total / 2 : -1;
}

/* auto_pad: NOTSET or VALID are explicit pads; SAME_* only where pgdl's symmetric padding equals it. */
int64
onnx_auto_pad(Reader *r, int64 kernel, int64 stride, int64 pads)
{
	const Onnx__AttributeProto *a = onnx_attr(r, "auto_pad", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
	int64		h,
				w;

	if (a == NULL || !a->has_s || onnx_attr_string_is(r, "auto_pad", "NOTSET"))
		return pads;
	if (onnx_attr_string_is(r, "auto_pad", "VALID"))
		return 0;
	if (!onnx_attr_string_is(r, "auto_pad", "SAME_UPPER") && !onnx_attr_string_is(r, "auto_pad", "SAME_LOWER"))
		UNSUPPORTED(r, "Its \"auto_pad\" is not NOTSET, VALID, SAME_UPPER or SAME_LOWER.");
	if (stride < 1 || kernel < 1 || kernel > NN_MAX_KERNEL || stride > NN_MAX_KERNEL)
		UNSUPPORTED(r, "Its window (%lld) or stride (%lld) is not between 1 and %d.", (long long) kernel,
					(long long) stride, NN_MAX_KERNEL);
	h = same_pad(r->shape.h, kernel, stride);
	w = same_pad(r->shape.w, kernel, stride);
	if (h < 0 || h != w)
		UNSUPPORTED(r, "Its \"auto_pad\" pads asymmetrically here (an odd number of pads, or other pads across "
					"than down); pgdl pads every side alike.");
	return h;
}

/* ---- tensors ---- */

/* The number of elements dims say, checked against `limit`. */
static int64
onnx_tensor_count(Reader *r, const Onnx__TensorProto *t, int64 limit)
{
	int64		n = 1;

	for (size_t d = 0; d < t->n_dims; d++)
	{
		if (t->dims[d] < 0 || (t->dims[d] > 0 && n > limit / t->dims[d]))
			UNSUPPORTED(r, "Tensor \"%s\" has dims that are negative or hold more than " INT64_FORMAT " values.",
						pgdl_echo(t->name), limit);
		n *= t->dims[d];
	}
	return n;
}

void
onnx_tensor_check_stored(Reader *r, const Onnx__TensorProto *t, int type, const char *type_name)
{
	if (!t->has_data_type || t->data_type != type)
		UNSUPPORTED(r, "Tensor \"%s\" is of data type %d; pgdl takes %s here.",
					pgdl_echo(t->name), t->has_data_type ? t->data_type : 0, type_name);
	if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
		UNSUPPORTED(r, "Tensor \"%s\" is stored outside the model; pgdl reads one file.", pgdl_echo(t->name));
	if (t->segment != NULL)
		UNSUPPORTED(r, "Tensor \"%s\" is a segment of a larger tensor.", pgdl_echo(t->name));
}

/* A FLOAT tensor's values, all finite, in a new array. */
float *
onnx_tensor_floats(Reader *r, const Onnx__TensorProto *t, int64 *count)
{
	int64		n;
	float	   *v;

	onnx_tensor_check_stored(r, t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "FLOAT (float32)");
	n = onnx_tensor_count(r, t, NN_MAX_PARAMS);
	if (t->has_raw_data ? t->raw_data.len != (size_t) n * sizeof(float) : t->n_float_data != (size_t) n)
		onnx_node_error(r, ERRCODE_DATA_CORRUPTED, "Tensor \"%s\" holds %zu bytes of data; its dims say " INT64_FORMAT " floats.",
				   pgdl_echo(t->name), t->has_raw_data ? t->raw_data.len : t->n_float_data * sizeof(float), n);
	v = palloc_extended(Max(n, 1) * sizeof(float), MCXT_ALLOC_HUGE);
	for (int64 i = 0; i < n; i++)
	{
		if (t->has_raw_data)
		{
			const uint8 *b = t->raw_data.data + i * 4;
			uint32		bits = b[0] | (uint32) b[1] << 8 | (uint32) b[2] << 16 | (uint32) b[3] << 24;

			memcpy(&v[i], &bits, sizeof(float));	/* raw_data is little-endian */
		}
		else
			v[i] = t->float_data[i];
		if (!isfinite(v[i]))
			onnx_node_error(r, ERRCODE_INVALID_PARAMETER_VALUE, "Tensor \"%s\" holds %s at element " INT64_FORMAT ".",
					   pgdl_echo(t->name), isnan(v[i]) ? "NaN" : "an infinity", i);
	}
	*count = n;
	return v;
}

/* An INT64 tensor's values (Reshape's shape), at most `limit` of them. */
int64 *
onnx_tensor_int64s(Reader *r, const Onnx__TensorProto *t, int64 limit, int64 *count)
{
	int64		n;
	int64	   *v;

	onnx_tensor_check_stored(r, t, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "INT64");
	n = onnx_tensor_count(r, t, limit);
	if (t->has_raw_data ? t->raw_data.len != (size_t) n * 8 : t->n_int64_data != (size_t) n)
		onnx_node_error(r, ERRCODE_DATA_CORRUPTED, "Tensor \"%s\" holds a number of values its dims do not say.",
				   pgdl_echo(t->name));
	v = palloc(Max(n, 1) * sizeof(int64));
	for (int64 i = 0; i < n; i++)
	{
		uint64		bits = 0;

		if (!t->has_raw_data)
			v[i] = t->int64_data[i];
		else
		{
			for (int b = 7; b >= 0; b--)
				bits = bits << 8 | t->raw_data.data[i * 8 + b];
			v[i] = (int64) bits;
		}
	}
	*count = n;
	return v;
}

/* The constant (initializer or Constant node output) called name, or NULL. */
const Onnx__TensorProto *
onnx_find_const(Reader *r, const char *name)
{
	for (size_t i = 0; i < r->g->n_initializer; i++)
		if (r->g->initializer[i]->name && strcmp(r->g->initializer[i]->name, name) == 0)
			return r->g->initializer[i];
	for (int i = 0; i < r->n_consts; i++)
		if (strcmp(r->const_name[i], name) == 0)
			return r->const_value[i];
	return NULL;
}

/* Input i of the node, a constant; NULL when absent and optional. */
const Onnx__TensorProto *
onnx_const_input(Reader *r, size_t i, bool optional)
{
	const Onnx__TensorProto *t;

	if (i >= r->node->n_input || r->node->input[i][0] == '\0')
	{
		if (optional)
			return NULL;
		MALFORMED(r, "Input %zu is missing.", i);
	}
	t = onnx_find_const(r, r->node->input[i]);
	if (t == NULL)
		UNSUPPORTED(r, "Input %zu (\"%s\") is not a constant: pgdl takes graphs that are one chain of nodes, "
					"whose other inputs are weights.", i, pgdl_echo(r->node->input[i]));
	return t;
}

/* A constant's values, `expected` floats, per channel ([n] or [1, n]) or one to broadcast. */
float *
onnx_const_vector(Reader *r, size_t i, int64 expected, bool broadcast)
{
	const Onnx__TensorProto *t = onnx_const_input(r, i, false);
	int64		n;
	float	   *v = onnx_tensor_floats(r, t, &n);
	float	   *out;

	if (n == expected && (t->n_dims == 1 || (t->n_dims == 2 && t->dims[0] == 1)))
		return v;
	if (!broadcast || n != 1)
		UNSUPPORTED(r, "Input %zu (\"%s\") has " INT64_FORMAT " values in %zu dimensions; pgdl needs a vector of " INT64_FORMAT ".",
					i, pgdl_echo(t->name), n, t->n_dims, expected);
	out = palloc(sizeof(float) * expected);
	for (int64 j = 0; j < expected; j++)
		out[j] = v[0];
	return out;
}

/* A scalar FLOAT constant (a Mul's factor, a Dropout's ratio). */
float
onnx_const_scalar(Reader *r, size_t i)
{
	int64		n;
	float	   *v = onnx_tensor_floats(r, onnx_const_input(r, i, false), &n);

	if (n != 1)
		UNSUPPORTED(r, "Input %zu holds " INT64_FORMAT " values; pgdl takes a scalar.", i, n);
	return v[0];
}

/* ---- the chain ---- */

static void
read_constant(Reader *r)
{
	const Onnx__AttributeProto *a = onnx_attr(r, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);

	if (a == NULL || a->t == NULL || r->node->n_output != 1)
		UNSUPPORTED(r, "pgdl takes Constant nodes with a \"value\" tensor and one output.");
	r->const_name[r->n_consts] = r->node->output[0];
	r->const_value[r->n_consts] = a->t;
	r->n_consts++;
}

/* An Identity of a constant (torch's export writes one per weight it shares) is that constant. */
static void
read_identity_const(Reader *r, const Onnx__TensorProto *t)
{
	if (r->node->n_output != 1)
		UNSUPPORTED(r, "It has %zu outputs; an Identity has one.", r->node->n_output);
	r->const_name[r->n_consts] = r->node->output[0];
	r->const_value[r->n_consts] = t;
	r->n_consts++;
}

/* A node has an input and an output, does not read its own output, and comes before any trailing Softmax. */
static void
check_node(Reader *r, PgdlOnnxOp op)
{
	const Onnx__NodeProto *n = r->node;

	bool		any_output = false;

	for (size_t o = 0; o < n->n_output; o++)
		any_output |= n->output[o][0] != '\0';
	if (n->n_input < 1 || !any_output)
		MALFORMED(r, "It has no input or no output.");
	/* a GRU may leave Y out and give only its last state Y_h */
	if (n->output[0][0] == '\0' && op != PGDL_ONNX_GRU)
		UNSUPPORTED(r, "It leaves its first output out; pgdl reads a node's first output.");
	if (r->loss != 0)
		UNSUPPORTED(r, "It follows a Softmax or LogSoftmax, which pgdl takes only as the last node.");
	for (size_t i = 0; i < n->n_input; i++)
		for (size_t o = 0; o < n->n_output; o++)
			if (n->input[i][0] != '\0' && strcmp(n->input[i], n->output[o]) == 0)
				MALFORMED(r, "It takes its own output as input.");
}

static void
read_node(Reader *r)
{
	const Onnx__NodeProto *n = r->node;
	PgdlOnnxOp	op = pgdl_onnx_op_from_name(onnx_checked_text(n->op_type, "node's op_type"));

	onnx_checked_text(n->name, "node's name");
	for (size_t i = 0; i < n->n_input; i++)
		onnx_checked_text(n->input[i], "node's input name");
	for (size_t i = 0; i < n->n_output; i++)
		onnx_checked_text(n->output[i], "node's output name");
	if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
		UNSUPPORTED(r, "Its domain is \"%s\"; pgdl reads ONNX's own operators.", pgdl_echo(n->domain));
	if (op == PGDL_ONNX_CONSTANT)
		return read_constant(r);
	if (op == PGDL_ONNX_IDENTITY && n->n_input == 1 && onnx_find_const(r, n->input[0]) != NULL)
		return read_identity_const(r, onnx_find_const(r, n->input[0]));
	check_node(r, op);
	onnx_take_input(r, op);
	onnx_read_op(r, op);
	onnx_put_output(r);
}

/* ---- the graph's ends ---- */

static bool
is_initializer(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0)
			return true;
	return false;
}

/* A rank-3 input [batch, steps, features] is pgdl's flat input of steps * features, row after row. */
static void
read_input_steps(Reader *r, const char *name)
{
	int64		n = (int64) r->spec->input[0] * r->spec->input[1];

	if (n > NN_MAX_DIM)
		onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph's input \"%s\" is [batch, %d, %d]; pgdl holds it flat, "
					"and takes at most %d values per example.", pgdl_echo(name), r->spec->input[0],
					r->spec->input[1], NN_MAX_DIM);
	r->n_held = 2;
	r->held[0] = r->spec->input[0];
	r->held[1] = r->spec->input[1];
	r->spec->input_ndim = 1;
	r->spec->input[0] = (int32) n;
	r->spec->input[1] = 0;
}

/* The one real input: float32, [batch], [batch, F], [batch, L, F] or [batch, C, H, W], all but batch fixed. */
static void
read_input(Reader *r)
{
	const Onnx__ValueInfoProto *in = NULL;
	const Onnx__TypeProto__Tensor *tt;
	int			n = 0;

	for (size_t i = 0; i < r->g->n_input; i++)
		if (!is_initializer(r->g, onnx_checked_text(r->g->input[i]->name, "graph's input name")))
		{
			in = r->g->input[i];
			n++;
		}
	if (n != 1)
		onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph has %d inputs that are not initializers; pgdl takes one.", n);
	if (in->type == NULL || in->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
		(tt = in->type->tensor_type) == NULL ||
		!(tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
		  (tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && tt->shape && tt->shape->n_dim == 2)))
		onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph's input \"%s\" is not a float32 tensor, nor int64 "
						 "ids [batch, steps].", pgdl_echo(in->name));
	if (tt->shape == NULL || tt->shape->n_dim < 1 || tt->shape->n_dim > 4 ||
		(tt->shape->n_dim == 1 && tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT))
		onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph's input \"%s\" is not of rank 1 [batch], 2 [batch, "
					"features], 3 [batch, steps, features] or 4 [batch, channels, height, width].", pgdl_echo(in->name));
	for (size_t d = 1; d < tt->shape->n_dim; d++)
	{
		const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];

		if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
			dim->dim_value < 1 || dim->dim_value > NN_MAX_DIM)
			onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "Dimension %zu of the graph's input \"%s\" is not fixed "
						"between 1 and %d; pgdl takes a dynamic batch dimension only.", d, pgdl_echo(in->name), NN_MAX_DIM);
		r->spec->input[d - 1] = (int32) dim->dim_value;
	}
	if (tt->shape->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
		r->batch = tt->shape->dim[0]->dim_value;
	r->spec->input_ndim = Max(tt->shape->n_dim - 1, 1);
	/* a rank-1 input [batch]: one feature per example, as pgdl.predict takes it */
	r->rank1 = tt->shape->n_dim == 1;
	if (r->rank1)
		r->spec->input[0] = 1;
	if (tt->shape->n_dim == 3)
		read_input_steps(r, in->name);
	r->shape.ndim = r->spec->input_ndim;
	r->shape.c = r->spec->input[0];
	r->shape.h = r->shape.ndim == 3 ? r->spec->input[1] : 1;
	r->shape.w = r->shape.ndim == 3 ? r->spec->input[2] : 1;
	/* ids come in as pgdl's float input, whole numbers, as pgdl.predict takes an embedding's */
	r->values[0].kind = tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? ONNX_VALUE_IDS : ONNX_VALUE_TENSOR;
	r->values[0].name = in->name;
	r->values[0].src = -1;
	r->values[0].shape = r->shape;
	r->values[0].n_held = r->n_held;
	r->values[0].rank1 = r->rank1;
	memcpy(r->values[0].held, r->held, sizeof(r->held));
	r->n_values = 1;
}

/* The loss: a trailing Softmax's, a trailing Sigmoid's (dropped), the argument's or the default. */
static void
settle_loss(Reader *r)
{
	NnSpec	   *spec = r->spec;

	r->loss_from = r->args->loss != 0 ? "argument" : r->meta_loss != 0 ? "metadata" :
		r->args->dataset ? "dataset" : "default";
	if (r->loss != 0)
	{
		spec->loss = r->loss;
		r->loss_from = "softmax";
	}
	else if (r->sigmoid_node >= 0 && (r->args->loss == 0 || r->args->loss == NN_LOSS_BCE))
	{
		spec->n_layers--;
		spec->loss = NN_LOSS_BCE;
		r->loss_from = "sigmoid";
	}
	else if (r->group_softmax && r->args->loss == 0 && r->meta_loss == 0)
	{
		/* its probabilities are the outputs: no class to pick, nothing to apply over them */
		spec->loss = NN_LOSS_MSE;
		r->loss_from = "softmax";
		ereport(NOTICE,
				(errmsg("the imported model's loss is mse"),
				 errdetail("The graph ends in a Softmax or LogSoftmax over groups of each example's values (a softmax "
						   "layer), not over all of its outputs: pgdl.predict answers the graph's outputs.")));
	}
	else
		spec->loss = r->args->loss != 0 ? r->args->loss : r->meta_loss != 0 ? r->meta_loss : r->args->default_loss;
	if (r->args->loss == 0 && r->loss == 0 && strcmp(r->loss_from, "sigmoid") != 0 &&
		strcmp(r->loss_from, "softmax") != 0)
		ereport(NOTICE,
				(errmsg("the imported model's loss is %s", nn_loss_name(spec->loss)),
				 errdetail("The graph ends in no Softmax, LogSoftmax or Sigmoid, so the %s chose it: pgdl.predict "
						   "answers %s.", r->meta_loss != 0 ? "file's metadata \"" PGDL_ONNX_META_LOSS "\"" :
						   r->args->dataset ? "dataset's task" : "default",
						   spec->loss == NN_LOSS_CROSS_ENTROPY ? "the softmax of the graph's outputs" :
						   "the graph's outputs"),
				 errhint("Pass loss => 'mse' for the graph's outputs as they are, loss => 'cross_entropy' for "
						 "their softmax.")));
	/* huber's delta: PyTorch's default (an ONNX graph carries no loss) */
	spec->delta = spec->loss == NN_LOSS_HUBER ? 1.0f : 0.0f;
	/*
	 * A graph of only a Softmax, a Sigmoid or an Identity: pgdl needs a layer,
	 * and flatten is one that leaves [batch, F] as it is.
	 */
	if (spec->n_layers == 0)
	{
		nn_layer_defaults(&spec->layers[0], NN_FLATTEN);
		spec->n_layers = 1;
	}
}

/* The weights read into the engine's model of the spec. */
static NnModel *
build_model(Reader *r)
{
	NnError		err;
	NnModel    *m;

	if (!nn_spec_validate(r->spec, NULL, &err))
		pgdl_report_nn_error("model imported from ONNX", &err);
	pgdl_check_model_memory(r->spec, NULL, 0, "the model");
	m = nn_model_create(r->spec, 42, &err);
	if (m == NULL)
		pgdl_report_nn_error("model imported from ONNX", &err);
	pgdl_model_free_with(m, CurrentMemoryContext);
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		PgdlTensor	t[PGDL_LAYER_MAX_TENSORS];
		int			n = pgdl_layer_tensors(m, i, t);

		for (int j = 0; j < n; j++)
		{
			if (r->tensor[i][j] == NULL || r->length[i][j] != pgdl_tensor_size(&t[j]))
				elog(ERROR, "ONNX import: layer %d tensor %s has " INT64_FORMAT " values, not " INT64_FORMAT,
					 i, t[j].name, r->length[i][j], pgdl_tensor_size(&t[j]));
			memcpy((t[j].buffer ? m->buffers : m->params) + t[j].offset, r->tensor[i][j],
				   sizeof(float) * r->length[i][j]);
		}
	}
	return m;
}

/*
 * Below opset 7, operators were defined otherwise (Add's broadcast attribute,
 * BatchNormalization's spatial, Dropout's is_test): pgdl reads such a graph
 * only when all its operators are ones whose definition then is the one pgdl
 * reads today (Relu's and the like's consumed_inputs was a memory hint).
 */
static bool
early_opset_graph(const Onnx__GraphProto *g)
{
	static const char *const same[] = {"GlobalAveragePool", "Flatten", "Identity", "Relu", "LeakyRelu",
	"Sigmoid", "Tanh"};

	for (size_t i = 0; i < g->n_node; i++)
	{
		bool		found = false;

		for (size_t k = 0; k < lengthof(same) && g->node[i]->op_type; k++)
			found |= strcmp(g->node[i]->op_type, same[k]) == 0;
		if (!found)
			return false;
	}
	return true;
}

static int64
default_opset(const Onnx__ModelProto *model)
{
	int64		opset = 0;

	for (size_t i = 0; i < model->n_opset_import; i++)
	{
		const char *domain = model->opset_import[i]->domain;

		if (domain == NULL || domain[0] == '\0' || strcmp(domain, "ai.onnx") == 0)
			opset = model->opset_import[i]->version;
	}
	if (opset >= 1 && opset < ONNX_MIN_OPSET && early_opset_graph(model->graph))
		return opset;
	if (opset < ONNX_MIN_OPSET || opset > ONNX_MAX_OPSET)
		onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "Its opset is " INT64_FORMAT "; pgdl reads opsets %d to %d "
						 "(below %d, graphs of GlobalAveragePool, Flatten, Identity, Relu, LeakyRelu, Sigmoid and "
						 "Tanh only, whose definitions have not changed since).",
						 opset, ONNX_MIN_OPSET, ONNX_MAX_OPSET, ONNX_MIN_OPSET);
	return opset;
}

static const char *
metadata(const Onnx__ModelProto *model, const char *key)
{
	for (size_t i = 0; i < model->n_metadata_props; i++)
		if (model->metadata_props[i]->key && strcmp(model->metadata_props[i]->key, key) == 0)
			return onnx_checked_text(model->metadata_props[i]->value, "model's metadata");
	return NULL;
}

/* The loss pgdl's export records, a JSON string ("mse"); 0 when absent or no loss's name. */
static NnLoss
metadata_loss(const Onnx__ModelProto *model)
{
	const char *v = metadata(model, PGDL_ONNX_META_LOSS);
	size_t		n = v ? strlen(v) : 0;
	NnLoss		loss;

	if (n < 3 || v[0] != '"' || v[n - 1] != '"')
		return 0;
	loss = nn_loss_from_name(pnstrdup(v + 1, n - 2));
	return loss > 0 ? loss : 0;
}

/* Every layer's output reaches the graph's output: pgdl computes no branch that ends nowhere. */
static void
check_all_used(Reader *r, const OnnxValue *out)
{
	bool		used[NN_MAX_LAYERS + 1] = {0};

	if (out->src != r->spec->n_layers - 1)
		onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph's output \"%s\" is not the output of the last "
						 "layer pgdl reads; pgdl's model ends in its last layer.", pgdl_echo(out->name));
	for (int i = 0; i < r->spec->n_layers; i++)
		for (int k = 0; k < nn_layer_n_inputs(r->spec, i); k++)
			used[nn_layer_src(r->spec, i, k) + 1] = true;
	for (int i = 0; i < r->spec->n_layers - 1; i++)
		if (!used[i + 1])
			onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The output of layer %d (%s) does not reach the "
							 "graph's output; pgdl computes no branch that ends elsewhere.", i,
							 nn_layer_type_name(r->spec->layers[i].type));
}

static void
read_graph(Reader *r)
{
	const Onnx__GraphProto *g = r->g;
	const OnnxValue *last;

	if (g->n_node > ONNX_MAX_NODES || g->n_initializer > ONNX_MAX_TENSORS)
		onnx_model_error(ERRCODE_PROGRAM_LIMIT_EXCEEDED, "The graph has %zu nodes and %zu initializers; pgdl reads at most %d of each.",
					g->n_node, g->n_initializer, ONNX_MAX_NODES);
	if (g->n_sparse_initializer > 0)
		onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph has sparse initializers.");
	if (g->n_output != 1)
		onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph has %zu outputs; pgdl takes one.", g->n_output);
	/* a node writes one value, a GRU two */
	r->values = palloc0(sizeof(OnnxValue) * (g->n_node * 2 + 1));
	read_input(r);
	r->const_name = palloc(sizeof(char *) * Max(g->n_node, 1));
	r->const_value = palloc(sizeof(Onnx__TensorProto *) * Max(g->n_node, 1));
	r->consumed = palloc0(sizeof(bool) * Max(g->n_node, 1));
	/* Constants first: a pattern (onnx_patterns.c) reads those of nodes ahead of the one it starts at */
	for (size_t i = 0; i < g->n_node; i++)
		if (g->node[i]->op_type && strcmp(g->node[i]->op_type, "Constant") == 0)
		{
			r->index = (int) i;
			r->node = g->node[i];
			read_node(r);
			r->consumed[i] = true;
		}
	for (size_t i = 0; i < g->n_node; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (r->consumed[i])
			continue;
		r->index = (int) i;
		r->node = g->node[i];
		read_node(r);
	}
	last = &r->values[r->n_values - 1];
	if (last->kind != ONNX_VALUE_TENSOR)
		onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph's output \"%s\" is not a layer's output (ids, a "
						 "shape, zeros or a GRU's output before its Squeeze); pgdl's model ends in a layer.",
						 pgdl_echo(last->name));
	if (strcmp(onnx_checked_text(g->output[0]->name, "graph's output name"), last->name) != 0)
		onnx_model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph's output \"%s\" is not what its last node writes "
						 "(\"%s\"); pgdl's model ends in its last layer.", pgdl_echo(g->output[0]->name),
						 pgdl_echo(last->name));
	check_all_used(r, last);
}

void
pgdl_onnx_read(const uint8 *data, size_t len, const PgdlOnnxArgs *args, PgdlOnnxModel *out)
{
	Onnx__ModelProto *model = unpack(data, len);
	Reader	   *r = palloc0(sizeof(Reader));

	onnx_checked_text(model->producer_name, "producer name");
	onnx_checked_text(model->producer_version, "producer version");
	onnx_checked_text(model->graph->name, "graph's name");
	r->g = model->graph;
	r->opset = default_opset(model);
	r->args = args;
	r->spec = palloc0(sizeof(NnSpec));
	r->sigmoid_node = -1;
	r->meta_normalization = metadata(model, PGDL_ONNX_META_NORMALIZATION) != NULL;
	r->meta_target = metadata(model, PGDL_ONNX_META_TARGET_NORMALIZATION) != NULL;
	r->meta_loss = metadata_loss(model);
	read_graph(r);
	settle_loss(r);
	out->model = build_model(r);
	out->proto = model;
	out->opset = r->opset;
	out->classes = metadata(model, PGDL_ONNX_META_CLASSES);
	out->loss_from = r->loss_from;
}

/* ---- pgdl.import_onnx ---- */

/* The class labels the model was exported with must be the dataset's, in order. */
static void
check_classes(const char *json, const PgdlDataset *ds)
{
	JsonLexContext *lex = makeJsonLexContextCstringLen((char *) json, strlen(json), GetDatabaseEncoding(), true);
	Jsonb	   *jb;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = 0;
	bool		same = true;

	if (pg_parse_json(lex, &nullSemAction) != JSON_SUCCESS)
		onnx_model_error(ERRCODE_DATA_CORRUPTED, "Its metadata \"%s\" is not JSON.", PGDL_ONNX_META_CLASSES);
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
	if (!JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb))
		onnx_model_error(ERRCODE_DATA_CORRUPTED, "Its metadata \"%s\" is not an array.", PGDL_ONNX_META_CLASSES);
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		same &= n < ds->n_classes && v.type == jbvString && strlen(ds->classes[n]) == v.val.string.len &&
			memcmp(ds->classes[n], v.val.string.val, v.val.string.len) == 0;
		n++;
	}
	if (!same || n != ds->n_classes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the ONNX model's class labels and the dataset's disagree"),
				 errdetail("The model was exported with %d classes (metadata \"%s\"), the dataset has %d, "
						   "or their labels or order differ.", n, PGDL_ONNX_META_CLASSES, ds->n_classes)));
}

static const char *
sha256_hex(const uint8 *data, size_t len)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char	   *hex = palloc(PG_SHA256_DIGEST_LENGTH * 2 + 1);

	if (pg_cryptohash_init(ctx) < 0 || pg_cryptohash_update(ctx, data, len) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute the SHA-256 of the ONNX model: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
	hex_encode((const char *) digest, sizeof(digest), hex);
	hex[PG_SHA256_DIGEST_LENGTH * 2] = '\0';
	return hex;
}

static Jsonb *
origin_jsonb(const PgdlOnnxModel *in, const uint8 *data, size_t len)
{
	JsonbParseState *state = NULL;
	const Onnx__ModelProto *p = in->proto;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_string(&state, "format", "onnx");
	pgdl_jsonb_put_string(&state, "producer_name", p->producer_name ? p->producer_name : "");
	pgdl_jsonb_put_string(&state, "producer_version", p->producer_version ? p->producer_version : "");
	pgdl_jsonb_put_int(&state, "ir_version", p->has_ir_version ? p->ir_version : 0);
	pgdl_jsonb_put_int(&state, "opset", in->opset);
	pgdl_jsonb_put_string(&state, "graph", p->graph->name ? p->graph->name : "");
	pgdl_jsonb_put_string(&state, "sha256", sha256_hex(data, len));
	pgdl_jsonb_put_string(&state, "loss_from", in->loss_from);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/* The new row, inserted as the caller (row-level security applies); its id. */
static int64
insert_model(const char *name, const NnModel *m, int64 dataset, Jsonb *origin)
{
	Oid			types[5] = {TEXTOID, JSONBOID, INT8OID, BYTEAOID, JSONBOID};
	Datum		values[5];
	char		nulls[5] = {name ? ' ' : 'n', ' ', dataset ? ' ' : 'n', ' ', ' '};
	bool		isnull;
	int64		id;

	values[0] = name ? CStringGetTextDatum(name) : (Datum) 0;
	values[1] = JsonbPGetDatum(pgdl_spec_to_jsonb(&m->spec));
	values[2] = Int64GetDatum(dataset);
	values[3] = PointerGetDatum(pgdl_model_serialize(m));
	values[4] = JsonbPGetDatum(origin);
	SPI_connect();
	if (SPI_execute_with_args("INSERT INTO pgdl.models (name, spec, dataset, weights, origin) "
							  "VALUES ($1, $2, $3, $4, $5) RETURNING id",
							  5, types, values, nulls, false, 0) != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
		elog(ERROR, "pgdl: could not insert the imported model");
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return id;
}

/* The loss argument, and the dataset's (a private copy: queries below may retire the cached one). */
static void
read_args(FunctionCallInfo fcinfo, PgdlOnnxArgs *args)
{
	memset(args, 0, sizeof(*args));
	args->default_loss = NN_LOSS_CROSS_ENTROPY;
	if (!PG_ARGISNULL(3))
	{
		char	   *loss = text_to_cstring(PG_GETARG_TEXT_PP(3));

		args->loss = nn_loss_from_name(loss);
		if (args->loss == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown loss \"%s\"", pgdl_echo(loss)),
					 errhint("Use cross_entropy, mse, binary_cross_entropy or huber.")));
	}
	if (!PG_ARGISNULL(2))
	{
		args->dataset = pgdl_dataset_copy(pgdl_dataset_by_packed(PG_GETARG_OID(2)));
		args->default_loss = args->dataset->classification ? NN_LOSS_CROSS_ENTROPY : NN_LOSS_MSE;
	}
}

PG_FUNCTION_INFO_V1(pgdl_import_onnx);
Datum
pgdl_import_onnx(PG_FUNCTION_ARGS)
{
	const char *name = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	PgdlOnnxArgs args;
	PgdlOnnxModel in;
	bytea	   *onnx;
	MemoryContext cxt;
	MemoryContext old;
	int64		id;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("onnx must not be NULL"),
				 errhint("Pass the model's bytes, e.g. pg_read_binary_file('model.onnx').")));
	pgdl_engine_prepare();
	if (name != NULL)
		pgdl_run_check_model_name(name);
	read_args(fcinfo, &args);
	onnx = PG_GETARG_BYTEA_PP(1);

	cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl import_onnx", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	pgdl_onnx_read((const uint8 *) VARDATA_ANY(onnx), VARSIZE_ANY_EXHDR(onnx), &args, &in);
	pgdl_check_model_fits(&in.model->spec, args.dataset);
	if (args.dataset && in.classes)
		check_classes(in.classes, args.dataset);
	id = insert_model(name, in.model, args.dataset ? args.dataset->id : 0,
					  origin_jsonb(&in, (const uint8 *) VARDATA_ANY(onnx), VARSIZE_ANY_EXHDR(onnx)));
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	PG_RETURN_INT64(id);
}
