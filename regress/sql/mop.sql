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

-- the leaderboard is sorted by validation loss; metrics and checkpoints per model and epoch
SELECT bool_and(a.validation_loss <= b.validation_loss) AS sorted
  FROM mop_results a JOIN mop_results b ON a.workers = b.workers AND b.rank = a.rank + 1;
SELECT r.kind, r.status, r.config->>'strategy' AS strategy, r.config->>'workers' AS workers,
       (SELECT count(*) FROM pgdl.run_metrics WHERE run = r.id) AS metrics,
       (SELECT count(*) FROM pgdl.run_metrics WHERE run = r.id AND model IS NOT NULL) AS linked,
       (SELECT count(*) FROM pgdl.checkpoints WHERE run = r.id) AS checkpoints
  FROM pgdl.runs r WHERE r.kind = 'fit_multiple' ORDER BY r.id;
SELECT count(*) AS runs_in_flight FROM pgdl.progress;

-- successive halving (strategy hyperband, eta 2, 4 epochs): rungs after epochs 1 and 2
SELECT rank, epochs, stopped FROM pgdl.fit_multiple('mop_packed', 'mop_set', 4, 'mop_valid', workers => 2,
                                                    strategy => 'hyperband', eta => 2) ORDER BY rank;
SELECT epoch, decision, count(*)
  FROM pgdl.run_metrics WHERE run = (SELECT max(id) FROM pgdl.runs) AND decision IS NOT NULL
 GROUP BY epoch, decision ORDER BY epoch, decision;

-- names: prefix || configuration id
CREATE TABLE mop_named AS
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, workers => 1, name_prefix => 'mop_');
SELECT count(*) AS named FROM mop_named f JOIN pgdl.models m ON m.id = f.model WHERE m.name = 'mop_' || f.config;

-- more workers than partitions: one per partition, with a NOTICE
SET client_min_messages = notice;
SELECT count(*) FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, workers => 6);
SET client_min_messages = warning;

-- errors
SELECT * FROM pgdl.fit_multiple('mop_packed', 'no_such_set');
SELECT * FROM pgdl.fit_multiple('mop_rows', 'mop_set');
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 0);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, workers => 0);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, strategy => 'genetic');
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, strategy => 'hyperband', eta => 1);
SELECT * FROM pgdl.fit_multiple('mop_packed', 'mop_set', 1, NULL, NULL, NULL);
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
