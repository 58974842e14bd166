/*
 * test_memory.c -- nn_spec_memory against what a model really allocates.
 *
 * pgdl.max_model_memory refuses a model before it is allocated, from
 * nn_spec_memory's figure: that figure must be what the engine then allocates.
 * A counting backend (the CPU backend with its alloc wrapped) sees every byte
 * of optimizer state and workspace; the parameter block is the one allocation
 * made before a test can swap the backend in, and is checked against the sizes
 * the model reports.
 */
#include "backend.h"
#include "test_util.h"
#include "unit.h"

static NnBackend counting;
static int64_t counted;			/* bytes allocated through `counting` */
static int	allocations;

static void *
counting_alloc(size_t bytes)
{
	counted += (int64_t) bytes;
	allocations++;
	return nn_backend_cpu()->alloc(bytes);
}

static void
use_counting_backend(NnModel *m)
{
	counting = *nn_backend_cpu();
	counting.alloc = counting_alloc;
	m->be = &counting;
}

/* Every layer type, with in-place and not in-place activations, pools, batchnorm and im2col. */
static void
cnn_spec(NnSpec *s)
{
	spec_begin(s, 3, 3, 17, 13, NN_LOSS_CROSS_ENTROPY);
	spec_conv(s, 8, 3, 1, 1);
	spec_add(s, NN_BATCHNORM);
	spec_add(s, NN_RELU);
	spec_pool(s, NN_MAXPOOL2D, 2);
	spec_conv(s, 6, 5, 2, 2);
	spec_add(s, NN_TANH);
	spec_add(s, NN_SIGMOID);
	spec_pool(s, NN_AVGPOOL2D, 2);
	spec_add(s, NN_LEAKY_RELU);
	spec_add(s, NN_FLATTEN);
	spec_add(s, NN_DROPOUT);
	spec_dense(s, 7);
	spec_add(s, NN_RELU);
	spec_dense(s, 5);
}

static void
gap_spec(NnSpec *s)
{
	spec_begin(s, 3, 2, 9, 9, NN_LOSS_BCE);
	spec_conv(s, 4, 3, 1, 0);
	spec_add(s, NN_RELU);
	spec_add(s, NN_GLOBAL_AVGPOOL);
	spec_dense(s, 3);
}

static void
check_allocations(const NnSpec *s, NnOptType opt_type, float momentum, int32_t batch)
{
	NnError		err;
	NnMemory	mem;
	NnOptim		opt;
	NnModel    *m;
	float	   *x,
			   *y;

	nn_optim_defaults(&opt, opt_type);
	opt.momentum = momentum;
	CHECK(nn_spec_memory(s, &opt, batch, &mem, &err));
	CHECK(mem.total == mem.model + mem.optim + mem.workspace);
	m = nn_model_create(s, 3, &err);
	CHECK(m != NULL);
	if (m == NULL)
		return;
	CHECK_MSG(mem.model == (int64_t) sizeof(NnModel) + 4 * (2 * m->n_params + m->n_buffers),
			  "model %lld bytes, the model holds %lld parameters and %lld running statistics",
			  (long long) mem.model, (long long) m->n_params, (long long) m->n_buffers);

	use_counting_backend(m);
	counted = 0;
	CHECK(nn_model_set_optim(m, &opt, &err));
	CHECK_MSG(counted == mem.optim, "optimizer state: estimated %lld bytes, allocated %lld",
			  (long long) mem.optim, (long long) counted);

	counted = 0;
	CHECK(nn_model_reserve(m, batch, &err));
	CHECK_MSG(counted == mem.workspace, "workspace for %d: estimated %lld bytes, allocated %lld",
			  (int) batch, (long long) mem.workspace, (long long) counted);

	/* a training step and an evaluation at that batch size allocate nothing more */
	x = test_normal((int64_t) batch * nn_model_input_size(m), 5, 1.0f);
	y = test_targets(s->loss, batch, nn_model_output_size(m), 6);
	counted = 0;
	allocations = 0;
	CHECK(nn_model_train_step(m, x, y, batch, NULL, &err));
	CHECK(nn_model_evaluate(m, x, y, batch, NULL, &err));
	CHECK_MSG(allocations == 0, "a step at the reserved batch size allocated %lld bytes", (long long) counted);
	free(x);
	free(y);
	nn_model_free(m);
}

UNIT_TEST(memory_estimate_is_what_a_model_allocates)
{
	NnSpec		s;
	int32_t		batches[] = {1, 7, 64, 300};

	for (int b = 0; b < 4; b++)
	{
		spec_reference_mlp(&s);
		check_allocations(&s, NN_OPT_SGD, 0.0f, batches[b]);
		check_allocations(&s, NN_OPT_SGD, 0.9f, batches[b]);
		spec_reference_cnn(&s);
		check_allocations(&s, NN_OPT_ADAM, 0.0f, batches[b]);
		cnn_spec(&s);
		check_allocations(&s, NN_OPT_ADAMW, 0.0f, batches[b]);
		check_allocations(&s, NN_OPT_SGD, 0.5f, batches[b]);
		gap_spec(&s);
		check_allocations(&s, NN_OPT_ADAM, 0.0f, batches[b]);
	}
}

UNIT_TEST(memory_estimate_grows_with_the_batch)
{
	NnSpec		s;
	NnMemory	a,
				b,
				none;
	NnError		err;

	cnn_spec(&s);
	CHECK(nn_spec_memory(&s, NULL, 0, &none, &err));
	CHECK(none.optim == 0 && none.workspace == 0 && none.total == none.model);
	CHECK(nn_spec_memory(&s, NULL, 32, &a, &err));
	CHECK(nn_spec_memory(&s, NULL, 33, &b, &err));
	CHECK(a.model == none.model && b.model == none.model);
	CHECK(a.workspace > 0 && b.workspace > a.workspace);
	CHECK(!nn_spec_memory(&s, NULL, -1, &a, &err));
	CHECK(!nn_spec_memory(&s, NULL, NN_MAX_BATCH + 1, &a, &err));
	s.layers[0].filters = 0;	/* an invalid spec is an error, not a size */
	CHECK(!nn_spec_memory(&s, NULL, 1, &a, &err));
}

static void
reseal_blob(uint8_t *buf, size_t len)
{
	uint32_t	crc = nn_crc32(0, buf, len - 4);

	for (int i = 0; i < 4; i++)
		buf[len - 4 + i] = (uint8_t) (crc >> (8 * i));
}

/* A blob's spec and optimizer, read without deserializing, size the model it holds. */
UNIT_TEST(memory_of_a_blob_from_its_spec)
{
	NnSpec		s,
				read;
	NnOptim		opt,
				read_opt;
	NnMemory	mem;
	NnError		err;
	NnModel    *m;
	size_t		len;
	uint8_t    *buf;

	cnn_spec(&s);
	m = nn_model_create(&s, 9, &err);
	nn_optim_defaults(&opt, NN_OPT_SGD);
	opt.momentum = 0.9f;
	CHECK(nn_model_set_optim(m, &opt, &err));
	len = nn_model_serialized_size(m);
	buf = malloc(len);
	nn_model_serialize(m, buf);

	CHECK(nn_model_blob_spec(buf, len, &read, &read_opt, &err));
	CHECK(memcmp(&read, &m->spec, sizeof(NnSpec)) == 0);
	CHECK(read_opt.type == NN_OPT_SGD && read_opt.momentum == opt.momentum);
	CHECK(nn_spec_memory(&read, &read_opt, 0, &mem, &err));
	CHECK(mem.model == (int64_t) sizeof(NnModel) + 4 * (2 * m->n_params + m->n_buffers));
	CHECK(mem.optim == 4 * m->n_opt_state);

	/* every truncation (the header's length then disagrees) and a bad checksum are errors */
	for (size_t cut = 0; cut < len; cut += unit_fast ? 97 : 1)
		CHECK(!nn_model_blob_spec(buf, cut, &read, &read_opt, &err));
	buf[len / 2] ^= 1;
	CHECK(!nn_model_blob_spec(buf, len, &read, &read_opt, &err));
	buf[len / 2] ^= 1;

	/*
	 * A blob cut after its spec, with length and checksum to match: its spec
	 * is still read (so its size can be refused before nn_model_deserialize
	 * allocates for it), with no optimizer, since the reader fails before it
	 * would allocate one.
	 */
	{
		size_t		cut = len / 3;

		for (int i = 0; i < 8; i++)
			buf[12 + i] = (uint8_t) ((uint64_t) cut >> (8 * i));
		reseal_blob(buf, cut);
		CHECK(nn_model_blob_spec(buf, cut, &read, &read_opt, &err));
		CHECK(memcmp(&read, &m->spec, sizeof(NnSpec)) == 0);
		CHECK(read_opt.type == 0);
		CHECK(nn_model_deserialize(buf, cut, &err) == NULL);
	}
	free(buf);
	nn_model_free(m);
}
