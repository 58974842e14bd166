/*
 * gen_onnx.c -- the ONNX seeds of fuzz_onnx (gen_corpus DIR writes DIR/onnx):
 * small models of every operator pgdl.import_onnx maps, packed with protobuf-c
 * from onnx.proto.  Weights are a formula, so the bytes are the same each time.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "models/onnx_depth.h"

#include "gen_onnx.h"

/* Everything a model is built of, freed after it is written (the generator runs under LeakSanitizer). */
static void *allocs[4096];
static int	n_allocs;

static void *
gen_alloc(size_t size)
{
	void	   *p = calloc(1, size);

	if (p == NULL || n_allocs == (int) (sizeof(allocs) / sizeof(allocs[0])))
	{
		fprintf(stderr, "gen_onnx: out of memory\n");
		exit(1);
	}
	allocs[n_allocs++] = p;
	return p;
}

static void
gen_free_all(void)
{
	while (n_allocs > 0)
		free(allocs[--n_allocs]);
}

#define NEW(type, init) memcpy(gen_alloc(sizeof(type)), &(type) init, sizeof(type))

typedef struct Graph
{
	Onnx__NodeProto *nodes[64];
	size_t		n_nodes;
	Onnx__TensorProto *inits[16];
	size_t		n_inits;
	Onnx__StringStringEntryProto *meta[2];
	size_t		n_meta;
} Graph;

static Onnx__TensorProto *
tensor(Graph *g, const char *name, int n_dims, const int64_t *dims, bool raw)
{
	Onnx__TensorProto *t = NEW(Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
	size_t		n = 1;

	t->name = (char *) name;
	t->n_dims = n_dims;
	t->dims = gen_alloc(sizeof(int64_t) * (n_dims + 1));
	for (int d = 0; d < n_dims; d++)
		n *= (size_t) (t->dims[d] = dims[d]);
	t->has_data_type = 1;
	t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	if (raw)
	{
		t->has_raw_data = 1;
		t->raw_data.len = n * 4;
		t->raw_data.data = gen_alloc(n * 4);
	}
	else
	{
		t->n_float_data = n;
		t->float_data = gen_alloc(sizeof(float) * n);
	}
	for (size_t i = 0; i < n; i++)
	{
		float		v = GEN_ONNX_VALUE(strlen(name), i);

		if (raw)
			memcpy(t->raw_data.data + 4 * i, &v, 4);	/* the generator runs little-endian */
		else
			t->float_data[i] = v;
	}
	g->inits[g->n_inits++] = t;
	return t;
}

static Onnx__AttributeProto *
attr(const char *name, Onnx__AttributeProto__AttributeType type)
{
	Onnx__AttributeProto *a = NEW(Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);

	a->name = (char *) name;
	a->has_type = 1;
	a->type = type;
	return a;
}

static Onnx__AttributeProto *
attr_int(const char *name, int64_t v)
{
	Onnx__AttributeProto *a = attr(name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);

	a->has_i = 1;
	a->i = v;
	return a;
}

static Onnx__AttributeProto *
attr_float(const char *name, float v)
{
	Onnx__AttributeProto *a = attr(name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);

	a->has_f = 1;
	a->f = v;
	return a;
}

static Onnx__AttributeProto *
attr_ints(const char *name, int64_t v0, int n)
{
	Onnx__AttributeProto *a = attr(name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);

	a->n_ints = n;
	a->ints = gen_alloc(sizeof(int64_t) * n);
	for (int i = 0; i < n; i++)
		a->ints[i] = v0;
	return a;
}

/* op(ins, NULL-terminated) -> out, with up to 3 attributes (NULL for none). */
static Onnx__NodeProto *
node(Graph *g, const char *op, const char *const *ins, const char *out,
	 Onnx__AttributeProto *a0, Onnx__AttributeProto *a1, Onnx__AttributeProto *a2)
{
	Onnx__NodeProto *n = NEW(Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
	Onnx__AttributeProto *as[3] = {a0, a1, a2};

	n->op_type = (char *) op;
	n->name = (char *) out;
	n->input = gen_alloc(sizeof(char *) * 8);
	while (ins[n->n_input])
		n->input[n->n_input] = (char *) ins[n->n_input], n->n_input++;
	n->output = gen_alloc(sizeof(char *));
	n->output[n->n_output++] = (char *) out;
	n->attribute = gen_alloc(sizeof(Onnx__AttributeProto *) * 3);
	for (int i = 0; i < 3 && as[i]; i++)
		n->attribute[n->n_attribute++] = as[i];
	g->nodes[g->n_nodes++] = n;
	return n;
}

#define IN(...) ((const char *const[]) {__VA_ARGS__, NULL})

/* A Constant node of INT64 values (Reshape's shape). */
static void
constant_int64s(Graph *g, const char *out, const int64_t *v, int n)
{
	Onnx__AttributeProto *a = attr("value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
	Onnx__TensorProto *t = NEW(Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);

	t->n_dims = 1;
	t->dims = gen_alloc(sizeof(int64_t));
	t->dims[0] = n;
	t->has_data_type = 1;
	t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
	t->n_int64_data = n;
	t->int64_data = gen_alloc(sizeof(int64_t) * n);
	memcpy(t->int64_data, v, sizeof(int64_t) * n);
	a->t = t;
	node(g, "Constant", (const char *const[]) {NULL}, out, a, NULL, NULL);
}

/* A float tensor of [batch, dims...]. */
static Onnx__ValueInfoProto *
value(const char *name, int rank, const int64_t *dims)
{
	Onnx__ValueInfoProto *v = NEW(Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
	Onnx__TypeProto *t = NEW(Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
	Onnx__TypeProto__Tensor *tt = NEW(Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
	Onnx__TensorShapeProto *s = NEW(Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);

	s->n_dim = rank;
	s->dim = gen_alloc(sizeof(Onnx__TensorShapeProto__Dimension *) * rank);
	for (int d = 0; d < rank; d++)
	{
		Onnx__TensorShapeProto__Dimension *dim = NEW(Onnx__TensorShapeProto__Dimension,
													 ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);

		if (d == 0)
		{
			dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			dim->dim_param = "batch";
		}
		else
		{
			dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			dim->dim_value = dims[d - 1];
		}
		s->dim[d] = dim;
	}
	tt->has_elem_type = 1;
	tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	tt->shape = s;
	t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	t->tensor_type = tt;
	v->name = (char *) name;
	v->type = t;
	return v;
}

/* A scalar float initializer of value v (a pattern's constant). */
static void
scalar(Graph *g, const char *name, float v)
{
	tensor(g, name, 0, NULL, false)->float_data[0] = v;
}

/* An INTS attribute of the values given. */
static Onnx__AttributeProto *
attr_list(const char *name, int n, const int64_t *v)
{
	Onnx__AttributeProto *a = attr(name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);

	a->n_ints = n;
	a->ints = gen_alloc(sizeof(int64_t) * n);
	memcpy(a->ints, v, sizeof(int64_t) * n);
	return a;
}

/* v with its type wrapped in sequences until its deepest message (a Dimension) is as deep as the reader takes. */
static Onnx__ValueInfoProto *
deep_type(Onnx__ValueInfoProto *v)
{
	/* the Dimension is 6 deep (GraphProto > ValueInfoProto > TypeProto > Tensor > TensorShapeProto > it) */
	for (int depth = 6; depth + 2 <= PGDL_ONNX_MAX_DEPTH; depth += 2)
	{
		Onnx__TypeProto *t = NEW(Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
		Onnx__TypeProto__Sequence *s = NEW(Onnx__TypeProto__Sequence, ONNX__TYPE_PROTO__SEQUENCE__INIT);

		s->elem_type = v->type;
		t->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
		t->sequence_type = s;
		v->type = t;
	}
	return v;
}

/* A graph attribute of subgraphs (Loop bodies) one in another, the innermost as deep as the reader takes. */
static Onnx__AttributeProto *
deep_subgraphs(void)
{
	Onnx__GraphProto *g = NEW(Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
	Onnx__AttributeProto *a;

	g->name = "innermost";
	/* the attribute's graph is 4 deep (GraphProto > NodeProto > AttributeProto > it); each body 3 more */
	for (int depth = 4; depth + 3 <= PGDL_ONNX_MAX_DEPTH; depth += 3)
	{
		Onnx__NodeProto *n = NEW(Onnx__NodeProto, ONNX__NODE_PROTO__INIT);

		a = attr("body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
		a->g = g;
		n->op_type = "Loop";
		n->n_attribute = 1;
		n->attribute = gen_alloc(sizeof(Onnx__AttributeProto *));
		n->attribute[0] = a;
		g = NEW(Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
		g->name = "body";
		g->n_node = 1;
		g->node = gen_alloc(sizeof(Onnx__NodeProto *));
		g->node[0] = n;
	}
	a = attr("body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
	a->g = g;
	return a;
}

static void
meta(Graph *g, const char *key, const char *val)
{
	Onnx__StringStringEntryProto *e = NEW(Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);

	e->key = (char *) key;
	e->value = (char *) val;
	g->meta[g->n_meta++] = e;
}

static void
write_model(GenWriteFn write, const char *name, Graph *g, Onnx__ValueInfoProto *in, Onnx__ValueInfoProto *out)
{
	Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
	Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
	Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
	Onnx__OperatorSetIdProto *opsets[1] = {&opset};
	uint8_t    *buf;
	size_t		len;

	opset.domain = "";
	opset.has_version = 1;
	opset.version = 13;
	graph.name = (char *) name;
	graph.n_node = g->n_nodes;
	graph.node = g->nodes;
	graph.n_initializer = g->n_inits;
	graph.initializer = g->inits;
	graph.n_input = 1;
	graph.input = &in;
	graph.n_output = 1;
	graph.output = &out;
	m.has_ir_version = 1;
	m.ir_version = 7;
	m.producer_name = "gen_onnx";
	m.producer_version = "1";
	m.n_opset_import = 1;
	m.opset_import = opsets;
	m.graph = &graph;
	m.n_metadata_props = g->n_meta;
	m.metadata_props = g->meta;
	len = onnx__model_proto__get_packed_size(&m);
	buf = gen_alloc(len);
	onnx__model_proto__pack(&m, buf);
	write("onnx", name, buf, len);
	gen_free_all();
	memset(g, 0, sizeof(*g));
}

void
gen_onnx_corpus(GenWriteFn write)
{
	Graph		g = {0};

	/* Gemm (transB 1 and 0), Relu, Softmax: an MLP as PyTorch writes it */
	tensor(&g, "w1", 2, (int64_t[]) {5, 4}, true);
	tensor(&g, "b1", 1, (int64_t[]) {5}, true);
	tensor(&g, "w2", 2, (int64_t[]) {5, 3}, false);
	node(&g, "Gemm", IN("x", "w1", "b1"), "h1", attr_int("transB", 1), attr_float("alpha", 1.0f), NULL);
	node(&g, "Relu", IN("h1"), "h2", NULL, NULL, NULL);
	node(&g, "Gemm", IN("h2", "w2"), "h3", NULL, NULL, NULL);
	node(&g, "Softmax", IN("h3"), "y", attr_int("axis", 1), NULL, NULL);
	write_model(write, "mlp", &g, value("x", 2, (int64_t[]) {4}), value("y", 2, (int64_t[]) {3}));

	/* Conv, BatchNormalization, LeakyRelu, MaxPool, AveragePool, GlobalAveragePool, Flatten, MatMul + Add, Sigmoid */
	tensor(&g, "cw", 4, (int64_t[]) {2, 1, 3, 3}, true);
	tensor(&g, "cb", 1, (int64_t[]) {2}, false);
	tensor(&g, "s", 1, (int64_t[]) {2}, true);
	tensor(&g, "bb", 1, (int64_t[]) {2}, true);
	tensor(&g, "m", 1, (int64_t[]) {2}, true);
	tensor(&g, "running_vr", 1, (int64_t[]) {2}, false);	/* a name whose values are positive */
	tensor(&g, "mw", 2, (int64_t[]) {2, 1}, true);
	tensor(&g, "mb", 1, (int64_t[]) {1}, true);
	node(&g, "Conv", IN("x", "cw", "cb"), "c", attr_ints("pads", 1, 4), attr_ints("strides", 1, 2),
		 attr_ints("kernel_shape", 3, 2));
	node(&g, "BatchNormalization", IN("c", "s", "bb", "m", "running_vr"), "n", attr_float("epsilon", 1e-3f), NULL, NULL);
	node(&g, "LeakyRelu", IN("n"), "l", attr_float("alpha", 0.2f), NULL, NULL);
	node(&g, "MaxPool", IN("l"), "p", attr_ints("kernel_shape", 2, 2), attr_ints("strides", 1, 2), NULL);
	node(&g, "AveragePool", IN("p"), "a", attr_ints("kernel_shape", 2, 2), attr_ints("strides", 2, 2), NULL);
	node(&g, "GlobalAveragePool", IN("a"), "gp", NULL, NULL, NULL);
	node(&g, "Flatten", IN("gp"), "f", attr_int("axis", 1), NULL, NULL);
	node(&g, "MatMul", IN("f", "mw"), "mm", NULL, NULL, NULL);
	node(&g, "Add", IN("mm", "mb"), "ad", NULL, NULL, NULL);
	node(&g, "Sigmoid", IN("ad"), "y", NULL, NULL, NULL);
	write_model(write, "cnn", &g, value("x", 4, (int64_t[]) {1, 6, 6}), value("y", 2, (int64_t[]) {1}));

	/* pgdl's export: its normalization first (Sub, Div), metadata; then Reshape, Tanh, Dropout, Identity, Gemm */
	tensor(&g, "mean", 1, (int64_t[]) {8}, true);
	tensor(&g, "std", 1, (int64_t[]) {8}, false);
	tensor(&g, "ratio", 0, NULL, false);
	tensor(&g, "w", 2, (int64_t[]) {2, 8}, true);
	meta(&g, "pgdl.normalization", "{\"mean\": [0], \"std\": [1]}");
	meta(&g, "pgdl.classes", "[\"a\", \"b\"]");
	node(&g, "Sub", IN("x", "mean"), "centred", NULL, NULL, NULL);
	node(&g, "Div", IN("centred", "std"), "scaled", NULL, NULL, NULL);
	constant_int64s(&g, "shape", (int64_t[]) {0, -1}, 2);
	node(&g, "Reshape", IN("scaled", "shape"), "r", NULL, NULL, NULL);
	node(&g, "Tanh", IN("r"), "t", NULL, NULL, NULL);
	node(&g, "Dropout", IN("t", "ratio"), "d", NULL, NULL, NULL);
	node(&g, "Identity", IN("d"), "i", NULL, NULL, NULL);
	node(&g, "Gemm", IN("i", "w"), "y", attr_int("transB", 1), NULL, NULL);
	write_model(write, "normalized", &g, value("x", 2, (int64_t[]) {8}), value("y", 2, (int64_t[]) {2}));

	/* a graph (src/models/onnx_import_graph.c): two Slices of the input, Gemms, Add of the branches, Concat */
	tensor(&g, "wa", 2, (int64_t[]) {3, 2}, true);
	tensor(&g, "wb", 2, (int64_t[]) {3, 4}, false);
	tensor(&g, "wc", 2, (int64_t[]) {2, 6}, true);
	constant_int64s(&g, "axes", (int64_t[]) {1}, 1);
	constant_int64s(&g, "s0", (int64_t[]) {0}, 1);
	constant_int64s(&g, "e0", (int64_t[]) {2}, 1);
	constant_int64s(&g, "s1", (int64_t[]) {2}, 1);
	constant_int64s(&g, "e1", (int64_t[]) {6}, 1);
	node(&g, "Slice", IN("x", "s0", "e0", "axes"), "a", NULL, NULL, NULL);
	node(&g, "Slice", IN("x", "s1", "e1", "axes"), "b", NULL, NULL, NULL);
	node(&g, "Gemm", IN("a", "wa"), "ha", attr_int("transB", 1), NULL, NULL);
	node(&g, "Gemm", IN("b", "wb"), "hb", attr_int("transB", 1), NULL, NULL);
	node(&g, "Add", IN("ha", "hb"), "sum", NULL, NULL, NULL);
	node(&g, "Relu", IN("sum"), "r", NULL, NULL, NULL);
	node(&g, "Concat", IN("r", "sum"), "c", attr_int("axis", 1), NULL, NULL);
	node(&g, "Gemm", IN("c", "wc"), "y", attr_int("transB", 1), NULL, NULL);
	write_model(write, "graph", &g, value("x", 2, (int64_t[]) {6}), value("y", 2, (int64_t[]) {2}));

	/* a rank-3 input [batch, 3, 8] (issue 40): a 1-D MaxPool of it, Softmax over the steps, Gather of two, Gemm */
	tensor(&g, "w", 2, (int64_t[]) {2, 14}, true);
	constant_int64s(&g, "idx", (int64_t[]) {2, 0}, 2);
	node(&g, "MaxPool", IN("x"), "p", attr_ints("kernel_shape", 2, 1), attr_ints("strides", 1, 1), NULL);
	node(&g, "Softmax", IN("p"), "s", attr_int("axis", 1), NULL, NULL);
	node(&g, "Gather", IN("s", "idx"), "ga", attr_int("axis", 1), NULL, NULL);
	node(&g, "Flatten", IN("ga"), "f", attr_int("axis", 1), NULL, NULL);
	node(&g, "Gemm", IN("f", "w"), "y", attr_int("transB", 1), NULL, NULL);
	write_model(write, "rank3", &g, value("x", 3, (int64_t[]) {3, 8}), value("y", 2, (int64_t[]) {2}));

	/* torch's GRU classifier (onnx_import_seq.c): int64 ids, Gather, Transpose, the zero state's shape arithmetic */
	{
		Onnx__ValueInfoProto *ids = value("ids", 2, (int64_t[]) {4});
		Onnx__NodeProto *gru;

		ids->type->tensor_type->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
		tensor(&g, "emb", 2, (int64_t[]) {6, 3}, true);
		tensor(&g, "W", 3, (int64_t[]) {1, 6, 3}, true);
		tensor(&g, "R", 3, (int64_t[]) {1, 6, 2}, false);
		tensor(&g, "B", 2, (int64_t[]) {1, 12}, true);
		tensor(&g, "wf", 2, (int64_t[]) {2, 2}, true);
		constant_int64s(&g, "one", (int64_t[]) {1}, 1);
		constant_int64s(&g, "zero", (int64_t[]) {0}, 1);
		constant_int64s(&g, "units", (int64_t[]) {2}, 1);
		node(&g, "Gather", IN("emb", "ids"), "e", NULL, NULL, NULL);
		node(&g, "Transpose", IN("e"), "tf", attr_list("perm", 3, (int64_t[]) {1, 0, 2}), NULL, NULL);
		node(&g, "Shape", IN("tf"), "s", NULL, NULL, NULL);
		node(&g, "Gather", IN("s", "one"), "b", attr_int("axis", 0), NULL, NULL);
		node(&g, "Unsqueeze", IN("b", "zero"), "ub", NULL, NULL, NULL);
		node(&g, "Concat", IN("one", "ub", "units"), "shape", attr_int("axis", 0), NULL, NULL);
		node(&g, "ConstantOfShape", IN("shape"), "h0", NULL, NULL, NULL);
		gru = node(&g, "GRU", IN("tf", "W", "R", "B", "", "h0"), "", attr_int("hidden_size", 2),
				   attr_int("linear_before_reset", 1), NULL);
		gru->name = "gru";
		gru->output = gen_alloc(sizeof(char *) * 2);
		gru->output[0] = "";
		gru->output[1] = "yh";
		gru->n_output = 2;
		node(&g, "Squeeze", IN("yh", "zero"), "st", NULL, NULL, NULL);
		node(&g, "Gemm", IN("st", "wf"), "y", attr_int("transB", 1), NULL, NULL);
		write_model(write, "sequence", &g, ids, value("y", 2, (int64_t[]) {2}));
	}

	/* LayerNorm decomposed and GELU's Erf subgraph (onnx_patterns.c), as torch writes them at opset 13 */
	tensor(&g, "w", 2, (int64_t[]) {5, 4}, true);
	scalar(&g, "two", 2.0f);
	scalar(&g, "eps", 1e-5f);
	tensor(&g, "gamma", 1, (int64_t[]) {5}, true);
	tensor(&g, "beta", 1, (int64_t[]) {5}, false);
	scalar(&g, "sqrt2", 1.41421354f);
	scalar(&g, "unit", 1.0f);
	scalar(&g, "half", 0.5f);
	node(&g, "Gemm", IN("x", "w"), "h", attr_int("transB", 1), NULL, NULL);
	node(&g, "ReduceMean", IN("h"), "m", attr_list("axes", 1, (int64_t[]) {-1}), NULL, NULL);
	node(&g, "Sub", IN("h", "m"), "d", NULL, NULL, NULL);
	node(&g, "Pow", IN("d", "two"), "p", NULL, NULL, NULL);
	node(&g, "ReduceMean", IN("p"), "v", attr_list("axes", 1, (int64_t[]) {-1}), NULL, NULL);
	node(&g, "Add", IN("v", "eps"), "ve", NULL, NULL, NULL);
	node(&g, "Sqrt", IN("ve"), "sd", NULL, NULL, NULL);
	node(&g, "Div", IN("d", "sd"), "nd", NULL, NULL, NULL);
	node(&g, "Mul", IN("nd", "gamma"), "ng", NULL, NULL, NULL);
	node(&g, "Add", IN("ng", "beta"), "ln", NULL, NULL, NULL);
	node(&g, "Div", IN("ln", "sqrt2"), "q", NULL, NULL, NULL);
	node(&g, "Erf", IN("q"), "er", NULL, NULL, NULL);
	node(&g, "Add", IN("er", "unit"), "e1", NULL, NULL, NULL);
	node(&g, "Mul", IN("ln", "e1"), "mm", NULL, NULL, NULL);
	node(&g, "Mul", IN("mm", "half"), "y", NULL, NULL, NULL);
	write_model(write, "patterns", &g, value("x", 2, (int64_t[]) {4}), value("y", 2, (int64_t[]) {5}));

	/* torch's multi-head attention over an embedding (onnx_attention.c): L 3, E 4, 2 heads of 2 */
	{
		Onnx__ValueInfoProto *ids = value("ids", 2, (int64_t[]) {3});

		ids->type->tensor_type->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
		tensor(&g, "emb", 2, (int64_t[]) {6, 4}, true);
		tensor(&g, "Win", 2, (int64_t[]) {4, 12}, true);
		tensor(&g, "bin", 1, (int64_t[]) {12}, false);
		tensor(&g, "Wout", 2, (int64_t[]) {4, 4}, true);
		tensor(&g, "bout", 1, (int64_t[]) {4}, true);
		scalar(&g, "sqrt_d", 1.41421354f);
		constant_int64s(&g, "i0", (int64_t[]) {0}, 1);
		constant_int64s(&g, "i1", (int64_t[]) {1}, 1);
		constant_int64s(&g, "heads", (int64_t[]) {2}, 1);
		constant_int64s(&g, "e", (int64_t[]) {4}, 1);
		constant_int64s(&g, "e2", (int64_t[]) {8}, 1);
		constant_int64s(&g, "e3", (int64_t[]) {12}, 1);
		constant_int64s(&g, "last", (int64_t[]) {-1}, 1);
		node(&g, "Gather", IN("emb", "ids"), "x", NULL, NULL, NULL);
		node(&g, "Transpose", IN("x"), "t", attr_list("perm", 3, (int64_t[]) {1, 0, 2}), NULL, NULL);
		node(&g, "Shape", IN("t"), "s", NULL, NULL, NULL);
		node(&g, "Gather", IN("s", "i0"), "len", attr_int("axis", 0), NULL, NULL);
		node(&g, "Gather", IN("s", "i1"), "bat", attr_int("axis", 0), NULL, NULL);
		node(&g, "Mul", IN("len", "bat"), "lb", NULL, NULL, NULL);
		node(&g, "Mul", IN("bat", "heads"), "bh", NULL, NULL, NULL);
		node(&g, "Unsqueeze", IN("len", "i0"), "u_len", NULL, NULL, NULL);
		node(&g, "Unsqueeze", IN("bat", "i0"), "u_bat", NULL, NULL, NULL);
		node(&g, "Unsqueeze", IN("lb", "i0"), "u_lb", NULL, NULL, NULL);
		node(&g, "Unsqueeze", IN("bh", "i0"), "u_bh", NULL, NULL, NULL);
		node(&g, "Concat", IN("u_len", "u_bh", "heads"), "to_heads", attr_int("axis", 0), NULL, NULL);
		node(&g, "Concat", IN("u_lb", "e"), "to_flat", attr_int("axis", 0), NULL, NULL);
		node(&g, "Concat", IN("u_len", "u_bat", "e"), "to_seq", attr_int("axis", 0), NULL, NULL);
		node(&g, "MatMul", IN("t", "Win"), "proj", NULL, NULL, NULL);
		node(&g, "Add", IN("bin", "proj"), "qkv", NULL, NULL, NULL);
		node(&g, "Slice", IN("qkv", "i0", "e", "last"), "q", NULL, NULL, NULL);
		node(&g, "Slice", IN("qkv", "e", "e2", "last"), "k", NULL, NULL, NULL);
		node(&g, "Slice", IN("qkv", "e2", "e3", "last"), "v", NULL, NULL, NULL);
		node(&g, "Reshape", IN("q", "to_heads"), "qh", NULL, NULL, NULL);
		node(&g, "Reshape", IN("k", "to_heads"), "kh", NULL, NULL, NULL);
		node(&g, "Reshape", IN("v", "to_heads"), "vh", NULL, NULL, NULL);
		node(&g, "Transpose", IN("qh"), "qt", attr_list("perm", 3, (int64_t[]) {1, 0, 2}), NULL, NULL);
		node(&g, "Transpose", IN("kh"), "kt", attr_list("perm", 3, (int64_t[]) {1, 2, 0}), NULL, NULL);
		node(&g, "Transpose", IN("vh"), "vt", attr_list("perm", 3, (int64_t[]) {1, 0, 2}), NULL, NULL);
		node(&g, "Div", IN("qt", "sqrt_d"), "qs", NULL, NULL, NULL);
		node(&g, "MatMul", IN("qs", "kt"), "scores", NULL, NULL, NULL);
		node(&g, "Softmax", IN("scores"), "probs", attr_int("axis", -1), NULL, NULL);
		node(&g, "MatMul", IN("probs", "vt"), "ctx", NULL, NULL, NULL);
		node(&g, "Transpose", IN("ctx"), "ctx_t", attr_list("perm", 3, (int64_t[]) {1, 0, 2}), NULL, NULL);
		node(&g, "Reshape", IN("ctx_t", "to_flat"), "flat", NULL, NULL, NULL);
		node(&g, "Gemm", IN("flat", "Wout", "bout"), "out", attr_int("transB", 1), NULL, NULL);
		node(&g, "Reshape", IN("out", "to_seq"), "out_t", NULL, NULL, NULL);
		node(&g, "Transpose", IN("out_t"), "y", attr_list("perm", 3, (int64_t[]) {1, 0, 2}), NULL, NULL);
		write_model(write, "attention", &g, ids, value("y", 3, (int64_t[]) {3, 4}));
	}

	/* nesting as deep as the reader takes (100, src/models/onnx_depth.h): one level more is refused before protobuf-c */
	tensor(&g, "w", 2, (int64_t[]) {3, 4}, true);
	node(&g, "Gemm", IN("x", "w"), "y", attr_int("transB", 1), NULL, NULL);
	write_model(write, "deep_type", &g, deep_type(value("x", 2, (int64_t[]) {4})), value("y", 2, (int64_t[]) {3}));
	tensor(&g, "w", 2, (int64_t[]) {3, 4}, true);
	node(&g, "Gemm", IN("x", "w"), "y", attr_int("transB", 1), deep_subgraphs(), NULL);
	write_model(write, "deep_graph", &g, value("x", 2, (int64_t[]) {4}), value("y", 2, (int64_t[]) {3}));
}
