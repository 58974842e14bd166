#!/usr/bin/python3
"""RMSprop, Adagrad and the huber loss against PyTorch, step for step.

The same small networks start from the same weights (PyTorch's seeded
initialization, loaded into pgdl with pgdl.model_from_weights) and take the
same minibatches in the same order: in pgdl through the pgdl.train aggregate
with a configuration, in PyTorch with torch.optim.RMSprop / Adagrad / Adam and
nn.CrossEntropyLoss or nn.HuberLoss(delta).  After every run each parameter of
pgdl.model_weights equals PyTorch's within 1e-5 (float32 both, one thread):
  - rmsprop (PyTorch's defaults but lr), rmsprop centered with momentum and
    weight decay, adagrad with lr_decay, initial_accumulator_value and weight
    decay, on a cross_entropy classifier;
  - the huber loss (delta 0.7, errors on both sides of it) with rmsprop, adagrad
    and adam, on a regressor of two outputs;
and a run cut in two (the first half's blob, stored and read back, trained on
with the second half's batches, as a checkpoint is resumed) gives the bytes of
the run in one piece.

Run with PGHOST/PGPORT/PGUSER pointing at a server where pgdl is installed; it
works in a database of its own (pgdl_optimizers), dropped and created again.
Prints a line per failed check and ends with "N passed, M failed".
"""
import json
import sys

import numpy as np
import psycopg
import torch

DATABASE = "pgdl_optimizers"
TOL = 1e-5
STEPS = 8
BATCH = 16
FEATURES = 6

passed = 0
failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what} {detail}")


def network(outputs, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, outputs))


def spec_of(outputs, loss, delta=None):
    spec = {"input": [FEATURES], "layers": [{"type": "dense", "units": 16}, {"type": "tanh"},
                                            {"type": "dense", "units": outputs}], "loss": loss}
    if delta is not None:
        spec["delta"] = delta
    return spec


def params_of(net):
    """pgdl's one parameter array: each layer's weight (row-major [out, in]) then its bias, as state_dict."""
    return np.concatenate([p.detach().numpy().ravel() for p in net.parameters()]).astype(np.float32)


def batches(outputs, regression, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(STEPS):
        x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
        if regression:
            # targets far from the untrained outputs too: errors past delta as well as within it
            y = (rng.normal(size=(BATCH, outputs)) * 1.5).astype(np.float32)
        else:
            y = rng.integers(0, outputs, size=BATCH).astype(np.float32)
        out.append((x, y))
    return out


def torch_run(net, optimizer, loss_fn, data, regression):
    for x, y in data:
        optimizer.zero_grad()
        z = net(torch.from_numpy(x))
        target = torch.from_numpy(y) if regression else torch.from_numpy(y).long()
        loss_fn(z, target).backward()
        optimizer.step()
    return params_of(net)


def pgdl_train(conn, blob, config, data):
    """The pgdl.train aggregate over data's batches in order, from blob; the new blob."""
    conn.execute("TRUNCATE batches")
    with conn.cursor() as cur:
        for k, (x, y) in enumerate(data):
            cur.execute("INSERT INTO batches VALUES (%s, %s::real[], %s::real[], %s)",
                        (k, x.ravel().tolist(), y.ravel().tolist(), len(x)))
    return conn.execute("SELECT pgdl.train(x, y, n, %s::bytea, %s::jsonb ORDER BY k) FROM batches",
                        (blob, json.dumps(config))).fetchone()[0]


def pgdl_params(conn, blob):
    rows = conn.execute('SELECT "values" FROM pgdl.model_weights(%s::bytea) ORDER BY layer, name DESC',
                        (blob,)).fetchall()
    return np.concatenate([np.array(r[0], dtype=np.float32) for r in rows])


def torch_optimizer(config, params):
    kind = config["optimizer"]
    lr = config["lr"]
    wd = config.get("weight_decay", 0.0)
    if kind == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, alpha=config.get("alpha", 0.99), eps=config.get("eps", 1e-8),
                                   weight_decay=wd, momentum=config.get("momentum", 0.0),
                                   centered=config.get("centered", False))
    if kind == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, lr_decay=config.get("lr_decay", 0.0), weight_decay=wd,
                                   initial_accumulator_value=config.get("initial_accumulator_value", 0.0),
                                   eps=config.get("eps", 1e-10))
    return torch.optim.Adam(params, lr=lr, weight_decay=wd)


def case(conn, name, config, outputs, loss, delta=None, seed=0):
    regression = loss == "huber"
    net = network(outputs, seed)
    spec = spec_of(outputs, loss, delta)
    start = conn.execute("SELECT pgdl.model_from_weights(%s::jsonb, %s::real[])",
                         (json.dumps(spec), params_of(net).tolist())).fetchone()[0]
    data = batches(outputs, regression, seed + 100)
    loss_fn = torch.nn.HuberLoss(delta=delta) if regression else torch.nn.CrossEntropyLoss()
    theirs = torch_run(net, torch_optimizer(config, net.parameters()), loss_fn, data, regression)
    config = dict(config, batch_size=BATCH)
    blob = pgdl_train(conn, start, config, data)
    ours = pgdl_params(conn, blob)
    worst = float(np.abs(ours - theirs).max())
    moved = float(np.abs(theirs - params_of(network(outputs, seed))).max())
    check(f"{name}: {STEPS} steps equal PyTorch's within {TOL:g}", ours.shape == theirs.shape and worst <= TOL,
          f"max difference {worst:g}")
    check(f"{name}: the steps moved the weights (by up to {moved:.3g})", moved > 100 * TOL)
    half = pgdl_train(conn, start, config, data[:STEPS // 2])
    resumed = pgdl_train(conn, bytes(half), config, data[STEPS // 2:])
    check(f"{name}: a run resumed from its blob halfway equals the run in one piece", bytes(resumed) == bytes(blob))


def main():
    torch.set_num_threads(1)
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        admin.execute(f"CREATE DATABASE {DATABASE}")
    with psycopg.connect(dbname=DATABASE, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pgdl")
        conn.execute("SET client_min_messages = warning")
        conn.execute("CREATE TABLE batches (k integer, x real[], y real[], n integer)")
        case(conn, "rmsprop", {"optimizer": "rmsprop", "lr": 0.01}, 3, "cross_entropy", seed=1)
        case(conn, "rmsprop centered, momentum, weight decay",
             {"optimizer": "rmsprop", "lr": 0.005, "alpha": 0.9, "eps": 1e-6, "momentum": 0.8, "centered": True,
              "weight_decay": 0.01}, 3, "cross_entropy", seed=2)
        case(conn, "adagrad lr_decay, initial_accumulator_value, weight decay",
             {"optimizer": "adagrad", "lr": 0.1, "lr_decay": 0.05, "initial_accumulator_value": 0.2,
              "weight_decay": 0.01}, 3, "cross_entropy", seed=3)
        case(conn, "huber (delta 0.7), rmsprop", {"optimizer": "rmsprop", "lr": 0.01, "momentum": 0.5}, 2, "huber",
             delta=0.7, seed=4)
        case(conn, "huber (delta 0.7), adagrad", {"optimizer": "adagrad", "lr": 0.05}, 2, "huber", delta=0.7, seed=5)
        case(conn, "huber (delta 0.7), adam", {"optimizer": "adam", "lr": 0.01}, 2, "huber", delta=0.7, seed=6)
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
