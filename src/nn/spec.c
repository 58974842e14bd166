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
	[NN_ADD] = "add",
	[NN_CONCAT] = "concat",
	[NN_EMBEDDING] = "embedding",
	[NN_SOFTMAX] = "softmax",
	[NN_GRU] = "gru",
	[NN_SLICE] = "slice",
	[NN_ATTENTION] = "attention",
	[NN_CONV1D] = "conv1d",
};

static const char *const loss_names[NN_LOSS_MAX] = {
	[NN_LOSS_CROSS_ENTROPY] = "cross_entropy",
	[NN_LOSS_MSE] = "mse",
	[NN_LOSS_BCE] = "binary_cross_entropy",
	[NN_LOSS_HUBER] = "huber",
};

static const char *const optim_names[NN_OPT_MAX] = {
	[NN_OPT_SGD] = "sgd",
	[NN_OPT_ADAM] = "adam",
	[NN_OPT_ADAMW] = "adamw",
	[NN_OPT_RMSPROP] = "rmsprop",
	[NN_OPT_ADAGRAD] = "adagrad",
};

static const char *const schedule_names[NN_SCHED_MAX] = {
	[NN_SCHED_STEP] = "step",
	[NN_SCHED_COSINE] = "cosine",
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

const char *
nn_schedule_name(NnSchedule s)
{
	return s == NN_SCHED_NONE ? "none" : name_of(schedule_names, NN_SCHED_MAX, s);
}

NnSchedule
nn_schedule_from_name(const char *name)
{
	if (strcmp(name, "none") == 0)
		return NN_SCHED_NONE;
	return named(schedule_names, NN_SCHED_MAX, name) ? (NnSchedule) named(schedule_names, NN_SCHED_MAX, name)
		: (NnSchedule) -1;
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
		case NN_OPT_RMSPROP:
			opt->lr = 0.01f;
			opt->alpha = 0.99f;
			opt->eps = 1e-8f;
			break;
		case NN_OPT_ADAGRAD:
			opt->lr = 0.01f;
			opt->eps = 1e-10f;
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

/*
 * Output size of a window op along one dimension, or 0 when the window doesn't
 * fit.  ceil_mode adds a last, partial window, but never one that would start
 * in the padding after (torch's and onnxruntime's rule).
 */
int32_t
nn_window_out(int32_t in, int32_t kernel, int32_t stride, int32_t pad, int32_t pad_end, bool ceil_mode)
{
	int64_t		span = (int64_t) in + pad + pad_end - kernel;
	int64_t		out;

	if (span < 0)
		return 0;
	out = ceil_mode ? (span + stride - 1) / stride + 1 : span / stride + 1;
	if (ceil_mode && (out - 1) * stride >= (int64_t) in + pad)
		out--;
	return (int32_t) out;
}

/*
 * Whether an avgpool2d that counts its pads has a ceil_mode window running
 * past the pads after an input of in_h x in_w: torch divides that window by
 * its part within the padded input (as pgdl does), onnxruntime by the whole
 * window, so ONNX files of it mean two things and pgdl neither reads nor
 * writes them.
 */
bool
nn_pool_counts_past_pads(const NnLayerSpec *l, int32_t in_h, int32_t in_w)
{
	int32_t		stride = l->stride > 0 ? l->stride : l->kernel;
	int32_t		in[2] = {in_h, in_w};

	if (l->type != NN_AVGPOOL2D || !l->count_pad || !l->ceil_mode)
		return false;
	for (int d = 0; d < 2; d++)
	{
		int32_t		out = nn_window_out(in[d], l->kernel, stride, l->padding, l->pad_end, true);

		if (out > 0 && (int64_t) (out - 1) * stride - l->padding + l->kernel > (int64_t) in[d] + l->pad_end)
			return true;
	}
	return false;
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
	else
	{
		/* pads of a whole window or more would make windows of pads only */
		REQUIRE_RANGE(l->padding, 0, l->kernel - 1, "padding");
		REQUIRE_RANGE(l->pad_end, 0, l->kernel - 1, "padding_end");
		if (l->count_pad && (l->type != NN_AVGPOOL2D || l->padding + l->pad_end == 0))
		{
			nn_error_set(err, i, "count_include_pad", "%s: \"count_include_pad\" is for an avgpool2d with padding",
						 tname);
			return false;
		}
	}
	out->h = nn_window_out(in.h, l->kernel, stride, l->padding,
						   l->type == NN_CONV2D ? l->padding : l->pad_end, l->ceil_mode);
	out->w = nn_window_out(in.w, l->kernel, stride, l->padding,
						   l->type == NN_CONV2D ? l->padding : l->pad_end, l->ceil_mode);
	if (out->h < 1 || out->w < 1)
	{
		nn_error_set(err, i, "kernel", "%s: a %dx%d window does not fit a %dx%d input",
					 tname, l->kernel, l->kernel, in.h, in.w);
		return false;
	}
	if (l->type == NN_CONV2D)
	{
		int			groups = NN_GROUPS(l);

		REQUIRE_RANGE(l->groups, 0, NN_MAX_CHANNELS, "groups");
		if (in.c % groups != 0 || l->filters % groups != 0)
		{
			nn_error_set(err, i, "groups", "%s: \"groups\" (%d) must divide the input's %d channels and the %d filters",
						 tname, groups, in.c, l->filters);
			return false;
		}
		out->c = l->filters;
		*params = (int64_t) l->filters * (in.c / groups) * l->kernel * l->kernel + l->filters;
	}
	return true;
}

/*
 * The validators of one layer family each, as window_validate is: all take the
 * layer (number i) and the shape it receives and, with *out already a copy of
 * it and *params 0, set the output shape and parameter count where the layer
 * changes them.
 */

/* dense: every input feature (or, per_step, every feature of a step) to units */
static bool
dense_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
			   int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);

	REQUIRE_RANGE(l->units, 1, NN_MAX_DIM, "units");
	if (!init_validate(l, i, tname, err))
		return false;
	if (l->per_step)
	{
		/* torch.nn.Linear on the last axis; without per_step a sequence is flattened */
		if (in.ndim != 2)
		{
			nn_error_set(err, i, "per_step", "%s: \"per_step\" needs a sequence [steps, features] input", tname);
			return false;
		}
		out->w = l->units;
		*params = (int64_t) in.w * l->units + l->units;
		return true;
	}
	out->ndim = 1;
	out->c = l->units;
	out->h = out->w = 1;
	*params = NN_SHAPE_SIZE(in) * l->units + l->units;
	return true;
}

/* global_avgpool and flatten: a shape made flat, by averaging or as it is */
static bool
reshape_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
				 int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);

	if (l->type == NN_FLATTEN)
	{
		int64_t		size = NN_SHAPE_SIZE(in);

		REQUIRE_RANGE(l->steps, 0, NN_MAX_DIM, "steps");
		if (l->steps > 0 && size % l->steps != 0)
		{
			nn_error_set(err, i, "steps", "%s: \"steps\" (%d) must divide the input's %lld values", tname,
						 l->steps, (long long) size);
			return false;
		}
		/* with steps, the values as they lie become a sequence: step after step, as ONNX's Reshape */
		out->ndim = l->steps > 0 ? 2 : 1;
		out->c = l->steps > 0 ? l->steps : (int32_t) size;
		out->h = 1;
		out->w = l->steps > 0 ? (int32_t) (size / l->steps) : 1;
		return true;
	}
	if (in.ndim == 2)
	{
		/* over the steps of a sequence: one mean per feature */
		out->ndim = 1;
		out->c = in.w;
		out->h = out->w = 1;
		return true;
	}
	if (in.ndim != 3)
	{
		nn_error_set(err, i, "type", "%s needs a [channels, height, width] input or a sequence", tname);
		return false;
	}
	out->h = out->w = 1;
	return true;
}

/* relu, sigmoid, tanh, gelu, softmax, leaky_relu, dropout: the input's shape; two have a setting */
static bool
elementwise_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
					 int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);

	if (l->type == NN_LEAKY_RELU)
		REQUIRE_FLOAT(isfinite(l->alpha) && l->alpha >= 0.0f && l->alpha <= 1.0f,
					  "alpha", "between 0 and 1", l->alpha);
	else if (l->type == NN_DROPOUT)
		REQUIRE_FLOAT(isfinite(l->rate) && l->rate >= 0.0f && l->rate < 1.0f,
					  "rate", "at least 0 and below 1", l->rate);
	if (l->type == NN_SOFTMAX && l->over_steps && in.ndim != 2)
	{
		nn_error_set(err, i, "over_steps", "%s: \"over_steps\" needs a sequence [steps, features] input", tname);
		return false;
	}
	return true;
}

/* batchnorm (per channel, not on sequences) and layernorm (per example, not on images) */
static bool
norm_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
			  int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);

	if (l->type == NN_BATCHNORM)
	{
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
		return true;
	}
	if (in.ndim == 3)
	{
		nn_error_set(err, i, "type", "%s needs a flat [features] input or a sequence, got [%d, %d, %d]; add a flatten layer before it",
					 tname, in.c, in.h, in.w);
		return false;
	}
	REQUIRE_FLOAT(isfinite(l->eps) && l->eps > 0.0f && l->eps < 1.0f,
				  "eps", "positive and below 1", l->eps);
	*params = 2 * (int64_t) NN_NORM_FEATURES(in);
	return true;
}

/* slice: features [start, start + length) of a flat input */
static bool
slice_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
			   int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);

	if (in.ndim == 2)
	{
		/* a sequence [steps, features]: the same features of each step */
		REQUIRE_RANGE(l->start, 0, in.w - 1, "start");
		REQUIRE_RANGE(l->units, 1, in.w - l->start, "length");
		out->w = l->units;
		return true;
	}
	if (in.ndim != 1)
	{
		nn_error_set(err, i, "type", "%s needs a flat [features] input or a sequence, got [%d, %d, %d]; add a flatten "
					 "layer before it", tname, in.c, in.h, in.w);
		return false;
	}
	REQUIRE_RANGE(l->start, 0, in.c - 1, "start");
	REQUIRE_RANGE(l->units, 1, in.c - l->start, "length");
	out->c = l->units;
	return true;
}

/* embedding: the first layer, ids [steps] to a sequence [steps, dim] */
static bool
embedding_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
				   int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);

	if (in.ndim != 1)
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
	*params = ((int64_t) l->vocab + (l->positions ? in.c : 0)) * l->units;
	return true;
}

/* Layers over a sequence [steps, features]: an error naming the layer for any other input. */
static bool
sequence_input(const NnLayerSpec *l, int i, NnShape in, NnError *err)
{
	if (in.ndim == 2)
		return true;
	nn_error_set(err, i, "type", "%s needs a sequence [steps, features] input (an embedding's output)",
				 nn_layer_type_name(l->type));
	return false;
}

/* attention: the sequence's shape, heads dividing its features */
static bool
attention_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
				   int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);

	if (!sequence_input(l, i, in, err))
		return false;
	REQUIRE_RANGE(l->heads, 1, in.w, "heads");
	if (in.w % l->heads != 0)
	{
		nn_error_set(err, i, "heads", "%s: %d heads do not divide the %d features of a step", tname, l->heads, in.w);
		return false;
	}
	*params = 4 * (int64_t) in.w * (in.w + 1);
	return true;
}

/* conv1d: a window slid over the steps, the features its channels */
static bool
conv1d_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
				int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);

	if (!sequence_input(l, i, in, err))
		return false;
	REQUIRE_RANGE(l->filters, 1, NN_MAX_CHANNELS, "filters");
	REQUIRE_RANGE(l->kernel, 1, NN_MAX_KERNEL, "kernel");
	REQUIRE_RANGE(l->stride, 1, NN_MAX_KERNEL, "stride");
	REQUIRE_RANGE(l->padding, 0, l->kernel - 1, "padding");
	if (!init_validate(l, i, tname, err))
		return false;
	out->c = nn_window_out(in.c, l->kernel, l->stride, l->padding, l->padding, false);
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
	return true;
}

/* gru: the sequence to units per step, or to the last step's units */
static bool
gru_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
			 int64_t *params, NnError *err)
{
	const char *tname = nn_layer_type_name(l->type);

	if (!sequence_input(l, i, in, err))
		return false;
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
	return true;
}

/*
 * Check one layer against the shape it receives and compute its output shape and
 * parameter count, by its family's validator.  Fields that don't apply to the
 * layer's type are ignored.
 */
static bool
layer_validate(const NnLayerSpec *l, int i, NnShape in, NnShape *out,
			   int64_t *params, NnError *err)
{
	bool		(*validate) (const NnLayerSpec *l, int i, NnShape in, NnShape *out,
							 int64_t *params, NnError *err);

	*out = in;
	*params = 0;
	switch (l->type)
	{
		case NN_DENSE:
			validate = dense_validate;
			break;
		case NN_CONV2D:
		case NN_MAXPOOL2D:
		case NN_AVGPOOL2D:
			validate = window_validate;
			break;
		case NN_GLOBAL_AVGPOOL:
		case NN_FLATTEN:
			validate = reshape_validate;
			break;
		case NN_RELU:
		case NN_SIGMOID:
		case NN_TANH:
		case NN_GELU:
		case NN_SOFTMAX:
		case NN_LEAKY_RELU:
		case NN_DROPOUT:
			validate = elementwise_validate;
			break;
		case NN_BATCHNORM:
		case NN_LAYERNORM:
			validate = norm_validate;
			break;
		case NN_ADD:
		case NN_CONCAT:
			validate = NULL;	/* merge_validate */
			break;
		case NN_EMBEDDING:
			validate = embedding_validate;
			break;
		case NN_SLICE:
			validate = slice_validate;
			break;
		case NN_ATTENTION:
			validate = attention_validate;
			break;
		case NN_CONV1D:
			validate = conv1d_validate;
			break;
		case NN_GRU:
			validate = gru_validate;
			break;
		default:
			nn_error_set(err, i, "type", "unknown layer type %d", (int) l->type);
			return false;
	}
	if (validate != NULL && !validate(l, i, in, out, params, err))
		return false;
	if (NN_SHAPE_SIZE(*out) > NN_MAX_ACT_PER_EX)
	{
		nn_error_set(err, i, "type", "%s: output of %lld values per example exceeds the limit of %lld",
					 nn_layer_type_name(l->type), (long long) NN_SHAPE_SIZE(*out), (long long) NN_MAX_ACT_PER_EX);
		return false;
	}
	return true;
}

bool
nn_spec_is_graph(const NnSpec *spec)
{
	for (int i = 0; i < spec->n_layers && i < NN_MAX_LAYERS; i++)
		if (spec->layers[i].n_inputs != 0)
			return true;
	return false;
}

/*
 * The columns of the spec's input that layer i reads, [*start, *start + *count):
 * all of them, or a slice's; false when it reads anything else.  An embedding's
 * ids must come from the caller's examples so that nn_model_check_input can
 * check them.
 */
bool
nn_input_columns(const NnSpec *spec, int i, int64_t *start, int64_t *count)
{
	int			src = nn_layer_src(spec, i, 0);

	if (src == -1)
	{
		*start = 0;
		*count = (int64_t) spec->input[0] * (spec->input_ndim == 3 ? (int64_t) spec->input[1] * spec->input[2] : 1);
		return true;
	}
	if (spec->layers[src].type != NN_SLICE || nn_layer_src(spec, src, 0) != -1)
		return false;
	*start = spec->layers[src].start;
	*count = spec->layers[src].units;
	return true;
}

static void
shape_text(NnShape s, char *buf, size_t len)
{
	if (s.ndim == 1)
		snprintf(buf, len, "[%d]", s.c);
	else
		snprintf(buf, len, "[%d, %d, %d]", s.c, s.h, s.w);
}

/*
 * Layer i's "inputs": each an earlier layer or the spec's input (-1), so that
 * spec order is a topological order and a cycle cannot be written; add and
 * concat take 2 or more, every other layer one.  For add and concat, the
 * shapes they merge and their output.
 */
static bool
inputs_validate(const NnSpec *spec, int i, const NnShape *shape, NnShape *out, NnError *err)
{
	const NnLayerSpec *l = &spec->layers[i];
	const char *tname = nn_layer_type_name(l->type);
	bool		merge = l->type == NN_ADD || l->type == NN_CONCAT;
	int			n = nn_layer_n_inputs(spec, i);
	char		a[64],
				b[64];

	if (l->n_inputs < 0 || l->n_inputs > NN_MAX_INPUTS)
	{
		nn_error_set(err, i, "inputs", "%s: \"inputs\" must name between 1 and %d layers, got %d",
					 tname, NN_MAX_INPUTS, (int) l->n_inputs);
		return false;
	}
	if (merge && l->n_inputs < 2)
	{
		nn_error_set(err, i, "inputs", "%s needs \"inputs\" naming 2 or more layers", tname);
		return false;
	}
	if (!merge && n != 1)
	{
		nn_error_set(err, i, "inputs", "%s takes one input, got %d", tname, n);
		return false;
	}
	for (int k = 0; k < n; k++)
	{
		int			src = nn_layer_src(spec, i, k);

		if (src < -1 || src >= i)
		{
			nn_error_set(err, i, "inputs", "%s: input %d is layer %d, which does not come before it "
						 "(a layer reads only earlier layers, so that the graph has no cycle)", tname, k, src);
			return false;
		}
	}
	if (!merge)
		return true;

	*out = shape[nn_layer_src(spec, i, 0) + 1];
	for (int k = 1; k < n; k++)
	{
		NnShape		s = shape[nn_layer_src(spec, i, k) + 1];
		bool		ok;

		if (l->type == NN_ADD)
			ok = s.ndim == out->ndim && s.c == out->c && s.h == out->h && s.w == out->w;
		else
		{
			ok = s.ndim == out->ndim && s.h == out->h && s.w == out->w;
			if (ok)
				out->c += s.c;
			if (out->c > NN_MAX_DIM || (s.ndim == 3 && out->c > NN_MAX_CHANNELS))
			{
				nn_error_set(err, i, "inputs", "%s: the output would have more than %d channels or features",
							 tname, s.ndim == 3 ? NN_MAX_CHANNELS : NN_MAX_DIM);
				return false;
			}
		}
		if (!ok)
		{
			shape_text(shape[nn_layer_src(spec, i, 0) + 1], a, sizeof(a));
			shape_text(s, b, sizeof(b));
			nn_error_set(err, i, "inputs", "%s: input %d has shape %s, input 0 has %s; %s", tname, k, b, a,
						 l->type == NN_ADD ? "add needs equal shapes" :
						 "concat needs equal heights and widths (or flat inputs)");
			return false;
		}
	}
	return true;
}

/* Every output feeds a later layer, but the last layer's: an unused branch is a mistake. */
static bool
uses_validate(const NnSpec *spec, NnError *err)
{
	bool		used[NN_MAX_LAYERS + 1] = {0};

	for (int i = 0; i < spec->n_layers; i++)
		for (int k = 0; k < nn_layer_n_inputs(spec, i); k++)
			used[nn_layer_src(spec, i, k) + 1] = true;
	if (!used[0])
	{
		nn_error_set(err, -1, "input", "no layer reads the spec's \"input\"");
		return false;
	}
	for (int i = 0; i < spec->n_layers - 1; i++)
		if (!used[i + 1])
		{
			nn_error_set(err, i, "name", "%s: its output is never used (only the last layer's may be unread)",
						 nn_layer_type_name(spec->layers[i].type));
			return false;
		}
	return true;
}

/* Names are unique and NUL-terminated, so that "inputs" in JSON mean one layer each. */
static bool
names_validate(const NnSpec *spec, NnError *err)
{
	for (int i = 0; i < spec->n_layers; i++)
	{
		const char *name = spec->layers[i].name;

		if (memchr(name, '\0', NN_MAX_NAME) == NULL)
		{
			nn_error_set(err, i, "name", "\"name\" must be shorter than %d bytes", NN_MAX_NAME);
			return false;
		}
		for (int j = 0; name[0] != '\0' && j < i; j++)
			if (strcmp(spec->layers[j].name, name) == 0)
			{
				nn_error_set(err, i, "name", "\"name\" \"%s\" is the name of layers[%d] too", name, j);
				return false;
			}
	}
	return true;
}

/* `whole`: also that every output is used, which a spec being built a layer at a time is not yet */
static bool
spec_validate(const NnSpec *spec, NnShape *shapes, NnError *err, bool whole)
{
	NnShape		local[NN_MAX_LAYERS + 1];
	NnShape    *shape = shapes ? shapes : local;
	int64_t		total_params = 0,
				start,
				count;
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
	/* 0 for the others: a blob writes it only for huber, and must read back as it was */
	if (spec->loss == NN_LOSS_HUBER ? !(isfinite(spec->delta) && spec->delta > 0.0f) : spec->delta != 0.0f)
	{
		nn_error_set(err, -1, "delta", spec->loss == NN_LOSS_HUBER ? "huber: \"delta\" must be positive, got %g" :
					 "\"delta\" applies to the huber loss only, got %g", (double) spec->delta);
		return false;
	}

	for (i = 0; i < spec->n_layers; i++)
	{
		int64_t		params;

		if (!inputs_validate(spec, i, shape, &shape[i + 1], err))
			return false;
		if (spec->layers[i].type == NN_ADD || spec->layers[i].type == NN_CONCAT)
		{
			params = 0;
			if (NN_SHAPE_SIZE(shape[i + 1]) > NN_MAX_ACT_PER_EX)
			{
				nn_error_set(err, i, "inputs", "%s: output of %lld values per example exceeds the limit of %lld",
							 nn_layer_type_name(spec->layers[i].type),
							 (long long) NN_SHAPE_SIZE(shape[i + 1]), (long long) NN_MAX_ACT_PER_EX);
				return false;
			}
		}
		else if (spec->layers[i].type == NN_EMBEDDING && !nn_input_columns(spec, i, &start, &count))
		{
			nn_error_set(err, i, "type", "embedding must be the first layer, or read a slice of the spec's input: its ids come from the examples");
			return false;
		}
		else if (!layer_validate(&spec->layers[i], i, NN_IN_SHAPE(shape, spec, i), &shape[i + 1], &params, err))
			return false;
		total_params += params;
		if (total_params > NN_MAX_PARAMS)
		{
			nn_error_set(err, i, "units", "%s: the model would have more than %lld parameters",
						 nn_layer_type_name(spec->layers[i].type), (long long) NN_MAX_PARAMS);
			return false;
		}
	}

	i = -1;
	if (!names_validate(spec, err) || (whole && !uses_validate(spec, err)))
		return false;
	if (spec->loss == NN_LOSS_CROSS_ENTROPY && NN_SHAPE_SIZE(shape[spec->n_layers]) < 2)
	{
		nn_error_set(err, -1, "loss", "cross_entropy needs at least 2 outputs (classes), the last layer gives %lld",
					 (long long) NN_SHAPE_SIZE(shape[spec->n_layers]));
		return false;
	}
	return true;
}

bool
nn_spec_validate(const NnSpec *spec, NnShape *shapes, NnError *err)
{
	return spec_validate(spec, shapes, err, true);
}

bool
nn_spec_validate_partial(const NnSpec *spec, NnShape *shapes, NnError *err)
{
	return spec_validate(spec, shapes, err, false);
}

static bool nn_methods_validate(const NnOptim *opt, NnError *err);

/* The settings of rmsprop and adagrad, which share the slots of those they have no use for (nn.h). */
static bool
optim_validate_later(const NnOptim *opt, NnError *err)
{
	const char *tname = nn_optim_name(opt->type);
	int			i = -1;

	REQUIRE_FLOAT(isfinite(opt->eps) && opt->eps > 0.0f, "eps", "positive", opt->eps);
	if (opt->nesterov)
	{
		nn_error_set(err, -1, "nesterov", "%s: \"nesterov\" is sgd's", tname);
		return false;
	}
	if (opt->type == NN_OPT_RMSPROP)
	{
		REQUIRE_FLOAT(isfinite(opt->momentum) && opt->momentum >= 0.0f && opt->momentum < 1.0f,
					  "momentum", "at least 0 and below 1", opt->momentum);
		REQUIRE_FLOAT(isfinite(opt->alpha) && opt->alpha >= 0.0f && opt->alpha <= 1.0f,
					  "alpha", "between 0 and 1", opt->alpha);
		REQUIRE_FLOAT(opt->beta1 == 0.0f, "beta1", "0 (rmsprop has none)", opt->beta1);
		return true;
	}
	REQUIRE_FLOAT(isfinite(opt->lr_decay) && opt->lr_decay >= 0.0f, "lr_decay", "non-negative", opt->lr_decay);
	REQUIRE_FLOAT(isfinite(opt->initial_accumulator_value) && opt->initial_accumulator_value >= 0.0f,
				  "initial_accumulator_value", "non-negative", opt->initial_accumulator_value);
	REQUIRE_FLOAT(opt->momentum == 0.0f, "momentum", "0 (adagrad has none)", opt->momentum);
	if (opt->centered)
	{
		nn_error_set(err, -1, "centered", "%s: \"centered\" is rmsprop's", tname);
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
	if (opt->type == NN_OPT_RMSPROP || opt->type == NN_OPT_ADAGRAD)
	{
		if (!optim_validate_later(opt, err))
			return false;
	}
	else if (opt->centered)
	{
		nn_error_set(err, -1, "centered", "%s: \"centered\" is rmsprop's", tname);
		return false;
	}
	else if (opt->type == NN_OPT_SGD)
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
	return nn_methods_validate(opt, err);
}

/* The training methods of an optimizer (zero: off); ranges as the configuration keys state them. */
static bool
nn_methods_validate(const NnOptim *opt, NnError *err)
{
	const char *tname = nn_optim_name(opt->type);
	int			i = -1;

	if (opt->schedule < NN_SCHED_NONE || opt->schedule >= NN_SCHED_MAX)
	{
		nn_error_set(err, -1, "schedule", "unknown \"schedule\"");
		return false;
	}
	if (opt->schedule == NN_SCHED_STEP)
	{
		REQUIRE_RANGE(opt->step_size, 1, NN_MAX_SCHEDULE_EPOCHS, "step_size");
		REQUIRE_FLOAT(isfinite(opt->gamma) && opt->gamma > 0.0f && opt->gamma <= 1.0f,
					  "gamma", "above 0 and at most 1", opt->gamma);
	}
	REQUIRE_FLOAT(isfinite(opt->eta_min) && opt->eta_min >= 0.0f && opt->eta_min <= opt->lr,
				  "eta_min", "at least 0 and at most lr", opt->eta_min);
	REQUIRE_RANGE(opt->warmup_epochs, 0, NN_MAX_SCHEDULE_EPOCHS, "warmup_epochs");
	REQUIRE_RANGE(opt->epochs, 0, NN_MAX_SCHEDULE_EPOCHS, "epochs");
	REQUIRE_RANGE(opt->epoch, 0, NN_MAX_SCHEDULE_EPOCHS, "epoch");
	if (opt->warmup_steps < 0 || opt->warmup_steps > NN_MAX_STEP)
	{
		nn_error_set(err, -1, "warmup_steps", "\"warmup_steps\" must be between 0 and %lld, got %lld",
					 (long long) NN_MAX_STEP, (long long) opt->warmup_steps);
		return false;
	}
	if (opt->warmup_epochs > 0 || opt->warmup_steps > 0)
		REQUIRE_FLOAT(isfinite(opt->warmup_start) && opt->warmup_start > 0.0f && opt->warmup_start <= 1.0f,
					  "warmup_start_factor", "above 0 and at most 1", opt->warmup_start);
	REQUIRE_FLOAT(isfinite(opt->clip_norm) && opt->clip_norm >= 0.0f, "clip_norm", "positive",
				  opt->clip_norm);
	REQUIRE_FLOAT(isfinite(opt->label_smoothing) && opt->label_smoothing >= 0.0f && opt->label_smoothing <= 1.0f,
				  "label_smoothing", "between 0 and 1", opt->label_smoothing);
	return true;
}

/*
 * torch.optim.lr_scheduler's closed forms, in double: an epoch's lr is
 * LinearLR's during warmup_epochs, then StepLR's or CosineAnnealingLR's
 * counted from the end of warmup (SequentialLR with the milestone there); step
 * warmup is LinearLR stepped per optimizer step, a factor on that.
 */
double
nn_optim_lr(const NnOptim *o, int64_t step)
{
	double		base = o->lr,
				lr = base,
				start = o->warmup_start;

	if (o->warmup_epochs > 0 && o->epoch < o->warmup_epochs)
		lr = base * (start + (1.0 - start) * o->epoch / o->warmup_epochs);
	else
	{
		int32_t		t = o->epoch - o->warmup_epochs,
					t_max = o->epochs - o->warmup_epochs;

		if (o->schedule == NN_SCHED_STEP)
			lr = base * pow(o->gamma, (double) (t / o->step_size));
		else if (o->schedule == NN_SCHED_COSINE && t_max > 0)
			lr = o->eta_min + (base - o->eta_min) * (1.0 + cos(3.14159265358979323846 * t / t_max)) / 2.0;
	}
	if (o->warmup_steps > 0 && step - 1 < o->warmup_steps)
		lr *= start + (1.0 - start) * (double) (step - 1) / o->warmup_steps;
	return lr;
}

int64_t
nn_spec_output_size(const NnSpec *spec)
{
	NnShape		shape[NN_MAX_LAYERS + 1];

	if (!nn_spec_validate(spec, shape, NULL))
		return -1;
	return NN_SHAPE_SIZE(shape[spec->n_layers]);
}

/* A layer as its cost sees it: what it reads and writes for one example. */
typedef struct LayerIo
{
	const NnSpec *spec;
	int			i;
	const NnLayerSpec *l;
	NnShape		ins;			/* its (first) input's shape */
	int64_t		in;				/* values in that input */
	int64_t		out;			/* values in its output */
	bool		first;			/* it reads the spec's input: no input gradient */
} LayerIo;

/* dense, conv2d, conv1d: products with a weight, which train as three (forward, input and weight gradients) */
static void
product_cost(const LayerIo *x, NnCost *c)
{
	const NnLayerSpec *l = x->l;
	const NnShape ins = x->ins;
	const int64_t in = x->in,
				out = x->out;

	if (l->type == NN_DENSE)
	{
		/* per step: a [steps, features] x [features, units] product */
		int64_t		w_in = l->per_step ? ins.w : in,
					w = w_in * l->units;

		c->params = w + l->units;
		c->flops_forward = 2 * w * (out / l->units) + out;
		/* the first layer needs no input gradient */
		c->flops_train = c->flops_forward + (!x->first ? 2 * in * l->units : 0) + 2 * in * l->units + out;
	}
	else if (l->type == NN_CONV2D)
	{
		int64_t		kk = (int64_t) (ins.c / NN_GROUPS(l)) * l->kernel * l->kernel;

		c->params = kk * l->filters + l->filters;
		c->flops_forward = 2 * kk * out + out;
		c->flops_train = c->flops_forward + (!x->first ? 2 * kk * out : 0) + 2 * kk * out + out;
	}
	else
	{
		/* conv1d: a step's features times the window, per output step and filter */
		int64_t		kk = (int64_t) ins.w * l->kernel;

		c->params = kk * l->filters + l->filters;
		c->flops_forward = 2 * kk * out + out;
		c->flops_train = c->flops_forward + (x->i > 0 ? 2 * kk * out : 0) + 2 * kk * out + out;
	}
}

/* embedding, attention, gru: what a sequence layer computes per step, and keeps */
static void
sequence_cost(const LayerIo *x, NnCost *c)
{
	const NnLayerSpec *l = x->l;
	const NnShape ins = x->ins;
	const int64_t out = x->out;

	if (l->type == NN_EMBEDDING)
	{
		/* a gather; its gradient zeroes the table, then adds a row per step */
		/* with positions, a position's row is added and its gradient summed over the batch */
		c->params = ((int64_t) l->vocab + (l->positions ? ins.c : 0)) * l->units;
		c->flops_forward = (l->positions ? 2 : 1) * out;
		c->flops_train = (l->positions ? 4 : 2) * out + c->params;
	}
	else if (l->type == NN_ATTENTION)
	{
		/* four D x D products per step, then Q K^T and P V per head: 2 T^2 D per example */
		int64_t		steps = ins.c,
					d = ins.w;

		c->params = 4 * d * (d + 1);
		c->flops_forward = steps * 8 * d * d + 4 * steps * steps * d + 5 * l->heads * steps * steps;
		c->flops_train = 3 * c->flops_forward;
		c->act_floats = out + 4 * steps * d + l->heads * steps * steps;
	}
	else
	{
		/* per step: two products into 3 gates, then the gates; backward twice the products */
		int64_t		steps = ins.c,
					h3 = 3 * (int64_t) l->units,
					mm = 2 * h3 * (ins.w + l->units);

		c->params = h3 * (ins.w + l->units + 2);
		c->flops_forward = steps * (mm + 12 * (int64_t) l->units);
		c->flops_train = c->flops_forward + steps * (2 * mm + 20 * (int64_t) l->units);
		c->act_floats = out + steps * 8 * (int64_t) l->units;	/* and the saved gates */
	}
}

/* The other layers: a few operations per value, pooling's per window value, the norms' two vectors. */
static void
pointwise_cost(const LayerIo *x, NnCost *c)
{
	const NnLayerSpec *l = x->l;
	const int64_t in = x->in,
				out = x->out;

	switch (l->type)
	{
		case NN_MAXPOOL2D:
		case NN_AVGPOOL2D:
			c->flops_forward = out * l->kernel * l->kernel;
			c->flops_train = c->flops_forward + out * l->kernel * l->kernel;
			break;
		case NN_GLOBAL_AVGPOOL:
			c->flops_forward = in;
			c->flops_train = 2 * in;
			break;
		case NN_FLATTEN:
			c->act_floats = 0;	/* a view of its input */
			break;
		case NN_BATCHNORM:
		case NN_LAYERNORM:
			c->params = 2 * (int64_t) NN_NORM_FEATURES(x->ins);
			c->flops_forward = 5 * in;
			c->flops_train = 13 * in;
			break;
		case NN_GELU:
			c->flops_forward = 8 * in;
			c->flops_train = 20 * in;
			break;
		case NN_SOFTMAX:
			c->flops_forward = 5 * in;
			c->flops_train = 9 * in;
			break;
		case NN_SLICE:
			c->flops_forward = out;
			c->flops_train = out + in;	/* its input's gradient: zeros, and the slice's */
			break;
		case NN_SIGMOID:
		case NN_TANH:
			c->flops_forward = 4 * in;
			c->flops_train = 7 * in;
			break;
		case NN_ADD:
			/* one pass per extra input forward; backward hands dout to each */
			c->flops_forward = (nn_layer_n_inputs(x->spec, x->i) - 1) * out;
			c->flops_train = c->flops_forward + nn_layer_n_inputs(x->spec, x->i) * out;
			break;
		case NN_CONCAT:
			c->flops_forward = out;	/* copies */
			c->flops_train = 2 * out;
			break;
		default:				/* relu, leaky_relu, dropout */
			c->flops_forward = in;
			c->flops_train = 3 * in;
			break;
	}
}

/* Layer i's cost per example, from the shapes nn_spec_validate gave. */
static NnCost
layer_cost(const NnSpec *spec, int i, const NnShape *shape)
{
	LayerIo		x;
	NnCost		c = {0};

	x.spec = spec;
	x.i = i;
	x.l = &spec->layers[i];
	x.ins = NN_IN_SHAPE(shape, spec, i);
	x.in = NN_SHAPE_SIZE(x.ins);
	x.out = NN_SHAPE_SIZE(shape[i + 1]);
	x.first = nn_layer_src(spec, i, 0) < 0;
	c.act_floats = x.out;
	switch (x.l->type)
	{
		case NN_DENSE:
		case NN_CONV2D:
		case NN_CONV1D:
			product_cost(&x, &c);
			break;
		case NN_EMBEDDING:
		case NN_ATTENTION:
		case NN_GRU:
			sequence_cost(&x, &c);
			break;
		default:
			pointwise_cost(&x, &c);
			break;
	}
	return c;
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
		NnCost		c = layer_cost(spec, i, shape);

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
