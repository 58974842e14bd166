-- The BI views (sql/parts/85_bi_views.sql): pgdl.leaderboard ranks the models of a run as
-- pgdl.fit_multiple does and shows their configuration's keys as typed columns; pgdl.training_curves
-- has one row per model, epoch and metric; both in plain types, both show a role only its own runs,
-- and neither fails on catalog rows written by hand.
SET client_min_messages = warning;
-- (what this test adds to the catalog is removed at its end, and the catalog's ids given back: the tests
-- after it count runs)
SELECT coalesce(max(id), 0) AS bi_first_run FROM pgdl.runs \gset
SELECT last_value AS bi_runs_seq, is_called AS bi_runs_called FROM pgdl.runs_id_seq \gset
SELECT last_value AS bi_models_seq, is_called AS bi_models_called FROM pgdl.models_id_seq \gset
SELECT last_value AS bi_configs_seq, is_called AS bi_configs_called FROM pgdl.configs_id_seq \gset
SELECT last_value AS bi_archs_seq, is_called AS bi_archs_called FROM pgdl.architectures_id_seq \gset
SELECT last_value AS bi_datasets_seq, is_called AS bi_datasets_called FROM pgdl.datasets_id_seq \gset

-- plain SQL types only: no jsonb, arrays or other types that ODBC drivers show as varchar(255)
SELECT c.relname AS view, a.attname AS column_name, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = 'pgdl'::regnamespace AND c.relname IN ('leaderboard', 'training_curves') AND a.attnum > 0
 ORDER BY c.relname, a.attnum;
SELECT c.relname AS view, c.reloptions, has_table_privilege('public', c.oid, 'SELECT') AS public_reads,
       obj_description(c.oid, 'pg_class') IS NOT NULL AS commented
  FROM pg_class c WHERE c.relnamespace = 'pgdl'::regnamespace AND c.relname IN ('leaderboard', 'training_curves')
 ORDER BY 1;

CREATE TABLE bi_rows AS
SELECT i, ARRAY[sin(i), cos(i), sin(2 * i), cos(3 * i)]::real[] AS x,
       (CASE WHEN sin(i) > 0.3 THEN 0 WHEN cos(i) > 0 THEN 1 ELSE 2 END) AS label
  FROM generate_series(1, 96) i;
SELECT pgdl.pack('bi_rows', 'x', 'label', 'bi_packed', buffer_rows => 16, partitions => 2) > 0 AS packed;
SELECT pgdl.pack('bi_rows', 'x', 'label', 'bi_valid', buffer_rows => 32, partitions => 1,
                 reference => 'bi_packed') > 0 AS packed;
SELECT pgdl.add_architecture('bi_small', '{"input": [4], "layers": [{"type": "dense", "units": 3}]}') > 0 AS added;
SELECT pgdl.add_architecture('bi_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 8},
  {"type": "relu"}, {"type": "dense", "units": 3}]}') > 0 AS added;

-- ---------------------------------------------------------------------------
-- pgdl.fit: one model, rank 1; ranked by training loss without validation, by validation loss with it
-- ---------------------------------------------------------------------------
SELECT pgdl.fit('bi_packed', 'bi_mlp', '{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 8}', 2,
                name => 'bi_fit') AS bi_fit \gset
SELECT pgdl.fit('bi_packed', 'bi_small', '{"optimizer": "adam", "lr": 0.01, "batch_size": 16, "seed": 7}', 3,
                'bi_valid', name => 'bi_fit_valid') AS bi_fit_valid \gset
SELECT l.kind, l.rank, l.ranked_by, l.model_name, l.config, l.architecture, l.status, l.epochs,
       l.optimizer, l.lr, l.momentum, l.nesterov, l.weight_decay, l.beta1, l.beta2, l.eps, l.batch_size, l.seed,
       l.base_model, l.frozen, l.seconds > 0 AS timed, l.started = r.started AS started
  FROM pgdl.leaderboard l JOIN pgdl.runs r ON r.id = l.run
 WHERE l.model IN (:bi_fit, :bi_fit_valid) ORDER BY l.model;
-- the last epoch's metrics, as in pgdl.run_metrics; the configuration as text, the model's
SELECT l.model_name, l.train_loss = x.train_loss AS train_loss, l.train_accuracy = x.train_accuracy AS train_accuracy,
       l.validation_loss IS NOT DISTINCT FROM x.validation_loss AS validation_loss,
       l.validation_accuracy IS NOT DISTINCT FROM x.validation_accuracy AS validation_accuracy,
       l.config_text::jsonb = m.config AS config_text
  FROM pgdl.leaderboard l JOIN pgdl.models m ON m.id = l.model
  JOIN pgdl.run_metrics x ON x.run = l.run AND x.epoch = l.epochs
 WHERE l.model IN (:bi_fit, :bi_fit_valid) ORDER BY l.model;
-- the curves: each metric measured in each epoch (no validation: no validation rows)
SELECT model_name, architecture, rank, metric, array_agg(epoch ORDER BY epoch) AS epochs
  FROM pgdl.training_curves WHERE model IN (:bi_fit, :bi_fit_valid) GROUP BY 1, 2, 3, 4 ORDER BY 1, 4;
SELECT count(*) AS values, bool_and(c.value = CASE c.metric WHEN 'train_loss' THEN x.train_loss
                                                            WHEN 'train_accuracy' THEN x.train_accuracy
                                                            WHEN 'validation_loss' THEN x.validation_loss
                                                            WHEN 'validation_accuracy' THEN x.validation_accuracy END) AS equal
  FROM pgdl.training_curves c JOIN pgdl.run_metrics x ON x.run = c.run AND x.epoch = c.epoch
 WHERE c.model IN (:bi_fit, :bi_fit_valid);

-- ---------------------------------------------------------------------------
-- pgdl.fit_multiple with successive halving (eta 2, 4 epochs: rungs after epochs 1 and 2) and a
-- configuration that diverges: the view's ranks are the leaderboard pgdl.fit_multiple returned
-- ---------------------------------------------------------------------------
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'bi_set', a.id, c::jsonb
  FROM pgdl.architectures a,
       (VALUES ('{"optimizer": "sgd", "lr": 0.1, "batch_size": 4, "seed": 3}'),
               ('{"optimizer": "sgd", "lr": 0.02, "momentum": 0.5, "nesterov": true, "batch_size": 8, "seed": 3}'),
               ('{"optimizer": "adam", "lr": 0.01, "batch_size": 4, "seed": 3}'),
               ('{"optimizer": "adamw", "lr": 0.005, "weight_decay": 0.01, "beta2": 0.99, "batch_size": 8, "seed": 4}'),
               ('{"optimizer": "sgd", "lr": 1e30, "batch_size": 4, "seed": 3}')) v(c)
 WHERE a.name IN ('bi_small', 'bi_mlp') ORDER BY a.name, c;
-- (its WARNING, which names the diverged configuration, is diverge.sql's to test)
SET client_min_messages = error;
CREATE TABLE bi_lb AS SELECT * FROM pgdl.fit_multiple('bi_packed', 'bi_set', 4, 'bi_valid', workers => 2,
                                                      strategy => 'successive_halving', eta => 2, name_prefix => 'bi_set_');
SET client_min_messages = warning;
SELECT DISTINCT m.run AS bi_sh_run FROM bi_lb f JOIN pgdl.models m ON m.id = f.model \gset
SELECT count(*) AS models, count(*) FILTER (WHERE f.rank = l.rank) AS same_rank,
       count(*) FILTER (WHERE f.config = l.config AND f.architecture = l.architecture AND f.epochs = l.epochs
                        AND l.status = CASE WHEN f.diverged THEN 'diverged' WHEN f.stopped THEN 'stopped'
                                            ELSE 'finished' END
                        AND l.model_name = 'bi_set_' || f.config) AS same_model,
       count(*) FILTER (WHERE f.train_loss IS NOT DISTINCT FROM l.train_loss
                        AND f.validation_loss IS NOT DISTINCT FROM l.validation_loss
                        AND f.validation_accuracy IS NOT DISTINCT FROM l.validation_accuracy) AS same_metrics,
       count(*) FILTER (WHERE l.config_text::jsonb = f.config_json) AS same_config
  FROM bi_lb f JOIN pgdl.leaderboard l ON l.model = f.model;
SELECT l.rank, l.kind, l.ranked_by, l.architecture, l.status, l.epochs, l.optimizer, l.lr, l.momentum, l.nesterov,
       l.weight_decay, l.beta1, l.beta2, l.eps, l.batch_size, l.seed
  FROM pgdl.leaderboard l WHERE l.run = :bi_sh_run ORDER BY l.rank;
-- ranks are in order of the loss ranked on, among the models trained as long
SELECT bool_and(a.validation_loss <= b.validation_loss) AS ordered
  FROM pgdl.leaderboard a JOIN pgdl.leaderboard b ON b.run = a.run AND b.epochs = a.epochs AND b.rank > a.rank
 WHERE a.run = :bi_sh_run AND a.status <> 'diverged' AND b.status <> 'diverged';
-- the curves stop where each model stopped; the diverged model measured its training loss only
SELECT l.rank, l.status, c.metric, count(*) AS epochs
  FROM pgdl.leaderboard l JOIN pgdl.training_curves c ON c.run = l.run AND c.config = l.config
 WHERE l.run = :bi_sh_run GROUP BY 1, 2, 3 ORDER BY 1, 3;

-- in flight (the model not stored yet) or deleted: the configuration comes from pgdl.configs
DELETE FROM pgdl.models WHERE id = (SELECT model FROM bi_lb WHERE rank = 1);
SELECT rank, l.model, l.model_name, l.architecture, l.optimizer, l.lr, l.batch_size, l.config_text::jsonb = f.config_json AS config_text
  FROM pgdl.leaderboard l JOIN bi_lb f USING (config, rank) WHERE l.run = :bi_sh_run AND rank = 1;

-- ---------------------------------------------------------------------------
-- rank_by and restore_best: the view ranks as pgdl.fit_multiple returned, by rank_by at each model's
-- stored epoch (its best with patience), and shows that epoch's metrics; the curves mark it
-- ---------------------------------------------------------------------------
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'bi_rank', a.id, c::jsonb
  FROM pgdl.architectures a,
       (VALUES ('{"optimizer": "sgd", "lr": 0.3, "batch_size": 4, "seed": 3, "patience": 1}'),
               ('{"optimizer": "sgd", "lr": 0.05, "batch_size": 8, "seed": 5, "patience": 1}'),
               ('{"optimizer": "adam", "lr": 0.05, "batch_size": 4, "seed": 3, "patience": 2}'),
               ('{"optimizer": "adam", "lr": 0.2, "batch_size": 8, "seed": 4, "patience": 1,
                  "monitor": "validation_loss"}')) v(c)
 WHERE a.name IN ('bi_small', 'bi_mlp') ORDER BY a.name, c;
CREATE TABLE bi_rank_loss AS SELECT * FROM pgdl.fit_multiple('bi_packed', 'bi_rank', 6, 'bi_valid', workers => 2);
-- ranked by f1, the configurations that name no monitor watch f1 too (restore_best keeps the best f1's epoch)
CREATE TABLE bi_rank_f1 AS SELECT * FROM pgdl.fit_multiple('bi_packed', 'bi_rank', 6, 'bi_valid', workers => 2,
                                                           rank_by => 'f1');
SELECT f.rank_by, count(*) AS models, count(*) FILTER (WHERE f.rank = l.rank) AS same_rank,
       count(*) FILTER (WHERE f.epochs = l.epochs AND f.train_loss = l.train_loss
                        AND f.validation_loss = l.validation_loss
                        AND f.validation_accuracy = l.validation_accuracy) AS same_metrics,
       count(*) FILTER (WHERE l.stored_epoch < l.epochs) AS restored,
       count(*) FILTER (WHERE l.stored_epoch = (m.metrics->>'epoch')::int) AS stored_epoch,
       min(l.ranked_by) AS ranked_by,
       bool_and(l.rank = 1 OR l.rank_value IS NULL OR CASE f.rank_by WHEN 'f1'
                THEN l.rank_value <= (SELECT rank_value FROM pgdl.leaderboard WHERE run = m.run AND rank = 1)
                ELSE l.rank_value >= (SELECT rank_value FROM pgdl.leaderboard WHERE run = m.run AND rank = 1) END) AS rank1_best
  FROM (SELECT 'loss' AS rank_by, * FROM bi_rank_loss UNION ALL SELECT 'f1', * FROM bi_rank_f1) f
  JOIN pgdl.models m ON m.id = f.model JOIN pgdl.leaderboard l ON l.model = f.model
 GROUP BY f.rank_by ORDER BY f.rank_by;
-- monitor follows rank_by: each model without a monitor of its own stores the epoch restore_best picks by
-- f1 (the last that beat the best f1 before it), the one with "monitor": "validation_loss" by the loss
SELECT bool_and(l.stored_epoch = (SELECT max(e.epoch) FROM pgdl.run_metrics e
                                   WHERE e.run = m.run AND e.config = m.config_id AND e.epoch <= l.epochs
                                     AND (e.validation_metrics->>'f1')::float8 > coalesce(
                                         (SELECT max((p.validation_metrics->>'f1')::float8) FROM pgdl.run_metrics p
                                           WHERE p.run = e.run AND p.config = e.config AND p.epoch < e.epoch), -1)))
         FILTER (WHERE NOT (c.config ? 'monitor')) AS stored_best_f1
  FROM bi_rank_f1 f JOIN pgdl.leaderboard l ON l.model = f.model
  JOIN (SELECT id, run, (SELECT config FROM pgdl.run_metrics WHERE model = pm.id LIMIT 1) AS config_id
          FROM pgdl.models pm) m ON m.id = f.model
  JOIN pgdl.configs c ON c.id = f.config;
-- f1's values are the stored epoch's validation_metrics; the curves mark one epoch per model, the stored one
SELECT bool_and(l.rank_value = (rm.validation_metrics->>'f1')::float8) AS f1_of_stored_epoch
  FROM bi_rank_f1 f JOIN pgdl.leaderboard l ON l.model = f.model
  JOIN pgdl.run_metrics rm ON rm.model = f.model AND rm.epoch = l.stored_epoch;
SELECT count(DISTINCT c.model) AS models, count(*) FILTER (WHERE c.stored) AS stored_rows,
       bool_and(NOT c.stored OR c.epoch = l.stored_epoch) AS stored_is_leaderboards
  FROM bi_rank_f1 f JOIN pgdl.leaderboard l ON l.model = f.model
  JOIN pgdl.training_curves c ON c.model = f.model AND c.metric = 'validation_loss';
-- the zoo shows the stored model's numbers, not the best of every epoch
SELECT bool_and(z.best_validation_loss = f.validation_loss AND z.best_validation_accuracy = f.validation_accuracy
                AND z.last_train_loss = f.train_loss) AS zoo_shows_stored
  FROM bi_rank_loss f JOIN pgdl.zoo z ON z.id = f.model;
-- pruning keeps the checkpoint restore_best stores from: a run that did not finish, pruned to its last
-- checkpoint, still resumes (min_delta 10: epoch 1 stays the best, read back from its checkpoint at the end)
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'bi_prune', a.id, '{"optimizer": "sgd", "lr": 0.1, "batch_size": 8, "seed": 3, "patience": 5, "min_delta": 10}'
  FROM pgdl.architectures a WHERE a.name = 'bi_mlp';
SET pgdl.keep_checkpoints = -1;
CREATE TABLE bi_prune AS SELECT * FROM pgdl.fit_multiple('bi_packed', 'bi_prune', 3, 'bi_valid', workers => 1);
RESET pgdl.keep_checkpoints;
SELECT DISTINCT m.run AS bi_prune_run FROM bi_prune f JOIN pgdl.models m ON m.id = f.model \gset
UPDATE pgdl.runs SET status = 'cancelled', epochs = 4 WHERE id = :bi_prune_run;
SELECT pgdl.cleanup_checkpoints(0, :bi_prune_run) AS pruned;
SELECT array_agg(epoch ORDER BY epoch) AS kept FROM pgdl.checkpoints WHERE run = :bi_prune_run;
CREATE TABLE bi_resumed AS SELECT * FROM pgdl.resume(:bi_prune_run);
SELECT r.epochs, (m.metrics->>'epoch')::int AS stored_epoch, m.weights = ck.weights AS stored_is_checkpoint
  FROM bi_resumed r JOIN pgdl.models m ON m.id = r.model
  JOIN pgdl.checkpoints ck ON ck.run = :bi_prune_run AND ck.config = r.config AND ck.epoch = 1;
-- a finished run keeps the stored model's epoch beside its last; keep 0 none
SELECT pgdl.cleanup_checkpoints(1, :bi_prune_run) AS pruned;
SELECT array_agg(epoch ORDER BY epoch) AS kept FROM pgdl.checkpoints WHERE run = :bi_prune_run;
SELECT pgdl.cleanup_checkpoints(0, :bi_prune_run) AS pruned;

-- ---------------------------------------------------------------------------
-- Row-level security: a role sees its own runs only
-- ---------------------------------------------------------------------------
CREATE ROLE regress_bi_alice;
CREATE ROLE regress_bi_bob;
GRANT SELECT ON bi_packed, bi_valid TO regress_bi_alice, regress_bi_bob;
SET ROLE regress_bi_alice;
SELECT pgdl.fit('bi_packed', '{"input": [4], "layers": [{"type": "dense", "units": 3}]}'::jsonb,
                '{"lr": 0.05}', 1, name => 'bi_alice') > 0 AS trained;
SELECT count(*) AS runs, string_agg(model_name, ',') AS models FROM pgdl.leaderboard;
SELECT count(DISTINCT model) AS curve_models, count(*) AS curve_rows FROM pgdl.training_curves;
RESET ROLE;
SET ROLE regress_bi_bob;
SELECT pgdl.fit('bi_packed', '{"input": [4], "layers": [{"type": "dense", "units": 3}]}'::jsonb,
                '{"lr": 0.05}', 2, name => 'bi_bob') > 0 AS trained;
SELECT count(*) AS runs, string_agg(model_name, ',') AS models FROM pgdl.leaderboard;
SELECT count(DISTINCT model) AS curve_models, count(*) AS curve_rows FROM pgdl.training_curves;
RESET ROLE;
SET ROLE regress_bi_alice;
SELECT count(*) AS runs, string_agg(model_name, ',') AS models FROM pgdl.leaderboard;
RESET ROLE;
SELECT count(*) FILTER (WHERE model_name IN ('bi_alice', 'bi_bob')) AS superuser_sees FROM pgdl.leaderboard;

-- ---------------------------------------------------------------------------
-- Catalog rows written by hand: wrong types are NULL, never an error
-- ---------------------------------------------------------------------------
-- a run whose configuration (no model, no configuration row) has every key of the wrong type
INSERT INTO pgdl.runs (kind, architecture, config, epochs, status)
SELECT 'fit', a.id, '{"optimizer": 7, "lr": "fast", "momentum": {"a": 1}, "nesterov": "yes", "weight_decay": [1],
                      "beta1": 1e400, "beta2": 1e-400, "eps": null, "batch_size": 2.5, "seed": 1e30,
                      "base_model": {"id": 1}, "freeze": true}', 1, 'failed'
  FROM pgdl.architectures a WHERE a.name = 'bi_small'
RETURNING id AS bi_forged_run \gset
INSERT INTO pgdl.run_metrics (run, epoch, train_loss, seconds) VALUES (:bi_forged_run, 1, 'NaN', 1);
-- a model whose configuration is not an object, in a run of a kind pgdl does not write, with metrics
-- rows of configurations that do not exist (one of them with the model)
INSERT INTO pgdl.runs (kind, config, epochs) VALUES ('forged', '[1, 2]', 2) RETURNING id AS bi_odd_run \gset
-- (its spec and weights not valid either: a row from before pgdl 0.7.0, or written with the check disabled)
ALTER TABLE pgdl.models DISABLE TRIGGER models_validate;
INSERT INTO pgdl.models (name, spec, config, run, weights)
VALUES ('bi_forged', '{}', '"text"', :bi_odd_run, '\x00') RETURNING id AS bi_forged_model \gset
ALTER TABLE pgdl.models ENABLE TRIGGER models_validate;
INSERT INTO pgdl.run_metrics (run, config, model, epoch, train_loss, validation_loss, decision, state)
VALUES (:bi_odd_run, -5, :bi_forged_model, 1, 1, 0.5, 'stop', 'ok'),
       (:bi_odd_run, -6, NULL, 1, 2, 'NaN', NULL, 'ok'),
       (:bi_odd_run, -6, NULL, 2, 'Infinity', NULL, NULL, 'ok'),
       (:bi_odd_run, NULL, NULL, 1, -1, -1, NULL, 'diverged');
-- base model and freeze: a name or an id, a layer name or a count, as text
INSERT INTO pgdl.runs (kind, config, epochs) VALUES ('fit', '{"base_model": 12, "freeze": "flatten", "lr": 0,
  "momentum": 1e-300, "batch_size": 3e9, "seed": -9223372036854775808}', 1) RETURNING id AS bi_transfer_run \gset
INSERT INTO pgdl.run_metrics (run, epoch, train_loss) VALUES (:bi_transfer_run, 1, 1);
SELECT run - :bi_first_run AS run, kind, rank, ranked_by, model_name, config, architecture, status, epochs, seconds,
       train_loss, validation_loss, optimizer, lr, momentum, nesterov, weight_decay, beta1, beta2, eps, batch_size, seed,
       base_model, frozen, left(config_text, 40) AS config_text
  FROM pgdl.leaderboard WHERE run IN (:bi_forged_run, :bi_odd_run, :bi_transfer_run) ORDER BY run, rank;
SELECT run - :bi_first_run AS run, config, epoch, metric, value
  FROM pgdl.training_curves WHERE run IN (:bi_forged_run, :bi_odd_run, :bi_transfer_run)
 ORDER BY run, config, epoch, metric;

-- leave nothing behind
DELETE FROM pgdl.models WHERE run > :bi_first_run OR name LIKE 'bi\_%';
DELETE FROM pgdl.runs WHERE id > :bi_first_run;
DELETE FROM pgdl.configs WHERE set_name IN ('bi_set', 'bi_rank', 'bi_prune');
DELETE FROM pgdl.architectures WHERE name IN ('bi_small', 'bi_mlp');
DROP TABLE bi_rows, bi_packed, bi_valid, bi_lb, bi_rank_loss, bi_rank_f1, bi_prune, bi_resumed;
DROP ROLE regress_bi_alice, regress_bi_bob;
SELECT setval('pgdl.runs_id_seq', :bi_runs_seq, :'bi_runs_called'::boolean) > 0 AS restored,
       setval('pgdl.models_id_seq', :bi_models_seq, :'bi_models_called'::boolean) > 0 AS restored,
       setval('pgdl.configs_id_seq', :bi_configs_seq, :'bi_configs_called'::boolean) > 0 AS restored,
       setval('pgdl.architectures_id_seq', :bi_archs_seq, :'bi_archs_called'::boolean) > 0 AS restored,
       setval('pgdl.datasets_id_seq', :bi_datasets_seq, :'bi_datasets_called'::boolean) > 0 AS restored;
SELECT (SELECT count(*) FROM pgdl.runs WHERE id > :bi_first_run) AS runs,
       (SELECT count(*) FROM pgdl.models WHERE name LIKE 'bi\_%') AS models,
       (SELECT count(*) FROM pgdl.datasets WHERE packed::text LIKE 'bi\_%') AS datasets,
       (SELECT count(*) FROM pgdl.run_metrics WHERE run > :bi_first_run) AS metrics;
