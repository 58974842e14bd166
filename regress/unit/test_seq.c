/*
 * test_seq.c -- sequence layers: embedding's and gru's specs, id checks, shapes,
 * serialization, and the same bytes on any thread count.
 */
#include "test_util.h"
#include "unit.h"

static NnLayerSpec *
add_embedding(NnSpec *s, int vocab, int dim)
{
	NnLayerSpec *l = spec_add(s, NN_EMBEDDING);

	l->vocab = vocab;
	l->units = dim;
	return l;
}

static void
expect_invalid(const NnSpec *s, int layer, const char *field, const char *text)
{
	NnError		err;
	NnModel    *m = nn_model_create(s, 1, &err);

	CHECK_MSG(m == NULL, "spec expected to fail on %s was accepted", field);
	nn_model_free(m);
	if (m != NULL)
		return;
	CHECK_MSG(err.layer == layer && strcmp(err.field, field) == 0 && strstr(err.msg, text) != NULL,
			  "error (%d, %s) \"%s\", expected (%d, %s) with \"%s\"", err.layer, err.field, err.msg,
			  layer, field, text);
}

UNIT_TEST(seq_spec_shapes_and_errors)
{
	NnSpec		s;
	NnShape		shape[NN_MAX_LAYERS + 1];
	NnError		err;

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_CROSS_ENTROPY);
	add_embedding(&s, 100, 8);
	spec_add(&s, NN_SOFTMAX);
	spec_add(&s, NN_GLOBAL_AVGPOOL);
	spec_dense(&s, 3);
	CHECK_MSG(nn_spec_validate(&s, shape, &err), "%s", err.msg);
	CHECK(shape[1].ndim == 2 && shape[1].c == 12 && shape[1].h == 1 && shape[1].w == 8);
	CHECK(shape[2].ndim == 2 && NN_SHAPE_SIZE(shape[2]) == 96);
	CHECK(shape[3].ndim == 1 && shape[3].c == 8);

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, 0, 8);
	expect_invalid(&s, 0, "vocab", "embedding: \"vocab\" must be between 1");

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, 10, 0);
	expect_invalid(&s, 0, "dim", "\"dim\" must be between 1");

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	add_embedding(&s, 10, 4);
	expect_invalid(&s, 1, "type", "embedding must be the first layer");

	spec_begin(&s, 3, 1, 4, 4, NN_LOSS_MSE);
	add_embedding(&s, 10, 4);
	expect_invalid(&s, 0, "type", "embedding must be the first layer, on a flat");

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, 10, 4);
	spec_conv(&s, 2, 3, 1, 0);
	expect_invalid(&s, 1, "type", "got a sequence of 12 steps of 4 features");

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, 10, 4);
	spec_add(&s, NN_BATCHNORM);
	expect_invalid(&s, 1, "type", "batchnorm does not take a sequence");

	/* layernorm over each step's features: a weight and a bias per feature */
	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, 10, 4);
	spec_add(&s, NN_LAYERNORM)->eps = 1e-5f;
	{
		NnError		err;
		NnModel    *m = nn_model_create(&s, 1, &err);

		CHECK_MSG(m != NULL, "layernorm over a sequence refused: %s", m ? "" : err.msg);
		if (m)
			CHECK(m->param_len[1] == 2 * 4 && m->shape[2].ndim == 2 && m->shape[2].c == 12);
		nn_model_free(m);
	}

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	spec_add(&s, NN_GRU)->units = 3;
	expect_invalid(&s, 1, "type", "gru needs a sequence");

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, 10, 4);
	spec_add(&s, NN_GRU)->units = 0;
	expect_invalid(&s, 1, "units", "gru: \"units\" must be between 1");

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, 10, 4);
	spec_add(&s, NN_GRU)->units = 3;
	CHECK_MSG(nn_spec_validate(&s, shape, &err), "%s", err.msg);
	CHECK(shape[2].ndim == 1 && shape[2].c == 3);
	s.layers[1].return_sequences = true;
	CHECK_MSG(nn_spec_validate(&s, shape, &err), "%s", err.msg);
	CHECK(shape[2].ndim == 2 && shape[2].c == 12 && shape[2].w == 3);

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, 10, 4);
	spec_add(&s, NN_CONV1D)->filters = 3;
	s.layers[1].kernel = 13;
	expect_invalid(&s, 1, "kernel", "a window of 13 does not fit 12 steps");
	s.layers[1].kernel = 3;
	s.layers[1].padding = 3;
	expect_invalid(&s, 1, "padding", "\"padding\" must be between 0 and 2");
	s.layers[1].padding = 1;
	s.layers[1].stride = 2;
	CHECK_MSG(nn_spec_validate(&s, shape, &err), "%s", err.msg);
	CHECK(shape[2].ndim == 2 && shape[2].c == 6 && shape[2].w == 3);

	spec_begin(&s, 3, 2, 4, 4, NN_LOSS_MSE);
	spec_add(&s, NN_CONV1D)->filters = 3;
	s.layers[0].kernel = 1;
	expect_invalid(&s, 0, "type", "conv1d needs a sequence");

	/* what a gru keeps per example, and conv1d's windows, are bounded like an output */
	spec_begin(&s, 1, 1 << 16, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, 10, 2);
	spec_add(&s, NN_GRU)->units = 200;
	expect_invalid(&s, 1, "units", "keep more than");

	spec_begin(&s, 1, 1 << 16, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, 10, 512);
	spec_add(&s, NN_CONV1D)->filters = 2;
	s.layers[1].kernel = 64;
	expect_invalid(&s, 1, "kernel", "windows of 64 x 512 values exceed");

	/* a table of more than NN_MAX_PARAMS floats is refused before anything is allocated */
	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	add_embedding(&s, NN_MAX_DIM, NN_MAX_DIM);
	expect_invalid(&s, 0, "units", "more than");
}

/* ids that are not whole numbers in [0, vocab) are refused naming layer 0; nothing is read outside the table */
UNIT_TEST(seq_embedding_bad_ids)
{
	static const float bad[] = {-1.0f, 5.0f, 1.5f, NAN, INFINITY, -0.5f, 1e30f};
	NnSpec		s;
	NnError		err;
	NnModel    *m;
	NnOptim		o;
	float		x[8],
				y[2] = {0.0f, 1.0f};
	NnBatchStats st = {0};

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_CROSS_ENTROPY);
	add_embedding(&s, 5, 3);
	spec_add(&s, NN_FLATTEN);
	spec_dense(&s, 2);
	m = nn_model_create(&s, 3, &err);
	CHECK(m != NULL);
	if (m == NULL)
		return;
	nn_optim_defaults(&o, NN_OPT_SGD);
	CHECK(nn_model_set_optim(m, &o, &err));
	for (int j = 0; j < 8; j++)
		x[j] = (float) (j % 5);
	CHECK_MSG(nn_model_train_step(m, x, y, 2, &st, &err), "%s", err.msg);
	for (int b = 0; b < (int) (sizeof(bad) / sizeof(bad[0])); b++)
	{
		x[6] = bad[b];
		CHECK(!nn_model_check_input(m, x, 2, &err));
		CHECK_MSG(err.layer == 0 && strcmp(err.field, "x") == 0 &&
				  strstr(err.msg, "step 2 of example 1") != NULL, "id %g: %s", (double) bad[b], err.msg);
		CHECK(!nn_model_train_step(m, x, y, 2, &st, &err));
		CHECK(!nn_model_evaluate(m, x, y, 2, &st, &err));
		/* the kernel alone: a zero row, not a read past the table */
		{
			const float *z = nn_model_forward(m, x, 2, false);

			CHECK(z != NULL && isfinite(z[2]) && isfinite(z[3]));
			for (int d = 0; d < 3; d++)
				CHECK(m->out[0][6 * 3 + d] == 0.0f);
		}
	}
	nn_model_free(m);
}

static NnModel *
trained(const NnSpec *s, int threads, int steps)
{
	NnError		err;
	NnModel    *m = nn_model_create(s, 11, &err);
	NnOptim		o;
	int			n = 16;
	int64_t		in;
	float	   *x,
			   *y;

	if (m == NULL)
		return NULL;
	in = nn_model_input_size(m);
	nn_optim_defaults(&o, NN_OPT_ADAM);
	o.lr = 0.01f;
	nn_model_set_optim(m, &o, &err);
	if (threads > 1)
		nn_model_set_threads(m, threads, &err);
	x = test_ids(n * in, s->layers[0].vocab, 21);
	y = test_targets(s->loss, n, nn_model_output_size(m), 22);
	for (int k = 0; k < steps; k++)
	{
		NnBatchStats st = {0};

		if (!nn_model_train_step(m, x, y, n, &st, &err))
		{
			unit_fail(__FILE__, __LINE__, "%s", err.msg);
			break;
		}
	}
	free(x);
	free(y);
	return m;
}

UNIT_TEST(seq_embedding_train_serialize_threads)
{
	NnSpec		s;
	NnModel    *a,
			   *b,
			   *c;
	size_t		len;
	uint8_t    *buf;
	NnError		err;

	spec_begin(&s, 1, 10, 1, 1, NN_LOSS_CROSS_ENTROPY);
	add_embedding(&s, 20, 6);
	spec_add(&s, NN_TANH);
	spec_add(&s, NN_GRU)->units = 5;
	s.layers[2].return_sequences = true;
	spec_add(&s, NN_GLOBAL_AVGPOOL);
	spec_dense(&s, 4);
	spec_add(&s, NN_SOFTMAX);
	spec_dense(&s, 3);
	a = trained(&s, 1, 5);
	b = trained(&s, 1, 5);
	c = trained(&s, 4, 5);
	CHECK(a && b && c);
	if (!a || !b || !c)
		return;
	CHECK(memcmp(a->params, b->params, sizeof(float) * a->n_params) == 0);
	/* threads sum their shards' table gradients in shard order: close, and the same on every run */
	for (int64_t j = 0; j < a->n_params; j++)
		CHECK_MSG(fabsf(a->params[j] - c->params[j]) <= 1e-4f * (1.0f + fabsf(a->params[j])),
				  "param %lld: %g vs %g on 4 threads", (long long) j, a->params[j], c->params[j]);

	/* a model cut where a sequence flows: the prefix is fine, the rest (a sequence as its input) is refused */
	{
		NnModel    *cut = nn_model_slice(a, 1, a->spec.n_layers, 1, &err);

		CHECK_MSG(cut == NULL && strstr(err.msg, "cannot cut the model before layer 1") != NULL, "%s",
				  cut ? "sliced" : err.msg);
		nn_model_free(cut);
		cut = nn_model_slice(a, 0, 3, 1, &err);
		CHECK_MSG(cut != NULL, "prefix: %s", err.msg);
		nn_model_free(cut);
		cut = nn_model_slice(a, 4, a->spec.n_layers, 1, &err);	/* after the mean over steps: flat */
		CHECK_MSG(cut != NULL, "rest after the pooling: %s", err.msg);
		nn_model_free(cut);
	}
	len = nn_model_serialized_size(a);
	buf = malloc(len);
	nn_model_serialize(a, buf);
	nn_model_free(b);
	b = nn_model_deserialize(buf, len, &err);
	CHECK_MSG(b != NULL, "%s", err.msg);
	if (b)
	{
		CHECK(b->spec.layers[0].type == NN_EMBEDDING && b->spec.layers[0].vocab == 20 &&
			  b->spec.layers[0].units == 6 && b->spec.layers[0].filters == 0);
		CHECK(b->n_params == a->n_params && memcmp(a->params, b->params, sizeof(float) * a->n_params) == 0);
		CHECK(b->spec.layers[2].type == NN_GRU && b->spec.layers[2].return_sequences &&
			  b->spec.layers[2].units == 5 && b->spec.layers[2].kernel == 0);
	}
	free(buf);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
}

/* dense per_step and embedding positions: shapes, errors, cost, and blobs that keep them */
UNIT_TEST(seq_transformer_keys)
{
	NnSpec		s;
	NnShape		shape[NN_MAX_LAYERS + 1];
	NnCost		per[NN_MAX_LAYERS],
				total;
	NnError		err;
	NnModel    *a,
			   *b;
	uint8_t    *buf,
			   *again;
	size_t		len;

	spec_begin(&s, 1, 9, 1, 1, NN_LOSS_CROSS_ENTROPY);
	add_embedding(&s, 30, 6)->positions = true;
	spec_add(&s, NN_DENSE)->units = 10;
	s.layers[1].per_step = true;
	spec_dense(&s, 4);			/* without per_step, a sequence is flattened as always */
	CHECK_MSG(nn_spec_validate(&s, shape, &err), "%s", err.msg);
	CHECK(shape[1].ndim == 2 && shape[1].c == 9 && shape[1].w == 6);
	CHECK(shape[2].ndim == 2 && shape[2].c == 9 && shape[2].w == 10);
	CHECK(shape[3].ndim == 1 && shape[3].c == 4);
	CHECK_MSG(nn_spec_cost(&s, per, &total, &err), "%s", err.msg);
	CHECK(per[0].params == (30 + 9) * 6);
	CHECK(per[1].params == 6 * 10 + 10);
	CHECK(per[1].flops_forward == 2 * 9 * 6 * 10 + 9 * 10);
	CHECK(per[2].params == 9 * 10 * 4 + 4);

	a = nn_model_create(&s, 3, &err);
	CHECK_MSG(a != NULL, "%s", err.msg);
	if (a == NULL)
		return;
	CHECK(a->param_len[0] == per[0].params && a->param_len[1] == per[1].params && a->n_params == total.params);
	len = nn_model_serialized_size(a);
	buf = malloc(len);
	nn_model_serialize(a, buf);
	b = nn_model_deserialize(buf, len, &err);
	CHECK_MSG(b != NULL, "%s", err.msg);
	if (b)
	{
		CHECK(b->spec.layers[0].positions && b->spec.layers[0].kernel == 0 && b->spec.layers[0].vocab == 30);
		CHECK(b->spec.layers[1].per_step && b->spec.layers[1].kernel == 0);
		CHECK(!b->spec.layers[2].per_step);
		again = malloc(len);
		nn_model_serialize(b, again);
		CHECK(nn_model_serialized_size(b) == len && memcmp(buf, again, len) == 0);
		free(again);
	}
	free(buf);
	nn_model_free(a);
	nn_model_free(b);

	/*
	 * Without the keys, each layer's kernel slot holds 0 as before they existed (the layer's
	 * kernel, 0 for these types): the bytes of older blobs, which read back as flattening
	 * dense layers and embeddings without positions.  The slot: after the 44-byte header
	 * and spec prefix, the 4th of a layer's 11 u32.
	 */
	s.layers[0].positions = false;
	s.layers[1].per_step = false;
	a = nn_model_create(&s, 3, &err);
	CHECK_MSG(a != NULL, "%s", err.msg);
	if (a == NULL)
		return;
	len = nn_model_serialized_size(a);
	buf = malloc(len);
	nn_model_serialize(a, buf);
	for (int i = 0; i < s.n_layers; i++)
		CHECK_MSG(memcmp(buf + 44 + 44 * i + 12, "\0\0\0\0", 4) == 0, "layer %d: kernel slot not 0", i);
	b = nn_model_deserialize(buf, len, &err);
	CHECK(b != NULL && !b->spec.layers[0].positions && !b->spec.layers[1].per_step &&
		  b->shape[2].ndim == 1 && b->shape[2].c == 10);
	free(buf);
	nn_model_free(a);
	nn_model_free(b);

	/* per_step on a flat input is refused: it would be an ordinary dense under another name */
	spec_begin(&s, 1, 9, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_DENSE)->units = 3;
	s.layers[0].per_step = true;
	expect_invalid(&s, 0, "per_step", "needs a sequence");
}

/* flatten with steps: a flat or image input held as a sequence, its shapes, errors and blobs */
UNIT_TEST(seq_flatten_steps)
{
	NnSpec		s;
	NnShape		shape[NN_MAX_LAYERS + 1];
	NnError		err;
	NnModel    *a,
			   *b;
	uint8_t    *buf;
	size_t		len;

	spec_begin(&s, 3, 3, 4, 5, NN_LOSS_MSE);
	spec_add(&s, NN_FLATTEN)->steps = 12;
	spec_add(&s, NN_LAYERNORM)->eps = 1e-5f;
	spec_add(&s, NN_FLATTEN);
	spec_add(&s, NN_SOFTMAX)->log = true;
	CHECK_MSG(nn_spec_validate(&s, shape, &err), "%s", err.msg);
	CHECK(shape[1].ndim == 2 && shape[1].c == 12 && shape[1].h == 1 && shape[1].w == 5);
	CHECK(shape[3].ndim == 1 && shape[3].c == 60);
	a = nn_model_create(&s, 3, &err);
	CHECK_MSG(a != NULL, "%s", err.msg);
	if (a == NULL)
		return;
	CHECK(a->param_len[1] == 2 * 5);	/* a scale and a bias per feature of a step */
	len = nn_model_serialized_size(a);
	buf = malloc(len);
	nn_model_serialize(a, buf);
	/* steps lies in the kernel slot (see seq_transformer_keys) */
	CHECK(memcmp(buf + 44 + 12, "\x0c\0\0\0", 4) == 0);
	b = nn_model_deserialize(buf, len, &err);
	CHECK_MSG(b != NULL, "%s", err.msg);
	CHECK(b != NULL && b->spec.layers[0].steps == 12 && b->spec.layers[0].kernel == 0 &&
		  b->spec.layers[2].steps == 0 && b->shape[1].ndim == 2 && b->shape[1].w == 5 &&
		  b->spec.layers[3].log && b->spec.layers[3].kernel == 0);
	/* the log-softmax of 60 values: exp of the outputs sums to 1 */
	if (b != NULL)
	{
		float		x[60];
		const float *y;
		double		sum = 0.0;

		for (int j = 0; j < 60; j++)
			x[j] = (float) (j % 7) - 3.0f;
		y = nn_model_forward(b, x, 1, false);
		for (int j = 0; y != NULL && j < 60; j++)
			sum += exp(y[j]);
		CHECK_MSG(y != NULL && fabs(sum - 1.0) < 1e-5, "sum of exp(log_softmax) %g", sum);
	}
	free(buf);
	nn_model_free(a);
	nn_model_free(b);

	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_FLATTEN)->steps = 5;
	expect_invalid(&s, 0, "steps", "\"steps\" (5) must divide the input's 12 values");
	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_FLATTEN)->steps = -1;
	expect_invalid(&s, 0, "steps", "must be between 0 and");
}
