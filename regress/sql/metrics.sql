-- Evaluation over raw rows, pgdl.metrics, confusion_matrix, roc_curve and
-- evaluate_targets' scores.  A hand-made model gives numbers checked by hand;
-- trained ones give the shape of the answers and the agreement of the forms.
-- Every value is checked against scikit-learn's in regress/metrics.
SET client_min_messages = warning;
SELECT coalesce(max(id), 0) AS mt_first_run FROM pgdl.runs \gset

-- a binary classifier z = x1 - x2 over six rows packed as they are (scale 1)
CREATE TABLE mt_hand (x real[], label integer);
INSERT INTO mt_hand VALUES ('{1,0}', 1), ('{0,1}', 0), ('{2,1}', 0), ('{0,2}', 1), ('{3,0}', 1), ('{0,0}', 0);
SELECT pgdl.pack('mt_hand', 'x', 'label', 'mt_hand_p', partitions => 1) > 0 AS packed;
SELECT pgdl.model_from_weights('{"input": [2], "layers": [{"type": "dense", "units": 1}],
                                 "loss": "binary_cross_entropy"}', '{1,-1,0}') AS mt_blob \gset
-- p = sigmoid(z): .731 .269 .731 .119 .953 .5; predicted 1 0 1 0 1 0 (0.5 is class 0); labels 1 0 0 1 1 0:
-- 2 true positives, 1 false positive, 1 false negative, 2 true negatives; ROC AUC: of the 9 pairs of a
-- positive and a negative, the positive scores higher in 5 and ties in 1: 5.5 / 9
SELECT metric, class, average, round(value::numeric, 4) AS value FROM pgdl.metrics(:'mt_blob'::bytea, 'mt_hand_p');
SELECT * FROM pgdl.confusion_matrix(:'mt_blob'::bytea, 'mt_hand_p') ORDER BY actual, predicted;
SELECT round(threshold::numeric, 4) AS threshold, round(fpr::numeric, 4) AS fpr, round(tpr::numeric, 4) AS tpr
  FROM pgdl.roc_curve(:'mt_blob'::bytea, 'mt_hand_p');
SELECT target, round(loss::numeric, 4) AS loss, round(accuracy::numeric, 4) AS accuracy, n,
       round(precision::numeric, 4) AS precision, round(recall::numeric, 4) AS recall,
       round(roc_auc::numeric, 4) AS roc_auc, rmse IS NULL AS no_rmse
  FROM pgdl.evaluate_targets(:'mt_blob'::bytea, 'mt_hand_p');
-- top-k of two classes is 1 for k >= 2; top-1 is the accuracy
SELECT value FROM pgdl.metrics(:'mt_blob'::bytea, 'mt_hand_p', top_k => 1) WHERE metric = 'top_k_accuracy';

-- weighted rows (pack's weight): scikit-learn's sample_weight.  Weights 1 2 3 0 1 1: right rows weigh
-- 1 + 2 + 1 + 1 of 8 (accuracy .625); class 1's precision 2 / (2 + 3) = .4, recall 2 / (2 + 0) = 1;
-- supports 6 and 2; ROC AUC without the row of weight 0: positives .731 (1) and .953 (1) against
-- negatives .269 (2), .731 (3), .5 (1): (6 + 2 + 1 + 3 / 2) / (2 x 6) = .875
CREATE TABLE mt_hand_w (x real[], label integer, w real);
INSERT INTO mt_hand_w VALUES ('{1,0}', 1, 1), ('{0,1}', 0, 2), ('{2,1}', 0, 3), ('{0,2}', 1, 0), ('{3,0}', 1, 1),
                             ('{0,0}', 0, 1);
SELECT pgdl.pack('mt_hand_w', 'x', 'label', 'mt_hand_wp', partitions => 1, weight => 'w') > 0 AS packed;
SELECT metric, class, average, round(value::numeric, 4) AS value FROM pgdl.metrics(:'mt_blob'::bytea, 'mt_hand_wp')
 WHERE metric IN ('accuracy', 'precision', 'recall', 'support', 'roc_auc', 'n') AND average IS DISTINCT FROM 'macro';
-- count: the rows; weight: their weights
SELECT * FROM pgdl.confusion_matrix(:'mt_blob'::bytea, 'mt_hand_wp') ORDER BY actual, predicted;
-- the row of weight 0 (score .119) makes no threshold
SELECT round(threshold::numeric, 4) AS threshold, round(fpr::numeric, 4) AS fpr, round(tpr::numeric, 4) AS tpr
  FROM pgdl.roc_curve(:'mt_blob'::bytea, 'mt_hand_wp');
-- evaluate and evaluate_targets: the weighted mean of the rows' binary cross-entropy (and accuracy)
SELECT abs(e.loss - (SELECT sum(w * CASE WHEN label = 1 THEN ln(1 + exp(-(x[1] - x[2]))) ELSE ln(1 + exp(x[1] - x[2])) END)
                            / sum(w) FROM mt_hand_w)) < 1e-6 AS weighted_loss,
       e.accuracy = 0.625 AS weighted_accuracy, e.n, t.loss = e.loss AS targets_agree
  FROM pgdl.evaluate(:'mt_blob'::bytea, 'mt_hand_wp') e, pgdl.evaluate_targets(:'mt_blob'::bytea, 'mt_hand_wp') t;
-- weights all 1 score as no weights, bit for bit
UPDATE mt_hand_w SET w = 1;
SELECT pgdl.pack('mt_hand_w', 'x', 'label', 'mt_hand_1p', partitions => 1, weight => 'w') > 0 AS packed;
SELECT count(*) AS metrics, count(*) FILTER (WHERE a.value IS NOT DISTINCT FROM b.value) AS equal
  FROM pgdl.metrics(:'mt_blob'::bytea, 'mt_hand_p') a
  JOIN pgdl.metrics(:'mt_blob'::bytea, 'mt_hand_1p') b
    ON a.metric = b.metric AND a.class IS NOT DISTINCT FROM b.class AND a.average IS NOT DISTINCT FROM b.average;
SELECT a = b AS evaluate_equal FROM pgdl.evaluate(:'mt_blob'::bytea, 'mt_hand_p') a, pgdl.evaluate(:'mt_blob'::bytea, 'mt_hand_1p') b;

-- trained models on a three-class set, over a referenced pack and over raw rows
CREATE TABLE mt_rows AS
SELECT i AS id, ARRAY[sin(i), cos(i), sin(2 * i)]::double precision[] AS x,
       (CASE WHEN sin(i) > 0.4 THEN 'up' WHEN cos(i) > 0 THEN 'flat' ELSE 'down' END) AS label,
       (2 * sin(i) - cos(i))::real AS target
  FROM generate_series(1, 240) i;
CREATE TABLE mt_train AS SELECT * FROM mt_rows WHERE id % 4 <> 0;
CREATE TABLE mt_test AS SELECT * FROM mt_rows WHERE id % 4 = 0;
SELECT pgdl.pack('mt_train', 'x', 'label', 'mt_train_p', buffer_rows => 30, partitions => 2,
                 standardize => true) > 0 AS packed;
SELECT pgdl.pack('mt_test', 'x', 'label', 'mt_test_p', partitions => 1, reference => 'mt_train_p') > 0 AS packed;
SELECT pgdl.fit('mt_train_p', '{"input": [3], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
                                                           {"type": "dense", "units": 3}]}'::jsonb,
                '{"optimizer": "adam", "lr": 0.05, "batch_size": 30, "seed": 3}', 15, name => 'mt_clf') AS mt_clf \gset

-- the rows: whole-set metrics, per class, the averages, then n
SELECT metric, class, average, value BETWEEN 0 AND 1 AS in_0_1
  FROM pgdl.metrics('mt_clf', 'mt_test_p') WHERE metric <> 'support' AND metric <> 'n';
SELECT class, value FROM pgdl.metrics('mt_clf', 'mt_test_p') WHERE metric IN ('support', 'n') ORDER BY class;
-- over raw rows (a table, a query), the same numbers as over the referenced pack, row for row
SELECT count(*) AS metrics, bool_and(p.value = r.value AND p.value = q.value) AS same
  FROM pgdl.metrics('mt_clf', 'mt_test_p') WITH ORDINALITY p
  JOIN pgdl.metrics('mt_clf', 'mt_test', 'x', 'label') WITH ORDINALITY r USING (ordinality)
  JOIN pgdl.metrics(:mt_clf, 'SELECT x, label FROM mt_test;', 'x', 'label') WITH ORDINALITY q USING (ordinality);
SELECT p = r AS same_evaluate
  FROM pgdl.evaluate('mt_clf', 'mt_test_p') p, pgdl.evaluate(:mt_clf, 'TABLE mt_test', 'x', 'label') r;
-- metrics' accuracy and log loss are evaluate's accuracy and loss
SELECT abs(a.value - e.accuracy) < 1e-12 AS same_accuracy, abs(l.value - e.loss) < 1e-6 AS same_loss
  FROM pgdl.evaluate('mt_clf', 'mt_test_p') e,
       pgdl.metrics('mt_clf', 'mt_test_p') a, pgdl.metrics('mt_clf', 'mt_test_p') l
 WHERE a.metric = 'accuracy' AND a.class IS NULL AND l.metric = 'log_loss';
-- nine cells, the rows in all; each class's row sums to its support
SELECT count(*) AS cells, sum(count) AS rows FROM pgdl.confusion_matrix('mt_clf', 'mt_test', 'x', 'label');
SELECT c.actual, sum(c.count) = m.value AS sums_to_support
  FROM pgdl.confusion_matrix('mt_clf', 'mt_test_p') c
  JOIN pgdl.metrics('mt_clf', 'mt_test_p') m ON m.metric = 'support' AND m.class = c.actual
 GROUP BY c.actual, m.value ORDER BY c.actual;
-- a ROC curve starts at (0, 0) above every score and ends at (1, 1); fpr and tpr never fall
SELECT (array_agg(fpr ORDER BY o))[1] = 0 AND (array_agg(tpr ORDER BY o))[1] = 0 AS starts_at_0,
       (array_agg(fpr ORDER BY o DESC))[1] = 1 AND (array_agg(tpr ORDER BY o DESC))[1] = 1 AS ends_at_1,
       (array_agg(threshold ORDER BY o))[1] > 1 AS first_above_scores
  FROM pgdl.roc_curve('mt_clf', 'mt_test_p', positive => 'up') WITH ORDINALITY r(threshold, fpr, tpr, o);
SELECT bool_and(fpr >= prev_fpr AND tpr >= prev_tpr) AS monotone
  FROM (SELECT fpr, tpr, lag(fpr, 1, 0.0) OVER w AS prev_fpr, lag(tpr, 1, 0.0) OVER w AS prev_tpr
          FROM pgdl.roc_curve('mt_clf', 'mt_test', 'x', 'label', 'flat') WITH ORDINALITY r(threshold, fpr, tpr, o)
        WINDOW w AS (ORDER BY o)) s;
-- no rows: n = 0 and nothing else; no cells counted
SELECT metric, value FROM pgdl.metrics('mt_clf', 'SELECT * FROM mt_test WHERE false', 'x', 'label');
SELECT sum(count) AS rows FROM pgdl.confusion_matrix('mt_clf', 'SELECT * FROM mt_test WHERE false', 'x', 'label');

-- a regression model and a multi-label one: their metrics, and evaluate_targets' columns
SELECT pgdl.pack('mt_train', 'x', 'target', 'mt_reg_p', buffer_rows => 30, partitions => 2, standardize => true) > 0 AS packed;
SELECT pgdl.fit('mt_reg_p', '{"input": [3], "layers": [{"type": "dense", "units": 8}, {"type": "relu"},
                                                         {"type": "dense", "units": 1}], "loss": "mse"}'::jsonb,
                '{"optimizer": "adam", "lr": 0.05, "batch_size": 30, "seed": 3}', 10, name => 'mt_reg') > 0 AS trained;
SELECT metric, class, value >= 0 AS non_negative FROM pgdl.metrics('mt_reg', 'mt_test', 'x', 'target');
SELECT abs(m.value - e.loss) < 1e-9 AS mse_is_loss
  FROM pgdl.metrics('mt_reg', 'mt_test', 'x', 'target') m, pgdl.evaluate('mt_reg', 'mt_test', 'x', 'target') e
 WHERE m.metric = 'mse';
SELECT target, accuracy IS NULL AS no_accuracy, precision IS NULL AS no_precision,
       abs(rmse - sqrt(loss)) < 1e-9 AS rmse_is_root, mae <= rmse AS mae_at_most_rmse, r2 <= 1 AS r2_at_most_1
  FROM pgdl.evaluate_targets('mt_reg', 'mt_reg_p');
CREATE TABLE mt_tags AS SELECT id, x, ARRAY[(sin(id) > 0)::int, (cos(id) > 0.5)::int]::real[] AS tags FROM mt_train;
SELECT pgdl.pack('mt_tags', 'x', 'tags', 'mt_tags_p', buffer_rows => 30, partitions => 1, standardize => true) > 0 AS packed;
SELECT pgdl.fit('mt_tags_p', '{"input": [3], "layers": [{"type": "dense", "units": 8}, {"type": "relu"},
                                                          {"type": "dense", "units": 2}],
                               "loss": "binary_cross_entropy"}'::jsonb,
                '{"optimizer": "adam", "lr": 0.05, "batch_size": 30, "seed": 3}', 10, name => 'mt_tags') > 0 AS trained;
SELECT metric, class, average, value BETWEEN 0 AND 1 AS in_0_1 FROM pgdl.metrics('mt_tags', 'mt_tags_p') WHERE metric <> 'n';
SELECT target, accuracy BETWEEN 0 AND 1 AS has_accuracy, f1 BETWEEN 0 AND 1 AS has_f1,
       roc_auc BETWEEN 0 AND 1 AS has_roc_auc, rmse IS NULL AS no_rmse, n
  FROM pgdl.evaluate_targets('mt_tags', 'mt_tags_p') ORDER BY target;

-- errors
\set VERBOSITY default
SELECT * FROM pgdl.metrics('mt_clf', 'mt_test_p', top_k => 0);
SELECT * FROM pgdl.confusion_matrix('mt_reg', 'mt_reg_p');
SELECT * FROM pgdl.roc_curve('mt_tags', 'mt_tags_p');
SELECT * FROM pgdl.roc_curve('mt_clf', 'mt_test_p');
SELECT * FROM pgdl.roc_curve('mt_clf', 'mt_test_p', positive => 'sideways');
-- raw rows: a label value the model has no class for, a column the query lacks, two statements,
-- a data-modifying WITH, a table that does not exist
SELECT * FROM pgdl.evaluate('mt_clf', 'SELECT x, ''north'' AS label FROM mt_test', 'x', 'label');
SELECT * FROM pgdl.evaluate('mt_clf', 'SELECT x FROM mt_test', 'x', 'label');
SELECT * FROM pgdl.evaluate('mt_clf', 'SELECT * FROM mt_test; SELECT 1', 'x', 'label');
SELECT * FROM pgdl.metrics('mt_clf', 'WITH d AS (DELETE FROM mt_test RETURNING *) SELECT * FROM d', 'x', 'label');
SELECT count(*) AS kept FROM mt_test;
SELECT * FROM pgdl.evaluate('mt_clf', 'mt_no_such_table', 'x', 'label');
-- a model with no training set (imported from ONNX without one) cannot read raw rows
SELECT pgdl.import_onnx('mt_no_dataset', pgdl.export_onnx('mt_clf', with_normalization => false)) AS mt_no_dataset \gset
SELECT * FROM pgdl.evaluate(:mt_no_dataset, 'mt_test', 'x', 'label');
-- a class in a packed table's y that is none of the model's (the table is its owner's to write)
UPDATE mt_hand_p SET y = '{1,0,0,7,1,0}';
SELECT * FROM pgdl.metrics(:'mt_blob'::bytea, 'mt_hand_p');
-- roc_curve is not STRICT (positive may be NULL): a NULL elsewhere gives no rows
SELECT count(*) AS no_rows FROM pgdl.roc_curve(NULL::bigint, 'mt_test_p');
SELECT count(*) AS no_rows FROM pgdl.roc_curve('mt_clf', NULL::regclass, 'up');
SELECT count(*) AS no_rows FROM pgdl.roc_curve('mt_clf', 'mt_test', NULL, 'label', 'up');
\set VERBOSITY terse

-- what this test added to the catalog goes (the tests after it count runs)
DELETE FROM pgdl.models WHERE name IN ('mt_clf', 'mt_reg', 'mt_tags', 'mt_no_dataset');
DELETE FROM pgdl.runs WHERE id > :mt_first_run;
DROP TABLE mt_hand, mt_hand_p, mt_hand_w, mt_hand_wp, mt_hand_1p, mt_rows, mt_train, mt_test, mt_train_p, mt_test_p, mt_reg_p, mt_tags, mt_tags_p;
