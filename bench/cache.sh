#!/bin/bash
# bench/cache.sh -- transfer learning with materialized feature layers: the same
# selection of heads on a frozen CNN base trained by pgdl.fit_multiple without
# (feature_cache => 'off') and with (feature_cache => 'on') a feature cache.
#
# The base is design.md's reference CNN (conv3x3x16 pad 1, relu, maxpool 2,
# conv3x3x32 pad 1, relu, maxpool 2, flatten, dense 10), trained by pgdl.fit for
# one epoch (sgd lr 0.01 momentum 0.9, batch 128, seed 42) as the model
# bench_cache_base.  The selection, set bench_cache, is 8 configurations that
# freeze the base through "flatten" (its first 7 layers; 1,568 features per
# image) and train a head on them: 2 heads ([dense 10] and [dense 64, relu,
# dense 10]) x 2 learning rates x 2 optimizers (sgd with momentum 0.9: lr 0.01,
# 0.05; adam: lr 0.001, 0.003), batch 128, seed 42, on the training images packed
# into 128-row buffers and 4 partitions (scale 1/255), validated on the 10,000
# test images, 2 workers.
#
# Times, each the one pgdl.fit_multiple call, end to end:
#   uncached  feature_cache => 'off': every configuration runs the frozen layers
#             on every image in every epoch (training and validation);
#   cached    feature_cache => 'on', after dropping every cache of these tables:
#             building the caches (materialized views in pgdl_cache of the frozen
#             layers' outputs on the training and the test images) plus training
#             the heads on them;
#   reused    feature_cache => 'auto' once more: the caches exist and are reused
#             (shown for the record, not in the ratio).
# The models of the three runs must be byte-identical (pgdl.models.weights of
# bench_cache_offN, bench_cache_onN and bench_cache_reuseN).  Storage is
# sum(pgdl.feature_cache.bytes) of the caches (pg_total_relation_size, index
# included).  pgdl.explain_fit_multiple's plan is printed before each run.
#
# Usage: bench/cache.sh   (make install first; make bench-cache runs it)
# Environment: a PostgreSQL with pgdl installed given by PGHOST/PGPORT/PGDATABASE,
# or none (a private server is started; KEEP_PG=1 keeps its directory and
# server.log).  EPOCHS (default 3), WORKERS (default 2), LIMIT (default 0 = all
# 60,000 training images; N = the first N).
# The last line is always
#   cache: uncached / cached = X
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EPOCHS=${EPOCHS:-3}
WORKERS=${WORKERS:-2}
LIMIT=${LIMIT:-0}
SET=bench_cache
BASE=bench_cache_base

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
bench_start cache
echo "data: $n_train training images ($train), 10000 test images, $EPOCHS epochs, $WORKERS workers"

# What an earlier run against the same server left: its caches first (they depend on the packed tables).
psql <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgdl;
SELECT count(pgdl.drop_feature_cache(view)) AS dropped FROM pgdl.feature_cache
 WHERE source::text IN ('bench_cache_train', 'bench_cache_test') \gset
DELETE FROM pgdl.models WHERE run IN (SELECT id FROM pgdl.runs WHERE config->>'set' = '$SET')
   OR name = '$BASE' OR name ~ '^bench_cache_(off|on|reuse)[0-9]+\$';
DELETE FROM pgdl.runs WHERE config->>'set' = '$SET';
DELETE FROM pgdl.configs WHERE set_name = '$SET';
DELETE FROM pgdl.architectures WHERE name = 'bench_cache_cnn';
DROP TABLE IF EXISTS bench_cache_train, bench_cache_test, bench_cache_lb_off, bench_cache_lb_on, bench_cache_lb_reuse;
SQL

pack_s=$(psql -At <<SQL
SELECT clock_timestamp() AS t0 \gset
SELECT pgdl.pack('$train', 'image', 'label', 'bench_cache_train',
                 buffer_rows => 128, partitions => 4, seed => 42, scale => 1 / 255.0) IS NOT NULL AS packed \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
)
psql -c "SELECT pgdl.pack('fmnist_test', 'image', 'label', 'bench_cache_test', buffer_rows => 128,
                          partitions => 1, reference => 'bench_cache_train')" >/dev/null
echo "pack: $n_train rows into 4 partitions in $pack_s s (one-time, not in the times below)"

# the base: the reference CNN, one epoch of pgdl.fit
base_s=$(psql -At <<SQL
SET client_min_messages = warning;
SELECT pgdl.add_architecture('bench_cache_cnn', '{"input": [1, 28, 28], "layers": [
  {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "flatten"}, {"type": "dense", "units": 10}], "loss": "cross_entropy"}') IS NOT NULL AS cnn \gset
SELECT clock_timestamp() AS t0 \gset
SELECT pgdl.fit('bench_cache_train', 'bench_cache_cnn', '{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 128, "seed": 42}',
                epochs => 1, validation => 'bench_cache_test', name => '$BASE') IS NOT NULL AS fitted \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
)
base_acc=$(psql -Atc "SELECT round(accuracy::numeric, 4) FROM pgdl.evaluate('$BASE', 'bench_cache_test')")
echo "base: $BASE, the reference CNN after 1 epoch of pgdl.fit in $base_s s (not in the times below), test accuracy $base_acc"

# 2 heads x (sgd lr 0.01, 0.05 | adam lr 0.001, 0.003), frozen through "flatten"
psql <<SQL
SELECT pgdl.grid_search('$SET', '{}', '{"base_model": "$BASE", "freeze": "flatten",
  "head": [[{"type": "dense", "units": 10}],
           [{"type": "dense", "units": 64}, {"type": "relu"}, {"type": "dense", "units": 10}]],
  "optimizer": "sgd", "momentum": 0.9, "lr": [0.01, 0.05], "batch_size": 128, "seed": 42}') AS sgd \gset
SELECT pgdl.grid_search('$SET', '{}', '{"base_model": "$BASE", "freeze": "flatten",
  "head": [[{"type": "dense", "units": 10}],
           [{"type": "dense", "units": 64}, {"type": "relu"}, {"type": "dense", "units": 10}]],
  "optimizer": "adam", "lr": [0.001, 0.003], "batch_size": 128, "seed": 42}') AS adam \gset
SQL
n_configs=$(psql -Atc "SELECT count(*) FROM pgdl.configs WHERE set_name = '$SET'")
echo "configuration set $SET: $n_configs configurations (base $BASE frozen through \"flatten\", 2 heads x 2 optimizers x 2 learning rates)"

explain() {
	echo "plan (pgdl.explain_fit_multiple, feature_cache => '$1'):"
	psql -P footer=off <<SQL
SELECT "group", frozen_layers AS frozen, configs, action, cache, validation_cache, round(gflops::numeric) AS gflops,
       round(storage_mb::numeric, 1) AS storage_mb, round(predicted_seconds::numeric, 1) AS predicted_s, reason
  FROM pgdl.explain_fit_multiple('bench_cache_train', '$SET', epochs => $EPOCHS, validation => 'bench_cache_test',
                                 workers => $WORKERS, feature_cache => '$1');
SQL
}
# pgdl.fit_multiple with feature_cache => $1, models named bench_cache_$2N, leaderboard in bench_cache_lb_$2; prints the seconds
fit() {
	psql -At <<SQL
SET client_min_messages = warning;
SELECT clock_timestamp() AS t0 \gset
CREATE TABLE bench_cache_lb_$2 AS
SELECT * FROM pgdl.fit_multiple('bench_cache_train', '$SET', epochs => $EPOCHS, validation => 'bench_cache_test',
                                workers => $WORKERS, name_prefix => 'bench_cache_$2', feature_cache => '$1');
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
}
# per-model training seconds summed over epochs (from pgdl.run_metrics) of the last run
busy() {
	psql -Atc "SELECT round(sum(seconds)::numeric, 1) FROM pgdl.run_metrics
	            WHERE run = (SELECT max(id) FROM pgdl.runs WHERE config->>'set' = '$SET')"
}
# how many models of run bench_cache_$1 have the same bytes as their twin (same config) of run bench_cache_off
same_as_off() {
	psql -Atc "SELECT count(*) FROM pgdl.models a
	             JOIN pgdl.models b ON b.name = 'bench_cache_$1' || substr(a.name, length('bench_cache_off') + 1)
	            WHERE a.name ~ '^bench_cache_off[0-9]+\$' AND a.config = b.config AND a.weights = b.weights"
}
cache_rows="pgdl.feature_cache WHERE source::text IN ('bench_cache_train', 'bench_cache_test')"

echo "== uncached: pgdl.fit_multiple(..., feature_cache => 'off')"
explain off
off_s=$(fit off off)
echo "uncached: $off_s s (sum of per-model epoch seconds $(busy) s)"

echo "== cached: pgdl.fit_multiple(..., feature_cache => 'on'), caches built inside the call"
dropped=$(psql -Atc "SELECT count(pgdl.drop_feature_cache(view)) FROM $cache_rows")
echo "caches dropped before the run: $dropped"
explain on
on_s=$(fit on on)
echo "cached: $on_s s, building the caches included (sum of per-model epoch seconds $(busy) s)"
echo "feature caches:"
psql -P footer=off -c "SELECT view, depth, rows AS buffers, round(bytes / 1048576.0, 1) AS mb FROM $cache_rows ORDER BY id"
storage=$(psql -Atc "SELECT sum(bytes) FROM $cache_rows")
storage_mb=$(awk -v b="$storage" 'BEGIN { printf "%.1f", b / 1048576 }')
packed_mb=$(psql -Atc "SELECT round(sum(pg_total_relation_size(relid)) / 1048576.0, 1)
                         FROM (SELECT relid FROM pg_partition_tree('bench_cache_train')
                               UNION ALL SELECT relid FROM pg_partition_tree('bench_cache_test')) t")
echo "storage: $storage_mb MB ($storage bytes) in pgdl_cache; the packed tables take $packed_mb MB"

echo "== reused: pgdl.fit_multiple(..., feature_cache => 'auto') with the caches in place (not in the ratio)"
explain auto
reuse_s=$(fit auto reuse)
echo "reused: $reuse_s s (sum of per-model epoch seconds $(busy) s); so building the caches took about $(awk -v a="$on_s" -v b="$reuse_s" 'BEGIN { printf "%.1f", a - b }') s of the cached run"

same_on=$(same_as_off on)
same_reuse=$(same_as_off reuse)
echo "models byte-identical to the uncached run's (pgdl.models.weights): cached $same_on of $n_configs, reused $same_reuse of $n_configs"
echo "leaderboard of the cached run (top 5 of $n_configs, by validation loss):"
psql -P footer=off <<'SQL'
SELECT rank, (SELECT string_agg(l->>'type' || coalesce(l->>'units', ''), '-') FROM jsonb_array_elements(config_json->'head') l) AS head,
       config_json->>'optimizer' AS optimizer, (config_json->>'lr')::float4 AS lr,
       round(validation_loss::numeric, 4) AS val_loss, round(validation_accuracy::numeric, 4) AS val_acc
  FROM bench_cache_lb_on ORDER BY rank LIMIT 5;
SQL
psql -c "DROP TABLE bench_cache_lb_off, bench_cache_lb_on, bench_cache_lb_reuse"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "== summary: $n_configs heads on a frozen CNN base x $EPOCHS epochs, $n_train training images, validation on 10000, $WORKERS workers"
echo "uncached (feature_cache off):          $off_s s"
echo "cached (on, building the caches):      $on_s s"
echo "reused (auto, caches already built):   $reuse_s s"
echo "cache storage: $storage_mb MB; models byte-identical: $same_on of $n_configs (cached), $same_reuse of $n_configs (reused)"
status=0
if [ "$same_on" != "$n_configs" ] || [ "$same_reuse" != "$n_configs" ]; then
	echo "MODELS DIFFER between the uncached and the cached runs"
	status=1
fi
echo "cache: uncached / cached = $(ratio "$off_s" "$on_s")"
exit $status
