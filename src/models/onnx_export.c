/*
 * onnx_export.c -- pgdl.export_onnx: a model as an ONNX ModelProto (opset
 * PGDL_ONNX_OPSET, float32) that computes what pgdl.predict returns.
 *
 * The graph is built from protoc-c's structs, palloc'd in the call's memory
 * context, and packed once by onnx__model_proto__pack.  Weights are
 * initializers named and shaped as pgdl.model_weights lists them
 * ("layer3.weight", dense [out, in] read by Gemm with transB = 1), but
 * where ONNX's operators want them rearranged (gru's gate order, MatMul's
 * transposed weights of attention and dense per_step).  A graph's layers
 * are written in spec order, each reading its inputs' tensors.  A stored
 * model's dataset normalization, when folded in, becomes the graph's first
 * nodes (names in models/models.h), so that the file takes raw features as
 * pgdl.predict does; docs/reference/onnx.md describes the whole file.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "models/models.h"

/* The graph as it grows: nodes, initializers and the tensor the next node reads. */
typedef struct OnnxGraph
{
	List	   *nodes;			/* of Onnx__NodeProto * */
	List	   *inits;			/* of Onnx__TensorProto * */
	List	   *meta;			/* of Onnx__StringStringEntryProto * */
	char	   *cur;			/* the tensor the next node reads */
	int			rank;			/* of cur: 2 ([batch, features]), 3 ([batch, steps, features]) or 4 ([batch, C, H, W]) */
	/* a graph's layers read any earlier output: layer i's tensor and rank, [0] the network's input */
	char	   *outs[NN_MAX_LAYERS + 1];
	int			ranks[NN_MAX_LAYERS + 1];
} OnnxGraph;

/* ---- small builders ---- */

static Onnx__AttributeProto *
attr_int(const char *name, int64 v)
{
	Onnx__AttributeProto *a = palloc(sizeof(Onnx__AttributeProto));

	onnx__attribute_proto__init(a);
	a->name = pstrdup(name);
	a->has_type = true;
	a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
	a->has_i = true;
	a->i = v;
	return a;
}

static Onnx__AttributeProto *
attr_float(const char *name, float v)
{
	Onnx__AttributeProto *a = palloc(sizeof(Onnx__AttributeProto));

	onnx__attribute_proto__init(a);
	a->name = pstrdup(name);
	a->has_type = true;
	a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
	a->has_f = true;
	a->f = v;
	return a;
}

/* n copies of v: a square window's kernel_shape and strides, a conv's four pads */
static Onnx__AttributeProto *
attr_ints(const char *name, int n, int64 v)
{
	Onnx__AttributeProto *a = palloc(sizeof(Onnx__AttributeProto));

	onnx__attribute_proto__init(a);
	a->name = pstrdup(name);
	a->has_type = true;
	a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
	a->n_ints = n;
	a->ints = palloc(sizeof(int64_t) * n);
	for (int i = 0; i < n; i++)
		a->ints[i] = v;
	return a;
}

/*
 * A node named `name` that reads the current tensor and then `params` (names
 * of initializers, NULL-terminated), and whose output, named as the node,
 * becomes the current tensor.
 */
static Onnx__NodeProto *
add_node(OnnxGraph *g, const char *op, const char *name, const char *const *params)
{
	Onnx__NodeProto *n = palloc(sizeof(Onnx__NodeProto));
	int			n_params = 0;

	while (params && params[n_params])
		n_params++;
	onnx__node_proto__init(n);
	n->op_type = pstrdup(op);
	n->name = pstrdup(name);
	n->n_input = 1 + n_params;
	n->input = palloc(sizeof(char *) * n->n_input);
	n->input[0] = g->cur;
	for (int i = 0; i < n_params; i++)
		n->input[1 + i] = pstrdup(params[i]);
	n->n_output = 1;
	n->output = palloc(sizeof(char *));
	n->output[0] = n->name;
	g->nodes = lappend(g->nodes, n);
	g->cur = n->name;
	return n;
}

/* A node of several inputs (tensors or initializers, in order) whose output, named as it, becomes the current tensor. */
static Onnx__NodeProto *
add_node_inputs(OnnxGraph *g, const char *op, const char *name, int n_inputs, const char *const *inputs)
{
	Onnx__NodeProto *n = add_node(g, op, name, NULL);

	n->n_input = n_inputs;
	n->input = palloc(sizeof(char *) * n_inputs);
	for (int i = 0; i < n_inputs; i++)
		n->input[i] = pstrdup(inputs[i]);
	return n;
}

static void
node_attrs(Onnx__NodeProto *n, int count, Onnx__AttributeProto *a0, Onnx__AttributeProto *a1,
		   Onnx__AttributeProto *a2)
{
	Onnx__AttributeProto *a[3] = {a0, a1, a2};

	n->n_attribute = count;
	n->attribute = palloc(sizeof(Onnx__AttributeProto *) * count);
	for (int i = 0; i < count; i++)
		n->attribute[i] = a[i];
}

/* one more attribute after node_attrs' */
static void
node_attr_append(Onnx__NodeProto *n, Onnx__AttributeProto *a)
{
	n->attribute = repalloc(n->attribute, sizeof(Onnx__AttributeProto *) * (n->n_attribute + 1));
	n->attribute[n->n_attribute++] = a;
}

/* float32 as ONNX stores it, little-endian: the engine's own memory where that is the machine's order */
static ProtobufCBinaryData
raw_floats(const float *v, int64 n)
{
	ProtobufCBinaryData d;

	d.len = (size_t) n * sizeof(float);
#ifdef WORDS_BIGENDIAN
	{
		uint32	   *w = palloc(d.len);

		for (int64 i = 0; i < n; i++)
		{
			uint32		u;

			memcpy(&u, &v[i], sizeof(u));
			w[i] = pg_bswap32(u);
		}
		d.data = (uint8_t *) w;
	}
#else
	d.data = (uint8_t *) v;
#endif
	return d;
}

/* An initializer of ndim dims (0: a scalar) holding v, which must outlive the packing. */
static void
add_initializer(OnnxGraph *g, const char *name, int ndim, const int64 *dims, const float *v)
{
	Onnx__TensorProto *t = palloc(sizeof(Onnx__TensorProto));
	int64		n = 1;

	onnx__tensor_proto__init(t);
	t->name = pstrdup(name);
	t->has_data_type = true;
	t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	t->n_dims = ndim;
	t->dims = palloc(sizeof(int64_t) * Max(ndim, 1));
	for (int d = 0; d < ndim; d++)
	{
		t->dims[d] = dims[d];
		n *= dims[d];
	}
	t->has_raw_data = true;
	t->raw_data = raw_floats(v, n);
	g->inits = lappend(g->inits, t);
}

/* An int64 initializer of n values (ONNX's indices). */
static void
add_int64_initializer(OnnxGraph *g, const char *name, int64 n, const int64 *v)
{
	Onnx__TensorProto *t = palloc(sizeof(Onnx__TensorProto));

	onnx__tensor_proto__init(t);
	t->name = pstrdup(name);
	t->has_data_type = true;
	t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
	t->n_dims = 1;
	t->dims = palloc(sizeof(int64_t));
	t->dims[0] = n;
	t->n_int64_data = n;
	t->int64_data = palloc(sizeof(int64_t) * Max(n, 1));
	for (int64 i = 0; i < n; i++)
		t->int64_data[i] = v[i];
	g->inits = lappend(g->inits, t);
}

static void
add_meta(OnnxGraph *g, const char *key, const char *value)
{
	Onnx__StringStringEntryProto *e = palloc(sizeof(Onnx__StringStringEntryProto));

	onnx__string_string_entry_proto__init(e);
	e->key = pstrdup(key);
	e->value = (char *) value;
	g->meta = lappend(g->meta, e);
}

/* A float tensor value of [batch, dims...] */
static Onnx__ValueInfoProto *
value_info(const char *name, int ndim, const int32 *dims)
{
	Onnx__ValueInfoProto *vi = palloc(sizeof(Onnx__ValueInfoProto));
	Onnx__TypeProto *type = palloc(sizeof(Onnx__TypeProto));
	Onnx__TypeProto__Tensor *tensor = palloc(sizeof(Onnx__TypeProto__Tensor));
	Onnx__TensorShapeProto *shape = palloc(sizeof(Onnx__TensorShapeProto));

	onnx__tensor_shape_proto__init(shape);
	shape->n_dim = 1 + ndim;
	shape->dim = palloc(sizeof(Onnx__TensorShapeProto__Dimension *) * shape->n_dim);
	for (int d = 0; d <= ndim; d++)
	{
		Onnx__TensorShapeProto__Dimension *dim = palloc(sizeof(Onnx__TensorShapeProto__Dimension));

		onnx__tensor_shape_proto__dimension__init(dim);
		if (d == 0)
		{
			dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			dim->dim_param = PGDL_ONNX_BATCH_DIM;
		}
		else
		{
			dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			dim->dim_value = dims[d - 1];
		}
		shape->dim[d] = dim;
	}
	onnx__type_proto__tensor__init(tensor);
	tensor->has_elem_type = true;
	tensor->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	tensor->shape = shape;
	onnx__type_proto__init(type);
	type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	type->tensor_type = tensor;
	onnx__value_info_proto__init(vi);
	vi->name = (char *) name;
	vi->type = type;
	return vi;
}

/* ---- metadata: JSON text through jsonb ---- */

static char *
jsonb_text(JsonbValue *v)
{
	Jsonb	   *j = JsonbValueToJsonb(v);

	return JsonbToCString(NULL, &j->root, VARSIZE(j));
}

static char *
json_string(const char *s)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) s;
	v.val.string.len = strlen(s);
	return jsonb_text(&v);
}

/* The dataset's class values, or indices "0", "1", ... for k classes without one. */
static char *
json_classes(const PgdlDataset *ds, int k)
{
	JsonbParseState *state = NULL;

	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (int c = 0; c < (ds ? ds->n_classes : k); c++)
		pgdl_jsonb_put_string(&state, NULL, ds ? ds->classes[c] : psprintf("%d", c));
	return jsonb_text(pushJsonbValue(&state, WJB_END_ARRAY, NULL));
}

static char *
json_model(int64 id, const char *name)
{
	JsonbParseState *state = NULL;
	JsonbValue	null;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_int(&state, "id", id);
	if (name)
		pgdl_jsonb_put_string(&state, "name", name);
	else
	{
		null.type = jbvNull;
		pgdl_jsonb_put_key(&state, "name");
		pushJsonbValue(&state, WJB_VALUE, &null);
	}
	return jsonb_text(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

static void
add_model_meta(OnnxGraph *g, const PgdlModel *pm, const char *name)
{
	const NnModel *m = pm->nn;
	const PgdlDataset *ds = pm->dataset && pm->dataset->classification ? pm->dataset : NULL;

	/* classes where an example has one: several binary_cross_entropy outputs are labels of their own */
	if (m->spec.loss == NN_LOSS_CROSS_ENTROPY)
		add_meta(g, PGDL_ONNX_META_CLASSES, json_classes(ds, (int) nn_model_output_size(m)));
	else if (m->spec.loss == NN_LOSS_BCE && nn_model_output_size(m) == 1)
		add_meta(g, PGDL_ONNX_META_CLASSES, json_classes(ds, 2));
	add_meta(g, PGDL_ONNX_META_LOSS, json_string(nn_loss_name(m->spec.loss)));
	if (pm->id != 0)
		add_meta(g, PGDL_ONNX_META_MODEL, json_model(pm->id, name));
}

/* ---- the graph ---- */

/* What pgdl.pack did to the features (pgdl_dataset_normalize): x * scale, or (x - mean) / std. */
static void
add_normalization(OnnxGraph *g, const PgdlDataset *ds, const NnSpec *spec)
{
	const char *scale[] = {PGDL_ONNX_NORMALIZE_SCALE, NULL};
	const char *mean[] = {PGDL_ONNX_NORMALIZE_MEAN, NULL};
	const char *std[] = {PGDL_ONNX_NORMALIZE_STD, NULL};
	int64		dims[3];

	if (ds->mean == NULL)
	{
		add_initializer(g, PGDL_ONNX_NORMALIZE_SCALE, 0, NULL, &ds->scale);
		add_node(g, pgdl_onnx_op_name(PGDL_ONNX_MUL), PGDL_ONNX_NODE_NORMALIZE_MUL, scale);
	}
	else
	{
		/* one value per feature, shaped as an example: broadcast over the batch */
		for (int d = 0; d < spec->input_ndim; d++)
			dims[d] = spec->input_ndim == 1 ? ds->n_numeric : spec->input[d];
		add_initializer(g, PGDL_ONNX_NORMALIZE_MEAN, spec->input_ndim, dims, ds->mean);
		add_initializer(g, PGDL_ONNX_NORMALIZE_STD, spec->input_ndim, dims, ds->std);
		add_node(g, pgdl_onnx_op_name(PGDL_ONNX_SUB), PGDL_ONNX_NODE_NORMALIZE_SUB, mean);
		add_node(g, pgdl_onnx_op_name(PGDL_ONNX_DIV), PGDL_ONNX_NODE_NORMALIZE_DIV, std);
	}
	add_meta(g, PGDL_ONNX_META_NORMALIZATION,
			 JsonbToCString(NULL, &ds->normalization->root, VARSIZE(ds->normalization)));
}

/*
 * pack's imputation, in front of the normalization: a missing value enters
 * the file as NaN and becomes the dataset's value for its feature (IsNaN,
 * Where).  The current tensor stays the input's IsNaN for add_indicators.
 */
static void
add_imputation(OnnxGraph *g, const PgdlDataset *ds, const NnSpec *spec)
{
	const char *where[] = {PGDL_ONNX_NODE_IMPUTE_ISNAN, PGDL_ONNX_IMPUTE_VALUES, g->cur};
	int64		dims[3];

	if (ds->n_indicators > 0 && spec->input_ndim != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a model of %d-dimensional input with missing-value indicators cannot be exported to ONNX",
						spec->input_ndim),
				 errdetail("The exported graph appends the indicators to a row of features.")));
	for (int d = 0; d < spec->input_ndim; d++)
		dims[d] = spec->input_ndim == 1 ? ds->n_numeric : spec->input[d];
	add_initializer(g, PGDL_ONNX_IMPUTE_VALUES, spec->input_ndim, dims, ds->impute);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_ISNAN), PGDL_ONNX_NODE_IMPUTE_ISNAN, NULL);
	add_node_inputs(g, pgdl_onnx_op_name(PGDL_ONNX_WHERE), PGDL_ONNX_NODE_IMPUTE_WHERE, 3, where);
	add_meta(g, PGDL_ONNX_META_IMPUTATION,
			 JsonbToCString(NULL, &ds->imputation->root, VARSIZE(ds->imputation)));
}

/* After the normalization: 1 where each indicator's feature was missing, as floats after the features. */
static void
add_indicators(OnnxGraph *g, const PgdlDataset *ds)
{
	const char *gather[] = {PGDL_ONNX_NODE_IMPUTE_ISNAN, PGDL_ONNX_IMPUTE_INDICATORS};
	const char *concat[] = {g->cur, PGDL_ONNX_NODE_IMPUTE_CAST};
	int64	   *indices = palloc(sizeof(int64) * ds->n_indicators);

	for (int32 i = 0; i < ds->n_indicators; i++)
		indices[i] = ds->indicators[i];
	add_int64_initializer(g, PGDL_ONNX_IMPUTE_INDICATORS, ds->n_indicators, indices);
	node_attrs(add_node_inputs(g, pgdl_onnx_op_name(PGDL_ONNX_GATHER), PGDL_ONNX_NODE_IMPUTE_GATHER, 2, gather),
			   1, attr_int("axis", 1), NULL, NULL);
	node_attrs(add_node(g, pgdl_onnx_op_name(PGDL_ONNX_CAST), PGDL_ONNX_NODE_IMPUTE_CAST, NULL),
			   1, attr_int("to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT), NULL, NULL);
	node_attrs(add_node_inputs(g, pgdl_onnx_op_name(PGDL_ONNX_CONCAT), PGDL_ONNX_NODE_IMPUTE_CONCAT, 2, concat),
			   1, attr_int("axis", 1), NULL, NULL);
}

/* Slice of the current tensor's features [from, to) (axis 1) named `name`, its bounds the int64 "<name>.starts", ".ends", ".axes" */
static void
add_slice(OnnxGraph *g, const char *name, int64 from, int64 to)
{
	/* the features: of a [batch, features] value, or of each step of a [batch, steps, features] one */
	const int64 axis = g->rank == 3 ? 2 : 1;
	const char *params[] = {psprintf("%s.starts", name), psprintf("%s.ends", name), psprintf("%s.axes", name), NULL};

	add_int64_initializer(g, params[0], 1, &from);
	add_int64_initializer(g, params[1], 1, &to);
	add_int64_initializer(g, params[2], 1, &axis);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_SLICE), name, params);
}

/*
 * A dataset of categorical columns: the file takes the raw vector as
 * pgdl.predict's ids make it, the numeric features then one id per column,
 * and preprocesses the numeric ones only (the current tensor); its ids' Slice
 * is PGDL_ONNX_NODE_IDS, for add_preprocessing to append.  One-hot and
 * sequence columns are not written.
 */
static void
split_ids(OnnxGraph *g, const PgdlDataset *ds)
{
	bool		expands = ds->n_sequences > 0;

	for (int c = 0; c < ds->n_categorical; c++)
		expands = expands || ds->vocabulary[c].one_hot;
	if (expands)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a model trained on one-hot or sequence columns cannot be exported to ONNX with its normalization"),
				 errdetail("Its dataset expands a one-hot column to floats or has %d sequence columns, which the exported graph does not do.",
						   ds->n_sequences),
				 errhint("Export it with with_normalization => false, and give the file the packed features.")));
	add_slice(g, PGDL_ONNX_NODE_IDS, ds->n_numeric, ds->n_numeric + ds->n_categorical);
	g->cur = PGDL_ONNX_INPUT;
	add_slice(g, PGDL_ONNX_NODE_NUMERIC, 0, ds->n_numeric);
}

/* What pgdl.predict does to raw features before the network: imputation, normalization, indicators, ids after them. */
static void
add_preprocessing(OnnxGraph *g, const PgdlDataset *ds, const NnSpec *spec)
{
	bool		ids = ds->n_categorical + ds->n_sequences > 0;

	if (ids)
		split_ids(g, ds);
	if (ds->impute != NULL)
		add_imputation(g, ds, spec);
	add_normalization(g, ds, spec);
	if (ds->n_indicators > 0)
		add_indicators(g, ds);
	if (ids)
	{
		const char *concat[] = {g->cur, PGDL_ONNX_NODE_IDS};

		node_attrs(add_node_inputs(g, pgdl_onnx_op_name(PGDL_ONNX_CONCAT), PGDL_ONNX_NODE_IDS_CONCAT, 2, concat),
				   1, attr_int("axis", 1), NULL, NULL);
		if (ds->categorical != NULL)
			add_meta(g, PGDL_ONNX_META_CATEGORICAL,
					 JsonbToCString(NULL, &ds->categorical->root, VARSIZE(ds->categorical)));
	}
}

/* Layer i's parameter tensors as initializers "layer<i>.<name>", their names into names[]. */
static void
add_layer_params(OnnxGraph *g, const NnModel *m, int i, const char **names)
{
	PgdlTensor	t[PGDL_LAYER_MAX_TENSORS];
	int			n = pgdl_layer_tensors(m, i, t);

	for (int j = 0; j < n; j++)
	{
		int64		dims[PGDL_TENSOR_MAX_DIMS];

		for (int d = 0; d < t[j].ndim; d++)
			dims[d] = t[j].shape[d];
		names[j] = psprintf("layer%d.%s", i, t[j].name);
		add_initializer(g, names[j], t[j].ndim, dims,
						(t[j].buffer ? m->buffers : m->params) + t[j].offset);
	}
	names[n] = NULL;
}

/* [batch, ...] to [batch, features] before what needs it (a dense layer, the output) */
static void
flatten_to_rows(OnnxGraph *g, const char *name)
{
	if (g->rank == 2)
		return;
	node_attrs(add_node(g, pgdl_onnx_op_name(PGDL_ONNX_FLATTEN), name, NULL), 1, attr_int("axis", 1), NULL, NULL);
	g->rank = 2;
}

static void
add_window(OnnxGraph *g, const NnLayerSpec *l, const char *op, const char *name, const char **params)
{
	Onnx__NodeProto *n = add_node(g, op, name, params);
	int			stride = l->stride > 0 ? l->stride : l->kernel;	/* as the spec defaults it */

	if (l->type == NN_CONV2D)
	{
		node_attrs(n, 3, attr_ints("kernel_shape", 2, l->kernel), attr_ints("strides", 2, stride),
				   attr_ints("pads", 4, l->padding));
		/* a weight [filters, channels / groups, k, k] as ONNX's and PyTorch's; no attribute for one group */
		if (NN_GROUPS(l) > 1)
			node_attr_append(n, attr_int("group", NN_GROUPS(l)));
	}
	else
	{
		Onnx__AttributeProto *pads = attr_ints("pads", 4, l->padding);

		/* [top, left, bottom, right]: a pool's pads after may differ from those before */
		pads->ints[2] = pads->ints[3] = l->pad_end;
		node_attrs(n, 2, attr_ints("kernel_shape", 2, l->kernel), attr_ints("strides", 2, stride), NULL);
		if (l->padding != 0 || l->pad_end != 0)
			node_attr_append(n, pads);
		if (l->ceil_mode)
			node_attr_append(n, attr_int("ceil_mode", 1));
		if (l->count_pad)
			node_attr_append(n, attr_int("count_include_pad", 1));
	}
}

/* A scalar initializer "layer<i>.<what>" holding v; its name. */
static char *
add_scalar(OnnxGraph *g, int i, const char *what, float v)
{
	float	   *p = palloc(sizeof(float));
	char	   *name = psprintf("layer%d.%s", i, what);

	*p = v;
	add_initializer(g, name, 0, NULL, p);
	return name;
}

/* The current tensor as layer i's k-th input reads it: an earlier layer's output or the network's input. */
static void
read_input(OnnxGraph *g, const NnSpec *spec, int i, int k)
{
	int			src = nn_layer_src(spec, i, k);

	g->cur = g->outs[src + 1];
	g->rank = g->ranks[src + 1];
}

/*
 * add (a chain of ONNX's two-input Add, in input order as pgdl sums) and
 * concat (on axis 1: channels or features).  pgdl merges inputs of one rank,
 * and ONNX holds each as pgdl does ([C, H, W] as [batch, C, H, W], a global
 * average pool's [C, 1, 1] too), so that no input needs reshaping.
 */
static void
add_merge(OnnxGraph *g, const NnModel *m, int i, const char *name)
{
	int			n = nn_layer_n_inputs(&m->spec, i);
	const char *in[NN_MAX_INPUTS];

	for (int k = 0; k < n; k++)
	{
		read_input(g, &m->spec, i, k);
		in[k] = g->cur;
	}
	if (m->spec.layers[i].type == NN_CONCAT)
	{
		node_attrs(add_node_inputs(g, pgdl_onnx_op_name(PGDL_ONNX_CONCAT), name, n, in), 1,
				   attr_int("axis", 1), NULL, NULL);
		return;
	}
	for (int k = 1; k < n; k++)
	{
		const char *pair[2] = {k == 1 ? in[0] : g->cur, in[k]};

		add_node_inputs(g, pgdl_onnx_op_name(PGDL_ONNX_ADD), k == n - 1 ? name : psprintf("layer%d_add%d", i, k),
						2, pair);
	}
}

/* gelu, 0.5 x (1 + erf(x / sqrt 2)) as the kernels compute it: Gelu itself is opset 20 */
static void
add_gelu(OnnxGraph *g, int i, const char *name)
{
	char	   *x = g->cur;
	const char *rsqrt2[] = {add_scalar(g, i, "rsqrt2", (float) M_SQRT1_2), NULL};
	const char *one[] = {add_scalar(g, i, "one", 1.0f), NULL};
	const char *half[] = {add_scalar(g, i, "half", 0.5f), NULL};
	const char *times_x[] = {x, NULL};

	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_MUL), psprintf("layer%d_scale", i), rsqrt2);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_ERF), psprintf("layer%d_erf", i), NULL);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_ADD), psprintf("layer%d_plus_one", i), one);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_MUL), psprintf("layer%d_times_x", i), times_x);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_MUL), name, half);
}

/* Transpose by perm, of n axes */
static void
add_transpose(OnnxGraph *g, const char *name, int n, const int64 *perm)
{
	Onnx__AttributeProto *a = attr_ints("perm", n, 0);

	for (int d = 0; d < n; d++)
		a->ints[d] = perm[d];
	node_attrs(add_node(g, pgdl_onnx_op_name(PGDL_ONNX_TRANSPOSE), name, NULL), 1, a, NULL, NULL);
}

/* [a, b, c] to [a, c, b]: pgdl's sequences [steps, features] to ONNX's channels first, and back */
static void
add_swap_last(OnnxGraph *g, const char *name)
{
	const int64 perm[] = {0, 2, 1};

	add_transpose(g, name, 3, perm);
}

/* [a, b, c] to [b, a, c]: batch first (pgdl's) to time first (ONNX's GRU), and back */
static void
add_swap_first(OnnxGraph *g, const char *name)
{
	const int64 perm[] = {1, 0, 2};

	add_transpose(g, name, 3, perm);
}

/* An operator node of an int64 initializer "layer<i>.<what>" of n values after the current tensor: Squeeze's axes, Reshape's shape */
static void
add_with_ints(OnnxGraph *g, PgdlOnnxOp op, int i, const char *what, const char *name, int n, const int64 *v)
{
	const char *params[] = {psprintf("layer%d.%s", i, what), NULL};

	add_int64_initializer(g, params[0], n, v);
	add_node(g, pgdl_onnx_op_name(op), name, params);
}

/* torch's gate blocks r, z, n of h rows of `row` floats as ONNX's z, r, h */
static void
gru_gates(float *dst, const float *src, int h, int64 row)
{
	int64		block = (int64) h * row;

	memcpy(dst, src + block, sizeof(float) * block);
	memcpy(dst + block, src, sizeof(float) * block);
	memcpy(dst + 2 * block, src + 2 * block, sizeof(float) * block);
}

/*
 * gru: ONNX's GRU with linear_before_reset = 1 (torch's n gate), its weights
 * W [1, 3H, F], R [1, 3H, H] and B [1, 6H] in its gate order z, r, h,
 * between Transposes to and from time first; Squeeze of Y's direction, or
 * of the last state Y_h's.
 */
static void
add_gru(OnnxGraph *g, const NnModel *m, int i, const char *name)
{
	const NnLayerSpec *l = &m->spec.layers[i];
	PgdlTensor	t[PGDL_LAYER_MAX_TENSORS];
	int			h = l->units;
	int64		f,
				dims[3];
	float	   *w,
			   *r,
			   *b;
	const char *params[] = {psprintf("layer%d.W", i), psprintf("layer%d.R", i), psprintf("layer%d.B", i), NULL};
	Onnx__NodeProto *n;

	(void) pgdl_layer_tensors(m, i, t);
	f = t[0].shape[1];
	w = palloc(sizeof(float) * 3 * h * f);
	r = palloc(sizeof(float) * 3 * h * h);
	b = palloc(sizeof(float) * 6 * h);
	gru_gates(w, m->params + t[0].offset, h, f);
	gru_gates(r, m->params + t[1].offset, h, h);
	gru_gates(b, m->params + t[2].offset, h, 1);
	gru_gates(b + 3 * h, m->params + t[3].offset, h, 1);
	dims[0] = 1, dims[1] = 3 * h, dims[2] = f;
	add_initializer(g, params[0], 3, dims, w);
	dims[2] = h;
	add_initializer(g, params[1], 3, dims, r);
	dims[1] = 6 * h;
	add_initializer(g, params[2], 2, dims, b);
	add_swap_first(g, psprintf("layer%d_time_first", i));
	n = add_node(g, pgdl_onnx_op_name(PGDL_ONNX_GRU), psprintf("layer%d_gru", i), params);
	node_attrs(n, 2, attr_int("hidden_size", h), attr_int("linear_before_reset", 1), NULL);
	if (l->return_sequences)
	{
		const int64 axis = 1;	/* Y: [steps, 1, batch, H] */

		add_with_ints(g, PGDL_ONNX_SQUEEZE, i, "axes", psprintf("layer%d_squeeze", i), 1, &axis);
		add_swap_first(g, name);
	}
	else
	{
		const int64 axis = 0;	/* Y_h: [1, batch, H] */

		n->n_output = 2;
		n->output = palloc(sizeof(char *) * 2);
		n->output[0] = "";
		n->output[1] = g->cur = psprintf("layer%d_state", i);
		add_with_ints(g, PGDL_ONNX_SQUEEZE, i, "axes", name, 1, &axis);
		g->rank = 2;
	}
}

/* rows [from, from + n) of a [rows, cols] matrix, transposed: [cols, n], for MatMul */
static float *
rows_transposed(const float *src, int64 cols, int64 from, int64 n)
{
	float	   *dst = palloc(sizeof(float) * cols * n);

	for (int64 r = 0; r < n; r++)
		for (int64 c = 0; c < cols; c++)
			dst[c * n + r] = src[(from + r) * cols + c];
	return dst;
}

/*
 * x W^T + b on the last axis as MatMul and Add (Gemm takes matrices only): W's
 * rows [from, from + d) of `weight` [rows, cols], as "layer<i>.<what>_weight"
 * [cols, d] and "_bias"; the Add named `name`, or layer<i>_<what>.
 */
static void
add_projection(OnnxGraph *g, int i, const char *what, const float *weight, const float *bias, int64 cols,
			   int64 from, int64 d, const char *name)
{
	const char *w[] = {psprintf("layer%d.%s_weight", i, what), NULL};
	const char *b[] = {psprintf("layer%d.%s_bias", i, what), NULL};
	int64		dims[2] = {cols, d};

	add_initializer(g, w[0], 2, dims, rows_transposed(weight, cols, from, d));
	add_initializer(g, b[0], 1, &dims[1], bias + from);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_MATMUL), psprintf("layer%d_%s_matmul", i, what), w);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_ADD), name ? name : psprintf("layer%d_%s", i, what), b);
}

/* Q, K or V of attention (k = 0, 1, 2) as [batch, heads, steps, dh] (K: [batch, heads, dh, steps]) */
static char *
add_attention_head_split(OnnxGraph *g, int i, int k, char *x, const float *w_in, const float *b_in,
						 int64 d, int heads)
{
	const char *what[] = {"q", "k", "v"};
	const int64 shape[] = {0, 0, heads, d / heads};
	const int64 perm[] = {0, 2, 1, 3};
	const int64 perm_k[] = {0, 2, 3, 1};

	g->cur = x;
	add_projection(g, i, what[k], w_in, b_in, d, k * d, d, NULL);
	add_with_ints(g, PGDL_ONNX_RESHAPE, i, psprintf("%s_shape", what[k]), psprintf("layer%d_%s_heads", i, what[k]),
				  4, shape);
	add_transpose(g, psprintf("layer%d_%s_t", i, what[k]), 4, k == 1 ? perm_k : perm);
	return g->cur;
}

/*
 * attention, as pgdl computes it: per head softmax(Q K^T / sqrt(dh)) V of
 * the projections of the input, (causal: -inf above the diagonal), the heads
 * side by side, projected by out_proj: MatMul, Add, Reshape, Transpose,
 * Mul, Softmax; the weights transposed for MatMul.
 */
static void
add_attention(OnnxGraph *g, const NnModel *m, int i, const char *name)
{
	const NnLayerSpec *l = &m->spec.layers[i];
	NnShape		in = NN_IN_SHAPE(m->shape, &m->spec, i);
	int64		d = in.w,
				t = in.c;
	const float *p = m->params + m->param_off[i];
	char	   *x = g->cur;
	const char *qk[2];
	const char *pv[2];
	const char *scale[] = {add_scalar(g, i, "scale", 1.0f / sqrtf((float) (d / l->heads))), NULL};
	const int64 perm[] = {0, 2, 1, 3};
	const int64 shape[] = {0, 0, d};

	qk[0] = add_attention_head_split(g, i, 0, x, p, p + 4 * d * d, d, l->heads);
	qk[1] = add_attention_head_split(g, i, 1, x, p, p + 4 * d * d, d, l->heads);
	pv[1] = add_attention_head_split(g, i, 2, x, p, p + 4 * d * d, d, l->heads);
	add_node_inputs(g, pgdl_onnx_op_name(PGDL_ONNX_MATMUL), psprintf("layer%d_scores", i), 2, qk);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_MUL), psprintf("layer%d_scaled", i), scale);
	if (l->causal)
	{
		float	   *mask = palloc0(sizeof(float) * t * t);
		const char *mk[] = {psprintf("layer%d.causal_mask", i), NULL};
		int64		dims[2] = {t, t};

		for (int64 r = 0; r < t; r++)
			for (int64 c = r + 1; c < t; c++)
				mask[r * t + c] = -INFINITY;
		add_initializer(g, mk[0], 2, dims, mask);
		add_node(g, pgdl_onnx_op_name(PGDL_ONNX_ADD), psprintf("layer%d_masked", i), mk);
	}
	node_attrs(add_node(g, pgdl_onnx_op_name(PGDL_ONNX_SOFTMAX), psprintf("layer%d_weights", i), NULL), 1,
			   attr_int("axis", -1), NULL, NULL);
	pv[0] = g->cur;
	add_node_inputs(g, pgdl_onnx_op_name(PGDL_ONNX_MATMUL), psprintf("layer%d_heads", i), 2, pv);
	add_transpose(g, psprintf("layer%d_heads_t", i), 4, perm);
	add_with_ints(g, PGDL_ONNX_RESHAPE, i, "out_shape", psprintf("layer%d_joined", i), 3, shape);
	add_projection(g, i, "out", p + 3 * d * d, p + 4 * d * d + 3 * d, d, 0, d, name);
}

/*
 * embedding: the ids, whole numbers carried as floats as pgdl.predict takes
 * them, Cast to int64 and looked up by Gather in layer<i>.weight, making
 * [batch, steps, dim]; with positions, Add of the [steps, dim] table.
 */
static void
add_embedding(OnnxGraph *g, const NnLayerSpec *l, int i, const char **params, const char *name)
{
	const char *gather[2];
	const char *positions[] = {params[1], NULL};

	node_attrs(add_node(g, pgdl_onnx_op_name(PGDL_ONNX_CAST), psprintf("layer%d_ids", i), NULL), 1,
			   attr_int("to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64), NULL, NULL);
	gather[0] = params[0];
	gather[1] = g->cur;
	node_attrs(add_node_inputs(g, pgdl_onnx_op_name(PGDL_ONNX_GATHER),
							   l->positions ? psprintf("layer%d_gather", i) : name, 2, gather),
			   1, attr_int("axis", 0), NULL, NULL);
	if (l->positions)
		add_node(g, pgdl_onnx_op_name(PGDL_ONNX_ADD), name, positions);
	g->rank = 3;
}

/* conv1d: Conv over the steps of [batch, features, steps], between Transposes from and to pgdl's layout */
static void
add_conv1d(OnnxGraph *g, const NnLayerSpec *l, int i, const char **params, const char *name)
{
	add_swap_last(g, psprintf("layer%d_to_channels", i));
	node_attrs(add_node(g, pgdl_onnx_op_name(PGDL_ONNX_CONV), psprintf("layer%d_conv", i), params), 3,
			   attr_ints("kernel_shape", 1, l->kernel), attr_ints("strides", 1, l->stride),
			   attr_ints("pads", 2, l->padding));
	add_swap_last(g, name);
}

/* The ONNX operator a layer of this type is written as (spec/spec.h's table). */
static const char *
layer_op(NnLayerType type)
{
	PgdlOnnxOp	op = pgdl_onnx_layer_op(type);

	if (op == PGDL_ONNX_NONE)
		elog(ERROR, "layer type %d has no ONNX operator", (int) type);
	return pgdl_onnx_op_name(op);
}

/*
 * flatten: Flatten at axis 1, a node even where it changes nothing ([batch,
 * features]) so that the layer comes back; with steps, to a sequence: Reshape
 * to [batch, steps, size / steps] (0 keeps the batch).
 */
static void
add_flatten(OnnxGraph *g, const NnLayerSpec *l, int i, const char *name)
{
	const int64 shape[] = {0, l->steps, -1};

	if (l->steps > 0)
	{
		add_with_ints(g, PGDL_ONNX_RESHAPE, i, "shape", name, 3, shape);
		g->rank = 3;
		return;
	}
	node_attrs(add_node(g, layer_op(l->type), name, NULL), 1, attr_int("axis", 1), NULL, NULL);
	g->rank = 2;
}

/* dense: Gemm of the rows; per_step, on each step [batch, steps, F] by [F, units] as MatMul and Add */
static void
add_dense(OnnxGraph *g, const NnModel *m, int i, const char **params, const char *name)
{
	const NnLayerSpec *l = &m->spec.layers[i];
	int64		f = NN_IN_SHAPE(m->shape, &m->spec, i).w;

	if (l->per_step)
	{
		add_projection(g, i, "per_step", m->params + m->param_off[i],
					   m->params + m->param_off[i] + (int64) l->units * f, f, 0, l->units, name);
		return;
	}
	flatten_to_rows(g, psprintf("layer%d_flatten", i));
	node_attrs(add_node(g, layer_op(l->type), name, params), 1, attr_int("transB", 1), NULL, NULL);
}

/* Layer i as one node, the operator spec/spec.h's table gives its type, with its attributes. */
static void
add_layer(OnnxGraph *g, const NnModel *m, int i)
{
	const NnLayerSpec *l = &m->spec.layers[i];
	char	   *name = psprintf("layer%d", i);
	const char *params[PGDL_LAYER_MAX_TENSORS + 1];

	/* gru, attention and a dense per step write their weights rearranged as ONNX's operators read them */
	if (l->type != NN_GRU && l->type != NN_ATTENTION && !(l->type == NN_DENSE && l->per_step))
		add_layer_params(g, m, i, params);
	switch (l->type)
	{
		case NN_DENSE:
			add_dense(g, m, i, params, name);
			break;
		case NN_CONV2D:
			add_window(g, l, layer_op(l->type), name, params);
			break;
		case NN_MAXPOOL2D:
		case NN_AVGPOOL2D:
			if (nn_pool_counts_past_pads(l, NN_IN_SHAPE(m->shape, &m->spec, i).h, NN_IN_SHAPE(m->shape, &m->spec, i).w))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("layer %d (avgpool2d) cannot be exported to ONNX", i),
						 errdetail("Its ceil_mode makes a last window that runs past its padding, which it counts in "
								   "(count_include_pad): onnxruntime divides such a window by its whole size, "
								   "torch and pgdl by its part within the padded input.")));
			add_window(g, l, layer_op(l->type), name, NULL);
			break;
		case NN_FLATTEN:
			add_flatten(g, l, i, name);
			break;
		case NN_GLOBAL_AVGPOOL:
			if (g->rank == 3)
			{
				/* over a sequence's steps: [batch, features] */
				node_attrs(add_node(g, pgdl_onnx_op_name(PGDL_ONNX_REDUCEMEAN), name, NULL), 2,
						   attr_ints("axes", 1, 1), attr_int("keepdims", 0), NULL);
				g->rank = 2;
				break;
			}
			add_node(g, layer_op(l->type), name, NULL);
			break;
		case NN_RELU:
		case NN_SIGMOID:
		case NN_TANH:
			add_node(g, layer_op(l->type), name, NULL);
			break;
		case NN_LEAKY_RELU:
			node_attrs(add_node(g, layer_op(l->type), name, NULL), 1, attr_float("alpha", l->alpha), NULL, NULL);
			break;
		case NN_DROPOUT:
			{
				/* an identity at inference; the ratio is kept for the way back */
				const char *ratio[] = {psprintf("layer%d.ratio", i), NULL};

				add_initializer(g, ratio[0], 0, NULL, &l->rate);
				add_node(g, layer_op(l->type), name, ratio);
				break;
			}
		case NN_BATCHNORM:
			/* ONNX's momentum weighs the running statistic, PyTorch's (and pgdl's) the batch's */
			node_attrs(add_node(g, layer_op(l->type), name, params), 2, attr_float("epsilon", l->eps),
					   attr_float("momentum", 1.0f - l->momentum), NULL);
			break;
		case NN_SOFTMAX:
			/* opset 13's Softmax and LogSoftmax are over one axis: the last, or over_steps a sequence's steps */
			node_attrs(add_node(g, l->log ? pgdl_onnx_op_name(PGDL_ONNX_LOGSOFTMAX) : layer_op(l->type), name, NULL),
					   1, attr_int("axis", l->over_steps ? 1 : -1), NULL, NULL);
			break;
		case NN_LAYERNORM:
			/* over the last axis, as pgdl's; LayerNormalization makes the file opset 17 (file_opset) */
			node_attrs(add_node(g, layer_op(l->type), name, params), 2, attr_int("axis", -1),
					   attr_float("epsilon", l->eps), NULL);
			break;
		case NN_GELU:
			add_gelu(g, i, name);
			break;
		case NN_ADD:
		case NN_CONCAT:
			add_merge(g, m, i, name);
			break;
		case NN_GRU:
			add_gru(g, m, i, name);
			break;
		case NN_ATTENTION:
			add_attention(g, m, i, name);
			break;
		case NN_EMBEDDING:
			add_embedding(g, l, i, params, name);
			break;
		case NN_CONV1D:
			add_conv1d(g, l, i, params, name);
			break;
		case NN_SLICE:
			/* a flat input's features, or each step's */
			add_slice(g, name, l->start, (int64) l->start + l->units);
			break;
		default:
			elog(ERROR, "layer %d has unknown type %d", i, (int) l->type);
	}
}

/* A regression model of standardized targets: z * std + mean, as pgdl.predict answers. */
static void
add_target_unscaling(OnnxGraph *g, const PgdlDataset *ds)
{
	const char *std[] = {PGDL_ONNX_TARGET_STD, NULL};
	const char *mean[] = {PGDL_ONNX_TARGET_MEAN, NULL};
	int64		dims[1] = {ds->n_targets};

	add_initializer(g, PGDL_ONNX_TARGET_STD, 1, dims, ds->target_std);
	add_initializer(g, PGDL_ONNX_TARGET_MEAN, 1, dims, ds->target_mean);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_MUL), PGDL_ONNX_NODE_TARGET_MUL, std);
	add_node(g, pgdl_onnx_op_name(PGDL_ONNX_ADD), PGDL_ONNX_NODE_TARGET_ADD, mean);
	add_meta(g, PGDL_ONNX_META_TARGET_NORMALIZATION,
			 JsonbToCString(NULL, &ds->target_normalization->root, VARSIZE(ds->target_normalization)));
}

/*
 * The network, then what pgdl.predict makes of its outputs (targets, when
 * given, the dataset whose standardized targets to undo); the last tensor is
 * named PGDL_ONNX_OUTPUT.
 */
static void
add_network(OnnxGraph *g, const NnModel *m, const PgdlDataset *targets)
{
	Onnx__NodeProto *last;

	g->outs[0] = g->cur;
	g->ranks[0] = g->rank;
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		CHECK_FOR_INTERRUPTS();
		read_input(g, &m->spec, i, 0);
		add_layer(g, m, i);
		g->outs[i + 1] = g->cur;
		g->ranks[i + 1] = g->rank;
	}
	flatten_to_rows(g, PGDL_ONNX_NODE_OUTPUT_FLATTEN);
	if (m->spec.loss == NN_LOSS_CROSS_ENTROPY)
		node_attrs(add_node(g, pgdl_onnx_op_name(PGDL_ONNX_SOFTMAX), PGDL_ONNX_NODE_SOFTMAX, NULL), 1,
				   attr_int("axis", 1), NULL, NULL);
	else if (m->spec.loss == NN_LOSS_BCE)
		add_node(g, pgdl_onnx_op_name(PGDL_ONNX_SIGMOID), PGDL_ONNX_NODE_SIGMOID, NULL);
	if (targets != NULL)
		add_target_unscaling(g, targets);
	if (g->nodes == NIL)
		add_node(g, pgdl_onnx_op_name(PGDL_ONNX_IDENTITY), PGDL_ONNX_NODE_OUTPUT_IDENTITY, NULL);
	last = llast(g->nodes);
	last->output[0] = PGDL_ONNX_OUTPUT;
}

/* ---- the model ---- */

/* list_to_array: a List's pointers as the array protobuf-c wants (NULL for none) */
static void **
list_to_array(List *l)
{
	void	  **a;
	ListCell   *lc;
	int			i = 0;

	if (l == NIL)
		return NULL;
	a = palloc(sizeof(void *) * list_length(l));
	foreach(lc, l)
		a[i++] = lfirst(lc);
	return a;
}

/*
 * PGDL_ONNX_OPSET, or 17 where a layernorm needs LayerNormalization: the
 * lowest opset that has every node, so that a file of the older operators
 * stays what it was and opens in runtimes of opset 13.
 */
static int64
file_opset(const NnSpec *spec)
{
	for (int i = 0; i < spec->n_layers; i++)
		if (spec->layers[i].type == NN_LAYERNORM)
			return PGDL_ONNX_OPSET_17;
	return PGDL_ONNX_OPSET;
}

static Onnx__ModelProto *
build_model(const PgdlModel *pm, const char *name, bool normalize)
{
	const NnModel *m = pm->nn;
	OnnxGraph	g = {NIL, NIL, NIL, PGDL_ONNX_INPUT, m->spec.input_ndim == 3 ? 4 : 2};
	Onnx__ModelProto *model = palloc(sizeof(Onnx__ModelProto));
	Onnx__GraphProto *graph = palloc(sizeof(Onnx__GraphProto));
	Onnx__OperatorSetIdProto *opset = palloc(sizeof(Onnx__OperatorSetIdProto));
	int32		n_out = (int32) nn_model_output_size(m);

	/* a dataset row that does not describe the model would give initializers of the wrong size */
	pgdl_check_model_fits(&m->spec, pm->dataset);
	if (normalize && pm->dataset != NULL)
		add_preprocessing(&g, pm->dataset, &m->spec);
	/* with the normalization in front, the targets' scaling undone behind: the file answers as pgdl.predict */
	add_network(&g, m, normalize && pm->dataset != NULL && pm->dataset->target_mean != NULL &&
				nn_loss_is_regression(m->spec.loss) ? pm->dataset : NULL);
	add_model_meta(&g, pm, name);

	onnx__graph_proto__init(graph);
	graph->name = "pgdl";
	graph->n_node = list_length(g.nodes);
	graph->node = (Onnx__NodeProto **) list_to_array(g.nodes);
	graph->n_initializer = list_length(g.inits);
	graph->initializer = (Onnx__TensorProto **) list_to_array(g.inits);
	graph->n_input = 1;
	graph->input = palloc(sizeof(Onnx__ValueInfoProto *));
	/* with the dataset's preprocessing, the file takes its raw example vector (imputation's indicators are made) */
	graph->input[0] = value_info(PGDL_ONNX_INPUT, m->spec.input_ndim,
								 normalize && pm->dataset != NULL && m->spec.input_ndim == 1
								 ? &pm->dataset->n_raw : m->spec.input);
	graph->n_output = 1;
	graph->output = palloc(sizeof(Onnx__ValueInfoProto *));
	graph->output[0] = value_info(PGDL_ONNX_OUTPUT, 1, &n_out);

	onnx__operator_set_id_proto__init(opset);
	opset->domain = "";
	opset->has_version = true;
	opset->version = file_opset(&m->spec);

	onnx__model_proto__init(model);
	model->has_ir_version = true;
	model->ir_version = opset->version == PGDL_ONNX_OPSET ? PGDL_ONNX_IR_VERSION : PGDL_ONNX_IR_VERSION_17;
	model->n_opset_import = 1;
	model->opset_import = palloc(sizeof(Onnx__OperatorSetIdProto *));
	model->opset_import[0] = opset;
	model->producer_name = "pgdl";
	model->producer_version = PGDL_VERSION;
	model->graph = graph;
	model->n_metadata_props = list_length(g.meta);
	model->metadata_props = (Onnx__StringStringEntryProto **) list_to_array(g.meta);
	return model;
}

static bytea *
pack_model(const Onnx__ModelProto *model)
{
	size_t		size = onnx__model_proto__get_packed_size(model);
	bytea	   *out = pgdl_bytea_alloc(size, "ONNX model");

	if (onnx__model_proto__pack(model, (uint8_t *) VARDATA(out)) != size)
		elog(ERROR, "ONNX model packed to a size other than computed");
	return out;
}

/* The name of stored model `id`, or NULL when it has none or is not visible (pgdl_model_arg says so). */
static char *
model_name(int64 id)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	MemoryContext caller = CurrentMemoryContext;
	char	   *name = NULL;

	SPI_connect();
	if (SPI_execute_with_args("SELECT name FROM pgdl.models WHERE id = $1", 1, argtypes, values, NULL, true, 1)
		== SPI_OK_SELECT && SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			name = MemoryContextStrdup(caller, TextDatumGetCString(d));
	}
	SPI_finish();
	return name;
}

PG_FUNCTION_INFO_V1(pgdl_export_onnx);
Datum
pgdl_export_onnx(PG_FUNCTION_ARGS)
{
	bool		normalize = PG_GETARG_BOOL(1);
	char	   *name = NULL;
	Oid		   *argtypes;
	Oid			argtype;
	int			nargs;
	PgdlModel  *pm;

	pgdl_engine_prepare();
	(void) get_func_signature(fcinfo->flinfo->fn_oid, &argtypes, &nargs);
	argtype = argtypes[0];
	/* the name first: pgdl_model_arg's model is the cache's, and must be used before any query runs */
	if (argtype == INT8OID)
		name = model_name(PG_GETARG_INT64(0));
	else if (argtype == TEXTOID)
	{
		/* a deployment's name is not its model's: the metadata names the model */
		pm = pgdl_model_arg(fcinfo);
		name = model_name(pm->id);
	}
	pm = pgdl_model_arg(fcinfo);
	if (normalize)
		pgdl_check_model_preprocessing(pm);
	PG_RETURN_BYTEA_P(pack_model(build_model(pm, name, normalize)));
}
