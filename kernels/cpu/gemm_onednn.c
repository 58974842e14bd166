/*
 * gemm_onednn.c -- the CPU backend's products through oneDNN's sgemm.
 *
 * OpenBLAS picks its kernels from a table of CPU models (OPENBLAS_CORETYPE
 * overrides it): a CPU newer than its table runs Prescott's SSE3 kernels, and
 * a forced Haswell runs AVX2, half of an AVX-512 core with two FMA pipes.
 * oneDNN picks its kernels from CPUID's feature bits, as PyTorch's
 * convolutions do.  pgdl.cpu_gemm chooses between the two (backend.h).
 *
 * Debian's libdnnl is opened when first asked for (dlopen), so that pgdl
 * builds and loads without it and falls back to OpenBLAS.  libdnnl runs its
 * loops on OpenMP, whose thread pool must never start in a backend: every
 * thread that calls sets its own OpenMP thread count to 1 first (the count is
 * per thread), so oneDNN runs on the caller's thread alone.
 *
 * Invariant: one thread, the same shapes and the same CPU give the same bytes
 * (regress/unit checks it across calls and buffer alignments).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "cpu/cpu.h"

/* oneDNN's C API (oneapi/dnnl/dnnl.h), declared here so that its headers are not needed to build */
typedef int (*dnnl_sgemm_fn) (char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
							  const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
							  float *c, int64_t ldc);
typedef struct dnnl_version_t
{
	int			major;
	int			minor;
	int			patch;
	const char *hash;
	unsigned	cpu_runtime;
	unsigned	gpu_runtime;
} dnnl_version_t;
typedef const dnnl_version_t *(*dnnl_version_fn) (void);
typedef void (*omp_set_num_threads_fn) (int);

static pthread_once_t onednn_once = PTHREAD_ONCE_INIT;
static dnnl_sgemm_fn onednn_sgemm_fn;
static omp_set_num_threads_fn onednn_omp_threads_fn;
static char onednn_name[48] = "oneDNN";

/* one thread at a time opens the library, the first time any thread asks */
static void
onednn_open(void)
{
	void	   *lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
	dnnl_version_fn version;

	if (lib == NULL)
		return;
	version = (dnnl_version_fn) dlsym(lib, "dnnl_version");
	onednn_omp_threads_fn = (omp_set_num_threads_fn) dlsym(lib, "omp_set_num_threads");
	onednn_sgemm_fn = (dnnl_sgemm_fn) dlsym(lib, "dnnl_sgemm");
	/* without OpenMP's setting, oneDNN would start a pool: not used then */
	if (onednn_omp_threads_fn == NULL)
		onednn_sgemm_fn = NULL;
	if (version != NULL && version() != NULL)
		snprintf(onednn_name, sizeof(onednn_name), "oneDNN %d.%d.%d",
				 version()->major, version()->minor, version()->patch);
}

bool
nn_onednn_available(void)
{
	pthread_once(&onednn_once, onednn_open);
	return onednn_sgemm_fn != NULL;
}

const char *
nn_onednn_name(void)
{
	pthread_once(&onednn_once, onednn_open);
	return onednn_name;
}

/* c = alpha op(a) op(b) + beta c, row-major as cpu_gemm's; false where oneDNN is absent or refuses */
bool
cpu_gemm_onednn(bool trans_a, bool trans_b, int m, int n, int k,
				float alpha, const float *a, int lda, const float *b, int ldb,
				float beta, float *c, int ldc)
{
	static __thread bool one_thread = false;

	if (!nn_onednn_available())
		return false;
	if (!one_thread)
	{
		onednn_omp_threads_fn(1);
		one_thread = true;
	}
	return onednn_sgemm_fn(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
						   a, lda, b, ldb, beta, c, ldc) == 0;
}
