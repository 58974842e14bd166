/*
 * test_serialize.c -- the model format: round trips, and untrusted bytes.
 *
 * Corrupt blobs must give an error, never a crash or a read past the end (the
 * sanitizer run checks the latter).  Blobs whose checksum was recomputed after
 * tampering reach the length and spec checks behind the checksum.
 */
#include "test_util.h"
#include "unit.h"

static NnModel *
trained_model(const NnSpec *s, int steps)
{
	NnError		err;
	NnOptim		o;
	NnModel    *m = nn_model_create(s, 7, &err);
	int			n = 4;
	float	   *x = test_normal(n * nn_model_input_size(m), 3, 1.0f);
	float	   *y = test_targets(s->loss, n, nn_model_output_size(m), 4);

	nn_optim_defaults(&o, NN_OPT_ADAM);
	nn_model_set_optim(m, &o, &err);
	for (int i = 0; i < steps; i++)
		nn_model_train_step(m, x, y, n, NULL, &err);
	free(x);
	free(y);
	return m;
}

static void
small_spec(NnSpec *s)
{
	spec_begin(s, 3, 1, 4, 4, NN_LOSS_CROSS_ENTROPY);
	spec_conv(s, 2, 3, 1, 1);
	spec_add(s, NN_BATCHNORM);
	spec_add(s, NN_RELU);
	spec_pool(s, NN_MAXPOOL2D, 2);
	spec_dense(s, 3);
}

static uint8_t *
serialize(const NnModel *m, size_t *len)
{
	uint8_t    *buf;

	*len = nn_model_serialized_size(m);
	buf = malloc(*len);
	nn_model_serialize(m, buf);
	return buf;
}

static void
reseal(uint8_t *buf, size_t len)
{
	uint32_t	crc = nn_crc32(0, buf, len - 4);

	for (int i = 0; i < 4; i++)
		buf[len - 4 + i] = (uint8_t) (crc >> (8 * i));
}

UNIT_TEST(serialize_round_trip)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m,
			   *back;
	size_t		len,
				len2;
	uint8_t    *a,
			   *b;

	small_spec(&s);
	m = trained_model(&s, 3);
	a = serialize(m, &len);
	back = nn_model_deserialize(a, len, &err);
	CHECK_MSG(back != NULL, "%s", err.msg);
	if (back == NULL)
		return;
	b = serialize(back, &len2);
	CHECK(len == len2 && memcmp(a, b, len) == 0);
	CHECK(back->step == 3 && back->optim.type == NN_OPT_ADAM && back->seed == 7);
	CHECK(memcmp(back->params, m->params, sizeof(float) * m->n_params) == 0);
	CHECK(memcmp(back->buffers, m->buffers, sizeof(float) * m->n_buffers) == 0);
	CHECK(back->n_opt_state == 2 * m->n_params);

	/* the copy trains on exactly as the original does */
	{
		float	   *x = test_normal(4 * 16, 8, 1.0f);
		float	   *y = test_targets(s.loss, 4, 3, 9);

		CHECK(nn_model_train_step(m, x, y, 4, NULL, &err));
		CHECK(nn_model_train_step(back, x, y, 4, NULL, &err));
		CHECK(memcmp(back->params, m->params, sizeof(float) * m->n_params) == 0);
		free(x);
		free(y);
	}
	free(a);
	free(b);
	nn_model_free(m);
	nn_model_free(back);
}

UNIT_TEST(serialize_untrained_model_without_optimizer)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m,
			   *back;
	size_t		len;
	uint8_t    *a;

	spec_reference_mlp(&s);
	m = nn_model_create(&s, 1, &err);
	a = serialize(m, &len);
	CHECK(len > 4 * (size_t) m->n_params);
	back = nn_model_deserialize(a, len, &err);
	CHECK_MSG(back != NULL, "%s", err.msg);
	if (back)
		CHECK(back->optim.type == 0 && back->n_opt_state == 0);
	free(a);
	nn_model_free(m);
	nn_model_free(back);
}

UNIT_TEST(serialize_truncated)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m;
	size_t		len;
	uint8_t    *a;

	small_spec(&s);
	m = trained_model(&s, 1);
	a = serialize(m, &len);
	for (size_t cut = 0; cut < len; cut++)
	{
		/* a fresh allocation of exactly `cut` bytes, so ASan sees any over-read */
		uint8_t    *t = malloc(cut ? cut : 1);
		NnModel    *back;

		memcpy(t, a, cut);
		back = nn_model_deserialize(t, cut, &err);
		CHECK_MSG(back == NULL, "a blob cut to %zu of %zu bytes was accepted", cut, len);
		nn_model_free(back);
		/* the same cut with a valid length field and checksum */
		if (cut >= 24)
		{
			for (int i = 0; i < 8; i++)
				t[12 + i] = (uint8_t) ((uint64_t) cut >> (8 * i));
			reseal(t, cut);
			back = nn_model_deserialize(t, cut, &err);
			CHECK_MSG(back == NULL, "a resealed blob cut to %zu of %zu bytes was accepted", cut, len);
			nn_model_free(back);
		}
		free(t);
	}
	free(a);
	nn_model_free(m);
}

UNIT_TEST(serialize_every_byte_flip)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m;
	size_t		len;
	uint8_t    *a;
	int			flips[] = {0x01, 0x80, 0xff};

	small_spec(&s);
	m = trained_model(&s, 1);
	a = serialize(m, &len);
	for (size_t i = 0; i < len; i++)
		for (int f = 0; f < (unit_fast ? 1 : 3); f++)
		{
			NnModel    *back;

			a[i] ^= flips[f];
			back = nn_model_deserialize(a, len, &err);
			CHECK_MSG(back == NULL, "flipping byte %zu with %#x was not detected", i, flips[f]);
			nn_model_free(back);
			a[i] ^= flips[f];
		}
	free(a);
	nn_model_free(m);
}

/* Offsets into the blob of small_spec's model. */
#define OFF_NDIM		20
#define OFF_N_LAYERS	36
#define OFF_LAYER0		44
#define LAYER_SIZE		44

static void
put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static void
expect_rejected(const uint8_t *orig, size_t len, size_t off, uint32_t value, const char *what,
				const char *expect)
{
	uint8_t    *t = malloc(len);
	NnError		err;
	NnModel    *back;

	memcpy(t, orig, len);
	put32(t + off, value);
	reseal(t, len);
	back = nn_model_deserialize(t, len, &err);
	CHECK_MSG(back == NULL, "%s was accepted", what);
	if (back == NULL && expect)
		CHECK_MSG(strstr(err.msg, expect) != NULL, "%s: error \"%s\" lacks \"%s\"", what, err.msg, expect);
	nn_model_free(back);
	free(t);
}

UNIT_TEST(serialize_hostile_sizes)
{
	NnSpec		s;
	NnModel    *m;
	size_t		len;
	uint8_t    *a;
	size_t		state;

	small_spec(&s);
	m = trained_model(&s, 1);
	a = serialize(m, &len);
	state = OFF_LAYER0 + (size_t) s.n_layers * LAYER_SIZE;

	expect_rejected(a, len, OFF_N_LAYERS, 1000000000u, "a billion layers", "layers");
	expect_rejected(a, len, OFF_N_LAYERS, 0, "zero layers", "layers");
	expect_rejected(a, len, OFF_NDIM, 2, "a 2-d input", "input");
	expect_rejected(a, len, OFF_NDIM + 4, 0x7fffffff, "a huge input", "input");
	/* layer 0 is the conv2d: its filters, then kernel */
	expect_rejected(a, len, OFF_LAYER0 + 8, 0x40000000u, "a billion filters", "filters");
	expect_rejected(a, len, OFF_LAYER0 + 12, 0, "kernel 0", "kernel");
	expect_rejected(a, len, OFF_LAYER0, 999, "an unknown layer type", "unknown layer type");
	/* layer 4 is the dense: its kernel slot holds per_step, a flag, read back as 1 if it were taken */
	expect_rejected(a, len, OFF_LAYER0 + 4 * LAYER_SIZE + 12, 2, "a flag of 2", "flag");
	/* declared parameter count (low and high word) that disagrees with the spec */
	expect_rejected(a, len, state + 16, 0xffffffffu, "4 billion parameters", "parameters");
	expect_rejected(a, len, state + 20, 0xffffffffu, "2^64 parameters", "parameters");
	expect_rejected(a, len, state + 16, (uint32_t) m->n_params - 1, "one parameter fewer", "parameters");
	/* the magic and version are checked before the checksum is even read */
	expect_rejected(a, len, 8, 4, "format version 4", "version");
	/* version 3 is huber's: a cross_entropy blob does not have it */
	expect_rejected(a, len, 8, 3, "format version 3 of another loss", "huber");
	/* and huber's is version 3: a version 1 blob that says huber lacks its delta */
	expect_rejected(a, len, OFF_NDIM + 20, NN_LOSS_HUBER, "huber in a version 1 blob", "delta");
	/* a version 1 body read as version 2 (the graph form): its layers have no inputs and names */
	expect_rejected(a, len, 8, 2, "format version 2 of a version 1 body", NULL);
	{
		NnError		err;
		uint8_t		junk[64];

		memset(junk, 0xab, sizeof(junk));
		CHECK(nn_model_deserialize(junk, sizeof(junk), &err) == NULL);
		CHECK(nn_model_deserialize(a, 0, &err) == NULL);
	}
	free(a);
	nn_model_free(m);
}

UNIT_TEST(serialize_crc32_known_values)
{
	/* the standard check value of CRC-32/ISO-HDLC, and lengths around the 8-byte stride */
	const uint8_t digits[] = "123456789";
	uint8_t		buf[37];
	uint32_t	whole,
				parts;

	CHECK(nn_crc32(0, digits, 9) == 0xCBF43926u);
	CHECK(nn_crc32(0, digits, 0) == 0);
	for (int i = 0; i < 37; i++)
		buf[i] = (uint8_t) (i * 37 + 11);
	/* incremental use over odd splits equals one pass */
	whole = nn_crc32(0, buf, 37);
	parts = nn_crc32(nn_crc32(nn_crc32(0, buf, 3), buf + 3, 13), buf + 16, 21);
	CHECK(whole == parts);
}

/* Found by regress/fuzz: a blob whose spec implies a billion floats made the reader allocate them first. */
UNIT_TEST(serialize_parameters_checked_before_allocation)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m,
			   *back;
	size_t		len;
	uint8_t    *a;

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 3);
	m = nn_model_create(&s, 1, &err);
	a = serialize(m, &len);
	/* input 2^20, 255 units: a valid spec of 267 million parameters, in a blob of 224 bytes */
	put32(a + OFF_NDIM + 4, 1u << 20);
	put32(a + OFF_LAYER0 + 4, 255);
	reseal(a, len);
	back = nn_model_deserialize(a, len, &err);
	CHECK(back == NULL);
	if (back == NULL)
		CHECK_MSG(strstr(err.msg, "cannot hold the 267387135 parameters") != NULL, "%s", err.msg);
	nn_model_free(back);
	free(a);
	nn_model_free(m);
}

/* Found by regress/fuzz: -0.0 in the settings of no optimizer passed as zero, and was written back as 0.0. */
UNIT_TEST(serialize_no_optimizer_means_zero_bytes)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m;
	size_t		len;
	size_t		optim;
	uint8_t    *a;

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 3);
	m = nn_model_create(&s, 1, &err);
	a = serialize(m, &len);
	optim = OFF_LAYER0 + LAYER_SIZE + 16 + 8 + 4 * (size_t) m->n_params + 8 + 4 * (size_t) m->n_buffers;
	CHECK(optim + 32 + 8 + 4 == len);
	for (size_t field = 4; field < 32; field += 4)
	{
		char		what[64];

		if (field == 12)
			continue;			/* nesterov, an integer */
		snprintf(what, sizeof(what), "-0.0 at byte %zu of no optimizer", field);
		expect_rejected(a, len, optim + field, 0x80000000u, what, "settings for no optimizer");
	}
	free(a);
	nn_model_free(m);
}

/*
 * Found with regress/fuzz: a blob at step 2^63 - 1 passed, and its next training
 * step overflowed the counter; bounding the blob's count must not let training
 * write a count the reader refuses.
 */
UNIT_TEST(serialize_step_count_bounded)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m,
			   *back;
	NnOptim		o;
	size_t		len;
	size_t		step_off;
	uint8_t    *a;

	spec_begin(&s, 1, 4, 1, 1, NN_LOSS_CROSS_ENTROPY);
	spec_dense(&s, 3);
	m = nn_model_create(&s, 1, &err);
	nn_optim_defaults(&o, NN_OPT_ADAM);
	nn_model_set_optim(m, &o, &err);
	a = serialize(m, &len);
	step_off = OFF_LAYER0 + LAYER_SIZE + 8;
	put32(a + step_off, 0xffffffffu);
	expect_rejected(a, len, step_off + 4, 0x7fffffffu, "step 2^63 - 1", "step count");
	expect_rejected(a, len, step_off + 4, 1u << 21, "step 2^53 + 2^32 - 1", "step count");
	/* one step below the most: it takes that step, then refuses the next, and still reads back */
	put32(a + step_off, 0xffffffffu);
	put32(a + step_off + 4, (1u << 21) - 1);
	reseal(a, len);
	back = nn_model_deserialize(a, len, &err);
	CHECK_MSG(back != NULL, "%s", err.msg);
	if (back)
	{
		float	   *x = test_normal(4 * 2, 3, 1.0f);
		float	   *y = test_targets(s.loss, 2, 3, 4);
		uint8_t    *b;
		size_t		len2;
		NnModel    *again;

		CHECK(back->step == NN_MAX_STEP - 1);
		CHECK(nn_model_train_step(back, x, y, 2, NULL, &err));
		CHECK(!nn_model_train_step(back, x, y, 2, NULL, &err));
		CHECK(back->step == NN_MAX_STEP);
		b = serialize(back, &len2);
		again = nn_model_deserialize(b, len2, &err);
		CHECK_MSG(again != NULL, "%s", err.msg);
		nn_model_free(again);
		free(b);
		free(x);
		free(y);
	}
	nn_model_free(back);
	free(a);
	nn_model_free(m);
}

/* The graph form: version 2, with each layer's inputs and name; a chain still writes version 1. */
UNIT_TEST(serialize_graph_round_trip)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m,
			   *back;
	size_t		len,
				len2;
	uint8_t    *a,
			   *b;

	small_spec(&s);
	m = trained_model(&s, 1);
	a = serialize(m, &len);
	CHECK(a[8] == NN_FORMAT_VERSION && a[8] == 1);
	free(a);
	nn_model_free(m);

	spec_residual_cnn(&s, 1, 4, 2, 3);
	strcpy(s.layers[2].name, "stem");
	s.layers[3].groups = 2;
	m = trained_model(&s, 2);
	a = serialize(m, &len);
	CHECK(a[8] == NN_FORMAT_VERSION_GRAPH);
	back = nn_model_deserialize(a, len, &err);
	CHECK_MSG(back != NULL, "%s", err.msg);
	if (back == NULL)
		return;
	CHECK(strcmp(back->spec.layers[2].name, "stem") == 0);
	CHECK(back->spec.layers[3].groups == 2 && back->param_len[3] == m->param_len[3]);
	CHECK(back->spec.layers[8].n_inputs == 2 && back->spec.layers[8].inputs[0] == 7 &&
		  back->spec.layers[8].inputs[1] == 2);
	CHECK(memcmp(&back->spec, &m->spec, sizeof(NnSpec)) == 0);
	b = serialize(back, &len2);
	CHECK(len == len2 && memcmp(a, b, len) == 0);

	/* every byte of the graph section matters: a flip is caught (checksum), a resealed bad input too */
	for (size_t i = 0; i < len; i += 7)
	{
		NnModel    *bad;

		a[i] ^= 0x40;
		bad = nn_model_deserialize(a, len, &err);
		CHECK_MSG(bad == NULL, "flipping byte %zu was not detected", i);
		nn_model_free(bad);
		a[i] ^= 0x40;
	}
	{
		/* the graph section follows the 13 fixed-size layers; layer 0 declares no inputs */
		size_t		graph = OFF_LAYER0 + 13 * LAYER_SIZE;

		expect_rejected(a, len, graph, 9, "9 inputs", "inputs");
		expect_rejected(a, len, graph, 1, "an input for layer 0 that eats its name's length", NULL);
	}
	free(a);
	free(b);
	nn_model_free(m);
	nn_model_free(back);
}

/*
 * A blob's summary: all but its floats, as a coordinator compares what a node
 * returned with what it sent.  Every cut, a step beyond NN_MAX_STEP, a count
 * that disagrees with the spec and a trailing byte are errors.
 */
UNIT_TEST(serialize_summary)
{
	NnSpec		s,
				read;
	NnBlobSummary sum;
	NnError		err;
	NnModel    *m;
	size_t		len,
				state;
	uint8_t    *a,
			   *t;

	small_spec(&s);
	m = trained_model(&s, 3);
	a = serialize(m, &len);
	state = OFF_LAYER0 + (size_t) s.n_layers * LAYER_SIZE;
	CHECK_MSG(nn_model_blob_check(a, len, &read, &sum, &err), "%s", err.msg);
	CHECK(memcmp(&read, &m->spec, sizeof(NnSpec)) == 0);
	CHECK(sum.seed == 7 && sum.step == 3);
	CHECK(sum.n_params == m->n_params && sum.n_buffers == m->n_buffers && sum.n_opt_state == m->n_opt_state);
	CHECK(sum.optim.type == NN_OPT_ADAM && sum.optim.lr == m->optim.lr && sum.optim.beta2 == m->optim.beta2);

	for (size_t cut = 0; cut < len; cut += unit_fast ? 13 : 1)
	{
		t = malloc(cut ? cut : 1);
		memcpy(t, a, cut);
		if (cut >= 24)
		{
			for (int i = 0; i < 8; i++)
				t[12 + i] = (uint8_t) ((uint64_t) cut >> (8 * i));
			reseal(t, cut);
		}
		CHECK_MSG(!nn_model_blob_check(t, cut, &read, &sum, &err), "a blob cut to %zu bytes was summarized", cut);
		free(t);
	}

	t = malloc(len + 4);
	memcpy(t, a, len);
	put32(t + state + 8, 41);
	reseal(t, len);
	CHECK(nn_model_blob_check(t, len, &read, &sum, &err) && sum.step == 41);
	put32(t + state + 12, 0x00400000u);		/* 2^54 steps */
	reseal(t, len);
	CHECK(!nn_model_blob_check(t, len, &read, &sum, &err) && strstr(err.msg, "step") != NULL);
	put32(t + state + 12, 0);
	put32(t + state + 16, (uint32_t) m->n_params - 1);	/* not the spec's */
	reseal(t, len);
	CHECK(!nn_model_blob_check(t, len, &read, &sum, &err));
	put32(t + state + 16, (uint32_t) m->n_params);
	/* a byte more, its length and checksum to match */
	memmove(t + len - 3, t + len - 4, 4);
	for (int i = 0; i < 8; i++)
		t[12 + i] = (uint8_t) ((uint64_t) (len + 1) >> (8 * i));
	reseal(t, len + 1);
	CHECK(!nn_model_blob_check(t, len + 1, &read, &sum, &err) && strstr(err.msg, "trailing") != NULL);
	free(t);
	free(a);
	nn_model_free(m);
}

/* FNV-1a, 64 bits: a digest of a blob's bytes. */
static uint64_t
fnv1a64(const uint8_t *p, size_t n)
{
	uint64_t	h = UINT64_C(0xcbf29ce484222325);

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * UINT64_C(0x100000001b3);
	return h;
}

/*
 * A model of small_spec with optimizer o (type 0: none) whose floats and step
 * are set by formula, not trained: its bytes depend on the format only, not
 * on BLAS or libm.  Returns the digest of its blob.
 */
static uint64_t
formula_blob_digest(const NnOptim *o, bool graph)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m;
	size_t		len;
	uint8_t    *a;
	uint64_t	h;

	small_spec(&s);
	if (graph)
		strcpy(s.layers[0].name, "stem");
	m = nn_model_create(&s, 7, &err);
	if (o->type != 0)
		nn_model_set_optim(m, o, &err);
	for (int64_t i = 0; i < m->n_params; i++)
		m->params[i] = (float) (i % 97) / 97.0f - 0.5f;
	for (int64_t i = 0; i < m->n_buffers; i++)
		m->buffers[i] = (float) (i % 13) * 0.125f;
	for (int64_t i = 0; i < m->n_opt_state; i++)
		m->opt_state[i] = (float) (i % 31) * 0.01f;
	m->step = 12345;
	a = serialize(m, &len);
	h = fnv1a64(a, len);
	free(a);
	nn_model_free(m);
	return h;
}

/*
 * Blobs of the optimizers that existed before RMSprop and Adagrad keep their
 * exact bytes: digests computed on the build before those were added.
 */
UNIT_TEST(serialize_golden_bytes)
{
	struct
	{
		NnOptType	type;
		float		momentum;
		bool		nesterov;
		float		weight_decay;
		bool		graph;
		uint64_t	digest;
	}			cases[] = {
		{0, 0, false, 0, false, UINT64_C(0xf96cfa37af5ae0c9)},
		{NN_OPT_SGD, 0, false, 0, false, UINT64_C(0x6a3903b8ac8d49ff)},
		{NN_OPT_SGD, 0.9f, true, 1e-4f, false, UINT64_C(0x808b1fc9f5509c43)},
		{NN_OPT_ADAM, 0, false, 0, false, UINT64_C(0xa078ab2c77f53c67)},
		{NN_OPT_ADAMW, 0, false, 0.01f, true, UINT64_C(0xe7bfa57189eda0fc)},
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
	{
		NnOptim		o;
		uint64_t	h;

		memset(&o, 0, sizeof(o));
		if (cases[k].type != 0)
		{
			nn_optim_defaults(&o, cases[k].type);
			o.lr = 0.0125f;
			o.momentum = cases[k].momentum;
			o.nesterov = cases[k].nesterov;
			o.weight_decay = cases[k].weight_decay;
		}
		h = formula_blob_digest(&o, cases[k].graph);
		CHECK_MSG(h == cases[k].digest, "case %zu: digest %#018llx, golden %#018llx", k,
				  (unsigned long long) h, (unsigned long long) cases[k].digest);
	}
}

/*
 * The new optimizers and the huber loss: a blob's round trip keeps every
 * byte, the state and the settings in their slots, and the copy trains on
 * exactly as the original (what a checkpoint and resume, a hop between
 * workers and a node's reply rely on).
 */
static void
check_round_trip_trains_on(const char *what, const NnSpec *s, const NnOptim *o)
{
	NnError		err;
	NnModel    *m = nn_model_create(s, 11, &err),
			   *back;
	int			n = 4;
	float	   *x = test_normal(n * nn_model_input_size(m), 5, 1.0f);
	float	   *y = test_targets(s->loss, n, nn_model_output_size(m), 6);
	size_t		len,
				len2;
	uint8_t    *a,
			   *b;

	CHECK_MSG(nn_model_set_optim(m, o, &err), "%s: %s", what, err.msg);
	for (int i = 0; i < 3; i++)
		CHECK(nn_model_train_step(m, x, y, n, NULL, &err));
	a = serialize(m, &len);
	back = nn_model_deserialize(a, len, &err);
	CHECK_MSG(back != NULL, "%s: %s", what, err.msg);
	if (back != NULL)
	{
		b = serialize(back, &len2);
		CHECK_MSG(len == len2 && memcmp(a, b, len) == 0, "%s: the blob read back is written back otherwise", what);
		CHECK(back->optim.type == o->type && back->optim.centered == o->centered &&
			  back->optim.alpha == o->alpha && back->optim.beta1 == o->beta1 &&
			  back->optim.momentum == o->momentum && back->spec.delta == s->delta);
		CHECK(back->n_opt_state == m->n_opt_state &&
			  memcmp(back->opt_state, m->opt_state, sizeof(float) * m->n_opt_state) == 0);
		CHECK(nn_model_train_step(m, x, y, n, NULL, &err));
		CHECK(nn_model_train_step(back, x, y, n, NULL, &err));
		CHECK_MSG(memcmp(back->params, m->params, sizeof(float) * m->n_params) == 0,
				  "%s: the copy trains on otherwise", what);
		free(b);
	}
	free(a);
	free(x);
	free(y);
	nn_model_free(m);
	nn_model_free(back);
}

UNIT_TEST(serialize_rmsprop_adagrad_huber)
{
	NnSpec		s;
	NnOptim		o;
	NnError		err;
	NnSpec		got;
	NnBlobSummary sum;
	NnModel    *m;
	size_t		len;
	uint8_t    *a;

	small_spec(&s);
	nn_optim_defaults(&o, NN_OPT_RMSPROP);
	check_round_trip_trains_on("rmsprop", &s, &o);
	o.momentum = 0.8f;
	o.centered = true;
	o.alpha = 0.9f;
	o.weight_decay = 1e-3f;
	check_round_trip_trains_on("rmsprop, centered, momentum", &s, &o);
	nn_optim_defaults(&o, NN_OPT_ADAGRAD);
	o.lr_decay = 0.01f;
	o.initial_accumulator_value = 0.1f;
	check_round_trip_trains_on("adagrad", &s, &o);

	/* huber: version 3, even for a chain; its delta read back */
	spec_begin(&s, 1, 5, 1, 1, NN_LOSS_HUBER);
	s.delta = 0.75f;
	spec_dense(&s, 4);
	spec_add(&s, NN_RELU);
	spec_dense(&s, 2);
	nn_optim_defaults(&o, NN_OPT_RMSPROP);
	check_round_trip_trains_on("huber, rmsprop", &s, &o);
	m = nn_model_create(&s, 1, &err);
	a = serialize(m, &len);
	CHECK(a[8] == NN_FORMAT_VERSION_LOSS);
	CHECK(nn_model_blob_check(a, len, &got, &sum, &err) && got.loss == NN_LOSS_HUBER && got.delta == 0.75f);
	/* its delta is checked as a spec's: 0, negative, NaN */
	expect_rejected(a, len, OFF_NDIM + 24, 0, "delta 0", "delta");
	expect_rejected(a, len, OFF_NDIM + 24, 0xbf800000u, "delta -1", "delta");
	expect_rejected(a, len, OFF_NDIM + 24, 0x7fc00000u, "delta NaN", "delta");
	free(a);
	nn_model_free(m);

	/* the rmsprop flag where sgd's nesterov is: 0 or 1 only */
	small_spec(&s);
	m = nn_model_create(&s, 1, &err);
	nn_optim_defaults(&o, NN_OPT_RMSPROP);
	nn_model_set_optim(m, &o, &err);
	a = serialize(m, &len);
	{
		size_t		optim = len - 4 - 8 - 4 * (size_t) m->n_opt_state - 32;

		CHECK(a[optim] == NN_OPT_RMSPROP);
		expect_rejected(a, len, optim + 12, 2, "rmsprop centered 2", "invalid optimizer");
		/* a centered rmsprop needs the grad_avg slice its blob lacks */
		expect_rejected(a, len, optim + 12, 1, "rmsprop centered without its state", "optimizer state");
		/* rmsprop has no beta1, and its alpha is at most 1 */
		expect_rejected(a, len, optim + 20, 0x3f000000u, "rmsprop with a beta1", "beta1");
		expect_rejected(a, len, optim + 24, 0x40000000u, "rmsprop alpha 2", "alpha");
	}
	free(a);
	nn_model_free(m);
}

/*
 * A pool's pads, ceil_mode and count_include_pad (ONNX's, issue 40) travel in
 * the slots pools do not use, pads after in filters' and the two flags in
 * units': read back as written, an unpadded pool's bytes as before, and a
 * flag slot holding more than the two bits, or pads of a whole window, refused.
 */
UNIT_TEST(serialize_padded_pools)
{
	NnSpec		s;
	NnError		err;
	NnModel    *m,
			   *back;
	size_t		len,
				len2;
	uint8_t    *a,
			   *b;
	NnLayerSpec *l;

	spec_begin(&s, 3, 2, 7, 7, NN_LOSS_MSE);
	l = spec_add(&s, NN_AVGPOOL2D);
	l->kernel = 3;
	l->stride = 2;
	l->padding = 1;
	l->pad_end = 2;
	l->ceil_mode = true;
	l->count_pad = true;
	spec_pool(&s, NN_MAXPOOL2D, 2);
	s.layers[1].padding = s.layers[1].pad_end = 1;
	spec_dense(&s, 3);
	m = trained_model(&s, 1);
	a = serialize(m, &len);
	CHECK(a[8] == NN_FORMAT_VERSION);
	CHECK(a[OFF_LAYER0 + 4] == 3 && a[OFF_LAYER0 + 8] == 2 && a[OFF_LAYER0 + 20] == 1);
	back = nn_model_deserialize(a, len, &err);
	CHECK_MSG(back != NULL, "%s", err.msg);
	if (back == NULL)
		return;
	CHECK(memcmp(&back->spec, &m->spec, sizeof(NnSpec)) == 0);
	/* ceil_mode's fifth window would start in the pads after: none */
	CHECK(back->shape[1].h == 4 && back->shape[2].h == 3);
	b = serialize(back, &len2);
	CHECK(len == len2 && memcmp(a, b, len) == 0);
	expect_rejected(a, len, OFF_LAYER0 + 4, 4, "a pool's flags slot holding 4", "flag");
	expect_rejected(a, len, OFF_LAYER0 + 8, 3, "pads after of a whole window", "padding_end");
	expect_rejected(a, len, OFF_LAYER0 + 20, 3, "pads before of a whole window", "padding");
	expect_rejected(a, len, OFF_LAYER0 + LAYER_SIZE + 4, 2, "count_include_pad on a maxpool2d", "count_include_pad");
	free(a);
	free(b);
	nn_model_free(m);
	nn_model_free(back);
}
