/*
 * test_bf16.c -- the bf16 products (gemm_bf16) and training in bf16.
 *
 * Where the CPU has AVX512_BF16: the products against a double reference of
 * the inputs rounded here (by a rule written apart from the kernel's), the
 * rounding rule's edges, the same bytes twice, and training that gives the
 * same bytes twice, predicts in fp32 and stays near fp32's loss.  Where it
 * lacks it, and on every CPU under an avx2 cap: the refusal.  Never skipped.
 */
#include "backend.h"
#include "cuda/cuda_fake.h"
#include "test_util.h"
#include "unit.h"

/* bf16 of x by arithmetic, not bits: nearest, ties to even; a denormal to a signed zero. */
static double
ref_bf16(float x)
{
	int			e;
	double		f,
				scaled,
				lo;

	if (isnan(x) || isinf(x) || x == 0.0f)
		return x;
	if (fabsf(x) < 1.17549435e-38f)
		return signbit(x) ? -0.0 : 0.0;
	f = frexp((double) x, &e);	/* x = f 2^e, 0.5 <= |f| < 1: 8 significant bits are f's first 8 */
	scaled = f * 256.0;
	lo = floor(scaled);
	if (scaled - lo > 0.5 || (scaled - lo == 0.5 && fmod(lo, 2.0) != 0.0))
		lo += 1.0;
	return ldexp(lo / 256.0, e);
}

/* op(A) op(B) of m x k and k x n: gemm_bf16 against the double sums of the rounded inputs. */
static void
check_products(const NnBackend *be, bool ta, bool tb, int m, int n, int k, uint64_t seed)
{
	float	   *a = test_normal((int64_t) m * k, seed, 1.0f);
	float	   *b = test_normal((int64_t) k * n, seed + 1, 0.5f);
	float	   *c = malloc(sizeof(float) * m * n);
	float	   *c2 = malloc(sizeof(float) * m * n);
	float	   *work = be->alloc(sizeof(float) * nn_bf16_work_floats(m, n, k));
	int			lda = ta ? m : k,
				ldb = tb ? k : n;
	double		worst = 0.0,
				unrounded = 0.0;

	be->gemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, c, n, work);
	be->gemm_bf16(ta, tb, m, n, k, a, lda, b, ldb, c2, n, work);
	CHECK_MSG(memcmp(c, c2, sizeof(float) * m * n) == 0, "bf16 %dx%dx%d: two calls differ", m, n, k);
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++)
		{
			double		ref = 0.0,
						mag = 0.0,
						exact = 0.0;

			for (int p = 0; p < k; p++)
			{
				float		av = ta ? a[p * lda + i] : a[i * lda + p];
				float		bv = tb ? b[j * ldb + p] : b[p * ldb + j];

				ref += ref_bf16(av) * ref_bf16(bv);
				mag += fabs(ref_bf16(av) * ref_bf16(bv));
				exact += (double) av * bv;
			}
			/* fp32 sums of exact products: k roundings of at most 2^-24 of the running magnitude */
			if (fabs(c[i * n + j] - ref) / (mag + 1e-30) > worst)
				worst = fabs(c[i * n + j] - ref) / (mag + 1e-30);
			if (fabs(c[i * n + j] - exact) / (mag + 1e-30) > unrounded)
				unrounded = fabs(c[i * n + j] - exact) / (mag + 1e-30);
		}
	CHECK_MSG(worst <= 1e-6 * (k < 16 ? 1 : k / 16.0), "bf16 %dx%dx%d (%d%d): %.3g of the magnitude from the reference",
			  m, n, k, ta, tb, worst);
	/* and the inputs were rounded: against the unrounded products the error is bf16's (2^-9) */
	CHECK_MSG(unrounded > 1e-4, "bf16 %dx%dx%d: within %.3g of the fp32 inputs' product, not rounded?",
			  m, n, k, unrounded);
	be->release(work);
	free(a);
	free(b);
	free(c);
	free(c2);
}

/* One product of 1 x 1: the rounding of x alone. */
static float
rounded(const NnBackend *be, float x)
{
	float		one = 1.0f,
				c = -7.0f;
	float	   *work = be->alloc(sizeof(float) * nn_bf16_work_floats(1, 1, 1));

	be->gemm_bf16(false, false, 1, 1, 1, &x, 1, &one, 1, &c, 1, work);
	be->release(work);
	return c;
}

/* An MLP of 20-48-24-3 with a bf16 or fp32 optimizer: sgd with momentum. */
static NnModel *
mlp(bool bf16, NnError *err)
{
	NnSpec		s;
	NnOptim		o;
	NnModel    *m;

	spec_begin(&s, 1, 20, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 48);
	spec_add(&s, NN_RELU);
	spec_dense(&s, 24);
	spec_add(&s, NN_RELU);
	spec_dense(&s, 3);
	m = nn_model_create(&s, 11, err);
	CHECK(m != NULL);
	CHECK(nn_model_reserve(m, 32, err));
	nn_optim_defaults(&o, NN_OPT_SGD);
	o.lr = 0.05f;
	o.momentum = 0.9f;
	o.bf16 = bf16;
	if (!nn_model_set_optim(m, &o, err))
	{
		nn_model_free(m);
		return NULL;
	}
	return m;
}

/* 40 steps of 32 examples (the step's threads: 1 or 2); the loss of the last 10. */
static double
train(NnModel *m, int threads)
{
	NnError		err;
	float	   *x = test_normal(64 * 20, 5, 1.0f);
	float	   *y = test_targets(NN_LOSS_CROSS_ENTROPY, 64, 3, 6);
	NnBatchStats st = {0};

	CHECK(nn_model_set_threads(m, threads, &err));
	for (int i = 0; i < 40; i++)
	{
		if (i == 30)
			memset(&st, 0, sizeof(st));
		CHECK(nn_model_train_step(m, x + (i % 2) * 32 * 20, y + (i % 2) * 32, 32, &st, &err));
	}
	free(x);
	free(y);
	return st.loss_sum / (double) st.n;
}

UNIT_TEST(bf16_products_match_a_double_reference_of_rounded_inputs)
{
	const NnBackend *be = nn_backend_cpu();
	static const int shapes[][3] = {{1, 1, 2}, {8, 32, 64}, {13, 45, 37}, {128, 10, 784}, {33, 17, 1}, {9, 70, 130}};
	float		denormal = 1e-39f;

	CHECK(be->gemm_bf16 != NULL);
	if (!nn_cpu_bf16())
	{
		/* no bf16 here: the kernel is never reached (the test below asserts the refusal) */
		CHECK(nn_cpu_isa() < NN_ISA_AVX512 || !nn_cpu_has_bf16());
		return;
	}
	for (int s = 0; s < (int) (sizeof(shapes) / sizeof(shapes[0])); s++)
		for (int t = 0; t < 4; t++)
			check_products(be, t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], 100 + s);
	/* ties to even, a denormal to zero, NaN stays NaN, overflow to infinity */
	CHECK(rounded(be, 1.0f + 0x1p-8f) == 1.0f);
	CHECK(rounded(be, 1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
	CHECK(rounded(be, -(1.0f + 0x1p-8f + 0x1p-20f)) == -(1.0f + 0x1p-7f));
	CHECK(rounded(be, denormal) == 0.0f);
	CHECK(isnan(rounded(be, NAN)));
	CHECK(isinf(rounded(be, 3.4e38f)));
	CHECK(rounded(be, 3.0e38f) == (float) ref_bf16(3.0e38f));
}

UNIT_TEST(bf16_training_same_bytes_fp32_inference_and_refusals)
{
	NnError		err;
	NnModel    *f = mlp(false, &err),
			   *a,
			   *b;
	double		lf = train(f, 1);

	/* every CPU: a device without bf16 products (the fake, as CUDA) refuses a bf16 model */
	{
		char		why[256];
		const NnBackend *dev = nn_fake_cuda_on("1", 0, why, sizeof(why));
		NnModel    *d = nn_model_clone(f, &err);
		NnOptim		o = f->optim;

		CHECK_MSG(dev != NULL && d != NULL, "fake device: %s", why);
		CHECK(nn_model_use_backend(d, dev, &err));
		o.bf16 = true;
		CHECK(!nn_model_set_optim(d, &o, &err) && strcmp(err.field, "precision") == 0 &&
			  strstr(err.msg, "no bf16 products") != NULL);
		nn_model_free(d);
	}
	/* every CPU: under an avx2 cap bf16 is refused, naming the feature */
	nn_set_cpu_isa(NN_ISA_AVX2);
	a = mlp(true, &err);
	CHECK(a == NULL && strcmp(err.field, "precision") == 0 && strstr(err.msg, "AVX512_BF16") != NULL);
	nn_set_cpu_isa(NN_ISA_AVX512);
	a = mlp(true, &err);
	if (!nn_cpu_has_bf16())
	{
		CHECK_MSG(a == NULL && strcmp(err.field, "precision") == 0 && strstr(err.msg, "lacks") != NULL,
				  "a CPU without AVX512_BF16 refuses bf16: %s", a ? "accepted" : err.msg);
		nn_model_free(f);
		return;
	}
	b = mlp(true, &err);
	CHECK(a != NULL && b != NULL);
	{
		double		la = train(a, 1),
					lb = train(b, 1);
		size_t		len = nn_model_serialized_size(a);
		uint8_t    *ba = malloc(len),
				   *bb = malloc(len);
		float	   *x = test_normal(16 * 20, 9, 1.0f);
		float	   *pa = malloc(sizeof(float) * 16 * 3);
		NnModel    *c = nn_model_clone(a, &err);
		NnOptim		o = a->optim;

		nn_model_serialize(a, ba);
		nn_model_serialize(b, bb);
		CHECK_MSG(la == lb && memcmp(ba, bb, len) == 0, "bf16 training twice: different bytes");
		CHECK_MSG(fabs(la - lf) < 0.1 * lf + 0.02, "bf16 loss %.5f, fp32 %.5f", la, lf);
		CHECK_MSG(la != lf, "bf16 training gave fp32's loss exactly");
		/* inference is fp32: the bf16 model's outputs are those of its weights in an fp32 model */
		memcpy(pa, nn_model_forward(a, x, 16, false), sizeof(float) * 16 * 3);
		o.bf16 = false;
		CHECK(c != NULL && nn_model_set_optim(c, &o, &err));
		CHECK(memcmp(pa, nn_model_forward(c, x, 16, false), sizeof(float) * 16 * 3) == 0);
		/* threads: the same bytes twice (a step's threads are part of its arithmetic, as in fp32) */
		nn_model_free(b);
		b = mlp(true, &err);
		la = train(b, 2);
		nn_model_free(a);
		a = mlp(true, &err);
		lb = train(a, 2);
		nn_model_serialize(a, ba);
		nn_model_serialize(b, bb);
		CHECK_MSG(la == lb && memcmp(ba, bb, len) == 0, "bf16 training on 2 threads twice: different bytes");
		nn_model_free(c);
		free(ba);
		free(bb);
		free(x);
		free(pa);
	}
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(f);
}
