/*
 * datasets.c -- what a packed table's rows mean: its pgdl.datasets row (task,
 * shape, classes, normalization), read and checked, the normalization
 * applied to features at prediction time, and whether two datasets are
 * preprocessed alike (what a model trained on one may be validated, evaluated
 * or trained further on).
 *
 * pgdl.pack writes these rows; everything else reads them through
 * pgdl_dataset_read.  The catalog is ordinary data that its owners (and
 * superusers) may change, so the reader trusts nothing in a row: a value that
 * pgdl.pack could not have written is an ERRCODE_DATA_CORRUPTED error that
 * names the column, never a crash or a model fed wrong numbers.
 *
 * The cache of datasets (pgdl_dataset_by_id, _by_packed) lives in
 * model_io.c with the cache of models, which it shares an invalidation with.
 */
#include "postgres.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"

/*
 * The columns read, in this order (1-based, as SPI counts them).  categorical
 * (0.6.0), target_normalization, weighted and imputation (0.7.0) through
 * to_jsonb: a catalog not yet updated has no such column.
 */
#define DATASET_COLUMNS \
	"SELECT id, packed::pg_catalog.oid AS packed, task, n_features, n_targets, classes," \
	" label_type::pg_catalog.oid AS label_type, normalization, partitions, n_rows," \
	" NULLIF(pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->) 'categorical', 'null'::pg_catalog.jsonb) AS categorical," \
	" NULLIF(pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->) 'target_normalization', 'null'::pg_catalog.jsonb)" \
	" AS target_normalization," \
	" pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->) 'weighted' AS weighted," \
	" NULLIF(pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->) 'imputation', 'null'::pg_catalog.jsonb) AS imputation" \
	" FROM pgdl.datasets d"

enum
{
	COL_ID = 1,
	COL_PACKED,
	COL_TASK,
	COL_N_FEATURES,
	COL_N_TARGETS,
	COL_CLASSES,
	COL_LABEL_TYPE,
	COL_NORMALIZATION,
	COL_PARTITIONS,
	COL_N_ROWS,
	COL_CATEGORICAL,
	COL_TARGET_NORMALIZATION,
	COL_WEIGHTED,
	COL_IMPUTATION
};

/* One row, as SPI returned it, and the id that names it in errors. */
typedef struct DatasetRow
{
	HeapTuple	tuple;
	TupleDesc	desc;
	int64		id;
} DatasetRow;

static void corrupted(int64 id, const char *column, const char *fmt,...)
			pg_attribute_printf(3, 4) pg_attribute_noreturn();

/* A value of the row that pgdl.pack could not have written: `fmt` says what it must be. */
static void
corrupted(int64 id, const char *column, const char *fmt,...)
{
	StringInfoData what;
	va_list		args;

	initStringInfo(&what);
	for (;;)
	{
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&what, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&what, needed);
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("dataset " INT64_FORMAT " in pgdl.datasets is corrupted", id),
			 errdetail("Column \"%s\" %s.", column, what.data),
			 errhint("Pack the source again with pgdl.pack().")));
}

static Datum
get_column(const DatasetRow *row, int col, bool *isnull)
{
	return SPI_getbinval(row->tuple, row->desc, col, isnull);
}

/* A column that must not be NULL. */
static Datum
required_column(const DatasetRow *row, int col)
{
	bool		isnull;
	Datum		d = get_column(row, col, &isnull);

	if (isnull)
		corrupted(row->id, SPI_fname(row->desc, col), "is NULL");
	return d;
}

static int32
int32_column(const DatasetRow *row, int col, int32 min, int32 max)
{
	int32		v = DatumGetInt32(required_column(row, col));

	if (v < min || v > max)
		corrupted(row->id, SPI_fname(row->desc, col), "is %d, not between %d and %d", v, min, max);
	return v;
}

/* Byte order: a class value's equality does not depend on the collation. */
static int
compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The classes of a classification dataset: a 1-d text[] of distinct, non-NULL values. */
static void
read_classes(const DatasetRow *row, PgdlDataset *ds)
{
	bool		isnull;
	Datum		d = get_column(row, COL_CLASSES, &isnull);
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	char	  **sorted;
	int			n;

	if (isnull)
		corrupted(row->id, "classes", "is NULL, but a classification dataset has classes");
	arr = DatumGetArrayTypeP(d);
	if (ARR_NDIM(arr) != 1 || ARR_ELEMTYPE(arr) != TEXTOID)
		corrupted(row->id, "classes", "must be a one-dimensional text[] array with at least one class");
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n > NN_MAX_CLASSES)
		corrupted(row->id, "classes", "has %d classes, more than %d", n, NN_MAX_CLASSES);
	ds->n_classes = n;
	ds->classes = palloc(sizeof(char *) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			corrupted(row->id, "classes", "has a NULL class (element %d)", i + 1);
		ds->classes[i] = TextDatumGetCString(elems[i]);
	}

	/* a label value must name one class: pgdl.pack maps values to classes by bsearch */
	sorted = palloc(sizeof(char *) * n);
	memcpy(sorted, ds->classes, sizeof(char *) * n);
	qsort(sorted, n, sizeof(char *), compare_strings);
	for (int i = 1; i < n; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0)
			corrupted(row->id, "classes", "has the class \"%s\" twice", sorted[i]);
	pfree(sorted);
	pfree(elems);
	pfree(nulls);
	if ((Pointer) arr != DatumGetPointer(d))
		pfree(arr);				/* a detoasted copy */
}

/*
 * A JSON number's text, or NULL when v is not a finite number.  pgdl.pack
 * stored the shortest text of each value, so strtof (as float4in does, not
 * rounding through a double) and strtod give back the very values it used.
 */
static char *
json_number_text(const JsonbValue *v)
{
	if (v == NULL || v->type != jbvNumeric || numeric_is_nan(v->val.numeric) ||
		numeric_is_inf(v->val.numeric))
		return NULL;
	return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
}

/* column's "mean" or "std": an array of n finite numbers (positive for std). */
static float *
read_float_array(const DatasetRow *row, const char *column, const JsonbValue *v, const char *key, int32 n,
				 bool positive)
{
	const char *must = positive ? "finite numbers greater than zero" : "finite numbers";
	JsonbContainer *arr;
	float	   *out;

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data) ||
		JsonContainerSize(v->val.binary.data) != (uint32) n)
		corrupted(row->id, column, "has an invalid \"%s\": it must be an array of %d %s",
				  key, n, must);
	arr = v->val.binary.data;
	out = palloc(sizeof(float) * n);
	for (int32 i = 0; i < n; i++)
	{
		char	   *text = json_number_text(getIthJsonbValueFromContainer(arr, i));

		out[i] = text ? strtof(text, NULL) : NAN;
		if (text)
			pfree(text);		/* the dataset may live in the cache: keep only what it needs */
		if (!isfinite(out[i]) || (positive && !(out[i] > 0.0f)))
			corrupted(row->id, column, "has an invalid \"%s\" (element %d): it must be an array of %d %s",
					  key, i + 1, n, must);
		CHECK_FOR_INTERRUPTS();
	}
	return out;
}

/* The keys of a scaling's center and divisor in normalization, by PgdlScaling (SCALE has none). */
static const char *const scaling_keys[][2] = {{NULL, NULL}, {"mean", "std"}, {"min", "range"}, {"median", "iqr"}};

/*
 * {"scale": s}: features times s (finite and not zero, as a double and as a
 * float), or (x - center) / divisor per feature, center and divisor as one of
 * scaling_keys' pairs: {"mean", "std"}, {"min", "range"}, {"median", "iqr"}.
 */
static void
read_normalization(const DatasetRow *row, PgdlDataset *ds)
{
	Jsonb	   *norm = DatumGetJsonbPCopy(required_column(row, COL_NORMALIZATION));
	JsonbValue *scale;
	JsonbValue *mean = NULL;
	JsonbValue *std = NULL;

	if (JB_ROOT_IS_SCALAR(norm) || !JB_ROOT_IS_OBJECT(norm))
		corrupted(row->id, "normalization", "is not a JSON object");
	ds->normalization = norm;
	scale = pgdl_jsonb_key(&norm->root, "scale");
	ds->scaling = PGDL_SCALING_SCALE;
	for (int k = PGDL_SCALING_STANDARD; k <= PGDL_SCALING_ROBUST && mean == NULL && std == NULL; k++)
	{
		mean = pgdl_jsonb_key(&norm->root, scaling_keys[k][0]);
		std = pgdl_jsonb_key(&norm->root, scaling_keys[k][1]);
		if (mean != NULL || std != NULL)
			ds->scaling = (PgdlScaling) k;
	}
	if (scale != NULL && mean == NULL && std == NULL)
	{
		char	   *text = json_number_text(scale);
		double		s = text ? strtod(text, NULL) : NAN;

		if (!isfinite(s) || s == 0 || !isfinite((float) s) || (float) s == 0)
			corrupted(row->id, "normalization", "has an invalid \"scale\": it must be a finite number other than zero");
		ds->scale = (float) s;
		return;
	}
	if (scale != NULL || mean == NULL || std == NULL)
		corrupted(row->id, "normalization", "must have either \"scale\", or \"mean\" and \"std\", "
				  "or \"min\" and \"range\", or \"median\" and \"iqr\"");
	ds->scale = 1.0f;
	ds->mean = read_float_array(row, "normalization", mean, scaling_keys[ds->scaling][0], ds->n_numeric, false);
	ds->std = read_float_array(row, "normalization", std, scaling_keys[ds->scaling][1], ds->n_numeric, true);
}

/*
 * NULL (targets as they are), or {"mean": [...], "std": [...]}: a regression
 * dataset's targets packed as (target - mean) / std, n_targets of each.
 */
static void
read_target_normalization(const DatasetRow *row, PgdlDataset *ds)
{
	bool		isnull;
	Datum		d = get_column(row, COL_TARGET_NORMALIZATION, &isnull);
	Jsonb	   *norm;

	if (isnull)
		return;
	norm = DatumGetJsonbPCopy(d);
	if (ds->classification)
		corrupted(row->id, "target_normalization", "is not NULL, but a classification dataset's classes are not scaled");
	if (JB_ROOT_IS_SCALAR(norm) || !JB_ROOT_IS_OBJECT(norm) || JsonContainerSize(&norm->root) != 2)
		corrupted(row->id, "target_normalization", "must be a JSON object with \"mean\" and \"std\" only");
	ds->target_normalization = norm;
	ds->target_mean = read_float_array(row, "target_normalization", pgdl_jsonb_key(&norm->root, "mean"), "mean",
									   ds->n_targets, false);
	ds->target_std = read_float_array(row, "target_normalization", pgdl_jsonb_key(&norm->root, "std"), "std",
									  ds->n_targets, true);
}

/* An integer's text as pgdl.pack writes it (no sign but '-', no leading zeros), or false. */
static bool
parse_integer(const char *text, int64 *out)
{
	char	   *end;
	long long	v;

	if (text == NULL || *text == '\0' || isspace((unsigned char) *text))
		return false;
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = (int64) v;
	return true;
}

int
pgdl_category_compare(bool is_integer, const char *a, const char *b)
{
	if (is_integer)
	{
		int64		x = 0;
		int64		y = 0;

		(void) parse_integer(a, &x);
		(void) parse_integer(b, &y);
		return x < y ? -1 : x > y ? 1 : 0;
	}
	return strcmp(a, b);
}

/* A JSON string's text (palloc'd), or NULL when v is not a string. */
static char *
json_string(const JsonbValue *v)
{
	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/*
 * A sequence column's "length", "padding" and "unseen": L between 1 and
 * PGDL_MAX_SEQUENCE_LENGTH, and the two ids pgdl.pack reserves.
 */
static void
read_sequence_keys(const DatasetRow *row, JsonbContainer *col, int c, PgdlVocabulary *v)
{
	char	   *length = json_number_text(pgdl_jsonb_key(col, "length"));
	char	   *padding = json_number_text(pgdl_jsonb_key(col, "padding"));
	char	   *unseen = json_number_text(pgdl_jsonb_key(col, "unseen"));
	int64		l = 0;
	int64		p = -1;
	int64		u = -1;

	if (length == NULL || !parse_integer(length, &l) || l < 1 || l > PGDL_MAX_SEQUENCE_LENGTH ||
		padding == NULL || !parse_integer(padding, &p) || p != PGDL_SEQUENCE_PADDING ||
		unseen == NULL || !parse_integer(unseen, &u) || u != PGDL_SEQUENCE_UNSEEN)
		corrupted(row->id, "categorical", "has an invalid sequence column in element %d: its \"length\" must be "
				  "an integer between 1 and %d, its \"padding\" %d and its \"unseen\" %d",
				  c + 1, PGDL_MAX_SEQUENCE_LENGTH, PGDL_SEQUENCE_PADDING, PGDL_SEQUENCE_UNSEEN);
	v->length = (int32) l;
}

/*
 * A categorical column's "one_hot": absent, or true with 1 to
 * PGDL_MAX_ONE_HOT values (checked once they are read); a sequence has none.
 */
static void
read_one_hot(const DatasetRow *row, JsonbContainer *col, int c, PgdlVocabulary *v)
{
	JsonbValue *one_hot = pgdl_jsonb_key(col, "one_hot");

	if (one_hot == NULL)
		return;
	if (one_hot->type != jbvBool || !one_hot->val.boolean || v->length > 0)
		corrupted(row->id, "categorical", "has an invalid \"one_hot\" in element %d: it must be true, "
				  "and only in a categorical column", c + 1);
	v->one_hot = true;
}

/* Element c of categorical: one column's vocabulary, checked. */
static void
read_vocabulary(const DatasetRow *row, JsonbValue *col, int c, PgdlVocabulary *v)
{
	JsonbValue *values;
	char	   *type;

	if (col == NULL || col->type != jbvBinary || !JsonContainerIsObject(col->val.binary.data))
		corrupted(row->id, "categorical", "has an element (%d) that is not a JSON object", c + 1);
	v->column = json_string(pgdl_jsonb_key(col->val.binary.data, "column"));
	type = json_string(pgdl_jsonb_key(col->val.binary.data, "type"));
	values = pgdl_jsonb_key(col->val.binary.data, "values");
	if (v->column == NULL || type == NULL ||
		(strcmp(type, "integer") != 0 && strcmp(type, "text") != 0) ||
		values == NULL || values->type != jbvBinary || !JsonContainerIsArray(values->val.binary.data))
		corrupted(row->id, "categorical", "has an invalid element %d: it must have a \"column\" string, "
				  "a \"type\" of \"integer\" or \"text\" and a \"values\" array", c + 1);
	v->is_integer = strcmp(type, "integer") == 0;
	if (pgdl_jsonb_key(col->val.binary.data, "length") != NULL)
		read_sequence_keys(row, col->val.binary.data, c, v);
	read_one_hot(row, col->val.binary.data, c, v);
	if (JsonContainerSize(values->val.binary.data) > PGDL_MAX_CATEGORIES)
		corrupted(row->id, "categorical", "has more than %d values in element %d", PGDL_MAX_CATEGORIES, c + 1);
	if (v->one_hot && (JsonContainerSize(values->val.binary.data) < 1 ||
					   JsonContainerSize(values->val.binary.data) > PGDL_MAX_ONE_HOT))
		corrupted(row->id, "categorical", "has a one-hot column (element %d) without 1 to %d values",
				  c + 1, PGDL_MAX_ONE_HOT);
	v->n_values = (int32) JsonContainerSize(values->val.binary.data);
	v->values = palloc(sizeof(char *) * Max(v->n_values, 1));
	if (v->is_integer)
		v->integers = palloc(sizeof(int64) * Max(v->n_values, 1));
	for (int32 i = 0; i < v->n_values; i++)
	{
		v->values[i] = json_string(getIthJsonbValueFromContainer(values->val.binary.data, i));
		if (v->values[i] == NULL || (v->is_integer && !parse_integer(v->values[i], &v->integers[i])))
			corrupted(row->id, "categorical", "has an invalid value %d in element %d: it must be %s",
					  i + 1, c + 1, v->is_integer ? "an integer as a string" : "a string");
		if (i > 0 && pgdl_category_compare(v->is_integer, v->values[i - 1], v->values[i]) >= 0)
			corrupted(row->id, "categorical", "has values out of order or twice in element %d (value %d)",
					  c + 1, i + 1);
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
}

int32
pgdl_vocabulary_width(const PgdlVocabulary *v)
{
	return v->length > 0 ? v->length + 1 : v->one_hot ? v->n_values : 1;
}

/*
 * categorical: NULL, or [{"column": c, "type": "integer" | "text", "values":
 * [v1, ...]}, ...], values as strings, distinct and sorted (numerically for
 * integers, by bytes for text), since ids are found by binary search.  The
 * sequence columns, after the categorical ones, also have "length",
 * "padding" and "unseen".  At least one numeric feature comes before them.
 */
static void
read_categorical(const DatasetRow *row, PgdlDataset *ds)
{
	bool		isnull;
	Datum		d = get_column(row, COL_CATEGORICAL, &isnull);
	Jsonb	   *jb;
	int			n;
	int64		width = 0;

	ds->n_numeric = ds->n_features;
	ds->n_raw = ds->n_features;
	if (isnull)
		return;
	jb = DatumGetJsonbPCopy(d);
	if (JB_ROOT_IS_SCALAR(jb) || !JB_ROOT_IS_ARRAY(jb))
		corrupted(row->id, "categorical", "is not a JSON array");
	n = (int) JsonContainerSize(&jb->root);
	if (n < 1 || n >= ds->n_features)
		corrupted(row->id, "categorical", "has %d columns, not between 1 and %d (n_features less one)",
				  n, ds->n_features - 1);
	ds->categorical = jb;
	ds->vocabulary = palloc0(sizeof(PgdlVocabulary) * n);
	for (int c = 0; c < n; c++)
	{
		PgdlVocabulary *v = &ds->vocabulary[c];

		read_vocabulary(row, getIthJsonbValueFromContainer(&jb->root, c), c, v);
		if (v->length == 0 && ds->n_sequences > 0)
			corrupted(row->id, "categorical", "has a categorical column (element %d) after a sequence column", c + 1);
		if (v->length > 0)
			ds->n_sequences++;
		else
			ds->n_categorical++;
		width += pgdl_vocabulary_width(v);
		ds->n_raw -= pgdl_vocabulary_width(v) - (v->length > 0 ? v->length + 1 : 1);
	}
	if (width >= ds->n_features)
		corrupted(row->id, "categorical", "takes " INT64_FORMAT " features of the example, but n_features is %d "
				  "(one at least is numeric)", width, ds->n_features);
	ds->n_numeric = ds->n_features - (int32) width;
}

/*
 * imputation: NULL, or {"strategy": "mean" | "median" | "constant", "values":
 * [a finite number per numeric feature], "indicators": [1-based numeric
 * features, ascending]}; each indicator is a feature after the numeric ones,
 * so n_numeric and n_raw lose them.
 */
static void
read_imputation(const DatasetRow *row, PgdlDataset *ds)
{
	bool		isnull;
	Datum		d = get_column(row, COL_IMPUTATION, &isnull);
	Jsonb	   *jb;
	char	   *strategy;
	JsonbValue *ind;
	int32		n;

	if (isnull)
		return;
	jb = DatumGetJsonbPCopy(d);
	if (JB_ROOT_IS_SCALAR(jb) || !JB_ROOT_IS_OBJECT(jb))
		corrupted(row->id, "imputation", "is not a JSON object");
	strategy = json_string(pgdl_jsonb_key(&jb->root, "strategy"));
	ind = pgdl_jsonb_key(&jb->root, "indicators");
	if (strategy == NULL || (strcmp(strategy, "mean") != 0 && strcmp(strategy, "median") != 0 &&
							 strcmp(strategy, "constant") != 0) ||
		ind == NULL || ind->type != jbvBinary || !JsonContainerIsArray(ind->val.binary.data))
		corrupted(row->id, "imputation", "must have a \"strategy\" of \"mean\", \"median\" or \"constant\", "
				  "and an \"indicators\" array");
	n = (int32) JsonContainerSize(ind->val.binary.data);
	if (2 * (int64) n > ds->n_numeric)
		corrupted(row->id, "imputation", "has %d indicators, more than the %d numeric features left without them",
				  n, ds->n_numeric - n);
	ds->imputation = jb;
	ds->n_indicators = n;
	ds->n_numeric -= n;
	ds->n_raw -= n;
	ds->indicators = palloc(sizeof(int32) * Max(n, 1));
	for (int32 i = 0; i < n; i++)
	{
		char	   *text = json_number_text(getIthJsonbValueFromContainer(ind->val.binary.data, i));
		int64		f = 0;

		if (text == NULL || !parse_integer(text, &f) || f < 1 || f > ds->n_numeric ||
			(i > 0 && f - 1 <= ds->indicators[i - 1]))
			corrupted(row->id, "imputation", "has an invalid indicator %d: indicators are numeric features, "
					  "from 1 to %d, ascending", i + 1, ds->n_numeric);
		ds->indicators[i] = (int32) f - 1;
	}
	ds->impute = read_float_array(row, "imputation", pgdl_jsonb_key(&jb->root, "values"), "values",
								  ds->n_numeric, false);
}

/*
 * Ids found by binary search: value i has id i + 1 (a categorical column) or
 * i + 2 (a sequence column, after padding and unseen).
 */
int32
pgdl_dataset_category_id(const PgdlDataset *ds, int c, const char *value)
{
	const PgdlVocabulary *v = &ds->vocabulary[c];
	int32		unseen = v->length > 0 ? PGDL_SEQUENCE_UNSEEN : 0;
	int64		key = 0;
	int32		lo = 0;
	int32		hi = v->n_values - 1;

	if (value == NULL)
		return unseen;
	if (v->is_integer && !parse_integer(value, &key))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("%s column \"%s\" takes integers, not \"%s\"", v->length > 0 ? "sequence" : "categorical",
						v->column, pgdl_echo(value))));
	while (lo <= hi)
	{
		int32		mid = lo + (hi - lo) / 2;
		int			cmp = v->is_integer
			? (key < v->integers[mid] ? -1 : key > v->integers[mid] ? 1 : 0)
			: strcmp(value, v->values[mid]);

		if (cmp == 0)
			return mid + 1 + unseen;
		if (cmp < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return unseen;
}

void
pgdl_sequence_layout(const int32 *ids, int64 n, int32 L, float *out)
{
	int32		kept = (int32) Min(n, (int64) L);

	for (int32 i = 0; i < kept; i++)
		out[i] = (float) ids[i];
	for (int32 i = kept; i < L; i++)
		out[i] = (float) PGDL_SEQUENCE_PADDING;
	out[L] = (float) kept;
}

/* weighted: true, false, or absent (a catalog before 0.7.0: false). */
static void
read_weighted(const DatasetRow *row, PgdlDataset *ds)
{
	bool		isnull;
	Datum		d = get_column(row, COL_WEIGHTED, &isnull);
	Jsonb	   *j;
	JsonbValue	v;

	ds->weighted = false;
	if (isnull)
		return;
	j = DatumGetJsonbP(d);
	if (!JsonContainerIsScalar(&j->root) || !JsonbExtractScalar(&j->root, &v) || v.type == jbvNull)
		return;
	if (v.type != jbvBool)
		corrupted(row->id, "weighted", "is not a boolean");
	ds->weighted = v.val.boolean;
}

/* The row's values into a new dataset, every one checked (in the current memory context). */
static PgdlDataset *
dataset_from_row(const DatasetRow *row)
{
	PgdlDataset *ds = palloc0(sizeof(PgdlDataset));
	char	   *task;
	int64		n_rows;

	ds->id = row->id;
	ds->packed = DatumGetObjectId(required_column(row, COL_PACKED));
	task = TextDatumGetCString(required_column(row, COL_TASK));
	if (strcmp(task, "classification") != 0 && strcmp(task, "regression") != 0)
		corrupted(row->id, "task", "is \"%s\", neither \"classification\" nor \"regression\"", task);
	ds->classification = strcmp(task, "classification") == 0;
	ds->n_features = int32_column(row, COL_N_FEATURES, 1, (int32) MaxArraySize);
	ds->n_targets = int32_column(row, COL_N_TARGETS, 1, (int32) MaxArraySize);
	if (ds->classification && ds->n_targets != 1)
		corrupted(row->id, "n_targets", "is %d, but a classification dataset has 1 target (the class)",
				  ds->n_targets);
	if (ds->classification)
		read_classes(row, ds);
	else
	{
		bool		isnull;

		(void) get_column(row, COL_CLASSES, &isnull);
		if (!isnull)
			corrupted(row->id, "classes", "is not NULL, but a regression dataset has no classes");
	}
	ds->label_type = DatumGetObjectId(required_column(row, COL_LABEL_TYPE));
	read_categorical(row, ds);
	read_imputation(row, ds);
	read_normalization(row, ds);
	read_target_normalization(row, ds);
	read_weighted(row, ds);
	ds->partitions = int32_column(row, COL_PARTITIONS, 1, PGDL_MAX_PARTITIONS);
	n_rows = DatumGetInt64(required_column(row, COL_N_ROWS));
	if (n_rows < 0)
		corrupted(row->id, "n_rows", "is " INT64_FORMAT ", which is negative", n_rows);
	ds->n_rows_hint = n_rows;
	return ds;
}

PgdlDataset *
pgdl_dataset_read(int64 id, Oid packed, MemoryContext cxt)
{
	Oid			argtypes[1] = {id ? INT8OID : OIDOID};
	Datum		values[1] = {id ? Int64GetDatum(id) : ObjectIdGetDatum(packed)};
	PgdlDataset *ds = NULL;
	int			ret;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ret = SPI_execute_with_args(id ? DATASET_COLUMNS " WHERE id = $1"
								: DATASET_COLUMNS " WHERE packed = $1::pg_catalog.oid::pg_catalog.regclass",
								1, argtypes, values, NULL, true, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "reading pgdl.datasets failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 1)
	{
		DatasetRow	row;
		MemoryContext old = MemoryContextSwitchTo(cxt);

		row.tuple = SPI_tuptable->vals[0];
		row.desc = SPI_tuptable->tupdesc;
		row.id = DatumGetInt64(required_column(&row, COL_ID));
		ds = dataset_from_row(&row);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return ds;
}

PgdlDataset *
pgdl_dataset_copy(const PgdlDataset *ds)
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
		copy->mean = palloc(sizeof(float) * ds->n_numeric);
		memcpy(copy->mean, ds->mean, sizeof(float) * ds->n_numeric);
	}
	if (ds->std != NULL)
	{
		copy->std = palloc(sizeof(float) * ds->n_numeric);
		memcpy(copy->std, ds->std, sizeof(float) * ds->n_numeric);
	}
	if (ds->vocabulary != NULL)
	{
		copy->vocabulary = palloc(sizeof(PgdlVocabulary) * (ds->n_categorical + ds->n_sequences));
		for (int c = 0; c < ds->n_categorical + ds->n_sequences; c++)
		{
			const PgdlVocabulary *v = &ds->vocabulary[c];
			PgdlVocabulary *w = &copy->vocabulary[c];

			*w = *v;
			w->column = pstrdup(v->column);
			w->values = palloc(sizeof(char *) * Max(v->n_values, 1));
			for (int32 i = 0; i < v->n_values; i++)
				w->values[i] = pstrdup(v->values[i]);
			if (v->integers != NULL)
			{
				w->integers = palloc(sizeof(int64) * Max(v->n_values, 1));
				memcpy(w->integers, v->integers, sizeof(int64) * v->n_values);
			}
		}
	}
	if (ds->categorical != NULL)
	{
		copy->categorical = palloc(VARSIZE(ds->categorical));
		memcpy(copy->categorical, ds->categorical, VARSIZE(ds->categorical));
	}
	if (ds->normalization != NULL)
	{
		copy->normalization = palloc(VARSIZE(ds->normalization));
		memcpy(copy->normalization, ds->normalization, VARSIZE(ds->normalization));
	}
	if (ds->imputation != NULL)
	{
		copy->imputation = palloc(VARSIZE(ds->imputation));
		memcpy(copy->imputation, ds->imputation, VARSIZE(ds->imputation));
		copy->impute = palloc(sizeof(float) * ds->n_numeric);
		memcpy(copy->impute, ds->impute, sizeof(float) * ds->n_numeric);
		copy->indicators = palloc(sizeof(int32) * Max(ds->n_indicators, 1));
		memcpy(copy->indicators, ds->indicators, sizeof(int32) * ds->n_indicators);
	}
	if (ds->target_normalization != NULL)
	{
		copy->target_normalization = palloc(VARSIZE(ds->target_normalization));
		memcpy(copy->target_normalization, ds->target_normalization, VARSIZE(ds->target_normalization));
		copy->target_mean = palloc(sizeof(float) * ds->n_targets);
		memcpy(copy->target_mean, ds->target_mean, sizeof(float) * ds->n_targets);
		copy->target_std = palloc(sizeof(float) * ds->n_targets);
		memcpy(copy->target_std, ds->target_std, sizeof(float) * ds->n_targets);
	}
	return copy;
}

/*
 * Categorical column c's id (a float of the raw vector) one-hot into out
 * (n_values floats): value id at id - 1, none for 0 (unseen or NULL); an id
 * that names no value is an error, since no float of the block could say it.
 */
static void
one_hot(const PgdlVocabulary *v, float id, float *out)
{
	memset(out, 0, sizeof(float) * v->n_values);
	if (id == 0.0f)
		return;
	if (!(id >= 1.0f && id <= (float) v->n_values && id == floorf(id)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%g is not an id of one-hot column \"%s\"", id, v->column),
				 errdetail("Its ids are 0 (unseen or NULL) to %d; pgdl.encode gives a value's.", v->n_values)));
	out[(int32) id - 1] = 1.0f;
}

void
pgdl_dataset_expand(const PgdlDataset *ds, const float *raw, float *x, int64 rows)
{
	int32		nn = ds->n_numeric;

	if (ds->n_raw == ds->n_features && ds->impute == NULL)
	{
		if (x != raw)
			memcpy(x, raw, sizeof(float) * ds->n_features * rows);
		return;
	}
	for (int64 r = 0; r < rows; r++)
	{
		const float *in = raw + r * ds->n_raw;
		float	   *out = x + r * ds->n_features;

		for (int32 j = 0; j < nn; j++)
			out[j] = isnan(in[j]) && ds->impute != NULL ? ds->impute[j] : in[j];
		for (int32 i = 0; i < ds->n_indicators; i++)
			out[nn + i] = isnan(in[ds->indicators[i]]) ? 1.0f : 0.0f;
		in += nn;
		out += nn + ds->n_indicators;
		for (int c = 0; c < ds->n_categorical + ds->n_sequences; c++)
		{
			const PgdlVocabulary *v = &ds->vocabulary[c];
			int32		raw_width = v->length > 0 ? v->length + 1 : 1;

			if (v->one_hot)
				one_hot(v, *in, out);
			else
				memcpy(out, in, sizeof(float) * raw_width);
			in += raw_width;
			out += pgdl_vocabulary_width(v);
		}
	}
}

/* Only the numeric features: the indicators, ids and lengths after them are used as they are. */
void
pgdl_dataset_normalize(const PgdlDataset *ds, float *x, int64 rows)
{
	int			nf = ds->n_features;
	int			nn = ds->n_numeric;

	if (ds->mean == NULL)
	{
		if (ds->scale == 1.0f)
			return;
		if (nn == nf)
			for (int64 i = 0; i < rows * nf; i++)
				x[i] *= ds->scale;
		else
			for (int64 r = 0; r < rows; r++)
				for (int j = 0; j < nn; j++)
					x[r * nf + j] *= ds->scale;
		return;
	}
	for (int64 r = 0; r < rows; r++)
		for (int j = 0; j < nn; j++)
			x[r * nf + j] = (x[r * nf + j] - ds->mean[j]) / ds->std[j];
}

/* y * std + mean per target, in float32 as pgdl.pack's (y - mean) / std was; nothing when not scaled. */
void
pgdl_dataset_unscale_targets(const PgdlDataset *ds, float *y, int64 rows)
{
	int			k = ds->n_targets;

	if (ds->target_mean == NULL)
		return;
	for (int64 r = 0; r < rows; r++)
		for (int c = 0; c < k; c++)
			y[r * k + c] = y[r * k + c] * ds->target_std[c] + ds->target_mean[c];
}

/* ---- whether two datasets are preprocessed alike ---- */

/* A dataset in a sentence: its packed table's name, quoted, or its id when the table is gone. */
static char *
dataset_name(const PgdlDataset *ds)
{
	char	   *name = OidIsValid(ds->packed) ? get_rel_name(ds->packed) : NULL;

	return name ? psprintf("\"%s\"", name) : psprintf("dataset " INT64_FORMAT, ds->id);
}

/* A float as the shortest text that reads back as it: two that differ never print the same. */
static char *
float_text(float f)
{
	char		buf[FLOAT_SHORTEST_DECIMAL_LEN];

	float_to_shortest_decimal_buf(f, buf);
	return pstrdup(buf);
}

/* The targets' scaling (standardize_target), compared as the floats that are applied. */
static char *
target_normalization_difference(const PgdlDataset *a, const PgdlDataset *b)
{
	if ((a->target_mean == NULL) != (b->target_mean == NULL))
		return psprintf("The model's training set has %s targets; %s has %s targets.",
						a->target_mean ? "standardized" : "unscaled", dataset_name(b),
						b->target_mean ? "standardized" : "unscaled");
	for (int32 c = 0; a->target_mean != NULL && c < a->n_targets; c++)
	{
		if (a->target_mean[c] != b->target_mean[c])
			return psprintf("Target %d's mean differs: %s against %s.",
							c + 1, float_text(a->target_mean[c]), float_text(b->target_mean[c]));
		if (a->target_std[c] != b->target_std[c])
			return psprintf("Target %d's standard deviation differs: %s against %s.",
							c + 1, float_text(a->target_std[c]), float_text(b->target_std[c]));
	}
	return NULL;
}

/* What y means: the task, the targets (and their scaling), the classes in order. */
static char *
labels_difference(const PgdlDataset *a, const PgdlDataset *b)
{
	if (a->classification != b->classification)
		return psprintf("The model's training set is a %s dataset; %s is a %s dataset.",
						a->classification ? "classification" : "regression", dataset_name(b),
						b->classification ? "classification" : "regression");
	if (a->n_targets != b->n_targets)
		return psprintf("The model's training set has %d targets and %s has %d.",
						a->n_targets, dataset_name(b), b->n_targets);
	if (a->n_classes != b->n_classes)
		return psprintf("The model's training set has %d classes and %s has %d.",
						a->n_classes, dataset_name(b), b->n_classes);
	for (int i = 0; i < a->n_classes; i++)
		if (strcmp(a->classes[i], b->classes[i]) != 0)
			return psprintf("Class index %d is \"%s\" in the model's training set and \"%s\" here.",
							i, pgdl_echo(a->classes[i]), pgdl_echo(b->classes[i]));
	return target_normalization_difference(a, b);
}

/* Column c's vocabulary: its name, kind, sequence length and values, which its ids stand for. */
static char *
vocabulary_difference(const PgdlVocabulary *v, const PgdlVocabulary *w, int c)
{
	const char *kind = v->length > 0 ? "Sequence" : "Categorical";

	if (strcmp(v->column, w->column) != 0)
		return psprintf("%s column %d is \"%s\" in the model's training set and \"%s\" here.",
						kind, c + 1, pgdl_echo(v->column), pgdl_echo(w->column));
	if (v->is_integer != w->is_integer)
		return psprintf("%s column \"%s\" holds %s in the model's training set and %s here.",
						kind, pgdl_echo(v->column), v->is_integer ? "integers" : "text",
						w->is_integer ? "integers" : "text");
	if (v->length != w->length)
		return psprintf("Sequence column \"%s\" has length %d in the model's training set and %d here.",
						pgdl_echo(v->column), v->length, w->length);
	if (v->one_hot != w->one_hot)
		return psprintf("Categorical column \"%s\" is %s in the model's training set and %s here.",
						pgdl_echo(v->column), v->one_hot ? "one-hot" : "an id", w->one_hot ? "one-hot" : "an id");
	if (v->n_values != w->n_values)
		return psprintf("%s column \"%s\" has %d values in the model's training set and %d here.",
						kind, pgdl_echo(v->column), v->n_values, w->n_values);
	for (int32 i = 0; i < v->n_values; i++)
		if (strcmp(v->values[i], w->values[i]) != 0)
			return psprintf("%s column \"%s\" has \"%s\" as value %d in the model's training set and \"%s\" here.",
							kind, pgdl_echo(v->column), pgdl_echo(v->values[i]), i + 1,
							pgdl_echo(w->values[i]));
	return NULL;
}

/* The example's layout: how many features of each kind, and the vocabularies of the columns of ids. */
static char *
layout_difference(const PgdlDataset *a, const PgdlDataset *b)
{
	if (a->n_features != b->n_features)
		return psprintf("The model's training set has %d features per example and %s has %d.",
						a->n_features, dataset_name(b), b->n_features);
	if (a->n_numeric != b->n_numeric)
		return psprintf("The model's training set has %d numeric features and %s has %d.",
						a->n_numeric, dataset_name(b), b->n_numeric);
	if (a->n_categorical != b->n_categorical)
		return psprintf("The model's training set has %d categorical columns and %s has %d.",
						a->n_categorical, dataset_name(b), b->n_categorical);
	if (a->n_sequences != b->n_sequences)
		return psprintf("The model's training set has %d sequence columns and %s has %d.",
						a->n_sequences, dataset_name(b), b->n_sequences);
	for (int c = 0; c < a->n_categorical + a->n_sequences; c++)
	{
		char	   *difference = vocabulary_difference(&a->vocabulary[c], &b->vocabulary[c], c);

		if (difference != NULL)
			return difference;
	}
	return NULL;
}

/* Imputation: whether, its values (the floats applied), its indicators. */
static char *
imputation_difference(const PgdlDataset *a, const PgdlDataset *b)
{
	if ((a->impute == NULL) != (b->impute == NULL))
		return psprintf("The model's training set %s missing values; %s %s.",
						a->impute ? "imputes" : "does not impute", dataset_name(b),
						b->impute ? "imputes them" : "does not");
	if (a->n_indicators != b->n_indicators)
		return psprintf("The model's training set has %d missing-value indicators and %s has %d.",
						a->n_indicators, dataset_name(b), b->n_indicators);
	for (int32 i = 0; i < a->n_indicators; i++)
		if (a->indicators[i] != b->indicators[i])
			return psprintf("Missing-value indicator %d is of feature %d in the model's training set and of "
							"feature %d in %s.", i + 1, a->indicators[i] + 1, b->indicators[i] + 1,
							dataset_name(b));
	for (int32 j = 0; a->impute != NULL && j < a->n_numeric; j++)
		if (a->impute[j] != b->impute[j])
			return psprintf("Feature %d's imputed value differs: %s against %s.",
							j + 1, float_text(a->impute[j]), float_text(b->impute[j]));
	return NULL;
}

/* What a scaling does to each feature, and what its center and divisor are called, by PgdlScaling. */
static const char *const scaling_words[][3] = {
	{"scales by a constant", NULL, NULL},
	{"standardizes each feature", "mean", "standard deviation"},
	{"scales each feature by its minimum and range", "minimum", "range"},
	{"scales each feature by its median and interquartile range", "median", "interquartile range"}};

/* The numeric features' normalization, compared as the floats that are applied. */
static char *
normalization_difference(const PgdlDataset *a, const PgdlDataset *b)
{
	if (a->scaling != b->scaling && Max(a->scaling, b->scaling) > PGDL_SCALING_STANDARD)
		return psprintf("The model's training set %s; %s %s.", scaling_words[a->scaling][0], dataset_name(b),
						scaling_words[b->scaling][0]);
	if (a->mean != NULL && b->mean == NULL)
		return psprintf("The model's training set standardizes each feature (mean and std of %s); %s scales by %s.",
						dataset_name(a), dataset_name(b), float_text(b->scale));
	if (a->mean == NULL && b->mean != NULL)
		return psprintf("The model's training set scales by %s; %s standardizes each feature (mean and std of %s).",
						float_text(a->scale), dataset_name(b), dataset_name(b));
	if (a->mean == NULL)
		return a->scale == b->scale ? NULL :
			psprintf("The model's training set scales by %s; %s scales by %s.",
					 float_text(a->scale), dataset_name(b), float_text(b->scale));
	for (int32 j = 0; j < a->n_numeric; j++)
	{
		if (a->mean[j] != b->mean[j])
			return psprintf("Feature %d's %s differs: %s against %s.", j + 1, scaling_words[a->scaling][1],
							float_text(a->mean[j]), float_text(b->mean[j]));
		if (a->std[j] != b->std[j])
			return psprintf("Feature %d's %s differs: %s against %s.", j + 1, scaling_words[a->scaling][2],
							float_text(a->std[j]), float_text(b->std[j]));
	}
	return NULL;
}

char *
pgdl_dataset_features_difference(const PgdlDataset *trained, const PgdlDataset *other)
{
	char	   *difference = layout_difference(trained, other);

	if (difference == NULL)
		difference = imputation_difference(trained, other);
	return difference ? difference : normalization_difference(trained, other);
}

char *
pgdl_dataset_preprocessing_difference(const PgdlDataset *trained, const PgdlDataset *other)
{
	char	   *difference = labels_difference(trained, other);

	return difference ? difference : pgdl_dataset_features_difference(trained, other);
}

void
pgdl_check_same_preprocessing(const PgdlDataset *trained, const PgdlDataset *other, const char *what)
{
	char	   *difference = pgdl_dataset_preprocessing_difference(trained, other);
	bool		exists = OidIsValid(trained->packed) && get_rel_name(trained->packed) != NULL;

	if (difference == NULL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("\"%s\" was not preprocessed as the model's training set", what),
			 errdetail("%s", difference),
			 exists ? errhint("Pack it with reference => '%s'.",
							  DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(trained->packed)))) :
			 errhint("The model's training set (dataset " INT64_FORMAT ") has no packed table any more: "
					 "pack it again, and this table with reference => it.", trained->id)));
}
