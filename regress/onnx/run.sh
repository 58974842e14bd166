#!/usr/bin/env bash
# ONNX in and out (docs/reference/onnx.md): runs every regress/onnx/test_*.py against the server in
# PGHOST/PGPORT/PGUSER (a superuser), each in a database of its own, and ends with "N passed, N failed".
# Each test prints "ok - ..." / "not ok - ..." lines and ends with its own "N passed, N failed"; a test
# that exits non-zero without counting a failure counts one.
#
# onnxruntime-node (npm, the independent runtime) is installed into regress/onnx/node_modules from the
# committed package-lock.json when a test needs it (ONNXRUNTIME_NODE_INSTALL_CUDA=skip: nothing is
# downloaded by its install step).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
passed=0
failed=0
skipped=0
for t in test_*.py; do
	[ -e "$t" ] || continue
	db=pgdl_onnx_${t%.py}
	dropdb --if-exists "$db" >/dev/null 2>&1
	createdb "$db"
	log=$(mktemp)
	PGDATABASE=$db timeout 600 /usr/bin/python3 "$t" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -n 1)
	if [ -n "$line" ]; then
		passed=$((passed + ${line%% *}))
		f=${line#*, }
		failed=$((failed + ${f%% *}))
		k=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1 | sed -E 's/.*, ([0-9]+) skipped$/\1/')
		skipped=$((skipped + ${k:-0}))
	else
		echo "not ok - $t ended without its count"
		failed=$((failed + 1))
	fi
	# its exit status is part of its verdict: a script that counted no failure but exited non-zero failed
	if [ "$rc" -ne 0 ] && [ -n "$line" ] && [ "${f%% *}" -eq 0 ]; then
		echo "not ok - $t exited with $rc"
		failed=$((failed + 1))
	fi
	rm -f "$log"
	dropdb --if-exists "$db" >/dev/null 2>&1
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
