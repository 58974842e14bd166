-- Target scaling (pack's standardize_target, undone by predict, evaluate and metrics), a one-class label
-- refused at pack, and pgdl.split.  The diabetes set's acceptance test is regress/metrics/check_target.py.
SET client_min_messages = warning;

-- a regression target in the hundreds: y = 100 + 50 * (x1 - x2)
CREATE TABLE ts_rows AS
SELECT i AS id, ARRAY[sin(i), cos(i)]::double precision[] AS x,
       (100 + 50 * (sin(i) - cos(i)))::double precision AS target,
       CASE WHEN i % 3 = 0 THEN 'a' ELSE 'b' END AS kind, ARRAY[i % 2 = 0] AS flags
  FROM generate_series(1, 200) i;
SELECT pgdl.pack('ts_rows', 'x', 'target', 'ts_p', buffer_rows => 25, partitions => 2, standardize_target => true) > 0 AS packed;
-- the mean and std of the targets, stored as float32's shortest text
SELECT target_normalization FROM pgdl.datasets WHERE packed = 'ts_p'::regclass;
SELECT round(avg(target)::numeric, 3) AS mean, round(stddev_pop(target)::numeric, 3) AS std FROM ts_rows;
-- the packed targets have mean 0 and std 1
SELECT round(avg(u.v)::numeric, 5) AS mean, round(stddev_pop(u.v)::numeric, 5) AS std
  FROM ts_p t, unnest(t.y) AS u(v);
-- a dataset packed with it as reference copies the scaling; one packed without has none
SELECT pgdl.pack('ts_rows', 'x', 'target', 'ts_ref', partitions => 1, reference => 'ts_p') > 0 AS packed;
SELECT pgdl.pack('ts_rows', 'x', 'target', 'ts_plain', partitions => 1) > 0 AS packed;
SELECT d.packed, d.target_normalization = p.target_normalization AS same
  FROM pgdl.datasets d, pgdl.datasets p WHERE p.packed = 'ts_p'::regclass AND d.packed IN ('ts_ref'::regclass, 'ts_plain'::regclass)
 ORDER BY d.id;

-- a hand-made model z = 2 x1 (standardized units): predict answers z * std + mean
\set ts_spec '{"input": [2], "layers": [{"type": "dense", "units": 1}], "loss": "mse"}'
INSERT INTO pgdl.models (name, spec, weights, dataset)
SELECT 'ts_hand', :'ts_spec', pgdl.model_from_weights(:'ts_spec', '{2,0,0}'), id
  FROM pgdl.datasets WHERE packed = 'ts_p'::regclass RETURNING id AS ts_model \gset
SELECT (target_normalization -> 'mean' ->> 0)::real AS ts_mean, (target_normalization -> 'std' ->> 0)::real AS ts_std
  FROM pgdl.datasets WHERE packed = 'ts_p'::regclass \gset
SELECT pgdl.predict(:ts_model, ARRAY[0.5, 0]) = ARRAY[(1::real * :ts_std + :ts_mean)::real] AS unscaled;
SELECT pgdl.predict(:ts_model, ARRAY[0, 0]) = ARRAY[:ts_mean::real] AS mean_at_zero;
-- the blob alone has no dataset: its output is in standardized units
SELECT pgdl.predict(weights, ARRAY[0.5, 0]) AS standardized FROM pgdl.models WHERE id = :ts_model;
-- metrics, evaluate and evaluate_targets are in target units: the mse of the unscaled outputs
WITH p AS (SELECT target, (pgdl.predict(:ts_model, x))[1] AS z FROM ts_rows)
SELECT round(avg((z - target) ^ 2)::numeric, 2) AS mse_by_hand,
       (SELECT round(value::numeric, 2) FROM pgdl.metrics(:ts_model, 'ts_ref') WHERE metric = 'mse') AS metrics_mse,
       (SELECT round(loss::numeric, 2) FROM pgdl.evaluate(:ts_model, 'ts_ref')) AS evaluate_loss,
       (SELECT round(loss::numeric, 2) FROM pgdl.evaluate_targets(:ts_model, 'ts_ref')) AS targets_loss,
       (SELECT round(value::numeric, 2) FROM pgdl.metrics(:ts_model, 'ts_rows', 'x', 'target') WHERE metric = 'mse') AS raw_rows_mse
  FROM p;
-- a dataset scaled otherwise is another preprocessing
SELECT * FROM pgdl.evaluate(:ts_model, 'ts_plain');

-- export_onnx undoes the scaling in its last nodes (Mul by std, Add of mean); import round-trips
SELECT position('pgdl_target_mul'::bytea IN pgdl.export_onnx(:ts_model)) > 0 AS has_mul,
       position('pgdl_target_add'::bytea IN pgdl.export_onnx(:ts_model)) > 0 AS has_add,
       position('pgdl_target'::bytea IN pgdl.export_onnx(:ts_model, with_normalization => false)) = 0 AS bare_has_none;
SELECT pgdl.import_onnx('ts_hand_bad', pgdl.export_onnx(:ts_model, with_normalization => false), loss => 'mse')
       IS NOT NULL AS bare_network;
SELECT pgdl.import_onnx('ts_hand_rt', pgdl.export_onnx(:ts_model), dataset => 'ts_p') AS ts_rt \gset
SELECT pgdl.predict(:ts_rt, ARRAY[0.5, 0]) = pgdl.predict(:ts_model, ARRAY[0.5, 0]) AS round_trip,
       pgdl.predict(:ts_rt, ARRAY[0.5, 0]) <> pgdl.predict('ts_hand_bad', ARRAY[0.5, 0]) AS bare_differs;
SELECT pgdl.import_onnx('ts_hand_other', pgdl.export_onnx(:ts_model), dataset => 'ts_plain');

-- trained with the defaults on standardized targets, the model fits
SELECT pgdl.fit('ts_p', '{"input": [2], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
                                                 {"type": "dense", "units": 1}], "loss": "mse"}'::jsonb,
                epochs => 30) AS ts_fit \gset
SELECT value > 0.9 AS r2_above_0_9 FROM pgdl.metrics(:ts_fit, 'ts_ref') WHERE metric = 'r2';

-- refused: standardize_target of classes, of boolean targets, or with a reference
SELECT pgdl.pack('ts_rows', 'x', 'kind', 'ts_bad', standardize_target => true);
SELECT pgdl.pack('ts_rows', 'x', 'flags', 'ts_bad', standardize_target => true);
SELECT pgdl.pack('ts_rows', 'x', 'target', 'ts_bad', reference => 'ts_p', standardize_target => true);
SELECT pgdl.pack('ts_rows', 'x', 'target', 'ts_bad', standardize_target => NULL);

SELECT pgdl.pack('ts_rows', 'x', 'kind', 'ts_kind_p', partitions => 1) > 0 AS packed;
-- forged target_normalization rows are errors, not crashes (the detail, without the dataset's id)
CREATE FUNCTION ts_predict(model bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
BEGIN
	RETURN pgdl.predict(model, ARRAY[0, 0])::text;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || detail;
END $$;
CREATE TABLE ts_forged AS SELECT * FROM pgdl.datasets WHERE packed = 'ts_p'::regclass;
CREATE TABLE ts_forgeries (forged jsonb);
INSERT INTO ts_forgeries VALUES ('{"mean": [1], "std": [0]}'), ('{"mean": [1, 2], "std": [1, 1]}'), ('[1]'),
	('{"mean": ["NaN"], "std": [1]}'), ('{"mean": [1], "std": [1], "scale": 2}'), ('{"mean": [1e39], "std": [1]}'),
	('{"mean": [1]}'), ('"x"');
CREATE FUNCTION ts_forge(model bigint, forged jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	UPDATE pgdl.datasets SET target_normalization = forged WHERE packed = 'ts_p'::regclass;
	RETURN ts_predict(model);
END $$;
SELECT forged, ts_forge(:ts_model, forged) FROM ts_forgeries;
UPDATE pgdl.datasets d SET target_normalization = f.target_normalization FROM ts_forged f WHERE d.id = f.id;
SELECT ts_predict(:ts_model) = ARRAY[:ts_mean::real]::text AS restored;
-- on a classification dataset
INSERT INTO pgdl.models (name, spec, weights, dataset)
SELECT 'ts_cls', s, pgdl.model_from_weights(s, '{1,0,0,1,0,0}'), id
  FROM pgdl.datasets, (VALUES ('{"input": [2], "layers": [{"type": "dense", "units": 2}], "loss": "cross_entropy"}'::jsonb)) v(s)
 WHERE packed = 'ts_kind_p'::regclass RETURNING id AS ts_cls \gset
UPDATE pgdl.datasets SET target_normalization = '{"mean": [1], "std": [1]}' WHERE packed = 'ts_kind_p'::regclass;
SELECT ts_predict(:ts_cls);
UPDATE pgdl.datasets SET target_normalization = NULL WHERE packed = 'ts_kind_p'::regclass;

-- a label of one class cannot train a classifier; with a reference (a test set) it may
CREATE TABLE ts_one AS SELECT x, 'b'::text AS kind FROM ts_rows WHERE kind = 'b';
SELECT pgdl.pack('ts_one', 'x', 'kind', 'ts_one_p', partitions => 1);
SELECT pgdl.pack('ts_one', 'x', 'kind', 'ts_one_p', partitions => 1, reference => 'ts_kind_p') > 0 AS packed;

-- pgdl.split: seeded, the same rows whatever the physical order
SELECT * FROM pgdl.split('ts_rows', 'ts_s', validation => 0.2, test => 0.1);
CREATE TABLE ts_shuffled AS SELECT * FROM ts_rows ORDER BY md5(id::text);
SELECT part, n_rows FROM pgdl.split('ts_shuffled', 'ts_s2', validation => 0.2, test => 0.1);
SELECT (SELECT array_agg(id ORDER BY id) FROM ts_s_validation) = (SELECT array_agg(id ORDER BY id) FROM ts_s2_validation)
       AND (SELECT array_agg(id ORDER BY id) FROM ts_s_test) = (SELECT array_agg(id ORDER BY id) FROM ts_s2_test) AS same_rows;
-- every row in exactly one part, the columns kept
SELECT count(*) AS rows, count(DISTINCT id) AS ids FROM (
	SELECT * FROM ts_s_train UNION ALL SELECT * FROM ts_s_validation UNION ALL SELECT * FROM ts_s_test) t;
SELECT attname FROM pg_attribute WHERE attrelid = 'ts_s_test'::regclass AND attnum > 0 ORDER BY attnum;
-- another seed, other rows
SELECT part, n_rows FROM pgdl.split('ts_rows', 'ts_s3', seed => 7);
SELECT (SELECT array_agg(id ORDER BY id) FROM ts_s_validation) <> (SELECT array_agg(id ORDER BY id) FROM ts_s3_validation) AS other_rows;
-- stratified: each class's share in each part within one row (kind: 66 'a', 134 'b')
SELECT part, n_rows FROM pgdl.split('ts_rows', 'ts_st', validation => 0.25, stratify => 'kind');
SELECT 'validation' AS part, kind, count(*) FROM ts_st_validation GROUP BY kind
UNION ALL SELECT 'train', kind, count(*) FROM ts_st_train GROUP BY kind ORDER BY 1, 2;
-- the parts packed with one preprocessing: train, then the others with it as reference
SELECT pgdl.pack('ts_s_train', 'x', 'target', 'ts_s_train_p', partitions => 1, standardize => true,
                 standardize_target => true) > 0 AS packed;
SELECT pgdl.pack('ts_s_validation', 'x', 'target', 'ts_s_validation_p', partitions => 1, reference => 'ts_s_train_p') > 0 AS packed;
-- errors (without the PL/pgSQL context, whose line numbers say nothing)
\set SHOW_CONTEXT never
SELECT * FROM pgdl.split('ts_rows', 'ts_s');
SELECT * FROM pgdl.split('ts_rows', 'ts_e', validation => 0.6, test => 0.4);
SELECT * FROM pgdl.split('ts_rows', 'ts_e', validation => 'NaN');
SELECT * FROM pgdl.split('ts_rows', 'ts_e', validation => 0, test => 0);
SELECT * FROM pgdl.split('ts_rows', 'ts_e', validation => -0.1);
SELECT * FROM pgdl.split('ts_rows', 'ts_e', stratify => 'nope');
SELECT * FROM pgdl.split('ts_rows', NULL);
SELECT * FROM pgdl.split('ts_rows', 'a.b.c');
SELECT * FROM pgdl.split('ts_rows', repeat('x', 60));
SELECT * FROM pgdl.split('ts_one', 'ts_e', validation => 0.001);
SELECT count(*) AS none_left FROM pg_class WHERE relname LIKE 'ts\_e\_%';
