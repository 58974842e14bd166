/*
 * test_determinism.c -- the same seed gives the same model, bit for bit.
 */
#include "test_util.h"
#include "unit.h"

static uint8_t *
train_and_serialize(const NnSpec *s, uint64_t seed, NnOptType opt_type, int steps, size_t *len)
{
	NnError		err;
	NnOptim		o;
	NnModel    *m = nn_model_create(s, seed, &err);
	int			n = 8;
	float	   *x = test_normal(n * nn_model_input_size(m), 21, 1.0f);
	float	   *y = test_targets(s->loss, n, nn_model_output_size(m), 22);
	uint8_t    *buf;

	nn_optim_defaults(&o, opt_type);
	o.momentum = opt_type == NN_OPT_SGD ? 0.9f : 0.0f;
	nn_model_set_optim(m, &o, &err);
	for (int i = 0; i < steps; i++)
		CHECK(nn_model_train_step(m, x + (i % 2) * (n / 2) * nn_model_input_size(m),
								  y + (i % 2) * (n / 2) * nn_model_target_size(m), n / 2, NULL, &err));
	*len = nn_model_serialized_size(m);
	buf = malloc(*len);
	nn_model_serialize(m, buf);
	nn_model_free(m);
	free(x);
	free(y);
	return buf;
}

static void
dropout_cnn(NnSpec *s)
{
	spec_begin(s, 3, 2, 8, 8, NN_LOSS_CROSS_ENTROPY);
	spec_conv(s, 4, 3, 1, 1);
	spec_add(s, NN_BATCHNORM);
	spec_add(s, NN_RELU);
	spec_pool(s, NN_MAXPOOL2D, 2);
	spec_add(s, NN_FLATTEN);
	spec_add(s, NN_DROPOUT)->rate = 0.5f;
	spec_dense(s, 4);
}

UNIT_TEST(determinism_same_seed_same_bytes)
{
	NnSpec		s;
	size_t		la,
				lb,
				lc;
	uint8_t    *a,
			   *b,
			   *c;

	dropout_cnn(&s);
	a = train_and_serialize(&s, 5, NN_OPT_SGD, 6, &la);
	b = train_and_serialize(&s, 5, NN_OPT_SGD, 6, &lb);
	c = train_and_serialize(&s, 6, NN_OPT_SGD, 6, &lc);
	CHECK(la == lb && memcmp(a, b, la) == 0);
	CHECK(la == lc && memcmp(a, c, la) != 0);
	free(a);
	free(b);
	free(c);

	spec_reference_mlp(&s);
	a = train_and_serialize(&s, 9, NN_OPT_ADAMW, 3, &la);
	b = train_and_serialize(&s, 9, NN_OPT_ADAMW, 3, &lb);
	CHECK(la == lb && memcmp(a, b, la) == 0);
	free(a);
	free(b);
}

/* pools with pads and ceil_mode's partial windows (issue 40): the same seed, the same bytes */
UNIT_TEST(determinism_padded_pools)
{
	NnSpec		s;
	NnLayerSpec *l;
	size_t		la,
				lb;
	uint8_t    *a,
			   *b;

	spec_begin(&s, 3, 2, 9, 9, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 3, 3, 1, 1);
	l = spec_add(&s, NN_MAXPOOL2D);
	l->kernel = 3;
	l->stride = 2;
	l->padding = 1;
	l->ceil_mode = true;
	l = spec_add(&s, NN_AVGPOOL2D);
	l->kernel = 2;
	l->stride = 1;
	l->padding = 0;
	l->pad_end = 1;
	l->count_pad = true;
	spec_add(&s, NN_FLATTEN);
	spec_dense(&s, 3);
	a = train_and_serialize(&s, 7, NN_OPT_ADAM, 4, &la);
	b = train_and_serialize(&s, 7, NN_OPT_ADAM, 4, &lb);
	CHECK(la == lb && memcmp(a, b, la) == 0);
	free(a);
	free(b);
}

UNIT_TEST(determinism_rng_is_counter_based)
{
	/* a value depends on its coordinates, not on what was drawn before */
	float		later = nn_rng_normal(1, 2, 1000);

	for (int i = 0; i < 100; i++)
		(void) nn_rng_normal(1, 2, i);
	CHECK(nn_rng_normal(1, 2, 1000) == later);
	CHECK(nn_rng_u64(1, 2, 3) != nn_rng_u64(1, 3, 3));
	CHECK(nn_rng_u64(1, 2, 3) != nn_rng_u64(2, 2, 3));

	/* uniform in [0, 1), normal with about the right moments */
	{
		double		sum = 0.0,
					sq = 0.0;
		float		lo = 1.0f,
					hi = 0.0f;
		int			n = 100000;

		for (int i = 0; i < n; i++)
		{
			float		u = nn_rng_uniform(3, 0, i);
			float		z = nn_rng_normal(3, 1, i);

			lo = u < lo ? u : lo;
			hi = u > hi ? u : hi;
			sum += z;
			sq += (double) z * z;
		}
		CHECK(lo >= 0.0f && hi < 1.0f && lo < 0.001f && hi > 0.999f);
		CHECK_NEAR(sum / n, 0.0, 0.02);
		CHECK_NEAR(sq / n, 1.0, 0.02);
	}
}

UNIT_TEST(determinism_initializers)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m;

	/* He: std sqrt(2 / fan_in); Glorot: uniform within sqrt(6 / (fan_in + fan_out)) */
	spec_begin(&s, 1, 400, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 300);
	spec_dense(&s, 200);
	s.layers[1].init = NN_INIT_GLOROT;
	m = nn_model_create(&s, 3, &err);
	{
		double		sq = 0.0;
		float		limit = sqrtf(6.0f / 500.0f),
					max = 0.0f;
		const float *w1 = m->params + m->param_off[1];

		for (int j = 0; j < 400 * 300; j++)
			sq += (double) m->params[j] * m->params[j];
		CHECK_NEAR(sqrt(sq / (400 * 300)), sqrt(2.0 / 400), 0.002);
		for (int j = 0; j < 300 * 200; j++)
			max = fabsf(w1[j]) > max ? fabsf(w1[j]) : max;
		CHECK(max <= limit && max > 0.99f * limit);
		for (int j = 0; j < 300; j++)
			CHECK(m->params[400 * 300 + j] == 0.0f);	/* biases */
	}
	nn_model_free(m);
}

UNIT_TEST(determinism_permutation)
{
	int32_t		a[50],
				b[50],
				c[50];
	bool		seen[50] = {false};

	nn_rng_permutation(7, NN_EPOCH_ORDER_STREAM(0), 50, a);
	nn_rng_permutation(7, NN_EPOCH_ORDER_STREAM(0), 50, b);
	nn_rng_permutation(7, NN_EPOCH_ORDER_STREAM(1), 50, c);
	CHECK(memcmp(a, b, sizeof(a)) == 0);
	CHECK(memcmp(a, c, sizeof(a)) != 0);
	for (int i = 0; i < 50; i++)
	{
		CHECK(a[i] >= 0 && a[i] < 50 && !seen[a[i]]);
		if (a[i] >= 0 && a[i] < 50)
			seen[a[i]] = true;
	}
}

/*
 * Whatever the workspace held before a step, the step gives the same bytes:
 * a chunked run of layers after batchnorm (batchnorm -> relu -> maxpool, in
 * more chunks than one) once read gradient memory that nothing had written.
 */
UNIT_TEST(determinism_workspace_contents_do_not_matter)
{
	NnSpec		s;
	NnError		err;
	NnOptim		o;
	uint8_t    *blob[2];
	size_t		len[2];

	spec_begin(&s, 3, 2, 32, 32, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 8, 3, 1, 1);
	spec_add(&s, NN_BATCHNORM);
	spec_add(&s, NN_RELU);
	spec_pool(&s, NN_MAXPOOL2D, 2);
	spec_add(&s, NN_FLATTEN);
	spec_dense(&s, 3);
	nn_optim_defaults(&o, NN_OPT_SGD);
	for (int k = 0; k < 2; k++)
	{
		NnModel    *m = nn_model_create(&s, 4, &err);
		NnMemory	mem;
		int			n = 64;		/* several chunks of the relu -> maxpool run */
		float	   *x = test_normal(n * nn_model_input_size(m), 21, 1.0f);
		float	   *y = test_targets(s.loss, n, 3, 22);

		nn_model_set_optim(m, &o, &err);
		CHECK(nn_model_reserve(m, n, &err) && nn_spec_memory(&s, NULL, n, &mem, &err));
		for (int64_t j = 0; j < mem.workspace / 4; j++)
			m->work[j] = k == 0 ? 0.0f : NAN;
		CHECK(nn_model_train_step(m, x, y, n, NULL, &err));
		CHECK(nn_model_params_finite(m));
		len[k] = nn_model_serialized_size(m);
		blob[k] = malloc(len[k]);
		nn_model_serialize(m, blob[k]);
		nn_model_free(m);
		free(x);
		free(y);
	}
	CHECK(len[0] == len[1] && memcmp(blob[0], blob[1], len[0]) == 0);
	free(blob[0]);
	free(blob[1]);
}
