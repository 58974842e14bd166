#!/bin/bash
# bench/fused.sh -- many small models at once: 8 configurations of one small MLP
# (64-128-10: 2 optimizers x 4 learning rates, one batch size and seed) on a few
# thousand rows, pgdl.fit_multiple with pgdl.fuse_models on (the 8 train as one
# fused unit: one hop, one pass over each partition's buffers, each member's
# steps on them) and off (8 units, as before), in one run; the stored models are
# compared byte for byte.
#
# Usage: bench/fused.sh   (make install first; make bench-fused runs it)
# Environment: a PostgreSQL with pgdl installed given by PGHOST/PGPORT/PGDATABASE,
# or none (a private server is started).  ROWS (default 4000), EPOCHS (default
# 20), WORKERS (default 1), REPEAT (default 5: each setting's best time).
# The last line is always
#   fused: 8 small mlps fused / separate = F        (separate seconds / fused seconds)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROWS=${ROWS:-4000}
EPOCHS=${EPOCHS:-20}
WORKERS=${WORKERS:-1}
REPEAT=${REPEAT:-5}
SET=bench_fused

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
pg_private_start
psql() { command psql -qX -v ON_ERROR_STOP=1 "$@"; }
cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
echo "== bench/fused: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, ${cpu:-unknown CPU}"
echo "data: $ROWS training rows of 64 features, 10 classes, 1000 validation rows; $EPOCHS epochs, $WORKERS worker(s)"

psql <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgdl;
DELETE FROM pgdl.models WHERE run IN (SELECT id FROM pgdl.runs WHERE config->>'set' = '$SET');
DELETE FROM pgdl.runs WHERE config->>'set' = '$SET';
DELETE FROM pgdl.configs WHERE set_name = '$SET';
DELETE FROM pgdl.architectures WHERE name = 'fused_mlp';
DROP TABLE IF EXISTS bench_fused_rows, bench_fused_t, bench_fused_v, bench_fused_train, bench_fused_valid, bench_fused_on, bench_fused_off;
-- 64 features from sin(); the class is a bucket of a sum of a few of them
CREATE TABLE bench_fused_rows AS
SELECT i, x, least(greatest(floor((x[1] + x[2] - x[3] + x[4] * x[5]) * 2.5 + 5)::int, 0), 9) AS label
  FROM (SELECT i, array_agg(sin(i * (j + 0.5) * 0.731 + j * j)::real ORDER BY j) AS x
          FROM generate_series(1, $ROWS + 1000) i, generate_series(1, 64) j GROUP BY i) s;
CREATE TABLE bench_fused_t AS SELECT * FROM bench_fused_rows WHERE i <= $ROWS;
CREATE TABLE bench_fused_v AS SELECT * FROM bench_fused_rows WHERE i > $ROWS;
SELECT pgdl.pack('bench_fused_t', 'x', 'label', 'bench_fused_train',
                 buffer_rows => 100, partitions => 4, seed => 42) IS NOT NULL AS packed \gset
SELECT pgdl.pack('bench_fused_v', 'x', 'label', 'bench_fused_valid',
                 buffer_rows => 100, partitions => 1, reference => 'bench_fused_train') IS NOT NULL AS packed \gset
SELECT pgdl.add_architecture('fused_mlp', '{"input": [64], "layers": [
  {"type": "dense", "units": 128}, {"type": "relu"}, {"type": "dense", "units": 10}], "loss": "cross_entropy"}') IS NOT NULL AS mlp \gset
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT '$SET', a.id,
       CASE o.optimizer
         WHEN 'sgd' THEN jsonb_build_object('optimizer', 'sgd', 'lr', o.lr, 'momentum', 0.9, 'batch_size', 32, 'seed', 42)
         ELSE jsonb_build_object('optimizer', 'adam', 'lr', o.lr, 'batch_size', 32, 'seed', 42)
       END
  FROM pgdl.architectures a,
       (VALUES ('sgd', 0.005), ('sgd', 0.01), ('sgd', 0.03), ('sgd', 0.1),
               ('adam', 0.0003), ('adam', 0.001), ('adam', 0.003), ('adam', 0.01)) o (optimizer, lr)
 WHERE a.name = 'fused_mlp' ORDER BY o.optimizer DESC, o.lr;
SQL

# fit_multiple with pgdl.fuse_models = $1 into table bench_fused_$1 (config, digest); prints the seconds
fit() {
	psql -At <<SQL
SET client_min_messages = warning;
SET pgdl.fuse_models = $1;
DROP TABLE IF EXISTS bench_fused_$1;
SELECT clock_timestamp() AS t0 \gset
CREATE TABLE bench_fused_$1 AS
SELECT config, validation_accuracy, model FROM pgdl.fit_multiple('bench_fused_train', '$SET', epochs => $EPOCHS,
                                validation => 'bench_fused_valid', workers => $WORKERS);
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 3);
SQL
}

declare -A best
for r in $(seq 1 "$REPEAT"); do
	for setting in off on; do
		s=$(fit $setting)
		echo "fit_multiple pgdl.fuse_models = $setting (pass $r): $s s"
		if [ -z "${best[$setting]:-}" ] || awk -v a="$s" -v b="${best[$setting]}" 'BEGIN { exit !(a < b) }'; then
			best[$setting]=$s
		fi
	done
done
psql -P footer=off -c "SELECT config, round(validation_accuracy::numeric, 4) AS val_acc FROM bench_fused_on ORDER BY config"
same=$(psql -Atc "SELECT count(*) FROM bench_fused_on a JOIN bench_fused_off b USING (config)
                   JOIN pgdl.models ma ON ma.id = a.model JOIN pgdl.models mb ON mb.id = b.model
                  WHERE ma.weights = mb.weights")
n=$(psql -Atc "SELECT count(*) FROM bench_fused_on")
echo "models identical fused and separate (stored weights byte for byte): $same of $n"
[ "$same" = "$n" ] || { echo "fused models differ from separate ones" >&2; exit 1; }
echo "best of $REPEAT: separate ${best[off]} s, fused ${best[on]} s"
echo "fused: 8 small mlps fused / separate = $(awk -v a="${best[off]}" -v b="${best[on]}" 'BEGIN { printf "%.2f", a / b }')"
