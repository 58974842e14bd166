/*
 * pack_normalize.c -- the normalization of the numeric features: a scale (1 by
 * default), each feature's mean and std (standardize, scaling => 'standard'),
 * minimum and range (scaling => 'minmax'), median and interquartile range
 * (scaling => 'robust'), or the reference's; and of a regression dataset's
 * targets (standardize_target, or the reference's), which predict, evaluate,
 * metrics and export_onnx undo.
 *
 * It is float32 arithmetic, exactly as pgdl_dataset_normalize applies it at
 * prediction time: x * (float) scale, or (x - mean[j]) / std[j] with mean and
 * std (any scaling's center and divisor) stored as the float32 values used
 * here.  A scaling learns on the imputed values (pack_impute.c), as
 * scikit-learn's scalers do after a SimpleImputer; a divisor of 0 (one value
 * only) is 1, as theirs is.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"

#include "data/pack.h"

/* {"scale": s}, s as the shortest text of the double given. */
static Jsonb *
scale_jsonb(double scale)
{
	JsonbParseState *state = NULL;

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_float8(&state, "scale", scale);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/*
 * {"mean": [...], "std": [...]} (or a scaling's other keys), each float as its
 * shortest text, so that it reads back exactly.
 */
static Jsonb *
center_jsonb(const char *center_key, const char *divisor_key, const float *mean, const float *std, int32 nf)
{
	JsonbParseState *state = NULL;

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int which = 0; which < 2; which++)
	{
		const float *v = which == 0 ? mean : std;

		pgdl_jsonb_put_key(&state, which == 0 ? center_key : divisor_key);
		(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
		for (int j = 0; j < nf; j++)
			pgdl_jsonb_put_float4(&state, NULL, v[j]);
		(void) pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	}
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

static Jsonb *
standardize_jsonb(const float *mean, const float *std, int32 nf)
{
	return center_jsonb("mean", "std", mean, std, nf);
}

/* Feature j's value in a row: a missing one (NaN) as its imputed value. */
static inline double
imputed(const PackNorm *norm, int j, float v)
{
	return isnan(v) && norm->fill != NULL ? (double) norm->fill[j] : (double) v;
}

/*
 * Per-feature mean and standard deviation (population: divided by n), in
 * double over the float32 features, stored as float32; a std of 0 becomes 1.
 * The mean is from the sums taken while reading; the deviations from it need
 * a second pass over the rows (pgdl_pack_add_deviations), in the same order
 * whether they are in memory or spilled, so that both give the same bits.
 */
static void
standardize_mean(const PackData *data, PackNorm *norm)
{
	int32		nf = data->n_features;

	norm->mean = palloc(sizeof(float) * nf);
	norm->std = palloc(sizeof(float) * nf);
	norm->ssq = palloc0(sizeof(double) * nf);
	for (int j = 0; j < nf; j++)
	{
		double		sum = data->sum[j];

		/* the missing values count as their imputed value */
		if (data->n_missing != NULL)
			sum += (double) data->n_missing[j] * (double) norm->fill[j];
		norm->mean[j] = (float) (sum / (double) data->n_rows);
	}
}

/* A divisor: 0 (one value only) or not finite is 1, as scikit-learn's _handle_zeros_in_scale. */
static float
divisor(double d)
{
	float		f = (float) d;

	return f > 0 && isfinite(f) ? f : 1.0f;
}

/*
 * scaling => 'minmax': (x - min) / (max - min) per feature, over the imputed
 * values (a missing one is its imputed value, which may widen the range).
 */
static void
minmax(const PackData *data, PackNorm *norm)
{
	int32		nf = data->n_features;

	norm->mean = palloc(sizeof(float) * nf);
	norm->std = palloc(sizeof(float) * nf);
	for (int j = 0; j < nf; j++)
	{
		double		lo = data->fmin[j];
		double		hi = data->fmax[j];

		if (data->n_missing != NULL && data->n_missing[j] > 0)
		{
			lo = data->n_missing[j] == data->n_rows ? norm->fill[j] : Min(lo, (double) norm->fill[j]);
			hi = data->n_missing[j] == data->n_rows ? norm->fill[j] : Max(hi, (double) norm->fill[j]);
		}
		norm->mean[j] = (float) lo;
		norm->std[j] = divisor(hi - lo);
	}
	norm->jsonb = center_jsonb("min", "range", norm->mean, norm->std, nf);
}

/* scaling => 'robust': (x - median) / (q75 - q25) per feature, over the imputed values. */
static void
robust(const PackData *data, PackNorm *norm)
{
	int32		nf = data->n_features;
	static const double q[3] = {0.25, 0.5, 0.75};

	norm->mean = palloc(sizeof(float) * nf);
	norm->std = palloc(sizeof(float) * nf);
	for (int j = 0; j < nf; j++)
	{
		double		v[3];

		pgdl_pack_quantiles(data, j, norm->fill != NULL ? norm->fill[j] : NAN, q, 3, v);
		norm->mean[j] = (float) v[1];
		norm->std[j] = divisor(v[2] - v[0]);
	}
	norm->jsonb = center_jsonb("median", "iqr", norm->mean, norm->std, nf);
}

/* A PgdlSpillRowFn: row x's squared deviations from the mean, into norm->ssq. */
void
pgdl_pack_add_deviations(void *arg, int64 row, const float *x)
{
	PackNorm   *norm = (PackNorm *) arg;

	for (int j = 0; j < norm->n_features; j++)
	{
		double		dev = imputed(norm, j, x[j]) - (double) norm->mean[j];

		norm->ssq[j] += dev * dev;
	}
}

/* The std, once every row's deviations are in (the rows in memory are added here). */
void
pgdl_pack_finish_normalization(const PackData *data, PackNorm *norm)
{
	if (norm->ssq == NULL)
		return;
	if (data->spill == NULL)
		for (int64 r = 0; r < data->n_rows; r++)
		{
			if ((r & 255) == 0)
				CHECK_FOR_INTERRUPTS();
			pgdl_pack_add_deviations(norm, r, pgdl_pack_row_features(data, r));
		}
	for (int j = 0; j < data->n_features; j++)
	{
		float		s = (float) sqrt(norm->ssq[j] / (double) data->n_rows);

		norm->std[j] = (s > 0 && isfinite(s)) ? s : 1.0f;
	}
	norm->ssq = NULL;
	norm->jsonb = standardize_jsonb(norm->mean, norm->std, data->n_features);
}

/*
 * Whether features packed as they are span scales too different for a network
 * to train well on: among the features that are not constant, with M_j =
 * max(|min_j|, |max_j|), the largest M_j is above PGDL_PACK_SCALE_LARGEST
 * (1000), or above PGDL_PACK_SCALE_RATIO (100) times the smallest M_j (breast
 * cancer's features reach 4254 and 0.05).  *big and *small (0-based) are
 * the features of the largest and smallest M_j.  Pure, for the tests.
 */
bool
pgdl_pack_scales_differ(const float *fmin, const float *fmax, int32 n, int32 *big, int32 *small)
{
	double		largest = 0;
	double		smallest = 0;

	*big = *small = -1;
	for (int32 j = 0; j < n; j++)
	{
		double		m = Max(fabs((double) fmin[j]), fabs((double) fmax[j]));

		if (!(fmin[j] < fmax[j]) || !isfinite(m))
			continue;			/* constant (or no rows): no scale of its own */
		if (*big < 0 || m > largest)
			largest = m, *big = j;
		if (*small < 0 || m < smallest)
			smallest = m, *small = j;
	}
	return *big >= 0 &&
		(largest > PGDL_PACK_SCALE_LARGEST || largest > PGDL_PACK_SCALE_RATIO * smallest);
}

/* A NOTICE when features packed without scale or standardize span very different scales. */
static void
notice_scales(const PackData *data)
{
	int32		big;
	int32		small;
	double		largest;
	double		smallest;

	if (data->fmin == NULL || data->n_features <= 0 ||
		!pgdl_pack_scales_differ(data->fmin, data->fmax, data->n_features, &big, &small))
		return;
	largest = Max(fabs(data->fmin[big]), fabs(data->fmax[big]));
	smallest = Max(fabs(data->fmin[small]), fabs(data->fmax[small]));
	ereport(NOTICE,
			(big == small || largest <= PGDL_PACK_SCALE_RATIO * smallest ?
			 errmsg("feature %d is packed unscaled with values up to %g", big + 1, largest) :
			 errmsg("the features span very different scales: feature %d reaches %g, feature %d only %g",
					big + 1, largest, small + 1, smallest),
			 errdetail("They are packed as they are, and a network trains poorly on features of very different "
					   "sizes or on values above %g.", (double) PGDL_PACK_SCALE_LARGEST),
			 errhint("Pack with standardize => true, or give a scale.")));
}

/*
 * The normalization: the reference's, the features' mean and std, or a scale
 * (1 by default).  Standardizing sets the mean here and the std in
 * pgdl_pack_finish_normalization.
 */
void
pgdl_pack_make_normalization(const PackArgs *args, const PackData *data, const PackReference *ref, PackNorm *norm)
{
	memset(norm, 0, sizeof(PackNorm));
	norm->scale = 1.0f;
	norm->n_features = data->n_features;
	pgdl_pack_make_imputation(args, data, ref, norm);
	if (ref->ds != NULL)
	{
		norm->scale = ref->ds->scale;
		norm->mean = ref->ds->mean;
		norm->std = ref->ds->std;
		norm->jsonb = ref->ds->normalization;
	}
	else if (args->scaling_kind == PGDL_SCALING_MINMAX)
		minmax(data, norm);
	else if (args->scaling_kind == PGDL_SCALING_ROBUST)
		robust(data, norm);
	else if (args->standardize)
		standardize_mean(data, norm);
	else
	{
		norm->scale = (float) args->scale;
		norm->jsonb = scale_jsonb(args->scale);
		if (!args->has_scale)
			notice_scales(data);
	}
}

static inline float
normalized(const PackNorm *norm, int j, float v)
{
	return norm->mean != NULL ? (v - norm->mean[j]) / norm->std[j] : v * norm->scale;
}

/*
 * Normalized features must stay finite.  The normalization is monotonic in x,
 * so each feature's smallest and largest values decide, and its imputed value.
 */
void
pgdl_pack_check_normalized(const PackData *data, const PackNorm *norm)
{
	for (int j = 0; j < data->n_features; j++)
	{
		bool		seen = data->fmin[j] <= data->fmax[j];	/* not every value missing */

		if ((seen && (!isfinite(normalized(norm, j, data->fmin[j])) ||
					  !isfinite(normalized(norm, j, data->fmax[j])))) ||
			(norm->fill != NULL && !isfinite(normalized(norm, j, norm->fill[j]))))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("normalized feature %d is out of the range of real", j + 1),
					 errdetail("Its values from %g to %g become infinite once normalized.",
							   norm->fill != NULL ? Min(data->fmin[j], norm->fill[j]) : data->fmin[j],
							   norm->fill != NULL ? Max(data->fmax[j], norm->fill[j]) : data->fmax[j])));
	}
}

/* ---- the targets: standardize_target ---- */

void
pgdl_pack_check_standardize_target(const PackArgs *args, const PackData *data)
{
	if (!args->standardize_target)
		return;
	if (data->classification)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("standardize_target needs a regression target"),
				 errdetail("Label column \"%s\" is packed as classes, which are not numbers to scale.",
						   data->label.name),
				 errhint("Leave standardize_target out, or give a real or double precision label.")));
	for (int i = 0; i < data->n_label_cols; i++)
		if (data->labels[i].kind == PACK_BOOL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("standardize_target cannot scale boolean target \"%s\"", data->labels[i].name),
					 errdetail("Boolean targets are labels of 0 or 1 for binary_cross_entropy, not values to scale."),
					 errhint("Leave standardize_target out.")));
}

/*
 * Each target's mean and std (population), in double over the float32
 * targets, stored as float32 (a std of 0 or not finite becomes 1), and y
 * standardized in place with those floats, as pgdl_dataset_unscale_targets
 * undoes it.  Rows in the order read: the same bits whatever the shuffle.
 */
static void
target_mean_std(const PackData *data, const float *y, int k, float *mean, float *std)
{
	for (int c = 0; c < k; c++)
	{
		double		sum = 0.0;
		double		ssq = 0.0;

		for (int64 r = 0; r < data->n_rows; r++)
			sum += (double) y[r * k + c];
		mean[c] = (float) (sum / (double) data->n_rows);
		for (int64 r = 0; r < data->n_rows; r++)
		{
			double		dev = (double) y[r * k + c] - (double) mean[c];

			if ((r & 65535) == 0)
				CHECK_FOR_INTERRUPTS();
			ssq += dev * dev;
		}
		std[c] = (float) sqrt(ssq / (double) data->n_rows);
		if (!(std[c] > 0.0f) || !isfinite(std[c]))
			std[c] = 1.0f;
	}
}

Jsonb *
pgdl_pack_standardize_targets(const PackArgs *args, const PackData *data, const PackReference *ref, float *y)
{
	int			k = data->n_targets;
	const float *mean;
	const float *std;
	Jsonb	   *jsonb;

	if (data->classification || data->n_rows == 0)
		return NULL;
	if (ref->ds != NULL)
	{
		if (ref->ds->target_mean == NULL)
			return NULL;
		mean = ref->ds->target_mean;
		std = ref->ds->target_std;
		jsonb = ref->ds->target_normalization;
	}
	else if (args->standardize_target)
	{
		float	   *m = palloc(sizeof(float) * k);
		float	   *s = palloc(sizeof(float) * k);

		target_mean_std(data, y, k, m, s);
		mean = m;
		std = s;
		jsonb = standardize_jsonb(m, s, k);
	}
	else
		return NULL;
	for (int64 r = 0; r < data->n_rows; r++)
		for (int c = 0; c < k; c++)
		{
			float		v = (y[r * k + c] - mean[c]) / std[c];

			if (!isfinite(v))
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("standardized target %d is out of the range of real", c + 1),
						 errdetail("Its value %g becomes infinite once standardized.", y[r * k + c])));
			y[r * k + c] = v;
		}
	return jsonb;
}

/* The dataset's row, just registered by pgdl_pack_register_dataset, gets its targets' scaling. */
void
pgdl_pack_store_target_normalization(int64 dataset, Jsonb *target_normalization)
{
	Oid			types[2] = {JSONBOID, INT8OID};
	Datum		values[2] = {JsonbPGetDatum(target_normalization), Int64GetDatum(dataset)};
	int			ret;

	if (target_normalization == NULL)
		return;
	ret = SPI_execute_with_args("UPDATE pgdl.datasets SET target_normalization = $1 WHERE id = $2",
								2, types, values, NULL, false, 0);
	if (ret != SPI_OK_UPDATE || SPI_processed != 1)
		elog(ERROR, "pgdl.pack: storing the targets' scaling failed: %s", SPI_result_code_string(ret));
}
