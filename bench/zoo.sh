#!/bin/bash
# bench/zoo.sh -- the model zoo at scale: one pgdl.similar_models query over 10,000 stored models, for each
# "by" (architecture, data, both), against the same ranking computed by Python over the same rows
# (bench/zoo_reference.py: the rows dumped by psql, then the distances of docs/reference/zoo.md written
# again from their definitions).  The two rankings must agree: the same models, distances within 1e-9.
# Both sides are timed the same way, wall-clock from this shell around everything a user would run: pgdl's
# one psql (start-up, the query, its rows out), the reference's two psql dumps and its Python.
#
# The models: 10,000 rows of pgdl.models with varied specs (MLPs of 1 to 4 hidden layers of 8 to 64 units,
# some with dropout or batchnorm; CNNs of 1 or 2 conv blocks of 4 to 16 filters, 3x3 or 5x5), each on one
# of four small packed datasets (8x8 images in 10 classes, scaled; 20 features in 3 classes, standardized;
# 12 features in 2 classes; 6 features, regression), with a weight blob from pgdl.init_model (one per
# distinct spec, small: the scan never reads it).
#
# Usage: bench/zoo.sh   (make install first; make bench-zoo runs it)
# Environment: a PostgreSQL with pgdl installed given by PGHOST/PGPORT/PGDATABASE, or none (a private
# server is started).  RUNS (default 3), MODELS (default 10000), K (default 10).
# The last lines are always
#   zoo: similar_models over N models = X ms
#   zoo: reference / pgdl = R
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUNS=${RUNS:-3}
MODELS=${MODELS:-10000}
K=${K:-10}

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
pg_private_start
psql() { command psql -qX -v ON_ERROR_STOP=1 "$@"; }
cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
echo "== bench/zoo: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, ${cpu:-unknown CPU}"

psql <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgdl;
DELETE FROM pgdl.models WHERE name LIKE 'bench_zoo_%';
DROP TABLE IF EXISTS bench_zoo_rows, bench_zoo_std_rows, bench_zoo_bin_rows, bench_zoo_reg_rows, bench_zoo_img,
	bench_zoo_std, bench_zoo_bin, bench_zoo_reg CASCADE;
SELECT setseed(0.7);
CREATE TABLE bench_zoo_rows AS
SELECT i, ARRAY(SELECT random()::real FROM generate_series(1, 64 + 0 * i)) AS x, i % 10 AS label
  FROM generate_series(1, 256) i;
CREATE TABLE bench_zoo_std_rows AS SELECT i, x[1:20] AS x, label % 3 AS label FROM bench_zoo_rows;
CREATE TABLE bench_zoo_bin_rows AS SELECT i, x[1:12] AS x, label % 2 AS label FROM bench_zoo_rows;
CREATE TABLE bench_zoo_reg_rows AS SELECT i, x[1:6] AS x, x[7] AS label FROM bench_zoo_rows;
SELECT pgdl.pack('bench_zoo_rows', 'x', 'label', 'bench_zoo_img', buffer_rows => 64, partitions => 1,
                 scale => 1) IS NOT NULL AS packed \gset
SELECT pgdl.pack('bench_zoo_std_rows', 'x', 'label', 'bench_zoo_std', buffer_rows => 64, partitions => 1,
                 standardize => true) IS NOT NULL AS packed \gset
SELECT pgdl.pack('bench_zoo_bin_rows', 'x', 'label', 'bench_zoo_bin', buffer_rows => 64, partitions => 1,
                 scale => 0.5) IS NOT NULL AS packed \gset
SELECT pgdl.pack('bench_zoo_reg_rows', 'x', 'label', 'bench_zoo_reg', buffer_rows => 64, partitions => 1)
       IS NOT NULL AS packed \gset

-- a spec per model: its dataset (i % 4), a kind, depths and widths drawn from i
CREATE TEMP TABLE bench_zoo_specs AS
WITH m AS (
	SELECT i, i % 4 AS ds, (i / 4) % 3 AS kind, 1 + (i / 12) % 4 AS depth, (i / 48) % 4 AS w,
		   (i / 192) % 3 AS extra
	  FROM generate_series(1, $MODELS) i
), layers AS (
	SELECT m.i, m.ds,
		   CASE WHEN m.ds = 0 AND m.kind = 2 THEN
				jsonb_build_array(jsonb_build_object('type', 'conv2d', 'filters', 4 << m.w % 3, 'kernel', 3 + 2 * (m.depth % 2),
													 'padding', m.depth % 2 + 1),
								  jsonb_build_object('type', 'relu'), jsonb_build_object('type', 'maxpool2d', 'size', 2))
				|| CASE WHEN m.depth > 2 THEN jsonb_build_array(
						jsonb_build_object('type', 'conv2d', 'filters', 8 << m.w % 2, 'kernel', 3, 'padding', 1),
						jsonb_build_object('type', 'relu'), jsonb_build_object('type', 'maxpool2d', 'size', 2))
				   ELSE '[]' END
				|| jsonb_build_array(jsonb_build_object('type', 'flatten'))
		   ELSE (SELECT jsonb_agg(l ORDER BY h, o) FROM generate_series(1, m.depth) h,
					LATERAL (VALUES (1, jsonb_build_object('type', 'dense', 'units', 8 << ((m.w + h) % 4))),
									(2, CASE m.kind WHEN 1 THEN jsonb_build_object('type', 'tanh')
											ELSE jsonb_build_object('type', 'relu') END),
									(3, CASE WHEN m.extra = 1 AND h = 1 THEN jsonb_build_object('type', 'dropout', 'rate', 0.1 * (1 + m.w))
											 WHEN m.extra = 2 AND h = 1 THEN jsonb_build_object('type', 'batchnorm') END)) v(o, l)
				  WHERE l IS NOT NULL)
		   END AS body
	  FROM m
)
SELECT l.i, l.ds,
	   pgdl.validate_spec(jsonb_build_object(
		   'input', CASE l.ds WHEN 0 THEN '[1, 8, 8]'::jsonb WHEN 1 THEN '[20]' WHEN 2 THEN '[12]' ELSE '[6]' END,
		   'layers', l.body || jsonb_build_array(jsonb_build_object('type', 'dense',
				'units', CASE l.ds WHEN 0 THEN 10 WHEN 1 THEN 3 WHEN 2 THEN 2 ELSE 1 END)),
		   'loss', CASE l.ds WHEN 3 THEN 'mse' ELSE 'cross_entropy' END)) AS spec
  FROM layers l;
CREATE TEMP TABLE bench_zoo_blobs AS
SELECT spec, pgdl.init_model(spec) AS weights FROM (SELECT DISTINCT spec FROM bench_zoo_specs) s;
INSERT INTO pgdl.models (name, spec, weights, dataset)
SELECT 'bench_zoo_' || s.i, s.spec, b.weights,
	   (SELECT id FROM pgdl.datasets WHERE packed = (ARRAY['bench_zoo_img', 'bench_zoo_std', 'bench_zoo_bin',
																'bench_zoo_reg'])[s.ds + 1]::regclass)
  FROM bench_zoo_specs s JOIN bench_zoo_blobs b USING (spec) ORDER BY s.i;
ANALYZE pgdl.models;
SQL
n=$(psql -At -c "SELECT count(*) FROM pgdl.models")
distinct=$(psql -At -c "SELECT count(DISTINCT spec) FROM pgdl.models")
echo "data: $n models ($distinct distinct specs), 4 datasets; k = $K; best of $RUNS runs"
query=$(psql -At -c "SELECT id FROM pgdl.models WHERE name = 'bench_zoo_1'")

# milliseconds of the best of RUNS runs of statement $1, timed from the shell around one psql that runs
# it and prints its rows: the same work the reference's time counts (a psql start-up, the rows out)
best_sql() {
	local best="" t0 t1 t
	for _ in $(seq "$RUNS"); do
		t0=$(date +%s%N)
		psql -At -F $'\t' -c "$1" >/dev/null
		t1=$(date +%s%N)
		t=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
		if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
	done
	echo "$best"
}

# The reference's input: the query's spec and data, then every model's, as psql reads them.
DATA_SQL="SELECT jsonb_build_object('dataset', d.id, 'regression', d.task = 'regression', 'features', d.n_features,
        'outputs', CASE WHEN d.task = 'regression' THEN d.n_targets ELSE cardinality(d.classes) END,
        'norm', CASE WHEN d.normalization ? 'scale' THEN 'scale' WHEN d.normalization ? 'mean' THEN 'mean_std' END,
        'sigma', coalesce((d.normalization ->> 'scale')::float8,
                          (SELECT avg(v::float8) FROM jsonb_array_elements_text(d.normalization -> 'std') v)),
        'mu', (SELECT avg(v::float8) FROM jsonb_array_elements_text(d.normalization -> 'mean') v)) AS data, d.id
   FROM pgdl.datasets d"
reference() {
	{
		psql -At -F $'\t' -c "WITH dd AS ($DATA_SQL) SELECT m.spec, dd.data FROM pgdl.models m JOIN dd ON dd.id = m.dataset WHERE m.id = $query"
		psql -At -F $'\t' -c "WITH dd AS ($DATA_SQL) SELECT m.id, m.spec, dd.data FROM pgdl.models m JOIN dd ON dd.id = m.dataset"
	} | /usr/bin/python3 "$HERE/zoo_reference.py" "$K" "$1" "$query"
}
best_reference() {
	local best="" t0 t1 t
	for _ in $(seq "$RUNS"); do
		t0=$(date +%s%N)
		reference "$1" >/dev/null
		t1=$(date +%s%N)
		t=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
		if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
	done
	echo "$best"
}

declare -A ms ref
for by in architecture data both; do
	echo "== by $by"
	ms[$by]=$(best_sql "SELECT * FROM pgdl.similar_models($query::bigint, $K, '$by')")
	echo "pgdl.similar_models (psql start-up + query + rows out): ${ms[$by]} ms"
	ref[$by]=$(best_reference "$by")
	echo "reference (psql dump + Python): ${ref[$by]} ms"
	# the same ranking: the same models in the same order, distances within 1e-9
	paste <(psql -At -F $'\t' -c "SELECT model, distance FROM pgdl.similar_models($query::bigint, $K, '$by')") \
		<(reference "$by") | awk -F'\t' -v k="$K" '
		{ n++; if ($1 != $3 || ($2 - $4)^2 > 1e-18) bad = 1 }
		END { if (bad || n != k) { print "RANKINGS DIFFER"; exit 1 } }'
	echo "the same $K models, in the same order, as the reference"
	psql -c "SELECT model, round(distance::numeric, 4) AS distance, reason FROM pgdl.similar_models($query::bigint, 3, '$by')"
done

echo "== summary: $n models, k = $K, best of $RUNS"
for by in architecture data both; do
	echo "by $by: pgdl ${ms[$by]} ms, reference ${ref[$by]} ms"
done
echo "zoo: similar_models over $n models = ${ms[both]} ms"
echo "zoo: reference / pgdl = $(awk -v a="${ref[both]}" -v b="${ms[both]}" 'BEGIN { printf "%.1f", a / b }')"
