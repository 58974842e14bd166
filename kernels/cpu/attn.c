/*
 * attn.c -- the CPU kernels of attention's heads (backend.h's
 * attention_forward and attention_backward): each example and head's
 * products, causal mask and softmax in one pass over its rows, without BLAS.
 *
 * The heads' products are small (t x t x dh: 32 x 32 x 16 in the benchmark),
 * and OpenBLAS spent on them as much time packing as multiplying (perf of
 * engine_bench --model attention: sgemm 37%, its copies 12%; the softmax's
 * glibc expf, one call a value, 6.8%).  Here a row of scores is a sum of rows
 * of the head's keys packed by column (dh x t floats, in L1), the softmax
 * takes cpu_exp_nonpositive, and P V, P^T dO, dS K and dS^T Q are sums of rows
 * of Q, K, V and dO read where they are: nothing else is copied or transposed.
 *
 * Every sum runs in one order, over the reduced index from first to last,
 * whatever the vector width: the loops vectorize across outputs only (one
 * register of columns: 16 AVX-512, 8 AVX2, 4 SSE2; attn_template.h is the
 * kernels, compiled once per ISA), four rows side by side so that their chains
 * of additions overlap, and each ISA's variant is compiled without contraction
 * into fused multiply-adds, so that it gives the baseline's values bit for bit
 * (regress/unit checks it).  Under the
 * causal mask a block of rows sums up to its last row's length: P's (and dS's)
 * zeros beyond a row's own add nothing.
 */
#include <math.h>

#include "cpu/cpu.h"

#define ATTN_INLINE static inline __attribute__((always_inline))
#define ATTN_ROWS	4			/* rows (or columns) summed side by side */
#define ATTN_NAME_(name, suffix) name##_##suffix
#define ATTN_NAME(name, suffix) ATTN_NAME_(name, suffix)

/* kt[c][j] = k[j][c]: a head's keys (or values) by column, so that a row of dots is a sum of rows */
ATTN_INLINE void
attn_pack(const float *k, int ld, int t, int dh, float *restrict kt)
{
	for (int j = 0; j < t; j++)
		for (int c = 0; c < dh; c++)
			kt[(int64_t) c * t + j] = k[(int64_t) j * ld + c];
}

/*
 * Rows [i0, i0 + nb) of dS from dP, in place: p * (dP - <dP, p>), the dot in
 * double as rows.h's nn_row_softmax_backward; 0 beyond each row's length.
 */
ATTN_INLINE void
attn_softmax_grad_rows(const float *p, float *ds, int t, int i0, int nb, bool causal)
{
	double		dot[ATTN_ROWS] = {0.0};

	for (int b = 0; b < nb; b++)
		for (int j = causal ? i0 + b + 1 : t; j < t; j++)
			ds[(int64_t) (i0 + b) * t + j] = 0.0f;
	for (int j = 0; j < t; j++)
		for (int b = 0; b < nb; b++)
			dot[b] += (double) ds[(int64_t) (i0 + b) * t + j] * p[(int64_t) (i0 + b) * t + j];
	for (int b = 0; b < nb; b++)
	{
		const float *restrict pr = p + (int64_t) (i0 + b) * t;
		float	   *restrict r = ds + (int64_t) (i0 + b) * t;

		for (int j = 0; j < t; j++)
			r[j] = pr[j] * (r[j] - (float) dot[b]);
	}
}

/* A block of ATTN_ROWS with the count known to the compiler (its accumulators stay in registers), else one by one */
#define ATTN_BLOCKS(n, i0, call) \
	for (int i0 = 0; i0 < (n); i0 += ATTN_ROWS) \
	{ \
		if (i0 + ATTN_ROWS <= (n)) \
		{ const int nb_ = ATTN_ROWS; call; } \
		else \
			for (int i1_ = i0; i1_ < (n); i1_++) \
			{ const int nb_ = 1; int i0 = i1_; call; } \
	}

/* The kernels once per ISA, a vector one register wide: the same operations, no contraction, the baseline's bits */
#define ATTN_SUFFIX avx512
#define ATTN_CHUNK 16
#define ATTN_TARGET __attribute__((target("avx512f") NO_CONTRACT))
#include "cpu/attn_template.h"

#define ATTN_SUFFIX avx2
#define ATTN_CHUNK 8
#define ATTN_TARGET __attribute__((target("avx2") NO_CONTRACT))
#include "cpu/attn_template.h"

#define ATTN_SUFFIX baseline
#define ATTN_CHUNK 4
#define ATTN_TARGET
#include "cpu/attn_template.h"

void
cpu_attention_forward(const float *qkv, float *p, float *o, const NnAttnGeom *g, float *work)
{
	NnCpuIsa	isa = nn_cpu_isa();

	if (isa == NN_ISA_AVX512)
		attn_forward_avx512(qkv, p, o, g, work);
	else if (isa == NN_ISA_AVX2)
		attn_forward_avx2(qkv, p, o, g, work);
	else
		attn_forward_baseline(qkv, p, o, g, work);
}

void
cpu_attention_backward(const float *qkv, const float *p, const float *d_o, float *dqkv, const NnAttnGeom *g,
					   float *work)
{
	NnCpuIsa	isa = nn_cpu_isa();

	if (isa == NN_ISA_AVX512)
		attn_backward_avx512(qkv, p, d_o, dqkv, g, work);
	else if (isa == NN_ISA_AVX2)
		attn_backward_avx2(qkv, p, d_o, dqkv, g, work);
	else
		attn_backward_baseline(qkv, p, d_o, dqkv, g, work);
}
