/*
 * hopper/leader.h -- what the leader's files share: the run being set up
 * (MopRun and its MopConfigs), its workers (MopCrew), its DSM segment
 * (MopSegment), and the steps from a call's arguments to its leaderboard.
 * Workers, the job queue and pgdl.progress see only hopper.h's shared state;
 * no file but the leader's includes this one.
 *
 * The leader's files, each calling only files listed after it (and the rest
 * of the hopper's), so that they call each other in no cycle:
 *   tpe_search.c  pgdl.tpe_search: batches, each a fit_multiple run (through SQL)
 *   mop.c      pgdl.fit_multiple and pgdl.resume: set up, lay out, run, store
 *   explain.c  pgdl.explain_fit_multiple: what fit_multiple would do, predicted
 *   resume.c   a run to continue: its settings, each model's point and rungs
 *   setup.c    a call's arguments checked, the run's workers assigned
 *   prepare.c  every configuration ready to run; devices and caches planned
 *   crew.c     the run's workers: started, rebalanced (jobs.c), stopped
 *   dsm.c      the DSM segment as the workers first see it
 *   store.c    the trained models into pgdl.models, and the leaderboard
 */
#ifndef PGDL_HOPPER_LEADER_H
#define PGDL_HOPPER_LEADER_H

#include "fmgr.h"
#include "postmaster/bgworker.h"
#include "utils/timestamp.h"

#include "hopper/hopper.h"

/* halving's eta, as fit_multiple takes it and pgdl.runs.config keeps it */
#define MOP_MIN_ETA			2
#define MOP_MAX_ETA			100

/* A configuration of the set, ready to run. */
typedef struct MopConfig
{
	int64		config_id;
	int64		arch_id;
	char	   *arch_name;
	NnSpec	   *spec;
	Jsonb	   *spec_json;
	PgdlTrainConfig config;
	Jsonb	   *config_json;
	bytea	   *start;			/* the model to start from: new, or a checkpoint */
	int32		start_epoch;
	bool		stopped;		/* resume: stopped at a rung before */
	bool		has_metrics;	/* resume: `last` holds its last epoch's losses and accuracies */
	PgdlEpochMetrics last;
	double	   *epoch_key;		/* resume: its rank key at epochs 1..start_epoch (NaN: none) */
	PgdlPatience patience;		/* resume: early stopping's count, replayed from its metrics */
	double		cost;
	PgdlTransfer *transfer;		/* when it starts from a base model */
	Jsonb	   *origin;			/* a warm start's lineage, or NULL */
	int32		source;			/* its MopSource: 0 the packed tables, else its frozen prefix's */
	int32		holdout;		/* folds: its held-out partition (a copy of the configuration per fold); -1: none */
} MopConfig;

/* A pgdl.fit_multiple or pgdl.resume call's run, as the leader sets it up. */
typedef struct MopRun
{
	char	   *set_name;
	PgdlDataset *ds;
	PgdlDataset *vds;
	int32		epochs;
	int32		workers;		/* for the partitions here */
	int32		workers_per_node;	/* for each node's */
	int32		priority;		/* among its role's queued jobs (jobs.c) */
	int32		n_workers;		/* in all */
	bool		distributed;
	List	   *down;			/* nodes that did not answer as the run started (pgdl_cluster_route_around) */
	bool		folds;			/* cross-validation over the partitions: configs holds each one once per fold */
	Oid			worker_server[PGDL_MAX_WORKERS];
	int32		worker_device[PGDL_MAX_WORKERS];	/* devices.c's plan */
	int16		owner[PGDL_MAX_PARTITIONS];
	double		worker_pace[PGDL_MAX_WORKERS];	/* a visit's time against this server's (mop_plan_paces) */
	char	   *pace_note;		/* "; node1 at 4.00x this server's time" per node, or "" */
	int32		eta;
	char	   *strategy;
	MopStrategy strat;
	PgdlRankMetric rank_by;		/* what ranks the models: leaderboard, rungs */
	char	   *name_prefix;
	char	   *deploy;			/* the name the winner may be deployed as, or NULL */
	double		time_limit;		/* seconds from the call's start after which no model starts an epoch; 0: none */
	TimestampTz time_limit_end;	/* the call's start plus time_limit; 0: none */
	int64		winner;			/* the leaderboard's first model, once stored; 0: none fit to serve */
	int64		run_id;			/* resume: the run to continue; 0: a new run */
	char	   *cache_mode;		/* feature caches: auto, on, off */
	List	   *configs;		/* of MopConfig * */
	PgdlCachePlan *plan;
} MopRun;

/*
 * The leader's side of the server's fair share (jobs.c): the workers it may
 * start, the slots of workers that left given back.
 */
typedef struct MopCrew
{
	dsm_segment *seg;
	BackgroundWorkerHandle **handles;	/* PGDL_MAX_WORKERS of them */
	int			wanted;			/* the most workers at once */
	int			granted;		/* the slots the server's queue gave it to start with */
	bool		queued;			/* the run holds slots of the server's queue (not distributed) */
	bool		can_grow;		/* every worker trains on the CPU: one that joins later can too */
	bool		released[PGDL_MAX_WORKERS]; /* a retired worker's slot given back */
	TimestampTz last;
} MopCrew;

/* A run's DSM segment, as the leader lays it out (hopper/hopper.h). */
typedef struct MopSegment
{
	dsm_segment *seg;
	MopShared  *shared;
	char	   *blobs;			/* the models, then the frozen prefixes */
	char	   *plan_sql;		/* the feature cache tasks' SQL */
} MopSegment;

/* setup.c */

/* The arguments fit_multiple and explain_fit_multiple share, checked; the configurations ready and planned. */
extern MopRun *mop_setup_run(FunctionCallInfo fcinfo);
extern void mop_check_isolation(void);
/* The priority argument `arg` (absent under an older SQL definition: 0), checked. */
extern int32 mop_priority_arg(FunctionCallInfo fcinfo, int arg);
/* A deployment name (1 to 200 characters) for a selection's winner, which needs a validation table. */
extern void mop_check_deploy(const char *name, bool has_validation, bool folds);
/* A strategy by name; false if there is none of that name. */
extern bool mop_strategy_by_name(const char *name, MopStrategy *out);
extern bool mop_is_cache_mode(const char *mode);
extern void mop_check_partitions(const PgdlDataset *ds);
/* Workers for the partitions here and on each node, and which partitions each owns. */
extern void mop_set_workers(MopRun *run, int32 workers, int32 per_node);

/* prepare.c */

/* The configurations of run->set_name (the run owner's set when resuming), not yet resolved. */
extern void mop_load_configs(MopRun *run);
/* Every configuration checked, its network resolved and its starting model made. */
extern void mop_prepare_configs(MopRun *run);
/* Training methods that need a validation set, or a run on this server. */
extern void mop_check_methods(MopRun *run);
extern void mop_plan_devices(MopRun *run);
extern void mop_plan_caches(MopRun *run);
/*
 * Each worker's pace: 1 here; for a node's, the time its node predicts for the
 * configurations (its pgdl.estimate) over this server's prediction.
 */
extern void mop_plan_paces(MopRun *run);

/* crew.c */

/* Queue for the run's workers' slots (none started); the leader's first wait. */
extern void mop_crew_init(MopCrew *crew, const MopSegment *s, int wanted, int priority);
/* Start the workers the slots allow, and let them go. */
extern void mop_crew_launch(MopCrew *crew, MopShared *shared);
/* At each of the leader's wake-ups: give slots back, ask workers to leave, take more. */
extern void mop_crew_rebalance(MopShared *shared, MopCrew *crew);
/* Stop every worker started, and wait until they are gone. */
extern void mop_crew_stop(MopCrew *crew);

/* dsm.c */

/* The run's segment, filled: shared state, the models' blobs, the cache tasks, brackets. */
extern void mop_segment_create(const MopRun *run, Jsonb *run_config, MopSegment *out);

/* store.c */

/* Store the models, finish the run, return the leaderboard. */
extern void mop_store_models(FunctionCallInfo fcinfo, MopRun *run, MopShared *shared, char *blobs);

/* resume.c */

/* The pgdl.runs.config of a fit_multiple run: how pgdl.resume continues it. */
extern Jsonb *mop_run_config_jsonb(const MopRun *run);
/* pgdl.resume's arguments and its run, checked; the configurations ready, from their checkpoints. */
extern MopRun *mop_resume_setup(FunctionCallInfo fcinfo);
/* In the segment: the rungs each model passed, and the decisions pending there. */
extern void mop_resume_rungs(MopShared *shared, const MopRun *run);

#endif							/* PGDL_HOPPER_LEADER_H */
