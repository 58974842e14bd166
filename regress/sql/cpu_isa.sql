-- pgdl.cpu_isa: the instruction set of pgdl's own CPU kernels (2x2 max pooling, col2im), capped by
-- the setting.  A CNN trained on the baseline kernels and on the CPU's best gives the same bytes (every
-- variant computes the same values), run after run; runs and models record the ISA and BLAS kernels;
-- fit_multiple's workers take the leader's setting; a resume on other kernels says so.
SET client_min_messages = warning;
\set VERBOSITY terse
SELECT coalesce(max(id), 0) AS ci_first_run FROM pgdl.runs \gset

-- the values: auto and the three ISAs; others refused; an ISA above the CPU's best refused
SELECT pgdl.version() IS NOT NULL AS loaded;	-- the setting is defined when pgdl loads
SHOW pgdl.cpu_isa;
SET pgdl.cpu_isa = 'sse9';
SET pgdl.cpu_isa = '';
SELECT pgdl.cpu_info()->>'setting' AS setting, pgdl.cpu_info()->>'isa' = pgdl.cpu_info()->>'cpu' AS auto_is_the_cpus,
       pgdl.cpu_info()->>'cpu' IN ('baseline', 'avx2', 'avx512') AS cpu_known;
CREATE FUNCTION pg_temp.try_isa(v text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('pgdl.cpu_isa', v, true);
	RETURN 'accepted';
EXCEPTION WHEN invalid_parameter_value THEN
	RETURN 'refused';
END $$;
SELECT v, pg_temp.try_isa(v) = CASE WHEN array_position('{baseline,avx2,avx512}'::text[], v)
         <= array_position('{baseline,avx2,avx512}'::text[], pgdl.cpu_info()->>'cpu') THEN 'accepted' ELSE 'refused' END
       AS as_the_cpu_allows
  FROM unnest('{baseline,avx2,avx512}'::text[]) v;
SET pgdl.cpu_isa = 'baseline';
SELECT pgdl.cpu_info()->>'isa' AS isa, pgdl.cpu_info()->>'setting' AS setting;
RESET pgdl.cpu_isa;

-- 12x12 images; the class is the brighter half (or neither)
CREATE TABLE ci_rows AS
SELECT i, array_agg(v ORDER BY p) AS x,
       (CASE WHEN sum(v) FILTER (WHERE p % 12 < 6) > sum(v) FILTER (WHERE p % 12 >= 6) + 2 THEN 0
             WHEN sum(v) FILTER (WHERE p % 12 >= 6) > sum(v) FILTER (WHERE p % 12 < 6) + 2 THEN 1 ELSE 2 END) AS label
  FROM generate_series(1, 64) i, generate_series(0, 143) p,
       LATERAL (SELECT ((abs(sin(i * 37 + p * 11)) * 1000)::numeric % 1)::real AS v) s
 GROUP BY i;
SELECT pgdl.pack('ci_rows', 'x', 'label', 'ci_packed', buffer_rows => 16, partitions => 2) > 0 AS packed;
-- "same" 3x3 convolutions (col2im's per-ISA path) and 2x2 max pooling (pooling's)
SELECT pgdl.add_architecture('ci_cnn', '{"input": [1, 12, 12], "layers": [
  {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "conv2d", "filters": 6, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "flatten"}, {"type": "dense", "units": 3}]}') > 0 AS stored;
\set cfg '{"optimizer": "adam", "lr": 0.01, "batch_size": 16, "seed": 5}'
SET pgdl.cpu_isa = 'baseline';
SELECT pgdl.fit('ci_packed', 'ci_cnn', :'cfg', 2) AS base_a \gset
SELECT pgdl.fit('ci_packed', 'ci_cnn', :'cfg', 2) AS base_b \gset
RESET pgdl.cpu_isa;
SELECT pgdl.fit('ci_packed', 'ci_cnn', :'cfg', 2) AS auto_a \gset
SELECT pgdl.fit('ci_packed', 'ci_cnn', :'cfg', 2) AS auto_b \gset
SELECT a.weights = b.weights AS baseline_same_bytes, c.weights = d.weights AS auto_same_bytes,
       abs((a.metrics->>'train_loss')::float8 - (c.metrics->>'train_loss')::float8) < 1e-5 AS loss_within_tolerance,
       a.weights = c.weights AS baseline_bytes_are_autos
  FROM pgdl.models a, pgdl.models b, pgdl.models c, pgdl.models d
 WHERE a.id = :base_a AND b.id = :base_b AND c.id = :auto_a AND d.id = :auto_b;

-- the run and its model record the kernels: the setting, the ISA it gave, OpenBLAS's kernels
SELECT m.id = :base_a AS baseline, r.engine->>'setting' AS setting,
       r.engine->>'isa' = CASE WHEN m.id = :base_a THEN 'baseline' ELSE pgdl.cpu_info()->>'cpu' END AS isa_recorded,
       r.engine->>'blas_core' = pgdl.cpu_info()->>'blas_core' AS blas_core_recorded, m.engine = r.engine AS model_has_runs
  FROM pgdl.models m JOIN pgdl.runs r ON r.id = m.run WHERE m.id IN (:base_a, :auto_a) ORDER BY 1;

-- fit_multiple: its workers take the leader's setting, and record it; the bytes are pgdl.fit's
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'ci_set', a.id, :'cfg'::jsonb FROM pgdl.architectures a WHERE a.name = 'ci_cnn';
SET pgdl.cpu_isa = 'baseline';
CREATE TABLE ci_lb AS SELECT * FROM pgdl.fit_multiple('ci_packed', 'ci_set', 2, workers => 2);
SELECT DISTINCT m.run AS ci_run FROM ci_lb l JOIN pgdl.models m ON m.id = l.model \gset
SELECT r.engine->>'isa' AS isa, r.engine->>'setting' AS setting, m.engine = r.engine AS model_has_runs,
       m.weights = f.weights AS same_as_fit
  FROM ci_lb l JOIN pgdl.models m ON m.id = l.model JOIN pgdl.runs r ON r.id = m.run, pgdl.models f
 WHERE f.id = :base_a;

-- a resume on kernels other than the run's began on: a WARNING, and the run records both
CREATE TABLE ci_lb1 AS SELECT * FROM pgdl.fit_multiple('ci_packed', 'ci_set', 1, workers => 1);
SELECT DISTINCT m.run AS ci_run1 FROM ci_lb1 l JOIN pgdl.models m ON m.id = l.model \gset
UPDATE pgdl.runs SET status = 'running', epochs = 2, engine = jsonb_set(engine, '{isa}', '"forged"') WHERE id = :ci_run1;
CREATE TABLE ci_lb2 AS SELECT * FROM pgdl.resume(:ci_run1);
SELECT engine->>'isa' AS began_on, engine->'resumed_on'->>'isa' AS resumed_on FROM pgdl.runs WHERE id = :ci_run1;
SELECT m.weights = f.weights AS resumed_same_as_fit
  FROM ci_lb2 l JOIN pgdl.models m ON m.id = l.model, pgdl.models f WHERE f.id = :base_a;
RESET pgdl.cpu_isa;

DELETE FROM pgdl.models WHERE run > :ci_first_run;
DELETE FROM pgdl.runs WHERE id > :ci_first_run;
DELETE FROM pgdl.configs WHERE set_name = 'ci_set';
DELETE FROM pgdl.architectures WHERE name = 'ci_cnn';
DELETE FROM pgdl.datasets WHERE packed = 'ci_packed'::regclass;
DROP TABLE ci_lb, ci_lb1, ci_lb2, ci_rows, ci_packed;
SELECT (SELECT count(*) FROM pgdl.runs WHERE id > :ci_first_run) AS runs_left,
       (SELECT count(*) FROM pgdl.models WHERE run > :ci_first_run) AS models_left;
