/*
 * failover.c -- a model hopper visit that outlives the loss of a node.
 *
 * A worker visits partition p on the node its foreign table names (the
 * primary), or on the replica its own node holds when it took the visit from
 * p's busy owner (the schedule's rule, schedule.c).  When that node is lost during the visit (its connection breaks,
 * or it says it is shutting down) or is fenced at the visit's deadline, the
 * worker drops it for the rest of the run and redoes the visit, from the
 * model bytes it sent (the worker writes the answer back only once it has
 * one), on p's first replica (pgdl.partition_replicas) on a node it has not
 * dropped.  The replica holds the same rows (pgdl.distribute checksummed it)
 * and the visit order never changes, so the models are those of one server.
 * Without a live replica the node's error stands, as without replicas.
 *
 * Before its first visit to a copy of a partition that has replicas, the
 * worker has the node sum the copy's rows (pgdl.distribute's checksum: no row
 * comes back) and compares the sum with the one recorded: a copy that
 * changed since is treated as lost (the visit goes to another copy, and
 * without one the error names the node and the partition), so that a run
 * never trains on rows that differ from the partition's.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "cluster/cluster.h"

static bool
is_lost(const PgdlFailover *f, Oid server)
{
	return list_member_oid(f->lost, server);
}

/* The copies of partition part not on a dropped node: the one on `prefer` first, then the primary, then the replicas. */
static List *
live_copies(const PgdlFailover *f, const PgdlPartPlace *primary, int32 part, Oid prefer)
{
	List	   *live = NIL;
	ListCell   *lc;

	if (!is_lost(f, primary->server) && !list_member_ptr(f->damaged, primary))
		live = lappend(live, (void *) primary);
	foreach(lc, f->replicas[part])
	{
		PgdlPartPlace *copy = lfirst(lc);

		if (is_lost(f, copy->server) || list_member_ptr(f->damaged, copy))
			continue;
		if (copy->server == prefer)
			live = lcons(copy, live);
		else
			live = lappend(live, copy);
	}
	return live;
}

bool *
pgdl_failover_held_here(const PgdlFailover *f, int32 partitions)
{
	bool	   *held = palloc0(sizeof(bool) * partitions);

	for (int32 p = 0; p < partitions; p++)
	{
		ListCell   *lc;

		foreach(lc, f->replicas[p])
			held[p] |= ((PgdlPartPlace *) lfirst(lc))->server == f->home->server;
	}
	return held;
}

/*
 * The worker's connection to server: its own node's, or one opened at its
 * first visit there, in a transaction of its own (a worker trains outside
 * any), and kept for the rest of the run.
 */
static PgdlNode *
node_of(PgdlFailover *f, Oid server)
{
	ListCell   *lc;
	PgdlNode   *node;
	MemoryContext old;

	if (f->home->server == server)
		return f->home;
	foreach(lc, f->open)
		if (((PgdlNode *) lfirst(lc))->server == server)
			return lfirst(lc);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	node = pgdl_node_connect(server, true);
	pgdl_node_keep_partitions(node, f->cache_bytes);
	PopActiveSnapshot();
	CommitTransactionCommand();
	old = MemoryContextSwitchTo(TopMemoryContext);
	f->open = lappend(f->open, node);
	MemoryContextSwitchTo(old);
	return node;
}

/* Whether an error of a visit says the node is gone rather than that the visit failed there. */
static bool
node_lost(const PgdlNode *node, int sqlerrcode)
{
	return node->conn == NULL || PQstatus(node->conn) == CONNECTION_BAD ||
		ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_CONNECTION_EXCEPTION ||
		sqlerrcode == ERRCODE_ADMIN_SHUTDOWN || sqlerrcode == ERRCODE_CRASH_SHUTDOWN ||
		sqlerrcode == ERRCODE_CANNOT_CONNECT_NOW;
}

typedef enum
{
	VISIT_DONE,
	VISIT_DROP_NODE,			/* lost or fenced */
	VISIT_DAMAGED				/* the copy is not the partition's */
} VisitOutcome;

/*
 * Whether node's copy of partition part has the checksum recorded for the
 * partition (its replicas', which pgdl.distribute checked against the
 * primary's as sent), asked once per worker and copy; true when the partition
 * has no replicas (nothing recorded).  A copy that differs is an error when
 * it is the last one (last).
 */
static bool
copy_is_whole(PgdlFailover *f, PgdlNode *node, const PgdlPartPlace *copy, int32 part, bool last)
{
	const char *expected;
	char	   *sum;
	MemoryContext old;

	if (f->replicas[part] == NIL || list_member_ptr(f->checked, copy))
		return true;
	expected = copy->checksum ? copy->checksum : ((PgdlPartPlace *) linitial(f->replicas[part]))->checksum;
	sum = pgdl_node_copy_checksum(node, copy->remote);
	if (strcmp(sum, expected) != 0)
	{
		if (last)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("the copy of partition %d on server \"%s\" does not have its recorded checksum, and no other copy is left",
							part, node->name),
					 errdetail("The node's copy sums to \"%s\", pgdl.partition_replicas records \"%s\"; the run trains only on the partition's own rows.",
							   sum, expected),
					 errhint("Restore the node's table, or call pgdl.distribute again as before: it copies a changed replica again.")));
		return false;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	f->checked = lappend(f->checked, (void *) copy);
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * The visit on node's copy: VISIT_DONE with *out filled; VISIT_DROP_NODE when
 * the node missed the deadline (it is fenced) or, with another copy to turn
 * to (!last), was lost; VISIT_DAMAGED when the copy's rows changed since
 * pgdl.distribute made it.  Any other error, or a loss with no copy left, is
 * the run's, as it would be without replicas.
 */
static VisitOutcome
try_visit(PgdlFailover *f, PgdlNode *node, const PgdlPartPlace *copy, const PgdlFailoverVisit *v, bool last,
		  PgdlVisit *out)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile VisitOutcome outcome = VISIT_DROP_NODE;

	pgdl_node_set_deadline(node, v->deadline > 0 ?
						   TimestampTzPlusMilliseconds(GetCurrentTimestamp(), (int64) (v->deadline * 1000)) : 0);
	PG_TRY();
	{
		if (!copy_is_whole(f, node, copy, v->part, last))
			outcome = VISIT_DAMAGED;
		else
			pgdl_node_send_visit(node, v->model, v->model_len, v->prefix, v->prefix_len, v->config, copy->remote,
								 &v->part, 1, 1);
		if (outcome == VISIT_DAMAGED)
			 /* nothing sent */ ;
		else if (pgdl_node_await(node))
		{
			pgdl_node_read_visit(node, v->model, v->model_len, v->config, v->what, out);
			outcome = VISIT_DONE;
		}
		else
			pgdl_node_fence(node);
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		if (last || !node_lost(node, e->sqlerrcode))
			PG_RE_THROW();
		FlushErrorState();
		ereport(LOG,
				(errmsg("pgdl: server \"%s\" is lost: %s", node->name, e->message)));
		pgdl_node_fence(node);
	}
	PG_END_TRY();
	pgdl_node_set_deadline(node, 0);
	return outcome;
}

PgdlNode *
pgdl_failover_visit(PgdlFailover *f, const PgdlPartPlace *primary, const PgdlFailoverVisit *v, PgdlVisit *out,
					PgdlNode **fenced)
{
	PgdlNode   *dropped = NULL;

	for (;;)
	{
		List	   *live = live_copies(f, primary, v->part, v->prefer);
		const PgdlPartPlace *copy;
		PgdlNode   *node;
		MemoryContext old;
		VisitOutcome outcome;

		if (live == NIL)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("no copy of partition %d is left on a live node", v->part),
					 errdetail("Server \"%s\" and the replicas of the partition were lost earlier in this run.",
							   f->home->name)));
		copy = linitial(live);
		node = node_of(f, copy->server);
		if (dropped)
			ereport(LOG,
					(errmsg("pgdl: server \"%s\" is dropped for the rest of the run; the visit of partition %d with %s is redone on server \"%s\"",
							dropped->name, v->part, v->what, node->name)));
		outcome = try_visit(f, node, copy, v, list_length(live) == 1, out);
		if (outcome == VISIT_DONE)
			return node;
		if (outcome == VISIT_DAMAGED)
		{
			ereport(LOG,
					(errmsg("pgdl: the copy of partition %d on server \"%s\" does not have its recorded checksum; this run does not use it",
							v->part, node->name)));
			old = MemoryContextSwitchTo(TopMemoryContext);
			f->damaged = lappend(f->damaged, (void *) copy);
			MemoryContextSwitchTo(old);
			dropped = NULL;
			continue;
		}
		if (list_length(live) == 1)
		{
			*fenced = node;
			return NULL;
		}
		old = MemoryContextSwitchTo(TopMemoryContext);
		f->lost = lappend_oid(f->lost, node->server);
		MemoryContextSwitchTo(old);
		/* a worker whose node is gone takes no other worker's visits for it */
		if (node == f->home && f->held_here)
			memset(f->held_here, 0, sizeof(bool) * f->partitions);
		dropped = node;
	}
}
