-- Evaluation over raw rows, and the metrics of scikit-learn (see metrics.md)

-- pgdl.evaluate over raw rows: a table, view or query, preprocessed as the model's training set was packed

CREATE FUNCTION pgdl.evaluate(model bigint, source text, features text, label text,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000;
CREATE FUNCTION pgdl.evaluate(model text, source text, features text, label text,
							  OUT loss double precision, OUT accuracy double precision, OUT n bigint)
	AS 'MODULE_PATHNAME', 'pgdl_evaluate_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000;

COMMENT ON FUNCTION pgdl.evaluate(bigint, text, text, text) IS
	'mean loss and accuracy (NULL for mse) of stored model (by id) over the rows of a table, view or query, preprocessed as its training set was packed';
COMMENT ON FUNCTION pgdl.evaluate(text, text, text, text) IS
	'mean loss and accuracy (NULL for mse) of stored model (by name) over the rows of a table, view or query, preprocessed as its training set was packed';

-- pgdl.metrics: scikit-learn's metrics of a model over a packed table or raw rows, one row per
-- metric, class and average (see metrics.md for each name)

CREATE FUNCTION pgdl.metrics(model bigint, packed regclass, top_k integer DEFAULT 2)
	RETURNS TABLE (metric text, class text, average text, value double precision)
	AS 'MODULE_PATHNAME', 'pgdl_metrics'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 40;
CREATE FUNCTION pgdl.metrics(model text, packed regclass, top_k integer DEFAULT 2)
	RETURNS TABLE (metric text, class text, average text, value double precision)
	AS 'MODULE_PATHNAME', 'pgdl_metrics'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 40;
CREATE FUNCTION pgdl.metrics(model bytea, packed regclass, top_k integer DEFAULT 2)
	RETURNS TABLE (metric text, class text, average text, value double precision)
	AS 'MODULE_PATHNAME', 'pgdl_metrics'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 40;
CREATE FUNCTION pgdl.metrics(model bigint, source text, features text, label text, top_k integer DEFAULT 2)
	RETURNS TABLE (metric text, class text, average text, value double precision)
	AS 'MODULE_PATHNAME', 'pgdl_metrics_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000 ROWS 40;
CREATE FUNCTION pgdl.metrics(model text, source text, features text, label text, top_k integer DEFAULT 2)
	RETURNS TABLE (metric text, class text, average text, value double precision)
	AS 'MODULE_PATHNAME', 'pgdl_metrics_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000 ROWS 40;

COMMENT ON FUNCTION pgdl.metrics(bigint, regclass, integer) IS
	'scikit-learn''s metrics of stored model (by id) over a packed table: accuracy, top-k, precision/recall/F1, ROC and PR AUC, log loss; MSE, RMSE, MAE, R²';
COMMENT ON FUNCTION pgdl.metrics(text, regclass, integer) IS
	'scikit-learn''s metrics of stored model (by name) over a packed table: accuracy, top-k, precision/recall/F1, ROC and PR AUC, log loss; MSE, RMSE, MAE, R²';
COMMENT ON FUNCTION pgdl.metrics(bytea, regclass, integer) IS
	'scikit-learn''s metrics of a model blob over a packed table: accuracy, top-k, precision/recall/F1, ROC and PR AUC, log loss; MSE, RMSE, MAE, R²';
COMMENT ON FUNCTION pgdl.metrics(bigint, text, text, text, integer) IS
	'scikit-learn''s metrics of stored model (by id) over the rows of a table, view or query, preprocessed as its training set was packed';
COMMENT ON FUNCTION pgdl.metrics(text, text, text, text, integer) IS
	'scikit-learn''s metrics of stored model (by name) over the rows of a table, view or query, preprocessed as its training set was packed';

-- pgdl.confusion_matrix: (actual, predicted, count, weight) for every pair of a classifier's classes;
-- weight is the rows' weights' sum (scikit-learn's confusion_matrix with sample_weight), count again when unweighted

CREATE FUNCTION pgdl.confusion_matrix(model bigint, packed regclass)
	RETURNS TABLE (actual text, predicted text, count bigint, weight double precision)
	AS 'MODULE_PATHNAME', 'pgdl_confusion_matrix'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.confusion_matrix(model text, packed regclass)
	RETURNS TABLE (actual text, predicted text, count bigint, weight double precision)
	AS 'MODULE_PATHNAME', 'pgdl_confusion_matrix'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.confusion_matrix(model bytea, packed regclass)
	RETURNS TABLE (actual text, predicted text, count bigint, weight double precision)
	AS 'MODULE_PATHNAME', 'pgdl_confusion_matrix'
	LANGUAGE C STABLE STRICT PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.confusion_matrix(model bigint, source text, features text, label text)
	RETURNS TABLE (actual text, predicted text, count bigint, weight double precision)
	AS 'MODULE_PATHNAME', 'pgdl_confusion_matrix_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000 ROWS 100;
CREATE FUNCTION pgdl.confusion_matrix(model text, source text, features text, label text)
	RETURNS TABLE (actual text, predicted text, count bigint, weight double precision)
	AS 'MODULE_PATHNAME', 'pgdl_confusion_matrix_rows'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 100000 ROWS 100;

COMMENT ON FUNCTION pgdl.confusion_matrix(bigint, regclass) IS
	'rows of actual class, predicted class, count and weight of stored classifier (by id) over a packed table, every pair of classes';
COMMENT ON FUNCTION pgdl.confusion_matrix(text, regclass) IS
	'rows of actual class, predicted class, count and weight of stored classifier (by name) over a packed table, every pair of classes';
COMMENT ON FUNCTION pgdl.confusion_matrix(bytea, regclass) IS
	'rows of actual class, predicted class, count and weight of a classifier blob over a packed table, every pair of classes';
COMMENT ON FUNCTION pgdl.confusion_matrix(bigint, text, text, text) IS
	'rows of actual class, predicted class, count and weight of stored classifier (by id) over the rows of a table, view or query';
COMMENT ON FUNCTION pgdl.confusion_matrix(text, text, text, text) IS
	'rows of actual class, predicted class, count and weight of stored classifier (by name) over the rows of a table, view or query';

-- pgdl.roc_curve: (threshold, fpr, tpr) of one class against the others, as scikit-learn 1.2's roc_curve

CREATE FUNCTION pgdl.roc_curve(model bigint, packed regclass, positive text DEFAULT NULL)
	RETURNS TABLE (threshold double precision, fpr double precision, tpr double precision)
	AS 'MODULE_PATHNAME', 'pgdl_roc_curve'
	LANGUAGE C STABLE PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.roc_curve(model text, packed regclass, positive text DEFAULT NULL)
	RETURNS TABLE (threshold double precision, fpr double precision, tpr double precision)
	AS 'MODULE_PATHNAME', 'pgdl_roc_curve'
	LANGUAGE C STABLE PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.roc_curve(model bytea, packed regclass, positive text DEFAULT NULL)
	RETURNS TABLE (threshold double precision, fpr double precision, tpr double precision)
	AS 'MODULE_PATHNAME', 'pgdl_roc_curve'
	LANGUAGE C STABLE PARALLEL SAFE COST 100000 ROWS 100;
CREATE FUNCTION pgdl.roc_curve(model bigint, source text, features text, label text, positive text DEFAULT NULL)
	RETURNS TABLE (threshold double precision, fpr double precision, tpr double precision)
	AS 'MODULE_PATHNAME', 'pgdl_roc_curve_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 100000 ROWS 100;
CREATE FUNCTION pgdl.roc_curve(model text, source text, features text, label text, positive text DEFAULT NULL)
	RETURNS TABLE (threshold double precision, fpr double precision, tpr double precision)
	AS 'MODULE_PATHNAME', 'pgdl_roc_curve_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 100000 ROWS 100;

COMMENT ON FUNCTION pgdl.roc_curve(bigint, regclass, text) IS
	'ROC curve (threshold, fpr, tpr) of stored classifier (by id) over a packed table, for class positive (default: the second of two)';
COMMENT ON FUNCTION pgdl.roc_curve(text, regclass, text) IS
	'ROC curve (threshold, fpr, tpr) of stored classifier (by name) over a packed table, for class positive (default: the second of two)';
COMMENT ON FUNCTION pgdl.roc_curve(bytea, regclass, text) IS
	'ROC curve (threshold, fpr, tpr) of a classifier blob over a packed table, for class positive (default: the second of two)';
COMMENT ON FUNCTION pgdl.roc_curve(bigint, text, text, text, text) IS
	'ROC curve (threshold, fpr, tpr) of stored classifier (by id) over the rows of a table, view or query, for class positive';
COMMENT ON FUNCTION pgdl.roc_curve(text, text, text, text, text) IS
	'ROC curve (threshold, fpr, tpr) of stored classifier (by name) over the rows of a table, view or query, for class positive';
