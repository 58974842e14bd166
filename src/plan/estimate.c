/*
 * estimate.c -- pgdl.estimate and pgdl.estimate_layers: what a network costs
 * here, per step and per epoch, in time (from this server's profile,
 * throughput.c) and memory (the engine's nn_spec_cost).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "base/base.h"
#include "spec/spec.h"
#include "plan/plan.h"

#define ESTIMATE_MAX_EXAMPLES	((int64) 1 << 50)

/* [{"workers": w, "images_per_second": ..., ...}] for w = 1 .. workers: one worker's pace while w train at once. */
static void
put_worker_predictions(JsonbParseState **state, const PgdlProfile *prof, const PgdlStepPrediction *p,
					   int32 batch, int64 examples, int workers)
{
	pushJsonbValue(state, WJB_BEGIN_ARRAY, NULL);
	for (int w = 1; w <= workers; w++)
	{
		double		ips = batch / pgdl_predict_step_seconds(prof, p, w, false);

		pushJsonbValue(state, WJB_BEGIN_OBJECT, NULL);
		pgdl_jsonb_put_int(state, "workers", w);
		pgdl_jsonb_put_float8(state, "images_per_second", ips);
		pgdl_jsonb_put_float8(state, "total_images_per_second", ips * w);
		if (examples > 0)
			pgdl_jsonb_put_float8(state, "seconds_per_epoch", examples / ips);
		pushJsonbValue(state, WJB_END_OBJECT, NULL);
	}
}

/*
 * Memory, in bytes: the model, its optimizer state, its workspace for a batch,
 * and (with examples) the buffers a fit_multiple worker keeps, up to
 * pgdl.worker_cache_mem.
 */
static Jsonb *
memory_jsonb(const NnMemory *mem, const NnSpec *spec, int64 examples)
{
	JsonbParseState *state = NULL;
	int64		buffers = 0;

	if (examples > 0)
	{
		NnShape		shape[NN_MAX_LAYERS + 1];
		int64		per = NN_SHAPE_SIZE(shape[0]);

		if (!nn_spec_validate(spec, shape, NULL))
			elog(ERROR, "memory_jsonb: invalid spec");
		per = NN_SHAPE_SIZE(shape[0]) + (spec->loss == NN_LOSS_CROSS_ENTROPY ? 1 : NN_SHAPE_SIZE(shape[spec->n_layers]));
		buffers = (int64) Min((double) examples * per * sizeof(float), (double) pgdl_worker_cache_mem * 1024.0);
	}
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_int(&state, "model", mem->model);
	pgdl_jsonb_put_int(&state, "optimizer", mem->optim);
	pgdl_jsonb_put_int(&state, "workspace", mem->workspace);
	if (examples > 0)
		pgdl_jsonb_put_int(&state, "buffers", buffers);
	pgdl_jsonb_put_int(&state, "total", mem->total + buffers);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/*
 * Parameters, FLOPs and memory, from the spec alone (nothing is allocated).
 * The memory is what training allocates for a batch (nn_spec_memory): the
 * model, its optimizer state and its workspace, the figure that
 * pgdl.max_model_memory is checked against.  The predicted pace comes from
 * this server's newest profile (pgdl.calibrate, throughput.c), or without one
 * from pgdl.cpu_gflops; examples (NULL: unknown) gives seconds per epoch.
 */
PG_FUNCTION_INFO_V1(pgdl_estimate);
Datum
pgdl_estimate(PG_FUNCTION_ARGS)
{
	NnSpec	   *spec = palloc(sizeof(NnSpec));
	PgdlTrainConfig config;
	PgdlProfile *prof = palloc(sizeof(PgdlProfile));
	PgdlStepPrediction step;
	JsonbParseState *state = NULL;
	NnCost		total;
	NnMemory	mem;
	NnError		err;
	TupleDesc	desc;
	int64		examples = PG_NARGS() > 2 && !PG_ARGISNULL(2) ? PG_GETARG_INT64(2) : 0;
	double		ips;
	Datum		values[12];
	bool		nulls[12] = {false};

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2) && (examples < 1 || examples > ESTIMATE_MAX_EXAMPLES))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("examples must be between 1 and " INT64_FORMAT ", got " INT64_FORMAT,
						(int64) ESTIMATE_MAX_EXAMPLES, examples)));
	pgdl_spec_from_jsonb(PG_GETARG_JSONB_P(0), spec);
	pgdl_config_from_jsonb(PG_GETARG_JSONB_P(1), &config);
	if (!nn_spec_cost(spec, NULL, &total, &err) ||
		!nn_spec_memory(spec, &config.optim, config.batch_size, &mem, &err))
		pgdl_report_nn_error("model spec", &err);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	pgdl_profile_load(prof);
	pgdl_predict_step(prof, spec, &config.optim, config.batch_size, &step);
	ips = config.batch_size / pgdl_predict_step_seconds(prof, &step, 1, false);

	values[0] = Int64GetDatum(total.params);
	values[1] = Int64GetDatum(total.flops_forward);
	values[2] = Int64GetDatum(total.flops_train);
	values[3] = Int64GetDatum(4 * total.act_floats);
	values[4] = Int32GetDatum(config.batch_size);
	values[5] = Int64GetDatum(mem.total);
	values[6] = Int64GetDatum(prof->id);
	nulls[6] = prof->id == 0;
	values[7] = CStringGetTextDatum(prof->id ? "pgdl.server_profiles" : "pgdl.cpu_gflops");
	values[8] = Float8GetDatum(ips);
	/* pgdl.fit's first epoch: the buffers read from the packed table */
	values[9] = Float8GetDatum((double) examples / config.batch_size * pgdl_predict_step_seconds(prof, &step, 1, true));
	nulls[9] = examples == 0;
	put_worker_predictions(&state, prof, &step, config.batch_size, examples,
						   Min(Max(prof->workers, pgdl_max_workers), PGDL_MAX_WORKERS));
	values[10] = JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_ARRAY, NULL)));
	values[11] = JsonbPGetDatum(memory_jsonb(&mem, spec, examples));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

PG_FUNCTION_INFO_V1(pgdl_estimate_layers);
Datum
pgdl_estimate_layers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	NnSpec	   *spec = palloc(sizeof(NnSpec));
	NnShape		shape[NN_MAX_LAYERS + 1];
	NnCost	   *per = palloc(sizeof(NnCost) * NN_MAX_LAYERS);
	NnError		err;

	pgdl_spec_from_jsonb(PG_GETARG_JSONB_P(0), spec);
	if (!nn_spec_validate(spec, shape, &err) || !nn_spec_cost(spec, per, NULL, &err))
		pgdl_report_nn_error("model spec", &err);
	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < spec->n_layers; i++)
	{
		Datum		values[7];
		bool		nulls[7] = {false};
		Datum		dims[3];
		int			nd = shape[i + 1].ndim;

		dims[0] = Int32GetDatum(shape[i + 1].c);
		dims[1] = Int32GetDatum(shape[i + 1].h);
		dims[2] = Int32GetDatum(shape[i + 1].w);
		if (nd == 2)
			dims[1] = dims[2];	/* a sequence: [steps, features] */
		values[0] = Int32GetDatum(i);
		values[1] = CStringGetTextDatum(nn_layer_type_name(spec->layers[i].type));
		values[2] = PointerGetDatum(construct_array(dims, nd, INT4OID, 4, true, TYPALIGN_INT));
		values[3] = Int64GetDatum(per[i].params);
		values[4] = Int64GetDatum(per[i].flops_forward);
		values[5] = Int64GetDatum(per[i].flops_train);
		values[6] = Int64GetDatum(4 * per[i].act_floats);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
