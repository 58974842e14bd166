/*
 * packed.c -- reading the packed tables pgdl.pack writes:
 *   (part integer, buffer_id integer, n integer, x real[], y real[] [, w real[]])
 * x holds n examples of n_features, y n class indices or n * n_targets targets,
 * w (a weighted dataset's only) their n weights.
 *
 * Training, evaluation and (later) the model hopper all read buffers through
 * here, in buffer_id order within a partition, so that a model sees its data in
 * the same order whoever reads it.
 */
#include "postgres.h"

#include <math.h>
#include <sys/mman.h>

#include "access/detoast.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "data/data.h"

#define FETCH_ROWS 16
#define ARENA_BLOCK (32 * 1024 * 1024)	/* held buffers are carved from blocks this large */
#define HUGE_PAGE (2 * 1024 * 1024)

/*
 * Where a scan puts the arrays it reads: buffers kept for later visits in an
 * arena of the keeper's memory, the others in one reusable allocation per
 * column.  A palloc of 400 kB per buffer is an mmap of fresh pages every time,
 * and faulting them in cost the first epoch more than the copy itself.
 */
typedef struct ScanMem
{
	MemoryContext keep_cxt;
	int64	   *keep_bytes;		/* the keeper's budget left */
	char	   *arena;			/* free space of the current arena block */
	Size		arena_left;
	MemoryContext reuse_cxt;
	struct varlena *reuse[3];	/* x, y and w of a buffer not kept */
	Size		reuse_size[3];
	Relation	toastrel;		/* of the last value fetched, kept open */
} ScanMem;

/* Room for `size` bytes of a kept buffer, MAXALIGNed, in huge pages when the kernel gives them. */
static void *
arena_alloc(ScanMem *sm, Size size)
{
	void	   *p;

	size = MAXALIGN(size);
	if (size > sm->arena_left)
	{
		Size		block = Max(size, (Size) Min((int64) ARENA_BLOCK, *sm->keep_bytes + (int64) size));
		char	   *raw;

		if (block >= HUGE_PAGE)
		{
			raw = MemoryContextAllocHuge(sm->keep_cxt, block + HUGE_PAGE);
			raw = (char *) TYPEALIGN(HUGE_PAGE, raw);
#ifdef MADV_HUGEPAGE
			(void) madvise(raw, block & ~((Size) HUGE_PAGE - 1), MADV_HUGEPAGE);	/* a hint only */
#endif
		}
		else
			raw = MemoryContextAllocHuge(sm->keep_cxt, block);
		sm->arena = raw;
		sm->arena_left = block;
	}
	p = sm->arena;
	sm->arena += size;
	sm->arena_left -= size;
	return p;
}

static void *
reuse_alloc(ScanMem *sm, int which, Size size)
{
	if (size > sm->reuse_size[which])
	{
		if (sm->reuse[which])
			pfree(sm->reuse[which]);
		sm->reuse[which] = MemoryContextAllocHuge(sm->reuse_cxt, size);
		sm->reuse_size[which] = size;
	}
	return sm->reuse[which];
}

/*
 * The array in d (which: 0 for x, 1 for y, 2 for w) in the scan's memory: the arena
 * when kept, else the column's reusable allocation.  What pgdl.pack writes
 * (out of line, uncompressed: STORAGE EXTERNAL) is read straight from its
 * TOAST chunks into that memory, when of the size n examples take (`expected`
 * bytes); anything else is detoasted as PostgreSQL does, and pgdl_packed_check_row
 * judges it.
 */
static ArrayType *
read_array(ScanMem *sm, Datum d, int which, bool kept, Size expected)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);
	struct varlena *dst;

	if (VARATT_IS_EXTERNAL_ONDISK(v))
	{
		struct varatt_external tp;

		VARATT_EXTERNAL_GET_POINTER(tp, v);
		if (!VARATT_EXTERNAL_IS_COMPRESSED(tp) && expected > VARHDRSZ &&
			(Size) VARATT_EXTERNAL_GET_EXTSIZE(tp) + VARHDRSZ == expected)
		{
			int32		attrsize = (int32) (expected - VARHDRSZ);

			dst = kept ? arena_alloc(sm, expected) : reuse_alloc(sm, which, expected);
			SET_VARSIZE(dst, expected);
			if (sm->toastrel == NULL || RelationGetRelid(sm->toastrel) != tp.va_toastrelid)
			{
				if (sm->toastrel != NULL)
					table_close(sm->toastrel, AccessShareLock);
				sm->toastrel = NULL;
				sm->toastrel = table_open(tp.va_toastrelid, AccessShareLock);
			}
			table_relation_fetch_toast_slice(sm->toastrel, tp.va_valueid, attrsize, 0, attrsize, dst);
			return (ArrayType *) dst;
		}
	}
	v = (struct varlena *) DatumGetArrayTypeP(d);
	if (!kept)
		return (ArrayType *) v;
	/* kept arrays must not point into the fetched tuple (small ones are inline) */
	dst = arena_alloc(sm, VARSIZE(v));
	memcpy(dst, v, VARSIZE(v));
	return (ArrayType *) dst;
}

/* Bytes of a one-dimensional real[] of count elements without NULLs; 0 when count is out of range. */
static Size
array_bytes(int64 count)
{
	return count > 0 && count <= (int64) MaxArraySize ? ARR_OVERHEAD_NONULLS(1) + (Size) count * sizeof(float) : 0;
}

/*
 * pgdl.pack writes finite values only.  A NaN or infinity in a packed table
 * (written by hand) would make evaluation answer NaN and training look as if
 * it diverged: it is an error naming the buffer, the example and the value.
 */
static void
check_finite_buffer(const float *v, int64 len, const char *what, int32 per_example, int32 buffer_id,
					const char *relname)
{
	uint32		bad = 0;

	/* branch-free first (it vectorizes: a buffer is read once per visit), then find it */
	for (int64 i = 0; i < len; i++)
	{
		uint32		bits;

		memcpy(&bits, &v[i], sizeof(bits));
		bad |= (bits & 0x7f800000) == 0x7f800000;
	}
	for (int64 i = 0; bad && i < len; i++)
		if (!isfinite(v[i]))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("buffer %d of packed table \"%s\" has a NaN or infinite value", buffer_id, relname),
					 errdetail("Value %lld of example %lld of %s is %s; pgdl.pack writes finite values only.",
							   (long long) (i % per_example + 1), (long long) (i / per_example + 1), what,
							   isnan(v[i]) ? "NaN" : "infinite")));
}

/*
 * The checks a packed row passes before the engine reads its arrays (detoasted
 * already): real[] without NULLs, of n examples' x and y.  No SPI, so that
 * regress/fuzz can call it alone.
 */
void
pgdl_packed_check_row(const PgdlDataset *ds, const char *relname, int32 buffer_id, int32 n,
					  ArrayType *xa, ArrayType *ya, float **x, float **y)
{
	char		what[64];
	int64		xlen,
				ylen;

	snprintf(what, sizeof(what), "x of buffer %d", buffer_id);
	*x = pgdl_float4_array(xa, what, &xlen);
	snprintf(what, sizeof(what), "y of buffer %d", buffer_id);
	*y = pgdl_float4_array(ya, what, &ylen);
	if (n < 1 || n > NN_MAX_BATCH || xlen != (int64) n * ds->n_features || ylen != (int64) n * ds->n_targets)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("buffer %d of packed table \"%s\" has the wrong size", buffer_id, relname),
				 errdetail("It holds %d examples, %lld values of x and %lld of y; expected %lld and %lld.",
						   n, (long long) xlen, (long long) ylen,
						   (long long) n * ds->n_features, (long long) n * ds->n_targets)));
	check_finite_buffer(*x, xlen, "x", ds->n_features, buffer_id, relname);
	check_finite_buffer(*y, ylen, "y", ds->n_targets, buffer_id, relname);
}

float *
pgdl_packed_check_weights(const char *relname, int32 buffer_id, int32 n, ArrayType *wa)
{
	char		what[64];
	int64		len;
	float	   *w;

	snprintf(what, sizeof(what), "w of buffer %d", buffer_id);
	w = pgdl_float4_array(wa, what, &len);
	if (len != n)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("buffer %d of packed table \"%s\" has the wrong number of weights", buffer_id, relname),
				 errdetail("It holds %d examples and %lld weights.", n, (long long) len)));
	check_finite_buffer(w, len, "w", 1, buffer_id, relname);
	for (int32 i = 0; i < n; i++)
		if (w[i] < 0.0f)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("buffer %d of packed table \"%s\" has a negative weight", buffer_id, relname),
					 errdetail("Example %d weighs %g; pgdl.pack writes weights >= 0.", (int) i + 1, (double) w[i])));
	return w;
}

void
pgdl_packed_refuse_weighted(const PgdlDataset *ds, const char *what)
{
	if (ds->weighted)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s does not take a weighted dataset", what),
				 errdetail("The table was packed with weight => ..., and %s carries x and y only.", what),
				 errhint("Pack the table without weight for it.")));
}

void
pgdl_packed_scan(const PgdlDataset *ds, int32 part, PgdlBufferFn fn, void *arg,
				 MemoryContext keep_cxt, int64 *keep_bytes)
{
	char	   *relname;		/* for messages */
	char	   *qualified;
	char	   *query;
	Portal		portal;
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(part)};
	MemoryContext per_batch;
	MemoryContext old;
	ScanMem		sm = {0};

	relname = get_rel_name(ds->packed);
	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("packed table of dataset " INT64_FORMAT " does not exist", ds->id)));
	qualified = quote_qualified_identifier(get_namespace_name(get_rel_namespace(ds->packed)), relname);
	if (ds->weighted && get_attnum(ds->packed, "w") == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("packed table \"%s\" has no column w", relname),
				 errdetail("Its pgdl.datasets row says it is weighted; pgdl.pack writes w real[] for weight => ... only.")));
	query = part >= 0 ?
		psprintf("SELECT x, y, n, buffer_id%s FROM %s WHERE part = $1 ORDER BY buffer_id",
				 ds->weighted ? ", w" : "", qualified) :
		psprintf("SELECT x, y, n, buffer_id%s FROM %s ORDER BY part, buffer_id", ds->weighted ? ", w" : "", qualified);

	per_batch = AllocSetContextCreate(CurrentMemoryContext, "pgdl packed scan", ALLOCSET_DEFAULT_SIZES);
	sm.keep_cxt = keep_cxt;
	sm.keep_bytes = keep_bytes;
	sm.reuse_cxt = CurrentMemoryContext;
	SPI_connect();
	portal = SPI_cursor_open_with_args(NULL, query, part >= 0 ? 1 : 0, argtypes, values, NULL, true, 0);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		old = MemoryContextSwitchTo(per_batch);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		xnull,
						ynull,
						nnull,
						bnull;
			Datum		xd = SPI_getbinval(tup, desc, 1, &xnull);
			Datum		yd = SPI_getbinval(tup, desc, 2, &ynull);
			Datum		nd = SPI_getbinval(tup, desc, 3, &nnull);
			int32		buffer_id = DatumGetInt32(SPI_getbinval(tup, desc, 4, &bnull));
			bool		wnull = false;
			Datum		wd = ds->weighted ? SPI_getbinval(tup, desc, 5, &wnull) : (Datum) 0;
			int32		n;
			ArrayType  *xa,
					   *ya;
			float	   *x,
					   *y,
					   *w = NULL;
			int64		floats;
			bool		kept,
						ok_n;

			CHECK_FOR_INTERRUPTS();
			if (xnull || ynull || nnull || wnull)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("buffer %d of packed table \"%s\" has NULL values", buffer_id, relname),
						 errdetail("Columns n, x and y (and w, of a weighted dataset) must not be NULL.")));
			n = DatumGetInt32(nd);
			ok_n = n > 0 && n <= NN_MAX_BATCH;
			floats = (int64) n * (ds->n_features + ds->n_targets + (ds->weighted ? 1 : 0));
			kept = keep_cxt && ok_n && floats * (int64) sizeof(float) <= *keep_bytes;
			xa = read_array(&sm, xd, 0, kept, ok_n ? array_bytes((int64) n * ds->n_features) : 0);
			ya = read_array(&sm, yd, 1, kept, ok_n ? array_bytes((int64) n * ds->n_targets) : 0);
			pgdl_packed_check_row(ds, relname, buffer_id, n, xa, ya, &x, &y);
			if (ds->weighted)
				w = pgdl_packed_check_weights(relname, buffer_id, n, read_array(&sm, wd, 2, kept, array_bytes(n)));
			if (kept)
				*keep_bytes -= floats * (int64) sizeof(float);
			fn(arg, x, y, w, n, kept);
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(per_batch);
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	if (sm.toastrel != NULL)
		table_close(sm.toastrel, AccessShareLock);
	SPI_finish();
	MemoryContextDelete(per_batch);
	for (int i = 0; i < 3; i++)
		if (sm.reuse[i])
			pfree(sm.reuse[i]);
}

typedef struct HoldArg
{
	PgdlHeldPartition *held;
	MemoryContext keep_cxt;
	PgdlBufferFn fn;
	void	   *arg;
} HoldArg;

static void
hold_buffer(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept)
{
	HoldArg    *ha = arg;

	if (ha->fn)
		ha->fn(ha->arg, x, y, w, n, kept);
	if (kept && ha->held->complete)
	{
		MemoryContext old = MemoryContextSwitchTo(ha->keep_cxt);
		PgdlHeldBuffer *b = palloc(sizeof(PgdlHeldBuffer));

		b->x = (float *) x;
		b->y = (float *) y;
		b->w = (float *) w;
		b->n = n;
		ha->held->buffers = lappend(ha->held->buffers, b);
		MemoryContextSwitchTo(old);
	}
	else
		ha->held->complete = false;
}

void
pgdl_packed_hold(const PgdlDataset *ds, int32 part, PgdlHeldPartition *held,
				 MemoryContext keep_cxt, int64 *budget, PgdlBufferFn fn, void *arg)
{
	HoldArg		ha = {held, keep_cxt, fn, arg};

	held->buffers = NIL;
	held->complete = true;
	pgdl_packed_scan(ds, part, hold_buffer, &ha, keep_cxt, budget);
	if (!held->complete)
		held->buffers = NIL;	/* what was read stays charged; rare, and freed with keep_cxt */
}

void
pgdl_packed_foreach(const PgdlDataset *ds, int32 part, const PgdlHeldPartition *held,
					PgdlBufferFn fn, void *arg)
{
	ListCell   *lc;

	if (!held->complete)
	{
		pgdl_packed_scan(ds, part, fn, arg, NULL, NULL);
		return;
	}
	foreach(lc, held->buffers)
	{
		PgdlHeldBuffer *b = lfirst(lc);

		fn(arg, b->x, b->y, b->w, b->n, true);
	}
}

void
pgdl_check_model_fits(const NnSpec *spec, const PgdlDataset *ds)
{
	int64		in;
	int64		out;

	if (ds == NULL)
		return;					/* a model with no dataset row: nothing to agree with */
	in = spec->input[0] * (int64) (spec->input_ndim == 3 ? spec->input[1] * spec->input[2] : 1);
	out = nn_spec_output_size(spec);
	if (in != ds->n_features)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("model input does not match the dataset"),
				 errdetail("The model takes %lld features per example; the dataset has %d.",
						   (long long) in, ds->n_features)));
	if (ds->classification && spec->loss == NN_LOSS_BCE && out == 1 && ds->n_classes == 2)
		return;					/* a binary classifier: one logit, targets 0 and 1 */
	if (ds->classification)
	{
		if (spec->loss != NN_LOSS_CROSS_ENTROPY)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("loss %s does not suit a classification dataset", nn_loss_name(spec->loss)),
					 errhint("Use \"loss\": \"cross_entropy\" with one output per class, or \"binary_cross_entropy\" with one output for two classes.")));
		if (out != ds->n_classes)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("model output does not match the dataset"),
					 errdetail("The model has %lld outputs; the dataset has %d classes.",
							   (long long) out, ds->n_classes)));
	}
	else
	{
		if (spec->loss == NN_LOSS_CROSS_ENTROPY)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("loss cross_entropy does not suit a regression dataset"),
					 errhint("Use \"loss\": \"mse\" (or \"binary_cross_entropy\" for targets in [0, 1]).")));
		if (out != ds->n_targets)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("model output does not match the dataset"),
					 errdetail("The model has %lld outputs; the dataset has %d targets per example.",
							   (long long) out, ds->n_targets)));
	}
}

