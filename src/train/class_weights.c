/*
 * class_weights.c -- a configuration's "class_weight" resolved against the
 * dataset it trains on.
 *
 * "balanced" is scikit-learn's n_samples / (n_classes * count(class)), the
 * counts those of the packed training table's labels (every partition), read
 * once when training starts; a class with no example weighs 1.  An object
 * names labels by their value as text (pgdl.datasets' classes); the classes it
 * does not name weigh 1, and a label the dataset does not have is an error.
 * The weights land in the configuration (n_class_weights), which carries them
 * to every worker; pgdl_train_begin gives them to the model.
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "base/base.h"
#include "catalog/catalog.h"
#include "train/train.h"

/* Each class's examples in the packed table (counts[0 .. n_classes)). */
static void
count_classes(const PgdlDataset *ds, double *counts)
{
	char	   *sql;

	sql = psprintf("SELECT v::int, count(*)::float8 FROM %s, unnest(y) AS v GROUP BY 1",
				   quote_qualified_identifier(get_namespace_name(get_rel_namespace(ds->packed)),
											  get_rel_name(ds->packed)));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "counting the classes of dataset " INT64_FORMAT " failed", ds->id);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		null1,
					null2;
		int32		c = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &null1));
		double		k = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &null2));

		/* pgdl_packed_check_row refuses such a label when training reads it */
		if (!null1 && !null2 && c >= 0 && c < ds->n_classes)
			counts[c] = k;
	}
	SPI_finish();
}

static void
resolve_balanced(PgdlTrainConfig *cfg, const PgdlDataset *ds)
{
	double	   *counts = palloc0(sizeof(double) * ds->n_classes);
	double		total = 0;

	count_classes(ds, counts);
	for (int c = 0; c < ds->n_classes; c++)
		total += counts[c];
	for (int c = 0; c < ds->n_classes; c++)
		cfg->class_weights[c] = counts[c] > 0 ? (float) (total / ((double) ds->n_classes * counts[c])) : 1.0f;
}

/* The class whose label is `label` as text, or -1. */
static int
class_of(const PgdlDataset *ds, const char *label)
{
	for (int c = 0; c < ds->n_classes; c++)
		if (strcmp(ds->classes[c], label) == 0)
			return c;
	return -1;
}

static void
resolve_map(PgdlTrainConfig *cfg, const PgdlDataset *ds)
{
	Jsonb	   *map = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(cfg->class_weight_map)));
	JsonbIterator *it = JsonbIteratorInit(&map->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	StringInfoData unknown;
	int			c = -1;

	initStringInfo(&unknown);
	for (int i = 0; i < ds->n_classes; i++)
		cfg->class_weights[i] = 1.0f;
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			char	   *label = pnstrdup(v.val.string.val, v.val.string.len);

			if ((c = class_of(ds, label)) < 0)
				appendStringInfo(&unknown, "%s\"%s\"", unknown.len ? ", " : "", pgdl_echo(label));
		}
		else if (tok == WJB_VALUE && c >= 0)
			cfg->class_weights[c] = (float) DatumGetFloat8(DirectFunctionCall1(numeric_float8,
																			   NumericGetDatum(v.val.numeric)));
	}
	if (unknown.len > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"class_weight\" names labels the dataset does not have: %s", unknown.data),
				 errdetail("The dataset's %d classes are its label's values as text, such as \"%s\".",
						   ds->n_classes, pgdl_echo(ds->classes[0])),
				 errhint("SELECT classes FROM pgdl.datasets shows them.")));
}

void
pgdl_class_weights_resolve(PgdlTrainConfig *cfg, const PgdlDataset *ds)
{
	cfg->n_class_weights = 0;
	if (cfg->class_weight == PGDL_CLASS_WEIGHT_NONE)
		return;
	if (!ds->classification)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"class_weight\" needs a classification dataset"),
				 errdetail("The dataset of \"%s\" has a regression target: it has no classes to weigh.",
						   pgdl_echo(get_rel_name(ds->packed))),
				 errhint("Train it without \"class_weight\".")));
	if (ds->n_classes > PGDL_MAX_CLASS_WEIGHTS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("\"class_weight\" weighs at most %d classes, the dataset has %d",
						PGDL_MAX_CLASS_WEIGHTS, ds->n_classes)));
	if (cfg->class_weight == PGDL_CLASS_WEIGHT_BALANCED)
		resolve_balanced(cfg, ds);
	else
		resolve_map(cfg, ds);
	cfg->n_class_weights = ds->n_classes;
}

void
pgdl_class_weights_apply(NnModel *model, const PgdlTrainConfig *cfg)
{
	NnError		err;

	if (cfg->class_weight != PGDL_CLASS_WEIGHT_NONE && cfg->n_class_weights == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"class_weight\" is only taken by pgdl.fit and pgdl.fit_multiple"),
				 errdetail("Class weights are resolved against the dataset a model trains on, which the pgdl.train aggregate does not know."),
				 errhint("Train with pgdl.fit or pgdl.fit_multiple.")));
	if (!nn_model_set_class_weights(model, cfg->n_class_weights > 0 ? cfg->class_weights : NULL,
									cfg->n_class_weights, &err))
		pgdl_report_nn_error("training configuration", &err);
}
