-- Inference: pgdl.predict, predict_class, predict_batch, evaluate,
-- model_weights and model_from_weights.  The models are built from hand-chosen
-- weights (no training), so that every number below can be checked by hand;
-- the comments give the arithmetic.  Ids of catalog rows are kept in psql
-- variables, since other tests may have used the sequences.

-- floats to 5 decimals: exp() and BLAS may round the last bit differently
-- elsewhere (every value below is at least 8e-7 away from a rounding boundary)
CREATE FUNCTION pg_temp.r5(real[]) RETURNS numeric[] LANGUAGE sql IMMUTABLE
	AS $$ SELECT array_agg(round(v::float8::numeric, 5) ORDER BY i) FROM unnest($1) WITH ORDINALITY u(v, i) $$;

-- a softmax classifier: z = W x + b, W = [[1, 2], [3, 4]], b = [0.5, -0.5]
\set ce_spec '{"input": [2], "layers": [{"type": "dense", "units": 2}], "loss": "cross_entropy"}'
SELECT pgdl.model_from_weights(:'ce_spec', '{1,2,3,4,0.5,-0.5}') AS ce_blob \gset
-- x = [1, 1]: z = [3.5, 6.5], softmax = [1, e^3] / (1 + e^3)
SELECT pg_temp.r5(pgdl.predict(:'ce_blob'::bytea, '{1,1}')) AS probabilities;
-- x = [1, -1]: z = [-0.5, -1.5], softmax = [e, 1] / (1 + e)
SELECT pg_temp.r5(pgdl.predict(:'ce_blob'::bytea, ARRAY[1, -1])) AS probabilities;
-- a blob has no dataset: its class is the index, as text
SELECT pgdl.predict_class(:'ce_blob'::bytea, '{1,1}') AS class_1,
       pgdl.predict_class(:'ce_blob'::bytea, '{1,-1}') AS class_0;

-- a regression model: raw outputs, z = [x1 - x3, 2 (x1 + x2 + x3) + 1]
\set mse_spec '{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "mse"}'
SELECT pgdl.model_from_weights(:'mse_spec', '{1,0,-1,2,2,2,0,1}') AS mse_blob \gset
SELECT pgdl.predict(:'mse_blob'::bytea, '{1,2,3}') AS outputs;

-- a binary classifier: one logit z = x1 - x2, probability sigmoid(z)
\set bce_spec '{"input": [2], "layers": [{"type": "dense", "units": 1}], "loss": "binary_cross_entropy"}'
SELECT pgdl.model_from_weights(:'bce_spec', '{1,-1,0}') AS bce_blob \gset
SELECT pg_temp.r5(pgdl.predict(:'bce_blob'::bytea, '{2,0}')) AS sigmoid_2,
       pg_temp.r5(pgdl.predict(:'bce_blob'::bytea, '{0,2}')) AS sigmoid_minus_2;
SELECT pgdl.predict_class(:'bce_blob'::bytea, '{2,0}') AS class_1,
       pgdl.predict_class(:'bce_blob'::bytea, '{0,2}') AS class_0;

-- batchnorm in inference uses the running statistics (buffers: mean [1, 0], var [1, 9]),
-- gamma [2, 1], beta [0, 1], eps 1e-5: x = [3, 4] -> dense (identity) ->
-- [2 (3 - 1) / sqrt(1 + 1e-5), (4 - 0) / sqrt(9 + 1e-5) + 1] -> relu
\set bn_spec '{"input": [2], "layers": [{"type": "dense", "units": 2}, {"type": "batchnorm"}, {"type": "relu"}], "loss": "mse"}'
SELECT pgdl.model_from_weights(:'bn_spec', '{1,0,0,1,0,0,2,1,0,1}', '{1,0,1,9}') AS bn_blob \gset
SELECT pg_temp.r5(pgdl.predict(:'bn_blob'::bytea, '{3,4}')) AS with_statistics,
       pg_temp.r5(pgdl.predict(:'bn_blob'::bytea, '{-1,4}')) AS relu_clips;
-- without buffers: mean 0, var 1 (PyTorch's initial running statistics):
-- [2 * 3 / sqrt(1 + 1e-5), 4 / sqrt(1 + 1e-5) + 1]
SELECT pg_temp.r5(pgdl.predict(pgdl.model_from_weights(:'bn_spec', '{1,0,0,1,0,0,2,1,0,1}'), '{3,4}'))
       AS initial_statistics;

-- STRICT: NULL in, NULL out
SELECT pgdl.predict(:'ce_blob'::bytea, NULL) IS NULL AS null_x,
       pgdl.predict(NULL::bytea, '{1,1}') IS NULL AS null_model,
       pgdl.predict_class(NULL::bigint, '{1,1}') IS NULL AS null_id;

-- several blobs in one statement: each row runs its own model
SELECT k, pg_temp.r5(pgdl.predict(b, '{1,1}')) AS outputs
  FROM (VALUES (1, :'ce_blob'::bytea), (2, :'bce_blob'::bytea), (3, :'ce_blob'::bytea)) v(k, b)
 ORDER BY k;

-- in PL/pgSQL, where one expression is evaluated again with new values
CREATE TEMP TABLE pred_blobs AS
	SELECT * FROM (VALUES (1, :'ce_blob'::bytea), (2, :'bce_blob'::bytea), (3, :'ce_blob'::bytea)) v(k, b);
DO $$
DECLARE
	r record;
	p real[];
BEGIN
	FOR r IN SELECT * FROM pred_blobs ORDER BY k LOOP
		p := pgdl.predict(r.b, '{1,1}');
		RAISE NOTICE 'blob %: % outputs', r.k, cardinality(p);
	END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- model_weights: every tensor, PyTorch's names and shapes, layer = index in the spec
-- ---------------------------------------------------------------------------
SELECT * FROM pgdl.model_weights(:'ce_blob'::bytea);
SELECT * FROM pgdl.model_weights(:'bn_blob'::bytea);
-- conv2d: weight [filters, channels, kernel, kernel]; layers without parameters have no rows
\set conv_spec '{"input": [1, 3, 3], "layers": [{"type": "conv2d", "filters": 2, "kernel": 2}, {"type": "relu"}, {"type": "flatten"}, {"type": "dense", "units": 2}], "loss": "cross_entropy"}'
SELECT pgdl.model_from_weights(:'conv_spec',
		ARRAY(SELECT ((i * 7) % 11 - 5) / 4.0 FROM generate_series(1, 28) i)::real[]) AS conv_blob \gset
SELECT layer, name, shape, cardinality("values") AS n_values FROM pgdl.model_weights(:'conv_blob'::bytea);
-- as PyTorch's Conv2d(1, 2, 2), ReLU, Flatten, Linear(8, 2) with these weights:
-- logits [-0.61875, -0.2625]
SELECT pg_temp.r5(pgdl.predict(:'conv_blob'::bytea, '{-0.1,0.2,-0.3,0.4,-0.5,0.6,-0.7,0.8,-0.9}'))
       AS conv_probabilities;

-- round trip: model_from_weights(spec, the parameters in model_weights order, the
-- running statistics) gives the same blob, and so the same predictions
CREATE FUNCTION pg_temp.params(blob bytea, running boolean) RETURNS real[] LANGUAGE sql
	AS $$ SELECT array_agg(v ORDER BY w.i, u.j)
	        FROM pgdl.model_weights(blob) WITH ORDINALITY w(layer, name, shape, vals, i),
	             unnest(w.vals) WITH ORDINALITY u(v, j)
	       WHERE (w.name LIKE 'running_%') = running $$;
SELECT pgdl.model_from_weights(:'conv_spec', pg_temp.params(:'conv_blob', false)) = :'conv_blob'::bytea
       AS conv_round_trip;
SELECT pgdl.model_from_weights(:'bn_spec', pg_temp.params(:'bn_blob', false), pg_temp.params(:'bn_blob', true))
       = :'bn_blob'::bytea AS bn_round_trip;
-- the seed is part of the model (dropout), not of its weights
SELECT pgdl.model_from_weights(:'ce_spec', '{1,2,3,4,0.5,-0.5}', seed => 7) = :'ce_blob'::bytea AS same_with_other_seed,
       pgdl.predict(pgdl.model_from_weights(:'ce_spec', '{1,2,3,4,0.5,-0.5}', seed => 7), '{1,1}')
       = pgdl.predict(:'ce_blob'::bytea, '{1,1}') AS same_predictions;

-- ---------------------------------------------------------------------------
-- stored models: by id and by name, normalized with their dataset
-- ---------------------------------------------------------------------------
-- a hand-made packed table of two partitions; x is already normalized
CREATE TABLE pred_packed (part integer, buffer_id integer, n integer, x real[], y real[])
	PARTITION BY LIST (part);
CREATE TABLE pred_packed_0 PARTITION OF pred_packed FOR VALUES IN (0);
CREATE TABLE pred_packed_1 PARTITION OF pred_packed FOR VALUES IN (1);
INSERT INTO pred_packed VALUES (0, 0, 2, '{2,0,0,1}', '{0,1}'), (1, 1, 1, '{1,3}', '{0}');
INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features, n_targets, classes,
						   label_type, normalization, n_rows, n_buffers, buffer_rows, partitions, seed)
	VALUES ('pred_packed', 'pred_source', 'f', 'label', 'classification', 2, 1, '{cat,dog}',
			'text', '{"mean": [1, 2], "std": [2, 4]}', 3, 2, 2, 2, 42)
	RETURNING id AS ds_id \gset

-- the identity network z = x on dataset pred_packed: raw x = [5, 6] is normalized
-- to [(5 - 1) / 2, (6 - 2) / 4] = [2, 1], so class 0 ("cat"), where the raw
-- features would have said class 1
\set id_spec '{"input": [2], "layers": [{"type": "dense", "units": 2}], "loss": "cross_entropy"}'
INSERT INTO pgdl.models (name, spec, weights, dataset)
	VALUES ('pred_identity', :'id_spec', pgdl.model_from_weights(:'id_spec', '{1,0,0,1,0,0}'), :ds_id)
	RETURNING id AS identity_id \gset
INSERT INTO pgdl.models (name, spec, weights)
	VALUES ('pred_mse', :'mse_spec', :'mse_blob')
	RETURNING id AS mse_id \gset

SELECT pgdl.predict_class(:identity_id, '{5,6}') AS by_id,
       pgdl.predict_class('pred_identity', '{5,6}') AS by_name,
       pgdl.predict_class(pgdl.model_from_weights(:'id_spec', '{1,0,0,1,0,0}'), '{5,6}') AS blob_not_normalized;
-- softmax([2, 1]) = [e, 1] / (1 + e)
SELECT pg_temp.r5(pgdl.predict(:identity_id, '{5,6}')) AS by_id,
       pg_temp.r5(pgdl.predict('pred_identity', '{5,6}')) AS by_name;
-- raw [1, 10] -> [0, 2]: "dog"
SELECT pgdl.predict_class('pred_identity', '{1,10}') AS dog;
-- a model without a dataset: features as given, classes as indices
SELECT pgdl.predict(:mse_id, '{1,2,3}') AS by_id, pgdl.predict('pred_mse', '{1,2,3}') AS by_name;
-- one call site, many rows: the cached model serves them all
-- [i, 10 - i] -> [(i - 1) / 2, (8 - i) / 4]: dog up to 3, then cat
SELECT i, pgdl.predict_class('pred_identity', ARRAY[i, 10 - i]) AS class
  FROM generate_series(1, 5) i ORDER BY i;

-- x of any array of numbers (one double precision[] overload): every literal form and type resolves and
-- gives what real[] does; pred_mse outputs [x1 - x3, 2 (x1 + x2 + x3) + 1] = [-2, 13] for [1, 2, 3]
SELECT pgdl.predict(:mse_id, '{1,2,3}') AS int_unknown,
       pgdl.predict('pred_mse', ARRAY[1,2,3]) AS name_integer,
       pgdl.predict(:mse_id::bigint, ARRAY[1,2,3]::real[]) AS bigint_real,
       pgdl.predict(:'mse_blob'::bytea, '{1,2,3}'::float8[]) AS blob_float8,
       pgdl.predict('pred_mse'::text, '{1,2,3}') AS text_unknown;
SELECT pgdl.predict('pred_mse', ARRAY[0.5, 1.5, 2.5]) AS numeric_literal,
       pgdl.predict('pred_mse', ARRAY[1, 2, 3]::bigint[]) = pgdl.predict('pred_mse', '{1,2,3}'::real[]) AS bigint_same,
       pgdl.predict('pred_mse', ARRAY[1, 2, 3]::smallint[]) = pgdl.predict('pred_mse', '{1,2,3}'::real[]) AS smallint_same,
       pgdl.predict('pred_mse', '{1,2,3}'::numeric[]) = pgdl.predict('pred_mse', '{1,2,3}'::real[]) AS numeric_same,
       pgdl.predict('pred_mse', ARRAY[0.1, 0.2, 0.3]::float8[])
       = pgdl.predict('pred_mse', ARRAY[0.1, 0.2, 0.3]::real[]) AS float8_rounds_as_real;
SELECT pgdl.predict_class('pred_identity', '{5,6}'::float8[]) AS class_float8,
       pgdl.predict_class(:identity_id, ARRAY[5, 6]) AS class_integer,
       pgdl.predict_class('pred_identity', ARRAY[5.0, 6.0]) AS class_numeric,
       pgdl.predict_class('pred_identity', ARRAY[5, 6]::bigint[], NULL::text) AS typed_bigint,
       pgdl.predict_class(:'ce_blob'::bytea, '{1,-1}'::float8[], NULL::integer) AS blob_typed_float8;
-- the categories and sequences forms resolve too (and reach the model's checks)
SELECT pgdl.predict('pred_mse', ARRAY[1, 2, 3]::float8[], '{}');
SELECT pgdl.predict_class(:identity_id, ARRAY[5, 6]::numeric[], '{}', '[]');
-- the errors: a NULL element, NaN or infinity, a value beyond real's range, an array of non-numbers
SELECT pgdl.predict('pred_mse', ARRAY[1, NULL, 3]::float8[]);
SELECT pgdl.predict('pred_mse', ARRAY[1, 'NaN', 3]::float8[]);
SELECT pgdl.predict('pred_mse', ARRAY[1, 2, '-Infinity']::numeric[]);
SELECT pgdl.predict('pred_mse', ARRAY[1, 2, 1e300]::float8[]);
SELECT pgdl.predict_class('pred_identity', ARRAY[1e39, 1]);
SELECT pgdl.predict('pred_mse', ARRAY['1', '2', '3']::text[]);

-- model_weights by id and by name
SELECT * FROM pgdl.model_weights(:identity_id);
SELECT layer, name, "values" FROM pgdl.model_weights('pred_mse');

-- ---------------------------------------------------------------------------
-- evaluate: mean loss and accuracy over every buffer of a packed table
-- ---------------------------------------------------------------------------
-- z = x: [2, 0] label 0, [0, 1] label 1 (both right), [1, 3] label 0 (wrong);
-- loss = (log(1 + e^-2) + log(1 + e^-1) + log(1 + e^2)) / 3
SELECT round(loss::numeric, 5) AS loss, round(accuracy::numeric, 5) AS accuracy, n
  FROM pgdl.evaluate(:identity_id, 'pred_packed');
SELECT round(loss::numeric, 5) AS loss, round(accuracy::numeric, 5) AS accuracy, n
  FROM pgdl.evaluate('pred_identity', 'pred_packed');
-- a single binary output on two classes: z = x1 - x2 = 2 (label 0), -1 (label 1), -2 (label 0);
-- loss = (2 + log(1 + e^-2) + 1 + log(1 + e^-1) + log(1 + e^-2)) / 3, one right
SELECT round(loss::numeric, 5) AS loss, round(accuracy::numeric, 5) AS accuracy, n
  FROM pgdl.evaluate(:'bce_blob'::bytea, 'pred_packed');

-- regression: z = [x1 - x3, 2 (x1 + x2 + x3) + 1]; example 1 exact, example 2 off by 1 in both
CREATE TABLE pred_reg (part integer, buffer_id integer, n integer, x real[], y real[])
	PARTITION BY LIST (part);
CREATE TABLE pred_reg_0 PARTITION OF pred_reg FOR VALUES IN (0);
INSERT INTO pred_reg VALUES (0, 0, 2, '{1,2,3,0,0,0}', '{-2,13,1,0}');
INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features, n_targets, classes,
						   label_type, normalization, n_rows, n_buffers, buffer_rows, partitions, seed)
	VALUES ('pred_reg', 'pred_source', 'f', 'target', 'regression', 3, 2, NULL,
			'real[]', '{"scale": 1}', 2, 1, 2, 1, 42);
SELECT loss, accuracy, n FROM pgdl.evaluate('pred_mse', 'pred_reg');
-- an empty packed table: no examples, no loss
BEGIN;
DELETE FROM pred_reg;
SELECT loss, accuracy, n FROM pgdl.evaluate('pred_mse', 'pred_reg');
ROLLBACK;

-- ---------------------------------------------------------------------------
-- predict_batch: a table, batch_size rows per forward pass
-- ---------------------------------------------------------------------------
CREATE TABLE pred_source (id integer, f real[], f8 double precision[], fi integer[], label text);
INSERT INTO pred_source VALUES
	(1, '{5,6}', '{5,6}', '{5,6}', 'cat'),
	(2, '{1,10}', '{1,10}', '{1,10}', 'dog'),
	(3, NULL, NULL, NULL, NULL),
	(4, '{3,10}', '{3,10}', '{3,10}', 'dog'),
	(NULL, '{9,2}', '{9,2}', '{9,2}', 'cat');
-- [5, 6] -> [2, 1]: cat, e / (1 + e); [1, 10] -> [0, 2]: dog, e^2 / (1 + e^2);
-- [3, 10] -> [1, 2]: dog, e / (1 + e); [9, 2] -> [4, 0]: cat, e^4 / (1 + e^4)
SELECT id, class, round(probability::numeric, 5) AS probability
  FROM pgdl.predict_batch(:identity_id, 'pred_source', 'id', 'f', 2) ORDER BY id;
-- by name, double precision[] and integer[] features, the default batch size
SELECT id, class, round(probability::numeric, 5) AS probability
  FROM pgdl.predict_batch('pred_identity', 'pred_source', 'id', 'f8') ORDER BY id;
SELECT count(*) AS rows_differing
  FROM pgdl.predict_batch('pred_identity', 'pred_source', 'id', 'fi', 1) b
  JOIN pred_source s ON s.id = b.id
 WHERE b.class IS DISTINCT FROM pgdl.predict_class('pred_identity', s.f);
-- a blob: class indices, features not normalized
SELECT id, class, round(probability::numeric, 5) AS probability
  FROM pgdl.predict_batch(:'bce_blob'::bytea, 'pred_source', 'id', 'f', 3) ORDER BY id;
-- an empty table
CREATE TABLE pred_source_empty (id bigint, f real[]);
SELECT count(*) AS no_rows FROM pgdl.predict_batch('pred_identity', 'pred_source_empty', 'id', 'f');

-- ---------------------------------------------------------------------------
-- typed predictions: predict_class(model, x, label_type) returns label_type's type
-- ---------------------------------------------------------------------------
-- pred_identity's labels are text: as text, and as integer (an error naming both types)
SELECT pgdl.predict_class('pred_identity', '{5,6}', NULL::text) AS typed_text,
       pg_typeof(pgdl.predict_class('pred_identity', '{5,6}', NULL::text)) AS type;
SELECT pgdl.predict_class('pred_identity', '{5,6}', NULL::integer);
-- a blob: the class index, as integer or bigint; NULL model or x: NULL
SELECT pgdl.predict_class(:'ce_blob'::bytea, '{1,1}', NULL::integer) + 1 AS index_plus_one,
       pg_typeof(pgdl.predict_class(:'ce_blob'::bytea, '{1,-1}', NULL::bigint)) AS type,
       pgdl.predict_class(:'ce_blob'::bytea, NULL, NULL::integer) IS NULL AS null_x,
       pgdl.predict_class(NULL::bytea, '{1,1}', NULL::integer) IS NULL AS null_model;
SELECT pgdl.predict_class(:'ce_blob'::bytea, '{1,1}', NULL::date);
SELECT pgdl.predict_class(:'ce_blob'::bytea, '{NaN,1}', NULL::integer);
-- a dataset packed from an integer label column: integers, comparable with the label column
BEGIN;
UPDATE pgdl.datasets SET label_type = 'integer', classes = '{3,7}' WHERE id = :ds_id;
SELECT pgdl.predict_class('pred_identity', '{5,6}', NULL::integer) AS class,
       pgdl.predict_class('pred_identity', '{5,6}', NULL::integer) = 3 AS equals_label,
       pgdl.predict_class(:identity_id, '{1,10}', NULL::bigint) AS by_id_as_bigint,
       pgdl.predict_class('pred_identity', '{1,10}') AS text_form;
SELECT id, class, pg_typeof(class) AS type, round(probability::numeric, 5) AS probability
  FROM pgdl.predict_batch('pred_identity', 'pred_source', 'id', 'f', 2, NULL::integer) ORDER BY id;
ROLLBACK;

-- ---------------------------------------------------------------------------
-- predict_batch from a table name, a query or a cursor
-- ---------------------------------------------------------------------------
-- a string is a table or view name (quoted, qualified) unless it starts with SELECT, WITH, VALUES, TABLE or (
SELECT id, class FROM pgdl.predict_batch('pred_identity', 'public."pred_source"', 'id', 'f', 2) ORDER BY id;
SELECT id, class, round(probability::numeric, 5) AS probability
  FROM pgdl.predict_batch('pred_identity', 'SELECT id * 10 AS id, f8 AS feats FROM pred_source WHERE id < 4',
                          'id', 'feats', 2) ORDER BY id;
SELECT id, class FROM pgdl.predict_batch('pred_identity', '  values (1, ''{5,6}''::real[]), (2, ''{1,10}'')',
                                         'column1', 'column2') ORDER BY id;
SELECT id, class FROM pgdl.predict_batch('pred_identity', 'WITH s AS (SELECT id, fi FROM pred_source) SELECT * FROM s',
                                         'id', 'fi', 3) ORDER BY id;
SELECT count(*) AS same_as_table
  FROM pgdl.predict_batch('pred_identity', 'TABLE pred_source', 'id', 'f') q
  JOIN pgdl.predict_batch('pred_identity', 'pred_source'::regclass, 'id', 'f') t USING (id)
 WHERE q.class = t.class AND q.probability = t.probability;
CREATE VIEW pred_source_view AS SELECT id AS key, f AS pixels FROM pred_source;
SELECT key, class FROM pgdl.predict_batch('pred_identity', 'pred_source_view', 'key', 'pixels') b(key, class, p)
 ORDER BY key;
-- a cursor: read from where it stands, left open at its end
BEGIN;
DECLARE pred_cursor CURSOR FOR SELECT id, f FROM pred_source ORDER BY id;
FETCH 1 FROM pred_cursor;
SELECT id, class FROM pgdl.predict_batch('pred_identity', 'pred_cursor'::refcursor, 'id', 'f', 2);
FETCH 1 FROM pred_cursor;
CLOSE pred_cursor;
DECLARE pred_cursor CURSOR FOR SELECT id, f FROM pred_source ORDER BY id;
SELECT id, class, pg_typeof(class) AS type
  FROM pgdl.predict_batch(:'ce_blob'::bytea, 'pred_cursor'::refcursor, 'id', 'f', 64, NULL::integer) LIMIT 2;
CLOSE pred_cursor;
-- a closed cursor
SELECT * FROM pgdl.predict_batch('pred_identity', 'pred_cursor'::refcursor, 'id', 'f');
COMMIT;
-- streaming: LIMIT 3 with batches of 4 reads one batch (nextval counts the rows the source produced),
-- in FROM as in a select list (pgdl.predict_batch is inlined into the query)
CREATE TEMP SEQUENCE pred_seen;
CREATE TEMP TABLE pred_many AS SELECT i AS id, ARRAY[i, 10 - i]::real[] AS f FROM generate_series(1, 100) i;
SELECT count(*) AS rows_returned
  FROM (SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT id, f FROM pred_many WHERE nextval(''pred_seen'') > 0',
                                         'id', 'f', 4) LIMIT 3) s;
SELECT currval('pred_seen') AS rows_read;
SELECT count(*) AS rows_returned
  FROM (SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT id, f FROM pred_many WHERE nextval(''pred_seen'') > 0',
                                         'id', 'f', 4)) s;
SELECT currval('pred_seen') - 4 AS rows_read_without_limit;
EXPLAIN (COSTS OFF) SELECT * FROM pgdl.predict_batch('pred_identity', 'pred_many', 'id', 'f') LIMIT 3;
-- the same source twice in one statement, each stopped early: two portals, both closed
SELECT (SELECT count(*) FROM (SELECT * FROM pgdl.predict_batch('pred_identity', 'pred_many', 'id', 'f', 8) LIMIT 2) a) AS a,
       (SELECT count(*) FROM (SELECT * FROM pgdl.predict_batch('pred_identity', 'pred_many', 'id', 'f', 8) LIMIT 5) b) AS b;

-- hostile sources: NULLs give no rows; NaN; a query that fails, has the wrong columns or types,
-- modifies data (refused before it runs: the function is STABLE and its query read-only), is not one query
SELECT count(*) AS null_source FROM pgdl.predict_batch('pred_identity', NULL::text, 'id', 'f');
SELECT count(*) AS null_cursor FROM pgdl.predict_batch('pred_identity', NULL::refcursor, 'id', 'f');
SELECT count(*) AS null_label_model FROM pgdl.predict_batch(NULL::text, 'pred_source', 'id', 'f', 2, NULL::integer);
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT 1 AS id, ''{NaN,1}''::real[] AS f', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT 1 AS id, ''{1e300,1}''::float8[] AS f', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT 1 / 0 AS id, ''{1,1}''::real[] AS f', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT nope FROM pred_source', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT id, f AS x FROM pred_source', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT id, f, f FROM pred_source', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT label AS id, f FROM pred_source', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT id, ARRAY[''{1,2}''::real[]] AS f FROM pred_source', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'INSERT INTO pred_source (id) VALUES (99) RETURNING id, f', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'WITH d AS (DELETE FROM pred_source RETURNING *) SELECT id, f FROM d', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT id, f FROM pred_source FOR UPDATE', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT id, f FROM pred_source; DELETE FROM pred_source', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'SELECT id, f INTO pred_stolen FROM pred_source', 'id', 'f');
SELECT count(*) AS rows_left FROM pred_source;
SELECT * FROM pgdl.predict_batch('pred_identity', 'no_such_table', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'pred_source"; DROP TABLE pred_source; --', 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'no_such_cursor'::refcursor, 'id', 'f');
SELECT * FROM pgdl.predict_batch('pred_identity', 'pred_source', 'id', 'f', 65537);
SELECT * FROM pgdl.predict_batch('pred_identity', 'pred_source', 'id', 'f', 2147483647, NULL::integer);
SELECT * FROM pgdl.predict_batch_rows('pred_identity'::text, 'bogus', 'pred_source', 'id', 'f', 2, NULL::text);
-- another role's table: the query runs as the caller
CREATE ROLE pred_stranger;
SET ROLE pred_stranger;
SELECT * FROM pgdl.predict_batch(:'ce_blob'::bytea, 'pred_source', 'id', 'f');
SELECT * FROM pgdl.predict_batch(:'ce_blob'::bytea, 'SELECT id, f FROM pred_source', 'id', 'f');
RESET ROLE;
-- and row-level security applies to it
ALTER TABLE pred_many ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON pred_many TO pred_stranger;
CREATE POLICY pred_few ON pred_many FOR SELECT TO pred_stranger USING (id <= 2);
SET ROLE pred_stranger;
SELECT count(*) AS rows_seen FROM pgdl.predict_batch(:'ce_blob'::bytea, 'pred_many', 'id', 'f');
RESET ROLE;
DROP TABLE pred_many;
DROP ROLE pred_stranger;

-- ---------------------------------------------------------------------------
-- a stored model that changes is seen by the next call in the same session
-- ---------------------------------------------------------------------------
SELECT pgdl.predict_class('pred_identity', '{5,6}') AS before_update;
-- swap the outputs: z = [x2, x1]
UPDATE pgdl.models SET weights = pgdl.model_from_weights(:'id_spec', '{0,1,1,0,0,0}')
 WHERE name = 'pred_identity';
SELECT pgdl.predict_class('pred_identity', '{5,6}') AS after_update_by_name,
       pgdl.predict_class(:identity_id, '{5,6}') AS after_update_by_id;
SELECT round(accuracy::numeric, 5) AS accuracy_after_update FROM pgdl.evaluate(:identity_id, 'pred_packed');
-- the dataset's classes too
UPDATE pgdl.datasets SET classes = '{chat,chien}' WHERE id = :ds_id;
SELECT pgdl.predict_class('pred_identity', '{5,6}') AS after_dataset_update;
-- and a rename
UPDATE pgdl.models SET name = 'pred_renamed' WHERE name = 'pred_identity';
SELECT pgdl.predict_class('pred_renamed', '{5,6}') AS renamed;
SELECT pgdl.predict_class('pred_identity', '{5,6}');
-- within a transaction, too
BEGIN;
UPDATE pgdl.models SET weights = pgdl.model_from_weights(:'id_spec', '{1,0,0,1,0,0}')
 WHERE name = 'pred_renamed';
SELECT pgdl.predict_class('pred_renamed', '{5,6}') AS in_transaction;
ROLLBACK;
SELECT pgdl.predict_class('pred_renamed', '{5,6}') AS after_rollback;

-- ---------------------------------------------------------------------------
-- errors
-- ---------------------------------------------------------------------------
-- x of the wrong length, with NULLs, of more than one dimension, empty
SELECT pgdl.predict(:'ce_blob'::bytea, '{1,2,3}');
SELECT pgdl.predict_class('pred_renamed', '{1}');
SELECT pgdl.predict(:'ce_blob'::bytea, '{1,NULL}');
SELECT pgdl.predict(:'ce_blob'::bytea, '{{1,2},{3,4}}');
SELECT pgdl.predict(:'ce_blob'::bytea, '{}');
-- unknown models, corrupt blobs
SELECT pgdl.predict(9223372036854775807, '{1,1}');
SELECT pgdl.predict('no_such_model', '{1,1}');
SELECT pgdl.predict('\x00'::bytea, '{1,1}');
SELECT pgdl.predict_class(substring(:'ce_blob'::bytea FROM 1 FOR 40), '{1,1}');
SELECT * FROM pgdl.model_weights('\x0102'::bytea);
SELECT * FROM pgdl.evaluate(9223372036854775807, 'pred_packed');
-- classes of a model that has none
SELECT pgdl.predict_class('pred_mse', '{1,2,3}');
SELECT pgdl.predict_class(pgdl.model_from_weights(
	'{"input": [2], "layers": [{"type": "dense", "units": 2}], "loss": "binary_cross_entropy"}',
	'{1,0,0,1,0,0}'), '{1,2}');
SELECT * FROM pgdl.predict_batch('pred_mse', 'pred_source', 'id', 'f');

-- predict_batch: columns and batch size
SELECT * FROM pgdl.predict_batch('pred_renamed', 'pred_source', 'label', 'f');
SELECT * FROM pgdl.predict_batch('pred_renamed', 'pred_source', 'id', 'label');
SELECT * FROM pgdl.predict_batch('pred_renamed', 'pred_source', 'id', 'nope');
SELECT * FROM pgdl.predict_batch('pred_renamed', 'pred_source', 'id', 'f', 0);
SELECT * FROM pgdl.predict_batch('pred_renamed', 'pred_source', 'id', 'f', 65537);
BEGIN;
INSERT INTO pred_source (id, f) VALUES (7, '{1,2,3}');
SELECT * FROM pgdl.predict_batch('pred_renamed', 'pred_source', 'id', 'f');
ROLLBACK;
BEGIN;
INSERT INTO pred_source (id, f) VALUES (NULL, '{1}');
SELECT * FROM pgdl.predict_batch('pred_renamed', 'pred_source', 'id', 'f');
ROLLBACK;
BEGIN;
INSERT INTO pred_source (id, f) VALUES (8, '{1,NULL}');
SELECT * FROM pgdl.predict_batch('pred_renamed', 'pred_source', 'id', 'f');
ROLLBACK;

-- evaluate: tables that are not packed, or do not fit the model
SELECT * FROM pgdl.evaluate('pred_renamed', 'pred_source');
SELECT * FROM pgdl.evaluate(:'mse_blob'::bytea, 'pred_packed');
SELECT * FROM pgdl.evaluate(pgdl.model_from_weights(
	'{"input": [2], "layers": [{"type": "dense", "units": 3}], "loss": "cross_entropy"}',
	'{1,0,0,1,0,0,0,0,0}'), 'pred_packed');
SELECT * FROM pgdl.evaluate(pgdl.model_from_weights(
	'{"input": [2], "layers": [{"type": "dense", "units": 1}], "loss": "mse"}', '{1,1,0}'), 'pred_packed');
SELECT * FROM pgdl.evaluate(pgdl.model_from_weights(
	'{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "cross_entropy"}',
	'{1,0,0,0,1,0,0,0}'), 'pred_reg');
SELECT * FROM pgdl.evaluate(pgdl.model_from_weights(
	'{"input": [3], "layers": [{"type": "dense", "units": 1}], "loss": "mse"}', '{1,1,1,0}'), 'pred_reg');
-- evaluate: broken buffers
BEGIN;
INSERT INTO pred_packed VALUES (1, 2, 2, '{1,2,3}', '{0,1}');
SELECT * FROM pgdl.evaluate('pred_renamed', 'pred_packed');
ROLLBACK;
BEGIN;
INSERT INTO pred_packed VALUES (1, 2, 1, '{1,2}', '{5}');
SELECT * FROM pgdl.evaluate('pred_renamed', 'pred_packed');
ROLLBACK;
BEGIN;
INSERT INTO pred_packed VALUES (1, 2, 1, NULL, '{0}');
SELECT * FROM pgdl.evaluate('pred_renamed', 'pred_packed');
ROLLBACK;
BEGIN;
INSERT INTO pred_packed VALUES (1, 2, 1, '{1,NULL}', '{0}');
SELECT * FROM pgdl.evaluate('pred_renamed', 'pred_packed');
ROLLBACK;

-- model_from_weights: lengths, values, spec
SELECT pgdl.model_from_weights(:'ce_spec', '{1,2,3}');
SELECT pgdl.model_from_weights(:'bn_spec', '{1,0,0,1,0,0,2,1,0,1}', '{1,0,4}');
SELECT pgdl.model_from_weights(:'ce_spec', '{1,2,3,4,0.5,-0.5}', '{1}');
SELECT length(pgdl.model_from_weights(:'ce_spec', '{1,2,3,4,0.5,-0.5}', '{}')) > 0 AS empty_buffers_fine;
SELECT pgdl.model_from_weights(:'ce_spec', '{1,2,3,NaN,0.5,-0.5}');
SELECT pgdl.model_from_weights(:'ce_spec', '{1,2,3,4,Infinity,-0.5}');
SELECT pgdl.model_from_weights(:'bn_spec', '{1,0,0,1,0,0,2,1,0,1}', '{1,0,4,-16}');
SELECT pgdl.model_from_weights(:'ce_spec', '{{1,2,3},{4,0.5,-0.5}}');
SELECT pgdl.model_from_weights(:'ce_spec', '{1,2,3,4,NULL,-0.5}');
SELECT pgdl.model_from_weights('{"input": [2], "layers": [{"type": "dense", "units": 0}]}', '{}');
SELECT pgdl.model_from_weights(:'ce_spec', '{1,2,3,4,0.5,-0.5}', seed => -1);
SELECT pgdl.model_from_weights(NULL, '{1}') IS NULL AS null_spec,
       pgdl.model_from_weights(:'ce_spec', NULL) IS NULL AS null_params;

-- the functions' declared properties
SELECT p.oid::regprocedure AS function, p.provolatile, p.proisstrict, p.proparallel
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'pgdl'
   AND p.proname IN ('predict', 'predict_class', 'predict_batch', 'evaluate', 'model_weights', 'model_from_weights')
 ORDER BY p.proname, p.oid::regprocedure::text;

-- inference shaped like a query: a network on a row is expensive (COST 1000), so the planner runs it on
-- the rows ORDER BY ... LIMIT keeps, after the sort, not on every row of the table
SELECT p.oid::regprocedure AS function, p.procost, p.prorows
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'pgdl'
   AND p.proname IN ('predict', 'predict_class', 'features', 'predict_batch', 'predict_batch_rows', 'evaluate',
                     'cache_features', 'features_batch')
 ORDER BY p.proname, p.oid::regprocedure::text;
CREATE TEMP TABLE pred_rows AS SELECT i AS id, ARRAY[i, -i]::real[] AS x FROM generate_series(1, 1000) i;
ANALYZE pred_rows;
SET plan_cache_mode = force_generic_plan;
PREPARE pred_top(bytea) AS SELECT id, pgdl.predict_class($1, x) FROM pred_rows ORDER BY id LIMIT 3;
EXPLAIN (COSTS OFF, VERBOSE) EXECUTE pred_top(:'ce_blob');
EXECUTE pred_top(:'ce_blob');
DEALLOCATE pred_top;
-- the typed form too, and a filter: the network runs on the rows the WHERE keeps
PREPARE pred_top_typed(bytea) AS
	SELECT id, pgdl.predict_class($1, x, NULL::integer) FROM pred_rows ORDER BY id LIMIT 3;
EXPLAIN (COSTS OFF, VERBOSE) EXECUTE pred_top_typed(:'ce_blob');
EXECUTE pred_top_typed(:'ce_blob');
DEALLOCATE pred_top_typed;
EXPLAIN (COSTS OFF) SELECT id FROM pred_rows
 WHERE id % 100 = 0 AND pgdl.predict_class(:identity_id, x, NULL::integer) = 1;
RESET plan_cache_mode;

-- clean up
DELETE FROM pgdl.models WHERE id IN (:identity_id, :mse_id);
DELETE FROM pgdl.datasets WHERE packed IN ('pred_packed'::regclass, 'pred_reg'::regclass);
DROP VIEW pred_source_view;
DROP TABLE pred_packed, pred_reg, pred_source, pred_source_empty;
