-- Configuration sets for model selection: pgdl.configs and its validating
-- trigger, pgdl.grid_search, pgdl.random_search.

SELECT pgdl.add_architecture('cfg_mlp', '{"input": [784], "layers": [{"type": "dense", "units": 512},
  {"type": "relu"}, {"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 10}]}') > 0 AS stored;
SELECT pgdl.add_architecture('cfg_cnn', '{"input": [1, 28, 28], "layers": [
  {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "flatten"}, {"type": "dense", "units": 10}]}') > 0 AS stored;

-- this file's rows of a set in the order they were added, without ids or timestamps
CREATE TEMP VIEW cfg AS
SELECT c.set_name, row_number() OVER (PARTITION BY c.set_name ORDER BY c.id) AS n,
       a.name AS architecture, c.config
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture
 WHERE a.name IN ('cfg_mlp', 'cfg_cnn');

-- the functions' declared properties
SELECT p.oid::regprocedure AS function, p.provolatile, p.proisstrict, p.proparallel
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'pgdl' AND p.proname IN ('configs_validate', 'grid_search', 'random_search')
 ORDER BY p.proname;

--
-- pgdl.grid_search
--

-- design.md's reference selection: 2 architectures x 2 learning rates x 2 batch sizes x 2 optimizers = 16.
-- Architectures in the order given, then keys in name order (batch_size, lr, optimizer), the first
-- slowest; momentum is fixed, and dropped from the adam configurations, which do not use it.
SELECT pgdl.grid_search('reference', ARRAY['cfg_mlp', 'cfg_cnn'],
  '{"optimizer": ["sgd", "adam"], "lr": [0.01, 0.1], "batch_size": [64, 128], "momentum": 0.9}') AS added;
SELECT n, architecture, config FROM cfg WHERE set_name = 'reference' ORDER BY n;

-- rerunning adds nothing; an overlapping grid adds only what is new
SELECT pgdl.grid_search('reference', ARRAY['cfg_mlp', 'cfg_cnn'],
  '{"optimizer": ["sgd", "adam"], "lr": [0.01, 0.1], "batch_size": [64, 128], "momentum": 0.9}') AS added;
SELECT pgdl.grid_search('reference', ARRAY['cfg_mlp'],
  '{"lr": [0.1, 0.2], "batch_size": 128, "momentum": 0.9}') AS added;
-- a configuration written another way (0.10, 128.0, defaults spelt out) is the same configuration
SELECT pgdl.grid_search('reference', ARRAY['cfg_cnn'],
  '{"optimizer": ["sgd"], "lr": 0.10, "batch_size": 128.0, "momentum": 0.9, "nesterov": false,
    "weight_decay": 0, "seed": 42}') AS added;
SELECT n, architecture, config FROM cfg WHERE set_name = 'reference' AND n > 16 ORDER BY n;

-- no params: one configuration of defaults per architecture; sets are apart
SELECT pgdl.grid_search('defaults', ARRAY['cfg_cnn', 'cfg_mlp'], '{}') AS added;
SELECT n, architecture, config FROM cfg WHERE set_name = 'defaults' ORDER BY n;

-- keys that an optimizer does not use are dropped from its configurations, and the
-- configurations that then coincide are added once: 8 combinations, 4 configurations
SELECT pgdl.grid_search('dropped', ARRAY['cfg_mlp'],
  '{"optimizer": ["sgd", "adamw"], "momentum": [0.5, 0.9], "beta2": [0.99, 0.999]}') AS added;
SELECT n, config FROM cfg WHERE set_name = 'dropped' ORDER BY n;
-- a value of the wrong type under a dropped key does not matter either
SELECT pgdl.grid_search('dropped', ARRAY['cfg_mlp'], '{"optimizer": "adam", "nesterov": "yes"}') AS added;

-- the limit is 10,000 configurations, inclusive
SELECT pgdl.grid_search('large', ARRAY['cfg_mlp'], jsonb_build_object('seed', jsonb_agg(i))) AS added
  FROM generate_series(1, 10000) i;
DELETE FROM pgdl.configs WHERE set_name = 'large';

-- errors: nothing is stored by a call that fails
SELECT pgdl.grid_search('', ARRAY['cfg_mlp'], '{}');
SELECT pgdl.grid_search('e', ARRAY[]::text[], '{}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp', NULL], '{}');
SELECT pgdl.grid_search('e', ARRAY[['cfg_mlp'], ['cfg_cnn']], '{}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp', 'cfg_rnn'], '{}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '[{"lr": 0.1}]');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '{"lr": [0.1], "batch_size": []}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp', 'cfg_cnn'], jsonb_build_object('lr', '[0.01, 0.1]'::jsonb, 'seed', jsonb_agg(i)))
  FROM generate_series(1, 2501) i;
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '{"lr": [0.1, 0.01, 0], "batch_size": [64, 128]}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '{"optimizer": ["sgd", "lion"]}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '{"learning_rate": [0.1, 0.01]}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '{"batch_size": [64, 0.5]}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '{"lr": [[0.1, 0.01]]}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '{"momentum": [0.9, 0], "nesterov": true}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '{"optimizer": "sgd", "momentum": "high"}');
SELECT pgdl.grid_search(NULL, ARRAY['cfg_mlp'], '{}') IS NULL AS strict;
SELECT count(*) AS stored_by_errors FROM cfg WHERE set_name IN ('', 'e');

--
-- pgdl.random_search
--

\set space '{"optimizer": {"choice": ["sgd", "adam"]}, "lr": {"uniform": [0.01, 0.1]}, "batch_size": {"int": [32, 256]}, "momentum": 0.9}'
SELECT pgdl.random_search('random', ARRAY['cfg_mlp', 'cfg_cnn'], :'space', 8, seed => 7) AS added;
SELECT n, architecture, config FROM cfg WHERE set_name = 'random' ORDER BY n;
-- the same seed draws the same configurations: nothing new
SELECT pgdl.random_search('random', ARRAY['cfg_mlp', 'cfg_cnn'], :'space', 8, seed => 7) AS added;
-- sample i depends on (seed, key, i) only: 12 samples are the same 8 and 4 more
SELECT pgdl.random_search('random', ARRAY['cfg_mlp', 'cfg_cnn'], :'space', 12, seed => 7) AS added;
-- into another set, the same seed gives the same rows in the same order
SELECT pgdl.random_search('random_again', ARRAY['cfg_mlp', 'cfg_cnn'], :'space', 12, seed => 7) AS added;
SELECT count(*) AS same_rows
  FROM cfg a JOIN cfg b USING (n, architecture, config)
 WHERE a.set_name = 'random' AND b.set_name = 'random_again';
-- another seed, other configurations
SELECT pgdl.random_search('random_other', ARRAY['cfg_mlp', 'cfg_cnn'], :'space', 12, seed => 8) AS added;
SELECT count(*) AS shared_with_seed_7
  FROM cfg a JOIN cfg b USING (architecture, config)
 WHERE a.set_name = 'random' AND b.set_name = 'random_other';
-- the default seed is 42
SELECT pgdl.random_search('random_42', ARRAY['cfg_mlp', 'cfg_cnn'], :'space', 12) AS added;
SELECT pgdl.random_search('random_42', ARRAY['cfg_mlp', 'cfg_cnn'], :'space', 12, 42) AS added;
-- a key added to the space leaves the other keys' draws and the architectures as they were
SELECT pgdl.random_search('random_wd', ARRAY['cfg_mlp', 'cfg_cnn'],
  :'space'::jsonb || '{"weight_decay": {"uniform": [0.0001, 0.001]}}', 12, seed => 7) AS added;
SELECT count(*) AS same_but_weight_decay,
       bool_and((b.config->>'weight_decay')::float8 BETWEEN 0.0001 AND 0.001) AS weight_decay_drawn
  FROM cfg a JOIN cfg b ON a.n = b.n AND a.architecture = b.architecture
                       AND a.config - 'weight_decay' = b.config - 'weight_decay'
 WHERE a.set_name = 'random' AND b.set_name = 'random_wd';

-- draws stay within bounds and cover them: 200 samples
SELECT pgdl.random_search('bounds', ARRAY['cfg_mlp', 'cfg_cnn'],
  '{"lr": {"log_uniform": [0.0001, 0.1]}, "momentum": {"uniform": [0.5, 0.99]},
    "batch_size": {"int": [16, 20]}, "seed": {"int": [0, 3]},
    "weight_decay": {"choice": [0, 0.0001, 0.001]}, "nesterov": true}', 200, seed => 1) AS added;
SELECT count(*) AS samples,
       min((config->>'lr')::float8) >= 0.0001 AND max((config->>'lr')::float8) <= 0.1 AS lr_within,
       min((config->>'lr')::float8) < 0.0002 AND max((config->>'lr')::float8) > 0.05 AS lr_spread,
       min((config->>'momentum')::float8) >= 0.5 AND max((config->>'momentum')::float8) <= 0.99 AS momentum_within,
       min((config->>'momentum')::float8) < 0.52 AND max((config->>'momentum')::float8) > 0.97 AS momentum_spread,
       array_agg(DISTINCT (config->>'batch_size')::int ORDER BY (config->>'batch_size')::int) AS batch_sizes,
       array_agg(DISTINCT (config->>'seed')::int ORDER BY (config->>'seed')::int) AS seeds,
       array_agg(DISTINCT config->>'weight_decay' ORDER BY config->>'weight_decay') AS weight_decays,
       bool_and((config->>'nesterov')::boolean) AS nesterov
  FROM cfg WHERE set_name = 'bounds';
-- log_uniform: as many per decade; uniform: as many per fifth of the range
SELECT floor(log((config->>'lr')::float8)) AS lr_decade, count(*)
  FROM cfg WHERE set_name = 'bounds' GROUP BY 1 ORDER BY 1;
SELECT width_bucket((config->>'momentum')::float8, 0.5, 0.99, 5) AS momentum_fifth, count(*)
  FROM cfg WHERE set_name = 'bounds' GROUP BY 1 ORDER BY 1;
SELECT architecture, count(*) FROM cfg WHERE set_name = 'bounds' GROUP BY 1 ORDER BY 1;

-- a small space: duplicates are skipped and not counted (2 x 2 x 2 = 8 distinct at most)
SELECT pgdl.random_search('small', ARRAY['cfg_mlp', 'cfg_cnn'],
  '{"optimizer": {"choice": ["sgd", "adamw"]}, "batch_size": {"int": [64, 65]}, "lr": {"uniform": [0.05, 0.05]}}',
  50) AS added;
SELECT architecture, config->>'optimizer' AS optimizer, config->>'batch_size' AS batch_size, config->>'lr' AS lr
  FROM cfg WHERE set_name = 'small' ORDER BY 1, 2, 3;

-- optimizer-specific keys are dropped as in grid_search
SELECT pgdl.random_search('random_dropped', ARRAY['cfg_mlp'],
  '{"optimizer": {"choice": ["sgd", "adam"]}, "momentum": {"uniform": [0.1, 0.9]}, "beta1": {"uniform": [0.8, 0.95]},
    "nesterov": {"choice": [true, false]}}', 20, seed => 3) AS added;
SELECT config->>'optimizer' AS optimizer, count(*),
       bool_and(config ? 'momentum') AS momentum, bool_and(config ? 'beta1') AS beta1,
       count(DISTINCT config->>'momentum') AS momenta, count(DISTINCT config->>'beta1') AS beta1s
  FROM cfg WHERE set_name = 'random_dropped' GROUP BY 1 ORDER BY 1;

-- errors, each naming the key
SELECT pgdl.random_search('', ARRAY['cfg_mlp'], '{}', 1);
SELECT pgdl.random_search('e', ARRAY[]::text[], '{}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_rnn'], '{}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '"lr"', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"lr": [0.01, 0.1]}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"lr": {"normal": [0.01, 0.1]}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"lr": {"uniform": [0.01, 0.1], "log_uniform": [0.01, 0.1]}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"lr": {}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"lr": {"uniform": [0.1, 0.01]}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"lr": {"log_uniform": [0, 0.1]}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"lr": {"uniform": [0.01]}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"lr": {"uniform": 0.01}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"lr": {"uniform": ["0.01", 0.1]}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"batch_size": {"int": [16.5, 64]}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"batch_size": {"int": [64, 16]}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"optimizer": {"choice": []}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"optimizer": {"choice": "sgd"}}', 1);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{}', 0);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{}', 10001);
-- a sample that is not a valid configuration: the context shows the sample
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"lr": {"uniform": [-0.1, 0.1]}}', 10);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"batch_size": {"uniform": [16, 64]}}', 10);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"optimizer": {"choice": ["sgd", "lion"]}}', 10);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"learning_rate": {"uniform": [0.01, 0.1]}}', 10);
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{}', 1, NULL) IS NULL AS strict;
SELECT count(*) AS stored_by_errors FROM cfg WHERE set_name IN ('', 'e');

--
-- rows by hand: the trigger validates them and stores the canonical form
--

INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'hand', id, '{"lr": 0.10, "momentum": 0.90}' FROM pgdl.architectures WHERE name = 'cfg_mlp'
RETURNING set_name, config;
-- keys adam does not use are dropped from the stored form
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'hand', id, '{"optimizer": "adam", "momentum": 0.9}' FROM pgdl.architectures WHERE name = 'cfg_mlp'
RETURNING set_name, config;
-- the same configuration written another way collides with the UNIQUE constraint
\set VERBOSITY terse
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'hand', id, '{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 128}'
  FROM pgdl.architectures WHERE name = 'cfg_mlp';
\set VERBOSITY default
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'hand', id, '{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 128}'
  FROM pgdl.architectures WHERE name = 'cfg_mlp'
    ON CONFLICT (owner, set_name, architecture, config) DO NOTHING;
-- an update is validated and canonicalized too
UPDATE pgdl.configs SET config = '{"lr": 0.2, "momentum": 0.9}' WHERE set_name = 'hand' AND config->>'optimizer' = 'sgd';
SELECT n, architecture, config FROM cfg WHERE set_name = 'hand' ORDER BY n;
-- a grid over the hand-made set skips what is there
SELECT pgdl.grid_search('hand', ARRAY['cfg_mlp'], '{"lr": [0.1, 0.2], "momentum": 0.9}') AS added;

-- errors
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'hand', id, '{"lr": 0}' FROM pgdl.architectures WHERE name = 'cfg_mlp';
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'hand', id, '{"optimizer": "sgd", "learning_rate": 0.1}' FROM pgdl.architectures WHERE name = 'cfg_mlp';
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'hand', id, '[0.1]' FROM pgdl.architectures WHERE name = 'cfg_mlp';
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT '', id, '{}' FROM pgdl.architectures WHERE name = 'cfg_mlp';
UPDATE pgdl.configs SET config = '{"batch_size": 0}' WHERE set_name = 'hand';
UPDATE pgdl.configs SET set_name = '' WHERE set_name = 'hand';
\set VERBOSITY terse
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'hand', id, NULL FROM pgdl.architectures WHERE name = 'cfg_mlp';
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT NULL, id, '{}' FROM pgdl.architectures WHERE name = 'cfg_mlp';
\set VERBOSITY default
SELECT count(*) AS hand_rows FROM cfg WHERE set_name = 'hand';

--
-- the canonical form is built as jsonb, not printed
--

-- numbers are the shortest decimal that reads back as the same float (as float4 prints it), and
-- a canonical form is its own canonical form, byte for byte
SELECT count(*) AS configs,
       bool_and(config->>'lr' = (config->>'lr')::float4::text) AS lr_shortest,
       bool_and(config->>'momentum' = (config->>'momentum')::float4::text) AS momentum_shortest,
       bool_and(pgdl.validate_config(config)::text = config::text) AS fixed_point
  FROM cfg WHERE set_name IN ('bounds', 'random_dropped');
SELECT count(*) AS configs, bool_and(pgdl.validate_config(config)::text = config::text) AS fixed_point
  FROM cfg WHERE set_name IN ('reference', 'random', 'random_wd', 'dropped', 'hand');

-- quotes and backslashes in keys and values stay text: the context shows them escaped
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '{"l\"r\\": [0.1]}');
SELECT pgdl.grid_search('e', ARRAY['cfg_mlp'], '{"optimizer": ["sgd", "ad\"am\\"]}');
SELECT pgdl.random_search('e', ARRAY['cfg_mlp'], '{"optimizer": {"choice": ["\"},{\\"]}}', 1);
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'e', id, '{"optimizer": "sgd\", \"lr\": 0.1"}' FROM pgdl.architectures WHERE name = 'cfg_mlp';
SELECT count(*) AS stored_by_errors FROM cfg WHERE set_name = 'e';
-- and in a set's name, which is stored as given
SELECT pgdl.grid_search(E'q"uo\\te', ARRAY['cfg_mlp'], '{"lr": [0.1, 0.2]}') AS added;
SELECT set_name, set_name = E'q"uo\\te' AS as_given, count(*) FROM cfg WHERE set_name LIKE 'q%' GROUP BY 1;
DELETE FROM pgdl.configs WHERE set_name = E'q"uo\\te';

-- dropping an architecture takes its configurations with it
SELECT set_name, count(*) FROM cfg GROUP BY 1 ORDER BY 1;
CREATE TEMP TABLE cfg_arch AS SELECT id FROM pgdl.architectures WHERE name IN ('cfg_mlp', 'cfg_cnn');
DELETE FROM pgdl.architectures WHERE name IN ('cfg_mlp', 'cfg_cnn');
SELECT count(*) AS left_behind FROM pgdl.configs WHERE architecture IN (SELECT id FROM cfg_arch);
