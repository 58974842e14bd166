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
 * whatever the vector width: the loops vectorize across outputs only (16
 * columns in a GCC vector: one AVX-512 register, two AVX2, four SSE2), four
 * rows side by side so that their chains of additions overlap, and each ISA's
 * variant is compiled without contraction into fused multiply-adds, so that it
 * gives the baseline's values bit for bit (regress/unit checks it).  Under the
 * causal mask a block of rows sums up to its last row's length: P's (and dS's)
 * zeros beyond a row's own add nothing.
 */
#include <math.h>

#include "cpu/cpu.h"

#define ATTN_INLINE static inline __attribute__((always_inline))
#define ATTN_CHUNK	16			/* columns in one vector */
#define ATTN_ROWS	4			/* rows (or columns) summed side by side */

typedef float AttnVec __attribute__((vector_size(4 * ATTN_CHUNK)));
typedef int32_t AttnMask __attribute__((vector_size(4 * ATTN_CHUNK)));

#define ATTN_LOAD(v, p)		memcpy(&(v), (p), sizeof(AttnVec))
#define ATTN_STORE(p, v)	memcpy((p), &(v), sizeof(AttnVec))

/* kt[c][j] = k[j][c]: a head's keys (or values) by column, so that a row of dots is a sum of rows */
ATTN_INLINE void
attn_pack(const float *k, int ld, int t, int dh, float *restrict kt)
{
	for (int j = 0; j < t; j++)
		for (int c = 0; c < dh; c++)
			kt[(int64_t) c * t + j] = k[(int64_t) j * ld + c];
}

/*
 * s_b[j] = sum over c of q_b[c] k[j][c] for j < cols and nb rows q_b (ldq
 * apart) into s_b (t apart), c from 0 up: from the packed kt (rows t apart)
 * when there is one, else from k's own rows; the same additions in the same
 * order either way.
 */
ATTN_INLINE void
attn_dots(const float *q, int ldq, int nb, const float *k, int ld, const float *kt, int t, int dh, int cols,
		  float *restrict s)
{
	int			j0 = 0;

	for (; kt && j0 + ATTN_CHUNK <= cols; j0 += ATTN_CHUNK)
	{
		AttnVec		acc[ATTN_ROWS],
					kv;

		ATTN_LOAD(kv, kt + j0);
		for (int b = 0; b < nb; b++)
			acc[b] = q[b * ldq] * kv;
		for (int c = 1; c < dh; c++)
		{
			ATTN_LOAD(kv, kt + (int64_t) c * t + j0);
			for (int b = 0; b < nb; b++)
				acc[b] += q[b * ldq + c] * kv;
		}
		for (int b = 0; b < nb; b++)
			ATTN_STORE(s + (int64_t) b * t + j0, acc[b]);
	}
	for (int j = j0; j < cols; j++)
		for (int b = 0; b < nb; b++)
		{
			const float *qb = q + (int64_t) b * ldq,
					   *kj = k + (int64_t) j * ld;
			float		acc = qb[0] * (kt ? kt[j] : kj[0]);

			for (int c = 1; c < dh; c++)
				acc += qb[c] * (kt ? kt[(int64_t) c * t + j] : kj[c]);
			s[(int64_t) b * t + j] = acc;
		}
}

/*
 * o_b[c] = alpha * sum over r in [from, to) of w[b * wb + r * ws] x[r][c] for
 * nb outputs o_b (ob apart), r from first to last: rows of P V (w P's rows:
 * wb t, ws 1) or of P^T dO (w P's columns: wb 1, ws t).
 */
ATTN_INLINE void
attn_combine(const float *w, int64_t wb, int64_t ws, int nb, const float *x, int ldx, int from, int to, int dh,
			 float alpha, float *restrict o, int64_t ob)
{
	int			c0 = 0;

	for (; c0 + ATTN_CHUNK <= dh; c0 += ATTN_CHUNK)
	{
		AttnVec		acc[ATTN_ROWS],
					xv;

		ATTN_LOAD(xv, x + (int64_t) from * ldx + c0);
		for (int b = 0; b < nb; b++)
			acc[b] = w[b * wb + from * ws] * xv;
		for (int r = from + 1; r < to; r++)
		{
			ATTN_LOAD(xv, x + (int64_t) r * ldx + c0);
			for (int b = 0; b < nb; b++)
				acc[b] += w[b * wb + r * ws] * xv;
		}
		for (int b = 0; b < nb; b++)
		{
			acc[b] *= alpha;
			ATTN_STORE(o + b * ob + c0, acc[b]);
		}
	}
	for (int c = c0; c < dh; c++)
		for (int b = 0; b < nb; b++)
		{
			float		acc = w[b * wb + from * ws] * x[(int64_t) from * ldx + c];

			for (int r = from + 1; r < to; r++)
				acc += w[b * wb + r * ws] * x[(int64_t) r * ldx + c];
			o[b * ob + c] = acc * alpha;
		}
}

/*
 * The maximum of r[0 .. cols), NaN aside, 16 lanes at a time: a maximum is
 * the same in any order (but for the sign of a zero, which no exp of a
 * difference with it sees); a row with a NaN gets a NaN sum, and P's row is
 * NaN whichever maximum it subtracted.
 */
ATTN_INLINE float
attn_row_max(const float *r, int cols)
{
	float		mx = r[0];
	int			j = 0;

	if (cols >= ATTN_CHUNK)
	{
		AttnVec		m,
					v;
		float		lanes[ATTN_CHUNK];

		ATTN_LOAD(m, r);
		for (j = ATTN_CHUNK; j + ATTN_CHUNK <= cols; j += ATTN_CHUNK)
		{
			AttnMask	gt;

			ATTN_LOAD(v, r + j);
			gt = v > m;
			m = (AttnVec) (((AttnMask) v & gt) | ((AttnMask) m & ~gt));
		}
		ATTN_STORE(lanes, m);
		for (int l = 0; l < ATTN_CHUNK; l++)
			if (lanes[l] > mx)
				mx = lanes[l];
	}
	for (; j < cols; j++)
		if (r[j] > mx)
			mx = r[j];
	return mx;
}

/*
 * Rows [i0, i0 + nb) of P from their scores, in place: softmax(scale s) over
 * each row's first cols values (i + 1 under the mask, else t; the maximum
 * subtracted, cpu_exp_nonpositive, the sum in double as rows.h's
 * nn_row_softmax), 0 beyond them: no -inf written, no exp taken of it.
 */
ATTN_INLINE void
attn_softmax_rows(float *p, int t, int i0, int nb, float scale, bool causal)
{
	double		sum[ATTN_ROWS] = {0.0};

	for (int b = 0; b < nb; b++)
	{
		float	   *restrict r = p + (int64_t) (i0 + b) * t;
		int			cols = causal ? i0 + b + 1 : t;
		float		mx;

		for (int j = 0; j < cols; j++)
			r[j] *= scale;
		mx = attn_row_max(r, cols);
		for (int j = 0; j < cols; j++)
			r[j] = cpu_exp_nonpositive(r[j] - mx);
		for (int j = cols; j < t; j++)
			r[j] = 0.0f;
	}
	for (int j = 0; j < t; j++)
		for (int b = 0; b < nb; b++)
			sum[b] += p[(int64_t) (i0 + b) * t + j];
	for (int b = 0; b < nb; b++)
	{
		float	   *restrict r = p + (int64_t) (i0 + b) * t;

		for (int j = 0; j < t; j++)
			r[j] = (float) (r[j] / sum[b]);
	}
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

/* One block of P's rows, and of O's: scores, mask and softmax, then P V */
ATTN_INLINE void
attn_forward_rows(const float *q, float *ph, float *oh, const NnAttnGeom *g, const float *kt, int i0, int nb)
{
	int			t = g->t,
				d = g->d,
				dh = g->d / g->heads,
				ld = 3 * g->d,
				cols = g->causal ? i0 + nb : t;
	float	   *pr = ph + (int64_t) i0 * t;

	attn_dots(q + (int64_t) i0 * ld, ld, nb, q + d, ld, kt, t, dh, cols, pr);
	attn_softmax_rows(ph, t, i0, nb, g->scale, g->causal);
	attn_combine(pr, t, 1, nb, q + 2 * d, ld, 0, cols, dh, 1.0f, oh + (int64_t) i0 * d, d);
}

/* One block of dS's rows (dO V^T, then the softmax's gradient) and of dQ = scale dS K */
ATTN_INLINE void
attn_backward_rows(const float *q, const float *ph, const float *dout, float *dq, const NnAttnGeom *g,
				   float *ds, const float *vt, int i0, int nb)
{
	int			t = g->t,
				d = g->d,
				dh = g->d / g->heads,
				ld = 3 * g->d,
				cols = g->causal ? i0 + nb : t;

	attn_dots(dout + (int64_t) i0 * d, d, nb, q + 2 * d, ld, vt, t, dh, cols, ds + (int64_t) i0 * t);
	attn_softmax_grad_rows(ph, ds, t, i0, nb, g->causal);
	attn_combine(ds + (int64_t) i0 * t, t, 1, nb, q + d, ld, 0, cols, dh, g->scale, dq + (int64_t) i0 * ld, ld);
}

/* One block of columns j0.. of P and dS: dV = P^T dO and dK = scale dS^T Q (above the diagonal P's zeros) */
ATTN_INLINE void
attn_backward_cols(const float *q, const float *ph, const float *dout, float *dq, const NnAttnGeom *g,
				   const float *ds, int j0, int nb)
{
	int			t = g->t,
				d = g->d,
				dh = g->d / g->heads,
				ld = 3 * g->d,
				from = g->causal ? j0 : 0;

	attn_combine(ph + j0, 1, t, nb, dout, d, from, t, dh, 1.0f, dq + 2 * d + (int64_t) j0 * ld, ld);
	attn_combine(ds + j0, 1, t, nb, q, ld, from, t, dh, g->scale, dq + d + (int64_t) j0 * ld, ld);
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

/* work holds 2 t^2 floats: the packed keys when dh <= 2t (else the dots read K's rows) */
ATTN_INLINE void
attn_forward_body(const float *qkv, float *p, float *o, const NnAttnGeom *g, float *work)
{
	int64_t		t = g->t,
				d = g->d,
				dh = g->d / g->heads;
	float	   *kt = dh * t <= 2 * t * t ? work : NULL;

	for (int e = 0; e < g->n; e++)
		for (int h = 0; h < g->heads; h++)
		{
			const float *q = qkv + e * t * 3 * d + h * dh;
			float	   *ph = p + (e * g->heads + h) * t * t,
					   *oh = o + e * t * d + h * dh;

			if (kt)
				attn_pack(q + d, 3 * d, t, dh, kt);
			ATTN_BLOCKS(g->t, i0, attn_forward_rows(q, ph, oh, g, kt, i0, nb_));
		}
}

/* work: dS (t^2 floats), then the packed values when dh <= t (else the dots read V's rows) */
ATTN_INLINE void
attn_backward_body(const float *qkv, const float *p, const float *d_o, float *dqkv, const NnAttnGeom *g,
				   float *work)
{
	int64_t		t = g->t,
				d = g->d,
				dh = g->d / g->heads;
	float	   *vt = dh <= t ? work + t * t : NULL;

	for (int e = 0; e < g->n; e++)
		for (int h = 0; h < g->heads; h++)
		{
			const float *q = qkv + e * t * 3 * d + h * dh,
					   *ph = p + (e * g->heads + h) * t * t,
					   *dout = d_o + e * t * d + h * dh;
			float	   *dq = dqkv + e * t * 3 * d + h * dh;

			if (vt)
				attn_pack(q + 2 * d, 3 * d, t, dh, vt);
			ATTN_BLOCKS(g->t, i0, attn_backward_rows(q, ph, dout, dq, g, work, vt, i0, nb_));
			ATTN_BLOCKS(g->t, j0, attn_backward_cols(q, ph, dout, dq, g, work, j0, nb_));
		}
}

/* Once per ISA, as GELU's (backend_cpu.c): the same operations, no contraction, the baseline's bits */
#define ATTN_VARIANT(isa, attrs) \
	attrs static void attn_forward_##isa(const float *qkv, float *p, float *o, const NnAttnGeom *g, \
										 float *work) \
	{ attn_forward_body(qkv, p, o, g, work); } \
	attrs static void attn_backward_##isa(const float *qkv, const float *p, const float *d_o, float *dqkv, \
										  const NnAttnGeom *g, float *work) \
	{ attn_backward_body(qkv, p, d_o, dqkv, g, work); }

ATTN_VARIANT(avx512, __attribute__((target("avx512f") NO_CONTRACT)))
ATTN_VARIANT(avx2, __attribute__((target("avx2") NO_CONTRACT)))
ATTN_VARIANT(baseline, )

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
