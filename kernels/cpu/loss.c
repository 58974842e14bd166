/*
 * loss.c -- the CPU backend's losses and per-batch metrics (see backend.h).
 *
 * Sums run in double in row order: these are the formulas the engine used
 * before they moved behind the table, so the bytes are those of earlier builds.
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
		const float *row = logits + (int64_t) r * classes;
		int			best = 0;

		for (int c = 1; c < classes; c++)
			if (row[c] > row[best])
				best = c;
		correct += best == (int) labels[r];
		loss_sum += loss[r];
	}
	sums[0] = loss_sum;
	sums[1] = (double) correct;
}

void
cpu_mse_loss(const float *z, const float *y, float *dz, int rows, int k, float scale, double *sums)
{
	double		loss_sum = 0.0;

	for (int r = 0; r < rows; r++)
	{
		double		s = 0.0;

		for (int64_t c = 0; c < k; c++)
		{
			float		d = z[r * (int64_t) k + c] - y[r * (int64_t) k + c];

			s += (double) d * d;
			dz[r * (int64_t) k + c] = d * scale;
		}
		loss_sum += s / (double) k;
	}
	sums[0] = loss_sum;
	sums[1] = 0.0;
}

/* On logits: max(z, 0) - z * t + log(1 + exp(-|z|)), as BCEWithLogitsLoss. */
void
cpu_bce_loss(const float *z, const float *y, float *dz, int rows, int k, float scale, double *sums)
{
	double		loss_sum = 0.0;
	int64_t		correct = 0;

	for (int r = 0; r < rows; r++)
	{
		double		s = 0.0;
		bool		all_right = true;

		for (int64_t c = 0; c < k; c++)
		{
			float		zi = z[r * (int64_t) k + c];
			float		t = y[r * (int64_t) k + c];
			float		sig = nn_row_sigmoid(zi);

			s += (double) (fmaxf(zi, 0.0f) - zi * t + log1pf(expf(-fabsf(zi))));
			dz[r * (int64_t) k + c] = (sig - t) * scale;
			all_right &= (zi > 0.0f) == (t > 0.5f);
		}
		loss_sum += s / (double) k;
		correct += all_right;
	}
	sums[0] = loss_sum;
	sums[1] = (double) correct;
}
