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
#include "cpu/cpu.h"
#include "nn_internal.h"

static void
conv_geom(const NnModel *m, int i, NnConvGeom *g)
{
	const NnLayerSpec *l = &m->spec.layers[i];

	g->c = m->shape[i].c;
	g->h = m->shape[i].h;
	g->w = m->shape[i].w;
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
	int64_t		per_image = (int64_t) m->shape[i].c * m->spec.layers[i].kernel *
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

	/* batchnorm needs the batch's statistics; dense wants the whole batch for its gemm */
	return t != NN_BATCHNORM && t != NN_DENSE;
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

	return i > 0 && (backward_reads_own_output(t) || t == NN_DROPOUT) &&
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

static bool
relu_fused_into_pool(const NnModel *m, int i)
{
	return m->spec.layers[i].type == NN_RELU && nn_layer_in_place(m, i) &&
		i + 1 < m->spec.n_layers && m->spec.layers[i + 1].type == NN_MAXPOOL2D;
}

int64_t
nn_layer_scratch_floats(const NnModel *m, int i, int batch)
{
	if (m->spec.layers[i].type == NN_CONV2D)
	{
		int64_t		chunk = nn_conv_chunk(m, i, batch);
		int64_t		plane = (int64_t) m->shape[i + 1].h * m->shape[i + 1].w;
		int64_t		kk = (int64_t) m->shape[i].c * m->spec.layers[i].kernel * m->spec.layers[i].kernel;

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
			return 2 * (int64_t) m->shape[i].c;
		default:
			return 0;
	}
}

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
			fan_in = NN_SHAPE_SIZE(m->shape[i]);
			fan_out = l->units;
			n_weights = fan_in * fan_out;
			break;
		case NN_CONV2D:
			fan_in = (int64_t) m->shape[i].c * l->kernel * l->kernel;
			fan_out = (int64_t) l->filters * l->kernel * l->kernel;
			n_weights = fan_in * l->filters;
			break;
		case NN_BATCHNORM:
			for (int c = 0; c < m->shape[i].c; c++)
			{
				p[c] = 1.0f;
				p[m->shape[i].c + c] = 0.0f;
				m->buffers[m->buffer_off[i] + c] = 0.0f;
				m->buffers[m->buffer_off[i] + m->shape[i].c + c] = 1.0f;
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

/* The dropout keep-mask is recomputed in backward from the same counters. */
static inline bool
dropout_keep(const NnModel *m, int i, int64_t element, float rate)
{
	return nn_rng_uniform(m->seed ^ NN_RNG_DROPOUT_SALT,
						  (uint64_t) m->step * NN_MAX_LAYERS + i, element) >= rate;
}

void
nn_layer_forward(NnModel *m, int i, const float *in, int first, int n, bool training)
{
	const NnLayerSpec *l = &m->spec.layers[i];
	const NnBackend *be = m->be;
	const float *p = m->params + m->param_off[i];
	int64_t		in_size = NN_SHAPE_SIZE(m->shape[i]);
	int64_t		out_size = NN_SHAPE_SIZE(m->shape[i + 1]);
	int64_t		count = (int64_t) n * out_size;
	float	   *out = m->out[i] + first * out_size;

	switch (l->type)
	{
		case NN_DENSE:
			be->gemm(false, true, n, l->units, (int) in_size, 1.0f, in, (int) in_size,
					 p, (int) in_size, 0.0f, out, l->units);
			be->bias_add_rows(out, p + in_size * l->units, n, l->units);
			break;

		case NN_CONV2D:
			{
				NnConvGeom	g;
				int			plane = m->shape[i + 1].h * m->shape[i + 1].w;
				int			kk;
				float	   *col = m->scratch;

				conv_geom(m, i, &g);
				kk = g.c * g.k * g.k;

				/*
				 * One image at a time: the gemm writes NCHW directly, and one
				 * image's columns stay in L1/L2 (measured faster than batching
				 * images into one wider gemm and transposing its output).
				 */
				for (int img = 0; img < n; img++)
				{
					nn_im2col(in + img * in_size, 1, &g, col);
					be->gemm(false, false, l->filters, plane, kk, 1.0f, p, kk,
							 col, plane, 0.0f, out + img * out_size, plane);
					if (i + 1 < m->spec.n_layers && relu_fused_into_conv(m, i + 1))
						nn_bias_relu_planes(out + img * out_size, p + (int64_t) kk * l->filters,
											l->filters, plane);
					else
						be->bias_add_planes(out + img * out_size, p + (int64_t) kk * l->filters,
											1, l->filters, plane);
				}
				break;
			}

		case NN_MAXPOOL2D:
			nn_maxpool_forward(in, out, (int32_t *) m->aux[i] + first * out_size, (int64_t) n * m->shape[i].c,
							   m->shape[i].h, m->shape[i].w, l->kernel, pool_stride(l),
							   m->shape[i + 1].h, m->shape[i + 1].w,
							   i > 0 && relu_fused_into_pool(m, i - 1));
			break;

		case NN_AVGPOOL2D:
			nn_avgpool_forward(in, out, (int64_t) n * m->shape[i].c,
							   m->shape[i].h, m->shape[i].w, l->kernel, pool_stride(l),
							   m->shape[i + 1].h, m->shape[i + 1].w);
			break;

		case NN_GLOBAL_AVGPOOL:
			{
				int			plane = m->shape[i].h * m->shape[i].w;

				for (int64_t j = 0; j < count; j++)
				{
					const float *src = in + j * plane;
					float		s = 0.0f;

					for (int k = 0; k < plane; k++)
						s += src[k];
					out[j] = s / (float) plane;
				}
				break;
			}

		case NN_FLATTEN:
			memcpy(out, in, sizeof(float) * count);
			break;

		case NN_RELU:
			if (!relu_fused_into_conv(m, i))
				be->relu_forward(in, out, count);
			break;
		case NN_LEAKY_RELU:
			be->leaky_relu_forward(in, out, count, l->alpha);
			break;
		case NN_SIGMOID:
			be->sigmoid_forward(in, out, count);
			break;
		case NN_TANH:
			be->tanh_forward(in, out, count);
			break;

		case NN_DROPOUT:
			if (!training || l->rate == 0.0f)
			{
				if (out != in)
					memcpy(out, in, sizeof(float) * count);
				break;
			}
			{
				float		scale = 1.0f / (1.0f - l->rate);

				for (int64_t j = 0; j < count; j++)
					out[j] = dropout_keep(m, i, first * out_size + j, l->rate) ? in[j] * scale : 0.0f;
			}
			break;

		case NN_BATCHNORM:
			{
				int			channels = m->shape[i].c;

				nn_batchnorm_forward(in, out, n, channels, m->shape[i].h * m->shape[i].w,
									 p, p + channels,
									 m->buffers + m->buffer_off[i],
									 m->buffers + m->buffer_off[i] + channels,
									 l->eps, l->momentum, training, m->aux[i]);
				break;
			}

		default:
			break;
	}
}

void
nn_layer_backward(NnModel *m, int i, const float *in, int first, int n, float *din)
{
	const NnLayerSpec *l = &m->spec.layers[i];
	const NnBackend *be = m->be;
	const float *p = m->params + m->param_off[i];
	float	   *dp = m->grads + m->param_off[i];
	int64_t		in_size = NN_SHAPE_SIZE(m->shape[i]);
	int64_t		out_size = NN_SHAPE_SIZE(m->shape[i + 1]);
	int64_t		count = (int64_t) n * out_size;
	const float *out = m->out[i] + first * out_size;
	const float *dout = m->dout[i] + first * out_size;

	switch (l->type)
	{
		case NN_DENSE:
			be->gemm(true, false, l->units, (int) in_size, n, 1.0f, dout, l->units,
					 in, (int) in_size, 0.0f, dp, (int) in_size);
			memset(dp + in_size * l->units, 0, sizeof(float) * l->units);
			be->col_sum(dout, dp + in_size * l->units, n, l->units);
			if (din)
				be->gemm(false, false, n, (int) in_size, l->units, 1.0f, dout, l->units,
						 p, (int) in_size, 0.0f, din, (int) in_size);
			break;

		case NN_CONV2D:
			{
				NnConvGeom	g;
				int			chunk = nn_conv_chunk(m, i, n);
				int			plane = m->shape[i + 1].h * m->shape[i + 1].w;
				int			kk;
				float	   *col = m->scratch;
				float	   *tmp;
				float	   *db;

				conv_geom(m, i, &g);
				kk = g.c * g.k * g.k;
				tmp = col + (int64_t) kk * chunk * plane;
				db = dp + (int64_t) kk * l->filters;
				if (din)
					memset(din, 0, sizeof(float) * n * in_size);
				for (int s = 0; s < n; s += chunk)
				{
					int			c = n - s < chunk ? n - s : chunk;
					const float *dy = dout + s * out_size;

					if (c > 1)
					{
						nn_nchw_to_cnhw(dy, tmp, c, l->filters, plane);
						dy = tmp;
					}
					nn_im2col(in + s * in_size, c, &g, col);
					be->gemm(false, true, l->filters, kk, c * plane, 1.0f, dy, c * plane,
							 col, c * plane, first + s == 0 ? 0.0f : 1.0f, dp, kk);
					if (din)
					{
						be->gemm(true, false, kk, c * plane, l->filters, 1.0f, p, kk,
								 dy, c * plane, 0.0f, col, c * plane);
						nn_col2im(col, c, &g, din + s * in_size);
					}
				}
				if (first == 0)
					memset(db, 0, sizeof(float) * l->filters);
				be->plane_sum(dout, db, n, l->filters, plane);
				break;
			}

		case NN_MAXPOOL2D:
			if (din)
				nn_maxpool_backward(dout, (const int32_t *) m->aux[i] + first * out_size, din,
									(int64_t) n * m->shape[i].c, m->shape[i].h, m->shape[i].w,
									m->shape[i + 1].h, m->shape[i + 1].w);
			break;

		case NN_AVGPOOL2D:
			if (din)
				nn_avgpool_backward(dout, din, (int64_t) n * m->shape[i].c,
									m->shape[i].h, m->shape[i].w, l->kernel, pool_stride(l),
									m->shape[i + 1].h, m->shape[i + 1].w);
			break;

		case NN_GLOBAL_AVGPOOL:
			if (din)
			{
				int			plane = m->shape[i].h * m->shape[i].w;

				for (int64_t j = 0; j < count; j++)
				{
					float		g = dout[j] / (float) plane;

					for (int k = 0; k < plane; k++)
						din[j * plane + k] = g;
				}
			}
			break;

		case NN_FLATTEN:
			if (din)
				memcpy(din, dout, sizeof(float) * count);
			break;

		case NN_RELU:
			if (din && !relu_fused_into_pool(m, i))
				be->relu_backward(out, dout, din, count);
			break;
		case NN_LEAKY_RELU:
			if (din)
				be->leaky_relu_backward(out, dout, din, count, l->alpha);
			break;
		case NN_SIGMOID:
			if (din)
				be->sigmoid_backward(out, dout, din, count);
			break;
		case NN_TANH:
			if (din)
				be->tanh_backward(out, dout, din, count);
			break;

		case NN_DROPOUT:
			if (!din)
				break;
			if (l->rate == 0.0f)
			{
				if (din != dout)
					memcpy(din, dout, sizeof(float) * count);
				break;
			}
			{
				float		scale = 1.0f / (1.0f - l->rate);

				for (int64_t j = 0; j < count; j++)
					din[j] = dropout_keep(m, i, first * out_size + j, l->rate) ? dout[j] * scale : 0.0f;
			}
			break;

		case NN_BATCHNORM:
			{
				int			channels = m->shape[i].c;

				nn_batchnorm_backward(in, dout, din, n, channels, m->shape[i].h * m->shape[i].w,
									  p, dp, dp + channels, m->aux[i]);
				break;
			}

		default:
			break;
	}
}
