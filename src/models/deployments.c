/*
 * deployments.c -- a selection's winner deployed only when it beats the model
 * a name serves (pgdl.fit_multiple(..., deploy => name)), as PostgresML's
 * best_score deploys.
 *
 * Both models are scored now, on the selection's validation table, by the
 * metric that ranked the selection: a stored metric of the deployed model
 * would be of another validation set, or of none.  Deploying itself is
 * pgdl.deploy's (sql/parts/77_deployments.sql), with the caller's rights.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "spec/spec.h"
#include "train/train.h"
#include "models/models.h"

/* What selection ranks by (fit.c's rule, pgdl_epoch_rank_value) for one model on the validation table. */
static double
rank_value_on(PgdlModel *model, const PgdlDataset *vds, PgdlRankMetric r)
{
	PgdlEpochMetrics m = {0};
	NnBatchStats stats = {0};

	pgdl_evaluate_packed(model->nn, vds, &stats);
	if (stats.n == 0)
		return get_float8_nan();
	m.has_validation = true;
	m.validation_loss = stats.loss_sum / stats.n;
	m.validation_accuracy = (double) stats.correct / stats.n;
	if (pgdl_rank_metric_needs_scores(r))
	{
		pgdl_validation_scores(model->nn, vds, m.scores);
		m.has_scores = true;
	}
	return pgdl_epoch_rank_value(&m, r);
}

/* The model the candidate's owner's deployment `name` serves; 0 when it has none of that name. */
static int64
deployed_model_of(const char *name, int64 candidate)
{
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2] = {CStringGetTextDatum(name), Int64GetDatum(candidate)};
	int64		deployed = 0;
	bool		isnull;

	SPI_connect();
	if (SPI_execute_with_args("SELECT pgdl.deployed_model(d.id) FROM pgdl.deployment_names d "
							  "WHERE d.name = $1 AND d.owner = (SELECT m.owner FROM pgdl.models m WHERE m.id = $2)",
							  2, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read deployment \"%s\"", pgdl_echo(name));
	if (SPI_processed == 1)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		deployed = isnull ? 0 : DatumGetInt64(d);
	}
	SPI_finish();
	return deployed;
}

static void
deploy(const char *name, int64 model)
{
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2] = {CStringGetTextDatum(name), Int64GetDatum(model)};

	SPI_connect();
	if (SPI_execute_with_args("SELECT pgdl.deploy($1, $2)", 2, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not deploy model " INT64_FORMAT, model);
	SPI_finish();
}

/* Whether a beats b by r; NaN (a metric left undefined) beats nothing, and anything beats NaN. */
static bool
beats(double a, double b, PgdlRankMetric r)
{
	if (isnan(a))
		return false;
	if (isnan(b))
		return true;
	return pgdl_rank_metric_higher_better(r) ? a > b : a < b;
}

static void deploy_if_better(const char *name, int64 candidate, const PgdlDataset *vds, PgdlRankMetric r,
							 PgdlDeployOutcome *out);

void
pgdl_deploy_if_better(const char *name, int64 candidate, const PgdlDataset *vds, PgdlRankMetric r)
{
	PgdlDeployOutcome ignored;

	pgdl_deploy_if_better_outcome(name, candidate, vds, r, &ignored);
}

/* The run stored its models in this statement: a snapshot of its own sees them. */
void
pgdl_deploy_if_better_outcome(const char *name, int64 candidate, const PgdlDataset *vds, PgdlRankMetric r,
							  PgdlDeployOutcome *out)
{
	out->serves = false;
	out->previous = 0;
	out->score = get_float8_nan();
	out->previous_score = get_float8_nan();
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	deploy_if_better(name, candidate, vds, r, out);
	PopActiveSnapshot();
}

static void
deploy_if_better(const char *name, int64 candidate, const PgdlDataset *vds, PgdlRankMetric r,
				 PgdlDeployOutcome *out)
{
	const char *metric = pgdl_rank_metric_name(r);
	const char *vname = get_rel_name(vds->packed);
	int64		deployed = deployed_model_of(name, candidate);
	double		theirs;
	double		ours;
	char	   *difference;
	bool		lost;			/* the served model's packed training table was dropped */

	out->previous = deployed;
	out->serves = deployed == candidate;
	if (deployed == candidate)
		return;
	if (deployed == 0)
	{
		deploy(name, candidate);
		out->serves = true;
		ereport(NOTICE,
				(errmsg("deployed model " INT64_FORMAT " as \"%s\"", candidate, pgdl_echo(name)),
				 errdetail("The name served no model before.")));
		return;
	}
	lost = pgdl_model_by_id(deployed)->dataset_dropped;
	if (lost)
		difference = pstrdup("Its packed training table was dropped, and with it how to preprocess data for it.");
	else if (pgdl_model_by_id(deployed)->dataset == NULL)
		difference = pstrdup("It has no training set in pgdl.datasets (an imported model), so nothing says how to preprocess data for it.");
	else
		difference = pgdl_dataset_preprocessing_difference(pgdl_model_by_id(deployed)->dataset, vds);
	if (difference != NULL)
	{
		ereport(NOTICE,
				(errmsg("kept model " INT64_FORMAT " as \"%s\": it cannot be scored on \"%s\"",
						deployed, pgdl_echo(name), vname ? vname : "?"),
				 errdetail("%s", difference),
				 errhint("%s", lost ?
						 "The served model no longer predicts: deploy one that does with pgdl.deploy." :
						 "Compare the two with pgdl.metrics on data both can read, then call pgdl.deploy.")));
		return;
	}
	theirs = rank_value_on(pgdl_model_by_id(deployed), vds, r);
	ours = rank_value_on(pgdl_model_by_id(candidate), vds, r);
	out->score = ours;
	out->previous_score = theirs;
	if (!beats(ours, theirs, r))
	{
		ereport(NOTICE,
				(errmsg("kept model " INT64_FORMAT " as \"%s\": the selection's best, model " INT64_FORMAT
						", does not beat it", deployed, pgdl_echo(name), candidate),
				 errdetail("On \"%s\", %s is %.6g for model " INT64_FORMAT " and %.6g for model " INT64_FORMAT ".",
						   vname ? vname : "?", metric, theirs, deployed, ours, candidate)));
		return;
	}
	deploy(name, candidate);
	out->serves = true;
	ereport(NOTICE,
			(errmsg("deployed model " INT64_FORMAT " as \"%s\" in place of model " INT64_FORMAT,
					candidate, pgdl_echo(name), deployed),
			 errdetail("On \"%s\", %s is %.6g for model " INT64_FORMAT " and %.6g for model " INT64_FORMAT ".",
					   vname ? vname : "?", metric, ours, candidate, theirs, deployed)));
}

/*
 * pgdl.deploy_if_better(name, model, validation, metric): the same rule for a
 * model of the caller's choosing (pgdl.automl's winner, pgdl.retrain's refit),
 * with the two scores.  The candidate must read the validation table as it
 * was trained to.
 */
PG_FUNCTION_INFO_V1(pgdl_deploy_if_better_sql);
Datum
pgdl_deploy_if_better_sql(PG_FUNCTION_ARGS)
{
	PgdlModel  *model;
	PgdlDataset *vds;
	PgdlRankMetric r = PGDL_RANK_LOSS;
	PgdlDeployOutcome out;
	TupleDesc	tupdesc;
	Datum		values[6];
	bool		nulls[6] = {0};

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("name, model and validation must not be NULL")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pgdl.deploy_if_better must return a row");
	model = pgdl_model_by_id(PG_GETARG_INT64(1));
	vds = pgdl_dataset_by_packed(PG_GETARG_OID(2));
	if (!PG_ARGISNULL(3))
		r = pgdl_rank_metric_arg("metric", text_to_cstring(PG_GETARG_TEXT_PP(3)));
	pgdl_rank_metric_check_task(r, vds->classification, "metric");
	if (model->dataset == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("model " INT64_FORMAT " has no training set in pgdl.datasets", PG_GETARG_INT64(1)),
				 errdetail("Nothing says how to preprocess the validation table for it (an imported model)."),
				 errhint("Compare it with pgdl.metrics, then call pgdl.deploy.")));
	pgdl_check_same_preprocessing(model->dataset, vds, "validation");
	pgdl_deploy_if_better_outcome(text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_INT64(1), vds, r, &out);
	values[0] = BoolGetDatum(out.serves);
	values[1] = Int64GetDatum(out.previous);
	nulls[1] = out.previous == 0;
	values[2] = CStringGetTextDatum(pgdl_rank_metric_name(r));
	values[3] = Float8GetDatum(out.score);
	nulls[3] = isnan(out.score);
	values[4] = Float8GetDatum(out.previous_score);
	nulls[4] = isnan(out.previous_score);
	values[5] = Int64GetDatum(PG_GETARG_INT64(1));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
