-- The model zoo: pgdl.spec_summary, the view pgdl.zoo, pgdl.similar_models, warm starts
-- ("warm_start" in pgdl.fit, configuration sets and pgdl.init_model).
SET client_min_messages = warning;

CREATE TABLE zoo_rows AS
SELECT i, ARRAY[a, b, c, d]::real[] AS x,
       CASE WHEN a + b > c + d THEN (CASE WHEN a > b THEN 0 ELSE 1 END)
            ELSE (CASE WHEN c > d THEN 2 ELSE 3 END) END AS label,
       ARRAY[a, b, c, d, a * b, c * d, a - c, b - d]::real[] AS wide, (a > b)::integer AS parity
  FROM generate_series(1, 256) i,
       LATERAL (SELECT (abs(sin(i * 12.9898)) * 43758.5453)::numeric % 1 AS a,
                       (abs(sin(i * 78.233)) * 43758.5453)::numeric % 1 AS b,
                       (abs(sin(i * 37.719)) * 43758.5453)::numeric % 1 AS c,
                       (abs(sin(i * 93.989)) * 43758.5453)::numeric % 1 AS d) r;
SELECT pgdl.pack('zoo_rows', 'x', 'label', 'zoo_packed', buffer_rows => 16, partitions => 2) > 0 AS packed;
SELECT pgdl.pack('zoo_rows', 'x', 'label', 'zoo_valid', buffer_rows => 64, partitions => 1,
                 reference => 'zoo_packed') > 0 AS packed;
-- a second dataset: 8 features, 2 classes
SELECT pgdl.pack('zoo_rows', 'wide', 'parity', 'zoo_wide', buffer_rows => 16, partitions => 2) > 0 AS packed;

-- ---- pgdl.spec_summary: a spec in a line ----
SELECT * FROM pgdl.spec_summary('{"input": [1, 8, 8], "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
  {"type": "relu"}, {"type": "maxpool2d", "size": 2}, {"type": "flatten"}, {"type": "dense", "units": 3}]}');
SELECT * FROM pgdl.spec_summary('{"input": [6], "layers": [{"type": "dense", "units": 5}, {"type": "leaky_relu"},
  {"type": "dropout", "rate": 0.25}, {"type": "batchnorm"}, {"type": "dense", "units": 2}], "loss": "mse"}');
SELECT * FROM pgdl.spec_summary(NULL);
SELECT * FROM pgdl.spec_summary('{"input": [4], "layers": [{"type": "dense"}]}');
SELECT * FROM pgdl.spec_summary('[1, 2]');

-- ---- five models: three on zoo_packed that differ in one layer, one on zoo_wide, one unlike them ----
SELECT pgdl.fit('zoo_packed', '{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
  {"type": "dense", "units": 4}]}'::jsonb, '{"lr": 0.1, "seed": 3, "batch_size": 16}', 2, 'zoo_valid', name => 'zoo_a') > 0 AS fitted;
SELECT pgdl.fit('zoo_packed', '{"input": [4], "layers": [{"type": "dense", "units": 32}, {"type": "relu"},
  {"type": "dense", "units": 4}]}'::jsonb, '{"lr": 0.1, "seed": 3}', 1, name => 'zoo_b') > 0 AS fitted;
SELECT pgdl.fit('zoo_packed', '{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
  {"type": "dropout", "rate": 0.5}, {"type": "dense", "units": 4}]}'::jsonb, '{"optimizer": "adam", "lr": 0.01}', 1,
  name => 'zoo_c') > 0 AS fitted;
SELECT pgdl.fit('zoo_wide', '{"input": [8], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
  {"type": "dense", "units": 2}]}'::jsonb, '{"lr": 0.1}', 1, name => 'zoo_d') > 0 AS fitted;
SELECT pgdl.fit('zoo_packed', '{"input": [4], "layers": [{"type": "dense", "units": 8}, {"type": "tanh"},
  {"type": "dense", "units": 8}, {"type": "tanh"}, {"type": "dense", "units": 4}]}'::jsonb, '{"lr": 0.1}', 1,
  name => 'zoo_e') > 0 AS fitted;

-- ---- the view ----
SELECT name, layers, n_layers, params, flops, input_shape, task, n_classes, classes, dataset_rows, n_features,
       normalization, optimizer, lr, batch_size, origin, imported_from, warm_start, parent, run IS NOT NULL AS has_run,
       best_validation_accuracy BETWEEN 0 AND 1 AS has_accuracy, best_validation_loss > 0 AS has_vloss,
       last_train_loss > 0 AS has_loss
  FROM pgdl.zoo WHERE name LIKE 'zoo\_%' ORDER BY id;
-- the best metrics are the run's: zoo_a's best validation accuracy is its best epoch's
SELECT z.best_validation_accuracy = (SELECT max(validation_accuracy) FROM pgdl.run_metrics WHERE model = z.id) AS best,
       z.last_train_loss = (SELECT train_loss FROM pgdl.run_metrics WHERE model = z.id AND epoch = 2) AS last
  FROM pgdl.zoo z WHERE z.name = 'zoo_a';
-- params and flops are pgdl.estimate's
SELECT bool_and(z.params = e.parameters AND z.flops = e.flops_forward) AS as_estimate
  FROM pgdl.zoo z JOIN pgdl.models m ON m.id = z.id, LATERAL pgdl.estimate(m.spec) e WHERE z.name LIKE 'zoo\_%';

-- ---- pgdl.similar_models ----
-- architecture: dense(16) vs dense(32) costs 0.25 + 0.25 * 16/32 over 3 layers = 0.125; so does dense(4) vs
-- dense(2); an extra dropout is 1/4; zoo_e: 0.375 (dense) + 1 (relu vs tanh) + 2 (two more layers) over 5 = 0.675
SELECT name, round(distance::numeric, 6) AS distance, reason
  FROM pgdl.similar_models('zoo_a', 10000) WHERE name LIKE 'zoo\_%';
-- by id, and the query model itself is never a result
SELECT count(*) FILTER (WHERE s.model = m.id) AS itself, count(*) > 0 AS some
  FROM pgdl.models m, LATERAL pgdl.similar_models(m.id, 10000) s WHERE m.name = 'zoo_a';
-- data: the same dataset is 0; zoo_wide has 8 features and 2 classes where zoo_packed has 4 and 4, both
-- scaled alike: (g(2) + g(2) + 0) / 3 with g(r) = ln r / (1 + ln r), 0.272923
SELECT name, round(distance::numeric, 6) AS distance, reason
  FROM pgdl.similar_models('zoo_a', 10000, 'data') WHERE name LIKE 'zoo\_%';
SELECT name, round(distance::numeric, 6) AS distance, reason
  FROM pgdl.similar_models('zoo_a', 10000, 'both') WHERE name LIKE 'zoo\_%';
-- a spec: the same layers are 0 apart; its data is its input and output sizes
SELECT name, round(distance::numeric, 6) AS distance, reason
  FROM pgdl.similar_models('{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
  {"type": "dense", "units": 4}]}'::jsonb, 10000, 'both') WHERE name LIKE 'zoo\_%';
-- k: the first k of the whole ranking (ties by id), whatever other models there are
SELECT array_agg(model ORDER BY distance, model) = (SELECT (array_agg(model ORDER BY distance, model))[1:3]
                                                     FROM pgdl.similar_models('zoo_b', 10000)) AS first_k,
       count(*) AS k
  FROM pgdl.similar_models('zoo_b', 3);
-- a row whose spec is not valid (written before pgdl 0.7.0, or with the check disabled) is left out,
-- not the query failed
ALTER TABLE pgdl.models DISABLE TRIGGER models_validate;
INSERT INTO pgdl.models (name, spec, weights) VALUES ('zoo_forged', '{"input": 4, "layers": []}', '\x00');
ALTER TABLE pgdl.models ENABLE TRIGGER models_validate;
SELECT count(*) FILTER (WHERE name = 'zoo_forged') AS forged, count(*) FILTER (WHERE name = 'zoo_b') AS zoo_b
  FROM pgdl.similar_models('zoo_a', 10000, 'both');
DELETE FROM pgdl.models WHERE name = 'zoo_forged';
-- hostile arguments
SELECT * FROM pgdl.similar_models('zoo_a', 0);
SELECT * FROM pgdl.similar_models('zoo_a', 10001);
SELECT * FROM pgdl.similar_models('zoo_a', 3, 'size');
SELECT * FROM pgdl.similar_models('zoo_a', 3, NULL);
SELECT * FROM pgdl.similar_models('zoo_a', NULL);
SELECT * FROM pgdl.similar_models(NULL::text);
SELECT * FROM pgdl.similar_models('no_such_model');
SELECT * FROM pgdl.similar_models(-1::bigint);
SELECT * FROM pgdl.similar_models('{"input": [4]}'::jsonb);

-- ---- warm starts ----
-- pgdl.init_model: the new model's first layer is zoo_a's, its last (another shape) is new
SELECT w.layer, w.name, w.values = a.values AS copied
  FROM pgdl.model_weights(pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
         {"type": "dense", "units": 8}, {"type": "relu"}, {"type": "dense", "units": 4}]}',
         '{"warm_start": "zoo_a", "seed": 9}')) w
  LEFT JOIN pgdl.model_weights('zoo_a') a USING (layer, name) ORDER BY 1, 2;
-- the same network from the seed alone differs in layer 0
SELECT (SELECT values FROM pgdl.model_weights(pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 16}]}',
         '{"seed": 9}')) WHERE layer = 0 AND name = 'weight')
     = (SELECT values FROM pgdl.model_weights('zoo_a') WHERE layer = 0 AND name = 'weight') AS same_without;
-- pgdl.fit records where it started
SELECT pgdl.fit('zoo_packed', '{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
  {"type": "dense", "units": 8}, {"type": "relu"}, {"type": "dense", "units": 4}]}'::jsonb,
  '{"lr": 0.05, "seed": 4, "batch_size": 16, "warm_start": "zoo_a"}', 1, name => 'zoo_warm') > 0 AS fitted;
SELECT m.origin = jsonb_build_object('warm_start', a.id, 'layers_copied', '[0]'::jsonb) AS origin,
       m.config ->> 'warm_start' AS config_warm_start, z.warm_start = a.id AS zoo_warm_start
  FROM pgdl.models m, pgdl.models a, pgdl.zoo z WHERE m.name = 'zoo_warm' AND a.name = 'zoo_a' AND z.id = m.id;
-- by id too, every layer of the same network
SELECT pgdl.fit('zoo_packed', m.spec, jsonb_build_object('lr', 0.05, 'warm_start', m.id), 1, name => 'zoo_warm_all') > 0
  FROM pgdl.models m WHERE m.name = 'zoo_a';
SELECT origin -> 'layers_copied' AS copied FROM pgdl.models WHERE name = 'zoo_warm_all';
-- pgdl.fit_multiple trains the same bytes as pgdl.fit from the same warm start
SELECT pgdl.add_architecture('zoo_arch', '{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
  {"type": "dense", "units": 8}, {"type": "relu"}, {"type": "dense", "units": 4}]}') > 0 AS added;
SELECT pgdl.grid_search('zoo_set', ARRAY['zoo_arch'], '{"lr": 0.05, "seed": 4, "batch_size": 16, "warm_start": ["zoo_a"]}');
SELECT config FROM pgdl.configs WHERE set_name = 'zoo_set';
SELECT pgdl.fit('zoo_packed', 'zoo_arch', '{"lr": 0.05, "seed": 4, "batch_size": 16, "warm_start": "zoo_a"}', 2,
                name => 'zoo_fit') > 0 AS fitted;
SELECT rank, config_json ->> 'warm_start' AS warm_start FROM pgdl.fit_multiple('zoo_packed', 'zoo_set', 2, workers => 1,
                                                                             name_prefix => 'zoo_mop_');
SELECT md5(f.weights) = md5(m.weights) AS same_bytes, f.origin = m.origin AS same_origin
  FROM pgdl.models f, pgdl.models m WHERE f.name = 'zoo_fit' AND m.name LIKE 'zoo\_mop\_%';
-- canonical in configuration sets: an id as an integer
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'zoo_set2', a.id, jsonb_build_object('warm_start', m.id::numeric + 0.0, 'lr', 0.1)
  FROM pgdl.architectures a, pgdl.models m WHERE a.name = 'zoo_arch' AND m.name = 'zoo_a';
SELECT (c.config -> 'warm_start') = to_jsonb(m.id) AS canonical_id FROM pgdl.configs c, pgdl.models m
 WHERE c.set_name = 'zoo_set2' AND m.name = 'zoo_a';
SELECT pgdl.validate_config('{"warm_start": "zoo_a"}');

-- hostile warm starts
SELECT pgdl.fit('zoo_packed', 'zoo_arch', '{"warm_start": "no_such_model"}', 1);
SELECT pgdl.fit('zoo_packed', 'zoo_arch', '{"warm_start": 9223372036}', 1);
SELECT pgdl.fit('zoo_packed', 'zoo_arch', '{"warm_start": 1.5}', 1);
SELECT pgdl.fit('zoo_packed', 'zoo_arch', '{"warm_start": -2}', 1);
SELECT pgdl.fit('zoo_packed', 'zoo_arch', '{"warm_start": ""}', 1);
SELECT pgdl.fit('zoo_packed', 'zoo_arch', '{"warm_start": true}', 1);
SELECT pgdl.fit('zoo_packed', 'zoo_arch', '{"warm_start": null}', 1);
SELECT pgdl.fit('zoo_packed', 'zoo_arch', '{"warm_start": ["zoo_a"]}', 1);
-- nothing fits: zoo_d's layers take 8 features
SELECT pgdl.fit('zoo_packed', 'zoo_arch', '{"warm_start": "zoo_d"}', 1);
-- a base model is another way to start from a model: one or the other
INSERT INTO pgdl.configs (set_name, architecture, config)
VALUES ('zoo_bad', NULL, '{"base_model": "zoo_a", "freeze": 1, "warm_start": "zoo_a"}');
-- the pgdl.train aggregate starts from the model it is given
SELECT pgdl.train(x, y, n, pgdl.init_model(m.spec, '{}'), '{"warm_start": "zoo_a"}' ORDER BY buffer_id) IS NULL
  FROM zoo_packed, pgdl.models m WHERE m.name = 'zoo_a' GROUP BY m.spec;

-- another role's model does not exist, for a warm start and for similar_models; nor is it a result
CREATE ROLE regress_zoo_eve;
GRANT SELECT ON zoo_packed TO regress_zoo_eve;
SET ROLE regress_zoo_eve;
SELECT count(*) AS visible FROM pgdl.zoo;
SELECT pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 16}]}', '{"warm_start": "zoo_a"}');
SELECT * FROM pgdl.similar_models('zoo_a');
SELECT count(*) AS results FROM pgdl.similar_models('{"input": [4], "layers": [{"type": "dense", "units": 4}]}'::jsonb);
RESET ROLE;
-- granted, it is seen and may be started from
SELECT pgdl.grant_model('zoo_a', 'regress_zoo_eve');
SET ROLE regress_zoo_eve;
SELECT name FROM pgdl.zoo;
SELECT count(*) AS tensors FROM pgdl.model_weights(pgdl.init_model('{"input": [4], "layers": [{"type": "dense", "units": 16}]}',
  format('{"warm_start": %s}', (SELECT id FROM pgdl.zoo WHERE name = 'zoo_a'))::jsonb));
SELECT name, distance FROM pgdl.similar_models('{"input": [4], "layers": [{"type": "dense", "units": 4}]}'::jsonb);
RESET ROLE;
DELETE FROM pgdl.models WHERE owner = 'regress_zoo_eve'::regrole;
REVOKE ALL ON zoo_packed FROM regress_zoo_eve;
SELECT pgdl.revoke_model('zoo_a', 'regress_zoo_eve');
DROP ROLE regress_zoo_eve;
