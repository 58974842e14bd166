-- "class_weight" in a training configuration: "balanced" (scikit-learn's
-- n_samples / (n_classes * count)) or an object from label to weight, resolved
-- against the dataset when pgdl.fit or pgdl.fit_multiple starts.  The engine's
-- weighted loss is checked against PyTorch in regress/unit (parity_weighted_*).
SET client_min_messages = warning;
-- (what this test adds to the catalog is removed at its end: the tests after it count runs)
SELECT coalesce(max(id), 0) AS cw_first_run FROM pgdl.runs \gset

-- canonical forms: the key as given (an object's keys sorted, as jsonb sorts them)
SELECT pgdl.validate_config('{"class_weight": "balanced"}')->'class_weight' AS balanced;
SELECT pgdl.validate_config('{"class_weight": {"b": 4, "a": 0.5}}')->'class_weight' AS map;
SELECT pgdl.validate_config('{}') ? 'class_weight' AS none_by_default;

-- errors name the key (SQLSTATE 22023)
\set VERBOSITY default
SELECT pgdl.validate_config('{"class_weight": "even"}');
SELECT pgdl.validate_config('{"class_weight": {}}');
SELECT pgdl.validate_config('{"class_weight": {"a": 0}}');
SELECT pgdl.validate_config('{"class_weight": {"a": -2}}');
SELECT pgdl.validate_config('{"class_weight": {"a": "NaN"}}');
SELECT pgdl.validate_config('{"class_weight": {"a": 1e31}}');
SELECT pgdl.validate_config('{"class_weight": [1, 2]}');
SELECT pgdl.validate_config('{"class_weight": null}');
SELECT pgdl.validate_config('{"class_weight": "balanced", "label_smoothing": 0.1}');
\set VERBOSITY terse

-- an imbalanced set: 'a' 9 in 10, 'b' 1 in 10
CREATE TABLE cw_rows AS
SELECT i, ARRAY[sin(i), cos(i), sin(2 * i), cos(3 * i)]::real[] AS x,
       CASE WHEN i % 10 = 0 OR (i % 10 = 5 AND cos(i) > 0.5) THEN 'b' ELSE 'a' END AS label,
       sin(i) * 3 AS target
  FROM generate_series(1, 200) i;
SELECT label, count(*) FROM cw_rows GROUP BY 1 ORDER BY 1;
SELECT pgdl.pack('cw_rows', 'x', 'label', 'cw_packed', buffer_rows => 32, partitions => 2) > 0 AS packed;
SELECT pgdl.pack('cw_rows', 'x', 'target', 'cw_reg', buffer_rows => 32) > 0 AS packed;
SELECT pgdl.add_architecture('cw_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 8},
  {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
\set base '"lr": 0.1, "momentum": 0.9, "batch_size": 16, "seed": 3'

-- weights of 1 are the unweighted training, byte for byte; "balanced" and a map change the bytes
CREATE TABLE cw_fits AS
SELECT c AS config, pgdl.fit('cw_packed', 'cw_mlp', c::jsonb, 4) AS model
  FROM (VALUES ('{' || :'base' || '}'),
               ('{' || :'base' || ', "class_weight": {"a": 1, "b": 1}}'),
               ('{' || :'base' || ', "class_weight": "balanced"}'),
               ('{' || :'base' || ', "class_weight": {"b": 9}}')) v(c);
SELECT f.config LIKE '%class_weight%' AS weighted, coalesce(f.config::jsonb->'class_weight', 'null') AS class_weight,
       m.weights = (SELECT m0.weights FROM cw_fits f0 JOIN pgdl.models m0 ON m0.id = f0.model
                     WHERE f0.config NOT LIKE '%class_weight%') AS same_as_unweighted
  FROM cw_fits f JOIN pgdl.models m ON m.id = f.model ORDER BY 2::text;
-- the stored configuration keeps the key
SELECT m.config->'class_weight' AS stored FROM cw_fits f JOIN pgdl.models m ON m.id = f.model
 WHERE f.config LIKE '%balanced%';

-- "balanced" is the map of scikit-learn's weights computed here: the same bytes
SELECT jsonb_object_agg(label, w)::text AS cw_balanced_map
  FROM (SELECT label, (SELECT count(*) FROM cw_rows)::float8 / (2 * count(*)) AS w FROM cw_rows GROUP BY label) s \gset
SELECT pgdl.fit('cw_packed', 'cw_mlp', ('{' || :'base' || ', "class_weight": ' || :'cw_balanced_map' || '}')::jsonb, 4)
    AS cw_map_model \gset
SELECT m.weights = (SELECT m2.weights FROM cw_fits f2 JOIN pgdl.models m2 ON m2.id = f2.model
                     WHERE f2.config LIKE '%balanced%') AS balanced_is_that_map
  FROM pgdl.models m WHERE m.id = :cw_map_model;

-- weighing the rare class makes the model predict it more often
SELECT f.config::jsonb->'class_weight' AS class_weight,
       (SELECT count(*) FROM cw_rows r WHERE pgdl.predict_class(f.model, r.x) = 'b') AS predicted_b
  FROM cw_fits f WHERE f.config NOT LIKE '%"a": 1%' ORDER BY 2;

-- fit_multiple: the same bytes as pgdl.fit of each configuration
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'cw_set', a.id, (c)::jsonb FROM pgdl.architectures a,
       (VALUES ('{' || :'base' || ', "class_weight": "balanced"}'),
               ('{' || :'base' || ', "class_weight": {"b": 9}}')) v(c)
 WHERE a.name = 'cw_mlp';
CREATE TABLE cw_lb AS SELECT * FROM pgdl.fit_multiple('cw_packed', 'cw_set', 4, workers => 2);
SELECT l.config_json->'class_weight' AS class_weight, m.weights = mf.weights AS same_as_fit
  FROM cw_lb l JOIN pgdl.models m ON m.id = l.model
  JOIN cw_fits f ON f.config::jsonb->'class_weight' = l.config_json->'class_weight'
  JOIN pgdl.models mf ON mf.id = f.model ORDER BY (l.config_json->'class_weight')::text;

-- refusals: a label the dataset does not have, a regression target, the aggregate (no dataset)
\set VERBOSITY default
SELECT pgdl.fit('cw_packed', 'cw_mlp', '{"class_weight": {"b": 2, "c": 3, "zz": 1}}', 1);
SELECT pgdl.add_architecture('cw_lin', '{"input": [4], "layers": [{"type": "dense", "units": 1}], "loss": "mse"}') > 0 AS added;
SELECT pgdl.fit('cw_reg', 'cw_lin',
                '{"class_weight": "balanced"}', 1);
SELECT pgdl.train(x, y, n, pgdl.init_model(spec, '{}'), '{"class_weight": {"b": 2}}' ORDER BY buffer_id)
  FROM cw_packed, pgdl.architectures WHERE name = 'cw_mlp';
\set VERBOSITY terse

-- what this test added to the catalog goes
\set VERBOSITY default
DELETE FROM pgdl.models WHERE run > :cw_first_run;
DELETE FROM pgdl.runs WHERE id > :cw_first_run;
DELETE FROM pgdl.configs WHERE set_name = 'cw_set' OR architecture IN
	(SELECT id FROM pgdl.architectures WHERE name IN ('cw_mlp', 'cw_lin'));
DELETE FROM pgdl.architectures WHERE name IN ('cw_mlp', 'cw_lin');
DROP TABLE cw_rows, cw_packed, cw_reg, cw_fits, cw_lb;
