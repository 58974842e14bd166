/*
 * pack_impute.c -- missing numeric features (impute => 'mean', 'median' or
 * 'constant'): the value each feature's missing values become, learned on the
 * rows packed (or the reference's), and the features that get an indicator;
 * the quantiles that median imputation and robust scaling share; the example's
 * layout once every part of it is known.
 *
 * While reading, a missing value (NULL, a NULL element, NaN) is kept as NaN
 * and counted; the statistics leave it out.  As scikit-learn's SimpleImputer
 * (add_indicator => true, features => 'missing-only'), a feature gets an
 * indicator when it was missing in some row packed, and a feature that is
 * missing in every row has no mean or median: an error.  Quantiles are
 * numpy's default ("linear"): h = q (n - 1), v[floor h] and the next value
 * interpolated as numpy's _lerp does, in double over the float32 values.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"

#include "data/pack.h"

/* {"strategy": s, "values": [...], "indicators": [1-based features]}, floats as their shortest text. */
static Jsonb *
imputation_jsonb(const char *strategy, const float *fill, int32 nf, const int32 *indicators, int32 n_ind)
{
	JsonbParseState *state = NULL;

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	pgdl_jsonb_put_string(&state, "strategy", strategy);
	pgdl_jsonb_put_key(&state, "values");
	(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (int32 j = 0; j < nf; j++)
		pgdl_jsonb_put_float4(&state, NULL, fill[j]);
	(void) pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	pgdl_jsonb_put_key(&state, "indicators");
	(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (int32 i = 0; i < n_ind; i++)
		pgdl_jsonb_put_int(&state, NULL, indicators[i] + 1);
	(void) pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/* numpy's _lerp: a + (b - a) t, or b - (b - a) (1 - t) from t = 0.5 on, which keeps it within [a, b]. */
static double
lerp(double a, double b, double t)
{
	double		diff = b - a;

	return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

void
pgdl_pack_quantiles(const PackData *data, int32 j, float fill, const double *q, int nq, double *out)
{
	int64		n = 0;
	double	   *col;

	/* the rows are read one feature at a time: only from memory */
	if (data->spill != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("impute => 'median' and scaling => 'robust' need the rows in memory"),
				 errdetail("The features of " INT64_FORMAT " rows take more than maintenance_work_mem (%zu kB).",
						   data->n_rows, data->budget / 1024),
				 errhint("Raise maintenance_work_mem, or impute the mean and scale by minimum and range.")));
	col = palloc_extended(mul_size((Size) Max(data->n_rows, 1), sizeof(double)), MCXT_ALLOC_HUGE);
	for (int64 r = 0; r < data->n_rows; r++)
	{
		float		v = pgdl_pack_row_features(data, r)[j];

		if (isnan(v))
			v = fill;
		if (!isnan(v))
			col[n++] = v;
		if ((r & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	qsort(col, n, sizeof(double), cmp_double);
	for (int k = 0; k < nq; k++)
	{
		double		h = q[k] * (double) n + (1.0 - q[k]) - 1.0;	/* numpy's virtual index, alpha = beta = 1 */
		double		lo = floor(h);
		int64		a = (int64) Max(lo, 0.0);
		int64		b = Min(a + 1, n - 1);

		out[k] = n == 0 ? NAN : lerp(col[a], col[b], h - lo);
	}
	pfree(col);
}

/* Feature j is missing in every row: it has no mean or median to fill it with. */
static void
all_missing(const PackData *data, int32 j, const char *strategy)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 data->array_mode
			 ? errmsg("feature %d of \"%s\" is missing in every row", j + 1, data->cols[0].name)
			 : errmsg("feature column \"%s\" is missing in every row", data->cols[j].name),
			 errdetail("There is no %s to impute it with.", strategy),
			 errhint("Impute a constant with impute => 'constant', or leave the column out.")));
}

void
pgdl_pack_make_imputation(const PackArgs *args, const PackData *data, const PackReference *ref, PackNorm *norm)
{
	int32		nf = data->n_features;
	double		half = 0.5;

	if (ref->ds != NULL)
	{
		norm->fill = ref->ds->impute;
		norm->n_indicators = ref->ds->n_indicators;
		norm->indicators = ref->ds->indicators;
		norm->imputation = ref->ds->imputation;
		return;
	}
	if (args->impute == NULL)
		return;
	norm->fill = palloc(sizeof(float) * nf);
	norm->indicators = palloc(sizeof(int32) * nf);
	for (int32 j = 0; j < nf; j++)
	{
		int64		seen = data->n_rows - data->n_missing[j];
		double		median;

		if (seen == 0 && strcmp(args->impute, "constant") != 0)
			all_missing(data, j, args->impute);
		if (strcmp(args->impute, "mean") == 0)
			norm->fill[j] = (float) (data->sum[j] / (double) seen);
		else if (strcmp(args->impute, "median") == 0)
		{
			pgdl_pack_quantiles(data, j, NAN, &half, 1, &median);
			norm->fill[j] = (float) median;
		}
		else
			norm->fill[j] = (float) args->impute_value;
		if (data->n_missing[j] > 0)
			norm->indicators[norm->n_indicators++] = j;
	}
	norm->imputation = imputation_jsonb(args->impute, norm->fill, nf, norm->indicators, norm->n_indicators);
}

void
pgdl_pack_finish_layout(PackData *data, const PackNorm *norm, int32 buffer_rows)
{
	int64		total = (int64) data->n_features + norm->n_indicators;

	for (int c = 0; c < data->n_categorical; c++)
		total += data->cats[c].width;
	for (int s = 0; s < data->n_sequences; s++)
		total += data->seqs[s].length + 1;
	pgdl_pack_check_buffer_size(total, buffer_rows);
	data->n_total = (int32) total;
}

/* The dataset's row, just registered by pgdl_pack_register_dataset, gets its imputation. */
void
pgdl_pack_store_imputation(int64 dataset, Jsonb *imputation)
{
	Oid			types[2] = {JSONBOID, INT8OID};
	Datum		values[2] = {JsonbPGetDatum(imputation), Int64GetDatum(dataset)};
	int			ret;

	if (imputation == NULL)
		return;
	ret = SPI_execute_with_args("UPDATE pgdl.datasets SET imputation = $1 WHERE id = $2",
								2, types, values, NULL, false, 0);
	if (ret != SPI_OK_UPDATE || SPI_processed != 1)
		elog(ERROR, "pgdl.pack: storing the imputation failed: %s", SPI_result_code_string(ret));
}
