/*
 * pack_stream.c -- pgdl.pack without the table: the rows of a table, view or
 * query, preprocessed as a packed dataset's were and handed on buffer by
 * buffer, in memory.  Evaluation over raw rows reads them (train/evaluate.c).
 *
 * Invariant: a buffer is what pgdl.pack(source, features, label, ...,
 * reference => the dataset's packed table) would write with its default
 * buffer_rows and seed: the same steps (pack.c's 1 to 4) with the dataset as
 * the reference, so its classes, normalization and vocabularies, and the same
 * categorical and sequence columns.  Only the INSERT is left out.  A label
 * value the dataset has no class for is the error pack gives.
 */
#include "postgres.h"

#include <ctype.h>

#include "catalog/namespace.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"

#include "base/base.h"
#include "data/pack.h"

/* pgdl.pack's defaults (sql/parts/30_pack.sql), so that the buffers are a default pack's */
#define STREAM_BUFFER_ROWS	128
#define STREAM_SEED			42

bool
pgdl_source_is_query(const char *source)
{
	static const char *const keywords[] = {"select", "with", "values", "table"};
	const char *s = source;

	while (isspace((unsigned char) *s))
		s++;
	if (*s == '(')
		return true;
	for (int i = 0; i < lengthof(keywords); i++)
	{
		size_t		len = strlen(keywords[i]);

		if (pg_strncasecmp(s, keywords[i], len) == 0 &&
			(s[len] == '\0' || isspace((unsigned char) s[len]) || s[len] == '('))
			return true;
	}
	return false;
}

/* pgdl.pack's arguments for the stream: the source, the reference's columns, pack's defaults. */
static void
stream_args(const PackReference *ref, const char *source, const char *features, const char *label,
			PackArgs *args)
{
	memset(args, 0, sizeof(PackArgs));
	if (pgdl_source_is_query(source))
		args->query = pstrdup(source);
	else
		args->source = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(source)),
										NoLock, false);
	args->features = pstrdup(features);
	args->label = pstrdup(label);
	args->buffer_rows = STREAM_BUFFER_ROWS;
	args->partitions = 1;
	args->seed = STREAM_SEED;
	args->nulls = "error";
	args->reference = ref->ds->packed;
	args->max_categories = PGDL_MAX_CATEGORIES;
	pgdl_pack_check_args(args);
	pgdl_pack_reference_columns(args, ref);
}

int64
pgdl_pack_stream(const PgdlDataset *ds, const char *source, const char *features, const char *label,
				 PgdlBufferFn fn, void *arg)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl pack stream", ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	PackArgs	args;
	PackReference ref = {ds, NULL};
	PackData	data;
	PackNorm	norm;
	PackOrder	order;
	float	   *y;
	char	  **classes = NULL;
	int			n_classes = 0;
	int64		rows;

	ref.name = get_rel_name(ds->packed);
	if (ref.name == NULL)
		ref.name = "the model's training set";
	stream_args(&ref, source, features, label, &args);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgdl: SPI_connect failed");
	MemoryContextSwitchTo(cxt);

	memset(&data, 0, sizeof(data));
	data.cxt = cxt;
	data.budget = mul_size((Size) maintenance_work_mem, 1024);
	data.max_categories = args.max_categories;
	data.impute = ds->impute != NULL;
	pgdl_pack_find_source(&args, &data);
	pgdl_pack_read_reference(&data, &ref);
	pgdl_pack_read_source(&data, args.skip, args.buffer_rows, &ref, args.source);
	rows = data.n_rows;
	if (rows > 0)
	{
		pgdl_pack_finish_sequences(&data, args.buffer_rows);
		y = data.classification ? pgdl_pack_make_classes(&data, &ref, &classes, &n_classes) : data.label_float;
		(void) pgdl_pack_standardize_targets(&args, &data, &ref, y);
		(void) pgdl_pack_make_vocabularies(&data, &ref);
		pgdl_pack_make_normalization(&args, &data, &ref, &norm);
		pgdl_pack_finish_layout(&data, &norm, args.buffer_rows);
		pgdl_pack_make_order(&data, args.seed, &norm, cxt, &order);
		pgdl_pack_finish_normalization(&data, &norm);
		pgdl_pack_check_normalized(&data, &norm);
		pgdl_pack_each_buffer(&order, &norm, y, data.classification ? 1 : data.n_targets, args.buffer_rows,
							  pgdl_pack_count_buffers(&data, &args), fn, arg);
		if (data.spill != NULL)
			pgdl_spill_end(data.spill);
	}

	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "pgdl: SPI_finish failed");
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return rows;
}
