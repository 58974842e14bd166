/*
 * spec_json.c -- the description language: jsonb <-> engine spec and training
 * configuration.
 *
 *   {"input": [1, 28, 28],
 *    "layers": [{"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, ...],
 *    "loss": "cross_entropy"}
 *
 *   {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "batch_size": 128, "seed": 42}
 *
 * A configuration of pgdl.fit_multiple may also start from a stored model:
 * {"base_model": "name" or id, "freeze": 3 or "flatten", "head": [layers]}.
 * They are read here into a PgdlTransferKeys; transfer.c resolves them against
 * the base model.  Any configuration may start from a stored model's weights
 * where the shapes fit: {"warm_start": "name" or id} (transfer.c, pgdl_model_start).
 *
 * Layer types take pgdl's names or the ONNX operator's (Gemm, Conv, MaxPool,
 * ...), so that ONNX import and export are a mapping: the table of ONNX's
 * operators below is the one they read too.  Unknown keys are errors,
 * not silently ignored: a misspelt "paddding" would otherwise train a different
 * network.  Ranges and shapes are checked by the engine's one validator.
 */
#include "postgres.h"

#include <errno.h>
#include <math.h>

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "base/base.h"
#include "spec/spec.h"

/* ONNX's operators, by PgdlOnnxOp (spec/spec.h): their names, and the layer each that is one is. */
static const struct
{
	const char *name;
	NnLayerType layer;
}			onnx_ops[PGDL_ONNX_OP_MAX] = {
	[PGDL_ONNX_GEMM] = {"Gemm", NN_DENSE},
	[PGDL_ONNX_CONV] = {"Conv", NN_CONV2D},
	[PGDL_ONNX_MAXPOOL] = {"MaxPool", NN_MAXPOOL2D},
	[PGDL_ONNX_AVERAGEPOOL] = {"AveragePool", NN_AVGPOOL2D},
	[PGDL_ONNX_GLOBALAVERAGEPOOL] = {"GlobalAveragePool", NN_GLOBAL_AVGPOOL},
	[PGDL_ONNX_FLATTEN] = {"Flatten", NN_FLATTEN},
	[PGDL_ONNX_RELU] = {"Relu", NN_RELU},
	[PGDL_ONNX_LEAKYRELU] = {"LeakyRelu", NN_LEAKY_RELU},
	[PGDL_ONNX_SIGMOID] = {"Sigmoid", NN_SIGMOID},
	[PGDL_ONNX_TANH] = {"Tanh", NN_TANH},
	[PGDL_ONNX_DROPOUT] = {"Dropout", NN_DROPOUT},
	[PGDL_ONNX_BATCHNORMALIZATION] = {"BatchNormalization", NN_BATCHNORM},
	[PGDL_ONNX_GELU] = {"Gelu", NN_GELU},
	[PGDL_ONNX_LAYERNORMALIZATION] = {"LayerNormalization", NN_LAYERNORM},
	[PGDL_ONNX_ADD] = {"Add", NN_ADD},
	[PGDL_ONNX_CONCAT] = {"Concat", NN_CONCAT},
	[PGDL_ONNX_SOFTMAX] = {"Softmax", NN_SOFTMAX},
	/*
	 * ONNX's GRU with linear_before_reset = 1 (PyTorch's); Slice on the last
	 * axis.  Not Gather for embedding: ONNX's Gather indexes any tensor on any
	 * axis, a layer with a learned table is one use of it.
	 */
	[PGDL_ONNX_GRU] = {"GRU", NN_GRU},
	[PGDL_ONNX_SLICE] = {"Slice", NN_SLICE},
	/*
	 * No layer type: import reads a MatMul as a dense layer whose bias the Add
	 * after it gives, a Reshape as flatten, a trailing Softmax or LogSoftmax as
	 * the loss's; export writes the dataset's normalization as Mul, or Sub and
	 * Div, its imputation as IsNaN and Where, its missing-value indicators as
	 * Gather, Cast and Concat, gelu as Mul, Erf, Add and Mul (Gelu is opset
	 * 20), an embedding as Cast and Gather, conv1d between Transposes (pgdl's
	 * sequences are steps first), a global average over steps as ReduceMean,
	 * gru's outputs through Squeeze, and a graph of no other node as an
	 * Identity.  Import reads torch's Shape, Gather, Unsqueeze, Concat and
	 * ConstantOfShape that make a GRU's initial state (zeros) as such, and
	 * LayerNormalization decomposed (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add)
	 * as a layernorm.
	 */
	[PGDL_ONNX_MATMUL] = {"MatMul"},
	[PGDL_ONNX_RESHAPE] = {"Reshape"},
	[PGDL_ONNX_LOGSOFTMAX] = {"LogSoftmax"},
	[PGDL_ONNX_PAD] = {"Pad"},
	[PGDL_ONNX_IDENTITY] = {"Identity"},
	[PGDL_ONNX_CONSTANT] = {"Constant"},
	[PGDL_ONNX_MUL] = {"Mul"},
	[PGDL_ONNX_SUB] = {"Sub"},
	[PGDL_ONNX_DIV] = {"Div"},
	[PGDL_ONNX_ISNAN] = {"IsNaN"},
	[PGDL_ONNX_WHERE] = {"Where"},
	[PGDL_ONNX_GATHER] = {"Gather"},
	[PGDL_ONNX_CAST] = {"Cast"},
	[PGDL_ONNX_ERF] = {"Erf"},
	[PGDL_ONNX_TRANSPOSE] = {"Transpose"},
	[PGDL_ONNX_REDUCEMEAN] = {"ReduceMean"},
	[PGDL_ONNX_SQUEEZE] = {"Squeeze"},
	[PGDL_ONNX_SHAPE] = {"Shape"},
	[PGDL_ONNX_UNSQUEEZE] = {"Unsqueeze"},
	[PGDL_ONNX_CONSTANTOFSHAPE] = {"ConstantOfShape"},
	[PGDL_ONNX_POW] = {"Pow"},
	[PGDL_ONNX_SQRT] = {"Sqrt"},
};

PgdlOnnxOp
pgdl_onnx_op_from_name(const char *name)
{
	for (int op = 1; op < PGDL_ONNX_OP_MAX; op++)
		if (strcmp(name, onnx_ops[op].name) == 0)
			return (PgdlOnnxOp) op;
	return PGDL_ONNX_NONE;
}

const char *
pgdl_onnx_op_name(PgdlOnnxOp op)
{
	Assert(op > PGDL_ONNX_NONE && op < PGDL_ONNX_OP_MAX);
	return onnx_ops[op].name;
}

NnLayerType
pgdl_onnx_op_layer(PgdlOnnxOp op)
{
	return op > PGDL_ONNX_NONE && op < PGDL_ONNX_OP_MAX ? onnx_ops[op].layer : 0;
}

PgdlOnnxOp
pgdl_onnx_layer_op(NnLayerType type)
{
	for (int op = 1; type != 0 && op < PGDL_ONNX_OP_MAX; op++)
		if (onnx_ops[op].layer == type)
			return (PgdlOnnxOp) op;
	return PGDL_ONNX_NONE;
}

/* The keys each layer type accepts besides "type". */
static const char *const layer_keys[NN_LAYER_TYPE_MAX][7] = {
	[NN_DENSE] = {"units", "init", "per_step"},
	[NN_CONV2D] = {"filters", "kernel", "stride", "padding", "init", "groups"},
	[NN_MAXPOOL2D] = {"size", "kernel", "stride", "padding", "padding_end", "ceil_mode"},
	[NN_AVGPOOL2D] = {"size", "kernel", "stride", "padding", "padding_end", "ceil_mode", "count_include_pad"},
	[NN_LEAKY_RELU] = {"alpha"},
	[NN_DROPOUT] = {"rate"},
	[NN_BATCHNORM] = {"eps", "momentum"},
	[NN_LAYERNORM] = {"eps"},
	[NN_EMBEDDING] = {"vocab", "dim", "positions"},
	[NN_GRU] = {"units", "return_sequences"},
	[NN_SLICE] = {"start", "length"},
	[NN_ATTENTION] = {"heads", "causal"},
	[NN_CONV1D] = {"filters", "kernel", "stride", "padding", "init"},
	[NN_FLATTEN] = {"steps"},
	[NN_SOFTMAX] = {"log", "over_steps"},
};

static const char *const spec_keys[] = {"input", "layers", "loss", "delta", NULL};

/* Keys of transfer learning, which only pgdl.fit_multiple's configurations take. */
#define TRANSFER_KEYS "base_model", "freeze", "head"
static const char *const transfer_keys[] = {TRANSFER_KEYS};
static const char *const config_keys[] = {
	"optimizer", "lr", "momentum", "nesterov", "weight_decay", "beta1", "beta2", "eps",
	"alpha", "centered", "lr_decay", "initial_accumulator_value",
	"class_weight",
	"batch_size", "seed", "warm_start", "device", "workers_per_device", "mixed_devices", "threads",
	"schedule", "step_size", "gamma", "eta_min", "warmup_epochs", "warmup_steps", "warmup_start_factor",
	"clip_norm", "no_decay_bias_norm", "label_smoothing", "patience", "min_delta", "monitor",
	"restore_best", "precision",
	TRANSFER_KEYS, NULL
};

void
pgdl_check_model_input(const NnModel *m, const float *x, int n)
{
	NnError		err;

	if (!nn_model_check_input(m, x, n, &err))
		ereport(ERROR,
				(errcode(pgdl_nn_data_errcode(&err)),
				 errmsg("input out of range for layer %d (%s)", err.layer,
						nn_layer_type_name(m->spec.layers[err.layer].type)),
				 errdetail("%c%s.", pg_toupper((unsigned char) err.msg[0]), err.msg + 1)));
}

JsonbValue *
pgdl_jsonb_key(JsonbContainer *obj, const char *key)
{
	JsonbValue	k;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	return findJsonbValueFromContainer(obj, JB_FOBJECT, &k);
}

/* Keys every layer takes: its type, and the graph form's name and inputs. */
static const char *const layer_common_keys[] = {"type", "name", "inputs", NULL};

/* Reject keys other than those in `extra` (NULL-terminated) and in `allowed` (at most n, NULL-terminated if fewer). */
static void
check_keys(JsonbContainer *obj, const char *const *allowed, int n, const char *const *extra,
		   const char *what, const char *path)
{
	JsonbIterator *it = JsonbIteratorInit(obj);
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			depth = 0;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		ok = false;
		char	   *key;

		if (tok == WJB_BEGIN_OBJECT)
			depth++;
		if (tok != WJB_KEY || depth != 1)
			continue;
		key = pnstrdup(v.val.string.val, v.val.string.len);
		for (int i = 0; extra && extra[i] != NULL; i++)
			ok |= strcmp(key, extra[i]) == 0;
		for (int i = 0; i < n && allowed[i] != NULL; i++)
			ok |= strcmp(key, allowed[i]) == 0;
		if (!ok)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid %s at %s%s%s", what, path, path[0] ? "." : "", pgdl_echo(key)),
					 errdetail("Key \"%s\" is not known here.", pgdl_echo(key))));
	}
}

static double
get_number(JsonbValue *v, const char *what, const char *path)
{
	if (v->type != jbvNumeric)
		pgdl_report_invalid(what, path, "Expected a number.");
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
}

static int32
get_int(JsonbValue *v, const char *what, const char *path)
{
	double		d = get_number(v, what, path);

	if (d != floor(d) || d < PG_INT32_MIN || d > PG_INT32_MAX)
		pgdl_report_invalid(what, path, "Expected an integer.");
	return (int32) d;
}

static char *
get_string(JsonbValue *v, const char *what, const char *path)
{
	if (v->type != jbvString)
		pgdl_report_invalid(what, path, "Expected a string.");
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static JsonbContainer *
get_container(JsonbValue *v, bool array, const char *what, const char *path)
{
	if (v->type != jbvBinary ||
		(array ? !JsonContainerIsArray(v->val.binary.data) : !JsonContainerIsObject(v->val.binary.data)))
		pgdl_report_invalid(what, path, array ? "Expected an array." : "Expected an object.");
	return v->val.binary.data;
}

/* A layer's "type", by pgdl's name or the ONNX operator's; `field` is its path. */
static NnLayerType
parse_layer_type(JsonbContainer *obj, const char *field)
{
	JsonbValue *v = pgdl_jsonb_key(obj, "type");
	char	   *name;
	NnLayerType type;

	if (v == NULL)
		pgdl_report_invalid("model spec", field, "Every layer needs a \"type\".");
	name = get_string(v, "model spec", field);
	type = nn_layer_type_from_name(name);
	if (type == 0)
		type = pgdl_onnx_op_layer(pgdl_onnx_op_from_name(name));
	if (type == 0)
	{
		StringInfoData known;

		/* the engine's names, so that the list is never behind the layers */
		initStringInfo(&known);
		for (int t = 1; t < NN_LAYER_TYPE_MAX; t++)
			appendStringInfo(&known, "%s%s", t > 1 ? ", " : "", nn_layer_type_name((NnLayerType) t));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid model spec at %s", field),
				 errdetail("Unknown layer type \"%s\".", pgdl_echo(name)),
				 errhint("Layer types: %s.", known.data)));
	}
	return type;
}

static NnInit
parse_init(JsonbValue *v, const char *field)
{
	char	   *init = get_string(v, "model spec", field);

	if (strcmp(init, "he") == 0)
		return NN_INIT_HE;
	if (strcmp(init, "glorot") != 0)
		pgdl_report_invalid("model spec", field, "Expected \"he\" or \"glorot\".");
	return NN_INIT_GLOROT;
}

/*
 * A pool's pads: "padding" before, "padding_end" after (the same unless
 * given), and for an average whether the pads count (torch's default, yes).
 * An unpadded pool has count_include_pad off whatever the key says: one
 * spec, one form.
 */
static void
parse_pool_pads(JsonbContainer *obj, const char *path, NnLayerSpec *l)
{
	char		field[80];
	JsonbValue *v;

	l->pad_end = l->padding;
	if ((v = pgdl_jsonb_key(obj, "padding_end")) != NULL)
	{
		snprintf(field, sizeof(field), "%s.padding_end", path);
		l->pad_end = get_int(v, "model spec", field);
	}
	l->count_pad = l->type == NN_AVGPOOL2D;
	if ((v = pgdl_jsonb_key(obj, "count_include_pad")) != NULL)
	{
		snprintf(field, sizeof(field), "%s.count_include_pad", path);
		if (v->type != jbvBool)
			pgdl_report_invalid("model spec", field, "Expected true or false.");
		l->count_pad = v->val.boolean;
	}
	if (l->padding == 0 && l->pad_end == 0)
		l->count_pad = false;
}

static void
parse_layer(JsonbContainer *obj, int i, NnLayerSpec *l)
{
	char		path[64];
	char		field[80];
	JsonbValue *v;
	NnLayerType type;

	snprintf(path, sizeof(path), "layers[%d]", i);
	snprintf(field, sizeof(field), "%s.type", path);
	type = parse_layer_type(obj, field);
	nn_layer_defaults(l, type);
	check_keys(obj, layer_keys[type], lengthof(layer_keys[0]), layer_common_keys, "model spec", path);

#define INT_FIELD(key, member) \
	if ((v = pgdl_jsonb_key(obj, key)) != NULL) \
	{ \
		snprintf(field, sizeof(field), "%s.%s", path, key); \
		l->member = get_int(v, "model spec", field); \
	}
#define FLOAT_FIELD(key, member) \
	if ((v = pgdl_jsonb_key(obj, key)) != NULL) \
	{ \
		snprintf(field, sizeof(field), "%s.%s", path, key); \
		l->member = (float) get_number(v, "model spec", field); \
	}

	INT_FIELD("units", units);
	INT_FIELD("dim", units);	/* an embedding's width is its units */
	INT_FIELD("vocab", vocab);
	INT_FIELD("start", start);
	INT_FIELD("heads", heads);
	INT_FIELD("length", units);	/* a slice's width is its units */
	INT_FIELD("filters", filters);
	INT_FIELD("kernel", kernel);
	INT_FIELD("size", kernel);
	INT_FIELD("stride", stride);
	INT_FIELD("padding", padding);
	INT_FIELD("groups", groups);
	INT_FIELD("steps", steps);
	if (l->groups == 1)
		l->groups = 0;			/* one group is stored as 0, as before groups existed: one spec, one form */
	FLOAT_FIELD("alpha", alpha);
	FLOAT_FIELD("rate", rate);
	FLOAT_FIELD("eps", eps);
	FLOAT_FIELD("momentum", momentum);
	if ((v = pgdl_jsonb_key(obj, "init")) != NULL)
	{
		snprintf(field, sizeof(field), "%s.init", path);
		l->init = parse_init(v, field);
	}
#define BOOL_FIELD(key, member) \
	if ((v = pgdl_jsonb_key(obj, key)) != NULL) \
	{ \
		snprintf(field, sizeof(field), "%s.%s", path, key); \
		if (v->type != jbvBool) \
			pgdl_report_invalid("model spec", field, "Expected true or false."); \
		l->member = v->val.boolean; \
	}

	BOOL_FIELD("causal", causal);
	BOOL_FIELD("return_sequences", return_sequences);
	BOOL_FIELD("per_step", per_step);
	BOOL_FIELD("positions", positions);
	BOOL_FIELD("log", log);
	BOOL_FIELD("over_steps", over_steps);
	BOOL_FIELD("ceil_mode", ceil_mode);
	if (type == NN_MAXPOOL2D || type == NN_AVGPOOL2D)
		parse_pool_pads(obj, path, l);
	if (pgdl_jsonb_key(obj, "size") && pgdl_jsonb_key(obj, "kernel"))
		pgdl_report_invalid("model spec", path, "Give the window as \"size\" or \"kernel\", not both.");
	if ((v = pgdl_jsonb_key(obj, "name")) != NULL)
	{
		char	   *name;

		snprintf(field, sizeof(field), "%s.name", path);
		name = get_string(v, "model spec", field);
		if (name[0] == '\0' || strlen(name) >= NN_MAX_NAME || strcmp(name, "input") == 0)
			pgdl_report_invalid("model spec", field,
					   psprintf("A layer's \"name\" has 1 to %d bytes and is not \"input\" (which names the spec's input).",
								NN_MAX_NAME - 1));
		strlcpy(l->name, name, NN_MAX_NAME);
	}
}

/*
 * Layer i's "inputs", names of earlier layers or "input" (the spec's), as
 * indices; after every layer's name is known, so that a name given later is
 * reported as such (a cycle or forward reference), not as unknown.
 */
static void
parse_inputs(JsonbContainer *obj, int i, NnSpec *spec)
{
	NnLayerSpec *l = &spec->layers[i];
	JsonbValue *v = pgdl_jsonb_key(obj, "inputs");
	JsonbContainer *arr;
	char		field[64];
	int			n;

	if (v == NULL)
		return;
	snprintf(field, sizeof(field), "layers[%d].inputs", i);
	arr = get_container(v, true, "model spec", field);
	n = JsonContainerSize(arr);
	if (n < 1 || n > NN_MAX_INPUTS)
		pgdl_report_invalid("model spec", field, psprintf("\"inputs\" names between 1 and %d layers, got %d.",
												 NN_MAX_INPUTS, n));
	l->n_inputs = (int16) n;
	for (int k = 0; k < n; k++)
	{
		char	   *name = get_string(getIthJsonbValueFromContainer(arr, k), "model spec", field);
		int			src = -2;

		if (strcmp(name, "input") == 0)
			src = -1;
		for (int j = 0; src == -2 && j < spec->n_layers; j++)
			if (strcmp(spec->layers[j].name, name) == 0)
				src = j;
		if (src == -2)
			pgdl_report_invalid("model spec", field,
					   psprintf("No layer is named \"%s\"; \"inputs\" names earlier layers by their \"name\", or \"input\".",
								pgdl_echo(name)));
		if (src >= i)
			pgdl_report_invalid("model spec", field,
					   psprintf("\"%s\" is layers[%d], %s; a layer reads only earlier layers, so that the graph has no cycle.",
								pgdl_echo(name), src, src == i ? "the layer itself" : "which comes after it"));
		l->inputs[k] = (int16) src;
	}
}

/* spec->layers from a "layers" array (a model spec's, or a configuration's "head"). */
static void
parse_layers(JsonbContainer *arr, NnSpec *spec)
{
	int			n = JsonContainerSize(arr);

	if (n < 1 || n > NN_MAX_LAYERS)
		pgdl_report_invalid("model spec", "layers", psprintf("\"layers\" must hold between 1 and %d layers, got %d.",
													NN_MAX_LAYERS, n));
	spec->n_layers = n;
	for (int i = 0; i < n; i++)
	{
		char		path[32];

		snprintf(path, sizeof(path), "layers[%d]", i);
		parse_layer(get_container(getIthJsonbValueFromContainer(arr, i), false, "model spec", path),
					i, &spec->layers[i]);
	}
	for (int i = 0; i < n; i++)
		parse_inputs(getIthJsonbValueFromContainer(arr, i)->val.binary.data, i, spec);
}

void
pgdl_spec_from_jsonb(Jsonb *jb, NnSpec *spec)
{
	JsonbContainer *root = &jb->root;
	JsonbValue *v;
	JsonbContainer *arr;
	NnError		err;
	int			n;

	memset(spec, 0, sizeof(NnSpec));
	if (!JsonContainerIsObject(root))
		pgdl_report_invalid("model spec", "top level", "A spec is an object with \"input\", \"layers\" and \"loss\".");
	check_keys(root, spec_keys, lengthof(spec_keys), NULL, "model spec", "");

	if ((v = pgdl_jsonb_key(root, "input")) == NULL)
		pgdl_report_invalid("model spec", "input", "The spec needs an \"input\" shape: [features] or [channels, height, width].");
	arr = get_container(v, true, "model spec", "input");
	n = JsonContainerSize(arr);
	if (n != 1 && n != 3)
		pgdl_report_invalid("model spec", "input",
				   psprintf("\"input\" must have 1 dimension [features] or 3 [channels, height, width], got %d.", n));
	spec->input_ndim = n;
	for (int d = 0; d < n; d++)
		spec->input[d] = get_int(getIthJsonbValueFromContainer(arr, d), "model spec", psprintf("input[%d]", d));

	if ((v = pgdl_jsonb_key(root, "layers")) == NULL)
		pgdl_report_invalid("model spec", "layers", "The spec needs a \"layers\" array.");
	parse_layers(get_container(v, true, "model spec", "layers"), spec);

	spec->loss = NN_LOSS_CROSS_ENTROPY;
	if ((v = pgdl_jsonb_key(root, "loss")) != NULL)
	{
		char	   *loss = get_string(v, "model spec", "loss");

		spec->loss = nn_loss_from_name(loss);
		if (spec->loss == 0)
			pgdl_report_invalid("model spec", "loss",
					   psprintf("Unknown loss \"%s\"; known: cross_entropy, mse, binary_cross_entropy, huber.", pgdl_echo(loss)));
	}
	/* huber's delta, PyTorch's default 1; nn_spec_validate refuses it with another loss, and any not positive */
	spec->delta = spec->loss == NN_LOSS_HUBER ? 1.0f : 0.0f;
	if ((v = pgdl_jsonb_key(root, "delta")) != NULL)
	{
		if (spec->loss != NN_LOSS_HUBER)
			pgdl_report_invalid("model spec", "delta", "\"delta\" is a setting of the huber loss; give \"loss\": \"huber\" or leave it out.");
		spec->delta = (float) get_number(v, "model spec", "delta");
	}

	if (!nn_spec_validate(spec, NULL, &err))
		pgdl_report_nn_error("model spec", &err);
}

/* ---- jsonb out: built by pushJsonbValue (base/jsonb_build.c), never printed and parsed back ---- */

/* Layer j's name as "inputs" refer to it: its own, or one made up for a layer built unnamed. */
static const char *
layer_ref_name(const NnSpec *spec, int j)
{
	if (j < 0)
		return "input";
	if (spec->layers[j].name[0] != '\0')
		return spec->layers[j].name;
	return psprintf("layer%d", j);
}

/* A layer with every field its type takes, so that one network is one spec. */
static void
push_layer(JsonbParseState **state, const NnSpec *spec, int i)
{
	const NnLayerSpec *l = &spec->layers[i];
	bool		read = false;

	pushJsonbValue(state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_string(state, "type", nn_layer_type_name(l->type));
	for (int j = i + 1; j < spec->n_layers && !read; j++)
		for (int k = 0; k < spec->layers[j].n_inputs; k++)
			read |= spec->layers[j].inputs[k] == i;
	if (l->name[0] != '\0' || read)
		pgdl_jsonb_put_string(state, "name", layer_ref_name(spec, i));
	if (l->n_inputs > 0)
	{
		pgdl_jsonb_put_key(state, "inputs");
		pushJsonbValue(state, WJB_BEGIN_ARRAY, NULL);
		for (int k = 0; k < l->n_inputs; k++)
			pgdl_jsonb_put_string(state, NULL, layer_ref_name(spec, l->inputs[k]));
		pushJsonbValue(state, WJB_END_ARRAY, NULL);
	}
	switch (l->type)
	{
		case NN_DENSE:
			pgdl_jsonb_put_int(state, "units", l->units);
			if (l->per_step)	/* only when on: a spec from before it existed reads as it did */
				pgdl_jsonb_put_bool(state, "per_step", true);
			break;
		case NN_CONV2D:
		case NN_CONV1D:
			pgdl_jsonb_put_int(state, "filters", l->filters);
			pgdl_jsonb_put_int(state, "kernel", l->kernel);
			pgdl_jsonb_put_int(state, "stride", l->stride);
			pgdl_jsonb_put_int(state, "padding", l->padding);
			if (l->groups > 1)
				pgdl_jsonb_put_int(state, "groups", l->groups);
			break;
		case NN_MAXPOOL2D:
		case NN_AVGPOOL2D:
			pgdl_jsonb_put_int(state, "size", l->kernel);
			pgdl_jsonb_put_int(state, "stride", l->stride > 0 ? l->stride : l->kernel);
			/* only what is set: an unpadded pool reads as it did before pads existed */
			if (l->padding != 0 || l->pad_end != 0)
				pgdl_jsonb_put_int(state, "padding", l->padding);
			if (l->pad_end != l->padding)
				pgdl_jsonb_put_int(state, "padding_end", l->pad_end);
			if (l->ceil_mode)
				pgdl_jsonb_put_bool(state, "ceil_mode", true);
			if (l->type == NN_AVGPOOL2D && (l->padding != 0 || l->pad_end != 0))
				pgdl_jsonb_put_bool(state, "count_include_pad", l->count_pad);
			break;
		case NN_LEAKY_RELU:
			pgdl_jsonb_put_float4(state, "alpha", l->alpha);
			break;
		case NN_DROPOUT:
			pgdl_jsonb_put_float4(state, "rate", l->rate);
			break;
		case NN_BATCHNORM:
			pgdl_jsonb_put_float4(state, "eps", l->eps);
			pgdl_jsonb_put_float4(state, "momentum", l->momentum);
			break;
		case NN_LAYERNORM:
			pgdl_jsonb_put_float4(state, "eps", l->eps);
			break;
		case NN_EMBEDDING:
			pgdl_jsonb_put_int(state, "vocab", l->vocab);
			pgdl_jsonb_put_int(state, "dim", l->units);
			if (l->positions)
				pgdl_jsonb_put_bool(state, "positions", true);
			break;
		case NN_GRU:
			pgdl_jsonb_put_int(state, "units", l->units);
			pgdl_jsonb_put_bool(state, "return_sequences", l->return_sequences);
			break;
		case NN_ATTENTION:
			pgdl_jsonb_put_int(state, "heads", l->heads);
			pgdl_jsonb_put_bool(state, "causal", l->causal);
			break;
		case NN_SLICE:
			pgdl_jsonb_put_int(state, "start", l->start);
			pgdl_jsonb_put_int(state, "length", l->units);
			break;
		case NN_FLATTEN:
			if (l->steps > 0)	/* only when on: a flatten's spec reads as it did */
				pgdl_jsonb_put_int(state, "steps", l->steps);
			break;
		case NN_SOFTMAX:
			if (l->log)			/* likewise */
				pgdl_jsonb_put_bool(state, "log", true);
			if (l->over_steps)
				pgdl_jsonb_put_bool(state, "over_steps", true);
			break;
		default:
			break;
	}
	if ((l->type == NN_DENSE || l->type == NN_CONV2D || l->type == NN_CONV1D) && l->init != NN_INIT_DEFAULT)
		pgdl_jsonb_put_string(state, "init", l->init == NN_INIT_GLOROT ? "glorot" : "he");
	pushJsonbValue(state, WJB_END_OBJECT, NULL);
}

Jsonb *
pgdl_spec_to_jsonb(const NnSpec *spec)
{
	JsonbParseState *state = NULL;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_key(&state, "input");
	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (int d = 0; d < spec->input_ndim; d++)
		pgdl_jsonb_put_int(&state, NULL, spec->input[d]);
	pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	pgdl_jsonb_put_key(&state, "layers");
	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < spec->n_layers; i++)
		push_layer(&state, spec, i);
	pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	pgdl_jsonb_put_string(&state, "loss", nn_loss_name(spec->loss));
	if (spec->loss == NN_LOSS_HUBER)
		pgdl_jsonb_put_float4(&state, "delta", spec->delta);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

void
pgdl_config_from_jsonb(Jsonb *jb, PgdlTrainConfig *cfg)
{
	if (pgdl_config_has_transfer(jb))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("transfer learning keys (base_model, freeze, head) are only taken by configuration sets"),
				 errhint("Add the configuration to pgdl.configs (architecture NULL) and train it with pgdl.fit_multiple().")));
	pgdl_config_from_jsonb_transfer(jb, cfg);
}

/* Where to train (devices.c): "device", "workers_per_device", "mixed_devices". */
static void
config_device_keys(JsonbContainer *root, PgdlTrainConfig *cfg)
{
	JsonbValue *v;

	cfg->device = PGDL_DEVICE_UNSET;
	if ((v = pgdl_jsonb_key(root, "device")) != NULL)
	{
		char	   *name = get_string(v, "training configuration", "device");

		if (!pgdl_device_parse(name, &cfg->device))
			pgdl_report_invalid("training configuration", "device",
					   psprintf("Unknown device \"%s\"; a device is \"cpu\", \"cuda\" or \"cuda:N\" (N from 0 to %d).",
								pgdl_echo(name), PGDL_MAX_DEVICES - 1));
	}
	if ((v = pgdl_jsonb_key(root, "workers_per_device")) != NULL)
	{
		cfg->workers_per_device = get_int(v, "training configuration", "workers_per_device");
		if (cfg->workers_per_device < 1 || cfg->workers_per_device > PGDL_MAX_WORKERS)
			pgdl_report_invalid("training configuration", "workers_per_device",
					   psprintf("\"workers_per_device\" must be between 1 and %d, got %d.",
								PGDL_MAX_WORKERS, cfg->workers_per_device));
	}
	if ((v = pgdl_jsonb_key(root, "mixed_devices")) != NULL)
	{
		if (v->type != jbvBool)
			pgdl_report_invalid("training configuration", "mixed_devices", "Expected true or false.");
		cfg->mixed_devices = v->val.boolean;
	}
}

/*
 * A number key of the training methods within [lo, hi] (above lo when
 * lo_open), as a double; the detail says the range in words.
 */
static double
method_number(JsonbValue *v, const char *key, double lo, double hi, bool lo_open, const char *range)
{
	double		d = get_number(v, "training configuration", key);

	if (!(lo_open ? d > lo : d >= lo) || !(d <= hi))
		pgdl_report_invalid("training configuration", key, psprintf("\"%s\" must be %s, got %g.", key, range, d));
	return d;
}

static int64
method_int(JsonbValue *v, const char *key, int64 lo, int64 hi)
{
	double		d = get_number(v, "training configuration", key);

	if (d != floor(d) || d < (double) lo || d > (double) hi)
		pgdl_report_invalid("training configuration", key,
				   psprintf("\"%s\" must be an integer between " INT64_FORMAT " and " INT64_FORMAT ", got %g.",
							key, lo, hi, d));
	return (int64) d;
}

/* A key that only a schedule (or a warmup, or early stopping) uses, given without it. */
static void
method_needs(JsonbContainer *root, const char *key, bool ok, const char *needs)
{
	if (pgdl_jsonb_key(root, key) != NULL && !ok)
		pgdl_report_invalid("training configuration", key, psprintf("\"%s\" needs %s.", key, needs));
}

/* "precision": fp32 (the default) or bf16, the dense layers' products in training steps (nn.h's NnOptim). */
static void
config_precision(JsonbContainer *root, NnOptim *o)
{
	JsonbValue *v = pgdl_jsonb_key(root, "precision");
	char	   *name;

	if (v == NULL)
		return;
	name = get_string(v, "training configuration", "precision");
	if (strcmp(name, "fp32") != 0 && strcmp(name, "bf16") != 0)
		pgdl_report_invalid("training configuration", "precision",
							psprintf("Unknown precision \"%s\"; known: fp32, bf16.", pgdl_echo(name)));
	o->bf16 = strcmp(name, "bf16") == 0;
}

/* The training methods: schedules, clipping, decay groups, label smoothing, early stopping. */
static void
config_method_keys(JsonbContainer *root, PgdlTrainConfig *cfg)
{
	NnOptim    *o = &cfg->optim;
	JsonbValue *v;

	if ((v = pgdl_jsonb_key(root, "schedule")) != NULL)
	{
		char	   *name = get_string(v, "training configuration", "schedule");
		int			s = (int) nn_schedule_from_name(name);

		if (s < 0)
			pgdl_report_invalid("training configuration", "schedule",
					   psprintf("Unknown schedule \"%s\"; known: none, step, cosine.", pgdl_echo(name)));
		o->schedule = (NnSchedule) s;
	}
	method_needs(root, "step_size", o->schedule == NN_SCHED_STEP, "\"schedule\": \"step\"");
	method_needs(root, "gamma", o->schedule == NN_SCHED_STEP, "\"schedule\": \"step\"");
	method_needs(root, "eta_min", o->schedule == NN_SCHED_COSINE, "\"schedule\": \"cosine\"");
	if (o->schedule == NN_SCHED_STEP)
	{
		if ((v = pgdl_jsonb_key(root, "step_size")) == NULL)
			pgdl_report_invalid("training configuration", "step_size",
					   "\"schedule\": \"step\" needs \"step_size\", the epochs between two decays.");
		o->step_size = (int32) method_int(v, "step_size", 1, NN_MAX_SCHEDULE_EPOCHS);
		o->gamma = 0.1f;
		if ((v = pgdl_jsonb_key(root, "gamma")) != NULL)
			o->gamma = (float) method_number(v, "gamma", 0, 1, true, "above 0 and at most 1");
	}
	if ((v = pgdl_jsonb_key(root, "eta_min")) != NULL)
		o->eta_min = (float) method_number(v, "eta_min", 0, o->lr, false, "at least 0 and at most \"lr\"");
	if ((v = pgdl_jsonb_key(root, "warmup_epochs")) != NULL)
		o->warmup_epochs = (int32) method_int(v, "warmup_epochs", 0, NN_MAX_SCHEDULE_EPOCHS);
	if ((v = pgdl_jsonb_key(root, "warmup_steps")) != NULL)
		o->warmup_steps = method_int(v, "warmup_steps", 0, NN_MAX_STEP);
	if (o->warmup_epochs > 0 && o->warmup_steps > 0)
		pgdl_report_invalid("training configuration", "warmup_steps",
				   "Give \"warmup_epochs\" or \"warmup_steps\", not both.");
	method_needs(root, "warmup_start_factor", o->warmup_epochs > 0 || o->warmup_steps > 0,
				 "a positive \"warmup_epochs\" or \"warmup_steps\"");
	o->warmup_start = (o->warmup_epochs > 0 || o->warmup_steps > 0) ? 1.0f / 3.0f : 0.0f;
	if ((v = pgdl_jsonb_key(root, "warmup_start_factor")) != NULL)
		o->warmup_start = (float) method_number(v, "warmup_start_factor", 0, 1, true, "above 0 and at most 1");
	if ((v = pgdl_jsonb_key(root, "clip_norm")) != NULL)
		o->clip_norm = (float) method_number(v, "clip_norm", 0, 1e30, true, "positive (at most 1e30)");
	if ((v = pgdl_jsonb_key(root, "label_smoothing")) != NULL)
		o->label_smoothing = (float) method_number(v, "label_smoothing", 0, 1, false, "between 0 and 1");
	if ((v = pgdl_jsonb_key(root, "no_decay_bias_norm")) != NULL)
	{
		if (v->type != jbvBool)
			pgdl_report_invalid("training configuration", "no_decay_bias_norm", "Expected true or false.");
		o->no_decay_bias_norm = v->val.boolean;
	}
	if ((v = pgdl_jsonb_key(root, "patience")) != NULL)
		cfg->patience = (int32) method_int(v, "patience", 1, PGDL_MAX_EPOCHS);
	method_needs(root, "min_delta", cfg->patience > 0, "\"patience\"");
	/* Keras's restore_best_weights, on by default with early stopping */
	cfg->restore_best = cfg->patience > 0;
	if ((v = pgdl_jsonb_key(root, "restore_best")) != NULL)
	{
		if (v->type != jbvBool)
			pgdl_report_invalid("training configuration", "restore_best", "Expected true or false.");
		cfg->restore_best = v->val.boolean;
	}
	method_needs(root, "monitor", cfg->patience > 0 || cfg->restore_best, "\"patience\" or \"restore_best\"");
	if ((v = pgdl_jsonb_key(root, "min_delta")) != NULL)
		cfg->min_delta = (float) method_number(v, "min_delta", 0, 1e30, false, "at least 0 (at most 1e30)");
	cfg->monitor = PGDL_RANK_LOSS;
	cfg->monitor_given = false;
	if ((v = pgdl_jsonb_key(root, "monitor")) != NULL)
	{
		char	   *name = get_string(v, "training configuration", "monitor");

		cfg->monitor_given = true;
		if (!pgdl_rank_metric_parse(name, &cfg->monitor))
			pgdl_report_invalid("training configuration", "monitor",
					   psprintf("Unknown metric \"%s\"; known: validation_loss, validation_accuracy, %s.",
								pgdl_echo(name), pgdl_rank_metric_list()));
	}
}

/* monitor's canonical name: validation_loss and validation_accuracy as they always were, else the metric's */
static const char *
monitor_name(PgdlRankMetric m)
{
	if (m == PGDL_RANK_LOSS)
		return "validation_loss";
	if (m == PGDL_RANK_ACCURACY)
		return "validation_accuracy";
	return pgdl_rank_metric_name(m);
}

/* A key of the class_weight object as JSON text (quotes, backslashes and control characters escaped). */
static void
append_json_key(StringInfo json, const JsonbValue *key, int index)
{
	appendStringInfoString(json, index > 0 ? ", \"" : "\"");
	for (int i = 0; i < key->val.string.len; i++)
	{
		unsigned char c = (unsigned char) key->val.string.val[i];

		if (c == '"' || c == '\\')
			appendStringInfo(json, "\\%c", c);
		else if (c < 0x20)
			appendStringInfo(json, "\\u%04x", c);
		else
			appendStringInfoChar(json, (char) c);
	}
	appendStringInfoString(json, "\": ");
}

/* A weight as the shortest decimal that reads back as the same double. */
static void
append_shortest(StringInfo json, double w)
{
	char		buf[64];

	snprintf(buf, sizeof(buf), "%.15g", w);
	if (strtod(buf, NULL) != w)
		snprintf(buf, sizeof(buf), "%.17g", w);
	appendStringInfoString(json, buf);
}

/*
 * "class_weight": "balanced", or an object from a label (as text) to a finite
 * positive weight; kept as canonical JSON text until pgdl_class_weights_resolve
 * knows the dataset's classes.  Label smoothing with class weights is refused:
 * torch weighs each smoothed class term by its own class's weight, pgdl weighs
 * an example.
 */
static void
config_class_weight(JsonbContainer *root, PgdlTrainConfig *cfg)
{
	JsonbValue *v = pgdl_jsonb_key(root, "class_weight");
	JsonbIterator *it;
	JsonbValue	kv;
	JsonbIteratorToken tok;
	char	   *text;
	int			n = 0;

	if (v == NULL)
		return;
	if (v->type == jbvString)
	{
		if (strcmp(get_string(v, "training configuration", "class_weight"), "balanced") != 0)
			pgdl_report_invalid("training configuration", "class_weight",
								"Expected \"balanced\" or an object from label to weight, such as {\"1\": 5}.");
		cfg->class_weight = PGDL_CLASS_WEIGHT_BALANCED;
	}
	else
	{
		JsonbContainer *obj = get_container(v, false, "training configuration", "class_weight");

		StringInfoData json;

		initStringInfo(&json);
		appendStringInfoChar(&json, '{');
		it = JsonbIteratorInit(obj);
		while ((tok = JsonbIteratorNext(&it, &kv, true)) != WJB_DONE)
		{
			double		w;

			if (tok == WJB_KEY)
				append_json_key(&json, &kv, n);
			if (tok != WJB_VALUE)
				continue;
			n++;
			w = get_number(&kv, "training configuration", "class_weight");
			if (!(isfinite(w) && w > 0 && w <= 1e30))
				pgdl_report_invalid("training configuration", "class_weight",
									psprintf("A class's weight must be a positive number (at most 1e30), got %g.", w));
			append_shortest(&json, w);
		}
		if (n == 0)
			pgdl_report_invalid("training configuration", "class_weight",
								"An empty object weighs nothing: leave \"class_weight\" out.");
		appendStringInfoChar(&json, '}');
		text = json.data;
		if (strlen(text) >= PGDL_CLASS_WEIGHT_MAP_LEN)
			pgdl_report_invalid("training configuration", "class_weight",
								psprintf("The object is %zu bytes of JSON, more than %d; weigh fewer classes.",
										 strlen(text), PGDL_CLASS_WEIGHT_MAP_LEN - 1));
		strlcpy(cfg->class_weight_map, text, PGDL_CLASS_WEIGHT_MAP_LEN);
		cfg->class_weight = PGDL_CLASS_WEIGHT_MAP;
	}
	if (cfg->optim.label_smoothing > 0)
		pgdl_report_invalid("training configuration", "class_weight",
							"\"class_weight\" and \"label_smoothing\" do not combine: PyTorch and pgdl would weigh the smoothed terms differently.");
}

#define OPT_BIT(t) (1u << (t))
#define OPTS_FIRST (OPT_BIT(NN_OPT_SGD) | OPT_BIT(NN_OPT_ADAM) | OPT_BIT(NN_OPT_ADAMW))

/*
 * The optimizers that use each key of an optimizer's settings (lr and
 * weight_decay: all).  sgd, adam and adamw also take the keys of the three
 * that they do not use, and ignore them, as they always have (shared);
 * rmsprop and adagrad take their own only, as their settings share the slots
 * of the others' (nn.h's NnOptim) and one slot must hold one meaning.
 */
static const struct
{
	const char *key;
	unsigned	used_by;
	bool		shared;
}			optimizer_keys[] = {
	{"momentum", OPT_BIT(NN_OPT_SGD) | OPT_BIT(NN_OPT_RMSPROP), true},
	{"nesterov", OPT_BIT(NN_OPT_SGD), true},
	{"beta1", OPT_BIT(NN_OPT_ADAM) | OPT_BIT(NN_OPT_ADAMW), true},
	{"beta2", OPT_BIT(NN_OPT_ADAM) | OPT_BIT(NN_OPT_ADAMW), true},
	{"eps", OPT_BIT(NN_OPT_ADAM) | OPT_BIT(NN_OPT_ADAMW) | OPT_BIT(NN_OPT_RMSPROP) | OPT_BIT(NN_OPT_ADAGRAD), true},
	{"alpha", OPT_BIT(NN_OPT_RMSPROP), false},
	{"centered", OPT_BIT(NN_OPT_RMSPROP), false},
	{"lr_decay", OPT_BIT(NN_OPT_ADAGRAD), false},
	{"initial_accumulator_value", OPT_BIT(NN_OPT_ADAGRAD), false},
};

bool
pgdl_optimizer_uses_key(NnOptType type, const char *key)
{
	for (int i = 0; i < lengthof(optimizer_keys); i++)
		if (strcmp(key, optimizer_keys[i].key) == 0)
			return (optimizer_keys[i].used_by & OPT_BIT(type)) != 0;
	return true;
}

/* A boolean key of the configuration into *out, when it is given. */
static void
config_bool(JsonbContainer *root, const char *key, bool *out)
{
	JsonbValue *v = pgdl_jsonb_key(root, key);

	if (v == NULL)
		return;
	if (v->type != jbvBool)
		pgdl_report_invalid("training configuration", key, "Expected true or false.");
	*out = v->val.boolean;
}

/* The optimizer's settings, each key checked against the optimizer first. */
static void
config_optimizer_keys(JsonbContainer *root, PgdlTrainConfig *cfg)
{
	NnOptim    *o = &cfg->optim;
	JsonbValue *v;

	for (int i = 0; i < lengthof(optimizer_keys); i++)
		if ((optimizer_keys[i].used_by & OPT_BIT(o->type)) == 0 &&
			!(optimizer_keys[i].shared && (OPTS_FIRST & OPT_BIT(o->type)) != 0) &&
			pgdl_jsonb_key(root, optimizer_keys[i].key) != NULL)
			pgdl_report_invalid("training configuration", optimizer_keys[i].key,
								psprintf("\"%s\" is not a setting of %s, whose settings are %s; leave it out.",
										 optimizer_keys[i].key, nn_optim_name(o->type),
										 o->type == NN_OPT_RMSPROP ? "lr, alpha, eps, momentum, centered and weight_decay" :
										 o->type == NN_OPT_ADAGRAD ? "lr, lr_decay, initial_accumulator_value, eps and weight_decay" :
										 o->type == NN_OPT_SGD ? "lr, momentum, nesterov and weight_decay" :
										 "lr, beta1, beta2, eps and weight_decay"));

#define CONFIG_FLOAT(key, member) \
	if ((v = pgdl_jsonb_key(root, key)) != NULL) \
		o->member = (float) get_number(v, "training configuration", key);

	CONFIG_FLOAT("lr", lr);
	CONFIG_FLOAT("momentum", momentum);
	CONFIG_FLOAT("weight_decay", weight_decay);
	CONFIG_FLOAT("beta1", beta1);
	CONFIG_FLOAT("beta2", beta2);
	CONFIG_FLOAT("eps", eps);
	CONFIG_FLOAT("alpha", alpha);
	CONFIG_FLOAT("lr_decay", lr_decay);
	CONFIG_FLOAT("initial_accumulator_value", initial_accumulator_value);
#undef CONFIG_FLOAT
	config_bool(root, "nesterov", &o->nesterov);
	config_bool(root, "centered", &o->centered);
}

void
pgdl_config_from_jsonb_transfer(Jsonb *jb, PgdlTrainConfig *cfg)
{
	JsonbContainer *root = &jb->root;
	JsonbValue *v;
	NnOptType	type = NN_OPT_SGD;
	NnError		err;

	if (!JsonContainerIsObject(root))
		pgdl_report_invalid("training configuration", "top level", "A configuration is an object such as {\"optimizer\": \"sgd\", \"lr\": 0.01}.");
	check_keys(root, config_keys, lengthof(config_keys), NULL, "training configuration", "");

	if ((v = pgdl_jsonb_key(root, "optimizer")) != NULL)
	{
		char	   *name = get_string(v, "training configuration", "optimizer");

		type = nn_optim_from_name(name);
		if (type == 0)
			pgdl_report_invalid("training configuration", "optimizer",
					   psprintf("Unknown optimizer \"%s\"; known: sgd, adam, adamw, rmsprop, adagrad.", pgdl_echo(name)));
	}
	memset(cfg, 0, sizeof(*cfg));
	nn_optim_defaults(&cfg->optim, type);
	cfg->batch_size = 128;
	cfg->seed = 42;
	cfg->threads = 1;

	config_optimizer_keys(root, cfg);
	if ((v = pgdl_jsonb_key(root, "batch_size")) != NULL)
	{
		cfg->batch_size = get_int(v, "training configuration", "batch_size");
		if (cfg->batch_size < 1 || cfg->batch_size > NN_MAX_BATCH)
			pgdl_report_invalid("training configuration", "batch_size",
					   psprintf("\"batch_size\" must be between 1 and %d, got %d.", NN_MAX_BATCH, cfg->batch_size));
	}
	if ((v = pgdl_jsonb_key(root, "threads")) != NULL)
	{
		cfg->threads = get_int(v, "training configuration", "threads");
		if (cfg->threads < 1 || cfg->threads > NN_MAX_THREADS)
			pgdl_report_invalid("training configuration", "threads",
					   psprintf("\"threads\" must be between 1 and %d, got %d.", NN_MAX_THREADS, cfg->threads));
	}
	if ((v = pgdl_jsonb_key(root, "seed")) != NULL)
	{
		double		seed = get_number(v, "training configuration", "seed");

		if (seed != floor(seed) || seed < 0 || seed > 9007199254740992.0)
			pgdl_report_invalid("training configuration", "seed", "Expected a non-negative integer below 2^53.");
		cfg->seed = (int64) seed;
	}
	config_method_keys(root, cfg);
	config_precision(root, &cfg->optim);
	if (!nn_optim_validate(&cfg->optim, &err))
		pgdl_report_nn_error("training configuration", &err);
	config_device_keys(root, cfg);
	config_class_weight(root, cfg);
	if (pgdl_jsonb_key(root, "warm_start") != NULL)
	{
		char	   *name;
		int64		id;

		(void) pgdl_warm_start_key(jb, &name, &id);
		if (pgdl_jsonb_key(root, "base_model") != NULL)
			pgdl_report_invalid("training configuration", "warm_start",
					   "\"warm_start\" and \"base_model\" both name a model to start from; give one.");
	}
}

bool
pgdl_warm_start_key(Jsonb *config, char **name, int64 *id)
{
	JsonbValue *v = JsonContainerIsObject(&config->root) ? pgdl_jsonb_key(&config->root, "warm_start") : NULL;

	*name = NULL;
	*id = 0;
	if (v == NULL)
		return false;
	if (v->type == jbvString && v->val.string.len > 0)
		*name = get_string(v, "training configuration", "warm_start");
	else if (v->type == jbvNumeric)
	{
		double		d = get_number(v, "training configuration", "warm_start");

		if (d != floor(d) || d < 1 || d > 9007199254740992.0)
			pgdl_report_invalid("training configuration", "warm_start",
					   "Expected the id of a model in pgdl.models, a positive integer.");
		*id = (int64) d;
	}
	else
		pgdl_report_invalid("training configuration", "warm_start",
				   "Expected the name (a non-empty string) or id (an integer) of a model in pgdl.models.");
	return true;
}

Jsonb *
pgdl_config_with_warm_start(Jsonb *canonical, Jsonb *given)
{
	JsonbParseState *state = NULL;
	char	   *name;
	int64		id;

	if (!pgdl_warm_start_key(given, &name, &id))
		return canonical;
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	if (name != NULL)
		pgdl_jsonb_put_string(&state, "warm_start", name);
	else
		pgdl_jsonb_put_int(&state, "warm_start", id);
	return DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(canonical),
											  JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL)))));
}

/* The optimizer's keys with defaults filled in: those of the others are left out. */
Jsonb *
pgdl_config_to_jsonb(const PgdlTrainConfig *cfg)
{
	JsonbParseState *state = NULL;
	const NnOptim *o = &cfg->optim;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_string(&state, "optimizer", nn_optim_name(o->type));
	pgdl_jsonb_put_float4(&state, "lr", o->lr);
	if (o->type == NN_OPT_SGD)
	{
		pgdl_jsonb_put_float4(&state, "momentum", o->momentum);
		pgdl_jsonb_put_bool(&state, "nesterov", o->nesterov);
	}
	else if (o->type == NN_OPT_RMSPROP)
	{
		pgdl_jsonb_put_float4(&state, "alpha", o->alpha);
		pgdl_jsonb_put_float4(&state, "eps", o->eps);
		pgdl_jsonb_put_float4(&state, "momentum", o->momentum);
		pgdl_jsonb_put_bool(&state, "centered", o->centered);
	}
	else if (o->type == NN_OPT_ADAGRAD)
	{
		pgdl_jsonb_put_float4(&state, "lr_decay", o->lr_decay);
		pgdl_jsonb_put_float4(&state, "initial_accumulator_value", o->initial_accumulator_value);
		pgdl_jsonb_put_float4(&state, "eps", o->eps);
	}
	else
	{
		pgdl_jsonb_put_float4(&state, "beta1", o->beta1);
		pgdl_jsonb_put_float4(&state, "beta2", o->beta2);
		pgdl_jsonb_put_float4(&state, "eps", o->eps);
	}
	pgdl_jsonb_put_float4(&state, "weight_decay", o->weight_decay);
	pgdl_jsonb_put_int(&state, "batch_size", cfg->batch_size);
	pgdl_jsonb_put_int(&state, "seed", cfg->seed);
	/* where it trains, only when given: a configuration that does not say follows pgdl.device */
	if (cfg->device != PGDL_DEVICE_UNSET)
		pgdl_jsonb_put_string(&state, "device", pgdl_device_name(cfg->device));
	if (cfg->workers_per_device > 0)
		pgdl_jsonb_put_int(&state, "workers_per_device", cfg->workers_per_device);
	if (cfg->mixed_devices)
		pgdl_jsonb_put_bool(&state, "mixed_devices", true);
	/* only when more than one: the bytes of a step depend on it (see training.md) */
	if (cfg->threads > 1)
		pgdl_jsonb_put_int(&state, "threads", cfg->threads);
	if (cfg->class_weight == PGDL_CLASS_WEIGHT_BALANCED)
		pgdl_jsonb_put_string(&state, "class_weight", "balanced");
	else if (cfg->class_weight == PGDL_CLASS_WEIGHT_MAP)
	{
		Jsonb	   *map = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(cfg->class_weight_map)));
		JsonbValue	mv;

		mv.type = jbvBinary;
		mv.val.binary.data = &map->root;
		mv.val.binary.len = VARSIZE(map) - VARHDRSZ;
		pgdl_jsonb_put_value(&state, "class_weight", &mv);
	}
	/* training methods, only when used: a configuration without them keeps its canonical form */
	if (o->schedule != NN_SCHED_NONE)
		pgdl_jsonb_put_string(&state, "schedule", nn_schedule_name(o->schedule));
	if (o->schedule == NN_SCHED_STEP)
	{
		pgdl_jsonb_put_int(&state, "step_size", o->step_size);
		pgdl_jsonb_put_float4(&state, "gamma", o->gamma);
	}
	if (o->schedule == NN_SCHED_COSINE)
		pgdl_jsonb_put_float4(&state, "eta_min", o->eta_min);
	if (o->warmup_epochs > 0)
		pgdl_jsonb_put_int(&state, "warmup_epochs", o->warmup_epochs);
	if (o->warmup_steps > 0)
		pgdl_jsonb_put_int(&state, "warmup_steps", o->warmup_steps);
	if (o->warmup_epochs > 0 || o->warmup_steps > 0)
		pgdl_jsonb_put_float4(&state, "warmup_start_factor", o->warmup_start);
	if (o->clip_norm > 0)
		pgdl_jsonb_put_float4(&state, "clip_norm", o->clip_norm);
	if (o->no_decay_bias_norm)
		pgdl_jsonb_put_bool(&state, "no_decay_bias_norm", true);
	if (o->label_smoothing > 0)
		pgdl_jsonb_put_float4(&state, "label_smoothing", o->label_smoothing);
	if (o->bf16)
		pgdl_jsonb_put_string(&state, "precision", "bf16");
	if (cfg->patience > 0)
	{
		pgdl_jsonb_put_int(&state, "patience", cfg->patience);
		pgdl_jsonb_put_float4(&state, "min_delta", cfg->min_delta);
	}
	/* as given: without it, a pgdl.fit_multiple run watches its rank_by (hopper/prepare.c), pgdl.fit the loss */
	if ((cfg->patience > 0 || cfg->restore_best) && cfg->monitor_given)
		pgdl_jsonb_put_string(&state, "monitor", monitor_name(cfg->monitor));
	/* only where it is not the default (on with patience), so that earlier canonical forms stay as they were */
	if (cfg->restore_best != (cfg->patience > 0))
		pgdl_jsonb_put_bool(&state, "restore_best", cfg->restore_best);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/* ---- transfer learning keys: base_model, freeze, head ---- */

bool
pgdl_config_has_transfer(Jsonb *config)
{
	if (!JsonContainerIsObject(&config->root))
		return false;
	for (int i = 0; i < lengthof(transfer_keys); i++)
		if (pgdl_jsonb_key(&config->root, transfer_keys[i]) != NULL)
			return true;
	return false;
}

Jsonb *
pgdl_transfer_keys(Jsonb *config)
{
	JsonbParseState *state = NULL;
	JsonbValue *object;
	bool		any = false;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < lengthof(transfer_keys); i++)
	{
		JsonbValue *v = pgdl_jsonb_key(&config->root, transfer_keys[i]);

		if (v == NULL)
			continue;
		pgdl_jsonb_put_value(&state, transfer_keys[i], v);
		any = true;
	}
	object = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return any ? JsonbValueToJsonb(object) : NULL;
}

void
pgdl_transfer_keys_from_jsonb(Jsonb *config, PgdlTransferKeys *keys)
{
	JsonbValue *v = pgdl_jsonb_key(&config->root, "base_model");

	memset(keys, 0, sizeof(*keys));
	if (v == NULL)
		pgdl_report_invalid("training configuration", "freeze",
				   "\"freeze\" and \"head\" need \"base_model\", the stored model to start from.");
	if (v->type == jbvString)
		keys->base_name = get_string(v, "training configuration", "base_model");
	else if (v->type == jbvNumeric)
		keys->base_id = DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(v->val.numeric)));
	else
		pgdl_report_invalid("training configuration", "base_model",
				   "Expected the name (a string) or id (an integer) of a model in pgdl.models.");

	if ((v = pgdl_jsonb_key(&config->root, "freeze")) != NULL)
	{
		keys->freeze_given = true;
		if (v->type == jbvNumeric)
		{
			double		k = get_number(v, "training configuration", "freeze");

			keys->freeze_count = k == floor(k) && k >= 0 && k <= NN_MAX_LAYERS ? (int32) k : -1;
		}
		else if (v->type == jbvString)
			keys->freeze_layer = get_string(v, "training configuration", "freeze");
		else
			pgdl_report_invalid("training configuration", "freeze", "Expected a number of layers or a layer name.");
	}

	if ((v = pgdl_jsonb_key(&config->root, "head")) != NULL)
	{
		if (!(v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data)))
			pgdl_report_invalid("training configuration", "head", "Expected an array of layers, as in a model spec's \"layers\".");
		keys->head = v->val.binary.data;
	}
}

void
pgdl_head_spec_from_jsonb(JsonbContainer *layers, const NnShape *in, NnLoss loss, float delta, NnSpec *spec)
{
	NnError		err;

	memset(spec, 0, sizeof(NnSpec));
	spec->input_ndim = in->ndim == 3 ? 3 : 1;
	spec->input[0] = in->c;
	if (in->ndim == 3)
	{
		spec->input[1] = in->h;
		spec->input[2] = in->w;
	}
	parse_layers(layers, spec);
	if (nn_spec_is_graph(spec))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a \"head\" is a chain of layers"),
				 errdetail("Its layers may not name their \"inputs\".")));
	spec->loss = loss;
	spec->delta = delta;
	if (!nn_spec_validate(spec, NULL, &err))
		pgdl_report_nn_error("model spec", &err);
}
