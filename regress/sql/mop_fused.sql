-- pgdl.fuse_models: configurations of one fit_multiple that share architecture, batch size and seed train
-- as one fused unit (one hop, one pass over each partition's buffers, each member's steps on it).  Every
-- member ends with the bytes it has alone: fused or not, 1 or 2 workers, stopped early, diverged or halved.
SET client_min_messages = warning;

CREATE TABLE fused_rows AS
SELECT i, ARRAY[sin(i * 0.37), sin(i * 1.71 + 1), cos(i * 0.53), cos(i * 2.9 + 2)]::real[] AS x,
       (sin(i * 0.37) + sin(i * 1.71 + 1) > cos(i * 0.53))::int * 2 + (cos(i * 2.9 + 2) > 0)::int AS label
  FROM generate_series(1, 400) i;
SELECT pgdl.pack('fused_rows', 'x', 'label', 'fused_packed', buffer_rows => 20, partitions => 4, seed => 3) > 0 AS packed;
SELECT pgdl.pack('fused_rows', 'x', 'label', 'fused_valid', buffer_rows => 50, partitions => 1,
                 reference => 'fused_packed') > 0 AS packed;
SELECT pgdl.add_architecture('fused_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 16},
  {"type": "relu"}, {"type": "dense", "units": 4}]}') > 0 AS added;
-- one unit of 5 (one stops early, one diverges), and one configuration of another seed, alone
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'fused_set', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "batch_size": 8, "seed": 7}',
                    '{"optimizer": "sgd", "lr": 0.2, "batch_size": 8, "seed": 7}',
                    '{"optimizer": "adam", "lr": 0.01, "batch_size": 8, "seed": 7}',
                    '{"optimizer": "adam", "lr": 0.003, "batch_size": 8, "seed": 7, "patience": 1, "min_delta": 10}',
                    '{"optimizer": "sgd", "lr": 1e6, "batch_size": 8, "seed": 7}',
                    '{"optimizer": "adam", "lr": 0.01, "batch_size": 8, "seed": 8}']) WITH ORDINALITY u(c, k)
 WHERE a.name = 'fused_mlp' ORDER BY k;

-- held: the workers keep the partitions in memory (a unit's members then visit one after the other);
-- else they read them from the table at every visit (each buffer read once for the whole unit)
CREATE TABLE fused_results (fused boolean, workers int, strategy text, held boolean, config bigint, model bigint,
                            epochs int, stopped boolean);
CREATE FUNCTION fused_run(fuse boolean, w int, strat text, held boolean DEFAULT true) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('pgdl.fuse_models', fuse::text, true);
	PERFORM set_config('pgdl.worker_cache_mem', CASE WHEN held THEN '512MB' ELSE '0' END, true);
	INSERT INTO fused_results
	SELECT fuse, w, strat, held, r.config, r.model, r.epochs, r.stopped
	  FROM pgdl.fit_multiple('fused_packed', 'fused_set', 4, 'fused_valid', workers => w, strategy => strat, eta => 2) r;
END $$;
SET client_min_messages = error;	-- the diverged member's warning names its configuration's id
SELECT fused_run(true, 1, 'all'), fused_run(false, 1, 'all'), fused_run(true, 2, 'all'),
       fused_run(true, 1, 'successive_halving'), fused_run(false, 1, 'successive_halving'),
       fused_run(true, 2, 'successive_halving'), fused_run(true, 1, 'all', false),
       fused_run(true, 2, 'successive_halving', false);
SET client_min_messages = warning;

-- every run: the same models, byte for byte, as the run with the setting off and 1 worker
SELECT r.strategy, r.fused, r.workers, r.held, count(*) AS models,
       count(*) FILTER (WHERE m.weights = b.weights AND r.epochs = o.epochs AND r.stopped = o.stopped) AS same_as_unfused
  FROM fused_results r
  JOIN fused_results o ON o.config = r.config AND o.strategy = r.strategy AND NOT o.fused AND o.workers = 1
  JOIN pgdl.models m ON m.id = r.model JOIN pgdl.models b ON b.id = o.model
 GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4;
-- the member with patience stopped early, one diverged, and halving stopped some: they left the unit
SELECT r.strategy, (c.config->>'lr')::float8 AS lr, r.epochs, r.stopped, (mm.metrics->>'diverged')::boolean AS diverged
  FROM fused_results r JOIN pgdl.configs c ON c.id = r.config JOIN pgdl.models mm ON mm.id = r.model
 WHERE r.fused AND r.workers = 1 AND r.held ORDER BY r.strategy, r.config;
-- a fused unit shares each visit's time evenly: its members' epochs took the same seconds, which the
-- configurations trained apart do not (so the unit was fused, and the setting off was obeyed)
SELECT r.fused, count(DISTINCT rm.seconds) = 1 AS members_share_seconds
  FROM fused_results r JOIN pgdl.configs c ON c.id = r.config JOIN pgdl.models m ON m.id = r.model
  JOIN pgdl.run_metrics rm ON rm.run = m.run AND rm.config = r.config AND rm.epoch = 1
 WHERE r.strategy = 'all' AND r.workers = 1 AND r.held AND c.config->>'seed' = '7' AND NOT (c.config ? 'patience') AND (c.config->>'lr')::float8 < 1e6
 GROUP BY r.fused ORDER BY r.fused;

-- the setting is a boolean, on by default
RESET pgdl.fuse_models;
SHOW pgdl.fuse_models;
SET pgdl.fuse_models = 'maybe';

-- leave nothing for the files after this one
CREATE TEMP TABLE fused_runs AS SELECT DISTINCT m.run FROM fused_results r JOIN pgdl.models m ON m.id = r.model;
DELETE FROM pgdl.models WHERE run IN (SELECT run FROM fused_runs);
DELETE FROM pgdl.runs WHERE id IN (SELECT run FROM fused_runs);
DELETE FROM pgdl.configs WHERE set_name = 'fused_set';
DELETE FROM pgdl.architectures WHERE name = 'fused_mlp';
DROP FUNCTION fused_run(boolean, int, text, boolean);
DROP TABLE fused_results, fused_runs, fused_rows, fused_packed, fused_valid;
