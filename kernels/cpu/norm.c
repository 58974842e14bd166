/*
 * norm.c -- batch and layer normalization, forward and backward.
 *
 * Statistics are accumulated in double: with a few hundred thousand values per
 * channel a float sum loses digits that torch (which uses Welford in float with
 * pairwise blocks) keeps.  The sums are the CPU's own (the GPU adds through a
 * block's tree); what both backends make of them, invstd, the running
 * statistics, the outputs and dx, is kernels/rows.h's.
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
 * longer than the convolutions around the batchnorm.)  The lanes are four
 * vectors of two doubles, the default target's width, which the compiler
 * keeps in registers (a vector of eight it kept in memory).  On x86-64's
 * default target, which has no FMA, multiplies and adds are rounded apart.
 */
#define LANES 8

#if defined(__SSE2__)
#include <emmintrin.h>

typedef __m128d d2;

/* two floats from p as doubles (the intrinsic: a generic vector conversion became scalar converts) */
static inline d2
load_d2(const float *p)
{
	return _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i *) p)));
}

/* dy * xhat for two elements, xhat in float as forward has it */
static inline d2
dy_xhat(const float *p, const float *g, float mean, float invstd)
{
	__m128		x = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *) p));

	x = _mm_mul_ps(_mm_sub_ps(x, _mm_set1_ps(mean)), _mm_set1_ps(invstd));
	return load_d2(g) * _mm_cvtps_pd(x);
}
#else
typedef double d2 __attribute__((vector_size(16)));

static inline d2
load_d2(const float *p)
{
	return (d2) {p[0], p[1]};
}

static inline d2
dy_xhat(const float *p, const float *g, float mean, float invstd)
{
	return load_d2(g) * (d2) {(p[0] - mean) * invstd, (p[1] - mean) * invstd};
}
#endif

/* The lanes' total in the one fixed order: lane k and tail k, k = 0 .. 7. */
static double
flat_lanes_total(const double *lanes, const double *tail)
{
	double		t = 0.0;

	for (int k = 0; k < LANES; k++)
		t += lanes[k] + tail[k];
	return t;
}

static double
lanes_total(const d2 *v, const double *tail)
{
	double		lanes[LANES];

	memcpy(lanes, v, sizeof(lanes));
	return flat_lanes_total(lanes, tail);
}

/* Channel c's mean and sum of squared deviations over x[n][channels][plane]: two passes. */
static void
channel_moments(const float *x, int n, int channels, int plane, int c, double *mean, double *sq)
{
	int			body = plane - plane % LANES;
	d2			s0 = {0},
				s1 = {0},
				s2 = {0},
				s3 = {0};
	double		tail[LANES] = {0},
				m;

	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < body; j += LANES)
		{
			s0 += load_d2(p + j);
			s1 += load_d2(p + j + 2);
			s2 += load_d2(p + j + 4);
			s3 += load_d2(p + j + 6);
		}
		for (int j = body; j < plane; j++)
			tail[j - body] += p[j];
	}
	m = lanes_total((d2[]) {s0, s1, s2, s3}, tail) / (double) ((int64_t) n * plane);
	s0 = s1 = s2 = s3 = (d2) {0};
	memset(tail, 0, sizeof(tail));
	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < body; j += LANES)
		{
			d2			e0 = load_d2(p + j) - m,
						e1 = load_d2(p + j + 2) - m,
						e2 = load_d2(p + j + 4) - m,
						e3 = load_d2(p + j + 6) - m;

			s0 += e0 * e0;
			s1 += e1 * e1;
			s2 += e2 * e2;
			s3 += e3 * e3;
		}
		for (int j = body; j < plane; j++)
		{
			double		d = p[j] - m;

			tail[j - body] += d * d;
		}
	}
	*mean = m;
	*sq = lanes_total((d2[]) {s0, s1, s2, s3}, tail);
}

/* Channel c's sums of dy and of dy * xhat, in lanes as above. */
static void
channel_grad_sums(const float *x, const float *dy, int n, int channels, int plane, int c,
				  float mean, float invstd, double *sum_dy, double *sum_dy_xhat)
{
	int			body = plane - plane % LANES;
	d2			s0 = {0},
				s1 = {0},
				s2 = {0},
				s3 = {0},
				t0 = {0},
				t1 = {0},
				t2 = {0},
				t3 = {0};
	double		s_tail[LANES] = {0},
				t_tail[LANES] = {0};

	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;
		const float *g = dy + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < body; j += LANES)
		{
			s0 += load_d2(g + j);
			s1 += load_d2(g + j + 2);
			s2 += load_d2(g + j + 4);
			s3 += load_d2(g + j + 6);
			t0 += dy_xhat(p + j, g + j, mean, invstd);
			t1 += dy_xhat(p + j + 2, g + j + 2, mean, invstd);
			t2 += dy_xhat(p + j + 4, g + j + 4, mean, invstd);
			t3 += dy_xhat(p + j + 6, g + j + 6, mean, invstd);
		}
		for (int j = body; j < plane; j++)
		{
			s_tail[j - body] += g[j];
			t_tail[j - body] += (double) g[j] * nn_row_xhat(p[j], mean, invstd);
		}
	}
	*sum_dy = lanes_total((d2[]) {s0, s1, s2, s3}, s_tail);
	*sum_dy_xhat = lanes_total((d2[]) {t0, t1, t2, t3}, t_tail);
}

/*
 * The same sums on AVX-512: the eight lanes are one vector of eight doubles,
 * element j of a plane into lane j % 8 as above, each lane's adds in the same
 * order, no contraction: the bytes of the lanes above (regress/unit checks
 * it).  Its speed was not measured apart from the rest of a ResNet's step.
 */
#if defined(__x86_64__) && !defined(__clang__)
#include <immintrin.h>

#define NORM_HAS_AVX512

__attribute__((target("avx512f") NO_CONTRACT))
static void
channel_moments_avx512(const float *x, int n, int channels, int plane, int c, double *mean, double *sq)
{
	int			body = plane - plane % LANES;
	__m512d		s = _mm512_setzero_pd();
	double		tail[LANES] = {0},
				lanes[LANES],
				m;

	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < body; j += LANES)
			s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm256_loadu_ps(p + j)));
		for (int j = body; j < plane; j++)
			tail[j - body] += p[j];
	}
	_mm512_storeu_pd(lanes, s);
	m = flat_lanes_total(lanes, tail) / (double) ((int64_t) n * plane);
	s = _mm512_setzero_pd();
	memset(tail, 0, sizeof(tail));
	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < body; j += LANES)
		{
			__m512d		e = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p + j)), _mm512_set1_pd(m));

			s = _mm512_add_pd(s, _mm512_mul_pd(e, e));
		}
		for (int j = body; j < plane; j++)
		{
			double		d = p[j] - m;

			tail[j - body] += d * d;
		}
	}
	_mm512_storeu_pd(lanes, s);
	*mean = m;
	*sq = flat_lanes_total(lanes, tail);
}

__attribute__((target("avx512f") NO_CONTRACT))
static void
channel_grad_sums_avx512(const float *x, const float *dy, int n, int channels, int plane, int c,
						 float mean, float invstd, double *sum_dy, double *sum_dy_xhat)
{
	int			body = plane - plane % LANES;
	__m512d		s = _mm512_setzero_pd(),
				t = _mm512_setzero_pd();
	__m256		mean8 = _mm256_set1_ps(mean),
				invstd8 = _mm256_set1_ps(invstd);
	double		s_tail[LANES] = {0},
				t_tail[LANES] = {0},
				s_lanes[LANES],
				t_lanes[LANES];

	for (int i = 0; i < n; i++)
	{
		const float *p = x + ((int64_t) i * channels + c) * plane;
		const float *g = dy + ((int64_t) i * channels + c) * plane;

		for (int j = 0; j < body; j += LANES)
		{
			__m512d		gd = _mm512_cvtps_pd(_mm256_loadu_ps(g + j));
			__m256		xhat = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(p + j), mean8), invstd8);

			s = _mm512_add_pd(s, gd);
			t = _mm512_add_pd(t, _mm512_mul_pd(gd, _mm512_cvtps_pd(xhat)));
		}
		for (int j = body; j < plane; j++)
		{
			s_tail[j - body] += g[j];
			t_tail[j - body] += (double) g[j] * nn_row_xhat(p[j], mean, invstd);
		}
	}
	_mm512_storeu_pd(s_lanes, s);
	_mm512_storeu_pd(t_lanes, t);
	*sum_dy = flat_lanes_total(s_lanes, s_tail);
	*sum_dy_xhat = flat_lanes_total(t_lanes, t_tail);
}
#endif

/* the sums of channel c, on the ISA nn_cpu_isa() allows: the same bytes on each */
static void
channel_moments_isa(const float *x, int n, int channels, int plane, int c, double *mean, double *sq)
{
#ifdef NORM_HAS_AVX512
	if (nn_cpu_isa() == NN_ISA_AVX512)
	{
		channel_moments_avx512(x, n, channels, plane, c, mean, sq);
		return;
	}
#endif
	channel_moments(x, n, channels, plane, c, mean, sq);
}

static void
channel_grad_sums_isa(const float *x, const float *dy, int n, int channels, int plane, int c,
					  float mean, float invstd, double *sum_dy, double *sum_dy_xhat)
{
#ifdef NORM_HAS_AVX512
	if (nn_cpu_isa() == NN_ISA_AVX512)
	{
		channel_grad_sums_avx512(x, dy, n, channels, plane, c, mean, invstd, sum_dy, sum_dy_xhat);
		return;
	}
#endif
	channel_grad_sums(x, dy, n, channels, plane, c, mean, invstd, sum_dy, sum_dy_xhat);
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
						sq;

			channel_moments_isa(x, n, channels, plane, c, &m, &sq);
			mean = (float) m;
			invstd = nn_row_invstd(sq / (double) count, eps);
			saved[c] = mean;
			saved[channels + c] = invstd;
			nn_row_batchnorm_running(&running_mean[c], &running_var[c], mean, sq, count, momentum);
		}
		else
		{
			mean = running_mean[c];
			invstd = nn_row_running_invstd(running_var[c], eps);
		}
		nn_row_batchnorm_affine(gamma[c], beta[c], mean, invstd, &scale, &shift);
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

		channel_grad_sums_isa(x, dy, n, channels, plane, c, mean, invstd, &sum_dy, &sum_dy_xhat);
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
				d[j] = nn_row_norm_dx(gi, g[j], nn_row_xhat(p[j], mean, invstd), k1, k2);
		}
	}
}

/*
 * Layer normalization: each row (example) normalized by its own statistics,
 * in double over its columns in order, as batch normalization's over a
 * channel.  Rows are summed LAYERNORM_ROWS side by side, and the parameter
 * gradients LAYERNORM_COLUMNS columns side by side: their chains of additions
 * overlap, and each row's or column's are the same.
 */
#define LAYERNORM_ROWS 4
#define LAYERNORM_COLUMNS 64

/* rows [r0, r0 + nb) of x: mean[b] and the sum of squared deviations sq[b] */
static inline __attribute__((always_inline)) void
layernorm_row_moments(const float *x, int r0, int nb, int cols, double *mean, double *sq)
{
	for (int b = 0; b < nb; b++)
		mean[b] = sq[b] = 0.0;
	for (int c = 0; c < cols; c++)
		for (int b = 0; b < nb; b++)
			mean[b] += x[(int64_t) (r0 + b) * cols + c];
	for (int b = 0; b < nb; b++)
		mean[b] /= (double) cols;
	for (int c = 0; c < cols; c++)
		for (int b = 0; b < nb; b++)
		{
			double		d = x[(int64_t) (r0 + b) * cols + c] - mean[b];

			sq[b] += d * d;
		}
}

/* rows [r0, r0 + nb) normalized, their mean and 1/std saved */
static inline __attribute__((always_inline)) void
layernorm_forward_rows(const float *x, float *y, int r0, int nb, int cols,
					   const float *gamma, const float *beta, float eps, float *saved)
{
	double		mean[LAYERNORM_ROWS],
				sq[LAYERNORM_ROWS];

	layernorm_row_moments(x, r0, nb, cols, mean, sq);
	for (int b = 0; b < nb; b++)
	{
		const float *restrict p = x + (int64_t) (r0 + b) * cols;
		float	   *restrict q = y + (int64_t) (r0 + b) * cols;
		float		m = (float) mean[b],
					invstd = nn_row_invstd(sq[b] / (double) cols, eps);

		saved[2 * (r0 + b)] = m;
		saved[2 * (r0 + b) + 1] = invstd;
		for (int c = 0; c < cols; c++)
			q[c] = nn_row_layernorm(p[c], m, invstd, gamma[c], beta[c]);
	}
}

void
cpu_layernorm_forward(const float *x, float *y, int rows, int cols,
					  const float *gamma, const float *beta, float eps, float *saved)
{
	int			r0;

	for (r0 = 0; r0 + LAYERNORM_ROWS <= rows; r0 += LAYERNORM_ROWS)
		layernorm_forward_rows(x, y, r0, LAYERNORM_ROWS, cols, gamma, beta, eps, saved);
	for (; r0 < rows; r0++)
		layernorm_forward_rows(x, y, r0, 1, cols, gamma, beta, eps, saved);
}

/* dx of rows [r0, r0 + nb): invstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma */
static inline __attribute__((always_inline)) void
layernorm_dx_rows(const float *x, const float *dy, float *dx, int r0, int nb, int cols,
				  const float *gamma, const float *saved)
{
	double		sum_g[LAYERNORM_ROWS] = {0.0},
				sum_g_xhat[LAYERNORM_ROWS] = {0.0};

	for (int c = 0; c < cols; c++)
		for (int b = 0; b < nb; b++)
		{
			int64_t		at = (int64_t) (r0 + b) * cols + c;
			float		g = dy[at] * gamma[c];

			sum_g[b] += g;
			sum_g_xhat[b] += (double) g * nn_row_xhat(x[at], saved[2 * (r0 + b)], saved[2 * (r0 + b) + 1]);
		}
	for (int b = 0; b < nb; b++)
	{
		const float *restrict p = x + (int64_t) (r0 + b) * cols;
		const float *restrict d = dy + (int64_t) (r0 + b) * cols;
		float	   *restrict q = dx + (int64_t) (r0 + b) * cols;
		float		mean = saved[2 * (r0 + b)],
					invstd = saved[2 * (r0 + b) + 1],
					k1 = (float) (sum_g[b] / (double) cols),
					k2 = (float) (sum_g_xhat[b] / (double) cols);

		for (int c = 0; c < cols; c++)
			q[c] = nn_row_norm_dx(invstd, d[c] * gamma[c], nn_row_xhat(p[c], mean, invstd), k1, k2);
	}
}

void
cpu_layernorm_backward(const float *x, const float *dy, float *dx,
					   int rows, int cols, const float *gamma,
					   float *dgamma, float *dbeta, const float *saved)
{
	int			r0;

	/* parameter gradients: a block of columns read along the rows, each column's sums in row order */
	for (int c0 = 0; c0 < cols; c0 += LAYERNORM_COLUMNS)
	{
		int			n = cols - c0 < LAYERNORM_COLUMNS ? cols - c0 : LAYERNORM_COLUMNS;
		double		sum_dy[LAYERNORM_COLUMNS] = {0.0},
					sum_dy_xhat[LAYERNORM_COLUMNS] = {0.0};

		for (int r = 0; r < rows; r++)
		{
			const float *restrict p = x + (int64_t) r * cols + c0;
			const float *restrict g = dy + (int64_t) r * cols + c0;
			float		mean = saved[2 * r],
						invstd = saved[2 * r + 1];

			for (int c = 0; c < n; c++)
			{
				sum_dy[c] += g[c];
				sum_dy_xhat[c] += (double) g[c] * nn_row_xhat(p[c], mean, invstd);
			}
		}
		for (int c = 0; c < n; c++)
		{
			dgamma[c0 + c] = (float) sum_dy_xhat[c];
			dbeta[c0 + c] = (float) sum_dy[c];
		}
	}
	if (dx == NULL)
		return;
	for (r0 = 0; r0 + LAYERNORM_ROWS <= rows; r0 += LAYERNORM_ROWS)
		layernorm_dx_rows(x, dy, dx, r0, LAYERNORM_ROWS, cols, gamma, saved);
	for (; r0 < rows; r0++)
		layernorm_dx_rows(x, dy, dx, r0, 1, cols, gamma, saved);
}
