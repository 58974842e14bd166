/*
 * cluster.c -- distributed packed tables: where each partition lives.
 *
 * A packed table is distributed when some of its partitions are postgres_fdw
 * foreign tables: partition k then lives on the foreign table's server, in
 * the node's table it names, whose rows carry part = k as on one server.  The
 * catalog is the only record of it (nothing of pgdl's own to keep in step),
 * so pg_dump, ALTER TABLE and DROP see what pgdl sees.
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "partitioning/partbounds.h"
#include "partitioning/partdesc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/resowner.h"

#include "base/base.h"
#include "cluster/cluster.h"

/* The node's table behind foreign table `child`, as postgres_fdw names it. */
static void
place_of(Oid child, PgdlPartPlace *place)
{
	ForeignTable *ft = GetForeignTable(child);
	char	   *schema = NULL;
	char	   *table = NULL;
	ListCell   *lc;

	foreach(lc, ft->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "schema_name") == 0)
			schema = defGetString(d);
		else if (strcmp(d->defname, "table_name") == 0)
			table = defGetString(d);
	}
	if (schema == NULL)
		schema = get_namespace_name(get_rel_namespace(child));
	if (table == NULL)
		table = get_rel_name(child);
	place->server = pgdl_node_server(GetForeignServer(ft->serverid)->servername);
	place->remote = pstrdup(quote_qualified_identifier(schema, table));
	place->remote_schema = schema;
	place->remote_table = table;
}

PgdlPartPlace *
pgdl_packed_places(Oid packed, int32 partitions, bool *distributed)
{
	PgdlPartPlace *places = palloc0(sizeof(PgdlPartPlace) * partitions);
	Relation	rel = table_open(packed, AccessShareLock);
	PartitionDesc pd;
	PartitionBoundInfo bounds;

	*distributed = false;
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
	{
		table_close(rel, AccessShareLock);
		return places;
	}
	pd = RelationGetPartitionDesc(rel, true);
	bounds = pd->boundinfo;
	for (int i = 0; bounds && bounds->strategy == PARTITION_STRATEGY_LIST && i < bounds->ndatums; i++)
	{
		int32		part = DatumGetInt32(bounds->datums[i][0]);
		Oid			child = pd->oids[bounds->indexes[i]];

		if (part < 0 || part >= partitions)
			continue;
		places[part].relid = child;
		if (get_rel_relkind(child) != RELKIND_FOREIGN_TABLE)
			continue;
		place_of(child, &places[part]);
		*distributed = true;
	}
	table_close(rel, AccessShareLock);
	return places;
}

List	  **
pgdl_packed_replicas(Oid packed, int32 partitions)
{
	MemoryContext caller = CurrentMemoryContext;
	List	  **replicas = palloc0(sizeof(List *) * partitions);
	Datum		arg[1] = {ObjectIdGetDatum(packed)};
	Oid			type[1] = {OIDOID};

	SPI_connect();
	if (SPI_execute_with_args("SELECT part, server, remote_schema, remote_table, checksum FROM pgdl.partition_replicas"
							  " WHERE packed = $1::pg_catalog.regclass ORDER BY part, replica",
							  1, type, arg, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "pgdl: could not read the replicas of relation %u", packed);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int32		part = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		Oid			server = get_foreign_server_oid(SPI_getvalue(tup, desc, 2), true);
		MemoryContext old;
		PgdlPartPlace *place;

		/* a server dropped since holds nothing a run can use */
		if (part < 0 || part >= partitions || !OidIsValid(server))
			continue;
		old = MemoryContextSwitchTo(caller);
		place = palloc0(sizeof(PgdlPartPlace));
		place->server = server;
		place->remote_schema = SPI_getvalue(tup, desc, 3);
		place->remote_table = SPI_getvalue(tup, desc, 4);
		place->remote = pstrdup(quote_qualified_identifier(place->remote_schema, place->remote_table));
		place->checksum = SPI_getvalue(tup, desc, 5);
		replicas[part] = lappend(replicas[part], place);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return replicas;
}

int32
pgdl_cluster_assign(const PgdlPartPlace *places, int32 partitions, int32 local_workers, int32 per_node,
					Oid *worker_server, int16 *owner)
{
	bool	   *assigned = palloc0(sizeof(bool) * partitions);
	int32		n_workers = 0;

	for (int32 p = 0; p < partitions; p++)
	{
		Oid			server = places[p].server;
		int32		count = 0;
		int32		k;
		int32		j = 0;

		if (assigned[p])
			continue;
		for (int32 q = p; q < partitions; q++)
			count += places[q].server == server;
		k = Min(count, OidIsValid(server) ? per_node : local_workers);
		if (n_workers + k > PGDL_MAX_WORKERS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the run would need more than %d workers", PGDL_MAX_WORKERS),
					 errhint("Lower workers_per_node.")));
		for (int32 q = p; q < partitions; q++)
			if (places[q].server == server)
			{
				owner[q] = (int16) (n_workers + j++ % k);
				assigned[q] = true;
			}
		for (int32 w = 0; w < k; w++)
			worker_server[n_workers + w] = server;
		n_workers += k;
	}
	return n_workers;
}

/*
 * Whether foreign server `server` answers: NULL, or the error of a node that
 * cannot be reached (a connection exception: down, or refusing the login).
 * The connection and its checks run in a subtransaction, so that such a node
 * leaves the caller's transaction whole; any other error (another pgdl
 * build, no user mapping) is the caller's.
 */
static void
connect_and_close(void *server)
{
	pgdl_node_close(pgdl_node_connect(*(Oid *) server, false));
}

static ErrorData *
node_answers(Oid server)
{
	ErrorData  *why = pgdl_call_in_subxact(connect_and_close, &server);

	if (why && ERRCODE_TO_CATEGORY(why->sqlerrcode) != ERRCODE_CONNECTION_EXCEPTION)
		ReThrowError(why);
	return why;
}

/* The servers asked so far: up, or down with why (parallel lists). */
typedef struct Answers
{
	List	   *up;
	List	   *down;
	List	   *why;
} Answers;

/* Whether server is up, asked once per call; *why its error if not. */
static bool
server_up(Oid server, Answers *a, ErrorData **why)
{
	ErrorData  *e;

	if (list_member_oid(a->up, server))
		return true;
	for (int i = 0; i < list_length(a->down); i++)
		if (list_nth_oid(a->down, i) == server)
		{
			*why = list_nth(a->why, i);
			return false;
		}
	e = node_answers(server);
	if (e == NULL)
	{
		a->up = lappend_oid(a->up, server);
		return true;
	}
	a->down = lappend_oid(a->down, server);
	a->why = lappend(a->why, e);
	*why = e;
	return false;
}

/*
 * Partition p's primary is down (why): its first replica on a server that
 * answers, or the primary's error, with a hint that says how to go on.
 */
static void
move_to_replica(PgdlPartPlace *place, int32 p, List *replicas, Answers *a, ErrorData *why)
{
	ListCell   *lc;
	char	   *name = GetForeignServer(place->server)->servername;

	foreach(lc, replicas)
	{
		PgdlPartPlace *copy = lfirst(lc);
		ErrorData  *unused;

		if (server_up(copy->server, a, &unused))
		{
			place->server = copy->server;
			place->remote = copy->remote;
			place->remote_schema = copy->remote_schema;
			place->remote_table = copy->remote_table;
			return;
		}
	}
	why->hint = replicas == NIL ?
		psprintf("Start server \"%s\" again and repeat the call; a packed table distributed with replicas => 2 keeps a run going without one of its servers.", name) :
		psprintf("Every server that holds a replica of partition %d is down too: start server \"%s\" or one of them again and repeat the call.", p, name);
	ReThrowError(why);
}

/* One WARNING per server left out, with why and the partitions that go to their replicas. */
static void
warn_down(const Answers *a, const Oid *primary, const PgdlPartPlace *places, int32 partitions)
{
	for (int i = 0; i < list_length(a->down); i++)
	{
		Oid			server = list_nth_oid(a->down, i);
		ErrorData  *why = list_nth(a->why, i);
		StringInfoData moved;

		initStringInfo(&moved);
		for (int32 p = 0; p < partitions; p++)
			if (primary[p] == server)
				appendStringInfo(&moved, "%s partition %d on server \"%s\"", moved.len ? "," : "", p,
								 GetForeignServer(places[p].server)->servername);
		if (moved.len == 0)
			continue;			/* only a replica there: the run does not need it */
		ereport(WARNING,
				(errmsg("server \"%s\" is down: the run starts without it", GetForeignServer(server)->servername),
				 errdetail("Its partitions are visited on their replicas (%s), so the models are those of a run on every server. The connection failed: %s.",
						   moved.data + 1, why->message)));
		ereport(LOG,
				(errmsg("pgdl: %s", why->message),
				 why->detail ? errdetail_internal("%s", why->detail) : 0));
	}
}

List *
pgdl_cluster_route_around(Oid packed, PgdlPartPlace *places, int32 partitions)
{
	Answers		a = {NIL, NIL, NIL};
	List	  **replicas = NULL;
	Oid		   *primary = palloc(sizeof(Oid) * partitions);

	for (int32 p = 0; p < partitions; p++)
	{
		ErrorData  *why = NULL;

		primary[p] = places[p].server;
		if (!OidIsValid(places[p].server) || server_up(places[p].server, &a, &why))
			continue;
		if (replicas == NULL)
			replicas = pgdl_packed_replicas(packed, partitions);
		move_to_replica(&places[p], p, replicas[p], &a, why);
	}
	warn_down(&a, primary, places, partitions);
	pfree(primary);
	return a.down;
}
