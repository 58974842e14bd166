/*
 * worker.c -- a model hopper background worker.
 *
 * Attaches the run's DSM segment, connects as the caller to the caller's
 * database (so it reads only what the caller may read), loads the buffers of
 * the partitions it owns, then loops: take an idle model whose next partition is
 * its own, train it there, put it back; at the end of a model's epoch, the
 * model waits for a worker (this one or another: schedule.c's rule) to evaluate
 * it and checkpoint it in a transaction of its own.  A model is taken with the
 * members of its fused unit (pgdl.fuse_models, dsm.c) that wait at the same
 * point: one hop, each member's steps on the partition, one evaluation pass,
 * one transaction for their epochs.  Signal handling follows
 * worker_spi: SIGTERM ends the worker, the latch wakes it.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/procarray.h"
#include "storage/shm_toc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"
#include "plan/plan.h"
#include "cluster/cluster.h"
#include "hopper/hopper.h"

static MopShared *shared;
static char *blobs;
static char *plan_sql;
static int	me;
static MemoryContext data_cxt;
static int64 budget;
static dsm_segment *my_segment;
static Jsonb *run_config;		/* pgdl.runs.config, in the segment */

/* A MopSource as this worker reads it. */
typedef struct WorkerSource
{
	bool		used;			/* some model trains on it */
	PgdlDataset train;			/* the packed table, or a cache view read as one */
	PgdlDataset valid;
	PgdlHeldPartition *held;	/* per partition (only owned ones used); shared with source 0 when recomputing */
	bool	   *tried;			/* per partition: held as the budget allowed (owned, inherited or stolen, once) */
	PgdlHeldPartition *held_validation;
	bool	   *validation_loaded;
	NnModel    *frozen;			/* the frozen prefix, joined to checkpoints; NULL for source 0 */
	PgdlPrefixRun recompute;	/* the same, run over every buffer; .prefix NULL when cached or none */
} WorkerSource;

static WorkerSource *sources;
static MopCandidate *candidates;	/* take_models' view of the models */
static int32 *taken;			/* the models take_models took: one, or the members of a fused unit */
static MopDecisions *limit_pass;	/* take_models' decisions at the time limit: one pass's */
static MopDecisions *limit_all;	/* and all of one take's, to record */

/* Where this worker's time went once training began, for its DEBUG1 line at the end (train_models). */
static double validated_seconds;
static int32 validations;
static double waited_seconds;

/* A worker that trains on a node: its connection, the node's table of each partition, and their replicas. */
static PgdlNode *node;
static PgdlPartPlace *places;
static PgdlFailover failover;

/* What a visit did: the model after it, and what it measured. */
typedef struct Visit
{
	NnModel    *nn;
	NnBatchStats stats;
	bool		diverged;
} Visit;

static void
wake_everyone(void)
{
	for (int w = 0; w < shared->n_workers; w++)
		if (shared->workers[w].proc && w != me)
			SetLatch(&shared->workers[w].proc->procLatch);
	if (shared->leader)
		SetLatch(&shared->leader->procLatch);
}

/*
 * Read a partition (or the whole validation set, part -1) into memory, as far
 * as the budget goes, or attach another job's worker's copy (shared_scan.c).
 * A DEBUG1 line says which, for tests.
 */
static void
load(const PgdlDataset *ds, int32 part, PgdlHeldPartition *hp)
{
	PgdlShareResult how;
	char	   *relname;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	how = pgdl_shared_hold(ds, part, hp, data_cxt, &budget);
	relname = get_rel_name(ds->packed);
	ereport(DEBUG1,
			(errmsg_internal("pgdl worker %d of backend %d: %s of \"%s\" %s", me, (int) shared->leader_pid,
							 part >= 0 ? psprintf("partition %d", part) : "the validation set",
							 relname ? relname : "?",
							 how == PGDL_SHARE_ATTACHED ? "attached from another worker" :
							 how == PGDL_SHARE_PUBLISHED ? "read from its table and published" :
							 "read from its table")));
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* One model's part of a pass over buffers. */
typedef struct ScanArg
{
	PgdlTrainState *train;
	NnModel    *model;			/* evaluation: NULL for a member that diverged */
	NnBatchStats *stats;
	PgdlScores *scores;			/* validation: rank_by's or monitor's scores; NULL: loss and accuracy only */
} ScanArg;

/*
 * A pass over buffers for the n models of a unit (one, or a fused unit's
 * members): each buffer is read, unpacked and run through the frozen prefix
 * once, then each member takes its own steps on it, in the order of the
 * unit (visit_here runs a member at a time when the buffers are in memory).
 * Each member's steps are those it takes alone: the same kernels on the same
 * inputs, hence the same bytes.
 */
typedef struct UnitScan
{
	int			n;
	ScanArg    *members;
	WorkerSource *src;
} UnitScan;

static void
train_cb(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept)
{
	UnitScan   *us = arg;
	bool		any = false;

	/* the rest of the partition, once every member diverged: nothing to train, no prefix to run */
	for (int k = 0; k < us->n; k++)
		any |= !us->members[k].train->diverged;
	if (!any)
		return;
	x = pgdl_prefix_run(&us->src->recompute, x, n);
	for (int k = 0; k < us->n; k++)
		pgdl_train_buffer(us->members[k].train, x, y, w, n);	/* a diverged member's returns at once */
}

static void
evaluate_cb(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept)
{
	UnitScan   *us = arg;
	NnError		err;

	x = pgdl_prefix_run(&us->src->recompute, x, n);
	for (int k = 0; k < us->n; k++)
	{
		ScanArg    *sa = &us->members[k];

		if (sa->model == NULL)
			continue;
		pgdl_check_model_batch(sa->model, n, "the model");
		if (!nn_model_evaluate(sa->model, x, y, n, sa->stats, &err))
			ereport(ERROR,
					(errcode(pgdl_nn_data_errcode(&err)),
					 errmsg("cannot evaluate a model on the validation set"),
					 errdetail("%s.", err.msg)));
		if (sa->scores)
			pgdl_scores_add(sa->scores, x, y, w, n);
	}
}

/* Run fn over a partition: from memory, or from its table in a transaction. */
static void
for_each_buffer(const PgdlDataset *ds, int32 part, PgdlHeldPartition *hp, PgdlBufferFn fn, void *arg)
{
	if (hp->complete)
	{
		pgdl_packed_foreach(ds, part, hp, fn, arg);
		return;
	}
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgdl_packed_foreach(ds, part, hp, fn, arg);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* Worker 0 records the run; the others wait for its id. */
static void
create_run(void)
{
	int64		id = shared->run_id;
	int64		handle = (int64) dsm_segment_handle(my_segment);
	PgdlEngine	engine;

	/* the kernels of this worker, on the leader's pgdl.cpu_isa: the run's */
	pgdl_engine_current(&engine);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (id == 0)
		id = pgdl_run_begin("fit_multiple", shared->dataset_id, shared->validation_id, 0, run_config,
							shared->epochs, handle, &engine);
	else
		pgdl_run_restart(id, handle, &engine);
	/* in flight from the moment others can see it (lifecycle.c) */
	pgdl_run_hold_as_worker(id);
	PopActiveSnapshot();
	CommitTransactionCommand();
	SpinLockAcquire(&shared->mutex);
	shared->run_id = id;
	SpinLockRelease(&shared->mutex);
	wake_everyone();
}

static void
record_decisions(const MopDecisions *d)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	mop_record_decisions(shared, d);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

static void hold_partition(int i, int32 part);

/*
 * Loss and accuracy of the n models ids (one, or a fused unit's members: the
 * same source and holdout) on the validation set, or a fold's on the
 * partition it holds out, in one pass; a member's scores too when rank_by or
 * its monitor needs them (never with folds: prepare.c refuses it).  nns[k]
 * NULL: member k diverged, nothing to evaluate.
 */
static void
evaluate(const int32 *ids, int n, NnModel **nns, NnBatchStats *vstats, PgdlEpochMetrics *metrics)
{
	MopModel   *m = &shared->models[ids[0]];
	WorkerSource *src = &sources[m->source];
	UnitScan	us = {n, palloc0(sizeof(ScanArg) * n), src};
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl validation scores", ALLOCSET_DEFAULT_SIZES);

	for (int k = 0; k < n; k++)
	{
		us.members[k].model = nns[k];
		us.members[k].stats = &vstats[k];
	}
	if (m->holdout >= 0)
	{
		/* its buffers in the order pgdl.fit(..., holdout => p) evaluates them */
		hold_partition(ids[0], m->holdout);
		for_each_buffer(&src->train, m->holdout, &src->held[m->holdout], evaluate_cb, &us);
		MemoryContextDelete(cxt);
		return;
	}
	for (int k = 0; k < n; k++)
		if (nns[k] && mop_needs_scores(shared, &shared->models[ids[k]]))
			us.members[k].scores = pgdl_scores_begin(nns[k], src->valid.classification, cxt);
	if (!*src->validation_loaded)
	{
		load(&src->valid, -1, src->held_validation);
		*src->validation_loaded = true;
	}
	for_each_buffer(&src->valid, -1, src->held_validation, evaluate_cb, &us);
	for (int k = 0; k < n; k++)
		if (us.members[k].scores)
		{
			pgdl_scores_finish(us.members[k].scores, metrics[k].scores);
			metrics[k].has_scores = true;
		}
	MemoryContextDelete(cxt);
}

/* Worker 0 may not have recorded the run yet: metrics and checkpoints need its id. */
static void
wait_for_run_row(void)
{
	for (;;)
	{
		int64		run_id;

		SpinLockAcquire(&shared->mutex);
		run_id = shared->run_id;
		SpinLockRelease(&shared->mutex);
		if (run_id)
		{
			pgdl_run_hold_as_worker(run_id);	/* before this worker writes a row of it */
			return;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* What model i's checkpoint holds: its blob, or with a frozen prefix the whole model, as pgdl.models will. */
static bytea *
checkpoint_blob(int i, NnModel *nn)
{
	MopModel   *m = &shared->models[i];
	WorkerSource *src = &sources[m->source];
	bytea	   *blob = palloc(VARHDRSZ + m->blob_len);

	SET_VARSIZE(blob, VARHDRSZ + m->blob_len);
	memcpy(VARDATA(blob), blobs + m->blob_offset, m->blob_len);
	if (src->frozen)
	{
		/* resume finds its frozen layers in it */
		NnError		err;
		NnModel    *joined = nn_model_join(src->frozen, nn, &err);

		if (joined == NULL)
			elog(ERROR, "pgdl worker: could not join a model to its frozen layers: %s", err.msg);
		pgdl_model_free_with(joined, CurrentMemoryContext);
		blob = pgdl_model_serialize(joined);
	}
	return blob;
}

/*
 * The metrics and checkpoints of the epochs the n models ids finished (one,
 * or a fused unit's members), committed together: each model's row and
 * checkpoint are as its own, one transaction for the unit.
 */
static void
record_epochs(const int32 *ids, int n, NnModel **nns, const PgdlEpochMetrics *metrics)
{
	bytea	  **blob = palloc(sizeof(bytea *) * n);

	for (int k = 0; k < n; k++)
		blob[k] = checkpoint_blob(ids[k], nns[k]);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	for (int k = 0; k < n; k++)
	{
		MopModel   *m = &shared->models[ids[k]];

		/* a fold's row says which; folds have no checkpoints: pgdl.resume refuses their runs (resume.c) */
		if (m->holdout >= 0)
			pgdl_run_record_fold_epoch(shared->run_id, m->config_id, m->holdout, &metrics[k]);
		else
		{
			pgdl_run_record_epoch(shared->run_id, m->config_id, &metrics[k]);
			pgdl_run_checkpoint(shared->run_id, m->config_id, metrics[k].epoch, blob[k]);
		}
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * With the mutex held: model i goes on to its next epoch, is done, diverged, or
 * waits at a rung.  The caller then decides every rung that can be (its
 * arrival, or its leaving the bracket, may be what a rung waited for).
 */
static void
advance_model(int i, const PgdlEpochMetrics *metrics)
{
	MopModel   *m = &shared->models[i];
	int32		epoch = metrics->epoch;
	int32		r = mop_rung_of(shared, m, epoch);

	m->epoch = epoch;
	m->visit = 0;
	m->last = *metrics;
	m->loss_sum = 0;
	m->correct = 0;
	m->n = 0;
	m->seconds = 0;
	if (metrics->diverged)
		m->state = MOP_DIVERGED;
	else if (epoch >= shared->epochs)
		m->state = MOP_DONE;
	else if (metrics->early_stopped)
		m->state = MOP_STOPPED;
	else if (r >= 0)
	{
		m->rung_key[r] = mop_rank_key(shared, metrics);
		m->rung_known |= 1u << r;
		m->state = MOP_RUNG;
	}
	else
		m->state = MOP_IDLE;
}

/* A model's epoch ends with an evaluation: on the validation set, or a fold's on its holdout. */
static bool
needs_evaluation(const MopModel *m)
{
	return shared->validation_id || m->holdout >= 0;
}

/* Model i's metrics of the epoch it finished, from its training counters and its evaluation (vstats). */
static void
epoch_metrics(int i, NnModel *nn, bool diverged, const NnBatchStats *vstats, PgdlEpochMetrics *metrics)
{
	MopModel   *m = &shared->models[i];
	/* a model that diverged at the first step of its epoch measured nothing */
	double		none = diverged ? get_float8_nan() : 0;

	metrics->epoch = m->epoch + 1;
	metrics->classification = sources[m->source].train.classification;
	metrics->diverged = diverged;
	metrics->steps = diverged ? nn->step : 0;
	metrics->train_loss = m->n ? m->loss_sum / m->n : none;
	metrics->train_accuracy = m->n ? (double) m->correct / m->n : none;
	metrics->has_validation = vstats->n > 0;
	metrics->validation_loss = vstats->n ? vstats->loss_sum / vstats->n : 0;
	metrics->validation_accuracy = vstats->n ? (double) vstats->correct / vstats->n : 0;
	metrics->seconds = m->seconds;
	metrics->images_per_second = m->seconds > 0 ? m->n / m->seconds : 0;
	metrics->predicted_seconds = m->predicted_seconds;
	/* the model is this worker's alone until advance_model releases it */
	metrics->early_stopped = pgdl_early_stop(&m->config, metrics, &m->patience) && metrics->epoch < shared->epochs;
}

/*
 * The end of the epoch of the n models ids (one, or members of a fused unit),
 * or of their training when they diverged: evaluate the others in one pass,
 * record and checkpoint each; then release them together, so that a fused
 * unit's members go on as one (no worker takes one alone meanwhile).
 */
static void
finish_epochs(const int32 *ids, int n, NnModel **nns, const bool *diverged)
{
	NnBatchStats *vstats = palloc0(sizeof(NnBatchStats) * n);
	PgdlEpochMetrics *metrics = palloc0(sizeof(PgdlEpochMetrics) * n);
	NnModel   **to_evaluate = palloc0(sizeof(NnModel *) * n);
	int			n_evaluate = 0;
	MopDecisions *d = mop_decisions_alloc(shared->n_models);
	bool		decided;

	for (int k = 0; k < n; k++)
		if (needs_evaluation(&shared->models[ids[k]]) && !diverged[k])
		{
			to_evaluate[k] = nns[k];
			n_evaluate++;
		}
	if (n_evaluate > 0)
	{
		instr_time	start,
					elapsed;

		INSTR_TIME_SET_CURRENT(start);
		evaluate(ids, n, to_evaluate, vstats, metrics);
		INSTR_TIME_SET_CURRENT(elapsed);
		INSTR_TIME_SUBTRACT(elapsed, start);
		validated_seconds += INSTR_TIME_GET_DOUBLE(elapsed);
		validations += n_evaluate;
	}
	for (int k = 0; k < n; k++)
		epoch_metrics(ids[k], nns[k], diverged[k], &vstats[k], &metrics[k]);

	wait_for_run_row();
	record_epochs(ids, n, nns, metrics);

	SpinLockAcquire(&shared->mutex);
	for (int k = 0; k < n; k++)
		advance_model(ids[k], &metrics[k]);
	decided = mop_decide(shared, d);
	SpinLockRelease(&shared->mutex);
	if (decided)
		record_decisions(d);
	wake_everyone();
}

/*
 * With the mutex held, once fit_multiple's time_limit has passed: a model
 * between two epochs (having trained one at least) trains no further.  It
 * stops as halving stops one, so that a rung that waited for it is decided
 * without it (mop_decide, whose decisions are merged into `all`), and a model
 * promoted there stops in turn.  A model in the middle of an epoch finishes it:
 * what is stored is a whole epoch's model, as trained without a limit.  Done
 * under the same hold as the take that follows, so that no worker takes a
 * model between its epochs after the limit.  Which epoch each model reaches
 * depends on the time; its bytes at that epoch do not.  Returns whether any
 * model stopped.
 */
static bool
stop_at_time_limit(MopDecisions *d, MopDecisions *all)
{
	bool		stopped = false;

	for (;;)
	{
		bool		any = false;

		for (int i = 0; i < shared->n_models; i++)
		{
			MopModel   *m = &shared->models[i];

			if (m->state == MOP_IDLE && m->visit == 0 && m->epoch >= 1)
			{
				m->state = MOP_STOPPED;
				any = true;
			}
		}
		if (!any)
			return stopped;
		stopped = true;
		if (!mop_decide(shared, d))
			return true;
		for (int i = 0; i < shared->n_models; i++)
			if (d->epoch[i] > 0)
			{
				all->epoch[i] = d->epoch[i];
				all->stopped[i] = d->stopped[i];
			}
	}
}

/* With the mutex held: whether model j waits where model `best`, just taken, was (a fused unit's member). */
static bool
co_member(const MopModel *best, const MopModel *j, bool evaluate)
{
	return best->fuse_unit >= 0 && j->fuse_unit == best->fuse_unit && j->epoch == best->epoch &&
		j->visit == best->visit && j->state == (evaluate ? MOP_EVALUATE : MOP_IDLE);
}

/*
 * Take a model to train, or (*evaluate) to evaluate at the end of its epoch,
 * with the members of its fused unit that wait at the same point, into
 * `taken`, the picked one first; returns how many (0: none).  The schedule's
 * rule picks it (mop_pick_model, which explain_schedule's simulation applies
 * too) from the state read under the mutex, and each is marked busy before
 * the mutex goes, so that no two workers take it.  Past the time limit the
 * models between epochs are stopped first, under the same hold.  Which
 * worker trains or evaluates a visit, when, and with which other models,
 * changes no byte of the models: a model's visits keep their order.
 */
static int
take_models(bool *all_finished, bool *evaluate)
{
	int			best;
	int			n_taken = 0;
	bool		busy[PGDL_MAX_WORKERS] = {false};
	bool		out_of_time = shared->time_limit_end != 0 && GetCurrentTimestamp() >= shared->time_limit_end;
	bool		stopped = false;

	/* not under the spinlock: an allocation may fail */
	if (candidates == NULL)
		candidates = MemoryContextAlloc(TopMemoryContext, sizeof(MopCandidate) * shared->n_models);
	if (taken == NULL)
		taken = MemoryContextAlloc(TopMemoryContext, sizeof(int32) * shared->n_models);
	if (out_of_time && limit_pass == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		limit_pass = mop_decisions_alloc(shared->n_models);
		limit_all = mop_decisions_alloc(shared->n_models);
		MemoryContextSwitchTo(old);
	}
	if (out_of_time)
		memset(limit_all->epoch, 0, sizeof(int32) * shared->n_models);
	*all_finished = true;
	SpinLockAcquire(&shared->mutex);
	if (out_of_time)
		stopped = stop_at_time_limit(limit_pass, limit_all);
	for (int i = 0; i < shared->n_models; i++)
	{
		MopModel   *m = &shared->models[i];
		MopCandidate *c = &candidates[i];

		if (m->state == MOP_BUSY)
			busy[m->worker] = true;
		if (!mop_finished(m->state))
			*all_finished = false;
		c->takeable = m->state == MOP_IDLE || m->state == MOP_EVALUATE;
		c->evaluate = m->state == MOP_EVALUATE;
		if (c->takeable)
		{
			/* a model to evaluate has visited its epoch's last partition: it has no next one */
			c->owner = c->evaluate ? -1 : shared->owner[mop_next_partition(m, shared->n_partitions)];
			c->left = mop_seconds_left(shared, m);
			c->replica_here = !c->evaluate && failover.held_here != NULL &&
				failover.held_here[mop_next_partition(m, shared->n_partitions)];
		}
	}
	best = mop_pick_model(candidates, shared->n_models, me, busy, shared->distributed);
	*evaluate = best >= 0 && candidates[best].evaluate;
	if (best >= 0)
	{
		taken[n_taken++] = best;
		for (int j = 0; j < shared->n_models; j++)
			if (j != best && co_member(&shared->models[best], &shared->models[j], *evaluate))
				taken[n_taken++] = j;
	}
	for (int k = 0; k < n_taken; k++)
	{
		MopModel   *m = &shared->models[taken[k]];

		m->state = MOP_BUSY;
		m->worker = me;
		if (!*evaluate)
			m->partition = mop_next_partition(m, shared->n_partitions);
	}
	SpinLockRelease(&shared->mutex);
	if (stopped)
	{
		record_decisions(limit_all);
		wake_everyone();
	}
	return n_taken;
}

/*
 * Model i is to visit (or, a fold, be evaluated on) a partition this worker did
 * not load at the start (one another worker owns, or inherited from a worker
 * that retired): hold it here
 * as the budget allows, once, for the models that come after (else it is read
 * from its table at each visit).
 */
static void
hold_partition(int i, int32 part)
{
	MopModel   *m = &shared->models[i];
	WorkerSource *src = &sources[m->source];

	if (src->tried[part])
		return;
	src->tried[part] = true;
	load(&src->train, part, &src->held[part]);
}

/* Model i as its blob in the segment holds it, freed with step_cxt. */
static NnModel *
model_of(int i, MemoryContext step_cxt)
{
	MopModel   *m = &shared->models[i];
	NnError		err;
	NnModel    *nn = nn_model_deserialize((const uint8_t *) blobs + m->blob_offset, m->blob_len, &err);

	if (nn == NULL)
		elog(ERROR, "pgdl worker: model of configuration " INT64_FORMAT " is corrupt: %s", m->config_id, err.msg);
	pgdl_model_free_with(nn, step_cxt);
	return nn;
}

/* The n models ids (one, or a fused unit's members) on their partition, here: one pass over its buffers. */
static void
visit_here(const int32 *ids, int n, Visit *v, MemoryContext step_cxt)
{
	MopModel   *first = &shared->models[ids[0]];
	UnitScan	us = {n, palloc0(sizeof(ScanArg) * n), &sources[first->source]};

	for (int k = 0; k < n; k++)
	{
		MopModel   *m = &shared->models[ids[k]];
		PgdlTrainConfig config = m->config;

		v[k].nn = model_of(ids[k], step_cxt);
		/* the model's own epoch sets its learning rate, whichever worker trains it */
		pgdl_config_at_epoch(&config, m->epoch, shared->epochs);
		us.members[k].train = pgdl_train_begin(v[k].nn, &config, step_cxt);
	}
	if (us.src->held[first->partition].complete && us.src->recompute.prefix == NULL)
	{
		/* in memory, nothing to run per buffer: each member's whole visit in turn keeps its state in cache */
		for (int k = 0; k < n; k++)
		{
			UnitScan	one = {1, &us.members[k], us.src};

			for_each_buffer(&us.src->train, first->partition, &us.src->held[first->partition], train_cb, &one);
		}
	}
	else
		/* read from its table, or a prefix to run: each buffer once, every member's steps on it */
		for_each_buffer(&us.src->train, first->partition, &us.src->held[first->partition], train_cb, &us);
	for (int k = 0; k < n; k++)
	{
		PgdlTrainState *state = us.members[k].train;

		pgdl_train_check_weights(state);
		v[k].stats = state->stats;
		v[k].diverged = state->diverged != PGDL_HEALTHY;
	}
}

/*
 * The node did not answer model m's visit within its deadline: it is fenced
 * (its query cancelled, the connection closed, so that a late answer is never
 * read), and the run ends with an error that names it; the leader's hint
 * names the run to resume.
 */
static void missed_deadline(PgdlNode *node, const MopModel *m, double deadline) pg_attribute_noreturn();
static void
missed_deadline(PgdlNode *node, const MopModel *m, double deadline)
{
	pgdl_node_fence(node);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("server \"%s\" did not answer within its deadline of %.1f s", node->name, deadline),
			 errdetail("Its visit of partition %d with configuration " INT64_FORMAT " was cancelled and its connection closed.",
					   m->partition, m->config_id),
			 errhint("Raise pgdl.node_deadline_floor or pgdl.node_deadline_multiple if the node is only slow.")));
}

/*
 * The nodes dropped in this run, this worker's and the others' alike (the
 * run's shared memory holds them): a node down at the start, or lost or fenced
 * by one worker, costs no other worker a visit, nor a deadline.  A worker whose
 * own node is dropped takes no other worker's visits for it.
 */
static void
share_lost(void)
{
	Oid			lost[MOP_MAX_LOST];
	int			n;
	ListCell   *lc;
	MemoryContext old;

	SpinLockAcquire(&shared->mutex);
	foreach(lc, failover.lost)
	{
		bool		known = false;

		for (int k = 0; k < shared->n_lost && !known; k++)
			known = shared->lost[k] == lfirst_oid(lc);
		if (!known && shared->n_lost < MOP_MAX_LOST)
			shared->lost[shared->n_lost++] = lfirst_oid(lc);
	}
	n = shared->n_lost;
	memcpy(lost, shared->lost, sizeof(Oid) * n);
	SpinLockRelease(&shared->mutex);
	old = MemoryContextSwitchTo(TopMemoryContext);
	for (int k = 0; k < n; k++)
	{
		if (list_member_oid(failover.lost, lost[k]))
			continue;
		failover.lost = lappend_oid(failover.lost, lost[k]);
		if (lost[k] == node->server && failover.held_here)
			memset(failover.held_here, 0, sizeof(bool) * failover.partitions);
	}
	MemoryContextSwitchTo(old);
}

/* Model i on its partition, on the node that holds it (or a replica, once that node is lost: failover.c). */
static void
visit_node(int i, Visit *v, MemoryContext step_cxt)
{
	MopModel   *m = &shared->models[i];
	MopSource  *ms = &shared->sources[m->source];
	double		deadline = mop_visit_deadline(shared, m);
	PgdlFailoverVisit fv = {m->partition, blobs + m->blob_offset, m->blob_len,
		ms->prefix_len ? blobs + ms->prefix_offset : NULL, ms->prefix_len, &m->config, deadline,
		psprintf("configuration " INT64_FORMAT, m->config_id),
	places[m->partition].server == node->server ? InvalidOid : node->server};
	PgdlVisit	result;
	PgdlNode   *answered;
	PgdlNode   *fenced = NULL;
	NnError		err;

	ereport(DEBUG1,
			(errmsg_internal("pgdl worker %d: configuration " INT64_FORMAT " visits partition %d on server \"%s\", deadline %.1f s",
							 me, m->config_id, m->partition, node->name, deadline)));
	/* frozen layers run on the node at every visit: distributed runs cache none (prepare.c) */
	share_lost();
	answered = pgdl_failover_visit(&failover, &places[m->partition], &fv, &result, &fenced);
	share_lost();
	if (answered == NULL)
		missed_deadline(fenced, m, deadline);
	v->nn = nn_model_deserialize((const uint8_t *) VARDATA(result.model), m->blob_len, &err);
	if (v->nn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("server \"%s\" returned a corrupt model for configuration " INT64_FORMAT,
						answered->name, m->config_id),
				 errdetail("%s.", err.msg)));
	pgdl_model_free_with(v->nn, step_cxt);
	v->stats = result.stats;
	v->diverged = result.diverged;
}

/*
 * The n models ids (one, or a fused unit's members) visit their partition;
 * then each goes on to its next visit, waits for its evaluation, or (diverged,
 * or no evaluation due) ends its epoch here.  A unit's time is shared evenly
 * by its members (pgdl.run_metrics.seconds).
 */
static void
train_unit(const int32 *ids, int n, MemoryContext step_cxt)
{
	MemoryContext old = MemoryContextSwitchTo(step_cxt);
	Visit	   *v = palloc0(sizeof(Visit) * n);
	int32	   *finish = palloc(sizeof(int32) * n);
	NnModel   **finish_nn = palloc(sizeof(NnModel *) * n);
	bool	   *finish_diverged = palloc(sizeof(bool) * n);
	int			n_finish = 0;
	instr_time	start,
				elapsed;
	double		seconds;

	INSTR_TIME_SET_CURRENT(start);
	if (node)
		visit_node(ids[0], &v[0], step_cxt);	/* n is 1: no fused units on a cluster (dsm.c) */
	else
		visit_here(ids, n, v, step_cxt);
	for (int k = 0; k < n; k++)
	{
		MopModel   *m = &shared->models[ids[k]];

		if (nn_model_serialized_size(v[k].nn) != m->blob_len)
			elog(ERROR, "pgdl worker: model of configuration " INT64_FORMAT " changed size", m->config_id);
		nn_model_serialize(v[k].nn, (uint8_t *) blobs + m->blob_offset);
	}
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	seconds = INSTR_TIME_GET_DOUBLE(elapsed);

	SpinLockAcquire(&shared->mutex);
	for (int k = 0; k < n; k++)
	{
		MopModel   *m = &shared->models[ids[k]];
		bool		epoch_done;
		bool		to_evaluate;

		m->loss_sum += v[k].stats.loss_sum;
		m->correct += v[k].stats.correct;
		m->n += v[k].stats.n;
		m->seconds += seconds / n;
		m->visit++;
		m->visited_by = me;
		/* a model that diverged stops here: its epoch ends with what it trained */
		epoch_done = m->visit == mop_epoch_visits(shared, m) || v[k].diverged;
		/* its evaluation is a task of its own, for any worker (take_models): the model is in its blob */
		to_evaluate = epoch_done && !v[k].diverged && needs_evaluation(m);
		if (!epoch_done || to_evaluate)
			m->state = to_evaluate ? MOP_EVALUATE : MOP_IDLE;
		else
		{
			finish[n_finish] = ids[k];
			finish_nn[n_finish] = v[k].nn;
			finish_diverged[n_finish++] = v[k].diverged;
		}
		shared->workers[me].examples += v[k].stats.n;
	}
	shared->workers[me].busy_seconds += seconds;
	SpinLockRelease(&shared->mutex);

	if (n_finish > 0)
		finish_epochs(finish, n_finish, finish_nn, finish_diverged);
	else
		wake_everyone();
	MemoryContextSwitchTo(old);
	MemoryContextReset(step_cxt);
}

/*
 * The end of the epoch of the n models ids (one, or a fused unit's members),
 * trained by this worker or another: evaluate them here in one pass, record
 * them, release them.
 */
static void
evaluate_unit(const int32 *ids, int n, MemoryContext step_cxt)
{
	MemoryContext old = MemoryContextSwitchTo(step_cxt);
	NnModel   **nns = palloc(sizeof(NnModel *) * n);
	bool	   *diverged = palloc0(sizeof(bool) * n);

	for (int k = 0; k < n; k++)
	{
		MopModel   *m = &shared->models[ids[k]];

		/* the model is this worker's until finish_epochs releases it: no lock to read it */
		ereport(DEBUG1,
				(errmsg_internal("pgdl worker %d: evaluates configuration " INT64_FORMAT " at the end of its epoch %d, visited last by worker %d",
								 me, m->config_id, m->epoch + 1, m->visited_by)));
		nns[k] = model_of(ids[k], step_cxt);
	}
	finish_epochs(ids, n, nns, diverged);
	MemoryContextSwitchTo(old);
	MemoryContextReset(step_cxt);
}

static void
run_task_sql(const char *sql)
{
	if (sql[0] != '\0' && SPI_execute(sql, false, 0) < 0)
		elog(ERROR, "pgdl worker: a feature cache task failed");
}

/* One feature cache task, in a transaction of its own, under its view's build lock (feature_cache.c). */
static void
run_task(const MopTask *task)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	if (task->relname[0] != '\0')
		pgdl_cache_lock_build(task->relname);
	PushActiveSnapshot(GetTransactionSnapshot());
	run_task_sql(plan_sql + task->before_offset);
	if (plan_sql[task->definition_offset] != '\0')
		pgdl_cache_create_view(task->relname, plan_sql + task->definition_offset);
	run_task_sql(plan_sql + task->sql_offset);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * The workers build, refresh and record the run's feature caches before anyone
 * trains, each taking the next task whose source is there.
 */
static void
run_cache_tasks(void)
{
	pgstat_report_activity(STATE_RUNNING, "pgdl worker: building feature caches");
	for (;;)
	{
		int			take = -1;
		bool		all_done = true;

		CHECK_FOR_INTERRUPTS();
		if (shared->abort)
			proc_exit(0);
		SpinLockAcquire(&shared->mutex);
		for (int t = 0; t < shared->n_tasks; t++)
		{
			MopTask    *task = &shared->tasks[t];

			if (task->state != MOP_TASK_DONE)
				all_done = false;
			if (take < 0 && task->state == MOP_TASK_PENDING &&
				(task->depends < 0 || shared->tasks[task->depends].state == MOP_TASK_DONE))
				take = t;
		}
		if (take >= 0)
			shared->tasks[take].state = MOP_TASK_RUNNING;
		SpinLockRelease(&shared->mutex);
		if (all_done)
			return;
		if (take >= 0)
		{
			run_task(&shared->tasks[take]);
			SpinLockAcquire(&shared->mutex);
			shared->tasks[take].state = MOP_TASK_DONE;
			SpinLockRelease(&shared->mutex);
			wake_everyone();
			continue;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

static PgdlDataset
dataset_copy(int64 id)
{
	PgdlDataset ds = *pgdl_dataset_by_id(id);

	/* the cache owns these; workers need only shapes and the table */
	ds.classes = NULL;
	ds.mean = ds.std = NULL;
	ds.normalization = NULL;
	return ds;
}

/* A cache view read as a packed table: its x are the prefix's outputs, already as the model wants them. */
static PgdlDataset
cache_dataset(const PgdlDataset *ds, const char *view, int32 n_features)
{
	PgdlDataset c = *ds;

	c.packed = DatumGetObjectId(DirectFunctionCall1(regclassin, CStringGetDatum(view)));
	c.n_features = n_features;
	return c;
}

/* Source s: the packed tables (source 0's buffers, when recomputing a prefix) or a prefix's cache views. */
static void
open_source(int s, const PgdlDataset *train_ds, const PgdlDataset *valid_ds)
{
	MopSource  *ms = &shared->sources[s];
	WorkerSource *src = &sources[s];

	if (s == 0 || !ms->cached)
	{
		src->train = *train_ds;
		src->valid = *valid_ds;
		src->held = s == 0 ? palloc0(sizeof(PgdlHeldPartition) * shared->n_partitions) : sources[0].held;
		src->tried = s == 0 ? palloc0(sizeof(bool) * shared->n_partitions) : sources[0].tried;
		src->held_validation = s == 0 ? palloc0(sizeof(PgdlHeldPartition)) : sources[0].held_validation;
		src->validation_loaded = s == 0 ? palloc0(sizeof(bool)) : sources[0].validation_loaded;
	}
	else
	{
		src->train = cache_dataset(train_ds, ms->view[0], ms->n_features);
		if (shared->validation_id)
			src->valid = cache_dataset(valid_ds, ms->view[1], ms->n_features);
		src->held = palloc0(sizeof(PgdlHeldPartition) * shared->n_partitions);
		src->tried = palloc0(sizeof(bool) * shared->n_partitions);
		src->held_validation = palloc0(sizeof(PgdlHeldPartition));
		src->validation_loaded = palloc0(sizeof(bool));
	}
	if (ms->prefix_len > 0)
	{
		NnError		err;

		src->frozen = nn_model_deserialize((const uint8_t *) blobs + ms->prefix_offset, ms->prefix_len, &err);
		if (src->frozen == NULL)
			elog(ERROR, "pgdl worker: a frozen prefix is corrupt: %s", err.msg);
		pgdl_model_free_with(src->frozen, data_cxt);
		if (!ms->cached)
			src->recompute = (PgdlPrefixRun) {.prefix = src->frozen, .cxt = data_cxt};
	}
}

/* The sources this worker's models train on, with their tables and prefixes. */
static void
open_sources(void)
{
	PgdlDataset train_ds,
				valid_ds;
	MemoryContext old;

	memset(&valid_ds, 0, sizeof(valid_ds));
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgdl_engine_prepare();
	train_ds = dataset_copy(shared->dataset_id);
	if (shared->validation_id)
		valid_ds = dataset_copy(shared->validation_id);
	old = MemoryContextSwitchTo(data_cxt);
	sources = palloc0(sizeof(WorkerSource) * shared->n_sources);
	for (int i = 0; i < shared->n_models; i++)
		if (!mop_finished(shared->models[i].state))
			sources[shared->models[i].source].used = true;
	for (int s = 1; s < shared->n_sources; s++)
		if (sources[s].used && !shared->sources[s].cached)
			sources[0].used = true; /* its buffers are source 0's */
	for (int s = 0; s < shared->n_sources; s++)
		open_source(s, &train_ds, &valid_ds);
	MemoryContextSwitchTo(old);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* The run's shared memory: the DSM segment the leader made, its table of contents. */
static void
attach(Datum main_arg)
{
	shm_toc    *toc;

	my_segment = dsm_attach(DatumGetUInt32(main_arg));
	if (my_segment == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgdl worker could not attach to its run's shared memory")));
	toc = shm_toc_attach(MOP_MAGIC, dsm_segment_address(my_segment));
	if (toc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgdl worker found bad shared memory")));
	shared = shm_toc_lookup(toc, MOP_KEY_SHARED, false);
	blobs = shm_toc_lookup(toc, MOP_KEY_BLOBS, false);
	plan_sql = shm_toc_lookup(toc, MOP_KEY_PLAN, false);
	run_config = shm_toc_lookup(toc, MOP_KEY_RUN_CONFIG, false);

	SpinLockAcquire(&shared->mutex);
	shared->workers[me].pid = MyProcPid;
	shared->workers[me].proc = MyProc;
	SpinLockRelease(&shared->mutex);
}

/* The leader says go once it knows how many workers it got. */
static void
wait_for_go(void)
{
	while (!shared->go && !shared->abort)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (shared->abort)
		proc_exit(0);
}

/* This worker's partitions of every source a model trains on, into memory as the budget allows. */
static void
load_partitions(void)
{
	pgstat_report_activity(STATE_RUNNING, "pgdl worker: loading partitions");
	for (int s = 0; s < shared->n_sources; s++)
	{
		WorkerSource *src = &sources[s];

		if (!src->used || (s > 0 && src->recompute.prefix))
			continue;			/* a recomputing source reads source 0's buffers */
		for (int p = 0; p < shared->n_partitions; p++)
			if (shared->owner[p] == me)
			{
				load(&src->train, p, &src->held[p]);
				src->tried[p] = true;
			}
	}
}

static bool
dropped_at_start(Oid server)
{
	for (int k = 0; k < shared->n_lost; k++)
		if (shared->lost[k] == server)
			return true;
	return false;
}

/* A worker whose partitions live on a node connects to it, as the caller's user mapping. */
static void
connect_node(void)
{
	Oid			server = shared->workers[me].server;
	bool		distributed;
	MemoryContext old;

	if (!OidIsValid(server))
		return;
	pgstat_report_activity(STATE_RUNNING, "pgdl worker: connecting to its node");
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	old = MemoryContextSwitchTo(data_cxt);
	places = pgdl_packed_places(sources[0].train.packed, shared->n_partitions, &distributed);
	MemoryContextSwitchTo(old);
	/* a partition whose node was down at the start is owned where a replica is (pgdl_cluster_route_around) */
	for (int p = 0; p < shared->n_partitions; p++)
		if (shared->owner[p] == me && places[p].server != server && !dropped_at_start(places[p].server))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition %d of the packed table moved while the run started", p)));
	node = pgdl_node_connect(server, true);
	pgdl_node_keep_partitions(node, shared->cache_bytes);
	old = MemoryContextSwitchTo(data_cxt);
	failover.home = node;
	failover.replicas = pgdl_packed_replicas(sources[0].train.packed, shared->n_partitions);
	failover.cache_bytes = shared->cache_bytes;
	failover.partitions = shared->n_partitions;
	failover.held_here = pgdl_failover_held_here(&failover, shared->n_partitions);
	MemoryContextSwitchTo(old);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * Whether this worker leaves the run now, as the leader asked so that another
 * job gets its slot (jobs.c): between two models, and never the last worker.
 * Its partitions go to the workers that stay, round robin.
 */
static bool
retire_if_asked(void)
{
	int			heirs[PGDL_MAX_WORKERS];
	int			n = 0;

	if (shared->retire_requests <= 0)
		return false;
	SpinLockAcquire(&shared->mutex);
	for (int w = 0; w < shared->n_workers; w++)
		if (w != me && !shared->workers[w].retired && !shared->workers[w].finished)
			heirs[n++] = w;
	if (shared->retire_requests <= 0 || n == 0)
	{
		SpinLockRelease(&shared->mutex);
		return false;
	}
	shared->retire_requests--;
	shared->workers[me].retired = true;
	for (int p = 0, k = 0; p < shared->n_partitions; p++)
		if (shared->owner[p] == me)
			shared->owner[p] = (int16) heirs[k++ % n];
	SpinLockRelease(&shared->mutex);
	wake_everyone();
	return true;
}

/* Train models that come to this worker's partitions until every model is done or the run stops. */
static void
train_models(MemoryContext step_cxt)
{
	instr_time	start,
				elapsed;

	pgstat_report_activity(STATE_RUNNING, "pgdl worker: training");
	for (;;)
	{
		bool		all_finished;
		bool		evaluate;
		int			n;

		CHECK_FOR_INTERRUPTS();
		if (shared->abort || retire_if_asked())
			return;
		if (BackendPidGetProc(shared->leader_pid) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_ADMIN_SHUTDOWN),
					 errmsg("pgdl worker %d stops: the backend that started its run (pid %d) is gone",
							me, (int) shared->leader_pid)));
		n = take_models(&all_finished, &evaluate);
		if (n > 0)
		{
			/* this worker busy, the others may take models of its partitions (take_models): they look again */
			wake_everyone();
			if (evaluate)
				evaluate_unit(taken, n, step_cxt);
			else
			{
				if (node == NULL)
					hold_partition(taken[0], shared->models[taken[0]].partition);
				train_unit(taken, n, step_cxt);
			}
			continue;
		}
		if (all_finished)
			break;
		INSTR_TIME_SET_CURRENT(start);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		INSTR_TIME_SET_CURRENT(elapsed);
		INSTR_TIME_SUBTRACT(elapsed, start);
		waited_seconds += INSTR_TIME_GET_DOUBLE(elapsed);
	}
	/* where 2 workers lose time against one: bench/mop.sh and TAP 002 read it */
	ereport(DEBUG1,
			(errmsg_internal("pgdl worker %d: trained %.2f s, validated %d model-epochs in %.2f s, waited %.2f s",
							 me, shared->workers[me].busy_seconds, validations, validated_seconds, waited_seconds)));
}

/* The first worker to fail tells the leader why, and every worker stops. */
static void
report_failure(void)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(TopMemoryContext);
	edata = CopyErrorData();
	SpinLockAcquire(&shared->mutex);
	if (shared->failed_worker < 0)
	{
		shared->failed_worker = me;
		shared->error_code = edata->sqlerrcode;
		snprintf(shared->error, sizeof(shared->error), "%s", edata->message);
	}
	shared->abort = true;
	SpinLockRelease(&shared->mutex);
	wake_everyone();
}

void
pgdl_mop_worker_main(Datum main_arg)
{
	MemoryContext step_cxt;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	memcpy(&me, MyBgworkerEntry->bgw_extra, sizeof(int));

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "pgdl worker");
	attach(main_arg);

	/* log in as the caller's session user, then become the role it runs as */
	pgdl_caller_connect(&shared->caller);
	SetConfigOption("pgdl.max_model_memory", psprintf("%d", shared->max_model_memory), PGC_SUSET, PGC_S_OVERRIDE);
	/* the leader's ISA cap, which this CPU (the leader's) has: the same kernels, the same bytes */
	SetConfigOption("pgdl.cpu_isa", shared->cpu_isa, PGC_SUSET, PGC_S_OVERRIDE);
	pgstat_report_appname("pgdl worker");

	PG_TRY();
	{
		data_cxt = AllocSetContextCreate(TopMemoryContext, "pgdl worker data", ALLOCSET_DEFAULT_SIZES);
		step_cxt = AllocSetContextCreate(TopMemoryContext, "pgdl worker step", ALLOCSET_DEFAULT_SIZES);
		budget = shared->cache_bytes;
		wait_for_go();
		/* the leader's plan (devices.c): models and cache builds move there, the context made at the first */
		if (!OidIsValid(shared->workers[me].server))
			pgdl_device_assign_process(shared->workers[me].device);
		if (me == 0)
			create_run();
		run_cache_tasks();
		open_sources();
		if (OidIsValid(shared->workers[me].server))
			connect_node();
		else
			load_partitions();
		train_models(step_cxt);
	}
	PG_CATCH();
	{
		report_failure();
		PG_RE_THROW();
	}
	PG_END_TRY();

	SpinLockAcquire(&shared->mutex);
	shared->workers[me].finished = true;
	SpinLockRelease(&shared->mutex);
	wake_everyone();
	dsm_detach(my_segment);
	proc_exit(0);
}
