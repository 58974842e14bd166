"""bench/fmnist_idx.py -- reading Debian's dataset-fashion-mnist IDX gzip files (shared by the benchmarks)."""
import gzip

import numpy as np

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path, magic, dims, count=None):
    """One IDX gzip file as a uint8 array of shape (n, *dims)."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = 1 + len(dims)
    hdr = np.frombuffer(raw, dtype=">u4", count=1 + ndim)
    if int(hdr[0]) != magic:
        raise ValueError(f"{path}: bad magic number 0x{int(hdr[0]):08x} (expected 0x{magic:08x})")
    n = int(hdr[1])
    if count is not None and n != count:
        raise ValueError(f"{path}: {n} items (expected {count})")
    if [int(d) for d in hdr[2:]] != list(dims):
        raise ValueError(f"{path}: dimensions {list(hdr[2:])} (expected {list(dims)})")
    off = 4 * (1 + ndim)
    size = n * int(np.prod(dims, dtype=np.int64))
    if len(raw) != off + size:
        raise ValueError(f"{path}: {len(raw) - off} bytes of payload (expected {size})")
    return np.frombuffer(raw, dtype=np.uint8, offset=off).reshape((n,) + tuple(dims))
