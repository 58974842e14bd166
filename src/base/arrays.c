/*
 * arrays.c -- real[] in and out of SQL functions: the one place that reads and
 * builds float4 arrays, and reads arrays of other number types as floats.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "base/base.h"

float *
pgdl_float4_array(ArrayType *array, const char *what, int64 *length)
{
	if (ARR_ELEMTYPE(array) != FLOAT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s must be a real[] array", what)));
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what),
				 errdetail("It has %d dimensions.", ARR_NDIM(array))));
	if (ARR_HASNULL(array) && array_contains_nulls(array))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain NULL values", what)));
	*length = ARR_NDIM(array) == 0 ? 0 : ARR_DIMS(array)[0];
	return (float *) ARR_DATA_PTR(array);
}

ArrayType *
pgdl_float4_array_new(int64 n)
{
	Size		total;
	ArrayType  *a;

	if (n == 0)
		return construct_empty_array(FLOAT4OID);
	if (n < 0 || n > MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("array of " INT64_FORMAT " values is too large", n)));
	total = add_size(ARR_OVERHEAD_NONULLS(1), mul_size((Size) n, sizeof(float)));
	if (!AllocSizeIsValid(total))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("array of " INT64_FORMAT " values is too large", n),
				 errdetail("An array holds at most 1 GB.")));
	a = palloc0(total);
	SET_VARSIZE(a, total);
	a->ndim = 1;
	a->dataoffset = 0;
	a->elemtype = FLOAT4OID;
	ARR_DIMS(a)[0] = (int) n;
	ARR_LBOUND(a)[0] = 1;
	return a;
}

ArrayType *
pgdl_float4_array_from(const float *v, int64 n)
{
	ArrayType  *a = pgdl_float4_array_new(n);

	if (n > 0)
		memcpy(ARR_DATA_PTR(a), v, (Size) n * sizeof(float));
	return a;
}

/*
 * The first n elements of a NULL-free array of smallint, integer, bigint,
 * real, double precision or numeric (or domains over them: elem_base is the
 * element's base type) as floats into x: feature arrays as pgdl.pack and
 * pgdl.predict_batch read them.
 */
void
pgdl_number_array_to_floats(ArrayType *arr, Oid elem_base, int n, float *x)
{
	const char *data = ARR_DATA_PTR(arr);

	switch (elem_base)
	{
		case FLOAT4OID:
			memcpy(x, data, sizeof(float) * n);
			break;
		case FLOAT8OID:
			for (int i = 0; i < n; i++)
				x[i] = (float) ((const double *) data)[i];
			break;
		case INT2OID:
			for (int i = 0; i < n; i++)
				x[i] = (float) ((const int16 *) data)[i];
			break;
		case INT4OID:
			for (int i = 0; i < n; i++)
				x[i] = (float) ((const int32 *) data)[i];
			break;
		case INT8OID:
			for (int i = 0; i < n; i++)
				x[i] = (float) ((const int64 *) data)[i];
			break;
		case NUMERICOID:
			{
				Datum	   *elems;
				int			count;

				deconstruct_array(arr, ARR_ELEMTYPE(arr), -1, false, TYPALIGN_INT, &elems, NULL, &count);
				for (int i = 0; i < n && i < count; i++)
					x[i] = (float) DatumGetFloat8(DirectFunctionCall1(numeric_float8, elems[i]));
				break;
			}
		default:
			elog(ERROR, "pgdl: an array of type %u is not an array of numbers", elem_base);
	}
}

/*
 * As pgdl_number_array_to_floats, for an array that may hold NULLs: each NULL
 * element is NaN (a missing value, for datasets that impute them).
 */
void
pgdl_number_array_to_floats_nulls(ArrayType *arr, Oid elem_base, int n, float *x)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			count;

	if (!ARR_HASNULL(arr))
	{
		pgdl_number_array_to_floats(arr, elem_base, n, x);
		return;
	}
	get_typlenbyvalalign(ARR_ELEMTYPE(arr), &typlen, &typbyval, &typalign);
	deconstruct_array(arr, ARR_ELEMTYPE(arr), typlen, typbyval, typalign, &elems, &nulls, &count);
	for (int i = 0; i < n && i < count; i++)
	{
		if (nulls[i])
			x[i] = NAN;
		else if (elem_base == FLOAT4OID)
			x[i] = DatumGetFloat4(elems[i]);
		else if (elem_base == FLOAT8OID)
			x[i] = (float) DatumGetFloat8(elems[i]);
		else if (elem_base == INT2OID)
			x[i] = (float) DatumGetInt16(elems[i]);
		else if (elem_base == INT4OID)
			x[i] = (float) DatumGetInt32(elems[i]);
		else if (elem_base == INT8OID)
			x[i] = (float) DatumGetInt64(elems[i]);
		else if (elem_base == NUMERICOID)
			x[i] = (float) DatumGetFloat8(DirectFunctionCall1(numeric_float8, elems[i]));
		else
			elog(ERROR, "pgdl: an array of type %u is not an array of numbers", elem_base);
	}
	pfree(elems);
	pfree(nulls);
}

/*
 * v as a real; a finite v beyond real's range (about 3.4e38) is an error
 * naming `what` and element j (0-based), as PostgreSQL's own cast to real is.
 * NaN and infinity pass: the caller's finiteness check words that error.
 */
static float
real_in_range(double v, const char *what, int64 j)
{
	float		f = (float) v;

	if (isinf(f) && !isinf(v))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s is out of range for type real in element " INT64_FORMAT, what, j + 1),
				 errdetail("The value is %g; features are real numbers, within about 3.4e38 of zero.", v)));
	return f;
}

/*
 * As pgdl_number_array_to_floats, but a double precision or numeric value
 * beyond real's range is an error naming `what` rather than an infinity.
 */
void
pgdl_number_array_to_floats_checked(ArrayType *arr, Oid elem_base, int64 n, float *x, const char *what)
{
	if (elem_base == FLOAT8OID)
	{
		const double *data = (const double *) ARR_DATA_PTR(arr);

		for (int64 j = 0; j < n; j++)
			x[j] = real_in_range(data[j], what, j);
	}
	else if (elem_base == NUMERICOID)
	{
		Datum	   *elems;
		int			count;

		deconstruct_array(arr, ARR_ELEMTYPE(arr), -1, false, TYPALIGN_INT, &elems, NULL, &count);
		for (int64 j = 0; j < n && j < count; j++)
		{
			double		v = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, elems[j]));

			if (isinf(v) && !numeric_is_inf(DatumGetNumeric(elems[j])))
				v = v > 0 ? DBL_MAX : -DBL_MAX; /* beyond double's range, so beyond real's */
			x[j] = real_in_range(v, what, j);
		}
		pfree(elems);
	}
	else
		pgdl_number_array_to_floats(arr, elem_base, (int) n, x);
}

/*
 * The features argument of pgdl.predict and pgdl.predict_class: a 1-d,
 * NULL-free array of smallint, integer, bigint, real, double precision or
 * numeric, as floats (real[] read in place, the others converted by
 * pgdl_number_array_to_floats_checked), or an error naming `what`.
 */
static void
check_number_elements(Oid elem, const char *what)
{
	if (elem != FLOAT4OID && elem != FLOAT8OID && elem != INT2OID && elem != INT4OID &&
		elem != INT8OID && elem != NUMERICOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s must be an array of numbers", what),
				 errdetail("It is of type %s[].", format_type_be(elem))));
}

const float *
pgdl_number_array(ArrayType *array, const char *what, int64 *length)
{
	Oid			elem = ARR_ELEMTYPE(array);
	float	   *x;

	check_number_elements(elem, what);
	if (elem == FLOAT4OID)
		return pgdl_float4_array(array, what, length);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what),
				 errdetail("It has %d dimensions.", ARR_NDIM(array))));
	if (ARR_HASNULL(array) && array_contains_nulls(array))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain NULL values", what)));
	*length = ARR_NDIM(array) == 0 ? 0 : ARR_DIMS(array)[0];
	x = palloc(sizeof(float) * Max(*length, 1));
	pgdl_number_array_to_floats_checked(array, elem, *length, x, what);
	return x;
}

/*
 * As pgdl_number_array, but a NULL element is NaN (a missing value) and
 * *has_nulls says whether there was one; the caller decides whether the
 * model's dataset imputes it.
 */
const float *
pgdl_number_array_missing(ArrayType *array, const char *what, int64 *length, bool *has_nulls)
{
	float	   *x;

	*has_nulls = ARR_HASNULL(array) && array_contains_nulls(array);
	if (!*has_nulls)
		return pgdl_number_array(array, what, length);
	check_number_elements(ARR_ELEMTYPE(array), what);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what),
				 errdetail("It has %d dimensions.", ARR_NDIM(array))));
	*length = ARR_DIMS(array)[0];
	x = palloc(sizeof(float) * Max(*length, 1));
	pgdl_number_array_to_floats_nulls(array, ARR_ELEMTYPE(array), (int) *length, x);
	return x;
}
