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

typedef struct NnBackend
{
	const char *name;

	void	   *(*alloc) (size_t bytes);	/* NULL on failure */
	void		(*release) (void *ptr);
	void		(*upload) (void *dst, const void *host_src, size_t bytes);
	void		(*download) (void *host_dst, const void *src, size_t bytes);
	void		(*synchronize) (void);

	void		(*gemm) (bool trans_a, bool trans_b, int m, int n, int k,
						 float alpha, const float *a, int lda,
						 const float *b, int ldb,
						 float beta, float *c, int ldc);

	/* y[r * cols + c] += bias[c] */
	void		(*bias_add_rows) (float *y, const float *bias, int rows, int cols);
	/* y[(i * channels + c) * plane + p] += bias[c], for i < n */
	void		(*bias_add_planes) (float *y, const float *bias, int n, int channels, int plane);
	/* db[c] += sum over rows of dy[r * cols + c] */
	void		(*col_sum) (const float *dy, float *db, int rows, int cols);
	/* db[c] += sum over i, p of dy[(i * channels + c) * plane + p] */
	void		(*plane_sum) (const float *dy, float *db, int n, int channels, int plane);

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
	 * Softmax cross-entropy over rows of logits; labels are class indices stored
	 * as floats (validated by the caller).  Writes dlogits = (softmax - onehot) *
	 * scale and loss[r] = -log softmax[label].
	 */
	void		(*softmax_xent) (const float *logits, const float *labels, float *dlogits,
								 float *loss, int rows, int classes, float scale);

	/* torch.optim.SGD with dampening 0; momentum 0 leaves buf untouched. */
	void		(*sgd_update) (float *p, const float *g, float *buf, int64_t n,
							   float lr, float momentum, float weight_decay, bool nesterov);
	/* torch.optim.Adam (decoupled = false) and AdamW (decoupled = true); step >= 1. */
	void		(*adam_update) (float *p, const float *g, float *m, float *v, int64_t n,
								float lr, float beta1, float beta2, float eps,
								float weight_decay, bool decoupled, int64_t step);
} NnBackend;

extern const NnBackend *nn_backend_cpu(void);

/*
 * The CUDA backend, or NULL with a reason in err ("no device", "not built with
 * CUDA", ...).  Never aborts the process when there is no GPU.
 */
extern const NnBackend *nn_backend_cuda(char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif							/* PGDL_BACKEND_H */
