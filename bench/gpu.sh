#!/bin/bash
# bench/gpu.sh -- pgdl on an NVIDIA GPU, in one run (the `device` tool runs it
# where a GPU is lent; about 5 minutes on an H200-class machine).
#
#   1. builds with WITH_CUDA=1 (for this GPU's compute capability) and installs;
#   2. runs the CUDA unit tests (every primitive and whole models against the CPU backend): a failure
#      stops the bench, which then publishes no figure;
#   3. measures the device's cuBLAS sgemm rate (bench/gpu_peak.c);
#   4. in a private PostgreSQL: packs Fashion-MNIST, trains the reference MLP
#      and CNN with pgdl.fit at batch 128 with "device": "cuda" and on the CPU,
#      evaluates both on the test set;
#   5. runs pgdl.fit_multiple with 8 small configurations on the GPU and samples
#      how busy nvidia-smi says the GPU was.
#
# Environment: LIMIT (default 0: all 60,000 training images; at least 8,192) trains
# on the first LIMIT; CPU_LIMIT (default 10000) images for the CPU side, which is slow;
# GPU_FAKE=1 runs the whole script without a GPU on the fake device of a build
# without CUDA (a check of the script: its figures are the CPU's).
# The last lines are always
#   gpu: mlp images/s = X
#   gpu: cnn images/s = Y
#   gpu: mlp gpu/cpu = A, cnn gpu/cpu = B   (the same images and epochs on both sides, both warm)
#   gpu: mlp fraction of sgemm = C, cnn fraction of sgemm = D
#   gpu: fit_multiple busy = E%
# Without an NVIDIA GPU (and without GPU_FAKE=1) it says so and exits with 2.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
LIMIT=${LIMIT:-0}
CPU_LIMIT=${CPU_LIMIT:-10000}
JOBS=$(nproc)
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
cd "$ROOT"

if [ "${GPU_FAKE:-0}" = 1 ]; then
	echo "== bench/gpu: GPU_FAKE=1: the fake device (CPU kernels), a check of the script, not a measurement"
	export PGDL_FAKE_CUDA=1
	make_args=()
	rel=build/release
	busy_cmd=""
	peak_size=1024
else
	if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
		echo "gpu: no NVIDIA GPU on this machine (nvidia-smi lists none); nothing measured"
		exit 2
	fi
	cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
	make_args=(WITH_CUDA=1 "CUDA_ARCH=-gencode arch=compute_$cap,code=sm_$cap")
	rel=build/release-cuda
	peak_size=4096
	busy_cmd="nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -i 0"
	echo "== bench/gpu: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1), sm_$cap, $JOBS cores"
fi

echo "== build and install"
t0=$(date +%s)
make -s -j"$JOBS" "${make_args[@]}" >/tmp/pgdl-gpu-build.log 2>&1 || { tail -30 /tmp/pgdl-gpu-build.log; exit 1; }
make -s "${make_args[@]}" install >>/tmp/pgdl-gpu-build.log 2>&1 || { tail -30 /tmp/pgdl-gpu-build.log; exit 1; }
echo "built and installed in $(($(date +%s) - t0)) s"

echo "== unit tests (CUDA against the CPU backend)"
make -s -j"$JOBS" "${make_args[@]}" "$rel/unit_tests" "$rel/gpu_peak" fixtures >>/tmp/pgdl-gpu-build.log 2>&1
unit_rc=0
"$rel/unit_tests" regress/unit/fixtures >/tmp/pgdl-gpu-unit.log 2>&1 || unit_rc=$?
grep -E '^(FAILED|skip|cuda)' /tmp/pgdl-gpu-unit.log | head -20 || true
unit=$(tail -n 1 /tmp/pgdl-gpu-unit.log)
echo "unit: $unit"
# a device whose kernels disagree with the CPU's has no throughput worth publishing
if [ "$unit_rc" -ne 0 ]; then
	echo "gpu: the unit tests failed (exit $unit_rc): nothing measured"
	exit 1
fi

echo "== sgemm"
peak_line=$("$rel/gpu_peak" "$peak_size" 20 2>&1 | tail -n 1)
echo "$peak_line"
peak=$(echo "$peak_line" | sed -n 's/.*sgemm_gflops=\([0-9.]*\).*/\1/p')
[ -n "$peak" ] || { echo "gpu: the sgemm measurement failed"; exit 1; }

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
pg_private_start
psql() { command psql -qX -v ON_ERROR_STOP=1 "$@"; }
if [ -n "${PG_PRIVATE_DIR:-}" ]; then
	# eight fit_multiple workers and their coordinator
	psql -c "ALTER SYSTEM SET max_worker_processes = 24"
	"${PG_PRIVATE_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_PRIVATE_DIR/data" -l "$PG_PRIVATE_DIR/server.log" -w restart >/dev/null
fi
load_fmnist
psql -c "CREATE EXTENSION IF NOT EXISTS pgdl" -c "SELECT pgdl.cuda_status()" -At
where=""
[ "$LIMIT" -gt 0 ] && where="WHERE id < $LIMIT"
psql -At <<SQL >/dev/null
CREATE TABLE gpu_train AS SELECT * FROM fmnist_train $where;
CREATE TABLE gpu_train_cpu AS SELECT * FROM fmnist_train WHERE id < $CPU_LIMIT;
SELECT pgdl.pack('gpu_train', 'image', 'label', 'gpu_packed', buffer_rows => 1024, partitions => 8, seed => 42, scale => 1 / 255.0);
SELECT pgdl.pack('gpu_train_cpu', 'image', 'label', 'gpu_packed_cpu', buffer_rows => 1024, partitions => 8, seed => 42, reference => 'gpu_packed');
SELECT pgdl.pack('fmnist_test', 'image', 'label', 'gpu_test', buffer_rows => 1024, partitions => 1, reference => 'gpu_packed');
SQL

mlp='{"input": [784], "layers": [{"type": "dense", "units": 512}, {"type": "relu"}, {"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 10}]}'
cnn='{"input": [1, 28, 28], "layers": [{"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2}, {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2}, {"type": "flatten"}, {"type": "dense", "units": 10}]}'
config='"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 128, "seed": 42'

# pgdl.fit for EPOCHS epochs on DEVICE: "last-epoch-images/s accuracy".  The first epoch also reads the
# buffers from the table (and on a GPU makes the CUDA context and moves the model); the last is warm on
# either side, so the GPU and the CPU are compared on the same epoch of the same data.
fit() {
	local spec=$1 device=$2 source=$3 epochs=$4
	psql -At <<SQL
SET client_min_messages = warning;
SELECT pgdl.fit('$source', '$spec'::jsonb, '{$config, "device": "$device"}', $epochs) AS model \gset
SELECT round(r.images_per_second) || ' ' || round(e.accuracy::numeric, 4)
  FROM pgdl.run_metrics r JOIN pgdl.models m ON m.run = r.run, pgdl.evaluate(:model, 'gpu_test') e
 WHERE m.id = :model AND r.epoch = $epochs;
SQL
}
flops() { psql -Atc "SELECT flops_train FROM pgdl.estimate('$1'::jsonb)"; }

declare -A gpu same_gpu cpu acc frac
for model in mlp cnn; do
	spec=${!model}
	read -r gpu[$model] acc[$model] < <(fit "$spec" cuda gpu_packed 3)
	# the ratio: the same CPU_LIMIT images, two epochs on each side, the second (warm) epoch's rate
	read -r same_gpu[$model] _ < <(fit "$spec" cuda gpu_packed_cpu 2)
	read -r cpu[$model] _ < <(fit "$spec" cpu gpu_packed_cpu 2)
	frac[$model]=$(awk -v ips="${gpu[$model]}" -v f="$(flops "$spec")" -v p="$peak" 'BEGIN { printf "%.3f", ips * f / 1e9 / p }')
	echo "$model: gpu ${gpu[$model]} images/s (epoch 3 of all images; test accuracy ${acc[$model]}); on the" \
		"same $CPU_LIMIT images, epoch 2: gpu ${same_gpu[$model]}, cpu ${cpu[$model]} images/s (one thread)"
done

echo "== fit_multiple: 8 small configurations on the GPU, 8 workers"
psql -At <<'SQL' >/dev/null
SELECT pgdl.add_architecture('gpu_small', '{"input": [784], "layers": [{"type": "dense", "units": 128}, {"type": "relu"}, {"type": "dense", "units": 10}]}');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'gpu_eight', a.id, jsonb_build_object('optimizer', 'adam', 'lr', lr, 'batch_size', 128, 'seed', 42,
                                             'device', 'cuda', 'workers_per_device', 8)
  FROM pgdl.architectures a, unnest(ARRAY[0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.007, 0.01]) lr
 WHERE a.name = 'gpu_small';
SQL
samples=/tmp/pgdl-gpu-busy.$$
: >"$samples"
if [ -n "$busy_cmd" ]; then
	(while sleep 0.2; do $busy_cmd >>"$samples" 2>/dev/null || true; done) &
	sampler=$!
fi
t0=$(date +%s.%N)
psql -At -c "SET client_min_messages = warning" \
	-c "SELECT count(*) FROM pgdl.fit_multiple('gpu_packed', 'gpu_eight', epochs => 3, workers => 8)" >/dev/null
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
[ -n "${sampler:-}" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null || true
busy=$(awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n; else print "n/a" }' "$samples")
rm -f "$samples"
echo "fit_multiple: 8 configurations x 3 epochs in $secs s"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
echo "== $unit; sgemm $peak GFLOP/s"
echo "gpu: mlp images/s = ${gpu[mlp]}"
echo "gpu: cnn images/s = ${gpu[cnn]}"
echo "gpu: mlp gpu/cpu = $(ratio "${same_gpu[mlp]}" "${cpu[mlp]}"), cnn gpu/cpu = $(ratio "${same_gpu[cnn]}" "${cpu[cnn]}")"
echo "gpu: mlp fraction of sgemm = ${frac[mlp]}, cnn fraction of sgemm = ${frac[cnn]}"
echo "gpu: fit_multiple busy = $busy%"
