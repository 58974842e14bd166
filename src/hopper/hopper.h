/*
 * hopper/hopper.h -- model hopper parallelism: configuration sets and search
 * spaces (configs.c; Bayesian search in tpe.c and tpe_search.c),
 * what the leader (mop.c and the files of hopper/leader.h) and its background
 * workers (worker.c) share in a DSM segment, the one scheduling rule both the
 * workers and the explain simulator apply (schedule.c), halving strategies
 * (halving.c), the server's job queue (jobs.c) and pgdl.progress
 * (progress.c).  The top of the glue: no other folder includes it.
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
#ifndef PGDL_HOPPER_H
#define PGDL_HOPPER_H

#include "datatype/timestamp.h"
#include "storage/dsm.h"
#include "storage/proc.h"
#include "storage/spin.h"
#include "utils/array.h"
#include "utils/jsonb.h"

#include "cluster/cluster.h"
#include "plan/plan.h"
#include "hopper/tpe.h"

#define MOP_MAGIC			0x70676d70	/* "pgmp" */
#define MOP_MAX_SOURCES		65	/* the packed tables, and one per frozen prefix */

/* shm_toc keys */
#define MOP_KEY_SHARED		1
#define MOP_KEY_BLOBS		2
#define MOP_KEY_PLAN		3	/* the SQL of the run's feature cache tasks */
#define MOP_KEY_RUN_CONFIG	4	/* pgdl.runs.config (jsonb), for worker 0 to record */
#define MOP_MAX_LOST		64	/* nodes a run records as dropped; more are found by each worker */
#define MOP_MAX_TASKS		(2 * MOP_MAX_SOURCES)
#define MOP_MAX_RUNGS		17	/* epochs / eta^k >= 1 for k <= 16: epochs <= 100000, eta >= 2 */

/* What decides which models go on (halving.c). */
typedef enum MopStrategy
{
	MOP_ALL = 0,				/* every model for every epoch */
	MOP_SUCCESSIVE_HALVING,		/* one bracket, every model in it, decided when all reach a rung */
	MOP_HYPERBAND,				/* several brackets of successive halving (Li et al. 2018) */
	MOP_ASHA					/* asynchronous successive halving (Li et al. 2020), decided in a fixed order */
} MopStrategy;

typedef enum MopModelState
{
	MOP_IDLE = 0,				/* waiting for a worker that owns its next partition */
	MOP_BUSY,					/* being trained or evaluated by `worker` */
	MOP_RUNG,					/* waiting at a rung for its decision */
	MOP_DONE,					/* trained for all its epochs */
	MOP_STOPPED,				/* stopped early by successive halving */
	MOP_DIVERGED,				/* its loss or weights became NaN or infinite: trained no more */
	MOP_EVALUATE				/* its epoch trained, waiting for any worker to evaluate and record it */
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
	char		relname[NAMEDATALEN];	/* the cache view whose build lock it takes; "": none */
	Size		before_offset;	/* PgdlCacheTask's before, definition and sql: in the plan area, */
	Size		definition_offset;	/* NUL-terminated */
	Size		sql_offset;
	int32		depends;		/* a task to wait for, or -1 */
	MopTaskState state;
} MopTask;

typedef struct MopModel
{
	int64		config_id;
	int32		source;			/* index into MopShared.sources */
	int32		holdout;		/* folds: the partition it never trains on, validated on instead; -1: none */
	PgdlTrainConfig config;
	double		cost;			/* training FLOPs per example: the schedule's guess without a prediction */
	double		predicted_seconds;	/* an epoch's training, predicted (throughput.c): for pgdl.run_metrics */
	MopModelState state;
	int32		epoch;			/* epochs completed */
	int32		visit;			/* partitions visited in the current epoch */
	int32		worker;			/* when busy */
	int32		partition;		/* when busy */
	int32		visited_by;		/* the worker of its last visit, for a DEBUG1 line of its evaluation */
	Size		blob_offset;	/* in the blob area */
	Size		blob_len;
	/* the current epoch, summed over its sub-epochs */
	double		loss_sum;
	int64		correct;
	int64		n;
	double		seconds;
	PgdlEpochMetrics last;		/* of the last completed epoch, once epoch > 0 */
	/* halving (halving.c) */
	int32		bracket;		/* its bracket s: rungs at epochs / eta^k for k = s..1; 0: none */
	int32		next_arrival;	/* asha: the model after it in the order rungs are decided in; -1: last */
	uint32		rung_known;		/* bit r: it completed rung r (from the bottom) without diverging */
	double		rung_key[MOP_MAX_RUNGS];	/* its rank key there (mop_rank_key) */
	PgdlPatience patience;		/* early stopping and restore_best: its best epoch and the epochs since */
	/*
	 * pgdl.fuse_models: its fused unit, the index of the unit's first model
	 * (-1: none).  A worker that takes a model takes with it every member of
	 * its unit that waits at the same point (epoch, visit): one hop, one pass
	 * over the buffers, each member's own steps on them (worker.c).
	 */
	int32		fuse_unit;
} MopModel;

typedef struct MopWorker
{
	Oid			server;			/* the node it trains on, over libpq; invalid: here */
	int32		device;			/* where it trains here (devices.c): PGDL_DEVICE_CPU or _CUDA_N */
	double		pace;			/* its node's predicted time against this server's (1 here) */
	pid_t		pid;
	PGPROC	   *proc;
	bool		finished;		/* exited normally */
	bool		retired;		/* left the run early, for another job (jobs.c): its partitions went to others */
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
	bool		folds;			/* cross-validation: a model per (configuration, held-out partition) */
	int16		owner[PGDL_MAX_PARTITIONS];	/* the worker that trains models on each partition */
	/* nodes dropped for the rest of the run: down at its start, or lost or fenced by a worker (failover.c) */
	int32		n_lost;
	Oid			lost[MOP_MAX_LOST];
	int32		epochs;
	MopStrategy strategy;
	int32		eta;			/* halving; 0: train every model for all epochs */
	int32		s_max;			/* halving: the most rungs a bracket has */
	int32		first_arrival;	/* asha: the first model in the order rungs are decided in */
	PgdlRankMetric rank_by;		/* what ranks the models at rungs and on the leaderboard */
	int64		cache_bytes;	/* per worker, for buffers */
	int			max_model_memory;	/* kB: the leader's pgdl.max_model_memory, which workers apply */
	char		cpu_isa[16];	/* and its pgdl.cpu_isa */
	double		deadline_multiple;	/* the leader's pgdl.node_deadline_multiple (0: none) */
	double		deadline_floor; /* and pgdl.node_deadline_floor, in seconds */
	TimestampTz time_limit_end; /* fit_multiple's time_limit: no model starts an epoch after it; 0: none */
	PGPROC	   *leader;
	pid_t		leader_pid;		/* workers stop when it is gone (a FATAL skips the leader's cleanup) */
	bool		go;				/* workers may start; n_workers grows only when the leader adds one */
	int32		retire_requests;	/* workers the leader asks to leave, for other jobs (fair share) */
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

/* schedule.c: the schedule's arithmetic, which workers, leader and pgdl.progress share */

/* The partition of a model's visit `visit` in epoch `epoch` (0-based), from its seed (holdout -1: none). */
extern int32 mop_visit_partition(uint64 seed, int32 epoch, int32 visit, int32 n_partitions, int32 holdout);
/* The visits a model makes per epoch: every partition, but its held-out one. */
extern int32 mop_epoch_visits(const MopShared *shared, const MopModel *m);
/* The partition a model visits next, from its seed, epoch and visit. */
extern int32 mop_next_partition(const MopModel *m, int32 n_partitions);
/* Seconds of training model m has left to its last epoch, predicted: the schedule's priority. */
extern double mop_seconds_left(const MopShared *shared, const MopModel *m);
/* Seconds model m's next visit on a node may take before the node is fenced; 0: no deadline. */
extern double mop_visit_deadline(const MopShared *shared, const MopModel *m);
/* A run's seconds left as the calibrated estimate predicts them, shared by workers (0: its own); <0: unknown. */
extern double mop_predicted_seconds_left(const MopShared *shared, int workers);

/* A model as the rule for taking one sees it (a worker's shared state, or explain.c's simulation). */
typedef struct MopCandidate
{
	bool		takeable;		/* idle: no worker trains it and it waits at no rung */
	bool		evaluate;		/* when takeable: its epoch's evaluation is due, which any worker may run */
	int32		owner;			/* when takeable, not evaluate: the worker that owns its next partition */
	double		left;			/* when takeable: seconds it has left to train, its priority */
	bool		replica_here;	/* distributed: the worker's node holds a replica of its next partition */
} MopCandidate;

/*
 * The model worker `worker` takes among n candidates, given which workers are
 * busy (training a model); -1: none.
 */
extern int32 mop_pick_model(const MopCandidate *candidates, int32 n, int32 worker, const bool *busy,
							bool distributed);

/* halving.c: the rungs, and the decisions taken there */

/* What a decision pass decided: epoch[i] > 0 for a model decided at that rung, stopped[i] how. */
typedef struct MopDecisions
{
	int32	   *epoch;
	bool	   *stopped;
	int32	   *scratch;		/* n_models, for the pass */
	bool	   *promote;		/* n_models, for the pass */
} MopDecisions;

/* The most rungs a bracket can have for shared->epochs and shared->eta. */
extern int32 mop_s_max(int32 epochs, int32 eta);
/* The epoch of rung r (from the bottom) of bracket s. */
extern int32 mop_rung_epoch(const MopShared *shared, int32 s, int32 r);
/* The rung (from the bottom) of model m that ends at `epoch`, or -1. */
extern int32 mop_rung_of(const MopShared *shared, const MopModel *m, int32 epoch);
/*
 * Each model's bracket (hyperband's from the seed), and asha's order from each
 * model's training FLOPs per example (cost); the leader, before workers start.
 */
extern void mop_assign_brackets(MopShared *shared, uint64 seed, const double *cost);
/* Rank key of a set of metrics (validation loss, else training loss); NaN ranks last. */
/* An epoch's rank key by the run's rank_by, lower first (mop_compare_loss orders it, NaN last). */
extern double mop_rank_key(const MopShared *shared, const PgdlEpochMetrics *m);
/* The metrics of the epoch a model is stored as: restore_best's best epoch, else its last. */
extern const PgdlEpochMetrics *mop_stored_metrics(const MopModel *m);
/* store.c: the leaderboard's order of two models (diverged last, then rank_by, then configuration id). */
extern int	mop_compare_models(const MopShared *shared, const MopModel *x, const MopModel *y);
/* Whether a model's validation pass keeps its predictions: rank_by or its monitor needs more than loss and accuracy. */
extern bool mop_needs_scores(const MopShared *shared, const MopModel *m);
extern int	mop_compare_loss(double a, double b);
extern MopDecisions *mop_decisions_alloc(int32 n_models);
/*
 * With the mutex held: decide every rung whose decision the models' state
 * allows (the strategy's rule), set the models' states; true if any was decided.
 */
extern bool mop_decide(MopShared *shared, MopDecisions *d);
/* The decisions into pgdl.run_metrics (decision, bracket); needs a transaction. */
extern void mop_record_decisions(const MopShared *shared, const MopDecisions *d);
extern const char *mop_strategy_name(MopStrategy s);

/* configs.c: configuration sets, and the search spaces of random_search and tpe_search */

/* An error for an empty set name. */
extern void mop_check_set_name(text *set_name);
/* Rows (set_name, arch[i], configs[i]) added; ids (when not NULL) each row's id, 0 when the set had it; returns how many are new. */
extern int32 mop_configs_insert(text *set_name, const int64 *arch, Jsonb *const *configs, int n, int64 *ids);

/* A search space read and checked: its keys in name order and the architecture, as tpe.h's parameters. */
typedef struct MopSpace MopSpace;

extern MopSpace *mop_space_parse(ArrayType *architectures, Jsonb *space);
/* Its parameters: each key's, then the architecture's (a choice among the list). */
extern const TpeParam *mop_space_params(const MopSpace *space, int32 *n_params);
/* A point's canonical configuration and its architecture; an error names `function`'s sample (0: none). */
extern Jsonb *mop_space_config(const MopSpace *space, const double *point, const char *function, int sample,
							   int64 *arch);
/* Every value of each key, bounds included, a valid configuration: an error before anything is trained. */
extern void mop_space_check(const MopSpace *space, uint64 seed, const char *function);

/* worker.c */
extern PGDLLEXPORT void pgdl_mop_worker_main(Datum main_arg);

/* jobs.c: the server's queue for pgdl workers (pgdl.max_workers in all) */
/* pgdl.fit_multiple's priority: orders one role's own queued jobs (jobs.c) */
#define PGDL_PRIORITY_MIN		(-100)
#define PGDL_PRIORITY_MAX		100
/* how often a queued job looks at the queue, and a running job's leader at its fair share */
#define PGDL_JOBS_POLL_MS		100
extern int	pgdl_jobs_acquire(int wanted, bool need_all, int priority, double predicted_seconds);
extern void pgdl_jobs_release(void);
extern void pgdl_jobs_release_one(void);
extern bool pgdl_jobs_take_one(void);
extern int	pgdl_jobs_fair_share(bool *others_waiting);
/* progress.c: a run's seconds left as the calibrated estimate predicts them; negative: unknown */
extern double pgdl_run_predicted_seconds_left(int64 run_id, int workers);

#endif							/* PGDL_HOPPER_H */
