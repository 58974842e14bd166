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
	if (t == NN_BATCHNORM || t == NN_DENSE || t == NN_LAYERNORM || t == NN_ADD || t == NN_CONCAT ||
		t == NN_EMBEDDING || t == NN_GRU || t == NN_SLICE || t == NN_ATTENTION ||
		t == NN_CONV1D || (t == NN_SOFTMAX && m->spec.layers[i].over_steps))
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
	return t == NN_RELU || t == NN_LEAKY_RELU || t == NN_SIGMOID || t == NN_TANH || t == NN_SOFTMAX;
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
	return i > 0 && (backward_reads_own_output(t) || t == NN_DROPOUT) && t != NN_SOFTMAX &&
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

/* A bf16 dense layer's packed operands: the largest of its three products' (dense_forward, dense_backward). */
static int64_t
dense_bf16_scratch(const NnModel *m, int i, int batch)
{
	const NnShape *s = &IN_SHAPE(m, i);
	int			units = m->spec.layers[i].units;
	int			rows = m->spec.layers[i].per_step ? batch * s->c : batch;
	int			width = m->spec.layers[i].per_step ? s->w : (int) NN_SHAPE_SIZE(*s);
	int64_t		f = nn_bf16_work_floats(rows, units, width),
				w = nn_bf16_work_floats(units, width, rows),
				x = nn_bf16_work_floats(rows, width, units);

	return f > w ? (f > x ? f : x) : (w > x ? w : x);
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
	if (m->spec.layers[i].type == NN_GRU)
		return (int64_t) batch * 4 * m->spec.layers[i].units;	/* one step's gh (or dgh) and dh */
	if (m->spec.layers[i].type == NN_ATTENTION)
	{
		/* backward: dO and dQKV of the batch, then the heads' work (backend.h) */
		int64_t		t = IN_SHAPE(m, i).c,
					d = IN_SHAPE(m, i).w;

		return (int64_t) batch * t * 4 * d + 2 * t * t;
	}
	if (m->spec.layers[i].type == NN_DENSE && m->optim.bf16)
		return dense_bf16_scratch(m, i, batch);
	if (m->spec.layers[i].type == NN_CONV1D)	/* the batch's windows, [n * out steps][features * k] */
		return (int64_t) batch * m->shape[i + 1].c * IN_SHAPE(m, i).w * m->spec.layers[i].kernel;
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
			return 2 * (int64_t) batch * NN_NORM_ROWS(IN_SHAPE(m, i));	/* each row's mean and 1/std */
		case NN_GRU:
			/* per example, step-major: input gates (3H), saved r, z, n, W_hn h + b_hn (4H), state (H) */
			return (int64_t) batch * IN_SHAPE(m, i).c * 8 * m->spec.layers[i].units;
		case NN_ATTENTION:
			/* per example: Q, K, V [T][3D], each head's attention [T][T], the heads' outputs [T][D] */
			return (int64_t) batch * IN_SHAPE(m, i).c * (4 * (int64_t) IN_SHAPE(m, i).w +
													  (int64_t) m->spec.layers[i].heads * IN_SHAPE(m, i).c);
		case NN_SOFTMAX:
			/* over_steps: each example transposed to [features, steps], and its softmax */
			return m->spec.layers[i].over_steps ? 2 * (int64_t) batch * NN_SHAPE_SIZE(IN_SHAPE(m, i)) : 0;
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
			fan_in = m->spec.layers[i].per_step ? IN_SHAPE(m, i).w : NN_SHAPE_SIZE(IN_SHAPE(m, i));
			fan_out = l->units;
			n_weights = fan_in * fan_out;
			break;
		case NN_CONV2D:
			fan_in = (int64_t) (IN_SHAPE(m, i).c / NN_GROUPS(l)) * l->kernel * l->kernel;
			fan_out = (int64_t) l->filters * l->kernel * l->kernel;
			n_weights = fan_in * l->filters;
			break;
		case NN_CONV1D:
			fan_in = (int64_t) IN_SHAPE(m, i).w * l->kernel;
			fan_out = (int64_t) l->filters * l->kernel;
			n_weights = fan_in * l->filters;
			break;
		case NN_LAYERNORM:
			for (int c = 0; c < NN_NORM_FEATURES(IN_SHAPE(m, i)); c++)
			{
				p[c] = 1.0f;
				p[NN_NORM_FEATURES(IN_SHAPE(m, i)) + c] = 0.0f;
			}
			return;
		case NN_GRU:
			{
				/* U(-1/sqrt(H), 1/sqrt(H)) for every weight and bias, as torch.nn.GRU */
				float		k = 1.0f / sqrtf((float) l->units);

				for (int64_t j = 0; j < m->param_len[i]; j++)
					p[j] = (2.0f * nn_rng_uniform(seed, i, j) - 1.0f) * k;
				return;
			}
		case NN_ATTENTION:
			{
				/*
				 * As torch.nn.MultiheadAttention: in_proj xavier-uniform over [3D, D],
				 * out_proj as nn.Linear's, U(-1/sqrt(D), 1/sqrt(D)); biases zero.
				 */
				int64_t		d = IN_SHAPE(m, i).w;
				float		in_limit = sqrtf(6.0f / (float) (4 * d)),
							out_limit = 1.0f / sqrtf((float) d);

				for (int64_t j = 0; j < 4 * d * d; j++)
					p[j] = (2.0f * nn_rng_uniform(seed, i, j) - 1.0f) * (j < 3 * d * d ? in_limit : out_limit);
				memset(p + 4 * d * d, 0, sizeof(float) * 4 * d);
				return;
			}
		case NN_EMBEDDING:
			/* N(0, 1), as torch.nn.Embedding */
			for (int64_t j = 0; j < m->param_len[i]; j++)
				p[j] = nn_rng_normal(seed, i, j);
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

/* A dense layer's rows and their width: examples and their features, or per_step every step of every example. */
static void
dense_rows(const LayerCall *c, int *rows, int *width)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);

	*rows = c->l->per_step ? c->n * s->c : c->n;
	*width = c->l->per_step ? s->w : (int) c->in_size;
}

/*
 * A dense layer's product C = op(A) op(B): in bf16 (gemm_bf16, its packed
 * operands in the scratch) when the model trains in bf16 and this is a
 * training step's, else fp32.  Inference, evaluation and explanations
 * (infer_grad) stay fp32 whatever the model trained in.
 */
static void
dense_product(const LayerCall *c, bool training, bool trans_a, bool trans_b, int m, int n, int k,
			  const float *a, int lda, const float *b, int ldb, float *out, int ldc)
{
	if (training && c->m->optim.bf16 && !c->m->infer_grad)
		c->be->gemm_bf16(trans_a, trans_b, m, n, k, a, lda, b, ldb, out, ldc, c->m->scratch);
	else
		c->be->gemm(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, out, ldc);
}

static void
dense_forward(const LayerCall *c)
{
	int			units = c->l->units;
	int			rows,
				in_size;

	dense_rows(c, &rows, &in_size);
	dense_product(c, c->training, false, true, rows, units, in_size, c->in, in_size,
				  c->p, in_size, c->out, units);
	c->be->bias_add_rows(c->out, c->p + (int64_t) in_size * units, rows, units);
}

static void
dense_backward(const LayerCall *c)
{
	int			units = c->l->units;
	int			rows,
				in_size;
	float	   *db;

	dense_rows(c, &rows, &in_size);
	db = c->dp + (int64_t) in_size * units;
	dense_product(c, true, true, false, units, in_size, rows, c->dout, units,
				  c->in, in_size, c->dp, in_size);
	c->be->fill(db, 0.0f, units);
	c->be->col_sum(c->dout, db, rows, units);
	if (c->din)
		dense_product(c, true, false, false, rows, in_size, units, c->dout, units,
					  c->p, in_size, c->din, in_size);
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

/* Pool i's windows over its input, as the backends take them */
static NnPoolGeom
pool_geom(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i),
			   *o = &c->m->shape[c->i + 1];
	NnPoolGeom	g;

	g.h = s->h;
	g.w = s->w;
	g.k = c->l->kernel;
	g.stride = pool_stride(c->l);
	g.pad = c->l->padding;
	g.pad_end = c->l->pad_end;
	g.oh = o->h;
	g.ow = o->w;
	g.count_pad = c->l->count_pad;
	return g;
}

static int32_t *
maxpool_argmax(const LayerCall *c)
{
	return (int32_t *) c->m->aux[c->i] + c->first * c->out_size;
}

static void
maxpool_forward(const LayerCall *c)
{
	NnPoolGeom	g = pool_geom(c);

	c->be->maxpool_forward(c->in, c->out, maxpool_argmax(c), (int64_t) c->n * IN_SHAPE(c->m, c->i).c, &g,
						   c->i > 0 && relu_fused_into_pool(c->m, c->i - 1));
}

static void
maxpool_backward(const LayerCall *c)
{
	NnPoolGeom	g = pool_geom(c);

	if (c->din)
		c->be->maxpool_backward(c->dout, maxpool_argmax(c), c->din, (int64_t) c->n * IN_SHAPE(c->m, c->i).c, &g);
}

static void
avgpool_forward(const LayerCall *c)
{
	NnPoolGeom	g = pool_geom(c);

	c->be->avgpool_forward(c->in, c->out, (int64_t) c->n * IN_SHAPE(c->m, c->i).c, &g);
}

static void
avgpool_backward(const LayerCall *c)
{
	NnPoolGeom	g = pool_geom(c);

	if (c->din)
		c->be->avgpool_backward(c->dout, c->din, (int64_t) c->n * IN_SHAPE(c->m, c->i).c, &g);
}

/* over each plane of an image, or over the steps of a sequence (ndim 2) */
static void
global_avgpool_forward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);

	if (s->ndim == 2)
		c->be->seq_avgpool_forward(c->in, c->out, c->n, s->c, s->w);
	else
		c->be->global_avgpool_forward(c->in, c->out, (int64_t) c->n * s->c, s->h * s->w);
}

static void
global_avgpool_backward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);

	if (c->din == NULL)
		return;
	if (s->ndim == 2)
		c->be->seq_avgpool_backward(c->dout, c->din, c->n, s->c, s->w);
	else
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
	/* the inference-mode forward was the identity */
	if (c->l->rate == 0.0f || c->m->infer_grad)
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

/*
 * In inference mode the layer is y = x * gamma * invstd + shift per channel
 * (invstd of the running variance), so dx = dy * gamma * invstd: inference's
 * forward itself on dy with a zero mean and a zero shift, both of which the
 * saved batch statistics (unused in inference) hold.  No parameter gradients.
 */
static void
batchnorm_backward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);

	if (c->m->infer_grad)
	{
		float	   *zeros = c->m->aux[c->i];

		if (c->din == NULL)
			return;
		c->be->fill(zeros, 0.0f, 2 * s->c);
		c->be->batchnorm_forward(c->dout, c->din, c->n, s->c, s->h * s->w, c->p, zeros,
								 zeros + s->c, c->m->buffers + c->m->buffer_off[c->i] + s->c,
								 c->l->eps, c->l->momentum, false, NULL);
		return;
	}
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
/* over each example's features, or each step's of a sequence (as torch.nn.LayerNorm(features)) */
static void
layernorm_forward(const LayerCall *c)
{
	int			steps = NN_NORM_ROWS(IN_SHAPE(c->m, c->i)),
				cols = NN_NORM_FEATURES(IN_SHAPE(c->m, c->i));

	c->be->layernorm_forward(c->in, c->out, c->n * steps, cols, c->p, c->p + cols, c->l->eps,
							 c->m->aux[c->i] + 2 * (int64_t) c->first * steps);
}

static void
layernorm_backward(const LayerCall *c)
{
	int			steps = NN_NORM_ROWS(IN_SHAPE(c->m, c->i)),
				cols = NN_NORM_FEATURES(IN_SHAPE(c->m, c->i));

	c->be->layernorm_backward(c->in, c->dout, c->din, c->n * steps, cols, c->p, c->dp, c->dp + cols,
							  c->m->aux[c->i] + 2 * (int64_t) c->first * steps);
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

/*
 * Multi-head self-attention, as torch.nn.MultiheadAttention(D, heads,
 * batch_first=True) called as attn(x, x, x) (with a causal mask when causal):
 *   [Q K V] = x W_in^T + b_in;  per head h, P = softmax(Q_h K_h^T / sqrt(D / heads));
 *   O_h = P V_h;  y = O W_out^T + b_out.
 * Parameters: W_in [3D, D], W_out [D, D], b_in [3D], b_out [D] (weights first).
 * aux per example: Q K V [T][3D], P [heads][T][T], O [T][D].  The whole batch
 * (or a thread's shard) at once; one small product per example and head.
 */
typedef struct AttnView
{
	int			t,
				d,
				heads,
				dh;
	float		scale;
	const float *w_in,
			   *w_out,
			   *b_in,
			   *b_out;
	float	   *qkv,
			   *p,
			   *o;
} AttnView;

static void
attn_view(const LayerCall *c, const float *params, AttnView *a)
{
	a->t = IN_SHAPE(c->m, c->i).c;
	a->d = IN_SHAPE(c->m, c->i).w;
	a->heads = c->l->heads;
	a->dh = a->d / a->heads;
	a->scale = 1.0f / sqrtf((float) a->dh);
	a->w_in = params;
	a->w_out = params + 3 * (int64_t) a->d * a->d;
	a->b_in = params + 4 * (int64_t) a->d * a->d;
	a->b_out = a->b_in + 3 * (int64_t) a->d;
	a->qkv = c->m->aux[c->i];
	a->p = a->qkv + (int64_t) c->n * a->t * 3 * a->d;
	a->o = a->p + (int64_t) c->n * a->heads * a->t * a->t;
}

/* The heads' geometry of the whole batch (or a thread's shard) */
static NnAttnGeom
attn_geom(const LayerCall *c, const AttnView *a)
{
	NnAttnGeom	g = {c->n, a->t, a->d, a->heads, a->scale, c->l->causal};

	return g;
}

static void
attention_forward(const LayerCall *c)
{
	const NnBackend *be = c->be;
	AttnView	a;
	NnAttnGeom	g;
	int64_t		rows;

	attn_view(c, c->p, &a);
	g = attn_geom(c, &a);
	rows = (int64_t) c->n * a.t;
	be->gemm(false, true, rows, 3 * a.d, a.d, 1.0f, c->in, a.d, a.w_in, a.d, 0.0f, a.qkv, 3 * a.d);
	be->bias_add_rows(a.qkv, a.b_in, rows, 3 * a.d);
	be->attention_forward(a.qkv, a.p, a.o, &g, c->m->scratch);
	be->gemm(false, true, rows, a.d, a.d, 1.0f, a.o, a.d, a.w_out, a.d, 0.0f, c->out, a.d);
	be->bias_add_rows(c->out, a.b_out, rows, a.d);
}

static void
attention_backward(const LayerCall *c)
{
	const NnBackend *be = c->be;
	AttnView	a,
				g;
	NnAttnGeom	geom;
	int64_t		rows;
	float	   *d_o = c->m->scratch,
			   *dqkv;

	attn_view(c, c->p, &a);
	attn_view(c, c->dp, &g);
	geom = attn_geom(c, &a);
	rows = (int64_t) c->n * a.t;
	dqkv = d_o + rows * a.d;
	/* the output projection */
	be->gemm(true, false, a.d, a.d, rows, 1.0f, c->dout, a.d, a.o, a.d, 0.0f, (float *) g.w_out, a.d);
	be->fill((float *) g.b_out, 0.0f, a.d);
	be->col_sum(c->dout, (float *) g.b_out, rows, a.d);
	be->gemm(false, false, rows, a.d, a.d, 1.0f, c->dout, a.d, a.w_out, a.d, 0.0f, d_o, a.d);
	/* each head: dV = P^T dO, dP = dO V^T, dS = softmax'(dP), dQ = dS K, dK = dS^T Q (scaled) */
	be->attention_backward(a.qkv, a.p, d_o, dqkv, &geom, dqkv + rows * 3 * a.d);
	/* the input projection */
	be->gemm(true, false, 3 * a.d, a.d, rows, 1.0f, dqkv, 3 * a.d, c->in, a.d, 0.0f, (float *) g.w_in, a.d);
	be->fill((float *) g.b_in, 0.0f, 3 * a.d);
	be->col_sum(dqkv, (float *) g.b_in, rows, 3 * a.d);
	if (c->din)
		be->gemm(false, false, rows, a.d, 3 * a.d, 1.0f, dqkv, 3 * a.d, a.w_in, a.d, 0.0f, c->din, a.d);
}

/*
 * slice: columns [start, start + length) of each example; its input's gradient
 * is zero outside them.  The whole batch (or a thread's shard) at once.
 */
/* The rows a slice cuts: one an example, or one a step of a sequence */
static int64_t
slice_rows(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);

	return (int64_t) c->n * (s->ndim == 2 ? s->c : 1);
}

static void
slice_forward(const LayerCall *c)
{
	int64_t		rows = slice_rows(c);
	int64_t		in_w = (int64_t) c->n * c->in_size / rows,
				out_w = (int64_t) c->n * c->out_size / rows;

	c->be->copy_rows(c->out, out_w, c->in + c->l->start, in_w, rows, out_w, false);
}

static void
slice_backward(const LayerCall *c)
{
	int64_t		rows = slice_rows(c);
	int64_t		in_w = (int64_t) c->n * c->in_size / rows,
				out_w = (int64_t) c->n * c->out_size / rows;

	if (c->din == NULL)
		return;
	c->be->fill(c->din, 0.0f, c->n * c->in_size);
	c->be->copy_rows(c->din + c->l->start, in_w, c->dout, out_w, rows, out_w, false);
}

/*
 * The whole batch (or a thread's shard) at once: the table's gradient is
 * zeroed, then each step's row added in example and step order.
 */
static void
embedding_forward(const LayerCall *c)
{
	c->be->embedding_forward(c->in, c->p, c->out, c->n * c->in_size, c->l->vocab, c->l->units);
	/* positions: an example's [steps, dim] output plus the [steps, dim] table, as a bias over its row */
	if (c->l->positions)
		c->be->bias_add_rows(c->out, c->p + (int64_t) c->l->vocab * c->l->units, c->n, (int) c->out_size);
}

static void
embedding_backward(const LayerCall *c)
{
	c->be->embedding_backward(c->in, c->dout, c->dp, c->n * c->in_size, c->l->vocab, c->l->units);
	if (c->l->positions)
	{
		float	   *dpos = c->dp + (int64_t) c->l->vocab * c->l->units;

		c->be->fill(dpos, 0.0f, c->out_size);
		c->be->col_sum(c->dout, dpos, c->n, (int) c->out_size);
	}
	if (c->din)
		c->be->fill(c->din, 0.0f, c->n * c->in_size);	/* ids have no gradient */
}

/* over the last axis: features, a sequence step's features, an image row */
static int
softmax_cols(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);

	return s->ndim == 1 ? s->c : s->w;
}

/* each of n examples [rows, cols] into [cols, rows]: nchw_to_cnhw of one example, its plane 1 */
static void
transpose_examples(const LayerCall *c, const float *src, float *dst, int rows, int cols)
{
	for (int e = 0; e < c->n; e++)
		c->be->nchw_to_cnhw(src + (int64_t) e * rows * cols, dst + (int64_t) e * rows * cols, rows, cols, 1);
}

/*
 * over_steps: a softmax over each feature's column of a sequence [steps,
 * features], as the softmax over the rows of its transpose, in aux (the
 * transposed input, then its softmax), transposed back.
 */
static void
softmax_forward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);
	float	   *t,
			   *q;
	int			cols = softmax_cols(c);

	if (!c->l->over_steps)
	{
		(c->l->log ? c->be->log_softmax_forward : c->be->softmax_forward) (c->in, c->out, c->n * c->in_size / cols,
																		   cols);
		return;
	}
	t = c->m->aux[c->i];
	q = t + (int64_t) c->n * c->in_size;
	transpose_examples(c, c->in, t, s->c, s->w);
	(c->l->log ? c->be->log_softmax_forward : c->be->softmax_forward) (t, q, (int64_t) c->n * s->w, s->c);
	transpose_examples(c, q, c->out, s->w, s->c);
}

/* over_steps: the output and its gradient transposed into aux, the gradient into din, transposed back */
static void
softmax_backward(const LayerCall *c)
{
	const NnShape *s = &IN_SHAPE(c->m, c->i);
	float	   *t,
			   *g;
	int			cols = softmax_cols(c);

	if (!c->din)
		return;
	if (!c->l->over_steps)
	{
		(c->l->log ? c->be->log_softmax_backward : c->be->softmax_backward) (c->out, c->dout, c->din,
																			  c->n * c->in_size / cols, cols);
		return;
	}
	t = c->m->aux[c->i];
	g = t + (int64_t) c->n * c->in_size;
	transpose_examples(c, c->out, t, s->c, s->w);
	transpose_examples(c, c->dout, g, s->c, s->w);
	(c->l->log ? c->be->log_softmax_backward : c->be->softmax_backward) (t, g, c->din, (int64_t) c->n * s->w, s->c);
	transpose_examples(c, c->din, t, s->w, s->c);
	c->be->copy(c->din, t, sizeof(float) * c->n * c->in_size);
}

/*
 * GRU, as torch.nn.GRU (gates r, z, n; both biases; h0 = 0):
 *   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z likewise,
 *   n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) n + z h.
 * Parameters W_ih [3H, I], W_hh [3H, H], b_ih, b_hh, in torch's order.  The
 * input products of every step are one gemm; then a gemm and the gates per
 * step over the batch.  aux holds, per example and step, the input gates
 * (their gradient in backward), the saved gates and the state.  The whole
 * batch (or a thread's shard) at once: see nn_layer_chunkable.
 */
typedef struct GruView
{
	int			steps,
				in,
				units;
	int64_t		ex;				/* aux floats per example */
	const float *w_ih,
			   *w_hh,
			   *b_ih,
			   *b_hh;
	float	   *gi,				/* [n][steps][3H] */
			   *saved,			/* [n][steps][4H] */
			   *hs;				/* [n][steps][H] */
} GruView;

static void
gru_view(const LayerCall *c, const float *p, GruView *g)
{
	int64_t		h3;

	g->steps = IN_SHAPE(c->m, c->i).c;
	g->in = IN_SHAPE(c->m, c->i).w;
	g->units = c->l->units;
	h3 = 3 * (int64_t) g->units;
	g->ex = (int64_t) g->steps * 8 * g->units;
	g->w_ih = p;
	g->w_hh = p + h3 * g->in;
	g->b_ih = g->w_hh + h3 * g->units;
	g->b_hh = g->b_ih + h3;
	g->gi = c->m->aux[c->i];
	g->saved = g->gi + c->n * (int64_t) g->steps * h3;
	g->hs = g->saved + c->n * (int64_t) g->steps * 4 * g->units;
}

static void
gru_forward(const LayerCall *c)
{
	const NnBackend *be = c->be;
	GruView		g;
	int			h = c->l->units,
				h3 = 3 * h;
	float	   *gh = c->m->scratch;

	gru_view(c, c->p, &g);
	be->gemm(false, true, c->n * g.steps, h3, g.in, 1.0f, c->in, g.in, g.w_ih, g.in, 0.0f, g.gi, h3);
	be->bias_add_rows(g.gi, g.b_ih, c->n * g.steps, h3);
	for (int t = 0; t < g.steps; t++)
	{
		const float *hprev = t > 0 ? g.hs + (int64_t) (t - 1) * h : NULL;
		float	   *out = NULL;
		int			out_stride = 0;

		if (t > 0)
			be->gemm(false, true, c->n, h3, h, 1.0f, hprev, g.steps * h, g.w_hh, h, 0.0f, gh, h3);
		else
			be->fill(gh, 0.0f, (int64_t) c->n * h3);
		be->bias_add_rows(gh, g.b_hh, c->n, h3);
		if (c->l->return_sequences)
		{
			out = c->out + (int64_t) t * h;
			out_stride = g.steps * h;
		}
		else if (t == g.steps - 1)
		{
			out = c->out;
			out_stride = h;
		}
		be->gru_gates_forward(g.gi + (int64_t) t * h3, g.steps * h3, gh, hprev, g.steps * h,
							  g.hs + (int64_t) t * h, g.steps * h, g.saved + (int64_t) t * 4 * h,
							  g.steps * 4 * h, out, out_stride, c->n, h);
	}
}

static void
gru_backward(const LayerCall *c)
{
	const NnBackend *be = c->be;
	GruView		g;
	GruView		dg;
	int			h = c->l->units,
				h3 = 3 * h;
	float	   *dgh = c->m->scratch,
			   *dh = dgh + (int64_t) c->n * h3;

	gru_view(c, c->p, &g);
	gru_view(c, c->dp, &dg);
	be->fill(dh, 0.0f, (int64_t) c->n * h);
	be->fill((float *) dg.w_hh, 0.0f, (int64_t) h3 * h);
	be->fill((float *) dg.b_hh, 0.0f, h3);
	for (int t = g.steps - 1; t >= 0; t--)
	{
		const float *hprev = t > 0 ? g.hs + (int64_t) (t - 1) * h : NULL;
		const float *dout = NULL;
		int			dout_stride = 0;

		if (c->l->return_sequences)
		{
			dout = c->dout + (int64_t) t * h;
			dout_stride = g.steps * h;
		}
		else if (t == g.steps - 1)
		{
			dout = c->dout;
			dout_stride = h;
		}
		/* dh: the later steps' gradient plus this step's output's; out: dgi, dgh, and dh * z into dh */
		be->gru_gates_backward(dh, dout, dout_stride, hprev, g.steps * h, g.saved + (int64_t) t * 4 * h,
							   g.steps * 4 * h, g.gi + (int64_t) t * h3, g.steps * h3, dgh, c->n, h);
		if (t > 0)
		{
			be->gemm(false, false, c->n, h, h3, 1.0f, dgh, h3, g.w_hh, h, 1.0f, dh, h);
			be->gemm(true, false, h3, h, c->n, 1.0f, dgh, h3, hprev, g.steps * h, 1.0f,
					 (float *) dg.w_hh, h);
		}
		be->col_sum(dgh, (float *) dg.b_hh, c->n, h3);
	}
	/* g.gi now holds the input gates' gradient, [n * steps][3H] */
	be->gemm(true, false, h3, g.in, c->n * g.steps, 1.0f, g.gi, h3, c->in, g.in, 0.0f,
			 (float *) dg.w_ih, g.in);
	be->fill((float *) dg.b_ih, 0.0f, h3);
	be->col_sum(g.gi, (float *) dg.b_ih, c->n * g.steps, h3);
	if (c->din)
		be->gemm(false, false, c->n * g.steps, g.in, h3, 1.0f, g.gi, h3, g.w_ih, g.in, 0.0f, c->din, g.in);
}

/*
 * conv1d over a sequence [steps][features], as torch.nn.Conv1d on its
 * transpose: weight [filters][features][k], bias.  The batch's windows are
 * unfolded into rows (one per output step, features-major as the weight), so
 * forward, the weight gradient and the input gradient are one gemm each.
 */
static void
conv1d_geom(const LayerCall *c, NnConvGeom *g)
{
	g->c = IN_SHAPE(c->m, c->i).w;
	g->h = 1;
	g->w = IN_SHAPE(c->m, c->i).c;	/* steps */
	g->k = c->l->kernel;
	g->stride = c->l->stride;
	g->pad = c->l->padding;
	g->oh = 1;
	g->ow = c->m->shape[c->i + 1].c;
}

static void
conv1d_forward(const LayerCall *c)
{
	NnConvGeom	g;
	int			kk,
				rows;

	conv1d_geom(c, &g);
	kk = g.c * g.k;
	rows = c->n * g.ow;
	c->be->seq_unfold(c->in, c->n, &g, c->m->scratch);
	c->be->gemm(false, true, rows, c->l->filters, kk, 1.0f, c->m->scratch, kk, c->p, kk, 0.0f,
				c->out, c->l->filters);
	c->be->bias_add_rows(c->out, c->p + (int64_t) kk * c->l->filters, rows, c->l->filters);
}

static void
conv1d_backward(const LayerCall *c)
{
	NnConvGeom	g;
	int			kk,
				rows,
				f = c->l->filters;
	float	   *db;

	conv1d_geom(c, &g);
	kk = g.c * g.k;
	rows = c->n * g.ow;
	db = c->dp + (int64_t) kk * f;
	c->be->seq_unfold(c->in, c->n, &g, c->m->scratch);
	c->be->gemm(true, false, f, kk, rows, 1.0f, c->dout, f, c->m->scratch, kk, 0.0f, c->dp, kk);
	c->be->fill(db, 0.0f, f);
	c->be->col_sum(c->dout, db, rows, f);
	if (c->din)
	{
		c->be->gemm(false, false, rows, kk, f, 1.0f, c->dout, f, c->p, kk, 0.0f, c->m->scratch, kk);
		c->be->seq_fold(c->m->scratch, c->n, &g, c->din);
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
	[NN_EMBEDDING] = {embedding_forward, embedding_backward},
	[NN_SOFTMAX] = {softmax_forward, softmax_backward},
	[NN_GRU] = {gru_forward, gru_backward},
	[NN_SLICE] = {slice_forward, slice_backward},
	[NN_ATTENTION] = {attention_forward, attention_backward},
	[NN_CONV1D] = {conv1d_forward, conv1d_backward},
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
