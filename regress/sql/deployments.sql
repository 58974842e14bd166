-- Deployments: a name answers every function that takes a model by name with one model; its history;
-- rollback; fit_multiple's deploy (only a better winner replaces the model served); names owned and
-- granted like models; a role's models and deployments share one set of names.
SET client_min_messages = notice;
\set SHOW_CONTEXT never

-- an error with its numbers (ids, which depend on what ran before) replaced, or 'ok'
CREATE FUNCTION dp_try(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END $$;

CREATE ROLE regress_dp_alice;
CREATE ROLE regress_dp_bob;
GRANT CREATE ON SCHEMA public TO regress_dp_alice, regress_dp_bob;
CREATE TABLE dp_rows AS
SELECT i, ARRAY[a, b]::float8[] AS x, CASE WHEN a > b THEN 1 ELSE 0 END AS label
  FROM generate_series(1, 240) i,
       LATERAL (SELECT (abs(sin(i * 12.9898)) * 43758.5453)::numeric % 1 AS a,
                       (abs(sin(i * 78.233)) * 43758.5453)::numeric % 1 AS b) r;
GRANT SELECT ON dp_rows TO regress_dp_alice, regress_dp_bob;

SET ROLE regress_dp_alice;
CREATE TABLE dp_train_rows AS SELECT * FROM dp_rows WHERE i <= 160;
CREATE TABLE dp_valid_rows AS SELECT * FROM dp_rows WHERE i > 160;
SELECT pgdl.pack('dp_train_rows', 'x', 'label', 'dp_train', buffer_rows => 20, partitions => 2) > 0 AS packed;
SELECT pgdl.pack('dp_valid_rows', 'x', 'label', 'dp_valid', buffer_rows => 20, partitions => 1,
                 reference => 'dp_train') > 0 AS packed;
SELECT pgdl.add_architecture('dp_mlp', '{"input": [2], "layers": [{"type": "dense", "units": 8},
                              {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
SET client_min_messages = warning;
SELECT pgdl.fit('dp_train', 'dp_mlp', '{"lr": 0.001, "seed": 1}', 1, name => 'dp_weak') AS weak \gset
SELECT pgdl.fit('dp_train', 'dp_mlp', '{"lr": 0.3, "seed": 2}', 20, name => 'dp_strong') AS strong \gset
SET client_min_messages = notice;

-- deploy, predict by the name, redeploy, roll back: the name answers with the model it serves
SELECT pgdl.deploy('churn', :weak) = :weak AS deployed;
SELECT pgdl.predict('churn', '{0.9,0.1}') = pgdl.predict(:weak, '{0.9,0.1}') AS weak_answers,
       pgdl.predict_class('churn', '{0.9,0.1}') = pgdl.predict_class(:weak, '{0.9,0.1}') AS same_class;
SELECT pgdl.deploy('churn', 'dp_strong') = :strong AS redeployed;
SELECT pgdl.predict('churn', '{0.9,0.1}') = pgdl.predict(:strong, '{0.9,0.1}') AS strong_answers;
SET client_min_messages = warning;	-- its notice names the model's id
SELECT pgdl.deploy('churn', :strong) = :strong AS again;	-- already served: a notice, no new version
SET client_min_messages = notice;
SELECT name, owner, version, model = :weak AS weak, model_name, deployed_by, rolled_back_by IS NULL AS kept,
       active, metrics ? 'train_loss' AS has_metrics
  FROM pgdl.deployments ORDER BY version;
-- every function taking a model by name takes the deployment's
SELECT (SELECT (e).loss FROM (SELECT pgdl.evaluate('churn', 'dp_valid') AS e) s) =
       (SELECT (e).loss FROM (SELECT pgdl.evaluate(:strong, 'dp_valid') AS e) s) AS evaluate_same;
SELECT (SELECT value FROM pgdl.metrics('churn', 'dp_valid') WHERE metric = 'accuracy') =
       (SELECT value FROM pgdl.metrics(:strong, 'dp_valid') WHERE metric = 'accuracy') AS metrics_same;
SELECT (SELECT array_agg(class ORDER BY id) FROM pgdl.predict_batch('churn', 'dp_rows', 'i', 'x')) =
       (SELECT array_agg(class ORDER BY id) FROM pgdl.predict_batch(:strong, 'dp_rows', 'i', 'x')) AS batch_same;
SELECT pgdl.export_onnx('churn') = pgdl.export_onnx(:strong) AS onnx_same;
SELECT pgdl.rollback('churn') = :weak AS rolled_back;
SELECT pgdl.predict('churn', '{0.9,0.1}') = pgdl.predict(:weak, '{0.9,0.1}') AS weak_again;
SELECT version, model_name, rolled_back_by, rolled_back_at IS NOT NULL AS rolled_back, active
  FROM pgdl.deployments WHERE name = 'churn' ORDER BY version;
SELECT dp_try($$SELECT pgdl.rollback('churn')$$) AS nothing_earlier;
-- redeploying a rolled-back model is a new version; rollback walks back past rolled-back entries
SELECT pgdl.deploy('churn', :strong) = :strong AS redeployed;
SELECT pgdl.rollback('churn') = :weak AS back_to_weak;
SELECT count(*) AS versions, count(*) FILTER (WHERE active) AS serving FROM pgdl.deployments WHERE name = 'churn';

-- a role's models and deployments share one set of names, whichever comes second
SELECT dp_try($$SELECT pgdl.deploy('dp_weak', $$ || :strong || $$)$$) AS model_name_taken;
SELECT dp_try($$SELECT pgdl.fit('dp_train', 'dp_mlp', '{}', 1, name => 'churn')$$) AS deployment_name_taken;
SELECT dp_try($$INSERT INTO pgdl.models (name, spec, weights) SELECT 'churn', spec, weights FROM pgdl.models WHERE id = $$ || :weak) AS insert_refused;
SELECT dp_try($$UPDATE pgdl.models SET name = 'churn' WHERE id = $$ || :weak) AS rename_refused;

-- arguments
SELECT dp_try($$SELECT pgdl.deploy(NULL, 1::bigint)$$) AS null_name,
       dp_try($$SELECT pgdl.deploy('x', NULL::bigint)$$) AS null_model,
       dp_try($$SELECT pgdl.deploy('x', NULL::text)$$) AS null_model_name;
SELECT dp_try($$SELECT pgdl.deploy('', $$ || :weak || $$)$$) AS empty_name,
       dp_try($$SELECT pgdl.deploy(repeat('n', 201), $$ || :weak || $$)$$) AS long_name;
SELECT dp_try($$SELECT pgdl.deploy('x', -1::bigint)$$) AS no_model,
       dp_try($$SELECT pgdl.deploy('x', 'no such model')$$) AS no_model_name;
SELECT dp_try($$SELECT pgdl.rollback(NULL)$$) AS null_rollback,
       dp_try($$SELECT pgdl.rollback('no such deployment')$$) AS no_deployment,
       dp_try($$SELECT pgdl.drop_deployment(repeat('q''\', 100))$$) AS no_deployment_quoted;
SELECT dp_try($$SELECT pgdl.grant_deployment('churn', 'no_such_role')$$) AS no_role,
       dp_try($$SELECT pgdl.grant_deployment('churn', NULL)$$) AS null_role;
-- a diverged model serves nothing
SET client_min_messages = warning;
SELECT pgdl.fit('dp_train', 'dp_mlp', '{"lr": 1e30, "seed": 3}', 2) AS diverged \gset
SET client_min_messages = notice;
SELECT dp_try($$SELECT pgdl.deploy('broken', $$ || :diverged || $$)$$) AS diverged_refused;

-- fit_multiple(..., deploy): the winner replaces the model served only when it beats it on the
-- validation table by the ranking metric; both are scored now on that table
SELECT pgdl.grid_search('dp_set', '{dp_mlp}', '{"lr": [0.0001, 0.00001], "seed": [5]}') > 0 AS set_made;
SELECT pgdl.deploy('churn', :strong) = :strong AS strong_served;
SET client_min_messages = warning;	-- the notices name model ids and scores
SELECT count(*) AS trained FROM pgdl.fit_multiple('dp_train', 'dp_set', 1, validation => 'dp_valid',
                                                   workers => 1, rank_by => 'accuracy', deploy => 'churn');
SELECT model = :strong AS strong_kept FROM pgdl.deployments WHERE name = 'churn' AND active;
SELECT count(*) AS trained FROM pgdl.fit_multiple('dp_train', 'dp_set', 1, validation => 'dp_valid',
                                                   workers => 1, deploy => 'fresh_name');
SELECT pgdl.grid_search('dp_good', '{dp_mlp}', '{"lr": [0.3], "seed": [2]}') > 0 AS set_made;
SELECT count(*) AS trained FROM pgdl.fit_multiple('dp_train', 'dp_good', 20, validation => 'dp_valid',
                                                   workers => 1, deploy => 'fresh_name');
SET client_min_messages = notice;
SELECT version, model_name IS NULL AS unnamed, active FROM pgdl.deployments WHERE name = 'fresh_name' ORDER BY version;
SELECT (SELECT (pgdl.evaluate(model, 'dp_valid')).loss FROM pgdl.deployments WHERE name = 'fresh_name' AND version = 2) <
       (SELECT (pgdl.evaluate(model, 'dp_valid')).loss FROM pgdl.deployments WHERE name = 'fresh_name' AND version = 1)
       AS better_replaced;
SELECT dp_try($$SELECT * FROM pgdl.fit_multiple('dp_train', 'dp_set', 1, workers => 1, deploy => 'x')$$) AS needs_validation;
SELECT dp_try($$SELECT * FROM pgdl.fit_multiple('dp_train', 'dp_set', 1, workers => 1, folds => true, deploy => 'x')$$) AS not_with_folds;
SELECT dp_try($$SELECT * FROM pgdl.fit_multiple('dp_train', 'dp_set', 1, validation => 'dp_valid', deploy => '')$$) AS empty_deploy_name;
SELECT pgdl.drop_deployment('fresh_name');

-- a deployed model stays while its name keeps it in its history
SELECT dp_try($$SELECT pgdl.delete_rows('pgdl.models', ARRAY[$$ || :strong || $$]::bigint[])$$) AS kept_by_history;
RESET ROLE;

-- bob sees nothing of alice's deployment, and cannot take it over
SET ROLE regress_dp_bob;
SELECT count(*) AS seen FROM pgdl.deployments;
SELECT dp_try($$SELECT pgdl.predict('churn', '{0.9,0.1}')$$) AS no_use;
SELECT dp_try($$SELECT pgdl.rollback('churn')$$) AS no_rollback;
SELECT dp_try($$SELECT pgdl.deploy('churn', $$ || :strong || $$)$$) AS not_his_model;
SELECT dp_try($$SELECT pgdl.grant_deployment('churn', 'regress_dp_bob')$$) AS no_self_grant;
-- forged rows: his own name pointing at her model, his entry in her name
INSERT INTO pgdl.deployment_names (name) VALUES ('forged');
SELECT dp_try($$INSERT INTO pgdl.deployment_history (deployment, model)
                SELECT id, $$ || :strong || $$ FROM pgdl.deployment_names WHERE name = 'forged'$$) AS her_model_refused;
SELECT dp_try($$INSERT INTO pgdl.deployment_history (deployment, model, owner)
                SELECT d.id, $$ || :strong || $$, 'regress_dp_alice' FROM pgdl.deployment_names d$$) AS her_owner_refused;
SELECT pgdl.drop_deployment('forged');
RESET ROLE;

-- shared: bob uses the name, and the model it serves, not the ones it served before
SET ROLE regress_dp_alice;
SELECT pgdl.grant_deployment('churn', 'regress_dp_bob');
RESET ROLE;
SET ROLE regress_dp_bob;
SELECT pgdl.predict('churn', '{0.9,0.1}') IS NOT NULL AS bob_predicts;
SELECT count(*) AS versions_seen, count(model_name) AS models_seen FROM pgdl.deployments WHERE name = 'churn';
SELECT dp_try($$SELECT pgdl.predict($$ || :weak || $$, '{0.9,0.1}')$$) AS old_model_hidden;
-- his own model of the name is what the name means to him
SET client_min_messages = warning;
CREATE TABLE dp_bob_rows AS SELECT * FROM dp_rows;
SELECT pgdl.pack('dp_bob_rows', 'x', 'label', 'dp_bob', buffer_rows => 20, partitions => 1) > 0 AS packed;
SELECT pgdl.fit('dp_bob', '{"input": [2], "layers": [{"type": "dense", "units": 2}]}'::jsonb, '{"lr": 0.01, "seed": 9}',
                1, name => 'churn') AS bobs \gset
SET client_min_messages = notice;
SELECT pgdl.predict('churn', '{0.9,0.1}') = pgdl.predict(:bobs, '{0.9,0.1}') AS own_first;
SELECT pgdl.delete_rows('pgdl.models', ARRAY[:bobs]::bigint[]);
DROP TABLE dp_bob_rows, dp_bob;
RESET ROLE;
SET ROLE regress_dp_alice;
SELECT pgdl.revoke_deployment('churn', 'regress_dp_bob');
RESET ROLE;
SET ROLE regress_dp_bob;
SELECT dp_try($$SELECT pgdl.predict('churn', '{0.9,0.1}')$$) AS revoked;
RESET ROLE;

-- dropping the name keeps the models; then they may be deleted
SET ROLE regress_dp_alice;
SELECT pgdl.drop_deployment('churn');
SELECT count(*) AS left FROM pgdl.deployments;
SELECT pgdl.delete_rows('pgdl.models', ARRAY[:weak, :strong]::bigint[]) AS deleted;
RESET ROLE;

-- a role's catalog rows outlive it unless deleted
DROP TABLE dp_rows, dp_train_rows, dp_valid_rows, dp_train, dp_valid CASCADE;
DROP FUNCTION dp_try(text);
DELETE FROM pgdl.deployment_names WHERE pg_get_userbyid(owner) LIKE 'regress\_dp%';
DELETE FROM pgdl.models WHERE pg_get_userbyid(owner) LIKE 'regress\_dp%';
DELETE FROM pgdl.runs WHERE pg_get_userbyid(owner) LIKE 'regress\_dp%';
DELETE FROM pgdl.configs WHERE pg_get_userbyid(owner) LIKE 'regress\_dp%';
DELETE FROM pgdl.architectures WHERE pg_get_userbyid(owner) LIKE 'regress\_dp%';
DELETE FROM pgdl.datasets WHERE pg_get_userbyid(owner) LIKE 'regress\_dp%';
SELECT count(*) AS rows_left FROM (
  SELECT owner FROM pgdl.datasets UNION ALL SELECT owner FROM pgdl.architectures UNION ALL
  SELECT owner FROM pgdl.models UNION ALL SELECT owner FROM pgdl.runs UNION ALL
  SELECT owner FROM pgdl.run_metrics UNION ALL SELECT owner FROM pgdl.configs UNION ALL
  SELECT owner FROM pgdl.checkpoints UNION ALL SELECT owner FROM pgdl.deployment_names UNION ALL
  SELECT owner FROM pgdl.deployment_history) o
 WHERE pg_get_userbyid(owner) LIKE 'regress\_dp%';
REVOKE CREATE ON SCHEMA public FROM regress_dp_alice, regress_dp_bob;
DROP ROLE regress_dp_alice, regress_dp_bob;
