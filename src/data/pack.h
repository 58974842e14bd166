/*
 * data/pack.h -- inside data/: what the files of pgdl.pack share.
 */
#ifndef PGDL_DATA_PACK_H
#define PGDL_DATA_PACK_H

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

#endif							/* PGDL_DATA_PACK_H */
