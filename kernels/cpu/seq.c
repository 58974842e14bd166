/*
 * seq.c -- the CPU kernels of sequence layers: embedding, softmax over the
 * last axis, the mean over a sequence's steps, a GRU's gates.  A row's
 * arithmetic that the CUDA backend does alike is in kernels/rows.h.
 */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"

void
cpu_embedding_forward(const float *ids, const float *table, float *y, int64_t n, int vocab, int dim)
{
	for (int64_t p = 0; p < n; p++)
	{
		int64_t		row = nn_row_embedding_index(ids[p], vocab);

		if (row < 0)
			memset(y + p * dim, 0, sizeof(float) * dim);
		else
			memcpy(y + p * dim, table + row * dim, sizeof(float) * dim);
	}
}

void
cpu_embedding_backward(const float *ids, const float *dy, float *dtable, int64_t n, int vocab, int dim)
{
	memset(dtable, 0, sizeof(float) * (size_t) vocab * dim);
	for (int64_t p = 0; p < n; p++)
	{
		int64_t		row = nn_row_embedding_index(ids[p], vocab);
		float	   *restrict d = dtable + row * dim;
		const float *restrict g = dy + p * dim;

		if (row < 0)
			continue;
		for (int j = 0; j < dim; j++)
			d[j] += g[j];
	}
}

void
cpu_softmax_forward(const float *x, float *y, int64_t rows, int cols)
{
	for (int64_t r = 0; r < rows; r++)
		nn_row_softmax(x + r * cols, y + r * cols, cols);
}

void
cpu_softmax_backward(const float *y, const float *dy, float *dx, int64_t rows, int cols)
{
	for (int64_t r = 0; r < rows; r++)
		nn_row_softmax_backward(y + r * cols, dy + r * cols, dx + r * cols, cols);
}

void
cpu_log_softmax_forward(const float *x, float *y, int64_t rows, int cols)
{
	for (int64_t r = 0; r < rows; r++)
		nn_row_log_softmax(x + r * cols, y + r * cols, cols);
}

void
cpu_log_softmax_backward(const float *y, const float *dy, float *dx, int64_t rows, int cols)
{
	for (int64_t r = 0; r < rows; r++)
		nn_row_log_softmax_backward(y + r * cols, dy + r * cols, dx + r * cols, cols);
}

void
cpu_seq_avgpool_forward(const float *x, float *y, int n, int steps, int dim)
{
	for (int i = 0; i < n; i++)
	{
		const float *p = x + (int64_t) i * steps * dim;
		float	   *q = y + (int64_t) i * dim;

		for (int d = 0; d < dim; d++)
			q[d] = nn_row_step_mean(p + d, steps, dim);
	}
}

void
cpu_seq_avgpool_backward(const float *dy, float *dx, int n, int steps, int dim)
{
	float		inv = 1.0f / (float) steps;

	for (int i = 0; i < n; i++)
		for (int t = 0; t < steps; t++)
			for (int d = 0; d < dim; d++)
				dx[((int64_t) i * steps + t) * dim + d] = dy[(int64_t) i * dim + d] * inv;
}

/* One example's units of the forward step; no conditional load, as in gru_backward_example below. */
static inline __attribute__((always_inline)) void
gru_forward_example(const float *a, const float *b, const float *hp_row, float *sv, float *h, float *out,
					int units)
{
#pragma GCC ivdep
	for (int j = 0; j < units; j++)
	{
		float		hv = nn_row_gru_unit(a, b, hp_row ? hp_row[j] : 0.0f, sv, units, j, cpu_sigmoid, cpu_tanh);

		h[j] = hv;
		if (out)
			out[j] = hv;
	}
}

void
cpu_gru_gates_forward(const float *gi, int gi_stride, const float *gh,
					  const float *hprev, int hprev_stride, float *h, int h_stride,
					  float *saved, int saved_stride, float *out, int out_stride,
					  int n, int units)
{
	for (int e = 0; e < n; e++)
	{
		const float *a = gi + (int64_t) e * gi_stride;
		const float *b = gh + (int64_t) e * 3 * units;
		float	   *sv = saved + (int64_t) e * saved_stride;
		float	   *he = h + (int64_t) e * h_stride;
		const float *pe = hprev ? hprev + (int64_t) e * hprev_stride : NULL;
		float	   *oe = out ? out + (int64_t) e * out_stride : NULL;

		if (pe && oe)
			gru_forward_example(a, b, pe, sv, he, oe, units);
		else if (pe)
			gru_forward_example(a, b, pe, sv, he, NULL, units);
		else if (oe)
			gru_forward_example(a, b, NULL, sv, he, oe, units);
		else
			gru_forward_example(a, b, NULL, sv, he, NULL, units);
	}
}

/*
 * One example's units of the backward step.  Inlined into each of the four
 * cases below, so that no load in the loop is conditional and it vectorizes (the conditional loads of
 * one loop for all cases kept it scalar, 16% of the GRU benchmark's time);
 * each element's arithmetic is the same as in that one loop, NULL's terms
 * included (d + 0, hp = 0), so the bytes are too.
 */
static inline __attribute__((always_inline)) void
gru_backward_example(float *dh, const float *dout, const float *hp_row, const float *sv,
					 float *a, float *b, int units)
{
#pragma GCC ivdep
	for (int j = 0; j < units; j++)
	{
		float		d = dh[j] + (dout ? dout[j] : 0.0f);
		float		hp = hp_row ? hp_row[j] : 0.0f;

		dh[j] = nn_row_gru_unit_backward(d, sv, hp, a, b, units, j);
	}
}

void
cpu_gru_gates_backward(float *dh, const float *dout, int dout_stride,
					   const float *hprev, int hprev_stride,
					   const float *saved, int saved_stride,
					   float *dgi, int gi_stride, float *dgh, int n, int units)
{
	for (int e = 0; e < n; e++)
	{
		const float *sv = saved + (int64_t) e * saved_stride;
		float	   *a = dgi + (int64_t) e * gi_stride;
		float	   *b = dgh + (int64_t) e * 3 * units;
		float	   *dhe = dh + (int64_t) e * units;
		const float *de = dout ? dout + (int64_t) e * dout_stride : NULL;
		const float *he = hprev ? hprev + (int64_t) e * hprev_stride : NULL;

		if (de && he)
			gru_backward_example(dhe, de, he, sv, a, b, units);
		else if (de)
			gru_backward_example(dhe, de, NULL, sv, a, b, units);
		else if (he)
			gru_backward_example(dhe, NULL, he, sv, a, b, units);
		else
			gru_backward_example(dhe, NULL, NULL, sv, a, b, units);
	}
}

void
cpu_seq_unfold(const float *x, int n, const NnConvGeom *g, float *cols)
{
	int			kk = g->c * g->k;

	for (int i = 0; i < n; i++)
		for (int t = 0; t < g->ow; t++)
		{
			float	   *row = cols + ((int64_t) i * g->ow + t) * kk;

			for (int j = 0; j < g->k; j++)
			{
				int			s = t * g->stride - g->pad + j;
				const float *src = x + ((int64_t) i * g->w + s) * g->c;

				for (int ci = 0; ci < g->c; ci++)
					row[ci * g->k + j] = s >= 0 && s < g->w ? src[ci] : 0.0f;
			}
		}
}

void
cpu_seq_fold(const float *cols, int n, const NnConvGeom *g, float *dx)
{
	int			kk = g->c * g->k;

	memset(dx, 0, sizeof(float) * (size_t) n * g->w * g->c);
	for (int i = 0; i < n; i++)
		for (int t = 0; t < g->ow; t++)
		{
			const float *row = cols + ((int64_t) i * g->ow + t) * kk;

			for (int j = 0; j < g->k; j++)
			{
				int			s = t * g->stride - g->pad + j;
				float	   *dst = dx + ((int64_t) i * g->w + s) * g->c;

				if (s < 0 || s >= g->w)
					continue;
				for (int ci = 0; ci < g->c; ci++)
					dst[ci] += row[ci * g->k + j];
			}
		}
}
