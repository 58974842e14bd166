/*
 * transfer.c -- transfer learning: a network cut into a frozen prefix and a
 * trainable rest, and the two joined back into one model.
 *
 * The frozen prefix runs in inference mode (batchnorm on its running
 * statistics, dropout off), in fixed chunks of examples, so that its output for
 * a buffer is the same bytes whether it is computed once and kept (a feature
 * cache) or recomputed for every configuration and epoch.  The models taken
 * from may live on any backend; the models made here are CPU models.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "nn_internal.h"

/* The spec of layers [from, to) of m, taking m's shape[from] as its input. */
static void
slice_spec(const NnModel *m, int from, int to, NnSpec *out)
{
	const NnShape *in = &m->shape[from];

	memset(out, 0, sizeof(*out));
	out->input_ndim = in->ndim;
	out->input[0] = in->c;
	out->input[1] = in->ndim == 3 ? in->h : 0;
	out->input[2] = in->ndim == 3 ? in->w : 0;
	out->loss = m->spec.loss;
	out->delta = m->spec.delta;
	out->n_layers = to - from;
	memcpy(out->layers, &m->spec.layers[from], sizeof(NnLayerSpec) * (to - from));
	/* a graph's layers name earlier ones by index: the layer before the cut becomes the spec's input (-1) */
	for (int i = 0; i < out->n_layers; i++)
		for (int k = 0; k < out->layers[i].n_inputs; k++)
			out->layers[i].inputs[k] -= (int16_t) from;
}

/*
 * Whether one tensor, layer k - 1's output (or the spec's input for k = 0),
 * is all that crosses a cut before layer k: always so in a chain; in a graph,
 * no layer from k on reads a layer before k - 1.
 */
static bool
single_tensor_cut(const NnSpec *spec, int k)
{
	for (int j = k; j < spec->n_layers; j++)
		for (int q = 0; q < nn_layer_n_inputs(spec, j); q++)
			if (nn_layer_src(spec, j, q) < k - 1)
				return false;
	return true;
}

bool
nn_model_copy_layers(NnModel *dst, int dst_from, const NnModel *src, int src_from, int count,
					 NnError *err)
{
	if (dst_from < 0 || src_from < 0 || count < 0 ||
		dst_from + count > dst->spec.n_layers || src_from + count > src->spec.n_layers)
	{
		nn_error_set(err, -1, "layers", "layers out of range");
		return false;
	}
	for (int i = 0; i < count; i++)
	{
		int			d = dst_from + i,
					s = src_from + i;

		if (dst->spec.layers[d].type != src->spec.layers[s].type ||
			dst->param_len[d] != src->param_len[s] || dst->buffer_len[d] != src->buffer_len[s])
		{
			nn_error_set(err, d, "type", "layer %d does not match layer %d of the source model", d, s);
			return false;
		}
		nn_copy_across(dst->be, dst->params + dst->param_off[d], src->be, src->params + src->param_off[s],
					   sizeof(float) * dst->param_len[d]);
		nn_copy_across(dst->be, dst->buffers + dst->buffer_off[d], src->be, src->buffers + src->buffer_off[s],
					   sizeof(float) * dst->buffer_len[d]);
	}
	return true;
}

/*
 * src's optimizer, and `count` parameters' worth of its state from src_first
 * into dst's at dst_first, slice by slice (sgd: momentum; adam: m, then v).
 */
static bool
copy_optim_state(NnModel *dst, int64_t dst_first, const NnModel *src, int64_t src_first, int64_t count,
				 NnError *err)
{
	int64_t		slices = src->n_params ? src->n_opt_state / src->n_params : 0;

	if (src->optim.type == 0)
		return true;
	if (!nn_model_set_optim(dst, &src->optim, err))
		return false;
	/* a part without parameters has no state to copy (and no state array to point into) */
	if (count == 0)
		return true;
	for (int64_t s = 0; s < slices && dst->n_opt_state == slices * dst->n_params; s++)
		nn_copy_across(dst->be, dst->opt_state + s * dst->n_params + dst_first,
					   src->be, src->opt_state + s * src->n_params + src_first, sizeof(float) * count);
	return true;
}

NnModel *
nn_model_slice(const NnModel *m, int from, int to, uint64_t seed, NnError *err)
{
	NnSpec	   *spec;
	NnModel    *out;

	if (from < 0 || to > m->spec.n_layers || from >= to)
	{
		nn_error_set(err, -1, "layers", "cannot take layers %d to %d of a model of %d layers",
					 from, to, m->spec.n_layers);
		return NULL;
	}
	if (!single_tensor_cut(&m->spec, from) || !single_tensor_cut(&m->spec, to))
	{
		nn_error_set(err, -1, "layers", "a graph cut before layer %d has several tensors crossing it: a later "
					 "layer reads one before the cut but its last (a branch, a residual connection)",
					 single_tensor_cut(&m->spec, from) ? to : from);
		return NULL;
	}
	if (m->shape[from].ndim == 2)
	{
		/* a model's input is flat or an image; only an embedding makes a sequence */
		nn_error_set(err, from, "layers", "cannot cut the model before layer %d: it reads a sequence, which cannot be a model's input",
					 from);
		return NULL;
	}
	spec = malloc(sizeof(NnSpec));
	if (spec == NULL)
	{
		nn_error_set(err, -1, "", "out of memory");
		return NULL;
	}
	slice_spec(m, from, to, spec);
	out = nn_model_alloc(spec, err);
	free(spec);
	if (out == NULL)
		return NULL;
	out->seed = seed;
	if (!nn_model_copy_layers(out, 0, m, from, to - from, err))
	{
		nn_model_free(out);
		return NULL;
	}
	return out;
}

NnModel *
nn_model_slice_trained(const NnModel *m, int from, NnError *err)
{
	NnModel    *out = nn_model_slice(m, from, m->spec.n_layers, m->seed, err);

	if (out == NULL)
		return NULL;
	out->step = m->step;
	/* the optimizer state of the layers taken: the inverse of nn_model_join */
	if (!copy_optim_state(out, 0, m, m->n_params - out->n_params, out->n_params, err))
	{
		nn_model_free(out);
		return NULL;
	}
	return out;
}

NnModel *
nn_model_join(const NnModel *prefix, const NnModel *rest, NnError *err)
{
	NnSpec	   *spec;
	NnModel    *m;
	int			k = prefix->spec.n_layers;

	if (k + rest->spec.n_layers > NN_MAX_LAYERS)
	{
		nn_error_set(err, -1, "layers", "the joined model has more than %d layers", NN_MAX_LAYERS);
		return NULL;
	}
	if (prefix->shape[k].ndim != rest->shape[0].ndim || NN_SHAPE_SIZE(prefix->shape[k]) != NN_SHAPE_SIZE(rest->shape[0]) ||
		prefix->shape[k].c != rest->shape[0].c)
	{
		nn_error_set(err, -1, "input", "the rest's input does not match the prefix's output");
		return NULL;
	}
	spec = malloc(sizeof(NnSpec));
	if (spec == NULL)
	{
		nn_error_set(err, -1, "", "out of memory");
		return NULL;
	}
	memcpy(spec, &prefix->spec, sizeof(NnSpec));
	memcpy(&spec->layers[k], rest->spec.layers, sizeof(NnLayerSpec) * rest->spec.n_layers);
	spec->n_layers = k + rest->spec.n_layers;
	/* the rest's graph inputs by index, its input (-1) the prefix's last layer: slice_spec undone */
	for (int i = k; i < spec->n_layers; i++)
		for (int q = 0; q < spec->layers[i].n_inputs; q++)
			spec->layers[i].inputs[q] += (int16_t) k;
	spec->loss = rest->spec.loss;
	spec->delta = rest->spec.delta;
	m = nn_model_alloc(spec, err);
	free(spec);
	if (m == NULL)
		return NULL;
	m->seed = rest->seed;
	m->step = rest->step;
	/* the rest's optimizer state after fresh state (zeros; adagrad's initial value) for the frozen parameters */
	if (!nn_model_copy_layers(m, 0, prefix, 0, k, err) ||
		!nn_model_copy_layers(m, k, rest, 0, rest->spec.n_layers, err) ||
		!copy_optim_state(m, m->n_params - rest->n_params, rest, 0, rest->n_params, err))
	{
		nn_model_free(m);
		return NULL;
	}
	return m;
}

bool
nn_model_forward_frozen(NnModel *m, const float *x, int32_t n, float *out, NnError *err)
{
	int64_t		in_size = nn_model_input_size(m);
	int64_t		out_size = nn_model_output_size(m);

	if (!nn_model_reserve(m, n < NN_FROZEN_CHUNK ? n : NN_FROZEN_CHUNK, err) ||
		!nn_model_check_input(m, x, n, err))
		return false;
	for (int32_t first = 0; first < n; first += NN_FROZEN_CHUNK)
	{
		int32_t		rows = n - first < NN_FROZEN_CHUNK ? n - first : NN_FROZEN_CHUNK;
		const float *z = nn_model_forward(m, x + (int64_t) first * in_size, rows, false);

		memcpy(out + (int64_t) first * out_size, z, sizeof(float) * rows * out_size);
	}
	/* the model keeps no pointer into the caller's memory */
	m->last_input = NULL;
	m->last_n = 0;
	return true;
}
