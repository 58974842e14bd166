/*
 * gemm_libs.c -- single-precision products on the shapes of the benchmarks'
 * networks, OpenBLAS (as the engine calls it: cblas_sgemm, row-major, under
 * the environment's OPENBLAS_CORETYPE) against BLIS's typed API (bli_sgemm),
 * one thread each, in one process: which library a product could go to on
 * this CPU (issue 41).  Not linked into pgdl.
 *
 * Each line: the shape, both rates (best of 3 repetitions of about 2e10
 * FLOPs), their ratio and the largest difference between the two results.
 * The last line: the geometric mean of the ratios over the MLP's products.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cblas.h>
#include <blis.h>

typedef struct Shape
{
	const char *name;
	int			m, n, k;
	int			trans_a, trans_b;
	int			mlp;			/* counted in the last line */
} Shape;

/* the reference MLP (784-512-256-10) at batch 128: forward, weight and input gradients; the CNN per image */
static const Shape shapes[] = {
	{"square 1024", 1024, 1024, 1024, 0, 0, 0},
	{"mlp forward 1", 128, 512, 784, 0, 0, 1},
	{"mlp forward 2", 128, 256, 512, 0, 0, 1},
	{"mlp dW 1 (x^T dy)", 784, 512, 128, 1, 0, 1},
	{"mlp dW 2", 512, 256, 128, 1, 0, 1},
	{"mlp dx 2 (dy W^T)", 128, 512, 256, 0, 1, 1},
	{"cnn conv 2 per image", 32, 196, 144, 0, 0, 0},
	{"cnn conv 1 per image", 16, 784, 9, 0, 0, 0},
};

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static float *
filled(long n, long prime)
{
	float	   *x = malloc(sizeof(float) * n);

	for (long i = 0; i < n; i++)
		x[i] = (float) ((i * prime) % 1000) / 1000.f - 0.5f;
	return x;
}

/* The ratio blis / openblas of one shape (rates), after printing its line. */
static double
run(const Shape *s)
{
	float	   *a = filled((long) s->m * s->k, 7919);
	float	   *b = filled((long) s->k * s->n, 104729);
	float	   *c = calloc((size_t) s->m * s->n, sizeof(float));
	float	   *d = calloc((size_t) s->m * s->n, sizeof(float));
	float		one = 1.f, zero = 0.f;
	int			lda = s->trans_a ? s->m : s->k, ldb = s->trans_b ? s->k : s->n;
	int			reps = (int) fmax(3, 2e10 / (2.0 * s->m * s->n * s->k));
	double		best[2] = {1e30, 1e30}, flops = 2.0 * s->m * s->n * s->k * reps, diff = 0;

	for (int r = 0; r < 3; r++)
	{
		double		t0 = now(), t1, t2;

		for (int i = 0; i < reps; i++)
			cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans, s->trans_b ? CblasTrans : CblasNoTrans,
						s->m, s->n, s->k, 1.f, a, lda, b, ldb, 0.f, c, s->n);
		t1 = now();
		/* row-major: element (i, j) at i * ld + j, that is row stride ld, column stride 1 */
		for (int i = 0; i < reps; i++)
			bli_sgemm(s->trans_a ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, s->trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
					  s->m, s->n, s->k, &one, a, lda, 1, b, ldb, 1, &zero, d, s->n, 1);
		t2 = now();
		best[0] = fmin(best[0], t1 - t0);
		best[1] = fmin(best[1], t2 - t1);
	}
	for (long i = 0; i < (long) s->m * s->n; i++)
		diff = fmax(diff, fabs((double) c[i] - d[i]));
	printf("%-22s m=%4d n=%4d k=%4d  openblas %6.1f GFLOP/s  blis %6.1f GFLOP/s  blis/openblas %.2f  max |diff| %.1e\n",
		   s->name, s->m, s->n, s->k, flops / best[0] / 1e9, flops / best[1] / 1e9, best[0] / best[1], diff);
	free(a);
	free(b);
	free(c);
	free(d);
	return best[0] / best[1];
}

int
main(void)
{
	double		log_sum = 0;
	int			n_mlp = 0;

	bli_init();
	printf("openblas core %s, blis arch %s\n", openblas_get_corename(), bli_arch_string(bli_arch_query_id()));
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
	{
		double		ratio = run(&shapes[i]);

		if (shapes[i].mlp)
		{
			log_sum += log(ratio);
			n_mlp++;
		}
	}
	printf("gemm: blis(%s)/openblas on the mlp's products = %.2f\n", bli_arch_string(bli_arch_query_id()),
		   exp(log_sum / n_mlp));
	return 0;
}
