/*
 * mop.c -- pgdl.fit_multiple and pgdl.resume: the leader of a model hopper run.
 *
 * The leader validates every configuration before anything starts, lays the
 * models out in a DSM segment (shm_toc, as test_shm_mq does), starts dynamic
 * background workers (worker.c) as the calling user, and waits on its latch
 * until every model is done, a worker fails, or it is cancelled, in which case
 * it stops the workers before it reports the error.  The trained models are
 * stored in pgdl.models in the caller's transaction; the run, the per-epoch
 * metrics and the checkpoints are committed by the workers as they go, so that
 * pgdl.resume can continue a run that was cancelled or crashed.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/shm_toc.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/acl.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/wait_event.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"
#include "plan/plan.h"
#include "cluster/cluster.h"
#include "hopper/hopper.h"
#include "hopper/leader.h"

/*
 * A worker that waits for a lock the calling transaction holds (it updated or
 * locked the run's row, deleted its checkpoints, locked a packed table) would
 * wait forever, and the leader with it: a deadlock that the lock manager
 * cannot see, since the leader waits on a latch.  So the leader looks, as the
 * deadlock detector would, and ends it.
 */
static void
check_not_blocking(BackgroundWorkerHandle **handles, int n_workers)
{
	for (int w = 0; w < n_workers; w++)
	{
		pid_t		pid;
		ArrayType  *blockers;
		Datum	   *pids;
		int			n;

		if (GetBackgroundWorkerPid(handles[w], &pid) != BGWH_STARTED)
			continue;
		blockers = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids, Int32GetDatum((int32) pid)));
		deconstruct_array(blockers, INT4OID, sizeof(int32), true, TYPALIGN_INT, &pids, NULL, &n);
		for (int i = 0; i < n; i++)
			if (DatumGetInt32(pids[i]) == MyProcPid)
				ereport(ERROR,
						(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
						 errmsg("pgdl worker %d waits for a lock that the calling transaction holds", w),
						 errdetail("The transaction wrote or locked rows or tables that the run's workers write or read: "
								   "its pgdl.runs row, pgdl.run_metrics or pgdl.checkpoints rows, or its packed tables."),
						 errhint("Commit first, or call pgdl.fit_multiple and pgdl.resume in a transaction of their own.")));
	}
}

/* Wait until the workers have exited (each commits its last writes first).  Cancel-safe. */
static void
wait_for_exit(BackgroundWorkerHandle **handles, int n_workers)
{
	TimestampTz last_check = GetCurrentTimestamp();

	for (;;)
	{
		bool		all_exited = true;

		CHECK_FOR_INTERRUPTS();
		for (int w = 0; w < n_workers; w++)
		{
			pid_t		pid;

			if (GetBackgroundWorkerPid(handles[w], &pid) != BGWH_STOPPED)
				all_exited = false;
		}
		if (all_exited)
			return;
		if (TimestampDifferenceExceeds(last_check, GetCurrentTimestamp(), DeadlockTimeout))
		{
			check_not_blocking(handles, n_workers);
			last_check = GetCurrentTimestamp();
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* Wait until every model is done; errors if a worker fails or dies.  Cancel-safe. */
static void
wait_for_run(MopShared *shared, MopCrew *crew)
{
	BackgroundWorkerHandle **handles = crew->handles;

	bool		held = false;
	TimestampTz last_check = GetCurrentTimestamp();

	for (;;)
	{
		bool		all_done = true;

		CHECK_FOR_INTERRUPTS();
		/* the run is in flight until this transaction ends (lifecycle.c); worker 0 records it first */
		if (!held && shared->run_id)
		{
			pgdl_run_hold_as_leader(shared->run_id);
			held = true;
		}
		if (TimestampDifferenceExceeds(last_check, GetCurrentTimestamp(), DeadlockTimeout))
		{
			check_not_blocking(handles, shared->n_workers);
			last_check = GetCurrentTimestamp();
		}
		SpinLockAcquire(&shared->mutex);
		for (int i = 0; i < shared->n_models; i++)
			if (!mop_finished(shared->models[i].state))
				all_done = false;
		SpinLockRelease(&shared->mutex);
		if (shared->failed_worker >= 0)
			ereport(ERROR,
					(errcode(shared->error_code ? shared->error_code : ERRCODE_INTERNAL_ERROR),
					 errmsg("pgdl worker %d failed: %s", shared->failed_worker, shared->error),
					 shared->run_id ? errhint("Run " INT64_FORMAT " can continue from each model's last epoch with pgdl.resume(" INT64_FORMAT ").",
											  shared->run_id, shared->run_id) : 0));
		if (all_done)
			return;
		mop_crew_rebalance(shared, crew);
		for (int w = 0; w < shared->n_workers; w++)
		{
			pid_t		pid;

			if (GetBackgroundWorkerPid(handles[w], &pid) == BGWH_STOPPED && !shared->workers[w].finished)
			{
				if (shared->run_id)
					ereport(ERROR,
							(errcode(ERRCODE_INTERNAL_ERROR),
							 errmsg("pgdl worker %d (pid %d) exited unexpectedly", w, (int) shared->workers[w].pid),
							 errhint("See the server log; the run can continue from its last epoch with pgdl.resume(" INT64_FORMAT ").",
									 shared->run_id)));
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("pgdl worker %d (pid %d) exited unexpectedly", w, (int) shared->workers[w].pid),
						 errhint("See the server log.")));
			}
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
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

/* The pgdl.runs.config of a fit_multiple run: how pgdl.resume continues it. */
static Jsonb *
run_config_jsonb(const MopRun *run)
{
	JsonbParseState *state = NULL;

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_string(&state, "set", run->set_name);
	pgdl_jsonb_put_string(&state, "strategy", run->strategy);
	pgdl_jsonb_put_int(&state, "eta", run->eta);
	pgdl_jsonb_put_int(&state, "workers", run->workers);
	pgdl_jsonb_put_int(&state, "workers_per_node", run->workers_per_node);
	pgdl_jsonb_put_string(&state, "feature_cache", run->cache_mode);
	if (run->name_prefix)
		pgdl_jsonb_put_string(&state, "name_prefix", run->name_prefix);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/* Start the workers, let them go, and wait until the run is done; on any error, stop them first. */
static void
run_workers(MopSegment *s, int wanted, int priority)
{
	MopShared  *shared = s->shared;
	PgdlSettle *settle = pgdl_run_settle_prepare();
	MopCrew		crew;

	mop_crew_init(&crew, s, wanted, priority);
	PG_TRY();
	{
		mop_crew_launch(&crew, shared);
		pgstat_report_activity(STATE_RUNNING, "pgdl.fit_multiple: training");
		crew.last = GetCurrentTimestamp();
		wait_for_run(shared, &crew);
		wait_for_exit(crew.handles, shared->n_workers);
	}
	PG_CATCH();
	{
		shared->abort = true;
		mop_crew_stop(&crew);
		pgdl_jobs_release();
		pgdl_run_settle_arm(settle, shared->run_id, (int64) dsm_segment_handle(s->seg));
		PG_RE_THROW();
	}
	PG_END_TRY();
	pgdl_jobs_release();
	/* from here the call's transaction finishes the run; should it abort, the run is failed */
	pgdl_run_settle_arm(settle, shared->run_id, (int64) dsm_segment_handle(s->seg));
}

/* Run the prepared configurations with background workers, store the models, return the leaderboard. */
static void
mop_execute(FunctionCallInfo fcinfo, MopRun *run)
{
	MopSegment	s;

	mop_segment_create(run, run_config_jsonb(run), &s);
	restore_rungs(s.shared, run);
	resume_pending_rung(s.shared);
	run_workers(&s, run->n_workers, run->priority);
	mop_store_models(fcinfo, run, s.shared, s.blobs);
	dsm_detach(s.seg);
}

/*
 * fit_multiple(source, configs, epochs, validation, workers, strategy, eta,
 * name_prefix, feature_cache, workers_per_node, priority)
 */
PG_FUNCTION_INFO_V1(pgdl_fit_multiple);
Datum
pgdl_fit_multiple(PG_FUNCTION_ARGS)
{
	MopRun	   *run;
	int32		priority = mop_priority_arg(fcinfo, 10);

	mop_check_isolation();
	run = mop_setup_run(fcinfo);
	run->priority = priority;
	mop_execute(fcinfo, run);
	return (Datum) 0;
}

/* ---- resume ---- */

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
 * The run's settings back from its pgdl.runs.config (run_config_jsonb), every
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
	run->run_id = run_id;
	run->epochs = rec.epochs;
	run->ds = pgdl_dataset_by_id(rec.dataset);
	mop_check_partitions(run->ds);
	run->vds = rec.validation ? pgdl_dataset_by_id(rec.validation) : NULL;
	return run_config_from_jsonb(run, rec.config, per_node);
}

/*
 * Resume: early stopping's best metric and epochs without improvement, as the
 * run had them, from the validation metrics of each configuration's epochs.
 */
static void
restore_patience(MopRun *run)
{
	ListCell   *lc;

	foreach(lc, run->configs)
	{
		MopConfig  *c = lfirst(lc);
		PgdlEpochMetrics *history;
		int32		n;

		if (c->config.patience <= 0 || c->start_epoch == 0)
			continue;
		n = pgdl_run_validation_history(run->run_id, c->config_id, c->start_epoch, &history);
		for (int32 e = 0; e < n; e++)
			(void) pgdl_early_stop(&c->config, &history[e], &c->patience);
	}
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
		/* each epoch's rank key (validation loss, else training loss): the rungs it passed */
		if (run->eta > 0)
			c->epoch_key = pgdl_run_epoch_losses(run->run_id, c->config_id, c->start_epoch);
	}
}

/*
 * resume(run_id [, workers [, priority]]): continue a pgdl.fit_multiple run from each model's
 * last checkpoint.  The models end with the bytes an uninterrupted run gives.
 */
PG_FUNCTION_INFO_V1(pgdl_resume);
Datum
pgdl_resume(PG_FUNCTION_ARGS)
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
	/* workers NULL: as many as the run had */
	mop_set_workers(run, PG_NARGS() > 1 && !PG_ARGISNULL(1) ? PG_GETARG_INT32(1) : workers, per_node);
	mop_load_configs(run);
	read_resume_points(run);
	mop_prepare_configs(run);
	mop_check_methods(run);
	restore_patience(run);
	mop_plan_devices(run);
	mop_plan_caches(run);
	pgdl_cluster_check_nodes(run->worker_server, run->n_workers);
	mop_execute(fcinfo, run);
	return (Datum) 0;
}
