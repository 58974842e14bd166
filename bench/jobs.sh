#!/bin/bash
# bench/jobs.sh -- two users' model selections on one server: the server's queue
# of pgdl workers (src/hopper/jobs.c) with pgdl.max_workers = 2.
#
# Two roles each own a set of 8 configurations of the reference MLP (4 learning
# rates x 2 batch sizes, sgd with momentum 0.9, seed 42) over the same packed
# Fashion-MNIST table (128-row buffers, 4 partitions, scale 1/255).  The two
# selections run one after the other (each pgdl.fit_multiple with workers => 2),
# then are submitted together from two sessions.  Each one's models must be the
# same, bit for bit, in both runs.
#
# Usage: bench/jobs.sh   (make install first; make bench-jobs runs it)
# Environment: a PostgreSQL with pgdl installed given by PGHOST/PGPORT/PGDATABASE
# (its pgdl.max_workers is set to 2 with ALTER SYSTEM), or none (a private server
# is started; KEEP_PG=1 keeps it).  EPOCHS (default 1), LIMIT (default 20000
# training images; 0 = all 60,000).
# The last lines are always
#   jobs: sequential / shared = X     (the two one after the other / both submitted together)
#   jobs: fairness = Y                (the later of the two completion times / the earlier, together)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EPOCHS=${EPOCHS:-1}
LIMIT=${LIMIT:-20000}

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
bench_start jobs
echo "data: $n_train training images ($train), $EPOCHS epoch(s), 2 roles x 8 configurations"

psql <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgdl;
ALTER SYSTEM SET pgdl.max_workers = 2;
SELECT pg_reload_conf();
DROP TABLE IF EXISTS bench_jobs_train, jobs_lb_seq_u1, jobs_lb_seq_u2, jobs_lb_par_u1, jobs_lb_par_u2;
DO \$\$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_jobs_u1') THEN CREATE ROLE bench_jobs_u1 LOGIN; END IF;
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_jobs_u2') THEN CREATE ROLE bench_jobs_u2 LOGIN; END IF;
END
\$\$;
GRANT CREATE ON SCHEMA public TO bench_jobs_u1, bench_jobs_u2;
SELECT pgdl.pack('$train', 'image', 'label', 'bench_jobs_train',
                 buffer_rows => 128, partitions => 4, seed => 42, scale => 1 / 255.0) IS NOT NULL AS packed \gset
GRANT SELECT ON bench_jobs_train TO bench_jobs_u1, bench_jobs_u2;
SQL

for u in u1 u2; do
	psql <<SQL
SET ROLE bench_jobs_$u;
DELETE FROM pgdl.configs WHERE set_name = 'jobs_$u';
DELETE FROM pgdl.architectures WHERE name = 'jobs_mlp_$u';
SELECT pgdl.add_architecture('jobs_mlp_$u', '{"input": [784], "layers": [
  {"type": "dense", "units": 512}, {"type": "relu"},
  {"type": "dense", "units": 256}, {"type": "relu"},
  {"type": "dense", "units": 10}], "loss": "cross_entropy"}') IS NOT NULL AS mlp \gset
SELECT pgdl.grid_search('jobs_$u', '{jobs_mlp_$u}',
       '{"optimizer": "sgd", "momentum": 0.9, "lr": [0.005, 0.01, 0.02, 0.05], "batch_size": [64, 128], "seed": 42}')
       IS NOT NULL AS filled \gset
SQL
done

# fit USER TABLE: one selection as USER, its leaderboard into TABLE; prints the epoch second it ended at
fit() {
	psql -At <<SQL
SET client_min_messages = warning;
SET ROLE bench_jobs_$1;
CREATE TABLE $2 AS SELECT * FROM pgdl.fit_multiple('bench_jobs_train', 'jobs_$1', epochs => $EPOCHS, workers => 2);
SELECT extract(epoch FROM clock_timestamp());
SQL
}
digests() {
	psql -Atc "SELECT string_agg(l.config || ':' || md5(m.weights), ' ' ORDER BY l.config)
	             FROM $1 l JOIN pgdl.models m ON m.id = l.model"
}
now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }

echo "== one after the other"
t0=$(now)
e1=$(fit u1 jobs_lb_seq_u1)
e2=$(fit u2 jobs_lb_seq_u2)
seq_s=$(sub "$e2" "$t0")
echo "u1 ended after $(sub "$e1" "$t0") s, u2 after $seq_s s"

echo "== submitted together"
out1=$(mktemp) out2=$(mktemp)
t0=$(now)
fit u1 jobs_lb_par_u1 >"$out1" &
p1=$!
fit u2 jobs_lb_par_u2 >"$out2" &
p2=$!
wait "$p1" "$p2"
c1=$(sub "$(cat "$out1")" "$t0")
c2=$(sub "$(cat "$out2")" "$t0")
rm -f "$out1" "$out2"
par_s=$(awk -v a="$c1" -v b="$c2" 'BEGIN { printf "%.2f", (a > b ? a : b) }')
echo "u1 ended after $c1 s, u2 after $c2 s"

for u in u1 u2; do
	if [ "$(digests "jobs_lb_seq_$u")" != "$(digests "jobs_lb_par_$u")" ]; then
		echo "jobs: $u's models differ between the two runs"
		exit 1
	fi
done
echo "each role's 8 models are the same, bit for bit, alone and together"

echo "jobs: sequential / shared = $(awk -v a="$seq_s" -v b="$par_s" 'BEGIN { printf "%.2f", a / b }')"
echo "jobs: fairness = $(awk -v a="$c1" -v b="$c2" 'BEGIN { hi = (a > b ? a : b); lo = (a > b ? b : a); printf "%.2f", hi / lo }')"
