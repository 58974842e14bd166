/*
 * attn_template.h -- attention's heads for one ISA, included by attn.c once
 * per ISA (as PostgreSQL's lib/sort_template.h is once per type), with
 *   ATTN_SUFFIX  the variant's name: attn_forward_<suffix>, attn_backward_<suffix>
 *   ATTN_CHUNK   columns in one vector: one register of the ISA
 *   ATTN_TARGET  the variant's function attribute (its ISA, no contraction)
 *
 * A GCC vector wider than the ISA's registers is kept in memory: AVX2's code
 * of 16-column vectors went through the stack for every addition and trained
 * the attention benchmark slower than PyTorch on an AVX2-only Zen 3.  The
 * width chooses only which columns one vector holds, never the order of an
 * output's additions, so every variant gives the same bits.
 */
#define AttnVec ATTN_NAME(AttnVec, ATTN_SUFFIX)
#define AttnMask ATTN_NAME(AttnMask, ATTN_SUFFIX)
#define attn_dots ATTN_NAME(attn_dots, ATTN_SUFFIX)
#define attn_combine ATTN_NAME(attn_combine, ATTN_SUFFIX)
#define attn_row_max ATTN_NAME(attn_row_max, ATTN_SUFFIX)
#define attn_softmax_rows ATTN_NAME(attn_softmax_rows, ATTN_SUFFIX)
#define attn_forward_rows ATTN_NAME(attn_forward_rows, ATTN_SUFFIX)
#define attn_backward_rows ATTN_NAME(attn_backward_rows, ATTN_SUFFIX)
#define attn_backward_cols ATTN_NAME(attn_backward_cols, ATTN_SUFFIX)
#define attn_forward_body ATTN_NAME(attn_forward_body, ATTN_SUFFIX)
#define attn_backward_body ATTN_NAME(attn_backward_body, ATTN_SUFFIX)

typedef float AttnVec __attribute__((vector_size(4 * ATTN_CHUNK)));
typedef int32_t AttnMask __attribute__((vector_size(4 * ATTN_CHUNK)));

#define ATTN_LOAD(v, p)		memcpy(&(v), (p), sizeof(AttnVec))
#define ATTN_STORE(p, v)	memcpy((p), &(v), sizeof(AttnVec))

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
 * The maximum of r[0 .. cols), NaN aside, a vector at a time: a maximum is
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

ATTN_TARGET static void
ATTN_NAME(attn_forward, ATTN_SUFFIX) (const float *qkv, float *p, float *o, const NnAttnGeom *g, float *work)
{
	attn_forward_body(qkv, p, o, g, work);
}

ATTN_TARGET static void
ATTN_NAME(attn_backward, ATTN_SUFFIX) (const float *qkv, const float *p, const float *d_o, float *dqkv,
									  const NnAttnGeom *g, float *work)
{
	attn_backward_body(qkv, p, d_o, dqkv, g, work);
}

#undef ATTN_LOAD
#undef ATTN_STORE
#undef AttnVec
#undef AttnMask
#undef attn_dots
#undef attn_combine
#undef attn_row_max
#undef attn_softmax_rows
#undef attn_forward_rows
#undef attn_backward_rows
#undef attn_backward_cols
#undef attn_forward_body
#undef attn_backward_body
#undef ATTN_SUFFIX
#undef ATTN_CHUNK
#undef ATTN_TARGET
