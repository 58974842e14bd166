#!/usr/bin/python3
"""bench/zoo_reference.py -- pgdl.similar_models's ranking computed again in Python, apart from the C code.

Reads, on stdin, the query's spec and data (first line), then one model per line (id, dataset, spec and
its data as JSON, tab-separated) as bench/zoo.sh dumps them with psql, and prints the k nearest as
"id<TAB>distance" lines, the distance definitions of docs/reference/zoo.md written from the text.

Usage: zoo_reference.py K BY QUERY_ID
"""
import json
import math
import sys

HYPER = ("units", "filters", "kernel", "stride", "padding", "alpha", "rate")


def tokens(spec):
    out = []
    for layer in spec["layers"]:
        t = layer["type"]
        h = {k: 0.0 for k in HYPER}
        if t == "dense":
            h["units"] = layer["units"]
        elif t == "conv2d":
            h.update(filters=layer["filters"], kernel=layer["kernel"], stride=layer.get("stride", 1),
                     padding=layer.get("padding", 0))
        elif t in ("maxpool2d", "avgpool2d"):
            h.update(kernel=layer["size"], stride=layer.get("stride", layer["size"]))
        elif t == "leaky_relu":
            h["alpha"] = layer.get("alpha", 0.01)
        elif t == "dropout":
            h["rate"] = layer.get("rate", 0.5)
        out.append((t, tuple(float(h[k]) for k in HYPER)))
    return out


def substitution(a, b):
    if a[0] != b[0]:
        return 1.0
    most = 0.0
    for x, y in zip(a[1], b[1]):
        big = max(abs(x), abs(y))
        if x != y and big > 0:
            most = max(most, abs(x - y) / big)
    return 0.0 if most == 0 else 0.25 + 0.25 * most


def arch_distance(a, b):
    if not a and not b:
        return 0.0
    prev = [float(j) for j in range(len(b) + 1)]
    for i in range(1, len(a) + 1):
        cur = [float(i)] + [0.0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j - 1] + substitution(a[i - 1], b[j - 1]), prev[j] + 1, cur[j - 1] + 1)
        prev = cur
    return prev[-1] / max(len(a), len(b))


def g(a, b):
    r = abs(math.log(max(a, 1e-30) / max(b, 1e-30)))
    return r / (1 + r)


def data_distance(a, b):
    if a["dataset"] and a["dataset"] == b["dataset"]:
        return 0.0
    if a["regression"] != b["regression"]:
        return 1.0
    parts = [g(a["features"], b["features"]), g(a["outputs"], b["outputs"])]
    if a["norm"] and b["norm"]:
        if a["norm"] != b["norm"]:
            parts.append(0.5)
        elif a["norm"] == "scale":
            parts.append(g(a["sigma"], b["sigma"]))
        else:
            parts.append(0.5 * min(1.0, abs(a["mu"] - b["mu"]) / (a["sigma"] + b["sigma"])) +
                         0.5 * g(a["sigma"], b["sigma"]))
    return sum(parts) / len(parts)


def main():
    k, by, query_id = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    lines = sys.stdin.read().splitlines()
    q_spec, q_data = (json.loads(x) for x in lines[0].split("\t"))
    q_tokens = tokens(q_spec)
    ranked = []
    for line in lines[1:]:
        ident, spec, data = line.split("\t")
        ident = int(ident)
        if ident == query_id:
            continue
        arch = data_d = 0.0
        if by != "data":
            arch = arch_distance(q_tokens, tokens(json.loads(spec)))
        if by != "architecture":
            data_d = data_distance(q_data, json.loads(data))
        d = arch if by == "architecture" else data_d if by == "data" else (arch + data_d) / 2
        ranked.append((d, ident))
    ranked.sort()
    for d, ident in ranked[:k]:
        print(f"{ident}\t{d:.12f}")


if __name__ == "__main__":
    main()
