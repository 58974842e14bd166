/*
 * data/data.h -- packed tables: pgdl.pack writes them (pack*.c), packed.c
 * reads them buffer by buffer, shared_scan.c shares a partition read once
 * between workers of several jobs.
 */
#ifndef PGDL_DATA_H
#define PGDL_DATA_H

#include "catalog/catalog.h"

/* packed.c: reading packed tables, buffer by buffer, in buffer_id order */


/*
 * kept: x, y and w live in the scan's keep context, for the caller to hold on
 * to.  w: the n examples' weights (pgdl.pack's weight => ...), NULL when the
 * dataset is unweighted.
 */
typedef void (*PgdlBufferFn) (void *arg, const float *x, const float *y, const float *w, int32 n, bool kept);

/*
 * Every buffer of partition `part` (or of all, part order, when part < 0).
 * With keep_cxt, buffers are read into it (rather than into memory freed after
 * the call) while *keep_bytes allows, which it is charged.
 */
extern void pgdl_packed_scan(const PgdlDataset *ds, int32 part, PgdlBufferFn fn, void *arg,
							 MemoryContext keep_cxt, int64 *keep_bytes);
/*
 * A partition's buffers kept in memory between visits (pgdl.fit's later epochs,
 * a model hopper worker's own partitions).  A partition is kept whole or not at
 * all: when the budget runs out part way, it is read from its table every time.
 */
typedef struct PgdlHeldPartition
{
	List	   *buffers;		/* of PgdlHeldBuffer, in buffer_id order */
	bool		complete;		/* buffers holds the whole partition */
} PgdlHeldPartition;

typedef struct PgdlHeldBuffer
{
	float	   *x;
	float	   *y;
	float	   *w;				/* NULL when the dataset is unweighted */
	int32		n;
} PgdlHeldBuffer;

/* Read partition `part` (all, when < 0), keeping it in keep_cxt within *budget; fn (if any) sees every buffer. */
extern void pgdl_packed_hold(const PgdlDataset *ds, int32 part, PgdlHeldPartition *held,
							 MemoryContext keep_cxt, int64 *budget, PgdlBufferFn fn, void *arg);
/* fn over a partition: from memory when held whole, else from its table (needs a transaction). */
extern void pgdl_packed_foreach(const PgdlDataset *ds, int32 part, const PgdlHeldPartition *held,
								PgdlBufferFn fn, void *arg);

/* pack_stream.c: raw rows preprocessed as a packed dataset's were, for evaluation */

/* Whether a source given as text is a query (SELECT, WITH, VALUES, TABLE or a parenthesis) rather than a table or view name. */
extern bool pgdl_source_is_query(const char *source);
/*
 * The rows of `source` (a table or view name, or a query) to fn, buffer by
 * buffer (kept: false), as pgdl.pack(source, features, label, reference =>
 * ds's packed table) with its defaults would pack them: ds's classes,
 * normalization and vocabularies, its categorical and sequence columns.
 * Returns how many rows there were.
 */
extern int64 pgdl_pack_stream(const PgdlDataset *ds, const char *source, const char *features,
							  const char *label, PgdlBufferFn fn, void *arg);

/* shared_scan.c: a partition held by workers of several jobs, read once */

typedef enum PgdlShareResult
{
	PGDL_SHARE_READ = 0,		/* read from its table, for this worker alone */
	PGDL_SHARE_PUBLISHED,		/* read from its table, and published for other jobs' workers */
	PGDL_SHARE_ATTACHED			/* not read: another worker's copy, of the same tuple versions */
} PgdlShareResult;

/*
 * pgdl_packed_hold, in a transaction, through a DSM segment other workers of
 * any job attach (the caller's copy when one exists).  The segments live as
 * long as the process (or another that attached them).
 */
extern PgdlShareResult pgdl_shared_hold(const PgdlDataset *ds, int32 part, PgdlHeldPartition *held,
										MemoryContext keep_cxt, int64 *budget);
/* Whether the current role's workers may share ds's partitions (its kind of table, privileges, row security). */
extern bool pgdl_shared_scan_allowed(const PgdlDataset *ds);
/* held's buffers into a segment's data at `to`, as the segment lays them out: each one's x, then its y. */
extern void pgdl_shared_copy_buffers(const PgdlDataset *ds, const PgdlHeldPartition *held, char *to);

/* A packed row's x and y (detoasted) hold n examples of ds, or an error says how not. */
extern void pgdl_packed_check_row(const PgdlDataset *ds, const char *relname, int32 buffer_id, int32 n,
								  ArrayType *x, ArrayType *y, float **xdata, float **ydata);
/* A weighted dataset (weight => col at pack) refused by `what`, which carries x and y only (0A000). */
extern void pgdl_packed_refuse_weighted(const PgdlDataset *ds, const char *what);
/* A weighted dataset's packed row's w holds n finite weights >= 0, or an error says how not. */
extern float *pgdl_packed_check_weights(const char *relname, int32 buffer_id, int32 n, ArrayType *w);


/*
 * The model's input and output agree with the dataset (NULL: none, nothing to
 * check), or an error (42804) says how not: for training, validation,
 * prediction, evaluation and ONNX alike.
 */
extern void pgdl_check_model_fits(const NnSpec *spec, const PgdlDataset *ds);

#endif							/* PGDL_DATA_H */
