/*
 * nn_internal.h -- what the engine's files share and nobody else needs.
 */
#ifndef PGDL_NN_INTERNAL_H
#define PGDL_NN_INTERNAL_H

#include "nn.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

/*
 * Optimizer state decays geometrically (Adam's v by 0.999 a step) and, for
 * weights that rarely get a gradient, spends thousands of steps as denormal
 * floats, which x86 handles through a microcode assist about 50 times slower:
 * an MLP trained with Adam ran 4x slower in its second epoch than its first.
 * The engine's public entry points run with denormals flushed to zero (FTZ and
 * DAZ) and put the caller's floating-point mode back on return; the host
 * (PostgreSQL) never sees the change.
 */
static inline unsigned int
nn_fp_enter(void)
{
#if defined(__SSE__)
	unsigned int old = _mm_getcsr();

	_mm_setcsr(old | 0x8040);	/* FTZ (bit 15) | DAZ (bit 6) */
	return old;
#else
	return 0;
#endif
}

static inline void
nn_fp_leave(unsigned int old)
{
#if defined(__SSE__)
	_mm_setcsr(old);
#else
	(void) old;
#endif
}

/* Floats of im2col columns a convolution works on at a time: about 1 MiB, L2-sized. */
#define NN_CONV_CHUNK_FLOATS	((int64_t) 1 << 18)

/*
 * Floats of activations a run of per-example layers (conv, pool, activations)
 * keeps live per chunk of images: the chunk goes through the whole run while
 * it is still in L2, instead of each layer streaming the batch through memory.
 */
#define NN_SEGMENT_CHUNK_FLOATS	((int64_t) 1 << 16)

/*
 * Floats of activations (every layer's output) an inference pass keeps per
 * sub-batch: about 1 MiB.  Inference needs only the last layer's outputs, so a
 * large batch runs as sub-batches that reuse the front of each buffer, as one
 * example at a time does, instead of writing every layer's outputs for the
 * whole batch through memory (a CNN's activations are ~100 KB per image).
 */
#define NN_INFER_CHUNK_FLOATS	((int64_t) 1 << 18)

/* Salts that keep the random streams of initialization and dropout apart. */
#define NN_RNG_INIT_SALT		UINT64_C(0x696e6974)	/* "init" */
#define NN_RNG_DROPOUT_SALT		UINT64_C(0x64726f70)	/* "drop" */

/* layers.c */
extern int	nn_conv_chunk(const NnModel *m, int layer, int batch);
extern int64_t nn_layer_scratch_floats(const NnModel *m, int layer, int batch);
extern int64_t nn_layer_aux_floats(const NnModel *m, int layer, int batch);
extern void nn_layer_init_params(NnModel *m, int layer);
extern void nn_layer_forward(NnModel *m, int layer, const float *in, int first, int n, bool training);
extern void nn_layer_backward(NnModel *m, int layer, const float *in, int first, int n, float *din,
							  bool dout_front);
extern bool nn_layer_chunkable(const NnModel *m, int layer);
extern bool nn_layer_in_place(const NnModel *m, int layer);

/*
 * A device model's staging: the caller's batch is uploaded into x and y (in
 * the workspace, device memory) and _forward's output is downloaded into
 * host_out, each allocated once by nn_model_reserve.  nn_model_stage copies a
 * batch into host_batch (the backend's host memory: pinned on a GPU) and
 * uploads it into the other slot, next_x and next_y, while the device still
 * runs the step before; nn_model_train_staged swaps the slots.  A CPU model
 * that stages batches has a staging with only host_batch.
 */
typedef struct NnStaging
{
	float	   *x;				/* device: batch_cap inputs */
	float	   *y;				/* device: their targets */
	float	   *next_x;			/* device: the slot nn_model_stage fills */
	float	   *next_y;
	float	   *host_out;		/* host: what _forward returns */
	int64_t		host_out_floats;
	float	   *host_batch;		/* host: the staged batch, inputs then targets */
	int64_t		host_batch_floats;
	int32_t		staged_n;		/* examples of the staged batch; 0 when none */
} NnStaging;

/*
 * weights.c: a model's loss weights (nn_model_set_class_weights,
 * nn_model_weigh_next), allocated when first set.
 */
typedef struct NnLossWeights
{
	float	   *classes;		/* host: class c's weight (cross_entropy); NULL: 1 each */
	int32_t		n_classes;
	const float *next_rows;		/* host: the next training batch's row weights; NULL: 1 each */
	float	   *batch;			/* host: a batch's example weights */
	int32_t		batch_floats;
	float	   *staged;			/* host: the staged batch's example weights */
	int32_t		staged_floats;
	bool		staged_weighted;	/* the staged batch is weighted: staged and staged_sum hold it */
	double		staged_sum;
	float	   *device;			/* device_be's memory: the weights the loss reads there */
	int32_t		device_floats;
	const struct NnBackend *device_be;
} NnLossWeights;

extern bool nn_weights_batch(NnModel *m, const float *y, int32_t n, const float **out, double *sum,
							 NnError *err);
extern bool nn_weights_stage(NnModel *m, const float *y, int32_t n, NnError *err);
extern const float *nn_weights_staged(NnModel *m, int32_t n, double *sum);
extern const float *nn_weights_on_backend(NnModel *m, const float *hw, int32_t n, NnError *err);
extern void nn_weights_free(NnModel *m);

/* model.c */
extern NnModel *nn_model_alloc(const NnSpec *spec, NnError *err);
/* the spec validated and the parameters laid out in m (zeroed), nothing allocated */
extern bool nn_model_layout(NnModel *m, const NnSpec *spec, NnError *err);
/* nn_model_set_optim's rule for m's optimizer, nothing allocated; *n_state: its floats of state */
extern bool nn_model_optim_fits(const NnModel *m, const NnOptim *opt, int64_t *n_state, NnError *err);
extern void nn_forward_layers(NnModel *m, const float *x, int32_t n, int from, int upto, bool training);
extern void nn_backward_layers(NnModel *m, int from, int to);
extern float *nn_model_thread_areas(const NnModel *m);
/* the optimizer's update of parameters [a, b) (nn_model_update's, per parameter group) */
extern void nn_update_range(NnModel *m, int64_t a, int64_t b, float lr);
/* clip_norm applied to m->grads (the batch's summed gradients) */
extern void nn_clip_grads(NnModel *m);

extern void nn_layer_backward_whole(NnModel *m, int i, int n);

/* Layer i's k-th input, and that output's gradient (NULL: the input's, not wanted). */
static inline const float *
nn_layer_input_k(const NnModel *m, int i, int k)
{
	int			src = nn_layer_src(&m->spec, i, k);

	return src < 0 ? m->last_input : m->out[src];
}

static inline float *
nn_layer_din_k(const NnModel *m, int i, int k)
{
	int			src = nn_layer_src(&m->spec, i, k);

	return src < 0 ? m->dinput : m->dout[src];
}

static inline const float *
nn_layer_input(const NnModel *m, int i)
{
	return nn_layer_input_k(m, i, 0);
}

static inline float *
nn_layer_din(const NnModel *m, int i)
{
	return nn_layer_din_k(m, i, 0);
}

/*
 * parallel.c: a training step on the model's threads (m->threads > 1, a CPU
 * model, n > 1).  Forward leaves what a forward pass leaves for the loss;
 * backward_update is nn_model_backward then nn_model_update.  A thread's area
 * of the workspace: floats for one thread besides the caller's, batch = the
 * workspace's.
 */
extern void nn_parallel_forward(NnModel *m, const float *x, int32_t n);
extern void nn_parallel_backward_update(NnModel *m);
extern int64_t nn_parallel_area_floats(const NnModel *m, int32_t batch);
/* bytes from src (src_be's memory) to dst (dst_be's), whichever backends they are */
extern bool nn_copy_across(const struct NnBackend *dst_be, void *dst,
						   const struct NnBackend *src_be, const void *src, size_t bytes);

#endif
