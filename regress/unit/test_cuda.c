/*
 * test_cuda.c -- the CUDA backend against the CPU backend, primitive by primitive.
 *
 * Without a usable GPU (or in a build without CUDA) there is nothing to compare:
 * the tests then check that the reason given says so, and print it once as
 * "cuda: no device (<reason>)" so the log shows what was not tested.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_fake.h"
#include "test_util.h"
#include "unit.h"

#define REL 1e-4				/* relative tolerance, CUDA against CPU */
#define BIG_N 1000003			/* elementwise length: prime, not a multiple of a block */

static const NnBackend *cpu;
static const NnBackend *gpu;

static void check_primitives(void);
static void check_models(void);
static void check_table_complete(const NnBackend *b);
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* xorshift64*: the same data on every run and every machine */
static float
uniform(float lo, float hi)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return lo + (hi - lo) * (float) ((rng_state * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}

/* A host array (CPU backend memory) of n floats drawn from [lo, hi). */
static float *
host_random(size_t n, float lo, float hi)
{
	float	   *h = cpu->alloc(n * sizeof(float));

	if (h == NULL)
	{
		fprintf(stderr, "test_cuda: out of host memory\n");
		exit(2);
	}
	for (size_t i = 0; i < n; i++)
		h[i] = uniform(lo, hi);
	return h;
}

/* A device copy of a host array. */
static float *
device_copy(const float *h, size_t n)
{
	float	   *d = gpu->alloc(n * sizeof(float));

	if (d == NULL)
	{
		fprintf(stderr, "test_cuda: out of device memory (%zu floats)\n", n);
		exit(2);
	}
	gpu->upload(d, h, n * sizeof(float));
	return d;
}

/*
 * Does device array d match host array want?  Each element must be within REL
 * of max(|want|, unit): unit is the scale of the inputs, below which a
 * difference counts as absolute (results near zero after cancellation).
 */
static void
compare(const char *what, const float *want, const float *d, size_t n, double unit)
{
	float	   *got = malloc(n ? n * sizeof(float) : 1);
	size_t		bad = 0,
				first = 0;

	gpu->download(got, d, n * sizeof(float));
	for (size_t i = 0; i < n; i++)
	{
		double		w = want[i];
		double		g = got[i];
		double		scale = fabs(w) > unit ? fabs(w) : unit;

		if (g == w)
			continue;
		if (!(fabs(g - w) <= REL * scale) && bad++ == 0)
			first = i;
	}
	CHECK_MSG(bad == 0, "%s: %zu of %zu differ, first [%zu]: cuda %.9g, cpu %.9g",
			  what, bad, n, first, bad ? got[first] : 0.0, bad ? want[first] : 0.0);
	free(got);
}

/* ---------------------------------------------------------------------------
 * gemm: every transpose combination, leading dimensions above the minimum
 * (their padding is NaN in A and B, which must never be read, and a sentinel
 * in C, which must survive), beta 0 over a C of NaN (must not be read either).
 * ------------------------------------------------------------------------- */
static void
check_gemm(bool ta, bool tb, int m, int n, int k, float alpha, float beta)
{
	int			a_rows = ta ? k : m,
				a_cols = ta ? m : k,
				lda = a_cols + 3;
	int			b_rows = tb ? n : k,
				b_cols = tb ? k : n,
				ldb = b_cols + 2;
	int			ldc = n + 5;
	float	   *a = host_random((size_t) a_rows * lda, -1.0f, 1.0f);
	float	   *b = host_random((size_t) b_rows * ldb, -1.0f, 1.0f);
	float	   *c = host_random((size_t) m * ldc, -1.0f, 1.0f);
	float	   *da,
			   *db,
			   *dc;
	char		what[128];

	for (int r = 0; r < a_rows; r++)
		for (int j = a_cols; j < lda; j++)
			a[(size_t) r * lda + j] = NAN;
	for (int r = 0; r < b_rows; r++)
		for (int j = b_cols; j < ldb; j++)
			b[(size_t) r * ldb + j] = NAN;
	for (int r = 0; r < m; r++)
		for (int j = 0; j < ldc; j++)
			if (j >= n)
				c[(size_t) r * ldc + j] = 12345.0f;
			else if (beta == 0.0f)
				c[(size_t) r * ldc + j] = NAN;

	da = device_copy(a, (size_t) a_rows * lda);
	db = device_copy(b, (size_t) b_rows * ldb);
	dc = device_copy(c, (size_t) m * ldc);
	cpu->gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	gpu->gemm(ta, tb, m, n, k, alpha, da, lda, db, ldb, beta, dc, ldc);

	snprintf(what, sizeof(what), "gemm %c%c m=%d n=%d k=%d alpha=%g beta=%g",
			 ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, beta);
	compare(what, c, dc, (size_t) m * ldc, sqrt(k > 1 ? k : 1));

	cpu->release(a);
	cpu->release(b);
	cpu->release(c);
	gpu->release(da);
	gpu->release(db);
	gpu->release(dc);
}

static void
check_gemms(void)
{
	static const int shapes[][3] = {{37, 53, 29}, {1, 257, 1031}, {300, 1, 7}, {16, 9, 0}};

	for (int s = 0; s < 4; s++)
		for (int t = 0; t < 4; t++)
		{
			check_gemm(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], 1.25f, 0.5f);
			check_gemm(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 0.0f);
		}
}

/* ---------------------------------------------------------------------------
 * Bias and its gradient.  Rows are planes of one element (rows x cols is
 * n = rows, channels = cols, plane = 1), so one harness serves both layouts.
 * ------------------------------------------------------------------------- */
typedef enum
{
	BIAS_ROWS, BIAS_PLANES, BIAS_RELU_PLANES
} BiasKind;

static void
check_bias_add(BiasKind kind, int n, int channels, int plane)
{
	static const char *const names[] = {"bias_add_rows", "bias_add_planes", "bias_relu_planes"};
	size_t		total = (size_t) n * channels * plane;
	float	   *y = host_random(total, -1.0f, 1.0f);
	float	   *bias = host_random(channels, -1.0f, 1.0f);
	float	   *dy = device_copy(y, total);
	float	   *dbias = device_copy(bias, channels);
	char		what[64];

	switch (kind)
	{
		case BIAS_ROWS:
			cpu->bias_add_rows(y, bias, n, channels);
			gpu->bias_add_rows(dy, dbias, n, channels);
			break;
		case BIAS_PLANES:
			cpu->bias_add_planes(y, bias, n, channels, plane);
			gpu->bias_add_planes(dy, dbias, n, channels, plane);
			break;
		case BIAS_RELU_PLANES:
			cpu->bias_relu_planes(y, bias, n, channels, plane);
			gpu->bias_relu_planes(dy, dbias, n, channels, plane);
			break;
	}
	snprintf(what, sizeof(what), "%s %dx%dx%d", names[kind], n, channels, plane);
	compare(what, y, dy, total, 1.0);
	cpu->release(y);
	cpu->release(bias);
	gpu->release(dy);
	gpu->release(dbias);
}

/* db starts non-zero: both reductions add to it */
static void
check_bias_sum(bool planes, int n, int channels, int plane)
{
	size_t		total = (size_t) n * channels * plane;
	float	   *dy = host_random(total, -1.0f, 1.0f);
	float	   *db = host_random(channels, -1.0f, 1.0f);
	float	   *d_dy = device_copy(dy, total);
	float	   *d_db = device_copy(db, channels);
	char		what[64];

	if (planes)
	{
		cpu->plane_sum(dy, db, n, channels, plane);
		gpu->plane_sum(d_dy, d_db, n, channels, plane);
	}
	else
	{
		cpu->col_sum(dy, db, n, channels);
		gpu->col_sum(d_dy, d_db, n, channels);
	}
	snprintf(what, sizeof(what), "%s %dx%dx%d", planes ? "plane_sum" : "col_sum", n, channels, plane);
	/* a sum of n * plane terms of size 1 with random signs is about its square root */
	compare(what, db, d_db, channels, sqrt((double) n * plane));
	cpu->release(dy);
	cpu->release(db);
	gpu->release(d_dy);
	gpu->release(d_db);
}

static void
check_bias(void)
{
	check_bias_add(BIAS_ROWS, 257, 1031, 1);
	check_bias_add(BIAS_ROWS, 1, 1, 1);
	check_bias_add(BIAS_PLANES, 3, 37, 899);
	check_bias_add(BIAS_PLANES, 1, 1, BIG_N);
	check_bias_add(BIAS_RELU_PLANES, 3, 37, 899);
	check_bias_add(BIAS_RELU_PLANES, 1, 16, 784);
	check_bias_sum(false, 1001, 67, 1);
	check_bias_sum(false, 5, 4099, 1);
	check_bias_sum(false, 3000, 1, 1);
	check_bias_sum(true, 7, 19, 221);
	check_bias_sum(true, 2, 1, BIG_N);
	check_bias_sum(true, 1, 70, 1);
}

/* ---------------------------------------------------------------------------
 * Convolution: im2col over garbage columns, col2im from random columns into
 * a dx holding earlier sums, and the channel-major transpose
 * ------------------------------------------------------------------------- */
static void
check_im2col(int n, int c, int h, int w, int k, int stride, int pad)
{
	NnConvGeom	g = {c, h, w, k, stride, pad,
	(h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1};
	size_t		in = (size_t) n * c * h * w;
	size_t		cols = (size_t) c * k * k * n * g.oh * g.ow;
	float	   *x = host_random(in, -1.0f, 1.0f);
	float	   *col = host_random(cols, 5.0f, 6.0f);
	float	   *d_x = device_copy(x, in);
	float	   *d_col = device_copy(col, cols);
	char		shape[80],
				what[96];

	snprintf(shape, sizeof(shape), "n=%d c=%d %dx%d k=%d stride=%d pad=%d",
			 n, c, h, w, k, stride, pad);
	cpu->im2col(x, n, &g, col);
	gpu->im2col(d_x, n, &g, d_col);
	snprintf(what, sizeof(what), "im2col %s", shape);
	compare(what, col, d_col, cols, 1.0);

	for (size_t i = 0; i < cols; i++)
		col[i] = uniform(-1.0f, 1.0f);
	gpu->upload(d_col, col, cols * sizeof(float));
	cpu->col2im(col, n, &g, x);
	gpu->col2im(d_col, n, &g, d_x);
	snprintf(what, sizeof(what), "col2im %s", shape);
	/* up to k * k terms of size 1 add into each element */
	compare(what, x, d_x, in, k);

	cpu->release(x);
	cpu->release(col);
	gpu->release(d_x);
	gpu->release(d_col);
}

static void
check_nchw_to_cnhw(int n, int channels, int plane)
{
	size_t		total = (size_t) n * channels * plane;
	float	   *src = host_random(total, -1.0f, 1.0f);
	float	   *dst = host_random(total, 5.0f, 6.0f);
	float	   *d_src = device_copy(src, total);
	float	   *d_dst = device_copy(dst, total);

	cpu->nchw_to_cnhw(src, dst, n, channels, plane);
	gpu->nchw_to_cnhw(d_src, d_dst, n, channels, plane);
	compare("nchw_to_cnhw", dst, d_dst, total, 1.0);
	cpu->release(src);
	cpu->release(dst);
	gpu->release(d_src);
	gpu->release(d_dst);
}

static void
check_conv(void)
{
	check_im2col(5, 3, 28, 28, 3, 1, 1);	/* the reference CNN's first layer */
	check_im2col(2, 4, 13, 11, 3, 2, 0);
	check_im2col(3, 2, 9, 10, 5, 2, 2);
	check_im2col(1, 3, 7, 7, 1, 1, 0);
	check_im2col(2, 1, 6, 8, 2, 3, 1);	/* stride above the window: rows skipped */
	check_nchw_to_cnhw(37, 16, 196);
	check_nchw_to_cnhw(1, 5, 3);
}
/* ---------------------------------------------------------------------------
 * Pooling: forward from the same x; backward from the CPU's argmax into a dx
 * of garbage (backward overwrites it), so only the backward is compared
 * ------------------------------------------------------------------------- */

/* A host copy of int32 array d must equal want exactly. */
static void
compare_ints(const char *what, const int32_t *want, const int32_t *d, size_t n)
{
	int32_t    *got = malloc(n ? n * sizeof(int32_t) : 1);
	size_t		bad = 0,
				first = 0;

	gpu->download(got, d, n * sizeof(int32_t));
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i] && bad++ == 0)
			first = i;
	CHECK_MSG(bad == 0, "%s: %zu of %zu differ, first [%zu]: cuda %d, cpu %d",
			  what, bad, n, first, bad ? got[first] : 0, bad ? want[first] : 0);
	free(got);
}

/*
 * Pools padded by pad before and pad_end after (ceil_mode: a last, partial
 * window), averages counting the pads when pad is odd: CPU and GPU alike.
 */
static void
check_pool_padded(bool max, int64_t planes, int h, int w, int k, int stride, int pad, int pad_end,
				  bool ceil_mode, bool relu_before)
{
	int			span_h = h + pad + pad_end - k,
				span_w = w + pad + pad_end - k;
	int			oh = (ceil_mode ? span_h + stride - 1 : span_h) / stride + 1,
				ow = (ceil_mode ? span_w + stride - 1 : span_w) / stride + 1;
	NnPoolGeom	g;
	size_t		in = (size_t) planes * h * w,
				out = (size_t) planes * oh * ow;
	float	   *x = host_random(in, -1.0f, 1.0f);
	float	   *y = host_random(out, 5.0f, 6.0f);
	int32_t    *arg = cpu->alloc(out * sizeof(int32_t));
	int32_t    *d_arg = gpu->alloc(out * sizeof(int32_t));
	float	   *d_x,
			   *d_y;
	char		shape[120],
				what[160];

	g = (NnPoolGeom) {.h = h, .w = w, .k = k, .stride = stride, .pad = pad, .pad_end = pad_end,
	.oh = oh, .ow = ow, .count_pad = pad % 2 == 1};
	/* a coarse grid makes ties, where the first maximum must win on both sides */
	for (size_t i = 0; i < in; i++)
		x[i] = roundf(x[i] * 4.0f) / 4.0f;
	d_x = device_copy(x, in);
	d_y = device_copy(y, out);
	snprintf(shape, sizeof(shape), "%lld planes %dx%d k=%d stride=%d pads %d,%d%s%s",
			 (long long) planes, h, w, k, stride, pad, pad_end, ceil_mode ? " ceil" : "",
			 relu_before ? " relu" : "");
	if (max)
	{
		cpu->maxpool_forward(x, y, arg, planes, &g, relu_before);
		gpu->maxpool_forward(d_x, d_y, d_arg, planes, &g, relu_before);
		snprintf(what, sizeof(what), "maxpool_forward argmax %s", shape);
		compare_ints(what, arg, d_arg, out);
	}
	else
	{
		cpu->avgpool_forward(x, y, planes, &g);
		gpu->avgpool_forward(d_x, d_y, planes, &g);
	}
	snprintf(what, sizeof(what), "%s_forward %s", max ? "maxpool" : "avgpool", shape);
	compare(what, y, d_y, out, 1.0);

	/* backward: y becomes dy, x becomes garbage for dx to overwrite */
	for (size_t i = 0; i < out; i++)
		y[i] = uniform(-1.0f, 1.0f);
	for (size_t i = 0; i < in; i++)
		x[i] = NAN;
	gpu->upload(d_y, y, out * sizeof(float));
	gpu->upload(d_x, x, in * sizeof(float));
	gpu->upload(d_arg, arg, out * sizeof(int32_t));
	if (max)
	{
		cpu->maxpool_backward(y, arg, x, planes, &g);
		gpu->maxpool_backward(d_y, d_arg, d_x, planes, &g);
	}
	else
	{
		cpu->avgpool_backward(y, x, planes, &g);
		gpu->avgpool_backward(d_y, d_x, planes, &g);
	}
	snprintf(what, sizeof(what), "%s_backward %s", max ? "maxpool" : "avgpool", shape);
	compare(what, x, d_x, in, 1.0);

	cpu->release(x);
	cpu->release(y);
	cpu->release(arg);
	gpu->release(d_x);
	gpu->release(d_y);
	gpu->release(d_arg);
}

static void
check_pool(bool max, int64_t planes, int h, int w, int k, int stride, bool relu_before)
{
	check_pool_padded(max, planes, h, w, k, stride, 0, 0, false, relu_before);
}

static void
check_global_avgpool(int64_t planes, int plane)
{
	size_t		in = (size_t) planes * plane;
	float	   *x = host_random(in, -1.0f, 1.0f);
	float	   *y = host_random(planes, 5.0f, 6.0f);
	float	   *d_x = device_copy(x, in);
	float	   *d_y = device_copy(y, planes);
	char		what[96];

	cpu->global_avgpool_forward(x, y, planes, plane);
	gpu->global_avgpool_forward(d_x, d_y, planes, plane);
	snprintf(what, sizeof(what), "global_avgpool_forward %lld planes of %d", (long long) planes, plane);
	compare(what, y, d_y, planes, 1.0);

	/* backward from the same dy over a dx of garbage */
	for (size_t i = 0; i < in; i++)
		x[i] = NAN;
	gpu->upload(d_x, x, in * sizeof(float));
	gpu->upload(d_y, y, planes * sizeof(float));
	cpu->global_avgpool_backward(y, x, planes, plane);
	gpu->global_avgpool_backward(d_y, d_x, planes, plane);
	snprintf(what, sizeof(what), "global_avgpool_backward %lld planes of %d", (long long) planes, plane);
	compare(what, x, d_x, in, 1.0);

	cpu->release(x);
	cpu->release(y);
	gpu->release(d_x);
	gpu->release(d_y);
}

static void
check_pools(void)
{
	for (int m = 0; m < 2; m++)
	{
		check_pool(m, 128 * 16, 28, 28, 2, 2, false);	/* the reference CNN */
		check_pool(m, 37, 13, 13, 3, 2, false);	/* overlapping windows */
		check_pool(m, 5, 9, 12, 2, 1, false);
		check_pool(m, 3, 10, 10, 3, 3, false);	/* the last row and column in no window */
		check_pool(m, 2, 11, 11, 5, 5, false);
		check_pool(m, 1, 1, 1, 1, 1, false);
		check_pool_padded(m, 7, 5, 5, 5, 1, 2, 2, false, false);	/* ONNX's pads: windows mostly pads */
		check_pool_padded(m, 9, 32, 32, 2, 1, 0, 1, false, false);	/* auto_pad SAME_UPPER */
		check_pool_padded(m, 9, 13, 11, 3, 2, 1, 0, true, false);	/* ceil_mode's partial windows */
	}
	check_pool(true, 128 * 16, 28, 28, 2, 2, true);
	check_pool(true, 37, 13, 13, 3, 2, true);
	check_global_avgpool(128 * 32, 49);
	check_global_avgpool(3, 1);
	check_global_avgpool(70001, 3);
}

/* ---------------------------------------------------------------------------
 * Batch normalization: forward from the same x and running statistics;
 * backward from the CPU's saved statistics, with and without dx
 * ------------------------------------------------------------------------- */
typedef struct BnArrays
{
	float	   *x,
			   *y,
			   *gamma,
			   *beta,
			   *mean,			/* running */
			   *var,
			   *saved;
} BnArrays;

static void
bn_arrays(BnArrays *h, BnArrays *d, int n, int channels, int plane)
{
	size_t		total = (size_t) n * channels * plane;

	h->x = host_random(total, -2.0f, 3.0f);
	h->y = host_random(total, 5.0f, 6.0f);
	h->gamma = host_random(channels, 0.5f, 1.5f);
	h->beta = host_random(channels, -0.5f, 0.5f);
	h->mean = host_random(channels, -0.1f, 0.1f);
	h->var = host_random(channels, 0.5f, 1.5f);
	h->saved = host_random(2 * (size_t) channels, 5.0f, 6.0f);
	d->x = device_copy(h->x, total);
	d->y = device_copy(h->y, total);
	d->gamma = device_copy(h->gamma, channels);
	d->beta = device_copy(h->beta, channels);
	d->mean = device_copy(h->mean, channels);
	d->var = device_copy(h->var, channels);
	d->saved = device_copy(h->saved, 2 * (size_t) channels);
}

static void
bn_release(BnArrays *h, BnArrays *d)
{
	float	   *const hp[] = {h->x, h->y, h->gamma, h->beta, h->mean, h->var, h->saved};
	float	   *const dp[] = {d->x, d->y, d->gamma, d->beta, d->mean, d->var, d->saved};

	for (int i = 0; i < 7; i++)
	{
		cpu->release(hp[i]);
		gpu->release(dp[i]);
	}
}

static void
batchnorm_backward_both(const BnArrays *h, const BnArrays *d, int n, int channels, int plane,
						bool with_dx, const char *shape)
{
	size_t		total = (size_t) n * channels * plane;
	float	   *dy = host_random(total, -1.0f, 1.0f);
	float	   *dx = host_random(total, 5.0f, 6.0f);
	float	   *dg = host_random(2 * (size_t) channels, 5.0f, 6.0f);
	float	   *d_dy = device_copy(dy, total);
	float	   *d_dx = device_copy(dx, total);
	float	   *d_dg = device_copy(dg, 2 * (size_t) channels);
	char		what[128];

	cpu->batchnorm_backward(h->x, dy, with_dx ? dx : NULL, n, channels, plane,
							h->gamma, dg, dg + channels, h->saved);
	gpu->batchnorm_backward(d->x, d_dy, with_dx ? d_dx : NULL, n, channels, plane,
							d->gamma, d_dg, d_dg + channels, d->saved);
	snprintf(what, sizeof(what), "batchnorm_backward dgamma, dbeta %s%s", shape,
			 with_dx ? "" : " (no dx)");
	compare(what, dg, d_dg, 2 * (size_t) channels, sqrt((double) n * plane));
	snprintf(what, sizeof(what), "batchnorm_backward dx %s%s", shape,
			 with_dx ? "" : " (no dx: untouched)");
	compare(what, dx, d_dx, total, 1e-2);

	cpu->release(dy);
	cpu->release(dx);
	cpu->release(dg);
	gpu->release(d_dy);
	gpu->release(d_dx);
	gpu->release(d_dg);
}

static void
check_batchnorm(int n, int channels, int plane, bool training)
{
	BnArrays	h,
				d;
	size_t		total = (size_t) n * channels * plane;
	char		shape[80],
				what[128];

	snprintf(shape, sizeof(shape), "%dx%dx%d %s", n, channels, plane,
			 training ? "training" : "inference");
	bn_arrays(&h, &d, n, channels, plane);
	cpu->batchnorm_forward(h.x, h.y, n, channels, plane, h.gamma, h.beta, h.mean, h.var,
						   1e-5f, 0.1f, training, h.saved);
	gpu->batchnorm_forward(d.x, d.y, n, channels, plane, d.gamma, d.beta, d.mean, d.var,
						   1e-5f, 0.1f, training, d.saved);
	snprintf(what, sizeof(what), "batchnorm_forward y %s", shape);
	compare(what, h.y, d.y, total, 1.0);
	snprintf(what, sizeof(what), "batchnorm_forward running mean %s", shape);
	compare(what, h.mean, d.mean, channels, 1e-2);
	snprintf(what, sizeof(what), "batchnorm_forward running var %s", shape);
	compare(what, h.var, d.var, channels, 1e-2);
	snprintf(what, sizeof(what), "batchnorm_forward saved %s", shape);
	compare(what, h.saved, d.saved, 2 * (size_t) channels, 1e-2);

	/* the same saved statistics on both sides */
	gpu->upload(d.saved, h.saved, 2 * (size_t) channels * sizeof(float));
	if (training)
	{
		batchnorm_backward_both(&h, &d, n, channels, plane, true, shape);
		batchnorm_backward_both(&h, &d, n, channels, plane, false, shape);
	}
	bn_release(&h, &d);
}

static void
check_batchnorms(void)
{
	check_batchnorm(128, 16, 784, true);
	check_batchnorm(37, 5, 1, true);	/* after a dense layer: planes of one */
	check_batchnorm(3, 300, 7, true);
	check_batchnorm(1, 2, 1, true); /* one value a channel: variance 0 */
	check_batchnorm(7, 3, 37, false);
}

/* ---------------------------------------------------------------------------
 * Activations: forward from the same x, backward from the CPU's forward output
 * ------------------------------------------------------------------------- */
typedef enum
{
	ACT_RELU, ACT_LEAKY, ACT_SIGMOID, ACT_TANH
} Act;

static void
check_activation(Act act, const char *name)
{
	const int64_t n = BIG_N;
	const float alpha = 0.01f;
	float	   *x = host_random(n, -6.0f, 6.0f);
	float	   *y = host_random(n, 0.0f, 1.0f);
	float	   *dy = host_random(n, -1.0f, 1.0f);
	float	   *dx = host_random(n, 0.0f, 1.0f);
	float	   *d_x,
			   *d_y,
			   *d_dy,
			   *d_dx;
	char		what[64];

	/* the kink itself */
	for (int64_t i = 0; i < n; i += 9973)
		x[i] = 0.0f;
	d_x = device_copy(x, n);
	d_y = device_copy(y, n);

	switch (act)
	{
		case ACT_RELU:
			cpu->relu_forward(x, y, n);
			gpu->relu_forward(d_x, d_y, n);
			break;
		case ACT_LEAKY:
			cpu->leaky_relu_forward(x, y, n, alpha);
			gpu->leaky_relu_forward(d_x, d_y, n, alpha);
			break;
		case ACT_SIGMOID:
			cpu->sigmoid_forward(x, y, n);
			gpu->sigmoid_forward(d_x, d_y, n);
			break;
		case ACT_TANH:
			cpu->tanh_forward(x, y, n);
			gpu->tanh_forward(d_x, d_y, n);
			break;
	}
	snprintf(what, sizeof(what), "%s_forward", name);
	compare(what, y, d_y, n, 1e-6);

	/* backward from the same y on both sides, so only the backward is compared */
	gpu->upload(d_y, y, n * sizeof(float));
	d_dy = device_copy(dy, n);
	d_dx = device_copy(dx, n);
	switch (act)
	{
		case ACT_RELU:
			cpu->relu_backward(y, dy, dx, n);
			gpu->relu_backward(d_y, d_dy, d_dx, n);
			break;
		case ACT_LEAKY:
			cpu->leaky_relu_backward(y, dy, dx, n, alpha);
			gpu->leaky_relu_backward(d_y, d_dy, d_dx, n, alpha);
			break;
		case ACT_SIGMOID:
			cpu->sigmoid_backward(y, dy, dx, n);
			gpu->sigmoid_backward(d_y, d_dy, d_dx, n);
			break;
		case ACT_TANH:
			cpu->tanh_backward(y, dy, dx, n);
			gpu->tanh_backward(d_y, d_dy, d_dx, n);
			break;
	}
	snprintf(what, sizeof(what), "%s_backward", name);
	/* 1 - y*y cancels near |y| = 1: compare on the scale of dy */
	compare(what, dx, d_dx, n, 1e-2);

	cpu->release(x);
	cpu->release(y);
	cpu->release(dy);
	cpu->release(dx);
	gpu->release(d_x);
	gpu->release(d_y);
	gpu->release(d_dy);
	gpu->release(d_dx);
}

static void
check_activations(void)
{
	check_activation(ACT_RELU, "relu");
	check_activation(ACT_LEAKY, "leaky_relu");
	check_activation(ACT_SIGMOID, "sigmoid");
	check_activation(ACT_TANH, "tanh");
}

/* sum_squares (the same sum to 1e-6: another order) and scale (the same bytes) */
static void
check_clip_primitives(void)
{
	float	   *x = host_random(BIG_N, -1.0f, 1.0f);
	float	   *dx = device_copy(x, BIG_N);
	double		c = cpu->sum_squares(x, BIG_N),
				g = gpu->sum_squares(dx, BIG_N);

	CHECK_MSG(fabs(c - g) <= 1e-6 * c, "sum_squares: cuda %.17g, cpu %.17g", g, c);
	CHECK(gpu->sum_squares(dx, 0) == 0.0);
	cpu->scale(x, 0.37f, BIG_N);
	gpu->scale(dx, 0.37f, BIG_N);
	compare("scale", x, dx, BIG_N, 1.0);
	cpu->release(x);
	gpu->release(dx);
}

/* ---------------------------------------------------------------------------
 * Softmax cross-entropy
 * ------------------------------------------------------------------------- */
static void check_softmax_xent_smooth(int rows, int classes, float smoothing);

static void
check_softmax_xent(int rows, int classes)
{
	check_softmax_xent_smooth(rows, classes, 0.0f);
}

/* smoothing 0: softmax_xent; else softmax_xent_smooth */
static void
check_softmax_xent_smooth(int rows, int classes, float smoothing)
{
	size_t		total = (size_t) rows * classes;
	float		scale = 1.0f / rows;
	float	   *logits = host_random(total, -8.0f, 8.0f);
	float	   *labels = host_random(rows, 0.0f, 1.0f);
	float	   *dlogits = host_random(total, 0.0f, 1.0f);
	float	   *loss = host_random(rows, 0.0f, 1.0f);
	float	   *d_logits,
			   *d_labels,
			   *d_dlogits,
			   *d_loss;
	char		what[64];

	for (int r = 0; r < rows; r++)
	{
		int			label = (int) (labels[r] * classes);

		labels[r] = (float) (label < classes ? label : classes - 1);
	}
	d_logits = device_copy(logits, total);
	d_labels = device_copy(labels, rows);
	d_dlogits = device_copy(dlogits, total);
	d_loss = device_copy(loss, rows);

	if (smoothing > 0.0f)
	{
		cpu->softmax_xent_smooth(logits, labels, NULL, dlogits, loss, rows, classes, scale, smoothing);
		gpu->softmax_xent_smooth(d_logits, d_labels, NULL, d_dlogits, d_loss, rows, classes, scale, smoothing);
	}
	else
	{
		cpu->softmax_xent(logits, labels, NULL, dlogits, loss, rows, classes, scale);
		gpu->softmax_xent(d_logits, d_labels, NULL, d_dlogits, d_loss, rows, classes, scale);
	}
	snprintf(what, sizeof(what), "softmax_xent dlogits %dx%d smoothing %g", rows, classes, smoothing);
	compare(what, dlogits, d_dlogits, total, scale);
	snprintf(what, sizeof(what), "softmax_xent loss %dx%d smoothing %g", rows, classes, smoothing);
	compare(what, loss, d_loss, rows, 1.0);

	cpu->release(logits);
	cpu->release(labels);
	cpu->release(dlogits);
	cpu->release(loss);
	gpu->release(d_logits);
	gpu->release(d_labels);
	gpu->release(d_dlogits);
	gpu->release(d_loss);
}

/* ---------------------------------------------------------------------------
 * Optimizers: three steps each, the same gradients on both sides
 * ------------------------------------------------------------------------- */
static void
check_sgd(float momentum, float weight_decay, bool nesterov)
{
	const int64_t n = BIG_N;
	const float lr = 0.05f;
	float	   *p = host_random(n, -1.0f, 1.0f);
	float	   *buf = host_random(n, -0.1f, 0.1f);
	float	   *d_p = device_copy(p, n);
	float	   *d_buf = device_copy(buf, n);
	char		what[96];

	for (int step = 0; step < 3; step++)
	{
		float	   *g = host_random(n, -1.0f, 1.0f);
		float	   *d_g = device_copy(g, n);

		cpu->sgd_update(p, g, buf, n, lr, momentum, weight_decay, nesterov);
		gpu->sgd_update(d_p, d_g, d_buf, n, lr, momentum, weight_decay, nesterov);
		cpu->release(g);
		gpu->release(d_g);
	}
	snprintf(what, sizeof(what), "sgd_update p (momentum %g, wd %g, nesterov %d)",
			 momentum, weight_decay, nesterov);
	compare(what, p, d_p, n, 1e-2);
	snprintf(what, sizeof(what), "sgd_update buf (momentum %g, wd %g, nesterov %d)",
			 momentum, weight_decay, nesterov);
	compare(what, buf, d_buf, n, 1e-2);

	cpu->release(p);
	cpu->release(buf);
	gpu->release(d_p);
	gpu->release(d_buf);
}

/* The graph form's add and concat: rows copied into and added to a strided destination. */
static void
check_copy_rows(void)
{
	const int64_t rows = 37,
				cols = 101,
				dst_stride = 250,
				src_stride = 120;
	float	   *src = host_random(rows * src_stride, -1.0f, 1.0f);
	float	   *dst = host_random(rows * dst_stride, -1.0f, 1.0f);
	float	   *d_src = device_copy(src, rows * src_stride);
	float	   *d_dst = device_copy(dst, rows * dst_stride);

	cpu->copy_rows(dst + 7, dst_stride, src, src_stride, rows, cols, false);
	gpu->copy_rows(d_dst + 7, dst_stride, d_src, src_stride, rows, cols, false);
	compare("copy_rows", dst, d_dst, rows * dst_stride, 1e-6);
	cpu->copy_rows(dst + 120, dst_stride, src + 3, src_stride, rows, cols, true);
	gpu->copy_rows(d_dst + 120, dst_stride, d_src + 3, src_stride, rows, cols, true);
	compare("copy_rows, adding", dst, d_dst, rows * dst_stride, 1e-6);
	cpu->copy_rows(dst, 0, src, 0, 1, rows * cols, true);
	gpu->copy_rows(d_dst, 0, d_src, 0, 1, rows * cols, true);
	compare("copy_rows, one row adding", dst, d_dst, rows * dst_stride, 1e-6);
	cpu->release(src);
	cpu->release(dst);
	gpu->release(d_src);
	gpu->release(d_dst);
}

/*
 * RMSprop (momentum and centered as asked) or Adagrad (adagrad: lr_decay
 * 0.01, sums from 0.1) over three steps: every state slice against the CPU's.
 */
static void
check_square(bool adagrad, float momentum, bool centered)
{
	const int64_t n = BIG_N;
	float	   *p = host_random(n, -1.0f, 1.0f);
	float	   *st = host_random(3 * n, adagrad ? 0.1f : 0.0f, adagrad ? 0.1f : 0.0f);
	float	   *d_p = device_copy(p, n);
	float	   *d_st = device_copy(st, 3 * n);
	char		what[96];

	for (int64_t step = 1; step <= 3; step++)
	{
		float	   *g = host_random(n, -1.0f, 1.0f);
		float	   *d_g = device_copy(g, n);

		if (adagrad)
		{
			cpu->adagrad_update(p, g, st, n, 1e-2f, 0.01f, 1e-10f, 1e-3f, step);
			gpu->adagrad_update(d_p, d_g, d_st, n, 1e-2f, 0.01f, 1e-10f, 1e-3f, step);
		}
		else
		{
			cpu->rmsprop_update(p, g, st, momentum > 0 ? st + n : NULL, centered ? st + 2 * n : NULL, n,
								1e-2f, 0.9f, 1e-8f, 1e-3f, momentum);
			gpu->rmsprop_update(d_p, d_g, d_st, momentum > 0 ? d_st + n : NULL, centered ? d_st + 2 * n : NULL, n,
								1e-2f, 0.9f, 1e-8f, 1e-3f, momentum);
		}
		cpu->release(g);
		gpu->release(d_g);
	}
	snprintf(what, sizeof(what), "%s p (momentum %g, centered %d)", adagrad ? "adagrad_update" : "rmsprop_update",
			 momentum, centered);
	compare(what, p, d_p, n, 1e-5);
	snprintf(what, sizeof(what), "%s state (momentum %g, centered %d)",
			 adagrad ? "adagrad_update" : "rmsprop_update", momentum, centered);
	compare(what, st, d_st, 3 * n, 1e-5);
	cpu->release(p);
	cpu->release(st);
	gpu->release(d_p);
	gpu->release(d_st);
}

static void
check_adam(float weight_decay, bool decoupled)
{
	const int64_t n = BIG_N;
	float	   *p = host_random(n, -1.0f, 1.0f);
	float	   *m = host_random(n, 0.0f, 0.0f);
	float	   *v = host_random(n, 0.0f, 0.0f);
	float	   *d_p = device_copy(p, n);
	float	   *d_m = device_copy(m, n);
	float	   *d_v = device_copy(v, n);
	char		what[96];

	for (int64_t step = 1; step <= 3; step++)
	{
		float	   *g = host_random(n, -1.0f, 1.0f);
		float	   *d_g = device_copy(g, n);

		cpu->adam_update(p, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, weight_decay, decoupled, step);
		gpu->adam_update(d_p, d_g, d_m, d_v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, weight_decay, decoupled, step);
		cpu->release(g);
		gpu->release(d_g);
	}
	snprintf(what, sizeof(what), "adam_update p (wd %g, decoupled %d)", weight_decay, decoupled);
	compare(what, p, d_p, n, 1e-2);
	snprintf(what, sizeof(what), "adam_update m (wd %g, decoupled %d)", weight_decay, decoupled);
	compare(what, m, d_m, n, 1e-2);
	snprintf(what, sizeof(what), "adam_update v (wd %g, decoupled %d)", weight_decay, decoupled);
	compare(what, v, d_v, n, 1e-6);

	cpu->release(p);
	cpu->release(m);
	cpu->release(v);
	gpu->release(d_p);
	gpu->release(d_m);
	gpu->release(d_v);
}

/* ---------------------------------------------------------------------------
 * Memory primitives: fill, copy within the device, the finite check
 * ------------------------------------------------------------------------- */
static void
check_memory_primitives(void)
{
	const int64_t n = BIG_N;
	float	   *h = host_random(n, -1.0f, 1.0f);
	float	   *d = device_copy(h, n);
	float	   *d2 = device_copy(h, n);

	/* fill part of it: the rest must survive */
	for (int64_t i = 5; i < n - 7; i++)
		h[i] = -0.0f;
	gpu->fill(d + 5, -0.0f, n - 12);
	compare("fill", h, d, n, 1.0);
	gpu->fill(d2, 3.25f, 0);	/* nothing */
	gpu->copy(d2 + 1, d + 2, sizeof(float) * (n - 3));
	{
		float	   *want = host_random(n, 0.0f, 0.0f);
		float	   *orig = malloc(sizeof(float) * n);

		gpu->download(orig, d2, sizeof(float) * 1);
		want[0] = orig[0];
		memcpy(want + 1, h + 2, sizeof(float) * (n - 3));
		gpu->download(orig, d2 + n - 2, sizeof(float) * 2);
		want[n - 2] = orig[0];
		want[n - 1] = orig[1];
		compare("copy (device to device)", want, d2, n, 1.0);
		cpu->release(want);
		free(orig);
	}

	/* the finite check, against the CPU's, with a bad value at either end and inside */
	CHECK(gpu->all_finite(d, n) && cpu->all_finite(h, n));
	CHECK(gpu->all_finite(d, 0));
	{
		const float bad[3] = {NAN, INFINITY, -INFINITY};
		const int64_t at[3] = {0, n / 2 + 1, n - 1};

		for (int b = 0; b < 3; b++)
		{
			float		keep;

			gpu->download(&keep, d + at[b], sizeof(float));
			gpu->upload(d + at[b], &bad[b], sizeof(float));
			CHECK_MSG(!gpu->all_finite(d, n), "all_finite missed %g at %lld", (double) bad[b], (long long) at[b]);
			CHECK(gpu->all_finite(d, at[b]));
			gpu->upload(d + at[b], &keep, sizeof(float));
		}
	}
	cpu->release(h);
	gpu->release(d);
	gpu->release(d2);
}

/* ---------------------------------------------------------------------------
 * Losses and metrics: the per-row work against the CPU, sums to 1e-9 (double)
 * ------------------------------------------------------------------------- */
static void
compare_sums(const char *what, const double *want, const double *got)
{
	CHECK_MSG(fabs(got[0] - want[0]) <= 1e-9 * (fabs(want[0]) > 1.0 ? fabs(want[0]) : 1.0),
			  "%s: loss sum cuda %.17g, cpu %.17g", what, got[0], want[0]);
	CHECK_MSG(got[1] == want[1], "%s: correct cuda %.0f, cpu %.0f", what, got[1], want[1]);
}

static void
check_xent_metrics(int rows, int classes)
{
	size_t		total = (size_t) rows * classes;
	float	   *logits = host_random(total, -4.0f, 4.0f);
	float	   *labels = host_random(rows, 0.0f, 1.0f);
	float	   *loss = host_random(rows, 0.0f, 3.0f);
	float	   *d_logits,
			   *d_labels,
			   *d_loss;
	double		want[2],
				got[2];
	char		what[64];

	for (int r = 0; r < rows; r++)
	{
		labels[r] = (float) (int) (labels[r] * classes);
		/* ties: the first maximum wins on both */
		if (r % 7 == 0 && classes > 2)
			logits[(size_t) r * classes + 2] = logits[(size_t) r * classes + 1] = 9.0f;
	}
	d_logits = device_copy(logits, total);
	d_labels = device_copy(labels, rows);
	d_loss = device_copy(loss, rows);
	cpu->xent_metrics(logits, labels, loss, rows, classes, want);
	gpu->xent_metrics(d_logits, d_labels, d_loss, rows, classes, got);
	snprintf(what, sizeof(what), "xent_metrics %dx%d", rows, classes);
	compare_sums(what, want, got);
	cpu->release(logits);
	cpu->release(labels);
	cpu->release(loss);
	gpu->release(d_logits);
	gpu->release(d_labels);
	gpu->release(d_loss);
}

/* mse_loss, bce_loss or huber_loss (delta > 0) on both: kernels/rows.h's row formulas */
static void
check_regression_loss(bool bce, float delta, int rows, int k)
{
	size_t		total = (size_t) rows * k;
	float		scale = (bce || delta > 0 ? 1.0f : 2.0f) / (float) ((double) rows * k);
	float	   *z = host_random(total, -6.0f, 6.0f);
	float	   *y = host_random(total, bce ? 0.0f : -2.0f, bce ? 1.0f : 2.0f);
	float	   *dz = host_random(total, 0.0f, 0.0f);
	float	   *d_z = device_copy(z, total),
			   *d_y = device_copy(y, total),
			   *d_dz = device_copy(dz, total);
	double		want[2],
				got[2];
	char		what[64];

	if (bce)
	{
		cpu->bce_loss(z, y, NULL, dz, rows, k, scale, want);
		gpu->bce_loss(d_z, d_y, NULL, d_dz, rows, k, scale, got);
	}
	else if (delta > 0)
	{
		cpu->huber_loss(z, y, NULL, dz, rows, k, delta, scale, want);
		gpu->huber_loss(d_z, d_y, NULL, d_dz, rows, k, delta, scale, got);
	}
	else
	{
		cpu->mse_loss(z, y, NULL, dz, rows, k, scale, want);
		gpu->mse_loss(d_z, d_y, NULL, d_dz, rows, k, scale, got);
	}
	snprintf(what, sizeof(what), "%s dz %dx%d", bce ? "bce_loss" : delta > 0 ? "huber_loss" : "mse_loss", rows, k);
	compare(what, dz, d_dz, total, scale);
	/* expf and log1pf may differ in the last bit: the sum to REL, the count exactly */
	CHECK_MSG(fabs(got[0] - want[0]) <= REL * fabs(want[0]), "%s: loss sum cuda %.17g, cpu %.17g",
			  what, got[0], want[0]);
	CHECK_MSG(got[1] == want[1], "%s: correct cuda %.0f, cpu %.0f", what, got[1], want[1]);
	cpu->release(z);
	cpu->release(y);
	cpu->release(dz);
	gpu->release(d_z);
	gpu->release(d_y);
	gpu->release(d_dz);
}

/* Dropout: the mask is the same counter-based bits, so the results are equal, not near. */
static void
check_dropout(float rate, uint64_t counter)
{
	const int64_t n = BIG_N;
	float	   *x = host_random(n, -1.0f, 1.0f);
	float	   *y = host_random(n, 0.0f, 0.0f);
	float	   *d_x = device_copy(x, n);
	float	   *d_y = device_copy(y, n);
	float	   *got = malloc(sizeof(float) * n);

	cpu->dropout_forward(x, y, n, rate, 77, 3 * 256 + 2, counter);
	gpu->dropout_forward(d_x, d_y, n, rate, 77, 3 * 256 + 2, counter);
	gpu->download(got, d_y, sizeof(float) * n);
	CHECK_MSG(memcmp(got, y, sizeof(float) * n) == 0, "dropout_forward (rate %g) differs", (double) rate);
	/* backward in place, as the engine runs it after an in-place forward */
	cpu->dropout_backward(y, y, n, rate, 77, 3 * 256 + 2, counter);
	gpu->dropout_backward(d_y, d_y, n, rate, 77, 3 * 256 + 2, counter);
	gpu->download(got, d_y, sizeof(float) * n);
	CHECK_MSG(memcmp(got, y, sizeof(float) * n) == 0, "dropout_backward (rate %g) differs", (double) rate);
	free(got);
	cpu->release(x);
	cpu->release(y);
	gpu->release(d_x);
	gpu->release(d_y);
}

/* ---------------------------------------------------------------------------
 * The tests
 * ------------------------------------------------------------------------- */

/* Every entry of a table is there: the engine calls them without looking. */
static void
check_table_complete(const NnBackend *b)
{
#define HAS(fn) CHECK_MSG(b->fn != NULL, "%s backend lacks " #fn, b->name)
	HAS(alloc);
	HAS(release);
	HAS(upload);
	HAS(download);
	HAS(synchronize);
	HAS(copy);
	HAS(fill);
	HAS(all_finite);
	HAS(gemm);
	HAS(bias_add_rows);
	HAS(bias_add_planes);
	HAS(bias_relu_planes);
	HAS(col_sum);
	HAS(plane_sum);
	HAS(im2col);
	HAS(col2im);
	HAS(nchw_to_cnhw);
	HAS(maxpool_forward);
	HAS(maxpool_backward);
	HAS(avgpool_forward);
	HAS(avgpool_backward);
	HAS(global_avgpool_forward);
	HAS(global_avgpool_backward);
	HAS(batchnorm_forward);
	HAS(batchnorm_backward);
	HAS(relu_forward);
	HAS(relu_backward);
	HAS(leaky_relu_forward);
	HAS(leaky_relu_backward);
	HAS(sigmoid_forward);
	HAS(sigmoid_backward);
	HAS(tanh_forward);
	HAS(tanh_backward);
	HAS(gelu_forward);
	HAS(gelu_backward);
	HAS(layernorm_forward);
	HAS(layernorm_backward);
	HAS(embedding_forward);
	HAS(embedding_backward);
	HAS(softmax_forward);
	HAS(softmax_backward);
	HAS(log_softmax_forward);
	HAS(log_softmax_backward);
	HAS(attention_forward);
	HAS(attention_backward);
	HAS(seq_avgpool_forward);
	HAS(seq_avgpool_backward);
	HAS(gru_gates_forward);
	HAS(gru_gates_backward);
	HAS(seq_unfold);
	HAS(seq_fold);
	HAS(softmax_xent);
	HAS(xent_metrics);
	HAS(mse_loss);
	HAS(bce_loss);
	HAS(huber_loss);
	HAS(dropout_forward);
	HAS(dropout_backward);
	HAS(sgd_update);
	HAS(adam_update);
	HAS(rmsprop_update);
	HAS(adagrad_update);
	HAS(softmax_xent_smooth);
	HAS(sum_squares);
	HAS(scale);
	HAS(copy_rows);
#undef HAS
}

/* Asking never crashes, always gives the same answer, and explains a NULL. */
UNIT_TEST(cuda_backend_probe)
{
	char		err1[256],
				err2[256],
				tiny[8];
	const NnBackend *b1 = nn_backend_cuda(err1, sizeof(err1));
	const NnBackend *b2 = nn_backend_cuda(err2, sizeof(err2));

	CHECK(b1 == b2);
	CHECK(strcmp(err1, err2) == 0);
	CHECK(nn_backend_cuda(NULL, 0) == b1);
	memset(tiny, 'x', sizeof(tiny));
	CHECK(nn_backend_cuda(tiny, sizeof(tiny)) == b1);
	CHECK(memchr(tiny, '\0', sizeof(tiny)) != NULL);
	/* failing to initialize is not an error of the running backend */
	CHECK(nn_cuda_last_error() == NULL);
	/* the CUDA table is checked against the same list below */
	check_table_complete(nn_backend_cpu());

	/* the device list agrees: none without a backend's reason, devices with valid entries */
	{
		NnCudaDevice devs[8];
		char		why[256];
		int			driver = -1;
		int			n = nn_cuda_devices(devs, 8, &driver, why, sizeof(why));

		if (n < 0)
			CHECK_MSG(why[0] != '\0' && driver == 0, "nn_cuda_devices failed without a reason");
		for (int i = 0; i < n; i++)
			CHECK_MSG(devs[i].ordinal == i && devs[i].name[0] != '\0' && devs[i].total_bytes > 0 &&
					  devs[i].free_bytes <= devs[i].total_bytes && driver > 0,
					  "device %d: ordinal %d, name \"%s\", %zu of %zu bytes free, driver %d", i,
					  devs[i].ordinal, devs[i].name, devs[i].free_bytes, devs[i].total_bytes, driver);
		CHECK_MSG(b1 == NULL || n >= 1, "a CUDA backend but nn_cuda_devices found no device: %s", why);
		CHECK(nn_cuda_devices(devs, 0, NULL, NULL, 0) <= 0);
	}
	if (b1 == NULL)
	{
		CHECK_MSG(err1[0] != '\0', "nn_backend_cuda returned NULL without a reason");
		return;
	}
	CHECK(err1[0] == '\0');
	/* "fake": a build without CUDA run with PGDL_FAKE_CUDA (kernels/cuda/cuda_fake.h) */
	CHECK(b1->name != NULL && (strcmp(b1->name, "cuda") == 0 || strcmp(b1->name, "fake") == 0));
	check_table_complete(b1);
}

/* Every primitive on awkward sizes, CUDA against CPU within REL. */
UNIT_TEST(cuda_matches_cpu)
{
	char		err[256];
	float		host[5] = {1.0f, -2.0f, 3.5f, 0.0f, -0.25f};
	float		back[5] = {0};
	float	   *d;

	cpu = nn_backend_cpu();
	gpu = nn_backend_cuda(err, sizeof(err));
	if (gpu == NULL)
	{
		/* the reason usually starts with "no device: " already */
		printf("cuda: no device (%s)\n",
			   strncmp(err, "no device: ", 11) == 0 ? err + 11 : err);
		CHECK_MSG(strstr(err, "no device") != NULL || strstr(err, "without CUDA") != NULL,
				  "unexpected reason for no CUDA backend: %s", err);
		unit_skip("no CUDA device: nothing ran on a GPU");
		return;
	}

	/* memory: a round trip, and a zero-byte allocation is still an allocation */
	d = gpu->alloc(sizeof(host));
	CHECK(d != NULL);
	gpu->upload(d, host, sizeof(host));
	gpu->download(back, d, sizeof(host));
	CHECK(memcmp(host, back, sizeof(host)) == 0);
	gpu->release(d);
	d = gpu->alloc(0);
	CHECK(d != NULL);
	gpu->release(d);

	check_primitives();
	gpu->synchronize();
	CHECK_MSG(nn_cuda_last_error() == NULL, "cuda error: %s", nn_cuda_last_error());
}

/* Every primitive on awkward sizes against the CPU; gpu is the backend under test. */
static void
check_primitives(void)
{
	check_gemms();
	check_bias();
	check_conv();
	check_pools();
	check_batchnorms();
	check_activations();
	check_softmax_xent(129, 10);
	check_softmax_xent(3, 1001);
	check_softmax_xent(1000, 1);
	check_softmax_xent_smooth(129, 10, 0.1f);
	check_softmax_xent_smooth(3, 1001, 0.5f);
	check_clip_primitives();
	check_sgd(0.0f, 0.0f, false);
	check_sgd(0.0f, 1e-2f, false);
	check_sgd(0.9f, 1e-4f, false);
	check_sgd(0.9f, 5e-4f, true);
	check_adam(1e-2f, false);
	check_adam(1e-2f, true);
	check_adam(0.0f, false);
	check_square(false, 0.0f, false);
	check_square(false, 0.9f, true);
	check_square(false, 0.0f, true);
	check_square(true, 0.0f, false);
	check_copy_rows();
	check_memory_primitives();
	check_xent_metrics(129, 10);
	check_xent_metrics(70000, 3);	/* more rows than the metric grid has threads */
	check_xent_metrics(5, 1);
	check_regression_loss(false, 0.0f, 129, 7);
	check_regression_loss(false, 0.0f, 20000, 1);
	check_regression_loss(true, 0.0f, 129, 7);
	check_regression_loss(true, 0.0f, 3, 1000);
	check_regression_loss(false, 1.0f, 129, 7);
	check_regression_loss(false, 0.25f, 20000, 1);
	check_dropout(0.5f, 0);
	check_dropout(0.1f, 123456789);
}

/* ---------------------------------------------------------------------------
 * Whole models: the same model trained on the CPU and on the GPU
 * ------------------------------------------------------------------------- */

/*
 * How many of n values are farther than tol relative from the CPU's: relative
 * to max(|want|, 1e-3 of the array's largest), so that values that cancelled
 * to near zero count absolutely.
 */
static int64_t
count_far(const float *want, const float *got, int64_t n, double tol, int64_t *first)
{
	double		top = 0.0;
	int64_t		far = 0;

	for (int64_t i = 0; i < n; i++)
		top = fabs(want[i]) > top ? fabs(want[i]) : top;
	for (int64_t i = 0; i < n; i++)
	{
		double		scale = fabs(want[i]) > 1e-3 * top ? fabs(want[i]) : 1e-3 * top;

		if (!(fabs((double) got[i] - want[i]) <= tol * scale) && far++ == 0)
			*first = i;
	}
	return far;
}

/* Device memory of the model against the CPU model's host memory. */
static void
compare_model_floats(const char *what, const char *part, const NnModel *g, const float *d,
					 const float *want, int64_t n, double tol)
{
	float	   *got = malloc(sizeof(float) * (n > 0 ? n : 1));
	int64_t		first = 0,
				far;

	g->be->download(got, d, sizeof(float) * n);
	far = count_far(want, got, n, tol, &first);
	CHECK_MSG(far == 0, "%s: %s: %lld of %lld differ by more than %g, first [%lld]: cuda %.9g, cpu %.9g",
			  what, part, (long long) far, (long long) n, tol, (long long) first,
			  far ? got[first] : 0.0, far ? want[first] : 0.0);
	free(got);
}

/* An epoch of batches of `batch` over n examples. */
static void
train_epoch(NnModel *m, const float *x, const float *y, int n, int batch, NnBatchStats *st)
{
	NnError		err;
	int64_t		in = nn_model_input_size(m),
				tgt = nn_model_target_size(m);

	for (int s = 0; s < n; s += batch)
	{
		int			k = n - s < batch ? n - s : batch;

		CHECK_MSG(nn_model_train_step(m, x + s * in, y + s * tgt, k, st, &err), "%s", err.msg);
	}
}

static uint8_t *
blob_of(const NnModel *m, size_t *len)
{
	uint8_t    *b;

	*len = nn_model_serialized_size(m);
	b = malloc(*len);
	nn_model_serialize(m, b);
	return b;
}

/*
 * A forward pass layer by layer within 1e-5 (then an inference pass), an epoch's parameters, running
 * statistics and optimizer state within 1e-4, and a second GPU run that gives
 * the first one's bytes.
 */
static void
check_model(const char *what, const NnSpec *s, NnOptType type, int n, int batch)
{
	NnError		err;
	NnOptim		o;
	NnModel    *c = nn_model_create(s, 5, &err),
			   *g,
			   *g2;
	float	   *x,
			   *y;
	const float *zc,
			   *zg;
	NnBatchStats sc = {0},
				sg = {0},
				sg2 = {0};
	int			nf = 48;
	char		part[96];
	uint8_t    *b1,
			   *b2;
	size_t		l1,
				l2;

	CHECK_MSG(c != NULL, "%s: %s", what, err.msg);
	if (c == NULL)
		return;
	nn_optim_defaults(&o, type);
	o.momentum = type == NN_OPT_SGD ? 0.9f : 0.0f;
	o.lr = type == NN_OPT_SGD ? 0.02f : 1e-3f;
	o.weight_decay = type == NN_OPT_ADAMW ? 1e-2f : 0.0f;
	CHECK(nn_model_set_optim(c, &o, &err));
	x = test_normal((int64_t) n * nn_model_input_size(c), 81, 1.0f);
	test_ids_for(s, x, (int64_t) n * nn_model_input_size(c), 81);
	y = test_targets(s->loss, n, nn_model_output_size(c), 82);
	g = nn_model_clone(c, &err);
	g2 = nn_model_clone(c, &err);
	CHECK_MSG(nn_model_use_backend(g, gpu, &err) && nn_model_use_backend(g2, gpu, &err), "%s: %s", what, err.msg);
	CHECK(nn_model_reserve(c, nf, &err) && nn_model_reserve(g, nf, &err));

	/* a forward pass, layer by layer (training mode: every layer's output for the whole batch is kept) */
	zc = nn_model_forward(c, x, nf, true);
	zg = nn_model_forward(g, x, nf, true);
	for (int i = 0; i < s->n_layers; i++)
	{
		snprintf(part, sizeof(part), "forward, layer %d (%s)", i, nn_layer_type_name(s->layers[i].type));
		compare_model_floats(what, part, g, g->out[i], c->out[i], (int64_t) nf * NN_SHAPE_SIZE(c->shape[i + 1]),
							 1e-5);
	}
	{
		int64_t		first = 0,
					cnt = (int64_t) nf * nn_model_output_size(c);

		CHECK_MSG(zc && zg && count_far(zc, zg, cnt, 1e-5, &first) == 0, "%s: forward's host output differs", what);
		/* inference in sub-batches: only the output is whole */
		zc = nn_model_forward(c, x, n, false);
		zg = nn_model_forward(g, x, n, false);
		cnt = (int64_t) n * nn_model_output_size(c);
		CHECK_MSG(zc && zg && count_far(zc, zg, cnt, 1e-5, &first) == 0, "%s: inference output differs", what);
	}

	/* an epoch (g2 first sees what g saw: training-mode forward moved batchnorm's statistics) */
	CHECK(nn_model_forward(g2, x, nf, true) != NULL && nn_model_forward(g2, x, n, false) != NULL);
	train_epoch(c, x, y, n, batch, &sc);
	train_epoch(g, x, y, n, batch, &sg);
	train_epoch(g2, x, y, n, batch, &sg2);
	CHECK_MSG(fabs(sg.loss_sum - sc.loss_sum) <= 1e-4 * fabs(sc.loss_sum), "%s: epoch loss cuda %.9g, cpu %.9g",
			  what, sg.loss_sum, sc.loss_sum);
	compare_model_floats(what, "parameters after an epoch", g, g->params, c->params, c->n_params, 1e-4);
	compare_model_floats(what, "running statistics after an epoch", g, g->buffers, c->buffers, c->n_buffers, 1e-4);
	compare_model_floats(what, "optimizer state after an epoch", g, g->opt_state, c->opt_state, c->n_opt_state, 1e-3);
	CHECK(nn_model_params_finite(g));

	/* the GPU's own kernels and cuBLAS give the same bits run after run */
	b1 = blob_of(g, &l1);
	b2 = blob_of(g2, &l2);
	CHECK_MSG(l1 == l2 && memcmp(b1, b2, l1) == 0 && memcmp(&sg.loss_sum, &sg2.loss_sum, sizeof(double)) == 0,
			  "%s: two GPU runs differ", what);
	free(b1);
	free(b2);
	CHECK_MSG(nn_cuda_last_error() == NULL, "%s: cuda error: %s", what, nn_cuda_last_error());
	nn_model_free(c);
	nn_model_free(g);
	nn_model_free(g2);
	free(x);
	free(y);
}

UNIT_TEST(cuda_model_matches_cpu)
{
	char		err[256];

	cpu = nn_backend_cpu();
	gpu = nn_backend_cuda(err, sizeof(err));
	if (gpu == NULL)
	{
		unit_skip("no CUDA device (cuda_matches_cpu says why)");
		return;
	}
	check_models();
}

/*
 * The same checks against the fake device (kernels/cuda/cuda_fake.h), in every
 * build: the CPU's kernels behind memory the host cannot touch, so they must
 * agree exactly, and the checks themselves run where there is no GPU.
 */
UNIT_TEST(cuda_checks_on_the_fake_device)
{
	char		err[256];

	cpu = nn_backend_cpu();
	gpu = nn_fake_cuda_on("1", 0, err, sizeof(err));
	CHECK_MSG(gpu != NULL, "%s", err);
	if (gpu == NULL)
		return;
	check_table_complete(gpu);
	check_primitives();
	if (!unit_fast)				/* test_device.c trains on the fake at length already */
		check_models();
	gpu = NULL;
	CHECK(nn_fake_cuda_used() == 0);
}

static void
check_models(void)
{
	NnSpec		s;

	spec_begin(&s, 1, 64, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 128);
	spec_add(&s, NN_RELU);
	spec_add(&s, NN_DROPOUT)->rate = 0.2f;
	spec_dense(&s, 64);
	spec_add(&s, NN_TANH);
	spec_dense(&s, 10);
	check_model("mlp, sgd", &s, NN_OPT_SGD, 512, 32);

	spec_begin(&s, 3, 3, 16, 16, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 8, 3, 1, 1);
	spec_add(&s, NN_BATCHNORM);
	spec_add(&s, NN_RELU);
	spec_pool(&s, NN_MAXPOOL2D, 2);
	spec_conv(&s, 16, 3, 1, 1);
	spec_add(&s, NN_RELU);
	spec_pool(&s, NN_MAXPOOL2D, 2);
	spec_pool(&s, NN_AVGPOOL2D, 2);
	spec_add(&s, NN_FLATTEN);
	spec_add(&s, NN_DROPOUT)->rate = 0.25f;
	spec_dense(&s, 5);
	check_model("cnn, adam", &s, NN_OPT_ADAM, 256, 64);

	spec_begin(&s, 3, 2, 9, 9, NN_LOSS_BCE);
	spec_conv(&s, 6, 3, 2, 1);
	spec_add(&s, NN_LEAKY_RELU)->alpha = 0.1f;
	spec_add(&s, NN_GLOBAL_AVGPOOL);
	spec_add(&s, NN_FLATTEN);
	spec_dense(&s, 3);
	check_model("cnn, bce, adamw", &s, NN_OPT_ADAMW, 200, 25);

	spec_begin(&s, 1, 30, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 40);
	spec_add(&s, NN_SIGMOID);
	spec_add(&s, NN_BATCHNORM);
	spec_dense(&s, 4);
	check_model("mlp, mse, sgd", &s, NN_OPT_SGD, 300, 50);

	/* the graph form: a residual block (gradients that add up) and a concat */
	spec_residual_cnn(&s, 3, 12, 8, 5);
	s.layers[3].groups = 8;		/* depthwise */
	spec_merge(&s, NN_CONCAT, 2, (const int[]) {12, 11});
	spec_dense(&s, 4);
	check_model("residual, concat, adam", &s, NN_OPT_ADAM, 200, 40);

	/* a transformer block's pieces: layernorm and gelu */
	spec_begin(&s, 1, 48, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 96);
	spec_add(&s, NN_LAYERNORM);
	spec_add(&s, NN_GELU);
	spec_dense(&s, 10);
	check_model("mlp, layernorm, gelu, adamw", &s, NN_OPT_ADAMW, 256, 32);

	/* a sequence: embedding, softmax over features, the mean over steps */
	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_add(&s, NN_EMBEDDING)->vocab = 50;
	s.layers[0].units = 16;
	spec_add(&s, NN_TANH);
	spec_add(&s, NN_SOFTMAX);
	spec_add(&s, NN_GLOBAL_AVGPOOL);
	spec_dense(&s, 10);
	check_model("embedding, softmax, seq mean, adam", &s, NN_OPT_ADAM, 256, 32);

	/* a gru over every step into a gru's last state */
	spec_begin(&s, 1, 9, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_add(&s, NN_EMBEDDING)->vocab = 40;
	s.layers[0].units = 12;
	spec_add(&s, NN_GRU)->units = 16;
	s.layers[1].return_sequences = true;
	spec_add(&s, NN_GRU)->units = 10;
	spec_dense(&s, 5);
	check_model("embedding, gru, gru, adam", &s, NN_OPT_ADAM, 256, 32);

	/* conv1d with padding, then with stride */
	spec_begin(&s, 1, 15, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_add(&s, NN_EMBEDDING)->vocab = 30;
	s.layers[0].units = 8;
	spec_add(&s, NN_CONV1D)->filters = 12;
	s.layers[1].kernel = 3;
	s.layers[1].padding = 1;
	spec_add(&s, NN_RELU);
	spec_add(&s, NN_CONV1D)->filters = 6;
	s.layers[3].kernel = 3;
	s.layers[3].stride = 2;
	spec_dense(&s, 5);
	check_model("embedding, conv1d, conv1d, sgd", &s, NN_OPT_SGD, 256, 32);

	/* a transformer encoder block: positions, attention, per-step feed-forward, residual adds */
	spec_transformer_block(&s, 10, 20, 16, 4, 32, 5);
	check_model("transformer encoder, adamw", &s, NN_OPT_ADAMW, 256, 32);
}
