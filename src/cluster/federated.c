/*
 * federated.c -- pgdl.fit_federated: federated averaging over the nodes of a
 * distributed packed table, for data that must stay where it is.
 *
 * A site is the set of partitions one server holds (those on the coordinator
 * itself are a site too).  Each round, every site trains a copy of the model
 * on its partitions, in partition order, local_epochs times (pgdl.train_partitions
 * on the node, one partition per call); the coordinator then averages the
 * copies weighted by the examples each trained on (pgdl.train's combine),
 * folding the sites in the order of their first partition, and the average
 * starts the next round.  Only models travel.  pgdl.average_models is the same
 * average in SQL, so that a round can be checked on one server.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/int.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"
#include "cluster/cluster.h"

#define HERE_SITE_NAME "coordinator"	/* what pgdl.run_metrics.node says of the partitions here */

typedef struct Site
{
	Oid			server;			/* invalid: the partitions here */
	const char *name;
	int32	   *parts;
	char	  **tables;			/* the node's table of each part */
	int			n_parts;
	PgdlNode   *node;
	/* this round */
	int			sent;			/* calls sent: epoch * n_parts + part index */
	bytea	   *model;			/* the site's copy, as it came back */
	PgdlTrainState result;
} Site;

typedef struct FedRun
{
	int64		arch_id;
	NnSpec	   *spec;
	PgdlTrainConfig config;
	Jsonb	   *config_json;	/* as given: its "warm_start" */
	Jsonb	   *origin;			/* a warm start's lineage, or NULL */
	int32		rounds;
	int32		local_epochs;
	PgdlDataset *ds;
	PgdlDataset *vds;
	char	   *name;
	Site	   *sites;
	int			n_sites;
	Size		model_len;
	int64		run_id;
	int32		round;			/* the one being trained, 0-based */
} FedRun;

/* The sites of the packed table, in the order of their first partition. */
static void
find_sites(FedRun *f)
{
	bool		distributed;
	PgdlPartPlace *places = pgdl_packed_places(f->ds->packed, f->ds->partitions, &distributed);

	f->sites = palloc0(sizeof(Site) * f->ds->partitions);
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
		}
		site->parts[site->n_parts] = p;
		site->tables[site->n_parts++] = places[p].remote;
	}
}

static void
send_next(FedRun *f, Site *site)
{
	int			i = site->sent % site->n_parts;

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

/* The partitions here, trained in this backend while the nodes train theirs. */
static void
train_here(FedRun *f, Site *site)
{
	NnModel    *nn = pgdl_model_deserialize(site->model);
	PgdlTrainState *state;

	pgdl_model_free_with(nn, CurrentMemoryContext);
	state = pgdl_train_visits(nn, NULL, &f->config, f->ds, site->parts, site->n_parts, f->local_epochs);
	site->result = *state;
	site->model = pgdl_model_serialize(nn);
}

/* Every site trains its copy of `global`; returns when all are back. */
static void
train_sites(FedRun *f, const bytea *global)
{
	PgdlNode  **nodes = palloc0(sizeof(PgdlNode *) * f->n_sites);
	int			i;

	for (int s = 0; s < f->n_sites; s++)
	{
		Site	   *site = &f->sites[s];

		memset(&site->result, 0, sizeof(site->result));
		site->sent = 0;
		site->model = (bytea *) pg_detoast_datum_copy((struct varlena *) global);
		nodes[s] = site->node;
		if (site->node)
			send_next(f, site);
	}
	for (int s = 0; s < f->n_sites; s++)
		if (f->sites[s].node == NULL)
			train_here(f, &f->sites[s]);
	while ((i = pgdl_node_wait_any(nodes, f->n_sites)) >= 0)
		if (take_result(f, &f->sites[i]))
			send_next(f, &f->sites[i]);
}

/* The sites' copies averaged, weighted by their examples, in site order: pgdl.train's combine. */
static NnModel *
average_sites(FedRun *f, PgdlTrainState *total)
{
	for (int s = 0; s < f->n_sites; s++)
	{
		PgdlTrainState site = f->sites[s].result;

		site.model = pgdl_model_deserialize(f->sites[s].model);
		pgdl_model_free_with(site.model, CurrentMemoryContext);
		if (s == 0)
			*total = site;
		else
			pgdl_train_average(total, &site);
		if (site.diverged)
			total->diverged = site.diverged;
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

/* Round `round`: the sites train, the average is the new global model; its metrics and each site's recorded. */
static bytea *
run_round(FedRun *f, const bytea *global, int32 round, PgdlEpochMetrics *m)
{
	PgdlTrainState total;
	NnModel    *model;
	NnBatchStats vstats = {0};
	instr_time	start,
				elapsed;

	INSTR_TIME_SET_CURRENT(start);
	f->round = round;
	train_sites(f, global);
	model = average_sites(f, &total);
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	for (int s = 0; s < f->n_sites; s++)
	{
		PgdlEpochMetrics sm;

		site_metrics(f, &f->sites[s].result, round, INSTR_TIME_GET_DOUBLE(elapsed), &sm);
		pgdl_run_record_node_epoch(f->run_id, 0, f->sites[s].name, &sm);
	}
	if (f->vds && !total.diverged)
		pgdl_evaluate_packed(model, f->vds, &vstats);
	site_metrics(f, &total, round, INSTR_TIME_GET_DOUBLE(elapsed), m);
	m->has_validation = vstats.n > 0;
	m->validation_loss = vstats.n ? vstats.loss_sum / vstats.n : 0;
	m->validation_accuracy = vstats.n ? (double) vstats.correct / vstats.n : 0;
	pgdl_run_record_node_epoch(f->run_id, 0, NULL, m);
	return pgdl_model_serialize(model);
}

/* The model to start from: the architecture initialized from the seed, with its optimizer. */
static bytea *
first_model(FedRun *f)
{
	NnError		err;
	NnModel    *model = pgdl_model_start(f->spec, (uint64) f->config.seed, f->config_json, &f->origin);

	pgdl_model_free_with(model, CurrentMemoryContext);
	if (!nn_model_set_optim(model, &f->config.optim, &err))
		pgdl_report_nn_error("training configuration", &err);
	f->model_len = nn_model_serialized_size(model);
	return pgdl_model_serialize(model);
}

/* pgdl.runs.config: the training configuration, and how many epochs a site trains per round. */
static Jsonb *
run_config(const FedRun *f)
{
	JsonbParseState *state = NULL;
	Jsonb	   *rounds;

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_int(&state, "local_epochs", f->local_epochs);
	rounds = JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
	return DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(pgdl_config_with_warm_start(pgdl_config_to_jsonb(&f->config), f->config_json)),
											  JsonbPGetDatum(rounds)));
}

static int64
fit_federated(FedRun *f)
{
	bytea	   *global = first_model(f);
	PgdlEpochMetrics m = {0};

	find_sites(f);
	for (int s = 0; s < f->n_sites; s++)
		if (OidIsValid(f->sites[s].server))
		{
			f->sites[s].node = pgdl_node_connect(f->sites[s].server, false);
			pgdl_node_keep_partitions(f->sites[s].node, (int64) pgdl_worker_cache_mem * 1024);
		}
	f->run_id = pgdl_run_begin("fit_federated", f->ds->id, f->vds ? f->vds->id : 0, f->arch_id,
							   run_config(f), f->rounds, 0);
	for (int32 r = 0; r < f->rounds; r++)
	{
		CHECK_FOR_INTERRUPTS();
		global = run_round(f, global, r, &m);
		if (m.diverged)
		{
			ereport(WARNING,
					(errcode(ERRCODE_FLOATING_POINT_EXCEPTION),
					 errmsg("training diverged in round %d of %d", m.epoch, f->rounds),
					 errhint("The model is stored as it was after the round, with \"diverged\": true in its metrics. Try a lower learning rate.")));
			break;
		}
		pgdl_fit_report_epoch("round", &m, f->rounds);
	}
	for (int s = 0; s < f->n_sites; s++)
		if (f->sites[s].node)
			pgdl_node_close(f->sites[s].node);
	return pgdl_fit_store(f->run_id, f->name, f->arch_id, f->spec, &f->config, f->config_json, f->origin,
						  f->ds->id, global, &m, 0);
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

/* fit_federated(source, architecture, config, rounds, local_epochs, validation, name) */
PG_FUNCTION_INFO_V1(pgdl_fit_federated);
Datum
pgdl_fit_federated(PG_FUNCTION_ARGS)
{
	FedRun		f = {0};

	for (int i = 0; i < 5; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("source, architecture, config, rounds and local_epochs must not be NULL")));
	pgdl_engine_prepare();
	f.spec = palloc(sizeof(NnSpec));
	pgdl_spec_from_jsonb(pgdl_architecture_by_name(text_to_cstring(PG_GETARG_TEXT_PP(1)), &f.arch_id), f.spec);
	f.config_json = PG_GETARG_JSONB_P(2);
	pgdl_config_from_jsonb(f.config_json, &f.config);
	pgdl_config_refuse_epochs(&f.config, "pgdl.fit_federated");
	f.rounds = int_between(fcinfo, 3, "rounds", PGDL_MAX_EPOCHS);
	f.local_epochs = int_between(fcinfo, 4, "local_epochs", PGDL_MAX_EPOCHS);
	f.ds = pgdl_dataset_by_packed(PG_GETARG_OID(0));
	pgdl_packed_refuse_weighted(f.ds, "pgdl.fit_federated");
	pgdl_check_model_fits(f.spec, f.ds);
	pgdl_check_model_memory(f.spec, &f.config.optim, f.config.batch_size, "the model");
	if (!PG_ARGISNULL(5))
	{
		f.vds = pgdl_dataset_by_packed(PG_GETARG_OID(5));
		pgdl_check_same_preprocessing(f.ds, f.vds, get_rel_name(PG_GETARG_OID(5)));
	}
	f.name = PG_ARGISNULL(6) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(6));
	if (f.name)
		pgdl_run_check_model_name(f.name);
	PG_RETURN_INT64(fit_federated(&f));
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
