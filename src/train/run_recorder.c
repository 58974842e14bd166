/*
 * run_recorder.c -- pgdl.fit's run, recorded where other sessions see it while
 * it trains.
 *
 * pgdl.fit starts a short-lived background worker, the run recorder, which
 * connects as the caller (as a model hopper worker does: the caller's session
 * user, then its current role) and, each in a transaction of its own, inserts
 * the run (status running, with its pgdl.configs row) and every epoch's
 * metrics as the fit sends them over a shm_mq, answering each once it is
 * committed.  The fit's own transaction stores the model and marks the run
 * finished, as before.
 *
 * When the fit lets go of the queue (its call returned, or failed: an error or
 * a cancel releases the segment with its transaction), the recorder marks the
 * run failed if it is still running.  That UPDATE waits for the row lock that
 * the fit's transaction holds on a run it finished, and reads the row again
 * when that transaction ends (READ COMMITTED): a fit whose transaction commits
 * leaves its run finished; one that fails, or that the caller rolls back later,
 * leaves it failed.  The recorder holds its worker slot until then.
 *
 * With no worker slot free, the run is recorded in the caller's transaction,
 * as before this recorder, with a NOTICE.
 *
 * pgdl.fit_federated has its run recorded the same way, and each round as one
 * transaction: the sites' rows, the run's model's, and the model after the
 * round as a checkpoint, so that a run that fails can be resumed from its last
 * round; pgdl.resume of such a run marks it running again here.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "train/train.h"

#define RECORDER_MAGIC		0x70676472	/* "pgdr" */
#define RECORDER_KEY_SHARED	1
#define RECORDER_KEY_CONFIG	2
#define RECORDER_KEY_TO_RECORDER 3
#define RECORDER_KEY_TO_FIT	4
#define RECORDER_QUEUE_SIZE	65536	/* a federated round's checkpoint goes through it */
#define RECORDER_FAIL_WAIT_MS 10000

/* What the recorder needs to know, and what it tells back when it fails. */
typedef struct RecorderShared
{
	PgdlCaller	caller;
	char		kind[NAMEDATALEN];
	int64		resume;
	int64		dataset;
	int64		validation;
	int64		architecture;
	int32		epochs;
	PgdlEngine	engine;			/* the fit's kernels, which the recorder records (its own session has other settings) */
	Size		config_len;
	int64		run;			/* set once the run is committed */
	int			error_code;		/* 0: none */
	char		error[256];
} RecorderShared;

/* A federated round as one message: this, its metrics, sites, federation and checkpoint, each MAXALIGN'd. */
#define ROUND_MAGIC 0x70676466	/* "pgdf" */
typedef struct RoundHeader
{
	uint32		magic;
	int32		n_sites;
	Size		federation_len; /* 0: none */
	Size		checkpoint_len;
} RoundHeader;

/* The run's ids, the recorder's first answer. */
typedef struct RecorderIds
{
	int64		run;
	int64		config;
} RecorderIds;

struct PgdlRecorder
{
	dsm_segment *seg;
	RecorderShared *shared;
	shm_mq_handle *to_recorder;
	shm_mq_handle *to_fit;
	bool		ack_due;		/* an epoch was sent, its answer not read */
};

/* ---- the fit's side ---- */


static dsm_segment *
create_segment(const PgdlRunStart *start, RecorderShared **shared_out)
{
	Size		config_len = VARSIZE(start->config);
	shm_toc_estimator e;
	dsm_segment *seg;
	shm_toc    *toc;
	RecorderShared *shared;
	void	   *config;

	shm_toc_initialize_estimator(&e);
	shm_toc_estimate_chunk(&e, sizeof(RecorderShared));
	shm_toc_estimate_chunk(&e, config_len);
	shm_toc_estimate_chunk(&e, RECORDER_QUEUE_SIZE);
	shm_toc_estimate_chunk(&e, RECORDER_QUEUE_SIZE);
	shm_toc_estimate_keys(&e, 4);
	seg = dsm_create(shm_toc_estimate(&e), 0);
	toc = shm_toc_create(RECORDER_MAGIC, dsm_segment_address(seg), shm_toc_estimate(&e));
	shared = shm_toc_allocate(toc, sizeof(RecorderShared));
	memset(shared, 0, sizeof(*shared));
	pgdl_caller_capture(&shared->caller);
	strlcpy(shared->kind, start->kind ? start->kind : "fit", sizeof(shared->kind));
	shared->resume = start->resume;
	shared->dataset = start->dataset;
	shared->validation = start->validation;
	shared->architecture = start->architecture;
	shared->epochs = start->epochs;
	pgdl_engine_current(&shared->engine);
	shared->config_len = config_len;
	shm_toc_insert(toc, RECORDER_KEY_SHARED, shared);
	config = shm_toc_allocate(toc, config_len);
	memcpy(config, start->config, config_len);
	shm_toc_insert(toc, RECORDER_KEY_CONFIG, config);
	shm_toc_insert(toc, RECORDER_KEY_TO_RECORDER, shm_mq_create(shm_toc_allocate(toc, RECORDER_QUEUE_SIZE),
																RECORDER_QUEUE_SIZE));
	shm_toc_insert(toc, RECORDER_KEY_TO_FIT, shm_mq_create(shm_toc_allocate(toc, RECORDER_QUEUE_SIZE),
														   RECORDER_QUEUE_SIZE));
	*shared_out = shared;
	return seg;
}

static bool
register_recorder(dsm_segment *seg, BackgroundWorkerHandle **handle)
{
	char		name[BGW_MAXLEN];

	snprintf(name, sizeof(name), "pgdl run recorder for pid %d", MyProcPid);
	return pgdl_register_worker(seg, "pgdl_run_recorder_main", "pgdl run recorder", name, NULL, 0, handle);
}

/* The recorder stopped: with its error if it had one; else, before it recorded the run, it never ran. */
static bool
recorder_gone(PgdlRecorder *r)
{
	if (r->shared->error_code != 0)
		ereport(ERROR,
				(errcode(r->shared->error_code),
				 errmsg("%s", r->shared->error),
				 errcontext("pgdl.%s's run recorder", r->shared->kind)));
	if (r->shared->run != 0)
		ereport(ERROR,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("the run recorder of pgdl.%s's run " INT64_FORMAT " stopped", r->shared->kind,
						r->shared->run),
				 errhint("See the server log.")));
	return false;
}

/* A reply from the recorder; false when it stopped before it recorded anything. */
static bool
receive(PgdlRecorder *r, void *out, Size size)
{
	Size		len;
	void	   *data;

	if (shm_mq_receive(r->to_fit, &len, &data, false) != SHM_MQ_SUCCESS)
		return recorder_gone(r);
	if (len != size)
		elog(ERROR, "pgdl: the run recorder answered %zu bytes, not %zu", len, size);
	memcpy(out, data, size);
	return true;
}

/* The run begun (or, resume, marked running again), with pgdl.fit's pgdl.configs row. */
static void
begin_run(const char *kind, int64 resume, int64 dataset, int64 validation, int64 architecture, Jsonb *config,
		  int32 epochs, const PgdlEngine *engine, int64 *run, int64 *config_id)
{
	*config_id = 0;
	if (resume != 0)
	{
		pgdl_run_restart(resume, 0, engine);
		*run = resume;
		return;
	}
	if (strcmp(kind, "fit") == 0)
		*config_id = pgdl_run_fit_config(architecture, config);
	*run = pgdl_run_begin(kind, dataset, validation, architecture, config, epochs, 0, engine);
}

/* A federated round into the run record, in the current transaction. */
static void
record_round_rows(int64 run, const PgdlRound *round)
{
	for (int32 s = 0; s < round->n_sites; s++)
		pgdl_run_record_node_epoch(run, 0, round->sites[s].node, &round->sites[s].metrics);
	pgdl_run_record_node_epoch(run, 0, NULL, round->metrics);
	if (round->federation)
		pgdl_run_record_federation(run, round->metrics->epoch, round->federation);
	pgdl_run_checkpoint(run, 0, round->metrics->epoch, round->checkpoint);
}

/* The message of a round (RoundHeader); *len its size. */
static char *
round_message(const PgdlRound *round, Size *len)
{
	RoundHeader h = {ROUND_MAGIC, round->n_sites, round->federation ? VARSIZE(round->federation) : 0,
	VARSIZE(round->checkpoint)};
	Size		sites_len = mul_size(sizeof(PgdlRoundSite), round->n_sites);
	Size		at[5];
	char	   *msg;

	at[0] = 0;
	at[1] = MAXALIGN(sizeof(h));
	at[2] = add_size(at[1], MAXALIGN(sizeof(PgdlEpochMetrics)));
	at[3] = add_size(at[2], MAXALIGN(sites_len));
	at[4] = add_size(at[3], MAXALIGN(h.federation_len));
	*len = add_size(at[4], h.checkpoint_len);
	msg = palloc0(*len);
	memcpy(msg, &h, sizeof(h));
	memcpy(msg + at[1], round->metrics, sizeof(PgdlEpochMetrics));
	if (sites_len > 0)
		memcpy(msg + at[2], round->sites, sites_len);
	if (h.federation_len > 0)
		memcpy(msg + at[3], round->federation, h.federation_len);
	memcpy(msg + at[4], round->checkpoint, h.checkpoint_len);
	return msg;
}

/* A round message back (a copy, aligned), checked against its own sizes, and recorded. */
static void
record_round(int64 run, const void *data, Size len)
{
	char	   *msg = palloc(len);
	RoundHeader h;
	PgdlRound	round = {0};
	Size		at;

	memcpy(msg, data, len);
	memcpy(&h, msg, sizeof(h));
	at = MAXALIGN(sizeof(h));
	round.metrics = (PgdlEpochMetrics *) (msg + at);
	at += MAXALIGN(sizeof(PgdlEpochMetrics));
	round.sites = (PgdlRoundSite *) (msg + at);
	round.n_sites = h.n_sites;
	at += MAXALIGN(sizeof(PgdlRoundSite) * (Size) Max(h.n_sites, 0));
	round.federation = h.federation_len > 0 ? (Jsonb *) (msg + at) : NULL;
	at += MAXALIGN(h.federation_len);
	round.checkpoint = (bytea *) (msg + at);
	if (h.n_sites < 0 || at + h.checkpoint_len != len || h.checkpoint_len < VARHDRSZ ||
		VARSIZE(round.checkpoint) != h.checkpoint_len ||
		(round.federation && VARSIZE(round.federation) != h.federation_len))
		elog(ERROR, "pgdl run recorder: a round message of %zu bytes does not add up", len);
	for (int32 s = 0; s < h.n_sites; s++)
		((PgdlRoundSite *) round.sites)[s].node[NAMEDATALEN - 1] = '\0';
	record_round_rows(run, &round);
	pfree(msg);
}

/* The run in the caller's transaction, as before the recorder; why, in a NOTICE. */
static void
fallback(PgdlRecorder *r, const PgdlRunStart *start, int64 *run, int64 *config, bool no_worker)
{
	const char *kind = start->kind ? start->kind : "fit";
	PgdlEngine	engine;

	if (no_worker)
		ereport(NOTICE,
				(errmsg("pgdl.%s records its run in the current transaction", kind),
				 errdetail("No background worker was free to record it on its own; other sessions see the run when this transaction commits."),
				 errhint("Raise max_worker_processes to let other sessions follow a pgdl.fit as it trains.")));
	else
		ereport(NOTICE,
				(errmsg("pgdl.%s records its run in the current transaction", kind),
				 errdetail("This transaction has written to the database before, or reads from one snapshot (REPEATABLE READ or SERIALIZABLE): other sessions see the run when it commits."),
				 errhint("Call pgdl.%s in a transaction of its own to let other sessions follow it as it trains.", kind)));
	if (r->seg)
		dsm_detach(r->seg);
	r->seg = NULL;
	pgdl_engine_current(&engine);
	begin_run(kind, start->resume, start->dataset, start->validation, start->architecture, start->config,
			  start->epochs, &engine, run, config);
}

PgdlRecorder *
pgdl_recorder_start(const PgdlRunStart *start, int64 *run, int64 *config)
{
	PgdlRecorder *r = palloc0(sizeof(PgdlRecorder));
	BackgroundWorkerHandle *handle;
	shm_toc    *toc;
	shm_mq	   *to_recorder;
	shm_mq	   *to_fit;
	RecorderIds ids;

	/*
	 * The recorder cannot see what this transaction wrote (a dataset or
	 * architecture just made), and would wait for the locks it holds while
	 * the fit waits for the recorder; nor would a snapshot taken before the
	 * run was committed see the run at the end.
	 */
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()) || IsolationUsesXactSnapshot())
	{
		fallback(r, start, run, config, false);
		return r;
	}
	r->seg = create_segment(start, &r->shared);
	toc = shm_toc_attach(RECORDER_MAGIC, dsm_segment_address(r->seg));
	to_recorder = shm_toc_lookup(toc, RECORDER_KEY_TO_RECORDER, false);
	to_fit = shm_toc_lookup(toc, RECORDER_KEY_TO_FIT, false);
	shm_mq_set_sender(to_recorder, MyProc);
	shm_mq_set_receiver(to_fit, MyProc);
	if (!register_recorder(r->seg, &handle))
	{
		fallback(r, start, run, config, true);
		return r;
	}
	r->to_recorder = shm_mq_attach(to_recorder, r->seg, handle);
	r->to_fit = shm_mq_attach(to_fit, r->seg, handle);
	if (!receive(r, &ids, sizeof(ids)))
	{
		fallback(r, start, run, config, true);
		return r;
	}
	*run = ids.run;
	*config = ids.config;
	return r;
}

void
pgdl_recorder_epoch(PgdlRecorder *r, int64 run, int64 config, const PgdlEpochMetrics *m)
{
	char		ack;

	if (r->seg == NULL)
	{
		pgdl_run_record_epoch(run, config, m);
		return;
	}
	if (shm_mq_send(r->to_recorder, sizeof(*m), m, false, true) != SHM_MQ_SUCCESS)
		recorder_gone(r);
	r->ack_due = true;
	if (!receive(r, &ack, 1))
		recorder_gone(r);
	r->ack_due = false;
}

void
pgdl_recorder_round(PgdlRecorder *r, int64 run, const PgdlRound *round)
{
	char		ack;
	Size		len;
	char	   *msg;

	if (r->seg == NULL)
	{
		record_round_rows(run, round);
		return;
	}
	msg = round_message(round, &len);
	if (shm_mq_send(r->to_recorder, len, msg, false, true) != SHM_MQ_SUCCESS)
		recorder_gone(r);
	pfree(msg);
	r->ack_due = true;
	if (!receive(r, &ack, 1))
		recorder_gone(r);
	r->ack_due = false;
}

/*
 * pgdl.fit fails (an error, a cancel): its run is failed before the error
 * reaches the caller, rather than some time after.  Called in PG_CATCH, so
 * the wait is bounded and not interruptible; a recorder that does not answer
 * in time settles the run when its queue goes.
 */
void
pgdl_recorder_fail(PgdlRecorder *r)
{
	char		failed = 0;
	int			answers;
	Size		len;
	void	   *data;

	if (r == NULL || r->seg == NULL)
		return;
	/* the answer to an epoch the fit was waiting for comes first */
	answers = r->ack_due ? 2 : 1;
	HOLD_INTERRUPTS();
	if (shm_mq_send(r->to_recorder, 1, &failed, true, true) == SHM_MQ_SUCCESS)
	{
		for (int waited = 0; answers > 0 && waited < RECORDER_FAIL_WAIT_MS; waited += 10)
		{
			shm_mq_result res = shm_mq_receive(r->to_fit, &len, &data, true);

			if (res == SHM_MQ_SUCCESS)
			{
				answers--;
				continue;
			}
			if (res == SHM_MQ_DETACHED)
				break;
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
	RESUME_INTERRUPTS();
}

void
pgdl_recorder_release(PgdlRecorder *r)
{
	if (r->seg)
		dsm_detach(r->seg);
	r->seg = NULL;
}

/* ---- the recorder ---- */

static RecorderShared *shared;

/* What failed, for the fit to report. */
static void
report_failure(void)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(TopMemoryContext);
	edata = CopyErrorData();
	shared->error_code = edata->sqlerrcode ? edata->sqlerrcode : ERRCODE_INTERNAL_ERROR;
	strlcpy(shared->error, edata->message ? edata->message : "unknown error", sizeof(shared->error));
}

static void
begin_xact(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

static void
commit_xact(void)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* The run, then every epoch as the fit sends them, until it lets go. */
static void
record_run(Jsonb *config, shm_mq_handle *to_recorder, shm_mq_handle *to_fit)
{
	RecorderIds ids;

	begin_xact("pgdl run recorder: recording the run");
	begin_run(shared->kind, shared->resume, shared->dataset, shared->validation, shared->architecture, config,
			  shared->epochs, &shared->engine, &ids.run, &ids.config);
	commit_xact();
	/* pgdl.run_in_progress says so until the recorder exits */
	pgdl_run_hold_as_worker(ids.run);
	shared->run = ids.run;
	if (shm_mq_send(to_fit, sizeof(ids), &ids, false, true) != SHM_MQ_SUCCESS)
		return;					/* the fit is gone: what follows marks the run failed */

	for (;;)
	{
		Size		len;
		void	   *data;
		PgdlEpochMetrics m;
		char		ack = 1;

		if (shm_mq_receive(to_recorder, &len, &data, false) != SHM_MQ_SUCCESS)
			return;
		if (len == 1)
		{
			/* the fit failed: nobody holds the row, it is not finished */
			begin_xact("pgdl run recorder: the fit failed");
			pgdl_run_fail_if_running(ids.run, 0);
			commit_xact();
		}
		else if (len == sizeof(m))
		{
			memcpy(&m, data, sizeof(m));
			begin_xact("pgdl run recorder: recording an epoch");
			pgdl_run_record_epoch(ids.run, ids.config, &m);
			commit_xact();
		}
		else if (len > sizeof(RoundHeader) && ((RoundHeader *) data)->magic == ROUND_MAGIC)
		{
			begin_xact("pgdl run recorder: recording a round");
			record_round(ids.run, data, len);
			commit_xact();
		}
		else
			elog(ERROR, "pgdl run recorder: a message of %zu bytes", len);
		if (shm_mq_send(to_fit, 1, &ack, false, true) != SHM_MQ_SUCCESS)
			return;
	}
}

/*
 * The fit let go: its run is failed unless its transaction finished it.  The
 * UPDATE waits for that transaction if it holds the row.
 */
static void
settle_run(int64 run)
{
	if (run == 0)
		return;
	begin_xact("pgdl run recorder: waiting for the transaction of the fit");
	pgdl_run_fail_if_running(run, 0);
	commit_xact();
}

static void
connect_as_caller(const PgdlCaller *caller)
{
	pgdl_caller_connect(caller);
	/* the wait for the fit's transaction may be long; a role's timeouts must not leave the run running */
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("lock_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("idle_in_transaction_session_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	pgstat_report_appname("pgdl run recorder");
}

void
pgdl_run_recorder_main(Datum main_arg)
{
	dsm_segment *seg;
	shm_toc    *toc;
	Jsonb	   *config;
	shm_mq_handle *to_recorder;
	shm_mq_handle *to_fit;
	int64		run;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	CurrentResourceOwner = ResourceOwnerCreate(NULL, "pgdl run recorder");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		proc_exit(0);			/* the fit is gone already: nothing was recorded */
	toc = shm_toc_attach(RECORDER_MAGIC, dsm_segment_address(seg));
	if (toc == NULL)
		elog(ERROR, "pgdl run recorder: bad shared memory");
	shared = shm_toc_lookup(toc, RECORDER_KEY_SHARED, false);
	config = MemoryContextAlloc(TopMemoryContext, shared->config_len);
	memcpy(config, shm_toc_lookup(toc, RECORDER_KEY_CONFIG, false), shared->config_len);
	shm_mq_set_receiver(shm_toc_lookup(toc, RECORDER_KEY_TO_RECORDER, false), MyProc);
	shm_mq_set_sender(shm_toc_lookup(toc, RECORDER_KEY_TO_FIT, false), MyProc);
	to_recorder = shm_mq_attach(shm_toc_lookup(toc, RECORDER_KEY_TO_RECORDER, false), seg, NULL);
	to_fit = shm_mq_attach(shm_toc_lookup(toc, RECORDER_KEY_TO_FIT, false), seg, NULL);

	connect_as_caller(&shared->caller);
	PG_TRY();
	{
		record_run(config, to_recorder, to_fit);
	}
	PG_CATCH();
	{
		/* the fit reads why once the queue is gone; the run is then settled as any other */
		report_failure();
		EmitErrorReport();
		AbortCurrentTransaction();
		FlushErrorState();
	}
	PG_END_TRY();
	run = shared->run;
	dsm_detach(seg);
	shared = NULL;
	settle_run(run);
	proc_exit(0);
}

/*
 * ---- the run settler ----
 *
 * A pgdl.fit_multiple run is committed by its workers, and finished by the
 * call's transaction.  When that transaction (or the subtransaction the call
 * ran in) aborts -- an error, a cancel, a worker that failed, a ROLLBACK after
 * the call returned, a terminated session -- the run would stay "running"
 * with nobody running it.  At that abort a settler worker is started (one for
 * up to SETTLE_BATCH runs of a caller), which connects as the caller and marks
 * each run failed if it is still running and still the same attempt
 * (pgdl.resume gives a run a new progress_handle).
 * A server crash leaves the run running; pgdl.resume continues it either way.
 */
typedef struct SettleRequest
{
	PgdlCaller	caller;
	int64		run;
	int64		progress_handle;
} SettleRequest;

/*
 * What one settler marks: the runs of one caller, several to a worker, so that
 * a transaction that ran many calls (pgdl.tpe_search's batches) needs few
 * worker slots when it aborts.
 */
#define SETTLE_BATCH 6
typedef struct SettleBatch
{
	PgdlCaller	caller;
	int32		n;
	struct
	{
		int64		run;
		int64		progress_handle;
	}			runs[SETTLE_BATCH];
} SettleBatch;

StaticAssertDecl(sizeof(SettleBatch) <= BGW_EXTRALEN, "a settler's batch must fit in bgw_extra");

typedef struct PendingSettle
{
	SettleRequest request;
	int			nest_level;		/* of the (sub)transaction that ran the call */
	struct PendingSettle *next;
} PendingSettle;

static PendingSettle *pending;
static bool settle_callbacks_registered;

static void
start_settler(SettleBatch *batch)
{
	char		name[BGW_MAXLEN];
	BackgroundWorkerHandle *handle;

	if (batch->n == 0)
		return;
	snprintf(name, sizeof(name), "pgdl run settler for run " INT64_FORMAT "%s", batch->runs[0].run,
			 batch->n > 1 ? " and others" : "");
	if (!pgdl_register_worker(NULL, "pgdl_run_settler_main", "pgdl run settler", name,
							  batch, sizeof(*batch), &handle))
		for (int i = 0; i < batch->n; i++)
			elog(WARNING, "pgdl: no background worker was free to mark run " INT64_FORMAT " failed",
				 batch->runs[i].run);
	batch->n = 0;
}

/* Adds a run to the batch, starting the batch's settler first when it is full or of another caller. */
static void
settle_later(SettleBatch *batch, const SettleRequest *request)
{
	if (batch->n == SETTLE_BATCH ||
		(batch->n > 0 && memcmp(&batch->caller, &request->caller, sizeof(PgdlCaller)) != 0))
		start_settler(batch);
	if (batch->n == 0)
		batch->caller = request->caller;
	batch->runs[batch->n].run = request->run;
	batch->runs[batch->n].progress_handle = request->progress_handle;
	batch->n++;
}

/* Start settlers for the runs of nest levels at or above level (0: all); forget them. */
static void
settle_from(int level, bool start)
{
	PendingSettle **p = &pending;
	SettleBatch batch;

	memset(&batch, 0, sizeof(batch));
	while (*p)
	{
		PendingSettle *s = *p;

		if (s->nest_level >= level)
		{
			if (start && s->request.run != 0)
				settle_later(&batch, &s->request);
			*p = s->next;
			pfree(s);
		}
		else
			p = &s->next;
	}
	start_settler(&batch);
}

static void
settle_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		settle_from(0, true);
	else if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
			 event == XACT_EVENT_PREPARE)
		settle_from(0, false);
}

static void
settle_subxact_callback(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (event == SUBXACT_EVENT_ABORT_SUB)
		settle_from(level, true);
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		for (PendingSettle *s = pending; s; s = s->next)
			if (s->nest_level >= level)
				s->nest_level = level - 1;
	}
}

/*
 * A run to settle should the current (sub)transaction abort; its run is set
 * later with pgdl_run_settle_arm, which allocates and looks up nothing, so
 * that it may be called in PG_CATCH.
 */
PgdlSettle *
pgdl_run_settle_prepare(void)
{
	PendingSettle *s;

	if (!settle_callbacks_registered)
	{
		RegisterXactCallback(settle_xact_callback, NULL);
		RegisterSubXactCallback(settle_subxact_callback, NULL);
		settle_callbacks_registered = true;
	}
	s = MemoryContextAllocZero(TopMemoryContext, sizeof(PendingSettle));
	pgdl_caller_capture(&s->request.caller);
	s->nest_level = GetCurrentTransactionNestLevel();
	s->next = pending;
	pending = s;
	return (PgdlSettle *) s;
}

void
pgdl_run_settle_arm(PgdlSettle *settle, int64 run, int64 progress_handle)
{
	PendingSettle *s = (PendingSettle *) settle;

	s->request.run = run;
	s->request.progress_handle = progress_handle;
}

void
pgdl_run_settler_main(Datum main_arg)
{
	SettleBatch batch;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	memcpy(&batch, MyBgworkerEntry->bgw_extra, sizeof(batch));
	connect_as_caller(&batch.caller);
	pgstat_report_appname("pgdl run settler");
	for (int i = 0; i < batch.n && i < SETTLE_BATCH; i++)
	{
		/* waits for the transaction that ran the call, if it still holds the row */
		begin_xact("pgdl run settler: marking the run failed");
		pgdl_run_fail_if_running(batch.runs[i].run, batch.runs[i].progress_handle);
		commit_xact();
	}
	proc_exit(0);
}
