/*
 * crew.c -- a run's workers: how many the server's queue (jobs.c) lets the
 * run have, starting them, and, while the run goes on, giving back the slots
 * of workers that left and taking free ones for more (the server's fair
 * share); stopping them all when the run fails.
 *
 * Invariants:
 * - the run holds a slot of the queue for each worker it started, until the
 *   worker is gone (a distributed run's workers hold none: they drive nodes);
 * - a worker leaves only between two models and never as the last (worker.c),
 *   and a worker that joins later trains on the CPU: which workers there are,
 *   and when, changes no byte of the models;
 * - on an error the leader stops every worker it registered and waits until
 *   they are gone before it reports it, so that no checkpoint commits after
 *   the call has failed.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "hopper/hopper.h"
#include "hopper/leader.h"

static bool
register_worker(dsm_segment *seg, int w, BackgroundWorkerHandle **handles)
{
	char		name[BGW_MAXLEN];

	snprintf(name, sizeof(name), "pgdl worker %d for pid %d", w, MyProcPid);
	return pgdl_register_worker(seg, "pgdl_mop_worker_main", "pgdl worker", name, &w, sizeof(w), &handles[w]);
}

/* Register up to n workers on the segment; returns how many were. */
static int
register_workers(dsm_segment *seg, int n, BackgroundWorkerHandle **handles)
{
	for (int w = 0; w < n; w++)
		if (!register_worker(seg, w, handles))
			return w;
	return n;
}

/* One more worker for the run, on a slot just taken; the slot goes back if it cannot start. */
static void
add_worker(MopShared *shared, MopCrew *crew)
{
	int			w = shared->n_workers;
	MopWorker  *wk = &shared->workers[w];

	memset(wk, 0, sizeof(*wk));
	wk->server = InvalidOid;
	wk->device = PGDL_DEVICE_CPU;
	SpinLockAcquire(&shared->mutex);
	shared->n_workers = w + 1;
	SpinLockRelease(&shared->mutex);
	if (!register_worker(crew->seg, w, crew->handles))
	{
		SpinLockAcquire(&shared->mutex);
		shared->n_workers = w;
		SpinLockRelease(&shared->mutex);
		pgdl_jobs_release_one();
	}
}

/* Workers still training, with the mutex held. */
static int
count_active(const MopShared *shared)
{
	int			active = 0;

	for (int w = 0; w < shared->n_workers; w++)
		if (!shared->workers[w].retired && !shared->workers[w].finished)
			active++;
	return active;
}

/* The slots of workers that retired and are gone go back at once: a queued job is woken to take them. */
static void
release_retired(MopShared *shared, MopCrew *crew)
{
	for (int w = 0; w < shared->n_workers; w++)
	{
		pid_t		pid;

		if (shared->workers[w].retired && !crew->released[w] &&
			GetBackgroundWorkerPid(crew->handles[w], &pid) == BGWH_STOPPED)
		{
			pgdl_jobs_release_one();
			crew->released[w] = true;
		}
	}
}

/*
 * At each wake-up: give back the slots of workers that left.  As often as a
 * queued job looks (PGDL_JOBS_POLL_MS), or ten times as often while the job
 * holds fewer workers than it asked for (another job's release wakes it): ask
 * workers to leave while other jobs wait and this one holds more than its
 * fair share; take a free slot for one more worker when none waits.
 */
void
mop_crew_rebalance(MopShared *shared, MopCrew *crew)
{
	int			active;
	int			fair;
	bool		waiting;

	if (!crew->queued)
		return;
	release_retired(shared, crew);
	SpinLockAcquire(&shared->mutex);
	active = count_active(shared);
	SpinLockRelease(&shared->mutex);
	if (!TimestampDifferenceExceeds(crew->last, GetCurrentTimestamp(),
									(active < crew->wanted && crew->can_grow) ? PGDL_JOBS_POLL_MS / 10 : PGDL_JOBS_POLL_MS))
		return;
	crew->last = GetCurrentTimestamp();
	fair = pgdl_jobs_fair_share(&waiting);
	/* counted and asked under one lock: a worker leaving meanwhile is not asked for twice */
	SpinLockAcquire(&shared->mutex);
	active = count_active(shared);
	shared->retire_requests = waiting ? Max(active - fair, 0) : 0;
	SpinLockRelease(&shared->mutex);
	if (shared->retire_requests > 0)
		for (int w = 0; w < shared->n_workers; w++)
			if (shared->workers[w].proc)
				SetLatch(&shared->workers[w].proc->procLatch);
	if (!waiting && crew->can_grow && active < crew->wanted && shared->n_workers < PGDL_MAX_WORKERS &&
		pgdl_jobs_take_one())
		add_worker(shared, crew);
}

/*
 * The crew the run asks for, before any worker starts: its slots of the
 * server's queue taken (waiting there for them), unless the run is
 * distributed, whose workers drive remote nodes and are not the server's to
 * queue.
 */
void
mop_crew_init(MopCrew *crew, const MopSegment *s, int wanted, int priority)
{
	MopShared  *shared = s->shared;

	memset(crew, 0, sizeof(*crew));
	crew->seg = s->seg;
	crew->handles = palloc0(sizeof(BackgroundWorkerHandle *) * PGDL_MAX_WORKERS);
	crew->wanted = wanted;
	crew->queued = !shared->distributed;
	crew->granted = wanted;
	if (crew->queued)
		crew->granted = pgdl_jobs_acquire(wanted, false, priority, mop_predicted_seconds_left(shared, wanted));
	crew->can_grow = crew->queued;
	for (int w = 0; w < wanted; w++)
		crew->can_grow &= shared->workers[w].device == PGDL_DEVICE_CPU;
}

/*
 * Start the workers the slots allow; with fewer than wanted, their
 * partitions are dealt out again among those that started (a distributed
 * run needs them all).  They go once they know how many they are.
 */
void
mop_crew_launch(MopCrew *crew, MopShared *shared)
{
	int			wanted = crew->wanted;
	int			granted = crew->granted;
	int			launched = register_workers(crew->seg, granted, crew->handles);

	if (launched == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start any pgdl worker"),
				 errhint("Raise max_worker_processes (it also bounds parallel query workers), or wait for other workers to finish.")));
	if (launched < wanted && shared->distributed)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could start only %d of the %d pgdl workers a distributed run needs", launched, wanted),
				 errhint("Raise max_worker_processes, or lower workers_per_node.")));
	if (launched < granted)
		ereport(NOTICE,
				(errmsg("started %d of %d pgdl workers", launched, granted),
				 errhint("Raise max_worker_processes to run them all.")));
	else if (launched < wanted)
		ereport(NOTICE,
				(errmsg("started %d of %d pgdl workers", launched, wanted),
				 errdetail("This server runs at most pgdl.max_workers = %d pgdl workers at once, other jobs' included.",
						   pgdl_max_workers)));
	if (launched < wanted)
	{
		for (int p = 0; p < shared->n_partitions; p++)
			shared->owner[p] = (int16) (p % launched);
	}
	shared->n_workers = launched;
	pg_write_barrier();
	shared->go = true;
	for (int w = 0; w < launched; w++)
	{
		pid_t		pid;

		if (WaitForBackgroundWorkerStartup(crew->handles[w], &pid) != BGWH_STARTED)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
					 errmsg("pgdl worker %d could not start", w),
					 errhint("See the server log.")));
	}
}

/*
 * Stop the workers and wait until they are gone, so that no checkpoint of theirs
 * commits after the call has failed (a pgdl.resume right after must not race it).
 */
static void
stop_workers(BackgroundWorkerHandle **handles, int n)
{
	HOLD_INTERRUPTS();
	for (int w = 0; w < n; w++)
		if (handles[w])
			TerminateBackgroundWorker(handles[w]);
	for (int w = 0; w < n; w++)
		if (handles[w])
			(void) WaitForBackgroundWorkerShutdown(handles[w]);
	RESUME_INTERRUPTS();
}

/* Every handle registered, however far the launch got. */
void
mop_crew_stop(MopCrew *crew)
{
	stop_workers(crew->handles, PGDL_MAX_WORKERS);
}
