/*
 * data/pack.h -- inside data/: what the files of pgdl.pack share: the state of
 * one call (its arguments, the source as read, the normalization, the order,
 * the output) and the steps pack.c runs, each from the file that owns it.
 * Only data/pack*.c include it.
 */
#ifndef PGDL_DATA_PACK_H
#define PGDL_DATA_PACK_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "fmgr.h"
#include "utils/hsearch.h"

#include "data/data.h"

/*
 * pack_spill.c: pgdl.pack's external shuffle.  Rows of floats are written in
 * the order read, scattered by their shuffled position into bucket files of
 * about `budget` bytes, then asked for position after position.
 */
typedef struct PgdlSpill PgdlSpill;
typedef void (*PgdlSpillRowFn) (void *arg, int64 row, const float *x);

extern PgdlSpill *pgdl_spill_begin(int32 n_floats);
extern void pgdl_spill_write(PgdlSpill *spill, const float *x);
extern int64 pgdl_spill_rows(const PgdlSpill *spill);
/* row r goes to position[r] (a permutation, kept by the caller); fn sees each row in written order */
extern void pgdl_spill_scatter(PgdlSpill *spill, const int64 *position, Size budget,
							   PgdlSpillRowFn fn, void *arg);
extern int	pgdl_spill_buckets(const PgdlSpill *spill);
/* positions in increasing order; *row: the row's number as written */
extern const float *pgdl_spill_row_at(PgdlSpill *spill, int64 pos, int64 *row);
extern void pgdl_spill_end(PgdlSpill *spill);

/* The arguments of pgdl.pack, checked. */
typedef struct PackArgs
{
	Oid			source;			/* InvalidOid: query is the source */
	char	   *query;			/* pack_stream.c's source of rows, when not a relation */
	char	   *features;
	char	   *label;
	char	   *output;
	int32		buffer_rows;
	int32		partitions;
	int64		seed;
	bool		has_scale;
	double		scale;
	bool		standardize;
	char	   *nulls;			/* 'error' or 'skip' */
	bool		skip;			/* nulls => 'skip' */
	Oid			reference;		/* InvalidOid when none */
	char	   *categorical;	/* NULL when none */
	int32		max_categories;
	char	   *sequence;		/* NULL when none */
	bool		has_max_length;
	int32		max_length;		/* 0: the longest array packed */
	char	   *weight;			/* the per-row weight column; NULL when none */
	bool		standardize_target; /* regression targets to mean 0 and std 1, undone by predict */
	char	   *impute;			/* 'mean', 'median', 'constant'; NULL: a missing feature is nulls' */
	bool		has_impute_value;
	double		impute_value;	/* impute => 'constant': 0 unless given */
	char	   *scaling;		/* 'standard', 'minmax', 'robust' as given; NULL when not */
	PgdlScaling scaling_kind;	/* resolved: standardize => true is STANDARD; SCALE when none */
	char	   *one_hot;		/* categorical columns one-hot (categorical themselves); NULL when none */
} PackArgs;

/* How a number of a feature or label column becomes a float. */
typedef enum PackNumKind
{
	PACK_INT2,
	PACK_INT4,
	PACK_INT8,
	PACK_FLOAT4,
	PACK_FLOAT8,
	PACK_NUMERIC,
	PACK_TEXT,					/* labels, categorical and sequence columns only */
	PACK_BOOL,					/* targets only: 0 or 1 */
	PACK_OTHER
} PackNumKind;

typedef struct PackColumn
{
	char	   *name;			/* as found in the relation */
	int			position;		/* 1-based in the cursor's SELECT list */
	Oid			type;			/* the column's type */
	PackNumKind kind;			/* of the column, or of its elements (array mode) */
	Oid			elem_base;		/* array mode: the elements' base type */
} PackColumn;

/*
 * A categorical column: each distinct value gets a provisional index, in the
 * order first seen (a hash of the values), and each kept row that index (-1
 * for NULL); the vocabulary, made once every row is read, maps provisional
 * indices to ids.
 */
typedef struct PackCategorical
{
	PackColumn	col;
	const char *what;			/* "categorical" or "sequence", for messages */
	bool		is_integer;
	HTAB	   *seen;			/* value -> provisional index */
	char	  **values;			/* by provisional index */
	int32		n_values;
	int32		cap_values;
	int32	   *row_index;		/* per kept row */
	int32	   *id_of;			/* provisional index -> id (0: unseen in the reference) */
	bool		one_hot;		/* packed as `width` floats, id i as 1 at i - 1 */
	int32		width;			/* floats of the example: 1, or the vocabulary's values one-hot */
} PackCategorical;

/*
 * A sequence column: its tokens get provisional indices as categorical
 * values do (cat; row_index unused), and go one row after another into
 * tokens (-1 for a NULL element), row r's row_count[r] of them from
 * row_start[r].  L is known once every row is read.
 */
typedef struct PackSequence
{
	PackCategorical cat;
	int32		limit;			/* tokens kept a row: max_length, the reference's L, or 0 (all) */
	int32	   *tokens;
	int64		n_tokens;
	int64		cap_tokens;
	int64	   *row_start;		/* per kept row */
	int32	   *row_count;
	int32		longest;
	int32		length;			/* L */
	int32	   *ids;			/* L of them: one row's ids, while writing */
} PackSequence;

typedef struct PackSeen
{
	char	   *value;			/* the key: a pointer to the string */
	int32		index;
} PackSeen;

/* The dataset given as reference (NULL when none), and its packed table's name for messages. */
typedef struct PackReference
{
	const PgdlDataset *ds;
	char	   *name;
} PackReference;

/* The source, read into memory. */
typedef struct PackData
{
	/* what is read */
	char	   *relname;		/* the source, for messages */
	TupleDesc	query_desc;		/* a query's rows (NULL: the source is a relation) */
	char	   *source_sql;		/* the source, qualified and quoted */
	bool		array_mode;		/* features: one array column */
	int			n_cols;			/* feature columns */
	PackColumn *cols;
	PackColumn	label;			/* the first label column */
	PackColumn *labels;			/* all n_label_cols of them */
	int			n_label_cols;
	bool		label_array;	/* targets: one array column */
	PackColumn	weight;			/* weight => col: its column (name NULL when none) */
	float	   *weights;		/* each kept row's weight; NULL when unweighted */
	int64		weights_cap;
	double		weights_sum;
	int32		n_targets;		/* floats of y per row; -1 until the first row (label_array) */
	bool		classification;
	int32		n_features;		/* -1 until the first row (array mode); numeric only */
	int			n_categorical;
	PackCategorical *cats;
	int			n_sequences;
	PackSequence *seqs;
	int32		max_categories;
	int32		n_total;		/* an example's floats: n_features, the ids, the sequences' ids and lengths */

	/* rows kept, their features in chunks of chunk_rows rows each */
	int64		n_rows;
	int64		n_read;			/* rows of the source seen, kept or skipped */
	int64		n_skipped;
	int64		chunk_rows;		/* rows per chunk (PACK_CHUNK_BYTES of them) */
	int64		first_rows;		/* rows allocated in chunk 0, which grows up to chunk_rows */
	float	  **chunks;
	int			n_chunks;
	int			max_chunks;

	/* each kept row's label: one of these, by the label's kind */
	int64		label_cap;
	int64		targets_cap;	/* rows label_float holds */
	int64	   *label_int;
	char	  **label_text;
	float	   *label_float;

	/* per feature, for the overflow check of the normalization (missing values left out) */
	float	   *fmin;
	float	   *fmax;
	bool		standardize;	/* sum the features as they are read */
	double	   *sum;			/* then: the features' sums, in the order read */
	bool		impute;			/* a NULL or NaN feature is missing (NaN), not an error */
	int64	   *n_missing;		/* then: per feature, the rows it is missing in */

	/*
	 * Features beyond `budget` bytes go to temporary files (pack_spill.c):
	 * once spill is set, the chunks are gone and every row goes through
	 * scratch into the spill.
	 */
	Size		budget;
	PgdlSpill  *spill;
	float	   *scratch;

	MemoryContext cxt;			/* where what is kept lives */
} PackData;

/*
 * The preprocessing applied while writing: missing values imputed (fill),
 * then x * scale or (x - mean) / std (mean and std: the center and divisor of
 * any scaling), then the indicators of the features that were missing.
 */
typedef struct PackNorm
{
	float		scale;			/* when mean == NULL */
	float	   *mean;
	float	   *std;
	double	   *ssq;			/* standardize: squared deviations, until std is set */
	int32		n_features;
	Jsonb	   *jsonb;			/* as stored in pgdl.datasets */
	float	   *fill;			/* per feature, what a missing value becomes; NULL: no imputation */
	int32		n_indicators;
	int32	   *indicators;		/* 0-based features, ascending */
	Jsonb	   *imputation;		/* as stored in pgdl.datasets.imputation; NULL when none */
} PackNorm;

/* Where the row at each position of the shuffled order is. */
typedef struct PackOrder
{
	const PackData *data;
	const int64 *perm;			/* in memory: the row at each position */
	PgdlSpill  *spill;			/* spilled: rows come back from it, position after position */
} PackOrder;

/* The output's schema and names, checked to be free. */
typedef struct PackOutput
{
	char	   *schema;
	char	   *name;
	char	   *qualified;		/* quoted, for SQL */
	Oid			namespace;
} PackOutput;

/* Row `row`'s features, in the order read: only while they are in memory, not spilled. */
static inline float *
pgdl_pack_row_features(const PackData *data, int64 row)
{
	return data->chunks[row / data->chunk_rows] + (row % data->chunk_rows) * data->n_features;
}

/* pack_args.c: the arguments */

extern void pgdl_pack_read_args(FunctionCallInfo fcinfo, PackArgs *args);
extern void pgdl_pack_check_args(PackArgs *args);

/* pack_columns.c: the source's columns, and the reference they must match */

extern void pgdl_pack_find_source(const PackArgs *args, PackData *data);
/* before the source is found: args' categorical and sequence columns become the reference's */
extern void pgdl_pack_open_reference(Oid packed, PackArgs *args, MemoryContext cxt, PackReference *ref);
/* the same for a reference already read (ref->ds, ref->name) */
extern void pgdl_pack_reference_columns(PackArgs *args, const PackReference *ref);
/* once it is: checked against the reference; sets each sequence's limit to the reference's L */
extern void pgdl_pack_read_reference(const PackData *data, PackReference *ref);

/* pack_read.c: reading the source */

extern void pgdl_pack_read_source(PackData *data, bool skip, int32 buffer_rows,
								  const PackReference *ref, Oid source);
/* weight => col: every kept row weighs 0 is refused */
extern void pgdl_pack_check_weights(const PackData *data);
extern void pgdl_pack_report_rows(const PackData *data);

/* pack_vocab.c: categorical and sequence values, then their ids */

/* while reading, for row data->n_rows once it is known to be kept */
extern void pgdl_pack_store_categorical(PackData *data, HeapTuple tuple, TupleDesc desc);
extern void pgdl_pack_store_sequences(PackData *data, HeapTuple tuple, TupleDesc desc, int64 row);
/* once every row is read: each sequence's L, and data->n_total with them */
extern void pgdl_pack_finish_sequences(PackData *data, int32 buffer_rows);
extern Jsonb *pgdl_pack_make_vocabularies(PackData *data, const PackReference *ref);

/* pack_classes.c: the classes of a classification label */

extern float *pgdl_pack_make_classes(PackData *data, const PackReference *ref, char ***classes_out,
									 int *n_classes_out);

/* pack_impute.c: missing values, and the quantiles of a feature */

/* After reading: norm's fill and indicators (the reference's, or learned), the jsonb to store. */
extern void pgdl_pack_make_imputation(const PackArgs *args, const PackData *data, const PackReference *ref,
									  PackNorm *norm);
/* Feature j's q-quantiles (numpy's "linear" interpolation) over the rows, a missing value as fill. */
extern void pgdl_pack_quantiles(const PackData *data, int32 j, float fill, const double *q, int nq, double *out);
/* The example's floats once every part is known: numeric, indicators, categorical widths, sequences. */
extern void pgdl_pack_finish_layout(PackData *data, const PackNorm *norm, int32 buffer_rows);
extern void pgdl_pack_store_imputation(int64 dataset, Jsonb *imputation);

/* pack_normalize.c: the normalization of the numeric features */

#define PGDL_PACK_SCALE_LARGEST 1000.0	/* pgdl_pack_scales_differ: a feature above this, */
#define PGDL_PACK_SCALE_RATIO	100.0	/* or this many times another, gives a NOTICE */
extern bool pgdl_pack_scales_differ(const float *fmin, const float *fmax, int32 n, int32 *big, int32 *small);

extern void pgdl_pack_make_normalization(const PackArgs *args, const PackData *data,
										 const PackReference *ref, PackNorm *norm);
/* a PgdlSpillRowFn, for pack_order.c's scatter of spilled rows */
extern void pgdl_pack_add_deviations(void *arg, int64 row, const float *x);
/* after pgdl_pack_make_order, which adds the deviations of spilled rows */
extern void pgdl_pack_finish_normalization(const PackData *data, PackNorm *norm);
extern void pgdl_pack_check_normalized(const PackData *data, const PackNorm *norm);
/* standardize_target: refused for classes and boolean targets (once the columns are found) */
extern void pgdl_pack_check_standardize_target(const PackArgs *args, const PackData *data);
/* y (n_rows x n_targets) standardized in place, or as the reference's were; the jsonb to store (NULL: none) */
extern Jsonb *pgdl_pack_standardize_targets(const PackArgs *args, const PackData *data, const PackReference *ref,
											float *y);
extern void pgdl_pack_store_target_normalization(int64 dataset, Jsonb *target_normalization);

/* pack_order.c: the shuffled order */

extern void pgdl_pack_make_order(PackData *data, int64 seed, PackNorm *norm, MemoryContext cxt,
								 PackOrder *order);

/* pack_write.c: the packed table and its pgdl.datasets row */

extern void pgdl_pack_check_buffer_size(int64 n_total, int32 buffer_rows);
extern int32 pgdl_pack_count_buffers(const PackData *data, const PackArgs *args);
extern void pgdl_pack_check_output(const char *output, int partitions, PackOutput *out);
extern void pgdl_pack_create_table(const PackOutput *out, int partitions, bool weighted);
/* The rows in order as buffers of buffer_rows examples, normalized, with their weights (if any) to fn. */
extern void pgdl_pack_each_buffer(const PackOrder *order, const PackNorm *norm, const float *y_all, int n_targets,
								  int32 buffer_rows, int32 n_buffers, PgdlBufferFn fn, void *arg);
extern void pgdl_pack_write_buffers(const PackOutput *out, const PackOrder *order,
									const PackNorm *norm, const float *y_all, int n_targets,
									int32 buffer_rows, int32 partitions, int32 n_buffers);
/* weight => col: the dataset's weighted flag */
extern void pgdl_pack_store_weighted(int64 dataset, const PackData *data);
extern int64 pgdl_pack_register_dataset(const PackOutput *out, const PackArgs *args,
										const PackData *data, char **classes, int n_classes,
										int n_targets, Jsonb *normalization, int32 n_buffers,
										const PackReference *ref, Jsonb *categorical);

#endif							/* PGDL_DATA_PACK_H */
