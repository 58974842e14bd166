/*
 * pack_classes.c -- the classes of a classification label: its distinct values
 * sorted (integers numerically, text by bytes, whatever the locale), each
 * row's class the index of its value; or, with a reference, the reference's
 * classes, which must include every value.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "base/base.h"
#include "nn/nn.h"
#include "data/pack.h"

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/* Byte order (the "C" collation): the same classes whatever the database's locale. */
static int
cmp_string(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

typedef struct PackClassRef
{
	const char *value;
	int			index;
} PackClassRef;

static int
cmp_class_ref(const void *a, const void *b)
{
	return strcmp(((const PackClassRef *) a)->value, ((const PackClassRef *) b)->value);
}

/* The labels' distinct values, sorted (int64 or char *, by the label's kind); how many. */
static int64
distinct_labels(const PackData *data, void **distinct_out)
{
	int64		n = data->n_rows;
	bool		is_text = data->label.kind == PACK_TEXT;
	Size		esize = is_text ? sizeof(char *) : sizeof(int64);
	void	   *distinct = MemoryContextAllocHuge(CurrentMemoryContext, mul_size((Size) n, esize));
	int64		n_distinct = 0;

	memcpy(distinct, is_text ? (void *) data->label_text : (void *) data->label_int, (Size) n * esize);
	qsort(distinct, (size_t) n, esize, is_text ? cmp_string : cmp_int64);
	for (int64 i = 0; i < n; i++)
	{
		bool		same;

		CHECK_FOR_INTERRUPTS();
		if (is_text)
			same = n_distinct > 0 && strcmp(((char **) distinct)[i], ((char **) distinct)[n_distinct - 1]) == 0;
		else
			same = n_distinct > 0 && ((int64 *) distinct)[i] == ((int64 *) distinct)[n_distinct - 1];
		if (same)
			continue;
		if (is_text)
			((char **) distinct)[n_distinct] = ((char **) distinct)[i];
		else
			((int64 *) distinct)[n_distinct] = ((int64 *) distinct)[i];
		n_distinct++;
	}
	*distinct_out = distinct;
	return n_distinct;
}

/* Each distinct value's class in the reference, or an error naming a value it lacks. */
static void
reference_classes(const PackReference *ref, char **distinct_text, int64 n_distinct, int *distinct_class)
{
	int			n_classes = ref->ds->n_classes;
	PackClassRef *sorted = palloc(sizeof(PackClassRef) * Max(n_classes, 1));

	for (int k = 0; k < n_classes; k++)
	{
		sorted[k].value = ref->ds->classes[k];
		sorted[k].index = k;
	}
	qsort(sorted, n_classes, sizeof(PackClassRef), cmp_class_ref);
	for (int64 i = 0; i < n_distinct; i++)
	{
		PackClassRef key = {distinct_text[i], 0};
		PackClassRef *hit = bsearch(&key, sorted, n_classes, sizeof(PackClassRef), cmp_class_ref);

		if (hit == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("label value \"%s\" is not one of the classes of reference dataset \"%s\"",
							distinct_text[i], ref->name),
					 errdetail("The reference dataset has %d classes; a model trained on it cannot predict other values.",
							   n_classes)));
		distinct_class[i] = hit->index;
	}
}

/*
 * Class indices of every row (as floats, y's format) and the class list:
 * the distinct label values sorted, or the reference's classes.  The labels' arrays are
 * freed: only the classes are needed from here.
 */
float *
pgdl_pack_make_classes(PackData *data, const PackReference *ref, char ***classes_out, int *n_classes_out)
{
	bool		is_text = data->label.kind == PACK_TEXT;
	Size		esize = is_text ? sizeof(char *) : sizeof(int64);
	void	   *distinct;
	int64		n_distinct = distinct_labels(data, &distinct);
	char	  **distinct_text;
	int		   *distinct_class;
	float	   *y;

	if (ref->ds == NULL && n_distinct > NN_MAX_CLASSES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("label column \"%s\" has " INT64_FORMAT " distinct values, more than the %d classes allowed",
						data->label.name, n_distinct, NN_MAX_CLASSES),
				 errhint("For a numeric target, use a real or double precision label (regression).")));
	/* a reference has the classes: a test set may hold one of them only */
	if (ref->ds == NULL && n_distinct == 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("label column \"%s\" has one class only", data->label.name),
				 errdetail("Every one of the " INT64_FORMAT " rows packed has the label \"%s\": a classifier has nothing to tell apart.",
						   data->n_rows, pgdl_echo(is_text ? ((char **) distinct)[0]
												   : psprintf(INT64_FORMAT, ((int64 *) distinct)[0]))),
				 errhint("Pack more rows, with other classes, or a real or double precision label as a regression target.")));

	/* their text, and their class */
	distinct_text = palloc(sizeof(char *) * n_distinct);
	distinct_class = palloc(sizeof(int) * n_distinct);
	for (int64 i = 0; i < n_distinct; i++)
	{
		distinct_text[i] = is_text ? ((char **) distinct)[i]
			: psprintf(INT64_FORMAT, ((int64 *) distinct)[i]);
		distinct_class[i] = (int) i;
	}
	if (ref->ds != NULL)
	{
		reference_classes(ref, distinct_text, n_distinct, distinct_class);
		*classes_out = ref->ds->classes;
		*n_classes_out = ref->ds->n_classes;
	}
	else
	{
		*classes_out = distinct_text;
		*n_classes_out = (int) n_distinct;
	}

	/* every row's class */
	y = MemoryContextAllocHuge(CurrentMemoryContext, mul_size((Size) data->n_rows, sizeof(float)));
	for (int64 r = 0; r < data->n_rows; r++)
	{
		void	   *hit;

		if ((r & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		hit = is_text
			? bsearch(&data->label_text[r], distinct, (size_t) n_distinct, esize, cmp_string)
			: bsearch(&data->label_int[r], distinct, (size_t) n_distinct, esize, cmp_int64);
		Assert(hit != NULL);
		y[r] = (float) distinct_class[((char *) hit - (char *) distinct) / esize];
	}

	/* what a large source would keep for nothing (the strings of text labels stay: classes point to them) */
	pfree(distinct);
	if (is_text)
		pfree(data->label_text);
	else
		pfree(data->label_int);
	data->label_text = NULL;
	data->label_int = NULL;
	return y;
}
