/*
 * layers.c -- forward and backward of each layer type, in the order the math is
 * written: forward(out <- in, params), backward(din, dparams <- dout, in, out).
 *
 * Every parameter gradient is overwritten (not accumulated) by the one layer
 * that owns it, so nothing needs zeroing between steps.  din may be NULL when
 * nobody needs the gradient with respect to the layer's input.
 *
 * A call covers examples [first, first + n) of the batch: `in` and `din` point
 * at example `first`, and the layer finds its own output, gradient and saved
 * state at the same offset.  Only batchnorm needs the whole batch at once; the
 * others may be called chunk by chunk (see model.c), in example order.
 */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "nn_internal.h"

#define IN_SHAPE(m, i) NN_IN_SHAPE((m)->shape, &(m)->spec, (i))

static void
conv_geom(const NnModel *m, int i, NnConvGeom *g)
{
	const NnLayerSpec *l = &m->spec.layers[i];

	g->c = IN_SHAPE(m, i).c;
	g->h = IN_SHAPE(m, i).h;
	g->w = IN_SHAPE(m, i).w;
	g->k = l->kernel;
	g->stride = l->stride;
	g->pad = l->padding;
	g->oh = m->shape[i + 1].h;
	g->ow = m->shape[i + 1].w;
}

static int
pool_stride(const NnLayerSpec *l)
{
	return l->stride > 0 ? l->stride : l->kernel;
}

int
nn_conv_chunk(const NnModel *m, int i, int batch)
{
	int64_t		per_image = (int64_t) IN_SHAPE(m, i).c * m->spec.layers[i].kernel *
		m->spec.layers[i].kernel * m->shape[i + 1].h * m->shape[i + 1].w;
	int64_t		chunk = NN_CONV_CHUNK_FLOATS / per_image;

	if (chunk < 1)
		chunk = 1;
	if (chunk > batch)
		chunk = batch;
	return (int) chunk;
}

/* Layers that treat examples independently and are cheap enough to run a few images at a time. */
bool
nn_layer_chunkable(const NnModel *m, int i)
{
	NnLayerType t = m->spec.layers[i].type;

	/*
	 * batchnorm needs the batch's statistics; dense wants the whole batch for its
	 * gemm; layernorm's parameter gradients are sums over the whole batch
	 */
	if (t == NN_BATCHNORM || t == NN_DENSE || t == NN_LAYERNORM || t == NN_ADD || t == NN_CONCAT)
		return false;

	/*
	 * graph form: chunks pass gradients at the front of their buffers, so a
	 * run's layers read an output nobody else reads (see nn_backward_layers)
	 */
	return m->consumers[nn_layer_src(&m->spec, i, 0) + 1] == 1;
}

static bool
backward_reads_own_output(NnLayerType t)
{
	return t == NN_RELU || t == NN_LEAKY_RELU || t == NN_SIGMOID || t == NN_TANH;
}

/*
 * Elementwise layers overwrite their input when the layer before them does not
 * need its own output in backward (and the input is not the caller's data):
 * one buffer fewer to stream through memory, in both directions.
 */
bool
nn_layer_in_place(const NnModel *m, int i)
{
	NnLayerType t = m->spec.layers[i].type;

	/* graph form: only over the layer before, when nothing else reads its output */
	return i > 0 && (backward_reads_own_output(t) || t == NN_DROPOUT) &&
		nn_layer_src(&m->spec, i, 0) == i - 1 && m->consumers[i] == 1 &&
		!backward_reads_own_output(m->spec.layers[i - 1].type);
}

/*
 * Two fusions for the most common CNN pattern, conv2d -> relu -> maxpool2d,
 * each saving a pass over the largest activations: the convolution applies the
 * relu as it adds its bias, and max pooling drops the gradient of windows whose
 * maximum is not positive (exactly those where the relu would have blocked the
 * element the maximum came from), so the relu's backward has nothing left to do.  Only for an in-place relu, whose input and output,
 * and their gradients, are the same buffers.
 */
static bool
relu_fused_into_conv(const NnModel *m, int i)
{
	return m->spec.layers[i].type == NN_RELU && nn_layer_in_place(m, i) &&
		m->spec.layers[i - 1].type == NN_CONV2D;
}

/*
 * Not when the relu starts a run of chunked layers (after batchnorm or dense):
 * backward then passes the pool's gradient at the front of its buffer and
 * expects the relu to move it to the chunk's place, which a fused relu would
 * not do (the layer before would read memory nobody wrote).
 */
static bool
relu_fused_into_pool(const NnModel *m, int i)
{
	return m->spec.layers[i].type == NN_RELU && nn_layer_in_place(m, i) &&
		nn_layer_chunkable(m, i - 1) &&
		i + 1 < m->spec.n_layers && m->spec.layers[i + 1].type == NN_MAXPOOL2D &&
		nn_layer_src(&m->spec, i + 1, 0) == i && m->consumers[i + 1] == 1;
}

/*
 * Whether convolution i computes its weight gradient transposed, columns times
 * output gradient, into its aux buffer over the whole batch, and transposes it
 * into place at the end: with more column rows (c * k * k) than filters, that
 * is, for all but first layers, OpenBLAS runs the transposed product 10-25%
 * faster (the longer side as M).
 */
static bool
conv_weight_grad_transposed(const NnModel *m, int i)
{
	const NnLayerSpec *l = &m->spec.layers[i];

	return NN_GROUPS(l) == 1 && IN_SHAPE(m, i).c * l->kernel * l->kernel > l->filters;
}

int64_t
nn_layer_scratch_floats(const NnModel *m, int i, int batch)
{
	if (m->spec.layers[i].type == NN_CONV2D)
	{
		int64_t		chunk = nn_conv_chunk(m, i, batch);
		int64_t		plane = (int64_t) m->shape[i + 1].h * m->shape[i + 1].w;
		int64_t		kk = (int64_t) IN_SHAPE(m, i).c * m->spec.layers[i].kernel * m->spec.layers[i].kernel;

		return chunk * plane * (kk + m->shape[i + 1].c);
	}
	return 0;
}

int64_t
nn_layer_aux_floats(const NnModel *m, int i, int batch)
{
	switch (m->spec.layers[i].type)
	{
		case NN_MAXPOOL2D:
			return (int64_t) batch * NN_SHAPE_SIZE(m->shape[i + 1]);	/* int32 argmax */
		case NN_BATCHNORM:
			return 2 * (int64_t) IN_SHAPE(m, i).c;
		case NN_LAYERNORM:
			return 2 * (int64_t) batch;	/* each example's mean and 1/std */
		case NN_CONV2D:
			return conv_weight_grad_transposed(m, i) ?
				(int64_t) IN_SHAPE(m, i).c * m->spec.layers[i].kernel * m->spec.layers[i].kernel *
				m->spec.layers[i].filters : 0;
		default:
			return 0;
	}
}

/* A new model's initial values; nn_model_create runs it on a CPU model (host memory). */
void
nn_layer_init_params(NnModel *m, int i)
{
	const NnLayerSpec *l = &m->spec.layers[i];
	float	   *p = m->params + m->param_off[i];
	int64_t		fan_in,
				fan_out,
				n_weights;
	uint64_t	seed = m->seed ^ NN_RNG_INIT_SALT;

	switch (l->type)
	{
		case NN_DENSE:
			fan_in = NN_SHAPE_SIZE(IN_SHAPE(m, i));
			fan_out = l->units;
			n_weights = fan_in * fan_out;
			break;
		case NN_CONV2D:
			fan_in = (int64_t) (IN_SHAPE(m, i).c / NN_GROUPS(l)) * l->kernel * l->kernel;
			fan_out = (int64_t) l->filters * l->kernel * l->kernel;
			n_weights = fan_in * l->filters;
			break;
		case NN_LAYERNORM:
			for (int c = 0; c < IN_SHAPE(m, i).c; c++)
			{
				p[c] = 1.0f;
				p[IN_SHAPE(m, i).c + c] = 0.0f;
			}
			return;
		case NN_BATCHNORM:
			for (int c = 0; c < IN_SHAPE(m, i).c; c++)
			{
				p[c] = 1.0f;
				p[IN_SHAPE(m, i).c + c] = 0.0f;
				m->buffers[m->buffer_off[i] + c] = 0.0f;
				m->buffers[m->buffer_off[i] + IN_SHAPE(m, i).c + c] = 1.0f;
			}
			return;
		default:
			return;
	}

	if (l->init == NN_INIT_GLOROT)
	{
		float		limit = sqrtf(6.0f / (float) (fan_in + fan_out));

		for (int64_t j = 0; j < n_weights; j++)
			p[j] = (2.0f * nn_rng_uniform(seed, i, j) - 1.0f) * limit;
	}
	else
	{
		float		std = sqrtf(2.0f / (float) fan_in);

		for (int64_t j = 0; j < n_weights; j++)
			p[j] = std * nn_rng_normal(seed, i, j);
	}
	memset(p + n_weights, 0, sizeof(float) * (m->param_len[i] - n_weights));
}

/*
 * One call of a layer on examples [first, first + n) of the batch, with every
 * pointer already at example first.  Backward reads dout and fills dp and din
 * (NULL when nobody needs the input's gradient).  The memory is the backend's
 * (device memory for a device backend): everything here goes through the table.
 */
typedef struct LayerCall
{
	NnModel    *m;
	int			i;				/* the layer */
	const NnLayerSpec *l;
	const NnBackend *be;
	int			first,
				n;
	int64_t		in_size,		/* floats per example */
				out_size;
	bool		training;
	const float *p;				/* parameters */
	float	   *dp;				/* their gradients */
	const float *in;
	float	   *out;
	const float *dout;
	float	   *din;
} LayerCall;

static void
dense_forward(const LayerCall *c)
{
	int			units = c->l->units;
	int			in_size = (int) c->in_size;

	c->be->gemm(false, true, c->n, units, in_size, 1.0f, c->in, in_size,
				c->p, in_size, 0.0f, c->out, units);
	c->be->bias_add_rows(c->out, c->p + c->in_size * units, c->n, units);
}

static void
dense_backward(const LayerCall *c)
{
	int			units = c->l->units;
	int			in_size = (int) c->in_size;
	float	   *db = c->dp + c->in_size * units;

	c->be->gemm(true, false, units, in_size, c->n, 1.0f, c->dout, units,
				c->in, in_size, 0.0f, c->dp, in_size);
	c->be->fill(db, 0.0f, units);
	c->be->col_sum(c->dout, db, c->n, units);
	if (c->din)
		c->be->gemm(false, false, c->n, in_size, units, 1.0f, c->dout, units,
					c->p, in_size, 0.0f, c->din, in_size);
}

/*
 * One image at a time: the gemm writes NCHW directly, and one image's columns
 * stay in L1/L2 (measured faster than batching images into one wider gemm and
 * transposing its output).
 */
static void
conv_forward(const LayerCall *c)
{
	const NnBackend *be = c->be;
	NnConvGeom	g;
	int			plane,
				kk;
	int			filters = c->l->filters;
	int			groups = NN_GROUPS(c->l);
	int			fg = filters / groups;
	int64_t		in_group;
	const float *bias;
	bool		relu = c->i + 1 < c->m->spec.n_layers && relu_fused_into_conv(c->m, c->i + 1);

	conv_geom(c->m, c->i, &g);
	plane = g.oh * g.ow;
	in_group = (int64_t) (g.c / groups) * g.h * g.w;
	g.c /= groups;				/* each group's gemm sees its own channels */
	kk = g.c * g.k * g.k;
	bias = c->p + (int64_t) kk * filters;
	for (int img = 0; img < c->n; img++)
	{
		float	   *out = c->out + img * c->out_size;

		for (int grp = 0; grp < groups; grp++)
		{
			be->im2col(c->in + img * c->in_size + grp * in_group, 1, &g, c->m->scratch);
			be->gemm(false, false, fg, plane, kk, 1.0f, c->p + (int64_t) grp * fg * kk, kk,
					 c->m->scratch, plane, 0.0f, out + (int64_t) grp * fg * plane, plane);
		}
		if (relu)
			be->bias_relu_planes(out, bias, 1, filters, plane);
		else
			be->bias_add_planes(out, bias, 1, filters, plane);
	}
}

/*
 * Grouped (and depthwise) convolution's backward: an image and a group at a
 * time, each group's filters against its own channels' columns; the weight
 * gradient accumulates over images and calls as conv_backward's does.
 */
static void
conv_backward_grouped(const LayerCall *c)
{
	const NnBackend *be = c->be;
	NnConvGeom	g;
	int			filters = c->l->filters;
	int			groups = NN_GROUPS(c->l);
	int			fg = filters / groups;
	int			plane,
				kk;
	int64_t		in_group;
	float	   *col = c->m->scratch;

	conv_geom(c->m, c->i, &g);
	plane = g.oh * g.ow;
	in_group = (int64_t) (g.c / groups) * g.h * g.w;
	g.c /= groups;
	kk = g.c * g.k * g.k;
	if (c->din)
		be->fill(c->din, 0.0f, c->n * c->in_size);
	for (int s = 0; s < c->n; s++)
		for (int grp = 0; grp < groups; grp++)
		{
			const float *dy = c->dout + s * c->out_size + (int64_t) grp * fg * plane;
			const float *w = c->p + (int64_t) grp * fg * kk;

			be->im2col(c->in + s * c->in_size + grp * in_group, 1, &g, col);
			be->gemm(false, true, fg, kk, plane, 1.0f, dy, plane, col, plane,
					 c->first + s == 0 ? 0.0f : 1.0f, c->dp + (int64_t) grp * fg * kk, kk);
			if (c->din)
			{
				be->gemm(true, false, kk, plane, fg, 1.0f, w, kk, dy, plane, 0.0f, col, plane);
				be->col2im(col, 1, &g, c->din + s * c->in_size + grp * in_group);
			}
		}
	if (c->first == 0)
		be->fill(c->dp + (int64_t) kk * filters, 0.0f, filters);
	be->plane_sum(c->dout, c->dp + (int64_t) kk * filters, c->n, filters, plane);
}

/*
 * A chunk of images at a time (nn_conv_chunk): their output gradients laid out
 * channel-major make one matrix against the chunk's columns.  The weight
 * gradient accumulates over chunks and calls; the first of the batch starts it.
 * Or, transposed (conv_weight_grad_transposed), in aux until the batch's last
 * call, which puts it in place.
 */
static void
conv_backward(const LayerCall *c)
{
	const NnBackend *be = c->be;
	NnConvGeom	g;
	int			chunk = nn_conv_chunk(c->m, c->i, c->n);
	int			filters = c->l->filters;
	int			plane,
				kk;
	float	   *col = c->m->scratch;
	float	   *tmp,
			   *dwt = c->m->aux[c->i];
	bool		transposed = conv_weight_grad_transposed(c->m, c->i);

	if (NN_GROUPS(c->l) > 1)
	{
		conv_backward_grouped(c);
		return;
	}
	conv_geom(c->m, c->i, &g);
	plane = g.oh * g.ow;
	kk = g.c * g.k * g.k;
	tmp = col + (int64_t) kk * chunk * plane;
	if (c->din)
		be->fill(c->din, 0.0f, c->n * c->in_size);
	for (int s = 0; s < c->n; s += chunk)
	{
		int			k = c->n - s < chunk ? c->n - s : chunk;
		const float *dy = c->dout + s * c->out_size;

		if (k > 1)
		{
			be->nchw_to_cnhw(dy, tmp, k, filters, plane);
			dy = tmp;
		}
		be->im2col(c->in + s * c->in_size, k, &g, col);
		if (transposed)
			be->gemm(false, true, kk, filters, k * plane, 1.0f, col, k * plane,
					 dy, k * plane, c->first + s == 0 ? 0.0f : 1.0f, dwt, filters);
		else
			be->gemm(false, true, filters, kk, k * plane, 1.0f, dy, k * plane,
					 col, k * plane, c->first + s == 0 ? 0.0f : 1.0f, c->dp, kk);
		if (c->din)
		{
			be->gemm(true, false, kk, k * plane, filters, 1.0f, c->p, kk,
					 dy, k * plane, 0.0f, col, k * plane);
			be->col2im(col, k, &g, c->din + s * c->in_size);
		}
	}
	if (transposed && c->first + c->n == c->m->last_n)
		be->nchw_to_cnhw(dwt, c->dp, kk, filters, 1);	/* [kk][filters] to [filters][kk] */
	if (c->first == 0)
		be->fill(c->dp + (int64_t) kk * filters, 0.0f, filters);
	be->plane_sum(c->dout, c->dp + (int64_t) kk * filters, c->n, filters, plane);
}

static int32_t *
maxpool_argmax(const LayerCall *c)
{
	return (int32_t *) c->m->aux[c->i] + c->first * c->out_size;
}

static void
maxpool_forward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i),
			   *o = &c->m->shape[c->i + 1];

	c->be->maxpool_forward(c->in, c->out, maxpool_argmax(c), (int64_t) c->n * s->c,
						   s->h, s->w, c->l->kernel, pool_stride(c->l), o->h, o->w,
						   c->i > 0 && relu_fused_into_pool(c->m, c->i - 1));
}

static void
maxpool_backward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i),
			   *o = &c->m->shape[c->i + 1];

	if (c->din)
		c->be->maxpool_backward(c->dout, maxpool_argmax(c), c->din, (int64_t) c->n * s->c,
								s->h, s->w, c->l->kernel, pool_stride(c->l), o->h, o->w);
}

static void
avgpool_forward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i),
			   *o = &c->m->shape[c->i + 1];

	c->be->avgpool_forward(c->in, c->out, (int64_t) c->n * s->c, s->h, s->w,
						   c->l->kernel, pool_stride(c->l), o->h, o->w);
}

static void
avgpool_backward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i),
			   *o = &c->m->shape[c->i + 1];

	if (c->din)
		c->be->avgpool_backward(c->dout, c->din, (int64_t) c->n * s->c, s->h, s->w,
								c->l->kernel, pool_stride(c->l), o->h, o->w);
}

static void
global_avgpool_forward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);

	c->be->global_avgpool_forward(c->in, c->out, (int64_t) c->n * s->c, s->h * s->w);
}

static void
global_avgpool_backward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);

	if (c->din)
		c->be->global_avgpool_backward(c->dout, c->din, (int64_t) c->n * s->c, s->h * s->w);
}

static void
flatten_forward(const LayerCall *c)
{
	c->be->copy(c->out, c->in, sizeof(float) * c->n * c->out_size);
}

static void
flatten_backward(const LayerCall *c)
{
	if (c->din)
		c->be->copy(c->din, c->dout, sizeof(float) * c->n * c->out_size);
}

/* relu, leaky_relu, sigmoid, tanh */
static void
activation_forward(const LayerCall *c)
{
	int64_t		count = c->n * c->out_size;

	switch (c->l->type)
	{
		case NN_RELU:
			if (!relu_fused_into_conv(c->m, c->i))
				c->be->relu_forward(c->in, c->out, count);
			break;
		case NN_LEAKY_RELU:
			c->be->leaky_relu_forward(c->in, c->out, count, c->l->alpha);
			break;
		case NN_SIGMOID:
			c->be->sigmoid_forward(c->in, c->out, count);
			break;
		default:
			c->be->tanh_forward(c->in, c->out, count);
			break;
	}
}

static void
activation_backward(const LayerCall *c)
{
	int64_t		count = c->n * c->out_size;

	if (c->din == NULL)
		return;
	switch (c->l->type)
	{
		case NN_RELU:
			if (!relu_fused_into_pool(c->m, c->i))
				c->be->relu_backward(c->out, c->dout, c->din, count);
			break;
		case NN_LEAKY_RELU:
			c->be->leaky_relu_backward(c->out, c->dout, c->din, count, c->l->alpha);
			break;
		case NN_SIGMOID:
			c->be->sigmoid_backward(c->out, c->dout, c->din, count);
			break;
		default:
			c->be->tanh_backward(c->out, c->dout, c->din, count);
			break;
	}
}

/*
 * The keep-mask is a function of (seed, step, layer, example offset), so that
 * backward recomputes it from the same counters and a chunk, or a thread's
 * shard of the batch (shard_first), draws what the whole batch would.
 */
#define DROPOUT_SEED(c)		((c)->m->seed ^ NN_RNG_DROPOUT_SALT)
#define DROPOUT_STREAM(c)	((uint64_t) (c)->m->step * NN_MAX_LAYERS + (c)->i)
#define DROPOUT_COUNTER(c)	((uint64_t) (((c)->first + (c)->m->shard_first) * (c)->out_size))

static void
dropout_forward(const LayerCall *c)
{
	int64_t		count = c->n * c->out_size;

	if (!c->training || c->l->rate == 0.0f)
	{
		if (c->out != c->in)
			c->be->copy(c->out, c->in, sizeof(float) * count);
		return;
	}
	c->be->dropout_forward(c->in, c->out, count, c->l->rate,
						   DROPOUT_SEED(c), DROPOUT_STREAM(c), DROPOUT_COUNTER(c));
}

static void
dropout_backward(const LayerCall *c)
{
	int64_t		count = c->n * c->out_size;

	if (c->din == NULL)
		return;
	if (c->l->rate == 0.0f)
	{
		if (c->din != c->dout)
			c->be->copy(c->din, c->dout, sizeof(float) * count);
		return;
	}
	c->be->dropout_backward(c->dout, c->din, count, c->l->rate,
							DROPOUT_SEED(c), DROPOUT_STREAM(c), DROPOUT_COUNTER(c));
}

/* Only ever called on the whole batch (first == 0): see nn_layer_chunkable. */
static void
batchnorm_forward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);
	float	   *running = c->m->buffers + c->m->buffer_off[c->i];

	c->be->batchnorm_forward(c->in, c->out, c->n, s->c, s->h * s->w, c->p, c->p + s->c,
							 running, running + s->c, c->l->eps, c->l->momentum,
							 c->training, c->m->aux[c->i]);
}

static void
batchnorm_backward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);

	c->be->batchnorm_backward(c->in, c->dout, c->din, c->n, s->c, s->h * s->w,
							  c->p, c->dp, c->dp + s->c, c->m->aux[c->i]);
}

/* GELU's backward reads its input, not its output: it never runs in place. */
static void
gelu_forward(const LayerCall *c)
{
	c->be->gelu_forward(c->in, c->out, c->n * c->out_size);
}

static void
gelu_backward(const LayerCall *c)
{
	if (c->din)
		c->be->gelu_backward(c->in, c->dout, c->din, c->n * c->out_size);
}

/* Per example over its features; the whole batch (or a thread's shard) at once: see nn_layer_chunkable. */
static void
layernorm_forward(const LayerCall *c)
{
	int			cols = (int) c->in_size;

	c->be->layernorm_forward(c->in, c->out, c->n, cols, c->p, c->p + cols, c->l->eps,
							 c->m->aux[c->i] + 2 * (int64_t) c->first);
}

static void
layernorm_backward(const LayerCall *c)
{
	int			cols = (int) c->in_size;

	c->be->layernorm_backward(c->in, c->dout, c->din, c->n, cols, c->p, c->dp, c->dp + cols,
							  c->m->aux[c->i] + 2 * (int64_t) c->first);
}

/*
 * add and concat (graph form): never chunked, so first is 0 (or a thread's
 * shard, whose buffers start at it).  Backward writes each input's gradient,
 * or adds to it where a later reader of that output wrote it already.
 */
static void
add_forward(const LayerCall *c)
{
	int64_t		count = c->n * c->out_size;

	c->be->copy_rows(c->out, 0, c->in, 0, 1, count, false);
	for (int k = 1; k < nn_layer_n_inputs(&c->m->spec, c->i); k++)
		c->be->copy_rows(c->out, 0, nn_layer_input_k(c->m, c->i, k), 0, 1, count, true);
}

static void
add_backward(const LayerCall *c)
{
	int64_t		count = c->n * c->out_size;

	for (int k = 0; k < nn_layer_n_inputs(&c->m->spec, c->i); k++)
	{
		float	   *din = nn_layer_din_k(c->m, c->i, k);

		if (din)
			c->be->copy_rows(din, 0, c->dout, 0, 1, count, (c->m->grad_add[c->i] >> k) & 1);
	}
}

/* Each input's floats of one example, one after another: channels in NCHW, features when flat. */
static int64_t
concat_size(const LayerCall *c, int k)
{
	return NN_SHAPE_SIZE(c->m->shape[nn_layer_src(&c->m->spec, c->i, k) + 1]);
}

static void
concat_forward(const LayerCall *c)
{
	int64_t		off = 0;

	for (int k = 0; k < nn_layer_n_inputs(&c->m->spec, c->i); k++)
	{
		int64_t		size = concat_size(c, k);

		c->be->copy_rows(c->out + off, c->out_size, nn_layer_input_k(c->m, c->i, k), size, c->n, size, false);
		off += size;
	}
}

static void
concat_backward(const LayerCall *c)
{
	int64_t		off = 0;

	for (int k = 0; k < nn_layer_n_inputs(&c->m->spec, c->i); k++)
	{
		int64_t		size = concat_size(c, k);
		float	   *din = nn_layer_din_k(c->m, c->i, k);

		if (din)
			c->be->copy_rows(din, size, c->dout + off, c->out_size, c->n, size,
							 (c->m->grad_add[c->i] >> k) & 1);
		off += size;
	}
}

static void
layer_call(LayerCall *c, NnModel *m, int i, const float *in, int first, int n)
{
	c->m = m;
	c->i = i;
	c->l = &m->spec.layers[i];
	c->be = m->be;
	c->first = first;
	c->n = n;
	c->in_size = NN_SHAPE_SIZE(IN_SHAPE(m, i));
	c->out_size = NN_SHAPE_SIZE(m->shape[i + 1]);
	c->training = false;
	c->p = m->params + m->param_off[i];
	c->dp = m->grads + m->param_off[i];
	c->in = in;
	c->out = m->out[i] + first * c->out_size;
	c->dout = m->dout[i] + first * c->out_size;
	c->din = NULL;
}

typedef void (*LayerFn) (const LayerCall *c);

/* Each layer type's pair; a type without parameters or state still has both. */
static const struct
{
	LayerFn		forward,
				backward;
}			layer_fns[NN_LAYER_TYPE_MAX] = {
	[NN_DENSE] = {dense_forward, dense_backward},
	[NN_CONV2D] = {conv_forward, conv_backward},
	[NN_MAXPOOL2D] = {maxpool_forward, maxpool_backward},
	[NN_AVGPOOL2D] = {avgpool_forward, avgpool_backward},
	[NN_GLOBAL_AVGPOOL] = {global_avgpool_forward, global_avgpool_backward},
	[NN_FLATTEN] = {flatten_forward, flatten_backward},
	[NN_RELU] = {activation_forward, activation_backward},
	[NN_LEAKY_RELU] = {activation_forward, activation_backward},
	[NN_SIGMOID] = {activation_forward, activation_backward},
	[NN_TANH] = {activation_forward, activation_backward},
	[NN_DROPOUT] = {dropout_forward, dropout_backward},
	[NN_BATCHNORM] = {batchnorm_forward, batchnorm_backward},
	[NN_GELU] = {gelu_forward, gelu_backward},
	[NN_LAYERNORM] = {layernorm_forward, layernorm_backward},
	[NN_ADD] = {add_forward, add_backward},
	[NN_CONCAT] = {concat_forward, concat_backward},
};

void
nn_layer_forward(NnModel *m, int i, const float *in, int first, int n, bool training)
{
	LayerCall	c;

	layer_call(&c, m, i, in, first, n);
	c.training = training;
	layer_fns[c.l->type].forward(&c);
}

void
nn_layer_backward(NnModel *m, int i, const float *in, int first, int n, float *din, bool dout_front)
{
	LayerCall	c;

	layer_call(&c, m, i, in, first, n);
	if (dout_front)
		c.dout = m->dout[i];
	c.din = din;
	layer_fns[c.l->type].backward(&c);
}
