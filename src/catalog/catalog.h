/*
 * catalog/catalog.h -- the only readers and writers of pgdl.* rows: datasets,
 * models (model_io.c), architectures, the run record (runs.c), what outlives a
 * call (lifecycle.c), and the triggers that check rows as they are written.
 */
#ifndef PGDL_CATALOG_H
#define PGDL_CATALOG_H

#include "spec/spec.h"

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
extern void pgdl_run_prune_checkpoints(int64 run);	/* at the end of a finished run */
/* for errors about a table pgdl.datasets does not know: packed before pgdl was dropped? */
extern bool pgdl_packed_left_behind(Oid relid);

#define PGDL_UNKNOWN_PACKED_DETAIL \
	"It has the columns of a table pgdl.pack writes, but no row in pgdl.datasets: it was packed " \
	"before pgdl was dropped, and its classes and normalization went with the extension."

/* datasets.c: what a packed table's rows mean, from its pgdl.datasets row */

/* How the numeric features are scaled: x * scale, or (x - mean) / std with mean and std as named. */
typedef enum PgdlScaling
{
	PGDL_SCALING_SCALE,			/* {"scale": s} */
	PGDL_SCALING_STANDARD,		/* {"mean": [...], "std": [...]} */
	PGDL_SCALING_MINMAX,		/* {"min": [...], "range": [...]} */
	PGDL_SCALING_ROBUST			/* {"median": [...], "iqr": [...]} */
} PgdlScaling;

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
	float	   *mean;			/* else (x - mean) / std, per feature: the center and divisor of */
	float	   *std;			/* standardize, min-max or robust scaling (`scaling` says which) */
	PgdlScaling scaling;
	Jsonb	   *normalization;	/* as stored: a dataset packed with this one as reference copies it */
	/* categorical columns: their ids follow the n_numeric normalized features (see pack.md) */
	int32		n_numeric;		/* features normalized: n_features less indicators, ids and lengths */
	/*
	 * impute => ...: a missing (NaN) numeric feature j becomes impute[j]
	 * before scaling; indicators (0-based numeric features, ascending) each
	 * add a feature after the numeric ones, 1 where it was missing.  NULL / 0
	 * when the dataset was packed without imputation.
	 */
	float	   *impute;
	int32		n_indicators;
	int32	   *indicators;
	Jsonb	   *imputation;		/* as stored; NULL when none */
	/*
	 * The raw example vector that predict takes (pgdl.encode's): the
	 * n_numeric features, one id per categorical column (one-hot ones too),
	 * each sequence's ids and length.  n_features when nothing expands it.
	 */
	int32		n_raw;
	int32		n_categorical;
	int32		n_sequences;	/* sequence columns: their ids and length follow the categorical ids */
	struct PgdlVocabulary *vocabulary;	/* n_categorical, then n_sequences; NULL when none */
	Jsonb	   *categorical;	/* as stored: a dataset packed with this one as reference copies it */
	/* standardize_target: y is (target - mean) / std per target (n_targets of each); NULL when not */
	float	   *target_mean;
	float	   *target_std;
	Jsonb	   *target_normalization;	/* as stored; NULL when none */
	bool		weighted;		/* the packed table's column w holds each example's weight */
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
	bool		one_hot;		/* a categorical column one-hot: n_values floats, value i at i (0: none) */
	int32		n_values;
	char	  **values;			/* as text */
	int64	   *integers;		/* is_integer: the values as numbers */
} PgdlVocabulary;

/* At most this many values a categorical column: ids are floats, exact up to 2^24. */
#define PGDL_MAX_CATEGORIES		16777215

/* At most this many values a one-hot column: each is a feature of the example. */
#define PGDL_MAX_ONE_HOT		256

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
/*
 * n rows of raw example vectors (n_raw each, NaN a missing numeric feature)
 * to n_features each: imputed, with their missing indicators, one-hot columns
 * spread out; not yet scaled.  x may be raw when nothing expands the dataset.
 */
extern void pgdl_dataset_expand(const PgdlDataset *ds, const float *raw, float *x, int64 rows);
/* x (n rows of expanded features) to what the model was trained on, in place. */
extern void pgdl_dataset_normalize(const PgdlDataset *ds, float *x, int64 rows);
/* rows x n_targets standardized targets (or a regression model's outputs) back to target units, in place. */
extern void pgdl_dataset_unscale_targets(const PgdlDataset *ds, float *y, int64 rows);
/* Value `value` (NULL: a NULL) of categorical column c as its id: 0 when unseen or NULL. */
extern int32 pgdl_dataset_category_id(const PgdlDataset *ds, int c, const char *value);
/* Compares two values of a categorical column, by number or by bytes. */
extern int	pgdl_category_compare(bool is_integer, const char *a, const char *b);
/* The floats of the example vector column c (categorical or sequence) takes: 1, n_values one-hot, or L ids and the length. */
extern int32 pgdl_vocabulary_width(const PgdlVocabulary *v);
/*
 * A sequence's n ids (tokens in order) as its L floats of the example vector,
 * then its length: the first L ids, padded; the length is how many are tokens.
 */
extern void pgdl_sequence_layout(const int32 *ids, int64 n, int32 L, float *out);
/*
 * NULL when `other` is preprocessed as `trained` (task, targets, classes,
 * features, vocabularies and sequence lengths, normalization: the floats
 * themselves, not where they came from), else a palloc'd sentence naming the
 * first difference.  _check raises it (ERRCODE_INVALID_PARAMETER_VALUE):
 * "\"what\" was not preprocessed as the model's training set".
 */
extern char *pgdl_dataset_preprocessing_difference(const PgdlDataset *trained, const PgdlDataset *other);
/* The same for the features alone (layout, vocabularies, normalization): what a base model's layers see. */
extern char *pgdl_dataset_features_difference(const PgdlDataset *trained, const PgdlDataset *other);
extern void pgdl_check_same_preprocessing(const PgdlDataset *trained, const PgdlDataset *other, const char *what);

/* model_io.c: models as bytea, by id or name (cached), as a SQL function's argument; datasets (cached) */

extern void pgdl_model_io_init(void);

/* A stored or given model, ready to run. */
typedef struct PgdlModel
{
	int64		id;				/* 0 when given as bytea */
	NnModel    *nn;
	PgdlDataset *dataset;		/* NULL when unknown (a bare bytea, or no dataset) */
	int32		diverged_epoch; /* the epoch its training diverged in (pgdl.models.metrics); 0: healthy */
	bool		dataset_dropped;	/* its packed training table was dropped, and its preprocessing with it */
} PgdlModel;

/*
 * An error (ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE) for a model that cannot
 * answer: one whose training diverged, named with its epoch, or one whose
 * packed training table was dropped (pgdl_check_model_preprocessing).  Every
 * function that runs a stored model on raw rows (predict, evaluate, explain,
 * importance) calls it.
 */
extern void pgdl_check_model_usable(const PgdlModel *model);

/*
 * An error (the same) for a model whose packed training table was dropped: the
 * normalization, imputation and classes it reads its rows with went with the
 * table's pgdl.datasets row, and the rows as given would answer wrongly.
 */
extern void pgdl_check_model_preprocessing(const PgdlModel *model);

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

/* Whether a table has the columns pgdl.pack writes (part, buffer_id, n, x, y), of their types. */
extern bool pgdl_packed_has_columns(Oid relid);

/* architectures.c: named network specs (pgdl.architectures); their cost is plan/estimate.c's */

/* The stored spec of architecture `name` and its id, or an error saying it does not exist. */
extern Jsonb *pgdl_architecture_by_name(const char *name, int64 *id);
/* The stored spec of architecture `id` and its name; NULL when the caller sees none of that id. */
extern Jsonb *pgdl_architecture_by_id(int64 id, char **name);

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
	/* the validation metrics beyond loss and accuracy, when rank_by or monitor asked for them */
	bool		has_scores;
	double		scores[PGDL_RANK_N_METRICS];	/* by PgdlRankMetric; NaN: not defined for the model */
} PgdlEpochMetrics;

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
	PgdlEpochMetrics last;		/* its stored epoch (the best one, restore_best): pgdl.models.metrics */
	int32		epochs_trained; /* restore_best: the epochs it trained, when more than last.epoch; else 0 */
	bool		folded;			/* a fold of cross-validation: its held-out partition, `fold`, in its metrics */
	int32		fold;
	bool		selection;		/* trained in a model selection: metrics say whether it was stopped */
	bool		stopped;
} PgdlModelRecord;

/* A pgdl.runs row, checked: a known status, epochs in range, an object as config. */
typedef struct PgdlRunRecord
{
	int64		id;
	char	   *kind;			/* 'fit', 'fit_multiple' or 'fit_federated' */
	PgdlRunStatus status;
	int64		dataset;		/* 0: its packed table was dropped */
	int64		validation;		/* 0: none, or dropped */
	Jsonb	   *config;
	int32		epochs;
	int64		architecture;	/* 0: none (a spec given as jsonb, or dropped) */
	char	   *isa;			/* engine->>'isa': what it began on; NULL: not recorded */
	char	   *blas_core;		/* engine->>'blas_core' */
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
							Jsonb *config, int32 epochs, int64 progress_handle, const PgdlEngine *engine);
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
/* A resumed run: running again, with new shared memory; engine: the kernels it resumes on. */
extern void pgdl_run_restart(int64 run, int64 progress_handle, const PgdlEngine *engine);
extern void pgdl_run_record_epoch(int64 run, int64 config_id, const PgdlEpochMetrics *metrics);
/* The same for fold `fold` of a configuration's cross-validation (pgdl.run_metrics.fold). */
extern void pgdl_run_record_fold_epoch(int64 run, int64 config_id, int32 fold, const PgdlEpochMetrics *metrics);
/* The same for a node's part of a federated round (node: its server's name, or NULL for the run's model). */
extern void pgdl_run_record_node_epoch(int64 run, int64 config_id, const char *node, const PgdlEpochMetrics *metrics);
/* A halving strategy's decision at a rung, on that epoch's metrics row, with the model's bracket. */
extern void pgdl_run_record_decision(int64 run, int64 config_id, int32 epoch, bool stop, int32 bracket);
/* A federated round's row (the run's model's, round 1-based): who was missing, the privacy spent. */
extern void pgdl_run_record_federation(int64 run, int32 round, Jsonb *federation);
extern void pgdl_run_checkpoint(int64 run, int64 config_id, int32 epoch, bytea *weights);
/* The run's checkpoint of a configuration at an epoch (restore_best's); NULL: none. */
extern bytea *pgdl_run_checkpoint_at(int64 run, int64 config_id, int32 epoch);
/* An error if a model already has this name. */
extern void pgdl_run_check_model_name(const char *name);
/* Insert the model and link its run's metrics rows (its configuration's) to it; returns its id. */
extern int64 pgdl_run_store_model(const PgdlModelRecord *model);
extern void pgdl_run_finish(int64 run, PgdlRunStatus status);
/* false: no such run; ERRCODE_DATA_CORRUPTED if the row is not valid. */
extern bool pgdl_run_read(int64 run, PgdlRunRecord *out);
/* A WARNING when this session's kernels are not those the run began on (pgdl.resume's leader). */
extern void pgdl_run_warn_engine(const PgdlRunRecord *rec);
/* Configuration config_id's point in run; ERRCODE_DATA_CORRUPTED if its checkpoint is not within 1 .. epochs. */
extern void pgdl_run_resume_point(int64 run, int64 config_id, int32 epochs, PgdlResumePoint *out);
/*
 * A resumed fit_multiple run's history of configuration config_id, from its
 * run's rows (node NULL) of epochs 1 .. last: the epochs in order, each with
 * its epoch, losses, accuracies (validation's 0 when NULL), diverged and
 * validation scores, as ranking, early stopping and restore_best read them;
 * *out palloc'd, returns how many.
 */
extern int32 pgdl_run_validation_history(int64 run, int64 config_id, int32 last, PgdlEpochMetrics **out);
/* The runs in flight that recorded their shared memory: ids and handles, palloc'd; returns how many. */
extern int64 pgdl_run_list_running(int64 **runs, int64 **handles);

#endif							/* PGDL_CATALOG_H */
