/*
 * explain.c -- pgdl.explain: why a model answers what it does for one
 * example, as integrated gradients (the engine's nn/attribution.c) from a
 * baseline: a row per feature of the model's input with x's value, the
 * baseline's, and the feature's attribution.  The attributions sum to f(x) -
 * f(baseline) up to the integration's error (completeness), where f is what
 * pgdl.predict answers: the probability of the explained class, or a
 * regression output in target units.  So a caller checks an explanation with
 * pgdl.predict at x and at the baseline the rows show.
 *
 * The baseline is given in raw features, as x is, and preprocessed as x is.
 * Without one it is the training set's mean: the dataset's recorded mean when
 * it was standardized, else the mean of its packed table's rows (read once per
 * statement and dataset), unscaled back to raw features; a
 * categorical or sequence column's baseline is id 0 (unseen, padding) and a
 * sequence's length 0.  A model blob has no training set: zeros.  The rows
 * are the model's input features: of a dataset that imputes or one-hot
 * encodes, x and the baseline as expanded (imputed, each indicator and
 * one-hot float 0 or 1), not yet scaled.
 *
 * Each call clones the model (pgdl_model_arg_copy): the feature names are a
 * query, after which the cache's model may be gone, and the engine grows the
 * model's workspace by the input's gradient, which the cache's copy should
 * not keep.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"
#include "utils/varlena.h"

#include "base/base.h"
#include "spec/spec.h"
#include "catalog/catalog.h"
#include "data/data.h"
#include "train/train.h"
#include "predict/predict.h"

/* Path points per pass: the workspace pgdl.max_model_memory is checked for (the engine's chunk). */
#define EXPLAIN_BATCH	64

/* What is explained: an output, its probability, or (one binary output's class 0) one minus it. */
typedef struct ExplainWhat
{
	int32		output;
	NnExplainTarget kind;
	bool		complement;
} ExplainWhat;

/*
 * The default baseline of the statement running: the raw features of dataset
 * `dataset`'s training mean.  Not in fn_extra, which the model argument's
 * call site state (model_io.c) owns; kept for one statement of one
 * transaction, so that rows written to the packed table later are seen.
 */
typedef struct BaselineCache
{
	int64		dataset;
	Oid			packed;
	int32		n;
	LocalTransactionId lxid;
	TimestampTz statement;
	float	   *raw;
} BaselineCache;

static BaselineCache baseline_cache;

/* ---- the class or output explained ---- */

/* A list of a model's class names for an error's detail: the first 10. */
static char *
class_list(const PgdlDataset *ds, int n)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int c = 0; c < n && c < 10; c++)
		appendStringInfo(&s, "%s\"%s\"", c > 0 ? ", " : "", pgdl_echo(pgdl_predict_class_name(ds, c)));
	if (n > 10)
		appendStringInfo(&s, " and %d more", n - 10);
	return s.data;
}

/*
 * A classifier's class: named by target (as predict_class names it), or the
 * predicted one for x (outputs z).  Multi-label and regression models: the
 * output `target` numbers, 1-based, or the only one.
 */
static void
explain_what(const PgdlModel *model, const float *z, const char *target, ExplainWhat *w)
{
	const NnModel *m = model->nn;
	int			k = (int) nn_model_output_size(m);
	bool		classes = m->spec.loss == NN_LOSS_CROSS_ENTROPY || (m->spec.loss == NN_LOSS_BCE && k == 1);
	int			n = m->spec.loss == NN_LOSS_CROSS_ENTROPY ? k : 2;
	int			c = -1;

	memset(w, 0, sizeof(ExplainWhat));
	w->kind = nn_loss_is_regression(m->spec.loss) ? NN_EXPLAIN_OUTPUT : NN_EXPLAIN_PROBABILITY;
	if (classes)
	{
		for (int i = 0; target != NULL && i < n && c < 0; i++)
			if (strcmp(pgdl_predict_class_name(model->dataset, i), target) == 0)
				c = i;
		if (target == NULL)
			c = pgdl_model_class_of(m, z, NULL);
		else if (c < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%s\" is not a class of the model", pgdl_echo(target)),
					 errdetail("Its classes are %s.", class_list(model->dataset, n)),
					 errhint("Name a class as pgdl.predict_class returns it.")));
		w->output = m->spec.loss == NN_LOSS_BCE ? 0 : c;
		w->complement = m->spec.loss == NN_LOSS_BCE && c == 0;
		return;
	}
	if (target == NULL && k > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target_class must name one of the model's %d outputs", k),
				 errdetail("A model with loss %s and several outputs explains one output at a time.",
						   nn_loss_name(m->spec.loss)),
				 errhint("Give target_class => '1' for the first output.")));
	if (target != NULL)
	{
		char	   *end;
		long		o = strtol(target, &end, 10);

		if (end == target || *end != '\0' || o < 1 || o > k)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%s\" is not an output of the model", pgdl_echo(target)),
					 errdetail("A model with loss %s names its outputs by number, 1 to %d.",
							   nn_loss_name(m->spec.loss), k)));
		w->output = (int32) o - 1;
	}
}

/* ---- the baseline ---- */

typedef struct MeanScan
{
	double	   *sum;
	int32		n_features;
	int64		rows;
} MeanScan;

static void
mean_buffer(void *arg, const float *x, const float *y, const float *w, int32 n, bool kept)
{
	MeanScan   *ms = arg;

	for (int32 r = 0; r < n; r++)
	{
		for (int32 j = 0; j < ms->n_features; j++)
			ms->sum[j] += x[(int64) r * ms->n_features + j];
		CHECK_FOR_INTERRUPTS();
	}
	ms->rows += n;
}

/* The training set's mean as raw numeric features (0 beyond them), computed once per statement and dataset. */
static const float *
default_baseline(const PgdlDataset *ds)
{
	BaselineCache *bc = &baseline_cache;
	MeanScan	ms = {0};

	if (bc->raw != NULL && bc->dataset == ds->id && bc->packed == ds->packed && bc->n == ds->n_features &&
		bc->lxid == MyProc->lxid && bc->statement == GetCurrentStatementStartTimestamp())
		return bc->raw;
	if (bc->raw != NULL)
		pfree(bc->raw);
	bc->raw = NULL;
	bc->n = ds->n_features;
	bc->dataset = ds->id;
	bc->packed = ds->packed;
	bc->lxid = MyProc->lxid;
	bc->statement = GetCurrentStatementStartTimestamp();
	if (ds->scaling != PGDL_SCALING_STANDARD)
	{
		ms.sum = palloc0(sizeof(double) * ds->n_features);
		ms.n_features = ds->n_features;
		pgdl_packed_scan(ds, -1, mean_buffer, &ms, NULL, NULL);
	}
	/* last: an error above leaves no entry */
	bc->raw = MemoryContextAllocZero(TopMemoryContext, sizeof(float) * ds->n_features);
	if (ds->scaling == PGDL_SCALING_STANDARD)
		memcpy(bc->raw, ds->mean, sizeof(float) * ds->n_numeric);
	/* packed values are x * scale or (x - center) / divisor: undone on their mean */
	for (int32 j = 0; ds->scaling != PGDL_SCALING_STANDARD && j < ds->n_numeric && ms.rows > 0; j++)
		bc->raw[j] = ds->mean != NULL
			? (float) (ms.sum[j] / (double) ms.rows * (double) ds->std[j] + (double) ds->mean[j])
			: (float) (ms.sum[j] / (double) ms.rows / (double) ds->scale);
	return bc->raw;
}

/*
 * The raw baseline, ds's n_raw (or the model's input without a dataset):
 * `given` (x's `numeric` leading features: the rest are ids, 0) or the
 * default.
 */
static float *
explain_baseline(const PgdlModel *model, ArrayType *given, int64 numeric, int64 in)
{
	float	   *raw = palloc0(sizeof(float) * in);
	int64		length;

	if (given != NULL)
	{
		const float *b = pgdl_number_array(given, "baseline", &length);

		if (length != numeric)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("baseline has " INT64_FORMAT " values, x has " INT64_FORMAT, length, numeric),
					 errdetail("The baseline is an example in the model's raw features, as x is.")));
		memcpy(raw, b, sizeof(float) * length);
	}
	else if (model->dataset != NULL)
		memcpy(raw, default_baseline(model->dataset), sizeof(float) * model->dataset->n_numeric);
	return raw;
}

/* ---- feature names ---- */

/*
 * Each feature's name where pack knew it (NULL elsewhere): the numeric
 * columns when the dataset's features were a list of them, the categorical
 * columns, and a sequence column's tokens col[1] .. col[L] and length(col).
 */
static void names_of_columns(const PgdlDataset *ds, char **names, int64 in);

char	  **
pgdl_feature_names(const PgdlDataset *ds, int64 in)
{
	char	  **names = palloc0(sizeof(char *) * in);

	if (ds == NULL)
		return names;
	names_of_columns(ds, names, in);
	return names;
}

/* pgdl_feature_names of a dataset: its numeric columns', indicators', categorical and sequence columns'. */
static void
names_of_columns(const PgdlDataset *ds, char **names, int64 in)
{
	MemoryContext caller = CurrentMemoryContext;
	Datum		arg;
	List	   *cols = NIL;
	int64		j;

	arg = Int64GetDatum(ds->id);
	SPI_connect();
	if (SPI_execute_with_args("SELECT features FROM pgdl.datasets WHERE id = $1", 1, (Oid[]) {INT8OID},
							  &arg, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		char	   *features = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		MemoryContext old = MemoryContextSwitchTo(caller);

		features = features ? pstrdup(features) : NULL;
		if (features == NULL || !SplitIdentifierString(features, ',', &cols) || list_length(cols) != ds->n_numeric)
			cols = NIL;
		for (j = 0; j < list_length(cols); j++)
			names[j] = pstrdup((char *) list_nth(cols, (int) j));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	j = ds->n_numeric;
	for (int32 i = 0; i < ds->n_indicators && j < in; i++, j++)
		if (names[ds->indicators[i]] != NULL)
			names[j] = psprintf("missing(%s)", names[ds->indicators[i]]);
	for (int c = 0; c < ds->n_categorical + ds->n_sequences && j < in; c++)
	{
		const PgdlVocabulary *v = &ds->vocabulary[c];

		if (v->one_hot)
			for (int32 i = 0; i < v->n_values && j < in; i++)
				names[j++] = psprintf("%s=%s", v->column, v->values[i]);
		else if (c < ds->n_categorical)
			names[j++] = pstrdup(v->column);
		else
		{
			for (int32 p = 0; p < v->length && j < in; p++)
				names[j++] = psprintf("%s[%d]", v->column, p + 1);
			if (j < in)
				names[j++] = psprintf("length(%s)", v->column);
		}
	}
}

/* ---- pgdl.explain ---- */

/* The arguments after the model: x, categories and sequences (the categories form), target, baseline, steps. */
typedef struct ExplainArgs
{
	const float *xraw;			/* the example vector, raw: x, or x with its categories' and sequences' ids */
	int64		length;			/* its features */
	int64		numeric;		/* x's own: what a given baseline has */
	ArrayType  *categories;		/* NULL: the x-only form */
	Jsonb	   *sequences;
	char	   *target;			/* NULL: the predicted class */
	ArrayType  *baseline;		/* NULL: the default */
	int32		steps;
	bool		has_nulls;		/* x had a NULL element (NaN in xraw) */
} ExplainArgs;

/* Arguments detoasted before the model is resolved; false when one that has no default is NULL. */
static bool
explain_args(FunctionCallInfo fcinfo, bool categories, ExplainArgs *a)
{
	int			t = categories ? 4 : 2;

	memset(a, 0, sizeof(ExplainArgs));
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(t + 2) || (categories && PG_ARGISNULL(2)))
		return false;
	a->xraw = pgdl_number_array_missing(PG_GETARG_ARRAYTYPE_P(1), "x", &a->length, &a->has_nulls);
	a->numeric = a->length;
	if (categories)
	{
		a->categories = PG_GETARG_ARRAYTYPE_P(2);
		a->sequences = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	}
	a->target = PG_ARGISNULL(t) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(t));
	a->baseline = PG_ARGISNULL(t + 1) ? NULL : PG_GETARG_ARRAYTYPE_P(t + 1);
	a->steps = PG_GETARG_INT32(t + 2);
	if (a->steps < 1 || a->steps > NN_MAX_EXPLAIN_STEPS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("steps must be between 1 and %d, got %d", NN_MAX_EXPLAIN_STEPS, a->steps),
				 errdetail("Integrated gradients average the gradient over steps points of the path from the baseline to x.")));
	return true;
}

/* A float the model read, as the double of its shortest decimal: 29.3, not 29.299999237060547. */
static double
shown_value(float v)
{
	char		buf[FLOAT_SHORTEST_DECIMAL_LEN];

	float_to_shortest_decimal_buf(v, buf);
	return strtod(buf, NULL);
}

/* A raw example vector as the model's input features before scaling (itself, when nothing expands it). */
static const float *
expanded(const PgdlDataset *ds, const float *raw, int64 in)
{
	float	   *x;

	if (ds == NULL || (ds->n_raw == ds->n_features && ds->impute == NULL))
		return raw;
	x = palloc(sizeof(float) * in);
	pgdl_dataset_expand(ds, raw, x, 1);
	return x;
}

/* One row per feature: its number, name, x's raw value, the baseline's, the attribution. */
static void
explain_rows(FunctionCallInfo fcinfo, const PgdlModel *model, const ExplainArgs *a, const float *braw,
			 const float *attr, int64 in)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	  **names = pgdl_feature_names(model->dataset, in);
	const float *xshow = expanded(model->dataset, a->xraw, in);
	const float *bshow = expanded(model->dataset, braw, in);

	for (int64 j = 0; j < in; j++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, names[j] == NULL, false, false, false};

		values[0] = Int32GetDatum((int32) (j + 1));
		values[1] = names[j] ? CStringGetTextDatum(names[j]) : (Datum) 0;
		values[2] = Float8GetDatum(shown_value(xshow[j]));
		values[3] = Float8GetDatum(shown_value(bshow[j]));
		values[4] = Float8GetDatum(attr[j]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * Attributions in pgdl.predict's units: one minus a probability negates
 * them; a standardized target's output is std times the network's.
 */
static void
explain_units(const PgdlModel *model, const ExplainWhat *w, float *attr, int64 in)
{
	const PgdlDataset *ds = model->dataset;
	double		factor = w->complement ? -1.0 : 1.0;

	if (ds != NULL && ds->target_std != NULL && nn_loss_is_regression(model->nn->spec.loss))
		factor = ds->target_std[w->output];
	for (int64 j = 0; j < in; j++)
		attr[j] = (float) (attr[j] * factor);
}

static Datum
explain(FunctionCallInfo fcinfo, bool categories)
{
	ExplainArgs a;
	ExplainWhat w;
	PgdlModel  *model;
	NnModel    *m;
	NnError		err;
	const float *x,
			   *b;
	float	   *braw,
			   *attr;
	double		fx,
				fb;
	int64		in;
	int64		n_raw;

	InitMaterializedSRF(fcinfo, 0);
	if (!explain_args(fcinfo, categories, &a))
		return (Datum) 0;
	pgdl_engine_prepare();
	model = pgdl_model_arg_copy(fcinfo, CurrentMemoryContext);
	pgdl_check_model_usable(model);
	m = model->nn;
	pgdl_check_model_fits(&m->spec, model->dataset);
	pgdl_predict_check_nulls(model->dataset, a.has_nulls, "x");
	if (categories)
	{
		a.xraw = pgdl_predict_encode_inputs(model->dataset, a.xraw, a.length, a.categories, a.sequences,
											"pgdl.explain");
		a.length = model->dataset->n_raw;
	}
	x = pgdl_predict_prepare_features(m, model->dataset, a.xraw, a.length, NULL, "x");
	in = nn_model_input_size(m);
	n_raw = model->dataset != NULL ? model->dataset->n_raw : in;
	braw = explain_baseline(model, a.baseline, a.numeric, n_raw);
	b = pgdl_predict_prepare_features(m, model->dataset, braw, n_raw, palloc(sizeof(float) * in), "baseline");
	pgdl_check_model_input(m, x, 1);
	pgdl_check_model_input(m, b, 1);
	explain_what(model, pgdl_model_outputs(m, x, 1), a.target, &w);
	pgdl_check_model_batch(m, EXPLAIN_BATCH, "the model");
	attr = palloc(sizeof(float) * in);
	if (!nn_model_integrated_gradients(m, x, b, a.steps, w.output, w.kind, attr, &fx, &fb, &err))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("cannot explain the prediction"),
				 errdetail("%c%s.", pg_toupper((unsigned char) err.msg[0]), err.msg + 1)));
	if (!isfinite(fx) || !isfinite(fb))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("the model's output for %s is not a finite number", isfinite(fx) ? "the baseline" : "x"),
				 errdetail("An explanation needs a finite prediction at both ends of its path.")));
	explain_units(model, &w, attr, in);
	explain_rows(fcinfo, model, &a, braw, attr, in);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgdl_explain);
Datum
pgdl_explain(PG_FUNCTION_ARGS)
{
	return explain(fcinfo, false);
}

PG_FUNCTION_INFO_V1(pgdl_explain_categories);
Datum
pgdl_explain_categories(PG_FUNCTION_ARGS)
{
	return explain(fcinfo, true);
}
