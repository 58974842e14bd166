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
 * work on each cache is an SQL task that a worker runs before training.
 *
 * A view names the hash of the weights it was defined for (pgdl.cache_features
 * refuses to compute with others); a trigger marks a cache stale when its base
 * model changes, a cache records the version of its packed table, and a stale
 * cache is refreshed or rebuilt before use, never read.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "pgdl.h"

/* What the planner assumes of this machine, besides pgdl.cpu_gflops. */
#define CACHE_WRITE_BYTES_PER_SECOND	(150.0 * 1024 * 1024)	/* materialized view, TOAST and WAL */
#define CACHE_READ_BYTES_PER_SECOND		(400.0 * 1024 * 1024)

#define PGDL_ADVISORY_LOCK_SPACE		0x7067646c	/* "pgdl" */

/* ---- the planner ---- */

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

static int64
spi_int8(const char *sql, int nargs, Oid *types, Datum *values)
{
	bool		isnull;
	Datum		d;

	if (SPI_execute_with_args(sql, nargs, types, values, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		return 0;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}

/* A free name in pgdl_cache for the cache of `ds` at `depth`. */
static char *
cache_view_name(const PgdlDataset *ds, int32 depth, const char *hash, List *taken)
{
	char	   *rel = get_rel_name(ds->packed);
	char		base[NAMEDATALEN];

	snprintf(base, sizeof(base), "%.32s_k%d_%.8s", rel ? rel : "dataset", depth, hash);
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
			return qualified;
	}
}

/* Look up a cache of (ds, depth) for the group: reuse, refresh or rebuild it, or build one. */
static void
plan_side(PgdlCacheGroup *g, int side, const PgdlDataset *ds, List **taken)
{
	Oid			types[4] = {INT8OID, INT4OID, TEXTOID, INT8OID};
	Datum		values[4];
	PgdlCacheSide *s = &g->side[side];
	Oid			vtypes[1] = {OIDOID};
	Datum		vvalues[1] = {ObjectIdGetDatum(ds->packed)};

	s->ds = ds;
	if (SPI_execute_with_args("SELECT pgdl.packed_version($1)", 1, vtypes, vvalues, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read the version of packed table %u", ds->packed);
	s->version = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	values[0] = Int64GetDatum(ds->id);
	values[1] = Int32GetDatum(g->depth);
	values[2] = CStringGetTextDatum(g->hash);
	values[3] = Int64GetDatum(g->base_id);
	/* the caller's own caches only: nobody reads another user's features */
	/*
	 * The catalog is writable by all: trust only rows whose view is a
	 * materialized view in pgdl_cache that the caller owns.
	 */
	if (SPI_execute_with_args("SELECT f.id, f.view::text, f.base_hash = $3, f.valid, f.bytes, f.source_version, "
							  "f.staged_from IS NOT NULL "
							  "FROM pgdl.feature_cache f JOIN pg_catalog.pg_class c ON c.oid = f.view "
							  "WHERE f.dataset = $1 AND f.depth = $2 AND f.owner = current_user::regrole "
							  "AND c.relkind = 'm' AND c.relnamespace = 'pgdl_cache'::regnamespace "
							  "AND c.relowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user) "
							  "AND (f.base_hash = $3 OR f.base_model = $4) "
							  "ORDER BY f.base_hash = $3 DESC, f.valid DESC, f.id DESC LIMIT 1",
							  4, types, values, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		bool		same = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
		bool		valid = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		char	   *version = SPI_getvalue(tup, desc, 6);
		bool		staged = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));

		/* the packed table changed since: stale */
		valid &= strcmp(version, s->version) == 0;

		s->cache_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		s->old_view = SPI_getvalue(tup, desc, 2);
		s->existing_bytes = (double) DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));

		/*
		 * A stale cache computed from a shallower one is built again rather
		 * than refreshed: a refresh would read the shallower cache, which may be
		 * stale too.
		 */
		s->action = !same ? PGDL_CACHE_REBUILD : valid ? PGDL_CACHE_REUSE :
			staged ? PGDL_CACHE_REBUILD : PGDL_CACHE_REFRESH;
		/* rebuilt with other weights, it gets a name with their hash; else it keeps its own */
		s->view = s->action == PGDL_CACHE_REBUILD && !same ? NULL : s->old_view;
	}
	else
		s->action = PGDL_CACHE_BUILD;
	if (s->view == NULL)
	{
		s->view = cache_view_name(ds, g->depth, g->hash, *taken);
		*taken = lappend(*taken, s->view);
	}
	s->bytes = (double) ds->n_rows_hint * (g->feature_floats + ds->n_targets) * sizeof(float);
}

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

static void
append_build(StringInfo sql, const PgdlCacheGroup *g, const PgdlCacheSide *s, const PgdlCacheGroup *from,
			 int side)
{
	const char *source = from ? from->side[side].view :
		quote_qualified_identifier(get_namespace_name(get_rel_namespace(s->ds->packed)), get_rel_name(s->ds->packed));
	int32		first = from ? from->depth : 0;
	char	   *view_literal = quote_literal_cstr(s->view);

	if (s->action == PGDL_CACHE_REBUILD)
		appendStringInfo(sql, "DROP MATERIALIZED VIEW IF EXISTS %s CASCADE;\n", s->old_view);
	/* a run that built the same cache meanwhile (same name) is waited for and its cache refreshed */
	appendStringInfo(sql,
					 "CREATE MATERIALIZED VIEW IF NOT EXISTS %s AS SELECT part, buffer_id, n,"
					 " pgdl.cache_features(" INT64_FORMAT ", %d, %d, '%s', x, n) AS x, y FROM %s WITH NO DATA;\n",
					 s->view, g->base_id, first, g->depth, g->hash, source);
	appendStringInfo(sql, "ALTER MATERIALIZED VIEW %s ALTER COLUMN x SET STORAGE EXTERNAL,"
					 " ALTER COLUMN y SET STORAGE EXTERNAL;\n", s->view);
	appendStringInfo(sql, "REFRESH MATERIALIZED VIEW %s;\n", s->view);
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
static char *
side_task_sql(const PgdlCacheGroup *g, const PgdlCacheGroup *from, int side)
{
	const PgdlCacheSide *s = &g->side[side];
	StringInfoData buf;
	StringInfo	sql = &buf;

	initStringInfo(sql);
	if (s->action != PGDL_CACHE_REUSE)
		appendStringInfo(sql, "SELECT pg_advisory_xact_lock(%d, hashtext(%s));\n", PGDL_ADVISORY_LOCK_SPACE,
						 quote_literal_cstr(s->view));
	switch (s->action)
	{
		case PGDL_CACHE_REUSE:
			appendStringInfo(sql, "UPDATE pgdl.feature_cache SET last_used = now() WHERE id = " INT64_FORMAT ";\n",
							 s->cache_id);
			break;
		case PGDL_CACHE_REFRESH:
			appendStringInfo(sql, "REFRESH MATERIALIZED VIEW %s;\n", s->view);
			appendStringInfo(sql,
							 "UPDATE pgdl.feature_cache SET valid = true, last_used = now(), refreshed = now(), source_version = %s,"
							 " rows = (SELECT count(*) FROM %s), bytes = pg_total_relation_size(%s) WHERE id = " INT64_FORMAT ";\n",
							 quote_literal_cstr(s->version), s->view, quote_literal_cstr(s->view), s->cache_id);
			break;
		case PGDL_CACHE_BUILD:
		case PGDL_CACHE_REBUILD:
			append_build(sql, g, s, from, side);
			break;
		case PGDL_CACHE_RECOMPUTE:
			break;
	}
	return sql->data;
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

PgdlCachePlan *
pgdl_cache_plan(const PgdlDataset *train, const PgdlDataset *valid, PgdlTransfer **transfers, int n,
				int32 epochs, int32 workers, const char *mode, int *group_of)
{
	PgdlCachePlan *plan = palloc0(sizeof(PgdlCachePlan));
	double		rate = pgdl_cpu_gflops * 1e9;
	List	   *taken = NIL;
	double		used = 0;

	plan->groups = palloc0(sizeof(PgdlCacheGroup) * Max(n, 1));
	plan->budget_bytes = (double) pgdl_feature_cache_budget * 1024.0;
	plan->tasks = NIL;

	/* group by the prefix's hash and depth (the source is the run's) */
	for (int i = 0; i < n; i++)
	{
		PgdlTransfer *t = transfers[i];
		int			g;

		if (t == NULL || t->prefix == NULL)
			continue;
		g = find_group(plan, t);
		if (g == plan->n_groups)
		{
			PgdlCacheGroup *grp = &plan->groups[plan->n_groups++];
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
		plan->groups[g].n_configs++;
	}

	/* shallower first: a deeper cache may be computed from one of them */
	qsort(plan->groups, plan->n_groups, sizeof(PgdlCacheGroup), compare_groups);
	for (int i = 0; i < n; i++)
		group_of[i] = transfers[i] && transfers[i]->prefix ? find_group(plan, transfers[i]) : -1;
	if (plan->n_groups == 0)
		return plan;

	/* the plan outlives SPI: allocate in the caller's context */
	{
		MemoryContext caller = CurrentMemoryContext;

		SPI_connect();
		MemoryContextSwitchTo(caller);
	}
	used = (double) spi_int8("SELECT coalesce(sum(bytes), 0)::int8 FROM pgdl.feature_cache", 0, NULL, NULL);
	plan->used_bytes = used;
	for (int g = 0; g < plan->n_groups; g++)
	{
		PgdlCacheGroup *grp = &plan->groups[g];
		double		examples = (double) train->n_rows_hint + (valid ? valid->n_rows_hint : 0);
		double		uses = (double) grp->n_configs * epochs;
		double		build_flops = grp->prefix_flops;
		double		new_bytes = 0,
					freed = 0,
					write = 0,
					compute = 0,
					all_bytes = 0;
		bool		any_work = false;

		plan_side(grp, 0, train, &taken);
		if (valid)
			plan_side(grp, 1, valid, &taken);

		/* stage from the deepest shallower group of the same base that will be materialized */
		for (int h = g - 1; h >= 0; h--)
		{
			PgdlCacheGroup *o = &plan->groups[h];

			if (o->base_id == grp->base_id && o->depth < grp->depth && o->action != PGDL_CACHE_RECOMPUTE)
			{
				grp->staged_from = h;
				build_flops = grp->prefix_flops - o->prefix_flops;
				break;
			}
		}

		for (int s = 0; s < (valid ? 2 : 1); s++)
		{
			PgdlCacheSide *side = &grp->side[s];

			all_bytes += side->bytes;
			if (side->action == PGDL_CACHE_REUSE)
				continue;
			any_work = true;
			compute += build_flops * side->ds->n_rows_hint;
			write += side->bytes;
			if (side->action == PGDL_CACHE_BUILD)
				new_bytes += side->bytes;
			else
				freed += side->existing_bytes, new_bytes += side->bytes;
		}
		/* the workers share recomputing; a build runs in parallel on their cores */
		grp->recompute_seconds = grp->prefix_flops * examples * uses / rate / workers;
		grp->materialize_seconds = compute / rate / workers + write / CACHE_WRITE_BYTES_PER_SECOND +
			all_bytes / CACHE_READ_BYTES_PER_SECOND;
		grp->bytes = all_bytes;

		if (strcmp(mode, "off") == 0)
		{
			grp->action = PGDL_CACHE_RECOMPUTE;
			grp->reason = "feature caching is off for this run";
		}
		else if (!any_work)
		{
			grp->action = PGDL_CACHE_REUSE;
			grp->reason = "a valid cache exists";
		}
		else if (used - freed + new_bytes > plan->budget_bytes)
		{
			grp->action = PGDL_CACHE_RECOMPUTE;
			grp->reason = psprintf("the cache would need %.1f MB and pgdl.feature_cache_budget leaves %.1f MB",
								   new_bytes / 1048576.0, Max(plan->budget_bytes - used + freed, 0) / 1048576.0);
		}
		else if (strcmp(mode, "on") != 0 && grp->materialize_seconds >= grp->recompute_seconds)
		{
			grp->action = PGDL_CACHE_RECOMPUTE;
			grp->reason = psprintf("recomputing (%.2f s) is cheaper than materializing (%.2f s) for %d configuration(s) x %d epoch(s)",
								   grp->recompute_seconds, grp->materialize_seconds, grp->n_configs, epochs);
		}
		else
		{
			/* the group's action is its training side's; the validation side follows */
			grp->action = grp->side[0].action;
			used += new_bytes - freed;
			grp->reason = strcmp(mode, "on") == 0 ? "feature caching is on for this run" :
				psprintf("materializing (%.2f s) is cheaper than recomputing (%.2f s) for %d configuration(s) x %d epoch(s)",
						 grp->materialize_seconds, grp->recompute_seconds, grp->n_configs, epochs);
		}
		if (grp->action == PGDL_CACHE_RECOMPUTE)
		{
			grp->staged_from = -1;
			grp->seconds = grp->recompute_seconds;
			grp->compute_flops = grp->prefix_flops * examples * uses;
			for (int s = 0; s < 2; s++)
				grp->side[s].action = PGDL_CACHE_RECOMPUTE;
		}
		else
		{
			PgdlCacheGroup *from = grp->staged_from >= 0 ? &plan->groups[grp->staged_from] : NULL;

			grp->seconds = grp->materialize_seconds;
			grp->compute_flops = compute;
			for (int s = 0; s < (valid ? 2 : 1); s++)
			{
				PgdlCacheTask *task = palloc0(sizeof(PgdlCacheTask));

				task->sql = side_task_sql(grp, from, s);
				/* a staged cache is computed once the one it reads is there */
				task->depends = from ? from->side[s].task : -1;
				grp->side[s].task = list_length(plan->tasks);
				plan->tasks = lappend(plan->tasks, task);
			}
		}
	}
	SPI_finish();
	return plan;
}
