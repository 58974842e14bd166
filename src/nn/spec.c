/*
 * spec.c -- layer vocabulary, validation, shape inference and cost.
 *
 * nn_spec_validate is the one validator: model creation, deserialization and the
 * jsonb glue all go through it, before anything is allocated.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"

/* ONNX operator names where ONNX has one, snake_case as in the description language. */
static const char *const layer_names[NN_LAYER_TYPE_MAX] = {
	[NN_DENSE] = "dense",
	[NN_CONV2D] = "conv2d",
	[NN_MAXPOOL2D] = "maxpool2d",
	[NN_AVGPOOL2D] = "avgpool2d",
	[NN_GLOBAL_AVGPOOL] = "global_avgpool",
	[NN_FLATTEN] = "flatten",
	[NN_RELU] = "relu",
	[NN_LEAKY_RELU] = "leaky_relu",
	[NN_SIGMOID] = "sigmoid",
	[NN_TANH] = "tanh",
	[NN_DROPOUT] = "dropout",
	[NN_BATCHNORM] = "batchnorm",
	[NN_GELU] = "gelu",
	[NN_LAYERNORM] = "layernorm",
	[NN_EMBEDDING] = "embedding",
	[NN_SOFTMAX] = "softmax",
	[NN_GRU] = "gru",
	[NN_CONV1D] = "conv1d",
};

static const char *const loss_names[NN_LOSS_MAX] = {
	[NN_LOSS_CROSS_ENTROPY] = "cross_entropy",
	[NN_LOSS_MSE] = "mse",
	[NN_LOSS_BCE] = "binary_cross_entropy",
};

static const char *const optim_names[NN_OPT_MAX] = {
	[NN_OPT_SGD] = "sgd",
	[NN_OPT_ADAM] = "adam",
	[NN_OPT_ADAMW] = "adamw",
};

/* names[t] for 0 < t < max, else "unknown". */
static const char *
name_of(const char *const *names, int max, int t)
{
	return t <= 0 || t >= max ? "unknown" : names[t];
}

/* The t with names[t] equal to name, or 0. */
static int
named(const char *const *names, int max, const char *name)
{
	for (int t = 1; t < max; t++)
		if (strcmp(name, names[t]) == 0)
			return t;
	return 0;
}

const char *
nn_layer_type_name(NnLayerType type)
{
	return name_of(layer_names, NN_LAYER_TYPE_MAX, type);
}

NnLayerType
nn_layer_type_from_name(const char *name)
{
	return (NnLayerType) named(layer_names, NN_LAYER_TYPE_MAX, name);
}

const char *
nn_loss_name(NnLoss loss)
{
	return name_of(loss_names, NN_LOSS_MAX, loss);
}

NnLoss
nn_loss_from_name(const char *name)
{
	return (NnLoss) named(loss_names, NN_LOSS_MAX, name);
}

const char *
nn_optim_name(NnOptType type)
{
	return name_of(optim_names, NN_OPT_MAX, type);
}

NnOptType
nn_optim_from_name(const char *name)
{
	return (NnOptType) named(optim_names, NN_OPT_MAX, name);
}

void
nn_layer_defaults(NnLayerSpec *layer, NnLayerType type)
{
	memset(layer, 0, sizeof(*layer));
	layer->type = type;
	switch (type)
	{
		case NN_CONV2D:
		case NN_CONV1D:
			layer->stride = 1;
			break;
		case NN_LEAKY_RELU:
			layer->alpha = 0.01f;
			break;
		case NN_DROPOUT:
			layer->rate = 0.5f;
			break;
		case NN_BATCHNORM:
			layer->eps = 1e-5f;
			layer->momentum = 0.1f;
			break;
		case NN_LAYERNORM:
			layer->eps = 1e-5f;	/* torch.nn.LayerNorm's */
			break;
		default:
			break;
	}
}

void
nn_optim_defaults(NnOptim *opt, NnOptType type)
{
	memset(opt, 0, sizeof(*opt));
	opt->type = type;
	switch (type)
	{
		case NN_OPT_SGD:
			opt->lr = 0.01f;
			break;
		case NN_OPT_ADAM:
		case NN_OPT_ADAMW:
			opt->lr = 0.001f;
			opt->beta1 = 0.9f;
			opt->beta2 = 0.999f;
			opt->eps = 1e-8f;
			opt->weight_decay = type == NN_OPT_ADAMW ? 0.01f : 0.0f;
			break;
		default:
			break;
	}
}

void
nn_error_set(NnError *err, int layer, const char *field, const char *fmt,...)
{
	va_list		ap;
	int			len = 0;

	if (err == NULL)
		return;
	err->layer = layer;
	snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
	if (layer >= 0)
		len = snprintf(err->msg, sizeof(err->msg), "layers[%d]: ", layer);
	va_start(ap, fmt);
	vsnprintf(err->msg + len, sizeof(err->msg) - len, fmt, ap);
	va_end(ap);
}

#define REQUIRE_RANGE(value, lo, hi, name) \
	do { \
		if ((value) < (lo) || (value) > (hi)) \
		{ \
			nn_error_set(err, i, name, "%s: \"%s\" must be between %d and %d, got %d", \
						 tname, name, (int) (lo), (int) (hi), (int) (value)); \
			return false; \
		} \
	} while (0)

#define REQUIRE_FLOAT(cond, name, what, value) \
	do { \
		if (!(cond)) \
		{ \
			nn_error_set(err, i, name, "%s: \"%s\" must be %s, got %g", \
						 tname, name, what, (double) (value)); \
			return false; \
		} \
	} while (0)

/* Output size of a window op along one dimension, or 0 when the window doesn't fit. */
static int32_t
window_out(int32_t in, int32_t kernel, int32_t stride, int32_t padding)
{
	int64_t		span = (int64_t) in + 2 * (int64_t) padding - kernel;

	return span < 0 ? 0 : (int32_t) (span / stride + 1);
}

static bool
init_validate(const NnLayerSpec *l, int i, const char *tname, NnError *err)
{
	if (l->init >= NN_INIT_DEFAULT && l->init <= NN_INIT_GLOROT)
		return true;
	nn_error_set(err, i, "init", "%s: unknown \"init\"", tname);
	return false;
}

/* conv2d, maxpool2d, avgpool2d: a k x k window slid over [channels, height, width]. */
static bool
window_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
				int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);
	int32_t		stride = l->stride;

	if (in.ndim != 3)
	{
		if (in.ndim == 2)
			nn_error_set(err, i, "type", "%s needs a [channels, height, width] input, got a sequence of %d steps of %d features",
						 tname, in.c, in.w);
		else
			nn_error_set(err, i, "type", "%s needs a [channels, height, width] input, got a flat one of %d features",
						 tname, in.c);
		return false;
	}
	REQUIRE_RANGE(l->kernel, 1, NN_MAX_KERNEL, "kernel");
	if (l->type != NN_CONV2D && stride == 0)
		stride = l->kernel;
	REQUIRE_RANGE(stride, 1, NN_MAX_KERNEL, "stride");
	if (l->type == NN_CONV2D)
	{
		REQUIRE_RANGE(l->filters, 1, NN_MAX_CHANNELS, "filters");
		REQUIRE_RANGE(l->padding, 0, l->kernel - 1, "padding");
		if (!init_validate(l, i, tname, err))
			return false;
	}
	else if (l->padding != 0)
	{
		nn_error_set(err, i, "padding", "%s: \"padding\" is not supported for pooling", tname);
		return false;
	}
	out->h = window_out(in.h, l->kernel, stride, l->padding);
	out->w = window_out(in.w, l->kernel, stride, l->padding);
	if (out->h < 1 || out->w < 1)
	{
		nn_error_set(err, i, "kernel", "%s: a %dx%d window does not fit a %dx%d input",
					 tname, l->kernel, l->kernel, in.h, in.w);
		return false;
	}
	if (l->type == NN_CONV2D)
	{
		out->c = l->filters;
		*params = (int64_t) l->filters * in.c * l->kernel * l->kernel + l->filters;
	}
	return true;
}

/*
 * Check one layer against the shape it receives and compute its output shape and
 * parameter count.  Fields that don't apply to the layer's type are ignored.
 */
static bool
layer_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
			   int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);

	*out = in;
	*params = 0;
	switch (l->type)
	{
		case NN_DENSE:
			REQUIRE_RANGE(l->units, 1, NN_MAX_DIM, "units");
			if (!init_validate(l, i, tname, err))
				return false;
			out->ndim = 1;
			out->c = l->units;
			out->h = out->w = 1;
			*params = NN_SHAPE_SIZE(in) * l->units + l->units;
			break;

		case NN_CONV2D:
		case NN_MAXPOOL2D:
		case NN_AVGPOOL2D:
			if (!window_validate(l, i, in, out, params, err))
				return false;
			break;

		case NN_GLOBAL_AVGPOOL:
			if (in.ndim == 2)
			{
				/* over the steps of a sequence: one mean per feature */
				out->ndim = 1;
				out->c = in.w;
				out->h = out->w = 1;
				break;
			}
			if (in.ndim != 3)
			{
				nn_error_set(err, i, "type", "%s needs a [channels, height, width] input or a sequence", tname);
				return false;
			}
			out->h = out->w = 1;
			break;

		case NN_FLATTEN:
			out->ndim = 1;
			out->c = (int32_t) NN_SHAPE_SIZE(in);
			out->h = out->w = 1;
			break;

		case NN_RELU:
		case NN_SIGMOID:
		case NN_TANH:
		case NN_GELU:
			break;

		case NN_LEAKY_RELU:
			REQUIRE_FLOAT(isfinite(l->alpha) && l->alpha >= 0.0f && l->alpha <= 1.0f,
						  "alpha", "between 0 and 1", l->alpha);
			break;

		case NN_DROPOUT:
			REQUIRE_FLOAT(isfinite(l->rate) && l->rate >= 0.0f && l->rate < 1.0f,
						  "rate", "at least 0 and below 1", l->rate);
			break;

		case NN_BATCHNORM:
			if (in.ndim == 2)
			{
				nn_error_set(err, i, "type", "%s does not take a sequence; add a flatten layer before it", tname);
				return false;
			}
			REQUIRE_FLOAT(isfinite(l->eps) && l->eps > 0.0f && l->eps < 1.0f,
						  "eps", "positive and below 1", l->eps);
			REQUIRE_FLOAT(isfinite(l->momentum) && l->momentum >= 0.0f && l->momentum <= 1.0f,
						  "momentum", "between 0 and 1", l->momentum);
			*params = 2 * (int64_t) in.c;
			break;

		case NN_LAYERNORM:
			if (in.ndim != 1)
			{
				nn_error_set(err, i, "type", "%s needs a flat [features] input, got [%d, %d, %d]; add a flatten layer before it",
							 tname, in.c, in.h, in.w);
				return false;
			}
			REQUIRE_FLOAT(isfinite(l->eps) && l->eps > 0.0f && l->eps < 1.0f,
						  "eps", "positive and below 1", l->eps);
			*params = 2 * (int64_t) in.c;
			break;

		case NN_EMBEDDING:
			if (i != 0 || in.ndim != 1)
			{
				nn_error_set(err, i, "type", "%s must be the first layer, on a flat [steps] input of ids", tname);
				return false;
			}
			REQUIRE_RANGE(l->vocab, 1, NN_MAX_DIM, "vocab");
			REQUIRE_RANGE(l->units, 1, NN_MAX_DIM, "dim");
			out->ndim = 2;
			out->c = in.c;
			out->h = 1;
			out->w = l->units;
			*params = (int64_t) l->vocab * l->units;
			break;

		case NN_SOFTMAX:
			break;

		case NN_CONV1D:
			if (in.ndim != 2)
			{
				nn_error_set(err, i, "type", "%s needs a sequence [steps, features] input (an embedding's output)", tname);
				return false;
			}
			REQUIRE_RANGE(l->filters, 1, NN_MAX_CHANNELS, "filters");
			REQUIRE_RANGE(l->kernel, 1, NN_MAX_KERNEL, "kernel");
			REQUIRE_RANGE(l->stride, 1, NN_MAX_KERNEL, "stride");
			REQUIRE_RANGE(l->padding, 0, l->kernel - 1, "padding");
			if (!init_validate(l, i, tname, err))
				return false;
			out->c = window_out(in.c, l->kernel, l->stride, l->padding);
			if (out->c < 1)
			{
				nn_error_set(err, i, "kernel", "%s: a window of %d does not fit %d steps", tname, l->kernel, in.c);
				return false;
			}
			if ((int64_t) out->c * in.w * l->kernel > NN_MAX_ACT_PER_EX)
			{
				/* its windows, unfolded per example */
				nn_error_set(err, i, "kernel", "%s: %d windows of %d x %d values exceed %lld per example",
							 tname, out->c, l->kernel, in.w, (long long) NN_MAX_ACT_PER_EX);
				return false;
			}
			out->w = l->filters;
			*params = (int64_t) l->filters * in.w * l->kernel + l->filters;
			break;

		case NN_GRU:
			if (in.ndim != 2)
			{
				nn_error_set(err, i, "type", "%s needs a sequence [steps, features] input (an embedding's output)", tname);
				return false;
			}
			REQUIRE_RANGE(l->units, 1, NN_MAX_DIM, "units");
			if ((int64_t) in.c * 8 * l->units > NN_MAX_ACT_PER_EX)
			{
				/* what it keeps per example for backward: gates and states of every step */
				nn_error_set(err, i, "units", "%s: %d steps of %d units keep more than %lld values per example",
							 tname, in.c, l->units, (long long) NN_MAX_ACT_PER_EX);
				return false;
			}
			if (l->return_sequences)
				out->w = l->units;
			else
			{
				out->ndim = 1;
				out->c = l->units;
				out->h = out->w = 1;
			}
			*params = 3 * (int64_t) l->units * (in.w + l->units + 2);
			break;

		default:
			nn_error_set(err, i, "type", "unknown layer type %d", (int) l->type);
			return false;
	}

	if (NN_SHAPE_SIZE(*out) > NN_MAX_ACT_PER_EX)
	{
		nn_error_set(err, i, "type", "%s: output of %lld values per example exceeds the limit of %lld",
					 tname, (long long) NN_SHAPE_SIZE(*out), (long long) NN_MAX_ACT_PER_EX);
		return false;
	}
	return true;
}

bool
nn_spec_validate(const NnSpec *spec, NnShape *shapes, NnError *err)
{
	NnShape		local[NN_MAX_LAYERS + 1];
	NnShape    *shape = shapes ? shapes : local;
	int64_t		total_params = 0;
	int			i = -1;			/* for the REQUIRE macros: the spec itself */
	const char *tname = "input";

	if (spec->input_ndim != 1 && spec->input_ndim != 3)
	{
		nn_error_set(err, -1, "input", "\"input\" must have 1 dimension [features] or 3 [channels, height, width], got %d",
					 (int) spec->input_ndim);
		return false;
	}
	for (int d = 0; d < spec->input_ndim; d++)
		REQUIRE_RANGE(spec->input[d], 1, NN_MAX_DIM, "input");
	shape[0].ndim = spec->input_ndim;
	shape[0].c = spec->input[0];
	shape[0].h = spec->input_ndim == 3 ? spec->input[1] : 1;
	shape[0].w = spec->input_ndim == 3 ? spec->input[2] : 1;
	if (NN_SHAPE_SIZE(shape[0]) > NN_MAX_ACT_PER_EX)
	{
		nn_error_set(err, -1, "input", "\"input\" of %lld values per example exceeds the limit of %lld",
					 (long long) NN_SHAPE_SIZE(shape[0]), (long long) NN_MAX_ACT_PER_EX);
		return false;
	}
	if (spec->n_layers < 1 || spec->n_layers > NN_MAX_LAYERS)
	{
		nn_error_set(err, -1, "layers", "\"layers\" must hold between 1 and %d layers, got %d",
					 NN_MAX_LAYERS, (int) spec->n_layers);
		return false;
	}
	if (spec->loss <= 0 || spec->loss >= NN_LOSS_MAX)
	{
		nn_error_set(err, -1, "loss", "unknown \"loss\"");
		return false;
	}

	for (i = 0; i < spec->n_layers; i++)
	{
		int64_t		params;

		if (!layer_validate(&spec->layers[i], i, shape[i], &shape[i + 1], &params, err))
			return false;
		total_params += params;
		if (total_params > NN_MAX_PARAMS)
		{
			nn_error_set(err, i, "units", "%s: the model would have more than %lld parameters",
						 nn_layer_type_name(spec->layers[i].type), (long long) NN_MAX_PARAMS);
			return false;
		}
	}

	if (spec->loss == NN_LOSS_CROSS_ENTROPY && NN_SHAPE_SIZE(shape[spec->n_layers]) < 2)
	{
		nn_error_set(err, -1, "loss", "cross_entropy needs at least 2 outputs (classes), the last layer gives %lld",
					 (long long) NN_SHAPE_SIZE(shape[spec->n_layers]));
		return false;
	}
	return true;
}

bool
nn_optim_validate(const NnOptim *opt, NnError *err)
{
	const char *tname = nn_optim_name(opt->type);
	int			i = -1;

	if (opt->type <= 0 || opt->type >= NN_OPT_MAX)
	{
		nn_error_set(err, -1, "optimizer", "unknown \"optimizer\"");
		return false;
	}
	REQUIRE_FLOAT(isfinite(opt->lr) && opt->lr > 0.0f, "lr", "positive", opt->lr);
	REQUIRE_FLOAT(isfinite(opt->weight_decay) && opt->weight_decay >= 0.0f,
				  "weight_decay", "non-negative", opt->weight_decay);
	if (opt->type == NN_OPT_SGD)
	{
		REQUIRE_FLOAT(isfinite(opt->momentum) && opt->momentum >= 0.0f && opt->momentum < 1.0f,
					  "momentum", "at least 0 and below 1", opt->momentum);
		if (opt->nesterov && opt->momentum == 0.0f)
		{
			nn_error_set(err, -1, "nesterov", "sgd: \"nesterov\" needs a positive \"momentum\"");
			return false;
		}
	}
	else
	{
		REQUIRE_FLOAT(isfinite(opt->beta1) && opt->beta1 >= 0.0f && opt->beta1 < 1.0f,
					  "beta1", "at least 0 and below 1", opt->beta1);
		REQUIRE_FLOAT(isfinite(opt->beta2) && opt->beta2 >= 0.0f && opt->beta2 < 1.0f,
					  "beta2", "at least 0 and below 1", opt->beta2);
		REQUIRE_FLOAT(isfinite(opt->eps) && opt->eps > 0.0f, "eps", "positive", opt->eps);
	}
	(void) tname;
	return true;
}

int64_t
nn_spec_output_size(const NnSpec *spec)
{
	NnShape		shape[NN_MAX_LAYERS + 1];

	if (!nn_spec_validate(spec, shape, NULL))
		return -1;
	return NN_SHAPE_SIZE(shape[spec->n_layers]);
}

/*
 * Per-example cost.  Training counts forward, the input and weight gradients and
 * (for elementwise layers) the backward pass; the optimizer update is per batch,
 * not per example, and is left out.
 */
bool
nn_spec_cost(const NnSpec *spec, NnCost *per_layer, NnCost *total, NnError *err)
{
	NnShape		shape[NN_MAX_LAYERS + 1];
	NnCost		sum = {0};

	if (!nn_spec_validate(spec, shape, err))
		return false;
	for (int i = 0; i < spec->n_layers; i++)
	{
		const NnLayerSpec *l = &spec->layers[i];
		int64_t		in = NN_SHAPE_SIZE(shape[i]);
		int64_t		out = NN_SHAPE_SIZE(shape[i + 1]);
		NnCost		c = {0};

		c.act_floats = out;
		switch (l->type)
		{
			case NN_DENSE:
				c.params = in * out + out;
				c.flops_forward = 2 * in * out + out;
				/* the first layer needs no input gradient */
				c.flops_train = c.flops_forward + (i > 0 ? 2 * in * out : 0) + 2 * in * out + out;
				break;
			case NN_CONV2D:
				{
					int64_t		kk = (int64_t) shape[i].c * l->kernel * l->kernel;

					c.params = kk * l->filters + l->filters;
					c.flops_forward = 2 * kk * out + out;
					c.flops_train = c.flops_forward + (i > 0 ? 2 * kk * out : 0) + 2 * kk * out + out;
					break;
				}
			case NN_MAXPOOL2D:
			case NN_AVGPOOL2D:
				c.flops_forward = out * l->kernel * l->kernel;
				c.flops_train = c.flops_forward + out * l->kernel * l->kernel;
				break;
			case NN_GLOBAL_AVGPOOL:
				c.flops_forward = in;
				c.flops_train = 2 * in;
				break;
			case NN_FLATTEN:
				c.act_floats = 0;	/* a view of its input */
				break;
			case NN_BATCHNORM:
			case NN_LAYERNORM:
				c.params = 2 * (int64_t) shape[i].c;
				c.flops_forward = 5 * in;
				c.flops_train = 13 * in;
				break;
			case NN_GELU:
				c.flops_forward = 8 * in;
				c.flops_train = 20 * in;
				break;
			case NN_EMBEDDING:
				/* a gather; its gradient zeroes the table, then adds a row per step */
				c.params = (int64_t) l->vocab * l->units;
				c.flops_forward = out;
				c.flops_train = 2 * out + c.params;
				break;
			case NN_SOFTMAX:
				c.flops_forward = 5 * in;
				c.flops_train = 9 * in;
				break;
			case NN_CONV1D:
				{
					int64_t		kk = (int64_t) shape[i].w * l->kernel;

					c.params = kk * l->filters + l->filters;
					c.flops_forward = 2 * kk * out + out;
					c.flops_train = c.flops_forward + (i > 0 ? 2 * kk * out : 0) + 2 * kk * out + out;
					break;
				}
			case NN_GRU:
				{
					/* per step: two products into 3 gates, then the gates; backward twice the products */
					int64_t		steps = shape[i].c,
								h3 = 3 * (int64_t) l->units,
								mm = 2 * h3 * (shape[i].w + l->units);

					c.params = h3 * (shape[i].w + l->units + 2);
					c.flops_forward = steps * (mm + 12 * (int64_t) l->units);
					c.flops_train = c.flops_forward + steps * (2 * mm + 20 * (int64_t) l->units);
					c.act_floats = out + steps * 8 * (int64_t) l->units;	/* and the saved gates */
					break;
				}
			case NN_SIGMOID:
			case NN_TANH:
				c.flops_forward = 4 * in;
				c.flops_train = 7 * in;
				break;
			default:			/* relu, leaky_relu, dropout */
				c.flops_forward = in;
				c.flops_train = 3 * in;
				break;
		}
		if (per_layer)
			per_layer[i] = c;
		sum.params += c.params;
		sum.flops_forward += c.flops_forward;
		sum.flops_train += c.flops_train;
		sum.act_floats += c.act_floats;
	}
	if (total)
		*total = sum;
	return true;
}
