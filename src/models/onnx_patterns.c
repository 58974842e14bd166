/*
 * onnx_patterns.c -- subgraphs of elementwise nodes that are one pgdl layer:
 * the exact GELU as exporters write it before opset 20 (Div by sqrt(2) or Mul
 * by its inverse, Erf, Add of 1, Mul by the input, Mul by 0.5: torch's
 * nn.GELU and pgdl's own export), and LayerNorm decomposed as torch 1.13
 * writes it below opset 17 (ReduceMean, Sub, Pow 2, ReduceMean, Add of eps,
 * Sqrt, Div, then Mul by the weight and Add of the bias).
 *
 * A pattern is recognized at its first node, and the nodes it takes in are
 * marked consumed so that the walk skips them.  Each tensor inside a pattern
 * must have no reader outside it (and not be the graph's output): the layer
 * computes only the pattern's end.  Anything that does not match is left to
 * the node's own reading, which refuses it, naming the node.
 */
#include "postgres.h"

#include <math.h>

#include "base/base.h"
#include "spec/spec.h"
#include "models/models.h"
#include "models/onnx_reader.h"

#define PATTERN_TOL		1e-6f	/* relative: the constants of float32 files, sqrt(2) rounded */

/* The node after the current one that reads `name` and is of `op`; with `sole`, the only reader of name. */
static int
reader(Reader *r, const char *name, PgdlOnnxOp op, bool sole)
{
	int			found = -1;
	int			readers = 0;

	if (strcmp(r->g->output[0]->name, name) == 0)
		return -1;
	for (size_t j = (size_t) r->index + 1; j < r->g->n_node; j++)
		for (size_t i = 0; i < r->g->node[j]->n_input; i++)
			if (strcmp(r->g->node[j]->input[i], name) == 0)
			{
				readers++;
				/* the pattern goes on from its first output: a node without one ends it */
				if (found < 0 && !r->consumed[j] && pgdl_onnx_op_from_name(r->g->node[j]->op_type) == op &&
					r->g->node[j]->n_output >= 1 && r->g->node[j]->output[0][0] != '\0')
					found = (int) j;
				break;
			}
	return sole && readers != 1 ? -1 : found;
}

/* Node j's input that is not `name` (of two), as a constant's floats; NULL when it is no constant. */
static float *
other_const(Reader *r, int j, const char *name, int64 *n)
{
	const Onnx__NodeProto *node = r->g->node[j];
	const Onnx__TensorProto *t;

	if (node->n_input != 2)
		return NULL;
	t = onnx_find_const(r, node->input[strcmp(node->input[0], name) == 0 ? 1 : 0]);
	if (t == NULL || (strcmp(node->input[0], name) != 0 && strcmp(node->input[1], name) != 0))
		return NULL;
	return onnx_tensor_floats(r, t, n);
}

/* Whether node j's other input than `name` is the scalar `want` (within float32's rounding). */
static bool
const_is(Reader *r, int j, const char *name, double want)
{
	int64		n = 0;
	float	   *v = other_const(r, j, name, &n);

	return v != NULL && n == 1 && fabs(v[0] - want) <= PATTERN_TOL * fabs(want);
}

/* The pattern's nodes consumed, and its end's output the value of the layer just made. */
static void
take(Reader *r, const int *nodes, int n, int last)
{
	for (int k = 0; k < n; k++)
		r->consumed[nodes[k]] = true;
	onnx_put_value(r, r->g->node[last]->output[0]);
	r->outputs_done = true;
}

/* Whether a node of two inputs reads a and b, in either order. */
static bool
reads_both(const Onnx__NodeProto *node, const char *a, const char *b)
{
	return node->n_input == 2 &&
		((strcmp(node->input[0], a) == 0 && strcmp(node->input[1], b) == 0) ||
		 (strcmp(node->input[0], b) == 0 && strcmp(node->input[1], a) == 0));
}

/* From the Div by sqrt(2) (or Mul by 1/sqrt(2)) of x: Erf, Add 1, Mul by x, Mul by 0.5. */
static bool
read_gelu(Reader *r, PgdlOnnxOp op)
{
	const char *x = r->value;
	int			j[4];

	if (!(op == PGDL_ONNX_DIV ? strcmp(r->node->input[0], x) == 0 && const_is(r, r->index, x, M_SQRT2) :
		  const_is(r, r->index, x, M_SQRT1_2)))
		return false;
	if ((j[0] = reader(r, r->node->output[0], PGDL_ONNX_ERF, true)) < 0 ||
		(j[1] = reader(r, r->g->node[j[0]]->output[0], PGDL_ONNX_ADD, true)) < 0 ||
		!const_is(r, j[1], r->g->node[j[0]]->output[0], 1.0) ||
		(j[2] = reader(r, r->g->node[j[1]]->output[0], PGDL_ONNX_MUL, true)) < 0 ||
		!reads_both(r->g->node[j[2]], x, r->g->node[j[1]]->output[0]) ||
		(j[3] = reader(r, r->g->node[j[2]]->output[0], PGDL_ONNX_MUL, true)) < 0 ||
		!const_is(r, j[3], r->g->node[j[2]]->output[0], 0.5))
		return false;
	r->in->uses++;				/* the Mul by x reads it too */
	onnx_new_layer(r, NN_GELU);
	onnx_add_layer(r, NULL, 0, NULL, 0);
	take(r, j, 4, j[3]);
	return true;
}

/* A ReduceMean of the node at j (the current one: -1) over the last axis only, keeping it. */
static bool
mean_last_axis(Reader *r, int j, int rank)
{
	const Onnx__NodeProto *saved = r->node;
	int			saved_index = r->index;
	int64		n;
	int64	   *axes;
	bool		ok;

	if (j >= 0)
		r->node = r->g->node[j], r->index = j;
	axes = r->opset >= 18 && r->node->n_input < 2 ? NULL : onnx_int64s_input(r, 1, "axes", 18, &n);
	ok = axes != NULL && n == 1 && (axes[0] == -1 || axes[0] == rank - 1) && onnx_attr_int(r, "keepdims", 1) == 1;
	r->node = saved;
	r->index = saved_index;
	return ok;
}

/* The affine end of a decomposed LayerNorm: Mul by a weight [features], Add of a bias; its nodes in j. */
static bool
layernorm_affine(Reader *r, const char *normed, int64 features, int *j, float **w, float **b)
{
	int64		nw = 0,
				nb = 0;

	if ((j[0] = reader(r, normed, PGDL_ONNX_MUL, true)) < 0 ||
		(*w = other_const(r, j[0], normed, &nw)) == NULL ||
		(j[1] = reader(r, r->g->node[j[0]]->output[0], PGDL_ONNX_ADD, true)) < 0 ||
		(*b = other_const(r, j[1], r->g->node[j[0]]->output[0], &nb)) == NULL)
		return false;
	return nw == features && nb == features;
}

/*
 * From the first ReduceMean of x: Sub(x, mean), Pow(d, 2), ReduceMean,
 * Add eps, Sqrt, Div(d, sqrt), Mul weight, Add bias: pgdl's layernorm, over
 * all of a flat value or each step of a sequence.
 */
static bool
read_layernorm_decomposed(Reader *r)
{
	const char *x = r->value;
	int64		features = r->shape.ndim == 2 ? r->shape.w : r->shape.c;
	int			j[9];
	int64		n;
	float	   *eps,
			   *w,
			   *b;
	const char *d;

	if (r->n_held > 0 || r->shape.ndim == 3 || !mean_last_axis(r, -1, r->shape.ndim + 1) ||
		(j[0] = reader(r, r->node->output[0], PGDL_ONNX_SUB, true)) < 0 ||
		strcmp(r->g->node[j[0]]->input[0], x) != 0)
		return false;
	d = r->g->node[j[0]]->output[0];
	if ((j[1] = reader(r, d, PGDL_ONNX_POW, false)) < 0 ||
		!const_is(r, j[1], d, 2.0) ||
		(j[2] = reader(r, r->g->node[j[1]]->output[0], PGDL_ONNX_REDUCEMEAN, true)) < 0 ||
		!mean_last_axis(r, j[2], r->shape.ndim + 1) ||
		(j[3] = reader(r, r->g->node[j[2]]->output[0], PGDL_ONNX_ADD, true)) < 0 ||
		(eps = other_const(r, j[3], r->g->node[j[2]]->output[0], &n)) == NULL || n != 1 || !(eps[0] > 0.0f) ||
		(j[4] = reader(r, r->g->node[j[3]]->output[0], PGDL_ONNX_SQRT, true)) < 0 ||
		(j[5] = reader(r, r->g->node[j[4]]->output[0], PGDL_ONNX_DIV, true)) < 0 ||
		strcmp(r->g->node[j[5]]->input[0], d) != 0 ||
		reader(r, d, PGDL_ONNX_DIV, false) != j[5] ||
		!layernorm_affine(r, r->g->node[j[5]]->output[0], features, j + 6, &w, &b))
		return false;
	/* d's readers are the Pow and the Div alone */
	for (size_t k = (size_t) r->index + 1; k < r->g->n_node; k++)
		for (size_t i = 0; i < r->g->node[k]->n_input; i++)
			if (strcmp(r->g->node[k]->input[i], d) == 0 && (int) k != j[1] && (int) k != j[5])
				return false;
	r->in->uses++;				/* the Sub reads it too */
	onnx_new_layer(r, NN_LAYERNORM)->eps = eps[0];
	onnx_add_layer(r, w, features, b, features);
	take(r, j, 8, j[7]);
	return true;
}

bool
onnx_read_pattern(Reader *r, PgdlOnnxOp op)
{
	if (r->in->kind != ONNX_VALUE_TENSOR)
		return false;
	if (op == PGDL_ONNX_DIV || op == PGDL_ONNX_MUL)
		return read_gelu(r, op);
	if (op == PGDL_ONNX_REDUCEMEAN)
		return read_layernorm_decomposed(r);
	return false;
}
