/*
 * model_io.c -- models between the engine and PostgreSQL: bytea blobs, the
 * per-backend cache of stored models and datasets (read by datasets.c), and
 * the model argument of SQL functions (an id, a name or a blob).
 *
 * The engine allocates with malloc.  Every engine model the glue holds is
 * either in the cache (freed when the cache is flushed) or tied to a memory
 * context by a reset callback, so that an error can never leak one.
 *
 * The cache is flushed by a relcache invalidation of pgdl.models,
 * pgdl.datasets or the deployment tables (a name may come to mean another
 * model), which a statement trigger on those tables raises: a backend
 * sees a changed model at its next command (its own changes) or transaction
 * (others' changes), and never serves stale weights.  It holds what one role
 * may see: a lookup as another role (SET ROLE, SECURITY DEFINER), or a change
 * of role memberships or of a cached packed table's privileges, flushes it too.
 */
#include "postgres.h"

#include <errno.h>

#include "access/detoast.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/primnodes.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "catalog/catalog.h"

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
static Oid	deployment_names_relid = InvalidOid;	/* what a name means */
static Oid	deployment_history_relid = InvalidOid;

static void
catalog_invalidated(Datum arg, Oid relid)
{
	ListCell   *lc;

	if (relid == InvalidOid || relid == models_relid || relid == datasets_relid ||
		relid == deployment_names_relid || relid == deployment_history_relid)
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
		deployment_names_relid = get_relname_relid("deployment_names", ns);
		deployment_history_relid = get_relname_relid("deployment_history", ns);
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
	static const char *const served[] = {"models", "datasets", "deployment_names", "deployment_history", NULL};
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	pgdl_check_trigger_table(fcinfo, "pgdl.catalog_changed()", served);
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

/* ---- pgdl.max_model_memory ---- */

static void
refuse_over_limit(const NnMemory *mem, int32 batch, const char *what)
{
	if (mem->total <= (int64) pgdl_max_model_memory * 1024)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("%s needs " INT64_FORMAT " bytes of memory, more than pgdl.max_model_memory (%s)",
					what, mem->total, GetConfigOptionByName("pgdl.max_model_memory", NULL, false)),
			 batch > 0 ?
			 errdetail("Its parameters, gradients and running statistics take " INT64_FORMAT " bytes, "
					   "its optimizer state " INT64_FORMAT " and its workspace for batches of %d examples " INT64_FORMAT ".",
					   mem->model, mem->optim, batch, mem->workspace) :
			 errdetail("Its parameters, gradients and running statistics take " INT64_FORMAT " bytes "
					   "and its optimizer state " INT64_FORMAT ".", mem->model, mem->optim),
			 errhint("Use a smaller network or batch, or ask a superuser to raise pgdl.max_model_memory.")));
}

void
pgdl_check_model_memory(const NnSpec *spec, const NnOptim *optim, int32 batch, const char *what)
{
	NnMemory	mem;
	NnError		err;

	if (!nn_spec_memory(spec, optim, batch, &mem, &err))
		pgdl_report_nn_error("model spec", &err);
	refuse_over_limit(&mem, batch, what);
}

/* A blob the engine cannot read is left to nn_model_deserialize, which says what is wrong with it. */
void
pgdl_check_model_blob(const void *blob, Size len, const char *what)
{
	NnSpec	   *spec = palloc(sizeof(NnSpec));
	NnOptim		optim;
	NnMemory	mem;
	NnError		err;

	if (nn_model_blob_spec(blob, len, spec, &optim, &err) && nn_spec_memory(spec, &optim, 0, &mem, &err))
		refuse_over_limit(&mem, 0, what);
	pfree(spec);
}

void
pgdl_check_model_batch(const NnModel *model, int32 batch, const char *what)
{
	if (batch > model->batch_cap)
		pgdl_check_model_memory(&model->spec, model->optim.type != 0 ? &model->optim : NULL, batch, what);
}

void
pgdl_report_blob_error(const NnError *err)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("invalid pgdl model"),
			 errdetail("%c%s.", pg_toupper((unsigned char) err->msg[0]), err->msg + 1)));
}

NnModel *
pgdl_model_deserialize(bytea *blob)
{
	NnError		err;
	NnModel    *m;

	pgdl_engine_prepare();
	pgdl_check_model_blob(VARDATA_ANY(blob), VARSIZE_ANY_EXHDR(blob), "the model");
	m = nn_model_deserialize((const uint8_t *) VARDATA_ANY(blob), VARSIZE_ANY_EXHDR(blob), &err);
	if (m == NULL)
		pgdl_report_blob_error(&err);
	return m;
}

bytea *
pgdl_bytea_alloc(size_t size, const char *what)
{
	bytea	   *out;

	if (size > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s of %zu bytes is too large", what, size),
				 errdetail("A bytea value holds at most 1 GB.")));
	out = palloc(size + VARHDRSZ);
	SET_VARSIZE(out, size + VARHDRSZ);
	return out;
}

bytea *
pgdl_model_serialize(const NnModel *model)
{
	bytea	   *blob = pgdl_bytea_alloc(nn_model_serialized_size(model), "model");

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

/*
 * Read a dataset row by id (or by packed table when id is 0) into the cache.
 * Its memory joins the cache only once the row has passed every check, so
 * that a corrupted row leaks nothing into the long-lived cache.
 */
static PgdlDataset *
load_dataset(int64 id, Oid packed)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl dataset", ALLOCSET_SMALL_SIZES);
	PgdlDataset *ds = pgdl_dataset_read(id, packed, cxt);
	MemoryContext old;

	if (ds == NULL)
	{
		MemoryContextDelete(cxt);
		return NULL;
	}
	MemoryContextSetParent(cxt, cache_context());
	old = MemoryContextSwitchTo(cache_context());
	cached_datasets = lappend(cached_datasets, ds);
	MemoryContextSwitchTo(old);
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
				 pgdl_packed_left_behind(packed) ? errdetail(PGDL_UNKNOWN_PACKED_DETAIL) : 0,
				 errhint("Make one with pgdl.pack().")));
	return ds;
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

/* What the cache keeps of a pgdl.models row. */
typedef struct ModelRow
{
	int64		id;
	char	   *name;			/* NULL when the model has none */
	bytea	   *weights;
	int64		dataset;		/* 0 when none */
	int32		diverged_epoch; /* from its metrics; 0: healthy */
	bool		dataset_dropped;	/* its origin says its packed training table was dropped */
} ModelRow;

static void metrics_corrupted(int64 id, const char *what) pg_attribute_noreturn();

/* A pgdl.models.metrics that pgdl could not have written, forged or damaged. */
static void
metrics_corrupted(int64 id, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("model " INT64_FORMAT " in pgdl.models is corrupted", id),
			 errdetail("Column \"metrics\" %s.", what),
			 errhint("Train the model again, or delete it.")));
}

/*
 * The epoch a model diverged in, from its metrics (runs.c writes "diverged":
 * true and its last "epoch" then, and no "diverged" key otherwise); 0 when it
 * did not, or has no metrics (an imported model).  The row is anyone's data:
 * every value is checked.
 */
static int32
diverged_epoch_of(int64 id, Jsonb *metrics)
{
	JsonbValue *diverged;
	JsonbValue *epoch;
	char	   *text;
	char	   *end;
	long		e;

	if (JB_ROOT_IS_SCALAR(metrics) || !JB_ROOT_IS_OBJECT(metrics))
		metrics_corrupted(id, "is not a JSON object");
	diverged = pgdl_jsonb_key(&metrics->root, "diverged");
	if (diverged == NULL)
		return 0;
	if (diverged->type != jbvBool)
		metrics_corrupted(id, "has a \"diverged\" that is not a boolean");
	if (!diverged->val.boolean)
		return 0;
	epoch = pgdl_jsonb_key(&metrics->root, "epoch");
	if (epoch == NULL || epoch->type != jbvNumeric || numeric_is_nan(epoch->val.numeric) ||
		numeric_is_inf(epoch->val.numeric))
		metrics_corrupted(id, "says the model diverged, but has no \"epoch\" number");
	text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(epoch->val.numeric)));
	errno = 0;
	e = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || e < 1 || e > PGDL_MAX_EPOCHS)
		metrics_corrupted(id, psprintf("says the model diverged, but its \"epoch\" is not an integer between 1 and %d",
									   PGDL_MAX_EPOCHS));
	return (int32) e;
}

/*
 * pgdl.forget_dropped_relations marks the models of a dropped packed table in
 * their origin; a catalog older than the column (this library under an older
 * SQL definition, mid-upgrade) has no mark to read.
 */
static const char *
dataset_dropped_sql(void)
{
	Oid			models = get_relname_relid("models", get_namespace_oid("pgdl", false));

	return get_attnum(models, "origin") != InvalidAttrNumber ?
		"coalesce(pg_catalog.jsonb_typeof(origin) = 'object' AND origin ? 'dataset_dropped', false)" : "false";
}

/*
 * The row of model `id`, or of the model named `name` when by_name, copied
 * into the current context, or an error.  Any id is looked up (0 and negative
 * ones find no row): only by_name says "by name".
 */
static void
read_model_row(bool by_name, int64 id, const char *name, ModelRow *row)
{
	Oid			argtypes[1] = {by_name ? TEXTOID : INT8OID};
	Datum		values[1] = {by_name ? CStringGetTextDatum(name) : Int64GetDatum(id)};
	MemoryContext caller = CurrentMemoryContext;
	int			ret;

	memset(row, 0, sizeof(ModelRow));
	SPI_connect();
	ret = SPI_execute_with_args(psprintf("SELECT id, name, weights, dataset, metrics, %s FROM pgdl.models WHERE id = %s",
										 dataset_dropped_sql(), by_name ? "(SELECT pgdl.model_id($1))" : "$1"),
								1, argtypes, values, NULL, true, 1);
	if (ret == SPI_OK_SELECT && SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;
		MemoryContext spi = MemoryContextSwitchTo(caller);	/* outlive SPI_finish */

		row->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		d = SPI_getbinval(tup, desc, 2, &isnull);
		if (!isnull)
			row->name = TextDatumGetCString(d);
		d = SPI_getbinval(tup, desc, 3, &isnull);
		if (!isnull)
			row->weights = DatumGetByteaPCopy(d);
		d = SPI_getbinval(tup, desc, 4, &isnull);
		row->dataset = isnull ? 0 : DatumGetInt64(d);
		d = SPI_getbinval(tup, desc, 5, &isnull);
		if (!isnull)
			row->diverged_epoch = diverged_epoch_of(row->id, DatumGetJsonbP(d));
		row->dataset_dropped = DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	if (row->weights != NULL)
		return;
	if (!by_name)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model " INT64_FORMAT " does not exist", id)));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("model \"%s\" does not exist", pgdl_echo(name))));
}

static PgdlModel *
load_model(bool by_name, int64 id, const char *name)
{
	ModelRow	row;
	CachedModel *slot;
	NnModel    *nn;

	read_model_row(by_name, id, name, &row);
	(void) cache_context();
	nn = pgdl_model_deserialize(row.weights);
	pfree(row.weights);
	slot = cache_slot();
	slot->model.id = row.id;
	slot->model.nn = nn;
	slot->model.diverged_epoch = row.diverged_epoch;
	slot->model.dataset_dropped = row.dataset == 0 && row.dataset_dropped;
	/* a deployment's name is not its model's: the slot answers the name it was looked up by */
	slot->name = by_name ? MemoryContextStrdup(cache_context(), name) : NULL;
	slot->last_used = ++use_clock;
	/* a missing or corrupted dataset row must not leave a half-filled slot behind */
	PG_TRY();
	{
		slot->model.dataset = row.dataset ? pgdl_dataset_by_id(row.dataset) : NULL;
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
	return load_model(false, id, NULL);
}

void
pgdl_check_model_usable(const PgdlModel *model)
{
	pgdl_check_model_preprocessing(model);
	if (model->diverged_epoch == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("model " INT64_FORMAT " diverged in epoch %d", model->id, model->diverged_epoch),
			 errdetail("Its loss or weights became NaN or infinite in that epoch and training stopped: "
					   "its weights are not those of a trained model."),
			 errhint("Train it again with a smaller learning rate, or on normalized features "
					 "(pgdl.pack with standardize => true).")));
}

void
pgdl_check_model_preprocessing(const PgdlModel *model)
{
	if (!model->dataset_dropped)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("model " INT64_FORMAT " lost its training set: its packed table was dropped", model->id),
			 errdetail("The model reads rows as pgdl.pack prepared them for that table (its normalization, "
					   "imputation and classes), which went with the table's row in pgdl.datasets; "
					   "rows as given would be answered wrongly."),
			 errhint("Train the model again on a packed table that stays while the model is used "
					 "(its origin in pgdl.models names the table that was dropped).")));
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
	return load_model(true, 0, name);
}

/* ---- the model argument of a SQL function ---- */

/* How a call site names its model (the type of argument 0). */
typedef enum ModelArgKind
{
	MODEL_BY_ID,
	MODEL_BY_NAME,
	MODEL_BY_BLOB
} ModelArgKind;

/* Per call site state, in fn_extra. */
typedef struct ModelArgSite
{
	ModelArgKind kind;
	bool		blob_is_const;	/* argument 0 is a Const of the query: never changes */
	MemoryContext blob_cxt;		/* owns blob_model (and blob); child of fn_mcxt */
	PgdlModel  *blob_model;		/* the last blob's model, or NULL */
	bytea	   *blob;			/* that blob's bytes, to recognize it again; or NULL */
	/* or, when the blob came as a pointer to a TOAST value, that pointer */
	bool		blob_is_toasted;
	struct varatt_external toast;
	LocalTransactionId toast_lxid;	/* the transaction that saw it */
} ModelArgSite;

/* Which type argument 0 has is read once per call site, from the function's pg_proc row. */
static ModelArgSite *
model_arg_site(FunctionCallInfo fcinfo)
{
	ModelArgSite *site = (ModelArgSite *) fcinfo->flinfo->fn_extra;
	Oid		   *argtypes;
	int			nargs;

	if (site != NULL)
		return site;

	site = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(ModelArgSite));
	get_func_signature(fcinfo->flinfo->fn_oid, &argtypes, &nargs);
	if (nargs < 1)
		elog(ERROR, "function %u takes no model argument", fcinfo->flinfo->fn_oid);
	switch (argtypes[0])
	{
		case INT8OID:
			site->kind = MODEL_BY_ID;
			break;
		case TEXTOID:
			site->kind = MODEL_BY_NAME;
			break;
		case BYTEAOID:
			site->kind = MODEL_BY_BLOB;
			break;
		default:
			elog(ERROR, "unexpected model argument type %u", argtypes[0]);
	}
	pfree(argtypes);

	if (site->kind == MODEL_BY_BLOB && fcinfo->flinfo->fn_expr != NULL &&
		IsA(fcinfo->flinfo->fn_expr, FuncExpr))
	{
		List	   *args = ((FuncExpr *) fcinfo->flinfo->fn_expr)->args;

		site->blob_is_const = args != NIL && IsA(linitial(args), Const);
	}
	fcinfo->flinfo->fn_extra = site;
	return site;
}

/*
 * Whether argument 0 is the TOAST value the site's model was read from.  A
 * value's TOAST pointer names its bytes: the value OID is unique in its TOAST
 * table among the values that exist, dead ones not yet vacuumed included, and
 * a value is never changed in place (an UPDATE that changes it writes a new
 * value with a new OID).  For the same pointer to name other bytes, the value
 * must be deleted, vacuumed away and its OID handed out again by the OID
 * counter coming round 2^32 values later; the pointer is trusted only in the
 * transaction that first saw it, whose snapshot held the value, and its sizes
 * must match too.  So `pgdl.predict((SELECT weights FROM pgdl.models WHERE ...),
 * x)` reads and deserializes the stored blob once per statement, not per row.
 * The caller has the pointer, so it may read the bytes: nothing is served to
 * anyone who could not read them.
 */
static bool
same_toast_value(const ModelArgSite *site, struct varlena *arg, struct varatt_external *toast)
{
	if (!VARATT_IS_EXTERNAL_ONDISK(arg))
		return false;
	VARATT_EXTERNAL_GET_POINTER(*toast, arg);
	return site->blob_model != NULL && site->blob_is_toasted &&
		site->toast_lxid == MyProc->lxid &&
		site->toast.va_valueid == toast->va_valueid &&
		site->toast.va_toastrelid == toast->va_toastrelid &&
		site->toast.va_rawsize == toast->va_rawsize &&
		site->toast.va_extinfo == toast->va_extinfo;
}

/* The model of a blob, kept per call site and recognized by its bytes or its TOAST pointer. */
static PgdlModel *
model_of_blob(FunctionCallInfo fcinfo, ModelArgSite *site)
{
	struct varlena *arg = (struct varlena *) PG_GETARG_POINTER(0);
	struct varatt_external toast;
	bool		toasted = VARATT_IS_EXTERNAL_ONDISK(arg);
	bytea	   *blob;

	if (site->blob_model != NULL && site->blob_is_const)
		return site->blob_model;
	if (same_toast_value(site, arg, &toast))
		return site->blob_model;
	blob = PG_GETARG_BYTEA_PP(0);
	if (site->blob_model != NULL && site->blob != NULL &&
		VARSIZE_ANY_EXHDR(blob) == VARSIZE_ANY_EXHDR(site->blob) &&
		memcmp(VARDATA_ANY(blob), VARDATA_ANY(site->blob), VARSIZE_ANY_EXHDR(blob)) == 0)
		return site->blob_model;

	/* a different blob: drop the last one's model (its context frees it) */
	site->blob_model = NULL;
	site->blob = NULL;
	site->blob_is_toasted = false;
	if (site->blob_cxt != NULL)
		MemoryContextDelete(site->blob_cxt);
	site->blob_cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "pgdl model argument",
										   ALLOCSET_SMALL_SIZES);
	site->blob_model = pgdl_model_from_bytea(blob, site->blob_cxt);
	if (toasted)
	{
		site->blob_is_toasted = true;
		site->toast = toast;
		site->toast_lxid = MyProc->lxid;
	}
	else if (!site->blob_is_const)
	{
		Size		size = VARSIZE_ANY(blob);

		site->blob = MemoryContextAlloc(site->blob_cxt, size);
		memcpy(site->blob, blob, size);
	}
	return site->blob_model;
}

PgdlModel *
pgdl_model_arg(FunctionCallInfo fcinfo)
{
	ModelArgSite *site = model_arg_site(fcinfo);

	switch (site->kind)
	{
		case MODEL_BY_ID:
			return pgdl_model_by_id(PG_GETARG_INT64(0));
		case MODEL_BY_NAME:
			return pgdl_model_by_name(text_to_cstring(PG_GETARG_TEXT_PP(0)));
		case MODEL_BY_BLOB:
			break;
	}
	return model_of_blob(fcinfo, site);
}

PgdlModel *
pgdl_model_arg_copy(FunctionCallInfo fcinfo, MemoryContext owner)
{
	PgdlModel  *copy = MemoryContextAllocZero(owner, sizeof(PgdlModel));
	MemoryContext old;
	PgdlModel  *model;
	NnError		err;

	if (PG_ARGISNULL(0))
		elog(ERROR, "model argument is NULL");
	if (model_arg_site(fcinfo)->kind == MODEL_BY_BLOB)
		return pgdl_model_from_bytea(PG_GETARG_BYTEA_PP(0), owner);	/* already the caller's */

	old = MemoryContextSwitchTo(owner);
	model = pgdl_model_arg(fcinfo);
	copy->id = model->id;
	copy->diverged_epoch = model->diverged_epoch;
	copy->dataset_dropped = model->dataset_dropped;
	copy->nn = nn_model_clone(model->nn, &err);
	if (copy->nn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Copying the model failed: %s.", err.msg)));
	pgdl_model_free_with(copy->nn, owner);
	if (model->dataset != NULL)
		copy->dataset = pgdl_dataset_copy(model->dataset);
	MemoryContextSwitchTo(old);
	return copy;
}
