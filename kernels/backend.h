/*
 * backend.h -- the table of primitives the engine runs on.
 *
 * kernels/cpu implements it on OpenBLAS and plain C loops; kernels/cuda on cuBLAS
 * and its own kernels.  Pointers handed to a backend's functions are memory that
 * backend allocated (host memory for CPU, device memory for CUDA).  Matrices are
 * row-major; gemm computes C = alpha * op(A) * op(B) + beta * C with op(A) M x K,
 * op(B) K x N.  No PostgreSQL headers here.
 */
#ifndef PGDL_BACKEND_H
#define PGDL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

/* A convolution's geometry: input c x h x w, square k x k windows, output oh x ow. */
typedef struct NnConvGeom
{
	int			c, h, w;		/* input */
	int			k, stride, pad;
	int			oh, ow;			/* output */
} NnConvGeom;

/*
 * A pool's k x k windows over planes h x w into oh x ow.  The plane is padded
 * by pad before (top, left) and pad_end after (bottom, right); the pads never
 * win a max, and an average divides by the window's values in the plane, or
 * under count_pad by its size within the padded plane (ONNX's and torch's
 * count_include_pad).  A window that ceil_mode leaves partial is cut at the
 * padded plane's edge.
 */
typedef struct NnPoolGeom
{
	int			h, w;			/* input */
	int			k, stride, pad, pad_end;
	int			oh, ow;			/* output */
	bool		count_pad;
} NnPoolGeom;

/* Attention's heads: n examples of t steps of d features, heads of d / heads; scale 1 / sqrt(d / heads). */
typedef struct NnAttnGeom
{
	int			n, t, d, heads;
	float		scale;
	bool		causal;
} NnAttnGeom;

typedef struct NnBackend
{
	const char *name;
	/* its memory is host memory: the engine may read it and hand it the caller's arrays */
	bool		host_memory;

	void	   *(*alloc) (size_t bytes);	/* NULL on failure */
	void		(*release) (void *ptr);
	void		(*upload) (void *dst, const void *host_src, size_t bytes);
	void		(*download) (void *host_dst, const void *src, size_t bytes);
	void		(*synchronize) (void);
	/* within the backend's memory; the two ranges do not overlap */
	void		(*copy) (void *dst, const void *src, size_t bytes);
	/* x[i] = value for i < n */
	void		(*fill) (float *x, float value, int64_t n);
	/* whether no x[i] is NaN or infinite */
	bool		(*all_finite) (const float *x, int64_t n);

	/*
	 * Uploads that overlap the work already queued (the next batch while a step
	 * runs): host_alloc'd memory (pinned on a GPU) to the backend's, started by
	 * upload_async and perhaps still running when it returns; wait_uploads
	 * returns once every one has landed, and the work queued after it sees them.
	 */
	void	   *(*host_alloc) (size_t bytes);	/* NULL on failure */
	void		(*host_release) (void *ptr);
	void		(*upload_async) (void *dst, const void *host_src, size_t bytes);
	void		(*wait_uploads) (void);

	void		(*gemm) (bool trans_a, bool trans_b, int m, int n, int k,
						 float alpha, const float *a, int lda,
						 const float *b, int ldb,
						 float beta, float *c, int ldc);

	/* y[r * cols + c] += bias[c] */
	void		(*bias_add_rows) (float *y, const float *bias, int rows, int cols);
	/* y[(i * channels + c) * plane + p] += bias[c], for i < n */
	void		(*bias_add_planes) (float *y, const float *bias, int n, int channels, int plane);
	/* the same, then y = max(y, 0): the relu of conv2d -> relu, fused */
	void		(*bias_relu_planes) (float *y, const float *bias, int n, int channels, int plane);
	/* db[c] += sum over rows of dy[r * cols + c] */
	void		(*col_sum) (const float *dy, float *db, int rows, int cols);
	/* db[c] += sum over i, p of dy[(i * channels + c) * plane + p] */
	void		(*plane_sum) (const float *dy, float *db, int n, int channels, int plane);

	/*
	 * Convolution as gemm (see src/nn/layers.c).  im2col lays the n images at x
	 * (each c * h * w) out as col[(ci * k + ki) * k + kj][img * oh * ow + p],
	 * zero where the window hangs over the padding; col2im is its adjoint and
	 * adds into dx (zeroed or holding earlier sums).  nchw_to_cnhw makes
	 * dst[c][i][p] of src[i][c][p], so that n images' gradients are one matrix.
	 * The geometry g is host memory on every backend.
	 */
	void		(*im2col) (const float *x, int n, const NnConvGeom *g, float *col);
	void		(*col2im) (const float *col, int n, const NnConvGeom *g, float *dx);
	void		(*nchw_to_cnhw) (const float *src, float *dst, int n, int channels, int plane);

	/*
	 * Pooling over planes (planes = examples * channels) as g says.  Max pooling saves the index within its plane of each window's
	 * first maximum in argmax; relu_before says a relu was fused into it (see
	 * src/nn/layers.c): a window whose maximum is not positive gets argmax -1 and
	 * no gradient, as the relu would have blocked it.  Backward overwrites dx;
	 * max pooling's takes the windows too, so that a backend may gather each
	 * element's gradient from the windows that hold it rather than scatter.
	 */
	void		(*maxpool_forward) (const float *x, float *y, int32_t *argmax, int64_t planes,
									const NnPoolGeom *g, bool relu_before);
	void		(*maxpool_backward) (const float *dy, const int32_t *argmax, float *dx,
									 int64_t planes, const NnPoolGeom *g);
	void		(*avgpool_forward) (const float *x, float *y, int64_t planes, const NnPoolGeom *g);
	void		(*avgpool_backward) (const float *dy, float *dx, int64_t planes, const NnPoolGeom *g);
	/* y[i] = the mean of plane i of x; backward spreads dy[i] / plane over it */
	void		(*global_avgpool_forward) (const float *x, float *y, int64_t planes, int plane);
	void		(*global_avgpool_backward) (const float *dy, float *dx, int64_t planes, int plane);

	/*
	 * Batch normalization of x[n][channels][plane], per channel.  Training uses
	 * the batch's statistics (accumulated in double), saves mean and 1/std in
	 * saved[2 * channels] and updates the running statistics as torch does;
	 * inference uses the running ones.  Backward overwrites dgamma and dbeta,
	 * and dx unless it is NULL.
	 */
	void		(*batchnorm_forward) (const float *x, float *y, int n, int channels, int plane,
									  const float *gamma, const float *beta,
									  float *running_mean, float *running_var,
									  float eps, float momentum, bool training, float *saved);
	void		(*batchnorm_backward) (const float *x, const float *dy, float *dx,
									   int n, int channels, int plane,
									   const float *gamma, float *dgamma, float *dbeta,
									   const float *saved);

	/*
	 * Activations.  Backward takes the forward output y (all four are functions
	 * of it).  Both directions may run in place: y == x, dx == dy.
	 */
	void		(*relu_forward) (const float *x, float *y, int64_t n);
	void		(*relu_backward) (const float *y, const float *dy, float *dx, int64_t n);
	void		(*leaky_relu_forward) (const float *x, float *y, int64_t n, float alpha);
	void		(*leaky_relu_backward) (const float *y, const float *dy, float *dx, int64_t n, float alpha);
	void		(*sigmoid_forward) (const float *x, float *y, int64_t n);
	void		(*sigmoid_backward) (const float *y, const float *dy, float *dx, int64_t n);
	void		(*tanh_forward) (const float *x, float *y, int64_t n);
	void		(*tanh_backward) (const float *y, const float *dy, float *dx, int64_t n);
	/*
	 * GELU, exact (erf) form as torch's approximate='none': y = x * Phi(x).
	 * Backward takes the forward INPUT x; dx == dy is allowed, y == x is not.
	 */
	void		(*gelu_forward) (const float *x, float *y, int64_t n);
	void		(*gelu_backward) (const float *x, const float *dy, float *dx, int64_t n);

	/*
	 * Layer normalization of each row of x[rows][cols] over its cols, then
	 * times gamma[c] plus beta[c], as torch.nn.LayerNorm (biased variance,
	 * statistics in double, one row after another in column order).  Forward
	 * saves each row's mean and 1/std in saved[2 * rows] (mean, invstd
	 * interleaved); backward overwrites dgamma and dbeta (summed over rows in
	 * row order), and dx unless it is NULL.
	 */
	void		(*layernorm_forward) (const float *x, float *y, int rows, int cols,
									  const float *gamma, const float *beta, float eps,
									  float *saved);
	void		(*layernorm_backward) (const float *x, const float *dy, float *dx,
									   int rows, int cols, const float *gamma,
									   float *dgamma, float *dbeta, const float *saved);

	/*
	 * Softmax cross-entropy over rows of logits; labels are class indices stored
	 * as floats (validated by the caller).  Writes dlogits = (softmax - onehot) *
	 * scale and loss[r] = -log softmax[label].  With w (the backend's memory,
	 * rows floats) row r's gradient is scaled by scale * w[r] instead: a
	 * weighted mean loss (class and row weights); loss[r] stays unweighted.
	 * The losses below take w alike; NULL is the unweighted arithmetic, exactly.
	 */
	void		(*softmax_xent) (const float *logits, const float *labels, const float *w,
								 float *dlogits, float *loss, int rows, int classes, float scale);

	/*
	 * A batch's metrics, returned in sums (host memory on every backend):
	 * sums[0] the loss summed over rows in row order, in double; sums[1] the
	 * examples counted correct.  xent_metrics reads softmax_xent's per-row loss
	 * and counts rows whose first maximal logit is the label.  mse_loss and
	 * bce_loss (on logits, as BCEWithLogitsLoss; correct: every output on the
	 * side of 0 that its target is of 0.5) also write dz = dloss/dz * scale; a
	 * row's loss is the mean over its k outputs, summed in double.
	 */
	void		(*xent_metrics) (const float *logits, const float *labels, const float *loss,
								 int rows, int classes, double *sums);
	void		(*mse_loss) (const float *z, const float *y, const float *w, float *dz, int rows, int k,
							 float scale, double *sums);
	void		(*bce_loss) (const float *z, const float *y, const float *w, float *dz, int rows, int k,
							 float scale, double *sums);
	/* As torch.nn.HuberLoss(delta): dz = clamp(z - y, -delta, delta) * scale; correct: 0. */
	void		(*huber_loss) (const float *z, const float *y, const float *w, float *dz, int rows, int k,
							   float delta, float scale, double *sums);

	/*
	 * Inverted dropout in training: element j is kept, times 1 / (1 - rate),
	 * when nn_rng_unit(seed, stream, counter + j) >= rate (kernels/rng.h), else
	 * zeroed.  Backward recomputes the mask from the same counters.  In place
	 * is allowed (y == x, dx == dy).
	 */
	void		(*dropout_forward) (const float *x, float *y, int64_t n, float rate,
									uint64_t seed, uint64_t stream, uint64_t counter);
	void		(*dropout_backward) (const float *dy, float *dx, int64_t n, float rate,
									 uint64_t seed, uint64_t stream, uint64_t counter);

	/* torch.optim.SGD with dampening 0; momentum 0 leaves buf untouched. */
	void		(*sgd_update) (float *p, const float *g, float *buf, int64_t n,
							   float lr, float momentum, float weight_decay, bool nesterov);
	/* torch.optim.Adam (decoupled = false) and AdamW (decoupled = true); step >= 1. */
	void		(*adam_update) (float *p, const float *g, float *m, float *v, int64_t n,
								float lr, float beta1, float beta2, float eps,
								float weight_decay, bool decoupled, int64_t step);
	/*
	 * torch.optim.RMSprop: sq is square_avg; buf the momentum buffer (NULL
	 * when momentum is 0, and then untouched); gavg the gradients' average
	 * of centered (NULL: not centered).
	 */
	void		(*rmsprop_update) (float *p, const float *g, float *sq, float *buf, float *gavg, int64_t n,
								   float lr, float alpha, float eps, float weight_decay, float momentum);
	/* torch.optim.Adagrad: sum the squared gradients' sum; step >= 1 (lr / (1 + (step - 1) lr_decay)). */
	void		(*adagrad_update) (float *p, const float *g, float *sum, int64_t n, float lr, float lr_decay,
								   float eps, float weight_decay, int64_t step);

	/*
	 * dst[r * dst_stride + j] = src[r * src_stride + j] (or += when add), for
	 * r < rows, j < cols: the graph form's add and concat, and gradients that
	 * add up where an output has several readers.  The ranges do not overlap.
	 */
	void		(*copy_rows) (float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
							  int64_t rows, int64_t cols, bool add);

	/*
	 * Embedding: y[p][d] = table[ids[p]][d] for positions p < n, ids stored
	 * as floats (checked by the caller; one outside [0, vocab) gives a zero row
	 * and no gradient, never a read outside the table).  Backward overwrites
	 * dtable: zeros, then dy's rows added in position order, deterministically.
	 */
	void		(*embedding_forward) (const float *ids, const float *table, float *y, int64_t n,
									  int vocab, int dim);
	void		(*embedding_backward) (const float *ids, const float *dy, float *dtable, int64_t n,
									   int vocab, int dim);

	/*
	 * Softmax over each row of x[rows][cols] (max subtracted, sums in double);
	 * backward from the forward output: dx = y * (dy - sum(dy * y)).  Not in place.
	 */
	void		(*softmax_forward) (const float *x, float *y, int64_t rows, int cols);
	void		(*softmax_backward) (const float *y, const float *dy, float *dx, int64_t rows, int cols);
	/* log-softmax likewise: y = x - max - log(sum(exp(x - max))); dx = dy - exp(y) * sum(dy).  Not in place. */
	void		(*log_softmax_forward) (const float *x, float *y, int64_t rows, int cols);
	void		(*log_softmax_backward) (const float *y, const float *dy, float *dx, int64_t rows, int cols);
	/*
	 * Attention's heads (src/nn/layers.c's attention layer): n examples' rows
	 * of Q K V in qkv[n][t][3 * d], head h's in columns h * dh of each third
	 * (dh = d / heads).  Forward writes P = softmax(scale Q_h K_h^T), zero
	 * above the diagonal when causal, in p[n][heads][t][t] and O_h = P V_h in
	 * o[n][t][d].  Backward, from P and dO[n][t][d], overwrites dqkv[n][t][3 * d]
	 * with dQ = scale dS K_h, dK = scale dS^T Q_h and dV = P^T dO_h, where dS is
	 * the softmax's gradient of dO_h V_h^T.  work: 2 * t * t floats of the
	 * backend's memory; the geometry is host memory on every backend.
	 */
	void		(*attention_forward) (const float *qkv, float *p, float *o, const NnAttnGeom *g, float *work);
	void		(*attention_backward) (const float *qkv, const float *p, const float *d_o, float *dqkv,
									   const NnAttnGeom *g, float *work);

	/*
	 * The mean over the steps of n sequences x[n][steps][dim]: y[n][dim];
	 * backward overwrites dx with dy / steps at every step.
	 */
	void		(*seq_avgpool_forward) (const float *x, float *y, int n, int steps, int dim);
	void		(*seq_avgpool_backward) (const float *dy, float *dx, int n, int steps, int dim);

	/*
	 * One step of a GRU over n examples of `units` (see src/nn/layers.c): gi
	 * (the input's gates r, z, n with b_ih, row stride gi_stride) and gh
	 * ([n][3 * units], W_hh h + b_hh) make the state h (row stride h_stride),
	 * also written to out when it is not NULL; hprev NULL is the zero state.
	 * saved gets r, z, n and W_hn h + b_hn.  Backward takes dh (the later
	 * steps' gradient, [n][units]) plus dout when not NULL, writes the gates'
	 * gradients into dgi (over gi) and dgh ([n][3 * units], n's times r), and
	 * leaves dh * z in dh for the product with W_hh to be added.
	 */
	void		(*gru_gates_forward) (const float *gi, int gi_stride, const float *gh,
									  const float *hprev, int hprev_stride, float *h, int h_stride,
									  float *saved, int saved_stride, float *out, int out_stride,
									  int n, int units);
	void		(*gru_gates_backward) (float *dh, const float *dout, int dout_stride,
									   const float *hprev, int hprev_stride,
									   const float *saved, int saved_stride,
									   float *dgi, int gi_stride, float *dgh, int n, int units);

	/*
	 * softmax_xent with label smoothing s, as torch.nn.CrossEntropyLoss
	 * (label_smoothing = s): the target is (1 - s) * onehot + s / classes, so
	 * dlogits = (softmax - target) * scale and loss[r] = (1 - s) * -log
	 * softmax[label] + s / classes * sum over c of -log softmax[c].
	 */
	void		(*softmax_xent_smooth) (const float *logits, const float *labels, const float *w,
										float *dlogits, float *loss, int rows, int classes, float scale,
										float smoothing);
	/* The sum of x's squares, in double, in a fixed order (returned to the host). */
	double		(*sum_squares) (const float *x, int64_t n);
	/* x *= a */
	void		(*scale) (float *x, float a, int64_t n);

	/*
	 * conv1d's windows over n sequences x[n][steps][features] (g: c features,
	 * w steps, k, stride, pad, ow output steps; h = oh = 1):
	 * cols[i * ow + t][ci * k + j] = x[i][t * stride - pad + j][ci], zero
	 * outside the sequence.  seq_fold is its adjoint and overwrites dx, each
	 * element's terms added in the order of t.
	 */
	void		(*seq_unfold) (const float *x, int n, const NnConvGeom *g, float *cols);
	void		(*seq_fold) (const float *cols, int n, const NnConvGeom *g, float *dx);

	/*
	 * C = op(A) op(B) (alpha 1, beta 0) in bf16: every element of A and B
	 * rounded to bf16 (nearest even; a NaN stays a NaN, a denormal becomes a
	 * zero of its sign, as AVX512_BF16's vcvtne2ps2bf16), their products
	 * summed in fp32 over k in a fixed order, whatever the shapes' split into
	 * tiles: the same bytes each call.  work: nn_bf16_work_floats(m, n, k)
	 * floats of the backend's memory, 64-byte aligned.  NULL on a backend
	 * without it (CUDA): a bf16 model is refused there (nn_model_set_optim,
	 * nn_model_use_backend).  The CPU's runs only where nn_cpu_bf16() says so.
	 */
	void		(*gemm_bf16) (bool trans_a, bool trans_b, int m, int n, int k,
							  const float *a, int lda, const float *b, int ldb,
							  float *c, int ldc, float *work);
} NnBackend;

/* gemm_bf16's tiles: C's columns in blocks of NN_BF16_NR, k in pairs (a bf16 pair is one fp32 lane). */
#define NN_BF16_NR	32

/* The floats of work gemm_bf16 needs: A as m rows of k (even) bf16, B as its pairs of rows, interleaved. */
static inline int64_t
nn_bf16_work_floats(int m, int n, int k)
{
	int64_t		kp = ((int64_t) k + 1) & ~(int64_t) 1;
	int64_t		np = ((int64_t) n + NN_BF16_NR - 1) / NN_BF16_NR * NN_BF16_NR;

	/* bf16 counts halved; A's part rounded up to 64 bytes so that B starts aligned */
	return ((m * kp / 2 + 15) & ~(int64_t) 15) + kp * np / 2;
}

extern const NnBackend *nn_backend_cpu(void);

/*
 * Threads for the CPU backend's BLAS calls (default 1).  The caller decides
 * parallelism (a worker per core, or one backend per query).
 */
extern void nn_set_blas_threads(int threads);

/*
 * The instruction sets the CPU backend's own vector paths come in (2x2 max
 * pooling, col2im), lowest first.  The CPU's best is read from CPUID once;
 * nn_set_cpu_isa caps what the kernels use (default: no cap), so that a
 * lower path can be run, and tested, on a machine that has a higher one.
 * Every variant computes the same values as the baseline loops.  BLAS picks
 * its own kernels: nn_blas_core names the ones it runs.
 */
typedef enum NnCpuIsa
{
	NN_ISA_BASELINE = 0,		/* x86-64's SSE2, as the loops are compiled */
	NN_ISA_AVX2 = 1,
	NN_ISA_AVX512 = 2
} NnCpuIsa;

#define NN_ISA_COUNT 3

extern NnCpuIsa nn_cpu_isa_detected(void);	/* the best this CPU has */
extern void nn_set_cpu_isa(NnCpuIsa cap);	/* a cap above the CPU's best leaves the CPU's */
extern NnCpuIsa nn_cpu_isa(void);	/* what the kernels use: the cap, or the CPU's best below it */
extern const char *nn_cpu_isa_name(NnCpuIsa isa);	/* "baseline", "avx2", "avx512" */
extern const char *nn_blas_core(void);	/* OpenBLAS's kernel set ("Haswell", ...), or "unknown" */

/*
 * bf16 products (gemm_bf16) need AVX512_BF16: nn_cpu_has_bf16 says whether
 * the CPU has it, nn_cpu_bf16 whether the kernels may use it (the CPU has it
 * and the cap of nn_set_cpu_isa is avx512).
 */
extern bool nn_cpu_has_bf16(void);
extern bool nn_cpu_bf16(void);

/*
 * The CUDA backend, or NULL with a reason in err ("no device", "not built with
 * CUDA", ...).  Never aborts the process when there is no GPU.
 */
extern const NnBackend *nn_backend_cuda(char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif							/* PGDL_BACKEND_H */
