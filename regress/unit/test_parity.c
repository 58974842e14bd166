/*
 * test_parity.c -- the engine against PyTorch, tensor by tensor.
 *
 * regress/unit/gen_parity.py (run by `make fixtures`) builds small networks in
 * PyTorch 1.13, runs them in float32 on one thread, and writes what they compute
 * to one fixture file per case.  Each test here builds the same network as an
 * NnSpec, loads PyTorch's parameters (and batchnorm running statistics) into the
 * model, runs the same batch and compares:
 *
 *   forward/backward cases (mlp, cnn, mixed_mse, mixed_bce): the training-mode
 *   output, the mean loss, the gradient of every parameter, the gradient with
 *   respect to the input, and the batchnorm running statistics after the pass;
 *
 *   optimizer cases (optim_*): the parameters after each of 5 training steps.
 *
 * Fixture format (all integers u32, all values float32, little-endian):
 *
 *     magic "PGDLPAR1" (8 bytes), u32 count, then count tensors, each:
 *     u32 name_len, name bytes (no terminator), u32 ndim, u32 dims[ndim],
 *     float32 data[prod(dims)] in row-major order.
 *
 * Names: "x", "y", "out", "loss", "dx"; "param.k" and "grad.k" for parameter
 * tensor k in PyTorch's state_dict order (layer order, weight then bias;
 * batchnorm gamma then beta), which is also the order of pgdl's contiguous
 * parameter array; "buffer.k.before"/"buffer.k.after" for batchnorm running_mean
 * then running_var, in layer order; for optimizer cases "optim" (hyperparameters),
 * "x.s", "y.s" and "step.s.param.k".  gen_parity.py documents them in full.
 *
 * Tolerance: for every tensor, max|pgdl - torch| <= 1e-4 * max(max|torch|, 1e-6),
 * i.e. 1e-4 relative to the tensor's largest magnitude.  That leaves room for
 * float32 sums taken in another order (BLAS blocking, im2col) and nothing more.
 *
 * A missing or malformed fixture is a failed check, never a skipped test: run
 * `make fixtures` first (`make unit` does).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "unit.h"

#define PARITY_RTOL			1e-4
#define PARITY_SCALE_FLOOR	1e-6
#define FIXTURE_MAX_DIMS	8
#define OPTIM_STEPS			5

typedef struct FixTensor
{
	char	   *name;
	uint32_t	ndim;
	uint32_t	dims[FIXTURE_MAX_DIMS];
	int64_t		size;			/* floats */
	float	   *data;
} FixTensor;

typedef struct Fixture
{
	const char *case_name;
	char		path[4096];
	int			n;
	FixTensor  *t;
} Fixture;

/* The worst tensor of a case, and how many were out of tolerance. */
typedef struct ParityResult
{
	double		worst_rel;
	char		worst_what[160];
	int			n_checked;
	int			n_bad;
} ParityResult;

/* ------------------------------------------------------------------------ */
/* Fixture files                                                             */
/* ------------------------------------------------------------------------ */

static uint32_t
read_u32le(const uint8_t *p)
{
	return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static void
fixture_free(Fixture *fx)
{
	for (int i = 0; i < fx->n; i++)
	{
		free(fx->t[i].name);
		free(fx->t[i].data);
	}
	free(fx->t);
	fx->t = NULL;
	fx->n = 0;
}

/* unit_fixture_dir + "/" + name + ".bin", with no doubled slash; false if too long. */
static bool
fixture_path(char *buf, size_t buflen, const char *name)
{
	const char *dir = unit_fixture_dir ? unit_fixture_dir : ".";
	size_t		dirlen = strlen(dir);
	int			len;

	while (dirlen > 1 && dir[dirlen - 1] == '/')
		dirlen--;
	len = snprintf(buf, buflen, "%.*s/%s.bin", (int) dirlen, dir, name);
	return len > 0 && (size_t) len < buflen;
}

/* Parse a whole fixture file; every failure is a failed check of the running test. */
static bool
fixture_load(Fixture *fx, const char *name)
{
	FILE	   *f;
	uint8_t    *buf = NULL;
	long		len;
	size_t		pos;
	uint32_t	count;

	memset(fx, 0, sizeof(*fx));
	fx->case_name = name;
	if (!fixture_path(fx->path, sizeof(fx->path), name))
	{
		CHECK_MSG(false, "%s: fixture path too long (directory %s)", name, unit_fixture_dir);
		return false;
	}
	f = fopen(fx->path, "rb");
	if (f == NULL)
	{
		CHECK_MSG(false, "%s: cannot open fixture %s (run `make fixtures`)", name, fx->path);
		return false;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
		(buf = malloc(len > 0 ? (size_t) len : 1)) == NULL ||
		fread(buf, 1, (size_t) len, f) != (size_t) len)
	{
		fclose(f);
		free(buf);
		CHECK_MSG(false, "%s: cannot read fixture %s", name, fx->path);
		return false;
	}
	fclose(f);

#define NEED(nbytes) \
	do { if ((size_t) len - pos < (size_t) (nbytes)) goto truncated; } while (0)

	pos = 0;
	NEED(12);
	if (memcmp(buf, "PGDLPAR1", 8) != 0)
	{
		free(buf);
		CHECK_MSG(false, "%s: %s is not a parity fixture (bad magic)", name, fx->path);
		return false;
	}
	count = read_u32le(buf + 8);
	pos = 12;
	if (count > 100000)
		goto truncated;
	fx->t = calloc(count > 0 ? count : 1, sizeof(FixTensor));
	if (fx->t == NULL)
		goto truncated;
	for (uint32_t i = 0; i < count; i++)
	{
		FixTensor  *t = &fx->t[i];
		uint32_t	name_len;

		NEED(4);
		name_len = read_u32le(buf + pos);
		pos += 4;
		if (name_len > 255)
			goto truncated;
		NEED(name_len + 4);
		t->name = malloc(name_len + 1);
		if (t->name == NULL)
			goto truncated;
		memcpy(t->name, buf + pos, name_len);
		t->name[name_len] = '\0';
		pos += name_len;
		fx->n = i + 1;			/* from here on fixture_free releases it */
		t->ndim = read_u32le(buf + pos);
		pos += 4;
		if (t->ndim > FIXTURE_MAX_DIMS)
			goto truncated;
		NEED(4 * t->ndim);
		t->size = 1;
		for (uint32_t d = 0; d < t->ndim; d++)
		{
			t->dims[d] = read_u32le(buf + pos);
			pos += 4;
			t->size *= t->dims[d];
			if (t->size > ((int64_t) 1 << 32))
				goto truncated;
		}
		NEED(4 * t->size);
		t->data = malloc(t->size > 0 ? 4 * (size_t) t->size : 1);
		if (t->data == NULL)
			goto truncated;
		for (int64_t j = 0; j < t->size; j++)
		{
			uint32_t	bits = read_u32le(buf + pos);

			memcpy(&t->data[j], &bits, 4);
			pos += 4;
		}
	}
	if (pos != (size_t) len)
		goto truncated;
#undef NEED
	free(buf);
	return true;

truncated:
	free(buf);
	fixture_free(fx);
	CHECK_MSG(false, "%s: fixture %s is truncated or malformed (regenerate it with `make fixtures`)",
			  name, fx->path);
	return false;
}

/* The tensor called name; with want >= 0 it must hold exactly want floats. */
static const FixTensor *
fixture_get(const Fixture *fx, const char *name, int64_t want)
{
	for (int i = 0; i < fx->n; i++)
	{
		if (strcmp(fx->t[i].name, name) != 0)
			continue;
		if (want >= 0 && fx->t[i].size != want)
		{
			CHECK_MSG(false, "%s: tensor %s has %lld floats, the model expects %lld",
					  fx->case_name, name, (long long) fx->t[i].size, (long long) want);
			return NULL;
		}
		return &fx->t[i];
	}
	CHECK_MSG(false, "%s: fixture %s has no tensor %s", fx->case_name, fx->path, name);
	return NULL;
}

static bool
fixture_has(const Fixture *fx, const char *name)
{
	for (int i = 0; i < fx->n; i++)
		if (strcmp(fx->t[i].name, name) == 0)
			return true;
	return false;
}

/* ------------------------------------------------------------------------ */
/* Comparison                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Compare n floats of pgdl's against the reference tensor; report the tensor
 * when it is out of tolerance and remember the case's worst.  NaN or infinity on
 * either side counts as out of tolerance.
 */
static void
compare_tensor_at(ParityResult *res, const char *case_name, const char *what,
				  const float *got, const FixTensor *ref, double floor)
{
	double		scale = floor;
	double		max_diff = 0;
	int64_t		at = 0;
	bool		finite = true;
	double		rel;

	if (ref == NULL)
		return;
	for (int64_t i = 0; i < ref->size; i++)
	{
		double		r = ref->data[i];

		if (!isfinite(r))
			finite = false;
		else if (fabs(r) > scale)
			scale = fabs(r);
	}
	for (int64_t i = 0; i < ref->size; i++)
	{
		double		d = fabs((double) got[i] - (double) ref->data[i]);

		if (!isfinite(d))
		{
			finite = false;
			max_diff = INFINITY;
			at = i;
			break;
		}
		if (d > max_diff)
		{
			max_diff = d;
			at = i;
		}
	}
	rel = finite ? max_diff / scale : INFINITY;
	res->n_checked++;
	if (res->n_checked == 1 || rel > res->worst_rel)
	{
		res->worst_rel = rel;
		snprintf(res->worst_what, sizeof(res->worst_what),
				 "%s: max|pgdl - torch| = %.3g at [%lld] (pgdl %.9g, torch %.9g), max|torch| %.3g",
				 what, max_diff, (long long) at, ref->size > 0 ? got[at] : 0.0,
				 ref->size > 0 ? ref->data[at] : 0.0, scale);
	}
	if (!(rel <= PARITY_RTOL))
	{
		res->n_bad++;
		if (res->n_bad <= 10)
			printf("    %s: %s: relative error %.3g > %g: max|pgdl - torch| = %.3g at [%lld] "
				   "(pgdl %.9g, torch %.9g), max|torch| %.3g\n",
				   case_name, what, rel, PARITY_RTOL, max_diff, (long long) at,
				   ref->size > 0 ? got[at] : 0.0, ref->size > 0 ? ref->data[at] : 0.0, scale);
	}
}

/*
 * The bias of a layer whose output only a training-mode batchnorm reads has a
 * gradient that is zero in exact arithmetic (the batch mean takes it out):
 * both sides hold rounding noise, so it is compared at the scale of its
 * layer's weight gradient (ResNet's conv -> bn).
 */
static bool
bias_before_batchnorm(const NnModel *m, int i)
{
	int			readers = 0;
	bool		bn = true;

	for (int j = i + 1; j < m->spec.n_layers; j++)
		for (int k = 0; k < nn_layer_n_inputs(&m->spec, j); k++)
			if (nn_layer_src(&m->spec, j, k) == i)
			{
				readers++;
				bn &= m->spec.layers[j].type == NN_BATCHNORM;
			}
	return readers > 0 && bn;
}

static double
tensor_scale(const FixTensor *t)
{
	double		scale = PARITY_SCALE_FLOOR;

	for (int64_t i = 0; t != NULL && i < t->size; i++)
		if (isfinite(t->data[i]) && fabs(t->data[i]) > scale)
			scale = fabs(t->data[i]);
	return scale;
}

static void
compare_tensor(ParityResult *res, const char *case_name, const char *what,
			   const float *got, const FixTensor *ref)
{
	compare_tensor_at(res, case_name, what, got, ref, PARITY_SCALE_FLOOR);
}

/* One failed check per case that had a tensor out of tolerance, naming the worst. */
static void
parity_report(const ParityResult *res, const char *case_name)
{
	const char *verbose = getenv("PGDL_PARITY_VERBOSE");

	CHECK_MSG(res->n_bad == 0, "%s: %d of %d tensors out of tolerance %g; worst (relative %.3g) %s",
			  case_name, res->n_bad, res->n_checked, PARITY_RTOL, res->worst_rel, res->worst_what);
	if (verbose != NULL && strcmp(verbose, "0") != 0)
		printf("    %s: %d tensors, worst relative error %.3g (%s)\n",
			   case_name, res->n_checked, res->worst_rel, res->worst_what);
}

/* ------------------------------------------------------------------------ */
/* Specs                                                                     */
/* ------------------------------------------------------------------------ */

static void
spec_init(NnSpec *spec, int ndim, int c, int h, int w, NnLoss loss)
{
	memset(spec, 0, sizeof(*spec));
	spec->input_ndim = ndim;
	spec->input[0] = c;
	spec->input[1] = h;
	spec->input[2] = w;
	spec->loss = loss;
}

static NnLayerSpec *
spec_add(NnSpec *spec, NnLayerType type)
{
	NnLayerSpec *layer = &spec->layers[spec->n_layers++];

	nn_layer_defaults(layer, type);
	return layer;
}

static void
spec_dense(NnSpec *spec, int units)
{
	spec_add(spec, NN_DENSE)->units = units;
}

static void
spec_conv(NnSpec *spec, int filters, int kernel, int stride, int padding)
{
	NnLayerSpec *layer = spec_add(spec, NN_CONV2D);

	layer->filters = filters;
	layer->kernel = kernel;
	layer->stride = stride;
	layer->padding = padding;
}

static void
spec_pool(NnSpec *spec, NnLayerType type, int kernel)
{
	NnLayerSpec *layer = spec_add(spec, type);

	layer->kernel = kernel;
	layer->stride = kernel;
}

static void
spec_batchnorm(NnSpec *spec)
{
	NnLayerSpec *layer = spec_add(spec, NN_BATCHNORM);

	layer->eps = 1e-5f;
	layer->momentum = 0.1f;
}

/* gen_parity.py: mlp */
static void
spec_mlp(NnSpec *spec)
{
	spec_init(spec, 1, 784, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(spec, 512);
	spec_add(spec, NN_RELU);
	spec_dense(spec, 256);
	spec_add(spec, NN_RELU);
	spec_dense(spec, 10);
}

/* gen_parity.py: cnn */
static void
spec_cnn(NnSpec *spec)
{
	spec_init(spec, 3, 1, 28, 28, NN_LOSS_CROSS_ENTROPY);
	spec_conv(spec, 16, 3, 1, 1);
	spec_add(spec, NN_RELU);
	spec_pool(spec, NN_MAXPOOL2D, 2);
	spec_conv(spec, 32, 3, 1, 1);
	spec_add(spec, NN_RELU);
	spec_pool(spec, NN_MAXPOOL2D, 2);
	spec_add(spec, NN_FLATTEN);
	spec_dense(spec, 10);
}

/* gen_parity.py: mixed_model() */
static void
spec_mixed(NnSpec *spec, NnLoss loss)
{
	spec_init(spec, 3, 3, 12, 12, loss);
	spec_conv(spec, 8, 3, 2, 1);
	spec_add(spec, NN_LEAKY_RELU)->alpha = 0.1f;
	spec_batchnorm(spec);
	spec_pool(spec, NN_AVGPOOL2D, 2);
	spec_conv(spec, 12, 3, 1, 1);
	spec_add(spec, NN_TANH);
	spec_add(spec, NN_GLOBAL_AVGPOOL);
	spec_add(spec, NN_FLATTEN);
	spec_dense(spec, 16);
	spec_add(spec, NN_LEAKY_RELU)->alpha = 0.1f;
	spec_batchnorm(spec);
	spec_dense(spec, 10);
	spec_add(spec, NN_SIGMOID);
	spec_dense(spec, 4);
}

/* gen_parity.py: ResidualNet(3, 8, 8, 10), the graph form */
static void
spec_residual(NnSpec *spec)
{
	NnLayerSpec *add;

	spec_init(spec, 3, 3, 8, 8, NN_LOSS_CROSS_ENTROPY);
	spec_conv(spec, 8, 3, 1, 1);
	spec_batchnorm(spec);
	spec_add(spec, NN_RELU);	/* 2: the stem, read by 3 and 8 */
	spec_conv(spec, 8, 3, 1, 1);
	spec_batchnorm(spec);
	spec_add(spec, NN_RELU);
	spec_conv(spec, 8, 3, 1, 1);
	spec_batchnorm(spec);		/* 7 */
	add = spec_add(spec, NN_ADD);
	add->n_inputs = 2;
	add->inputs[0] = 7;
	add->inputs[1] = 2;
	spec_add(spec, NN_RELU);
	spec_pool(spec, NN_MAXPOOL2D, 2);
	spec_add(spec, NN_FLATTEN);
	spec_dense(spec, 10);
}

/* gen_parity.py: case_groups */
static void
spec_groups(NnSpec *spec)
{
	spec_init(spec, 3, 4, 8, 8, NN_LOSS_CROSS_ENTROPY);
	spec_conv(spec, 4, 3, 1, 1);
	spec->layers[0].groups = 4;
	spec_add(spec, NN_TANH);
	spec_conv(spec, 6, 3, 2, 1);
	spec->layers[2].groups = 2;
	spec_add(spec, NN_TANH);
	spec_add(spec, NN_FLATTEN);
	spec_dense(spec, 5);
}

/* gen_parity.py: case_ln_gelu */
static void
spec_ln_gelu(NnSpec *spec)
{
	spec_init(spec, 1, 24, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(spec, 32);
	spec_add(spec, NN_LAYERNORM);
	spec_add(spec, NN_GELU);
	spec_dense(spec, 5);
}

/* gen_parity.py: case_emb_softmax */
static void
spec_emb_softmax(NnSpec *spec)
{
	NnLayerSpec *l;

	spec_init(spec, 1, 9, 1, 1, NN_LOSS_CROSS_ENTROPY);
	l = spec_add(spec, NN_EMBEDDING);
	l->vocab = 11;
	l->units = 8;
	spec_add(spec, NN_TANH);
	spec_add(spec, NN_SOFTMAX);
	spec_add(spec, NN_GLOBAL_AVGPOOL);
	spec_dense(spec, 5);
}

/* gen_parity.py: case_gru */
static void
spec_gru_case(NnSpec *spec)
{
	NnLayerSpec *l;

	spec_init(spec, 1, 7, 1, 1, NN_LOSS_CROSS_ENTROPY);
	l = spec_add(spec, NN_EMBEDDING);
	l->vocab = 13;
	l->units = 6;
	l = spec_add(spec, NN_GRU);
	l->units = 5;
	l->return_sequences = true;
	spec_add(spec, NN_GRU)->units = 8;
	spec_dense(spec, 4);
}

/* gen_parity.py: case_attention */
static void
spec_attention_case(NnSpec *spec)
{
	NnLayerSpec *l;

	spec_init(spec, 1, 6, 1, 1, NN_LOSS_CROSS_ENTROPY);
	l = spec_add(spec, NN_EMBEDDING);
	l->vocab = 11;
	l->units = 8;
	spec_add(spec, NN_ATTENTION)->heads = 4;
	spec_add(spec, NN_TANH);
	l = spec_add(spec, NN_ATTENTION);
	l->heads = 2;
	l->causal = true;
	spec_dense(spec, 5);
}

/* gen_parity.py: case_encoder: the graph form's add, layernorm over each step */
static void
spec_encoder_case(NnSpec *spec)
{
	NnLayerSpec *l;

	spec_init(spec, 1, 5, 1, 1, NN_LOSS_CROSS_ENTROPY);
	l = spec_add(spec, NN_EMBEDDING);		/* 0 */
	l->vocab = 9;
	l->units = 8;
	l = spec_add(spec, NN_ATTENTION);		/* 1 */
	l->heads = 2;
	l->causal = true;
	l = spec_add(spec, NN_ADD);			/* 2 */
	l->n_inputs = 2;
	l->inputs[0] = 0;
	l->inputs[1] = 1;
	spec_add(spec, NN_LAYERNORM)->eps = 1e-5f;
	spec_add(spec, NN_GELU);
	spec_add(spec, NN_GLOBAL_AVGPOOL);
	spec_dense(spec, 3);
}

/* gen_parity.py: case_conv1d */
static void
spec_conv1d_case(NnSpec *spec)
{
	NnLayerSpec *l;

	spec_init(spec, 1, 11, 1, 1, NN_LOSS_CROSS_ENTROPY);
	l = spec_add(spec, NN_EMBEDDING);
	l->vocab = 12;
	l->units = 5;
	l = spec_add(spec, NN_CONV1D);
	l->filters = 6;
	l->kernel = 3;
	l->padding = 1;
	spec_add(spec, NN_RELU);
	l = spec_add(spec, NN_CONV1D);
	l->filters = 4;
	l->kernel = 2;
	l->stride = 2;
	spec_add(spec, NN_GLOBAL_AVGPOOL);
	spec_dense(spec, 3);
}

/* gen_parity.py: case_per_step */
static void
spec_per_step_case(NnSpec *spec)
{
	NnLayerSpec *l;

	spec_init(spec, 1, 7, 1, 1, NN_LOSS_CROSS_ENTROPY);
	l = spec_add(spec, NN_EMBEDDING);
	l->vocab = 10;
	l->units = 6;
	l = spec_add(spec, NN_DENSE);
	l->units = 12;
	l->per_step = true;
	spec_add(spec, NN_GELU);
	l = spec_add(spec, NN_DENSE);
	l->units = 4;
	l->per_step = true;
	spec_dense(spec, 3);		/* flattens the sequence, as before per_step */
}

/* gen_parity.py: case_positions */
static void
spec_positions_case(NnSpec *spec)
{
	NnLayerSpec *l;

	spec_init(spec, 1, 6, 1, 1, NN_LOSS_CROSS_ENTROPY);
	l = spec_add(spec, NN_EMBEDDING);
	l->vocab = 7;
	l->units = 5;
	l->positions = true;
	spec_add(spec, NN_TANH);
	spec_add(spec, NN_GLOBAL_AVGPOOL);
	spec_dense(spec, 3);
}

/* an add of layers a and b */
static void
spec_add_of(NnSpec *spec, int a, int b)
{
	NnLayerSpec *l = spec_add(spec, NN_ADD);

	l->n_inputs = 2;
	l->inputs[0] = (int16_t) a;
	l->inputs[1] = (int16_t) b;
}

/*
 * A post-norm transformer encoder block in the graph form: embeddings with
 * positions, layernorm(x + attention(x)), layernorm(h + ff(h)) with a
 * per-step feed-forward, the mean over steps, a dense head.
 */
static void
spec_transformer(NnSpec *spec, int steps, int vocab, int dim, int heads, int hidden, int classes)
{
	NnLayerSpec *l;

	spec_init(spec, 1, steps, 1, 1, NN_LOSS_CROSS_ENTROPY);
	l = spec_add(spec, NN_EMBEDDING);		/* 0 */
	l->vocab = vocab;
	l->units = dim;
	l->positions = true;
	spec_add(spec, NN_ATTENTION)->heads = heads;	/* 1 */
	spec_add_of(spec, 0, 1);				/* 2 */
	spec_add(spec, NN_LAYERNORM)->eps = 1e-5f;	/* 3 */
	l = spec_add(spec, NN_DENSE);			/* 4 */
	l->units = hidden;
	l->per_step = true;
	spec_add(spec, NN_GELU);				/* 5 */
	l = spec_add(spec, NN_DENSE);			/* 6 */
	l->units = dim;
	l->per_step = true;
	spec_add_of(spec, 3, 6);				/* 7 */
	spec_add(spec, NN_LAYERNORM)->eps = 1e-5f;	/* 8 */
	spec_add(spec, NN_GLOBAL_AVGPOOL);
	spec_dense(spec, classes);
}

/* gen_parity.py: case_optim */
static void
spec_optim_mlp(NnSpec *spec)
{
	spec_init(spec, 1, 20, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(spec, 16);
	spec_add(spec, NN_RELU);
	spec_dense(spec, 5);
}

/* ------------------------------------------------------------------------ */
/* Model <-> fixture                                                         */
/* ------------------------------------------------------------------------ */

/* tensors of a layer with parameters: weight and bias, but an embedding's table is one (two with positions) */
static int
layer_tensor_count(const NnLayerSpec *l, bool buffers)
{
	NnLayerType type = l->type;

	if (!buffers && type == NN_EMBEDDING)
		return l->positions ? 2 : 1;
	if (!buffers && (type == NN_GRU || type == NN_ATTENTION))
		return 4;				/* gru: weight_ih, weight_hh, bias_ih, bias_hh; attention: two weights, two biases */
	return 2;
}

static const char *
param_name(NnLayerType type, int which)
{
	if (type == NN_BATCHNORM)
		return which == 0 ? "gamma" : "beta";
	if (type == NN_GRU)
		return (const char *[]) {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}[which];
	if (type == NN_EMBEDDING)
		return which == 0 ? "weight" : "positions";
	if (type == NN_ATTENTION)
		return (const char *[]) {"in_proj_weight", "out_proj_weight", "in_proj_bias", "out_proj_bias"}[which];
	return which == 0 ? "weight" : "bias";
}

/*
 * Each layer with parameters holds two tensors, (weight, bias) or (gamma, beta),
 * one after the other from param_off; each batchnorm holds two buffers, running
 * mean then running variance, from buffer_off.  gen_parity.py numbers the
 * tensors k = 0, 1, ... in the same order.
 *
 * load_reference copies "param.k" into m->params and "buffer.k.before" into
 * m->buffers, checking that the fixture's tensors fill each layer exactly.
 */
static bool
load_reference(NnModel *m, const Fixture *fx)
{
	int			k;
	char		name[64];

	for (int pass = 0; pass < 2; pass++)
	{
		bool		buffers = pass == 1;

		k = 0;
		for (int i = 0; i < m->spec.n_layers; i++)
		{
			int64_t		len = buffers ? m->buffer_len[i] : m->param_len[i];
			float	   *dst = buffers ? m->buffers + m->buffer_off[i] : m->params + m->param_off[i];
			int64_t		done = 0;

			if (len == 0)
				continue;
			for (int which = 0; which < layer_tensor_count(&m->spec.layers[i], buffers); which++, k++)
			{
				const FixTensor *t;

				snprintf(name, sizeof(name), buffers ? "buffer.%d.before" : "param.%d", k);
				t = fixture_get(fx, name, -1);
				if (t == NULL)
					return false;
				if (done + t->size > len)
				{
					CHECK_MSG(false, "%s: layer %d (%s) has %lld %s, fixture has more (%s)",
							  fx->case_name, i, nn_layer_type_name(m->spec.layers[i].type),
							  (long long) len, buffers ? "buffer floats" : "parameters", name);
					return false;
				}
				memcpy(dst + done, t->data, sizeof(float) * t->size);
				done += t->size;
			}
			if (done != len)
			{
				CHECK_MSG(false, "%s: layer %d (%s) has %lld %s, fixture has %lld",
						  fx->case_name, i, nn_layer_type_name(m->spec.layers[i].type), (long long) len,
						  buffers ? "buffer floats" : "parameters", (long long) done);
				return false;
			}
		}
		snprintf(name, sizeof(name), buffers ? "buffer.%d.before" : "param.%d", k);
		if (fixture_has(fx, name))
		{
			CHECK_MSG(false, "%s: fixture has more %s than the model (%s)", fx->case_name,
					  buffers ? "buffers" : "parameter tensors", name);
			return false;
		}
	}
	return true;
}

/*
 * Compare pgdl's parameter-shaped array (params or grads, same layout) or its
 * buffers against the tensors named printf(fmt, k).
 */
static void
compare_blocks(ParityResult *res, NnModel *m, const Fixture *fx, bool buffers,
			   const float *mine, const char *fmt)
{
	double		weight_scale = PARITY_SCALE_FLOOR;
	int			k = 0;
	char		name[64];
	char		what[160];

	for (int i = 0; i < m->spec.n_layers; i++)
	{
		int64_t		len = buffers ? m->buffer_len[i] : m->param_len[i];
		const float *src = mine + (buffers ? m->buffer_off[i] : m->param_off[i]);
		int64_t		done = 0;
		NnLayerType type = m->spec.layers[i].type;

		if (len == 0)
			continue;
		for (int which = 0; which < layer_tensor_count(&m->spec.layers[i], buffers); which++, k++)
		{
			const FixTensor *t;

			snprintf(name, sizeof(name), fmt, k);
			t = fixture_get(fx, name, -1);
			if (t == NULL)
				return;
			if (done + t->size > len)
			{
				CHECK_MSG(false, "%s: %s does not fit layer %d", fx->case_name, name, i);
				return;
			}
			if (buffers)
				snprintf(what, sizeof(what), "%s (layer %d %s running_%s)", name, i,
						 nn_layer_type_name(type), which == 0 ? "mean" : "var");
			else
				snprintf(what, sizeof(what), "%s (layer %d %s %s)", name, i,
						 nn_layer_type_name(type), param_name(type, which));
			if (!buffers && which == 1 && bias_before_batchnorm(m, i))
				compare_tensor_at(res, fx->case_name, what, src + done, t, weight_scale);
			else
				compare_tensor(res, fx->case_name, what, src + done, t);
			if (which == 0)
				weight_scale = tensor_scale(t);
			done += t->size;
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Cases                                                                     */
/* ------------------------------------------------------------------------ */

static NnModel *
create_model(const char *case_name, const NnSpec *spec)
{
	NnError		err;
	NnModel    *m;

	memset(&err, 0, sizeof(err));
	m = nn_model_create(spec, 12345, &err);
	CHECK_MSG(m != NULL, "%s: nn_model_create: %s (layer %d, field %s)",
			  case_name, err.msg, err.layer, err.field);
	return m;
}

/* One training-mode forward pass, the loss and the backward pass. */
static void
run_forward_backward(const char *case_name, const NnSpec *spec)
{
	Fixture		fx;
	ParityResult res;
	NnModel    *m;
	NnError		err;
	NnBatchStats stats;
	const FixTensor *x,
			   *y,
			   *t;
	const float *out;
	int32_t		n;

	memset(&res, 0, sizeof(res));
	if (!fixture_load(&fx, case_name))
		return;
	m = create_model(case_name, spec);
	if (m == NULL)
		goto done;

	x = fixture_get(&fx, "x", -1);
	if (x == NULL)
		goto done;
	n = x->ndim > 0 ? (int32_t) x->dims[0] : 0;
	if (fixture_get(&fx, "x", (int64_t) n * nn_model_input_size(m)) == NULL ||
		(y = fixture_get(&fx, "y", (int64_t) n * nn_model_target_size(m))) == NULL ||
		!load_reference(m, &fx))
		goto done;

	m->want_dinput = true;
	memset(&err, 0, sizeof(err));
	if (!nn_model_reserve(m, n, &err))
	{
		CHECK_MSG(false, "%s: nn_model_reserve(%d): %s", case_name, n, err.msg);
		goto done;
	}

	out = nn_model_forward(m, x->data, n, true);
	CHECK_MSG(out != NULL, "%s: nn_model_forward returned NULL", case_name);
	if (out == NULL)
		goto done;
	compare_tensor(&res, case_name, "out (forward output)", out,
				   fixture_get(&fx, "out", (int64_t) n * nn_model_output_size(m)));
	compare_blocks(&res, m, &fx, true, m->buffers, "buffer.%d.after");

	memset(&stats, 0, sizeof(stats));
	if (!nn_model_loss(m, y->data, n, &stats, &err))
	{
		CHECK_MSG(false, "%s: nn_model_loss: %s", case_name, err.msg);
		goto done;
	}
	CHECK_MSG(stats.n == n, "%s: stats.n = %lld, batch %d", case_name, (long long) stats.n, n);
	if ((t = fixture_get(&fx, "loss", 1)) != NULL)
	{
		float		loss = (float) (stats.loss_sum / n);

		compare_tensor(&res, case_name, "loss (mean)", &loss, t);
	}

	nn_model_backward(m);
	compare_blocks(&res, m, &fx, false, m->grads, "grad.%d");
	CHECK_MSG(m->dinput != NULL, "%s: m->dinput is NULL with want_dinput", case_name);
	if (m->dinput != NULL)
		compare_tensor(&res, case_name, "dx (input gradient)", m->dinput,
					   fixture_get(&fx, "dx", (int64_t) n * nn_model_input_size(m)));
	parity_report(&res, case_name);

done:
	if (m)
		nn_model_free(m);
	fixture_free(&fx);
}

/* Five training steps with one optimizer, the parameters compared after each. */
static void
run_optim(const char *case_name, NnOptType type)
{
	Fixture		fx;
	ParityResult res;
	NnSpec		spec;
	NnModel    *m = NULL;
	NnOptim		opt;
	NnError		err;
	const FixTensor *h;
	char		name[64];

	memset(&res, 0, sizeof(res));
	if (!fixture_load(&fx, case_name))
		return;
	spec_optim_mlp(&spec);
	m = create_model(case_name, &spec);
	if (m == NULL || (h = fixture_get(&fx, "optim", 7)) == NULL)
		goto done;

	/* optim = [lr, momentum, nesterov, weight_decay, beta1, beta2, eps] */
	nn_optim_defaults(&opt, type);
	opt.lr = h->data[0];
	opt.weight_decay = h->data[3];
	if (type == NN_OPT_SGD)
	{
		opt.momentum = h->data[1];
		opt.nesterov = h->data[2] != 0;
	}
	else if (type == NN_OPT_RMSPROP || type == NN_OPT_ADAGRAD)
	{
		const FixTensor *h2 = fixture_get(&fx, "optim2", 4);

		/* optim2 = [alpha, centered, lr_decay, initial_accumulator_value] */
		if (h2 == NULL)
			goto done;
		opt.eps = h->data[6];
		if (type == NN_OPT_RMSPROP)
		{
			opt.momentum = h->data[1];
			opt.alpha = h2->data[0];
			opt.centered = h2->data[1] != 0;
		}
		else
		{
			opt.lr_decay = h2->data[2];
			opt.initial_accumulator_value = h2->data[3];
		}
	}
	else
	{
		opt.beta1 = h->data[4];
		opt.beta2 = h->data[5];
		opt.eps = h->data[6];
	}
	memset(&err, 0, sizeof(err));
	if (!nn_model_set_optim(m, &opt, &err))
	{
		CHECK_MSG(false, "%s: nn_model_set_optim: %s (field %s)", case_name, err.msg, err.field);
		goto done;
	}
	if (!load_reference(m, &fx))
		goto done;

	for (int s = 0; s < OPTIM_STEPS; s++)
	{
		const FixTensor *x,
				   *y;
		NnBatchStats stats;
		int32_t		n;
		char		fmt[64];

		snprintf(name, sizeof(name), "x.%d", s);
		if ((x = fixture_get(&fx, name, -1)) == NULL)
			goto done;
		n = x->ndim > 0 ? (int32_t) x->dims[0] : 0;
		if (fixture_get(&fx, name, (int64_t) n * nn_model_input_size(m)) == NULL)
			goto done;
		snprintf(name, sizeof(name), "y.%d", s);
		if ((y = fixture_get(&fx, name, (int64_t) n * nn_model_target_size(m))) == NULL)
			goto done;
		if (!nn_model_reserve(m, n, &err))
		{
			CHECK_MSG(false, "%s: nn_model_reserve(%d): %s", case_name, n, err.msg);
			goto done;
		}
		memset(&stats, 0, sizeof(stats));
		if (!nn_model_train_step(m, x->data, y->data, n, &stats, &err))
		{
			CHECK_MSG(false, "%s: nn_model_train_step %d: %s", case_name, s, err.msg);
			goto done;
		}
		snprintf(fmt, sizeof(fmt), "step.%d.param.%%d", s);
		compare_blocks(&res, m, &fx, false, m->params, fmt);
	}
	parity_report(&res, case_name);

done:
	if (m)
		nn_model_free(m);
	fixture_free(&fx);
}

UNIT_TEST(parity_mlp)
{
	static NnSpec spec;

	spec_mlp(&spec);
	run_forward_backward("mlp", &spec);
}

UNIT_TEST(parity_ln_gelu)
{
	NnSpec		spec;

	spec_ln_gelu(&spec);
	run_forward_backward("ln_gelu", &spec);
}

UNIT_TEST(parity_emb_softmax)
{
	NnSpec		spec;

	spec_emb_softmax(&spec);
	run_forward_backward("emb_softmax", &spec);
}

UNIT_TEST(parity_gru)
{
	NnSpec		spec;

	spec_gru_case(&spec);
	run_forward_backward("gru", &spec);
}

UNIT_TEST(parity_attention)
{
	NnSpec		spec;

	spec_attention_case(&spec);
	run_forward_backward("attention", &spec);
}

UNIT_TEST(parity_encoder)
{
	NnSpec		spec;

	spec_encoder_case(&spec);
	run_forward_backward("encoder", &spec);
}

UNIT_TEST(parity_per_step)
{
	NnSpec		spec;

	spec_per_step_case(&spec);
	run_forward_backward("per_step", &spec);
}

UNIT_TEST(parity_positions)
{
	NnSpec		spec;

	spec_positions_case(&spec);
	run_forward_backward("positions", &spec);
}

/* gen_parity.py: case_transformer */
UNIT_TEST(parity_transformer)
{
	NnSpec		spec;

	spec_transformer(&spec, 6, 13, 8, 2, 16, 4);
	run_forward_backward("transformer", &spec);
}

UNIT_TEST(parity_conv1d)
{
	NnSpec		spec;

	spec_conv1d_case(&spec);
	run_forward_backward("conv1d", &spec);
}

UNIT_TEST(parity_cnn)
{
	static NnSpec spec;

	spec_cnn(&spec);
	run_forward_backward("cnn", &spec);
}

UNIT_TEST(parity_mixed_mse)
{
	static NnSpec spec;

	spec_mixed(&spec, NN_LOSS_MSE);
	run_forward_backward("mixed_mse", &spec);
}

UNIT_TEST(parity_mixed_bce)
{
	static NnSpec spec;

	spec_mixed(&spec, NN_LOSS_BCE);
	run_forward_backward("mixed_bce", &spec);
}

UNIT_TEST(parity_mixed_huber)
{
	static NnSpec spec;

	spec_mixed(&spec, NN_LOSS_HUBER);
	spec.delta = 0.5f;
	run_forward_backward("mixed_huber", &spec);
}

UNIT_TEST(parity_residual_block)
{
	static NnSpec spec;

	spec_residual(&spec);
	run_forward_backward("residual", &spec);
}

UNIT_TEST(parity_conv2d_groups)
{
	static NnSpec spec;

	spec_groups(&spec);
	run_forward_backward("groups", &spec);
}

UNIT_TEST(parity_optim_sgd)
{
	run_optim("optim_sgd", NN_OPT_SGD);
}

UNIT_TEST(parity_optim_sgd_momentum)
{
	run_optim("optim_sgd_momentum", NN_OPT_SGD);
}

UNIT_TEST(parity_optim_sgd_nesterov)
{
	run_optim("optim_sgd_nesterov", NN_OPT_SGD);
}

UNIT_TEST(parity_optim_adam)
{
	run_optim("optim_adam", NN_OPT_ADAM);
}

UNIT_TEST(parity_optim_adamw)
{
	run_optim("optim_adamw", NN_OPT_ADAMW);
}

UNIT_TEST(parity_optim_rmsprop)
{
	run_optim("optim_rmsprop", NN_OPT_RMSPROP);
}

UNIT_TEST(parity_optim_rmsprop_centered)
{
	run_optim("optim_rmsprop_centered", NN_OPT_RMSPROP);
}

UNIT_TEST(parity_optim_adagrad)
{
	run_optim("optim_adagrad", NN_OPT_ADAGRAD);
}

/* ------------------------------------------------------------------------ */
/* Training methods                                                          */
/* ------------------------------------------------------------------------ */

/*
 * methods_*: the optim_* MLP trained 5 steps with gradient clipping, label
 * smoothing, per-group weight decay and step warmup, as gen_parity.py's
 * case_methods does with torch (clip_grad_norm_, CrossEntropyLoss
 * (label_smoothing), parameter groups, LinearLR stepped per step); the
 * parameters after each step and each step's loss, to PARITY_RTOL.
 */
static void
run_methods(const char *case_name)
{
	Fixture		fx;
	ParityResult res;
	NnSpec		spec;
	NnModel    *m = NULL;
	NnOptim		opt;
	NnError		err;
	const FixTensor *h;
	char		name[64];

	memset(&res, 0, sizeof(res));
	if (!fixture_load(&fx, case_name))
		return;
	spec_optim_mlp(&spec);
	m = create_model(case_name, &spec);
	if (m == NULL || (h = fixture_get(&fx, "hp", 9)) == NULL)
		goto done;

	/* hp = [optimizer, lr, momentum, weight_decay, clip_norm, label_smoothing, no_decay, warmup_steps, warmup_start] */
	nn_optim_defaults(&opt, h->data[0] == 1 ? NN_OPT_SGD : NN_OPT_ADAMW);
	opt.lr = h->data[1];
	opt.momentum = h->data[2];
	opt.weight_decay = h->data[3];
	opt.clip_norm = h->data[4];
	opt.label_smoothing = h->data[5];
	opt.no_decay_bias_norm = h->data[6] != 0;
	opt.warmup_steps = (int64_t) h->data[7];
	opt.warmup_start = h->data[8];
	memset(&err, 0, sizeof(err));
	if (!nn_model_set_optim(m, &opt, &err))
	{
		CHECK_MSG(false, "%s: nn_model_set_optim: %s (field %s)", case_name, err.msg, err.field);
		goto done;
	}
	if (!load_reference(m, &fx))
		goto done;

	for (int s = 0; s < OPTIM_STEPS; s++)
	{
		const FixTensor *x,
				   *y;
		NnBatchStats stats;
		int32_t		n;
		char		fmt[64];
		float		loss;

		snprintf(name, sizeof(name), "x.%d", s);
		if ((x = fixture_get(&fx, name, -1)) == NULL)
			goto done;
		n = x->ndim > 0 ? (int32_t) x->dims[0] : 0;
		snprintf(name, sizeof(name), "y.%d", s);
		if ((y = fixture_get(&fx, name, (int64_t) n * nn_model_target_size(m))) == NULL)
			goto done;
		if (!nn_model_reserve(m, n, &err))
		{
			CHECK_MSG(false, "%s: nn_model_reserve(%d): %s", case_name, n, err.msg);
			goto done;
		}
		memset(&stats, 0, sizeof(stats));
		if (!nn_model_train_step(m, x->data, y->data, n, &stats, &err))
		{
			CHECK_MSG(false, "%s: nn_model_train_step %d: %s", case_name, s, err.msg);
			goto done;
		}
		loss = (float) (stats.loss_sum / stats.n);
		snprintf(name, sizeof(name), "loss.%d", s);
		compare_tensor(&res, case_name, name, &loss, fixture_get(&fx, name, 1));
		snprintf(fmt, sizeof(fmt), "step.%d.param.%%d", s);
		compare_blocks(&res, m, &fx, false, m->params, fmt);
	}
	parity_report(&res, case_name);

done:
	if (m)
		nn_model_free(m);
	fixture_free(&fx);
}

UNIT_TEST(parity_methods_sgd_clip_ls)
{
	run_methods("methods_sgd_clip_ls");
}

UNIT_TEST(parity_methods_adamw_nodecay_warmup)
{
	run_methods("methods_adamw_nodecay_warmup");
}

UNIT_TEST(parity_methods_sgd_nodecay_clip)
{
	run_methods("methods_sgd_nodecay_clip");
}

/*
 * weighted_*: the optim_* MLP (cross_entropy) or a 20-16-3 one (mse) trained
 * 5 steps with SGD and class weights (nn_model_set_class_weights) and row
 * weights (nn_model_weigh_next), as gen_parity.py's case_weighted does with
 * torch: sum(w_i * l_i) / sum(w_i), CrossEntropyLoss(weight) itself for class
 * weights alone.  The parameters after each step, and each step's reported
 * loss (the plain mean), to 1e-5 relative (tighter than PARITY_RTOL).
 */
static void
run_weighted(const char *case_name, bool mse)
{
	Fixture		fx;
	ParityResult res;
	NnSpec		spec;
	NnModel    *m = NULL;
	NnOptim		opt;
	NnError		err;
	const FixTensor *cw;
	char		name[64];

	memset(&res, 0, sizeof(res));
	memset(&err, 0, sizeof(err));
	if (!fixture_load(&fx, case_name))
		return;
	spec_init(&spec, 1, 20, 1, 1, mse ? NN_LOSS_MSE : NN_LOSS_CROSS_ENTROPY);
	spec_dense(&spec, 16);
	spec_add(&spec, NN_RELU);
	spec_dense(&spec, mse ? 3 : 5);
	m = create_model(case_name, &spec);
	if (m == NULL)
		goto done;
	nn_optim_defaults(&opt, NN_OPT_SGD);
	opt.lr = 0.1f;
	opt.momentum = 0.9f;
	if (!nn_model_set_optim(m, &opt, &err) || !load_reference(m, &fx))
	{
		CHECK_MSG(false, "%s: set up: %s", case_name, err.msg);
		goto done;
	}
	cw = fixture_has(&fx, "cw") ? fixture_get(&fx, "cw", 5) : NULL;
	if (cw != NULL && !nn_model_set_class_weights(m, cw->data, 5, &err))
	{
		CHECK_MSG(false, "%s: nn_model_set_class_weights: %s", case_name, err.msg);
		goto done;
	}
	for (int s = 0; s < OPTIM_STEPS; s++)
	{
		const FixTensor *x,
				   *y,
				   *rw;
		NnBatchStats stats;
		int32_t		n;
		char		fmt[64];
		float		loss;

		snprintf(name, sizeof(name), "x.%d", s);
		if ((x = fixture_get(&fx, name, -1)) == NULL)
			goto done;
		n = x->ndim > 0 ? (int32_t) x->dims[0] : 0;
		snprintf(name, sizeof(name), "y.%d", s);
		if ((y = fixture_get(&fx, name, (int64_t) n * nn_model_target_size(m))) == NULL)
			goto done;
		snprintf(name, sizeof(name), "rw.%d", s);
		rw = fixture_has(&fx, name) ? fixture_get(&fx, name, n) : NULL;
		nn_model_weigh_next(m, rw != NULL ? rw->data : NULL);
		memset(&stats, 0, sizeof(stats));
		if (!nn_model_train_step(m, x->data, y->data, n, &stats, &err))
		{
			CHECK_MSG(false, "%s: nn_model_train_step %d: %s", case_name, s, err.msg);
			goto done;
		}
		loss = (float) (stats.loss_sum / stats.n);
		snprintf(name, sizeof(name), "loss.%d", s);
		compare_tensor(&res, case_name, name, &loss, fixture_get(&fx, name, 1));
		snprintf(fmt, sizeof(fmt), "step.%d.param.%%d", s);
		compare_blocks(&res, m, &fx, false, m->params, fmt);
	}
	parity_report(&res, case_name);
	CHECK_MSG(res.n_checked > 0 && res.worst_rel <= 1e-5, "%s: worst relative error %.3g > 1e-5 (%s)",
			  case_name, res.worst_rel, res.worst_what);

done:
	if (m)
		nn_model_free(m);
	fixture_free(&fx);
}

UNIT_TEST(parity_weighted_xent_class)
{
	run_weighted("weighted_xent_class", false);
}

UNIT_TEST(parity_weighted_xent_class_rows)
{
	run_weighted("weighted_xent_class_rows", false);
}

UNIT_TEST(parity_weighted_mse_rows)
{
	run_weighted("weighted_mse_rows", true);
}

/* One schedule's lr per epoch (or per step: warmup_steps) against torch's, to 1e-6 relative. */
static void
check_schedule(const Fixture *fx, const char *name, const NnOptim *base, bool per_step)
{
	const FixTensor *t = fixture_get(fx, name, -1);

	if (t == NULL)
		return;
	for (int64_t e = 0; e < t->size; e++)
	{
		NnOptim		o = *base;
		double		lr;

		o.epoch = per_step ? 0 : (int32_t) e;
		lr = nn_optim_lr(&o, per_step ? e + 1 : 1);
		CHECK_MSG(fabs(lr - t->data[e]) <= 1e-6 * fabs(t->data[e]) + 1e-12,
				  "%s[%lld]: pgdl %.9g, torch %.9g", name, (long long) e, lr, (double) t->data[e]);
	}
}

UNIT_TEST(parity_schedules)
{
	Fixture		fx;
	NnOptim		o;
	NnError		err;

	if (!fixture_load(&fx, "schedules"))
		return;
	nn_optim_defaults(&o, NN_OPT_SGD);
	o.lr = 0.1f;
	o.schedule = NN_SCHED_STEP;
	o.step_size = 3;
	o.gamma = 0.5f;
	CHECK(nn_optim_validate(&o, &err));
	check_schedule(&fx, "lr.step", &o, false);

	nn_optim_defaults(&o, NN_OPT_SGD);
	o.lr = 0.1f;
	o.schedule = NN_SCHED_COSINE;
	o.eta_min = 0.001f;
	o.epochs = 10;
	CHECK(nn_optim_validate(&o, &err));
	check_schedule(&fx, "lr.cosine", &o, false);

	o.eta_min = 0.0f;
	o.warmup_epochs = 3;
	o.warmup_start = 0.25f;
	CHECK(nn_optim_validate(&o, &err));
	check_schedule(&fx, "lr.warmup_cosine", &o, false);

	nn_optim_defaults(&o, NN_OPT_SGD);
	o.lr = 0.1f;
	o.schedule = NN_SCHED_STEP;
	o.step_size = 3;
	o.gamma = 0.5f;
	o.warmup_epochs = 2;
	o.warmup_start = 0.25f;
	check_schedule(&fx, "lr.warmup_step", &o, false);

	nn_optim_defaults(&o, NN_OPT_SGD);
	o.lr = 0.1f;
	o.warmup_steps = 5;
	o.warmup_start = 0.1f;
	check_schedule(&fx, "lr.warmup_steps", &o, true);
	fixture_free(&fx);
}
