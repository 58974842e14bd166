/*
 * pack_columns.c -- which columns of the source pgdl.pack reads, and as what:
 * the features (one array column, or a list of numeric columns), the label (a
 * class, a target, or several targets), the categorical and sequence columns;
 * and the reference dataset, whose task and columns the source must match.
 *
 * Column names follow SQL's rules for identifiers.  Each column is read at its
 * position in the cursor's SELECT list, which pack_read.c's open_source writes
 * in the order given here: features, categorical, sequence, then label columns.
 */
#include "postgres.h"

#include <ctype.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/varlena.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "data/pack.h"

static PackNumKind
kind_of(Oid type)
{
	switch (getBaseType(type))
	{
		case INT2OID:
			return PACK_INT2;
		case INT4OID:
			return PACK_INT4;
		case INT8OID:
			return PACK_INT8;
		case FLOAT4OID:
			return PACK_FLOAT4;
		case FLOAT8OID:
			return PACK_FLOAT8;
		case NUMERICOID:
			return PACK_NUMERIC;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
			return PACK_TEXT;
		case BOOLOID:
			return PACK_BOOL;
		default:
			return PACK_OTHER;
	}
}

static inline bool
kind_is_numeric(PackNumKind kind)
{
	return kind <= PACK_NUMERIC;
}

/*
 * Finds column `name` of relation `relid`, or of the query's rows when relid
 * is invalid (or errors, naming it), and records its type.
 */
static void
find_column(Oid relid, const PackData *data, const char *name, int position, PackColumn *col)
{
	AttrNumber	attnum = InvalidAttrNumber;

	if (OidIsValid(relid))
		attnum = get_attnum(relid, name);
	else
		for (int i = 0; i < data->query_desc->natts && attnum == InvalidAttrNumber; i++)
			if (!TupleDescAttr(data->query_desc, i)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(data->query_desc, i)->attname), name) == 0)
				attnum = i + 1;
	if (attnum <= 0 && OidIsValid(relid))	/* InvalidAttrNumber, or a system column */
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", name, data->relname)));
	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" does not exist in the query's rows", name),
				 errhint("Name the column as the query's SELECT list names it.")));
	col->name = pstrdup(name);
	col->position = position;
	col->type = OidIsValid(relid) ? get_atttype(relid, attnum) : TupleDescAttr(data->query_desc, attnum - 1)->atttypid;
}

#define PACK_FEATURE_TYPES_DETAIL \
	"Features are one column of type real[], double precision[], smallint[], integer[], bigint[] or numeric[], " \
	"or a comma-separated list of columns of types smallint, integer, bigint, real, double precision or numeric."

/* One feature column's kind: of its elements when it is the only column and an array. */
static void
feature_kind(PackData *data, PackColumn *col)
{
	Oid			elemtype = get_element_type(getBaseType(col->type));

	if (OidIsValid(elemtype) && data->n_cols == 1)
	{
		data->array_mode = true;
		col->kind = kind_of(elemtype);
		col->elem_base = getBaseType(elemtype);
	}
	else if (OidIsValid(elemtype))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("feature column \"%s\" is an array, which cannot be part of a list of feature columns",
						col->name),
				 errdetail(PACK_FEATURE_TYPES_DETAIL)));
	else
		col->kind = kind_of(col->type);

	if (!kind_is_numeric(col->kind))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("feature column \"%s\" has type %s, which is not numeric",
						col->name, format_type_be(col->type)),
				 errdetail(PACK_FEATURE_TYPES_DETAIL)));
}

/*
 * The feature columns: one array column, or a list of numeric columns.  Names
 * follow SQL's rules for identifiers (folded to lower case unless quoted).
 */
static void
find_features(Oid relid, const char *features, PackData *data)
{
	char	   *raw = pstrdup(features);
	List	   *names;
	ListCell   *lc;
	int			i = 0;

	if (!SplitIdentifierString(raw, ',', &names) || names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid feature column list \"%s\"", pgdl_echo(features)),
				 errhint("Give one column name, or column names separated by commas.")));

	data->n_cols = list_length(names);
	if (data->n_cols > MaxHeapAttributeNumber)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many feature columns: %d", data->n_cols),
				 errdetail("A list of feature columns has at most %d names.", MaxHeapAttributeNumber),
				 errhint("Put the features in one array column.")));
	data->cols = palloc0(sizeof(PackColumn) * data->n_cols);
	foreach(lc, names)
	{
		find_column(relid, data, (char *) lfirst(lc), i + 1, &data->cols[i]);
		feature_kind(data, &data->cols[i]);
		i++;
	}
	data->n_features = data->array_mode ? -1 : data->n_cols;
}

#define PACK_TARGET_TYPES_DETAIL \
	"Several targets are a comma-separated list of columns, or one array column, of types smallint, integer, " \
	"bigint, real, double precision, numeric or boolean."

/* One target column of several (a list, or an array column's elements). */
static void
target_kind(PackColumn *col, Oid type)
{
	col->kind = kind_of(type);
	if (!kind_is_numeric(col->kind) && col->kind != PACK_BOOL)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("label column \"%s\" has type %s, which cannot be a target",
						col->name, format_type_be(col->type)),
				 errdetail(PACK_TARGET_TYPES_DETAIL)));
}

/*
 * The label: one column (integer or text: classes; real, double precision
 * or numeric: one target), or several targets (regression, or multi-label
 * with 0/1 targets): a list of columns, or one array column.
 */
static void
find_label(Oid relid, const char *label, int position, PackData *data)
{
	char	   *raw = pstrdup(label);
	List	   *names;
	ListCell   *lc;
	int			i = 0;
	Oid			elemtype;

	if (!SplitIdentifierString(raw, ',', &names) || names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid label column name \"%s\"", pgdl_echo(label)),
				 errhint("Give the name of one column, or a comma-separated list of target columns.")));
	if (list_length(names) > MaxHeapAttributeNumber)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many label columns: %d", list_length(names)),
				 errhint("Put the targets in one array column.")));

	data->n_label_cols = list_length(names);
	data->labels = palloc0(sizeof(PackColumn) * data->n_label_cols);
	foreach(lc, names)
	{
		find_column(relid, data, (char *) lfirst(lc), position + i, &data->labels[i]);
		i++;
	}
	data->label = data->labels[0];
	data->n_targets = 1;

	if (data->n_label_cols > 1)
	{
		for (i = 0; i < data->n_label_cols; i++)
		{
			if (OidIsValid(get_element_type(getBaseType(data->labels[i].type))))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("label column \"%s\" is an array, which cannot be part of a list of label columns",
								data->labels[i].name),
						 errdetail(PACK_TARGET_TYPES_DETAIL)));
			target_kind(&data->labels[i], data->labels[i].type);
		}
		data->classification = false;
		data->n_targets = data->n_label_cols;
		data->label.type = FLOAT4OID;
		return;
	}

	elemtype = get_element_type(getBaseType(data->label.type));
	if (OidIsValid(elemtype))
	{
		target_kind(&data->labels[0], elemtype);
		data->labels[0].elem_base = getBaseType(elemtype);
		data->label = data->labels[0];
		data->label_array = true;
		data->classification = false;
		data->n_targets = -1;
		return;
	}

	data->label.kind = kind_of(data->label.type);
	switch (data->label.kind)
	{
		case PACK_INT2:
		case PACK_INT4:
		case PACK_INT8:
		case PACK_TEXT:
			data->classification = true;
			break;
		case PACK_FLOAT4:
		case PACK_FLOAT8:
		case PACK_NUMERIC:
			data->classification = false;
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("label column \"%s\" has type %s, which cannot be a label",
							data->label.name, format_type_be(data->label.type)),
					 errdetail("An integer or text label is a class (classification); "
							   "a real, double precision or numeric label is a target value (regression); "
							   "several targets are a list of columns or an array column.")));
	}
	data->labels[0] = data->label;
}

static uint32
seen_hash(const void *key, Size keysize)
{
	const char *v = *(char *const *) key;

	return DatumGetUInt32(hash_any((const unsigned char *) v, (int) strlen(v)));
}

static int
seen_match(const void *a, const void *b, Size keysize)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* A list of column names (SQL identifiers, as features are), for categorical or sequence. */
static List *
split_columns(const char *list, const char *what)
{
	char	   *raw = pstrdup(list);
	List	   *names;

	if (!SplitIdentifierString(raw, ',', &names) || names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s column list \"%s\"", what, pgdl_echo(list)),
				 errhint("Give column names separated by commas, or leave %s out.", what)));
	if (list_length(names) > MaxHeapAttributeNumber)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many %s columns: %d", what, list_length(names))));
	return names;
}

/*
 * Column `name` as a new categorical or sequence column: found, none of the
 * columns given before it, with an empty vocabulary.
 */
static void
find_vocabulary_column(Oid relid, PackData *data, const char *name, int position, const char *what,
					   PackCategorical *cat)
{
	HASHCTL		ctl;

	find_column(relid, data, name, position, &cat->col);
	cat->what = what;
	for (int k = 0; k < data->n_cols; k++)
		if (strcmp(data->cols[k].name, cat->col.name) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("column \"%s\" is both a feature and a %s column", cat->col.name, what)));
	for (int k = 0; k < data->n_categorical && &data->cats[k] != cat; k++)
		if (strcmp(data->cats[k].col.name, cat->col.name) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 strcmp(what, "categorical") == 0
					 ? errmsg("categorical column \"%s\" is given twice", cat->col.name)
					 : errmsg("column \"%s\" is both a categorical and a sequence column", cat->col.name)));
	for (int k = 0; k < data->n_sequences && &data->seqs[k].cat != cat; k++)
		if (strcmp(data->seqs[k].cat.col.name, cat->col.name) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("sequence column \"%s\" is given twice", cat->col.name)));
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(char *);
	ctl.entrysize = sizeof(PackSeen);
	ctl.hash = seen_hash;
	ctl.match = seen_match;
	ctl.hcxt = data->cxt;
	cat->seen = hash_create("pgdl pack categories", 256, &ctl,
							HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
}

static inline bool
kind_is_category(PackNumKind kind)
{
	return kind == PACK_INT2 || kind == PACK_INT4 || kind == PACK_INT8 || kind == PACK_TEXT;
}

/* Whether a list of names (char *, as split_columns gives them) has `name`. */
static bool
has_name(const List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (strcmp((const char *) lfirst(lc), name) == 0)
			return true;
	return false;
}

/*
 * The categorical columns: integer or text, each mapped to ids by a
 * vocabulary.  They are categorical's, then one_hot's that categorical does
 * not name; one_hot's are packed one-hot.
 */
static void
find_categorical(Oid relid, const char *categorical, const char *one_hot, int position, PackData *data)
{
	List	   *names = categorical ? split_columns(categorical, "categorical") : NIL;
	List	   *hot = one_hot ? split_columns(one_hot, "one_hot") : NIL;
	ListCell   *lc;
	int			i = 0;

	foreach(lc, hot)
		if (!has_name(names, lfirst(lc)))
			names = lappend(names, lfirst(lc));

	data->n_categorical = list_length(names);
	data->cats = palloc0(sizeof(PackCategorical) * data->n_categorical);
	foreach(lc, names)
	{
		PackCategorical *cat = &data->cats[i];

		find_vocabulary_column(relid, data, (char *) lfirst(lc), position + i, "categorical", cat);
		cat->col.kind = kind_of(cat->col.type);
		if (!kind_is_category(cat->col.kind))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("categorical column \"%s\" has type %s, which cannot be categorical",
							cat->col.name, format_type_be(cat->col.type)),
					 errdetail("Categorical columns have type smallint, integer, bigint, text, varchar or char.")));
		cat->is_integer = cat->col.kind != PACK_TEXT;
		cat->one_hot = has_name(hot, lfirst(lc));
		i++;
	}
}

/* The sequence columns: arrays of integers or text, their tokens mapped to ids by a vocabulary. */
static void
find_sequences(Oid relid, const char *sequence, int position, int32 max_length, PackData *data)
{
	List	   *names = split_columns(sequence, "sequence");
	ListCell   *lc;
	int			i = 0;

	data->n_sequences = list_length(names);
	data->seqs = palloc0(sizeof(PackSequence) * data->n_sequences);
	foreach(lc, names)
	{
		PackCategorical *cat = &data->seqs[i].cat;
		Oid			elemtype;

		find_vocabulary_column(relid, data, (char *) lfirst(lc), position + i, "sequence", cat);
		elemtype = get_element_type(getBaseType(cat->col.type));
		cat->col.kind = OidIsValid(elemtype) ? kind_of(elemtype) : PACK_OTHER;
		if (!kind_is_category(cat->col.kind))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("sequence column \"%s\" has type %s, which cannot be a sequence",
							cat->col.name, format_type_be(cat->col.type)),
					 errdetail("Sequence columns are arrays of smallint, integer, bigint, text, varchar or char.")));
		cat->col.elem_base = getBaseType(elemtype);
		cat->is_integer = cat->col.kind != PACK_TEXT;
		data->seqs[i].limit = max_length;
		i++;
	}
}

/*
 * A query's rows as a source (pack_stream.c's): their columns, from the plan,
 * and the query as a subquery, which refuses more than one statement and
 * data-modifying WITH.  The caller has connected to SPI.
 */
static void
find_query_columns(const char *query, PackData *data)
{
	SPIPlanPtr	plan = SPI_prepare(query, 0, NULL);
	List	   *sources = plan != NULL ? SPI_plan_get_plan_sources(plan) : NIL;
	CachedPlanSource *ps = list_length(sources) == 1 ? linitial(sources) : NULL;
	const char *text_end;

	if (ps == NULL || ps->resultDesc == NULL || !SPI_is_cursor_plan(plan))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source must be one query that returns rows"),
				 errdetail("A source is a table or view name, or one SELECT, WITH, VALUES or TABLE query.")));
	data->query_desc = CreateTupleDescCopy(ps->resultDesc);
	SPI_freeplan(plan);
	data->relname = pstrdup("query");
	/* as a subquery: a statement's trailing semicolons go */
	text_end = query + strlen(query);
	while (text_end > query && (text_end[-1] == ';' || isspace((unsigned char) text_end[-1])))
		text_end--;
	data->source_sql = psprintf("(%.*s) AS pgdl_source", (int) (text_end - query), query);
}

/* weight => col: one numeric column, read after the label columns. */
static void
find_weight(Oid relid, const char *weight, int position, PackData *data)
{
	char	   *raw = pstrdup(weight);
	List	   *names;

	if (!SplitIdentifierString(raw, ',', &names) || list_length(names) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid weight column name \"%s\"", pgdl_echo(weight)),
				 errhint("Give the name of one numeric column.")));
	find_column(relid, data, (char *) linitial(names), position, &data->weight);
	data->weight.kind = kind_of(data->weight.type);
	if (!kind_is_numeric(data->weight.kind))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("weight column \"%s\" has type %s, which is not a number", data->weight.name,
						format_type_be(data->weight.type)),
				 errhint("Weights are a column of type smallint, integer, bigint, real, double precision or numeric.")));
}

/* The source relation or query, its feature columns and its label column (and weight column). */
void
pgdl_pack_find_source(const PackArgs *args, PackData *data)
{
	if (args->query != NULL)
		find_query_columns(args->query, data);
	else
	{
		data->relname = get_rel_name(args->source);
		if (data->relname == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("relation with OID %u does not exist", args->source)));
		data->source_sql = quote_qualified_identifier(get_namespace_name(get_rel_namespace(args->source)),
													  data->relname);
	}
	find_features(args->source, args->features, data);
	if (args->categorical != NULL || args->one_hot != NULL)
		find_categorical(args->source, args->categorical, args->one_hot, data->n_cols + 1, data);
	if (args->sequence != NULL)
		find_sequences(args->source, args->sequence, data->n_cols + data->n_categorical + 1, args->max_length, data);
	find_label(args->source, args->label, data->n_cols + data->n_categorical + data->n_sequences + 1, data);
	if (args->weight != NULL)
		find_weight(args->source, args->weight,
					data->n_cols + data->n_categorical + data->n_sequences + data->n_label_cols + 1, data);
}

/*
 * A reference's categorical (sequences false) or sequence columns, as a list
 * that split_columns reads back; NULL when it has none.
 */
static char *
reference_columns(const PgdlDataset *ds, bool sequences)
{
	int			from = sequences ? ds->n_categorical : 0;
	int			to = sequences ? ds->n_categorical + ds->n_sequences : ds->n_categorical;
	StringInfoData list;

	if (from == to)
		return NULL;
	initStringInfo(&list);
	for (int c = from; c < to; c++)
		appendStringInfo(&list, "%s%s", c > from ? ", " : "", quote_identifier(ds->vocabulary[c].column));
	return list.data;
}

/* Columns the caller names (`given`) must be the reference's (`expected`, NULL: none), in its order. */
static void
check_reference_columns(const char *given, const char *expected, const char *what, const PackReference *ref)
{
	List	   *g = split_columns(given, what);
	List	   *e = expected ? split_columns(expected, what) : NIL;
	bool		same = list_length(g) == list_length(e);
	StringInfoData names;
	ListCell   *a;
	ListCell   *b;

	if (same)
		forboth(a, g, b, e)
			same = same && strcmp((char *) lfirst(a), (char *) lfirst(b)) == 0;
	if (same)
		return;
	initStringInfo(&names);
	foreach(a, g)
		appendStringInfo(&names, "%s%s", foreach_current_index(a) > 0 ? ", " : "",
						 quote_identifier((char *) lfirst(a)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s columns (%s) are not those of reference dataset \"%s\"",
					what, pgdl_echo(names.data), ref->name),
			 expected ? errdetail("The reference's are (%s), in this order.", pgdl_echo(expected))
			 : errdetail("The reference has no %s columns.", what),
			 errhint("Leave %s out: a dataset packed with a reference takes the reference's.", what)));
}

/*
 * The dataset packed into `packed`, from pgdl.datasets (checked by
 * pgdl_dataset_read, allocated in cxt).  Its categorical and sequence columns
 * are the source's: args takes them when it names none, and must name them
 * when it does.
 */
void
pgdl_pack_open_reference(Oid packed, PackArgs *args, MemoryContext cxt, PackReference *ref)
{
	char	   *name = get_rel_name(packed);

	/* a dropped table (or oid 0) passes as a regclass argument */
	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("reference relation with OID %u does not exist", packed)));
	ref->ds = pgdl_dataset_read(0, packed, cxt);
	if (ref->ds == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" is not a packed dataset", name),
				 pgdl_packed_left_behind(packed) ? errdetail(PGDL_UNKNOWN_PACKED_DETAIL) :
				 errdetail("The reference must be a table written by pgdl.pack and registered in pgdl.datasets.")));
	ref->name = MemoryContextStrdup(cxt, name);
	pgdl_pack_reference_columns(args, ref);
}

void
pgdl_pack_reference_columns(PackArgs *args, const PackReference *ref)
{
	char	   *categorical = reference_columns(ref->ds, false);
	char	   *sequence = reference_columns(ref->ds, true);

	if (args->categorical != NULL)
		check_reference_columns(args->categorical, categorical, "categorical", ref);
	if (args->sequence != NULL)
		check_reference_columns(args->sequence, sequence, "sequence", ref);
	args->categorical = categorical;
	args->sequence = sequence;
}

/* The source, found, must match the reference's task and features. */
void
pgdl_pack_read_reference(const PackData *data, PackReference *ref)
{
	if (ref->ds->classification != data->classification)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("label \"%s\" is a %s label, but reference dataset \"%s\" is a %s dataset",
						data->label.name, data->classification ? "classification" : "regression",
						ref->name, ref->ds->classification ? "classification" : "regression")));
	if (!data->array_mode && data->n_features != ref->ds->n_numeric)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("source has %d features, but reference dataset \"%s\" has %d",
						data->n_features, ref->name, ref->ds->n_numeric),
				 errdetail("A dataset packed with a reference must have the reference's features.")));
	/* the same categorical and sequence columns, by pgdl_pack_open_reference */
	Assert(data->n_categorical == ref->ds->n_categorical && data->n_sequences == ref->ds->n_sequences);
	for (int c = 0; c < data->n_categorical; c++)
		data->cats[c].one_hot = ref->ds->vocabulary[c].one_hot;
	for (int s = 0; s < data->n_sequences; s++)
		data->seqs[s].limit = ref->ds->vocabulary[ref->ds->n_categorical + s].length;
	if (!data->classification && !data->label_array && data->n_targets != ref->ds->n_targets)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("source has %d targets, but reference dataset \"%s\" has %d",
						data->n_targets, ref->name, ref->ds->n_targets)));
}
