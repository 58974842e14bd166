/*
 * test_diverge.c -- divergence: a step whose loss is not finite is not applied,
 * a healthy step is the plain training step to the byte, and weights that are
 * NaN or infinite are found.
 */
#include <math.h>

#include "test_util.h"
#include "unit.h"

static void
mlp_spec(NnSpec *s, NnLoss loss)
{
	spec_begin(s, 1, 6, 1, 1, loss);
	spec_dense(s, 8);
	spec_add(s, NN_BATCHNORM);
	spec_add(s, NN_RELU);
	spec_dense(s, 3);
}

static NnModel *
model_with(const NnSpec *s, NnOptType type, float lr)
{
	NnError		err;
	NnOptim		o;
	NnModel    *m = nn_model_create(s, 11, &err);

	nn_optim_defaults(&o, type);
	o.lr = lr;
	if (type == NN_OPT_SGD)
		o.momentum = 0.9f;
	nn_model_set_optim(m, &o, &err);
	return m;
}

static bool
same_bytes(const NnModel *a, const NnModel *b)
{
	size_t		la = nn_model_serialized_size(a),
				lb = nn_model_serialized_size(b);
	uint8_t    *ba = malloc(la),
			   *bb = malloc(lb);
	bool		same;

	nn_model_serialize(a, ba);
	nn_model_serialize(b, bb);
	same = la == lb && memcmp(ba, bb, la) == 0;
	free(ba);
	free(bb);
	return same;
}

/* Healthy steps: the same model and the same statistics as nn_model_train_step. */
UNIT_TEST(diverge_healthy_steps_are_plain_steps)
{
	NnLoss		losses[] = {NN_LOSS_CROSS_ENTROPY, NN_LOSS_MSE, NN_LOSS_BCE};
	NnOptType	opts[] = {NN_OPT_SGD, NN_OPT_ADAM};

	for (int l = 0; l < 3; l++)
		for (int o = 0; o < 2; o++)
		{
			NnSpec		s;
			NnError		err;
			NnBatchStats sa = {0},
						sb = {0};
			int			n = 5;
			float	   *x,
					   *y;
			NnModel    *a,
					   *b;

			mlp_spec(&s, losses[l]);
			a = model_with(&s, opts[o], 0.05f);
			b = model_with(&s, opts[o], 0.05f);
			x = test_normal(n * 6, 5, 1.0f);
			y = test_targets(losses[l], n, 3, 6);
			for (int i = 0; i < 20; i++)
			{
				bool		finite = false;

				CHECK(nn_model_train_step(a, x, y, n, &sa, &err));
				CHECK(nn_model_train_step_finite(b, x, y, n, &sb, &finite, &err));
				CHECK(finite);
			}
			CHECK_MSG(same_bytes(a, b), "loss %d optimizer %d: the models differ", l, o);
			CHECK(memcmp(&sa, &sb, sizeof(sa)) == 0);
			CHECK(nn_model_params_finite(b));
			nn_model_free(a);
			nn_model_free(b);
			free(x);
			free(y);
		}
}

/* lr 1e30 overflows within a few steps: the step with the NaN loss changes no parameter. */
UNIT_TEST(diverge_step_with_nonfinite_loss_is_not_applied)
{
	NnSpec		s;
	NnError		err;
	NnBatchStats st = {0};
	int			n = 4;
	float	   *x = test_normal(n * 6, 7, 3.0f);
	float	   *y = test_targets(NN_LOSS_CROSS_ENTROPY, n, 3, 8);
	NnModel    *m;
	bool		finite = true;
	int			steps = 0;

	mlp_spec(&s, NN_LOSS_CROSS_ENTROPY);
	m = model_with(&s, NN_OPT_SGD, 1e30f);
	while (finite && steps < 100)
	{
		CHECK(nn_model_train_step_finite(m, x, y, n, &st, &finite, &err));
		steps += finite;
	}
	CHECK_MSG(!finite, "no step of lr 1e30 diverged in %d steps", steps);
	if (!finite)
	{
		NnModel    *before = nn_model_clone(m, &err);
		NnBatchStats again = st;

		CHECK(m->step == steps);
		CHECK(isfinite(st.loss_sum) && st.n == (int64_t) steps * n);
		/* the same batch again: still not finite, and the parameters stay as they were */
		CHECK(nn_model_train_step_finite(m, x, y, n, &again, &finite, &err));
		CHECK(!finite);
		CHECK(memcmp(&again, &st, sizeof(st)) == 0);
		CHECK(m->step == before->step);
		CHECK(memcmp(m->params, before->params, sizeof(float) * m->n_params) == 0);
		CHECK(memcmp(m->opt_state, before->opt_state, sizeof(float) * m->n_opt_state) == 0);
		nn_model_free(before);
	}
	/* an error is still an error: a label out of range */
	y[0] = 7;
	CHECK(!nn_model_train_step_finite(m, x, y, n, &st, &finite, &err));
	nn_model_free(m);
	free(x);
	free(y);
}

UNIT_TEST(diverge_params_finite_finds_nan_and_infinity)
{
	NnSpec		s;
	NnModel    *m;
	float		bad[] = {NAN, INFINITY, -INFINITY};

	mlp_spec(&s, NN_LOSS_CROSS_ENTROPY);
	m = model_with(&s, NN_OPT_ADAM, 0.01f);
	CHECK(nn_model_params_finite(m));
	for (int b = 0; b < 3; b++)
	{
		float		p = m->params[m->n_params - 1],
					r = m->buffers[0];

		m->params[m->n_params - 1] = bad[b];
		CHECK(!nn_model_params_finite(m));
		m->params[m->n_params - 1] = p;
		m->buffers[0] = bad[b];
		CHECK(!nn_model_params_finite(m));
		m->buffers[0] = r;
		CHECK(nn_model_params_finite(m));
	}
	/* the largest finite float is finite */
	m->params[0] = 3.4028235e38f;
	CHECK(nn_model_params_finite(m));
	nn_model_free(m);
}
