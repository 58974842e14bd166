-- gelu and layernorm: specs, errors, and a network with both trained by pgdl.fit.
SET client_min_messages = warning;

-- canonical forms: layernorm's eps defaults to torch's 1e-5; ONNX names are accepted
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 8}, {"type": "layernorm"},
  {"type": "gelu"}, {"type": "dense", "units": 4}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "LayerNormalization", "eps": 0.001},
  {"type": "Gelu"}, {"type": "dense", "units": 2}]}');

-- errors name the layer and the field
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "layernorm", "eps": -1e-5}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "layernorm", "eps": 0}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "layernorm", "eps": "NaN"}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "layernorm", "momentum": 0.1}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "gelu", "approximate": "tanh"}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [1, 4, 4], "layers": [{"type": "layernorm"}, {"type": "flatten"}, {"type": "dense", "units": 2}]}');

-- a small dataset: 4 features in [0, 1), the class is the index of the largest
CREATE TABLE ln_rows AS
SELECT b, i, array_agg(v ORDER BY j) AS x,
       (array_position(array_agg(v ORDER BY j), max(v)) - 1)::real AS label
  FROM generate_series(0, 7) b, generate_series(1, 32) i, generate_series(1, 4) j,
       LATERAL (SELECT (abs(sin(b * 1000 + i * 10 + j)) * 997)::numeric % 1 AS u) s,
       LATERAL (SELECT u::real AS v) t
 GROUP BY b, i;
CREATE TABLE ln_packed (part integer, buffer_id integer, n integer, x real[], y real[]) PARTITION BY LIST (part);
CREATE TABLE ln_packed_p0 PARTITION OF ln_packed FOR VALUES IN (0);
INSERT INTO ln_packed
SELECT 0, b, count(*) FILTER (WHERE ord = 1), array_agg(v ORDER BY i, ord), array_agg(label ORDER BY i) FILTER (WHERE ord = 1)
  FROM ln_rows, unnest(x) WITH ORDINALITY AS u(v, ord) GROUP BY b;
INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features, n_targets, classes, label_type,
                           normalization, n_rows, n_buffers, buffer_rows, partitions, seed)
VALUES ('ln_packed', 'ln_rows', 'x', 'label', 'classification', 4, 1, '{0,1,2,3}', 'int4', '{"scale": 1}',
        256, 8, 32, 1, 1);

SELECT pgdl.add_architecture('ln_gelu_mlp', '{"input": [4], "layers": [{"type": "dense", "units": 16},
  {"type": "layernorm"}, {"type": "gelu"}, {"type": "dense", "units": 4}]}') > 0 AS stored;

-- trained twice with one seed: the same bytes; the loss goes down
\set cfg '{"optimizer": "adam", "lr": 0.01, "batch_size": 16, "seed": 5}'
SELECT pgdl.fit('ln_packed', 'ln_gelu_mlp', :'cfg', 5) AS fit_a \gset
SELECT pgdl.fit('ln_packed', 'ln_gelu_mlp', :'cfg', 5) AS fit_b \gset
SELECT a.weights = b.weights AS same_bytes
  FROM pgdl.models a, pgdl.models b WHERE a.id = :fit_a AND b.id = :fit_b;
SELECT (array_agg(train_loss ORDER BY epoch))[5] < (array_agg(train_loss ORDER BY epoch))[1] AS loss_went_down
  FROM pgdl.run_metrics WHERE run = (SELECT run FROM pgdl.models WHERE id = :fit_a);

-- it predicts a class for an example
SELECT array_length(pgdl.predict(:fit_a::bigint, '{0.9,0.1,0.2,0.3}'), 1) AS outputs;

-- exported to ONNX at opset 17 (LayerNormalization; gelu as its Erf subgraph, Gelu being opset 20);
-- regress/onnx/test_export_graph.py runs such files in onnxruntime
SELECT length(pgdl.export_onnx(:fit_a::bigint)) > 0 AS exported;

DELETE FROM pgdl.models WHERE id IN (:fit_a, :fit_b);
DELETE FROM pgdl.architectures WHERE name = 'ln_gelu_mlp';
DELETE FROM pgdl.datasets WHERE packed = 'ln_packed'::regclass;
DROP TABLE ln_packed, ln_rows;

-- sequences: an embedding of ids, softmax over features, the mean over steps
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4},
  {"type": "Softmax"}, {"type": "global_avgpool"}, {"type": "dense", "units": 2}]}');
SELECT layer, type, output_shape, parameters, flops_forward FROM pgdl.estimate_layers('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4},
  {"type": "softmax"}, {"type": "global_avgpool"}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "dim": 4}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4, "units": 3}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "dense", "units": 6}, {"type": "embedding", "vocab": 10, "dim": 4}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4}, {"type": "batchnorm"}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4}, {"type": "maxpool2d", "size": 2}, {"type": "dense", "units": 2}]}');

-- 6 ids in [0, 10) per row; the class: whether id 7 occurs
CREATE TABLE seq_rows AS
SELECT b, i, array_agg(v ORDER BY j) AS x, (7 = ANY (array_agg(v)))::int::real AS label
  FROM generate_series(0, 7) b, generate_series(1, 32) i, generate_series(1, 6) j,
       LATERAL (SELECT floor(((abs(sin(b * 1000 + i * 10 + j)) * 997)::numeric % 1) * 10)::real AS v) t
 GROUP BY b, i;
CREATE TABLE seq_packed (part integer, buffer_id integer, n integer, x real[], y real[]) PARTITION BY LIST (part);
CREATE TABLE seq_packed_p0 PARTITION OF seq_packed FOR VALUES IN (0);
INSERT INTO seq_packed
SELECT 0, b, count(*) FILTER (WHERE ord = 1), array_agg(v ORDER BY i, ord), array_agg(label ORDER BY i) FILTER (WHERE ord = 1)
  FROM seq_rows, unnest(x) WITH ORDINALITY AS u(v, ord) GROUP BY b;
INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features, n_targets, classes, label_type,
                           normalization, n_rows, n_buffers, buffer_rows, partitions, seed)
VALUES ('seq_packed', 'seq_rows', 'x', 'label', 'classification', 6, 1, '{0,1}', 'int4', '{"scale": 1}',
        256, 8, 32, 1, 1);
SELECT pgdl.add_architecture('seq_embed_mean', '{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 8},
  {"type": "global_avgpool"}, {"type": "dense", "units": 8}, {"type": "softmax"}, {"type": "dense", "units": 2}]}') > 0 AS stored;

\set cfg '{"optimizer": "adam", "lr": 0.05, "batch_size": 16, "seed": 5}'
SELECT pgdl.fit('seq_packed', 'seq_embed_mean', :'cfg', 8) AS seq_a \gset
SELECT pgdl.fit('seq_packed', 'seq_embed_mean', :'cfg', 8) AS seq_b \gset
SELECT a.weights = b.weights AS same_bytes
  FROM pgdl.models a, pgdl.models b WHERE a.id = :seq_a AND b.id = :seq_b;
SELECT (array_agg(train_loss ORDER BY epoch))[8] < (array_agg(train_loss ORDER BY epoch))[1] AS loss_went_down
  FROM pgdl.run_metrics WHERE run = (SELECT run FROM pgdl.models WHERE id = :seq_a);
SELECT array_length(pgdl.predict(:seq_a::bigint, '{7,1,2,3,4,5}'), 1) AS outputs;

-- a gru (as torch.nn.GRU, batch_first): the last state, or every step's with return_sequences
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4},
  {"type": "gru", "units": 5, "return_sequences": true}, {"type": "gru", "units": 3}, {"type": "dense", "units": 2}]}');
SELECT layer, type, output_shape, parameters FROM pgdl.estimate_layers('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4},
  {"type": "gru", "units": 5, "return_sequences": true}, {"type": "gru", "units": 3}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "gru", "units": 5}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4}, {"type": "gru", "units": 5, "return_sequences": 1}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4}, {"type": "gru"}]}');
SELECT pgdl.add_architecture('seq_gru', '{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 8},
  {"type": "gru", "units": 16}, {"type": "dense", "units": 2}]}') > 0 AS stored;
SELECT pgdl.fit('seq_packed', 'seq_gru', :'cfg', 8) AS gru_a \gset
SELECT pgdl.fit('seq_packed', 'seq_gru', :'cfg', 8) AS gru_b \gset
SELECT a.weights = b.weights AS same_bytes
  FROM pgdl.models a, pgdl.models b WHERE a.id = :gru_a AND b.id = :gru_b;
SELECT (array_agg(train_loss ORDER BY epoch))[8] < (array_agg(train_loss ORDER BY epoch))[1] AS loss_went_down
  FROM pgdl.run_metrics WHERE run = (SELECT run FROM pgdl.models WHERE id = :gru_a);
SELECT array_length(pgdl.predict(:gru_a::bigint, '{7,1,2,3,4,5}'), 1) AS outputs;
SELECT layer, name, shape FROM pgdl.model_weights(:gru_a::bigint) WHERE layer = 1;
DELETE FROM pgdl.models WHERE id IN (:gru_a, :gru_b);
DELETE FROM pgdl.architectures WHERE name = 'seq_gru';

-- conv1d over the steps (as torch.nn.Conv1d on [batch, features, steps]), trained by pgdl.fit
SELECT layer, type, output_shape, parameters FROM pgdl.estimate_layers('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4},
  {"type": "conv1d", "filters": 5, "kernel": 3, "padding": 1}, {"type": "conv1d", "filters": 2, "kernel": 2, "stride": 2},
  {"type": "flatten"}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "conv1d", "filters": 5, "kernel": 3}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4}, {"type": "conv1d", "filters": 5, "kernel": 7}]}');
SELECT pgdl.add_architecture('seq_conv1d', '{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 8},
  {"type": "conv1d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "global_avgpool"},
  {"type": "dense", "units": 2}]}') > 0 AS stored;
SELECT pgdl.fit('seq_packed', 'seq_conv1d', :'cfg', 8) AS c1_a \gset
SELECT pgdl.fit('seq_packed', 'seq_conv1d', :'cfg', 8) AS c1_b \gset
SELECT a.weights = b.weights AS same_bytes
  FROM pgdl.models a, pgdl.models b WHERE a.id = :c1_a AND b.id = :c1_b;
SELECT (array_agg(train_loss ORDER BY epoch))[8] < (array_agg(train_loss ORDER BY epoch))[1] AS loss_went_down
  FROM pgdl.run_metrics WHERE run = (SELECT run FROM pgdl.models WHERE id = :c1_a);
SELECT layer, name, shape FROM pgdl.model_weights(:c1_a::bigint) WHERE layer = 1;
DELETE FROM pgdl.models WHERE id IN (:c1_a, :c1_b);
DELETE FROM pgdl.architectures WHERE name = 'seq_conv1d';

-- a transformer's pieces: dense per_step (torch.nn.Linear on each step) and embedding positions (a learned [steps, dim] table)
SELECT layer, type, output_shape, parameters FROM pgdl.estimate_layers('{"input": [6], "layers": [
  {"type": "embedding", "vocab": 10, "dim": 4, "positions": true}, {"type": "dense", "units": 8, "per_step": true},
  {"type": "gelu"}, {"type": "dense", "units": 4, "per_step": true}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4, "positions": true},
  {"type": "dense", "units": 3, "per_step": true}, {"type": "dense", "units": 2, "per_step": false}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "dense", "units": 3, "per_step": true}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "embedding", "vocab": 10, "dim": 4, "positions": 1}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "relu", "per_step": true}]}');
SELECT layer, name, shape FROM pgdl.model_weights(pgdl.init_model('{"input": [6], "layers": [
  {"type": "embedding", "vocab": 10, "dim": 4, "positions": true}, {"type": "dense", "units": 3, "per_step": true}]}'));
-- flatten with steps: flat features or an image made a sequence, its values as they lie
SELECT layer, type, output_shape, parameters FROM pgdl.estimate_layers('{"input": [2, 3, 4], "layers": [
  {"type": "flatten", "steps": 6}, {"type": "layernorm"}, {"type": "softmax"}, {"type": "gru", "units": 3},
  {"type": "flatten"}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [12], "layers": [{"type": "flatten", "steps": 4}, {"type": "flatten"},
  {"type": "Flatten", "steps": 0}, {"type": "dense", "units": 2}]}')->'layers';
SELECT pgdl.validate_spec('{"input": [12], "layers": [{"type": "flatten", "steps": 5}]}');
SELECT pgdl.validate_spec('{"input": [12], "layers": [{"type": "flatten", "steps": -1}]}');
SELECT pgdl.validate_spec('{"input": [12], "layers": [{"type": "flatten", "steps": 1e12}]}');
SELECT pgdl.validate_spec('{"input": [12], "layers": [{"type": "flatten", "steps": 2.5}]}');
SELECT pgdl.validate_spec('{"input": [12], "layers": [{"type": "flatten", "steps": null}]}');
SELECT pgdl.validate_spec('{"input": [12], "layers": [{"type": "dense", "units": 2, "steps": 3}]}');
-- a model with steps keeps them through its blob: it predicts as the spec says (per step softmax sums to 1)
SELECT round(sum(p)::numeric, 5) AS sum_of_probabilities FROM unnest(pgdl.predict(pgdl.init_model('{"input": [6],
  "loss": "mse", "layers": [{"type": "flatten", "steps": 2}, {"type": "softmax"}, {"type": "flatten"}]}'),
  ARRAY[1, 2, 3, -1, 0, 4]::real[])) AS p;
-- softmax with log: its logarithm (torch's nn.LogSoftmax), kept by the spec and the blob
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "softmax", "log": true}, {"type": "softmax", "log": false},
  {"type": "dense", "units": 2}]}')->'layers';
SELECT round(sum(exp(p))::numeric, 5) AS sum_of_exp FROM unnest(pgdl.predict(pgdl.init_model('{"input": [4],
  "loss": "mse", "layers": [{"type": "softmax", "log": true}]}'), ARRAY[100, 0, -100, 3]::real[])) AS p;
SELECT p FROM unnest(pgdl.predict(pgdl.init_model('{"input": [2], "loss": "mse",
  "layers": [{"type": "softmax", "log": true}]}'), ARRAY[0, 200]::real[])) AS p;
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "softmax", "log": 1}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "softmax", "log": null}]}');
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "sigmoid", "log": true}]}');
-- softmax over_steps: over each feature's column of a sequence (ONNX's Softmax at axis 1 of [batch, steps,
-- features]): each column of the 3 steps of 2 sums to 1, kept by the spec; a flat input has no steps
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "flatten", "steps": 3},
  {"type": "softmax", "over_steps": true, "log": true}, {"type": "flatten"}]}')->'layers'->1;
SELECT array_agg(round(s::numeric, 5)) FROM (SELECT p[1] + p[3] + p[5] AS s FROM (SELECT pgdl.predict(pgdl.init_model(
  '{"input": [6], "loss": "mse", "layers": [{"type": "flatten", "steps": 3}, {"type": "softmax", "over_steps": true},
  {"type": "flatten"}]}'), ARRAY[1, 2, 3, 4, 5, 6]::real[]) AS p) q UNION ALL SELECT p[2] + p[4] + p[6]
  FROM (SELECT pgdl.predict(pgdl.init_model('{"input": [6], "loss": "mse", "layers": [{"type": "flatten", "steps": 3},
  {"type": "softmax", "over_steps": true}, {"type": "flatten"}]}'), ARRAY[1, -2, 30, 4, 5, -60]::real[]) AS p) r) t;
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "softmax", "over_steps": true}]}');
-- ONNX's operator names for gru and slice
SELECT pgdl.validate_spec('{"input": [6], "layers": [{"type": "Slice", "start": 1, "length": 5},
  {"type": "embedding", "vocab": 10, "dim": 4}, {"type": "GRU", "units": 3}]}')->'layers';

-- an id outside [0, vocab) or not whole is an error naming the layer (22003), in prediction and in training
SELECT pgdl.predict(:seq_a::bigint, '{7,1,2,3,4,10}');
SELECT pgdl.predict(:seq_a::bigint, '{7,1,2.5,3,4,5}');
SELECT pgdl.predict(:seq_a::bigint, '{7,1,-1,3,4,5}');
SELECT set_config('pgdl_test.seq_model', :'seq_a', false) IS NOT NULL AS set;
DO $$
BEGIN
  PERFORM pgdl.predict(current_setting('pgdl_test.seq_model')::bigint, '{7,1,2,3,4,10}');
EXCEPTION WHEN numeric_value_out_of_range THEN
  RAISE WARNING 'caught %: %', SQLSTATE, SQLERRM;
END $$;
UPDATE seq_packed SET x[5] = 12 WHERE buffer_id = 3;
SELECT pgdl.fit('seq_packed', 'seq_embed_mean', :'cfg', 1);
DO $$
BEGIN
  PERFORM pgdl.fit('seq_packed', 'seq_embed_mean', '{"seed": 5}', 1);
EXCEPTION WHEN numeric_value_out_of_range THEN
  RAISE WARNING 'caught %: %', SQLSTATE, SQLERRM;
END $$;

-- the weights are a [vocab, dim] table; exported to ONNX as Cast and Gather, the file taking the ids
-- as floats (regress/onnx/test_export_graph.py runs such files in onnxruntime)
SELECT layer, name, shape FROM pgdl.model_weights(:seq_a::bigint) WHERE layer = 0;
SELECT length(pgdl.export_onnx(:seq_a::bigint)) > 0 AS exported;

-- softmax inside a network is ONNX's Softmax over the last axis; pgdl's import takes a Softmax only as the output
SELECT length(pgdl.export_onnx(pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 3},
  {"type": "softmax"}, {"type": "dense", "units": 2}]}'), false)) > 0 AS exported;
SELECT pgdl.import_onnx('seq_softmax_back', pgdl.export_onnx(pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 3},
  {"type": "softmax"}, {"type": "dense", "units": 2}]}'), false));

DELETE FROM pgdl.models WHERE id IN (:seq_a, :seq_b);
DELETE FROM pgdl.architectures WHERE name = 'seq_embed_mean';
DELETE FROM pgdl.datasets WHERE packed = 'seq_packed'::regclass;
DROP TABLE seq_packed, seq_rows;

-- an order-dependent sequence task (is the first id below the last?) that a bag of ids cannot solve:
-- a gru and a bag model through pgdl.fit_multiple, byte-identical to pgdl.fit (its runs are removed at the end)
SELECT coalesce(max(id), 0) AS seqo_first_run FROM pgdl.runs \gset
CREATE TABLE seqo_rows AS
SELECT b, i, array_agg(v ORDER BY j) AS x,
       ((array_agg(v ORDER BY j))[1] < (array_agg(v ORDER BY j))[8])::int::real AS label
  FROM generate_series(0, 7) b, generate_series(1, 32) i, generate_series(1, 8) j,
       LATERAL (SELECT floor(((abs(sin(b * 1000 + i * 10 + j * 3)) * 997)::numeric % 1) * 4)::real AS v) t
 GROUP BY b, i;
CREATE TABLE seqo_packed (part integer, buffer_id integer, n integer, x real[], y real[]) PARTITION BY LIST (part);
CREATE TABLE seqo_packed_p0 PARTITION OF seqo_packed FOR VALUES IN (0);
INSERT INTO seqo_packed
SELECT 0, b, count(*) FILTER (WHERE ord = 1), array_agg(v ORDER BY i, ord), array_agg(label ORDER BY i) FILTER (WHERE ord = 1)
  FROM seqo_rows, unnest(x) WITH ORDINALITY AS u(v, ord) GROUP BY b;
INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features, n_targets, classes, label_type,
                           normalization, n_rows, n_buffers, buffer_rows, partitions, seed)
VALUES ('seqo_packed', 'seqo_rows', 'x', 'label', 'classification', 8, 1, '{0,1}', 'int4', '{"scale": 1}',
        256, 8, 32, 1, 1);
SELECT pgdl.add_architecture('seqo_gru', '{"input": [8], "layers": [{"type": "embedding", "vocab": 4, "dim": 8},
  {"type": "gru", "units": 16}, {"type": "dense", "units": 2}]}') > 0 AS stored;
SELECT pgdl.add_architecture('seqo_bag', '{"input": [8], "layers": [{"type": "embedding", "vocab": 4, "dim": 8},
  {"type": "global_avgpool"}, {"type": "dense", "units": 2}]}') > 0 AS stored;
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'seqo_set', a.id, '{"optimizer": "adam", "lr": 0.05, "batch_size": 16, "seed": 5}'
  FROM pgdl.architectures a WHERE a.name IN ('seqo_gru', 'seqo_bag') ORDER BY a.name;
CREATE TABLE seqo_results AS
SELECT * FROM pgdl.fit_multiple('seqo_packed', 'seqo_set', 6, workers => 1);
CREATE TABLE seqo_fits AS
SELECT c.id AS config, pgdl.fit('seqo_packed', a.name, c.config, 6) AS model
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture
 WHERE c.set_name = 'seqo_set' ORDER BY c.id;
SELECT r.architecture, mf.weights = mm.weights AS fit_equals_fit_multiple
  FROM seqo_fits f JOIN pgdl.models mf ON mf.id = f.model
  JOIN seqo_results r ON r.config = f.config JOIN pgdl.models mm ON mm.id = r.model
 ORDER BY r.architecture;
-- the gru learns the order; the bag of ids stays near chance (about half the rows are positive)
SELECT a.name, (array_agg(m.train_accuracy ORDER BY m.epoch DESC))[1] > 0.75 AS above_075
  FROM seqo_fits f JOIN pgdl.models pm ON pm.id = f.model JOIN pgdl.run_metrics m ON m.run = pm.run
  JOIN pgdl.configs c ON c.id = f.config JOIN pgdl.architectures a ON a.id = c.architecture
 GROUP BY a.name ORDER BY a.name;
DELETE FROM pgdl.models WHERE id IN (SELECT model FROM seqo_fits UNION SELECT model FROM seqo_results);
DELETE FROM pgdl.configs WHERE set_name = 'seqo_set';
DELETE FROM pgdl.architectures WHERE name IN ('seqo_gru', 'seqo_bag');
DELETE FROM pgdl.datasets WHERE packed = 'seqo_packed'::regclass;
DROP TABLE seqo_results, seqo_fits, seqo_packed, seqo_rows;
DELETE FROM pgdl.runs WHERE id > :seqo_first_run;
-- pools with pads (issue 40): "padding" before, "padding_end" after (the same unless given), "ceil_mode" and,
-- for an average, "count_include_pad" (torch's default, true); an unpadded pool reads as before
SELECT pgdl.validate_spec('{"input": [2, 8, 8], "layers": [
  {"type": "maxpool2d", "size": 3, "stride": 2, "padding": 1, "ceil_mode": true},
  {"type": "avgpool2d", "size": 2, "stride": 1, "padding": 0, "padding_end": 1},
  {"type": "avgpool2d", "size": 3, "padding": 1, "count_include_pad": false},
  {"type": "avgpool2d", "size": 1, "count_include_pad": false}, {"type": "flatten"}, {"type": "dense", "units": 2}]}');
SELECT array_length(pgdl.predict(pgdl.init_model('{"input": [1, 7, 7], "layers": [{"type": "maxpool2d", "size": 3,
  "stride": 2, "padding": 1, "ceil_mode": true}, {"type": "flatten"}, {"type": "dense", "units": 2}]}'),
  array_fill(-1.0::real, ARRAY[49])), 1) AS outputs;
SELECT pgdl.validate_spec('{"input": [1, 6, 6], "layers": [{"type": "maxpool2d", "size": 2, "padding": 2}]}');
SELECT pgdl.validate_spec('{"input": [1, 6, 6], "layers": [{"type": "avgpool2d", "size": 2, "padding_end": -1}]}');
SELECT pgdl.validate_spec('{"input": [1, 6, 6], "layers": [{"type": "avgpool2d", "size": 2, "padding": null}]}');
SELECT pgdl.validate_spec('{"input": [1, 6, 6], "layers": [{"type": "maxpool2d", "size": 2, "ceil_mode": "yes"}]}');
SELECT pgdl.validate_spec('{"input": [1, 6, 6], "layers": [{"type": "maxpool2d", "size": 2, "count_include_pad": true}]}');
SELECT pgdl.validate_spec('{"input": [1, 6, 6], "layers": [{"type": "avgpool2d", "size": 2, "padding": 1e10}]}');
