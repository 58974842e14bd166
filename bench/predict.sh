#!/bin/bash
# bench/predict.sh -- inference as a query: per-row pgdl.predict_class against
# pgdl.predict_batch over the 10,000 Fashion-MNIST test images, for design.md's
# reference MLP (784-512-256-10) and CNN (conv3x3x16 pad 1, relu, maxpool 2,
# conv3x3x32 pad 1, relu, maxpool 2, flatten, dense 10).
#
# The models are not trained (pgdl.model_from_weights with random weights):
# inference costs the same whatever the weights.  They are stored with the
# dataset of the test images packed with scale 1/255, so that both forms
# normalize the raw pixels as a trained model's would.  Both run in one
# process (max_parallel_workers_per_gather = 0): the per-row form is PARALLEL
# SAFE and a parallel scan would spread it over the cores, which
# predict_batch (PARALLEL RESTRICTED) cannot; that time is printed too, for
# the record.  Times, each the best of RUNS runs of one statement, its rows
# counted by the server:
#   per-row  SELECT count(pgdl.predict_class(model, image)) FROM fmnist_test
#   batch    SELECT count(class) FROM pgdl.predict_batch(model, 'fmnist_test', 'id', 'image', BATCH)
# and a check that both give the same class for every image.
#
# Usage: bench/predict.sh   (make install first; make bench-predict runs it)
# Environment: a PostgreSQL with pgdl installed given by PGHOST/PGPORT/PGDATABASE,
# or none (a private server is started; KEEP_PG=1 keeps its directory and
# server.log).  RUNS (default 3), BATCH (default 256).
# The last lines are always
#   predict: mlp per-row / batch = X
#   predict: cnn per-row / batch = Y
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUNS=${RUNS:-3}
BATCH=${BATCH:-256}

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
bench_start predict
echo "data: 10000 test images (fmnist_test), batch_size $BATCH, best of $RUNS runs"

psql <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgdl;
DELETE FROM pgdl.models WHERE name IN ('bench_predict_mlp', 'bench_predict_cnn');
DROP TABLE IF EXISTS bench_predict_packed CASCADE;
SELECT pgdl.pack('fmnist_test', 'image', 'label', 'bench_predict_packed', buffer_rows => 128, partitions => 1,
                 scale => 1 / 255.0) IS NOT NULL AS packed \gset
-- a model of each spec with weights drawn from a fixed generator, stored with the packed dataset
CREATE TEMP TABLE bench_specs (name text, spec jsonb);
INSERT INTO bench_specs VALUES
 ('bench_predict_mlp', '{"input": [784], "layers": [{"type": "dense", "units": 512}, {"type": "relu"},
   {"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 10}], "loss": "cross_entropy"}'),
 ('bench_predict_cnn', '{"input": [1, 28, 28], "layers": [
   {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
   {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
   {"type": "flatten"}, {"type": "dense", "units": 10}], "loss": "cross_entropy"}');
-- weights from a seeded generator; parameter counts: 784*512+512 + 512*256+256 + 256*10+10 for the MLP,
-- 16*9+16 + 32*16*9+32 + 1568*10+10 for the CNN (model_from_weights checks them)
SELECT setseed(0.42);
INSERT INTO pgdl.models (name, spec, weights, dataset)
SELECT s.name, s.spec,
       pgdl.model_from_weights(s.spec, ARRAY(SELECT ((random() - 0.5) / 8)::real FROM generate_series(1, s.n))),
       (SELECT id FROM pgdl.datasets WHERE packed = 'bench_predict_packed'::regclass)
  FROM (SELECT name, spec, CASE name WHEN 'bench_predict_mlp' THEN 535818 ELSE 20490 END AS n FROM bench_specs) s;
SQL

# seconds of the best of RUNS runs of statement $1
best() {
	local sql=$1 best="" t
	for _ in $(seq "$RUNS"); do
		t=$(psql -At <<SQL
SET max_parallel_workers_per_gather = ${PARALLEL:-0};
SELECT clock_timestamp() AS t0 \gset
$sql \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 3);
SQL
)
		if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
	done
	echo "$best"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

declare -A row batch
for m in mlp cnn; do
	model=bench_predict_$m
	echo "== $m ($model)"
	row[$m]=$(best "SELECT count(pgdl.predict_class('$model', image)) AS n FROM fmnist_test")
	echo "per-row  pgdl.predict_class:        ${row[$m]} s"
	parallel=$(PARALLEL=2 best "SELECT count(pgdl.predict_class('$model', image)) AS n FROM fmnist_test")
	echo "per-row, parallel scan (2 workers):  $parallel s (not in the ratio)"
	batch[$m]=$(best "SELECT count(class) AS n FROM pgdl.predict_batch('$model', 'fmnist_test', 'id', 'image', $BATCH)")
	echo "batch    pgdl.predict_batch ($BATCH): ${batch[$m]} s"
	differ=$(psql -At -c "SELECT count(*) FROM pgdl.predict_batch('$model', 'fmnist_test', 'id', 'image', $BATCH) b
	                       JOIN fmnist_test t ON t.id = b.id WHERE b.class <> pgdl.predict_class('$model', t.image)")
	echo "images whose class differs between the two: $differ"
	[ "$differ" = 0 ] || { echo "PREDICTIONS DIFFER"; exit 1; }
done

echo "== summary: 10000 images, best of $RUNS"
for m in mlp cnn; do
	echo "$m: per-row ${row[$m]} s ($(awk -v s="${row[$m]}" 'BEGIN { printf "%.0f", 10000 / s }') images/s), batch ${batch[$m]} s ($(awk -v s="${batch[$m]}" 'BEGIN { printf "%.0f", 10000 / s }') images/s)"
done
for m in mlp cnn; do
	echo "predict: $m per-row / batch = $(ratio "${row[$m]}" "${batch[$m]}")"
done
