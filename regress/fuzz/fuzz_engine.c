/*
 * fuzz_engine.c -- a model that passed the checks is used as pgdl would use it
 * next (see fuzz_engine.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_engine.h"

void
fuzz_fail(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fprintf(stderr, "fuzz: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	abort();
}

bool
fuzz_verbose(void)
{
	static int	verbose = -1;

	if (verbose < 0)
		verbose = getenv("FUZZ_VERBOSE") != NULL && strcmp(getenv("FUZZ_VERBOSE"), "0") != 0;
	return verbose;
}

void
fuzz_note(const char *fmt,...)
{
	va_list		ap;

	if (!fuzz_verbose())
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

bool
fuzz_spec_small(const NnSpec *spec)
{
	NnCost		cost;
	NnError		err;
	int64_t		in = spec->input[0] * (int64_t) (spec->input_ndim == 3 ? spec->input[1] * (int64_t) spec->input[2] : 1);

	if (!nn_spec_cost(spec, NULL, &cost, &err))
		fuzz_fail("nn_spec_cost refuses a spec that passed validation: %s", err.msg);
	return cost.params <= FUZZ_MAX_PARAMS && in + cost.act_floats <= FUZZ_MAX_FLOATS &&
		cost.flops_train <= FUZZ_MAX_FLOPS;
}

float *
fuzz_inputs(const NnModel *m, int n)
{
	int64_t		len = n * nn_model_input_size(m);
	float	   *x = malloc(sizeof(float) * len);

	int64_t		width = nn_model_input_size(m);

	for (int64_t i = 0; i < len; i++)
		x[i] = (float) ((i * 7919) % 23) / 8.0f - 1.375f;
	/* an embedding's columns hold ids, whole numbers below its vocabulary, as pgdl.predict checks */
	for (int l = 0; l < m->spec.n_layers; l++)
	{
		int64_t		start,
					count;

		if (m->spec.layers[l].type != NN_EMBEDDING || !nn_input_columns(&m->spec, l, &start, &count))
			continue;
		for (int64_t e = 0; e < n; e++)
			for (int64_t c = start; c < start + count && c < width; c++)
				x[e * width + c] = (float) ((e * 7 + c) % m->spec.layers[l].vocab);
	}
	return x;
}

float *
fuzz_targets(const NnModel *m, int n)
{
	int64_t		k = nn_model_output_size(m);
	int64_t		len = n * nn_model_target_size(m);
	float	   *y = malloc(sizeof(float) * len);

	for (int64_t i = 0; i < len; i++)
		y[i] = m->spec.loss == NN_LOSS_CROSS_ENTROPY ? (float) (i % k) : (float) (i % 2);
	return y;
}

static uint8_t *
serialize(const NnModel *m, size_t *len)
{
	uint8_t    *blob;

	*len = nn_model_serialized_size(m);
	blob = malloc(*len);
	nn_model_serialize(m, blob);
	return blob;
}

/* What serialize writes, deserialize reads back to the same bytes. */
static void
check_round_trip(const NnModel *m)
{
	size_t		len,
				len2;
	uint8_t    *a = serialize(m, &len),
			   *b;
	NnError		err;
	NnModel    *back = nn_model_deserialize(a, len, &err);

	if (back == NULL)
		fuzz_fail("a serialized model does not deserialize: %s", err.msg);
	b = serialize(back, &len2);
	if (len != len2 || memcmp(a, b, len) != 0)
		fuzz_fail("a model changes through serialize and deserialize");
	nn_model_free(back);
	free(a);
	free(b);
}

/* Transfer learning's cut after layer k: the frozen prefix's features, and the join. */
static void
check_cut(const NnModel *m, int k, const float *x)
{
	NnError		err;
	NnModel    *prefix = nn_model_slice(m, 0, k, 0, &err),
			   *rest,
			   *joined;
	float	   *features;

	/* a sequence cannot be a model's input: nn_model_slice refuses a cut before a layer that reads one */
	if (m->shape[k].ndim == 2)
	{
		if (prefix != NULL)
			nn_model_free(prefix);
		return;
	}
	if (prefix == NULL)
	{
		/* a prefix keeps the loss: cross_entropy refuses a prefix of one output */
		if (m->spec.loss == NN_LOSS_CROSS_ENTROPY && NN_SHAPE_SIZE(m->shape[k]) < 2)
			return;
		/* a graph is cut only where one tensor crosses (nn_model_slice) */
		if (nn_spec_is_graph(&m->spec) && strstr(err.msg, "several tensors crossing") != NULL)
			return;
		fuzz_fail("the first %d layers of a valid model are refused: %s", k, err.msg);
	}
	rest = nn_model_slice_trained(m, k, &err);
	if (rest == NULL)
		fuzz_fail("the rest after layer %d of a valid model is refused: %s", k, err.msg);
	features = malloc(sizeof(float) * FUZZ_BATCH * nn_model_output_size(prefix));
	if (!nn_model_forward_frozen(prefix, x, FUZZ_BATCH, features, &err))
		fuzz_fail("a frozen prefix does not run: %s", err.msg);
	joined = nn_model_join(prefix, rest, &err);
	if (joined == NULL)
		fuzz_fail("a model cut after layer %d does not join back: %s", k, err.msg);
	if (joined->n_params != m->n_params || joined->n_buffers != m->n_buffers ||
		memcmp(joined->params, m->params, sizeof(float) * m->n_params) != 0 ||
		memcmp(joined->buffers, m->buffers, sizeof(float) * m->n_buffers) != 0)
		fuzz_fail("a model cut after layer %d and joined back has other weights", k);
	free(features);
	nn_model_free(prefix);
	nn_model_free(rest);
	nn_model_free(joined);
}

void
fuzz_use_model(NnModel *m)
{
	NnError		err;
	NnBatchStats stats = {0};
	float	   *x = fuzz_inputs(m, FUZZ_BATCH);
	float	   *y = fuzz_targets(m, FUZZ_BATCH);

	if (m->spec.n_layers > 1)
		check_cut(m, 1 + (int) (m->seed % (uint64_t) (m->spec.n_layers - 1)), x);
	if (nn_model_forward(m, x, FUZZ_BATCH, false) == NULL)
		fuzz_fail("inference does not run");
	if (!nn_model_evaluate(m, x, y, FUZZ_BATCH, &stats, &err))
		fuzz_fail("evaluation on valid targets fails: %s", err.msg);
	if (m->optim.type == 0)
	{
		NnOptim		sgd;

		nn_optim_defaults(&sgd, NN_OPT_SGD);
		sgd.momentum = 0.9f;
		if (!nn_model_set_optim(m, &sgd, &err))
			fuzz_fail("sgd is refused: %s", err.msg);
	}
	if (!nn_model_train_step(m, x, y, FUZZ_BATCH, &stats, &err) && m->step < NN_MAX_STEP)
		fuzz_fail("a training step on valid targets fails: %s", err.msg);
	check_round_trip(m);
	free(x);
	free(y);
}
