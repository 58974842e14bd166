-- The workloads of real networks, end to end: a sequence model on a task that
-- a bag of features cannot solve (which of two tokens comes first), trained
-- by pgdl.fit and by pgdl.fit_multiple to the same bytes.
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
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'wl_set', a.id, c::jsonb
  FROM pgdl.architectures a,
       (VALUES ('{"optimizer": "adam", "lr": 0.01, "batch_size": 32, "seed": 3}'),
               ('{"optimizer": "adam", "lr": 0.005, "batch_size": 32, "seed": 4, "schedule": "cosine", "clip_norm": 1}')) v(c)
 WHERE a.name IN ('wl_gru', 'wl_bag');

CREATE TABLE wl_lb AS SELECT * FROM pgdl.fit_multiple('wl_train', 'wl_set', 8, 'wl_valid', workers => 2);
-- the order is learned by the GRU, not by the bag
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

DELETE FROM pgdl.models WHERE run > :wl_first_run;
DELETE FROM pgdl.runs WHERE id > :wl_first_run;
DELETE FROM pgdl.configs WHERE set_name = 'wl_set';
DELETE FROM pgdl.architectures WHERE name IN ('wl_gru', 'wl_bag');
DROP TABLE wl_lb, wl_fits, wl_order, wl_order_train, wl_order_valid, wl_train, wl_valid;
