/*
 * test_transfer.c -- frozen prefixes: slicing, joining, and outputs that do not
 * depend on who computes them.
 */
#include "test_util.h"
#include "unit.h"

static void
transfer_cnn(NnSpec *s)
{
	spec_begin(s, 3, 2, 8, 8, NN_LOSS_CROSS_ENTROPY);
	spec_conv(s, 4, 3, 1, 1);
	spec_add(s, NN_BATCHNORM);
	spec_add(s, NN_RELU);
	spec_pool(s, NN_MAXPOOL2D, 2);
	spec_add(s, NN_FLATTEN);
	spec_add(s, NN_DROPOUT)->rate = 0.5f;
	spec_dense(s, 6);
	spec_add(s, NN_RELU);
	spec_dense(s, 3);
}

/* A model whose batchnorm statistics are not the initial ones. */
static NnModel *
trained_cnn(void)
{
	NnSpec		s;
	NnError		err;
	NnOptim		o;
	NnModel    *m;
	float	   *x,
			   *y;

	transfer_cnn(&s);
	m = nn_model_create(&s, 3, &err);
	x = test_normal(16 * nn_model_input_size(m), 31, 1.0f);
	y = test_targets(s.loss, 16, 3, 32);
	nn_optim_defaults(&o, NN_OPT_SGD);
	o.momentum = 0.9f;
	nn_model_set_optim(m, &o, &err);
	for (int i = 0; i < 3; i++)
		CHECK(nn_model_train_step(m, x, y, 16, NULL, &err));
	free(x);
	free(y);
	return m;
}

UNIT_TEST(transfer_slices_compose_to_the_whole)
{
	NnError		err;
	NnModel    *m = trained_cnn();
	int			n = 300;		/* more than one frozen chunk */
	float	   *x = test_normal(n * nn_model_input_size(m), 33, 1.0f);
	NnModel    *a = nn_model_slice(m, 0, 4, 0, &err);
	NnModel    *b = nn_model_slice(m, 4, 7, 0, &err);
	NnModel    *ab = nn_model_slice(m, 0, 7, 0, &err);
	float	   *fa,
			   *fb,
			   *fab;

	CHECK(a && b && ab);
	CHECK(nn_model_output_size(a) == nn_model_input_size(b));
	fa = malloc(sizeof(float) * n * nn_model_output_size(a));
	fb = malloc(sizeof(float) * n * nn_model_output_size(b));
	fab = malloc(sizeof(float) * n * nn_model_output_size(ab));
	CHECK(nn_model_forward_frozen(a, x, n, fa, &err));
	CHECK(nn_model_forward_frozen(b, fa, n, fb, &err));
	CHECK(nn_model_forward_frozen(ab, x, n, fab, &err));
	/* staged (0..4 then 4..7) and direct (0..7) give the same bytes */
	CHECK(memcmp(fb, fab, sizeof(float) * n * nn_model_output_size(ab)) == 0);
	/* and the whole model's inference agrees with prefix then rest */
	{
		NnModel    *rest = nn_model_slice(m, 7, 9, 0, &err);
		float	   *z = malloc(sizeof(float) * n * 3);
		float	   *zm = malloc(sizeof(float) * n * 3);

		CHECK(nn_model_forward_frozen(rest, fab, n, z, &err));
		CHECK(nn_model_forward_frozen(m, x, n, zm, &err));
		for (int i = 0; i < n * 3; i++)
			CHECK_NEAR(z[i], zm[i], 1e-5);
		nn_model_free(rest);
		free(z);
		free(zm);
	}
	CHECK(nn_model_slice(m, 3, 3, 0, &err) == NULL);
	CHECK(nn_model_slice(m, 0, 10, 0, &err) == NULL);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(ab);
	nn_model_free(m);
	free(x);
	free(fa);
	free(fb);
	free(fab);
}

UNIT_TEST(transfer_join_keeps_weights_and_optimizer_state)
{
	NnError		err;
	NnModel    *m = trained_cnn();
	NnModel    *prefix = nn_model_slice(m, 0, 5, 0, &err);
	NnModel    *rest = nn_model_slice(m, 5, 9, 9, &err);
	NnModel    *joined;
	NnOptim		o;
	float	   *x = test_normal(8 * nn_model_input_size(rest), 34, 1.0f);
	float	   *y = test_targets(NN_LOSS_CROSS_ENTROPY, 8, 3, 35);

	nn_optim_defaults(&o, NN_OPT_ADAM);
	CHECK(nn_model_set_optim(rest, &o, &err));
	CHECK(nn_model_train_step(rest, x, y, 8, NULL, &err));
	joined = nn_model_join(prefix, rest, &err);
	CHECK(joined != NULL);
	CHECK(joined->spec.n_layers == 9 && joined->n_params == m->n_params);
	CHECK(joined->step == rest->step && joined->optim.type == NN_OPT_ADAM);
	/* the prefix as it was, the rest as trained */
	CHECK(memcmp(joined->params, m->params, sizeof(float) * m->param_off[5]) == 0);
	CHECK(memcmp(joined->buffers, m->buffers, sizeof(float) * m->n_buffers) == 0);
	CHECK(memcmp(joined->params + joined->param_off[5], rest->params, sizeof(float) * rest->n_params) == 0);
	/* adam's m and v: zeros for the frozen parameters, the rest's after them */
	CHECK(joined->n_opt_state == 2 * joined->n_params);
	for (int64_t i = 0; i < joined->param_off[5]; i++)
		CHECK(joined->opt_state[i] == 0.0f && joined->opt_state[joined->n_params + i] == 0.0f);
	CHECK(memcmp(joined->opt_state + joined->param_off[5], rest->opt_state,
				 sizeof(float) * rest->n_params) == 0);
	CHECK(memcmp(joined->opt_state + joined->n_params + joined->param_off[5], rest->opt_state + rest->n_params,
				 sizeof(float) * rest->n_params) == 0);
	/* and cut again, the rest comes back byte for byte (a checkpoint of a joined model resumes exactly) */
	{
		NnModel    *again = nn_model_slice_trained(joined, 5, &err);
		size_t		la = nn_model_serialized_size(rest),
					lb = nn_model_serialized_size(again);
		uint8_t    *a = malloc(la),
				   *b = malloc(lb);

		nn_model_serialize(rest, a);
		nn_model_serialize(again, b);
		CHECK(la == lb && memcmp(a, b, la) == 0);
		free(a);
		free(b);
		nn_model_free(again);
	}
	/* a rest that does not fit the prefix's output is refused */
	{
		NnModel    *wrong = nn_model_slice(m, 7, 9, 0, &err);

		CHECK(nn_model_join(prefix, wrong, &err) == NULL);
		nn_model_free(wrong);
	}
	nn_model_free(joined);
	nn_model_free(prefix);
	nn_model_free(rest);
	nn_model_free(m);
	free(x);
	free(y);
}

UNIT_TEST(transfer_forward_upto_matches_the_slice)
{
	NnError		err;
	NnModel    *m = trained_cnn();
	int			n = 5;
	float	   *x = test_normal(n * nn_model_input_size(m), 36, 1.0f);

	for (int k = 1; k <= m->spec.n_layers; k++)
	{
		NnModel    *prefix = nn_model_slice(m, 0, k, 0, &err);
		int64_t		size = nn_model_output_size(prefix);
		float	   *want = malloc(sizeof(float) * n * size);
		const float *got;

		CHECK(nn_model_forward_frozen(prefix, x, n, want, &err));
		CHECK(nn_model_reserve(m, n, &err));
		got = nn_model_forward_upto(m, x, n, k);
		CHECK(got != NULL && memcmp(got, want, sizeof(float) * n * size) == 0);
		nn_model_free(prefix);
		free(want);
	}
	CHECK(nn_model_forward_upto(m, x, n, 0) == NULL);
	CHECK(nn_model_forward_upto(m, x, n, m->spec.n_layers + 1) == NULL);
	nn_model_free(m);
	free(x);
}

/*
 * A part without parameters (here a trailing relu) of a model with an
 * optimizer: cutting and joining copy no optimizer state, and point into none
 * (found by fuzz_blob under UBSan: pointer arithmetic on a NULL state array).
 */
UNIT_TEST(transfer_parameter_free_part_keeps_no_state)
{
	NnSpec		s;
	NnError		err;
	NnOptim		o;
	NnModel    *m,
			   *rest,
			   *prefix,
			   *joined;
	float	   *x,
			   *y;

	spec_begin(&s, 1, 3, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	spec_add(&s, NN_RELU);
	m = nn_model_create(&s, 5, &err);
	CHECK(m != NULL);
	x = test_normal(8 * nn_model_input_size(m), 41, 1.0f);
	y = test_normal(8 * nn_model_target_size(m), 42, 1.0f);
	nn_optim_defaults(&o, NN_OPT_SGD);
	o.momentum = 0.9f;
	CHECK(nn_model_set_optim(m, &o, &err));
	CHECK(nn_model_train_step(m, x, y, 8, NULL, &err));
	rest = nn_model_slice_trained(m, 1, &err);
	CHECK(rest != NULL && rest->n_params == 0 && rest->optim.type == NN_OPT_SGD);
	prefix = nn_model_slice(m, 0, 1, 0, &err);
	CHECK(prefix != NULL);
	joined = nn_model_join(prefix, rest, &err);
	CHECK(joined != NULL && joined->n_params == m->n_params);
	CHECK(memcmp(joined->params, m->params, sizeof(float) * m->n_params) == 0);
	nn_model_free(joined);
	nn_model_free(prefix);
	nn_model_free(rest);
	nn_model_free(m);
	free(x);
	free(y);
}

/*
 * A graph is cut where one tensor crosses: before the relu of a residual
 * block (layer 0's output, read by the relu and the add), not inside it
 * (before the second dense, when the add still reads layer 0).
 */
UNIT_TEST(transfer_graph_cut_where_one_tensor_crosses)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m;
	NnModel    *prefix,
			   *rest,
			   *joined;
	int			n = 7;
	float	   *x,
			   *f,
			   *z,
			   *zm;

	spec_begin(&s, 1, 5, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 6);
	spec_add(&s, NN_RELU);
	spec_dense(&s, 6);
	spec_merge(&s, NN_ADD, 2, (int[]) {0, 2});
	spec_dense(&s, 3);
	m = nn_model_create(&s, 5, &err);
	CHECK(m != NULL);
	CHECK(nn_model_slice(m, 0, 2, 0, &err) == NULL);
	CHECK(strstr(err.msg, "several tensors crossing") != NULL);
	CHECK(nn_model_slice(m, 2, 5, 0, &err) == NULL);
	prefix = nn_model_slice(m, 0, 1, 0, &err);
	rest = nn_model_slice_trained(m, 1, &err);
	CHECK(prefix && rest);
	/* the rest reads its input (-1) where the whole read layer 0 */
	CHECK(rest->spec.layers[2].n_inputs == 2 && rest->spec.layers[2].inputs[0] == -1 &&
		  rest->spec.layers[2].inputs[1] == 1);
	x = test_normal(n * 5, 41, 1.0f);
	f = malloc(sizeof(float) * n * 6);
	z = malloc(sizeof(float) * n * 3);
	zm = malloc(sizeof(float) * n * 3);
	CHECK(nn_model_forward_frozen(prefix, x, n, f, &err));
	CHECK(nn_model_forward_frozen(rest, f, n, z, &err));
	CHECK(nn_model_forward_frozen(m, x, n, zm, &err));
	for (int i = 0; i < n * 3; i++)
		CHECK_NEAR(z[i], zm[i], 1e-5);
	joined = nn_model_join(prefix, rest, &err);
	CHECK(joined != NULL);
	CHECK(memcmp(&joined->spec, &m->spec, sizeof(NnSpec)) == 0);
	CHECK(joined->n_params == m->n_params &&
		  memcmp(joined->params, m->params, sizeof(float) * m->n_params) == 0);
	nn_model_free(joined);
	nn_model_free(prefix);
	nn_model_free(rest);
	nn_model_free(m);
	free(x);
	free(f);
	free(z);
	free(zm);
}
