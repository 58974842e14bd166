/*
 * calibrate.c -- pgdl.calibrate(): what this server's engine does, measured.
 *
 * Small probe networks are trained for a moment each (forward, loss, backward,
 * update; one BLAS thread, as every pgdl backend and worker trains): dense and
 * conv2d layers of several shape classes, the memory-bound layers on
 * activations of two spatial sizes and on flat features, the optimizer updates, and a step's fixed cost, each
 * at several batch sizes.  A layer's time is isolated by difference: a probe
 * with the layer against one without it.  Then N background workers (N =
 * min(cores, pgdl.max_workers)) run three of the probes at once, which shows
 * what sharing the memory bandwidth costs each of them.  The points go into a
 * dated row of pgdl.server_profiles (sql/parts/72_profiles.sql), from which
 * throughput.c predicts.
 */
#include "postgres.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "plan/plan.h"

#define CAL_MIN_SECONDS		1.0
#define CAL_MAX_SECONDS		600.0
#define CAL_MAX_POINTS		192
#define CAL_CONC_PROBES		3
#define CAL_MAGIC			0x70676361	/* "pgca" */
#define CAL_STACK			3	/* copies of a shape-keeping layer in its probe */

static const int32 cal_batches[] = {16, 64, 256};
#define CAL_N_BATCHES lengthof(cal_batches)

/*
 * activations of the memory-bound probes: [C, H, W]; H = 0: flat, as behind a
 * dense layer (no pools there, and a batchnorm over features: "batchnorm1d")
 */
static const int32 cal_acts[][3] = {{8, 14, 14}, {16, 28, 28}, {512, 0, 0}};

/* dense probes: inputs, units */
static const int32 cal_dense[][2] = {{64, 64}, {256, 256}, {784, 512}, {1024, 1024}};

/*
 * conv2d probes: input channels, filters, height = width, kernel; then first
 * layers (no input gradient), whose cost per FLOP depends on the kernel (a
 * wider one makes a longer gemm per column) and on the filters
 */
static const int32 cal_conv_first[][4] = {{1, 8, 28, 3}, {1, 16, 28, 3}, {1, 32, 28, 3}, {1, 8, 28, 5}, {1, 16, 28, 5}};
static const int32 cal_conv[][4] = {{1, 16, 28, 3}, {4, 16, 28, 3}, {16, 32, 14, 3}, {16, 16, 28, 3}, {32, 64, 14, 3}};

typedef struct CalPoint
{
	const char *kind;
	double		size;			/* per example: training FLOPs, input floats, or parameters */
	int32		batch;
	int32		kernel;			/* a convolution's; 0: none */
	double		seconds;		/* per step */
} CalPoint;

typedef struct Cal
{
	CalPoint	points[CAL_MAX_POINTS];
	int			n;
	double		budget;			/* seconds each probe runs */
	/* kind "loss": a probe's loss (mse) and fixed cost per step, by its output floats and batch */
	PgdlProfile losses;
} Cal;

/* What the concurrent workers share. */
typedef struct CalShared
{
	uint32		magic;
	int32		n_workers;
	double		budget;
	PgdlCaller	caller;			/* workers connect as it, as pgdl.fit_multiple's do */
	volatile bool go;
	volatile bool ready[PGDL_MAX_WORKERS];	/* connected */
	volatile bool done[PGDL_MAX_WORKERS];
	double		seconds[PGDL_MAX_WORKERS][CAL_CONC_PROBES];
} CalShared;

static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- probe networks ---- */

static void
spec_start(NnSpec *spec, int32 c, int32 h, int32 w, NnLoss loss)
{
	memset(spec, 0, sizeof(*spec));
	spec->input_ndim = h > 0 ? 3 : 1;
	spec->input[0] = c;
	spec->input[1] = h;
	spec->input[2] = w;
	spec->loss = loss;
}

static NnLayerSpec *
spec_add(NnSpec *spec, NnLayerType type)
{
	NnLayerSpec *l = &spec->layers[spec->n_layers++];

	nn_layer_defaults(l, type);
	return l;
}

static void
fill_uniform(float *v, int64 n, uint64 stream)
{
	for (int64 i = 0; i < n; i++)
		v[i] = nn_rng_uniform(42, stream, (uint64) i) - 0.5f;
}

/*
 * A probe's budget is timed in three windows and the median kept: on a shared
 * machine another process taking the core for a moment slows one window, and
 * a mean would carry it into every prediction from that point.
 */
#define CAL_WINDOWS 3

static double
median3(const double *v)
{
	double		lo = Min(v[0], v[1]),
				hi = Max(v[0], v[1]);

	return v[2] < lo ? lo : (v[2] > hi ? hi : v[2]);
}

/*
 * Seconds per training step of spec at batch with optimizer opt (NULL: SGD
 * with momentum 0.9), after one step to warm up; at least one step a window
 * and about `budget` seconds in all.  update_only: time nn_model_update alone.
 */
static double
time_steps(const NnSpec *spec, int32 batch, const NnOptim *opt, bool update_only, double budget)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl calibration probe",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	NnOptim		sgd;
	NnModel    *m;
	NnError		err;
	NnBatchStats stats = {0};
	float	   *x,
			   *y;
	int64		n_in,
				n_y;
	double		start,
				elapsed,
				per_step[CAL_WINDOWS];

	if (opt == NULL)
	{
		nn_optim_defaults(&sgd, NN_OPT_SGD);
		sgd.momentum = 0.9f;
		opt = &sgd;
	}
	m = nn_model_create(spec, 42, &err);
	if (m == NULL)
		pgdl_report_nn_error("calibration probe", &err);
	pgdl_model_free_with(m, cxt);
	if (!nn_model_set_optim(m, opt, &err) || !nn_model_reserve(m, batch, &err))
		pgdl_report_nn_error("calibration probe", &err);
	n_in = nn_model_input_size(m) * batch;
	n_y = nn_model_target_size(m) * batch;
	x = palloc(sizeof(float) * n_in);
	y = palloc(sizeof(float) * n_y);
	fill_uniform(x, n_in, 1);
	if (spec->loss == NN_LOSS_CROSS_ENTROPY)
		for (int64 i = 0; i < n_y; i++)
			y[i] = (float) (i % nn_model_output_size(m));
	else
		fill_uniform(y, n_y, 2);

	if (!nn_model_train_step(m, x, y, batch, &stats, &err))
		pgdl_report_nn_error("calibration probe", &err);
	for (int w = 0; w < CAL_WINDOWS; w++)
	{
		int			steps = 0;

		start = now_seconds();
		do
		{
			CHECK_FOR_INTERRUPTS();
			if (update_only)
				nn_model_update(m);
			else if (!nn_model_train_step(m, x, y, batch, &stats, &err))
				pgdl_report_nn_error("calibration probe", &err);
			steps++;
			elapsed = now_seconds() - start;
		} while (elapsed < budget / CAL_WINDOWS);
		per_step[w] = elapsed / steps;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return median3(per_step);
}

static void
add_point(Cal *cal, const char *kind, double size, int32 batch, double seconds)
{
	CalPoint   *p;

	if (cal->n >= CAL_MAX_POINTS)
		elog(ERROR, "too many calibration points");
	p = &cal->points[cal->n++];
	p->kind = kind;
	p->size = size;
	p->batch = batch;
	p->kernel = 0;
	/* a difference of two noisy timings can come out at or below zero: keep a floor */
	p->seconds = Max(seconds, 1e-12 * Max(size, 1.0) * batch);
}

/* What the points measured so far say one kind costs (throughput.c's interpolation). */
static double
measured(const Cal *cal, const char *kind, double size, int32 batch)
{
	PgdlProfile prof = {0};

	for (int i = 0; i < cal->n; i++)
		pgdl_profile_add_point(&prof, cal->points[i].kind, cal->points[i].size, cal->points[i].batch,
							   cal->points[i].kernel, cal->points[i].seconds);
	return pgdl_profile_kind_seconds(&prof, kind, size, batch);
}

/* ---- the probes, one family at a time ---- */

/* input -> relu -> (what add adds) -> mse: the relu keeps the layer under test off position 0 */
static double
time_act(const int32 *s, int32 batch, NnLayerType type, int copies, double budget)
{
	NnSpec		spec;

	spec_start(&spec, s[0], s[1], s[2], NN_LOSS_MSE);
	spec_add(&spec, NN_RELU);
	for (int k = 0; k < copies; k++)
	{
		NnLayerSpec *l = spec_add(&spec, type);

		if (type == NN_MAXPOOL2D || type == NN_AVGPOOL2D)
			l->kernel = 2;
	}
	return time_steps(&spec, batch, NULL, false, budget);
}

static void
probe_memory_bound(Cal *cal)
{
	static const struct
	{
		const char *kind;
		NnLayerType type;
	}			stacked[] = {{"relu", NN_RELU}, {"sigmoid", NN_SIGMOID}, {"tanh", NN_TANH},
	{"leaky_relu", NN_LEAKY_RELU}, {"dropout", NN_DROPOUT}, {"batchnorm", NN_BATCHNORM}};

	for (int a = 0; a < lengthof(cal_acts); a++)
		for (int b = 0; b < CAL_N_BATCHES; b++)
		{
			const int32 *s = cal_acts[a];
			int32		batch = cal_batches[b];
			bool		spatial = s[1] > 0;
			double		floats = (double) s[0] * Max(s[1], 1) * Max(s[2], 1);
			int32		half[3] = {s[0], s[1] / 2, s[2] / 2};
			int32		flat[3] = {s[0], 0, 0};
			double		base = time_act(s, batch, NN_RELU, 0, cal->budget);
			double		base_half,
						base_flat,
						relu;

			for (int k = 0; k < lengthof(stacked); k++)
				add_point(cal, !spatial && stacked[k].type == NN_BATCHNORM ? "batchnorm1d" : stacked[k].kind,
						  floats, batch,
						  (time_act(s, batch, stacked[k].type, CAL_STACK, cal->budget) - base) / CAL_STACK);
			/* the base is a relu's forward pass (about half a relu: at position 0 it has no backward), the loss, a step */
			relu = cal->points[cal->n - lengthof(stacked)].seconds;
			pgdl_profile_add_point(&cal->losses, "loss", floats, batch, 0, Max(base - 0.5 * relu, 1e-12));
			if (!spatial)
				continue;
			base_half = time_act(half, batch, NN_RELU, 0, cal->budget);
			base_flat = time_act(flat, batch, NN_RELU, 0, cal->budget);
			/*
			 * A pool's probe ends on a smaller output than the relu before it: its baseline is a relu
			 * over that output, and the first relu's forward pass (about half a relu) over the
			 * difference.
			 */
			relu = cal->points[cal->n - lengthof(stacked)].seconds / floats;
			add_point(cal, "maxpool2d", floats, batch,
					  time_act(s, batch, NN_MAXPOOL2D, 1, cal->budget) - base_half - 0.5 * relu * floats * 3 / 4);
			add_point(cal, "avgpool2d", floats, batch,
					  time_act(s, batch, NN_AVGPOOL2D, 1, cal->budget) - base_half - 0.5 * relu * floats * 3 / 4);
			add_point(cal, "global_avgpool", floats, batch,
					  time_act(s, batch, NN_GLOBAL_AVGPOOL, 1, cal->budget) - base_flat -
					  0.5 * relu * (floats - s[0]));
		}
}

/* The optimizer updates, per parameter, on a model of 400k parameters. */
static void
probe_updates(Cal *cal)
{
	static const struct
	{
		const char *kind;
		NnOptType	type;
		float		momentum;
	}			opts[] = {{"update_sgd", NN_OPT_SGD, 0.0f}, {"update_momentum", NN_OPT_SGD, 0.9f},
	{"update_adam", NN_OPT_ADAM, 0.0f}};
	NnSpec		spec;
	NnCost		cost;

	spec_start(&spec, 784, 0, 0, NN_LOSS_CROSS_ENTROPY);
	spec_add(&spec, NN_DENSE)->units = 512;
	spec_add(&spec, NN_DENSE)->units = 10;
	if (!nn_spec_cost(&spec, NULL, &cost, NULL))
		elog(ERROR, "invalid calibration probe");
	for (int k = 0; k < lengthof(opts); k++)
	{
		NnOptim		opt;

		nn_optim_defaults(&opt, opts[k].type);
		opt.momentum = opts[k].momentum;
		add_point(cal, opts[k].kind, (double) cost.params, 1,
				  time_steps(&spec, 16, &opt, true, cal->budget));
	}
}

/* A step's fixed cost: a network that does almost nothing, 10 inputs to 10 classes. */
static void
probe_step(Cal *cal)
{
	NnSpec		spec;

	spec_start(&spec, 10, 0, 0, NN_LOSS_CROSS_ENTROPY);
	spec_add(&spec, NN_DENSE)->units = 10;
	for (int b = 0; b < CAL_N_BATCHES; b++)
		add_point(cal, "step", 1, cal_batches[b], time_steps(&spec, cal_batches[b], NULL, false, cal->budget));
}

/*
 * A compute layer at position 1 (behind a relu, so that its input gradient is
 * computed, as for every layer but the first); the relu's forward pass, the
 * loss and step (measured on the memory-bound probes' bases: an mse costs
 * several relus per value) and the update are taken off.
 */
static void
add_compute_point(Cal *cal, const char *kind, const NnSpec *spec, int32 batch)
{
	NnShape		shape[NN_MAX_LAYERS + 1];
	NnCost		per[2];
	int			l = spec->n_layers - 1;	/* the layer measured: the last */
	double		t;

	if (!nn_spec_validate(spec, shape, NULL) || !nn_spec_cost(spec, per, NULL, NULL))
		elog(ERROR, "invalid calibration probe");
	t = time_steps(spec, batch, NULL, false, cal->budget);
	if (l > 0)
		t -= 0.5 * measured(cal, "relu", (double) NN_SHAPE_SIZE(shape[0]), batch);
	t -= pgdl_profile_kind_seconds(&cal->losses, "loss", (double) NN_SHAPE_SIZE(shape[l + 1]), batch);
	t -= measured(cal, "update_momentum", (double) per[l].params, 1);
	add_point(cal, kind, (double) per[l].flops_train, batch, t);
	if (spec->layers[l].type == NN_CONV2D)
		cal->points[cal->n - 1].kernel = spec->layers[l].kernel;
}

static void
probe_compute(Cal *cal)
{
	for (int b = 0; b < CAL_N_BATCHES; b++)
	{
		for (int d = 0; d < lengthof(cal_dense); d++)
		{
			NnSpec		spec;

			spec_start(&spec, cal_dense[d][0], 0, 0, NN_LOSS_MSE);
			spec_add(&spec, NN_RELU);
			spec_add(&spec, NN_DENSE)->units = cal_dense[d][1];
			add_compute_point(cal, "dense", &spec, cal_batches[b]);
		}
		for (int c = 0; c < lengthof(cal_conv); c++)
		{
			NnSpec		spec;
			NnLayerSpec *l;

			spec_start(&spec, cal_conv[c][0], cal_conv[c][2], cal_conv[c][2], NN_LOSS_MSE);
			spec_add(&spec, NN_RELU);
			l = spec_add(&spec, NN_CONV2D);
			l->filters = cal_conv[c][1];
			l->kernel = cal_conv[c][3];
			l->padding = cal_conv[c][3] / 2;
			add_compute_point(cal, "conv2d", &spec, cal_batches[b]);
		}
		for (int c = 0; c < lengthof(cal_conv_first); c++)
		{
			NnSpec		spec;
			NnLayerSpec *l;

			spec_start(&spec, cal_conv_first[c][0], cal_conv_first[c][2], cal_conv_first[c][2], NN_LOSS_MSE);
			l = spec_add(&spec, NN_CONV2D);
			l->filters = cal_conv_first[c][1];
			l->kernel = cal_conv_first[c][3];
			l->padding = cal_conv_first[c][3] / 2;
			add_compute_point(cal, "conv2d_first", &spec, cal_batches[b]);
		}
	}
}

/*
 * Memory this process freed goes back to the system before a probe's round:
 * a worker's partitions and a model's blobs land in memory new to the process,
 * which faults in page by page, and a probe that reused the same sizes round
 * after round would keep its pages mapped (on some virtual machines a fault
 * costs more than copying the page).
 */
static void
fresh_memory(void)
{
#ifdef __GLIBC__
	(void) malloc_trim(0);
#endif
}

/*
 * A process's first write to each page of shared memory that already exists,
 * per byte: a worker starts with none of the shared buffers mapped, so reading
 * a partition through them, or training on another worker's published copy,
 * faults on every page.  The segment's pages are unmapped from this process
 * only (a shared mapping keeps them) before each window.
 */
#define CAL_FAULT_BYTES		(16 * 1024 * 1024)

static void
probe_fault(Cal *cal)
{
	long		page = sysconf(_SC_PAGESIZE);
	dsm_segment *seg;
	volatile char *p;
	double		seconds[CAL_WINDOWS];

	if (page <= 0)
		return;					/* no point: predicted without faults, as before */
	seg = dsm_create(CAL_FAULT_BYTES, 0);
	p = dsm_segment_address(seg);
	memset((char *) p, 1, CAL_FAULT_BYTES);
	for (int w = 0; w < CAL_WINDOWS; w++)
	{
		double		start;

		CHECK_FOR_INTERRUPTS();
		if (madvise((char *) p, CAL_FAULT_BYTES, MADV_DONTNEED) != 0)
		{
			dsm_detach(seg);
			return;				/* no point: predicted without faults, as before */
		}
		start = now_seconds();
		for (Size i = 0; i < CAL_FAULT_BYTES; i += page)
			p[i] = 2;
		seconds[w] = now_seconds() - start;
	}
	dsm_detach(seg);
	add_point(cal, "fault", CAL_FAULT_BYTES, 1, median3(seconds));
}

/*
 * Reading packed buffers back from their table into memory, per float, as a
 * pgdl.fit_multiple worker loads a partition and pgdl.fit its first epoch
 * (pgdl_packed_hold): arrays stored EXTERNAL, as pgdl.pack stores them, fetched
 * from their TOAST chunks through shared buffers and checked; then copied
 * into a new shared memory segment, as a worker publishes what it read for
 * other jobs (shared_scan.c).
 */
#define CAL_READ_EXAMPLES	256
#define CAL_READ_FEATURES	1024
#define CAL_READ_FLOATS		(CAL_READ_EXAMPLES * CAL_READ_FEATURES)
#define CAL_READ_ROWS		4

/* One read of the probe's buffers, and their copy into a segment. */
static void
read_buffers(const PgdlDataset *ds)
{
	MemoryContext keep = AllocSetContextCreate(CurrentMemoryContext, "pgdl calibration buffers",
											   ALLOCSET_DEFAULT_SIZES);
	PgdlHeldPartition held = {0};
	int64		budget = INT64CONST(1) << 40;
	dsm_segment *seg = dsm_create((Size) CAL_READ_ROWS * CAL_READ_EXAMPLES * (CAL_READ_FEATURES + 1) * sizeof(float), 0);

	pgdl_packed_hold(ds, 0, &held, keep, &budget, NULL, NULL);
	pgdl_shared_copy_buffers(ds, &held, dsm_segment_address(seg));
	dsm_detach(seg);
	MemoryContextDelete(keep);
}

static void
probe_read(Cal *cal)
{
	/* a table of the calibration's own (not temporary: packed tables are read through shared buffers) */
	char	   *table = psprintf("pgdl.calibrate_read_%d", MyProcPid);
	PgdlDataset ds = {0};
	double		start,
				elapsed,
				reading = 0;
	int			reads = 0;

	SPI_connect();
	if (SPI_execute(psprintf("CREATE TABLE %s (part integer, buffer_id integer, n integer, x real[], y real[])",
							 table), false, 0) != SPI_OK_UTILITY ||
		SPI_execute(psprintf("ALTER TABLE %s ALTER COLUMN x SET STORAGE EXTERNAL, ALTER COLUMN y SET STORAGE EXTERNAL",
							 table), false, 0) != SPI_OK_UTILITY ||
		SPI_execute(psprintf("INSERT INTO %s SELECT 0, i, " CppAsString2(CAL_READ_EXAMPLES) ", "
							 "(SELECT array_agg(((g * 7919 + i) %% 1000)::real) FROM generate_series(1, " CppAsString2(CAL_READ_FLOATS) ") g), "
							 "(SELECT array_agg((g %% 10)::real) FROM generate_series(1, " CppAsString2(CAL_READ_EXAMPLES) ") g) "
							 "FROM generate_series(1, " CppAsString2(CAL_READ_ROWS) ") i", table), false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not make the calibration's buffers");
	ds.packed = DatumGetObjectId(DirectFunctionCall1(regclassin, CStringGetDatum(table)));
	ds.n_features = CAL_READ_FEATURES;
	ds.n_targets = 1;
	/* the statement's snapshot does not see the rows just written: a newer one */
	CommandCounterIncrement();
	PushActiveSnapshot(GetLatestSnapshot());
	start = now_seconds();
	do
	{
		double		t0;

		CHECK_FOR_INTERRUPTS();
		fresh_memory();
		t0 = now_seconds();
		read_buffers(&ds);
		reading += now_seconds() - t0;
		reads++;
		elapsed = now_seconds() - start;
	} while (reads < 2 || elapsed < cal->budget * 3);
	PopActiveSnapshot();
	add_point(cal, "read", CAL_READ_FLOATS, 1, reading / (reads * CAL_READ_ROWS));
	if (SPI_execute(psprintf("DROP TABLE %s", table), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop the calibration's buffers");
	SPI_finish();
}

/* ---- a pgdl.fit_multiple run's work besides training ---- */

#define CAL_MODEL_UNITS	256		/* a dense 784-256-10 network: about 200,000 parameters */
#define CAL_MODEL_BATCH	64

/*
 * In a pgdl.fit_multiple run, at each visit of a partition a worker takes the model from its blob, makes
 * its workspace in its first step and writes it back ("visit": deserialize,
 * a first step less a second one, serialize), and at the end of each
 * epoch stores it as a checkpoint (a serialize, and "checkpoint": the row
 * written into a logged table and its WAL flushed, as its commit does).  Per
 * parameter, on one dense network with momentum, predicted in proportion to a
 * model's parameters (its rows: to its blob's size).
 */
static void
probe_model_costs(Cal *cal)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl calibration models",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	Oid			types[1] = {BYTEAOID};
	char	   *table = psprintf("pgdl.calibrate_checkpoint_%d", MyProcPid);
	char	   *insert;
	NnSpec		spec;
	NnOptim		opt;
	NnCost		cost;
	NnError		err;
	bytea	   *blob = NULL;
	float	   *x,
			   *y;
	double		start,
				elapsed,
				visit = 0,
				write = 0;
	int			n = 0;

	spec_start(&spec, 784, 0, 0, NN_LOSS_CROSS_ENTROPY);
	spec_add(&spec, NN_DENSE)->units = CAL_MODEL_UNITS;
	spec_add(&spec, NN_RELU);
	spec_add(&spec, NN_DENSE)->units = 10;
	nn_optim_defaults(&opt, NN_OPT_SGD);
	opt.momentum = 0.9f;
	if (!nn_spec_validate(&spec, NULL, &err) || !nn_spec_cost(&spec, NULL, &cost, &err))
		pgdl_report_nn_error("calibration probe", &err);

	{
		NnModel    *m = nn_model_create(&spec, 42, &err);

		if (m == NULL || !nn_model_set_optim(m, &opt, &err))
			pgdl_report_nn_error("calibration probe", &err);
		blob = pgdl_model_serialize(m);
		nn_model_free(m);
	}

	SPI_connect();
	/*
	 * as pgdl.checkpoints and pgdl.models: a logged table, the blob stored out
	 * of line uncompressed, behind their trigger (which copies the row)
	 */
	if (SPI_execute(psprintf("CREATE TABLE %s (run bigint, owner regrole, model bytea)", table), false, 0) != SPI_OK_UTILITY ||
		SPI_execute(psprintf("ALTER TABLE %s ALTER COLUMN model SET STORAGE EXTERNAL", table), false, 0) != SPI_OK_UTILITY ||
		SPI_execute(psprintf("CREATE TRIGGER owner BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION pgdl.owned_by_run()",
							 table), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not make the calibration's checkpoint table");
	insert = psprintf("INSERT INTO %s (model) VALUES ($1)", table);
	x = palloc(sizeof(float) * 784 * CAL_MODEL_BATCH);
	y = palloc(sizeof(float) * CAL_MODEL_BATCH);
	fill_uniform(x, 784 * CAL_MODEL_BATCH, 1);
	for (int i = 0; i < CAL_MODEL_BATCH; i++)
		y[i] = (float) (i % 10);
	n = 0;
	start = now_seconds();
	do
	{
		double		t0 = (fresh_memory(), now_seconds());
		NnModel    *m = pgdl_model_deserialize(blob);
		NnBatchStats stats = {0};
		bytea	   *again;
		Datum		values[1];
		double		t1,
					t2;

		CHECK_FOR_INTERRUPTS();
		/* a visit's first step makes the workspace: what it costs beyond a step is the visit's */
		if (!nn_model_reserve(m, CAL_MODEL_BATCH, &err) ||
			!nn_model_train_step(m, x, y, CAL_MODEL_BATCH, &stats, &err))
			pgdl_report_nn_error("calibration probe", &err);
		t1 = now_seconds();
		if (!nn_model_train_step(m, x, y, CAL_MODEL_BATCH, &stats, &err))
			pgdl_report_nn_error("calibration probe", &err);
		t2 = now_seconds();
		again = pgdl_model_serialize(m);
		nn_model_free(m);
		visit += (t1 - t0) - (t2 - t1) + (now_seconds() - t2);
		t1 = now_seconds();
		values[0] = PointerGetDatum(again);
		if (SPI_execute_with_args(insert, 1, types, values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not write the calibration's checkpoint");
		/* flushed, as the commit of a worker's checkpoint (or of the call that stores the models) flushes it */
		XLogFlush(XactLastRecEnd);
		write += now_seconds() - t1;
		pfree(again);
		n++;
		elapsed = now_seconds() - start;
	} while (n < 2 || elapsed < cal->budget * 3);
	add_point(cal, "visit", (double) cost.params, 1, visit / n);
	add_point(cal, "checkpoint", (double) cost.params, 1, write / n);
	if (SPI_execute(psprintf("DROP TABLE %s", table), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop the calibration's checkpoint table");
	SPI_finish();
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/* ---- concurrency ---- */

/* The three probes run alone and with N workers: a dense layer, a convolution, relus. */
static void
run_conc_probes(double budget, double *seconds)
{
	static const int32 act[3] = {16, 28, 28};
	NnSpec		spec;
	NnLayerSpec *l;

	spec_start(&spec, 256, 0, 0, NN_LOSS_MSE);
	spec_add(&spec, NN_RELU);
	spec_add(&spec, NN_DENSE)->units = 256;
	seconds[0] = time_steps(&spec, 64, NULL, false, budget);
	spec_start(&spec, 16, 14, 14, NN_LOSS_MSE);
	spec_add(&spec, NN_RELU);
	l = spec_add(&spec, NN_CONV2D);
	l->filters = 32;
	l->kernel = 3;
	l->padding = 1;
	seconds[1] = time_steps(&spec, 64, NULL, false, budget);
	seconds[2] = time_act(act, 64, NN_RELU, CAL_STACK, budget);
}

PGDLLEXPORT void pgdl_calibrate_worker_main(Datum main_arg);

/* A concurrent worker: no database, only the engine; results into the segment. */
void
pgdl_calibrate_worker_main(Datum main_arg)
{
	dsm_segment *seg;
	CalShared  *shared;
	int32		me;
	double		waited = 0;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	memcpy(&me, MyBgworkerEntry->bgw_extra, sizeof(int32));
	CurrentResourceOwner = ResourceOwnerCreate(NULL, "pgdl calibration worker");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		proc_exit(0);
	shared = dsm_segment_address(seg);
	if (shared->magic != CAL_MAGIC || me < 0 || me >= shared->n_workers)
		proc_exit(0);
	pgstat_report_appname("pgdl calibration");
	/* connected to the database in a first transaction, as a pgdl.fit_multiple worker starts */
	pgdl_caller_connect(&shared->caller);
	StartTransactionCommand();
	pgdl_engine_prepare();
	CommitTransactionCommand();
	pg_memory_barrier();
	shared->ready[me] = true;
	/* all start together; a leader that never says go is gone */
	while (!shared->go && waited < 60)
	{
		CHECK_FOR_INTERRUPTS();
		pg_usleep(1000);
		waited += 0.001;
	}
	if (!shared->go)
		proc_exit(0);
	pg_memory_barrier();
	run_conc_probes(shared->budget, shared->seconds[me]);
	pg_memory_barrier();
	shared->done[me] = true;
	proc_exit(0);
}

/*
 * Start n workers on the three probes at once and wait for them.  Returns the
 * number that ran (0 when none could start); mean[] their mean seconds.
 */
static int
run_concurrent(int n, double budget, double *mean, double *start_seconds)
{
	dsm_segment *seg = dsm_create(sizeof(CalShared), 0);
	CalShared  *shared = dsm_segment_address(seg);
	BackgroundWorkerHandle **handles = palloc0(sizeof(BackgroundWorkerHandle *) * n);
	int			started = 0;
	bool		failed = false;
	double		t0 = now_seconds();

	memset(shared, 0, sizeof(CalShared));
	shared->magic = CAL_MAGIC;
	pgdl_caller_capture(&shared->caller);
	shared->budget = budget;
	for (int w = 0; w < n; w++)
	{
		if (!pgdl_register_worker(seg, "pgdl_calibrate_worker_main", "pgdl calibration",
								  "pgdl calibration worker", &w, sizeof(int32), &handles[w]))
			break;
		started++;
	}
	shared->n_workers = started;
	PG_TRY();
	{
		pid_t		pid;

		for (int w = 0; w < started; w++)
			if (WaitForBackgroundWorkerStartup(handles[w], &pid) != BGWH_STARTED)
				failed = true;
		/* started and connected: what a pgdl.fit_multiple worker takes before it trains */
		for (int w = 0; !failed && w < started; w++)
			while (!shared->ready[w])
			{
				CHECK_FOR_INTERRUPTS();
				if (GetBackgroundWorkerPid(handles[w], &pid) == BGWH_STOPPED && !shared->ready[w])
				{
					failed = true;
					break;
				}
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1, PG_WAIT_EXTENSION);
				ResetLatch(MyLatch);
			}
		*start_seconds = now_seconds() - t0;
		pg_memory_barrier();
		shared->go = !failed && started >= 2;
		for (int w = 0; shared->go && w < started; w++)
		{
			while (!shared->done[w])
			{
				CHECK_FOR_INTERRUPTS();
				if (GetBackgroundWorkerPid(handles[w], &pid) == BGWH_STOPPED && !shared->done[w])
				{
					failed = true;
					break;
				}
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10, PG_WAIT_EXTENSION);
				ResetLatch(MyLatch);
			}
		}
	}
	PG_FINALLY();
	{
		for (int w = 0; w < started; w++)
			TerminateBackgroundWorker(handles[w]);
	}
	PG_END_TRY();
	if (failed || started < 2)
	{
		dsm_detach(seg);
		return started < 2 ? 0 : -1;
	}
	pg_memory_barrier();
	for (int p = 0; p < CAL_CONC_PROBES; p++)
	{
		mean[p] = 0;
		for (int w = 0; w < started; w++)
			mean[p] += shared->seconds[w][p] / started;
	}
	dsm_detach(seg);
	return started;
}

/* ---- the profile ---- */

static Jsonb *
profile_jsonb(const Cal *cal, int workers, double compute_ratio, double memory_ratio)
{
	JsonbParseState *state = NULL;
	JsonbValue *res;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_int(&state, "version", PGDL_PROFILE_VERSION);
	pgdl_jsonb_put_string(&state, "blas", "one thread");
	pgdl_jsonb_put_key(&state, "points");
	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < cal->n; i++)
	{
		pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
		pgdl_jsonb_put_string(&state, "kind", cal->points[i].kind);
		pgdl_jsonb_put_float8(&state, "size", cal->points[i].size);
		pgdl_jsonb_put_int(&state, "batch", cal->points[i].batch);
		if (cal->points[i].kernel > 0)
			pgdl_jsonb_put_int(&state, "kernel", cal->points[i].kernel);
		pgdl_jsonb_put_float8(&state, "seconds", cal->points[i].seconds);
		pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	}
	pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	pgdl_jsonb_put_key(&state, "concurrency");
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_int(&state, "workers", workers);
	pgdl_jsonb_put_float8(&state, "compute", compute_ratio);
	pgdl_jsonb_put_float8(&state, "memory", memory_ratio);
	pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	res = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

static int64
store_profile(int cores, int workers, double seconds, Jsonb *measurements)
{
	Oid			types[6] = {INT8OID, TEXTOID, INT4OID, INT4OID, FLOAT8OID, JSONBOID};
	Datum		values[6];
	char		host[256];
	int64		id;
	bool		isnull;

	if (gethostname(host, sizeof(host)) != 0)
		strlcpy(host, "unknown", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	values[0] = Int64GetDatum((int64) GetSystemIdentifier());
	values[1] = CStringGetTextDatum(host);
	values[2] = Int32GetDatum(cores);
	values[3] = Int32GetDatum(workers);
	values[4] = Float8GetDatum(seconds);
	values[5] = JsonbPGetDatum(measurements);
	SPI_connect();
	if (SPI_execute_with_args("INSERT INTO pgdl.server_profiles (system_identifier, hostname, cores, workers, "
							  "seconds, measurements) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
							  6, types, values, NULL, false, 1) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not insert into pgdl.server_profiles");
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return id;
}

/*
 * calibrate(seconds, workers): measure this server for about `seconds` and
 * store a new profile; returns its id.  workers NULL: min(cores, pgdl.max_workers).
 */
PG_FUNCTION_INFO_V1(pgdl_calibrate);
Datum
pgdl_calibrate(PG_FUNCTION_ARGS)
{
	double		seconds;
	long		cores = sysconf(_SC_NPROCESSORS_ONLN);
	int			workers;
	Cal		   *cal = palloc0(sizeof(Cal));
	double		start = now_seconds();
	double		solo[CAL_CONC_PROBES],
				together[CAL_CONC_PROBES];
	double		compute_ratio = 1,
				memory_ratio = 1;
	int			ran;
	int			n_probes;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("seconds must not be NULL")));
	seconds = PG_GETARG_FLOAT8(0);
	if (!(seconds >= CAL_MIN_SECONDS && seconds <= CAL_MAX_SECONDS))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seconds must be between %g and %g, got %g", CAL_MIN_SECONDS, CAL_MAX_SECONDS, seconds)));
	cores = cores < 1 ? 1 : Min(cores, PGDL_MAX_WORKERS);
	workers = PG_ARGISNULL(1) ? Min((int) cores, pgdl_max_workers) : PG_GETARG_INT32(1);
	if (workers < 1 || workers > PGDL_MAX_WORKERS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workers must be between 1 and %d, got %d", PGDL_MAX_WORKERS, workers)));
	pgdl_engine_prepare();

	/*
	 * probes: 12 per spatial activation and batch (7 per flat one), the
	 * compute ones per batch, 3 updates, 3 steps, reading, a model's making and
	 * checkpoint; 1/4 for concurrency
	 */
	n_probes = 0;
	for (int a = 0; a < lengthof(cal_acts); a++)
		n_probes += CAL_N_BATCHES * (cal_acts[a][1] > 0 ? 12 : 7);
	n_probes += CAL_N_BATCHES * (lengthof(cal_dense) + lengthof(cal_conv) + lengthof(cal_conv_first)) + 15;
	cal->budget = seconds * (workers > 1 ? 0.75 : 1.0) / n_probes;
	probe_step(cal);
	probe_read(cal);
	probe_fault(cal);
	probe_model_costs(cal);
	probe_updates(cal);
	probe_memory_bound(cal);
	probe_compute(cal);

	if (workers > 1)
	{
		double		window = seconds * 0.25 / (2 * CAL_CONC_PROBES);
		double		start_seconds = 0;

		run_conc_probes(window, solo);
		ran = run_concurrent(workers, window, together, &start_seconds);
		/* what starting that many background workers took */
		if (ran > 0)
			add_point(cal, "worker_start", ran, 1, start_seconds);
		if (ran <= 0)
			ereport(NOTICE,
					(errmsg("the profile has no concurrent measurement: %s",
							ran == 0 ? "no background worker could start" : "a calibration worker failed"),
					 errhint("Raise max_worker_processes, or calibrate again when workers are free.")));
		else
		{
			workers = ran;
			compute_ratio = (together[0] / solo[0] + together[1] / solo[1]) / 2;
			memory_ratio = together[2] / solo[2];
		}
		if (ran <= 0)
			workers = 1;
	}
	PG_RETURN_INT64(store_profile((int) cores, workers, now_seconds() - start,
								  profile_jsonb(cal, workers, compute_ratio, memory_ratio)));
}
