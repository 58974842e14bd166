#!/usr/bin/python3
"""Target scaling (pgdl.pack's standardize_target) on scikit-learn's diabetes set.

The diabetes target runs from 25 to 346.  Packed as it is, pgdl.fit's default
configuration (config '{}', 10 epochs) diverges on it; packed with
standardize_target => true (and standardize => true for the features) the same
configuration trains, and on a held-out fifth of the rows (pgdl.split, seed 42)
its R² must be at least 0.3 (scikit-learn's Ridge gets about 0.33).  pgdl.metrics
must be in target units: equal, within 1e-6, to scikit-learn's scores of the
outputs pgdl.predict returns for each held-out row, which are in target units
too; pgdl.evaluate's loss must equal that MSE.  Ends with "N passed, M failed".

Run with PGHOST/PGPORT/PGUSER pointing at a server where pgdl is installed; it
works in a database of its own (pgdl_target), dropped and created again.
"""
import sys

import numpy as np
import psycopg
from sklearn import datasets, linear_model, metrics

TOLERANCE = 1e-6
DATABASE = "pgdl_target"
SPEC = ('{"input": [10], "layers": [{"type": "dense", "units": 32}, {"type": "relu"}, '
        '{"type": "dense", "units": 1}], "loss": "mse"}')

passed = 0
failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what} {detail}")


def close(what, ours, theirs):
    check(what, ours is not None and abs(ours - theirs) <= TOLERANCE * max(1.0, abs(theirs)),
          f"pgdl {ours!r}, scikit-learn {theirs!r}")


def main():
    x, y = datasets.load_diabetes(return_X_y=True)
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        admin.execute(f"CREATE DATABASE {DATABASE}")
    with psycopg.connect(dbname=DATABASE, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute("CREATE EXTENSION pgdl")
        conn.execute("CREATE TABLE diabetes (id integer, x double precision[], target double precision)")
        with conn.cursor().copy("COPY diabetes FROM STDIN") as copy:
            for i, (xi, yi) in enumerate(zip(x, y)):
                copy.write_row((i, [float(v) for v in xi], float(yi)))
        parts = dict(conn.execute("SELECT part, n_rows FROM pgdl.split('diabetes', 'db', validation => 0.2)").fetchall())
        check("split: 80% train, 20% validation", parts == {"train": 354, "validation": 88}, str(parts))

        # as it is: the default configuration diverges (what target scaling is for)
        conn.execute("SELECT pgdl.pack('db_train', 'x', 'target', 'db_raw', buffer_rows => 32, standardize => true)")
        raw = conn.execute(f"SELECT pgdl.fit('db_raw', '{SPEC}'::jsonb)").fetchone()[0]
        try:
            conn.execute(f"SELECT * FROM pgdl.evaluate({raw}, 'db_raw')")
            print("unscaled targets: the default configuration trained")
        except psycopg.Error as e:
            print(f"unscaled targets: {e.sqlstate} {str(e).splitlines()[0]}")

        conn.execute("SELECT pgdl.pack('db_train', 'x', 'target', 'db_train_p', buffer_rows => 32, standardize => true, "
                     "standardize_target => true)")
        conn.execute("SELECT pgdl.pack('db_validation', 'x', 'target', 'db_validation_p', partitions => 1, "
                     "reference => 'db_train_p')")
        model = conn.execute(f"SELECT pgdl.fit('db_train_p', '{SPEC}'::jsonb)").fetchone()[0]
        ours = {m: v for m, v in conn.execute(f"SELECT metric, value FROM pgdl.metrics({model}, 'db_validation_p') "
                                              "WHERE class IS NULL AND average IS NULL")}
        rows = conn.execute(f"SELECT target, (pgdl.predict({model}, x))[1] FROM db_validation ORDER BY id").fetchall()
        t = np.array([r[0] for r in rows], dtype=np.float32).astype(np.float64)
        p = np.array([r[1] for r in rows], dtype=np.float64)
        r2 = metrics.r2_score(t, p)
        print(f"standardized targets: R² {ours.get('r2')!r} on the held-out split")
        check("diabetes with the default configuration: R² >= 0.3", ours.get("r2", 0) >= 0.3, f"R² {ours.get('r2')}")
        check("predictions are in target units", 25 <= float(np.median(p)) <= 346, f"median {np.median(p)}")
        close("r2 of predict's outputs", ours.get("r2"), r2)
        close("mse of predict's outputs", ours.get("mse"), metrics.mean_squared_error(t, p))
        close("mae of predict's outputs", ours.get("mae"), metrics.mean_absolute_error(t, p))
        close("rmse of predict's outputs", ours.get("rmse"), metrics.mean_squared_error(t, p, squared=False))
        loss = conn.execute(f"SELECT loss FROM pgdl.evaluate({model}, 'db_validation_p')").fetchone()[0]
        close("evaluate's loss is the mse in target units", loss, metrics.mean_squared_error(t, p))
        raw_rows = {m: v for m, v in conn.execute(f"SELECT metric, value FROM pgdl.metrics({model}, "
                                                  "'db_validation', 'x', 'target') WHERE class IS NULL")}
        check("metrics over the raw rows equal the referenced pack's", raw_rows == ours, f"{raw_rows} against {ours}")

        train = conn.execute("SELECT x, target FROM db_train").fetchall()
        ridge = linear_model.Ridge().fit(np.array([r[0] for r in train]), np.array([r[1] for r in train]))
        held = conn.execute("SELECT x, target FROM db_validation ORDER BY id").fetchall()
        print("scikit-learn's Ridge on the same split: R² %.3f" %
              ridge.score(np.array([r[0] for r in held]), np.array([r[1] for r in held])))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
