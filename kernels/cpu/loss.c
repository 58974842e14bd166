/*
 * loss.c -- the CPU backend's losses and per-batch metrics (see backend.h).
 *
 * Sums run in double in row order: these are the formulas the engine used
 * before they moved behind the table, so the bytes are those of earlier builds.
 * A row's arithmetic, which the CUDA backend does alike, is kernels/rows.h's.
 */
#include <math.h>

#include "cpu/cpu.h"

void
cpu_xent_metrics(const float *logits, const float *labels, const float *loss,
				 int rows, int classes, double *sums)
{
	double		loss_sum = 0.0;
	int64_t		correct = 0;

	for (int r = 0; r < rows; r++)
	{
		correct += nn_row_argmax(logits + (int64_t) r * classes, classes) == (int) labels[r];
		loss_sum += loss[r];
	}
	sums[0] = loss_sum;
	sums[1] = (double) correct;
}

void
cpu_mse_loss(const float *z, const float *y, const float *w, float *dz, int rows, int k, float scale,
			 double *sums)
{
	double		loss_sum = 0.0;

	for (int r = 0; r < rows; r++)
		loss_sum += nn_row_mse(z + r * (int64_t) k, y + r * (int64_t) k, dz + r * (int64_t) k, k,
							   w ? scale * w[r] : scale);
	sums[0] = loss_sum;
	sums[1] = 0.0;
}

void
cpu_huber_loss(const float *z, const float *y, const float *w, float *dz, int rows, int k, float delta,
			   float scale, double *sums)
{
	double		loss_sum = 0.0;

	for (int r = 0; r < rows; r++)
		loss_sum += nn_row_huber(z + r * (int64_t) k, y + r * (int64_t) k, dz + r * (int64_t) k, k, delta,
								 w ? scale * w[r] : scale);
	sums[0] = loss_sum;
	sums[1] = 0.0;
}

/* On logits: max(z, 0) - z * t + log(1 + exp(-|z|)), as BCEWithLogitsLoss. */
void
cpu_bce_loss(const float *z, const float *y, const float *w, float *dz, int rows, int k, float scale,
			 double *sums)
{
	double		loss_sum = 0.0;
	int64_t		correct = 0;

	for (int r = 0; r < rows; r++)
	{
		bool		all_right;

		loss_sum += nn_row_bce(z + r * (int64_t) k, y + r * (int64_t) k, dz + r * (int64_t) k, k,
							   w ? scale * w[r] : scale, &all_right);
		correct += all_right;
	}
	sums[0] = loss_sum;
	sums[1] = (double) correct;
}
