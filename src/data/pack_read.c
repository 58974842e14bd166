/*
 * pack_read.c -- the source read once, whole, into what pgdl.pack keeps: each
 * row's features as float32, in memory or, once they pass maintenance_work_mem,
 * in pack_spill.c's temporary files; its label; and, through pack_vocab.c, its
 * categorical and sequence values.
 *
 * The order read is what the shuffle permutes, so it must depend on the table
 * alone: one plain sequential scan, never parallel, never synchronized with
 * another session's.  Errors about the data name the column and the row
 * (1-based, counting every row of the source, skipped ones too).
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "data/pack.h"

#define PACK_FETCH_ROWS			1000	/* rows per SPI cursor fetch */
#define PACK_CHUNK_BYTES		(32 * 1024 * 1024)	/* feature storage grows by this much */

static float *target_slot(PackData *data);

static inline double
number_of(Datum d, PackNumKind kind)
{
	switch (kind)
	{
		case PACK_INT2:
			return DatumGetInt16(d);
		case PACK_INT4:
			return DatumGetInt32(d);
		case PACK_INT8:
			return (double) DatumGetInt64(d);
		case PACK_FLOAT4:
			return DatumGetFloat4(d);
		case PACK_FLOAT8:
			return DatumGetFloat8(d);
		case PACK_NUMERIC:
			return DatumGetFloat8(DirectFunctionCall1(numeric_float8, d));
		case PACK_BOOL:
			return DatumGetBool(d) ? 1.0 : 0.0;
		default:
			elog(ERROR, "pgdl.pack: unexpected value kind %d", (int) kind);
			return 0;
	}
}

/* The first row sets the number of features of an array column. */
static void
set_feature_count(PackData *data, int32 n, int32 buffer_rows, const PackReference *ref)
{
	Size		bytes;

	data->n_features = n;
	data->n_total = n + data->n_categorical;
	pgdl_pack_check_buffer_size(data->n_total, buffer_rows);

	if (ref->ds != NULL && ref->ds->n_numeric != n)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("source has %d features, but reference dataset \"%s\" has %d", n, ref->name,
						ref->ds->n_numeric),
				 errdetail("A dataset packed with a reference must have the reference's features.")));

	bytes = mul_size((Size) n, sizeof(float));
	data->chunk_rows = Max(1, PACK_CHUNK_BYTES / bytes);
	data->fmin = MemoryContextAlloc(data->cxt, sizeof(float) * n);
	data->fmax = MemoryContextAlloc(data->cxt, sizeof(float) * n);
	if (data->standardize || data->impute)
		data->sum = MemoryContextAllocZero(data->cxt, sizeof(double) * n);
	if (data->impute)
		data->n_missing = MemoryContextAllocZero(data->cxt, sizeof(int64) * n);
	for (int j = 0; j < n; j++)
	{
		data->fmin[j] = FLT_MAX;
		data->fmax[j] = -FLT_MAX;
	}
}

/* Room for the label of row data->n_rows: the label array of the label's kind, doubled when full. */
static void
grow_labels(PackData *data)
{
	int64		cap = data->label_cap == 0 ? 1024 : data->label_cap * 2;

	if (data->classification)
	{
		Size		esize = data->label.kind == PACK_TEXT ? sizeof(char *) : sizeof(int64);
		void	   *old = data->label.kind == PACK_TEXT ? (void *) data->label_text : (void *) data->label_int;
		void	   *grown = old == NULL
			? MemoryContextAllocHuge(data->cxt, mul_size((Size) cap, esize))
			: repalloc_huge(old, mul_size((Size) cap, esize));

		if (data->label.kind == PACK_TEXT)
			data->label_text = grown;
		else
			data->label_int = grown;
	}
	/* targets grow in store_targets: an array's length is known only at its first row */
	for (int c = 0; c < data->n_categorical; c++)
	{
		PackCategorical *cat = &data->cats[c];
		Size		bytes = mul_size((Size) cap, sizeof(int32));

		cat->row_index = cat->row_index == NULL ? MemoryContextAllocHuge(data->cxt, bytes)
			: repalloc_huge(cat->row_index, bytes);
	}
	for (int s = 0; s < data->n_sequences; s++)
	{
		PackSequence *seq = &data->seqs[s];
		Size		bytes = mul_size((Size) cap, sizeof(int64));

		seq->row_start = seq->row_start == NULL ? MemoryContextAllocHuge(data->cxt, bytes)
			: repalloc_huge(seq->row_start, bytes);
		bytes = mul_size((Size) cap, sizeof(int32));
		seq->row_count = seq->row_count == NULL ? MemoryContextAllocHuge(data->cxt, bytes)
			: repalloc_huge(seq->row_count, bytes);
	}
	data->label_cap = cap;
}

/*
 * The features read so far take more than the budget: they go to a spill,
 * and so will the rest; the chunks are freed.
 */
static void
start_spill(PackData *data)
{
	MemoryContext old = MemoryContextSwitchTo(data->cxt);	/* not the per-row context */

	ereport(DEBUG1,
			(errmsg("pgdl.pack spills its rows to temporary files"),
			 errdetail("The features of " INT64_FORMAT " rows take more than maintenance_work_mem (%zu kB).",
					   data->n_rows + 1, data->budget / 1024)));
	data->spill = pgdl_spill_begin(data->n_features);
	MemoryContextSwitchTo(old);
	for (int64 r = 0; r < data->n_rows; r++)
	{
		if ((r & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		pgdl_spill_write(data->spill, pgdl_pack_row_features(data, r));
	}
	for (int c = 0; c < data->n_chunks; c++)
		pfree(data->chunks[c]);
	if (data->chunks != NULL)
		pfree(data->chunks);
	data->chunks = NULL;
	data->n_chunks = data->max_chunks = 0;
	data->scratch = MemoryContextAlloc(data->cxt, mul_size((Size) data->n_features, sizeof(float)));
}

/*
 * Room for one more row: its features' slot in the chunks (or the scratch
 * row, once spilling), and its label's.  The row is kept once keep_row counts
 * it; until then the next row reuses the slot.
 */
static float *
new_row(PackData *data)
{
	int64		c = data->n_rows / data->chunk_rows;
	Size		row_bytes = mul_size((Size) data->n_features, sizeof(float));

	if (data->spill == NULL && mul_size((Size) data->n_rows + 1, row_bytes) > data->budget)
		start_spill(data);
	if (data->spill != NULL)
	{
		if (data->n_rows >= data->label_cap)
			grow_labels(data);
		return data->scratch;
	}
	if (c >= data->n_chunks)
	{
		/* chunk 0 starts small, so that a small source takes little memory */
		int64		rows = c == 0 ? Min(data->chunk_rows, 64) : data->chunk_rows;

		if (data->n_chunks == data->max_chunks)
		{
			data->max_chunks = data->max_chunks == 0 ? 16 : data->max_chunks * 2;
			data->chunks = data->chunks == NULL
				? MemoryContextAlloc(data->cxt, sizeof(float *) * data->max_chunks)
				: repalloc(data->chunks, sizeof(float *) * data->max_chunks);
		}
		data->chunks[data->n_chunks++] = MemoryContextAllocHuge(data->cxt, mul_size((Size) rows, row_bytes));
		if (c == 0)
			data->first_rows = rows;
	}
	else if (c == 0 && data->n_rows >= data->first_rows)
	{
		data->first_rows = Min(data->chunk_rows, 2 * data->first_rows);
		data->chunks[0] = repalloc_huge(data->chunks[0], mul_size((Size) data->first_rows, row_bytes));
	}
	if (data->n_rows >= data->label_cap)
		grow_labels(data);
	return pgdl_pack_row_features(data, data->n_rows);
}

static void
non_finite(const char *what, const char *column, int64 row, int element)
{
	if (element > 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s column \"%s\" has a NaN, infinite or out-of-range value in row " INT64_FORMAT ", element %d",
						what, column, row, element),
				 errdetail("Values must be finite and within the range of real (float4).")));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("%s column \"%s\" has a NaN, infinite or out-of-range value in row " INT64_FORMAT,
					what, column, row),
			 errdetail("Values must be finite and within the range of real (float4).")));
}

/*
 * A NULL where a value must be: an error naming the column and the row, or
 * false (skip the row) when nulls => 'skip'.
 */
static bool
null_value(bool skip, const char *what, const char *column, int64 row, int element)
{
	if (skip)
		return false;
	if (element > 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s column \"%s\" has a NULL element in row " INT64_FORMAT ", element %d",
						what, column, row, element),
				 errhint("Use nulls => 'skip' to leave out rows with NULL values.")));
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("%s column \"%s\" is NULL in row " INT64_FORMAT, what, column, row),
			 errhint("Use nulls => 'skip' to leave out rows with NULL values.")));
	return false;
}

/* A feature array's shape: one dimension, not empty, as many elements as the first row's. */
static void
check_feature_array(PackData *data, ArrayType *arr, int64 row, int32 buffer_rows, const PackReference *ref)
{
	const PackColumn *col = &data->cols[0];
	int			n;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("feature array \"%s\" has %d dimensions in row " INT64_FORMAT,
						col->name, ARR_NDIM(arr), row),
				 errdetail("Feature arrays must be one-dimensional; the layout of an image is the model's \"input\" shape."),
				 errhint("Flatten the array, for example with ARRAY(SELECT unnest(a)).")));
	n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("feature array \"%s\" is empty in row " INT64_FORMAT, col->name, row)));
	if (data->n_features < 0)
		set_feature_count(data, n, buffer_rows, ref);
	else if (n != data->n_features)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("expected %d features, found %d in row " INT64_FORMAT " of \"%s\"",
						data->n_features, n, row, col->name),
				 errdetail("Every row's feature array must have as many elements as the first %s.",
						   ref->ds != NULL ? "reference's rows" : "row's")));
}

/*
 * The features of one row, from an array column, into `out` (allocated when
 * the row count is known).  Returns false to skip the row.
 */
static bool
array_row(PackData *data, Datum d, int64 row, bool skip, int32 buffer_rows,
		  const PackReference *ref, float **out)
{
	const PackColumn *col = &data->cols[0];
	ArrayType  *arr = DatumGetArrayTypeP(d);
	float	   *x;

	check_feature_array(data, arr, row, buffer_rows, ref);
	if (!data->impute && array_contains_nulls(arr))
	{
		const bits8 *bitmap = ARR_NULLBITMAP(arr);

		for (int i = 0; i < data->n_features; i++)
			if ((bitmap[i / 8] & (1 << (i % 8))) == 0)
				return null_value(skip, "feature", col->name, row, i + 1);
	}

	x = new_row(data);
	pgdl_number_array_to_floats_nulls(arr, col->elem_base, data->n_features, x);
	for (int i = 0; i < data->n_features; i++)
		if (!isfinite(x[i]) && !(data->impute && isnan(x[i])))
			non_finite("feature", col->name, row, i + 1);
	*out = x;
	return true;
}

/*
 * Numeric columns cols[0 .. n) of one row into out, as floats: a NULL skips
 * the row (false) or is an error, a value that is not finite an error, each
 * naming `what` ("feature", "label") and the column; with `missing`, a NULL
 * or NaN is a missing value, NaN.
 */
static bool
numeric_columns(const PackColumn *cols, int n, const char *what, HeapTuple tuple, TupleDesc desc,
				int64 row, bool skip, bool missing, float *out)
{
	for (int i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(tuple, desc, cols[i].position, &isnull);

		if (isnull && missing)
		{
			out[i] = NAN;
			continue;
		}
		if (isnull)
			return null_value(skip, what, cols[i].name, row, 0);
		out[i] = (float) number_of(d, cols[i].kind);
		if (!isfinite(out[i]) && !(missing && isnan(out[i])))
			non_finite(what, cols[i].name, row, 0);
	}
	return true;
}

/* The features of one row, from a list of numeric columns.  false: skip. */
static bool
columns_row(PackData *data, HeapTuple tuple, TupleDesc desc, int64 row, bool skip, float **out)
{
	float	   *x;
	float		vals[MaxTupleAttributeNumber];

	if (!numeric_columns(data->cols, data->n_cols, "feature", tuple, desc, row, skip, data->impute, vals))
		return false;
	x = new_row(data);
	memcpy(x, vals, sizeof(float) * data->n_cols);
	*out = x;
	return true;
}

/* The label of the row in the last slot new_row gave. */
static void
store_label(PackData *data, Datum d, int64 row)
{
	switch (data->label.kind)
	{
		case PACK_INT2:
			data->label_int[data->n_rows] = DatumGetInt16(d);
			break;
		case PACK_INT4:
			data->label_int[data->n_rows] = DatumGetInt32(d);
			break;
		case PACK_INT8:
			data->label_int[data->n_rows] = DatumGetInt64(d);
			break;
		case PACK_TEXT:
			data->label_text[data->n_rows] = MemoryContextStrdup(data->cxt, TextDatumGetCString(d));
			break;
		default:
			{
				float		v = (float) number_of(d, data->label.kind);

				if (!isfinite(v))
					non_finite("label", data->label.name, row, 0);
				*target_slot(data) = v;
				break;
			}
	}
}

/* Room for the targets of row data->n_rows (n_targets floats each). */
static float *
target_slot(PackData *data)
{
	if (data->n_rows >= data->targets_cap)
	{
		int64		cap = Max(data->targets_cap * 2, Max(data->label_cap, 1024));
		Size		bytes = mul_size(mul_size((Size) cap, sizeof(float)), (Size) data->n_targets);

		data->label_float = data->label_float == NULL ? MemoryContextAllocHuge(data->cxt, bytes)
			: repalloc_huge(data->label_float, bytes);
		data->targets_cap = cap;
	}
	return data->label_float + data->n_rows * data->n_targets;
}

/*
 * Several targets (a list of columns, or an array column) into t.  false:
 * skip the row (a NULL, with nulls => 'skip').
 */
static bool
read_targets(PackData *data, HeapTuple tuple, TupleDesc desc, int64 row, bool skip, float *t)
{
	bool		isnull;
	Datum		d;
	ArrayType  *arr;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (!data->label_array)
		return numeric_columns(data->labels, data->n_label_cols, "label", tuple, desc, row, skip, false, t);
	d = SPI_getbinval(tuple, desc, data->label.position, &isnull);
	if (isnull)
		return null_value(skip, "label", data->label.name, row, 0);
	arr = DatumGetArrayTypeP(d);
	if (ARR_NDIM(arr) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("label array \"%s\" has %d dimensions in row " INT64_FORMAT ", not one",
						data->label.name, ARR_NDIM(arr), row)));
	get_typlenbyvalalign(ARR_ELEMTYPE(arr), &typlen, &typbyval, &typalign);
	deconstruct_array(arr, ARR_ELEMTYPE(arr), typlen, typbyval, typalign, &elems, &nulls, &n);
	if (n != data->n_targets)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("expected %d targets, found %d in row " INT64_FORMAT " of \"%s\"",
						data->n_targets, n, row, data->label.name),
				 errdetail("Every row's label array must have as many elements as the first row's.")));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			return null_value(skip, "label", data->label.name, row, i + 1);
		t[i] = (float) number_of(elems[i], data->label.kind);
		if (!isfinite(t[i]))
			non_finite("label", data->label.name, row, i + 1);
	}
	return true;
}

/* The first row's label array sets the number of targets. */
static void
set_target_count(PackData *data, HeapTuple tuple, TupleDesc desc, int64 row, const PackReference *ref)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, data->label.position, &isnull);
	ArrayType  *arr;
	int			n;

	if (isnull)
		return;
	arr = DatumGetArrayTypeP(d);
	n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("label array \"%s\" is empty in row " INT64_FORMAT, data->label.name, row)));
	if ((int64) n * PGDL_MAX_BUFFER_ROWS > (int64) MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("label array \"%s\" has too many targets: %d", data->label.name, n)));
	if (ref->ds != NULL && ref->ds->n_targets != n)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("source has %d targets, but reference dataset \"%s\" has %d",
						n, ref->name, ref->ds->n_targets)));
	data->n_targets = n;
}

/* The row in the last slot new_row gave is kept (its missing values counted, not summed). */
static void
keep_row(PackData *data, const float *x)
{
	for (int j = 0; j < data->n_features; j++)
	{
		if (data->impute && isnan(x[j]))
		{
			data->n_missing[j]++;
			continue;
		}
		if (x[j] < data->fmin[j])
			data->fmin[j] = x[j];
		if (x[j] > data->fmax[j])
			data->fmax[j] = x[j];
	}
	if (data->sum != NULL)
		for (int j = 0; j < data->n_features; j++)
			if (!isnan(x[j]))
				data->sum[j] += x[j];
	if (data->spill != NULL)
		pgdl_spill_write(data->spill, x);
	data->n_rows++;
}

/*
 * The weight of the row in the last slot new_row gave (weight => col): NULL
 * skips the row (false) or is an error; a value that is negative, NaN or
 * infinite is an error naming the row.
 */
static bool
read_weight(PackData *data, HeapTuple tuple, TupleDesc desc, int64 row, bool skip)
{
	float		w;

	if (!numeric_columns(&data->weight, 1, "weight", tuple, desc, row, skip, false, &w))
		return false;
	if (w < 0.0f)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("weight column \"%s\" is negative in row " INT64_FORMAT, data->weight.name, row),
				 errdetail("The row weighs %g; weights are finite numbers >= 0.", (double) w)));
	if (data->n_rows >= data->weights_cap)
	{
		int64		cap = Max(data->weights_cap * 2, 1024);
		Size		bytes = mul_size((Size) cap, sizeof(float));

		data->weights = data->weights == NULL ? MemoryContextAllocHuge(data->cxt, bytes)
			: repalloc_huge(data->weights, bytes);
		data->weights_cap = cap;
	}
	data->weights[data->n_rows] = w;
	return true;
}

void
pgdl_pack_check_weights(const PackData *data)
{
	if (data->weight.name != NULL && data->n_rows > 0 && !(data->weights_sum > 0.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("weight column \"%s\" is 0 in every row", data->weight.name),
				 errdetail("Training follows the weighted mean of the examples' losses, which rows weighing 0 in all leave undefined."),
				 errhint("Give some rows a positive weight, or leave weight out.")));
}

/* One row of the source: kept, or skipped for a NULL (nulls => 'skip'). */
static void
read_row(PackData *data, HeapTuple tuple, TupleDesc desc, bool skip, int32 buffer_rows,
		 const PackReference *ref)
{
	int64		row = ++data->n_read;
	float	   *x = NULL;
	bool		isnull;
	bool		kept;
	Datum		d = (Datum) 0;
	bool		several = data->label_array || data->n_label_cols > 1;

	if (data->label_array && data->n_targets < 0)
		set_target_count(data, tuple, desc, row, ref);
	if (data->array_mode)
	{
		d = SPI_getbinval(tuple, desc, 1, &isnull);
		kept = isnull ? null_value(skip, "feature", data->cols[0].name, row, 0)
			: array_row(data, d, row, skip, buffer_rows, ref, &x);
	}
	else
		kept = columns_row(data, tuple, desc, row, skip, &x);

	if (kept && several)
		kept = data->n_targets > 0
			? read_targets(data, tuple, desc, row, skip, target_slot(data))
			: null_value(skip, "label", data->label.name, row, 0);	/* NULL arrays so far */
	else if (kept)
	{
		d = SPI_getbinval(tuple, desc, data->label.position, &isnull);
		if (isnull)
			kept = null_value(skip, "label", data->label.name, row, 0);
	}
	if (kept && data->weight.name != NULL)
		kept = read_weight(data, tuple, desc, row, skip);
	if (kept)
	{
		if (data->weight.name != NULL)
			data->weights_sum += data->weights[data->n_rows];
		if (!several)
			store_label(data, d, row);
		pgdl_pack_store_categorical(data, tuple, desc);
		pgdl_pack_store_sequences(data, tuple, desc, row);
		keep_row(data, x);
	}
	else
		data->n_skipped++;
}

/*
 * A cursor over the feature and label columns of the whole source, in the
 * order of a plain sequential scan.
 */
static Portal
open_source(const PackData *data, SPIPlanPtr *plan)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < data->n_cols; i++)
		appendStringInfo(&sql, "%s, ", quote_identifier(data->cols[i].name));
	for (int c = 0; c < data->n_categorical; c++)
		appendStringInfo(&sql, "%s, ", quote_identifier(data->cats[c].col.name));
	for (int c = 0; c < data->n_sequences; c++)
		appendStringInfo(&sql, "%s, ", quote_identifier(data->seqs[c].cat.col.name));
	for (int i = 0; i < data->n_label_cols; i++)
		appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "", quote_identifier(data->labels[i].name));
	if (data->weight.name != NULL)
		appendStringInfo(&sql, ", %s", quote_identifier(data->weight.name));
	appendStringInfo(&sql, " FROM %s", data->source_sql);

	/*
	 * The plan is prepared without CURSOR_OPT_PARALLEL_OK, so it is never a
	 * parallel scan, whose order would depend on timing.
	 */
	*plan = SPI_prepare_cursor(sql.data, 0, NULL, 0);
	if (*plan == NULL)
		elog(ERROR, "pgdl.pack: SPI_prepare_cursor failed: %s", SPI_result_code_string(SPI_result));
	return SPI_cursor_open(NULL, *plan, NULL, NULL, true);
}

/* The planner's count of a table's rows, for pgdl.progress; -1 when it has none. */
static int64
rows_estimate(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	float4		reltuples = -1;

	if (HeapTupleIsValid(tuple))
	{
		reltuples = ((Form_pg_class) GETSTRUCT(tuple))->reltuples;
		ReleaseSysCache(tuple);
	}
	return reltuples > 0 ? (int64) reltuples : -1;
}

/*
 * The share of pgdl.pack done when `read` of `expected` rows are read: reading
 * and writing count half each (writing a buffer of rows takes about as long as
 * reading them, on the reference data).
 */
static double
read_share(int64 read, int64 expected)
{
	return expected > 0 ? 0.5 * Min((double) read / expected, 1.0) : 0;
}

/*
 * Reads the whole source into `data` (allocated in data->cxt).  Errors name
 * the column and the row (1-based, counting every row of the source).
 */
void
pgdl_pack_read_source(PackData *data, bool skip, int32 buffer_rows, const PackReference *ref, Oid source)
{
	SPIPlanPtr	plan;
	Portal		portal;
	MemoryContext rowcxt;
	int			guc_level;
	int64		expected = rows_estimate(source);

	pgdl_call_progress_phase(PGDL_PHASE_READING, 0, expected, true);

	/*
	 * The order rows are read in must not depend on other sessions: no
	 * synchronized scan that starts where another scan is.
	 */
	guc_level = NewGUCNestLevel();
	(void) set_config_option("synchronize_seqscans", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	portal = open_source(data, &plan);

	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl pack rows", ALLOCSET_DEFAULT_SIZES);
	if (!data->array_mode)
		set_feature_count(data, data->n_cols, buffer_rows, ref);
	for (;;)
	{
		SPITupleTable *tt;

		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, PACK_FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		tt = SPI_tuptable;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			/* detoasted values live in rowcxt, what is kept in data->cxt */
			MemoryContext old = MemoryContextSwitchTo(rowcxt);

			CHECK_FOR_INTERRUPTS();
			read_row(data, tt->vals[r], tt->tupdesc, skip, buffer_rows, ref);
			MemoryContextSwitchTo(old);
			MemoryContextReset(rowcxt);
		}
		SPI_freetuptable(tt);
		pgdl_call_progress_update(data->n_read, data->n_read, read_share(data->n_read, expected));
	}
	SPI_cursor_close(portal);
	SPI_freeplan(plan);
	MemoryContextDelete(rowcxt);
	AtEOXact_GUC(true, guc_level);
}

/* What was read: a NOTICE of the rows skipped, an error when none is left. */
void
pgdl_pack_report_rows(const PackData *data)
{
	if (data->n_skipped > 0)
		ereport(NOTICE,
				(errmsg("pgdl.pack skipped " INT64_FORMAT " of " INT64_FORMAT " rows that had NULL values",
						data->n_skipped, data->n_read)));
	if (data->n_rows == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA),
				 data->n_read == 0
				 ? errmsg("source \"%s\" has no rows", data->relname)
				 : errmsg("every row of source \"%s\" has a NULL value", data->relname),
				 errdetail("There is nothing to pack.")));
}
