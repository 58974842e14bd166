/*
 * store.c -- the end of a run: each trained model, the whole of it (frozen
 * layers joined back), into pgdl.models in the caller's transaction, its
 * metrics rows linked to it, the run finished, and the leaderboard returned.
 *
 * Invariants:
 * - models are stored in the set's order and the leaderboard's order depends
 *   only on the rank_by value of each model's stored epoch (restore_best's
 *   best one, else its last) and configuration ids: the same rows whatever the
 *   number of workers; a model stopped early or at a rung ranks like any other;
 * - restore_best stores the best epoch's checkpoint, byte for byte;
 * - a model that diverged is stored as it was when it diverged, with a
 *   warning, and ranks last;
 * - with folds, every fold's model is stored (its fold in its metrics and
 *   name), and the leaderboard has a row per configuration: the means over its
 *   folds, which pgdl.cross_validation shows with their spread.
 */
#include "postgres.h"

#include <math.h>

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"

#include "spec/spec.h"
#include "catalog/catalog.h"
#include "train/train.h"
#include "hopper/hopper.h"
#include "hopper/leader.h"

/* The order of the leaderboard; shared is set while it sorts (qsort has no argument). */
static const MopShared *sorting;

static int
compare_leaderboard(const void *a, const void *b)
{
	const MopModel *x = *(MopModel *const *) a;
	const MopModel *y = *(MopModel *const *) b;

	return mop_compare_models(sorting, x, y);
}

/* Models that diverged last; before them by rank_by at their stored epoch, ties by configuration id. */
int
mop_compare_models(const MopShared *shared, const MopModel *x, const MopModel *y)
{
	int			by_rank = mop_compare_loss(mop_rank_key(shared, mop_stored_metrics(x)),
										   mop_rank_key(shared, mop_stored_metrics(y)));

	if ((x->state == MOP_DIVERGED) != (y->state == MOP_DIVERGED))
		return x->state == MOP_DIVERGED ? 1 : -1;
	if (by_rank != 0)
		return by_rank;
	return x->config_id < y->config_id ? -1 : (x->config_id > y->config_id ? 1 : 0);
}

/* The canonical configuration, with its base model, freeze and head (or warm start) as given. */
static Jsonb *
config_with_transfer(const MopConfig *c)
{
	Jsonb	   *config = pgdl_config_with_warm_start(pgdl_config_to_jsonb(&c->config), c->config_json);
	Jsonb	   *keys = c->transfer ? pgdl_transfer_keys(c->config_json) : NULL;

	if (keys == NULL)
		return config;
	return DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(config), JsonbPGetDatum(keys)));
}

/* Model k of the run (the whole model, frozen layers included) into pgdl.models; returns its id. */
static int64
store_model(MopRun *run, MopShared *shared, char *blobs, int k)
{
	MopConfig  *c = list_nth(run->configs, k);
	MopModel   *m = &shared->models[k];
	const PgdlEpochMetrics *stored = mop_stored_metrics(m);
	PgdlModelRecord rec = {0};
	/* restore_best chose an epoch before the last (a resumed model's last may not be read back: not it) */
	bool		restored = stored != &m->last && stored->epoch != m->epoch;

	if (restored)
	{
		/* restore_best: the best epoch's checkpoint (a whole model), as pgdl.resume would find it */
		rec.weights = pgdl_run_checkpoint_at(shared->run_id, c->config_id, stored->epoch);
		if (rec.weights == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("the checkpoint of configuration " INT64_FORMAT " at epoch %d of run " INT64_FORMAT " is missing",
							c->config_id, stored->epoch, shared->run_id),
					 errdetail("restore_best stores the best epoch's checkpoint from pgdl.checkpoints.")));
	}
	else if (c->transfer)
		rec.weights = pgdl_transfer_join(c->transfer, (const uint8 *) blobs + m->blob_offset, m->blob_len);
	else
	{
		rec.weights = palloc(VARHDRSZ + m->blob_len);
		SET_VARSIZE(rec.weights, VARHDRSZ + m->blob_len);
		memcpy(VARDATA(rec.weights), blobs + m->blob_offset, m->blob_len);
	}
	rec.name = run->name_prefix ? psprintf("%s" INT64_FORMAT, run->name_prefix, c->config_id) : NULL;
	if (c->holdout >= 0)
	{
		rec.folded = true;
		rec.fold = c->holdout;
		if (rec.name)
			rec.name = psprintf("%s_fold%d", rec.name, c->holdout);
	}
	rec.architecture = c->arch_id;
	rec.spec = c->spec_json;
	rec.config = config_with_transfer(c);
	rec.dataset = run->ds->id;
	rec.run = shared->run_id;
	rec.config_id = c->config_id;
	rec.parent = c->transfer ? c->transfer->base_id : 0;
	rec.origin = c->origin;
	rec.last = *stored;
	rec.last.early_stopped = m->last.early_stopped;
	rec.last.classification = run->ds->classification;
	rec.epochs_trained = restored ? m->epoch : 0;
	rec.selection = true;
	rec.stopped = m->state == MOP_STOPPED;
	return pgdl_run_store_model(&rec);
}

/* The leaderboard (mop_compare_models' order): each model's epochs trained and its stored epoch's metrics. */
static void
put_leaderboard(FunctionCallInfo fcinfo, MopRun *run, MopShared *shared, const int64 *model_ids)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MopModel  **order = palloc(sizeof(MopModel *) * shared->n_models);

	for (int i = 0; i < shared->n_models; i++)
		order[i] = &shared->models[i];
	sorting = shared;
	qsort(order, shared->n_models, sizeof(MopModel *), compare_leaderboard);
	for (int r = 0; r < shared->n_models; r++)
	{
		MopModel   *m = order[r];
		const PgdlEpochMetrics *s = mop_stored_metrics(m);
		int			k = m - shared->models;
		MopConfig  *c = list_nth(run->configs, k);
		Datum		values[12];
		bool		nulls[12] = {false};

		if (r == 0 && m->state != MOP_DIVERGED)
			run->winner = model_ids[k];
		values[0] = Int32GetDatum(r + 1);
		values[1] = Int64GetDatum(model_ids[k]);
		values[2] = Int64GetDatum(c->config_id);
		values[3] = CStringGetTextDatum(c->arch_name);
		values[4] = JsonbPGetDatum(config_with_transfer(c));
		values[5] = Int32GetDatum(m->epoch);
		/* NaN: a model that diverged at the first step of its epoch measured nothing */
		values[6] = Float8GetDatum(s->train_loss);
		nulls[6] = isnan(s->train_loss);
		values[7] = Float8GetDatum(s->train_accuracy);
		nulls[7] = !run->ds->classification || isnan(s->train_accuracy);
		values[8] = Float8GetDatum(s->validation_loss);
		nulls[8] = !s->has_validation;
		values[9] = Float8GetDatum(s->validation_accuracy);
		nulls[9] = !s->has_validation || !run->ds->classification;
		values[10] = BoolGetDatum(m->state == MOP_STOPPED);
		values[11] = BoolGetDatum(m->state == MOP_DIVERGED);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/* A configuration's folds summed up as one leaderboard row: the means of their last epochs. */
typedef struct FoldSummary
{
	int			first;			/* its first fold's model and MopConfig */
	int32		epochs;			/* the most any fold trained */
	double		train_loss;
	double		train_accuracy;
	double		validation_loss;
	double		validation_accuracy;
	bool		stopped;		/* some fold stopped early */
	bool		diverged;		/* some fold diverged: the configuration ranks last */
} FoldSummary;

static int
compare_folds(const void *a, const void *b)
{
	const FoldSummary *x = a;
	const FoldSummary *y = b;
	int			by_loss = mop_compare_loss(x->validation_loss, y->validation_loss);

	if (x->diverged != y->diverged)
		return x->diverged ? 1 : -1;
	if (by_loss != 0)
		return by_loss;
	return x->first < y->first ? -1 : 1;
}

/* The means of n folds, from model `first` on (the folds of a configuration are adjacent, in partition order). */
static void
summarize_folds(const MopShared *shared, int first, int n, FoldSummary *s)
{
	memset(s, 0, sizeof(FoldSummary));
	s->first = first;
	for (int k = first; k < first + n; k++)
	{
		const MopModel *m = &shared->models[k];

		s->epochs = Max(s->epochs, m->epoch);
		s->train_loss += m->last.train_loss / n;
		s->train_accuracy += m->last.train_accuracy / n;
		s->validation_loss += m->last.validation_loss / n;
		s->validation_accuracy += m->last.validation_accuracy / n;
		s->stopped |= m->state == MOP_STOPPED || m->last.early_stopped;
		s->diverged |= m->state == MOP_DIVERGED;
	}
}

/* With folds: a row per configuration, ranked by its folds' mean validation loss; no single model. */
static void
put_fold_leaderboard(FunctionCallInfo fcinfo, MopRun *run, MopShared *shared)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			folds = shared->n_partitions;
	int			n = shared->n_models / folds;
	FoldSummary *rows = palloc(sizeof(FoldSummary) * n);

	for (int c = 0; c < n; c++)
		summarize_folds(shared, c * folds, folds, &rows[c]);
	qsort(rows, n, sizeof(FoldSummary), compare_folds);
	for (int r = 0; r < n; r++)
	{
		FoldSummary *s = &rows[r];
		MopConfig  *c = list_nth(run->configs, s->first);
		Datum		values[12];
		bool		nulls[12] = {false};

		values[0] = Int32GetDatum(r + 1);
		nulls[1] = true;
		values[2] = Int64GetDatum(c->config_id);
		values[3] = CStringGetTextDatum(c->arch_name);
		values[4] = JsonbPGetDatum(config_with_transfer(c));
		values[5] = Int32GetDatum(s->epochs);
		values[6] = Float8GetDatum(s->train_loss);
		nulls[6] = isnan(s->train_loss);
		values[7] = Float8GetDatum(s->train_accuracy);
		nulls[7] = !run->ds->classification || isnan(s->train_accuracy);
		values[8] = Float8GetDatum(s->validation_loss);
		nulls[8] = s->diverged;
		values[9] = Float8GetDatum(s->validation_accuracy);
		nulls[9] = s->diverged || !run->ds->classification;
		values[10] = BoolGetDatum(s->stopped);
		values[11] = BoolGetDatum(s->diverged);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/* Store the models, finish the run, return the leaderboard. */
void
mop_store_models(FunctionCallInfo fcinfo, MopRun *run, MopShared *shared, char *blobs)
{
	int64	   *model_ids = palloc0(sizeof(int64) * shared->n_models);

	InitMaterializedSRF(fcinfo, 0);
	for (int k = 0; k < shared->n_models; k++)
	{
		MopModel   *m = &shared->models[k];

		model_ids[k] = store_model(run, shared, blobs, k);
		if (m->state == MOP_DIVERGED)
			ereport(WARNING,
					(errcode(ERRCODE_FLOATING_POINT_EXCEPTION),
					 errmsg("configuration " INT64_FORMAT " diverged in epoch %d of %d", m->config_id,
							m->epoch, shared->epochs),
					 errdetail_plural("Its loss or weights became NaN or infinite after %lld step; it trained no further.",
									  "Its loss or weights became NaN or infinite after %lld steps; it trained no further.",
									  (unsigned long) m->last.steps, (long long) m->last.steps),
					 errhint("Its model is stored as it was then, with \"diverged\": true in its metrics. Try a lower learning rate.")));
	}
	pgdl_run_finish(shared->run_id, PGDL_RUN_FINISHED);
	if (shared->folds)
		put_fold_leaderboard(fcinfo, run, shared);
	else
		put_leaderboard(fcinfo, run, shared, model_ids);
}
