/*
 * cluster.h -- distributed packed tables (cluster.c) and federated averaging
 * (federated.c): what the model hopper and pgdl.fit need to know of them.
 */
#ifndef PGDL_CLUSTER_H
#define PGDL_CLUSTER_H

#include "pgdl.h"

/* Where a partition lives: here (server invalid), or in a node's table. */
typedef struct PgdlPartPlace
{
	Oid			relid;			/* the partition: a table here, or a foreign table; invalid if none */
	Oid			server;
	char	   *remote;			/* the node's table, qualified and quoted; NULL when here */
	char	   *remote_schema;	/* the same, its two parts as they are */
	char	   *remote_table;
} PgdlPartPlace;

/* Each partition 0 .. partitions - 1 of a packed table; *distributed when one lives on a node. */
extern PgdlPartPlace *pgdl_packed_places(Oid packed, int32 partitions, bool *distributed);

/*
 * Workers for a run over these places: local_workers for the partitions here,
 * per_node for each node's (never more than a place has partitions).  Sets
 * each worker's server and each partition's owner; returns the workers.
 */
extern int32 pgdl_cluster_assign(const PgdlPartPlace *places, int32 partitions, int32 local_workers,
								 int32 per_node, Oid *worker_server, int16 *owner);

/*
 * Connect to each node once, so that a node that is down, refuses the user or
 * runs another pgdl build is found before a run starts rather than by a worker.
 */
extern void pgdl_cluster_check_nodes(const Oid *servers, int n);

#endif							/* PGDL_CLUSTER_H */
