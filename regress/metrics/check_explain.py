#!/usr/bin/python3
"""Explanations (pgdl.explain, pgdl.feature_importance) against PyTorch and numpy.

Models are trained by pgdl.fit and rebuilt in PyTorch from pgdl.model_weights
(named as PyTorch's state_dict), in eval mode:
  - a classifier with batchnorm and dropout, and a regressor of standardized
    targets: the input gradient pgdl differentiates equals torch.autograd's
    within 1e-5 at several points, and integrated gradients (the midpoint rule,
    Gauss-Legendre over 64 points, from the training mean pgdl chose) equal a
    PyTorch IG on the same path (numpy's leggauss points) within 2e-5, and sum
    to f(x) - f(baseline) within 0.1% or 1e-5;
  - a model that embeds a categorical column and a token sequence (slice,
    embedding, gru): the IG path in embedding space, attributions summed per
    id, within 2e-5 of PyTorch's;
  - permutation importance over raw rows: pgdl's numbers equal the accuracy
    drops recomputed in numpy with the same shuffles (the engine's counter-based
    generator, reimplemented here, for pack's row order and each feature's
    shuffle) and PyTorch's predictions, within one row's share; a noise
    feature scores about 0, a decisive one high.
The raw gradient is read honestly through pgdl.explain itself: with steps => 1
(Gauss-Legendre's one point is the midpoint, weight 1) the attribution of
feature j is (x_j - b_j) times the gradient at the path's midpoint (x + b) / 2, so x = p + 1, b = p - 1 give the gradient at p, halved.

Run with PGHOST/PGPORT/PGUSER pointing at a server where pgdl is installed; it
works in a database of its own (pgdl_explain), dropped and created again.
Prints a line per failed check and ends with "N passed, M failed".
"""
import sys

import numpy as np
import psycopg
import torch

DATABASE = "pgdl_explain"
GRAD_TOL = 1e-5
IG_TOL = 2e-5
MASK = (1 << 64) - 1

passed = 0
failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what} {detail}")


# ---- the engine's generator (kernels/rng.h) and nn_rng_permutation (src/nn/rng.c) ----

def mix64(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & MASK
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & MASK
    return z ^ (z >> 31)


def rng_bits(seed, stream, counter):
    key = mix64((seed + 0x9e3779b97f4a7c15 * (stream + 1)) & MASK)
    return mix64(key ^ ((counter * 0xd1b54a32d192ed03 + 0x632be59bd9b4e019) & MASK))


def permutation(seed, stream, n):
    out = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng_bits(seed, stream, i) % (i + 1)
        out[i], out[j] = out[j], out[i]
    return out


# ---- models rebuilt in PyTorch ----

def weights(conn, model):
    rows = conn.execute("SELECT layer, name, shape, \"values\" FROM pgdl.model_weights(%s::bigint)", (model,)).fetchall()
    out = {}
    for layer, name, shape, values in rows:
        out.setdefault(layer, {})[name] = torch.tensor(np.array(values, dtype=np.float64).reshape(shape))
    return out


def load(module, tensors):
    module.load_state_dict({k: v for k, v in tensors.items()}, strict=True)
    return module.double().eval()


def mlp_torch(w, batchnorm):
    layers = [torch.nn.Linear(4, 16)]
    if batchnorm:
        layers.append(torch.nn.BatchNorm1d(16))
    layers += [torch.nn.Tanh(), torch.nn.Dropout(0.2), torch.nn.Linear(16, w[max(w)]["bias"].shape[0])]
    net = torch.nn.Sequential(*layers).double()
    load(net[0], w[0])
    if batchnorm:
        bn = w[1]
        net[1].load_state_dict({"weight": bn["weight"], "bias": bn["bias"], "running_mean": bn["running_mean"],
                                "running_var": bn["running_var"], "num_batches_tracked": torch.tensor(0)})
    load(net[-1], w[max(w)])
    return net.eval()


def target_fn(net, kind, k, scale=1.0):
    """f of a batch of inputs: a class's softmax probability, or an output times scale (target units)."""
    if kind == "probability":
        return lambda x: torch.softmax(net(x), dim=1)[:, k]
    return lambda x: net(x)[:, k] * scale


def torch_grad(f, p):
    x = torch.tensor(np.array(p, dtype=np.float64)[None, :], requires_grad=True)
    f(x).sum().backward()
    return x.grad[0].numpy()


def quadrature(steps):
    """Gauss-Legendre's points and weights on [0, 1], numpy's (pgdl computes its own)."""
    z, w = np.polynomial.legendre.leggauss(steps)
    return (z + 1) / 2, w / 2


def torch_ig(f, x, b, steps):
    x = np.array(x, dtype=np.float64)
    b = np.array(b, dtype=np.float64)
    total = np.zeros_like(x)
    for t, w in zip(*quadrature(steps)):
        total += w * torch_grad(f, b + t * (x - b))
    return (x - b) * total


def explain(conn, model, x, target, baseline=None, steps=64):
    rows = conn.execute("SELECT value, baseline_value, attribution FROM pgdl.explain(%s::bigint, %s::float8[], %s::text, "
                        "%s::float8[], %s::integer) ORDER BY feature", (model, list(map(float, x)), target,
                                             None if baseline is None else list(map(float, baseline)), steps)).fetchall()
    return np.array([r[1] for r in rows]), np.array([r[2] for r in rows])


def pgdl_grad(conn, model, p, target):
    p = np.array(p, dtype=np.float32)
    _, attr = explain(conn, model, p + 1, target, p - 1, 1)
    # the midpoint of x = p + 1 and b = p - 1 is p in float32 when p + 1 and p - 1 round back to it
    return attr / 2


def check_dense(conn, model, name, kind, target, k, batchnorm, scale, points):
    net = mlp_torch(weights(conn, model), batchnorm)
    f = target_fn(net, kind, k, scale)
    for i, p in enumerate(points):
        ours = pgdl_grad(conn, model, p, target)
        theirs = torch_grad(f, np.array(p, dtype=np.float32))
        worst = float(np.abs(ours - theirs).max())
        check(f"{name}: input gradient at point {i} equals torch.autograd's", worst <= GRAD_TOL,
              f"max difference {worst:g}")
    for i, x in enumerate(points[:3]):
        base, attr = explain(conn, model, x, target)
        theirs = torch_ig(f, np.array(x, dtype=np.float32), base.astype(np.float32), 64)
        worst = float(np.abs(attr - theirs).max())
        check(f"{name}: integrated gradients at point {i} equal PyTorch's", worst <= IG_TOL, f"max difference {worst:g}")
        fx = float(f(torch.tensor(np.array(x, dtype=np.float32)[None, :], dtype=torch.float64)))
        fb = float(f(torch.tensor(base.astype(np.float32)[None, :], dtype=torch.float64)))
        gap = abs(attr.sum() - (fx - fb))
        check(f"{name}: completeness at point {i}", gap <= max(0.001 * abs(fx - fb), 1e-5),
              f"sum {attr.sum():g}, f(x) - f(b) {fx - fb:g}")


def check_embedded(conn):
    """slice -> embedding (colour), slice -> embedding -> gru (tokens), concat, dense: IG in embedding space."""
    conn.execute("""CREATE TABLE seqs AS
        SELECT i AS id, sin(i) AS a, (ARRAY['red', 'green', 'blue'])[1 + i % 3] AS colour,
               ARRAY(SELECT 1 + (i * k) % 5 FROM generate_series(1, 1 + i % 4) k) AS toks,
               ((i % 3 = 0) OR (1 + i % 5 = 3))::integer AS label
          FROM generate_series(1, 300) i""")
    conn.execute("SELECT pgdl.pack('seqs', 'a', 'label', 'seqs_p', buffer_rows => 50, partitions => 1, "
                 "categorical => 'colour', sequence => 'toks')")
    spec = """{"input": [7], "layers": [
      {"type": "slice", "start": 0, "length": 1, "inputs": ["input"], "name": "a"},
      {"type": "slice", "start": 1, "length": 1, "inputs": ["input"]},
      {"type": "embedding", "vocab": 4, "dim": 3},
      {"type": "flatten", "name": "colour"},
      {"type": "slice", "start": 2, "length": 4, "inputs": ["input"]},
      {"type": "embedding", "vocab": 8, "dim": 4},
      {"type": "gru", "units": 8, "name": "toks"},
      {"type": "concat", "inputs": ["a", "colour", "toks"]},
      {"type": "dense", "units": 2}]}"""
    model = conn.execute("SELECT pgdl.fit('seqs_p', %s::jsonb, '{\"optimizer\": \"adam\", \"lr\": 0.05, "
                         "\"batch_size\": 25, \"seed\": 5}', 4)", (spec,)).fetchone()[0]
    w = weights(conn, model)
    colour = load(torch.nn.Embedding(4, 3), w[2])
    toks = load(torch.nn.Embedding(8, 4), w[5])
    gru = load(torch.nn.GRU(4, 8, batch_first=True), w[6])
    head = load(torch.nn.Linear(1 + 3 + 8, 2), w[8])

    def f(a, ec, et):  # the probability of class 1 from a, colour's vector, the tokens' vectors
        _, h = gru(et)
        return torch.softmax(head(torch.cat([a, ec.reshape(ec.shape[0], -1), h[0]], dim=1)), dim=1)[:, 1]

    for i, (col, seq) in enumerate([("blue", [3, 1]), ("red", [2, 2, 5]), ("green", [4])]):
        rows = conn.execute("SELECT value, baseline_value, attribution FROM pgdl.explain(%s::bigint, ARRAY[0.5], "
                            "ARRAY[%s], jsonb_build_array(%s::integer[]), '1') ORDER BY feature",
                            (model, col, seq)).fetchall()
        value = np.array([r[0] for r in rows])
        base = np.array([r[1] for r in rows])
        ours = np.array([r[2] for r in rows])
        ids_x = torch.tensor(value[1:6].astype(np.int64))
        ids_b = torch.tensor(base[1:6].astype(np.int64))
        ax, ab = float(np.float32(value[0])), float(np.float32(base[0]))
        cx, cb = colour(ids_x[:1])[None], colour(ids_b[:1])[None]
        tx, tb = toks(ids_x[1:5])[None], toks(ids_b[1:5])[None]
        total = [0.0, torch.zeros_like(cx), torch.zeros_like(tx)]
        for t, wt in zip(*quadrature(64)):
            a = torch.tensor([[ab + t * (ax - ab)]], dtype=torch.float64, requires_grad=True)
            c = (cb + t * (cx - cb)).detach().requires_grad_(True)
            e = (tb + t * (tx - tb)).detach().requires_grad_(True)
            f(a, c, e).sum().backward()
            total = [total[0] + wt * float(a.grad), total[1] + wt * c.grad, total[2] + wt * e.grad]
        theirs = np.zeros(7)
        theirs[0] = (ax - ab) * total[0]
        theirs[1] = float(((cx - cb) * total[1]).sum())
        theirs[2:6] = ((tx - tb) * total[2]).sum(dim=2)[0].detach().numpy()
        worst = float(np.abs(ours - theirs).max())
        check(f"embedded ids: IG in embedding space at example {i} equals PyTorch's", worst <= IG_TOL,
              f"max difference {worst:g}")
        check(f"embedded ids: each id of example {i} attributed", np.all(ours[1:1 + 1 + len(seq)] != 0))


def check_importance(conn, model, rows, labels):
    """Permutation importance over raw rows against numpy with the engine's shuffles."""
    w = weights(conn, model)
    net = mlp_torch(w, True)
    # raw rows are held as pgdl.pack (seed 42) would pack them: shuffled by its stream "pack"
    order = permutation(42, 0x7061636b, len(rows))
    x = np.array([rows[i][1:5] for i in order], dtype=np.float32)
    y = np.array([labels.index(rows[i][5]) for i in order])
    n = len(y)

    def accuracy(xs):
        with torch.no_grad():
            return float((net(torch.tensor(xs, dtype=torch.float64)).argmax(dim=1).numpy() == y).mean())

    base = accuracy(x)
    seed, repeats = 11, 3
    ours = conn.execute("SELECT feature, importance, importance_std FROM pgdl.feature_importance(%s::bigint, "
                        "'SELECT * FROM rows ORDER BY id', 'a, b, c, d', 'label', repeats => %s, seed => %s) "
                        "ORDER BY feature", (model, repeats, seed)).fetchall()
    for j in range(4):
        drops = []
        for r in range(repeats):
            perm = permutation(seed, (r << 32) | j, n)
            xp = x.copy()
            xp[:, j] = x[perm, j]
            drops.append(base - accuracy(xp))
        mean, std = float(np.mean(drops)), float(np.std(drops))
        check(f"importance of feature {j + 1} equals numpy's with the same shuffles",
              abs(ours[j][1] - mean) <= 1.5 / n and abs(ours[j][2] - std) <= 1.5 / n,
              f"pgdl {ours[j][1]:g} +- {ours[j][2]:g}, numpy {mean:g} +- {std:g}")
    check("importance: the decisive features score high", ours[0][1] > 0.1 and ours[1][1] > 0.1,
          f"{ours[0][1]:g}, {ours[1][1]:g}")
    check("importance: the noise feature scores about 0", abs(ours[3][1]) < 0.05, f"{ours[3][1]:g}")


def main():
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        admin.execute(f"CREATE DATABASE {DATABASE}")
    torch.manual_seed(0)
    with psycopg.connect(dbname=DATABASE, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pgdl")
        conn.execute("SET client_min_messages = warning")
        # a and b decide the class, c a little, d is noise
        conn.execute("""CREATE TABLE rows AS
            SELECT i AS id, sin(i)::real AS a, cos(i)::real AS b, (0.3 * sin(3 * i))::real AS c,
                   ((abs(hashint4(i)) % 1000) / 500.0 - 1)::real AS d,
                   (CASE WHEN sin(i) + 0.3 * sin(3 * i) > 0.4 THEN 'up' WHEN cos(i) > 0 THEN 'flat' ELSE 'down' END)
                   AS label, (3 + 2 * sin(i) - cos(i) * cos(i))::real AS t
              FROM generate_series(1, 500) i""")
        conn.execute("SELECT pgdl.pack('rows', 'a, b, c, d', 'label', 'rows_p', buffer_rows => 50, partitions => 1)")
        conn.execute("SELECT pgdl.pack('rows', 'a, b, c, d', 't', 'rows_t', buffer_rows => 50, partitions => 1, "
                     "standardize_target => true)")
        classifier = conn.execute("""SELECT pgdl.fit('rows_p', '{"input": [4], "layers": [
            {"type": "dense", "units": 16}, {"type": "batchnorm"}, {"type": "tanh"}, {"type": "dropout", "rate": 0.2},
            {"type": "dense", "units": 3}]}'::jsonb, '{"optimizer": "adam", "lr": 0.03, "batch_size": 25, "seed": 1}',
            15)""").fetchone()[0]
        regressor = conn.execute("""SELECT pgdl.fit('rows_t', '{"input": [4], "layers": [
            {"type": "dense", "units": 16}, {"type": "tanh"}, {"type": "dropout", "rate": 0.1},
            {"type": "dense", "units": 1}], "loss": "mse"}'::jsonb,
            '{"optimizer": "adam", "lr": 0.02, "batch_size": 25, "seed": 2}', 15)""").fetchone()[0]
        t_std = conn.execute("SELECT (target_normalization->'std'->>0)::float8 FROM pgdl.datasets "
                             "WHERE packed = 'rows_t'::regclass").fetchone()[0]
        rng = np.random.default_rng(3)
        points = [rng.normal(size=4).round(3).tolist() for _ in range(5)]
        for cls, k in (("up", 2), ("down", 0)):
            check_dense(conn, classifier, f"classifier, class {cls}", "probability", cls, k, True, 1.0, points)
        check_dense(conn, regressor, "regression (standardized targets)", "output", None, 0, False, t_std, points)
        check_embedded(conn)
        rows = conn.execute("SELECT id, a, b, c, d, label FROM rows ORDER BY id").fetchall()
        check_importance(conn, classifier, rows, ["down", "flat", "up"])
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
