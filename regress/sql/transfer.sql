-- Transfer learning and feature caches: configurations with a base model, pgdl.features,
-- grouping, staging, reuse, staleness, the budget, explain, dropping, privileges.
-- (Resume of a transfer run: regress/t/003.)
SET client_min_messages = warning;

CREATE TABLE tl_rows AS
SELECT i, ARRAY[a, b, c, d]::real[] AS x,
       CASE WHEN a + b > c + d THEN (CASE WHEN a > b THEN 0 ELSE 1 END)
            ELSE (CASE WHEN c > d THEN 2 ELSE 3 END) END AS label
  FROM generate_series(1, 512) i,
       LATERAL (SELECT (abs(sin(i * 12.9898)) * 43758.5453)::numeric % 1 AS a,
                       (abs(sin(i * 78.233)) * 43758.5453)::numeric % 1 AS b,
                       (abs(sin(i * 37.719)) * 43758.5453)::numeric % 1 AS c,
                       (abs(sin(i * 93.989)) * 43758.5453)::numeric % 1 AS d) r;
SELECT pgdl.pack('tl_rows', 'x', 'label', 'tl_packed', buffer_rows => 16, partitions => 4) > 0 AS packed;
SELECT pgdl.pack('tl_rows', 'x', 'label', 'tl_valid', buffer_rows => 64, partitions => 1,
                 reference => 'tl_packed') > 0 AS packed;
-- the base: dense, batchnorm, relu, dropout, dense, relu, dense (frozen batchnorm and dropout run in inference mode)
SELECT pgdl.fit('tl_packed', '{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "batchnorm"},
  {"type": "relu"}, {"type": "dropout", "rate": 0.2}, {"type": "dense", "units": 16}, {"type": "relu"},
  {"type": "dense", "units": 4}]}'::jsonb, '{"lr": 0.1, "seed": 3}', 2, name => 'tl_base') > 0 AS fitted;

-- pgdl.features: the output of the first layers, for one example
SELECT array_length(pgdl.features('tl_base', 1, '{0.1, 0.2, 0.3, 0.4}'), 1) AS dense_out,
       array_length(pgdl.features('tl_base', 7, '{0.1, 0.2, 0.3, 0.4}'), 1) AS logits,
       (SELECT bool_and(v >= 0) FROM unnest(pgdl.features('tl_base', 3, '{0.1, 0.2, 0.3, 0.4}')) v) AS relu_nonnegative;
-- by id, name and blob alike (a blob has no dataset: its features are used as given, as packed)
SELECT pgdl.features(m.id, 5, '{0.1, 0.2, 0.3, 0.4}') = pgdl.features('tl_base', 5, '{0.1, 0.2, 0.3, 0.4}') AS by_id,
       array_length(pgdl.features(m.weights, 5, '{0.1, 0.2, 0.3, 0.4}'), 1) AS blob_width
  FROM pgdl.models m WHERE m.name = 'tl_base';
-- the last layer's features are the logits: their softmax is pgdl.predict
SELECT max(abs(p - e / s)) < 1e-6 AS softmax_of_logits
  FROM (SELECT pgdl.features('tl_base', 7, '{0.1, 0.2, 0.3, 0.4}') f, pgdl.predict('tl_base', '{0.1, 0.2, 0.3, 0.4}') pr) q,
       LATERAL (SELECT sum(exp(v)) s FROM unnest(f) v) t,
       LATERAL unnest(pr, ARRAY(SELECT exp(v) FROM unnest(f) v)) u(p, e);
SELECT pgdl.features('tl_base', 0, '{0.1, 0.2, 0.3, 0.4}');
SELECT pgdl.features('tl_base', 8, '{0.1, 0.2, 0.3, 0.4}');
SELECT pgdl.features('tl_base', 2, '{0.1, 0.2}');
SELECT pgdl.features('no_such_model', 2, '{0.1, 0.2, 0.3, 0.4}');
-- the batch form over a packed table: a row per buffer, as a feature cache holds it
SELECT count(*) AS buffers, sum(n) AS examples, bool_and(array_length(x, 1) = n * 16) AS sizes,
       bool_and(array_length(y, 1) = n) AS labels
  FROM pgdl.features_batch('tl_base', 3, 'tl_packed');
SELECT count(*) FROM pgdl.features_batch('tl_base', 3, 'tl_rows');
-- cache_features, what cache views are made of, checks what it is given
SELECT pgdl.cache_features(id, 3, 2, pgdl.prefix_hash(id, 3), '{1, 2, 3, 4}', 1) FROM pgdl.models WHERE name = 'tl_base';
SELECT pgdl.cache_features(id, 0, 3, pgdl.prefix_hash(id, 3), '{1, 2, 3}', 1) FROM pgdl.models WHERE name = 'tl_base';
SELECT pgdl.cache_features(id, 0, 3, pgdl.prefix_hash(id, 3), '{1, 2, 3, 4}', 0) FROM pgdl.models WHERE name = 'tl_base';
SELECT array_length(pgdl.cache_features(id, 0, 3, pgdl.prefix_hash(id, 3), '{1, 2, 3, 4, 5, 6, 7, 8}', 2), 1)
  FROM pgdl.models WHERE name = 'tl_base';
SELECT pgdl.prefix_hash(id, 0) FROM pgdl.models WHERE name = 'tl_base';

-- configurations with a base model: no architecture; errors name the key
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('tl_bad', NULL, '{"base_model": "nope", "freeze": 1}');
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('tl_bad', NULL, '{"base_model": "tl_base"}');
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('tl_bad', NULL, '{"base_model": "tl_base", "freeze": 8}');
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('tl_bad', NULL, '{"base_model": "tl_base", "freeze": "conv2d"}');
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('tl_bad', NULL, '{"base_model": "tl_base", "freeze": "dense"}');
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('tl_bad', NULL, '{"base_model": "tl_base", "freeze": 7}');
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('tl_bad', NULL, '{"base_model": "tl_base", "freeze": 3, "head": {"type": "dense"}}');
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('tl_bad', NULL, '{"base_model": "tl_base", "freeze": 3, "head": [{"type": "dense", "units": 0}]}');
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('tl_bad', NULL, '{"freeze": 3}');
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES ('tl_bad', NULL, '{"lr": 0.1}');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'tl_bad', id, '{"base_model": "tl_base", "freeze": 3}' FROM pgdl.architectures LIMIT 1;
SELECT pgdl.grid_search('tl_bad', ARRAY['mop_small'], '{"base_model": "tl_base", "freeze": 3}');
-- and the single-model functions refuse them
SELECT pgdl.fit('tl_packed', '{"input": [4], "layers": [{"type": "dense", "units": 4}]}'::jsonb,
                '{"base_model": "tl_base", "freeze": 3}', 1);

-- a set: two frozen depths (3, and "relu_2" = 6), each with a head and two learning rates; fine-tuning
-- the rest of the base (freeze 3, no head); and a configuration trained from scratch
SELECT pgdl.grid_search('tl_set', '{}', '{"base_model": "tl_base", "freeze": [3, "relu_2"],
  "head": [[{"type": "dense", "units": 8}, {"type": "relu"}, {"type": "dense", "units": 4}]],
  "lr": [0.1, 0.05], "batch_size": 8, "seed": 11}') AS added;
SELECT pgdl.grid_search('tl_set', '{}', '{"base_model": "tl_base", "freeze": 3, "lr": 0.05, "batch_size": 8}') AS added;
SELECT pgdl.add_architecture('tl_scratch', '{"input": [4], "layers": [{"type": "dense", "units": 4}]}') > 0 AS added;
SELECT pgdl.grid_search('tl_set', ARRAY['tl_scratch'], '{"lr": 0.1, "batch_size": 8}') AS added;
SELECT architecture IS NULL AS no_architecture, config->>'base_model' AS base, config->'freeze' AS freeze,
       jsonb_array_length(config->'head') AS head_layers, config->>'lr' AS lr
  FROM pgdl.configs WHERE set_name = 'tl_set' ORDER BY id;

-- a cache view's name: the packed table's, the depth, the prefix's hash and the owner's role OID
CREATE FUNCTION tl_name(view text) RETURNS text
LANGUAGE sql AS $$ SELECT regexp_replace(view, '_[0-9a-f]{8}_' || current_user::text::regrole::oid || '$', '_<hash>_<owner>') $$;
-- the plan: one group per frozen prefix, the deeper cache staged from the shallower one
CREATE FUNCTION tl_plan(mode text, epochs integer DEFAULT 2) RETURNS TABLE (
    "group" integer, frozen_layers integer, configs integer, action text, cache text, validation_cache text,
    staged_from text, storage_mb numeric, reason text)
LANGUAGE sql AS $$
  SELECT "group", frozen_layers, configs, action, tl_name(cache),
         tl_name(validation_cache), tl_name(staged_from),
         round(storage_mb::numeric, 3), regexp_replace(reason, '[0-9]+\.[0-9]+', '<n>', 'g')
    FROM pgdl.explain_fit_multiple('tl_packed', 'tl_set', epochs, 'tl_valid', feature_cache => mode)
$$;
SELECT * FROM tl_plan('on');
SELECT * FROM tl_plan('off');
SELECT bool_and(predicted_seconds > 0) AS predicted, bool_and(gflops > 0) AS computes
  FROM pgdl.explain_fit_multiple('tl_packed', 'tl_set', 2, 'tl_valid');
SELECT count(*) AS caches_before_running FROM pgdl.feature_cache;
SELECT pgdl.explain_fit_multiple('tl_packed', 'tl_set', 2, feature_cache => 'sometimes');

-- training on cached features gives the bytes of training with the prefix recomputed
CREATE TABLE tl_results AS
SELECT 'on' AS mode, * FROM pgdl.fit_multiple('tl_packed', 'tl_set', 2, 'tl_valid', workers => 2,
                                              name_prefix => 'tl_on_', feature_cache => 'on');
INSERT INTO tl_results
SELECT 'off', * FROM pgdl.fit_multiple('tl_packed', 'tl_set', 2, 'tl_valid', workers => 2,
                                       name_prefix => 'tl_off_', feature_cache => 'off');
SELECT r1.architecture, r1.config_json->>'lr' AS lr, m1.weights = m2.weights AS same_bytes,
       r1.validation_accuracy > 0.5 AS learned
  FROM tl_results r1 JOIN tl_results r2 ON r2.config = r1.config AND r2.mode = 'off'
  JOIN pgdl.models m1 ON m1.id = r1.model JOIN pgdl.models m2 ON m2.id = r2.model
 WHERE r1.mode = 'on' ORDER BY r1.config;
SELECT tl_name(view::text) AS view, source, depth, rows, valid,
       staged_from IS NOT NULL AS staged, owner = current_user::regrole AS mine
  FROM pgdl.feature_cache ORDER BY depth, source::text;

-- the stored model is the whole network: its frozen layers are the base's, it predicts from raw features
SELECT jsonb_array_length(m.spec->'layers') AS layers, m.architecture IS NULL AS no_architecture,
       m.parent = b.id AS parent_is_base, m.config->>'base_model' AS base,
       pgdl.features(m.id, 3, '{0.3, 0.1, 0.4, 0.1}') = pgdl.features(b.id, 3, '{0.3, 0.1, 0.4, 0.1}') AS frozen_kept,
       pgdl.features(m.id, 4, '{0.3, 0.1, 0.4, 0.1}') <> pgdl.features(b.id, 4, '{0.3, 0.1, 0.4, 0.1}') AS head_trained,
       pgdl.predict_class(m.id, '{0.9, 0.1, 0.1, 0.1}') IS NOT NULL AS predicts
  FROM pgdl.models m, pgdl.models b
 WHERE m.name LIKE 'tl_on_%' AND b.name = 'tl_base' AND m.config ? 'head' ORDER BY m.id LIMIT 1;
SELECT count(*) AS fine_tuned FROM pgdl.models m, pgdl.models b
 WHERE m.name LIKE 'tl_on_%' AND b.name = 'tl_base' AND m.config ? 'base_model' AND NOT m.config ? 'head'
   AND pgdl.features(m.id, 3, '{0.3, 0.1, 0.4, 0.1}') = pgdl.features(b.id, 3, '{0.3, 0.1, 0.4, 0.1}')
   AND pgdl.features(m.id, 5, '{0.3, 0.1, 0.4, 0.1}') <> pgdl.features(b.id, 5, '{0.3, 0.1, 0.4, 0.1}');

-- later runs reuse the caches
SELECT "group", action, reason FROM tl_plan('auto');

-- the planner: one configuration for one epoch is cheaper to recompute; over budget it recomputes
SELECT pgdl.grid_search('tl_one', '{}', '{"base_model": "tl_base", "freeze": 2, "head": [[{"type": "dense", "units": 4}]]}');
SELECT action, regexp_replace(reason, '[0-9]+\.[0-9]+ s', '<t> s', 'g') AS reason
  FROM pgdl.explain_fit_multiple('tl_packed', 'tl_one', 1) WHERE "group" = 1;
SET pgdl.feature_cache_budget = '64kB';
SELECT action, regexp_replace(reason, '[0-9]+\.[0-9]+ MB', '<n> MB', 'g') AS reason
  FROM pgdl.explain_fit_multiple('tl_packed', 'tl_one', 1, feature_cache => 'on') WHERE "group" = 1;
RESET pgdl.feature_cache_budget;

-- staleness: a change to the packed table makes its caches stale; they are refreshed, never read stale,
-- and the models equal those of a run without caches
UPDATE tl_packed SET x = array_fill(0.5::real, ARRAY[n * 4]) WHERE part = 1 AND buffer_id = (SELECT min(buffer_id) FROM tl_packed WHERE part = 1);
SELECT "group", action, cache FROM tl_plan('on') ORDER BY "group";
CREATE TABLE tl_results2 AS
SELECT 'on' AS mode, * FROM pgdl.fit_multiple('tl_packed', 'tl_set', 2, 'tl_valid', name_prefix => 'tl_on2_', feature_cache => 'on');
INSERT INTO tl_results2
SELECT 'off', * FROM pgdl.fit_multiple('tl_packed', 'tl_set', 2, 'tl_valid', name_prefix => 'tl_off2_', feature_cache => 'off');
SELECT count(*) AS configs, count(*) FILTER (WHERE m1.weights = m2.weights) AS same_bytes,
       count(*) FILTER (WHERE m1.weights = m0.weights) AS same_as_before_the_change
  FROM tl_results2 r1 JOIN tl_results2 r2 ON r2.config = r1.config AND r2.mode = 'off'
  JOIN tl_results r0 ON r0.config = r1.config AND r0.mode = 'on'
  JOIN pgdl.models m1 ON m1.id = r1.model JOIN pgdl.models m2 ON m2.id = r2.model JOIN pgdl.models m0 ON m0.id = r0.model
 WHERE r1.mode = 'on' AND r1.config_json ? 'base_model';
SELECT count(*) AS caches, bool_and(valid) AS valid, bool_and(source_version = pgdl.packed_version(source)) AS current
  FROM pgdl.feature_cache;

-- a stale cache staged from a shallower one is built again, not refreshed from that (stale) one
SELECT pgdl.grid_search('tl_deep', '{}', '{"base_model": "tl_base", "freeze": "relu_2",
  "head": [[{"type": "dense", "units": 4}]], "lr": 0.1, "batch_size": 8}') AS added;
UPDATE tl_packed SET x = array_fill(0.25::real, ARRAY[n * 4]) WHERE part = 2 AND buffer_id = (SELECT min(buffer_id) FROM tl_packed WHERE part = 2);
SELECT action, staged_from IS NULL AS from_the_packed_table
  FROM pgdl.explain_fit_multiple('tl_packed', 'tl_deep', 1, feature_cache => 'on') WHERE "group" = 1;
CREATE TABLE tl_deep_on AS SELECT * FROM pgdl.fit_multiple('tl_packed', 'tl_deep', 1, feature_cache => 'on');
CREATE TABLE tl_deep_off AS SELECT * FROM pgdl.fit_multiple('tl_packed', 'tl_deep', 1, feature_cache => 'off');
SELECT m1.weights = m2.weights AS same_bytes
  FROM tl_deep_on a JOIN pgdl.models m1 ON m1.id = a.model, tl_deep_off b JOIN pgdl.models m2 ON m2.id = b.model;

-- a change to the base model's weights marks its caches stale; the same weights again are refreshed,
-- other weights are rebuilt, and a cache view refuses to compute with weights it was not defined for
UPDATE pgdl.models SET weights = weights WHERE name = 'tl_base';
SELECT count(*) FILTER (WHERE valid) AS valid, count(*) AS caches FROM pgdl.feature_cache;
SELECT "group", action FROM tl_plan('on') ORDER BY "group";
SELECT pgdl.fit('tl_packed', '{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "batchnorm"},
  {"type": "relu"}, {"type": "dropout", "rate": 0.2}, {"type": "dense", "units": 16}, {"type": "relu"},
  {"type": "dense", "units": 4}]}'::jsonb, '{"lr": 0.1, "seed": 4}', 1, name => 'tl_base2') > 0 AS fitted;
UPDATE pgdl.models SET weights = (SELECT weights FROM pgdl.models WHERE name = 'tl_base2') WHERE name = 'tl_base';
DO $$
DECLARE v regclass;
BEGIN
  SELECT view INTO v FROM pgdl.feature_cache WHERE depth = 3 AND source = 'tl_packed'::regclass;
  EXECUTE format('REFRESH MATERIALIZED VIEW %s', v);
EXCEPTION WHEN object_not_in_prerequisite_state THEN
  RAISE WARNING 'refresh refused: %', regexp_replace(SQLERRM, 'model [0-9]+', 'model <id>');
END $$;
SELECT "group", action FROM tl_plan('on') ORDER BY "group";
SELECT count(*) AS rows FROM pgdl.fit_multiple('tl_packed', 'tl_set', 1, 'tl_valid', name_prefix => 'tl_on3_', feature_cache => 'on');
SELECT count(*) AS caches, bool_and(valid) AS valid,
       bool_and(base_hash = pgdl.prefix_hash(base_model, depth)) AS current_weights FROM pgdl.feature_cache;

-- dropping: one cache (the caches staged from it go with it), then a cleanup of unused ones
SELECT pgdl.drop_feature_cache(view) FROM pgdl.feature_cache WHERE depth = 3 AND source = 'tl_packed'::regclass;
SELECT depth, source FROM pgdl.feature_cache ORDER BY depth, source::text;
SELECT pgdl.drop_feature_cache('tl_rows');
SELECT pgdl.cleanup_feature_cache('1 hour') AS dropped_recent;
SELECT pgdl.cleanup_feature_cache('0 seconds') AS dropped;
SELECT count(*) AS caches FROM pgdl.feature_cache;
SELECT count(*) AS views_left FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'pgdl_cache' AND c.relkind = 'm';

-- privileges: caches belong to the user who built them; nobody reads another's cached features.
-- The base model is shared with both; each makes a set of their own (sets belong to their owners).
CREATE ROLE regress_tl_alice;
CREATE ROLE regress_tl_bob;
GRANT CREATE ON SCHEMA public TO regress_tl_alice;
GRANT SELECT ON tl_rows TO regress_tl_alice;
SELECT pgdl.grant_model('tl_base', 'regress_tl_alice'), pgdl.grant_model('tl_base', 'regress_tl_bob');
SET ROLE regress_tl_bob;
SELECT pgdl.grid_search('tl_one', '{}', '{"base_model": "tl_base", "freeze": 2, "head": [[{"type": "dense", "units": 4}]]}');
RESET ROLE;
SET ROLE regress_tl_alice;
SELECT pgdl.grid_search('tl_one', '{}', '{"base_model": "tl_base", "freeze": 2, "head": [[{"type": "dense", "units": 4}]]}');
SELECT pgdl.pack('tl_rows', 'x', 'label', 'tl_alice_packed', buffer_rows => 32, partitions => 2) > 0 AS packed;
SELECT count(*) AS rows FROM pgdl.fit_multiple('tl_alice_packed', 'tl_one', 1, feature_cache => 'on');
SELECT owner::text, depth FROM pgdl.feature_cache;
RESET ROLE;
SET ROLE regress_tl_bob;
SELECT count(*) AS caches_bob_sees FROM pgdl.feature_cache;
DO $$
DECLARE v regclass;
BEGIN
  SELECT c.oid INTO v FROM pg_class c WHERE c.relnamespace = 'pgdl_cache'::regnamespace AND c.relkind = 'm';
  EXECUTE format('SELECT count(*) FROM %s', v);
EXCEPTION WHEN insufficient_privilege THEN
  RAISE WARNING 'bob may not read alice''s cache';
END $$;
SELECT count(*) FROM pgdl.fit_multiple('tl_alice_packed', 'tl_one', 1, feature_cache => 'on');
RESET ROLE;
SET ROLE regress_tl_alice;
GRANT SELECT ON tl_alice_packed TO regress_tl_bob;
RESET ROLE;
SET ROLE regress_tl_bob;
-- bob may read the table now, but builds a cache of his own rather than read alice's
SELECT action FROM pgdl.explain_fit_multiple('tl_alice_packed', 'tl_one', 1, feature_cache => 'on') WHERE "group" = 1;
RESET ROLE;
SET ROLE regress_tl_alice;
SELECT pgdl.cleanup_feature_cache('0 seconds') AS dropped;
DROP TABLE tl_alice_packed;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM regress_tl_alice;
REVOKE SELECT ON tl_rows FROM regress_tl_alice;
DELETE FROM pgdl.models WHERE run IN (SELECT id FROM pgdl.runs WHERE dataset IS NULL);
DELETE FROM pgdl.runs WHERE owner::text LIKE 'regress\_tl\_%';
DELETE FROM pgdl.configs WHERE owner::text LIKE 'regress\_tl\_%';
SELECT pgdl.revoke_model('tl_base', 'regress_tl_alice'), pgdl.revoke_model('tl_base', 'regress_tl_bob');
DROP ROLE regress_tl_alice;
DROP ROLE regress_tl_bob;

-- the catalog is writable by all, but a row pointing elsewhere than at a cache of one's own is ignored:
-- neither refreshed, dropped nor cleaned up
CREATE MATERIALIZED VIEW tl_not_a_cache AS SELECT 1 AS one;
INSERT INTO pgdl.feature_cache (dataset, source, base_model, base_hash, depth, view, source_version, rows, bytes, valid)
SELECT d.id, d.packed, m.id, 'forged', 3, 'tl_not_a_cache', 'forged', 1, 1, false
  FROM pgdl.datasets d, pgdl.models m WHERE d.packed = 'tl_packed'::regclass AND m.name = 'tl_base';
SELECT "group", action FROM tl_plan('on') WHERE "group" = 1;
SELECT pgdl.drop_feature_cache('tl_not_a_cache');
SELECT pgdl.cleanup_feature_cache('0 seconds') AS dropped;
SELECT count(*) AS still_there FROM tl_not_a_cache;
DELETE FROM pgdl.feature_cache WHERE base_hash = 'forged';
DROP MATERIALIZED VIEW tl_not_a_cache;

-- any table name: cache names are plain, and names are quoted wherever they go
SELECT pgdl.pack('tl_rows', 'x', 'label', '"Odd''Name; x"', buffer_rows => 64, partitions => 2) > 0 AS packed;
SELECT count(*) AS trained FROM pgdl.fit_multiple('"Odd''Name; x"', 'tl_one', 1, feature_cache => 'on');
SELECT tl_name(view::text) AS view FROM pgdl.feature_cache
 WHERE source = '"Odd''Name; x"'::regclass;
-- dropping the packed table takes its caches (CASCADE: the views depend on it); packed again, it gets new ones
DO $$
BEGIN
  DROP TABLE "Odd'Name; x";
EXCEPTION WHEN dependent_objects_still_exist THEN
  RAISE WARNING 'the packed table has caches: DROP TABLE ... CASCADE';
END $$;
DROP TABLE "Odd'Name; x" CASCADE;
SELECT count(*) AS caches_left FROM pgdl.feature_cache;
SELECT pgdl.pack('tl_rows', 'x', 'label', '"Odd''Name; x"', buffer_rows => 64, partitions => 2) > 0 AS repacked;
SELECT action FROM pgdl.explain_fit_multiple('"Odd''Name; x"', 'tl_one', 1, feature_cache => 'on') WHERE "group" = 1;
DROP TABLE "Odd'Name; x";

-- a training set whose features are preprocessed otherwise than the base model's dataset: allowed, with
-- one NOTICE naming the difference; one preprocessed alike (packed apart, with the same scale): none
SELECT pgdl.pack('tl_rows', 'x', 'label', 'tl_std', buffer_rows => 64, partitions => 2, standardize => true) > 0 AS packed;
SELECT pgdl.pack('tl_rows', 'x', 'label', 'tl_same', buffer_rows => 64, partitions => 2) > 0 AS packed;
SET client_min_messages = notice;
SELECT count(*) AS trained FROM pgdl.fit_multiple('tl_std', 'tl_one', 1, feature_cache => 'off');
SELECT count(*) AS trained FROM pgdl.fit_multiple('tl_same', 'tl_one', 1, feature_cache => 'off');
SET client_min_messages = warning;
DROP TABLE tl_std, tl_same;
