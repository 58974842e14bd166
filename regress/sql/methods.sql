-- Training methods in a configuration: learning-rate schedules (step, cosine,
-- warmup), gradient clipping, weight decay without biases and norms, label
-- smoothing, early stopping.  Validation of every key; pgdl.fit and
-- pgdl.fit_multiple give the same bytes with them; grid search takes them.
SET client_min_messages = warning;
SELECT coalesce(max(id), 0) AS mt_first_run FROM pgdl.runs \gset

-- canonical forms: a key appears when used, with its defaults
SELECT pgdl.validate_config('{"schedule": "step", "step_size": 2}');
SELECT pgdl.validate_config('{"schedule": "cosine", "warmup_epochs": 2, "lr": 0.1}');
SELECT pgdl.validate_config('{"optimizer": "adamw", "warmup_steps": 100, "warmup_start_factor": 0.01, "clip_norm": 1,
                              "no_decay_bias_norm": true, "label_smoothing": 0.1}');
SELECT pgdl.validate_config('{"patience": 3, "min_delta": 0.001, "monitor": "validation_accuracy"}');
-- "none" and false are the defaults: the canonical form leaves them out
SELECT pgdl.validate_config('{"schedule": "none", "no_decay_bias_norm": false}') = pgdl.validate_config('{}') AS same;

-- errors name the key (SQLSTATE 22023)
\set VERBOSITY default
SELECT pgdl.validate_config('{"schedule": "linear"}');
SELECT pgdl.validate_config('{"schedule": null}');
SELECT pgdl.validate_config('{"schedule": "step"}');
SELECT pgdl.validate_config('{"schedule": "step", "step_size": 0}');
SELECT pgdl.validate_config('{"schedule": "step", "step_size": 1.5}');
SELECT pgdl.validate_config('{"schedule": "step", "step_size": 1e12}');
SELECT pgdl.validate_config('{"schedule": "step", "step_size": 2, "gamma": 0}');
SELECT pgdl.validate_config('{"schedule": "step", "step_size": 2, "gamma": "NaN"}');
SELECT pgdl.validate_config('{"step_size": 2}');
SELECT pgdl.validate_config('{"schedule": "cosine", "eta_min": -1}');
SELECT pgdl.validate_config('{"schedule": "cosine", "lr": 0.1, "eta_min": 0.5}');
SELECT pgdl.validate_config('{"eta_min": 0}');
SELECT pgdl.validate_config('{"warmup_epochs": -1}');
SELECT pgdl.validate_config('{"warmup_steps": 1e300}');
SELECT pgdl.validate_config('{"warmup_epochs": 2, "warmup_steps": 10}');
SELECT pgdl.validate_config('{"warmup_start_factor": 0.1}');
SELECT pgdl.validate_config('{"warmup_steps": 10, "warmup_start_factor": 0}');
SELECT pgdl.validate_config('{"clip_norm": 0}');
SELECT pgdl.validate_config('{"clip_norm": -1}');
SELECT pgdl.validate_config('{"clip_norm": 1e39}');
SELECT pgdl.validate_config('{"clip_norm": null}');
SELECT pgdl.validate_config('{"label_smoothing": 1.5}');
SELECT pgdl.validate_config('{"no_decay_bias_norm": 1}');
SELECT pgdl.validate_config('{"patience": 0}');
SELECT pgdl.validate_config('{"min_delta": 0.1}');
SELECT pgdl.validate_config('{"patience": 2, "min_delta": -0.1}');
SELECT pgdl.validate_config('{"patience": 2, "monitor": "train_loss"}');
\set VERBOSITY terse
SET client_min_messages = notice;
DO $$
BEGIN
  PERFORM pgdl.validate_config('{"clip_norm": -1}');
EXCEPTION WHEN invalid_parameter_value THEN
  RAISE NOTICE 'invalid_parameter_value (%)', SQLSTATE;
END $$;
SET client_min_messages = warning;

CREATE TABLE mt_rows AS
SELECT i, ARRAY[sin(i), cos(i), sin(2 * i), cos(3 * i)]::real[] AS x,
       (CASE WHEN sin(i) > 0.3 THEN 0 WHEN cos(i) > 0 THEN 1 ELSE 2 END) AS label
  FROM generate_series(1, 96) i;
SELECT pgdl.pack('mt_rows', 'x', 'label', 'mt_packed', buffer_rows => 16, partitions => 2) > 0 AS packed;
SELECT pgdl.pack('mt_rows', 'x', 'label', 'mt_valid', buffer_rows => 32, partitions => 1,
                 reference => 'mt_packed') > 0 AS packed;
SELECT pgdl.add_architecture('mt_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 8},
  {"type": "layernorm"}, {"type": "relu"}, {"type": "dense", "units": 3}]}') > 0 AS added;

-- label smoothing is cross_entropy's; patience needs a validation set; the aggregate counts no epochs
SELECT pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 3}], "loss": "mse"}',
                       '{"label_smoothing": 0.1}');
SELECT pgdl.fit('mt_packed', 'mt_mlp', '{"patience": 2}', 2);
SELECT pgdl.train(x, y, n, pgdl.init_model(spec, '{}'), '{"schedule": "cosine"}' ORDER BY buffer_id)
  FROM mt_packed, pgdl.architectures WHERE name = 'mt_mlp';
-- the aggregate takes the methods that count steps, not epochs
SELECT length(pgdl.train(x, y, n, pgdl.init_model(spec, '{}'),
                         '{"clip_norm": 0.5, "warmup_steps": 4, "label_smoothing": 0.1, "no_decay_bias_norm": true,
                           "weight_decay": 0.01}' ORDER BY buffer_id)) > 0 AS trained
  FROM mt_packed, pgdl.architectures WHERE name = 'mt_mlp';

-- each method changes the bytes (against the plain configuration), and a fit is reproducible
CREATE TABLE mt_each AS
SELECT c AS config, pgdl.fit('mt_packed', 'mt_mlp', c::jsonb, 3, 'mt_valid') AS model
  FROM (VALUES ('{"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "batch_size": 4}'),
               ('{"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "batch_size": 4, "schedule": "step", "step_size": 1}'),
               ('{"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "batch_size": 4, "schedule": "cosine"}'),
               ('{"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "batch_size": 4, "warmup_epochs": 2}'),
               ('{"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "batch_size": 4, "warmup_steps": 10}'),
               ('{"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "batch_size": 4, "clip_norm": 0.1}'),
               ('{"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "batch_size": 4, "no_decay_bias_norm": true}'),
               ('{"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "batch_size": 4, "label_smoothing": 0.2}')) v(c);
SELECT (SELECT count(DISTINCT m.weights) FROM mt_each e JOIN pgdl.models m ON m.id = e.model) AS distinct_models,
       (SELECT count(*) FROM mt_each) AS fits;
SELECT pgdl.fit('mt_packed', 'mt_mlp', '{"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "batch_size": 4, "schedule": "cosine"}',
                3, 'mt_valid') AS mt_again \gset
SELECT m.weights = a.weights AS same_bytes
  FROM mt_each e JOIN pgdl.models m ON m.id = e.model, pgdl.models a
 WHERE e.config LIKE '%cosine%' AND a.id = :mt_again;

-- fit_multiple: a schedule, clipping, label smoothing and early stopping; min_delta 10 means no epoch
-- after the first improves, so patience 1 stops after epoch 2 of 4 and patience 3 never stops
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'mt_set', a.id, c::jsonb
  FROM pgdl.architectures a,
       (VALUES ('{"lr": 0.1, "momentum": 0.9, "batch_size": 4, "seed": 5, "schedule": "cosine", "warmup_epochs": 1,
                  "clip_norm": 0.5, "label_smoothing": 0.1, "patience": 1, "min_delta": 10}'),
               ('{"optimizer": "adamw", "lr": 0.01, "batch_size": 4, "seed": 5, "schedule": "step", "step_size": 1,
                  "gamma": 0.5, "warmup_steps": 6, "no_decay_bias_norm": true, "patience": 3, "min_delta": 10}'),
               ('{"lr": 0.05, "batch_size": 8, "seed": 6, "patience": 1, "monitor": "validation_accuracy",
                  "min_delta": 2}')) v(c)
 WHERE a.name = 'mt_mlp';
CREATE TABLE mt_lb AS SELECT * FROM pgdl.fit_multiple('mt_packed', 'mt_set', 4, 'mt_valid', workers => 2);
SELECT config_json->>'schedule' AS schedule, epochs, stopped FROM mt_lb ORDER BY config_json->>'schedule';
-- the run's metrics record the stop on the epoch it came after
SELECT l.config_json->>'schedule' AS schedule, array_agg(rm.epoch ORDER BY rm.epoch) AS epochs,
       array_agg(coalesce(rm.decision, '-') ORDER BY rm.epoch) AS decisions
  FROM mt_lb l JOIN pgdl.models m ON m.id = l.model JOIN pgdl.run_metrics rm ON rm.run = m.run AND rm.config = l.config
 GROUP BY 1 ORDER BY 1;
SELECT l.config_json->>'schedule' AS schedule, m.metrics->'early_stopped' AS early_stopped
  FROM mt_lb l JOIN pgdl.models m ON m.id = l.model ORDER BY 1;
-- pgdl.fit of each configuration: the same epochs, the same bytes
CREATE TABLE mt_fits AS
SELECT config, pgdl.fit('mt_packed', 'mt_mlp', config_json, 4, 'mt_valid') AS model FROM mt_lb ORDER BY config;
SELECT l.config_json->>'schedule' AS schedule, m.weights = mf.weights AS same_as_fit,
       m.metrics->'epoch' = mf.metrics->'epoch' AS same_epochs
  FROM mt_lb l JOIN pgdl.models m ON m.id = l.model
  JOIN mt_fits f ON f.config = l.config JOIN pgdl.models mf ON mf.id = f.model ORDER BY 1;
SELECT rm.epoch, rm.decision FROM mt_fits f JOIN pgdl.models m ON m.id = f.model
  JOIN pgdl.run_metrics rm ON rm.run = m.run
 WHERE m.config->>'schedule' = 'cosine' ORDER BY rm.epoch;

-- successive halving with early stopping: a model stopped early is not waited for at a rung
CREATE TABLE mt_sha AS SELECT * FROM pgdl.fit_multiple('mt_packed', 'mt_set', 4, 'mt_valid', workers => 2,
                                                       strategy => 'successive_halving', eta => 2);
SELECT count(*) AS models, bool_and(epochs BETWEEN 1 AND 4) AS trained FROM mt_sha;

-- grid search over schedules and clipping: schedule-specific keys go with their schedule
SELECT pgdl.grid_search('mt_grid', ARRAY['mt_mlp'],
                        '{"schedule": ["cosine", "none"], "clip_norm": [0.5, 1], "label_smoothing": 0.1}') AS configs;
SELECT config->>'schedule' AS schedule, config->>'clip_norm' AS clip_norm, config->>'label_smoothing' AS ls
  FROM pgdl.configs WHERE set_name = 'mt_grid' ORDER BY 1, 2;
SELECT pgdl.grid_search('mt_grid_bad', ARRAY['mt_mlp'], '{"clip_norm": [0.5, -1]}');
SELECT pgdl.random_search('mt_random', ARRAY['mt_mlp'],
                          '{"schedule": {"choice": ["step", "cosine"]}, "step_size": 2, "clip_norm": {"log_uniform": [0.1, 10]}}',
                          4, seed => 7) AS configs;
SELECT count(*) FILTER (WHERE config ? 'step_size') = count(*) FILTER (WHERE config->>'schedule' = 'step') AS step_keys_with_step,
       bool_and((config->>'clip_norm')::float8 BETWEEN 0.1 AND 10) AS clip_in_range
  FROM pgdl.configs WHERE set_name = 'mt_random';

-- pgdl.resume: early stopping goes on counting from the epochs before (patience 2 stops after epoch 3 of 4)
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'mt_resume', a.id, '{"lr": 0.1, "momentum": 0.9, "batch_size": 4, "seed": 5, "schedule": "step", "step_size": 1,
                           "gamma": 0.5, "clip_norm": 0.5, "patience": 2, "min_delta": 10}'
  FROM pgdl.architectures a WHERE a.name = 'mt_mlp';
-- patience turns restore_best on: the stored model is epoch 1's (min_delta 10: no later epoch improves), read
-- from its checkpoint, which this finished run must keep for the resume below to restore it again
SET pgdl.keep_checkpoints = -1;
CREATE TABLE mt_r1 AS SELECT * FROM pgdl.fit_multiple('mt_packed', 'mt_resume', 2, 'mt_valid', workers => 1);
SELECT DISTINCT m.run AS mt_run FROM mt_r1 l JOIN pgdl.models m ON m.id = l.model \gset
UPDATE pgdl.runs SET status = 'running', epochs = 4 WHERE id = :mt_run;
CREATE TABLE mt_r2 AS SELECT * FROM pgdl.resume(:mt_run);
RESET pgdl.keep_checkpoints;
CREATE TABLE mt_straight AS SELECT * FROM pgdl.fit_multiple('mt_packed', 'mt_resume', 4, 'mt_valid', workers => 2);
SELECT r.epochs, s.epochs AS straight_epochs, m.weights = ms.weights AS same_as_straight_run
  FROM mt_r2 r JOIN pgdl.models m ON m.id = r.model
  JOIN mt_straight s ON s.config = r.config JOIN pgdl.models ms ON ms.id = s.model;

-- rank_by and restore_best (issue 35): a grid of 8 configurations with patience; rank 1 has the best
-- validation loss of the stored epochs, which are each model's best epoch by its run_metrics
SELECT pgdl.grid_search('mt_rank', ARRAY['mt_mlp'],
                        '{"lr": [0.01, 0.3], "batch_size": [4, 16], "seed": [1, 2], "patience": 1}') AS configs;
SET pgdl.keep_checkpoints = -1;
CREATE TABLE mt_ranked AS SELECT * FROM pgdl.fit_multiple('mt_packed', 'mt_rank', 4, 'mt_valid', workers => 2);
RESET pgdl.keep_checkpoints;
WITH best AS (SELECT rm.config, min(rm.validation_loss) AS best_loss
                FROM mt_ranked l JOIN pgdl.models m ON m.id = l.model
                JOIN pgdl.run_metrics rm ON rm.run = m.run AND rm.config = l.config GROUP BY rm.config)
SELECT count(*) AS models,
       bool_and(l.validation_loss = b.best_loss) AS stored_is_best_epoch,
       bool_and(l.rank = 1 OR l.validation_loss >= (SELECT validation_loss FROM mt_ranked WHERE rank = 1)) AS rank1_best,
       array_agg(l.config ORDER BY l.rank) = array_agg(l.config ORDER BY l.validation_loss, l.config) AS ranked_by_loss
  FROM mt_ranked l JOIN best b ON b.config = l.config;
-- the stored model is its best epoch's checkpoint, byte for byte; models.metrics say which epoch and how far it went
SELECT bool_and(c.weights = m.weights) AS same_as_checkpoint,
       bool_and((m.metrics->>'epoch')::int <= coalesce((m.metrics->>'epochs_trained')::int, l.epochs)) AS epochs_shown,
       bool_and((m.metrics->>'validation_loss')::float8 = l.validation_loss) AS metrics_of_stored
  FROM mt_ranked l JOIN pgdl.models m ON m.id = l.model
  JOIN pgdl.checkpoints c ON c.run = m.run AND c.config = l.config AND c.epoch = (m.metrics->>'epoch')::int;
SELECT bool_and(z.best_validation_loss = l.validation_loss) AS zoo_shows_stored
  FROM mt_ranked l JOIN pgdl.zoo z ON z.id = l.model;
-- rank_by f1 (macro): run_metrics keep each epoch's validation scores, rank 1 has the best F1 of the stored epochs
CREATE TABLE mt_f1 AS SELECT * FROM pgdl.fit_multiple('mt_packed', 'mt_rank', 2, 'mt_valid', workers => 2,
                                                      rank_by => 'f1');
SELECT count(*) AS models,
       array_agg(l.config ORDER BY l.rank) = array_agg(l.config ORDER BY (m.metrics->>'validation_f1')::float8 DESC, l.config) AS ranked_by_f1,
       bool_and(m.metrics ? 'validation_roc_auc') AS scores_stored
  FROM mt_f1 l JOIN pgdl.models m ON m.id = l.model;
SELECT count(*) > 0 AS epochs_scored FROM mt_f1 l JOIN pgdl.models m ON m.id = l.model
  JOIN pgdl.run_metrics rm ON rm.run = m.run AND rm.config = l.config WHERE rm.validation_metrics ? 'f1';
-- refused: an unknown name, a regression metric on a classifier, a metric without a validation set
SELECT * FROM pgdl.fit_multiple('mt_packed', 'mt_rank', 2, 'mt_valid', rank_by => 'f2');
SELECT * FROM pgdl.fit_multiple('mt_packed', 'mt_rank', 2, 'mt_valid', rank_by => 'r2');
SELECT * FROM pgdl.fit_multiple('mt_packed', 'mt_resume', 2, rank_by => 'accuracy');
SELECT pgdl.validate_config('{"patience": 2, "monitor": "f1"}')->>'monitor' AS monitor;
SELECT pgdl.validate_config('{"restore_best": true}') AS restore_without_patience;
SELECT pgdl.validate_config('{"patience": 2, "restore_best": false}') AS restore_off;
SELECT pgdl.validate_config('{"patience": 2, "restore_best": 1}');
-- pgdl.fit with restore_best: the stored model equals a fit of exactly the best epoch's epochs
SELECT pgdl.fit('mt_packed', 'mt_mlp', '{"lr": 0.3, "batch_size": 4, "restore_best": true}', 4, 'mt_valid') AS mt_fit_best \gset
SELECT (metrics->>'epoch')::int AS mt_best_epoch FROM pgdl.models WHERE id = :mt_fit_best \gset
SELECT pgdl.fit('mt_packed', 'mt_mlp', '{"lr": 0.3, "batch_size": 4}', :mt_best_epoch, 'mt_valid') AS mt_fit_short \gset
SELECT a.weights = b.weights AS same_as_best_epoch_fit,
       (a.metrics->>'validation_loss')::float8 = (SELECT min(validation_loss) FROM pgdl.run_metrics WHERE run = a.run) AS best_loss
  FROM pgdl.models a, pgdl.models b WHERE a.id = :mt_fit_best AND b.id = :mt_fit_short;
SELECT pgdl.fit('mt_packed', 'mt_mlp', '{"restore_best": true}', 2);
SELECT pgdl.fit('mt_packed', 'mt_mlp', '{"patience": 1, "monitor": "r2"}', 2, 'mt_valid');

-- what this test added
DELETE FROM pgdl.models WHERE run > :mt_first_run;
DELETE FROM pgdl.runs WHERE id > :mt_first_run;
DELETE FROM pgdl.configs WHERE architecture = (SELECT id FROM pgdl.architectures WHERE name = 'mt_mlp');
DELETE FROM pgdl.architectures WHERE name = 'mt_mlp';
DROP TABLE mt_rows, mt_packed, mt_valid, mt_each, mt_lb, mt_fits, mt_sha, mt_r1, mt_r2, mt_straight, mt_ranked, mt_f1;
