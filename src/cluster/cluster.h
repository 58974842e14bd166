/*
 * cluster/cluster.h -- several servers: distributed packed tables and where each
 * partition lives (cluster.c), libpq connections from a coordinator to its nodes
 * (remote.c, the only libpq user; as postgres_fdw does, pgdl connects with a
 * foreign server's options and the caller's user mapping and keeps no password
 * of its own), pgdl.distribute, what a node runs for its coordinator (node.c),
 * and federated averaging (federated.c).
 */
#ifndef PGDL_CLUSTER_H
#define PGDL_CLUSTER_H

#include "libpq-fe.h"

#include "train/train.h"
#include "plan/plan.h"

/* Where a partition lives: here (server invalid), or in a node's table. */
typedef struct PgdlPartPlace
{
	Oid			relid;			/* the partition: a table here, or a foreign table; invalid if none */
	Oid			server;
	char	   *remote;			/* the node's table, qualified and quoted; NULL when here */
	char	   *remote_schema;	/* the same, its two parts as they are */
	char	   *remote_table;
	char	   *checksum;		/* a replica's, as pgdl.distribute recorded it; NULL for a primary */
} PgdlPartPlace;

/* Each partition 0 .. partitions - 1 of a packed table; *distributed when one lives on a node. */
extern PgdlPartPlace *pgdl_packed_places(Oid packed, int32 partitions, bool *distributed);

/*
 * The replicas of each partition (pgdl.partition_replicas), in the order a run
 * turns to them: a List of PgdlPartPlace * per partition (relid not set).  A
 * server dropped since is left out.
 */
extern List **pgdl_packed_replicas(Oid packed, int32 partitions);

/*
 * Workers for a run over these places: local_workers for the partitions here,
 * per_node for each node's (never more than a place has partitions).  Sets
 * each worker's server and each partition's owner; returns the workers.
 */
extern int32 pgdl_cluster_assign(const PgdlPartPlace *places, int32 partitions, int32 local_workers,
								 int32 per_node, Oid *worker_server, int16 *owner);

/*
 * Before a run: connect to the node of each partition once, so that a node
 * that refuses the user or runs another pgdl build is found before the run
 * starts rather than by a worker.  A node that cannot be reached (down) is
 * left out when each partition it holds has a replica on a node that
 * answers: places[p] then names that replica, a WARNING names the node, and
 * the run starts without it; without such a replica, an error names the node.
 * Returns the servers found down.
 */
extern List *pgdl_cluster_route_around(Oid packed, PgdlPartPlace *places, int32 partitions);

/* remote.c */

typedef struct PgdlNode
{
	Oid			server;
	char	   *name;			/* the foreign server's name: the only thing errors say of it */
	PGconn	   *conn;
	bool		for_process;	/* a worker's: kept across its transactions, closed at exit */
	bool		busy;			/* a query was sent and its result not read */
	TimestampTz deadline;		/* for the answer to the query in flight; 0: none */
	bool		late;			/* the deadline passed while the query was still being sent */
	bool		fenced;			/* given up at a deadline: its connection is closed */
	bool		has_blobs;		/* its session has the table a visit's model is copied into */
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
/*
 * Deadlines.  A deadline (0: none) bounds the sending of the next query and
 * the wait for its answer: pgdl_node_await is true once the answer is there to
 * read, false when the deadline passed first; then pgdl_node_fence cancels the
 * node's query (a cancel request of its own, not waited for: the node may be
 * hung) and closes the connection, so that a late answer is never read.
 */
extern void pgdl_node_set_deadline(PgdlNode *node, TimestampTz deadline);
extern bool pgdl_node_await(PgdlNode *node);
extern void pgdl_node_fence(PgdlNode *node);

/*
 * Wait until one of the busy nodes has its result ready; its index (-1: none
 * busy).  A busy node past its deadline is fenced, and the error names it.
 */
extern int	pgdl_node_wait_any(PgdlNode **nodes, int n);

/*
 * The node's session keeps the partitions pgdl.train_partitions reads, up to
 * bytes (pgdl.node_cache_mem), for the models that follow: for a run's own
 * connection only, whose partitions do not change while it trains.
 */
extern void pgdl_node_keep_partitions(PgdlNode *node, int64 bytes);

/*
 * distribute.c: the rows and checksum of a node's table (qualified), as
 * pgdl.distribute records a copy's (pgdl.partition_replicas); "" when none.
 * The node sums its rows: nothing is shipped back.
 */
extern char *pgdl_node_copy_checksum(PgdlNode *node, const char *qualified);

/* COPY ... FROM STDIN: begin it, send its data, end it; returns the rows the node took. */
extern void pgdl_node_copy_begin(PgdlNode *node, const char *copy_sql);
extern void pgdl_node_copy_data(PgdlNode *node, const char *data, int len);
extern int64 pgdl_node_copy_end(PgdlNode *node);

/*
 * The images per second a node predicts for training `spec` with the
 * configuration, one worker alone (pgdl.estimate there: its own profile, or
 * its pgdl.cpu_gflops); an error names the node unless it is a positive
 * finite number.
 */
extern double pgdl_node_images_per_second(PgdlNode *node, Jsonb *spec, const PgdlTrainConfig *config);

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

/*
 * failover.c: a worker's visits, which go to a replica of their partition
 * once the node they were on is lost or fenced (see there).
 */
typedef struct PgdlFailover
{
	PgdlNode   *home;			/* the worker's own node: its partitions' primaries */
	List	  **replicas;		/* per partition, its replicas (pgdl_packed_replicas) */
	List	   *lost;			/* the servers this worker dropped for the rest of the run */
	List	   *open;			/* its connections to other nodes, PgdlNode * */
	List	   *checked;		/* the copies (PgdlPartPlace *) whose checksum it verified */
	List	   *damaged;		/* and those whose rows differ from the partition's: never visited */
	int64		cache_bytes;	/* pgdl_node_keep_partitions there */
	int32		partitions;
	bool	   *held_here;		/* per partition: home holds a replica of it (pgdl_failover_held_here) */
} PgdlFailover;

typedef struct PgdlFailoverVisit
{
	int32		part;
	const char *model;			/* the bytes sent, from which a visit is redone */
	Size		model_len;
	const char *prefix;			/* the frozen prefix, or NULL */
	Size		prefix_len;
	const PgdlTrainConfig *config;
	double		deadline;		/* s, of each try (a redo has one of its own); 0: none */
	const char *what;			/* "configuration 3", for errors */
	Oid			prefer;			/* a server whose copy goes first (a replica there), or invalid */
} PgdlFailoverVisit;

/*
 * The visit of v->part, on primary's node or a live replica's; returns the
 * node that answered.  NULL when the last live copy's node missed its
 * deadline: it is fenced (*fenced), and the caller's error names it.
 */
/* Per partition, whether f->home holds a replica of it: a worker there may visit it while its owner is busy. */
extern bool *pgdl_failover_held_here(const PgdlFailover *f, int32 partitions);
extern PgdlNode *pgdl_failover_visit(PgdlFailover *f, const PgdlPartPlace *primary, const PgdlFailoverVisit *v,
									 PgdlVisit *out, PgdlNode **fenced);

/*
 * node.c: the model on partitions parts[0 .. n) of ds, in that order, epochs
 * times, each visit begun and checked as a model hopper worker does; through
 * its frozen prefix (inference mode) when there is one.
 */
/* node.c: refuse a relation that is not a packed table the caller may read. */
extern void pgdl_node_check_packed(Oid relid);

/*
 * node_cache.c, on a node: the caller's valid cache of these frozen layers'
 * outputs over `packed`, or InvalidOid.  On the coordinator: ask the nodes of
 * group g's partitions what their caches need and decide (explain and
 * fit_multiple), and have them build (fit_multiple), recording each in
 * pgdl.node_feature_cache.
 */
extern Oid	pgdl_node_cache_valid(Oid packed, const NnModel *prefix);
extern void pgdl_node_cache_plan(PgdlCachePlan *plan, const PgdlDataset *ds, int32 epochs, int32 workers,
								 const char *mode);
extern void pgdl_node_cache_build(const PgdlCachePlan *plan, const PgdlDataset *ds);

extern PgdlTrainState *pgdl_train_visits(NnModel *model, NnModel *prefix, const PgdlTrainConfig *config,
										 const PgdlDataset *ds, const int32 *parts, int n_parts, int32 epochs);

/* federated.c: pgdl.resume of a pgdl.fit_federated run, as a leaderboard of its one model. */
extern void pgdl_fit_federated_resume(FunctionCallInfo fcinfo, int64 run);

/* federated_privacy.c: differentially private averaging (DP-FedAvg) and its GDP accounting */
typedef struct PgdlPrivacy
{
	double		clip;			/* L2 norm a site's update is clipped to; 0: not a private run */
	double		noise_multiplier;	/* the noise's standard deviation over clip */
	double		delta;			/* the delta epsilon is reported at */
} PgdlPrivacy;

/*
 * global += (the sites' updates from global, each clipped to p->clip, summed,
 * plus seeded Gaussian noise of sd noise_multiplier x clip per coordinate) /
 * n_sites, over parameters and running statistics; global's optimizer state
 * stays as it is.
 */
extern void pgdl_private_average(NnModel *global, NnModel **sites, int n_sites, const PgdlPrivacy *p,
								 uint64 seed, int32 round);
/* After `rounds` rounds: mu = sqrt(rounds) / noise_multiplier, and epsilon at p->delta. */
extern void pgdl_privacy_spent(const PgdlPrivacy *p, int32 rounds, double *mu, double *epsilon);
/* The smallest epsilon with delta(epsilon) <= delta for mu-GDP (Dong, Roth, Su: Corollary 2.13). */
extern double pgdl_gdp_epsilon(double mu, double delta);

#endif							/* PGDL_CLUSTER_H */
