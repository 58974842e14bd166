/*
 * test_metrics.c -- the evaluation metrics (src/train/metrics.c) against
 * scikit-learn 1.2.1.
 *
 * regress/unit/gen_metrics.py (run by `make fixtures`) draws seeded cases and
 * writes scikit-learn's values for them; each test here computes the same with
 * metrics.c and compares every value within 1e-9, absolute below 1 and relative
 * above (|got - want| <= 1e-9 * max(1, |want|)); NaN (undefined) must meet NaN,
 * and counts must be equal.  A weighted case (a key w, each row's weight) is
 * scored with those weights and compared with scikit-learn's sample_weight
 * values alike; the unweighted ones pass w = NULL.  A missing or malformed fixture is a failed check,
 * never a skipped test: run `make fixtures` first (`make unit` does).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/metrics.h"
#include "unit.h"

#define MAX_ENTRIES 64
#define MAX_CASES 64
#define TOLERANCE 1e-9

typedef struct Entry
{
	char		key[32];
	size_t		count;
	double	   *values;
} Entry;

typedef struct Fixture
{
	char		name[64];
	int			n_entries;
	Entry		entries[MAX_ENTRIES];
} Fixture;

typedef struct CaseList
{
	int			n;
	char		kind[MAX_CASES][32];
	char		name[MAX_CASES][64];
} CaseList;

static void
fixture_free(Fixture *fx)
{
	for (int i = 0; i < fx->n_entries; i++)
		free(fx->entries[i].values);
	fx->n_entries = 0;
}

/* unit_fixture_dir + "/" + file; false if too long */
static bool
fixture_path(char *buf, size_t buflen, const char *file)
{
	const char *dir = unit_fixture_dir ? unit_fixture_dir : ".";
	size_t		dlen = strlen(dir);
	int			len = snprintf(buf, buflen, "%s%s%s", dir, dlen > 0 && dir[dlen - 1] == '/' ? "" : "/", file);

	return len > 0 && (size_t) len < buflen;
}

/* one line "key count v..." into e; false when malformed */
static bool
read_entry(FILE *f, Entry *e)
{
	unsigned long count;

	if (fscanf(f, "%31s %lu", e->key, &count) != 2 || count > 10000000)
		return false;
	e->count = count;
	e->values = malloc(sizeof(double) * (count > 0 ? count : 1));
	for (size_t i = 0; i < count; i++)
		if (fscanf(f, "%lf", &e->values[i]) != 1)
			return false;
	return true;
}

/* metrics_NAME.txt, every line; a failure is a failed check */
static bool
fixture_load(Fixture *fx, const char *name)
{
	char		file[96],
				path[1024];
	FILE	   *f;
	int			c;

	memset(fx, 0, sizeof(*fx));
	snprintf(fx->name, sizeof(fx->name), "%s", name);
	snprintf(file, sizeof(file), "metrics_%s.txt", name);
	if (!fixture_path(path, sizeof(path), file) || (f = fopen(path, "r")) == NULL)
	{
		CHECK_MSG(false, "%s: cannot open fixture %s (run `make fixtures`)", name, path);
		return false;
	}
	while ((c = fgetc(f)) != EOF)
	{
		ungetc(c, f);
		if (c == '\n' || c == ' ')
		{
			fgetc(f);
			continue;
		}
		if (fx->n_entries == MAX_ENTRIES || !read_entry(f, &fx->entries[fx->n_entries++]))
		{
			fclose(f);
			fixture_free(fx);
			CHECK_MSG(false, "%s: fixture %s is malformed (regenerate it with `make fixtures`)", name, path);
			return false;
		}
	}
	fclose(f);
	return true;
}

/* the values of key, which must number count; NULL (a failed check) otherwise */
static const double *
fixture_get(const Fixture *fx, const char *key, size_t count)
{
	for (int i = 0; i < fx->n_entries; i++)
	{
		if (strcmp(fx->entries[i].key, key) != 0)
			continue;
		if (fx->entries[i].count == count)
			return fx->entries[i].values;
		CHECK_MSG(false, "%s: %s has %zu values, want %zu", fx->name, key, fx->entries[i].count, count);
		return NULL;
	}
	CHECK_MSG(false, "%s: no %s in the fixture", fx->name, key);
	return NULL;
}

/* the weights of a weighted case (n of them), or NULL: unweighted */
static const double *
fixture_weights(const Fixture *fx, size_t n)
{
	for (int i = 0; i < fx->n_entries; i++)
		if (strcmp(fx->entries[i].key, "w") == 0)
			return fixture_get(fx, "w", n);
	return NULL;
}

static size_t
fixture_count(const Fixture *fx, const char *key)
{
	const double *v = fixture_get(fx, key, 1);

	return v ? (size_t) v[0] : 0;
}

static int	n_compared;

/* got against scikit-learn's want; NaN meets NaN only */
static void
check_value(const Fixture *fx, const char *what, size_t at, double got, double want)
{
	double		scale = fabs(want) > 1.0 ? fabs(want) : 1.0;

	n_compared++;
	if (isnan(want) || isnan(got))
		CHECK_MSG(isnan(want) && isnan(got), "%s: %s[%zu] = %.17g, scikit-learn %.17g", fx->name, what, at,
				  got, want);
	else
		CHECK_MSG(fabs(got - want) <= TOLERANCE * scale, "%s: %s[%zu] = %.17g, scikit-learn %.17g",
				  fx->name, what, at, got, want);
}

static void
check_values(const Fixture *fx, const char *key, const double *got, size_t count)
{
	const double *want = fixture_get(fx, key, count);

	for (size_t i = 0; want && i < count; i++)
		check_value(fx, key, i, got[i], want[i]);
}

/* metrics_index.txt: the cases gen_metrics.py wrote */
static void
load_index(CaseList *cases)
{
	char		path[1024];
	FILE	   *f;

	cases->n = 0;
	if (!fixture_path(path, sizeof(path), "metrics_index.txt") || (f = fopen(path, "r")) == NULL)
	{
		CHECK_MSG(false, "cannot open %s (run `make fixtures`)", path);
		return;
	}
	while (cases->n < MAX_CASES &&
		   fscanf(f, "%31s %63s", cases->kind[cases->n], cases->name[cases->n]) == 2)
		cases->n++;
	fclose(f);
}

/* how many cases of kind the index lists; each test wants at least as many as gen_metrics.py draws */
static int
count_kind(const CaseList *cases, const char *kind)
{
	int			n = 0;

	for (int i = 0; i < cases->n; i++)
		n += strcmp(cases->kind[i], kind) == 0;
	return n;
}

static int32_t *
labels_of(const double *values, size_t n)
{
	int32_t    *y = malloc(sizeof(int32_t) * n);

	for (size_t i = 0; i < n; i++)
		y[i] = (int32_t) values[i];
	return y;
}

static void
check_ranking(const Fixture *fx, const int32_t *y, const double *p, const double *w, size_t n, int k)
{
	double	   *auc = malloc(sizeof(double) * k),
			   *ap = malloc(sizeof(double) * k),
				auc_summary,
				ap_summary;
	PgdlMetricsRocPoint *points = malloc(sizeof(PgdlMetricsRocPoint) * (n + 1));

	CHECK(pgdl_metrics_ranking(y, p, w, n, k, auc, ap, &auc_summary, &ap_summary));
	check_values(fx, "roc_auc_per_class", auc, k);
	check_values(fx, "ap_per_class", ap, k);
	check_values(fx, "roc_auc", &auc_summary, 1);
	check_values(fx, "average_precision", &ap_summary, 1);
	for (int c = 0; c < k; c++)
	{
		char		key[32];
		size_t		n_points = 0;

		snprintf(key, sizeof(key), "roc.%d", c);
		CHECK(pgdl_metrics_roc_curve(y, p, w, n, k, c, points, &n_points));
		CHECK(n_points >= 2 && n_points <= n + 1);
		check_values(fx, key, (const double *) points, 3 * n_points);
	}
	free(auc);
	free(ap);
	free(points);
}

static void
check_classification(const Fixture *fx)
{
	size_t		n = fixture_count(fx, "n");
	int			k = (int) fixture_count(fx, "classes");
	const double *y_values = fixture_get(fx, "y", n),
			   *p = fixture_get(fx, "p", n * k),
			   *w = fixture_weights(fx, n);
	int32_t    *y;
	double	   *counts,
			   *as_double,
				value;
	PgdlMetricsClassScores *scores;
	PgdlMetricsAverage macro,
				weighted;

	if (!y_values || !p || k < 2)
		return;
	y = labels_of(y_values, n);
	counts = malloc(sizeof(double) * k * k);
	as_double = malloc(sizeof(double) * k * k);
	scores = malloc(sizeof(PgdlMetricsClassScores) * k);

	value = pgdl_metrics_accuracy(y, p, w, n, k);
	check_values(fx, "accuracy", &value, 1);
	for (int t = 1; t <= k + 1; t++)
	{
		char		key[32];

		if (t != 1 && t != 2 && t != 3 && t != 5 && t != k)
			continue;
		snprintf(key, sizeof(key), "top_k.%d", t);
		value = pgdl_metrics_top_k_accuracy(y, p, w, n, k, t);
		check_values(fx, key, &value, 1);
	}
	pgdl_metrics_confusion_matrix(y, p, w, n, k, counts);
	check_values(fx, "confusion", counts, (size_t) k * k);
	pgdl_metrics_class_scores(counts, k, scores, &macro, &weighted);
	for (int c = 0; c < k; c++)
		as_double[c] = scores[c].precision;
	check_values(fx, "precision", as_double, k);
	for (int c = 0; c < k; c++)
		as_double[c] = scores[c].recall;
	check_values(fx, "recall", as_double, k);
	for (int c = 0; c < k; c++)
		as_double[c] = scores[c].f1;
	check_values(fx, "f1", as_double, k);
	for (int c = 0; c < k; c++)
		as_double[c] = scores[c].support;
	check_values(fx, "support", as_double, k);
	check_values(fx, "macro", (const double *) &macro, 3);
	check_values(fx, "weighted", (const double *) &weighted, 3);
	value = pgdl_metrics_log_loss(y, p, w, n, k);
	check_values(fx, "log_loss", &value, 1);
	check_ranking(fx, y, p, w, n, k);
	free(y);
	free(counts);
	free(as_double);
	free(scores);
}

UNIT_TEST(metrics_classification)
{
	CaseList	cases;
	Fixture		fx;

	load_index(&cases);
	CHECK_MSG(count_kind(&cases, "classification") >= 18, "%d classification cases",
			  count_kind(&cases, "classification"));
	n_compared = 0;
	for (int i = 0; i < cases.n; i++)
	{
		if (strcmp(cases.kind[i], "classification") != 0 || !fixture_load(&fx, cases.name[i]))
			continue;
		check_classification(&fx);
		fixture_free(&fx);
	}
	CHECK_MSG(n_compared > 1000, "only %d values compared", n_compared);
}

UNIT_TEST(metrics_binary_label)
{
	CaseList	cases;
	Fixture		fx;

	load_index(&cases);
	CHECK_MSG(count_kind(&cases, "binary_label") >= 4, "%d binary_label cases",
			  count_kind(&cases, "binary_label"));
	for (int i = 0; i < cases.n; i++)
	{
		size_t		n,
					labels;
		const double *target,
				   *p,
				   *w;

		if (strcmp(cases.kind[i], "binary_label") != 0 || !fixture_load(&fx, cases.name[i]))
			continue;
		n = fixture_count(&fx, "n");
		labels = fixture_count(&fx, "labels");
		target = fixture_get(&fx, "target", n * labels);
		p = fixture_get(&fx, "p", n * labels);
		w = fixture_weights(&fx, n);
		for (size_t j = 0; target && p && j < labels; j++)
		{
			PgdlMetricsBinary got;
			char		key[32];

			snprintf(key, sizeof(key), "label.%zu", j);
			CHECK(pgdl_metrics_binary_label(target + j, p + j, w, n, labels, &got));
			check_values(&fx, key, (const double *) &got, 6);
		}
		fixture_free(&fx);
	}
}

UNIT_TEST(metrics_regression)
{
	CaseList	cases;
	Fixture		fx;

	load_index(&cases);
	CHECK_MSG(count_kind(&cases, "regression") >= 6, "%d regression cases",
			  count_kind(&cases, "regression"));
	for (int i = 0; i < cases.n; i++)
	{
		size_t		n;
		int			targets;
		const double *y,
				   *pred,
				   *w;
		PgdlMetricsRegression *per_target,
					average;

		if (strcmp(cases.kind[i], "regression") != 0 || !fixture_load(&fx, cases.name[i]))
			continue;
		n = fixture_count(&fx, "n");
		targets = (int) fixture_count(&fx, "targets");
		y = fixture_get(&fx, "y", n * targets);
		pred = fixture_get(&fx, "pred", n * targets);
		w = fixture_weights(&fx, n);
		per_target = malloc(sizeof(PgdlMetricsRegression) * (targets > 0 ? targets : 1));
		if (y && pred && targets > 0)
		{
			pgdl_metrics_regression(y, pred, w, n, targets, per_target, &average);
			for (int j = 0; j < targets; j++)
			{
				char		key[32];

				snprintf(key, sizeof(key), "target.%d", j);
				check_values(&fx, key, (const double *) &per_target[j], 4);
			}
			check_values(&fx, "average", (const double *) &average, 4);
		}
		free(per_target);
		fixture_free(&fx);
	}
}

/*
 * The ranking metrics depend on the rows, not on their order: rows reversed
 * give the same values bit for bit, and the same ROC curve.
 */
UNIT_TEST(metrics_row_order)
{
	enum
	{
		N = 101, K = 4
	};
	int32_t		y[N],
				y_reversed[N];
	double		p[N * K],
				p_reversed[N * K],
				auc[K],
				ap[K],
				auc_r[K],
				ap_r[K],
				summary[2],
				summary_r[2];
	PgdlMetricsRocPoint points[N + 1],
				points_r[N + 1];
	size_t		n_points,
				n_points_r;

	for (int i = 0; i < N; i++)
	{
		y[i] = (i * 7) % K;
		for (int c = 0; c < K; c++)
			p[i * K + c] = (double) ((i * 13 + c * 5) % 6) / 10.0;	/* many ties */
	}
	for (int i = 0; i < N; i++)
	{
		y_reversed[i] = y[N - 1 - i];
		memcpy(&p_reversed[i * K], &p[(N - 1 - i) * K], sizeof(double) * K);
	}
	CHECK(pgdl_metrics_ranking(y, p, NULL, N, K, auc, ap, &summary[0], &summary[1]));
	CHECK(pgdl_metrics_ranking(y_reversed, p_reversed, NULL, N, K, auc_r, ap_r, &summary_r[0], &summary_r[1]));
	CHECK(memcmp(auc, auc_r, sizeof(auc)) == 0 && memcmp(ap, ap_r, sizeof(ap)) == 0);
	CHECK(memcmp(summary, summary_r, sizeof(summary)) == 0);
	CHECK(pgdl_metrics_roc_curve(y, p, NULL, N, K, 2, points, &n_points));
	CHECK(pgdl_metrics_roc_curve(y_reversed, p_reversed, NULL, N, K, 2, points_r, &n_points_r));
	CHECK(n_points == n_points_r && memcmp(points, points_r, sizeof(PgdlMetricsRocPoint) * n_points) == 0);
}

/*
 * Weights of 1 are no weights, bit for bit, and a row of weight 0 is no row:
 * every metric of the rows with w (some 0) equals that of the rows of positive
 * weight alone, with those weights (the ranking metrics and the curve bit for
 * bit, the means within rounding).
 */
UNIT_TEST(metrics_weights_of_one_and_zero)
{
	enum
	{
		N = 60, K = 3
	};
	int32_t		y[N],
				y_kept[N];
	double		p[N * K],
				p_kept[N * K],
				w[N],
				w_kept[N],
				ones[N],
				a[2],
				b[2],
				auc[K],
				ap[K],
				auc_k[K],
				ap_k[K];
	PgdlMetricsRocPoint points[N + 1],
				points_k[N + 1];
	size_t		kept = 0,
				n_points,
				n_points_k;

	for (int i = 0; i < N; i++)
	{
		y[i] = (i * 5) % K;
		ones[i] = 1.0;
		w[i] = i % 4 == 1 ? 0.0 : 0.25 + (double) ((i * 7) % 5);
		for (int c = 0; c < K; c++)
			p[i * K + c] = (double) ((i * 11 + c * 3) % 7 + 1) / 28.0;
		if (w[i] > 0.0)
		{
			y_kept[kept] = y[i];
			w_kept[kept] = w[i];
			memcpy(&p_kept[kept * K], &p[i * K], sizeof(double) * K);
			kept++;
		}
	}
	a[0] = pgdl_metrics_accuracy(y, p, NULL, N, K);
	b[0] = pgdl_metrics_accuracy(y, p, ones, N, K);
	a[1] = pgdl_metrics_log_loss(y, p, NULL, N, K);
	b[1] = pgdl_metrics_log_loss(y, p, ones, N, K);
	CHECK(memcmp(a, b, sizeof(a)) == 0);
	CHECK(pgdl_metrics_ranking(y, p, w, N, K, auc, ap, &a[0], &a[1]));
	CHECK(pgdl_metrics_ranking(y_kept, p_kept, w_kept, kept, K, auc_k, ap_k, &b[0], &b[1]));
	CHECK(memcmp(auc, auc_k, sizeof(auc)) == 0 && memcmp(ap, ap_k, sizeof(ap)) == 0);
	CHECK(memcmp(a, b, sizeof(a)) == 0);
	CHECK(pgdl_metrics_roc_curve(y, p, w, N, K, 1, points, &n_points));
	CHECK(pgdl_metrics_roc_curve(y_kept, p_kept, w_kept, kept, K, 1, points_k, &n_points_k));
	CHECK(n_points == n_points_k && memcmp(points, points_k, sizeof(PgdlMetricsRocPoint) * n_points) == 0);
	a[0] = pgdl_metrics_accuracy(y, p, w, N, K);
	b[0] = pgdl_metrics_accuracy(y_kept, p_kept, w_kept, kept, K);
	CHECK(fabs(a[0] - b[0]) <= 1e-15);
	/* every weight 0: the means undefined, the curve empty */
	memset(w, 0, sizeof(w));
	CHECK(isnan(pgdl_metrics_accuracy(y, p, w, N, K)) && isnan(pgdl_metrics_log_loss(y, p, w, N, K)));
	CHECK(pgdl_metrics_roc_curve(y, p, w, N, K, 1, points, &n_points) && n_points == 0);
}
