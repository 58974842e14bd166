/*
 * onnx_attention.c -- torch.nn.MultiheadAttention as torch 1.13 writes it
 * (self-attention of a batch_first sequence, in nn.TransformerEncoderLayer),
 * read node by node into pgdl's attention layer:
 *
 *   Transpose to time first [L, B, E], MatMul by in_proj_weight', Add of
 *   in_proj_bias, three Slices (q, k, v) of the last axis, each Reshaped to
 *   [L, B * heads, d]; q Transposed to [B * heads, L, d] and divided by
 *   sqrt(d), k Transposed to [B * heads, d, L], v to [B * heads, L, d];
 *   MatMul q k', Softmax over the last axis, MatMul by v, Transpose to
 *   [L, B * heads, d], Reshape to [L * B, E], Gemm by out_proj, Reshape to
 *   [L, B, E], Transpose back to batch first: the layer.
 *
 * Every value in between is an ONNX_VALUE_ATT_* of one OnnxAttention, and
 * only the node that computes the next step reads it; the Shape, Gather,
 * Mul and Concat nodes that give the Slices' bounds and the Reshapes' shapes
 * are evaluated (onnx_import_seq.c), and each bound and shape is checked, so
 * that what is accepted is the attention pgdl computes.
 */
#include "postgres.h"

#include <math.h>

#include "base/base.h"
#include "spec/spec.h"
#include "models/models.h"
#include "models/onnx_reader.h"

#define E(att)	((int64) (att)->shape.w)
#define L(att)	((int64) (att)->shape.c)

/* The dims of an attention value that a Shape reads, the batch as -1 (k batches: -k); 0 when not one of those. */
int
onnx_attention_dims(const OnnxValue *v, int64 *dims)
{
	const OnnxAttention *a = v->att;

	if (a == NULL)
		return 0;
	switch (v->kind)
	{
		case ONNX_VALUE_ATT_QKV:
		case ONNX_VALUE_ATT_PART:
			dims[0] = L(a), dims[1] = -1, dims[2] = (v->kind == ONNX_VALUE_ATT_QKV ? 3 : 1) * E(a);
			return 3;
		case ONNX_VALUE_ATT_OUT_FLAT:
			dims[0] = -L(a), dims[1] = E(a);
			return 2;
		default:
			return 0;
	}
}

/* MatMul of a time-first sequence by a constant [E, 3E]: the in-projection of an attention begins. */
void
onnx_attention_start(Reader *r)
{
	const Onnx__TensorProto *t = onnx_const_input(r, 1, false);
	int64		e = r->shape.w;
	int64		n;
	float	   *w = onnx_tensor_floats(r, t, &n);
	OnnxAttention *a;

	if (t->n_dims != 2 || t->dims[0] != e || t->dims[1] != 3 * e)
		UNSUPPORTED(r, "Its weight is not [%d, %d]; pgdl reads a MatMul of a time-first sequence only as the "
					"in-projection of torch's multi-head attention.", (int) e, (int) (3 * e));
	a = palloc0(sizeof(OnnxAttention));
	a->src = r->src;
	a->shape = r->shape;
	a->in_w = palloc(sizeof(float) * n);
	for (int64 i = 0; i < 3 * e; i++)
		for (int64 j = 0; j < e; j++)
			a->in_w[i * e + j] = w[j * 3 * e + i];
	r->out_kind = ONNX_VALUE_ATT_PROJ;
	r->out_att = a;
}

/* A Reshape's target shape: a shape value or a constant, its dims as a shape's (the batch as -1). */
static int
target_shape(Reader *r, int64 *dims)
{
	OnnxValue  *s = r->node->n_input > 1 ? onnx_find_value(r, r->node->input[1]) : NULL;
	int64		n;
	int64	   *v;

	if (s != NULL && s->kind == ONNX_VALUE_SHAPE)
	{
		memcpy(dims, s->dims, sizeof(int64) * s->n_dims);
		return s->n_dims;
	}
	v = onnx_tensor_int64s(r, onnx_const_input(r, 1, false), ONNX_MAX_SHAPE, &n);
	memcpy(dims, v, sizeof(int64) * n);
	return (int) n;
}

static void
next(Reader *r, OnnxValueKind kind)
{
	r->out_kind = kind;
}

/* Slice k of the in-projection's last axis: [k E, (k + 1) E), q, k or v. */
static void
read_part(Reader *r)
{
	OnnxAttention *a = r->in->att;
	int64		start = onnx_shape_scalar(r, 1);
	int64		end = onnx_shape_scalar(r, 2);
	int64		axis = r->node->n_input > 3 ? onnx_shape_scalar(r, 3) : 0;

	if ((axis != -1 && axis != 2) || (r->node->n_input > 4 && onnx_shape_scalar(r, 4) != 1) ||
		start < 0 || start > 2 * E(a) || start % E(a) != 0 || end != start + E(a))
		UNSUPPORTED(r, "It is not a slice [k E, (k + 1) E) of the last axis of the attention's in-projection "
					"(E = %d).", (int) E(a));
	r->out_part = (int) (start / E(a));
	next(r, ONNX_VALUE_ATT_PART);
}

/* Reshape of q, k or v to [L, B * heads, d]: the heads, the same for all three. */
static void
read_heads(Reader *r)
{
	OnnxAttention *a = r->in->att;
	int64		dims[ONNX_MAX_SHAPE];
	int			n = target_shape(r, dims);

	if (n != 3 || dims[0] != L(a) || dims[1] >= 0 || dims[1] < -E(a) || dims[2] < 1 || dims[2] > E(a) ||
		-dims[1] * dims[2] != E(a) ||
		(a->heads != 0 && a->heads != -dims[1]))
		UNSUPPORTED(r, "It does not reshape the attention's %s to [%d, batch * heads, %d / heads].",
					r->in->part == 0 ? "q" : r->in->part == 1 ? "k" : "v", (int) L(a), (int) E(a));
	a->heads = -dims[1];
	next(r, ONNX_VALUE_ATT_HEADS);
}

/* A Transpose of the attention's values: perm says which step it is. */
static void
read_att_transpose(Reader *r)
{
	const Onnx__AttributeProto *p = onnx_attr(r, "perm", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	bool		swap = p && p->n_ints == 3 && p->ints[0] == 1 && p->ints[1] == 0 && p->ints[2] == 2;
	bool		kt = p && p->n_ints == 3 && p->ints[0] == 1 && p->ints[1] == 2 && p->ints[2] == 0;
	OnnxValueKind k = r->in->kind;

	if (k == ONNX_VALUE_ATT_HEADS && swap && r->in->part != 1)
		return next(r, r->in->part == 0 ? ONNX_VALUE_ATT_Q : ONNX_VALUE_ATT_V);
	if (k == ONNX_VALUE_ATT_HEADS && kt && r->in->part == 1)
		return next(r, ONNX_VALUE_ATT_KT);
	if (k == ONNX_VALUE_ATT_CTX && swap)
		return next(r, ONNX_VALUE_ATT_CTX_TF);
	if (k == ONNX_VALUE_ATT_OUT_TF && swap)
	{
		OnnxAttention *a = r->in->att;
		int			i = r->spec->n_layers;

		/* the layer reads the sequence the attention began from */
		r->src = a->src;
		r->shape = a->shape;
		onnx_new_layer(r, NN_ATTENTION)->heads = (int32) a->heads;
		onnx_add_layer(r, a->in_w, 3 * E(a) * E(a), a->out_w, E(a) * E(a));
		r->tensor[i][2] = a->in_b;
		r->length[i][2] = 3 * E(a);
		r->tensor[i][3] = a->out_b;
		r->length[i][3] = E(a);
		r->out_att = NULL;
		return next(r, ONNX_VALUE_TENSOR);
	}
	UNSUPPORTED(r, "Its \"perm\" is not the one torch's multi-head attention has at this step.");
}

/* q divided by sqrt(d) (or multiplied by its inverse), d = E / heads. */
static void
read_scale(Reader *r, PgdlOnnxOp op)
{
	OnnxAttention *a = r->in->att;
	double		d = (double) E(a) / (double) a->heads;
	size_t		other = strcmp(r->node->input[0], r->value) == 0 ? 1 : 0;
	int64		n;
	float	   *c = r->node->n_input == 2 ? onnx_tensor_floats(r, onnx_const_input(r, other, false), &n) : NULL;
	double		want = op == PGDL_ONNX_DIV ? sqrt(d) : 1.0 / sqrt(d);

	if (c == NULL || n != 1 || (op == PGDL_ONNX_DIV && other != 1) || fabs(c[0] - want) > 1e-6 * want)
		UNSUPPORTED(r, "It does not scale the attention's q by 1 / sqrt(%g).", d);
	next(r, ONNX_VALUE_ATT_QS);
}

/* MatMul q k' (then kind SCORES) or probs v (CTX): its second input the attention's k' or v. */
static void
read_att_matmul(Reader *r)
{
	OnnxValue  *b = r->node->n_input == 2 ? onnx_find_value(r, r->node->input[1]) : NULL;
	bool		scores = r->in->kind == ONNX_VALUE_ATT_QS;

	if (b == NULL || b->att != r->in->att || b->kind != (scores ? ONNX_VALUE_ATT_KT : ONNX_VALUE_ATT_V) ||
		strcmp(r->node->input[0], r->value) != 0)
		UNSUPPORTED(r, "It is not the attention's %s.", scores ? "q k'" : "softmax by v");
	next(r, scores ? ONNX_VALUE_ATT_SCORES : ONNX_VALUE_ATT_CTX);
}

/* Gemm of [L B, E] by out_proj.weight and its bias. */
static void
read_out_proj(Reader *r)
{
	OnnxAttention *a = r->in->att;
	const Onnx__TensorProto *t = onnx_const_input(r, 1, false);
	bool		transposed = onnx_attr_int(r, "transB", 0) != 0;
	int64		e = E(a);
	int64		n;
	float	   *w = onnx_tensor_floats(r, t, &n);

	if (onnx_attr_float(r, "alpha", 1.0f) != 1.0f || onnx_attr_float(r, "beta", 1.0f) != 1.0f ||
		onnx_attr_int(r, "transA", 0) != 0 || t->n_dims != 2 || t->dims[0] != e || t->dims[1] != e)
		UNSUPPORTED(r, "It is not the attention's out-projection, [%d, %d] plus a bias.", (int) e, (int) e);
	a->out_w = w;
	if (!transposed)
	{
		a->out_w = palloc(sizeof(float) * n);
		for (int64 i = 0; i < e; i++)
			for (int64 j = 0; j < e; j++)
				a->out_w[i * e + j] = w[j * e + i];
	}
	a->out_b = onnx_const_input(r, 2, true) ? onnx_const_vector(r, 2, e, true) : palloc0(sizeof(float) * e);
	next(r, ONNX_VALUE_ATT_OUT_FLAT);
}

/* A Reshape of the attention's context to [L B, E], or of its output back to [L, B, E]. */
static void
read_att_reshape(Reader *r)
{
	OnnxAttention *a = r->in->att;
	int64		dims[ONNX_MAX_SHAPE];
	int			n = target_shape(r, dims);
	bool		flat = r->in->kind == ONNX_VALUE_ATT_CTX_TF;

	if (flat ? n != 2 || dims[0] != -L(a) || dims[1] != E(a) :
		n != 3 || dims[0] != L(a) || dims[1] != -1 || dims[2] != E(a))
		UNSUPPORTED(r, "It does not reshape the attention's %s to %s.", flat ? "context" : "output",
					flat ? "[steps * batch, features]" : "[steps, batch, features]");
	next(r, flat ? ONNX_VALUE_ATT_FLAT : ONNX_VALUE_ATT_OUT_TF);
}

/* The next node of an attention whose values reach it; any other node reading them is refused. */
void
onnx_read_attention(Reader *r, PgdlOnnxOp op)
{
	OnnxValueKind k = r->in->kind;

	if (k == ONNX_VALUE_ATT_PROJ && op == PGDL_ONNX_ADD && r->node->n_input == 2 && r->in->uses == 1)
	{
		r->in->att->in_b = onnx_const_vector(r, strcmp(r->node->input[0], r->value) == 0 ? 1 : 0,
											 3 * E(r->in->att), false);
		return next(r, ONNX_VALUE_ATT_QKV);
	}
	if (k == ONNX_VALUE_ATT_QKV && op == PGDL_ONNX_SLICE)
		return read_part(r);
	if ((k == ONNX_VALUE_ATT_PART && op == PGDL_ONNX_RESHAPE))
		return read_heads(r);
	if (op == PGDL_ONNX_TRANSPOSE)
		return read_att_transpose(r);
	if (k == ONNX_VALUE_ATT_Q && (op == PGDL_ONNX_DIV || op == PGDL_ONNX_MUL))
		return read_scale(r, op);
	if ((k == ONNX_VALUE_ATT_QS || k == ONNX_VALUE_ATT_PROBS) && op == PGDL_ONNX_MATMUL)
		return read_att_matmul(r);
	if (k == ONNX_VALUE_ATT_SCORES && op == PGDL_ONNX_SOFTMAX &&
		(onnx_attr_int(r, "axis", -1) == -1 || onnx_attr_int(r, "axis", -1) == 2) && r->opset >= 13)
		return next(r, ONNX_VALUE_ATT_PROBS);
	if ((k == ONNX_VALUE_ATT_CTX_TF || k == ONNX_VALUE_ATT_OUT_FLAT) && op == PGDL_ONNX_RESHAPE)
		return read_att_reshape(r);
	if (k == ONNX_VALUE_ATT_FLAT && op == PGDL_ONNX_GEMM)
		return read_out_proj(r);
	UNSUPPORTED(r, "Its input \"%s\" is a step of a multi-head attention, which pgdl reads only as torch 1.13 "
				"computes it, node by node; this node is not its next step.", pgdl_echo(r->value));
}
