/*
 * shared_scan.c -- jobs over one packed table read each partition once.
 *
 * A model hopper worker that reads a partition of a packed table into memory
 * copies it into a DSM segment and publishes the segment as a session lock of
 * the lock manager (tag: the database, the table, the segment's handle and the
 * partition), so no shared memory of pgdl's own is needed (as jobs.c).  A
 * worker of any job that needs the same partition attaches the segment instead
 * of reading the table, and publishes it too: the segment outlives the worker
 * that read it, and goes when its last user detaches.  A lock per partition,
 * held while it is read, makes a second reader wait for the first and attach.
 *
 * Whether a segment holds what the table would give this worker is decided by
 * the table: the worker lists the tuple versions it sees there, as the caller
 * (leaf table and its file, ctid, xmin, part, buffer_id, n, in buffer_id
 * order, needing SELECT on the whole table), and attaches only a segment read
 * from the same versions.  A tuple version never changes, so a segment is
 * never stale, and a role gets only rows it could read itself.  Tables with
 * row security, views (cache views), foreign partitions, weighted datasets
 * and anything else are read as before.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/dsm.h"
#include "storage/itemptr.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/rls.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "data/data.h"

#define SHARE_MAGIC			0x70677370	/* "pgsp" */
#define SHARE_ALL_PARTS		0x3fff	/* the partition code of part < 0 */
#define SHARE_MAX_HELD		64		/* segments one process holds: each is a lock and a DSM slot */

/* One tuple version of the partition, as this worker sees it. */
typedef struct ShareRow
{
	Oid			tableoid;		/* the leaf of a partitioned packed table */
	Oid			relfilenode;	/* of that leaf, then */
	ItemPointerData ctid;
	TransactionId xmin;
	int32		part;
	int32		buffer_id;
	int32		n;
} ShareRow;

/* A segment: this header, its rows, then each buffer's x and y, raw floats. */
typedef struct ShareHeader
{
	uint32		magic;
	Oid			database;
	Oid			relid;
	int32		part;
	int32		n_features;
	int32		n_targets;
	int32		n_rows;
	int64		data_bytes;
	ShareRow	rows[FLEXIBLE_ARRAY_MEMBER];
} ShareHeader;

#define SHARE_DATA_OFFSET(n_rows) MAXALIGN(offsetof(ShareHeader, rows) + sizeof(ShareRow) * (Size) (n_rows))

/* The tuple versions a read of the partition would see here. */
typedef struct Manifest
{
	int32		n_rows;
	int64		data_bytes;		/* of its buffers' x and y */
	ShareRow   *rows;
} Manifest;

static int	n_held = 0;

/* The tag of a published segment; handle DSM_HANDLE_INVALID: the lock held while reading. */
static void
share_locktag(LOCKTAG *tag, dsm_handle handle, Oid relid, int32 part)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) relid, (uint32) handle,
						 PGDL_LOCK_SHARED_SCAN | (part >= 0 ? part : SHARE_ALL_PARTS));
}

bool
pgdl_shared_scan_allowed(const PgdlDataset *ds)
{
	Oid			relid = ds->packed;

	/* a segment carries x and y: a weighted dataset's workers read their own copies, weights with them */
	return !ds->weighted &&
		(get_rel_relkind(relid) == RELKIND_RELATION || get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE) &&
		pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK &&
		check_enable_rls(relid, InvalidOid, true) == RLS_NONE;
}

/* Whether this worker may read the partition only as the table gives it (see the head comment). */
static bool
shareable(const PgdlDataset *ds, int32 part)
{
	return part < SHARE_ALL_PARTS && n_held < SHARE_MAX_HELD && pgdl_shared_scan_allowed(ds);
}

/* The file of a table the query read (and locked): InvalidOid when it is no plain table (a foreign partition). */
static Oid
leaf_filenode(Oid tableoid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(tableoid));
	Oid			filenode = InvalidOid;

	if (HeapTupleIsValid(tup))
	{
		Form_pg_class cls = (Form_pg_class) GETSTRUCT(tup);

		if (cls->relkind == RELKIND_RELATION)
			filenode = cls->relfilenode;
		ReleaseSysCache(tup);
	}
	return filenode;
}

/* Rows of the SPI result into mf; false when a read would fail or be ambiguous (it is then read as before). */
static bool
manifest_rows(const PgdlDataset *ds, Manifest *mf)
{
	int64		per_example = (int64) (ds->n_features + ds->n_targets) * sizeof(float);
	Oid			leaf = InvalidOid,
				filenode = InvalidOid;

	mf->n_rows = (int32) SPI_processed;
	mf->rows = palloc0(sizeof(ShareRow) * Max(mf->n_rows, 1));
	mf->data_bytes = 0;
	for (int32 i = 0; i < mf->n_rows; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull[7];
		Datum		v[7];
		ShareRow   *r = &mf->rows[i];

		for (int c = 0; c < 7; c++)
		{
			v[c] = SPI_getbinval(tup, desc, c + 1, &isnull[c]);
			if (isnull[c])
				return false;
		}
		r->tableoid = DatumGetObjectId(v[0]);
		if (r->tableoid != leaf)
			filenode = leaf_filenode(leaf = r->tableoid);
		r->relfilenode = filenode;
		ItemPointerCopy((ItemPointer) DatumGetPointer(v[1]), &r->ctid);
		r->xmin = DatumGetTransactionId(v[2]);
		r->part = DatumGetInt32(v[3]);
		r->buffer_id = DatumGetInt32(v[4]);
		r->n = DatumGetInt32(v[5]);
		if (!OidIsValid(filenode) || !DatumGetBool(v[6]) || r->n < 1 || r->n > NN_MAX_BATCH)
			return false;
		/* ties in buffer_id leave the order of a read open */
		if (i > 0 && r->part == r[-1].part && r->buffer_id == r[-1].buffer_id)
			return false;
		mf->data_bytes += r->n * per_example;
	}
	return mf->n_rows > 0;
}

/* What a read of the partition would see here, or NULL when it is not to be shared. */
static Manifest *
manifest_of(const PgdlDataset *ds, int32 part)
{
	char	   *relname = get_rel_name(ds->packed);
	char	   *query;
	Oid			argtypes[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(part)};
	MemoryContext cxt = CurrentMemoryContext;
	Manifest   *mf = palloc0(sizeof(Manifest));
	bool		ok;

	if (relname == NULL)
		return NULL;
	query = psprintf("SELECT tableoid, ctid, xmin, part, buffer_id, n, x IS NOT NULL AND y IS NOT NULL FROM %s%s "
					 "ORDER BY part, buffer_id",
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(ds->packed)), relname),
					 part >= 0 ? " WHERE part = $1" : "");
	SPI_connect();
	/* read-only: the active snapshot, the one the read that follows takes */
	if (SPI_execute_with_args(query, part >= 0 ? 1 : 0, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "pgdl: could not list the buffers of \"%s\"", relname);
	MemoryContextSwitchTo(cxt);
	/* the tables read stay locked until the transaction ends: their files are those the read will see */
	ok = manifest_rows(ds, mf);
	SPI_finish();
	return ok ? mf : NULL;
}

/* Whether a segment holds the partition as mf lists it. */
static bool
segment_matches(dsm_segment *seg, const PgdlDataset *ds, int32 part, const Manifest *mf)
{
	const ShareHeader *h = dsm_segment_address(seg);
	Size		len = dsm_segment_map_length(seg);

	if (len < offsetof(ShareHeader, rows) || h->magic != SHARE_MAGIC)
		return false;
	if (h->database != MyDatabaseId || h->relid != ds->packed || h->part != part || h->n_features != ds->n_features ||
		h->n_targets != ds->n_targets || h->n_rows != mf->n_rows || h->data_bytes != mf->data_bytes)
		return false;
	if (SHARE_DATA_OFFSET(mf->n_rows) + (Size) mf->data_bytes > len)
		return false;
	return memcmp(h->rows, mf->rows, sizeof(ShareRow) * mf->n_rows) == 0;
}

/* held: the buffers of a segment that matches mf. */
static void
hold_segment(dsm_segment *seg, const PgdlDataset *ds, const Manifest *mf, PgdlHeldPartition *held,
			 MemoryContext keep_cxt)
{
	char	   *data = (char *) dsm_segment_address(seg) + SHARE_DATA_OFFSET(mf->n_rows);
	MemoryContext old = MemoryContextSwitchTo(keep_cxt);

	held->buffers = NIL;
	held->complete = true;
	for (int32 i = 0; i < mf->n_rows; i++)
	{
		PgdlHeldBuffer *b = palloc(sizeof(PgdlHeldBuffer));

		b->n = mf->rows[i].n;
		b->x = (float *) data;
		data += (Size) b->n * ds->n_features * sizeof(float);
		b->y = (float *) data;
		b->w = NULL;			/* a weighted dataset is not shared (pgdl_shared_scan_allowed) */
		data += (Size) b->n * ds->n_targets * sizeof(float);
		held->buffers = lappend(held->buffers, b);
	}
	MemoryContextSwitchTo(old);
}

/* Publish a segment this process holds: others may attach it while it lives (if the lock table has room). */
static void
publish(dsm_segment *seg, Oid relid, int32 part)
{
	LOCKTAG		tag;

	share_locktag(&tag, dsm_segment_handle(seg), relid, part);
	(void) LockAcquireExtended(&tag, ShareLock, true, true, false, NULL);
	n_held++;
}

/* Attach a segment another process published for the partition as mf lists it; false if none. */
static bool
attach_published(const PgdlDataset *ds, int32 part, const Manifest *mf, PgdlHeldPartition *held,
				 MemoryContext keep_cxt)
{
	LockData   *locks = GetLockStatusData();
	LOCKTAG		want;

	share_locktag(&want, DSM_HANDLE_INVALID, ds->packed, part);
	for (int i = 0; i < locks->nelements; i++)
	{
		const LOCKTAG *t = &locks->locks[i].locktag;
		dsm_handle	handle = (dsm_handle) t->locktag_field3;
		dsm_segment *seg;

		CHECK_FOR_INTERRUPTS();
		if (locks->locks[i].holdMask == 0 || t->locktag_type != want.locktag_type ||
			t->locktag_field1 != want.locktag_field1 || t->locktag_field2 != want.locktag_field2 ||
			t->locktag_field4 != want.locktag_field4 || handle == DSM_HANDLE_INVALID ||
			dsm_find_mapping(handle) != NULL)
			continue;
		/* NULL: its last user has gone since the lock table was read */
		if ((seg = dsm_attach(handle)) == NULL)
			continue;
		if (!segment_matches(seg, ds, part, mf))
		{
			dsm_detach(seg);
			continue;
		}
		dsm_pin_mapping(seg);
		hold_segment(seg, ds, mf, held, keep_cxt);
		publish(seg, ds->packed, part);
		return true;
	}
	return false;
}

typedef struct SegmentCall
{
	Size		size;
	dsm_segment *seg;
} SegmentCall;

static void
create_pinned(void *arg)
{
	SegmentCall *call = arg;

	call->seg = dsm_create(call->size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	if (call->seg != NULL)
		dsm_pin_mapping(call->seg);
}

/* A DSM segment of `size` bytes for this session, or NULL when the server has no room for it. */
static dsm_segment *
create_segment(Size size)
{
	SegmentCall call = {size, NULL};
	/* /dev/shm may be smaller than a partition: that error is caught, in a subtransaction */
	ErrorData  *e = pgdl_call_in_subxact(create_pinned, &call);

	if (e == NULL)
		return call.seg;
	if (e->sqlerrcode == ERRCODE_QUERY_CANCELED || e->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
		ReThrowError(e);
	elog(DEBUG1, "pgdl: a partition is not shared: %s", e->message);
	return NULL;
}

void
pgdl_shared_copy_buffers(const PgdlDataset *ds, const PgdlHeldPartition *held, char *to)
{
	ListCell   *lc;

	foreach(lc, held->buffers)
	{
		PgdlHeldBuffer *b = lfirst(lc);
		Size		xb = (Size) b->n * ds->n_features * sizeof(float);
		Size		yb = (Size) b->n * ds->n_targets * sizeof(float);

		memcpy(to, b->x, xb);
		memcpy(to + xb, b->y, yb);
		to += xb + yb;
	}
}

/* The buffers just read (as mf lists them) into a new segment, published; held then points there. */
static bool
share_read(const PgdlDataset *ds, int32 part, const Manifest *mf, PgdlHeldPartition *held,
		   MemoryContext keep_cxt)
{
	dsm_segment *seg;
	ShareHeader *h;
	ListCell   *lc;
	int32		i = 0;

	if (!held->complete || list_length(held->buffers) != mf->n_rows)
		return false;
	foreach(lc, held->buffers)
		if (((PgdlHeldBuffer *) lfirst(lc))->n != mf->rows[i++].n)
			return false;
	if ((seg = create_segment(SHARE_DATA_OFFSET(mf->n_rows) + (Size) mf->data_bytes)) == NULL)
		return false;
	h = dsm_segment_address(seg);
	memset(h, 0, SHARE_DATA_OFFSET(mf->n_rows));
	h->magic = SHARE_MAGIC;
	h->database = MyDatabaseId;
	h->relid = ds->packed;
	h->part = part;
	h->n_features = ds->n_features;
	h->n_targets = ds->n_targets;
	h->n_rows = mf->n_rows;
	h->data_bytes = mf->data_bytes;
	memcpy(h->rows, mf->rows, sizeof(ShareRow) * mf->n_rows);
	pgdl_shared_copy_buffers(ds, held, (char *) h + SHARE_DATA_OFFSET(mf->n_rows));
	hold_segment(seg, ds, mf, held, keep_cxt);
	publish(seg, ds->packed, part);
	return true;
}

PgdlShareResult
pgdl_shared_hold(const PgdlDataset *ds, int32 part, PgdlHeldPartition *held,
				 MemoryContext keep_cxt, int64 *budget)
{
	Manifest   *mf = NULL;
	MemoryContext read_cxt;
	LOCKTAG		reading;

	if (shareable(ds, part))
	{
		/* a transaction lock: whoever reads the partition now publishes it before it is let go */
		share_locktag(&reading, DSM_HANDLE_INVALID, ds->packed, part);
		(void) LockAcquire(&reading, ExclusiveLock, false, false);
		mf = manifest_of(ds, part);
	}
	if (mf != NULL && mf->data_bytes <= *budget && attach_published(ds, part, mf, held, keep_cxt))
	{
		*budget -= mf->data_bytes;	/* charged as if read: the budget bounds what a worker holds */
		return PGDL_SHARE_ATTACHED;
	}
	/* read as before, in a context of its own, freed once the buffers are in a segment */
	read_cxt = AllocSetContextCreate(keep_cxt, "pgdl partition", ALLOCSET_DEFAULT_SIZES);
	pgdl_packed_hold(ds, part, held, read_cxt, budget, NULL, NULL);
	if (mf != NULL && share_read(ds, part, mf, held, keep_cxt))
	{
		MemoryContextDelete(read_cxt);
		return PGDL_SHARE_PUBLISHED;
	}
	return PGDL_SHARE_READ;
}
