/*
 * test_spec.c -- validation names the layer and field at fault; shapes and costs.
 */
#include "test_util.h"
#include "unit.h"

static void
expect_invalid(const NnSpec *s, int layer, const char *field, const char *text)
{
	NnError		err;
	NnModel    *m = nn_model_create(s, 1, &err);

	CHECK_MSG(m == NULL, "spec expected to fail on %s was accepted", field);
	nn_model_free(m);
	if (m != NULL)
		return;
	CHECK_MSG(err.layer == layer, "error names layer %d, expected %d (%s)", err.layer, layer, err.msg);
	CHECK_MSG(strcmp(err.field, field) == 0, "error names field \"%s\", expected \"%s\" (%s)",
			  err.field, field, err.msg);
	CHECK_MSG(strstr(err.msg, text) != NULL, "error \"%s\" lacks \"%s\"", err.msg, text);
}

UNIT_TEST(spec_errors_name_layer_and_field)
{
	NnSpec		s;

	spec_begin(&s, 1, 10, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 0);
	expect_invalid(&s, 0, "units", "layers[0]: dense: \"units\" must be between 1");

	spec_begin(&s, 1, 10, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 5);
	spec_conv(&s, 4, 3, 1, 1);
	expect_invalid(&s, 1, "type", "conv2d needs a [channels, height, width] input");

	spec_begin(&s, 3, 1, 5, 5, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 4, 7, 1, 0);
	expect_invalid(&s, 0, "kernel", "does not fit");

	spec_begin(&s, 3, 1, 5, 5, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 4, 3, 1, 3);
	expect_invalid(&s, 0, "padding", "\"padding\" must be between 0 and 2");

	spec_begin(&s, 3, 1, 5, 5, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 4, 3, 0, 1);
	expect_invalid(&s, 0, "stride", "\"stride\"");

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_DROPOUT)->rate = 1.0f;
	expect_invalid(&s, 0, "rate", "below 1");

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_LEAKY_RELU)->alpha = NAN;
	expect_invalid(&s, 0, "alpha", "alpha");

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_BATCHNORM)->eps = 0.0f;
	expect_invalid(&s, 0, "eps", "positive");

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_LAYERNORM)->eps = NAN;
	expect_invalid(&s, 0, "eps", "layernorm: \"eps\" must be positive");

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_LAYERNORM)->eps = -1e-5f;
	expect_invalid(&s, 0, "eps", "positive");

	spec_begin(&s, 3, 2, 4, 4, NN_LOSS_MSE);
	spec_add(&s, NN_LAYERNORM);
	expect_invalid(&s, 0, "type", "layernorm needs a flat [features] input");

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 1);
	expect_invalid(&s, -1, "loss", "at least 2 outputs");

	spec_begin(&s, 1, 4, 1, 1, 0);
	spec_dense(&s, 3);
	expect_invalid(&s, -1, "loss", "unknown");

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	expect_invalid(&s, -1, "layers", "between 1 and 256");

	spec_begin(&s, 2, 4, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 3);
	expect_invalid(&s, -1, "input", "1 dimension");

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_add(&s, 77);
	expect_invalid(&s, 0, "type", "unknown layer type");
}

UNIT_TEST(spec_rejects_absurd_sizes_before_allocating)
{
	NnSpec		s;

	/* 2^20 x 2^20 weights: the limit on parameters, not malloc, must refuse it */
	spec_begin(&s, 1, NN_MAX_DIM, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, NN_MAX_DIM);
	expect_invalid(&s, 0, "units", "more than");

	spec_begin(&s, 3, 65536, 1024, 1024, NN_LOSS_MSE);
	spec_dense(&s, 2);
	expect_invalid(&s, -1, "input", "exceeds the limit");

	spec_begin(&s, 3, 1, 1024, 1024, NN_LOSS_MSE);
	spec_conv(&s, 65536, 3, 1, 1);
	expect_invalid(&s, 0, "type", "exceeds the limit");
}

UNIT_TEST(spec_shapes_and_cost)
{
	NnSpec		s;
	NnShape		shape[NN_MAX_LAYERS + 1];
	NnCost		per[NN_MAX_LAYERS],
				total;
	NnError		err;

	spec_reference_cnn(&s);
	CHECK(nn_spec_validate(&s, shape, &err));
	CHECK(shape[1].c == 16 && shape[1].h == 28 && shape[1].w == 28);
	CHECK(shape[3].c == 16 && shape[3].h == 14);
	CHECK(shape[6].c == 32 && shape[6].h == 7 && shape[6].w == 7);
	CHECK(shape[7].ndim == 1 && shape[7].c == 32 * 7 * 7);
	CHECK(shape[8].c == 10);
	CHECK(nn_spec_cost(&s, per, &total, &err));
	CHECK(per[0].params == 16 * 9 + 16);
	CHECK(per[3].params == 32 * 16 * 9 + 32);
	CHECK(per[7].params == 1568 * 10 + 10);
	CHECK(total.params == 160 + 4640 + 15690);
	/* conv2: 2 * (16 * 9) * (32 * 14 * 14) multiply-adds, plus bias */
	CHECK(per[3].flops_forward == 2LL * 144 * 32 * 196 + 32 * 196);
	/* training adds the weight gradient and the bias sum, and the input gradient but for layer 0 */
	CHECK(per[0].flops_train == 2 * per[0].flops_forward);
	CHECK(per[3].flops_train == per[3].flops_forward + 2 * (2LL * 144 * 32 * 196) + 32 * 196);
	CHECK(total.flops_train > 2 * total.flops_forward);

	spec_reference_mlp(&s);
	CHECK(nn_spec_cost(&s, NULL, &total, &err));
	CHECK(total.params == 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
	CHECK(nn_spec_output_size(&s) == 10);
}

UNIT_TEST(spec_names_round_trip)
{
	for (int t = 1; t < NN_LAYER_TYPE_MAX; t++)
		CHECK(nn_layer_type_from_name(nn_layer_type_name(t)) == (NnLayerType) t);
	for (int t = 1; t < NN_LOSS_MAX; t++)
		CHECK(nn_loss_from_name(nn_loss_name(t)) == (NnLoss) t);
	for (int t = 1; t < NN_OPT_MAX; t++)
		CHECK(nn_optim_from_name(nn_optim_name(t)) == (NnOptType) t);
	CHECK(nn_layer_type_from_name("conv3d") == 0);
	CHECK(nn_loss_from_name("hinge") == 0);
	CHECK(nn_optim_from_name("lion") == 0);
}

UNIT_TEST(train_loss_falls)
{
	NnSpec		s;
	NnError		err;
	NnOptim		o;
	NnModel    *m;
	int			n = 64;
	float	   *x,
			   *y;
	double		first = 0.0,
				last = 0.0;

	/* a learnable task: the class is the index of the largest of 4 inputs */
	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 16);
	spec_add(&s, NN_RELU);
	spec_dense(&s, 4);
	m = nn_model_create(&s, 2, &err);
	x = test_normal(n * 4, 31, 1.0f);
	y = malloc(sizeof(float) * n);
	for (int i = 0; i < n; i++)
	{
		int			best = 0;

		for (int j = 1; j < 4; j++)
			if (x[i * 4 + j] > x[i * 4 + best])
				best = j;
		y[i] = (float) best;
	}
	nn_optim_defaults(&o, NN_OPT_SGD);
	o.lr = 0.1f;
	o.momentum = 0.9f;
	CHECK(nn_model_set_optim(m, &o, &err));
	for (int epoch = 0; epoch < 200; epoch++)
	{
		NnBatchStats st = {0};

		CHECK(nn_model_train_step(m, x, y, n, &st, &err));
		if (epoch == 0)
			first = st.loss_sum / n;
		last = st.loss_sum / n;
	}
	CHECK_MSG(last < 0.3 * first, "loss went from %g to %g", first, last);
	{
		NnBatchStats st = {0};

		CHECK(nn_model_evaluate(m, x, y, n, &st, &err));
		CHECK_MSG(st.correct >= 0.9 * n, "accuracy %lld of %d", (long long) st.correct, n);
	}
	/* a bad label is an error, not an out-of-bounds index */
	y[3] = 4.0f;
	CHECK(!nn_model_train_step(m, x, y, n, NULL, &err));
	CHECK(strstr(err.msg, "class label 4") != NULL);
	y[3] = 0.5f;
	CHECK(!nn_model_evaluate(m, x, y, n, NULL, &err));
	nn_model_free(m);
	free(x);
	free(y);
}

/* The graph form: inputs refer to earlier layers only; shapes merge; every output is read. */
UNIT_TEST(spec_graph_errors)
{
	NnSpec		s;
	NnShape		shape[NN_MAX_LAYERS + 1];
	NnError		err;

	/* a forward reference (the only way to write a cycle) */
	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	spec_inputs(&s.layers[0], 1, (const int[]) {1});
	spec_dense(&s, 4);
	expect_invalid(&s, 0, "inputs", "layers[0]: dense: input 0 is layer 1, which does not come before it");

	/* itself */
	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	spec_merge(&s, NN_ADD, 2, (const int[]) {0, 1});
	expect_invalid(&s, 1, "inputs", "input 1 is layer 1");

	/* shapes */
	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 3);
	spec_merge(&s, NN_ADD, 2, (const int[]) {0, -1});
	expect_invalid(&s, 1, "inputs", "add: input 1 has shape [4], input 0 has [3]; add needs equal shapes");

	spec_begin(&s, 3, 2, 6, 6, NN_LOSS_MSE);
	spec_conv(&s, 3, 3, 2, 1);
	spec_merge(&s, NN_CONCAT, 2, (const int[]) {0, -1});
	expect_invalid(&s, 1, "inputs", "input 1 has shape [2, 6, 6], input 0 has [3, 3, 3]; concat needs equal heights");

	spec_begin(&s, 3, 2, 4, 4, NN_LOSS_MSE);
	spec_add(&s, NN_FLATTEN);
	spec_merge(&s, NN_CONCAT, 2, (const int[]) {0, -1});
	expect_invalid(&s, 1, "inputs", "concat");

	/* arity */
	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	spec_merge(&s, NN_ADD, 1, (const int[]) {0});
	expect_invalid(&s, 1, "inputs", "add needs \"inputs\" naming 2 or more layers");

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	spec_merge(&s, NN_DENSE, 2, (const int[]) {0, -1})->units = 2;
	expect_invalid(&s, 1, "inputs", "dense takes one input, got 2");

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	spec_add(&s, NN_ADD)->n_inputs = NN_MAX_INPUTS + 1;
	expect_invalid(&s, 1, "inputs", "between 1 and 8");

	/* an output nobody reads, but the last */
	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	spec_inputs(spec_add(&s, NN_DENSE), 1, (const int[]) {-1})->units = 2;
	expect_invalid(&s, 0, "name", "layers[0]: dense: its output is never used");

	/* names are unique */
	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	spec_dense(&s, 4);
	strcpy(s.layers[0].name, "a");
	strcpy(s.layers[1].name, "a");
	expect_invalid(&s, 1, "name", "\"name\" \"a\" is the name of layers[0] too");

	/* a valid graph: shapes and cost */
	spec_begin(&s, 3, 2, 6, 6, NN_LOSS_MSE);
	spec_conv(&s, 3, 3, 1, 1);
	spec_merge(&s, NN_CONCAT, 2, (const int[]) {0, -1});
	spec_conv(&s, 4, 3, 1, 1);				/* reads the concat: 5 channels */
	spec_merge(&s, NN_ADD, 2, (const int[]) {2, 2});
	CHECK(nn_spec_validate(&s, shape, &err));
	CHECK(shape[2].c == 5 && shape[2].h == 6 && shape[2].w == 6);
	CHECK(shape[4].c == 4);
	{
		NnCost		per[NN_MAX_LAYERS],
					total;

		CHECK(nn_spec_cost(&s, per, &total, &err));
		CHECK(per[2].params == 5 * 9 * 4 + 4);
		CHECK(per[1].params == 0 && per[1].act_floats == 5 * 36);
		CHECK(per[3].flops_forward == 4 * 36);
		/* the first convolution reads the input: no input gradient; the one after the concat has one */
		CHECK(per[0].flops_train == per[0].flops_forward + 2 * 18 * 108 + 108);
		CHECK(per[2].flops_train == per[2].flops_forward + 2 * (2 * 45 * 144) + 144);
	}
	CHECK(nn_spec_is_graph(&s));
	spec_reference_cnn(&s);
	CHECK(!nn_spec_is_graph(&s));
}

UNIT_TEST(spec_conv_groups)
{
	NnSpec		s;
	NnCost		per[NN_MAX_LAYERS],
				total;
	NnError		err;

	spec_begin(&s, 3, 6, 5, 5, NN_LOSS_MSE);
	spec_conv(&s, 4, 3, 1, 1);
	s.layers[0].groups = 4;
	expect_invalid(&s, 0, "groups", "conv2d: \"groups\" (4) must divide the input's 6 channels and the 4 filters");

	spec_begin(&s, 3, 6, 5, 5, NN_LOSS_MSE);
	spec_conv(&s, 4, 3, 1, 1);
	s.layers[0].groups = -2;
	expect_invalid(&s, 0, "groups", "\"groups\" must be between 0 and");

	/* depthwise: a 3x3 filter per channel, a ninth of the dense convolution's weights */
	spec_begin(&s, 3, 6, 5, 5, NN_LOSS_MSE);
	spec_conv(&s, 6, 3, 1, 1);
	s.layers[0].groups = 6;
	CHECK(nn_spec_cost(&s, per, &total, &err));
	CHECK(per[0].params == 6 * 9 + 6);
	CHECK(per[0].flops_forward == 2 * 9 * 150 + 150);
}
