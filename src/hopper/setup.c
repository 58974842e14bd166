/*
 * setup.c -- a pgdl.fit_multiple (or pgdl.explain_fit_multiple) call's
 * arguments checked and made a run: its packed tables, epochs, strategy and
 * eta, feature cache mode, priority, and its workers with the partitions each
 * owns (here, and on each node of a distributed packed table); then its
 * configurations made ready and planned (prepare.c).  pgdl.resume reads the
 * same settings back from its run (resume.c) and checks them with the same
 * functions.
 *
 * Invariants:
 * - a worker owns whole partitions: there are never more workers for this
 *   server's partitions than partitions;
 * - the calling transaction runs at READ COMMITTED: it must see the
 *   checkpoints its workers commit;
 * - the caller may read the packed tables, since its workers read them as it.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "mb/pg_wchar.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "train/train.h"
#include "cluster/cluster.h"
#include "hopper/hopper.h"
#include "hopper/leader.h"

/* fit_multiple's folds, deploy and time_limit arguments (explain_fit_multiple has none of them) */
#define MOP_ARG_FOLDS		12
#define MOP_ARG_DEPLOY		13
#define MOP_ARG_TIME_LIMIT	14

/* the longest time_limit: its end stays far from TimestampTz's range, and a run that long needs none */
#define MOP_MAX_TIME_LIMIT_S (366.0 * SECS_PER_DAY)

void
mop_check_isolation(void)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("pgdl.fit_multiple and pgdl.resume need READ COMMITTED isolation"),
				 errdetail("Their workers commit checkpoints that the calling transaction must see.")));
}

/* A strategy by name; false if there is none of that name. */
bool
mop_strategy_by_name(const char *name, MopStrategy *out)
{
	for (MopStrategy st = MOP_ALL; st <= MOP_ASHA; st++)
		if (strcmp(name, mop_strategy_name(st)) == 0)
		{
			*out = st;
			return true;
		}
	return false;
}

bool
mop_is_cache_mode(const char *mode)
{
	return strcmp(mode, "auto") == 0 || strcmp(mode, "on") == 0 || strcmp(mode, "off") == 0;
}

static void
set_strategy(MopRun *run, const char *strategy, int32 eta)
{
	if (!mop_strategy_by_name(strategy, &run->strat))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown strategy \"%s\"", pgdl_echo(strategy)),
				 errhint("Use 'all' (every configuration for every epoch), 'successive_halving', 'hyperband' or 'asha'.")));
	run->eta = 0;
	if (run->strat != MOP_ALL)
	{
		if (eta < MOP_MIN_ETA || eta > MOP_MAX_ETA)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("eta must be between %d and %d, got %d", MOP_MIN_ETA, MOP_MAX_ETA, eta)));
		run->eta = eta;
	}
	run->strategy = pstrdup(mop_strategy_name(run->strat));
}

static void
set_cache_mode(MopRun *run, const char *mode)
{
	if (!mop_is_cache_mode(mode))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown feature_cache mode \"%s\"", pgdl_echo(mode)),
				 errhint("Use 'auto' (the planner decides), 'on' (cache every frozen prefix within pgdl.feature_cache_budget) or 'off' (recompute them).")));
	run->cache_mode = pstrdup(mode);
}

/* Workers read as the caller; say so before anything starts rather than from a worker. */
static void
check_can_read(const PgdlDataset *ds)
{
	if (pg_class_aclcheck(ds->packed, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(ds->packed)),
				 errdetail("pgdl.fit_multiple reads the packed table as the calling user.")));
}

/* Shared memory and visiting orders are laid out for at most PGDL_MAX_PARTITIONS. */
void
mop_check_partitions(const PgdlDataset *ds)
{
	if (ds->partitions < 1 || ds->partitions > PGDL_MAX_PARTITIONS)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("dataset " INT64_FORMAT " has %d partitions, not between 1 and %d",
						ds->id, ds->partitions, PGDL_MAX_PARTITIONS)));
}

static void
check_worker_count(const char *what, int32 workers)
{
	if (workers < 1 || workers > PGDL_MAX_WORKERS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between 1 and %d, got %d", what, PGDL_MAX_WORKERS, workers)));
}

/* Workers for the partitions here and on each node, and which partitions each owns. */
void
mop_set_workers(MopRun *run, int32 workers, int32 per_node)
{
	PgdlPartPlace *places;

	check_worker_count("workers", workers);
	check_worker_count("workers_per_node", per_node);
	places = pgdl_packed_places(run->ds->packed, run->ds->partitions, &run->distributed);
	/* a node down now: its partitions go to live replicas' nodes, and the run starts without it */
	if (run->distributed)
		run->down = pgdl_cluster_route_around(run->ds->packed, places, run->ds->partitions);
	if (!run->distributed && workers > run->ds->partitions)
	{
		ereport(NOTICE,
				(errmsg("using %d workers, one per partition of the packed table", run->ds->partitions),
				 errhint("A worker owns whole partitions; pack with more partitions to use more workers.")));
		workers = run->ds->partitions;
	}
	run->workers = workers;
	run->workers_per_node = per_node;
	run->n_workers = pgdl_cluster_assign(places, run->ds->partitions, workers, per_node,
										 run->worker_server, run->owner);
}

/* The priority argument `arg` (absent under an older SQL definition: 0), checked. */
int32
mop_priority_arg(FunctionCallInfo fcinfo, int arg)
{
	int32		priority;

	if (PG_NARGS() <= arg)
		return 0;
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("priority must not be NULL"),
				 errhint("The default priority is 0.")));
	priority = PG_GETARG_INT32(arg);
	if (priority < PGDL_PRIORITY_MIN || priority > PGDL_PRIORITY_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("priority must be between %d and %d, got %d", PGDL_PRIORITY_MIN, PGDL_PRIORITY_MAX,
						priority),
				 errdetail("The priority orders only the caller's own queued jobs.")));
	return priority;
}

/*
 * Cross-validation over the packed partitions: each one held out once, no
 * validation table (a fold validates on its own), every configuration trained
 * for all its epochs (halving would compare folds of different data), on this
 * server.
 */
static void
check_folds(const MopRun *run)
{
	if (run->vds)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("folds and validation do not combine"),
				 errdetail("With folds, each fold is validated on the partition it holds out."),
				 errhint("Pass validation => NULL, or folds => false.")));
	if (run->strat != MOP_ALL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("folds work with strategy 'all' only, got '%s'", run->strategy),
				 errdetail("Halving compares configurations at rungs; it does not yet compare the means of their folds."),
				 errhint("Cross-validate the few configurations a halving run kept.")));
	if (run->distributed)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("folds do not work on a distributed packed table")));
	if (run->ds->partitions < 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("folds need a packed table of at least 2 partitions, it has 1"),
				 errhint("Pack with partitions => k for k folds.")));
}

/*
 * deploy: the name a selection's winner may be deployed as, scored against
 * the model it serves on the validation table; checked before any epoch is
 * spent (fit_multiple's, tpe_search's).
 */
void
mop_check_deploy(const char *name, bool has_validation, bool folds)
{
	if (strlen(name) < 1 || pg_mbstrlen(name) > 200)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a deployment name must have 1 to 200 characters, not %d", pg_mbstrlen(name))));
	if (!has_validation)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("deploy needs a validation table"),
				 errdetail("The winner is deployed only when it beats the deployed model on the validation table."),
				 errhint(folds ? "Cross-validation stores a model per fold, none of which is the configuration's: "
						 "fit the winning configuration with pgdl.fit, then pgdl.deploy it." :
						 "Pass validation => a packed table (pgdl.split makes one).")));
}

static void
set_deploy(MopRun *run, FunctionCallInfo fcinfo)
{
	if (PG_NARGS() <= MOP_ARG_DEPLOY || PG_ARGISNULL(MOP_ARG_DEPLOY))
		return;
	run->deploy = text_to_cstring(PG_GETARG_TEXT_PP(MOP_ARG_DEPLOY));
	mop_check_deploy(run->deploy, run->vds != NULL, run->folds);
}

/*
 * time_limit: counted from the call (its setup); after it no model starts another
 * epoch (worker.c).  NULL: none.
 */
static void
set_time_limit(MopRun *run, FunctionCallInfo fcinfo)
{
	Interval   *limit;
	double		seconds;

	if (PG_NARGS() <= MOP_ARG_TIME_LIMIT || PG_ARGISNULL(MOP_ARG_TIME_LIMIT))
		return;
	limit = PG_GETARG_INTERVAL_P(MOP_ARG_TIME_LIMIT);
	seconds = limit->time / (double) USECS_PER_SEC + limit->day * (double) SECS_PER_DAY +
		limit->month * (double) (DAYS_PER_MONTH * SECS_PER_DAY);
	if (!(seconds > 0 && seconds <= MOP_MAX_TIME_LIMIT_S))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time_limit must be positive and at most 366 days, not %s",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(limit)))),
				 errdetail("After the time limit no model starts another epoch; every model trains at least one."),
				 errhint("Pass time_limit => NULL to train every model for all its epochs.")));
	run->time_limit = seconds;
	run->time_limit_end = GetCurrentTimestamp() + (TimestampTz) (seconds * USECS_PER_SEC);
}

/* Each configuration once per partition held out, in the set's order, its folds in partition order. */
static void
expand_folds(MopRun *run)
{
	List	   *folds = NIL;
	ListCell   *lc;
	int			parts = run->ds->partitions;

	if ((int64) list_length(run->configs) * parts > PGDL_MAX_MODELS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%d configurations of %d folds are %d models, more than %d",
						list_length(run->configs), parts, list_length(run->configs) * parts, PGDL_MAX_MODELS)));
	foreach(lc, run->configs)
	{
		for (int p = 0; p < parts; p++)
		{
			MopConfig  *fold = palloc(sizeof(MopConfig));

			*fold = *(MopConfig *) lfirst(lc);
			fold->holdout = p;
			folds = lappend(folds, fold);
		}
	}
	run->configs = folds;
}

/* The arguments fit_multiple and explain_fit_multiple share, checked; the configurations ready and planned. */
MopRun *
mop_setup_run(FunctionCallInfo fcinfo)
{
	MopRun	   *run = palloc0(sizeof(MopRun));

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(5) || PG_ARGISNULL(6) ||
		PG_ARGISNULL(8))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source, configs, epochs, strategy, eta and feature_cache must not be NULL")));
	pgdl_engine_prepare();
	run->set_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	run->epochs = PG_GETARG_INT32(2);
	if (run->epochs < 1 || run->epochs > PGDL_MAX_EPOCHS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epochs must be between 1 and %d, got %d", PGDL_MAX_EPOCHS, run->epochs)));
	run->ds = pgdl_dataset_by_packed(PG_GETARG_OID(0));
	mop_check_partitions(run->ds);
	if (!PG_ARGISNULL(3))
	{
		run->vds = pgdl_dataset_by_packed(PG_GETARG_OID(3));
		pgdl_check_same_preprocessing(run->ds, run->vds, get_rel_name(PG_GETARG_OID(3)));
	}
	mop_set_workers(run, PG_ARGISNULL(4) ? pgdl_max_workers : PG_GETARG_INT32(4),
					PG_NARGS() > 9 && !PG_ARGISNULL(9) ? PG_GETARG_INT32(9) : 1);
	set_strategy(run, text_to_cstring(PG_GETARG_TEXT_PP(5)), PG_GETARG_INT32(6));
	run->name_prefix = PG_ARGISNULL(7) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(7));
	set_cache_mode(run, text_to_cstring(PG_GETARG_TEXT_PP(8)));
	/* fit_multiple's rank_by (explain_fit_multiple has none): NULL is the validation loss */
	run->rank_by = PGDL_RANK_LOSS;
	if (PG_NARGS() > 11 && !PG_ARGISNULL(11))
		run->rank_by = pgdl_rank_metric_arg("rank_by", text_to_cstring(PG_GETARG_TEXT_PP(11)));
	if (PG_NARGS() > MOP_ARG_FOLDS)
	{
		if (PG_ARGISNULL(MOP_ARG_FOLDS))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("folds must not be NULL"),
					 errhint("Pass folds => true for cross-validation over the packed partitions, else false.")));
		run->folds = PG_GETARG_BOOL(MOP_ARG_FOLDS);
	}
	if (run->folds)
		check_folds(run);
	set_deploy(run, fcinfo);
	set_time_limit(run, fcinfo);
	check_can_read(run->ds);
	if (run->vds)
		check_can_read(run->vds);
	mop_load_configs(run);
	mop_prepare_configs(run);
	mop_check_methods(run);
	mop_plan_devices(run);
	mop_plan_caches(run);
	if (run->folds)
		expand_folds(run);
	mop_plan_paces(run);
	return run;
}
