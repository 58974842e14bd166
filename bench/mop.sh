#!/bin/bash
# bench/mop.sh -- model selection on Fashion-MNIST: pgdl.fit_multiple (model
# hopper parallelism on background workers) with 1 and with 2 workers, against
# PyTorch on 2 processes (bench/mop_torch.py), all in one run.
#
# The selection is design.md's: 16 configurations = 2 architectures (the
# reference MLP 784-512-256-10 and CNN conv16-pool-conv32-pool-dense10) x 2
# learning rates x 2 batch sizes (64, 128) x 2 optimizers (sgd with momentum 0.9:
# lr 0.01, 0.05; adam: lr 0.001, 0.003), seed 42, on the training images packed
# into 128-row buffers and 4 partitions (scale 1/255), validated on the 10,000
# test images.
#
# Usage: bench/mop.sh   (make install first; make bench-mop runs it)
# Environment: a PostgreSQL with pgdl installed given by PGHOST/PGPORT/PGDATABASE,
# or none (a private server is started; KEEP_PG=1 keeps its directory and
# server.log).  EPOCHS (default 2), LIMIT (default 0 = all 60,000 training
# images; N = the first N), PYTHON (default /usr/bin/python3).
# pgdl end-to-end = the 2-worker pgdl.fit_multiple call alone, with the data
# already packed in PostgreSQL (packing is a one-time step per dataset; its time
# is printed apart).  PyTorch end-to-end = COPY export with psycopg + training +
# evaluation on 2 processes.
# With the private server, each fit_multiple is followed by its workers' lines
#   pgdl worker N: trained T s, validated V model-epochs in S s, waited W s
# (log_min_messages = debug1 on that server).
# The last lines are always
#   mop: 2 workers / 1 worker = X
#   selection: pytorch end-to-end / pgdl end-to-end = Y
# STRATEGY="hyperband asha ..." (with ETA, default 3) compares instead, with 2 workers, grid search ('all')
# and each strategy named on the same set: wall time and best validation accuracy; its last lines are
#   strategy S: best validation accuracy A (all: A0), time all / S = R
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
EPOCHS=${EPOCHS:-2}
LIMIT=${LIMIT:-0}
SET=bench_mop

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
bench_start mop
echo "data: $n_train training images ($train), 10000 test images, $EPOCHS epochs"

psql <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgdl;
DELETE FROM pgdl.models WHERE run IN (SELECT id FROM pgdl.runs WHERE config->>'set' = '$SET');
DELETE FROM pgdl.runs WHERE config->>'set' = '$SET';
DELETE FROM pgdl.configs WHERE set_name = '$SET';
DELETE FROM pgdl.architectures WHERE name IN ('mop_mlp', 'mop_cnn');
DROP TABLE IF EXISTS bench_mop_train, bench_mop_test, bench_mop_lb1, bench_mop_lb2, bench_mop_torch;
SQL

pack_s=$(psql -At <<SQL
SELECT clock_timestamp() AS t0 \gset
SELECT pgdl.pack('$train', 'image', 'label', 'bench_mop_train',
                 buffer_rows => 128, partitions => 4, seed => 42, scale => 1 / 255.0) IS NOT NULL AS packed \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
)
psql -c "SELECT pgdl.pack('fmnist_test', 'image', 'label', 'bench_mop_test', buffer_rows => 128,
                          partitions => 1, reference => 'bench_mop_train')" >/dev/null
echo "pack: $n_train rows into 4 partitions in $pack_s s (one-time, not in the times below)"

psql <<'SQL'
SELECT pgdl.add_architecture('mop_mlp', '{"input": [784], "layers": [
  {"type": "dense", "units": 512}, {"type": "relu"},
  {"type": "dense", "units": 256}, {"type": "relu"},
  {"type": "dense", "units": 10}], "loss": "cross_entropy"}') IS NOT NULL AS mlp \gset
SELECT pgdl.add_architecture('mop_cnn', '{"input": [1, 28, 28], "layers": [
  {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "flatten"}, {"type": "dense", "units": 10}], "loss": "cross_entropy"}') IS NOT NULL AS cnn \gset
-- 2 architectures x 2 learning rates x 2 batch sizes x 2 optimizers
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'bench_mop', a.id,
       CASE o.optimizer
         WHEN 'sgd' THEN jsonb_build_object('optimizer', 'sgd', 'lr', o.lr, 'momentum', 0.9, 'batch_size', b.batch_size, 'seed', 42)
         ELSE jsonb_build_object('optimizer', 'adam', 'lr', o.lr, 'batch_size', b.batch_size, 'seed', 42)
       END
  FROM pgdl.architectures a,
       (VALUES ('sgd', 0.01), ('sgd', 0.05), ('adam', 0.001), ('adam', 0.003)) o (optimizer, lr),
       (VALUES (64), (128)) b (batch_size)
 WHERE a.name IN ('mop_mlp', 'mop_cnn')
 ORDER BY a.name DESC, o.optimizer DESC, o.lr, b.batch_size;
SQL
n_configs=$(psql -Atc "SELECT count(*) FROM pgdl.configs WHERE set_name = '$SET'")
echo "configuration set $SET: $n_configs configurations"

# pgdl.fit_multiple with W workers; its leaderboard goes to table bench_mop_lbW; prints the seconds
fit() {
	psql -At <<SQL
SET client_min_messages = warning;
SELECT clock_timestamp() AS t0 \gset
CREATE TABLE bench_mop_lb$1 AS
SELECT * FROM pgdl.fit_multiple('bench_mop_train', '$SET', epochs => $EPOCHS,
                                validation => 'bench_mop_test', workers => $1);
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
}
leaderboard() {
	psql -P footer=off <<SQL
SELECT rank, architecture AS arch, config_json->>'optimizer' AS optimizer, (config_json->>'lr')::float4 AS lr,
       config_json->>'batch_size' AS batch, round(validation_loss::numeric, 4) AS val_loss,
       round(validation_accuracy::numeric, 4) AS val_acc
  FROM bench_mop_lb$1 ORDER BY rank LIMIT 5;
SQL
}
# per-model training seconds summed over epochs (from pgdl.run_metrics) of the last run
busy() {
	psql -Atc "SELECT round(sum(seconds)::numeric, 1) FROM pgdl.run_metrics
	            WHERE run = (SELECT max(id) FROM pgdl.runs WHERE config->>'set' = '$SET')"
}
ips() { awk -v c="$n_configs" -v e="$EPOCHS" -v n="$n_train" -v s="$1" 'BEGIN { printf "%.0f", c * e * n / s }'; }

# STRATEGY: 'all' and each strategy with 2 workers; the best validation accuracy each reached, and its time
if [ -n "${STRATEGY:-}" ]; then
	ETA=${ETA:-3}
	declare -A ssecs sbest
	for s in all $STRATEGY; do
		echo "== pgdl.fit_multiple, 2 workers, strategy $s, eta $ETA"
		ssecs[$s]=$(psql -At <<SQL
SET client_min_messages = warning;
SELECT clock_timestamp() AS t0 \gset
CREATE TABLE bench_mop_s AS
SELECT * FROM pgdl.fit_multiple('bench_mop_train', '$SET', epochs => $EPOCHS, validation => 'bench_mop_test',
                                workers => 2, strategy => '$s', eta => $ETA);
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
)
		sbest[$s]=$(psql -Atc "SELECT round(max(validation_accuracy)::numeric, 4) FROM bench_mop_s")
		psql -P footer=off -c "SELECT epochs, count(*) AS models, round(max(validation_accuracy)::numeric, 4) AS best_val_acc
		                         FROM bench_mop_s GROUP BY epochs ORDER BY epochs DESC"
		psql -P footer=off -c "SELECT bracket, epoch AS rung, decision, count(*) FROM pgdl.run_metrics
		                        WHERE run = (SELECT max(id) FROM pgdl.runs) AND decision IS NOT NULL
		                        GROUP BY 1, 2, 3 ORDER BY 1 DESC, 2, 3"
		psql -qc "DROP TABLE bench_mop_s"
		echo "strategy $s: ${ssecs[$s]} s, best validation accuracy ${sbest[$s]}"
	done
	for s in $STRATEGY; do
		echo "strategy $s: best validation accuracy ${sbest[$s]} (all: ${sbest[all]}), time all / $s = $(awk -v a="${ssecs[all]}" -v b="${ssecs[$s]}" 'BEGIN { printf "%.2f", a / b }')"
	done
	exit 0
fi

# where each worker's time went (its DEBUG1 line: trained, validated, waited), when the server is this script's own
worker_log=
if [ -n "${PG_PRIVATE_DIR:-}" ]; then
	worker_log=$PG_PRIVATE_DIR/server.log
	psql -c "ALTER SYSTEM SET log_min_messages = debug1" -c "SELECT pg_reload_conf()" >/dev/null
fi

declare -A secs
for w in 1 2; do
	echo "== pgdl.fit_multiple, $w worker(s)"
	[ -n "$worker_log" ] && log_offset=$(stat -c %s "$worker_log")
	secs[$w]=$(fit "$w")
	if [ -n "$worker_log" ]; then
		tail -c +$((log_offset + 1)) "$worker_log" | grep -o 'pgdl worker [0-9]*: trained .*' || true
	fi
	echo "fit_multiple workers=$w: ${secs[$w]} s, $(ips "${secs[$w]}") images/s ($n_configs configs x $EPOCHS epochs x $n_train images), sum of per-model epoch seconds $(busy) s"
	echo "leaderboard (top 5 of $n_configs, by validation loss):"
	leaderboard "$w"
done
same=$(psql -Atc "SELECT count(*) FROM bench_mop_lb1 a JOIN bench_mop_lb2 b USING (config)
                   WHERE a.validation_loss = b.validation_loss AND a.train_loss = b.train_loss")
echo "models identical with 1 and 2 workers (train and validation loss bit for bit): $same of $n_configs"

echo "== PyTorch, 2 processes: export with psycopg COPY binary, train, evaluate"
torch_out=$(OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$PYTHON" "$HERE/mop_torch.py" --set "$SET" \
	--train "$train" --test fmnist_test --epochs "$EPOCHS" --procs 2)
echo "$torch_out" | grep -v '^pytorch config='
torch_s=$(echo "$torch_out" | tr ' ' '\n' | sed -n 's/^total_s=//p')

field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
psql -c "CREATE TABLE bench_mop_torch (config bigint, test_acc float8, test_loss float8, seconds float8)"
echo "$torch_out" | grep '^pytorch config=' | while read -r line; do
	printf '%s\t%s\t%s\t%s\n' "$(echo "$line" | field config)" "$(echo "$line" | field test_acc)" \
		"$(echo "$line" | field test_loss)" "$(echo "$line" | field seconds)"
done | psql -c "COPY bench_mop_torch FROM STDIN"

echo "== test accuracy per configuration: pgdl (2 workers) and its PyTorch twin ($EPOCHS epochs)"
psql -P footer=off <<'SQL'
SELECT p.config, p.architecture AS arch, p.config_json->>'optimizer' AS optimizer, (p.config_json->>'lr')::float4 AS lr,
       p.config_json->>'batch_size' AS batch, round(p.validation_accuracy::numeric, 4) AS pgdl_acc,
       round(t.test_acc::numeric, 4) AS pytorch_acc, round((p.validation_accuracy - t.test_acc)::numeric, 4) AS diff,
       round(t.seconds::numeric, 1) AS pytorch_s
  FROM bench_mop_lb2 p JOIN bench_mop_torch t USING (config) ORDER BY p.config;
SELECT count(*) AS configs, round(avg(abs(p.validation_accuracy - t.test_acc))::numeric, 4) AS mean_abs_diff,
       round(avg(p.validation_accuracy)::numeric, 4) AS pgdl_mean_acc, round(avg(t.test_acc)::numeric, 4) AS pytorch_mean_acc,
       round(max(p.validation_accuracy)::numeric, 4) AS pgdl_best, round(max(t.test_acc)::numeric, 4) AS pytorch_best
  FROM bench_mop_lb2 p JOIN bench_mop_torch t USING (config);
SQL

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "== summary: $n_configs configurations, $EPOCHS epochs, $n_train training images, validation on 10000"
echo "pgdl fit_multiple 1 worker:  ${secs[1]} s, $(ips "${secs[1]}") images/s"
echo "pgdl fit_multiple 2 workers: ${secs[2]} s, $(ips "${secs[2]}") images/s  (and $pack_s s of packing, once: pgdl end-to-end is both)"
echo "pytorch 2 processes:         $torch_s s, $(ips "$torch_s") images/s  (export + training + evaluation)"
echo "without packing (information): pytorch / pgdl 2 workers = $(ratio "$torch_s" "${secs[2]}")"
psql -c "DROP TABLE bench_mop_lb1, bench_mop_lb2, bench_mop_torch"
echo "mop: 2 workers / 1 worker = $(ratio "${secs[1]}" "${secs[2]}")"
# the same work on both sides: PyTorch's time counts its export of the table, so pgdl's counts its pack
echo "selection: pytorch end-to-end / pgdl end-to-end = $(ratio "$torch_s" "$(awk -v a="$pack_s" -v b="${secs[2]}" 'BEGIN { print a + b }')")"
