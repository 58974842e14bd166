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

void
cpu_im2col(const float *x, int n, const NnConvGeom *g, float *col)
{
	int			plane_out = g->oh * g->ow;
	int64_t		row_len = (int64_t) n * plane_out;

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
	for (int i = 0; i < n; i++)
		for (int f = 0; f < channels; f++)
			memcpy(dst + ((int64_t) f * n + i) * plane,
				   src + ((int64_t) i * channels + f) * plane, sizeof(float) * plane);
}
