-- Explanations: pgdl.explain (integrated gradients of one prediction) and pgdl.feature_importance
-- (permutation importance over rows).  Completeness is checked against pgdl.predict at x and at the
-- baseline the rows show; the input gradients against PyTorch in regress/metrics/check_explain.py.
-- Tables are named ex_*.
SET client_min_messages = warning;
-- other tests count on the catalog's ids: they are restored at the end
SELECT last_value AS ex_runs_seq, is_called AS ex_runs_called FROM pgdl.runs_id_seq \gset
SELECT last_value AS ex_models_seq, is_called AS ex_models_called FROM pgdl.models_id_seq \gset
SELECT last_value AS ex_datasets_seq, is_called AS ex_datasets_called FROM pgdl.datasets_id_seq \gset
SELECT coalesce(max(id), 0) AS ex_first_run FROM pgdl.runs \gset

-- whether explain's attributions sum to f(x) - f(baseline) within 1% or 1e-4, f being pgdl.predict's
-- output `k` (1-based) at the values and the baseline values the rows show
CREATE FUNCTION ex_complete(model text, x double precision[], target text, k integer, steps integer DEFAULT 64)
RETURNS boolean LANGUAGE sql AS $$
	WITH e AS (SELECT * FROM pgdl.explain(model, x, target, steps => steps)),
	     f AS (SELECT (pgdl.predict(model, (SELECT array_agg(value ORDER BY feature) FROM e)))[k]
	                - (pgdl.predict(model, (SELECT array_agg(baseline_value ORDER BY feature) FROM e)))[k] AS d)
	SELECT abs((SELECT sum(attribution) FROM e) - f.d) <= greatest(0.01 * abs(f.d), 1e-4) AND abs(f.d) > 1e-3
	  FROM f
$$;

-- three numeric columns; the label depends on a and b, not on c
CREATE TABLE ex_rows AS
SELECT i AS id, sin(i) AS a, cos(i) AS b, (abs(hashint4(i)) % 1000) / 500.0 - 1 AS c,
       (CASE WHEN sin(i) > 0.4 THEN 'up' WHEN cos(i) > 0 THEN 'flat' ELSE 'down' END) AS label
  FROM generate_series(1, 400) i;
SELECT pgdl.pack('ex_rows', 'a, b, c', 'label', 'ex_p', buffer_rows => 50, partitions => 1) > 0 AS packed;
SELECT pgdl.fit('ex_p', '{"input": [3], "layers": [{"type": "dense", "units": 16}, {"type": "tanh"},
                          {"type": "dropout", "rate": 0.2}, {"type": "dense", "units": 3}]}'::jsonb,
                '{"optimizer": "adam", "lr": 0.05, "batch_size": 25, "seed": 1}', epochs => 20, name => 'ex_mlp') AS ex_mlp \gset

-- a row per feature, named as pack read them; the baseline is the training mean (the packed rows' mean)
SELECT feature, name, round(value::numeric, 4) AS value,
       abs(baseline_value - (SELECT avg(CASE feature WHEN 1 THEN a WHEN 2 THEN b ELSE c END) FROM ex_rows)) < 1e-6 AS mean,
       attribution IS NOT NULL AS attributed
  FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2]);
-- the predicted class by default: 'up' (a high) owes its probability mostly to a
SELECT pgdl.predict_class('ex_mlp', ARRAY[0.9, 0.1, 0.2]) AS predicted,
       (SELECT name FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2]) ORDER BY attribution DESC LIMIT 1) AS top;
SELECT array_agg(e1.attribution = e2.attribution ORDER BY e1.feature) AS same_as_named
  FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2]) e1
  JOIN pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], 'up') e2 USING (feature);
-- completeness: classes are sorted (down, flat, up); each class, several points, by id and by name
SELECT ex_complete('ex_mlp', ARRAY[0.9, 0.1, 0.2], 'up', 3) AS up,
       ex_complete('ex_mlp', ARRAY[0.9, 0.1, 0.2], 'down', 1) AS down,
       ex_complete('ex_mlp', ARRAY[-0.5, -0.8, 0.4], 'down', 1) AS down_2,
       ex_complete('ex_mlp', ARRAY[0.1, 0.9, -0.3], 'flat', 2) AS flat;
SELECT bool_and(e1 = e2) AS by_id_as_by_name
  FROM pgdl.explain(:ex_mlp, ARRAY[0.1, 0.9, -0.3]) e1 JOIN pgdl.explain('ex_mlp', ARRAY[0.1, 0.9, -0.3]) e2 USING (feature);
-- the attributions of every class sum to zero: the probabilities sum to one at both ends
SELECT abs(sum(attribution)) < 1e-4 AS zero_sum
  FROM unnest(ARRAY['down', 'flat', 'up']) c, pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], c, steps => 256);
-- a given baseline, in raw features: x itself explains nothing
SELECT bool_and(attribution = 0) AS nothing, bool_and(baseline_value = value) AS given
  FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], baseline => ARRAY[0.9, 0.1, 0.2]);
SELECT bool_and(baseline_value = 0) AS zeros
  FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], baseline => ARRAY[0, 0, 0]);
-- one step is (x - baseline) times the gradient at the midpoint; more steps get closer to completeness
SELECT count(*) AS features FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], steps => 1);
SELECT ex_complete('ex_mlp', ARRAY[0.9, 0.1, 0.2], 'up', 3, 4096) AS many_steps;

-- standardized features (the recorded mean is the baseline) given as one array column: no names
CREATE TABLE ex_arr AS SELECT ARRAY[a * 100, b, c] AS x, label FROM ex_rows;
SELECT pgdl.pack('ex_arr', 'x', 'label', 'ex_arr_p', buffer_rows => 50, partitions => 1, standardize => true) > 0
       AS packed;
SELECT pgdl.fit('ex_arr_p', '{"input": [3], "layers": [{"type": "dense", "units": 16}, {"type": "batchnorm"},
                              {"type": "relu"}, {"type": "dense", "units": 3}]}'::jsonb,
                '{"optimizer": "adam", "lr": 0.05, "batch_size": 25, "seed": 2}', epochs => 10, name => 'ex_std') > 0
       AS trained;
SELECT feature, name IS NULL AS unnamed,
       abs(baseline_value - (SELECT avg(x[feature]) FROM ex_arr)) < 1e-3 * greatest(1, abs(baseline_value)) AS mean
  FROM pgdl.explain('ex_std', ARRAY[90, 0.1, 0.2]);
SELECT ex_complete('ex_std', ARRAY[90, 0.1, 0.2], 'up', 3) AS up, ex_complete('ex_std', ARRAY[-50, -0.8, 0.4], 'down', 1) AS down;

-- regression with standardized targets: attributions in target units, as pgdl.predict answers
CREATE TABLE ex_reg AS SELECT a, b, c, 50 + 30 * a - 10 * b * b AS t FROM ex_rows;
SELECT pgdl.pack('ex_reg', 'a, b, c', 't', 'ex_reg_p', buffer_rows => 50, partitions => 1,
                 standardize_target => true) > 0 AS packed;
SELECT pgdl.fit('ex_reg_p', '{"input": [3], "layers": [{"type": "dense", "units": 16}, {"type": "tanh"},
                              {"type": "dense", "units": 1}], "loss": "mse"}'::jsonb,
                '{"optimizer": "adam", "lr": 0.02, "batch_size": 25, "seed": 3}', epochs => 30, name => 'ex_reg') > 0
       AS trained;
SELECT ex_complete('ex_reg', ARRAY[0.8, 0.5, 0], NULL, 1) AS default_output,
       ex_complete('ex_reg', ARRAY[-0.8, 0.5, 0], '1', 1) AS output_1;
SELECT name, attribution > 10 AS large FROM pgdl.explain('ex_reg', ARRAY[0.8, 0.5, 0]) WHERE name = 'a';
SELECT * FROM pgdl.explain('ex_reg', ARRAY[0.8, 0.5, 0], '2');
SELECT * FROM pgdl.explain('ex_reg', ARRAY[0.8, 0.5, 0], 'first');

-- one binary_cross_entropy output: class 0's probability is 1 - p, its attributions the opposite
CREATE TABLE ex_bin AS SELECT a, b, c, (a + b > 0)::integer AS label FROM ex_rows;
SELECT pgdl.pack('ex_bin', 'a, b, c', 'label', 'ex_bin_p', buffer_rows => 50, partitions => 1) > 0 AS packed;
SELECT pgdl.fit('ex_bin_p', '{"input": [3], "layers": [{"type": "dense", "units": 1}],
                              "loss": "binary_cross_entropy"}'::jsonb,
                '{"optimizer": "adam", "lr": 0.1, "batch_size": 25, "seed": 4}', epochs => 10, name => 'ex_bin') > 0
       AS trained;
SELECT ex_complete('ex_bin', ARRAY[0.7, 0.4, 0], '1', 1) AS class_1,
       bool_and(e0.attribution = -e1.attribution) AS opposite
  FROM pgdl.explain('ex_bin', ARRAY[0.7, 0.4, 0], '0') e0 JOIN pgdl.explain('ex_bin', ARRAY[0.7, 0.4, 0], '1') e1 USING (feature);
-- its blob has no dataset: no names, zeros as the baseline, classes by index
SELECT weights AS ex_bin_blob FROM pgdl.models WHERE name = 'ex_bin' \gset
SELECT feature, name IS NULL AS unnamed, baseline_value
  FROM pgdl.explain(:'ex_bin_blob'::bytea, ARRAY[0.7, 0.4, 0], '1');
SELECT * FROM pgdl.explain(:'ex_bin_blob'::bytea, ARRAY[0.7, 0.4, 0], 'yes');

-- a categorical column and a token sequence, embedded: attributed in embedding space, a row per id, the
-- baseline the unseen id (0) and an empty sequence
CREATE TABLE ex_seq AS
SELECT i AS id, sin(i) AS a, (ARRAY['red', 'green', 'blue'])[1 + i % 3] AS colour,
       ARRAY(SELECT 1 + (i * k) % 5 FROM generate_series(1, 1 + i % 4) k) AS toks,
       ((i % 3 = 0) OR (1 + i % 5 = 3))::integer AS label
  FROM generate_series(1, 300) i;
SELECT pgdl.pack('ex_seq', 'a', 'label', 'ex_seq_p', buffer_rows => 50, partitions => 1,
                 categorical => 'colour', sequence => 'toks') > 0 AS packed;
-- example: a, colour's id, 4 token ids, the length
SELECT pgdl.fit('ex_seq_p', '{"input": [7], "layers": [
  {"type": "slice", "start": 0, "length": 1, "inputs": ["input"], "name": "a"},
  {"type": "slice", "start": 1, "length": 1, "inputs": ["input"]},
  {"type": "embedding", "vocab": 4, "dim": 3},
  {"type": "flatten", "name": "colour"},
  {"type": "slice", "start": 2, "length": 4, "inputs": ["input"]},
  {"type": "embedding", "vocab": 8, "dim": 4},
  {"type": "gru", "units": 8, "name": "toks"},
  {"type": "concat", "inputs": ["a", "colour", "toks"]},
  {"type": "dense", "units": 2}]}'::jsonb,
  '{"optimizer": "adam", "lr": 0.05, "batch_size": 25, "seed": 5}', epochs => 10, name => 'ex_seq') > 0 AS trained;
SELECT feature, name, value, round(baseline_value::numeric, 4) AS baseline_value, attribution <> 0 AS attributed
  FROM pgdl.explain('ex_seq', ARRAY[0.5], ARRAY['blue'], '[[3, 1]]', '1');
WITH e AS (SELECT * FROM pgdl.explain('ex_seq', ARRAY[0.5], ARRAY['blue'], '[[3, 1]]', '1'))
SELECT abs((SELECT sum(attribution) FROM e)
           - ((pgdl.predict('ex_seq', ARRAY[0.5], ARRAY['blue'], '[[3, 1]]'))[2]
              - (pgdl.predict('ex_seq', ARRAY[(SELECT baseline_value FROM e WHERE feature = 1)],
                              ARRAY[NULL], '[[]]'))[2])) < 1e-3 AS complete;
-- the encoded vector in the x-only form is the same explanation
SELECT bool_and(abs(e1.attribution - e2.attribution) < 1e-6) AS same_as_encoded
  FROM pgdl.explain('ex_seq', ARRAY[0.5], ARRAY['blue'], '[[3, 1]]', '1') e1
  JOIN pgdl.explain('ex_seq', pgdl.encode('ex_seq_p', ARRAY[0.5]::real[], ARRAY['blue'], '[[3, 1]]')::float8[], '1') e2
 USING (feature);
SELECT * FROM pgdl.explain('ex_seq', ARRAY[0.5], ARRAY['blue'], '[[3, 1]]', baseline => ARRAY[0.5, 0]);
SELECT * FROM pgdl.explain('ex_seq', ARRAY[0.5], ARRAY['blue']);
SELECT * FROM pgdl.explain('ex_seq', pgdl.encode('ex_seq_p', ARRAY[0.5]::real[], ARRAY['blue'], '[[3, 1]]')::float8[],
                           baseline => ARRAY[0, 0, 9, 0, 0, 0, 0]);

-- errors
SELECT * FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], 'sideways');
SELECT * FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], steps => 0);
SELECT * FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], steps => 4097);
SELECT * FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1]);
SELECT * FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], baseline => ARRAY[0, 0]);
SELECT * FROM pgdl.explain('ex_mlp', ARRAY[0.9, 'NaN', 0.2]);
SELECT * FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], baseline => ARRAY[0, 'Infinity', 0]::float8[]);
SELECT * FROM pgdl.explain('ex_mlp', ARRAY[1e300, 0.1, 0.2]);
SELECT * FROM pgdl.explain('ex_nope', ARRAY[0.9, 0.1, 0.2]);
SELECT * FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], ARRAY['x']);
-- a model whose training diverged answers nothing (its id, which other tests move, left out)
SELECT pgdl.fit('ex_p', '{"input": [3], "layers": [{"type": "dense", "units": 8}, {"type": "relu"},
                          {"type": "dense", "units": 3}]}'::jsonb, '{"lr": 1e30, "batch_size": 4}', 1,
                name => 'ex_diverged') AS ex_diverged \gset
CREATE FUNCTION ex_error(q text, id bigint) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ' ' || replace(SQLERRM, 'model ' || id || ' ', 'model <id> ');
END $$;
SELECT ex_error('SELECT * FROM pgdl.explain(''ex_diverged'', ARRAY[0.9, 0.1, 0.2])', :ex_diverged) AS explain,
       ex_error('SELECT * FROM pgdl.feature_importance(''ex_diverged'', ''ex_p'')', :ex_diverged) AS importance;
-- NULL: no rows for the model, x or steps; the defaults for target_class and baseline
SELECT count(*) FROM pgdl.explain(NULL::text, ARRAY[0.9, 0.1, 0.2]);
SELECT count(*) FROM pgdl.explain('ex_mlp', NULL);
SELECT count(*) FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], steps => NULL);
SELECT count(*) FROM pgdl.explain('ex_mlp', ARRAY[0.9, 0.1, 0.2], NULL::text, NULL::float8[]);
SELECT count(*) FROM pgdl.explain('ex_seq', ARRAY[0.5], NULL::text[]);

-- pgdl.feature_importance: a and b decide the label, c is noise
SELECT name, importance > 0.2 AS decisive, abs(importance) < 0.1 AS noise, importance_std > 0 AS spread
  FROM pgdl.feature_importance('ex_mlp', 'ex_p') ORDER BY feature;
-- the same rows raw, in a query: the same numbers (rows in another order are shuffled otherwise)
SELECT count(*) AS features, bool_and(abs(p.importance - r.importance) < 0.05) AS close
  FROM pgdl.feature_importance('ex_mlp', 'ex_p') p
  JOIN pgdl.feature_importance('ex_mlp', 'SELECT * FROM ex_rows ORDER BY id', 'a, b, c', 'label') r USING (feature);
-- a seed fixes the shuffles; another seed shuffles otherwise
SELECT bool_and(s1.importance = s2.importance AND s1.importance_std = s2.importance_std) AS same_seed,
       bool_or(s1.importance <> s3.importance) AS other_seed
  FROM pgdl.feature_importance(:ex_mlp, 'ex_p', seed => 3) s1
  JOIN pgdl.feature_importance(:ex_mlp, 'ex_p', seed => 3) s2 USING (feature)
  JOIN pgdl.feature_importance(:ex_mlp, 'ex_p', seed => 4) s3 USING (feature);
-- a loss rises when a feature is shuffled: importance is still positive for the decisive ones
SELECT name, importance > 0 AS positive FROM pgdl.feature_importance('ex_mlp', 'ex_p', 'log_loss', 2) WHERE feature < 3;
SELECT name, importance > 0 AS positive FROM pgdl.feature_importance('ex_mlp', 'ex_p', 'loss', 2) WHERE feature < 3;
SELECT count(*) FILTER (WHERE importance_std = 0) AS one_repeat
  FROM pgdl.feature_importance('ex_mlp', 'ex_p', 'f1', 1);
-- regression: R² by default, mse on request (in target units)
SELECT name, importance > 0.5 AS decisive FROM pgdl.feature_importance('ex_reg', 'ex_reg_p') ORDER BY feature;
SELECT name, importance > 10 AS decisive FROM pgdl.feature_importance('ex_reg', 'ex_reg_p', 'mse', 2) WHERE name = 'a';
-- a blob over a packed table; a weighted pack scores weighted rows
SELECT count(*) AS features FROM pgdl.feature_importance(:'ex_bin_blob'::bytea, 'ex_bin_p');
CREATE TABLE ex_bin_w AS SELECT *, (1 + 2 * (a > 0)::integer)::real AS w FROM ex_bin;
SELECT pgdl.pack('ex_bin_w', 'a, b, c', 'label', 'ex_bin_wp', buffer_rows => 50, partitions => 1, weight => 'w') > 0
       AS packed;
SELECT name, importance > 0.1 AS decisive FROM pgdl.feature_importance('ex_bin', 'ex_bin_wp') ORDER BY feature;
SELECT bool_or(w.importance <> u.importance) AS weighed
  FROM pgdl.feature_importance('ex_bin', 'ex_bin_wp') w JOIN pgdl.feature_importance('ex_bin', 'ex_bin_p') u USING (feature);
-- errors
SELECT * FROM pgdl.feature_importance('ex_mlp', 'ex_p', 'r2');
SELECT * FROM pgdl.feature_importance('ex_mlp', 'ex_p', 'nope');
SELECT * FROM pgdl.feature_importance('ex_mlp', 'ex_p', repeats => 0);
SELECT * FROM pgdl.feature_importance('ex_mlp', 'ex_p', repeats => 1001);
SELECT * FROM pgdl.feature_importance('ex_mlp', 'SELECT * FROM ex_rows WHERE false', 'a, b, c', 'label');
SELECT * FROM pgdl.feature_importance('ex_mlp', 'SELECT * FROM ex_rows WHERE id = 1', 'a, b, c', 'label', 'roc_auc');
SELECT * FROM pgdl.feature_importance('ex_mlp', 'ex_reg_p');
SET maintenance_work_mem = '1MB';
SELECT * FROM pgdl.feature_importance('ex_mlp', 'SELECT sin(i) AS a, cos(i) AS b, 0 AS c, ''up'' AS label FROM generate_series(1, 60000) i',
                                      'a, b, c', 'label');
RESET maintenance_work_mem;
-- NULL: no rows, but the default metric
SELECT count(*) FROM pgdl.feature_importance(NULL::text, 'ex_p');
SELECT count(*) FROM pgdl.feature_importance('ex_mlp', NULL::regclass);
SELECT count(*) FROM pgdl.feature_importance('ex_mlp', 'ex_p', NULL, NULL);
SELECT count(*) FROM pgdl.feature_importance('ex_mlp', 'ex_p', seed => NULL);
SELECT count(*) FROM pgdl.feature_importance('ex_mlp', 'ex_rows', 'a, b, c', NULL);
SELECT count(*) FROM pgdl.feature_importance('ex_mlp', 'ex_p', NULL);

-- leave nothing behind
DROP FUNCTION ex_complete, ex_error;
DELETE FROM pgdl.models WHERE name LIKE 'ex\_%' OR run > :ex_first_run;
DELETE FROM pgdl.runs WHERE id > :ex_first_run;
DROP TABLE ex_rows, ex_p, ex_arr, ex_arr_p, ex_reg, ex_reg_p, ex_bin, ex_bin_p, ex_bin_w, ex_bin_wp, ex_seq, ex_seq_p;
SELECT setval('pgdl.runs_id_seq', :ex_runs_seq, :'ex_runs_called'::boolean) > 0 AS restored,
       setval('pgdl.models_id_seq', :ex_models_seq, :'ex_models_called'::boolean) > 0 AS restored,
       setval('pgdl.datasets_id_seq', :ex_datasets_seq, :'ex_datasets_called'::boolean) > 0 AS restored;
SELECT (SELECT count(*) FROM pgdl.datasets WHERE packed::text LIKE 'ex\_%') AS datasets,
       (SELECT count(*) FROM pgdl.models WHERE name LIKE 'ex\_%') AS models;
