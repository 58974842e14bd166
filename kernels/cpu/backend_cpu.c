/*
 * backend_cpu.c -- the CPU backend: OpenBLAS for gemm, plain loops elsewhere.
 *
 * The loops are written so that GCC vectorizes them at -O3 (restrict pointers,
 * no calls in the body except expf/exp).  Numerics follow torch's CPU kernels
 * closely enough for parity at 1e-4 relative.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "rng.h"

extern void openblas_set_num_threads(int num_threads);

static bool blas_threads_chosen = false;

/*
 * BLAS runs on one thread unless told otherwise.  The first model created
 * applies the default; nothing touches BLAS before that, so a process that
 * forks later (the postmaster) never holds an initialized thread pool.
 */
void
nn_set_blas_threads(int threads)
{
	openblas_set_num_threads(threads < 1 ? 1 : threads);
	blas_threads_chosen = true;
}

/* No cap by default: the kernels use the best the CPU has. */
static NnCpuIsa isa_cap = NN_ISA_AVX512;

NnCpuIsa
nn_cpu_isa_detected(void)
{
	static int	best = -1;		/* the CPU's answer, asked once */

	if (best < 0)
	{
		if (__builtin_cpu_supports("avx512f"))
			best = NN_ISA_AVX512;
		else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
			best = NN_ISA_AVX2;
		else
			best = NN_ISA_BASELINE;
	}
	return (NnCpuIsa) best;
}

void
nn_set_cpu_isa(NnCpuIsa cap)
{
	isa_cap = cap < NN_ISA_BASELINE ? NN_ISA_BASELINE : cap > NN_ISA_AVX512 ? NN_ISA_AVX512 : cap;
}

NnCpuIsa
nn_cpu_isa(void)
{
	NnCpuIsa	best = nn_cpu_isa_detected();

	return isa_cap < best ? isa_cap : best;
}

const char *
nn_cpu_isa_name(NnCpuIsa isa)
{
	static const char *const names[NN_ISA_COUNT] = {"baseline", "avx2", "avx512"};

	return isa >= NN_ISA_BASELINE && isa < NN_ISA_COUNT ? names[isa] : "unknown";
}

/* Weak, so that pgdl still links with a BLAS other than OpenBLAS. */
extern char *openblas_get_corename(void) __attribute__((weak));

const char *
nn_blas_core(void)
{
	const char *core = openblas_get_corename ? openblas_get_corename() : NULL;

	return core != NULL && core[0] != '\0' ? core : "unknown";
}

static void *
cpu_alloc(size_t bytes)
{
	void	   *p;

	/* 64-byte alignment for AVX-512 loads; aligned_alloc wants a multiple */
	bytes = (bytes + 63) & ~(size_t) 63;
	if (bytes == 0)
		bytes = 64;
	p = aligned_alloc(64, bytes);
	return p;
}

static void
cpu_release(void *ptr)
{
	free(ptr);
}

static void
cpu_copy(void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
}

static void
cpu_synchronize(void)
{
}

static void *
cpu_host_alloc(size_t bytes)
{
	return malloc(bytes > 0 ? bytes : 1);
}

static void
cpu_wait_uploads(void)
{
}

static void
cpu_fill(float *x, float value, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = value;
}

/* Branch-free, so that it vectorizes: NaN and infinity have every exponent bit set. */
static bool
cpu_all_finite(const float *v, int64_t n)
{
	uint32_t	bad = 0;

	for (int64_t i = 0; i < n; i++)
	{
		uint32_t	bits;

		memcpy(&bits, &v[i], sizeof(bits));
		bad |= (bits & 0x7f800000u) == 0x7f800000u;
	}
	return bad == 0;
}

static void
cpu_gemm(bool trans_a, bool trans_b, int m, int n, int k,
		 float alpha, const float *a, int lda, const float *b, int ldb,
		 float beta, float *c, int ldc)
{
	/*
	 * One row or one column is a matrix-vector product: sgemm would pack the
	 * whole matrix first, which for one example costs more than the product.
	 */
	if (m == 1)
	{
		cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans, trans_b ? n : k, trans_b ? k : n,
					alpha, b, ldb, a, trans_a ? lda : 1, beta, c, 1);
		return;
	}
	if (n == 1)
	{
		cblas_sgemv(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_a ? k : m, trans_a ? m : k,
					alpha, a, lda, b, trans_b ? 1 : ldb, beta, c, ldc);
		return;
	}
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
				trans_b ? CblasTrans : CblasNoTrans,
				m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void
cpu_bias_add_rows(float *restrict y, const float *restrict bias, int rows, int cols)
{
	for (int r = 0; r < rows; r++)
	{
		float	   *restrict row = y + (size_t) r * cols;

		for (int c = 0; c < cols; c++)
			row[c] += bias[c];
	}
}

static void
cpu_bias_add_planes(float *restrict y, const float *restrict bias, int n, int channels, int plane)
{
	for (int i = 0; i < n; i++)
		for (int c = 0; c < channels; c++)
		{
			float	   *restrict p = y + ((size_t) i * channels + c) * plane;
			float		b = bias[c];

			for (int j = 0; j < plane; j++)
				p[j] += b;
		}
}

static void
cpu_bias_relu_planes(float *restrict y, const float *restrict bias, int n, int channels, int plane)
{
	for (int i = 0; i < n; i++)
		for (int c = 0; c < channels; c++)
		{
			float	   *restrict p = y + ((size_t) i * channels + c) * plane;
			float		b = bias[c];

			/*
			 * Unrolled: as a one-vector loop its speed swung by 45% with where
			 * the linker happened to place it (instruction fetch windows).
			 */
#pragma GCC unroll 4
			for (int j = 0; j < plane; j++)
			{
				float		v = p[j] + b;

				p[j] = v > 0.0f ? v : 0.0f;
			}
		}
}

static void
cpu_col_sum(const float *restrict dy, float *restrict db, int rows, int cols)
{
	for (int r = 0; r < rows; r++)
	{
		const float *restrict row = dy + (size_t) r * cols;

		for (int c = 0; c < cols; c++)
			db[c] += row[c];
	}
}

static void
cpu_plane_sum(const float *restrict dy, float *restrict db, int n, int channels, int plane)
{
	for (int i = 0; i < n; i++)
		for (int c = 0; c < channels; c++)
		{
			const float *restrict p = dy + ((size_t) i * channels + c) * plane;
			float		part[8] = {0};
			float		s = 0.0f;
			int			j = 0;

			/* eight running sums: a fixed order that the compiler can vectorize */
			for (; j + 8 <= plane; j += 8)
				for (int k = 0; k < 8; k++)
					part[k] += p[j + k];
			for (; j < plane; j++)
				s += p[j];
			for (int k = 0; k < 8; k++)
				s += part[k];
			db[c] += s;
		}
}

/*
 * Activations may run in place (y == x, dx == dy): each element is read before
 * it is written, at the same index, so there is no loop-carried dependence
 * (ivdep saves the vectorizer's run-time overlap checks, which would send the
 * in-place case down the scalar path).  Loads are unconditional so that the
 * selects vectorize instead of branching.
 */
static void
cpu_relu_forward(const float *x, float *y, int64_t n)
{
#pragma GCC ivdep
	for (int64_t i = 0; i < n; i++)
	{
		float		v = x[i];

		y[i] = v > 0.0f ? v : 0.0f;
	}
}

static void
cpu_relu_backward(const float *y, const float *dy, float *dx, int64_t n)
{
#pragma GCC ivdep
	for (int64_t i = 0; i < n; i++)
	{
		float		g = dy[i];

		dx[i] = y[i] > 0.0f ? g : 0.0f;
	}
}

static void
cpu_leaky_relu_forward(const float *x, float *y, int64_t n, float alpha)
{
#pragma GCC ivdep
	for (int64_t i = 0; i < n; i++)
	{
		float		v = x[i];

		y[i] = v > 0.0f ? v : v * alpha;
	}
}

static void
cpu_leaky_relu_backward(const float *y, const float *dy, float *dx,
						int64_t n, float alpha)
{
#pragma GCC ivdep
	for (int64_t i = 0; i < n; i++)
	{
		float		g = dy[i];

		dx[i] = y[i] > 0.0f ? g : g * alpha;
	}
}

static void
cpu_sigmoid_forward(const float *x, float *y, int64_t n)
{
#pragma GCC ivdep
	for (int64_t i = 0; i < n; i++)
		y[i] = nn_row_sigmoid(x[i]);
}

static void
cpu_sigmoid_backward(const float *y, const float *dy, float *dx, int64_t n)
{
#pragma GCC ivdep
	for (int64_t i = 0; i < n; i++)
		dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

static void
cpu_tanh_forward(const float *x, float *y, int64_t n)
{
#pragma GCC ivdep
	for (int64_t i = 0; i < n; i++)
		y[i] = cpu_tanh(x[i]);
}

static void
cpu_tanh_backward(const float *y, const float *dy, float *dx, int64_t n)
{
#pragma GCC ivdep
	for (int64_t i = 0; i < n; i++)
		dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

/*
 * Phi(x) = (1 + erf(x / sqrt 2)) / 2; d/dx x Phi(x) = Phi(x) + x phi(x).
 * erf and exp are cpu.h's branch-free ones, so that the loops vectorize:
 * glibc's erff and expf, one call a value, took 40% of the attention
 * benchmark's time (perf, -e cpu-clock).
 */
#define GELU_RSQRT2		0.70710678118654752f
#define GELU_RSQRT2PI	0.39894228040143268f

static inline __attribute__((always_inline)) void
gelu_forward_body(const float *x, float *y, int64_t n)
{
#pragma GCC ivdep
	for (int64_t i = 0; i < n; i++)
	{
		float		v = x[i];

		y[i] = 0.5f * v * (1.0f + cpu_erf(v * GELU_RSQRT2));
	}
}

static inline __attribute__((always_inline)) void
gelu_backward_body(const float *x, const float *dy, float *dx, int64_t n)
{
#pragma GCC ivdep
	for (int64_t i = 0; i < n; i++)
	{
		float		v = x[i];
		float		cdf = 0.5f * (1.0f + cpu_erf(v * GELU_RSQRT2));
		float		pdf = GELU_RSQRT2PI * cpu_exp_nonpositive(-0.5f * v * v);

		dx[i] = dy[i] * (cdf + v * pdf);
	}
}

/*
 * GELU's loops once per ISA (nn_cpu_isa picks), wider vectors for the same
 * operations: no contraction into fused multiply-adds (AVX-512 has them), so
 * every variant rounds as the baseline does and gives its values, bit for bit.
 */
#define GELU_VARIANT(isa, attrs) \
	attrs static void gelu_forward_##isa(const float *x, float *y, int64_t n) \
	{ gelu_forward_body(x, y, n); } \
	attrs static void gelu_backward_##isa(const float *x, const float *dy, float *dx, int64_t n) \
	{ gelu_backward_body(x, dy, dx, n); }

GELU_VARIANT(avx512, __attribute__((target("avx512f") NO_CONTRACT)))
GELU_VARIANT(avx2, __attribute__((target("avx2") NO_CONTRACT)))
GELU_VARIANT(baseline, )

static void
cpu_gelu_forward(const float *x, float *y, int64_t n)
{
	NnCpuIsa	isa = nn_cpu_isa();

	if (isa == NN_ISA_AVX512)
		gelu_forward_avx512(x, y, n);
	else if (isa == NN_ISA_AVX2)
		gelu_forward_avx2(x, y, n);
	else
		gelu_forward_baseline(x, y, n);
}

static void
cpu_gelu_backward(const float *x, const float *dy, float *dx, int64_t n)
{
	NnCpuIsa	isa = nn_cpu_isa();

	if (isa == NN_ISA_AVX512)
		gelu_backward_avx512(x, dy, dx, n);
	else if (isa == NN_ISA_AVX2)
		gelu_backward_avx2(x, dy, dx, n);
	else
		gelu_backward_baseline(x, dy, dx, n);
}

static void
cpu_softmax_xent(const float *restrict logits, const float *restrict labels, const float *restrict w,
				 float *restrict dlogits, float *restrict loss, int rows, int classes, float scale)
{
	for (int r = 0; r < rows; r++)
	{
		const float *restrict z = logits + (size_t) r * classes;
		float	   *restrict dz = dlogits + (size_t) r * classes;
		int			label = (int) labels[r];
		float		s = w ? scale * w[r] : scale;
		float		max = z[0];
		float		sum = 0.0f;
		float		inv;

		for (int c = 1; c < classes; c++)
			max = z[c] > max ? z[c] : max;
		for (int c = 0; c < classes; c++)
		{
			dz[c] = expf(z[c] - max);
			sum += dz[c];
		}
		loss[r] = -(z[label] - max - logf(sum));
		inv = s / sum;
		for (int c = 0; c < classes; c++)
			dz[c] *= inv;
		dz[label] -= s;
	}
}

static void
cpu_softmax_xent_smooth(const float *restrict logits, const float *restrict labels, const float *restrict w,
						float *restrict dlogits, float *restrict loss, int rows, int classes, float scale,
						float smoothing)
{
	float		off = smoothing / (float) classes;

	for (int r = 0; r < rows; r++)
	{
		const float *restrict z = logits + (size_t) r * classes;
		float	   *restrict dz = dlogits + (size_t) r * classes;
		int			label = (int) labels[r];
		float		s = w ? scale * w[r] : scale;
		float		max = z[0];
		float		sum = 0.0f;
		float		lse,
					nll_sum = 0.0f,
					inv;

		for (int c = 1; c < classes; c++)
			max = z[c] > max ? z[c] : max;
		for (int c = 0; c < classes; c++)
		{
			dz[c] = expf(z[c] - max);
			sum += dz[c];
		}
		lse = max + logf(sum);
		for (int c = 0; c < classes; c++)
			nll_sum += lse - z[c];
		loss[r] = (1.0f - smoothing) * (lse - z[label]) + off * nll_sum;
		inv = s / sum;
		for (int c = 0; c < classes; c++)
			dz[c] = dz[c] * inv - off * s;
		dz[label] -= (1.0f - smoothing) * s;
	}
}

static double
cpu_sum_squares(const float *x, int64_t n)
{
	double		s = 0.0;

	for (int64_t i = 0; i < n; i++)
		s += (double) x[i] * x[i];
	return s;
}

static void
cpu_scale(float *x, float a, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		x[i] *= a;
}

static void
cpu_dropout_forward(const float *x, float *y, int64_t n, float rate,
					uint64_t seed, uint64_t stream, uint64_t counter)
{
	float		scale = 1.0f / (1.0f - rate);

	for (int64_t j = 0; j < n; j++)
		y[j] = nn_rng_unit(seed, stream, counter + j) >= rate ? x[j] * scale : 0.0f;
}

static void
cpu_dropout_backward(const float *dy, float *dx, int64_t n, float rate,
					 uint64_t seed, uint64_t stream, uint64_t counter)
{
	float		scale = 1.0f / (1.0f - rate);

	for (int64_t j = 0; j < n; j++)
		dx[j] = nn_rng_unit(seed, stream, counter + j) >= rate ? dy[j] * scale : 0.0f;
}

static void
cpu_sgd_update(float *restrict p, const float *restrict g, float *restrict buf, int64_t n,
			   float lr, float momentum, float weight_decay, bool nesterov)
{
	if (momentum == 0.0f)
	{
		for (int64_t i = 0; i < n; i++)
			p[i] -= lr * (g[i] + weight_decay * p[i]);
		return;
	}
	if (nesterov)
	{
		for (int64_t i = 0; i < n; i++)
		{
			float		d = g[i] + weight_decay * p[i];
			float		b = momentum * buf[i] + d;

			buf[i] = b;
			p[i] -= lr * (d + momentum * b);
		}
		return;
	}
	for (int64_t i = 0; i < n; i++)
	{
		float		d = g[i] + weight_decay * p[i];
		float		b = momentum * buf[i] + d;

		buf[i] = b;
		p[i] -= lr * b;
	}
}

static void
cpu_adam_update(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
				int64_t n, float lr, float beta1, float beta2, float eps,
				float weight_decay, bool decoupled, int64_t step)
{
	NnAdamStep	s = nn_row_adam_step(lr, beta1, beta2, eps, weight_decay, decoupled, step);

	for (int64_t i = 0; i < n; i++)
		nn_row_adam(&p[i], &m[i], &v[i], g[i], s);
}

static void
cpu_rmsprop_update(float *restrict p, const float *restrict g, float *restrict sq, float *restrict buf,
				   float *restrict gavg, int64_t n, float lr, float alpha, float eps, float weight_decay,
				   float momentum)
{
	NnSquareStep s = nn_row_rmsprop_step(lr, alpha, eps, weight_decay, momentum);

	for (int64_t i = 0; i < n; i++)
		nn_row_rmsprop(&p[i], &sq[i], buf ? &buf[i] : NULL, gavg ? &gavg[i] : NULL, g[i], s);
}

static void
cpu_adagrad_update(float *restrict p, const float *restrict g, float *restrict sum, int64_t n,
				   float lr, float lr_decay, float eps, float weight_decay, int64_t step)
{
	NnSquareStep s = nn_row_adagrad_step(lr, lr_decay, eps, weight_decay, step);

	for (int64_t i = 0; i < n; i++)
		nn_row_rmsprop(&p[i], &sum[i], NULL, NULL, g[i], s);
}

static void
cpu_copy_rows(float *restrict dst, int64_t dst_stride, const float *restrict src, int64_t src_stride,
			  int64_t rows, int64_t cols, bool add)
{
	for (int64_t r = 0; r < rows; r++)
	{
		float	   *restrict d = dst + r * dst_stride;
		const float *restrict s = src + r * src_stride;

		if (add)
			for (int64_t j = 0; j < cols; j++)
				d[j] += s[j];
		else
			memcpy(d, s, sizeof(float) * cols);
	}
}

static const NnBackend cpu_backend = {
	.name = "cpu",
	.host_memory = true,
	.alloc = cpu_alloc,
	.release = cpu_release,
	.upload = cpu_copy,
	.download = cpu_copy,
	.synchronize = cpu_synchronize,
	.copy = cpu_copy,
	.fill = cpu_fill,
	.all_finite = cpu_all_finite,
	.host_alloc = cpu_host_alloc,
	.host_release = cpu_release,
	.upload_async = cpu_copy,
	.wait_uploads = cpu_wait_uploads,
	.gemm = cpu_gemm,
	.bias_add_rows = cpu_bias_add_rows,
	.bias_add_planes = cpu_bias_add_planes,
	.bias_relu_planes = cpu_bias_relu_planes,
	.col_sum = cpu_col_sum,
	.plane_sum = cpu_plane_sum,
	.im2col = cpu_im2col,
	.col2im = cpu_col2im,
	.nchw_to_cnhw = cpu_nchw_to_cnhw,
	.maxpool_forward = cpu_maxpool_forward,
	.maxpool_backward = cpu_maxpool_backward,
	.avgpool_forward = cpu_avgpool_forward,
	.avgpool_backward = cpu_avgpool_backward,
	.global_avgpool_forward = cpu_global_avgpool_forward,
	.global_avgpool_backward = cpu_global_avgpool_backward,
	.batchnorm_forward = cpu_batchnorm_forward,
	.batchnorm_backward = cpu_batchnorm_backward,
	.relu_forward = cpu_relu_forward,
	.relu_backward = cpu_relu_backward,
	.leaky_relu_forward = cpu_leaky_relu_forward,
	.leaky_relu_backward = cpu_leaky_relu_backward,
	.sigmoid_forward = cpu_sigmoid_forward,
	.sigmoid_backward = cpu_sigmoid_backward,
	.tanh_forward = cpu_tanh_forward,
	.tanh_backward = cpu_tanh_backward,
	.gelu_forward = cpu_gelu_forward,
	.gelu_backward = cpu_gelu_backward,
	.layernorm_forward = cpu_layernorm_forward,
	.layernorm_backward = cpu_layernorm_backward,
	.softmax_xent = cpu_softmax_xent,
	.softmax_xent_smooth = cpu_softmax_xent_smooth,
	.sum_squares = cpu_sum_squares,
	.scale = cpu_scale,
	.xent_metrics = cpu_xent_metrics,
	.mse_loss = cpu_mse_loss,
	.bce_loss = cpu_bce_loss,
	.huber_loss = cpu_huber_loss,
	.dropout_forward = cpu_dropout_forward,
	.dropout_backward = cpu_dropout_backward,
	.sgd_update = cpu_sgd_update,
	.adam_update = cpu_adam_update,
	.rmsprop_update = cpu_rmsprop_update,
	.adagrad_update = cpu_adagrad_update,
	.copy_rows = cpu_copy_rows,
	.embedding_forward = cpu_embedding_forward,
	.embedding_backward = cpu_embedding_backward,
	.softmax_forward = cpu_softmax_forward,
	.softmax_backward = cpu_softmax_backward,
	.log_softmax_forward = cpu_log_softmax_forward,
	.log_softmax_backward = cpu_log_softmax_backward,
	.attention_forward = cpu_attention_forward,
	.attention_backward = cpu_attention_backward,
	.seq_avgpool_forward = cpu_seq_avgpool_forward,
	.seq_avgpool_backward = cpu_seq_avgpool_backward,
	.gru_gates_forward = cpu_gru_gates_forward,
	.gru_gates_backward = cpu_gru_gates_backward,
	.seq_unfold = cpu_seq_unfold,
	.seq_fold = cpu_seq_fold,
	.gemm_bf16 = cpu_gemm_bf16,
};

const NnBackend *
nn_backend_cpu(void)
{
	if (!blas_threads_chosen)
		nn_set_blas_threads(1);
	return &cpu_backend;
}
