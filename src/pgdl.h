/*
 * pgdl.h -- what the PostgreSQL glue (the .c files in src/) shares.
 *
 * The engine (src/nn, kernels/) has its own headers and no PostgreSQL ones.
 */
#ifndef PGDL_H
#define PGDL_H

#include "nn/nn.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/array.h"
#include "utils/jsonb.h"

/* Keep in step with extension/pgdl.control; regress/sql/pgdl.sql checks it. */
#define PGDL_VERSION		"0.1.0"

/*
 * Limits on SQL arguments, defined once for every function that checks them.
 * A packed buffer is at most one training step, and MOP's shared memory is
 * laid out for at most PGDL_MAX_WORKERS, _MODELS and _PARTITIONS.
 */
#define PGDL_MAX_EPOCHS			100000
#define PGDL_MAX_PARTITIONS		1024
#define PGDL_MAX_BUFFER_ROWS	NN_MAX_BATCH
#define PGDL_MAX_WORKERS		64
#define PGDL_MAX_MODELS			1024	/* configurations in one fit_multiple run */
#define PGDL_MAX_CONFIGS		10000	/* one grid or random search: more is a mistake, not a search */

/* guc.c */
extern int	pgdl_blas_threads;
extern int	pgdl_train_cache_mem;
extern int	pgdl_max_workers;
extern int	pgdl_worker_cache_mem;
extern int	pgdl_feature_cache_budget;	/* kB */
extern double pgdl_cpu_gflops;

extern void pgdl_guc_init(void);

/* pgdl.c */

/*
 * Every SQL-callable function calls this before it uses the engine.  It brings
 * the engine in line with this session's settings (pgdl.blas_threads), lazily:
 * _PG_init may run in the postmaster (shared_preload_libraries), and a BLAS
 * thread pool started there can hang the backends forked from it.
 */
extern void pgdl_engine_prepare(void);

/* spec_json.c: the one place that maps jsonb to the engine */

/* How to train: the optimizer and the minibatch size (config jsonb). */
typedef struct PgdlTrainConfig
{
	NnOptim		optim;
	int32		batch_size;		/* examples per optimizer step; default 128 */
	int64		seed;			/* initialization, order of partitions; default 42 */
} PgdlTrainConfig;

/* Errors are ereport(ERROR)s that name the layer and the field at fault. */
extern void pgdl_spec_from_jsonb(Jsonb *spec, NnSpec *out);
extern Jsonb *pgdl_spec_to_jsonb(const NnSpec *spec);
/* Refuses the transfer learning keys; the _transfer form ignores them (feature_cache.c reads them). */
extern void pgdl_config_from_jsonb(Jsonb *config, PgdlTrainConfig *out);
extern void pgdl_config_from_jsonb_transfer(Jsonb *config, PgdlTrainConfig *out);
extern Jsonb *pgdl_config_to_jsonb(const PgdlTrainConfig *config);
extern void pgdl_report_nn_error(const char *what, const NnError *err) pg_attribute_noreturn();
/* The value of key in a jsonb object, or NULL. */
extern JsonbValue *pgdl_jsonb_key(JsonbContainer *obj, const char *key);

/* model_io.c: models as bytea, models by id or name (cached), datasets */

extern void pgdl_model_io_init(void);

/* What a packed dataset's rows mean; from pgdl.datasets. */
typedef struct PgdlDataset
{
	int64		id;
	Oid			packed;			/* the packed table */
	bool		classification;
	int32		n_features;
	int32		n_targets;		/* floats of y per example: 1 for classes */
	int32		n_classes;		/* 0 for regression */
	int32		partitions;		/* the packed table's parts are 0 .. partitions - 1 */
	int64		n_rows_hint;	/* examples when packed (the planner's estimate) */
	char	  **classes;		/* class i's value as text */
	Oid			label_type;
	float		scale;			/* x * scale, when mean == NULL */
	float	   *mean;			/* else (x - mean) / std, per feature */
	float	   *std;
} PgdlDataset;

/* A stored or given model, ready to run. */
typedef struct PgdlModel
{
	int64		id;				/* 0 when given as bytea */
	NnModel    *nn;
	PgdlDataset *dataset;		/* NULL when unknown (a bare bytea, or no dataset) */
} PgdlModel;

/*
 * Models by id or name come from a per-backend cache, which a trigger on
 * pgdl.models (and pgdl.datasets) flushes when a row changes.  They belong to
 * the cache: use them within the current call, never free them, and do not
 * train them (nn_model_clone first).  A model from bytea lives until `owner`
 * is reset.
 */
extern PgdlModel *pgdl_model_by_id(int64 id);
extern PgdlModel *pgdl_model_by_name(const char *name);
extern PgdlModel *pgdl_model_from_bytea(bytea *blob, MemoryContext owner);
extern PgdlDataset *pgdl_dataset_by_id(int64 id);
extern PgdlDataset *pgdl_dataset_by_packed(Oid packed);	/* ereport if not a packed table */

/* The engine allocates with malloc; these tie its models to PostgreSQL's memory and errors. */
extern NnModel *pgdl_model_deserialize(bytea *blob);	/* caller frees, or hands to a context */
extern bytea *pgdl_model_serialize(const NnModel *model);	/* palloc'd in CurrentMemoryContext */
extern void pgdl_model_free_with(NnModel *model, MemoryContext owner);

/* x (n rows of raw features) to what the model was trained on, in place. */
extern void pgdl_dataset_normalize(const PgdlDataset *ds, float *x, int64 rows);

/* arrays.c: real[] in and out */

/* A real[] argument's data and length: 1-d and NULL-free, or an error naming `what`. */
extern float *pgdl_float4_array(ArrayType *array, const char *what, int64 *length);
/* A zeroed 1-d real[] of n values to fill in place (ARR_DATA_PTR), or a size error. */
extern ArrayType *pgdl_float4_array_new(int64 n);
extern ArrayType *pgdl_float4_array_from(const float *v, int64 n);

/* train_agg.c: training a model on packed buffers; the aggregate pgdl.train and pgdl.fit share it */

typedef struct PgdlTrainState
{
	NnModel    *model;			/* owned; freed when `cxt` is reset */
	PgdlTrainConfig config;
	NnBatchStats stats;			/* since the state began */
	int64		examples;		/* weight of this model in an average */
	MemoryContext cxt;
} PgdlTrainState;

extern PgdlTrainState *pgdl_train_begin(NnModel *model, const PgdlTrainConfig *config,
										MemoryContext cxt);
extern void pgdl_train_buffer(PgdlTrainState *state, const float *x, const float *y, int32 n);

/* packed.c: reading packed tables, buffer by buffer, in buffer_id order */

/* kept: x and y live in the scan's keep context, for the caller to hold on to */
typedef void (*PgdlBufferFn) (void *arg, const float *x, const float *y, int32 n, bool kept);

/*
 * Every buffer of partition `part` (or of all, part order, when part < 0).
 * With keep_cxt, buffers are read into it (rather than into memory freed after
 * the call) while *keep_bytes allows, which it is charged.
 */
extern void pgdl_packed_scan(const PgdlDataset *ds, int32 part, PgdlBufferFn fn, void *arg,
							 MemoryContext keep_cxt, int64 *keep_bytes);
/*
 * A partition's buffers kept in memory between visits (pgdl.fit's later epochs,
 * a model hopper worker's own partitions).  A partition is kept whole or not at
 * all: when the budget runs out part way, it is read from its table every time.
 */
typedef struct PgdlHeldPartition
{
	List	   *buffers;		/* of PgdlHeldBuffer, in buffer_id order */
	bool		complete;		/* buffers holds the whole partition */
} PgdlHeldPartition;

typedef struct PgdlHeldBuffer
{
	float	   *x;
	float	   *y;
	int32		n;
} PgdlHeldBuffer;

/* Read partition `part` (all, when < 0), keeping it in keep_cxt within *budget; fn (if any) sees every buffer. */
extern void pgdl_packed_hold(const PgdlDataset *ds, int32 part, PgdlHeldPartition *held,
							 MemoryContext keep_cxt, int64 *budget, PgdlBufferFn fn, void *arg);
/* fn over a partition: from memory when held whole, else from its table (needs a transaction). */
extern void pgdl_packed_foreach(const PgdlDataset *ds, int32 part, const PgdlHeldPartition *held,
								PgdlBufferFn fn, void *arg);

/* A packed row's x and y (detoasted) hold n examples of ds, or an error says how not. */
extern void pgdl_packed_check_row(const PgdlDataset *ds, const char *relname, int32 buffer_id, int32 n,
								  ArrayType *x, ArrayType *y, float **xdata, float **ydata);
/* Loss and accuracy of `model` (inference mode) over a packed table; adds into stats. */
extern void pgdl_packed_evaluate(NnModel *model, const PgdlDataset *ds, NnBatchStats *stats);
/* fit.c: a validation set has the training set's features, task and classes. */
extern void pgdl_check_same_dataset_shape(const PgdlDataset *train, const PgdlDataset *valid, Oid validation);

/* The model's input and output agree with the dataset, or an error says how not. */
extern void pgdl_check_model_fits(const NnSpec *spec, const PgdlDataset *ds);

/* feature_cache.c: transfer learning and materialized feature layers */

/* A configuration that starts from a stored model with its first `freeze` layers frozen. */
typedef struct PgdlTransfer
{
	int64		base_id;
	char	   *base_name;		/* as the configuration names it */
	int32		freeze;
	NnModel    *prefix;			/* the frozen layers; NULL when freeze is 0 */
	NnModel    *rest;			/* what trains: the head, or the base's other layers */
	NnSpec	   *spec;			/* the whole network, as it is stored */
	int64		dataset;		/* the base model's dataset, 0 if none */
	char		hash[65];		/* SHA-256 of the prefix (spec and weights), hex */
} PgdlTransfer;

/* Resolve base_model, freeze and head of a configuration (rest seeded with seed); ereports what is wrong. */
extern void pgdl_transfer_prepare(Jsonb *config, uint64 seed, PgdlTransfer *out);
/* Does a configuration name base_model, freeze or head? */
extern bool pgdl_config_has_transfer(Jsonb *config);
/* The transfer keys of a configuration as an object, or NULL when it has none. */
extern Jsonb *pgdl_transfer_keys(Jsonb *config);
/* The whole model: the frozen prefix, then the trained rest (a serialized engine model). */
extern bytea *pgdl_transfer_join(const PgdlTransfer *t, const uint8 *rest_blob, Size rest_len);
extern void pgdl_prefix_hash(const NnModel *prefix, char *hex);

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
	double		bytes;			/* predicted storage */
	int			task;			/* its PgdlCacheTask, when materialized */
} PgdlCacheSide;

/* SQL a worker runs in a transaction of its own before training: a build, refresh or reuse of a cache. */
typedef struct PgdlCacheTask
{
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
 * group; group_of[i] is configuration i's group, or -1.  mode: auto, on, off.
 */
extern PgdlCachePlan *pgdl_cache_plan(const PgdlDataset *train, const PgdlDataset *valid,
									  PgdlTransfer **transfers, int n, int32 epochs, int32 workers,
									  const char *mode, int *group_of);
extern const char *pgdl_cache_action_name(PgdlCacheAction action);

#endif							/* PGDL_H */
