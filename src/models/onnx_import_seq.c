/*
 * onnx_import_seq.c -- what torch.onnx.export writes around sequence layers,
 * read into pgdl's embedding and gru: the graph's INT64 ids, Gather of an
 * embedding table, the Transposes to and from ONNX's time-first GRU, the GRU
 * node, the Squeeze or Gather that takes its last state, and the shape
 * arithmetic (Shape, Gather, Unsqueeze, Concat, ConstantOfShape) that makes
 * its initial state, zeros [1, batch, units] for whatever the batch.
 *
 * Those values are no layer's: each is an OnnxValue of its own kind, and only
 * the operators that make the pattern read it; any other is refused, naming
 * the node.  Shapes are known when reading but for the batch (ONNX_DIM_BATCH).
 */
#include "postgres.h"

#include "miscadmin.h"

#include "base/base.h"
#include "spec/spec.h"
#include "models/models.h"
#include "models/onnx_reader.h"

static void
put_dims(Reader *r, OnnxValueKind kind, int n, const int64 *dims)
{
	if (n > ONNX_MAX_SHAPE)
		UNSUPPORTED(r, "Its output has %d values; pgdl reads shapes of at most %d.", n, ONNX_MAX_SHAPE);
	r->out_kind = kind;
	r->out_n_dims = n;
	memcpy(r->out_dims, dims, sizeof(int64) * n);
}

/* Shape of a value: its dims, the batch as ONNX_DIM_BATCH. */
static void
read_shape(Reader *r)
{
	const OnnxValue *v = r->in;
	int64		dims[ONNX_MAX_SHAPE];
	int			n = 0;

	if (onnx_attr(r, "start", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) ||
		onnx_attr(r, "end", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT))
		UNSUPPORTED(r, "It has \"start\" or \"end\"; pgdl reads whole shapes.");
	if (v->att != NULL)
	{
		n = onnx_attention_dims(v, dims);
		if (n == 0)
			UNSUPPORTED(r, "pgdl reads the shape of an attention's in-projection, q, k, v and output only.");
	}
	else if (v->kind == ONNX_VALUE_TIME_FIRST)
	{
		dims[n++] = v->shape.c;
		dims[n++] = ONNX_DIM_BATCH;
		dims[n++] = v->shape.w;
	}
	else if (v->n_held > 0)
	{
		dims[n++] = ONNX_DIM_BATCH;
		for (int d = 0; d < v->n_held && n < ONNX_MAX_SHAPE; d++)
			dims[n++] = v->held[d];
	}
	else
	{
		dims[n++] = ONNX_DIM_BATCH;
		dims[n++] = v->shape.c;
		if (v->shape.ndim == 3)
			dims[n++] = v->shape.h;
		if (v->shape.ndim >= 2)
			dims[n++] = v->shape.w;
	}
	put_dims(r, ONNX_VALUE_SHAPE, n, dims);
}

/* A constant INT64 index or axes list of the node (input i), or its attribute `name` before `opset`. */
int64 *
onnx_int64s_input(Reader *r, size_t i, const char *name, int64 opset, int64 *n)
{
	const Onnx__AttributeProto *a;

	if (r->opset >= opset)
		return onnx_tensor_int64s(r, onnx_const_input(r, i, false), ONNX_MAX_SHAPE, n);
	a = onnx_attr(r, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	if (a == NULL)
		UNSUPPORTED(r, "It has no \"%s\".", name);
	*n = (int64) a->n_ints;
	return a->ints;
}

/* Input i of the node as one integer: a shape of one value (the batch as -1, k batches -k) or an INT64 constant. */
int64
onnx_shape_scalar(Reader *r, size_t i)
{
	OnnxValue  *s = i < r->node->n_input ? onnx_find_value(r, r->node->input[i]) : NULL;
	int64		n;
	int64	   *v;

	if (s != NULL && s->kind == ONNX_VALUE_SHAPE && s->n_dims == 1)
		return s->dims[0];
	if (s != NULL)
		UNSUPPORTED(r, "Its input %zu is not one integer.", i);
	v = onnx_tensor_int64s(r, onnx_const_input(r, i, false), 1, &n);
	if (n != 1)
		UNSUPPORTED(r, "Its input %zu is not one integer.", i);
	return v[0];
}

/*
 * Mul, Add, Div of one-value shapes and integers, and Cast to INT64: the
 * arithmetic torch does on a tensor's dims (the head size E / heads, the batch
 * times the heads).  The batch stays a factor: k batches is -k.
 */
static void
read_shape_arith(Reader *r, PgdlOnnxOp op)
{
	int64		a = r->in->dims[0];
	int64		b = 0;
	int64		out;

	if (r->in->n_dims != 1)
		UNSUPPORTED(r, "It computes on a shape of %d values; pgdl computes on one.", r->in->n_dims);
	if (op == PGDL_ONNX_CAST)
	{
		if (onnx_attr_int(r, "to", 0) != ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
			UNSUPPORTED(r, "It casts a shape to another type than INT64.");
		return put_dims(r, ONNX_VALUE_SHAPE, 1, &a);
	}
	b = onnx_shape_scalar(r, strcmp(r->node->input[0], r->value) == 0 ? 1 : 0);
	/* dims are far below this; a file's constants may be anything, and their products must not overflow */
	if (a < -PG_INT32_MAX || a > PG_INT32_MAX || b < -PG_INT32_MAX || b > PG_INT32_MAX)
		UNSUPPORTED(r, "It computes on a value beyond the dims of any tensor pgdl reads.");
	if (op == PGDL_ONNX_MUL && (a >= 0 || b >= 0))
		out = a * b;
	else if (op == PGDL_ONNX_ADD && a >= 0 && b >= 0 && a <= PG_INT32_MAX && b <= PG_INT32_MAX)
		out = a + b;
	else if (op == PGDL_ONNX_DIV && b > 0 && (a >= 0 || (-a) % b == 0) && strcmp(r->node->input[0], r->value) == 0)
		out = a >= 0 ? a / b : -((-a) / b);
	else
		UNSUPPORTED(r, "pgdl computes on a shape only what torch's attention and GRU do (a product, a sum or a "
					"quotient of known dims, the batch a factor).");
	put_dims(r, ONNX_VALUE_SHAPE, 1, &out);
}

/* Gather of one value of a shape (axis 0), Unsqueeze of it to a vector, Concat of shapes and constants. */
static void
read_shape_op(Reader *r, PgdlOnnxOp op)
{
	int64		n;
	int64	   *v;
	int64		dims[ONNX_MAX_SHAPE];
	int			k = 0;

	if (op == PGDL_ONNX_GATHER)
	{
		v = onnx_tensor_int64s(r, onnx_const_input(r, 1, false), 1, &n);
		if (onnx_attr_int(r, "axis", 0) != 0 || n != 1 || v[0] < -r->in->n_dims || v[0] >= r->in->n_dims)
			UNSUPPORTED(r, "It does not take one value of a shape; pgdl reads shapes only to make a GRU's initial state.");
		dims[0] = r->in->dims[v[0] < 0 ? v[0] + r->in->n_dims : v[0]];
		return put_dims(r, ONNX_VALUE_SHAPE, 1, dims);
	}
	if (op == PGDL_ONNX_UNSQUEEZE)
	{
		v = onnx_int64s_input(r, 1, "axes", 13, &n);
		if (n != 1 || v[0] != 0 || r->in->n_dims != 1)
			UNSUPPORTED(r, "It does not make a vector of one value; pgdl reads shapes only to make a GRU's initial state.");
		return put_dims(r, ONNX_VALUE_SHAPE, 1, r->in->dims);
	}
	if (op != PGDL_ONNX_CONCAT || onnx_attr_int(r, "axis", -1) != 0)
		UNSUPPORTED(r, "pgdl reads a shape only through Gather, Unsqueeze, Concat (axis 0) and ConstantOfShape.");
	for (size_t i = 0; i < r->node->n_input; i++)
	{
		OnnxValue  *s = onnx_find_value(r, r->node->input[i]);

		if (s != NULL && s->kind != ONNX_VALUE_SHAPE)
			UNSUPPORTED(r, "It joins a shape and a tensor (\"%s\").", pgdl_echo(s->name));
		v = s ? s->dims : onnx_tensor_int64s(r, onnx_const_input(r, i, false), ONNX_MAX_SHAPE, &n);
		n = s ? s->n_dims : n;
		if (k + n > ONNX_MAX_SHAPE)
			UNSUPPORTED(r, "It makes a shape of more than %d values.", ONNX_MAX_SHAPE);
		memcpy(dims + k, v, sizeof(int64) * n);
		k += (int) n;
	}
	put_dims(r, ONNX_VALUE_SHAPE, k, dims);
}

/* ConstantOfShape of zeros (its "value" absent, or a float 0): a tensor pgdl knows to be zeros. */
static void
read_constant_of_shape(Reader *r)
{
	const Onnx__AttributeProto *a = onnx_attr(r, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);

	if (a != NULL)
	{
		int64		n;
		float	   *v;

		if (a->t == NULL)
			MALFORMED(r, "Its \"value\" holds no tensor.");
		v = onnx_tensor_floats(r, a->t, &n);
		if (n != 1 || v[0] != 0.0f)
			UNSUPPORTED(r, "Its \"value\" is not one float 0; pgdl reads a ConstantOfShape only as a GRU's zero "
						"initial state.");
	}
	put_dims(r, ONNX_VALUE_ZEROS, r->in->n_dims, r->in->dims);
}

/* Gather (axis 0) of the rows of a float table [vocab, dim] by the graph's ids: an embedding. */
static void
read_embedding(Reader *r)
{
	const Onnx__TensorProto *t;
	NnLayerSpec *l;
	float	   *w;
	int64		n;

	if (r->node->n_input != 2 || strcmp(r->node->input[1], r->in->name) != 0 || onnx_attr_int(r, "axis", 0) != 0)
		UNSUPPORTED(r, "It is not a Gather (axis 0) of a table's rows by the ids; pgdl reads ids only as an "
					"embedding's.");
	t = onnx_const_input(r, 0, false);
	w = onnx_tensor_floats(r, t, &n);
	if (t->n_dims != 2 || t->dims[0] < 1 || t->dims[1] < 1 || t->dims[0] > NN_MAX_DIM || t->dims[1] > NN_MAX_DIM)
		UNSUPPORTED(r, "Its table is not a matrix [vocab, dim]; pgdl's embedding has one.");
	l = onnx_new_layer(r, NN_EMBEDDING);
	l->vocab = (int32) t->dims[0];
	l->units = (int32) t->dims[1];
	onnx_add_layer(r, w, n, NULL, 0);
}

/* Cast to INT64 of the graph's float input (pgdl's export of an embedding): the ids. */
static void
read_cast_ids(Reader *r)
{
	if (onnx_attr_int(r, "to", 0) != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || r->src != -1 || r->n_held > 0 ||
		r->shape.ndim != 1)
		UNSUPPORTED(r, "pgdl reads a Cast only to INT64 of the graph's flat input: an embedding's ids.");
	r->out_kind = ONNX_VALUE_IDS;
}

/*
 * Add of a constant [steps, dim] to an embedding's output, the one node that
 * reads it: the embedding's table of positions (pgdl's export writes one).
 */
static bool
read_positions(Reader *r)
{
	NnLayerSpec *l = r->src >= 0 ? &r->spec->layers[r->src] : NULL;
	size_t		other = strcmp(r->node->input[0], r->value) == 0 ? 1 : 0;
	const Onnx__TensorProto *t;
	int64		n;

	if (l == NULL || l->type != NN_EMBEDDING || l->positions || r->node->n_input != 2 ||
		onnx_find_const(r, r->node->input[other]) == NULL)
		return false;
	t = onnx_const_input(r, other, false);
	if (r->in->uses != 1 || r->src != r->spec->n_layers - 1 || t->n_dims != 2 || t->dims[0] != r->shape.c ||
		t->dims[1] != r->shape.w)
		UNSUPPORTED(r, "It adds a constant to an embedding that is not a table [%d, %d] of its positions, "
					"added where nothing else reads the embedding.", r->shape.c, r->shape.w);
	l->positions = true;
	r->tensor[r->src][1] = onnx_tensor_floats(r, t, &n);
	r->length[r->src][1] = n;
	r->in->closed = true;
	return true;
}

/* Transpose [1, 0, 2]: a sequence to time first (for ONNX's GRU), or a GRU's steps back to batch first. */
static void
read_transpose(Reader *r)
{
	const Onnx__AttributeProto *a = onnx_attr(r, "perm", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);

	if (a == NULL || a->n_ints != 3 || a->ints[0] != 1 || a->ints[1] != 0 || a->ints[2] != 2 ||
		(r->in->kind == ONNX_VALUE_TENSOR && (r->shape.ndim != 2 || r->n_held > 0)))
		UNSUPPORTED(r, "pgdl reads a Transpose only as perm [1, 0, 2] of a sequence [batch, steps, features] made "
					"by a layer: to time first and back, around a GRU or torch's attention.");
	r->out_kind = r->in->kind == ONNX_VALUE_TENSOR ? ONNX_VALUE_TIME_FIRST : ONNX_VALUE_TENSOR;
}

/* Whether a node after this one reads the tensor called name. */
static bool
read_later(Reader *r, const char *name)
{
	for (size_t j = (size_t) r->index + 1; j < r->g->n_node; j++)
		for (size_t i = 0; i < r->g->node[j]->n_input; i++)
			if (name[0] != '\0' && strcmp(r->g->node[j]->input[i], name) == 0)
				return true;
	return false;
}

/* GRU's attributes as torch writes them: forward, linear_before_reset, the default activations. */
static void
check_gru_attrs(Reader *r, int64 units)
{
	const Onnx__AttributeProto *acts = onnx_attr(r, "activations", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);

	if (onnx_attr_int(r, "linear_before_reset", 0) != 1)
		UNSUPPORTED(r, "Its \"linear_before_reset\" is not 1; pgdl's gru is torch's, which applies the reset gate "
					"after the recurrent weights.");
	if (onnx_attr(r, "direction", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) &&
		!onnx_attr_string_is(r, "direction", "forward"))
		UNSUPPORTED(r, "Its \"direction\" is not forward; pgdl's gru is one direction.");
	if (acts != NULL || onnx_attr(r, "clip", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) ||
		onnx_attr_int(r, "layout", 0) != 0)
		UNSUPPORTED(r, "It sets \"activations\", \"clip\" or \"layout\"; pgdl's gru has the defaults.");
	if (units < 1 || units > NN_MAX_DIM)
		UNSUPPORTED(r, "Its \"hidden_size\" is missing or out of range.");
	if (r->node->n_input > 4 && r->node->input[4][0] != '\0')
		UNSUPPORTED(r, "It has \"sequence_lens\"; pgdl's gru runs every step.");
	if (r->node->n_input > 5 && r->node->input[5][0] != '\0')
	{
		OnnxValue  *h0 = onnx_find_value(r, r->node->input[5]);

		if (h0 == NULL || h0->kind != ONNX_VALUE_ZEROS || h0->n_dims != 3 || h0->dims[0] != 1 ||
			h0->dims[1] != ONNX_DIM_BATCH || h0->dims[2] != units)
			UNSUPPORTED(r, "Its \"initial_h\" is not zeros [1, batch, %d]; pgdl's gru starts from zeros.", (int) units);
	}
}

/*
 * One of W, R, B: [1, 3 h, cols], or B [1, 6 h] (two triples), each triple of
 * gate blocks in ONNX's order z, r, h put in torch's r, z, n.
 */
static float *
gru_tensor(Reader *r, size_t i, int triples, int64 h, int64 cols)
{
	const Onnx__TensorProto *t = onnx_const_input(r, i, false);
	int64		rows = 3 * triples * h;
	int64		block = h * cols;
	int64		n;
	float	   *v = onnx_tensor_floats(r, t, &n);
	float	   *out = palloc(sizeof(float) * Max(n, 1));

	if (n != rows * cols || t->n_dims < 2 || t->dims[0] != 1 || t->dims[1] != rows)
		UNSUPPORTED(r, "Its input %zu is not [1, " INT64_FORMAT ", ...] of " INT64_FORMAT " values.", i, rows,
					rows * cols);
	for (int k = 0; k < triples; k++)
	{
		float	   *o = out + 3 * k * block;
		const float *in = v + 3 * k * block;

		memcpy(o, in + block, sizeof(float) * block);
		memcpy(o + block, in, sizeof(float) * block);
		memcpy(o + 2 * block, in + 2 * block, sizeof(float) * block);
	}
	return out;
}

/* ONNX's GRU on a time-first sequence: pgdl's gru, its last state or every step's as later nodes read. */
static void
read_gru(Reader *r)
{
	int64		h = onnx_attr_int(r, "hidden_size", 0);
	int64		f = r->shape.w;
	bool		steps = r->node->n_output > 0 && read_later(r, r->node->output[0]);
	bool		state = r->node->n_output > 1 && read_later(r, r->node->output[1]);
	int			i = r->spec->n_layers;
	NnLayerSpec *l;
	float	   *b;

	check_gru_attrs(r, h);
	if (steps && state)
		UNSUPPORTED(r, "Later nodes read both its outputs; pgdl's gru gives every step's state or the last one.");
	l = onnx_new_layer(r, NN_GRU);
	l->units = (int32) h;
	l->return_sequences = steps;
	b = onnx_const_input(r, 3, true) ? gru_tensor(r, 3, 2, h, 1) : palloc0(sizeof(float) * 6 * h);
	onnx_add_layer(r, gru_tensor(r, 1, 1, h, f), 3 * h * f, gru_tensor(r, 2, 1, h, h), 3 * h * h);
	r->tensor[i][2] = b;
	r->length[i][2] = 3 * h;
	r->tensor[i][3] = b + 3 * h;
	r->length[i][3] = 3 * h;
	r->out_kind = ONNX_VALUE_GRU_STEPS;
	if (r->node->output[0][0] != '\0')
		onnx_put_value(r, r->node->output[0]);
	if (r->node->n_output > 1 && r->node->output[1][0] != '\0')
	{
		r->out_kind = ONNX_VALUE_GRU_STATE;
		onnx_put_value(r, r->node->output[1]);
	}
	r->outputs_done = true;
}

/* Y_h's first axis gone (Squeeze, or Gather of index 0 or -1), or Y's direction axis (Squeeze of axis 1). */
static void
read_gru_output(Reader *r, PgdlOnnxOp op)
{
	bool		state = r->in->kind == ONNX_VALUE_GRU_STATE;
	int64		n;
	int64	   *v;

	if (op == PGDL_ONNX_GATHER && state)
	{
		const Onnx__TensorProto *t = onnx_const_input(r, 1, false);

		v = onnx_tensor_int64s(r, t, 1, &n);
		if (t->n_dims != 0 || (v[0] != 0 && v[0] != -1) || onnx_attr_int(r, "axis", 0) != 0)
			UNSUPPORTED(r, "It is not a Gather of the GRU's one state (axis 0, a scalar index 0 or -1).");
	}
	else if (op == PGDL_ONNX_SQUEEZE)
	{
		v = onnx_int64s_input(r, 1, "axes", 13, &n);
		if (n != 1 || v[0] != (state ? 0 : 1))
			UNSUPPORTED(r, "It does not squeeze the GRU's direction axis (%d).", state ? 0 : 1);
	}
	else
		UNSUPPORTED(r, "pgdl reads a GRU's outputs through a Squeeze of their direction axis (or a Gather of Y_h's).");
	if (state == r->spec->layers[r->src].return_sequences)
		UNSUPPORTED(r, "It reads the GRU's other output than the one later nodes use.");
	r->out_kind = state ? ONNX_VALUE_TENSOR : ONNX_VALUE_TIME_FIRST;
}

/*
 * Operators on values that are no layer's output, and those that make them
 * (Shape, Transpose of a sequence); false: the node is a layer's to read.
 */
bool
onnx_value_op(Reader *r, PgdlOnnxOp op)
{
	switch (r->in->kind)
	{
		case ONNX_VALUE_TENSOR:
			if (op == PGDL_ONNX_SHAPE)
				read_shape(r);
			else if (op == PGDL_ONNX_TRANSPOSE)
				read_transpose(r);
			else if (op == PGDL_ONNX_CAST)
				read_cast_ids(r);
			else
				return op == PGDL_ONNX_ADD && read_positions(r);
			return true;
		case ONNX_VALUE_IDS:
			if (op == PGDL_ONNX_SHAPE)
				read_shape(r);
			else if (op == PGDL_ONNX_GATHER)
				read_embedding(r);
			else
				UNSUPPORTED(r, "Its input is the graph's int64 ids, which pgdl reads only through a Gather of an "
							"embedding table.");
			return true;
		case ONNX_VALUE_SHAPE:
			if (op == PGDL_ONNX_CONSTANTOFSHAPE)
				read_constant_of_shape(r);
			else if (op == PGDL_ONNX_MUL || op == PGDL_ONNX_ADD || op == PGDL_ONNX_DIV || op == PGDL_ONNX_CAST)
				read_shape_arith(r, op);
			else
				read_shape_op(r, op);
			return true;
		case ONNX_VALUE_ZEROS:
			UNSUPPORTED(r, "Its input is the zeros of a ConstantOfShape, which pgdl reads only as a GRU's initial state.");
		case ONNX_VALUE_TIME_FIRST:
			if (op == PGDL_ONNX_GRU)
				read_gru(r);
			else if (op == PGDL_ONNX_MATMUL)
				onnx_attention_start(r);
			else if (op == PGDL_ONNX_TRANSPOSE || op == PGDL_ONNX_SHAPE)
				op == PGDL_ONNX_SHAPE ? read_shape(r) : read_transpose(r);
			else
				UNSUPPORTED(r, "Its input is a sequence transposed to time first, which pgdl reads only as a GRU's "
							"input or transposed back.");
			return true;
		case ONNX_VALUE_GRU_STATE:
		case ONNX_VALUE_GRU_STEPS:
			read_gru_output(r, op);
			return true;
		default:
			/* the steps of an attention (onnx_attention.c) */
			if (op == PGDL_ONNX_SHAPE)
				read_shape(r);
			else
				onnx_read_attention(r, op);
			return true;
	}
	return false;
}
