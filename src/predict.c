/*
 * predict.c -- inference in SQL: pgdl.predict, predict_class, predict_batch,
 * evaluate, model_weights and model_from_weights.
 *
 * Every function takes its model three ways, by the same C entry point: an id
 * (bigint), a name (text) or an engine blob (bytea).  Which one a call site
 * passes is read once from the function's pg_proc row.
 *
 * Workspaces.  A forward pass writes into the model's workspace (m->work,
 * sized by nn_model_reserve), which is part of the model struct, but never
 * changes its parameters or running statistics (inference mode).  A backend
 * is single-threaded, so:
 *
 *  - the per-row functions (predict, predict_class) run the cached model of
 *    model_io.c in place: one example needs a workspace of one row, the cache
 *    keeps it, and the next row pays no allocation, no SPI and no copy.
 *    Nothing between resolving the model and copying its output out runs
 *    another query, loads another model or takes a lock (arguments are
 *    detoasted first, since opening a TOAST table may process invalidations):
 *    the cache entry may be retired or reused by the next of those;
 *
 *  - the functions that read a table (predict_batch, evaluate) clone the model
 *    and copy its dataset first: the SPI cursor between two batches may process
 *    invalidations, load other models into the cache or evict this one.  The
 *    clone also keeps a batch-sized workspace out of the long-lived cache, and
 *    makes the whole scan use one consistent model.
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
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "pgdl.h"

/* How a call site names its model (the type of argument 0). */
typedef enum PredictModelKind
{
	PREDICT_BY_ID,
	PREDICT_BY_NAME,
	PREDICT_BY_BLOB
} PredictModelKind;

/* Per call site state, in fn_extra. */
typedef struct PredictCallSite
{
	PredictModelKind kind;
	bool		blob_is_const;	/* argument 0 is a Const of the query: never changes */
	MemoryContext blob_cxt;		/* owns blob_model (and blob); child of fn_mcxt */
	PgdlModel  *blob_model;		/* the last blob's model, or NULL */
	bytea	   *blob;			/* that blob's bytes, to recognize it again */
} PredictCallSite;

/* A model that the caller owns: its engine model and a copy of its dataset. */
typedef struct PredictPrivateModel
{
	NnModel    *nn;				/* freed when the owning context goes */
	PgdlDataset *dataset;		/* NULL when the model has none */
} PredictPrivateModel;

/* ---- model arguments ---- */

static PredictCallSite *
PredictCallSiteGet(FunctionCallInfo fcinfo)
{
	PredictCallSite *site = (PredictCallSite *) fcinfo->flinfo->fn_extra;
	Oid		   *argtypes;
	int			nargs;

	if (site != NULL)
		return site;

	site = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(PredictCallSite));
	get_func_signature(fcinfo->flinfo->fn_oid, &argtypes, &nargs);
	if (nargs < 1)
		elog(ERROR, "function %u takes no model argument", fcinfo->flinfo->fn_oid);
	switch (argtypes[0])
	{
		case INT8OID:
			site->kind = PREDICT_BY_ID;
			break;
		case TEXTOID:
			site->kind = PREDICT_BY_NAME;
			break;
		case BYTEAOID:
			site->kind = PREDICT_BY_BLOB;
			break;
		default:
			elog(ERROR, "unexpected model argument type %u", argtypes[0]);
	}
	pfree(argtypes);

	if (site->kind == PREDICT_BY_BLOB && fcinfo->flinfo->fn_expr != NULL &&
		IsA(fcinfo->flinfo->fn_expr, FuncExpr))
	{
		List	   *args = ((FuncExpr *) fcinfo->flinfo->fn_expr)->args;

		site->blob_is_const = args != NIL && IsA(linitial(args), Const);
	}
	fcinfo->flinfo->fn_extra = site;
	return site;
}

/*
 * The model argument 0 names, for use within this call and with no query run
 * or lock taken before the caller is done with it (see the top of the file).
 * Models from blobs are kept per call site.
 */
static PgdlModel *
PredictModelArg(FunctionCallInfo fcinfo, PredictCallSite *site)
{
	bytea	   *blob;

	switch (site->kind)
	{
		case PREDICT_BY_ID:
			return pgdl_model_by_id(PG_GETARG_INT64(0));
		case PREDICT_BY_NAME:
			return pgdl_model_by_name(text_to_cstring(PG_GETARG_TEXT_PP(0)));
		case PREDICT_BY_BLOB:
			break;
	}

	blob = PG_GETARG_BYTEA_PP(0);
	if (site->blob_model != NULL &&
		(site->blob_is_const ||
		 (VARSIZE_ANY_EXHDR(blob) == VARSIZE_ANY_EXHDR(site->blob) &&
		  memcmp(VARDATA_ANY(blob), VARDATA_ANY(site->blob), VARSIZE_ANY_EXHDR(blob)) == 0)))
		return site->blob_model;

	/* a different blob: drop the last one's model (its context frees it) */
	site->blob_model = NULL;
	site->blob = NULL;
	if (site->blob_cxt != NULL)
		MemoryContextDelete(site->blob_cxt);
	site->blob_cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "pgdl predict model",
										   ALLOCSET_SMALL_SIZES);
	site->blob_model = pgdl_model_from_bytea(blob, site->blob_cxt);
	if (!site->blob_is_const)
	{
		Size		size = VARSIZE_ANY(blob);

		site->blob = MemoryContextAlloc(site->blob_cxt, size);
		memcpy(site->blob, blob, size);
	}
	return site->blob_model;
}

/* A copy of ds in the current memory context. */
static PgdlDataset *
PredictDatasetCopy(const PgdlDataset *ds)
{
	PgdlDataset *copy = palloc(sizeof(PgdlDataset));

	memcpy(copy, ds, sizeof(PgdlDataset));
	if (ds->classes != NULL)
	{
		copy->classes = palloc(sizeof(char *) * Max(ds->n_classes, 1));
		for (int i = 0; i < ds->n_classes; i++)
			copy->classes[i] = pstrdup(ds->classes[i]);
	}
	if (ds->mean != NULL)
	{
		copy->mean = palloc(sizeof(float) * ds->n_features);
		memcpy(copy->mean, ds->mean, sizeof(float) * ds->n_features);
	}
	if (ds->std != NULL)
	{
		copy->std = palloc(sizeof(float) * ds->n_features);
		memcpy(copy->std, ds->std, sizeof(float) * ds->n_features);
	}
	return copy;
}

/*
 * The model argument 0 names, as a clone and a dataset copy that belong to
 * `owner` and stay valid whatever queries run meanwhile.
 */
static PredictPrivateModel
PredictModelPrivate(FunctionCallInfo fcinfo, MemoryContext owner)
{
	PredictPrivateModel pm = {NULL, NULL};
	MemoryContext old = MemoryContextSwitchTo(owner);
	PgdlModel  *model;
	NnError		err;

	if (PG_ARGISNULL(0))
		elog(ERROR, "model argument is NULL");
	switch (PredictCallSiteGet(fcinfo)->kind)
	{
		case PREDICT_BY_ID:
			model = pgdl_model_by_id(PG_GETARG_INT64(0));
			break;
		case PREDICT_BY_NAME:
			model = pgdl_model_by_name(text_to_cstring(PG_GETARG_TEXT_PP(0)));
			break;
		default:
			/* already the caller's: deserialized into `owner` */
			model = pgdl_model_from_bytea(PG_GETARG_BYTEA_PP(0), owner);
			pm.nn = model->nn;
			MemoryContextSwitchTo(old);
			return pm;
	}

	pm.nn = nn_model_clone(model->nn, &err);
	if (pm.nn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Copying the model failed: %s.", err.msg)));
	pgdl_model_free_with(pm.nn, owner);
	if (model->dataset != NULL)
		pm.dataset = PredictDatasetCopy(model->dataset);
	MemoryContextSwitchTo(old);
	return pm;
}

/* ---- checks shared by the functions ---- */

/* A stored model's dataset must describe the model's inputs and outputs. */
static void
PredictCheckDataset(const NnModel *m, const PgdlDataset *ds)
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
PredictCheckClassifier(const NnModel *m, const char *function)
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

/*
 * x's `length` features, checked against the model and normalized with its
 * dataset, into `dst` (which may be NULL: then returns x itself when nothing
 * needs normalizing, or a palloc'd copy).
 */
static const float *
PredictFeatures(const NnModel *m, const PgdlDataset *ds, const float *x, int64 length,
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
		return x;
	if (dst == NULL)
		dst = palloc(sizeof(float) * length);
	memcpy(dst, x, sizeof(float) * length);
	if (ds != NULL)
		pgdl_dataset_normalize(ds, dst, 1);
	return dst;
}

/*
 * The network's raw outputs (logits for the classification losses) for n
 * examples, in the model's workspace: valid until its next forward pass.
 */
static const float *
PredictForward(NnModel *m, const float *x, int n)
{
	NnError		err;
	const float *z;

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
PredictSigmoid(float z)
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
PredictTransform(NnLoss loss, const float *z, int64 k, float *out)
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
				out[c] = PredictSigmoid(z[c]);
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
PredictClassOf(const NnModel *m, const float *z, float *probability)
{
	int64		k = nn_model_output_size(m);
	int			best = 0;

	if (m->spec.loss == NN_LOSS_BCE)
	{
		best = z[0] > 0.0f ? 1 : 0;
		if (probability)
			*probability = PredictSigmoid(best ? z[0] : -z[0]);
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
PredictClassName(const PgdlDataset *ds, int index)
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
	PredictCallSite *site = PredictCallSiteGet(fcinfo);
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
	model = PredictModelArg(fcinfo, site);
	m = model->nn;
	if (layer < 1 || layer > m->spec.n_layers)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("layer must be between 1 and %d, got %d", m->spec.n_layers, layer),
				 errdetail("pgdl.features returns the output of the model's first `layer` layers.")));
	PredictCheckDataset(m, model->dataset);
	x = PredictFeatures(m, model->dataset, xraw, length, NULL);
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
	PredictCallSite *site = PredictCallSiteGet(fcinfo);
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
	model = PredictModelArg(fcinfo, site);
	m = model->nn;
	PredictCheckDataset(m, model->dataset);
	x = PredictFeatures(m, model->dataset, xraw, length, NULL);
	z = PredictForward(m, x, 1);
	k = nn_model_output_size(m);
	out = palloc(sizeof(float) * k);
	PredictTransform(m->spec.loss, z, k, out);
	PG_RETURN_ARRAYTYPE_P(pgdl_float4_array_from(out, k));
}

PG_FUNCTION_INFO_V1(pgdl_predict_class);
Datum
pgdl_predict_class(PG_FUNCTION_ARGS)
{
	PredictCallSite *site = PredictCallSiteGet(fcinfo);
	ArrayType  *xa = PG_GETARG_ARRAYTYPE_P(1);
	int64		length;
	const float *xraw = pgdl_float4_array(xa, "x", &length);
	PgdlModel  *model;
	NnModel    *m;
	const float *x;
	int			index;

	pgdl_engine_prepare();
	model = PredictModelArg(fcinfo, site);
	m = model->nn;
	PredictCheckClassifier(m, "pgdl.predict_class");
	PredictCheckDataset(m, model->dataset);
	x = PredictFeatures(m, model->dataset, xraw, length, NULL);
	index = PredictClassOf(m, PredictForward(m, x, 1), NULL);
	PG_RETURN_TEXT_P(cstring_to_text(PredictClassName(model->dataset, index)));
}

/* ---- pgdl.predict_batch: a table, batch_size rows per forward pass ---- */

static void
PredictCheckColumn(Oid relid, const char *column, bool features, AttrNumber *attnum)
{
	Oid			type;

	*attnum = get_attnum(relid, column);
	if (*attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", column, get_rel_name(relid))));
	type = getBaseType(get_atttype(relid, *attnum));
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

PG_FUNCTION_INFO_V1(pgdl_predict_batch);
Datum
pgdl_predict_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid = PG_GETARG_OID(1);
	char	   *id_column = text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	   *features_column = text_to_cstring(PG_GETARG_TEXT_PP(3));
	int32		batch_size = PG_GETARG_INT32(4);
	MemoryContext callcxt;
	MemoryContext batchcxt;
	MemoryContext old;
	PredictPrivateModel pm;
	AttrNumber	id_att,
				features_att;
	char	   *relname;
	char	   *query;
	SPIPlanPtr	plan;
	Portal		portal;
	int64		n_in,
				k;
	float	   *x;
	int64	   *ids;
	bool	   *id_null;
	bool	   *x_null;

	if (batch_size < 1 || batch_size > NN_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must be between 1 and %d", NN_MAX_BATCH),
				 errdetail("It is %d.", batch_size)));

	InitMaterializedSRF(fcinfo, 0);
	pgdl_engine_prepare();
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl predict_batch", ALLOCSET_DEFAULT_SIZES);
	batchcxt = AllocSetContextCreate(callcxt, "pgdl predict_batch rows", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);

	pm = PredictModelPrivate(fcinfo, callcxt);
	PredictCheckClassifier(pm.nn, "pgdl.predict_batch");
	PredictCheckDataset(pm.nn, pm.dataset);

	relname = get_rel_name(relid);
	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	PredictCheckColumn(relid, id_column, false, &id_att);
	PredictCheckColumn(relid, features_column, true, &features_att);
	query = psprintf("SELECT %s::pg_catalog.int8, %s::pg_catalog.float4[] FROM %s",
					 quote_identifier(id_column), quote_identifier(features_column),
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), relname));

	n_in = nn_model_input_size(pm.nn);
	k = nn_model_output_size(pm.nn);
	x = MemoryContextAllocHuge(callcxt, mul_size(mul_size((Size) batch_size, (Size) n_in), sizeof(float)));
	ids = palloc(sizeof(int64) * batch_size);
	id_null = palloc(sizeof(bool) * batch_size);
	x_null = palloc(sizeof(bool) * batch_size);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	plan = SPI_prepare(query, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", query, SPI_result_code_string(SPI_result));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);

	for (;;)
	{
		uint64		rows;
		int			n = 0;		/* rows with features, packed at the front of x */
		const float *z = NULL;

		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, batch_size);
		rows = SPI_processed;
		if (rows == 0)
			break;

		MemoryContextSwitchTo(batchcxt);
		for (uint64 r = 0; r < rows; r++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			Datum		d;
			int64		length;
			const float *f;

			d = SPI_getbinval(tuple, desc, 1, &id_null[r]);
			ids[r] = id_null[r] ? 0 : DatumGetInt64(d);
			d = SPI_getbinval(tuple, desc, 2, &x_null[r]);
			if (x_null[r])
				continue;
			f = pgdl_float4_array(DatumGetArrayTypeP(d), "features", &length);
			if (length != n_in)
				ereport(ERROR,
						(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
						 errmsg("wrong number of features"),
						 id_null[r] ?
						 errdetail("The model takes " INT64_FORMAT " features; the row with a NULL id has " INT64_FORMAT ".",
								   n_in, length) :
						 errdetail("The model takes " INT64_FORMAT " features; the row with id " INT64_FORMAT " has " INT64_FORMAT ".",
								   n_in, ids[r], length)));
			memcpy(x + n * n_in, f, sizeof(float) * n_in);
			n++;
		}
		if (n > 0)
		{
			if (pm.dataset != NULL)
				pgdl_dataset_normalize(pm.dataset, x, n);
			z = PredictForward(pm.nn, x, n);
		}

		for (uint64 r = 0, j = 0; r < rows; r++)
		{
			Datum		values[3];
			bool		nulls[3] = {id_null[r], x_null[r], x_null[r]};

			values[0] = Int64GetDatum(ids[r]);
			if (!x_null[r])
			{
				float		p;
				int			c = PredictClassOf(pm.nn, z + j * k, &p);

				values[1] = CStringGetTextDatum(PredictClassName(pm.dataset, c));
				values[2] = Float4GetDatum(p);
				j++;
			}
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		SPI_freetuptable(SPI_tuptable);
		MemoryContextSwitchTo(callcxt);
		MemoryContextReset(batchcxt);
	}

	SPI_cursor_close(portal);
	SPI_finish();
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
	PredictPrivateModel pm;
	PgdlDataset *ds;
	NnModel    *m;
	char	   *relname;
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

	pm = PredictModelPrivate(fcinfo, callcxt);
	m = pm.nn;

	/* copied at once: the cache may drop it at the next query */
	ds = PredictDatasetCopy(pgdl_dataset_by_packed(packed));
	relname = get_rel_name(packed);
	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", packed)));

	pgdl_packed_evaluate(m, ds, &stats);

	if (stats.n > 0)
	{
		values[0] = Float8GetDatum(stats.loss_sum / (double) stats.n);
		values[1] = Float8GetDatum((double) stats.correct / (double) stats.n);
		nulls[1] = m->spec.loss == NN_LOSS_MSE;
	}
	else
		nulls[0] = nulls[1] = true;
	values[2] = Int64GetDatum(stats.n);

	MemoryContextSwitchTo(old);
	MemoryContextDelete(callcxt);	/* frees the model */
	result = heap_form_tuple(tupdesc, values, nulls);
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
}

/* ---- pgdl.model_weights and pgdl.model_from_weights ---- */

/* One parameter tensor: rows of pgdl.model_weights. */
typedef struct PredictTensor
{
	int			layer;
	const char *name;			/* PyTorch's state_dict suffix */
	int			ndim;
	int			shape[4];
	int64		offset;			/* in params, or in buffers */
	bool		buffer;
} PredictTensor;

/* The tensors of layer i, in state_dict order; returns how many (at most 4). */
static int
PredictLayerTensors(const NnModel *m, int i, PredictTensor *t)
{
	const NnLayerSpec *l = &m->spec.layers[i];
	int64		p = m->param_off[i];
	int			in = (int) NN_SHAPE_SIZE(m->shape[i]);
	int			c = m->shape[i].c;

	switch (l->type)
	{
		case NN_DENSE:
			t[0] = (PredictTensor) {i, "weight", 2, {l->units, in}, p, false};
			t[1] = (PredictTensor) {i, "bias", 1, {l->units}, p + (int64) l->units * in, false};
			return 2;
		case NN_CONV2D:
			t[0] = (PredictTensor) {i, "weight", 4, {l->filters, c, l->kernel, l->kernel}, p, false};
			t[1] = (PredictTensor) {i, "bias", 1, {l->filters},
									p + (int64) l->filters * c * l->kernel * l->kernel, false};
			return 2;
		case NN_BATCHNORM:
			t[0] = (PredictTensor) {i, "weight", 1, {c}, p, false};
			t[1] = (PredictTensor) {i, "bias", 1, {c}, p + c, false};
			t[2] = (PredictTensor) {i, "running_mean", 1, {c}, m->buffer_off[i], true};
			t[3] = (PredictTensor) {i, "running_var", 1, {c}, m->buffer_off[i] + c, true};
			return 4;
		default:
			if (m->param_len[i] != 0 || m->buffer_len[i] != 0)
				elog(ERROR, "layer %d (%s) has parameters of unknown shape", i, nn_layer_type_name(l->type));
			return 0;
	}
}

static int64
PredictTensorSize(const PredictTensor *t)
{
	int64		size = 1;

	for (int d = 0; d < t->ndim; d++)
		size *= t->shape[d];
	return size;
}

PG_FUNCTION_INFO_V1(pgdl_model_weights);
Datum
pgdl_model_weights(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext callcxt;
	MemoryContext rowcxt;
	MemoryContext old;
	NnModel    *m;

	InitMaterializedSRF(fcinfo, 0);
	pgdl_engine_prepare();
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl model_weights", ALLOCSET_DEFAULT_SIZES);
	rowcxt = AllocSetContextCreate(callcxt, "pgdl model_weights row", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);

	/*
	 * A cached model is read in place: nothing below runs a query or takes a
	 * lock, so the cache cannot drop it meanwhile.
	 */
	if (PredictCallSiteGet(fcinfo)->kind == PREDICT_BY_BLOB)
		m = pgdl_model_from_bytea(PG_GETARG_BYTEA_PP(0), callcxt)->nn;
	else
		m = PredictModelArg(fcinfo, PredictCallSiteGet(fcinfo))->nn;

	for (int i = 0; i < m->spec.n_layers; i++)
	{
		PredictTensor t[4];
		int			n = PredictLayerTensors(m, i, t);

		CHECK_FOR_INTERRUPTS();
		for (int j = 0; j < n; j++)
		{
			Datum		values[4];
			bool		nulls[4] = {false, false, false, false};
			Datum		dims[4];
			const float *base = t[j].buffer ? m->buffers : m->params;

			MemoryContextSwitchTo(rowcxt);
			for (int d = 0; d < t[j].ndim; d++)
				dims[d] = Int32GetDatum(t[j].shape[d]);
			values[0] = Int32GetDatum(i);
			values[1] = CStringGetTextDatum(t[j].name);
			values[2] = PointerGetDatum(construct_array(dims, t[j].ndim, INT4OID, sizeof(int32), true, TYPALIGN_INT));
			values[3] = PointerGetDatum(pgdl_float4_array_from(base + t[j].offset, PredictTensorSize(&t[j])));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			MemoryContextSwitchTo(callcxt);
			MemoryContextReset(rowcxt);
		}
	}

	MemoryContextSwitchTo(old);
	MemoryContextDelete(callcxt);
	return (Datum) 0;
}

/* Copies `what` into dst after checking its length and values. */
static void
PredictCopyWeights(ArrayType *array, const char *what, float *dst, int64 expected,
				   const char *expected_what)
{
	int64		length;
	const float *v = pgdl_float4_array(array, what, &length);

	if (length != expected)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("wrong number of %s", what),
				 errdetail("The spec needs " INT64_FORMAT " %s, %s holds " INT64_FORMAT ".",
						   expected, expected_what, what, length),
				 errhint("Concatenate the tensors in the order pgdl.model_weights() lists them.")));
	for (int64 j = 0; j < length; j++)
		if (!isfinite(v[j]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be finite", what),
					 errdetail("Value " INT64_FORMAT " is %s.", j + 1, isnan(v[j]) ? "NaN" : "infinite")));
	if (length > 0)
		memcpy(dst, v, sizeof(float) * length);
}

PG_FUNCTION_INFO_V1(pgdl_model_from_weights);
Datum
pgdl_model_from_weights(PG_FUNCTION_ARGS)
{
	NnSpec	   *spec;
	NnModel    *m;
	NnError		err;
	int64		seed;
	bytea	   *blob;

	/* STRICT but for buffers, which may be NULL */
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3))
		PG_RETURN_NULL();
	seed = PG_GETARG_INT64(3);
	if (seed < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seed must not be negative"),
				 errdetail("It is " INT64_FORMAT ".", seed)));

	pgdl_engine_prepare();
	spec = palloc0(sizeof(NnSpec));
	pgdl_spec_from_jsonb(PG_GETARG_JSONB_P(0), spec);
	m = nn_model_create(spec, (uint64) seed, &err);
	if (m == NULL)
		pgdl_report_nn_error("model spec", &err);
	pgdl_model_free_with(m, CurrentMemoryContext);

	PredictCopyWeights(PG_GETARG_ARRAYTYPE_P(1), "params", m->params, m->n_params, "parameters");
	if (!PG_ARGISNULL(2))
		PredictCopyWeights(PG_GETARG_ARRAYTYPE_P(2), "buffers", m->buffers, m->n_buffers,
						   "batchnorm running statistics");
	for (int i = 0; i < m->spec.n_layers; i++)
	{
		/* a variance below zero would make batchnorm divide by the root of a negative */
		if (m->spec.layers[i].type == NN_BATCHNORM)
		{
			int			c = m->shape[i].c;
			const float *var = m->buffers + m->buffer_off[i] + c;

			for (int j = 0; j < c; j++)
				if (var[j] < 0.0f)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("running variance of layer %d must not be negative", i),
							 errdetail("Channel %d has %g.", j, (double) var[j])));
		}
	}

	blob = pgdl_model_serialize(m);
	PG_RETURN_BYTEA_P(blob);
}
