-- Per-row inference at scale: the functions are PARALLEL SAFE, so a parallel
-- scan spreads them over workers, with the same results as a serial scan; and
-- a stored model passed as its blob by a subquery is read once per statement
-- (model_io.c knows the blob again by its TOAST pointer), and never confused
-- with another blob, or with the same row's blob once it has changed.

-- the per-row functions may run in parallel workers; the ones that read a table run in the leader
SELECT p.oid::regprocedure AS function, p.proparallel
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'pgdl' AND p.proname IN ('predict', 'predict_class', 'features', 'predict_batch_rows')
 ORDER BY p.proname, p.oid::regprocedure::text;

-- a 4-128-3 network with weights from a formula (no training needed to compare two plans)
\set par_spec '{"input": [4], "layers": [{"type": "dense", "units": 128}, {"type": "relu"}, {"type": "dense", "units": 3}], "loss": "cross_entropy"}'
INSERT INTO pgdl.models (name, spec, weights)
SELECT 'predict_parallel_model', :'par_spec',
       pgdl.model_from_weights(:'par_spec', ARRAY(SELECT sin(i * i * 0.013)::real FROM generate_series(1, 4*128+128 + 128*3+3) i))
RETURNING id AS par_id \gset
CREATE TABLE par_rows AS
SELECT i AS id, ARRAY[sin(i), cos(i * 0.5), sin(i * 0.25) * 2, cos(i * 0.125)]::real[] AS x
  FROM generate_series(1, 20000) i;
ANALYZE par_rows;

-- serially
SET max_parallel_workers_per_gather = 0;
CREATE TABLE par_serial AS
SELECT id, pgdl.predict_class('predict_parallel_model', x) AS by_name,
       pgdl.predict_class(:par_id::bigint, x) AS by_id,
       pgdl.predict_class((SELECT weights FROM pgdl.models WHERE name = 'predict_parallel_model'), x) AS by_blob,
       pgdl.predict('predict_parallel_model', x) AS probabilities
  FROM par_rows;
SELECT count(DISTINCT by_name) AS classes_predicted FROM par_serial;

-- with two workers, and the leader only gathering: every prediction is made in a worker
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
SET jit = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT count(pgdl.predict_class('predict_parallel_model', x)) FROM par_rows;
-- the same classes and the same probabilities, bit for bit, for every row and every form of the model,
-- computed in the workers (below the Gather)
\set cmp_query 'SELECT count(*) AS rows_compared, count(*) FILTER (WHERE pgdl.predict_class(''predict_parallel_model'', r.x) IS DISTINCT FROM s.by_name) AS by_name_differ, count(*) FILTER (WHERE pgdl.predict_class(' :par_id '::bigint, r.x) IS DISTINCT FROM s.by_id) AS by_id_differ, count(*) FILTER (WHERE pgdl.predict_class((SELECT weights FROM pgdl.models WHERE name = ''predict_parallel_model''), r.x) IS DISTINCT FROM s.by_blob) AS by_blob_differ, count(*) FILTER (WHERE pgdl.predict(''predict_parallel_model'', r.x) IS DISTINCT FROM s.probabilities) AS outputs_differ FROM par_rows r JOIN par_serial s USING (id)'
EXPLAIN (COSTS OFF) :cmp_query;
:cmp_query;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
RESET parallel_leader_participation;
RESET jit;

-- blobs kept out of line (4 kB each, STORAGE EXTERNAL: not compressed, a TOAST pointer in the row)
CREATE TABLE par_blobs (k integer, b bytea);
ALTER TABLE par_blobs ALTER COLUMN b SET STORAGE EXTERNAL;
INSERT INTO par_blobs
SELECT k, pgdl.model_from_weights(:'par_spec', ARRAY(SELECT sin(i * i * 0.013 * k)::real FROM generate_series(1, 4*128+128 + 128*3+3) i))
  FROM generate_series(1, 2) k;
SELECT pg_relation_size(reltoastrelid) > 0 AS toasted FROM pg_class WHERE oid = 'par_blobs'::regclass;
-- two toasted blobs taking turns at one call site, against copies of their bytes (not toasted)
SELECT count(*) AS rows_compared,
       count(*) FILTER (WHERE pgdl.predict(m.b, r.x) IS DISTINCT FROM pgdl.predict(m.b || ''::bytea, r.x)) AS differ,
       count(DISTINCT pgdl.predict(m.b, r.x)) > count(DISTINCT r.id) AS models_differ
  FROM (SELECT * FROM par_rows WHERE id <= 50) r CROSS JOIN par_blobs m;
-- one call site in one transaction, the row's blob changed in between: the new blob is used
CREATE TEMP TABLE par_seen (step integer, probabilities real[]);
SELECT set_config('pgdl_test.spec', :'par_spec', false) IS NOT NULL AS spec_set;
DO $$
DECLARE
	x real[] := '{0.5, -1, 2, 0.25}';
BEGIN
	FOR step IN 1..3 LOOP
		INSERT INTO par_seen SELECT step, pgdl.predict((SELECT b FROM par_blobs WHERE k = 1), x);
		UPDATE par_blobs SET b = (SELECT b FROM par_blobs WHERE k = 2) || ''::bytea WHERE k = 1 AND step = 1;
		UPDATE par_blobs SET b = pgdl.model_from_weights(current_setting('pgdl_test.spec')::jsonb,
		                         ARRAY(SELECT cos(i * 0.5)::real FROM generate_series(1, 4*128+128 + 128*3+3) i))
		 WHERE k = 1 AND step = 2;
	END LOOP;
END
$$;
SELECT s.step, s.probabilities = pgdl.predict(b.b || ''::bytea, '{0.5, -1, 2, 0.25}') AS same_as_k2,
       s.probabilities = pgdl.predict(pgdl.model_from_weights(:'par_spec',
                           ARRAY(SELECT sin(i * i * 0.013)::real FROM generate_series(1, 4*128+128 + 128*3+3) i)),
                           '{0.5, -1, 2, 0.25}') AS same_as_first
  FROM par_seen s, par_blobs b WHERE b.k = 2 ORDER BY s.step;
SELECT s.probabilities = pgdl.predict(b.b, '{0.5, -1, 2, 0.25}') AS last_is_current
  FROM par_seen s, par_blobs b WHERE b.k = 1 AND s.step = 3;

-- clean up
DELETE FROM pgdl.models WHERE id = :par_id;
DROP TABLE par_rows, par_serial, par_blobs, par_seen;
RESET pgdl_test.spec;
