/*
 * backend_cuda.cu -- the CUDA backend: cuBLAS for gemm, small kernels elsewhere.
 *
 * Every function mirrors its twin in kernels/cpu (backend_cpu.c, conv.c,
 * pool.c, norm.c, loss.c, seq.c), written with the same float formulas in the
 * same order so that the two agree to ~1e-5 relative (regress/unit/test_cuda.c
 * checks it); a row's arithmetic that both do alike is kernels/rows.h's, which
 * the kernels call in the thread that owns the row.
 * Reductions accumulate in double through fixed trees, and the adjoints
 * (col2im, pooling backward) gather per input element, so nothing needs
 * atomics and every result is deterministic.
 *
 * The Makefile compiles this file with --fmad=false: no multiply-add is fused,
 * so each product is rounded as on the CPU (costs nothing measurable here, the
 * kernels are bound by memory; cuBLAS is not affected).
 *
 * Everything runs on the legacy default stream of the current device; copies
 * are synchronous, except upload_async's, which run on a stream of their own
 * from pinned memory until wait_uploads.  Initialization never aborts: without a usable device
 * nn_backend_cuda() returns NULL and a reason starting "no device:".  After
 * that the table's functions cannot return errors, so the first one is kept
 * for nn_cuda_last_error().
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C"
{
#include "backend.h"
#include "cuda/cuda_backend.h"
}
#include "rng.h"
#include "rows.h"

#define BLOCK 256				/* threads per block for elementwise kernels */
#define MAX_GRID 65535			/* grid-stride loops cover the rest */
#define COL_TILE 32				/* col_sum: columns per block (one warp wide) */
#define COL_ROWS 16				/* col_sum: row lanes per block */
#define METRIC_BLOCKS 64		/* losses and metrics: a fixed grid, so a fixed order of sums */

static NnBackend cuda_backend;
static const NnBackend *cuda_ready;	/* &cuda_backend once initialized */
static char cuda_init_reason[256];
static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;
static int	cuda_ordinal = -1;	/* the device this process initialized, or tried to */
static cublasHandle_t cuda_blas;
static cudaStream_t cuda_copies;	/* uploads that overlap the compute on the default stream */
/* device scratch: METRIC_BLOCKS partial sums of two doubles, the two totals, a flag */
static double *cuda_scratch;
#define SCRATCH_DOUBLES (2 * METRIC_BLOCKS + 2 + 1)

static bool cuda_failed;
static char cuda_error[512];

/* ---------------------------------------------------------------------------
 * Error bookkeeping
 * ------------------------------------------------------------------------- */

static void cuda_record(const char *fmt,...) __attribute__((format(printf, 1, 2)));

static void
cuda_record(const char *fmt,...)
{
	va_list		ap;

	if (cuda_failed)
		return;
	va_start(ap, fmt);
	vsnprintf(cuda_error, sizeof(cuda_error), fmt, ap);
	va_end(ap);
	cuda_failed = true;
}

static void
cuda_check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess)
		cuda_record("%s failed: %s", what, cudaGetErrorString(e));
}

/* After a kernel launch: a bad configuration or a missing image shows here. */
static void
cuda_launched(const char *kernel)
{
	cudaError_t e = cudaGetLastError();

	if (e != cudaSuccess)
		cuda_record("kernel %s did not launch: %s", kernel, cudaGetErrorString(e));
}

extern "C" const char *
nn_cuda_last_error(void)
{
	return cuda_failed ? cuda_error : NULL;
}

static unsigned
grid_for(int64_t work, int per_block)
{
	int64_t		blocks = (work + per_block - 1) / per_block;

	if (blocks > MAX_GRID)
		blocks = MAX_GRID;
	return blocks < 1 ? 1u : (unsigned) blocks;
}

#define GRID_STRIDE(i, n) \
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
		 i += (int64_t) gridDim.x * blockDim.x)

/*
 * Launch a grid-stride kernel over work items, BLOCK threads a block, and
 * record a failure to launch under the table entry's name.  Nothing to do
 * when there is no work.
 */
template <typename... Params, typename... Args>
static void
launch(const char *name, int64_t work, void (*kernel) (Params...), Args... args)
{
	if (work <= 0)
		return;
	kernel<<<grid_for(work, BLOCK), BLOCK>>>(args...);
	cuda_launched(name);
}

/* ---------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------- */

static void *
cuda_alloc(size_t bytes)
{
	void	   *p = NULL;

	/* cudaMalloc(0) may hand back NULL, which would read as a failure */
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
	{
		/* out of memory is not sticky: clear it so later checks don't see it */
		(void) cudaGetLastError();
		return NULL;
	}
	return p;
}

static void
cuda_release(void *ptr)
{
	if (ptr)
		cuda_check(cudaFree(ptr), "cudaFree");
}

static void
cuda_upload(void *dst, const void *host_src, size_t bytes)
{
	if (bytes)
		cuda_check(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice),
				   "cudaMemcpy (upload)");
}

static void
cuda_download(void *host_dst, const void *src, size_t bytes)
{
	if (bytes)
		cuda_check(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost),
				   "cudaMemcpy (download)");
}

static void
cuda_synchronize(void)
{
	cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

static void *
cuda_host_alloc(size_t bytes)
{
	void	   *p = NULL;

	if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess)
	{
		(void) cudaGetLastError();
		return NULL;
	}
	return p;
}

static void
cuda_host_release(void *ptr)
{
	if (ptr)
		cuda_check(cudaFreeHost(ptr), "cudaFreeHost");
}

/*
 * On a stream that does not wait for the legacy default stream (where the
 * kernels run), from pinned memory: the copy overlaps the step in flight.
 */
static void
cuda_upload_async(void *dst, const void *host_src, size_t bytes)
{
	if (bytes)
		cuda_check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, cuda_copies),
				   "cudaMemcpyAsync (upload)");
}

static void
cuda_wait_uploads(void)
{
	cuda_check(cudaStreamSynchronize(cuda_copies), "cudaStreamSynchronize (uploads)");
}

static void
cuda_copy(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice),
				   "cudaMemcpy (device to device)");
}

__global__ void
fill_kernel(float *x, float value, int64_t n)
{
	GRID_STRIDE(i, n)
		x[i] = value;
}

static void
cuda_fill(float *x, float value, int64_t n)
{
	launch("fill", n, fill_kernel, x, value, n);
}

/* Threads that see a NaN or infinity all store the same 1: the result does not depend on order. */
__global__ void
finite_kernel(const float *x, int64_t n, int *bad)
{
	GRID_STRIDE(i, n)
		if (!isfinite(x[i]))
			*bad = 1;
}

static bool
cuda_all_finite(const float *x, int64_t n)
{
	int		   *bad = (int *) (cuda_scratch + SCRATCH_DOUBLES - 1);
	int			host = 0;

	if (n <= 0)
		return true;
	cuda_check(cudaMemset(bad, 0, sizeof(int)), "cudaMemset");
	launch("all_finite", n, finite_kernel, x, n, bad);
	cuda_download(&host, bad, sizeof(int));
	return host == 0 && !cuda_failed;
}

/* ---------------------------------------------------------------------------
 * gemm
 * ------------------------------------------------------------------------- */

/* C = beta * C for a row-major m x n block (the k == 0 case of gemm). */
__global__ void
scale_rows_kernel(float *c, int m, int n, int ldc, float beta)
{
	GRID_STRIDE(i, (int64_t) m * n)
	{
		int64_t		r = i / n;
		float	   *cell = c + r * ldc + (i - r * n);

		*cell = beta == 0.0f ? 0.0f : beta * *cell;
	}
}

static void
cuda_gemm(bool trans_a, bool trans_b, int m, int n, int k,
		  float alpha, const float *a, int lda, const float *b, int ldb,
		  float beta, float *c, int ldc)
{
	cublasStatus_t st;

	if (m <= 0 || n <= 0)
		return;
	if (k <= 0)
	{
		scale_rows_kernel<<<grid_for((int64_t) m * n, BLOCK), BLOCK>>>(c, m, n, ldc, beta);
		cuda_launched("scale_rows");
		return;
	}

	/*
	 * cuBLAS is column-major, and a row-major matrix read column-major is its
	 * transpose: C^T = op(B)^T op(A)^T, so pass B first and swap m and n.
	 */
	st = cublasSgemm(cuda_blas,
					 trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
					 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
					 n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc);
	if (st != CUBLAS_STATUS_SUCCESS)
		cuda_record("cublasSgemm (m=%d n=%d k=%d) failed: %s",
					m, n, k, cublasGetStatusString(st));
}

/* ---------------------------------------------------------------------------
 * Bias and its gradient
 * ------------------------------------------------------------------------- */

__global__ void
bias_add_rows_kernel(float *y, const float *bias, int64_t total, int cols)
{
	GRID_STRIDE(i, total)
		y[i] += bias[i % cols];
}

static void
cuda_bias_add_rows(float *y, const float *bias, int rows, int cols)
{
	int64_t		total = (int64_t) rows * cols;

	if (rows <= 0 || cols <= 0)
		return;
	launch("bias_add_rows", total, bias_add_rows_kernel, y, bias, total, cols);
}

__global__ void
bias_add_planes_kernel(float *y, const float *bias, int64_t total, int channels, int plane)
{
	GRID_STRIDE(i, total)
		y[i] += bias[(i / plane) % channels];
}

static void
cuda_bias_add_planes(float *y, const float *bias, int n, int channels, int plane)
{
	int64_t		total = (int64_t) n * channels * plane;

	if (n <= 0 || channels <= 0 || plane <= 0)
		return;
	launch("bias_add_planes", total, bias_add_planes_kernel, y, bias, total, channels, plane);
}

__global__ void
bias_relu_planes_kernel(float *y, const float *bias, int64_t total, int channels, int plane)
{
	GRID_STRIDE(i, total)
	{
		float		v = y[i] + bias[(i / plane) % channels];

		y[i] = v > 0.0f ? v : 0.0f;
	}
}

static void
cuda_bias_relu_planes(float *y, const float *bias, int n, int channels, int plane)
{
	int64_t		total = (int64_t) n * channels * plane;

	if (n <= 0 || channels <= 0 || plane <= 0)
		return;
	launch("bias_relu_planes", total, bias_relu_planes_kernel, y, bias, total, channels, plane);
}

/*
 * Each block owns COL_TILE adjacent columns: a warp reads one row's slice of
 * them (coalesced), COL_ROWS warps stride down the rows, and a tree in shared
 * memory adds the COL_ROWS partial sums.
 */
__global__ void
col_sum_kernel(const float *dy, float *db, int rows, int cols)
{
	__shared__ double part[COL_ROWS][COL_TILE + 1];
	int			tx = threadIdx.x;
	int			ty = threadIdx.y;

	for (int64_t c0 = (int64_t) blockIdx.x * COL_TILE; c0 < cols;
		 c0 += (int64_t) gridDim.x * COL_TILE)
	{
		int64_t		c = c0 + tx;
		double		s = 0.0;

		if (c < cols)
			for (int64_t r = ty; r < rows; r += COL_ROWS)
				s += dy[r * cols + c];
		part[ty][tx] = s;
		__syncthreads();
		for (int h = COL_ROWS / 2; h > 0; h >>= 1)
		{
			if (ty < h)
				part[ty][tx] += part[ty + h][tx];
			__syncthreads();
		}
		if (ty == 0 && c < cols)
			db[c] = (float) ((double) db[c] + part[0][tx]);
		__syncthreads();
	}
}

static void
cuda_col_sum(const float *dy, float *db, int rows, int cols)
{
	if (rows <= 0 || cols <= 0)
		return;
	col_sum_kernel<<<grid_for(cols, COL_TILE), dim3(COL_TILE, COL_ROWS)>>>(dy, db, rows, cols);
	cuda_launched("col_sum");
}

/* One block per channel; its threads walk the n planes of that channel. */
__global__ void
plane_sum_kernel(const float *dy, float *db, int n, int channels, int plane)
{
	__shared__ double part[BLOCK];
	int64_t		per_channel = (int64_t) n * plane;

	for (int64_t c = blockIdx.x; c < channels; c += gridDim.x)
	{
		double		s = 0.0;

		for (int64_t j = threadIdx.x; j < per_channel; j += blockDim.x)
		{
			int64_t		i = j / plane;
			int64_t		p = j - i * plane;

			s += dy[(i * channels + c) * plane + p];
		}
		part[threadIdx.x] = s;
		__syncthreads();
		for (int h = BLOCK / 2; h > 0; h >>= 1)
		{
			if ((int) threadIdx.x < h)
				part[threadIdx.x] += part[threadIdx.x + h];
			__syncthreads();
		}
		if (threadIdx.x == 0)
			db[c] = (float) ((double) db[c] + part[0]);
		__syncthreads();
	}
}

static void
cuda_plane_sum(const float *dy, float *db, int n, int channels, int plane)
{
	if (n <= 0 || channels <= 0 || plane <= 0)
		return;
	plane_sum_kernel<<<grid_for(channels, 1), BLOCK>>>(dy, db, n, channels, plane);
	cuda_launched("plane_sum");
}

/* ---------------------------------------------------------------------------
 * Convolution as gemm: im2col, its adjoint, and the channel-major transpose
 * ------------------------------------------------------------------------- */

/* One thread per column entry col[(ci * k + ki) * k + kj][img * oh * ow + oy * ow + ox]. */
__global__ void
im2col_kernel(const float *x, int n, NnConvGeom g, float *col)
{
	int64_t		plane_out = (int64_t) g.oh * g.ow;
	int64_t		row_len = n * plane_out;

	GRID_STRIDE(i, (int64_t) g.c * g.k * g.k * row_len)
	{
		int64_t		row = i / row_len;
		int64_t		img = (i - row * row_len) / plane_out;
		int			p = (int) (i - row * row_len - img * plane_out);
		int			kj = (int) (row % g.k);
		int			ki = (int) (row / g.k % g.k);
		int			ci = (int) (row / g.k / g.k);
		int			iy = p / g.ow * g.stride - g.pad + ki;
		int			ix = p % g.ow * g.stride - g.pad + kj;

		col[i] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ?
			x[((img * g.c + ci) * g.h + iy) * g.w + ix] : 0.0f;
	}
}

/*
 * The adjoint of im2col as a gather: one thread per input element adds the
 * column entries that sampled it, in the order (ki, kj) of the CPU twin's
 * additions, so that no two threads write one element.
 */
__global__ void
col2im_kernel(const float *col, int n, NnConvGeom g, float *dx)
{
	int64_t		plane_out = (int64_t) g.oh * g.ow;
	int64_t		row_len = n * plane_out;

	GRID_STRIDE(i, (int64_t) n * g.c * g.h * g.w)
	{
		int			ix = (int) (i % g.w);
		int			iy = (int) (i / g.w % g.h);
		int			ci = (int) (i / g.w / g.h % g.c);
		int64_t		img = i / g.w / g.h / g.c;
		float		s = dx[i];

		for (int ki = 0; ki < g.k; ki++)
		{
			int			ty = iy + g.pad - ki;	/* oy * stride, if a window row lands here */

			if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.oh)
				continue;
			for (int kj = 0; kj < g.k; kj++)
			{
				int			tx = ix + g.pad - kj;

				if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.ow)
					continue;
				s += col[((int64_t) (ci * g.k + ki) * g.k + kj) * row_len + img * plane_out +
						 (int64_t) (ty / g.stride) * g.ow + tx / g.stride];
			}
		}
		dx[i] = s;
	}
}

/* One thread per destination element dst[c][i][p] = src[i][c][p]. */
__global__ void
nchw_to_cnhw_kernel(const float *src, float *dst, int n, int channels, int plane)
{
	int64_t		per_channel = (int64_t) n * plane;

	GRID_STRIDE(j, per_channel * channels)
	{
		int64_t		c = j / per_channel;
		int64_t		i = (j - c * per_channel) / plane;
		int64_t		p = j - c * per_channel - i * plane;

		dst[j] = src[(i * channels + c) * plane + p];
	}
}

static void
cuda_im2col(const float *x, int n, const NnConvGeom *g, float *col)
{
	int64_t		total = (int64_t) g->c * g->k * g->k * n * g->oh * g->ow;

	launch("im2col", total, im2col_kernel, x, n, *g, col);
}

static void
cuda_col2im(const float *col, int n, const NnConvGeom *g, float *dx)
{
	int64_t		total = (int64_t) n * g->c * g->h * g->w;

	if (total <= 0 || g->oh <= 0 || g->ow <= 0)
		return;
	launch("col2im", total, col2im_kernel, col, n, *g, dx);
}

static void
cuda_nchw_to_cnhw(const float *src, float *dst, int n, int channels, int plane)
{
	int64_t		total = (int64_t) n * channels * plane;

	if (n <= 0 || channels <= 0 || plane <= 0)
		return;
	launch("nchw_to_cnhw", total, nchw_to_cnhw_kernel, src, dst, n, channels, plane);
}

/* ---------------------------------------------------------------------------
 * Pooling: forward one thread per output, backward one thread per input
 * element gathering from the windows that hold it (no atomics)
 * ------------------------------------------------------------------------- */

/*
 * The windows along one axis that hold input position at: [*lo, *hi], pads
 * counted (at is pad further into the padded plane); none when *lo > *hi.
 */
__device__ static void
windows_holding(int at, int k, int stride, int pad, int out, int *lo, int *hi)
{
	at += pad;
	*lo = at < k ? 0 : (at - k) / stride + 1;
	*hi = at / stride < out - 1 ? at / stride : out - 1;
}

/* 1 / the divisor of window (oy, ox), as the CPU twin's avgpool_window, and its extent in the plane. */
__device__ static float
avgpool_window(NnPoolGeom g, int oy, int ox, int *y0, int *y1, int *x0, int *x1)
{
	int			sy = nn_row_window_span(oy, g.k, g.stride, g.pad, g.pad_end, g.h, y0, y1);
	int			sx = nn_row_window_span(ox, g.k, g.stride, g.pad, g.pad_end, g.w, x0, x1);

	return 1.0f / (float) (g.count_pad ? sy * sx : (*y1 - *y0) * (*x1 - *x0));
}

__global__ void
maxpool_forward_kernel(const float *x, float *y, int32_t *argmax, int64_t total, NnPoolGeom g,
					   bool relu_before)
{
	GRID_STRIDE(i, total)
	{
		int64_t		plane = i / ((int64_t) g.oh * g.ow);
		int			q = (int) (i - plane * g.oh * g.ow);
		int			y0,
					y1,
					x0,
					x1;

		nn_row_window_span(q / g.ow, g.k, g.stride, g.pad, g.pad_end, g.h, &y0, &y1);
		nn_row_window_span(q % g.ow, g.k, g.stride, g.pad, g.pad_end, g.w, &x0, &x1);
		/* first maximum wins, as in torch and the CPU twin */
		argmax[i] = nn_row_maxpool_window(x + plane * g.h * g.w, g.w, y0, y1, x0, x1, relu_before, &y[i]);
	}
}

__global__ void
maxpool_backward_kernel(const float *dy, const int32_t *argmax, float *dx, int64_t total, NnPoolGeom g)
{
	GRID_STRIDE(i, total)
	{
		int64_t		plane = i / ((int64_t) g.h * g.w);
		int			at = (int) (i - plane * g.h * g.w);
		const float *gy = dy + plane * g.oh * g.ow;
		const int32_t *arg = argmax + plane * g.oh * g.ow;
		int			y0,
					y1,
					x0,
					x1;
		float		s = 0.0f;

		windows_holding(at / g.w, g.k, g.stride, g.pad, g.oh, &y0, &y1);
		windows_holding(at % g.w, g.k, g.stride, g.pad, g.ow, &x0, &x1);
		for (int oy = y0; oy <= y1; oy++)
			for (int ox = x0; ox <= x1; ox++)
				if (arg[oy * g.ow + ox] == at)
					s += gy[oy * g.ow + ox];
		dx[i] = s;
	}
}

__global__ void
avgpool_forward_kernel(const float *x, float *y, int64_t total, NnPoolGeom g)
{
	GRID_STRIDE(i, total)
	{
		int64_t		plane = i / ((int64_t) g.oh * g.ow);
		int			q = (int) (i - plane * g.oh * g.ow);
		int			y0,
					y1,
					x0,
					x1;
		float		scale = avgpool_window(g, q / g.ow, q % g.ow, &y0, &y1, &x0, &x1);

		y[i] = nn_row_window_sum(x + plane * g.h * g.w, g.w, y0, y1, x0, x1) * scale;
	}
}

/* gathers in the order the CPU twin scatters: windows row by row */
__global__ void
avgpool_backward_kernel(const float *dy, float *dx, int64_t total, NnPoolGeom g)
{
	GRID_STRIDE(i, total)
	{
		int64_t		plane = i / ((int64_t) g.h * g.w);
		int			at = (int) (i - plane * g.h * g.w);
		const float *gy = dy + plane * g.oh * g.ow;
		int			y0,
					y1,
					x0,
					x1;
		float		s = 0.0f;

		windows_holding(at / g.w, g.k, g.stride, g.pad, g.oh, &y0, &y1);
		windows_holding(at % g.w, g.k, g.stride, g.pad, g.ow, &x0, &x1);
		for (int oy = y0; oy <= y1; oy++)
			for (int ox = x0; ox <= x1; ox++)
			{
				int			wy0,
							wy1,
							wx0,
							wx1;

				s += gy[oy * g.ow + ox] * avgpool_window(g, oy, ox, &wy0, &wy1, &wx0, &wx1);
			}
		dx[i] = s;
	}
}

/* One thread per plane, adding in the CPU twin's order: planes are small. */
__global__ void
global_avgpool_forward_kernel(const float *x, float *y, int64_t planes, int plane)
{
	GRID_STRIDE(p, planes)
		y[p] = nn_row_plane_mean(x + p * plane, plane);
}

__global__ void
global_avgpool_backward_kernel(const float *dy, float *dx, int64_t total, int plane)
{
	GRID_STRIDE(i, total)
		dx[i] = dy[i / plane] / (float) plane;
}

static void
cuda_maxpool_forward(const float *x, float *y, int32_t *argmax, int64_t planes,
					 const NnPoolGeom *g, bool relu_before)
{
	int64_t		total = planes * g->oh * g->ow;

	launch("maxpool_forward", total, maxpool_forward_kernel, x, y, argmax, total, *g, relu_before);
}

static void
cuda_maxpool_backward(const float *dy, const int32_t *argmax, float *dx,
					  int64_t planes, const NnPoolGeom *g)
{
	int64_t		total = planes * g->h * g->w;

	launch("maxpool_backward", total, maxpool_backward_kernel, dy, argmax, dx, total, *g);
}

static void
cuda_avgpool_forward(const float *x, float *y, int64_t planes, const NnPoolGeom *g)
{
	int64_t		total = planes * g->oh * g->ow;

	launch("avgpool_forward", total, avgpool_forward_kernel, x, y, total, *g);
}

static void
cuda_avgpool_backward(const float *dy, float *dx, int64_t planes, const NnPoolGeom *g)
{
	int64_t		total = planes * g->h * g->w;

	launch("avgpool_backward", total, avgpool_backward_kernel, dy, dx, total, *g);
}

static void
cuda_global_avgpool_forward(const float *x, float *y, int64_t planes, int plane)
{
	if (planes <= 0 || plane <= 0)
		return;
	launch("global_avgpool_forward", planes, global_avgpool_forward_kernel, x, y, planes, plane);
}

static void
cuda_global_avgpool_backward(const float *dy, float *dx, int64_t planes, int plane)
{
	int64_t		total = planes * plane;

	launch("global_avgpool_backward", total, global_avgpool_backward_kernel, dy, dx, total, plane);
}

/* ---------------------------------------------------------------------------
 * Batch normalization: one block per channel, sums in double through a fixed
 * tree in shared memory (deterministic), as plane_sum
 * ------------------------------------------------------------------------- */

/* The block's sum of v; every thread of the block calls it and gets the sum. */
__device__ static double
block_sum(double v, double *part)
{
	part[threadIdx.x] = v;
	__syncthreads();
	for (int h = BLOCK / 2; h > 0; h >>= 1)
	{
		if ((int) threadIdx.x < h)
			part[threadIdx.x] += part[threadIdx.x + h];
		__syncthreads();
	}
	v = part[0];
	__syncthreads();			/* part is free again */
	return v;
}

/* Where the j-th of channel c's n * plane values lives in x[n][channels][plane]. */
__device__ static int64_t
channel_at(int64_t j, int c, int channels, int plane)
{
	int64_t		i = j / plane;

	return (i * channels + c) * plane + (j - i * plane);
}

__global__ void
batchnorm_forward_kernel(const float *x, float *y, int n, int channels, int plane,
						 const float *gamma, const float *beta,
						 float *running_mean, float *running_var,
						 float eps, float momentum, bool training, float *saved)
{
	__shared__ double part[BLOCK];
	int64_t		count = (int64_t) n * plane;

	for (int c = blockIdx.x; c < channels; c += gridDim.x)
	{
		float		mean,
					invstd,
					scale,
					shift;

		if (training)
		{
			double		m = 0.0,
						sq = 0.0;

			for (int64_t j = threadIdx.x; j < count; j += blockDim.x)
				m += x[channel_at(j, c, channels, plane)];
			m = block_sum(m, part) / (double) count;
			for (int64_t j = threadIdx.x; j < count; j += blockDim.x)
			{
				double		d = x[channel_at(j, c, channels, plane)] - m;

				sq += d * d;
			}
			sq = block_sum(sq, part);
			mean = (float) m;
			invstd = nn_row_invstd(sq / (double) count, eps);
			if (threadIdx.x == 0)
			{
				saved[c] = mean;
				saved[channels + c] = invstd;
				nn_row_batchnorm_running(&running_mean[c], &running_var[c], mean, sq, count, momentum);
			}
		}
		else
		{
			mean = running_mean[c];
			invstd = nn_row_running_invstd(running_var[c], eps);
		}
		nn_row_batchnorm_affine(gamma[c], beta[c], mean, invstd, &scale, &shift);
		for (int64_t j = threadIdx.x; j < count; j += blockDim.x)
		{
			int64_t		at = channel_at(j, c, channels, plane);

			y[at] = x[at] * scale + shift;
		}
	}
}

__global__ void
batchnorm_backward_kernel(const float *x, const float *dy, float *dx,
						  int n, int channels, int plane,
						  const float *gamma, float *dgamma, float *dbeta,
						  const float *saved)
{
	__shared__ double part[BLOCK];
	int64_t		count = (int64_t) n * plane;

	for (int c = blockIdx.x; c < channels; c += gridDim.x)
	{
		float		mean = saved[c];
		float		invstd = saved[channels + c];
		double		sum_dy = 0.0,
					sum_dy_xhat = 0.0;
		float		gi = gamma[c] * invstd,
					k1,
					k2;

		for (int64_t j = threadIdx.x; j < count; j += blockDim.x)
		{
			int64_t		at = channel_at(j, c, channels, plane);

			sum_dy += dy[at];
			sum_dy_xhat += (double) dy[at] * nn_row_xhat(x[at], mean, invstd);
		}
		sum_dy = block_sum(sum_dy, part);
		sum_dy_xhat = block_sum(sum_dy_xhat, part);
		if (threadIdx.x == 0)
		{
			dgamma[c] = (float) sum_dy_xhat;
			dbeta[c] = (float) sum_dy;
		}
		if (dx == NULL)
			continue;
		/* dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)) */
		k1 = (float) (sum_dy / (double) count);
		k2 = (float) (sum_dy_xhat / (double) count);
		for (int64_t j = threadIdx.x; j < count; j += blockDim.x)
		{
			int64_t		at = channel_at(j, c, channels, plane);

			dx[at] = nn_row_norm_dx(gi, dy[at], nn_row_xhat(x[at], mean, invstd), k1, k2);
		}
	}
}

static void
cuda_batchnorm_forward(const float *x, float *y, int n, int channels, int plane,
					   const float *gamma, const float *beta,
					   float *running_mean, float *running_var,
					   float eps, float momentum, bool training, float *saved)
{
	if (n <= 0 || channels <= 0 || plane <= 0)
		return;
	batchnorm_forward_kernel<<<grid_for(channels, 1), BLOCK>>>(x, y, n, channels, plane,
															   gamma, beta, running_mean,
															   running_var, eps, momentum,
															   training, saved);
	cuda_launched("batchnorm_forward");
}

static void
cuda_batchnorm_backward(const float *x, const float *dy, float *dx,
						int n, int channels, int plane,
						const float *gamma, float *dgamma, float *dbeta,
						const float *saved)
{
	if (n <= 0 || channels <= 0 || plane <= 0)
		return;
	batchnorm_backward_kernel<<<grid_for(channels, 1), BLOCK>>>(x, dy, dx, n, channels, plane,
																gamma, dgamma, dbeta, saved);
	cuda_launched("batchnorm_backward");
}

/*
 * Layer normalization: a block per row for its statistics and dx, a block per
 * column for dgamma and dbeta; block_sum's fixed tree, so a fixed order.
 */
__global__ void
layernorm_forward_kernel(const float *x, float *y, int rows, int cols,
						 const float *gamma, const float *beta, float eps, float *saved)
{
	__shared__ double part[BLOCK];

	for (int r = blockIdx.x; r < rows; r += gridDim.x)
	{
		const float *p = x + (int64_t) r * cols;
		float	   *q = y + (int64_t) r * cols;
		double		m = 0.0,
					sq = 0.0;
		float		mean,
					invstd;

		for (int c = threadIdx.x; c < cols; c += blockDim.x)
			m += p[c];
		m = block_sum(m, part) / (double) cols;
		for (int c = threadIdx.x; c < cols; c += blockDim.x)
		{
			double		d = p[c] - m;

			sq += d * d;
		}
		sq = block_sum(sq, part);
		mean = (float) m;
		invstd = nn_row_invstd(sq / (double) cols, eps);
		if (threadIdx.x == 0)
		{
			saved[2 * r] = mean;
			saved[2 * r + 1] = invstd;
		}
		for (int c = threadIdx.x; c < cols; c += blockDim.x)
			q[c] = nn_row_layernorm(p[c], mean, invstd, gamma[c], beta[c]);
	}
}

__global__ void
layernorm_param_grad_kernel(const float *x, const float *dy, int rows, int cols,
							float *dgamma, float *dbeta, const float *saved)
{
	__shared__ double part[BLOCK];

	for (int c = blockIdx.x; c < cols; c += gridDim.x)
	{
		double		sum_dy = 0.0,
					sum_dy_xhat = 0.0;

		for (int r = threadIdx.x; r < rows; r += blockDim.x)
		{
			float		g = dy[(int64_t) r * cols + c];

			sum_dy += g;
			sum_dy_xhat += (double) g * nn_row_xhat(x[(int64_t) r * cols + c], saved[2 * r], saved[2 * r + 1]);
		}
		sum_dy = block_sum(sum_dy, part);
		sum_dy_xhat = block_sum(sum_dy_xhat, part);
		if (threadIdx.x == 0)
		{
			dgamma[c] = (float) sum_dy_xhat;
			dbeta[c] = (float) sum_dy;
		}
	}
}

__global__ void
layernorm_input_grad_kernel(const float *x, const float *dy, float *dx, int rows, int cols,
							const float *gamma, const float *saved)
{
	__shared__ double part[BLOCK];

	for (int r = blockIdx.x; r < rows; r += gridDim.x)
	{
		const float *p = x + (int64_t) r * cols;
		const float *d = dy + (int64_t) r * cols;
		float	   *q = dx + (int64_t) r * cols;
		float		mean = saved[2 * r],
					invstd = saved[2 * r + 1];
		double		sum_g = 0.0,
					sum_g_xhat = 0.0;
		float		k1,
					k2;

		for (int c = threadIdx.x; c < cols; c += blockDim.x)
		{
			float		g = d[c] * gamma[c];

			sum_g += g;
			sum_g_xhat += (double) g * nn_row_xhat(p[c], mean, invstd);
		}
		sum_g = block_sum(sum_g, part);
		sum_g_xhat = block_sum(sum_g_xhat, part);
		/* dx = invstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma */
		k1 = (float) (sum_g / (double) cols);
		k2 = (float) (sum_g_xhat / (double) cols);
		for (int c = threadIdx.x; c < cols; c += blockDim.x)
			q[c] = nn_row_norm_dx(invstd, d[c] * gamma[c], nn_row_xhat(p[c], mean, invstd), k1, k2);
	}
}

static void
cuda_layernorm_forward(const float *x, float *y, int rows, int cols,
					   const float *gamma, const float *beta, float eps, float *saved)
{
	if (rows <= 0 || cols <= 0)
		return;
	layernorm_forward_kernel<<<grid_for(rows, 1), BLOCK>>>(x, y, rows, cols, gamma, beta, eps, saved);
	cuda_launched("layernorm_forward");
}

static void
cuda_layernorm_backward(const float *x, const float *dy, float *dx,
						int rows, int cols, const float *gamma,
						float *dgamma, float *dbeta, const float *saved)
{
	if (rows <= 0 || cols <= 0)
		return;
	layernorm_param_grad_kernel<<<grid_for(cols, 1), BLOCK>>>(x, dy, rows, cols, dgamma, dbeta, saved);
	cuda_launched("layernorm_backward");
	if (dx == NULL)
		return;
	layernorm_input_grad_kernel<<<grid_for(rows, 1), BLOCK>>>(x, dy, dx, rows, cols, gamma, saved);
	cuda_launched("layernorm_backward");
}

/* ---------------------------------------------------------------------------
 * Activations (backward from the forward output y)
 * ------------------------------------------------------------------------- */

__global__ void
relu_forward_kernel(const float *x, float *y, int64_t n)
{
	GRID_STRIDE(i, n)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void
relu_backward_kernel(const float *y, const float *dy, float *dx, int64_t n)
{
	GRID_STRIDE(i, n)
		dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void
leaky_relu_forward_kernel(const float *x, float *y, int64_t n, float alpha)
{
	GRID_STRIDE(i, n)
		y[i] = x[i] > 0.0f ? x[i] : x[i] * alpha;
}

__global__ void
leaky_relu_backward_kernel(const float *y, const float *dy, float *dx, int64_t n, float alpha)
{
	GRID_STRIDE(i, n)
		dx[i] = y[i] > 0.0f ? dy[i] : dy[i] * alpha;
}

__global__ void
sigmoid_forward_kernel(const float *x, float *y, int64_t n)
{
	GRID_STRIDE(i, n)
		y[i] = nn_row_sigmoid(x[i]);
}

__global__ void
sigmoid_backward_kernel(const float *y, const float *dy, float *dx, int64_t n)
{
	GRID_STRIDE(i, n)
		dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

__global__ void
tanh_forward_kernel(const float *x, float *y, int64_t n)
{
	GRID_STRIDE(i, n)
		y[i] = tanhf(x[i]);
}

__global__ void
tanh_backward_kernel(const float *y, const float *dy, float *dx, int64_t n)
{
	GRID_STRIDE(i, n)
		dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

/* GELU, exact; backward from the input x (see kernels/backend.h) */
#define GELU_RSQRT2		0.70710678118654752f
#define GELU_RSQRT2PI	0.39894228040143268f

__global__ void
gelu_forward_kernel(const float *x, float *y, int64_t n)
{
	GRID_STRIDE(i, n)
		y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * GELU_RSQRT2));
}

__global__ void
gelu_backward_kernel(const float *x, const float *dy, float *dx, int64_t n)
{
	GRID_STRIDE(i, n)
	{
		float		cdf = 0.5f * (1.0f + erff(x[i] * GELU_RSQRT2));
		float		pdf = GELU_RSQRT2PI * expf(-0.5f * x[i] * x[i]);

		dx[i] = dy[i] * (cdf + x[i] * pdf);
	}
}

static void
cuda_relu_forward(const float *x, float *y, int64_t n)
{
	launch("relu_forward", n, relu_forward_kernel, x, y, n);
}

static void
cuda_relu_backward(const float *y, const float *dy, float *dx, int64_t n)
{
	launch("relu_backward", n, relu_backward_kernel, y, dy, dx, n);
}

static void
cuda_leaky_relu_forward(const float *x, float *y, int64_t n, float alpha)
{
	launch("leaky_relu_forward", n, leaky_relu_forward_kernel, x, y, n, alpha);
}

static void
cuda_leaky_relu_backward(const float *y, const float *dy, float *dx, int64_t n, float alpha)
{
	launch("leaky_relu_backward", n, leaky_relu_backward_kernel, y, dy, dx, n, alpha);
}

static void
cuda_sigmoid_forward(const float *x, float *y, int64_t n)
{
	launch("sigmoid_forward", n, sigmoid_forward_kernel, x, y, n);
}

static void
cuda_sigmoid_backward(const float *y, const float *dy, float *dx, int64_t n)
{
	launch("sigmoid_backward", n, sigmoid_backward_kernel, y, dy, dx, n);
}

static void
cuda_tanh_forward(const float *x, float *y, int64_t n)
{
	launch("tanh_forward", n, tanh_forward_kernel, x, y, n);
}

static void
cuda_tanh_backward(const float *y, const float *dy, float *dx, int64_t n)
{
	launch("tanh_backward", n, tanh_backward_kernel, y, dy, dx, n);
}

static void
cuda_gelu_forward(const float *x, float *y, int64_t n)
{
	launch("gelu_forward", n, gelu_forward_kernel, x, y, n);
}

static void
cuda_gelu_backward(const float *x, const float *dy, float *dx, int64_t n)
{
	launch("gelu_backward", n, gelu_backward_kernel, x, dy, dx, n);
}

/* ---------------------------------------------------------------------------
 * Softmax cross-entropy: one warp per row
 * ------------------------------------------------------------------------- */

__device__ static float
warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

__device__ static float
warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__global__ void
softmax_xent_kernel(const float *logits, const float *labels, const float *w, float *dlogits,
					float *loss, int rows, int classes, float scale)
{
	int			lane = threadIdx.x & 31;
	int64_t		warp = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int64_t		warps = ((int64_t) gridDim.x * blockDim.x) >> 5;

	/* the whole warp shares a row, so the shuffles below never diverge */
	for (int64_t r = warp; r < rows; r += warps)
	{
		const float *z = logits + r * classes;
		float	   *dz = dlogits + r * classes;
		int			label = (int) labels[r];
		float		s = w ? scale * w[r] : scale;
		float		zmax = -INFINITY;
		float		sum = 0.0f;
		float		inv;

		for (int c = lane; c < classes; c += 32)
			zmax = z[c] > zmax ? z[c] : zmax;
		zmax = warp_max(zmax);
		for (int c = lane; c < classes; c += 32)
		{
			float		e = expf(z[c] - zmax);

			dz[c] = e;
			sum += e;
		}
		sum = warp_sum(sum);
		inv = s / sum;
		for (int c = lane; c < classes; c += 32)
			dz[c] = dz[c] * inv - (c == label ? s : 0.0f);
		if (lane == 0)
		{
			/* labels are validated by the caller; never read outside the row */
			loss[r] = label >= 0 && label < classes ? -(z[label] - zmax - logf(sum)) : NAN;
		}
	}
}

static void
cuda_softmax_xent(const float *logits, const float *labels, const float *w, float *dlogits,
				  float *loss, int rows, int classes, float scale)
{
	if (rows <= 0 || classes <= 0)
		return;
	launch("softmax_xent", (int64_t) rows * 32, softmax_xent_kernel, logits, labels, w, dlogits,
		   loss, rows, classes, scale);
}

__global__ void
softmax_xent_smooth_kernel(const float *logits, const float *labels, const float *w, float *dlogits,
						   float *loss, int rows, int classes, float scale, float smoothing)
{
	int			lane = threadIdx.x & 31;
	int64_t		warp = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int64_t		warps = ((int64_t) gridDim.x * blockDim.x) >> 5;
	float		off = smoothing / (float) classes;

	for (int64_t r = warp; r < rows; r += warps)
	{
		const float *z = logits + r * classes;
		float	   *dz = dlogits + r * classes;
		int			label = (int) labels[r];
		float		s = w ? scale * w[r] : scale;
		float		zmax = -INFINITY;
		float		sum = 0.0f,
					nll_sum = 0.0f;
		float		inv,
					lse;

		for (int c = lane; c < classes; c += 32)
			zmax = z[c] > zmax ? z[c] : zmax;
		zmax = warp_max(zmax);
		for (int c = lane; c < classes; c += 32)
		{
			float		e = expf(z[c] - zmax);

			dz[c] = e;
			sum += e;
		}
		sum = warp_sum(sum);
		lse = zmax + logf(sum);
		for (int c = lane; c < classes; c += 32)
			nll_sum += lse - z[c];
		nll_sum = warp_sum(nll_sum);
		inv = s / sum;
		for (int c = lane; c < classes; c += 32)
			dz[c] = dz[c] * inv - off * s - (c == label ? (1.0f - smoothing) * s : 0.0f);
		if (lane == 0)
			loss[r] = label >= 0 && label < classes
				? (1.0f - smoothing) * (lse - z[label]) + off * nll_sum : NAN;
	}
}

static void
cuda_softmax_xent_smooth(const float *logits, const float *labels, const float *w, float *dlogits,
						 float *loss, int rows, int classes, float scale, float smoothing)
{
	if (rows <= 0 || classes <= 0)
		return;
	launch("softmax_xent_smooth", (int64_t) rows * 32, softmax_xent_smooth_kernel, logits, labels, w, dlogits,
		   loss, rows, classes, scale, smoothing);
}

__global__ void
scale_kernel(float *x, float a, int64_t n)
{
	GRID_STRIDE(i, n)
		x[i] *= a;
}

static void
cuda_scale(float *x, float a, int64_t n)
{
	if (n > 0)
		launch("scale", n, scale_kernel, x, a, n);
}

/* ---------------------------------------------------------------------------
 * Losses and a batch's metrics.  A fixed grid of METRIC_BLOCKS blocks: thread
 * t of the grid takes rows t, t + G, ... in order, each block adds its
 * threads' sums through a fixed tree, and one block adds the blocks' sums:
 * the same order on every run (no atomics), though not the CPU's row order.
 * ------------------------------------------------------------------------- */

/* Each block's sums of a and b into part[2 * block], part[2 * block + 1]. */
__device__ static void
block_pair_sum(double a, double b, double *part)
{
	__shared__ double sa[BLOCK],
				sb[BLOCK];

	sa[threadIdx.x] = a;
	sb[threadIdx.x] = b;
	__syncthreads();
	for (int h = BLOCK / 2; h > 0; h >>= 1)
	{
		if ((int) threadIdx.x < h)
		{
			sa[threadIdx.x] += sa[threadIdx.x + h];
			sb[threadIdx.x] += sb[threadIdx.x + h];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0)
	{
		part[2 * blockIdx.x] = sa[0];
		part[2 * blockIdx.x + 1] = sb[0];
	}
}

/* One thread adds the blocks' sums in block order. */
__global__ void
metric_total_kernel(const double *part, double *total)
{
	double		a = 0.0,
				b = 0.0;

	for (int i = 0; i < METRIC_BLOCKS; i++)
	{
		a += part[2 * i];
		b += part[2 * i + 1];
	}
	total[0] = a;
	total[1] = b;
}

__global__ void
xent_metrics_kernel(const float *logits, const float *labels, const float *loss,
					int rows, int classes, double *part)
{
	double		loss_sum = 0.0,
				correct = 0.0;

	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < rows;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		correct += nn_row_argmax(logits + r * classes, classes) == (int) labels[r] ? 1.0 : 0.0;
		loss_sum += loss[r];
	}
	block_pair_sum(loss_sum, correct, part);
}

__global__ void
mse_loss_kernel(const float *z, const float *y, const float *w, float *dz, int rows, int k, float scale,
				double *part)
{
	double		loss_sum = 0.0;

	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < rows;
		 r += (int64_t) gridDim.x * blockDim.x)
		loss_sum += nn_row_mse(z + r * k, y + r * k, dz + r * k, k, w ? scale * w[r] : scale);
	block_pair_sum(loss_sum, 0.0, part);
}

__global__ void
huber_loss_kernel(const float *z, const float *y, const float *w, float *dz, int rows, int k, float delta,
				  float scale, double *part)
{
	double		loss_sum = 0.0;

	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < rows;
		 r += (int64_t) gridDim.x * blockDim.x)
		loss_sum += nn_row_huber(z + r * k, y + r * k, dz + r * k, k, delta, w ? scale * w[r] : scale);
	block_pair_sum(loss_sum, 0.0, part);
}

__global__ void
bce_loss_kernel(const float *z, const float *y, const float *w, float *dz, int rows, int k, float scale,
				double *part)
{
	double		loss_sum = 0.0,
				correct = 0.0;

	for (int64_t r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; r < rows;
		 r += (int64_t) gridDim.x * blockDim.x)
	{
		bool		all_right;

		loss_sum += nn_row_bce(z + r * k, y + r * k, dz + r * k, k, w ? scale * w[r] : scale, &all_right);
		correct += all_right ? 1.0 : 0.0;
	}
	block_pair_sum(loss_sum, correct, part);
}

/* The two totals, after the kernel that left the blocks' sums in the scratch. */
static void
metric_totals(const char *name, double *sums)
{
	cuda_launched(name);
	metric_total_kernel<<<1, 1>>>(cuda_scratch, cuda_scratch + 2 * METRIC_BLOCKS);
	cuda_launched("metric_total");
	cuda_download(sums, cuda_scratch + 2 * METRIC_BLOCKS, 2 * sizeof(double));
	if (cuda_failed)
		sums[0] = sums[1] = NAN;
}

__global__ void
sum_squares_kernel(const float *x, int64_t n, double *part)
{
	double		s = 0.0;

	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		s += (double) x[i] * x[i];
	block_pair_sum(s, 0.0, part);
}

/* In the metrics' fixed order: the same sum on every run. */
static double
cuda_sum_squares(const float *x, int64_t n)
{
	double		sums[2];

	if (n <= 0)
		return 0.0;
	sum_squares_kernel<<<METRIC_BLOCKS, BLOCK>>>(x, n, cuda_scratch);
	metric_totals("sum_squares", sums);
	return sums[0];
}

static void
cuda_xent_metrics(const float *logits, const float *labels, const float *loss,
				  int rows, int classes, double *sums)
{
	xent_metrics_kernel<<<METRIC_BLOCKS, BLOCK>>>(logits, labels, loss, rows, classes, cuda_scratch);
	metric_totals("xent_metrics", sums);
}

static void
cuda_mse_loss(const float *z, const float *y, const float *w, float *dz, int rows, int k, float scale,
			  double *sums)
{
	mse_loss_kernel<<<METRIC_BLOCKS, BLOCK>>>(z, y, w, dz, rows, k, scale, cuda_scratch);
	metric_totals("mse_loss", sums);
}

static void
cuda_huber_loss(const float *z, const float *y, const float *w, float *dz, int rows, int k, float delta,
				float scale, double *sums)
{
	huber_loss_kernel<<<METRIC_BLOCKS, BLOCK>>>(z, y, w, dz, rows, k, delta, scale, cuda_scratch);
	metric_totals("huber_loss", sums);
}

static void
cuda_bce_loss(const float *z, const float *y, const float *w, float *dz, int rows, int k, float scale,
			  double *sums)
{
	bce_loss_kernel<<<METRIC_BLOCKS, BLOCK>>>(z, y, w, dz, rows, k, scale, cuda_scratch);
	metric_totals("bce_loss", sums);
}

/* ---------------------------------------------------------------------------
 * Dropout: the mask from the counter-based generator of kernels/rng.h, the
 * same bits as on the CPU
 * ------------------------------------------------------------------------- */

__global__ void
dropout_kernel(const float *x, float *y, int64_t n, float rate, float scale,
			   uint64_t seed, uint64_t stream, uint64_t counter)
{
	GRID_STRIDE(j, n)
		y[j] = nn_rng_unit(seed, stream, counter + (uint64_t) j) >= rate ? x[j] * scale : 0.0f;
}

static void
cuda_dropout_forward(const float *x, float *y, int64_t n, float rate,
					 uint64_t seed, uint64_t stream, uint64_t counter)
{
	float		scale = 1.0f / (1.0f - rate);

	launch("dropout_forward", n, dropout_kernel, x, y, n, rate, scale, seed, stream, counter);
}

static void
cuda_dropout_backward(const float *dy, float *dx, int64_t n, float rate,
					  uint64_t seed, uint64_t stream, uint64_t counter)
{
	float		scale = 1.0f / (1.0f - rate);

	launch("dropout_backward", n, dropout_kernel, dy, dx, n, rate, scale, seed, stream, counter);
}

/* ---------------------------------------------------------------------------
 * Optimizers
 * ------------------------------------------------------------------------- */

__global__ void
sgd_plain_kernel(float *p, const float *g, int64_t n, float lr, float weight_decay)
{
	GRID_STRIDE(i, n)
		p[i] -= lr * (g[i] + weight_decay * p[i]);
}

__global__ void
sgd_momentum_kernel(float *p, const float *g, float *buf, int64_t n, float lr,
					float momentum, float weight_decay, bool nesterov)
{
	GRID_STRIDE(i, n)
	{
		float		d = g[i] + weight_decay * p[i];
		float		b = momentum * buf[i] + d;

		buf[i] = b;
		p[i] -= lr * (nesterov ? d + momentum * b : b);
	}
}

static void
cuda_sgd_update(float *p, const float *g, float *buf, int64_t n,
				float lr, float momentum, float weight_decay, bool nesterov)
{
	if (momentum == 0.0f)
		launch("sgd_update", n, sgd_plain_kernel, p, g, n, lr, weight_decay);
	else
		launch("sgd_update", n, sgd_momentum_kernel, p, g, buf, n, lr, momentum,
			   weight_decay, nesterov);
}

__global__ void
adam_kernel(float *p, const float *g, float *m, float *v, int64_t n, NnAdamStep s)
{
	GRID_STRIDE(i, n)
		nn_row_adam(&p[i], &m[i], &v[i], g[i], s);
}

static void
cuda_adam_update(float *p, const float *g, float *m, float *v, int64_t n,
				 float lr, float beta1, float beta2, float eps,
				 float weight_decay, bool decoupled, int64_t step)
{
	launch("adam_update", n, adam_kernel, p, g, m, v, n,
		   nn_row_adam_step(lr, beta1, beta2, eps, weight_decay, decoupled, step));
}

/* RMSprop, and Adagrad as RMSprop with alpha 1 and no momentum (kernels/rows.h) */
__global__ void
square_kernel(float *p, const float *g, float *sq, float *buf, float *gavg, int64_t n, NnSquareStep s)
{
	GRID_STRIDE(i, n)
		nn_row_rmsprop(&p[i], &sq[i], buf ? &buf[i] : NULL, gavg ? &gavg[i] : NULL, g[i], s);
}

static void
cuda_rmsprop_update(float *p, const float *g, float *sq, float *buf, float *gavg, int64_t n,
					float lr, float alpha, float eps, float weight_decay, float momentum)
{
	launch("rmsprop_update", n, square_kernel, p, g, sq, buf, gavg, n,
		   nn_row_rmsprop_step(lr, alpha, eps, weight_decay, momentum));
}

static void
cuda_adagrad_update(float *p, const float *g, float *sum, int64_t n, float lr, float lr_decay,
					float eps, float weight_decay, int64_t step)
{
	launch("adagrad_update", n, square_kernel, p, g, sum, (float *) NULL, (float *) NULL, n,
		   nn_row_adagrad_step(lr, lr_decay, eps, weight_decay, step));
}

/* ---------------------------------------------------------------------------
 * The graph form's add and concat: a strided copy or sum of rows
 * ------------------------------------------------------------------------- */

__global__ void
copy_rows_kernel(float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
				 int64_t cols, int64_t n, bool add)
{
	GRID_STRIDE(i, n)
	{
		int64_t		r = i / cols,
					j = i % cols;

		if (add)
			dst[r * dst_stride + j] += src[r * src_stride + j];
		else
			dst[r * dst_stride + j] = src[r * src_stride + j];
	}
}

static void
cuda_copy_rows(float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
			   int64_t rows, int64_t cols, bool add)
{
	if (rows <= 0 || cols <= 0)
		return;
	launch("copy_rows", rows * cols, copy_rows_kernel, dst, dst_stride, src, src_stride, cols,
		   rows * cols, add);
}

/* ---------------------------------------------------------------------------
 * Sequences: embedding, softmax over the last axis, the mean over steps
 * ------------------------------------------------------------------------- */

__global__ void
embedding_forward_kernel(const float *ids, const float *table, float *y, int64_t n, int vocab, int dim)
{
	GRID_STRIDE(i, n * dim)
	{
		int64_t		row = nn_row_embedding_index(ids[i / dim], vocab);

		y[i] = row < 0 ? 0.0f : table[row * dim + i % dim];
	}
}

/* a thread per feature walks the positions in order: the CPU's sums, no atomics */
__global__ void
embedding_backward_kernel(const float *ids, const float *dy, float *dtable, int64_t n, int vocab, int dim)
{
	GRID_STRIDE(d, (int64_t) dim)
	{
		for (int64_t p = 0; p < n; p++)
		{
			int64_t		row = nn_row_embedding_index(ids[p], vocab);

			if (row >= 0)
				dtable[row * dim + d] += dy[p * dim + d];
		}
	}
}

static void
cuda_embedding_forward(const float *ids, const float *table, float *y, int64_t n, int vocab, int dim)
{
	launch("embedding_forward", n * dim, embedding_forward_kernel, ids, table, y, n, vocab, dim);
}

static void
cuda_embedding_backward(const float *ids, const float *dy, float *dtable, int64_t n, int vocab, int dim)
{
	cuda_fill(dtable, 0.0f, (int64_t) vocab * dim);
	launch("embedding_backward", dim, embedding_backward_kernel, ids, dy, dtable, n, vocab, dim);
}

__global__ void
softmax_forward_kernel(const float *x, float *y, int64_t rows, int cols)
{
	GRID_STRIDE(r, rows)
		nn_row_softmax(x + r * cols, y + r * cols, cols);
}

__global__ void
softmax_backward_kernel(const float *y, const float *dy, float *dx, int64_t rows, int cols)
{
	GRID_STRIDE(r, rows)
		nn_row_softmax_backward(y + r * cols, dy + r * cols, dx + r * cols, cols);
}

static void
cuda_softmax_forward(const float *x, float *y, int64_t rows, int cols)
{
	launch("softmax_forward", rows, softmax_forward_kernel, x, y, rows, cols);
}

static void
cuda_softmax_backward(const float *y, const float *dy, float *dx, int64_t rows, int cols)
{
	launch("softmax_backward", rows, softmax_backward_kernel, y, dy, dx, rows, cols);
}

__global__ void
log_softmax_forward_kernel(const float *x, float *y, int64_t rows, int cols)
{
	GRID_STRIDE(r, rows)
		nn_row_log_softmax(x + r * cols, y + r * cols, cols);
}

__global__ void
log_softmax_backward_kernel(const float *y, const float *dy, float *dx, int64_t rows, int cols)
{
	GRID_STRIDE(r, rows)
		nn_row_log_softmax_backward(y + r * cols, dy + r * cols, dx + r * cols, cols);
}

static void
cuda_log_softmax_forward(const float *x, float *y, int64_t rows, int cols)
{
	launch("log_softmax_forward", rows, log_softmax_forward_kernel, x, y, rows, cols);
}

static void
cuda_log_softmax_backward(const float *y, const float *dy, float *dx, int64_t rows, int cols)
{
	launch("log_softmax_backward", rows, log_softmax_backward_kernel, y, dy, dx, rows, cols);
}

__global__ void
causal_mask_kernel(float *s, int64_t n, int t)
{
	GRID_STRIDE(k, n)
	{
		int			j = (int) (k % t),
					i = (int) ((k / t) % t);

		if (j > i)
			s[k] = -INFINITY;
	}
}

static void
cuda_causal_mask(float *s, int64_t mats, int t)
{
	launch("causal_mask", mats * t * t, causal_mask_kernel, s, mats * t * t, t);
}

/*
 * Attention's heads one by one: a cuBLAS product, the mask and the softmax
 * kernels above, a product (the CPU fuses them per row, kernels/cpu/attn.c).
 */
static void
cuda_attention_forward(const float *qkv, float *p, float *o, const NnAttnGeom *g, float *work)
{
	int			t = g->t,
				d = g->d,
				dh = g->d / g->heads;

	for (int e = 0; e < g->n; e++)
		for (int h = 0; h < g->heads; h++)
		{
			const float *q = qkv + (int64_t) e * t * 3 * d + h * dh;
			float	   *ph = p + ((int64_t) e * g->heads + h) * t * t;

			cuda_gemm(false, true, t, t, dh, g->scale, q, 3 * d, q + d, 3 * d, 0.0f, work, t);
			if (g->causal)
				cuda_causal_mask(work, 1, t);
			cuda_softmax_forward(work, ph, t, t);
			cuda_gemm(false, false, t, dh, t, 1.0f, ph, t, q + 2 * d, 3 * d, 0.0f,
					  o + (int64_t) e * t * d + h * dh, d);
		}
}

/* dV = P^T dO, dP = dO V^T, dS = softmax'(dP), dQ = dS K, dK = dS^T Q (scaled), per example and head */
static void
cuda_attention_backward(const float *qkv, const float *p, const float *d_o, float *dqkv, const NnAttnGeom *g,
						float *work)
{
	int			t = g->t,
				d = g->d,
				dh = g->d / g->heads;
	float	   *dp = work,
			   *ds = work + (int64_t) t * t;

	for (int e = 0; e < g->n; e++)
		for (int h = 0; h < g->heads; h++)
		{
			int64_t		at = (int64_t) e * t * 3 * d + h * dh;
			const float *q = qkv + at;
			const float *ph = p + ((int64_t) e * g->heads + h) * t * t;
			const float *dout_h = d_o + (int64_t) e * t * d + h * dh;

			cuda_gemm(true, false, t, dh, t, 1.0f, ph, t, dout_h, d, 0.0f, dqkv + at + 2 * d, 3 * d);
			cuda_gemm(false, true, t, t, dh, 1.0f, dout_h, d, q + 2 * d, 3 * d, 0.0f, dp, t);
			cuda_softmax_backward(ph, dp, ds, t, t);
			cuda_gemm(false, false, t, dh, t, g->scale, ds, t, q + d, 3 * d, 0.0f, dqkv + at, 3 * d);
			cuda_gemm(true, false, t, dh, t, g->scale, ds, t, q, 3 * d, 0.0f, dqkv + at + d, 3 * d);
		}
}

__global__ void
seq_avgpool_forward_kernel(const float *x, float *y, int n, int steps, int dim)
{
	GRID_STRIDE(i, (int64_t) n * dim)
		y[i] = nn_row_step_mean(x + (i / dim) * steps * dim + i % dim, steps, dim);
}

__global__ void
seq_avgpool_backward_kernel(const float *dy, float *dx, int n, int steps, int dim)
{
	float		inv = 1.0f / (float) steps;

	GRID_STRIDE(i, (int64_t) n * steps * dim)
		dx[i] = dy[(i / ((int64_t) steps * dim)) * dim + i % dim] * inv;
}

static void
cuda_seq_avgpool_forward(const float *x, float *y, int n, int steps, int dim)
{
	launch("seq_avgpool_forward", (int64_t) n * dim, seq_avgpool_forward_kernel, x, y, n, steps, dim);
}

static void
cuda_seq_avgpool_backward(const float *dy, float *dx, int n, int steps, int dim)
{
	launch("seq_avgpool_backward", (int64_t) n * steps * dim, seq_avgpool_backward_kernel, dy, dx, n, steps, dim);
}

/* tanh as the tanh layer's kernel has it: a GRU's candidate */
__device__ static float
device_tanh(float x)
{
	return tanhf(x);
}

/* the logistic function as the sigmoid layer's kernel has it: a GRU's gates */
__device__ static float
device_sigmoid(float x)
{
	return nn_row_sigmoid(x);
}

/* A GRU's gates, a thread per (example, unit): the CPU twin's arithmetic, kernels/rows.h's (see kernels/backend.h) */
__global__ void
gru_gates_forward_kernel(const float *gi, int gi_stride, const float *gh,
						 const float *hprev, int hprev_stride, float *h, int h_stride,
						 float *saved, int saved_stride, float *out, int out_stride,
						 int n, int units)
{
	GRID_STRIDE(i, (int64_t) n * units)
	{
		int64_t		e = i / units;
		int			j = (int) (i % units);
		float		hp = hprev ? hprev[e * hprev_stride + j] : 0.0f;
		float		hv = nn_row_gru_unit(gi + e * gi_stride, gh + e * 3 * units, hp,
										 saved + e * saved_stride, units, j, device_sigmoid, device_tanh);

		h[e * h_stride + j] = hv;
		if (out)
			out[e * out_stride + j] = hv;
	}
}

__global__ void
gru_gates_backward_kernel(float *dh, const float *dout, int dout_stride,
						  const float *hprev, int hprev_stride,
						  const float *saved, int saved_stride,
						  float *dgi, int gi_stride, float *dgh, int n, int units)
{
	GRID_STRIDE(i, (int64_t) n * units)
	{
		int64_t		e = i / units;
		int			j = (int) (i % units);
		float		d = dh[e * units + j] + (dout ? dout[e * dout_stride + j] : 0.0f);
		float		hp = hprev ? hprev[e * hprev_stride + j] : 0.0f;

		dh[e * units + j] = nn_row_gru_unit_backward(d, saved + e * saved_stride, hp, dgi + e * gi_stride,
													 dgh + e * 3 * units, units, j);
	}
}

static void
cuda_gru_gates_forward(const float *gi, int gi_stride, const float *gh,
					   const float *hprev, int hprev_stride, float *h, int h_stride,
					   float *saved, int saved_stride, float *out, int out_stride,
					   int n, int units)
{
	launch("gru_gates_forward", (int64_t) n * units, gru_gates_forward_kernel, gi, gi_stride, gh,
		   hprev, hprev_stride, h, h_stride, saved, saved_stride, out, out_stride, n, units);
}

static void
cuda_gru_gates_backward(float *dh, const float *dout, int dout_stride,
						const float *hprev, int hprev_stride,
						const float *saved, int saved_stride,
						float *dgi, int gi_stride, float *dgh, int n, int units)
{
	launch("gru_gates_backward", (int64_t) n * units, gru_gates_backward_kernel, dh, dout, dout_stride,
		   hprev, hprev_stride, saved, saved_stride, dgi, gi_stride, dgh, n, units);
}

/* conv1d's windows (see kernels/backend.h); fold gathers, each element's terms in the order of t */
__global__ void
seq_unfold_kernel(const float *x, int n, int c, int w, int k, int stride, int pad, int ow, float *cols)
{
	int64_t		kk = (int64_t) c * k;

	GRID_STRIDE(idx, (int64_t) n * ow * kk)
	{
		int64_t		row = idx / kk;
		int			col = (int) (idx % kk);
		int			ci = col / k,
					j = col % k;
		int64_t		i = row / ow;
		int			t = (int) (row % ow);
		int			s = t * stride - pad + j;

		cols[idx] = s >= 0 && s < w ? x[(i * w + s) * c + ci] : 0.0f;
	}
}

__global__ void
seq_fold_kernel(const float *cols, int n, int c, int w, int k, int stride, int pad, int ow, float *dx)
{
	int64_t		kk = (int64_t) c * k;

	GRID_STRIDE(idx, (int64_t) n * w * c)
	{
		int			ci = (int) (idx % c);
		int			s = (int) ((idx / c) % w);
		int64_t		i = idx / ((int64_t) c * w);
		float		sum = 0.0f;

		/* t ascending: j descending */
		for (int j = k - 1; j >= 0; j--)
		{
			int			num = s + pad - j;
			int			t;

			if (num < 0 || num % stride != 0)
				continue;
			t = num / stride;
			if (t >= ow)
				continue;
			sum += cols[(i * ow + t) * kk + (int64_t) ci * k + j];
		}
		dx[idx] = sum;
	}
}

static void
cuda_seq_unfold(const float *x, int n, const NnConvGeom *g, float *cols)
{
	launch("seq_unfold", (int64_t) n * g->ow * g->c * g->k, seq_unfold_kernel, x, n, g->c, g->w, g->k,
		   g->stride, g->pad, g->ow, cols);
}

static void
cuda_seq_fold(const float *cols, int n, const NnConvGeom *g, float *dx)
{
	launch("seq_fold", (int64_t) n * g->w * g->c, seq_fold_kernel, cols, n, g->c, g->w, g->k,
		   g->stride, g->pad, g->ow, dx);
}

/* ---------------------------------------------------------------------------
 * Initialization
 * ------------------------------------------------------------------------- */

static void
cuda_fill_table(NnBackend *b)
{
	b->name = "cuda";
	b->host_memory = false;
	b->alloc = cuda_alloc;
	b->release = cuda_release;
	b->upload = cuda_upload;
	b->download = cuda_download;
	b->synchronize = cuda_synchronize;
	b->copy = cuda_copy;
	b->fill = cuda_fill;
	b->all_finite = cuda_all_finite;
	b->host_alloc = cuda_host_alloc;
	b->host_release = cuda_host_release;
	b->upload_async = cuda_upload_async;
	b->wait_uploads = cuda_wait_uploads;
	b->gemm = cuda_gemm;
	b->bias_add_rows = cuda_bias_add_rows;
	b->bias_add_planes = cuda_bias_add_planes;
	b->bias_relu_planes = cuda_bias_relu_planes;
	b->col_sum = cuda_col_sum;
	b->plane_sum = cuda_plane_sum;
	b->im2col = cuda_im2col;
	b->col2im = cuda_col2im;
	b->nchw_to_cnhw = cuda_nchw_to_cnhw;
	b->maxpool_forward = cuda_maxpool_forward;
	b->maxpool_backward = cuda_maxpool_backward;
	b->avgpool_forward = cuda_avgpool_forward;
	b->avgpool_backward = cuda_avgpool_backward;
	b->global_avgpool_forward = cuda_global_avgpool_forward;
	b->global_avgpool_backward = cuda_global_avgpool_backward;
	b->batchnorm_forward = cuda_batchnorm_forward;
	b->batchnorm_backward = cuda_batchnorm_backward;
	b->relu_forward = cuda_relu_forward;
	b->relu_backward = cuda_relu_backward;
	b->leaky_relu_forward = cuda_leaky_relu_forward;
	b->leaky_relu_backward = cuda_leaky_relu_backward;
	b->sigmoid_forward = cuda_sigmoid_forward;
	b->sigmoid_backward = cuda_sigmoid_backward;
	b->tanh_forward = cuda_tanh_forward;
	b->gelu_forward = cuda_gelu_forward;
	b->gelu_backward = cuda_gelu_backward;
	b->layernorm_forward = cuda_layernorm_forward;
	b->layernorm_backward = cuda_layernorm_backward;
	b->tanh_backward = cuda_tanh_backward;
	b->softmax_xent = cuda_softmax_xent;
	b->xent_metrics = cuda_xent_metrics;
	b->softmax_xent_smooth = cuda_softmax_xent_smooth;
	b->sum_squares = cuda_sum_squares;
	b->scale = cuda_scale;
	b->mse_loss = cuda_mse_loss;
	b->bce_loss = cuda_bce_loss;
	b->huber_loss = cuda_huber_loss;
	b->dropout_forward = cuda_dropout_forward;
	b->dropout_backward = cuda_dropout_backward;
	b->sgd_update = cuda_sgd_update;
	b->adam_update = cuda_adam_update;
	b->rmsprop_update = cuda_rmsprop_update;
	b->adagrad_update = cuda_adagrad_update;
	b->copy_rows = cuda_copy_rows;
	b->embedding_forward = cuda_embedding_forward;
	b->embedding_backward = cuda_embedding_backward;
	b->softmax_forward = cuda_softmax_forward;
	b->softmax_backward = cuda_softmax_backward;
	b->log_softmax_forward = cuda_log_softmax_forward;
	b->log_softmax_backward = cuda_log_softmax_backward;
	b->attention_forward = cuda_attention_forward;
	b->attention_backward = cuda_attention_backward;
	b->seq_avgpool_forward = cuda_seq_avgpool_forward;
	b->seq_avgpool_backward = cuda_seq_avgpool_backward;
	b->gru_gates_forward = cuda_gru_gates_forward;
	b->gru_gates_backward = cuda_gru_gates_backward;
	b->seq_unfold = cuda_seq_unfold;
	b->seq_fold = cuda_seq_fold;
	/* no bf16 products on the device yet: nn_model_use_backend refuses a bf16 model here */
	b->gemm_bf16 = NULL;
}

/* Create the context on device `device` and start cuBLAS; cuda_init_reason says why not. */
static void
cuda_init(int device)
{
	int			count = 0;
	cudaError_t e;
	cudaFuncAttributes attr;
	cudaDeviceProp prop;
	cublasStatus_t st;

	e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess)
	{
		(void) cudaGetLastError();
		snprintf(cuda_init_reason, sizeof(cuda_init_reason),
				 "no device: cudaGetDeviceCount failed: %s", cudaGetErrorString(e));
		return;
	}
	if (count == 0)
	{
		snprintf(cuda_init_reason, sizeof(cuda_init_reason),
				 "no device: cudaGetDeviceCount found no CUDA device");
		return;
	}
	if (device < 0 || device >= count)
	{
		snprintf(cuda_init_reason, sizeof(cuda_init_reason),
				 "no device: CUDA device %d does not exist (this process sees %d)", device, count);
		return;
	}

	/* create the context now, so that a busy or prohibited GPU fails here */
	if ((e = cudaSetDevice(device)) != cudaSuccess ||
		(e = cudaFree(NULL)) != cudaSuccess ||
		(e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess)
	{
		(void) cudaGetLastError();
		snprintf(cuda_init_reason, sizeof(cuda_init_reason),
				 "no device: cannot initialize CUDA device %d: %s",
				 device, cudaGetErrorString(e));
		return;
	}

	/* a GPU this build has neither code nor PTX for fails at the first launch */
	e = cudaFuncGetAttributes(&attr, relu_forward_kernel);
	if (e != cudaSuccess)
	{
		(void) cudaGetLastError();
		snprintf(cuda_init_reason, sizeof(cuda_init_reason),
				 "no device: device %d (%.64s, sm_%d%d) cannot run this build's kernels: %s",
				 device, prop.name, prop.major, prop.minor, cudaGetErrorString(e));
		return;
	}
	if (cudaMalloc(&cuda_scratch, SCRATCH_DOUBLES * sizeof(double)) != cudaSuccess ||
		cudaStreamCreateWithFlags(&cuda_copies, cudaStreamNonBlocking) != cudaSuccess)
	{
		(void) cudaGetLastError();
		snprintf(cuda_init_reason, sizeof(cuda_init_reason),
				 "no device: device %d has no memory for pgdl's scratch and copy stream", device);
		return;
	}

	st = cublasCreate(&cuda_blas);
	if (st != CUBLAS_STATUS_SUCCESS)
	{
		snprintf(cuda_init_reason, sizeof(cuda_init_reason),
				 "no device: cuBLAS cannot start: cublasCreate failed: %s", cublasGetStatusString(st));
		return;
	}
	/* no TF32 tensor-core shortcuts: results must match the CPU to ~1e-5 */
	st = cublasSetMathMode(cuda_blas, CUBLAS_DEFAULT_MATH);
	if (st != CUBLAS_STATUS_SUCCESS)
	{
		cublasDestroy(cuda_blas);
		snprintf(cuda_init_reason, sizeof(cuda_init_reason),
				 "no device: cuBLAS cannot start: cublasSetMathMode failed: %s", cublasGetStatusString(st));
		return;
	}

	cuda_fill_table(&cuda_backend);
	cuda_ready = &cuda_backend;
}

/*
 * One device per process: the first ordinal asked for is initialized (or
 * fails, and is not tried again); another ordinal then fails, or is tried when
 * the first failed.
 */
extern "C" const NnBackend *
nn_backend_cuda_on(int ordinal, char *err, size_t errlen)
{
	const NnBackend *b = NULL;
	char		reason[256];

	pthread_mutex_lock(&cuda_lock);
	if (cuda_ready != NULL && ordinal != cuda_ordinal)
		snprintf(reason, sizeof(reason),
				 "CUDA device %d is in use by this process, which cannot use device %d too",
				 cuda_ordinal, ordinal);
	else
	{
		if (cuda_ready == NULL && ordinal != cuda_ordinal)
		{
			cuda_ordinal = ordinal;
			cuda_init(ordinal);
		}
		b = cuda_ready;
		snprintf(reason, sizeof(reason), "%s", b ? "" : cuda_init_reason);
	}
	pthread_mutex_unlock(&cuda_lock);
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", reason);
	return b;
}

extern "C" const NnBackend *
nn_backend_cuda(char *err, size_t errlen)
{
	return nn_backend_cuda_on(0, err, errlen);
}

/*
 * Device properties and the driver's version need no context; free memory
 * does, so it is known only for the device this process has initialized.
 */
extern "C" int
nn_cuda_devices(NnCudaDevice *out, int max, int *driver_version, char *err, size_t errlen)
{
	int			count = 0,
				n = 0,
				version = 0;
	cudaError_t e;

	if (driver_version != NULL)
		*driver_version = 0;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if ((e = cudaDriverGetVersion(&version)) != cudaSuccess || version == 0 ||
		(e = cudaGetDeviceCount(&count)) != cudaSuccess || count == 0)
	{
		(void) cudaGetLastError();
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "no device: %s",
					 e != cudaSuccess ? cudaGetErrorString(e) :
					 version == 0 ? "no CUDA driver is installed" : "cudaGetDeviceCount found no CUDA device");
		return -1;
	}
	if (driver_version != NULL)
		*driver_version = version;
	for (int i = 0; i < count && i < max && out != NULL; i++, n++)
	{
		cudaDeviceProp prop;

		memset(&out[i], 0, sizeof(NnCudaDevice));
		out[i].ordinal = i;
		if (cudaGetDeviceProperties(&prop, i) != cudaSuccess)
		{
			(void) cudaGetLastError();
			snprintf(out[i].name, sizeof(out[i].name), "(unknown)");
			continue;
		}
		snprintf(out[i].name, sizeof(out[i].name), "%s", prop.name);
		out[i].major = prop.major;
		out[i].minor = prop.minor;
		out[i].total_bytes = prop.totalGlobalMem;
		pthread_mutex_lock(&cuda_lock);
		if (cuda_ready != NULL && i == cuda_ordinal)
		{
			size_t		free_bytes = 0,
						total = 0;

			if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess)
				out[i].free_bytes = free_bytes;
		}
		pthread_mutex_unlock(&cuda_lock);
	}
	return n;
}
