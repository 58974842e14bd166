/*
 * predict.c -- inference in SQL: pgdl.features, predict, predict_class,
 * predict_batch and evaluate.
 *
 * Every function takes its model three ways, by the same C entry point: an id
 * (bigint), a name (text) or an engine blob (bytea); pgdl_model_arg
 * (model_io.c) tells them apart.
 *
 * Workspaces.  A forward pass writes into the model's workspace (m->work,
 * sized by nn_model_reserve), which is part of the model struct, but never
 * changes its parameters or running statistics (inference mode).  A backend
 * is single-threaded, so:
 *
 *  - the per-row functions (features, predict, predict_class) run the cached
 *    model of model_io.c in place: one example needs a workspace of one row,
 *    the cache keeps it, and the next row pays no allocation, no SPI and no
 *    copy.  Nothing between resolving the model and copying its output out
 *    runs another query, loads another model or takes a lock (arguments are
 *    detoasted first, since opening a TOAST table may process invalidations):
 *    the cache entry may be retired or reused by the next of those;
 *
 *  - the functions that read a table (predict_batch, evaluate) clone the model
 *    and copy its dataset first (pgdl_model_arg_copy): the SPI cursor between
 *    two batches may process invalidations, load other models into the cache
 *    or evict this one.  The clone also keeps a batch-sized workspace out of
 *    the long-lived cache, and makes the whole scan use one consistent model.
 *
 * A bytea model has no dataset: its inputs are used as given (no
 * normalization) and its classes are class indices.  The per-row functions
 * keep the last blob's deserialized model per call site, keyed by the blob's
 * bytes, so that `pgdl.predict($1::bytea, x) FROM t` deserializes once.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "pgdl.h"

/* ---- checks shared by the functions ---- */

/* A stored model's dataset must describe the model's inputs and outputs. */
static void
check_dataset(const NnModel *m, const PgdlDataset *ds)
{
	int64		k = nn_model_output_size(m);

	if (ds == NULL)
		return;
	if (ds->n_features != nn_model_input_size(m))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("model and dataset disagree on the number of features"),
				 errdetail("The model takes " INT64_FORMAT " features; its dataset has %d.",
						   nn_model_input_size(m), ds->n_features)));
	if (ds->classification && m->spec.loss == NN_LOSS_CROSS_ENTROPY && ds->n_classes != k)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("model and dataset disagree on the number of classes"),
				 errdetail("The model's output size is " INT64_FORMAT "; its dataset has %d classes.",
						   k, ds->n_classes)));
}

/*
 * For predict_class and predict_batch: a model whose outputs name one class
 * per example (cross_entropy, or binary_cross_entropy with one output).
 */
static void
check_classifier(const NnModel *m, const char *function)
{
	if (m->spec.loss == NN_LOSS_MSE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("model is not a classifier"),
				 errdetail("Its loss is mse."),
				 errhint("Use pgdl.predict() for the outputs of a regression model instead of %s().", function)));
	if (m->spec.loss == NN_LOSS_BCE && nn_model_output_size(m) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("model is not a single-label classifier"),
				 errdetail("It has " INT64_FORMAT " independent binary_cross_entropy outputs.",
						   nn_model_output_size(m)),
				 errhint("Use pgdl.predict() for the probability of each output instead of %s().", function)));
}

/* The first of n values that is NaN or infinite, or -1. */
static int64
first_nonfinite(const float *x, int64 n)
{
	for (int64 j = 0; j < n; j++)
		if (!isfinite(x[j]))
			return j;
	return -1;
}

/*
 * A network fed NaN or infinity answers with numbers all the same (argmax picks
 * class 0), so such a feature is an error, as it is for pgdl.pack: raw, or once
 * normalized (a huge value divided by a small standard deviation).  `what`
 * names the features in the message: "x", or a row of predict_batch's table.
 */
static void
check_finite(const float *raw, const float *x, int64 n, const char *what)
{
	int64		j = first_nonfinite(x, n);

	if (j < 0)
		return;
	if (!isfinite(raw[j]))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s has a NaN or infinite value in element " INT64_FORMAT, what, j + 1),
				 errdetail("Features must be finite numbers.")));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("%s is out of range in element " INT64_FORMAT " once normalized", what, j + 1),
			 errdetail("The model's dataset normalizes %g to a value beyond the range of real.", raw[j])));
}

/*
 * x's `length` features, checked against the model, normalized with its
 * dataset and checked to be finite, into `dst` (which may be NULL: then returns
 * x itself when nothing needs normalizing, or a palloc'd copy).
 */
static const float *
prepare_features(const NnModel *m, const PgdlDataset *ds, const float *x, int64 length,
				float *dst)
{
	int64		expected = nn_model_input_size(m);

	if (length != expected)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("wrong number of features"),
				 errdetail("The model takes " INT64_FORMAT " features; x has " INT64_FORMAT ".",
						   expected, length)));
	if (ds == NULL && dst == NULL)
	{
		check_finite(x, x, length, "x");
		return x;
	}
	if (dst == NULL)
		dst = palloc(sizeof(float) * length);
	memcpy(dst, x, sizeof(float) * length);
	if (ds != NULL)
		pgdl_dataset_normalize(ds, dst, 1);
	check_finite(x, dst, length, "x");
	return dst;
}

/*
 * The network's raw outputs (logits for the classification losses) for n
 * examples, in the model's workspace: valid until its next forward pass.
 */
static const float *
forward(NnModel *m, const float *x, int n)
{
	NnError		err;
	const float *z;

	pgdl_check_model_batch(m, n, "the model");
	if (!nn_model_reserve(m, n, &err))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("%c%s.", pg_toupper((unsigned char) err.msg[0]), err.msg + 1)));
	z = nn_model_forward(m, x, n, false);
	/* the model keeps no pointer into our memory */
	m->last_input = NULL;
	m->last_n = 0;
	return z;
}

static inline float
sigmoid(float z)
{
	if (z >= 0.0f)
		return 1.0f / (1.0f + expf(-z));
	else
	{
		float		e = expf(z);

		return e / (1.0f + e);
	}
}

/* What the loss makes of one example's k raw outputs z: probabilities, or z itself. */
static void
transform_outputs(NnLoss loss, const float *z, int64 k, float *out)
{
	switch (loss)
	{
		case NN_LOSS_CROSS_ENTROPY:
			{
				float		max = z[0];
				double		sum = 0.0;

				for (int64 c = 1; c < k; c++)
					max = Max(max, z[c]);
				for (int64 c = 0; c < k; c++)
					sum += exp((double) z[c] - max);
				for (int64 c = 0; c < k; c++)
					out[c] = (float) (exp((double) z[c] - max) / sum);
				break;
			}
		case NN_LOSS_BCE:
			for (int64 c = 0; c < k; c++)
				out[c] = sigmoid(z[c]);
			break;
		default:
			memcpy(out, z, sizeof(float) * k);
			break;
	}
}

/*
 * One example's class from its raw outputs (as the engine counts accuracy: the
 * argmax, or logit > 0 for a single binary output), and its probability.
 */
static int
class_of(const NnModel *m, const float *z, float *probability)
{
	int64		k = nn_model_output_size(m);
	int			best = 0;

	if (m->spec.loss == NN_LOSS_BCE)
	{
		best = z[0] > 0.0f ? 1 : 0;
		if (probability)
			*probability = sigmoid(best ? z[0] : -z[0]);
		return best;
	}
	for (int c = 1; c < k; c++)
		if (z[c] > z[best])
			best = c;
	if (probability)
	{
		double		sum = 0.0;

		for (int64 c = 0; c < k; c++)
			sum += exp((double) z[c] - z[best]);
		*probability = (float) (1.0 / sum);
	}
	return best;
}

/* Class index `index` as the dataset's value, or as its number when there is no dataset. */
static char *
class_name(const PgdlDataset *ds, int index)
{
	if (ds == NULL || !ds->classification || ds->classes == NULL)
		return psprintf("%d", index);
	if (index >= ds->n_classes)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("class %d is not a class of the model's dataset", index),
				 errdetail("The dataset has %d classes.", ds->n_classes)));
	return pstrdup(ds->classes[index]);
}

/* ---- pgdl.features: the output of a network's first layers ---- */

PG_FUNCTION_INFO_V1(pgdl_features);
Datum
pgdl_features(PG_FUNCTION_ARGS)
{
	int32		layer = PG_GETARG_INT32(1);
	ArrayType  *xa = PG_GETARG_ARRAYTYPE_P(2);	/* detoasted before the model is resolved */
	int64		length;
	const float *xraw = pgdl_float4_array(xa, "x", &length);
	PgdlModel  *model;
	NnModel    *m;
	NnError		err;
	const float *x;
	const float *z;

	pgdl_engine_prepare();
	model = pgdl_model_arg(fcinfo);
	m = model->nn;
	if (layer < 1 || layer > m->spec.n_layers)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("layer must be between 1 and %d, got %d", m->spec.n_layers, layer),
				 errdetail("pgdl.features returns the output of the model's first `layer` layers.")));
	check_dataset(m, model->dataset);
	x = prepare_features(m, model->dataset, xraw, length, NULL);
	pgdl_check_model_batch(m, 1, "the model");
	if (!nn_model_reserve(m, 1, &err))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("%c%s.", pg_toupper((unsigned char) err.msg[0]), err.msg + 1)));
	z = nn_model_forward_upto(m, x, 1, layer);
	m->last_input = NULL;
	m->last_n = 0;
	PG_RETURN_ARRAYTYPE_P(pgdl_float4_array_from(z, NN_SHAPE_SIZE(m->shape[layer])));
}

/* ---- pgdl.predict, pgdl.predict_class: one example ---- */

PG_FUNCTION_INFO_V1(pgdl_predict);
Datum
pgdl_predict(PG_FUNCTION_ARGS)
{
	ArrayType  *xa = PG_GETARG_ARRAYTYPE_P(1);	/* detoasted before the model is resolved */
	int64		length;
	const float *xraw = pgdl_float4_array(xa, "x", &length);
	PgdlModel  *model;
	NnModel    *m;
	const float *x;
	const float *z;
	float	   *out;
	int64		k;

	pgdl_engine_prepare();
	model = pgdl_model_arg(fcinfo);
	m = model->nn;
	check_dataset(m, model->dataset);
	x = prepare_features(m, model->dataset, xraw, length, NULL);
	z = forward(m, x, 1);
	k = nn_model_output_size(m);
	out = palloc(sizeof(float) * k);
	transform_outputs(m->spec.loss, z, k, out);
	PG_RETURN_ARRAYTYPE_P(pgdl_float4_array_from(out, k));
}

PG_FUNCTION_INFO_V1(pgdl_predict_class);
Datum
pgdl_predict_class(PG_FUNCTION_ARGS)
{
	ArrayType  *xa = PG_GETARG_ARRAYTYPE_P(1);
	int64		length;
	const float *xraw = pgdl_float4_array(xa, "x", &length);
	PgdlModel  *model;
	NnModel    *m;
	const float *x;
	int			index;

	pgdl_engine_prepare();
	model = pgdl_model_arg(fcinfo);
	m = model->nn;
	check_classifier(m, "pgdl.predict_class");
	check_dataset(m, model->dataset);
	x = prepare_features(m, model->dataset, xraw, length, NULL);
	index = class_of(m, forward(m, x, 1), NULL);
	PG_RETURN_TEXT_P(cstring_to_text(class_name(model->dataset, index)));
}

/* ---- pgdl.predict_batch: a table, batch_size rows per forward pass ---- */

static void
check_column(Oid relid, const char *column, bool features)
{
	AttrNumber	attnum = get_attnum(relid, column);
	Oid			type;

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", pgdl_echo(column), get_rel_name(relid))));
	type = getBaseType(get_atttype(relid, attnum));
	if (!features && type != INT2OID && type != INT4OID && type != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("id column \"%s\" must be of an integer type", column),
				 errdetail("It is of type %s.", format_type_be(type))));
	if (features && type != FLOAT4ARRAYOID && type != FLOAT8ARRAYOID && type != INT2ARRAYOID &&
		type != INT4ARRAYOID && type != INT8ARRAYOID && type != NUMERICARRAYOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("features column \"%s\" must be an array of numbers", column),
				 errdetail("It is of type %s; real[], double precision[], smallint[], integer[], "
						   "bigint[] and numeric[] are accepted.", format_type_be(type))));
}

/* The query that reads (id, features) from the source, once its columns are checked. */
static char *
batch_query(Oid relid, const char *id_column, const char *features_column)
{
	char	   *relname = get_rel_name(relid);

	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	check_column(relid, id_column, false);
	check_column(relid, features_column, true);
	return psprintf("SELECT %s::pg_catalog.int8, %s::pg_catalog.float4[] FROM %s",
					quote_identifier(id_column), quote_identifier(features_column),
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), relname));
}

/* One batch of the source: its rows' ids, and the features of those that have them. */
typedef struct PredictBatch
{
	PgdlModel  *model;			/* the caller's copy */
	const char *column;			/* of the features, for messages */
	int32		size;			/* rows per batch */
	int64		n_in;			/* features per example */
	int64		k;				/* outputs per example */
	float	   *x;				/* rows with features, packed at the front */
	int64	   *ids;
	bool	   *id_null;
	bool	   *x_null;
} PredictBatch;

static void
batch_init(PredictBatch *b, PgdlModel *model, const char *column, int32 size)
{
	pgdl_check_model_batch(model->nn, size, "the model");
	b->model = model;
	b->column = column;
	b->size = size;
	b->n_in = nn_model_input_size(model->nn);
	b->k = nn_model_output_size(model->nn);
	b->x = MemoryContextAllocHuge(CurrentMemoryContext,
								  mul_size(mul_size((Size) size, (Size) b->n_in), sizeof(float)));
	b->ids = palloc(sizeof(int64) * size);
	b->id_null = palloc(sizeof(bool) * size);
	b->x_null = palloc(sizeof(bool) * size);
}

/* The features of fetched row r, for messages. */
static char *
row_name(const PredictBatch *b, uint64 r)
{
	if (b->id_null[r])
		return psprintf("features column \"%s\" in the row with a NULL id", b->column);
	return psprintf("features column \"%s\" in the row with id " INT64_FORMAT, b->column, b->ids[r]);
}

/*
 * The fetched rows into the batch, normalized and checked to be finite; how
 * many have features (NULL features give a NULL class).
 */
static int
batch_read(PredictBatch *b, SPITupleTable *tuptable, uint64 rows)
{
	int			n = 0;

	for (uint64 r = 0; r < rows; r++)
	{
		HeapTuple	tuple = tuptable->vals[r];
		Datum		d;
		int64		length;
		const float *f;

		d = SPI_getbinval(tuple, tuptable->tupdesc, 1, &b->id_null[r]);
		b->ids[r] = b->id_null[r] ? 0 : DatumGetInt64(d);
		d = SPI_getbinval(tuple, tuptable->tupdesc, 2, &b->x_null[r]);
		if (b->x_null[r])
			continue;
		f = pgdl_float4_array(DatumGetArrayTypeP(d), "features", &length);
		if (length != b->n_in)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("wrong number of features"),
					 b->id_null[r] ?
					 errdetail("The model takes " INT64_FORMAT " features; the row with a NULL id has " INT64_FORMAT ".",
							   b->n_in, length) :
					 errdetail("The model takes " INT64_FORMAT " features; the row with id " INT64_FORMAT " has " INT64_FORMAT ".",
							   b->n_in, b->ids[r], length)));
		memcpy(b->x + n * b->n_in, f, sizeof(float) * b->n_in);
		if (b->model->dataset != NULL)
			pgdl_dataset_normalize(b->model->dataset, b->x + n * b->n_in, 1);
		if (first_nonfinite(b->x + n * b->n_in, b->n_in) >= 0)
			check_finite(f, b->x + n * b->n_in, b->n_in, row_name(b, r));
		n++;
	}
	return n;
}

/* One result row per fetched row: its class and probability from z, the outputs of the rows with features. */
static void
batch_put(const PredictBatch *b, uint64 rows, const float *z, ReturnSetInfo *rsinfo)
{
	for (uint64 r = 0, j = 0; r < rows; r++)
	{
		Datum		values[3];
		bool		nulls[3] = {b->id_null[r], b->x_null[r], b->x_null[r]};

		values[0] = Int64GetDatum(b->ids[r]);
		if (!b->x_null[r])
		{
			float		p;
			int			c = class_of(b->model->nn, z + j * b->k, &p);

			values[1] = CStringGetTextDatum(class_name(b->model->dataset, c));
			values[2] = Float4GetDatum(p);
			j++;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/* Every row of the query, batch by batch; per-batch memory lives in batchcxt. */
static void
batch_scan(PredictBatch *b, const char *query, MemoryContext batchcxt, ReturnSetInfo *rsinfo)
{
	SPIPlanPtr	plan;
	Portal		portal;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	plan = SPI_prepare(query, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", query, SPI_result_code_string(SPI_result));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	for (;;)
	{
		MemoryContext old;
		uint64		rows;
		int			n;
		const float *z = NULL;

		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, b->size);
		rows = SPI_processed;
		if (rows == 0)
			break;
		old = MemoryContextSwitchTo(batchcxt);
		n = batch_read(b, SPI_tuptable, rows);
		if (n > 0)
			z = forward(b->model->nn, b->x, n);
		batch_put(b, rows, z, rsinfo);
		SPI_freetuptable(SPI_tuptable);
		MemoryContextSwitchTo(old);
		MemoryContextReset(batchcxt);
	}
	SPI_cursor_close(portal);
	SPI_finish();
}

PG_FUNCTION_INFO_V1(pgdl_predict_batch);
Datum
pgdl_predict_batch(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(1);
	char	   *id_column = text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	   *features_column = text_to_cstring(PG_GETARG_TEXT_PP(3));
	int32		batch_size = PG_GETARG_INT32(4);
	MemoryContext callcxt;
	MemoryContext old;
	PgdlModel  *model;
	PredictBatch batch;
	char	   *query;

	if (batch_size < 1 || batch_size > NN_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must be between 1 and %d", NN_MAX_BATCH),
				 errdetail("It is %d.", batch_size)));

	InitMaterializedSRF(fcinfo, 0);
	pgdl_engine_prepare();
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl predict_batch", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);

	model = pgdl_model_arg_copy(fcinfo, callcxt);
	check_classifier(model->nn, "pgdl.predict_batch");
	check_dataset(model->nn, model->dataset);
	query = batch_query(relid, id_column, features_column);
	batch_init(&batch, model, features_column, batch_size);
	batch_scan(&batch, query,
			   AllocSetContextCreate(callcxt, "pgdl predict_batch rows", ALLOCSET_DEFAULT_SIZES),
			   (ReturnSetInfo *) fcinfo->resultinfo);

	MemoryContextSwitchTo(old);
	MemoryContextDelete(callcxt);	/* frees the model */
	return (Datum) 0;
}

/* ---- pgdl.evaluate: mean loss and accuracy over a packed table ---- */

PG_FUNCTION_INFO_V1(pgdl_evaluate);
Datum
pgdl_evaluate(PG_FUNCTION_ARGS)
{
	Oid			packed = PG_GETARG_OID(1);
	MemoryContext callcxt;
	MemoryContext old;
	PgdlModel  *model;
	PgdlDataset *ds;
	NnBatchStats stats = {0};
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	HeapTuple	result;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	pgdl_engine_prepare();
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl evaluate", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);

	model = pgdl_model_arg_copy(fcinfo, callcxt);
	/* copied at once: the cache may drop it at the next query */
	ds = pgdl_dataset_copy(pgdl_dataset_by_packed(packed));
	if (get_rel_name(packed) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", packed)));

	pgdl_packed_evaluate(model->nn, ds, &stats);

	if (stats.n > 0)
	{
		values[0] = Float8GetDatum(stats.loss_sum / (double) stats.n);
		values[1] = Float8GetDatum((double) stats.correct / (double) stats.n);
		nulls[1] = model->nn->spec.loss == NN_LOSS_MSE;
	}
	else
		nulls[0] = nulls[1] = true;
	values[2] = Int64GetDatum(stats.n);

	MemoryContextSwitchTo(old);
	MemoryContextDelete(callcxt);	/* frees the model */
	result = heap_form_tuple(tupdesc, values, nulls);
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
}
