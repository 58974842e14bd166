/*
 * resume.c -- what pgdl.resume continues a run from: the run's settings
 * (pgdl.runs.config, written here when a run starts and read back here,
 * every value checked, since the row may have been changed since), each
 * model's last checkpoint and metrics, the losses at the rungs it passed and
 * early stopping's count, from the run record (catalog/runs.c).  pgdl.resume
 * itself is beside pgdl.fit_multiple in mop.c: from here on, a resumed run is
 * led as a new one is.
 *
 * Invariants:
 * - a resumed run's models end with the bytes an uninterrupted run gives,
 *   with any number of workers: each model goes on from its last checkpoint,
 *   at the epoch after it, in its own partition order;
 * - halving decides a rung from the models' losses there only, so a rung
 *   decided before the run stopped is decided the same way again;
 * - early stopping goes on counting from the epochs before, as the run had it.
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "train/train.h"
#include "cluster/cluster.h"
#include "hopper/hopper.h"
#include "hopper/leader.h"

/* The pgdl.runs.config of a fit_multiple run: how pgdl.resume continues it. */
Jsonb *
mop_run_config_jsonb(const MopRun *run)
{
	JsonbParseState *state = NULL;

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_string(&state, "set", run->set_name);
	pgdl_jsonb_put_string(&state, "strategy", run->strategy);
	pgdl_jsonb_put_int(&state, "eta", run->eta);
	pgdl_jsonb_put_int(&state, "workers", run->workers);
	pgdl_jsonb_put_int(&state, "workers_per_node", run->workers_per_node);
	pgdl_jsonb_put_string(&state, "feature_cache", run->cache_mode);
	if (run->rank_by != PGDL_RANK_LOSS)
		pgdl_jsonb_put_string(&state, "rank_by", pgdl_rank_metric_name(run->rank_by));
	if (run->name_prefix)
		pgdl_jsonb_put_string(&state, "name_prefix", run->name_prefix);
	if (run->folds)
		pgdl_jsonb_put_bool(&state, "folds", true);
	if (run->time_limit > 0)
		pgdl_jsonb_put_float8(&state, "time_limit", run->time_limit);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

static void
bad_run_config(int64 run_id, const char *key, const char *expected) pg_attribute_noreturn();

static void
bad_run_config(int64 run_id, const char *key, const char *expected)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("run " INT64_FORMAT " has an invalid configuration", run_id),
			 errdetail("Key \"%s\" of its pgdl.runs.config must be %s.", key, expected)));
}

/* A string of the run's config; dflt when the key is absent (or null, when dflt is NULL). */
static char *
run_config_string(int64 run_id, Jsonb *cfg, const char *key, const char *dflt)
{
	JsonbValue *v = pgdl_jsonb_key(&cfg->root, key);

	if (v == NULL || (v->type == jbvNull && dflt == NULL))
		return (char *) dflt;
	if (v->type != jbvString)
		bad_run_config(run_id, key, "a string");
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* An integer of the run's config within [min, max]; dflt when the key is absent. */
static int32
run_config_int(int64 run_id, Jsonb *cfg, const char *key, int32 min, int32 max, int32 dflt)
{
	JsonbValue *v = pgdl_jsonb_key(&cfg->root, key);
	bool		error = false;
	int32		i;

	if (v == NULL)
		return dflt;
	if (v->type == jbvNumeric)
	{
		i = numeric_int4_opt_error(v->val.numeric, &error);
		if (!error && i >= min && i <= max &&
			DatumGetBool(DirectFunctionCall2(numeric_eq, NumericGetDatum(v->val.numeric),
											 NumericGetDatum(int64_to_numeric(i)))))
			return i;
	}
	bad_run_config(run_id, key, psprintf("an integer between %d and %d", min, max));
}

/*
 * The run's settings back from its pgdl.runs.config (mop_run_config_jsonb), every
 * value checked: the row may have been changed since.  Returns its workers.
 */
static int32
run_config_from_jsonb(MopRun *run, Jsonb *cfg, int32 *per_node)
{
	int64		id = run->run_id;
	bool		halving;

	run->set_name = run_config_string(id, cfg, "set", NULL);
	if (run->set_name == NULL)
		bad_run_config(id, "set", "the name of a configuration set");
	/* folds write no checkpoints (worker.c): nothing to continue from */
	if (pgdl_jsonb_key(&cfg->root, "folds") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("run " INT64_FORMAT " is a cross-validation and cannot be resumed", id),
				 errdetail("pgdl.fit_multiple(..., folds => true) keeps no checkpoints."),
				 errhint("Run pgdl.fit_multiple(..., folds => true) again: its models come out the same.")));
	run->strategy = run_config_string(id, cfg, "strategy", "all");
	if (!mop_strategy_by_name(run->strategy, &run->strat))
		bad_run_config(id, "strategy", "'all', 'successive_halving', 'hyperband' or 'asha'");
	halving = run->strat != MOP_ALL;
	run->eta = run_config_int(id, cfg, "eta", halving ? MOP_MIN_ETA : 0, MOP_MAX_ETA, 0);
	if (!halving)
		run->eta = 0;			/* 'all' has no rungs */
	run->name_prefix = run_config_string(id, cfg, "name_prefix", NULL);
	run->cache_mode = run_config_string(id, cfg, "feature_cache", "auto");
	if (!mop_is_cache_mode(run->cache_mode))
		bad_run_config(id, "feature_cache", "'auto', 'on' or 'off'");
	if (!pgdl_rank_metric_parse(run_config_string(id, cfg, "rank_by", "loss"), &run->rank_by))
		bad_run_config(id, "rank_by", psprintf("one of %s", pgdl_rank_metric_list()));
	*per_node = run_config_int(id, cfg, "workers_per_node", 1, PGDL_MAX_WORKERS, 1);
	return run_config_int(id, cfg, "workers", 1, PGDL_MAX_WORKERS, 1);
}

/* The run to continue, checked; returns the workers it ran with. */
static int32
read_run(MopRun *run, int64 run_id, int32 *per_node)
{
	PgdlRunRecord rec;

	if (!pgdl_run_read(run_id, &rec))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("run " INT64_FORMAT " does not exist", run_id)));
	if (strcmp(rec.kind, "fit_multiple") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("run " INT64_FORMAT " is not a pgdl.fit_multiple run", run_id)));
	if (rec.status == PGDL_RUN_FINISHED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run " INT64_FORMAT " has finished", run_id)));
	if (rec.dataset == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the packed table of run " INT64_FORMAT " no longer exists", run_id)));
	pgdl_run_warn_engine(&rec);
	run->run_id = run_id;
	run->epochs = rec.epochs;
	run->ds = pgdl_dataset_by_id(rec.dataset);
	mop_check_partitions(run->ds);
	run->vds = rec.validation ? pgdl_dataset_by_id(rec.validation) : NULL;
	return run_config_from_jsonb(run, rec.config, per_node);
}

/* Each model's last checkpoint and metrics, and whether it was stopped at a rung. */
static void
read_resume_points(MopRun *run)
{
	ListCell   *lc;

	foreach(lc, run->configs)
	{
		MopConfig  *c = lfirst(lc);
		PgdlResumePoint point;

		pgdl_run_resume_point(run->run_id, c->config_id, run->epochs, &point);
		c->start_epoch = point.epoch;
		c->start = point.weights;
		c->stopped = point.stopped;
		c->has_metrics = point.has_metrics;
		c->last = point.metrics;
	}
}

/* resume's rank_by: NULL keeps the run's; another than the run's would rank its rungs two ways */
static void
check_rank_by(FunctionCallInfo fcinfo, const MopRun *run)
{
	PgdlRankMetric given;

	if (PG_NARGS() <= 3 || PG_ARGISNULL(3))
		return;
	given = pgdl_rank_metric_arg("rank_by", text_to_cstring(PG_GETARG_TEXT_PP(3)));
	if (given != run->rank_by)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("run " INT64_FORMAT " ranks by \"%s\", not \"%s\"", run->run_id,
						pgdl_rank_metric_name(run->rank_by), pgdl_rank_metric_name(given)),
				 errdetail("Its rungs were decided by \"%s\" and its epochs measured for it.",
						   pgdl_rank_metric_name(run->rank_by)),
				 errhint("Omit rank_by to resume the run as it was started.")));
}

/*
 * Resume: from each configuration's recorded epochs, its rank key at each
 * (the rungs it passed), and early stopping's best epoch and epochs without
 * improvement as the run had them (restore_best's epoch with them).
 */
static void
restore_history(MopRun *run)
{
	ListCell   *lc;

	foreach(lc, run->configs)
	{
		MopConfig  *c = lfirst(lc);
		PgdlEpochMetrics *history;
		int32		n;

		if (c->start_epoch == 0)
			continue;
		n = pgdl_run_validation_history(run->run_id, c->config_id, c->start_epoch, &history);
		if (run->eta > 0)
		{
			c->epoch_key = palloc(sizeof(double) * (c->start_epoch + 1));
			for (int32 e = 0; e <= c->start_epoch; e++)
				c->epoch_key[e] = get_float8_nan();
			for (int32 e = 0; e < n; e++)
				if (!history[e].diverged)
					c->epoch_key[history[e].epoch] = pgdl_epoch_rank_key(&history[e], run->rank_by);
		}
		if (c->config.patience > 0 || c->config.restore_best)
			for (int32 e = 0; e < n; e++)
				(void) pgdl_early_stop(&c->config, &history[e], &c->patience);
	}
}

/*
 * Resume: each model's losses at the rungs it passed (asha compares them with
 * the models that arrive later), from its metrics rows.
 */
static void
restore_rungs(MopShared *shared, const MopRun *run)
{
	for (int i = 0; i < shared->n_models; i++)
	{
		MopModel   *m = &shared->models[i];
		MopConfig  *c = list_nth(run->configs, i);

		for (int32 r = 0; r < m->bracket && c->epoch_key; r++)
		{
			int32		e = mop_rung_epoch(shared, m->bracket, r);

			if (e <= c->start_epoch && !isnan(c->epoch_key[e]))
			{
				m->rung_key[r] = c->epoch_key[e];
				m->rung_known |= 1u << r;
			}
		}
	}
}

/*
 * A run stopped while models waited at a rung: put them back at the rung and
 * decide what can be, as the last of them would have (the decisions depend
 * only on the losses, so a rung decided before is decided the same way).
 */
static void
resume_pending_rung(MopShared *shared)
{
	MopDecisions *d = mop_decisions_alloc(shared->n_models);

	for (int i = 0; i < shared->n_models; i++)
	{
		MopModel   *m = &shared->models[i];

		if (m->state == MOP_IDLE && m->epoch > 0 && mop_rung_of(shared, m, m->epoch) >= 0)
			m->state = MOP_RUNG;
	}
	if (mop_decide(shared, d))
		mop_record_decisions(shared, d);
}

/* In the segment: the rungs each model passed, then the decisions a stopped run left pending. */
void
mop_resume_rungs(MopShared *shared, const MopRun *run)
{
	restore_rungs(shared, run);
	resume_pending_rung(shared);
}

/*
 * pgdl.resume(run_id [, workers [, priority]]): the run, its settings and its
 * configurations back from the catalog and checked, each from its last
 * checkpoint; the rest as fit_multiple sets a run up.
 */
MopRun *
mop_resume_setup(FunctionCallInfo fcinfo)
{
	MopRun	   *run = palloc0(sizeof(MopRun));
	int32		workers;
	int32		per_node;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("run must not be NULL")));
	run->priority = mop_priority_arg(fcinfo, 2);
	mop_check_isolation();
	pgdl_engine_prepare();
	/* the run is this call's (or in progress) before it is read: one that finished meanwhile reads finished */
	pgdl_run_claim(PG_GETARG_INT64(0));
	workers = read_run(run, PG_GETARG_INT64(0), &per_node);
	check_rank_by(fcinfo, run);
	/* workers NULL: as many as the run had */
	mop_set_workers(run, PG_NARGS() > 1 && !PG_ARGISNULL(1) ? PG_GETARG_INT32(1) : workers, per_node);
	mop_load_configs(run);
	read_resume_points(run);
	mop_prepare_configs(run);
	mop_check_methods(run);
	restore_history(run);
	mop_plan_devices(run);
	mop_plan_caches(run);
	mop_plan_paces(run);
	return run;
}
