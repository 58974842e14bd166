/*
 * dsm.c -- a run's DSM segment, as the leader lays it out for its workers
 * (hopper/hopper.h): a table of contents (shm_toc, as test_shm_mq does) of
 * the shared state (MopShared, a slot per model), the blob area (each model
 * serialized, then each frozen prefix), the feature cache tasks' SQL and the
 * run's pgdl.runs.config, which worker 0 records.
 *
 * Invariants:
 * - the leader fills the segment before it registers a worker; once the
 *   workers go, a model's slot changes only under the mutex, or (its blob) in
 *   the hands of the one worker that holds it busy;
 * - a model's blob keeps its offset and length for the whole run: a model's
 *   serialized size does not change as it trains (worker.c checks);
 * - each model's bracket, and asha's order, follow from the configurations
 *   alone (the first one's seed, the trainable layers' FLOPs), so they are the
 *   same whatever the number of workers;
 * - fused units (pgdl.fuse_models) change who trains what together, never a
 *   model's bytes: a run's models are the same with the setting on or off.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/shm_toc.h"
#include "storage/spin.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "plan/plan.h"
#include "hopper/hopper.h"
#include "hopper/leader.h"

/* The segment: shared state for n models, blob_len bytes of blobs, plan_len of task SQL, the run's config. */
static void
create_segment(int n_models, Size blob_len, Size plan_len, Jsonb *run_config, MopSegment *out)
{
	shm_toc_estimator e;
	Size		size;
	shm_toc    *toc;
	Jsonb	   *config_copy;

	shm_toc_initialize_estimator(&e);
	shm_toc_estimate_chunk(&e, MOP_SHARED_SIZE(n_models));
	shm_toc_estimate_chunk(&e, blob_len);
	shm_toc_estimate_chunk(&e, plan_len);
	shm_toc_estimate_chunk(&e, VARSIZE(run_config));
	shm_toc_estimate_keys(&e, 4);
	size = shm_toc_estimate(&e);
	out->seg = dsm_create(size, 0);
	toc = shm_toc_create(MOP_MAGIC, dsm_segment_address(out->seg), size);
	out->shared = shm_toc_allocate(toc, MOP_SHARED_SIZE(n_models));
	memset(out->shared, 0, MOP_SHARED_SIZE(n_models));
	out->blobs = shm_toc_allocate(toc, blob_len);
	out->plan_sql = shm_toc_allocate(toc, plan_len);
	config_copy = shm_toc_allocate(toc, VARSIZE(run_config));
	memcpy(config_copy, run_config, VARSIZE(run_config));
	shm_toc_insert(toc, MOP_KEY_SHARED, out->shared);
	shm_toc_insert(toc, MOP_KEY_BLOBS, out->blobs);
	shm_toc_insert(toc, MOP_KEY_PLAN, out->plan_sql);
	shm_toc_insert(toc, MOP_KEY_RUN_CONFIG, config_copy);
}

static void
init_shared(MopShared *shared, const MopRun *run)
{
	ListCell   *lc;

	SpinLockInit(&shared->mutex);
	shared->magic = MOP_MAGIC;
	pgdl_caller_capture(&shared->caller);
	shared->dataset_id = run->ds->id;
	shared->validation_id = run->vds ? run->vds->id : 0;
	shared->run_id = run->run_id;
	shared->n_models = list_length(run->configs);
	shared->n_partitions = run->ds->partitions;
	shared->epochs = run->epochs;
	shared->eta = run->eta;
	shared->strategy = run->strat;
	shared->rank_by = run->rank_by;
	shared->cache_bytes = (int64) pgdl_worker_cache_mem * 1024;
	shared->max_model_memory = pgdl_max_model_memory;
	strlcpy(shared->cpu_isa, pgdl_cpu_isa_setting_name(), sizeof(shared->cpu_isa));
	shared->deadline_multiple = pgdl_node_deadline_multiple;
	shared->deadline_floor = pgdl_node_deadline_floor;
	shared->time_limit_end = run->time_limit_end;
	shared->leader = MyProc;
	shared->leader_pid = MyProcPid;
	shared->failed_worker = -1;
	shared->distributed = run->distributed;
	shared->folds = run->folds;
	memcpy(shared->owner, run->owner, sizeof(shared->owner));
	foreach(lc, run->down)
		if (shared->n_lost < MOP_MAX_LOST)
			shared->lost[shared->n_lost++] = lfirst_oid(lc);
	for (int w = 0; w < run->n_workers; w++)
	{
		shared->workers[w].server = run->worker_server[w];
		shared->workers[w].device = run->worker_device[w];
		shared->workers[w].pace = run->worker_pace[w];
	}
}

/* The bytes of a task's texts in the plan area. */
static Size
task_len(const PgdlCacheTask *task)
{
	return strlen(task->before) + strlen(task->definition) + strlen(task->sql) + 3;
}

/* A text of a task into the plan area at *off; its offset. */
static Size
copy_text(char *plan_sql, Size *off, const char *text)
{
	Size		at = *off;
	Size		len = strlen(text) + 1;

	memcpy(plan_sql + at, text, len);
	*off += len;
	return at;
}

/* The feature cache tasks, their SQL one after another in the plan area. */
static void
copy_tasks(MopShared *shared, char *plan_sql, const PgdlCachePlan *plan)
{
	Size		off = 0;
	ListCell   *lc;

	if (list_length(plan->tasks) > MOP_MAX_TASKS)
		elog(ERROR, "too many feature cache tasks");
	foreach(lc, plan->tasks)
	{
		PgdlCacheTask *task = lfirst(lc);
		MopTask    *t = &shared->tasks[shared->n_tasks++];

		strlcpy(t->relname, task->relname, sizeof(t->relname));
		t->before_offset = copy_text(plan_sql, &off, task->before);
		t->definition_offset = copy_text(plan_sql, &off, task->definition);
		t->sql_offset = copy_text(plan_sql, &off, task->sql);
		t->depends = task->depends;
		t->state = MOP_TASK_PENDING;
	}
}

/* Each configuration's model slot, its starting model in the blob area; returns the bytes used. */
static Size
copy_models(MopShared *shared, char *blobs, const MopRun *run)
{
	const PgdlCachePlan *plan = run->plan;
	Size		off = 0;
	ListCell   *lc;
	int			i = 0;
	PgdlProfile *prof = palloc(sizeof(PgdlProfile));

	pgdl_profile_load(prof);
	foreach(lc, run->configs)
	{
		MopConfig  *c = lfirst(lc);
		MopModel   *m = &shared->models[i++];

		/* what pgdl.run_metrics shows beside the measured seconds */
		m->predicted_seconds = pgdl_predict_images_per_second(prof, c->transfer ? &c->transfer->rest->spec : c->spec,
															  &c->config.optim, c->config.batch_size, run->n_workers, false);
		m->predicted_seconds = run->ds->n_rows_hint / m->predicted_seconds;
		m->config_id = c->config_id;
		m->config = c->config;
		m->source = c->source;
		m->holdout = c->holdout;
		m->cost = c->cost;
		/* a recomputed prefix is part of every visit's work: the schedule counts it */
		if (c->source > 0 && plan->groups[c->source - 1].action == PGDL_CACHE_RECOMPUTE)
			m->cost += plan->groups[c->source - 1].prefix_flops;
		m->epoch = c->start_epoch;
		if (c->has_metrics && c->last.diverged)
			m->state = MOP_DIVERGED;
		else
			m->state = c->stopped ? MOP_STOPPED : (c->start_epoch >= run->epochs ? MOP_DONE : MOP_IDLE);
		if (c->has_metrics)
			m->last = c->last;
		m->patience = c->patience;
		m->blob_offset = off;
		m->blob_len = VARSIZE_ANY_EXHDR(c->start);
		memcpy(blobs + m->blob_offset, VARDATA_ANY(c->start), m->blob_len);
		off += MAXALIGN(m->blob_len);
	}
	return off;
}

/*
 * Configurations that share the network, batch size, seed (hence visit order
 * and shuffling), source, held-out partition and device train as one fused
 * unit (pgdl.fuse_models; not on a cluster's nodes, which train a model per
 * visit).  A unit has at most ceil(models / workers) members, so that there are
 * at least as many units to hop as workers.  The bytes do not depend on it.
 */
static bool
fusable(const MopConfig *a, const MopConfig *b)
{
	return a->config.seed == b->config.seed && a->config.batch_size == b->config.batch_size &&
		a->source == b->source && a->holdout == b->holdout && a->config.device == b->config.device &&
		DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(a->spec_json), JsonbPGetDatum(b->spec_json)));
}

static void
assign_fused_units(MopShared *shared, const MopRun *run)
{
	int			n = shared->n_models;
	int			cap = (n + Max(run->n_workers, 1) - 1) / Max(run->n_workers, 1);
	MopConfig **c = palloc(sizeof(MopConfig *) * n);
	ListCell   *lc;
	int			i = 0;

	foreach(lc, run->configs)
		c[i++] = lfirst(lc);
	for (i = 0; i < n; i++)
		shared->models[i].fuse_unit = -1;
	if (!pgdl_fuse_models || run->distributed)
		return;
	for (i = 0; i < n; i++)
	{
		int32		unit = i;
		int			members = 1;

		if (shared->models[i].fuse_unit >= 0)
			continue;
		shared->models[i].fuse_unit = i;
		for (int j = i + 1; j < n; j++)
		{
			if (shared->models[j].fuse_unit >= 0 || !fusable(c[i], c[j]))
				continue;
			if (members == cap)
			{
				unit = j;		/* the next unit of the same kind */
				members = 0;
			}
			shared->models[j].fuse_unit = unit;
			members++;
		}
	}
}

/* Source 0: the packed tables as they are; then one per frozen prefix, its blob after the models'. */
static void
copy_sources(MopShared *shared, char *blobs, Size off, const MopRun *run, bytea **prefixes)
{
	const PgdlCachePlan *plan = run->plan;

	shared->n_sources = plan->n_groups + 1;
	shared->sources[0].n_features = run->ds->n_features;
	for (int g = 0; g < plan->n_groups; g++)
	{
		PgdlCacheGroup *grp = &plan->groups[g];
		MopSource  *src = &shared->sources[g + 1];

		src->n_features = (int32) grp->feature_floats;
		/* a distributed run's caches are its nodes': its workers send the prefix with every visit */
		src->cached = grp->action != PGDL_CACHE_RECOMPUTE && !run->distributed;
		for (int s = 0; s < 2 && src->cached; s++)
			if (grp->side[s].view)
				strlcpy(src->view[s], grp->side[s].view, sizeof(src->view[s]));
		src->prefix_offset = off;
		src->prefix_len = VARSIZE_ANY_EXHDR(prefixes[g]);
		memcpy(blobs + src->prefix_offset, VARDATA_ANY(prefixes[g]), src->prefix_len);
		off += MAXALIGN(src->prefix_len);
	}
}

/*
 * Brackets from the first configuration's seed, asha's order from the trainable
 * layers' FLOPs (not the cache plan's, which depends on the workers): the same
 * for the same set, whatever the number of workers.
 */
static void
assign_brackets(MopShared *shared, const MopRun *run)
{
	double	   *cost = palloc(sizeof(double) * list_length(run->configs));
	ListCell   *lc;
	int			i = 0;

	foreach(lc, run->configs)
		cost[i++] = ((MopConfig *) lfirst(lc))->cost;
	mop_assign_brackets(shared, (uint64) ((MopConfig *) linitial(run->configs))->config.seed, cost);
}

/*
 * The run's segment, as the workers first see it: the shared state, each
 * model's slot with its starting model, the frozen prefixes after the models,
 * the feature cache tasks' SQL, the run's config, and each model's bracket.
 */
void
mop_segment_create(const MopRun *run, Jsonb *run_config, MopSegment *out)
{
	PgdlCachePlan *plan = run->plan;
	bytea	  **prefixes = palloc0(sizeof(bytea *) * (plan->n_groups + 1));
	Size		blob_len = 0;
	Size		plan_len = 1;
	Size		used;
	ListCell   *lc;

	foreach(lc, run->configs)
		blob_len = add_size(blob_len, MAXALIGN(VARSIZE_ANY_EXHDR(((MopConfig *) lfirst(lc))->start)));
	/* the frozen prefixes travel as blobs too: workers recompute them or join them to checkpoints */
	for (int g = 0; g < plan->n_groups; g++)
	{
		prefixes[g] = pgdl_model_serialize(plan->groups[g].prefix);
		blob_len = add_size(blob_len, MAXALIGN(VARSIZE_ANY_EXHDR(prefixes[g])));
	}
	foreach(lc, plan->tasks)
		plan_len = add_size(plan_len, task_len(lfirst(lc)));

	create_segment(list_length(run->configs), blob_len, plan_len, run_config, out);
	init_shared(out->shared, run);
	copy_tasks(out->shared, out->plan_sql, plan);
	used = copy_models(out->shared, out->blobs, run);
	copy_sources(out->shared, out->blobs, used, run, prefixes);
	assign_brackets(out->shared, run);
	assign_fused_units(out->shared, run);
}
