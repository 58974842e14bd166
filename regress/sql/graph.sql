-- The graph form of the description language: layers name their inputs; add and concat merge
-- branches.  Specs and their errors, a residual network trained by pgdl.fit (twice: the same
-- bytes; on two threads too) and by pgdl.fit_multiple (the bytes of pgdl.fit).
SET client_min_messages = warning;
SELECT coalesce(max(id), 0) AS gr_first_run FROM pgdl.runs \gset

-- canonical form: names and inputs kept, every field filled in; a plain list is still a chain
\set res '{"input": [1, 6, 6], "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1}, {"type": "batchnorm"}, {"type": "relu", "name": "stem"}, {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1, "groups": 2}, {"type": "batchnorm"}, {"type": "relu"}, {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1}, {"type": "batchnorm", "name": "branch"}, {"type": "add", "inputs": ["branch", "stem"]}, {"type": "relu"}, {"type": "global_avgpool"}, {"type": "flatten"}, {"type": "dense", "units": 3}]}'
SELECT jsonb_pretty(pgdl.validate_spec(:'res'));
SELECT pgdl.validate_spec(pgdl.validate_spec(:'res')) = pgdl.validate_spec(:'res') AS round_trip;
-- concat along channels ([4, 6, 6] and the input [1, 6, 6]) and along features; ONNX names too
SELECT pgdl.validate_spec('{"input": [1, 6, 6], "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1, "name": "c"},
  {"type": "Concat", "inputs": ["c", "input"]}, {"type": "conv2d", "filters": 2, "kernel": 1, "name": "mix"},
  {"type": "flatten", "name": "f"}, {"type": "dense", "units": 3, "inputs": ["f"], "name": "d"},
  {"type": "Add", "inputs": ["d", "d"]}]}')->'layers' AS concat_layers;
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 3, "name": "a"},
  {"type": "dense", "units": 2, "inputs": ["input"], "name": "b"}, {"type": "concat", "inputs": ["a", "b", "input"]},
  {"type": "dense", "units": 2}]}')->'layers'->2 AS concat_flat;

-- errors name the layer and the field
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "name": "a"},
  {"type": "add", "inputs": ["a", "nope"]}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "inputs": ["b"]},
  {"type": "dense", "units": 4, "name": "b"}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "name": "a"},
  {"type": "add", "name": "s", "inputs": ["a", "s"]}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 3, "name": "a"},
  {"type": "add", "inputs": ["a", "input"]}]}');
SELECT pgdl.validate_spec('{"input": [1, 6, 6], "layers": [{"type": "conv2d", "filters": 2, "kernel": 3, "stride": 2, "name": "c"},
  {"type": "concat", "inputs": ["c", "input"]}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "name": "unused"},
  {"type": "dense", "units": 2, "inputs": ["input"]}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "name": "a"},
  {"type": "add", "inputs": ["a"]}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "name": "a"},
  {"type": "dense", "units": 2, "inputs": ["a", "input"]}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "name": "a"},
  {"type": "dense", "units": 4, "name": "a"}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "name": "input"}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "name": ""}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "inputs": "input"}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "inputs": [1]}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "inputs": []}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 4, "inputs": null}]}');

-- conv2d "groups": depthwise (a 3x3 filter per channel) then pointwise; groups must divide channels and filters
SELECT pgdl.validate_spec('{"input": [4, 6, 6], "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1, "groups": 4},
  {"type": "conv2d", "filters": 8, "kernel": 1, "groups": 1}, {"type": "flatten"}, {"type": "dense", "units": 2}]}')->'layers'->0 AS depthwise;
SELECT parameters FROM pgdl.estimate('{"input": [4, 6, 6], "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "groups": 4},
  {"type": "flatten"}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [4, 6, 6], "layers": [{"type": "conv2d", "filters": 6, "kernel": 3, "groups": 4},
  {"type": "flatten"}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [4, 6, 6], "layers": [{"type": "maxpool2d", "size": 2, "groups": 2},
  {"type": "flatten"}, {"type": "dense", "units": 2}]}');

-- a depthwise convolution's tensors: 4 filters of [1, 3, 3], then its own 4 biases (not 4 x 4 x 9 floats on)
\set dw '{"input": [4, 3, 3], "loss": "mse", "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "groups": 4}, {"type": "flatten"}]}'
SELECT name, shape, "values" FROM pgdl.model_weights(pgdl.model_from_weights(:'dw',
  (SELECT array_agg(CASE WHEN k <= 36 THEN 0.5 ELSE k - 36 END ORDER BY k) FROM generate_series(1, 40) k)::real[]))
 ORDER BY layer, name;
-- on zeros each channel's output is its bias; on ones, 9 x 0.5 more
SELECT pgdl.predict(pgdl.model_from_weights(:'dw',
  (SELECT array_agg(CASE WHEN k <= 36 THEN 0.5 ELSE k - 36 END ORDER BY k) FROM generate_series(1, 40) k)::real[]),
  array_fill(v, ARRAY[36])) AS out FROM (VALUES (0::real), (1)) z(v);

-- 6x6 images; the class is where the brightest quarter is (left, right or neither)
CREATE TABLE gr_rows AS
SELECT i, array_agg(v ORDER BY p) AS x,
       (CASE WHEN sum(v) FILTER (WHERE p % 6 < 3) > sum(v) FILTER (WHERE p % 6 >= 3) + 1 THEN 0
             WHEN sum(v) FILTER (WHERE p % 6 >= 3) > sum(v) FILTER (WHERE p % 6 < 3) + 1 THEN 1 ELSE 2 END) AS label
  FROM generate_series(1, 96) i, generate_series(0, 35) p,
       LATERAL (SELECT ((abs(sin(i * 37 + p * 11)) * 1000)::numeric % 1)::real AS v) s
 GROUP BY i;
SELECT pgdl.pack('gr_rows', 'x', 'label', 'gr_packed', buffer_rows => 16, partitions => 2) > 0 AS packed;
SELECT pgdl.add_architecture('gr_resnet', :'res') > 0 AS stored;

-- pgdl.estimate counts the graph's parameters: three 3x3 convolutions (one of 2 groups), three batchnorms, the head
SELECT parameters = (1 * 9 * 4 + 4) + (2 * 9 * 4 + 4) + (4 * 9 * 4 + 4) + 3 * 8 + (4 * 3 + 3) AS parameters_counted
  FROM pgdl.estimate(:'res');

-- trained twice with one seed: the same bytes; the loss goes down
\set cfg '{"optimizer": "adam", "lr": 0.02, "batch_size": 16, "seed": 7}'
SELECT pgdl.fit('gr_packed', 'gr_resnet', :'cfg', 6) AS fit_a \gset
SELECT pgdl.fit('gr_packed', 'gr_resnet', :'cfg', 6) AS fit_b \gset
SELECT a.weights = b.weights AS same_bytes FROM pgdl.models a, pgdl.models b WHERE a.id = :fit_a AND b.id = :fit_b;
SELECT (array_agg(train_loss ORDER BY epoch))[6] < (array_agg(train_loss ORDER BY epoch))[1] AS loss_went_down
  FROM pgdl.run_metrics WHERE run = (SELECT run FROM pgdl.models WHERE id = :fit_a);
-- the stored model keeps its graph (names and inputs) and predicts
SELECT spec = pgdl.validate_spec(:'res') AS spec_kept FROM pgdl.models WHERE id = :fit_a;
SELECT array_length(pgdl.predict(:fit_a::bigint, array_fill(0.5::real, ARRAY[36])), 1) AS outputs;

-- on two threads: the same bytes run after run
SET pgdl.max_fit_threads = 2;
SELECT pgdl.fit('gr_packed', 'gr_resnet', '{"optimizer": "adam", "lr": 0.02, "batch_size": 16, "seed": 7, "threads": 2}', 2) AS fit_t1 \gset
SELECT pgdl.fit('gr_packed', 'gr_resnet', '{"optimizer": "adam", "lr": 0.02, "batch_size": 16, "seed": 7, "threads": 2}', 2) AS fit_t2 \gset
SELECT a.weights = b.weights AS same_bytes_on_threads FROM pgdl.models a, pgdl.models b WHERE a.id = :fit_t1 AND b.id = :fit_t2;
RESET pgdl.max_fit_threads;

-- pgdl.fit_multiple of a configuration set over the graph: each model the bytes of pgdl.fit
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'gr_set', a.id, c::jsonb
  FROM pgdl.architectures a,
       (VALUES ('{"optimizer": "adam", "lr": 0.02, "batch_size": 16, "seed": 7}'),
               ('{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 8, "seed": 3}')) v(c)
 WHERE a.name = 'gr_resnet';
CREATE TABLE gr_lb AS SELECT * FROM pgdl.fit_multiple('gr_packed', 'gr_set', 6, workers => 2);
CREATE TABLE gr_fits AS
SELECT config, pgdl.fit('gr_packed', 'gr_resnet', config_json, 6) AS model FROM gr_lb ORDER BY config;
SELECT l.config_json->>'optimizer' AS optimizer, l.epochs, m.weights = mf.weights AS same_as_fit
  FROM gr_lb l JOIN pgdl.models m ON m.id = l.model
  JOIN gr_fits f ON f.config = l.config JOIN pgdl.models mf ON mf.id = f.model
 ORDER BY 1;

-- exported to ONNX, its adds as Add nodes and its grouped convolution a Conv with group
-- (regress/onnx/test_export_graph.py runs such files in onnxruntime)
SELECT length(pgdl.export_onnx(:fit_a::bigint)) > 0 AS exported;

DELETE FROM pgdl.models WHERE run > :gr_first_run;
DELETE FROM pgdl.runs WHERE id > :gr_first_run;
DELETE FROM pgdl.configs WHERE set_name = 'gr_set';
DELETE FROM pgdl.architectures WHERE name = 'gr_resnet';
DELETE FROM pgdl.datasets WHERE packed = 'gr_packed'::regclass;
DROP TABLE gr_lb, gr_fits, gr_rows, gr_packed;
SELECT (SELECT count(*) FROM pgdl.runs WHERE id > :gr_first_run) AS runs_left,
       (SELECT count(*) FROM pgdl.models WHERE run > :gr_first_run) AS models_left;
