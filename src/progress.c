/*
 * progress.c -- pgdl.progress: the runs in flight, read from their shared memory.
 *
 * Each pgdl.fit_multiple run records the handle of its DSM segment in
 * pgdl.runs.progress_handle.  This attaches each running run's segment (one
 * that is gone, or that is not a pgdl run any more, is skipped), copies what it
 * needs under the run's spinlock, and detaches.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "storage/shm_toc.h"
#include "utils/builtins.h"

#include "mop.h"

static const char *const state_names[] = {
	[MOP_IDLE] = "waiting", [MOP_BUSY] = "training", [MOP_RUNG] = "at rung",
	[MOP_DONE] = "done", [MOP_STOPPED] = "stopped"
};

PG_FUNCTION_INFO_V1(pgdl_progress);
Datum
pgdl_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64	   *runs;
	int64	   *handles;
	uint64		n_runs;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	if (SPI_execute("SELECT id, progress_handle FROM pgdl.runs WHERE status = 'running' "
					"AND progress_handle IS NOT NULL ORDER BY id", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read pgdl.runs");
	n_runs = SPI_processed;
	runs = palloc(sizeof(int64) * (n_runs + 1));
	handles = palloc(sizeof(int64) * (n_runs + 1));
	for (uint64 r = 0; r < n_runs; r++)
	{
		bool		isnull;

		runs[r] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull));
		handles[r] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &isnull));
	}
	SPI_finish();

	for (uint64 r = 0; r < n_runs; r++)
	{
		dsm_segment *seg = dsm_find_mapping((dsm_handle) handles[r]);
		bool		attached_here = false;
		shm_toc    *toc;
		MopShared  *shared;
		MopShared  *copy;
		Size		size;

		if (seg == NULL)
		{
			seg = dsm_attach((dsm_handle) handles[r]);
			if (seg == NULL)
				continue;		/* the run ended without saying so: crashed or cancelled */
			attached_here = true;
		}
		toc = shm_toc_attach(MOP_MAGIC, dsm_segment_address(seg));
		shared = toc ? shm_toc_lookup(toc, MOP_KEY_SHARED, true) : NULL;
		if (shared == NULL || shared->magic != MOP_MAGIC || shared->run_id != runs[r] ||
			shared->n_models < 1 || shared->n_models > PGDL_MAX_MODELS)
		{
			if (attached_here)
				dsm_detach(seg);
			continue;
		}
		size = MOP_SHARED_SIZE(shared->n_models);
		copy = palloc(size);
		SpinLockAcquire(&shared->mutex);
		memcpy(copy, shared, size);
		SpinLockRelease(&shared->mutex);
		if (attached_here)
			dsm_detach(seg);

		for (int i = 0; i < copy->n_models; i++)
		{
			MopModel   *m = &copy->models[i];
			Datum		values[10];
			bool		nulls[10] = {false};
			int			w = m->worker;
			double		rate = m->seconds > 0 ? m->n / m->seconds : 0;
			int64		per_epoch = m->visit > 0 ? m->n * copy->n_partitions / m->visit : 0;
			int64		left = 0;

			if (m->state != MOP_DONE && m->state != MOP_STOPPED)
				left = per_epoch * (copy->epochs - m->epoch) - m->n;
			values[0] = Int64GetDatum(copy->run_id);
			values[1] = Int64GetDatum(m->config_id);
			values[2] = CStringGetTextDatum(state_names[m->state]);
			values[3] = Int32GetDatum(Min(m->epoch + 1, copy->epochs));
			values[4] = Int32GetDatum(m->visit);
			values[5] = Int32GetDatum(m->partition);
			nulls[5] = m->state != MOP_BUSY;
			values[6] = Int32GetDatum(w >= 0 && w < PGDL_MAX_WORKERS ? copy->workers[w].pid : 0);
			nulls[6] = m->state != MOP_BUSY;
			values[7] = Float8GetDatum(rate);
			nulls[7] = rate <= 0;
			/* the model's own rate; with no rate yet, no estimate */
			values[8] = Float8GetDatum(rate > 0 && left > 0 ? left / rate : 0);
			nulls[8] = rate <= 0 || per_epoch == 0;
			values[9] = Float8GetDatum(m->has_validation ? m->validation_loss : m->train_loss);
			nulls[9] = m->epoch == 0;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}
