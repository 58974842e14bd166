"""bench/torch_mlp_onnx.py OUT.onnx -- an MLP trained in PyTorch, as a user brings one to pgdl.

Trains 784-128-10 on Fashion-MNIST (pixels scaled to [0, 1], as the demo's pgdl.pack scales them) for one
epoch on one thread, exports it with torch.onnx.export (opset 13, any batch size), and prints its accuracy
on the 10,000 test images, which pgdl.evaluate of the imported model should repeat.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmnist_idx import DEFAULT_DIR, read_idx  # noqa: E402


def load(prefix, n):
    images = read_idx(f"{DEFAULT_DIR}/{prefix}-images-idx3-ubyte.gz", 0x803, (28, 28), n)
    labels = read_idx(f"{DEFAULT_DIR}/{prefix}-labels-idx1-ubyte.gz", 0x801, (), n)
    x = torch.from_numpy(images.reshape(n, 784).astype(np.float32) / np.float32(255))
    return x, torch.from_numpy(labels.astype(np.int64))


def main():
    out = sys.argv[1]
    torch.manual_seed(7)
    torch.set_num_threads(1)
    x, y = load("train", 60000)
    xt, yt = load("t10k", 10000)
    net = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    order = torch.randperm(60000)
    for i in range(0, 60000, 128):
        idx = order[i:i + 128]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        accuracy = (net(xt).argmax(1) == yt).float().mean().item()
    torch.onnx.export(net, torch.zeros(1, 784), out, opset_version=13, input_names=["image"],
                      output_names=["logits"], dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    print(f"   PyTorch: 1 epoch, test accuracy {accuracy:.4f}, written to {os.path.basename(out)}")


if __name__ == "__main__":
    main()
