-- Per-row weights from a column at pack (weight => col): stored in the packed
-- table's column w, read by pgdl.fit, fit_multiple's workers and the metrics.
-- Rows weighing 1 train as unweighted rows, byte for byte.  The weighted steps
-- are checked against PyTorch in regress/metrics/check_row_weights.py.
SET client_min_messages = warning;
-- (what this test adds to the catalog is removed at its end: the tests after it count runs)
SELECT coalesce(max(id), 0) AS rw_first_run FROM pgdl.runs \gset

CREATE TABLE rw_rows AS
SELECT i, ARRAY[sin(i), cos(i), sin(2 * i), cos(3 * i)]::real[] AS x,
       CASE WHEN i % 10 = 0 OR (i % 10 = 5 AND cos(i) > 0.5) THEN 'b' ELSE 'a' END AS label,
       sin(i) * 3 AS target,
       (1 + i % 4)::numeric / 2 AS w, 1 AS one, 0.0::float8 AS zero, i::text AS t
  FROM generate_series(1, 200) i;
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_plain', buffer_rows => 32, partitions => 2) > 0 AS packed;
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_w', buffer_rows => 32, partitions => 2, weight => 'w') > 0 AS packed;
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_one', buffer_rows => 32, partitions => 2, weight => 'one') > 0 AS packed;
SELECT pgdl.pack('rw_rows', 'x', 'target', 'rw_reg', buffer_rows => 32, weight => 'w') > 0 AS packed;

-- the flag, and the weights as packed: each row's, in the rows' shuffled order
SELECT packed, weighted FROM pgdl.datasets WHERE packed::text LIKE 'rw_%' ORDER BY packed::text;
SELECT (SELECT sum(v) FROM rw_w, unnest(w) v) = (SELECT sum(w) FROM rw_rows) AS all_weights_packed,
       (SELECT bool_and(cardinality(w) = n) FROM rw_w) AS one_weight_an_example;
SELECT count(*) AS columns_w FROM information_schema.columns WHERE table_name = 'rw_plain' AND column_name = 'w';
-- the x and y of a weighted table are the unweighted one's
SELECT bool_and(p.x = q.x AND p.y = q.y) AS same_x_y
  FROM rw_plain p JOIN rw_w q USING (part, buffer_id);

SELECT pgdl.add_architecture('rw_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 8},
  {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
SELECT pgdl.add_architecture('rw_lin', '{"input": [4], "layers": [{"type": "dense", "units": 1}], "loss": "mse"}') > 0 AS added;
\set base '"lr": 0.1, "momentum": 0.9, "batch_size": 16, "seed": 3'

-- weights of 1 train as no weights, byte for byte; other weights change the bytes
CREATE TABLE rw_fits AS
SELECT t AS packed, pgdl.fit(t, 'rw_mlp', ('{' || :'base' || '}')::jsonb, 4) AS model
  FROM (VALUES ('rw_plain'), ('rw_one'), ('rw_w')) v(t);
SELECT f.packed, m.weights = (SELECT m0.weights FROM rw_fits f0 JOIN pgdl.models m0 ON m0.id = f0.model
                               WHERE f0.packed = 'rw_plain') AS same_as_unweighted
  FROM rw_fits f JOIN pgdl.models m ON m.id = f.model ORDER BY 1;
-- batches of 8 in buffers of 32: each step gets its own rows' weights
SELECT pgdl.fit('rw_w', 'rw_mlp', ('{' || :'base' || ', "batch_size": 8}')::jsonb, 2) > 0 AS trained_in_smaller_batches;
-- with class weights: both multiply
SELECT pgdl.fit('rw_w', 'rw_mlp', ('{' || :'base' || ', "class_weight": "balanced"}')::jsonb, 2) > 0 AS trained_with_class_weights;
SELECT pgdl.fit('rw_reg', 'rw_lin', '{"lr": 0.05, "batch_size": 16, "seed": 3}', 3) > 0 AS trained_regression;

-- fit_multiple's workers read the weights too: the same bytes as pgdl.fit
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'rw_set', a.id, ('{' || :'base' || '}')::jsonb FROM pgdl.architectures a WHERE a.name = 'rw_mlp';
CREATE TABLE rw_lb AS SELECT * FROM pgdl.fit_multiple('rw_w', 'rw_set', 4, workers => 1);
SELECT m.weights = (SELECT m2.weights FROM rw_fits f JOIN pgdl.models m2 ON m2.id = f.model WHERE f.packed = 'rw_w')
       AS fit_multiple_same_as_fit
  FROM rw_lb l JOIN pgdl.models m ON m.id = l.model;

-- a NULL weight is skipped with nulls => 'skip'
UPDATE rw_rows SET w = NULL WHERE i = 7;
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_skip', buffer_rows => 32, nulls => 'skip', weight => 'w') > 0 AS packed;
SELECT sum(n) AS rows_packed FROM rw_skip;

-- refusals: each names the column and the row
\set VERBOSITY default
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_bad', weight => 'w');
UPDATE rw_rows SET w = -1 WHERE i = 7;
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_bad', weight => 'w');
UPDATE rw_rows SET w = 'NaN' WHERE i = 7;
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_bad', weight => 'w');
UPDATE rw_rows SET w = 1e39 WHERE i = 7;
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_bad', weight => 'w');
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_bad', weight => 'zero');
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_bad', weight => 't');
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_bad', weight => 'nope');
SELECT pgdl.pack('rw_rows', 'x', 'label', 'rw_bad', weight => 'w, one');
SELECT to_regclass('rw_bad') IS NULL AS nothing_created;

-- forged packed rows and catalog rows are errors, not crashes
UPDATE rw_w SET w = w[1:2] WHERE buffer_id = 1;
SELECT pgdl.fit('rw_w', 'rw_mlp', '{}', 1);
UPDATE rw_w SET w = array_fill(-1::real, ARRAY[n]) WHERE buffer_id = 1;
SELECT pgdl.fit('rw_w', 'rw_mlp', '{}', 1);
UPDATE rw_w SET w = array_fill('NaN'::real, ARRAY[n]) WHERE buffer_id = 1;
SELECT pgdl.fit('rw_w', 'rw_mlp', '{}', 1);
UPDATE pgdl.datasets SET weighted = true WHERE packed = 'rw_plain'::regclass;
SELECT pgdl.fit('rw_plain', 'rw_mlp', '{}', 1);
UPDATE pgdl.datasets SET weighted = false WHERE packed = 'rw_plain'::regclass;
-- the cluster copies x and y only
SELECT pgdl.distribute('rw_one', ARRAY['nowhere']);
SELECT pgdl.add_node('rw_one', 'nowhere');
\set VERBOSITY terse

-- what this test added to the catalog goes
DELETE FROM pgdl.models WHERE run > :rw_first_run;
DELETE FROM pgdl.runs WHERE id > :rw_first_run;
DELETE FROM pgdl.configs WHERE set_name = 'rw_set';
DELETE FROM pgdl.architectures WHERE name IN ('rw_mlp', 'rw_lin');
DROP TABLE rw_rows, rw_plain, rw_w, rw_one, rw_reg, rw_skip, rw_fits, rw_lb;
