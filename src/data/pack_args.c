/*
 * pack_args.c -- pgdl.pack's arguments, read from the call and checked on
 * their own, before any table is looked at, so that a wrong argument is
 * reported as such rather than as something about the source.
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "data/pack.h"

static void
require_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name)));
}

void
pgdl_pack_read_args(FunctionCallInfo fcinfo, PackArgs *args)
{
	require_arg(fcinfo, 0, "source");
	require_arg(fcinfo, 1, "features");
	require_arg(fcinfo, 2, "label");
	require_arg(fcinfo, 3, "output");
	require_arg(fcinfo, 4, "buffer_rows");
	require_arg(fcinfo, 5, "partitions");
	require_arg(fcinfo, 6, "seed");
	require_arg(fcinfo, 8, "standardize");
	require_arg(fcinfo, 9, "nulls");

	args->source = PG_GETARG_OID(0);
	args->query = NULL;
	args->features = text_to_cstring(PG_GETARG_TEXT_PP(1));
	args->label = text_to_cstring(PG_GETARG_TEXT_PP(2));
	args->output = text_to_cstring(PG_GETARG_TEXT_PP(3));
	args->buffer_rows = PG_GETARG_INT32(4);
	args->partitions = PG_GETARG_INT32(5);
	args->seed = PG_GETARG_INT64(6);
	args->has_scale = !PG_ARGISNULL(7);
	args->scale = args->has_scale ? PG_GETARG_FLOAT8(7) : 1.0;
	args->standardize = PG_GETARG_BOOL(8);
	args->nulls = text_to_cstring(PG_GETARG_TEXT_PP(9));
	args->reference = PG_ARGISNULL(10) ? InvalidOid : PG_GETARG_OID(10);
	/* an older catalog's pgdl.pack has eleven arguments */
	args->categorical = PG_NARGS() <= 11 || PG_ARGISNULL(11) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(11));
	args->max_categories = 10000;
	if (PG_NARGS() > 12)
	{
		require_arg(fcinfo, 12, "max_categories");
		args->max_categories = PG_GETARG_INT32(12);
	}
	args->sequence = PG_NARGS() <= 13 || PG_ARGISNULL(13) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(13));
	args->has_max_length = PG_NARGS() > 14 && !PG_ARGISNULL(14);
	args->max_length = args->has_max_length ? PG_GETARG_INT32(14) : 0;
	/* an older catalog's pgdl.pack has fifteen arguments */
	args->weight = PG_NARGS() <= 15 || PG_ARGISNULL(15) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(15));
	args->standardize_target = false;
	if (PG_NARGS() > 16)
	{
		require_arg(fcinfo, 16, "standardize_target");
		args->standardize_target = PG_GETARG_BOOL(16);
	}
	/* an older catalog's pgdl.pack has seventeen arguments */
	args->impute = PG_NARGS() <= 17 || PG_ARGISNULL(17) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(17));
	args->has_impute_value = PG_NARGS() > 18 && !PG_ARGISNULL(18);
	args->impute_value = args->has_impute_value ? PG_GETARG_FLOAT8(18) : 0.0;
	args->scaling = PG_NARGS() <= 19 || PG_ARGISNULL(19) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(19));
	args->one_hot = PG_NARGS() <= 20 || PG_ARGISNULL(20) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(20));
}

/* impute and impute_value alone. */
static void
check_impute(const PackArgs *args)
{
	if (args->impute != NULL && strcmp(args->impute, "mean") != 0 && strcmp(args->impute, "median") != 0 &&
		strcmp(args->impute, "constant") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid impute value \"%s\"", pgdl_echo(args->impute)),
				 errhint("Use 'mean', 'median' or 'constant', or leave impute out.")));
	if (args->has_impute_value && (args->impute == NULL || strcmp(args->impute, "constant") != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("impute_value is given without impute => 'constant'"),
				 errdetail("Only a constant imputation fills missing values with impute_value."),
				 errhint("Give impute => 'constant', or leave impute_value out.")));
	if (args->has_impute_value && (!isfinite(args->impute_value) || !isfinite((float) args->impute_value)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("impute_value must be a finite real number, not %g", args->impute_value),
				 errdetail("Missing values become it, as a real (float4).")));
}

/* scaling, and what it must agree with: standardize, scale. */
static void
check_scaling(PackArgs *args)
{
	args->scaling_kind = args->standardize ? PGDL_SCALING_STANDARD : PGDL_SCALING_SCALE;
	if (args->scaling == NULL)
		return;
	if (strcmp(args->scaling, "standard") == 0)
		args->scaling_kind = PGDL_SCALING_STANDARD;
	else if (strcmp(args->scaling, "minmax") == 0)
		args->scaling_kind = PGDL_SCALING_MINMAX;
	else if (strcmp(args->scaling, "robust") == 0)
		args->scaling_kind = PGDL_SCALING_ROBUST;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid scaling value \"%s\"", pgdl_echo(args->scaling)),
				 errhint("Use 'standard', 'minmax' or 'robust', or leave scaling out.")));
	if (args->standardize && args->scaling_kind != PGDL_SCALING_STANDARD)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("standardize => true contradicts scaling => '%s'", args->scaling),
				 errdetail("standardize => true is scaling => 'standard'."),
				 errhint("Leave standardize out.")));
	if (args->has_scale)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scale and scaling cannot both be given"),
				 errdetail("Features are either multiplied by scale or scaled per feature, not both.")));
	args->standardize = args->scaling_kind == PGDL_SCALING_STANDARD;
}

/* The arguments alone, before any table is looked at (and nulls read as skip). */
void
pgdl_pack_check_args(PackArgs *args)
{
	bool		has_ref = OidIsValid(args->reference);

	if (args->buffer_rows < 1 || args->buffer_rows > PGDL_MAX_BUFFER_ROWS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("buffer_rows must be between 1 and %d, not %d", PGDL_MAX_BUFFER_ROWS, args->buffer_rows),
				 errdetail("A buffer is at most one training step's minibatch.")));
	if (args->partitions < 1 || args->partitions > PGDL_MAX_PARTITIONS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partitions must be between 1 and %d, not %d", PGDL_MAX_PARTITIONS, args->partitions)));
	if (strcmp(args->nulls, "error") != 0 && strcmp(args->nulls, "skip") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid nulls value \"%s\"", pgdl_echo(args->nulls)),
				 errhint("Use 'error' (the default) or 'skip'.")));
	args->skip = strcmp(args->nulls, "skip") == 0;
	if (args->max_categories < 1 || args->max_categories > PGDL_MAX_CATEGORIES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_categories must be between 1 and %d, not %d", PGDL_MAX_CATEGORIES,
						args->max_categories),
				 errdetail("Categorical ids are carried as float32 values, exact up to 2^24.")));
	if (args->has_max_length && (args->max_length < 1 || args->max_length > PGDL_MAX_SEQUENCE_LENGTH))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_length must be between 1 and %d, not %d", PGDL_MAX_SEQUENCE_LENGTH, args->max_length),
				 errdetail("It is the number of ids a sequence column packs a row; NULL packs the longest array's.")));
	if (args->has_max_length && args->sequence == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_length is given without a sequence column"),
				 errhint("Name the sequence columns with sequence => ..., or leave max_length out.")));
	if (has_ref && args->has_max_length)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_length cannot be given with a reference"),
				 errdetail("A dataset packed with a reference has the reference's sequence lengths."),
				 errhint("Leave max_length out.")));
	if (args->has_scale && args->standardize)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scale and standardize cannot both be given"),
				 errdetail("Features are either multiplied by scale or standardized per feature, not both.")));
	if (args->has_scale && (!isfinite(args->scale) || args->scale == 0 ||
							!isfinite((float) args->scale) || (float) args->scale == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scale must be a finite number other than zero, not %g", args->scale)));
	if (has_ref && (args->has_scale || args->standardize))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scale and standardize cannot be given with a reference"),
				 errdetail("A dataset packed with a reference is normalized as the reference was."),
				 errhint("Leave scale and standardize out.")));
	check_impute(args);
	check_scaling(args);
	if (has_ref && (args->impute != NULL || args->scaling != NULL || args->one_hot != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("impute, scaling and one_hot cannot be given with a reference"),
				 errdetail("A dataset packed with a reference is preprocessed as the reference was."),
				 errhint("Leave impute, scaling and one_hot out.")));
	if (has_ref && args->standardize_target)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("standardize_target cannot be given with a reference"),
				 errdetail("A dataset packed with a reference has its targets scaled as the reference's were."),
				 errhint("Leave standardize_target out.")));
}
