/*
 * cpu.h -- CPU-only primitives the backend table does not (yet) cover:
 * im2col/col2im, pooling, batch normalization, layout transposes.
 */
#ifndef PGDL_KERNELS_CPU_H
#define PGDL_KERNELS_CPU_H

#include <stdbool.h>
#include <stdint.h>

typedef struct NnConvGeom
{
	int			c, h, w;		/* input */
	int			k, stride, pad;
	int			oh, ow;			/* output */
} NnConvGeom;

/*
 * col[(ci * k + ki) * k + kj][img * oh * ow + p] for img < n, the n images at x
 * (each c * h * w); zero where the window hangs over the padding.
 */
extern void nn_im2col(const float *x, int n, const NnConvGeom *g, float *col);
/* The adjoint of nn_im2col: dx (already zeroed or holding earlier sums) += col2im(col). */
extern void nn_col2im(const float *col, int n, const NnConvGeom *g, float *dx);

/* dst[i][f][p] = src[f][i * plane + p] (+ bias[f]): channel-major to NCHW and back */
extern void nn_cnhw_to_nchw(const float *src, float *dst, int n, int channels, int plane,
							const float *bias);
/* y[c][p] = max(y[c][p] + bias[c], 0) for one image */
extern void nn_bias_relu_planes(float *y, const float *bias, int channels, int plane);
extern void nn_nchw_to_cnhw(const float *src, float *dst, int n, int channels, int plane);

/*
 * Pooling over planes of h x w (planes = examples * channels), no padding.
 * relu_before: the input went through a relu fused into this pool (see
 * src/nn/layers.c); a window whose maximum is not positive gets argmax -1, so
 * that backward passes it no gradient, as the relu would not have.
 */
extern void nn_maxpool_forward(const float *x, float *y, int32_t *argmax, int64_t planes,
							   int h, int w, int k, int stride, int oh, int ow, bool relu_before);
extern void nn_maxpool_backward(const float *dy, const int32_t *argmax, float *dx,
								int64_t planes, int h, int w, int oh, int ow);
extern void nn_avgpool_forward(const float *x, float *y, int64_t planes,
							   int h, int w, int k, int stride, int oh, int ow);
extern void nn_avgpool_backward(const float *dy, float *dx, int64_t planes,
								int h, int w, int k, int stride, int oh, int ow);

/*
 * Batch normalization over x[n][channels][plane] per channel.  Training mode
 * uses the batch's statistics, saves mean and 1/std in saved[2 * channels] and
 * updates the running statistics as torch does; inference uses the running ones.
 */
extern void nn_batchnorm_forward(const float *x, float *y, int n, int channels, int plane,
								 const float *gamma, const float *beta,
								 float *running_mean, float *running_var,
								 float eps, float momentum, bool training, float *saved);
extern void nn_batchnorm_backward(const float *x, const float *dy, float *dx,
								  int n, int channels, int plane,
								  const float *gamma, float *dgamma, float *dbeta,
								  const float *saved);

#endif
