/*
 * feature_cache.c -- the planner of materialized feature layers.
 *
 * Configurations that share a frozen prefix (transfer.c: the prefix's spec
 * and weights) and the packed source share the prefix's outputs.  The planner
 * groups them and decides per group whether to recompute those outputs for
 * every configuration and epoch or to keep them in a materialized view in
 * schema pgdl_cache, registered in pgdl.feature_cache, with the packed table's
 * columns and partition numbers, so that training reads it as it reads the
 * packed table.  With several depths on one base, a deeper cache is staged:
 * computed from a shallower one.  The decision weighs the prefix's FLOPs
 * against the bytes written and read, within pgdl.feature_cache_budget; the
 * work on each cache is a task that a worker runs before training, under the
 * cache's build lock (its SQL, and a new view made in C: see "in the worker").
 *
 * A view names the hash of the weights it was defined for (pgdl.cache_features
 * refuses to compute with others); a trigger marks a cache stale when its base
 * model changes, a cache records the version of its packed table, and a stale
 * cache is refreshed or rebuilt before use, never read.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/tablecmds.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "train/train.h"
#include "plan/plan.h"

/* What the planner assumes of this machine, besides pgdl.cpu_gflops. */
#define CACHE_WRITE_BYTES_PER_SECOND	(150.0 * 1024 * 1024)	/* materialized view, TOAST and WAL */
#define CACHE_READ_BYTES_PER_SECOND		(400.0 * 1024 * 1024)

static const char *const action_names[] = {
	[PGDL_CACHE_RECOMPUTE] = "recompute",
	[PGDL_CACHE_REUSE] = "reuse",
	[PGDL_CACHE_BUILD] = "materialize",
	[PGDL_CACHE_REFRESH] = "refresh",
	[PGDL_CACHE_REBUILD] = "rebuild",
};

const char *
pgdl_cache_action_name(PgdlCacheAction action)
{
	return action_names[action];
}

/*
 * The plan outlives the planner's SPI connection, so it is allocated in the
 * caller's context.  Every SPI call returns in SPI's own procedure context,
 * which SPI_finish frees: each query switches back to the plan's context.
 */
static MemoryContext plan_cxt;

/* One row of a read-only query, or false; SPI_tuptable holds it until the next query. */
static bool
plan_query(const char *sql, int nargs, Oid *types, Datum *values)
{
	bool		found;

	found = SPI_execute_with_args(sql, nargs, types, values, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1;
	MemoryContextSwitchTo(plan_cxt);
	return found;
}

static int64
spi_int8(const char *sql, int nargs, Oid *types, Datum *values)
{
	bool		isnull;
	Datum		d;

	if (!plan_query(sql, nargs, types, values))
		return 0;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}

/* ---- a group's cache of one packed table: what there is ---- */

/*
 * A free name in pgdl_cache for the caller's cache of `ds` at `depth`, qualified
 * and quoted; *relname: as is.  It ends with the caller's role OID, so builds of
 * two roles never want one name (nor its build lock).
 */
static char *
cache_view_name(const PgdlDataset *ds, int32 depth, const char *hash, List *taken, char **relname)
{
	char	   *rel = get_rel_name(ds->packed);
	char		base[NAMEDATALEN];

	/* at most 28 + 2 + 3 + 1 + 8 + 1 + 10 bytes: room below NAMEDATALEN for a suffix _1, _2 ... */
	snprintf(base, sizeof(base), "%.28s_k%d_%.8s_%u", rel ? rel : "dataset", depth, hash, GetUserId());
	/* a plain name whatever the table's: lower-case letters, digits and underscores */
	for (char *c = base; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
			*c = (*c >= 'A' && *c <= 'Z') ? *c - 'A' + 'a' : '_';
	for (int i = 0;; i++)
	{
		char	   *name = i == 0 ? pstrdup(base) : psprintf("%s_%d", base, i);
		char	   *qualified = quote_qualified_identifier("pgdl_cache", name);
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {CStringGetTextDatum(qualified)};
		ListCell   *lc;
		bool		used = false;

		foreach(lc, taken)
			used |= strcmp(lfirst(lc), qualified) == 0;
		if (!used && spi_int8("SELECT to_regclass($1)::oid::int8", 1, types, values) == 0)
		{
			*relname = name;
			return qualified;
		}
	}
}

/* pgdl.packed_version of a packed table now. */
static char *
packed_version(Oid packed)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(packed)};

	if (!plan_query("SELECT pgdl.packed_version($1)", 1, types, values))
		elog(ERROR, "could not read the version of packed table %u", packed);
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/*
 * The caller's cache of (ds, depth) for the group, if there is one: the side
 * reuses, refreshes or rebuilds it.  false: there is none.
 */
static bool
find_cache(const PgdlCacheGroup *g, const PgdlDataset *ds, PgdlCacheSide *s)
{
	Oid			types[4] = {INT8OID, INT4OID, TEXTOID, INT8OID};
	Datum		values[4] = {Int64GetDatum(ds->id), Int32GetDatum(g->depth), CStringGetTextDatum(g->hash),
	Int64GetDatum(g->base_id)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	bool		same,
				valid,
				staged;

	/* the caller's own caches only: nobody reads another user's features */
	/*
	 * The catalog is writable by all: trust only rows whose view is a
	 * materialized view in pgdl_cache that the caller owns.
	 */
	if (!plan_query("SELECT f.id, f.view::text, f.base_hash = $3, f.valid, f.bytes, f.source_version, "
							  "f.staged_from IS NOT NULL, c.relname::text "
							  "FROM pgdl.feature_cache f JOIN pg_catalog.pg_class c ON c.oid = f.view "
							  "WHERE f.dataset = $1 AND f.depth = $2 AND f.owner = quote_ident(current_user)::regrole "
							  "AND c.relkind = 'm' AND c.relnamespace = 'pgdl_cache'::regnamespace "
							  "AND c.relowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user) "
							  "AND (f.base_hash = $3 OR f.base_model = $4) "
							  "ORDER BY f.base_hash = $3 DESC, f.valid DESC, f.id DESC LIMIT 1",
							  4, types, values))
		return false;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	same = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
	valid = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
	staged = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
	/* the packed table changed since: stale */
	valid &= strcmp(SPI_getvalue(tup, desc, 6), s->version) == 0;

	s->cache_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	s->old_view = SPI_getvalue(tup, desc, 2);
	s->existing_bytes = (double) DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
	/*
	 * A stale cache computed from a shallower one is built again rather than
	 * refreshed: a refresh would read the shallower cache, which may be stale
	 * too.
	 */
	s->action = !same ? PGDL_CACHE_REBUILD : valid ? PGDL_CACHE_REUSE :
		staged ? PGDL_CACHE_REBUILD : PGDL_CACHE_REFRESH;
	/* rebuilt with other weights, it gets a name with their hash; else it keeps its own */
	s->view = s->action == PGDL_CACHE_REBUILD && !same ? NULL : s->old_view;
	s->relname = s->view ? SPI_getvalue(tup, desc, 8) : NULL;
	return true;
}

/* The group's cache of ds: reuse, refresh or rebuild the one there is, or build one. */
static void
plan_side(PgdlCacheGroup *g, int side, const PgdlDataset *ds, List **taken)
{
	PgdlCacheSide *s = &g->side[side];

	s->ds = ds;
	s->version = packed_version(ds->packed);
	if (!find_cache(g, ds, s))
		s->action = PGDL_CACHE_BUILD;
	if (s->view == NULL)
	{
		s->view = cache_view_name(ds, g->depth, g->hash, *taken, &s->relname);
		*taken = lappend(*taken, s->view);
	}
	s->bytes = (double) ds->n_rows_hint * (g->feature_floats + ds->n_targets) * sizeof(float);
}

/* ---- the SQL of the work on a cache ---- */

/* A refresh of a cache's view, named with its buffers for pgdl.progress (transfer.c). */
static void
append_refresh(StringInfo sql, const char *view, const PgdlDataset *ds)
{
	appendStringInfo(sql,
					 "SELECT pg_catalog.set_config('pgdl_cache.build', %s::regclass::oid || ' ' ||"
					 " coalesce((SELECT n_buffers FROM pgdl.datasets WHERE id = " INT64_FORMAT "), 0), true);\n",
					 quote_literal_cstr(view), ds->id);
	appendStringInfo(sql, "REFRESH MATERIALIZED VIEW %s;\n", view);
}

/* A build: the view, made by the worker (pgdl_cache_create_view), then filled and registered. */
static void
append_build(PgdlCacheTask *task, StringInfo sql, const PgdlCacheGroup *g, const PgdlCacheSide *s,
			 const PgdlCacheGroup *from, int side)
{
	const char *source = from ? from->side[side].view :
		quote_qualified_identifier(get_namespace_name(get_rel_namespace(s->ds->packed)), get_rel_name(s->ds->packed));
	int32		first = from ? from->depth : 0;
	char	   *view_literal = quote_literal_cstr(s->view);

	if (s->action == PGDL_CACHE_REBUILD)
		task->before = psprintf("DROP MATERIALIZED VIEW IF EXISTS %s CASCADE;\n", s->old_view);
	/* every name is qualified: the view is made with search_path pg_catalog */
	task->definition = psprintf("SELECT part, buffer_id, n, pgdl.cache_features(" INT64_FORMAT ", %d, %d, '%s', x, n)"
								" AS x, y FROM %s", g->base_id, first, g->depth, g->hash, source);
	appendStringInfo(sql, "ALTER MATERIALIZED VIEW %s ALTER COLUMN x SET STORAGE EXTERNAL,"
					 " ALTER COLUMN y SET STORAGE EXTERNAL;\n", s->view);
	append_refresh(sql, s->view, s->ds);
	appendStringInfo(sql,
					 "INSERT INTO pgdl.feature_cache (dataset, source, base_model, base_hash, depth, staged_from, view,"
					 " source_version, rows, bytes)"
					 " SELECT " INT64_FORMAT ", %u, " INT64_FORMAT ", '%s', %d, %s, %s::regclass, %s, count(*),"
					 " pg_total_relation_size(%s) FROM %s ON CONFLICT (view) DO NOTHING;\n",
					 s->ds->id, s->ds->packed, g->base_id, g->hash, g->depth,
					 from ? psprintf("(SELECT id FROM pgdl.feature_cache WHERE view = %s::regclass)",
									 quote_literal_cstr(from->side[side].view)) : "NULL",
					 view_literal, quote_literal_cstr(s->version), view_literal, s->view);
}

/*
 * The work on one cache, in a transaction of its own: builds and refreshes of a
 * view wait for any other run's on the same view (it then finds it built).
 */
static PgdlCacheTask *
side_task(const PgdlCacheGroup *g, const PgdlCacheGroup *from, int side)
{
	const PgdlCacheSide *s = &g->side[side];
	PgdlCacheTask *task = palloc0(sizeof(PgdlCacheTask));
	StringInfoData buf;
	StringInfo	sql = &buf;

	initStringInfo(sql);
	Assert(s->action == PGDL_CACHE_REUSE || s->relname != NULL);
	task->relname = s->action != PGDL_CACHE_REUSE ? s->relname : "";
	task->before = "";
	task->definition = "";
	switch (s->action)
	{
		case PGDL_CACHE_REUSE:
			appendStringInfo(sql, "UPDATE pgdl.feature_cache SET last_used = now() WHERE id = " INT64_FORMAT ";\n",
							 s->cache_id);
			break;
		case PGDL_CACHE_REFRESH:
			append_refresh(sql, s->view, s->ds);
			appendStringInfo(sql,
							 "UPDATE pgdl.feature_cache SET valid = true, last_used = now(), refreshed = now(), source_version = %s,"
							 " rows = (SELECT count(*) FROM %s), bytes = pg_total_relation_size(%s) WHERE id = " INT64_FORMAT ";\n",
							 quote_literal_cstr(s->version), s->view, quote_literal_cstr(s->view), s->cache_id);
			break;
		case PGDL_CACHE_BUILD:
		case PGDL_CACHE_REBUILD:
			append_build(task, sql, g, s, from, side);
			break;
		case PGDL_CACHE_RECOMPUTE:
			break;
	}
	task->sql = sql->data;
	return task;
}

/* ---- in the worker: the build lock and the view ---- */

/*
 * The build lock of cache view `relname` of the caller, until the transaction
 * ends: two runs that build or refresh one view take turns, and the second
 * finds the view built.  Taken here, in C, with a tag of pgdl's own (base/base.h)
 * that no SQL function can name, so no role can hold it to stall a build.  The
 * key is a hash of the name: two names with one hash only make their builds
 * take turns.  The names carry the caller's role OID: only the caller's own
 * runs ever wait here for each other.
 */
void
pgdl_cache_lock_build(const char *relname)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) GetUserId(),
						 hash_bytes((const unsigned char *) relname, strlen(relname)), PGDL_LOCK_CACHE_BUILD);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	/* the view another run made while this one waited is in the catalog caches from now */
	AcceptInvalidationMessages();
}

static Oid
rel_owner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Make cache view pgdl_cache.`relname` for the caller, under its build lock: a
 * materialized view WITH NO DATA of `definition`, the caller's.
 *
 * Only the schema's owner (the extension's) may create in pgdl_cache, so that
 * no role can take or plant a name a build is about to use.  The view is
 * therefore made as that owner, and given to the caller at once, in the same
 * transaction, as if the caller had made it: the caller fills it (REFRESH runs
 * as the owner), drops it, and nobody else is granted anything.  What runs as
 * the schema's owner is the parse of pgdl's own definition (the planner's,
 * from the run's shared memory, which no SQL reaches; its names qualified),
 * with search_path pg_catalog, pg_temp and as a restricted operation: WITH NO
 * DATA executes nothing, and the caller's privileges on what it reads are
 * checked when the caller fills it.
 */
static void
create_for_caller(const char *relname, char relkind, const char *sql)
{
	Oid			nsp = get_namespace_oid("pgdl_cache", false);
	Oid			caller = GetUserId();
	Oid			relid = get_relname_relid(relname, nsp);
	PgdlActAs	saved;
	HeapTuple	tup;
	Oid			schema_owner;

	if (OidIsValid(relid))
	{
		/* another run of the caller's built it meanwhile: it is refreshed next */
		if (get_rel_relkind(relid) == relkind && rel_owner(relid) == caller)
			return;
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("feature cache \"pgdl_cache.%s\" exists and is not a cache of the caller", relname),
				 errdetail("Only the owner of schema pgdl_cache and superusers can create relations there.")));
	}
	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for schema %u", nsp);
	schema_owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);

	pgdl_act_as_begin(schema_owner, &saved);
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create feature cache \"pgdl_cache.%s\"", relname);
	pgdl_act_as_end(&saved);

	/*
	 * recursing skips ALTER OWNER's checks (that the schema's owner may become
	 * the caller): the relation is the one just made, for the caller
	 */
	relid = get_relname_relid(relname, nsp);
	ATExecChangeOwner(relid, caller, true, AccessExclusiveLock);
	CommandCounterIncrement();
}

void
pgdl_cache_create_view(const char *relname, const char *definition)
{
	create_for_caller(relname, RELKIND_MATVIEW,
					  psprintf("CREATE MATERIALIZED VIEW pgdl_cache.%s AS %s WITH NO DATA",
							   quote_identifier(relname), definition));
}

/*
 * The same for a node's cache (cluster/node_cache.c): an empty table of a
 * packed table's columns, made as the schema's owner (nothing is read) and
 * given to the caller at once.
 */
void
pgdl_cache_create_table(const char *relname)
{
	create_for_caller(relname, RELKIND_RELATION,
					  psprintf("CREATE TABLE pgdl_cache.%s (part integer NOT NULL, buffer_id integer NOT NULL,"
							   " n integer NOT NULL, x real[], y real[])", quote_identifier(relname)));
}

/* ---- grouping and deciding ---- */

static int
compare_groups(const void *a, const void *b)
{
	const PgdlCacheGroup *x = a;
	const PgdlCacheGroup *y = b;

	if (x->base_id != y->base_id)
		return x->base_id < y->base_id ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return strcmp(x->hash, y->hash);
}

/* The group of frozen layers of this depth and hash, or plan->n_groups if there is none yet. */
static int
find_group(const PgdlCachePlan *plan, const PgdlTransfer *t)
{
	int			g;

	for (g = 0; g < plan->n_groups; g++)
		if (plan->groups[g].depth == t->freeze && strcmp(plan->groups[g].hash, t->hash) == 0)
			break;
	return g;
}

/* A group for the frozen prefix of t, with no configuration yet and nothing decided. */
static void
init_group(PgdlCacheGroup *grp, const PgdlTransfer *t)
{
	NnCost		cost;
	NnError		err;

	grp->base_id = t->base_id;
	grp->base_name = t->base_name;
	grp->depth = t->freeze;
	strlcpy(grp->hash, t->hash, sizeof(grp->hash));
	grp->prefix = t->prefix;
	grp->feature_floats = nn_model_output_size(t->prefix);
	if (!nn_spec_cost(&t->prefix->spec, NULL, &cost, &err))
		pgdl_report_nn_error("base model", &err);
	grp->prefix_flops = (double) cost.flops_forward;
	grp->staged_from = -1;
}

/* Group the configurations by their prefix's hash and depth (the source is the run's), shallower first. */
static void
group_transfers(PgdlCachePlan *plan, PgdlTransfer **transfers, int n, int *group_of)
{
	for (int i = 0; i < n; i++)
	{
		PgdlTransfer *t = transfers[i];
		int			g;

		if (t == NULL || t->prefix == NULL)
			continue;
		g = find_group(plan, t);
		if (g == plan->n_groups)
			init_group(&plan->groups[plan->n_groups++], t);
		plan->groups[g].n_configs++;
	}
	/* shallower first: a deeper cache may be computed from one of them */
	qsort(plan->groups, plan->n_groups, sizeof(PgdlCacheGroup), compare_groups);
	for (int i = 0; i < n; i++)
		group_of[i] = transfers[i] && transfers[i]->prefix ? find_group(plan, transfers[i]) : -1;
}

/* What the planner knows while it goes through the groups, shallower first. */
typedef struct Planner
{
	PgdlCachePlan *plan;
	const PgdlDataset *train;
	const PgdlDataset *valid;	/* or NULL */
	int32		epochs;
	int32		workers;
	const char *mode;			/* auto, on, off */
	double		rate;			/* FLOP/s of one worker */
	double		used;			/* bytes of every registered cache, with the groups decided so far */
	List	   *taken;			/* view names given to the groups so far */
} Planner;

/* What materializing a group's caches takes: its figures, side by side. */
typedef struct GroupWork
{
	double		examples;		/* the training and validation sets' */
	double		uses;			/* configurations x epochs */
	double		build_flops;	/* per example: the prefix, or what a staged cache adds */
	double		compute;		/* flops of the builds and refreshes */
	double		write;			/* bytes they write */
	double		new_bytes;		/* storage they take */
	double		freed;			/* storage of the caches they replace */
	double		all_bytes;		/* storage of the group's caches */
	bool		any_work;		/* a side is not reused as it is */
} GroupWork;

/* Stage group g from the deepest shallower group of the same base that will be materialized. */
static void
stage_group(PgdlCachePlan *plan, int g, GroupWork *w)
{
	PgdlCacheGroup *grp = &plan->groups[g];

	w->build_flops = grp->prefix_flops;
	for (int h = g - 1; h >= 0; h--)
	{
		PgdlCacheGroup *o = &plan->groups[h];

		if (o->base_id == grp->base_id && o->depth < grp->depth && o->action != PGDL_CACHE_RECOMPUTE)
		{
			grp->staged_from = h;
			w->build_flops = grp->prefix_flops - o->prefix_flops;
			break;
		}
	}
}

/* The cost of both ways: recomputing the prefix every epoch, or materializing it once. */
static void
cost_group(const Planner *p, PgdlCacheGroup *grp, GroupWork *w)
{
	for (int s = 0; s < (p->valid ? 2 : 1); s++)
	{
		PgdlCacheSide *side = &grp->side[s];

		w->all_bytes += side->bytes;
		if (side->action == PGDL_CACHE_REUSE)
			continue;
		w->any_work = true;
		w->compute += w->build_flops * side->ds->n_rows_hint;
		w->write += side->bytes;
		if (side->action == PGDL_CACHE_BUILD)
			w->new_bytes += side->bytes;
		else
			w->freed += side->existing_bytes, w->new_bytes += side->bytes;
	}
	/* the workers share recomputing; a build runs in parallel on their cores */
	grp->recompute_seconds = grp->prefix_flops * w->examples * w->uses / p->rate / p->workers;
	grp->materialize_seconds = w->compute / p->rate / p->workers + w->write / CACHE_WRITE_BYTES_PER_SECOND +
		w->all_bytes / CACHE_READ_BYTES_PER_SECOND;
	grp->bytes = w->all_bytes;
}

/* Recompute or materialize, and why; a materialized group's storage counts against the budget. */
static void
decide_group(Planner *p, PgdlCacheGroup *grp, const GroupWork *w)
{
	double		budget = p->plan->budget_bytes;

	if (strcmp(p->mode, "off") == 0)
	{
		grp->action = PGDL_CACHE_RECOMPUTE;
		grp->reason = "feature caching is off for this run";
	}
	else if (!w->any_work)
	{
		grp->action = PGDL_CACHE_REUSE;
		grp->reason = "a valid cache exists";
	}
	else if (p->used - w->freed + w->new_bytes > budget)
	{
		grp->action = PGDL_CACHE_RECOMPUTE;
		grp->reason = psprintf("the cache would need %.1f MB and pgdl.feature_cache_budget leaves %.1f MB",
							   w->new_bytes / 1048576.0, Max(budget - p->used + w->freed, 0) / 1048576.0);
	}
	else if (strcmp(p->mode, "on") != 0 && grp->materialize_seconds >= grp->recompute_seconds)
	{
		grp->action = PGDL_CACHE_RECOMPUTE;
		grp->reason = psprintf("recomputing (%.2f s) is cheaper than materializing (%.2f s) for %d configuration(s) x %d epoch(s)",
							   grp->recompute_seconds, grp->materialize_seconds, grp->n_configs, p->epochs);
	}
	else
	{
		/* the group's action is its training side's; the validation side follows */
		grp->action = grp->side[0].action;
		p->used += w->new_bytes - w->freed;
		grp->reason = strcmp(p->mode, "on") == 0 ? "feature caching is on for this run" :
			psprintf("materializing (%.2f s) is cheaper than recomputing (%.2f s) for %d configuration(s) x %d epoch(s)",
					 grp->materialize_seconds, grp->recompute_seconds, grp->n_configs, p->epochs);
	}
}

/* The decision's consequences: its time and work, and a task per cache to materialize. */
static void
apply_decision(Planner *p, PgdlCacheGroup *grp, const GroupWork *w)
{
	PgdlCachePlan *plan = p->plan;
	PgdlCacheGroup *from;

	if (grp->action == PGDL_CACHE_RECOMPUTE)
	{
		grp->staged_from = -1;
		grp->seconds = grp->recompute_seconds;
		grp->compute_flops = grp->prefix_flops * w->examples * w->uses;
		for (int s = 0; s < 2; s++)
			grp->side[s].action = PGDL_CACHE_RECOMPUTE;
		return;
	}
	from = grp->staged_from >= 0 ? &plan->groups[grp->staged_from] : NULL;
	grp->seconds = grp->materialize_seconds;
	grp->compute_flops = w->compute;
	for (int s = 0; s < (p->valid ? 2 : 1); s++)
	{
		PgdlCacheTask *task = side_task(grp, from, s);

		/* a staged cache is computed once the one it reads is there */
		task->depends = from ? from->side[s].task : -1;
		grp->side[s].task = list_length(plan->tasks);
		plan->tasks = lappend(plan->tasks, task);
	}
}

/* Look up group g's caches, weigh materializing against recomputing, and decide. */
static void
plan_group(Planner *p, int g)
{
	PgdlCacheGroup *grp = &p->plan->groups[g];
	GroupWork	w = {0};

	w.examples = (double) p->train->n_rows_hint + (p->valid ? p->valid->n_rows_hint : 0);
	w.uses = (double) grp->n_configs * p->epochs;
	plan_side(grp, 0, p->train, &p->taken);
	if (p->valid)
		plan_side(grp, 1, p->valid, &p->taken);
	stage_group(p->plan, g, &w);
	cost_group(p, grp, &w);
	decide_group(p, grp, &w);
	apply_decision(p, grp, &w);
}

PgdlCachePlan *
pgdl_cache_plan(const PgdlDataset *train, const PgdlDataset *valid, PgdlTransfer **transfers, int n,
				int32 epochs, int32 workers, const char *mode, int *group_of)
{
	PgdlCachePlan *plan = palloc0(sizeof(PgdlCachePlan));
	Planner		p = {.plan = plan, .train = train, .valid = valid, .epochs = epochs, .workers = workers,
	.mode = mode, .rate = pgdl_cpu_gflops * 1e9};
	MemoryContext caller = CurrentMemoryContext;

	plan->groups = palloc0(sizeof(PgdlCacheGroup) * Max(n, 1));
	plan->budget_bytes = (double) pgdl_feature_cache_budget * 1024.0;
	plan->tasks = NIL;
	group_transfers(plan, transfers, n, group_of);
	if (plan->n_groups == 0)
		return plan;
	if (strcmp(mode, PGDL_CACHE_ON_NODES) == 0)
	{
		for (int g = 0; g < plan->n_groups; g++)
		{
			plan->groups[g].action = PGDL_CACHE_RECOMPUTE;
			plan->groups[g].reason = "the packed table is distributed: its nodes run the frozen layers at every visit";
		}
		return plan;
	}

	plan_cxt = caller;
	SPI_connect();
	MemoryContextSwitchTo(plan_cxt);
	p.used = (double) spi_int8("SELECT pgdl.feature_cache_bytes()", 0, NULL, NULL);
	plan->used_bytes = p.used;
	for (int g = 0; g < plan->n_groups; g++)
		plan_group(&p, g);
	SPI_finish();
	return plan;
}

/*
 * Group g of a distributed packed table, whose caches live on the nodes that
 * hold its partitions (cluster/node_cache.c): `action` is what those caches
 * need (reuse, materialize, refresh, rebuild) and existing_bytes what they
 * take now; the one-server rule decides (the same costs and budget), against
 * every cache of the database, the nodes' included.  The nodes build in
 * parallel as workers do; nothing here makes a task (the leader asks the
 * nodes).
 */
void
pgdl_cache_decide_on_nodes(PgdlCachePlan *plan, int g, const PgdlDataset *train, int32 epochs, int32 workers,
						   const char *mode, PgdlCacheAction action, double existing_bytes)
{
	PgdlCacheGroup *grp = &plan->groups[g];
	PgdlCacheSide *side = &grp->side[0];
	Planner		p = {.plan = plan, .train = train, .epochs = epochs, .workers = Max(workers, 1),
	.mode = mode, .rate = pgdl_cpu_gflops * 1e9};
	GroupWork	w = {0};

	plan_cxt = CurrentMemoryContext;
	SPI_connect();
	MemoryContextSwitchTo(plan_cxt);
	p.used = (double) spi_int8("SELECT pgdl.feature_cache_bytes()", 0, NULL, NULL);
	SPI_finish();
	plan->used_bytes = p.used;
	side->ds = train;
	side->action = action;
	side->existing_bytes = existing_bytes;
	side->bytes = (double) train->n_rows_hint * (grp->feature_floats + train->n_targets) * sizeof(float);
	w.examples = (double) train->n_rows_hint;
	w.uses = (double) grp->n_configs * epochs;
	w.build_flops = grp->prefix_flops;
	grp->staged_from = -1;
	cost_group(&p, grp, &w);
	decide_group(&p, grp, &w);
	grp->seconds = grp->action == PGDL_CACHE_RECOMPUTE ? grp->recompute_seconds : grp->materialize_seconds;
	grp->compute_flops = grp->action == PGDL_CACHE_RECOMPUTE ? grp->prefix_flops * w.examples * w.uses : w.compute;
	side->action = grp->action;
}
