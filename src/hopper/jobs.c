/*
 * jobs.c -- one queue for the pgdl workers of the whole server.
 *
 * Every pgdl.fit_multiple or pgdl.resume call is a job.  At most
 * pgdl.max_workers pgdl workers train at once on the server, whoever started
 * them: a job holds one worker slot per worker it starts.  A slot is a lock of
 * PostgreSQL's lock manager (an advisory tag with database 0, so server-wide,
 * and no shared memory of pgdl's own: nothing needs shared_preload_libraries),
 * held by the leader's transaction, so an error, a cancel or a crash lets it
 * go.  A job queues until it has a slot: it holds a ticket (a lock whose
 * tag is the time it queued) and its priority (another lock) and looks at the
 * lock table every 100 ms, and at once when another job lets a slot or the
 * turnstile go (that job sets the latches of the other jobs' backends).  The
 * queue is the tickets in the order they were taken, except that each role's
 * own jobs swap places among the places that role holds, higher priority
 * first (ties: the earlier ticket), so that a role's priorities never move it
 * ahead of another role's jobs.  The job at the head takes one more lock, the
 * turnstile, and the free slots (up to what it asked for) as they come; a job
 * that a higher-priority job of its role overtakes lets the turnstile go.
 * While other jobs wait, a running job that holds more than its fair share
 * gives workers back between two models (the server's slots split evenly
 * between the roles with jobs, then between a role's jobs), and one that holds
 * fewer than it asked for takes free slots when no job is queued (crew.c,
 * pgdl_jobs_fair_share and pgdl_jobs_take_one).
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

#include "base/base.h"
#include "catalog/catalog.h"
#include "hopper/hopper.h"

#define JOB_TURNSTILE		PGDL_MAX_WORKERS	/* the slot number past the last slot */

/* The slots this backend's job holds, until pgdl_jobs_release; and the role it runs as. */
static bool held[PGDL_MAX_WORKERS];
static Oid	held_owner = InvalidOid;
static int	held_priority = 0;
static TimestampTz held_ticket = 0;	/* 0: not queued */
static uint32 held_predicted = 0;	/* a float4's bits; 0: none published */
static bool held_turnstile = false;

static void
job_locktag(LOCKTAG *tag, int slot)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, PGDL_LOCK_JOB_SPACE, (uint32) slot, PGDL_LOCK_JOB_SLOT);
}

/* The slot a lock tag is, or -1 when it is none of ours; JOB_TURNSTILE for the turnstile. */
static int
job_slot_of(const LOCKTAG *tag)
{
	if (tag->locktag_type != LOCKTAG_ADVISORY || tag->locktag_field1 != InvalidOid ||
		tag->locktag_field2 != PGDL_LOCK_JOB_SPACE || tag->locktag_field4 != PGDL_LOCK_JOB_SLOT ||
		tag->locktag_field3 > JOB_TURNSTILE)
		return -1;
	return (int) tag->locktag_field3;
}

/* A job's owner: the role it runs as (SET ROLE included), which PGPROC does not say. */
static void
owner_locktag(LOCKTAG *tag, Oid role)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, PGDL_LOCK_JOB_SPACE, (uint32) role, PGDL_LOCK_JOB_OWNER);
}

static void
ticket_locktag(LOCKTAG *tag, TimestampTz ticket)
{
	SET_LOCKTAG_ADVISORY(*tag, (uint32) ((uint64) ticket >> 32), PGDL_LOCK_JOB_SPACE, (uint32) ticket, PGDL_LOCK_JOB_TICKET);
}

static void
priority_locktag(LOCKTAG *tag, int priority)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, PGDL_LOCK_JOB_SPACE, (uint32) (priority - PGDL_PRIORITY_MIN), PGDL_LOCK_JOB_PRIORITY);
}

static void
predicted_locktag(LOCKTAG *tag, uint32 bits)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, PGDL_LOCK_JOB_SPACE, bits, PGDL_LOCK_JOB_PREDICTED);
}

/* Whether a lock tag is one of the job locks `kind` (PGDL_LOCK_JOB_OWNER, ...), whose field 1 may be anything. */
static bool
job_tag_is(const LOCKTAG *tag, uint16 kind)
{
	return tag->locktag_type == LOCKTAG_ADVISORY && tag->locktag_field2 == PGDL_LOCK_JOB_SPACE &&
		tag->locktag_field4 == kind;
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

/* ---- the queue, read from the lock table ---- */

typedef struct JobRow
{
	int			pid;
	int			workers;		/* slots held */
	bool		at_turnstile;	/* holds it: first in the queue, taking slots */
	TimestampTz ticket;			/* when it queued; 0: not queued */
	int64		run;
	Oid			owner;
	int			priority;
	int			position;		/* in the queue, from 1; 0: not queued */
	double		predicted;		/* the run's predicted seconds when it queued; 0: none */
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

static int
by_ticket(const void *a, const void *b)
{
	const JobRow *x = *(JobRow *const *) a;
	const JobRow *y = *(JobRow *const *) b;

	if (x->ticket != y->ticket)
		return x->ticket < y->ticket ? -1 : 1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* A role's jobs together, higher priority first, then as by_ticket. */
static int
by_role_priority(const void *a, const void *b)
{
	const JobRow *x = *(JobRow *const *) a;
	const JobRow *y = *(JobRow *const *) b;

	if (x->owner != y->owner)
		return x->owner < y->owner ? -1 : 1;
	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	return by_ticket(a, b);
}

/*
 * Numbers the queued jobs: the places are the tickets in order, and the k-th
 * place a role holds goes to that role's k-th job by priority.
 */
static void
order_queue(JobRow *rows, int n)
{
	JobRow	  **places = palloc(sizeof(JobRow *) * Max(n, 1));
	JobRow	  **ranked = palloc(sizeof(JobRow *) * Max(n, 1));
	int			nq = 0;

	for (int i = 0; i < n; i++)
		if (rows[i].ticket != 0)
			places[nq++] = &rows[i];
	memcpy(ranked, places, sizeof(JobRow *) * nq);
	qsort(places, nq, sizeof(JobRow *), by_ticket);
	qsort(ranked, nq, sizeof(JobRow *), by_role_priority);
	for (int i = 0; i < nq; i++)
	{
		int			k = 0,
					first = 0;

		for (int j = 0; j < i; j++)
			k += places[j]->owner == places[i]->owner;
		while (ranked[first]->owner != places[i]->owner)
			first++;
		ranked[first + k]->position = i + 1;
	}
	pfree(places);
	pfree(ranked);
}

/* The jobs in the lock table, numbered in the queue; the run each running job leads. */
static JobRow *
collect_jobs(LockData *data, int *n)
{
	JobRow	   *rows = palloc0(sizeof(JobRow) * Max(data->nelements, 1));

	*n = 0;
	/* a job is one that holds slots, the turnstile or a ticket: no job lock is ever waited for */
	for (int i = 0; i < data->nelements; i++)
	{
		LockInstanceData *l = &data->locks[i];
		const LOCKTAG *t = &l->locktag;
		int			slot = job_slot_of(t);

		if (l->holdMask == 0)
			continue;
		if (slot >= 0)
		{
			JobRow	   *r = job_row(rows, n, l->pid);

			if (slot < JOB_TURNSTILE)
				r->workers++;
			else
				r->at_turnstile = true;
		}
		else if (job_tag_is(t, PGDL_LOCK_JOB_TICKET))
			job_row(rows, n, l->pid)->ticket =
				(TimestampTz) (((uint64) t->locktag_field1 << 32) | t->locktag_field3);
	}
	for (int i = 0; i < data->nelements; i++)
	{
		LockInstanceData *l = &data->locks[i];
		const LOCKTAG *t = &l->locktag;
		int64		run = pgdl_run_of_leader_lock(t);
		bool		owner = job_tag_is(t, PGDL_LOCK_JOB_OWNER) && t->locktag_field1 == InvalidOid;
		bool		priority = job_tag_is(t, PGDL_LOCK_JOB_PRIORITY) && t->locktag_field1 == InvalidOid;
		bool		predicted = job_tag_is(t, PGDL_LOCK_JOB_PREDICTED) && t->locktag_field1 == InvalidOid;

		for (int j = 0; (run != 0 || owner || priority || predicted) && l->holdMask != 0 && j < *n; j++)
			if (rows[j].pid == l->pid)
			{
				if (run != 0)
					rows[j].run = run;
				else if (owner)
					rows[j].owner = (Oid) t->locktag_field3;
				else if (priority)
					rows[j].priority = (int) t->locktag_field3 + PGDL_PRIORITY_MIN;
				else
				{
					union
					{
						uint32		bits;
						float4		value;
					}			u = {.bits = t->locktag_field3};

					rows[j].predicted = u.value;
				}
			}
	}
	order_queue(rows, *n);
	return rows;
}

/* Jobs ahead of this backend's in the queue (-1: queued jobs but this backend's none), and queued jobs. */
static int
jobs_ahead(int *queued)
{
	/* called every 100 ms while queued: the lock table's copy goes with this context */
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl queue", ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	JobRow	   *rows;
	int			n,
				ahead = -1;

	rows = collect_jobs(GetLockStatusData(), &n);
	*queued = 0;
	for (int i = 0; i < n; i++)
	{
		*queued += rows[i].ticket != 0;
		if (rows[i].pid == MyProcPid && rows[i].position > 0)
			ahead = rows[i].position - 1;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return ahead;
}

/*
 * After this job let a slot or the turnstile go: the other jobs look now
 * rather than at their next poll, so a queued one takes the slot and a running
 * one short of workers grows.  (A core sat idle 100-200 ms at each hand-over.)
 */
static void
wake_other_jobs(void)
{
	/* also called while an error unwinds: the lock table's copy goes with this context */
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl wake", ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int			n;
	JobRow	   *rows = collect_jobs(GetLockStatusData(), &n);

	for (int i = 0; i < n; i++)
	{
		PGPROC	   *proc = rows[i].pid != MyProcPid ? BackendPidGetProc(rows[i].pid) : NULL;

		if (proc != NULL)
			SetLatch(&proc->procLatch);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/* True if any slot was held. */
static bool
release_slots(void)
{
	bool		any = false;

	for (int s = 0; s < PGDL_MAX_WORKERS; s++)
		if (held[s])
		{
			job_unlock(s);
			held[s] = false;
			any = true;
		}
	return any;
}

/* True if it was held. */
static bool
release_turnstile(void)
{
	bool		was = held_turnstile;

	if (held_turnstile)
		job_unlock(JOB_TURNSTILE);
	held_turnstile = false;
	return was;
}

/* Lets the turnstile and every slot go; the other jobs are woken if any was held. */
static void
let_slots_go(void)
{
	bool		freed = release_turnstile();

	freed |= release_slots();
	if (freed)
		wake_other_jobs();
}

static void
release_ticket(void)
{
	if (held_ticket != 0)
	{
		LOCKTAG		tag;

		ticket_locktag(&tag, held_ticket);
		LockRelease(&tag, ShareLock, false);
	}
	held_ticket = 0;
}

/*
 * Wait in the server's queue for worker slots: returns how many this job may
 * start, between `least` (all of `wanted` for a run that needs every worker it
 * asked for) and `wanted`, capped by pgdl.max_workers.  `priority` orders the
 * job among its role's own queued jobs; `predicted_seconds` (<= 0: unknown)
 * is what pgdl.jobs shows as its time left before its run is recorded.  The
 * slots are this transaction's until pgdl_jobs_release.
 */
int
pgdl_jobs_acquire(int wanted, bool need_all, int priority, double predicted_seconds)
{
	int			least;
	int			n;
	bool		told = false;
	bool		was_told = false;
	LOCKTAG		tag;

	/* what an earlier job's error left here went with its transaction */
	memset(held, 0, sizeof(held));
	held_turnstile = false;
	held_ticket = 0;
	held_owner = GetUserId();
	owner_locktag(&tag, held_owner);
	(void) LockAcquire(&tag, ShareLock, false, false);
	held_priority = priority;
	priority_locktag(&tag, priority);
	(void) LockAcquire(&tag, ShareLock, false, false);
	held_predicted = 0;
	if (predicted_seconds > 0 && predicted_seconds < 1e30)
	{
		union
		{
			uint32		bits;
			float4		value;
		}			u = {.value = (float4) predicted_seconds};

		held_predicted = u.bits;
		predicted_locktag(&tag, held_predicted);
		(void) LockAcquire(&tag, ShareLock, false, false);
	}
	if (need_all && wanted > pgdl_max_workers)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("this run needs %d pgdl workers at once, more than pgdl.max_workers (%d)",
						wanted, pgdl_max_workers),
				 errhint("Raise pgdl.max_workers, or lower workers_per_node.")));
	wanted = Min(wanted, pgdl_max_workers);
	least = need_all ? wanted : 1;

	held_ticket = GetCurrentTimestamp();
	ticket_locktag(&tag, held_ticket);
	(void) LockAcquire(&tag, ShareLock, false, false);
	for (;;)
	{
		int			queued;
		int			ahead = jobs_ahead(&queued);

		if (ahead <= 0 && (held_turnstile || (held_turnstile = job_lock(JOB_TURNSTILE, false))))
		{
			if ((n = take_free_slots(wanted)) >= least)
				break;
			if (!told)
				ereport(NOTICE,
						(errmsg("pgdl job waiting for a worker: all %d are busy", pgdl_max_workers),
						 errdetail("At most pgdl.max_workers = %d pgdl workers train at once on this server.",
								   pgdl_max_workers),
						 errhint("pgdl.jobs shows the queue; cancelling this statement withdraws the job.")));
			told = true;
		}
		else
		{
			/* overtaken by a job of this role with a higher priority: it takes the turnstile */
			if (held_turnstile)
				let_slots_go();
			/* first but the turnstile busy: its holder is about to go, not worth telling */
			if (!told && ahead > 0)
			{
				ereport(NOTICE,
						(errmsg_plural("pgdl job queued behind %d other job", "pgdl job queued behind %d other jobs",
									   ahead, ahead),
						 errdetail("At most pgdl.max_workers = %d pgdl workers train at once on this server.",
								   pgdl_max_workers),
						 errhint("pgdl.jobs shows the queue; cancelling this statement withdraws the job.")));
				told = true;
			}
		}
		if (told && !was_told)
			pgstat_report_activity(STATE_RUNNING, "pgdl job: queued");
		was_told = told;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 PGDL_JOBS_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	/* slots may be left for the next job in the queue */
	if (release_turnstile())
		wake_other_jobs();
	release_ticket();
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
		priority_locktag(&tag, held_priority);
		LockRelease(&tag, ShareLock, false);
		if (held_predicted != 0)
		{
			predicted_locktag(&tag, held_predicted);
			LockRelease(&tag, ShareLock, false);
		}
		held_predicted = 0;
		held_owner = InvalidOid;
	}
	release_ticket();
	let_slots_go();
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
			wake_other_jobs();
			return;
		}
}

/* One more slot for a running job, when no job is queued. */
bool
pgdl_jobs_take_one(void)
{
	int			n = slots_held();
	int			queued;
	bool		taken;

	if (n >= pgdl_max_workers || !job_lock(JOB_TURNSTILE, false))
		return false;
	(void) jobs_ahead(&queued);
	taken = queued == 0 && take_free_slots(n + 1) > n;
	job_unlock(JOB_TURNSTILE);
	return taken;
}

/*
 * The workers this backend's running job should hold while other jobs wait:
 * pgdl.max_workers split evenly between the roles that have jobs, then between
 * a role's jobs; at least one.  *others_waiting: whether any other job waits.
 */
int
pgdl_jobs_fair_share(bool *others_waiting)
{
	/* called ten times a second for a whole run: the lock table's copy goes with this context */
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

		if (rows[i].pid != MyProcPid && rows[i].ticket != 0)
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
		Datum		values[10];
		bool		nulls[10] = {0};
		double		predicted;
		char	   *dbname;
		int			position;

		CHECK_FOR_INTERRUPTS();
		if (proc == NULL)
			continue;			/* ended since the lock table was read */
		/* what pgdl.jobs shows, not more: another role's jobs are its own business */
		if (!pgdl_acts_as(OidIsValid(r->owner) ? r->owner : proc->roleId))
			continue;
		dbname = get_database_name(proc->databaseId);
		position = r->position;
		values[0] = Int32GetDatum(r->pid);
		values[1] = ObjectIdGetDatum(OidIsValid(r->owner) ? r->owner : proc->roleId);
		values[2] = CStringGetTextDatum(dbname ? dbname : "");
		nulls[2] = dbname == NULL;
		values[3] = CStringGetTextDatum(r->ticket == 0 ? "running" : "queued");
		values[4] = Int32GetDatum(position);
		nulls[4] = position == 0;
		values[5] = Int32GetDatum(r->workers);
		values[6] = TimestampTzGetDatum(r->ticket);
		nulls[6] = r->ticket == 0;
		values[7] = Int64GetDatum(r->run);
		nulls[7] = r->run == 0;
		values[8] = Int32GetDatum(r->priority);
		/* a queued job's workers: those it asked for (the run's count); before its run is recorded, what it published */
		predicted = r->run != 0 ? pgdl_run_predicted_seconds_left(r->run, r->ticket != 0 ? 0 : r->workers) : -1;
		if (predicted < 0 && r->predicted > 0)
			predicted = r->predicted;
		values[9] = Float8GetDatum(predicted);
		nulls[9] = predicted < 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
