/*
 * federated.c -- pgdl.fit_federated: federated averaging over the nodes of a
 * distributed packed table, for data that must stay where it is.
 *
 * A site is the set of partitions one server holds (those on the coordinator
 * itself are a site too).  Each round, every site trains a copy of the model
 * on its partitions, local_epochs times, each local epoch in the seeded order
 * pgdl.fit draws for that epoch (pgdl_epoch_order of the run's seed and the
 * epoch round x local_epochs + e, keeping the site's partitions); a node runs
 * pgdl.train_partitions, one partition per call.  The coordinator then
 * averages the copies weighted by the examples each trained on (pgdl.train's
 * combine), folding the sites in the order of their first partition, or, in a
 * private run, adds their clipped updates with noise (federated_privacy.c);
 * the average starts the next round.  Only models travel.  pgdl.average_models
 * is the same average in SQL, so that a round can be checked on one server.
 *
 * The run and each round (its rows, and the model after it as a checkpoint)
 * are committed as they come by the run recorder (train/run_recorder.c), so
 * that a run that fails can go on with pgdl.resume from its last round.
 *
 * With min_sites, a site that is down when a round starts, or whose
 * connection is lost during it, is left out of that round (the average is
 * over the sites that answered, its row names the missing) and tried again in
 * the next; fewer than min_sites answering fails the run.  Without it, a site
 * down fails the run.  A site that has not answered a round by its deadline
 * (a hung node: pgdl.node_deadline_multiple times the time this server's
 * calibrated estimate predicts for its share of the round, at least
 * pgdl.node_deadline_floor) is fenced, and is then a site lost in the round.
 *
 * Invariant: the model after each round depends on the seed, the rounds before
 * and the sites that answered, never on timing: a resumed run ends with the
 * bytes of an uninterrupted one.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "plan/plan.h"
#include "train/train.h"
#include "cluster/cluster.h"
#define HERE_SITE_NAME "coordinator"	/* what pgdl.run_metrics.node says of the partitions here */
#define DEFAULT_DELTA 1e-5

typedef struct Site
{
	Oid			server;			/* invalid: the partitions here */
	const char *name;
	int32	   *parts;
	char	  **tables;			/* the node's table of each part */
	int			n_parts;
	PgdlNode   *node;			/* NULL: here, or a node that is down */
	/* this round */
	bool		missing;		/* down when it started, or lost during it */
	int32	   *order;			/* local_epochs x n_parts indexes into parts, in seeded order */
	int			sent;			/* calls sent: index into order */
	bytea	   *model;			/* the site's copy, as it came back */
	PgdlTrainState result;
} Site;

typedef struct FedRun
{
	int64		arch_id;
	char	   *arch_name;
	NnSpec	   *spec;
	PgdlTrainConfig config;
	Jsonb	   *config_json;	/* as given: its "warm_start" */
	Jsonb	   *origin;			/* a warm start's lineage, or NULL */
	int32		rounds;
	int32		local_epochs;
	int32		min_sites;		/* 0: every site, every round */
	PgdlPrivacy privacy;		/* clip 0: not private */
	PgdlDataset *ds;
	PgdlDataset *vds;
	char	   *name;
	Site	   *sites;
	int			n_sites;
	int		   *site_of;		/* each partition's site, and its index there */
	int		   *index_of;
	Size		model_len;
	int64		run_id;
	int64		resume;			/* pgdl.resume: the run; 0: a new one */
	int32		start_round;	/* rounds done before (pgdl.resume) */
	PgdlEpochMetrics last;		/* of the last round done */
	PgdlRecorder *recorder;
	int32		round;			/* the one being trained, 0-based */
	int			ready;			/* the site whose answer is read, or -1 */
} FedRun;

/* The sites of the packed table, in the order of their first partition. */
static void
find_sites(FedRun *f)
{
	bool		distributed;
	PgdlPartPlace *places = pgdl_packed_places(f->ds->packed, f->ds->partitions, &distributed);

	f->sites = palloc0(sizeof(Site) * f->ds->partitions);
	f->site_of = palloc(sizeof(int) * f->ds->partitions);
	f->index_of = palloc(sizeof(int) * f->ds->partitions);
	for (int32 p = 0; p < f->ds->partitions; p++)
	{
		Site	   *site = NULL;

		for (int s = 0; s < f->n_sites && site == NULL; s++)
			if (f->sites[s].server == places[p].server)
				site = &f->sites[s];
		if (site == NULL)
		{
			site = &f->sites[f->n_sites++];
			site->server = places[p].server;
			site->name = OidIsValid(site->server) ? GetForeignServer(site->server)->servername : HERE_SITE_NAME;
			site->parts = palloc(sizeof(int32) * f->ds->partitions);
			site->tables = palloc(sizeof(char *) * f->ds->partitions);
			site->order = palloc(sizeof(int32) * f->ds->partitions * f->local_epochs);
		}
		f->site_of[p] = site - f->sites;
		f->index_of[p] = site->n_parts;
		site->parts[site->n_parts] = p;
		site->tables[site->n_parts++] = places[p].remote;
	}
}

/* Each site's partitions in round `round`: local epoch e in pgdl.fit's order of epoch round x local_epochs + e. */
static void
order_sites(FedRun *f, int32 round)
{
	int32	   *order = palloc(sizeof(int32) * f->ds->partitions);
	int		   *filled = palloc0(sizeof(int) * f->n_sites);

	for (int32 e = 0; e < f->local_epochs; e++)
	{
		(void) pgdl_epoch_order((uint64) f->config.seed, round * f->local_epochs + e, f->ds->partitions, -1, order);
		for (int32 k = 0; k < f->ds->partitions; k++)
		{
			int			s = f->site_of[order[k]];

			f->sites[s].order[filled[s]++] = f->index_of[order[k]];
		}
	}
	pfree(order);
	pfree(filled);
}

static void
send_next(FedRun *f, Site *site)
{
	int			i = site->order[site->sent];

	pgdl_node_send_visit(site->node, VARDATA(site->model), f->model_len, NULL, 0, &f->config, site->tables[i],
						 &site->parts[i], 1, 1);
	site->sent++;
}

/* What a node's call trained, added to its site's round; true while it has calls left. */
static bool
take_result(FedRun *f, Site *site)
{
	PgdlVisit	v;

	pgdl_node_read_visit(site->node, VARDATA(site->model), f->model_len, &f->config,
						 psprintf("round %d", f->round + 1), &v);
	pfree(site->model);
	site->model = v.model;
	site->result.examples += v.examples;
	site->result.stats.loss_sum += v.stats.loss_sum;
	site->result.stats.correct += v.stats.correct;
	site->result.stats.n += v.stats.n;
	if (v.diverged)
		site->result.diverged = PGDL_DIVERGED_LOSS;
	return !v.diverged && site->sent < site->n_parts * f->local_epochs;
}

/* The partitions here, trained in this backend while the nodes train theirs, epoch by epoch in their order. */
static void
train_here(FedRun *f, Site *site)
{
	NnModel    *nn = pgdl_model_deserialize(site->model);
	int32	   *parts = palloc(sizeof(int32) * site->n_parts);

	pgdl_model_free_with(nn, CurrentMemoryContext);
	memset(&site->result, 0, sizeof(site->result));
	for (int32 e = 0; e < f->local_epochs && !site->result.diverged; e++)
	{
		PgdlTrainState *state;

		for (int k = 0; k < site->n_parts; k++)
			parts[k] = site->parts[site->order[e * site->n_parts + k]];
		state = pgdl_train_visits(nn, NULL, &f->config, f->ds, parts, site->n_parts, 1);
		site->result.examples += state->examples;
		site->result.stats.loss_sum += state->stats.loss_sum;
		site->result.stats.correct += state->stats.correct;
		site->result.stats.n += state->stats.n;
		site->result.diverged = state->diverged;
	}
	site->model = pgdl_model_serialize(nn);
}

typedef enum SiteStep
{
	STEP_CONNECT,
	STEP_SEND,
	STEP_WAIT					/* for any site's answer, then its next call */
} SiteStep;

static void
do_step(FedRun *f, Site *site, SiteStep step, PgdlNode **nodes)
{
	switch (step)
	{
		case STEP_CONNECT:
			site->node = pgdl_node_connect(site->server, false);
			pgdl_node_keep_partitions(site->node, (int64) pgdl_worker_cache_mem * 1024);
			break;
		case STEP_SEND:
			send_next(f, site);
			break;
		case STEP_WAIT:
			f->ready = pgdl_node_wait_any(nodes, f->n_sites);
			if (f->ready >= 0 && take_result(f, &f->sites[f->ready]))
				send_next(f, &f->sites[f->ready]);
			break;
	}
}

static bool
node_down(const Site *site)
{
	return site->node && (site->node->conn == NULL || PQstatus(site->node->conn) == CONNECTION_BAD);
}

/* The site a failed step lost: one that could not connect, or whose connection is gone; NULL: none. */
static Site *
lost_site(FedRun *f, Site *site, SiteStep step, const ErrorData *edata)
{
	if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED || edata->elevel > ERROR)
		return NULL;
	if (step == STEP_CONNECT)
		return ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_CONNECTION_EXCEPTION ? site : NULL;
	if (step == STEP_WAIT && f->ready >= 0)
		site = &f->sites[f->ready];
	if (site && node_down(site))
		return site;
	for (int s = 0; s < f->n_sites; s++)
		if (node_down(&f->sites[s]))
			return &f->sites[s];
	return NULL;
}

static void
drop_site(FedRun *f, Site *site, const ErrorData *edata)
{
	ereport(WARNING,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("site \"%s\" is missing from round %d of %d", site->name, f->round + 1, f->rounds),
			 errdetail_internal("%s", edata->message),
			 errhint("The round goes on without it (min_sites %d); the next round tries it again.", f->min_sites)));
	if (site->node)
	{
		site->node->busy = false;	/* nothing to cancel on a connection that is gone */
		pgdl_node_close(site->node);
	}
	site->node = NULL;
	site->missing = true;
}

/*
 * One step with a site; with min_sites, in a subtransaction, so that a site
 * that is down or lost is left out of the round rather than failing the run.
 * Returns false when a site was left out.
 */
typedef struct StepCall
{
	FedRun	   *f;
	Site	   *site;
	SiteStep	step;
	PgdlNode  **nodes;
} StepCall;

static void
do_step_call(void *arg)
{
	StepCall   *call = arg;

	do_step(call->f, call->site, call->step, call->nodes);
}

static bool
site_step(FedRun *f, Site *site, SiteStep step, PgdlNode **nodes)
{
	StepCall	call = {f, site, step, nodes};
	ErrorData  *edata;
	Site	   *lost;

	f->ready = -1;
	if (f->min_sites == 0)
	{
		do_step(f, site, step, nodes);
		return true;
	}
	edata = pgdl_call_in_subxact(do_step_call, &call);
	if (edata == NULL)
		return true;
	lost = lost_site(f, site, step, edata);
	if (lost == NULL)
		ReThrowError(edata);
	drop_site(f, lost, edata);
	return false;
}

/*
 * Seconds a site has for its round: pgdl.node_deadline_multiple times what
 * this server's calibrated estimate predicts for the site's examples (its
 * share of the packed rows, local_epochs times), as a model hopper visit's
 * deadline is (schedule.c), never below pgdl.node_deadline_floor; 0: none.
 */
#define FED_MAX_DEADLINE_S	1e7

static double
site_deadline(const FedRun *f, const Site *site)
{
	PgdlProfile *prof;
	double		ips;
	double		seconds;

	if (pgdl_node_deadline_multiple <= 0)
		return 0;
	prof = palloc(sizeof(PgdlProfile));
	pgdl_profile_load(prof);
	ips = pgdl_predict_images_per_second(prof, f->spec, &f->config.optim, f->config.batch_size, 1, false);
	seconds = (double) f->ds->n_rows_hint * site->n_parts / Max(f->ds->partitions, 1) * f->local_epochs;
	seconds = ips > 0 && isfinite(ips) ? pgdl_node_deadline_multiple * seconds / ips : 0;
	if (!isfinite(seconds) || seconds > FED_MAX_DEADLINE_S)
		seconds = FED_MAX_DEADLINE_S;
	pfree(prof);
	return Max(seconds, pgdl_node_deadline_floor);
}

/* Every site that is up trains its copy of `global`; returns when all are back, left out or fenced. */
static void
train_sites(FedRun *f, const bytea *global)
{
	PgdlNode  **nodes = palloc0(sizeof(PgdlNode *) * f->n_sites);

	order_sites(f, f->round);
	for (int s = 0; s < f->n_sites; s++)
	{
		Site	   *site = &f->sites[s];

		memset(&site->result, 0, sizeof(site->result));
		site->sent = 0;
		site->missing = false;
		site->model = (bytea *) pg_detoast_datum_copy((struct varlena *) global);
		/* a site missing from the round before is tried again */
		if (OidIsValid(site->server) && site->node == NULL)
			(void) site_step(f, site, STEP_CONNECT, NULL);
		if (site->node)
		{
			double		deadline = site_deadline(f, site);

			pgdl_node_set_deadline(site->node, deadline > 0 ?
								   TimestampTzPlusMilliseconds(GetCurrentTimestamp(), (int64) (deadline * 1000)) : 0);
			(void) site_step(f, site, STEP_SEND, NULL);
		}
	}
	for (int s = 0; s < f->n_sites; s++)
		if (!OidIsValid(f->sites[s].server))
			train_here(f, &f->sites[s]);
	for (;;)
	{
		for (int s = 0; s < f->n_sites; s++)
			nodes[s] = f->sites[s].node;
		if (site_step(f, NULL, STEP_WAIT, nodes) && f->ready < 0)
			break;
	}
	/* the round's deadline is over: what follows on a node has none */
	for (int s = 0; s < f->n_sites; s++)
		if (f->sites[s].node)
			pgdl_node_set_deadline(f->sites[s].node, 0);
}

/* The sites that answered: their copies averaged, weighted by their examples, in site order (pgdl.train's combine). */
static NnModel *
average_sites(FedRun *f, const bytea *global, PgdlTrainState *total)
{
	NnModel   **models = palloc(sizeof(NnModel *) * f->n_sites);
	int			n = 0;

	memset(total, 0, sizeof(*total));
	for (int s = 0; s < f->n_sites; s++)
	{
		PgdlTrainState site = f->sites[s].result;

		if (f->sites[s].missing)
			continue;
		site.model = pgdl_model_deserialize(f->sites[s].model);
		pgdl_model_free_with(site.model, CurrentMemoryContext);
		models[n] = site.model;
		if (n++ == 0)
			*total = site;
		else
			pgdl_train_average(total, &site);
		if (site.diverged)
			total->diverged = site.diverged;
	}
	if (f->privacy.clip > 0)
	{
		NnModel    *model = pgdl_model_deserialize((bytea *) global);

		pgdl_model_free_with(model, CurrentMemoryContext);
		pgdl_private_average(model, models, n, &f->privacy, (uint64) f->config.seed, f->round);
		total->model = model;
	}
	return total->model;
}

static void
site_metrics(const FedRun *f, const PgdlTrainState *r, int32 round, double seconds, PgdlEpochMetrics *m)
{
	memset(m, 0, sizeof(*m));
	m->epoch = round + 1;
	m->classification = f->ds->classification;
	m->diverged = r->diverged != PGDL_HEALTHY;
	m->train_loss = r->stats.n ? r->stats.loss_sum / r->stats.n : get_float8_nan();
	m->train_accuracy = r->stats.n ? (double) r->stats.correct / r->stats.n : get_float8_nan();
	m->seconds = seconds;
	m->images_per_second = seconds > 0 ? r->stats.n / seconds : 0;
}

/* A round's pgdl.run_metrics.federation: the sites that answered and those missing; a private run's privacy spent. */
static Jsonb *
federation_jsonb(const FedRun *f, int32 round)
{
	JsonbParseState *state = NULL;
	JsonbValue	v = {.type = jbvString};

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int missing = 0; missing <= 1; missing++)
	{
		pgdl_jsonb_put_key(&state, missing ? "missing" : "sites");
		(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
		for (int s = 0; s < f->n_sites; s++)
			if (f->sites[s].missing == (missing == 1))
			{
				v.val.string.val = (char *) f->sites[s].name;
				v.val.string.len = strlen(f->sites[s].name);
				(void) pushJsonbValue(&state, WJB_ELEM, &v);
			}
		(void) pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	}
	if (f->privacy.clip > 0)
	{
		double		mu,
					epsilon;

		pgdl_privacy_spent(&f->privacy, round + 1, &mu, &epsilon);
		pgdl_jsonb_put_float8(&state, "clip", f->privacy.clip);
		pgdl_jsonb_put_float8(&state, "noise_multiplier", f->privacy.noise_multiplier);
		pgdl_jsonb_put_float8(&state, "mu", mu);
		pgdl_jsonb_put_float8(&state, "delta", f->privacy.delta);
		pgdl_jsonb_put_float8(&state, "epsilon", epsilon);
	}
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/* Fewer sites than min_sites answered: the run fails, to be resumed once they are back. */
static void
check_quorum(const FedRun *f)
{
	StringInfoData missing;
	int			present = 0;

	initStringInfo(&missing);
	for (int s = 0; s < f->n_sites; s++)
	{
		if (!f->sites[s].missing)
			present++;
		else
			appendStringInfo(&missing, "%s\"%s\"", missing.len ? ", " : "", f->sites[s].name);
	}
	if (present < f->min_sites)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("round %d of %d had %d of %d sites, fewer than min_sites %d", f->round + 1, f->rounds,
						present, f->n_sites, f->min_sites),
				 errdetail("Missing: %s.", missing.data)));
}

/* The sites' rows of a round (a private run records none: they are of the sites' data, unnoised). */
static PgdlRoundSite *
round_sites(const FedRun *f, double seconds, int32 *n)
{
	PgdlRoundSite *rows = palloc0(sizeof(PgdlRoundSite) * f->n_sites);

	*n = 0;
	for (int s = 0; s < f->n_sites && f->privacy.clip == 0; s++)
		if (!f->sites[s].missing)
		{
			strlcpy(rows[*n].node, f->sites[s].name, NAMEDATALEN);
			site_metrics(f, &f->sites[s].result, f->round, seconds, &rows[(*n)++].metrics);
		}
	return rows;
}

/* Round `round`: the sites train, the average is the new global model; the round committed with its checkpoint. */
static bytea *
run_round(FedRun *f, const bytea *global, int32 round, PgdlEpochMetrics *m)
{
	PgdlTrainState total;
	NnModel    *model;
	NnBatchStats vstats = {0};
	instr_time	start,
				elapsed;
	PgdlRound	rec = {0};

	INSTR_TIME_SET_CURRENT(start);
	f->round = round;
	train_sites(f, global);
	check_quorum(f);
	model = average_sites(f, global, &total);
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	if (f->vds && !total.diverged)
		pgdl_evaluate_packed(model, f->vds, &vstats);
	site_metrics(f, &total, round, INSTR_TIME_GET_DOUBLE(elapsed), m);
	if (f->privacy.clip > 0)
		m->train_loss = m->train_accuracy = get_float8_nan();
	m->has_validation = vstats.n > 0;
	m->validation_loss = vstats.n ? vstats.loss_sum / vstats.n : 0;
	m->validation_accuracy = vstats.n ? (double) vstats.correct / vstats.n : 0;
	rec.metrics = m;
	rec.sites = round_sites(f, INSTR_TIME_GET_DOUBLE(elapsed), &rec.n_sites);
	rec.federation = federation_jsonb(f, round);
	rec.checkpoint = pgdl_model_serialize(model);
	pgdl_recorder_round(f->recorder, f->run_id, &rec);
	return rec.checkpoint;
}

/* The model to start from: the architecture initialized from the seed, with its optimizer. */
static bytea *
first_model(FedRun *f)
{
	NnError		err;
	NnModel    *model = pgdl_model_start(f->spec, (uint64) f->config.seed, f->config_json, &f->origin);
	NnOptim		optim = f->config.optim;

	pgdl_model_free_with(model, CurrentMemoryContext);
	/* the blob keeps the optimizer, not the precision: the sites train in it (and refuse it where it cannot run) */
	optim.bf16 = false;
	if (!nn_model_set_optim(model, &optim, &err))
		pgdl_report_nn_error("training configuration", &err);
	f->model_len = nn_model_serialized_size(model);
	return pgdl_model_serialize(model);
}

/* The keys of pgdl.runs.config that are the run's, not the training configuration's. */
static const char *const run_keys[] = {"local_epochs", "min_sites", "clip", "noise_multiplier", "delta", "name"};

/* pgdl.runs.config: the training configuration, with local_epochs and the run's other settings given. */
static Jsonb *
run_config(const FedRun *f)
{
	JsonbParseState *state = NULL;
	Jsonb	   *rounds;

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_int(&state, "local_epochs", f->local_epochs);
	if (f->min_sites > 0)
		pgdl_jsonb_put_int(&state, "min_sites", f->min_sites);
	if (f->privacy.clip > 0)
	{
		pgdl_jsonb_put_float8(&state, "clip", f->privacy.clip);
		pgdl_jsonb_put_float8(&state, "noise_multiplier", f->privacy.noise_multiplier);
		pgdl_jsonb_put_float8(&state, "delta", f->privacy.delta);
	}
	if (f->name)
		pgdl_jsonb_put_string(&state, "name", f->name);
	rounds = JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
	return DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(pgdl_config_with_warm_start(pgdl_config_to_jsonb(&f->config), f->config_json)),
											  JsonbPGetDatum(rounds)));
}

/* Connect to each node: a node that is down fails the call before the run starts, unless min_sites. */
static void
connect_sites(FedRun *f)
{
	for (int s = 0; s < f->n_sites; s++)
		if (OidIsValid(f->sites[s].server))
			(void) site_step(f, &f->sites[s], STEP_CONNECT, NULL);
	for (int s = 0; s < f->n_sites; s++)
		f->sites[s].missing = false;	/* tried again when the first round starts */
}

static void
round_context(void *arg)
{
	const FedRun *f = arg;

	errcontext("round %d of pgdl.fit_federated run " INT64_FORMAT " (continue it with pgdl.resume)",
			   f->round + 1, f->run_id);
}

/* The run recorded (or marked running again) where other sessions see it as it trains: run_recorder.c. */
static void
begin_run(FedRun *f)
{
	PgdlRunStart start = {0};

	start.kind = "fit_federated";
	start.resume = f->resume;
	start.dataset = f->ds->id;
	start.validation = f->vds ? f->vds->id : 0;
	start.architecture = f->arch_id;
	start.config = run_config(f);
	start.epochs = f->rounds;
	f->recorder = pgdl_recorder_start(&start, &f->run_id, &(int64) {0});
}

/* The rounds from start_round on, each committed as it ends; the model stored, its id returned. */
static int64
train_rounds(FedRun *f, bytea *global, PgdlEpochMetrics *m)
{
	MemoryContext round_cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl federated round",
													ALLOCSET_DEFAULT_SIZES);
	MemoryContext old;

	for (int32 r = f->start_round; r < f->rounds; r++)
	{
		bytea	   *next;

		CHECK_FOR_INTERRUPTS();
		old = MemoryContextSwitchTo(round_cxt);
		next = run_round(f, global, r, m);
		MemoryContextSwitchTo(old);
		global = (bytea *) pg_detoast_datum_copy((struct varlena *) next);
		MemoryContextReset(round_cxt);
		if (m->diverged)
		{
			ereport(WARNING,
					(errcode(ERRCODE_FLOATING_POINT_EXCEPTION),
					 errmsg("training diverged in round %d of %d", m->epoch, f->rounds),
					 errhint("The model is stored as it was after the round, with \"diverged\": true in its metrics. Try a lower learning rate.")));
			break;
		}
		pgdl_fit_report_epoch("round", m, f->rounds);
	}
	MemoryContextDelete(round_cxt);
	for (int s = 0; s < f->n_sites; s++)
		if (f->sites[s].node)
			pgdl_node_close(f->sites[s].node);
	f->last = *m;
	return pgdl_fit_store(f->run_id, f->name, f->arch_id, f->spec, &f->config, f->config_json, f->origin,
						  f->ds->id, global, m, 0);
}

/* A new run from first_model, or a resumed one from its last round's checkpoint (start); returns the model's id. */
static int64
fit_federated(FedRun *f, bytea *start)
{
	bytea	   *global = first_model(f);
	PgdlEpochMetrics m = f->last;
	ErrorContextCallback context = {.callback = round_context, .arg = f, .previous = error_context_stack};
	int64		model_id;

	if (start)
	{
		/* the row may have been changed since: a model of this network and optimizer (checked whole), or an error */
		pgdl_model_free_with(pgdl_model_deserialize(start), CurrentMemoryContext);
		if (VARSIZE_ANY_EXHDR(start) != f->model_len)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("the checkpoint of round %d of run " INT64_FORMAT " is not a model of its architecture and configuration",
							f->start_round, f->resume)));
		global = start;
	}
	connect_sites(f);
	begin_run(f);
	error_context_stack = &context;
	PG_TRY();
	{
		model_id = train_rounds(f, global, &m);
	}
	PG_CATCH();
	{
		error_context_stack = context.previous;
		pgdl_recorder_fail(f->recorder);
		PG_RE_THROW();
	}
	PG_END_TRY();
	error_context_stack = context.previous;
	pgdl_recorder_release(f->recorder);
	return model_id;
}

static int32
int_between(FunctionCallInfo fcinfo, int arg, const char *what, int32 max)
{
	int32		v = PG_GETARG_INT32(arg);

	if (v < 1 || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between 1 and %d, got %d", what, max, v)));
	return v;
}

/* rounds x local_epochs numbers the epochs whose seeded orders the sites follow */
static void
check_epochs(const FedRun *f)
{
	if ((int64) f->rounds * f->local_epochs > PGDL_MAX_EPOCHS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rounds times local_epochs must be at most %d, got %d x %d", PGDL_MAX_EPOCHS, f->rounds,
						f->local_epochs),
				 errdetail("Each local epoch of a round trains in the seeded order of its own epoch number.")));
}

/* min_sites (NULL: every site) and the private averaging's clip, noise_multiplier and delta, checked. */
static void
check_run_settings(FedRun *f, bool min_given, bool clip_given, bool noise_given)
{
	if (min_given && (f->min_sites < 1 || f->min_sites > f->n_sites))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_sites must be between 1 and the %d sites of the packed table, got %d", f->n_sites,
						f->min_sites)));
	if (clip_given != noise_given)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("clip and noise_multiplier must be given together"),
				 errdetail("Private averaging clips each site's update to L2 norm clip and adds noise of standard deviation noise_multiplier x clip.")));
	if (clip_given && (!(f->privacy.clip > 0) || isinf(f->privacy.clip) ||
					   !(f->privacy.noise_multiplier > 0) || isinf(f->privacy.noise_multiplier)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("clip and noise_multiplier must be positive and finite, got %g and %g", f->privacy.clip,
						f->privacy.noise_multiplier)));
	if (!(f->privacy.delta > 0 && f->privacy.delta < 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("delta must be between 0 and 1 (exclusive), got %g", f->privacy.delta)));
}

/* The network and training configuration, and the datasets: what a new run and a resumed one share. */
static void
set_up(FedRun *f, Jsonb *spec_json, Oid validation)
{
	pgdl_engine_prepare();
	f->spec = palloc(sizeof(NnSpec));
	pgdl_spec_from_jsonb(spec_json, f->spec);
	pgdl_config_from_jsonb(f->config_json, &f->config);
	pgdl_config_refuse_epochs(&f->config, "pgdl.fit_federated");
	check_epochs(f);
	pgdl_packed_refuse_weighted(f->ds, "pgdl.fit_federated");
	pgdl_check_model_fits(f->spec, f->ds);
	pgdl_check_model_memory(f->spec, &f->config.optim, f->config.batch_size, "the model");
	if (OidIsValid(validation))
	{
		f->vds = pgdl_dataset_by_packed(validation);
		pgdl_check_same_preprocessing(f->ds, f->vds, get_rel_name(validation));
	}
	if (f->name)
		pgdl_run_check_model_name(f->name);
	find_sites(f);
}

/*
 * fit_federated(source, architecture, config, rounds, local_epochs, validation, name,
 *               min_sites, clip, noise_multiplier, delta)
 */
PG_FUNCTION_INFO_V1(pgdl_fit_federated);
Datum
pgdl_fit_federated(PG_FUNCTION_ARGS)
{
	FedRun		f = {0};
	Jsonb	   *spec;

	for (int i = 0; i < 5; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("source, architecture, config, rounds and local_epochs must not be NULL")));
	spec = pgdl_architecture_by_name(text_to_cstring(PG_GETARG_TEXT_PP(1)), &f.arch_id);
	f.config_json = PG_GETARG_JSONB_P(2);
	f.rounds = int_between(fcinfo, 3, "rounds", PGDL_MAX_EPOCHS);
	f.local_epochs = int_between(fcinfo, 4, "local_epochs", PGDL_MAX_EPOCHS);
	f.ds = pgdl_dataset_by_packed(PG_GETARG_OID(0));
	f.name = PG_ARGISNULL(6) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(6));
	f.min_sites = PG_ARGISNULL(7) ? 0 : PG_GETARG_INT32(7);
	f.privacy.clip = PG_ARGISNULL(8) ? 0 : PG_GETARG_FLOAT8(8);
	f.privacy.noise_multiplier = PG_ARGISNULL(9) ? 0 : PG_GETARG_FLOAT8(9);
	f.privacy.delta = PG_ARGISNULL(10) ? DEFAULT_DELTA : PG_GETARG_FLOAT8(10);
	set_up(&f, spec, PG_ARGISNULL(5) ? InvalidOid : PG_GETARG_OID(5));
	check_run_settings(&f, !PG_ARGISNULL(7), !PG_ARGISNULL(8), !PG_ARGISNULL(9));
	PG_RETURN_INT64(fit_federated(&f, NULL));
}

static void bad_run(int64 run, const char *key, const char *expected) pg_attribute_noreturn();

static void
bad_run(int64 run, const char *key, const char *expected)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("run " INT64_FORMAT " has an invalid configuration", run),
			 errdetail("Key \"%s\" of its pgdl.runs.config must be %s.", key, expected)));
}

/* A number of the run's config; dflt when absent.  What is read back is checked by the same rules as a call's. */
static double
run_number(int64 run, Jsonb *cfg, const char *key, double dflt)
{
	JsonbValue *v = pgdl_jsonb_key(&cfg->root, key);

	if (v == NULL)
		return dflt;
	if (v->type != jbvNumeric)
		bad_run(run, key, "a number");
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
}

/* The run's settings back from its pgdl.runs.config (run_config), and the training configuration without them. */
static void
read_run_config(FedRun *f, const PgdlRunRecord *rec)
{
	Jsonb	   *cfg = rec->config;
	JsonbValue *name = pgdl_jsonb_key(&cfg->root, "name");
	double		local = run_number(rec->id, cfg, "local_epochs", 1);
	double		min_sites = run_number(rec->id, cfg, "min_sites", 0);

	if (local != rint(local) || local < 1 || local > PGDL_MAX_EPOCHS)
		bad_run(rec->id, "local_epochs", psprintf("an integer between 1 and %d", PGDL_MAX_EPOCHS));
	if (min_sites != rint(min_sites) || min_sites < 0 || min_sites > f->n_sites)
		bad_run(rec->id, "min_sites", psprintf("an integer between 1 and %d", f->n_sites));
	f->local_epochs = (int32) local;
	f->min_sites = (int32) min_sites;
	f->privacy.clip = run_number(rec->id, cfg, "clip", 0);
	f->privacy.noise_multiplier = run_number(rec->id, cfg, "noise_multiplier", 0);
	f->privacy.delta = run_number(rec->id, cfg, "delta", DEFAULT_DELTA);
	if (name && name->type != jbvString)
		bad_run(rec->id, "name", "a string");
	f->name = name ? pnstrdup(name->val.string.val, name->val.string.len) : NULL;
	for (int k = 0; k < lengthof(run_keys); k++)
		cfg = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(cfg),
												 CStringGetTextDatum(run_keys[k])));
	f->config_json = cfg;
}

/* pgdl.resume of a pgdl.fit_federated run: its settings back, checked; from its last round on. */
static int64
resume_run(FedRun *f, const PgdlRunRecord *rec)
{
	PgdlResumePoint point;
	Jsonb	   *spec;

	if (rec->dataset == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the packed table of run " INT64_FORMAT " no longer exists", rec->id)));
	spec = rec->architecture ? pgdl_architecture_by_id(rec->architecture, &f->arch_name) : NULL;
	if (spec == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the architecture of run " INT64_FORMAT " no longer exists", rec->id)));
	f->resume = rec->id;
	f->arch_id = rec->architecture;
	f->rounds = rec->epochs;
	f->ds = pgdl_dataset_by_id(rec->dataset);
	f->vds = rec->validation ? pgdl_dataset_by_id(rec->validation) : NULL;
	f->local_epochs = 1;
	find_sites(f);				/* the sites first: min_sites is checked against them */
	read_run_config(f, rec);
	f->sites = NULL;
	f->n_sites = 0;
	set_up(f, spec, InvalidOid);
	check_run_settings(f, f->min_sites > 0, f->privacy.clip != 0, f->privacy.noise_multiplier != 0);
	pgdl_run_resume_point(rec->id, 0, f->rounds, &point);
	f->start_round = point.epoch;
	f->last = point.metrics;
	f->last.epoch = point.epoch;
	f->last.classification = f->ds->classification;
	return fit_federated(f, point.weights);
}

/*
 * pgdl.resume(run [, workers [, priority [, rank_by]]]) of a fit_federated
 * run: claimed (or in progress), then read; one leaderboard row.
 */
void
pgdl_fit_federated_resume(FunctionCallInfo fcinfo, int64 run)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	FedRun		f = {0};
	Datum		values[12] = {0};
	bool		nulls[12] = {false};
	PgdlRunRecord record;
	const PgdlRunRecord *rec = &record;
	int64		model;

	pgdl_run_claim(run);
	if (!pgdl_run_read(run, &record) || strcmp(record.kind, "fit_federated") != 0)
		elog(ERROR, "pgdl: run " INT64_FORMAT " changed while it was resumed", run);
	if ((PG_NARGS() > 1 && !PG_ARGISNULL(1)) || (PG_NARGS() > 3 && !PG_ARGISNULL(3)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("run " INT64_FORMAT " is a pgdl.fit_federated run: workers and rank_by must be NULL", rec->id),
				 errdetail("Its sites train on their own servers, and it has one model.")));
	if (rec->status == PGDL_RUN_FINISHED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run " INT64_FORMAT " has finished", rec->id)));
	InitMaterializedSRF(fcinfo, 0);
	model = resume_run(&f, rec);
	values[0] = Int32GetDatum(1);
	values[1] = Int64GetDatum(model);
	nulls[2] = true;			/* no pgdl.configs row */
	values[3] = CStringGetTextDatum(f.arch_name);
	values[4] = JsonbPGetDatum(f.config_json);
	values[5] = Int32GetDatum(f.last.epoch);
	values[6] = Float8GetDatum(f.last.train_loss);
	nulls[6] = isnan(f.last.train_loss);
	values[7] = Float8GetDatum(f.last.train_accuracy);
	nulls[7] = !f.ds->classification || isnan(f.last.train_accuracy);
	values[8] = Float8GetDatum(f.last.validation_loss);
	nulls[8] = !f.last.has_validation;
	values[9] = Float8GetDatum(f.last.validation_accuracy);
	nulls[9] = !f.last.has_validation || !f.ds->classification;
	values[10] = BoolGetDatum(false);
	values[11] = BoolGetDatum(f.last.diverged);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* average_models(models, examples): FedAvg of models in array order, as fit_federated averages its sites. */
PG_FUNCTION_INFO_V1(pgdl_average_models);
Datum
pgdl_average_models(PG_FUNCTION_ARGS)
{
	Datum	   *models;
	Datum	   *examples;
	bool	   *model_nulls;
	bool	   *example_nulls;
	int			n,
				n_examples;
	PgdlTrainState total;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("models and examples must not be NULL")));
	if (ARR_NDIM(PG_GETARG_ARRAYTYPE_P(0)) > 1 || ARR_NDIM(PG_GETARG_ARRAYTYPE_P(1)) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("models and examples must be one-dimensional arrays")));
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), BYTEAOID, -1, false, TYPALIGN_INT, &models, &model_nulls, &n);
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &examples, &example_nulls, &n_examples);
	if (n < 1 || n != n_examples)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("models and examples must be non-empty arrays of the same length")));
	pgdl_engine_prepare();
	for (int i = 0; i < n; i++)
	{
		PgdlTrainState s = {0};

		CHECK_FOR_INTERRUPTS();
		if (model_nulls[i] || example_nulls[i] || DatumGetInt64(examples[i]) < 0)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("models and examples must hold no NULL, and examples no negative count")));
		s.model = pgdl_model_deserialize(DatumGetByteaPP(models[i]));
		pgdl_model_free_with(s.model, CurrentMemoryContext);
		s.examples = DatumGetInt64(examples[i]);
		if (i > 0 && pg_add_s64_overflow(total.examples, s.examples, &(int64) {0}))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("the examples add up to more than a bigint holds")));
		if (i == 0)
			total = s;
		else
			pgdl_train_average(&total, &s);
	}
	PG_RETURN_BYTEA_P(pgdl_model_serialize(total.model));
}
