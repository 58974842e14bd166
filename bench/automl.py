#!/usr/bin/python3
"""bench/automl.py -- pgdl.automl under a 60-second budget against a fixed default MLP.

On each of scikit-learn's four bundled sets (digits, breast cancer, wine, diabetes), for seeds 0, 1, 2:
the rows are split 80/20 by pgdl.split (stratified by the class for the classifiers, seeded); the 80%
go to
  - automl: CALL pgdl.automl(train, 'label', budget => BUDGET, seed => seed), which splits them again to
    rank its models and keeps the best;
  - the baseline: one hidden layer of 64 (ReLU), Adam with its defaults (lr 0.001, batch 128), 30 epochs,
    seed `seed`, on the same rows packed with the same preprocessing (standardized features, and for
    diabetes standardized targets);
and both are scored on the same 20% held out, raw rows through pgdl.metrics: accuracy for the three
classifiers, R² for diabetes (both higher is better).  The median of the three seeds is compared.

Target (issue 37): automl better on at least 3 of the 4 sets, never worse by more than 0.01.  Also checked:
every automl call ends within its budget plus 10%.

Usage: bench/automl.sh (make bench-automl), about 14 minutes.  Environment: PGHOST/PGPORT/PGDATABASE of a
server with pgdl installed (bench/automl.sh starts a private one); BUDGET seconds (default 60), SEEDS
(default 0,1,2), SETS (default digits,breast_cancer,wine,diabetes).
The last lines are the table and
  automl: better on N of 4 sets, worst difference D: PASS|FAIL
"""

import os
import statistics
import sys
import time

import psycopg
from sklearn import datasets

BUDGET = int(os.environ.get("BUDGET", "60"))
SEEDS = [int(s) for s in os.environ.get("SEEDS", "0,1,2").split(",")]
SETS = os.environ.get("SETS", "digits,breast_cancer,wine,diabetes").split(",")
LOADERS = {"digits": datasets.load_digits, "breast_cancer": datasets.load_breast_cancer,
           "wine": datasets.load_wine, "diabetes": datasets.load_diabetes}
BASELINE = {"optimizer": "adam", "lr": 0.001, "batch_size": 128}


def load(conn, name):
    d = LOADERS[name]()
    regression = name == "diabetes"
    table = f"bench_{name}"
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (features real[], label {'double precision' if regression else 'integer'})")
    with conn.cursor().copy(f"COPY {table} FROM STDIN") as cp:
        for x, y in zip(d.data, d.target):
            cp.write_row(([float(v) for v in x], float(y) if regression else int(y)))
    return table, regression, d.data.shape[1], (0 if regression else len(set(d.target)))


def test_metric(conn, model, test, regression):
    metric = "r2" if regression else "accuracy"
    return conn.execute("SELECT value FROM pgdl.metrics(%s::bigint, %s, 'features', 'label') "
                        "WHERE metric = %s AND average IS NULL AND class IS NULL",
                        (model, test, metric)).fetchone()[0]


def baseline(conn, train, test, regression, n_features, n_classes, seed):
    packed = f"{train}_base"
    conn.execute("SELECT pgdl.pack(%s, 'features', 'label', %s, partitions => 1, seed => %s, standardize => true, "
                 "standardize_target => %s)", (train, packed, seed, regression))
    spec = {"input": [n_features], "loss": "mse" if regression else "cross_entropy",
            "layers": [{"type": "dense", "units": 64}, {"type": "relu"},
                       {"type": "dense", "units": 1 if regression else n_classes}]}
    config = dict(BASELINE, seed=seed)
    model = conn.execute("SELECT pgdl.fit(%s, %s::jsonb, %s::jsonb, 30)",
                         (packed, psycopg.types.json.Jsonb(spec), psycopg.types.json.Jsonb(config))).fetchone()[0]
    return test_metric(conn, model, test, regression)


def automl(conn, train, test, regression, seed):
    started = time.monotonic()
    row = conn.execute("CALL pgdl.automl(%s, 'label', features => 'features', budget => %s::interval, seed => %s)",
                       (train, f"{BUDGET} seconds", seed)).fetchone()
    took = time.monotonic() - started
    leaderboard, model = row[0], row[1]
    best = conn.execute(f"SELECT kind, epochs, (SELECT count(*) FROM {leaderboard}) FROM {leaderboard} WHERE rank = 1").fetchone()
    return test_metric(conn, model, test, regression), took, best


def main():
    conn = psycopg.connect(autocommit=True)
    conn.execute("SET client_min_messages = warning")
    print(f"load average at start: {os.getloadavg()}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')}",
          f"pgdl.max_workers={conn.execute('SELECT pgdl.version() IS NOT NULL, current_setting(%s)', ('pgdl.max_workers',)).fetchone()[1]}")
    results = {}
    overruns = []
    for name in SETS:
        table, regression, n_features, n_classes = load(conn, name)
        for seed in SEEDS:
            prefix = f"bench_{name}_{seed}"
            for suffix in ("train", "validation"):
                conn.execute(f"DROP TABLE IF EXISTS {prefix}_{suffix} CASCADE")
            conn.execute("SELECT * FROM pgdl.split(%s, %s, validation => 0.2, seed => %s, stratify => %s)",
                         (table, prefix, seed, None if regression else "label"))
            train, test = f"{prefix}_train", f"{prefix}_validation"
            base = baseline(conn, train, test, regression, n_features, n_classes, seed)
            auto, took, best = automl(conn, train, test, regression, seed)
            if took > BUDGET * 1.1:
                overruns.append(f"{name} seed {seed}: {took:.1f} s")
            results.setdefault(name, []).append((base, auto))
            print(f"{name} seed {seed}: baseline {base:.4f}  automl {auto:.4f}  ({took:.1f} s, "
                  f"best {best[0]} of {best[2]} models, {best[1]} epochs)", flush=True)
    print(f"load average at end: {os.getloadavg()}")
    print(f"{'set':<14} {'metric':<9} {'baseline':>9} {'automl':>9} {'difference':>11}")
    better = 0
    worst = None
    for name, pairs in results.items():
        b = statistics.median(p[0] for p in pairs)
        a = statistics.median(p[1] for p in pairs)
        better += a > b
        worst = a - b if worst is None else min(worst, a - b)
        print(f"{name:<14} {'r2' if name == 'diabetes' else 'accuracy':<9} {b:>9.4f} {a:>9.4f} {a - b:>+11.4f}")
    if overruns:
        print("over the budget by more than 10%: " + ", ".join(overruns))
    ok = better >= min(3, len(results)) and worst >= -0.01 and not overruns
    print(f"automl: better on {better} of {len(results)} sets, worst difference {worst:+.4f}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
