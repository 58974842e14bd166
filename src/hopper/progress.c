/*
 * progress.c -- pgdl.progress: the runs in flight, read from their shared memory.
 *
 * Each pgdl.fit_multiple run records the handle of its DSM segment in
 * pgdl.runs.progress_handle.  This attaches each running run's segment (one
 * that is gone, or that is not a pgdl run any more, is skipped), copies what it
 * needs under the run's spinlock, and detaches.  The calls that run in one
 * backend (pgdl.fit, pgdl.pack, ...) follow, from call_progress.c.
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "storage/shm_toc.h"
#include "utils/builtins.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "hopper/hopper.h"

static const char *const state_names[] = {
	[MOP_IDLE] = "waiting", [MOP_BUSY] = "training", [MOP_RUNG] = "at rung",
	[MOP_DONE] = "done", [MOP_STOPPED] = "stopped", [MOP_DIVERGED] = "diverged",
	/* its next epoch waits for a worker, as an idle model's does */
	[MOP_EVALUATE] = "waiting"
};

/*
 * A copy of run `run`'s shared state, taken under its spinlock, or NULL when
 * its segment is gone (the run ended without saying so: crashed or cancelled)
 * or is not that run's.
 */
static MopShared *
copy_run(int64 run, dsm_handle handle)
{
	dsm_segment *seg = dsm_find_mapping(handle);
	bool		attached_here = false;
	shm_toc    *toc;
	MopShared  *shared;
	MopShared  *copy = NULL;

	if (seg == NULL)
	{
		seg = dsm_attach(handle);
		if (seg == NULL)
			return NULL;
		attached_here = true;
	}
	toc = shm_toc_attach(MOP_MAGIC, dsm_segment_address(seg));
	shared = toc ? shm_toc_lookup(toc, MOP_KEY_SHARED, true) : NULL;
	if (shared != NULL && shared->magic == MOP_MAGIC && shared->run_id == run &&
		shared->n_models >= 1 && shared->n_models <= PGDL_MAX_MODELS)
	{
		Size		size = MOP_SHARED_SIZE(shared->n_models);

		copy = palloc(size);
		SpinLockAcquire(&shared->mutex);
		memcpy(copy, shared, size);
		SpinLockRelease(&shared->mutex);
	}
	if (attached_here)
		dsm_detach(seg);
	return copy;
}

/* Examples model m has yet to train, and its rate; false when it has no rate yet. */
static bool
model_work_left(const MopShared *run, const MopModel *m, int64 *left, double *rate)
{
	int64		per_epoch = m->visit > 0 ? m->n * run->n_partitions / m->visit : 0;

	*rate = m->seconds > 0 ? m->n / m->seconds : 0;
	*left = mop_finished(m->state) ? 0 : per_epoch * (run->epochs - m->epoch) - m->n;
	return *rate > 0 && per_epoch > 0;
}

/*
 * The whole run's seconds left: every unfinished model's work at its own
 * rate, shared by the workers (each trains one model at a time); negative
 * while a model has no rate yet.  Successive halving may stop models sooner.
 */
static double
run_seconds_left(const MopShared *run)
{
	double		seconds = 0;

	for (int i = 0; i < run->n_models; i++)
	{
		int64		left;
		double		rate;

		if (mop_finished(run->models[i].state))
			continue;
		if (!model_work_left(run, &run->models[i], &left, &rate))
			return -1;
		seconds += Max(left, 0) / rate;
	}
	return seconds / Max(run->n_workers, 1);
}

/*
 * The seconds run `run_id` has left as the calibrated estimate predicts them
 * (pgdl.jobs, mop_predicted_seconds_left); negative when the run is not in
 * flight or a model has no prediction.
 */
double
pgdl_run_predicted_seconds_left(int64 run_id, int workers)
{
	int64	   *runs;
	int64	   *handles;
	int64		n_runs = pgdl_run_list_running(&runs, &handles);

	for (int64 r = 0; r < n_runs; r++)
	{
		MopShared  *copy;

		if (runs[r] != run_id)
			continue;
		copy = copy_run(run_id, (dsm_handle) handles[r]);
		if (copy == NULL)
			return -1;
		return mop_predicted_seconds_left(copy, workers);
	}
	return -1;
}

static void
put_model(ReturnSetInfo *rsinfo, const MopShared *run, const MopModel *m, double run_left)
{
	Datum		values[PGDL_PROGRESS_COLUMNS];
	bool		nulls[PGDL_PROGRESS_COLUMNS] = {false};
	int			w = m->worker;
	Oid			server = w >= 0 && w < PGDL_MAX_WORKERS ? run->workers[w].server : InvalidOid;
	ForeignServer *fs = OidIsValid(server) ? GetForeignServerExtended(server, FSV_MISSING_OK) : NULL;
	double		rate;
	int64		left;
	bool		known = model_work_left(run, m, &left, &rate);

	values[0] = Int64GetDatum(run->run_id);
	values[1] = Int64GetDatum(m->config_id);
	values[2] = CStringGetTextDatum(state_names[m->state]);
	values[3] = Int32GetDatum(Min(m->epoch + 1, run->epochs));
	values[4] = Int32GetDatum(m->visit);
	values[5] = Int32GetDatum(m->partition);
	nulls[5] = m->state != MOP_BUSY;
	values[6] = Int32GetDatum(w >= 0 && w < PGDL_MAX_WORKERS ? run->workers[w].pid : 0);
	nulls[6] = m->state != MOP_BUSY;
	values[7] = Float8GetDatum(rate);
	nulls[7] = rate <= 0;
	/* the model's own rate; with no rate yet, no estimate */
	values[8] = Float8GetDatum(known && left > 0 ? left / rate : 0);
	nulls[8] = !known;
	values[9] = Float8GetDatum(m->last.has_validation ? m->last.validation_loss : m->last.train_loss);
	nulls[9] = m->epoch == 0;
	/* the node it trains on, over libpq (a distributed packed table) */
	values[10] = fs ? CStringGetTextDatum(fs->servername) : (Datum) 0;
	nulls[10] = m->state != MOP_BUSY || fs == NULL;
	values[11] = CStringGetTextDatum("fit_multiple");
	values[12] = values[2];
	values[13] = Int32GetDatum(run->leader_pid);
	nulls[14] = true;			/* target */
	values[15] = Int64GetDatum(m->visit);
	values[16] = Int64GetDatum(run->n_partitions);
	values[17] = CStringGetTextDatum("partitions");
	values[18] = Float8GetDatum(run_left);
	nulls[18] = run_left < 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

PG_FUNCTION_INFO_V1(pgdl_progress);
Datum
pgdl_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64	   *runs;
	int64	   *handles;
	int64		n_runs;

	InitMaterializedSRF(fcinfo, 0);
	n_runs = pgdl_run_list_running(&runs, &handles);
	for (int64 r = 0; r < n_runs; r++)
	{
		MopShared  *copy = copy_run(runs[r], (dsm_handle) handles[r]);

		double		run_left = copy ? run_seconds_left(copy) : 0;

		for (int i = 0; copy != NULL && i < copy->n_models; i++)
			put_model(rsinfo, copy, &copy->models[i], run_left);
	}
	pgdl_call_progress_rows(rsinfo);
	return (Datum) 0;
}
