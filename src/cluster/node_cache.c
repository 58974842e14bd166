/*
 * node_cache.c -- feature caches on the nodes of a distributed packed table.
 *
 * On a node: the outputs of a base model's frozen layers over a table the
 * node holds, in a table of pgdl_cache the caller owns (nothing is granted on
 * it), made as one-server caches are (pgdl_cache_create_table).  The node
 * names it itself, from what it is asked for (the table's OID, the frozen
 * layers' depth and SHA-256, the role's OID): no name a coordinator sends is
 * ever read.  The table's comment records the layers' hash and the
 * pgdl.packed_version of the table it was computed from; pgdl.train_partitions
 * reads it in place of running the layers only while both still hold, so a
 * stale cache is never read.
 *
 * On the coordinator: the planner asks each node what its cache needs (reuse,
 * materialize, refresh, rebuild), weighs that with the one-server rule
 * (pgdl_cache_decide_on_nodes), and fit_multiple has the nodes build before
 * training, recording each cache in pgdl.node_feature_cache.  A row of that
 * table is the caller's record, never a pointer: one that names another
 * relation than the node's own cache is refused.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/comment.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "train/train.h"
#include "plan/plan.h"
#include "cluster/cluster.h"

/* ---- on the node ---- */

/* The caller's cache of `packed` through frozen layers (depth, hash) on this node, as it stands. */
typedef struct NodeCache
{
	char	   *relname;		/* in pgdl_cache */
	Oid			relid;			/* invalid: none yet */
	char	   *version;		/* of the packed table now */
	char	   *stamp;			/* what the comment of a valid cache says: hash and version */
	PgdlCacheAction action;		/* what it needs; recompute: the table may not be cached */
} NodeCache;

static char *
spi_text(const char *sql, Oid type, Datum value)
{
	char	   *out = NULL;

	if (SPI_execute_with_args(sql, 1, &type, &value, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
		out = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	return out;
}

static Oid
relation_owner(Oid relid, bool *row_security)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	*row_security = ((Form_pg_class) GETSTRUCT(tup))->relrowsecurity;
	ReleaseSysCache(tup);
	return owner;
}

/* The caller's caches of `packed` at this depth with other frozen layers (a rebuild replaces them). */
static char *
other_caches_pattern(Oid packed, int32 depth)
{
	return psprintf("node\\_%u\\_k%d\\_%%\\_%u", packed, depth, GetUserId());
}

static void
node_cache_state(Oid packed, int32 depth, const char *hash, NodeCache *c)
{
	Oid			nsp = get_namespace_oid("pgdl_cache", false);
	bool		rls;

	c->relname = psprintf("node_%u_k%d_%.8s_%u", packed, depth, hash, GetUserId());
	c->relid = get_relname_relid(c->relname, nsp);
	c->version = spi_text("SELECT pgdl.packed_version($1)", OIDOID, ObjectIdGetDatum(packed));
	c->stamp = psprintf("%s %s", hash, c->version ? c->version : "");
	(void) relation_owner(packed, &rls);
	/* which rows a role sees may change with its policies, which no version shows */
	if (rls)
	{
		c->action = PGDL_CACHE_RECOMPUTE;
		return;
	}
	if (OidIsValid(c->relid))
	{
		char	   *comment;

		if (get_rel_relkind(c->relid) != RELKIND_RELATION || relation_owner(c->relid, &rls) != GetUserId() ||
			!pgdl_packed_has_columns(c->relid))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("feature cache \"pgdl_cache.%s\" exists and is not a cache of the caller", c->relname),
					 errdetail("Only the owner of schema pgdl_cache and superusers can create relations there.")));
		comment = GetComment(c->relid, RelationRelationId, 0);
		c->action = comment && strcmp(comment, c->stamp) == 0 ? PGDL_CACHE_REUSE : PGDL_CACHE_REFRESH;
		return;
	}
	c->action = spi_text(psprintf("SELECT 1 FROM pg_catalog.pg_class WHERE relnamespace = %u AND relkind = 'r' AND relname LIKE $1",
								  nsp), TEXTOID, CStringGetTextDatum(other_caches_pattern(packed, depth)))
		? PGDL_CACHE_REBUILD : PGDL_CACHE_BUILD;
}

/* A valid cache of the caller's for these frozen layers over `packed`, or InvalidOid. */
Oid
pgdl_node_cache_valid(Oid packed, const NnModel *prefix)
{
	char		hash[65];
	NodeCache	c;

	pgdl_prefix_hash(prefix, hash);
	SPI_connect();
	node_cache_state(packed, prefix->spec.n_layers, hash, &c);
	SPI_finish();
	return c.action == PGDL_CACHE_REUSE ? c.relid : InvalidOid;
}

/* One partition's buffers through the frozen layers, gathered, then written (the scan holds SPI). */
typedef struct Fill
{
	PgdlPrefixRun run;
	int32		n_features;		/* of the outputs */
	int32		n_targets;
	List	   *rows;			/* of Datum[3]: n, x, y */
} Fill;

static void
fill_cb(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept)
{
	Fill	   *f = arg;
	MemoryContext old = MemoryContextSwitchTo(f->run.cxt);	/* the scan resets its own per batch */
	Datum	   *row = palloc(sizeof(Datum) * 3);

	x = pgdl_prefix_run(&f->run, x, n);
	row[0] = Int32GetDatum(n);
	row[1] = PointerGetDatum(pgdl_float4_array_from(x, (int64) n * f->n_features));
	row[2] = PointerGetDatum(pgdl_float4_array_from(y, (int64) n * f->n_targets));
	f->rows = lappend(f->rows, row);
	MemoryContextSwitchTo(old);
}

/* The table's buffers through the prefix, partition after partition, in buffer_id order. */
static int64
fill_cache(Oid packed, NnModel *prefix, const NodeCache *c)
{
	char	   *target = quote_qualified_identifier("pgdl_cache", c->relname);
	char	   *source = quote_qualified_identifier(get_namespace_name(get_rel_namespace(packed)), get_rel_name(packed));
	Oid			types[5] = {INT4OID, INT4OID, INT4OID, FLOAT4ARRAYOID, FLOAT4ARRAYOID};
	PgdlDataset ds = {.packed = packed, .partitions = PGDL_MAX_PARTITIONS};
	int32	   *parts;
	int			n_parts;
	int64		rows = 0;
	char	   *targets;

	targets = spi_text(psprintf("SELECT coalesce(max(coalesce(array_length(y, 1), 0) / greatest(n, 1)), 0)"
								" FROM (SELECT y, n FROM %s LIMIT 1) b WHERE $1", source), BOOLOID, BoolGetDatum(true));
	ds.n_features = (int32) nn_model_input_size(prefix);
	ds.n_targets = targets ? atoi(targets) : 0;
	if (SPI_execute(psprintf("SELECT DISTINCT part FROM %s ORDER BY 1", source), true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the partitions of \"%s\"", source);
	n_parts = (int) SPI_processed;
	parts = palloc(sizeof(int32) * Max(n_parts, 1));
	for (int i = 0; i < n_parts; i++)
		parts[i] = atoi(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	for (int i = 0; i < n_parts; i++)
	{
		Fill		f = {.run = {.prefix = prefix, .cxt = CurrentMemoryContext},
		.n_features = (int32) nn_model_output_size(prefix), .n_targets = ds.n_targets};
		int32		buffer_id = 0;
		ListCell   *lc;

		CHECK_FOR_INTERRUPTS();
		pgdl_packed_scan(&ds, parts[i], fill_cb, &f, NULL, NULL);
		foreach(lc, f.rows)
		{
			Datum	   *row = lfirst(lc);
			Datum		values[5] = {Int32GetDatum(parts[i]), Int32GetDatum(buffer_id++), row[0], row[1], row[2]};

			if (SPI_execute_with_args(psprintf("INSERT INTO %s VALUES ($1, $2, $3, $4, $5)", target), 5, types,
									  values, NULL, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "could not write feature cache \"%s\"", target);
			rows++;
		}
	}
	return rows;
}

/* Make the cache what its state says it needs: drop what it replaces, make or empty it, fill, stamp. */
static void
build_cache(Oid packed, NnModel *prefix, NodeCache *c)
{
	char	   *target = quote_qualified_identifier("pgdl_cache", c->relname);

	if (c->action == PGDL_CACHE_REBUILD)
	{
		Oid			nsp = get_namespace_oid("pgdl_cache", false);
		Oid			type = TEXTOID;
		Datum		pattern = CStringGetTextDatum(other_caches_pattern(packed, prefix->spec.n_layers));
		char	   *drops;

		/* only the caller's own tables: the pattern ends with its role's OID, and the owner is checked */
		drops = spi_text(psprintf("SELECT string_agg(format('DROP TABLE pgdl_cache.%%I', relname), '; ')"
								  " FROM pg_catalog.pg_class WHERE relnamespace = %u AND relname LIKE $1"
								  " AND relkind = 'r' AND relowner = %u", nsp, GetUserId()), type, pattern);
		if (drops && SPI_execute(drops, false, 0) < 0)
			elog(ERROR, "could not drop the caches \"%s\" replaces", target);
	}
	if (!OidIsValid(c->relid))
	{
		pgdl_cache_create_table(c->relname);
		if (SPI_execute(psprintf("ALTER TABLE %s ALTER COLUMN x SET STORAGE EXTERNAL,"
								 " ALTER COLUMN y SET STORAGE EXTERNAL", target), false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not set the storage of \"%s\"", target);
	}
	else if (SPI_execute(psprintf("TRUNCATE %s", target), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not empty \"%s\"", target);
	(void) fill_cache(packed, prefix, c);
	if (SPI_execute(psprintf("COMMENT ON TABLE %s IS %s", target, quote_literal_cstr(c->stamp)), false, 0)
		!= SPI_OK_UTILITY)
		elog(ERROR, "could not stamp \"%s\"", target);
}

PG_FUNCTION_INFO_V1(pgdl_node_feature_cache);
Datum
pgdl_node_feature_cache(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	NnModel    *prefix;
	Oid			packed;
	char		hash[65];
	NodeCache	c;
	Datum		values[4];
	bool		nulls[4] = {false};

	for (int i = 0; i < 3; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("pgdl.node_feature_cache needs frozen layers, a packed table and build")));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pgdl.node_feature_cache must return a row");
	packed = PG_GETARG_OID(1);
	pgdl_node_check_packed(packed);
	pgdl_engine_prepare();
	prefix = pgdl_model_deserialize(PG_GETARG_BYTEA_PP(0));
	pgdl_model_free_with(prefix, CurrentMemoryContext);
	pgdl_prefix_hash(prefix, hash);
	SPI_connect();
	node_cache_state(packed, prefix->spec.n_layers, hash, &c);
	values[1] = CStringGetTextDatum(pgdl_cache_action_name(c.action));
	if (PG_GETARG_BOOL(2) && c.action != PGDL_CACHE_REUSE && c.action != PGDL_CACHE_RECOMPUTE)
		build_cache(packed, prefix, &c);
	SPI_finish();
	values[0] = CStringGetTextDatum(c.relname);
	values[2] = CStringGetTextDatum(c.version ? c.version : "");
	values[3] = Int64GetDatum(0);
	c.relid = get_relname_relid(c.relname, get_namespace_oid("pgdl_cache", false));
	if (OidIsValid(c.relid))
		values[3] = DirectFunctionCall1(pg_total_relation_size, ObjectIdGetDatum(c.relid));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/* ---- on the coordinator ---- */

/* What a node said of its cache of a table. */
typedef struct NodeAnswer
{
	char	   *cache;
	PgdlCacheAction action;
	char	   *version;
	int64		bytes;
} NodeAnswer;

#define NODE_CACHE_SQL \
	"SELECT cache, action, version, bytes FROM pgdl.node_feature_cache($1::bytea, $2::regclass, $3::boolean)"

static void
ask_node(PgdlNode *node, const bytea *prefix, const char *remote, bool build, NodeAnswer *a)
{
	const char *values[3] = {VARDATA_ANY(prefix), remote, build ? "true" : "false"};
	int			lengths[3] = {(int) VARSIZE_ANY_EXHDR(prefix), 0, 0};
	int			formats[3] = {1, 0, 0};
	PGresult   *res;
	char	   *action = NULL;
	bool		ok;

	pgdl_node_send(node, NODE_CACHE_SQL, 3, values, lengths, formats, false);
	res = pgdl_node_result(node, PGRES_TUPLES_OK);
	ok = PQntuples(res) == 1 && PQnfields(res) == 4 && strlen(PQgetvalue(res, 0, 0)) < NAMEDATALEN;
	if (ok)
	{
		a->cache = pstrdup(PQgetvalue(res, 0, 0));
		action = pstrdup(PQgetvalue(res, 0, 1));
		a->version = pstrdup(PQgetvalue(res, 0, 2));
		a->bytes = strtoi64(PQgetvalue(res, 0, 3), NULL, 10);
	}
	PQclear(res);
	a->action = -1;
	for (int i = PGDL_CACHE_RECOMPUTE; ok && i <= PGDL_CACHE_REBUILD; i++)
		if (strcmp(action, pgdl_cache_action_name(i)) == 0)
			a->action = i;
	if (a->action < 0 || a->bytes < 0 || strncmp(a->cache, "node_", 5) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("server \"%s\" answered pgdl.node_feature_cache with something else than a cache's state",
						node->name)));
}

/*
 * Whether the caller's pgdl.node_feature_cache records this cache.  The table
 * is the caller's to write: a row is checked against what the node says, and
 * one that names another relation is refused.
 */
static bool
check_record(const PgdlDataset *ds, const PgdlNode *node, const char *remote, const PgdlCacheGroup *grp,
			 const NodeAnswer *a)
{
	Oid			types[5] = {OIDOID, TEXTOID, TEXTOID, INT4OID, TEXTOID};
	Datum		values[5] = {ObjectIdGetDatum(ds->packed), CStringGetTextDatum(node->name),
		CStringGetTextDatum(remote), Int32GetDatum(grp->depth), CStringGetTextDatum(grp->hash)};
	uint64		n;

	SPI_connect();
	if (SPI_execute_with_args("SELECT id, cache FROM pgdl.node_feature_cache WHERE source = $1 AND server = $2"
							  " AND remote_table = $3 AND depth = $4 AND base_hash = $5"
							  " AND owner = quote_ident(current_user)::regrole", 5, types, values, NULL, true, 0)
		!= SPI_OK_SELECT)
		elog(ERROR, "could not read pgdl.node_feature_cache");
	n = SPI_processed;
	for (uint64 r = 0; r < n; r++)
	{
		char	   *cache = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2);

		if (cache == NULL || strcmp(cache, a->cache) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("pgdl.node_feature_cache row %s names \"%s\", not the cache of server \"%s\"",
							SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1),
							cache ? cache : "", node->name),
					 errdetail("Server \"%s\" keeps the outputs of these frozen layers over %s in pgdl_cache.%s.",
							   node->name, remote, a->cache),
					 errhint("Set the row's cache to \"%s\", or have a superuser delete the row: the next pgdl.fit_multiple records the node's cache again.", a->cache)));
	}
	SPI_finish();
	return n > 0;
}

/* What group g's caches need, over every partition on a node: the most work any needs. */
static PgdlCacheAction
ask_group(const PgdlCacheGroup *grp, const PgdlDataset *ds, const PgdlPartPlace *places, double *bytes,
		  StringInfo names)
{
	static const int work[] = {[PGDL_CACHE_REUSE] = 0, [PGDL_CACHE_REFRESH] = 1, [PGDL_CACHE_BUILD] = 2,
	[PGDL_CACHE_REBUILD] = 3};
	bytea	   *prefix = pgdl_model_serialize(grp->prefix);
	PgdlCacheAction worst = PGDL_CACHE_REUSE;

	for (int p = 0; p < ds->partitions; p++)
	{
		PgdlNode   *node;
		NodeAnswer	a;
		PgdlCacheAction act;

		if (!OidIsValid(places[p].server))
			continue;
		node = pgdl_node_connect(places[p].server, false);
		ask_node(node, prefix, places[p].remote, false, &a);
		act = a.action;
		/* the node has it, the catalog does not: recorded again by a refresh */
		if (act == PGDL_CACHE_REUSE && !check_record(ds, node, places[p].remote, grp, &a))
			act = PGDL_CACHE_REFRESH;
		else if (act != PGDL_CACHE_REUSE)
			(void) check_record(ds, node, places[p].remote, grp, &a);
		appendStringInfo(names, "%s%s: pgdl_cache.%s", names->len ? ", " : "", node->name, a.cache);
		pgdl_node_close(node);
		if (act == PGDL_CACHE_RECOMPUTE)
			return act;
		*bytes += (double) a.bytes;
		if (work[act] > work[worst])
			worst = act;
	}
	return worst;
}

void
pgdl_node_cache_plan(PgdlCachePlan *plan, const PgdlDataset *ds, int32 epochs, int32 workers, const char *mode)
{
	bool		distributed;
	PgdlPartPlace *places = pgdl_packed_places(ds->packed, ds->partitions, &distributed);

	for (int g = 0; g < plan->n_groups && distributed && strcmp(mode, "off") != 0; g++)
	{
		PgdlCacheGroup *grp = &plan->groups[g];
		double		bytes = 0;
		StringInfoData names;
		PgdlCacheAction action;

		initStringInfo(&names);
		action = ask_group(grp, ds, places, &bytes, &names);
		if (action == PGDL_CACHE_RECOMPUTE)
		{
			grp->reason = "a node's table has row-level security: its nodes run the frozen layers at every visit";
			continue;
		}
		pgdl_cache_decide_on_nodes(plan, g, ds, epochs, workers, mode, action, bytes);
		if (grp->action == PGDL_CACHE_REUSE)
			grp->reason = "every node that holds a partition has a valid cache of the frozen layers";
		if (grp->action != PGDL_CACHE_RECOMPUTE)
			grp->side[0].view = names.data;
	}
}

/* Have each node make its cache of the group what it needs, and record it. */
static void
build_group(const PgdlCacheGroup *grp, const PgdlDataset *ds, const PgdlPartPlace *places)
{
	bytea	   *prefix = pgdl_model_serialize(grp->prefix);

	for (int p = 0; p < ds->partitions; p++)
	{
		PgdlNode   *node;
		NodeAnswer	a;
		Oid			types[9] = {OIDOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, INT4OID, TEXTOID, TEXTOID, INT8OID};
		Datum		values[9];

		if (!OidIsValid(places[p].server))
			continue;
		CHECK_FOR_INTERRUPTS();
		node = pgdl_node_connect(places[p].server, false);
		ask_node(node, prefix, places[p].remote, true, &a);
		(void) check_record(ds, node, places[p].remote, grp, &a);
		values[0] = ObjectIdGetDatum(ds->packed);
		values[1] = CStringGetTextDatum(node->name);
		values[2] = CStringGetTextDatum(places[p].remote);
		values[3] = Int64GetDatum(grp->base_id);
		values[4] = CStringGetTextDatum(grp->hash);
		values[5] = Int32GetDatum(grp->depth);
		values[6] = CStringGetTextDatum(a.cache);
		values[7] = CStringGetTextDatum(a.version);
		values[8] = Int64GetDatum(a.bytes);
		pgdl_node_close(node);
		SPI_connect();
		/* one row per node table, depth and role: a rebuild's row replaces the other weights' in place */
		if (SPI_execute_with_args("INSERT INTO pgdl.node_feature_cache AS n (source, server, remote_table, base_model,"
								  " base_hash, depth, cache, source_version, bytes)"
								  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
								  " ON CONFLICT (source, server, remote_table, depth, owner) DO UPDATE SET"
								  " base_model = EXCLUDED.base_model, base_hash = EXCLUDED.base_hash,"
								  " cache = EXCLUDED.cache, source_version = EXCLUDED.source_version,"
								  " bytes = EXCLUDED.bytes, last_used = now(),"
								  " created = CASE WHEN n.base_hash = EXCLUDED.base_hash THEN n.created ELSE now() END",
								  9, types, values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not record a node's feature cache");
		SPI_finish();
	}
}

void
pgdl_node_cache_build(const PgdlCachePlan *plan, const PgdlDataset *ds)
{
	bool		distributed;
	PgdlPartPlace *places = pgdl_packed_places(ds->packed, ds->partitions, &distributed);

	for (int g = 0; g < plan->n_groups && distributed; g++)
		if (plan->groups[g].action != PGDL_CACHE_RECOMPUTE)
			build_group(&plan->groups[g], ds, places);
}
