/*
 * test_gradcheck.c -- finite-difference checks of every layer's and every loss's
 * gradients, with respect to parameters and to the input.
 *
 * Central differences in float32: with h = 1e-3 on inputs of unit scale, the
 * truncation error is O(h^2) and the rounding error about 1e-7 * |loss| / h, so
 * a check passes when |numeric - analytic| <= 1e-2 * max(|numeric|, |analytic|)
 * + 2e-3 * (the tensor's largest analytic gradient) + that rounding error.  A wrong formula is off by
 * far more than that.  (h = 1e-2 would step across ReLU and max-pool kinks.)
 */
#include "test_util.h"
#include "unit.h"

#define GC_H		1e-3f
#define GC_RTOL		1e-2
#define GC_ATOL		2e-3
#define GC_ROUNDING	1e-7		/* the float loss's relative rounding */
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
		if (fabs(numeric - analytic[j]) > GC_RTOL * fmax(fabs(numeric), fabs(analytic[j])) + GC_ATOL * scale +
			GC_ROUNDING * fabs(up) / GC_H)
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
	else if (spec->layers[0].type == NN_SLICE)
	{
		/* mixed inputs: features, then ids read through a slice (zero gradient) */
		int64_t		features = in_size;

		for (int i = 0; i < spec->n_layers; i++)
			if (spec->layers[i].type == NN_EMBEDDING)
			{
				int64_t		count,
							from;

				CHECK(nn_input_columns(spec, i, &from, &count));

				features = from < features ? from : features;
				for (int64_t e = 0; e < n; e++)
					for (int64_t j = from; j < from + count; j++)
						CHECK_MSG(dinput[e * in_size + j] == 0.0f, "%s: gradient of id %lld of example %lld is %g",
								  what, (long long) j, (long long) e, (double) dinput[e * in_size + j]);
			}
		for (int64_t e = 0; e < n; e++)
			check_tensor(what, "input features", m, x + e * in_size, dinput + e * in_size, features, x, y, n);
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
}

/*
 * Pools with pads (ONNX's pads and auto_pad SAME_*) and ceil_mode's partial
 * windows: the windows at the edges hold fewer values, and an average divides
 * by them or by the padded window.
 */
UNIT_TEST(gradcheck_padded_pools)
{
	NnSpec		s;

	for (int avg = 0; avg < 2; avg++)
		for (int v = 0; v < 3; v++)
		{
			NnLayerType t = avg ? NN_AVGPOOL2D : NN_MAXPOOL2D;
			NnLayerSpec *l;
			char		what[64];

			spec_begin(&s, 3, 2, 7, 6, NN_LOSS_MSE);
			l = spec_add(&s, t);
			l->kernel = 3;
			l->stride = 2;
			l->padding = v == 2 ? 0 : 1;
			l->pad_end = v == 0 ? 2 : 0;
			l->ceil_mode = v == 2;
			l->count_pad = t == NN_AVGPOOL2D && v == 0;
			snprintf(what, sizeof(what), "%s pads %d,%d%s", t == NN_MAXPOOL2D ? "maxpool2d" : "avgpool2d",
					 l->padding, l->pad_end, l->ceil_mode ? " ceil" : "");
			check_layer(what, &s, NN_LOSS_MSE);
		}

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
	NnLayerSpec *l;

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

	/* a flat input held as a sequence of 3 steps: layernorm and softmax each step, as an import reads them */
	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_FLATTEN)->steps = 3;
	spec_add(&s, NN_LAYERNORM)->eps = 1e-5f;
	spec_add(&s, NN_SOFTMAX);
	spec_add(&s, NN_FLATTEN);
	check_layer("flatten to steps, layernorm softmax per step", &s, NN_LOSS_MSE);

	/* log-softmax: on a flat input, and on each step */
	spec_begin(&s, 1, 5, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 6);
	spec_add(&s, NN_SOFTMAX)->log = true;
	check_layer("dense log_softmax", &s, NN_LOSS_MSE);
	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_FLATTEN)->steps = 4;
	spec_add(&s, NN_SOFTMAX)->log = true;
	check_layer("flatten to steps, log_softmax per step", &s, NN_LOSS_CROSS_ENTROPY);

	/* over_steps: over each feature's column of a sequence of 4 steps of 3, plain and log */
	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 12);
	spec_add(&s, NN_FLATTEN)->steps = 4;
	spec_add(&s, NN_SOFTMAX)->over_steps = true;
	spec_add(&s, NN_FLATTEN);
	check_layer("flatten to steps, softmax over the steps", &s, NN_LOSS_MSE);
	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_FLATTEN)->steps = 4;
	l = spec_add(&s, NN_SOFTMAX);
	l->log = true;
	l->over_steps = true;
	check_layer("flatten to steps, log_softmax over the steps", &s, NN_LOSS_CROSS_ENTROPY);
}

UNIT_TEST(gradcheck_attention)
{
	NnSpec		s;
	NnLayerSpec *l;

	spec_embedding(&s, 5, 7, 6);
	spec_add(&s, NN_ATTENTION)->heads = 2;
	check_layer("attention", &s, NN_LOSS_MSE);

	spec_embedding(&s, 5, 7, 6);
	l = spec_add(&s, NN_ATTENTION);
	l->heads = 3;
	l->causal = true;
	spec_add(&s, NN_TANH);
	spec_add(&s, NN_ATTENTION)->heads = 1;
	spec_add(&s, NN_GLOBAL_AVGPOOL);
	check_layer("causal attention, twice", &s, NN_LOSS_CROSS_ENTROPY);

	/* an encoder block: layernorm over each step of the embeddings plus their attention */
	spec_embedding(&s, 5, 7, 6);
	spec_add(&s, NN_ATTENTION)->heads = 2;
	spec_merge(&s, NN_ADD, 2, (const int[]) {0, 1});
	spec_add(&s, NN_LAYERNORM)->eps = 1e-5f;
	spec_add(&s, NN_TANH);
	check_layer("attention, add, layernorm over steps", &s, NN_LOSS_MSE);
}

UNIT_TEST(gradcheck_transformer)
{
	NnSpec		s;
	NnLayerSpec *l;

	/* positions: each step's row of the table gets the sum over the batch */
	spec_embedding(&s, 5, 4, 3);
	s.layers[0].positions = true;
	spec_add(&s, NN_TANH);
	check_layer("embedding with positions", &s, NN_LOSS_MSE);

	/* the feed-forward half, per step; its output a sequence the loss reads flat */
	spec_embedding(&s, 4, 6, 5);
	l = spec_add(&s, NN_DENSE);
	l->units = 7;
	l->per_step = true;
	spec_add(&s, NN_GELU);
	l = spec_add(&s, NN_DENSE);
	l->units = 3;
	l->per_step = true;
	l->init = NN_INIT_GLOROT;
	check_layer("dense per step, twice", &s, NN_LOSS_MSE);

	/* a whole encoder block, post-norm, then the mean over steps and a head */
	spec_embedding(&s, 5, 7, 6);
	s.layers[0].positions = true;
	spec_add(&s, NN_ATTENTION)->heads = 2;
	spec_merge(&s, NN_ADD, 2, (const int[]) {0, 1});
	spec_add(&s, NN_LAYERNORM)->eps = 1e-5f;
	l = spec_add(&s, NN_DENSE);
	l->units = 8;
	l->per_step = true;
	spec_add(&s, NN_GELU);
	l = spec_add(&s, NN_DENSE);
	l->units = 6;
	l->per_step = true;
	spec_merge(&s, NN_ADD, 2, (const int[]) {3, 6});
	spec_add(&s, NN_LAYERNORM)->eps = 1e-5f;
	spec_add(&s, NN_GLOBAL_AVGPOOL);
	check_layer("transformer encoder block", &s, NN_LOSS_CROSS_ENTROPY);
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

/* The graph form: add and concat, and outputs read twice (gradients that add up). */
UNIT_TEST(gradcheck_add)
{
	NnSpec		s;

	/* two dense branches from the input, summed: the input's gradient adds up too */
	spec_begin(&s, 1, 6, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 5);
	spec_inputs(spec_add(&s, NN_DENSE), 1, (const int[]) {-1})->units = 5;
	spec_merge(&s, NN_ADD, 2, (const int[]) {0, 1});
	check_layer("add of two branches", &s, NN_LOSS_MSE);

	/* a skip over a layer from the input, and three inputs, one twice */
	spec_begin(&s, 1, 5, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 5);
	spec_add(&s, NN_TANH);
	spec_merge(&s, NN_ADD, 3, (const int[]) {1, -1, 1});
	check_layer("add of three, one twice", &s, NN_LOSS_MSE);
}

UNIT_TEST(gradcheck_concat)
{
	NnSpec		s;

	spec_begin(&s, 1, 6, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 4);
	spec_inputs(spec_add(&s, NN_DENSE), 1, (const int[]) {-1})->units = 3;
	spec_merge(&s, NN_CONCAT, 3, (const int[]) {0, 1, -1});
	check_layer("concat flat", &s, NN_LOSS_MSE);

	/* along channels: [2, 5, 5] + [3, 5, 5] + the input [2, 5, 5] */
	spec_begin(&s, 3, 2, 5, 5, NN_LOSS_MSE);
	spec_conv(&s, 2, 3, 1, 1);
	spec_inputs(spec_add(&s, NN_CONV2D), 1, (const int[]) {-1});
	s.layers[1].filters = 3;
	s.layers[1].kernel = 3;
	s.layers[1].stride = 1;
	s.layers[1].padding = 1;
	spec_merge(&s, NN_CONCAT, 3, (const int[]) {0, 1, -1});
	spec_add(&s, NN_TANH);
	check_layer("concat channels", &s, NN_LOSS_MSE);
}

/*
 * Mixed inputs through slices: 4 features and 3 ids, the ids embedded, then
 * joined to the features (a tabular model over numeric and categorical columns).
 */
UNIT_TEST(gradcheck_slice)
{
	NnSpec		s;
	NnLayerSpec *l;

	spec_begin(&s, 1, 7, 1, 1, NN_LOSS_MSE);
	l = spec_inputs(spec_add(&s, NN_SLICE), 1, (const int[]) {-1});
	l->start = 0;
	l->units = 4;
	l = spec_inputs(spec_add(&s, NN_SLICE), 1, (const int[]) {-1});
	l->start = 4;
	l->units = 3;
	l = spec_add(&s, NN_EMBEDDING);		/* 2: over the ids */
	l->vocab = 5;
	l->units = 2;
	spec_add(&s, NN_FLATTEN);				/* 3 */
	spec_merge(&s, NN_CONCAT, 2, (const int[]) {0, 3});
	spec_dense(&s, 4);
	spec_add(&s, NN_TANH);
	check_layer("features and embedded ids", &s, NN_LOSS_MSE);

	/* a slice in a chain: the middle features of a dense layer's output */
	spec_begin(&s, 1, 5, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 6);
	l = spec_add(&s, NN_SLICE);
	l->start = 2;
	l->units = 3;
	check_layer("slice of a dense layer", &s, NN_LOSS_MSE);

	/* a slice of each step of a sequence (ONNX's Slice along the last axis): [4, 3] to [4, 2] */
	spec_begin(&s, 1, 12, 1, 1, NN_LOSS_MSE);
	spec_add(&s, NN_FLATTEN)->steps = 4;
	l = spec_add(&s, NN_SLICE);
	l->start = 1;
	l->units = 2;
	spec_add(&s, NN_TANH);
	spec_add(&s, NN_FLATTEN);
	check_layer("slice of each step of a sequence", &s, NN_LOSS_MSE);
}

UNIT_TEST(gradcheck_residual_block)
{
	NnSpec		s;

	/* small: a residual block has thousands of relu kinks a step of h may cross */
	spec_residual_cnn(&s, 1, 4, 2, 3);
	gradcheck("residual block", &s, 2);

	/*
	 * Enough images that the convolutions run in chunks and the add's tanh
	 * starts a run of them (an in-place layer that starts a run once lost the
	 * gradients of all chunks but the last); smooth, so no kinks.
	 */
	spec_begin(&s, 3, 2, 12, 12, NN_LOSS_MSE);
	spec_conv(&s, 3, 3, 1, 1);
	spec_add(&s, NN_TANH);					/* 1: read by 2 and 5 */
	spec_conv(&s, 3, 3, 1, 1);
	spec_add(&s, NN_TANH);
	spec_conv(&s, 3, 3, 1, 1);				/* 4 */
	spec_merge(&s, NN_ADD, 2, (const int[]) {4, 1});
	spec_add(&s, NN_TANH);
	spec_conv(&s, 3, 3, 1, 1);
	spec_pool(&s, NN_AVGPOOL2D, 2);
	spec_dense(&s, 2);
	gradcheck("residual chunked", &s, 24);
}

UNIT_TEST(gradcheck_conv2d_groups)
{
	NnSpec		s;

	/* depthwise: one filter per channel */
	spec_begin(&s, 3, 3, 6, 5, NN_LOSS_MSE);
	spec_conv(&s, 3, 3, 1, 1);
	s.layers[0].groups = 3;
	check_layer("conv2d depthwise", &s, NN_LOSS_MSE);

	/* 2 groups of 2 channels, 3 filters each, stride 2; after another layer (an input gradient) */
	spec_begin(&s, 3, 4, 7, 7, NN_LOSS_MSE);
	spec_add(&s, NN_TANH);
	spec_conv(&s, 6, 3, 2, 1);
	s.layers[1].groups = 2;
	check_layer("conv2d 2 groups", &s, NN_LOSS_MSE);

	/* depthwise with a channel multiplier (2 filters per channel), several images */
	spec_begin(&s, 3, 2, 8, 8, NN_LOSS_MSE);
	spec_conv(&s, 4, 3, 1, 0);
	s.layers[0].groups = 2;
	spec_dense(&s, 2);
	gradcheck("conv2d depthwise x2", &s, 6);
}
