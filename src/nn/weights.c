/*
 * weights.c -- per-example weights of the training loss.
 *
 * An example weighs its class's weight (nn_model_set_class_weights,
 * cross_entropy only) times its row's (nn_model_weigh_next), and a step's loss
 * is the weighted mean sum(w_i * l_i) / sum(w_i): torch.nn.CrossEntropyLoss
 * (weight = class weights, reduction = 'mean') for class weights, the same
 * normalization for row weights and for mse and binary_cross_entropy.  Only the
 * gradient is weighted: the loss a step reports (NnBatchStats) stays the plain
 * mean of its examples' losses, so that configurations weighted differently
 * compare on the same number.  A model with neither runs the unweighted
 * arithmetic, byte for byte.  The weights of a batch are computed on the host
 * from its host targets, in example order, and summed in double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "nn_internal.h"

/* The model's weights, allocated the first time it needs them; NULL when out of memory. */
static NnLossWeights *
weights_of(NnModel *m, NnError *err)
{
	if (m->weights == NULL && (m->weights = calloc(1, sizeof(NnLossWeights))) == NULL)
		nn_error_set(err, -1, "", "out of memory");
	return m->weights;
}

/* Room for n floats in *buf (host memory). */
static bool
host_room(float **buf, int32_t *floats, int32_t n, NnError *err)
{
	float	   *p;

	if (n <= *floats)
		return true;
	if ((p = realloc(*buf, sizeof(float) * (size_t) n)) == NULL)
	{
		nn_error_set(err, -1, "", "out of memory for the weights of %d examples", (int) n);
		return false;
	}
	*buf = p;
	*floats = n;
	return true;
}

bool
nn_model_set_class_weights(NnModel *m, const float *w, int32_t k, NnError *err)
{
	NnLossWeights *lw;

	if (w == NULL)
	{
		if (m->weights != NULL)
		{
			free(m->weights->classes);
			m->weights->classes = NULL;
			m->weights->n_classes = 0;
		}
		return true;
	}
	if (m->spec.loss != NN_LOSS_CROSS_ENTROPY)
	{
		nn_error_set(err, -1, "class_weight", "class weights need the cross_entropy loss, not %s",
					 nn_loss_name(m->spec.loss));
		return false;
	}
	if (k != nn_model_output_size(m))
	{
		nn_error_set(err, -1, "class_weight", "%d class weights for a model of %lld classes",
					 (int) k, (long long) nn_model_output_size(m));
		return false;
	}
	for (int32_t c = 0; c < k; c++)
		if (!(isfinite(w[c]) && w[c] >= 0.0f))
		{
			nn_error_set(err, -1, "class_weight", "the weight of class %d is %g, not a finite number >= 0",
						 (int) c, (double) w[c]);
			return false;
		}
	if ((lw = weights_of(m, err)) == NULL)
		return false;
	if (lw->classes == NULL && (lw->classes = malloc(sizeof(float) * (size_t) k)) == NULL)
	{
		nn_error_set(err, -1, "", "out of memory");
		return false;
	}
	memcpy(lw->classes, w, sizeof(float) * (size_t) k);
	lw->n_classes = k;
	return true;
}

void
nn_model_weigh_next(NnModel *m, const float *row_weights)
{
	NnError		err;

	if (row_weights == NULL && m->weights == NULL)
		return;
	if (weights_of(m, &err) != NULL)
		m->weights->next_rows = row_weights;
}

/*
 * The weights of a training batch of n examples with host targets y, into
 * *out (host memory owned by the model; NULL when the batch is unweighted),
 * their sum into *sum.  Consumes the row weights nn_model_weigh_next gave.  A
 * label out of range weighs 1 here: the loss refuses the batch anyway.
 */
bool
nn_weights_batch(NnModel *m, const float *y, int32_t n, const float **out, double *sum, NnError *err)
{
	NnLossWeights *lw = m->weights;
	const float *rows;
	double		s = 0.0;

	*out = NULL;
	*sum = (double) n;
	if (lw == NULL || (lw->classes == NULL && lw->next_rows == NULL))
		return true;
	rows = lw->next_rows;
	lw->next_rows = NULL;
	if (!host_room(&lw->batch, &lw->batch_floats, n, err))
		return false;
	for (int32_t i = 0; i < n; i++)
	{
		float		w = rows != NULL ? rows[i] : 1.0f;

		if (lw->classes != NULL && y[i] >= 0.0f && y[i] < (float) lw->n_classes)
			w *= lw->classes[(int) y[i]];
		if (!(isfinite(w) && w >= 0.0f))
		{
			nn_error_set(err, -1, "weight", "example %d weighs %g, not a finite number >= 0", (int) i, (double) w);
			return false;
		}
		lw->batch[i] = w;
		s += w;
	}
	*out = lw->batch;
	*sum = s;
	return true;
}

/* A staged batch's weights: computed now from its host targets, used by nn_weights_staged. */
bool
nn_weights_stage(NnModel *m, const float *y, int32_t n, NnError *err)
{
	const float *w;
	double		sum;

	if (!nn_weights_batch(m, y, n, &w, &sum, err))
		return false;
	if (m->weights == NULL)
		return true;
	m->weights->staged_weighted = w != NULL;
	m->weights->staged_sum = sum;
	if (w == NULL)
		return true;
	if (!host_room(&m->weights->staged, &m->weights->staged_floats, n, err))
		return false;
	memcpy(m->weights->staged, w, sizeof(float) * (size_t) n);
	return true;
}

/* The weights nn_weights_stage computed for the batch now trained (NULL: unweighted). */
const float *
nn_weights_staged(NnModel *m, int32_t n, double *sum)
{
	NnLossWeights *lw = m->weights;

	*sum = (double) n;
	if (lw == NULL || !lw->staged_weighted)
		return NULL;
	lw->staged_weighted = false;
	*sum = lw->staged_sum;
	return lw->staged;
}

/*
 * Host weights hw of n examples where the loss reads them: themselves on a
 * host-memory backend, else uploaded into device memory kept for the purpose.
 */
const float *
nn_weights_on_backend(NnModel *m, const float *hw, int32_t n, NnError *err)
{
	NnLossWeights *lw = m->weights;

	if (hw == NULL || m->be->host_memory)
		return hw;
	if (lw->device_be != m->be || lw->device_floats < n)
	{
		float	   *p;
		int32_t		floats = n > m->batch_cap ? n : m->batch_cap;

		if ((p = m->be->alloc(sizeof(float) * (size_t) floats)) == NULL)
		{
			nn_error_set(err, -1, "batch_size", "out of device memory for the weights of %d examples", (int) n);
			return NULL;
		}
		if (lw->device != NULL)
			lw->device_be->release(lw->device);
		lw->device = p;
		lw->device_floats = floats;
		lw->device_be = m->be;
	}
	m->be->upload(lw->device, hw, sizeof(float) * (size_t) n);
	return lw->device;
}

void
nn_weights_free(NnModel *m)
{
	NnLossWeights *lw = m->weights;

	if (lw == NULL)
		return;
	if (lw->device != NULL)
		lw->device_be->release(lw->device);
	free(lw->classes);
	free(lw->batch);
	free(lw->staged);
	free(lw);
	m->weights = NULL;
}
