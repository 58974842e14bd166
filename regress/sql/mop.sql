-- Model hopper parallelism: pgdl.fit_multiple with background workers, successive
-- halving, the leaderboard, errors.  (Cancel, crash and resume: regress/t/002.)
SET client_min_messages = warning;

CREATE TABLE mop_rows AS
SELECT i, ARRAY[a, b, c, d]::real[] AS x,
       CASE WHEN a + b > c + d THEN (CASE WHEN a > b THEN 0 ELSE 1 END)
            ELSE (CASE WHEN c > d THEN 2 ELSE 3 END) END AS label
  FROM generate_series(1, 512) i,
       LATERAL (SELECT (abs(sin(i * 12.9898)) * 43758.5453)::numeric % 1 AS a,
                       (abs(sin(i * 78.233)) * 43758.5453)::numeric % 1 AS b,
                       (abs(sin(i * 37.719)) * 43758.5453)::numeric % 1 AS c,
                       (abs(sin(i * 93.989)) * 43758.5453)::numeric % 1 AS d) r;
SELECT pgdl.pack('mop_rows', 'x', 'label', 'mop_packed', buffer_rows => 16, partitions => 4) > 0 AS packed;
SELECT pgdl.pack('mop_rows', 'x', 'label', 'mop_valid', buffer_rows => 64, partitions => 1,
                 reference => 'mop_packed') > 0 AS packed;
SELECT pgdl.add_architecture('mop_small', '{"input": [4], "layers": [{"type": "dense", "units": 4}]}') > 0 AS added;
SELECT pgdl.add_architecture('mop_wide', '{"input": [4], "layers": [{"type": "dense", "units": 32},
  {"type": "relu"}, {"type": "dense", "units": 4}]}') > 0 AS added;
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'mop_set', a.id, jsonb_build_object('optimizer', opt, 'lr', lr, 'batch_size', 8, 'seed', 5)
  FROM pgdl.architectures a, (VALUES ('sgd', 0.1), ('adam', 0.01)) o(opt, lr)
 WHERE a.name IN ('mop_small', 'mop_wide')
 ORDER BY a.name, opt;

-- one worker and two workers train the same models, byte for byte
CREATE TABLE mop_results AS
SELECT 1 AS workers, * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 3, 'mop_valid', workers => 1);
INSERT INTO mop_results
SELECT 2, * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 3, 'mop_valid', workers => 2);
SELECT workers, rank, architecture, config_json->>'optimizer' AS optimizer, epochs, stopped,
       validation_accuracy > 0.5 AS learned
  FROM mop_results ORDER BY workers, rank;
SELECT count(DISTINCT md5(m.weights)) AS distinct_models, count(*) AS models
  FROM mop_results r JOIN pgdl.models m ON m.id = r.model;
SELECT r1.architecture, r1.config_json->>'optimizer' AS optimizer, m1.weights = m2.weights AS same_bytes
  FROM mop_results r1 JOIN mop_results r2 ON r2.config = r1.config AND r2.workers = 2
  JOIN pgdl.models m1 ON m1.id = r1.model JOIN pgdl.models m2 ON m2.id = r2.model
 WHERE r1.workers = 1 ORDER BY r1.config;

-- and the same as pgdl.fit of each configuration alone
CREATE TABLE mop_fits AS
SELECT c.id AS config, pgdl.fit('mop_packed', a.name, c.config, 3) AS model
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture
 WHERE c.set_name = 'mop_set' ORDER BY c.id;
SELECT r.architecture, r.config_json->>'optimizer' AS optimizer, mf.weights = mm.weights AS fit_equals_fit_multiple
  FROM mop_fits f JOIN pgdl.models mf ON mf.id = f.model
  JOIN mop_results r ON r.config = f.config AND r.workers = 2 JOIN pgdl.models mm ON mm.id = r.model
 ORDER BY f.config;

-- the leaderboard is sorted by validation loss; metrics per model and epoch, and of the checkpoints of a
-- finished run the last of each model (pgdl.keep_checkpoints = 1)
SELECT bool_and(a.validation_loss <= b.validation_loss) AS sorted
  FROM mop_results a JOIN mop_results b ON a.workers = b.workers AND b.rank = a.rank + 1;
SELECT r.kind, r.status, r.config->>'strategy' AS strategy, r.config->>'workers' AS workers,
       (SELECT count(*) FROM pgdl.run_metrics WHERE run = r.id) AS metrics,
       (SELECT count(*) FROM pgdl.run_metrics WHERE run = r.id AND model IS NOT NULL) AS linked,
       (SELECT count(*) FROM pgdl.checkpoints WHERE run = r.id) AS checkpoints
  FROM pgdl.runs r WHERE r.kind = 'fit_multiple' ORDER BY r.id;
SELECT count(*) AS runs_in_flight FROM pgdl.progress;

-- successive halving (eta 2, 4 epochs): rungs after epochs 1 and 2
SELECT rank, epochs, stopped FROM pgdl.fit_multiple('mop_packed', 'mop_set', 4, 'mop_valid', workers => 2,
                                                    strategy => 'successive_halving', eta => 2) ORDER BY rank;
SELECT epoch, decision, count(*)
  FROM pgdl.run_metrics WHERE run = (SELECT max(id) FROM pgdl.runs) AND decision IS NOT NULL
 GROUP BY epoch, decision ORDER BY epoch, decision;

-- names: prefix || configuration id
CREATE TABLE mop_named AS
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, workers => 1, name_prefix => 'mop_');
SELECT count(*) AS named FROM mop_named f JOIN pgdl.models m ON m.id = f.model WHERE m.name = 'mop_' || f.config;

-- a model's metrics are its last epoch's, the numbers of pgdl.run_metrics, and say whether it was stopped
SELECT count(*) AS models,
       bool_and((m.metrics->>'train_loss')::float8 = r.train_loss
                AND (m.metrics->>'train_accuracy')::float8 = r.train_accuracy
                AND (m.metrics->>'validation_loss')::float8 = r.validation_loss
                AND (m.metrics->>'validation_accuracy')::float8 = r.validation_accuracy
                AND m.metrics->'stopped' = 'false' AND r.model = m.id) AS metrics_match
  FROM mop_results x JOIN pgdl.models m ON m.id = x.model
  JOIN pgdl.run_metrics r ON r.run = m.run AND r.config = x.config AND r.epoch = (m.metrics->>'epoch')::int;

-- quotes and backslashes in a name prefix or a set name are taken literally
CREATE TABLE mop_quoted AS
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, workers => 1, name_prefix => 'x", "set": "bob_set');
SELECT r.config->>'set' AS set, r.config->>'name_prefix' AS name_prefix, count(*) AS models
  FROM mop_quoted q JOIN pgdl.models m ON m.id = q.model JOIN pgdl.runs r ON r.id = m.run
 WHERE m.name = 'x", "set": "bob_set' || q.config GROUP BY 1, 2;
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'mop "quoted" \set', id, '{"lr": 0.1, "batch_size": 8}' FROM pgdl.architectures WHERE name = 'mop_small';
SELECT rank, epochs FROM pgdl.fit_multiple('mop_packed', 'mop "quoted" \set', 1, workers => 1, name_prefix => 'q\"');
SELECT r.config->>'set' AS set, r.config->>'name_prefix' AS name_prefix, m.name LIKE 'q\\"%' AS named
  FROM pgdl.runs r JOIN pgdl.models m ON m.run = r.id WHERE r.id = (SELECT max(id) FROM pgdl.runs);

-- more workers than partitions: one per partition, with a NOTICE (pgdl.max_workers, the server's
-- cap on pgdl workers, is the number of cores unless raised)
SET pgdl.max_workers = 8;
SET client_min_messages = notice;
SELECT count(*) FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, workers => 6);
SET client_min_messages = warning;
RESET pgdl.max_workers;

-- errors
SELECT * FROM pgdl.fit_multiple('mop_packed', 'no_such_set');
SELECT * FROM pgdl.fit_multiple('mop_rows', 'mop_set');
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 0);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, workers => 0);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, strategy => 'genetic');
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, strategy => 'hyperband', eta => 1);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, NULL, NULL, NULL);
-- NULL in any other argument: an error, or the default (validation, workers, name_prefix)
SELECT * FROM pgdl.fit_multiple(NULL, 'mop_set');
SELECT * FROM pgdl.fit_multiple('mop_packed', NULL);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', NULL);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, eta => NULL);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, feature_cache => NULL);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, priority => NULL);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, priority => 101);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, priority => -2147483648);
SELECT * FROM pgdl.explain_fit_multiple('mop_packed', NULL);
SELECT count(*) AS trained_with_defaults
  FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, NULL, NULL, name_prefix => NULL);
SELECT * FROM pgdl.resume(NULL);
SELECT * FROM pgdl.resume(-1, priority => NULL);
SELECT * FROM pgdl.resume(-1, priority => -101);
-- the priority orders only the caller's own queued jobs: alone, it trains as any job
SELECT count(*) AS trained_at_priority FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, workers => 1, priority => 100);
INSERT INTO pgdl.configs (set_name, architecture, config)
VALUES ('mop_bad', pgdl.add_architecture('mop_five', '{"input": [5], "layers": [{"type": "dense", "units": 4}]}'),
        '{"lr": 0.1}');
-- (terse: the error's context names the configuration by id)
\set VERBOSITY terse
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_bad');
\set VERBOSITY default
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1);
ROLLBACK;
SELECT * FROM pgdl.resume(-1);
-- (run ids depend on the tests before: shown as N)
DO $$
BEGIN
	PERFORM * FROM pgdl.resume((SELECT max(id) FROM pgdl.runs WHERE kind = 'fit_multiple'));
EXCEPTION WHEN OTHERS THEN
	RAISE WARNING '%', regexp_replace(SQLERRM, '[0-9]+', 'N');
END
$$;
DO $$
BEGIN
	PERFORM * FROM pgdl.resume((SELECT min(id) FROM pgdl.runs WHERE kind = 'fit'));
EXCEPTION WHEN OTHERS THEN
	RAISE WARNING '%', regexp_replace(SQLERRM, '[0-9]+', 'N');
END
$$;

-- A forged pgdl.runs row is a clear error, never a crash.  mop_try runs a
-- statement and says how it failed (ids, which depend on the tests before, as N).
CREATE FUNCTION mop_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	state text;
	msg text;
	detail text;
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
	RETURN state || ': ' || regexp_replace(msg, '[0-9]+', 'N', 'g') || coalesce(' -- ' || nullif(detail, ''), '');
END
$$;
INSERT INTO pgdl.runs (id, kind, dataset, config, epochs)
SELECT 900000 + k, 'fit_multiple', d.id, c::jsonb, CASE WHEN k = 14 THEN 0 ELSE 2 END
  FROM pgdl.datasets d, unnest(ARRAY[
         '{"set": 123}',
         '{"set": "mop_set", "eta": "x"}',
         '{"set": "mop_set", "workers": "x"}',
         '{"set": "mop_set", "strategy": 1}',
         '{"set": "mop_set", "name_prefix": 5}',
         '{"set": "mop_set", "feature_cache": true}',
         '{"set": "mop_set", "feature_cache": "always"}',
         '{"set": "mop_set", "strategy": "genetic"}',
         '{"set": "mop_set", "strategy": "hyperband", "eta": 1}',
         '{"set": "mop_set", "workers": 1e30}',
         '{"set": "mop_set", "workers": 1.5}',
         '{"strategy": "all"}',
         '[1, 2]',
         '{"set": "mop_set"}']) WITH ORDINALITY AS t(c, k)
 WHERE d.packed = 'mop_packed'::regclass;
SELECT id - 900000 AS forged, config, epochs, mop_try(format('SELECT * FROM pgdl.resume(%s)', id)) AS resume
  FROM pgdl.runs WHERE id > 900000 ORDER BY id;
DELETE FROM pgdl.runs WHERE id > 900000;

-- a checkpoint out of the run's epochs, or not a model of its configuration's network, is refused
CREATE TABLE mop_ck AS SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, workers => 1);
SELECT DISTINCT m.run AS ck_run FROM mop_ck c JOIN pgdl.models m ON m.id = c.model \gset
CREATE TABLE mop_ck_saved AS SELECT * FROM pgdl.checkpoints WHERE run = :ck_run;
UPDATE pgdl.runs SET status = 'running', epochs = 2 WHERE id = :ck_run;
UPDATE pgdl.checkpoints SET epoch = 3 WHERE run = :ck_run AND config = (SELECT max(config) FROM mop_ck);
SELECT mop_try(format('SELECT * FROM pgdl.resume(%s)', :ck_run)) AS epoch_3_of_2;
UPDATE pgdl.checkpoints SET epoch = 1 WHERE run = :ck_run;
UPDATE pgdl.checkpoints SET weights = pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 8},
  {"type": "relu"}, {"type": "dense", "units": 4}]}') WHERE run = :ck_run AND config = (SELECT min(config) FROM mop_ck);
SELECT mop_try(format('SELECT * FROM pgdl.resume(%s)', :ck_run)) AS other_network;
UPDATE pgdl.checkpoints SET weights = '\x00' WHERE run = :ck_run AND config = (SELECT min(config) FROM mop_ck);
SELECT mop_try(format('SELECT * FROM pgdl.resume(%s)', :ck_run)) AS not_a_model;
-- restored, the run goes on (workers NULL: as many as it had) to its second epoch
UPDATE pgdl.checkpoints k SET weights = s.weights FROM mop_ck_saved s
 WHERE k.run = s.run AND k.config = s.config AND k.epoch = s.epoch;
SELECT count(*) AS models, bool_and(epochs = 2) AS second_epoch FROM pgdl.resume(:ck_run, NULL);
SELECT status FROM pgdl.runs WHERE id = :ck_run;
DROP FUNCTION mop_try(text);
