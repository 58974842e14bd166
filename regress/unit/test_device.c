/*
 * test_device.c -- models that live on a device backend, on the fake CUDA
 * device (kernels/cuda/cuda_fake.h): the CPU kernels on memory the host cannot
 * touch.  A run on it must give the CPU's bytes exactly (the same kernels), and
 * any direct host access by the engine to a device model's memory crashes the
 * test at once.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "cuda/cuda_fake.h"
#include "test_util.h"
#include "unit.h"

static const NnBackend *
fake(void)
{
	char		err[256];
	const NnBackend *b = nn_fake_cuda_on("1", 0, err, sizeof(err));

	CHECK_MSG(b != NULL, "fake device: %s", err);
	return b;
}

/* What a run produced: the model's blob, the metrics, an inference pass. */
typedef struct RunResult
{
	uint8_t    *blob;
	size_t		len;
	NnBatchStats train,
				eval;
	float	   *out;			/* forward of n_out examples */
	int64_t		out_floats;
} RunResult;

static void
result_free(RunResult *r)
{
	free(r->blob);
	free(r->out);
}

/*
 * steps training steps of `batch` examples (alternating halves of the data, a
 * smaller last batch), an evaluation and a forward pass of n_out examples,
 * with the model on be (NULL: the CPU) from the start.
 */
static void
run(const NnSpec *s, const NnOptim *o, const NnBackend *be, int steps, int batch, int n_out,
	RunResult *r)
{
	NnError		err;
	NnModel    *m = nn_model_create(s, 17, &err);
	int64_t		in = nn_model_input_size(m),
				tgt;
	int			total = 2 * batch;
	float	   *x,
			   *y;
	const float *z;

	memset(r, 0, sizeof(*r));
	CHECK_MSG(m != NULL, "%s", err.msg);
	tgt = nn_model_target_size(m);
	x = test_normal((int64_t) (total > n_out ? total : n_out) * in, 41, 1.0f);
	test_ids_for(s, x, (int64_t) (total > n_out ? total : n_out) * in, 43);
	y = test_targets(s->loss, total, nn_model_output_size(m), 42);
	CHECK(nn_model_set_optim(m, o, &err));
	CHECK(nn_model_reserve(m, batch, &err));
	if (be != NULL)
		CHECK_MSG(nn_model_use_backend(m, be, &err), "%s", err.msg);
	for (int i = 0; i < steps; i++)
	{
		int			n = i == steps - 1 ? batch - 3 : batch;

		CHECK_MSG(nn_model_train_step(m, x + (int64_t) (i % 2) * batch * in, y + (int64_t) (i % 2) * batch * tgt,
									  n, &r->train, &err), "%s", err.msg);
	}
	CHECK_MSG(nn_model_evaluate(m, x, y, total, &r->eval, &err), "%s", err.msg);
	CHECK(nn_model_params_finite(m));
	z = nn_model_forward(m, x, n_out, false);
	CHECK(z != NULL);
	r->out_floats = (int64_t) n_out * nn_model_output_size(m);
	r->out = malloc(sizeof(float) * r->out_floats);
	if (z != NULL)
		memcpy(r->out, z, sizeof(float) * r->out_floats);
	r->len = nn_model_serialized_size(m);
	r->blob = malloc(r->len);
	nn_model_serialize(m, r->blob);
	nn_model_free(m);
	free(x);
	free(y);
}

static bool
stats_equal(const NnBatchStats *a, const NnBatchStats *b)
{
	return memcmp(&a->loss_sum, &b->loss_sum, sizeof(double)) == 0 && a->correct == b->correct && a->n == b->n;
}

/* The same run on the CPU and on the fake device: the same bytes everywhere. */
static void
check_same_run(const char *what, const NnSpec *s, const NnOptim *o, int steps, int batch, int n_out)
{
	RunResult	c,
				d;

	run(s, o, NULL, steps, batch, n_out, &c);
	run(s, o, fake(), steps, batch, n_out, &d);
	CHECK_MSG(c.len == d.len && memcmp(c.blob, d.blob, c.len) == 0, "%s: the models differ", what);
	CHECK_MSG(stats_equal(&c.train, &d.train), "%s: training metrics differ: %.17g/%lld vs %.17g/%lld", what,
			  c.train.loss_sum, (long long) c.train.correct, d.train.loss_sum, (long long) d.train.correct);
	CHECK_MSG(stats_equal(&c.eval, &d.eval), "%s: evaluation metrics differ", what);
	CHECK_MSG(memcmp(c.out, d.out, sizeof(float) * c.out_floats) == 0, "%s: forward outputs differ", what);
	CHECK_MSG(c.train.n > 0 && isfinite(c.train.loss_sum), "%s: no training happened", what);
	result_free(&c);
	result_free(&d);
	CHECK_MSG(nn_fake_cuda_used() == 0, "%s: %zu bytes of device memory leaked", what, nn_fake_cuda_used());
}

static void
mlp_dropout(NnSpec *s, NnLoss loss)
{
	spec_begin(s, 1, 20, 1, 1, loss);
	spec_dense(s, 32);
	spec_add(s, NN_RELU);
	spec_add(s, NN_DROPOUT)->rate = 0.3f;
	spec_dense(s, 16);
	spec_add(s, NN_TANH);
	spec_add(s, NN_DROPOUT)->rate = 0.2f;
	spec_dense(s, 5);
}

static void
optim(NnOptim *o, NnOptType type, float momentum, bool nesterov, float weight_decay)
{
	nn_optim_defaults(o, type);
	o->lr = type == NN_OPT_SGD ? 0.05f : 0.01f;
	o->momentum = momentum;
	o->nesterov = nesterov;
	o->weight_decay = weight_decay;
}

UNIT_TEST(device_fake_mlp_matches_cpu)
{
	NnSpec		s;
	NnOptim		o;

	mlp_dropout(&s, NN_LOSS_CROSS_ENTROPY);
	optim(&o, NN_OPT_SGD, 0.9f, false, 1e-4f);
	check_same_run("mlp, sgd momentum", &s, &o, 6, 16, 37);
}

UNIT_TEST(device_fake_optimizers_and_losses_match_cpu)
{
	NnSpec		s;
	NnOptim		o;

	mlp_dropout(&s, NN_LOSS_CROSS_ENTROPY);
	optim(&o, NN_OPT_SGD, 0.0f, false, 0.0f);
	check_same_run("sgd", &s, &o, 4, 16, 9);
	optim(&o, NN_OPT_SGD, 0.9f, true, 5e-4f);
	check_same_run("sgd nesterov", &s, &o, 4, 16, 9);
	optim(&o, NN_OPT_ADAM, 0.0f, false, 1e-3f);
	check_same_run("adam", &s, &o, 4, 16, 9);
	optim(&o, NN_OPT_ADAMW, 0.0f, false, 1e-2f);
	check_same_run("adamw", &s, &o, 4, 16, 9);
	optim(&o, NN_OPT_RMSPROP, 0.9f, false, 1e-3f);
	o.centered = true;
	check_same_run("rmsprop centered, momentum", &s, &o, 4, 16, 9);
	optim(&o, NN_OPT_ADAGRAD, 0.0f, false, 1e-3f);
	o.lr_decay = 0.01f;
	o.initial_accumulator_value = 0.1f;
	check_same_run("adagrad", &s, &o, 4, 16, 9);

	mlp_dropout(&s, NN_LOSS_MSE);
	check_same_run("mse", &s, &o, 4, 16, 9);
	s.loss = NN_LOSS_HUBER;
	s.delta = 0.3f;
	check_same_run("huber", &s, &o, 4, 16, 9);
	s.delta = 0.0f;
	mlp_dropout(&s, NN_LOSS_BCE);
	s.layers[1].type = NN_SIGMOID;
	s.layers[4].type = NN_LEAKY_RELU;
	s.layers[4].alpha = 0.1f;
	check_same_run("binary_cross_entropy", &s, &o, 4, 16, 9);
}

UNIT_TEST(device_fake_cnn_matches_cpu)
{
	NnSpec		s;
	NnOptim		o;

	/* conv -> batchnorm -> relu -> maxpool, conv -> relu -> maxpool (fused), avgpool */
	spec_begin(&s, 3, 2, 12, 12, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 4, 3, 1, 1);
	spec_add(&s, NN_BATCHNORM);
	spec_add(&s, NN_RELU);
	spec_pool(&s, NN_MAXPOOL2D, 2);
	spec_conv(&s, 6, 3, 1, 1);
	spec_add(&s, NN_RELU);
	spec_pool(&s, NN_MAXPOOL2D, 2);
	spec_pool(&s, NN_AVGPOOL2D, 3);
	spec_add(&s, NN_FLATTEN);
	spec_add(&s, NN_DROPOUT)->rate = 0.25f;
	spec_dense(&s, 3);
	optim(&o, NN_OPT_SGD, 0.9f, false, 1e-4f);
	/* batches in several chunks, and an inference pass in sub-batches */
	check_same_run("cnn", &s, &o, 4, 64, 700);

	/* strided conv, leaky relu, global average pooling, adam */
	spec_begin(&s, 3, 3, 9, 9, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 5, 3, 2, 1);
	spec_add(&s, NN_LEAKY_RELU)->alpha = 0.05f;
	spec_add(&s, NN_BATCHNORM);
	spec_conv(&s, 7, 2, 1, 0);
	spec_add(&s, NN_SIGMOID);
	spec_add(&s, NN_GLOBAL_AVGPOOL);
	spec_add(&s, NN_FLATTEN);
	spec_dense(&s, 4);
	optim(&o, NN_OPT_ADAM, 0.0f, false, 0.0f);
	check_same_run("cnn, global average pooling", &s, &o, 4, 24, 50);
}

/* A small trained MLP on the CPU, with its data. */
static NnModel *
small_mlp(NnOptType type, float **x, float **y, int n)
{
	NnSpec		s;
	NnOptim		o;
	NnError		err;
	NnModel    *m;

	mlp_dropout(&s, NN_LOSS_CROSS_ENTROPY);
	m = nn_model_create(&s, 23, &err);
	optim(&o, type, 0.9f, false, 1e-4f);
	nn_model_set_optim(m, &o, &err);
	*x = test_normal((int64_t) n * nn_model_input_size(m), 51, 1.0f);
	*y = test_targets(s.loss, n, nn_model_output_size(m), 52);
	return m;
}

static bool
same_model(const NnModel *a, const NnModel *b)
{
	size_t		la = nn_model_serialized_size(a),
				lb = nn_model_serialized_size(b);
	uint8_t    *ba = malloc(la),
			   *bb = malloc(lb);
	bool		same;

	nn_model_serialize(a, ba);
	nn_model_serialize(b, bb);
	same = la == lb && memcmp(ba, bb, la) == 0;
	free(ba);
	free(bb);
	return same;
}

/* The engine never reads a device model's memory itself: it faults. */
UNIT_TEST(device_fake_residual_graph_matches_cpu)
{
	NnSpec		s;
	NnOptim		o;

	/* the graph form: add and concat on the device, gradients that add up, chunked batches */
	spec_residual_cnn(&s, 2, 10, 4, 3);
	s.layers[3].groups = 2;		/* and a grouped convolution */
	spec_merge(&s, NN_CONCAT, 2, (const int[]) {12, 11});
	spec_dense(&s, 3);
	optim(&o, NN_OPT_ADAM, 0.0f, false, 0.0f);
	check_same_run("residual graph", &s, &o, 4, 48, 100);
}

UNIT_TEST(device_fake_transformer_matches_cpu)
{
	NnSpec		s;
	NnOptim		o;

	/* embedding with positions, attention, per-step dense, residual adds and layernorm over steps */
	spec_transformer_block(&s, 7, 11, 8, 2, 16, 3);
	optim(&o, NN_OPT_ADAMW, 0.0f, false, 0.01f);
	check_same_run("transformer encoder", &s, &o, 4, 24, 30);
}

UNIT_TEST(device_fake_memory_is_not_host_memory)
{
	float	   *x,
			   *y;
	NnError		err;
	NnModel    *m = small_mlp(NN_OPT_SGD, &x, &y, 8);
	pid_t		child;
	int			status = 0;

	CHECK(nn_model_use_backend(m, fake(), &err));
	fflush(stdout);
	child = fork();
	if (child == 0)
	{
		volatile float v;

		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		{
			struct sigaction sa;

			memset(&sa, 0, sizeof(sa));
			sa.sa_handler = _exit;	/* _exit(SIGSEGV): the access faulted */
			sigaction(SIGSEGV, &sa, NULL);
			sigaction(SIGBUS, &sa, NULL);
		}
		v = m->params[0];
		(void) v;
		_exit(0);
	}
	CHECK(child > 0 && waitpid(child, &status, 0) == child);
	CHECK_MSG(WIFEXITED(status) && (WEXITSTATUS(status) == SIGSEGV || WEXITSTATUS(status) == SIGBUS),
			  "reading a fake device's memory from the host did not fault (status %d)", status);
	/* and inside the table it is open: the model still trains and serializes */
	CHECK(nn_model_train_step(m, x, y, 8, NULL, &err));
	CHECK(nn_model_params_finite(m));
	nn_model_free(m);
	free(x);
	free(y);
}

/* Moving between backends, and cloning a device model, keep every byte. */
UNIT_TEST(device_fake_moves_and_clones)
{
	float	   *x,
			   *y;
	NnError		err;
	NnModel    *cpu = small_mlp(NN_OPT_ADAM, &x, &y, 16);
	NnModel    *dev = nn_model_clone(cpu, &err);
	NnModel    *copy;

	CHECK(nn_model_use_backend(dev, fake(), &err));
	CHECK(strcmp(dev->be->name, "fake") == 0);
	CHECK(same_model(cpu, dev));
	for (int i = 0; i < 6; i++)
	{
		/* the device model goes back to the CPU halfway, and out again */
		if (i == 2)
			CHECK(nn_model_use_backend(dev, nn_backend_cpu(), &err));
		if (i == 4)
			CHECK(nn_model_use_backend(dev, fake(), &err));
		CHECK(nn_model_train_step(cpu, x, y, 16, NULL, &err));
		CHECK(nn_model_train_step(dev, x, y, 16, NULL, &err));
	}
	CHECK(same_model(cpu, dev));
	{
		bool		f1 = false,
					f2 = false;

		CHECK(nn_model_train_step_finite(cpu, x, y, 16, NULL, &f1, &err));
		CHECK(nn_model_train_step_finite(dev, x, y, 16, NULL, &f2, &err));
		CHECK(f1 && f2 && same_model(cpu, dev));
	}
	copy = nn_model_clone(dev, &err);
	CHECK(copy != NULL && copy->be == nn_backend_cpu() && same_model(copy, dev));
	/* the clone trains on as the device model does */
	CHECK(nn_model_train_step(copy, x, y, 16, NULL, &err));
	CHECK(nn_model_train_step(dev, x, y, 16, NULL, &err));
	CHECK(same_model(copy, dev));
	nn_model_free(copy);
	nn_model_free(dev);
	nn_model_free(cpu);
	free(x);
	free(y);
	CHECK(nn_fake_cuda_used() == 0);
}

/* A device too small: the move fails with the sizes, and the model stays usable on the CPU. */
UNIT_TEST(device_fake_out_of_memory)
{
	float	   *x,
			   *y;
	NnError		err;
	char		reason[256];
	NnModel    *m = small_mlp(NN_OPT_ADAM, &x, &y, 16);
	NnModel    *twin = nn_model_clone(m, &err);
	const NnBackend *small = nn_fake_cuda_on("mem=8192", 0, reason, sizeof(reason));

	CHECK_MSG(small != NULL, "%s", reason);
	CHECK(nn_model_reserve(m, 16, &err));
	memset(&err, 0, sizeof(err));
	CHECK(!nn_model_use_backend(m, small, &err));
	CHECK_MSG(strstr(err.msg, "out of fake memory") != NULL && strstr(err.msg, "bytes") != NULL,
			  "unexpected error: %s", err.msg);
	CHECK(m->be == nn_backend_cpu());
	CHECK(nn_fake_cuda_used() == 0);
	CHECK(nn_model_train_step(m, x, y, 16, NULL, &err));
	CHECK(nn_model_train_step(twin, x, y, 16, NULL, &err));
	CHECK(same_model(m, twin));

	/* a workspace that does not fit once the model is there fails as cleanly */
	nn_model_free(twin);
	twin = nn_model_clone(m, &err);
	small = nn_fake_cuda_on("mem=40000", 0, reason, sizeof(reason));
	CHECK_MSG(nn_model_use_backend(twin, small, &err), "%s", err.msg);
	CHECK(!nn_model_reserve(twin, 4096, &err));
	CHECK(twin->batch_cap == 0 || twin->batch_cap < 4096);
	CHECK(nn_model_train_step(twin, x, y, 16, NULL, &err));
	CHECK(nn_model_train_step(m, x, y, 16, NULL, &err));
	CHECK(same_model(m, twin));
	nn_model_free(twin);
	nn_model_free(m);
	free(x);
	free(y);
	fake();						/* the usual 1 GiB again */
	CHECK(nn_fake_cuda_used() == 0);
}

/* Slices, joins and layer copies read device models; frozen features are the CPU's. */
UNIT_TEST(device_fake_transfer)
{
	NnSpec		s;
	NnOptim		o;
	NnError		err;
	NnModel    *cpu,
			   *dev,
			   *pc,
			   *pd,
			   *rc,
			   *rd,
			   *jc,
			   *jd;
	int			n = 300;
	float	   *x,
			   *y,
			   *fc,
			   *fd;

	spec_begin(&s, 3, 2, 8, 8, NN_LOSS_CROSS_ENTROPY);
	spec_conv(&s, 4, 3, 1, 1);
	spec_add(&s, NN_BATCHNORM);
	spec_add(&s, NN_RELU);
	spec_pool(&s, NN_MAXPOOL2D, 2);
	spec_add(&s, NN_FLATTEN);
	spec_dense(&s, 6);
	spec_add(&s, NN_RELU);
	spec_dense(&s, 3);
	cpu = nn_model_create(&s, 3, &err);
	optim(&o, NN_OPT_SGD, 0.9f, false, 0.0f);
	nn_model_set_optim(cpu, &o, &err);
	x = test_normal((int64_t) n * nn_model_input_size(cpu), 61, 1.0f);
	y = test_targets(s.loss, n, 3, 62);
	for (int i = 0; i < 3; i++)
		CHECK(nn_model_train_step(cpu, x, y, 16, NULL, &err));
	dev = nn_model_clone(cpu, &err);
	CHECK(nn_model_use_backend(dev, fake(), &err));

	/* a frozen prefix taken from the device model, run on the device */
	pc = nn_model_slice(cpu, 0, 5, 0, &err);
	pd = nn_model_slice(dev, 0, 5, 0, &err);
	CHECK(pd != NULL && pd->be == nn_backend_cpu() && same_model(pc, pd));
	CHECK(nn_model_use_backend(pd, fake(), &err));
	fc = malloc(sizeof(float) * n * nn_model_output_size(pc));
	fd = malloc(sizeof(float) * n * nn_model_output_size(pc));
	CHECK(nn_model_forward_frozen(pc, x, n, fc, &err));
	CHECK(nn_model_forward_frozen(pd, x, n, fd, &err));
	CHECK(memcmp(fc, fd, sizeof(float) * n * nn_model_output_size(pc)) == 0);

	/* the rest trained on the features, on the device; joined back */
	rc = nn_model_slice(cpu, 5, 8, 9, &err);
	rd = nn_model_slice(dev, 5, 8, 9, &err);
	nn_model_set_optim(rc, &o, &err);
	nn_model_set_optim(rd, &o, &err);
	CHECK(nn_model_use_backend(rd, fake(), &err));
	for (int i = 0; i < 3; i++)
	{
		CHECK(nn_model_train_step(rc, fc, y, 32, NULL, &err));
		CHECK(nn_model_train_step(rd, fd, y, 32, NULL, &err));
	}
	jc = nn_model_join(pc, rc, &err);
	jd = nn_model_join(pd, rd, &err);
	CHECK(jc != NULL && jd != NULL && same_model(jc, jd));

	/* the trained rest copied back into the device model, and sliced out of it */
	CHECK(nn_model_copy_layers(dev, 5, rd, 0, 3, &err));
	CHECK(nn_model_copy_layers(cpu, 5, rc, 0, 3, &err));
	CHECK(same_model(cpu, dev));
	nn_model_free(rc);
	nn_model_free(rd);
	rc = nn_model_slice_trained(jc, 5, &err);
	CHECK(nn_model_use_backend(jd, fake(), &err));
	rd = nn_model_slice_trained(jd, 5, &err);
	CHECK(rc != NULL && rd != NULL && same_model(rc, rd));
	/* and from a CPU model into a device model */
	CHECK(nn_model_copy_layers(jd, 0, cpu, 0, 5, &err));
	CHECK(nn_model_copy_layers(jc, 0, cpu, 0, 5, &err));
	CHECK(same_model(jc, jd));

	nn_model_free(cpu);
	nn_model_free(dev);
	nn_model_free(pc);
	nn_model_free(pd);
	nn_model_free(rc);
	nn_model_free(rd);
	nn_model_free(jc);
	nn_model_free(jd);
	free(x);
	free(y);
	free(fc);
	free(fd);
	CHECK(nn_fake_cuda_used() == 0);
}

/* Run fn with stderr going to a file; returns what it wrote (malloc'd). */
static char *
capture_stderr(void (*fn) (void *), void *arg)
{
	FILE	   *f = tmpfile();
	int			saved = dup(2);
	char	   *text = calloc(1, 4096);

	fflush(stderr);
	dup2(fileno(f), 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	if (fread(text, 1, 4095, f) == 0)
		text[0] = '\0';
	fclose(f);
	return text;
}

static void
open_fake(void *out)
{
	*(const NnBackend **) out = nn_fake_cuda_on("devices=2", 1, NULL, 0);
}

static void
open_default(void *unused)
{
	fake();
}

/* The context: created once, said so on stderr, one device, not across fork; busy devices. */
UNIT_TEST(device_fake_context)
{
	char		err[512],
				want[128];
	const NnBackend *b = NULL;
	char	   *said;
	NnCudaDevice devs[4];
	int			driver = -1;
	pid_t		child;
	int			status = 0;

	CHECK(nn_fake_cuda_forget());

	/* listed without a context; busy devices are listed too, but cannot be used */
	CHECK(nn_fake_cuda_devices("devices=2,busy", devs, 4, &driver, err, sizeof(err)) == 2);
	CHECK(driver > 0 && devs[1].ordinal == 1 && devs[0].total_bytes == ((size_t) 1 << 30));
	CHECK(nn_fake_cuda_on("busy", 0, err, sizeof(err)) == NULL);
	CHECK_MSG(strstr(err, "busy") != NULL && strstr(err, "exclusive-process") != NULL, "%s", err);
	CHECK(nn_fake_cuda_devices("mem=12345", devs, 4, NULL, err, sizeof(err)) == 1 &&
		  devs[0].total_bytes == 12345);
	CHECK(nn_fake_cuda_on("devices=x", 0, err, sizeof(err)) == NULL && strstr(err, "devices=x") != NULL);
	CHECK(nn_fake_cuda_on("mem=-5", 0, err, sizeof(err)) == NULL && strstr(err, "mem=-5") != NULL);
	CHECK(nn_fake_cuda_on("devices=17", 0, err, sizeof(err)) == NULL);
	CHECK(nn_fake_cuda_on("1,mem=12x", 0, err, sizeof(err)) == NULL);
	CHECK(nn_fake_cuda_on("1", 1, err, sizeof(err)) == NULL && strstr(err, "does not exist") != NULL);

	/* the context is created on cuda:1 of two, and says so once */
	said = capture_stderr(open_fake, &b);
	snprintf(want, sizeof(want), "pgdl: fake CUDA device 1 initialized in process %d\n", (int) getpid());
	CHECK(b != NULL);
	CHECK_MSG(strcmp(said, want) == 0, "stderr said \"%s\"", said);
	free(said);
	said = capture_stderr(open_fake, &b);
	CHECK(b != NULL && said[0] == '\0');
	free(said);
	CHECK(nn_fake_cuda_on("devices=2", 0, err, sizeof(err)) == NULL && strstr(err, "in use") != NULL);

	/* a forked child cannot use its parent's context */
	fflush(stdout);
	child = fork();
	if (child == 0)
		_exit(nn_fake_cuda_on("devices=2", 1, err, sizeof(err)) == NULL && strstr(err, "fork") != NULL ? 7 : 1);
	CHECK(child > 0 && waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7);

	CHECK(nn_fake_cuda_forget());
	said = capture_stderr(open_default, NULL);
	free(said);
}

/* In a build without CUDA, PGDL_FAKE_CUDA makes the CUDA entry points answer with the fake. */
UNIT_TEST(device_fake_environment)
{
	char		err[512];
	const NnBackend *b;
	NnCudaDevice devs[4];
	int			driver;

	unsetenv("PGDL_FAKE_CUDA");
	b = nn_backend_cuda_on(0, err, sizeof(err));
	if (b != NULL || strstr(err, "without CUDA") == NULL)
		return;					/* a CUDA build: the variable is not read there */
	CHECK(nn_cuda_devices(devs, 4, &driver, err, sizeof(err)) == -1);
	setenv("PGDL_FAKE_CUDA", "devices=3", 1);
	CHECK(nn_cuda_devices(devs, 4, &driver, err, sizeof(err)) == 3);
	CHECK(nn_cuda_devices(devs, 2, &driver, err, sizeof(err)) == 2);
	b = nn_backend_cuda(err, sizeof(err));
	CHECK_MSG(b != NULL && strcmp(b->name, "fake") == 0 && err[0] == '\0', "%s", err);
	CHECK(nn_backend_cuda_on(0, err, sizeof(err)) == b);
	setenv("PGDL_FAKE_CUDA", "0", 1);
	CHECK(nn_backend_cuda_on(0, err, sizeof(err)) == NULL && strstr(err, "without CUDA") != NULL);
	unsetenv("PGDL_FAKE_CUDA");
}

/*
 * The fake has every primitive the CPU has (the table is function pointers
 * after name and host_memory) but gemm_bf16, which the CUDA backend lacks too.
 */
UNIT_TEST(device_fake_table_complete)
{
	const NnBackend *f = fake();
	const NnBackend *c = nn_backend_cpu();
	size_t		first = offsetof(NnBackend, alloc);

	CHECK(strcmp(f->name, "fake") == 0 && !f->host_memory && c->host_memory);
	CHECK(f->gemm_bf16 == NULL && c->gemm_bf16 != NULL);
	for (size_t at = first; at + sizeof(void (*) (void)) <= sizeof(NnBackend); at += sizeof(void (*) (void)))
	{
		void		(*fp) (void),
					(*cp) (void);

		if (at == offsetof(NnBackend, gemm_bf16))
			continue;
		memcpy(&fp, (const char *) f + at, sizeof(fp));
		memcpy(&cp, (const char *) c + at, sizeof(cp));
		CHECK_MSG(cp != NULL && fp != NULL && fp != cp, "table entry at byte %zu: cpu %p, fake %p", at,
				  (void *) cp, (void *) fp);
	}
}

/*
 * Staged training (the next batch uploaded while a step runs) gives the bytes
 * of plain steps, on the CPU and on the device, whatever runs in between.
 */
UNIT_TEST(device_staged_training_matches_steps)
{
	NnError		err;
	int			n = 96,
				b = 16;
	float	   *x,
			   *y,
			   *xs,
			   *ys;
	NnModel    *ref = small_mlp(NN_OPT_ADAM, &x, &y, n);
	int64_t		in = nn_model_input_size(ref);
	NnBatchStats sr = {0};

	xs = malloc(sizeof(float) * n * in);
	ys = malloc(sizeof(float) * n);
	for (int step = 0; step < n / b; step++)
		CHECK(nn_model_train_step(ref, x + step * b * in, y + step * b, b, &sr, &err));

	for (int on_device = 0; on_device < 2; on_device++)
	{
		float	   *mx,
				   *my;
		NnModel    *m = small_mlp(NN_OPT_ADAM, &mx, &my, n);
		NnBatchStats sm = {0},
					ev = {0};
		float		bad = 99.0f;
		bool		fin;

		if (on_device)
			CHECK(nn_model_use_backend(m, fake(), &err));
		CHECK(!nn_model_train_staged(m, &sm, &fin, &err) && strstr(err.msg, "no batch") != NULL);
		CHECK(!nn_model_stage(m, x, &bad, 1, &err) && strstr(err.msg, "class label") != NULL);
		/* the caller's buffers are free once staged: they are scribbled over at once */
		memcpy(xs, x, sizeof(float) * b * in);
		memcpy(ys, y, sizeof(float) * b);
		CHECK(nn_model_stage(m, xs, ys, b, &err));
		memset(xs, 0, sizeof(float) * b * in);
		for (int step = 0; step < n / b; step++)
		{
			CHECK_MSG(nn_model_train_staged(m, &sm, &fin, &err) && fin, "%s", err.msg);
			if (step + 1 < n / b)
			{
				memcpy(xs, x + (step + 1) * b * in, sizeof(float) * b * in);
				memcpy(ys, y + (step + 1) * b, sizeof(float) * b);
				CHECK(nn_model_stage(m, xs, ys, b, &err));
				memset(ys, 0, sizeof(float) * b);
			}
			/* between staging and training: an evaluation, a larger inference pass (a new workspace) */
			if (step == 1)
				CHECK(nn_model_evaluate(m, x, y, 8, &ev, &err));
			if (step == 3)
				CHECK(nn_model_forward(m, x, n, false) != NULL);
		}
		CHECK(!nn_model_train_staged(m, &sm, &fin, &err));
		CHECK_MSG(same_model(ref, m), "staged training (%s) differs from steps", on_device ? "device" : "cpu");
		CHECK(memcmp(&sm.loss_sum, &sr.loss_sum, sizeof(double)) == 0 && sm.correct == sr.correct && sm.n == sr.n);
		nn_model_free(m);
		free(mx);
		free(my);
	}
	nn_model_free(ref);
	free(x);
	free(y);
	free(xs);
	free(ys);
	CHECK(nn_fake_cuda_used() == 0);
}

/* Training methods on the fake device: clipping, label smoothing, decay groups, warmup; the CPU's bytes. */
UNIT_TEST(device_fake_training_methods_match_cpu)
{
	NnSpec		s;
	NnOptim		o;

	mlp_dropout(&s, NN_LOSS_CROSS_ENTROPY);
	optim(&o, NN_OPT_SGD, 0.9f, false, 1e-2f);
	o.clip_norm = 0.05f;
	o.label_smoothing = 0.1f;
	o.no_decay_bias_norm = true;
	o.warmup_steps = 3;
	o.warmup_start = 0.25f;
	o.schedule = NN_SCHED_STEP;
	o.step_size = 1;
	o.gamma = 0.5f;
	o.epoch = 2;
	check_same_run("sgd with training methods", &s, &o, 6, 16, 9);
	optim(&o, NN_OPT_ADAMW, 0.0f, false, 1e-1f);
	o.clip_norm = 0.5f;
	o.no_decay_bias_norm = true;
	o.schedule = NN_SCHED_COSINE;
	o.epochs = 4;
	o.epoch = 1;
	check_same_run("adamw with training methods", &s, &o, 6, 16, 9);
}
