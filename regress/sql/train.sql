-- Training: the description language, architectures, estimates, the pgdl.train
-- aggregate and pgdl.fit, on a small hand-packed dataset.
-- Epoch NOTICEs carry timings, so this file shows warnings and errors only.
SET client_min_messages = warning;

-- specs come back in canonical form; ONNX operator names are accepted
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "Gemm", "units": 8}, {"type": "Relu"},
  {"type": "dense", "units": 3, "init": "glorot"}]}');
SELECT pgdl.validate_spec('{"input": [1, 8, 8], "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
  {"type": "batchnorm"}, {"type": "leaky_relu", "alpha": 0.1}, {"type": "maxpool2d", "size": 2},
  {"type": "dropout", "rate": 0.25}, {"type": "global_avgpool"}, {"type": "flatten"},
  {"type": "dense", "units": 1}, {"type": "sigmoid"}], "loss": "binary_cross_entropy"}');

-- spec errors name the layer and the field
SELECT pgdl.validate_spec('[]');
SELECT pgdl.validate_spec('{"layers": [{"type": "relu"}]}');
SELECT pgdl.validate_spec('{"input": [2, 3], "layers": [{"type": "relu"}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": []}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"units": 3}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense3d"}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 0}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 2.5}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": "ten"}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "unit": 3}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 3, "init": "zeros"}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "conv2d", "filters": 2, "kernel": 3}]}');
SELECT pgdl.validate_spec('{"input": [1, 5, 5], "layers": [{"type": "conv2d", "filters": 2, "kernel": 3, "padding": 3}]}');
SELECT pgdl.validate_spec('{"input": [1, 5, 5], "layers": [{"type": "maxpool2d", "size": 7}]}');
SELECT pgdl.validate_spec('{"input": [1, 5, 5], "layers": [{"type": "maxpool2d", "size": 2, "kernel": 2}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dropout", "rate": 1}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 1}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 2}], "loss": "hinge"}');
SELECT pgdl.validate_spec('{"input": [1048576], "layers": [{"type": "dense", "units": 1048576}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 2}], "optimizer": "sgd"}');

-- training configurations: defaults filled in, errors name the key
SELECT pgdl.validate_config('{}');
SELECT pgdl.validate_config('{"optimizer": "adamw", "lr": 0.001, "weight_decay": 0.01, "batch_size": 64, "seed": 7}');
SELECT pgdl.validate_config('{"optimizer": "lion"}');
SELECT pgdl.validate_config('{"lr": 0}');
SELECT pgdl.validate_config('{"momentum": 1.5}');
SELECT pgdl.validate_config('{"nesterov": true}');
SELECT pgdl.validate_config('{"nesterov": "yes", "momentum": 0.9}');
SELECT pgdl.validate_config('{"batch_size": 0}');
SELECT pgdl.validate_config('{"seed": -1}');
SELECT pgdl.validate_config('{"learning_rate": 0.1}');

-- cost of design.md's reference models (the predicted pace: estimate.sql)
SELECT parameters, flops_forward, flops_train, activation_bytes, batch_size, memory_bytes, basis FROM pgdl.estimate('{"input": [784], "layers": [{"type": "dense", "units": 512}, {"type": "relu"},
  {"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 10}]}',
  '{"momentum": 0.9}');
SELECT * FROM pgdl.estimate_layers('{"input": [1, 28, 28], "layers": [
  {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "flatten"}, {"type": "dense", "units": 10}]}');

-- architectures
SELECT pgdl.add_architecture('toy_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 32},
  {"type": "relu"}, {"type": "dense", "units": 4}]}') > 0 AS stored;
SELECT name, spec FROM pgdl.architectures WHERE name = 'toy_mlp';
SELECT pgdl.add_architecture('toy_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 4}]}');
SELECT pgdl.add_architecture('', '{"input": [4], "layers": [{"type": "dense", "units": 4}]}');
SELECT pgdl.add_architecture('broken', '{"input": [4], "layers": [{"type": "dense"}]}');

-- a toy dataset packed by hand: 4 features in [0, 1), the class is the index of
-- the largest; 16 buffers of 32 examples in 2 partitions, and the same buffers in 1
CREATE TABLE toy_rows AS
SELECT b, i, array_agg(v ORDER BY j) AS x,
       (array_position(array_agg(v ORDER BY j), max(v)) - 1)::real AS label
  FROM generate_series(0, 15) b, generate_series(1, 32) i, generate_series(1, 4) j,
       LATERAL (SELECT (abs(sin(b * 1000 + i * 10 + j)) * 997)::numeric % 1 AS u) s,
       LATERAL (SELECT u::real AS v) t
 GROUP BY b, i;
CREATE TABLE toy_packed (part integer, buffer_id integer, n integer, x real[], y real[]) PARTITION BY LIST (part);
CREATE TABLE toy_packed_p0 PARTITION OF toy_packed FOR VALUES IN (0);
CREATE TABLE toy_packed_p1 PARTITION OF toy_packed FOR VALUES IN (1);
INSERT INTO toy_packed
SELECT b % 2, b, count(*) FILTER (WHERE ord = 1), array_agg(v ORDER BY i, ord), array_agg(label ORDER BY i) FILTER (WHERE ord = 1)
  FROM toy_rows, unnest(x) WITH ORDINALITY AS u(v, ord) GROUP BY b;
CREATE TABLE toy_one (part integer, buffer_id integer, n integer, x real[], y real[]) PARTITION BY LIST (part);
CREATE TABLE toy_one_p0 PARTITION OF toy_one FOR VALUES IN (0);
INSERT INTO toy_one SELECT 0, buffer_id, n, x, y FROM toy_packed;
INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features, n_targets, classes, label_type,
                           normalization, n_rows, n_buffers, buffer_rows, partitions, seed)
VALUES ('toy_packed', 'toy_rows', 'x', 'label', 'classification', 4, 1, '{0,1,2,3}', 'int4', '{"scale": 1}',
        512, 16, 32, 2, 1),
       ('toy_one', 'toy_rows', 'x', 'label', 'classification', 4, 1, '{0,1,2,3}', 'int4', '{"scale": 1}',
        512, 16, 32, 1, 1);
SELECT y[1:8] AS first_labels, n, array_length(x, 1) AS x_len FROM toy_packed WHERE buffer_id = 0;

-- initial models: same seed, same bytes
SELECT pgdl.init_model(spec, '{"seed": 1}') = pgdl.init_model(spec, '{"seed": 1}') AS same_seed_same_model,
       pgdl.init_model(spec, '{"seed": 1}') <> pgdl.init_model(spec, '{"seed": 2}') AS other_seed_other_model
  FROM pgdl.architectures WHERE name = 'toy_mlp';

-- the aggregate over one partition, in buffer order, is deterministic
\set cfg '{"lr": 0.1, "momentum": 0.9, "batch_size": 16, "seed": 3}'
SELECT count(DISTINCT m) AS distinct_results, min(length(m)) = max(length(m)) AS same_size
  FROM (SELECT pgdl.train(x, y, n, pgdl.init_model(a.spec, :'cfg'), :'cfg' ORDER BY buffer_id) AS m
          FROM toy_packed, pgdl.architectures a WHERE a.name = 'toy_mlp' AND part = 0
        UNION ALL
        SELECT pgdl.train(x, y, n, pgdl.init_model(a.spec, :'cfg'), :'cfg' ORDER BY buffer_id)
          FROM toy_packed, pgdl.architectures a WHERE a.name = 'toy_mlp' AND part = 0) r;

-- pgdl.fit for one epoch of a one-partition table is that aggregate, byte for byte
SELECT pgdl.fit('toy_one', 'toy_mlp', :'cfg', 1) AS one_epoch \gset
SELECT m.weights = (SELECT pgdl.train(x, y, n, pgdl.init_model(a.spec, :'cfg'), :'cfg' ORDER BY buffer_id)
                      FROM toy_one, pgdl.architectures a WHERE a.name = 'toy_mlp') AS fit_equals_aggregate
  FROM pgdl.models m WHERE m.id = :one_epoch;

-- and the same configuration fitted twice gives the same model
SELECT pgdl.fit('toy_packed', 'toy_mlp', :'cfg', 3) AS fit_a \gset
SELECT pgdl.fit('toy_packed', 'toy_mlp', :'cfg', 3) AS fit_b \gset
SELECT a.weights = b.weights AS refit_identical
  FROM pgdl.models a, pgdl.models b WHERE a.id = :fit_a AND b.id = :fit_b;
-- later epochs train on buffers kept in memory: the same bytes as rereading them
SET pgdl.train_cache_mem = 0;
SELECT pgdl.fit('toy_packed', 'toy_mlp', :'cfg', 3) AS fit_c \gset
SET pgdl.train_cache_mem = '1kB';
SELECT pgdl.fit('toy_packed', 'toy_mlp', :'cfg', 3) AS fit_d \gset
RESET pgdl.train_cache_mem;
SELECT a.weights = c.weights AS cached_equals_reread, a.weights = d.weights AS partly_cached_equals_reread
  FROM pgdl.models a, pgdl.models c, pgdl.models d WHERE a.id = :fit_a AND c.id = :fit_c AND d.id = :fit_d;

-- a real run: the loss falls and accuracy ends far above chance (0.25)
SELECT pgdl.fit('toy_packed', 'toy_mlp', '{"lr": 0.1, "momentum": 0.9, "batch_size": 32}', 30,
                validation => 'toy_packed', name => 'toy_model') AS toy_id \gset
SELECT m.name, a.name AS architecture, d.packed AS dataset, m.config->>'optimizer' AS optimizer,
       (m.metrics->>'epoch')::int AS epochs, (m.metrics->>'validation_accuracy')::float > 0.85 AS accurate,
       r.status, r.finished IS NOT NULL AS finished
  FROM pgdl.models m JOIN pgdl.architectures a ON a.id = m.architecture
  JOIN pgdl.datasets d ON d.id = m.dataset JOIN pgdl.runs r ON r.id = m.run
 WHERE m.id = :toy_id;
SELECT count(*) AS epochs, count(*) FILTER (WHERE model = :toy_id) AS linked,
       bool_and(seconds >= 0 AND images_per_second > 0) AS timed,
       (array_agg(train_loss ORDER BY epoch))[30] < 0.5 * (array_agg(train_loss ORDER BY epoch))[1] AS loss_fell
  FROM pgdl.run_metrics WHERE run = (SELECT run FROM pgdl.models WHERE id = :toy_id);

-- the model's metrics are its last epoch's, the same numbers as pgdl.run_metrics
SELECT array(SELECT jsonb_object_keys(m.metrics) ORDER BY 1) AS keys,
       (m.metrics->>'train_loss')::float8 = r.train_loss AND (m.metrics->>'train_accuracy')::float8 = r.train_accuracy
       AND (m.metrics->>'validation_loss')::float8 = r.validation_loss
       AND (m.metrics->>'validation_accuracy')::float8 = r.validation_accuracy AS metrics_match
  FROM pgdl.models m JOIN pgdl.run_metrics r ON r.run = m.run AND r.epoch = (m.metrics->>'epoch')::int
 WHERE m.id = :toy_id;

-- a jsonb spec instead of an architecture name
SELECT pgdl.fit('toy_packed', '{"input": [4], "layers": [{"type": "dense", "units": 4}]}'::jsonb,
                '{"optimizer": "adam", "lr": 0.05}', 2) > 0 AS fitted_from_spec;

-- fit errors
SELECT pgdl.fit('toy_packed', 'toy_mlp', :'cfg', 1, name => 'toy_model');
SELECT pgdl.fit('toy_packed', 'no_such_architecture');
SELECT pgdl.fit('toy_rows', 'toy_mlp');
SELECT pgdl.fit('toy_packed', 'toy_mlp', '{}', 0);
SELECT pgdl.fit('toy_packed', 'toy_mlp', '{"lr": "fast"}');
SELECT pgdl.fit('toy_packed', '{"input": [5], "layers": [{"type": "dense", "units": 4}]}'::jsonb);
SELECT pgdl.fit('toy_packed', '{"input": [4], "layers": [{"type": "dense", "units": 3}]}'::jsonb);
SELECT pgdl.fit('toy_packed', '{"input": [4], "layers": [{"type": "dense", "units": 4}], "loss": "mse"}'::jsonb);
SELECT pgdl.fit('toy_packed', 'toy_mlp', '{}', 1, NULL::regclass, NULL) > 0 AS null_validation_and_name_are_fine;
SELECT pgdl.fit('toy_packed', NULL::text);
SELECT pgdl.fit(NULL::regclass, 'toy_mlp');
SELECT pgdl.fit('toy_packed', 'toy_mlp', NULL);
SELECT pgdl.fit('toy_packed', 'toy_mlp', '{}', NULL);
SELECT pgdl.fit('toy_packed', NULL::jsonb);
SELECT pgdl.fit('toy_packed', '{"input": [4], "layers": [{"type": "dense", "units": 4}]}'::jsonb, NULL);
UPDATE pgdl.datasets SET classes = '{a,b,c,d}' WHERE packed = 'toy_one'::regclass;
SELECT pgdl.fit('toy_packed', 'toy_mlp', '{}', 1, validation => 'toy_one');
UPDATE pgdl.datasets SET classes = '{0,1,2,3}' WHERE packed = 'toy_one'::regclass;
SELECT count(*) AS runs_left_running FROM pgdl.runs WHERE status = 'running';

-- aggregate errors
SELECT pgdl.train(x, y, n, NULL) FROM toy_packed;
SELECT pgdl.train(x[1:10], y, n, pgdl.init_model(a.spec)) FROM toy_packed, pgdl.architectures a WHERE a.name = 'toy_mlp';
SELECT pgdl.train(x, y[1:3], n, pgdl.init_model(a.spec)) FROM toy_packed, pgdl.architectures a WHERE a.name = 'toy_mlp';
SELECT pgdl.train(x, y, 0, pgdl.init_model(a.spec)) FROM toy_packed, pgdl.architectures a WHERE a.name = 'toy_mlp';
SELECT pgdl.train(x, array_fill(7::real, ARRAY[n]), n, pgdl.init_model(a.spec)) FROM toy_packed, pgdl.architectures a WHERE a.name = 'toy_mlp';
SELECT pgdl.train(x, y, n, '\x00'::bytea) FROM toy_packed;
SELECT pgdl.train(x, y, n, pgdl.init_model(a.spec), '{"optimizer": "sgdx"}') FROM toy_packed, pgdl.architectures a WHERE a.name = 'toy_mlp';
SELECT pgdl.train(ARRAY[[1,2],[3,4]]::real[], y, n, pgdl.init_model(a.spec)) FROM toy_packed, pgdl.architectures a WHERE a.name = 'toy_mlp';
SELECT pgdl.train(x, y, n, pgdl.init_model(a.spec)) IS NULL AS empty_input_gives_null
  FROM toy_packed, pgdl.architectures a WHERE a.name = 'toy_mlp' AND false;

-- parallel aggregation: partial states are combined by averaging models
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET parallel_leader_participation = off;
SELECT pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 4}]}', '{"lr": 0.1}') AS init \gset
EXPLAIN (COSTS OFF) SELECT pgdl.train(x, y, n, :'init'::bytea) FROM toy_packed;
SELECT pgdl.train(x, y, n, :'init'::bytea) AS parallel_model FROM toy_packed \gset
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET parallel_leader_participation;
-- the averaged model is a valid model of the same shape that trains on
SELECT length(:'parallel_model'::bytea) = length(:'init'::bytea) AS same_shape,
       length(pgdl.train(x, y, n, :'parallel_model'::bytea ORDER BY buffer_id)) = length(:'init'::bytea) AS trains_on
  FROM toy_packed WHERE part = 0;

-- cancellation: a statement timeout stops a long fit, whose run is failed (not left running) when the error comes
\set VERBOSITY terse
SET statement_timeout = '1s';	-- long enough for the run to be recorded on a loaded machine
SELECT pgdl.fit('toy_packed', 'toy_mlp', '{}', 100000);
RESET statement_timeout;
\set VERBOSITY default
SELECT count(*) AS runs_left_running FROM pgdl.runs WHERE status = 'running';
SELECT status AS cancelled_run FROM pgdl.runs ORDER BY id DESC LIMIT 1;

-- dropping a packed table removes its dataset row; models keep their weights
SELECT count(*) AS toy_one_datasets FROM pgdl.datasets WHERE packed = 'toy_one'::regclass;
DROP TABLE toy_one;
SELECT count(*) AS datasets_of_toy_rows FROM pgdl.datasets WHERE source = 'toy_rows';
SELECT count(*) AS orphaned_models_kept FROM pgdl.models WHERE id = :one_epoch AND dataset IS NULL;

-- a finished run records when it finished, not when its transaction started
SELECT bool_and(finished > started) AS timed FROM pgdl.runs WHERE kind = 'fit' AND status = 'finished';

-- a spec in canonical form is its own canonical form, byte for byte
SELECT pgdl.validate_spec(spec)::text = spec::text AS fixed_point FROM pgdl.architectures WHERE name = 'toy_mlp';
SELECT pgdl.validate_spec(s)::text = pgdl.validate_spec(pgdl.validate_spec(s))::text AS fixed_point,
       pgdl.validate_spec(s)->'layers'->1 AS leaky_relu
  FROM (VALUES ('{"input": [1, 8, 8], "layers": [{"type": "batchnorm", "eps": 0.001, "momentum": 0.3},
    {"type": "leaky_relu", "alpha": 0.3333333333}, {"type": "dropout", "rate": 0.7},
    {"type": "avgpool2d", "size": 2}, {"type": "Flatten"}, {"type": "Gemm", "units": 2, "init": "he"}],
    "loss": "mse"}'::jsonb)) v(s);

-- a base model's name with quotes and backslashes is a string of the canonical configuration
SELECT pgdl.fit('toy_packed', 'toy_mlp', '{}', 1, name => E'toy "quoted" \\ model') > 0 AS fitted;
SELECT pgdl.grid_search('toy_quoted', '{}', jsonb_build_object('base_model', E'toy "quoted" \\ model', 'freeze', 1))
  AS added;
SELECT config->>'base_model' = E'toy "quoted" \\ model' AS round_trip, config
  FROM pgdl.configs WHERE set_name = 'toy_quoted';
SELECT pgdl.grid_search('toy_quoted', '{}', '{"base_model": "toy \"quoted\\ model", "freeze": 1}');
DELETE FROM pgdl.configs WHERE set_name = 'toy_quoted';
