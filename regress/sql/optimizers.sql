-- The rmsprop and adagrad optimizers and the huber loss: canonical forms, every
-- key's errors, training through pgdl.train, pgdl.fit and pgdl.fit_multiple
-- (resumed equals uninterrupted), evaluation and prediction of a huber model,
-- grids that mix optimizers, memory, transfer.  (PyTorch parity:
-- regress/metrics/check_optimizers.py; by hand: regress/unit/test_optim.c.)
SET client_min_messages = warning;

-- canonical forms: each optimizer's own keys, PyTorch's defaults filled in
SELECT pgdl.validate_config('{"optimizer": "rmsprop"}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "lr": 0.001, "alpha": 0.9, "eps": 1e-6, "momentum": 0.9,
                              "centered": true, "weight_decay": 0.01}');
SELECT pgdl.validate_config('{"optimizer": "adagrad"}');
SELECT pgdl.validate_config('{"optimizer": "adagrad", "lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.1,
                              "eps": 1e-8, "weight_decay": 0.001}');
-- the edges pass: alpha 0 and 1, momentum 0
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "alpha": 0}')->'alpha' AS alpha_0,
       pgdl.validate_config('{"optimizer": "rmsprop", "alpha": 1}')->'alpha' AS alpha_1;
SELECT pgdl.validate_spec('{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "huber"}');
SELECT pgdl.validate_spec('{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "huber", "delta": 0.25}');

-- errors name the key (SQLSTATE 22023)
\set VERBOSITY default
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "alpha": -0.1}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "alpha": 1.5}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "alpha": "NaN"}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "alpha": null}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "eps": 0}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "eps": -1e-8}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "eps": 1e39}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "momentum": 1}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "momentum": -0.5}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "centered": 1}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "lr": 0}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "weight_decay": -1}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "beta2": 0.9}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "nesterov": true}');
SELECT pgdl.validate_config('{"optimizer": "rmsprop", "lr_decay": 0.1}');
SELECT pgdl.validate_config('{"optimizer": "adagrad", "lr_decay": -0.1}');
SELECT pgdl.validate_config('{"optimizer": "adagrad", "lr_decay": 1e300}');
SELECT pgdl.validate_config('{"optimizer": "adagrad", "initial_accumulator_value": -1}');
SELECT pgdl.validate_config('{"optimizer": "adagrad", "initial_accumulator_value": "x"}');
SELECT pgdl.validate_config('{"optimizer": "adagrad", "eps": 0}');
SELECT pgdl.validate_config('{"optimizer": "adagrad", "momentum": 0.9}');
SELECT pgdl.validate_config('{"optimizer": "adagrad", "centered": false}');
SELECT pgdl.validate_config('{"optimizer": "adam", "alpha": 0.9}');
SELECT pgdl.validate_config('{"optimizer": "sgd", "initial_accumulator_value": 0.1}');
SELECT pgdl.validate_config('{"optimizer": "lion"}');
SELECT pgdl.validate_spec('{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "huber", "delta": 0}');
SELECT pgdl.validate_spec('{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "huber", "delta": -1}');
SELECT pgdl.validate_spec('{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "huber", "delta": 1e39}');
SELECT pgdl.validate_spec('{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "huber", "delta": "NaN"}');
SELECT pgdl.validate_spec('{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "huber", "delta": null}');
SELECT pgdl.validate_spec('{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "mse", "delta": 1}');
SELECT pgdl.validate_spec('{"input": [3], "layers": [{"type": "dense", "units": 2}], "delta": 1}');
SELECT pgdl.validate_spec('{"input": [3], "layers": [{"type": "dense", "units": 2}], "loss": "hinge"}');
\set VERBOSITY terse
SET client_min_messages = notice;
DO $$
BEGIN
  PERFORM pgdl.validate_config('{"optimizer": "rmsprop", "alpha": -1}');
EXCEPTION WHEN invalid_parameter_value THEN
  RAISE NOTICE 'invalid_parameter_value (%)', SQLSTATE;
END $$;
SET client_min_messages = warning;

-- optimizer state in memory: rmsprop keeps square_avg, a momentum buffer with momentum, grad_avg when
-- centered; adagrad its sums (4 bytes a parameter each)
\set op_spec '{"input": [4], "layers": [{"type": "dense", "units": 8}, {"type": "relu"}, {"type": "dense", "units": 3}]}'
SELECT c AS config, e.parameters, (e.memory->>'optimizer')::bigint / (4 * e.parameters) AS state_per_parameter
  FROM unnest(ARRAY['{"optimizer": "rmsprop"}', '{"optimizer": "rmsprop", "momentum": 0.9}',
                    '{"optimizer": "rmsprop", "momentum": 0.9, "centered": true}', '{"optimizer": "adagrad"}',
                    '{"optimizer": "adam"}']) WITH ORDINALITY AS t(c, k),
       LATERAL pgdl.estimate(:'op_spec', c::jsonb) e
 ORDER BY k;

-- a classification table and a regression table, each with a validation pack
CREATE TABLE op_rows AS
SELECT i, ARRAY[sin(i), cos(i), sin(2 * i), cos(3 * i)]::real[] AS x,
       (CASE WHEN sin(i) > 0.3 THEN 0 WHEN cos(i) > 0 THEN 1 ELSE 2 END) AS label,
       (3 * sin(i) - 2 * cos(3 * i) + CASE WHEN i % 17 = 0 THEN 8 ELSE 0 END)::real AS target
  FROM generate_series(1, 96) i;
SELECT pgdl.pack('op_rows', 'x', 'label', 'op_packed', buffer_rows => 16, partitions => 2) > 0 AS packed;
SELECT pgdl.pack('op_rows', 'x', 'label', 'op_valid', buffer_rows => 32, partitions => 1,
                 reference => 'op_packed') > 0 AS packed;
SELECT pgdl.pack('op_rows', 'x', 'target', 'op_reg', buffer_rows => 16, partitions => 2,
                 standardize_target => true) > 0 AS packed;
SELECT pgdl.pack('op_rows', 'x', 'target', 'op_reg_valid', buffer_rows => 32, partitions => 1,
                 reference => 'op_reg') > 0 AS packed;
SELECT pgdl.add_architecture('op_mlp', :'op_spec') > 0 AS added;
SELECT pgdl.add_architecture('op_huber', '{"input": [4], "layers": [{"type": "dense", "units": 8}, {"type": "relu"},
  {"type": "dense", "units": 1}], "loss": "huber", "delta": 0.5}') > 0 AS added;

-- the aggregate: each optimizer takes its own steps (other bytes than sgd's), and the blob keeps the optimizer
CREATE TABLE op_agg AS
SELECT c AS config, pgdl.train(x, y, n, pgdl.init_model(spec, c::jsonb), c::jsonb ORDER BY buffer_id) AS blob
  FROM op_packed, pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.05, "batch_size": 8}',
                    '{"optimizer": "rmsprop", "lr": 0.01, "batch_size": 8}',
                    '{"optimizer": "rmsprop", "lr": 0.01, "momentum": 0.5, "centered": true, "batch_size": 8}',
                    '{"optimizer": "adagrad", "lr": 0.05, "batch_size": 8}',
                    '{"optimizer": "adagrad", "lr": 0.05, "lr_decay": 0.1, "initial_accumulator_value": 0.5, "batch_size": 8}'])
         AS c
 WHERE a.name = 'op_mlp'
 GROUP BY c;
SELECT count(DISTINCT blob) AS distinct_models, count(*) AS models FROM op_agg;
-- without a configuration the aggregate trains on with the blob's optimizer, settings and state: the first
-- partition with the configuration, then the second without it (batch_size: its default), is the whole table with it
\set op_rms '{"optimizer": "rmsprop", "lr": 0.01, "momentum": 0.5, "centered": true, "alpha": 0.9, "batch_size": 128}'
WITH a AS (SELECT spec FROM pgdl.architectures WHERE name = 'op_mlp'),
     half AS (SELECT pgdl.train(x, y, n, pgdl.init_model(a.spec, :'op_rms'), :'op_rms' ORDER BY buffer_id) AS blob
                FROM op_packed, a WHERE part = 0),
     whole AS (SELECT pgdl.train(x, y, n, pgdl.init_model(a.spec, :'op_rms'), :'op_rms' ORDER BY part, buffer_id) AS blob
                 FROM op_packed, a)
SELECT (SELECT pgdl.train(x, y, n, half.blob ORDER BY buffer_id) FROM op_packed WHERE part = 1) = whole.blob
       AS halves_are_the_whole,
       half.blob <> whole.blob AS trained_on
  FROM half, whole;

-- pgdl.fit of a huber regressor: evaluate's loss is the huber loss of predict's outputs in target units (delta
-- scaled with the errors: std^2 times the loss in training units), no accuracy; it is a regression model
SELECT pgdl.fit('op_reg', 'op_huber', '{"optimizer": "rmsprop", "lr": 0.01, "batch_size": 8, "seed": 3}', 5,
                'op_reg_valid', name => 'op_huber_fit') > 0 AS fitted;
SELECT (target_normalization -> 'std' ->> 0)::float8 AS op_std FROM pgdl.datasets WHERE packed = 'op_reg'::regclass \gset
WITH p AS (SELECT target, (pgdl.predict('op_huber_fit', x))[1] AS z FROM op_rows),
     h AS (SELECT avg(CASE WHEN abs(z - target) < 0.5 * :op_std THEN 0.5 * (z - target) ^ 2
                           ELSE 0.5 * :op_std * (abs(z - target) - 0.25 * :op_std) END) AS by_hand FROM p)
SELECT abs(e.loss - h.by_hand) < 1e-4 * h.by_hand AS evaluate_is_huber, e.accuracy IS NULL AS no_accuracy, e.n,
       abs(t.loss - h.by_hand) < 1e-4 * h.by_hand AS evaluate_targets_is_huber
  FROM h, pgdl.evaluate('op_huber_fit', 'op_reg_valid') e, pgdl.evaluate_targets('op_huber_fit', 'op_reg_valid') t;
SELECT string_agg(metric, ', ' ORDER BY metric) AS regression_metrics
  FROM pgdl.metrics('op_huber_fit', 'op_reg_valid');
\set VERBOSITY default
SELECT pgdl.predict_class('op_huber_fit', '{0.1, 0.2, 0.3, 0.4}');
\set VERBOSITY terse
-- the model keeps its loss and delta; export writes no output transform but the targets' scaling, and an
-- import with loss huber takes PyTorch's default delta
SELECT spec->>'loss' AS loss, spec->'delta' AS delta FROM pgdl.models WHERE name = 'op_huber_fit';
-- in the zoo it is a regression model, with a dataset or without
INSERT INTO pgdl.models (name, spec, weights)
SELECT 'op_huber_blob', spec, pgdl.init_model(spec) FROM pgdl.architectures WHERE name = 'op_huber';
SELECT name, task, dataset IS NOT NULL AS has_dataset FROM pgdl.zoo WHERE name IN ('op_huber_blob', 'op_huber_fit')
 ORDER BY name;
SELECT position('pgdl_target_mul'::bytea IN pgdl.export_onnx('op_huber_fit')) > 0 AS unscaled_in_file,
       position('Sigmoid'::bytea IN pgdl.export_onnx('op_huber_fit')) = 0 AS no_sigmoid;
SELECT pgdl.import_onnx('op_huber_rt', pgdl.export_onnx('op_huber_fit'), dataset => 'op_reg', loss => 'huber') AS op_rt \gset
SELECT spec->>'loss' AS loss, spec->'delta' AS delta,
       pgdl.predict(:op_rt, '{0.1, 0.2, 0.3, 0.4}') = pgdl.predict('op_huber_fit', '{0.1, 0.2, 0.3, 0.4}') AS same_predictions
  FROM pgdl.models WHERE id = :op_rt;
SELECT pgdl.import_onnx('op_bad', pgdl.export_onnx('op_huber_fit'), loss => 'hinge');
-- a classification dataset refuses the huber loss
SELECT pgdl.fit('op_packed', '{"input": [4], "layers": [{"type": "dense", "units": 3}], "loss": "huber"}'::jsonb,
                '{"optimizer": "adagrad"}', 1);

-- fit_multiple: a grid mixing optimizers drops each key from the optimizers without it
SELECT pgdl.grid_search('op_grid', ARRAY['op_mlp'],
                        '{"optimizer": ["sgd", "rmsprop", "adagrad"], "lr": 0.02, "momentum": 0.5, "alpha": 0.9,
                          "lr_decay": 0.01, "batch_size": 8, "seed": 4}') AS configs;
SELECT config FROM pgdl.configs WHERE set_name = 'op_grid' ORDER BY config->>'optimizer';
-- resumed after 2 of 4 epochs, each model equals the uninterrupted run's, byte for byte (state in the checkpoints)
SET pgdl.keep_checkpoints = -1;
CREATE TABLE op_r1 AS SELECT * FROM pgdl.fit_multiple('op_packed', 'op_grid', 2, 'op_valid', workers => 1);
SELECT DISTINCT m.run AS op_run FROM op_r1 l JOIN pgdl.models m ON m.id = l.model \gset
UPDATE pgdl.runs SET status = 'running', epochs = 4 WHERE id = :op_run;
CREATE TABLE op_r2 AS SELECT * FROM pgdl.resume(:op_run);
RESET pgdl.keep_checkpoints;
CREATE TABLE op_straight AS SELECT * FROM pgdl.fit_multiple('op_packed', 'op_grid', 4, 'op_valid', workers => 2);
SELECT c.config->>'optimizer' AS optimizer, r.epochs, m.weights = ms.weights AS same_as_straight_run
  FROM op_r2 r JOIN pgdl.models m ON m.id = r.model JOIN pgdl.configs c ON c.id = r.config
  JOIN op_straight s ON s.config = r.config JOIN pgdl.models ms ON ms.id = s.model
 ORDER BY 1;
-- and pgdl.fit's model of a configuration is fit_multiple's of it with one worker
SELECT pgdl.fit('op_packed', 'op_mlp', c.config, 2) AS op_fit FROM pgdl.configs c
 WHERE c.set_name = 'op_grid' AND c.config->>'optimizer' = 'adagrad' \gset
SELECT m.weights = f.weights AS fit_equals_fit_multiple
  FROM op_r1 l JOIN pgdl.models m ON m.id = l.model JOIN pgdl.configs c ON c.id = l.config, pgdl.models f
 WHERE c.config->>'optimizer' = 'adagrad' AND f.id = :op_fit;

-- transfer: a head on a frozen base trains with rmsprop; the stored model is a whole network
SELECT pgdl.fit('op_packed', 'op_mlp', '{"lr": 0.05, "seed": 2}', 1, name => 'op_base') > 0 AS fitted;
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES
  ('op_tl', NULL, '{"base_model": "op_base", "freeze": 2, "optimizer": "rmsprop", "lr": 0.01, "centered": true,
                    "batch_size": 8}');
CREATE TABLE op_tl AS SELECT * FROM pgdl.fit_multiple('op_packed', 'op_tl', 2, 'op_valid', workers => 1);
-- the frozen layers are the base's, the head trained
SELECT t.layer, t.name, t."values" = b."values" AS as_base
  FROM op_tl l, pgdl.model_weights(l.model) t JOIN pgdl.model_weights('op_base') b USING (layer, name)
 ORDER BY t.layer, t.name DESC;

DROP TABLE op_rows, op_agg, op_r1, op_r2, op_straight, op_tl;
