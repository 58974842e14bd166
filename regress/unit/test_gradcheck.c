/*
 * test_gradcheck.c -- finite-difference checks of every layer's and every loss's
 * gradients, with respect to parameters and to the input.
 *
 * Central differences in float32: with h = 1e-3 on inputs of unit scale, the
 * truncation error is O(h^2) and the rounding error about 1e-7 * |loss| / h, so
 * a check passes when |numeric - analytic| <= 1e-2 * max(|numeric|, |analytic|)
 * + 2e-3 * (the tensor's largest analytic gradient).  A wrong formula is off by
 * far more than that.  (h = 1e-2 would step across ReLU and max-pool kinks.)
 */
#include "test_util.h"
#include "unit.h"

#define GC_H		1e-3f
#define GC_RTOL		1e-2
#define GC_ATOL		2e-3
#define GC_SAMPLES	60			/* entries checked per tensor */

static double
loss_at(NnModel *m, const float *x, const float *y, int n)
{
	NnBatchStats st = {0};
	NnError		err;

	nn_model_forward(m, x, n, true);
	if (!nn_model_loss(m, y, n, &st, &err))
		return NAN;
	return st.loss_sum / n;
}

static void
check_tensor(const char *what, const char *tensor, NnModel *m, float *values, const float *analytic,
			 int64_t len, const float *x, const float *y, int n)
{
	double		scale = 0.0;
	int64_t		stride = len > GC_SAMPLES ? len / GC_SAMPLES : 1;
	int			bad = 0;

	for (int64_t j = 0; j < len; j++)
		scale = fmax(scale, fabs(analytic[j]));
	CHECK_MSG(scale > 1e-6, "%s: %s gradient is all zero", what, tensor);
	for (int64_t j = 0; j < len; j += stride)
	{
		float		saved = values[j];
		double		up,
					down,
					numeric;

		values[j] = saved + GC_H;
		up = loss_at(m, x, y, n);
		values[j] = saved - GC_H;
		down = loss_at(m, x, y, n);
		values[j] = saved;
		numeric = (up - down) / (2.0 * GC_H);
		if (fabs(numeric - analytic[j]) > GC_RTOL * fmax(fabs(numeric), fabs(analytic[j])) + GC_ATOL * scale)
		{
			if (bad++ < 3)
				unit_fail(__FILE__, __LINE__, "%s: d loss / d %s[%lld]: numeric %.6g, analytic %.6g",
						  what, tensor, (long long) j, numeric, (double) analytic[j]);
		}
	}
}

static void
gradcheck(const char *what, const NnSpec *spec, int n)
{
	NnError		err;
	NnModel    *m = nn_model_create(spec, 42, &err);
	int64_t		in_size;
	float	   *x,
			   *y,
			   *grads,
			   *dinput;

	CHECK_MSG(m != NULL, "%s: %s", what, m ? "" : err.msg);
	if (m == NULL)
		return;
	m->want_dinput = true;
	CHECK(nn_model_reserve(m, n, &err));
	in_size = nn_model_input_size(m);
	x = test_normal(n * in_size, 1234, 1.0f);
	test_ids_for(spec, x, n * in_size, 1234);
	y = test_targets(spec->loss, n, nn_model_output_size(m), 99);
	/* biases start at zero; make them matter */
	for (int64_t j = 0; j < m->n_params; j++)
		m->params[j] += 0.1f * nn_rng_normal(5, 3, j);

	loss_at(m, x, y, n);
	nn_model_backward(m);
	grads = malloc(sizeof(float) * (m->n_params > 0 ? m->n_params : 1));
	dinput = malloc(sizeof(float) * n * in_size);
	memcpy(grads, m->grads, sizeof(float) * m->n_params);
	memcpy(dinput, m->dinput, sizeof(float) * n * in_size);

	for (int i = 0; i < m->spec.n_layers; i++)
		if (m->param_len[i] > 0)
		{
			char		name[64];

			snprintf(name, sizeof(name), "layers[%d].%s", i, nn_layer_type_name(m->spec.layers[i].type));
			check_tensor(what, name, m, m->params + m->param_off[i], grads + m->param_off[i],
						 m->param_len[i], x, y, n);
		}
	if (spec->layers[0].type == NN_EMBEDDING)
	{
		/* ids have no gradient: the embedding leaves zeros */
		for (int64_t j = 0; j < n * in_size; j++)
			CHECK_MSG(dinput[j] == 0.0f, "%s: gradient of id %lld is %g", what, (long long) j, (double) dinput[j]);
	}
	else
		check_tensor(what, "input", m, x, dinput, n * in_size, x, y, n);

	free(grads);
	free(dinput);
	free(x);
	free(y);
	nn_model_free(m);
}

/* [layer under test] + a dense head, so every layer's gradient reaches a loss */
static void
check_layer(const char *what, NnSpec *s, NnLoss loss)
{
	s->loss = loss;
	spec_dense(s, 3);
	gradcheck(what, s, 4);
}

UNIT_TEST(gradcheck_dense)
{
	NnSpec		s;

	spec_begin(&s, 1, 7, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 5);
	check_layer("dense", &s, NN_LOSS_MSE);
}

UNIT_TEST(gradcheck_conv2d)
{
	NnSpec		s;

	spec_begin(&s, 3, 2, 6, 5, NN_LOSS_MSE);
	spec_conv(&s, 3, 3, 1, 1);
	check_layer("conv2d pad 1", &s, NN_LOSS_MSE);

	spec_begin(&s, 3, 2, 7, 6, NN_LOSS_MSE);
	spec_conv(&s, 4, 3, 2, 1);
	check_layer("conv2d stride 2", &s, NN_LOSS_MSE);

	spec_begin(&s, 3, 3, 5, 5, NN_LOSS_MSE);
	spec_conv(&s, 2, 2, 1, 0);
	check_layer("conv2d 2x2 no padding", &s, NN_LOSS_MSE);
}

UNIT_TEST(gradcheck_conv2d_chunked)
{
	NnSpec		s;

	/* enough images that the convolution runs in several chunks */
	spec_begin(&s, 3, 16, 14, 14, NN_LOSS_MSE);
	spec_conv(&s, 4, 3, 1, 1);
	spec_dense(&s, 2);
	gradcheck("conv2d chunked", &s, 24);
}

UNIT_TEST(gradcheck_pools)
{
	NnSpec		s;

	spec_begin(&s, 3, 2, 6, 6, NN_LOSS_MSE);
	spec_pool(&s, NN_MAXPOOL2D, 2);
	check_layer("maxpool2d", &s, NN_LOSS_MSE);

	spec_begin(&s, 3, 2, 7, 7, NN_LOSS_MSE);
	spec_add(&s, NN_MAXPOOL2D)->kernel = 3;
	s.layers[0].stride = 2;
	check_layer("maxpool2d 3/2", &s, NN_LOSS_MSE);

	spec_begin(&s, 3, 2, 6, 6, NN_LOSS_MSE);
	spec_pool(&s, NN_AVGPOOL2D, 2);
	check_layer("avgpool2d", &s, NN_LOSS_MSE);

	spec_begin(&s, 3, 3, 4, 5, NN_LOSS_MSE);
	spec_add(&s, NN_GLOBAL_AVGPOOL);
	check_layer("global_avgpool", &s, NN_LOSS_MSE);

	spec_begin(&s, 3, 2, 3, 3, NN_LOSS_MSE);
	spec_add(&s, NN_FLATTEN);
	check_layer("flatten", &s, NN_LOSS_MSE);
}

UNIT_TEST(gradcheck_activations)
{
	static const NnLayerType types[] = {NN_RELU, NN_LEAKY_RELU, NN_SIGMOID, NN_TANH, NN_GELU};

	for (int t = 0; t < 5; t++)
	{
		NnSpec		s;

		spec_begin(&s, 1, 6, 1, 1, NN_LOSS_MSE);
		spec_dense(&s, 8);
		spec_add(&s, types[t])->alpha = types[t] == NN_LEAKY_RELU ? 0.2f : 0.0f;
		check_layer(nn_layer_type_name(types[t]), &s, NN_LOSS_MSE);
	}
}

UNIT_TEST(gradcheck_dropout)
{
	NnSpec		s;

	spec_begin(&s, 1, 6, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 10);
	spec_add(&s, NN_DROPOUT)->rate = 0.3f;
	check_layer("dropout", &s, NN_LOSS_MSE);
}

UNIT_TEST(gradcheck_batchnorm)
{
	NnSpec		s;

	spec_begin(&s, 3, 3, 4, 4, NN_LOSS_MSE);
	spec_add(&s, NN_BATCHNORM);
	check_layer("batchnorm 2d", &s, NN_LOSS_MSE);

	spec_begin(&s, 1, 5, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 6);
	spec_add(&s, NN_BATCHNORM);
	check_layer("batchnorm 1d", &s, NN_LOSS_MSE);
}

UNIT_TEST(gradcheck_gelu_layernorm)
{
	NnSpec		s;

	/* gelu on the input itself: its backward reads the caller's data */
	spec_begin(&s, 1, 7, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_GELU);
	check_layer("gelu first", &s, NN_LOSS_MSE);

	spec_begin(&s, 1, 6, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_LAYERNORM);
	check_layer("layernorm first", &s, NN_LOSS_MSE);

	spec_begin(&s, 1, 5, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 8);
	spec_add(&s, NN_LAYERNORM);
	spec_add(&s, NN_GELU);
	check_layer("dense layernorm gelu", &s, NN_LOSS_MSE);
}

static void
spec_embedding(NnSpec *s, int steps, int vocab, int dim)
{
	NnLayerSpec *l;

	spec_begin(s, 1, steps, 1, 1, NN_LOSS_MSE);
	l = spec_add(s, NN_EMBEDDING);
	l->vocab = vocab;
	l->units = dim;
}

UNIT_TEST(gradcheck_embedding_softmax_seqpool)
{
	NnSpec		s;

	/* 4 examples of 6 steps over 5 ids: rows are hit more than once (the scatter adds) */
	spec_embedding(&s, 6, 5, 3);
	spec_add(&s, NN_FLATTEN);
	check_layer("embedding flatten", &s, NN_LOSS_MSE);

	/* dense straight on a sequence: its L * D features, flat */
	spec_embedding(&s, 6, 5, 3);
	check_layer("embedding dense", &s, NN_LOSS_CROSS_ENTROPY);

	spec_embedding(&s, 5, 7, 4);
	spec_add(&s, NN_TANH);
	spec_add(&s, NN_SOFTMAX);
	spec_add(&s, NN_GLOBAL_AVGPOOL);
	check_layer("embedding tanh softmax seqpool", &s, NN_LOSS_MSE);

	spec_begin(&s, 1, 6, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_SOFTMAX);
	check_layer("softmax first", &s, NN_LOSS_MSE);

	spec_begin(&s, 1, 5, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 6);
	spec_add(&s, NN_SOFTMAX);
	spec_add(&s, NN_RELU);		/* not in place over softmax's output, which its backward reads */
	check_layer("dense softmax relu", &s, NN_LOSS_BCE);

	/* over an image's last axis (rows of w) */
	spec_begin(&s, 3, 2, 3, 4, NN_LOSS_MSE);
	spec_add(&s, NN_SOFTMAX);
	spec_add(&s, NN_FLATTEN);
	check_layer("softmax image rows", &s, NN_LOSS_MSE);
}

static void
spec_gru(NnSpec *s, int units, bool return_sequences)
{
	NnLayerSpec *l = spec_add(s, NN_GRU);

	l->units = units;
	l->return_sequences = return_sequences;
}

UNIT_TEST(gradcheck_gru)
{
	NnSpec		s;

	/* the last state; 5 steps of backward through time */
	spec_embedding(&s, 5, 6, 3);
	spec_gru(&s, 4, false);
	check_layer("embedding gru", &s, NN_LOSS_MSE);

	/* every state, into a second gru: the first one's input gradient reaches the table */
	spec_embedding(&s, 4, 5, 3);
	spec_gru(&s, 3, true);
	spec_gru(&s, 4, false);
	check_layer("embedding gru(seq) gru", &s, NN_LOSS_CROSS_ENTROPY);

	/* a single step: no product with W_hh, whose gradient is then zero but for the bias */
	spec_embedding(&s, 1, 4, 3);
	spec_gru(&s, 5, true);
	spec_add(&s, NN_FLATTEN);
	check_layer("embedding gru one step", &s, NN_LOSS_MSE);
}

static void
spec_conv1d(NnSpec *s, int filters, int kernel, int stride, int padding)
{
	NnLayerSpec *l = spec_add(s, NN_CONV1D);

	l->filters = filters;
	l->kernel = kernel;
	l->stride = stride;
	l->padding = padding;
}

UNIT_TEST(gradcheck_conv1d)
{
	NnSpec		s;

	/* padding and stride; a second conv1d takes the first one's input gradient to the table */
	spec_embedding(&s, 9, 6, 3);
	spec_conv1d(&s, 4, 3, 1, 1);
	spec_add(&s, NN_TANH);
	spec_conv1d(&s, 3, 2, 2, 1);
	spec_add(&s, NN_FLATTEN);
	check_layer("embedding conv1d conv1d(stride 2)", &s, NN_LOSS_MSE);

	spec_embedding(&s, 8, 5, 4);
	spec_conv1d(&s, 5, 3, 1, 0);
	spec_add(&s, NN_GLOBAL_AVGPOOL);
	check_layer("embedding conv1d seqpool", &s, NN_LOSS_CROSS_ENTROPY);
}

UNIT_TEST(gradcheck_losses)
{
	static const NnLoss losses[] = {NN_LOSS_CROSS_ENTROPY, NN_LOSS_MSE, NN_LOSS_BCE};

	for (int t = 0; t < 3; t++)
	{
		NnSpec		s;

		spec_begin(&s, 1, 5, 1, 1, losses[t]);
		spec_dense(&s, 4);
		gradcheck(nn_loss_name(losses[t]), &s, 6);
	}
}

UNIT_TEST(gradcheck_reference_cnn_small)
{
	NnSpec		s;

	/* the reference CNN's layer sequence on a smaller image */
	spec_begin(&s, 3, 1, 8, 8, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 4, 3, 1, 1);
	spec_add(&s, NN_RELU);
	spec_pool(&s, NN_MAXPOOL2D, 2);
	spec_conv(&s, 6, 3, 1, 1);
	spec_add(&s, NN_RELU);
	spec_pool(&s, NN_MAXPOOL2D, 2);
	spec_add(&s, NN_FLATTEN);
	spec_dense(&s, 5);
	gradcheck("small cnn", &s, 3);
}
