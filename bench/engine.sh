#!/bin/bash
# bench/engine.sh -- pgdl's engine alone vs PyTorch, one thread, Fashion-MNIST.
#
# Usage: bench/engine.sh PATH_TO_engine_bench [options for both sides]
#   options: --model mlp|cnn|resnet|all, --epochs N, --limit N (see bench/engine.c)
#   environment: ROUNDS (default 3: engine, PyTorch, engine, PyTorch, ...; the best
#   images/s of each side counts), PYTHON (default /usr/bin/python3),
#   FMNIST_DIR (the data directory).
#
# Both sides run in this one invocation under the same environment:
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are passed through exactly as they are.
# Then ROUNDS rounds of two sequence models on synthetic ids (--model gru: embedding,
# gru, dense; --model attention: a transformer encoder block; no data set), whose
# ratios of training examples/s come before them:
#   gru: pgdl/pytorch = W
#   attention: pgdl/pytorch = A
# Before them, the core's limit and the ISA of each kernel (the "pgdl info
# core_isa=..." line of pgdl's last round: the fp32 FMA peak measured on the
# best ISA the CPU has, the theoretical one, OpenBLAS's core), then
#   mlp: core peak fraction = P
#   cnn: core peak fraction = Q
# (training GFLOP/s in CPU seconds, in pgdl's best round, over that measured
# FMA peak).
# The last four lines are always
#   mlp: pgdl/pytorch = X
#   cnn: pgdl/pytorch = Y
#   resnet: pgdl/pytorch = R
#   cnn: peak fraction = Z
# with X, Y, R the ratios of training images/s (resnet: a small ResNet-style CNN,
# two residual blocks with batchnorm) and Z the CNN's training GFLOP/s over
# the single-thread sgemm rate of the same process, in pgdl's best round (n/a for
# a model not run).
set -euo pipefail

if [ $# -lt 1 ] || [ ! -x "$1" ]; then
	echo "usage: $0 PATH_TO_engine_bench [--model mlp|cnn|resnet|all] [--epochs N] [--limit N]" >&2
	exit 2
fi
BIN=$1
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
ROUNDS=${ROUNDS:-3}

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
echo "== bench/engine: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, ${cpu:-unknown CPU}"
echo "== OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE-unset}, one thread, rounds=$ROUNDS"

out=$(mktemp)
trap 'rm -f "$out"' EXIT

for ((r = 1; r <= ROUNDS; r++)); do
	echo "-- round $r: pgdl"
	"$BIN" "$@" | tee -a "$out"
	# Count FLOPs the same way on both sides: the engine's nn_spec_cost.
	fm=$(awk '$1 == "pgdl" && $2 == "mlp" { for (i = 3; i <= NF; i++) if ($i ~ /^flops_train_per_ex=/) { sub(/.*=/, "", $i); print $i } }' "$out" | tail -n 1)
	fc=$(awk '$1 == "pgdl" && $2 == "cnn" { for (i = 3; i <= NF; i++) if ($i ~ /^flops_train_per_ex=/) { sub(/.*=/, "", $i); print $i } }' "$out" | tail -n 1)
	fr=$(awk '$1 == "pgdl" && $2 == "resnet" { for (i = 3; i <= NF; i++) if ($i ~ /^flops_train_per_ex=/) { sub(/.*=/, "", $i); print $i } }' "$out" | tail -n 1)
	echo "-- round $r: pytorch"
	"$PYTHON" "$HERE/engine_torch.py" "$@" ${fm:+--flops-mlp "$fm"} ${fc:+--flops-cnn "$fc"} ${fr:+--flops-resnet "$fr"} | tee -a "$out"
done

for ((r = 1; r <= ROUNDS; r++)); do
	echo "-- round $r: pgdl gru"
	"$BIN" --model gru | tee -a "$out"
	echo "-- round $r: pytorch gru"
	"$PYTHON" "$HERE/engine_torch.py" --model gru | tee -a "$out"
	echo "-- round $r: pgdl attention"
	"$BIN" --model attention | tee -a "$out"
	echo "-- round $r: pytorch attention"
	"$PYTHON" "$HERE/engine_torch.py" --model attention | tee -a "$out"
done

echo "== summary (best images/s of $ROUNDS rounds)"
awk '
	function val(key,    i) {
		for (i = 3; i <= NF; i++)
			if (index($i, key "=") == 1)
				return substr($i, length(key) + 2)
		return ""
	}
	($1 == "pgdl" || $1 == "pytorch") && ($2 == "gru" || $2 == "attention") {
		k = $1 SUBSEP $2
		ips = val("examples_per_s") + 0
		if (!(k in best) || ips > best[k])
			best[k] = ips
	}
	($1 == "pgdl" || $1 == "pytorch") && ($2 == "mlp" || $2 == "cnn" || $2 == "resnet") {
		k = $1 SUBSEP $2
		ips = val("images_per_s") + 0
		if (!(k in best) || ips > best[k]) {
			best[k] = ips
			acc[k] = val("test_acc")
			frac[k] = val("peak_fraction")
			cfrac[k] = val("core_peak_fraction")
		}
	}
	$1 == "pgdl" && $2 == "info" && $3 ~ /^core_isa=/ { core = $0 }
	END {
		printf "%-6s %-8s %12s %9s %14s\n", "model", "side", "images/s", "test_acc", "peak_fraction"
		for (mi = 1; mi <= 3; mi++) {
			m = mi == 1 ? "mlp" : mi == 2 ? "cnn" : "resnet"
			for (si = 1; si <= 2; si++) {
				s = si == 1 ? "pgdl" : "pytorch"
				if ((s, m) in best)
					printf "%-6s %-8s %12.0f %9s %14s\n", m, s, best[s, m], acc[s, m], frac[s, m]
			}
		}
		if (core != "")
			print core
		for (mi = 1; mi <= 2; mi++) {
			m = mi == 1 ? "mlp" : "cnn"
			if ((("pgdl", m) in best) && cfrac["pgdl", m] != "")
				printf "%s: core peak fraction = %s\n", m, cfrac["pgdl", m]
			else
				printf "%s: core peak fraction = n/a\n", m
		}
		for (si = 1; si <= 2; si++) {
			m = si == 1 ? "gru" : "attention"
			if ((("pgdl", m) in best) && (("pytorch", m) in best) && best["pytorch", m] > 0)
				printf "%s: pgdl/pytorch = %.2f\n", m, best["pgdl", m] / best["pytorch", m]
			else
				printf "%s: pgdl/pytorch = n/a\n", m
		}
		for (mi = 1; mi <= 3; mi++) {
			m = mi == 1 ? "mlp" : mi == 2 ? "cnn" : "resnet"
			if ((("pgdl", m) in best) && (("pytorch", m) in best) && best["pytorch", m] > 0)
				printf "%s: pgdl/pytorch = %.2f\n", m, best["pgdl", m] / best["pytorch", m]
			else
				printf "%s: pgdl/pytorch = n/a\n", m
		}
		if ((("pgdl", "cnn") in best) && frac["pgdl", "cnn"] != "")
			printf "cnn: peak fraction = %s\n", frac["pgdl", "cnn"]
		else
			printf "cnn: peak fraction = n/a\n"
	}' "$out"
