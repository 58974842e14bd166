#!/bin/bash
# bench/predict.sh -- inference as a query: per-row pgdl.predict_class against
# pgdl.predict_batch over the 10,000 Fashion-MNIST test images, for design.md's
# reference MLP (784-512-256-10) and CNN (conv3x3x16 pad 1, relu, maxpool 2,
# conv3x3x32 pad 1, relu, maxpool 2, flatten, dense 10); PyTorch's batched
# inference of the same MLP on the same images in the same run
# (bench/predict_torch.py: one thread, batch BATCH); and per-row prediction
# over a 1,000,000-row table, serial against a parallel scan with 2 workers.
#
# The models are not trained (pgdl.model_from_weights with random weights):
# inference costs the same whatever the weights.  They are stored with the
# dataset of the test images packed with scale 1/255, so that both forms
# normalize the raw pixels as a trained model's would.  Per-row and batch run
# in one process (max_parallel_workers_per_gather = 0).  Times, each the best
# of RUNS runs of one statement in one session after a run that is not timed,
# its rows counted by the server:
#   per-row  SELECT count(pgdl.predict_class(model, image)) FROM fmnist_test
#   batch    SELECT count(class) FROM pgdl.predict_batch(model, 'fmnist_test', 'id', 'image', BATCH)
# and a check that both give the same class for every image.  Each is timed
# in wall-clock seconds and in the CPU seconds of the server process that ran
# it (/proc/self/schedstat, read with pg_read_file: the bench runs as a
# superuser); PyTorch's likewise (its process time).  The three ratios on the
# last lines are of rows per CPU second: on a shared machine (the development
# machine's 2 cores run other work) a wall-clock time measures the scheduler
# as much as the code, so the wall-clock ratios are printed above them, for
# the record.  The parallel ratio is of wall-clock time (its work is spread
# over processes).
#
# Parallel: a table of 1,000,000 rows of 16 random features and a 16-64-64-2
# MLP (PARALLEL=0 skips this part).  `SELECT count(pgdl.predict_class(...))`
# serially and with max_parallel_workers_per_gather = 2 and
# parallel_leader_participation = off (so that exactly two processes
# predict), after EXPLAIN shows the plan.  Two workers need two free cores.
# Every statement runs with jit = off: the functions' COST makes a large scan
# cross jit_above_cost, and compiling the plan (in every worker) costs more
# than it saves around a C function call.
#
# Usage: bench/predict.sh   (make install first; make bench-predict runs it)
# Environment: a PostgreSQL with pgdl installed given by PGHOST/PGPORT/PGDATABASE,
# or none (a private server is started; KEEP_PG=1 keeps its directory and
# server.log).  RUNS (default 3), BATCH (default 256), PARALLEL (default 1).
# The last lines are always
#   predict: parallel 2 workers / serial = D   (unless PARALLEL=0)
#   predict: mlp row / batch = A        (rows per CPU second)
#   predict: mlp batch / pytorch = B
#   predict: cnn batch / row = C
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUNS=${RUNS:-3}
BATCH=${BATCH:-256}
PARALLEL=${PARALLEL:-1}

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
pg_private_start
psql() { command psql -qX -v ON_ERROR_STOP=1 "$@"; }
echo "== bench/predict: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "data: 10000 test images (fmnist_test), batch_size $BATCH, best of $RUNS runs"
psql -c "DROP TABLE IF EXISTS fmnist_test" -c "CREATE TABLE fmnist_test (id integer, image real[], label integer)"
/usr/bin/python3 "$HERE/fmnist_copy.py" test | psql -c "COPY fmnist_test FROM STDIN WITH (FORMAT binary)"

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

# "wall cpu": the best wall-clock and the best server CPU seconds of RUNS runs of statement $1
# (which \gsets its result), with `SET $2` first (default: no parallel workers).  All in one session,
# after a run that is not timed (as bench/predict_torch.py warms up): a new session's first call
# reads the model from pgdl.models and the server process maps its memory for the first time.
best() {
	local sql=$1 set=${2:-max_parallel_workers_per_gather = 0} script wall="" cpu="" w c
	script="SET jit = off;
SET $set;
$sql \gset"
	for _ in $(seq "$RUNS"); do
		script+="
SELECT split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint AS c0, clock_timestamp() AS t0 \gset
$sql \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 3)
       || ' ' || round((split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint - :c0) / 1e9, 3);"
	done
	while read -r w c; do
		if [ -z "$wall" ] || awk -v a="$w" -v b="$wall" 'BEGIN { exit !(a < b) }'; then wall=$w; fi
		if [ -z "$cpu" ] || awk -v a="$c" -v b="$cpu" 'BEGIN { exit !(a < b) }'; then cpu=$c; fi
	done < <(psql -At <<<"$script")
	echo "$wall $cpu"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
rate() { awk -v s="$1" 'BEGIN { printf "%.0f", 10000 / s }'; }

declare -A row_w row_c batch_w batch_c
for m in mlp cnn; do
	model=bench_predict_$m
	echo "== $m ($model)"
	read -r row_w[$m] row_c[$m] < <(best "SELECT count(pgdl.predict_class('$model', image)) AS n FROM fmnist_test")
	echo "per-row  pgdl.predict_class:        ${row_w[$m]} s wall, ${row_c[$m]} s CPU"
	read -r batch_w[$m] batch_c[$m] < <(best "SELECT count(class) AS n FROM pgdl.predict_batch('$model', 'fmnist_test', 'id', 'image', $BATCH)")
	echo "batch    pgdl.predict_batch ($BATCH): ${batch_w[$m]} s wall, ${batch_c[$m]} s CPU"
	differ=$(psql -At -c "SELECT count(*) FROM pgdl.predict_batch('$model', 'fmnist_test', 'id', 'image', $BATCH) b
	                       JOIN fmnist_test t ON t.id = b.id WHERE b.class <> pgdl.predict_class('$model', t.image)")
	echo "images whose class differs between the two: $differ"
	[ "$differ" = 0 ] || { echo "PREDICTIONS DIFFER"; exit 1; }
done

echo "== PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), one thread, batch $BATCH"
read -r torch_w torch_c < <(/usr/bin/python3 "$HERE/predict_torch.py" --model mlp --runs "$RUNS" --batch "$BATCH" |
	sed -n 's/^torch mlp wall_s=\([0-9.]*\) cpu_s=\([0-9.]*\)$/\1 \2/p')
echo "torch mlp: ${torch_w} s wall, ${torch_c} s CPU"

if [ "$PARALLEL" != 0 ]; then
	echo "== parallel: 1000000 rows of 16 features, a 16-64-64-2 MLP, per-row pgdl.predict_class"
	psql <<'SQL'
SET client_min_messages = warning;
DELETE FROM pgdl.models WHERE name = 'bench_predict_par';
DROP TABLE IF EXISTS bench_predict_rows;
SELECT setseed(0.7);
CREATE TABLE bench_predict_rows AS
SELECT i AS id, ARRAY[random(), random(), random(), random(), random(), random(), random(), random(),
                      random(), random(), random(), random(), random(), random(), random(), random()]::real[] AS x
  FROM generate_series(1, 1000000) i;
VACUUM ANALYZE bench_predict_rows;
INSERT INTO pgdl.models (name, spec, weights)
SELECT 'bench_predict_par', s,
       pgdl.model_from_weights(s, ARRAY(SELECT ((random() - 0.5) / 4)::real FROM generate_series(1, 16*64+64 + 64*64+64 + 64*2+2)))
  FROM (SELECT '{"input": [16], "layers": [{"type": "dense", "units": 64}, {"type": "relu"},
          {"type": "dense", "units": 64}, {"type": "relu"}, {"type": "dense", "units": 2}],
          "loss": "cross_entropy"}'::jsonb AS s) spec;
SQL
	par_sql="SELECT count(pgdl.predict_class('bench_predict_par', x)) AS n FROM bench_predict_rows"
	par_set="max_parallel_workers_per_gather = 2; SET parallel_leader_participation = off"
	psql -c "SET jit = off" -c "SET $par_set" -c "EXPLAIN (COSTS OFF) $par_sql"
	read -r ser_w _ < <(best "$par_sql")
	read -r par_w _ < <(best "$par_sql" "$par_set")
	echo "serial: $ser_w s, 2 workers: $par_w s (wall)"
	psql -c "DROP TABLE bench_predict_rows" -c "DELETE FROM pgdl.models WHERE name = 'bench_predict_par'"
fi

echo "== summary: 10000 images, best of $RUNS (rows/s: wall-clock, CPU)"
for m in mlp cnn; do
	echo "$m: per-row $(rate "${row_w[$m]}"), $(rate "${row_c[$m]}"); batch $(rate "${batch_w[$m]}"), $(rate "${batch_c[$m]}")"
done
echo "torch mlp: $(rate "$torch_w"), $(rate "$torch_c")"
# ratios of rows/s, that is the inverse ratios of times
echo "by wall-clock time: mlp row / batch = $(ratio "${batch_w[mlp]}" "${row_w[mlp]}"), mlp batch / pytorch = $(ratio "$torch_w" "${batch_w[mlp]}"), cnn batch / row = $(ratio "${row_w[cnn]}" "${batch_w[cnn]}")"
if [ "$PARALLEL" != 0 ]; then
	echo "predict: parallel 2 workers / serial = $(ratio "$ser_w" "$par_w")"
fi
echo "predict: mlp row / batch = $(ratio "${batch_c[mlp]}" "${row_c[mlp]}")"
echo "predict: mlp batch / pytorch = $(ratio "$torch_c" "${batch_c[mlp]}")"
echo "predict: cnn batch / row = $(ratio "${row_c[cnn]}" "${batch_c[cnn]}")"
