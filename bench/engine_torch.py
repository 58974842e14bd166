#!/usr/bin/python3
"""PyTorch side of bench/engine: the reference MLP and CNN of docs/benchmarks.md,
one thread, trained on Fashion-MNIST exactly as bench/engine.c trains them with
pgdl's engine (same data order, same hyperparameters, same initialization
scheme), timing the training loop only.

Run with Debian's Python and python3-torch:  /usr/bin/python3 bench/engine_torch.py
Options: --model mlp|cnn|all|gru|attention (gru, attention: sequence models on synthetic ids), --epochs N, --limit N (first N training images),
--lr, --batch, --seed, --precision fp32|bf16 (bf16: forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16), fp32 master weights; bench/bf16.sh).  Prints one machine-readable line per model:

  pytorch mlp images_per_s=... train_s=... epochs=... n_train=... train_loss=... test_acc=... gflops=... peak_gflops=... peak_fraction=...
"""

import os

# Single thread, for BLAS too: torch.set_num_threads() limits OpenMP and
# oneDNN but not the pthread OpenBLAS that Debian's torch calls for Linear
# layers, which reads its thread count when it is loaded.  OPENBLAS_CORETYPE
# and OPENBLAS_L2_SIZE are left exactly as the environment sets them.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"

import argparse
import ctypes
import sys
import time

import numpy as np
import torch
import torch.nn as tnn

from fmnist_idx import DEFAULT_DIR, read_idx

MASK64 = (1 << 64) - 1


def load_fmnist(split, directory=None):
    """(images float32 [n, 1, 28, 28] in [0, 1], labels int64 [n])."""
    d = directory or os.environ.get("FMNIST_DIR") or DEFAULT_DIR
    prefix, n = {"train": ("train", 60000), "test": ("t10k", 10000)}[split]
    img = read_idx(f"{d}/{prefix}-images-idx3-ubyte.gz", 0x803, (28, 28), n)
    lab = read_idx(f"{d}/{prefix}-labels-idx1-ubyte.gz", 0x801, (), n)
    if lab.max() >= 10:
        raise ValueError(f"{d}/{prefix}-labels-idx1-ubyte.gz: label out of range")
    x = img.astype(np.float32) / np.float32(255.0)
    return x.reshape(n, 1, 28, 28), lab.astype(np.int64)


def splitmix64_perm(n, seed):
    """Fisher-Yates with splitmix64: the same order as bench/engine.c's shuffle()."""
    state = seed & MASK64
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        j = z % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return np.array(perm, dtype=np.int64)


class BasicBlock(tnn.Module):
    """conv-bn-relu-conv-bn, plus the block's input, relu (torchvision's, with conv biases as pgdl's)."""

    def __init__(self, c):
        super().__init__()
        self.conv1 = tnn.Conv2d(c, c, 3, padding=1)
        self.bn1 = tnn.BatchNorm2d(c)
        self.conv2 = tnn.Conv2d(c, c, 3, padding=1)
        self.bn2 = tnn.BatchNorm2d(c)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(h)) + x)


def resnet_layers():
    """bench/engine.c's resnet: stem, block (8), 1x1 widening, block (16), pools, dense."""
    return [tnn.Conv2d(1, 8, 3, padding=1), tnn.BatchNorm2d(8), tnn.ReLU(), BasicBlock(8), tnn.MaxPool2d(2),
            tnn.Conv2d(8, 16, 1), tnn.BatchNorm2d(16), tnn.ReLU(), BasicBlock(16), tnn.MaxPool2d(2),
            tnn.Flatten(), tnn.Linear(16 * 7 * 7, 10)]


def make_model(name):
    if name == "resnet":
        layers = resnet_layers()
    elif name == "mlp":
        layers = [tnn.Flatten(), tnn.Linear(784, 512), tnn.ReLU(),
                  tnn.Linear(512, 256), tnn.ReLU(), tnn.Linear(256, 10)]
    else:
        layers = [tnn.Conv2d(1, 16, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                  tnn.Conv2d(16, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                  tnn.Flatten(), tnn.Linear(32 * 7 * 7, 10)]
    model = tnn.Sequential(*layers)
    # pgdl's default initialization: He normal weights, zero biases.
    for mod in model.modules():
        if isinstance(mod, (tnn.Linear, tnn.Conv2d)):
            tnn.init.kaiming_normal_(mod.weight, nonlinearity="relu")
            tnn.init.zeros_(mod.bias)
    return model


def train_flops_per_example(name):
    """Multiply-adds counted as 2 FLOPs: forward, backward (input and weight
    gradients), SGD update amortized over the batch is left out.  Used only
    when bench/engine.sh does not pass the engine's own count (--flops)."""
    if name == "mlp":
        dims = [(784, 512), (512, 256), (256, 10)]
        fwd = sum(2 * a * b for a, b in dims)
        bwd = sum(2 * a * b for a, b in dims) * 2 - 2 * 784 * 512  # no dx for the input
        return fwd + bwd
    if name == "resnet":
        # stem, two 3x3 convs at 28x28 (8 ch); 1x1 widening, two 3x3 at 14x14 (16 ch); dense
        first = 2 * 1 * 9 * 8 * 784
        rest = 2 * 2 * 8 * 9 * 8 * 784 + 2 * 8 * 16 * 196 + 2 * 2 * 16 * 9 * 16 * 196 + 2 * 16 * 49 * 10
        return (first + rest) * 3 - first
    conv1 = 2 * 1 * 9 * 16 * 28 * 28
    conv2 = 2 * 16 * 9 * 32 * 14 * 14
    dense = 2 * 32 * 7 * 7 * 10
    return (conv1 + conv2 + dense) * 3 - conv1


def sgemm_peak():
    """Best of several single-thread 1024^3 matmuls, in GFLOP/s."""
    g = torch.Generator().manual_seed(0)
    a = torch.rand(1024, 1024, generator=g)
    b = torch.rand(1024, 1024, generator=g)
    c = torch.empty(1024, 1024)
    best = float("inf")
    for _ in range(8):
        t = time.perf_counter()
        torch.mm(a, b, out=c)
        best = min(best, time.perf_counter() - t)
    return 2.0 * 1024 ** 3 / best / 1e9


def run(name, args, train, test, peak, flops):
    torch.manual_seed(args.seed)
    x_all, y_all = train
    n = x_all.shape[0]
    model = make_model(name)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    loss_fn = tnn.CrossEntropyLoss()

    # Per-batch tensors prepared beforehand, in one fixed shuffled order, as a
    # DataLoader over an in-memory tensor would hand them out.
    perm = torch.from_numpy(splitmix64_perm(n, args.seed))
    xs = x_all[perm]
    ys = y_all[perm]
    batches = [(xs[i:i + args.batch], ys[i:i + args.batch]) for i in range(0, n, args.batch)]

    model.train()
    loss_sum = torch.zeros((), dtype=torch.float64)
    bf16 = args.precision == "bf16"
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        for xb, yb in batches:
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            loss_sum += loss.detach() * xb.shape[0]
    train_s = time.perf_counter() - t0

    model.eval()
    with torch.no_grad():
        tx, ty = test
        correct = 0
        for i in range(0, tx.shape[0], 1000):
            correct += int((model(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum())
        acc = correct / tx.shape[0]

    seen = n * args.epochs
    ips = seen / train_s
    gflops = ips * flops / 1e9
    print(f"pytorch {name} images_per_s={ips:.1f} train_s={train_s:.3f} epochs={args.epochs} "
          f"n_train={n} batch={args.batch} lr={args.lr:g} train_loss={float(loss_sum) / seen:.4f} "
          f"test_acc={acc:.4f} flops_train_per_ex={flops} gflops={gflops:.2f} "
          f"peak_gflops={peak:.2f} peak_fraction={gflops / peak:.3f} precision={args.precision}", flush=True)


def time_on_ids(args, name, model, vocab, steps, classes, n, batch):
    """Adam over n synthetic id sequences (drawn after the model, from the same seed), timed as engine.c does."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xs = torch.randint(0, vocab, (n, steps))
    ys = torch.randint(0, classes, (n,))
    batches = [(xs[i:i + batch], ys[i:i + batch]) for i in range(0, n, batch)]
    loss_fn = tnn.CrossEntropyLoss()
    model.train()
    loss_sum = torch.zeros((), dtype=torch.float64)
    bf16 = args.precision == "bf16"
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        for xb, yb in batches:
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            loss_sum += loss.detach() * xb.shape[0]
    train_s = time.perf_counter() - t0
    seen = n * args.epochs
    print(f"pytorch {name} examples_per_s={seen / train_s:.1f} train_s={train_s:.3f} epochs={args.epochs} "
          f"n_train={n} batch={batch} train_loss={float(loss_sum) / seen:.4f}", flush=True)


def run_gru(args):
    """bench/engine.c's run_gru: embedding -> GRU (last state) -> linear on synthetic ids, Adam."""
    vocab, steps, dim, units, classes, n, batch = 1000, 32, 32, 64, 4, 4096, 64

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            self.emb = tnn.Embedding(vocab, dim)
            self.gru = tnn.GRU(dim, units, batch_first=True)
            self.out = tnn.Linear(units, classes)

        def forward(self, x):
            _, h = self.gru(self.emb(x))
            return self.out(h[0])

    torch.manual_seed(args.seed)
    time_on_ids(args, "gru", Net(), vocab, steps, classes, n, batch)


def run_attention(args):
    """bench/engine.c's --model attention: a post-norm transformer encoder block on synthetic ids, Adam."""
    vocab, steps, dim, heads, hidden, classes, n, batch = 1000, 32, 64, 4, 128, 4, 4096, 64

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            self.emb = tnn.Embedding(vocab, dim)
            self.pos = tnn.Parameter(torch.randn(steps, dim))
            self.block = tnn.TransformerEncoderLayer(dim, heads, hidden, dropout=0.0, activation="gelu",
                                                     batch_first=True)
            self.out = tnn.Linear(dim, classes)

        def forward(self, x):
            return self.out(self.block(self.emb(x) + self.pos).mean(dim=1))

    torch.manual_seed(args.seed)
    time_on_ids(args, "attention", Net(), vocab, steps, classes, n, batch)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn", "resnet", "all", "gru", "attention"], default="all")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="train on the first N images")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--flops-mlp", type=int, default=0, help="training FLOPs per example (engine's count)")
    ap.add_argument("--flops-cnn", type=int, default=0)
    ap.add_argument("--flops-resnet", type=int, default=0)
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    try:  # in case OpenBLAS was loaded before this script set its environment
        ctypes.CDLL(None).openblas_set_num_threads(1)
    except (AttributeError, OSError):
        pass

    if args.model == "gru":
        run_gru(args)
        return 0
    if args.model == "attention":
        run_attention(args)
        return 0

    xtr, ytr = load_fmnist("train")
    if args.limit > 0:
        xtr, ytr = xtr[:args.limit], ytr[:args.limit]
    xte, yte = load_fmnist("test")
    train = (torch.from_numpy(np.ascontiguousarray(xtr)), torch.from_numpy(ytr))
    test = (torch.from_numpy(xte), torch.from_numpy(yte))

    peak = sgemm_peak()
    print(f"pytorch info torch={torch.__version__} threads={torch.get_num_threads()} "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', 'unset')} "
          f"sgemm_1024_gflops={peak:.2f}", flush=True)
    for name in (["mlp", "cnn", "resnet"] if args.model == "all" else [args.model]):
        flops = getattr(args, f"flops_{name}") or train_flops_per_example(name)
        run(name, args, train, test, peak, flops)
    return 0


if __name__ == "__main__":
    sys.exit(main())
