/*
 * evaluate.c -- evaluation: a model's loss and accuracy over a packed table,
 * for pgdl.evaluate and pgdl.evaluate_targets and for the validation of
 * pgdl.fit and pgdl.fit_federated; and what prediction (predict/) shares with
 * it: a batch's raw outputs in inference mode, and the class they name.
 *
 * Inference mode: a forward pass writes the model's workspace but never its
 * parameters or running statistics, so evaluating a model leaves it as it
 * was.  The SQL functions read a table, so they clone the model and copy its
 * dataset first (pgdl_model_arg_copy): the SPI cursor between two batches may
 * process invalidations and evict the cache's copy.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"

/*
 * The network's raw outputs (logits for the classification losses) for n
 * examples, in the model's workspace: valid until its next forward pass.
 */
const float *
pgdl_model_outputs(NnModel *m, const float *x, int n)
{
	NnError		err;
	const float *z;

	pgdl_check_model_batch(m, n, "the model");
	if (!nn_model_reserve(m, n, &err))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("%c%s.", pg_toupper((unsigned char) err.msg[0]), err.msg + 1)));
	pgdl_check_model_input(m, x, n);
	z = nn_model_forward(m, x, n, false);
	/* the model keeps no pointer into our memory */
	m->last_input = NULL;
	m->last_n = 0;
	return z;
}

/* The logistic function, stable for any z: a binary_cross_entropy output's probability. */
float
pgdl_logistic(float z)
{
	if (z >= 0.0f)
		return 1.0f / (1.0f + expf(-z));
	else
	{
		float		e = expf(z);

		return e / (1.0f + e);
	}
}

/*
 * One example's class from its raw outputs (as the engine counts accuracy: the
 * argmax, or logit > 0 for a single binary output), and its probability.
 */
int
pgdl_model_class_of(const NnModel *m, const float *z, float *probability)
{
	int64		k = nn_model_output_size(m);
	int			best = 0;

	if (m->spec.loss == NN_LOSS_BCE)
	{
		best = z[0] > 0.0f ? 1 : 0;
		if (probability)
			*probability = pgdl_logistic(best ? z[0] : -z[0]);
		return best;
	}
	for (int c = 1; c < k; c++)
		if (z[c] > z[best])
			best = c;
	if (probability)
	{
		double		sum = 0.0;

		for (int64 c = 0; c < k; c++)
			sum += exp((double) z[c] - z[best]);
		*probability = (float) (1.0 / sum);
	}
	return best;
}

/* ---- a packed table's loss and accuracy: validation, and pgdl.evaluate ---- */

typedef struct EvalArg
{
	NnModel    *model;
	NnBatchStats *stats;
} EvalArg;

static void
evaluate_buffer(void *arg, const float *x, const float *y, int32 n, bool kept)
{
	EvalArg    *ea = arg;
	NnError		err;

	pgdl_check_model_batch(ea->model, n, "the model");
	if (!nn_model_evaluate(ea->model, x, y, n, ea->stats, &err))
		ereport(ERROR,
				(errcode(pgdl_nn_data_errcode(&err)),
				 errmsg("cannot evaluate the model on a buffer of this dataset"),
				 errdetail("%c%s.", pg_toupper((unsigned char) err.msg[0]), err.msg + 1)));
}

void
pgdl_evaluate_packed(NnModel *model, const PgdlDataset *ds, NnBatchStats *stats)
{
	EvalArg		ea = {model, stats};

	pgdl_check_model_fits(&model->spec, ds);
	pgdl_packed_scan(ds, -1, evaluate_buffer, &ea, NULL, NULL);
}

/* ---- what an evaluation reads: a packed table, or raw rows ---- */

void
pgdl_evaluation_data_args(FunctionCallInfo fcinfo, bool raw, PgdlEvaluationData *data)
{
	memset(data, 0, sizeof(PgdlEvaluationData));
	if (!raw)
	{
		data->packed = PG_GETARG_OID(1);
		return;
	}
	data->source = text_to_cstring(PG_GETARG_TEXT_PP(1));
	data->features = text_to_cstring(PG_GETARG_TEXT_PP(2));
	data->label = text_to_cstring(PG_GETARG_TEXT_PP(3));
}

/* The packed table's dataset, checked against the model: the table exists and is what the model was trained on. */
static PgdlDataset *
packed_dataset(const PgdlModel *model, Oid packed)
{
	/* copied at once: the cache may drop it at the next query */
	PgdlDataset *ds = pgdl_dataset_copy(pgdl_dataset_by_packed(packed));

	if (get_rel_name(packed) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", packed)));
	pgdl_check_model_fits(&model->nn->spec, ds);
	return ds;
}

int64
pgdl_evaluation_scan(const PgdlModel *model, const PgdlEvaluationData *data, PgdlBufferFn fn, void *arg)
{
	PgdlDataset *ds;
	int64		rows = 0;

	if (OidIsValid(data->packed) || data->source == NULL)
	{
		ds = packed_dataset(model, data->packed);
		pgdl_packed_scan(ds, -1, fn, arg, NULL, NULL);
		return ds->n_rows_hint;
	}
	if (model->dataset == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a model without a training set cannot evaluate raw rows"),
				 errdetail("Raw rows are preprocessed as the model's training set was packed; a model blob has none."),
				 errhint("Pack the rows and evaluate the packed table, or evaluate a stored model.")));
	pgdl_check_model_fits(&model->nn->spec, model->dataset);
	rows = pgdl_pack_stream(model->dataset, data->source, data->features, data->label, fn, arg);
	return rows;
}

/* ---- pgdl.evaluate: mean loss and accuracy over a packed table or raw rows ---- */

static Datum
evaluate(FunctionCallInfo fcinfo, bool raw)
{
	MemoryContext callcxt;
	MemoryContext old;
	PgdlModel  *model;
	PgdlEvaluationData data;
	NnBatchStats stats = {0};
	EvalArg		ea = {NULL, &stats};
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	HeapTuple	result;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	pgdl_engine_prepare();
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl evaluate", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);

	model = pgdl_model_arg_copy(fcinfo, callcxt);
	pgdl_evaluation_data_args(fcinfo, raw, &data);
	/* whole buffers at a time: worth a device when pgdl.device names one (its workspace grows there) */
	pgdl_device_move(model->nn, pgdl_device_for(NULL), NULL, 0);
	ea.model = model->nn;
	pgdl_evaluation_scan(model, &data, evaluate_buffer, &ea);

	if (stats.n > 0)
	{
		values[0] = Float8GetDatum(stats.loss_sum / (double) stats.n);
		values[1] = Float8GetDatum((double) stats.correct / (double) stats.n);
		nulls[1] = model->nn->spec.loss == NN_LOSS_MSE;
	}
	else
		nulls[0] = nulls[1] = true;
	values[2] = Int64GetDatum(stats.n);

	MemoryContextSwitchTo(old);
	MemoryContextDelete(callcxt);	/* frees the model */
	result = heap_form_tuple(tupdesc, values, nulls);
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
}

PG_FUNCTION_INFO_V1(pgdl_evaluate);
Datum
pgdl_evaluate(PG_FUNCTION_ARGS)
{
	return evaluate(fcinfo, false);
}

PG_FUNCTION_INFO_V1(pgdl_evaluate_rows);
Datum
pgdl_evaluate_rows(PG_FUNCTION_ARGS)
{
	return evaluate(fcinfo, true);
}

/* ---- pgdl.evaluate_targets: loss and accuracy of each target of a packed table ---- */

typedef struct TargetStats
{
	NnModel    *model;
	int64		k;
	double	   *loss;			/* per target: sums over the rows */
	int64	   *right;
	int64		n;
} TargetStats;

static void
targets_buffer(void *arg, const float *x, const float *y, int32 n, bool kept)
{
	TargetStats *ts = arg;
	const float *z = pgdl_model_outputs(ts->model, x, n);
	bool		bce = ts->model->spec.loss == NN_LOSS_BCE;

	if (ts->model->spec.loss == NN_LOSS_CROSS_ENTROPY)
	{
		/* one target, the class: -log softmax(z)[y], and the argmax right or not */
		for (int32 r = 0; r < n; r++)
		{
			const float *zr = z + r * ts->k;
			int			best = pgdl_model_class_of(ts->model, zr, NULL);
			float		max = zr[best];
			double		sum = 0.0;

			for (int64 c = 0; c < ts->k; c++)
				sum += exp((double) zr[c] - max);
			ts->loss[0] += log(sum) - ((double) zr[(int64) y[r]] - max);
			ts->right[0] += best == (int) y[r];
		}
		ts->n += n;
		return;
	}
	for (int32 r = 0; r < n; r++)
		for (int64 c = 0; c < ts->k; c++)
		{
			float		zi = z[r * ts->k + c];
			float		t = y[r * ts->k + c];

			if (bce)
			{
				ts->loss[c] += (double) fmaxf(zi, 0.0f) - (double) zi * t + log1p(exp(-fabs((double) zi)));
				ts->right[c] += (zi > 0.0f) == (t > 0.5f);
			}
			else
				ts->loss[c] += ((double) zi - t) * ((double) zi - t);
		}
	ts->n += n;
}

/*
 * For a model with several targets (binary_cross_entropy: multi-label;
 * mse: several regression outputs), per target: the mean loss and, for
 * binary_cross_entropy, the share of rows whose label is right.
 */
PG_FUNCTION_INFO_V1(pgdl_evaluate_targets);
Datum
pgdl_evaluate_targets(PG_FUNCTION_ARGS)
{
	Oid			packed = PG_GETARG_OID(1);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext callcxt;
	MemoryContext old;
	PgdlModel  *model;
	PgdlDataset *ds;
	TargetStats ts;

	InitMaterializedSRF(fcinfo, 0);
	pgdl_engine_prepare();
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl evaluate_targets", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);

	model = pgdl_model_arg_copy(fcinfo, callcxt);
	ds = pgdl_dataset_copy(pgdl_dataset_by_packed(packed));
	pgdl_check_model_fits(&model->nn->spec, ds);

	memset(&ts, 0, sizeof(ts));
	ts.model = model->nn;
	ts.k = nn_model_output_size(model->nn);
	ts.loss = palloc0(sizeof(double) * ts.k);
	ts.right = palloc0(sizeof(int64) * ts.k);
	pgdl_packed_scan(ds, -1, targets_buffer, &ts, NULL, NULL);

	MemoryContextSwitchTo(old);
	/* a cross_entropy model has one target, its class */
	for (int64 c = 0; c < (model->nn->spec.loss == NN_LOSS_CROSS_ENTROPY ? 1 : ts.k) && ts.n > 0; c++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		values[0] = Int32GetDatum((int32) c + 1);
		values[1] = Float8GetDatum(ts.loss[c] / (double) ts.n);
		values[2] = Float8GetDatum((double) ts.right[c] / (double) ts.n);
		nulls[2] = model->nn->spec.loss == NN_LOSS_MSE;
		values[3] = Int64GetDatum(ts.n);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	MemoryContextDelete(callcxt);	/* frees the model */
	return (Datum) 0;
}
