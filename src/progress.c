/*
 * progress.c -- pgdl.progress: the runs in flight, read from their shared memory.
 *
 * Each pgdl.fit_multiple run records the handle of its DSM segment in
 * pgdl.runs.progress_handle.  This attaches each running run's segment (one
 * that is gone, or that is not a pgdl run any more, is skipped), copies what it
 * needs under the run's spinlock, and detaches.
 */
#include "postgres.h"

#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "storage/shm_toc.h"
#include "utils/builtins.h"

#include "mop.h"

static const char *const state_names[] = {
	[MOP_IDLE] = "waiting", [MOP_BUSY] = "training", [MOP_RUNG] = "at rung",
	[MOP_DONE] = "done", [MOP_STOPPED] = "stopped", [MOP_DIVERGED] = "diverged"
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

static void
put_model(ReturnSetInfo *rsinfo, const MopShared *run, const MopModel *m)
{
	Datum		values[11];
	bool		nulls[11] = {false};
	int			w = m->worker;
	Oid			server = w >= 0 && w < PGDL_MAX_WORKERS ? run->workers[w].server : InvalidOid;
	ForeignServer *fs = OidIsValid(server) ? GetForeignServerExtended(server, FSV_MISSING_OK) : NULL;
	double		rate = m->seconds > 0 ? m->n / m->seconds : 0;
	int64		per_epoch = m->visit > 0 ? m->n * run->n_partitions / m->visit : 0;
	int64		left = 0;

	if (!mop_finished(m->state))
		left = per_epoch * (run->epochs - m->epoch) - m->n;
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
	values[8] = Float8GetDatum(rate > 0 && left > 0 ? left / rate : 0);
	nulls[8] = rate <= 0 || per_epoch == 0;
	values[9] = Float8GetDatum(m->last.has_validation ? m->last.validation_loss : m->last.train_loss);
	nulls[9] = m->epoch == 0;
	/* the node it trains on, over libpq (a distributed packed table) */
	values[10] = fs ? CStringGetTextDatum(fs->servername) : (Datum) 0;
	nulls[10] = m->state != MOP_BUSY || fs == NULL;
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

		for (int i = 0; copy != NULL && i < copy->n_models; i++)
			put_model(rsinfo, copy, &copy->models[i]);
	}
	return (Datum) 0;
}
