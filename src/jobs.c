/*
 * jobs.c -- one queue for the pgdl workers of the whole server.
 *
 * Every pgdl.fit_multiple or pgdl.resume call is a job.  At most
 * pgdl.max_workers pgdl workers train at once on the server, whoever started
 * them: a job holds one worker slot per worker it starts.  A slot is a lock of
 * PostgreSQL's lock manager (an advisory tag with database 0, so server-wide,
 * and no shared memory of pgdl's own: nothing needs shared_preload_libraries),
 * held by the leader's transaction, so an error, a cancel or a crash lets it
 * go.  Jobs that find no free slot queue on one more lock, the turnstile, which
 * the lock manager grants in the order it was asked for; the job at the head
 * takes the free slots (up to what it asked for) as they come, and the next
 * one moves up.  While other jobs wait, a running job that holds more than
 * its fair share gives workers back between two models (the server's slots
 * split evenly between the roles with jobs, then between a role's jobs), and
 * one that holds fewer than it asked for takes free slots when no job waits
 * (mop.c, pgdl_jobs_fair_share and pgdl_jobs_take_one).
 *
 * pgdl.jobs reads the lock table: queued and running jobs, their owners and
 * the slots they hold.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pgdl.h"

#define JOB_LOCK_SPACE		0x7067646c	/* "pgdl" */
#define JOB_SLOT_LOCK		0x7066
#define JOB_OWNER_LOCK		0x7067	/* shared, never waited for: the role a job runs as, for pgdl.jobs */
#define JOB_TURNSTILE		PGDL_MAX_WORKERS	/* the slot number past the last slot */
#define JOB_POLL_MS			100

/* The slots this backend's job holds, until pgdl_jobs_release; and the role it runs as. */
static bool held[PGDL_MAX_WORKERS];
static Oid	held_owner = InvalidOid;

static void
job_locktag(LOCKTAG *tag, int slot)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, JOB_LOCK_SPACE, (uint32) slot, JOB_SLOT_LOCK);
}

/* The slot a lock tag is, or -1 when it is none of ours; JOB_TURNSTILE for the turnstile. */
static int
job_slot_of(const LOCKTAG *tag)
{
	if (tag->locktag_type != LOCKTAG_ADVISORY || tag->locktag_field1 != InvalidOid ||
		tag->locktag_field2 != JOB_LOCK_SPACE || tag->locktag_field4 != JOB_SLOT_LOCK ||
		tag->locktag_field3 > JOB_TURNSTILE)
		return -1;
	return (int) tag->locktag_field3;
}

/* A job's owner: the role it runs as (SET ROLE included), which PGPROC does not say. */
static void
owner_locktag(LOCKTAG *tag, Oid role)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, JOB_LOCK_SPACE, (uint32) role, JOB_OWNER_LOCK);
}

static bool
job_lock(int slot, bool wait)
{
	LOCKTAG		tag;

	job_locktag(&tag, slot);
	return LockAcquire(&tag, ExclusiveLock, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

static void
job_unlock(int slot)
{
	LOCKTAG		tag;

	job_locktag(&tag, slot);
	LockRelease(&tag, ExclusiveLock, false);
}

/* Jobs ahead of this backend: the one at the turnstile and those waiting for it. */
static int
jobs_queued(void)
{
	LockData   *data = GetLockStatusData();
	int			n = 0;

	for (int i = 0; i < data->nelements; i++)
	{
		LockInstanceData *l = &data->locks[i];

		if (l->pid != MyProcPid && job_slot_of(&l->locktag) == JOB_TURNSTILE &&
			(l->holdMask != 0 || l->waitLockMode != NoLock))
			n++;
	}
	return n;
}

static int
slots_held(void)
{
	int			n = 0;

	for (int s = 0; s < PGDL_MAX_WORKERS; s++)
		n += held[s];
	return n;
}

/* Takes free slots, up to `wanted` held in all; returns how many are held. */
static int
take_free_slots(int wanted)
{
	int			n = slots_held();

	for (int s = 0; s < pgdl_max_workers && n < wanted; s++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!held[s] && job_lock(s, false))
		{
			held[s] = true;
			n++;
		}
	}
	return n;
}

/*
 * Wait in the server's queue for worker slots: returns how many this job may
 * start, between `least` (all of `wanted` for a run that needs every worker it
 * asked for) and `wanted`, capped by pgdl.max_workers.  The slots are this
 * transaction's until pgdl_jobs_release.
 */
int
pgdl_jobs_acquire(int wanted, bool need_all)
{
	int			least;
	int			n;
	bool		told = false;

	LOCKTAG		tag;

	memset(held, 0, sizeof(held));
	held_owner = GetUserId();
	owner_locktag(&tag, held_owner);
	(void) LockAcquire(&tag, ShareLock, false, false);
	if (need_all && wanted > pgdl_max_workers)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("this run needs %d pgdl workers at once, more than pgdl.max_workers (%d)",
						wanted, pgdl_max_workers),
				 errhint("Raise pgdl.max_workers, or lower workers_per_node.")));
	wanted = Min(wanted, pgdl_max_workers);
	least = need_all ? wanted : 1;

	if (!job_lock(JOB_TURNSTILE, false))
	{
		int			ahead = jobs_queued();

		ereport(NOTICE,
				(errmsg_plural("pgdl job queued behind %d other job", "pgdl job queued behind %d other jobs",
							   ahead, ahead),
				 errdetail("At most pgdl.max_workers = %d pgdl workers train at once on this server.",
						   pgdl_max_workers),
				 errhint("pgdl.jobs shows the queue; cancelling this statement withdraws the job.")));
		told = true;
		pgstat_report_activity(STATE_RUNNING, "pgdl job: queued");
		(void) job_lock(JOB_TURNSTILE, true);
	}
	while ((n = take_free_slots(wanted)) < least)
	{
		if (!told)
		{
			ereport(NOTICE,
					(errmsg("pgdl job waiting for a worker: all %d are busy", pgdl_max_workers),
					 errdetail("At most pgdl.max_workers = %d pgdl workers train at once on this server.",
							   pgdl_max_workers),
					 errhint("pgdl.jobs shows the queue; cancelling this statement withdraws the job.")));
			told = true;
			pgstat_report_activity(STATE_RUNNING, "pgdl job: queued");
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 JOB_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	job_unlock(JOB_TURNSTILE);
	return n;
}

/* Gives the job's slots back (an aborted transaction has already). */
void
pgdl_jobs_release(void)
{
	if (OidIsValid(held_owner))
	{
		LOCKTAG		tag;

		owner_locktag(&tag, held_owner);
		LockRelease(&tag, ShareLock, false);
		held_owner = InvalidOid;
	}
	for (int s = 0; s < PGDL_MAX_WORKERS; s++)
		if (held[s])
		{
			job_unlock(s);
			held[s] = false;
		}
}

/* Gives one of the job's slots back: a worker of it has left its run early. */
void
pgdl_jobs_release_one(void)
{
	for (int s = PGDL_MAX_WORKERS - 1; s >= 0; s--)
		if (held[s])
		{
			job_unlock(s);
			held[s] = false;
			return;
		}
}

/* One more slot for a running job, when no job waits for one (none holds the turnstile). */
bool
pgdl_jobs_take_one(void)
{
	int			n = slots_held();
	bool		taken;

	if (n >= pgdl_max_workers || !job_lock(JOB_TURNSTILE, false))
		return false;
	taken = take_free_slots(n + 1) > n;
	job_unlock(JOB_TURNSTILE);
	return taken;
}

/* ---- pgdl.jobs ---- */

typedef struct JobRow
{
	int			pid;
	int			workers;
	bool		at_turnstile;	/* holds it: first in the queue */
	TimestampTz waiting_since;	/* 0: not waiting for the turnstile */
	int64		run;
	Oid			owner;
} JobRow;

static JobRow *
job_row(JobRow *rows, int *n, int pid)
{
	for (int i = 0; i < *n; i++)
		if (rows[i].pid == pid)
			return &rows[i];
	memset(&rows[*n], 0, sizeof(JobRow));
	rows[*n].pid = pid;
	return &rows[(*n)++];
}

/* The jobs in the lock table, and the run each running job leads. */
static JobRow *
collect_jobs(LockData *data, int *n)
{
	JobRow	   *rows = palloc0(sizeof(JobRow) * Max(data->nelements, 1));

	*n = 0;
	for (int i = 0; i < data->nelements; i++)
	{
		LockInstanceData *l = &data->locks[i];
		int			slot = job_slot_of(&l->locktag);
		JobRow	   *r;

		if (slot < 0 || (l->holdMask == 0 && l->waitLockMode == NoLock))
			continue;
		r = job_row(rows, n, l->pid);
		if (slot < JOB_TURNSTILE)
			r->workers += l->holdMask != 0;
		else if (l->holdMask != 0)
			r->at_turnstile = true;
		else
			r->waiting_since = l->waitStart ? l->waitStart : GetCurrentTimestamp();
	}
	for (int i = 0; i < data->nelements; i++)
	{
		LockInstanceData *l = &data->locks[i];
		const LOCKTAG *t = &l->locktag;
		int64		run = pgdl_run_of_leader_lock(t);
		bool		owner = t->locktag_type == LOCKTAG_ADVISORY && t->locktag_field1 == InvalidOid &&
			t->locktag_field2 == JOB_LOCK_SPACE && t->locktag_field4 == JOB_OWNER_LOCK;

		for (int j = 0; (run != 0 || owner) && l->holdMask != 0 && j < *n; j++)
			if (rows[j].pid == l->pid)
			{
				if (run != 0)
					rows[j].run = run;
				else
					rows[j].owner = (Oid) t->locktag_field3;
			}
	}
	return rows;
}

/* Place in the queue: 1 at the turnstile, then by the time each began waiting; 0 for a running job. */
static int
queue_position(const JobRow *rows, int n, const JobRow *r)
{
	int			ahead = 0;

	if (r->workers > 0)
		return 0;
	if (r->at_turnstile)
		return 1;
	for (int i = 0; i < n; i++)
		if (rows[i].workers == 0 &&
			(rows[i].at_turnstile ||
			 (rows[i].waiting_since != 0 &&
			  (rows[i].waiting_since < r->waiting_since ||
			   (rows[i].waiting_since == r->waiting_since && rows[i].pid < r->pid)))))
			ahead++;
	return ahead + 1;
}

/*
 * The workers this backend's running job should hold while other jobs wait:
 * pgdl.max_workers split evenly between the roles that have jobs, then between
 * a role's jobs; at least one.  *others_waiting: whether any other job waits.
 */
int
pgdl_jobs_fair_share(bool *others_waiting)
{
	/* called twice a second for a whole run: the lock table's copy goes with this context */
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl fair share", ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	JobRow	   *rows;
	Oid			roles[2 * PGDL_MAX_WORKERS + 64];
	int			n,
				n_roles = 0,
				mine = 0,
				share;

	rows = collect_jobs(GetLockStatusData(), &n);
	*others_waiting = false;
	for (int i = 0; i < n; i++)
	{
		bool		known = false;

		if (rows[i].pid != MyProcPid && rows[i].workers == 0)
			*others_waiting = true;
		if (rows[i].owner == held_owner)
			mine++;
		for (int r = 0; r < n_roles; r++)
			known |= roles[r] == rows[i].owner;
		if (!known && n_roles < lengthof(roles))
			roles[n_roles++] = rows[i].owner;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	share = pgdl_max_workers / Max(n_roles, 1) / Max(mine, 1);
	return Max(share, 1);
}

PG_FUNCTION_INFO_V1(pgdl_job_rows);
Datum
pgdl_job_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LockData   *data;
	JobRow	   *rows;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	data = GetLockStatusData();
	rows = collect_jobs(data, &n);
	for (int i = 0; i < n; i++)
	{
		JobRow	   *r = &rows[i];
		PGPROC	   *proc = BackendPidGetProc(r->pid);
		Datum		values[8];
		bool		nulls[8] = {0};
		char	   *dbname;
		int			position;

		CHECK_FOR_INTERRUPTS();
		if (proc == NULL)
			continue;			/* ended since the lock table was read */
		dbname = get_database_name(proc->databaseId);
		position = queue_position(rows, n, r);
		values[0] = Int32GetDatum(r->pid);
		values[1] = ObjectIdGetDatum(OidIsValid(r->owner) ? r->owner : proc->roleId);
		values[2] = CStringGetTextDatum(dbname ? dbname : "");
		nulls[2] = dbname == NULL;
		values[3] = CStringGetTextDatum(position == 0 ? "running" : "queued");
		values[4] = Int32GetDatum(position);
		nulls[4] = position == 0;
		values[5] = Int32GetDatum(r->workers);
		values[6] = TimestampTzGetDatum(r->waiting_since);
		nulls[6] = r->waiting_since == 0;
		values[7] = Int64GetDatum(r->run);
		nulls[7] = r->run == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
