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
