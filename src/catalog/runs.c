/*
 * runs.c -- the run record: pgdl.runs, pgdl.run_metrics, pgdl.models and
 * pgdl.checkpoints, written and read back in one place.
 *
 * pgdl.fit's run and epochs are written by its run recorder (run_recorder.c),
 * each committed on its own, and its model by the caller; a pgdl.fit_multiple
 * run is written by its workers, each epoch committed on its own (so that
 * pgdl.resume can continue it), and its models by the leader.  Every function
 * here connects to SPI itself, so callers in a backend or a background worker
 * need only be in a transaction.  The statements are prepared once per process.
 *
 * What is read back is checked before use: the catalog is writable by its
 * users, and a forged row must give an error, not a crash.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "base/base.h"
#include "catalog/catalog.h"

static const char *const status_names[] = {
	[PGDL_RUN_RUNNING] = "running", [PGDL_RUN_FINISHED] = "finished",
	[PGDL_RUN_FAILED] = "failed", [PGDL_RUN_CANCELLED] = "cancelled"
};

/* An epoch's validation scores beyond loss and accuracy as a jsonb object of the defined ones; NULL: none. */
static Jsonb *
scores_jsonb(const PgdlEpochMetrics *m)
{
	JsonbParseState *state = NULL;

	if (!m->has_scores || !m->has_validation)
		return NULL;
	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int r = 0; r < PGDL_RANK_N_METRICS; r++)
		if (r != PGDL_RANK_LOSS && isfinite(m->scores[r]))
			pgdl_jsonb_put_float8(&state, pgdl_rank_metric_name((PgdlRankMetric) r), m->scores[r]);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/*
 * A model's pgdl.models.metrics: its last epoch, in a model selection whether
 * it was stopped early, and "diverged": true with the steps its weights took
 * when training diverged (the key is absent otherwise).  With restore_best
 * its stored epoch is the best one: "epochs_trained" says how far it went.
 */
static Jsonb *
metrics_jsonb(const PgdlModelRecord *rec)
{
	const PgdlEpochMetrics *m = &rec->last;
	JsonbParseState *state = NULL;

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_int(&state, "epoch", m->epoch);
	pgdl_jsonb_put_float8(&state, "train_loss", m->train_loss);
	if (m->classification)
		pgdl_jsonb_put_float8(&state, "train_accuracy", m->train_accuracy);
	if (m->has_validation)
	{
		pgdl_jsonb_put_float8(&state, "validation_loss", m->validation_loss);
		if (m->classification)
			pgdl_jsonb_put_float8(&state, "validation_accuracy", m->validation_accuracy);
	}
	if (m->has_scores && m->has_validation)
	{
		for (int r = 0; r < PGDL_RANK_N_METRICS; r++)
			if (r != PGDL_RANK_LOSS && r != PGDL_RANK_ACCURACY && isfinite(m->scores[r]))
				pgdl_jsonb_put_float8(&state, psprintf("validation_%s", pgdl_rank_metric_name((PgdlRankMetric) r)),
									  m->scores[r]);
	}
	if (rec->epochs_trained > m->epoch)
		pgdl_jsonb_put_int(&state, "epochs_trained", rec->epochs_trained);
	if (rec->selection)
		pgdl_jsonb_put_bool(&state, "stopped", rec->stopped);
	if (m->early_stopped)
		pgdl_jsonb_put_bool(&state, "early_stopped", true);
	if (rec->folded)
		pgdl_jsonb_put_int(&state, "fold", rec->fold);
	if (m->diverged)
	{
		pgdl_jsonb_put_bool(&state, "diverged", true);
		pgdl_jsonb_put_int(&state, "steps", m->steps);
	}
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/* ---- statements ---- */

/* A statement prepared on first use and kept for the life of the process. */
typedef struct Statement
{
	const char *sql;
	int			nargs;
	Oid			types[15];
	SPIPlanPtr	plan;
	bool		fresh;			/* a SELECT that must see what others committed since the statement began */
} Statement;

static Statement insert_run = {
	"INSERT INTO pgdl.runs (kind, dataset, validation, architecture, config, epochs, progress_handle, engine) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
	8, {TEXTOID, INT8OID, INT8OID, INT8OID, JSONBOID, INT4OID, INT8OID, JSONBOID}
};
/* a resume on other kernels than the run began on adds them as "resumed_on" (the last such resume's) */
static Statement restart_run = {
	"UPDATE pgdl.runs SET status = 'running', finished = NULL, progress_handle = $2, "
	"engine = CASE WHEN engine IS NULL THEN $3 "
	"WHEN engine->'isa' = $3->'isa' AND engine->'blas_core' = $3->'blas_core' THEN engine "
	"ELSE engine || jsonb_build_object('resumed_on', $3) END WHERE id = $1",
	3, {INT8OID, INT8OID, JSONBOID}
};
static Statement finish_run = {
	"UPDATE pgdl.runs SET status = $2, finished = clock_timestamp() WHERE id = $1",
	2, {INT8OID, TEXTOID}
};
static Statement insert_metrics = {
	"INSERT INTO pgdl.run_metrics (run, config, epoch, train_loss, train_accuracy, "
	"validation_loss, validation_accuracy, seconds, images_per_second, state, node, predicted_seconds, decision, "
	"validation_metrics, fold) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
	15, {INT8OID, INT8OID, INT4OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, TEXTOID, TEXTOID,
	FLOAT8OID, TEXTOID, JSONBOID, INT4OID}
};
static Statement record_decision = {
	"UPDATE pgdl.run_metrics SET decision = $4, bracket = $5 WHERE run = $1 AND config = $2 AND epoch = $3",
	5, {INT8OID, INT8OID, INT4OID, TEXTOID, INT4OID}
};
static Statement record_federation = {
	"UPDATE pgdl.run_metrics SET federation = $3 WHERE run = $1 AND epoch = $2 AND config IS NULL AND node IS NULL",
	3, {INT8OID, INT4OID, JSONBOID}
};
static Statement insert_checkpoint = {
	"INSERT INTO pgdl.checkpoints (run, config, epoch, weights) VALUES ($1, $2, $3, $4)",
	4, {INT8OID, INT8OID, INT4OID, BYTEAOID}
};
/* a model's engine is its run's: the kernels that trained it, wherever the leader stores it */
static Statement insert_model = {
	"INSERT INTO pgdl.models (name, architecture, spec, config, dataset, run, weights, metrics, parent, origin, engine) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, (SELECT r.engine FROM pgdl.runs r WHERE r.id = $6)) RETURNING id",
	10, {TEXTOID, INT8OID, JSONBOID, JSONBOID, INT8OID, INT8OID, BYTEAOID, JSONBOID, INT8OID, JSONBOID}
};
/* a pgdl.fit run has one model and no configuration ids */
static Statement link_run_metrics = {
	"UPDATE pgdl.run_metrics SET model = $1 WHERE run = $2",
	2, {INT8OID, INT8OID}
};
static Statement link_config_metrics = {
	"UPDATE pgdl.run_metrics SET model = $1 WHERE run = $2 AND config = $3",
	3, {INT8OID, INT8OID, INT8OID}
};
static Statement link_fold_metrics = {
	"UPDATE pgdl.run_metrics SET model = $1 WHERE run = $2 AND config = $3 AND fold = $4",
	4, {INT8OID, INT8OID, INT8OID, INT4OID}
};
static Statement model_named = {
	"SELECT 'model' FROM pgdl.models WHERE name = $1 AND owner = quote_ident(current_user)::regrole "
	"UNION ALL SELECT 'deployment' FROM pgdl.deployment_names WHERE name = $1 AND owner = quote_ident(current_user)::regrole",
	1, {TEXTOID}
};
static Statement select_run = {
	"SELECT kind, status, dataset, validation, config, epochs, architecture, engine->>'isa', engine->>'blas_core' "
	"FROM pgdl.runs WHERE id = $1",
	1, {INT8OID}
};
static Statement last_checkpoint = {
	"SELECT epoch, weights FROM pgdl.checkpoints WHERE run = $1 AND config = $2 "
	"AND owner = (SELECT owner FROM pgdl.runs WHERE id = $1) ORDER BY epoch DESC LIMIT 1",
	2, {INT8OID, INT8OID}
};
static Statement was_stopped = {
	"SELECT 1 FROM pgdl.run_metrics WHERE run = $1 AND config = $2 AND decision IN ('stop', 'early_stop')",
	2, {INT8OID, INT8OID}
};
static Statement last_metrics = {
	"SELECT train_loss, train_accuracy, validation_loss, validation_accuracy, state = 'diverged' "
	"FROM pgdl.run_metrics WHERE run = $1 AND config IS NOT DISTINCT FROM nullif($2, 0) AND node IS NULL "
	"ORDER BY epoch DESC LIMIT 1",
	2, {INT8OID, INT8OID}
};
/* a resumed run's history: the epochs it completed, for halving's rungs, early stopping and restore_best */
static Statement validation_history = {
	"SELECT epoch, train_loss, train_accuracy, validation_loss, validation_accuracy, state = 'diverged', "
	"validation_metrics FROM pgdl.run_metrics "
	"WHERE run = $1 AND config = $2 AND node IS NULL AND epoch BETWEEN 1 AND $3 ORDER BY epoch",
	3, {INT8OID, INT8OID, INT4OID}
};
/* fresh: the leader reads what its workers committed during fit_multiple (read committed, mop_check_isolation) */
static Statement checkpoint_at = {
	"SELECT weights FROM pgdl.checkpoints WHERE run = $1 AND config = $2 AND epoch = $3 "
	"AND owner = (SELECT owner FROM pgdl.runs WHERE id = $1)",
	3, {INT8OID, INT8OID, INT4OID}, NULL, true
};
static Statement add_fit_config = {
	"INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ($1, $2, $3) "
	"ON CONFLICT (owner, set_name, architecture, config) DO NOTHING RETURNING id",
	3, {TEXTOID, INT8OID, JSONBOID}
};
static Statement find_fit_config = {
	"SELECT id FROM pgdl.configs WHERE owner = quote_ident(current_user)::regrole "
	"AND set_name = $1 AND architecture = $2 AND config = $3",
	3, {TEXTOID, INT8OID, JSONBOID}
};
static Statement fail_running = {
	"UPDATE pgdl.runs SET status = 'failed', finished = clock_timestamp()"
	" WHERE id = $1 AND status = 'running' AND progress_handle IS NOT DISTINCT FROM $2",
	2, {INT8OID, INT8OID}
};
static Statement running_runs = {
	"SELECT id, progress_handle FROM pgdl.runs WHERE status = 'running' "
	"AND progress_handle IS NOT NULL ORDER BY id", 0, {InvalidOid}
};

/* Run a statement (within SPI_connect), prepared on first use, and check what it did. */
static void
execute(Statement *st, Datum *values, const char *nulls, int expected)
{
	int			ret;

	if (st->plan == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(st->sql, st->nargs, st->types);

		if (plan == NULL)
			elog(ERROR, "pgdl: could not prepare \"%s\": %s", st->sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "pgdl: could not keep the plan of \"%s\"", st->sql);
		st->plan = plan;
	}
	ret = SPI_execute_plan(st->plan, values, nulls, expected == SPI_OK_SELECT && !st->fresh, 0);
	if (ret != expected)
		elog(ERROR, "pgdl: \"%s\" failed: %s", st->sql, SPI_result_code_string(ret));
}

/* An id argument: 0 means none, stored as NULL. */
#define ID_NULL(id) ((id) != 0 ? ' ' : 'n')

static int64
returned_id(void)
{
	bool		isnull;

	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* ---- writing ---- */

int64
pgdl_run_begin(const char *kind, int64 dataset, int64 validation, int64 architecture,
			   Jsonb *config, int32 epochs, int64 progress_handle, const PgdlEngine *engine)
{
	Datum		values[8];
	char		nulls[8] = {' ', ID_NULL(dataset), ID_NULL(validation), ID_NULL(architecture), ' ', ' ',
	ID_NULL(progress_handle), ' '};
	int64		id;

	values[0] = CStringGetTextDatum(kind);
	values[1] = Int64GetDatum(dataset);
	values[2] = Int64GetDatum(validation);
	values[3] = Int64GetDatum(architecture);
	values[4] = JsonbPGetDatum(config);
	values[5] = Int32GetDatum(epochs);
	values[6] = Int64GetDatum(progress_handle);
	values[7] = JsonbPGetDatum(pgdl_engine_jsonb(engine));
	SPI_connect();
	execute(&insert_run, values, nulls, SPI_OK_INSERT_RETURNING);
	id = returned_id();
	SPI_finish();
	return id;
}

int64
pgdl_run_fit_config(int64 architecture, Jsonb *config)
{
	Datum		values[3];
	int64		id = 0;

	if (architecture == 0)
		return 0;
	values[0] = CStringGetTextDatum(PGDL_FIT_CONFIG_SET);
	values[1] = Int64GetDatum(architecture);
	values[2] = JsonbPGetDatum(config);
	SPI_connect();
	execute(&add_fit_config, values, NULL, SPI_OK_INSERT_RETURNING);
	if (SPI_processed == 0)
		execute(&find_fit_config, values, NULL, SPI_OK_SELECT);
	/* none: a snapshot that does not see the row another session added meanwhile */
	if (SPI_processed == 1)
		id = returned_id();
	SPI_finish();
	return id;
}

void
pgdl_run_fail_if_running(int64 run, int64 progress_handle)
{
	Datum		values[2] = {Int64GetDatum(run), Int64GetDatum(progress_handle)};
	char		nulls[2] = {' ', ID_NULL(progress_handle)};

	SPI_connect();
	execute(&fail_running, values, nulls, SPI_OK_UPDATE);
	SPI_finish();
}

void
pgdl_run_restart(int64 run, int64 progress_handle, const PgdlEngine *engine)
{
	Datum		values[3] = {Int64GetDatum(run), Int64GetDatum(progress_handle),
	JsonbPGetDatum(pgdl_engine_jsonb(engine))};
	char		nulls[3] = {' ', ID_NULL(progress_handle), ' '};

	SPI_connect();
	execute(&restart_run, values, nulls, SPI_OK_UPDATE);
	SPI_finish();
}

void
pgdl_run_finish(int64 run, PgdlRunStatus status)
{
	Datum		values[2] = {Int64GetDatum(run), CStringGetTextDatum(status_names[status])};

	Assert(status != PGDL_RUN_RUNNING);
	SPI_connect();
	execute(&finish_run, values, NULL, SPI_OK_UPDATE);
	SPI_finish();
	if (status == PGDL_RUN_FINISHED)
		pgdl_run_prune_checkpoints(run);
}

/* NaN: nothing was measured (a model that diverged at the first step of an epoch) */
#define MEASURED(v) (isnan(v) ? 'n' : ' ')

/* An epoch's row: of a site (node), of a fold (fold >= 0), or of the run's model. */
static void
record_epoch(int64 run, int64 config_id, const char *node, int32 fold, const PgdlEpochMetrics *m)
{
	Jsonb	   *scores = scores_jsonb(m);
	Datum		values[15];
	char		nulls[15] = {' ', ID_NULL(config_id), ' ', MEASURED(m->train_loss),
		m->classification ? MEASURED(m->train_accuracy) : 'n',
		m->has_validation ? ' ' : 'n', m->has_validation && m->classification ? ' ' : 'n', ' ', ' ', ' ',
	node ? ' ' : 'n', m->predicted_seconds > 0 && isfinite(m->predicted_seconds) ? ' ' : 'n',
	m->early_stopped ? ' ' : 'n', scores ? ' ' : 'n', fold >= 0 ? ' ' : 'n'};

	values[0] = Int64GetDatum(run);
	values[1] = Int64GetDatum(config_id);
	values[2] = Int32GetDatum(m->epoch);
	values[3] = Float8GetDatum(m->train_loss);
	values[4] = Float8GetDatum(m->train_accuracy);
	values[5] = Float8GetDatum(m->validation_loss);
	values[6] = Float8GetDatum(m->validation_accuracy);
	values[7] = Float8GetDatum(m->seconds);
	values[8] = Float8GetDatum(m->images_per_second);
	values[9] = CStringGetTextDatum(m->diverged ? "diverged" : "ok");
	values[10] = node ? CStringGetTextDatum(node) : (Datum) 0;
	values[11] = Float8GetDatum(m->predicted_seconds);
	/* early stopping's decision is the epoch's own: it comes with the row */
	values[12] = m->early_stopped ? CStringGetTextDatum("early_stop") : (Datum) 0;
	values[13] = scores ? JsonbPGetDatum(scores) : (Datum) 0;
	values[14] = Int32GetDatum(fold);
	SPI_connect();
	execute(&insert_metrics, values, nulls, SPI_OK_INSERT);
	SPI_finish();
}

void
pgdl_run_record_epoch(int64 run, int64 config_id, const PgdlEpochMetrics *m)
{
	record_epoch(run, config_id, NULL, -1, m);
}

void
pgdl_run_record_node_epoch(int64 run, int64 config_id, const char *node, const PgdlEpochMetrics *m)
{
	record_epoch(run, config_id, node, -1, m);
}

void
pgdl_run_record_fold_epoch(int64 run, int64 config_id, int32 fold, const PgdlEpochMetrics *m)
{
	record_epoch(run, config_id, NULL, fold, m);
}

void
pgdl_run_record_decision(int64 run, int64 config_id, int32 epoch, bool stop, int32 bracket)
{
	Datum		values[5];

	values[0] = Int64GetDatum(run);
	values[1] = Int64GetDatum(config_id);
	values[2] = Int32GetDatum(epoch);
	values[3] = CStringGetTextDatum(stop ? "stop" : "continue");
	values[4] = Int32GetDatum(bracket);
	SPI_connect();
	execute(&record_decision, values, NULL, SPI_OK_UPDATE);
	SPI_finish();
}

void
pgdl_run_record_federation(int64 run, int32 round, Jsonb *federation)
{
	Datum		values[3] = {Int64GetDatum(run), Int32GetDatum(round), JsonbPGetDatum(federation)};

	SPI_connect();
	execute(&record_federation, values, NULL, SPI_OK_UPDATE);
	SPI_finish();
}

void
pgdl_run_checkpoint(int64 run, int64 config_id, int32 epoch, bytea *weights)
{
	Datum		values[4];

	values[0] = Int64GetDatum(run);
	values[1] = Int64GetDatum(config_id);
	values[2] = Int32GetDatum(epoch);
	values[3] = PointerGetDatum(weights);
	SPI_connect();
	execute(&insert_checkpoint, values, NULL, SPI_OK_INSERT);
	SPI_finish();
}

void
pgdl_run_check_model_name(const char *name)
{
	Datum		values[1] = {CStringGetTextDatum(name)};
	char	   *taken = NULL;
	MemoryContext caller = CurrentMemoryContext;

	SPI_connect();
	execute(&model_named, values, NULL, SPI_OK_SELECT);
	if (SPI_processed > 0)
		taken = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	/* checked before training, so that a clash costs no epochs; names_free() checks every writer */
	if (taken && strcmp(taken, "deployment") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("\"%s\" is already the name of a deployment", pgdl_echo(name)),
				 errdetail("A role's models and deployments share one set of names, so that a name given to pgdl.predict means one model."),
				 errhint("Choose another name, or pass NULL to store the model without one.")));
	if (taken)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("model \"%s\" already exists", pgdl_echo(name)),
				 errhint("Choose another name, or pass NULL to store the model without one.")));
}

int64
pgdl_run_store_model(const PgdlModelRecord *rec)
{
	Datum		values[10];
	char		nulls[10] = {rec->name ? ' ' : 'n', ID_NULL(rec->architecture), ' ', ' ', ID_NULL(rec->dataset),
	' ', ' ', ' ', ID_NULL(rec->parent), rec->origin ? ' ' : 'n'};
	Datum		link[4];
	int64		id;

	values[0] = rec->name ? CStringGetTextDatum(rec->name) : (Datum) 0;
	values[1] = Int64GetDatum(rec->architecture);
	values[2] = JsonbPGetDatum(rec->spec);
	values[3] = JsonbPGetDatum(rec->config);
	values[4] = Int64GetDatum(rec->dataset);
	values[5] = Int64GetDatum(rec->run);
	values[6] = PointerGetDatum(rec->weights);
	values[7] = JsonbPGetDatum(metrics_jsonb(rec));
	values[8] = Int64GetDatum(rec->parent);
	values[9] = rec->origin ? JsonbPGetDatum(rec->origin) : (Datum) 0;
	SPI_connect();
	execute(&insert_model, values, nulls, SPI_OK_INSERT_RETURNING);
	id = returned_id();
	link[0] = Int64GetDatum(id);
	link[1] = Int64GetDatum(rec->run);
	link[2] = Int64GetDatum(rec->config_id);
	link[3] = Int32GetDatum(rec->fold);
	execute(rec->config_id == 0 ? &link_run_metrics : rec->folded ? &link_fold_metrics : &link_config_metrics,
			link, NULL, SPI_OK_UPDATE);
	SPI_finish();
	return id;
}

/* ---- reading back ---- */

static void
corrupt_run(int64 run, const char *detail) pg_attribute_noreturn();

static void
corrupt_run(int64 run, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("run " INT64_FORMAT " in pgdl.runs is not valid", run),
			 errdetail("%s", detail)));
}

static PgdlRunStatus
status_from_name(int64 run, const char *name)
{
	for (int s = 0; s < lengthof(status_names); s++)
		if (strcmp(name, status_names[s]) == 0)
			return (PgdlRunStatus) s;
	corrupt_run(run, psprintf("Its status \"%s\" is not one of running, finished, failed and cancelled.", name));
}

bool
pgdl_run_read(int64 run, PgdlRunRecord *out)
{
	Datum		values[1] = {Int64GetDatum(run)};
	MemoryContext caller = CurrentMemoryContext;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;

	SPI_connect();
	execute(&select_run, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
	{
		SPI_finish();
		return false;
	}
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	MemoryContextSwitchTo(caller);
	memset(out, 0, sizeof(*out));
	out->id = run;
	out->kind = TextDatumGetCString(SPI_getbinval(tup, desc, 1, &isnull));
	out->status = status_from_name(run, TextDatumGetCString(SPI_getbinval(tup, desc, 2, &isnull)));
	d = SPI_getbinval(tup, desc, 3, &isnull);
	out->dataset = isnull ? 0 : DatumGetInt64(d);
	d = SPI_getbinval(tup, desc, 4, &isnull);
	out->validation = isnull ? 0 : DatumGetInt64(d);
	out->config = DatumGetJsonbPCopy(SPI_getbinval(tup, desc, 5, &isnull));
	out->epochs = DatumGetInt32(SPI_getbinval(tup, desc, 6, &isnull));
	d = SPI_getbinval(tup, desc, 7, &isnull);
	out->architecture = isnull ? 0 : DatumGetInt64(d);
	d = SPI_getbinval(tup, desc, 8, &isnull);
	out->isa = isnull ? NULL : TextDatumGetCString(d);
	d = SPI_getbinval(tup, desc, 9, &isnull);
	out->blas_core = isnull ? NULL : TextDatumGetCString(d);
	SPI_finish();
	if (!JsonContainerIsObject(&out->config->root))
		corrupt_run(run, "Its config is not a JSON object.");
	if (out->epochs < 1 || out->epochs > PGDL_MAX_EPOCHS)
		corrupt_run(run, psprintf("Its epochs %d are not between 1 and %d.", out->epochs, PGDL_MAX_EPOCHS));
	return true;
}

/*
 * A run resumed on other kernels than it recorded says so: its models go on
 * from the same checkpoints, but the products and vector paths of another ISA
 * or BLAS kernel set may round differently from those of the run's start.
 * Runs recorded before 0.7.0 have no engine and are not compared.
 */
void
pgdl_run_warn_engine(const PgdlRunRecord *rec)
{
	PgdlEngine	now;

	if (rec->isa == NULL && rec->blas_core == NULL)
		return;
	pgdl_engine_current(&now);
	if (rec->isa != NULL && strcmp(rec->isa, now.isa) == 0 &&
		rec->blas_core != NULL && strcmp(rec->blas_core, now.blas_core) == 0)
		return;
	ereport(WARNING,
			(errcode(ERRCODE_WARNING),
			 errmsg("the run resumes on other CPU kernels than it began on"),
			 errdetail("Run " INT64_FORMAT " began with instruction set %s and BLAS kernels %s; this session runs %s and %s. "
					   "Its models may not be the same bytes as those of a run that was not interrupted.",
					   rec->id, pgdl_echo(rec->isa ? rec->isa : "unknown"),
					   pgdl_echo(rec->blas_core ? rec->blas_core : "unknown"), now.isa, now.blas_core),
			 errhint("SET pgdl.cpu_isa to the run's instruction set where this CPU has it.")));
}

/* Its last epoch's metrics; NULL columns read as NaN (nothing was measured), as they were written. */
static bool
read_last_metrics(Datum *key, PgdlEpochMetrics *m)
{
	double		v[4];
	bool		isnull[5];
	Datum		diverged;

	execute(&last_metrics, key, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return false;
	for (int f = 0; f < 4; f++)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, f + 1, &isnull[f]);

		v[f] = isnull[f] ? get_float8_nan() : DatumGetFloat8(d);
	}
	diverged = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull[4]);
	m->train_loss = v[0];
	m->train_accuracy = v[1];
	m->validation_loss = v[2];
	m->validation_accuracy = v[3];
	m->has_validation = !isnull[2];
	m->diverged = !isnull[4] && DatumGetBool(diverged);
	return true;
}

/* epochs: the run's, which a checkpoint's epoch must be within */
void
pgdl_run_resume_point(int64 run, int64 config_id, int32 epochs, PgdlResumePoint *out)
{
	Datum		key[2] = {Int64GetDatum(run), Int64GetDatum(config_id)};
	MemoryContext caller = CurrentMemoryContext;
	bool		isnull;

	memset(out, 0, sizeof(*out));
	SPI_connect();
	execute(&last_checkpoint, key, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		MemoryContext old = MemoryContextSwitchTo(caller);

		out->epoch = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		out->weights = DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		MemoryContextSwitchTo(old);
		if (out->epoch < 1 || out->epoch > epochs)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("the checkpoint of configuration " INT64_FORMAT " in run " INT64_FORMAT " is not valid",
							config_id, run),
					 errdetail("Its epoch %d is not between 1 and the run's %d.", out->epoch, epochs)));
	}
	execute(&was_stopped, key, NULL, SPI_OK_SELECT);
	out->stopped = SPI_processed > 0;
	out->has_metrics = out->epoch > 0 && read_last_metrics(key, &out->metrics);
	SPI_finish();
}

/* A float8 column of a history row: NaN when NULL. */
static double
history_float(int r, int col, bool *isnull)
{
	Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, col, isnull);

	return *isnull ? get_float8_nan() : DatumGetFloat8(d);
}

/* validation_metrics back into scores: numbers of known names only, the rest NaN (the row is the user's to forge). */
static void
history_scores(int r, PgdlEpochMetrics *em)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 7, &isnull);
	Jsonb	   *jb;

	for (int m = 0; m < PGDL_RANK_N_METRICS; m++)
		em->scores[m] = get_float8_nan();
	if (isnull)
		return;
	jb = DatumGetJsonbP(d);
	if (!JsonContainerIsObject(&jb->root))
		return;
	em->has_scores = true;
	for (int m = 0; m < PGDL_RANK_N_METRICS; m++)
	{
		JsonbValue *v = pgdl_jsonb_key(&jb->root, pgdl_rank_metric_name((PgdlRankMetric) m));

		if (v != NULL && v->type == jbvNumeric)
			em->scores[m] = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow,
															   NumericGetDatum(v->val.numeric)));
	}
}

int32
pgdl_run_validation_history(int64 run, int64 config_id, int32 last, PgdlEpochMetrics **out)
{
	Datum		values[3] = {Int64GetDatum(run), Int64GetDatum(config_id), Int32GetDatum(last)};
	MemoryContext caller = CurrentMemoryContext;
	int32		n;

	SPI_connect();
	execute(&validation_history, values, NULL, SPI_OK_SELECT);
	n = (int32) SPI_processed;
	*out = MemoryContextAllocZero(caller, sizeof(PgdlEpochMetrics) * (n + 1));
	for (int32 r = 0; r < n; r++)
	{
		PgdlEpochMetrics *em = &(*out)[r];
		bool		isnull;
		Datum		d;

		em->epoch = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull));
		em->train_loss = history_float(r, 2, &isnull);
		em->train_accuracy = history_float(r, 3, &isnull);
		em->validation_loss = history_float(r, 4, &isnull);
		em->has_validation = !isnull;
		em->validation_accuracy = history_float(r, 5, &isnull);
		em->classification = !isnull;
		if (isnull)
			em->validation_accuracy = 0;
		if (!em->has_validation)
			em->validation_loss = 0;
		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 6, &isnull);
		em->diverged = !isnull && DatumGetBool(d);
		history_scores(r, em);
	}
	SPI_finish();
	return n;
}

bytea *
pgdl_run_checkpoint_at(int64 run, int64 config_id, int32 epoch)
{
	Datum		values[3] = {Int64GetDatum(run), Int64GetDatum(config_id), Int32GetDatum(epoch)};
	MemoryContext caller = CurrentMemoryContext;
	bytea	   *weights = NULL;

	SPI_connect();
	execute(&checkpoint_at, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContext old = MemoryContextSwitchTo(caller);

		weights = isnull ? NULL : DatumGetByteaPCopy(d);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return weights;
}

int64
pgdl_run_list_running(int64 **runs, int64 **handles)
{
	MemoryContext caller = CurrentMemoryContext;
	int64		n = 0;

	SPI_connect();
	execute(&running_runs, NULL, NULL, SPI_OK_SELECT);
	*runs = MemoryContextAlloc(caller, sizeof(int64) * (SPI_processed + 1));
	*handles = MemoryContextAlloc(caller, sizeof(int64) * (SPI_processed + 1));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		int64		handle = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &isnull));

		/* a dsm_handle is 32 bits: anything else is not a run's shared memory */
		if (handle <= 0 || handle > PG_UINT32_MAX)
			continue;
		(*runs)[n] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull));
		(*handles)[n++] = handle;
	}
	SPI_finish();
	return n;
}
