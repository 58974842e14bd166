/*
 * pack.c -- pgdl.pack: a source table to shuffled minibatch buffers in a
 * LIST-partitioned table, registered in pgdl.datasets.  This file is the SQL
 * entry and its flow; each step is in the file named beside it.
 *
 * The work runs in this order, so that every error about the arguments or the
 * data is raised before anything is created (and the caller's transaction
 * rolls back the rest):
 *
 *   1. check the arguments (pack_args.c), find the columns and their types and
 *      read the reference dataset (pack_columns.c), check that the output's
 *      names are free (pack_write.c);
 *   2. read the whole source once, in its physical order (pack_read.c):
 *      features as float32 into memory, or, once they pass
 *      maintenance_work_mem, into temporary files (pack_spill.c); labels as
 *      they are, into memory; categorical and sequence values as provisional
 *      indices (pack_vocab.c);
 *   3. compute the classes or map to the reference's (pack_classes.c), the
 *      vocabularies (pack_vocab.c), the imputation of missing features
 *      (pack_impute.c) and the normalization of the features and of
 *      regression targets (pack_normalize.c);
 *   4. shuffle the row order once (pack_order.c: seeded Fisher-Yates on
 *      nn_rng_u64); spilled rows are scattered to bucket files by their place
 *      in that order;
 *   5. create the packed table, write buffer after buffer through one prepared
 *      INSERT, and register the dataset (pack_write.c).
 *
 * The order is a function of the seed and the rows alone, so the packed
 * table's bytes are the same whether the rows were spilled or not.  Memory is
 * about maintenance_work_mem: the features, or once spilled one bucket of
 * them, less the 12 bytes a row that stay (its class and its position); the
 * labels (8 bytes a row for numbers) stay until the classes are made; the
 * tokens of sequence columns (4 bytes each, 12 a row) stay to the end.
 *
 * The packed table holds buffer b, the rows at positions b * buffer_rows ..
 * of that order, in partition b % partitions: x their examples (the numeric
 * features imputed and normalized, the indicators of those that were missing,
 * then the categorical ids or one-hot floats, then each sequence's ids and
 * length), y their classes or targets, and with weight => col a column w of
 * their weights.  Its pgdl.datasets row holds what
 * reading it back and predicting need: the source and its columns, the task,
 * an example's floats (n_features) and n_targets, the classes and the label's
 * type, the normalization, the vocabularies (categorical), the counts of rows,
 * buffers and partitions, the seed, and the reference.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "data/pack.h"

PG_FUNCTION_INFO_V1(pgdl_pack);
Datum
pgdl_pack(PG_FUNCTION_ARGS)
{
	PackArgs	args;
	PackReference ref = {NULL, NULL};
	PackData	data;
	PackOutput	out;
	PackNorm	norm;
	MemoryContext packcxt;
	MemoryContext old;
	float	   *y;
	char	  **classes = NULL;
	int			n_classes = 0;
	int			n_targets;
	Jsonb	   *categorical;
	Jsonb	   *target_normalization;
	int32		n_buffers;
	PackOrder	order;
	int64		id;

	pgdl_engine_prepare();
	pgdl_pack_read_args(fcinfo, &args);
	pgdl_pack_check_args(&args);
	pgdl_call_progress_begin(PGDL_CALL_PACK, args.source);

	packcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl pack", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(packcxt);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgdl.pack: SPI_connect failed");
	MemoryContextSwitchTo(packcxt);

	/* the columns, the reference, the output's names */
	memset(&data, 0, sizeof(data));
	data.cxt = packcxt;
	data.standardize = args.standardize;
	data.budget = mul_size((Size) maintenance_work_mem, 1024);
	data.max_categories = args.max_categories;
	if (OidIsValid(args.reference))
		pgdl_pack_open_reference(args.reference, &args, packcxt, &ref);
	data.impute = args.impute != NULL || (ref.ds != NULL && ref.ds->impute != NULL);
	pgdl_pack_find_source(&args, &data);
	pgdl_pack_check_standardize_target(&args, &data);
	if (OidIsValid(args.reference))
		pgdl_pack_read_reference(&data, &ref);
	pgdl_pack_check_output(args.output, args.partitions, &out);

	/* the data: every error about it comes from here, before anything is created */
	pgdl_pack_read_source(&data, args.skip, args.buffer_rows, &ref, args.source);
	pgdl_pack_report_rows(&data);
	pgdl_pack_check_weights(&data);
	pgdl_pack_finish_sequences(&data, args.buffer_rows);
	n_buffers = pgdl_pack_count_buffers(&data, &args);
	pgdl_call_progress_phase(PGDL_PHASE_PREPARING, 0, -1, false);
	pgdl_call_progress_update(0, 0, 0.5);
	y = data.classification ? pgdl_pack_make_classes(&data, &ref, &classes, &n_classes) : data.label_float;
	n_targets = data.classification ? 1 : data.n_targets;
	target_normalization = pgdl_pack_standardize_targets(&args, &data, &ref, y);
	categorical = pgdl_pack_make_vocabularies(&data, &ref);
	pgdl_pack_make_normalization(&args, &data, &ref, &norm);
	pgdl_pack_finish_layout(&data, &norm, args.buffer_rows);
	pgdl_pack_make_order(&data, args.seed, &norm, packcxt, &order);
	pgdl_pack_finish_normalization(&data, &norm);
	pgdl_pack_check_normalized(&data, &norm);

	/* nothing was created before this point */
	pgdl_pack_create_table(&out, args.partitions, data.weights != NULL);
	pgdl_pack_write_buffers(&out, &order, &norm, y, n_targets, args.buffer_rows, args.partitions, n_buffers);
	if (data.spill != NULL)
		pgdl_spill_end(data.spill);
	id = pgdl_pack_register_dataset(&out, &args, &data, classes, n_classes, n_targets, norm.jsonb, n_buffers,
									&ref, categorical);
	pgdl_pack_store_target_normalization(id, target_normalization);
	pgdl_pack_store_weighted(id, &data);
	pgdl_pack_store_imputation(id, norm.imputation);

	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "pgdl.pack: SPI_finish failed");
	MemoryContextSwitchTo(old);
	MemoryContextDelete(packcxt);
	pgdl_call_progress_end();

	PG_RETURN_INT64(id);
}
