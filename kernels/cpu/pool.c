/*
 * pool.c -- max, average and global average pooling over planes, with pads
 * (kernels/backend.h's NnPoolGeom).
 *
 * 2x2 max pooling with stride 2, the common case, has an AVX-512 path (chosen
 * at run time, see nn_cpu_isa) that computes exactly what the plain loops do:
 * the same comparisons in the same order, so the same values and argmax.
 * The other windows' forward arithmetic, which the CUDA backend does alike,
 * is kernels/rows.h's.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu/cpu.h"

/*
 * One output row of 2x2/2 max pooling, in vectors of 16 outputs: the row pair
 * r0, r1 is split into even and odd columns, then the four candidates of each
 * window are compared in the order of the plain loop (first maximum wins).
 * base is the plane index of the row's first window's top-left element.
 */
__attribute__((target("avx512f")))
static void
maxpool2_row_avx512(const float *r0, const float *r1, float *dst, int32_t *arg,
					int ow, int w, int base, bool relu_before)
{
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));

	for (int ox = 0; ox < ow; ox += 16)
	{
		int			cnt = ow - ox < 16 ? ow - ox : 16;
		__mmask16	m = (__mmask16) ((1u << cnt) - 1);
		__mmask16	mlo = (__mmask16) (2 * cnt >= 16 ? 0xffff : (1u << (2 * cnt)) - 1);
		__mmask16	mhi = (__mmask16) (2 * cnt > 16 ? (1u << (2 * cnt - 16)) - 1 : 0);
		__m512		a0 = _mm512_maskz_loadu_ps(mlo, r0 + 2 * ox);
		__m512		a1 = _mm512_maskz_loadu_ps(mhi, r0 + 2 * ox + 16);
		__m512		b0 = _mm512_maskz_loadu_ps(mlo, r1 + 2 * ox);
		__m512		b1 = _mm512_maskz_loadu_ps(mhi, r1 + 2 * ox + 16);
		__m512i		at = _mm512_add_epi32(_mm512_set1_epi32(base + 2 * ox), even);
		__m512		best = _mm512_permutex2var_ps(a0, even, a1);
		__m512		v;
		__mmask16	k;

		v = _mm512_permutex2var_ps(a0, odd, a1);
		k = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
		best = _mm512_mask_mov_ps(best, k, v);
		at = _mm512_mask_add_epi32(at, k, at, _mm512_set1_epi32(1));
		/* at is i or i + 1 here; the bottom row's candidates are i + w, i + w + 1 */
		{
			__m512i		i = _mm512_add_epi32(_mm512_set1_epi32(base + 2 * ox), even);

			v = _mm512_permutex2var_ps(b0, even, b1);
			k = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
			best = _mm512_mask_mov_ps(best, k, v);
			at = _mm512_mask_add_epi32(at, k, i, _mm512_set1_epi32(w));
			v = _mm512_permutex2var_ps(b0, odd, b1);
			k = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
			best = _mm512_mask_mov_ps(best, k, v);
			at = _mm512_mask_add_epi32(at, k, i, _mm512_set1_epi32(w + 1));
		}
		if (relu_before)
			at = _mm512_mask_mov_epi32(_mm512_set1_epi32(-1),
									   _mm512_cmp_ps_mask(best, _mm512_setzero_ps(), _CMP_GT_OQ), at);
		_mm512_mask_storeu_ps(dst + ox, m, best);
		_mm512_mask_storeu_epi32(arg + ox, m, at);
	}
}

/*
 * The gradient of one output row of 2x2/2 windows that tile the plane: each of
 * the four elements of a window gets the window's gradient if it is the
 * argmax, else zero; even and odd columns are interleaved back into rows.
 */
__attribute__((target("avx512f")))
static void
maxpool2_backward_row_avx512(const float *g, const int32_t *arg, float *d0, float *d1,
							 int ow, int w, int base)
{
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
	const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));

	for (int ox = 0; ox < ow; ox += 16)
	{
		int			cnt = ow - ox < 16 ? ow - ox : 16;
		__mmask16	m = (__mmask16) ((1u << cnt) - 1);
		__mmask16	mlo = (__mmask16) (2 * cnt >= 16 ? 0xffff : (1u << (2 * cnt)) - 1);
		__mmask16	mhi = (__mmask16) (2 * cnt > 16 ? (1u << (2 * cnt - 16)) - 1 : 0);
		__m512		v = _mm512_maskz_loadu_ps(m, g + ox);
		__m512i		at = _mm512_maskz_loadu_epi32(m, arg + ox);
		__m512i		i = _mm512_add_epi32(_mm512_set1_epi32(base + 2 * ox), even);
		__m512		e,
					o;

		e = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, i), v);
		o = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, _mm512_add_epi32(i, _mm512_set1_epi32(1))), v);
		_mm512_mask_storeu_ps(d0 + 2 * ox, mlo, _mm512_permutex2var_ps(e, lo, o));
		_mm512_mask_storeu_ps(d0 + 2 * ox + 16, mhi, _mm512_permutex2var_ps(e, hi, o));
		i = _mm512_add_epi32(i, _mm512_set1_epi32(w));
		e = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, i), v);
		o = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, _mm512_add_epi32(i, _mm512_set1_epi32(1))), v);
		_mm512_mask_storeu_ps(d1 + 2 * ox, mlo, _mm512_permutex2var_ps(e, lo, o));
		_mm512_mask_storeu_ps(d1 + 2 * ox + 16, mhi, _mm512_permutex2var_ps(e, hi, o));
	}
}

/* 2x2/2 windows with no pads, all whole: the unrolled paths' case */
static bool
pool_2x2_whole(const NnPoolGeom *g)
{
	return g->k == 2 && g->stride == 2 && g->pad == 0 && 2 * g->oh <= g->h && 2 * g->ow <= g->w;
}

void
cpu_maxpool_forward(const float *x, float *y, int32_t *argmax, int64_t planes,
					const NnPoolGeom *g, bool relu_before)
{
	int			h = g->h,
				w = g->w,
				oh = g->oh,
				ow = g->ow;
	bool		simd = nn_cpu_isa() >= NN_ISA_AVX512;

	for (int64_t p = 0; p < planes; p++)
	{
		const float *src = x + p * h * w;
		float	   *dst = y + p * oh * ow;
		int32_t    *arg = argmax + p * oh * ow;

		if (pool_2x2_whole(g) && simd)
		{
			for (int oy = 0; oy < oh; oy++)
				maxpool2_row_avx512(src + 2 * oy * w, src + (2 * oy + 1) * w, dst + oy * ow,
									arg + oy * ow, ow, w, 2 * oy * w, relu_before);
			continue;
		}
		if (pool_2x2_whole(g))
		{
			for (int oy = 0; oy < oh; oy++)
			{
				const float *r0 = src + 2 * oy * w;
				const float *r1 = r0 + w;

				for (int ox = 0; ox < ow; ox++)
				{
					/* first maximum wins, as in torch */
					int			i = 2 * oy * w + 2 * ox;
					float		best = r0[2 * ox];
					int			at = i;

					if (r0[2 * ox + 1] > best)
						best = r0[2 * ox + 1], at = i + 1;
					if (r1[2 * ox] > best)
						best = r1[2 * ox], at = i + w;
					if (r1[2 * ox + 1] > best)
						best = r1[2 * ox + 1], at = i + w + 1;
					dst[oy * ow + ox] = best;
					arg[oy * ow + ox] = relu_before && !(best > 0.0f) ? -1 : at;
				}
			}
			continue;
		}
		for (int oy = 0; oy < oh; oy++)
		{
			int			y0,
						y1;

			nn_row_window_span(oy, g->k, g->stride, g->pad, g->pad_end, h, &y0, &y1);
			for (int ox = 0; ox < ow; ox++)
			{
				int			x0,
							x1;

				nn_row_window_span(ox, g->k, g->stride, g->pad, g->pad_end, w, &x0, &x1);
				arg[oy * ow + ox] = nn_row_maxpool_window(src, w, y0, y1, x0, x1, relu_before,
														  &dst[oy * ow + ox]);
			}
		}
	}
}

void
cpu_maxpool_backward(const float *dy, const int32_t *argmax, float *dx,
					 int64_t planes, const NnPoolGeom *g)
{
	int			h = g->h,
				w = g->w,
				oh = g->oh,
				ow = g->ow;

	/* the windows' size and stride are in argmax already (the GPU twin gathers) */
	if (g->pad == 0 && h == 2 * oh && w == 2 * ow && g->k == 2 && g->stride == 2)
	{
		/* 2x2 windows that tile the plane: every dx is written once, no memset */
		bool		simd = nn_cpu_isa() >= NN_ISA_AVX512;

		for (int64_t p = 0; p < planes; p++)
		{
			const float *gy = dy + p * oh * ow;
			const int32_t *arg = argmax + p * oh * ow;
			float	   *d = dx + p * h * w;

			if (simd)
			{
				for (int oy = 0; oy < oh; oy++)
					maxpool2_backward_row_avx512(gy + oy * ow, arg + oy * ow, d + 2 * oy * w,
												 d + (2 * oy + 1) * w, ow, w, 2 * oy * w);
				continue;
			}
			for (int oy = 0; oy < oh; oy++)
				for (int ox = 0; ox < ow; ox++)
				{
					int			at = arg[oy * ow + ox];
					int			i = 2 * oy * w + 2 * ox;
					float		v = gy[oy * ow + ox];

					d[i] = at == i ? v : 0.0f;
					d[i + 1] = at == i + 1 ? v : 0.0f;
					d[i + w] = at == i + w ? v : 0.0f;
					d[i + w + 1] = at == i + w + 1 ? v : 0.0f;
				}
		}
		return;
	}
	memset(dx, 0, sizeof(float) * planes * h * w);
	for (int64_t p = 0; p < planes; p++)
	{
		const float *gy = dy + p * oh * ow;
		const int32_t *arg = argmax + p * oh * ow;
		float	   *d = dx + p * h * w;

		for (int i = 0; i < oh * ow; i++)
			if (arg[i] >= 0)
				d[arg[i]] += gy[i];
	}
}

/*
 * 1 / the divisor of window (oy, ox) and its extent in the plane: its values,
 * or under count_pad its size within the padded plane.
 */
static float
avgpool_window(const NnPoolGeom *g, int oy, int ox, int *y0, int *y1, int *x0, int *x1)
{
	int			sy = nn_row_window_span(oy, g->k, g->stride, g->pad, g->pad_end, g->h, y0, y1);
	int			sx = nn_row_window_span(ox, g->k, g->stride, g->pad, g->pad_end, g->w, x0, x1);

	return 1.0f / (float) (g->count_pad ? sy * sx : (*y1 - *y0) * (*x1 - *x0));
}

void
cpu_avgpool_forward(const float *x, float *y, int64_t planes, const NnPoolGeom *g)
{
	for (int64_t p = 0; p < planes; p++)
	{
		const float *src = x + p * g->h * g->w;
		float	   *dst = y + p * g->oh * g->ow;

		for (int oy = 0; oy < g->oh; oy++)
			for (int ox = 0; ox < g->ow; ox++)
			{
				int			y0,
							y1,
							x0,
							x1;
				float		scale = avgpool_window(g, oy, ox, &y0, &y1, &x0, &x1);

				dst[oy * g->ow + ox] = nn_row_window_sum(src, g->w, y0, y1, x0, x1) * scale;
			}
	}
}

void
cpu_avgpool_backward(const float *dy, float *dx, int64_t planes, const NnPoolGeom *g)
{
	memset(dx, 0, sizeof(float) * planes * g->h * g->w);
	for (int64_t p = 0; p < planes; p++)
	{
		const float *gy = dy + p * g->oh * g->ow;
		float	   *d = dx + p * g->h * g->w;

		for (int oy = 0; oy < g->oh; oy++)
			for (int ox = 0; ox < g->ow; ox++)
			{
				int			y0,
							y1,
							x0,
							x1;
				float		v = gy[oy * g->ow + ox] * avgpool_window(g, oy, ox, &y0, &y1, &x0, &x1);

				for (int yy = y0; yy < y1; yy++)
					for (int xx = x0; xx < x1; xx++)
						d[yy * g->w + xx] += v;
			}
	}
}

void
cpu_global_avgpool_forward(const float *x, float *y, int64_t planes, int plane)
{
	for (int64_t p = 0; p < planes; p++)
		y[p] = nn_row_plane_mean(x + p * plane, plane);
}

void
cpu_global_avgpool_backward(const float *dy, float *dx, int64_t planes, int plane)
{
	for (int64_t p = 0; p < planes; p++)
	{
		float		g = dy[p] / (float) plane;

		for (int k = 0; k < plane; k++)
			dx[p * plane + k] = g;
	}
}
