/*
 * gen_corpus.c -- writes the fuzz targets' seed corpus: gen_corpus DIR makes
 * DIR/blob, DIR/spec, DIR/packed and (gen_onnx.c) DIR/onnx.  Everything is
 * deterministic (weights are a formula, not random draws or training), so
 * `make fuzz-corpus` rewrites regress/fuzz/corpus byte for byte and the fuzz
 * smoke test checks that it does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nn/nn.h"

#include "gen_onnx.h"

static const char *out_dir;

static void
write_file(const char *target, const char *name, const void *data, size_t len)
{
	char		path[512];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s", out_dir, target);
	mkdir(path, 0777);
	snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0)
	{
		perror(path);
		exit(1);
	}
}

/* ---- model blobs ---- */

static NnLayerSpec *
add(NnSpec *s, NnLayerType type)
{
	NnLayerSpec *l = &s->layers[s->n_layers++];

	nn_layer_defaults(l, type);
	return l;
}

static void
begin(NnSpec *s, int ndim, int c, int h, int w, NnLoss loss)
{
	memset(s, 0, sizeof(*s));
	s->input_ndim = ndim;
	s->input[0] = c;
	s->input[1] = ndim == 3 ? h : 0;
	s->input[2] = ndim == 3 ? w : 0;
	s->loss = loss;
}

static void
write_blob(const char *name, const NnSpec *s, NnOptType opt, bool momentum, int64_t step)
{
	NnError		err;
	NnModel    *m = nn_model_create(s, 7, &err);
	size_t		len;
	uint8_t    *blob;

	if (m == NULL)
	{
		fprintf(stderr, "%s: %s\n", name, err.msg);
		exit(1);
	}
	/* exact binary fractions, the same on every machine */
	for (int64_t i = 0; i < m->n_params; i++)
		m->params[i] = (float) ((i * 37) % 19 - 9) / 16.0f;
	for (int64_t i = 0; i < m->n_buffers; i++)
		m->buffers[i] = (float) (i % 3) / 4.0f + 0.5f;
	if (opt != 0)
	{
		NnOptim		o;

		nn_optim_defaults(&o, opt);
		if (momentum && opt == NN_OPT_RMSPROP)
		{
			o.momentum = 0.875f;
			o.centered = true;
		}
		else if (momentum)
		{
			o.momentum = 0.875f;
			o.nesterov = true;
		}
		if (opt == NN_OPT_ADAGRAD)
		{
			o.lr_decay = 0.125f;
			o.initial_accumulator_value = 0.25f;
		}
		if (!nn_model_set_optim(m, &o, &err))
		{
			fprintf(stderr, "%s: %s\n", name, err.msg);
			exit(1);
		}
		for (int64_t i = 0; i < m->n_opt_state; i++)
			m->opt_state[i] = (float) (i % 5) / 32.0f;
	}
	m->step = step;
	len = nn_model_serialized_size(m);
	blob = malloc(len);
	nn_model_serialize(m, blob);
	write_file("blob", name, blob, len);
	free(blob);
	nn_model_free(m);
}

static void
blobs(void)
{
	NnSpec		s;

	begin(&s, 1, 4, 1, 1, NN_LOSS_CROSS_ENTROPY);
	add(&s, NN_DENSE)->units = 5;
	add(&s, NN_RELU);
	add(&s, NN_DENSE)->units = 3;
	write_blob("mlp", &s, 0, false, 0);
	write_blob("mlp_sgd_nesterov", &s, NN_OPT_SGD, true, 12);
	write_blob("mlp_adam_last_step", &s, NN_OPT_ADAM, false, NN_MAX_STEP);

	begin(&s, 3, 1, 6, 6, NN_LOSS_CROSS_ENTROPY);
	{
		NnLayerSpec *c = add(&s, NN_CONV2D);

		c->filters = 2;
		c->kernel = 3;
		c->padding = 1;
	}
	add(&s, NN_BATCHNORM);
	add(&s, NN_RELU);
	add(&s, NN_MAXPOOL2D)->kernel = 2;
	add(&s, NN_FLATTEN);
	add(&s, NN_DENSE)->units = 3;
	write_blob("cnn_adam", &s, NN_OPT_ADAM, false, 3);

	begin(&s, 3, 2, 6, 6, NN_LOSS_MSE);
	{
		NnLayerSpec *c = add(&s, NN_CONV2D);

		c->filters = 3;
		c->kernel = 2;
		c->stride = 2;
		c->init = NN_INIT_GLOROT;
	}
	add(&s, NN_LEAKY_RELU)->alpha = 0.25f;
	{
		NnLayerSpec *p = add(&s, NN_AVGPOOL2D);

		p->kernel = 2;
		p->stride = 1;
	}
	add(&s, NN_DROPOUT)->rate = 0.125f;
	add(&s, NN_GLOBAL_AVGPOOL);
	add(&s, NN_FLATTEN);
	add(&s, NN_DENSE)->units = 4;
	add(&s, NN_SIGMOID);
	add(&s, NN_TANH);
	add(&s, NN_DENSE)->units = 2;
	write_blob("every_layer_adamw", &s, NN_OPT_ADAMW, false, 5);

	begin(&s, 1, 3, 1, 1, NN_LOSS_BCE);
	add(&s, NN_DENSE)->units = 1;
	write_blob("logistic_sgd", &s, NN_OPT_SGD, false, 1);

	/* format version 3 (huber's delta), and the optimizers whose settings share the others' slots */
	begin(&s, 1, 3, 1, 1, NN_LOSS_HUBER);
	s.delta = 0.75f;
	add(&s, NN_DENSE)->units = 4;
	add(&s, NN_TANH);
	add(&s, NN_DENSE)->units = 2;
	write_blob("huber_rmsprop_centered", &s, NN_OPT_RMSPROP, true, 9);
	write_blob("huber_adagrad", &s, NN_OPT_ADAGRAD, false, 4);
}

/* ---- jsonb specs and configurations (the fuzzer reads them as text) ---- */

static const char *const specs[][2] = {
	{"mlp", "{\"input\": [4], \"layers\": [{\"type\": \"dense\", \"units\": 5}, {\"type\": \"relu\"}, "
	 "{\"type\": \"dense\", \"units\": 3}], \"loss\": \"cross_entropy\"}"},
	{"cnn", "{\"input\": [1, 6, 6], \"layers\": [{\"type\": \"Conv\", \"filters\": 2, \"kernel\": 3, "
	 "\"padding\": 1, \"init\": \"glorot\"}, {\"type\": \"batchnorm\", \"eps\": 0.001, \"momentum\": 0.2}, "
	 "{\"type\": \"leaky_relu\", \"alpha\": 0.1}, {\"type\": \"maxpool2d\", \"size\": 2}, "
	 "{\"type\": \"dropout\", \"rate\": 0.25}, {\"type\": \"flatten\"}, "
	 "{\"type\": \"dense\", \"units\": 3, \"init\": \"he\"}]}"},
	{"every_layer", "{\"input\": [2, 5, 5], \"layers\": [{\"type\": \"conv2d\", \"filters\": 3, \"kernel\": 2, "
	 "\"stride\": 2}, {\"type\": \"AveragePool\", \"kernel\": 2, \"stride\": 1}, {\"type\": \"MaxPool\", \"size\": 1}, "
	 "{\"type\": \"BatchNormalization\"}, {\"type\": \"GlobalAveragePool\"}, {\"type\": \"Flatten\"}, "
	 "{\"type\": \"Gemm\", \"units\": 2}, {\"type\": \"Sigmoid\"}, {\"type\": \"Tanh\"}, {\"type\": \"LeakyRelu\"}, "
	 "{\"type\": \"Dropout\"}, {\"type\": \"Relu\"}], \"loss\": \"mse\"}"},
	{"logistic", "{\"input\": [3], \"layers\": [{\"type\": \"dense\", \"units\": 1}], "
	 "\"loss\": \"binary_cross_entropy\"}"},
	{"too_many_params", "{\"input\": [1048576], \"layers\": [{\"type\": \"dense\", \"units\": 1048576}]}"},
	{"config_sgd", "{\"optimizer\": \"sgd\", \"lr\": 0.05, \"momentum\": 0.9, \"nesterov\": true, "
	 "\"weight_decay\": 0.0001, \"batch_size\": 64, \"seed\": 7}"},
	{"config_adam", "{\"optimizer\": \"adam\", \"lr\": 1e-3, \"beta1\": 0.85, \"beta2\": 0.995, \"eps\": 1e-7, "
	 "\"batch_size\": 32}"},
	{"config_rmsprop", "{\"optimizer\": \"rmsprop\", \"lr\": 0.01, \"alpha\": 0.9, \"eps\": 1e-6, \"momentum\": 0.5, "
	 "\"centered\": true, \"weight_decay\": 0.001}"},
	{"config_adagrad", "{\"optimizer\": \"adagrad\", \"lr\": 0.05, \"lr_decay\": 0.01, "
	 "\"initial_accumulator_value\": 0.1, \"eps\": 1e-10}"},
	{"huber", "{\"input\": [3], \"layers\": [{\"type\": \"dense\", \"units\": 2}], \"loss\": \"huber\", "
	 "\"delta\": 0.5}"},
	{"config_transfer", "{\"optimizer\": \"adamw\", \"weight_decay\": 0.05, \"base_model\": \"m\", \"freeze\": 2, "
	 "\"head\": [{\"type\": \"dense\", \"units\": 2}]}"},
	{"escapes", "{\"input\": [4], \"layers\": [{\"type\": \"d\\u0065nse\", \"units\": 2e0}], "
	 "\"loss\": \"cross_entropy\", \"loss\": \"mse\"}"},
};

/* ---- packed rows (see fuzz_packed.c for the layout) ---- */

typedef struct Bytes
{
	uint8_t		b[512];
	size_t		len;
} Bytes;

static void
put(Bytes *o, uint32_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		o->b[o->len++] = (uint8_t) (v >> (8 * i));
}

static void
put_float(Bytes *o, float f)
{
	uint32_t	v;

	memcpy(&v, &f, 4);
	put(o, v, 4);
}

static void
row_header(Bytes *o, int flags, int n, int n_features, int n_targets, int n_classes)
{
	o->len = 0;
	put(o, (uint32_t) flags, 1);
	put(o, (uint32_t) n, 4);
	put(o, (uint32_t) n_features, 4);
	put(o, (uint32_t) n_targets, 4);
	put(o, (uint32_t) n_classes, 2);
	put(o, 17, 4);				/* buffer_id */
}

/* A one-dimensional real[] of these values, lower bound lb; kind bit 0x40 adds a NULL bitmap. */
static void
row_array(Bytes *o, const float *v, int n, int lb, bool bitmap)
{
	put(o, (1 << 3) | (bitmap ? 0x40 : 0), 1);
	put(o, (uint32_t) (n - 1), 2);
	put(o, (uint32_t) lb, 4);
	for (int i = 0; bitmap && i < (n + 7) / 8; i++)
		put(o, 0xFF, 1);
	for (int i = 0; i < n; i++)
		put_float(o, v[i]);
}

static void
packed_rows(void)
{
	static const float x6[] = {0.5f, -1.0f, 2.0f, 0.25f, 0.0f, -3.5f};
	static const float labels[] = {0.0f, 2.0f};
	static const float bits[] = {1.0f, 0.0f, 1.0f};
	Bytes		o;

	row_header(&o, 1, 2, 3, 1, 3);	/* classification: 2 examples, 3 features, 3 classes */
	row_array(&o, x6, 6, 1, false);
	row_array(&o, labels, 2, 1, false);
	write_file("packed", "classes", o.b, o.len);

	row_header(&o, 0, 3, 2, 2, 0);	/* regression: 3 examples, 2 features, 2 targets */
	row_array(&o, x6, 6, 1, false);
	row_array(&o, x6, 6, 0, true);
	write_file("packed", "regression", o.b, o.len);

	row_header(&o, 3, 3, 2, 1, 2);	/* binary classifier (one logit) */
	row_array(&o, x6, 6, -4, false);
	row_array(&o, bits, 3, 1, false);
	write_file("packed", "binary", o.b, o.len);

	row_header(&o, 2, 1, 6, 1, 0);	/* regression with binary_cross_entropy */
	row_array(&o, x6, 6, 1, true);
	row_array(&o, bits, 1, 1, false);
	write_file("packed", "bce_targets", o.b, o.len);
}

int
main(int argc, char **argv)
{
	if (argc != 2)
	{
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	out_dir = argv[1];
	mkdir(out_dir, 0777);
	blobs();
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
		write_file("spec", specs[i][0], specs[i][1], strlen(specs[i][1]));
	packed_rows();
	gen_onnx_corpus(write_file);
	return 0;
}
