#!/bin/bash
# bench/fit.sh -- one pgdl.fit on 1 and on 2 cores ("threads" in the
# configuration: data parallelism inside the step), the reference MLP and CNN
# on Fashion-MNIST, batch 128, SGD with momentum 0.9.
#
# Each fit trains EPOCHS epochs (default 3) on the first LIMIT images (default
# 20000): the first epoch reads the packed table, the next ones train on the
# buffers kept in memory.  1 and 2 threads alternate, ROUNDS times (default 3);
# the best of each counts.  A ratio is the 1-thread time of the whole pgdl.fit
# call over the 2-thread time; the images/s of the epochs after the first
# (training alone) are printed too.  Also checked: two 2-thread fits give the
# same bytes.
#
# Usage: bench/fit.sh   (make bench-fit).  Needs pgdl installed; uses the server
# given by PGHOST/PGPORT/PGDATABASE, or starts a private one.  The machine
# should be otherwise idle: on a loaded 2-core machine the 2-core figure
# measures the load, not pgdl.  The last lines are always
#   fit: cnn 2 cores / 1 core = X
#   fit: mlp 2 cores / 1 core = Y
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROUNDS=${ROUNDS:-3}
EPOCHS=${EPOCHS:-3}
export LIMIT=${LIMIT:-20000}

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
bench_start fit
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
psql -c "CREATE EXTENSION IF NOT EXISTS pgdl" -c "DROP TABLE IF EXISTS bench_fit_packed"
psql -c "SELECT pgdl.pack('$train', 'image', 'label', 'bench_fit_packed', buffer_rows => 128, partitions => 4,
                          seed => 42, scale => 1 / 255.0) IS NOT NULL AS packed" >/dev/null
echo "packed $n_train images"

mlp='{"input": [784], "layers": [{"type": "dense", "units": 512}, {"type": "relu"}, {"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 10}]}'
cnn='{"input": [1, 28, 28], "layers": [{"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2}, {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2}, {"type": "flatten"}, {"type": "dense", "units": 10}]}'

# One fit: "res" seconds of the whole call, best images/s of the epochs after the first, the model's id;
# "cpu0"/"cpu1" before and after: the backend's CPU time in clock ticks, of its own (first) thread and of all
# its threads (/proc: user + system)
fit()
{
	psql -At -F ' ' <<SQL
SET client_min_messages = warning;
SELECT pg_backend_pid() AS pid \gset
\setenv BPID :pid
\\! echo cpu0 \$(cut -d' ' -f14,15 /proc/\$BPID/task/\$BPID/stat) \$(cut -d' ' -f14,15 /proc/\$BPID/stat)
SELECT clock_timestamp() AS t0 \gset
SELECT pgdl.fit('bench_fit_packed', '$1'::jsonb,
                '{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 128, "threads": $2}', $EPOCHS) AS model \gset
SELECT 'res', round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 3),
       (SELECT round(max(r.images_per_second)) FROM pgdl.run_metrics r JOIN pgdl.models m ON m.run = r.run
         WHERE m.id = :model AND r.epoch > 1),
       :model;
\\! echo cpu1 \$(cut -d' ' -f14,15 /proc/\$BPID/task/\$BPID/stat) \$(cut -d' ' -f14,15 /proc/\$BPID/stat)
SQL
}
best_low() { sort -g | head -n 1; }
best_high() { sort -g | tail -n 1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

declare -A secs ips cpu same
for model in mlp cnn; do
	spec=${!model}
	declare -A s=() i=() c=()
	models=()
	for ((r = 1; r <= ROUNDS; r++)); do
		for threads in 1 2; do
			out=$(fit "$spec" "$threads")
			read -r sec rate id < <(awk '$1 == "res" { print $2, $3, $4 }' <<<"$out")
			# CPU seconds of the fit: the backend's first thread (the caller's) and all its threads
			read -r main all < <(awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu0" { m -= $2 + $3; a -= $4 + $5 }
				$1 == "cpu1" { m += $2 + $3; a += $4 + $5 } END { printf "%.2f %.2f\n", m / hz, a / hz }' <<<"$out")
			s[$threads]+="$sec "
			i[$threads]+="$rate "
			c[$threads]+="$main "
			[ "$threads" = 2 ] && models+=("$id")
			echo "$model round $r, $threads thread(s): $sec s, $rate images/s after epoch 1; CPU s: backend's first thread $main, all threads $all"
		done
	done
	for threads in 1 2; do
		secs[$model,$threads]=$(tr ' ' '\n' <<<"${s[$threads]}" | grep . | best_low)
		ips[$model,$threads]=$(tr ' ' '\n' <<<"${i[$threads]}" | grep . | best_high)
		cpu[$model,$threads]=$(tr ' ' '\n' <<<"${c[$threads]}" | grep . | best_low)
	done
	same[$model]=$(psql -Atc "SELECT count(DISTINCT weights) = 1 FROM pgdl.models WHERE id IN ($(IFS=,; echo "${models[*]}"))")
	unset s i c
done
psql -c "DROP TABLE bench_fit_packed"
[ "$train" = fmnist_train_sub ] && psql -c "DROP TABLE fmnist_train_sub"

echo "== best of $ROUNDS rounds; $n_train images, $EPOCHS epochs per fit; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %12s %12s %16s %16s %s\n' model "1 core s" "2 cores s" "1 core img/s" "2 cores img/s" "2-core fits bit-identical"
for model in mlp cnn; do
	printf '%-5s %12s %12s %16s %16s %s\n' "$model" "${secs[$model,1]}" "${secs[$model,2]}" "${ips[$model,1]}" "${ips[$model,2]}" "${same[$model]}"
done
echo "the backend's first thread's CPU time, 1 thread / 2 threads (with train_ahead.c it reads buffers; steps run in its training thread): mlp $(ratio "${cpu[mlp,1]}" "${cpu[mlp,2]}"), cnn $(ratio "${cpu[cnn,1]}" "${cpu[cnn,2]}")"
echo "epochs after the first (training alone): mlp $(ratio "${ips[mlp,2]}" "${ips[mlp,1]}"), cnn $(ratio "${ips[cnn,2]}" "${ips[cnn,1]}")"
echo "fit: cnn 2 cores / 1 core = $(ratio "${secs[cnn,1]}" "${secs[cnn,2]}")"
echo "fit: mlp 2 cores / 1 core = $(ratio "${secs[mlp,1]}" "${secs[mlp,2]}")"
