/*
 * evaluate.c -- evaluation: a model's loss and accuracy over a packed table,
 * for pgdl.evaluate and pgdl.evaluate_targets and for the validation of
 * pgdl.fit and pgdl.fit_federated; and what prediction (predict/) shares with
 * it: a batch's raw outputs in inference mode, and the class they name.
 *
 * Standardized targets (pack's standardize_target): pgdl.evaluate's loss is
 * in target units, the validation loss of training in standardized units (the
 * loss the network minimizes).
 *
 * Weighted packed tables (pack's weight): pgdl.evaluate's loss and accuracy
 * are weighted means, sum w x l / sum w, the loss training minimizes; a
 * buffer whose weights are all 1 is the engine's, as an unweighted one is, and
 * others are scored row by row from the outputs (the engine's formulas, in
 * double).  Validation during training stays unweighted.
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

/* What the loss makes of one example's k raw outputs z: probabilities, or z itself. */
void
pgdl_model_probabilities(NnLoss loss, const float *z, int64 k, float *out)
{
	switch (loss)
	{
		case NN_LOSS_CROSS_ENTROPY:
			{
				float		max = z[0];
				double		sum = 0.0;

				for (int64 c = 1; c < k; c++)
					max = Max(max, z[c]);
				for (int64 c = 0; c < k; c++)
					sum += exp((double) z[c] - max);
				for (int64 c = 0; c < k; c++)
					out[c] = (float) (exp((double) z[c] - max) / sum);
				break;
			}
		case NN_LOSS_BCE:
			for (int64 c = 0; c < k; c++)
				out[c] = pgdl_logistic(z[c]);
			break;
		default:
			memcpy(out, z, sizeof(float) * k);
			break;
	}
}

/*
 * A regression loss of an error d in some units, `unit` training units each
 * (a standardized target's std, or 1): mse's d^2, huber's with its delta
 * scaled to those units, so that either is unit^2 times the loss in training
 * units (kernels/rows.h has the engine's, in float).
 */
double
pgdl_regression_loss(const NnModel *m, double d, double unit)
{
	double		a = fabs(d),
				delta = m->spec.delta * unit;

	if (m->spec.loss == NN_LOSS_HUBER)
		return a < delta ? 0.5 * d * d : delta * (a - 0.5 * delta);
	return d * d;
}

/* Binary cross-entropy of one logit z against a target t in [0, 1], stable for any z (as the engine's). */
double
pgdl_bce_of_logit(double z, double t)
{
	return fmax(z, 0.0) - z * t + log1p(exp(-fabs(z)));
}

/* Cross-entropy of k logits against class `label`: -log softmax(z)[label], shifted by z[best], their largest. */
double
pgdl_cross_entropy_of_logits(const float *z, int k, int label, int best)
{
	double		sum = 0.0;

	for (int c = 0; c < k; c++)
		sum += exp((double) z[c] - z[best]);
	return log(sum) - ((double) z[label] - z[best]);
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
	const PgdlDataset *targets;	/* pgdl.evaluate of standardized targets: their dataset, else NULL */
	bool		weigh;			/* pgdl.evaluate: weighted buffers into the sums below */
	double		weighted_loss;	/* sum of w x loss over weighted buffers' rows */
	double		weighted_correct;	/* sum of w over their rows scored right */
	double		weight_sum;		/* sum of their w */
	int64		weighted_rows;	/* their number */
} EvalArg;

static bool
all_ones(const float *w, int32 n)
{
	for (int32 r = 0; r < n; r++)
		if (w[r] != 1.0f)
			return false;
	return true;
}

/* One example's loss from its raw outputs z against y, and whether it is right (*right). */
static double
row_loss(const NnModel *m, const float *z, const float *y, int k, bool *right)
{
	double		s = 0.0;

	if (m->spec.loss == NN_LOSS_CROSS_ENTROPY)
	{
		int			best = pgdl_model_class_of(m, z, NULL);
		int			label = (int) y[0];

		*right = best == label;
		return label >= 0 && label < k ? pgdl_cross_entropy_of_logits(z, k, label, best) : NAN;
	}
	*right = true;
	for (int c = 0; c < k; c++)
	{
		double		zi = z[c],
					t = y[c];

		if (m->spec.loss == NN_LOSS_BCE)
		{
			s += pgdl_bce_of_logit(zi, t);
			*right = *right && (z[c] > 0.0f) == (y[c] > 0.5f);
		}
		else
			s += pgdl_regression_loss(m, zi - t, 1.0);
	}
	return s / k;
}

/* A buffer of rows weighing w (not all 1), each row's loss from the outputs. */
static void
evaluate_buffer_weighted(EvalArg *ea, const float *x, const float *y, const float *w, int32 n)
{
	const NnModel *m = ea->model;
	int			k = (int) nn_model_output_size(m);
	int			ky = m->spec.loss == NN_LOSS_CROSS_ENTROPY ? 1 : k;
	const float *z = pgdl_model_outputs(ea->model, x, n);

	for (int32 r = 0; r < n; r++)
	{
		bool		right;
		double		loss = row_loss(m, z + (int64) r * k, y + (int64) r * ky, k, &right);

		if (!isfinite(loss))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("cannot evaluate the model on a buffer of this dataset"),
					 errdetail("Row %d of a buffer has a loss that is not a finite number.", r + 1)));
		ea->weighted_loss += w[r] * loss;
		ea->weighted_correct += right ? w[r] : 0.0;
		ea->weight_sum += w[r];
	}
	ea->weighted_rows += n;
}

/*
 * The regression loss of a buffer of standardized targets in target units:
 * per example, the mean over targets of std^2 (z - y)^2 for mse, as the
 * engine's mse is the mean over targets of (z - y)^2; huber's alike, its
 * delta scaled to target units with the errors.
 */
static void
evaluate_buffer_unscaled(EvalArg *ea, const float *x, const float *y, const float *w, int32 n)
{
	const PgdlDataset *ds = ea->targets;
	const float *z = pgdl_model_outputs(ea->model, x, n);
	int			k = ds->n_targets;

	for (int32 r = 0; r < n; r++)
	{
		double		sum = 0.0;

		for (int c = 0; c < k; c++)
			sum += pgdl_regression_loss(ea->model,
										((double) z[(int64) r * k + c] - (double) y[(int64) r * k + c]) * ds->target_std[c],
										ds->target_std[c]);
		if (w == NULL)
			ea->stats->loss_sum += sum / k;
		else
		{
			ea->weighted_loss += w[r] * (sum / k);
			ea->weight_sum += w[r];
		}
	}
	if (w == NULL)
		ea->stats->n += n;
	else
		ea->weighted_rows += n;
}

static void
evaluate_buffer(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept)
{
	EvalArg    *ea = arg;
	NnError		err;

	if (!ea->weigh || (w != NULL && all_ones(w, n)))
		w = NULL;
	if (ea->targets != NULL)
	{
		evaluate_buffer_unscaled(ea, x, y, w, n);
		return;
	}
	if (w != NULL)
	{
		pgdl_check_model_batch(ea->model, n, "the model");
		evaluate_buffer_weighted(ea, x, y, w, n);
		return;
	}
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
	pgdl_evaluate_partition(model, ds, -1, stats);
}

/* Partition `part` of the packed table (-1: all), its buffers in the order the hopper's workers evaluate them. */
void
pgdl_evaluate_partition(NnModel *model, const PgdlDataset *ds, int32 part, NnBatchStats *stats)
{
	EvalArg		ea = {model, stats, NULL, false, 0.0, 0.0, 0.0, 0};

	pgdl_check_model_fits(&model->spec, ds);
	pgdl_packed_scan(ds, part, evaluate_buffer, &ea, NULL, NULL);
}

/* The mean loss of n rows held in memory, as pgdl.evaluate computes it: weighted, in target units. */
double
pgdl_evaluate_loss_of_rows(NnModel *model, const PgdlDataset *ds, const float *x, const float *y,
						   const float *w, int64 n, int32 batch)
{
	NnBatchStats stats = {0};
	EvalArg		ea = {model, &stats, NULL, true, 0.0, 0.0, 0.0, 0};

	if (ds->target_mean != NULL && nn_loss_is_regression(model->spec.loss))
		ea.targets = ds;
	for (int64 r = 0; r < n; r += batch)
	{
		int32		c = (int32) Min((int64) batch, n - r);

		evaluate_buffer(&ea, x + r * ds->n_features, y + r * ds->n_targets, w ? w + r : NULL, c, false);
		CHECK_FOR_INTERRUPTS();
	}
	return (stats.loss_sum + ea.weighted_loss) / ((double) stats.n + ea.weight_sum);
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

	char	   *name = get_rel_name(packed);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", packed)));
	pgdl_check_model_fits(&model->nn->spec, ds);
	/* a number over rows of another preprocessing would be wrong: an error instead */
	if (model->dataset != NULL)
		pgdl_check_same_preprocessing(model->dataset, ds, name);
	return ds;
}

const PgdlDataset *
pgdl_evaluation_dataset(const PgdlModel *model, const PgdlEvaluationData *data)
{
	pgdl_check_model_usable(model);
	if (data->source == NULL)
		return packed_dataset(model, data->packed);
	if (model->dataset == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a model without a training set cannot evaluate raw rows"),
				 errdetail("Raw rows are preprocessed as the model's training set was packed; this model has none (a model blob, or one imported without a dataset)."),
				 errhint("Pack the rows and evaluate the packed table, or evaluate a stored model.")));
	pgdl_check_model_fits(&model->nn->spec, model->dataset);
	return model->dataset;
}

void
pgdl_evaluation_scan(const PgdlDataset *ds, const PgdlEvaluationData *data, PgdlBufferFn fn, void *arg)
{
	if (data->source == NULL)
		pgdl_packed_scan(ds, -1, fn, arg, NULL, NULL);
	else
		(void) pgdl_pack_stream(ds, data->source, data->features, data->label, fn, arg);
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
	EvalArg		ea = {NULL, &stats, NULL, true, 0.0, 0.0, 0.0, 0};
	const PgdlDataset *ds;
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
	ds = pgdl_evaluation_dataset(model, &data);
	/* the loss in target units: what pgdl.metrics' mse says of the same rows */
	if (ds->target_mean != NULL && nn_loss_is_regression(model->nn->spec.loss))
		ea.targets = ds;
	pgdl_evaluation_scan(ds, &data, evaluate_buffer, &ea);

	/* weighted rows add to the engine's sums (nothing to add, 0, when unweighted) */
	if (stats.n > 0 || ea.weight_sum > 0.0)
	{
		double		weight = (double) stats.n + ea.weight_sum;

		values[0] = Float8GetDatum((stats.loss_sum + ea.weighted_loss) / weight);
		values[1] = Float8GetDatum(((double) stats.correct + ea.weighted_correct) / weight);
		nulls[1] = nn_loss_is_regression(model->nn->spec.loss);
	}
	else
		nulls[0] = nulls[1] = true;
	values[2] = Int64GetDatum(stats.n + ea.weighted_rows);

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
