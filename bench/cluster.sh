#!/bin/bash
# bench/cluster.sh -- model selection across PostgreSQL servers: pgdl.fit_multiple
# on one server with 1 worker against a coordinator with 2 nodes of 1 worker
# each (model hopper parallelism over libpq), all on this machine, in one run.
#
# The selection is bench/mop.sh's: 16 configurations = 2 architectures (the
# reference MLP 784-512-256-10 and CNN conv16-pool-conv32-pool-dense10) x 2
# learning rates x 2 batch sizes (64, 128) x 2 optimizers (sgd with momentum 0.9:
# lr 0.01, 0.05; adam: lr 0.001, 0.003), seed 42, on the training images packed
# into 128-row buffers and 4 partitions (scale 1/255), validated on the 10,000
# test images: the whole selection by default, hops of the MLPs' big blobs
# included, since that is what a user would run.  CONFIGS=cnn keeps its 8 CNN
# configurations only, the compute-bound subset (a CNN's blob, weights and
# optimizer state, is 164-246 kB against 4.3-6.4 MB for an MLP, and its
# sub-epoch takes 4 times as long), for telling the cost of hops apart from
# the cost of sharing the machine.
#
# Three servers run on this machine, each private (data and unix socket in one
# temporary directory, no TCP): the coordinator (port 5433, from
# bench/pg_private.sh) and two nodes (ports 5434, 5435) with CREATE EXTENSION
# pgdl.  The coordinator reaches them as postgres_fdw servers bench_node1 and
# bench_node2 (trust authentication on the socket, superuser user mapping).
#   (a) one server: pgdl.fit_multiple(..., workers => 1) on the local packed table;
#   (b) the cluster: pgdl.distribute moves partitions 0, 2 to bench_node1 and
#       1, 3 to bench_node2 (timed apart, once per dataset), then
#       pgdl.fit_multiple(..., workers_per_node => 1): one coordinator worker
#       per node, each sending its models to its node and back
#       (pgdl.train_partitions), validation and checkpoints on the coordinator.
#   (c) for reference (REFERENCE=0 leaves it out): one server with 2 workers,
#       the same partitions per worker and the same schedule as (b) without
#       hops, so that what (b) loses to hops stands apart from what any
#       2-worker run loses to its last models finishing one at a time.
#   (d) a slowed node (SLOWED=0 leaves it out): bench_node1's postmaster and
#       backends pinned with taskset to core 0, which a busy loop also holds;
#       the cluster run of (b) again, then pgdl.distribute(..., replicas => 2)
#       (every partition on both nodes) and the run once more, where a visit
#       goes to the replica on the free node while its owner is busy.
# The models of (a), (b), (c) and (d) must be byte-identical: md5 of
# pgdl.models.weights per configuration (the script exits with 1 if one differs).
#
# Measured besides the times:
#   hop bytes per epoch    = sum over configurations of 2 x blob x partitions,
#                            the blob (weights + optimizer state) as it hops:
#                            octet_length of the run's last checkpoint;
#   buffer bytes per epoch = sum(pg_column_size(x) + pg_column_size(y)) of the
#                            packed training table (what moving the data rather
#                            than the models would ship each epoch);
#   per-partition compute  = pgdl.run_metrics seconds of run (a) per epoch /
#                            partitions, per configuration;
#   CPU seconds of each server during each run (its processes, exited ones
#   included, from /proc), of the other processes on this shared machine, and
#   idle: where the two cores went.
# bench/cluster_projection.py then projects epoch times at 4, 8 and 32 nodes
# from these (see its header for what it assumes).
#
# Usage: bench/cluster.sh   (make install first; make bench-cluster runs it)
# Environment: EPOCHS (default 2), LIMIT (default 0 = all 60,000 training
# images; N = the first N), CONFIGS (all or cnn; default all), REFERENCE (1 or
# 0, default 1: run (c)), SLOWED (1 or 0, default 1: run (d)), KEEP_PG=1 keeps the servers' directory, logs and the
# measurements file, PYTHON (default /usr/bin/python3).  The servers are always
# this script's own (PGHOST and friends are ignored).  It takes about 6 minutes
# here with the defaults (4.5 without (c)).  The last lines are always
#   cluster: 2 nodes / 1 node = X
#   cluster: hop bytes per epoch = B, buffer bytes per epoch = D
#   cluster: slowed node, replicated / unreplicated = Y   (with (d): the speed with replicas over
#            the speed without, one node slowed; the unreplicated run's seconds over the replicated's)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
EPOCHS=${EPOCHS:-2}
LIMIT=${LIMIT:-0}
CONFIGS=${CONFIGS:-all}
REFERENCE=${REFERENCE:-1}
SLOWED=${SLOWED:-1}
SET=bench_cluster
NODES=(bench_node1 bench_node2)
case $CONFIGS in
all) arches="'mop_mlp', 'mop_cnn'" ;;
cnn) arches="'mop_cnn'" ;;
*) echo "CONFIGS must be all or cnn, not $CONFIGS" >&2; exit 2 ;;
esac

unset PGHOST PGPORT PGDATABASE PGUSER
# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
bench_start cluster

# The nodes live in the coordinator's directory: stop them before pg_private_stop removes it.
node_dir() { echo "$PG_PRIVATE_DIR/node$1"; }
spin=
nodes_stop() {
	[ -n "$spin" ] && kill "$spin" 2>/dev/null
	for i in 1 2; do
		[ -f "$(node_dir "$i")/postmaster.pid" ] &&
			"${PG_PRIVATE_AS[@]}" "$PG_BIN/pg_ctl" -D "$(node_dir "$i")" -m fast -w stop >/dev/null 2>&1
	done
	pg_private_stop
}
trap nodes_stop EXIT
for i in 1 2; do
	"${PG_PRIVATE_AS[@]}" "$PG_BIN/initdb" -D "$(node_dir "$i")" -A trust -U postgres -E UTF8 --locale=C --no-sync >/dev/null
	"${PG_PRIVATE_AS[@]}" "$PG_BIN/pg_ctl" -D "$(node_dir "$i")" -l "$PG_PRIVATE_DIR/node$i.log" -w \
		-o "-c listen_addresses='' -k $PG_PRIVATE_DIR -p $((5433 + i)) -c fsync=off -c shared_buffers=256MB -c max_wal_size=4GB" \
		start >/dev/null
	psql -p $((5433 + i)) -c "CREATE EXTENSION pgdl"
done
psql <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgdl;
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SERVER bench_node1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$PGHOST', port '5434', dbname 'postgres');
CREATE SERVER bench_node2 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$PGHOST', port '5435', dbname 'postgres');
CREATE USER MAPPING FOR postgres SERVER bench_node1;
CREATE USER MAPPING FOR postgres SERVER bench_node2;
SQL
echo "servers: coordinator on port 5433, ${NODES[0]} on 5434, ${NODES[1]} on 5435 ($(psql -Atc 'SELECT pgdl.version()'))"
echo "data: $n_train training images ($train), 10000 test images, $EPOCHS epochs"

pack_s=$(psql -At <<SQL
SELECT clock_timestamp() AS t0 \gset
SELECT pgdl.pack('$train', 'image', 'label', 'bench_cluster_train',
                 buffer_rows => 128, partitions => 4, seed => 42, scale => 1 / 255.0) IS NOT NULL AS packed \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
)
psql -c "SELECT pgdl.pack('fmnist_test', 'image', 'label', 'bench_cluster_test', buffer_rows => 128,
                          partitions => 1, reference => 'bench_cluster_train')" >/dev/null
partitions=$(psql -Atc "SELECT count(DISTINCT part) FROM bench_cluster_train")
buffer_bytes=$(psql -Atc "SELECT sum(pg_column_size(x) + pg_column_size(y)) FROM bench_cluster_train")
echo "pack: $n_train rows into $partitions partitions in $pack_s s; buffers (x and y): $buffer_bytes bytes"

# The selection of bench/mop.sh (its architectures and configuration order), CONFIGS picks the architectures.
psql <<SQL
SELECT pgdl.add_architecture('mop_mlp', '{"input": [784], "layers": [
  {"type": "dense", "units": 512}, {"type": "relu"},
  {"type": "dense", "units": 256}, {"type": "relu"},
  {"type": "dense", "units": 10}], "loss": "cross_entropy"}') IS NOT NULL AS mlp \gset
SELECT pgdl.add_architecture('mop_cnn', '{"input": [1, 28, 28], "layers": [
  {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "flatten"}, {"type": "dense", "units": 10}], "loss": "cross_entropy"}') IS NOT NULL AS cnn \gset
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT '$SET', a.id,
       CASE o.optimizer
         WHEN 'sgd' THEN jsonb_build_object('optimizer', 'sgd', 'lr', o.lr, 'momentum', 0.9, 'batch_size', b.batch_size, 'seed', 42)
         ELSE jsonb_build_object('optimizer', 'adam', 'lr', o.lr, 'batch_size', b.batch_size, 'seed', 42)
       END
  FROM pgdl.architectures a,
       (VALUES ('sgd', 0.01), ('sgd', 0.05), ('adam', 0.001), ('adam', 0.003)) o (optimizer, lr),
       (VALUES (64), (128)) b (batch_size)
 WHERE a.name IN ($arches)
 ORDER BY a.name DESC, o.optimizer DESC, o.lr, b.batch_size;
SQL
n_configs=$(psql -Atc "SELECT count(*) FROM pgdl.configs WHERE set_name = '$SET'")
echo "configuration set $SET ($CONFIGS): $n_configs configurations"

# CPU seconds (user + system) of a server's processes, exited ones included (the postmaster reaps them).
hz=$(getconf CLK_TCK)
server_cpu() {
	local pm
	pm=$(head -n 1 "$1/postmaster.pid")
	{ awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat"
	  # shellcheck disable=SC2013 # the file is one line of pids
	  for c in $(cat "/proc/$pm/task/"*/children); do awk '{ print $14 + $15 }' "/proc/$c/stat" 2>/dev/null || true; done
	} | awk -v hz="$hz" '{ s += $1 } END { printf "%.1f", s / hz }'
}
dirs=("$PG_PRIVATE_DIR/data" "$(node_dir 1)" "$(node_dir 2)")
# CPU seconds of the coordinator, each node, and the whole machine (busy, then busy + idle) so far.
cpu_all() {
	for d in "${dirs[@]}"; do echo -n "$(server_cpu "$d") "; done
	awk -v hz="$hz" '/^cpu / { printf "%.1f %.1f", ($2 + $3 + $4 + $7 + $8 + $9) / hz, ($2 + $3 + $4 + $5 + $6 + $7 + $8 + $9) / hz }' /proc/stat
}
# Where the machine's CPU went between two cpu_all snapshots $1 and $2 (the machine is shared).
cpu_report() {
	local -a a b
	read -r -a a <<<"$1"
	read -r -a b <<<"$2"
	awk -v c0="${a[0]}" -v c1="${b[0]}" -v n0="${a[1]}" -v n1="${b[1]}" -v m0="${a[2]}" -v m1="${b[2]}" \
		-v b0="${a[3]}" -v b1="${b[3]}" -v t0="${a[4]}" -v t1="${b[4]}" 'BEGIN {
		ours = (c1 - c0) + (n1 - n0) + (m1 - m0)
		printf "CPU seconds: coordinator %.1f, bench_node1 %.1f, bench_node2 %.1f; other processes on the machine %.1f; idle %.1f (of %.1f)\n",
			c1 - c0, n1 - n0, m1 - m0, (b1 - b0) - ours, (t1 - t0) - (b1 - b0), t1 - t0 }'
}

# pgdl.fit_multiple with extra arguments $2; its leaderboard goes to table bench_cluster_$1; prints the
# seconds, and leaves where the CPU went in $PG_PRIVATE_DIR/cpu_$1
fit() {
	local before
	sleep 1
	before=$(cpu_all)
	psql -At <<SQL
SET client_min_messages = warning;
SELECT clock_timestamp() AS t0 \gset
CREATE TABLE bench_cluster_$1 AS
SELECT * FROM pgdl.fit_multiple('bench_cluster_train', '$SET', epochs => $EPOCHS,
                                validation => 'bench_cluster_test', $2);
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
	sleep 1				# the workers' and node sessions' exits, reaped
	cpu_report "$before" "$(cpu_all)" >"$PG_PRIVATE_DIR/cpu_$1"
}
run_of() { psql -Atc "SELECT DISTINCT run FROM pgdl.models WHERE id IN (SELECT model FROM bench_cluster_$1)"; }
ips() { awk -v c="$n_configs" -v e="$EPOCHS" -v n="$n_train" -v s="$1" 'BEGIN { printf "%.0f", c * e * n / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# Share of the run's workers' time spent in visits (training here, or the round trip to a node).
busy() {
	psql -Atc "SELECT round((100 * sum(seconds) / ($2 * $3))::numeric) FROM pgdl.run_metrics WHERE run = $1"
}

echo "== (a) one server, pgdl.fit_multiple(..., workers => 1)"
one_s=$(fit one "workers => 1")
run_one=$(run_of one)
echo "one server, 1 worker: $one_s s, $(ips "$one_s") images/s (run $run_one), in visits $(busy "$run_one" 1 "$one_s")% of the time"
cat "$PG_PRIVATE_DIR/cpu_one"
if [ "$REFERENCE" = 1 ]; then
	echo "== (c) for reference, one server with 2 workers: the same schedule as (b) without hops"
	ref_s=$(fit ref "workers => 2")
	run_ref=$(run_of ref)
	echo "one server, 2 workers: $ref_s s, $(ips "$ref_s") images/s (run $run_ref), workers in visits $(busy "$run_ref" 2 "$ref_s")% of the time"
	cat "$PG_PRIVATE_DIR/cpu_ref"
fi

echo "== pgdl.distribute(bench_cluster_train, {${NODES[0]},${NODES[1]}})"
dist_s=$(psql -At <<SQL
SET client_min_messages = warning;
SELECT clock_timestamp() AS t0 \gset
SELECT pgdl.distribute('bench_cluster_train', ARRAY['${NODES[0]}', '${NODES[1]}']) AS moved \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
)
echo "distribute: $partitions partitions in $dist_s s (one-time, not in the times below); where they are now:"
psql -P footer=off -c "SELECT c.relname AS partition, coalesce(s.srvname, 'here') AS server,
                              (SELECT count(*) FROM bench_cluster_train t WHERE t.tableoid = c.oid) AS buffers
                         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                         LEFT JOIN pg_foreign_table f ON f.ftrelid = c.oid LEFT JOIN pg_foreign_server s ON s.oid = f.ftserver
                        WHERE i.inhparent = 'bench_cluster_train'::regclass ORDER BY 1"

# What a node pays on every visit besides training: its partition read from the table (pgdl.train_partitions
# keeps nothing between calls).  Timed here as a detoasting scan of partition 0 on bench_node1.
read_s=$(psql -p 5434 -At <<'SQL'
SELECT clock_timestamp() AS t0 \gset
SELECT sum(array_length(x, 1) + array_length(y, 1)) AS floats FROM bench_cluster_train_p0 \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 3);
SQL
)
echo "reading partition 0 on ${NODES[0]} (SELECT of every x and y, detoasted): $read_s s"

echo "== (b) coordinator + 2 nodes, pgdl.fit_multiple(..., workers_per_node => 1)"
two_s=$(fit two "workers_per_node => 1")
run_two=$(run_of two)
echo "2 nodes, 1 worker each: $two_s s, $(ips "$two_s") images/s (run $run_two), workers in visits $(busy "$run_two" 2 "$two_s")% of the time"
cat "$PG_PRIVATE_DIR/cpu_two"

echo "== models: md5 of the weights per configuration, (a) against (b)"
psql -P footer=off <<'SQL'
SELECT a.config, a.architecture AS arch, a.config_json->>'optimizer' AS optimizer, (a.config_json->>'lr')::float4 AS lr,
       a.config_json->>'batch_size' AS batch, round(a.validation_accuracy::numeric, 4) AS val_acc,
       md5(ma.weights) AS md5_one_server, md5(ma.weights) = md5(mb.weights) AS same
  FROM bench_cluster_one a JOIN bench_cluster_two b USING (config)
  JOIN pgdl.models ma ON ma.id = a.model JOIN pgdl.models mb ON mb.id = b.model
 ORDER BY a.config;
SQL
# configurations whose model in bench_cluster_$1 has the same bytes as with one worker
same_as_one() {
	psql -Atc "SELECT count(*) FROM bench_cluster_one a JOIN bench_cluster_$1 b USING (config)
	            JOIN pgdl.models ma ON ma.id = a.model JOIN pgdl.models mb ON mb.id = b.model
	           WHERE md5(ma.weights) = md5(mb.weights)"
}
same=$(same_as_one two)
echo "models byte-identical on one server and on 2 nodes: $same of $n_configs"
if [ "$REFERENCE" = 1 ]; then
	same_ref=$(same_as_one ref)
	echo "models byte-identical with 1 and 2 workers on one server: $same_ref of $n_configs"
	same=$((same < same_ref ? same : same_ref))
fi
if [ "$same" != "$n_configs" ]; then
	echo "FAILED: models differ between one server and the cluster (or 2 workers); see above" >&2
	exit 1
fi

echo "== per configuration: blob (hops), seconds per epoch here (a) and across nodes (b)"
measured=$PG_PRIVATE_DIR/cluster_measured.tsv
psql -At -F $'\t' >"$measured" <<SQL
SELECT c.id, a.name, c.config->>'optimizer', c.config->>'batch_size',
       (SELECT octet_length(k.weights) FROM pgdl.checkpoints k
         WHERE k.run = $run_two AND k.config = c.id ORDER BY k.epoch DESC LIMIT 1),
       (SELECT avg(seconds) FROM pgdl.run_metrics WHERE run = $run_one AND config = c.id),
       (SELECT avg(seconds) FROM pgdl.run_metrics WHERE run = $run_two AND config = c.id)
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture
 WHERE c.set_name = '$SET' ORDER BY c.id;
SQL
# per epoch, what run (a) did outside visits: validation, checkpoints, loading its partitions
outside_s=$(psql -Atc "SELECT round((($one_s - sum(seconds)) / $EPOCHS)::numeric, 2) FROM pgdl.run_metrics WHERE run = $run_one")
{ echo "# bench/cluster.sh $(date -u '+%Y-%m-%d %H:%M UTC'): partitions=$partitions buffer_bytes=$buffer_bytes" \
	"epochs=$EPOCHS images=$n_train one_server_s=$one_s two_nodes_s=$two_s outside_visits_s=$outside_s"
  echo "# config	architecture	optimizer	batch	blob_bytes	epoch_s_here	epoch_s_nodes"
  cat "$measured"; } >"$measured.new" && mv "$measured.new" "$measured"
awk -F '\t' -v p="$partitions" '
	!/^#/ { printf "config %s %s %s batch %s: blob %d bytes, sub-epoch %.3f s here, %.3f s on a node (x%.2f)\n",
	                $1, $2, $3, $4, $5, $6 / p, $7 / p, $7 / $6
	        blob += $5; here += $6; nodes += $7 }
	END { printf "all: blobs %d bytes; sum of epoch seconds %.1f here, %.1f on nodes (x%.2f)\n", blob, here, nodes, nodes / here }' "$measured"
hop_bytes=$(awk -F '\t' -v p="$partitions" '!/^#/ { s += 2 * $5 * p } END { printf "%.0f", s }' "$measured")
[ -n "${KEEP_PG:-}" ] && echo "measurements in $measured"

if [ "$SLOWED" = 1 ]; then
	echo "== (d) ${NODES[0]} slowed: its postmaster and backends on core 0, with a busy loop there"
	taskset -c 0 bash -c 'while :; do :; done' &
	spin=$!
	pm=$(head -n 1 "$(node_dir 1)/postmaster.pid")
	# shellcheck disable=SC2013 # the file is one line of pids
	for pid in "$pm" $(cat "/proc/$pm/task/"*/children); do taskset -a -p -c 0 "$pid" >/dev/null; done
	slow_s=$(fit slow "workers_per_node => 1")
	echo "2 nodes, ${NODES[0]} slowed, no replicas: $slow_s s, $(ips "$slow_s") images/s"
	cat "$PG_PRIVATE_DIR/cpu_slow"
	rep_dist_s=$(psql -At <<SQL
SET client_min_messages = warning;
SELECT clock_timestamp() AS t0 \gset
SELECT pgdl.distribute('bench_cluster_train', ARRAY['${NODES[0]}', '${NODES[1]}'], replicas => 2) AS moved \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
)
	echo "distribute(..., replicas => 2): a replica of every partition on the other node in $rep_dist_s s"
	slow_rep_s=$(fit slow_rep "workers_per_node => 1")
	echo "2 nodes, ${NODES[0]} slowed, replicas => 2: $slow_rep_s s, $(ips "$slow_rep_s") images/s"
	cat "$PG_PRIVATE_DIR/cpu_slow_rep"
	kill "$spin"
	spin=
	same_slow=$(same_as_one slow)
	same_slow_rep=$(same_as_one slow_rep)
	echo "models byte-identical on one server and on the slowed cluster: $same_slow (no replicas), $same_slow_rep (replicas) of $n_configs"
	if [ "$same_slow" != "$n_configs" ] || [ "$same_slow_rep" != "$n_configs" ]; then
		echo "FAILED: models differ between one server and the slowed cluster" >&2
		exit 1
	fi
fi

echo "== projection (bench/cluster_projection.py)"
"$PYTHON" "$HERE/cluster_projection.py" "$measured"

echo "== summary: $n_configs configurations, $EPOCHS epochs, $n_train training images, $partitions partitions, validation on 10000"
echo "one server, 1 worker:     $one_s s, $(ips "$one_s") images/s"
[ "$REFERENCE" = 1 ] && echo "one server, 2 workers:    $ref_s s, $(ips "$ref_s") images/s  (reference: 2 workers / 1 worker = $(ratio "$one_s" "$ref_s"))"
echo "2 nodes, 1 worker each:   $two_s s, $(ips "$two_s") images/s  (distribute: $dist_s s once)"
echo "cluster: 2 nodes / 1 node = $(ratio "$one_s" "$two_s")"
echo "cluster: hop bytes per epoch = $hop_bytes, buffer bytes per epoch = $buffer_bytes"
if [ "$SLOWED" = 1 ]; then
	echo "cluster: slowed node, replicated / unreplicated = $(ratio "$slow_s" "$slow_rep_s")"
fi
