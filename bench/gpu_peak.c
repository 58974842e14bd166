/*
 * gpu_peak.c -- the sgemm rate of the CUDA backend's own gemm (cuBLAS), the
 * ceiling bench/gpu.sh divides pgdl's training rate by.
 *
 * Usage: gpu_peak [SIZE [REPS]]   (default 4096 20)
 * Output: gpu backend=NAME size=N sgemm_gflops=X
 * A build without CUDA answers only with PGDL_FAKE_CUDA set (the fake device,
 * the CPU's gemm: a check of the script, not a figure).  Exit status 2 when no
 * device answers, with the reason on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend.h"
#include "cuda/cuda_backend.h"

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long
arg_or(int argc, char **argv, int i, long dflt, long lo, long hi)
{
	char	   *end;
	long		v;

	if (i >= argc)
		return dflt;
	v = strtol(argv[i], &end, 10);
	if (*end != '\0' || v < lo || v > hi)
	{
		fprintf(stderr, "usage: gpu_peak [SIZE (%ld..%ld) [REPS]]\n", lo, hi);
		exit(1);
	}
	return v;
}

int
main(int argc, char **argv)
{
	int			n = (int) arg_or(argc, argv, 1, 4096, 64, 16384);
	int			reps = (int) arg_or(argc, argv, 2, 20, 1, 1000);
	size_t		bytes = sizeof(float) * (size_t) n * n;
	char		err[256] = "";
	const NnBackend *be = nn_backend_cuda(err, sizeof(err));
	float	   *a,
			   *b,
			   *c;
	double		best = 1e30;

	if (be == NULL)
	{
		fprintf(stderr, "gpu_peak: no CUDA device: %s\n", err);
		return 2;
	}
	a = be->alloc(bytes);
	b = be->alloc(bytes);
	c = be->alloc(bytes);
	if (a == NULL || b == NULL || c == NULL)
	{
		fprintf(stderr, "gpu_peak: cannot allocate three %dx%d matrices on the device\n", n, n);
		return 2;
	}
	be->fill(a, 0.5f, (int64_t) n * n);
	be->fill(b, 0.25f, (int64_t) n * n);
	/* one warm-up product (cuBLAS picks its kernel), then the best of reps */
	be->gemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
	be->synchronize();
	for (int r = 0; r < reps; r++)
	{
		double		t = now_s();

		be->gemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
		be->synchronize();
		t = now_s() - t;
		if (t < best)
			best = t;
	}
	if (nn_cuda_last_error() != NULL)
	{
		fprintf(stderr, "gpu_peak: %s\n", nn_cuda_last_error());
		return 2;
	}
	be->release(a);
	be->release(b);
	be->release(c);
	printf("gpu backend=%s size=%d sgemm_gflops=%.1f\n", be->name, n, 2.0 * n * n * n / best / 1e9);
	return 0;
}
