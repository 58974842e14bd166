/*
 * evaluate_metrics.c -- pgdl.metrics, pgdl.confusion_matrix, pgdl.roc_curve
 * and pgdl.evaluate_targets: a model's predictions over an evaluation's rows
 * (a packed table, or raw rows: evaluate.c), kept, then scored by metrics.c
 * as scikit-learn 1.2 scores them.
 *
 * What is kept, per row: a classifier's class and its probabilities (softmax
 * of the logits, or [1 - p, p] for one binary_cross_entropy output); a
 * multi-label model's targets and sigmoids; a regression model's targets and
 * outputs, in target units when the dataset standardized them (as
 * pgdl.predict answers: y * std + mean in float32); and each row's weight
 * when the packed table is weighted (pgdl.datasets.weighted), so that every
 * metric is scikit-learn's with sample_weight and each loss a weighted mean
 * (sum w x loss / sum w, as training weighs it).  Unweighted data keeps no
 * weights, and its numbers are those of before weights, bit for bit.  All in
 * double, at most maintenance_work_mem of them (ranking metrics sort every
 * row), checked before each buffer is added.
 *
 * A metric scikit-learn leaves undefined (ROC AUC when the rows have one
 * class, R² of one row) is NULL.  A diverged model or data of another
 * preprocessing is an error before any row is read (evaluate.c's checks).
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"
#include "train/metrics.h"

/* What the kept rows are: a classifier's, a multi-label model's, a regression model's. */
typedef enum PredictionKind
{
	PREDICT_CLASSES,
	PREDICT_LABELS,
	PREDICT_VALUES
} PredictionKind;

typedef struct Predictions
{
	NnModel    *model;
	PredictionKind kind;
	int			k;				/* classes (2 for one binary output), labels or targets */
	int64		n;
	int64		cap;
	int32	   *y;				/* classes: each row's */
	double	   *p;				/* n x k: probabilities, sigmoids or outputs */
	double	   *t;				/* labels and values: n x k targets */
	double	   *w;				/* each row's weight; NULL while every buffer came unweighted */
	double		weight_sum;		/* of the rows' weights (n when unweighted) */
	double	   *loss;			/* per output column: w x loss summed over the rows (evaluate_targets) */
	float	   *probability;	/* one row's, as pgdl.predict computes them */
	const PgdlDataset *targets; /* values of standardized targets: their dataset, to unscale; else NULL */
	MemoryContext cxt;
} Predictions;

/* ds: the data's dataset, whose standardized targets are unscaled (NULL: none, as validation scores are kept) */
static void
predictions_init(Predictions *pr, NnModel *model, bool classification, const PgdlDataset *ds, MemoryContext cxt)
{
	int64		out = nn_model_output_size(model);

	memset(pr, 0, sizeof(Predictions));
	pr->model = model;
	pr->cxt = cxt;
	if (model->spec.loss == NN_LOSS_CROSS_ENTROPY)
		pr->kind = PREDICT_CLASSES;
	else if (model->spec.loss == NN_LOSS_BCE && classification)
		pr->kind = PREDICT_CLASSES;
	else
		pr->kind = model->spec.loss == NN_LOSS_BCE ? PREDICT_LABELS : PREDICT_VALUES;
	pr->k = (int) (pr->kind == PREDICT_CLASSES && out == 1 ? 2 : out);
	/* outputs and targets in target units, as pgdl.predict answers */
	if (pr->kind == PREDICT_VALUES && ds != NULL && ds->target_mean != NULL)
		pr->targets = ds;
	pr->loss = MemoryContextAllocZero(cxt, sizeof(double) * out);
	pr->probability = MemoryContextAlloc(cxt, sizeof(float) * out);
}

/* Room for `more` rows, within maintenance_work_mem, or an error saying how much it would take. */
static void
predictions_reserve(Predictions *pr, int32 more)
{
	int64		need = pr->n + more;
	Size		row_bytes = sizeof(double) * pr->k * (pr->kind == PREDICT_CLASSES ? 1 : 2) + sizeof(int32) +
		(pr->w ? sizeof(double) : 0);
	Size		limit = mul_size((Size) maintenance_work_mem, 1024);
	int64		cap;

	if (need <= pr->cap)
		return;
	if ((double) need * row_bytes > (double) limit)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many rows to score: more than " INT64_FORMAT, pr->n),
				 errdetail("Metrics keep every row's %d outputs (%zu bytes a row) and maintenance_work_mem allows %zu kB.",
						   pr->k, row_bytes, limit / 1024),
				 errhint("Raise maintenance_work_mem, or score a sample of the rows.")));
	cap = Min(Max(need, pr->cap * 2), (int64) (limit / row_bytes));
	if (pr->cap == 0)
	{
		pr->y = MemoryContextAllocHuge(pr->cxt, sizeof(int32) * cap);
		pr->p = MemoryContextAllocHuge(pr->cxt, sizeof(double) * pr->k * cap);
		if (pr->kind != PREDICT_CLASSES)
			pr->t = MemoryContextAllocHuge(pr->cxt, sizeof(double) * pr->k * cap);
	}
	else
	{
		pr->y = repalloc_huge(pr->y, sizeof(int32) * cap);
		pr->p = repalloc_huge(pr->p, sizeof(double) * pr->k * cap);
		if (pr->kind != PREDICT_CLASSES)
			pr->t = repalloc_huge(pr->t, sizeof(double) * pr->k * cap);
	}
	if (pr->w)
		pr->w = repalloc_huge(pr->w, sizeof(double) * cap);
	pr->cap = cap;
}

/* A packed table's rows are its owner's to write: a class that is none of the model's is an error. */
static void
check_label(const Predictions *pr, float label)
{
	if (!(label >= 0.0f && label < (float) pr->k && label == floorf(label)))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("row " INT64_FORMAT " has class %g, which is not one of the model's %d classes",
						pr->n + 1, label, pr->k),
				 errdetail("Classes are numbered 0 to %d in a packed table's y.", pr->k - 1)));
}

/*
 * One classifier row: its class, its probabilities as pgdl.predict returns
 * them (so that metrics score what a user of predict sees), and its loss from
 * the logits (cross-entropy, or binary cross-entropy of one logit).
 */
static void
keep_class_row(Predictions *pr, const float *z, float label, double weight)
{
	double	   *p = pr->p + pr->n * pr->k;
	float	   *probability = pr->probability;
	int32		y;

	check_label(pr, label);
	y = (int32) label;
	pr->y[pr->n] = y;
	if (pr->model->spec.loss == NN_LOSS_BCE)
	{
		double		zi = z[0];

		pgdl_model_probabilities(NN_LOSS_BCE, z, 1, probability);
		p[1] = probability[0];
		p[0] = 1.0 - p[1];
		pr->loss[0] += weight * pgdl_bce_of_logit(zi, y);
		return;
	}
	pgdl_model_probabilities(NN_LOSS_CROSS_ENTROPY, z, pr->k, probability);
	for (int c = 0; c < pr->k; c++)
		p[c] = probability[c];
	pr->loss[0] += weight * pgdl_cross_entropy_of_logits(z, pr->k, y, pgdl_model_class_of(pr->model, z, NULL));
}

/* The first weighted buffer: room for every row's weight, those kept so far 1. */
static void
predictions_weigh(Predictions *pr)
{
	pr->w = MemoryContextAllocHuge(pr->cxt, sizeof(double) * Max(pr->cap, 1));
	for (int64 r = 0; r < pr->n; r++)
		pr->w[r] = 1.0;
}

static void
keep_buffer(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept)
{
	Predictions *pr = arg;
	const float *z = pgdl_model_outputs(pr->model, x, n);
	int			out = (int) nn_model_output_size(pr->model);
	float	   *unscaled = NULL;

	/* standardized targets: outputs and targets in target units, as pgdl.predict answers */
	if (pr->targets != NULL)
	{
		unscaled = palloc(mul_size(mul_size(sizeof(float), (Size) n), 2 * (Size) out));
		memcpy(unscaled, z, sizeof(float) * n * out);
		memcpy(unscaled + (int64) n * out, y, sizeof(float) * n * out);
		pgdl_dataset_unscale_targets(pr->targets, unscaled, 2 * (int64) n);
		z = unscaled;
		y = unscaled + (int64) n * out;
	}
	if (w != NULL && pr->w == NULL)
		predictions_weigh(pr);
	predictions_reserve(pr, n);
	for (int32 r = 0; r < n; r++, pr->n++)
	{
		const float *zr = z + (int64) r * out;
		double		weight = w ? w[r] : 1.0;

		if (pr->w)
			pr->w[pr->n] = weight;
		pr->weight_sum += weight;
		if (pr->kind == PREDICT_CLASSES)
		{
			keep_class_row(pr, zr, y[r], weight);
			continue;
		}
		for (int c = 0; c < out; c++)
		{
			double		zi = zr[c];
			double		t = y[(int64) r * out + c];

			if (!isfinite(t))
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("row " INT64_FORMAT " has a target that is not a finite number", pr->n + 1)));
			pr->t[pr->n * out + c] = t;
			if (pr->kind == PREDICT_LABELS)
			{
				pr->p[pr->n * out + c] = pgdl_logistic(zr[c]);	/* pgdl.predict's sigmoid */
				pr->loss[c] += weight * pgdl_bce_of_logit(zi, t);
			}
			else
			{
				pr->p[pr->n * out + c] = zi;
				pr->loss[c] += weight * pgdl_regression_loss(pr->model, zi - t,
															 unscaled ? pr->targets->target_std[c] : 1.0);
			}
		}
	}
	if (unscaled)
		pfree(unscaled);
}

/*
 * The model of argument 0 over the data of the arguments after it (raw: a
 * source, features and label), every row's prediction kept in `cxt`.
 */
static const PgdlDataset *
predict_all(FunctionCallInfo fcinfo, bool raw, MemoryContext cxt, Predictions *pr)
{
	PgdlModel  *model = pgdl_model_arg_copy(fcinfo, cxt);
	PgdlEvaluationData data;
	const PgdlDataset *ds;

	pgdl_evaluation_data_args(fcinfo, raw, &data);
	ds = pgdl_evaluation_dataset(model, &data);
	predictions_init(pr, model->nn, ds->classification, ds, cxt);
	pgdl_evaluation_scan(ds, &data, keep_buffer, pr);
	return ds;
}

/* A classifier's class c by name: its value in the dataset. */
static char *
class_name(const PgdlDataset *ds, const Predictions *pr, int c)
{
	if (ds->classification && ds->classes != NULL && c < ds->n_classes)
		return ds->classes[c];
	return psprintf("%d", c);
}

static void
require_classifier(const Predictions *pr, const char *what)
{
	if (pr->kind != PREDICT_CLASSES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s needs a classifier", what),
				 errdetail("The model's loss is %s on a %s dataset; a classifier's is cross_entropy, or binary_cross_entropy with one output on a classification dataset.",
						   nn_loss_name(pr->model->spec.loss), pr->kind == PREDICT_LABELS ? "multi-label" : "regression")));
}

/* ---- pgdl.metrics: one row per metric, class and average ---- */

typedef struct MetricRows
{
	ReturnSetInfo *rsinfo;
} MetricRows;

/* metric (class or average, either NULL) = value; NaN, a metric left undefined, is NULL */
static void
put_metric(MetricRows *out, const char *metric, const char *class, const char *average, double value)
{
	Datum		values[4];
	bool		nulls[4] = {false, class == NULL, average == NULL, isnan(value)};

	values[0] = CStringGetTextDatum(metric);
	values[1] = class ? CStringGetTextDatum(class) : (Datum) 0;
	values[2] = average ? CStringGetTextDatum(average) : (Datum) 0;
	values[3] = Float8GetDatum(value);
	tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc, values, nulls);
}

static void
out_of_memory(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OUT_OF_MEMORY),
			 errmsg("out of memory"),
			 errdetail("Ranking the rows' scores failed to allocate.")));
}

static void
put_class_averages(MetricRows *out, const char *average, const PgdlMetricsAverage *a)
{
	put_metric(out, "precision", NULL, average, a->precision);
	put_metric(out, "recall", NULL, average, a->recall);
	put_metric(out, "f1", NULL, average, a->f1);
}

static void
classifier_metrics(MetricRows *out, const PgdlDataset *ds, const Predictions *pr, int32 top_k)
{
	int			k = pr->k;
	double	   *counts = palloc0(sizeof(double) * k * k);
	PgdlMetricsClassScores *scores = palloc0(sizeof(PgdlMetricsClassScores) * k);
	PgdlMetricsAverage macro;
	PgdlMetricsAverage weighted;
	double	   *auc = palloc(sizeof(double) * k);
	double	   *ap = palloc(sizeof(double) * k);
	double		roc_auc;
	double		average_precision;

	put_metric(out, "accuracy", NULL, NULL, pgdl_metrics_accuracy(pr->y, pr->p, pr->w, pr->n, k));
	put_metric(out, "top_k_accuracy", NULL, NULL, pgdl_metrics_top_k_accuracy(pr->y, pr->p, pr->w, pr->n, k, top_k));
	pgdl_metrics_confusion_matrix(pr->y, pr->p, pr->w, pr->n, k, counts);
	pgdl_metrics_class_scores(counts, k, scores, &macro, &weighted);
	for (int c = 0; c < k; c++)
	{
		put_metric(out, "precision", class_name(ds, pr, c), NULL, scores[c].precision);
		put_metric(out, "recall", class_name(ds, pr, c), NULL, scores[c].recall);
		put_metric(out, "f1", class_name(ds, pr, c), NULL, scores[c].f1);
		put_metric(out, "support", class_name(ds, pr, c), NULL, scores[c].support);
	}
	put_class_averages(out, "macro", &macro);
	put_class_averages(out, "weighted", &weighted);
	put_metric(out, "log_loss", NULL, NULL, pgdl_metrics_log_loss(pr->y, pr->p, pr->w, pr->n, k));
	if (!pgdl_metrics_ranking(pr->y, pr->p, pr->w, pr->n, k, auc, ap, &roc_auc, &average_precision))
		out_of_memory();
	if (k > 2)
		for (int c = 0; c < k; c++)
		{
			put_metric(out, "roc_auc", class_name(ds, pr, c), NULL, auc[c]);
			put_metric(out, "average_precision", class_name(ds, pr, c), NULL, ap[c]);
		}
	put_metric(out, "roc_auc", NULL, k > 2 ? "macro" : NULL, roc_auc);
	put_metric(out, "average_precision", NULL, k > 2 ? "macro" : NULL, average_precision);
}

/* A multi-label model: per label (its number), and the macro average; accuracy is every label right. */
static void
label_metrics(MetricRows *out, const Predictions *pr)
{
	PgdlMetricsBinary sum = {0};
	double		exact = 0.0;

	for (int l = 0; l < pr->k; l++)
	{
		PgdlMetricsBinary b;
		char	   *label = psprintf("%d", l + 1);

		if (!pgdl_metrics_binary_label(pr->t + l, pr->p + l, pr->w, pr->n, pr->k, &b))
			out_of_memory();
		put_metric(out, "accuracy", label, NULL, b.accuracy);
		put_metric(out, "precision", label, NULL, b.precision);
		put_metric(out, "recall", label, NULL, b.recall);
		put_metric(out, "f1", label, NULL, b.f1);
		put_metric(out, "roc_auc", label, NULL, b.roc_auc);
		put_metric(out, "average_precision", label, NULL, b.average_precision);
		sum.precision += b.precision;
		sum.recall += b.recall;
		sum.f1 += b.f1;
		sum.roc_auc += b.roc_auc;
		sum.average_precision += b.average_precision;
	}
	for (int64 r = 0; r < pr->n; r++)
	{
		bool		right = true;

		for (int l = 0; l < pr->k && right; l++)
			right = (pr->p[r * pr->k + l] > 0.5) == (pr->t[r * pr->k + l] > 0.5);
		if (right)
			exact += pr->w ? pr->w[r] : 1.0;
	}
	put_metric(out, "accuracy", NULL, NULL, exact / pr->weight_sum);
	put_metric(out, "precision", NULL, "macro", sum.precision / pr->k);
	put_metric(out, "recall", NULL, "macro", sum.recall / pr->k);
	put_metric(out, "f1", NULL, "macro", sum.f1 / pr->k);
	put_metric(out, "roc_auc", NULL, "macro", sum.roc_auc / pr->k);
	put_metric(out, "average_precision", NULL, "macro", sum.average_precision / pr->k);
}

static void
put_regression(MetricRows *out, const char *target, const PgdlMetricsRegression *m)
{
	put_metric(out, "mse", target, NULL, m->mse);
	put_metric(out, "rmse", target, NULL, m->rmse);
	put_metric(out, "mae", target, NULL, m->mae);
	put_metric(out, "r2", target, NULL, m->r2);
}

/* A regression model: the uniform average over targets, then each target (its number) when there are several. */
static void
value_metrics(MetricRows *out, const Predictions *pr)
{
	PgdlMetricsRegression *per_target = palloc(sizeof(PgdlMetricsRegression) * pr->k);
	PgdlMetricsRegression average;

	pgdl_metrics_regression(pr->t, pr->p, pr->w, pr->n, pr->k, per_target, &average);
	put_regression(out, NULL, &average);
	for (int c = 0; c < pr->k && pr->k > 1; c++)
		put_regression(out, psprintf("%d", c + 1), &per_target[c]);
}

static Datum
metrics(FunctionCallInfo fcinfo, bool raw)
{
	int32		top_k = PG_GETARG_INT32(raw ? 4 : 2);
	MetricRows	out = {(ReturnSetInfo *) fcinfo->resultinfo};
	MemoryContext callcxt;
	MemoryContext old;
	Predictions pr;
	const PgdlDataset *ds;

	if (top_k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("top_k must be at least 1, not %d", top_k)));
	InitMaterializedSRF(fcinfo, 0);
	pgdl_engine_prepare();
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl metrics", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);
	ds = predict_all(fcinfo, raw, callcxt, &pr);
	if (pr.n > 0)
	{
		if (pr.kind == PREDICT_CLASSES)
			classifier_metrics(&out, ds, &pr, top_k);
		else if (pr.kind == PREDICT_LABELS)
			label_metrics(&out, &pr);
		else
			value_metrics(&out, &pr);
	}
	put_metric(&out, "n", NULL, NULL, (double) pr.n);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(callcxt);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgdl_metrics);
Datum
pgdl_metrics(PG_FUNCTION_ARGS)
{
	return metrics(fcinfo, false);
}

PG_FUNCTION_INFO_V1(pgdl_metrics_rows);
Datum
pgdl_metrics_rows(PG_FUNCTION_ARGS)
{
	return metrics(fcinfo, true);
}

/*
 * ---- pgdl.confusion_matrix: (actual, predicted, count, weight), every pair of classes ----
 * count: the rows; weight: their weights' sum (scikit-learn's matrix with sample_weight), the count
 * again when the data is unweighted.
 */

static Datum
confusion_matrix(FunctionCallInfo fcinfo, bool raw)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext callcxt;
	MemoryContext old;
	Predictions pr;
	const PgdlDataset *ds;
	double	   *counts;
	double	   *weights;

	InitMaterializedSRF(fcinfo, 0);
	pgdl_engine_prepare();
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl confusion_matrix", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);
	ds = predict_all(fcinfo, raw, callcxt, &pr);
	require_classifier(&pr, "a confusion matrix");
	counts = palloc0(sizeof(double) * pr.k * pr.k);
	weights = palloc0(sizeof(double) * pr.k * pr.k);
	if (pr.n > 0)
	{
		pgdl_metrics_confusion_matrix(pr.y, pr.p, NULL, pr.n, pr.k, counts);
		pgdl_metrics_confusion_matrix(pr.y, pr.p, pr.w, pr.n, pr.k, weights);
	}
	for (int a = 0; a < pr.k; a++)
		for (int p = 0; p < pr.k; p++)
		{
			Datum		values[4];
			bool		nulls[4] = {false, false, false, false};

			values[0] = CStringGetTextDatum(class_name(ds, &pr, a));
			values[1] = CStringGetTextDatum(class_name(ds, &pr, p));
			values[2] = Int64GetDatum((int64) counts[a * pr.k + p]);	/* exact: fewer than 2^53 rows */
			values[3] = Float8GetDatum(weights[a * pr.k + p]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(callcxt);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgdl_confusion_matrix);
Datum
pgdl_confusion_matrix(PG_FUNCTION_ARGS)
{
	return confusion_matrix(fcinfo, false);
}

PG_FUNCTION_INFO_V1(pgdl_confusion_matrix_rows);
Datum
pgdl_confusion_matrix_rows(PG_FUNCTION_ARGS)
{
	return confusion_matrix(fcinfo, true);
}

/* ---- pgdl.roc_curve: (threshold, fpr, tpr) of one class against the others ---- */

/* The positive class: named (a class value), or for two classes the second, as scikit-learn's pos_label=1. */
static int
positive_class(const PgdlDataset *ds, const Predictions *pr, const char *positive)
{
	if (positive == NULL && pr->k == 2)
		return 1;
	if (positive == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a ROC curve of %d classes needs a positive class", pr->k),
				 errhint("Name one with positive => '<class value>'.")));
	for (int c = 0; c < pr->k; c++)
		if (strcmp(class_name(ds, pr, c), positive) == 0)
			return c;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("positive class \"%s\" is not one of the model's classes", pgdl_echo(positive)),
			 errdetail("Its classes are the label values of its dataset, as text: \"%s\" to \"%s\".",
					   pgdl_echo(class_name(ds, pr, 0)), pgdl_echo(class_name(ds, pr, pr->k - 1)))));
	return -1;					/* not reached */
}

static Datum
roc_curve(FunctionCallInfo fcinfo, bool raw)
{
	int			positive_arg = raw ? 4 : 2;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext callcxt;
	MemoryContext old;
	Predictions pr;
	const PgdlDataset *ds;
	PgdlMetricsRocPoint *points;
	size_t		n_points = 0;
	int			c;

	InitMaterializedSRF(fcinfo, 0);
	/* not STRICT, for its optional positive class: a NULL in any other argument gives no rows */
	for (int i = 0; i < positive_arg; i++)
		if (PG_ARGISNULL(i))
			return (Datum) 0;
	pgdl_engine_prepare();
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl roc_curve", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);
	ds = predict_all(fcinfo, raw, callcxt, &pr);
	require_classifier(&pr, "a ROC curve");
	c = positive_class(ds, &pr, PG_ARGISNULL(positive_arg) ? NULL :
					   text_to_cstring(PG_GETARG_TEXT_PP(positive_arg)));
	points = MemoryContextAllocHuge(callcxt, sizeof(PgdlMetricsRocPoint) * (pr.n + 1));
	if (pr.n > 0 && !pgdl_metrics_roc_curve(pr.y, pr.p, pr.w, pr.n, pr.k, c, points, &n_points))
		out_of_memory();
	for (size_t i = 0; i < n_points; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, isnan(points[i].fpr), isnan(points[i].tpr)};

		values[0] = Float8GetDatum(points[i].threshold);
		values[1] = Float8GetDatum(points[i].fpr);
		values[2] = Float8GetDatum(points[i].tpr);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(callcxt);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgdl_roc_curve);
Datum
pgdl_roc_curve(PG_FUNCTION_ARGS)
{
	return roc_curve(fcinfo, false);
}

PG_FUNCTION_INFO_V1(pgdl_roc_curve_rows);
Datum
pgdl_roc_curve_rows(PG_FUNCTION_ARGS)
{
	return roc_curve(fcinfo, true);
}

/* ---- pgdl.evaluate_targets: per target, the loss and what scikit-learn scores it by ---- */

#define TARGET_COLUMNS 12

/* columns 4 ..: precision, recall, f1, roc_auc, average_precision, rmse, mae, r2 */
static void
target_scores(const Predictions *pr, int c, Datum *values, bool *nulls)
{
	if (pr->kind == PREDICT_VALUES)
	{
		PgdlMetricsRegression *per_target = palloc(sizeof(PgdlMetricsRegression) * pr->k);
		PgdlMetricsRegression average;

		pgdl_metrics_regression(pr->t, pr->p, pr->w, pr->n, pr->k, per_target, &average);
		values[9] = Float8GetDatum(per_target[c].rmse);
		values[10] = Float8GetDatum(per_target[c].mae);
		values[11] = Float8GetDatum(per_target[c].r2);
		nulls[9] = nulls[10] = false;
		nulls[11] = isnan(per_target[c].r2);
		return;
	}
	if (pr->kind == PREDICT_LABELS)
	{
		PgdlMetricsBinary b;

		if (!pgdl_metrics_binary_label(pr->t + c, pr->p + c, pr->w, pr->n, pr->k, &b))
			out_of_memory();
		values[2] = Float8GetDatum(b.accuracy);
		values[4] = Float8GetDatum(b.precision);
		values[5] = Float8GetDatum(b.recall);
		values[6] = Float8GetDatum(b.f1);
		values[7] = Float8GetDatum(b.roc_auc);
		values[8] = Float8GetDatum(b.average_precision);
		nulls[2] = nulls[4] = nulls[5] = nulls[6] = nulls[8] = false;
		nulls[7] = isnan(b.roc_auc);
	}
}

/* A classifier's one row: its class's accuracy and, for two classes, the scores of the second (scikit-learn's positive). */
static void
classifier_target(const Predictions *pr, Datum *values, bool *nulls)
{
	double	   *counts = palloc0(sizeof(double) * pr->k * pr->k);
	PgdlMetricsClassScores *scores = palloc0(sizeof(PgdlMetricsClassScores) * pr->k);
	PgdlMetricsAverage macro;
	PgdlMetricsAverage weighted;
	double	   *auc = palloc(sizeof(double) * pr->k);
	double	   *ap = palloc(sizeof(double) * pr->k);
	double		roc_auc;
	double		average_precision;

	values[2] = Float8GetDatum(pgdl_metrics_accuracy(pr->y, pr->p, pr->w, pr->n, pr->k));
	nulls[2] = false;
	if (pr->k != 2)
		return;
	pgdl_metrics_confusion_matrix(pr->y, pr->p, pr->w, pr->n, pr->k, counts);
	pgdl_metrics_class_scores(counts, pr->k, scores, &macro, &weighted);
	if (!pgdl_metrics_ranking(pr->y, pr->p, pr->w, pr->n, pr->k, auc, ap, &roc_auc, &average_precision))
		out_of_memory();
	values[4] = Float8GetDatum(scores[1].precision);
	values[5] = Float8GetDatum(scores[1].recall);
	values[6] = Float8GetDatum(scores[1].f1);
	values[7] = Float8GetDatum(roc_auc);
	values[8] = Float8GetDatum(average_precision);
	nulls[4] = nulls[5] = nulls[6] = nulls[8] = false;
	nulls[7] = isnan(roc_auc);
}

/*
 * For a model with several targets (binary_cross_entropy: multi-label;
 * mse: several regression outputs), per target: the mean loss and its
 * scores; a classifier has one row, its class.
 */
PG_FUNCTION_INFO_V1(pgdl_evaluate_targets);
Datum
pgdl_evaluate_targets(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext callcxt;
	MemoryContext old;
	Predictions pr;
	int			rows;

	InitMaterializedSRF(fcinfo, 0);
	pgdl_engine_prepare();
	callcxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl evaluate_targets", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(callcxt);
	(void) predict_all(fcinfo, false, callcxt, &pr);
	rows = pr.n == 0 ? 0 : pr.kind == PREDICT_CLASSES ? 1 : pr.k;
	for (int c = 0; c < rows; c++)
	{
		Datum		values[TARGET_COLUMNS];
		bool		nulls[TARGET_COLUMNS];

		memset(nulls, true, sizeof(nulls));
		values[0] = Int32GetDatum(c + 1);
		values[1] = Float8GetDatum(pr.loss[c] / pr.weight_sum);
		values[3] = Int64GetDatum(pr.n);
		nulls[0] = nulls[1] = nulls[3] = false;
		if (pr.kind == PREDICT_CLASSES)
			classifier_target(&pr, values, nulls);
		else
			target_scores(&pr, c, values, nulls);
		MemoryContextSwitchTo(old);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		MemoryContextSwitchTo(callcxt);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(callcxt);
	return (Datum) 0;
}

/* ---- an epoch's validation scores, for rank_by and monitor ---- */

struct PgdlScores
{
	Predictions pr;
};

PgdlScores *
pgdl_scores_begin(NnModel *model, bool classification, MemoryContext cxt)
{
	PgdlScores *s = MemoryContextAllocZero(cxt, sizeof(PgdlScores));

	predictions_init(&s->pr, model, classification, NULL, cxt);
	return s;
}

void
pgdl_scores_add(PgdlScores *s, const float *x, const float *y, const float *w, int32 n)
{
	keep_buffer(&s->pr, x, y, w, n, false);
}

/* A classifier's scores, as classifier_metrics computes them for pgdl.metrics. */
static void
class_scores(const Predictions *pr, double *scores)
{
	int			k = pr->k;
	double	   *counts = palloc0(sizeof(double) * k * k);
	PgdlMetricsClassScores *per_class = palloc0(sizeof(PgdlMetricsClassScores) * k);
	PgdlMetricsAverage macro;
	PgdlMetricsAverage weighted;

	scores[PGDL_RANK_ACCURACY] = pgdl_metrics_accuracy(pr->y, pr->p, pr->w, pr->n, k);
	pgdl_metrics_confusion_matrix(pr->y, pr->p, pr->w, pr->n, k, counts);
	pgdl_metrics_class_scores(counts, k, per_class, &macro, &weighted);
	scores[PGDL_RANK_F1] = macro.f1;
	scores[PGDL_RANK_F1_WEIGHTED] = weighted.f1;
	scores[PGDL_RANK_PRECISION] = macro.precision;
	scores[PGDL_RANK_RECALL] = macro.recall;
	scores[PGDL_RANK_LOG_LOSS] = pgdl_metrics_log_loss(pr->y, pr->p, pr->w, pr->n, k);
	if (!pgdl_metrics_ranking(pr->y, pr->p, pr->w, pr->n, k, NULL, NULL, &scores[PGDL_RANK_ROC_AUC],
							  &scores[PGDL_RANK_AVERAGE_PRECISION]))
		out_of_memory();
	pfree(counts);
	pfree(per_class);
}

/* scores[PGDL_RANK_N_METRICS]: the kept rows' metrics (loss is left NaN: the caller has its own) */
void
pgdl_scores_finish(PgdlScores *s, double *scores)
{
	const Predictions *pr = &s->pr;

	for (int m = 0; m < PGDL_RANK_N_METRICS; m++)
		scores[m] = get_float8_nan();
	if (pr->n == 0)
		return;
	if (pr->kind == PREDICT_CLASSES)
		class_scores(pr, scores);
	else if (pr->kind == PREDICT_VALUES)
	{
		PgdlMetricsRegression average;

		pgdl_metrics_regression(pr->t, pr->p, pr->w, pr->n, pr->k, NULL, &average);
		scores[PGDL_RANK_MSE] = average.mse;
		scores[PGDL_RANK_RMSE] = average.rmse;
		scores[PGDL_RANK_MAE] = average.mae;
		scores[PGDL_RANK_R2] = average.r2;
	}
}

/* The validation set's scores of `model` (checked to fit vds by the caller), in a context of their own. */
void
pgdl_validation_scores(NnModel *model, const PgdlDataset *vds, double *scores)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl validation scores",
											  ALLOCSET_DEFAULT_SIZES);
	PgdlScores *s = pgdl_scores_begin(model, vds->classification, cxt);

	pgdl_packed_scan(vds, -1, keep_buffer, &s->pr, NULL, NULL);
	pgdl_scores_finish(s, scores);
	MemoryContextDelete(cxt);
}

/*
 * One metric of n rows held in memory (x, y and w as a packed table's
 * buffers hold them; w NULL: unweighted) of dataset ds, as pgdl.metrics
 * scores them (the loss as pgdl.evaluate's), in batches of `batch`; NaN where
 * the metric is not defined for the rows.
 */
double
pgdl_metric_of_rows(NnModel *model, const PgdlDataset *ds, PgdlRankMetric metric, const float *x,
					const float *y, const float *w, int64 n, int32 batch)
{
	MemoryContext cxt;
	PgdlScores	s;
	double		scores[PGDL_RANK_N_METRICS];

	if (metric == PGDL_RANK_LOSS)
		return pgdl_evaluate_loss_of_rows(model, ds, x, y, w, n, batch);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "pgdl metric of rows", ALLOCSET_DEFAULT_SIZES);
	predictions_init(&s.pr, model, ds->classification, ds, cxt);
	for (int64 r = 0; r < n; r += batch)
	{
		int32		c = (int32) Min((int64) batch, n - r);

		keep_buffer(&s.pr, x + r * ds->n_features, y + r * ds->n_targets, w ? w + r : NULL, c, false);
		CHECK_FOR_INTERRUPTS();
	}
	pgdl_scores_finish(&s, scores);
	MemoryContextDelete(cxt);
	return scores[metric];
}
