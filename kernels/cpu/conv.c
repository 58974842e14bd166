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

/* Output columns ox in [lo, hi) read input columns inside the image (stride 1). */
static void
inside_columns(const NnConvGeom *g, int kj, int *lo, int *hi)
{
	int			first = g->pad - kj;	/* first ox with ix >= 0 */
	int			end = g->w + g->pad - kj;	/* first ox with ix >= w */

	*lo = first > 0 ? first : 0;
	*hi = end < g->ow ? end : g->ow;
}

/* One image's row (ki, kj) of the columns, from its input plane src. */
static void
im2col_plane(const float *src, float *dst, const NnConvGeom *g, int ki, int kj)
{
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
			int			lo,
						hi;

			inside_columns(g, kj, &lo, &hi);
			if (lo > 0)
				memset(d, 0, sizeof(float) * lo);
			if (hi > lo)
				memcpy(d + lo, src + iy * g->w + lo - g->pad + kj, sizeof(float) * (hi - lo));
			if (hi < g->ow)
				memset(d + (hi > lo ? hi : lo), 0, sizeof(float) * (g->ow - (hi > lo ? hi : lo)));
			continue;
		}
		for (int ox = 0; ox < g->ow; ox++)
		{
			int			ix = ox * g->stride - g->pad + kj;

			d[ox] = (ix >= 0 && ix < g->w) ? src[iy * g->w + ix] : 0.0f;
		}
	}
}

/* The adjoint of im2col_plane: dst (an input plane's gradient) += the row at src. */
static void
col2im_plane(const float *src, float *dst, const NnConvGeom *g, int ki, int kj)
{
	for (int oy = 0; oy < g->oh; oy++)
	{
		int			iy = oy * g->stride - g->pad + ki;
		const float *s = src + oy * g->ow;

		if (iy < 0 || iy >= g->h)
			continue;
		if (g->stride == 1)
		{
			int			lo,
						hi;
			float	   *d = dst + iy * g->w - g->pad + kj;

			inside_columns(g, kj, &lo, &hi);
			for (int ox = lo; ox < hi; ox++)
				d[ox] += s[ox];
			continue;
		}
		for (int ox = 0; ox < g->ow; ox++)
		{
			int			ix = ox * g->stride - g->pad + kj;

			if (ix >= 0 && ix < g->w)
				dst[iy * g->w + ix] += s[ox];
		}
	}
}

void
cpu_im2col(const float *x, int n, const NnConvGeom *g, float *col)
{
	int64_t		plane_in = (int64_t) g->h * g->w;
	int64_t		plane_out = (int64_t) g->oh * g->ow;

	for (int ci = 0; ci < g->c; ci++)
		for (int ki = 0; ki < g->k; ki++)
			for (int kj = 0; kj < g->k; kj++)
			{
				float	   *row = col + ((int64_t) (ci * g->k + ki) * g->k + kj) * n * plane_out;

				for (int img = 0; img < n; img++)
					im2col_plane(x + ((int64_t) img * g->c + ci) * plane_in,
								 row + img * plane_out, g, ki, kj);
			}
}

void
cpu_col2im(const float *col, int n, const NnConvGeom *g, float *dx)
{
	int64_t		plane_in = (int64_t) g->h * g->w;
	int64_t		plane_out = (int64_t) g->oh * g->ow;

	for (int ci = 0; ci < g->c; ci++)
		for (int ki = 0; ki < g->k; ki++)
			for (int kj = 0; kj < g->k; kj++)
			{
				const float *row = col + ((int64_t) (ci * g->k + ki) * g->k + kj) * n * plane_out;

				for (int img = 0; img < n; img++)
					col2im_plane(row + img * plane_out,
								 dx + ((int64_t) img * g->c + ci) * plane_in, g, ki, kj);
			}
}

void
cpu_nchw_to_cnhw(const float *src, float *dst, int n, int channels, int plane)
{
	for (int i = 0; i < n; i++)
		for (int f = 0; f < channels; f++)
			memcpy(dst + ((int64_t) f * n + i) * plane,
				   src + ((int64_t) i * channels + f) * plane, sizeof(float) * plane);
}
