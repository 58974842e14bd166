/*
 * store.c -- the end of a run: each trained model, the whole of it (frozen
 * layers joined back), into pgdl.models in the caller's transaction, its
 * metrics rows linked to it, the run finished, and the leaderboard returned.
 *
 * Invariants:
 * - models are stored in the set's order and the leaderboard's order depends
 *   only on the models' epochs, losses and configuration ids: the same rows
 *   whatever the number of workers;
 * - a model that diverged is stored as it was when it diverged, with a
 *   warning, and ranks last.
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

static int
compare_leaderboard(const void *a, const void *b)
{
	const MopModel *x = *(MopModel *const *) a;
	const MopModel *y = *(MopModel *const *) b;
	int			by_loss = mop_compare_loss(mop_rank_key(&x->last), mop_rank_key(&y->last));

	/* models that diverged last; then models that went further first, then by loss */
	if ((x->state == MOP_DIVERGED) != (y->state == MOP_DIVERGED))
		return x->state == MOP_DIVERGED ? 1 : -1;
	if (x->epoch != y->epoch)
		return x->epoch > y->epoch ? -1 : 1;
	if (by_loss != 0)
		return by_loss;
	return x->config_id < y->config_id ? -1 : 1;
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
	PgdlModelRecord rec = {0};

	if (c->transfer)
		rec.weights = pgdl_transfer_join(c->transfer, (const uint8 *) blobs + m->blob_offset, m->blob_len);
	else
	{
		rec.weights = palloc(VARHDRSZ + m->blob_len);
		SET_VARSIZE(rec.weights, VARHDRSZ + m->blob_len);
		memcpy(VARDATA(rec.weights), blobs + m->blob_offset, m->blob_len);
	}
	rec.name = run->name_prefix ? psprintf("%s" INT64_FORMAT, run->name_prefix, c->config_id) : NULL;
	rec.architecture = c->arch_id;
	rec.spec = c->spec_json;
	rec.config = config_with_transfer(c);
	rec.dataset = run->ds->id;
	rec.run = shared->run_id;
	rec.config_id = c->config_id;
	rec.parent = c->transfer ? c->transfer->base_id : 0;
	rec.origin = c->origin;
	rec.last = m->last;
	rec.last.epoch = m->epoch;
	rec.last.classification = run->ds->classification;
	rec.selection = true;
	rec.stopped = m->state == MOP_STOPPED;
	return pgdl_run_store_model(&rec);
}

/* The leaderboard: models that diverged last; before them, models that went further first, then by loss. */
static void
put_leaderboard(FunctionCallInfo fcinfo, MopRun *run, MopShared *shared, const int64 *model_ids)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MopModel  **order = palloc(sizeof(MopModel *) * shared->n_models);

	for (int i = 0; i < shared->n_models; i++)
		order[i] = &shared->models[i];
	qsort(order, shared->n_models, sizeof(MopModel *), compare_leaderboard);
	for (int r = 0; r < shared->n_models; r++)
	{
		MopModel   *m = order[r];
		int			k = m - shared->models;
		MopConfig  *c = list_nth(run->configs, k);
		Datum		values[12];
		bool		nulls[12] = {false};

		values[0] = Int32GetDatum(r + 1);
		values[1] = Int64GetDatum(model_ids[k]);
		values[2] = Int64GetDatum(c->config_id);
		values[3] = CStringGetTextDatum(c->arch_name);
		values[4] = JsonbPGetDatum(config_with_transfer(c));
		values[5] = Int32GetDatum(m->epoch);
		/* NaN: a model that diverged at the first step of its epoch measured nothing */
		values[6] = Float8GetDatum(m->last.train_loss);
		nulls[6] = isnan(m->last.train_loss);
		values[7] = Float8GetDatum(m->last.train_accuracy);
		nulls[7] = !run->ds->classification || isnan(m->last.train_accuracy);
		values[8] = Float8GetDatum(m->last.validation_loss);
		nulls[8] = !m->last.has_validation;
		values[9] = Float8GetDatum(m->last.validation_accuracy);
		nulls[9] = !m->last.has_validation || !run->ds->classification;
		values[10] = BoolGetDatum(m->state == MOP_STOPPED);
		values[11] = BoolGetDatum(m->state == MOP_DIVERGED);
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
	put_leaderboard(fcinfo, run, shared, model_ids);
}
