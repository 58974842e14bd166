/*
 * importance.c -- pgdl.feature_importance: permutation importance (Breiman,
 * 2001; scikit-learn's permutation_importance) of a model over a packed table
 * or raw rows.  A feature's importance is how much a metric worsens when that
 * feature's column is shuffled across the rows, which breaks its link to the
 * label and leaves its distribution as it was: the mean over `repeats`
 * shuffles, and their standard deviation (population, as scikit-learn's).
 * Worse is lower for a score (accuracy, F1, R²) and higher for a loss or an
 * error (loss, log_loss, mse): importance = score - permuted score, or
 * permuted loss - loss, so that a larger number always means a more important
 * feature, and a feature the model ignores has 0.
 *
 * Every row is read once (data/pack_stream.c for raw rows, as pgdl.metrics
 * reads them) and held, preprocessed, within maintenance_work_mem; the
 * metrics are train/'s (pgdl_metric_of_rows).  The shuffles are fixed by the
 * seed: column j's in repeat r is nn_rng_permutation(seed, r << 32 | j) of
 * the rows in the order they were read, row i taking row perm[i]'s value.
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"
#include "predict/predict.h"

#define IMPORTANCE_BATCH	256
#define IMPORTANCE_STREAM(r, j)	(((uint64) (r) << 32) | (uint32) (j))

/* The rows of an evaluation, held: x, y and (a weighted packed table's) w, as its buffers hold them. */
typedef struct HeldRows
{
	float	   *x;
	float	   *y;
	float	   *w;				/* NULL: unweighted */
	int64		n;
	int64		cap;
	int32		nf;
	int32		ny;
	MemoryContext cxt;			/* where they live: a scan calls back in a context it resets */
} HeldRows;

/* Room for `more` rows within maintenance_work_mem, or an error naming the rows and the limit. */
static void
held_reserve(HeldRows *h, int32 more, bool weighted)
{
	Size		row_bytes = sizeof(float) * (h->nf + h->ny + 1);
	Size		limit = mul_size((Size) maintenance_work_mem, 1024);
	int64		need = h->n + more;
	int64		cap;

	if (need <= h->cap && (!weighted || h->w != NULL))
		return;
	if ((double) need * row_bytes > (double) limit || need > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many rows for feature importance: more than " INT64_FORMAT, h->n),
				 errdetail("Permutation importance holds every row's %d features (%zu bytes a row) and maintenance_work_mem allows %zu kB.",
						   h->nf, row_bytes, limit / 1024),
				 errhint("Raise maintenance_work_mem, or give a query over a sample of the rows.")));
	cap = Min(Max(need, h->cap * 2), (int64) (limit / row_bytes));
	h->x = h->x ? repalloc_huge(h->x, sizeof(float) * h->nf * cap) :
		MemoryContextAllocHuge(h->cxt, sizeof(float) * h->nf * cap);
	h->y = h->y ? repalloc_huge(h->y, sizeof(float) * h->ny * cap) :
		MemoryContextAllocHuge(h->cxt, sizeof(float) * h->ny * cap);
	if (h->w != NULL)
		h->w = repalloc_huge(h->w, sizeof(float) * cap);
	else if (weighted)
	{
		/* rows read before weighed 1 */
		h->w = MemoryContextAllocHuge(h->cxt, sizeof(float) * cap);
		for (int64 r = 0; r < h->n; r++)
			h->w[r] = 1.0f;
	}
	h->cap = cap;
}

static void
hold_buffer(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept)
{
	HeldRows   *h = arg;

	held_reserve(h, n, w != NULL);
	memcpy(h->x + h->n * h->nf, x, sizeof(float) * n * h->nf);
	memcpy(h->y + h->n * h->ny, y, sizeof(float) * n * h->ny);
	for (int32 r = 0; r < n && h->w != NULL; r++)
		h->w[h->n + r] = w ? w[r] : 1.0f;
	h->n += n;
	CHECK_FOR_INTERRUPTS();
}

/* The metric asked for, or the default: accuracy for a classifier, R² for regression, else the loss. */
static PgdlRankMetric
importance_metric(const NnModel *m, const PgdlDataset *ds, const char *name)
{
	PgdlRankMetric metric;

	if (name == NULL)
		return ds->classification ? PGDL_RANK_ACCURACY :
			nn_loss_is_regression(m->spec.loss) ? PGDL_RANK_R2 : PGDL_RANK_LOSS;
	metric = pgdl_rank_metric_arg("metric", name);
	pgdl_rank_metric_check_task(metric, ds->classification, "metric");
	return metric;
}

/* The metric's worsening with column j shuffled, in each of `repeats` seeded shuffles. */
static void
permuted_drops(NnModel *m, const PgdlDataset *ds, HeldRows *h, PgdlRankMetric metric, double base, int32 j,
			   int32 repeats, uint64 seed, double *drops)
{
	int32	   *perm = palloc(sizeof(int32) * h->n);
	float	   *column = palloc(sizeof(float) * h->n);
	bool		higher = pgdl_rank_metric_higher_better(metric);

	for (int64 i = 0; i < h->n; i++)
		column[i] = h->x[i * h->nf + j];
	for (int32 r = 0; r < repeats; r++)
	{
		double		score;

		nn_rng_permutation(seed, IMPORTANCE_STREAM(r, j), (int32) h->n, perm);
		for (int64 i = 0; i < h->n; i++)
			h->x[i * h->nf + j] = column[perm[i]];
		score = pgdl_metric_of_rows(m, ds, metric, h->x, h->y, h->w, h->n, IMPORTANCE_BATCH);
		drops[r] = higher ? base - score : score - base;
	}
	for (int64 i = 0; i < h->n; i++)
		h->x[i * h->nf + j] = column[i];
	pfree(perm);
	pfree(column);
}

/* Arguments after the model's data: metric (NULL: the default), repeats, seed. */
typedef struct ImportanceArgs
{
	char	   *metric;
	int32		repeats;
	int64		seed;
} ImportanceArgs;

/* false when an argument without a default is NULL: no rows, as a strict function */
static bool
importance_args(FunctionCallInfo fcinfo, bool raw, ImportanceArgs *a)
{
	int			first = raw ? 4 : 2;

	for (int i = 0; i < first; i++)
		if (PG_ARGISNULL(i))
			return false;
	if (PG_ARGISNULL(first + 1) || PG_ARGISNULL(first + 2))
		return false;
	a->metric = PG_ARGISNULL(first) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(first));
	a->repeats = PG_GETARG_INT32(first + 1);
	a->seed = PG_GETARG_INT64(first + 2);
	if (a->repeats < 1 || a->repeats > PGDL_MAX_IMPORTANCE_REPEATS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("repeats must be between 1 and %d, got %d", PGDL_MAX_IMPORTANCE_REPEATS, a->repeats),
				 errdetail("Each repeat shuffles every feature once and scores all the rows again.")));
	return true;
}

/* The rows of the result: a feature's number, name, mean worsening and its spread. */
static void
importance_rows(FunctionCallInfo fcinfo, NnModel *m, const PgdlDataset *ds, HeldRows *h, PgdlRankMetric metric,
				double base, const ImportanceArgs *a)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	  **names = pgdl_feature_names(ds, h->nf);
	double	   *drops = palloc(sizeof(double) * a->repeats);

	for (int32 j = 0; j < h->nf; j++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, names[j] == NULL, false, false};
		double		mean = 0.0,
					var = 0.0;

		permuted_drops(m, ds, h, metric, base, j, a->repeats, (uint64) a->seed, drops);
		for (int32 r = 0; r < a->repeats; r++)
			mean += drops[r] / a->repeats;
		for (int32 r = 0; r < a->repeats; r++)
			var += (drops[r] - mean) * (drops[r] - mean) / a->repeats;
		values[0] = Int32GetDatum(j + 1);
		values[1] = names[j] ? CStringGetTextDatum(names[j]) : (Datum) 0;
		values[2] = Float8GetDatum(mean);
		values[3] = Float8GetDatum(sqrt(var));
		nulls[2] = nulls[3] = isnan(mean);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

static Datum
feature_importance(FunctionCallInfo fcinfo, bool raw)
{
	ImportanceArgs a;
	PgdlEvaluationData data;
	PgdlModel  *model;
	const PgdlDataset *ds;
	HeldRows	h = {0};
	PgdlRankMetric metric;
	double		base;

	InitMaterializedSRF(fcinfo, 0);
	if (!importance_args(fcinfo, raw, &a))
		return (Datum) 0;
	pgdl_engine_prepare();
	model = pgdl_model_arg_copy(fcinfo, CurrentMemoryContext);
	pgdl_evaluation_data_args(fcinfo, raw, &data);
	pgdl_device_move(model->nn, pgdl_device_for(NULL), NULL, 0);
	ds = pgdl_evaluation_dataset(model, &data);
	metric = importance_metric(model->nn, ds, a.metric);
	h.nf = ds->n_features;
	h.ny = ds->n_targets;
	h.cxt = CurrentMemoryContext;
	pgdl_evaluation_scan(ds, &data, hold_buffer, &h);
	if (h.n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no rows to compute feature importance on"),
				 errdetail("The %s has no rows.", data.source ? "source" : "packed table")));
	pgdl_check_model_batch(model->nn, IMPORTANCE_BATCH, "the model");
	base = pgdl_metric_of_rows(model->nn, ds, metric, h.x, h.y, h.w, h.n, IMPORTANCE_BATCH);
	if (isnan(base))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("metric \"%s\" is not defined for these rows", pgdl_rank_metric_name(metric)),
				 errdetail("For example, ROC AUC needs rows of two classes and R² two rows or more."),
				 errhint("Choose another metric.")));
	importance_rows(fcinfo, model->nn, ds, &h, metric, base, &a);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgdl_feature_importance);
Datum
pgdl_feature_importance(PG_FUNCTION_ARGS)
{
	return feature_importance(fcinfo, false);
}

PG_FUNCTION_INFO_V1(pgdl_feature_importance_rows);
Datum
pgdl_feature_importance_rows(PG_FUNCTION_ARGS)
{
	return feature_importance(fcinfo, true);
}
