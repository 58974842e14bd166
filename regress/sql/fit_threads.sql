-- pgdl.fit with "threads": one configuration trained on several cores, data
-- parallelism inside the step (docs/reference/training.md).  The same bytes for
-- the same thread count; "threads": 1 is the default's bytes; close to them with 2.
SET client_min_messages = warning;
-- (what this test adds to the catalog is removed at its end: the tests after it count runs)
SELECT coalesce(max(id), 0) AS ft_first_run FROM pgdl.runs \gset
-- this server's cores do not matter to the test
SET pgdl.max_fit_threads = 4;

CREATE TABLE ft_rows AS
SELECT i, ARRAY[sin(i), cos(i), sin(2 * i), cos(3 * i), sin(5 * i), cos(7 * i)]::real[] AS x,
       (CASE WHEN sin(i) > 0.3 THEN 0 WHEN cos(i) > 0 THEN 1 ELSE 2 END) AS label
  FROM generate_series(1, 150) i;
SELECT pgdl.pack('ft_rows', 'x', 'label', 'ft_packed', buffer_rows => 50, partitions => 2) > 0 AS packed;
-- dense, batchnorm (on the whole batch, between the threads' runs), dropout (its mask does not depend on the split)
CREATE TABLE ft_spec AS SELECT '{"input": [6], "layers": [{"type": "dense", "units": 16}, {"type": "batchnorm"},
  {"type": "relu"}, {"type": "dropout", "rate": 0.25}, {"type": "dense", "units": 3}]}'::jsonb AS spec;

CREATE TABLE ft_fits (label text, model bigint);
INSERT INTO ft_fits
SELECT 'threads 2, first', pgdl.fit('ft_packed', spec, '{"lr": 0.05, "momentum": 0.9, "batch_size": 25, "threads": 2}', 3) FROM ft_spec;
INSERT INTO ft_fits
SELECT 'threads 2, again', pgdl.fit('ft_packed', spec, '{"lr": 0.05, "momentum": 0.9, "batch_size": 25, "threads": 2}', 3) FROM ft_spec;
INSERT INTO ft_fits
SELECT 'threads 3', pgdl.fit('ft_packed', spec, '{"lr": 0.05, "momentum": 0.9, "batch_size": 25, "threads": 3}', 3) FROM ft_spec;
INSERT INTO ft_fits
SELECT 'threads 1', pgdl.fit('ft_packed', spec, '{"lr": 0.05, "momentum": 0.9, "batch_size": 25, "threads": 1}', 3) FROM ft_spec;
INSERT INTO ft_fits
SELECT 'default', pgdl.fit('ft_packed', spec, '{"lr": 0.05, "momentum": 0.9, "batch_size": 25}', 3) FROM ft_spec;

-- the configuration records the thread count when it is more than one: it is part of what gives the bytes
SELECT f.label, m.config->'threads' AS threads FROM ft_fits f JOIN pgdl.models m ON m.id = f.model ORDER BY f.label;
SELECT (SELECT weights FROM pgdl.models WHERE id = a.model) = (SELECT weights FROM pgdl.models WHERE id = b.model) AS same_bytes,
       a.label, b.label
  FROM ft_fits a, ft_fits b
 WHERE (a.label, b.label) IN (('threads 2, first', 'threads 2, again'), ('threads 1', 'default'))
 ORDER BY 2;
-- more threads sum the shards' gradients in another order: within rounding after 18 steps
WITH w AS (
  SELECT f.label, l.layer, l.name, v.i, v.value
    FROM ft_fits f, pgdl.model_weights(f.model) l, unnest(l."values") WITH ORDINALITY v(value, i))
SELECT t.label, max(abs(t.value - d.value)) < 1e-3 AS close_to_one_thread, count(*) AS weights
  FROM w t JOIN w d ON d.label = 'default' AND (d.layer, d.name, d.i) = (t.layer, t.name, t.i)
 WHERE t.label IN ('threads 2, first', 'threads 3')
 GROUP BY t.label ORDER BY t.label;
SELECT f.label, (m.metrics->>'train_loss')::float8 > 0 AS trained
  FROM ft_fits f JOIN pgdl.models m ON m.id = f.model WHERE f.label = 'threads 3';

-- hostile values: clear errors naming the key
SELECT pgdl.fit('ft_packed', spec, '{"threads": 0}', 1) FROM ft_spec;
SELECT pgdl.fit('ft_packed', spec, '{"threads": -1}', 1) FROM ft_spec;
SELECT pgdl.fit('ft_packed', spec, '{"threads": 1000}', 1) FROM ft_spec;
SELECT pgdl.fit('ft_packed', spec, '{"threads": "x"}', 1) FROM ft_spec;
SELECT pgdl.fit('ft_packed', spec, '{"threads": null}', 1) FROM ft_spec;
SELECT pgdl.fit('ft_packed', spec, '{"threads": 2.5}', 1) FROM ft_spec;
SELECT pgdl.fit('ft_packed', spec, '{"threads": [2]}', 1) FROM ft_spec;
-- more than the server allows
SET pgdl.max_fit_threads = 2;
SELECT pgdl.fit('ft_packed', spec, '{"threads": 3}', 1) FROM ft_spec;
RESET pgdl.max_fit_threads;
SET pgdl.max_fit_threads = 0;
SET pgdl.max_fit_threads = 65;
SET pgdl.max_fit_threads = 4;
-- each thread beyond the first has its own gradients: within pgdl.max_model_memory (800kB: 1 and 2 threads fit, 3 do not)
SET pgdl.max_model_memory = '800kB';
CREATE TABLE ft_wide AS SELECT '{"input": [6], "layers": [{"type": "dense", "units": 2000}, {"type": "relu"},
  {"type": "dense", "units": 3}]}'::jsonb AS spec;
SELECT pgdl.fit('ft_packed', spec, '{"momentum": 0.9, "batch_size": 25, "threads": 2}', 1) > 0 AS fits FROM ft_wide;
SELECT pgdl.fit('ft_packed', spec, '{"momentum": 0.9, "batch_size": 25, "threads": 3}', 1) FROM ft_wide;
RESET pgdl.max_model_memory;
-- BLAS threads on top of a fit's threads would multiply
SET pgdl.blas_threads = 2;
SELECT pgdl.fit('ft_packed', spec, '{"threads": 2}', 1) FROM ft_spec;
RESET pgdl.blas_threads;
-- only superusers raise the limit
CREATE ROLE ft_user;
SET ROLE ft_user;
SET pgdl.max_fit_threads = 64;
RESET ROLE;
DROP ROLE ft_user;
-- fit_multiple's workers train on one core each: "threads" is refused there
SELECT pgdl.add_architecture('ft_mlp', spec) > 0 AS added FROM ft_spec;
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'ft_set', id, '{"lr": 0.05, "batch_size": 25, "threads": 2}' FROM pgdl.architectures WHERE name = 'ft_mlp';
SELECT config->'threads' AS stored_threads FROM pgdl.configs WHERE set_name = 'ft_set';
SELECT * FROM pgdl.fit_multiple('ft_packed', 'ft_set', 1, workers => 1);

-- leave nothing behind
DELETE FROM pgdl.models WHERE run > :ft_first_run;
DELETE FROM pgdl.runs WHERE id > :ft_first_run;
DELETE FROM pgdl.configs WHERE set_name = 'ft_set';
DELETE FROM pgdl.architectures WHERE name = 'ft_mlp';
DROP TABLE ft_rows, ft_packed, ft_spec, ft_fits, ft_wide;
SELECT (SELECT count(*) FROM pgdl.runs WHERE id > :ft_first_run) AS runs,
       (SELECT count(*) FROM pgdl.datasets WHERE packed::text LIKE 'ft\_%') AS datasets;
