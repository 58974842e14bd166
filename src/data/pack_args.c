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
	if (has_ref && args->standardize_target)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("standardize_target cannot be given with a reference"),
				 errdetail("A dataset packed with a reference has its targets scaled as the reference's were."),
				 errhint("Leave standardize_target out.")));
}
