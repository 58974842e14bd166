/* test_util.h -- small helpers shared by the engine tests. */
#ifndef PGDL_TEST_UTIL_H
#define PGDL_TEST_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"

static inline void
spec_begin(NnSpec *s, int ndim, int c, int h, int w, NnLoss loss)
{
	memset(s, 0, sizeof(*s));
	s->input_ndim = ndim;
	s->input[0] = c;
	s->input[1] = ndim == 3 ? h : 0;
	s->input[2] = ndim == 3 ? w : 0;
	s->loss = loss;
}

static inline NnLayerSpec *
spec_add(NnSpec *s, NnLayerType type)
{
	NnLayerSpec *l = &s->layers[s->n_layers++];

	nn_layer_defaults(l, type);
	return l;
}

static inline void
spec_dense(NnSpec *s, int units)
{
	spec_add(s, NN_DENSE)->units = units;
}

static inline void
spec_conv(NnSpec *s, int filters, int kernel, int stride, int padding)
{
	NnLayerSpec *l = spec_add(s, NN_CONV2D);

	l->filters = filters;
	l->kernel = kernel;
	l->stride = stride;
	l->padding = padding;
}

static inline void
spec_pool(NnSpec *s, NnLayerType type, int kernel)
{
	spec_add(s, type)->kernel = kernel;
}

/* The graph form: layer l reads the n outputs srcs (layer indices, -1: the input). */
static inline NnLayerSpec *
spec_inputs(NnLayerSpec *l, int n, const int *srcs)
{
	l->n_inputs = (int16_t) n;
	for (int k = 0; k < n; k++)
		l->inputs[k] = (int16_t) srcs[k];
	return l;
}

/* add or concat of the n outputs srcs */
static inline NnLayerSpec *
spec_merge(NnSpec *s, NnLayerType type, int n, const int *srcs)
{
	return spec_inputs(spec_add(s, type), n, srcs);
}

/*
 * A ResNet basic block after a stem, as torchvision's: conv-bn-relu (the
 * stem, read twice), conv-bn-relu-conv-bn, + the stem, relu; then a head.
 */
static inline void
spec_residual_cnn(NnSpec *s, int c, int hw, int filters, int classes)
{
	spec_begin(s, 3, c, hw, hw, NN_LOSS_CROSS_ENTROPY);
	spec_conv(s, filters, 3, 1, 1);			/* 0 */
	spec_add(s, NN_BATCHNORM);
	spec_add(s, NN_RELU);					/* 2: the stem */
	spec_conv(s, filters, 3, 1, 1);
	spec_add(s, NN_BATCHNORM);
	spec_add(s, NN_RELU);					/* 5 */
	spec_conv(s, filters, 3, 1, 1);
	spec_add(s, NN_BATCHNORM);				/* 7 */
	spec_merge(s, NN_ADD, 2, (const int[]) {7, 2});
	spec_add(s, NN_RELU);					/* 9 */
	spec_pool(s, NN_MAXPOOL2D, 2);
	spec_add(s, NN_FLATTEN);
	spec_dense(s, classes);
}

/*
 * A post-norm transformer encoder block over ids, as torch's
 * nn.TransformerEncoderLayer with GELU: embedding with positions (0),
 * attention (1), + (2), layernorm (3), per-step dense, gelu, per-step dense
 * (6), + the normed (7), layernorm; the mean over steps and a head.
 */
static inline void
spec_transformer_block(NnSpec *s, int steps, int vocab, int dim, int heads, int hidden, int classes)
{
	spec_begin(s, 1, steps, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_add(s, NN_EMBEDDING)->vocab = vocab;
	s->layers[0].units = dim;
	s->layers[0].positions = true;
	spec_add(s, NN_ATTENTION)->heads = heads;
	spec_merge(s, NN_ADD, 2, (const int[]) {0, 1});
	spec_add(s, NN_LAYERNORM);
	spec_add(s, NN_DENSE)->units = hidden;
	s->layers[4].per_step = true;
	spec_add(s, NN_GELU);
	spec_add(s, NN_DENSE)->units = dim;
	s->layers[6].per_step = true;
	spec_merge(s, NN_ADD, 2, (const int[]) {3, 6});
	spec_add(s, NN_LAYERNORM);
	spec_add(s, NN_GLOBAL_AVGPOOL);
	spec_dense(s, classes);
}

/* The reference models of design.md. */
static inline void
spec_reference_mlp(NnSpec *s)
{
	spec_begin(s, 1, 784, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(s, 512);
	spec_add(s, NN_RELU);
	spec_dense(s, 256);
	spec_add(s, NN_RELU);
	spec_dense(s, 10);
}

static inline void
spec_reference_cnn(NnSpec *s)
{
	spec_begin(s, 3, 1, 28, 28, NN_LOSS_CROSS_ENTROPY);
	spec_conv(s, 16, 3, 1, 1);
	spec_add(s, NN_RELU);
	spec_pool(s, NN_MAXPOOL2D, 2);
	spec_conv(s, 32, 3, 1, 1);
	spec_add(s, NN_RELU);
	spec_pool(s, NN_MAXPOOL2D, 2);
	spec_add(s, NN_FLATTEN);
	spec_dense(s, 10);
}

/* Deterministic test data: normal values, and targets to match a loss. */
static inline float *
test_normal(int64_t n, uint64_t seed, float scale)
{
	float	   *x = malloc(sizeof(float) * (n > 0 ? n : 1));

	for (int64_t i = 0; i < n; i++)
		x[i] = scale * nn_rng_normal(seed, 7, i);
	return x;
}

/* ids for a first embedding layer: whole numbers in [0, vocab), stored as floats */
static inline float *
test_ids(int64_t n, int vocab, uint64_t seed)
{
	float	   *x = malloc(sizeof(float) * (n > 0 ? n : 1));

	for (int64_t i = 0; i < n; i++)
		x[i] = (float) (int) (nn_rng_uniform(seed, 13, i) * vocab);
	return x;
}

/* x as ids in place when the spec starts with an embedding */
/* ids (whole numbers below the vocabulary) in the input columns each embedding reads */
static inline void
test_ids_for(const NnSpec *s, float *x, int64_t n, uint64_t seed)
{
	int64_t		len = (int64_t) s->input[0] * (s->input_ndim == 3 ? (int64_t) s->input[1] * s->input[2] : 1);

	for (int i = 0; i < s->n_layers; i++)
	{
		int64_t		count,
					from;

		if (s->layers[i].type != NN_EMBEDDING || !nn_input_columns(s, i, &from, &count))
			continue;
		for (int64_t e = 0; e < n / len; e++)
			for (int64_t j = from; j < from + count; j++)
				x[e * len + j] = (float) (int) (nn_rng_uniform(seed, 13, e * len + j) * s->layers[i].vocab);
	}
}

static inline float *
test_targets(NnLoss loss, int n, int64_t outputs, uint64_t seed)
{
	int64_t		count = loss == NN_LOSS_CROSS_ENTROPY ? n : n * outputs;
	float	   *y = malloc(sizeof(float) * count);

	for (int64_t i = 0; i < count; i++)
	{
		float		u = nn_rng_uniform(seed, 11, i);

		if (loss == NN_LOSS_CROSS_ENTROPY)
			y[i] = (float) (int) (u * outputs);
		else
			y[i] = loss == NN_LOSS_BCE ? u : 2.0f * u - 1.0f;
	}
	return y;
}

#endif
