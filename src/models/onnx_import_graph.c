/*
 * onnx_import_graph.c -- the graph of an ONNX model as pgdl.import_onnx reads
 * it: the values between nodes (which layer's output each tensor is), and the
 * nodes that join branches (Add of two values, Concat) or take part of one
 * (Slice) into pgdl's add, concat and slice layers with their "inputs".
 *
 * ONNX lists nodes in a topological order, as pgdl's layers are: each node
 * reads the graph's input or tensors that nodes before it wrote, so a layer's
 * inputs are always earlier layers and the spec has no cycle.  A tensor is
 * written once (ONNX's static single assignment); a node that reads one no
 * earlier node wrote is refused.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "base/base.h"
#include "spec/spec.h"
#include "models/models.h"
#include "models/onnx_reader.h"

#define ONNX_MAX_NODE_INPUTS	64	/* no operator pgdl reads takes more */

OnnxValue *
onnx_find_value(Reader *r, const char *name)
{
	if (name[0] == '\0')
		return NULL;
	for (int i = r->n_values - 1; i >= 0; i--)
		if (strcmp(r->values[i].name, name) == 0)
			return &r->values[i];
	return NULL;
}

/*
 * A rank-1 value [batch] is one number per example: an operator on it alone
 * (its axis 0 is the batch's) is pgdl's elementwise layer on [batch, 1]; any
 * operator with an axis, a weight or a window works across the batch.
 */
static void
need_elementwise(Reader *r, PgdlOnnxOp op)
{
	if (op != PGDL_ONNX_RELU && op != PGDL_ONNX_LEAKYRELU && op != PGDL_ONNX_SIGMOID && op != PGDL_ONNX_TANH &&
		op != PGDL_ONNX_DROPOUT && op != PGDL_ONNX_IDENTITY && op != PGDL_ONNX_ADD)
		UNSUPPORTED(r, "Its input is of rank 1 [batch], one value per example; pgdl takes such a value only into "
					"elementwise operators (Relu, LeakyRelu, Sigmoid, Tanh, Dropout, Identity, an Add of two).");
}

/*
 * The node's data input: its first input, or (Add, Mul: either operand may be
 * the constant) its second when the first is a constant.  Every value it
 * reads counts a use, so that a value folded into one reader (a MatMul's bias,
 * the normalization) is known to have no other.
 */
void
onnx_take_input(Reader *r, PgdlOnnxOp op)
{
	const Onnx__NodeProto *n = r->node;
	OnnxValue  *in = NULL;

	if (n->n_input > ONNX_MAX_NODE_INPUTS)
		UNSUPPORTED(r, "It has %zu inputs; pgdl reads operators of at most %d.", n->n_input, ONNX_MAX_NODE_INPUTS);
	for (size_t i = 0; i < n->n_input; i++)
	{
		OnnxValue  *v = onnx_find_value(r, n->input[i]);

		if (v == NULL)
			continue;
		if (v->closed)
			UNSUPPORTED(r, "It reads \"%s\", which pgdl folds into the one node that reads it (a MatMul's output "
						"into the Add of its bias, the raw features into the normalization).", pgdl_echo(v->name));
		v->uses++;
		/* Gather's data is a table (an embedding's) and its indices the value; Concat's may be constants first */
		if (in == NULL && (i == 0 || op == PGDL_ONNX_ADD || op == PGDL_ONNX_MUL || op == PGDL_ONNX_GATHER ||
						   op == PGDL_ONNX_CONCAT))
			in = v;
	}
	if (in == NULL)
		UNSUPPORTED(r, "Its input \"%s\" is neither the graph's input nor the output of a node before it "
					"(constants and weights are other inputs).", n->n_input > 0 ? pgdl_echo(n->input[0]) : "");
	r->in = in;
	r->value = in->name;
	r->src = in->src;
	r->shape = in->shape;
	r->n_held = in->n_held;
	memcpy(r->held, in->held, sizeof(r->held));
	r->rank1 = in->rank1;
	if (r->rank1)
		need_elementwise(r, op);
	r->open_matmul = false;
	r->out_kind = ONNX_VALUE_TENSOR;
	r->out_n_dims = 0;
	r->outputs_done = false;
	r->out_att = in->att;
	r->out_part = in->part;
}

/* A value the node writes, called name: the layer it made or its input's, as the node left it. */
OnnxValue *
onnx_put_value(Reader *r, const char *name)
{
	OnnxValue  *v;

	if (onnx_find_value(r, name) != NULL || onnx_find_const(r, name) != NULL)
		MALFORMED(r, "Its output \"%s\" is a tensor that the graph has already.", pgdl_echo(name));
	if (r->n_values >= r->g->n_node * 2 + 1)
		MALFORMED(r, "It writes more tensors than pgdl reads.");
	v = &r->values[r->n_values++];
	v->name = name;
	v->kind = r->out_kind;
	v->n_dims = r->out_n_dims;
	memcpy(v->dims, r->out_dims, sizeof(v->dims));
	v->src = r->src;
	v->shape = r->shape;
	v->n_held = r->n_held;
	memcpy(v->held, r->held, sizeof(v->held));
	v->rank1 = r->rank1;
	v->open_matmul = r->open_matmul;
	v->att = r->out_att;
	v->part = r->out_part;
	return v;
}

/* The node's (first) output, unless its reader wrote its outputs itself. */
void
onnx_put_output(Reader *r)
{
	if (!r->outputs_done)
		onnx_put_value(r, r->node->output[0]);
}

/* A value of the node's inputs, for a join: one that a node wrote, as pgdl holds it (not flat in another shape). */
static OnnxValue *
join_input(Reader *r, size_t i, PgdlOnnxOp op)
{
	OnnxValue  *v = onnx_find_value(r, r->node->input[i]);

	if (v == NULL)
		UNSUPPORTED(r, "Its input %zu (\"%s\") is a constant; pgdl's add and concat join the outputs of layers.",
					i, pgdl_echo(r->node->input[i]));
	if (v->rank1 != r->in->rank1 || v->n_held != r->in->n_held ||
		memcmp(v->held, r->in->held, sizeof(int64) * v->n_held) != 0)
		UNSUPPORTED(r, "Its inputs are not of one shape; pgdl's add takes equal shapes (no broadcasting).");
	if (v->n_held > 0 && op == PGDL_ONNX_CONCAT)
		UNSUPPORTED(r, "Its inputs are of rank %d; pgdl holds them flat, and concatenates flat inputs or images "
					"along axis 1.", v->n_held + 1);
	return v;
}

/*
 * Add of two values (a residual connection) as pgdl's add, Concat along axis
 * 1 (channels of an image, features of a flat value) as its concat.  false:
 * an Add with a constant, which is a MatMul's bias (read_add's).
 */
bool
onnx_read_join(Reader *r, PgdlOnnxOp op)
{
	const Onnx__NodeProto *n = r->node;
	NnLayerSpec *l;
	int			srcs[NN_MAX_INPUTS];
	int			k = (int) n->n_input;

	if (op == PGDL_ONNX_ADD && (n->n_input != 2 || onnx_find_value(r, n->input[0]) == NULL ||
								onnx_find_value(r, n->input[1]) == NULL))
		return false;
	if (op == PGDL_ONNX_CONCAT)
	{
		/* axis is required from opset 4 on, 1 before */
		int64		axis = onnx_attr_int(r, "axis", r->opset < 4 ? 1 : 0);
		int			rank = r->in->n_held > 0 ? r->in->n_held + 1 : r->shape.ndim + 1;

		if (axis != 1 && axis != 1 - rank)
			UNSUPPORTED(r, "Its \"axis\" is " INT64_FORMAT "; pgdl's concat joins axis 1 (channels or features).",
						axis);
		if (k < 2 || k > NN_MAX_INPUTS)
			UNSUPPORTED(r, "It joins %d tensors; pgdl's concat joins 2 to %d.", k, NN_MAX_INPUTS);
	}
	for (int i = 0; i < k; i++)
		srcs[i] = join_input(r, (size_t) i, op)->src;
	l = onnx_new_layer(r, pgdl_onnx_op_layer(op));
	l->n_inputs = (int16) k;
	for (int i = 0; i < k; i++)
		l->inputs[i] = (int16) srcs[i];
	onnx_add_layer(r, NULL, 0, NULL, 0);
	return true;
}

/* Slice's bound i (starts or ends), one value, from ONNX's clamped range into [0, features]. */
static int64
slice_bound(Reader *r, size_t i, int64 features)
{
	int64		n;
	int64	   *v = onnx_tensor_int64s(r, onnx_const_input(r, i, false), 1, &n);
	int64		b;

	if (n != 1)
		UNSUPPORTED(r, "It slices " INT64_FORMAT " axes; pgdl's slice takes one, axis 1.", n);
	b = v[0] < 0 ? v[0] + features : v[0];
	return Max(Min(b, features), 0);
}

/* Slice along axis 1 of a flat value, step 1: pgdl's slice of features [start, end). */
void
onnx_read_slice(Reader *r)
{
	int64		features = r->shape.c;
	int64		start;
	int64		end;
	NnLayerSpec *l;

	if (r->opset < 10)
		UNSUPPORTED(r, "pgdl reads Slice from opset 10 on (its bounds as inputs).");
	onnx_need_flat(r);
	if (onnx_const_input(r, 3, true))
	{
		int64		n;
		int64	   *axes = onnx_tensor_int64s(r, onnx_const_input(r, 3, false), 1, &n);

		if (n != 1 || (axes[0] != 1 && axes[0] != -1))
			UNSUPPORTED(r, "It slices other than axis 1; pgdl's slice takes features of a [batch, features] input.");
	}
	else
		UNSUPPORTED(r, "It has no \"axes\", so it slices axis 0 (the batch) first; pgdl slices features only.");
	if (onnx_const_input(r, 4, true))
	{
		int64		n;
		int64	   *steps = onnx_tensor_int64s(r, onnx_const_input(r, 4, false), 1, &n);

		if (n != 1 || steps[0] != 1)
			UNSUPPORTED(r, "Its \"steps\" are not 1; pgdl's slice takes consecutive features.");
	}
	start = slice_bound(r, 1, features);
	end = slice_bound(r, 2, features);
	if (end <= start)
		UNSUPPORTED(r, "It takes no feature (start " INT64_FORMAT ", end " INT64_FORMAT " of " INT64_FORMAT
					"); pgdl's slice takes at least one.", start, end, features);
	l = onnx_new_layer(r, NN_SLICE);
	l->start = (int32) start;
	l->units = (int32) (end - start);
	onnx_add_layer(r, NULL, 0, NULL, 0);
}
