/*
 * base/base.h -- what every folder of src/ may use: limits, settings, messages,
 * real[] arrays, the engine bridge, devices, roles acted as, background
 * workers, the progress of calls, and every lock pgdl takes.
 *
 * The bottom of the glue: it includes the engine (src/nn) and PostgreSQL, and
 * no other folder of src/.
 */
#ifndef PGDL_BASE_H
#define PGDL_BASE_H

#include "nn/nn.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/jsonb.h"

/* Keep in step with extension/pgdl.control; regress/sql/pgdl.sql checks it. */
#define PGDL_VERSION		"0.7.0"

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
#define PGDL_MAX_IMPORTANCE_REPEATS	1000	/* shuffles of each feature in pgdl.feature_importance */

/* guc.c: pgdl.* settings */
extern int	pgdl_blas_threads;
extern int	pgdl_train_cache_mem;
extern int	pgdl_max_workers;
extern int	pgdl_max_fit_threads;
extern int	pgdl_worker_cache_mem;
extern int	pgdl_node_cache_mem;		/* kB */
extern int	pgdl_feature_cache_budget;	/* kB */
extern double pgdl_cpu_gflops;
extern int	pgdl_max_model_memory;	/* kB */
extern double pgdl_node_deadline_multiple;	/* 0: no deadline */
extern int	pgdl_node_deadline_floor;	/* s */
extern bool pgdl_fuse_models;	/* fit_multiple: fuse configurations that share architecture, batch size, seed */
extern int	pgdl_progress_interval;	/* s; 0: every epoch, -1: no epoch lines */
extern int	pgdl_cpu_isa;			/* an NnCpuIsa cap, or PGDL_CPU_ISA_AUTO */

#define PGDL_CPU_ISA_AUTO	(-1)

extern void pgdl_guc_init(void);

/* owners.c: who acts as an owner, the tables trigger functions serve, deleting catalog rows */
extern bool pgdl_acts_as(Oid owner);
extern void pgdl_check_trigger_table(FunctionCallInfo fcinfo, const char *fn, const char *const *names);
extern int64 pgdl_catalog_delete(const char *table, const char *where, int nargs, Oid *argtypes, Datum *args);

typedef struct PgdlActAs
{
	Oid			user;
	int			context;
	int			nest;
} PgdlActAs;
extern void pgdl_act_as_begin(Oid role, PgdlActAs *saved);
extern void pgdl_act_as_end(const PgdlActAs *saved);

/*
 * call_progress.c: pgdl.progress for calls that run in one backend (pgdl.fit,
 * pgdl.pack, pgdl.distribute, feature cache builds), published in the
 * backend's progress slots.  begin and end pair; a call made inside another
 * leaves the view to the outer one, and an abort ends the calls it interrupts.
 */
typedef enum PgdlCallKind
{
	PGDL_CALL_FIT = 1,
	PGDL_CALL_PACK,
	PGDL_CALL_DISTRIBUTE,
	PGDL_CALL_FEATURE_CACHE
} PgdlCallKind;

typedef enum PgdlCallPhase
{
	PGDL_PHASE_STARTING = 0,
	PGDL_PHASE_READING,
	PGDL_PHASE_PREPARING,
	PGDL_PHASE_WRITING,
	PGDL_PHASE_TRAINING,
	PGDL_PHASE_VALIDATING,
	PGDL_PHASE_STORING,
	PGDL_PHASE_COPYING,
	PGDL_PHASE_COMPUTING
} PgdlCallPhase;

/* The columns of pgdl.progress_rows(): fit_multiple's eleven, then the calls' */
#define PGDL_PROGRESS_COLUMNS 19

extern void pgdl_call_progress_init(void);
extern void pgdl_call_progress_begin(PgdlCallKind kind, Oid target);
extern PgdlCallKind pgdl_call_progress_kind(void);	/* of the call in flight here; 0: none */
extern void pgdl_call_progress_run(int64 run, int64 config, int32 epochs);
/*
 * A new phase (epoch: pgdl.fit's, 1-based, else 0) of total units (-1:
 * unknown); own_pace: its pace, not the call's so far, estimates the time left.
 */
extern void pgdl_call_progress_phase(PgdlCallPhase phase, int32 epoch, int64 total, bool own_pace);
extern void pgdl_call_progress_loss(double loss);
/* done units of the phase, examples of them (0: none), the share of the whole call done. */
extern void pgdl_call_progress_update(int64 done, int64 examples, double fraction);
extern void pgdl_call_progress_end(void);
/* progress.c's rows for the calls in flight that the current role may see */
struct ReturnSetInfo;
extern void pgdl_call_progress_rows(struct ReturnSetInfo *rsinfo);

/* engine_bridge.c: the engine bridge */

/*
 * Every SQL-callable function calls this before it uses the engine.  It brings
 * the engine in line with this session's settings (pgdl.blas_threads), lazily:
 * _PG_init may run in the postmaster (shared_preload_libraries), and a BLAS
 * thread pool started there can hang the backends forked from it.
 */
extern void pgdl_engine_prepare(void);
/*
 * Training in bf16 ("precision": "bf16") where it runs: on the CPU, with
 * AVX512_BF16 and pgdl.cpu_isa at avx512 or auto; else an error (0A000)
 * that says which.  Nothing for fp32.  device: pgdl_device_for's.
 */
extern void pgdl_check_precision(const NnOptim *optim, int32 device);
/* "pgdl 0.2.0 (engine format N, blas: ..., cuda: ...)": nodes of one cluster must agree on it. */
extern char *pgdl_build_description(void);

/*
 * What trains in this process, for the run record and the models: the ISA of
 * pgdl's vector kernels (pgdl.cpu_isa capped by the CPU), the setting, and the
 * BLAS kernels OpenBLAS chose.  Fixed size, so that it travels in shared memory.
 */
typedef struct PgdlEngine
{
	char		isa[16];		/* "baseline", "avx2", "avx512" */
	char		setting[16];	/* pgdl.cpu_isa: "auto" or one of the above */
	char		blas_core[48];	/* "Haswell", "Cooperlake", ...; "unknown" without OpenBLAS */
} PgdlEngine;

extern void pgdl_engine_current(PgdlEngine *out);
/* {"isa": ..., "setting": ..., "blas_core": ...} */
extern Jsonb *pgdl_engine_jsonb(const PgdlEngine *engine);
/* The setting's name ("auto", "avx2", ...), for workers and nodes that take the leader's. */
extern const char *pgdl_cpu_isa_setting_name(void);
/* messages.c: the engine's error as an ereport, "invalid WHAT at layers[i].field" */
extern void pgdl_report_nn_error(const char *what, const NnError *err) pg_attribute_noreturn();
/* The SQLSTATE of an engine error about a batch: 22003 for an input out of a layer's range. */
extern int	pgdl_nn_data_errcode(const NnError *err);

/*
 * subxact.c: fn(arg) in a subtransaction; NULL when it returned, else its error
 * (rolled back), which the caller rethrows unless it is the kind it expects
 */
extern ErrorData *pgdl_call_in_subxact(void (*fn) (void *), void *arg);

/* messages.c: user text in error messages */

/*
 * What an error message echoes of a string the user gave: whole up to
 * max_bytes, else cut, with "..." and its length.  PGDL_ECHO_BYTES for a name,
 * key or mode; PGDL_ECHO_VALUE_BYTES for a whole value (a configuration).
 */
#define PGDL_ECHO_BYTES			64
#define PGDL_ECHO_VALUE_BYTES	1024
extern const char *pgdl_clip_for_error(const char *s, int max_bytes);
#define pgdl_echo(s) pgdl_clip_for_error((s), PGDL_ECHO_BYTES)
/* "invalid WHAT at PATH" (22023) with detail: every error in a spec or configuration. */
extern void pgdl_report_invalid(const char *what, const char *path, const char *detail) pg_attribute_noreturn();

/*
 * A device (devices.c): PGDL_DEVICE_UNSET (what a zeroed configuration says:
 * pgdl.device decides), the CPU, "cuda" (this process's CUDA device) or
 * "cuda:N".
 */
#define PGDL_MAX_DEVICES		64	/* cuda:0 .. cuda:63 */
#define PGDL_DEVICE_UNSET		0
#define PGDL_DEVICE_CPU			1
#define PGDL_DEVICE_CUDA		2
#define PGDL_DEVICE_CUDA_N(n)	(3 + (n))
#define PGDL_DEVICE_ORDINAL(d)	((d) - 3)

/*
 * A validation metric that ranks models (fit_multiple's rank_by) and that early
 * stopping watches ("monitor"): names, directions and tasks in spec/rank_metric.c.
 */
typedef enum PgdlRankMetric
{
	PGDL_RANK_LOSS = 0,
	PGDL_RANK_ACCURACY,
	PGDL_RANK_F1,				/* macro */
	PGDL_RANK_F1_WEIGHTED,
	PGDL_RANK_PRECISION,		/* macro */
	PGDL_RANK_RECALL,			/* macro */
	PGDL_RANK_ROC_AUC,
	PGDL_RANK_AVERAGE_PRECISION,
	PGDL_RANK_LOG_LOSS,
	PGDL_RANK_MSE,
	PGDL_RANK_RMSE,
	PGDL_RANK_MAE,
	PGDL_RANK_R2
} PgdlRankMetric;
#define PGDL_RANK_N_METRICS (PGDL_RANK_R2 + 1)

/*
 * How to train: the optimizer and the minibatch size (config jsonb), and
 * where.  The canonical form (pgdl_config_to_jsonb) has the device keys only
 * when given.  Plain data: fit_multiple copies it into shared memory.  Read
 * from jsonb by spec/ (pgdl_config_from_jsonb); here because devices read it.
 */
#define PGDL_CLASS_WEIGHT_NONE		0
#define PGDL_CLASS_WEIGHT_BALANCED	1
#define PGDL_CLASS_WEIGHT_MAP		2
#define PGDL_CLASS_WEIGHT_MAP_LEN	2048	/* bytes of a "class_weight" object's JSON text, with its NUL */
#define PGDL_MAX_CLASS_WEIGHTS		1024	/* classes of a dataset "class_weight" weighs */

typedef struct PgdlTrainConfig
{
	NnOptim		optim;
	int32		batch_size;		/* examples per optimizer step; default 128 */
	int64		seed;			/* initialization, order of partitions; default 42 */
	int32		device;			/* "device"; PGDL_DEVICE_UNSET when not given */
	int32		workers_per_device; /* "workers_per_device" (fit_multiple); 0: not given */
	bool		mixed_devices;	/* "mixed_devices": may hop between GPU and CPU workers */
	int32		threads;		/* "threads": pgdl.fit's cores for one step; default 1 */
	/* early stopping; the other training methods are optim's */
	int32		patience;		/* "patience": epochs without improvement before stopping; 0: none */
	float		min_delta;		/* "min_delta": the least change that counts as improvement */
	PgdlRankMetric monitor;		/* "monitor": the validation metric early stopping and restore_best watch */
	bool		monitor_given;	/* "monitor" was named; else fit_multiple's rank_by, pgdl.fit's loss */
	bool		restore_best;	/* "restore_best": keep the best epoch (by monitor); default on with patience */
	/* "class_weight" (spec_json.c), resolved against the dataset at fit start (train/class_weights.c) */
	int32		class_weight;	/* PGDL_CLASS_WEIGHT_NONE, _BALANCED or _MAP */
	char		class_weight_map[PGDL_CLASS_WEIGHT_MAP_LEN];	/* _MAP: the object, as JSON text */
	int32		n_class_weights;	/* resolved: class i weighs class_weights[i]; 0: not (yet) */
	float		class_weights[PGDL_MAX_CLASS_WEIGHTS];
} PgdlTrainConfig;

/* devices.c: where a model trains or predicts */
extern char *pgdl_device_setting;	/* pgdl.device */
extern void pgdl_devices_init(void);	/* defines pgdl.device: before pgdl_guc_init */

/* "cpu", "cuda" or "cuda:N" into *device; false when it is none of them. */
extern bool pgdl_device_parse(const char *name, int32 *device);
extern char *pgdl_device_name(int32 device);	/* palloc'd */
/* A fit_multiple worker's device: it overrides configurations and pgdl.device in this process. */
extern void pgdl_device_assign_process(int32 device);
/* Where to run: the worker's device, else the configuration's (NULL: none), else pgdl.device. */
extern int32 pgdl_device_for(const PgdlTrainConfig *config);
/*
 * Move m (optimizer optim or NULL, workspace for batch examples) onto device;
 * nothing for the CPU.  Errors: no CUDA or no such device (naming those there
 * are), the model does not fit (checked before the context is made), the
 * device is busy, the move failed.
 */
extern void pgdl_device_move(NnModel *m, int32 device, const NnOptim *optim, int32 batch);
/* The same refusals, without moving anything: for a leader planning its workers' devices. */
extern void pgdl_device_check_plan(const NnSpec *spec, const NnOptim *optim, int32 batch, int32 device);
/* An error if the CUDA device failed since it started (a kernel, a copy, a lost device). */
extern void pgdl_device_check_errors(void);
/*
 * fit_multiple: worker_device[0 .. n_workers) from the configurations' device
 * keys (they must agree) or pgdl.device, round robin over the visible devices,
 * at most workers_per_device each; the rest on the CPU, which only
 * configurations with "mixed_devices" allow.  Every refusal comes here, before
 * any worker starts.
 */
extern void pgdl_device_plan(const PgdlTrainConfig *const *configs, const NnSpec *const *specs, int n,
							 int n_workers, int32 *worker_device);

/*
 * jsonb_build.c: building jsonb, one value at a time after pushJsonbValue(state,
 * WJB_BEGIN_OBJECT or WJB_BEGIN_ARRAY): key is the object's key, or NULL for
 * an array element.  Numbers are the shortest decimal that reads back as the
 * same float4 or float8; a float8 that is not finite is null.
 */
extern void pgdl_jsonb_put_key(JsonbParseState **state, const char *key);
extern void pgdl_jsonb_put_value(JsonbParseState **state, const char *key, JsonbValue *value);
extern void pgdl_jsonb_put_string(JsonbParseState **state, const char *key, const char *value);
extern void pgdl_jsonb_put_int(JsonbParseState **state, const char *key, int64 value);
extern void pgdl_jsonb_put_float4(JsonbParseState **state, const char *key, float value);
extern void pgdl_jsonb_put_float8(JsonbParseState **state, const char *key, double value);
extern void pgdl_jsonb_put_bool(JsonbParseState **state, const char *key, bool value);

/* arrays.c: real[] in and out */

/* A real[] argument's data and length: 1-d and NULL-free, or an error naming `what`. */
extern float *pgdl_float4_array(ArrayType *array, const char *what, int64 *length);
/* A zeroed 1-d real[] of n values to fill in place (ARR_DATA_PTR), or a size error. */
extern ArrayType *pgdl_float4_array_new(int64 n);
extern ArrayType *pgdl_float4_array_from(const float *v, int64 n);
extern void pgdl_number_array_to_floats(ArrayType *arr, Oid elem_base, int n, float *x);
/* The same for an array that may hold NULLs: each one is NaN (a missing value). */
extern void pgdl_number_array_to_floats_nulls(ArrayType *arr, Oid elem_base, int n, float *x);
/* The same, a double precision or numeric value beyond real's range an error (22003) naming `what`. */
extern void pgdl_number_array_to_floats_checked(ArrayType *arr, Oid elem_base, int64 n, float *x,
												const char *what);
/* x of pgdl.predict: a 1-d NULL-free array of any number type as floats, or an error naming `what`. */
extern const float *pgdl_number_array(ArrayType *array, const char *what, int64 *length);
/* The same, a NULL element as NaN (a missing value): *has_nulls says whether there was one. */
extern const float *pgdl_number_array_missing(ArrayType *array, const char *what, int64 *length, bool *has_nulls);

/*
 * bgworker.c: pgdl's background workers, registered on a segment (its handle
 * is bgw_main_arg) or none, and connecting as the caller who started them.
 */
struct dsm_segment;
struct BackgroundWorkerHandle;
extern bool pgdl_register_worker(struct dsm_segment *seg, const char *function, const char *type,
								 const char *name, const void *extra, Size extra_len,
								 struct BackgroundWorkerHandle **handle);
typedef struct PgdlCaller
{
	Oid			database;
	Oid			user;			/* the authenticated user: a worker logs in as it */
	Oid			outer_user;		/* then takes the caller's role, as parallel workers do */
	bool		outer_is_superuser;
	Oid			current_user;
	int			sec_context;
} PgdlCaller;
extern void pgdl_caller_capture(PgdlCaller *caller);
extern void pgdl_caller_connect(const PgdlCaller *caller);

/*
 * locks: every lock pgdl takes, in one place.
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

#endif							/* PGDL_BASE_H */
