/*
 * prepare.c -- a run's configurations made ready before any worker starts:
 * each read from its set, its network resolved (its architecture's, or its
 * base model's with a head), checked against the packed table and
 * pgdl.max_model_memory, and its starting model made (new, its base model's
 * trainable layers, a warm start, or its checkpoint when resuming); then each
 * worker's device, the feature caches of the frozen prefixes and, on a
 * distributed table, each node's pace planned.
 *
 * Invariants:
 * - a configuration that cannot run is refused here, before any worker
 *   starts, rather than half-way through the run;
 * - a checkpoint is a model of its configuration's network, and of a
 *   configuration with frozen layers those layers are still its base model's
 *   (else workers would train on buffers of another shape, or other features);
 * - a configuration's cost is that of its trainable layers alone (not of the
 *   cache plan, which depends on the workers): brackets and asha's order are
 *   the same whatever the number of workers.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"
#include "plan/plan.h"
#include "cluster/cluster.h"
#include "hopper/hopper.h"
#include "hopper/leader.h"

void
mop_load_configs(MopRun *run)
{
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2] = {CStringGetTextDatum(run->set_name), Int64GetDatum(run->run_id)};
	MemoryContext caller = CurrentMemoryContext;

	SPI_connect();
	if (SPI_execute_with_args("SELECT c.id, a.id, a.name, a.spec, c.config FROM pgdl.configs c "
							  "LEFT JOIN pgdl.architectures a ON a.id = c.architecture "
							  "WHERE c.set_name = $1 AND c.owner = (SELECT pgdl.config_set_owner($1, $2)) ORDER BY c.id",
							  2, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read pgdl.configs");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("configuration set \"%s\" is empty or does not exist", pgdl_echo(run->set_name)),
				 errhint("Fill it with pgdl.grid_search(), pgdl.random_search() or INSERT INTO pgdl.configs.")));
	if (SPI_processed > PGDL_MAX_MODELS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("configuration set \"%s\" has " UINT64_FORMAT " configurations, more than %d",
						pgdl_echo(run->set_name), SPI_processed, PGDL_MAX_MODELS)));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(caller);
		MopConfig  *c = palloc0(sizeof(MopConfig));

		Datum		d;

		c->config_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		c->holdout = -1;
		d = SPI_getbinval(tup, desc, 2, &isnull);
		/* a configuration with a base model has no architecture: its network comes from the base */
		if (!isnull)
		{
			c->arch_id = DatumGetInt64(d);
			c->arch_name = TextDatumGetCString(SPI_getbinval(tup, desc, 3, &isnull));
			c->spec_json = DatumGetJsonbPCopy(SPI_getbinval(tup, desc, 4, &isnull));
		}
		c->config_json = DatumGetJsonbPCopy(SPI_getbinval(tup, desc, 5, &isnull));
		run->configs = lappend(run->configs, c);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
}

/*
 * A checkpoint is read back from the catalog: it must be a model of the
 * configuration's network (else workers would train a model on buffers of
 * another shape).  Of a configuration with frozen layers it is the whole
 * model: its frozen layers must still be the base model's (else the run would
 * go on with other features than it started with), and training goes on from
 * the rest.
 */
static bytea *
checked_checkpoint(MopRun *run, MopConfig *c)
{
	NnModel    *whole = pgdl_model_deserialize(c->start);
	PgdlTransfer *t = c->transfer;
	NnModel    *prefix,
			   *rest;
	NnError		err;
	char		hash[65];

	pgdl_model_free_with(whole, CurrentMemoryContext);
	/* a model that diverged stays as it was: its metrics say how many steps it took */
	if (c->has_metrics && c->last.diverged)
		c->last.steps = whole->step;
	if (!DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(pgdl_spec_to_jsonb(&whole->spec)),
										  JsonbPGetDatum(pgdl_spec_to_jsonb(c->spec)))))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the checkpoint of configuration " INT64_FORMAT " does not match its network", c->config_id),
				 errdetail("Its spec differs from the configuration's.")));
	if (t == NULL || t->prefix == NULL)
		return c->start;
	prefix = nn_model_slice(whole, 0, t->freeze, 0, &err);
	if (prefix == NULL)
		pgdl_report_nn_error("checkpoint", &err);
	pgdl_model_free_with(prefix, CurrentMemoryContext);
	pgdl_prefix_hash(prefix, hash);
	if (strcmp(hash, t->hash) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the base model of configuration " INT64_FORMAT " changed since run " INT64_FORMAT " started",
						c->config_id, run->run_id),
				 errdetail("Its first %d layers are not those the run's checkpoints were trained on.", t->freeze),
				 errhint("Restore the base model's weights, or start a new run with pgdl.fit_multiple().")));
	rest = nn_model_slice_trained(whole, t->freeze, &err);
	if (rest == NULL)
		pgdl_report_nn_error("checkpoint", &err);
	pgdl_model_free_with(rest, CurrentMemoryContext);
	return pgdl_model_serialize(rest);
}

/* Whether a configuration before c starts from c's base model too (a NOTICE about it is said once). */
static bool
base_seen_before(MopRun *run, MopConfig *c)
{
	ListCell   *lc;

	foreach(lc, run->configs)
	{
		MopConfig  *other = lfirst(lc);

		if (other == c)
			break;
		if (other->transfer != NULL && other->transfer->base_id == c->transfer->base_id)
			return true;
	}
	return false;
}

/* The configuration's network: its architecture's spec, or its base model's with a head. */
static void
resolve_network(MopRun *run, MopConfig *c)
{
	c->spec = palloc(sizeof(NnSpec));
	PG_TRY();
	{
		pgdl_config_from_jsonb_transfer(c->config_json, &c->config);
		if (pgdl_config_has_transfer(c->config_json))
		{
			c->transfer = palloc(sizeof(PgdlTransfer));
			pgdl_transfer_prepare(c->config_json, (uint64) c->config.seed, c->transfer);
			if (!base_seen_before(run, c))
				pgdl_transfer_note_preprocessing(c->transfer, run->ds);
			c->spec = c->transfer->spec;
			c->spec_json = pgdl_spec_to_jsonb(c->spec);
			c->arch_name = psprintf("%s, %d layers frozen", c->transfer->base_name, c->transfer->freeze);
		}
		else if (c->spec_json == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("configuration has neither an architecture nor a base model")));
		else
			pgdl_spec_from_jsonb(c->spec_json, c->spec);
		pgdl_check_model_fits(c->spec, run->ds);
		pgdl_check_model_memory(c->spec, &c->config.optim, c->config.batch_size, "the model");
		pgdl_check_precision(&c->config.optim, pgdl_device_for(&c->config));
		pgdl_class_weights_resolve(&c->config, run->ds);
	}
	PG_CATCH();
	{
		errcontext("configuration " INT64_FORMAT " (%s)", c->config_id,
				   c->arch_name ? pgdl_echo(c->arch_name) : "a base model");
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* The model a configuration starts from: its checkpoint, its base model's trainable layers, or a new one. */
static bytea *
starting_model(MopRun *run, MopConfig *c)
{
	NnModel    *m;
	NnOptim		optim;
	NnError		err;
	char	   *name;
	int64		id;

	if (c->start != NULL)
	{
		/* a resumed warm start is made again only for its lineage: its checkpoint goes on */
		if (c->transfer == NULL && pgdl_warm_start_key(c->config_json, &name, &id))
			nn_model_free(pgdl_model_start(c->spec, (uint64) c->config.seed, c->config_json, &c->origin));
		return checked_checkpoint(run, c);
	}
	if (c->transfer)
		m = c->transfer->rest;
	else
	{
		m = pgdl_model_start(c->spec, (uint64) c->config.seed, c->config_json, &c->origin);
		pgdl_model_free_with(m, CurrentMemoryContext);
	}
	/* the blob keeps the optimizer, not the precision (a training method): none needed to make it */
	optim = c->config.optim;
	optim.bf16 = false;
	if (!nn_model_set_optim(m, &optim, &err))
		pgdl_report_nn_error("training configuration", &err);
	return pgdl_model_serialize(m);
}

/* Every configuration is checked, and its starting model made, before any worker starts. */
void
mop_prepare_configs(MopRun *run)
{
	ListCell   *lc;

	foreach(lc, run->configs)
	{
		MopConfig  *c = lfirst(lc);
		NnCost		cost;
		NnError		err;

		resolve_network(run, c);
		/* what the workers run per example: the trainable layers (a recomputed prefix adds its forward pass) */
		if (!nn_spec_cost(c->transfer ? &c->transfer->rest->spec : c->spec, NULL, &cost, &err))
			pgdl_report_nn_error("model spec", &err);
		c->cost = (double) cost.flops_train;
		c->start = starting_model(run, c);
	}
}

/* Each worker's device, refused here if the configurations do not allow it; a node's workers use its own. */
void
mop_plan_devices(MopRun *run)
{
	int			n = list_length(run->configs);
	const PgdlTrainConfig **configs = palloc(sizeof(PgdlTrainConfig *) * n);
	const NnSpec **specs = palloc(sizeof(NnSpec *) * n);

	for (int i = 0; i < n; i++)
	{
		MopConfig  *c = list_nth(run->configs, i);

		configs[i] = &c->config;
		specs[i] = c->transfer ? &c->transfer->rest->spec : c->spec;
	}
	for (int w = 0; w < run->n_workers; w++)
		run->worker_device[w] = PGDL_DEVICE_CPU;
	if (!run->distributed)
		pgdl_device_plan(configs, specs, n, run->n_workers, run->worker_device);
}

/* Group the configurations that share a frozen prefix, and decide what to cache. */
void
mop_plan_caches(MopRun *run)
{
	int			n = list_length(run->configs);
	PgdlTransfer **transfers = palloc0(sizeof(PgdlTransfer *) * n);
	int		   *group_of = palloc(sizeof(int) * n);
	ListCell   *lc;
	int			i = 0;
	bool		on_nodes = run->distributed;

	foreach(lc, run->configs)
		transfers[i++] = ((MopConfig *) lfirst(lc))->transfer;
	/* a distributed validation set has no materialized cache either: it is read through its foreign tables */
	if (run->vds && !on_nodes)
		pfree(pgdl_packed_places(run->vds->packed, run->vds->partitions, &on_nodes));
	if (on_nodes && !run->distributed && strcmp(run->cache_mode, "on") == 0)
		ereport(NOTICE,
				(errmsg("no feature cache is materialized for a distributed validation set"),
				 errdetail("The frozen layers run over the validation set at every epoch.")));
	run->plan = pgdl_cache_plan(run->ds, run->vds, transfers, n, run->epochs, run->workers,
								on_nodes ? PGDL_CACHE_ON_NODES : run->cache_mode, group_of);
	/* a distributed packed table's caches live on its nodes (cluster/node_cache.c); with one down, none is used */
	if (run->distributed && run->down == NIL)
		pgdl_node_cache_plan(run->plan, run->ds, run->epochs, run->n_workers, run->cache_mode);
	if (run->plan->n_groups + 1 > MOP_MAX_SOURCES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the configurations have %d different frozen prefixes, more than %d",
						run->plan->n_groups, MOP_MAX_SOURCES - 1)));
	i = 0;
	foreach(lc, run->configs)
		((MopConfig *) lfirst(lc))->source = group_of[i++] + 1;
}

/*
 * With folds, a configuration's restore_best is off (a fold's model is its last
 * epoch's, as the cross-validation's figures are): an error when the
 * configuration asks for it, else the default that patience brought is dropped.
 */
static void
fold_restore_best(const MopRun *run, MopConfig *c)
{
	if (c->config_json != NULL && pgdl_jsonb_key(&c->config_json->root, "restore_best") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("restore_best does not combine with folds"),
				 errdetail("Configuration " INT64_FORMAT " asks for it; a fold's model is stored as its last epoch left it, and the cross-validation's figures are that epoch's.",
						   c->config_id),
				 errhint("Leave \"restore_best\" out of the configuration, or cross-validate without it.")));
	c->config.restore_best = false;
}

/* Folds rank and stop by the validation loss or accuracy of their held-out partitions. */
static void
check_fold_metrics(const MopRun *run)
{
	if (run->folds && pgdl_rank_metric_needs_scores(run->rank_by))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("rank_by \"%s\" does not combine with folds", pgdl_rank_metric_name(run->rank_by)),
				 errdetail("Cross-validation ranks configurations by the mean validation loss over their folds."),
				 errhint("Leave rank_by out, or rank by loss or accuracy.")));
}

/* Training methods that need a validation set, or a run on this server (whose workers count epochs); rank_by too. */
void
mop_check_methods(MopRun *run)
{
	ListCell   *lc;

	pgdl_rank_metric_check_task(run->rank_by, run->ds->classification, "rank_by");
	check_fold_metrics(run);
	if (run->rank_by != PGDL_RANK_LOSS && run->vds == NULL && !run->folds)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rank_by \"%s\" needs a validation table", pgdl_rank_metric_name(run->rank_by)),
				 errdetail("Without one, models rank by their training loss."),
				 errhint("Pass validation => a packed table.")));
	if (run->distributed && pgdl_rank_metric_needs_scores(run->rank_by))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("rank_by \"%s\" is not supported in a pgdl.fit_multiple run over a cluster's nodes",
						pgdl_rank_metric_name(run->rank_by)),
				 errdetail("Nodes measure validation loss and accuracy only."),
				 errhint("Rank by loss or accuracy.")));

	foreach(lc, run->configs)
	{
		MopConfig  *c = lfirst(lc);

		bool		watches = c->config.patience > 0 || c->config.restore_best;

		/* a fold watches its held-out partition; it keeps no checkpoint to restore a best epoch from */
		if (run->folds && c->config.restore_best)
			fold_restore_best(run, c);
		watches = c->config.patience > 0 || c->config.restore_best;
		/* rank_by drives early stopping too, unless the configuration names its own monitor */
		if (watches && !c->config.monitor_given)
			c->config.monitor = run->rank_by;
		if (watches && run->vds == NULL && !run->folds)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid training configuration at %s", c->config.patience > 0 ? "patience" : "restore_best"),
					 errdetail("Configuration " INT64_FORMAT " watches the validation set: \"%s\" needs a validation table.",
							   c->config_id, c->config.patience > 0 ? "patience" : "restore_best"),
					 errhint("Pass validation => a packed table.")));
		if (watches)
			pgdl_rank_metric_check_task(c->config.monitor, run->ds->classification, "monitor");
		if (run->distributed)
			pgdl_config_refuse_epochs(&c->config, "a pgdl.fit_multiple run over a cluster's nodes");
		if (run->folds && watches && pgdl_rank_metric_needs_scores(c->config.monitor))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("monitor \"%s\" does not combine with folds", pgdl_rank_metric_name(c->config.monitor)),
					 errdetail("A fold stops early on the validation loss or accuracy of its held-out partition."),
					 errhint("Monitor validation_loss or validation_accuracy.")));
		if (run->distributed && watches && pgdl_rank_metric_needs_scores(c->config.monitor))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("monitor \"%s\" is not supported in a pgdl.fit_multiple run over a cluster's nodes",
							pgdl_rank_metric_name(c->config.monitor)),
					 errdetail("Nodes measure validation loss and accuracy only."),
					 errhint("Monitor validation_loss or validation_accuracy.")));
		if (run->distributed && c->config.class_weight != PGDL_CLASS_WEIGHT_NONE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("\"class_weight\" is not taken by a pgdl.fit_multiple run over a cluster's nodes"),
					 errdetail("Configuration " INT64_FORMAT " weighs classes; its nodes would train unweighted.",
							   c->config_id),
					 errhint("Train it without \"class_weight\".")));
	}
}

/*
 * A node's pace is the time it predicts for training the run's configurations
 * (its pgdl.estimate: the node's own profile, pgdl.calibrate there, or its
 * pgdl.cpu_gflops) over the time this server predicts for them, so that the
 * explain simulation slows a slow node's visits as the run would, and a
 * visit's deadline (schedule.c) grows on a node that says it is slower.  Each
 * node is asked once; the note names each with its pace.
 */
void
mop_plan_paces(MopRun *run)
{
	PgdlProfile *prof = palloc(sizeof(PgdlProfile));
	StringInfoData note;
	double		here = 0;
	ListCell   *lc;

	initStringInfo(&note);
	run->pace_note = note.data;
	for (int w = 0; w < run->n_workers; w++)
		run->worker_pace[w] = 1;
	if (!run->distributed)
		return;
	pgdl_profile_load(prof);
	foreach(lc, run->configs)
	{
		MopConfig  *c = lfirst(lc);

		here += 1.0 / pgdl_predict_images_per_second(prof, c->spec, &c->config.optim, c->config.batch_size, 1, false);
	}
	for (int w = 0; w < run->n_workers; w++)
	{
		Oid			server = run->worker_server[w];
		PgdlNode   *node;
		double		there = 0;
		int			v;

		for (v = 0; v < w && run->worker_server[v] != server; v++)
			;
		if (!OidIsValid(server) || v < w)
		{
			run->worker_pace[w] = run->worker_pace[v];
			continue;
		}
		node = pgdl_node_connect(server, false);
		foreach(lc, run->configs)
		{
			MopConfig  *c = lfirst(lc);

			CHECK_FOR_INTERRUPTS();
			there += 1.0 / pgdl_node_images_per_second(node, c->spec_json, &c->config);
		}
		run->worker_pace[w] = here > 0 && isfinite(here) ? there / here : 1;
		appendStringInfo(&note, "; %s at %.2fx this server's time", node->name, run->worker_pace[w]);
		pgdl_node_close(node);
	}
	run->pace_note = note.data;
}
