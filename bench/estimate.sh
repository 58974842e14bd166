#!/bin/bash
# bench/estimate.sh -- how well pgdl.estimate predicts: pgdl.calibrate() measures this server, then for
# networks and batch sizes the calibration did not use (MLPs and CNNs of several widths and depths, with
# batchnorm, dropout, average and global pooling, tanh, sigmoid, leaky_relu, adam) the predicted images/s
# (pgdl.estimate) against the measured (pgdl.fit, four epochs on a subset of Fashion-MNIST: the median of
# epochs 2-4's pgdl.run_metrics.images_per_second, training from the buffers the first kept in memory, which
# is what images_per_second predicts; a median, as one epoch of a small network takes well under a second
# and a single slow one on a shared machine could stand for it; the first epoch's seconds, which also read
# the packed table and start the call, are shown beside pgdl.estimate's seconds_per_epoch), and the predicted wall time of a small
# pgdl.fit_multiple run (pgdl.explain_fit_multiple's total) against the measured one.
#
# Everything runs in PASSES (default 3) passes, one after the other, each a calibration, then the predictions
# from its profile and the measurements: a trial of what a user sees who calibrates and then trains.  Of each
# network (and of fit_multiple) the pass with the median error counts, every pass's error is shown: on a
# shared machine the pace of the same build and data moves by 20-60% for seconds to minutes at a time
# (another guest's use of the caches), and a calibration and the runs just after it share the machine's state
# more often than runs minutes apart.
#
# Usage: bench/estimate.sh   (make install first; make bench-estimate runs it, about 7 minutes)
# Environment: a PostgreSQL with pgdl installed given by PGHOST/PGPORT/PGDATABASE, or none (a private
# server is started).  LIMIT (default 12800 training images), CALIBRATE_SECONDS (default 40), PASSES.
# The last line is always
#   estimate: median error = X%, worst = Y%
# over every pair and the fit_multiple run (error = |predicted - measured| / measured).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LIMIT=${LIMIT:-12800}
CALIBRATE_SECONDS=${CALIBRATE_SECONDS:-40}
PASSES=${PASSES:-3}
SET=bench_estimate

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
bench_start estimate
echo "data: $n_train training images ($train), buffers of 3200 rows, 2 partitions"

psql <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgdl;
DELETE FROM pgdl.models WHERE name LIKE 'bench_est_%' OR run IN (SELECT id FROM pgdl.runs WHERE config->>'set' = '$SET');
DELETE FROM pgdl.runs WHERE config->>'set' = '$SET';
DELETE FROM pgdl.configs WHERE set_name = '$SET';
DROP TABLE IF EXISTS bench_est_train, bench_est_results;
SELECT pgdl.pack('$train', 'image', 'label', 'bench_est_train', buffer_rows => 3200, partitions => 2, seed => 42,
                 scale => 1 / 255.0) IS NOT NULL AS packed \gset
DROP TABLE IF EXISTS bench_est_passes;
CREATE TABLE bench_est_results (what text, batch integer, predicted double precision, measured double precision,
                                first_predicted double precision, first_measured double precision, pass integer,
                                run bigint, ord integer, error double precision);
SQL

# calibrate N: a new profile for pass N
calibrate() {
	local cal_s
	cal_s=$(psql -At <<SQL
SET client_min_messages = warning;
SELECT clock_timestamp() AS t0 \gset
SELECT pgdl.calibrate($CALIBRATE_SECONDS) AS profile \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 1);
SQL
)
	echo "calibrate (pass $1): $cal_s s; $(psql -At -c "SELECT format('%s points, %s workers, concurrency ratios compute %s, memory %s',
  jsonb_array_length(measurements->'points'), workers, round((measurements->'concurrency'->>'compute')::numeric, 2),
  round((measurements->'concurrency'->>'memory')::numeric, 2)) FROM pgdl.server_profiles ORDER BY id DESC LIMIT 1")"
}

dense() { printf '{"type": "dense", "units": %s}' "$1"; }
conv() { printf '{"type": "conv2d", "filters": %s, "kernel": %s, "padding": %s}' "$1" "$2" "$(($2 / 2))"; }
act() { printf '{"type": "%s"}' "$1"; }
pool() { printf '{"type": "%s", "size": 2}' "$1"; }
mlp() { printf '{"input": [784], "layers": [%s]}' "$1"; }
cnn() { printf '{"input": [1, 28, 28], "layers": [%s]}' "$1"; }

# name | spec | config: none of these networks, nor batch sizes 32, 50, 100, 128, 160 and 200, is calibrated
nets=(
	"mlp 128|$(mlp "$(dense 128), $(act relu), $(dense 10)")|{\"batch_size\": 32, \"momentum\": 0.9}"
	"mlp 300-100|$(mlp "$(dense 300), $(act relu), $(dense 100), $(act relu), $(dense 10)")|{\"batch_size\": 100, \"momentum\": 0.9}"
	"mlp 1000|$(mlp "$(dense 1000), $(act relu), $(dense 10)")|{\"batch_size\": 128}"
	"mlp 512-256 adam|$(mlp "$(dense 512), $(act relu), $(dense 256), $(act relu), $(dense 10)")|{\"batch_size\": 64, \"optimizer\": \"adam\", \"lr\": 0.001}"
	"mlp 3x256 tanh|$(mlp "$(dense 256), $(act tanh), $(dense 256), $(act tanh), $(dense 256), $(act tanh), $(dense 10)")|{\"batch_size\": 200, \"momentum\": 0.9}"
	"mlp 512 bn dropout|$(mlp "$(dense 512), $(act batchnorm), $(act relu), $(act dropout), $(dense 10)")|{\"batch_size\": 128, \"momentum\": 0.9}"
	"mlp 400-200 leaky|$(mlp "$(dense 400), $(act leaky_relu), $(dense 200), $(act leaky_relu), $(dense 10)")|{\"batch_size\": 160, \"momentum\": 0.9}"
	"cnn 16-32 (reference)|$(cnn "$(conv 16 3), $(act relu), $(pool maxpool2d), $(conv 32 3), $(act relu), $(pool maxpool2d), $(act flatten), $(dense 10)")|{\"batch_size\": 128, \"momentum\": 0.9}"
	"cnn 8 k5|$(cnn "$(conv 8 5), $(act relu), $(pool maxpool2d), $(act flatten), $(dense 10)")|{\"batch_size\": 32, \"momentum\": 0.9}"
	"cnn 16 bn avgpool 32 gap|$(cnn "$(conv 16 3), $(act batchnorm), $(act relu), $(pool avgpool2d), $(conv 32 3), $(act relu), $(act global_avgpool), $(dense 10)")|{\"batch_size\": 64, \"momentum\": 0.9}"
	"cnn 32-64 dense 128|$(cnn "$(conv 32 3), $(act relu), $(pool maxpool2d), $(conv 64 3), $(act relu), $(pool maxpool2d), $(act flatten), $(dense 128), $(act relu), $(dense 10)")|{\"batch_size\": 100, \"momentum\": 0.9}"
	"cnn 12 sigmoid avgpool|$(cnn "$(conv 12 3), $(act sigmoid), $(pool avgpool2d), $(act flatten), $(dense 10)")|{\"batch_size\": 50, \"momentum\": 0.9}"
	"cnn 16-16-32 deep|$(cnn "$(conv 16 3), $(act relu), $(conv 16 3), $(act relu), $(pool maxpool2d), $(conv 32 3), $(act relu), $(pool maxpool2d), $(act flatten), $(dense 10)")|{\"batch_size\": 128, \"optimizer\": \"adam\", \"lr\": 0.001}"
)

psql <<SQL
SET client_min_messages = warning;
SELECT pgdl.add_architecture('bench_est_mlp', '$(mlp "$(dense 384), $(act relu), $(dense 128), $(act relu), $(dense 10)")') AS mlp \gset
SELECT pgdl.add_architecture('bench_est_cnn', '$(cnn "$(conv 12 3), $(act relu), $(pool maxpool2d), $(conv 24 3), $(act relu), $(pool maxpool2d), $(act flatten), $(dense 10)")') AS cnn \gset
INSERT INTO pgdl.configs (set_name, architecture, config) VALUES
  ('$SET', :mlp, '{"batch_size": 64, "momentum": 0.9, "lr": 0.01, "seed": 42}'),
  ('$SET', :mlp, '{"batch_size": 128, "optimizer": "adam", "lr": 0.001, "seed": 42}'),
  ('$SET', :cnn, '{"batch_size": 64, "momentum": 0.9, "lr": 0.01, "seed": 42}'),
  ('$SET', :cnn, '{"batch_size": 100, "momentum": 0.9, "lr": 0.02, "seed": 42}');
SQL

for pass in $(seq 1 "$PASSES"); do
	calibrate "$pass"
	for ord in "${!nets[@]}"; do
		IFS='|' read -r name spec config <<<"${nets[$ord]}"
		psql -v name="$name" -v spec="$spec" -v config="$config" -v n_train="$n_train" -v pass="$pass" -v ord="$ord" <<'SQL'
SET client_min_messages = warning;
SELECT images_per_second AS predicted, seconds_per_epoch AS first FROM pgdl.estimate(:'spec', :'config', :n_train) \gset
SELECT pgdl.fit('bench_est_train', :'spec'::jsonb, :'config', epochs => 4, name => 'bench_est_' || md5(:'name') || '_' || :pass) AS model \gset
INSERT INTO bench_est_results
SELECT :'name', (:'config'::jsonb->>'batch_size')::integer, :predicted,
       (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY r.images_per_second)
          FROM pgdl.run_metrics r WHERE r.run = m.run AND r.epoch BETWEEN 2 AND 4),
       :first, r1.seconds, :pass, NULL, :ord
  FROM pgdl.models m JOIN pgdl.run_metrics r1 ON r1.run = m.run AND r1.epoch = 1 WHERE m.id = :model;
SQL
	done
	psql <<SQL
SET client_min_messages = warning;
SELECT predicted_seconds AS predicted FROM pgdl.explain_fit_multiple('bench_est_train', '$SET', 1, workers => 2)
 WHERE action = 'total' \gset
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) AS models FROM pgdl.fit_multiple('bench_est_train', '$SET', 1, workers => 2) \gset
INSERT INTO bench_est_results (what, predicted, measured, pass, run, ord)
SELECT 'fit_multiple wall time', :predicted, extract(epoch FROM clock_timestamp() - :'t0'::timestamptz), $pass,
       (SELECT max(id) FROM pgdl.runs WHERE config->>'set' = '$SET'), ${#nets[@]};
SQL
done

# each pass's errors, then of each network and of fit_multiple only the pass of the median error
psql -At <<'SQL'
UPDATE bench_est_results SET error = 100 * abs(predicted - measured) / measured;
CREATE TABLE bench_est_passes AS
SELECT what, string_agg(round(error::numeric, 1) || '%', ' ' ORDER BY pass) AS errors FROM bench_est_results GROUP BY what;
DELETE FROM bench_est_results r
 WHERE r.pass <> (SELECT o.pass FROM bench_est_results o WHERE o.what = r.what
                   ORDER BY o.error, o.pass OFFSET ((SELECT count(*) FROM bench_est_results c WHERE c.what = r.what) - 1) / 2 LIMIT 1);
SQL

echo "== pgdl.fit, 4 epochs each, in each of $PASSES passes after its own calibration: predicted (pgdl.estimate) vs measured"
echo "   (pgdl.run_metrics, median of epochs 2-4) images/s of the pass with the median error; every pass's error; first"
echo "   epoch's seconds (reading the packed table, starting the call) for information"
printf '%-26s %6s %10s %10s %7s %-22s %6s %6s\n' network batch predicted measured error 'passes' 'ep1 p' 'ep1 m'
psql -At -c "SELECT format('%-26s %6s %10s %10s %6s%% %-22s %6s %6s', r.what, batch, round(predicted::numeric), round(measured::numeric),
  round(error::numeric, 1), p.errors, round(first_predicted::numeric, 2), round(first_measured::numeric, 2))
  FROM bench_est_results r JOIN bench_est_passes p USING (what) WHERE r.what <> 'fit_multiple wall time' ORDER BY ord"

echo "== pgdl.fit_multiple, 2 workers, 1 epoch, 4 configurations: predicted (explain_fit_multiple) vs measured wall time"
echo "   (the pass with the median error)"
psql -At -c "SELECT format('fit_multiple: predicted %s s, measured %s s, error %s%% (passes: %s)', round(predicted::numeric, 2),
  round(measured::numeric, 2), round(error::numeric, 1), p.errors)
  FROM bench_est_results r JOIN bench_est_passes p USING (what) WHERE r.what = 'fit_multiple wall time'"
# the prediction's parts besides training, from the profile: a profile without them, in a rolled-back transaction
psql -At <<SQL
BEGIN;
SELECT predicted_seconds AS whole FROM pgdl.explain_fit_multiple('bench_est_train', '$SET', 1, workers => 2)
 WHERE action = 'total' \gset
UPDATE pgdl.server_profiles SET measurements = jsonb_set(measurements, '{points}',
  (SELECT jsonb_agg(r) FROM jsonb_array_elements(measurements->'points') r WHERE r->>'kind' NOT IN ('visit', 'checkpoint')))
 WHERE id = (SELECT max(id) FROM pgdl.server_profiles);
SELECT predicted_seconds AS no_models FROM pgdl.explain_fit_multiple('bench_est_train', '$SET', 1, workers => 2)
 WHERE action = 'total' \gset
SELECT format('  of the prediction: %s s the models'' visits, checkpoints and storing, %s s the workers'' start',
  round((:whole - :no_models)::numeric, 2),
  round((SELECT (r->>'seconds')::numeric FROM pgdl.server_profiles p, jsonb_array_elements(p.measurements->'points') r
          WHERE p.id = (SELECT max(id) FROM pgdl.server_profiles) AND r->>'kind' = 'worker_start' LIMIT 1), 2));
ROLLBACK;
SQL
psql -At -c "SELECT format('  per model and epoch (pgdl.run_metrics): predicted %s s, measured %s s of training',
  round(sum(m.predicted_seconds)::numeric, 2), round(sum(m.seconds)::numeric, 2))
  FROM pgdl.run_metrics m WHERE m.run = (SELECT run FROM bench_est_results WHERE what = 'fit_multiple wall time')"

psql -At -c "SELECT format('estimate: median error = %s%%, worst = %s%%',
  round(percentile_cont(0.5) WITHIN GROUP (ORDER BY e)::numeric, 1), round(max(e)::numeric, 1))
  FROM (SELECT 100 * abs(predicted - measured) / measured AS e FROM bench_est_results) s"
