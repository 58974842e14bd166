/*
 * test_parallel.c -- a training step on several threads (parallel.c): the same
 * bytes for the same thread count, run after run; the one-thread bytes when
 * threads is 1; close to one thread otherwise (only the order in which the
 * shards' gradients are summed differs).
 */
#include "test_util.h"
#include "unit.h"

typedef struct Trained
{
	uint8_t    *blob;
	size_t		len;
	float	   *params;
	int64_t		n_params;
	double		loss;
} Trained;

/* steps of batch n (n varies: odd sizes give uneven shards), threads 0: never set */
/* train()'s clip_norm, with no_decay_bias_norm and weight decay when set (0: none) */
static float train_clip;

static Trained
train(const NnSpec *s, NnOptType opt_type, int threads, int steps, int n)
{
	NnError		err;
	NnOptim		o;
	NnModel    *m = nn_model_create(s, 11, &err);
	float	   *x = test_normal((int64_t) n * nn_model_input_size(m), 31, 1.0f);
	float	   *y = test_targets(s->loss, n, nn_model_output_size(m), 32);
	NnBatchStats stats = {0};
	Trained		r;

	CHECK(m != NULL);
	test_ids_for(s, x, (int64_t) n * nn_model_input_size(m), 33);
	nn_optim_defaults(&o, opt_type);
	o.lr = 0.01f;
	if (opt_type == NN_OPT_SGD)
		o.momentum = 0.9f;
	if (train_clip > 0)
	{
		o.clip_norm = train_clip;
		o.no_decay_bias_norm = true;
		o.weight_decay = 0.01f;
	}
	CHECK(nn_model_set_optim(m, &o, &err));
	CHECK(nn_model_reserve(m, n, &err));
	if (threads > 0)
		CHECK_MSG(nn_model_set_threads(m, threads, &err), "%s", err.msg);
	for (int i = 0; i < steps; i++)
	{
		int			c = n - (i % 3);	/* n, n - 1, n - 2 */
		bool		finite;

		CHECK(nn_model_train_step_finite(m, x, y, c, &stats, &finite, &err));
		CHECK(finite);
	}
	r.len = nn_model_serialized_size(m);
	r.blob = malloc(r.len);
	nn_model_serialize(m, r.blob);
	r.n_params = m->n_params;
	r.params = malloc(sizeof(float) * m->n_params);
	memcpy(r.params, m->params, sizeof(float) * m->n_params);
	r.loss = stats.loss_sum / stats.n;
	nn_model_free(m);
	free(x);
	free(y);
	return r;
}

static bool
same(const Trained *a, const Trained *b)
{
	return a->len == b->len && memcmp(a->blob, b->blob, a->len) == 0;
}

/*
 * The parameters' difference relative to their size: the largest (SGD), or the
 * root mean square (Adam, where a gradient near 0 that rounds to the other
 * sign moves its parameter by 2 lr: a few such parameters are expected).
 */
static double
rel_diff(const Trained *a, const Trained *b, bool rms)
{
	double		d = 0,
				scale = 1e-30;

	for (int64_t j = 0; j < a->n_params; j++)
	{
		double		e = fabs((double) a->params[j] - b->params[j]);

		d = rms ? d + e * e : fmax(d, e);
		scale = rms ? scale + (double) a->params[j] * a->params[j] : fmax(scale, fabs((double) a->params[j]));
	}
	return rms ? sqrt(d / scale) : d / scale;
}

static void
release(Trained *t)
{
	free(t->blob);
	free(t->params);
}

/* conv, batchnorm (on the caller's thread between the threads' runs), dropout: every path */
static void
bn_dropout_cnn(NnSpec *s)
{
	spec_begin(s, 3, 2, 8, 8, NN_LOSS_CROSS_ENTROPY);
	spec_conv(s, 8, 3, 1, 1);
	spec_add(s, NN_RELU);
	spec_pool(s, NN_MAXPOOL2D, 2);
	spec_conv(s, 12, 3, 1, 1);
	spec_add(s, NN_BATCHNORM);
	spec_add(s, NN_RELU);
	spec_add(s, NN_FLATTEN);
	spec_add(s, NN_DROPOUT)->rate = 0.3f;
	spec_dense(s, 16);
	spec_add(s, NN_TANH);
	spec_dense(s, 5);
}

static void
check_spec(const NnSpec *s, NnOptType opt, int n, double tol)
{
	Trained		base = train(s, opt, 0, 6, n),
				one = train(s, opt, 1, 6, n);

	/* threads 1 is the one-thread step, byte for byte */
	CHECK(same(&base, &one));
	for (int threads = 2; threads <= 3; threads++)
	{
		Trained		a = train(s, opt, threads, 6, n),
					b = train(s, opt, threads, 6, n);

		CHECK_MSG(same(&a, &b), "%d threads: two runs differ", threads);
		double		d = rel_diff(&a, &base, opt != NN_OPT_SGD);

		CHECK_MSG(tol < 0 || d < tol, "%d threads, %s, batch %d: %g from one thread", threads, nn_optim_name(opt), n, d);
		if (tol >= 0)
			CHECK_NEAR(a.loss, base.loss, 1e-4 * fabs(base.loss) + 1e-6);
		release(&a);
		release(&b);
	}
	release(&base);
	release(&one);
}

UNIT_TEST(parallel_same_bytes_per_thread_count)
{
	NnSpec		s;

	bn_dropout_cnn(&s);
	check_spec(&s, NN_OPT_SGD, 21, 1e-4);
	/*
	 * not close: the bias of a convolution before batchnorm has a gradient of 0
	 * but for rounding, which Adam turns into steps of lr of either sign
	 */
	check_spec(&s, NN_OPT_ADAMW, 20, -1);
	spec_reference_mlp(&s);
	check_spec(&s, NN_OPT_SGD, 33, 1e-4);
	check_spec(&s, NN_OPT_ADAMW, 20, 1e-3);
	spec_reference_cnn(&s);
	check_spec(&s, NN_OPT_SGD, 16, 1e-4);
}

UNIT_TEST(parallel_small_batches_and_limits)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m;
	Trained		a,
				b;

	bn_dropout_cnn(&s);
	/* batches smaller than the thread count: fewer shards, still deterministic */
	a = train(&s, NN_OPT_SGD, 8, 6, 4);
	b = train(&s, NN_OPT_SGD, 8, 6, 4);
	CHECK(same(&a, &b));
	release(&a);
	release(&b);

	m = nn_model_create(&s, 1, &err);
	CHECK(!nn_model_set_threads(m, 0, &err));
	CHECK(strstr(err.msg, "between 1 and 64") != NULL);
	CHECK(!nn_model_set_threads(m, NN_MAX_THREADS + 1, &err));
	CHECK(!nn_model_set_threads(m, -1, &err));
	/* before and after the workspace, and back to one */
	CHECK(nn_model_set_threads(m, 2, &err));
	CHECK(nn_model_reserve(m, 9, &err));
	CHECK(nn_model_set_threads(m, 4, &err));
	CHECK(m->batch_cap == 9);
	CHECK(nn_model_set_threads(m, 1, &err));
	nn_model_free(m);
}

/* The graph form on threads: a residual block (gradients that add up, per shard). */
UNIT_TEST(parallel_residual_graph)
{
	NnSpec		s;

	spec_residual_cnn(&s, 2, 8, 4, 5);
	check_spec(&s, NN_OPT_SGD, 19, 1e-4);
}

/* A transformer encoder block on threads: per-step dense, positions and attention per shard. */
UNIT_TEST(parallel_transformer)
{
	NnSpec		s;

	spec_transformer_block(&s, 6, 9, 8, 2, 16, 4);
	check_spec(&s, NN_OPT_SGD, 23, 1e-4);
}

/* Clipping on threads: the norm of the summed gradient, before any update; deterministic per thread count. */
UNIT_TEST(parallel_clip_norm)
{
	NnSpec		s;
	Trained		plain,
				clipped;

	spec_reference_mlp(&s);
	plain = train(&s, NN_OPT_SGD, 2, 6, 33);
	train_clip = 0.01f;
	clipped = train(&s, NN_OPT_SGD, 2, 6, 33);
	CHECK_MSG(!same(&plain, &clipped), "clip_norm changed nothing");
	check_spec(&s, NN_OPT_SGD, 33, 1e-4);
	bn_dropout_cnn(&s);
	check_spec(&s, NN_OPT_SGD, 21, 1e-4);
	train_clip = 0;
	release(&plain);
	release(&clipped);
}
