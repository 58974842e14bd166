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
	if (SPI_execute_with_args("SELECT part, server, remote_schema, remote_table FROM pgdl.partition_replicas"
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

void
pgdl_cluster_check_nodes(const Oid *servers, int n)
{
	for (int i = 0; i < n; i++)
	{
		bool		seen = !OidIsValid(servers[i]);

		for (int j = 0; j < i && !seen; j++)
			seen = servers[j] == servers[i];
		if (!seen)
			pgdl_node_close(pgdl_node_connect(servers[i], false));
	}
}
