/*
 * test_optim.c -- optimizer updates against values worked out by hand.
 *
 * One parameter p = 1 with gradient g = 0.5 (then 0.25), lr = 0.1.  The
 * expected numbers are written out in the comments; PyTorch parity of the same
 * optimizers on a real network is in test_parity.c.
 */
#include "backend.h"
#include "test_util.h"
#include "unit.h"

UNIT_TEST(optim_sgd_plain)
{
	const NnBackend *be = nn_backend_cpu();
	float		p = 1.0f,
				g = 0.5f;

	/* p = 1 - 0.1 * (0.5 + 0.01 * 1) = 0.949 */
	be->sgd_update(&p, &g, NULL, 1, 0.1f, 0.0f, 0.01f, false);
	CHECK_NEAR(p, 0.949, 1e-7);
}

UNIT_TEST(optim_sgd_momentum)
{
	const NnBackend *be = nn_backend_cpu();
	float		p = 1.0f,
				buf = 0.0f,
				g = 0.5f;

	/* step 1: buf = 0.5, p = 1 - 0.05 = 0.95 */
	be->sgd_update(&p, &g, &buf, 1, 0.1f, 0.9f, 0.0f, false);
	CHECK_NEAR(buf, 0.5, 1e-7);
	CHECK_NEAR(p, 0.95, 1e-7);
	/* step 2, g = 0.25: buf = 0.45 + 0.25 = 0.7, p = 0.95 - 0.07 = 0.88 */
	g = 0.25f;
	be->sgd_update(&p, &g, &buf, 1, 0.1f, 0.9f, 0.0f, false);
	CHECK_NEAR(buf, 0.7, 1e-7);
	CHECK_NEAR(p, 0.88, 1e-7);
}

UNIT_TEST(optim_sgd_nesterov)
{
	const NnBackend *be = nn_backend_cpu();
	float		p = 1.0f,
				buf = 0.0f,
				g = 0.5f;

	/* step 1: buf = 0.5, step = 0.5 + 0.9 * 0.5 = 0.95, p = 1 - 0.095 = 0.905 */
	be->sgd_update(&p, &g, &buf, 1, 0.1f, 0.9f, 0.0f, true);
	CHECK_NEAR(p, 0.905, 1e-7);
	/* step 2, g = 0.25: buf = 0.7, step = 0.25 + 0.63 = 0.88, p = 0.905 - 0.088 = 0.817 */
	g = 0.25f;
	be->sgd_update(&p, &g, &buf, 1, 0.1f, 0.9f, 0.0f, true);
	CHECK_NEAR(p, 0.817, 1e-6);
}

UNIT_TEST(optim_adam)
{
	const NnBackend *be = nn_backend_cpu();
	float		p = 1.0f,
				m = 0.0f,
				v = 0.0f,
				g = 0.5f;

	/*
	 * step 1: m = 0.05, v = 0.00025; m / (1 - 0.9) = 0.5, sqrt(v / (1 - 0.999))
	 * = 0.5, so p = 1 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.9 (to 1e-8).
	 */
	be->adam_update(&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 1);
	CHECK_NEAR(m, 0.05, 1e-7);
	CHECK_NEAR(v, 0.00025, 1e-8);
	CHECK_NEAR(p, 0.9, 1e-6);
	/*
	 * step 2, g = 0.25: m = 0.045 + 0.025 = 0.07, v = 0.00024975 + 0.0000625 =
	 * 0.00031225; mhat = 0.07 / 0.19 = 0.368421, vhat = 0.00031225 / 0.001999 =
	 * 0.156203, sqrt = 0.395225; p = 0.9 - 0.1 * 0.368421 / 0.395225 = 0.806782.
	 */
	g = 0.25f;
	be->adam_update(&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 2);
	CHECK_NEAR(p, 0.806782, 2e-6);
}

UNIT_TEST(optim_adam_l2_and_adamw)
{
	const NnBackend *be = nn_backend_cpu();
	float		p = 1.0f,
				m = 0.0f,
				v = 0.0f,
				g = 0.5f;

	/* adam, weight decay 0.1 as L2: d = 0.6, m = 0.06, v = 0.00036: p = 1 - 0.1 = 0.9 */
	be->adam_update(&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, false, 1);
	CHECK_NEAR(m, 0.06, 1e-7);
	CHECK_NEAR(p, 0.9, 1e-6);

	/* adamw, weight decay 0.1: p = 1 * (1 - 0.01) = 0.99, then - 0.1 = 0.89 */
	p = 1.0f, m = 0.0f, v = 0.0f;
	be->adam_update(&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, true, 1);
	CHECK_NEAR(m, 0.05, 1e-7);
	CHECK_NEAR(p, 0.89, 1e-6);
}

UNIT_TEST(optim_model_step_uses_optimizer)
{
	NnSpec		s;
	NnError		err;
	NnOptim		o;
	NnModel    *m;
	float		x[3] = {1.0f, 2.0f, -1.0f};
	float		y[1] = {0.0f};
	float		before[4];
	NnBatchStats st = {0};

	/* one dense unit with an mse loss: d loss / d w = 2 (w.x + b - y) x */
	spec_begin(&s, 1, 3, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 1);
	m = nn_model_create(&s, 1, &err);
	CHECK(m != NULL);
	CHECK(!nn_model_train_step(m, x, y, 1, &st, &err));	/* no optimizer yet */
	CHECK(strstr(err.msg, "no optimizer") != NULL);
	nn_optim_defaults(&o, NN_OPT_SGD);
	o.lr = 0.5f;
	CHECK(nn_model_set_optim(m, &o, &err));
	memcpy(before, m->params, sizeof(before));
	CHECK(nn_model_train_step(m, x, y, 1, &st, &err));
	{
		float		z = before[0] * x[0] + before[1] * x[1] + before[2] * x[2] + before[3];

		for (int j = 0; j < 3; j++)
			CHECK_NEAR(m->params[j], before[j] - 0.5f * 2.0f * z * x[j], 1e-5);
		CHECK_NEAR(m->params[3], before[3] - 0.5f * 2.0f * z, 1e-5);
		CHECK_NEAR(st.loss_sum, (double) z * z, 1e-5);
	}
	CHECK(m->step == 1);

	/* invalid settings are refused, naming the field */
	o.lr = -1.0f;
	CHECK(!nn_model_set_optim(m, &o, &err));
	CHECK(strcmp(err.field, "lr") == 0);
	nn_optim_defaults(&o, NN_OPT_SGD);
	o.nesterov = true;
	CHECK(!nn_model_set_optim(m, &o, &err));
	CHECK(strcmp(err.field, "nesterov") == 0);
	nn_optim_defaults(&o, NN_OPT_ADAM);
	o.beta2 = 1.0f;
	CHECK(!nn_model_set_optim(m, &o, &err));
	CHECK(strcmp(err.field, "beta2") == 0);
	nn_model_free(m);
}

UNIT_TEST(optim_rmsprop)
{
	const NnBackend *be = nn_backend_cpu();
	float		p = 1.0f,
				sq = 0.0f,
				g = 0.5f;

	/* step 1, alpha 0.9: sq = 0.1 * 0.25 = 0.025, p = 1 - 0.1 * 0.5 / sqrt(0.025) = 0.683772 */
	be->rmsprop_update(&p, &g, &sq, NULL, NULL, 1, 0.1f, 0.9f, 1e-8f, 0.0f, 0.0f);
	CHECK_NEAR(sq, 0.025, 1e-8);
	CHECK_NEAR(p, 0.683772, 1e-6);
	/* step 2, g = 0.25: sq = 0.0225 + 0.00625 = 0.02875, p = 0.683772 - 0.025 / 0.169558 = 0.536330 */
	g = 0.25f;
	be->rmsprop_update(&p, &g, &sq, NULL, NULL, 1, 0.1f, 0.9f, 1e-8f, 0.0f, 0.0f);
	CHECK_NEAR(sq, 0.02875, 1e-8);
	CHECK_NEAR(p, 0.536330, 1e-6);
}

UNIT_TEST(optim_rmsprop_centered_momentum_decay)
{
	const NnBackend *be = nn_backend_cpu();
	float		p = 1.0f,
				sq = 0.0f,
				buf = 0.0f,
				ga = 0.0f,
				g = 0.4f;

	/*
	 * weight decay 0.1: d = 0.4 + 0.1 = 0.5; sq = 0.025, grad_avg = 0.05,
	 * centered: sqrt(0.025 - 0.0025) = 0.15; buf = 0.5 / 0.15 = 3.333333,
	 * p = 1 - 0.1 * 3.333333 = 0.666667
	 */
	be->rmsprop_update(&p, &g, &sq, &buf, &ga, 1, 0.1f, 0.9f, 1e-8f, 0.1f, 0.5f);
	CHECK_NEAR(ga, 0.05, 1e-7);
	CHECK_NEAR(buf, 3.333333, 1e-5);
	CHECK_NEAR(p, 0.666667, 1e-6);
	/*
	 * step 2, g = 0.25 - 0.0666667 (so that d = 0.25): sq = 0.0225 + 0.00625 =
	 * 0.02875, grad_avg = 0.045 + 0.025 = 0.07, sqrt(0.02875 - 0.0049) =
	 * 0.154434; buf = 1.666667 + 1.618810 = 3.285476, p = 0.666667 - 0.328548 = 0.338119
	 */
	g = 0.25f - 0.1f * p;
	be->rmsprop_update(&p, &g, &sq, &buf, &ga, 1, 0.1f, 0.9f, 1e-8f, 0.1f, 0.5f);
	CHECK_NEAR(ga, 0.07, 1e-7);
	CHECK_NEAR(buf, 3.285476, 1e-5);
	CHECK_NEAR(p, 0.338119, 1e-5);
}

UNIT_TEST(optim_adagrad)
{
	const NnBackend *be = nn_backend_cpu();
	float		p = 1.0f,
				sum = 0.1f,
				g = 0.5f;

	/* initial_accumulator_value 0.1: sum = 0.35, p = 1 - 0.1 * 0.5 / sqrt(0.35) = 0.915485 */
	be->adagrad_update(&p, &g, &sum, 1, 0.1f, 0.5f, 1e-10f, 0.0f, 1);
	CHECK_NEAR(sum, 0.35, 1e-7);
	CHECK_NEAR(p, 0.915485, 1e-6);
	/* step 2, lr_decay 0.5: lr = 0.1 / 1.5; sum = 0.4125, p = 0.915485 - 0.0666667 * 0.25 / 0.642262 = 0.889535 */
	g = 0.25f;
	be->adagrad_update(&p, &g, &sum, 1, 0.1f, 0.5f, 1e-10f, 0.0f, 2);
	CHECK_NEAR(sum, 0.4125, 1e-7);
	CHECK_NEAR(p, 0.889535, 1e-6);
}

UNIT_TEST(optim_huber_loss)
{
	const NnBackend *be = nn_backend_cpu();
	float		z[4] = {0.2f, 3.0f, -2.0f, 1.0f};
	float		y[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	float		dz[4];
	double		sums[2];

	/*
	 * delta 1: 0.5 * 0.04 = 0.02; 3 - 0.5 = 2.5; 2 - 0.5 = 1.5; at delta, 0.5
	 * either way; two rows of two: (0.02 + 2.5) / 2 + (1.5 + 0.5) / 2 = 2.26.
	 * Gradients clamp to [-delta, delta], times scale.
	 */
	be->huber_loss(z, y, NULL, dz, 2, 2, 1.0f, 0.5f, sums);
	CHECK_NEAR(sums[0], 2.26, 1e-7);
	CHECK(sums[1] == 0.0);
	CHECK_NEAR(dz[0], 0.1, 1e-7);
	CHECK_NEAR(dz[1], 0.5, 1e-7);
	CHECK_NEAR(dz[2], -0.5, 1e-7);
	CHECK_NEAR(dz[3], 0.5, 1e-7);
	/* delta 4: every error within it, half of mse */
	be->huber_loss(z, y, NULL, dz, 2, 2, 4.0f, 1.0f, sums);
	CHECK_NEAR(sums[0], 0.5 * (0.04 + 9.0) / 2 + 0.5 * (4.0 + 1.0) / 2, 1e-6);
	CHECK_NEAR(dz[1], 3.0, 1e-7);
}

/* Each new optimizer's state: its slices, adagrad's start, kept across a new lr, afresh when its layout changes. */
UNIT_TEST(optim_state_layouts)
{
	NnSpec		s;
	NnError		err;
	NnOptim		o;
	NnModel    *m;
	NnMemory	mem;

	spec_begin(&s, 1, 3, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 2);
	m = nn_model_create(&s, 1, &err);
	nn_optim_defaults(&o, NN_OPT_RMSPROP);
	CHECK(nn_model_set_optim(m, &o, &err));
	CHECK(m->n_opt_state == m->n_params);
	o.momentum = 0.9f;
	o.centered = true;
	CHECK(nn_model_set_optim(m, &o, &err));
	CHECK(m->n_opt_state == 3 * m->n_params);
	CHECK(nn_spec_memory(&s, &o, 0, &mem, &err) && mem.optim == 4 * 3 * m->n_params);
	m->opt_state[0] = 5.0f;
	o.lr = 0.5f;
	CHECK(nn_model_set_optim(m, &o, &err));
	CHECK(m->opt_state[0] == 5.0f);
	/* the same floats, other slices: momentum's buffer is not grad_avg */
	o.momentum = 0.0f;
	o.centered = true;
	CHECK(nn_model_set_optim(m, &o, &err));
	CHECK(m->n_opt_state == 2 * m->n_params && m->opt_state[0] == 0.0f);
	m->opt_state[0] = 5.0f;
	o.momentum = 0.5f;
	o.centered = false;
	CHECK(nn_model_set_optim(m, &o, &err));
	CHECK(m->n_opt_state == 2 * m->n_params && m->opt_state[0] == 0.0f);

	nn_optim_defaults(&o, NN_OPT_ADAGRAD);
	o.initial_accumulator_value = 0.25f;
	CHECK(nn_model_set_optim(m, &o, &err));
	CHECK(m->n_opt_state == m->n_params);
	for (int64_t i = 0; i < m->n_opt_state; i++)
		CHECK(m->opt_state[i] == 0.25f);
	CHECK(nn_spec_memory(&s, &o, 0, &mem, &err) && mem.optim == 4 * m->n_params);
	nn_model_free(m);
}

/* Settings out of range, and those of another optimizer, are refused naming the field. */
UNIT_TEST(optim_new_settings_refused)
{
	struct
	{
		NnOptType	type;
		const char *field;
		float		momentum,
					alpha_or_lr_decay,
					eps;
	}			cases[] = {
		{NN_OPT_RMSPROP, "alpha", 0.0f, -0.1f, 1e-8f},
		{NN_OPT_RMSPROP, "alpha", 0.0f, 1.5f, 1e-8f},
		{NN_OPT_RMSPROP, "alpha", 0.0f, NAN, 1e-8f},
		{NN_OPT_RMSPROP, "eps", 0.0f, 0.99f, 0.0f},
		{NN_OPT_RMSPROP, "eps", 0.0f, 0.99f, INFINITY},
		{NN_OPT_RMSPROP, "momentum", 1.0f, 0.99f, 1e-8f},
		{NN_OPT_RMSPROP, "momentum", -0.5f, 0.99f, 1e-8f},
		{NN_OPT_ADAGRAD, "lr_decay", 0.0f, -1.0f, 1e-10f},
		{NN_OPT_ADAGRAD, "lr_decay", 0.0f, NAN, 1e-10f},
		{NN_OPT_ADAGRAD, "eps", 0.0f, 0.0f, -1e-10f},
		{NN_OPT_ADAGRAD, "momentum", 0.9f, 0.0f, 1e-10f},
	};
	NnOptim		o;
	NnError		err;

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
	{
		nn_optim_defaults(&o, cases[k].type);
		o.momentum = cases[k].momentum;
		if (cases[k].type == NN_OPT_RMSPROP)
			o.alpha = cases[k].alpha_or_lr_decay;
		else
			o.lr_decay = cases[k].alpha_or_lr_decay;
		o.eps = cases[k].eps;
		CHECK_MSG(!nn_optim_validate(&o, &err) && strcmp(err.field, cases[k].field) == 0,
				  "case %zu: field \"%s\", expected \"%s\"", k, err.field, cases[k].field);
	}
	nn_optim_defaults(&o, NN_OPT_ADAGRAD);
	o.initial_accumulator_value = -1.0f;
	CHECK(!nn_optim_validate(&o, &err) && strcmp(err.field, "initial_accumulator_value") == 0);
	nn_optim_defaults(&o, NN_OPT_RMSPROP);
	o.nesterov = true;
	CHECK(!nn_optim_validate(&o, &err) && strcmp(err.field, "nesterov") == 0);
	nn_optim_defaults(&o, NN_OPT_ADAM);
	o.centered = true;
	CHECK(!nn_optim_validate(&o, &err) && strcmp(err.field, "centered") == 0);
	nn_optim_defaults(&o, NN_OPT_RMSPROP);
	o.beta1 = 0.5f;
	CHECK(!nn_optim_validate(&o, &err) && strcmp(err.field, "beta1") == 0);
	/* PyTorch's defaults pass */
	nn_optim_defaults(&o, NN_OPT_RMSPROP);
	CHECK(nn_optim_validate(&o, &err) && o.lr == 0.01f && o.alpha == 0.99f && o.eps == 1e-8f);
	nn_optim_defaults(&o, NN_OPT_ADAGRAD);
	CHECK(nn_optim_validate(&o, &err) && o.lr == 0.01f && o.eps == 1e-10f && o.lr_decay == 0.0f);
}
