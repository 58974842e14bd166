/*
 * cpu.h -- the CPU backend's kernels that live in files of their own (conv.c,
 * pool.c, norm.c, loss.c, seq.c, attn.c, bf16.c), and the scalar functions they share (the row
 * helpers the CUDA backend shares too are in kernels/rows.h).  Private
 * to kernels/cpu: the engine reaches them through the table in backend.h, whose
 * comments say what each one computes.
 */
#ifndef PGDL_KERNELS_CPU_H
#define PGDL_KERNELS_CPU_H

/*
 * The attribute of an ISA variant that must give the baseline's bytes: no
 * fused multiply-adds contracted from a * b + c (attn.c, GELU in backend_cpu.c).
 * clang builds only PostgreSQL's JIT bitcode of these files, which never runs a
 * kernel; it lacks the attribute.
 */
#ifdef __clang__
#define NO_CONTRACT
#else
#define NO_CONTRACT , optimize("fp-contract=off")
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"
#include "rows.h"

/* The ISA of the vector paths is nn_cpu_isa() (backend_cpu.c): the CPU's best under the cap. */

/*
 * e^x for x <= 0, within 2 ulp, with no branch and no call, so that a loop
 * over it vectorizes: x = n ln 2 + r (ln 2 in two parts, Cody and Waite),
 * e^r by Cephes' expf polynomial, 2^n put into the exponent bits.  Under -87,
 * where 2^n would leave the normal range, it is 0 (the true value is under
 * 1.7e-38); NaN stays NaN.  The clamp compares the bits as integers: a float
 * comparison in a select keeps GCC from vectorizing the loop (-ftrapping-math);
 * below zero, a larger magnitude has larger bits.
 */
static inline float
cpu_exp_nonpositive(float x)
{
	uint32_t	xb,
				cb,
				rb;
	uint32_t	nan,
				under;
	float		c,
				n,
				r,
				p = 1.9875691500e-4f,
				scale;
	uint32_t	bits;

	memcpy(&xb, &x, sizeof(xb));
	nan = -(uint32_t) ((xb & 0x7fffffffu) > 0x7f800000u);
	under = -(uint32_t) (xb > 0xc2ae0000u) & ~nan;
	/* NaN computes as -87 (no conversion of NaN to an integer) and is put back at the end */
	cb = (xb & ~(under | nan)) | (0xc2ae0000u & (under | nan));
	memcpy(&c, &cb, sizeof(c));
	/* round to nearest by adding 1.5 * 2^23: rintf would be a call below SSE4.1 */
	n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	r = (c - n * 0.693359375f) - n * -2.12194440e-4f;
	bits = ((uint32_t) ((int32_t) n + 127) << 23) & ~under;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	memcpy(&scale, &bits, sizeof(scale));
	p *= scale;
	memcpy(&rb, &p, sizeof(rb));
	rb = (rb & ~nan) | (xb & nan);
	memcpy(&p, &rb, sizeof(p));
	return p;
}

/*
 * erf by Abramowitz and Stegun 7.1.26 (absolute error under 1.5e-7; 6e-7 as
 * float arithmetic evaluates it), the
 * formula PyTorch's vectorized CPU erf uses for its GELU, with no branch:
 * erf(x) = sign(x) (1 - t P(t) e^(-x^2)), t = 1 / (1 + 0.3275911 |x|).
 */
static inline float
cpu_erf(float x)
{
	float		a = fabsf(x);
	float		t = 1.0f / (0.3275911f * a + 1.0f);
	float		r = 1.061405429f;

	r = r * t - 1.453152027f;
	r = r * t + 1.421413741f;
	r = r * t - 0.284496736f;
	r = r * t + 0.254829592f;
	return copysignf(1.0f - r * t * cpu_exp_nonpositive(-a * a), x);
}

/*
 * tanh, of the tanh layer and of the GRU's candidate state, with no call and
 * no branch so that the loops over it vectorize (glibc's tanhf branches on
 * |x| and mispredicted on a layer's inputs; a double exp a value, which
 * replaced it, still kept the loops scalar: 40% of the GRU benchmark in its
 * gates and exp).  Under 0.625 in magnitude, Cephes' tanhf polynomial;
 * above, (1 - e) / (1 + e) with e = e^-2|x| <= 0.29, where nothing cancels;
 * the one that applies is picked by the bits of |x| as an integer.  Within
 * 3 ulp; 1 at infinity, NaN at NaN.
 */
static inline float
cpu_tanh(float x)
{
	float		a = fabsf(x);
	float		s = x * x;
	float		p = -5.70498872745e-3f;
	float		e = cpu_exp_nonpositive(-2.0f * a);
	float		big = copysignf((1.0f - e) / (1.0f + e), x),
				r;
	uint32_t	ab,
				bb,
				pb,
				small;

	p = p * s + 2.06390887954e-2f;
	p = p * s - 5.37397155531e-2f;
	p = p * s + 1.33314422036e-1f;
	p = p * s - 3.33332819422e-1f;
	p = p * s * x + x;
	memcpy(&ab, &a, sizeof(ab));
	memcpy(&bb, &big, sizeof(bb));
	memcpy(&pb, &p, sizeof(pb));
	small = -(uint32_t) (ab < 0x3f200000u);	/* 0.625f */
	bb = (pb & small) | (bb & ~small);
	memcpy(&r, &bb, sizeof(r));
	return r;
}

/*
 * The logistic function of a GRU's gates, with no call and no branch (see
 * cpu_tanh): e = e^-|x| never overflows; 1 / (1 + e) for x >= 0, e / (1 + e)
 * below, picked by the sign bit.  Within 2 ulp.
 */
static inline float
cpu_sigmoid(float x)
{
	float		e = cpu_exp_nonpositive(-fabsf(x));
	float		pos = 1.0f / (1.0f + e),
				neg = e * pos,
				r;
	uint32_t	xb,
				pb,
				nb,
				sign;

	memcpy(&xb, &x, sizeof(xb));
	memcpy(&pb, &pos, sizeof(pb));
	memcpy(&nb, &neg, sizeof(nb));
	sign = -(xb >> 31);
	pb = (nb & sign) | (pb & ~sign);
	memcpy(&r, &pb, sizeof(r));
	return r;
}

/* bf16.c */
extern void cpu_gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, const float *a, int lda,
						  const float *b, int ldb, float *c, int ldc, float *work);

/* conv.c */
extern void cpu_im2col(const float *x, int n, const NnConvGeom *g, float *col);
extern void cpu_col2im(const float *col, int n, const NnConvGeom *g, float *dx);
extern void cpu_nchw_to_cnhw(const float *src, float *dst, int n, int channels, int plane);

/* pool.c */
extern void cpu_maxpool_forward(const float *x, float *y, int32_t *argmax, int64_t planes,
								const NnPoolGeom *g, bool relu_before);
extern void cpu_maxpool_backward(const float *dy, const int32_t *argmax, float *dx,
								 int64_t planes, const NnPoolGeom *g);
extern void cpu_avgpool_forward(const float *x, float *y, int64_t planes, const NnPoolGeom *g);
extern void cpu_avgpool_backward(const float *dy, float *dx, int64_t planes, const NnPoolGeom *g);
extern void cpu_global_avgpool_forward(const float *x, float *y, int64_t planes, int plane);
extern void cpu_global_avgpool_backward(const float *dy, float *dx, int64_t planes, int plane);

/* norm.c */
extern void cpu_batchnorm_forward(const float *x, float *y, int n, int channels, int plane,
								  const float *gamma, const float *beta,
								  float *running_mean, float *running_var,
								  float eps, float momentum, bool training, float *saved);
extern void cpu_batchnorm_backward(const float *x, const float *dy, float *dx,
								   int n, int channels, int plane,
								   const float *gamma, float *dgamma, float *dbeta,
								   const float *saved);
extern void cpu_layernorm_forward(const float *x, float *y, int rows, int cols,
								  const float *gamma, const float *beta, float eps, float *saved);
extern void cpu_layernorm_backward(const float *x, const float *dy, float *dx,
								   int rows, int cols, const float *gamma,
								   float *dgamma, float *dbeta, const float *saved);

/* loss.c */
extern void cpu_xent_metrics(const float *logits, const float *labels, const float *loss,
							 int rows, int classes, double *sums);
extern void cpu_mse_loss(const float *z, const float *y, const float *w, float *dz, int rows, int k,
						 float scale, double *sums);
extern void cpu_bce_loss(const float *z, const float *y, const float *w, float *dz, int rows, int k,
						 float scale, double *sums);
extern void cpu_huber_loss(const float *z, const float *y, const float *w, float *dz, int rows, int k,
						   float delta, float scale, double *sums);

/* attn.c */
extern void cpu_attention_forward(const float *qkv, float *p, float *o, const NnAttnGeom *g, float *work);
extern void cpu_attention_backward(const float *qkv, const float *p, const float *d_o, float *dqkv,
								   const NnAttnGeom *g, float *work);

/* seq.c */
extern void cpu_embedding_forward(const float *ids, const float *table, float *y, int64_t n,
								  int vocab, int dim);
extern void cpu_embedding_backward(const float *ids, const float *dy, float *dtable, int64_t n,
								   int vocab, int dim);
extern void cpu_softmax_forward(const float *x, float *y, int64_t rows, int cols);
extern void cpu_softmax_backward(const float *y, const float *dy, float *dx, int64_t rows, int cols);
extern void cpu_log_softmax_forward(const float *x, float *y, int64_t rows, int cols);
extern void cpu_log_softmax_backward(const float *y, const float *dy, float *dx, int64_t rows, int cols);
extern void cpu_seq_avgpool_forward(const float *x, float *y, int n, int steps, int dim);
extern void cpu_seq_avgpool_backward(const float *dy, float *dx, int n, int steps, int dim);
extern void cpu_seq_unfold(const float *x, int n, const NnConvGeom *g, float *cols);
extern void cpu_seq_fold(const float *cols, int n, const NnConvGeom *g, float *dx);
extern void cpu_gru_gates_forward(const float *gi, int gi_stride, const float *gh,
								  const float *hprev, int hprev_stride, float *h, int h_stride,
								  float *saved, int saved_stride, float *out, int out_stride,
								  int n, int units);
extern void cpu_gru_gates_backward(float *dh, const float *dout, int dout_stride,
								   const float *hprev, int hprev_stride,
								   const float *saved, int saved_stride,
								   float *dgi, int gi_stride, float *dgh, int n, int units);

#endif
