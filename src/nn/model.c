/*
 * model.c -- a model: validated spec, parameters, optimizer state, workspace;
 * and the training step built from the layers.
 *
 * Parameters, gradients and running statistics share one allocation sized at
 * creation; activations and their gradients share another sized by
 * nn_model_reserve.  A training step allocates nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "nn_internal.h"

static bool
safe_floats(int64_t n, size_t *bytes)
{
	if (n < 0 || (uint64_t) n > SIZE_MAX / sizeof(float))
		return false;
	*bytes = (size_t) n * sizeof(float);
	return true;
}

/*
 * The graph form's bookkeeping: how many inputs read each output, and which
 * inputs' gradients add to what a later reader (backward runs in reverse spec
 * order) already wrote.  In a chain every output has one reader that writes.
 */
static void
graph_layout(NnModel *m)
{
	const NnSpec *s = &m->spec;

	memset(m->consumers, 0, sizeof(m->consumers));
	memset(m->grad_add, 0, sizeof(m->grad_add));
	for (int i = s->n_layers - 1; i >= 0; i--)
		for (int k = 0; k < nn_layer_n_inputs(s, i); k++)
		{
			int			p = nn_layer_src(s, i, k) + 1;

			if (m->consumers[p]++ > 0)
				m->grad_add[i] |= (uint8_t) (1 << k);
		}
}

/*
 * Validate the spec and lay the parameters out in m (zeroed): what
 * nn_model_alloc allocates and nn_spec_memory counts, without allocating.
 */
bool
nn_model_layout(NnModel *m, const NnSpec *spec, NnError *err)
{
	int64_t		off = 0,
				boff = 0;

	memcpy(&m->spec, spec, sizeof(NnSpec));
	/* unused layer slots stay zero, so that equal specs serialize identically */
	if (spec->n_layers >= 0 && spec->n_layers < NN_MAX_LAYERS)
		memset(&m->spec.layers[spec->n_layers], 0,
			   sizeof(NnLayerSpec) * (NN_MAX_LAYERS - spec->n_layers));
	if (!nn_spec_validate(&m->spec, m->shape, err))
		return false;
	graph_layout(m);
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		const NnLayerSpec *l = &m->spec.layers[i];
		NnShape		ins = NN_IN_SHAPE(m->shape, &m->spec, i);
		int64_t		in = NN_SHAPE_SIZE(ins);

		m->param_off[i] = off;
		m->buffer_off[i] = boff;
		switch (l->type)
		{
			case NN_DENSE:
				m->param_len[i] = (l->per_step ? ins.w : in) * l->units + l->units;
				break;
			case NN_CONV2D:
				m->param_len[i] = (int64_t) l->filters * (ins.c / NN_GROUPS(l)) * l->kernel * l->kernel + l->filters;
				break;
			case NN_BATCHNORM:
				m->param_len[i] = 2 * (int64_t) ins.c;
				m->buffer_len[i] = 2 * (int64_t) ins.c;
				break;
			case NN_LAYERNORM:
				m->param_len[i] = 2 * (int64_t) NN_NORM_FEATURES(ins);
				break;
			case NN_EMBEDDING:
				/* the table, then with positions one row per step */
				m->param_len[i] = ((int64_t) l->vocab + (l->positions ? ins.c : 0)) * l->units;
				break;
			case NN_GRU:
				m->param_len[i] = 3 * (int64_t) l->units * (ins.w + l->units + 2);
				break;
			case NN_ATTENTION:
				m->param_len[i] = 4 * (int64_t) ins.w * (ins.w + 1);
				break;
			case NN_CONV1D:
				m->param_len[i] = (int64_t) l->filters * ins.w * l->kernel + l->filters;
				break;
			default:
				break;
		}
		off += m->param_len[i];
		boff += m->buffer_len[i];
	}
	m->n_params = off;
	m->n_buffers = boff;
	return true;
}

/* Validate the spec, lay the parameters out and allocate them (uninitialized). */
NnModel *
nn_model_alloc(const NnSpec *spec, NnError *err)
{
	NnModel    *m;
	size_t		bytes;

	m = calloc(1, sizeof(NnModel));
	if (m == NULL)
	{
		nn_error_set(err, -1, "", "out of memory");
		return NULL;
	}
	m->be = nn_backend_cpu();
	if (!nn_model_layout(m, spec, err))
	{
		free(m);
		return NULL;
	}
	if (!safe_floats(2 * m->n_params + m->n_buffers, &bytes) || (m->params = m->be->alloc(bytes)) == NULL)
	{
		nn_error_set(err, -1, "", "out of memory allocating %lld parameters", (long long) m->n_params);
		free(m);
		return NULL;
	}
	memset(m->params, 0, bytes);
	m->grads = m->params + m->n_params;
	m->buffers = m->grads + m->n_params;
	return m;
}

NnModel *
nn_model_create(const NnSpec *spec, uint64_t seed, NnError *err)
{
	NnModel    *m = nn_model_alloc(spec, err);

	if (m == NULL)
		return NULL;
	m->seed = seed;
	for (int i = 0; i < m->spec.n_layers; i++)
		nn_layer_init_params(m, i);
	return m;
}

static void
staging_free(const NnBackend *be, NnStaging *st)
{
	if (st != NULL)
	{
		free(st->host_out);
		be->host_release(st->host_batch);
	}
	free(st);
}

void
nn_model_free(NnModel *m)
{
	if (m == NULL)
		return;
	m->be->wait_uploads();		/* none may still land in what is released */
	m->be->release(m->params);
	m->be->release(m->opt_state);
	m->be->release(m->work);
	staging_free(m->be, m->staging);
	nn_weights_free(m);
	free(m);
}

/*
 * Bytes from one backend's memory to another's (or within one): through the
 * host when neither is host memory, a bounded chunk at a time.
 */
bool
nn_copy_across(const NnBackend *dst_be, void *dst, const NnBackend *src_be, const void *src,
			   size_t bytes)
{
	char		bounce[16384];

	if (bytes == 0)
		return true;
	if (dst_be == src_be)
		dst_be->copy(dst, src, bytes);
	else if (src_be->host_memory)
		dst_be->upload(dst, src, bytes);
	else if (dst_be->host_memory)
		src_be->download(dst, src, bytes);
	else
		for (size_t at = 0; at < bytes; at += sizeof(bounce))
		{
			size_t		len = bytes - at < sizeof(bounce) ? bytes - at : sizeof(bounce);

			src_be->download(bounce, (const char *) src + at, len);
			dst_be->upload((char *) dst + at, bounce, len);
		}
	return true;
}

/* A CPU model, whatever backend src lives on. */
NnModel *
nn_model_clone(const NnModel *src, NnError *err)
{
	NnModel    *m = nn_model_alloc(&src->spec, err);

	if (m == NULL)
		return NULL;
	m->seed = src->seed;
	m->step = src->step;
	nn_copy_across(m->be, m->params, src->be, src->params,
				   sizeof(float) * (2 * src->n_params + src->n_buffers));
	if (src->optim.type != 0)
	{
		if (!nn_model_set_optim(m, &src->optim, err))
		{
			nn_model_free(m);
			return NULL;
		}
		nn_copy_across(m->be, m->opt_state, src->be, src->opt_state,
					   sizeof(float) * src->n_opt_state);
	}
	return m;
}

int64_t
nn_model_input_size(const NnModel *m)
{
	return NN_SHAPE_SIZE(m->shape[0]);
}

int64_t
nn_model_output_size(const NnModel *m)
{
	return NN_SHAPE_SIZE(m->shape[m->spec.n_layers]);
}

int64_t
nn_model_target_size(const NnModel *m)
{
	return m->spec.loss == NN_LOSS_CROSS_ENTROPY ? 1 : nn_model_output_size(m);
}

/* Where each part of a workspace starts, in floats from its beginning. */
typedef struct WorkLayout
{
	int64_t		out[NN_MAX_LAYERS];	/* a layer's output, then its gradient */
	int64_t		aux[NN_MAX_LAYERS];	/* its saved state */
	int64_t		scratch;		/* im2col columns */
	int64_t		row_loss;		/* per-example losses */
	int64_t		dinput;			/* the input's gradient, when wanted */
	int64_t		gacc;			/* a gradient to add (graph form): the largest output read twice */
	int64_t		stage_x;		/* a device model's staged inputs and targets: two slots */
	int64_t		stage_y;
	int64_t		stage_x2;
	int64_t		stage_y2;
	int64_t		threads;		/* a CPU model's per-thread areas (parallel.c), threads 1 .. */
	int64_t		total;
} WorkLayout;

/*
 * The workspace for batches of `batch` examples: each layer's output and its
 * gradient, 16-float aligned so each starts on a cache line, and its saved
 * state; then the largest layer's scratch, the losses and the input's gradient;
 * on a device (staged), the batch's inputs and targets.
 */
static void
workspace_layout(const NnModel *m, int32_t batch, bool staged, WorkLayout *w)
{
	int64_t		total = 0,
				scratch = 0,
				gacc = 0,
				in = nn_model_input_size(m),
				dx = m->want_dinput ? (int64_t) batch * in : 0,
				xs = ((int64_t) batch * in + 15) & ~(int64_t) 15,
				ys = ((int64_t) batch * nn_model_target_size(m) + 15) & ~(int64_t) 15;

	for (int i = 0; i < m->spec.n_layers; i++)
	{
		int64_t		n = ((int64_t) batch * NN_SHAPE_SIZE(m->shape[i + 1]) + 15) & ~(int64_t) 15;
		int64_t		s = nn_layer_scratch_floats(m, i, batch);

		w->out[i] = total;
		if (!nn_layer_in_place(m, i))
			total += 2 * n;
		w->aux[i] = total;
		total += (nn_layer_aux_floats(m, i, batch) + 15) & ~(int64_t) 15;
		if (s > scratch)
			scratch = s;
	}
	for (int p = 0; p <= m->spec.n_layers; p++)
		if (m->consumers[p] > 1 && NN_SHAPE_SIZE(m->shape[p]) > gacc)
			gacc = NN_SHAPE_SIZE(m->shape[p]);
	gacc = ((int64_t) batch * gacc + 15) & ~(int64_t) 15;
	w->scratch = total;
	w->row_loss = w->scratch + ((scratch + 15) & ~(int64_t) 15);
	w->dinput = w->row_loss + ((batch + 15) & ~15);
	w->gacc = w->dinput + ((dx + 15) & ~(int64_t) 15);
	w->stage_x = w->gacc + gacc;
	w->stage_y = w->stage_x + xs;
	w->stage_x2 = w->stage_y + ys;
	w->stage_y2 = w->stage_x2 + xs;
	w->threads = w->gacc + gacc;
	w->total = staged ? w->stage_y2 + ys :
		m->threads > 1 ? w->threads + (m->threads - 1) * nn_parallel_area_floats(m, batch) :
		gacc > 0 ? w->gacc + gacc : w->dinput + dx;
}

static inline bool
staged(const NnModel *m)
{
	return !m->be->host_memory;
}

/* The per-thread areas of a CPU model that trains with threads (parallel.c). */
float *
nn_model_thread_areas(const NnModel *m)
{
	WorkLayout	w;

	workspace_layout(m, m->batch_cap, staged(m), &w);
	return m->work + w.threads;
}

/* Whether a training step on n examples runs on the model's threads. */
static inline bool
step_parallel(const NnModel *m, int32_t n)
{
	return m->threads > 1 && m->be->host_memory && n > 1;
}

/* Point the model into a workspace of this layout for batches of `batch`. */
static void
workspace_point(NnModel *m, float *work, int32_t batch, const WorkLayout *w)
{
	m->work = work;
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		int64_t		n = ((int64_t) batch * NN_SHAPE_SIZE(m->shape[i + 1]) + 15) & ~(int64_t) 15;

		if (nn_layer_in_place(m, i))
		{
			m->out[i] = m->out[i - 1];
			m->dout[i] = m->dout[i - 1];
		}
		else
		{
			m->out[i] = work + w->out[i];
			m->dout[i] = work + w->out[i] + n;
		}
		m->aux[i] = nn_layer_aux_floats(m, i, batch) > 0 ? work + w->aux[i] : NULL;
	}
	m->scratch = work + w->scratch;
	m->row_loss = work + w->row_loss;
	m->dinput = m->want_dinput ? work + w->dinput : NULL;
	m->gacc = work + w->gacc;
	if (!m->be->host_memory)
	{
		m->staging->x = work + w->stage_x;
		m->staging->y = work + w->stage_y;
		m->staging->next_x = work + w->stage_x2;
		m->staging->next_y = work + w->stage_y2;
	}
	m->batch_cap = batch;
	m->last_input = NULL;
	m->last_n = 0;
}

/*
 * The staged batch (in host_batch) into the device's next slot, as an upload
 * that overlaps the device's work (async) or at once.
 */
static void
upload_staged(NnModel *m, bool async)
{
	NnStaging  *st = m->staging;
	size_t		xb = sizeof(float) * st->staged_n * nn_model_input_size(m),
				yb = sizeof(float) * st->staged_n * nn_model_target_size(m);
	void		(*up) (void *, const void *, size_t) = async ? m->be->upload_async : m->be->upload;

	up(st->next_x, st->host_batch, xb);
	up(st->next_y, (const char *) st->host_batch + xb, yb);
}

/* A host buffer of at least `floats` for a device model's outputs, grown rarely. */
static bool
staging_host_out(NnStaging *st, int64_t floats)
{
	float	   *buf;
	size_t		bytes;

	if (floats <= st->host_out_floats)
		return true;
	if (!safe_floats(floats, &bytes) || (buf = malloc(bytes > 0 ? bytes : 1)) == NULL)
		return false;
	free(st->host_out);
	st->host_out = buf;
	st->host_out_floats = floats;
	return true;
}

/*
 * Size the workspace for batches of up to `batch` examples.  Called before
 * training starts (and by a step that finds its batch too large), never per step
 * in steady state.
 */
bool
nn_model_reserve(NnModel *m, int32_t batch, NnError *err)
{
	WorkLayout	w;
	size_t		bytes = 0;
	float	   *work;

	if (batch < 1 || batch > NN_MAX_BATCH)
	{
		nn_error_set(err, -1, "batch_size", "batch size must be between 1 and %d, got %d",
					 NN_MAX_BATCH, (int) batch);
		return false;
	}
	if (batch <= m->batch_cap && (!m->want_dinput || m->dinput != NULL))
		return true;

	workspace_layout(m, batch, staged(m), &w);
	if (!safe_floats(w.total, &bytes) || (work = m->be->alloc(bytes)) == NULL)
	{
		nn_error_set(err, -1, "batch_size", "out of %s memory reserving a workspace of %zu bytes for batches of %d",
					 m->be->name, bytes, (int) batch);
		return false;
	}
	if (staged(m) && !staging_host_out(m->staging, (int64_t) batch * nn_model_output_size(m)))
	{
		m->be->release(work);
		nn_error_set(err, -1, "batch_size", "out of memory reserving host staging for batches of %d", (int) batch);
		return false;
	}
	m->be->wait_uploads();		/* a staged batch may still be landing in the old workspace */
	m->be->release(m->work);
	workspace_point(m, work, batch, &w);
	/* a staged batch moves with the workspace */
	if (staged(m) && m->staging->staged_n > 0)
		upload_staged(m, false);
	return true;
}

/*
 * sgd: a momentum buffer when it has momentum; adam, adamw: m and v; rmsprop:
 * square_avg, a momentum buffer when it has momentum, grad_avg when centered;
 * adagrad: the sum.
 */
static int64_t
optim_state_floats(const NnOptim *opt, int64_t n_params)
{
	if (opt == NULL || opt->type == 0)
		return 0;
	switch (opt->type)
	{
		case NN_OPT_SGD:
			return opt->momentum > 0.0f ? n_params : 0;
		case NN_OPT_RMSPROP:
			return (1 + (opt->momentum > 0.0f) + opt->centered) * n_params;
		case NN_OPT_ADAGRAD:
			return n_params;
		default:
			return 2 * n_params;
	}
}

/*
 * Whether state kept for optimizer a means the same to b: the same type, and
 * for rmsprop the same slices (a momentum buffer of one is not the other's
 * grad_avg).
 */
static bool
optim_state_same(const NnOptim *a, const NnOptim *b)
{
	if (a->type != b->type)
		return false;
	return a->type != NN_OPT_RMSPROP || ((a->momentum > 0.0f) == (b->momentum > 0.0f) && a->centered == b->centered);
}

/*
 * An optimizer a model laid out in m (nn_model_layout) may have, and the
 * floats of state it keeps: nn_model_set_optim's rule, nothing allocated.
 */
bool
nn_model_optim_fits(const NnModel *m, const NnOptim *opt, int64_t *n_state, NnError *err)
{
	if (!nn_optim_validate(opt, err))
		return false;
	if (opt->label_smoothing > 0.0f && m->spec.loss != NN_LOSS_CROSS_ENTROPY)
	{
		nn_error_set(err, -1, "label_smoothing", "\"label_smoothing\" applies to the cross_entropy loss only, the model's loss is %s",
					 nn_loss_name(m->spec.loss));
		return false;
	}
	*n_state = optim_state_floats(opt, m->n_params);
	return true;
}

/* Whether backend be can train in bf16 here: it has the products, and on the CPU the CPU has them. */
static bool
bf16_runs_on(const NnBackend *be, NnError *err)
{
	if (be->gemm_bf16 == NULL)
	{
		nn_error_set(err, -1, "precision", "the %s backend has no bf16 products", be->name);
		return false;
	}
	if (be->host_memory && !nn_cpu_bf16())
	{
		nn_error_set(err, -1, "precision", "bf16 products need the CPU feature AVX512_BF16 and avx512 kernels; "
					 "this CPU %s it, the kernels run %s", nn_cpu_has_bf16() ? "has" : "lacks",
					 nn_cpu_isa_name(nn_cpu_isa()));
		return false;
	}
	return true;
}

/*
 * bf16 on or off: a dense layer's scratch holds its packed bf16 operands
 * (nn_layer_scratch_floats), so a reserved workspace is laid out again.
 */
static bool
set_precision(NnModel *m, bool bf16, NnError *err)
{
	int32_t		cap = m->batch_cap;

	if (m->optim.bf16 == bf16)
		return true;
	if (bf16 && !bf16_runs_on(m->be, err))
		return false;
	m->optim.bf16 = bf16;
	if (cap > 0)
	{
		m->batch_cap = 0;
		if (!nn_model_reserve(m, cap, err))
		{
			m->optim.bf16 = !bf16;
			m->batch_cap = cap;
			return false;
		}
	}
	return true;
}

/*
 * Adopt an optimizer.  State is kept when the type stays the same (a new
 * learning rate, say), and started afresh when it changes: zeros, or
 * adagrad's initial_accumulator_value.
 */
bool
nn_model_set_optim(NnModel *m, const NnOptim *opt, NnError *err)
{
	int64_t		n_state;
	size_t		bytes;

	if (!nn_model_optim_fits(m, opt, &n_state, err) || !set_precision(m, opt->bf16, err))
		return false;
	if (!optim_state_same(&m->optim, opt) || n_state != m->n_opt_state)
	{
		float	   *state = NULL;

		if (n_state > 0)
		{
			if (!safe_floats(n_state, &bytes) || (state = m->be->alloc(bytes)) == NULL)
			{
				nn_error_set(err, -1, "optimizer", "out of memory allocating optimizer state");
				return false;
			}
			m->be->fill(state, opt->type == NN_OPT_ADAGRAD ? opt->initial_accumulator_value : 0.0f, n_state);
		}
		m->be->release(m->opt_state);
		m->opt_state = state;
		m->n_opt_state = n_state;
	}
	m->optim = *opt;
	return true;
}

/*
 * The bytes nn_model_create (or _deserialize), nn_model_set_optim(opt) and
 * nn_model_reserve(batch) allocate for a model of this spec, from the same
 * layout they use; opt NULL (or of type 0) for none, batch 0 for no workspace.
 * Allocates nothing large.
 */
bool
nn_spec_memory(const NnSpec *spec, const NnOptim *opt, int32_t batch, NnMemory *mem, NnError *err)
{
	NnModel    *m;

	if (batch < 0 || batch > NN_MAX_BATCH)
	{
		nn_error_set(err, -1, "batch_size", "batch size must be between 1 and %d, got %d",
					 NN_MAX_BATCH, (int) batch);
		return false;
	}
	m = calloc(1, sizeof(NnModel));
	if (m == NULL)
	{
		nn_error_set(err, -1, "", "out of memory");
		return false;
	}
	if (!nn_model_layout(m, spec, err))
	{
		free(m);
		return false;
	}
	m->optim.bf16 = opt != NULL && opt->bf16;	/* a dense layer's scratch depends on it */
	mem->model = (int64_t) sizeof(NnModel) + 4 * (2 * m->n_params + m->n_buffers);
	mem->optim = 4 * optim_state_floats(opt, m->n_params);
	mem->workspace = 0;
	if (batch > 0)
	{
		WorkLayout	w;

		workspace_layout(m, batch, false, &w);
		mem->workspace = 4 * w.total;
	}
	mem->total = mem->model + mem->optim + mem->workspace;
	free(m);
	return true;
}

/*
 * The end (exclusive) of the run of chunkable layers starting at i, and the
 * number of images to push through it at a time.
 */
static int
segment_end(const NnModel *m, int i, int upto, int n, int *chunk)
{
	int			j = i;
	int64_t		per_image = 0;

	/*
	 * Not from an in-place layer: its input's gradient is its output's buffer,
	 * whose front the next layer's chunks write, over the gradients of the
	 * chunks before (bn -> relu -> conv lost them).  It runs alone instead.
	 */
	if (i < upto && nn_layer_in_place(m, i))
	{
		*chunk = n;
		return i;
	}

	/* a run is a chain: each layer reads the one before (nn_layer_chunkable: and only it reads that) */
	while (j < upto && nn_layer_chunkable(m, j) && (j == i || nn_layer_src(&m->spec, j, 0) == j - 1))
	{
		if (!nn_layer_in_place(m, j))
			per_image += 2 * NN_SHAPE_SIZE(m->shape[j + 1]);
		per_image += nn_layer_scratch_floats(m, j, 1);
		j++;
	}
	*chunk = per_image > 0 ? (int) (NN_SEGMENT_CHUNK_FLOATS / per_image) : n;
	if (*chunk < 1)
		*chunk = 1;
	if (*chunk > n)
		*chunk = n;
	return j;
}

static const float *forward_pass(NnModel *m, const float *x, int32_t n, int upto, bool training,
								 bool x_staged);

/* The outputs of layer upto - 1 as host memory: a device model downloads them. */
static const float *
host_output(NnModel *m, const float *out, int32_t n, int upto)
{
	int64_t		floats = (int64_t) n * NN_SHAPE_SIZE(m->shape[upto]);

	if (out == NULL || !staged(m))
		return out;
	if (!staging_host_out(m->staging, floats))
		return NULL;
	m->be->download(m->staging->host_out, out, sizeof(float) * floats);
	return m->staging->host_out;
}

const float *
nn_model_forward(NnModel *m, const float *x, int32_t n, bool training)
{
	unsigned int fp = nn_fp_enter();
	const float *out = forward_pass(m, x, n, m->spec.n_layers, training, false);

	out = host_output(m, out, n, m->spec.n_layers);
	nn_fp_leave(fp);
	return out;
}

const float *
nn_model_forward_upto(NnModel *m, const float *x, int32_t n, int upto)
{
	unsigned int fp;
	const float *out;

	if (upto < 1 || upto > m->spec.n_layers)
		return NULL;
	fp = nn_fp_enter();
	out = host_output(m, forward_pass(m, x, n, upto, false, false), n, upto);
	nn_fp_leave(fp);
	return out;
}

/* Examples per sub-batch of an inference pass through layers [0, upto): see NN_INFER_CHUNK_FLOATS. */
static int
inference_chunk(const NnModel *m, int upto, int n)
{
	int64_t		per_example = 0;
	int64_t		chunk;

	for (int i = 0; i < upto; i++)
		per_example += NN_SHAPE_SIZE(m->shape[i + 1]);
	chunk = NN_INFER_CHUNK_FLOATS / (per_example > 0 ? per_example : 1);
	return chunk < 1 ? 1 : chunk > n ? n : (int) chunk;
}

/*
 * Layers [0, upto): a model cut after layer upto - 1 runs exactly these steps.
 * In inference, sub-batches of inference_chunk examples from the last to the
 * first: each writes the front of every buffer and moves its outputs to their
 * place in the last layer's, behind the front (buffers alias only in place,
 * output for output); the first sub-batch's stay where they are.  Examples do
 * not interact in inference, so the outputs are those of one pass.  A device
 * model first uploads the caller's x (host memory) into its staging, unless
 * x_staged says x is there already.
 */
static const float *
forward_pass(NnModel *m, const float *x, int32_t n, int upto, bool training, bool x_staged)
{
	int			chunk;
	int64_t		in_size = NN_SHAPE_SIZE(m->shape[0]),
				out_size = NN_SHAPE_SIZE(m->shape[upto]);

	if (n > m->batch_cap && !nn_model_reserve(m, n, NULL))
		return NULL;
	if (staged(m) && !x_staged)
	{
		m->be->upload(m->staging->x, x, sizeof(float) * n * in_size);
		x = m->staging->x;
	}
	chunk = training || n < 2 ? n : inference_chunk(m, upto, n);
	for (int s = chunk < n ? ((n - 1) / chunk) * chunk : 0; s > 0; s -= chunk)
	{
		int			c = n - s < chunk ? n - s : chunk;

		nn_forward_layers(m, x + s * in_size, c, 0, upto, false);
		/* from [0, c) to [s, s + c) with s >= chunk >= c: no overlap */
		m->be->copy(m->out[upto - 1] + s * out_size, m->out[upto - 1], sizeof(float) * c * out_size);
	}
	nn_forward_layers(m, x, chunk, 0, upto, training);
	m->last_input = x;
	m->last_n = n;
	return m->out[upto - 1];
}

/*
 * Layers [from, upto) on examples [0, n) of the buffers; x is the input of
 * layer 0.  A range ends where a run of chunkable layers does (at a layer
 * that is not chunkable, or at the end), so that its chunks are those of the
 * whole pass.
 */
void
nn_forward_layers(NnModel *m, const float *x, int32_t n, int from, int upto, bool training)
{
	m->last_input = x;
	m->last_n = n;
	for (int i = from; i < upto;)
	{
		int			chunk,
					end = segment_end(m, i, upto, n, &chunk);

		if (end == i)
		{
			nn_layer_forward(m, i, nn_layer_input(m, i), 0, n, training);
			i++;
			continue;
		}
		for (int s = 0; s < n; s += chunk)
		{
			int			c = n - s < chunk ? n - s : chunk;

			for (int k = i; k < end; k++)
				nn_layer_forward(m, k, nn_layer_input(m, k) + s * NN_SHAPE_SIZE(NN_IN_SHAPE(m->shape, &m->spec, k)),
								 s, c, training);
		}
		i = end;
	}
}

/*
 * Cross-entropy targets are class indices and are checked here (in the
 * caller's host memory), before any of them is used as an index.
 */
static bool
check_labels(NnModel *m, const float *y, int32_t n, NnError *err)
{
	int64_t		k = nn_model_output_size(m);

	for (int r = 0; r < n; r++)
	{
		float		label = y[r];

		if (!(label >= 0.0f && label < (float) k && label == floorf(label)))
		{
			nn_error_set(err, -1, "y", "class label %g of example %d is not an integer between 0 and %lld",
						 (double) label, r, (long long) k - 1);
			return false;
		}
	}
	return true;
}

/* a / count in float, as the unweighted loss always computed it; 0 for a batch that weighs nothing */
static float
loss_scale(double a, double count)
{
	return count > 0.0 ? (float) a / (float) count : 0.0f;
}

/*
 * The loss of the last forward pass against targets y; writes the gradient of
 * the mean loss into the last layer's dout.  The backend computes the loss and
 * the batch's metrics; only those two numbers come back.  y is host memory
 * unless y_staged: a staged batch's targets, on the device and checked.  hw:
 * the examples' weights (host memory, summing to wsum; weights.c), or NULL.
 */
static bool
model_loss(NnModel *m, const float *y, int32_t n, bool y_staged, bool training, const float *hw, double wsum,
		   NnBatchStats *stats, NnError *err)
{
	float		smoothing = training ? m->optim.label_smoothing : 0.0f;
	int			L = m->spec.n_layers;
	int			k = (int) nn_model_output_size(m);
	const float *z = m->out[L - 1];
	float	   *dz = m->dout[L - 1];
	double		sums[2] = {0.0, 0.0};
	const float *w;
	double		count = hw != NULL ? wsum : (double) n;

	if (m->last_input == NULL || n != m->last_n)
	{
		nn_error_set(err, -1, "", "loss called without a matching forward pass");
		return false;
	}
	if (!y_staged && m->spec.loss == NN_LOSS_CROSS_ENTROPY && !check_labels(m, y, n, err))
		return false;
	if (staged(m) && !y_staged)
	{
		m->be->upload(m->staging->y, y, sizeof(float) * n * nn_model_target_size(m));
		y = m->staging->y;
	}
	if ((w = nn_weights_on_backend(m, hw, n, err)) == NULL && hw != NULL)
		return false;
	switch (m->spec.loss)
	{
		case NN_LOSS_CROSS_ENTROPY:
			if (smoothing > 0.0f)
				m->be->softmax_xent_smooth(z, y, w, dz, m->row_loss, n, k, loss_scale(1.0, count), smoothing);
			else
				m->be->softmax_xent(z, y, w, dz, m->row_loss, n, k, loss_scale(1.0, count));
			m->be->xent_metrics(z, y, m->row_loss, n, k, sums);
			break;
		case NN_LOSS_MSE:
			m->be->mse_loss(z, y, w, dz, n, k, loss_scale(2.0, count * k), sums);
			break;
		case NN_LOSS_BCE:
			m->be->bce_loss(z, y, w, dz, n, k, loss_scale(1.0, count * k), sums);
			break;
		case NN_LOSS_HUBER:
			m->be->huber_loss(z, y, w, dz, n, k, m->spec.delta, loss_scale(1.0, count * k), sums);
			break;
		default:
			nn_error_set(err, -1, "loss", "unknown loss");
			return false;
	}
	if (stats)
	{
		stats->loss_sum += sums[0];
		stats->correct += (int64_t) sums[1];
		stats->n += n;
	}
	return true;
}

/* y: host memory */
bool
nn_model_loss(NnModel *m, const float *y, int32_t n, NnBatchStats *stats, NnError *err)
{
	return model_loss(m, y, n, false, false, NULL, 0.0, stats, err);
}

/*
 * Backward runs each segment of per-example layers chunk by chunk, as forward
 * does; the gradients passed between a segment's own layers are needed only
 * while their chunk goes through, so they go to the front of their buffers
 * (which then stay in cache) instead of at the chunk's offset in the batch.
 * Only the segment's last layer's output gradient and its first layer's input
 * gradient cross to other layers and keep their places.
 */
void
nn_model_backward(NnModel *m)
{
	nn_backward_layers(m, 0, m->spec.n_layers);
}

/* Layers [from, to) backwards, a range as nn_forward_layers takes. */
void
nn_backward_layers(NnModel *m, int from, int to)
{
	int			n = m->last_n;
	int			starts[NN_MAX_LAYERS + 1];
	int			n_segments = 0;

	/* the segments of the forward pass, walked backwards */
	for (int i = from; i < to; n_segments++)
	{
		int			chunk,
					end = segment_end(m, i, to, n, &chunk);

		starts[n_segments] = i;
		i = end > i ? end : i + 1;
	}
	starts[n_segments] = to;

	for (int g = n_segments - 1; g >= 0; g--)
	{
		int			i = starts[g],
					end = starts[g + 1],
					chunk;

		if (end == i + 1 && !nn_layer_chunkable(m, i))
		{
			nn_layer_backward_whole(m, i, n);
			continue;
		}
		segment_end(m, i, to, n, &chunk);
		for (int s = 0; s < n; s += chunk)
		{
			int			c = n - s < chunk ? n - s : chunk;

			for (int k = end - 1; k >= i; k--)
			{
				int64_t		in_off = s * NN_SHAPE_SIZE(NN_IN_SHAPE(m->shape, &m->spec, k));
				float	   *din = nn_layer_din(m, k);

				/* gradients between the segment's layers at the front of their buffers: see above */
				if (din && k == i)
					din += in_off;
				nn_layer_backward(m, k, nn_layer_input(m, k) + in_off, s, c, din, k < end - 1);
			}
		}
	}
}

/*
 * Layer i's backward on the whole batch (or a thread's shard).  A gradient
 * that adds to what a later reader of the same output wrote goes to gacc
 * first (a layer writes its input's gradient) and is added from there; add
 * and concat add in place themselves.
 */
void
nn_layer_backward_whole(NnModel *m, int i, int n)
{
	float	   *din = nn_layer_din(m, i);
	NnLayerType t = m->spec.layers[i].type;

	if (din == NULL || t == NN_ADD || t == NN_CONCAT || !(m->grad_add[i] & 1))
		nn_layer_backward(m, i, nn_layer_input(m, i), 0, n, din, false);
	else
	{
		int64_t		size = NN_SHAPE_SIZE(NN_IN_SHAPE(m->shape, &m->spec, i));
		float	   *tmp = m->gacc + m->shard_first * size;

		nn_layer_backward(m, i, nn_layer_input(m, i), 0, n, tmp, false);
		m->be->copy_rows(din, 0, tmp, 0, 1, n * size, true);
	}
}

/* The optimizer's update of parameters [a, b) with weight decay wd. */
static void
update_piece(NnModel *m, int64_t a, int64_t b, float lr, float wd)
{
	const NnOptim *o = &m->optim;

	if (a >= b)
		return;
	if (o->type == NN_OPT_SGD)
		m->be->sgd_update(m->params + a, m->grads + a, m->opt_state ? m->opt_state + a : NULL, b - a,
						  lr, o->momentum, wd, o->nesterov);
	else if (o->type == NN_OPT_RMSPROP)
	{
		/* the slices after square_avg: the momentum buffer, then grad_avg */
		float	   *next = m->opt_state + m->n_params + a;
		float	   *buf = o->momentum > 0.0f ? next : NULL;
		float	   *gavg = o->centered ? (buf ? next + m->n_params : next) : NULL;

		m->be->rmsprop_update(m->params + a, m->grads + a, m->opt_state + a, buf, gavg, b - a,
							  lr, o->alpha, o->eps, wd, o->momentum);
	}
	else if (o->type == NN_OPT_ADAGRAD)
		m->be->adagrad_update(m->params + a, m->grads + a, m->opt_state + a, b - a, lr, o->lr_decay, o->eps,
							  wd, m->step);
	else
		m->be->adam_update(m->params + a, m->grads + a, m->opt_state + a, m->opt_state + m->n_params + a,
						   b - a, lr, o->beta1, o->beta2, o->eps, wd, o->type == NN_OPT_ADAMW, m->step);
}

/*
 * The parameters of layer i that weight decay applies to under
 * no_decay_bias_norm: the leading ones, i.e. a dense or conv2d layer's weight
 * but not its bias, none of a norm layer's.
 */
static int64_t
decayed_len(const NnModel *m, int i)
{
	const NnLayerSpec *l = &m->spec.layers[i];

	switch (l->type)
	{
		case NN_DENSE:
			return m->param_len[i] - l->units;
		case NN_CONV2D:
			return m->param_len[i] - l->filters;
		case NN_GRU:
			return m->param_len[i] - 6 * (int64_t) l->units;	/* W_ih, W_hh; not b_ih, b_hh */
		case NN_ATTENTION:
			return m->param_len[i] - 4 * (int64_t) NN_IN_SHAPE(m->shape, &m->spec, i).w;	/* W_in, W_out; not their biases */
		case NN_BATCHNORM:
		case NN_LAYERNORM:
			return 0;
		default:
			return m->param_len[i];
	}
}

/*
 * The update of parameters [a, b) at step m->step with learning rate lr, each
 * parameter group with its weight decay.  Elementwise: a range split into
 * pieces gets the bytes it gets whole.
 */
void
nn_update_range(NnModel *m, int64_t a, int64_t b, float lr)
{
	const NnOptim *o = &m->optim;

	if (!o->no_decay_bias_norm || o->weight_decay == 0.0f)
	{
		update_piece(m, a, b, lr, o->weight_decay);
		return;
	}
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		int64_t		off = m->param_off[i],
					mid = off + decayed_len(m, i),
					end = off + m->param_len[i];

		update_piece(m, a > off ? a : off, b < mid ? b : mid, lr, o->weight_decay);
		update_piece(m, a > mid ? a : mid, b < end ? b : end, lr, 0.0f);
	}
}

/* torch.nn.utils.clip_grad_norm_: gradients times clip_norm / (norm + 1e-6) when that is below 1. */
void
nn_clip_grads(NnModel *m)
{
	double		norm;
	float		coef;

	if (m->optim.clip_norm <= 0.0f || m->n_params == 0)
		return;
	norm = sqrt(m->be->sum_squares(m->grads, m->n_params));
	coef = m->optim.clip_norm / ((float) norm + 1e-6f);
	if (coef < 1.0f)
		m->be->scale(m->grads, coef, m->n_params);
}

void
nn_model_update(NnModel *m)
{
	m->step++;
	nn_clip_grads(m);
	nn_update_range(m, 0, m->n_params, (float) nn_optim_lr(&m->optim, m->step));
}

/* The backward pass and the update of a training step, on the model's threads when it has them. */
static void
backward_update(NnModel *m)
{
	if (step_parallel(m, m->last_n))
		nn_parallel_backward_update(m);
	else
	{
		nn_model_backward(m);
		nn_model_update(m);
	}
}

/*
 * An embedding's ids are indices into its table: each must be a whole number
 * in [0, vocab), checked here in the caller's host memory before any is used.
 * (The kernels also leave an id outside the table alone, never reading past it.)
 */
bool
nn_model_check_input(const NnModel *m, const float *x, int32_t n, NnError *err)
{
	int64_t		len = nn_model_input_size(m);

	for (int i = 0; i < m->spec.n_layers; i++)
	{
		const NnLayerSpec *l = &m->spec.layers[i];
		int64_t		from,
					count;

		/* the spec's validation saw to it that an embedding reads the input */
		if (l->type != NN_EMBEDDING || !nn_input_columns(&m->spec, i, &from, &count))
			continue;
		for (int64_t e = 0; e < n; e++)
			for (int64_t j = from; j < from + count; j++)
			{
				float		id = x[e * len + j];

				if (!(id >= 0.0f && id < (float) l->vocab && id == floorf(id)))
				{
					nn_error_set(err, i, "x", "embedding: id %g at step %lld of example %lld is not a whole number between 0 and %d",
								 (double) id, (long long) (j - from), (long long) e, (int) l->vocab - 1);
					return false;
				}
			}
	}
	return true;
}

static bool
check_batch(NnModel *m, const float *x, const float *y, int32_t n, NnError *err)
{
	if (x == NULL || y == NULL)
	{
		nn_error_set(err, -1, "", "missing input or targets");
		return false;
	}
	if (n > m->batch_cap || (m->want_dinput && m->dinput == NULL))
	{
		if (!nn_model_reserve(m, n, err))
			return false;
	}
	else if (n < 1)
	{
		nn_error_set(err, -1, "batch_size", "a batch needs at least one example");
		return false;
	}
	return nn_model_check_input(m, x, n, err);
}

/*
 * One batch: forward and loss, and when training backward and the update.
 * x and y are host memory, or a device model's staged batch (on_device).
 */
static bool
run_batch(NnModel *m, const float *x, const float *y, int32_t n, bool training, bool on_device,
		  NnBatchStats *stats, NnError *err)
{
	unsigned int fp;
	bool		ok;
	const float *hw = NULL;
	double		wsum = 0.0;

	if (!on_device && !check_batch(m, x, y, n, err))
		return false;
	if (training && !nn_weights_batch(m, y, n, &hw, &wsum, err))
		return false;
	fp = nn_fp_enter();
	if (training && step_parallel(m, n))
		nn_parallel_forward(m, x, n);
	else
		forward_pass(m, x, n, m->spec.n_layers, training, on_device);
	ok = model_loss(m, y, n, on_device, training, hw, wsum, stats, err);
	if (ok && training)
		backward_update(m);
	nn_fp_leave(fp);
	return ok;
}

/* A training step that is not applied when its loss is NaN or infinite (see nn.h); hw: as model_loss's. */
static bool
step_finite(NnModel *m, const float *x, const float *y, int32_t n, bool on_device, const float *hw,
			double wsum, NnBatchStats *stats, bool *finite, NnError *err)
{
	NnBatchStats step = {0};
	unsigned int fp;
	bool		ok;

	fp = nn_fp_enter();
	if (step_parallel(m, n))
		nn_parallel_forward(m, x, n);
	else
		forward_pass(m, x, n, m->spec.n_layers, true, on_device);
	ok = model_loss(m, y, n, on_device, true, hw, wsum, &step, err);
	*finite = !ok || isfinite(step.loss_sum);
	if (ok && *finite)
		backward_update(m);
	nn_fp_leave(fp);
	if (ok && *finite && stats)
	{
		/* step.loss_sum is exactly what nn_model_loss would have added */
		stats->loss_sum += step.loss_sum;
		stats->correct += step.correct;
		stats->n += step.n;
	}
	return ok;
}

/* A model can take a step: it has an optimizer, and its step counter stays one a blob may declare. */
static bool
check_can_step(const NnModel *m, NnError *err)
{
	if (m->optim.type == 0)
	{
		nn_error_set(err, -1, "optimizer", "no optimizer set for training");
		return false;
	}
	if (m->step >= NN_MAX_STEP)
	{
		nn_error_set(err, -1, "", "the model has taken %lld optimizer steps, the most it may take",
					 (long long) m->step);
		return false;
	}
	return true;
}

bool
nn_model_train_step(NnModel *m, const float *x, const float *y, int32_t n,
					NnBatchStats *stats, NnError *err)
{
	if (!check_can_step(m, err))
		return false;
	return run_batch(m, x, y, n, true, false, stats, err);
}

bool
nn_model_evaluate(NnModel *m, const float *x, const float *y, int32_t n,
				  NnBatchStats *stats, NnError *err)
{
	return run_batch(m, x, y, n, false, false, stats, err);
}

/* Room for a staged batch of `floats` in the backend's host memory (pinned on a GPU). */
static bool
staging_host_batch(NnModel *m, int64_t floats)
{
	NnStaging  *st = m->staging;
	float	   *buf;
	size_t		bytes;

	if (floats <= st->host_batch_floats)
		return true;
	if (!safe_floats(floats, &bytes) || (buf = m->be->host_alloc(bytes)) == NULL)
		return false;
	m->be->host_release(st->host_batch);
	st->host_batch = buf;
	st->host_batch_floats = floats;
	return true;
}

/*
 * Copy the batch (checked as a step checks it) and start its upload into the
 * slot the running step does not use.  The upload before it must have landed
 * before its host buffer is written again; the running step never reads this
 * slot (the one before it, which did, ended when its loss came back).
 */
bool
nn_model_stage(NnModel *m, const float *x, const float *y, int32_t n, NnError *err)
{
	int64_t		in = nn_model_input_size(m),
				tgt = nn_model_target_size(m);

	if (!check_batch(m, x, y, n, err) ||
		(m->spec.loss == NN_LOSS_CROSS_ENTROPY && !check_labels(m, y, n, err)) ||
		!nn_weights_stage(m, y, n, err))
		return false;
	if (m->staging == NULL && (m->staging = calloc(1, sizeof(NnStaging))) == NULL)
	{
		nn_error_set(err, -1, "", "out of memory");
		return false;
	}
	m->be->wait_uploads();
	m->staging->staged_n = 0;
	if (!staging_host_batch(m, (int64_t) n * (in + tgt)))
	{
		nn_error_set(err, -1, "batch_size", "out of memory staging a batch of %d", (int) n);
		return false;
	}
	memcpy(m->staging->host_batch, x, sizeof(float) * n * in);
	memcpy(m->staging->host_batch + n * in, y, sizeof(float) * n * tgt);
	m->staging->staged_n = n;
	if (staged(m))
		upload_staged(m, true);
	return true;
}

bool
nn_model_train_staged(NnModel *m, NnBatchStats *stats, bool *finite, NnError *err)
{
	NnStaging  *st = m->staging;
	int32_t		n = st != NULL ? st->staged_n : 0;
	float	   *t;
	const float *hw;
	double		wsum;

	*finite = true;
	if (n == 0)
	{
		nn_error_set(err, -1, "", "no batch is staged");
		return false;
	}
	if (!check_can_step(m, err))
		return false;
	st->staged_n = 0;
	hw = nn_weights_staged(m, n, &wsum);
	if (!staged(m))
		return step_finite(m, st->host_batch, st->host_batch + n * nn_model_input_size(m), n, false,
						   hw, wsum, stats, finite, err);
	m->be->wait_uploads();
	t = st->x, st->x = st->next_x, st->next_x = t;
	t = st->y, st->y = st->next_y, st->next_y = t;
	return step_finite(m, st->x, st->y, n, true, hw, wsum, stats, finite, err);
}

/*
 * Divergence.  A step whose loss is NaN or infinite would write NaN into every
 * parameter it updates, so it is not applied; the caller stops training there.
 * The check costs one comparison per step, and a healthy step runs exactly the
 * operations of nn_model_train_step (the same bytes).
 */
bool
nn_model_train_step_finite(NnModel *m, const float *x, const float *y, int32_t n,
						   NnBatchStats *stats, bool *finite, NnError *err)
{
	const float *hw;
	double		wsum;

	*finite = true;
	if (!check_can_step(m, err) || !check_batch(m, x, y, n, err) ||
		!nn_weights_batch(m, y, n, &hw, &wsum, err))
		return false;
	return step_finite(m, x, y, n, false, hw, wsum, stats, finite, err);
}

/* Weights are non-finite when an update overflowed, even if no loss was yet. */
bool
nn_model_params_finite(const NnModel *m)
{
	return m->be->all_finite(m->params, m->n_params) && m->be->all_finite(m->buffers, m->n_buffers);
}

/*
 * Everything the model holds, allocated on be before anything is released, so
 * that a backend short of memory leaves the model as it was.  The workspace is
 * not copied: it holds nothing between batches.
 */
bool
nn_model_use_backend(NnModel *m, const NnBackend *be, NnError *err)
{
	const NnBackend *old = m->be;
	size_t		param_bytes = 0,
				opt_bytes = 0,
				work_bytes = 0;
	float	   *params = NULL,
			   *opt = NULL,
			   *work = NULL;
	NnStaging  *staging = NULL;
	WorkLayout	w;
	int32_t		batch = m->batch_cap;
	bool		ok;

	if (be == NULL)
	{
		nn_error_set(err, -1, "", "no backend to move the model to");
		return false;
	}
	if (be == old)
		return true;
	if (m->optim.bf16 && !bf16_runs_on(be, err))
		return false;
	if (batch > 0)
		workspace_layout(m, batch, !be->host_memory, &w);
	if (!safe_floats(2 * m->n_params + m->n_buffers, &param_bytes) ||
		!safe_floats(m->n_opt_state, &opt_bytes) ||
		(batch > 0 && !safe_floats(w.total, &work_bytes)))
	{
		nn_error_set(err, -1, "", "the model is too large to move");
		return false;
	}
	ok = (params = be->alloc(param_bytes)) != NULL &&
		(opt_bytes == 0 || (opt = be->alloc(opt_bytes)) != NULL) &&
		(batch == 0 || (work = be->alloc(work_bytes)) != NULL);
	if (ok && !be->host_memory)
		ok = (staging = calloc(1, sizeof(NnStaging))) != NULL &&
			(batch == 0 || staging_host_out(staging, (int64_t) batch * nn_model_output_size(m)));
	if (!ok)
	{
		be->release(params);
		be->release(opt);
		be->release(work);
		staging_free(be, staging);
		nn_error_set(err, -1, "", "out of %s memory: the model needs %zu bytes there "
					 "(%zu of parameters, gradients and running statistics, %zu of optimizer state, "
					 "%zu of workspace for batches of %d)",
					 be->name, param_bytes + opt_bytes + work_bytes, param_bytes, opt_bytes,
					 work_bytes, (int) batch);
		return false;
	}
	nn_copy_across(be, params, old, m->params, param_bytes);
	nn_copy_across(be, opt, old, m->opt_state, opt_bytes);
	old->wait_uploads();
	old->release(m->params);
	old->release(m->opt_state);
	old->release(m->work);
	staging_free(old, m->staging);	/* and a staged batch with it */

	m->be = be;
	m->params = params;
	m->grads = params + m->n_params;
	m->buffers = m->grads + m->n_params;
	m->opt_state = opt;
	m->staging = staging;
	if (batch > 0)
		workspace_point(m, work, batch, &w);
	else
	{
		m->work = NULL;
		m->last_input = NULL;
		m->last_n = 0;
	}
	return true;
}
