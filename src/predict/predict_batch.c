/*
 * predict_batch.c -- pgdl.predict_batch_rows, the set-returning function
 * behind every pgdl.predict_batch: the class and its probability for each row
 * of a table, a query or an open cursor, one forward pass per batch_size rows.
 *
 * It returns one row per call (SFRM_ValuePerCall) and fetches the next batch
 * only when the rows of the last one are used up, so a caller that stops early
 * (LIMIT) runs only the batches it read.  pgdl.predict_batch is an SQL
 * function that calls it in a select list, which PostgreSQL inlines into the
 * caller's query: `SELECT * FROM pgdl.predict_batch(...) LIMIT 3` then reads
 * one batch (a C function in FROM would be run to its end into a tuplestore).
 *
 * The source's rows come through a portal: one opened here for a table or a
 * query, read-only and as the caller (their privileges and row security
 * apply), closed at the end or, when the caller stops early, by an expression
 * context callback; or the caller's own cursor, which is left open.  Each
 * fetch runs in its own SPI connection, between two calls.
 *
 * The model is a clone with a copy of its dataset (pgdl_model_arg_copy): each
 * fetch may process invalidations or load other models into the cache.
 */
#include "postgres.h"

#include <ctype.h>

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/portal.h"
#include "utils/regproc.h"
#include "utils/tuplestore.h"
#include "utils/varlena.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"
#include "predict/predict.h"

/* The state of one scan, in the SRF's multi-call memory. */
typedef struct BatchScan
{
	PgdlModel  *model;			/* the caller's copy */
	char	   *features_column;	/* for messages */
	int32		size;			/* rows per batch */
	int64		n_in;			/* features per example */
	int64		n_raw;			/* per row of the source: the dataset's raw example vector */
	float	   *raw;			/* one row's, when the dataset expands it (imputation, one-hot); else NULL */
	int64		k;				/* outputs per example */
	char	   *portal;			/* its name; NULL once closed */
	bool		own_portal;		/* opened here, so closed here */
	int			id_att;			/* columns of the source's rows (1-based) */
	int			x_att;
	Oid			class_type;		/* of the class column */
	FmgrInfo	class_input;
	Oid			class_ioparam;
	Datum	   *class_values;	/* per class index, converted on first use */
	bool	   *class_known;
	ExprContext *econtext;		/* where close_source is registered */
	MemoryContext batchcxt;		/* one batch's rows and results */
	/* the current batch */
	float	   *x;				/* rows with features, packed at the front */
	int64	   *ids;
	bool	   *id_null;
	bool	   *x_null;
	int		   *classes;		/* per row with features */
	float	   *probability;
	uint64		rows;
	uint64		next;			/* the next row to return */
	uint64		next_x;			/* its index among the rows with features */
	bool		done;			/* the source has no more rows */
} BatchScan;

/* ---- the source ---- */

static void
check_column_type(const char *column, Oid type, bool features)
{
	type = getBaseType(type);
	if (!features && type != INT2OID && type != INT4OID && type != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("id column \"%s\" must be of an integer type", pgdl_echo(column)),
				 errdetail("It is of type %s.", format_type_be(type))));
	if (features && type != FLOAT4ARRAYOID && type != FLOAT8ARRAYOID && type != INT2ARRAYOID &&
		type != INT4ARRAYOID && type != INT8ARRAYOID && type != NUMERICARRAYOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("features column \"%s\" must be an array of numbers", pgdl_echo(column)),
				 errdetail("It is of type %s; real[], double precision[], smallint[], integer[], "
						   "bigint[] and numeric[] are accepted.", format_type_be(type))));
}

/* A table's or view's columns, checked before reading it, for the messages of pgdl 0.3. */
static void
check_table_column(Oid relid, const char *column, bool features)
{
	AttrNumber	attnum = get_attnum(relid, column);

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", pgdl_echo(column), get_rel_name(relid))));
	check_column_type(column, get_atttype(relid, attnum), features);
}

/* The query that reads (id, features) from a table or view: identifiers quoted, never spliced. */
static char *
table_query(Oid relid, const char *id_column, const char *features_column)
{
	char	   *relname = get_rel_name(relid);

	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	check_table_column(relid, id_column, false);
	check_table_column(relid, features_column, true);
	return psprintf("SELECT %s, %s FROM %s", quote_identifier(id_column), quote_identifier(features_column),
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), relname));
}

/*
 * A portal on the caller's query, opened read-only (as a STABLE function must:
 * a data-modifying statement, SELECT INTO or FOR UPDATE is refused before it
 * runs).  In the current SPI connection; the portal outlives it.
 */
static Portal
open_query(const char *query)
{
	SPIPlanPtr	plan = SPI_prepare(query, 0, NULL);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (list_length(SPI_plan_get_plan_sources(plan)) != 1 || !SPI_is_cursor_plan(plan))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("source must be one query that returns rows"),
				 errdetail("A source is a table or view name, or one SELECT, WITH, VALUES or TABLE query.")));
	return SPI_cursor_open(NULL, plan, NULL, NULL, true);
}

/* The caller's open cursor named `name`. */
static Portal
find_cursor(const char *name)
{
	Portal		portal = SPI_cursor_find(name);

	if (portal == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_CURSOR),
				 errmsg("cursor \"%s\" does not exist", pgdl_echo(name)),
				 errdetail("pgdl.predict_batch reads a cursor that is open in this transaction, "
						   "as DECLARE name CURSOR FOR ... opens it.")));
	if (portal->tupDesc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_CURSOR_STATE),
				 errmsg("cursor \"%s\" does not return rows", pgdl_echo(name))));
	return portal;
}

/* The column of the source's rows named exactly `column`, its type checked. */
static int
source_column(TupleDesc desc, const char *column, bool features)
{
	int			found = 0;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || strcmp(NameStr(att->attname), column) != 0)
			continue;
		if (found)
			ereport(ERROR,
					(errcode(ERRCODE_AMBIGUOUS_COLUMN),
					 errmsg("the source has more than one column named \"%s\"", pgdl_echo(column))));
		found = i + 1;
	}
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("the source has no column named \"%s\"", pgdl_echo(column)),
				 errhint("Name the %s column of the query or cursor's rows, as they are named in its SELECT list.",
						 features ? "features" : "id")));
	check_column_type(column, TupleDescAttr(desc, found - 1)->atttypid, features);
	return found;
}

/*
 * Opens the source of kind "text" (a table or view name, or a query),
 * "regclass" (a relation's OID) or "refcursor" (a cursor's name), and finds
 * its columns.  In an SPI connection; names are kept in cxt.
 */
static void
open_source(BatchScan *scan, const char *kind, const char *source, const char *id_column, MemoryContext cxt)
{
	Portal		portal;

	if (strcmp(kind, "refcursor") == 0)
		portal = find_cursor(source);
	else
	{
		const char *query;

		if (strcmp(kind, "regclass") == 0)
			query = table_query(DatumGetObjectId(DirectFunctionCall1(oidin, CStringGetDatum(source))),
								id_column, scan->features_column);
		else if (strcmp(kind, "text") == 0 && pgdl_source_is_query(source))
			query = source;
		else if (strcmp(kind, "text") == 0)
		{
			RangeVar   *rv = makeRangeVarFromNameList(stringToQualifiedNameList(source));

			query = table_query(RangeVarGetRelid(rv, NoLock, false), id_column, scan->features_column);
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown source_kind \"%s\"", pgdl_echo(kind)),
					 errdetail("It is the type of pgdl.predict_batch's source: text, regclass or refcursor.")));
		portal = open_query(query);
		scan->own_portal = true;
	}
	scan->portal = MemoryContextStrdup(cxt, portal->name);
	scan->id_att = source_column(portal->tupDesc, id_column, false);
	scan->x_att = source_column(portal->tupDesc, scan->features_column, true);
}

/* Closes the portal opened here, if it is still open: at the end, or when the caller stops early. */
static void
close_source(Datum arg)
{
	BatchScan  *scan = (BatchScan *) DatumGetPointer(arg);
	Portal		portal;

	if (scan->portal == NULL || !scan->own_portal)
		return;
	portal = GetPortalByName(scan->portal);
	if (PortalIsValid(portal))
		SPI_cursor_close(portal);
	scan->portal = NULL;
}

/* ---- a batch ---- */

/* The features of fetched row r, for messages. */
static char *
row_name(const BatchScan *scan, uint64 r)
{
	if (scan->id_null[r])
		return psprintf("features column \"%s\" in the row with a NULL id", pgdl_echo(scan->features_column));
	return psprintf("features column \"%s\" in the row with id " INT64_FORMAT,
					pgdl_echo(scan->features_column), scan->ids[r]);
}

/*
 * The features column's value (an array of numbers: check_column_type) into
 * dst when it has n_raw of them; its length.  A detoasted copy is freed at once:
 * a batch reads many rows, and their arrays are not needed once converted.
 * Row r is named in the error for a value beyond real's range.  A NULL
 * element is a missing value (NaN) for a dataset that imputes them.
 */
static int64
features_of(const BatchScan *scan, Datum value, float *dst, uint64 r)
{
	ArrayType  *array = DatumGetArrayTypeP(value);
	bool		has_nulls = ARR_HASNULL(array) && array_contains_nulls(array);
	int64		length;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("features must be a one-dimensional array"),
				 errdetail("It has %d dimensions.", ARR_NDIM(array))));
	pgdl_predict_check_nulls(scan->model->dataset, has_nulls, "features");
	length = ARR_NDIM(array) == 0 ? 0 : ARR_DIMS(array)[0];
	if (length == scan->n_raw && has_nulls)
		pgdl_number_array_to_floats_nulls(array, ARR_ELEMTYPE(array), scan->n_raw, dst);
	else if (length == scan->n_raw && (ARR_ELEMTYPE(array) == FLOAT8OID || ARR_ELEMTYPE(array) == NUMERICOID))
	{
		char	   *what = row_name(scan, r);

		pgdl_number_array_to_floats_checked(array, ARR_ELEMTYPE(array), scan->n_raw, dst, what);
		pfree(what);
	}
	else if (length == scan->n_raw)
		pgdl_number_array_to_floats(array, ARR_ELEMTYPE(array), scan->n_raw, dst);
	if ((Pointer) array != DatumGetPointer(value))
		pfree(array);
	return length;
}

static int64
id_of(Datum d, Oid type)
{
	switch (getBaseType(type))
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

/* Row r's model input x is not finite: the error, naming the value as read (expanded, not normalized). */
static void
check_row_finite(const BatchScan *scan, Datum d, const float *x, uint64 r)
{
	float	   *raw = palloc(sizeof(float) * scan->n_raw);
	float	   *expanded = raw;

	(void) features_of(scan, d, raw, r);
	if (scan->raw != NULL)
	{
		expanded = palloc(sizeof(float) * scan->n_in);
		pgdl_dataset_expand(scan->model->dataset, raw, expanded, 1);
	}
	pgdl_predict_check_finite(expanded, x, scan->n_in, row_name(scan, r));
}

/*
 * The fetched rows into the batch, expanded, normalized and checked to be finite; how
 * many have features (NULL features give a NULL class).  A row that is not
 * finite once normalized is read again, raw, for the message.
 */
static int
read_rows(BatchScan *scan, SPITupleTable *tuptable, uint64 rows)
{
	int			n = 0;

	for (uint64 r = 0; r < rows; r++)
	{
		HeapTuple	tuple = tuptable->vals[r];
		TupleDesc	desc = tuptable->tupdesc;
		float	   *x = scan->x + n * scan->n_in;
		float	   *raw = scan->raw != NULL ? scan->raw : x;
		Datum		d;
		int64		length;

		d = SPI_getbinval(tuple, desc, scan->id_att, &scan->id_null[r]);
		scan->ids[r] = scan->id_null[r] ? 0 : id_of(d, TupleDescAttr(desc, scan->id_att - 1)->atttypid);
		d = SPI_getbinval(tuple, desc, scan->x_att, &scan->x_null[r]);
		if (scan->x_null[r])
			continue;
		length = features_of(scan, d, raw, r);
		if (length != scan->n_raw)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("wrong number of features"),
					 scan->id_null[r] ?
					 errdetail("The model takes " INT64_FORMAT " features; the row with a NULL id has " INT64_FORMAT ".",
							   scan->n_raw, length) :
					 errdetail("The model takes " INT64_FORMAT " features; the row with id " INT64_FORMAT " has " INT64_FORMAT ".",
							   scan->n_raw, scan->ids[r], length)));
		if (scan->raw != NULL)
			pgdl_dataset_expand(scan->model->dataset, raw, x, 1);
		if (scan->model->dataset != NULL)
			pgdl_dataset_normalize(scan->model->dataset, x, 1);
		if (pgdl_predict_first_nonfinite(x, scan->n_in) >= 0)
			check_row_finite(scan, d, x, r);
		n++;
	}
	return n;
}

/*
 * The next batch_size rows of the source, through one forward pass, into the
 * scan; none when the source is done.
 */
static void
fetch_batch(BatchScan *scan)
{
	MemoryContext old;
	Portal		portal;
	int			n;

	CHECK_FOR_INTERRUPTS();
	MemoryContextReset(scan->batchcxt);
	scan->rows = scan->next = scan->next_x = 0;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	portal = SPI_cursor_find(scan->portal);
	if (portal == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_CURSOR),
				 errmsg("cursor \"%s\" was closed while pgdl.predict_batch read it", pgdl_echo(scan->portal))));
	SPI_cursor_fetch(portal, true, scan->size);
	scan->rows = SPI_processed;
	scan->done = scan->rows < (uint64) scan->size;
	old = MemoryContextSwitchTo(scan->batchcxt);
	n = read_rows(scan, SPI_tuptable, scan->rows);
	if (n > 0)
	{
		const float *z = pgdl_model_outputs(scan->model->nn, scan->x, n);

		if (pgdl_predict_first_nonfinite(z, (int64) n * scan->k) >= 0)
			for (uint64 r = 0, j = 0; r < scan->rows; r++)
				if (!scan->x_null[r])
					pgdl_predict_check_outputs(z + j++ * scan->k, scan->k, row_name(scan, r));
		for (int j = 0; j < n; j++)
			scan->classes[j] = pgdl_model_class_of(scan->model->nn, z + j * scan->k, &scan->probability[j]);
	}
	MemoryContextSwitchTo(old);
	SPI_freetuptable(SPI_tuptable);
	SPI_finish();
	if (scan->done)
		close_source(PointerGetDatum(scan));
}

/* ---- pgdl.predict_batch_rows ---- */

/* The class column's type and its input function. */
static void
init_class_type(BatchScan *scan, Oid type)
{
	Oid			input;

	if (!OidIsValid(type))
		elog(ERROR, "could not determine the type of label_type");
	scan->class_type = type;
	getTypeInputInfo(type, &input, &scan->class_ioparam);
	fmgr_info_cxt(input, &scan->class_input, CurrentMemoryContext);
}

/*
 * The model argument's copy.  model_io.c keeps its call-site state in fn_extra,
 * where a value-per-call function keeps its FuncCallContext: it reads the
 * argument with fn_extra cleared for the time (its state, a few bytes, is
 * left behind in fn_mcxt).
 */
static PgdlModel *
model_copy(FunctionCallInfo fcinfo, MemoryContext cxt)
{
	void	   *extra = fcinfo->flinfo->fn_extra;
	PgdlModel  *model;

	fcinfo->flinfo->fn_extra = NULL;
	model = pgdl_model_arg_copy(fcinfo, cxt);
	fcinfo->flinfo->fn_extra = extra;
	return model;
}

/* The scan of a call, in cxt: the model's copy, the batch's buffers, the source open. */
static BatchScan *
begin_scan(FunctionCallInfo fcinfo, MemoryContext cxt, const char *kind, const char *source,
		   const char *id_column, char *features_column, int32 size, Oid class_type)
{
	BatchScan  *scan = palloc0(sizeof(BatchScan));

	if (size < 1 || size > NN_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_size must be between 1 and %d", NN_MAX_BATCH),
				 errdetail("It is %d.", size)));
	scan->features_column = features_column;
	scan->size = size;
	init_class_type(scan, class_type);
	pgdl_engine_prepare();
	scan->model = model_copy(fcinfo, cxt);
	pgdl_check_model_usable(scan->model);
	pgdl_predict_check_classifier(scan->model->nn, "pgdl.predict_batch");
	pgdl_check_model_fits(&scan->model->nn->spec, scan->model->dataset);
	pgdl_check_model_batch(scan->model->nn, size, "the model");
	/* batches of rows are worth a device when pgdl.device names one; per-row pgdl.predict is not */
	pgdl_device_move(scan->model->nn, pgdl_device_for(NULL), NULL, size);
	scan->n_in = nn_model_input_size(scan->model->nn);
	scan->n_raw = scan->n_in;
	if (scan->model->dataset != NULL && (scan->model->dataset->n_raw != scan->n_in ||
										 scan->model->dataset->impute != NULL))
	{
		scan->n_raw = scan->model->dataset->n_raw;
		scan->raw = palloc(sizeof(float) * scan->n_raw);
	}
	scan->k = nn_model_output_size(scan->model->nn);
	scan->x = MemoryContextAllocHuge(cxt, mul_size(mul_size((Size) size, (Size) scan->n_in), sizeof(float)));
	scan->ids = palloc(sizeof(int64) * size);
	scan->id_null = palloc(sizeof(bool) * size);
	scan->x_null = palloc(sizeof(bool) * size);
	scan->classes = palloc(sizeof(int) * size);
	/* a single binary_cross_entropy output names two classes */
	scan->class_values = palloc(sizeof(Datum) * Max(scan->k, 2));
	scan->class_known = palloc0(sizeof(bool) * Max(scan->k, 2));
	scan->probability = palloc(sizeof(float) * size);
	scan->batchcxt = AllocSetContextCreate(cxt, "pgdl predict_batch rows", ALLOCSET_DEFAULT_SIZES);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	open_source(scan, kind, source, id_column, cxt);
	SPI_finish();
	return scan;
}

/*
 * Class index c as a value of the class column, converted once per scan (in
 * the scan's memory, which outlives the rows that return it).
 */
static Datum
class_value(BatchScan *scan, int c)
{
	if (!scan->class_known[c])
	{
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(scan));
		char	   *label = pgdl_predict_class_name(scan->model->dataset, c);

		scan->class_values[c] = pgdl_predict_label_as(label, scan->class_type,
													  scan->model->dataset ? scan->model->dataset->label_type : InvalidOid,
													  &scan->class_input, scan->class_ioparam);
		scan->class_known[c] = true;
		MemoryContextSwitchTo(old);
	}
	return scan->class_values[c];
}

/* Row scan->next of the current batch: its id, class and probability. */
static void
next_row(BatchScan *scan, Datum *values, bool *nulls)
{
	uint64		r = scan->next++;

	values[0] = Int64GetDatum(scan->ids[r]);
	nulls[0] = scan->id_null[r];
	nulls[1] = nulls[2] = scan->x_null[r];
	if (!scan->x_null[r])
	{
		uint64		j = scan->next_x++;

		values[1] = class_value(scan, scan->classes[j]);
		values[2] = Float4GetDatum(scan->probability[j]);
	}
}

/* Whether the scan has a row to return, fetching the next batch when the last one is used up. */
static bool
has_row(BatchScan *scan)
{
	while (scan->next == scan->rows && !scan->done)
		fetch_batch(scan);
	return scan->next < scan->rows;
}

PG_FUNCTION_INFO_V1(pgdl_predict_batch_rows);
Datum
pgdl_predict_batch_rows(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	BatchScan  *scan;

	if (SRF_IS_FIRSTCALL())
	{
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		MemoryContext old;
		TupleDesc	desc;

		funcctx = SRF_FIRSTCALL_INIT();
		/* STRICT but for label_type, whose value is only its type */
		for (int i = 0; i < 6; i++)
			if (PG_ARGISNULL(i))
				SRF_RETURN_DONE(funcctx);
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		funcctx->tuple_desc = BlessTupleDesc(desc);
		scan = begin_scan(fcinfo, funcctx->multi_call_memory_ctx, text_to_cstring(PG_GETARG_TEXT_PP(1)),
						  text_to_cstring(PG_GETARG_TEXT_PP(2)), text_to_cstring(PG_GETARG_TEXT_PP(3)),
						  text_to_cstring(PG_GETARG_TEXT_PP(4)), PG_GETARG_INT32(5),
						  get_fn_expr_argtype(fcinfo->flinfo, 6));
		scan->econtext = rsinfo->econtext;
		RegisterExprContextCallback(scan->econtext, close_source, PointerGetDatum(scan));
		funcctx->user_fctx = scan;
		MemoryContextSwitchTo(old);
	}
	funcctx = SRF_PERCALL_SETUP();
	scan = (BatchScan *) funcctx->user_fctx;
	if (has_row(scan))
	{
		Datum		values[3];
		bool		nulls[3];

		next_row(scan, values, nulls);
		SRF_RETURN_NEXT(funcctx, HeapTupleGetDatum(heap_form_tuple(funcctx->tuple_desc, values, nulls)));
	}
	/* the multi-call memory goes with SRF_RETURN_DONE, and the callback's argument with it */
	close_source(PointerGetDatum(scan));
	UnregisterExprContextCallback(scan->econtext, close_source, PointerGetDatum(scan));
	SRF_RETURN_DONE(funcctx);
}

/*
 * The C function of pgdl.predict_batch(model, regclass, ...) up to pgdl 0.3,
 * kept so that their install scripts load (ALTER EXTENSION ... UPDATE
 * replaces it): the whole result at once, materialized.
 */
PG_FUNCTION_INFO_V1(pgdl_predict_batch);
Datum
pgdl_predict_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext callcxt;
	MemoryContext old;
	BatchScan  *scan;

	InitMaterializedSRF(fcinfo, 0);
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl predict_batch", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);
	scan = begin_scan(fcinfo, callcxt, "regclass", psprintf("%u", PG_GETARG_OID(1)),
					  text_to_cstring(PG_GETARG_TEXT_PP(2)), text_to_cstring(PG_GETARG_TEXT_PP(3)),
					  PG_GETARG_INT32(4), TEXTOID);
	while (has_row(scan))
	{
		Datum		values[3];
		bool		nulls[3];

		next_row(scan, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(callcxt);	/* frees the model */
	return (Datum) 0;
}
