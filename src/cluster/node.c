/*
 * node.c -- what a node runs for its coordinator.
 *
 * pgdl.train_partitions trains a model on some partitions of a packed table
 * of this server: a model hopper sub-epoch (one partition) or a federated
 * round (every partition of the node, for some epochs).  A model with a frozen
 * base gets its frozen layers too, and runs them over every buffer, as a
 * worker on one server does when it recomputes them.  It does what a
 * coordinator's worker does on a partition of its own (begin, every buffer in
 * buffer_id order, check the weights), so the bytes that come back are the
 * bytes the coordinator would have made.  It runs as the role the coordinator
 * mapped its user to, and reads only what that role may read.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "common/hashfn.h"
#include "utils/inval.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"
#include "cluster/cluster.h"

void
pgdl_node_check_packed(Oid relid)
{
	char	   *name = get_rel_name(relid);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (!pgdl_packed_has_columns(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a packed table", name),
				 errdetail("A packed table has the columns part, buffer_id and n (integer) and x and y (real[]).")));
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", name)));
}

/* The partitions to visit, in order: each 0 .. PGDL_MAX_PARTITIONS - 1. */
static int32 *
read_parts(ArrayType *parts, int *n)
{
	Datum	   *values;
	bool	   *nulls;
	int32	   *out;

	if (ARR_NDIM(parts) > 1 || ARR_ELEMTYPE(parts) != INT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("parts must be a one-dimensional integer array")));
	deconstruct_array(parts, INT4OID, sizeof(int32), true, TYPALIGN_INT, &values, &nulls, n);
	if (*n < 1 || *n > PGDL_MAX_PARTITIONS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parts must name between 1 and %d partitions, not %d", PGDL_MAX_PARTITIONS, *n)));
	out = palloc(sizeof(int32) * *n);
	for (int i = 0; i < *n; i++)
	{
		if (nulls[i] || DatumGetInt32(values[i]) < 0 || DatumGetInt32(values[i]) >= PGDL_MAX_PARTITIONS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("parts must hold partition numbers between 0 and %d", PGDL_MAX_PARTITIONS - 1)));
		out[i] = DatumGetInt32(values[i]);
	}
	return out;
}

/* What the model reads (through its prefix): their input and target sizes say what a buffer must hold. */
static PgdlDataset
dataset_for(Oid relid, const NnModel *model, const NnModel *prefix)
{
	PgdlDataset ds;

	if (prefix && nn_model_output_size(prefix) != nn_model_input_size(model))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the frozen layers do not fit the model"),
				 errdetail("They output %lld values per example; the model takes %lld.",
						   (long long) nn_model_output_size(prefix), (long long) nn_model_input_size(model))));
	memset(&ds, 0, sizeof(ds));
	ds.packed = relid;
	ds.n_features = (int32) nn_model_input_size(prefix ? prefix : model);
	ds.n_targets = (int32) nn_model_target_size(model);
	ds.partitions = PGDL_MAX_PARTITIONS;
	return ds;
}

/*
 * Partitions this session keeps between calls (pgdl.node_cache_mem): a
 * coordinator's worker sends every model that visits its node's partitions
 * through one session, which then reads each partition once per run, as a
 * worker on one server holds its own.  For a model with frozen layers, what is
 * kept is their outputs (the node's feature cache): they run once per run and
 * partition, not at every visit.  Per role (row-level security may show each
 * role other rows), shape and frozen layers; a relcache invalidation of the
 * table (ALTER, TRUNCATE, DROP) forgets it.
 */
typedef struct KeptPartition
{
	Oid			relid;
	int32		part;
	Oid			user;
	int32		n_features;		/* of what is kept: the model's inputs */
	int32		n_targets;
	uint64		prefix_hash;	/* the frozen layers' blob; 0: none */
	PgdlHeldPartition held;
} KeptPartition;

static MemoryContext kept_cxt = NULL;
static List *kept = NIL;		/* of KeptPartition *, in kept_cxt */
static int64 kept_budget;
static bool kept_all_stale = false;

/* Invalidation callbacks may come in the middle of a scan: mark, and free at the next visit. */
static void
forget_kept(Datum arg, Oid relid)
{
	ListCell   *lc;

	foreach(lc, kept)
		if (!OidIsValid(relid) || ((KeptPartition *) lfirst(lc))->relid == relid)
			((KeptPartition *) lfirst(lc))->relid = InvalidOid;
	if (!OidIsValid(relid))
		kept_all_stale = true;
}

static KeptPartition *
kept_partition(const PgdlDataset *ds, int32 part, int32 n_inputs, uint64 prefix_hash, bool *found)
{
	ListCell   *lc;
	KeptPartition *k;
	MemoryContext old;

	if (kept_cxt == NULL)
	{
		kept_cxt = AllocSetContextCreate(TopMemoryContext, "pgdl node partitions", ALLOCSET_DEFAULT_SIZES);
		kept_budget = (int64) pgdl_node_cache_mem * 1024;
		CacheRegisterRelcacheCallback(forget_kept, (Datum) 0);
	}
	if (kept_all_stale)
	{
		MemoryContextReset(kept_cxt);
		kept = NIL;
		kept_budget = (int64) pgdl_node_cache_mem * 1024;
		kept_all_stale = false;
	}
	*found = false;
	foreach(lc, kept)
	{
		k = lfirst(lc);
		*found = k->relid == ds->packed && k->part == part && k->user == GetUserId() &&
			k->n_features == n_inputs && k->n_targets == ds->n_targets && k->prefix_hash == prefix_hash;
		if (*found)
			return k;
	}
	old = MemoryContextSwitchTo(kept_cxt);
	k = palloc0(sizeof(KeptPartition));
	*k = (KeptPartition) {
		.relid = ds->packed, .part = part, .user = GetUserId(), .n_features = n_inputs,
			.n_targets = ds->n_targets, .prefix_hash = prefix_hash
	};
	kept = lappend(kept, k);
	MemoryContextSwitchTo(old);
	return k;
}

/* A visit: the model trains on a partition's buffers, through its frozen prefix if it has one. */
typedef struct Visit
{
	PgdlTrainState *state;
	PgdlPrefixRun frozen;		/* .prefix NULL: the buffers are the model's input */
	uint64		prefix_hash;
	KeptPartition *keeping;		/* a prefix's outputs being kept, or NULL */
} Visit;

/* A buffer of the prefix's outputs kept for the next visits, within the budget; else the partition is not kept. */
static void
keep_features(KeptPartition *k, const float *x, const float *y, int32 n)
{
	Size		xbytes = (Size) n * k->n_features * sizeof(float);
	Size		ybytes = (Size) n * k->n_targets * sizeof(float);
	PgdlHeldBuffer *b;

	if (!k->held.complete)
		return;
	if ((int64) (xbytes + ybytes) > kept_budget)
	{
		k->held.complete = false;
		return;
	}
	kept_budget -= xbytes + ybytes;
	b = MemoryContextAlloc(kept_cxt, sizeof(PgdlHeldBuffer));
	b->x = MemoryContextAllocHuge(kept_cxt, xbytes);
	b->y = MemoryContextAllocHuge(kept_cxt, ybytes);
	b->w = NULL;				/* the cluster refuses weighted datasets (pgdl_packed_refuse_weighted) */
	b->n = n;
	memcpy(b->x, x, xbytes);
	memcpy(b->y, y, ybytes);
	k->held.buffers = lappend(k->held.buffers, b);	/* the caller switched to kept_cxt */
}

static void
train_cb(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept_buffer)
{
	Visit	   *v = arg;

	if (v->state->diverged)
		return;
	if (v->frozen.prefix)
	{
		x = pgdl_prefix_run(&v->frozen, x, n);
		if (v->keeping)
		{
			MemoryContext old = MemoryContextSwitchTo(kept_cxt);

			keep_features(v->keeping, x, y, n);
			MemoryContextSwitchTo(old);
		}
	}
	pgdl_train_buffer(v->state, x, y, w, n);
}

/* Kept buffers are the model's inputs already: no prefix to run. */
static void
train_kept_cb(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept_buffer)
{
	Visit	   *v = arg;

	if (!v->state->diverged)
		pgdl_train_buffer(v->state, x, y, w, n);
}

/* A visit's buffers: kept from an earlier call, or read (and kept, within the budget). */
static void
visit_partition(const PgdlDataset *ds, int32 part, Visit *v)
{
	KeptPartition *k;
	bool		found;
	int32		n_inputs = v->frozen.prefix ? (int32) nn_model_output_size(v->frozen.prefix) : ds->n_features;

	v->keeping = NULL;
	if (pgdl_node_cache_mem <= 0)
	{
		pgdl_packed_scan(ds, part, train_cb, v, NULL, NULL);
		return;
	}
	k = kept_partition(ds, part, n_inputs, v->prefix_hash, &found);
	if (found && k->held.complete)
		pgdl_packed_foreach(ds, part, &k->held, v->frozen.prefix ? train_kept_cb : train_cb, v);
	else if (found)
		pgdl_packed_scan(ds, part, train_cb, v, NULL, NULL);	/* over the budget: read at every visit */
	else if (v->frozen.prefix)
	{
		k->held.complete = true;
		v->keeping = k;
		pgdl_packed_scan(ds, part, train_cb, v, NULL, NULL);
		if (!k->held.complete)
			k->held.buffers = NIL;
	}
	else
		pgdl_packed_hold(ds, part, &k->held, kept_cxt, &kept_budget, train_cb, v);
}

PgdlTrainState *
pgdl_train_visits(NnModel *model, NnModel *prefix, const PgdlTrainConfig *config, const PgdlDataset *ds,
				  const int32 *parts, int n_parts, int32 epochs)
{
	PgdlTrainState total;
	PgdlTrainState *state = NULL;
	Visit		v;
	PgdlDataset cached;
	Oid			cache = prefix ? pgdl_node_cache_valid(ds->packed, prefix) : InvalidOid;

	/* the frozen layers' outputs kept on this node (node_cache.c): read as a packed table of them */
	if (OidIsValid(cache))
	{
		cached = *ds;
		cached.packed = cache;
		cached.n_features = (int32) nn_model_output_size(prefix);
		ds = &cached;
		prefix = NULL;
	}
	v = (Visit) {.frozen = {.prefix = prefix, .cxt = CurrentMemoryContext}};
	if (prefix)
	{
		/* what identifies the frozen layers among the kept partitions */
		Size		len = nn_model_serialized_size(prefix);
		uint8	   *blob = palloc(len);

		nn_model_serialize(prefix, blob);
		v.prefix_hash = hash_bytes_extended(blob, (int) len, 0) | 1;
		pfree(blob);
	}

	memset(&total, 0, sizeof(total));
	for (int32 e = 0; e < epochs && !total.diverged; e++)
		for (int i = 0; i < n_parts && !total.diverged; i++)
		{
			CHECK_FOR_INTERRUPTS();
			state = pgdl_train_begin(model, config, CurrentMemoryContext);
			v.state = state;
			visit_partition(ds, parts[i], &v);
			pgdl_train_check_weights(state);
			total.stats.loss_sum += state->stats.loss_sum;
			total.stats.correct += state->stats.correct;
			total.stats.n += state->stats.n;
			total.examples += state->examples;
			total.diverged = state->diverged;
		}
	*state = (PgdlTrainState) {
		.model = model, .config = *config, .stats = total.stats, .examples = total.examples,
			.diverged = total.diverged, .cxt = CurrentMemoryContext
	};
	return state;
}

PG_FUNCTION_INFO_V1(pgdl_train_partitions);
Datum
pgdl_train_partitions(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	NnModel    *model;
	PgdlTrainConfig config;
	PgdlDataset ds;
	int32	   *parts;
	int			n_parts;
	int32		epochs;
	PgdlTrainState *state;
	NnModel    *prefix = NULL;
	Datum		values[6];
	bool		nulls[6] = {false};

	for (int i = 0; i < 5; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("pgdl.train_partitions needs a model, a configuration, a packed table, parts and epochs")));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pgdl.train_partitions must return a row");
	epochs = PG_GETARG_INT32(4);
	if (epochs < 1 || epochs > PGDL_MAX_EPOCHS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epochs must be between 1 and %d, not %d", PGDL_MAX_EPOCHS, epochs)));
	parts = read_parts(PG_GETARG_ARRAYTYPE_P(3), &n_parts);
	pgdl_node_check_packed(PG_GETARG_OID(2));
	pgdl_engine_prepare();
	model = pgdl_model_deserialize(PG_GETARG_BYTEA_PP(0));
	pgdl_model_free_with(model, CurrentMemoryContext);
	pgdl_config_from_jsonb(PG_GETARG_JSONB_P(1), &config);
	pgdl_config_refuse_epochs(&config, "pgdl.train_partitions");
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
	{
		prefix = pgdl_model_deserialize(PG_GETARG_BYTEA_PP(5));
		pgdl_model_free_with(prefix, CurrentMemoryContext);
	}
	ds = dataset_for(PG_GETARG_OID(2), model, prefix);
	state = pgdl_train_visits(model, prefix, &config, &ds, parts, n_parts, epochs);

	values[0] = PointerGetDatum(pgdl_model_serialize(model));
	values[1] = Int64GetDatum(state->examples);
	values[2] = Float8GetDatum(state->stats.loss_sum);
	values[3] = Int64GetDatum(state->stats.correct);
	values[4] = Int64GetDatum(state->stats.n);
	values[5] = BoolGetDatum(state->diverged != PGDL_HEALTHY);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
