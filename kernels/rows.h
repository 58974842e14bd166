/*
 * rows.h -- one row's arithmetic (an example's, a position's, a window's),
 * shared by the CPU backend (kernels/cpu) and the CUDA backend
 * (kernels/cuda/backend_cuda.cu): the CPU calls each helper in its loop over
 * rows, a CUDA kernel in the thread that owns the row.  One copy of each
 * formula, so the two backends compute the same operations in the same order
 * (the CUDA file is compiled with --fmad=false: its products are rounded as
 * the CPU's are).
 *
 * Only what both backends really do alike is here.  Where the GPU splits a
 * row's reduction over a block or a warp (batch and layer normalization's
 * sums, softmax cross-entropy) the orders differ by design, and only the
 * per-element formulas around the sums are shared.
 *
 * Plain C that is also CUDA C++: no restrict, no pragmas, no target
 * attributes, nothing that changes how an including unit is compiled.  The
 * CPU units build it with the engine's flags (no -ffast-math, no -march), so
 * a helper rounds in the including unit exactly as the loop it replaced.
 */
#ifndef PGDL_KERNELS_ROWS_H
#define PGDL_KERNELS_ROWS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define NN_ROW_FN static inline __host__ __device__
#else
#define NN_ROW_FN static inline
#endif

/* The logistic function: the sigmoid layer, a GRU's gates, the bce loss. */
NN_ROW_FN float
nn_row_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

/* ---------------------------------------------------------------------------
 * Sequences (kernels/cpu/seq.c)
 * ------------------------------------------------------------------------- */

/* An embedding id's row, or -1 when it is not a whole number in [0, vocab). */
NN_ROW_FN int64_t
nn_row_embedding_index(float id, int vocab)
{
	if (!(id >= 0.0f && id < (float) vocab) || id != floorf(id))
		return -1;
	return (int64_t) id;
}

/* q = softmax(p) over cols values: the maximum subtracted, the sum in double. */
NN_ROW_FN void
nn_row_softmax(const float *p, float *q, int cols)
{
	float		mx = p[0];
	double		sum = 0.0;

	for (int c = 1; c < cols; c++)
		if (p[c] > mx)
			mx = p[c];
	for (int c = 0; c < cols; c++)
	{
		q[c] = expf(p[c] - mx);
		sum += q[c];
	}
	for (int c = 0; c < cols; c++)
		q[c] = (float) (q[c] / sum);
}

/* q = p * (g - <g, p>): softmax's gradient from its output p, the dot in double. */
NN_ROW_FN void
nn_row_softmax_backward(const float *p, const float *g, float *q, int cols)
{
	double		dot = 0.0;

	for (int c = 0; c < cols; c++)
		dot += (double) g[c] * p[c];
	for (int c = 0; c < cols; c++)
		q[c] = p[c] * (g[c] - (float) dot);
}

/*
 * q = log_softmax(p) = p - max - log(sum(exp(p - max))), as ONNX's LogSoftmax
 * and torch's log_softmax: finite where a softmax would underflow to 0.
 */
NN_ROW_FN void
nn_row_log_softmax(const float *p, float *q, int cols)
{
	float		mx = p[0];
	double		sum = 0.0;
	float		lse;

	for (int c = 1; c < cols; c++)
		if (p[c] > mx)
			mx = p[c];
	for (int c = 0; c < cols; c++)
		sum += expf(p[c] - mx);
	lse = (float) log(sum);
	for (int c = 0; c < cols; c++)
		q[c] = (p[c] - mx) - lse;
}

/* q = g - exp(p) * sum(g): log-softmax's gradient from its output p, the sum in double. */
NN_ROW_FN void
nn_row_log_softmax_backward(const float *p, const float *g, float *q, int cols)
{
	double		sum = 0.0;

	for (int c = 0; c < cols; c++)
		sum += g[c];
	for (int c = 0; c < cols; c++)
		q[c] = g[c] - expf(p[c]) * (float) sum;
}

/* The mean of p[0], p[dim], ..., p[(steps - 1) * dim]: one feature over a sequence's steps. */
NN_ROW_FN float
nn_row_step_mean(const float *p, int steps, int dim)
{
	double		sum = 0.0;

	for (int t = 0; t < steps; t++)
		sum += p[(int64_t) t * dim];
	return (float) (sum / steps);
}

/*
 * Unit j of one example's GRU step (see gru_gates_forward in backend.h): a
 * and b are the example's rows of gi and gh (the gates r, z, n, units apart),
 * hp the unit's previous state, sv the example's saved row, which gets r, z,
 * the candidate and its hidden part.  Returns the new state.  The gates'
 * sigmoid and the candidate's tanh are the backend's own: the CPU's
 * cpu_sigmoid and cpu_tanh, which vectorize (kernels/cpu/cpu.h), the GPU's
 * nn_row_sigmoid and tanhf.
 */
NN_ROW_FN float
nn_row_gru_unit(const float *a, const float *b, float hp, float *sv, int units, int j,
				float (*gate_sigmoid) (float), float (*candidate_tanh) (float))
{
	float		r = gate_sigmoid(a[j] + b[j]);
	float		z = gate_sigmoid(a[units + j] + b[units + j]);
	float		hn = b[2 * units + j];
	float		nn = candidate_tanh(a[2 * units + j] + r * hn);

	sv[j] = r;
	sv[units + j] = z;
	sv[2 * units + j] = nn;
	sv[3 * units + j] = hn;
	return (1.0f - z) * nn + z * hp;
}

/*
 * Its gradient: d is the unit's gradient of the new state, sv the saved row
 * and hp the previous state; a and b, the example's rows of dgi and dgh, get
 * the gates' gradients (n's times r in b).  Returns d * z, the previous
 * state's share before the product with W_hh.
 */
NN_ROW_FN float
nn_row_gru_unit_backward(float d, const float *sv, float hp, float *a, float *b, int units, int j)
{
	float		r = sv[j],
				z = sv[units + j],
				nn = sv[2 * units + j],
				hn = sv[3 * units + j];
	float		dnp = d * (1.0f - z) * (1.0f - nn * nn);
	float		dzp = d * (hp - nn) * z * (1.0f - z);
	float		drp = dnp * hn * r * (1.0f - r);

	a[j] = drp;
	a[units + j] = dzp;
	a[2 * units + j] = dnp;
	b[j] = drp;
	b[units + j] = dzp;
	b[2 * units + j] = dnp * r;
	return d * z;
}

/* ---------------------------------------------------------------------------
 * Normalization (kernels/cpu/norm.c).  The sums are not here: the CPU adds a
 * channel in eight lanes and a row in order, the GPU through a block's tree;
 * what both do with the sums is.
 * ------------------------------------------------------------------------- */

/* 1 / sqrt(var + eps) in double, rounded to float once: batch and layer normalization's invstd. */
NN_ROW_FN float
nn_row_invstd(double var, float eps)
{
	return (float) (1.0 / sqrt(var + eps));
}

/*
 * A channel's running statistics after a training batch of count values with
 * mean `mean` and sq the sum of their squared deviations: the running
 * variance takes the unbiased variance, as torch's.
 */
NN_ROW_FN void
nn_row_batchnorm_running(float *running_mean, float *running_var, float mean, double sq,
						 int64_t count, float momentum)
{
	*running_mean = (1.0f - momentum) * *running_mean + momentum * mean;
	*running_var = (1.0f - momentum) * *running_var +
		momentum * (float) (count > 1 ? sq / (double) (count - 1) : sq / (double) count);
}

/* x normalized, in float: what the gradients' sums multiply by. */
NN_ROW_FN float
nn_row_xhat(float x, float mean, float invstd)
{
	return (x - mean) * invstd;
}

/* Layer normalization's output for one value. */
NN_ROW_FN float
nn_row_layernorm(float x, float mean, float invstd, float gamma, float beta)
{
	return nn_row_xhat(x, mean, invstd) * gamma + beta;
}

/*
 * The gradient through a normalization for one value: s * (g - k1 - xhat *
 * k2), k1 and k2 the means of g and of g * xhat over its channel (batch) or
 * row (layer).  Batch normalization's g is dy and s gamma * invstd; layer
 * normalization's g is dy * gamma and s invstd.
 */
NN_ROW_FN float
nn_row_norm_dx(float s, float g, float xhat, float k1, float k2)
{
	return s * (g - k1 - xhat * k2);
}

/* ---------------------------------------------------------------------------
 * Losses and metrics (kernels/cpu/loss.c): a row each.  The CPU adds the
 * rows' results in row order, the GPU through its fixed grid.
 * ------------------------------------------------------------------------- */

/* The column of the row's first largest value. */
NN_ROW_FN int
nn_row_argmax(const float *row, int classes)
{
	int			best = 0;

	for (int c = 1; c < classes; c++)
		if (row[c] > row[best])
			best = c;
	return best;
}

/* A row of the mse loss: dz = (z - y) * scale; returns the row's mean of (z - y)^2, summed in double. */
NN_ROW_FN double
nn_row_mse(const float *z, const float *y, float *dz, int k, float scale)
{
	double		s = 0.0;

	for (int64_t c = 0; c < k; c++)
	{
		float		d = z[c] - y[c];

		s += (double) d * d;
		dz[c] = d * scale;
	}
	return s / (double) k;
}

/*
 * A row of the huber loss, as torch.nn.HuberLoss(delta): 0.5 d^2 where |d| <
 * delta, else delta (|d| - 0.5 delta), in float, for d = z - y; dz =
 * clamp(d, -delta, delta) * scale; returns the row's mean, summed in double.
 */
NN_ROW_FN double
nn_row_huber(const float *z, const float *y, float *dz, int k, float delta, float scale)
{
	double		s = 0.0;

	for (int64_t c = 0; c < k; c++)
	{
		float		d = z[c] - y[c];
		float		a = fabsf(d);

		s += (double) (a < delta ? 0.5f * d * d : delta * (a - 0.5f * delta));
		dz[c] = (d < -delta ? -delta : d > delta ? delta : d) * scale;
	}
	return s / (double) k;
}

/*
 * A row of the bce loss on logits, max(z, 0) - z * t + log(1 + exp(-|z|)) as
 * BCEWithLogitsLoss: dz = (sigmoid(z) - t) * scale; returns the row's mean
 * loss, and in *all_right whether every logit is on its target's side.
 */
NN_ROW_FN double
nn_row_bce(const float *z, const float *y, float *dz, int k, float scale, bool *all_right)
{
	double		s = 0.0;
	bool		right = true;

	for (int64_t c = 0; c < k; c++)
	{
		float		zi = z[c];
		float		t = y[c];
		float		sig = nn_row_sigmoid(zi);

		s += (double) (fmaxf(zi, 0.0f) - zi * t + log1pf(expf(-fabsf(zi))));
		dz[c] = (sig - t) * scale;
		right &= (zi > 0.0f) == (t > 0.5f);
	}
	*all_right = right;
	return s / (double) k;
}

/* ---------------------------------------------------------------------------
 * Pooling windows (kernels/cpu/pool.c), forward: a window each.  The
 * backward passes differ (the CPU adds into dx window by window, the GPU
 * gathers an element's windows), and so does the CPU's 2x2/2 max pooling,
 * unrolled and in AVX-512.
 * ------------------------------------------------------------------------- */

/*
 * The rows (or columns) of a plane `in` long that window o covers along one
 * axis, [*lo, *hi), cut at the plane's edges: its pads hold nothing.  Returns
 * the window's length within the padded plane, pads counted, cut where
 * ceil_mode's last window runs past the padding after (ONNX's and torch's
 * count_include_pad divisor).
 */
NN_ROW_FN int
nn_row_window_span(int o, int k, int stride, int pad, int pad_end, int in, int *lo, int *hi)
{
	int			start = o * stride - pad;
	int			end = start + k < in + pad_end ? start + k : in + pad_end;

	*lo = start > 0 ? start : 0;
	*hi = end < in ? end : in;
	return end - start;
}

/*
 * The window [y0, y1) x [x0, x1) of a plane w wide: its largest value into
 * *best (the first one wins, as in torch), and its index in the plane, or -1
 * under relu_before when it is not positive (the relu would have made it 0,
 * whose gradient is 0).
 */
NN_ROW_FN int32_t
nn_row_maxpool_window(const float *src, int w, int y0, int y1, int x0, int x1, bool relu_before,
					  float *best)
{
	int			at = y0 * w + x0;
	float		top = src[at];

	for (int y = y0; y < y1; y++)
		for (int x = x0; x < x1; x++)
		{
			int			i = y * w + x;

			if (src[i] > top)
				top = src[i], at = i;
		}
	*best = top;
	return relu_before && !(top > 0.0f) ? -1 : at;
}

/* The sum of the window [y0, y1) x [x0, x1) of a plane w wide, in float, row by row. */
NN_ROW_FN float
nn_row_window_sum(const float *src, int w, int y0, int y1, int x0, int x1)
{
	float		s = 0.0f;

	for (int y = y0; y < y1; y++)
		for (int x = x0; x < x1; x++)
			s += src[y * w + x];
	return s;
}

/* The mean of a plane's values, summed in float in order. */
NN_ROW_FN float
nn_row_plane_mean(const float *src, int plane)
{
	float		s = 0.0f;

	for (int k = 0; k < plane; k++)
		s += src[k];
	return s / (float) plane;
}

/* 1 / sqrt(running_var + eps) in float: batch normalization's invstd in inference. */
NN_ROW_FN float
nn_row_running_invstd(float running_var, float eps)
{
	return 1.0f / sqrtf(running_var + eps);
}

/* A channel's batch normalization as y = x * scale + shift, from its mean and invstd. */
NN_ROW_FN void
nn_row_batchnorm_affine(float gamma, float beta, float mean, float invstd, float *scale, float *shift)
{
	*scale = gamma * invstd;
	*shift = beta - mean * *scale;
}

/* ---------------------------------------------------------------------------
 * Optimizers (kernels/cpu/backend_cpu.c adam_update)
 * ------------------------------------------------------------------------- */

/* An Adam (or AdamW: decoupled) step's scalars, the same for every parameter of the step. */
typedef struct NnAdamStep
{
	float		beta1;
	float		beta2;
	float		one_minus_b1;
	float		one_minus_b2;
	float		eps;
	float		l2;				/* Adam's weight decay, into the gradient */
	float		shrink;			/* AdamW's, applied to the parameter */
	float		step_size;
	float		bc2_sqrt;
} NnAdamStep;

/* As torch: bias corrections in double, applied as float scalars. */
NN_ROW_FN NnAdamStep
nn_row_adam_step(float lr, float beta1, float beta2, float eps, float weight_decay, bool decoupled, int64_t step)
{
	NnAdamStep	s;

	s.beta1 = beta1;
	s.beta2 = beta2;
	s.eps = eps;
	s.step_size = (float) (lr / (1.0 - pow(beta1, (double) step)));
	s.bc2_sqrt = (float) sqrt(1.0 - pow(beta2, (double) step));
	s.one_minus_b1 = (float) (1.0 - beta1);
	s.one_minus_b2 = (float) (1.0 - beta2);
	s.l2 = decoupled ? 0.0f : weight_decay;
	s.shrink = decoupled ? (float) (1.0 - (double) lr * weight_decay) : 1.0f;
	return s;
}

/* Parameter *p with gradient g and moments *m, *v, one Adam step on. */
NN_ROW_FN void
nn_row_adam(float *p, float *m, float *v, float g, NnAdamStep s)
{
	float		pi = *p * s.shrink;
	float		d = g + s.l2 * pi;
	float		mi = *m * s.beta1 + s.one_minus_b1 * d;
	float		vi = *v * s.beta2 + s.one_minus_b2 * d * d;

	*m = mi;
	*v = vi;
	*p = pi - s.step_size * (mi / (sqrtf(vi) / s.bc2_sqrt + s.eps));
}

/* An RMSprop or Adagrad step's scalars, the same for every parameter of the step. */
typedef struct NnSquareStep
{
	float		lr;				/* Adagrad: lr / (1 + (step - 1) lr_decay) */
	float		alpha;			/* RMSprop: square_avg's decay; Adagrad: 1 (a sum) */
	float		one_minus_alpha;	/* RMSprop: 1 - alpha; Adagrad: 1 */
	float		eps;
	float		weight_decay;
	float		momentum;
} NnSquareStep;

/* As torch: 1 - alpha and Adagrad's decayed lr in double, applied as float scalars. */
NN_ROW_FN NnSquareStep
nn_row_rmsprop_step(float lr, float alpha, float eps, float weight_decay, float momentum)
{
	NnSquareStep s;

	s.lr = lr;
	s.alpha = alpha;
	s.one_minus_alpha = (float) (1.0 - alpha);
	s.eps = eps;
	s.weight_decay = weight_decay;
	s.momentum = momentum;
	return s;
}

NN_ROW_FN NnSquareStep
nn_row_adagrad_step(float lr, float lr_decay, float eps, float weight_decay, int64_t step)
{
	NnSquareStep s;

	s.lr = (float) (lr / (1.0 + (double) (step - 1) * lr_decay));
	s.alpha = 1.0f;
	s.one_minus_alpha = 1.0f;
	s.eps = eps;
	s.weight_decay = weight_decay;
	s.momentum = 0.0f;
	return s;
}

/*
 * Parameter *p with gradient g, one RMSprop step on (Adagrad's is the same
 * with alpha 1 and no momentum): *sq the square average (Adagrad: the sum),
 * buf the momentum buffer or NULL, gavg the centered average or NULL.
 */
NN_ROW_FN void
nn_row_rmsprop(float *p, float *sq, float *buf, float *gavg, float g, NnSquareStep s)
{
	float		d = g + s.weight_decay * *p;
	float		v = *sq * s.alpha + s.one_minus_alpha * d * d;
	float		avg;

	*sq = v;
	if (gavg != NULL)
	{
		float		ga = *gavg * s.alpha + s.one_minus_alpha * d;

		*gavg = ga;
		v = v - ga * ga;
	}
	avg = sqrtf(v) + s.eps;
	if (buf != NULL)
	{
		float		b = *buf * s.momentum + d / avg;

		*buf = b;
		*p = *p - s.lr * b;
	}
	else
		*p = *p - s.lr * (d / avg);
}

#endif
