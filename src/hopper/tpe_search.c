/*
 * tpe_search.c -- pgdl.tpe_search: Bayesian search of a space in batches of
 * a fixed size, each batch a configuration set of its own trained by one
 * pgdl.fit_multiple run.
 *
 * The first batch is drawn from the space as pgdl.random_search draws its
 * samples (with the same seed, the same configurations); every later batch is
 * proposed by the Tree-structured Parzen Estimator (tpe.c) from the scores of
 * all the batches before it, and only once their runs have ended.  A score is
 * the rank_by value of a model's stored epoch, read back from the run's
 * metrics (fit.c's pgdl_epoch_rank_value, the rule fit_multiple ranks by),
 * and hopper.h's invariant makes a model's bytes, hence its metrics, the same
 * whatever the number of workers or their timing.  So a search proposes the
 * same configurations and trains the same models from a seed with one worker
 * or with many.
 *
 * Batch b is the set "<set_name>/b"; the leaderboard ranks every batch's
 * models together in fit_multiple's order (diverged last, then rank_by, then
 * configuration id), and deploy deploys its winner as fit_multiple's does.
 *
 * Invariants:
 * - every argument, and every value of every key of the space, is checked
 *   before the first batch trains;
 * - no configuration is trained twice: a proposal whose canonical
 *   configuration (with its architecture) was tried already is set aside and
 *   another drawn; a space with no configuration left ends the search early;
 * - everything is in the caller's transaction: an error rolls back every
 *   batch's sets and models (its runs end failed, as a fit_multiple's).
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/snapmgr.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "train/train.h"
#include "models/models.h"
#include "hopper/hopper.h"
#include "hopper/leader.h"
#include "hopper/tpe.h"

/* the arguments of pgdl.tpe_search, in order */
enum
{
	ARG_SOURCE, ARG_ARCHITECTURES, ARG_SPACE, ARG_TRIALS, ARG_BATCH, ARG_EPOCHS, ARG_VALIDATION,
	ARG_RANK_BY, ARG_SEED, ARG_WORKERS, ARG_SET_NAME, ARG_NAME_PREFIX, ARG_PRIORITY, ARG_DEPLOY
};

/* Proposals set aside per configuration of a batch (already tried) before the search ends. */
#define TPE_ATTEMPTS_PER_TRIAL	8

/* A model of the leaderboard: a row of its batch's fit_multiple, and its score. */
typedef struct TpeTrial
{
	int32		batch;
	int64		model;
	int64		config;
	char	   *architecture;
	Jsonb	   *config_json;
	int32		epochs;
	double		metric[4];		/* train and validation loss and accuracy */
	bool		metric_null[4];
	bool		stopped;
	bool		diverged;
	double		key;			/* rank_by's value turned lower-is-better; NaN: none (ranks last) */
	double		score;			/* rank_by's value */
} TpeTrial;

/* A proposal kept: its point, configuration and architecture, and what its model scored. */
typedef struct TpeTried
{
	Jsonb	   *config;
	int64		arch;
	int64		config_id;		/* its pgdl.configs row; 0: the set had it (another session's) */
} TpeTried;

typedef struct TpeSearch
{
	Oid			source;
	Oid			validation;		/* InvalidOid: none */
	int32		trials;
	int32		batch;
	int32		epochs;
	uint64		seed;
	bool		workers_given;
	int32		workers;
	int32		priority;
	PgdlRankMetric rank_by;
	bool		rank_by_given;
	char	   *set_name;
	char	   *name_prefix;	/* NULL: none */
	char	   *deploy;			/* NULL: none */
	MopSpace   *space;
	const TpeParam *params;
	int32		n_params;
	/* every point proposed, the ones set aside too: TPE never proposes one again */
	double	   *taken;
	int32		n_taken;
	int32		cap_taken;
	/* the configurations tried, their points (n_params each) and scores (rank keys) */
	TpeTried   *tried;
	double	   *points;
	double	   *keys;
	int32		n_tried;
	TpeTrial   *rows;
	int32		n_rows;
} TpeSearch;

/* What the caller names its search, or the first tpe_search_<n> none of whose sets exist. */
static char *
search_name(FunctionCallInfo fcinfo)
{
	char	   *name;
	bool		isnull;

	if (!PG_ARGISNULL(ARG_SET_NAME))
	{
		mop_check_set_name(PG_GETARG_TEXT_PP(ARG_SET_NAME));
		return text_to_cstring(PG_GETARG_TEXT_PP(ARG_SET_NAME));
	}
	SPI_connect();
	if (SPI_execute("SELECT coalesce(max(substring(set_name FROM '^tpe_search_([0-9]{1,9})/')::bigint), 0) + 1 "
					"FROM pgdl.configs WHERE owner = quote_ident(current_user)::regrole "
					"AND set_name ~ '^tpe_search_[0-9]{1,9}/[0-9]+$'", true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read the names of pgdl.configs");
	name = psprintf("tpe_search_" INT64_FORMAT,
					DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)));
	SPI_finish();
	return name;
}

/* A search's batches are sets of their own: none of "<name>/<n>" may exist yet. */
static void
check_sets_new(const char *name)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	bool		isnull;
	Datum		taken;

	SPI_connect();
	if (SPI_execute_with_args("SELECT min(set_name) FROM pgdl.configs WHERE owner = quote_ident(current_user)::regrole "
							  "AND starts_with(set_name, $1 || '/') AND substr(set_name, length($1) + 2) ~ '^[0-9]+$'",
							  1, types, values, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read the sets of pgdl.configs");
	taken = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("configuration set \"%s\" exists already", pgdl_echo(TextDatumGetCString(taken))),
				 errdetail("pgdl.tpe_search makes each batch a new set, \"%s/1\", \"%s/2\" and so on.",
						   pgdl_echo(name), pgdl_echo(name)),
				 errhint("Pass another set_name, or leave it NULL for a name of its own.")));
	SPI_finish();
}

static void
check_range(const char *what, int32 v, int32 max)
{
	if (v < 1 || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between 1 and %d, got %d", what, max, v)));
}

/* The arguments checked, in the order a reader meets them; nothing is stored yet. */
static void
read_args(FunctionCallInfo fcinfo, TpeSearch *t)
{
	if (PG_ARGISNULL(ARG_SOURCE) || PG_ARGISNULL(ARG_ARCHITECTURES) || PG_ARGISNULL(ARG_SPACE) ||
		PG_ARGISNULL(ARG_TRIALS) || PG_ARGISNULL(ARG_BATCH) || PG_ARGISNULL(ARG_EPOCHS) || PG_ARGISNULL(ARG_SEED))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, architectures, space, trials, batch, epochs and seed must not be NULL")));
	t->priority = mop_priority_arg(fcinfo, ARG_PRIORITY);
	mop_check_isolation();
	t->trials = PG_GETARG_INT32(ARG_TRIALS);
	check_range("trials", t->trials, PGDL_MAX_CONFIGS);
	t->batch = PG_GETARG_INT32(ARG_BATCH);
	check_range("batch", t->batch, PGDL_MAX_MODELS);
	t->epochs = PG_GETARG_INT32(ARG_EPOCHS);
	check_range("epochs", t->epochs, PGDL_MAX_EPOCHS);
	t->seed = (uint64) PG_GETARG_INT64(ARG_SEED);
	t->source = PG_GETARG_OID(ARG_SOURCE);
	(void) pgdl_dataset_by_packed(t->source);
	t->validation = PG_ARGISNULL(ARG_VALIDATION) ? InvalidOid : PG_GETARG_OID(ARG_VALIDATION);
	if (OidIsValid(t->validation))
		(void) pgdl_dataset_by_packed(t->validation);
	t->rank_by = PGDL_RANK_LOSS;
	t->rank_by_given = !PG_ARGISNULL(ARG_RANK_BY);
	if (t->rank_by_given)
		t->rank_by = pgdl_rank_metric_arg("rank_by", text_to_cstring(PG_GETARG_TEXT_PP(ARG_RANK_BY)));
	t->workers_given = !PG_ARGISNULL(ARG_WORKERS);
	t->workers = t->workers_given ? PG_GETARG_INT32(ARG_WORKERS) : 0;
	if (t->workers_given)
		check_range("workers", t->workers, PGDL_MAX_WORKERS);
	t->name_prefix = PG_ARGISNULL(ARG_NAME_PREFIX) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(ARG_NAME_PREFIX));
	t->deploy = PG_ARGISNULL(ARG_DEPLOY) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(ARG_DEPLOY));
	if (t->deploy)
		mop_check_deploy(t->deploy, OidIsValid(t->validation), false);
	t->set_name = search_name(fcinfo);
	check_sets_new(t->set_name);
	t->space = mop_space_parse(PG_GETARG_ARRAYTYPE_P(ARG_ARCHITECTURES), PG_GETARG_JSONB_P(ARG_SPACE));
	t->params = mop_space_params(t->space, &t->n_params);
	mop_space_check(t->space, t->seed, "pgdl.tpe_search");
}

/* Whether a configuration with this architecture was tried already. */
static bool
tried_before(const TpeSearch *t, Jsonb *config, int64 arch)
{
	for (int32 i = 0; i < t->n_tried; i++)
		if (t->tried[i].arch == arch && compareJsonbContainers(&t->tried[i].config->root, &config->root) == 0)
			return true;
	return false;
}

/* Room for one more point set aside or kept. */
static double *
next_taken(TpeSearch *t)
{
	if (t->n_taken == t->cap_taken)
	{
		t->cap_taken = Max(2 * t->cap_taken, 16);
		t->taken = repalloc_huge(t->taken, sizeof(double) * (Size) t->cap_taken * t->n_params);
	}
	return t->taken + (Size) t->n_taken * t->n_params;
}

/*
 * Up to n configurations not tried before, added to t->tried: drawn from the
 * space when nothing is scored yet, else TPE's; returns how many.
 */
static int32
propose_batch(TpeSearch *t, int32 n)
{
	void	   *mem = NULL;
	TpeModel   *model = NULL;
	int32		added = 0;
	int32		attempts = 0;

	/* the model's memory grows with the observations: one batch's at a time */
	if (t->n_tried > 0)
	{
		mem = palloc_extended(tpe_model_bytes(t->params, t->n_params, t->n_tried), MCXT_ALLOC_HUGE);
		model = tpe_model_build(mem, t->params, t->n_params, t->points, t->keys, t->n_tried);
	}
	while (added < n && attempts++ < TPE_ATTEMPTS_PER_TRIAL * n)
	{
		double	   *point = next_taken(t);
		uint64		trial = (uint64) t->n_taken;
		TpeTried   *c = &t->tried[t->n_tried];
		bool		found;

		CHECK_FOR_INTERRUPTS();
		found = model ? tpe_propose(model, t->seed, trial, t->taken, t->n_taken, point) :
			tpe_draw_new(t->params, t->n_params, t->seed, trial, t->taken, t->n_taken, point);
		if (!found)
			break;				/* every point of the space was proposed */
		t->n_taken++;
		c->config = mop_space_config(t->space, point, "pgdl.tpe_search", t->n_tried + 1, &c->arch);
		if (tried_before(t, c->config, c->arch))
			continue;
		memcpy(t->points + (Size) t->n_tried * t->n_params, point, sizeof(double) * t->n_params);
		t->keys[t->n_tried] = get_float8_nan();
		t->n_tried++;
		added++;
	}
	if (mem)
		pfree(mem);
	return added;
}

/* The batch's configurations (the last n tried) as the set "<set_name>/b". */
static char *
store_batch(TpeSearch *t, int32 b, int32 n)
{
	char	   *set_name = psprintf("%s/%d", t->set_name, b);
	Jsonb	  **configs = palloc(sizeof(Jsonb *) * n);
	int64	   *arch = palloc(sizeof(int64) * n);
	int64	   *ids = palloc(sizeof(int64) * n);
	TpeTried   *first = &t->tried[t->n_tried - n];

	for (int32 j = 0; j < n; j++)
	{
		configs[j] = first[j].config;
		arch[j] = first[j].arch;
	}
	(void) mop_configs_insert(cstring_to_text(set_name), arch, configs, n, ids);
	for (int32 j = 0; j < n; j++)
		first[j].config_id = ids[j];
	return set_name;
}

/* A float8 column of a leaderboard row, NULL kept apart. */
static double
row_float(HeapTuple tup, TupleDesc desc, int col, bool *isnull)
{
	Datum		d = SPI_getbinval(tup, desc, col, isnull);

	return *isnull ? get_float8_nan() : DatumGetFloat8(d);
}

/* One fit_multiple run of the set; its leaderboard's rows appended to t->rows. */
static void
train_batch(TpeSearch *t, const char *set_name, int32 b)
{
	Oid			types[8] = {REGCLASSOID, TEXTOID, INT4OID, REGCLASSOID, INT4OID, TEXTOID, INT4OID, TEXTOID};
	Datum		values[8] = {ObjectIdGetDatum(t->source), CStringGetTextDatum(set_name), Int32GetDatum(t->epochs),
		ObjectIdGetDatum(t->validation), Int32GetDatum(t->workers),
		t->name_prefix ? CStringGetTextDatum(t->name_prefix) : (Datum) 0, Int32GetDatum(t->priority),
	t->rank_by_given ? CStringGetTextDatum(pgdl_rank_metric_name(t->rank_by)) : (Datum) 0};
	char		nulls[8] = {' ', ' ', ' ', OidIsValid(t->validation) ? ' ' : 'n', t->workers_given ? ' ' : 'n',
	t->name_prefix ? ' ' : 'n', ' ', t->rank_by_given ? ' ' : 'n'};
	MemoryContext caller = CurrentMemoryContext;

	SPI_connect();
	if (SPI_execute_with_args("SELECT model, config, architecture, config_json, epochs, train_loss, train_accuracy, "
							  "validation_loss, validation_accuracy, stopped, diverged FROM pgdl.fit_multiple("
							  "$1, $2, $3, $4, workers => $5, name_prefix => $6, priority => $7, rank_by => $8)",
							  8, types, values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run pgdl.fit_multiple for batch %d", b);
	t->rows = repalloc_huge(t->rows, sizeof(TpeTrial) * (t->n_rows + SPI_processed));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(caller);
		TpeTrial   *row = &t->rows[t->n_rows++];
		bool		isnull;

		row->batch = b;
		row->model = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		row->config = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		row->architecture = TextDatumGetCString(SPI_getbinval(tup, desc, 3, &isnull));
		row->config_json = DatumGetJsonbPCopy(SPI_getbinval(tup, desc, 4, &isnull));
		row->epochs = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
		for (int m = 0; m < 4; m++)
			row->metric[m] = row_float(tup, desc, 6 + m, &row->metric_null[m]);
		row->stopped = DatumGetBool(SPI_getbinval(tup, desc, 10, &isnull));
		row->diverged = DatumGetBool(SPI_getbinval(tup, desc, 11, &isnull));
		row->key = row->score = get_float8_nan();
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
}

/* The run and stored epoch of a model the batch stored; false if its row says otherwise than expected. */
static bool
stored_epoch_of(int64 model, int32 epochs, int64 *run, int32 *epoch)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(model)};
	bool		null_run,
				null_epoch;
	Datum		r,
				e;

	SPI_connect();
	if (SPI_execute_with_args("SELECT run, (metrics->>'epoch')::integer FROM pgdl.models WHERE id = $1 "
							  "AND jsonb_typeof(metrics->'epoch') = 'number' AND (metrics->>'epoch') ~ '^[0-9]{1,9}$'",
							  1, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read model " INT64_FORMAT, model);
	if (SPI_processed != 1)
	{
		SPI_finish();
		return false;
	}
	r = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null_run);
	e = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &null_epoch);
	SPI_finish();
	if (null_run || null_epoch)
		return false;
	*run = DatumGetInt64(r);
	*epoch = DatumGetInt32(e);
	return *epoch >= 1 && *epoch <= epochs;
}

/*
 * Each new row's score: rank_by's value at its model's stored epoch, from the
 * metrics its run's workers committed (a snapshot taken now sees them); a
 * model that diverged has none.
 */
static void
score_rows(TpeSearch *t, int32 first_row)
{
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	for (int32 r = first_row; r < t->n_rows; r++)
	{
		TpeTrial   *row = &t->rows[r];
		int64		run;
		int32		epoch;
		PgdlEpochMetrics *history;
		int32		n;

		if (row->diverged || !stored_epoch_of(row->model, t->epochs, &run, &epoch))
			continue;
		n = pgdl_run_validation_history(run, row->config, epoch, &history);
		if (n < 1 || history[n - 1].epoch != epoch)
			continue;
		row->score = pgdl_epoch_rank_value(&history[n - 1], t->rank_by);
		row->key = pgdl_epoch_rank_key(&history[n - 1], t->rank_by);
	}
	PopActiveSnapshot();
	/* what TPE sees of each configuration tried */
	for (int32 i = 0; i < t->n_tried; i++)
		for (int32 r = first_row; r < t->n_rows; r++)
			if (t->tried[i].config_id == t->rows[r].config)
				t->keys[i] = t->rows[r].key;
}

static int
compare_trials(const void *a, const void *b)
{
	const TpeTrial *x = a;
	const TpeTrial *y = b;
	int			by_key = mop_compare_loss(x->key, y->key);

	if (x->diverged != y->diverged)
		return x->diverged ? 1 : -1;
	if (by_key != 0)
		return by_key;
	return x->config < y->config ? -1 : (x->config > y->config ? 1 : 0);
}

/* Every batch's models in fit_multiple's order, with their batch and score. */
static void
put_leaderboard(FunctionCallInfo fcinfo, TpeSearch *t)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	qsort(t->rows, t->n_rows, sizeof(TpeTrial), compare_trials);
	for (int32 r = 0; r < t->n_rows; r++)
	{
		TpeTrial   *row = &t->rows[r];
		Datum		values[14];
		bool		nulls[14] = {false};

		values[0] = Int32GetDatum(r + 1);
		values[1] = Int64GetDatum(row->model);
		values[2] = Int64GetDatum(row->config);
		values[3] = CStringGetTextDatum(row->architecture);
		values[4] = JsonbPGetDatum(row->config_json);
		values[5] = Int32GetDatum(row->epochs);
		for (int m = 0; m < 4; m++)
		{
			values[6 + m] = Float8GetDatum(row->metric[m]);
			nulls[6 + m] = row->metric_null[m];
		}
		values[10] = BoolGetDatum(row->stopped);
		values[11] = BoolGetDatum(row->diverged);
		values[12] = Int32GetDatum(row->batch);
		values[13] = Float8GetDatum(row->score);
		nulls[13] = isnan(row->score);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/* deploy: the leaderboard's first model, unless every one diverged. */
static void
deploy_winner(const TpeSearch *t)
{
	if (t->n_rows > 0 && !t->rows[0].diverged)
		pgdl_deploy_if_better(t->deploy, t->rows[0].model, pgdl_dataset_by_packed(t->validation), t->rank_by);
	else
		ereport(NOTICE,
				(errmsg("deployed nothing as \"%s\": every configuration diverged", pgdl_echo(t->deploy))));
}

/*
 * tpe_search(source, architectures, space, trials, batch, epochs, validation,
 * rank_by, seed, workers, set_name, name_prefix, priority, deploy)
 */
PG_FUNCTION_INFO_V1(pgdl_tpe_search);
Datum
pgdl_tpe_search(PG_FUNCTION_ARGS)
{
	TpeSearch  *t = palloc0(sizeof(TpeSearch));
	int32		b = 0;

	read_args(fcinfo, t);
	InitMaterializedSRF(fcinfo, 0);
	t->tried = palloc_extended(sizeof(TpeTried) * t->trials, MCXT_ALLOC_HUGE);
	t->points = palloc_extended(sizeof(double) * (Size) t->trials * t->n_params, MCXT_ALLOC_HUGE);
	t->keys = palloc(sizeof(double) * t->trials);
	t->taken = palloc(sizeof(double));
	t->rows = palloc(sizeof(TpeTrial));
	while (t->n_tried < t->trials)
	{
		int32		want = Min(t->batch, t->trials - t->n_tried);
		int32		n = propose_batch(t, want);
		int32		first_row = t->n_rows;
		char	   *set_name;

		if (n == 0)
		{
			ereport(NOTICE,
					(errmsg("the search space has no configuration left to try after %d of %d trials",
							t->n_tried, t->trials),
					 errdetail("Every configuration it proposed was trained already.")));
			break;
		}
		set_name = store_batch(t, ++b, n);
		train_batch(t, set_name, b);
		score_rows(t, first_row);
	}
	put_leaderboard(fcinfo, t);
	if (t->deploy)
		deploy_winner(t);
	return (Datum) 0;
}
