#!/usr/bin/python3
"""Fashion-MNIST as a PostgreSQL COPY BINARY stream, for loading it into a table.

  /usr/bin/python3 bench/fmnist_copy.py train|test [--limit N] > stream

writes rows (id integer, image real[], label integer) to stdout: id is the
image's position in the IDX file (0-based), image its 784 pixels in row-major
order as raw values 0..255 (as floats, not scaled), label the class 0..9.
Load it with

  psql -c "CREATE TABLE fmnist_train (id integer, image real[], label integer)"
  /usr/bin/python3 bench/fmnist_copy.py train | psql -c "COPY fmnist_train FROM STDIN WITH (FORMAT binary)"

The data is Debian's dataset-fashion-mnist (IDX gzip files in
/usr/share/datasets/fashion-mnist; FMNIST_DIR overrides).  The stream is built
with numpy, a block of rows at a time: the 60,000 training images take about a
second.
"""

import argparse
import os
import sys

import numpy as np

from fmnist_idx import DEFAULT_DIR, read_idx

PIXELS = 28 * 28
FLOAT4OID = 700
BLOCK_ROWS = 10000


def load(split, directory):
    prefix, n = {"train": ("train", 60000), "test": ("t10k", 10000)}[split]
    images = read_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), 0x00000803, (28, 28), n)
    labels = read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), 0x00000801, (), n)
    return images.reshape(n, PIXELS), labels


# One row of the COPY BINARY format, big-endian throughout: the field count,
# then each field as (length, bytes).  The real[] field is PostgreSQL's binary
# array format: ndim, has-nulls flag, element type, (size, lower bound) per
# dimension, then (length, value) per element.
ROW = np.dtype([
    ("nfields", ">i2"),
    ("id_len", ">i4"), ("id", ">i4"),
    ("image_len", ">i4"),
    ("ndim", ">i4"), ("hasnull", ">i4"), ("elemtype", ">i4"), ("dim", ">i4"), ("lbound", ">i4"),
    ("pixels", [("len", ">i4"), ("value", ">f4")], (PIXELS,)),
    ("label_len", ">i4"), ("label", ">i4"),
])
IMAGE_BYTES = 5 * 4 + PIXELS * 8

HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
TRAILER = (-1).to_bytes(2, "big", signed=True)


def copy_rows(images, labels, first_id):
    """The COPY BINARY bytes of a block of rows."""
    n = images.shape[0]
    rows = np.empty(n, dtype=ROW)
    rows["nfields"] = 3
    rows["id_len"] = 4
    rows["id"] = np.arange(first_id, first_id + n, dtype=np.int32)
    rows["image_len"] = IMAGE_BYTES
    rows["ndim"] = 1
    rows["hasnull"] = 0
    rows["elemtype"] = FLOAT4OID
    rows["dim"] = PIXELS
    rows["lbound"] = 1
    rows["pixels"]["len"] = 4
    rows["pixels"]["value"] = images
    rows["label_len"] = 4
    rows["label"] = labels
    return rows.tobytes()


def main():
    ap = argparse.ArgumentParser(description="Fashion-MNIST as a PostgreSQL COPY BINARY stream on stdout")
    ap.add_argument("split", choices=["train", "test"])
    ap.add_argument("--limit", type=int, default=None, help="only the first N images")
    args = ap.parse_args()

    directory = os.environ.get("FMNIST_DIR") or DEFAULT_DIR
    images, labels = load(args.split, directory)
    if args.limit is not None:
        images, labels = images[:args.limit], labels[:args.limit]

    out = sys.stdout.buffer
    try:
        out.write(HEADER)
        for first in range(0, images.shape[0], BLOCK_ROWS):
            out.write(copy_rows(images[first:first + BLOCK_ROWS], labels[first:first + BLOCK_ROWS], first))
        out.write(TRAILER)
        out.flush()
    except BrokenPipeError:
        # the reader went away (psql failed): say so through the exit status only
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)


if __name__ == "__main__":
    main()
