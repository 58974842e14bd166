/*
 * bf16.c -- the CPU backend's bf16 products (gemm_bf16, see backend.h) on
 * AVX512_BF16.
 *
 * A and B are rounded to bf16 into the caller's work: A as rows of k (k even,
 * a zero after an odd one), B as pairs of its rows interleaved, so that one
 * 32-bit word holds the pair (k, k + 1) of a column, the operand layout of
 * vdpbf16ps.  Tiles of C of up to BF16_MR rows and NN_BF16_NR columns keep
 * their sums in registers over the whole of k: each element of C is one fp32
 * lane that takes its pairs in order, whatever the tile, so a product gives
 * the same bytes for any shape's split into tiles.  No K blocking: a dense
 * layer's k (features, or a batch) fits L2 as a bf16 panel.
 *
 * The functions that use the instructions carry target attributes (no
 * -march flag); nn_cpu_bf16() decides at run time whether they may run.
 */
#include <cpuid.h>
#include <immintrin.h>

#include "cpu/cpu.h"

#define BF16_MR		8			/* rows of a tile: 8 x 2 accumulators of the 32 vector registers */

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

bool
nn_cpu_has_bf16(void)
{
	static int	has = -1;		/* the CPU's answer, asked once */

	if (has < 0)
	{
		unsigned int a = 0,
					b,
					c,
					d;

		/* CPUID leaf 7, subleaf 1, EAX bit 5; the OS's zmm state comes with avx512f's answer */
		has = nn_cpu_isa_detected() == NN_ISA_AVX512 &&
			__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)) != 0;
	}
	return has == 1;
}

bool
nn_cpu_bf16(void)
{
	return nn_cpu_has_bf16() && nn_cpu_isa() == NN_ISA_AVX512;
}

/*
 * fp32 to bf16 as vcvtne2ps2bf16 rounds: to nearest, ties to even; a
 * denormal to a zero of its sign; a NaN quieted.  Branch-free, so that the
 * packing loops vectorize.
 */
static inline uint32_t
bf16_bits(float f)
{
	uint32_t	u,
				r,
				quiet;

	memcpy(&u, &f, sizeof(u));
	r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	r = (u & 0x7f800000u) == 0 ? (u >> 16) & 0x8000u : r;
	quiet = (u >> 16) | 0x40u;
	return (u & 0x7fffffffu) > 0x7f800000u ? quiet : r;
}

/*
 * Transposes 16 x 16 32-bit elements in r: unpacks of 32 and 64 bits
 * make 4 x 4 blocks, whose 128-bit lanes two rounds of shuffles put in
 * place.  Row c of the result is column c of r.
 */
BF16_TARGET static inline __attribute__((always_inline)) void
transpose16(__m512i r[16])
{
	__m512i		t[16],
				u[16];

	for (int i = 0; i < 16; i += 2)
	{
		t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
	}
	/* u[4g + q]: rows 4g .. 4g + 3 of columns q, q + 4, q + 8, q + 12, a 128-bit lane each */
	for (int g = 0; g < 4; g++)
	{
		u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
		u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
		u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
		u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
	}
	for (int q = 0; q < 4; q++)
	{
		__m512i		v0 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x88),
					v1 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xdd),
					v2 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0x88),
					v3 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0xdd);

		r[q] = _mm512_shuffle_i32x4(v0, v2, 0x88);
		r[q + 8] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
		r[q + 4] = _mm512_shuffle_i32x4(v1, v3, 0x88);
		r[q + 12] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
	}
}

/* 32 floats to bf16 by vcvtne2ps2bf16, bf16_bits' rule: x[0 .. 31] in order. */
BF16_TARGET static inline __attribute__((always_inline)) __m512i
cvt32(__m512 lo, __m512 hi)
{
	return (__m512i) _mm512_cvtne2ps_pbh(hi, lo);
}

/*
 * A stored k x m (transposed): blocks of 32 of its rows by 16 columns,
 * transposed as floats, give 16 rows of ap 32 bf16 long; the edges one by one.
 */
BF16_TARGET static void
pack_a_trans(int m, int k, const float *a, int lda, uint16_t *restrict ap, int64_t kp)
{
	int			i0 = 0,
				p0 = 0;

	for (i0 = 0; i0 + 16 <= m; i0 += 16)
		for (p0 = 0; p0 + 32 <= k; p0 += 32)
		{
			__m512i		lo[16],
						hi[16];

			for (int q = 0; q < 16; q++)
			{
				lo[q] = _mm512_castps_si512(_mm512_loadu_ps(a + (int64_t) (p0 + q) * lda + i0));
				hi[q] = _mm512_castps_si512(_mm512_loadu_ps(a + (int64_t) (p0 + 16 + q) * lda + i0));
			}
			transpose16(lo);
			transpose16(hi);
			for (int q = 0; q < 16; q++)
				_mm512_storeu_si512(ap + (i0 + q) * kp + p0,
									cvt32(_mm512_castsi512_ps(lo[q]), _mm512_castsi512_ps(hi[q])));
		}
	for (int i = 0; i < m; i++)
		for (int j = i < i0 ? p0 : 0; j < k; j++)
			ap[i * kp + j] = (uint16_t) bf16_bits(a[(int64_t) j * lda + i]);
}

/* op(A) (m x k) into ap: row i at ap + i * kp, a zero after an odd k. */
BF16_TARGET static void
pack_a(bool trans, int m, int k, const float *a, int lda, uint16_t *restrict ap, int64_t kp)
{
	if (trans)
		pack_a_trans(m, k, a, lda, ap, kp);
	for (int i = 0; i < m; i++)
	{
		uint16_t   *restrict row = ap + i * kp;

		if (!trans)
		{
			const float *restrict src = a + (int64_t) i * lda;

			for (int j = 0; j < k; j++)
				row[j] = (uint16_t) bf16_bits(src[j]);
		}
		if (kp > k)
			row[k] = 0;
	}
}

/*
 * B stored n x k (transposed): blocks of 16 of its rows by 32 floats (16
 * pairs) become 16 words of a row each, transposed into 16 pairs of 16
 * columns; the edges one by one.
 */
BF16_TARGET static void
pack_b_trans(int n, int k, const float *b, int ldb, uint32_t *restrict bp, int64_t np)
{
	int			j0 = 0,
				p0 = 0;

	for (j0 = 0; j0 + 16 <= n; j0 += 16)
		for (p0 = 0; p0 + 16 <= k / 2; p0 += 16)
		{
			__m512i		r[16];

			for (int q = 0; q < 16; q++)
			{
				const float *src = b + (int64_t) (j0 + q) * ldb + 2 * p0;

				r[q] = cvt32(_mm512_loadu_ps(src), _mm512_loadu_ps(src + 16));
			}
			transpose16(r);
			for (int q = 0; q < 16; q++)
				_mm512_storeu_si512(bp + (p0 + q) * np + j0, r[q]);
		}
	for (int j = 0; j < n; j++)
	{
		const float *restrict src = b + (int64_t) j * ldb;

		for (int p = j < j0 ? p0 : 0; p < k / 2; p++)
			bp[p * np + j] = bf16_bits(src[2 * p]) | bf16_bits(src[2 * p + 1]) << 16;
		if (k & 1)
			bp[k / 2 * np + j] = bf16_bits(src[k - 1]);
	}
}

/*
 * op(B) (k x n) into bp: word p * np + j holds column j's rows 2p (low half)
 * and 2p + 1 (high half); zeros past k and n.
 */
BF16_TARGET static void
pack_b(bool trans, int n, int k, const float *b, int ldb, uint32_t *restrict bp, int64_t kp, int64_t np)
{
	memset(bp, 0, sizeof(uint32_t) * (size_t) (kp / 2 * np));
	if (trans)
	{
		pack_b_trans(n, k, b, ldb, bp, np);
		return;
	}
	for (int p = 0; p < k / 2; p++)
	{
		const float *restrict r0 = b + (int64_t) 2 * p * ldb;
		const float *restrict r1 = r0 + ldb;
		uint32_t   *restrict out = bp + p * np;

		for (int j = 0; j < n; j++)
			out[j] = bf16_bits(r0[j]) | bf16_bits(r1[j]) << 16;
	}
	if (k & 1)
	{
		const float *restrict r0 = b + (int64_t) (k - 1) * ldb;
		uint32_t   *restrict out = bp + k / 2 * np;

		for (int j = 0; j < n; j++)
			out[j] = bf16_bits(r0[j]);
	}
}

/*
 * One tile: mr rows of C (mr a constant where it is inlined) by 32 columns,
 * the second 16 masked by m1 and the first by m0 where n ends inside it.
 */
BF16_TARGET static inline __attribute__((always_inline)) void
tile(int mr, const uint32_t *ap, int64_t kp2, const uint32_t *bp, int64_t np, float *c, int ldc,
	 __mmask16 m0, __mmask16 m1)
{
	__m512		acc0[BF16_MR],
				acc1[BF16_MR];

#pragma GCC unroll 8
	for (int r = 0; r < mr; r++)
		acc0[r] = acc1[r] = _mm512_setzero_ps();
	for (int64_t p = 0; p < kp2; p++)
	{
		__m512bh	b0 = (__m512bh) _mm512_loadu_si512(bp + p * np);
		__m512bh	b1 = (__m512bh) _mm512_loadu_si512(bp + p * np + 16);

#pragma GCC unroll 8
		for (int r = 0; r < mr; r++)
		{
			__m512bh	a = (__m512bh) _mm512_set1_epi32((int) ap[r * kp2 + p]);

			acc0[r] = _mm512_dpbf16_ps(acc0[r], a, b0);
			acc1[r] = _mm512_dpbf16_ps(acc1[r], a, b1);
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < mr; r++)
	{
		_mm512_mask_storeu_ps(c + (int64_t) r * ldc, m0, acc0[r]);
		_mm512_mask_storeu_ps(c + (int64_t) r * ldc + 16, m1, acc1[r]);
	}
}

/* C (m x n) from the packed operands, a column block at a time so that its panel of B stays in cache. */
BF16_TARGET static void
products(int m, int n, const uint32_t *ap, int64_t kp2, const uint32_t *bp, int64_t np, float *c, int ldc)
{
	for (int j0 = 0; j0 < n; j0 += NN_BF16_NR)
	{
		int			w = n - j0 < NN_BF16_NR ? n - j0 : NN_BF16_NR;
		__mmask16	m0 = w >= 16 ? 0xffff : (__mmask16) ((1u << w) - 1);
		__mmask16	m1 = w >= 32 ? 0xffff : w > 16 ? (__mmask16) ((1u << (w - 16)) - 1) : 0;
		const uint32_t *bj = bp + j0;
		float	   *cj = c + j0;
		int			i = 0;

		for (; i + BF16_MR <= m; i += BF16_MR)
			tile(BF16_MR, ap + i * kp2, kp2, bj, np, cj + (int64_t) i * ldc, ldc, m0, m1);
		if (m - i >= 4)
		{
			tile(4, ap + i * kp2, kp2, bj, np, cj + (int64_t) i * ldc, ldc, m0, m1);
			i += 4;
		}
		if (m - i >= 2)
		{
			tile(2, ap + i * kp2, kp2, bj, np, cj + (int64_t) i * ldc, ldc, m0, m1);
			i += 2;
		}
		if (m - i >= 1)
			tile(1, ap + i * kp2, kp2, bj, np, cj + (int64_t) i * ldc, ldc, m0, m1);
	}
}

void
cpu_gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, const float *a, int lda,
			  const float *b, int ldb, float *c, int ldc, float *work)
{
	int64_t		kp = ((int64_t) k + 1) & ~(int64_t) 1;
	int64_t		np = ((int64_t) n + NN_BF16_NR - 1) / NN_BF16_NR * NN_BF16_NR;
	uint16_t   *ap = (uint16_t *) work;
	uint32_t   *bp = (uint32_t *) (work + (((int64_t) m * kp / 2 + 15) & ~(int64_t) 15));

	if (m <= 0 || n <= 0)
		return;
	/* unreachable where the engine refused bf16 (nn_model_set_optim); NaN rather than an illegal instruction */
	if (!nn_cpu_has_bf16() || k <= 0)
	{
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++)
				c[(int64_t) i * ldc + j] = k <= 0 ? 0.0f : NAN;
		return;
	}
	pack_a(trans_a, m, k, a, lda, ap, kp);
	pack_b(trans_b, n, k, b, ldb, bp, kp, np);
	products(m, n, (const uint32_t *) ap, kp / 2, bp, np, c, ldc);
}
