#!/bin/bash
# bench/pack.sh -- pgdl.pack in bounded memory: the spilled path (features
# beyond maintenance_work_mem through temporary files) against the in-memory
# path on the 60,000 Fashion-MNIST training images, then a large source packed
# with 256 MB.
#
#   in memory  maintenance_work_mem = 1GB  (the 188 MB of features fit)
#   spilled    maintenance_work_mem = SPILL_MEM (default 16MB: 12 bucket files)
#   large      ROWS rows (Fashion-MNIST repeated) of 784 features with LARGE_MEM (default 256MB)
#
# Each pack runs in a fresh backend (one psql), so that its peak memory is its
# own.  Memory is the backend's peak private RSS, VmRSS - RssShmem sampled
# every 0.1 s (shared buffers, which the INSERTs of any path fill, are left
# out), and VmHWM (all resident pages, shared buffers included) as read by the
# backend right after packing.  Times are the best of RUNS runs of the pack
# statement, from the server's clock.  The two small packs must give the same
# bytes (md5 of the packed tables), and only the spilled one may write
# temporary files (pg_stat_database.temp_bytes).
#
# Usage: bench/pack.sh   (make install first; make bench-pack runs it)
# Environment: a PostgreSQL with pgdl installed given by PGHOST/PGPORT/PGDATABASE,
# or none (a private server is started; KEEP_PG=1 keeps its directory and
# server.log).  RUNS (default 3), SPILL_MEM (16MB), ROWS (default 2000000; 0
# skips the large run), LARGE_MEM (256MB).
# The last lines are always
#   pack: large: N rows of 784 features in M: R rows/s, peak private RSS P MB (VmHWM H MB)
#   pack: spilled / in-memory rows/s = X
#   pack: peak RSS spilled / in-memory = Y
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUNS=${RUNS:-3}
SPILL_MEM=${SPILL_MEM:-16MB}
ROWS=${ROWS:-2000000}
LARGE_MEM=${LARGE_MEM:-256MB}

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
bench_start pack
WORK=$(mktemp -d /tmp/pgdl-bench-pack.XXXXXX)
chmod 777 "$WORK"
cleanup_work() { rm -rf "$WORK"; }
trap 'cleanup_work; pg_private_stop' EXIT

psql <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgdl;
SQL

# Peak of VmRSS - RssShmem (kB) of the backend whose pid appears in $1, into $2, until $3 exists.
sample_rss() {
	local pidfile=$1 out=$2 stop=$3 pid="" peak=0 now
	while [ -z "$pid" ] && [ ! -e "$stop" ]; do
		pid=$(tr -dc '0-9' <"$pidfile" 2>/dev/null || true)
		sleep 0.05
	done
	while [ -n "$pid" ] && [ ! -e "$stop" ] && [ -e "/proc/$pid/status" ]; do
		now=$(awk '/^VmRSS:/ { r = $2 } /^RssShmem:/ { s = $2 } END { print r - s }' "/proc/$pid/status" 2>/dev/null || echo 0)
		if [ "${now:-0}" -gt "$peak" ]; then peak=$now; echo "$peak" >"$out"; fi
		sleep 0.1
	done
	echo "$peak" >"$out"
}

# One pack of source $1 into $2 with maintenance_work_mem $3, in a fresh backend;
# prints "seconds private_peak_kB vmhwm_kB temp_bytes rows".
pack_once() {
	local src=$1 out=$2 mem=$3 sampler res
	rm -f "$WORK/pid" "$WORK/peak" "$WORK/stop"
	: >"$WORK/pid"
	sample_rss "$WORK/pid" "$WORK/peak" "$WORK/stop" &
	sampler=$!
	res=$(psql -At <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS $out;
SET maintenance_work_mem = '$mem';
\o $WORK/pid
SELECT pg_backend_pid();
\o
SELECT pg_sleep(0.3);
SELECT pg_stat_force_next_flush();
SELECT temp_bytes AS tb0 FROM pg_stat_database WHERE datname = current_database() \gset
SELECT clock_timestamp() AS t0 \gset
SELECT pgdl.pack('$src', 'image', 'label', '$out', buffer_rows => 128, partitions => 4, scale => 1 / 255.0) AS id \gset
SELECT extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) AS secs \gset
SELECT (regexp_match(pg_read_file('/proc/self/status'), 'VmHWM:\s+(\d+)'))[1] AS hwm \gset
SELECT pg_stat_force_next_flush();
SELECT :secs, :hwm, (SELECT temp_bytes - :tb0 FROM pg_stat_database WHERE datname = current_database()),
       (SELECT n_rows FROM pgdl.datasets WHERE id = :id);
SQL
)
	touch "$WORK/stop"
	wait "$sampler"
	res=$(echo "$res" | grep '|' | tail -n 1)
	echo "$(echo "$res" | cut -d'|' -f1) $(cat "$WORK/peak") $(echo "$res" | cut -d'|' -f2-4 | tr '|' ' ')"
}

md5_of() {
	psql -Atc "SELECT md5(string_agg(int4send(part) || int4send(n) || array_send(x) || array_send(y), ''::bytea
	                                  ORDER BY buffer_id)) FROM $1"
}

# best of RUNS; the memory figures of the last run (each run's are its own backend's)
best_of() {
	local src=$1 out=$2 mem=$3 best="" r t
	for _ in $(seq "$RUNS"); do
		r=$(pack_once "$src" "$out" "$mem")
		t=${r%% *}
		if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
	done
	echo "$best ${r#* }"
}
mb() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }

echo "load: $(uptime | sed 's/.*load average: //')"
read -r t_mem rss_mem hwm_mem tmp_mem n_mem <<<"$(best_of "$train" bench_pack_mem 1GB)"
read -r t_disk rss_disk hwm_disk tmp_disk n_disk <<<"$(best_of "$train" bench_pack_disk "$SPILL_MEM")"
same=$([ "$(md5_of bench_pack_mem)" = "$(md5_of bench_pack_disk)" ] && echo yes || echo NO)
echo "in memory (1GB):      $n_mem rows in ${t_mem}s, $(awk -v n="$n_mem" -v t="$t_mem" 'BEGIN { printf "%.0f", n / t }') rows/s," \
	"peak private RSS $(mb "$rss_mem") MB, VmHWM $(mb "$hwm_mem") MB, temporary files $tmp_mem bytes"
echo "spilled ($SPILL_MEM):  $n_disk rows in ${t_disk}s, $(awk -v n="$n_disk" -v t="$t_disk" 'BEGIN { printf "%.0f", n / t }') rows/s," \
	"peak private RSS $(mb "$rss_disk") MB, VmHWM $(mb "$hwm_disk") MB, temporary files $tmp_disk bytes"
echo "same bytes: $same"
echo "load: $(uptime | sed 's/.*load average: //')"
if [ "$same" != yes ] || [ "$tmp_mem" -ne 0 ] || [ "$tmp_disk" -le 0 ]; then
	echo "pack: the paths differ, or did not spill as asked" >&2
	exit 1
fi
psql -c "DROP TABLE bench_pack_mem, bench_pack_disk"

large="pack: large: skipped (ROWS=0)"
if [ "$ROWS" -gt 0 ]; then
	echo "generating $ROWS rows (Fashion-MNIST repeated, x[1] varied per copy) ..."
	psql <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_pack_large_src, bench_pack_large;
CREATE UNLOGGED TABLE bench_pack_large_src (image real[], label integer);
ALTER TABLE bench_pack_large_src ALTER COLUMN image SET STORAGE EXTERNAL;
INSERT INTO bench_pack_large_src
SELECT (ARRAY[g::real] || image[2:784]), label
  FROM generate_series(0, ($ROWS - 1) / $n_train) g, $train
 LIMIT $ROWS;
ANALYZE bench_pack_large_src;
SQL
	echo "source: $(psql -Atc "SELECT pg_size_pretty(pg_total_relation_size('bench_pack_large_src'))"), load: $(uptime | sed 's/.*load average: //')"
	RUNS=1
	read -r t_big rss_big hwm_big tmp_big n_big <<<"$(best_of bench_pack_large_src bench_pack_large "$LARGE_MEM")"
	echo "load: $(uptime | sed 's/.*load average: //'), temporary files $tmp_big bytes"
	large="pack: large: $n_big rows of 784 features in $LARGE_MEM: $(awk -v n="$n_big" -v t="$t_big" 'BEGIN { printf "%.0f", n / t }') rows/s ($t_big s), peak private RSS $(mb "$rss_big") MB (VmHWM $(mb "$hwm_big") MB)"
	psql -c "DROP TABLE bench_pack_large_src, bench_pack_large"
fi

echo "$large"
echo "pack: spilled / in-memory rows/s = $(awk -v a="$t_mem" -v b="$t_disk" 'BEGIN { printf "%.2f", a / b }')"
echo "pack: peak RSS spilled / in-memory = $(awk -v a="$rss_disk" -v b="$rss_mem" 'BEGIN { printf "%.2f", a / b }')"
