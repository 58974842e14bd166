/*
 * norm.c -- batch normalization, forward and backward.
 *
 * Statistics are accumulated in double: with a few hundred thousand values per
 * channel a float sum loses digits that torch (which uses Welford in float with
 * pairwise blocks) keeps.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cpu/cpu.h"

/*
 * The sums run in eight lanes, element j of a plane into lane j % 8 (the
 * plane's last plane % 8 elements into tail lanes 0, 1, ...), and the lanes
 * are added in order at the end: a fixed order, the same on every CPU, that
 * runs in vectors.  (One sum in order is a chain of dependent adds, which took
 * longer than the convolutions around the batchnorm.)  Multiplies and adds are
 * rounded apart: the default target has no FMA and nothing here asks for it.
 */
typedef float f8 __attribute__((vector_size(32)));
typedef double d8 __attribute__((vector_size(64)));

#define LANES 8

/* eight floats from p as doubles (through a pointer: a vector return would change the ABI) */
static inline void
load_d8(d8 *v, const float *p)
{
	f8			f;

	memcpy(&f, p, sizeof(f));
	*v = __builtin_convertvector(f, d8);
}

static double
lanes_total(const d8 *v, const double *tail)
{
	double		t = 0.0;

	for (int k = 0; k < LANES; k++)
		t += (*v)[k] + tail[k];
	return t;
}

/* Channel c's mean and sum of squared deviations over x[n][channels][plane]: two passes. */
static void
channel_moments(const float *x, int n, int channels, int plane, int c, double *mean, double *sq)
{
	int			body = plane - plane % LANES;
	d8			sum = {0},
				dev = {0};
	double		sum_tail[LANES] = {0},
				dev_tail[LANES] = {0},
				m;

	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < body; j += LANES)
		{
			d8			v;

			load_d8(&v, p + j);
			sum += v;
		}
		for (int j = body; j < plane; j++)
			sum_tail[j - body] += p[j];
	}
	m = lanes_total(&sum, sum_tail) / (double) ((int64_t) n * plane);
	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < body; j += LANES)
		{
			d8			d;

			load_d8(&d, p + j);
			d -= m;
			dev += d * d;
		}
		for (int j = body; j < plane; j++)
		{
			double		d = p[j] - m;

			dev_tail[j - body] += d * d;
		}
	}
	*mean = m;
	*sq = lanes_total(&dev, dev_tail);
}

/* Channel c's sums of dy and of dy * xhat, in lanes as above (xhat in float, as forward has it). */
static void
channel_grad_sums(const float *x, const float *dy, int n, int channels, int plane, int c,
				  float mean, float invstd, double *sum_dy, double *sum_dy_xhat)
{
	int			body = plane - plane % LANES;
	d8			s1 = {0},
				s2 = {0};
	double		s1_tail[LANES] = {0},
				s2_tail[LANES] = {0};

	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;
		const float *g = dy + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < body; j += LANES)
		{
			f8			xv;
			d8			gd;

			load_d8(&gd, g + j);
			memcpy(&xv, p + j, sizeof(xv));
			s1 += gd;
			s2 += gd * __builtin_convertvector((xv - mean) * invstd, d8);
		}
		for (int j = body; j < plane; j++)
		{
			s1_tail[j - body] += g[j];
			s2_tail[j - body] += (double) g[j] * ((p[j] - mean) * invstd);
		}
	}
	*sum_dy = lanes_total(&s1, s1_tail);
	*sum_dy_xhat = lanes_total(&s2, s2_tail);
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
		double		sum_dy,
					sum_dy_xhat;
		float		k1,
					k2;

		channel_grad_sums(x, dy, n, channels, plane, c, mean, invstd, &sum_dy, &sum_dy_xhat);
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
