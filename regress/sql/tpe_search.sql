-- pgdl.tpe_search: Bayesian search (TPE) in batches, each batch a configuration set of its own trained by
-- pgdl.fit_multiple.  The first batch is random_search's samples of the same seed; later batches are
-- proposed from the earlier batches' scores; the leaderboard ranks every batch's models by rank_by's value
-- at the stored epoch; deploy deploys the winner; every argument is checked before anything trains.
-- (regress/t/016_tpe_search.pl: the same configurations and model bytes with 1 and 2 workers.)
SET client_min_messages = warning;

CREATE TABLE tpe_rows AS
SELECT i, ARRAY[a, b, c, d]::real[] AS x,
       CASE WHEN a + b > c + d THEN (CASE WHEN a > b THEN 0 ELSE 1 END)
            ELSE (CASE WHEN c > d THEN 2 ELSE 3 END) END AS label
  FROM generate_series(1, 256) i,
       LATERAL (SELECT (abs(sin(i * 12.9898)) * 43758.5453)::numeric % 1 AS a,
                       (abs(sin(i * 78.233)) * 43758.5453)::numeric % 1 AS b,
                       (abs(sin(i * 37.719)) * 43758.5453)::numeric % 1 AS c,
                       (abs(sin(i * 93.989)) * 43758.5453)::numeric % 1 AS d) r;
SELECT pgdl.pack('tpe_rows', 'x', 'label', 'tpe_packed', buffer_rows => 16, partitions => 2) > 0 AS packed;
SELECT pgdl.pack('tpe_rows', 'x', 'label', 'tpe_valid', buffer_rows => 64, partitions => 1,
                 reference => 'tpe_packed') > 0 AS packed;
SELECT pgdl.add_architecture('tpe_small', '{"input": [4], "layers": [{"type": "dense", "units": 4}]}') > 0 AS added;
SELECT pgdl.add_architecture('tpe_wide', '{"input": [4], "layers": [{"type": "dense", "units": 16},
  {"type": "relu"}, {"type": "dense", "units": 4}]}') > 0 AS added;
\set space '{"lr": {"log_uniform": [0.001, 0.5]}, "optimizer": {"choice": ["sgd", "adam"]}, "batch_size": {"int": [4, 32]}, "seed": 7}'

SELECT p.oid::regprocedure AS function, p.provolatile, p.proisstrict, p.proparallel
  FROM pg_proc p WHERE p.pronamespace = 'pgdl'::regnamespace AND p.proname = 'tpe_search';

-- 10 trials in batches of 4: 4, 4 and 2 configurations, ranked by validation loss
CREATE TABLE tpe_board AS
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small', 'tpe_wide'], :'space', trials => 10, batch => 4,
                              epochs => 2, validation => 'tpe_valid', workers => 2, set_name => 'tpe_a',
                              name_prefix => 'tpe_a_');
SELECT count(*) AS models, count(DISTINCT config) AS configs, min(rank) AS first, max(rank) AS last,
       bool_and(epochs = 2) AS two_epochs, bool_and(NOT stopped AND NOT diverged) AS all_trained
  FROM tpe_board;
SELECT batch, count(*) AS models FROM tpe_board GROUP BY batch ORDER BY batch;
-- each batch is its set, and each model its configuration's, named with the prefix
SELECT c.set_name, count(*) AS configs, bool_and(b.batch = split_part(c.set_name, '/', 2)::int) AS its_batch
  FROM pgdl.configs c JOIN tpe_board b ON b.config = c.id
 WHERE c.set_name LIKE 'tpe_a/%' GROUP BY c.set_name ORDER BY c.set_name;
SELECT count(*) AS named FROM tpe_board b JOIN pgdl.models m ON m.id = b.model
 WHERE m.name = 'tpe_a_' || b.config AND m.config = b.config_json;
-- a run per batch
SELECT count(DISTINCT m.run) AS runs FROM tpe_board b JOIN pgdl.models m ON m.id = b.model;
-- the score is rank_by's value (the validation loss) and orders the leaderboard
SELECT bool_and(score = validation_loss) AS score_is_loss FROM tpe_board;
SELECT count(*) AS out_of_order FROM tpe_board x JOIN tpe_board y ON y.rank = x.rank + 1 WHERE x.score > y.score;
-- the first batch is random_search's sample of the same seed
SELECT pgdl.random_search('tpe_random', ARRAY['tpe_small', 'tpe_wide'], :'space', 4, seed => 42) AS added;
SELECT count(*) AS as_random_search
  FROM pgdl.configs r JOIN pgdl.configs t USING (architecture, config)
 WHERE r.set_name = 'tpe_random' AND t.set_name = 'tpe_a/1';
-- later batches are TPE's, not the random draws that follow: samples 5 to 10 of random_search
SELECT pgdl.random_search('tpe_random', ARRAY['tpe_small', 'tpe_wide'], :'space', 10, seed => 42) AS added;
SELECT count(*) AS as_random_search
  FROM pgdl.configs r JOIN pgdl.configs t USING (architecture, config)
 WHERE r.set_name = 'tpe_random' AND t.set_name IN ('tpe_a/2', 'tpe_a/3');
-- the same search again (another set name): the same configurations, batch by batch, and the same models
CREATE TABLE tpe_again AS
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small', 'tpe_wide'], :'space', trials => 10, batch => 4,
                              epochs => 2, validation => 'tpe_valid', workers => 1, set_name => 'tpe_b');
SELECT count(*) AS same
  FROM tpe_again b
  JOIN tpe_board a ON a.rank = b.rank AND a.batch = b.batch AND a.config_json = b.config_json
   AND a.architecture = b.architecture AND a.score = b.score
  JOIN pgdl.models ma ON ma.id = a.model JOIN pgdl.models mb ON mb.id = b.model AND mb.weights = ma.weights;

-- rank_by: accuracy, higher is better
SELECT count(*) AS models, bool_and(score = validation_accuracy) AS score_is_accuracy,
       bool_and(rank = 1 OR NOT better) AS ordered
  FROM (SELECT *, score > lag(score) OVER (ORDER BY rank) AS better
          FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_wide'], :'space', trials => 6, batch => 3, epochs => 1,
                               validation => 'tpe_valid', rank_by => 'accuracy', set_name => 'tpe_acc')) s;
-- with no validation table, the training loss ranks (as fit_multiple's)
SELECT count(*) AS models, bool_and(validation_loss IS NULL AND score = train_loss) AS by_train_loss
  FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', trials => 3, batch => 2, epochs => 1,
                       set_name => 'tpe_train');

-- a space with fewer configurations than trials: each is trained once, then the search ends
SET client_min_messages = notice;
SELECT count(*) AS models, count(DISTINCT config_json) AS distinct_configs, max(batch) AS batches
  FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"lr": {"choice": [0.05, 0.1, 0.2]}, "batch_size": 16}',
                       trials => 8, batch => 2, epochs => 1, set_name => 'tpe_few');
-- keys a configuration drops (adam uses no momentum) make no second model of one configuration
SELECT count(*) AS models, count(DISTINCT config_json) AS distinct_configs
  FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'],
                       '{"optimizer": {"choice": ["adam"]}, "momentum": {"choice": [0.5, 0.9]}, "lr": {"choice": [0.01, 0.1]}}',
                       trials => 4, batch => 4, epochs => 1, set_name => 'tpe_dropped');
SET client_min_messages = warning;

-- the default set name: tpe_search_<n>, the first n none of whose sets exist
CREATE TABLE tpe_named AS
SELECT 1 AS search, config FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', trials => 2, batch => 2,
                                                epochs => 1);
INSERT INTO tpe_named
SELECT 2, config FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', trials => 2, batch => 2, epochs => 1);
SELECT n.search, c.set_name, count(*) AS configs
  FROM tpe_named n JOIN pgdl.configs c ON c.id = n.config GROUP BY 1, 2 ORDER BY 1;

-- deploy: the winner, as fit_multiple's deploy does (its NOTICE names the model's id)
CREATE TABLE tpe_deployed AS
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_wide'], :'space', trials => 4, batch => 2, epochs => 1,
                              validation => 'tpe_valid', set_name => 'tpe_dep', deploy => 'tpe_deployment');
SELECT d.model = w.model AS serves_the_winner, d.version
  FROM pgdl.deployments d, tpe_deployed w WHERE d.name = 'tpe_deployment' AND w.rank = 1;

--
-- errors: each before anything is stored or trained
--
SELECT count(*) AS runs_before FROM pgdl.runs \gset
\set VERBOSITY default
-- NULL in each argument that takes no NULL
SELECT * FROM pgdl.tpe_search(NULL, ARRAY['tpe_small'], :'space');
SELECT * FROM pgdl.tpe_search('tpe_packed', NULL, :'space');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], NULL);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', trials => NULL);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', batch => NULL);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', epochs => NULL);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', seed => NULL);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', priority => NULL);
-- sizes out of range
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', trials => 0);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', trials => 2147483647);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', batch => -1);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', batch => 1025);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', epochs => 0);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', epochs => 100001);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', priority => 101);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', workers => 0);
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', workers => 65);
-- tables that are not packed
SELECT * FROM pgdl.tpe_search('tpe_rows', ARRAY['tpe_small'], :'space');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', validation => 'tpe_rows');
-- rank_by unknown, or needing a validation table
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', rank_by => 'speed');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', rank_by => 'accuracy');
-- deploy without a validation table, or with an empty name
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', deploy => 'tpe_x');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', validation => 'tpe_valid', deploy => '');
-- set names: empty, or a search's whose sets exist
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', set_name => '');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], :'space', set_name => 'tpe_a');
-- architectures
SELECT * FROM pgdl.tpe_search('tpe_packed', '{}', :'space');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_none'], :'space');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small', NULL], :'space');
-- bad spaces: not an object, an unknown distribution, bounds reversed, not positive, too wide, not numbers
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '[1, 2]');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"lr": {"normal": [0, 1]}}');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"lr": {"uniform": [0.5, 0.1]}}');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"lr": {"log_uniform": [0, 0.1]}}');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"lr": {"uniform": [-1e308, 1e308]}}');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"lr": {"uniform": [0, 1e400]}}');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"lr": {"uniform": ["a", 1]}}');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"batch_size": {"int": [1.5, 8]}}');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"optimizer": {"choice": []}}');
-- a value the space allows that no configuration takes, found before anything trains: its bound,
-- a choice, an unknown key
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"lr": {"uniform": [0, 0.1]}}');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"optimizer": {"choice": ["sgd", "rmsprop_x"]}}');
SELECT * FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_small'], '{"learning_rate": 0.1}');
\set VERBOSITY terse
-- nothing of the above was stored or trained
SELECT count(*) - :runs_before AS new_runs FROM pgdl.runs;
SELECT count(*) AS new_sets FROM pgdl.configs WHERE set_name LIKE 'tpe_search_3/%' OR set_name LIKE 'tpe_x%';

-- a cancelled search leaves nothing of its own but its runs, failed (the run settler marks them once the
-- call's transaction has ended)
SELECT max(id) AS runs_max FROM pgdl.runs \gset
SET statement_timeout = '300ms';
SELECT count(*) FROM pgdl.tpe_search('tpe_packed', ARRAY['tpe_wide'], :'space', trials => 200, batch => 2,
                                     epochs => 5, validation => 'tpe_valid', set_name => 'tpe_cancelled');
RESET statement_timeout;
SELECT count(*) AS sets FROM pgdl.configs WHERE set_name LIKE 'tpe_cancelled/%';
DO $$
BEGIN
  FOR i IN 1..200 LOOP
    EXIT WHEN NOT EXISTS (SELECT FROM pgdl.runs WHERE status = 'running');
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SELECT count(*) FILTER (WHERE status <> 'failed') AS not_failed FROM pgdl.runs WHERE id > :runs_max;

DROP TABLE tpe_board, tpe_again, tpe_named, tpe_deployed;
SELECT pgdl.drop_deployment('tpe_deployment');
DELETE FROM pgdl.configs WHERE set_name LIKE 'tpe%';
DROP TABLE tpe_packed, tpe_valid, tpe_rows;
DELETE FROM pgdl.architectures WHERE name IN ('tpe_small', 'tpe_wide');
