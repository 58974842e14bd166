/*
 * norm.c -- batch normalization, forward and backward.
 *
 * Statistics are accumulated in double: with a few hundred thousand values per
 * channel a float sum loses digits that torch (which uses Welford in float with
 * pairwise blocks) keeps.
 */
#include <math.h>
#include <stddef.h>

#include "cpu/cpu.h"

/* Channel c's mean and sum of squared deviations over x[n][channels][plane]. */
static void
channel_moments(const float *x, int n, int channels, int plane, int c, double *mean, double *sq)
{
	double		sum = 0.0,
				dev = 0.0;

	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < plane; j++)
			sum += p[j];
	}
	sum /= (double) ((int64_t) n * plane);
	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < plane; j++)
		{
			double		d = p[j] - sum;

			dev += d * d;
		}
	}
	*mean = sum;
	*sq = dev;
}

void
cpu_batchnorm_forward(const float *x, float *y, int n, int channels, int plane,
					  const float *gamma, const float *beta,
					  float *running_mean, float *running_var,
					  float eps, float momentum, bool training, float *saved)
{
	int64_t		count = (int64_t) n * plane;

	for (int c = 0; c < channels; c++)
	{
		float		mean,
					invstd,
					scale,
					shift;

		if (training)
		{
			double		m,
						sq,
						var;

			channel_moments(x, n, channels, plane, c, &m, &sq);
			var = sq / (double) count;
			mean = (float) m;
			invstd = (float) (1.0 / sqrt(var + eps));
			saved[c] = mean;
			saved[channels + c] = invstd;
			running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
			running_var[c] = (1.0f - momentum) * running_var[c] +
				momentum * (float) (count > 1 ? sq / (double) (count - 1) : var);
		}
		else
		{
			mean = running_mean[c];
			invstd = 1.0f / sqrtf(running_var[c] + eps);
		}

		scale = gamma[c] * invstd;
		shift = beta[c] - mean * scale;
		for (int i = 0; i < n; i++)
		{
			const float *restrict p = x + ((int64_t) i * channels + c) * plane;
			float	   *restrict q = y + ((int64_t) i * channels + c) * plane;

			for (int j = 0; j < plane; j++)
				q[j] = p[j] * scale + shift;
		}
	}
}

void
cpu_batchnorm_backward(const float *x, const float *dy, float *dx,
					   int n, int channels, int plane,
					   const float *gamma, float *dgamma, float *dbeta,
					   const float *saved)
{
	int64_t		count = (int64_t) n * plane;

	for (int c = 0; c < channels; c++)
	{
		float		mean = saved[c];
		float		invstd = saved[channels + c];
		double		sum_dy = 0.0,
					sum_dy_xhat = 0.0;
		float		k1,
					k2;

		for (int i = 0; i < n; i++)
		{
			const float *p = x + ((int64_t) i * channels + c) * plane;
			const float *g = dy + ((int64_t) i * channels + c) * plane;

			for (int j = 0; j < plane; j++)
			{
				sum_dy += g[j];
				sum_dy_xhat += (double) g[j] * ((p[j] - mean) * invstd);
			}
		}
		dgamma[c] = (float) sum_dy_xhat;
		dbeta[c] = (float) sum_dy;
		if (dx == NULL)
			continue;
		/* dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)) */
		k1 = (float) (sum_dy / (double) count);
		k2 = (float) (sum_dy_xhat / (double) count);
		for (int i = 0; i < n; i++)
		{
			const float *restrict p = x + ((int64_t) i * channels + c) * plane;
			const float *restrict g = dy + ((int64_t) i * channels + c) * plane;
			float	   *restrict d = dx + ((int64_t) i * channels + c) * plane;
			float		gi = gamma[c] * invstd;

			for (int j = 0; j < plane; j++)
				d[j] = gi * (g[j] - k1 - (p[j] - mean) * invstd * k2);
		}
	}
}

/*
 * Layer normalization: one row (example) at a time, its statistics in double
 * over its columns in order, as batch normalization's over a channel.
 */
void
cpu_layernorm_forward(const float *x, float *y, int rows, int cols,
					  const float *gamma, const float *beta, float eps, float *saved)
{
	for (int r = 0; r < rows; r++)
	{
		const float *restrict p = x + (int64_t) r * cols;
		float	   *restrict q = y + (int64_t) r * cols;
		double		sum = 0.0,
					sq = 0.0;
		float		mean,
					invstd;

		for (int c = 0; c < cols; c++)
			sum += p[c];
		sum /= (double) cols;
		for (int c = 0; c < cols; c++)
		{
			double		d = p[c] - sum;

			sq += d * d;
		}
		mean = (float) sum;
		invstd = (float) (1.0 / sqrt(sq / (double) cols + eps));
		saved[2 * r] = mean;
		saved[2 * r + 1] = invstd;
		for (int c = 0; c < cols; c++)
			q[c] = (p[c] - mean) * invstd * gamma[c] + beta[c];
	}
}

void
cpu_layernorm_backward(const float *x, const float *dy, float *dx,
					   int rows, int cols, const float *gamma,
					   float *dgamma, float *dbeta, const float *saved)
{
	/* parameter gradients column by column, rows in order */
	for (int c = 0; c < cols; c++)
	{
		double		sum_dy = 0.0,
					sum_dy_xhat = 0.0;

		for (int r = 0; r < rows; r++)
		{
			float		g = dy[(int64_t) r * cols + c];

			sum_dy += g;
			sum_dy_xhat += (double) g * ((x[(int64_t) r * cols + c] - saved[2 * r]) * saved[2 * r + 1]);
		}
		dgamma[c] = (float) sum_dy_xhat;
		dbeta[c] = (float) sum_dy;
	}
	if (dx == NULL)
		return;
	/* dx = invstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma */
	for (int r = 0; r < rows; r++)
	{
		const float *restrict p = x + (int64_t) r * cols;
		const float *restrict d = dy + (int64_t) r * cols;
		float	   *restrict q = dx + (int64_t) r * cols;
		float		mean = saved[2 * r],
					invstd = saved[2 * r + 1];
		double		sum_g = 0.0,
					sum_g_xhat = 0.0;
		float		k1,
					k2;

		for (int c = 0; c < cols; c++)
		{
			float		g = d[c] * gamma[c];

			sum_g += g;
			sum_g_xhat += (double) g * ((p[c] - mean) * invstd);
		}
		k1 = (float) (sum_g / (double) cols);
		k2 = (float) (sum_g_xhat / (double) cols);
		for (int c = 0; c < cols; c++)
			q[c] = invstd * (d[c] * gamma[c] - k1 - (p[c] - mean) * invstd * k2);
	}
}
