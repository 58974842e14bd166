/*
 * distribute.c -- pgdl.distribute: a packed table's partitions, moved to nodes.
 *
 * Partition k goes to servers[k % n]: its rows are copied (COPY BINARY over
 * libpq, a batch of buffers at a time) into a table of the same name on the
 * node, in one remote transaction that first empties it; once that has
 * committed, the local partition is replaced by a postgres_fdw foreign table
 * over the node's.  A partition that is already foreign is left as it is, so
 * a call that failed half way is finished by calling again: a partition is
 * either still here, whole, or there, whole; never both, never half.
 *
 * A call that failed after a node committed its copy leaves that copy there:
 * the next call compares it (row count and a checksum of the rows as sent)
 * with the partition here and, when equal, swaps without copying again.  Each
 * call first drops, on every server it names or the table uses, the copies
 * pgdl.distribute made for this table that nothing here reads and that the
 * call will not reuse (orphans of a failed call, or of one with another server
 * order; the old copies pgdl.add_node moved away from).
 *
 * pgdl.add_node moves partitions onto a new server with the same copy, then
 * swap: see add_node_plan for the rule.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "access/xlog.h"
#include "commands/dbcommands.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "cluster/cluster.h"

#define SHIP_BATCH_BUFFERS 16
/*
 * The node's view that gives its partition j of packed table t the part number
 * k here: t_as_k_of_j.  One view per (k, j): t attached to several packed
 * tables here, at other numbers, never redefines a view another one reads.
 */
#define ATTACHED_VIEW_FORMAT "%.40s_as_"

typedef struct Target
{
	Oid			server;
	PgdlNode   *node;			/* opened at its first partition */
} Target;

/* A postgres_fdw server the caller may use, by name. */
static Oid
usable_server(const char *name)
{
	Oid			server = pgdl_node_server(name);
	AclResult	acl = pg_foreign_server_aclcheck(server, GetUserId(), ACL_USAGE);

	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_FOREIGN_SERVER, GetForeignServer(server)->servername);
	return server;
}

/* The dataset of a packed table the caller owns and that has no row weights (a node does not weigh). */
static const PgdlDataset *
owned_packed(Oid packed, const char *function)
{
	const PgdlDataset *ds = pgdl_dataset_by_packed(packed);

	pgdl_packed_refuse_weighted(ds, function);
	if (!pg_class_ownercheck(packed, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(packed));
	return ds;
}

/* The servers named, each a postgres_fdw server the caller may use. */
static Target *
read_servers(ArrayType *servers, int *n)
{
	Datum	   *values;
	bool	   *nulls;
	Target	   *targets;

	if (ARR_NDIM(servers) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("servers must be a one-dimensional array")));
	deconstruct_array(servers, TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, n);
	if (*n < 1 || *n > PGDL_MAX_WORKERS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("servers must name between 1 and %d servers, not %d", PGDL_MAX_WORKERS, *n)));
	targets = palloc0(sizeof(Target) * *n);
	for (int i = 0; i < *n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("servers must not hold NULL")));
		targets[i].server = usable_server(TextDatumGetCString(values[i]));
	}
	return targets;
}

static void
exec_local(const char *sql)
{
	SPI_connect();
	if (SPI_execute(sql, false, 0) < 0)
		elog(ERROR, "pgdl.distribute: \"%s\" failed", sql);
	SPI_finish();
}

/* A relation's name, qualified and quoted, for the SQL this file runs. */
static const char *
qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));
}

/* Partition k of packed: a postgres_fdw foreign table `local` (qualified) over a node's table or view. */
static void
create_foreign_partition(Oid packed, const char *local, int32 k, Oid server, const char *remote_schema,
						 const char *remote_table)
{
	exec_local(psprintf("CREATE FOREIGN TABLE %s PARTITION OF %s FOR VALUES IN (%d) SERVER %s"
						" OPTIONS (schema_name %s, table_name %s)",
						local, qualified_name(packed), k, quote_identifier(GetForeignServer(server)->servername),
						quote_literal_cstr(remote_schema), quote_literal_cstr(remote_table)));
}

/*
 * What a table pgdl.distribute made says of itself (its comment on the node):
 * which coordinator's partition it holds.  A table of that name that says
 * anything else is not ours to empty.
 */
static char *
shipped_marker(Oid packed, int32 k)
{
	return psprintf("pgdl.distribute: partition %d of %s in database %s of system " UINT64_FORMAT, k,
					qualified_name(packed),
					get_database_name(MyDatabaseId), GetSystemIdentifier());
}

/* Whether the node has the table, and if so that pgdl.distribute made it for this partition. */
static bool
check_remote_table(PgdlNode *node, const char *schema, const char *name, const char *marker)
{
	const char *values[2] = {schema, name};
	PGresult   *res = pgdl_node_exec(node, "SELECT pg_catalog.obj_description(c.oid, 'pg_class')"
									 " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
									 " WHERE n.nspname = $1 AND c.relname = $2", 2, values, PGRES_TUPLES_OK);
	bool		exists = PQntuples(res) == 1;
	bool		ours = exists && !PQgetisnull(res, 0, 0) && strcmp(PQgetvalue(res, 0, 0), marker) == 0;

	PQclear(res);
	if (exists && !ours)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("server \"%s\" has a table %s that pgdl.distribute did not make for this partition",
						node->name, quote_qualified_identifier(schema, name)),
				 errdetail("pgdl.distribute empties and fills only the tables it made (their comment says which partition they hold)."),
				 errhint("Rename or drop that table on the node, or rename the packed table here.")));
	return exists;
}

/* The node's table for partition k: same name, columns and key as pgdl.pack makes; emptied. */
static void
prepare_remote_table(PgdlNode *node, Oid packed, int32 k, const char *schema, const char *name)
{
	const char *qualified = quote_qualified_identifier(schema, name);
	char	   *marker = shipped_marker(packed, k);
	const char *values[1] = {schema};
	PGresult   *res = pgdl_node_exec(node, "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1",
									 1, values, PGRES_TUPLES_OK);
	bool		has_schema = PQntuples(res) == 1;

	PQclear(res);
	PQclear(pgdl_node_exec(node, "BEGIN", 0, NULL, PGRES_COMMAND_OK));
	if (!has_schema)
		PQclear(pgdl_node_exec(node, psprintf("CREATE SCHEMA %s", quote_identifier(schema)),
							   0, NULL, PGRES_COMMAND_OK));
	if (!check_remote_table(node, schema, name, marker))
	{
		PQclear(pgdl_node_exec(node, psprintf("CREATE TABLE %s (part integer NOT NULL,"
											  " buffer_id integer NOT NULL, n integer NOT NULL, x real[] NOT NULL,"
											  " y real[] NOT NULL, PRIMARY KEY (part, buffer_id))", qualified),
							   0, NULL, PGRES_COMMAND_OK));
		PQclear(pgdl_node_exec(node, psprintf("ALTER TABLE %s ALTER COLUMN x SET STORAGE EXTERNAL,"
											  " ALTER COLUMN y SET STORAGE EXTERNAL", qualified),
							   0, NULL, PGRES_COMMAND_OK));
		PQclear(pgdl_node_exec(node, psprintf("COMMENT ON TABLE %s IS %s", qualified, quote_literal_cstr(marker)),
							   0, NULL, PGRES_COMMAND_OK));
	}
	PQclear(pgdl_node_exec(node, psprintf("TRUNCATE %s", qualified), 0, NULL, PGRES_COMMAND_OK));
}

static void
put_int16(StringInfo buf, int16 v)
{
	uint16		n = pg_hton16((uint16) v);

	appendBinaryStringInfo(buf, (char *) &n, 2);
}

static void
put_int32(StringInfo buf, int32 v)
{
	uint32		n = pg_hton32((uint32) v);

	appendBinaryStringInfo(buf, (char *) &n, 4);
}

/* A row of the partition in COPY BINARY: part, buffer_id, n as int4; x and y as array_send writes them. */
static void
put_row(StringInfo buf, HeapTuple tup, TupleDesc desc, FmgrInfo *array_send_fn)
{
	put_int16(buf, 5);
	for (int col = 1; col <= 5; col++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(tup, desc, col, &isnull);

		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("a packed table holds a NULL value"),
					 errdetail("Column %d of a row of the partition being distributed is NULL.", col)));
		if (col <= 3)
		{
			put_int32(buf, 4);
			put_int32(buf, DatumGetInt32(d));
		}
		else
		{
			bytea	   *sent = SendFunctionCall(array_send_fn, d);

			put_int32(buf, VARSIZE_ANY_EXHDR(sent));
			appendBinaryStringInfo(buf, VARDATA_ANY(sent), VARSIZE_ANY_EXHDR(sent));
		}
	}
}

/* Where pgdl.distribute stands, for pgdl.progress. */
typedef struct ShipProgress
{
	int32		to_move;		/* partitions this call moves */
	int32		moved;
	int64		buffers_moved;	/* in the partitions moved */
} ShipProgress;

/* The share of the partition being shipped that `sent` buffers are, guessed from those moved before. */
static double
part_share(const ShipProgress *progress, int64 sent)
{
	double		per_part = progress->moved > 0 ? (double) progress->buffers_moved / progress->moved : 0;

	return per_part > 0 ? Min(sent / per_part, 1.0) : 0;
}

/* The partition's rows into the node's table, in batches; returns the rows sent. */
static int64
copy_rows(PgdlNode *node, const char *local, const char *remote, const ShipProgress *progress)
{
	static const char header[] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
	MemoryContext batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl distribute", ALLOCSET_DEFAULT_SIZES);
	StringInfoData buf;
	Portal		portal;
	int64		rows = 0;
	FmgrInfo	array_send_fn;

	fmgr_info(F_ARRAY_SEND, &array_send_fn);
	pgdl_node_copy_begin(node, psprintf("COPY %s (part, buffer_id, n, x, y) FROM STDIN (FORMAT binary)", remote));
	pgdl_node_copy_data(node, header, sizeof(header) - 1);
	SPI_connect();
	portal = SPI_cursor_open_with_args(NULL, psprintf("SELECT part, buffer_id, n, x, y FROM %s ORDER BY buffer_id", local),
									   0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		MemoryContext old;

		SPI_cursor_fetch(portal, true, SHIP_BATCH_BUFFERS);
		if (SPI_processed == 0)
			break;
		old = MemoryContextSwitchTo(batch_cxt);
		initStringInfo(&buf);
		for (uint64 r = 0; r < SPI_processed; r++)
			put_row(&buf, SPI_tuptable->vals[r], SPI_tuptable->tupdesc, &array_send_fn);
		pgdl_node_copy_data(node, buf.data, buf.len);
		rows += SPI_processed;
		pgdl_call_progress_update(progress->moved, 0, (progress->moved + part_share(progress, rows)) / progress->to_move);
		MemoryContextSwitchTo(old);
		MemoryContextReset(batch_cxt);
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_finish();
	initStringInfo(&buf);
	put_int16(&buf, -1);
	pgdl_node_copy_data(node, buf.data, buf.len);
	MemoryContextDelete(batch_cxt);
	return rows;
}

/* Partition k here (a table, or a foreign table over another node) becomes a foreign table over the node's copy. */
static void
swap_partition(Oid packed, Oid child, int32 k, Oid server)
{
	char	   *schema = get_namespace_name(get_rel_namespace(child));
	char	   *name = get_rel_name(child);
	const char *qualified = quote_qualified_identifier(schema, name);

	exec_local(psprintf("ALTER TABLE %s DETACH PARTITION %s", qualified_name(packed), qualified));
	exec_local(psprintf("DROP %s %s", get_rel_relkind(child) == RELKIND_FOREIGN_TABLE ? "FOREIGN TABLE" : "TABLE",
						qualified));
	create_foreign_partition(packed, qualified, k, server, schema, name);
}

/*
 * Rows and a checksum of them as COPY BINARY sends them (array_send: the
 * bytes, not their text), of a partition here or of a node's copy of it.
 */
#define CHECKSUM_SQL "SELECT count(*)::text || ':' || coalesce(md5(string_agg(md5(int4send(part) ||" \
	" int4send(buffer_id) || int4send(n) || array_send(x) || array_send(y)), '' ORDER BY buffer_id)), '') FROM %s"

static char *
local_checksum(const char *qualified)
{
	MemoryContext caller = CurrentMemoryContext;
	char	   *sum = NULL;

	SPI_connect();
	if (SPI_execute(psprintf(CHECKSUM_SQL, qualified), true, 1) == SPI_OK_SELECT && SPI_processed == 1)
		sum = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	if (sum == NULL)
		elog(ERROR, "pgdl.distribute: no checksum of %s", qualified);
	return sum;
}

char *
pgdl_node_copy_checksum(PgdlNode *node, const char *qualified)
{
	PGresult   *res = pgdl_node_exec(node, psprintf(CHECKSUM_SQL, qualified), 0, NULL, PGRES_TUPLES_OK);
	char	   *sum = PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) ? pstrdup(PQgetvalue(res, 0, 0)) : pstrdup("");

	PQclear(res);
	return sum;
}

/* The node's copy schema.name, as CHECKSUM_SQL sums it; "" when it has none. */
static char *
node_checksum(PgdlNode *node, const char *schema, const char *name)
{
	return pgdl_node_copy_checksum(node, quote_qualified_identifier(schema, name));
}

/* Whether the node holds, committed, the very copy of partition k that would be sent: the name alone proves nothing. */
static bool
node_has_copy(PgdlNode *node, Oid packed, int32 k, const char *schema, const char *name, const char *sum)
{
	return check_remote_table(node, schema, name, shipped_marker(packed, k)) &&
		strcmp(node_checksum(node, schema, name), sum) == 0;
}

/*
 * Partition k (schema.name here) into the node's table of that name, unless
 * the node holds that copy already (*held): the node commits the copy only
 * once it has every buffer sent and their checksum is `sum`, the partition's
 * here.  Returns the buffers sent.
 */
static int64
ship_copy(PgdlNode *node, Oid packed, int32 k, const char *schema, const char *name, const char *sum,
		  const ShipProgress *progress, bool *held)
{
	const char *qualified = quote_qualified_identifier(schema, name);
	int64		sent;
	int64		taken;
	char	   *got;

	*held = node_has_copy(node, packed, k, schema, name, sum);
	if (*held)
		return 0;
	prepare_remote_table(node, packed, k, schema, name);
	sent = copy_rows(node, qualified, qualified, progress);
	taken = pgdl_node_copy_end(node);
	if (taken != sent)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("server \"%s\" took " INT64_FORMAT " of the " INT64_FORMAT " buffers of partition %d",
						node->name, taken, sent, k)));
	got = node_checksum(node, schema, name);
	if (strcmp(got, sum) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the copy of partition %d on server \"%s\" does not have the checksum of the rows sent",
						k, node->name),
				 errdetail("The node's copy sums to \"%s\", the partition here to \"%s\"; it was not committed.",
						   got, sum),
				 errhint("Call pgdl.distribute again.")));
	PQclear(pgdl_node_exec(node, "COMMIT", 0, NULL, PGRES_COMMAND_OK));
	return sent;
}

/* Partition k's copy onto target's server, in a table of the partition's name (unless it holds it already), counted. */
static int64
ship_counted(Oid packed, const PgdlPartPlace *place, int32 k, Target *target, ShipProgress *progress,
			 const char *sum, bool *held)
{
	int64		sent;

	if (target->node == NULL)
		target->node = pgdl_node_connect(target->server, false);
	sent = ship_copy(target->node, packed, k, get_namespace_name(get_rel_namespace(place->relid)),
					 get_rel_name(place->relid), sum, progress, held);
	progress->moved++;
	progress->buffers_moved += sent;
	pgdl_call_progress_update(progress->moved, 0, (double) progress->moved / progress->to_move);
	return sent;
}

/* Ship partition k to its node (unless the node holds that copy already), then point the packed table at it there. */
static void
move_partition(Oid packed, const PgdlPartPlace *place, int32 k, int32 partitions, Target *target,
			   ShipProgress *progress, const char *sum)
{
	bool		held;
	int64		sent = ship_counted(packed, place, k, target, progress, sum, &held);

	swap_partition(packed, place->relid, k, target->server);
	if (held)
		ereport(NOTICE,
				(errmsg("partition %d of %d is on server \"%s\", which held the same copy of it already (not copied again)",
						k + 1, partitions, target->node->name)));
	else
		ereport(NOTICE,
				(errmsg("partition %d of %d (" INT64_FORMAT " buffers) is on server \"%s\"",
						k + 1, partitions, sent, target->node->name)));
}

/* ---- replicas: copies of a partition on other nodes, that no foreign table reads ---- */

static void
record_replica(Oid packed, int32 k, int32 r, const char *server, const char *schema, const char *name,
			   const char *sum)
{
	Datum		args[7] = {ObjectIdGetDatum(packed), Int32GetDatum(k), Int32GetDatum(r), CStringGetTextDatum(server),
	CStringGetTextDatum(schema), CStringGetTextDatum(name), CStringGetTextDatum(sum)};
	Oid			types[7] = {OIDOID, INT4OID, INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};

	SPI_connect();
	if (SPI_execute_with_args("INSERT INTO pgdl.partition_replicas (packed, part, replica, server, remote_schema,"
							  " remote_table, checksum) VALUES ($1::pg_catalog.regclass, $2, $3, $4, $5, $6, $7)",
							  7, types, args, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "pgdl.distribute: could not record a replica of partition %d", k);
	SPI_finish();
}

/* The records of the table's replicas go: this call records those it makes (the copies stay until the next call). */
static void
forget_replicas(Oid packed)
{
	Datum		arg[1] = {ObjectIdGetDatum(packed)};
	Oid			type[1] = {OIDOID};

	SPI_connect();
	(void) pgdl_catalog_delete("pgdl.partition_replicas", "t.packed = $1::pg_catalog.regclass", 1, type, arg);
	SPI_finish();
}

/*
 * Replica r of partition k (here, or on its node already) onto target's
 * server, in a table of the partition's name there, checksummed as the
 * primary is, and recorded.
 */
static void
place_replica(Oid packed, const PgdlPartPlace *place, int32 k, int32 r, int32 partitions, Target *target,
			  ShipProgress *progress, const char *sum)
{
	bool		held;

	(void) ship_counted(packed, place, k, target, progress, sum, &held);
	record_replica(packed, k, r, target->node->name, get_namespace_name(get_rel_namespace(place->relid)),
				   get_rel_name(place->relid), sum);
	ereport(NOTICE,
			(errmsg("replica %d of partition %d of %d is on server \"%s\"%s", r, k + 1, partitions,
					target->node->name, held ? ", which held the same copy of it already" : "")));
}

/* ---- orphans: copies pgdl.distribute made that nothing here reads ---- */

/* Whether this transaction set a foreign partition's place: until it commits, the copy it replaced is still read. */
static bool
placed_now(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(FOREIGNTABLEREL, ObjectIdGetDatum(relid));
	bool		now;

	if (!HeapTupleIsValid(tup))
		return false;
	now = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data));
	ReleaseSysCache(tup);
	return now;
}

/*
 * What the sweep keeps: the copies this call makes (going_to[k * copies + r]:
 * the primary of partition k, r 0, and its replicas), and the replicas on
 * record (replicas[k]), even those this call no longer wants: until it
 * commits, they are what the catalog names.
 */
typedef struct Keep
{
	const Oid  *going_to;		/* NULL: nothing of pgdl.add_node's goes where pgdl.distribute's would */
	int			copies;
	List	  **replicas;
} Keep;

/* Whether place (partition k here, or a node's copy of it) is schema.name on server. */
static bool
same_table(const PgdlPartPlace *place, Oid server, const char *schema, const char *name)
{
	return place->server == server && strcmp(place->remote_schema, schema) == 0 &&
		strcmp(place->remote_table, name) == 0;
}

/*
 * Whether the copy schema.name of partition k on server stays: the packed
 * table reads it (or may, until this transaction commits), it is a replica on
 * record, or this call makes that copy (partition k's name, going to that
 * server), so reuses it if it is the same.
 */
static bool
copy_in_use(const PgdlPartPlace *places, int32 partitions, const Keep *keep, int32 k, Oid server,
			const char *schema, const char *name)
{
	const PgdlPartPlace *place;
	ListCell   *lc;

	if (k < 0 || k >= partitions || !OidIsValid(places[k].relid))
		return false;
	place = &places[k];
	foreach(lc, keep->replicas[k])
		if (same_table(lfirst(lc), server, schema, name))
			return true;
	for (int r = OidIsValid(place->server) ? 1 : 0; keep->going_to && r < keep->copies; r++)
		if (keep->going_to[k * keep->copies + r] == server &&
			strcmp(get_namespace_name(get_rel_namespace(place->relid)), schema) == 0 &&
			strcmp(get_rel_name(place->relid), name) == 0)
			return true;
	if (!OidIsValid(place->server))
		return false;
	return placed_now(place->relid) || same_table(place, server, schema, name);
}

/*
 * Where a node's table physically is (the postmaster's start, its port, the
 * database, the table's oid): two foreign servers may name one database, and
 * a copy read through the one must not be dropped as an orphan through the other.
 */
static char *
table_identity(PgdlNode *node, const char *schema, const char *name)
{
	const char *values[2] = {schema, name};
	PGresult   *res = pgdl_node_exec(node, "SELECT pg_catalog.pg_postmaster_start_time()::text || ' ' ||"
									 " pg_catalog.current_setting('port') || ' ' || pg_catalog.current_database()"
									 " || ' ' || c.oid FROM pg_catalog.pg_class c"
									 " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
									 " WHERE n.nspname = $1 AND c.relname = $2", 2, values, PGRES_TUPLES_OK);
	char	   *identity = PQntuples(res) == 1 ? pstrdup(PQgetvalue(res, 0, 0)) : pstrdup("");

	PQclear(res);
	return identity;
}

/* Whether the copy schema.name on node is, under another server's name, the table foreign partition k reads. */
static bool
read_elsewhere(PgdlNode *node, const PgdlPartPlace *place, const char *schema, const char *name)
{
	PgdlNode   *other;
	bool		same;

	if (!OidIsValid(place->server) || place->server == node->server ||
		strcmp(place->remote_schema, schema) != 0 || strcmp(place->remote_table, name) != 0)
		return false;
	other = pgdl_node_connect(place->server, false);
	same = strcmp(table_identity(node, schema, name), table_identity(other, schema, name)) == 0;
	pgdl_node_close(other);
	return same;
}

/* Drop the node's copies of this table's partitions not in use, as the caller's user mapping may; returns how many. */
static int32
sweep_server(PgdlNode *node, Oid packed, const PgdlPartPlace *places, int32 partitions, const Keep *keep)
{
	PGresult   *res = pgdl_node_exec(node, "SELECT n.nspname, c.relname, d.description FROM pg_catalog.pg_description d"
									 " JOIN pg_catalog.pg_class c ON c.oid = d.objoid"
									 " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
									 " WHERE d.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objsubid = 0"
									 " AND c.relkind = 'r' AND d.description LIKE 'pgdl.distribute: partition %'",
									 0, NULL, PGRES_TUPLES_OK);
	int32		dropped = 0;

	for (int r = 0; r < PQntuples(res); r++)
	{
		const char *schema = PQgetvalue(res, r, 0);
		const char *name = PQgetvalue(res, r, 1);
		int			k;

		if (sscanf(PQgetvalue(res, r, 2), "pgdl.distribute: partition %d ", &k) != 1 ||
			strcmp(PQgetvalue(res, r, 2), shipped_marker(packed, k)) != 0 ||
			copy_in_use(places, partitions, keep, k, node->server, schema, name) ||
			(k >= 0 && k < partitions && read_elsewhere(node, &places[k], schema, name)))
			continue;
		PQclear(pgdl_node_exec(node, psprintf("DROP TABLE %s", quote_qualified_identifier(schema, name)),
							   0, NULL, PGRES_COMMAND_OK));
		dropped++;
		ereport(NOTICE,
				(errmsg("dropped %s on server \"%s\", a copy of partition %d of \"%s\" that is not in use",
						quote_qualified_identifier(schema, name), node->name, k + 1, get_rel_name(packed))));
	}
	PQclear(res);
	return dropped;
}

/* Whether server is one of targets[0 .. n), or of the servers of servers[0 .. m). */
static bool
server_seen(Oid server, const Target *targets, int n, const Oid *servers, int m)
{
	for (int i = 0; i < n; i++)
		if (targets[i].server == server)
			return true;
	for (int j = 0; j < m; j++)
		if (servers[j] == server)
			return true;
	return false;
}

/* sweep_server on each server of targets, each server a partition lives on and each a replica is on, once. */
static void
sweep_orphans(Oid packed, const PgdlPartPlace *places, int32 partitions, const Keep *keep,
			  Target *targets, int n_targets)
{
	Oid		   *swept = palloc0(sizeof(Oid) * (partitions * (PGDL_MAX_WORKERS + 1) + 1));
	int			n_swept = 0;

	for (int i = 0; i < n_targets; i++)
	{
		if (server_seen(targets[i].server, targets, i, NULL, 0))
			continue;
		if (targets[i].node == NULL)
			targets[i].node = pgdl_node_connect(targets[i].server, false);
		sweep_server(targets[i].node, packed, places, partitions, keep);
	}
	for (int32 k = 0; k < partitions; k++)
	{
		List	   *servers = list_make1_oid(places[k].server);
		ListCell   *lc;

		foreach(lc, keep->replicas[k])
			servers = lappend_oid(servers, ((PgdlPartPlace *) lfirst(lc))->server);
		foreach(lc, servers)
		{
			Oid			server = lfirst_oid(lc);
			PgdlNode   *node;

			if (!OidIsValid(server) || server_seen(server, targets, n_targets, swept, n_swept))
				continue;
			swept[n_swept++] = server;
			node = pgdl_node_connect(server, false);
			sweep_server(node, packed, places, partitions, keep);
			pgdl_node_close(node);
		}
	}
}

/* A foreign table cannot be a partition of a table with a unique index: the nodes' tables keep the key. */
static void
drop_primary_key(Oid packed)
{
	MemoryContext caller = CurrentMemoryContext;
	Datum		arg[1] = {ObjectIdGetDatum(packed)};
	Oid			type[1] = {OIDOID};
	char	   *conname = NULL;

	SPI_connect();
	if (SPI_execute_with_args("SELECT conname FROM pg_catalog.pg_constraint WHERE conrelid = $1 AND contype = 'p'",
							  1, type, arg, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
		conname = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	if (conname)
		exec_local(psprintf("ALTER TABLE %s DROP CONSTRAINT %s",
							qualified_name(packed),
							quote_identifier(conname)));
}

/* Whether pgdl.distribute put partition k on a node (and not pgdl.attach_partitions: those stay where their data is). */
static bool
movable(const PgdlPartPlace *place)
{
	return OidIsValid(place->relid) && OidIsValid(place->server) &&
		strcmp(place->remote_schema, get_namespace_name(get_rel_namespace(place->relid))) == 0 &&
		strcmp(place->remote_table, get_rel_name(place->relid)) == 0;
}

/*
 * replicas copies of each partition, on that many servers: refused when NULL,
 * below 1, above the servers named, or when the servers named repeat one
 * (partition k's copies would share a node).
 */
static int
read_copies(FunctionCallInfo fcinfo, const Target *targets, int n_targets)
{
	int32		copies;

	if (PG_NARGS() < 3)
		return 1;
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("replicas must not be NULL"),
				 errhint("Leave it out for one copy of each partition.")));
	copies = PG_GETARG_INT32(2);
	if (copies < 1 || copies > n_targets)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("replicas must be between 1 and the %d servers named, not %d", n_targets, copies),
				 errdetail("Each copy of a partition lives on a server of its own.")));
	for (int i = 1; copies > 1 && i < n_targets; i++)
		if (server_seen(targets[i].server, targets, i, NULL, 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("servers must not name server \"%s\" twice when replicas is %d",
							GetForeignServer(targets[i].server)->servername, copies),
					 errdetail("The copies of a partition go to servers[k %% n] .. servers[(k + replicas - 1) %% n], each a server of its own.")));
	return copies;
}

/*
 * Partition k's replicas 1 .. copies - 1, by the placement rule.  A partition
 * of pgdl.attach_partitions has none (its data is the node's own), and one
 * already on a node keeps it as its primary: no replica goes there.
 */
static void
place_replicas(Oid packed, const PgdlPartPlace *place, int32 k, int32 partitions, Target *targets,
			   int n_targets, int copies, ShipProgress *progress, const char *sum)
{
	for (int r = 1; r < copies; r++)
	{
		Target	   *target = &targets[(k + r) % n_targets];

		if (OidIsValid(place->server) && !movable(place))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("partition %d of \"%s\" is a node's own packed table, which has no replicas",
							k, get_rel_name(packed)),
					 errdetail("pgdl.attach_partitions leaves its partitions where their data is.")));
		if (target->server == place->server)
		{
			ereport(NOTICE,
					(errmsg("replica %d of partition %d of %d is not made: its server \"%s\" holds the partition already",
							r, k + 1, partitions, GetForeignServer(target->server)->servername)));
			continue;
		}
		place_replica(packed, place, k, r, partitions, target, progress, sum);
	}
}

/*
 * distribute(packed, servers, replicas): partition k of the packed table to
 * servers[k % n], and its replicas r (1 .. replicas - 1) to servers[(k + r) %
 * n]; returns the partitions moved by this call.
 */
PG_FUNCTION_INFO_V1(pgdl_distribute);
Datum
pgdl_distribute(PG_FUNCTION_ARGS)
{
	Oid			packed;
	const PgdlDataset *ds;
	Target	   *targets;
	int			n_targets;
	int			copies;
	PgdlPartPlace *places;
	bool		distributed;
	Keep		keep = {0};
	ShipProgress progress = {0};
	int32		moved = 0;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pgdl.distribute needs a packed table and servers")));
	packed = PG_GETARG_OID(0);
	ds = owned_packed(packed, "pgdl.distribute");
	targets = read_servers(PG_GETARG_ARRAYTYPE_P(1), &n_targets);
	copies = read_copies(fcinfo, targets, n_targets);
	places = pgdl_packed_places(packed, ds->partitions, &distributed);
	pgdl_call_progress_begin(PGDL_CALL_DISTRIBUTE, packed);
	for (int32 k = 0; k < ds->partitions; k++)
		progress.to_move += OidIsValid(places[k].relid) ?
			(copies - 1) + !OidIsValid(places[k].server) : 0;
	pgdl_call_progress_phase(PGDL_PHASE_COPYING, 0, progress.to_move, false);
	keep.copies = copies;
	keep.replicas = pgdl_packed_replicas(packed, ds->partitions);
	keep.going_to = palloc0(sizeof(Oid) * ds->partitions * copies);
	for (int32 k = 0; k < ds->partitions; k++)
		for (int r = 0; r < copies; r++)
			((Oid *) keep.going_to)[k * copies + r] = targets[(k + r) % n_targets].server;
	sweep_orphans(packed, places, ds->partitions, &keep, targets, n_targets);
	drop_primary_key(packed);
	forget_replicas(packed);
	for (int32 k = 0; k < ds->partitions; k++)
	{
		char	   *sum;

		CHECK_FOR_INTERRUPTS();
		if (!OidIsValid(places[k].relid) || (OidIsValid(places[k].server) && copies == 1))
			continue;			/* none, or there already */
		sum = local_checksum(qualified_name(places[k].relid));
		/* the replicas first, from the partition here: a foreign table would fetch it from its node */
		place_replicas(packed, &places[k], k, ds->partitions, targets, n_targets, copies, &progress, sum);
		if (OidIsValid(places[k].server))
			continue;
		move_partition(packed, &places[k], k, ds->partitions, &targets[k % n_targets], &progress, sum);
		moved++;
	}
	for (int i = 0; i < n_targets; i++)
		if (targets[i].node)
			pgdl_node_close(targets[i].node);
	pgdl_call_progress_end();
	PG_RETURN_INT32(moved);
}

/* ---- pgdl.add_node: partitions onto a new server ---- */

/*
 * The placement rule of pgdl.add_node, which moves as few partitions as
 * keeps the servers even: of the m partitions pgdl.distribute put on the s
 * servers the table uses, the new server gets floor(m / (s + 1)), taken one at
 * a time from the server that then holds the most (of equals, the one whose
 * lowest partition is lowest), its highest-numbered partition not yet taken.
 * Nothing else moves.  Sets moves[k]; returns how many.
 */
static int32
add_node_plan(const PgdlPartPlace *places, int32 partitions, bool *moves)
{
	Oid		   *servers = palloc0(sizeof(Oid) * partitions);
	int32	   *held = palloc0(sizeof(int32) * partitions);
	int			n = 0;
	int32		m = 0;
	int32		quota;

	for (int32 k = 0; k < partitions; k++)
	{
		int			i = 0;

		if (!movable(&places[k]))
			continue;
		while (i < n && servers[i] != places[k].server)
			i++;
		if (i == n)
			servers[n++] = places[k].server;
		held[i]++;
		m++;
	}
	quota = m / (n + 1);
	for (int32 t = 0; t < quota; t++)
	{
		int			best = 0;

		for (int i = 1; i < n; i++)
			if (held[i] > held[best])
				best = i;
		for (int32 k = partitions - 1; k >= 0; k--)
			if (movable(&places[k]) && places[k].server == servers[best] && !moves[k])
			{
				moves[k] = true;
				break;
			}
		held[best]--;
	}
	return quota;
}

/* add_node refuses a table with partitions still here, and a server that holds some (or replicas) already. */
static void
check_add_node(Oid packed, const PgdlPartPlace *places, List **replicas, int32 partitions, Oid server)
{
	for (int32 k = 0; k < partitions; k++)
	{
		ListCell   *lc;

		foreach(lc, replicas[k])
			if (((PgdlPartPlace *) lfirst(lc))->server == server)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_OBJECT),
						 errmsg("server \"%s\" holds replicas of \"%s\" already",
								GetForeignServer(server)->servername, get_rel_name(packed)),
						 errdetail("A replica of partition %d lives there.", k),
						 errhint("Name a server the table does not use.")));
		if (OidIsValid(places[k].relid) && !OidIsValid(places[k].server))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition %d of \"%s\" is on this server, not on a node", k, get_rel_name(packed)),
					 errdetail("pgdl.add_node moves partitions from nodes to a new node."),
					 errhint("Finish pgdl.distribute first.")));
		if (places[k].server == server)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("server \"%s\" holds partitions of \"%s\" already",
							GetForeignServer(server)->servername, get_rel_name(packed)),
					 errdetail("Partition %d lives there.", k),
					 errhint("Name a server the table does not use.")));
	}
}

/* add_node(packed, server): returns the partitions moved onto the server. */
PG_FUNCTION_INFO_V1(pgdl_add_node);
Datum
pgdl_add_node(PG_FUNCTION_ARGS)
{
	Oid			packed;
	const PgdlDataset *ds;
	Target		target = {0};
	PgdlPartPlace *places;
	bool		distributed;
	bool	   *moves;
	ShipProgress progress = {0};
	Keep		keep = {0};

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pgdl.add_node needs a packed table and a server")));
	packed = PG_GETARG_OID(0);
	ds = owned_packed(packed, "pgdl.add_node");
	target.server = usable_server(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	places = pgdl_packed_places(packed, ds->partitions, &distributed);
	moves = palloc0(sizeof(bool) * ds->partitions);
	pgdl_call_progress_begin(PGDL_CALL_DISTRIBUTE, packed);
	keep.replicas = pgdl_packed_replicas(packed, ds->partitions);
	check_add_node(packed, places, keep.replicas, ds->partitions, target.server);
	sweep_orphans(packed, places, ds->partitions, &keep, &target, 1);
	progress.to_move = add_node_plan(places, ds->partitions, moves);
	pgdl_call_progress_phase(PGDL_PHASE_COPYING, 0, progress.to_move, false);
	for (int32 k = 0; k < ds->partitions; k++)
	{
		CHECK_FOR_INTERRUPTS();
		if (moves[k])
			move_partition(packed, &places[k], k, ds->partitions, &target, &progress,
						   local_checksum(qualified_name(places[k].relid)));
	}
	if (target.node)
		pgdl_node_close(target.node);
	pgdl_call_progress_end();
	if (progress.moved > 0)
		ereport(NOTICE,
				(errmsg("the old copies of the %d partitions moved stay on their nodes until the next pgdl.distribute"
						" or pgdl.add_node of \"%s\" drops them", progress.moved, get_rel_name(packed)),
				 errdetail("Until this transaction commits, they are what the packed table reads.")));
	PG_RETURN_INT32(progress.moved);
}

/* ---- pgdl.attach_partitions: a node's own packed table, as partitions of one here ---- */

/* The node's dataset must mean what ours does: same task, features, targets, classes and normalization. */
static void
check_same_dataset(PgdlNode *node, Oid packed, const char *remote_packed, int32 *partitions, int64 *rows)
{
	const char *values[1] = {remote_packed};
	PGresult   *res = pgdl_node_exec(node, "SELECT pgdl.export_dataset($1::regclass)::text", 1, values,
									 PGRES_TUPLES_OK);
	char	   *remote = PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) ? pstrdup(PQgetvalue(res, 0, 0)) : NULL;
	Datum		args[2];
	Oid			types[2] = {TEXTOID, OIDOID};
	bool		same = false;

	PQclear(res);
	if (remote == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("\"%s\" on server \"%s\" is not a packed table", pgdl_echo(remote_packed), node->name)));
	args[0] = CStringGetTextDatum(remote);
	args[1] = ObjectIdGetDatum(packed);
	SPI_connect();
	if (SPI_execute_with_args("SELECT ($1::jsonb - '{partitions,n_rows}'::text[]) ="
							  " (pgdl.export_dataset($2) - '{partitions,n_rows}'::text[]),"
							  " ($1::jsonb->>'partitions')::integer, ($1::jsonb->>'n_rows')::bigint",
							  2, types, args, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		bool		isnull;

		same = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) && !isnull;
		*partitions = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		*rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	}
	SPI_finish();
	if (!same)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("packed table \"%s\" on server \"%s\" does not match \"%s\"",
						pgdl_echo(remote_packed), node->name, get_rel_name(packed)),
				 errdetail("Both must have the same task, features, targets, classes and normalization."),
				 errhint("Pack on the node with reference => pgdl.import_dataset(<pgdl.export_dataset of \"%s\">, ...).",
						 get_rel_name(packed))));
}

/* The node's packed table's schema and name, as the mapped user's own search_path resolves remote_packed. */
static void
remote_name(PgdlNode *node, const char *remote_packed, char **schema, char **name)
{
	const char *values[1] = {remote_packed};
	PGresult   *res;

	PQclear(pgdl_node_exec(node, "BEGIN", 0, NULL, PGRES_COMMAND_OK));
	PQclear(pgdl_node_exec(node, "SET LOCAL search_path TO DEFAULT", 0, NULL, PGRES_COMMAND_OK));
	res = pgdl_node_exec(node, "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c"
						 " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						 " WHERE c.oid = $1::regclass", 1, values, PGRES_TUPLES_OK);
	*schema = pstrdup(PQgetvalue(res, 0, 0));
	*name = pstrdup(PQgetvalue(res, 0, 1));
	PQclear(res);
	PQclear(pgdl_node_exec(node, "COMMIT", 0, NULL, PGRES_COMMAND_OK));
}

/*
 * Global partition k over the node's partition j: a view on the node gives its
 * rows part = k (what the coordinator and the model hopper ask for), and a
 * foreign table here over that view is partition k.
 */
static void
attach_one(PgdlNode *node, Oid packed, Oid server, const char *schema, const char *name, int32 j, int32 k)
{
	char	   *view = psprintf(ATTACHED_VIEW_FORMAT "%d_of_%d", name, k, j);
	char	   *local = psprintf("%.50s_p%d", get_rel_name(packed), k);

	PQclear(pgdl_node_exec(node, psprintf("CREATE OR REPLACE VIEW %s AS SELECT %d AS part, buffer_id, n, x, y"
										  " FROM %s WHERE part = %d",
										  quote_qualified_identifier(schema, view), k,
										  quote_qualified_identifier(schema, name), j),
						   0, NULL, PGRES_COMMAND_OK));
	create_foreign_partition(packed, quote_qualified_identifier(get_namespace_name(get_rel_namespace(packed)), local),
							 k, server, schema, view);
}

static void
grow_dataset(int64 id, int32 added, int64 rows)
{
	Datum		args[3] = {Int64GetDatum(id), Int32GetDatum(added), Int64GetDatum(rows)};
	Oid			types[3] = {INT8OID, INT4OID, INT8OID};

	SPI_connect();
	if (SPI_execute_with_args("UPDATE pgdl.datasets SET partitions = partitions + $2, n_rows = n_rows + $3"
							  " WHERE id = $1", 3, types, args, NULL, false, 0) != SPI_OK_UPDATE ||
		SPI_processed != 1)
		elog(ERROR, "pgdl.attach_partitions: could not update dataset " INT64_FORMAT, id);
	SPI_finish();
}

/* Attaching the same node table twice would count its rows twice. */
static void
check_not_attached(Oid packed, int32 partitions, Oid server, const char *schema, const char *name)
{
	bool		distributed;
	PgdlPartPlace *places = pgdl_packed_places(packed, partitions, &distributed);
	char	   *prefix = psprintf(ATTACHED_VIEW_FORMAT, name);

	for (int32 p = 0; p < partitions; p++)
		if (places[p].server == server && strcmp(places[p].remote_schema, schema) == 0 &&
			strncmp(places[p].remote_table, prefix, strlen(prefix)) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("\"%s\" on server \"%s\" is attached already", name, GetForeignServer(server)->servername),
					 errdetail("Partition %d of \"%s\" is one of its partitions.", p, get_rel_name(packed))));
}

/* attach_partitions(packed, server, remote_packed): returns the partitions added. */
PG_FUNCTION_INFO_V1(pgdl_attach_partitions);
Datum
pgdl_attach_partitions(PG_FUNCTION_ARGS)
{
	Oid			packed;
	const PgdlDataset *ds;
	Oid			server;
	PgdlNode   *node;
	char	   *remote = PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	   *schema,
			   *name;
	int32		parts;
	int32		first;
	int64		rows;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || remote == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pgdl.attach_partitions needs a packed table, a server and the node's packed table")));
	packed = PG_GETARG_OID(0);
	ds = owned_packed(packed, "pgdl.attach_partitions");
	server = usable_server(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	node = pgdl_node_connect(server, false);
	remote_name(node, remote, &schema, &name);
	check_not_attached(packed, ds->partitions, server, schema, name);
	check_same_dataset(node, packed, quote_qualified_identifier(schema, name), &parts, &rows);
	if (parts < 1 || ds->partitions + parts > PGDL_MAX_PARTITIONS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a packed table has at most %d partitions", PGDL_MAX_PARTITIONS),
				 errdetail("\"%s\" has %d, and the node's %d.", get_rel_name(packed), ds->partitions, parts)));
	first = ds->partitions;
	drop_primary_key(packed);
	for (int32 j = 0; j < parts; j++)
	{
		CHECK_FOR_INTERRUPTS();
		attach_one(node, packed, server, schema, name, j, first + j);
	}
	grow_dataset(ds->id, parts, rows);
	pgdl_node_close(node);
	ereport(NOTICE,
			(errmsg("partitions %d to %d of \"%s\" are those of \"%s\" on server \"%s\"",
					first, first + parts - 1, get_rel_name(packed), name,
					GetForeignServer(server)->servername)));
	PG_RETURN_INT32(parts);
}
