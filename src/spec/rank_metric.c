/*
 * rank_metric.c -- the validation metrics that rank models (fit_multiple's
 * rank_by) and that early stopping watches ("monitor"): their names, their
 * direction and the task they suit.
 *
 * A name is pgdl.metrics's (docs/reference/metrics.md), averaged as
 * scikit-learn's *_score defaults do for one number: f1, precision and recall
 * are macro averages (f1_weighted the support-weighted one); roc_auc and
 * average_precision are class 1's on two classes, the one-vs-rest macro mean
 * on more.  "loss" is the model's own validation loss; "validation_loss" and
 * "validation_accuracy" are monitor's names of loss and accuracy.
 */
#include "postgres.h"

#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "base/base.h"
#include "spec/spec.h"

typedef enum RankTask
{
	TASK_ANY,
	TASK_CLASSIFIER,
	TASK_REGRESSION
} RankTask;

typedef struct RankMetricInfo
{
	const char *name;
	bool		higher_better;
	RankTask	task;
} RankMetricInfo;

static const RankMetricInfo rank_metrics[PGDL_RANK_N_METRICS] = {
	[PGDL_RANK_LOSS] = {"loss", false, TASK_ANY},
	[PGDL_RANK_ACCURACY] = {"accuracy", true, TASK_CLASSIFIER},
	[PGDL_RANK_F1] = {"f1", true, TASK_CLASSIFIER},
	[PGDL_RANK_F1_WEIGHTED] = {"f1_weighted", true, TASK_CLASSIFIER},
	[PGDL_RANK_PRECISION] = {"precision", true, TASK_CLASSIFIER},
	[PGDL_RANK_RECALL] = {"recall", true, TASK_CLASSIFIER},
	[PGDL_RANK_ROC_AUC] = {"roc_auc", true, TASK_CLASSIFIER},
	[PGDL_RANK_AVERAGE_PRECISION] = {"average_precision", true, TASK_CLASSIFIER},
	[PGDL_RANK_LOG_LOSS] = {"log_loss", false, TASK_CLASSIFIER},
	[PGDL_RANK_MSE] = {"mse", false, TASK_REGRESSION},
	[PGDL_RANK_RMSE] = {"rmse", false, TASK_REGRESSION},
	[PGDL_RANK_MAE] = {"mae", false, TASK_REGRESSION},
	[PGDL_RANK_R2] = {"r2", true, TASK_REGRESSION},
};

bool
pgdl_rank_metric_parse(const char *name, PgdlRankMetric *out)
{
	if (strcmp(name, "validation_loss") == 0)
		name = "loss";
	else if (strcmp(name, "validation_accuracy") == 0)
		name = "accuracy";
	for (int m = 0; m < PGDL_RANK_N_METRICS; m++)
		if (strcmp(name, rank_metrics[m].name) == 0)
		{
			*out = (PgdlRankMetric) m;
			return true;
		}
	return false;
}

const char *
pgdl_rank_metric_name(PgdlRankMetric m)
{
	return (m >= 0 && m < PGDL_RANK_N_METRICS) ? rank_metrics[m].name : "loss";
}

bool
pgdl_rank_metric_higher_better(PgdlRankMetric m)
{
	return m >= 0 && m < PGDL_RANK_N_METRICS && rank_metrics[m].higher_better;
}

/* Whether an epoch's validation pass must keep its predictions to score m (loss and accuracy come free). */
bool
pgdl_rank_metric_needs_scores(PgdlRankMetric m)
{
	return m != PGDL_RANK_LOSS && m != PGDL_RANK_ACCURACY;
}

char *
pgdl_rank_metric_list(void)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int m = 0; m < PGDL_RANK_N_METRICS; m++)
		appendStringInfo(&s, "%s%s", m > 0 ? ", " : "", rank_metrics[m].name);
	return s.data;
}

PgdlRankMetric
pgdl_rank_metric_arg(const char *what, const char *name)
{
	PgdlRankMetric m;

	if (!pgdl_rank_metric_parse(name, &m))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown %s \"%s\"", what, pgdl_echo(name)),
				 errdetail("Known metrics: %s.", pgdl_rank_metric_list())));
	return m;
}

void
pgdl_rank_metric_check_task(PgdlRankMetric m, bool classification, const char *what)
{
	RankTask	task = rank_metrics[m].task;

	if (task == TASK_ANY || (task == TASK_CLASSIFIER) == classification)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s \"%s\" does not suit a %s dataset", what, rank_metrics[m].name,
					classification ? "classification" : "regression"),
			 errdetail("%s is a %s metric.", rank_metrics[m].name,
					   task == TASK_CLASSIFIER ? "classification" : "regression"),
			 errhint(classification ? "Rank a classifier by loss, accuracy, f1, f1_weighted, precision, recall, roc_auc, average_precision or log_loss." :
					 "Rank a regression model by loss, mse, rmse, mae or r2.")));
}

/*
 * pgdl.rank_metrics(): the table above as rows, so that SQL that ranks models
 * (pgdl.automl across its rounds) reads the direction from here.
 */
PG_FUNCTION_INFO_V1(pgdl_rank_metrics);
Datum
pgdl_rank_metrics(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	static const char *const tasks[] = {"any", "classification", "regression"};

	InitMaterializedSRF(fcinfo, 0);
	for (int m = 0; m < PGDL_RANK_N_METRICS; m++)
	{
		Datum		values[3];
		bool		nulls[3] = {0};

		values[0] = CStringGetTextDatum(rank_metrics[m].name);
		values[1] = BoolGetDatum(rank_metrics[m].higher_better);
		values[2] = CStringGetTextDatum(tasks[rank_metrics[m].task]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
