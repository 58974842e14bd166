/*
 * model_io.c -- models between the engine and PostgreSQL: bytea blobs, the
 * per-backend cache of stored models and datasets, float4[] arguments.
 *
 * The engine allocates with malloc.  Every engine model the glue holds is
 * either in the cache (freed when the cache is flushed) or tied to a memory
 * context by a reset callback, so that an error can never leak one.
 *
 * The cache is flushed by a relcache invalidation of pgdl.models or
 * pgdl.datasets, which a statement trigger on those tables raises: a backend
 * sees a changed model at its next command (its own changes) or transaction
 * (others' changes), and never serves stale weights.  It holds what one role
 * may see: a lookup as another role (SET ROLE, SECURITY DEFINER), or a change
 * of role memberships or of a cached packed table's privileges, flushes it too.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/syscache.h"

#include "pgdl.h"

#define MODEL_CACHE_SIZE 16

typedef struct CachedModel
{
	PgdlModel	model;
	char	   *name;			/* looked up by name: what the name means to cache_role; else NULL */
	uint64		last_used;
} CachedModel;

static MemoryContext cache_cxt = NULL;
static CachedModel *cached_models[MODEL_CACHE_SIZE];	/* in cache_cxt */
static int	n_cached_models = 0;
static List *cached_datasets = NIL;	/* of PgdlDataset *, in cache_cxt */
static uint64 use_clock = 0;
static Oid	cache_role = InvalidOid;	/* what one role may see another may not: the cache is one role's */

/*
 * Invalidation can arrive whenever a lock is taken, in the middle of a call
 * that holds cached models and datasets.  So retired entries are not freed
 * at once: they wait, still valid, until the transaction ends.
 */
static List *retired_models = NIL;	/* of NnModel *, in TopMemoryContext */
static List *retired_cxts = NIL;	/* of MemoryContext */

static void
retire_cache(void)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	for (int i = 0; i < n_cached_models; i++)
		retired_models = lappend(retired_models, cached_models[i]->model.nn);
	n_cached_models = 0;
	cached_datasets = NIL;
	if (cache_cxt)
		retired_cxts = lappend(retired_cxts, cache_cxt);
	cache_cxt = NULL;
	MemoryContextSwitchTo(old);
}

static void
free_retired(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PARALLEL_COMMIT && event != XACT_EVENT_PARALLEL_ABORT)
		return;
	foreach(lc, retired_models)
		nn_model_free(lfirst(lc));
	foreach(lc, retired_cxts)
		MemoryContextDelete(lfirst(lc));
	list_free(retired_models);
	list_free(retired_cxts);
	retired_models = NIL;
	retired_cxts = NIL;
}

/* Looked up when the cache is filled: an invalidation callback must not read catalogs. */
static Oid	models_relid = InvalidOid;
static Oid	datasets_relid = InvalidOid;

static void
catalog_invalidated(Datum arg, Oid relid)
{
	ListCell   *lc;

	if (relid == InvalidOid || relid == models_relid || relid == datasets_relid)
		retire_cache();
	/* a GRANT or REVOKE on a packed table changes who may read its dataset */
	foreach(lc, cached_datasets)
		if (((PgdlDataset *) lfirst(lc))->packed == relid)
		{
			retire_cache();
			break;
		}
}

/* Role memberships decide which rows a role sees. */
static void
memberships_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	retire_cache();
}

/* The cache holds what the current role may see: a new role (SET ROLE, SECURITY DEFINER) starts it over. */
static void
check_cache_role(void)
{
	if (cache_role != GetUserId())
	{
		retire_cache();
		cache_role = GetUserId();
	}
}

static MemoryContext
cache_context(void)
{
	if (cache_cxt == NULL)
	{
		Oid			ns = get_namespace_oid("pgdl", false);

		models_relid = get_relname_relid("models", ns);
		datasets_relid = get_relname_relid("datasets", ns);
		cache_cxt = AllocSetContextCreate(CacheMemoryContext, "pgdl model cache", ALLOCSET_DEFAULT_SIZES);
	}
	return cache_cxt;
}

void
pgdl_model_io_init(void)
{
	CacheRegisterRelcacheCallback(catalog_invalidated, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, memberships_changed, (Datum) 0);
	RegisterXactCallback(free_retired, NULL);
}

PG_FUNCTION_INFO_V1(pgdl_catalog_changed);
Datum
pgdl_catalog_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("pgdl.catalog_changed() may only be called as a trigger")));
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	return PointerGetDatum(NULL);
}

/* ---- engine models and memory contexts ---- */

static void
free_model_callback(void *arg)
{
	nn_model_free((NnModel *) arg);
}

void
pgdl_model_free_with(NnModel *model, MemoryContext owner)
{
	MemoryContextCallback *cb = MemoryContextAlloc(owner, sizeof(MemoryContextCallback));

	cb->func = free_model_callback;
	cb->arg = model;
	MemoryContextRegisterResetCallback(owner, cb);
}

NnModel *
pgdl_model_deserialize(bytea *blob)
{
	NnError		err;
	NnModel    *m;

	pgdl_engine_prepare();
	m = nn_model_deserialize((const uint8_t *) VARDATA_ANY(blob), VARSIZE_ANY_EXHDR(blob), &err);
	if (m == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid pgdl model"),
				 errdetail("%c%s.", pg_toupper((unsigned char) err.msg[0]), err.msg + 1)));
	return m;
}

bytea *
pgdl_model_serialize(const NnModel *model)
{
	size_t		size = nn_model_serialized_size(model);
	bytea	   *blob;

	if (size > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("model of %zu bytes is too large to store", size),
				 errdetail("A bytea value holds at most 1 GB.")));
	blob = palloc(size + VARHDRSZ);
	SET_VARSIZE(blob, size + VARHDRSZ);
	nn_model_serialize(model, (uint8_t *) VARDATA(blob));
	return blob;
}

PgdlModel *
pgdl_model_from_bytea(bytea *blob, MemoryContext owner)
{
	PgdlModel  *pm = MemoryContextAllocZero(owner, sizeof(PgdlModel));

	pm->nn = pgdl_model_deserialize(blob);
	pgdl_model_free_with(pm->nn, owner);
	return pm;
}

/* ---- datasets ---- */

static float *
jsonb_float_array(JsonbContainer *obj, const char *key, int n, MemoryContext cxt)
{
	JsonbValue	k;
	JsonbValue *v;
	float	   *out;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	v = findJsonbValueFromContainer(obj, JB_FOBJECT, &k);
	if (v == NULL || v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data) ||
		JsonContainerSize(v->val.binary.data) != n)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("pgdl.datasets has an invalid normalization"),
				 errdetail("\"%s\" must be an array of %d numbers.", key, n)));
	out = MemoryContextAlloc(cxt, sizeof(float) * n);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(v->val.binary.data, i);

		if (e->type != jbvNumeric)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("pgdl.datasets has an invalid normalization")));
		out[i] = (float) DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(e->val.numeric)));
	}
	return out;
}

/* Load a dataset row by id (or by packed table when id is 0) into the cache. */
static PgdlDataset *
load_dataset(int64 id, Oid packed)
{
	PgdlDataset *ds = NULL;
	Oid			argtypes[1];
	Datum		values[1];
	int			ret;

	SPI_connect();
	argtypes[0] = id ? INT8OID : OIDOID;
	values[0] = id ? Int64GetDatum(id) : ObjectIdGetDatum(packed);
	ret = SPI_execute_with_args(id ?
								"SELECT id, packed::oid, task, n_features, n_targets, classes, label_type::oid, normalization, partitions, n_rows "
								"FROM pgdl.datasets WHERE id = $1" :
								"SELECT id, packed::oid, task, n_features, n_targets, classes, label_type::oid, normalization, partitions, n_rows "
								"FROM pgdl.datasets WHERE packed = $1::oid::regclass",
								1, argtypes, values, NULL, true, 1);
	if (ret == SPI_OK_SELECT && SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		MemoryContext cxt = cache_context();
		MemoryContext old = MemoryContextSwitchTo(cxt);
		char	   *task;
		Datum		classes;
		Jsonb	   *norm;
		JsonbValue	k;
		JsonbValue *scale;

		ds = palloc0(sizeof(PgdlDataset));
		ds->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		ds->packed = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
		task = TextDatumGetCString(SPI_getbinval(tup, desc, 3, &isnull));
		ds->classification = strcmp(task, "classification") == 0;
		ds->n_features = DatumGetInt32(SPI_getbinval(tup, desc, 4, &isnull));
		ds->n_targets = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
		classes = SPI_getbinval(tup, desc, 6, &isnull);
		if (!isnull)
		{
			Datum	   *elems;
			bool	   *nulls;
			int			n;

			deconstruct_array(DatumGetArrayTypeP(classes), TEXTOID, -1, false, TYPALIGN_INT,
							  &elems, &nulls, &n);
			ds->n_classes = n;
			ds->classes = palloc(sizeof(char *) * (n > 0 ? n : 1));
			for (int i = 0; i < n; i++)
				ds->classes[i] = nulls[i] ? pstrdup("") : TextDatumGetCString(elems[i]);
		}
		ds->label_type = DatumGetObjectId(SPI_getbinval(tup, desc, 7, &isnull));
		ds->partitions = DatumGetInt32(SPI_getbinval(tup, desc, 9, &isnull));
		ds->n_rows_hint = DatumGetInt64(SPI_getbinval(tup, desc, 10, &isnull));
		norm = DatumGetJsonbPCopy(SPI_getbinval(tup, desc, 8, &isnull));
		k.type = jbvString;
		k.val.string.val = "scale";
		k.val.string.len = 5;
		scale = findJsonbValueFromContainer(&norm->root, JB_FOBJECT, &k);
		if (scale && scale->type == jbvNumeric)
			ds->scale = (float) DatumGetFloat8(DirectFunctionCall1(numeric_float8,
																   NumericGetDatum(scale->val.numeric)));
		else
		{
			ds->mean = jsonb_float_array(&norm->root, "mean", ds->n_features, cxt);
			ds->std = jsonb_float_array(&norm->root, "std", ds->n_features, cxt);
		}
		cached_datasets = lappend(cached_datasets, ds);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return ds;
}

PgdlDataset *
pgdl_dataset_by_id(int64 id)
{
	ListCell   *lc;
	PgdlDataset *ds;

	check_cache_role();

	foreach(lc, cached_datasets)
		if (((PgdlDataset *) lfirst(lc))->id == id)
			return lfirst(lc);
	ds = load_dataset(id, InvalidOid);
	if (ds == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("dataset " INT64_FORMAT " does not exist", id)));
	return ds;
}

PgdlDataset *
pgdl_dataset_by_packed(Oid packed)
{
	ListCell   *lc;
	PgdlDataset *ds;

	check_cache_role();

	foreach(lc, cached_datasets)
		if (((PgdlDataset *) lfirst(lc))->packed == packed)
			return lfirst(lc);
	ds = load_dataset(0, packed);
	/* a dataset's row is hidden from those who may not read its packed table: say why */
	if (ds == NULL && pg_class_aclcheck(packed, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(packed) ? get_rel_name(packed) : "?"),
				 errdetail("pgdl reads a packed table, and its row in pgdl.datasets, as the calling user.")));
	if (ds == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a packed dataset", get_rel_name(packed) ? get_rel_name(packed) : "?"),
				 errhint("Make one with pgdl.pack().")));
	return ds;
}

void
pgdl_dataset_normalize(const PgdlDataset *ds, float *x, int64 rows)
{
	int			nf = ds->n_features;

	if (ds->mean == NULL)
	{
		if (ds->scale != 1.0f)
			for (int64 i = 0; i < rows * nf; i++)
				x[i] *= ds->scale;
		return;
	}
	for (int64 r = 0; r < rows; r++)
		for (int j = 0; j < nf; j++)
			x[r * nf + j] = (x[r * nf + j] - ds->mean[j]) / ds->std[j];
}

/* ---- stored models ---- */

/*
 * A new entry.  An evicted entry is not reused or freed: a caller may still
 * hold it, so it is retired like a flushed one.
 */
static CachedModel *
cache_slot(void)
{
	int			victim = 0;
	CachedModel *entry = MemoryContextAllocZero(cache_context(), sizeof(CachedModel));

	if (n_cached_models < MODEL_CACHE_SIZE)
	{
		cached_models[n_cached_models++] = entry;
		return entry;
	}
	for (int i = 1; i < MODEL_CACHE_SIZE; i++)
		if (cached_models[i]->last_used < cached_models[victim]->last_used)
			victim = i;
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		retired_models = lappend(retired_models, cached_models[victim]->model.nn);
		MemoryContextSwitchTo(old);
	}
	cached_models[victim] = entry;
	return entry;
}

static PgdlModel *
load_model(int64 id, const char *name)
{
	Oid			argtypes[1] = {id ? INT8OID : TEXTOID};
	Datum		values[1];
	int			ret;
	bytea	   *blob = NULL;
	int64		model_id = 0,
				dataset_id = 0;
	char	   *model_name = NULL;
	CachedModel *slot;
	NnModel    *nn;

	MemoryContext caller = CurrentMemoryContext;

	values[0] = id ? Int64GetDatum(id) : CStringGetTextDatum(name);
	SPI_connect();
	ret = SPI_execute_with_args(id ?
								"SELECT id, name, weights, dataset FROM pgdl.models WHERE id = $1" :
								"SELECT id, name, weights, dataset FROM pgdl.models WHERE id = (SELECT pgdl.model_id($1))",
								1, argtypes, values, NULL, true, 1);
	if (ret == SPI_OK_SELECT && SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;
		MemoryContext spi = MemoryContextSwitchTo(caller);	/* outlive SPI_finish */

		model_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		d = SPI_getbinval(tup, desc, 2, &isnull);
		if (!isnull)
			model_name = TextDatumGetCString(d);
		d = SPI_getbinval(tup, desc, 3, &isnull);
		blob = DatumGetByteaPCopy(d);
		d = SPI_getbinval(tup, desc, 4, &isnull);
		dataset_id = isnull ? 0 : DatumGetInt64(d);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	if (blob == NULL)
	{
		if (id)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("model " INT64_FORMAT " does not exist", id)));
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name)));
	}

	(void) cache_context();
	nn = pgdl_model_deserialize(blob);
	pfree(blob);
	slot = cache_slot();
	slot->model.id = model_id;
	slot->model.nn = nn;
	slot->name = name && model_name ? MemoryContextStrdup(cache_context(), model_name) : NULL;
	slot->last_used = ++use_clock;
	/* a missing dataset row must not leave a half-filled slot behind */
	PG_TRY();
	{
		slot->model.dataset = dataset_id ? pgdl_dataset_by_id(dataset_id) : NULL;
	}
	PG_CATCH();
	{
		retire_cache();
		PG_RE_THROW();
	}
	PG_END_TRY();
	return &slot->model;
}

PgdlModel *
pgdl_model_by_id(int64 id)
{
	check_cache_role();
	for (int i = 0; i < n_cached_models; i++)
		if (cached_models[i]->model.id == id)
		{
			cached_models[i]->last_used = ++use_clock;
			return &cached_models[i]->model;
		}
	return load_model(id, NULL);
}

PgdlModel *
pgdl_model_by_name(const char *name)
{
	check_cache_role();
	for (int i = 0; i < n_cached_models; i++)
		if (cached_models[i]->name && strcmp(cached_models[i]->name, name) == 0)
		{
			cached_models[i]->last_used = ++use_clock;
			return &cached_models[i]->model;
		}
	return load_model(0, name);
}
