/*
 * bgworker.c -- what pgdl's background workers share: how they are registered
 * (the model hopper's workers, pgdl.fit's run recorder, the run settler) and
 * how they connect as the caller who started them.
 *
 * A worker logs in as the caller's session user and then takes the role the
 * caller runs as, as PostgreSQL's parallel workers do, so that it reads and
 * writes only what the caller may.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "utils/acl.h"

#include "base/base.h"

/*
 * Register a dynamic background worker of pgdl's: on a segment, whose handle
 * is bgw_main_arg, or none (all the worker needs is in bgw_extra).
 * extra_len is at most BGW_EXTRALEN.
 */
bool
pgdl_register_worker(dsm_segment *seg, const char *function, const char *type, const char *name,
					 const void *extra, Size extra_len, BackgroundWorkerHandle **handle)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "pgdl");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker.bgw_name, BGW_MAXLEN, "%s", name);
	snprintf(worker.bgw_type, BGW_MAXLEN, "%s", type);
	worker.bgw_main_arg = UInt32GetDatum(seg ? dsm_segment_handle(seg) : DSM_HANDLE_INVALID);
	worker.bgw_notify_pid = MyProcPid;
	Assert(extra_len <= BGW_EXTRALEN);
	if (extra_len > 0)
		memcpy(worker.bgw_extra, extra, Min(extra_len, BGW_EXTRALEN));
	return RegisterDynamicBackgroundWorker(&worker, handle);
}

/* Who is calling, for a worker to connect as. */
void
pgdl_caller_capture(PgdlCaller *caller)
{
	caller->database = MyDatabaseId;
	caller->user = GetAuthenticatedUserId();
	caller->outer_user = GetOuterUserId();
	caller->outer_is_superuser = superuser_arg(caller->outer_user);
	GetUserIdAndSecContext(&caller->current_user, &caller->sec_context);
}

/* In a background worker: connect to the caller's database as the caller. */
void
pgdl_caller_connect(const PgdlCaller *caller)
{
	BackgroundWorkerInitializeConnectionByOid(caller->database, caller->user, 0);
	SetCurrentRoleId(caller->outer_user, caller->outer_is_superuser);
	SetUserIdAndSecContext(caller->current_user, caller->sec_context);
}
