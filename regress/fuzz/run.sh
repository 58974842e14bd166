#!/usr/bin/env bash
# run.sh [--smoke] BUILD_DIR SECONDS TARGET...: runs each fuzz target for
# SECONDS on its seed corpus (regress/fuzz/corpus/TARGET) plus what earlier runs
# found (BUILD_DIR/corpus/TARGET), prints one line per target with its
# executions, and ends "N passed, N failed" (a target fails on any crash,
# sanitizer report, leak or timeout; the input is kept in BUILD_DIR/artifacts).
# --smoke (CI): starts from the committed seeds alone, and first checks that
# gen_corpus still writes them byte for byte.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
smoke=0
if [ "${1:-}" = --smoke ]; then
	smoke=1
	shift
fi
build=${1:?build dir}
seconds=${2:?seconds}
shift 2

declare -A max_len=([blob]=16384 [spec]=4096 [packed]=4096 [onnx]=16384)
declare -A extra=([spec]="-dict=regress/fuzz/spec.dict")
passed=0
failed=0

found=$build/corpus
if [ "$smoke" = 1 ]; then
	found=$build/smoke-corpus
	rm -rf "$found"
	rm -rf "$build/seeds"
	if "$build/gen_corpus" "$build/seeds" && diff -r "$build/seeds" regress/fuzz/corpus; then
		echo "fuzz corpus: regress/fuzz/corpus is what gen_corpus writes"
		passed=$((passed + 1))
	else
		echo "fuzz corpus: regress/fuzz/corpus differs from what gen_corpus writes (make fuzz-corpus)"
		failed=$((failed + 1))
	fi
fi

for t in "$@"; do
	bin=$build/fuzz_$t
	log=$build/fuzz_$t.log
	mkdir -p "$found/$t" "$build/artifacts"
	start=$SECONDS
	# shellcheck disable=SC2086
	"$bin" "$found/$t" "regress/fuzz/corpus/$t" ${extra[$t]:-} \
		-max_len="${max_len[$t]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" >"$log" 2>&1
	rc=$?
	elapsed=$((SECONDS - start))
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	runs=${runs:-0}
	rate=$((runs / (elapsed > 0 ? elapsed : 1)))
	if [ "$rc" -eq 0 ]; then
		echo "fuzz $t: $runs executions in ${elapsed}s ($rate/s), no crash"
		passed=$((passed + 1))
	else
		echo "fuzz $t: FAILED (exit $rc) after $runs executions in ${elapsed}s; last lines of $log:"
		tail -n 40 "$log"
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
