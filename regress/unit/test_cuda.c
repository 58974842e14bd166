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
#include "unit.h"

#define REL 1e-4				/* relative tolerance, CUDA against CPU */
#define BIG_N 1000003			/* elementwise length: prime, not a multiple of a block */

static const NnBackend *cpu;
static const NnBackend *gpu;
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
 * Bias and its gradient
 * ------------------------------------------------------------------------- */
static void
check_bias_add(int rows, int cols)
{
	size_t		total = (size_t) rows * cols;
	float	   *y = host_random(total, -1.0f, 1.0f);
	float	   *bias = host_random(cols, -1.0f, 1.0f);
	float	   *dy = device_copy(y, total);
	float	   *dbias = device_copy(bias, cols);

	cpu->bias_add_rows(y, bias, rows, cols);
	gpu->bias_add_rows(dy, dbias, rows, cols);
	compare("bias_add_rows", y, dy, total, 1.0);
	cpu->release(y);
	cpu->release(bias);
	gpu->release(dy);
	gpu->release(dbias);
}

static void
check_bias_add_planes(int n, int channels, int plane)
{
	size_t		total = (size_t) n * channels * plane;
	float	   *y = host_random(total, -1.0f, 1.0f);
	float	   *bias = host_random(channels, -1.0f, 1.0f);
	float	   *dy = device_copy(y, total);
	float	   *dbias = device_copy(bias, channels);

	cpu->bias_add_planes(y, bias, n, channels, plane);
	gpu->bias_add_planes(dy, dbias, n, channels, plane);
	compare("bias_add_planes", y, dy, total, 1.0);
	cpu->release(y);
	cpu->release(bias);
	gpu->release(dy);
	gpu->release(dbias);
}

/* db starts non-zero: both reductions add to it */
static void
check_col_sum(int rows, int cols)
{
	size_t		total = (size_t) rows * cols;
	float	   *dy = host_random(total, -1.0f, 1.0f);
	float	   *db = host_random(cols, -1.0f, 1.0f);
	float	   *d_dy = device_copy(dy, total);
	float	   *d_db = device_copy(db, cols);
	char		what[64];

	cpu->col_sum(dy, db, rows, cols);
	gpu->col_sum(d_dy, d_db, rows, cols);
	snprintf(what, sizeof(what), "col_sum %dx%d", rows, cols);
	/* a sum of rows terms of size 1 with random signs is about sqrt(rows) */
	compare(what, db, d_db, cols, sqrt(rows));
	cpu->release(dy);
	cpu->release(db);
	gpu->release(d_dy);
	gpu->release(d_db);
}

static void
check_plane_sum(int n, int channels, int plane)
{
	size_t		total = (size_t) n * channels * plane;
	float	   *dy = host_random(total, -1.0f, 1.0f);
	float	   *db = host_random(channels, -1.0f, 1.0f);
	float	   *d_dy = device_copy(dy, total);
	float	   *d_db = device_copy(db, channels);
	char		what[64];

	cpu->plane_sum(dy, db, n, channels, plane);
	gpu->plane_sum(d_dy, d_db, n, channels, plane);
	snprintf(what, sizeof(what), "plane_sum %dx%dx%d", n, channels, plane);
	compare(what, db, d_db, channels, sqrt((double) n * plane));
	cpu->release(dy);
	cpu->release(db);
	gpu->release(d_dy);
	gpu->release(d_db);
}

static void
check_bias(void)
{
	check_bias_add(257, 1031);
	check_bias_add(1, 1);
	check_bias_add_planes(3, 37, 899);
	check_bias_add_planes(1, 1, BIG_N);
	check_col_sum(1001, 67);
	check_col_sum(5, 4099);
	check_col_sum(3000, 1);
	check_plane_sum(7, 19, 221);
	check_plane_sum(2, 1, BIG_N);
	check_plane_sum(1, 70, 1);
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

/* ---------------------------------------------------------------------------
 * Softmax cross-entropy
 * ------------------------------------------------------------------------- */
static void
check_softmax_xent(int rows, int classes)
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

	cpu->softmax_xent(logits, labels, dlogits, loss, rows, classes, scale);
	gpu->softmax_xent(d_logits, d_labels, d_dlogits, d_loss, rows, classes, scale);
	snprintf(what, sizeof(what), "softmax_xent dlogits %dx%d", rows, classes);
	compare(what, dlogits, d_dlogits, total, scale);
	snprintf(what, sizeof(what), "softmax_xent loss %dx%d", rows, classes);
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
 * The tests
 * ------------------------------------------------------------------------- */

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

	if (b1 == NULL)
	{
		CHECK_MSG(err1[0] != '\0', "nn_backend_cuda returned NULL without a reason");
		return;
	}
	CHECK(err1[0] == '\0');
	CHECK(b1->name != NULL && strcmp(b1->name, "cuda") == 0);
#define HAS(fn) CHECK_MSG(b1->fn != NULL, "cuda backend lacks " #fn)
	HAS(alloc);
	HAS(release);
	HAS(upload);
	HAS(download);
	HAS(synchronize);
	HAS(gemm);
	HAS(bias_add_rows);
	HAS(bias_add_planes);
	HAS(col_sum);
	HAS(plane_sum);
	HAS(relu_forward);
	HAS(relu_backward);
	HAS(leaky_relu_forward);
	HAS(leaky_relu_backward);
	HAS(sigmoid_forward);
	HAS(sigmoid_backward);
	HAS(tanh_forward);
	HAS(tanh_backward);
	HAS(softmax_xent);
	HAS(sgd_update);
	HAS(adam_update);
#undef HAS
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

	check_gemms();
	check_bias();
	check_activations();
	check_softmax_xent(129, 10);
	check_softmax_xent(3, 1001);
	check_softmax_xent(1000, 1);
	check_sgd(0.0f, 0.0f, false);
	check_sgd(0.0f, 1e-2f, false);
	check_sgd(0.9f, 1e-4f, false);
	check_sgd(0.9f, 5e-4f, true);
	check_adam(1e-2f, false);
	check_adam(1e-2f, true);
	check_adam(0.0f, false);

	gpu->synchronize();
	CHECK_MSG(nn_cuda_last_error() == NULL, "cuda error: %s", nn_cuda_last_error());
}
