-- Predicted pace (pgdl.estimate, pgdl.explain_fit_multiple) with and without this server's profile
-- (pgdl.calibrate, pgdl.server_profiles).  Timings differ between machines: only shapes, relations between
-- predictions and errors are shown.  Calibration runs in a transaction that is rolled back, so that the other
-- tests see no profile.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
\set mlp '{"input": [784], "layers": [{"type": "dense", "units": 512}, {"type": "relu"}, {"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 10}]}'
\set wide '{"input": [784], "layers": [{"type": "dense", "units": 2048}, {"type": "relu"}, {"type": "dense", "units": 1024}, {"type": "relu"}, {"type": "dense", "units": 10}]}'
\set cnn '{"input": [1, 28, 28], "layers": [{"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "batchnorm"}, {"type": "relu"}, {"type": "maxpool2d", "size": 2}, {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "avgpool2d", "size": 2}, {"type": "flatten"}, {"type": "dropout"}, {"type": "dense", "units": 10}]}'

-- without a profile: pgdl.cpu_gflops, as before
SELECT count(*) AS profiles FROM pgdl.server_profiles;
SELECT profile, basis, images_per_second = 40e9 / flops_train AS from_cpu_gflops, seconds_per_epoch,
       jsonb_array_length(workers) >= 1 AS per_worker_count, workers->0->>'workers' AS first,
       (workers->0->>'images_per_second')::float8 = images_per_second AS first_is_one_worker,
       memory ? 'buffers' AS has_buffers,
       (memory->>'model')::bigint + (memory->>'optimizer')::bigint + (memory->>'workspace')::bigint = memory_bytes AS parts_add_up
  FROM pgdl.estimate(:'mlp', '{"momentum": 0.9}');
SELECT round(seconds_per_epoch::numeric, 6) = round((60000 / images_per_second)::numeric, 6) AS epoch,
       (workers->0->>'seconds_per_epoch')::float8 = seconds_per_epoch AS per_worker_epoch,
       (memory->>'buffers')::bigint AS buffers, (memory->>'total')::bigint - memory_bytes AS total_adds_buffers
  FROM pgdl.estimate(:'mlp', '{}', 60000);
SELECT w.images_per_second < m.images_per_second AS wider_is_slower
  FROM pgdl.estimate(:'mlp') m, pgdl.estimate(:'wide') w;
-- hostile input
SELECT * FROM pgdl.estimate(NULL);
SELECT * FROM pgdl.estimate(:'mlp', NULL);
SELECT pgdl.estimate(:'mlp', '{}', 0);
SELECT pgdl.estimate(:'mlp', '{}', -1);
SELECT pgdl.estimate(:'mlp', '{}', 9223372036854775807);
SELECT pgdl.estimate('{"input": [1048577], "layers": [{"type": "dense", "units": 10}]}');
SELECT pgdl.calibrate(NULL);
SELECT pgdl.calibrate('NaN');
SELECT pgdl.calibrate('Infinity');
SELECT pgdl.calibrate(0.5);
SELECT pgdl.calibrate(601);
SELECT pgdl.calibrate(1, 0);
SELECT pgdl.calibrate(1, 65);

-- who may calibrate: superusers and pgdl_admin; everybody reads the profiles and estimates
CREATE ROLE regress_est_user;
CREATE ROLE regress_est_admin IN ROLE pgdl_admin;
SET ROLE regress_est_user;
SELECT pgdl.calibrate(1, 1);
INSERT INTO pgdl.server_profiles (system_identifier, hostname, cores, workers, seconds, measurements)
  VALUES (1, 'forged', 1, 1, 1, '{}');
SELECT count(*) AS profiles_readable FROM pgdl.server_profiles;
SELECT basis FROM pgdl.estimate(:'mlp');
RESET ROLE;

BEGIN;
SET LOCAL ROLE regress_est_admin;
SELECT pgdl.calibrate(seconds => 2, workers => 1) > 0 AS calibrated_by_admin;
RESET ROLE;
SELECT pgdl.calibrate(seconds => 2) > 0 AS calibrated;
-- the row: dated, of this server, the newest wins
SELECT count(*) AS profiles, count(DISTINCT system_identifier) AS servers, bool_and(created IS NOT NULL) AS dated,
       bool_and(cores >= 1 AND workers >= 1 AND seconds > 0) AS sane
  FROM pgdl.server_profiles;
SELECT pg_typeof(p.id) AS id, measurements->>'version' AS version,
       (SELECT array_agg(DISTINCT k ORDER BY k) FROM jsonb_object_keys(measurements) k) AS keys,
       (SELECT array_agg(DISTINCT r->>'kind') FROM jsonb_array_elements(measurements->'points') r)
         @> '{dense,conv2d,conv2d_first,relu,leaky_relu,sigmoid,tanh,dropout,batchnorm,batchnorm1d,maxpool2d,avgpool2d,global_avgpool,update_sgd,update_momentum,update_adam,step,read,fault,visit,checkpoint}' AS kinds,
       (SELECT array_agg(DISTINCT (r->>'batch')::int ORDER BY (r->>'batch')::int) FROM jsonb_array_elements(measurements->'points') r
         WHERE r->>'kind' = 'dense') AS batches,
       (SELECT bool_and((r->>'seconds')::float8 > 0 AND (r->>'size')::float8 >= 1) FROM jsonb_array_elements(measurements->'points') r) AS positive,
       (measurements->'concurrency'->>'workers')::int = p.workers AS concurrency_workers,
       (measurements->'concurrency'->>'compute')::float8 > 0 AS compute_ratio
  FROM pgdl.server_profiles p ORDER BY id DESC LIMIT 1;
-- first convolutions are measured at two kernels: their points say which
SELECT array_agg(DISTINCT (r->>'kernel')::int ORDER BY (r->>'kernel')::int) AS first_conv_kernels
  FROM pgdl.server_profiles p, jsonb_array_elements(p.measurements->'points') r
 WHERE p.id = (SELECT max(id) FROM pgdl.server_profiles) AND r->>'kind' = 'conv2d_first';
SELECT e.profile = (SELECT max(id) FROM pgdl.server_profiles) AS newest, e.basis,
       e.images_per_second > 0 AS predicts, e.seconds_per_epoch > 0 AS epoch,
       jsonb_array_length(e.workers) >= (SELECT workers FROM pgdl.server_profiles ORDER BY id DESC LIMIT 1) AS per_worker_count
  FROM pgdl.estimate(:'mlp', '{}', 60000) e;
-- a wider network, and a CNN with every layer kind
SELECT w.images_per_second < m.images_per_second AS wider_is_slower,
       (SELECT images_per_second FROM pgdl.estimate(:'cnn')) > 0 AS cnn_predicts
  FROM pgdl.estimate(:'mlp') m, pgdl.estimate(:'wide') w;
SET ROLE regress_est_user;
SELECT basis, profile IS NOT NULL AS profile FROM pgdl.estimate(:'cnn');
RESET ROLE;
-- a profile changed by hand is refused, not trusted
SAVEPOINT forged;
UPDATE pgdl.server_profiles SET measurements = jsonb_set(measurements, '{version}', '2');
SELECT basis FROM pgdl.estimate(:'mlp');
ROLLBACK TO forged;
UPDATE pgdl.server_profiles SET measurements = jsonb_set(measurements, '{points,0,seconds}', '-1');
SELECT basis FROM pgdl.estimate(:'mlp');
ROLLBACK TO forged;
UPDATE pgdl.server_profiles SET measurements = jsonb_set(measurements, '{points}', '"none"');
SELECT basis FROM pgdl.estimate(:'mlp');
ROLLBACK TO forged;
UPDATE pgdl.server_profiles SET measurements = jsonb_set(measurements, '{concurrency,memory}', '0');
SELECT basis FROM pgdl.estimate(:'mlp');
ROLLBACK TO forged;
UPDATE pgdl.server_profiles SET measurements = jsonb_set(measurements, '{points}',
  (SELECT jsonb_agg(CASE WHEN r ? 'kernel' THEN jsonb_set(r, '{kernel}', '0') ELSE r END)
     FROM jsonb_array_elements(measurements->'points') r));
SELECT basis FROM pgdl.estimate(:'cnn');
ROLLBACK TO forged;
-- a profile of before convolutions were keyed by kernel: all their points are used
UPDATE pgdl.server_profiles SET measurements = jsonb_set(measurements, '{points}',
  (SELECT jsonb_agg(r - 'kernel') FROM jsonb_array_elements(measurements->'points') r));
SELECT basis, images_per_second > 0 AS predicts FROM pgdl.estimate(:'cnn');
ROLLBACK TO forged;
-- another server's profile (a restored catalog) is not used
UPDATE pgdl.server_profiles SET system_identifier = system_identifier + 1;
SELECT basis, profile FROM pgdl.estimate(:'mlp');
ROLLBACK TO forged;
-- a pgdl.fit_multiple run's work besides training (its models' visits and checkpoints) counts in
-- explain_fit_multiple's total, in proportion to the models' parameters; not with a profile of before
SAVEPOINT models;
CREATE TABLE est_rows AS SELECT i, ARRAY[(i % 7)::real, (i % 5)::real, (i % 3)::real, 1] AS x, i % 2 AS label
  FROM generate_series(1, 200) i;
SELECT pgdl.pack('est_rows', 'x', 'label', 'est_packed', buffer_rows => 50, partitions => 2, seed => 1) IS NOT NULL AS packed;
SELECT pgdl.add_architecture('est_wide', '{"input": [4], "layers": [{"type": "dense", "units": 32768}, {"type": "relu"}, {"type": "dense", "units": 2}]}') > 0 AS added;
SELECT pgdl.grid_search('est_set', ARRAY['est_wide'], '{"lr": [0.1, 0.01], "batch_size": 50}') AS configs;
SELECT predicted_seconds AS with_models FROM pgdl.explain_fit_multiple('est_packed', 'est_set', 3, workers => 2)
 WHERE action = 'total' \gset
UPDATE pgdl.server_profiles SET measurements = jsonb_set(measurements, '{points}',
  (SELECT jsonb_agg(r) FROM jsonb_array_elements(measurements->'points') r WHERE r->>'kind' NOT IN ('visit', 'checkpoint')));
SELECT predicted_seconds < :with_models AS models_counted
  FROM pgdl.explain_fit_multiple('est_packed', 'est_set', 3, workers => 2) WHERE action = 'total';
ROLLBACK TO models;
-- a profile of before leaky_relu and batchnorm1d were measured apart: they are predicted as relu and batchnorm
UPDATE pgdl.server_profiles SET measurements = jsonb_set(measurements, '{points}',
  (SELECT jsonb_agg(r) FROM jsonb_array_elements(measurements->'points') r WHERE r->>'kind' NOT IN ('leaky_relu', 'batchnorm1d')));
SELECT l.images_per_second = r.images_per_second AS leaky_as_relu, l.basis
  FROM pgdl.estimate('{"input": [64], "layers": [{"type": "dense", "units": 32}, {"type": "leaky_relu"}, {"type": "dense", "units": 4}]}') l,
       pgdl.estimate('{"input": [64], "layers": [{"type": "dense", "units": 32}, {"type": "relu"}, {"type": "dense", "units": 4}]}') r;
ROLLBACK;
SELECT count(*) AS profiles_after_rollback FROM pgdl.server_profiles;

DROP ROLE regress_est_user, regress_est_admin;
