/*
 * test_gemm.c -- the CPU backend's gemm against a plain triple loop, for every
 * transpose and the shapes it hands to sgemv (one row, one column), with
 * leading dimensions wider than the matrices so that strides are exercised.
 */
#include <stdlib.h>

#include "backend.h"
#include "test_util.h"
#include "unit.h"

/* element (i, j) of op(x), x stored row-major with leading dimension ld */
static float
op_at(const float *x, int ld, bool trans, int i, int j)
{
	return trans ? x[(size_t) j * ld + i] : x[(size_t) i * ld + j];
}

static void
check_gemm(bool ta, bool tb, int m, int n, int k)
{
	int			lda = (ta ? m : k) + 3,
				ldb = (tb ? k : n) + 2,
				ldc = n + 1;
	float	   *a = malloc(sizeof(float) * lda * (ta ? k : m));
	float	   *b = malloc(sizeof(float) * ldb * (tb ? n : k));
	float	   *c = malloc(sizeof(float) * ldc * m);

	for (int i = 0; i < lda * (ta ? k : m); i++)
		a[i] = (float) ((i * 7) % 13) / 13.0f - 0.5f;
	for (int i = 0; i < ldb * (tb ? n : k); i++)
		b[i] = (float) ((i * 5) % 11) / 11.0f - 0.5f;
	for (int i = 0; i < ldc * m; i++)
		c[i] = (float) (i % 3);
	nn_backend_cpu()->gemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 2.0f, c, ldc);
	for (int i = 0; i < m; i++)
		for (int j = 0; j < ldc; j++)
		{
			double		want = (double) ((i * ldc + j) % 3);

			if (j < n)
			{
				double		dot = 0.0;

				for (int p = 0; p < k; p++)
					dot += (double) op_at(a, lda, ta, i, p) * op_at(b, ldb, tb, p, j);
				want = 0.5 * dot + 2.0 * want;
			}
			/* past column n: the padding of c is left alone */
			CHECK_NEAR(c[i * ldc + j], want, 1e-4);
		}
	free(a);
	free(b);
	free(c);
}

UNIT_TEST(gemm_matches_a_plain_product_for_rows_columns_and_blocks)
{
	static const int shapes[][3] = {{1, 37, 50}, {23, 1, 50}, {1, 1, 9}, {17, 29, 31}, {2, 3, 1}};

	for (int s = 0; s < (int) (sizeof(shapes) / sizeof(shapes[0])); s++)
		for (int t = 0; t < 4; t++)
			check_gemm(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2]);
}
