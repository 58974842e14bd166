/*
 * train/train.h -- training: the aggregate and its steps (train_agg.c,
 * train_ahead.c), pgdl.fit (fit.c) and its run recorder, evaluation
 * (evaluate.c), transfer learning (transfer.c).
 */
#ifndef PGDL_TRAIN_H
#define PGDL_TRAIN_H

#include "data/data.h"

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

/*
 * class_weights.c: a configuration's "class_weight" resolved against the
 * dataset it trains on (into config->class_weights; nothing without the key),
 * then given to a model by pgdl_train_begin (an error if never resolved).
 */
extern void pgdl_class_weights_resolve(PgdlTrainConfig *config, const struct PgdlDataset *ds);
extern void pgdl_class_weights_apply(NnModel *model, const PgdlTrainConfig *config);
extern void pgdl_train_buffer(PgdlTrainState *state, const float *x, const float *y, const float *w, int32 n);
/*
 * train_ahead.c: buffers' steps in a thread while the backend reads the next
 * ones (host models only); the same steps, in the same order, as pgdl_train_buffer.
 */
extern bool pgdl_train_ahead_possible(const PgdlTrainState *state);
extern int64 pgdl_train_ahead(PgdlTrainState *state, const float *x, const float *y, const float *w, int32 n);
extern void pgdl_train_ahead_wait(PgdlTrainState *state);
extern void pgdl_train_ahead_wait_job(PgdlTrainState *state, int64 job);
extern void pgdl_train_ahead_end(PgdlTrainState *state);
/* At the end of a sub-epoch: marks the state diverged if the weights are not all finite. */
extern void pgdl_train_check_weights(PgdlTrainState *state);
/* a = the average of a and b weighted by their examples (FedAvg); a's counters add b's. */
extern void pgdl_train_average(PgdlTrainState *a, const PgdlTrainState *b);
/* An errdetail saying where a diverged state stopped. */
extern int	pgdl_train_divergence_detail(const PgdlTrainState *state);

/*
 * Early stopping (patience) and restore_best: the best monitored value so far,
 * the epochs since it improved, and the epoch it was (with its metrics), a
 * model's own; pgdl_early_stop takes an epoch's metrics and says whether
 * training stops after it.  Plain data: it lives in fit_multiple's shared memory.
 */
typedef struct PgdlPatience
{
	double		best;
	int32		bad_epochs;
	bool		seen;
	int32		best_epoch;		/* 0: none yet */
	PgdlEpochMetrics best_metrics;
} PgdlPatience;
extern bool pgdl_early_stop(const PgdlTrainConfig *config, const PgdlEpochMetrics *m, PgdlPatience *p);
/*
 * An epoch's value of a rank metric: loss is the validation loss (the training
 * loss without a validation set), the others the validation set's (NaN when
 * not measured).  The key orders lower first whatever the direction (NaN last
 * by mop_compare_loss).
 */
extern double pgdl_epoch_rank_value(const PgdlEpochMetrics *m, PgdlRankMetric r);
extern double pgdl_epoch_rank_key(const PgdlEpochMetrics *m, PgdlRankMetric r);
/* The schedule's epoch counters of a configuration: the epoch being trained (0-based) of a run of `epochs`. */
extern void pgdl_config_at_epoch(PgdlTrainConfig *config, int32 epoch, int32 epochs);
extern bool pgdl_config_counts_epochs(const PgdlTrainConfig *config);
/* An error when the configuration has keys that need epochs counted, which caller does not. */
extern void pgdl_config_refuse_epochs(const PgdlTrainConfig *config, const char *caller);

/*
 * fit.c: the model a pgdl.fit or pgdl.fit_federated run trained, stored; the run finished.  Its id.
 * config_json: the configuration as given (its "warm_start" is kept); origin: pgdl_model_start's;
 * epochs_trained: restore_best's epochs trained when last is an earlier epoch, else 0.
 */
extern int64 pgdl_fit_store(int64 run, const char *name, int64 arch_id, const NnSpec *spec,
							const PgdlTrainConfig *config, Jsonb *config_json, Jsonb *origin,
							int64 dataset, bytea *weights, const PgdlEpochMetrics *last, int32 epochs_trained);
/*
 * fit.c: the partitions a configuration visits in epoch `epoch` (0-based), in
 * its seeded order: all of them, or all but `holdout` (a fold's held-out
 * partition; -1: none); returns how many.  pgdl.fit and the model hopper's
 * workers draw by this one rule, so that a model ends with the same bytes.
 */
extern int32 pgdl_epoch_order(uint64 seed, int32 epoch, int32 partitions, int32 holdout, int32 *order);
/* fit.c: a NOTICE with an epoch's (or a federated round's) losses and accuracies. */
extern void pgdl_fit_report_epoch(const char *unit, const PgdlEpochMetrics *m, int32 epochs);

/*
 * run_recorder.c: pgdl.fit's run and its epochs (pgdl.fit_federated's and its
 * rounds with their checkpoints), committed as they come by a
 * background worker, the run recorder (or, with no worker free, in the
 * caller's transaction).  The fit's transaction finishes the run and stores
 * the model, then releases the recorder, which marks the run failed unless
 * that transaction commits.
 */
typedef struct PgdlRunStart
{
	const char *kind;			/* pgdl.runs.kind: 'fit' (NULL) or 'fit_federated', which has no pgdl.configs row */
	int64		resume;			/* a run to mark running again (pgdl.resume of a fit_federated run); 0: a new one */
	int64		dataset;
	int64		validation;		/* 0: none */
	int64		architecture;	/* 0: a spec given as jsonb */
	Jsonb	   *config;
	int32		epochs;
} PgdlRunStart;

typedef struct PgdlRecorder PgdlRecorder;

/* A site's part of a federated round: pgdl.run_metrics.node and its row. */
typedef struct PgdlRoundSite
{
	char		node[NAMEDATALEN];
	PgdlEpochMetrics metrics;
} PgdlRoundSite;

/* A federated round, committed as one: the sites' rows, the run's model's, its federation, its checkpoint. */
typedef struct PgdlRound
{
	const PgdlEpochMetrics *metrics;	/* the run's model's row (node NULL): its epoch is the round */
	const PgdlRoundSite *sites;
	int32		n_sites;
	Jsonb	   *federation;		/* pgdl.run_metrics.federation of that row; NULL: none */
	bytea	   *checkpoint;		/* the model after the round (pgdl.checkpoints, config NULL) */
} PgdlRound;

extern PgdlRecorder *pgdl_recorder_start(const PgdlRunStart *start, int64 *run, int64 *config);
extern void pgdl_recorder_epoch(PgdlRecorder *r, int64 run, int64 config, const PgdlEpochMetrics *m);
extern void pgdl_recorder_round(PgdlRecorder *r, int64 run, const PgdlRound *round);
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
/* A NOTICE when the training set ds's features are preprocessed otherwise than the base model's dataset. */
extern void pgdl_transfer_note_preprocessing(const PgdlTransfer *t, const PgdlDataset *ds);
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

/*
 * evaluate_metrics.c: an epoch's validation scores (by PgdlRankMetric, NaN
 * where the model's task leaves one undefined) from a model's predictions,
 * kept as pgdl.metrics keeps them: over a packed table, or fed buffer by
 * buffer (a fit_multiple worker, its frozen prefix already run), weighted by
 * w (NULL: unweighted) as scikit-learn's sample_weight.
 */
typedef struct PgdlScores PgdlScores;
extern PgdlScores *pgdl_scores_begin(NnModel *model, bool classification, MemoryContext cxt);
extern void pgdl_scores_add(PgdlScores *s, const float *x, const float *y, const float *w, int32 n);
extern void pgdl_scores_finish(PgdlScores *s, double *scores);
extern void pgdl_validation_scores(NnModel *model, const PgdlDataset *vds, double *scores);
/*
 * One metric of n rows held in memory (x, y and w as a packed table's buffers
 * hold them, w NULL: unweighted) of dataset ds: as pgdl.metrics scores them,
 * the loss as pgdl.evaluate's; the model run on `batch` rows at a time; NaN
 * where the metric is not defined for the rows.
 */
extern double pgdl_metric_of_rows(NnModel *model, const PgdlDataset *ds, PgdlRankMetric metric, const float *x,
								  const float *y, const float *w, int64 n, int32 batch);

/* evaluate.c: loss and accuracy of `model` (inference mode) over a packed table; adds into stats. */
extern void pgdl_evaluate_packed(NnModel *model, const PgdlDataset *ds, NnBatchStats *stats);
/* The same over one partition of a packed table: a fold's held-out partition. */
extern void pgdl_evaluate_partition(NnModel *model, const PgdlDataset *ds, int32 part, NnBatchStats *stats);
/* evaluate.c: the mean loss of n rows held in memory, as pgdl.evaluate computes it (pgdl_metric_of_rows' loss). */
extern double pgdl_evaluate_loss_of_rows(NnModel *model, const PgdlDataset *ds, const float *x, const float *y,
										 const float *w, int64 n, int32 batch);
/* The network's raw outputs (logits for the classification losses) for n examples, in its workspace. */
extern const float *pgdl_model_outputs(NnModel *m, const float *x, int n);
/* One example's class from its raw outputs (the argmax, or logit > 0 for one bce output), and its probability. */
extern int	pgdl_model_class_of(const NnModel *m, const float *z, float *probability);
extern float pgdl_logistic(float z);
/* Losses of one example from its raw outputs, as the engine computes them (in double). */
extern double pgdl_bce_of_logit(double z, double t);
/* mse's or huber's loss of an error d in units of `unit` training units (huber's delta scaled alike). */
extern double pgdl_regression_loss(const NnModel *m, double d, double unit);
extern double pgdl_cross_entropy_of_logits(const float *z, int k, int label, int best);
/* What the loss makes of one example's k raw outputs z: probabilities (as pgdl.predict returns them), or z itself. */
extern void pgdl_model_probabilities(NnLoss loss, const float *z, int64 k, float *out);

/*
 * What an evaluation reads: a packed table (packed), or raw rows (source, a
 * table, view or query, with its features and label columns) preprocessed as
 * the model's training set was packed (data/pack_stream.c).
 */
typedef struct PgdlEvaluationData
{
	Oid			packed;
	char	   *source;			/* NULL: the packed table */
	char	   *features;
	char	   *label;
} PgdlEvaluationData;

/* A SQL function's data arguments, after the model: (packed regclass), or raw: (source, features, label text). */
extern void pgdl_evaluation_data_args(FunctionCallInfo fcinfo, bool raw, PgdlEvaluationData *data);
/*
 * The dataset the data is read as, once the model is checked to suit it: the
 * packed table's, or the model's training set for raw rows.  Then every buffer
 * of the data to fn.
 */
extern const PgdlDataset *pgdl_evaluation_dataset(const PgdlModel *model, const PgdlEvaluationData *data);
extern void pgdl_evaluation_scan(const PgdlDataset *ds, const PgdlEvaluationData *data, PgdlBufferFn fn,
								 void *arg);

#endif							/* PGDL_TRAIN_H */
