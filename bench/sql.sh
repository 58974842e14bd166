#!/bin/bash
# bench/sql.sh -- one epoch of Fashion-MNIST through SQL (pgdl.fit on a packed
# table) against the engine alone (bench/engine.c) and PyTorch, in one run, one
# thread each, plus the time pgdl.pack takes for the 60,000 training rows.
# The SQL side trains two epochs: the first reads every buffer from the packed
# table (each buffer trains in a thread while the next one is read), the second
# trains on the buffers kept in memory; the ratios on the last three lines use
# the first; the two-epoch lines set pgdl's two epochs against the engine's two (both warm in the
# second, both cold in the first), never a warm epoch against a cold one.
#
# Usage: bench/sql.sh PATH_TO_engine_bench   (make bench-sql builds and runs it)
# Environment: a PostgreSQL with pgdl installed given by PGHOST/PGPORT/PGDATABASE,
# or none (a private server is started).  ROUNDS (default 2): each side runs that
# many times and its best images/s counts.
# The last lines are always
#   sql: mlp epoch 1 / engine = A
#   sql: mlp 2 epochs / engine 2 epochs = B
#   sql: cnn epoch 1 / engine = C
#   sql: cnn 2 epochs / engine 2 epochs = D
#   2 epochs: ...
#   cnn: sql/engine = C
#   mlp: sql/engine = X
#   mlp: sql/pytorch = Y
#   cnn: sql/pytorch = Z
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${1:?usage: bench/sql.sh PATH_TO_engine_bench}
ROUNDS=${ROUNDS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
pg_private_start
psql() { command psql -qX -v ON_ERROR_STOP=1 "$@"; }

echo "== bench/sql: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset}"
load_fmnist
psql -c "CREATE EXTENSION IF NOT EXISTS pgdl" -c "DROP TABLE IF EXISTS bench_train_packed"
pack_s=$(psql -At <<'SQL'
SELECT clock_timestamp() AS t0 \gset
SELECT pgdl.pack('fmnist_train', 'image', 'label', 'bench_train_packed',
                 buffer_rows => 128, partitions => 4, seed => 42, scale => 1 / 255.0) IS NOT NULL AS packed \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 2);
SQL
)
echo "pack: 60000 rows in $pack_s s"

mlp='{"input": [784], "layers": [{"type": "dense", "units": 512}, {"type": "relu"}, {"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 10}]}'
cnn='{"input": [1, 28, 28], "layers": [{"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2}, {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2}, {"type": "flatten"}, {"type": "dense", "units": 10}]}'
config='{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 128}'

best() { sort -g | tail -n 1; }
# images/s of epoch 1 (buffers read from the table) and epoch 2 (kept in memory), one per line
sql_ips()
{
	psql -At <<SQL
SET client_min_messages = warning;
SELECT pgdl.fit('bench_train_packed', '$1'::jsonb, '$config', 2) AS model \gset
SELECT round(r.images_per_second) FROM pgdl.run_metrics r JOIN pgdl.models m ON m.run = r.run
 WHERE m.id = :model ORDER BY r.epoch;
SQL
}
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

# two epochs' rate from each epoch's: the images over the time both took
two_epochs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", 2 / (1 / a + 1 / b) }'; }

declare -A sql sql2 eng eng2 torch
for model in mlp cnn; do
	spec=${!model}
	s=() s2=() e=() e2=() t=()
	for ((r = 1; r <= ROUNDS; r++)); do
		mapfile -t epochs < <(sql_ips "$spec")
		s+=("${epochs[0]}")
		s2+=("$(two_epochs "${epochs[0]}" "${epochs[1]}")")
		e+=("$("$BIN" --model "$model" --no-peak | grep "^pgdl $model " | field images_per_s)")
		# the same two epochs for the engine: both sides' second epoch is warm, their first is not
		e2+=("$("$BIN" --model "$model" --no-peak --epochs 2 | grep "^pgdl $model " | field images_per_s)")
		t+=("$("$PYTHON" "$HERE/engine_torch.py" --model "$model" | grep "^pytorch $model " | field images_per_s)")
		echo "$model round $r: sql ${s[-1]} (2 epochs: ${s2[-1]})  engine ${e[-1]} (2 epochs: ${e2[-1]})  pytorch ${t[-1]} images/s"
	done
	sql[$model]=$(printf '%s\n' "${s[@]}" | best)
	sql2[$model]=$(printf '%s\n' "${s2[@]}" | best)
	eng[$model]=$(printf '%s\n' "${e[@]}" | best)
	eng2[$model]=$(printf '%s\n' "${e2[@]}" | best)
	torch[$model]=$(printf '%s\n' "${t[@]}" | best)
done
psql -c "DROP TABLE bench_train_packed"

echo "== best of $ROUNDS rounds, images/s (one thread); sql = the first epoch, read from the table;"
echo "   2 epochs = the first and the next (pgdl's buffers kept in memory by pgdl.train_cache_mem), on both sides"
printf '%-5s %10s %14s %10s %16s %10s\n' model sql "sql 2 epochs" engine "engine 2 epochs" pytorch
for model in mlp cnn; do
	printf '%-5s %10.0f %14.0f %10.0f %16.0f %10.0f\n' "$model" "${sql[$model]}" "${sql2[$model]}" "${eng[$model]}" \
		"${eng2[$model]}" "${torch[$model]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
for model in mlp cnn; do
	echo "sql: $model epoch 1 / engine = $(ratio "${sql[$model]}" "${eng[$model]}")"
	echo "sql: $model 2 epochs / engine 2 epochs = $(ratio "${sql2[$model]}" "${eng2[$model]}")"
done
echo "2 epochs: mlp sql/engine = $(ratio "${sql2[mlp]}" "${eng2[mlp]}"), cnn sql/engine = $(ratio "${sql2[cnn]}" "${eng2[cnn]}")"
echo "cnn: sql/engine = $(ratio "${sql[cnn]}" "${eng[cnn]}")"
echo "mlp: sql/engine = $(ratio "${sql[mlp]}" "${eng[mlp]}")"
echo "mlp: sql/pytorch = $(ratio "${sql[mlp]}" "${torch[mlp]}")"
echo "cnn: sql/pytorch = $(ratio "${sql[cnn]}" "${torch[cnn]}")"
