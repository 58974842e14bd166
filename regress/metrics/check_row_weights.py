#!/usr/bin/python3
"""Per-row weights (pgdl.pack's weight => col) against PyTorch's per-sample weighted loss.

A small classifier and a small regressor are trained by pgdl.fit for two epochs
on tables packed with weight => 'w' (one partition, so that the buffers are
read in buffer_id order), and by PyTorch on the same buffers read back from the
packed table, from the same initial parameters (pgdl.init_model with the same
configuration), each step's loss (w * l).sum() / w.sum() with plain SGD.  Every
parameter must agree within 1e-5.  The same steps without the weights must not
(the check can fail).  Ends with "N passed, M failed".

Run with PGHOST/PGPORT/PGUSER pointing at a server where pgdl is installed; it
works in a database of its own (pgdl_row_weights), dropped and created again.
"""
import sys

import numpy as np
import psycopg
import torch

TOLERANCE = 1e-5
DATABASE = "pgdl_row_weights"
CASES = [
    ("classification", "label",
     '{"input": [4], "layers": [{"type": "dense", "units": 8}, {"type": "relu"}, {"type": "dense", "units": 3}]}'),
    ("regression", "target",
     '{"input": [4], "layers": [{"type": "dense", "units": 8}, {"type": "relu"}, {"type": "dense", "units": 1}], '
     '"loss": "mse"}'),
]
CONFIG = '{"lr": 0.05, "batch_size": 8, "seed": 7}'
EPOCHS = 2

passed = 0
failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what} {detail}")


def params(conn, sql, arg):
    rows = conn.execute(f"SELECT shape, \"values\" FROM pgdl.model_weights({sql}) ORDER BY layer, name DESC", (arg,)).fetchall()
    # dense layers: weight [units, in] then bias ("weight" > "bias" in DESC order)
    return [torch.tensor(np.array(v, dtype=np.float32).reshape(s)) for s, v in rows]


def torch_steps(init, buffers, classification, weighted):
    w1, b1, w2, b2 = [p.clone().double().requires_grad_(True) for p in init]
    opt = torch.optim.SGD([w1, b1, w2, b2], lr=0.05)
    for _ in range(EPOCHS):
        for x, y, w in buffers:
            for s in range(0, len(w), 8):
                xb = torch.tensor(x[s:s + 8], dtype=torch.float64)
                wb = torch.tensor(w[s:s + 8], dtype=torch.float64)
                z = torch.relu(xb @ w1.T + b1) @ w2.T + b2
                if classification:
                    l = torch.nn.functional.cross_entropy(z, torch.tensor(y[s:s + 8], dtype=torch.long), reduction="none")
                else:
                    l = ((z[:, 0] - torch.tensor(y[s:s + 8], dtype=torch.float64)) ** 2)
                loss = (wb * l).sum() / wb.sum() if weighted else l.mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
    return [p.detach().float() for p in (w1, b1, w2, b2)]


def main():
    rng = np.random.default_rng(5)
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        admin.execute(f"CREATE DATABASE {DATABASE}")
    with psycopg.connect(dbname=DATABASE, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute("CREATE EXTENSION pgdl")
        conn.execute("CREATE TABLE rows (x real[], label integer, target real, w double precision)")
        with conn.cursor().copy("COPY rows FROM STDIN") as copy:
            for _ in range(96):
                x = rng.normal(size=4).astype(np.float32)
                copy.write_row(([float(v) for v in x], int(rng.integers(0, 3)), float(x[0] - 2 * x[1]),
                                float(rng.choice([0.0, 0.5, 1.0, 3.0]))))
        for task, label, spec in CASES:
            packed = f"packed_{task}"
            conn.execute(f"SELECT pgdl.pack('rows', 'x', %s, %s, buffer_rows => 16, partitions => 1, weight => 'w')",
                         (label, packed))
            buffers = [(np.array(x, dtype=np.float32).reshape(n, 4), np.array(y, dtype=np.float32),
                        np.array(w, dtype=np.float32))
                       for n, x, y, w in conn.execute(f"SELECT n, x, y, w FROM {packed} ORDER BY buffer_id")]
            init = params(conn, "pgdl.init_model(%s::jsonb, '" + CONFIG + "')", spec)
            conn.execute("SELECT pgdl.add_architecture(%s, %s::jsonb)", (f"arch_{task}", spec))
            model = conn.execute(f"SELECT pgdl.fit(%s::regclass, %s, %s::jsonb, {EPOCHS})",
                                 (packed, f"arch_{task}", CONFIG)).fetchone()[0]
            ours = params(conn, "%s::bigint", model)
            theirs = torch_steps(init, buffers, task == "classification", True)
            worst = max(float((a - b).abs().max()) for a, b in zip(ours, theirs))
            check(f"{task}: pgdl.fit equals PyTorch's weighted steps", worst <= TOLERANCE, f"max difference {worst:g}")
            unweighted = torch_steps(init, buffers, task == "classification", False)
            apart = max(float((a - b).abs().max()) for a, b in zip(ours, unweighted))
            check(f"{task}: and not its unweighted steps", apart > 100 * TOLERANCE, f"max difference {apart:g}")
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
