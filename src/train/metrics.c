/*
 * metrics.c -- evaluation metrics, each equal to a scikit-learn 1.2.1 function
 * (regress/unit/test_metrics.c checks them against the values gen_metrics.py
 * has scikit-learn compute, within 1e-9).
 *
 * Classification over n rows, k = n_classes >= 2 classes, labels 0..k-1 given
 * to scikit-learn as `labels=range(k)`; the predicted class is the argmax of a
 * row, the lowest index winning ties (numpy's argmax):
 * - accuracy                 accuracy_score(y, argmax(p))
 * - top-k accuracy           top_k_accuracy_score(y, p, k=top, labels=range(k)): a row hits when fewer
 *                            than `top` classes rank above its label, where class c ranks above class y
 *                            when p_c > p_y, or p_c == p_y and c > y (scikit-learn's stable argsort,
 *                            reversed, puts the higher index first among ties); top >= k hits always.
 *                            k = 2 follows scikit-learn's binary branch on p[:, 1]: top >= 2 hits always,
 *                            top = 1 predicts 1 when p1 > 0.5 (0 when a p1 lies outside [0, 1]).
 * - confusion matrix         confusion_matrix(y, argmax(p), labels=range(k)): row actual, column predicted
 * - per class, macro, weighted precision_recall_fscore_support(..., average=None | 'macro' | 'weighted',
 *                            zero_division=0): 0 where a denominator is 0; F1 = 2PR / (P + R), 0 when
 *                            P + R = 0; macro counts every class of 0..k-1, present or not
 * - log loss                 log_loss(y, p, labels=range(k)), eps 'auto' = DBL_EPSILON: each probability
 *                            clipped to [eps, 1 - eps], then each row divided by its clipped sum
 * - ROC AUC                  per class roc_auc_score(y == c, p[:, c]); the summary is class 1's for k = 2
 *                            (roc_auc_score(y, p[:, 1])), else roc_auc_score(y, p, multi_class='ovr',
 *                            average='macro'); computed as the trapezoid over the curve of groups of
 *                            equal scores (exact counts, divided once), which is roc_curve then auc.
 *                            A class absent from y, or the label of every row, has NaN (scikit-learn
 *                            raises), and so then has the macro average.
 * - average precision        per class average_precision_score(y == c, p[:, c]); summary class 1's for
 *                            k = 2, else average_precision_score(label_binarize(y, range(k)), p,
 *                            average='macro'): the step sum over groups of equal scores of
 *                            (recall step) x precision, no interpolation.  A class with no positive row
 *                            has 0, as scikit-learn returns (recall set to 1, with a warning).
 * - ROC curve                roc_curve(y == c, p[:, c]) with drop_intermediate=True: groups of equal
 *                            scores, each threshold the group's score; a point is dropped when the
 *                            second differences of both fps and tps are 0 there (first and last kept);
 *                            then (thresholds[0] + 1, 0, 0) first; fpr (tpr) NaN when no negative
 *                            (positive) row.
 * One label of a multi-label model: the binary metrics above with positive = target > 0.5 and predicted
 * positive = p > 0.5 (logit > 0): accuracy_score, precision/recall/f1_score (zero_division=0),
 * roc_auc_score (NaN on one class) and average_precision_score (0 with no positive).
 * Regression, per target and as multioutput='uniform_average' (the plain mean over targets):
 * mean_squared_error, its square root (the average is the mean of the targets' roots, as
 * squared=False in 1.2), mean_absolute_error, r2_score(force_finite=True): 1 - SSres / SStot; where
 * SStot = 0 it is 1 for a perfect fit, else 0; NaN when n < 2.  A target whose values are all equal
 * has SStot = 0 exactly here, where numpy's rounded mean can leave a tiny SStot and a huge score.
 *
 * Weighted (w, scikit-learn's sample_weight): a row counts as its weight wherever it counted as 1 --
 * accuracy, top-k accuracy and log loss are weighted means (sum w x score / sum w), the confusion
 * matrix holds weights, so precision, recall and F1 come from weighted counts and support is the
 * weights' sum (the 'weighted' average's weights); the curves' fps and tps are cumulative weights,
 * rows of weight 0 left out first (_binary_clf_curve drops them, so they make no threshold);
 * regression errors are weighted means and R² = 1 - sum w (y - pred)^2 / sum w (y - mean_w)^2, a
 * target constant over its rows of positive weight having SStot = 0.  All weights 0: the means are
 * NaN (scikit-learn divides by zero), the curves empty.  w NULL is weight 1 everywhere: x 1 and a
 * sum of ones are exact, so the unweighted results are unchanged bit for bit.
 *
 * Reproducible bit for bit: sums run in row order (then class or target order), sorting is qsort
 * with a total order (score descending, then row index), and every division by a count comes last.
 * Scores must be finite (scikit-learn refuses others); a NaN sorts after every number.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "train/metrics.h"

/* a row as the ranking metrics see it for one class or label */
typedef struct ScoredRow
{
	double		score;
	double		weight;
	size_t		index;
	bool		positive;
} ScoredRow;

/* row i's weight: w[i], or 1 without weights */
static inline double
weight_of(const double *w, size_t i)
{
	return w ? w[i] : 1.0;
}

int
pgdl_metrics_predicted_class(const double *p_row, int n_classes)
{
	int			best = 0;

	for (int c = 1; c < n_classes; c++)
		if (p_row[c] > p_row[best])
			best = c;
	return best;
}

double
pgdl_metrics_accuracy(const int32_t *y, const double *p, const double *w, size_t n, int n_classes)
{
	double		hits = 0.0,
				total = 0.0;

	for (size_t i = 0; i < n; i++)
	{
		total += weight_of(w, i);
		if (pgdl_metrics_predicted_class(p + i * n_classes, n_classes) == y[i])
			hits += weight_of(w, i);
	}
	return n > 0 ? hits / total : NAN;
}

/* scikit-learn's binary branch: the rows' p1 against 0.5 (or 0, when one lies outside [0, 1]) */
static double
top_1_accuracy_binary(const int32_t *y, const double *p, const double *w, size_t n)
{
	double		lowest = p[1],
				highest = p[1],
				threshold,
				hits = 0.0,
				total = 0.0;

	for (size_t i = 1; i < n; i++)
	{
		lowest = fmin(lowest, p[2 * i + 1]);
		highest = fmax(highest, p[2 * i + 1]);
	}
	threshold = lowest >= 0.0 && highest <= 1.0 ? 0.5 : 0.0;
	for (size_t i = 0; i < n; i++)
	{
		total += weight_of(w, i);
		if ((p[2 * i + 1] > threshold) == (y[i] == 1))
			hits += weight_of(w, i);
	}
	return hits / total;
}

double
pgdl_metrics_top_k_accuracy(const int32_t *y, const double *p, const double *w, size_t n, int n_classes,
							int k)
{
	double		hits = 0.0,
				total = 0.0;

	if (n == 0 || k < 1)
		return NAN;
	if (k >= n_classes)
		return 1.0;
	if (n_classes == 2)
		return top_1_accuracy_binary(y, p, w, n);
	for (size_t i = 0; i < n; i++)
	{
		const double *row = p + i * n_classes;
		int			label = y[i],
					ahead = 0;

		for (int c = 0; c < n_classes; c++)
			ahead += row[c] > row[label] || (row[c] == row[label] && c > label);
		total += weight_of(w, i);
		if (ahead < k)
			hits += weight_of(w, i);
	}
	return hits / total;
}

void
pgdl_metrics_confusion_matrix(const int32_t *y, const double *p, const double *w, size_t n, int n_classes,
							  double *counts)
{
	for (int c = 0; c < n_classes * n_classes; c++)
		counts[c] = 0.0;
	for (size_t i = 0; i < n; i++)
		counts[(size_t) y[i] * n_classes + pgdl_metrics_predicted_class(p + i * n_classes, n_classes)] +=
			weight_of(w, i);
}

/* tp / denominator, or 0 (zero_division=0) */
static double
ratio_or_zero(double tp, double denominator)
{
	return denominator > 0.0 ? tp / denominator : 0.0;
}

/* F-beta with beta = 1 in scikit-learn's order: (1 + 1) * P * R / (P + R), the denominator 1 when 0 */
static double
f1_of(double precision, double recall)
{
	double		denominator = precision + recall;

	if (denominator == 0.0)
		denominator = 1.0;
	return 2.0 * precision * recall / denominator;
}

/*
 * Per-class scores from a confusion matrix, and their macro and support-weighted
 * averages (macro and weighted may be NULL).
 */
void
pgdl_metrics_class_scores(const double *counts, int n_classes, PgdlMetricsClassScores *per_class,
						  PgdlMetricsAverage *macro, PgdlMetricsAverage *weighted)
{
	PgdlMetricsAverage sum = {0, 0, 0},
				weighted_sum = {0, 0, 0};
	double		total_support = 0.0;

	for (int c = 0; c < n_classes; c++)
	{
		double		tp = counts[(size_t) c * n_classes + c],
					predicted = 0.0,
					actual = 0.0;
		PgdlMetricsClassScores *s = &per_class[c];

		for (int other = 0; other < n_classes; other++)
		{
			predicted += counts[(size_t) other * n_classes + c];
			actual += counts[(size_t) c * n_classes + other];
		}
		s->precision = ratio_or_zero(tp, predicted);
		s->recall = ratio_or_zero(tp, actual);
		s->f1 = f1_of(s->precision, s->recall);
		s->support = actual;
		sum.precision += s->precision;
		sum.recall += s->recall;
		sum.f1 += s->f1;
		weighted_sum.precision += s->precision * actual;
		weighted_sum.recall += s->recall * actual;
		weighted_sum.f1 += s->f1 * actual;
		total_support += actual;
	}
	if (macro)
	{
		macro->precision = sum.precision / n_classes;
		macro->recall = sum.recall / n_classes;
		macro->f1 = sum.f1 / n_classes;
	}
	if (weighted)
	{
		/* no row at all: scikit-learn's zero_division value, 0, for all three */
		double		scale = total_support > 0.0 ? total_support : 1.0;

		weighted->precision = weighted_sum.precision / scale;
		weighted->recall = weighted_sum.recall / scale;
		weighted->f1 = weighted_sum.f1 / scale;
	}
}

double
pgdl_metrics_log_loss(const int32_t *y, const double *p, const double *w, size_t n, int n_classes)
{
	const double eps = DBL_EPSILON;
	double		total = 0.0,
				total_weight = 0.0;

	if (n == 0)
		return NAN;
	for (size_t i = 0; i < n; i++)
	{
		const double *row = p + i * n_classes;
		double		row_sum = 0.0;

		for (int c = 0; c < n_classes; c++)
			row_sum += fmin(fmax(row[c], eps), 1.0 - eps);
		total += weight_of(w, i) * -log(fmin(fmax(row[y[i]], eps), 1.0 - eps) / row_sum);
		total_weight += weight_of(w, i);
	}
	return total / total_weight;
}

/* score descending, then row index ascending: a total order, so qsort's result is unique */
static int
compare_scored_rows(const void *a, const void *b)
{
	const ScoredRow *ra = a,
			   *rb = b;

	if (ra->score > rb->score || (isnan(rb->score) && !isnan(ra->score)))
		return -1;
	if (ra->score < rb->score || (isnan(ra->score) && !isnan(rb->score)))
		return 1;
	return (ra->index > rb->index) - (ra->index < rb->index);
}

/* n rows, or NULL when out of memory */
static ScoredRow *
scored_rows_alloc(size_t n)
{
	if (n == 0 || n > SIZE_MAX / sizeof(ScoredRow))
		return NULL;
	return malloc(n * sizeof(ScoredRow));
}

/*
 * The rows i of positive weight: score p[i * stride], positive when y[i] ==
 * positive_class; sorted.  Returns how many.
 */
static size_t
rank_class(ScoredRow *rows, const int32_t *y, const double *p, const double *w, size_t n, int stride,
		   int positive_class)
{
	size_t		m = 0;

	for (size_t i = 0; i < n; i++)
	{
		if (weight_of(w, i) == 0.0)
			continue;
		rows[m].score = p[i * stride + positive_class];
		rows[m].weight = weight_of(w, i);
		rows[m].index = i;
		rows[m].positive = y[i] == positive_class;
		m++;
	}
	qsort(rows, m, sizeof(ScoredRow), compare_scored_rows);
	return m;
}

/* the cumulative weights after rows[start..end): positives to *tps, negatives to *fps */
static void
add_group(const ScoredRow *rows, size_t start, size_t end, double *tps, double *fps)
{
	for (size_t i = start; i < end; i++)
	{
		if (rows[i].positive)
			*tps += rows[i].weight;
		else
			*fps += rows[i].weight;
	}
}

/* one past the last row whose score equals rows[start]'s */
static size_t
group_end(const ScoredRow *rows, size_t n, size_t start)
{
	size_t		end = start + 1;

	while (end < n && rows[end].score == rows[start].score)
		end++;
	return end;
}

/*
 * The area under the ROC curve of sorted rows: the trapezoids between the
 * cumulative (fps, tps) after each group of equal scores, summed in counts
 * (twice the area) and divided by 2 x positives x negatives once; NaN when
 * either count is 0.
 */
static double
roc_auc_of_sorted(const ScoredRow *rows, size_t n)
{
	double		tps = 0.0,
				fps = 0.0,
				twice_area = 0.0;

	for (size_t start = 0, end; start < n; start = end)
	{
		double		previous_tps = tps,
					previous_fps = fps;

		end = group_end(rows, n, start);
		add_group(rows, start, end, &tps, &fps);
		twice_area += (fps - previous_fps) * (tps + previous_tps);
	}
	if (tps == 0.0 || fps == 0.0)
		return NAN;
	return twice_area / (2.0 * tps * fps);
}

/*
 * Average precision of sorted rows: over the groups of equal scores, the new
 * true positives times the precision at the group's end, divided by all
 * positives; 0 with no positive.
 */
static double
average_precision_of_sorted(const ScoredRow *rows, size_t n)
{
	double		tps = 0.0,
				fps = 0.0,
				sum = 0.0;

	for (size_t start = 0, end; start < n; start = end)
	{
		double		previous_tps = tps;

		end = group_end(rows, n, start);
		add_group(rows, start, end, &tps, &fps);
		sum += (tps - previous_tps) * (tps / (tps + fps));
	}
	return tps > 0.0 ? sum / tps : 0.0;
}

/*
 * ROC AUC and average precision of each class against the rest, and the
 * summaries (class 1's for two classes, else the macro means).  The per-class
 * arrays (n_classes entries) may be NULL.
 */
bool
pgdl_metrics_ranking(const int32_t *y, const double *p, const double *w, size_t n, int n_classes,
					 double *roc_auc_per_class, double *average_precision_per_class,
					 double *roc_auc, double *average_precision)
{
	ScoredRow  *rows = scored_rows_alloc(n);
	double		auc_sum = 0.0,
				ap_sum = 0.0;

	if (rows == NULL)
		return false;
	for (int c = 0; c < n_classes; c++)
	{
		size_t		m = rank_class(rows, y, p, w, n, n_classes, c);
		double		auc = roc_auc_of_sorted(rows, m),
					ap = average_precision_of_sorted(rows, m);

		if (roc_auc_per_class)
			roc_auc_per_class[c] = auc;
		if (average_precision_per_class)
			average_precision_per_class[c] = ap;
		if (n_classes == 2 && c == 1)
		{
			auc_sum = auc;
			ap_sum = ap;
		}
		else if (n_classes > 2)
		{
			auc_sum += auc;
			ap_sum += ap;
		}
	}
	free(rows);
	*roc_auc = n_classes == 2 ? auc_sum : auc_sum / n_classes;
	*average_precision = n_classes == 2 ? ap_sum : ap_sum / n_classes;
	return true;
}

/* is the middle of three consecutive points a corner (a second difference of fps or tps not 0)? */
static bool
roc_corner(const PgdlMetricsRocPoint *before, const PgdlMetricsRocPoint *at,
		   const PgdlMetricsRocPoint *after)
{
	return after->fpr - 2.0 * at->fpr + before->fpr != 0.0 ||
		after->tpr - 2.0 * at->tpr + before->tpr != 0.0;
}

/*
 * The ROC curve of sorted rows into points (capacity n + 1); returns the
 * number of points.  Built in counts (fpr holds fps, tpr tps) at points[1..],
 * thinned in place, then led by (threshold + 1, 0, 0) and divided.
 */
static size_t
roc_points_of_sorted(const ScoredRow *rows, size_t n, PgdlMetricsRocPoint *points)
{
	size_t		m = 0,
				kept;
	double		tps = 0.0,
				fps = 0.0;

	if (n == 0)
		return 0;

	for (size_t start = 0, end; start < n; start = end)
	{
		end = group_end(rows, n, start);
		add_group(rows, start, end, &tps, &fps);
		/* the lowest row index of the group, as scikit-learn's reversed stable sort leaves it last */
		points[1 + m].threshold = rows[start].score;
		points[1 + m].fpr = fps;
		points[1 + m].tpr = tps;
		m++;
	}
	kept = m;
	if (m > 2)
	{
		PgdlMetricsRocPoint before = points[1];

		kept = 1;
		for (size_t j = 1; j + 1 < m; j++)
		{
			PgdlMetricsRocPoint at = points[1 + j];

			if (roc_corner(&before, &at, &points[1 + j + 1]))
				points[1 + kept++] = at;
			before = at;
		}
		points[1 + kept++] = points[1 + m - 1];
	}
	points[0].threshold = points[1].threshold + 1.0;
	points[0].fpr = 0.0;
	points[0].tpr = 0.0;
	for (size_t j = 0; j <= kept; j++)
	{
		points[j].fpr = fps > 0.0 ? points[j].fpr / fps : NAN;
		points[j].tpr = tps > 0.0 ? points[j].tpr / tps : NAN;
	}
	return kept + 1;
}

/* roc_curve(y == positive_class, p[:, positive_class]): *n_points points, at most n + 1 */
bool
pgdl_metrics_roc_curve(const int32_t *y, const double *p, const double *w, size_t n, int n_classes,
					   int positive_class, PgdlMetricsRocPoint *points, size_t *n_points)
{
	ScoredRow  *rows = scored_rows_alloc(n);
	size_t		m;

	if (rows == NULL)
		return false;
	m = rank_class(rows, y, p, w, n, n_classes, positive_class);
	*n_points = roc_points_of_sorted(rows, m, points);
	free(rows);
	return true;
}

bool
pgdl_metrics_binary_label(const double *target, const double *p, const double *w, size_t n, size_t stride,
						  PgdlMetricsBinary *out)
{
	ScoredRow  *rows = scored_rows_alloc(n);
	double		counts[4] = {0, 0, 0, 0};	/* the 2 x 2 confusion matrix */
	PgdlMetricsClassScores per_class[2];
	size_t		m = 0;

	if (rows == NULL)
		return false;
	for (size_t i = 0; i < n; i++)
	{
		bool		actual = target[i * stride] > 0.5,
					predicted = p[i * stride] > 0.5;

		counts[actual * 2 + predicted] += weight_of(w, i);
		if (weight_of(w, i) == 0.0)
			continue;
		rows[m].score = p[i * stride];
		rows[m].weight = weight_of(w, i);
		rows[m].index = i;
		rows[m].positive = actual;
		m++;
	}
	pgdl_metrics_class_scores(counts, 2, per_class, NULL, NULL);
	out->accuracy = (counts[0] + counts[3]) / (counts[0] + counts[1] + counts[2] + counts[3]);
	out->precision = per_class[1].precision;
	out->recall = per_class[1].recall;
	out->f1 = per_class[1].f1;
	qsort(rows, m, sizeof(ScoredRow), compare_scored_rows);
	out->roc_auc = roc_auc_of_sorted(rows, m);
	out->average_precision = average_precision_of_sorted(rows, m);
	free(rows);
	return true;
}

/* One target (column j): its errors in row order, R² by scikit-learn's force_finite rule. */
static PgdlMetricsRegression
regression_of_target(const double *y, const double *pred, const double *w, size_t n, int n_targets, int j)
{
	PgdlMetricsRegression r;
	double		sum_y = 0.0,
				sum_w = 0.0,
				squared = 0.0,
				absolute = 0.0,
				total = 0.0,
				mean,
				first = NAN;	/* the first value of positive weight */
	bool		constant = true;

	for (size_t i = 0; i < n; i++)
	{
		double		yi = y[i * n_targets + j],
					wi = weight_of(w, i),
					error = yi - pred[i * n_targets + j];

		sum_w += wi;
		sum_y += wi * yi;
		squared += wi * error * error;
		absolute += wi * fabs(error);
		if (wi > 0.0 && isnan(first))
			first = yi;
		constant = constant && (wi == 0.0 || yi == first);
	}
	mean = sum_y / sum_w;
	for (size_t i = 0; i < n && !constant; i++)
	{
		double		deviation = y[i * n_targets + j] - mean;

		total += weight_of(w, i) * deviation * deviation;
	}
	r.mse = squared / sum_w;
	r.rmse = sqrt(r.mse);
	r.mae = absolute / sum_w;
	if (n < 2)
		r.r2 = NAN;
	else if (squared == 0.0)
		r.r2 = 1.0;
	else if (total == 0.0)
		r.r2 = 0.0;
	else
		r.r2 = 1.0 - squared / total;
	return r;
}

void
pgdl_metrics_regression(const double *y, const double *pred, const double *w, size_t n, int n_targets,
						PgdlMetricsRegression *per_target, PgdlMetricsRegression *average)
{
	PgdlMetricsRegression sum = {0, 0, 0, 0};

	for (int j = 0; j < n_targets; j++)
	{
		PgdlMetricsRegression r = regression_of_target(y, pred, w, n, n_targets, j);

		if (per_target)
			per_target[j] = r;
		sum.mse += r.mse;
		sum.rmse += r.rmse;
		sum.mae += r.mae;
		sum.r2 += r.r2;
	}
	average->mse = sum.mse / n_targets;
	average->rmse = sum.rmse / n_targets;
	average->mae = sum.mae / n_targets;
	average->r2 = sum.r2 / n_targets;
}
