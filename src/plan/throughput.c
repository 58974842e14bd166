/*
 * throughput.c -- how fast a network trains here: a step's time is the sum
 * of its layers' times, each interpolated from this server's profile
 * (pgdl.calibrate) over the measured shape classes and batch sizes, plus the
 * optimizer update and a step's fixed cost.  Between points a kind's cost per
 * unit (per FLOP for dense and conv2d, per input float for the rest, per
 * parameter for updates) is interpolated linearly in log-log; beyond them it
 * stays at the nearest.  Several workers at once slow each one down by the
 * ratios the profile measured (shared memory bandwidth), interpolated in the
 * number of workers.  Without a profile: pgdl.cpu_gflops, as before.
 */
#include "postgres.h"

#include <math.h>
#include <unistd.h>

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/float.h"

#include "base/base.h"
#include "plan/plan.h"

static const char *const kind_names[] = {
	"dense", "conv2d", "relu", "sigmoid", "tanh", "dropout", "batchnorm", "maxpool2d", "avgpool2d",
	"global_avgpool", "update_sgd", "update_momentum", "update_adam", "step", "read", "worker_start", "conv2d_first",
	"leaky_relu", "batchnorm1d", "visit", "checkpoint", "fault", "loss", NULL
};

static int
kind_index(const char *kind)
{
	for (int k = 0; kind_names[k]; k++)
		if (strcmp(kind_names[k], kind) == 0)
			return k;
	return -1;
}

void
pgdl_profile_add_point(PgdlProfile *prof, const char *kind, double size, int32_t batch, int32_t kernel,
					   double seconds)
{
	int			k = kind_index(kind);
	PgdlProfilePoint *p;

	if (k < 0 || prof->n >= PGDL_PROFILE_MAX_POINTS)
		return;					/* a kind of a later version, or too many: not used */
	p = &prof->points[prof->n++];
	p->kind = k;
	p->size = size;
	p->batch = batch;
	p->kernel = kernel;
	p->unit = seconds / (size * batch);
}

static double kind_seconds(const PgdlProfile *prof, int k, double size, int32_t batch, int32_t kernel);

/* Whether point p is of kind k and kernel (0: any). */
static bool
point_of(const PgdlProfilePoint *p, int k, int32_t kernel)
{
	return p->kind == k && (kernel == 0 || p->kernel == kernel);
}

/* log(unit) at log(size) over the points of kind k at one batch, piecewise linear, flat beyond the ends */
static double
interpolate_size(const PgdlProfile *prof, int k, int32_t kernel, int32_t batch, double lsize)
{
	double		lo_x = -INFINITY,
				lo_y = 0,
				hi_x = INFINITY,
				hi_y = 0;
	double		min_x = INFINITY,
				min_y = 0,
				max_x = -INFINITY,
				max_y = 0;

	for (int i = 0; i < prof->n; i++)
	{
		const PgdlProfilePoint *p = &prof->points[i];
		double		x = log(p->size),
					y = log(p->unit);

		if (!point_of(p, k, kernel) || p->batch != batch)
			continue;
		if (x < min_x)
			min_x = x, min_y = y;
		if (x > max_x)
			max_x = x, max_y = y;
		if (x <= lsize && x > lo_x)
			lo_x = x, lo_y = y;
		if (x >= lsize && x < hi_x)
			hi_x = x, hi_y = y;
	}
	if (lsize <= min_x)
		return min_y;
	if (lsize >= max_x)
		return max_y;
	if (hi_x - lo_x < 1e-12)
		return lo_y;
	return lo_y + (hi_y - lo_y) * (lsize - lo_x) / (hi_x - lo_x);
}

/* A kind's seconds at one size, measured by this server's profile; 0 without one, or before the kind was measured. */
static double
measured_seconds(const PgdlProfile *prof, const char *kind, double size)
{
	double		s = prof->id ? pgdl_profile_kind_seconds(prof, kind, size, 1) : -1;

	return s > 0 ? s : 0;
}

double
pgdl_profile_fault_seconds(const PgdlProfile *prof, double bytes)
{
	return measured_seconds(prof, "fault", bytes);
}

double
pgdl_profile_read_seconds(const PgdlProfile *prof, double floats)
{
	return measured_seconds(prof, "read", floats);
}

double
pgdl_profile_worker_read_seconds(const PgdlProfile *prof, double floats)
{
	/* the probe's process had the table's shared buffers mapped; a worker faults on each page */
	return pgdl_profile_read_seconds(prof, floats) + pgdl_profile_fault_seconds(prof, floats * sizeof(float));
}

double
pgdl_profile_worker_start_seconds(const PgdlProfile *prof, int workers)
{
	return measured_seconds(prof, "worker_start", workers);
}

double
pgdl_profile_visit_seconds(const PgdlProfile *prof, double params)
{
	return measured_seconds(prof, "visit", params);
}

double
pgdl_profile_checkpoint_seconds(const PgdlProfile *prof, double params)
{
	double		s = measured_seconds(prof, "checkpoint", params);

	/*
	 * The row's bytes (two floats a parameter, as the probe's weights and
	 * momentum) pass through the WAL buffers and the shared buffers of its
	 * table, whose pages the probe's process had mapped by its later rounds
	 * and a worker or a call's backend has not.
	 */
	return s > 0 ? s + pgdl_profile_fault_seconds(prof, 2 * params * 2 * sizeof(float)) : 0;
}

double
pgdl_profile_model_seconds(const PgdlProfile *prof, double params, int epochs, int partitions, int workers)
{
	double		visit = pgdl_profile_visit_seconds(prof, params);

	/* a checkpoint serializes the model: half a visit */
	return ((double) epochs * partitions * visit +
			epochs * (pgdl_profile_checkpoint_seconds(prof, params) + visit / 2)) / Max(workers, 1);
}

/* The points' kernel nearest to `kernel` (the smaller of two as near); 0 when they have none. */
static int32_t
nearest_kernel(const PgdlProfile *prof, int k, int32_t kernel)
{
	int32_t		best = 0;

	for (int i = 0; i < prof->n; i++)
	{
		int32_t		pk = prof->points[i].kernel;

		if (prof->points[i].kind == k && pk > 0 &&
			(best == 0 || abs(pk - kernel) < abs(best - kernel) ||
			 (abs(pk - kernel) == abs(best - kernel) && pk < best)))
			best = pk;
	}
	return best;
}

double
pgdl_profile_conv_seconds(const PgdlProfile *prof, const char *kind, double size, int32_t batch, int32_t kernel)
{
	return kind_seconds(prof, kind_index(kind), size, batch, nearest_kernel(prof, kind_index(kind), kernel));
}

double
pgdl_profile_kind_seconds(const PgdlProfile *prof, const char *kind, double size, int32_t batch)
{
	return kind_seconds(prof, kind_index(kind), size, batch, 0);
}

/* Kind k's seconds at a size and batch over its points of that kernel (0: all); -1 when none. */
static double
kind_seconds(const PgdlProfile *prof, int k, double size, int32_t batch, int32_t kernel)
{
	double		lbatch = log((double) batch),
				lsize = log(Max(size, 1.0));
	int32_t		lo_b = 0,
				hi_b = 0,
				min_b = 0,
				max_b = 0;
	double		y;

	/* the measured batch sizes around batch */
	for (int i = 0; i < prof->n; i++)
	{
		int32_t		b = prof->points[i].batch;

		if (!point_of(&prof->points[i], k, kernel))
			continue;
		if (min_b == 0 || b < min_b)
			min_b = b;
		if (b > max_b)
			max_b = b;
		if (b <= batch && b > lo_b)
			lo_b = b;
		if (b >= batch && (hi_b == 0 || b < hi_b))
			hi_b = b;
	}
	if (min_b == 0 || size <= 0)
		return size <= 0 ? 0 : -1;
	if (lo_b == 0)
		lo_b = hi_b = min_b;
	if (hi_b == 0)
		lo_b = hi_b = max_b;
	y = interpolate_size(prof, k, kernel, lo_b, lsize);
	if (hi_b != lo_b)
	{
		double		t = (lbatch - log((double) lo_b)) / (log((double) hi_b) - log((double) lo_b));

		y += t * (interpolate_size(prof, k, kernel, hi_b, lsize) - y);
	}
	return exp(y) * size * batch;
}

/*
 * The kind a layer is measured as; NULL: it costs nothing (flatten).  A
 * batchnorm over features (flat input: statistics per feature across the
 * batch, strided) is "batchnorm1d", over channels "batchnorm".
 */
static const char *
layer_kind(NnLayerType type, const NnShape *in)
{
	switch (type)
	{
		case NN_DENSE:
			return "dense";
		case NN_CONV2D:
			return "conv2d";
		case NN_SIGMOID:
			return "sigmoid";
		case NN_TANH:
			return "tanh";
		case NN_LEAKY_RELU:
			return "leaky_relu";
		case NN_DROPOUT:
			return "dropout";
		case NN_BATCHNORM:
			return in->ndim == 1 ? "batchnorm1d" : "batchnorm";
		case NN_MAXPOOL2D:
			return "maxpool2d";
		case NN_AVGPOOL2D:
			return "avgpool2d";
		case NN_GLOBAL_AVGPOOL:
			return "global_avgpool";
		case NN_FLATTEN:
		case NN_SLICE:
			return NULL;
		case NN_EMBEDDING:
			return "embedding";	/* not measured: costed from its flops */
		case NN_SOFTMAX:
			return "softmax";
		case NN_GRU:
			return "gru";
		case NN_ATTENTION:
			return "attention";	/* not measured: costed from its flops */
		case NN_CONV1D:
			return "conv1d";
		default:
			return "relu";
	}
}

/*
 * What a kind that an older profile (before leaky_relu and batchnorm1d were
 * measured apart) lacks is predicted as; NULL: none (pgdl.cpu_gflops).
 */
static const char *
fallback_kind(const char *kind)
{
	if (strcmp(kind, "leaky_relu") == 0)
		return "relu";
	if (strcmp(kind, "batchnorm1d") == 0)
		return "batchnorm";
	return NULL;
}

/* The calibrated update nearest in memory traffic: rmsprop keeps one to three floats a parameter, adagrad one. */
static const char *
update_kind(const NnOptim *opt)
{
	if (opt->type == NN_OPT_ADAM || opt->type == NN_OPT_ADAMW || opt->type == NN_OPT_RMSPROP)
		return "update_adam";
	return opt->momentum > 0 || opt->type == NN_OPT_ADAGRAD ? "update_momentum" : "update_sgd";
}

void
pgdl_predict_step(const PgdlProfile *prof, const NnSpec *spec, const NnOptim *opt, int32_t batch,
				  PgdlStepPrediction *out)
{
	NnShape		shape[NN_MAX_LAYERS + 1];
	NnCost		per[NN_MAX_LAYERS];
	NnCost		total;
	double		rate = pgdl_cpu_gflops * 1e9;
	double		s;

	out->compute = out->memory = out->read = 0;
	if (!nn_spec_validate(spec, shape, NULL) || !nn_spec_cost(spec, per, &total, NULL))
		elog(ERROR, "pgdl_predict_step: invalid spec");
	if (prof->id == 0)
	{
		out->compute = (double) total.flops_train * batch / rate;
		return;
	}
	for (int i = 0; i < spec->n_layers; i++)
	{
		const NnShape *in = &NN_IN_SHAPE(shape, spec, i);
		const char *kind = layer_kind(spec->layers[i].type, in);
		double		size;
		bool		compute = spec->layers[i].type == NN_DENSE || spec->layers[i].type == NN_CONV2D;

		if (kind == NULL)
			continue;
		/* a first convolution computes no input gradient: measured apart, when the profile has it */
		if (nn_layer_src(spec, i, 0) < 0 && spec->layers[i].type == NN_CONV2D &&
			pgdl_profile_kind_seconds(prof, "conv2d_first", 1, 1) >= 0)
			kind = "conv2d_first";
		/* add and concat: a pass over each input, as an elementwise layer's over its one */
		size = compute ? (double) per[i].flops_train :
			(double) NN_SHAPE_SIZE(*in) * nn_layer_n_inputs(spec, i);
		s = spec->layers[i].type == NN_CONV2D ?
			pgdl_profile_conv_seconds(prof, kind, size, batch, spec->layers[i].kernel) :
			pgdl_profile_kind_seconds(prof, kind, size, batch);
		if (s < 0 && fallback_kind(kind))
			s = pgdl_profile_kind_seconds(prof, fallback_kind(kind), size, batch);
		/*
		 * a relu behind a convolution is fused into it (layers.c): forward is
		 * free, and backward too when a maxpool2d follows
		 */
		if (s > 0 && spec->layers[i].type == NN_RELU && nn_layer_src(spec, i, 0) == i - 1 && i > 0 &&
			spec->layers[i - 1].type == NN_CONV2D)
			s *= i + 1 < spec->n_layers && spec->layers[i + 1].type == NN_MAXPOOL2D ? 0 : 0.5;
		if (s < 0)				/* the profile has no point of the kind */
			s = (double) per[i].flops_train * batch / rate;
		if (compute)
			out->compute += s;
		else
			out->memory += s;
	}
	if ((s = pgdl_profile_kind_seconds(prof, update_kind(opt), (double) total.params, 1)) > 0)
		out->memory += s;
	if ((s = pgdl_profile_kind_seconds(prof, "step", 1, batch)) > 0)
		out->memory += s;
	/* the batch's examples read from the packed table: x and y */
	s = (double) NN_SHAPE_SIZE(shape[0]) +
		(spec->loss == NN_LOSS_CROSS_ENTROPY ? 1 : (double) NN_SHAPE_SIZE(shape[spec->n_layers]));
	if ((s = pgdl_profile_kind_seconds(prof, "read", s, 1)) > 0)
		out->read = s * batch;
}

/* A worker's slowdown with w at once: 1 alone, the measured ratio at the profile's workers, linear between. */
static double
slowdown(double ratio, int measured, int w)
{
	if (measured < 2 || w <= 1)
		return 1;
	return 1 + (ratio - 1) * (w - 1) / (measured - 1);
}

double
pgdl_predict_step_seconds(const PgdlProfile *prof, const PgdlStepPrediction *p, int workers, bool reading)
{
	if (prof->id == 0)
		return p->compute + p->memory;
	return p->compute * slowdown(prof->compute_ratio, prof->workers, workers) +
		(p->memory + (reading ? p->read : 0)) * slowdown(prof->memory_ratio, prof->workers, workers);
}

double
pgdl_predict_images_per_second(const PgdlProfile *prof, const NnSpec *spec, const NnOptim *opt,
							   int32_t batch, int workers, bool reading)
{
	PgdlStepPrediction p;
	double		s;

	pgdl_predict_step(prof, spec, opt, batch, &p);
	s = pgdl_predict_step_seconds(prof, &p, workers, reading);
	return s > 0 ? batch / s : get_float8_infinity();
}

/* ---- the catalog ---- */

static void
bad_profile(int64 id, const char *detail) pg_attribute_noreturn();

static void
bad_profile(int64 id, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("server profile " INT64_FORMAT " is invalid", id),
			 errdetail("%s", detail),
			 errhint("Calibrate again with pgdl.calibrate(), or delete the row from pgdl.server_profiles.")));
}

static double
checked_ratio(int64 id, bool isnull, Datum d)
{
	double		r = isnull ? 1 : DatumGetFloat8(d);

	if (!(r > 0 && r <= 1000))
		bad_profile(id, "Its concurrency ratios must be positive numbers up to 1000.");
	return r;
}

void
pgdl_profile_load(PgdlProfile *prof)
{
	Oid			types[2] = {INT8OID, TEXTOID};
	Datum		values[2];
	char		host[256];
	bool		isnull;
	int64		id;

	memset(prof, 0, offsetof(PgdlProfile, points));
	if (gethostname(host, sizeof(host)) != 0)
		strlcpy(host, "unknown", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	values[0] = Int64GetDatum((int64) GetSystemIdentifier());
	values[1] = CStringGetTextDatum(host);
	SPI_connect();
	if (SPI_execute_with_args("SELECT id, measurements->>'version', "
							  "(measurements->'concurrency'->>'workers')::integer, "
							  "(measurements->'concurrency'->>'compute')::float8, "
							  "(measurements->'concurrency'->>'memory')::float8, jsonb_typeof(measurements->'points') "
							  "FROM pgdl.server_profiles WHERE system_identifier = $1 AND hostname = $2 "
							  "ORDER BY created DESC, id DESC LIMIT 1",
							  2, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read pgdl.server_profiles");
	if (SPI_processed == 0)
	{
		SPI_finish();
		return;
	}
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *version;
		Datum		w;

		id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		version = SPI_getvalue(tup, desc, 2);
		if (version == NULL || strcmp(version, CppAsString2(PGDL_PROFILE_VERSION)) != 0)
			bad_profile(id, "Its measurements are not of version " CppAsString2(PGDL_PROFILE_VERSION) ".");
		if (SPI_getvalue(tup, desc, 6) == NULL || strcmp(SPI_getvalue(tup, desc, 6), "array") != 0)
			bad_profile(id, "Its \"points\" must be an array.");
		w = SPI_getbinval(tup, desc, 3, &isnull);
		prof->workers = isnull ? 1 : DatumGetInt32(w);
		if (prof->workers < 1 || prof->workers > PGDL_MAX_WORKERS)
			bad_profile(id, psprintf("Its concurrency workers must be between 1 and %d.", PGDL_MAX_WORKERS));
		w = SPI_getbinval(tup, desc, 4, &isnull);
		prof->compute_ratio = checked_ratio(id, isnull, w);
		w = SPI_getbinval(tup, desc, 5, &isnull);
		prof->memory_ratio = checked_ratio(id, isnull, w);
	}
	values[0] = Int64GetDatum(id);
	if (SPI_execute_with_args("SELECT r.kind, r.size, r.batch, r.seconds, r.kernel FROM pgdl.server_profiles p, "
							  "jsonb_to_recordset(p.measurements->'points') AS r(kind text, size float8, batch integer, seconds float8, kernel integer) "
							  "WHERE p.id = $1",
							  1, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read pgdl.server_profiles");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		n1,
					n2,
					n3,
					n4,
					n5;
		Datum		kind = SPI_getbinval(tup, desc, 1, &n1);
		double		size = DatumGetFloat8(SPI_getbinval(tup, desc, 2, &n2));
		Datum		batch = SPI_getbinval(tup, desc, 3, &n3);
		double		seconds = DatumGetFloat8(SPI_getbinval(tup, desc, 4, &n4));
		Datum		kernel = SPI_getbinval(tup, desc, 5, &n5);

		if (n1 || n2 || n3 || n4 || !(size >= 1 && size < 1e18) || DatumGetInt32(batch) < 1 ||
			DatumGetInt32(batch) > NN_MAX_BATCH || !(seconds > 0 && seconds < 1e6))
			bad_profile(id, psprintf("Point " UINT64_FORMAT " needs a kind, a size of at least 1, a batch between 1 and %d and positive seconds.",
									 r + 1, NN_MAX_BATCH));
		if (!n5 && (DatumGetInt32(kernel) < 1 || DatumGetInt32(kernel) > NN_MAX_KERNEL))
			bad_profile(id, psprintf("Point " UINT64_FORMAT "'s kernel must be between 1 and %d.", r + 1, NN_MAX_KERNEL));
		pgdl_profile_add_point(prof, TextDatumGetCString(kind), size, DatumGetInt32(batch),
							   n5 ? 0 : DatumGetInt32(kernel), seconds);
	}
	SPI_finish();
	prof->id = id;
}
