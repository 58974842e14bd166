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

/* The mean of p[0], p[dim], ..., p[(steps - 1) * dim]: one feature over a sequence's steps. */
NN_ROW_FN float
nn_row_step_mean(const float *p, int steps, int dim)
{
	double		sum = 0.0;

	for (int t = 0; t < steps; t++)
		sum += p[(int64_t) t * dim];
	return (float) (sum / steps);
}

#endif
