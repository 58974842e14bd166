/*
 * locks.h -- every lock pgdl takes, in one place.
 *
 * pgdl's own locks are advisory tags of PostgreSQL's lock manager that only C
 * code takes: locktag_field4 (pg_locks: objsubid) is one of the kinds below.
 * PostgreSQL's SQL advisory-lock functions (pg_advisory_lock and the rest)
 * always set field4 to 1 (one int8 key) or 2 (two int4 keys), so no SQL
 * session can take, wait for or hold any of these, and no pgdl SQL function
 * takes one: a role cannot stall another's run by holding a key it computed.
 * The kinds are distinct, so no two subsystems' tags are ever equal.
 *
 *   lock                 field 1      field 2          field 3          field 4                taken by
 *   run leader           database     run id >> 32     run id           RUN_LEADER            lifecycle.c
 *   run workers          database     run id >> 32     run id           RUN_WORKERS           lifecycle.c
 *   worker slot          0            "pgdl"           slot             JOB_SLOT              jobs.c
 *   (the turnstile: the slot past the last)
 *   job owner            0            "pgdl"           role             JOB_OWNER             jobs.c
 *   job ticket           time >> 32   "pgdl"           time             JOB_TICKET            jobs.c
 *   job priority         0            "pgdl"           priority - min   JOB_PRIORITY          jobs.c
 *   job prediction       0            "pgdl"           float4 bits      JOB_PREDICTED         jobs.c
 *   feature cache build  database     role             hash of name     CACHE_BUILD           feature_cache.c
 *   shared scan          database     packed table     DSM handle       SHARED_SCAN | part    shared_scan.c
 *
 * pg_locks shows these tags to every role, as it shows every lock: that a
 * role's run or build is in progress, its run ids, the role's OID (which
 * pg_stat_activity shows anyway) and the tables its workers read.  None of it
 * lets another role take or delay the lock.
 *
 * Besides these, pgdl takes only PostgreSQL's ordinary locks through the SQL
 * it runs (relation and row locks of its catalog and of the tables it
 * reads or builds), never LOCK TABLE, FOR UPDATE/SHARE or an advisory
 * function.
 */
#ifndef PGDL_LOCKS_H
#define PGDL_LOCKS_H

#include "storage/lock.h"

/* field 2 of the job locks, which have no database: "pgdl" */
#define PGDL_LOCK_JOB_SPACE		0x7067646c

/* locktag_field4 of each kind of pgdl lock: never 1 or 2 (SQL's advisory locks) */
typedef enum PgdlLockKind
{
	PGDL_LOCK_RUN_LEADER = 0x7064,	/* pg_locks objsubid 28772 (docs/reference/lifecycle.md) */
	PGDL_LOCK_RUN_WORKERS = 0x7065,
	PGDL_LOCK_JOB_SLOT = 0x7066,
	PGDL_LOCK_JOB_OWNER = 0x7067,	/* shared, never waited for: the role a job runs as, for pgdl.jobs */
	PGDL_LOCK_JOB_TICKET = 0x7068,	/* held while queued: fields 1 and 3 are the time it queued */
	PGDL_LOCK_JOB_PRIORITY = 0x7069,	/* shared, never waited for: field 3, the priority less the least */
	PGDL_LOCK_JOB_PREDICTED = 0x706a,	/* shared, never waited for: field 3, predicted seconds' float4 bits */
	PGDL_LOCK_CACHE_BUILD = 0x706b,
	PGDL_LOCK_SHARED_SCAN = 0x8000	/* with the partition in the low 14 bits: 0x8000 .. 0xbfff */
} PgdlLockKind;

StaticAssertDecl(PGDL_LOCK_RUN_LEADER > 2 && PGDL_LOCK_SHARED_SCAN > PGDL_LOCK_CACHE_BUILD,
				 "pgdl's lock kinds are above SQL's advisory kinds 1 and 2 and below the shared scans'");

#endif							/* PGDL_LOCKS_H */
