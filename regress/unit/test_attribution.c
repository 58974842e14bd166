/*
 * test_attribution.c -- explanations (src/nn/attribution.c): the input
 * gradient of an output or a probability against central differences of the
 * inference-mode network (dropout and batch normalization as in inference),
 * the model left as it was, and integrated gradients' completeness (tight:
 * the quadrature is Gauss-Legendre), including paths in an embedding's space.
 */
#include "test_util.h"
#include "unit.h"

#define AT_H		1e-3f
#define AT_RTOL		1e-2
#define AT_ATOL		2e-3

/* f of one example as pgdl.predict's forward pass gives it */
static double
f_at(NnModel *m, const float *x, int32_t output, NnExplainTarget target)
{
	const float *z = nn_model_forward(m, x, 1, false);
	int64_t		k = nn_model_output_size(m);
	double		sum = 0.0;

	if (target == NN_EXPLAIN_OUTPUT)
		return z[output];
	if (m->spec.loss == NN_LOSS_BCE)
		return 1.0 / (1.0 + exp(-(double) z[output]));
	for (int64_t j = 0; j < k; j++)
		sum += exp((double) z[j]);
	return exp((double) z[output]) / sum;
}

/* biases and running statistics that matter, so that inference and training differ */
static void
perturb(NnModel *m)
{
	for (int64_t j = 0; j < m->n_params; j++)
		m->params[j] += 0.1f * nn_rng_normal(5, 3, j);
	for (int i = 0; i < m->spec.n_layers; i++)
		if (m->spec.layers[i].type == NN_BATCHNORM)
		{
			float	   *b = m->buffers + m->buffer_off[i];
			int64_t		c = m->buffer_len[i] / 2;

			for (int64_t j = 0; j < c; j++)
			{
				b[j] = 0.3f * nn_rng_normal(6, 1, j);
				b[c + j] = 0.5f + nn_rng_uniform(6, 2, j);
			}
		}
}

/* n examples' gradients against central differences of f, columns that are not ids */
static void
check_gradient(const char *what, const NnSpec *spec, int n, int32_t output, NnExplainTarget target)
{
	NnError		err;
	NnModel    *m = nn_model_create(spec, 42, &err);
	int64_t		in;
	float	   *x,
			   *grad,
			   *f,
			   *before;
	int			bad = 0;

	CHECK_MSG(m != NULL, "%s: %s", what, m ? "" : err.msg);
	if (m == NULL)
		return;
	perturb(m);
	in = nn_model_input_size(m);
	x = test_normal(n * in, 77, 1.0f);
	test_ids_for(spec, x, n * in, 77);
	grad = malloc(sizeof(float) * n * in);
	f = malloc(sizeof(float) * n);
	before = malloc(sizeof(float) * (m->n_params + m->n_buffers + 1));
	memcpy(before, m->params, sizeof(float) * m->n_params);
	memcpy(before + m->n_params, m->buffers, sizeof(float) * m->n_buffers);

	CHECK_MSG(nn_model_input_gradient(m, x, n, output, target, f, grad, &err), "%s: %s", what, err.msg);
	CHECK_MSG(memcmp(before, m->params, sizeof(float) * m->n_params) == 0, "%s: parameters changed", what);
	CHECK_MSG(memcmp(before + m->n_params, m->buffers, sizeof(float) * m->n_buffers) == 0,
			  "%s: running statistics changed", what);
	CHECK_MSG(!m->infer_grad, "%s: infer_grad left set", what);
	for (int e = 0; e < n; e++)
	{
		float	   *xe = x + e * in;
		double		scale = 0.0;

		CHECK_NEAR(f[e], f_at(m, xe, output, target), 1e-5);
		for (int64_t j = 0; j < in; j++)
			scale = fmax(scale, fabs(grad[e * in + j]));
		CHECK_MSG(scale > 1e-6, "%s: the gradient of example %d is all zero", what, e);
		for (int64_t j = 0; j < in; j++)
		{
			float		saved = xe[j];
			double		up,
						down,
						numeric,
						analytic = grad[e * in + j];

			xe[j] = saved + AT_H;
			up = f_at(m, xe, output, target);
			xe[j] = saved - AT_H;
			down = f_at(m, xe, output, target);
			xe[j] = saved;
			numeric = (up - down) / (2.0 * AT_H);
			if (fabs(numeric - analytic) > AT_RTOL * fmax(fabs(numeric), fabs(analytic)) + AT_ATOL * scale + 1e-7 * fabs(up) / AT_H && bad++ < 3)
				unit_fail(__FILE__, __LINE__, "%s: df/dx[%d][%lld]: numeric %.6g, analytic %.6g",
						  what, e, (long long) j, numeric, analytic);
		}
	}
	free(x);
	free(grad);
	free(f);
	free(before);
	nn_model_free(m);
}

UNIT_TEST(attribution_gradient_mlp)
{
	NnSpec		s;

	/* dropout and batchnorm: inference's forward (identity, running statistics) is what is differentiated */
	spec_begin(&s, 1, 6, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 8);
	spec_add(&s, NN_BATCHNORM);
	spec_add(&s, NN_TANH);
	spec_add(&s, NN_DROPOUT)->rate = 0.5f;
	spec_dense(&s, 3);
	check_gradient("mlp, probability of class 2", &s, 5, 2, NN_EXPLAIN_PROBABILITY);
	check_gradient("mlp, logit 0", &s, 3, 0, NN_EXPLAIN_OUTPUT);

	s.loss = NN_LOSS_BCE;
	s.layers[4].units = 1;
	check_gradient("mlp, sigmoid", &s, 4, 0, NN_EXPLAIN_PROBABILITY);

	s.loss = NN_LOSS_MSE;
	s.layers[4].units = 2;
	check_gradient("mlp, regression output 1", &s, 4, 1, NN_EXPLAIN_OUTPUT);
}

UNIT_TEST(attribution_gradient_cnn)
{
	NnSpec		s;

	spec_begin(&s, 3, 2, 6, 6, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 3, 3, 1, 1);
	spec_add(&s, NN_BATCHNORM);
	spec_add(&s, NN_TANH);
	spec_pool(&s, NN_AVGPOOL2D, 2);
	spec_add(&s, NN_FLATTEN);
	spec_dense(&s, 4);
	check_gradient("cnn", &s, 3, 1, NN_EXPLAIN_PROBABILITY);
}

UNIT_TEST(attribution_gradient_mixed)
{
	NnSpec		s;
	NnLayerSpec *l;

	/* 4 features and 3 ids: the ids get no gradient, the features theirs */
	spec_begin(&s, 1, 7, 1, 1, NN_LOSS_CROSS_ENTROPY);
	l = spec_inputs(spec_add(&s, NN_SLICE), 1, (const int[]) {-1});
	l->start = 0;
	l->units = 4;
	l = spec_inputs(spec_add(&s, NN_SLICE), 1, (const int[]) {-1});
	l->start = 4;
	l->units = 3;
	l = spec_add(&s, NN_EMBEDDING);
	l->vocab = 5;
	l->units = 2;
	spec_add(&s, NN_FLATTEN);
	spec_merge(&s, NN_CONCAT, 2, (const int[]) {0, 3});
	spec_dense(&s, 4);
	spec_add(&s, NN_TANH);
	spec_dense(&s, 3);
	{
		NnError		err;
		NnModel    *m = nn_model_create(&s, 1, &err);
		float	   *x = test_normal(7, 3, 1.0f);
		float		grad[7];

		test_ids_for(&s, x, 7, 3);
		CHECK(nn_model_input_gradient(m, x, 1, 0, NN_EXPLAIN_PROBABILITY, NULL, grad, &err));
		for (int j = 4; j < 7; j++)
			CHECK(grad[j] == 0.0f);
		CHECK(grad[0] != 0.0f);
		free(x);
		nn_model_free(m);
	}
}

/* integrated gradients of one example: completeness, and f at both ends as the forward pass gives it */
static void
check_completeness(const char *what, const NnSpec *spec, int32_t output, NnExplainTarget target, int steps,
				   double rtol)
{
	NnError		err;
	NnModel    *m = nn_model_create(spec, 7, &err);
	int64_t		in;
	float	   *x,
			   *b,
			   *attr;
	double		fx,
				fb,
				sum = 0.0;

	CHECK_MSG(m != NULL, "%s: %s", what, m ? "" : err.msg);
	if (m == NULL)
		return;
	perturb(m);
	in = nn_model_input_size(m);
	x = test_normal(in, 21, 1.0f);
	b = test_normal(in, 22, 0.3f);
	test_ids_for(spec, x, in, 21);
	test_ids_for(spec, b, in, 22);
	attr = malloc(sizeof(float) * in);
	CHECK_MSG(nn_model_integrated_gradients(m, x, b, steps, output, target, attr, &fx, &fb, &err),
			  "%s: %s", what, err.msg);
	CHECK_NEAR(fx, f_at(m, x, output, target), 1e-5);
	CHECK_NEAR(fb, f_at(m, b, output, target), 1e-5);
	for (int64_t j = 0; j < in; j++)
		sum += attr[j];
	CHECK_MSG(fabs(fx - fb) > 1e-3, "%s: f(x) and f(b) are too close to test completeness", what);
	CHECK_MSG(fabs(sum - (fx - fb)) <= rtol * fabs(fx - fb) + 1e-5,
			  "%s: attributions sum to %.7g, f(x) - f(b) = %.7g", what, sum, fx - fb);
	free(x);
	free(b);
	free(attr);
	nn_model_free(m);
}

UNIT_TEST(attribution_integrated_gradients)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m;
	float		x[3] = {1.0f, -2.0f, 0.5f},
				b[3] = {0.0f, 1.0f, 0.5f},
				attr[3];
	double		fx,
				fb;

	/* linear: attributions are exactly (x - b) * w, with one step */
	spec_begin(&s, 1, 3, 1, 1, NN_LOSS_MSE);
	spec_dense(&s, 1);
	m = nn_model_create(&s, 3, &err);
	CHECK(nn_model_integrated_gradients(m, x, b, 1, 0, NN_EXPLAIN_OUTPUT, attr, &fx, &fb, &err));
	for (int j = 0; j < 3; j++)
		CHECK_NEAR(attr[j], (x[j] - b[j]) * m->params[j], 1e-6);
	CHECK(attr[2] == 0.0f);
	/* the arguments' limits */
	CHECK(!nn_model_integrated_gradients(m, x, b, 0, 0, NN_EXPLAIN_OUTPUT, attr, &fx, &fb, &err));
	CHECK(strstr(err.msg, "steps") != NULL);
	CHECK(!nn_model_integrated_gradients(m, x, b, NN_MAX_EXPLAIN_STEPS + 1, 0, NN_EXPLAIN_OUTPUT, attr, &fx, &fb, &err));
	CHECK(!nn_model_integrated_gradients(m, x, b, 8, 1, NN_EXPLAIN_OUTPUT, attr, &fx, &fb, &err));
	CHECK(strstr(err.msg, "output 1") != NULL);
	CHECK(!nn_model_integrated_gradients(m, x, b, 8, 0, NN_EXPLAIN_PROBABILITY, attr, &fx, &fb, &err));
	CHECK(strstr(err.msg, "mse") != NULL);
	nn_model_free(m);

	spec_begin(&s, 1, 6, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 8);
	spec_add(&s, NN_BATCHNORM);
	spec_add(&s, NN_TANH);
	spec_add(&s, NN_DROPOUT)->rate = 0.3f;
	spec_dense(&s, 3);
	check_completeness("mlp, 100 steps (more than a chunk: 2 passes)", &s, 1, NN_EXPLAIN_PROBABILITY, 100, 1e-4);
	check_completeness("mlp, logit", &s, 2, NN_EXPLAIN_OUTPUT, 64, 1e-4);
	/* Gauss-Legendre: 8 points already do what the midpoint rule needs hundreds for */
	check_completeness("mlp, 8 steps", &s, 1, NN_EXPLAIN_PROBABILITY, 8, 1e-3);

	spec_begin(&s, 3, 2, 6, 6, NN_LOSS_BCE);
	spec_conv(&s, 3, 3, 1, 1);
	spec_add(&s, NN_RELU);
	spec_pool(&s, NN_MAXPOOL2D, 2);
	spec_add(&s, NN_FLATTEN);
	spec_dense(&s, 1);
	check_completeness("cnn with relu, sigmoid, 256 steps", &s, 0, NN_EXPLAIN_PROBABILITY, 256, 0.02);
}

UNIT_TEST(attribution_embeddings)
{
	NnSpec		s;
	NnLayerSpec *l;

	/* features and embedded ids: the ids' path runs between their vectors */
	spec_begin(&s, 1, 7, 1, 1, NN_LOSS_CROSS_ENTROPY);
	l = spec_inputs(spec_add(&s, NN_SLICE), 1, (const int[]) {-1});
	l->start = 0;
	l->units = 4;
	l = spec_inputs(spec_add(&s, NN_SLICE), 1, (const int[]) {-1});
	l->start = 4;
	l->units = 3;
	l = spec_add(&s, NN_EMBEDDING);
	l->vocab = 5;
	l->units = 2;
	spec_add(&s, NN_TANH);					/* in place over the embedding */
	spec_add(&s, NN_FLATTEN);
	spec_merge(&s, NN_CONCAT, 2, (const int[]) {0, 4});
	spec_dense(&s, 4);
	spec_add(&s, NN_TANH);
	spec_dense(&s, 3);
	check_completeness("features and embedded ids", &s, 0, NN_EXPLAIN_PROBABILITY, 64, 1e-4);

	/* a sequence: attention over embedded tokens with positions, one attribution per token */
	spec_transformer_block(&s, 5, 9, 4, 2, 8, 3);
	check_completeness("transformer block", &s, 2, NN_EXPLAIN_PROBABILITY, 64, 1e-3);
	{
		NnError		err;
		NnModel    *m = nn_model_create(&s, 7, &err);
		float		x[5] = {1, 2, 3, 4, 5},
					b[5] = {1, 2, 0, 4, 5},
					attr[5];
		double		fx,
					fb;

		/* tokens that x and b share have the same vector at both ends: no attribution */
		CHECK(nn_model_integrated_gradients(m, x, b, 16, 0, NN_EXPLAIN_PROBABILITY, attr, &fx, &fb, &err));
		CHECK(attr[0] == 0.0f && attr[1] == 0.0f && attr[3] == 0.0f && attr[4] == 0.0f);
		CHECK(attr[2] != 0.0f);
		nn_model_free(m);
	}
}
