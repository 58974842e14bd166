-- AutoML (pgdl.automl) under a small budget, pgdl.deploy_if_better, pgdl.rank_metrics and pgdl.retrain:
-- what each makes of a table, that the search ends within its budget and deploys its best, that a refit
-- is deployed only when it beats the served model, and every error.
SET client_min_messages = notice;
\set SHOW_CONTEXT never

-- an error with its numbers (ids, which depend on what ran before) replaced, or 'ok'
CREATE FUNCTION am_try(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END $$;

-- two numbers decide the class; a text column and a few-valued integer are categories, token arrays
-- sequences, an 8x8 array an image; an id, a timestamp and a text of distinct values are left out
CREATE TABLE am_rows AS
SELECT i AS id, a::real AS a, b::real AS b, (ARRAY['x', 'y', 'z'])[1 + i % 3] AS tag, i % 4 AS shift,
       ARRAY(SELECT (i * k) % 7 FROM generate_series(1, 1 + i % 3) k) AS tokens, 'row ' || i AS note, timestamptz '2024-01-01' + i * interval '1 hour' AS at,
       array_fill((i % 3)::real, ARRAY[64]) AS pixels, CASE WHEN a > b THEN 'up' ELSE 'down' END AS label
  FROM generate_series(1, 300) i,
       LATERAL (SELECT (abs(sin(i * 12.9898)) * 43758.5453)::numeric % 1 AS a,
                       (abs(sin(i * 78.233)) * 43758.5453)::numeric % 1 AS b) r;
SELECT * FROM pgdl.automl_columns('am_rows', 'label');
SELECT * FROM pgdl.automl_columns('am_rows', 'label', 'a, "b", tag');
SELECT am_try($$SELECT * FROM pgdl.automl_columns('am_rows', 'label', 'a, nothing')$$);

-- the metrics that rank, with their direction
SELECT * FROM pgdl.rank_metrics() ORDER BY metric;

-- the architectures for a packed table's shape: MLPs; CNNs on an image; embeddings, GRU, attention
SELECT pgdl.pack('am_rows', 'a, b', 'label', 'am_plain', buffer_rows => 32, partitions => 1, standardize => true) > 0 AS packed;
SELECT pgdl.pack('am_rows', 'pixels', 'label', 'am_image', buffer_rows => 32, partitions => 1, standardize => true) > 0 AS packed;
SELECT pgdl.pack('am_rows', 'a, b', 'label', 'am_mixed', buffer_rows => 32, partitions => 1, standardize => true,
                 categorical => 'tag, shift', sequence => 'tokens') > 0 AS packed;
SELECT kind, count(*), bool_and(pgdl.validate_spec(spec) IS NOT NULL) AS valid
  FROM pgdl.automl_architectures('am_plain') GROUP BY kind ORDER BY kind;
SELECT kind, count(*), min(spec -> 'input' ->> 0) AS channels
  FROM pgdl.automl_architectures('am_image', 8) GROUP BY kind ORDER BY kind;
SELECT kind, count(*), bool_and(pgdl.validate_spec(spec) IS NOT NULL) AS valid,
       min(jsonb_path_query_first(spec, '$.layers[*] ? (@.type == "embedding").vocab')::int) AS smallest_vocab
  FROM pgdl.automl_architectures('am_mixed') GROUP BY kind ORDER BY kind;

-- automl: a seeded split, packed, rounds of fit_multiple within the budget, the best deployed
CREATE TABLE am_result (leaderboard regclass, model bigint, deployed boolean, seconds double precision);
SET client_min_messages = warning;
DO $$
DECLARE
  lb regclass;
  m bigint;
  d boolean;
  t0 timestamptz := clock_timestamp();
BEGIN
  CALL pgdl.automl('am_rows', 'label', features => 'a, b', budget => '6 seconds', name => 'am_best', seed => 1,
                   output_prefix => 'am_mlp',
                   leaderboard => lb, model => m, deployed => d);
  INSERT INTO am_result VALUES (lb, m, d, extract(epoch FROM clock_timestamp() - t0));
END $$;
SET client_min_messages = notice;
SELECT leaderboard, deployed, seconds <= 6 * 1.1 AS within_budget FROM am_result;
SELECT count(*) > 0 AS models, bool_and(ranked_by = 'loss') AS by_loss,
       count(*) FILTER (WHERE deployed) AS deployed, min(rank) = 1 AS ranked,
       bool_and(kind = 'mlp') AS mlps, bool_and(score >= 0) AS scores
  FROM am_mlp_leaderboard;
-- ranked best first, the deployment serving rank 1
SELECT bool_and(l.score <= n.score) AS ordered
  FROM am_mlp_leaderboard l JOIN am_mlp_leaderboard n ON n.rank = l.rank + 1;
SELECT d.model = r.model AS serves_the_best FROM pgdl.deployments d, am_result r WHERE d.name = 'am_best' AND d.active;
SELECT count(*) FILTER (WHERE pgdl.predict_class('am_best', ARRAY[a, b]) = label) > 0.8 * count(*) AS predicts FROM am_rows;
SELECT relname FROM pg_class WHERE relname LIKE 'am\_mlp%' AND relkind IN ('r', 'p') AND relname !~ '_p[0-9]+$' ORDER BY relname;

-- automl's errors: each checked before anything is made
SELECT am_try($$CALL pgdl.automl(NULL, 'label')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', NULL)$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', budget => NULL)$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', seed => NULL)$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', validation => NULL)$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', strategy => NULL)$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', budget => '0 seconds')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', budget => '-1 seconds')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', budget => '2 days')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', validation => 0.9)$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', validation => 'NaN')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', validation => '-Infinity')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', metric => 'r2')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', metric => 'nonsense')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', name => '')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'nothing')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', features => 'a, nothing')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', features => 'tag, note')$$);
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', features => '')$$);
SELECT am_try($$CALL pgdl.automl(0, 'label')$$);
-- it commits its packed tables before training (the workers see only committed rows): not in a block
BEGIN;
SELECT am_try($$CALL pgdl.automl('am_rows', 'label', features => 'a, b', budget => '2 seconds')$$);
ROLLBACK;

-- deploy_if_better: a name that serves nothing takes the model; a better one replaces it; a worse one not
SELECT pgdl.pack('am_rows', 'a, b', 'label', 'am_valid', buffer_rows => 64, partitions => 1,
                 reference => 'am_plain') > 0 AS packed;
SELECT pgdl.add_architecture('am_arch', '{"input": [2], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
                              {"type": "dense", "units": 2}]}') > 0 AS added;
SET client_min_messages = warning;
SELECT pgdl.fit('am_plain', 'am_arch', '{"optimizer": "adam", "lr": 0.003, "seed": 3}', 1, name => 'am_weak') > 0 AS fitted;
SELECT pgdl.fit('am_plain', 'am_arch', '{"optimizer": "adam", "lr": 0.01, "seed": 3}', 30, name => 'am_strong') > 0 AS fitted;
SET client_min_messages = warning;
SELECT deployed, previous IS NULL AS first, metric, score IS NULL AS unscored
  FROM pgdl.deploy_if_better('am_dep', pgdl.model_id('am_weak'), 'am_valid', 'accuracy');
SELECT deployed, previous = pgdl.model_id('am_weak') AS replaces, metric, score > previous_score AS better
  FROM pgdl.deploy_if_better('am_dep', pgdl.model_id('am_strong'), 'am_valid', 'accuracy');
SELECT deployed, previous = pgdl.model_id('am_strong') AS kept, metric, score > previous_score AS higher_loss
  FROM pgdl.deploy_if_better('am_dep', pgdl.model_id('am_weak'), 'am_valid');
SELECT deployed, candidate = previous AS already FROM pgdl.deploy_if_better('am_dep', pgdl.model_id('am_strong'), 'am_valid');
SET client_min_messages = notice;
SELECT am_try($$SELECT * FROM pgdl.deploy_if_better(NULL, 1, 'am_valid')$$);
SELECT am_try($$SELECT * FROM pgdl.deploy_if_better('am_dep', NULL, 'am_valid')$$);
SELECT am_try($$SELECT * FROM pgdl.deploy_if_better('am_dep', pgdl.model_id('am_weak'), NULL)$$);
SELECT am_try($$SELECT * FROM pgdl.deploy_if_better('am_dep', pgdl.model_id('am_weak'), 'am_valid', 'r2')$$);
SELECT am_try($$SELECT * FROM pgdl.deploy_if_better('am_dep', pgdl.model_id('am_weak'), 'am_valid', 'nonsense')$$);
SELECT am_try($$SELECT * FROM pgdl.deploy_if_better('am_dep', pgdl.model_id('am_weak'), 'am_image')$$);
SELECT am_try($$SELECT * FROM pgdl.deploy_if_better('am_dep', pgdl.model_id('am_weak'), 'am_rows')$$);
SELECT am_try($$SELECT * FROM pgdl.deploy_if_better('am_dep', -1, 'am_valid')$$);

-- retrain: the served model refitted on new rows with its preprocessing, deployed only when better
SELECT pgdl.deploy('am_retrained', 'am_weak') > 0 AS deployed;
CREATE TABLE am_new_rows AS SELECT a, b, label FROM am_rows WHERE id % 2 = 0;
SET client_min_messages = warning;
SELECT previous = pgdl.model_id('am_weak') AS from_weak, deployed, ranked_by, score > previous_score AS better,
       train, valid
  FROM pgdl.retrain('am_retrained', 'am_new_rows', epochs => 20, metric => 'accuracy');
SELECT d.model <> pgdl.model_id('am_weak') AS moved FROM pgdl.deployments d WHERE d.name = 'am_retrained' AND d.active;
-- the same preprocessing as the served model's training set
SELECT x.normalization = p.normalization AS same_normalization, x.reference = p.id AS referenced
  FROM pgdl.datasets x, pgdl.datasets p WHERE x.packed = 'retrain_am_retrained_train'::regclass AND p.packed = 'am_plain'::regclass;
-- one epoch from scratch does not beat the refit: the name keeps its model, and the refit leaves nothing
-- behind (its model, its packed tables); with keep, both stay
SELECT count(*) AS models_before FROM pgdl.models \gset
SELECT deployed, score > previous_score AS higher_loss, candidate, train, valid
  FROM pgdl.retrain('am_retrained', 'am_new_rows', epochs => 1, warm_start => false, seed => 5);
SELECT (SELECT count(*) FROM pgdl.models) = :models_before AS no_model_left,
       (SELECT count(*) FROM pg_class WHERE relname LIKE 'retrain\_am\_retrained\_2%') AS tables_left;
SELECT deployed, candidate IS NOT NULL AS candidate_kept, train, valid
  FROM pgdl.retrain('am_retrained', 'am_new_rows', epochs => 1, warm_start => false, seed => 5, keep => true);
SELECT (SELECT count(*) FROM pgdl.models) = :models_before + 1 AS model_kept;
SET client_min_messages = notice;
SELECT am_try($$SELECT * FROM pgdl.retrain(NULL, 'am_new_rows')$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', NULL)$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', 'am_new_rows', validation => NULL)$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', 'am_new_rows', seed => NULL)$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', 'am_new_rows', warm_start => NULL)$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', 'am_new_rows', keep => NULL)$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_nothing', 'am_new_rows')$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', 'am_new_rows', validation => 'NaN')$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', 'am_new_rows', validation => 1)$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', 'am_new_rows', epochs => 0)$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', 'am_new_rows', epochs => 2147483647)$$);
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', 'am_new_rows', metric => 'r2')$$);
CREATE TABLE am_unlabelled AS SELECT a, b FROM am_rows;
SELECT am_try($$SELECT * FROM pgdl.retrain('am_retrained', 'am_unlabelled')$$);
SELECT am_try($$SELECT * FROM pgdl.retrain(repeat('n', 100000), 'am_new_rows')$$);
-- a served model whose packed training table is gone
SELECT pgdl.pack('am_rows', 'a, b', 'label', 'am_gone', buffer_rows => 32, partitions => 1, standardize => true) > 0 AS packed;
SET client_min_messages = warning;
SELECT pgdl.fit('am_gone', 'am_arch', '{"seed": 1}', 1, name => 'am_orphan') > 0 AS fitted;
SET client_min_messages = notice;
SELECT pgdl.deploy('am_orphaned', 'am_orphan') > 0 AS deployed;
DROP TABLE am_gone;
SELECT am_try($$SELECT * FROM pgdl.retrain('am_orphaned', 'am_new_rows')$$);
