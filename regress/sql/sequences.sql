-- pgdl.pack with token sequences: integer[] and text[] columns of varying length mapped to ids by a
-- vocabulary stored with the dataset, padded or cut to L ids, then the row's length; pgdl.encode and
-- pgdl.predict applying the same mapping to raw arrays.  Tables are named seq_*.

SET client_min_messages = warning;
-- other tests count on the catalog's ids: they are restored at the end
SELECT last_value AS sq_runs_seq, is_called AS sq_runs_called FROM pgdl.runs_id_seq \gset
SELECT last_value AS sq_models_seq, is_called AS sq_models_called FROM pgdl.models_id_seq \gset
SELECT last_value AS sq_datasets_seq, is_called AS sq_datasets_called FROM pgdl.datasets_id_seq \gset
SELECT coalesce(max(id), 0) AS sq_first_run FROM pgdl.runs \gset

-- integer tokens of varying length (a NULL array, an empty one, a NULL element); text tokens with
-- quotes and a backslash under a hostile column name; a categorical column
CREATE TABLE seq_src (a real, toks integer[], "wo""rd\s" text[], c text, lab integer);
INSERT INTO seq_src VALUES
	(1, ARRAY[5, 7, 5], ARRAY['the', 'cat'], 'x', 0),
	(2, ARRAY[9], ARRAY['a "quoted" word', 'back\slash'], 'y', 1),
	(3, NULL, NULL, NULL, 0),
	(4, '{}', ARRAY['the', NULL], 'x', 1),
	(5, ARRAY[7, NULL, 5, 5], ARRAY['cat'], 'y', 0);

SELECT pgdl.pack('seq_src', 'a', 'lab', 'seq_packed', buffer_rows => 1, partitions => 1,
                 categorical => 'c', sequence => 'toks, "wo""rd\s"') AS seq_id \gset

-- 1 + 1 + (4 + 1) + (2 + 1) features: a, the id of c, toks's L = 4 ids and its length, then words's
SELECT n_features, categorical FROM pgdl.datasets WHERE id = :seq_id;
SELECT position, "column", feature, id, value, length FROM pgdl.vocabulary WHERE dataset = :seq_id
 ORDER BY position, id;
-- padding is 0, a NULL element (row 5) and a NULL token (row 4) are 1 (unseen); a NULL or empty array
-- is all padding, length 0
SELECT x FROM seq_packed ORDER BY x[1];

-- pgdl.encode maps raw rows as pgdl.pack did
SELECT count(*) AS rows,
       bool_and(p.x = pgdl.encode('seq_packed', ARRAY[s.a], ARRAY[s.c], jsonb_build_array(s.toks, s."wo""rd\s")))
         AS same_as_packed
  FROM seq_packed p JOIN seq_src s ON p.x[1] = s.a;
-- unseen tokens are 1, tokens past L are left out, integers may come as strings
SELECT pgdl.encode('seq_packed', ARRAY[0]::real[], ARRAY['z'], '[[5, 8, "7", null, 9, 9], ["dog", "the", "cat"]]')
         AS unseen_and_cut,
       pgdl.encode('seq_packed', ARRAY[0]::real[], ARRAY[NULL], '[null, []]') AS empty;

-- max_length cuts each array to its first tokens; the vocabulary is of the tokens kept
SELECT pgdl.pack('seq_src', 'a', 'lab', 'seq_cut', buffer_rows => 1, partitions => 1, sequence => 'toks',
                 max_length => 2) AS cut_id \gset
SELECT x FROM seq_cut ORDER BY x[1];
SELECT "column", feature, id, value, length FROM pgdl.vocabulary WHERE dataset = :cut_id ORDER BY id;
-- max_length longer than any array: padding
SELECT pgdl.pack('seq_src', 'a', 'lab', 'seq_long', buffer_rows => 5, partitions => 1, sequence => 'toks',
                 max_length => 6) > 0 AS packed;
SELECT n_features FROM pgdl.datasets WHERE packed = 'seq_long'::regclass;

-- with a reference: its vocabularies and its L (a longer array is cut, an unseen token is 1)
CREATE TABLE seq_test (a real, toks integer[], "wo""rd\s" text[], c text, lab integer);
INSERT INTO seq_test VALUES (1, ARRAY[9, 9, 6, 5, 7, 7], ARRAY['cat', 'dog', 'the'], 'x', 0);
SELECT pgdl.pack('seq_test', 'a', 'lab', 'seq_test_packed', buffer_rows => 1, partitions => 1,
                 reference => 'seq_packed', categorical => 'c', sequence => 'toks, "wo""rd\s"') > 0 AS packed;
SELECT x FROM seq_test_packed;
-- the same without naming the columns: a reference's categorical and sequence columns are the default
SELECT pgdl.pack('seq_test', 'a', 'lab', 'seq_test_implied', buffer_rows => 1, partitions => 1,
                 reference => 'seq_packed') > 0 AS packed;
SELECT (SELECT array_agg(x) FROM seq_test_implied) = (SELECT array_agg(x) FROM seq_test_packed) AS same_rows;
DROP TABLE seq_test_implied;

-- errors
CREATE TABLE seq_bad (a real, toks integer[], r real[], m integer[], k integer, lab integer);
INSERT INTO seq_bad VALUES (1, ARRAY[1, 2], ARRAY[1], ARRAY[1], 1, 0), (2, ARRAY[3], ARRAY[2], ARRAY[[1, 2], [3, 4]], 2, 1);
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', sequence => 'a');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', sequence => 'r');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', partitions => 1, sequence => 'm');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', sequence => 'toks, toks');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', categorical => 'k', sequence => 'k');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', categorical => 'toks', sequence => 'toks');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', sequence => 'a, toks');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', sequence => 'nope');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', sequence => 'toks,');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', sequence => '"wo"rd\s"');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', sequence => 'toks', max_length => 0);
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', sequence => 'toks', max_length => 65537);
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', max_length => 4);
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', partitions => 1, sequence => 'toks', max_categories => 2);
SELECT pgdl.pack('seq_test', 'a', 'lab', 'seq_bad_out', reference => 'seq_packed', categorical => 'c',
                 sequence => 'toks, "wo""rd\s"', max_length => 2);
SELECT pgdl.pack('seq_test', 'a', 'lab', 'seq_bad_out', reference => 'seq_packed', categorical => 'c',
                 sequence => 'toks');
SELECT pgdl.pack('seq_test', 'a', 'lab', 'seq_bad_out', reference => 'seq_packed', categorical => 'c',
                 sequence => '"wo""rd\s", toks', partitions => 1);
UPDATE seq_bad SET toks = CASE WHEN a = 1 THEN '{}'::integer[] END, m = ARRAY[1];
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', partitions => 1, sequence => 'toks');
-- a huge array is refused, unless max_length says how much of it to keep
UPDATE seq_bad SET toks = array_fill(3, ARRAY[70000]) || 4 WHERE a = 2;
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_bad_out', partitions => 1, sequence => 'toks');
SELECT pgdl.pack('seq_bad', 'a', 'lab', 'seq_huge', partitions => 1, sequence => 'toks', max_length => 3) > 0
         AS packed;
SELECT x FROM seq_huge;
-- raw sequences that do not fit the dataset
SELECT pgdl.encode('seq_packed', ARRAY[0]::real[], ARRAY['x'], '{"toks": []}');
SELECT pgdl.encode('seq_packed', ARRAY[0]::real[], ARRAY['x'], '[[]]');
SELECT pgdl.encode('seq_packed', ARRAY[0]::real[], ARRAY['x'], '[5, []]');
SELECT pgdl.encode('seq_packed', ARRAY[0]::real[], ARRAY['x'], '[[[5]], []]');
SELECT pgdl.encode('seq_packed', ARRAY[0]::real[], ARRAY['x'], '[["five"], []]');
SELECT pgdl.encode('seq_packed', ARRAY[0]::real[], ARRAY['x']);
SELECT pgdl.encode('seq_cut', ARRAY[0]::real[], '{}', '[]');

-- spilled to temporary files, the same bytes: each row's tokens follow it through the external shuffle
CREATE TABLE seq_big AS
SELECT ARRAY(SELECT (i * j % 97)::real FROM generate_series(1, 16) j) AS f,
       ARRAY(SELECT 'w' || (i * k % 31) FROM generate_series(1, i % 7) k) AS words, i % 3 AS lab
  FROM generate_series(1, 20000) i;
SET maintenance_work_mem = '64MB';
SELECT pgdl.pack('seq_big', 'f', 'lab', 'seq_big_mem', buffer_rows => 500, sequence => 'words') > 0 AS packed;
SET maintenance_work_mem = '1MB';
SELECT pgdl.pack('seq_big', 'f', 'lab', 'seq_big_disk', buffer_rows => 500, sequence => 'words') > 0 AS packed;
RESET maintenance_work_mem;
SELECT (SELECT string_agg(array_send(x) || array_send(y), ''::bytea ORDER BY buffer_id) FROM seq_big_mem)
     = (SELECT string_agg(array_send(x) || array_send(y), ''::bytea ORDER BY buffer_id) FROM seq_big_disk)
       AS same_bytes,
       (SELECT count(DISTINCT x[23 * i + 23]) FROM seq_big_disk, generate_series(0, n - 1) i) AS lengths;

-- which of two tokens comes first, in sequences of 2 to 6 tokens: an embedding of the ids (a slice of
-- the example, after the row's id), a gru and a dense layer learn it from the packed sequences
CREATE TABLE seq_order AS
SELECT i AS id, toks, (array_position(toks, 1) < array_position(toks, 2))::integer AS label
  FROM (SELECT i, ARRAY(SELECT tok
                          FROM unnest(ARRAY[1, 2] || ARRAY(SELECT 3 + abs(hashint4(i * 16 + k)) % 3
                                                              FROM generate_series(1, abs(hashint4(i)) % 5) k))
                               WITH ORDINALITY AS u(tok, pos)
                         ORDER BY hashint4(i * 64 + pos::integer), pos) AS toks
          FROM generate_series(1, 1000) i) s;
SELECT pgdl.pack('seq_order', 'id', 'label', 'seq_order_packed', buffer_rows => 50, partitions => 2,
                 sequence => 'toks') AS order_id \gset
SELECT n_features, categorical -> 0 -> 'length' AS length, jsonb_array_length(categorical -> 0 -> 'values') AS tokens
  FROM pgdl.datasets WHERE id = :order_id;
SELECT pgdl.fit('seq_order_packed', '{"input": [8], "layers": [
  {"type": "slice", "start": 1, "length": 6}, {"type": "embedding", "vocab": 7, "dim": 8},
  {"type": "gru", "units": 16}, {"type": "dense", "units": 2}]}'::jsonb,
  '{"optimizer": "adam", "lr": 0.02, "batch_size": 25, "seed": 5}', epochs => 10, name => 'seq_order_model') > 0
  AS trained;
SELECT count(*) FILTER (WHERE pgdl.predict_class('seq_order_model', ARRAY[id]::real[], '{}', jsonb_build_array(toks))::integer
                              = label) > 0.9 * count(*) AS predicts
  FROM seq_order;
-- on raw arrays as on the packed examples
WITH packed AS (
	SELECT x[8 * i + 1 : 8 * i + 8] AS x FROM seq_order_packed, generate_series(0, n - 1) i
)
SELECT count(*) AS rows,
       bool_and(pgdl.predict('seq_order_model', p.x)
                = pgdl.predict('seq_order_model', ARRAY[s.id]::real[], '{}', jsonb_build_array(s.toks))) AS same
  FROM packed p JOIN seq_order s ON p.x[1] = s.id;
SELECT pgdl.predict('seq_order_model', ARRAY[1]::real[], '{}') IS NULL;
SELECT pgdl.predict('seq_order_model', ARRAY[1]::real[]);

-- leave nothing behind
DELETE FROM pgdl.models WHERE name LIKE 'seq\_%' OR run > :sq_first_run;
DELETE FROM pgdl.runs WHERE id > :sq_first_run;
DROP TABLE seq_src, seq_packed, seq_cut, seq_long, seq_test, seq_test_packed, seq_bad, seq_huge,
           seq_big, seq_big_mem, seq_big_disk, seq_order, seq_order_packed;
SELECT setval('pgdl.runs_id_seq', :sq_runs_seq, :'sq_runs_called'::boolean) > 0 AS restored,
       setval('pgdl.models_id_seq', :sq_models_seq, :'sq_models_called'::boolean) > 0 AS restored,
       setval('pgdl.datasets_id_seq', :sq_datasets_seq, :'sq_datasets_called'::boolean) > 0 AS restored;
SELECT (SELECT count(*) FROM pgdl.datasets WHERE packed::text LIKE 'seq\_%') AS datasets,
       (SELECT count(*) FROM pgdl.models WHERE name LIKE 'seq\_%') AS models;
