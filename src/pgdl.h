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

/* guc.c */
extern int	pgdl_blas_threads;
extern int	pgdl_train_cache_mem;
extern int	pgdl_max_workers;
extern int	pgdl_max_fit_threads;
extern int	pgdl_worker_cache_mem;
extern int	pgdl_node_cache_mem;		/* kB */
extern int	pgdl_feature_cache_budget;	/* kB */
extern double pgdl_cpu_gflops;
extern int	pgdl_max_model_memory;	/* kB */

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

/* lifecycle.c: runs in flight, checkpoints of finished runs, DROP EXTENSION */
extern int	pgdl_keep_checkpoints;

extern void pgdl_lifecycle_init(void);
/* a run in flight: its leader (for its transaction) and its workers (for their lives) hold it */
extern void pgdl_run_claim(int64 run);	/* pgdl.resume's leader: the run, or "in progress" */
extern void pgdl_run_hold_as_leader(int64 run);
extern void pgdl_run_hold_as_worker(int64 run);
extern bool pgdl_run_in_flight(int64 run);
struct LOCKTAG;
extern int64 pgdl_run_of_leader_lock(const struct LOCKTAG *tag);

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
extern void pgdl_run_prune_checkpoints(int64 run);	/* at the end of a finished run */
/* for errors about a table pgdl.datasets does not know: packed before pgdl was dropped? */
extern bool pgdl_packed_left_behind(Oid relid);

#define PGDL_UNKNOWN_PACKED_DETAIL \
	"It has the columns of a table pgdl.pack writes, but no row in pgdl.datasets: it was packed " \
	"before pgdl was dropped, and its classes and normalization went with the extension."

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

/* pgdl.c */

/*
 * Every SQL-callable function calls this before it uses the engine.  It brings
 * the engine in line with this session's settings (pgdl.blas_threads), lazily:
 * _PG_init may run in the postmaster (shared_preload_libraries), and a BLAS
 * thread pool started there can hang the backends forked from it.
 */
extern void pgdl_engine_prepare(void);
/* "pgdl 0.2.0 (engine format N, blas: ..., cuda: ...)": nodes of one cluster must agree on it. */
extern char *pgdl_build_description(void);

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

/* spec_json.c: the one place that maps jsonb to the engine */

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
 * How to train: the optimizer and the minibatch size (config jsonb), and
 * where.  The canonical form (pgdl_config_to_jsonb) has the device keys only
 * when given.  Plain data: fit_multiple copies it into shared memory.
 */
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
	bool		monitor_accuracy;	/* "monitor": validation_accuracy (else validation_loss) */
} PgdlTrainConfig;

/*
 * A configuration's transfer learning keys, as given and checked for type;
 * their ranges depend on the base model, which transfer.c looks up.
 */
typedef struct PgdlTransferKeys
{
	char	   *base_name;		/* "base_model" as a name, or NULL */
	int64		base_id;		/* "base_model" as an id, when base_name is NULL */
	bool		freeze_given;
	char	   *freeze_layer;	/* "freeze" as a layer name, or NULL */
	int32		freeze_count;	/* "freeze" as a number of layers: -1 if not a whole number of 0 .. NN_MAX_LAYERS */
	JsonbContainer *head;		/* "head": an array of layers, or NULL */
} PgdlTransferKeys;

/* Errors are ereport(ERROR)s that name the layer and the field at fault. */
extern void pgdl_spec_from_jsonb(Jsonb *spec, NnSpec *out);
extern Jsonb *pgdl_spec_to_jsonb(const NnSpec *spec);
/* Refuses the transfer learning keys; the _transfer form ignores them (see pgdl_transfer_keys_from_jsonb). */
extern void pgdl_config_from_jsonb(Jsonb *config, PgdlTrainConfig *out);
extern void pgdl_config_from_jsonb_transfer(Jsonb *config, PgdlTrainConfig *out);
extern Jsonb *pgdl_config_to_jsonb(const PgdlTrainConfig *config);
/*
 * "warm_start": the model (name, or id when name is NULL) a configuration starts from where the shapes
 * fit; false when it names none.  Checked for type only: transfer.c resolves it (pgdl_model_start).
 */
extern bool pgdl_warm_start_key(Jsonb *config, char **name, int64 *id);
/* canonical (pgdl_config_to_jsonb's) with the "warm_start" of the configuration as given, if any */
extern Jsonb *pgdl_config_with_warm_start(Jsonb *canonical, Jsonb *given);
/* Does a configuration name base_model, freeze or head? */
extern bool pgdl_config_has_transfer(Jsonb *config);
/* The transfer keys of a configuration as an object, or NULL when it has none. */
extern Jsonb *pgdl_transfer_keys(Jsonb *config);
/* The transfer keys of a configuration that has some; base_model is required. */
extern void pgdl_transfer_keys_from_jsonb(Jsonb *config, PgdlTransferKeys *out);
/* A head's spec: "head"'s layers on inputs of shape `in`, with the base model's loss. */
extern void pgdl_head_spec_from_jsonb(JsonbContainer *layers, const NnShape *in, NnLoss loss, NnSpec *out);
extern void pgdl_report_nn_error(const char *what, const NnError *err) pg_attribute_noreturn();
/* The SQLSTATE of an engine error about a batch: 22003 for an input out of a layer's range. */
extern int	pgdl_nn_data_errcode(const NnError *err);
/* An input the model cannot take (an embedding's ids) as an error naming the layer. */
extern void pgdl_check_model_input(const NnModel *m, const float *x, int n);
/* The value of key in a jsonb object, or NULL. */
extern JsonbValue *pgdl_jsonb_key(JsonbContainer *obj, const char *key);

/*
 * Building jsonb, one value at a time after pushJsonbValue(state,
 * WJB_BEGIN_OBJECT or WJB_BEGIN_ARRAY): key is the object's key, or NULL for
 * an array element.  Numbers are the shortest decimal that reads back as the
 * same float4 or float8; a float8 that is not finite is null.
 */
extern void pgdl_jsonb_put_key(JsonbParseState **state, const char *key);
extern void pgdl_jsonb_put_string(JsonbParseState **state, const char *key, const char *value);
extern void pgdl_jsonb_put_int(JsonbParseState **state, const char *key, int64 value);
extern void pgdl_jsonb_put_float4(JsonbParseState **state, const char *key, float value);
extern void pgdl_jsonb_put_float8(JsonbParseState **state, const char *key, double value);
extern void pgdl_jsonb_put_bool(JsonbParseState **state, const char *key, bool value);

/* devices.c: where a model trains or predicts */
extern char *pgdl_device_setting;	/* pgdl.device */

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

/* datasets.c: what a packed table's rows mean, from its pgdl.datasets row */

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
	Jsonb	   *normalization;	/* as stored: a dataset packed with this one as reference copies it */
	/* categorical columns: their ids follow the n_numeric normalized features (see pack.md) */
	int32		n_numeric;		/* features normalized: n_features less the ids and lengths */
	int32		n_categorical;
	int32		n_sequences;	/* sequence columns: their ids and length follow the categorical ids */
	struct PgdlVocabulary *vocabulary;	/* n_categorical, then n_sequences; NULL when none */
	Jsonb	   *categorical;	/* as stored: a dataset packed with this one as reference copies it */
} PgdlDataset;

/*
 * One categorical column's vocabulary: value i (sorted) has id i + 1; id 0 is
 * unseen or NULL.  A sequence column's: value i has id i + 2, id 0 is padding
 * and id 1 an unseen or NULL token.
 */
typedef struct PgdlVocabulary
{
	char	   *column;
	int32		length;			/* a sequence column: L, its ids a row (0: a categorical column) */
	bool		is_integer;		/* values are integers, sorted numerically; else text, by bytes */
	int32		n_values;
	char	  **values;			/* as text */
	int64	   *integers;		/* is_integer: the values as numbers */
} PgdlVocabulary;

/* At most this many values a categorical column: ids are floats, exact up to 2^24. */
#define PGDL_MAX_CATEGORIES		16777215

/* A sequence column's ids for padding and for an unseen or NULL token; its values' ids start after them. */
#define PGDL_SEQUENCE_PADDING	0
#define PGDL_SEQUENCE_UNSEEN	1
/* At most this many ids a sequence (max_length, or the longest array packed). */
#define PGDL_MAX_SEQUENCE_LENGTH	65536

/*
 * The row of dataset `id` (or, when id is 0, of packed table `packed`), every
 * value checked (ERRCODE_DATA_CORRUPTED naming the column), allocated in cxt;
 * NULL when there is none.  Uncached: pgdl_dataset_by_id and _by_packed cache.
 */
extern PgdlDataset *pgdl_dataset_read(int64 id, Oid packed, MemoryContext cxt);
/* A deep copy in CurrentMemoryContext, that outlives the cache entry it was made from. */
extern PgdlDataset *pgdl_dataset_copy(const PgdlDataset *ds);
/* x (n rows of raw features) to what the model was trained on, in place. */
extern void pgdl_dataset_normalize(const PgdlDataset *ds, float *x, int64 rows);
/* Value `value` (NULL: a NULL) of categorical column c as its id: 0 when unseen or NULL. */
extern int32 pgdl_dataset_category_id(const PgdlDataset *ds, int c, const char *value);
/* Compares two values of a categorical column, by number or by bytes. */
extern int	pgdl_category_compare(bool is_integer, const char *a, const char *b);
/* The floats of the example vector column c (categorical or sequence) takes: 1, or L ids and the length. */
extern int32 pgdl_vocabulary_width(const PgdlVocabulary *v);
/*
 * A sequence's n ids (tokens in order) as its L floats of the example vector,
 * then its length: the first L ids, padded; the length is how many are tokens.
 */
extern void pgdl_sequence_layout(const int32 *ids, int64 n, int32 L, float *out);

/* model_io.c: models as bytea, by id or name (cached), as a SQL function's argument; datasets (cached) */

extern void pgdl_model_io_init(void);

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

/*
 * The model that argument 0 of a SQL function names: an id (bigint), a name
 * (text) or an engine blob (bytea), whichever its pg_proc row declares.
 * pgdl_model_arg gives the cache's model (a blob's is kept per call site):
 * use it before any query runs, model loads or lock is taken, since any of
 * them may retire it.  pgdl_model_arg_copy gives a clone and a dataset copy
 * that belong to `owner` and stay valid whatever runs meanwhile.
 */
extern PgdlModel *pgdl_model_arg(FunctionCallInfo fcinfo);
extern PgdlModel *pgdl_model_arg_copy(FunctionCallInfo fcinfo, MemoryContext owner);

/* predict.c: what predict_batch.c shares with the per-row functions */
extern void pgdl_predict_check_dataset(const NnModel *m, const PgdlDataset *ds);
extern void pgdl_predict_check_classifier(const NnModel *m, const char *function);
extern int64 pgdl_predict_first_nonfinite(const float *x, int64 n);
extern void pgdl_predict_check_finite(const float *raw, const float *x, int64 n, const char *what);
extern const float *pgdl_predict_forward(NnModel *m, const float *x, int n);
extern int	pgdl_predict_class_of(const NnModel *m, const float *z, float *probability);
extern char *pgdl_predict_class_name(const PgdlDataset *ds, int index);
extern Datum pgdl_predict_label_as(const char *label, Oid type, Oid label_type, FmgrInfo *input, Oid ioparam);

/* The engine allocates with malloc; these tie its models to PostgreSQL's memory and errors. */
extern NnModel *pgdl_model_deserialize(bytea *blob);	/* caller frees, or hands to a context */
/* "invalid pgdl model" (data_corrupted), the engine's words as the detail */
extern void pgdl_report_blob_error(const NnError *err) pg_attribute_noreturn();
extern bytea *pgdl_model_serialize(const NnModel *model);	/* palloc'd in CurrentMemoryContext */
/* A bytea of size bytes of data (length set, data not), or ERROR beyond 1 GB naming `what`. */
extern bytea *pgdl_bytea_alloc(size_t size, const char *what);
extern void pgdl_model_free_with(NnModel *model, MemoryContext owner);

/*
 * pgdl.max_model_memory, checked before the engine allocates: a model of
 * `spec` with optimizer `optim` (NULL: none) and a workspace for `batch`
 * examples (0: none) that would take more is an ERRCODE_PROGRAM_LIMIT_EXCEEDED
 * error naming `what` ("the model") and its size.  _blob sizes what
 * nn_model_deserialize would allocate for a blob (and leaves a malformed one
 * to it); _batch what a reserve for `batch` would add to a model.
 */
extern void pgdl_check_model_memory(const NnSpec *spec, const NnOptim *optim, int32 batch, const char *what);
extern void pgdl_check_model_blob(const void *blob, Size len, const char *what);
extern void pgdl_check_model_batch(const NnModel *model, int32 batch, const char *what);

/* model_exchange.c: weights in and out (pgdl.model_weights, pgdl.model_from_weights; ONNX next) */

#define PGDL_TENSOR_MAX_DIMS	4
#define PGDL_LAYER_MAX_TENSORS	4

/* One parameter tensor of a layer, named and shaped as PyTorch's state_dict has it. */
typedef struct PgdlTensor
{
	int			layer;
	const char *name;			/* the state_dict suffix: "weight", "bias", "running_mean", ... */
	int			ndim;
	int			shape[PGDL_TENSOR_MAX_DIMS];
	int64		offset;			/* in the model's params, or in its buffers */
	bool		buffer;			/* a running statistic, not a trained parameter */
} PgdlTensor;

/* The tensors of layer i into t[PGDL_LAYER_MAX_TENSORS], in state_dict order; how many. */
extern int	pgdl_layer_tensors(const NnModel *m, int i, PgdlTensor *t);
extern int64 pgdl_tensor_size(const PgdlTensor *t);

/* arrays.c: real[] in and out */

/* A real[] argument's data and length: 1-d and NULL-free, or an error naming `what`. */
extern float *pgdl_float4_array(ArrayType *array, const char *what, int64 *length);
/* A zeroed 1-d real[] of n values to fill in place (ARR_DATA_PTR), or a size error. */
extern ArrayType *pgdl_float4_array_new(int64 n);
extern ArrayType *pgdl_float4_array_from(const float *v, int64 n);
extern void pgdl_number_array_to_floats(ArrayType *arr, Oid elem_base, int n, float *x);

/* train_agg.c: training a model on packed buffers; the aggregate pgdl.train and pgdl.fit share it */

/*
 * Training diverges when a step's loss is NaN or infinite (checked at every
 * step, which is then not applied), or when the weights are (an update that
 * overflowed while the loss was finite).  The weights are checked after each
 * sub-epoch (a partition's buffers), where pgdl.fit and a model hopper worker
 * both stand between two partitions: a pass over the parameters, nothing
 * beside a partition's steps (after each buffer it cost up to 7% of training
 * a 535k-parameter MLP on 16-row buffers).  Either way training stops there.
 */
typedef enum PgdlDivergence
{
	PGDL_HEALTHY = 0,
	PGDL_DIVERGED_LOSS,			/* the loss of step model->step + 1 was not finite */
	PGDL_DIVERGED_WEIGHTS		/* the weights were not finite after step model->step */
} PgdlDivergence;

typedef struct PgdlTrainAhead PgdlTrainAhead;

typedef struct PgdlTrainState
{
	NnModel    *model;			/* owned; freed when `cxt` is reset */
	PgdlTrainConfig config;
	NnBatchStats stats;			/* since the state began; of applied steps only */
	int64		examples;		/* weight of this model in an average */
	PgdlDivergence diverged;	/* once set, pgdl_train_buffer trains no more */
	MemoryContext cxt;
	PgdlTrainAhead *ahead;		/* train_ahead.c's thread, or NULL */
} PgdlTrainState;

extern PgdlTrainState *pgdl_train_begin(NnModel *model, const PgdlTrainConfig *config,
										MemoryContext cxt);
extern void pgdl_train_buffer(PgdlTrainState *state, const float *x, const float *y, int32 n);
/*
 * train_ahead.c: buffers' steps in a thread while the backend reads the next
 * ones (host models only); the same steps, in the same order, as pgdl_train_buffer.
 */
extern bool pgdl_train_ahead_possible(const PgdlTrainState *state);
extern int64 pgdl_train_ahead(PgdlTrainState *state, const float *x, const float *y, int32 n);
extern void pgdl_train_ahead_wait(PgdlTrainState *state);
extern void pgdl_train_ahead_wait_job(PgdlTrainState *state, int64 job);
extern void pgdl_train_ahead_end(PgdlTrainState *state);
/* At the end of a sub-epoch: marks the state diverged if the weights are not all finite. */
extern void pgdl_train_check_weights(PgdlTrainState *state);
/* a = the average of a and b weighted by their examples (FedAvg); a's counters add b's. */
extern void pgdl_train_average(PgdlTrainState *a, const PgdlTrainState *b);
/*
 * node.c: the model on partitions parts[0 .. n) of ds, in that order, epochs
 * times, each visit begun and checked as a model hopper worker does; through
 * its frozen prefix (inference mode) when there is one.
 */
extern PgdlTrainState *pgdl_train_visits(NnModel *model, NnModel *prefix, const PgdlTrainConfig *config,
										 const PgdlDataset *ds, const int32 *parts, int n_parts, int32 epochs);
/* An errdetail saying where a diverged state stopped. */
extern int	pgdl_train_divergence_detail(const PgdlTrainState *state);

/*
 * pack_spill.c: pgdl.pack's external shuffle.  Rows of floats are written in
 * the order read, scattered by their shuffled position into bucket files of
 * about `budget` bytes, then asked for position after position.
 */
typedef struct PgdlSpill PgdlSpill;
typedef void (*PgdlSpillRowFn) (void *arg, int64 row, const float *x);

extern PgdlSpill *pgdl_spill_begin(int32 n_floats);
extern void pgdl_spill_write(PgdlSpill *spill, const float *x);
extern int64 pgdl_spill_rows(const PgdlSpill *spill);
/* row r goes to position[r] (a permutation, kept by the caller); fn sees each row in written order */
extern void pgdl_spill_scatter(PgdlSpill *spill, const int64 *position, Size budget,
							   PgdlSpillRowFn fn, void *arg);
extern int	pgdl_spill_buckets(const PgdlSpill *spill);
/* positions in increasing order; *row: the row's number as written */
extern const float *pgdl_spill_row_at(PgdlSpill *spill, int64 pos, int64 *row);
extern void pgdl_spill_end(PgdlSpill *spill);

/* packed.c: reading packed tables, buffer by buffer, in buffer_id order */

/* Whether a table has the columns pgdl.pack writes (part, buffer_id, n, x, y), of their types. */
extern bool pgdl_packed_has_columns(Oid relid);

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

/* shared_scan.c: a partition held by workers of several jobs, read once */

typedef enum PgdlShareResult
{
	PGDL_SHARE_READ = 0,		/* read from its table, for this worker alone */
	PGDL_SHARE_PUBLISHED,		/* read from its table, and published for other jobs' workers */
	PGDL_SHARE_ATTACHED			/* not read: another worker's copy, of the same tuple versions */
} PgdlShareResult;

/*
 * pgdl_packed_hold, in a transaction, through a DSM segment other workers of
 * any job attach (the caller's copy when one exists).  The segments live as
 * long as the process (or another that attached them).
 */
extern PgdlShareResult pgdl_shared_hold(const PgdlDataset *ds, int32 part, PgdlHeldPartition *held,
										MemoryContext keep_cxt, int64 *budget);
/* Whether the current role's workers may share ds's partitions (its kind of table, privileges, row security). */
extern bool pgdl_shared_scan_allowed(const PgdlDataset *ds);
/* held's buffers into a segment's data at `to`, as the segment lays them out: each one's x, then its y. */
extern void pgdl_shared_copy_buffers(const PgdlDataset *ds, const PgdlHeldPartition *held, char *to);

/* A packed row's x and y (detoasted) hold n examples of ds, or an error says how not. */
extern void pgdl_packed_check_row(const PgdlDataset *ds, const char *relname, int32 buffer_id, int32 n,
								  ArrayType *x, ArrayType *y, float **xdata, float **ydata);
/* Loss and accuracy of `model` (inference mode) over a packed table; adds into stats. */
extern void pgdl_packed_evaluate(NnModel *model, const PgdlDataset *ds, NnBatchStats *stats);
/* fit.c: a validation set has the training set's features, task and classes. */
extern void pgdl_check_same_dataset_shape(const PgdlDataset *train, const PgdlDataset *valid, Oid validation);


/* The model's input and output agree with the dataset, or an error says how not. */
extern void pgdl_check_model_fits(const NnSpec *spec, const PgdlDataset *ds);

/* architectures.c: named network specs (pgdl.architectures), their validation and cost */

/* The stored spec of architecture `name` and its id, or an error saying it does not exist. */
extern Jsonb *pgdl_architecture_by_name(const char *name, int64 *id);

/*
 * runs.c: the run record -- pgdl.runs, pgdl.run_metrics, pgdl.models and
 * pgdl.checkpoints.  Each call connects to SPI itself; callers need only a
 * transaction.  Ids of 0 mean none (NULL in the catalog).
 */

typedef enum PgdlRunStatus
{
	PGDL_RUN_RUNNING = 0,
	PGDL_RUN_FINISHED,
	PGDL_RUN_FAILED,
	PGDL_RUN_CANCELLED
} PgdlRunStatus;

/*
 * One epoch of one model, as pgdl.run_metrics and pgdl.models.metrics hold it.
 * The epoch a model diverged in is its last; its losses are of the steps
 * applied (NaN, stored as NULL, when there were none) and it has no validation.
 */
typedef struct PgdlEpochMetrics
{
	int32		epoch;			/* 1-based */
	double		train_loss;
	double		train_accuracy; /* when classification */
	double		validation_loss;	/* when has_validation */
	double		validation_accuracy;	/* when has_validation and classification */
	double		seconds;
	double		images_per_second;
	bool		classification;
	bool		has_validation;
	bool		diverged;		/* training stopped in this epoch: see PgdlDivergence */
	int64		steps;			/* when diverged: the optimizer steps its weights have taken */
	double		predicted_seconds;	/* fit_multiple: the epoch's training as pgdl.estimate predicts it; 0: none */
	bool		early_stopped;	/* early stopping ended training after this epoch */
} PgdlEpochMetrics;

/*
 * Early stopping (patience): the best validation metric so far and the epochs
 * since it improved, a model's own; pgdl_early_stop takes an epoch's metrics
 * and says whether training stops after it.
 */
typedef struct PgdlPatience
{
	double		best;
	int32		bad_epochs;
	bool		seen;
} PgdlPatience;
extern bool pgdl_early_stop(const PgdlTrainConfig *config, const PgdlEpochMetrics *m, PgdlPatience *p);
/* The schedule's epoch counters of a configuration: the epoch being trained (0-based) of a run of `epochs`. */
extern void pgdl_config_at_epoch(PgdlTrainConfig *config, int32 epoch, int32 epochs);
extern bool pgdl_config_counts_epochs(const PgdlTrainConfig *config);
/* An error when the configuration has keys that need epochs counted, which caller does not. */
extern void pgdl_config_refuse_epochs(const PgdlTrainConfig *config, const char *caller);

/*
 * fit.c: the model a pgdl.fit or pgdl.fit_federated run trained, stored; the run finished.  Its id.
 * config_json: the configuration as given (its "warm_start" is kept); origin: pgdl_model_start's.
 */
extern int64 pgdl_fit_store(int64 run, const char *name, int64 arch_id, const NnSpec *spec,
							const PgdlTrainConfig *config, Jsonb *config_json, Jsonb *origin,
							int64 dataset, bytea *weights, const PgdlEpochMetrics *last);
/* fit.c: a NOTICE with an epoch's (or a federated round's) losses and accuracies. */
extern void pgdl_fit_report_epoch(const char *unit, const PgdlEpochMetrics *m, int32 epochs);

/*
 * run_recorder.c: pgdl.fit's run and its epochs, committed as they come by a
 * background worker, the run recorder (or, with no worker free, in the
 * caller's transaction).  The fit's transaction finishes the run and stores
 * the model, then releases the recorder, which marks the run failed unless
 * that transaction commits.
 */
typedef struct PgdlRunStart
{
	int64		dataset;
	int64		validation;		/* 0: none */
	int64		architecture;	/* 0: a spec given as jsonb */
	Jsonb	   *config;
	int32		epochs;
} PgdlRunStart;

typedef struct PgdlRecorder PgdlRecorder;

extern PgdlRecorder *pgdl_recorder_start(const PgdlRunStart *start, int64 *run, int64 *config);
extern void pgdl_recorder_epoch(PgdlRecorder *r, int64 run, int64 config, const PgdlEpochMetrics *m);
extern void pgdl_recorder_fail(PgdlRecorder *r);	/* in PG_CATCH: the run failed, now */
extern void pgdl_recorder_release(PgdlRecorder *r);
extern PGDLLEXPORT void pgdl_run_recorder_main(Datum main_arg);

/*
 * run_recorder.c: a pgdl.fit_multiple run whose call, or the transaction it
 * ran in, fails or is rolled back is marked failed by a short-lived worker,
 * the run settler, unless it was resumed since (progress_handle says which
 * attempt).
 */
typedef struct PgdlSettle PgdlSettle;
extern PgdlSettle *pgdl_run_settle_prepare(void);
extern void pgdl_run_settle_arm(PgdlSettle *settle, int64 run, int64 progress_handle);
extern PGDLLEXPORT void pgdl_run_settler_main(Datum main_arg);

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

/* A trained model for pgdl.models. */
typedef struct PgdlModelRecord
{
	const char *name;			/* NULL: none */
	int64		architecture;	/* 0: a spec given as jsonb, or a base model's network */
	Jsonb	   *spec;
	Jsonb	   *config;
	int64		dataset;
	int64		run;
	int64		config_id;		/* its pgdl.configs row in a fit_multiple run; 0 in a fit run */
	int64		parent;			/* the base model it started from; 0: none */
	Jsonb	   *origin;			/* pgdl.models.origin (a warm start's lineage); NULL: none */
	bytea	   *weights;
	PgdlEpochMetrics last;		/* its last epoch: pgdl.models.metrics */
	bool		selection;		/* trained in a model selection: metrics say whether it was stopped */
	bool		stopped;
} PgdlModelRecord;

/* A pgdl.runs row, checked: a known status, epochs in range, an object as config. */
typedef struct PgdlRunRecord
{
	int64		id;
	char	   *kind;			/* 'fit' or 'fit_multiple' */
	PgdlRunStatus status;
	int64		dataset;		/* 0: its packed table was dropped */
	int64		validation;		/* 0: none, or dropped */
	Jsonb	   *config;
	int32		epochs;
} PgdlRunRecord;

/* Where a model of a fit_multiple run stands, for pgdl.resume. */
typedef struct PgdlResumePoint
{
	int32		epoch;			/* of its last checkpoint (1 .. the run's epochs); 0: none */
	bytea	   *weights;		/* that checkpoint (not yet checked against the network); NULL: none */
	bool		stopped;		/* successive halving stopped it at a rung */
	bool		has_metrics;	/* metrics: losses, accuracies and state (diverged) of its last recorded epoch */
	PgdlEpochMetrics metrics;
} PgdlResumePoint;

/* kind: 'fit' or 'fit_multiple'; progress_handle: the run's DSM segment, for pgdl.progress. */
extern int64 pgdl_run_begin(const char *kind, int64 dataset, int64 validation, int64 architecture,
							Jsonb *config, int32 epochs, int64 progress_handle);
/*
 * pgdl.fit's configuration in pgdl.configs: the row of (architecture, config)
 * in the current role's set "pgdl.fit", added if new; 0 for a network given
 * as a jsonb spec (a pgdl.configs row needs an architecture).
 */
#define PGDL_FIT_CONFIG_SET "pgdl.fit"
extern int64 pgdl_run_fit_config(int64 architecture, Jsonb *config);
/* A run still running when its caller let go: failed (after waiting for a transaction that holds its row). */
/* Only the attempt that progress_handle names (0: a pgdl.fit run, which has none); see run_recorder.c. */
extern void pgdl_run_fail_if_running(int64 run, int64 progress_handle);
/* A resumed run: running again, with new shared memory. */
extern void pgdl_run_restart(int64 run, int64 progress_handle);
extern void pgdl_run_record_epoch(int64 run, int64 config_id, const PgdlEpochMetrics *metrics);
/* The same for a node's part of a federated round (node: its server's name, or NULL for the run's model). */
extern void pgdl_run_record_node_epoch(int64 run, int64 config_id, const char *node, const PgdlEpochMetrics *metrics);
/* A halving strategy's decision at a rung, on that epoch's metrics row, with the model's bracket. */
extern void pgdl_run_record_decision(int64 run, int64 config_id, int32 epoch, bool stop, int32 bracket);
extern void pgdl_run_checkpoint(int64 run, int64 config_id, int32 epoch, bytea *weights);
/* An error if a model already has this name. */
extern void pgdl_run_check_model_name(const char *name);
/* Insert the model and link its run's metrics rows (its configuration's) to it; returns its id. */
extern int64 pgdl_run_store_model(const PgdlModelRecord *model);
extern void pgdl_run_finish(int64 run, PgdlRunStatus status);
/* false: no such run; ERRCODE_DATA_CORRUPTED if the row is not valid. */
extern bool pgdl_run_read(int64 run, PgdlRunRecord *out);
/* Configuration config_id's point in run; ERRCODE_DATA_CORRUPTED if its checkpoint is not within 1 .. epochs. */
extern void pgdl_run_resume_point(int64 run, int64 config_id, int32 epochs, PgdlResumePoint *out);
/* The runs in flight that recorded their shared memory: ids and handles, palloc'd; returns how many. */
extern int64 pgdl_run_list_running(int64 **runs, int64 **handles);


/* transfer.c: configurations that start from a stored model's first layers, frozen */

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
/*
 * A configuration's new model: spec from seed, then the layers of its "warm_start" model that fit;
 * *origin: the lineage to store (NULL without a warm start).  Malloc'd: free it or hand it to a context.
 */
extern NnModel *pgdl_model_start(const NnSpec *spec, uint64 seed, Jsonb *config, Jsonb **origin);
/* The whole model: the frozen prefix, then the trained rest (a serialized engine model). */
extern bytea *pgdl_transfer_join(const PgdlTransfer *t, const uint8 *rest_blob, Size rest_len);
/* SHA-256 (hex, 65 bytes with the NUL) of a slice's spec and weights: what feature caches are keyed by. */
extern void pgdl_prefix_hash(const NnModel *prefix, char *hex);

/*
 * A frozen prefix run over buffers one after another, as a worker recomputing
 * it, a node and a cache view do: inference mode, NN_FROZEN_CHUNK examples at
 * a time, so every path gets the same bytes.  The outputs go to a buffer that
 * grows in cxt (not CurrentMemoryContext: scans call back in a context they
 * reset per batch) and stays valid until the next call.
 */
typedef struct PgdlPrefixRun
{
	NnModel    *prefix;			/* NULL: none; the input is returned as it is */
	MemoryContext cxt;
	float	   *out;
	int32		out_examples;	/* room in out */
} PgdlPrefixRun;

extern const float *pgdl_prefix_run(PgdlPrefixRun *run, const float *x, int32 n);
/* The prefix's outputs of n examples into out (n x its output size), or an error. */
extern void pgdl_prefix_forward(NnModel *prefix, const float *x, int32 n, float *out);

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
/* in a worker's task transaction: the build lock of a cache view, and the view made for the caller */
extern void pgdl_cache_lock_build(const char *relname);
extern void pgdl_cache_create_view(const char *relname, const char *definition);

#endif							/* PGDL_H */
