/*
 * test_gemm.c -- the CPU backend's gemm against a plain triple loop, for every
 * transpose and the shapes it hands to sgemv (one row, one column), with
 * leading dimensions wider than the matrices so that strides are exercised.
 */
#include <stdlib.h>
#include <string.h>

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

/*
 * Both product libraries (gemm_onednn.c) against the plain product, and
 * oneDNN's bytes the same across calls and buffer alignments: the invariant
 * that keeps worker counts, resumes and nodes byte-identical.  Debian's
 * libdnnl2 is installed by .ci/install-deps, so CI runs the oneDNN half.
 */
UNIT_TEST(gemm_on_onednn_and_openblas_matches_and_repeats_its_bytes)
{
	static const int shapes[][3] = {{1, 37, 50}, {23, 1, 50}, {17, 29, 31}, {67, 130, 301}};
	int			m = 45,
				n = 77,
				k = 333;
	float	   *a = malloc(sizeof(float) * (m * k + 16));
	float	   *b = malloc(sizeof(float) * (k * n + 16));
	float	   *c[3];

	CHECK(nn_onednn_available());
	CHECK(nn_gemm_auto() == (nn_cpu_isa_detected() == NN_ISA_AVX512 ? NN_GEMM_ONEDNN : NN_GEMM_OPENBLAS));
	for (int lib = NN_GEMM_OPENBLAS; lib <= NN_GEMM_ONEDNN; lib++)
	{
		nn_set_gemm((NnGemm) lib);
		CHECK((strncmp(nn_blas_core(), "oneDNN", 6) == 0) == (lib == NN_GEMM_ONEDNN));
		for (int s = 0; s < (int) (sizeof(shapes) / sizeof(shapes[0])); s++)
			for (int t = 0; t < 4; t++)
				check_gemm(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2]);
	}

	/* oneDNN: one product three times, the last from inputs moved by one float */
	nn_set_gemm(NN_GEMM_ONEDNN);
	for (int i = 0; i < m * k + 16; i++)
		a[i] = (float) ((i * 7919) % 1009) / 1009.0f - 0.5f;
	for (int i = 0; i < k * n + 16; i++)
		b[i] = (float) ((i * 7717) % 997) / 997.0f - 0.5f;
	for (int r = 0; r < 3; r++)
	{
		int			shift = r == 2 ? 1 : 0;

		if (shift)
		{
			memmove(a + 1, a, sizeof(float) * m * k);
			memmove(b + 1, b, sizeof(float) * k * n);
		}
		c[r] = calloc((size_t) m * n, sizeof(float));
		nn_backend_cpu()->gemm(false, true, m, n, k, 1.0f, a + shift, k, b + shift, k, 0.0f, c[r], n);
	}
	CHECK(memcmp(c[0], c[1], sizeof(float) * m * n) == 0);
	CHECK(memcmp(c[0], c[2], sizeof(float) * m * n) == 0);
	nn_set_gemm(nn_gemm_auto());
	for (int r = 0; r < 3; r++)
		free(c[r]);
	free(a);
	free(b);
}
