-- The workloads of real networks, end to end, each trained by pgdl.fit_multiple
-- to the bytes of pgdl.fit: sequence models (a GRU, a transformer encoder) on a
-- task that a bag of features cannot solve (which of two tokens comes first), and a tabular model over
-- numeric and categorical columns (embeddings joined to the features).
SET client_min_messages = warning;
SELECT coalesce(max(id), 0) AS wl_first_run FROM pgdl.runs \gset

-- Every sequence holds token 1 and token 2 once and six tokens of 3..5 drawn
-- by hashing; the label is whether 1 comes before 2.  Counts of tokens say
-- nothing of the label: only their order does.
CREATE TABLE wl_order AS
SELECT i, x, (array_position(x, 1::real) < array_position(x, 2::real))::integer AS label
  FROM (SELECT i, ARRAY(SELECT tok::real
                          FROM unnest(ARRAY[1, 2] || ARRAY(SELECT 3 + abs(hashint4(i * 16 + k)) % 3
                                                              FROM generate_series(1, 6) k))
                               WITH ORDINALITY AS u(tok, pos)
                         ORDER BY hashint4(i * 64 + pos::integer), pos) AS x
          FROM generate_series(1, 3000) i) s;
SELECT label, count(*) BETWEEN 1350 AND 1650 AS balanced FROM wl_order GROUP BY label ORDER BY label;
CREATE TABLE wl_order_train AS SELECT * FROM wl_order WHERE i <= 2400;
CREATE TABLE wl_order_valid AS SELECT * FROM wl_order WHERE i > 2400;
SELECT pgdl.pack('wl_order_train', 'x', 'label', 'wl_train', buffer_rows => 64, partitions => 2, seed => 1) > 0 AS packed;
SELECT pgdl.pack('wl_order_valid', 'x', 'label', 'wl_valid', buffer_rows => 64, partitions => 1, seed => 1,
                 reference => 'wl_train') > 0 AS packed;

-- A GRU over embedded tokens, and a bag of the same embeddings (their mean over the steps)
SELECT pgdl.add_architecture('wl_gru', '{"input": [8], "layers": [{"type": "embedding", "vocab": 6, "dim": 8},
  {"type": "gru", "units": 16}, {"type": "dense", "units": 2}]}') > 0 AS added;
SELECT pgdl.add_architecture('wl_bag', '{"input": [8], "layers": [{"type": "embedding", "vocab": 6, "dim": 8},
  {"type": "global_avgpool"}, {"type": "dense", "units": 16}, {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
-- A transformer encoder block: embeddings with positions (attention alone is
-- blind to order), layernorm(x + attention(x)), then layernorm(h + a feed-forward
-- on each step), the mean over the steps and a dense head
SELECT pgdl.add_architecture('wl_transformer', '{"input": [8], "layers": [
  {"type": "embedding", "name": "embedded", "vocab": 6, "dim": 16, "positions": true},
  {"type": "attention", "name": "attention", "heads": 2},
  {"type": "add", "inputs": ["embedded", "attention"]}, {"type": "layernorm", "name": "attended"},
  {"type": "dense", "units": 32, "per_step": true}, {"type": "gelu"},
  {"type": "dense", "name": "feed_forward", "units": 16, "per_step": true},
  {"type": "add", "inputs": ["attended", "feed_forward"]}, {"type": "layernorm"},
  {"type": "global_avgpool"}, {"type": "dense", "units": 2}]}') > 0 AS added;
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'wl_set', a.id, c::jsonb
  FROM pgdl.architectures a,
       (VALUES ('{"optimizer": "adam", "lr": 0.01, "batch_size": 32, "seed": 3}'),
               ('{"optimizer": "adam", "lr": 0.005, "batch_size": 32, "seed": 4, "schedule": "cosine", "clip_norm": 1}')) v(c)
 WHERE a.name IN ('wl_gru', 'wl_bag', 'wl_transformer');

CREATE TABLE wl_lb AS SELECT * FROM pgdl.fit_multiple('wl_train', 'wl_set', 8, 'wl_valid', workers => 2);
-- the order is learned by the GRU and the transformer, not by the bag
SELECT architecture, config_json->>'lr' AS lr,
       CASE WHEN validation_accuracy > 0.9 THEN 'above 0.9'
            WHEN validation_accuracy BETWEEN 0.4 AND 0.6 THEN 'chance'
            ELSE 'between' END AS validation_accuracy
  FROM wl_lb ORDER BY architecture, lr;
-- pgdl.fit of each configuration: the same bytes
CREATE TABLE wl_fits AS
SELECT config, pgdl.fit('wl_train', architecture, config_json, 8, 'wl_valid') AS model FROM wl_lb ORDER BY config;
SELECT l.architecture, l.config_json->>'lr' AS lr, m.weights = mf.weights AS same_as_fit
  FROM wl_lb l JOIN pgdl.models m ON m.id = l.model
  JOIN wl_fits f ON f.config = l.config JOIN pgdl.models mf ON mf.id = f.model ORDER BY 1, 2;
-- and it predicts the order of sequences it never saw
SELECT count(*) FILTER (WHERE pgdl.predict_class(l.model, x)::integer = label) > 0.9 * count(*) AS predicts
  FROM wl_order_valid, (SELECT model FROM wl_lb WHERE architecture = 'wl_gru' ORDER BY rank LIMIT 1) l;
SELECT count(*) FILTER (WHERE pgdl.predict_class(l.model, x)::integer = label) > 0.9 * count(*) AS predicts
  FROM wl_order_valid, (SELECT model FROM wl_lb WHERE architecture = 'wl_transformer' ORDER BY rank LIMIT 1) l;
-- its spec as stored: the new keys only where they are on
SELECT jsonb_path_query_array(spec, '$.layers[*] ? (exists(@.per_step) || exists(@.positions))')
  FROM pgdl.architectures WHERE name = 'wl_transformer';


-- Tabular: a known ground truth.  Each city and each shop has an effect (drawn
-- by hashing), and a row is positive when amount + its city's effect + its
-- shop's effect is above 0; the hour is noise.  Categories are the only way
-- to the effects: a model of the numeric columns alone cannot find them.
CREATE TABLE wl_sales AS
SELECT i, amount, hour, city, shop,
       (amount + (abs(hashtext(city)) % 200 - 100) / 50.0 + (abs(hashint4(shop * 7)) % 200 - 100) / 50.0 > 0)::integer AS bought
  FROM (SELECT i, (abs(hashint4(i)) % 1000 - 500) / 250.0 AS amount, i % 24 AS hour,
               (ARRAY['Lyon', 'Paris', 'O''Hare', 'Back\slash', 'Nice', 'Lille', 'Metz', 'Brest'])[1 + abs(hashint4(i * 3)) % 8] AS city,
               100 + abs(hashint4(i * 5)) % 20 AS shop
          FROM generate_series(1, 4000) i) s;
CREATE TABLE wl_sales_train AS SELECT * FROM wl_sales WHERE i <= 3200;
CREATE TABLE wl_sales_valid AS SELECT * FROM wl_sales WHERE i > 3200;
SELECT pgdl.pack('wl_sales_train', 'amount, hour', 'bought', 'wl_tab_train', buffer_rows => 64, partitions => 2,
                 standardize => true, categorical => 'city, shop') > 0 AS packed;
SELECT pgdl.pack('wl_sales_valid', 'amount, hour', 'bought', 'wl_tab_valid', buffer_rows => 64, partitions => 1,
                 reference => 'wl_tab_train', categorical => 'city, shop') > 0 AS packed;
-- the example: amount, hour (standardized), then the ids of city (1 to 8) and shop (1 to 20)
SELECT n_features, jsonb_array_length(categorical) AS categorical FROM pgdl.datasets WHERE packed = 'wl_tab_train'::regclass;

-- slices take the features and each column's ids; each column has its embedding
SELECT pgdl.add_architecture('wl_tab', '{"input": [4], "layers": [
  {"type": "slice", "name": "numeric", "inputs": ["input"], "start": 0, "length": 2},
  {"type": "slice", "name": "city_id", "inputs": ["input"], "start": 2, "length": 1},
  {"type": "embedding", "vocab": 9, "dim": 4},
  {"type": "flatten", "name": "city"},
  {"type": "slice", "name": "shop_id", "inputs": ["input"], "start": 3, "length": 1},
  {"type": "embedding", "vocab": 21, "dim": 4},
  {"type": "flatten", "name": "shop"},
  {"type": "concat", "inputs": ["numeric", "city", "shop"]},
  {"type": "dense", "units": 32}, {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
SELECT pgdl.add_architecture('wl_numeric', '{"input": [4], "layers": [
  {"type": "slice", "start": 0, "length": 2},
  {"type": "dense", "units": 32}, {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'wl_tab_set', a.id, c::jsonb
  FROM pgdl.architectures a,
       (VALUES ('{"optimizer": "adam", "lr": 0.01, "batch_size": 32, "seed": 5}'),
               ('{"optimizer": "adamw", "lr": 0.005, "batch_size": 32, "seed": 6, "no_decay_bias_norm": true}')) v(c)
 WHERE a.name IN ('wl_tab', 'wl_numeric');
CREATE TABLE wl_tab_lb AS SELECT * FROM pgdl.fit_multiple('wl_tab_train', 'wl_tab_set', 10, 'wl_tab_valid', workers => 2);
-- the embeddings find the categories' effects
SELECT architecture, config_json->>'lr' AS lr,
       CASE WHEN validation_accuracy > 0.9 THEN 'above 0.9'
            WHEN validation_accuracy < 0.8 THEN 'below 0.8'
            ELSE 'between' END AS validation_accuracy
  FROM wl_tab_lb ORDER BY architecture, lr;
CREATE TABLE wl_tab_fits AS
SELECT config, pgdl.fit('wl_tab_train', architecture, config_json, 10, 'wl_tab_valid') AS model FROM wl_tab_lb ORDER BY config;
SELECT l.architecture, l.config_json->>'lr' AS lr, m.weights = mf.weights AS same_as_fit
  FROM wl_tab_lb l JOIN pgdl.models m ON m.id = l.model
  JOIN wl_tab_fits f ON f.config = l.config JOIN pgdl.models mf ON mf.id = f.model ORDER BY 1, 2;
-- raw rows through pgdl.predict_class: the vocabularies map the values, an unseen city is id 0
SELECT count(*) FILTER (WHERE pgdl.predict_class(l.model, ARRAY[amount, hour]::real[], ARRAY[city, shop::text])::integer = bought)
       > 0.9 * count(*) AS predicts
  FROM wl_sales_valid, (SELECT model FROM wl_tab_lb WHERE architecture = 'wl_tab' ORDER BY rank LIMIT 1) l;
SELECT pgdl.predict_class(l.model, ARRAY[1.5, 3]::real[], ARRAY['Toulouse', '105']) IN ('0', '1') AS unseen_city
  FROM (SELECT model FROM wl_tab_lb WHERE architecture = 'wl_tab' ORDER BY rank LIMIT 1) l;
-- an embedding must read ids from the examples: the spec's input or a slice of it
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "dense", "units": 3},
  {"type": "embedding", "vocab": 9, "dim": 4}, {"type": "flatten"}, {"type": "dense", "units": 2}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "slice", "start": 3, "length": 2}]}');
SELECT pgdl.validate_spec('{"input": [4], "layers": [{"type": "slice", "start": -1, "length": 2}]}');
SELECT pgdl.validate_spec('{"input": [1, 2, 2], "layers": [{"type": "slice", "start": 0, "length": 2}]}');

DELETE FROM pgdl.models WHERE run > :wl_first_run;
DELETE FROM pgdl.runs WHERE id > :wl_first_run;
DELETE FROM pgdl.configs WHERE set_name IN ('wl_set', 'wl_tab_set');
DELETE FROM pgdl.architectures WHERE name IN ('wl_gru', 'wl_bag', 'wl_transformer', 'wl_tab', 'wl_numeric');
DROP TABLE wl_lb, wl_fits, wl_order, wl_order_train, wl_order_valid, wl_train, wl_valid;
DROP TABLE wl_tab_lb, wl_tab_fits, wl_sales, wl_sales_train, wl_sales_valid, wl_tab_train, wl_tab_valid;
