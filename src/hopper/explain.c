/*
 * explain.c -- pgdl.explain_fit_multiple: what pgdl.fit_multiple would do
 * with the same arguments, without doing it: a row per group of
 * configurations that share a frozen prefix (its feature cache reused, built,
 * refreshed, rebuilt, or its prefix recomputed), a row for the configurations
 * trained from scratch, and a total, with predicted compute, storage, time
 * and memory (pgdl.estimate's prediction, per configuration).
 *
 * The total's time simulates the run's workers: each takes models by the
 * workers' own rule (schedule.c's mop_pick_model) and draws the models'
 * partitions as they do, at the pace this server's profile predicts.
 *
 * Invariants:
 * - the call sets its run up as fit_multiple does (setup.c), every
 *   configuration prepared: arguments fit_multiple refuses, it refuses with
 *   the same error; then it starts no worker;
 * - the simulation picks the model a worker would in the same situation: the
 *   rule is one function, not a copy of it.
 */
#include "postgres.h"

#include <math.h>

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "data/data.h"
#include "plan/plan.h"
#include "hopper/hopper.h"
#include "hopper/leader.h"

/* What explain_fit_multiple adds up over its rows. */
typedef struct ExplainTotals
{
	double		flops;
	double		seconds;
	double		models;			/* their visits' blobs and checkpoints (profile), shared by the workers */
	double		store;			/* the leader storing them in pgdl.models: a checkpoint's row each */
	double		caches;			/* building the feature caches, and recomputing frozen prefixes */
	double		setup;			/* this call's own mop_setup_run, which a run's leader does too */
	double		bytes;
	double		longest;		/* the slowest model's seconds: no run ends before it */
	double		models_bytes;	/* every model and its optimizer state, in shared memory */
	double		workspace;		/* the largest workspace, which each worker may hold at once */
	struct SimModel *sim;		/* each configuration, for the schedule's simulation */
	int			n_sim;
} ExplainTotals;

/* Seconds a worker takes to hold a partition, and its bytes. */
typedef struct ExplainLoads
{
	double		part_bytes;
	double		read;			/* from its table */
	double		attach;			/* another worker's copy */
	double		validation;		/* the validation set, read */
} ExplainLoads;

/* A configuration as explain_schedule sees it. */
typedef struct SimModel
{
	uint64		seed;			/* its partitions' order */
	int32		epoch;
	int32		visit;
	int32		part;			/* the partition of its next visit */
	double		per_visit;		/* training a partition, predicted */
	double		validate_cost;	/* its validation at the end of an epoch, predicted; 0: the run has none */
	double		visit_cost;		/* the visit's blob read, first step and write back */
	double		epoch_cost;		/* its checkpoint at the end of an epoch */
	double		ready;			/* when its visit in progress ends */
	bool		evaluate;		/* its epoch trained: its validation is due, for any worker */
	bool		done;
} SimModel;

/* A group's configurations, predicted. */
typedef struct ExplainGroup
{
	int			n_configs;
	double		train_flops;
	double		seconds;		/* training, spread over the workers */
	double		memory;			/* bytes: its models, optimizer states and one workspace per worker */
	double		workspace;
	JsonbParseState *configs;	/* [{config, architecture, images_per_second, seconds, memory_bytes}] */
} ExplainGroup;

#define EXPLAIN_COLUMNS 17

/* Group g's row (g = -1: the configurations without a frozen prefix). */
static void
explain_group(ReturnSetInfo *rsinfo, const MopRun *run, int g, ExplainGroup *eg, const PgdlProfile *prof,
			  ExplainTotals *totals)
{
	const PgdlCachePlan *plan = run->plan;
	const PgdlCacheGroup *grp = g >= 0 ? &plan->groups[g] : NULL;
	double		examples = (double) run->ds->n_rows_hint + (run->vds ? run->vds->n_rows_hint : 0);
	double		flops = eg->train_flops + (grp ? grp->compute_flops : 0);
	double		seconds = eg->seconds + (grp ? grp->seconds : 0);
	double		memory = eg->memory + run->n_workers * eg->workspace;
	Datum		values[EXPLAIN_COLUMNS];
	bool		nulls[EXPLAIN_COLUMNS] = {false};

	values[0] = Int32GetDatum(g + 1);
	values[1] = ObjectIdGetDatum(run->ds->packed);
	values[2] = Int64GetDatum(grp ? grp->base_id : 0);
	nulls[2] = grp == NULL;
	values[3] = Int32GetDatum(grp ? grp->depth : 0);
	nulls[3] = grp == NULL;
	values[4] = Int32GetDatum(eg->n_configs);
	values[5] = CStringGetTextDatum(grp ? pgdl_cache_action_name(grp->action) : "train");
	nulls[6] = grp == NULL || grp->action == PGDL_CACHE_RECOMPUTE;
	if (!nulls[6])
		values[6] = CStringGetTextDatum(grp->side[0].view);
	nulls[7] = nulls[6] || !run->vds || grp->side[1].view == NULL;	/* none on nodes */
	if (!nulls[7])
		values[7] = CStringGetTextDatum(grp->side[1].view);
	nulls[8] = grp == NULL || grp->staged_from < 0;
	if (!nulls[8])
		values[8] = CStringGetTextDatum(plan->groups[grp->staged_from].side[0].view);
	values[9] = Float8GetDatum(flops / 1e9);
	values[10] = Float8GetDatum(grp && grp->action != PGDL_CACHE_RECOMPUTE ? grp->bytes / 1048576.0 : 0);
	values[11] = Float8GetDatum(seconds);
	values[12] = CStringGetTextDatum(grp ? grp->reason : "configurations without a base model train on the packed table");
	values[13] = Float8GetDatum(grp ? grp->prefix_flops * examples / 1e9 : 0);
	nulls[13] = grp == NULL;
	values[14] = Float8GetDatum(memory / 1048576.0);
	values[15] = CStringGetTextDatum(prof->id ? "pgdl.server_profiles" : "pgdl.cpu_gflops");
	values[16] = JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&eg->configs, WJB_END_ARRAY, NULL)));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	totals->flops += flops;
	totals->seconds += seconds;
	totals->caches += grp ? grp->seconds : 0;
	if (grp && grp->action != PGDL_CACHE_RECOMPUTE)
		totals->bytes += grp->bytes;
}

/* The simulated workers: explain_schedule's state. */
typedef struct SimWorkers
{
	int			n;
	int			parts;
	const int16 *owner;			/* the run's: the worker that owns each partition */
	const double *pace;			/* each worker's time for a visit, against this server's (mop_plan_paces) */
	bool		distributed;
	double		budget;			/* pgdl.worker_cache_mem, in bytes: what each may hold */
	double		free_at[PGDL_MAX_WORKERS];	/* when it next looks for a model */
	double		used[PGDL_MAX_WORKERS];	/* bytes of partitions it holds */
	bool		waiting[PGDL_MAX_WORKERS];	/* found none: for a visit to end or another's move */
	bool		validated[PGDL_MAX_WORKERS];	/* read the validation set */
	bool	   *held;			/* [w * parts + p]: worker w holds partition p */
	MopCandidate *candidates;	/* the models as the rule sees them */
} SimWorkers;

/* m's next partition: its epoch's order (as fit and the workers draw it), at its visit. */
static void
sim_next_part(SimModel *m, int parts)
{
	m->part = mop_visit_partition(m->seed, m->epoch, m->visit, parts, -1);
}

/* Each worker reads the partitions it owns first, as the budget allows; free to train after. */
static void
sim_start(SimWorkers *sw, const MopRun *run, int n_models, double start, const ExplainLoads *loads,
		  const double *pace)
{
	memset(sw, 0, sizeof(*sw));
	sw->n = run->n_workers;
	sw->parts = run->ds->partitions;
	sw->owner = run->owner;
	sw->pace = pace;
	sw->distributed = run->distributed;
	sw->budget = (double) pgdl_worker_cache_mem * 1024.0;
	sw->held = palloc0(sizeof(bool) * sw->n * sw->parts);
	sw->candidates = palloc(sizeof(MopCandidate) * Max(n_models, 1));
	for (int w = 0; w < sw->n; w++)
	{
		sw->free_at[w] = start;
		for (int p = 0; p < sw->parts; p++)
			if (sw->owner[p] == w && sw->used[w] + loads->part_bytes <= sw->budget)
			{
				sw->free_at[w] += loads->read;
				sw->used[w] += loads->part_bytes;
				sw->held[w * sw->parts + p] = true;
			}
	}
}

/* The next worker free; of two free at once, one that is not waiting for another's move. */
static int
sim_next_worker(const SimWorkers *sw)
{
	int			w = 0;

	for (int v = 1; v < sw->n; v++)
		if (sw->free_at[v] < sw->free_at[w] || (sw->free_at[v] == sw->free_at[w] && sw->waiting[w] && !sw->waiting[v]))
			w = v;
	return w;
}

/*
 * The model worker w takes at time t, by the workers' own rule: a model is
 * takeable once its visit in progress has ended, and a worker is busy while
 * its visit runs (one that waits is not).
 */
static int
sim_pick(SimWorkers *sw, const SimModel *sim, int n, int epochs, int w, double t)
{
	bool		busy[PGDL_MAX_WORKERS];

	for (int v = 0; v < sw->n; v++)
		busy[v] = !(sw->waiting[v] || sw->free_at[v] <= t);
	for (int i = 0; i < n; i++)
	{
		const SimModel *m = &sim[i];
		MopCandidate *c = &sw->candidates[i];

		c->takeable = !(m->done || m->ready > t);
		c->evaluate = m->evaluate;
		if (c->takeable)
		{
			c->owner = m->evaluate ? -1 : sw->owner[m->part];
			c->left = m->per_visit * ((epochs - m->epoch) * sw->parts - m->visit);
			c->replica_here = false;	/* the simulation knows no replicas */
		}
	}
	return mop_pick_model(sw->candidates, n, w, busy, sw->distributed);
}

/* Worker w, free at t, found no model: false if no other worker will ever move. */
static bool
sim_wait(SimWorkers *sw, int w, double t)
{
	double		next = get_float8_infinity();

	/* until a visit ends, or another worker free now takes a model */
	for (int v = 0; v < sw->n; v++)
		if (v != w && !sw->waiting[v] && sw->free_at[v] >= t)
			next = Min(next, sw->free_at[v]);
	if (isinf(next))
		return false;
	sw->waiting[w] = true;
	sw->free_at[w] = next;
	return true;
}

/* m's epoch ends: its checkpoint, and its validation (the worker's first reads the set); on to its next epoch. */
static double
sim_end_epoch(SimWorkers *sw, SimModel *m, int epochs, int w, const ExplainLoads *loads)
{
	double		d = m->epoch_cost + m->validate_cost * sw->pace[w];

	if (m->validate_cost > 0)
	{
		d += sw->validated[w] ? 0 : loads->validation;
		sw->validated[w] = true;
	}
	m->evaluate = false;
	m->visit = 0;
	if (++m->epoch >= epochs)
		m->done = true;
	return d;
}

/*
 * Worker w trains model m on its next partition: the visit's seconds, with the
 * partition's read (or attach) when w does not hold it; at the end of an epoch
 * with validation, the model waits for a worker to validate it (as a run's
 * models do, worker.c), else the checkpoint follows in the same worker; m
 * moves on to its next visit.  Or, m's validation due, w validates it.
 */
static double
sim_visit(SimWorkers *sw, SimModel *m, int epochs, int w, const ExplainLoads *loads)
{
	int			p = m->part;
	double		d;

	if (m->evaluate)
		d = sim_end_epoch(sw, m, epochs, w, loads);
	else
	{
		d = (m->visit_cost + m->per_visit) * sw->pace[w];
		if (!sw->held[w * sw->parts + p])
		{
			bool		elsewhere = false;

			for (int v = 0; v < sw->n; v++)
				elsewhere |= sw->held[v * sw->parts + p];
			/* read at this visit (or attached); held for the next as the budget allows */
			d += elsewhere ? loads->attach : loads->read;
			if (sw->used[w] + loads->part_bytes <= sw->budget)
			{
				sw->used[w] += loads->part_bytes;
				sw->held[w * sw->parts + p] = true;
			}
		}
		if (++m->visit == sw->parts)
		{
			if (m->validate_cost > 0)
				m->evaluate = true;
			else
				d += sim_end_epoch(sw, m, epochs, w, loads);
		}
	}
	if (!m->done && !m->evaluate)
		sim_next_part(m, sw->parts);
	return d;
}

/*
 * The run's training as its workers would schedule it: each worker loads the
 * partitions it owns, then takes models by the workers' rule (schedule.c's
 * mop_pick_model: its own partitions' first, then a model's evaluation at the
 * end of its epoch, else one whose partition's owner is busy, read there or
 * attached from the worker that holds it, once as the budget allows; the most
 * work left first), waiting for a visit to end or another worker to take a
 * model when there is none.  Returns when the last model finishes, or -1 when
 * the run is too long to simulate.  The models' partition orders are those of
 * the run, so that, with the same seed, they all start (and end) an epoch on
 * the same partition.
 */
static double
explain_schedule(const MopRun *run, SimModel *sim, int n, double start, const ExplainLoads *loads,
				 const double *pace)
{
	SimWorkers	sw;
	double		end = start;
	int			left = 0;
	int64		steps = 0;

	for (int i = 0; i < n; i++)
		left += !sim[i].done;
	if ((double) left * run->epochs * run->ds->partitions > 100000)
		return -1;
	for (int i = 0; i < n; i++)
		if (!sim[i].done)
			sim_next_part(&sim[i], run->ds->partitions);
	sim_start(&sw, run, n, start, loads, pace);
	while (left > 0 && steps++ < 10 * 100000)
	{
		int			w = sim_next_worker(&sw);
		double		t = sw.free_at[w];
		int			best = sim_pick(&sw, sim, n, run->epochs, w, t);
		double		d;

		if (best < 0)
		{
			if (!sim_wait(&sw, w, t))
				break;
			continue;
		}
		sw.waiting[w] = false;
		d = sim_visit(&sw, &sim[best], run->epochs, w, loads);
		left -= sim[best].done;
		sim[best].ready = sw.free_at[w] = t + d;
		end = Max(end, t + d);
		/* the others may now take models of w's partitions */
		for (int v = 0; v < sw.n; v++)
			if (sw.waiting[v])
				sw.free_at[v] = t;
	}
	return left > 0 ? -1 : end;
}

/*
 * The run's wall time: the leader's setup, the workers' start, their schedule,
 * and the leader storing the models.  Without a profile: the training alone,
 * at the slowest worker's pace.
 */
static double
explain_total_seconds(const MopRun *run, const ExplainTotals *totals, const PgdlProfile *prof, double data,
					  const double *pace)
{
	double		start = totals->setup + pgdl_profile_worker_start_seconds(prof, run->n_workers);
	double		vds = run->vds ? (double) run->vds->n_rows_hint * (run->vds->n_features + run->vds->n_targets) : 0;
	double		slowest = 1;
	ExplainLoads loads;
	double		seconds;

	for (int w = 0; w < run->n_workers; w++)
		slowest = Max(slowest, pace[w]);
	if (prof->id == 0)
		return totals->seconds * slowest;
	loads.part_bytes = data / run->ds->partitions;
	loads.read = pgdl_profile_worker_read_seconds(prof, loads.part_bytes / sizeof(float));
	/* another worker's copy (shared_scan.c) costs the first touch of its pages, nothing else */
	loads.attach = pgdl_shared_scan_allowed(run->ds) ? pgdl_profile_fault_seconds(prof, loads.part_bytes) : loads.read;
	loads.validation = pgdl_profile_worker_read_seconds(prof, vds);
	seconds = explain_schedule(run, totals->sim, totals->n_sim, start, &loads, pace);
	/* not simulated (too long): workers read their partitions once, the models' own work shared */
	if (seconds < 0)
		seconds = Max(totals->seconds, totals->longest) * slowest + start +
			pgdl_profile_worker_read_seconds(prof, data / sizeof(float) / run->n_workers) + totals->models;
	else
		seconds += totals->caches;
	return seconds + totals->store;
}

static void
explain_total(ReturnSetInfo *rsinfo, const MopRun *run, const ExplainTotals *totals, const PgdlProfile *prof)
{
	Datum		values[EXPLAIN_COLUMNS];
	bool		nulls[EXPLAIN_COLUMNS] = {true, false, true, true, false, false, true, true, true, false, false,
	false, false, true, false, false, true};
	/* the buffers each worker keeps, up to pgdl.worker_cache_mem */
	double		data = (double) run->ds->n_rows_hint * (run->ds->n_features + run->ds->n_targets) * sizeof(float);
	double		buffers = Min(data / run->n_workers, (double) pgdl_worker_cache_mem * 1024.0) * run->n_workers;
	const double *pace = run->worker_pace;
	char	   *note = psprintf("%d workers; %.1f MB of pgdl.feature_cache_budget's %.1f MB in use before the run%s",
								run->n_workers, run->plan->used_bytes / 1048576.0,
								run->plan->budget_bytes / 1048576.0, run->pace_note);

	values[1] = ObjectIdGetDatum(run->ds->packed);
	values[4] = Int32GetDatum(list_length(run->configs));
	values[5] = CStringGetTextDatum("total");
	values[9] = Float8GetDatum(totals->flops / 1e9);
	values[10] = Float8GetDatum(totals->bytes / 1048576.0);
	values[11] = Float8GetDatum(explain_total_seconds(run, totals, prof, data, pace));
	values[12] = CStringGetTextDatum(note);
	values[14] = Float8GetDatum((totals->models_bytes + run->n_workers * totals->workspace + buffers) / 1048576.0);
	values[15] = CStringGetTextDatum(prof->id ? "pgdl.server_profiles" : "pgdl.cpu_gflops");
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * A configuration's training over the run, predicted: with this server's
 * profile, its epochs (training, and validation at the forward pass's share of
 * a step) at one worker's pace among the run's workers; without one, its
 * training FLOPs at pgdl.cpu_gflops.  Into its group's row.
 */
static void
explain_config(const MopRun *run, const MopConfig *c, const PgdlProfile *prof, ExplainGroup *eg,
			   ExplainTotals *totals)
{
	const NnSpec *spec = c->transfer ? &c->transfer->rest->spec : c->spec;
	double		flops = c->cost * run->ds->n_rows_hint * run->epochs;
	double		ips = pgdl_predict_images_per_second(prof, spec, &c->config.optim, c->config.batch_size,
													 run->n_workers, false);
	double		seconds,
				validate = 0,
				blob_params;
	NnMemory	mem;
	NnCost		cost;
	NnError		err;

	if (!nn_spec_memory(spec, &c->config.optim, c->config.batch_size, &mem, &err) ||
		!nn_spec_cost(spec, NULL, &cost, &err))
		pgdl_report_nn_error("model spec", &err);
	if (prof->id)
	{
		/* an epoch's validation, at the forward pass's share of a step */
		validate = run->vds ? (double) run->vds->n_rows_hint * cost.flops_forward / Max(cost.flops_train, 1) / ips : 0;
		seconds = run->epochs * (run->ds->n_rows_hint / ips + validate);
	}
	else
		seconds = flops / (pgdl_cpu_gflops * 1e9);
	eg->n_configs++;
	eg->train_flops += flops;
	eg->seconds += seconds / run->n_workers;
	eg->memory += mem.model + mem.optim;
	eg->workspace = Max(eg->workspace, mem.workspace);
	totals->longest = Max(totals->longest, seconds);
	totals->models += pgdl_profile_model_seconds(prof, (double) cost.params, run->epochs, run->ds->partitions,
												 run->n_workers);
	/* a row of the model's blob: its weights and optimizer state, as the probe's model (with momentum) has two */
	blob_params = ((double) cost.params + (double) mem.optim / sizeof(float)) / 2;
	totals->store += pgdl_profile_checkpoint_seconds(prof, blob_params);
	{
		SimModel   *m = &totals->sim[totals->n_sim++];

		m->seed = (uint64) c->config.seed;
		m->epoch = c->start_epoch;
		m->done = c->stopped || c->start_epoch >= run->epochs || (c->has_metrics && c->last.diverged);
		m->per_visit = (seconds / run->epochs - validate) / run->ds->partitions;
		m->validate_cost = validate;
		m->evaluate = false;
		m->visit_cost = pgdl_profile_visit_seconds(prof, (double) cost.params);
		/* a checkpoint serializes the model: half a visit */
		m->epoch_cost = pgdl_profile_checkpoint_seconds(prof, blob_params) + m->visit_cost / 2;
	}
	totals->models_bytes += mem.model + mem.optim;
	totals->workspace = Max(totals->workspace, mem.workspace);

	pushJsonbValue(&eg->configs, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_int(&eg->configs, "config", c->config_id);
	if (c->arch_name)
		pgdl_jsonb_put_string(&eg->configs, "architecture", c->arch_name);
	pgdl_jsonb_put_int(&eg->configs, "batch_size", c->config.batch_size);
	pgdl_jsonb_put_float8(&eg->configs, "images_per_second", ips);
	pgdl_jsonb_put_float8(&eg->configs, "seconds", seconds);
	pgdl_jsonb_put_int(&eg->configs, "memory_bytes", mem.total);
	pushJsonbValue(&eg->configs, WJB_END_OBJECT, NULL);
}

/*
 * explain_fit_multiple(the arguments of fit_multiple): what fit_multiple would
 * do, without doing it: a row per group of configurations that share a frozen
 * prefix (cache to reuse, build, refresh or rebuild, or recompute), a row for
 * the configurations trained from scratch, and a total, with predicted compute,
 * storage, time and memory (pgdl.estimate's prediction, per configuration).
 */
PG_FUNCTION_INFO_V1(pgdl_explain_fit_multiple);
Datum
pgdl_explain_fit_multiple(PG_FUNCTION_ARGS)
{
	TimestampTz begun = GetCurrentTimestamp();
	MopRun	   *run = mop_setup_run(fcinfo);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			n_groups = run->plan->n_groups;
	ExplainGroup *groups = palloc0(sizeof(ExplainGroup) * (n_groups + 1));
	PgdlProfile *prof = palloc(sizeof(PgdlProfile));
	ExplainTotals totals = {0};
	ListCell   *lc;
	long		secs;
	int			usecs;

	/* the run's leader does this first (its configurations read, its starting models made): as long */
	TimestampDifference(begun, GetCurrentTimestamp(), &secs, &usecs);
	totals.setup = secs + usecs / 1e6;

	InitMaterializedSRF(fcinfo, 0);
	pgdl_profile_load(prof);
	totals.sim = palloc0(sizeof(SimModel) * list_length(run->configs));
	for (int g = 0; g <= n_groups; g++)
		pushJsonbValue(&groups[g].configs, WJB_BEGIN_ARRAY, NULL);
	/* training the trainable layers: every configuration, every epoch, spread over the workers */
	foreach(lc, run->configs)
	{
		MopConfig  *c = lfirst(lc);

		CHECK_FOR_INTERRUPTS();
		explain_config(run, c, prof, &groups[c->source], &totals);
	}
	for (int g = -1; g < n_groups; g++)
		if (g >= 0 || groups[0].n_configs > 0)
			explain_group(rsinfo, run, g, &groups[g + 1], prof, &totals);
	explain_total(rsinfo, run, &totals, prof);
	return (Datum) 0;
}
