/*
 * mop.h -- model hopper parallelism: what the leader (mop.c) and its
 * background workers (worker.c) share in a DSM segment.
 *
 * Worker w owns partitions p with owner[p] == w and keeps their buffers in
 * memory; a partition that lives on a node is owned by a worker that trains
 * there over libpq (the model travels, the buffers stay on the node).  Models
 * hop: a model's slot holds its serialized state; a worker takes an idle model
 * whose next partition (in the model's seeded visiting order) is one of its
 * own, trains it on that partition, writes it back and releases it.  A model
 * is therefore never trained by two workers at once, visits every
 * partition once per epoch in the same order as pgdl.fit, and ends with the
 * same bytes whatever the number of workers or the timing.
 */
#ifndef PGDL_MOP_H
#define PGDL_MOP_H

#include "storage/dsm.h"
#include "storage/proc.h"
#include "storage/spin.h"

#include "pgdl.h"

#define MOP_MAGIC			0x70676d70	/* "pgmp" */
#define MOP_MAX_SOURCES		65	/* the packed tables, and one per frozen prefix */

/* shm_toc keys */
#define MOP_KEY_SHARED		1
#define MOP_KEY_BLOBS		2
#define MOP_KEY_PLAN		3	/* the SQL of the run's feature cache tasks */
#define MOP_KEY_RUN_CONFIG	4	/* pgdl.runs.config (jsonb), for worker 0 to record */
#define MOP_MAX_TASKS		(2 * MOP_MAX_SOURCES)

typedef enum MopModelState
{
	MOP_IDLE = 0,				/* waiting for a worker that owns its next partition */
	MOP_BUSY,					/* being trained or evaluated by `worker` */
	MOP_RUNG,					/* successive halving: waiting for the others to reach the rung */
	MOP_DONE,					/* trained for all its epochs */
	MOP_STOPPED,				/* stopped early by successive halving */
	MOP_DIVERGED				/* its loss or weights became NaN or infinite: trained no more */
} MopModelState;

/* A model no worker will take again. */
static inline bool
mop_finished(MopModelState state)
{
	return state == MOP_DONE || state == MOP_STOPPED || state == MOP_DIVERGED;
}

/*
 * What a model trains on: source 0 is the packed tables; a configuration with
 * a frozen prefix reads that prefix's feature caches, or runs the prefix (kept
 * as a blob) over the packed tables at every visit.  Checkpoints are whole
 * models: the prefix joined to the trained layers.
 */
typedef struct MopSource
{
	bool		cached;
	char		view[2][2 * NAMEDATALEN + 8];	/* training, validation cache views */
	int32		n_features;		/* x per example, as the trainable layers see it */
	Size		prefix_offset;	/* the frozen prefix in the blob area */
	Size		prefix_len;		/* 0: none (source 0) */
} MopSource;

/* A feature cache's build, refresh or reuse: any worker runs it before training starts. */
typedef enum MopTaskState
{
	MOP_TASK_PENDING = 0,
	MOP_TASK_RUNNING,
	MOP_TASK_DONE
} MopTaskState;

typedef struct MopTask
{
	Size		sql_offset;		/* in the plan area, NUL-terminated */
	int32		depends;		/* a task to wait for, or -1 */
	MopTaskState state;
} MopTask;

typedef struct MopModel
{
	int64		config_id;
	int32		source;			/* index into MopShared.sources */
	PgdlTrainConfig config;
	double		cost;			/* training FLOPs per example: the schedule's guess without a prediction */
	double		predicted_seconds;	/* an epoch's training, predicted (throughput.c): for pgdl.run_metrics */
	MopModelState state;
	int32		epoch;			/* epochs completed */
	int32		visit;			/* partitions visited in the current epoch */
	int32		worker;			/* when busy */
	int32		partition;		/* when busy */
	Size		blob_offset;	/* in the blob area */
	Size		blob_len;
	/* the current epoch, summed over its sub-epochs */
	double		loss_sum;
	int64		correct;
	int64		n;
	double		seconds;
	PgdlEpochMetrics last;		/* of the last completed epoch, once epoch > 0 */
} MopModel;

typedef struct MopWorker
{
	Oid			server;			/* the node it trains on, over libpq; invalid: here */
	int32		device;			/* where it trains here (devices.c): PGDL_DEVICE_CPU or _CUDA_N */
	pid_t		pid;
	PGPROC	   *proc;
	bool		finished;		/* exited normally */
	int64		examples;		/* trained, for progress */
	double		busy_seconds;
} MopWorker;

typedef struct MopShared
{
	slock_t		mutex;
	uint32		magic;
	PgdlCaller	caller;			/* workers connect as it */
	int64		dataset_id;
	int64		validation_id;	/* 0: none */
	int64		run_id;			/* the pgdl.runs row, inserted by worker 0 */
	int32		n_models;
	int32		n_workers;
	int32		n_partitions;
	bool		distributed;	/* some partitions live on nodes (cluster.c) */
	int16		owner[PGDL_MAX_PARTITIONS];	/* the worker that trains models on each partition */
	int32		epochs;
	int32		eta;			/* successive halving; 0: train every model for all epochs */
	int64		cache_bytes;	/* per worker, for buffers */
	int			max_model_memory;	/* kB: the leader's pgdl.max_model_memory, which workers apply */
	PGPROC	   *leader;
	pid_t		leader_pid;		/* workers stop when it is gone (a FATAL skips the leader's cleanup) */
	bool		go;				/* workers may start: n_workers is final */
	int32		n_tasks;
	MopTask		tasks[MOP_MAX_TASKS];
	int32		n_sources;
	MopSource	sources[MOP_MAX_SOURCES];
	bool		abort;
	int32		failed_worker;	/* -1: none */
	int			error_code;		/* its SQLSTATE */
	char		error[512];
	MopWorker	workers[PGDL_MAX_WORKERS];
	MopModel	models[FLEXIBLE_ARRAY_MEMBER];
} MopShared;

#define MOP_SHARED_SIZE(n_models) (offsetof(MopShared, models) + sizeof(MopModel) * (n_models))

/* mop.c: scheduling rules both sides apply */

/* The partition a model visits next, from its seed, epoch and visit. */
extern int32 mop_next_partition(const MopModel *m, int32 n_partitions);
/* Seconds of training model m has left before its next decision (a rung, or its end), predicted. */
extern double mop_seconds_left(const MopShared *shared, const MopModel *m);
/* Successive halving: is the end of `epoch` a rung? */
extern bool mop_is_rung(const MopShared *shared, int32 epoch);
/*
 * With the mutex held: when every running model waits at the rung `epoch`, keep
 * the best 1/eta and stop the rest; decided[i]/stopped[i] say what happened.
 */
extern bool mop_decide_rung(MopShared *shared, int32 epoch, bool *decided, bool *stopped);
/*
 * With the mutex held, after a model diverged (it leaves the bracket): decide
 * the rung the others wait at, if it waited only for that model; *epoch is the rung's.
 */
extern bool mop_decide_waiting_rung(MopShared *shared, int32 *epoch, bool *decided, bool *stopped);
/* The decisions into pgdl.run_metrics.decision; needs a transaction. */
extern void mop_record_decisions(const MopShared *shared, int32 epoch, const bool *decided, const bool *stopped);

/* worker.c */
extern PGDLLEXPORT void pgdl_mop_worker_main(Datum main_arg);

#endif							/* PGDL_MOP_H */
