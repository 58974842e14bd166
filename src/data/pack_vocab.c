/*
 * pack_vocab.c -- categorical and sequence columns, value to id.  While the
 * source is read, each value (or token) gets a provisional index, in the order
 * first seen; once every row is read, each column's vocabulary sorts its
 * values and maps every provisional index to an id, or to the reference's id.
 *
 * Ids depend on the set of values alone, not on the order of the rows or the
 * database's locale: integers sort numerically, text by bytes.  A categorical
 * NULL or unseen value is id 0; a sequence's ids follow padding (0) and unseen
 * (1), which is also the id of a NULL or unseen token.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "catalog/catalog.h"
#include "data/pack.h"

/* A categorical value or token as text: integers in buf (32 bytes), text palloc'd. */
static char *
category_text(PackNumKind kind, Datum d, char *buf)
{
	if (kind == PACK_TEXT)
		return TextDatumGetCString(d);
	snprintf(buf, 32, INT64_FORMAT,
			 kind == PACK_INT2 ? (int64) DatumGetInt16(d)
			 : kind == PACK_INT4 ? (int64) DatumGetInt32(d) : DatumGetInt64(d));
	return buf;
}

/* A value's provisional index in column cat: a value seen for the first time gets the next one. */
static int32
category_index(PackData *data, PackCategorical *cat, char *value)
{
	PackSeen   *hit = hash_search(cat->seen, &value, HASH_FIND, NULL);
	char	   *kept;
	bool		found;

	if (hit != NULL)
		return hit->index;
	if (cat->n_values >= data->max_categories)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s column \"%s\" has more than %d distinct values",
						cat->what, cat->col.name, data->max_categories),
				 errdetail("Its vocabulary would exceed max_categories."),
				 errhint("Raise max_categories (at most %d), or bucket the column's values.",
						 PGDL_MAX_CATEGORIES)));
	kept = MemoryContextStrdup(data->cxt, value);
	hit = hash_search(cat->seen, &kept, HASH_ENTER, &found);
	hit->index = cat->n_values;
	if (cat->n_values == cat->cap_values)
	{
		cat->cap_values = cat->cap_values == 0 ? 64 : cat->cap_values * 2;
		cat->values = cat->values == NULL
			? MemoryContextAllocHuge(data->cxt, sizeof(char *) * cat->cap_values)
			: repalloc_huge(cat->values, sizeof(char *) * cat->cap_values);
	}
	cat->values[cat->n_values++] = kept;
	return hit->index;
}

/*
 * Row data->n_rows's categorical values as provisional indices; NULL is -1
 * (id 0, as unseen values).
 */
void
pgdl_pack_store_categorical(PackData *data, HeapTuple tuple, TupleDesc desc)
{
	for (int c = 0; c < data->n_categorical; c++)
	{
		PackCategorical *cat = &data->cats[c];
		bool		isnull;
		Datum		d = SPI_getbinval(tuple, desc, cat->col.position, &isnull);
		char		buf[32];

		cat->row_index[data->n_rows] = isnull ? -1 : category_index(data, cat, category_text(cat->col.kind, d, buf));
	}
}

/* A sequence array's element count, once its shape and size are checked. */
static int
sequence_array_items(const PackSequence *seq, ArrayType *arr, int64 row)
{
	int			n;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("sequence column \"%s\" has %d dimensions in row " INT64_FORMAT,
						seq->cat.col.name, ARR_NDIM(arr), row),
				 errdetail("A sequence is a one-dimensional array of tokens.")));
	n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	if (seq->limit == 0 && n > PGDL_MAX_SEQUENCE_LENGTH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("sequence column \"%s\" has %d tokens in row " INT64_FORMAT ", more than %d",
						seq->cat.col.name, n, row, PGDL_MAX_SEQUENCE_LENGTH),
				 errhint("Give max_length to keep the first tokens of each array.")));
	return n;
}

/*
 * Row data->n_rows's tokens of each sequence column, as provisional indices:
 * a NULL array is an empty sequence, a NULL element -1 (an unseen token);
 * the tokens past the column's limit are left out.
 */
void
pgdl_pack_store_sequences(PackData *data, HeapTuple tuple, TupleDesc desc, int64 row)
{
	for (int s = 0; s < data->n_sequences; s++)
	{
		PackSequence *seq = &data->seqs[s];
		bool		isnull;
		Datum		d = SPI_getbinval(tuple, desc, seq->cat.col.position, &isnull);
		ArrayType  *arr;
		ArrayIterator it;
		Datum		elem;
		int32		keep;
		int32		i = 0;

		seq->row_start[data->n_rows] = seq->n_tokens;
		seq->row_count[data->n_rows] = 0;
		if (isnull)
			continue;
		arr = DatumGetArrayTypeP(d);
		keep = sequence_array_items(seq, arr, row);
		if (seq->limit > 0)
			keep = Min(keep, seq->limit);
		if (seq->n_tokens + keep > seq->cap_tokens)
		{
			int64		cap = Max(seq->cap_tokens * 2, seq->n_tokens + keep + 1024);

			seq->tokens = seq->tokens == NULL
				? MemoryContextAllocHuge(data->cxt, mul_size((Size) cap, sizeof(int32)))
				: repalloc_huge(seq->tokens, mul_size((Size) cap, sizeof(int32)));
			seq->cap_tokens = cap;
		}
		it = array_create_iterator(arr, 0, NULL);
		while (i < keep && array_iterate(it, &elem, &isnull))
		{
			char		buf[32];

			seq->tokens[seq->n_tokens + i++] = isnull ? -1
				: category_index(data, &seq->cat, category_text(seq->cat.col.kind, elem, buf));
		}
		array_free_iterator(it);
		seq->n_tokens += keep;
		seq->row_count[data->n_rows] = keep;
		seq->longest = Max(seq->longest, keep);
	}
}

/*
 * Each sequence column's L, once every row is read: the reference's, or
 * max_length, or the longest array's; the example grows by L ids and the length.
 */
void
pgdl_pack_finish_sequences(PackData *data, int32 buffer_rows)
{
	for (int s = 0; s < data->n_sequences; s++)
	{
		PackSequence *seq = &data->seqs[s];

		seq->length = seq->limit > 0 ? seq->limit : seq->longest;
		if (seq->length == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("sequence column \"%s\" has no tokens", seq->cat.col.name),
					 errdetail("Its array is empty or NULL in every row packed."),
					 errhint("Give max_length to pack empty sequences.")));
		seq->ids = MemoryContextAlloc(data->cxt, sizeof(int32) * seq->length);
		data->n_total += seq->length + 1;
	}
	pgdl_pack_check_buffer_size(data->n_total, buffer_rows);
}

static bool vocabulary_integer;	/* for cmp_vocabulary: qsort has no argument */

static int
cmp_vocabulary(const void *a, const void *b)
{
	return pgdl_category_compare(vocabulary_integer, *(char *const *) a, *(char *const *) b);
}

/*
 * A one-hot column's floats: one per value seen, within PGDL_MAX_ONE_HOT (a
 * column of more values trains better as ids into an embedding).
 */
static int32
one_hot_width(const PackCategorical *cat)
{
	if (cat->n_values == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("one-hot column \"%s\" has no values", cat->col.name),
				 errdetail("It is NULL in every row packed.")));
	if (cat->n_values > PGDL_MAX_ONE_HOT)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("one-hot column \"%s\" has %d distinct values, more than %d",
						cat->col.name, cat->n_values, PGDL_MAX_ONE_HOT),
				 errdetail("A one-hot column takes a feature per value."),
				 errhint("Leave it out of one_hot: as a categorical column it is packed as ids, for an embedding.")));
	return cat->n_values;
}

/*
 * Column c's ids (c counts the categorical columns, then the sequence
 * columns, whose L is length): its distinct values sorted (numerically for
 * integers, by bytes for text, so that ids do not depend on the order of the
 * rows or the locale), value i having id i + 1 (i + 2 in a sequence, after
 * padding and unseen); or, with a reference, the reference's ids (unseen for
 * a value it has not seen).  Pushes the column's vocabulary to state, as
 * stored in pgdl.datasets.categorical.
 */
static void
make_vocabulary(PackData *data, PackCategorical *cat, int c, int32 length, const PackReference *ref,
				JsonbParseState **state)
{
	int32		first = length > 0 ? PGDL_SEQUENCE_UNSEEN + 1 : 1;
	char	  **sorted;

	cat->id_of = MemoryContextAlloc(data->cxt, sizeof(int32) * Max(cat->n_values, 1));
	cat->width = 1;
	if (ref->ds != NULL && cat->one_hot)
		cat->width = ref->ds->vocabulary[c].n_values;
	else if (cat->one_hot)
		cat->width = one_hot_width(cat);
	if (ref->ds != NULL)
	{
		if (ref->ds->vocabulary[c].is_integer != cat->is_integer)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("%s column \"%s\" has type %s, but column \"%s\" of reference dataset \"%s\" was %s",
							cat->what, cat->col.name, format_type_be(cat->col.type), ref->ds->vocabulary[c].column,
							ref->name, ref->ds->vocabulary[c].is_integer ? "an integer" : "text")));
		for (int32 i = 0; i < cat->n_values; i++)
			cat->id_of[i] = pgdl_dataset_category_id(ref->ds, c, cat->values[i]);
		return;
	}

	sorted = palloc(sizeof(char *) * Max(cat->n_values, 1));
	memcpy(sorted, cat->values, sizeof(char *) * cat->n_values);
	vocabulary_integer = cat->is_integer;
	qsort(sorted, cat->n_values, sizeof(char *), cmp_vocabulary);
	for (int32 i = 0; i < cat->n_values; i++)
	{
		PackSeen   *hit = hash_search(cat->seen, &sorted[i], HASH_FIND, NULL);

		Assert(hit != NULL);
		cat->id_of[hit->index] = i + first;
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}

	(void) pushJsonbValue(state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_string(state, "column", cat->col.name);
	pgdl_jsonb_put_string(state, "type", cat->is_integer ? "integer" : "text");
	if (cat->one_hot)
		pgdl_jsonb_put_bool(state, "one_hot", true);
	if (length > 0)
	{
		pgdl_jsonb_put_int(state, "length", length);
		pgdl_jsonb_put_int(state, "padding", PGDL_SEQUENCE_PADDING);
		pgdl_jsonb_put_int(state, "unseen", PGDL_SEQUENCE_UNSEEN);
	}
	pgdl_jsonb_put_key(state, "values");
	(void) pushJsonbValue(state, WJB_BEGIN_ARRAY, NULL);
	for (int32 i = 0; i < cat->n_values; i++)
		pgdl_jsonb_put_string(state, NULL, sorted[i]);
	(void) pushJsonbValue(state, WJB_END_ARRAY, NULL);
	(void) pushJsonbValue(state, WJB_END_OBJECT, NULL);
	pfree(sorted);
}

/*
 * The ids of every categorical and sequence column.  Returns the
 * vocabularies as stored in pgdl.datasets.categorical (the reference's, with
 * one), NULL when there are none.
 */
Jsonb *
pgdl_pack_make_vocabularies(PackData *data, const PackReference *ref)
{
	JsonbParseState *state = NULL;

	if (data->n_categorical + data->n_sequences == 0)
		return NULL;
	(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (int c = 0; c < data->n_categorical; c++)
		make_vocabulary(data, &data->cats[c], c, 0, ref, &state);
	for (int s = 0; s < data->n_sequences; s++)
		make_vocabulary(data, &data->seqs[s].cat, data->n_categorical + s, data->seqs[s].length, ref, &state);
	if (ref->ds != NULL)
		return ref->ds->categorical;
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_ARRAY, NULL));
}
