/*
 * pack_order.c -- the order of the packed rows: the rows as read, shuffled
 * once (seeded Fisher-Yates on nn_rng_u64), a function of the seed and the
 * number of rows alone.  In memory the rows are taken through the
 * permutation; spilled, pack_spill.c scatters them to bucket files by their
 * positions in it, so both give the same order.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "nn/nn.h"
#include "data/pack.h"

/*
 * nn_rng_u64's stream for the shuffle ("pack"), so that a seed used for the
 * shuffle and for a model's initialization draws unrelated numbers.
 */
#define PACK_SHUFFLE_STREAM		UINT64_C(0x7061636b)

/* The order of the rows: Fisher-Yates, swap i with j uniform in [0, i], from the end. */
static int64 *
shuffle(int64 n_rows, int64 seed, MemoryContext cxt)
{
	int64	   *perm = MemoryContextAllocHuge(cxt, mul_size((Size) n_rows, sizeof(int64)));

	for (int64 i = 0; i < n_rows; i++)
		perm[i] = i;
	for (int64 i = n_rows - 1; i > 0; i--)
	{
		uint64		j = nn_rng_u64((uint64) seed, PACK_SHUFFLE_STREAM, (uint64) i) % (uint64) (i + 1);
		int64		t = perm[i];

		if ((i & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		perm[i] = perm[j];
		perm[j] = t;
	}
	return perm;
}

/*
 * The shuffled order.  In memory, the permutation itself.  Spilled, each
 * row's position, by which the spill scatters its rows to bucket files,
 * adding the deviations of standardize on the way.
 */
void
pgdl_pack_make_order(PackData *data, int64 seed, PackNorm *norm, MemoryContext cxt, PackOrder *order)
{
	int64	   *perm = shuffle(data->n_rows, seed, cxt);
	int64	   *position;
	Size		kept;
	Size		bucket;

	order->data = data;
	order->perm = perm;
	order->spill = data->spill;
	if (data->spill == NULL)
		return;

	Assert(pgdl_spill_rows(data->spill) == data->n_rows);
	position = MemoryContextAllocHuge(cxt, mul_size((Size) data->n_rows, sizeof(int64)));
	for (int64 p = 0; p < data->n_rows; p++)
	{
		if ((p & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		position[perm[p]] = p;
	}
	pfree(perm);
	order->perm = NULL;

	/*
	 * What stays in memory per row (each row's position and class) comes out
	 * of the budget of a bucket, which keeps at least a quarter of it.
	 */
	kept = mul_size((Size) data->n_rows, sizeof(int64) + sizeof(float));
	bucket = data->budget > add_size(kept, data->budget / 4) ? data->budget - kept : data->budget / 4;
	pgdl_spill_scatter(data->spill, position, bucket, norm->ssq != NULL ? pgdl_pack_add_deviations : NULL, norm);
	ereport(DEBUG1,
			(errmsg("pgdl.pack shuffles " INT64_FORMAT " rows through %d temporary files",
					data->n_rows, pgdl_spill_buckets(data->spill))));
}
