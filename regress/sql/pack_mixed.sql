-- pgdl.pack with mixed inputs: categorical columns mapped to ids by a vocabulary stored with the dataset,
-- and several targets (multi-label with binary_cross_entropy, several regression targets with mse);
-- pgdl.predict applying the same mapping.  Tables are named mixed_*.

SET client_min_messages = warning;
-- other tests count on the catalog's ids: they are restored at the end
SELECT last_value AS mx_runs_seq, is_called AS mx_runs_called FROM pgdl.runs_id_seq \gset
SELECT last_value AS mx_models_seq, is_called AS mx_models_called FROM pgdl.models_id_seq \gset
SELECT last_value AS mx_datasets_seq, is_called AS mx_datasets_called FROM pgdl.datasets_id_seq \gset
SELECT coalesce(max(id), 0) AS mx_first_run FROM pgdl.runs \gset

-- numeric a, b; a text category with quotes, a backslash and NULLs; an integer category under a
-- hostile name; a class label
CREATE TABLE mixed_src (id integer, a real, b double precision, city text, "we""ird\col" integer, lab integer);
INSERT INTO mixed_src
SELECT i, i, i / 10.0,
       CASE WHEN i % 5 = 0 THEN NULL ELSE (ARRAY['Paris', 'O''Hare', 'back\slash', 'Zürich'])[1 + i % 4] END,
       (ARRAY[30, -7, 1000000])[1 + i % 3], i % 2
  FROM generate_series(1, 24) i;

SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_packed', buffer_rows => 8, partitions => 2,
                 standardize => true, categorical => 'city, "we""ird\col"') AS mixed_id \gset

-- 4 features: a, b standardized, then the two ids; the vocabularies sorted (bytes; numbers)
SELECT n_features, n_targets, task, jsonb_array_length(normalization -> 'mean') AS normalized, categorical
  FROM pgdl.datasets WHERE id = :mixed_id;
SELECT position, "column", feature, id, value FROM pgdl.vocabulary WHERE dataset = :mixed_id
 ORDER BY position, id;

-- every packed row carries its source row's ids, exactly, after the normalized features
WITH packed AS (
	SELECT x[4 * i + 1 : 4 * i + 4] AS x FROM mixed_packed, generate_series(0, n - 1) i
), vocab AS (SELECT * FROM pgdl.vocabulary WHERE dataset = :mixed_id)
SELECT count(*) AS rows,
       bool_and(p.x[3] = coalesce((SELECT v.id FROM vocab v WHERE v.position = 1 AND v.value = s.city), 0))
         AS city_ids,
       bool_and(p.x[4] = (SELECT v.id FROM vocab v WHERE v.position = 2 AND v.value = s."we""ird\col"::text))
         AS weird_ids,
       count(*) FILTER (WHERE p.x[3] = 0) AS null_cities
  FROM packed p
  JOIN mixed_src s ON abs(p.x[1] * (SELECT (normalization -> 'std' ->> 0)::real FROM pgdl.datasets WHERE id = :mixed_id)
                          + (SELECT (normalization -> 'mean' ->> 0)::real FROM pgdl.datasets WHERE id = :mixed_id)
                          - s.a) < 0.01;

-- a test set with the reference's vocabularies: an unseen city and an unseen number become 0
CREATE TABLE mixed_test (a real, b double precision, city text, "we""ird\col" integer, lab integer);
INSERT INTO mixed_test VALUES (1, 0.1, 'Paris', 30, 1), (2, 0.2, 'Lyon', 5, 0), (3, 0.3, NULL, -7, 1);
SELECT pgdl.pack('mixed_test', 'a, b', 'lab', 'mixed_test_packed', buffer_rows => 3, partitions => 1,
                 reference => 'mixed_packed', categorical => 'city, "we""ird\col"') > 0 AS packed;
SELECT x[3] AS city_id_1, x[4] AS weird_id_1, x[7] AS city_id_2, x[8] AS weird_id_2,
       x[11] AS city_id_3, x[12] AS weird_id_3
  FROM mixed_test_packed ORDER BY buffer_id;
SELECT categorical = (SELECT categorical FROM pgdl.datasets WHERE id = :mixed_id) AS same_vocabulary
  FROM pgdl.datasets WHERE packed = 'mixed_test_packed'::regclass;

-- errors
SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_bad', categorical => 'city', max_categories => 3);
SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_bad', categorical => 'city', max_categories => 0);
SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_bad', categorical => 'b');
SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_bad', categorical => 'a');
SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_bad', categorical => 'city, city');
SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_bad', categorical => 'nope');
SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_bad', categorical => 'city,');
SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_bad', categorical => '"we"ird\col"');
SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_bad', max_categories => NULL);
SELECT pgdl.pack('mixed_test', 'a, b', 'lab', 'mixed_bad', reference => 'mixed_packed', categorical => 'city');
SELECT pgdl.pack('mixed_test', 'a, b', 'lab', 'mixed_bad', reference => 'mixed_packed', partitions => 1,
                 categorical => '"we""ird\col", city');
SELECT pgdl.pack('mixed_test', 'a, b', 'lab', 'mixed_bad', reference => 'mixed_packed', categorical => 'city, b');
SELECT pgdl.pack('mixed_test', 'a, b', 'lab', 'mixed_bad', reference => 'mixed_packed', sequence => 'city');
CREATE TABLE mixed_test_int AS SELECT a, b, 7 AS city, "we""ird\col", lab FROM mixed_test;
SELECT pgdl.pack('mixed_test_int', 'a, b', 'lab', 'mixed_bad', reference => 'mixed_packed', partitions => 1);
DROP TABLE mixed_test_int;

-- with a reference and no categorical => ..., the reference's categorical columns: the same rows as above
SELECT pgdl.pack('mixed_test', 'a, b', 'lab', 'mixed_implied', buffer_rows => 3, partitions => 1,
                 reference => 'mixed_packed') > 0 AS packed;
SELECT (SELECT array_agg(x ORDER BY buffer_id) FROM mixed_implied)
     = (SELECT array_agg(x ORDER BY buffer_id) FROM mixed_test_packed) AS same_rows,
       (SELECT categorical FROM pgdl.datasets WHERE packed = 'mixed_implied'::regclass)
     = (SELECT categorical FROM pgdl.datasets WHERE id = :mixed_id) AS same_vocabulary;
DROP TABLE mixed_implied;

-- a model on the ids (a dense network: they are just floats), and pgdl.predict mapping raw values
SELECT pgdl.fit('mixed_packed', '{"input": [4], "layers": [{"type": "dense", "units": 2}]}'::jsonb,
                '{"optimizer": "sgd", "lr": 0.01, "seed": 3}', epochs => 2, validation => 'mixed_test_packed',
                name => 'mixed_model') > 0 AS trained;
-- a validation set packed with vocabularies of its own would mean other values by the same ids
SELECT pgdl.pack('mixed_test', 'a, b', 'lab', 'mixed_test_own', buffer_rows => 3, partitions => 1,
                 categorical => 'city, "we""ird\col"') > 0 AS packed;
SELECT pgdl.fit('mixed_packed', '{"input": [4], "layers": [{"type": "dense", "units": 2}]}'::jsonb,
                epochs => 1, validation => 'mixed_test_own');
SELECT pgdl.predict('mixed_model', ARRAY[3, 0.3]::real[], ARRAY['O''Hare', '-7'])
     = pgdl.predict('mixed_model', pgdl.encode('mixed_packed', ARRAY[3, 0.3]::real[], ARRAY['O''Hare', '-7']))
       AS same_as_encoded,
       pgdl.encode('mixed_packed', ARRAY[3, 0.3]::real[], ARRAY['O''Hare', '-7']) AS encoded,
       pgdl.encode('mixed_packed', ARRAY[3, 0.3]::real[], ARRAY['Lyon', NULL]) AS unseen_and_null,
       pgdl.encode('mixed_packed', ARRAY[3, 0.3]::real[], ARRAY['back\slash', '+0001000000']) AS integer_text;
-- an unseen value predicts as id 0 does, a NULL too
SELECT pgdl.predict('mixed_model', ARRAY[3, 0.3]::real[], ARRAY['Lyon', '5'])
     = pgdl.predict('mixed_model', ARRAY[3, 0.3, 0, 0]::real[]) AS unseen_is_zero,
       pgdl.predict('mixed_model', ARRAY[3, 0.3]::real[], ARRAY[NULL, NULL]::text[])
     = pgdl.predict('mixed_model', ARRAY[3, 0.3, 0, 0]::real[]) AS null_is_zero,
       pgdl.predict_class('mixed_model', ARRAY[3, 0.3]::real[], ARRAY['Paris', '30'])
     = pgdl.predict_class('mixed_model', pgdl.encode('mixed_packed', ARRAY[3, 0.3]::real[], ARRAY['Paris', '30']))
       AS same_class;
-- predict_batch over a query that encodes each row
SELECT count(*) AS rows, bool_and(b.class = pgdl.predict_class('mixed_model', ARRAY[s.a, s.b]::real[],
                                                             ARRAY[s.city, s."we""ird\col"::text])) AS same_classes
  FROM pgdl.predict_batch('mixed_model',
         'SELECT id, pgdl.encode(''mixed_packed'', ARRAY[a, b]::real[], ARRAY[city, "we""ird\col"::text]) AS x FROM mixed_src',
         'id', 'x', batch_size => 5) b
  JOIN mixed_src s ON s.id = b.id;
-- errors
SELECT pgdl.predict('mixed_model', ARRAY[3, 0.3]::real[]);
SELECT pgdl.predict('mixed_model', ARRAY[3, 0.3]::real[], ARRAY['Paris']);
SELECT pgdl.predict('mixed_model', ARRAY[3]::real[], ARRAY['Paris', '30']);
SELECT pgdl.predict('mixed_model', ARRAY[3, 0.3]::real[], ARRAY['Paris', 'thirty']);
SELECT pgdl.encode('mixed_test', ARRAY[3, 0.3]::real[], ARRAY['Paris', '30']);
SELECT pgdl.pack('mixed_src', 'a, b', 'lab', 'mixed_plain', buffer_rows => 8, partitions => 1) > 0 AS packed;
SELECT pgdl.encode('mixed_plain', ARRAY[3, 0.3]::real[], ARRAY['Paris', '30']);

-- spilled to temporary files, the same bytes: ids follow each row through the external shuffle
CREATE TABLE mixed_big AS
SELECT ARRAY(SELECT (i * j % 97)::real FROM generate_series(1, 16) j) AS f, 'c' || (i * 7 % 50) AS city,
       i % 3 AS lab
  FROM generate_series(1, 20000) i;
SET maintenance_work_mem = '64MB';
SELECT pgdl.pack('mixed_big', 'f', 'lab', 'mixed_big_mem', buffer_rows => 500, categorical => 'city') > 0 AS packed;
SET maintenance_work_mem = '1MB';
SELECT pgdl.pack('mixed_big', 'f', 'lab', 'mixed_big_disk', buffer_rows => 500, categorical => 'city') > 0 AS packed;
RESET maintenance_work_mem;
SELECT (SELECT string_agg(array_send(x) || array_send(y), ''::bytea ORDER BY buffer_id) FROM mixed_big_mem)
     = (SELECT string_agg(array_send(x) || array_send(y), ''::bytea ORDER BY buffer_id) FROM mixed_big_disk)
       AS same_bytes,
       (SELECT count(DISTINCT x[17 * i + 17]) FROM mixed_big_disk, generate_series(0, n - 1) i) AS ids;

-- the vocabularies travel with pgdl.export_dataset: a node packs its rows with the same ids
SELECT pgdl.import_dataset(pgdl.export_dataset('mixed_packed'), 'mixed_imported') AS imported;
SELECT pgdl.pack('mixed_test', 'a, b', 'lab', 'mixed_from_import', buffer_rows => 3, partitions => 1,
                 reference => 'mixed_imported', categorical => 'city, "we""ird\col"') > 0 AS packed;
SELECT (SELECT x FROM mixed_from_import) = (SELECT x FROM mixed_test_packed) AS same_ids;

-- a vocabulary a role may not read is not shown
CREATE ROLE regress_mixed_other;
GRANT USAGE ON SCHEMA public TO regress_mixed_other;
SET ROLE regress_mixed_other;
SELECT count(*) AS visible FROM pgdl.vocabulary WHERE dataset = :mixed_id;
SELECT pgdl.encode('mixed_packed', ARRAY[3, 0.3]::real[], ARRAY['Paris', '30']);
RESET ROLE;
GRANT SELECT ON mixed_packed TO regress_mixed_other;
SET ROLE regress_mixed_other;
SELECT count(*) AS visible FROM pgdl.vocabulary WHERE dataset = :mixed_id;
RESET ROLE;
REVOKE ALL ON mixed_packed FROM regress_mixed_other;
REVOKE ALL ON SCHEMA public FROM regress_mixed_other;
DROP ROLE regress_mixed_other;

-- a corrupted vocabulary is an error naming the column, not a crash
CREATE FUNCTION pg_temp.forged(categorical jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	state text;
	message text;
	detail text;
BEGIN
	UPDATE pgdl.datasets d SET categorical = forged.categorical WHERE packed = 'mixed_packed'::regclass;
	PERFORM pgdl.encode('mixed_packed', ARRAY[3, 0.3]::real[], ARRAY['Paris', '30']);
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
	RETURN state || ' ' || regexp_replace(message, '\d+', 'N') || ': ' || detail;
END $$;
CREATE TEMP TABLE mixed_saved AS SELECT categorical FROM pgdl.datasets WHERE id = :mixed_id;
SELECT pg_temp.forged('[{"column": "city", "type": "text", "values": ["b", "a"]}, {"column": "x", "type": "integer", "values": []}]') AS unsorted;
SELECT pg_temp.forged('[1, 2]') AS not_objects;
SELECT pg_temp.forged('[{"column": "c", "type": "text", "values": []}]') AS too_few;
SELECT pg_temp.forged('[{"column": "city", "type": "integer", "values": ["x"]}, {"column": "x", "type": "integer", "values": []}]') AS not_integers;
SELECT pg_temp.forged('[{"column": "city", "type": "date", "values": []}, {"column": "x", "type": "integer", "values": []}]') AS bad_type;
SELECT pg_temp.forged('{"a": 1}') AS not_array;
SELECT pg_temp.forged(categorical) AS restored FROM mixed_saved;
SELECT pgdl.encode('mixed_packed', ARRAY[3, 0.3]::real[], ARRAY['Paris', '30']) AS restored;

-- ---- several targets ----

-- multi-label: three 0/1 labels of two features (the third is "both"), as columns of mixed types
CREATE TABLE mixed_labels (x real[], l1 boolean, l2 integer, l3 real, tags real[]);
INSERT INTO mixed_labels
SELECT ARRAY[u, v], u > 0, (v > 0)::integer, (u > 0 AND v > 0)::integer,
       ARRAY[(u > 0)::integer, (v > 0)::integer, (u > 0 AND v > 0)::integer]
  FROM (SELECT sin(i * 1.7)::real AS u, cos(i * 2.3)::real AS v FROM generate_series(1, 400) i) s;
SELECT pgdl.pack('mixed_labels', 'x', 'l1, l2, l3', 'mixed_multilabel', buffer_rows => 40, partitions => 2)
       AS multilabel_id \gset
SELECT task, n_features, n_targets, classes, label_type, label FROM pgdl.datasets WHERE id = :multilabel_id;
SELECT y[1:6] AS first_targets, array_length(y, 1) = 3 * n AS three_per_row
  FROM mixed_multilabel WHERE buffer_id = 0;
-- the same targets from an array column
SELECT pgdl.pack('mixed_labels', 'x', 'tags', 'mixed_multilabel_array', buffer_rows => 40, partitions => 2) > 0 AS packed;
SELECT (SELECT string_agg(array_send(y), ''::bytea ORDER BY buffer_id) FROM mixed_multilabel)
     = (SELECT string_agg(array_send(y), ''::bytea ORDER BY buffer_id) FROM mixed_multilabel_array) AS same_targets;
-- one output per label, binary_cross_entropy; evaluate's accuracy counts rows with every label right
SELECT pgdl.fit('mixed_multilabel', '{"input": [2], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
                                      {"type": "dense", "units": 3}], "loss": "binary_cross_entropy"}'::jsonb,
                '{"optimizer": "adam", "lr": 0.02, "batch_size": 20, "seed": 7}', epochs => 30,
                name => 'mixed_multilabel_model') > 0 AS trained;
SELECT loss < 0.25 AS low_loss, accuracy > 0.85 AS mostly_right, n
  FROM pgdl.evaluate('mixed_multilabel_model', 'mixed_multilabel');
-- per label: its loss and the share of rows it is right for; their mean is evaluate's loss
SELECT target, loss < 0.3 AS low_loss, accuracy > 0.85 AS mostly_right, n
  FROM pgdl.evaluate_targets('mixed_multilabel_model', 'mixed_multilabel') ORDER BY target;
SELECT abs(avg(t.loss) - e.loss) < 1e-5 AS mean_is_evaluate, min(t.accuracy) >= e.accuracy AS each_beats_all
  FROM pgdl.evaluate_targets('mixed_multilabel_model', 'mixed_multilabel') t,
       pgdl.evaluate('mixed_multilabel_model', 'mixed_multilabel') e
 GROUP BY e.loss, e.accuracy;
SELECT array_length(p, 1) AS outputs, p[1] > 0.5 AS first, p[2] > 0.5 AS second, p[3] > 0.5 AS both
  FROM pgdl.predict('mixed_multilabel_model', ARRAY[0.8, 0.7]::real[]) p;
SELECT pgdl.predict_class('mixed_multilabel_model', ARRAY[0.8, 0.7]::real[]);
-- a model with the wrong number of outputs
SELECT pgdl.fit('mixed_multilabel', '{"input": [2], "layers": [{"type": "dense", "units": 2}],
                                      "loss": "binary_cross_entropy"}'::jsonb, epochs => 1);

-- several regression targets (mse), from an array column
CREATE TABLE mixed_regress (f real[], t double precision[]);
INSERT INTO mixed_regress
SELECT ARRAY[u, v], ARRAY[u + v, u - 2 * v]
  FROM (SELECT sin(i * 0.9)::real AS u, cos(i * 1.3)::real AS v FROM generate_series(1, 200) i) s;
SELECT pgdl.pack('mixed_regress', 'f', 't', 'mixed_regress_packed', buffer_rows => 20, partitions => 2)
       AS regress_id \gset
SELECT task, n_targets, label_type FROM pgdl.datasets WHERE id = :regress_id;
SELECT pgdl.fit('mixed_regress_packed', '{"input": [2], "layers": [{"type": "dense", "units": 2}], "loss": "mse"}'::jsonb,
                '{"optimizer": "sgd", "lr": 0.1, "batch_size": 10, "seed": 1}', epochs => 20,
                name => 'mixed_regress_model') > 0 AS trained;
SELECT loss < 0.001 AS fits, accuracy, n FROM pgdl.evaluate('mixed_regress_model', 'mixed_regress_packed');
SELECT target, loss < 0.001 AS fits, accuracy, n
  FROM pgdl.evaluate_targets('mixed_regress_model', 'mixed_regress_packed') ORDER BY target;
-- a classifier has one target, its class: evaluate's numbers
SELECT t.target, abs(t.loss - e.loss) < 1e-6 AS same_loss, t.accuracy = e.accuracy AS same_accuracy, t.n = e.n AS same_n
  FROM pgdl.evaluate_targets('mixed_model', 'mixed_packed') t, pgdl.evaluate('mixed_model', 'mixed_packed') e;
-- no categorical values for a dataset without categorical columns
SELECT pgdl.encode('mixed_plain', ARRAY[3, 0.3]::real[], '{}') AS none_for_none;
SELECT round(p[1]::numeric, 2) AS sum, round(p[2]::numeric, 2) AS difference
  FROM pgdl.predict('mixed_regress_model', ARRAY[0.5, 0.25]::real[]) p;

-- errors of several targets
CREATE TABLE mixed_bad_targets (f real[], t real[], s text, n integer[]);
INSERT INTO mixed_bad_targets VALUES (ARRAY[1, 2], ARRAY[1, 2], 'a', ARRAY[1]), (ARRAY[3, 4], ARRAY[1], 'b', ARRAY[NULL, 1]::integer[]),
                                     (ARRAY[5, 6], NULL, 'c', ARRAY[1]);
SELECT pgdl.pack('mixed_bad_targets', 'f', 't', 'mixed_bad', partitions => 1);
SELECT pgdl.pack('mixed_bad_targets', 'f', 'n', 'mixed_bad', partitions => 1);
SELECT pgdl.pack('mixed_bad_targets', 'f', 'n, s', 'mixed_bad', partitions => 1);
SELECT pgdl.pack('mixed_bad_targets', 'f', 's, t', 'mixed_bad', partitions => 1);
SELECT pgdl.pack('mixed_labels', 'x', 'l1, l2', 'mixed_bad', reference => 'mixed_multilabel');
DELETE FROM mixed_bad_targets WHERE s <> 'c';
INSERT INTO mixed_bad_targets VALUES (ARRAY[1, 2], ARRAY[1, 2], 'd', ARRAY[1]);
SELECT pgdl.pack('mixed_bad_targets', 'f', 't', 'mixed_bad', partitions => 1);
SELECT pgdl.pack('mixed_bad_targets', 'f', 't', 'mixed_skip', partitions => 1, nulls => 'skip') > 0 AS packed;
SELECT n, y FROM mixed_skip;

-- leave nothing behind
DELETE FROM pgdl.models WHERE name LIKE 'mixed\_%' OR run > :mx_first_run;
DELETE FROM pgdl.runs WHERE id > :mx_first_run;
DROP TABLE mixed_src, mixed_test, mixed_packed, mixed_test_packed, mixed_plain, mixed_labels, mixed_multilabel,
           mixed_multilabel_array, mixed_regress, mixed_regress_packed, mixed_bad_targets, mixed_skip,
           mixed_imported, mixed_from_import, mixed_test_own, mixed_big, mixed_big_mem, mixed_big_disk;
SELECT setval('pgdl.runs_id_seq', :mx_runs_seq, :'mx_runs_called'::boolean) > 0 AS restored,
       setval('pgdl.models_id_seq', :mx_models_seq, :'mx_models_called'::boolean) > 0 AS restored,
       setval('pgdl.datasets_id_seq', :mx_datasets_seq, :'mx_datasets_called'::boolean) > 0 AS restored;
SELECT (SELECT count(*) FROM pgdl.datasets WHERE packed::text LIKE 'mixed\_%') AS datasets,
       (SELECT count(*) FROM pgdl.models WHERE name LIKE 'mixed\_%') AS models;
