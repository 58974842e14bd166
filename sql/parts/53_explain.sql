-- Explanations (see explain.md): integrated gradients of one prediction, permutation importance over rows

-- pgdl.explain: a row per feature of the model's input: x's value, the baseline's, and the feature's share of
-- f(x) - f(baseline), f being what pgdl.predict answers (the class's probability, or the output)

CREATE FUNCTION pgdl.explain(model bigint, x double precision[], target_class text DEFAULT NULL,
							 baseline double precision[] DEFAULT NULL, steps integer DEFAULT 64)
	RETURNS TABLE (feature integer, name text, value double precision, baseline_value double precision,
				  attribution double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 10000 ROWS 100;

CREATE FUNCTION pgdl.explain(model text, x double precision[], target_class text DEFAULT NULL,
							 baseline double precision[] DEFAULT NULL, steps integer DEFAULT 64)
	RETURNS TABLE (feature integer, name text, value double precision, baseline_value double precision,
				  attribution double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 10000 ROWS 100;

CREATE FUNCTION pgdl.explain(model bytea, x double precision[], target_class text DEFAULT NULL,
							 baseline double precision[] DEFAULT NULL, steps integer DEFAULT 64)
	RETURNS TABLE (feature integer, name text, value double precision, baseline_value double precision,
				  attribution double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 10000 ROWS 100;

CREATE FUNCTION pgdl.explain(model bigint, x double precision[], categories text[], sequences jsonb DEFAULT NULL,
							 target_class text DEFAULT NULL, baseline double precision[] DEFAULT NULL,
							 steps integer DEFAULT 64)
	RETURNS TABLE (feature integer, name text, value double precision, baseline_value double precision,
				  attribution double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain_categories'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 10000 ROWS 100;

CREATE FUNCTION pgdl.explain(model text, x double precision[], categories text[], sequences jsonb DEFAULT NULL,
							 target_class text DEFAULT NULL, baseline double precision[] DEFAULT NULL,
							 steps integer DEFAULT 64)
	RETURNS TABLE (feature integer, name text, value double precision, baseline_value double precision,
				  attribution double precision)
	AS 'MODULE_PATHNAME', 'pgdl_explain_categories'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 10000 ROWS 100;


COMMENT ON FUNCTION pgdl.explain(bigint, double precision[], text, double precision[], integer) IS
	'integrated gradients of stored model (by id) at x: per feature, x''s value, the baseline''s (default: the training mean) and its attribution to the predicted (or named) class''s probability or the output, summing to f(x) - f(baseline)';
COMMENT ON FUNCTION pgdl.explain(text, double precision[], text, double precision[], integer) IS
	'integrated gradients of stored model (by name) at x: per feature, x''s value, the baseline''s (default: the training mean) and its attribution to the predicted (or named) class''s probability or the output, summing to f(x) - f(baseline)';
COMMENT ON FUNCTION pgdl.explain(bytea, double precision[], text, double precision[], integer) IS
	'integrated gradients of a model blob (features not normalized, zeros as the default baseline) at x: per feature, x''s value, the baseline''s (default: the training mean) and its attribution to the predicted (or named) class''s probability or the output, summing to f(x) - f(baseline)';
COMMENT ON FUNCTION pgdl.explain(bigint, double precision[], text[], jsonb, text, double precision[], integer) IS
	'integrated gradients of stored model (by id) at raw numeric features, categorical values and token sequences: embedded ids attributed in their embedding space, one row per id';
COMMENT ON FUNCTION pgdl.explain(text, double precision[], text[], jsonb, text, double precision[], integer) IS
	'integrated gradients of stored model (by name) at raw numeric features, categorical values and token sequences: embedded ids attributed in their embedding space, one row per id';

-- pgdl.feature_importance: permutation importance, the worsening of a metric when one feature is shuffled
-- across the rows (larger: more important), mean and standard deviation over seeded repeats

CREATE FUNCTION pgdl.feature_importance(model bigint, packed regclass, metric text DEFAULT NULL,
										repeats integer DEFAULT 5, seed bigint DEFAULT 0)
	RETURNS TABLE (feature integer, name text, importance double precision, importance_std double precision)
	AS 'MODULE_PATHNAME', 'pgdl_feature_importance'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 1000000 ROWS 100;

CREATE FUNCTION pgdl.feature_importance(model text, packed regclass, metric text DEFAULT NULL,
										repeats integer DEFAULT 5, seed bigint DEFAULT 0)
	RETURNS TABLE (feature integer, name text, importance double precision, importance_std double precision)
	AS 'MODULE_PATHNAME', 'pgdl_feature_importance'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 1000000 ROWS 100;

CREATE FUNCTION pgdl.feature_importance(model bytea, packed regclass, metric text DEFAULT NULL,
										repeats integer DEFAULT 5, seed bigint DEFAULT 0)
	RETURNS TABLE (feature integer, name text, importance double precision, importance_std double precision)
	AS 'MODULE_PATHNAME', 'pgdl_feature_importance'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 1000000 ROWS 100;

CREATE FUNCTION pgdl.feature_importance(model bigint, source text, features text, label text,
										metric text DEFAULT NULL, repeats integer DEFAULT 5, seed bigint DEFAULT 0)
	RETURNS TABLE (feature integer, name text, importance double precision, importance_std double precision)
	AS 'MODULE_PATHNAME', 'pgdl_feature_importance_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 1000000 ROWS 100;

CREATE FUNCTION pgdl.feature_importance(model text, source text, features text, label text,
										metric text DEFAULT NULL, repeats integer DEFAULT 5, seed bigint DEFAULT 0)
	RETURNS TABLE (feature integer, name text, importance double precision, importance_std double precision)
	AS 'MODULE_PATHNAME', 'pgdl_feature_importance_rows'
	LANGUAGE C STABLE PARALLEL RESTRICTED COST 1000000 ROWS 100;


COMMENT ON FUNCTION pgdl.feature_importance(bigint, regclass, text, integer, bigint) IS
	'permutation importance of stored model (by id) over a packed table: per feature, how much the metric (default: accuracy, R² for regression) worsens with the feature shuffled, mean and standard deviation over seeded repeats';
COMMENT ON FUNCTION pgdl.feature_importance(text, regclass, text, integer, bigint) IS
	'permutation importance of stored model (by name) over a packed table: per feature, how much the metric (default: accuracy, R² for regression) worsens with the feature shuffled, mean and standard deviation over seeded repeats';
COMMENT ON FUNCTION pgdl.feature_importance(bytea, regclass, text, integer, bigint) IS
	'permutation importance of a model blob over a packed table: per feature, how much the metric (default: accuracy, R² for regression) worsens with the feature shuffled, mean and standard deviation over seeded repeats';
COMMENT ON FUNCTION pgdl.feature_importance(bigint, text, text, text, text, integer, bigint) IS
	'permutation importance of stored model (by id) over the rows of a table, view or query, preprocessed as its training set was packed';
COMMENT ON FUNCTION pgdl.feature_importance(text, text, text, text, text, integer, bigint) IS
	'permutation importance of stored model (by name) over the rows of a table, view or query, preprocessed as its training set was packed';
