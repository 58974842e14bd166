/*
 * pack_spill.c -- pgdl.pack's external shuffle: rows of floats that do not fit
 * in memory go through temporary files, and come back in the shuffled order.
 *
 * Three passes, each sequential over its files:
 *
 *   1. write: the rows, in the order the source is read, to one run file;
 *   2. scatter: once the shuffle is known (position[r] is row r's place in the
 *      packed order), the run is read back and each row appended, with its
 *      row number, to the bucket file that owns its position: bucket k holds
 *      positions [k * bucket_rows, (k + 1) * bucket_rows);
 *   3. gather: the buckets are read in order, one at a time, each placing its
 *      rows at their positions in a bucket-sized array.
 *
 * The order is the caller's (a function of the seed alone), so the rows come
 * back in the same order whatever the memory: the packed bytes do not depend
 * on the budget.  Memory is one bucket (the budget, unless the budget would
 * need more files than max_buckets) and a BLCKSZ buffer per open file.
 *
 * The files are BufFiles in the backend's temporary tablespaces: an error
 * closes and removes them with the transaction's resource owner.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/buffile.h"
#include "utils/memutils.h"

#include "data/pack.h"

struct PgdlSpill
{
	int32		n_floats;		/* a row's floats */
	Size		row_bytes;		/* n_floats floats */
	Size		record_bytes;	/* a bucket record: the row number, then the row */
	Size		budget;			/* bytes of one bucket, at most (as asked of scatter) */
	int64		n_rows;			/* rows written */
	BufFile    *run;			/* pass 1; NULL once scattered */

	/* pass 2 */
	const int64 *position;		/* the caller's: row r goes to position[r] */
	int64		bucket_rows;
	int			n_buckets;
	BufFile   **buckets;		/* NULL once gathered */
	int64	   *bucket_fill;	/* rows written to each bucket */

	/* pass 3: the bucket in memory */
	int			loaded;			/* -1 before the first */
	float	   *x;				/* bucket_rows rows, by position - first */
	int64	   *rows;			/* their row numbers */

	MemoryContext cxt;
};

static void
spill_read(BufFile *file, void *ptr, Size size)
{
	if (BufFileRead(file, ptr, size) != size)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read from pgdl.pack's temporary file: %m")));
}

/* A spill of rows of n_floats floats. */
PgdlSpill *
pgdl_spill_begin(int32 n_floats)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl pack spill",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	PgdlSpill  *spill = palloc0(sizeof(PgdlSpill));

	Assert(n_floats > 0);
	spill->cxt = cxt;
	spill->n_floats = n_floats;
	spill->row_bytes = mul_size((Size) n_floats, sizeof(float));
	spill->record_bytes = add_size(sizeof(int64), spill->row_bytes);
	spill->loaded = -1;
	spill->run = BufFileCreateTemp(false);
	MemoryContextSwitchTo(old);
	return spill;
}

/* Appends row number spill->n_rows. */
void
pgdl_spill_write(PgdlSpill *spill, const float *x)
{
	Assert(spill->run != NULL);
	BufFileWrite(spill->run, (void *) x, spill->row_bytes);
	spill->n_rows++;
}

int64
pgdl_spill_rows(const PgdlSpill *spill)
{
	return spill->n_rows;
}

/*
 * Rows per bucket: as many records as the budget holds, unless that would
 * open more files than a buffer each can afford (a BLCKSZ buffer per file, at
 * most a quarter of the budget, and never fewer than 16 files).
 */
static void
plan_buckets(PgdlSpill *spill)
{
	int64		max_buckets = Max(16, (int64) (spill->budget / (4 * BLCKSZ)));
	int64		rows = Max(1, (int64) (spill->budget / spill->record_bytes));

	if ((spill->n_rows + rows - 1) / rows > max_buckets)
		rows = (spill->n_rows + max_buckets - 1) / max_buckets;
	spill->bucket_rows = rows;
	spill->n_buckets = (int) ((spill->n_rows + rows - 1) / rows);
}

/*
 * Pass 2: reads the run back in the order it was written, calls fn (when not
 * NULL) on each row, and appends the row to the bucket of position[row], a
 * bucket being about `budget` bytes.  position must be a permutation of
 * 0 .. n_rows - 1 and stay until the end.
 */
void
pgdl_spill_scatter(PgdlSpill *spill, const int64 *position, Size budget, PgdlSpillRowFn fn, void *arg)
{
	MemoryContext old = MemoryContextSwitchTo(spill->cxt);
	float	   *x = palloc(spill->row_bytes);

	Assert(spill->run != NULL && spill->n_rows > 0);
	spill->position = position;
	spill->budget = budget;
	plan_buckets(spill);
	spill->buckets = palloc(sizeof(BufFile *) * spill->n_buckets);
	spill->bucket_fill = palloc0(sizeof(int64) * spill->n_buckets);
	for (int k = 0; k < spill->n_buckets; k++)
		spill->buckets[k] = BufFileCreateTemp(false);

	if (BufFileSeek(spill->run, 0, 0, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not rewind pgdl.pack's temporary file: %m")));
	for (int64 r = 0; r < spill->n_rows; r++)
	{
		int64		k;

		CHECK_FOR_INTERRUPTS();
		spill_read(spill->run, x, spill->row_bytes);
		if (fn != NULL)
			fn(arg, r, x);
		Assert(position[r] >= 0 && position[r] < spill->n_rows);
		k = position[r] / spill->bucket_rows;
		BufFileWrite(spill->buckets[k], &r, sizeof(int64));
		BufFileWrite(spill->buckets[k], x, spill->row_bytes);
		spill->bucket_fill[k]++;
	}
	BufFileClose(spill->run);
	spill->run = NULL;
	pfree(x);

	spill->x = MemoryContextAllocHuge(spill->cxt, mul_size((Size) spill->bucket_rows, spill->row_bytes));
	spill->rows = MemoryContextAllocHuge(spill->cxt, mul_size((Size) spill->bucket_rows, sizeof(int64)));
	MemoryContextSwitchTo(old);
}

/* Pass 3 for bucket k: its rows at their places; its file closed. */
static void
load_bucket(PgdlSpill *spill, int k)
{
	BufFile    *file = spill->buckets[k];
	int64		first = (int64) k * spill->bucket_rows;

	if (BufFileSeek(file, 0, 0, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not rewind pgdl.pack's temporary file: %m")));
	for (int64 i = 0; i < spill->bucket_fill[k]; i++)
	{
		int64		r;
		int64		slot;

		CHECK_FOR_INTERRUPTS();
		spill_read(file, &r, sizeof(int64));
		if (r < 0 || r >= spill->n_rows)
			elog(ERROR, "pgdl.pack: temporary file holds row " INT64_FORMAT " of " INT64_FORMAT,
				 r, spill->n_rows);
		slot = spill->position[r] - first;
		Assert(slot >= 0 && slot < spill->bucket_rows);
		spill->rows[slot] = r;
		spill_read(file, spill->x + slot * spill->n_floats, spill->row_bytes);
	}
	BufFileClose(file);
	spill->buckets[k] = NULL;
	spill->loaded = k;
}

/*
 * The row at position pos of the shuffled order, and (in *row) its row number.
 * Positions must be asked in increasing order (each bucket is read once); the
 * pointer is good until the next call.
 */
const float *
pgdl_spill_row_at(PgdlSpill *spill, int64 pos, int64 *row)
{
	int			k = (int) (pos / spill->bucket_rows);
	int64		slot = pos - (int64) k * spill->bucket_rows;

	Assert(spill->buckets != NULL && pos >= 0 && pos < spill->n_rows && k >= spill->loaded);
	while (spill->loaded < k)
		load_bucket(spill, spill->loaded + 1);
	*row = spill->rows[slot];
	return spill->x + slot * spill->n_floats;
}

/* Closes what is still open and frees the memory. */
void
pgdl_spill_end(PgdlSpill *spill)
{
	if (spill->run != NULL)
		BufFileClose(spill->run);
	for (int k = 0; spill->buckets != NULL && k < spill->n_buckets; k++)
		if (spill->buckets[k] != NULL)
			BufFileClose(spill->buckets[k]);
	MemoryContextDelete(spill->cxt);
}

/* How many bucket files the scatter made (0 before): for a DEBUG1 line. */
int
pgdl_spill_buckets(const PgdlSpill *spill)
{
	return spill->n_buckets;
}
