/*
 * serialize.c -- the versioned binary model format.
 *
 *   "PGDLMDL1"  u32 format version  u64 total length
 *   spec:       i32 input_ndim, input[3], n_layers, loss;
 *               per layer i32 type, units, filters, kernel, stride, padding, init,
 *                         f32 alpha, rate, eps, momentum
 *               version 2 (the graph form) only, per layer: i32 n_inputs, i32 inputs[n_inputs],
 *                         u32 name length, the name's bytes
 *               (a type or key added later keeps its own fields in slots it does not use:
 *               embedding's vocab in filters, gru's return_sequences in kernel, as are
 *               attention's causal, dense's per_step, embedding's positions, flatten's
 *               steps, and softmax's log and over_steps as bits 0 and 1; a pool's pads
 *               after in filters, its ceil_mode and count_include_pad in units as bits
 *               0 and 1; a blob from before they existed has 0 there, their off)
 *                         u32 name length, the name's bytes, i32 groups
 *               version 3 (a loss with a parameter) is version 2, the graph section
 *               always, and f32 delta (huber's) right after the loss
 *   state:      u64 seed, i64 step
 *               u64 n_params,  f32[n_params]
 *               u64 n_buffers, f32[n_buffers]
 *               optimizer: i32 type, f32 lr, momentum, i32 nesterov, f32 weight_decay,
 *                          beta1, beta2, eps
 *                          (rmsprop and adagrad keep their settings in the slots of nn.h's
 *                          NnOptim: alpha in beta2's, lr_decay in beta1's,
 *                          initial_accumulator_value in beta2's, rmsprop's centered in
 *                          nesterov's; blobs of sgd, adam and adamw are as they were)
 *               u64 n_opt_state, f32[n_opt_state]
 *   u32 CRC-32 of everything before it
 *
 * All little-endian.  Blobs come from users: the reader checks the length and
 * checksum first, then every count against what the validated spec implies and
 * against the bytes that remain, before it allocates or copies anything.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "nn_internal.h"

#define HEADER_BYTES	(8 + 4 + 8)
#define LAYER_BYTES		(11 * 4)
#define OPTIM_BYTES		(8 * 4)

/*
 * CRC-32 (IEEE), slicing by 8: eight table lookups per 8 bytes instead of one
 * per byte.  Models hop between workers as serialized blobs, so this runs over
 * every parameter twice per hop.
 */
static uint32_t crc_table[8][256];
static bool crc_ready;

static void
crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++)
	{
		uint32_t	c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
	crc_ready = true;
}

uint32_t
nn_crc32(uint32_t crc, const uint8_t *data, size_t len)
{
	if (!crc_ready)
		crc_init();
	crc = ~crc;
	while (len >= 8)
	{
		uint32_t	lo = crc ^ ((uint32_t) data[0] | (uint32_t) data[1] << 8 |
								(uint32_t) data[2] << 16 | (uint32_t) data[3] << 24);
		uint32_t	hi = (uint32_t) data[4] | (uint32_t) data[5] << 8 |
			(uint32_t) data[6] << 16 | (uint32_t) data[7] << 24;

		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
			crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
			crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
			crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
		data += 8;
		len -= 8;
	}
	while (len--)
		crc = crc_table[0][(crc ^ *data++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* ---- writing ---- */

typedef struct Writer
{
	uint8_t    *p;
} Writer;

/* the low `bytes` bytes of v, little-endian */
static void
put_le(Writer *w, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		*w->p++ = (uint8_t) (v >> (8 * i));
}

static void
put_u32(Writer *w, uint32_t v)
{
	put_le(w, v, 4);
}

static void
put_u64(Writer *w, uint64_t v)
{
	put_le(w, v, 8);
}

static void
put_f32(Writer *w, float f)
{
	uint32_t	v;

	memcpy(&v, &f, 4);
	put_u32(w, v);
}

/* n floats of the model's memory (the backend's: a device model downloads them) */
static void
put_floats(Writer *w, const NnBackend *be, const float *f, int64_t n)
{
	if (n > 0)
		be->download(w->p, f, (size_t) n * 4);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	for (int64_t i = 0; i < n; i++)
	{
		float		v;

		memcpy(&v, w->p, 4);
		put_f32(w, v);
	}
#else
	w->p += (size_t) n * 4;
#endif
}

/*
 * A chain without names is written as version 1, byte for byte what builds
 * before the graph form wrote; a graph (or a named layer) as version 2; a
 * loss with a parameter as version 3, so that the others keep their bytes.
 */
static uint32_t
format_version(const NnSpec *s)
{
	if (s->loss == NN_LOSS_HUBER)
		return NN_FORMAT_VERSION_LOSS;
	for (int i = 0; i < s->n_layers; i++)
		if (s->layers[i].n_inputs != 0 || s->layers[i].name[0] != '\0' || s->layers[i].groups > 1)
			return NN_FORMAT_VERSION_GRAPH;
	return NN_FORMAT_VERSION;
}

static bool
needs_graph_section(const NnSpec *s)
{
	return format_version(s) != NN_FORMAT_VERSION;
}

/* version 3's loss parameter */
static size_t
loss_section_size(const NnSpec *s)
{
	return format_version(s) == NN_FORMAT_VERSION_LOSS ? 4 : 0;
}

static size_t
graph_section_size(const NnSpec *s)
{
	size_t		n = 0;

	if (!needs_graph_section(s))
		return 0;
	for (int i = 0; i < s->n_layers; i++)
		n += 4 + 4 * (size_t) s->layers[i].n_inputs + 4 + strnlen(s->layers[i].name, NN_MAX_NAME) + 4;
	return n;
}

static bool
is_pool(const NnLayerSpec *l)
{
	return l->type == NN_MAXPOOL2D || l->type == NN_AVGPOOL2D;
}

/* What a layer keeps in the kernel slot: its kernel, or a flag of a type without one. */
static int32_t
kernel_slot(const NnLayerSpec *l)
{
	switch (l->type)
	{
		case NN_GRU:
			return l->return_sequences;
		case NN_ATTENTION:
			return l->causal;
		case NN_DENSE:
			return l->per_step;
		case NN_EMBEDDING:
			return l->positions;
		case NN_FLATTEN:
			return l->steps;
		case NN_SOFTMAX:
			return (int32_t) l->log | (int32_t) l->over_steps << 1;
		default:
			return l->kernel;
	}
}

size_t
nn_model_serialized_size(const NnModel *m)
{
	return HEADER_BYTES + 6 * 4 + loss_section_size(&m->spec) + (size_t) m->spec.n_layers * LAYER_BYTES +
		graph_section_size(&m->spec) +
		8 + 8 + 8 + (size_t) m->n_params * 4 + 8 + (size_t) m->n_buffers * 4 +
		OPTIM_BYTES + 8 + (size_t) m->n_opt_state * 4 + 4;
}

void
nn_model_serialize(const NnModel *m, uint8_t *buf)
{
	Writer		w = {buf};
	size_t		total = nn_model_serialized_size(m);
	const NnSpec *s = &m->spec;
	const NnOptim *o = &m->optim;

	memcpy(w.p, NN_FORMAT_MAGIC, 8);
	w.p += 8;
	put_u32(&w, format_version(s));
	put_u64(&w, total);

	put_u32(&w, (uint32_t) s->input_ndim);
	for (int d = 0; d < 3; d++)
		put_u32(&w, (uint32_t) s->input[d]);
	put_u32(&w, (uint32_t) s->n_layers);
	put_u32(&w, (uint32_t) s->loss);
	if (loss_section_size(s) > 0)
		put_f32(&w, s->delta);
	for (int i = 0; i < s->n_layers; i++)
	{
		const NnLayerSpec *l = &s->layers[i];

		put_u32(&w, (uint32_t) l->type);
		put_u32(&w, (uint32_t) (is_pool(l) ? (l->ceil_mode ? 1 : 0) | (l->count_pad ? 2 : 0) : l->units));
		put_u32(&w, (uint32_t) (l->type == NN_EMBEDDING ? l->vocab : l->type == NN_ATTENTION ? l->heads :
								is_pool(l) ? l->pad_end : l->filters));
		put_u32(&w, (uint32_t) kernel_slot(l));
		put_u32(&w, (uint32_t) l->stride);
		put_u32(&w, (uint32_t) (l->type == NN_SLICE ? l->start : l->padding));
		put_u32(&w, (uint32_t) l->init);
		put_f32(&w, l->alpha);
		put_f32(&w, l->rate);
		put_f32(&w, l->eps);
		put_f32(&w, l->momentum);
	}
	if (needs_graph_section(s))
		for (int i = 0; i < s->n_layers; i++)
		{
			const NnLayerSpec *l = &s->layers[i];
			size_t		len = strnlen(l->name, NN_MAX_NAME);

			put_u32(&w, (uint32_t) l->n_inputs);
			for (int k = 0; k < l->n_inputs; k++)
				put_u32(&w, (uint32_t) (int32_t) l->inputs[k]);
			put_u32(&w, (uint32_t) len);
			memcpy(w.p, l->name, len);
			w.p += len;
			put_u32(&w, (uint32_t) l->groups);
		}

	put_u64(&w, m->seed);
	put_u64(&w, (uint64_t) m->step);
	put_u64(&w, (uint64_t) m->n_params);
	put_floats(&w, m->be, m->params, m->n_params);
	put_u64(&w, (uint64_t) m->n_buffers);
	put_floats(&w, m->be, m->buffers, m->n_buffers);
	put_u32(&w, (uint32_t) o->type);
	put_f32(&w, o->lr);
	put_f32(&w, o->momentum);
	put_u32(&w, (o->type == NN_OPT_RMSPROP ? o->centered : o->nesterov) ? 1 : 0);
	put_f32(&w, o->weight_decay);
	put_f32(&w, o->beta1);
	put_f32(&w, o->beta2);
	put_f32(&w, o->eps);
	put_u64(&w, (uint64_t) m->n_opt_state);
	put_floats(&w, m->be, m->opt_state, m->n_opt_state);
	put_u32(&w, nn_crc32(0, buf, total - 4));
}

/* ---- reading ---- */

typedef struct Reader
{
	const uint8_t *p;
	const uint8_t *end;
} Reader;

static bool
have(const Reader *r, uint64_t bytes)
{
	return (uint64_t) (r->end - r->p) >= bytes;
}

/* `bytes` bytes, little-endian; the caller has checked that they are there */
static uint64_t
get_le(Reader *r, int bytes)
{
	uint64_t	v = 0;

	for (int i = 0; i < bytes; i++)
		v |= (uint64_t) r->p[i] << (8 * i);
	r->p += bytes;
	return v;
}

static uint32_t
get_u32(Reader *r)
{
	return (uint32_t) get_le(r, 4);
}

static uint64_t
get_u64(Reader *r)
{
	return get_le(r, 8);
}

static float
get_f32(Reader *r)
{
	uint32_t	v = get_u32(r);
	float		f;

	memcpy(&f, &v, 4);
	return f;
}

/* dst NULL: skipped (nn_model_blob_check) */
static void
get_floats(Reader *r, float *dst, int64_t n)
{
	if (dst == NULL)
	{
		r->p += (size_t) n * 4;
		return;
	}
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (n > 0)
		memcpy(dst, r->p, (size_t) n * 4);
	r->p += (size_t) n * 4;
#else
	for (int64_t i = 0; i < n; i++)
		dst[i] = get_f32(r);
#endif
}

static bool
all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/* Read a count that must equal what the spec implies and fit in what is left. */
static bool
get_count(Reader *r, int64_t expected, const char *what, NnError *err)
{
	uint64_t	n;

	if (!have(r, 8))
	{
		nn_error_set(err, -1, "", "model blob is truncated before the %s", what);
		return false;
	}
	n = get_u64(r);
	if (n != (uint64_t) expected)
	{
		nn_error_set(err, -1, "", "model blob declares %llu %s, its spec implies %lld",
					 (unsigned long long) n, what, (long long) expected);
		return false;
	}
	if (!have(r, n * 4))
	{
		nn_error_set(err, -1, "", "model blob is truncated in the %s", what);
		return false;
	}
	return true;
}

/*
 * Magic, version, length and checksum; leaves r after the header with its end
 * before the checksum (which is not part of the content).
 */
static bool
read_header(Reader *r, const uint8_t *buf, size_t len, uint32_t *version_out, NnError *err)
{
	uint32_t	version;
	uint64_t	total;
	Reader		tail;

	if (len < HEADER_BYTES + 4 || memcmp(buf, NN_FORMAT_MAGIC, 8) != 0)
	{
		nn_error_set(err, -1, "", "not a pgdl model (bad magic or too short: %zu bytes)", len);
		return false;
	}
	r->p += 8;
	version = get_u32(r);
	if (version < NN_FORMAT_VERSION || version > NN_FORMAT_VERSION_LOSS)
	{
		nn_error_set(err, -1, "", "model format version %u is not supported (this build reads versions %d to %d)",
					 version, NN_FORMAT_VERSION, NN_FORMAT_VERSION_LOSS);
		return false;
	}
	*version_out = version;
	total = get_u64(r);
	if (total != len)
	{
		nn_error_set(err, -1, "", "model blob is %zu bytes, its header says %llu", len,
					 (unsigned long long) total);
		return false;
	}
	tail.p = buf + len - 4;
	tail.end = buf + len;
	if (get_u32(&tail) != nn_crc32(0, buf, len - 4))
	{
		nn_error_set(err, -1, "", "model blob is corrupt (checksum mismatch)");
		return false;
	}
	r->end = buf + len - 4;
	return true;
}

/*
 * A layer's own fields out of the slots the writer kept them in (kernel_slot
 * and the like); false when a flag's slot holds anything but 0 or 1 (a
 * softmax's two flags: 0 to 3), which the writer never writes, so that every
 * blob read back serializes to its own bytes.
 */
static bool
unpack_slots(NnLayerSpec *l)
{
	switch (l->type)
	{
		case NN_EMBEDDING:
		case NN_DENSE:
		case NN_GRU:
		case NN_ATTENTION:
			if (l->kernel != 0 && l->kernel != 1)
				return false;
			break;
		case NN_SOFTMAX:
			if (l->kernel < 0 || l->kernel > 3)	/* log and over_steps, two bits */
				return false;
			break;
		default:
			break;
	}
	if (l->type == NN_EMBEDDING)
	{
		l->vocab = l->filters;
		l->positions = l->kernel != 0;
		l->filters = l->kernel = 0;
	}
	if (l->type == NN_DENSE)
	{
		l->per_step = l->kernel != 0;
		l->kernel = 0;
	}
	if (l->type == NN_FLATTEN)
	{
		l->steps = l->kernel;
		l->kernel = 0;
	}
	if (l->type == NN_SOFTMAX)
	{
		/* bit 0 log, bit 1 over_steps; blobs from before over_steps hold 0 or 1 */
		l->log = (l->kernel & 1) != 0;
		l->over_steps = (l->kernel & 2) != 0;
		l->kernel = 0;
	}
	if (l->type == NN_GRU)
	{
		l->return_sequences = l->kernel != 0;
		l->kernel = 0;
	}
	if (l->type == NN_ATTENTION)
	{
		l->heads = l->filters;
		l->causal = l->kernel != 0;
		l->filters = l->kernel = 0;
	}
	if (l->type == NN_SLICE)
	{
		l->start = l->padding;
		l->padding = 0;
	}
	if (is_pool(l))
	{
		/* ceil_mode and count_include_pad in units' slot, the pads after in filters' */
		if (l->units < 0 || l->units > 3)
			return false;
		l->ceil_mode = (l->units & 1) != 0;
		l->count_pad = (l->units & 2) != 0;
		l->pad_end = l->filters;
		l->units = l->filters = 0;
	}
	return true;
}

/* Version 3's loss parameter, huber's delta: only huber's blobs have it, and all of them. */
static bool
read_loss_param(Reader *r, uint32_t version, NnSpec *spec, NnError *err)
{
	if (version == NN_FORMAT_VERSION_LOSS)
	{
		/* another loss's would not be written back as it came */
		if (!have(r, 4) || spec->loss != NN_LOSS_HUBER)
		{
			nn_error_set(err, -1, "loss", "model blob of format version 3 has no huber loss, or is truncated");
			return false;
		}
		spec->delta = get_f32(r);	/* nn_spec_validate checks it */
	}
	else if (spec->loss == NN_LOSS_HUBER)
	{
		nn_error_set(err, -1, "loss", "model blob of format version %u has a huber loss without its delta", version);
		return false;
	}
	return true;
}

/* The spec as stored; nn_model_alloc validates it. */
static bool
read_spec(Reader *r, uint32_t version, NnSpec *spec, NnError *err)
{
	uint32_t	n_layers;

	if (!have(r, 6 * 4))
	{
		nn_error_set(err, -1, "", "model blob is truncated in the spec");
		return false;
	}
	spec->input_ndim = (int32_t) get_u32(r);
	for (int d = 0; d < 3; d++)
		spec->input[d] = (int32_t) get_u32(r);
	n_layers = get_u32(r);
	spec->loss = (NnLoss) get_u32(r);
	if (!read_loss_param(r, version, spec, err))
		return false;
	if (n_layers < 1 || n_layers > NN_MAX_LAYERS || !have(r, (uint64_t) n_layers * LAYER_BYTES))
	{
		nn_error_set(err, -1, "layers", "model blob declares %u layers, which it cannot hold", n_layers);
		return false;
	}
	spec->n_layers = (int32_t) n_layers;
	for (uint32_t i = 0; i < n_layers; i++)
	{
		NnLayerSpec *l = &spec->layers[i];

		l->type = (NnLayerType) get_u32(r);
		l->units = (int32_t) get_u32(r);
		l->filters = (int32_t) get_u32(r);
		l->kernel = (int32_t) get_u32(r);
		l->stride = (int32_t) get_u32(r);
		l->padding = (int32_t) get_u32(r);
		l->init = (NnInit) get_u32(r);
		l->alpha = get_f32(r);
		l->rate = get_f32(r);
		l->eps = get_f32(r);
		l->momentum = get_f32(r);
		if (!unpack_slots(l))
		{
			nn_error_set(err, (int) i, "kernel", "model blob has a flag other than 0 or 1 in layer %u", i);
			return false;
		}
	}
	for (uint32_t i = 0; version != NN_FORMAT_VERSION && i < n_layers; i++)
	{
		NnLayerSpec *l = &spec->layers[i];
		uint32_t	n,
					len;

		if (!have(r, 4) || (n = get_u32(r)) > NN_MAX_INPUTS || !have(r, 4 * (uint64_t) n + 4))
		{
			nn_error_set(err, i, "inputs", "model blob has invalid or truncated inputs");
			return false;
		}
		l->n_inputs = (int16_t) n;
		for (uint32_t k = 0; k < n; k++)
		{
			int32_t		src = (int32_t) get_u32(r);

			/* nn_spec_validate checks the rest; this keeps the value an int16 */
			l->inputs[k] = (int16_t) (src < -1 || src >= NN_MAX_LAYERS ? NN_MAX_LAYERS : src);
		}
		len = get_u32(r);
		if (len >= NN_MAX_NAME || !have(r, len) || memchr(r->p, '\0', len) != NULL)
		{
			nn_error_set(err, i, "name", "model blob has an invalid or truncated name");
			return false;
		}
		memcpy(l->name, r->p, len);
		l->name[len] = '\0';
		r->p += len;
		if (!have(r, 4))
		{
			nn_error_set(err, i, "groups", "model blob is truncated in the layers' groups");
			return false;
		}
		l->groups = (int32_t) get_u32(r);	/* nn_spec_validate checks it */
	}
	return true;
}

/* The optimizer's settings (not its state); type 0 when the blob has none. */
static bool
read_optim_settings(Reader *r, NnOptim *opt, NnError *err)
{
	uint32_t	nesterov;

	if (!have(r, OPTIM_BYTES))
	{
		nn_error_set(err, -1, "", "model blob is truncated in the optimizer");
		return false;
	}
	memset(opt, 0, sizeof(*opt));
	opt->type = (NnOptType) get_u32(r);
	opt->lr = get_f32(r);
	opt->momentum = get_f32(r);
	nesterov = get_u32(r);
	if (nesterov > 1)
	{
		nn_error_set(err, -1, "nesterov", "model blob has an invalid optimizer");
		return false;
	}
	if (opt->type == NN_OPT_RMSPROP)
		opt->centered = nesterov == 1;
	else
		opt->nesterov = nesterov == 1;
	opt->weight_decay = get_f32(r);
	opt->beta1 = get_f32(r);
	opt->beta2 = get_f32(r);
	opt->eps = get_f32(r);
	return true;
}

/*
 * The optimizer's settings, adopted by m (which sizes its state), then the
 * state; a model only laid out (no parameters) is sized by the same rule.
 */
static bool
read_optim(Reader *r, NnModel *m, NnError *err)
{
	NnOptim		opt;
	const uint8_t *opt_bytes = r->p;

	if (!read_optim_settings(r, &opt, err))
		return false;
	if (opt.type != 0)
	{
		if (m->params != NULL)
		{
			if (!nn_model_set_optim(m, &opt, err))
				return false;
		}
		else if (nn_model_optim_fits(m, &opt, &m->n_opt_state, err))
			m->optim = opt;
		else
			return false;
	}
	else if (!all_zero(opt_bytes + 4, OPTIM_BYTES - 4))
	{
		/* bytes, not floats: -0.0 equals 0.0 but would not be written back */
		nn_error_set(err, -1, "optimizer", "model blob has settings for no optimizer");
		return false;
	}
	if (!get_count(r, m->n_opt_state, "optimizer state values", err))
		return false;
	get_floats(r, m->opt_state, m->n_opt_state);
	return true;
}

/* Seed, step, parameters and running statistics, into a model sized by its spec. */
static bool
read_weights(Reader *r, NnModel *m, NnError *err)
{
	uint64_t	step;

	if (!have(r, 16))
	{
		nn_error_set(err, -1, "", "model blob is truncated before the parameters");
		return false;
	}
	m->seed = get_u64(r);
	step = get_u64(r);
	/* more than any model trains, and the counter must still count (and be exact as a double) */
	if (step > NN_MAX_STEP)
	{
		nn_error_set(err, -1, "", "model blob declares an invalid step count");
		return false;
	}
	m->step = (int64_t) step;
	if (!get_count(r, m->n_params, "parameters", err))
		return false;
	get_floats(r, m->params, m->n_params);
	if (!get_count(r, m->n_buffers, "running statistics", err))
		return false;
	get_floats(r, m->buffers, m->n_buffers);
	return true;
}

/*
 * The spec and optimizer settings of a blob, read without allocating a model:
 * what a caller needs to know what nn_model_deserialize would allocate
 * (nn_spec_memory).  Counts are skipped as the blob declares them, unchecked:
 * nn_model_deserialize checks everything.  A blob too short to hold the
 * optimizer gets type 0: nn_model_deserialize fails before it would allocate
 * optimizer state for it.
 */
bool
nn_model_blob_spec(const uint8_t *buf, size_t len, NnSpec *spec, NnOptim *opt, NnError *err)
{
	Reader		r = {buf, buf + len};
	NnError		ignored;

	uint32_t	version;

	memset(spec, 0, sizeof(*spec));
	memset(opt, 0, sizeof(*opt));
	if (!read_header(&r, buf, len, &version, err) || !read_spec(&r, version, spec, err))
		return false;
	if (!have(&r, 16))
		return true;
	r.p += 16;					/* seed, step */
	for (int k = 0; k < 2; k++) /* parameters, running statistics */
	{
		uint64_t	n;

		if (!have(&r, 8) || (n = get_u64(&r)) > (uint64_t) (r.end - r.p) / 4)
			return true;
		r.p += n * 4;
	}
	if (!read_optim_settings(&r, opt, &ignored))
		memset(opt, 0, sizeof(*opt));
	return true;
}

/*
 * The spec is valid and the blob holds the parameters it implies (after the
 * seed, the step and their count), before they are allocated: a short blob
 * must not make the reader allocate and clear gigabytes.
 */
static bool
check_holds_params(const Reader *r, const NnSpec *spec, size_t len, NnError *err)
{
	NnCost		cost;

	if (!nn_spec_cost(spec, NULL, &cost, err))
		return false;
	if (!have(r, 16 + 8 + (uint64_t) cost.params * 4))
	{
		nn_error_set(err, -1, "", "model blob of %zu bytes cannot hold the %lld parameters its spec implies",
					 len, (long long) cost.params);
		return false;
	}
	return true;
}

/* What follows the spec, into m, or checked only when m is only laid out; nothing may follow it. */
static bool
read_content(Reader *r, NnModel *m, NnError *err)
{
	if (!read_weights(r, m, err) || !read_optim(r, m, err))
		return false;
	if (r->p != r->end)
	{
		nn_error_set(err, -1, "", "model blob has %zu unexpected trailing bytes", (size_t) (r->end - r->p));
		return false;
	}
	return true;
}

/*
 * Whether nn_model_deserialize would read the blob, every check made (the
 * checksum, the spec, each count against it) but nothing allocated by the
 * spec and no float copied: what a writer of a stored model checks, and a
 * coordinator of a node's model.  spec gets the blob's, unused layer slots
 * zero; summary, when not NULL, all the blob holds but its floats.
 */
bool
nn_model_blob_check(const uint8_t *buf, size_t len, NnSpec *spec, NnBlobSummary *summary, NnError *err)
{
	Reader		r = {buf, buf + len};
	NnModel    *m;
	uint32_t	version;
	bool		ok;

	memset(spec, 0, sizeof(*spec));
	if (!read_header(&r, buf, len, &version, err) || !read_spec(&r, version, spec, err) ||
		!check_holds_params(&r, spec, len, err))
		return false;
	m = calloc(1, sizeof(NnModel));
	if (m == NULL)
	{
		nn_error_set(err, -1, "", "out of memory");
		return false;
	}
	ok = nn_model_layout(m, spec, err) && read_content(&r, m, err);
	if (ok)
		memcpy(spec, &m->spec, sizeof(NnSpec));
	if (ok && summary != NULL)
		*summary = (NnBlobSummary) {.seed = m->seed, .step = m->step, .n_params = m->n_params,
									.n_buffers = m->n_buffers, .n_opt_state = m->n_opt_state, .optim = m->optim};
	free(m);
	return ok;
}

NnModel *
nn_model_deserialize(const uint8_t *buf, size_t len, NnError *err)
{
	Reader		r = {buf, buf + len};
	NnSpec	   *spec;
	NnModel    *m;
	uint32_t	version;

	if (!read_header(&r, buf, len, &version, err))
		return NULL;
	spec = calloc(1, sizeof(NnSpec));
	if (spec == NULL)
	{
		nn_error_set(err, -1, "", "out of memory");
		return NULL;
	}
	m = read_spec(&r, version, spec, err) && check_holds_params(&r, spec, len, err) ? nn_model_alloc(spec, err) : NULL;
	free(spec);
	if (m == NULL)
		return NULL;
	if (!read_content(&r, m, err))
	{
		nn_model_free(m);
		return NULL;
	}
	return m;
}
