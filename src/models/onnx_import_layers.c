/*
 * onnx_import_layers.c -- how pgdl.import_onnx reads each operator into a
 * layer (onnx_read_op): Gemm and MatMul as dense, Conv, the pools, Flatten and
 * Reshape, BatchNormalization, Dropout, activations, LayerNormalization, a
 * trailing Softmax as the loss's, and the normalization and target scaling
 * pgdl's export puts at the graph's ends.  Anything pgdl cannot compute
 * exactly as ONNX does is refused, naming the node, its op_type and why.
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "spec/spec.h"
#include "data/data.h"
#include "models/models.h"
#include "models/onnx_reader.h"

/* ---- layers ---- */

NnLayerSpec *
onnx_new_layer(Reader *r, NnLayerType type)
{
	NnLayerSpec *l;

	if (r->spec->n_layers >= NN_MAX_LAYERS)
		UNSUPPORTED(r, "The model would have more than %d layers.", NN_MAX_LAYERS);
	l = &r->spec->layers[r->spec->n_layers];
	nn_layer_defaults(l, type);
	/* a chain's layer reads the one before it; any other reads its input by index */
	if (r->src != r->spec->n_layers - 1)
	{
		l->n_inputs = 1;
		l->inputs[0] = (int16) r->src;
	}
	return l;
}

/* The layer new_layer gave, with its weights: checked by the engine's validator, and the chain's shape moved on. */
void
onnx_add_layer(Reader *r, const float *w, int64 w_len, const float *b, int64 b_len)
{
	NnShape		shapes[NN_MAX_LAYERS + 1];
	NnError		err;
	int			i = r->spec->n_layers;

	r->spec->n_layers++;
	r->spec->loss = NN_LOSS_MSE;	/* any: the loss is settled at the end */
	if (!nn_spec_validate_partial(r->spec, shapes, &err))
	{
		const char *msg = strncmp(err.msg, "layers[", 7) == 0 && strstr(err.msg, "]: ") ?
			strstr(err.msg, "]: ") + 3 : err.msg;

		UNSUPPORTED(r, "pgdl's %s refuses it: %s.", nn_layer_type_name(r->spec->layers[i].type), msg);
	}
	r->shape = shapes[i + 1];
	r->tensor[i][0] = w;
	r->length[i][0] = w_len;
	r->tensor[i][1] = b;
	r->length[i][1] = b_len;
	r->src = i;
	r->open_matmul = false;
	r->sigmoid_node = -1;
	r->group_softmax = false;
}

/* The value's rank in the graph and its dims, dims[0] (the batch) 1. */
int
onnx_value_dims(Reader *r, int64 dims[ONNX_MAX_HELD + 1])
{
	dims[0] = 1;
	if (r->n_held > 0)
	{
		memcpy(dims + 1, r->held, sizeof(int64) * r->n_held);
		return r->n_held + 1;
	}
	dims[1] = r->shape.c;
	if (r->shape.ndim == 2)
	{
		/* a layer's sequence [steps, features]: ONNX's [batch, steps, features] */
		dims[2] = r->shape.w;
		return 3;
	}
	dims[2] = r->shape.h;
	dims[3] = r->shape.w;
	return r->shape.ndim == 1 ? 2 : 4;
}

/* pgdl holds some values flat: only operators indifferent to their layout take them. */
static void
need_not_held(Reader *r)
{
	StringInfoData dims;

	if (r->n_held == 0)
		return;
	initStringInfo(&dims);
	for (int d = 0; d < r->n_held; d++)
		appendStringInfo(&dims, ", " INT64_FORMAT, r->held[d]);
	UNSUPPORTED(r, "Its input is [batch%s]; pgdl holds a value of that shape flat (no layer takes it as a "
				"sequence), so it takes only elementwise operators, and those over all of an example, "
				"before a Flatten to [batch, %d].", dims.data, r->shape.c);
}

void
onnx_need_flat(Reader *r)
{
	need_not_held(r);
	if (r->shape.ndim != 1)
		UNSUPPORTED(r, "Its input is [batch, %d, %d, %d]; pgdl takes a 2-D [batch, features] one here.",
					r->shape.c, r->shape.h, r->shape.w);
}

static void
need_image(Reader *r)
{
	need_not_held(r);
	if (r->shape.ndim != 3)
		UNSUPPORTED(r, "Its input is [batch, %d]; pgdl takes a 4-D [batch, channels, height, width] one here.",
					r->shape.c);
}

/* A weight matrix into pgdl's [out, in]; `transposed`: it is stored [out, in] already. */
static float *
dense_weights(Reader *r, size_t i, bool transposed, int64 in, int64 *out)
{
	const Onnx__TensorProto *t = onnx_const_input(r, i, false);
	int64		n;
	float	   *v = onnx_tensor_floats(r, t, &n);
	float	   *w;

	if (t->n_dims != 2 || t->dims[transposed ? 1 : 0] != in || t->dims[transposed ? 0 : 1] < 1)
		UNSUPPORTED(r, "Its weight \"%s\" is not a matrix with " INT64_FORMAT " %s.",
					pgdl_echo(t->name), in, transposed ? "columns" : "rows");
	*out = t->dims[transposed ? 0 : 1];
	if (*out > NN_MAX_DIM)
		UNSUPPORTED(r, "It has " INT64_FORMAT " outputs; pgdl's dense layers have at most %d.", *out, NN_MAX_DIM);
	if (transposed)
		return v;
	w = palloc_extended(sizeof(float) * n, MCXT_ALLOC_HUGE);
	for (int64 o = 0; o < *out; o++)
	{
		CHECK_FOR_INTERRUPTS();
		for (int64 k = 0; k < in; k++)
			w[o * in + k] = v[k * *out + o];
	}
	return w;
}

/*
 * Gemm's alpha and beta are folded into the weights and the bias: alpha (x W')
 * becomes x (alpha W'), which rounds each product once more (exact when alpha
 * is a power of two).
 */
static void
scale_floats(Reader *r, float *v, int64 n, const char *attr, float by)
{
	if (!isfinite(by))
		MALFORMED(r, "Its \"%s\" is not finite.", attr);
	for (int64 i = 0; i < n; i++)
	{
		v[i] *= by;
		if (!isfinite(v[i]))
			MALFORMED(r, "Its \"%s\" times a weight overflows float32.", attr);
	}
}

static void
read_gemm(Reader *r)
{
	int64		in = r->shape.c;
	int64		out;
	float	   *w;
	float	   *b;

	onnx_need_flat(r);
	if (onnx_attr_int(r, "transA", 0) != 0)
		UNSUPPORTED(r, "Its \"transA\" is set: its input's rows are not the examples, and pgdl's dense layer "
					"computes each example alone.");
	w = dense_weights(r, 1, onnx_attr_int(r, "transB", 0) != 0, in, &out);
	b = onnx_const_input(r, 2, true) ? onnx_const_vector(r, 2, out, true) : palloc0(sizeof(float) * out);
	scale_floats(r, w, in * out, "alpha", onnx_attr_float(r, "alpha", 1.0f));
	scale_floats(r, b, out, "beta", onnx_attr_float(r, "beta", 1.0f));
	onnx_new_layer(r, NN_DENSE)->units = (int32) out;
	onnx_add_layer(r, w, in * out, b, out);
}

/* MatMul by a weight [in, out]: dense, or on a layer's sequence dense per_step (each step's features). */
static void
read_matmul(Reader *r)
{
	bool		per_step = r->shape.ndim == 2 && r->n_held == 0;
	int64		in = per_step ? r->shape.w : r->shape.c;
	int64		out;
	float	   *w;
	NnLayerSpec *l;

	if (!per_step)
		onnx_need_flat(r);
	w = dense_weights(r, 1, false, in, &out);
	l = onnx_new_layer(r, NN_DENSE);
	l->units = (int32) out;
	l->per_step = per_step;
	onnx_add_layer(r, w, in * out, palloc0(sizeof(float) * out), out);
	r->open_matmul = true;
}

/* ReduceMean over the steps of a layer's sequence (axes [1], keepdims 0): global_avgpool, as pgdl exports it. */
static void
read_reduce_mean(Reader *r)
{
	int64		n;
	int64	   *axes = r->opset >= 18 && r->node->n_input < 2 ? NULL : onnx_int64s_input(r, 1, "axes", 18, &n);

	if (r->shape.ndim != 2 || r->n_held > 0 || axes == NULL || n != 1 || (axes[0] != 1 && axes[0] != -2) ||
		onnx_attr_int(r, "keepdims", 1) != 0)
		UNSUPPORTED(r, "pgdl reads a ReduceMean as the mean over a sequence's steps (axes [1], keepdims 0), or "
					"inside a LayerNorm.");
	onnx_new_layer(r, NN_GLOBAL_AVGPOOL);
	onnx_add_layer(r, NULL, 0, NULL, 0);
}

/*
 * The bias of a MatMul: Add(value, b) or Add(b, value), the only node that
 * reads the MatMul's output (which then no other may read: the layer's output
 * has the bias in it).
 */
static void
read_add(Reader *r)
{
	size_t		other = strcmp(r->node->input[0], r->value) == 0 ? 1 : 0;

	if (!r->in->open_matmul || r->in->uses != 1 || r->node->n_input != 2)
		UNSUPPORTED(r, "pgdl takes an Add of a constant only as the bias of a MatMul, the one node that reads "
					"the MatMul's output.");
	r->tensor[r->in->src][1] = onnx_const_vector(r, other, r->shape.ndim == 2 ? r->shape.w : r->shape.c, false);
	r->in->closed = true;
}

static void
read_conv(Reader *r)
{
	const Onnx__TensorProto *t;
	NnLayerSpec *l;
	int64		n;
	float	   *w;
	float	   *b;
	int64		stride;

	need_image(r);
	t = onnx_const_input(r, 1, false);
	w = onnx_tensor_floats(r, t, &n);
	if (t->n_dims != 4 || t->dims[1] != r->shape.c || t->dims[2] != t->dims[3] || t->dims[0] < 1)
		UNSUPPORTED(r, "Its weight is not [filters, %d, k, k] (2-D, square).", r->shape.c);
	if (onnx_attr_int(r, "group", 1) != 1)
		UNSUPPORTED(r, "Its \"group\" is not 1; pgdl's conv2d has no groups.");
	if (onnx_attr_ints_same(r, "dilations", 2, 1) != 1)
		UNSUPPORTED(r, "Its \"dilations\" are not 1.");
	if (onnx_attr_ints_same(r, "kernel_shape", 2, t->dims[2]) != t->dims[2])
		MALFORMED(r, "Its \"kernel_shape\" disagrees with its weight.");
	stride = onnx_attr_ints_same(r, "strides", 2, 1);
	l = onnx_new_layer(r, NN_CONV2D);
	l->filters = (int32) Min(t->dims[0], PG_INT32_MAX);
	l->kernel = (int32) Min(t->dims[2], PG_INT32_MAX);
	l->stride = (int32) Max(Min(stride, PG_INT32_MAX), PG_INT32_MIN);
	l->padding = (int32) Max(Min(onnx_auto_pad(r, t->dims[2], stride, onnx_attr_ints_same(r, "pads", 4, 0)),
								 PG_INT32_MAX), PG_INT32_MIN);
	b = onnx_const_input(r, 2, true) ? onnx_const_vector(r, 2, t->dims[0], false) : palloc0(sizeof(float) * t->dims[0]);
	onnx_add_layer(r, w, n, b, t->dims[0]);
}

/* SAME_*'s pads of a side of `in` values: ceil(in / stride) outputs, the odd one at the end (UPPER) or start */
static void
pool_same_pads(int64 in, int64 kernel, int64 stride, bool lower, int64 *before, int64 *after)
{
	int64		out = (in + stride - 1) / stride;
	int64		total = Max((out - 1) * stride + kernel - in, 0);

	*before = lower ? total - total / 2 : total / 2;
	*after = total - *before;
}

/*
 * A pool's pads before (top, left) and after (bottom, right), from "pads" or
 * "auto_pad": pgdl's pools pad the two axes alike, each side on its own.  A
 * 1-D pool (dims 1) has the pads of its length alone.
 */
static void
pool_pads(Reader *r, int dims, int64 kernel, int64 stride, int64 *before, int64 *after)
{
	const Onnx__AttributeProto *a = onnx_attr(r, "auto_pad", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
	bool		lower = onnx_attr_string_is(r, "auto_pad", "SAME_LOWER");

	*before = *after = 0;
	if (lower || onnx_attr_string_is(r, "auto_pad", "SAME_UPPER"))
	{
		int64		wb,
					wa;

		if (stride < 1 || stride > NN_MAX_KERNEL)
			UNSUPPORTED(r, "Its stride (" INT64_FORMAT ") is not between 1 and %d.", stride, NN_MAX_KERNEL);
		pool_same_pads(r->shape.h, kernel, stride, lower, before, after);
		if (dims == 2)
			pool_same_pads(r->shape.w, kernel, stride, lower, &wb, &wa);
		if (dims == 2 && (wb != *before || wa != *after))
			UNSUPPORTED(r, "Its \"auto_pad\" pads down otherwise than across here; pgdl pads both axes alike.");
	}
	else if (a != NULL && a->has_s && !onnx_attr_string_is(r, "auto_pad", "NOTSET") &&
			 !onnx_attr_string_is(r, "auto_pad", "VALID"))
		UNSUPPORTED(r, "Its \"auto_pad\" is not NOTSET, VALID, SAME_UPPER or SAME_LOWER.");
	else if (!onnx_attr_string_is(r, "auto_pad", "VALID") &&
			 (a = onnx_attr(r, "pads", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)) != NULL && a->n_ints != 0)
	{
		if (a->n_ints != (size_t) (2 * dims))
			UNSUPPORTED(r, "Its \"pads\" has %zu values; pgdl takes %d (%d-D).", a->n_ints, 2 * dims, dims);
		if (dims == 2 && (a->ints[0] != a->ints[1] || a->ints[2] != a->ints[3]))
			UNSUPPORTED(r, "Its \"pads\" differ down and across; pgdl pads both axes alike.");
		*before = a->ints[0];
		*after = a->ints[dims];
	}
	if (*before < 0 || *after < 0 || *before >= kernel || *after >= kernel)
		MALFORMED(r, "Its pads (" INT64_FORMAT ", " INT64_FORMAT ") are negative or not less than its kernel.",
				  *before, *after);
}

/*
 * A 1-D pool's input [batch, channels, length]: pgdl's pools are 2-D, so the
 * graph's input, when this pool is its one reader, comes in as the image
 * [channels, length, 1].  Any other rank-3 value is held flat, and no layer
 * makes an image of it.
 */
static void
pool_1d_input(Reader *r)
{
	if (r->in != &r->values[0] || r->in->kind != ONNX_VALUE_TENSOR || r->in->uses != 1 || r->n_held != 2 ||
		r->src != -1)
		UNSUPPORTED(r, "It is a 1-D pool of a value [batch, %d]; pgdl pools 1-D only the graph's input "
					"[batch, channels, length], read by this node alone.", r->shape.c);
	r->spec->input_ndim = 3;
	r->spec->input[0] = (int32) r->held[0];
	r->spec->input[1] = (int32) r->held[1];
	r->spec->input[2] = 1;
	r->shape.ndim = 3;
	r->shape.c = (int32) r->held[0];
	r->shape.h = (int32) r->held[1];
	r->shape.w = 1;
	r->n_held = 0;
	/* the input is an image now, which no later node may read as ONNX's rank 3 */
	r->in->closed = true;
}

/*
 * The pool of a 1-D input [channels, length, 1] padded after by kernel - 1 at
 * least (pads go on both axes alike), so that each window's one column is the
 * input's: that column, the length's first `length` windows (ONNX's; the
 * others come of the extra pads), and the value [channels, length] held flat.
 */
static void
pool_1d_output(Reader *r, int64 length)
{
	int64		dims[3] = {1, r->shape.c, length};
	int32		rows = r->shape.h;
	NnLayerSpec *l;

	if (r->shape.w > 1)
	{
		onnx_to_groups(r, (int64) r->shape.c * rows);
		l = onnx_new_layer(r, NN_SLICE);
		l->units = 1;
		onnx_add_layer(r, NULL, 0, NULL, 0);
	}
	if (rows > length)
	{
		onnx_to_groups(r, dims[1]);
		l = onnx_new_layer(r, NN_SLICE);
		l->units = (int32) length;
		onnx_add_layer(r, NULL, 0, NULL, 0);
	}
	onnx_from_groups(r, dims, 3);
}

/*
 * MaxPool and AveragePool, padded or not: pgdl's pools pad as ONNX does (a
 * MaxPool's pads never win, an AveragePool counts them under
 * count_include_pad) and have its ceil_mode.  "storage_order" orders the
 * Indices output only, which is refused.
 */
static void
read_pool(Reader *r, NnLayerType type)
{
	bool		one_d = r->n_held == 2 && r->shape.ndim == 1;
	int			dims = one_d ? 1 : 2;
	NnLayerSpec *l;
	int64		kernel = onnx_attr_ints_same(r, "kernel_shape", dims, -1);
	int64		stride = onnx_attr_ints_same(r, "strides", dims, 1);
	int64		before,
				after;
	int32		in_length;
	int32		length;

	if (one_d)
		pool_1d_input(r);
	need_image(r);
	in_length = r->shape.h;
	if (kernel < 1 || kernel > NN_MAX_KERNEL)
		UNSUPPORTED(r, "Its \"kernel_shape\" is missing or not between 1 and %d.", NN_MAX_KERNEL);
	pool_pads(r, dims, kernel, stride, &before, &after);
	if (onnx_attr_ints_same(r, "dilations", dims, 1) != 1)
		UNSUPPORTED(r, "Its \"dilations\" are not 1; pgdl's windows are dense.");
	if (r->node->n_output > 1 && r->node->output[1][0] != '\0')
		UNSUPPORTED(r, "It has an Indices output; pgdl's pooling has one output.");
	if (one_d && type == NN_AVGPOOL2D && before + after > 0 && onnx_attr_int(r, "count_include_pad", 0) != 0)
		UNSUPPORTED(r, "It is a 1-D AveragePool counting its pads; pgdl's pools pad both axes of the image it "
					"reads a 1-D input as, and would count the pads across too.");
	l = onnx_new_layer(r, type);
	l->kernel = (int32) kernel;
	l->stride = (int32) Max(Min(stride, PG_INT32_MAX), PG_INT32_MIN);
	l->padding = (int32) before;
	l->pad_end = (int32) (one_d ? Max(after, kernel - 1 - before) : after);
	l->ceil_mode = onnx_attr_int(r, "ceil_mode", 0) != 0;
	l->count_pad = !one_d && type == NN_AVGPOOL2D && before + after > 0 &&
		onnx_attr_int(r, "count_include_pad", 0) != 0;
	if (nn_pool_counts_past_pads(l, r->shape.h, r->shape.w))
		UNSUPPORTED(r, "Its ceil_mode makes a last window that runs past its pads, which it counts in "
					"(count_include_pad): onnxruntime divides such a window by its whole size, torch by its part "
					"within the padded input, so pgdl reads neither.");
	onnx_add_layer(r, NULL, 0, NULL, 0);
	if (!one_d)
		return;
	/* ONNX's windows along the length, as pgdl counts them (its stride checked by the validator) */
	length = nn_window_out(in_length, l->kernel, l->stride > 0 ? l->stride : l->kernel, l->padding,
						   (int32) after, l->ceil_mode);
	if (length < 1)
		UNSUPPORTED(r, "Its window does not fit its input's length (%d).", in_length);
	pool_1d_output(r, length);
}

/* Flatten to [batch, rest]: a layer only where there is something to flatten. */
static void
flatten(Reader *r)
{
	r->n_held = 0;
	if (r->shape.ndim == 1)
		return;
	onnx_new_layer(r, NN_FLATTEN);
	onnx_add_layer(r, NULL, 0, NULL, 0);
}

static void
read_flatten(Reader *r)
{
	int64		axis = onnx_attr_int(r, "axis", 1);
	int64		dims[ONNX_MAX_HELD + 1];

	if (axis < 0)
		axis += onnx_value_dims(r, dims);
	if (axis != 1)
		UNSUPPORTED(r, "Its \"axis\" is " INT64_FORMAT "; pgdl flattens all but the batch dimension (axis 1).",
					onnx_attr_int(r, "axis", 1));
	flatten(r);
}

/*
 * Reshape that keeps the batch: [0 or the fixed batch or -1, dims of the
 * example's size]. pgdl's values are flat per example, so it moves no value:
 * to rank 2 it is a flatten, to another rank the value is held flat.
 */
static void
read_reshape(Reader *r)
{
	int64		n;
	int64	   *shape;
	int64		in[ONNX_MAX_HELD + 1];
	int			in_rank = onnx_value_dims(r, in);
	int64		features = NN_SHAPE_SIZE(r->shape);
	int64		known = 1;
	int			unknown = -1;

	if (r->opset < 5)
		UNSUPPORTED(r, "pgdl reads Reshape from opset 5 on.");
	shape = onnx_tensor_int64s(r, onnx_const_input(r, 1, false), ONNX_MAX_HELD + 1, &n);
	for (int64 d = 1; d < n; d++)
	{
		if (shape[d] == 0 && onnx_attr_int(r, "allowzero", 0) == 0 && d < in_rank)
			shape[d] = in[d];	/* 0 copies the input's dim */
		if (shape[d] == -1 && unknown < 0)
			unknown = (int) d;
		else if (shape[d] >= 1 && shape[d] <= features / known)
			known *= shape[d];
		else
			known = -1;
		if (known < 0)
			break;
	}
	if (unknown > 0 && known > 0 && features % known == 0)
		shape[unknown] = features / known;
	if (n < 2 || known < 1 || (unknown < 0 ? known : known * shape[unknown]) != features ||
		!(shape[0] == 0 || (shape[0] == -1 && unknown < 0) || (r->batch > 0 && shape[0] == r->batch)) ||
		(shape[0] == 0 && onnx_attr_int(r, "allowzero", 0) != 0))
		UNSUPPORTED(r, "Its target shape does not keep the batch dimension and the example's " INT64_FORMAT
					" values; pgdl reshapes only within an example.", features);
	flatten(r);
	if (n > 2)
	{
		r->n_held = (int) n - 1;
		memcpy(r->held, shape + 1, sizeof(int64) * r->n_held);
	}
}

static void
read_batchnorm(Reader *r)
{
	int			c = r->shape.c;
	int			i = r->spec->n_layers;
	NnLayerSpec *l;
	float	   *var;
	float		momentum = onnx_attr_float(r, "momentum", 0.9f);

	need_not_held(r);
	if (onnx_attr_int(r, "training_mode", 0) != 0 || onnx_attr_int(r, "spatial", 1) != 1)
		UNSUPPORTED(r, "Its \"training_mode\" or \"spatial\" is not inference's (0, 1).");
	for (size_t o = 1; o < r->node->n_output; o++)
		if (r->node->output[o][0] != '\0')
			UNSUPPORTED(r, "It has training outputs (running statistics); pgdl imports inference graphs.");
	var = onnx_const_vector(r, 4, c, false);
	for (int j = 0; j < c; j++)
		if (var[j] < 0.0f)
			MALFORMED(r, "Its variance is negative in channel %d (%g).", j, (double) var[j]);
	l = onnx_new_layer(r, NN_BATCHNORM);
	l->eps = onnx_attr_float(r, "epsilon", 1e-5f);
	/* ONNX's momentum weighs the running statistic, PyTorch's and pgdl's the batch */
	l->momentum = momentum >= 0.0f && momentum <= 1.0f ? 1.0f - momentum : 0.1f;
	onnx_add_layer(r, onnx_const_vector(r, 1, c, false), c, onnx_const_vector(r, 2, c, false), c);
	r->tensor[i][2] = onnx_const_vector(r, 3, c, false);
	r->length[i][2] = c;
	r->tensor[i][3] = var;
	r->length[i][3] = c;
}

/* A BOOL constant that is false, as Dropout's training_mode must be. */
static bool
const_false(Reader *r, size_t i)
{
	const Onnx__TensorProto *t = onnx_const_input(r, i, false);

	onnx_tensor_check_stored(r, t, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "BOOL");
	if (t->has_raw_data)
		return t->raw_data.len == 1 && t->raw_data.data[0] == 0;
	return t->n_int32_data == 1 && t->int32_data[0] == 0;
}

static void
read_dropout(Reader *r)
{
	float		rate = r->opset < 12 ? onnx_attr_float(r, "ratio", 0.5f) : 0.5f;

	if (r->opset >= 12 && onnx_const_input(r, 1, true))
		rate = onnx_const_scalar(r, 1);
	/* in training mode it drops at random, but a ratio of 0 drops nothing: the identity either way */
	if (r->opset >= 12 && onnx_const_input(r, 2, true) && !const_false(r, 2) && rate != 0.0f)
		UNSUPPORTED(r, "Its \"training_mode\" is not a constant false, and its ratio is not 0.");
	if (r->node->n_output > 1 && r->node->output[1][0] != '\0')
		UNSUPPORTED(r, "It has a mask output; pgdl's dropout has one output.");
	onnx_new_layer(r, NN_DROPOUT)->rate = rate;
	onnx_add_layer(r, NULL, 0, NULL, 0);
}

static void
read_activation(Reader *r, NnLayerType type)
{
	NnLayerSpec *l = onnx_new_layer(r, type);

	if (type == NN_LEAKY_RELU)
		l->alpha = onnx_attr_float(r, "alpha", 0.01f);
	onnx_add_layer(r, NULL, 0, NULL, 0);
	if (type == NN_SIGMOID)
		r->sigmoid_node = r->index;
}

/*
 * An operator over groups of an example's last values, several groups to an
 * example (LayerNormalization or Softmax over the trailing axes of a value of
 * rank 3 or 4): pgdl holds the value flat, in ONNX's order, so a flatten with
 * steps makes it a sequence of `rows` steps of one group each, and the layer,
 * which works on each step of a sequence, follows.  rows 1 (an image
 * normalized whole): a plain flatten.
 */
void
onnx_to_groups(Reader *r, int64 rows)
{
	onnx_new_layer(r, NN_FLATTEN)->steps = rows > 1 ? (int32) Min(rows, PG_INT32_MAX) : 0;
	onnx_add_layer(r, NULL, 0, NULL, 0);
}

/* and back: flat again, held in the graph's dims */
void
onnx_from_groups(Reader *r, const int64 *dims, int rank)
{
	if (r->shape.ndim != 1)
	{
		onnx_new_layer(r, NN_FLATTEN);
		onnx_add_layer(r, NULL, 0, NULL, 0);
	}
	r->n_held = rank - 1;
	memcpy(r->held, dims + 1, sizeof(int64) * r->n_held);
}

/*
 * The groups an "axis" splits an example into: rows of n values, the values
 * from axis on (`alone`: that axis alone, the ones after it being 1).  False
 * where the axis takes in the batch.
 */
static bool
axis_groups(Reader *r, int64 axis, bool alone, int64 *rows, int64 *n, int64 dims[ONNX_MAX_HELD + 1], int *rank)
{
	*rank = onnx_value_dims(r, dims);
	if (axis < 0)
		axis += *rank;
	if (axis < 1 || axis >= *rank)
		return false;
	*rows = *n = 1;
	for (int d = 1; d < *rank; d++)
	{
		if (d < axis)
			*rows *= dims[d];
		else if (d == axis || !alone)
			*n *= dims[d];
		else if (dims[d] != 1)
			return false;
	}
	return true;
}

/*
 * LayerNormalization: over all of an example (pgdl's layernorm of a flat
 * input), over each step of a layer's sequence, or over the trailing axes of
 * a value of rank 3 or 4 as groups (to_groups); scale and bias per value of a
 * group.
 */
static void
read_layernorm(Reader *r)
{
	/* a layer's sequence [steps, features] is normalized step by step over its last axis */
	bool		per_step = r->shape.ndim == 2 && r->n_held == 0;
	int64		axis = onnx_attr_int(r, "axis", -1);
	int64		dims[ONNX_MAX_HELD + 1];
	int			rank = 0;		/* set by axis_groups where grouped */
	int64		rows = 1;
	int64		n = per_step ? r->shape.w : r->shape.c;
	bool		grouped;
	int			i;
	const Onnx__TensorProto *t;
	float	   *scale;
	int64		count;

	if (r->opset < 17)
		UNSUPPORTED(r, "LayerNormalization is an operator from opset 17 on.");
	if (per_step ? axis != -1 && axis != 2 : !axis_groups(r, axis, false, &rows, &n, dims, &rank))
		UNSUPPORTED(r, "Its \"axis\" (" INT64_FORMAT ") normalizes across the batch%s; pgdl normalizes each "
					"example alone.", axis, per_step ? " or part of a step" : "");
	for (size_t o = 1; o < r->node->n_output; o++)
		if (r->node->output[o][0] != '\0')
			UNSUPPORTED(r, "It has Mean or InvStdDev outputs; pgdl's layernorm has one output.");
	t = onnx_const_input(r, 1, false);
	scale = onnx_tensor_floats(r, t, &count);
	if (count != n)
		UNSUPPORTED(r, "Its scale holds " INT64_FORMAT " values; pgdl's layernorm takes one per value it "
					"normalizes together (" INT64_FORMAT ").", count, n);
	grouped = !per_step && (rows > 1 || r->shape.ndim == 3);
	if (grouped)
		onnx_to_groups(r, rows);
	i = r->spec->n_layers;
	onnx_new_layer(r, NN_LAYERNORM)->eps = onnx_attr_float(r, "epsilon", 1e-5f);
	onnx_add_layer(r, scale, n, NULL, n);
	r->tensor[i][1] = palloc0(sizeof(float) * n);
	if (onnx_const_input(r, 2, true))
	{
		r->tensor[i][1] = onnx_tensor_floats(r, onnx_const_input(r, 2, false), &count);
		if (count != n)
			UNSUPPORTED(r, "Its bias holds " INT64_FORMAT " values; pgdl's layernorm takes " INT64_FORMAT ".", count, n);
	}
	if (grouped)
		onnx_from_groups(r, dims, rank);
}

/*
 * Softmax or LogSoftmax (opset 13 on) over axis 1 of a rank-3 value [batch,
 * steps, features]: pgdl's softmax over_steps on it as a sequence (a flatten
 * with steps first where it is held flat), each feature's column alone.
 */
static bool
read_softmax_steps(Reader *r, int64 axis)
{
	int64		dims[ONNX_MAX_HELD + 1];
	int			rank = onnx_value_dims(r, dims);
	bool		steps = r->shape.ndim == 2 && r->n_held == 0;
	NnLayerSpec *l;

	if (r->opset < 13 || rank != 3 || (axis != 1 && axis != -2) || dims[1] < 2 || dims[2] < 2)
		return false;
	if (!steps)
		onnx_to_groups(r, dims[1]);
	l = onnx_new_layer(r, NN_SOFTMAX);
	l->log = strcmp(r->node->op_type, "LogSoftmax") == 0;
	l->over_steps = true;
	onnx_add_layer(r, NULL, 0, NULL, 0);
	if (!steps)
		onnx_from_groups(r, dims, rank);
	r->group_softmax = true;
	return true;
}

/*
 * Softmax or LogSoftmax over the features, as the last node: cross_entropy's,
 * which pgdl.predict applies.  Over the last axis of several rows (each step
 * of a sequence) either is pgdl's softmax layer (with log) on each group
 * (to_groups).
 */
static void
read_softmax(Reader *r)
{
	/* before opset 13 the input is coerced to 2-D at axis; from 13 on it is over that axis alone */
	int64		axis = onnx_attr_int(r, "axis", r->opset < 13 ? 1 : -1);
	int64		dims[ONNX_MAX_HELD + 1];
	int			rank;
	int64		rows;
	int64		n;

	if (read_softmax_steps(r, axis))
		return;
	if (!axis_groups(r, axis, r->opset >= 13, &rows, &n, dims, &rank))
		UNSUPPORTED(r, "Its \"axis\" (" INT64_FORMAT ") is the batch's, or leaves out axes after it; pgdl's softmax "
					"is over an example's last values.", axis);
	if (rows > 1)
	{
		/* a layer's sequence is one group a step already */
		bool		steps = r->shape.ndim == 2 && r->n_held == 0;

		if (!steps)
			onnx_to_groups(r, rows);
		onnx_new_layer(r, NN_SOFTMAX)->log = strcmp(r->node->op_type, "LogSoftmax") == 0;
		onnx_add_layer(r, NULL, 0, NULL, 0);
		if (!steps)
			onnx_from_groups(r, dims, rank);
		r->group_softmax = true;
		return;
	}
	if (r->args->loss != 0 && r->args->loss != NN_LOSS_CROSS_ENTROPY)
		onnx_node_error(r, ERRCODE_INVALID_PARAMETER_VALUE, "A trailing %s is cross_entropy's; loss is %s.",
				   pgdl_echo(r->node->op_type), nn_loss_name(r->args->loss));
	r->loss = NN_LOSS_CROSS_ENTROPY;
}

/* A Pad that pads nothing (PyTorch writes one before AvgPool2d) is nothing; any other is refused. */
static void
read_pad(Reader *r)
{
	const Onnx__AttributeProto *a = onnx_attr(r, "pads", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	int64		n = a ? (int64) a->n_ints : 0;
	const int64 *pads = a ? a->ints : NULL;

	if (r->opset >= 11)
		pads = onnx_tensor_int64s(r, onnx_const_input(r, 1, false), 8, &n);
	for (int64 i = 0; i < n; i++)
		if (pads[i] != 0)
			UNSUPPORTED(r, "It pads; pgdl pads only inside conv2d.");
}

/* ---- the normalization pgdl's export puts first ---- */

static bool
same_floats(const float *a, const float *b, int64 n)
{
	for (int64 i = 0; i < n; i++)
		if (fabsf(a[i] - b[i]) > 1e-6f * Max(fabsf(a[i]), fabsf(b[i])))
			return false;
	return true;
}

/* A mean or std as pgdl's export writes it: shaped as one example ([F] or [C, H, W]), or [1, ...] of that. */
static float *
normalization_vector(Reader *r, size_t i)
{
	const Onnx__TensorProto *t = onnx_const_input(r, i, false);
	int64		example[3] = {r->shape.c, r->shape.h, r->shape.w};
	int			lead = t->n_dims > 0 && t->dims[0] == 1 && t->n_dims == r->shape.ndim + 1 ? 1 : 0;
	int64		n;
	float	   *v = onnx_tensor_floats(r, t, &n);

	if (t->n_dims - lead != r->shape.ndim)
		UNSUPPORTED(r, "Input %zu is not shaped as one example.", i);
	for (int d = 0; d < r->shape.ndim; d++)
		if (t->dims[lead + d] != example[d])
			UNSUPPORTED(r, "Input %zu is not shaped as one example.", i);
	return v;
}

/* Mul by a scalar, or Sub of a mean then Div by a std: what the dataset does to raw features. */
static void
read_normalization(Reader *r, PgdlOnnxOp op)
{
	const PgdlDataset *ds = r->args->dataset;
	int64		f = NN_SHAPE_SIZE(r->shape);
	bool		same;

	if (ds == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot import ONNX node #%d (%s) without the dataset it normalizes for", r->index,
						pgdl_onnx_op_name(op)),
				 errdetail("The model was exported by pgdl with its dataset's normalization as its first nodes."),
				 errhint("Pass the packed dataset as dataset, or export with with_normalization => false.")));
	if (op == PGDL_ONNX_MUL)
		same = ds->mean == NULL && same_floats((float[]) {onnx_const_scalar(r, 1)}, &ds->scale, 1);
	else
		same = ds->mean != NULL && ds->n_features == f && ds->n_numeric == f &&
			same_floats(normalization_vector(r, 1), op == PGDL_ONNX_SUB ? ds->mean : ds->std, f);
	if (!same)
		onnx_node_error(r, ERRCODE_INVALID_PARAMETER_VALUE,
				   "The model's input normalization and dataset's disagree.");
	if (r->in->uses != 1)
		UNSUPPORTED(r, "Another node reads its input too; pgdl's normalization is the only reader of the raw "
					"features.");
	r->in->closed = true;
	r->norm_state = op == PGDL_ONNX_SUB ? 1 : 2;
}

/* One of the target unscaling's initializers: n_targets floats, equal to the dataset's. */
static void
check_target_vector(Reader *r, const float *want, int32 k)
{
	const Onnx__TensorProto *t = onnx_const_input(r, 1, false);
	int64		n;
	float	   *v = onnx_tensor_floats(r, t, &n);

	if (n != k || !same_floats(v, want, k))
		onnx_node_error(r, ERRCODE_INVALID_PARAMETER_VALUE,
				   "The model's target scaling and the dataset's disagree.");
}

/* pgdl's export's Mul by std then Add of mean behind the network: the dataset's targets, undone. */
static void
read_target_unscaling(Reader *r, PgdlOnnxOp op)
{
	const PgdlDataset *ds = r->args->dataset;

	if (ds == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot import ONNX node #%d (%s) without the dataset whose targets it unscales", r->index,
						pgdl_onnx_op_name(op)),
				 errdetail("The model was exported by pgdl with its dataset's target scaling undone as its last nodes."),
				 errhint("Pass the packed dataset as dataset, or export with with_normalization => false.")));
	if (ds->target_mean == NULL)
		onnx_node_error(r, ERRCODE_INVALID_PARAMETER_VALUE,
				   "The model undoes a target scaling that the dataset does not have.");
	check_target_vector(r, op == PGDL_ONNX_MUL ? ds->target_std : ds->target_mean, ds->n_targets);
	r->target_state = op == PGDL_ONNX_MUL ? 1 : 2;
}

/* One node of the chain (not a Constant): as a layer, the loss, or nothing. */
void
onnx_read_op(Reader *r, PgdlOnnxOp op)
{
	const char *name = r->node->name ? r->node->name : "";

	if (r->meta_target &&
		((r->target_state == 0 && op == PGDL_ONNX_MUL && strcmp(name, PGDL_ONNX_NODE_TARGET_MUL) == 0) ||
		 (r->target_state == 1 && op == PGDL_ONNX_ADD && strcmp(name, PGDL_ONNX_NODE_TARGET_ADD) == 0)))
		return read_target_unscaling(r, op);
	if (r->target_state != 0)
		UNSUPPORTED(r, "pgdl's target scaling is a Mul followed by an Add, the graph's last nodes.");
	if (r->meta_normalization && r->spec->n_layers == 0 &&
		((r->norm_state == 0 && (op == PGDL_ONNX_MUL || op == PGDL_ONNX_SUB)) ||
		 (r->norm_state == 1 && op == PGDL_ONNX_DIV)))
		return read_normalization(r, op);
	if (r->norm_state == 1)
		UNSUPPORTED(r, "pgdl's normalization is a Sub followed by a Div.");
	r->norm_state = 2;
	if (onnx_value_op(r, op) || onnx_read_pattern(r, op))
		return;
	switch (op)
	{
		case PGDL_ONNX_RELU:
		case PGDL_ONNX_LEAKYRELU:
		case PGDL_ONNX_SIGMOID:
		case PGDL_ONNX_TANH:
			read_activation(r, pgdl_onnx_op_layer(op));
			break;
		case PGDL_ONNX_GEMM:
			read_gemm(r);
			break;
		case PGDL_ONNX_MATMUL:
			read_matmul(r);
			break;
		case PGDL_ONNX_ADD:
			if (!onnx_read_join(r, op))
				read_add(r);
			break;
		case PGDL_ONNX_CONCAT:
			onnx_read_join(r, op);
			break;
		case PGDL_ONNX_SLICE:
			onnx_read_slice(r);
			break;
		case PGDL_ONNX_GATHER:
			onnx_read_gather(r);
			break;
		case PGDL_ONNX_CONV:
			read_conv(r);
			break;
		case PGDL_ONNX_MAXPOOL:
		case PGDL_ONNX_AVERAGEPOOL:
			read_pool(r, pgdl_onnx_op_layer(op));
			break;
		case PGDL_ONNX_GLOBALAVERAGEPOOL:
			need_image(r);
			onnx_new_layer(r, NN_GLOBAL_AVGPOOL);
			onnx_add_layer(r, NULL, 0, NULL, 0);
			break;
		case PGDL_ONNX_FLATTEN:
			read_flatten(r);
			break;
		case PGDL_ONNX_RESHAPE:
			read_reshape(r);
			break;
		case PGDL_ONNX_BATCHNORMALIZATION:
			read_batchnorm(r);
			break;
		case PGDL_ONNX_DROPOUT:
			read_dropout(r);
			break;
		case PGDL_ONNX_SOFTMAX:
		case PGDL_ONNX_LOGSOFTMAX:
			read_softmax(r);
			break;
		case PGDL_ONNX_PAD:
			read_pad(r);
			break;
		case PGDL_ONNX_LAYERNORMALIZATION:
			read_layernorm(r);
			break;
		case PGDL_ONNX_IDENTITY:
			break;
		case PGDL_ONNX_REDUCEMEAN:
			read_reduce_mean(r);
			break;
		default:
			UNSUPPORTED(r, "pgdl has no layer for this operator.");
	}
}

