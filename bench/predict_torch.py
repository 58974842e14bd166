#!/usr/bin/python3
"""PyTorch's batched inference for bench/predict.sh: the reference for pgdl.predict_batch.

  /usr/bin/python3 bench/predict_torch.py [--runs N] [--batch N]

Runs design.md's reference MLP (784-512-256-10) and CNN (conv3x3x16 pad 1, relu, maxpool 2,
conv3x3x32 pad 1, relu, maxpool 2, dense 10) over the 10,000 Fashion-MNIST test images that
bench/predict.sh loads into fmnist_test, scaled by 1/255 as its packed dataset normalizes them,
in batches of BATCH rows (the last one shorter), on one thread (torch.set_num_threads(1), and one
OpenBLAS thread: its CPU time equals its wall-clock time), in
inference mode, taking the class of each image (argmax) as pgdl.predict_batch does.  The weights
are random (inference costs the same whatever they are).  The images are a float tensor in memory
before the clock starts: what is timed is the forward passes and the argmax, best of RUNS, in
wall-clock seconds and in this process's CPU seconds (on a shared machine the second is the steadier).

Prints one line per model:
  torch mlp wall_s=... cpu_s=...
"""

import argparse
import os
import sys
import time

# One thread means one BLAS thread too: torch.set_num_threads(1) bounds PyTorch's own pool, not the threads
# of the OpenBLAS that Debian's PyTorch calls for its products (without this, 2 on a 2-core machine).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmnist_idx import DEFAULT_DIR, read_idx  # noqa: E402


def models():
    mlp = torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))
    return {"mlp": (mlp, (-1, 784)), "cnn": (cnn, (-1, 1, 28, 28))}


def best_seconds(model, x, batch, runs):
    """The best wall-clock and the best CPU time (this process's) of `runs` passes over x."""
    wall = cpu = None
    with torch.inference_mode():
        model(x[:batch]).argmax(1)  # warm up
        for _ in range(runs):
            t0, c0 = time.perf_counter(), time.process_time()
            for s in range(0, x.shape[0], batch):
                model(x[s:s + batch]).argmax(1)
            t, c = time.perf_counter() - t0, time.process_time() - c0
            wall = t if wall is None else min(wall, t)
            cpu = c if cpu is None else min(cpu, c)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--model", choices=["mlp", "cnn", "all"], default="all")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(42)
    directory = os.environ.get("FMNIST_DIR", DEFAULT_DIR)
    images = read_idx(os.path.join(directory, "t10k-images-idx3-ubyte.gz"), 0x00000803, (28, 28), 10000)
    x = torch.from_numpy(images.reshape(10000, 784).astype(np.float32) / 255.0)
    for name, (model, shape) in models().items():
        if args.model not in ("all", name):
            continue
        model.eval()
        wall, cpu = best_seconds(model, x.reshape(shape).contiguous(), args.batch, args.runs)
        print(f"torch {name} wall_s={wall:.3f} cpu_s={cpu:.3f}", flush=True)


if __name__ == "__main__":
    main()
