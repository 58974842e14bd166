/*
 * pack_write.c -- the packed table and its pgdl.datasets row: the output's
 * names checked free and the buffers counted and sized before anything is
 * created; then the table, its buffers in the shuffled order, and the row.
 *
 *   output (part integer, buffer_id integer, n integer, x real[], y real[])
 *   PARTITION BY LIST (part): output_p0 .. output_p<partitions - 1>
 *
 * Buffer b holds the rows at positions b * buffer_rows .. of the shuffled
 * order, in partition b % partitions (every partition gets at least one): x
 * their n examples of n_total floats (the numeric features normalized, each
 * categorical id, each sequence's L ids and its length), y their n class
 * indices or n * n_targets targets.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "data/pack.h"

/* A buffer's x is one real[]: at most MaxArraySize elements. */
void
pgdl_pack_check_buffer_size(int64 n_total, int32 buffer_rows)
{
	if (n_total * Min(buffer_rows, PGDL_MAX_BUFFER_ROWS) > (int64) MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a buffer of %d rows of " INT64_FORMAT " features is too large", buffer_rows, n_total),
				 errdetail("A buffer's features are one real[] array of at most %d elements.", (int) MaxArraySize),
				 errhint("Use a smaller buffer_rows.")));
}

/* How many buffers the rows fill; every partition must get one. */
int32
pgdl_pack_count_buffers(const PackData *data, const PackArgs *args)
{
	int64		n_buffers = (data->n_rows + args->buffer_rows - 1) / args->buffer_rows;

	if (n_buffers > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("source has too many rows for buffers of %d rows", args->buffer_rows),
				 errhint("Use a larger buffer_rows.")));

	/*
	 * An empty partition would give the worker that owns it nothing to train
	 * on, and a model hopping through it no step: refuse rather than create one.
	 */
	if (args->partitions > n_buffers)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("more partitions (%d) than buffers (" INT64_FORMAT ")", args->partitions, n_buffers),
				 errdetail("Every partition needs at least one buffer; " INT64_FORMAT " rows in buffers of up to %d rows fill " INT64_FORMAT ".",
						   data->n_rows, args->buffer_rows, n_buffers),
				 errhint("Use partitions => " INT64_FORMAT " or fewer, or a smaller buffer_rows.", n_buffers)));
	return (int32) n_buffers;
}

void
pgdl_pack_check_output(const char *output, int partitions, PackOutput *out)
{
	List	   *names = stringToQualifiedNameList(output);
	RangeVar   *rv = makeRangeVarFromNameList(names);
	Oid			nsp = RangeVarGetCreationNamespace(rv);
	char		suffix[16];

	out->namespace = nsp;
	out->schema = get_namespace_name(nsp);
	out->name = rv->relname;
	out->qualified = quote_qualified_identifier(out->schema, out->name);

	snprintf(suffix, sizeof(suffix), "_p%d", partitions - 1);
	if (strlen(out->name) + strlen(suffix) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("output name \"%s\" is too long", out->name),
				 errdetail("Its partitions are named %s_p0 to %s%s, and names have at most %d bytes.",
						   out->name, out->name, suffix, NAMEDATALEN - 1)));

	for (int k = -1; k < partitions; k++)
	{
		char	   *name = k < 0 ? out->name : psprintf("%s_p%d", out->name, k);

		if (OidIsValid(get_relname_relid(name, nsp)))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("relation \"%s\" already exists", quote_qualified_identifier(out->schema, name)),
					 k < 0 ? errhint("Drop it, or choose another output name.")
					 : errdetail("pgdl.pack would create it as partition %d of \"%s\".", k, out->name)));
	}
}

static void
exec_utility(const char *sql)
{
	int			ret = SPI_execute(sql, false, 0);

	if (ret != SPI_OK_UTILITY)
		elog(ERROR, "pgdl.pack: \"%s\" failed: %s", sql, SPI_result_code_string(ret));
}

/* The packed table and its partitions. */
void
pgdl_pack_create_table(const PackOutput *out, int partitions, bool weighted)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "CREATE TABLE %s (part integer NOT NULL, buffer_id integer NOT NULL, n integer NOT NULL,"
					 " x real[] NOT NULL, y real[] NOT NULL,%s PRIMARY KEY (part, buffer_id))"
					 " PARTITION BY LIST (part)", out->qualified, weighted ? " w real[] NOT NULL," : "");
	exec_utility(sql.data);

	/* before the partitions, which take their columns' storage from it */
	resetStringInfo(&sql);
	appendStringInfo(&sql, "ALTER TABLE %s ALTER COLUMN x SET STORAGE EXTERNAL, ALTER COLUMN y SET STORAGE EXTERNAL%s",
					 out->qualified, weighted ? ", ALTER COLUMN w SET STORAGE EXTERNAL" : "");
	exec_utility(sql.data);

	for (int k = 0; k < partitions; k++)
	{
		char	   *part = psprintf("%s_p%d", out->name, k);

		CHECK_FOR_INTERRUPTS();
		resetStringInfo(&sql);
		appendStringInfo(&sql, "CREATE TABLE %s PARTITION OF %s FOR VALUES IN (%d)",
						 quote_qualified_identifier(out->schema, part), out->qualified, k);
		exec_utility(sql.data);
	}
}

/* The row at position pos of the shuffled order, and its number (in the order read). */
static inline const float *
ordered_row(const PackOrder *order, int64 pos, int64 *row)
{
	if (order->spill != NULL)
		return pgdl_spill_row_at(order->spill, pos, row);
	*row = order->perm[pos];
	return pgdl_pack_row_features(order->data, *row);
}

/* Row r's sequences, each as its L ids and its length (pgdl_sequence_layout), into out. */
static void
write_sequences(const PackData *data, int64 r, float *out)
{
	for (int s = 0; s < data->n_sequences; s++)
	{
		const PackSequence *seq = &data->seqs[s];
		const int32 *tokens = seq->tokens + seq->row_start[r];
		int32		n = seq->row_count[r];

		for (int32 i = 0; i < n; i++)
			seq->ids[i] = tokens[i] < 0 ? PGDL_SEQUENCE_UNSEEN : seq->cat.id_of[tokens[i]];
		pgdl_sequence_layout(seq->ids, n, seq->length, out);
		out += seq->length + 1;
	}
}

/*
 * Row r's categorical columns into out: each one's id, exact and not
 * normalized, or one-hot (id i as 1 at i - 1; none for 0, unseen or NULL).
 */
static float *
write_categorical(const PackData *data, int64 r, float *out)
{
	for (int c = 0; c < data->n_categorical; c++)
	{
		const PackCategorical *cat = &data->cats[c];
		int32		p = cat->row_index[r];
		int32		id = p < 0 ? 0 : cat->id_of[p];

		if (cat->one_hot)
		{
			memset(out, 0, sizeof(float) * cat->width);
			if (id > 0)
				out[id - 1] = 1.0f;
		}
		else
			out[0] = (float) id;
		out += cat->width;
	}
	return out;
}

/*
 * A row's numeric features src into dst: a missing one imputed, then
 * normalized, as pgdl_dataset_expand and pgdl_dataset_normalize do it; then
 * the indicators of those that were missing.  Returns where the ids go.
 */
static float *
write_numeric(const PackNorm *norm, int32 nf, const float *src, float *dst)
{
	if (norm->fill != NULL)
		for (int j = 0; j < nf; j++)
			dst[j] = isnan(src[j]) ? norm->fill[j] : src[j];
	else
		memcpy(dst, src, sizeof(float) * nf);
	if (norm->mean != NULL)
		for (int j = 0; j < nf; j++)
			dst[j] = (dst[j] - norm->mean[j]) / norm->std[j];
	else if (norm->scale != 1.0f)
		for (int j = 0; j < nf; j++)
			dst[j] = dst[j] * norm->scale;
	for (int32 i = 0; i < norm->n_indicators; i++)
		dst[nf + i] = isnan(src[norm->indicators[i]]) ? 1.0f : 0.0f;
	return dst + nf + norm->n_indicators;
}

/* The rows at positions first .. first + n normalized into x, their targets into y, their weights into w. */
static void
fill_buffer(const PackOrder *order, const PackNorm *norm, const float *y_all,
			int n_targets, int64 first, int32 n, float *x, float *y, float *w)
{
	const PackData *data = order->data;

	for (int32 i = 0; i < n; i++)
	{
		int64		r;
		const float *src = ordered_row(order, first + i, &r);
		float	   *dst = x + (int64) i * data->n_total;

		dst = write_numeric(norm, data->n_features, src, dst);
		dst = write_categorical(data, r, dst);
		write_sequences(data, r, dst);
		memcpy(y + (int64) i * n_targets, y_all + r * n_targets, sizeof(float) * n_targets);
		if (w != NULL)
			w[i] = data->weights[r];
	}
}

/*
 * Buffer b: the rows at positions b * buffer_rows ... of the order,
 * normalized, with their targets; fn sees each in turn (kept: false, the
 * buffer is freed after the call).
 */
void
pgdl_pack_each_buffer(const PackOrder *order, const PackNorm *norm, const float *y_all, int n_targets,
					  int32 buffer_rows, int32 n_buffers, PgdlBufferFn fn, void *arg)
{
	MemoryContext bufcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl pack buffer",
												 ALLOCSET_DEFAULT_SIZES);

	for (int32 b = 0; b < n_buffers; b++)
	{
		int64		first = (int64) b * buffer_rows;
		int32		n = (int32) Min((int64) buffer_rows, order->data->n_rows - first);
		MemoryContext old = MemoryContextSwitchTo(bufcxt);
		float	   *x = palloc_extended(mul_size(mul_size((Size) n, order->data->n_total), sizeof(float)),
										MCXT_ALLOC_HUGE);
		float	   *y = palloc(mul_size(mul_size((Size) n, n_targets), sizeof(float)));
		float	   *w = order->data->weights != NULL ? palloc(sizeof(float) * (Size) n) : NULL;

		CHECK_FOR_INTERRUPTS();
		fill_buffer(order, norm, y_all, n_targets, first, n, x, y, w);
		MemoryContextSwitchTo(old);
		fn(arg, x, y, w, n, false);
		MemoryContextReset(bufcxt);
	}
	MemoryContextDelete(bufcxt);
}

/* Where pgdl_pack_write_buffers is: its INSERT, and the buffers written so far. */
typedef struct PackInsert
{
	SPIPlanPtr	plan;
	int32		partitions;
	int32		n_buffers;
	int32		b;				/* the next buffer's id */
	int64		rows;			/* written so far */
	int64		n_floats;		/* an example's */
	int			n_targets;
} PackInsert;

static void
insert_buffer(void *arg, const float *xdata, const float *ydata, const float *wdata, int32 n, bool kept)
{
	PackInsert *ins = arg;
	ArrayType  *x = pgdl_float4_array_new((int64) n * ins->n_floats);
	ArrayType  *y = pgdl_float4_array_new((int64) n * ins->n_targets);
	ArrayType  *w = wdata != NULL ? pgdl_float4_array_new(n) : NULL;
	Datum		values[6];
	int			ret;

	memcpy(ARR_DATA_PTR(x), xdata, sizeof(float) * n * ins->n_floats);
	memcpy(ARR_DATA_PTR(y), ydata, sizeof(float) * n * ins->n_targets);
	if (w != NULL)
		memcpy(ARR_DATA_PTR(w), wdata, sizeof(float) * n);
	values[0] = Int32GetDatum(ins->b % ins->partitions);
	values[1] = Int32GetDatum(ins->b);
	values[2] = Int32GetDatum(n);
	values[3] = PointerGetDatum(x);
	values[4] = PointerGetDatum(y);
	values[5] = PointerGetDatum(w);
	ret = SPI_execute_plan(ins->plan, values, NULL, false, 0);
	if (ret != SPI_OK_INSERT)
		elog(ERROR, "pgdl.pack: inserting buffer %d failed: %s", ins->b, SPI_result_code_string(ret));
	ins->b++;
	ins->rows += n;
	pgdl_call_progress_update(ins->b, ins->rows, 0.5 + 0.5 * ins->b / ins->n_buffers);
	pfree(x);
	pfree(y);
	if (w != NULL)
		pfree(w);
}

/* Buffer b in partition b % partitions, through one prepared INSERT. */
void
pgdl_pack_write_buffers(const PackOutput *out, const PackOrder *order, const PackNorm *norm,
						const float *y_all, int n_targets,
						int32 buffer_rows, int32 partitions, int32 n_buffers)
{
	Oid			types[6] = {INT4OID, INT4OID, INT4OID, FLOAT4ARRAYOID, FLOAT4ARRAYOID, FLOAT4ARRAYOID};
	bool		weighted = order->data->weights != NULL;
	char	   *sql = psprintf(weighted
							   ? "INSERT INTO %s (part, buffer_id, n, x, y, w) VALUES ($1, $2, $3, $4, $5, $6)"
							   : "INSERT INTO %s (part, buffer_id, n, x, y) VALUES ($1, $2, $3, $4, $5)",
							   out->qualified);
	PackInsert	ins = {0};

	ins.plan = SPI_prepare(sql, weighted ? 6 : 5, types);
	if (ins.plan == NULL)
		elog(ERROR, "pgdl.pack: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	ins.partitions = partitions;
	ins.n_buffers = n_buffers;
	ins.n_floats = order->data->n_total;
	ins.n_targets = n_targets;
	pgdl_call_progress_phase(PGDL_PHASE_WRITING, 0, n_buffers, true);
	pgdl_pack_each_buffer(order, norm, y_all, n_targets, buffer_rows, n_buffers, insert_buffer, &ins);
	SPI_freeplan(ins.plan);
}

/* classes as a text[] */
static Datum
classes_array(char **classes, int n_classes)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n_classes, 1));

	for (int k = 0; k < n_classes; k++)
		elems[k] = CStringGetTextDatum(classes[k]);
	return PointerGetDatum(construct_array(elems, n_classes, TEXTOID, -1, false, TYPALIGN_INT));
}

void
pgdl_pack_store_weighted(int64 dataset, const PackData *data)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(dataset)};
	int			ret;

	if (data->weights == NULL)
		return;
	ret = SPI_execute_with_args("UPDATE pgdl.datasets SET weighted = true WHERE id = $1",
								1, types, values, NULL, false, 0);
	if (ret != SPI_OK_UPDATE || SPI_processed != 1)
		elog(ERROR, "pgdl.pack: storing the dataset's weighted flag failed: %s", SPI_result_code_string(ret));
}

/* Registers the dataset; its id. */
int64
pgdl_pack_register_dataset(const PackOutput *out, const PackArgs *args, const PackData *data,
						   char **classes, int n_classes, int n_targets, Jsonb *normalization,
						   int32 n_buffers, const PackReference *ref, Jsonb *categorical)
{
	Oid			types[17] = {OIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, INT4OID, TEXTARRAYOID,
	OIDOID, JSONBOID, INT8OID, INT4OID, INT4OID, INT4OID, INT8OID, INT8OID, JSONBOID};
	Datum		values[17];
	char		nulls[17];
	bool		isnull;
	int			ret;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = ObjectIdGetDatum(get_relname_relid(out->name, out->namespace));
	values[1] = CStringGetTextDatum(DatumGetCString(DirectFunctionCall1(regclassout,
																	   ObjectIdGetDatum(args->source))));
	values[2] = CStringGetTextDatum(args->features);
	values[3] = CStringGetTextDatum(args->label);
	values[4] = CStringGetTextDatum(data->classification ? "classification" : "regression");
	values[5] = Int32GetDatum(data->n_total);
	values[6] = Int32GetDatum(n_targets);
	values[7] = data->classification ? classes_array(classes, n_classes) : (Datum) 0;
	nulls[7] = data->classification ? ' ' : 'n';
	values[8] = ObjectIdGetDatum(data->label.type);
	values[9] = JsonbPGetDatum(normalization);
	values[10] = Int64GetDatum(data->n_rows);
	values[11] = Int32GetDatum(n_buffers);
	values[12] = Int32GetDatum(args->buffer_rows);
	values[13] = Int32GetDatum(args->partitions);
	values[14] = Int64GetDatum(args->seed);
	values[15] = ref->ds != NULL ? Int64GetDatum(ref->ds->id) : (Datum) 0;
	nulls[15] = ref->ds != NULL ? ' ' : 'n';
	values[16] = categorical != NULL ? JsonbPGetDatum(categorical) : (Datum) 0;
	nulls[16] = categorical != NULL ? ' ' : 'n';

	/* categorical only when there are some: a catalog not yet updated to 0.6.0 lacks the column */
	ret = SPI_execute_with_args(categorical != NULL
								? "INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features,"
								" n_targets, classes, label_type, normalization, n_rows, n_buffers, buffer_rows,"
								" partitions, seed, reference, categorical)"
								" VALUES ($1::pg_catalog.regclass, $2, $3, $4, $5, $6, $7, $8,"
								" $9::pg_catalog.regtype, $10, $11, $12, $13, $14, $15, $16, $17) RETURNING id"
								: "INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features,"
								" n_targets, classes, label_type, normalization, n_rows, n_buffers, buffer_rows,"
								" partitions, seed, reference)"
								" VALUES ($1::pg_catalog.regclass, $2, $3, $4, $5, $6, $7, $8,"
								" $9::pg_catalog.regtype, $10, $11, $12, $13, $14, $15, $16) RETURNING id",
								categorical != NULL ? 17 : 16, types, values, nulls, false, 1);
	if (ret != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
		elog(ERROR, "pgdl.pack: registering the dataset failed: %s", SPI_result_code_string(ret));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}
