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

#define ONNX_MIN_OPSET		7
#define ONNX_MAX_OPSET		21		/* newer opsets may change what an op means */
#define ONNX_MAX_NODES		4096
#define ONNX_MAX_TENSORS	4096
#define ONNX_MAX_HELD		7		/* dims of a value held flat, the batch apart */

typedef struct Reader
{
	const Onnx__GraphProto *g;
	int64		opset;
	const PgdlOnnxArgs *args;
	NnSpec	   *spec;
	/* each layer's weights, in pgdl_layer_tensors order, and their lengths */
	const float *tensor[NN_MAX_LAYERS][PGDL_LAYER_MAX_TENSORS];
	int64		length[NN_MAX_LAYERS][PGDL_LAYER_MAX_TENSORS];
	/* Constant nodes read so far: their output names and values */
	const char **const_name;
	const Onnx__TensorProto **const_value;
	int			n_consts;
	int			index;			/* of the node being read, for errors */
	const Onnx__NodeProto *node;
	const char *value;			/* the chain's value: the input, then each node's output */
	NnShape		shape;			/* its shape, one example */
	/*
	 * A value pgdl has no shape for (a rank-3 input [batch, steps, features],
	 * a Reshape's output) is held flat, in ONNX's order: its dims but the
	 * batch's, until a Flatten; 0 dims: the value is as shape says.
	 */
	int			n_held;
	int64		held[ONNX_MAX_HELD];
	int64		batch;			/* the input's fixed batch size, or 0 when symbolic */
	bool		open_matmul;	/* the last layer is a MatMul's: an Add may give its bias */
	int			sigmoid_node;	/* node index of the last layer when it is a Sigmoid, else -1 */
	int			norm_state;		/* leading normalization: 0 may come, 1 after Sub, 2 past */
	bool		meta_normalization;
	bool		meta_target;	/* PGDL_ONNX_META_TARGET_NORMALIZATION: the last nodes undo it */
	int			target_state;	/* 0 before, 1 after its Mul, 2 after its Add (the last node) */
	NnLoss		loss;			/* set by a trailing Softmax or LogSoftmax */
	const char *loss_from;		/* PgdlOnnxModel's */
	NnLoss		meta_loss;		/* PGDL_ONNX_META_LOSS's, when it names a loss; else 0 */
} Reader;

/* ---- errors ---- */

static void node_error(Reader *r, int code, const char *fmt,...) pg_attribute_printf(3, 4) pg_attribute_noreturn();
static void model_error(int code, const char *fmt,...) pg_attribute_printf(2, 3) pg_attribute_noreturn();

static void
node_error(Reader *r, int code, const char *fmt,...)
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

static void
model_error(int code, const char *fmt,...)
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

#define UNSUPPORTED(r, ...) node_error((r), ERRCODE_FEATURE_NOT_SUPPORTED, __VA_ARGS__)
#define MALFORMED(r, ...) node_error((r), ERRCODE_INVALID_PARAMETER_VALUE, __VA_ARGS__)

/* Text from the file goes into messages and jsonb: it must be valid in the database's encoding. */
static const char *
checked_text(const char *s, const char *what)
{
	if (s == NULL)
		return "";
	if (!pg_verifymbstr(s, strlen(s), true))
		model_error(ERRCODE_DATA_CORRUPTED, "The %s is not valid text in the database's encoding.", what);
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
		model_error(ERRCODE_INVALID_PARAMETER_VALUE, "The bytes are empty.");
	check_depth_table();
	/* protobuf-c recurses once per level with no bound: the scan bounds it first */
	scan = pgdl_onnx_scan(data, len, &where);
	if (scan == PGDL_ONNX_SCAN_TOO_DEEP)
		model_error(ERRCODE_INVALID_PARAMETER_VALUE, "Its protobuf messages nest more than %d deep (at byte %zu).",
					PGDL_ONNX_MAX_DEPTH, where);
	if (scan == PGDL_ONNX_SCAN_MERGES)
		model_error(ERRCODE_INVALID_PARAMETER_VALUE,
					"A protobuf message holds one of its fields of a single message more than %d times (at byte %zu).",
					PGDL_ONNX_MAX_MERGES, where);
	/* wire data the scan cannot walk protobuf-c refuses too: the same words either way */
	model = scan == PGDL_ONNX_SCAN_OK ? onnx__model_proto__unpack(&allocator, len, data) : NULL;
	if (model == NULL)
		model_error(ERRCODE_INVALID_PARAMETER_VALUE, "The bytes are not an ONNX ModelProto (protobuf could not read them).");
	if (model->graph == NULL)
		model_error(ERRCODE_INVALID_PARAMETER_VALUE, "The model has no graph.");
	fill_strings(model);
	return model;
}

/* ---- attributes ---- */

static const Onnx__AttributeProto *
attr(Reader *r, const char *name, Onnx__AttributeProto__AttributeType type)
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

static int64
attr_int(Reader *r, const char *name, int64 dflt)
{
	const Onnx__AttributeProto *a = attr(r, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);

	return a ? a->i : dflt;
}

static float
attr_float(Reader *r, const char *name, float dflt)
{
	const Onnx__AttributeProto *a = attr(r, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);

	return a ? a->f : dflt;
}

/* The ints of attribute `name`, all equal to one value: that value, or dflt when absent. */
static int64
attr_ints_same(Reader *r, const char *name, int count, int64 dflt)
{
	const Onnx__AttributeProto *a = attr(r, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);

	if (a == NULL || a->n_ints == 0)
		return dflt;
	if (a->n_ints != (size_t) count)
		UNSUPPORTED(r, "Attribute \"%s\" has %zu values; pgdl takes %d (2-D).", name, a->n_ints, count);
	for (size_t i = 1; i < a->n_ints; i++)
		if (a->ints[i] != a->ints[0])
			UNSUPPORTED(r, "Attribute \"%s\" differs between dimensions; pgdl's windows are square and symmetric.", name);
	return a->ints[0];
}

static bool
attr_string_is(Reader *r, const char *name, const char *value)
{
	const Onnx__AttributeProto *a = attr(r, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);

	return a != NULL && a->has_s && a->s.len == strlen(value) && memcmp(a->s.data, value, a->s.len) == 0;
}

/* auto_pad: NOTSET or VALID are explicit pads; SAME_* only where pgdl's symmetric padding equals it. */
static int64
auto_pad(Reader *r, int64 kernel, int64 stride, int64 pads)
{
	const Onnx__AttributeProto *a = attr(r, "auto_pad", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);

	if (a == NULL || !a->has_s || attr_string_is(r, "auto_pad", "NOTSET"))
		return pads;
	if (attr_string_is(r, "auto_pad", "VALID"))
		return 0;
	if ((attr_string_is(r, "auto_pad", "SAME_UPPER") || attr_string_is(r, "auto_pad", "SAME_LOWER")) &&
		stride == 1 && kernel % 2 == 1)
		return (kernel - 1) / 2;
	UNSUPPORTED(r, "Its \"auto_pad\" pads asymmetrically; pgdl pads every side alike.");
}

/* ---- tensors ---- */

/* The number of elements dims say, checked against `limit`. */
static int64
tensor_count(Reader *r, const Onnx__TensorProto *t, int64 limit)
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

static void
tensor_check_stored(Reader *r, const Onnx__TensorProto *t, int type, const char *type_name)
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
static float *
tensor_floats(Reader *r, const Onnx__TensorProto *t, int64 *count)
{
	int64		n;
	float	   *v;

	tensor_check_stored(r, t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "FLOAT (float32)");
	n = tensor_count(r, t, NN_MAX_PARAMS);
	if (t->has_raw_data ? t->raw_data.len != (size_t) n * sizeof(float) : t->n_float_data != (size_t) n)
		node_error(r, ERRCODE_DATA_CORRUPTED, "Tensor \"%s\" holds %zu bytes of data; its dims say " INT64_FORMAT " floats.",
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
			node_error(r, ERRCODE_INVALID_PARAMETER_VALUE, "Tensor \"%s\" holds %s at element " INT64_FORMAT ".",
					   pgdl_echo(t->name), isnan(v[i]) ? "NaN" : "an infinity", i);
	}
	*count = n;
	return v;
}

/* An INT64 tensor's values (Reshape's shape), at most `limit` of them. */
static int64 *
tensor_int64s(Reader *r, const Onnx__TensorProto *t, int64 limit, int64 *count)
{
	int64		n;
	int64	   *v;

	tensor_check_stored(r, t, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "INT64");
	n = tensor_count(r, t, limit);
	if (t->has_raw_data ? t->raw_data.len != (size_t) n * 8 : t->n_int64_data != (size_t) n)
		node_error(r, ERRCODE_DATA_CORRUPTED, "Tensor \"%s\" holds a number of values its dims do not say.",
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
static const Onnx__TensorProto *
find_const(Reader *r, const char *name)
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
static const Onnx__TensorProto *
const_input(Reader *r, size_t i, bool optional)
{
	const Onnx__TensorProto *t;

	if (i >= r->node->n_input || r->node->input[i][0] == '\0')
	{
		if (optional)
			return NULL;
		MALFORMED(r, "Input %zu is missing.", i);
	}
	t = find_const(r, r->node->input[i]);
	if (t == NULL)
		UNSUPPORTED(r, "Input %zu (\"%s\") is not a constant: pgdl takes graphs that are one chain of nodes, "
					"whose other inputs are weights.", i, pgdl_echo(r->node->input[i]));
	return t;
}

/* A constant's values, `expected` floats, per channel ([n] or [1, n]) or one to broadcast. */
static float *
const_vector(Reader *r, size_t i, int64 expected, bool broadcast)
{
	const Onnx__TensorProto *t = const_input(r, i, false);
	int64		n;
	float	   *v = tensor_floats(r, t, &n);
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
static float
const_scalar(Reader *r, size_t i)
{
	int64		n;
	float	   *v = tensor_floats(r, const_input(r, i, false), &n);

	if (n != 1)
		UNSUPPORTED(r, "Input %zu holds " INT64_FORMAT " values; pgdl takes a scalar.", i, n);
	return v[0];
}

/* ---- layers ---- */

static NnLayerSpec *
new_layer(Reader *r, NnLayerType type)
{
	NnLayerSpec *l;

	if (r->spec->n_layers >= NN_MAX_LAYERS)
		UNSUPPORTED(r, "The model would have more than %d layers.", NN_MAX_LAYERS);
	l = &r->spec->layers[r->spec->n_layers];
	nn_layer_defaults(l, type);
	return l;
}

/* The layer new_layer gave, with its weights: checked by the engine's validator, and the chain's shape moved on. */
static void
add_layer(Reader *r, const float *w, int64 w_len, const float *b, int64 b_len)
{
	NnShape		shapes[NN_MAX_LAYERS + 1];
	NnError		err;
	int			i = r->spec->n_layers;

	r->spec->n_layers++;
	r->spec->loss = NN_LOSS_MSE;	/* any: the loss is settled at the end */
	if (!nn_spec_validate(r->spec, shapes, &err))
	{
		const char *msg = strncmp(err.msg, "layers[", 7) == 0 && strstr(err.msg, "]: ") ?
			strstr(err.msg, "]: ") + 3 : err.msg;

		UNSUPPORTED(r, "pgdl's %s refuses it: %s.", nn_layer_type_name(r->spec->layers[i].type), msg);
	}
	r->shape = shapes[i + 1];
	r->tensor[i][0] = w;
	r->length[i][0] = w_len;
	r->tensor[i][1] = b;
	r->length[i][1] = b_len;
	r->open_matmul = false;
	r->sigmoid_node = -1;
}

/* The value's rank in the graph and its dims, dims[0] (the batch) 1. */
static int
value_dims(Reader *r, int64 dims[ONNX_MAX_HELD + 1])
{
	dims[0] = 1;
	if (r->n_held > 0)
	{
		memcpy(dims + 1, r->held, sizeof(int64) * r->n_held);
		return r->n_held + 1;
	}
	dims[1] = r->shape.c;
	dims[2] = r->shape.h;
	dims[3] = r->shape.w;
	return r->shape.ndim == 1 ? 2 : 4;
}

/* pgdl holds some values flat: only operators indifferent to their layout take them. */
static void
need_not_held(Reader *r)
{
	StringInfoData dims;

	if (r->n_held == 0)
		return;
	initStringInfo(&dims);
	for (int d = 0; d < r->n_held; d++)
		appendStringInfo(&dims, ", " INT64_FORMAT, r->held[d]);
	UNSUPPORTED(r, "Its input is [batch%s]; pgdl holds a value of that shape flat (no layer takes it as a "
				"sequence), so it takes only elementwise operators, and those over all of an example, "
				"before a Flatten to [batch, %d].", dims.data, r->shape.c);
}

static void
need_flat(Reader *r)
{
	need_not_held(r);
	if (r->shape.ndim != 1)
		UNSUPPORTED(r, "Its input is [batch, %d, %d, %d]; pgdl takes a 2-D [batch, features] one here.",
					r->shape.c, r->shape.h, r->shape.w);
}

static void
need_not_image(Reader *r)
{
	if (r->shape.ndim == 3)
		UNSUPPORTED(r, "Its input is [batch, %d, %d, %d]; pgdl takes it only on a flat input: Flatten first.",
					r->shape.c, r->shape.h, r->shape.w);
}

static void
need_image(Reader *r)
{
	need_not_held(r);
	if (r->shape.ndim != 3)
		UNSUPPORTED(r, "Its input is [batch, %d]; pgdl takes a 4-D [batch, channels, height, width] one here.",
					r->shape.c);
}

/* A weight matrix into pgdl's [out, in]; `transposed`: it is stored [out, in] already. */
static float *
dense_weights(Reader *r, size_t i, bool transposed, int64 in, int64 *out)
{
	const Onnx__TensorProto *t = const_input(r, i, false);
	int64		n;
	float	   *v = tensor_floats(r, t, &n);
	float	   *w;

	if (t->n_dims != 2 || t->dims[transposed ? 1 : 0] != in || t->dims[transposed ? 0 : 1] < 1)
		UNSUPPORTED(r, "Its weight \"%s\" is not a matrix with " INT64_FORMAT " %s.",
					pgdl_echo(t->name), in, transposed ? "columns" : "rows");
	*out = t->dims[transposed ? 0 : 1];
	if (*out > NN_MAX_DIM)
		UNSUPPORTED(r, "It has " INT64_FORMAT " outputs; pgdl's dense layers have at most %d.", *out, NN_MAX_DIM);
	if (transposed)
		return v;
	w = palloc_extended(sizeof(float) * n, MCXT_ALLOC_HUGE);
	for (int64 o = 0; o < *out; o++)
	{
		CHECK_FOR_INTERRUPTS();
		for (int64 k = 0; k < in; k++)
			w[o * in + k] = v[k * *out + o];
	}
	return w;
}

static void
read_gemm(Reader *r)
{
	int64		in = r->shape.c;
	int64		out;
	float	   *w;
	float	   *b;

	need_flat(r);
	if (attr_float(r, "alpha", 1.0f) != 1.0f || attr_float(r, "beta", 1.0f) != 1.0f)
		UNSUPPORTED(r, "Its \"alpha\" or \"beta\" is not 1; pgdl's dense layer computes x W' + b.");
	if (attr_int(r, "transA", 0) != 0)
		UNSUPPORTED(r, "Its \"transA\" is set; pgdl's dense layer takes examples as rows.");
	w = dense_weights(r, 1, attr_int(r, "transB", 0) != 0, in, &out);
	b = const_input(r, 2, true) ? const_vector(r, 2, out, true) : palloc0(sizeof(float) * out);
	new_layer(r, NN_DENSE)->units = (int32) out;
	add_layer(r, w, in * out, b, out);
}

static void
read_matmul(Reader *r)
{
	int64		in = r->shape.c;
	int64		out;
	float	   *w;

	need_flat(r);
	w = dense_weights(r, 1, false, in, &out);
	new_layer(r, NN_DENSE)->units = (int32) out;
	add_layer(r, w, in * out, palloc0(sizeof(float) * out), out);
	r->open_matmul = true;
}

/* The bias of the MatMul before it: Add(value, b) or Add(b, value). */
static void
read_add(Reader *r)
{
	int			i = r->spec->n_layers - 1;
	size_t		other = strcmp(r->node->input[0], r->value) == 0 ? 1 : 0;

	if (!r->open_matmul || r->node->n_input != 2)
		UNSUPPORTED(r, "pgdl takes an Add only as the bias of the MatMul just before it.");
	r->tensor[i][1] = const_vector(r, other, r->shape.c, false);
	r->open_matmul = false;
}

static void
read_conv(Reader *r)
{
	const Onnx__TensorProto *t;
	NnLayerSpec *l;
	int64		n;
	float	   *w;
	float	   *b;
	int64		stride;

	need_image(r);
	t = const_input(r, 1, false);
	w = tensor_floats(r, t, &n);
	if (t->n_dims != 4 || t->dims[1] != r->shape.c || t->dims[2] != t->dims[3] || t->dims[0] < 1)
		UNSUPPORTED(r, "Its weight is not [filters, %d, k, k] (2-D, square).", r->shape.c);
	if (attr_int(r, "group", 1) != 1)
		UNSUPPORTED(r, "Its \"group\" is not 1; pgdl's conv2d has no groups.");
	if (attr_ints_same(r, "dilations", 2, 1) != 1)
		UNSUPPORTED(r, "Its \"dilations\" are not 1.");
	if (attr_ints_same(r, "kernel_shape", 2, t->dims[2]) != t->dims[2])
		MALFORMED(r, "Its \"kernel_shape\" disagrees with its weight.");
	stride = attr_ints_same(r, "strides", 2, 1);
	l = new_layer(r, NN_CONV2D);
	l->filters = (int32) Min(t->dims[0], PG_INT32_MAX);
	l->kernel = (int32) Min(t->dims[2], PG_INT32_MAX);
	l->stride = (int32) Max(Min(stride, PG_INT32_MAX), PG_INT32_MIN);
	l->padding = (int32) Max(Min(auto_pad(r, t->dims[2], stride, attr_ints_same(r, "pads", 4, 0)),
								 PG_INT32_MAX), PG_INT32_MIN);
	b = const_input(r, 2, true) ? const_vector(r, 2, t->dims[0], false) : palloc0(sizeof(float) * t->dims[0]);
	add_layer(r, w, n, b, t->dims[0]);
}

static void
read_pool(Reader *r, NnLayerType type)
{
	NnLayerSpec *l;
	int64		kernel = attr_ints_same(r, "kernel_shape", 2, -1);
	int64		stride = attr_ints_same(r, "strides", 2, 1);

	need_image(r);
	if (kernel < 1)
		MALFORMED(r, "Its \"kernel_shape\" is missing or not positive.");
	if (auto_pad(r, kernel, stride, attr_ints_same(r, "pads", 4, 0)) != 0)
		UNSUPPORTED(r, "It pads its input; pgdl's pooling does not.");
	if (attr_int(r, "storage_order", 0) != 0 || attr_ints_same(r, "dilations", 2, 1) != 1)
		UNSUPPORTED(r, "Its \"storage_order\" or \"dilations\" is not pgdl's (0, 1).");
	/* rounding up adds a last, partial window only where the windows do not end at the edge */
	if (attr_int(r, "ceil_mode", 0) != 0 && stride > 0 && kernel <= Min(r->shape.h, r->shape.w) &&
		((r->shape.h - kernel) % stride != 0 || (r->shape.w - kernel) % stride != 0))
		UNSUPPORTED(r, "Its \"ceil_mode\" adds a partial window at the edge; pgdl's pooling has whole windows only.");
	if (r->node->n_output > 1 && r->node->output[1][0] != '\0')
		UNSUPPORTED(r, "It has an Indices output; pgdl's pooling has one output.");
	l = new_layer(r, type);
	l->kernel = (int32) Min(kernel, PG_INT32_MAX);
	l->stride = (int32) Max(Min(stride, PG_INT32_MAX), PG_INT32_MIN);
	add_layer(r, NULL, 0, NULL, 0);
}

/* Flatten to [batch, rest]: a layer only where there is something to flatten. */
static void
flatten(Reader *r)
{
	r->n_held = 0;
	if (r->shape.ndim == 1)
		return;
	new_layer(r, NN_FLATTEN);
	add_layer(r, NULL, 0, NULL, 0);
}

static void
read_flatten(Reader *r)
{
	int64		axis = attr_int(r, "axis", 1);
	int64		dims[ONNX_MAX_HELD + 1];

	if (axis < 0)
		axis += value_dims(r, dims);
	if (axis != 1)
		UNSUPPORTED(r, "Its \"axis\" is " INT64_FORMAT "; pgdl flattens all but the batch dimension (axis 1).",
					attr_int(r, "axis", 1));
	flatten(r);
}

/*
 * Reshape that keeps the batch: [0 or the fixed batch or -1, dims of the
 * example's size]. pgdl's values are flat per example, so it moves no value:
 * to rank 2 it is a flatten, to another rank the value is held flat.
 */
static void
read_reshape(Reader *r)
{
	int64		n;
	int64	   *shape;
	int64		in[ONNX_MAX_HELD + 1];
	int			in_rank = value_dims(r, in);
	int64		features = NN_SHAPE_SIZE(r->shape);
	int64		known = 1;
	int			unknown = -1;

	if (r->opset < 5)
		UNSUPPORTED(r, "pgdl reads Reshape from opset 5 on.");
	shape = tensor_int64s(r, const_input(r, 1, false), ONNX_MAX_HELD + 1, &n);
	for (int64 d = 1; d < n; d++)
	{
		if (shape[d] == 0 && attr_int(r, "allowzero", 0) == 0 && d < in_rank)
			shape[d] = in[d];	/* 0 copies the input's dim */
		if (shape[d] == -1 && unknown < 0)
			unknown = (int) d;
		else if (shape[d] >= 1 && shape[d] <= features / known)
			known *= shape[d];
		else
			known = -1;
		if (known < 0)
			break;
	}
	if (unknown > 0 && known > 0 && features % known == 0)
		shape[unknown] = features / known;
	if (n < 2 || known < 1 || (unknown < 0 ? known : known * shape[unknown]) != features ||
		!(shape[0] == 0 || (shape[0] == -1 && unknown < 0) || (r->batch > 0 && shape[0] == r->batch)) ||
		(shape[0] == 0 && attr_int(r, "allowzero", 0) != 0))
		UNSUPPORTED(r, "Its target shape does not keep the batch dimension and the example's " INT64_FORMAT
					" values; pgdl reshapes only within an example.", features);
	flatten(r);
	if (n > 2)
	{
		r->n_held = (int) n - 1;
		memcpy(r->held, shape + 1, sizeof(int64) * r->n_held);
	}
}

static void
read_batchnorm(Reader *r)
{
	int			c = r->shape.c;
	int			i = r->spec->n_layers;
	NnLayerSpec *l;
	float	   *var;
	float		momentum = attr_float(r, "momentum", 0.9f);

	need_not_held(r);
	if (attr_int(r, "training_mode", 0) != 0 || attr_int(r, "spatial", 1) != 1)
		UNSUPPORTED(r, "Its \"training_mode\" or \"spatial\" is not inference's (0, 1).");
	for (size_t o = 1; o < r->node->n_output; o++)
		if (r->node->output[o][0] != '\0')
			UNSUPPORTED(r, "It has training outputs (running statistics); pgdl imports inference graphs.");
	var = const_vector(r, 4, c, false);
	for (int j = 0; j < c; j++)
		if (var[j] < 0.0f)
			MALFORMED(r, "Its variance is negative in channel %d (%g).", j, (double) var[j]);
	l = new_layer(r, NN_BATCHNORM);
	l->eps = attr_float(r, "epsilon", 1e-5f);
	/* ONNX's momentum weighs the running statistic, PyTorch's and pgdl's the batch */
	l->momentum = momentum >= 0.0f && momentum <= 1.0f ? 1.0f - momentum : 0.1f;
	add_layer(r, const_vector(r, 1, c, false), c, const_vector(r, 2, c, false), c);
	r->tensor[i][2] = const_vector(r, 3, c, false);
	r->length[i][2] = c;
	r->tensor[i][3] = var;
	r->length[i][3] = c;
}

/* A BOOL constant that is false, as Dropout's training_mode must be. */
static bool
const_false(Reader *r, size_t i)
{
	const Onnx__TensorProto *t = const_input(r, i, false);

	tensor_check_stored(r, t, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "BOOL");
	if (t->has_raw_data)
		return t->raw_data.len == 1 && t->raw_data.data[0] == 0;
	return t->n_int32_data == 1 && t->int32_data[0] == 0;
}

static void
read_dropout(Reader *r)
{
	float		rate = r->opset < 12 ? attr_float(r, "ratio", 0.5f) : 0.5f;

	if (r->opset >= 12 && const_input(r, 1, true))
		rate = const_scalar(r, 1);
	if (r->opset >= 12 && const_input(r, 2, true) && !const_false(r, 2))
		UNSUPPORTED(r, "Its \"training_mode\" is not a constant false.");
	if (r->node->n_output > 1 && r->node->output[1][0] != '\0')
		UNSUPPORTED(r, "It has a mask output; pgdl's dropout has one output.");
	new_layer(r, NN_DROPOUT)->rate = rate;
	add_layer(r, NULL, 0, NULL, 0);
}

static void
read_activation(Reader *r, NnLayerType type)
{
	NnLayerSpec *l = new_layer(r, type);

	if (type == NN_LEAKY_RELU)
		l->alpha = attr_float(r, "alpha", 0.01f);
	add_layer(r, NULL, 0, NULL, 0);
	if (type == NN_SIGMOID)
		r->sigmoid_node = r->index;
}

/*
 * Whether the node's "axis" takes in all of an example's values, the batch
 * apart: those from axis on, or (`alone`) that axis alone, others being 1.
 */
static bool
over_example(Reader *r, int64 dflt, bool alone)
{
	int64		dims[ONNX_MAX_HELD + 1];
	int			rank = value_dims(r, dims);
	int64		axis = attr_int(r, "axis", dflt);
	int64		others = 1;

	if (axis < 0)
		axis += rank;
	if (axis < 1 || axis >= rank)
		return false;
	for (int d = 1; d < (alone ? rank : axis); d++)
		if (d != axis)
			others *= dims[d];
	return others == 1;
}

/* LayerNormalization over all of an example (pgdl's layernorm of a flat input), scale and bias per value. */
static void
read_layernorm(Reader *r)
{
	int64		n = r->shape.c;
	int			i = r->spec->n_layers;
	const Onnx__TensorProto *t;
	float	   *scale;
	int64		count;

	if (r->opset < 17)
		UNSUPPORTED(r, "LayerNormalization is an operator from opset 17 on.");
	need_not_image(r);
	if (!over_example(r, -1, false))
		UNSUPPORTED(r, "Its \"axis\" (" INT64_FORMAT ") normalizes part of an example; pgdl's layernorm of a flat "
					"input normalizes all of it.", attr_int(r, "axis", -1));
	for (size_t o = 1; o < r->node->n_output; o++)
		if (r->node->output[o][0] != '\0')
			UNSUPPORTED(r, "It has Mean or InvStdDev outputs; pgdl's layernorm has one output.");
	t = const_input(r, 1, false);
	scale = tensor_floats(r, t, &count);
	if (count != n)
		UNSUPPORTED(r, "Its scale holds " INT64_FORMAT " values; pgdl's layernorm takes one per value of the "
					"example (" INT64_FORMAT ").", count, n);
	new_layer(r, NN_LAYERNORM)->eps = attr_float(r, "epsilon", 1e-5f);
	add_layer(r, scale, n, NULL, n);
	r->tensor[i][1] = palloc0(sizeof(float) * n);
	if (const_input(r, 2, true))
	{
		r->tensor[i][1] = tensor_floats(r, const_input(r, 2, false), &count);
		if (count != n)
			UNSUPPORTED(r, "Its bias holds " INT64_FORMAT " values; pgdl's layernorm takes " INT64_FORMAT ".", count, n);
	}
}

/* Softmax or LogSoftmax over the features, as the last node: cross_entropy's, which pgdl.predict applies. */
static void
read_softmax(Reader *r)
{
	/* before opset 13 the input is coerced to 2-D at axis; from 13 on it is over that axis alone */
	if (!over_example(r, r->opset < 13 ? 1 : -1, r->opset >= 13))
		UNSUPPORTED(r, "Its \"axis\" (" INT64_FORMAT ") leaves out some of an example's outputs; pgdl's softmax is "
					"over all of them.", attr_int(r, "axis", r->opset < 13 ? 1 : -1));
	if (r->args->loss != 0 && r->args->loss != NN_LOSS_CROSS_ENTROPY)
		node_error(r, ERRCODE_INVALID_PARAMETER_VALUE, "A trailing %s is cross_entropy's; loss is %s.",
				   pgdl_echo(r->node->op_type), nn_loss_name(r->args->loss));
	r->loss = NN_LOSS_CROSS_ENTROPY;
}

/* A Pad that pads nothing (PyTorch writes one before AvgPool2d) is nothing; any other is refused. */
static void
read_pad(Reader *r)
{
	const Onnx__AttributeProto *a = attr(r, "pads", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	int64		n = a ? (int64) a->n_ints : 0;
	const int64 *pads = a ? a->ints : NULL;

	if (r->opset >= 11)
		pads = tensor_int64s(r, const_input(r, 1, false), 8, &n);
	for (int64 i = 0; i < n; i++)
		if (pads[i] != 0)
			UNSUPPORTED(r, "It pads; pgdl pads only inside conv2d.");
}

/* ---- the normalization pgdl's export puts first ---- */

static bool
same_floats(const float *a, const float *b, int64 n)
{
	for (int64 i = 0; i < n; i++)
		if (fabsf(a[i] - b[i]) > 1e-6f * Max(fabsf(a[i]), fabsf(b[i])))
			return false;
	return true;
}

/* A mean or std as pgdl's export writes it: shaped as one example ([F] or [C, H, W]), or [1, ...] of that. */
static float *
normalization_vector(Reader *r, size_t i)
{
	const Onnx__TensorProto *t = const_input(r, i, false);
	int64		example[3] = {r->shape.c, r->shape.h, r->shape.w};
	int			lead = t->n_dims > 0 && t->dims[0] == 1 && t->n_dims == r->shape.ndim + 1 ? 1 : 0;
	int64		n;
	float	   *v = tensor_floats(r, t, &n);

	if (t->n_dims - lead != r->shape.ndim)
		UNSUPPORTED(r, "Input %zu is not shaped as one example.", i);
	for (int d = 0; d < r->shape.ndim; d++)
		if (t->dims[lead + d] != example[d])
			UNSUPPORTED(r, "Input %zu is not shaped as one example.", i);
	return v;
}

/* Mul by a scalar, or Sub of a mean then Div by a std: what the dataset does to raw features. */
static void
read_normalization(Reader *r, PgdlOnnxOp op)
{
	const PgdlDataset *ds = r->args->dataset;
	int64		f = NN_SHAPE_SIZE(r->shape);
	bool		same;

	if (ds == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot import ONNX node #%d (%s) without the dataset it normalizes for", r->index,
						pgdl_onnx_op_name(op)),
				 errdetail("The model was exported by pgdl with its dataset's normalization as its first nodes."),
				 errhint("Pass the packed dataset as dataset, or export with with_normalization => false.")));
	if (op == PGDL_ONNX_MUL)
		same = ds->mean == NULL && same_floats((float[]) {const_scalar(r, 1)}, &ds->scale, 1);
	else
		same = ds->mean != NULL && ds->n_features == f && ds->n_numeric == f &&
			same_floats(normalization_vector(r, 1), op == PGDL_ONNX_SUB ? ds->mean : ds->std, f);
	if (!same)
		node_error(r, ERRCODE_INVALID_PARAMETER_VALUE,
				   "The model's input normalization and dataset's disagree.");
	r->norm_state = op == PGDL_ONNX_SUB ? 1 : 2;
}

/* One of the target unscaling's initializers: n_targets floats, equal to the dataset's. */
static void
check_target_vector(Reader *r, const float *want, int32 k)
{
	const Onnx__TensorProto *t = const_input(r, 1, false);
	int64		n;
	float	   *v = tensor_floats(r, t, &n);

	if (n != k || !same_floats(v, want, k))
		node_error(r, ERRCODE_INVALID_PARAMETER_VALUE,
				   "The model's target scaling and the dataset's disagree.");
}

/* pgdl's export's Mul by std then Add of mean behind the network: the dataset's targets, undone. */
static void
read_target_unscaling(Reader *r, PgdlOnnxOp op)
{
	const PgdlDataset *ds = r->args->dataset;

	if (ds == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot import ONNX node #%d (%s) without the dataset whose targets it unscales", r->index,
						pgdl_onnx_op_name(op)),
				 errdetail("The model was exported by pgdl with its dataset's target scaling undone as its last nodes."),
				 errhint("Pass the packed dataset as dataset, or export with with_normalization => false.")));
	if (ds->target_mean == NULL)
		node_error(r, ERRCODE_INVALID_PARAMETER_VALUE,
				   "The model undoes a target scaling that the dataset does not have.");
	check_target_vector(r, op == PGDL_ONNX_MUL ? ds->target_std : ds->target_mean, ds->n_targets);
	r->target_state = op == PGDL_ONNX_MUL ? 1 : 2;
}

/* ---- the chain ---- */

static void
read_constant(Reader *r)
{
	const Onnx__AttributeProto *a = attr(r, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);

	if (a == NULL || a->t == NULL || r->node->n_output != 1)
		UNSUPPORTED(r, "pgdl takes Constant nodes with a \"value\" tensor and one output.");
	r->const_name[r->n_consts] = r->node->output[0];
	r->const_value[r->n_consts] = a->t;
	r->n_consts++;
}

/* One node of the chain (not a Constant): as a layer, the loss, or nothing. */
static void
read_op(Reader *r, PgdlOnnxOp op)
{
	const char *name = r->node->name ? r->node->name : "";

	if (r->meta_target &&
		((r->target_state == 0 && op == PGDL_ONNX_MUL && strcmp(name, PGDL_ONNX_NODE_TARGET_MUL) == 0) ||
		 (r->target_state == 1 && op == PGDL_ONNX_ADD && strcmp(name, PGDL_ONNX_NODE_TARGET_ADD) == 0)))
		return read_target_unscaling(r, op);
	if (r->target_state != 0)
		UNSUPPORTED(r, "pgdl's target scaling is a Mul followed by an Add, the graph's last nodes.");
	if (r->meta_normalization && r->spec->n_layers == 0 &&
		((r->norm_state == 0 && (op == PGDL_ONNX_MUL || op == PGDL_ONNX_SUB)) ||
		 (r->norm_state == 1 && op == PGDL_ONNX_DIV)))
		return read_normalization(r, op);
	if (r->norm_state == 1)
		UNSUPPORTED(r, "pgdl's normalization is a Sub followed by a Div.");
	r->norm_state = 2;
	switch (op)
	{
		case PGDL_ONNX_RELU:
		case PGDL_ONNX_LEAKYRELU:
		case PGDL_ONNX_SIGMOID:
		case PGDL_ONNX_TANH:
			read_activation(r, pgdl_onnx_op_layer(op));
			break;
		case PGDL_ONNX_GEMM:
			read_gemm(r);
			break;
		case PGDL_ONNX_MATMUL:
			read_matmul(r);
			break;
		case PGDL_ONNX_ADD:
			read_add(r);
			break;
		case PGDL_ONNX_CONV:
			read_conv(r);
			break;
		case PGDL_ONNX_MAXPOOL:
		case PGDL_ONNX_AVERAGEPOOL:
			read_pool(r, pgdl_onnx_op_layer(op));
			break;
		case PGDL_ONNX_GLOBALAVERAGEPOOL:
			need_image(r);
			new_layer(r, NN_GLOBAL_AVGPOOL);
			add_layer(r, NULL, 0, NULL, 0);
			break;
		case PGDL_ONNX_FLATTEN:
			read_flatten(r);
			break;
		case PGDL_ONNX_RESHAPE:
			read_reshape(r);
			break;
		case PGDL_ONNX_BATCHNORMALIZATION:
			read_batchnorm(r);
			break;
		case PGDL_ONNX_DROPOUT:
			read_dropout(r);
			break;
		case PGDL_ONNX_SOFTMAX:
		case PGDL_ONNX_LOGSOFTMAX:
			read_softmax(r);
			break;
		case PGDL_ONNX_PAD:
			read_pad(r);
			break;
		case PGDL_ONNX_LAYERNORMALIZATION:
			read_layernorm(r);
			break;
		case PGDL_ONNX_IDENTITY:
			break;
		default:
			UNSUPPORTED(r, "pgdl has no layer for this operator.");
	}
}

/* A node continues the chain: its first input (or, for Add, either) is the chain's value, one output. */
static void
check_chained(Reader *r, PgdlOnnxOp op)
{
	const Onnx__NodeProto *n = r->node;
	bool		add = op == PGDL_ONNX_ADD;

	if (n->n_input < 1 || n->n_output < 1 || n->output[0][0] == '\0')
		MALFORMED(r, "It has no input or no output.");
	if (r->loss != 0)
		UNSUPPORTED(r, "It follows a Softmax or LogSoftmax, which pgdl takes only as the last node.");
	if (strcmp(n->input[0], r->value) != 0 && !(add && n->n_input == 2 && strcmp(n->input[1], r->value) == 0))
		UNSUPPORTED(r, "It does not take the previous node's output \"%s\" as its input: "
					"pgdl takes graphs that are one chain of nodes (no branches).", pgdl_echo(r->value));
	for (size_t i = 0; i < n->n_input; i++)
		for (size_t o = 0; o < n->n_output; o++)
			if (strcmp(n->input[i], n->output[o]) == 0)
				MALFORMED(r, "It takes its own output as input.");
}

static void
read_node(Reader *r)
{
	const Onnx__NodeProto *n = r->node;
	PgdlOnnxOp	op = pgdl_onnx_op_from_name(checked_text(n->op_type, "node's op_type"));

	checked_text(n->name, "node's name");
	for (size_t i = 0; i < n->n_input; i++)
		checked_text(n->input[i], "node's input name");
	for (size_t i = 0; i < n->n_output; i++)
		checked_text(n->output[i], "node's output name");
	if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
		UNSUPPORTED(r, "Its domain is \"%s\"; pgdl reads ONNX's own operators.", pgdl_echo(n->domain));
	if (op == PGDL_ONNX_CONSTANT)
		return read_constant(r);
	check_chained(r, op);
	read_op(r, op);
	r->value = n->output[0];
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
		model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph's input \"%s\" is [batch, %d, %d]; pgdl holds it flat, "
					"and takes at most %d values per example.", pgdl_echo(name), r->spec->input[0],
					r->spec->input[1], NN_MAX_DIM);
	r->n_held = 2;
	r->held[0] = r->spec->input[0];
	r->held[1] = r->spec->input[1];
	r->spec->input_ndim = 1;
	r->spec->input[0] = (int32) n;
	r->spec->input[1] = 0;
}

/* The one real input: float32, [batch, F], [batch, L, F] or [batch, C, H, W], all but batch fixed. */
static void
read_input(Reader *r)
{
	const Onnx__ValueInfoProto *in = NULL;
	const Onnx__TypeProto__Tensor *tt;
	int			n = 0;

	for (size_t i = 0; i < r->g->n_input; i++)
		if (!is_initializer(r->g, checked_text(r->g->input[i]->name, "graph's input name")))
		{
			in = r->g->input[i];
			n++;
		}
	if (n != 1)
		model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph has %d inputs that are not initializers; pgdl takes one.", n);
	if (in->type == NULL || in->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
		(tt = in->type->tensor_type) == NULL || tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
		model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph's input \"%s\" is not a float32 tensor.", pgdl_echo(in->name));
	if (tt->shape == NULL || tt->shape->n_dim < 2 || tt->shape->n_dim > 4)
		model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph's input \"%s\" is not of rank 2 [batch, features], 3 "
					"[batch, steps, features] or 4 [batch, channels, height, width].", pgdl_echo(in->name));
	for (size_t d = 1; d < tt->shape->n_dim; d++)
	{
		const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];

		if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
			dim->dim_value < 1 || dim->dim_value > NN_MAX_DIM)
			model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "Dimension %zu of the graph's input \"%s\" is not fixed "
						"between 1 and %d; pgdl takes a dynamic batch dimension only.", d, pgdl_echo(in->name), NN_MAX_DIM);
		r->spec->input[d - 1] = (int32) dim->dim_value;
	}
	if (tt->shape->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
		r->batch = tt->shape->dim[0]->dim_value;
	r->spec->input_ndim = tt->shape->n_dim - 1;
	if (tt->shape->n_dim == 3)
		read_input_steps(r, in->name);
	r->shape.ndim = r->spec->input_ndim;
	r->shape.c = r->spec->input[0];
	r->shape.h = r->shape.ndim == 3 ? r->spec->input[1] : 1;
	r->shape.w = r->shape.ndim == 3 ? r->spec->input[2] : 1;
	r->value = in->name;
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
	else
		spec->loss = r->args->loss != 0 ? r->args->loss : r->meta_loss != 0 ? r->meta_loss : r->args->default_loss;
	if (r->args->loss == 0 && r->loss == 0 && strcmp(r->loss_from, "sigmoid") != 0)
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
	if (opset < ONNX_MIN_OPSET || opset > ONNX_MAX_OPSET)
		model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "Its opset is " INT64_FORMAT "; pgdl reads opsets %d to %d.",
					opset, ONNX_MIN_OPSET, ONNX_MAX_OPSET);
	return opset;
}

static const char *
metadata(const Onnx__ModelProto *model, const char *key)
{
	for (size_t i = 0; i < model->n_metadata_props; i++)
		if (model->metadata_props[i]->key && strcmp(model->metadata_props[i]->key, key) == 0)
			return checked_text(model->metadata_props[i]->value, "model's metadata");
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

static void
read_graph(Reader *r)
{
	const Onnx__GraphProto *g = r->g;

	if (g->n_node > ONNX_MAX_NODES || g->n_initializer > ONNX_MAX_TENSORS)
		model_error(ERRCODE_PROGRAM_LIMIT_EXCEEDED, "The graph has %zu nodes and %zu initializers; pgdl reads at most %d of each.",
					g->n_node, g->n_initializer, ONNX_MAX_NODES);
	if (g->n_sparse_initializer > 0)
		model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph has sparse initializers.");
	if (g->n_output != 1)
		model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph has %zu outputs; pgdl takes one.", g->n_output);
	read_input(r);
	r->const_name = palloc(sizeof(char *) * Max(g->n_node, 1));
	r->const_value = palloc(sizeof(Onnx__TensorProto *) * Max(g->n_node, 1));
	for (size_t i = 0; i < g->n_node; i++)
	{
		CHECK_FOR_INTERRUPTS();
		r->index = (int) i;
		r->node = g->node[i];
		read_node(r);
	}
	if (strcmp(checked_text(g->output[0]->name, "graph's output name"), r->value) != 0)
		model_error(ERRCODE_FEATURE_NOT_SUPPORTED, "The graph's output \"%s\" is not the end of its chain of nodes "
					"(\"%s\"); pgdl takes graphs that are one chain.", pgdl_echo(g->output[0]->name), pgdl_echo(r->value));
}

void
pgdl_onnx_read(const uint8 *data, size_t len, const PgdlOnnxArgs *args, PgdlOnnxModel *out)
{
	Onnx__ModelProto *model = unpack(data, len);
	Reader	   *r = palloc0(sizeof(Reader));

	checked_text(model->producer_name, "producer name");
	checked_text(model->producer_version, "producer version");
	checked_text(model->graph->name, "graph's name");
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
		model_error(ERRCODE_DATA_CORRUPTED, "Its metadata \"%s\" is not JSON.", PGDL_ONNX_META_CLASSES);
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
	if (!JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb))
		model_error(ERRCODE_DATA_CORRUPTED, "Its metadata \"%s\" is not an array.", PGDL_ONNX_META_CLASSES);
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
