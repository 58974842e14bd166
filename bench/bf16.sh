#!/bin/bash
# bench/bf16.sh -- the reference MLP (784-512-256-10, SGD momentum 0.9, batch 128, one thread, Fashion-MNIST)
# trained by pgdl's engine in fp32 and in "precision": "bf16" (the dense layers' products in bf16 on
# AVX512_BF16, fp32 sums and master weights), and by PyTorch in fp32 and under torch.autocast bf16, in one
# invocation.
#
# Usage: bench/bf16.sh PATH_TO_engine_bench [--epochs N] [--limit N]
#   environment: ROUNDS (default 3: each side and precision in turn, the best images/s counts),
#   PYTHON (default /usr/bin/python3; no torch: PyTorch's lines are left out), FMNIST_DIR.
#
# The last line is always
#   bf16: mlp bf16/fp32 = Z
# Z the ratio of pgdl's training images/s in bf16 over fp32 (n/a where the CPU lacks AVX512_BF16), after
# a table of images/s and test accuracy for each side and precision.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -x "$1" ]; then
	echo "usage: $0 PATH_TO_engine_bench [--epochs N] [--limit N]" >&2
	exit 2
fi
BIN=$1
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
ROUNDS=${ROUNDS:-3}

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
echo "== bench/bf16: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, ${cpu:-unknown CPU}, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset}, one thread, rounds=$ROUNDS"
torch=yes
"$PYTHON" -c 'import torch' 2>/dev/null || torch=no

out=$(mktemp)
trap 'rm -f "$out"' EXIT

for ((r = 1; r <= ROUNDS; r++)); do
	for p in fp32 bf16; do
		echo "-- round $r: pgdl $p"
		# a CPU without AVX512_BF16 refuses bf16: the engine's error, and no line
		"$BIN" --model mlp --no-peak --precision "$p" "$@" | tee -a "$out" || echo "(pgdl $p refused)"
		if [ "$torch" = yes ]; then
			echo "-- round $r: pytorch $p"
			"$PYTHON" "$HERE/engine_torch.py" --model mlp --precision "$p" "$@" | tee -a "$out"
		fi
	done
done

echo "== summary (best images/s of $ROUNDS rounds)"
awk '
	function val(key,    i) {
		for (i = 3; i <= NF; i++)
			if (index($i, key "=") == 1)
				return substr($i, length(key) + 2)
		return ""
	}
	($1 == "pgdl" || $1 == "pytorch") && $2 == "mlp" {
		k = $1 SUBSEP val("precision")
		ips = val("images_per_s") + 0
		if (!(k in best) || ips > best[k]) {
			best[k] = ips
			acc[k] = val("test_acc")
		}
	}
	END {
		printf "%-8s %-6s %12s %9s\n", "side", "prec", "images/s", "test_acc"
		for (si = 1; si <= 2; si++)
			for (pi = 1; pi <= 2; pi++) {
				s = si == 1 ? "pgdl" : "pytorch"
				p = pi == 1 ? "fp32" : "bf16"
				if ((s, p) in best)
					printf "%-8s %-6s %12.0f %9s\n", s, p, best[s, p], acc[s, p]
			}
		if ((("pytorch", "bf16") in best) && best["pytorch", "fp32"] > 0)
			printf "pytorch autocast: mlp bf16/fp32 = %.2f\n", best["pytorch", "bf16"] / best["pytorch", "fp32"]
		if ((("pgdl", "bf16") in best) && best["pgdl", "fp32"] > 0)
			printf "bf16: mlp bf16/fp32 = %.2f\n", best["pgdl", "bf16"] / best["pgdl", "fp32"]
		else
			print "bf16: mlp bf16/fp32 = n/a"
	}' "$out"
