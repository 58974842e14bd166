#!/usr/bin/python3
"""PyTorch side of bench/mop.sh: model selection as a user would do it outside
the database.  Exports the training and test tables from PostgreSQL with
psycopg (COPY ... TO STDOUT (FORMAT binary), parsed with numpy), then trains
every configuration of a pgdl configuration set (its architectures' jsonb specs
translated to torch.nn) with PyTorch on several processes, one thread each, and
evaluates each model on the test table.  The whole of it is timed: export,
process start, training and evaluation.

  /usr/bin/python3 bench/mop_torch.py --set NAME --train TABLE --test TABLE [--epochs N] [--procs N]

The connection comes from the libpq environment (PGHOST, PGPORT, PGDATABASE,
PGUSER).  The tables have columns (image real[784], label integer), pixels
0..255 (scaled by 1/255 here, as pgdl.pack's scale does).  Prints one line per
configuration, then a summary line:

  pytorch config=ID arch=NAME optimizer=... lr=... batch_size=... test_acc=... test_loss=... train_s=... pid=...
  pytorch total_s=... export_s=... train_eval_s=... procs=... epochs=... n_train=... n_configs=... images_per_s=...
"""

import os

# One thread per process, for BLAS too, set before numpy or torch load
# OpenBLAS (Debian's torch calls the system's pthread OpenBLAS for Linear layers).
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the environment sets them.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import argparse
import ctypes
import json
import multiprocessing as mp
import sys
import time

import numpy as np
import psycopg
import torch
import torch.nn as tnn

FLOAT4OID = 700
COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"

# Set in the parent before the pool forks; the children inherit them.
DATA = {}


# ---- export ----

def copy_binary(conn, query):
    """The bytes of COPY (query) TO STDOUT (FORMAT binary)."""
    chunks = []
    with conn.cursor() as cur:
        with cur.copy(f"COPY ({query}) TO STDOUT (FORMAT binary)") as copy:
            for data in copy:
                chunks.append(bytes(data))
    return b"".join(chunks)


def parse_images(raw, pixels):
    """Rows (image real[pixels], label integer) of a COPY BINARY stream, as numpy arrays.

    Every row has the same size when no value is NULL and every array has
    `pixels` elements, so the rows are one structured array; that is checked."""
    if raw[:11] != COPY_SIGNATURE:
        raise ValueError("not a COPY BINARY stream")
    ext = int.from_bytes(raw[15:19], "big")
    body = memoryview(raw)[19 + ext:len(raw) - 2]
    if raw[-2:] != b"\xff\xff":
        raise ValueError("COPY BINARY stream without its trailer")
    row = np.dtype([
        ("nfields", ">i2"),
        ("image_len", ">i4"),
        ("ndim", ">i4"), ("hasnull", ">i4"), ("elemtype", ">i4"), ("dim", ">i4"), ("lbound", ">i4"),
        ("pixels", [("len", ">i4"), ("value", ">f4")], (pixels,)),
        ("label_len", ">i4"), ("label", ">i4"),
    ])
    if len(body) % row.itemsize:
        raise ValueError(f"rows are not all {row.itemsize} bytes: a NULL or an image without {pixels} pixels?")
    rows = np.frombuffer(body, dtype=row)
    if (rows["nfields"] != 2).any() or (rows["image_len"] != 20 + 8 * pixels).any() or \
            (rows["ndim"] != 1).any() or (rows["hasnull"] != 0).any() or \
            (rows["elemtype"] != FLOAT4OID).any() or (rows["dim"] != pixels).any() or \
            (rows["label_len"] != 4).any() or (rows["pixels"]["len"] != 4).any():
        raise ValueError("unexpected row layout in the COPY stream")
    x = rows["pixels"]["value"].astype(np.float32)     # big-endian to native
    y = rows["label"].astype(np.int64)
    return x, y


# ---- models ----

def make_model(spec):
    """torch.nn.Sequential for a pgdl architecture spec (the layers bench/mop.sh uses)."""
    shape = list(spec["input"])
    layers = []
    for i, layer in enumerate(spec["layers"]):
        kind = layer["type"]
        if kind == "dense":
            if len(shape) > 1:
                layers.append(tnn.Flatten())
                shape = [int(np.prod(shape))]
            layers.append(tnn.Linear(shape[0], layer["units"]))
            shape = [layer["units"]]
        elif kind == "conv2d":
            k = layer.get("kernel", 3)
            p = layer.get("padding", 0)
            s = layer.get("stride", 1)
            layers.append(tnn.Conv2d(shape[0], layer["filters"], k, stride=s, padding=p))
            shape = [layer["filters"], (shape[1] + 2 * p - k) // s + 1, (shape[2] + 2 * p - k) // s + 1]
        elif kind == "maxpool2d":
            k = layer.get("size", 2)
            s = layer.get("stride", k)
            layers.append(tnn.MaxPool2d(k, stride=s))
            shape = [shape[0], (shape[1] - k) // s + 1, (shape[2] - k) // s + 1]
        elif kind == "relu":
            layers.append(tnn.ReLU())
        elif kind == "flatten":
            layers.append(tnn.Flatten())
            shape = [int(np.prod(shape))]
        else:
            raise ValueError(f"layer {i}: type {kind!r} is not translated to PyTorch by this script")
    model = tnn.Sequential(*layers)
    # pgdl's default initialization: He normal weights, zero biases.
    for mod in model.modules():
        if isinstance(mod, (tnn.Linear, tnn.Conv2d)):
            tnn.init.kaiming_normal_(mod.weight, nonlinearity="relu")
            tnn.init.zeros_(mod.bias)
    return model


def make_optimizer(params, cfg):
    opt = cfg.get("optimizer", "sgd")
    wd = float(cfg.get("weight_decay", 0.0))
    if opt == "sgd":
        return torch.optim.SGD(params, lr=float(cfg.get("lr", 0.01)), momentum=float(cfg.get("momentum", 0.0)),
                               nesterov=bool(cfg.get("nesterov", False)), weight_decay=wd)
    if opt in ("adam", "adamw"):
        cls = torch.optim.Adam if opt == "adam" else torch.optim.AdamW
        return cls(params, lr=float(cfg.get("lr", 0.001)),
                   betas=(float(cfg.get("beta1", 0.9)), float(cfg.get("beta2", 0.999))),
                   eps=float(cfg.get("eps", 1e-8)), weight_decay=wd)
    raise ValueError(f"optimizer {opt!r} is not translated to PyTorch by this script")


# ---- one configuration, in a pool process ----

def init_process():
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    try:  # in case OpenBLAS was loaded before the environment was set
        ctypes.CDLL(None).openblas_set_num_threads(1)
    except (AttributeError, OSError):
        pass


def train_one(task):
    cid, arch, spec, cfg = task
    epochs = DATA["epochs"]
    seed = int(cfg.get("seed", 42))
    batch = int(cfg.get("batch_size", 128))
    in_shape = tuple(spec["input"])
    x = DATA["x_train"].view((-1,) + in_shape)
    y = DATA["y_train"]
    tx = DATA["x_test"].view((-1,) + in_shape)
    ty = DATA["y_test"]

    t0 = time.perf_counter()
    torch.manual_seed(seed)
    model = make_model(spec)
    opt = make_optimizer(model.parameters(), cfg)
    loss_fn = tnn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(seed)
    n = x.shape[0]
    model.train()
    for _ in range(epochs):
        # a fresh shuffle every epoch, as DataLoader(shuffle=True) over an in-memory tensor
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, batch):
            idx = perm[i:i + batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
    train_s = time.perf_counter() - t0

    model.eval()
    correct = 0
    loss_sum = 0.0
    with torch.no_grad():
        for i in range(0, tx.shape[0], 500):
            out = model(tx[i:i + 500])
            loss_sum += float(tnn.functional.cross_entropy(out, ty[i:i + 500], reduction="sum"))
            correct += int((out.argmax(1) == ty[i:i + 500]).sum())
    return {"config": cid, "arch": arch, "cfg": cfg, "test_acc": correct / tx.shape[0],
            "test_loss": loss_sum / tx.shape[0], "train_s": train_s,
            "seconds": time.perf_counter() - t0, "pid": os.getpid()}


def cost(spec):
    """Rough relative training cost, to start the heavier models first."""
    return sum(10 if l["type"] == "conv2d" else 1 for l in spec["layers"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", required=True, help="pgdl configuration set (pgdl.configs.set_name)")
    ap.add_argument("--train", required=True, help="training table (image real[], label integer)")
    ap.add_argument("--test", required=True, help="test table")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--procs", type=int, default=2)
    args = ap.parse_args()

    t0 = time.perf_counter()
    with psycopg.connect("") as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT c.id, a.name, a.spec, c.config FROM pgdl.configs c "
                        "JOIN pgdl.architectures a ON a.id = c.architecture "
                        "WHERE c.set_name = %s ORDER BY c.id", (args.set,))
            tasks = [(int(r[0]), r[1], r[2], r[3]) for r in cur.fetchall()]
        if not tasks:
            raise SystemExit(f"configuration set {args.set!r} is empty")
        xtr, ytr = parse_images(copy_binary(conn, f"SELECT image, label FROM {args.train}"), 784)
        xte, yte = parse_images(copy_binary(conn, f"SELECT image, label FROM {args.test}"), 784)
    xtr *= np.float32(1 / 255.0)
    xte *= np.float32(1 / 255.0)
    DATA.update(x_train=torch.from_numpy(xtr), y_train=torch.from_numpy(ytr),
                x_test=torch.from_numpy(xte), y_test=torch.from_numpy(yte), epochs=args.epochs)
    export_s = time.perf_counter() - t0
    print(f"pytorch export n_train={xtr.shape[0]} n_test={xte.shape[0]} export_s={export_s:.2f} "
          f"(psycopg {psycopg.__version__}, COPY binary parsed with numpy)", flush=True)

    # heaviest first, handed out one at a time to whichever process is free
    tasks.sort(key=lambda t: (-cost(t[2]), t[0]))
    t1 = time.perf_counter()
    results = []
    with mp.get_context("fork").Pool(args.procs, initializer=init_process) as pool:
        for r in pool.imap_unordered(train_one, tasks, chunksize=1):
            results.append(r)
    total_s = time.perf_counter() - t0
    train_eval_s = time.perf_counter() - t1

    for r in sorted(results, key=lambda r: r["config"]):
        c = r["cfg"]
        print(f"pytorch config={r['config']} arch={r['arch']} optimizer={c.get('optimizer')} lr={c.get('lr')} "
              f"batch_size={c.get('batch_size')} test_acc={r['test_acc']:.4f} test_loss={r['test_loss']:.4f} "
              f"train_s={r['train_s']:.2f} seconds={r['seconds']:.2f} pid={r['pid']}")
    busy = sum(r["seconds"] for r in results)
    n_seen = len(tasks) * args.epochs * xtr.shape[0]
    print(f"pytorch total_s={total_s:.2f} export_s={export_s:.2f} train_eval_s={train_eval_s:.2f} "
          f"procs={args.procs} epochs={args.epochs} n_train={xtr.shape[0]} n_configs={len(tasks)} "
          f"images_per_s={n_seen / total_s:.1f} busy_s={busy:.2f} torch={torch.__version__}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
