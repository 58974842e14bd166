/*
 * metrics.h -- evaluation metrics as scikit-learn 1.2.1 defines them, in plain C
 * (train/metrics.c; the rules and where each differs are in its banner).
 *
 * Private to train/ and free of PostgreSQL, so that regress/unit tests it against
 * scikit-learn's own values.  Callers check sizes first: n >= 1 rows,
 * n_classes >= 2, labels in 0..n_classes-1, finite scores.  A function that
 * allocates returns false when out of memory, having written nothing useful.
 *
 * Every metric takes w, each row's weight (finite, >= 0), as scikit-learn's
 * sample_weight, or NULL: every row weighs 1, and the result is the unweighted
 * one bit for bit.
 */
#ifndef PGDL_TRAIN_METRICS_H
#define PGDL_TRAIN_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* precision, recall, F1 (zero_division=0) and support of one class */
typedef struct PgdlMetricsClassScores
{
	double		precision;
	double		recall;
	double		f1;
	double		support;		/* rows whose label is the class (their weights' sum) */
} PgdlMetricsClassScores;

/* an average over classes of the scores above */
typedef struct PgdlMetricsAverage
{
	double		precision;
	double		recall;
	double		f1;
} PgdlMetricsAverage;

/* one point of a ROC curve */
typedef struct PgdlMetricsRocPoint
{
	double		threshold;		/* scores >= threshold count as positive */
	double		fpr;
	double		tpr;
} PgdlMetricsRocPoint;

/* one label of a multi-label model, scored as its own binary problem */
typedef struct PgdlMetricsBinary
{
	double		accuracy;		/* at p > 0.5 */
	double		precision;		/* at p > 0.5 */
	double		recall;			/* at p > 0.5 */
	double		f1;				/* at p > 0.5 */
	double		roc_auc;		/* NaN when one class only */
	double		average_precision;	/* 0 when no positive */
} PgdlMetricsBinary;

/* one regression target, or the uniform average over targets */
typedef struct PgdlMetricsRegression
{
	double		mse;
	double		rmse;			/* the average's: mean of the targets' rmse */
	double		mae;
	double		r2;				/* NaN when n < 2 */
} PgdlMetricsRegression;

/*
 * Classification: y[i] in 0..n_classes-1, p[i * n_classes + c] the probability
 * of class c (a binary model passes n_classes = 2 with rows [1 - p, p]).
 */
/* argmax of one row, the lowest index winning ties */
extern int	pgdl_metrics_predicted_class(const double *p_row, int n_classes);
/* share of rows whose predicted class is their label */
extern double pgdl_metrics_accuracy(const int32_t *y, const double *p, const double *w, size_t n,
									int n_classes);
/* share of rows whose label is among the k highest scores (NaN when k < 1) */
extern double pgdl_metrics_top_k_accuracy(const int32_t *y, const double *p, const double *w, size_t n,
										  int n_classes, int k);
/* counts[actual * n_classes + predicted], n_classes x n_classes: rows (exact up to 2^53), or weights */
extern void pgdl_metrics_confusion_matrix(const int32_t *y, const double *p, const double *w, size_t n,
										  int n_classes, double *counts);
/* per_class[n_classes] from a confusion matrix; macro and weighted (by support) may be NULL */
extern void pgdl_metrics_class_scores(const double *counts, int n_classes,
									  PgdlMetricsClassScores *per_class,
									  PgdlMetricsAverage *macro, PgdlMetricsAverage *weighted);
/* mean cross-entropy, probabilities clipped to [DBL_EPSILON, 1 - DBL_EPSILON] and renormalized */
extern double pgdl_metrics_log_loss(const int32_t *y, const double *p, const double *w, size_t n,
									int n_classes);
/*
 * ROC AUC and average precision of each class against the rest (the per-class
 * arrays, n_classes entries, may be NULL) and the summaries: class 1's when
 * n_classes = 2, else the macro means.  Rows of weight 0 are left out, as
 * scikit-learn leaves them out of its curves.  False when out of memory.
 */
extern bool pgdl_metrics_ranking(const int32_t *y, const double *p, const double *w, size_t n, int n_classes,
								 double *roc_auc_per_class, double *average_precision_per_class,
								 double *roc_auc, double *average_precision);
/*
 * The ROC curve of positive_class against the rest into points (capacity
 * n + 1), *n_points of them, thresholds decreasing; none when every weight is
 * 0.  False when out of memory.
 */
extern bool pgdl_metrics_roc_curve(const int32_t *y, const double *p, const double *w, size_t n, int n_classes,
								   int positive_class, PgdlMetricsRocPoint *points, size_t *n_points);

/*
 * One label of a multi-label model: target[i * stride] 0 or 1 (positive when
 * > 0.5), p[i * stride] its probability, w[i] its weight.  False when out of
 * memory.
 */
extern bool pgdl_metrics_binary_label(const double *target, const double *p, const double *w, size_t n,
									  size_t stride, PgdlMetricsBinary *out);

/*
 * Regression: y and pred row-major n x n_targets; per_target (n_targets
 * entries, may be NULL) and their uniform average.
 */
extern void pgdl_metrics_regression(const double *y, const double *pred, const double *w, size_t n,
									int n_targets, PgdlMetricsRegression *per_target,
									PgdlMetricsRegression *average);

#endif
