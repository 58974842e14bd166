/*
 * mop.c -- pgdl.fit_multiple and pgdl.resume: the leader of a model hopper run.
 *
 * The leader sets the run up (setup.c and prepare.c, or resume.c for a run to
 * continue), validating every configuration before anything starts, lays the
 * models out in a DSM segment (dsm.c), starts dynamic background workers
 * (worker.c) as the calling user (crew.c), and waits on its latch until every
 * model is done, a worker fails, or it is cancelled, in which case it stops
 * the workers before it reports the error.  The trained models are stored in
 * pgdl.models in the caller's transaction (store.c); the run, the per-epoch
 * metrics and the checkpoints are committed by the workers as they go, so that
 * pgdl.resume can continue a run that was cancelled or crashed.
 *
 * Invariants:
 * - the leader waits on a latch, where the lock manager cannot see it: a
 *   worker that waits for a lock the calling transaction holds is an error
 *   here, found as the deadlock detector would, not a hang;
 * - the call returns, or reports an error, only once every worker it started
 *   is gone, and its run is finished or failed with the call's transaction.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "catalog/catalog.h"
#include "train/train.h"
#include "models/models.h"
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

	mop_segment_create(run, mop_run_config_jsonb(run), &s);
	/* a new run's models have passed no rung: nothing to restore */
	mop_resume_rungs(s.shared, run);
	run_workers(&s, run->n_workers, run->priority);
	mop_store_models(fcinfo, run, s.shared, s.blobs);
	dsm_detach(s.seg);
}

/*
 * fit_multiple(source, configs, epochs, validation, workers, strategy, eta,
 * name_prefix, feature_cache, workers_per_node, priority, rank_by, folds, deploy)
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
	if (run->distributed)
		pgdl_node_cache_build(run->plan, run->ds);
	mop_execute(fcinfo, run);
	if (run->deploy && run->winner)
		pgdl_deploy_if_better(run->deploy, run->winner, run->vds, run->rank_by);
	else if (run->deploy)
		ereport(NOTICE,
				(errmsg("deployed nothing as \"%s\": every configuration diverged", pgdl_echo(run->deploy))));
	return (Datum) 0;
}

/*
 * resume(run_id [, workers [, priority]]): continue a pgdl.fit_multiple run from each model's
 * last checkpoint, or a pgdl.fit_federated run from its last round (cluster/federated.c).
 * The models end with the bytes an uninterrupted run gives.
 */
PG_FUNCTION_INFO_V1(pgdl_resume);
Datum
pgdl_resume(PG_FUNCTION_ARGS)
{
	PgdlRunRecord rec;

	if (!PG_ARGISNULL(0) && pgdl_run_read(PG_GETARG_INT64(0), &rec) && strcmp(rec.kind, "fit_federated") == 0)
	{
		pgdl_fit_federated_resume(fcinfo, rec.id);
		return (Datum) 0;
	}
	mop_execute(fcinfo, mop_resume_setup(fcinfo));
	return (Datum) 0;
}
