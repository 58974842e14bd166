/*
 * tensors.c -- the parameter tensors of a layer, named and shaped as PyTorch's
 * state_dict has them (dense "weight" is [out, in], conv2d "weight" [filters,
 * channels, k, k], batchnorm "running_mean" and "running_var" are buffers), so
 * that weights move between the two without transposing: what pgdl.model_weights,
 * ONNX and transfer learning read a model's weights by.
 */
#include "postgres.h"

#include "spec/spec.h"

int
pgdl_layer_tensors(const NnModel *m, int i, PgdlTensor *t)
{
	const NnLayerSpec *l = &m->spec.layers[i];
	int64		p = m->param_off[i];
	int			in = (int) NN_SHAPE_SIZE(NN_IN_SHAPE(m->shape, &m->spec, i));
	int			c = NN_IN_SHAPE(m->shape, &m->spec, i).c;

	switch (l->type)
	{
		case NN_DENSE:
			if (l->per_step)	/* torch.nn.Linear on each step: [units, features] */
				in = NN_IN_SHAPE(m->shape, &m->spec, i).w;
			t[0] = (PgdlTensor) {i, "weight", 2, {l->units, in}, p, false};
			t[1] = (PgdlTensor) {i, "bias", 1, {l->units}, p + (int64) l->units * in, false};
			return 2;
		case NN_CONV2D:
			t[0] = (PgdlTensor) {i, "weight", 4, {l->filters, c / NN_GROUPS(l), l->kernel, l->kernel}, p, false};
			t[1] = (PgdlTensor) {i, "bias", 1, {l->filters},
								 p + (int64) l->filters * (c / NN_GROUPS(l)) * l->kernel * l->kernel, false};
			return 2;
		case NN_BATCHNORM:
			t[0] = (PgdlTensor) {i, "weight", 1, {c}, p, false};
			t[1] = (PgdlTensor) {i, "bias", 1, {c}, p + c, false};
			t[2] = (PgdlTensor) {i, "running_mean", 1, {c}, m->buffer_off[i], true};
			t[3] = (PgdlTensor) {i, "running_var", 1, {c}, m->buffer_off[i] + c, true};
			return 4;
		case NN_LAYERNORM:
			c = NN_NORM_FEATURES(NN_IN_SHAPE(m->shape, &m->spec, i));
			t[0] = (PgdlTensor) {i, "weight", 1, {c}, p, false};
			t[1] = (PgdlTensor) {i, "bias", 1, {c}, p + c, false};
			return 2;
		case NN_EMBEDDING:
			t[0] = (PgdlTensor) {i, "weight", 2, {l->vocab, l->units}, p, false};
			if (!l->positions)
				return 1;
			/* as a second nn.Embedding(steps, dim), GPT-2's wpe */
			t[1] = (PgdlTensor) {i, "positions", 2, {c, l->units}, p + (int64) l->vocab * l->units, false};
			return 2;
		case NN_CONV1D:
			{
				int			win = NN_IN_SHAPE(m->shape, &m->spec, i).w;

				t[0] = (PgdlTensor) {i, "weight", 3, {l->filters, win, l->kernel}, p, false};
				t[1] = (PgdlTensor) {i, "bias", 1, {l->filters}, p + (int64) l->filters * win * l->kernel, false};
				return 2;
			}
		case NN_GRU:
			{
				/* torch.nn.GRU's state_dict: gates r, z, n stacked */
				int			h3 = 3 * l->units,
							win = NN_IN_SHAPE(m->shape, &m->spec, i).w;

				t[0] = (PgdlTensor) {i, "weight_ih_l0", 2, {h3, win}, p, false};
				t[1] = (PgdlTensor) {i, "weight_hh_l0", 2, {h3, l->units}, p + (int64) h3 * win, false};
				t[2] = (PgdlTensor) {i, "bias_ih_l0", 1, {h3}, p + (int64) h3 * (win + l->units), false};
				t[3] = (PgdlTensor) {i, "bias_hh_l0", 1, {h3}, p + (int64) h3 * (win + l->units) + h3, false};
				return 4;
			}
		case NN_ATTENTION:
			{
				/* torch.nn.MultiheadAttention's state_dict (pgdl keeps the weights first) */
				int			d = NN_IN_SHAPE(m->shape, &m->spec, i).w;

				t[0] = (PgdlTensor) {i, "in_proj_weight", 2, {3 * d, d}, p, false};
				t[1] = (PgdlTensor) {i, "out_proj.weight", 2, {d, d}, p + (int64) 3 * d * d, false};
				t[2] = (PgdlTensor) {i, "in_proj_bias", 1, {3 * d}, p + (int64) 4 * d * d, false};
				t[3] = (PgdlTensor) {i, "out_proj.bias", 1, {d}, p + (int64) 4 * d * d + 3 * d, false};
				return 4;
			}
		default:
			if (m->param_len[i] != 0 || m->buffer_len[i] != 0)
				elog(ERROR, "layer %d (%s) has parameters of unknown shape", i, nn_layer_type_name(l->type));
			return 0;
	}
}

int64
pgdl_tensor_size(const PgdlTensor *t)
{
	int64		size = 1;

	for (int d = 0; d < t->ndim; d++)
		size *= t->shape[d];
	return size;
}
