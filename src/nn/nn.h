/*
 * nn.h -- pgdl's numerical engine: specs, models, training, serialization, cost.
 *
 * No PostgreSQL header may be included here or anywhere under src/nn and kernels/:
 * the engine builds, is unit-tested and is benchmarked on its own.
 *
 * Tensors are float32, NCHW, one example after another.  A spec is a sequence of
 * layers; every layer reads the output of the layer before it (the "input" of
 * layer 0 is the example).  Residual adds will give a layer a second input; the
 * per-layer output/gradient buffers below are laid out so that this is an
 * addition, not a rewrite.
 */
#ifndef PGDL_NN_H
#define PGDL_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

#define NN_MAX_LAYERS		256
#define NN_MAX_DIM			(1 << 20)	/* any one of C, H, W, units */
#define NN_MAX_KERNEL		64
#define NN_MAX_CHANNELS		65536
#define NN_MAX_ACT_PER_EX	((int64_t) 1 << 26) /* floats of one layer's output per example */
#define NN_MAX_PARAMS		((int64_t) 1 << 28) /* 1 GiB of float32 */
#define NN_MAX_BATCH		65536
#define NN_MAX_CLASSES		NN_MAX_DIM
#define NN_MAX_STEP			((int64_t) 1 << 53)	/* optimizer steps a model blob may declare */
#define NN_MAX_INPUTS		8	/* inputs of one layer (add, concat) */
#define NN_MAX_NAME			32	/* bytes of a layer's name, with its NUL */
#define NN_MAX_SCHEDULE_EPOCHS	1000000	/* epochs a schedule may count */

typedef enum NnLayerType
{
	NN_DENSE = 1,
	NN_CONV2D,
	NN_MAXPOOL2D,
	NN_AVGPOOL2D,
	NN_GLOBAL_AVGPOOL,
	NN_FLATTEN,
	NN_RELU,
	NN_LEAKY_RELU,
	NN_SIGMOID,
	NN_TANH,
	NN_DROPOUT,
	NN_BATCHNORM,
	NN_GELU,
	NN_LAYERNORM,				/* over a flat [features] input */
	NN_ADD,						/* elementwise sum of 2+ inputs of one shape */
	NN_CONCAT,					/* along channels ([C, H, W]) or features (flat) */
	NN_EMBEDDING,				/* ids [L] to a sequence [L, dim], plus a position's row with positions */
	NN_SOFTMAX,					/* over the last axis */
	NN_GRU,						/* as torch.nn.GRU, one layer, batch_first, h0 = 0 */
	NN_SLICE,					/* features [start, start + length) of a flat input, as torch.narrow */
	NN_ATTENTION,				/* multi-head self-attention over a sequence, as torch.nn.MultiheadAttention */
	NN_CONV1D,					/* over a sequence's steps; channels = features */
	NN_LAYER_TYPE_MAX			/* keep last */
} NnLayerType;

typedef enum NnInit
{
	NN_INIT_DEFAULT = 0,		/* He for dense/conv2d */
	NN_INIT_HE,					/* normal, std = sqrt(2 / fan_in) */
	NN_INIT_GLOROT				/* uniform, limit = sqrt(6 / (fan_in + fan_out)) */
} NnInit;

typedef enum NnLoss
{
	NN_LOSS_CROSS_ENTROPY = 1,	/* softmax fused; targets are class indices */
	NN_LOSS_MSE,				/* targets: one float per output */
	NN_LOSS_BCE,				/* sigmoid fused (on logits); targets in [0, 1] */
	NN_LOSS_HUBER,				/* as torch.nn.HuberLoss(delta); targets as mse's */
	NN_LOSS_MAX
} NnLoss;

/* A loss of regression: its outputs are values (predicted, evaluated and exported as mse's), not classes. */
static inline bool
nn_loss_is_regression(NnLoss loss)
{
	return loss == NN_LOSS_MSE || loss == NN_LOSS_HUBER;
}

typedef struct NnLayerSpec
{
	NnLayerType type;
	int32_t		units;			/* dense */
	int32_t		filters;		/* conv2d */
	int32_t		kernel;			/* conv2d, pools: window size */
	int32_t		stride;			/* conv2d (default 1), pools (default = kernel) */
	int32_t		padding;		/* conv2d; pools: before (top and left) */
	NnInit		init;			/* dense, conv2d */
	float		alpha;			/* leaky_relu negative slope */
	float		rate;			/* dropout probability of zeroing */
	float		eps;			/* batchnorm, layernorm */
	float		momentum;		/* batchnorm running-stat update, as in PyTorch */
	/* the graph form: which outputs the layer reads (see nn_layer_src) */
	int16_t		n_inputs;		/* 0: the layer before (a chain) */
	int16_t		inputs[NN_MAX_INPUTS];	/* a layer before it, or -1: the spec's input */
	char		name[NN_MAX_NAME];	/* "" when unnamed; what "inputs" refer to in JSON */
	int32_t		vocab;			/* embedding: ids are 0 .. vocab - 1 (its dim is in units) */
	bool		return_sequences;	/* gru: every step's state, not the last one's only */
	/* (these flags fill the bytes before the union: the struct keeps its size) */
	bool		ceil_mode;		/* pools: a last, partial window where the windows do not end at the edge */
	bool		count_pad;		/* avgpool2d: divides by the window's pads too (count_include_pad) */
	bool		over_steps;		/* softmax: over a sequence's steps, each feature alone (torch's dim=1) */
	union
	{
		int32_t		start;		/* slice: its first feature (its length is in units) */
		int32_t		steps;		/* flatten: 0, flat; or the sequence [steps, size / steps] it makes */
		int32_t		pad_end;	/* pools: padding after (bottom, right; "padding" is before) */
	};
	int32_t		heads;			/* attention: heads, dividing the features */
	bool		causal;			/* attention: a step attends to itself and the steps before it only */
	bool		per_step;		/* dense: on each step of a sequence, [L, F] to [L, units] */
	bool		positions;		/* embedding: adds a learned [steps, dim] table, one row per position */
	bool		log;			/* softmax: its logarithm, as torch's nn.LogSoftmax(dim=-1) */
	int32_t		groups;			/* conv2d: channel groups (depthwise: = channels); 0 (canonical) or 1: one */
} NnLayerSpec;

/* conv2d's channel groups, 1 for a blob or spec from before they existed (0) */
#define NN_GROUPS(l) ((l)->groups > 1 ? (l)->groups : 1)

typedef struct NnSpec
{
	int32_t		input_ndim;		/* 1: [features]; 3: [C, H, W] */
	int32_t		input[3];
	int32_t		n_layers;
	NnLoss		loss;
	float		delta;			/* huber: its delta (> 0); 0 for the other losses */
	NnLayerSpec layers[NN_MAX_LAYERS];
} NnSpec;

/* Inputs of layer i: 1 in a chain; add and concat take several. */
static inline int
nn_layer_n_inputs(const NnSpec *spec, int i)
{
	return spec->layers[i].n_inputs > 0 ? spec->layers[i].n_inputs : 1;
}

/* The producer of layer i's k-th input: a layer index, or -1 for the spec's input. */
static inline int
nn_layer_src(const NnSpec *spec, int i, int k)
{
	return spec->layers[i].n_inputs > 0 ? spec->layers[i].inputs[k] : i - 1;
}

/* Whether any layer reads other than the layer before it (a graph, not a chain). */
extern bool nn_spec_is_graph(const NnSpec *spec);
/* The columns of the spec's input that layer i reads (all, or a slice's); false if it reads another layer. */
extern bool nn_input_columns(const NnSpec *spec, int i, int64_t *start, int64_t *count);

/*
 * ndim 2 is a sequence [steps, features], step after step (as torch's
 * batch_first): c = steps, h = 1, w = features.  Only layers make sequences
 * (an embedding); a spec's input is flat or an image.
 */
typedef struct NnShape
{
	int32_t		ndim;			/* 1, 2 or 3 */
	int32_t		c, h, w;		/* ndim 1: c = features, h = w = 1 */
} NnShape;

#define NN_SHAPE_SIZE(s) ((int64_t) (s).c * (s).h * (s).w)
/* a layernorm's rows per example (a sequence's steps, or 1) and its features per row */
#define NN_NORM_ROWS(s) ((s).ndim == 2 ? (s).c : 1)
#define NN_NORM_FEATURES(s) ((s).ndim == 2 ? (s).w : (s).c)
/* The shape of layer i's (first) input, from shapes as nn_spec_validate fills them. */
#define NN_IN_SHAPE(shapes, spec, i) ((shapes)[nn_layer_src((spec), (i), 0) + 1])

/* Errors name the layer (or -1 for the spec as a whole) and the field at fault. */
typedef struct NnError
{
	int			layer;
	char		field[32];
	char		msg[256];
} NnError;

typedef enum NnOptType
{
	NN_OPT_SGD = 1,
	NN_OPT_ADAM,
	NN_OPT_ADAMW,
	NN_OPT_RMSPROP,
	NN_OPT_ADAGRAD,
	NN_OPT_MAX
} NnOptType;

/* Learning-rate schedules, stepped per epoch as torch.optim.lr_scheduler's usually are. */
typedef enum NnSchedule
{
	NN_SCHED_NONE = 0,			/* constant lr */
	NN_SCHED_STEP,				/* StepLR */
	NN_SCHED_COSINE,			/* CosineAnnealingLR over the run's epochs after warmup */
	NN_SCHED_MAX
} NnSchedule;

/*
 * Semantics follow torch.optim (SGD with dampening 0, Adam, AdamW, RMSprop,
 * Adagrad).  The settings of the optimizers added later share the slots of
 * those their optimizer has no use for (and a model blob writes them there):
 * rmsprop's alpha is beta2's, adagrad's lr_decay beta1's and its
 * initial_accumulator_value beta2's; rmsprop's centered is written where
 * nesterov is.  The configuration keys of one optimizer are refused with
 * another (spec_json.c), so that a slot holds one meaning.
 */
typedef struct NnOptim
{
	NnOptType	type;
	float		lr;
	float		momentum;		/* sgd, rmsprop */
	bool		nesterov;		/* sgd */
	bool		centered;		/* rmsprop */
	/*
	 * A training method (in padding: the struct keeps its size): the dense
	 * layers' products of training steps in bf16 with fp32 sums (gemm_bf16
	 * of kernels/backend.h); master weights, gradients, optimizer state and
	 * every other layer stay fp32, and so does inference.  Refused by
	 * nn_model_set_optim where the backend or the CPU has no bf16 products.
	 */
	bool		bf16;
	float		weight_decay;	/* L2 for sgd/adam/rmsprop/adagrad, decoupled for adamw */
	union
	{
		float		beta1;		/* adam, adamw */
		float		lr_decay;	/* adagrad */
	};
	union
	{
		float		beta2;		/* adam, adamw */
		float		alpha;		/* rmsprop: the square average's smoothing */
		float		initial_accumulator_value;	/* adagrad */
	};
	float		eps;			/* adam, adamw, rmsprop, adagrad */

	/*
	 * Training methods.  A configuration sets them before each sub-epoch (with
	 * the epoch the model is in); a model blob does not keep them.  Zero: off.
	 */
	NnSchedule	schedule;
	int32_t		step_size;		/* step: epochs between decays */
	float		gamma;			/* step: the decay factor */
	float		eta_min;		/* cosine: the lr it anneals to */
	int32_t		warmup_epochs;	/* linear warmup over epochs, then the schedule (SequentialLR) */
	int32_t		epochs;			/* the run's epochs (cosine's T_max is epochs - warmup_epochs) */
	int64_t		warmup_steps;	/* linear warmup over optimizer steps: a factor on the epoch's lr */
	float		warmup_start;	/* the warmup's first factor (LinearLR's start_factor) */
	float		clip_norm;		/* clip_grad_norm_ over all parameters before the update */
	float		label_smoothing;	/* cross_entropy in training steps */
	bool		no_decay_bias_norm; /* no weight decay on biases and norm layers' parameters */
	int32_t		epoch;			/* the 0-based epoch being trained */
} NnOptim;

typedef struct NnCost
{
	int64_t		params;
	int64_t		flops_forward;	/* per example */
	int64_t		flops_train;	/* per example: forward + backward + update */
	int64_t		act_floats;		/* output floats per example kept for backward */
} NnCost;

/* Bytes of host (or device) memory a model holds; see nn_spec_memory. */
typedef struct NnMemory
{
	int64_t		model;			/* the NnModel, parameters, gradients, running statistics */
	int64_t		optim;			/* optimizer state */
	int64_t		workspace;		/* activations, their gradients, saved state, scratch for a batch */
	int64_t		total;
} NnMemory;

struct NnBackend;

typedef struct NnModel
{
	NnSpec		spec;
	int32_t		last_n;			/* examples of the last forward pass (here: spec's size is 4 mod 8) */
	NnShape		shape[NN_MAX_LAYERS + 1];	/* shape[0]: input; shape[i + 1]: output of layer i */
	int64_t		param_off[NN_MAX_LAYERS];	/* offset of the layer's first parameter */
	int64_t		param_len[NN_MAX_LAYERS];
	int64_t		buffer_off[NN_MAX_LAYERS];	/* batchnorm running mean, then var */
	int64_t		buffer_len[NN_MAX_LAYERS];
	int64_t		n_params;
	int64_t		n_buffers;
	float	   *params;			/* one allocation: params | grads | buffers */
	float	   *grads;
	float	   *buffers;
	float	   *opt_state;		/* sgd: momentum (n_params); adam: m | v; rmsprop: square_avg [| momentum]
								 * [| grad_avg]; adagrad: sum */
	int64_t		n_opt_state;
	NnOptim		optim;			/* what opt_state belongs to; type 0 = none yet */
	int64_t		step;			/* optimizer steps taken; also the dropout counter */
	uint64_t	seed;

	/* Workspace for up to batch_cap examples; grown only by nn_model_reserve. */
	int32_t		batch_cap;
	int32_t		shard_first;	/* a thread's view of a batch: the example its examples start at */
	float	   *work;			/* one allocation, pointers below point into it */
	float	   *out[NN_MAX_LAYERS];	/* output of layer i, [batch, shape[i+1]] */
	float	   *dout[NN_MAX_LAYERS];	/* gradient w.r.t. out[i] */
	float	   *aux[NN_MAX_LAYERS];	/* per-layer saved state: argmax, batch mean/invstd */
	float	   *scratch;		/* im2col columns and the like */
	float	   *row_loss;		/* per-example losses of the last batch */
	float	   *dinput;			/* gradient w.r.t. the input when want_dinput */
	const float *last_input;	/* input of the last forward pass (last_n examples), for backward */
	const struct NnBackend *be;
	/* a device model's staging (see nn_model_use_backend); NULL on a host-memory backend */
	struct NnStaging *staging;
	bool		want_dinput;
	uint8_t		threads;		/* training threads (nn_model_set_threads); 0 or 1: the caller's only */
	bool		infer_grad;		/* backward differentiates the inference-mode forward (attribution.c) */
	/* the graph form (nn_model_layout): readers of each output, index producer + 1 (0: the input) */
	int16_t		consumers[NN_MAX_LAYERS + 1];
	uint8_t		grad_add[NN_MAX_LAYERS];	/* bit k: input k's gradient adds to what others wrote */
	float	   *gacc;			/* scratch for a gradient that is added, not written (batch_cap rows) */
	struct NnLossWeights *weights;	/* class and row weights of the loss (weights.c); NULL: none */
	/* (fields ordered so that the struct stays the size pgdl.estimate's memory_bytes counts) */
} NnModel;

/* Totals over batches: nn_model_loss, _train_step and _evaluate ADD into it; zero it first. */
typedef struct NnBatchStats
{
	double		loss_sum;		/* sum over examples of the per-example loss */
	int64_t		correct;		/* cross_entropy: argmax == label; bce: (p > .5) == t */
	int64_t		n;
} NnBatchStats;

/* spec.c */
extern const char *nn_layer_type_name(NnLayerType type);
extern NnLayerType nn_layer_type_from_name(const char *name);	/* 0 when unknown */
extern const char *nn_loss_name(NnLoss loss);
extern NnLoss nn_loss_from_name(const char *name);
extern const char *nn_optim_name(NnOptType type);
extern NnOptType nn_optim_from_name(const char *name);
extern void nn_layer_defaults(NnLayerSpec *layer, NnLayerType type);
extern bool nn_pool_counts_past_pads(const NnLayerSpec *l, int32_t in_h, int32_t in_w);
/* a window op's outputs along one dimension (0: the window does not fit) */
extern int32_t nn_window_out(int32_t in, int32_t kernel, int32_t stride, int32_t pad, int32_t pad_end,
							 bool ceil_mode);
extern void nn_optim_defaults(NnOptim *opt, NnOptType type);
extern bool nn_spec_validate(const NnSpec *spec, NnShape *shapes, NnError *err);
/* As nn_spec_validate, but an output no later layer reads yet is no error: a graph built a layer at a time */
extern bool nn_spec_validate_partial(const NnSpec *spec, NnShape *shapes, NnError *err);
extern bool nn_optim_validate(const NnOptim *opt, NnError *err);
extern const char *nn_schedule_name(NnSchedule s);
extern NnSchedule nn_schedule_from_name(const char *name);	/* 0 (none) for "none", -1 when unknown */
/* The lr of optimizer step `step` (1-based) taken in epoch opt->epoch: the schedule, then step warmup. */
extern double nn_optim_lr(const NnOptim *opt, int64_t step);
extern bool nn_spec_cost(const NnSpec *spec, NnCost *per_layer, NnCost *total, NnError *err);
extern int64_t nn_spec_output_size(const NnSpec *spec);	/* after validation */
extern void nn_error_set(NnError *err, int layer, const char *field, const char *fmt,...)
			__attribute__((format(printf, 4, 5)));

/* model.c */
extern NnModel *nn_model_create(const NnSpec *spec, uint64_t seed, NnError *err);
extern NnModel *nn_model_clone(const NnModel *m, NnError *err);
extern void nn_model_free(NnModel *m);
extern bool nn_model_reserve(NnModel *m, int32_t batch, NnError *err);
extern bool nn_model_set_optim(NnModel *m, const NnOptim *opt, NnError *err);
/* What a model of this spec allocates with optimizer opt (NULL: none) and a workspace for batch (0: none). */
extern bool nn_spec_memory(const NnSpec *spec, const NnOptim *opt, int32_t batch, NnMemory *mem,
						   NnError *err);
extern int64_t nn_model_input_size(const NnModel *m);
extern int64_t nn_model_output_size(const NnModel *m);
extern int64_t nn_model_target_size(const NnModel *m);	/* floats of y per example */
extern const float *nn_model_forward(NnModel *m, const float *x, int32_t n, bool training);
/* Inference through layers [0, upto) only: layer upto - 1's output, as a model cut there computes it. */
extern const float *nn_model_forward_upto(NnModel *m, const float *x, int32_t n, int upto);
extern bool nn_model_loss(NnModel *m, const float *y, int32_t n, NnBatchStats *stats, NnError *err);
extern void nn_model_backward(NnModel *m);
extern void nn_model_update(NnModel *m);
extern bool nn_model_train_step(NnModel *m, const float *x, const float *y, int32_t n,
								NnBatchStats *stats, NnError *err);
extern bool nn_model_evaluate(NnModel *m, const float *x, const float *y, int32_t n,
							  NnBatchStats *stats, NnError *err);
/*
 * Inputs a model can take: an embedding's ids must be whole numbers in
 * [0, vocab).  _train_step, _evaluate, _stage and _forward_frozen check it;
 * callers of nn_model_forward and _forward_upto check it first.
 */
extern bool nn_model_check_input(const NnModel *m, const float *x, int32_t n, NnError *err);

/*
 * Divergence.  _train_step_finite is nn_model_train_step, except that a batch
 * whose loss is NaN or infinite is not applied (no backward pass, no update,
 * nothing added to stats) and sets *finite to false; its forward pass ran, so
 * batchnorm's running statistics saw the batch.  _params_finite: no parameter
 * or running statistic is NaN or infinite (on any backend).
 */
extern bool nn_model_train_step_finite(NnModel *m, const float *x, const float *y, int32_t n,
									   NnBatchStats *stats, bool *finite, NnError *err);
extern bool nn_model_params_finite(const NnModel *m);

/*
 * weights.c: a weighted loss.  With class weights w[0 .. k) (k: the model's
 * classes, cross_entropy only; finite, >= 0; copied; NULL: none) an example of
 * class c weighs w[c]; nn_model_weigh_next's row_weights[i] (host memory, read
 * by the next training step or nn_model_stage, then forgotten; NULL: 1 each)
 * multiplies example i's.  A step then follows the gradient of
 * sum(w_i * l_i) / sum(w_i), as torch.nn.CrossEntropyLoss(weight = w) does
 * (a batch weighing 0 in all: no gradient); the loss it reports in
 * NnBatchStats stays unweighted.  Clones and serialized models have no
 * weights: they belong to a training, not to the model.
 */
extern bool nn_model_set_class_weights(NnModel *m, const float *w, int32_t k, NnError *err);
extern void nn_model_weigh_next(NnModel *m, const float *row_weights);

/*
 * Backends (kernels/backend.h).  A model lives on one backend: its parameters,
 * gradients, running statistics, optimizer state and workspace are that
 * backend's memory.  nn_model_create, _clone and _deserialize make CPU models;
 * nn_model_use_backend moves everything onto be (allocated once there, the old
 * memory released) and fails, leaving the model where it was, with the sizes
 * when be's memory does not suffice.  Whatever the backend, the inputs of
 * _forward, _train_step and _evaluate and the output _forward returns are host
 * memory, and serialization, cloning and slicing work as on the CPU.
 * On a device, nn_model_reserve also allocates device staging for a batch's
 * inputs and targets and a host buffer for _forward's output, once; m->dinput
 * and the other pointers into the model are the backend's memory.
 */
extern bool nn_model_use_backend(NnModel *m, const struct NnBackend *be, NnError *err);

/*
 * Staged training: nn_model_stage checks and copies a batch (host memory, free
 * to reuse on return) and on a device starts uploading it while the step
 * before still runs there; nn_model_train_staged then trains on it, the same
 * bytes as nn_model_train_step_finite on that batch (a NaN or infinite loss is
 * not applied and sets *finite to false).  One batch is staged at a time
 * (staging another replaces it); moving the model drops it.
 */
extern bool nn_model_stage(NnModel *m, const float *x, const float *y, int32_t n, NnError *err);
extern bool nn_model_train_staged(NnModel *m, NnBatchStats *stats, bool *finite, NnError *err);

/*
 * parallel.c: data parallelism inside a training step.  With threads > 1 on a
 * CPU model, a step splits its batch into that many contiguous shards, runs
 * forward and backward of each on its own thread (batchnorm layers on the
 * whole batch, between), sums the shards' parameter gradients in shard order
 * and applies one optimizer step: the same bytes for the same batch and thread
 * count, whatever the timing.  Threads run engine code only.  Evaluation,
 * inference and device models run on the caller's thread.  Fails (the model
 * as it was) when threads is not 1 .. NN_MAX_THREADS or a thread or the
 * per-thread workspace cannot be had.
 */
#define NN_MAX_THREADS		64
extern bool nn_model_set_threads(NnModel *m, int threads, NnError *err);
/* Bytes the threads beyond the first add to a model's workspace for batches of `batch`. */
extern bool nn_spec_thread_memory(const NnSpec *spec, int32_t batch, int threads, int64_t *bytes, NnError *err);

/*
 * transfer.c: a frozen prefix and a trainable rest.  The slice copies layers
 * [from, to) with their parameters and running statistics; the join is prefix
 * then rest, with the rest's optimizer state (fresh state, zeros or adagrad's
 * initial_accumulator_value, for the frozen parameters).
 */
#define NN_FROZEN_CHUNK		256	/* examples per forward pass of a frozen prefix */
extern NnModel *nn_model_slice(const NnModel *m, int from, int to, uint64_t seed, NnError *err);
extern NnModel *nn_model_join(const NnModel *prefix, const NnModel *rest, NnError *err);
/* Layers [from, end) with their optimizer state, step and seed: what nn_model_join joined as the rest. */
extern NnModel *nn_model_slice_trained(const NnModel *m, int from, NnError *err);
extern bool nn_model_copy_layers(NnModel *dst, int dst_from, const NnModel *src, int src_from,
								 int count, NnError *err);
/* Inference-mode outputs of n examples into out, NN_FROZEN_CHUNK at a time: the same bytes for any caller. */
extern bool nn_model_forward_frozen(NnModel *m, const float *x, int32_t n, float *out, NnError *err);

/*
 * attribution.c: explanations of a prediction.  f is one number of the
 * inference-mode network (dropout off, batch normalization's running
 * statistics): a raw output (NN_EXPLAIN_OUTPUT) or the probability the model
 * gives it (NN_EXPLAIN_PROBABILITY: softmax over the outputs for
 * cross_entropy, the output's sigmoid for binary_cross_entropy; none for mse).
 * Inputs, outputs and attributions are host memory; the model must be on a
 * host-memory backend.  The parameters, running statistics and optimizer
 * state are untouched; the parameter gradients are overwritten (each training
 * step writes them anew) and the workspace keeps the input's gradient
 * (want_dinput).
 *
 * _input_gradient: f of n examples x (f may be NULL) and df/dx into grad
 * (n x input size); a column an embedding reads (an id) gets 0.
 * _integrated_gradients: one example x from baseline b, Gauss-Legendre
 * quadrature over `steps` points t_k (weights w_k) of the straight path,
 * attr[j] = (x_j - b_j) times the sum of w_k df/dx_j at b + t_k (x - b) (one
 * step: the midpoint's gradient); a column an embedding reads runs its path
 * in the embedding's output space (from b's ids' vectors to x's) and gets the
 * sum over its vector of (e_x - e_b) times the weighted gradient there.  fx and fb: f
 * at x and b, so that sum(attr) approximates fx - fb (completeness).
 */
#define NN_MAX_EXPLAIN_STEPS	4096
typedef enum NnExplainTarget
{
	NN_EXPLAIN_OUTPUT = 0,
	NN_EXPLAIN_PROBABILITY
} NnExplainTarget;
extern bool nn_explain_target_valid(const NnModel *m, int32_t output, NnExplainTarget target, NnError *err);
extern bool nn_model_input_gradient(NnModel *m, const float *x, int32_t n, int32_t output, NnExplainTarget target,
									float *f, float *grad, NnError *err);
extern bool nn_model_integrated_gradients(NnModel *m, const float *x, const float *b, int32_t steps,
										  int32_t output, NnExplainTarget target, float *attr, double *fx,
										  double *fb, NnError *err);

/* serialize.c */
#define NN_FORMAT_MAGIC		"PGDLMDL1"
#define NN_FORMAT_VERSION	1
#define NN_FORMAT_VERSION_GRAPH	2	/* version 1 and each layer's inputs and name */
#define NN_FORMAT_VERSION_LOSS	3	/* version 2 and the loss's parameter (huber's delta) */
extern size_t nn_model_serialized_size(const NnModel *m);
extern void nn_model_serialize(const NnModel *m, uint8_t *buf);
extern NnModel *nn_model_deserialize(const uint8_t *buf, size_t len, NnError *err);
/* A blob's spec and optimizer settings, nothing allocated: for nn_spec_memory before deserializing. */
extern bool nn_model_blob_spec(const uint8_t *buf, size_t len, NnSpec *spec, NnOptim *opt, NnError *err);
extern uint32_t nn_crc32(uint32_t crc, const uint8_t *data, size_t len);

/*
 * All a blob holds but its floats: seed, step, the counts (each its spec's)
 * and the optimizer's settings.  For a caller that compares two blobs of one
 * model, as a coordinator compares what a node returned with what it sent.
 */
typedef struct NnBlobSummary
{
	uint64_t	seed;
	int64_t		step;
	int64_t		n_params;
	int64_t		n_buffers;
	int64_t		n_opt_state;
	NnOptim		optim;			/* its settings only; type 0: none */
} NnBlobSummary;
/*
 * Every check of nn_model_deserialize, no model allocated: for the catalog's
 * writers, and a coordinator's summary (may be NULL) of a node's model.
 */
extern bool nn_model_blob_check(const uint8_t *buf, size_t len, NnSpec *spec, NnBlobSummary *summary,
								NnError *err);

/* rng.c: counter-based, so a value depends on (seed, stream, counter) only */
extern uint64_t nn_rng_u64(uint64_t seed, uint64_t stream, uint64_t counter);
extern float nn_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter);	/* [0, 1) */
extern float nn_rng_normal(uint64_t seed, uint64_t stream, uint64_t counter);
extern void nn_rng_permutation(uint64_t seed, uint64_t stream, int32_t n, int32_t *out);

/* The order in which a model with this seed visits n partitions in an epoch. */
#define NN_EPOCH_ORDER_STREAM(epoch) (UINT64_C(0x65706f6368) + (uint64_t) (epoch))

#ifdef __cplusplus
}
#endif

#endif							/* PGDL_NN_H */
