-- Preprocessing that travels with the model (docs/reference/pack.md#preprocessing): pgdl.pack's impute,
-- impute_value, scaling and one_hot, stored with the dataset and applied by every predict path.  For every
-- option, predicting from raw rows equals predicting from the packed buffers bit for bit; the statistics
-- equal SQL's own (avg, percentile_cont: numpy's "linear" quantiles, min, max) over the training rows.
-- Tables are named pp_*.

SET client_min_messages = warning;
-- other tests count on the catalog's ids: they are restored at the end
SELECT last_value AS pp_runs_seq, is_called AS pp_runs_called FROM pgdl.runs_id_seq \gset
SELECT last_value AS pp_models_seq, is_called AS pp_models_called FROM pgdl.models_id_seq \gset
SELECT last_value AS pp_datasets_seq, is_called AS pp_datasets_called FROM pgdl.datasets_id_seq \gset
SELECT coalesce(max(id), 0) AS pp_first_run FROM pgdl.runs \gset

-- a: NULL in some rows; b: NaN in others (missing too); c: never missing; d: one value only;
-- color: three values and a NULL; shape: an id column (categorical, not one-hot); single: one value
CREATE TABLE pp_src (id integer, a real, b double precision, c integer, d real, color text, shape text,
                     single text, y integer);
INSERT INTO pp_src
SELECT i, CASE WHEN i % 7 = 0 THEN NULL ELSE ((i * 37) % 101)::real / 7 END,
       CASE WHEN i % 11 = 0 THEN 'NaN'::float8 ELSE round((sin(i) * 100)::numeric, 3)::float8 END,
       (i * 13) % 17, 5,
       CASE WHEN i % 9 = 0 THEN NULL ELSE (ARRAY['red', 'green', 'blue'])[1 + i % 3] END,
       (ARRAY['o', 'x'])[1 + i % 2], 'z', (i % 3 = 0)::integer
  FROM generate_series(1, 240) i;

-- an error's SQLSTATE and detail, without the ids of the catalog rows it names
CREATE FUNCTION pg_temp.error_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
BEGIN
	EXECUTE statement;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || detail;
END $$;

-- Predictions of `model` for the raw rows `raw` (a query of one real[] column) against those of its
-- weights alone (a blob: no dataset, its input used as given) for every row of its packed table, as
-- bytes: the same multiset, bit for bit.
CREATE FUNCTION pg_temp.same_predictions(model bigint, raw text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	blob bytea;
	packed regclass;
	nf integer;
	ok boolean;
BEGIN
	SELECT m.weights, d.packed, d.n_features INTO blob, packed, nf
	  FROM pgdl.models m JOIN pgdl.datasets d ON d.id = m.dataset WHERE m.id = model;
	EXECUTE format($q$
		WITH r AS (SELECT pg_catalog.array_send(p) AS p FROM (%s) s(p)),
		     k AS (SELECT pg_catalog.array_send(pgdl.predict($1, b.x[i * $2 + 1 : (i + 1) * $2])) AS p
		             FROM %s b, generate_series(0, b.n - 1) i)
		SELECT (SELECT count(*) FROM r) = (SELECT count(*) FROM k)
		   AND NOT EXISTS (SELECT p FROM r EXCEPT ALL SELECT p FROM k)
		   AND NOT EXISTS (SELECT p FROM k EXCEPT ALL SELECT p FROM r)$q$, raw, packed) INTO ok USING blob, nf;
	RETURN ok;
END $$;

CREATE FUNCTION pg_temp.spec(n integer) RETURNS jsonb LANGUAGE sql AS $$
	SELECT format('{"input": [%s], "layers": [{"type": "dense", "units": 8}, {"type": "tanh"},
	               {"type": "dense", "units": 2}]}', n)::jsonb $$;

-- ---- impute => 'mean', standardized ----
SELECT pgdl.pack('pp_src', 'a, b, c, d', 'y', 'pp_mean', buffer_rows => 16, partitions => 2,
                 impute => 'mean', scaling => 'standard') AS pp_mean \gset
-- 4 features and the indicators of a and b (c and d were never missing)
SELECT n_features, imputation ->> 'strategy' AS strategy, imputation -> 'indicators' AS indicators,
       jsonb_object_keys(normalization) AS keys
  FROM pgdl.datasets WHERE id = :pp_mean ORDER BY keys;
-- the imputed values are the means of the values present (NaN is missing), as real
SELECT (imputation -> 'values' ->> 0)::real = (SELECT avg(a)::real FROM pp_src) AS a_mean,
       (imputation -> 'values' ->> 1)::real = (SELECT avg(b::real)::real FROM pp_src WHERE b <> 'NaN') AS b_mean,
       (imputation -> 'values' ->> 2)::real = (SELECT avg(c)::real FROM pp_src) AS c_mean,
       (imputation -> 'values' ->> 3)::real = 5 AS d_mean
  FROM pgdl.datasets WHERE id = :pp_mean;
-- standardized over the imputed values: a's mean is that of a with its missing values as their mean
SELECT (normalization -> 'mean' ->> 0)::real = (imputation -> 'values' ->> 0)::real AS same_mean,
       (normalization -> 'std' ->> 3)::real AS constant_std
  FROM pgdl.datasets WHERE id = :pp_mean;
SELECT pgdl.fit('pp_mean', pg_temp.spec(6), '{"seed": 3}', 2, name => 'pp_mean_model') AS pp_mean_model \gset
-- a NULL or NaN element of x is imputed: predict from the raw rows equals predict from the packed buffers
SELECT pg_temp.same_predictions(:pp_mean_model,
	'SELECT pgdl.predict(' || :pp_mean_model || ', ARRAY[a, b, c, d]::float8[]) FROM pp_src') AS mean_same;
SELECT pg_temp.same_predictions(:pp_mean_model,
	'SELECT pgdl.predict(' || :pp_mean_model || ', ARRAY[a, b, c, d]::real[]) FROM pp_src') AS mean_same_real;
-- a NULL and a NaN are both missing, the same as the imputed value given
SELECT pgdl.predict(:pp_mean_model, ARRAY[NULL, 1, 2, 5]::real[])
     = pgdl.predict(:pp_mean_model, ARRAY['NaN', 1, 2, 5]::real[]) AS null_is_nan,
       pgdl.predict(:pp_mean_model, ARRAY[NULL, 1, 2, 5]::real[])
    <> pgdl.predict(:pp_mean_model, ARRAY[(SELECT (imputation -> 'values' ->> 0)::real FROM pgdl.datasets
                                                 WHERE id = :pp_mean), 1, 2, 5]::real[]) AS indicator_tells;
-- evaluation over raw rows runs pack's own steps: the same loss as over the packed table
SELECT (SELECT loss FROM pgdl.evaluate(:pp_mean_model, 'pp_src', 'a, b, c, d', 'y'))
     = (SELECT loss FROM pgdl.evaluate(:pp_mean_model, 'pp_mean')) AS evaluate_same;
-- predict_class and predict_batch (a NULL element in the features column is imputed)
SELECT count(*) AS rows, bool_and(b.class = pgdl.predict_class(:pp_mean_model, ARRAY[s.a, s.b, s.c, s.d]::real[]))
         AS batch_same
  FROM pgdl.predict_batch(:pp_mean_model, 'SELECT id, ARRAY[a, b, c, d]::real[] AS f FROM pp_src', 'id', 'f') b
  JOIN pp_src s ON s.id = b.id;
-- explain's rows are the model's input: the imputed value, then the indicators
SELECT feature, name, value, baseline_value
  FROM pgdl.explain(:pp_mean_model, ARRAY[NULL, 1, 2, 5]::real[]) ORDER BY feature;

-- ---- impute => 'median', robust scaling ----
SELECT pgdl.pack('pp_src', 'a, b, c, d', 'y', 'pp_median', buffer_rows => 16, partitions => 2,
                 impute => 'median', scaling => 'robust') AS pp_median \gset
-- the median of the values present; then median and interquartile range of the imputed values
WITH imputed AS (
	SELECT coalesce(a, (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a) FROM pp_src)::real) AS a FROM pp_src)
SELECT (imputation -> 'values' ->> 0)::real = (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a)::real FROM pp_src)
         AS a_median,
       (imputation -> 'values' ->> 1)::real
     = (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY b::real)::real FROM pp_src WHERE b <> 'NaN') AS b_median,
       (normalization -> 'median' ->> 0)::real = (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a)::real FROM imputed)
         AS center,
       (normalization -> 'iqr' ->> 0)::real = (SELECT (percentile_cont(0.75) WITHIN GROUP (ORDER BY a)
                                                       - percentile_cont(0.25) WITHIN GROUP (ORDER BY a))::real
                                                 FROM imputed) AS iqr,
       (normalization -> 'iqr' ->> 3)::real AS constant_iqr
  FROM pgdl.datasets WHERE id = :pp_median;
SELECT pgdl.fit('pp_median', pg_temp.spec(6), '{"seed": 3}', 2) AS pp_median_model \gset
SELECT pg_temp.same_predictions(:pp_median_model,
	'SELECT pgdl.predict(' || :pp_median_model || ', ARRAY[a, b, c, d]::float8[]) FROM pp_src') AS median_same;

-- ---- impute => 'constant', min-max scaling ----
SELECT pgdl.pack('pp_src', 'a, b, c, d', 'y', 'pp_const', buffer_rows => 16, partitions => 2,
                 impute => 'constant', impute_value => -40, scaling => 'minmax') AS pp_const \gset
-- the constant widens the range of the columns it fills
SELECT imputation -> 'values' AS filled,
       (normalization -> 'min' ->> 0)::real AS a_min,
       (normalization -> 'range' ->> 0)::real = (SELECT (max(a) + 40)::real FROM pp_src) AS a_range,
       (normalization -> 'min' ->> 2)::real = (SELECT min(c)::real FROM pp_src) AS c_min,
       (normalization -> 'range' ->> 2)::real = (SELECT (max(c) - min(c))::real FROM pp_src) AS c_range,
       (normalization -> 'range' ->> 3)::real AS constant_range
  FROM pgdl.datasets WHERE id = :pp_const;
SELECT pgdl.fit('pp_const', pg_temp.spec(6), '{"seed": 3}', 2) AS pp_const_model \gset
SELECT pg_temp.same_predictions(:pp_const_model,
	'SELECT pgdl.predict(' || :pp_const_model || ', ARRAY[a, b, c, d]::float8[]) FROM pp_src') AS constant_same;
-- impute => 'constant' without a value fills 0
SELECT pgdl.pack('pp_src', 'a, b', 'y', 'pp_zero', partitions => 1, impute => 'constant') > 0 AS packed;
SELECT imputation -> 'values' AS zeros FROM pgdl.datasets WHERE packed = 'pp_zero'::regclass;

-- ---- one_hot, beside an id column ----
SELECT pgdl.pack('pp_src', 'id', 'y', 'pp_hot', buffer_rows => 16, partitions => 2,
                 categorical => 'shape', one_hot => 'color') AS pp_hot \gset
-- 1 numeric feature, the id of shape, three floats for color (its NULL: none set)
SELECT n_features, categorical FROM pgdl.datasets WHERE id = :pp_hot;
SELECT position, "column", feature, id, value FROM pgdl.vocabulary WHERE dataset = :pp_hot ORDER BY position, id;
-- every packed row's color block is its source row's value one-hot (its id, packed unscaled, finds the row)
WITH packed AS (SELECT x[5 * i + 1 : 5 * i + 5] AS x FROM pp_hot, generate_series(0, n - 1) i)
SELECT count(*) AS rows,
       bool_and(p.x[3:5] = CASE s.color WHEN 'blue' THEN '{1,0,0}'::real[] WHEN 'green' THEN '{0,1,0}'::real[]
                                        WHEN 'red' THEN '{0,0,1}'::real[] ELSE '{0,0,0}'::real[] END) AS one_hot,
       bool_and(p.x[2] = CASE s.shape WHEN 'o' THEN 1 ELSE 2 END) AS ids,
       count(*) FILTER (WHERE p.x[3:5] = '{0,0,0}') AS no_color
  FROM packed p JOIN pp_src s ON s.id = p.x[1];
SELECT pgdl.fit('pp_hot', pg_temp.spec(5), '{"seed": 3}', 2) AS pp_hot_model \gset
SELECT pg_temp.same_predictions(:pp_hot_model,
	'SELECT pgdl.predict(' || :pp_hot_model || ', ARRAY[id]::real[], ARRAY[shape, color]) FROM pp_src') AS one_hot_same;
-- pgdl.encode gives the raw vector (color's id), which predict spreads one-hot
SELECT pgdl.encode('pp_hot', ARRAY[3]::real[], ARRAY['x', 'green']) AS encoded,
       pgdl.predict(:pp_hot_model, pgdl.encode('pp_hot', ARRAY[3]::real[], ARRAY['x', 'green']))
     = pgdl.predict(:pp_hot_model, ARRAY[3]::real[], ARRAY['x', 'green']) AS encode_same,
       pgdl.predict(:pp_hot_model, ARRAY[3]::real[], ARRAY['x', 'purple'])
     = pgdl.predict(:pp_hot_model, ARRAY[3]::real[], ARRAY['x', NULL]) AS unseen_is_null;
SELECT name FROM pgdl.explain(:pp_hot_model, ARRAY[3]::real[], ARRAY['x', 'green']) ORDER BY feature;
-- an id that names no value of the one-hot column
SELECT pgdl.predict(:pp_hot_model, ARRAY[3, 1, 4]::real[]);
SELECT pgdl.predict(:pp_hot_model, ARRAY[3, 1, 1.5]::real[]);

-- ---- all of them, and a dataset packed with the training set as reference ----
SELECT pgdl.pack('pp_src', 'a, b, c, d', 'y', 'pp_all', buffer_rows => 16, partitions => 2,
                 impute => 'median', scaling => 'minmax', categorical => 'shape', one_hot => 'color') AS pp_all \gset
SELECT n_features FROM pgdl.datasets WHERE id = :pp_all;
SELECT pgdl.fit('pp_all', pg_temp.spec(10), '{"seed": 3}', 2) AS pp_all_model \gset
SELECT pg_temp.same_predictions(:pp_all_model,
	'SELECT pgdl.predict(' || :pp_all_model || ', ARRAY[a, b, c, d]::float8[], ARRAY[shape, color]) FROM pp_src')
	AS all_same;
CREATE TABLE pp_test AS SELECT * FROM pp_src WHERE id % 4 = 0;
UPDATE pp_test SET a = NULL WHERE id % 8 = 0;
SELECT pgdl.pack('pp_test', 'a, b, c, d', 'y', 'pp_test_packed', buffer_rows => 16, partitions => 1,
                 reference => 'pp_all') AS pp_test \gset
-- the reference's statistics and layout, not the test rows' own
SELECT t.imputation = r.imputation AS same_imputation, t.normalization = r.normalization AS same_scaling,
       t.categorical = r.categorical AS same_one_hot, t.n_features = r.n_features AS same_layout
  FROM pgdl.datasets t, pgdl.datasets r WHERE t.id = :pp_test AND r.id = :pp_all;
-- raw rows stream in buffers of 128 where the packed table has 16: a product of another batch shape may round
-- in the last bit (OpenBLAS's Haswell kernels do), while another preprocessing would move the loss far more
SELECT abs(p.loss - r.loss) <= 1e-6 * abs(p.loss) AS reference_same
  FROM pgdl.evaluate(:pp_all_model, 'pp_test_packed') p,
       pgdl.evaluate(:pp_all_model, 'pp_test', 'a, b, c, d', 'y') r;
-- a dataset's description for another server carries its imputation: packed there, the same bytes
SELECT pgdl.import_dataset(pgdl.export_dataset('pp_all'), 'pp_imported') IS NOT NULL AS imported;
SELECT pgdl.pack('pp_test', 'a, b, c, d', 'y', 'pp_test_there', buffer_rows => 16, partitions => 1,
                 reference => 'pp_imported') > 0 AS packed;
SELECT (SELECT string_agg(array_send(x) || array_send(y), ''::bytea ORDER BY buffer_id) FROM pp_test_packed)
     = (SELECT string_agg(array_send(x) || array_send(y), ''::bytea ORDER BY buffer_id) FROM pp_test_there)
       AS same_bytes;
-- a dataset preprocessed otherwise is refused, the difference named
SELECT loss FROM pgdl.evaluate(:pp_mean_model, 'pp_median');
SELECT loss FROM pgdl.evaluate(:pp_median_model, 'pp_const');
-- a column of one value takes one float as an id and one-hot: what it is tells them apart
SELECT pgdl.pack('pp_src', 'c', 'y', 'pp_single_id', partitions => 1, categorical => 'single') > 0 AS packed;
SELECT pgdl.pack('pp_src', 'c', 'y', 'pp_single_hot', partitions => 1, one_hot => 'single') > 0 AS packed;
SELECT pgdl.fit('pp_single_id', pg_temp.spec(2), '{"seed": 3}', 1) AS pp_single_model \gset
SELECT loss FROM pgdl.evaluate(:pp_single_model, 'pp_single_hot');

-- ---- errors ----
SELECT pgdl.pack('pp_src', 'a', 'y', 'pp_bad', impute => 'mode');
SELECT pgdl.pack('pp_src', 'a', 'y', 'pp_bad', impute_value => 1);
SELECT pgdl.pack('pp_src', 'a', 'y', 'pp_bad', impute => 'mean', impute_value => 1);
SELECT pgdl.pack('pp_src', 'a', 'y', 'pp_bad', impute => 'constant', impute_value => 'NaN');
SELECT pgdl.pack('pp_src', 'a', 'y', 'pp_bad', impute => 'constant', impute_value => 'Infinity');
SELECT pgdl.pack('pp_src', 'a', 'y', 'pp_bad', impute => 'constant', impute_value => 1e39);
SELECT pgdl.pack('pp_src', 'a', 'y', 'pp_bad', scaling => 'zscore');
SELECT pgdl.pack('pp_src', 'c', 'y', 'pp_bad', scaling => 'minmax', standardize => true);
SELECT pgdl.pack('pp_src', 'c', 'y', 'pp_bad', partitions => 1, scaling => 'standard', standardize => true) > 0
       AS standard_agrees;
SELECT pgdl.pack('pp_src', 'c', 'y', 'pp_bad2', scaling => 'robust', scale => 2);
SELECT pgdl.pack('pp_test', 'a, b, c, d', 'y', 'pp_bad2', reference => 'pp_all', impute => 'mean');
SELECT pgdl.pack('pp_test', 'a, b, c, d', 'y', 'pp_bad2', reference => 'pp_all', one_hot => 'color');
SELECT pgdl.pack('pp_src', 'c', 'y', 'pp_bad2', one_hot => 'a');
SELECT pgdl.pack('pp_src', 'c', 'y', 'pp_bad2', one_hot => 'nope');
SELECT pgdl.pack('pp_src', 'c', 'y', 'pp_bad2', one_hot => 'color,');
-- without impute, a missing feature is what nulls => says, a NaN an error, as before
SELECT pgdl.pack('pp_src', 'a', 'y', 'pp_bad2');
SELECT pgdl.pack('pp_src', 'b', 'y', 'pp_bad2');
-- a column missing in every row has no mean or median; a constant fills it
CREATE TABLE pp_empty (e real, f real[], y integer);
INSERT INTO pp_empty SELECT NULL, ARRAY[i, NULL], i % 2 FROM generate_series(1, 20) i;
SELECT pgdl.pack('pp_empty', 'e', 'y', 'pp_bad2', partitions => 1, impute => 'mean');
SELECT pgdl.pack('pp_empty', 'f', 'y', 'pp_bad2', partitions => 1, impute => 'median');
SELECT pgdl.pack('pp_empty', 'f', 'y', 'pp_empty_packed', partitions => 1, impute => 'constant', impute_value => 7,
                 scaling => 'minmax') > 0 AS packed;
-- an array's NULL element: its indicator, and min-max of a feature that is its constant alone
SELECT n_features, imputation, normalization FROM pgdl.datasets WHERE packed = 'pp_empty_packed'::regclass;
SELECT DISTINCT x[2:3] AS second_and_indicator FROM (SELECT x[3 * i + 1 : 3 * i + 3] AS x
                                                       FROM pp_empty_packed, generate_series(0, n - 1) i) p;
-- a one-hot column of more than 256 values, or none
CREATE TABLE pp_many (c integer, k integer, y integer);
INSERT INTO pp_many SELECT i, i, i % 2 FROM generate_series(1, 300) i;
SELECT pgdl.pack('pp_many', 'c', 'y', 'pp_bad2', partitions => 1, one_hot => 'k');
UPDATE pp_many SET k = NULL;
SELECT pgdl.pack('pp_many', 'c', 'y', 'pp_bad2', partitions => 1, one_hot => 'k');
-- median and robust scaling need the rows in memory
CREATE TABLE pp_big AS SELECT ARRAY(SELECT (i * j % 97)::real FROM generate_series(1, 8) j) AS x, i % 2 AS y
  FROM generate_series(1, 40000) i;
SET maintenance_work_mem = '1MB';
SELECT pgdl.pack('pp_big', 'x', 'y', 'pp_bad2', impute => 'median');
SELECT pgdl.pack('pp_big', 'x', 'y', 'pp_big_minmax', scaling => 'minmax', impute => 'mean') > 0 AS spilled_minmax;
RESET maintenance_work_mem;
SELECT pgdl.pack('pp_big', 'x', 'y', 'pp_big_minmax_mem', scaling => 'minmax', impute => 'mean') > 0 AS in_memory;
SELECT (SELECT string_agg(array_send(x), ''::bytea ORDER BY buffer_id) FROM pp_big_minmax)
     = (SELECT string_agg(array_send(x), ''::bytea ORDER BY buffer_id) FROM pp_big_minmax_mem) AS spill_same_bytes;
-- NULLs in x of a model whose dataset imputes nothing; NULL arguments of predict
SELECT pgdl.predict(:pp_hot_model, ARRAY[NULL]::real[], ARRAY['x', 'red']);
SELECT pgdl.predict(:pp_mean_model, NULL::real[]) IS NULL AS null_x;
SELECT pgdl.predict(:pp_mean_model, ARRAY[1, 2, 'Infinity', 5]::real[]);
SELECT pgdl.predict(:pp_mean_model, ARRAY[1, 2, 3]::real[]);

-- ---- a forged row ----
BEGIN;
UPDATE pgdl.datasets SET imputation = '{"strategy": "mean", "values": [1, 2, 3, 4], "indicators": [2, 1]}'
 WHERE id = :pp_mean;
SELECT pg_temp.error_of('SELECT pgdl.predict(' || :pp_mean_model || ', ARRAY[1, 2, 3, 5]::real[])') AS forged;
UPDATE pgdl.datasets SET imputation = '{"strategy": "mean", "values": [1, "NaN", 3, 4], "indicators": [1, 2]}'
 WHERE id = :pp_mean;
SELECT pg_temp.error_of('SELECT pgdl.predict(' || :pp_mean_model || ', ARRAY[1, 2, 3, 5]::real[])') AS forged;
UPDATE pgdl.datasets SET imputation = '{"strategy": "mode", "values": [1, 2, 3, 4], "indicators": []}'
 WHERE id = :pp_mean;
SELECT pg_temp.error_of('SELECT pgdl.predict(' || :pp_mean_model || ', ARRAY[1, 2, 3, 5]::real[])') AS forged;
UPDATE pgdl.datasets SET imputation = '{"strategy": "mean", "values": [1, 2], "indicators": [1, 2, 3, 4]}'
 WHERE id = :pp_mean;
SELECT pg_temp.error_of('SELECT pgdl.predict(' || :pp_mean_model || ', ARRAY[1, 2, 3, 5]::real[])') AS forged;
UPDATE pgdl.datasets SET normalization = '{"min": [1, 2, 3, 4], "range": [1, 0, 1, 1]}' WHERE id = :pp_const;
SELECT pg_temp.error_of('SELECT pgdl.predict(' || :pp_const_model || ', ARRAY[1, 2, 3, 5]::real[])') AS forged;
UPDATE pgdl.datasets SET categorical = jsonb_set(categorical, '{1,one_hot}', '"yes"') WHERE id = :pp_hot;
SELECT pg_temp.error_of('SELECT pgdl.predict(' || :pp_hot_model || ', ARRAY[3]::real[], ARRAY[''x'', ''green''])')
       AS forged;
ROLLBACK;

-- leave nothing behind
DELETE FROM pgdl.models WHERE run > :pp_first_run OR name LIKE 'pp\_%';
DELETE FROM pgdl.runs WHERE id > :pp_first_run;
DROP TABLE pp_src, pp_test, pp_empty, pp_many, pp_big, pp_mean, pp_median, pp_const, pp_zero, pp_hot, pp_all,
           pp_test_packed, pp_imported, pp_test_there, pp_single_id, pp_single_hot, pp_bad, pp_empty_packed, pp_big_minmax, pp_big_minmax_mem;
SELECT setval('pgdl.runs_id_seq', :pp_runs_seq, :'pp_runs_called'::boolean) > 0 AS restored,
       setval('pgdl.models_id_seq', :pp_models_seq, :'pp_models_called'::boolean) > 0 AS restored,
       setval('pgdl.datasets_id_seq', :pp_datasets_seq, :'pp_datasets_called'::boolean) > 0 AS restored;
SELECT (SELECT count(*) FROM pgdl.datasets WHERE packed::text LIKE 'pp\_%') AS datasets;
