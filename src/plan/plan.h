/*
 * plan/plan.h -- knowing the cost: this server's throughput profile and the
 * step times it predicts (throughput.c, calibrate.c), pgdl.estimate
 * (estimate.c), and the planner of materialized feature layers
 * (feature_cache.c).
 */
#ifndef PGDL_PLAN_H
#define PGDL_PLAN_H

#include "train/train.h"

/* throughput.c */
#define PGDL_PROFILE_VERSION	1
#define PGDL_PROFILE_MAX_POINTS	512

/* What a profile measured of one layer kind (or update, or step): seconds per unit of size per example. */
typedef struct PgdlProfilePoint
{
	int			kind;
	double		size;
	int32_t		batch;
	int32_t		kernel;			/* a convolution's: its cost per FLOP depends on it; 0: none */
	double		unit;
} PgdlProfilePoint;

typedef struct PgdlProfile
{
	int64_t		id;				/* 0: none; predictions come from pgdl.cpu_gflops */
	int32_t		workers;		/* that ran at once when it measured concurrency */
	double		compute_ratio;	/* a worker's step time with `workers` running vs alone: dense, conv2d */
	double		memory_ratio;	/* the same for everything else */
	int			n;
	PgdlProfilePoint points[PGDL_PROFILE_MAX_POINTS];
} PgdlProfile;

/* One training step of a network, predicted. */
typedef struct PgdlStepPrediction
{
	double		compute;		/* seconds in dense and conv2d layers */
	double		memory;			/* seconds in the rest: memory-bound layers, update, fixed cost */
	double		read;			/* seconds to read the batch from its packed table (first epoch) */
} PgdlStepPrediction;

/* The newest profile of this server (system identifier and host name), or id 0. */
extern void pgdl_profile_load(PgdlProfile *prof);
extern void pgdl_profile_add_point(PgdlProfile *prof, const char *kind, double size, int32_t batch,
								   int32_t kernel, double seconds);
/* Seconds the profile predicts for one kind at a size and batch; -1 when it has no point of it. */
extern double pgdl_profile_kind_seconds(const PgdlProfile *prof, const char *kind, double size, int32_t batch);
/* The same for a convolution's kind, from the points of the measured kernel nearest to `kernel`. */
extern double pgdl_profile_conv_seconds(const PgdlProfile *prof, const char *kind, double size, int32_t batch,
										int32_t kernel);
/* A training step of spec at batch with optimizer opt (the spec is valid). */
extern void pgdl_predict_step(const PgdlProfile *prof, const NnSpec *spec, const NnOptim *opt, int32_t batch,
							  PgdlStepPrediction *out);
/*
 * Seconds per step of one worker while `workers` train at once; reading: with
 * the batch read from its packed table (an epoch that does not find its
 * buffers in memory: pgdl.fit's first), else from memory.
 */
extern double pgdl_predict_step_seconds(const PgdlProfile *prof, const PgdlStepPrediction *p, int workers,
										bool reading);
/* Training images per second of one worker while `workers` train at once. */
extern double pgdl_predict_images_per_second(const PgdlProfile *prof, const NnSpec *spec, const NnOptim *opt,
											 int32_t batch, int workers, bool reading);
/* Seconds to start that many background workers (0 without a profile). */
extern double pgdl_profile_worker_start_seconds(const PgdlProfile *prof, int workers);
/* Seconds to read `floats` from a packed table (0 without a profile). */
extern double pgdl_profile_read_seconds(const PgdlProfile *prof, double floats);
/* Seconds a process takes to first touch `bytes` of shared memory others wrote (0 without a profile). */
extern double pgdl_profile_fault_seconds(const PgdlProfile *prof, double bytes);
/* pgdl_profile_read_seconds in a process new to the table's shared buffers: a worker. */
extern double pgdl_profile_worker_read_seconds(const PgdlProfile *prof, double floats);
/*
 * A pgdl.fit_multiple model's work besides training, by its parameters (0
 * without a profile, or one that did not measure it): at each visit of a
 * partition (its blob read, first step, written back), and a row of its
 * blob written (a checkpoint at the end of each epoch, or the model stored).
 */
extern double pgdl_profile_visit_seconds(const PgdlProfile *prof, double params);
extern double pgdl_profile_checkpoint_seconds(const PgdlProfile *prof, double params);
/*
 * A pgdl.fit_multiple run's work for one model of `params` parameters besides
 * training: its visits of `partitions` partitions and its checkpoints over
 * `epochs`, shared by `workers` (0 without a profile, or one that did not
 * measure them).
 */
extern double pgdl_profile_model_seconds(const PgdlProfile *prof, double params, int epochs, int partitions,
										 int workers);

/* feature_cache.c: the planner of materialized feature layers (pgdl.feature_cache) */

typedef enum PgdlCacheAction
{
	PGDL_CACHE_RECOMPUTE = 0,	/* the prefix runs for every configuration and epoch */
	PGDL_CACHE_REUSE,			/* a valid cache exists */
	PGDL_CACHE_BUILD,			/* a new cache */
	PGDL_CACHE_REFRESH,			/* a stale cache of the same weights: its source changed */
	PGDL_CACHE_REBUILD			/* a stale cache of other weights: dropped and built anew */
} PgdlCacheAction;

typedef struct PgdlCacheSide	/* a group's cache of one packed table */
{
	const PgdlDataset *ds;
	char	   *version;		/* pgdl.packed_version of its packed table now */
	PgdlCacheAction action;
	int64		cache_id;		/* the pgdl.feature_cache row found, or 0 */
	char	   *old_view;		/* its view */
	double		existing_bytes;
	char	   *view;			/* the view to read (qualified, quoted) */
	char	   *relname;		/* its name in pgdl_cache, as is */
	double		bytes;			/* predicted storage */
	int			task;			/* its PgdlCacheTask, when materialized */
} PgdlCacheSide;

/*
 * What a worker does in a transaction of its own before training: a build,
 * refresh or reuse of a cache.  Under the cache's build lock (all but a
 * reuse), `before`, then the view made from `definition` (a build), then `sql`.
 */
typedef struct PgdlCacheTask
{
	char	   *relname;		/* the view in pgdl_cache whose build lock it takes; "": none */
	char	   *before;			/* SQL run first: a rebuild drops the old view; or "" */
	char	   *definition;		/* the query of a view to make (pgdl_cache_create_view); or "" */
	char	   *sql;
	int			depends;		/* the task that must be done first (a staged cache's source), or -1 */
} PgdlCacheTask;

/* Configurations that share a frozen prefix (its weights' hash and depth). */
typedef struct PgdlCacheGroup
{
	int64		base_id;
	char	   *base_name;
	int32		depth;
	char		hash[65];
	NnModel    *prefix;			/* a member configuration's */
	int32		n_configs;
	int64		feature_floats; /* per example */
	double		prefix_flops;	/* forward, per example */
	int			staged_from;	/* group computed from, or -1 */
	PgdlCacheAction action;
	char	   *reason;
	PgdlCacheSide side[2];		/* the training set, the validation set */
	double		bytes;			/* predicted storage of both */
	double		recompute_seconds;
	double		materialize_seconds;
	double		seconds;		/* of the chosen way */
	double		compute_flops;	/* of the chosen way */
} PgdlCacheGroup;

typedef struct PgdlCachePlan
{
	int			n_groups;
	PgdlCacheGroup *groups;		/* shallower first */
	List	   *tasks;			/* of PgdlCacheTask *, each cache's work, shallower first */
	double		budget_bytes;
	double		used_bytes;		/* by every registered cache before the run */
} PgdlCachePlan;

/*
 * Group transfers[0 .. n) (NULL: not a transfer configuration) and decide per
 * group; group_of[i] is configuration i's group, or -1.  mode: auto, on, off,
 * or PGDL_CACHE_ON_NODES: a distributed packed table, whose nodes recompute.
 */
#define PGDL_CACHE_ON_NODES "nodes"
extern PgdlCachePlan *pgdl_cache_plan(const PgdlDataset *train, const PgdlDataset *valid,
									  PgdlTransfer **transfers, int n, int32 epochs, int32 workers,
									  const char *mode, int *group_of);
extern const char *pgdl_cache_action_name(PgdlCacheAction action);
/*
 * Decide group g of a plan made with PGDL_CACHE_ON_NODES, whose caches are on
 * the nodes: `action` what they need, existing_bytes their storage now.
 */
extern void pgdl_cache_decide_on_nodes(PgdlCachePlan *plan, int g, const PgdlDataset *train, int32 epochs,
									   int32 workers, const char *mode, PgdlCacheAction action,
									   double existing_bytes);
/* in a worker's task transaction: the build lock of a cache view, and the view made for the caller */
extern void pgdl_cache_lock_build(const char *relname);
extern void pgdl_cache_create_view(const char *relname, const char *definition);
/* a node's cache: an empty table of a packed table's columns in pgdl_cache, the caller's */
extern void pgdl_cache_create_table(const char *relname);

#endif							/* PGDL_PLAN_H */
