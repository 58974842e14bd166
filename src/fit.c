/*
 * fit.c -- pgdl.fit: one configuration, epochs of sub-epochs.
 *
 * An epoch visits every partition of the packed table once, in an order fixed
 * by the configuration's seed and the epoch number (nn_rng_permutation with
 * NN_EPOCH_ORDER_STREAM); a sub-epoch is the pgdl.train steps over one
 * partition's buffers in buffer_id order.  The model hopper will visit
 * partitions by the same rule, so that a model trained alone and one trained
 * in a group end identical.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "pgdl.h"


/*
 * Buffers read in the first epoch are kept for the next ones, within
 * pgdl.train_cache_mem: reading a buffer back from its table (TOAST chunks) costs
 * about a tenth of a training step of the reference MLP.
 */
static void
train_cb(void *arg, const float *x, const float *y, int32 n, bool kept)
{
	pgdl_train_buffer((PgdlTrainState *) arg, x, y, n);
}

void
pgdl_check_same_dataset_shape(const PgdlDataset *train, const PgdlDataset *valid, Oid validation)
{
	bool		same = train->classification == valid->classification &&
		train->n_features == valid->n_features && train->n_targets == valid->n_targets &&
		train->n_classes == valid->n_classes;

	for (int i = 0; same && i < train->n_classes; i++)
		same = strcmp(train->classes[i], valid->classes[i]) == 0;
	if (!same)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("validation set \"%s\" does not match the training set", get_rel_name(validation)),
				 errdetail("Both must have the same features, task and classes in the same order."),
				 errhint("Pack the validation set with reference => the training set's packed table.")));
}

static int64
spi_insert_returning_id(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	bool		isnull;

	if (SPI_execute_with_args(sql, nargs, types, values, nulls, false, 1) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "pgdl catalog insert failed: %s", sql);
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

static Datum
float8_or_null(double v, bool valid, char *null)
{
	*null = valid ? ' ' : 'n';
	return Float8GetDatum(v);
}

static int64
fit(Oid source, int64 arch_id, const NnSpec *spec, Jsonb *config_json, int32 epochs,
	Oid validation, text *name)
{
	MemoryContext fitcxt;
	MemoryContext old;
	PgdlDataset *ds,
			   *vds = NULL;
	PgdlTrainConfig config;
	NnModel    *model;
	NnError		err;
	PgdlTrainState *state;
	int32	   *order;
	PgdlHeldPartition *held;
	int64		budget;
	int64		run_id,
				model_id;
	StringInfoData metrics;

	if (epochs < 1 || epochs > PGDL_MAX_EPOCHS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epochs must be between 1 and %d, got %d", PGDL_MAX_EPOCHS, epochs)));
	pgdl_config_from_jsonb(config_json, &config);
	ds = pgdl_dataset_by_packed(source);
	pgdl_check_model_fits(spec, ds);
	if (OidIsValid(validation))
	{
		vds = pgdl_dataset_by_packed(validation);
		pgdl_check_same_dataset_shape(ds, vds, validation);
	}

	SPI_connect();
	if (name)
	{
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {PointerGetDatum(name)};

		if (SPI_execute_with_args("SELECT 1 FROM pgdl.models WHERE name = $1 AND owner = quote_ident(current_user)::regrole", 1, types, values,
								  NULL, true, 1) == SPI_OK_SELECT && SPI_processed > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("model \"%s\" already exists", text_to_cstring(name)),
					 errhint("Choose another name, or pass NULL to store the model without one.")));
	}

	fitcxt = AllocSetContextCreate(TopTransactionContext, "pgdl fit", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(fitcxt);
	pgdl_engine_prepare();
	model = nn_model_create(spec, (uint64) config.seed, &err);
	if (model == NULL)
		pgdl_report_nn_error("model spec", &err);
	pgdl_model_free_with(model, fitcxt);
	state = pgdl_train_begin(model, &config, fitcxt);
	order = palloc(sizeof(int32) * Max(ds->partitions, 1));
	held = palloc0(sizeof(PgdlHeldPartition) * Max(ds->partitions, 1));
	/* with one epoch there is no later epoch to keep buffers for */
	budget = epochs > 1 ? (int64) pgdl_train_cache_mem * 1024 : 0;
	MemoryContextSwitchTo(old);

	{
		Oid			types[5] = {INT8OID, INT8OID, INT8OID, JSONBOID, INT4OID};
		Datum		values[5];
		char		nulls[5] = {' ', vds ? ' ' : 'n', arch_id ? ' ' : 'n', ' ', ' '};

		values[0] = Int64GetDatum(ds->id);
		values[1] = Int64GetDatum(vds ? vds->id : 0);
		values[2] = Int64GetDatum(arch_id);
		values[3] = JsonbPGetDatum(pgdl_config_to_jsonb(&config));
		values[4] = Int32GetDatum(epochs);
		run_id = spi_insert_returning_id("INSERT INTO pgdl.runs (kind, dataset, validation, architecture, config, epochs) "
										 "VALUES ('fit', $1, $2, $3, $4, $5) RETURNING id",
										 5, types, values, nulls);
	}

	initStringInfo(&metrics);
	for (int32 e = 0; e < epochs; e++)
	{
		int32		partitions = 0;
		instr_time	start,
					duration;
		double		seconds,
					train_loss,
					train_acc;
		NnBatchStats vstats = {0};
		Oid			types[8] = {INT8OID, INT4OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID};
		Datum		values[8];
		char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};

		if (ds->partitions < 1 || ds->partitions > PGDL_MAX_PARTITIONS)
			elog(ERROR, "dataset " INT64_FORMAT " has %d partitions", ds->id, ds->partitions);
		partitions = ds->partitions;
		nn_rng_permutation((uint64) config.seed, NN_EPOCH_ORDER_STREAM(e), partitions, order);

		memset(&state->stats, 0, sizeof(NnBatchStats));
		INSTR_TIME_SET_CURRENT(start);
		for (int32 k = 0; k < partitions; k++)
		{
			if (e == 0)
				pgdl_packed_hold(ds, order[k], &held[order[k]], fitcxt, &budget, train_cb, state);
			else
				pgdl_packed_foreach(ds, order[k], &held[order[k]], train_cb, state);
		}
		INSTR_TIME_SET_CURRENT(duration);
		INSTR_TIME_SUBTRACT(duration, start);
		seconds = INSTR_TIME_GET_DOUBLE(duration);
		if (state->stats.n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_NO_DATA),
					 errmsg("packed table \"%s\" has no buffers", get_rel_name(ds->packed))));
		train_loss = state->stats.loss_sum / state->stats.n;
		train_acc = (double) state->stats.correct / state->stats.n;
		if (vds)
			pgdl_packed_evaluate(model, vds, &vstats);

		values[0] = Int64GetDatum(run_id);
		values[1] = Int32GetDatum(e + 1);
		values[2] = Float8GetDatum(train_loss);
		values[3] = float8_or_null(train_acc, ds->classification, &nulls[3]);
		values[4] = float8_or_null(vstats.n ? vstats.loss_sum / vstats.n : 0, vstats.n > 0, &nulls[4]);
		values[5] = float8_or_null(vstats.n ? (double) vstats.correct / vstats.n : 0,
								   vstats.n > 0 && ds->classification, &nulls[5]);
		values[6] = Float8GetDatum(seconds);
		values[7] = Float8GetDatum(seconds > 0 ? state->stats.n / seconds : 0);
		if (SPI_execute_with_args("INSERT INTO pgdl.run_metrics (run, epoch, train_loss, train_accuracy, "
								  "validation_loss, validation_accuracy, seconds, images_per_second) "
								  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
								  8, types, values, nulls, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not insert into pgdl.run_metrics");

		resetStringInfo(&metrics);
		appendStringInfo(&metrics, "{\"epoch\": %d, \"train_loss\": %.9g", e + 1, train_loss);
		if (ds->classification)
			appendStringInfo(&metrics, ", \"train_accuracy\": %.9g", train_acc);
		if (vstats.n)
		{
			appendStringInfo(&metrics, ", \"validation_loss\": %.9g", vstats.loss_sum / vstats.n);
			if (ds->classification)
				appendStringInfo(&metrics, ", \"validation_accuracy\": %.9g", (double) vstats.correct / vstats.n);
		}
		appendStringInfoChar(&metrics, '}');

		if (vstats.n && ds->classification)
			ereport(NOTICE,
					(errmsg("epoch %d/%d: loss %.4f, accuracy %.4f, validation loss %.4f, validation accuracy %.4f, %.0f images/s",
							e + 1, epochs, train_loss, train_acc, vstats.loss_sum / vstats.n,
							(double) vstats.correct / vstats.n, seconds > 0 ? state->stats.n / seconds : 0)));
		else if (vstats.n)
			ereport(NOTICE,
					(errmsg("epoch %d/%d: loss %.4f, validation loss %.4f, %.0f images/s",
							e + 1, epochs, train_loss, vstats.loss_sum / vstats.n,
							seconds > 0 ? state->stats.n / seconds : 0)));
		else if (ds->classification)
			ereport(NOTICE,
					(errmsg("epoch %d/%d: loss %.4f, accuracy %.4f, %.0f images/s",
							e + 1, epochs, train_loss, train_acc, seconds > 0 ? state->stats.n / seconds : 0)));
		else
			ereport(NOTICE,
					(errmsg("epoch %d/%d: loss %.4f, %.0f images/s",
							e + 1, epochs, train_loss, seconds > 0 ? state->stats.n / seconds : 0)));
	}

	{
		Oid			types[8] = {TEXTOID, INT8OID, JSONBOID, JSONBOID, INT8OID, INT8OID, BYTEAOID, JSONBOID};
		Datum		values[8];
		char		nulls[8] = {name ? ' ' : 'n', arch_id ? ' ' : 'n', ' ', ' ', ' ', ' ', ' ', ' '};
		Oid			utypes[2] = {INT8OID, INT8OID};
		Datum		uvalues[2];

		values[0] = PointerGetDatum(name);
		values[1] = Int64GetDatum(arch_id);
		values[2] = JsonbPGetDatum(pgdl_spec_to_jsonb(spec));
		values[3] = JsonbPGetDatum(pgdl_config_to_jsonb(&config));
		values[4] = Int64GetDatum(ds->id);
		values[5] = Int64GetDatum(run_id);
		values[6] = PointerGetDatum(pgdl_model_serialize(model));
		values[7] = DirectFunctionCall1(jsonb_in, CStringGetDatum(metrics.data));
		model_id = spi_insert_returning_id("INSERT INTO pgdl.models (name, architecture, spec, config, dataset, run, weights, metrics) "
										   "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
										   8, types, values, nulls);
		uvalues[0] = Int64GetDatum(model_id);
		uvalues[1] = Int64GetDatum(run_id);
		if (SPI_execute_with_args("UPDATE pgdl.run_metrics SET model = $1 WHERE run = $2", 2, utypes, uvalues,
								  NULL, false, 0) != SPI_OK_UPDATE ||
			SPI_execute_with_args("UPDATE pgdl.runs SET status = 'finished', finished = clock_timestamp() WHERE id = $2",
								  2, utypes, uvalues, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not record the end of run " INT64_FORMAT, run_id);
	}
	SPI_finish();
	MemoryContextDelete(fitcxt);
	return model_id;
}

/* fit(source, architecture name, config, epochs, validation, name) */
PG_FUNCTION_INFO_V1(pgdl_fit);
Datum
pgdl_fit(PG_FUNCTION_ARGS)
{
	char	   *arch = text_to_cstring(PG_GETARG_TEXT_PP(1));
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {PG_GETARG_DATUM(1)};
	int64		arch_id;
	Jsonb	   *spec_json;
	NnSpec	   *spec = palloc(sizeof(NnSpec));
	bool		isnull;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, config and epochs must not be NULL")));
	SPI_connect();
	if (SPI_execute_with_args("SELECT id, spec FROM pgdl.architectures WHERE id = (SELECT pgdl.architecture_id($1))", 1, types, values,
							  NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("architecture \"%s\" does not exist", arch),
				 errhint("Store one with pgdl.add_architecture(name, spec), or pass the spec as jsonb.")));
	arch_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	spec_json = DatumGetJsonbPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	SPI_finish();
	pgdl_spec_from_jsonb(spec_json, spec);
	PG_RETURN_INT64(fit(PG_GETARG_OID(0), arch_id, spec, PG_GETARG_JSONB_P(2), PG_GETARG_INT32(3),
						PG_ARGISNULL(4) ? InvalidOid : PG_GETARG_OID(4),
						PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5)));
}

/* fit(source, spec jsonb, config, epochs, validation, name) */
PG_FUNCTION_INFO_V1(pgdl_fit_spec);
Datum
pgdl_fit_spec(PG_FUNCTION_ARGS)
{
	NnSpec	   *spec = palloc(sizeof(NnSpec));

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, spec, config and epochs must not be NULL")));
	pgdl_spec_from_jsonb(PG_GETARG_JSONB_P(1), spec);
	PG_RETURN_INT64(fit(PG_GETARG_OID(0), 0, spec, PG_GETARG_JSONB_P(2), PG_GETARG_INT32(3),
						PG_ARGISNULL(4) ? InvalidOid : PG_GETARG_OID(4),
						PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5)));
}
