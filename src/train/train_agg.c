/*
 * train_agg.c -- training as an aggregate.
 *
 *   SELECT pgdl.train(x, y, n, model, config ORDER BY buffer_id) FROM packed WHERE part = 2;
 *
 * The state is the model with its optimizer state; the transition runs the
 * minibatch steps of one packed buffer; the combine function averages models
 * weighted by the examples each has seen (data parallelism: PostgreSQL's
 * parallel aggregation, or Citus pushing the aggregate to its nodes); the final
 * function returns the model blob.  pgdl.fit runs the same steps through
 * pgdl_train_buffer without the aggregate's serialization between sub-epochs.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "backend.h"
#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "train/train.h"

void
pgdl_config_at_epoch(PgdlTrainConfig *config, int32 epoch, int32 epochs)
{
	config->optim.epoch = epoch;
	config->optim.epochs = epochs;
}

/*
 * Whether a configuration's lr depends on the epoch (a schedule, warmup over
 * epochs) or it stops early: what only a caller that counts epochs can train.
 */
bool
pgdl_config_counts_epochs(const PgdlTrainConfig *config)
{
	return config->optim.schedule != NN_SCHED_NONE || config->optim.warmup_epochs > 0 || config->patience > 0;
}

void
pgdl_config_refuse_epochs(const PgdlTrainConfig *config, const char *caller)
{
	if (pgdl_config_counts_epochs(config))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s does not take \"schedule\", \"warmup_epochs\" or \"patience\"", caller),
				 errdetail("Those depend on the epoch a model is in, which %s does not count.", caller),
				 errhint("Train with pgdl.fit or pgdl.fit_multiple; \"warmup_steps\", \"clip_norm\", \"label_smoothing\" and \"no_decay_bias_norm\" work everywhere.")));
}

PgdlTrainState *
pgdl_train_begin(NnModel *model, const PgdlTrainConfig *config, MemoryContext cxt)
{
	PgdlTrainState *state = MemoryContextAllocZero(cxt, sizeof(PgdlTrainState));
	NnError		err;

	state->model = model;
	state->config = *config;
	state->cxt = cxt;
	pgdl_check_model_memory(&model->spec, &config->optim, config->batch_size, "the model");
	pgdl_check_precision(&config->optim, pgdl_device_for(config));
	if (!nn_model_set_optim(model, &config->optim, &err) ||
		!nn_model_reserve(model, config->batch_size, &err))
		pgdl_report_nn_error("training configuration", &err);
	pgdl_class_weights_apply(model, config);
	/* with its optimizer and workspace, so that all of it is allocated on the device once */
	pgdl_device_move(model, pgdl_device_for(config), &config->optim, config->batch_size);
	return state;
}

static void
report_step_error(const NnError *err)
{
	ereport(ERROR,
			(errcode(pgdl_nn_data_errcode(err)),
			 errmsg("cannot train on this buffer"),
			 errdetail("%c%s.", pg_toupper((unsigned char) err->msg[0]), err->msg + 1)));
}

/*
 * A model on a device trains on staged batches: the next one uploads while the
 * device still runs this one's backward pass and update (the same bytes).
 */
void
pgdl_train_buffer(PgdlTrainState *state, const float *x, const float *y, const float *w, int32 n)
{
	NnModel    *m = state->model;
	int64		in = nn_model_input_size(m);
	int64		tgt = nn_model_target_size(m);
	int32		batch = state->config.batch_size;
	bool		staged = !m->be->host_memory;
	NnError		err;

	if (state->diverged)
		return;
	/* w: each example's weight (NULL: unweighted), handed to the engine batch by batch */
	if (staged && n > 0)
		nn_model_weigh_next(m, w);
	if (staged && n > 0 && !nn_model_stage(m, x, y, Min(batch, n), &err))
		report_step_error(&err);
	for (int32 s = 0; s < n; s += batch)
	{
		int32		c = n - s < batch ? n - s : batch;
		int32		next = s + c;
		bool		finite;
		bool		ok;

		CHECK_FOR_INTERRUPTS();
		if (!staged)
			nn_model_weigh_next(m, w != NULL ? w + s : NULL);
		ok = staged ? nn_model_train_staged(m, &state->stats, &finite, &err)
			: nn_model_train_step_finite(m, x + s * in, y + s * tgt, c, &state->stats, &finite, &err);
		if (!ok)
			report_step_error(&err);
		if (!finite)
		{
			state->diverged = PGDL_DIVERGED_LOSS;
			state->examples += s;
			return;
		}
		if (staged && next < n)
			nn_model_weigh_next(m, w != NULL ? w + next : NULL);
		if (staged && next < n &&
			!nn_model_stage(m, x + next * in, y + next * tgt, Min(batch, n - next), &err))
			report_step_error(&err);
	}
	state->examples += n;
}

void
pgdl_train_check_weights(PgdlTrainState *state)
{
	pgdl_device_check_errors();
	if (!state->diverged && !nn_model_params_finite(state->model))
		state->diverged = PGDL_DIVERGED_WEIGHTS;
}

static void
report_aggregate_divergence(const PgdlTrainState *state)
{
	/* a blob has no place for a status: say so rather than return a model that went wrong */
	ereport(ERROR,
			(errcode(ERRCODE_FLOATING_POINT_EXCEPTION),
			 errmsg("pgdl.train diverged"),
			 pgdl_train_divergence_detail(state),
			 errhint("Lower the learning rate; pgdl.fit stores a diverged model with its status.")));
}

int
pgdl_train_divergence_detail(const PgdlTrainState *state)
{
	long long	step = (long long) state->model->step;

	if (state->diverged == PGDL_DIVERGED_LOSS)
		return errdetail("The loss of step %lld was NaN or infinite; training stopped before that step.",
						 step + 1);
	return errdetail("The weights were NaN or infinite after step %lld; training stopped there.", step);
}

/* The model's own optimizer, or the defaults, when no configuration is given. */
static void
default_config(const NnModel *m, PgdlTrainConfig *config)
{
	Jsonb	   *empty = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));

	pgdl_config_from_jsonb(empty, config);
	if (m->optim.type != 0)
		config->optim = m->optim;
}

/* An x or y argument holds n examples of `per` values each, or an error says what it holds. */
static void
check_holds(int64 len, int32 n, int64 per, const char *arg, const char *what)
{
	if (len != n * per)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s does not hold %d examples", arg, n),
				 errdetail("Expected %lld values (%d examples of %lld %s), found %lld.",
						   (long long) (n * per), n, (long long) per, what, (long long) len)));
}

PG_FUNCTION_INFO_V1(pgdl_train_transition);
Datum
pgdl_train_transition(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	PgdlTrainState *state = PG_ARGISNULL(0) ? NULL : (PgdlTrainState *) PG_GETARG_POINTER(0);
	int64		xlen,
				ylen;
	float	   *x,
			   *y;
	int32		n;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "pgdl_train_transition called in non-aggregate context");
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("pgdl.train needs non-NULL x, y and n")));

	if (state == NULL)
	{
		NnModel    *model;
		PgdlTrainConfig config;
		MemoryContext old;

		if (PG_ARGISNULL(4))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("pgdl.train needs a model to start from"),
					 errhint("Pass a model blob, e.g. (SELECT weights FROM pgdl.models WHERE id = 1).")));
		pgdl_engine_prepare();
		old = MemoryContextSwitchTo(aggcxt);
		model = pgdl_model_deserialize(PG_GETARG_BYTEA_PP(4));
		pgdl_model_free_with(model, aggcxt);
		if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
		{
			char	   *name;
			int64		id;

			pgdl_config_from_jsonb(PG_GETARG_JSONB_P(5), &config);
			pgdl_config_refuse_epochs(&config, "pgdl.train");
			if (pgdl_warm_start_key(PG_GETARG_JSONB_P(5), &name, &id))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("pgdl.train takes no \"warm_start\""),
						 errdetail("The aggregate starts from the model it is given."),
						 errhint("Make that model with pgdl.init_model(spec, config), whose configuration may have \"warm_start\".")));
		}
		else
			default_config(model, &config);
		state = pgdl_train_begin(model, &config, aggcxt);
		MemoryContextSwitchTo(old);
	}

	n = PG_GETARG_INT32(3);
	x = pgdl_float4_array(PG_GETARG_ARRAYTYPE_P(1), "x", &xlen);
	y = pgdl_float4_array(PG_GETARG_ARRAYTYPE_P(2), "y", &ylen);
	if (n < 1 || n > NN_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n must be between 1 and %d, got %d", NN_MAX_BATCH, n)));
	check_holds(xlen, n, nn_model_input_size(state->model), "x", "features");
	check_holds(ylen, n, nn_model_target_size(state->model), "y", "targets");
	pgdl_train_buffer(state, x, y, NULL, n);
	if (state->diverged)
		report_aggregate_divergence(state);
	PG_RETURN_POINTER(state);
}

/* a = the average of a and b weighted by their examples (FedAvg); a's counters add b's. */
void
pgdl_train_average(PgdlTrainState *a, const PgdlTrainState *b)
{
	NnModel    *ma = a->model;
	const NnModel *mb = b->model;
	double		total = (double) a->examples + (double) b->examples;
	float		wa,
				wb;

	if (ma->n_params != mb->n_params || ma->n_buffers != mb->n_buffers ||
		ma->n_opt_state != mb->n_opt_state || memcmp(&ma->spec, &mb->spec, sizeof(NnSpec)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot average models of different architectures")));
	wa = total > 0 ? (float) (a->examples / total) : 0.5f;
	wb = 1.0f - wa;
	for (int64 i = 0; i < ma->n_params; i++)
		ma->params[i] = wa * ma->params[i] + wb * mb->params[i];
	for (int64 i = 0; i < ma->n_buffers; i++)
		ma->buffers[i] = wa * ma->buffers[i] + wb * mb->buffers[i];
	for (int64 i = 0; i < ma->n_opt_state; i++)
		ma->opt_state[i] = wa * ma->opt_state[i] + wb * mb->opt_state[i];
	ma->step = Max(ma->step, mb->step);
	a->examples += b->examples;
	a->stats.loss_sum += b->stats.loss_sum;
	a->stats.correct += b->stats.correct;
	a->stats.n += b->stats.n;
}

static PgdlTrainState *
copy_state(const PgdlTrainState *src, MemoryContext cxt)
{
	NnError		err;
	NnModel    *m = nn_model_clone(src->model, &err);
	PgdlTrainState *state;

	if (m == NULL)
		pgdl_report_nn_error("model", &err);
	pgdl_model_free_with(m, cxt);
	state = MemoryContextAlloc(cxt, sizeof(PgdlTrainState));
	*state = *src;
	state->model = m;
	state->cxt = cxt;
	return state;
}

PG_FUNCTION_INFO_V1(pgdl_train_combine);
Datum
pgdl_train_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	PgdlTrainState *a = PG_ARGISNULL(0) ? NULL : (PgdlTrainState *) PG_GETARG_POINTER(0);
	PgdlTrainState *b = PG_ARGISNULL(1) ? NULL : (PgdlTrainState *) PG_GETARG_POINTER(1);

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "pgdl_train_combine called in non-aggregate context");
	if (b == NULL)
		PG_RETURN_POINTER(a);
	if (a == NULL)
		PG_RETURN_POINTER(copy_state(b, aggcxt));
	pgdl_train_average(a, b);
	PG_RETURN_POINTER(a);
}

/* Serialized state: the counters, the configuration, then the model blob. */
typedef struct TrainStateHeader
{
	int64		examples;
	double		loss_sum;
	int64		correct;
	int64		n;
	int32		batch_size;
	int64		seed;
} TrainStateHeader;

PG_FUNCTION_INFO_V1(pgdl_train_serial);
Datum
pgdl_train_serial(PG_FUNCTION_ARGS)
{
	PgdlTrainState *state = (PgdlTrainState *) PG_GETARG_POINTER(0);
	TrainStateHeader h;
	size_t		model_size = nn_model_serialized_size(state->model);
	bytea	   *out;

	if (model_size + sizeof(h) > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("model is too large to pass between parallel workers")));
	memset(&h, 0, sizeof(h));
	h.examples = state->examples;
	h.loss_sum = state->stats.loss_sum;
	h.correct = state->stats.correct;
	h.n = state->stats.n;
	h.batch_size = state->config.batch_size;
	h.seed = state->config.seed;
	out = palloc(VARHDRSZ + sizeof(h) + model_size);
	SET_VARSIZE(out, VARHDRSZ + sizeof(h) + model_size);
	memcpy(VARDATA(out), &h, sizeof(h));
	nn_model_serialize(state->model, (uint8_t *) VARDATA(out) + sizeof(h));
	PG_RETURN_BYTEA_P(out);
}

PG_FUNCTION_INFO_V1(pgdl_train_deserial);
Datum
pgdl_train_deserial(PG_FUNCTION_ARGS)
{
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	MemoryContext aggcxt;
	TrainStateHeader h;
	NnModel    *m;
	NnError		err;
	PgdlTrainState *state;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "pgdl_train_deserial called in non-aggregate context");
	if (VARSIZE_ANY_EXHDR(in) < sizeof(h))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid pgdl.train state")));
	memcpy(&h, VARDATA_ANY(in), sizeof(h));
	pgdl_engine_prepare();
	pgdl_check_model_blob(VARDATA_ANY(in) + sizeof(h), VARSIZE_ANY_EXHDR(in) - sizeof(h), "the model");
	m = nn_model_deserialize((const uint8_t *) VARDATA_ANY(in) + sizeof(h),
							 VARSIZE_ANY_EXHDR(in) - sizeof(h), &err);
	if (m == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid pgdl.train state"),
				 errdetail("%c%s.", pg_toupper((unsigned char) err.msg[0]), err.msg + 1)));
	pgdl_model_free_with(m, aggcxt);
	state = MemoryContextAllocZero(aggcxt, sizeof(PgdlTrainState));
	state->model = m;
	state->examples = h.examples;
	state->stats.loss_sum = h.loss_sum;
	state->stats.correct = h.correct;
	state->stats.n = h.n;
	state->config.optim = m->optim;
	state->config.batch_size = h.batch_size;
	state->config.seed = h.seed;
	state->cxt = aggcxt;
	PG_RETURN_POINTER(state);
}

PG_FUNCTION_INFO_V1(pgdl_train_final);
Datum
pgdl_train_final(PG_FUNCTION_ARGS)
{
	PgdlTrainState *state = PG_ARGISNULL(0) ? NULL : (PgdlTrainState *) PG_GETARG_POINTER(0);
	PgdlTrainState checked;

	if (state == NULL)
		PG_RETURN_NULL();
	/*
	 * The aggregate's input is its sub-epoch: its weights are checked here, on
	 * a copy (a final function leaves the state alone).
	 */
	checked = *state;
	pgdl_train_check_weights(&checked);
	if (checked.diverged)
		report_aggregate_divergence(&checked);
	PG_RETURN_BYTEA_P(pgdl_model_serialize(state->model));
}

/*
 * A freshly initialized model, with the configuration's seed and optimizer (and its warm start's
 * layers): where pgdl.train starts, and what pgdl.fit starts from with the same configuration.
 */
PG_FUNCTION_INFO_V1(pgdl_init_model);
Datum
pgdl_init_model(PG_FUNCTION_ARGS)
{
	NnSpec	   *spec = palloc(sizeof(NnSpec));
	PgdlTrainConfig config;
	NnModel    *model;
	NnError		err;

	pgdl_spec_from_jsonb(PG_GETARG_JSONB_P(0), spec);
	pgdl_config_from_jsonb(PG_GETARG_JSONB_P(1), &config);
	pgdl_engine_prepare();
	pgdl_check_model_memory(spec, &config.optim, 0, "the model");
	model = pgdl_model_start(spec, (uint64) config.seed, PG_GETARG_JSONB_P(1), NULL);
	pgdl_model_free_with(model, CurrentMemoryContext);
	/* the blob keeps the optimizer, not the precision: training sets it (and refuses it where it cannot run) */
	config.optim.bf16 = false;
	if (!nn_model_set_optim(model, &config.optim, &err))
		pgdl_report_nn_error("training configuration", &err);
	PG_RETURN_BYTEA_P(pgdl_model_serialize(model));
}
