-- The extension's life beyond one call: checkpoints of finished runs (pgdl.keep_checkpoints,
-- pgdl.cleanup_checkpoints), runs in flight (pgdl.run_in_progress; the in-flight case and pgdl.resume's
-- "in progress": regress/t/007), rows that name rows of their own table, and what a restore relies on.
-- (Upgrade, DROP EXTENSION's notice: regress/t/005; pg_dump and restore: regress/t/006.)
SET client_min_messages = warning;
\set SHOW_CONTEXT never

-- an error with its numbers (ids, which depend on what ran before) replaced, or 'ok'
CREATE FUNCTION lc_try(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END $$;

CREATE ROLE regress_lc_alice;
CREATE ROLE regress_lc_bob;
CREATE ROLE regress_lc_admin IN ROLE pgdl_admin;
GRANT CREATE ON SCHEMA public TO regress_lc_alice, regress_lc_bob;

CREATE TABLE lc_rows AS
SELECT i, ARRAY[sin(i), cos(i), sin(i * 0.3), cos(i * 0.7)]::real[] AS x, (sin(i) + cos(i * 0.7) > 0)::int AS label
  FROM generate_series(1, 256) i;
GRANT SELECT ON lc_rows TO regress_lc_alice, regress_lc_bob;

-- ---------------------------------------------------------------------------
-- pgdl.keep_checkpoints: what a finished run keeps of its per-epoch checkpoints
-- ---------------------------------------------------------------------------
SET ROLE regress_lc_alice;
SELECT pgdl.pack('lc_rows', 'x', 'label', 'lc_packed', buffer_rows => 32, partitions => 2, seed => 3) > 0 AS packed;
SHOW pgdl.keep_checkpoints;
SET pgdl.keep_checkpoints = -2;
SET pgdl.keep_checkpoints = 'all';
SHOW pgdl.keep_checkpoints;
SELECT pgdl.add_architecture('lc_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 8},
  {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
SELECT pgdl.grid_search('lc_set', '{lc_mlp}', '{"lr": [0.05, 0.1], "seed": 5}') AS added;

-- the epochs of each configuration's checkpoints that run r (default: this role's latest) kept
CREATE FUNCTION lc_kept(r bigint DEFAULT NULL) RETURNS TABLE (config_rank bigint, epochs text) LANGUAGE sql AS $$
SELECT dense_rank() OVER (ORDER BY c.config), string_agg(c.epoch::text, ',' ORDER BY c.epoch)
  FROM pgdl.checkpoints c WHERE c.run = coalesce(r, (SELECT max(id) FROM pgdl.runs))
 GROUP BY c.config ORDER BY c.config
$$;

-- the default: the last checkpoint of each model
SELECT count(*) AS trained FROM pgdl.fit_multiple('lc_packed', 'lc_set', 3, workers => 1);
SELECT * FROM lc_kept();
-- and its last checkpoint is the stored model
SELECT count(*) AS models, bool_and(c.weights = m.weights) AS last_checkpoint_is_the_model
  FROM pgdl.checkpoints c
  JOIN pgdl.run_metrics r ON r.run = c.run AND r.config = c.config AND r.epoch = c.epoch
  JOIN pgdl.models m ON m.id = r.model
 WHERE c.run = (SELECT max(id) FROM pgdl.runs);
SET pgdl.keep_checkpoints = 2;
SELECT count(*) AS trained FROM pgdl.fit_multiple('lc_packed', 'lc_set', 3, workers => 1);
SELECT * FROM lc_kept();
SET pgdl.keep_checkpoints = 0;
SELECT count(*) AS trained FROM pgdl.fit_multiple('lc_packed', 'lc_set', 3, workers => 1);
SELECT count(*) AS kept FROM lc_kept();
SET pgdl.keep_checkpoints = -1;
SELECT count(*) AS trained FROM pgdl.fit_multiple('lc_packed', 'lc_set', 3, workers => 1);
SELECT * FROM lc_kept();
SELECT max(id) AS all_run FROM pgdl.runs \gset
SELECT count(*) AS trained FROM pgdl.fit_multiple('lc_packed', 'lc_set', 3, workers => 1);
SELECT max(id) AS cancelled_run FROM pgdl.runs \gset
RESET pgdl.keep_checkpoints;

-- ---------------------------------------------------------------------------
-- pgdl.cleanup_checkpoints(keep, run)
-- ---------------------------------------------------------------------------
-- one run: all but the last of each model; again, nothing
SELECT pgdl.cleanup_checkpoints(1, :all_run) AS pruned;
SELECT pgdl.cleanup_checkpoints(1, :all_run) AS pruned_again;
SELECT * FROM lc_kept(:all_run);
-- a run that did not finish keeps its last checkpoints, even with keep 0: pgdl.resume goes on from them
UPDATE pgdl.runs SET status = 'cancelled', epochs = 4 WHERE id = :cancelled_run;
SELECT pgdl.cleanup_checkpoints(0, :cancelled_run) AS pruned;
SELECT * FROM lc_kept(:cancelled_run);
SELECT count(*) AS resumed, bool_and(epochs = 4) AS to_epoch_4 FROM pgdl.resume(:cancelled_run);
SELECT status FROM pgdl.runs WHERE id = :cancelled_run;
-- and once finished, keep 0 takes them all; keep -1 takes none
SELECT pgdl.cleanup_checkpoints(-1, :cancelled_run) AS pruned_none;
SELECT pgdl.cleanup_checkpoints(0, :cancelled_run) AS pruned;
-- every run of hers (keep: pgdl.keep_checkpoints, 1)
SELECT pgdl.cleanup_checkpoints() AS pruned;
SELECT count(*) AS checkpoints, count(DISTINCT (run, config)) AS models FROM pgdl.checkpoints;
-- errors
SELECT pgdl.cleanup_checkpoints(-2);
SELECT pgdl.cleanup_checkpoints(1, 999999999);
SELECT pgdl.cleanup_checkpoints(-1, 999999999);
SELECT pgdl.cleanup_checkpoints(NULL, NULL) AS pruned_with_nulls;

-- ---------------------------------------------------------------------------
-- pgdl.run_in_progress(run)
-- ---------------------------------------------------------------------------
SELECT pgdl.run_in_progress(:all_run) AS finished_run_in_progress;
SELECT pgdl.run_in_progress(NULL) IS NULL AS null_run;
SELECT pgdl.run_in_progress(999999999);
-- a run that says "running" but whose leader is gone (a crash) is not in progress: it can be resumed
UPDATE pgdl.runs SET status = 'running' WHERE id = :all_run;
SELECT pgdl.run_in_progress(:all_run) AS crashed_run_in_progress;
UPDATE pgdl.runs SET status = 'finished' WHERE id = :all_run;
RESET ROLE;

-- ---------------------------------------------------------------------------
-- Owners: bob prunes only his own, sees no run of hers; pgdl_admin prunes everyone's
-- ---------------------------------------------------------------------------
SET pgdl.keep_checkpoints = -1;
SET ROLE regress_lc_alice;
SELECT count(*) AS trained FROM pgdl.fit_multiple('lc_packed', 'lc_set', 2, workers => 1);
SELECT max(id) AS alice_run FROM pgdl.runs \gset
RESET ROLE;
SET ROLE regress_lc_bob;
SELECT lc_try(format('SELECT pgdl.cleanup_checkpoints(0, %s)', :alice_run)) AS bob_prunes_her_run;
SELECT lc_try(format('SELECT pgdl.run_in_progress(%s)', :alice_run)) AS bob_asks_of_her_run;
SELECT pgdl.cleanup_checkpoints(0) AS bob_pruned;
RESET ROLE;
SELECT count(*) AS her_checkpoints FROM pgdl.checkpoints WHERE run = :alice_run;
SET ROLE regress_lc_admin;
SELECT pgdl.cleanup_checkpoints(1) AS admin_pruned;
RESET ROLE;
SELECT count(*) AS her_checkpoints FROM pgdl.checkpoints WHERE run = :alice_run;
RESET pgdl.keep_checkpoints;

-- ---------------------------------------------------------------------------
-- A row that names a row of its own table: deleting the named row clears the name, in every role's rows
-- ---------------------------------------------------------------------------
SELECT m.id AS alice_model, m.spec AS alice_spec FROM pgdl.models m WHERE m.run = :alice_run ORDER BY m.id LIMIT 1 \gset
INSERT INTO pgdl.models (owner, name, spec, weights, parent)
SELECT 'regress_lc_bob', 'lc_child', spec, weights, id FROM pgdl.models WHERE id = :alice_model;
SET ROLE regress_lc_alice;
SELECT pgdl.delete_rows('pgdl.models', ARRAY[:alice_model]::bigint[]) AS deleted;
RESET ROLE;
SELECT owner, parent FROM pgdl.models WHERE name = 'lc_child';
SET ROLE regress_lc_alice;
GRANT SELECT ON lc_packed TO regress_lc_bob;
SET ROLE regress_lc_bob;
SELECT pgdl.fit('lc_packed', '{"input": [4], "layers": [{"type": "dense", "units": 2}]}'::jsonb, '{"seed": 1}', 1,
                name => 'lc_bobs') > 0 AS bob_trained;
SET ROLE regress_lc_alice;
SELECT pgdl.pack('lc_rows', 'x', 'label', 'lc_valid', partitions => 1, reference => 'lc_packed') > 0 AS packed;
SELECT r.reference = d.id AS refers FROM pgdl.datasets r, pgdl.datasets d
 WHERE r.packed = 'lc_valid'::regclass AND d.packed = 'lc_packed'::regclass;
DROP TABLE lc_packed;
SELECT reference FROM pgdl.datasets WHERE packed = 'lc_valid'::regclass;
RESET ROLE;
-- the models trained on a dropped packed table lose its preprocessing with its dataset row, every role's:
-- each says which table went (origin), and refuses to predict rather than take rows as given, as lc_child
-- (a copy of weights that never had a dataset) does
SELECT owner, count(*) AS models, bool_and(dataset IS NULL) AS no_dataset,
       min(origin->'dataset_dropped'->>'packed') AS dropped
  FROM pgdl.models WHERE origin->'dataset_dropped'->>'packed' = 'public.lc_packed' GROUP BY owner ORDER BY owner;
SET ROLE regress_lc_bob;
SELECT lc_try($$SELECT pgdl.predict('lc_bobs', ARRAY[0.1, 0.2, 0.3, 0.4])$$) AS bobs_model;
SELECT lc_try($$SELECT * FROM pgdl.metrics('lc_bobs', 'lc_rows', 'x', 'label')$$) AS bobs_metrics;
SELECT lc_try($$SELECT pgdl.export_onnx('lc_bobs')$$) AS bobs_export;
SELECT array_length(pgdl.predict('lc_child', ARRAY[0.1, 0.2, 0.3, 0.4]), 1) AS without_a_dataset;
-- served under a name, it cannot be scored against a refit: the name keeps it (deploy_if_better's notice says why)
SELECT pgdl.deploy('lc_bob_dep', 'lc_bobs') > 0 AS deployed;
SELECT pgdl.pack('lc_rows', 'x', 'label', 'lc_bob_valid', partitions => 1) > 0 AS packed;
SELECT pgdl.fit('lc_bob_valid', '{"input": [4], "layers": [{"type": "dense", "units": 2}]}'::jsonb, '{"seed": 1}', 1,
                name => 'lc_bob_new') > 0 AS trained;
SELECT deployed, previous = pgdl.model_id('lc_bobs') AS kept_the_lost_model, score IS NULL AND previous_score IS NULL AS not_scored
  FROM pgdl.deploy_if_better('lc_bob_dep', pgdl.model_id('lc_bob_new'), 'lc_bob_valid');
SELECT pgdl.drop_deployment('lc_bob_dep');
DROP TABLE lc_bob_valid;
RESET ROLE;

-- ---------------------------------------------------------------------------
-- What a restore relies on
-- ---------------------------------------------------------------------------
-- pg_dump's scripts run with check_function_bodies off: a configuration's base model is then not looked
-- up (pgdl.configs may be restored before pgdl.models); pgdl.fit_multiple looks it up when it trains
SELECT lc_try($$INSERT INTO pgdl.configs (set_name, config) VALUES ('lc_restored', '{"base_model": 999999999, "freeze": 1}')$$)
  AS checked;
SET check_function_bodies = off;
SELECT lc_try($$INSERT INTO pgdl.configs (set_name, config) VALUES ('lc_restored', '{"base_model": 999999999, "freeze": 1}')$$)
  AS restored;
RESET check_function_bodies;
SELECT lc_try($$SELECT * FROM pgdl.fit_multiple('lc_valid', 'lc_restored', 1, workers => 1)$$) AS trained;
DELETE FROM pgdl.configs WHERE set_name = 'lc_restored';
-- a model a restore writes with its owner keeps it; one written with the writer as owner (the default)
-- is the run's owner's (regress/sql/security.sql: a superuser's resume)
INSERT INTO pgdl.models (owner, name, spec, weights, run)
SELECT 'regress_lc_bob', 'lc_given', spec, weights, :alice_run FROM pgdl.models WHERE name = 'lc_child';
INSERT INTO pgdl.models (name, spec, weights, run)
SELECT 'lc_written', spec, weights, :alice_run FROM pgdl.models WHERE name = 'lc_child';
SELECT name, owner FROM pgdl.models WHERE name IN ('lc_given', 'lc_written') ORDER BY name;

-- ---------------------------------------------------------------------------
-- Clean up
-- ---------------------------------------------------------------------------
DROP TABLE lc_valid, lc_rows CASCADE;
DROP FUNCTION lc_try(text);
DROP FUNCTION lc_kept(bigint);
DELETE FROM pgdl.models WHERE pg_get_userbyid(owner) LIKE 'regress\_lc%';
DELETE FROM pgdl.runs WHERE pg_get_userbyid(owner) LIKE 'regress\_lc%';
DELETE FROM pgdl.configs WHERE pg_get_userbyid(owner) LIKE 'regress\_lc%';
DELETE FROM pgdl.architectures WHERE pg_get_userbyid(owner) LIKE 'regress\_lc%';
SELECT count(*) AS rows_left FROM (
  SELECT owner FROM pgdl.datasets UNION ALL SELECT owner FROM pgdl.architectures UNION ALL
  SELECT owner FROM pgdl.models UNION ALL SELECT owner FROM pgdl.runs UNION ALL
  SELECT owner FROM pgdl.run_metrics UNION ALL SELECT owner FROM pgdl.configs UNION ALL
  SELECT owner FROM pgdl.checkpoints UNION ALL SELECT owner FROM pgdl.feature_cache) o
 WHERE pg_get_userbyid(owner) LIKE 'regress\_lc%';
REVOKE CREATE ON SCHEMA public FROM regress_lc_alice, regress_lc_bob;
DROP ROLE regress_lc_alice, regress_lc_bob, regress_lc_admin;
