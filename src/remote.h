/*
 * remote.h -- libpq connections from a coordinator to its nodes.
 *
 * A node is a postgres_fdw foreign server; pgdl connects with the server's
 * options and the caller's user mapping, as postgres_fdw does, and keeps no
 * password of its own.  Apart from libpq-fe.h so that pgdl.h stays free of it.
 */
#ifndef PGDL_REMOTE_H
#define PGDL_REMOTE_H

#include "libpq-fe.h"

#include "pgdl.h"

typedef struct PgdlNode
{
	Oid			server;
	char	   *name;			/* the foreign server's name: the only thing errors say of it */
	PGconn	   *conn;
	bool		for_process;	/* a worker's: kept across its transactions, closed at exit */
	bool		busy;			/* a query was sent and its result not read */
} PgdlNode;

/*
 * Connect to foreign server `server` as the current user's mapping, refuse a
 * node that runs another pgdl build, and prepare the session.  Interruptible;
 * the connection is closed (its query cancelled) when the transaction aborts,
 * or, for_process, when the process exits.
 */
extern PgdlNode *pgdl_node_connect(Oid server, bool for_process);
extern void pgdl_node_close(PgdlNode *node);
/* The oid of a foreign server of postgres_fdw, by name; errors otherwise. */
extern Oid	pgdl_node_server(const char *name);

/* Send a query (parameters as text, or binary where formats say so); results binary when binary_result. */
extern void pgdl_node_send(PgdlNode *node, const char *sql, int n_params, const char *const *values,
						   const int *lengths, const int *formats, bool binary_result);
/* Wait for the result of the query sent; errors (naming the node) unless it is `expect`. */
extern PGresult *pgdl_node_result(PgdlNode *node, ExecStatusType expect);
/* Both, for a query with text parameters. */
extern PGresult *pgdl_node_exec(PgdlNode *node, const char *sql, int n_params, const char *const *values,
								ExecStatusType expect);
/* Wait until one of the busy nodes has its result ready; its index. */
extern int	pgdl_node_wait_any(PgdlNode **nodes, int n);

/*
 * The node's session keeps the partitions pgdl.train_partitions reads, up to
 * bytes (pgdl.node_cache_mem), for the models that follow: for a run's own
 * connection only, whose partitions do not change while it trains.
 */
extern void pgdl_node_keep_partitions(PgdlNode *node, int64 bytes);

/* COPY ... FROM STDIN: begin it, send its data, end it; returns the rows the node took. */
extern void pgdl_node_copy_begin(PgdlNode *node, const char *copy_sql);
extern void pgdl_node_copy_data(PgdlNode *node, const char *data, int len);
extern int64 pgdl_node_copy_end(PgdlNode *node);

/* Binary result values (network byte order). */
extern int64 pgdl_node_get_int64(const PGresult *res, int row, int col);
extern double pgdl_node_get_float8(const PGresult *res, int row, int col);

/* What pgdl.train_partitions did on a node: the model after it (model_len bytes) and what it measured. */
typedef struct PgdlVisit
{
	bytea	   *model;
	int64		examples;
	NnBatchStats stats;
	bool		diverged;
} PgdlVisit;

/*
 * Send a model (with its frozen prefix, or NULL) to train on a node's table's
 * partitions, in order, epochs times; then read what came back, which must be
 * the model sent, trained with that configuration: another architecture,
 * parameter count, optimizer, seed, or a step count the examples reported do
 * not account for is an error (data_corrupted) naming the server and `what`
 * ("configuration 3").
 */
extern void pgdl_node_send_visit(PgdlNode *node, const char *model, Size model_len, const char *prefix,
								 Size prefix_len, const PgdlTrainConfig *config, const char *table,
								 const int32 *parts, int n_parts, int32 epochs);
extern void pgdl_node_read_visit(PgdlNode *node, const char *sent, Size sent_len, const PgdlTrainConfig *config,
								 const char *what, PgdlVisit *out);

#endif							/* PGDL_REMOTE_H */
