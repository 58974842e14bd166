/*
 * fit.c -- pgdl.fit: one configuration, epochs of sub-epochs.
 *
 * An epoch visits every partition of the packed table once, in an order fixed
 * by the configuration's seed and the epoch number (nn_rng_permutation with
 * NN_EPOCH_ORDER_STREAM); a sub-epoch is the pgdl.train steps over one
 * partition's buffers in buffer_id order.  The model hopper will visit
 * partitions by the same rule, so that a model trained alone and one trained
 * in a group end identical.
 *
 * With holdout => p (one fold of cross-validation), an epoch visits every
 * partition but p, in the order the seed draws over the others, and validates
 * on p: what pgdl.fit_multiple(..., folds => true) trains as its fold p.
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"

#define FIT_SLOTS 4

/* One pgdl.fit call: what it trains, on what, and where it stands. */
typedef struct FitRun
{
	int64		arch_id;		/* 0: a spec given as jsonb */
	const NnSpec *spec;
	PgdlTrainConfig config;
	Jsonb	   *config_json;	/* as given: its "warm_start" */
	Jsonb	   *origin;			/* a warm start's lineage, or NULL */
	int32		epochs;
	PgdlDataset *ds;
	PgdlDataset *vds;			/* NULL: no validation set */
	int32		holdout;		/* the held-out partition, validated on; -1: none */
	const char *name;			/* NULL: none */
	MemoryContext cxt;			/* the model, its optimizer and held buffers */
	NnModel    *model;
	PgdlTrainState *state;
	int32	   *order;			/* partitions, in this epoch's order */
	PgdlHeldPartition *held;	/* per partition */
	int64		budget;			/* bytes of buffers that may still be held */
	int64		run_id;
	int64		config_id;		/* its pgdl.configs row; 0: none (a spec given as jsonb) */
	PgdlRecorder *recorder;
	int32		epoch;			/* 0-based, in training */
	int64		epoch_done;		/* examples trained in this epoch */
	int64		epoch_total;	/* examples per epoch: the dataset's rows when packed, until the first epoch ends */
	float	   *slots[FIT_SLOTS];	/* copies of buffers not kept, while they train ahead; used in turn */
	int64		slot_floats[FIT_SLOTS];
	int64		slot_job[FIT_SLOTS];	/* the train_ahead.c job reading each */
	int			slot;			/* the next one */
	bytea	   *best;			/* restore_best: the best epoch's model (weights and optimizer state), in cxt */
} FitRun;

/* The share of the whole call done: epochs, and examples of this one. */
static double
fit_fraction(const FitRun *f)
{
	double		in_epoch = f->epoch_total > 0 ? Min((double) f->epoch_done / f->epoch_total, 1.0) : 0;

	return (f->epoch + in_epoch) / f->epochs;
}

/*
 * A buffer not kept, which the scan overwrites with the next one, copied into
 * a slot once the thread is done with the slot's previous buffer.  The copy
 * costs about 1% of a step of the reference MLP.  Returns the slot.
 */
static int
copy_to_slot(FitRun *f, const float **x, const float **y, const float **w, int32 n)
{
	int			s = f->slot;
	int64		nx = (int64) n * f->ds->n_features;
	int64		ny = (int64) n * f->ds->n_targets;
	int64		nw = *w != NULL ? n : 0;

	pgdl_train_ahead_wait_job(f->state, f->slot_job[s]);
	if (nx + ny + nw > f->slot_floats[s])
	{
		if (f->slots[s])
			pfree(f->slots[s]);
		f->slots[s] = MemoryContextAllocHuge(f->cxt, (nx + ny + nw) * sizeof(float));
		f->slot_floats[s] = nx + ny + nw;
	}
	memcpy(f->slots[s], *x, nx * sizeof(float));
	memcpy(f->slots[s] + nx, *y, ny * sizeof(float));
	if (nw > 0)
		memcpy(f->slots[s] + nx + ny, *w, nw * sizeof(float));
	*x = f->slots[s];
	*y = f->slots[s] + nx;
	*w = nw > 0 ? f->slots[s] + nx + ny : NULL;
	f->slot = (s + 1) % FIT_SLOTS;
	return s;
}

/*
 * Buffers read in the first epoch are kept for the next ones, within
 * pgdl.train_cache_mem: reading a buffer back from its table (TOAST chunks) costs
 * about a tenth of a training step of the reference MLP.  A buffer read from
 * the table trains in train_ahead.c's thread while the next one is read (a kept
 * one where it is kept, the others from a copy); kept buffers of later epochs
 * train here, with nothing to read beside them.
 */
static void
train_cb(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept)
{
	FitRun	   *f = arg;

	if (pgdl_train_ahead_possible(f->state) && (!kept || f->epoch == 0))
	{
		int			s = kept ? -1 : copy_to_slot(f, &x, &y, &w, n);
		int64		job = pgdl_train_ahead(f->state, x, y, w, n);

		if (s >= 0)
			f->slot_job[s] = job;
	}
	else
	{
		pgdl_train_ahead_wait(f->state);
		pgdl_train_buffer(f->state, x, y, w, n);
	}
	f->epoch_done += n;
	pgdl_call_progress_update(f->epoch_done, f->epoch_done, fit_fraction(f));
}

/*
 * A configuration's "threads" within what the server allows: each thread is
 * a core, and BLAS threads on top of them would multiply.
 */
static void
fit_check_threads(int32 threads)
{
	if (threads <= 1)
		return;
	if (threads > pgdl_max_fit_threads)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("\"threads\" is %d, more than pgdl.max_fit_threads (%d) allows",
						threads, pgdl_max_fit_threads),
				 errhint("Ask for at most %d threads, or have a superuser raise pgdl.max_fit_threads.",
						 pgdl_max_fit_threads)));
	if (pgdl_blas_threads > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"threads\" and pgdl.blas_threads do not combine"),
				 errdetail("Each of a fit's threads calls BLAS on its own core; pgdl.blas_threads is %d.",
						   pgdl_blas_threads),
				 errhint("SET pgdl.blas_threads = 1, or train with \"threads\": 1.")));
}

/* The threads' own gradients and scratch, on top of the model, within pgdl.max_model_memory. */
static void
fit_check_thread_memory(const NnSpec *spec, const PgdlTrainConfig *config)
{
	NnMemory	mem;
	NnError		err;
	int64		threads_bytes;

	if (config->threads <= 1)
		return;
	if (!nn_spec_memory(spec, &config->optim, config->batch_size, &mem, &err) ||
		!nn_spec_thread_memory(spec, config->batch_size, config->threads, &threads_bytes, &err))
		pgdl_report_nn_error("model spec", &err);
	if (mem.total + threads_bytes > (int64) pgdl_max_model_memory * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the model with %d threads needs " INT64_FORMAT " bytes of memory, more than pgdl.max_model_memory (%dkB)",
						config->threads, mem.total + threads_bytes, pgdl_max_model_memory),
				 errdetail("The model takes " INT64_FORMAT " bytes; each thread beyond the first adds its own gradients and scratch, " INT64_FORMAT " bytes in all.",
						   mem.total, threads_bytes),
				 errhint("Use fewer threads, or ask a superuser to raise pgdl.max_model_memory.")));
}

/* A fold's held-out partition: one of the packed table's, with others to train on, and no validation table. */
static void
fit_check_holdout(FitRun *f, Oid validation, Jsonb *config_json)
{
	if (f->holdout < 0)
		return;
	/* as a fold of pgdl.fit_multiple(..., folds => true): its last epoch, watched on loss or accuracy */
	if (f->config.restore_best && pgdl_jsonb_key(&config_json->root, "restore_best") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("restore_best does not combine with holdout"),
				 errdetail("A fold's model is stored as its last epoch left it, as in pgdl.fit_multiple(..., folds => true)."),
				 errhint("Leave \"restore_best\" out of the configuration.")));
	f->config.restore_best = false;
	if (f->config.patience > 0 && pgdl_rank_metric_needs_scores(f->config.monitor))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("monitor \"%s\" does not combine with holdout", pgdl_rank_metric_name(f->config.monitor)),
				 errhint("Monitor validation_loss or validation_accuracy.")));
	if (OidIsValid(validation))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("holdout and validation do not combine"),
				 errdetail("With holdout, the model is validated on its held-out partition."),
				 errhint("Pass either validation => a packed table, or holdout => a partition.")));
	if (f->ds->partitions < 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("holdout needs a packed table of at least 2 partitions, \"%s\" has 1",
						get_rel_name(f->ds->packed)),
				 errhint("Pack with partitions => k for k folds.")));
	if (f->holdout >= f->ds->partitions)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("holdout must be a partition of the packed table, got %d", f->holdout),
				 errdetail("Partitions are numbered from 0 to %d.", f->ds->partitions - 1)));
}

int32
pgdl_epoch_order(uint64 seed, int32 epoch, int32 partitions, int32 holdout, int32 *order)
{
	int32		n = holdout >= 0 ? partitions - 1 : partitions;

	/* the others, numbered without the held-out one: the same draw as a table of one partition less */
	nn_rng_permutation(seed, NN_EPOCH_ORDER_STREAM(epoch), n, order);
	if (holdout >= 0)
		for (int32 k = 0; k < n; k++)
			if (order[k] >= holdout)
				order[k]++;
	return n;
}

/* Every argument checked, and the datasets read, before anything is allocated. */
static void
fit_check(FitRun *f, Oid source, Jsonb *config_json, Oid validation)
{
	if (f->epochs < 1 || f->epochs > PGDL_MAX_EPOCHS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epochs must be between 1 and %d, got %d", PGDL_MAX_EPOCHS, f->epochs)));
	pgdl_config_from_jsonb(config_json, &f->config);
	fit_check_threads(f->config.threads);
	if ((f->config.patience > 0 || f->config.restore_best) && !OidIsValid(validation) && f->holdout < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid training configuration at %s", f->config.patience > 0 ? "patience" : "restore_best"),
				 errdetail("Early stopping and restore_best watch the validation set: \"%s\" needs a validation table.",
						   f->config.patience > 0 ? "patience" : "restore_best"),
				 errhint("Pass validation => a packed table, or holdout => a partition.")));
	f->config_json = config_json;
	f->ds = pgdl_dataset_by_packed(source);
	pgdl_check_model_fits(f->spec, f->ds);
	pgdl_class_weights_resolve(&f->config, f->ds);
	pgdl_check_model_memory(f->spec, &f->config.optim, f->config.batch_size, "the model");
	pgdl_check_precision(&f->config.optim, pgdl_device_for(&f->config));
	fit_check_thread_memory(f->spec, &f->config);
	if (OidIsValid(validation))
	{
		f->vds = pgdl_dataset_by_packed(validation);
		pgdl_check_same_preprocessing(f->ds, f->vds, get_rel_name(validation));
	}
	if (f->config.patience > 0 || f->config.restore_best)
		pgdl_rank_metric_check_task(f->config.monitor, f->ds->classification, "monitor");
	if (f->ds->partitions < 1 || f->ds->partitions > PGDL_MAX_PARTITIONS)
		elog(ERROR, "dataset " INT64_FORMAT " has %d partitions", f->ds->id, f->ds->partitions);
	fit_check_holdout(f, validation, config_json);
	if (f->name)
		pgdl_run_check_model_name(f->name);
}

/* The step's threads (parallel.c), started once per backend and idle between fits. */
static void
fit_threads(NnModel *model, int32 threads)
{
	NnError		err;

	if (threads > 1 && !nn_model_set_threads(model, threads, &err))
		pgdl_report_nn_error("training configuration", &err);
}

/* The model, its optimizer, and room for the partitions' order and held buffers. */
static void
fit_start(FitRun *f)
{
	MemoryContext old;

	f->cxt = AllocSetContextCreate(TopTransactionContext, "pgdl fit", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(f->cxt);
	pgdl_engine_prepare();
	f->model = pgdl_model_start(f->spec, (uint64) f->config.seed, f->config_json, &f->origin);
	pgdl_model_free_with(f->model, f->cxt);
	f->state = pgdl_train_begin(f->model, &f->config, f->cxt);
	fit_threads(f->model, f->config.threads);
	f->order = palloc(sizeof(int32) * f->ds->partitions);
	f->held = palloc0(sizeof(PgdlHeldPartition) * f->ds->partitions);
	/* with one epoch there is no later epoch to keep buffers for */
	f->budget = f->epochs > 1 ? (int64) pgdl_train_cache_mem * 1024 : 0;
	MemoryContextSwitchTo(old);
}

/* Epoch e (0-based): every partition once, in the seeded order; then the validation set. */
static void
fit_epoch(FitRun *f, int32 e, PgdlEpochMetrics *m)
{
	PgdlTrainState *state = f->state;
	int32		visits;
	instr_time	start,
				duration;
	NnBatchStats vstats = {0};

	visits = pgdl_epoch_order((uint64) f->config.seed, e, f->ds->partitions, f->holdout, f->order);
	memset(&state->stats, 0, sizeof(NnBatchStats));
	/* the epoch's learning rate, as a fit_multiple worker sets it for the model's epoch */
	pgdl_config_at_epoch(&state->config, e, f->epochs);
	{
		NnError		err;

		if (!nn_model_set_optim(f->model, &state->config.optim, &err))
			pgdl_report_nn_error("training configuration", &err);
	}
	f->epoch = e;
	f->epoch_done = 0;
	pgdl_call_progress_phase(PGDL_PHASE_TRAINING, e + 1, f->epoch_total, false);
	INSTR_TIME_SET_CURRENT(start);
	/* a model that diverged is not trained further, nor evaluated */
	for (int32 k = 0; k < visits && !state->diverged; k++)
	{
		int32		p = f->order[k];

		if (e == 0)
			pgdl_packed_hold(f->ds, p, &f->held[p], f->cxt, &f->budget, train_cb, f);
		else
			pgdl_packed_foreach(f->ds, p, &f->held[p], train_cb, f);
		pgdl_train_ahead_wait(state);
		pgdl_train_check_weights(state);
	}
	INSTR_TIME_SET_CURRENT(duration);
	INSTR_TIME_SUBTRACT(duration, start);
	if (state->stats.n == 0 && !state->diverged)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA),
				 errmsg("packed table \"%s\" has no buffers", get_rel_name(f->ds->packed))));
	/* every epoch has as many examples as the first */
	f->epoch_total = state->stats.n;
	if (f->vds && !state->diverged)
	{
		pgdl_call_progress_phase(PGDL_PHASE_VALIDATING, e + 1, -1, false);
		pgdl_call_progress_update(0, 0, (double) (e + 1) / f->epochs);
		pgdl_evaluate_packed(f->model, f->vds, &vstats);
	}
	else if (f->holdout >= 0 && !state->diverged)
	{
		pgdl_call_progress_phase(PGDL_PHASE_VALIDATING, e + 1, -1, false);
		pgdl_evaluate_partition(f->model, f->ds, f->holdout, &vstats);
	}

	memset(m, 0, sizeof(*m));
	m->epoch = e + 1;
	m->classification = f->ds->classification;
	m->diverged = state->diverged != PGDL_HEALTHY;
	m->steps = m->diverged ? f->model->step : 0;
	/* a model may diverge at the first step of an epoch: then no loss was measured (NaN) */
	m->train_loss = state->stats.loss_sum / state->stats.n;
	m->train_accuracy = (double) state->stats.correct / state->stats.n;
	m->has_validation = vstats.n > 0;
	m->validation_loss = vstats.n ? vstats.loss_sum / vstats.n : 0;
	m->validation_accuracy = vstats.n ? (double) vstats.correct / vstats.n : 0;
	m->seconds = INSTR_TIME_GET_DOUBLE(duration);
	m->images_per_second = m->seconds > 0 ? state->stats.n / m->seconds : 0;
	if (m->has_validation && pgdl_rank_metric_needs_scores(f->config.monitor))
	{
		pgdl_validation_scores(f->model, f->vds, m->scores);
		m->has_scores = true;
	}
}

/*
 * Whether epoch m's progress line is due under pgdl.progress_interval: every
 * epoch (0), none (-1), or the first once the interval has passed since the
 * fit's first epoch began or since the last line; the last epoch (the last of
 * epochs, or the one that stops early) always.  One fit at a time runs in a
 * backend, so the time of the last line is kept here, reset at epoch 1.
 */
static bool
epoch_line_due(const PgdlEpochMetrics *m, int32 epochs)
{
	static TimestampTz last;
	TimestampTz now = GetCurrentTimestamp();
	bool		due;

	if (pgdl_progress_interval < 0)
		return false;
	if (m->epoch <= 1)
		last = now - (TimestampTz) (m->seconds * USECS_PER_SEC);
	due = pgdl_progress_interval == 0 || m->epoch >= epochs || m->early_stopped ||
		TimestampDifferenceExceeds(last, now, pgdl_progress_interval * 1000);
	if (due)
		last = now;
	return due;
}

/* Epoch m's progress NOTICE, when pgdl.progress_interval lets it through: rows per second of training. */
void
pgdl_fit_report_epoch(const char *unit, const PgdlEpochMetrics *m, int32 epochs)
{
	if (!epoch_line_due(m, epochs))
		return;
	if (m->has_validation && m->classification)
		ereport(NOTICE,
				(errmsg("%s %d/%d: loss %.4f, accuracy %.4f, validation loss %.4f, validation accuracy %.4f, %.0f rows/s",
						unit, m->epoch, epochs, m->train_loss, m->train_accuracy, m->validation_loss,
						m->validation_accuracy, m->images_per_second)));
	else if (m->has_validation)
		ereport(NOTICE,
				(errmsg("%s %d/%d: loss %.4f, validation loss %.4f, %.0f rows/s",
						unit, m->epoch, epochs, m->train_loss, m->validation_loss, m->images_per_second)));
	else if (m->classification)
		ereport(NOTICE,
				(errmsg("%s %d/%d: loss %.4f, accuracy %.4f, %.0f rows/s",
						unit, m->epoch, epochs, m->train_loss, m->train_accuracy, m->images_per_second)));
	else
		ereport(NOTICE,
				(errmsg("%s %d/%d: loss %.4f, %.0f rows/s",
						unit, m->epoch, epochs, m->train_loss, m->images_per_second)));
}

/* The model into pgdl.models, a fold's with its number in its metrics (fold < 0: none); the run finished. */
static int64
store_fold(int64 run, const char *name, int64 arch_id, const NnSpec *spec, const PgdlTrainConfig *config,
		   Jsonb *config_json, Jsonb *origin, int64 dataset, bytea *weights, const PgdlEpochMetrics *last,
		   int32 epochs_trained, int32 fold)
{
	PgdlModelRecord rec = {0};
	int64		model_id;

	rec.folded = fold >= 0;
	rec.fold = fold;

	rec.name = name;
	rec.architecture = arch_id;
	rec.spec = pgdl_spec_to_jsonb(spec);
	rec.config = pgdl_config_with_warm_start(pgdl_config_to_jsonb(config), config_json);
	rec.origin = origin;
	rec.dataset = dataset;
	rec.run = run;
	rec.weights = weights;
	rec.last = *last;
	rec.epochs_trained = epochs_trained;
	model_id = pgdl_run_store_model(&rec);
	pgdl_run_finish(run, PGDL_RUN_FINISHED);
	return model_id;
}

int64
pgdl_fit_store(int64 run, const char *name, int64 arch_id, const NnSpec *spec, const PgdlTrainConfig *config,
			   Jsonb *config_json, Jsonb *origin, int64 dataset, bytea *weights, const PgdlEpochMetrics *last,
			   int32 epochs_trained)
{
	return store_fold(run, name, arch_id, spec, config, config_json, origin, dataset, weights, last,
					  epochs_trained, -1);
}

/* The model as it is, or with restore_best the best epoch's (a model that diverged stays as it was then). */
static int64
fit_store(FitRun *f, const PgdlEpochMetrics *last, const PgdlPatience *patience)
{
	PgdlEpochMetrics best;

	if (f->best == NULL || last->diverged || patience->best_epoch == last->epoch)
		return store_fold(f->run_id, f->name, f->arch_id, f->spec, &f->config, f->config_json, f->origin,
						  f->ds->id, pgdl_model_serialize(f->model), last, 0, f->holdout);
	best = patience->best_metrics;
	best.early_stopped = last->early_stopped;
	return store_fold(f->run_id, f->name, f->arch_id, f->spec, &f->config, f->config_json, f->origin, f->ds->id,
					  f->best, &best, last->epoch, f->holdout);
}

/*
 * The run, recorded where other sessions see it (run_recorder.c), and this
 * call in pgdl.progress.
 */
static void
fit_begin_run(FitRun *f)
{
	PgdlRunStart start = {0};

	start.dataset = f->ds->id;
	start.validation = f->vds ? f->vds->id : 0;
	start.architecture = f->arch_id;
	start.config = pgdl_config_with_warm_start(pgdl_config_to_jsonb(&f->config), f->config_json);
	start.epochs = f->epochs;
	f->recorder = pgdl_recorder_start(&start, &f->run_id, &f->config_id);
	f->epoch_total = f->ds->n_rows_hint > 0 ? f->ds->n_rows_hint : -1;
	pgdl_call_progress_run(f->run_id, f->config_id, f->epochs);
}

/* restore_best: a copy of the model after the epoch that is the best so far, kept in the fit's context. */
static void
fit_keep_best(FitRun *f, const PgdlPatience *patience, const PgdlEpochMetrics *m)
{
	MemoryContext old;

	if (!f->config.restore_best || patience->best_epoch != m->epoch)
		return;
	old = MemoryContextSwitchTo(f->cxt);
	if (f->best)
		pfree(f->best);
	f->best = pgdl_model_serialize(f->model);
	MemoryContextSwitchTo(old);
}

/* Every epoch, each committed to the run as it ends; m: the last; *patience: early stopping's, and the best epoch. */
static void
fit_epochs(FitRun *f, PgdlEpochMetrics *m, PgdlPatience *patience)
{
	for (int32 e = 0; e < f->epochs; e++)
	{
		fit_epoch(f, e, m);
		m->early_stopped = pgdl_early_stop(&f->config, m, patience) && e + 1 < f->epochs;
		fit_keep_best(f, patience, m);
		pgdl_recorder_epoch(f->recorder, f->run_id, f->config_id, m);
		pgdl_call_progress_loss(m->train_loss);
		if (m->diverged)
		{
			ereport(WARNING,
					(errcode(ERRCODE_FLOATING_POINT_EXCEPTION),
					 errmsg("training diverged in epoch %d of %d", m->epoch, f->epochs),
					 pgdl_train_divergence_detail(f->state),
					 errhint("The model is stored as it was when training stopped, with \"diverged\": true in its metrics. Try a lower learning rate.")));
			break;
		}
		pgdl_fit_report_epoch("epoch", m, f->epochs);
		if (m->early_stopped)
		{
			ereport(NOTICE,
					(errmsg("early stopping after epoch %d of %d", m->epoch, f->epochs),
					 errdetail("The validation %s has not improved by more than %g for %d epochs.",
							   pgdl_rank_metric_name(f->config.monitor),
							   (double) f->config.min_delta, f->config.patience)));
			break;
		}
	}
}

/*
 * Keras's EarlyStopping: an epoch improves when its monitored metric beats the
 * best so far by more than min_delta (the direction is the metric's); after
 * patience epochs without improvement, training stops.  The epoch that last
 * improved is the one restore_best keeps (restore_best_weights).  A function
 * of the model's own validation metrics only, so pgdl.fit and
 * pgdl.fit_multiple stop alike.
 */
bool
pgdl_early_stop(const PgdlTrainConfig *config, const PgdlEpochMetrics *m, PgdlPatience *p)
{
	double		v;

	if ((config->patience <= 0 && !config->restore_best) || !m->has_validation || m->diverged)
		return false;
	v = pgdl_epoch_rank_key(m, config->monitor);
	if (!isnan(v) && (!p->seen || v < p->best - (double) config->min_delta))
	{
		p->seen = true;
		p->best = v;
		p->bad_epochs = 0;
		p->best_epoch = m->epoch;
		p->best_metrics = *m;
	}
	else
		p->bad_epochs++;
	return config->patience > 0 && p->bad_epochs >= config->patience;
}

double
pgdl_epoch_rank_value(const PgdlEpochMetrics *m, PgdlRankMetric r)
{
	if (r == PGDL_RANK_LOSS)
		return m->has_validation ? m->validation_loss : m->train_loss;
	if (!m->has_validation)
		return get_float8_nan();
	if (r == PGDL_RANK_ACCURACY)
		return m->validation_accuracy;
	return m->has_scores ? m->scores[r] : get_float8_nan();
}

double
pgdl_epoch_rank_key(const PgdlEpochMetrics *m, PgdlRankMetric r)
{
	double		v = pgdl_epoch_rank_value(m, r);

	return pgdl_rank_metric_higher_better(r) ? -v : v;
}

/*
 * Train, with every epoch committed to the run as it ends; store the model and
 * finish the run in the caller's transaction.  A fit that fails leaves its run
 * failed.
 */
static int64
fit(Oid source, int64 arch_id, const NnSpec *spec, Jsonb *config_json, int32 epochs,
	Oid validation, text *name, int32 holdout)
{
	FitRun		f = {0};
	PgdlEpochMetrics m = {0};
	PgdlPatience patience = {0};
	int64		model_id;

	f.arch_id = arch_id;
	f.spec = spec;
	f.epochs = epochs;
	f.holdout = holdout;
	f.name = name ? text_to_cstring(name) : NULL;
	pgdl_call_progress_begin(PGDL_CALL_FIT, source);
	fit_check(&f, source, config_json, validation);
	fit_start(&f);
	fit_begin_run(&f);
	PG_TRY();
	{
		fit_epochs(&f, &m, &patience);
	}
	PG_CATCH();
	{
		pgdl_train_ahead_end(f.state);
		pgdl_recorder_fail(f.recorder);
		PG_RE_THROW();
	}
	PG_END_TRY();
	pgdl_train_ahead_end(f.state);
	pgdl_call_progress_phase(PGDL_PHASE_STORING, m.epoch, -1, false);
	model_id = fit_store(&f, &m, &patience);
	pgdl_recorder_release(f.recorder);
	MemoryContextDelete(f.cxt);
	pgdl_call_progress_end();
	return model_id;
}

static void
check_not_null(FunctionCallInfo fcinfo, const char *what)
{
	for (int i = 0; i < 4; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be NULL", what)));
}

/* The holdout argument (absent under an older SQL definition, or NULL: none). */
static int32
holdout_arg(FunctionCallInfo fcinfo)
{
	if (PG_NARGS() <= 6 || PG_ARGISNULL(6))
		return -1;
	if (PG_GETARG_INT32(6) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("holdout must be a partition of the packed table, got %d", PG_GETARG_INT32(6)),
				 errdetail("Partitions are numbered from 0.")));
	return PG_GETARG_INT32(6);
}

/* fit(source, architecture name, config, epochs, validation, name, holdout) */
PG_FUNCTION_INFO_V1(pgdl_fit);
Datum
pgdl_fit(PG_FUNCTION_ARGS)
{
	int64		arch_id;
	NnSpec	   *spec = palloc(sizeof(NnSpec));

	check_not_null(fcinfo, "source, architecture, config and epochs");
	pgdl_spec_from_jsonb(pgdl_architecture_by_name(text_to_cstring(PG_GETARG_TEXT_PP(1)), &arch_id), spec);
	PG_RETURN_INT64(fit(PG_GETARG_OID(0), arch_id, spec, PG_GETARG_JSONB_P(2), PG_GETARG_INT32(3),
						PG_ARGISNULL(4) ? InvalidOid : PG_GETARG_OID(4),
						PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5), holdout_arg(fcinfo)));
}

/* fit(source, spec jsonb, config, epochs, validation, name, holdout) */
PG_FUNCTION_INFO_V1(pgdl_fit_spec);
Datum
pgdl_fit_spec(PG_FUNCTION_ARGS)
{
	NnSpec	   *spec = palloc(sizeof(NnSpec));

	check_not_null(fcinfo, "source, spec, config and epochs");
	pgdl_spec_from_jsonb(PG_GETARG_JSONB_P(1), spec);
	PG_RETURN_INT64(fit(PG_GETARG_OID(0), 0, spec, PG_GETARG_JSONB_P(2), PG_GETARG_INT32(3),
						PG_ARGISNULL(4) ? InvalidOid : PG_GETARG_OID(4),
						PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5), holdout_arg(fcinfo)));
}
