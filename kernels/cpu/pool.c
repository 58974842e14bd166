/*
 * pool.c -- max, average and global average pooling over planes, no padding.
 */
#include <string.h>

#include "cpu/cpu.h"

void
cpu_maxpool_forward(const float *x, float *y, int32_t *argmax, int64_t planes,
					int h, int w, int k, int stride, int oh, int ow, bool relu_before)
{
	for (int64_t p = 0; p < planes; p++)
	{
		const float *src = x + p * h * w;
		float	   *dst = y + p * oh * ow;
		int32_t    *arg = argmax + p * oh * ow;

		if (k == 2 && stride == 2)
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
			for (int ox = 0; ox < ow; ox++)
			{
				int			at = oy * stride * w + ox * stride;
				float		best = src[at];

				for (int ky = 0; ky < k; ky++)
					for (int kx = 0; kx < k; kx++)
					{
						int			i = (oy * stride + ky) * w + ox * stride + kx;

						if (src[i] > best)
							best = src[i], at = i;
					}
				dst[oy * ow + ox] = best;
				arg[oy * ow + ox] = relu_before && !(best > 0.0f) ? -1 : at;
			}
	}
}

void
cpu_maxpool_backward(const float *dy, const int32_t *argmax, float *dx,
					 int64_t planes, int h, int w, int k, int stride, int oh, int ow)
{
	/* the windows' size and stride are in argmax already (the GPU twin gathers) */
	if (h == 2 * oh && w == 2 * ow)
	{
		/* 2x2 windows that tile the plane: every dx is written once, no memset */
		for (int64_t p = 0; p < planes; p++)
		{
			const float *g = dy + p * oh * ow;
			const int32_t *arg = argmax + p * oh * ow;
			float	   *d = dx + p * h * w;

			for (int oy = 0; oy < oh; oy++)
				for (int ox = 0; ox < ow; ox++)
				{
					int			at = arg[oy * ow + ox];
					int			i = 2 * oy * w + 2 * ox;
					float		v = g[oy * ow + ox];

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
		const float *g = dy + p * oh * ow;
		const int32_t *arg = argmax + p * oh * ow;
		float	   *d = dx + p * h * w;

		for (int i = 0; i < oh * ow; i++)
			if (arg[i] >= 0)
				d[arg[i]] += g[i];
	}
}

void
cpu_avgpool_forward(const float *x, float *y, int64_t planes,
					int h, int w, int k, int stride, int oh, int ow)
{
	float		scale = 1.0f / (float) (k * k);

	for (int64_t p = 0; p < planes; p++)
	{
		const float *src = x + p * h * w;
		float	   *dst = y + p * oh * ow;

		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++)
			{
				float		s = 0.0f;

				for (int ky = 0; ky < k; ky++)
					for (int kx = 0; kx < k; kx++)
						s += src[(oy * stride + ky) * w + ox * stride + kx];
				dst[oy * ow + ox] = s * scale;
			}
	}
}

void
cpu_avgpool_backward(const float *dy, float *dx, int64_t planes,
					 int h, int w, int k, int stride, int oh, int ow)
{
	float		scale = 1.0f / (float) (k * k);

	memset(dx, 0, sizeof(float) * planes * h * w);
	for (int64_t p = 0; p < planes; p++)
	{
		const float *g = dy + p * oh * ow;
		float	   *d = dx + p * h * w;

		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++)
			{
				float		v = g[oy * ow + ox] * scale;

				for (int ky = 0; ky < k; ky++)
					for (int kx = 0; kx < k; kx++)
						d[(oy * stride + ky) * w + ox * stride + kx] += v;
			}
	}
}

void
cpu_global_avgpool_forward(const float *x, float *y, int64_t planes, int plane)
{
	for (int64_t p = 0; p < planes; p++)
	{
		const float *src = x + p * plane;
		float		s = 0.0f;

		for (int k = 0; k < plane; k++)
			s += src[k];
		y[p] = s / (float) plane;
	}
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
