/*
 * conv.c -- im2col/col2im and a layout transpose for convolution as gemm.
 *
 * The columns are laid out [c*k*k][images*oh*ow] (see backend.h), so one gemm
 * covers a chunk of images (see src/nn/layers.c).  One row of the columns, for
 * one image, is a window offset (ki, kj) of one input channel, sampled at every
 * output position.
 */
#include <string.h>

#include "cpu/cpu.h"

/*
 * "Same" convolutions with stride 1 (output as large as the input: pad on
 * each side = (k - 1) / 2, the usual 3x3 pad 1) have a faster way: a column
 * row of one image, window offset (ki, kj), is the input plane shifted by
 * (ki - pad) * w + kj - pad as one flat array, except for the output rows
 * whose input row is outside (zero) and for the |kj - pad| columns at one side
 * of each row, which the flat shift wraps around to the neighbouring row (zero
 * in the columns, no gradient in col2im).  One copy or one vector loop per
 * row of the columns instead of one per output row: a CNN's later layers have
 * rows of 7 to 28 floats, where the calls and loop set-ups cost more than the
 * copying.  The values are the plain loops' exactly.
 */
static bool
same_stride1(const NnConvGeom *g)
{
	return g->stride == 1 && g->oh == g->h && g->ow == g->w && 2 * g->pad == g->k - 1;
}

/* the wrapped columns [*c0, *c1) of offset kj, and the output rows [*r0, *r1) with input of offset ki */
static void
same_ranges(const NnConvGeom *g, int ki, int kj, int *r0, int *r1, int *c0, int *c1)
{
	*r0 = g->pad - ki > 0 ? g->pad - ki : 0;
	*r1 = g->h + g->pad - ki < g->h ? g->h + g->pad - ki : g->h;
	*c0 = kj < g->pad ? 0 : g->w - (kj - g->pad);
	*c1 = kj < g->pad ? g->pad - kj : g->w;
	if (*c0 < 0)
		*c0 = 0;
	if (*c1 > g->w)
		*c1 = g->w;
}

/* the flat range of column entries whose source is inside the plane, clipped to the rows [r0, r1) */
static void
same_flat(const NnConvGeom *g, int shift, int r0, int r1, int *p0, int *p1)
{
	int			plane = g->h * g->w;

	*p0 = r0 * g->w > -shift ? r0 * g->w : -shift;
	*p1 = r1 * g->w < plane - shift ? r1 * g->w : plane - shift;
	if (*p0 > plane)
		*p0 = plane;
	if (*p1 < *p0)
		*p1 = *p0;
}

#define COL2IM_KEEP	1024		/* h * pad up to this */

/*
 * Column entries in the flat range [p0, p1) of offset (ki, kj) whose shift
 * wraps around to the neighbouring row, into wrap[]; returns how many.
 */
static int
same_wrapped(const NnConvGeom *g, int ki, int kj, int *p0, int *p1, int *wrap)
{
	int			r0,
				r1,
				c0,
				c1,
				nw = 0;

	same_ranges(g, ki, kj, &r0, &r1, &c0, &c1);
	same_flat(g, (ki - g->pad) * g->w + kj - g->pad, r0, r1, p0, p1);
	for (int oy = r0; oy < r1; oy++)
		for (int p = oy * g->w + c0; p < oy * g->w + c1; p++)
			if (p >= *p0 && p < *p1)
				wrap[nw++] = p;
	return nw;
}

/*
 * One flat loop adds the wrapped entries too, into the neighbouring row:
 * those targets are put back after it.  Each target gets one entry per
 * offset, and each plane its offsets in the plain loops' order, so the sums
 * are the same.  Inlined into one function per ISA (below), each of which
 * vectorizes the adds for its registers: the same sums in every one.
 */
static inline __attribute__((always_inline)) void
col2im_same_body(const float *col, int n, const NnConvGeom *g, float *dx)
{
	int			plane = g->h * g->w;
	int64_t		row_len = (int64_t) n * plane;
	int			wrap[COL2IM_KEEP];
	float		keep[COL2IM_KEEP];

	for (int ki = 0; ki < g->k; ki++)
		for (int kj = 0; kj < g->k; kj++)
		{
			int			shift = (ki - g->pad) * g->w + kj - g->pad;
			int			p0,
						p1,
						nw = same_wrapped(g, ki, kj, &p0, &p1, wrap);

			for (int ci = 0; ci < g->c; ci++)
			{
				const float *row = col + ((int64_t) (ci * g->k + ki) * g->k + kj) * row_len;

				for (int img = 0; img < n; img++)
				{
					float	   *restrict dst = dx + ((int64_t) img * g->c + ci) * plane;
					const float *restrict src = row + (int64_t) img * plane;

					for (int i = 0; i < nw; i++)
						keep[i] = dst[wrap[i] + shift];
					for (int p = p0; p < p1; p++)
						dst[p + shift] += src[p];
					for (int i = 0; i < nw; i++)
						dst[wrap[i] + shift] = keep[i];
				}
			}
		}
}

__attribute__((target("avx512f")))
static void
col2im_same_avx512(const float *col, int n, const NnConvGeom *g, float *dx)
{
	col2im_same_body(col, n, g, dx);
}

__attribute__((target("avx2")))
static void
col2im_same_avx2(const float *col, int n, const NnConvGeom *g, float *dx)
{
	col2im_same_body(col, n, g, dx);
}

static void
col2im_same_baseline(const float *col, int n, const NnConvGeom *g, float *dx)
{
	col2im_same_body(col, n, g, dx);
}

/* The variant of the ISA the kernels run (nn_cpu_isa: the CPU's best under pgdl.cpu_isa's cap). */
static void
col2im_same(const float *col, int n, const NnConvGeom *g, float *dx)
{
	switch (nn_cpu_isa())
	{
		case NN_ISA_AVX512:
			col2im_same_avx512(col, n, g, dx);
			break;
		case NN_ISA_AVX2:
			col2im_same_avx2(col, n, g, dx);
			break;
		default:
			col2im_same_baseline(col, n, g, dx);
			break;
	}
}

static void
im2col_same(const float *x, int n, const NnConvGeom *g, float *col)
{
	int			plane = g->h * g->w;
	int64_t		row_len = (int64_t) n * plane;
	int			wrap[COL2IM_KEEP];

	for (int ki = 0; ki < g->k; ki++)
		for (int kj = 0; kj < g->k; kj++)
		{
			int			shift = (ki - g->pad) * g->w + kj - g->pad;
			int			p0,
						p1,
						nw = same_wrapped(g, ki, kj, &p0, &p1, wrap);

			for (int ci = 0; ci < g->c; ci++)
			{
				float	   *row = col + ((int64_t) (ci * g->k + ki) * g->k + kj) * row_len;

				for (int img = 0; img < n; img++)
				{
					const float *src = x + ((int64_t) img * g->c + ci) * plane;
					float	   *dst = row + (int64_t) img * plane;

					memset(dst, 0, sizeof(float) * p0);
					memcpy(dst + p0, src + p0 + shift, sizeof(float) * (p1 - p0));
					memset(dst + p1, 0, sizeof(float) * (plane - p1));
					for (int i = 0; i < nw; i++)
						dst[wrap[i]] = 0.0f;
				}
			}
		}
}

void
cpu_im2col(const float *x, int n, const NnConvGeom *g, float *col)
{
	int			plane_out = g->oh * g->ow;
	int64_t		row_len = (int64_t) n * plane_out;

	if (same_stride1(g) && (int64_t) g->h * g->pad <= COL2IM_KEEP)
	{
		im2col_same(x, n, g, col);
		return;
	}
	for (int ci = 0; ci < g->c; ci++)
		for (int ki = 0; ki < g->k; ki++)
			for (int kj = 0; kj < g->k; kj++)
			{
				float	   *row = col + ((int64_t) (ci * g->k + ki) * g->k + kj) * row_len;

				for (int img = 0; img < n; img++)
				{
					const float *src = x + ((int64_t) img * g->c + ci) * g->h * g->w;
					float	   *dst = row + (int64_t) img * plane_out;

					for (int oy = 0; oy < g->oh; oy++)
					{
						int			iy = oy * g->stride - g->pad + ki;
						float	   *d = dst + oy * g->ow;

						if (iy < 0 || iy >= g->h)
						{
							memset(d, 0, sizeof(float) * g->ow);
							continue;
						}
						if (g->stride == 1)
						{
							/* a shifted row: zeros, a copy, zeros */
							int			x0 = g->pad - kj;	/* first ox with ix >= 0 */
							int			lo = x0 > 0 ? x0 : 0;
							int			hi = g->w + g->pad - kj;	/* first ox with ix >= w */

							if (hi > g->ow)
								hi = g->ow;
							if (lo > 0)
								memset(d, 0, sizeof(float) * lo);
							if (hi > lo)
								memcpy(d + lo, src + iy * g->w + lo - g->pad + kj, sizeof(float) * (hi - lo));
							if (hi < g->ow)
								memset(d + (hi > lo ? hi : lo), 0, sizeof(float) * (g->ow - (hi > lo ? hi : lo)));
						}
						else
						{
							for (int ox = 0; ox < g->ow; ox++)
							{
								int			ix = ox * g->stride - g->pad + kj;

								d[ox] = (ix >= 0 && ix < g->w) ? src[iy * g->w + ix] : 0.0f;
							}
						}
					}
				}
			}
}

void
cpu_col2im(const float *col, int n, const NnConvGeom *g, float *dx)
{
	int			plane_out = g->oh * g->ow;
	int64_t		row_len = (int64_t) n * plane_out;

	if (same_stride1(g) && (int64_t) g->h * g->pad <= COL2IM_KEEP)
	{
		col2im_same(col, n, g, dx);
		return;
	}
	for (int ci = 0; ci < g->c; ci++)
		for (int ki = 0; ki < g->k; ki++)
			for (int kj = 0; kj < g->k; kj++)
			{
				const float *row = col + ((int64_t) (ci * g->k + ki) * g->k + kj) * row_len;

				for (int img = 0; img < n; img++)
				{
					float	   *dst = dx + ((int64_t) img * g->c + ci) * g->h * g->w;
					const float *src = row + (int64_t) img * plane_out;

					for (int oy = 0; oy < g->oh; oy++)
					{
						int			iy = oy * g->stride - g->pad + ki;
						const float *s = src + oy * g->ow;

						if (iy < 0 || iy >= g->h)
							continue;
						if (g->stride == 1)
						{
							int			x0 = g->pad - kj;
							int			lo = x0 > 0 ? x0 : 0;
							int			hi = g->w + g->pad - kj;
							float	   *d;

							if (hi > g->ow)
								hi = g->ow;
							d = dst + iy * g->w - g->pad + kj;
							for (int ox = lo; ox < hi; ox++)
								d[ox] += s[ox];
						}
						else
						{
							for (int ox = 0; ox < g->ow; ox++)
							{
								int			ix = ox * g->stride - g->pad + kj;

								if (ix >= 0 && ix < g->w)
									dst[iy * g->w + ix] += s[ox];
							}
						}
					}
				}
			}
}

void
cpu_nchw_to_cnhw(const float *src, float *dst, int n, int channels, int plane)
{
	if (plane == 1)
	{
		/* a matrix transpose (a weight gradient, see src/nn/layers.c) */
		for (int f = 0; f < channels; f++)
			for (int i = 0; i < n; i++)
				dst[(int64_t) f * n + i] = src[(int64_t) i * channels + f];
		return;
	}
	for (int i = 0; i < n; i++)
		for (int f = 0; f < channels; f++)
			memcpy(dst + ((int64_t) f * n + i) * plane,
				   src + ((int64_t) i * channels + f) * plane, sizeof(float) * plane);
}
