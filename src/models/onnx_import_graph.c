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
						"into the Add of its bias, the raw features into the normalization, a rank-3 input into its "
						"1-D pool).", pgdl_echo(v->name));
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

/* Slice's int64 input i (starts, ends, axes or steps), n values; NULL when it may be absent and is. */
static int64 *
slice_input(Reader *r, size_t i, bool optional, int64 *n)
{
	if (optional && !onnx_const_input(r, i, true))
		return NULL;
	return onnx_tensor_int64s(r, onnx_const_input(r, i, false), 3, n);
}

/* A bound of a Slice, ONNX's way: from the end when negative, then clamped into [0, len]. */
static int64
slice_clamp(int64 b, int64 len)
{
	if (b < 0)
		b = b < -len ? 0 : b + len;
	return Min(b, len);
}

/* The batch's range of a Slice: only all of it, which the batch size (symbolic or fixed) tells. */
static void
slice_batch(Reader *r, int64 start, int64 end)
{
	bool		whole = r->batch > 0 ? slice_clamp(start, r->batch) == 0 && slice_clamp(end, r->batch) == r->batch
		: start == 0 && end >= PG_INT32_MAX;

	if (!whole)
		UNSUPPORTED(r, "It slices axis 0, the batch; pgdl computes each example alone.");
}

/* pgdl's slice of each row's features [start, end): of a flat value, or of each step of a sequence */
static void
slice_layer(Reader *r, int64 start, int64 end)
{
	NnLayerSpec *l = onnx_new_layer(r, NN_SLICE);

	l->start = (int32) start;
	l->units = (int32) (end - start);
	onnx_add_layer(r, NULL, 0, NULL, 0);
}

/*
 * Slice, step 1, of a [batch, features] value, or of a [batch, steps,
 * features] one held flat or a layer's sequence: the batch whole, a range of
 * the steps (of a value held flat, a range of its values: one slice), and a
 * range of the features of every step (a slice on each step of a sequence).
 */
void
onnx_read_slice(Reader *r)
{
	bool		held = r->n_held == 2 && r->shape.ndim == 1;
	bool		seq = r->shape.ndim == 2 && r->n_held == 0;
	int			rank = held || seq ? 3 : 2;
	int64		len[3] = {r->batch, held ? r->held[0] : seq ? r->shape.c : r->shape.c, held ? r->held[1] : r->shape.w};
	int64		lo[3] = {0, 0, 0};
	int64		hi[3] = {0, len[1], len[2]};
	int64		n,
				n_end,
				n_axes = 0,
				n_steps = 0;
	int64	   *starts,
			   *ends,
			   *axes,
			   *steps;

	if (r->opset < 10)
		UNSUPPORTED(r, "pgdl reads Slice from opset 10 on (its bounds as inputs).");
	if (!held && !seq)
		onnx_need_flat(r);
	starts = slice_input(r, 1, false, &n);
	ends = slice_input(r, 2, false, &n_end);
	axes = slice_input(r, 3, true, &n_axes);
	steps = slice_input(r, 4, true, &n_steps);
	if (n_end != n || (axes && n_axes != n) || (steps && n_steps != n))
		MALFORMED(r, "Its starts, ends, axes and steps differ in length.");
	for (int64 k = 0; k < n; k++)
	{
		int64		axis = axes ? axes[k] : k;

		if (axis < 0)
			axis += rank;
		if (axis < 0 || axis >= rank)
			MALFORMED(r, "Its axis " INT64_FORMAT " is not one of its input's %d.", axes ? axes[k] : k, rank);
		if (steps && steps[k] != 1)
			UNSUPPORTED(r, "Its \"steps\" are not 1; pgdl's slice takes consecutive values.");
		if (axis == 0)
		{
			slice_batch(r, starts[k], ends[k]);
			continue;
		}
		lo[axis] = slice_clamp(starts[k], len[axis]);
		hi[axis] = slice_clamp(ends[k], len[axis]);
		if (hi[axis] <= lo[axis])
			UNSUPPORTED(r, "It takes nothing of axis " INT64_FORMAT " (start " INT64_FORMAT ", end " INT64_FORMAT
						" of " INT64_FORMAT "); pgdl's slice takes at least one value.", axis, lo[axis], hi[axis], len[axis]);
	}
	if (rank == 2)
	{
		if (lo[1] != 0 || hi[1] != len[1])
			slice_layer(r, lo[1], hi[1]);
		return;
	}
	if (seq && (lo[1] != 0 || hi[1] != len[1]))
		UNSUPPORTED(r, "It slices the steps of a layer's sequence; pgdl slices the features of each step.");
	if (lo[1] != 0 || hi[1] != len[1])
		slice_layer(r, lo[1] * len[2], hi[1] * len[2]);	/* steps of a value held flat: consecutive values */
	if (lo[2] != 0 || hi[2] != len[2])
	{
		int64		dims[3] = {1, hi[1] - lo[1], hi[2] - lo[2]};

		if (held)
			onnx_to_groups(r, hi[1] - lo[1]);
		slice_layer(r, lo[2], hi[2]);
		if (held)
			onnx_from_groups(r, dims, 3);
		return;
	}
	if (held)
		r->held[0] = hi[1] - lo[1];
}

/*
 * The indices of a Gather along axis 1 as runs of consecutive ones, at most
 * NN_MAX_INPUTS: run k takes starts[k] .. starts[k] + lens[k] - 1.
 */
static int
gather_runs(Reader *r, const int64 *idx, int64 n, int64 len, int64 *starts, int64 *lens)
{
	int			k = 0;

	for (int64 i = 0; i < n; i++)
	{
		int64		j = idx[i] < 0 ? idx[i] + len : idx[i];

		if (j < 0 || j >= len)
			MALFORMED(r, "Its index " INT64_FORMAT " is outside axis 1's " INT64_FORMAT " values.", idx[i], len);
		if (k > 0 && j == starts[k - 1] + lens[k - 1])
		{
			lens[k - 1]++;
			continue;
		}
		if (k == NN_MAX_INPUTS)
			UNSUPPORTED(r, "Its indices make more than %d runs of consecutive ones; pgdl joins a slice of each, and "
						"its concat joins at most %d.", NN_MAX_INPUTS, NN_MAX_INPUTS);
		starts[k] = j;
		lens[k++] = 1;
	}
	return k;
}

/*
 * Gather along axis 1 of a float value by constant indices: each index takes
 * a block of the example's values (axis 1's, with all the axes after it), so
 * on the value flat a run of consecutive indices is one slice, and several
 * runs a concat of their slices, in the indices' order.  The result has the
 * indices' dims in place of axis 1 and is held flat.
 */
void
onnx_read_gather(Reader *r)
{
	int64		dims[ONNX_MAX_HELD + 1];
	int			rank = onnx_value_dims(r, dims);
	int64		axis = onnx_attr_int(r, "axis", 0);
	const Onnx__TensorProto *t;
	int64		n,
				block = 1,
				starts[NN_MAX_INPUTS],
				lens[NN_MAX_INPUTS];
	int64	   *idx;
	int			k,
				src,
				out_rank;
	NnLayerSpec *l;

	if (r->node->n_input != 2 || strcmp(r->node->input[0], r->value) != 0)
		UNSUPPORTED(r, "It gathers from a constant; pgdl gathers from a table only as an embedding of int64 ids.");
	if (axis < 0)
		axis += rank;
	if (axis != 1)
		UNSUPPORTED(r, "Its \"axis\" is " INT64_FORMAT "; pgdl gathers along axis 1 (axis 0 is the batch).",
					onnx_attr_int(r, "axis", 0));
	t = onnx_const_input(r, 1, false);
	idx = onnx_tensor_int64s(r, t, NN_MAX_DIM, &n);
	out_rank = rank - 1 + (int) t->n_dims;
	if (n < 1 || out_rank > ONNX_MAX_HELD + 1)
		UNSUPPORTED(r, "It takes %s; pgdl holds values of rank 1 to %d.", n < 1 ? "no values" : "a value of a higher rank",
					ONNX_MAX_HELD + 1);
	for (int d = 2; d < rank; d++)
		block *= dims[d];
	k = gather_runs(r, idx, n, dims[1], starts, lens);
	if (r->shape.ndim != 1)
	{
		onnx_new_layer(r, NN_FLATTEN);
		onnx_add_layer(r, NULL, 0, NULL, 0);
	}
	src = r->src;
	for (int i = 0; i < k && !(k == 1 && lens[0] == dims[1]); i++)
	{
		r->src = src;
		l = onnx_new_layer(r, NN_SLICE);
		l->start = (int32) (starts[i] * block);
		l->units = (int32) Min(lens[i] * block, PG_INT32_MAX);
		onnx_add_layer(r, NULL, 0, NULL, 0);
	}
	if (k > 1)
	{
		int			first = r->spec->n_layers - k;

		l = onnx_new_layer(r, NN_CONCAT);
		l->n_inputs = (int16) k;
		for (int i = 0; i < k; i++)
			l->inputs[i] = (int16) (first + i);
		onnx_add_layer(r, NULL, 0, NULL, 0);
	}
	/* the value's dims: the indices' in place of axis 1 */
	r->rank1 = out_rank == 1;
	r->n_held = out_rank > 2 ? out_rank - 1 : 0;
	for (int d = 0; d < (int) t->n_dims && out_rank > 2; d++)
		r->held[d] = t->dims[d];
	for (int d = 2; d < rank && out_rank > 2; d++)
		r->held[t->n_dims + d - 2] = dims[d];
}
