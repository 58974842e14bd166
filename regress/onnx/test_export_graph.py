#!/usr/bin/env python3
"""pgdl.export_onnx of graphs and of the layers added after the chains (docs/reference/onnx.md), run by
regress/onnx/run.sh.

Grouped convolutions (Conv's group), networks with "inputs" (add of 2 and 3 inputs, concat of flat and of image inputs, slice of the input,
a global average pool's output flattened and merged with a dense layer's rows), layernorm (LayerNormalization: the file is
opset 17, IR 8), gelu (its Erf subgraph: opset 13 stays), sequences (embedding with positions as Cast,
Gather and Add; conv1d between Transposes; softmax and layernorm per step; the global average over steps;
gru's last state and every step's; attention, causal or not, in an encoder block with dense per_step), as blobs
of pgdl.init_model and one graph fitted on a standardized dataset (exported with its normalization, fed raw
features). Each file: onnx.checker (full check) accepts it, its opset is the lowest that has its nodes,
every layer has its node "layer<i>", and onnxruntime-node reproduces pgdl.predict within 1e-5 on 1,000
inputs.

Prints "ok - ..." / "not ok - ..." and ends with "N passed, M failed" (test_export.py's counters).
"""
import json
import sys
import tempfile
import traceback

import numpy as np
import onnx

import test_export as te

N = te.N_INPUTS

BLOBS = {
    # a residual MLP: the block's output added to its input
    "residual_mlp": {"input": [8], "layers": [
        {"type": "dense", "units": 12, "name": "stem"}, {"type": "relu"},
        {"type": "dense", "units": 12}, {"type": "relu", "name": "branch"},
        {"type": "add", "inputs": ["branch", "stem"]}, {"type": "dense", "units": 4}]},
    # a residual CNN block and a concat of channels, then a global pool
    "residual_cnn": {"input": [2, 6, 6], "loss": "mse", "layers": [
        {"type": "conv2d", "filters": 3, "kernel": 3, "padding": 1, "name": "c1"}, {"type": "relu"},
        {"type": "conv2d", "filters": 3, "kernel": 3, "padding": 1, "name": "c2"},
        {"type": "add", "inputs": ["c1", "c2"]}, {"type": "tanh", "name": "t"},
        {"type": "concat", "inputs": ["t", "input"]}, {"type": "conv2d", "filters": 2, "kernel": 3},
        {"type": "global_avgpool"}, {"type": "dense", "units": 2}]},
    # grouped and depthwise convolutions (ONNX's Conv with group)
    "grouped_conv": {"input": [4, 6, 6], "layers": [
        {"type": "conv2d", "filters": 6, "kernel": 3, "padding": 1, "groups": 2}, {"type": "relu"},
        {"type": "conv2d", "filters": 6, "kernel": 3, "groups": 6}, {"type": "global_avgpool"},
        {"type": "flatten"}, {"type": "dense", "units": 3}]},
    # three inputs to one add
    "add3": {"input": [6], "loss": "binary_cross_entropy", "layers": [
        {"type": "dense", "units": 5, "name": "a", "inputs": ["input"]},
        {"type": "dense", "units": 5, "name": "b", "inputs": ["input"]},
        {"type": "dense", "units": 5, "name": "c", "inputs": ["input"]},
        {"type": "add", "inputs": ["a", "b", "c"]}, {"type": "dense", "units": 1}]},
    # slices of the input, each its own branch, concatenated with one of them, then layernorm and gelu
    "slices": {"input": [10], "layers": [
        {"type": "slice", "name": "s1", "inputs": ["input"], "start": 0, "length": 4},
        {"type": "dense", "units": 6, "name": "d1"},
        {"type": "slice", "inputs": ["input"], "start": 4, "length": 6},
        {"type": "dense", "units": 5, "name": "d2"},
        {"type": "concat", "inputs": ["d1", "d2", "s1"]}, {"type": "layernorm"}, {"type": "gelu"},
        {"type": "dense", "units": 3}]},
    # a global average pool's [C, 1, 1], flattened, concatenated with a dense layer's rows; then softmax
    "pool_and_rows": {"input": [2, 5, 5], "loss": "mse", "layers": [
        {"type": "conv2d", "filters": 3, "kernel": 3, "name": "c"}, {"type": "global_avgpool"},
        {"type": "flatten", "name": "gp"},
        {"type": "dense", "units": 4, "inputs": ["input"], "name": "d"},
        {"type": "concat", "inputs": ["gp", "d"]}, {"type": "softmax"}, {"type": "dense", "units": 3}]},
    # gelu alone keeps opset 13; layernorm with a non-default eps
    "gelu_mlp": {"input": [7], "loss": "mse", "layers": [
        {"type": "dense", "units": 9}, {"type": "gelu"}, {"type": "dense", "units": 2}]},
    "layernorm_mlp": {"input": [7], "layers": [
        {"type": "layernorm", "eps": 0.001}, {"type": "dense", "units": 9}, {"type": "gelu"},
        {"type": "layernorm"}, {"type": "dense", "units": 3}]},
    # ids through an embedding with positions, a conv1d (Transposes around Conv), softmax and layernorm
    # over each step, a global average over the steps
    "sequence_conv": {"input": [9], "ids": 7, "layers": [
        {"type": "embedding", "vocab": 7, "dim": 4, "positions": True},
        {"type": "conv1d", "filters": 5, "kernel": 3, "padding": 1, "stride": 2}, {"type": "gelu"},
        {"type": "softmax"}, {"type": "layernorm"}, {"type": "conv1d", "filters": 3, "kernel": 2},
        {"type": "global_avgpool"}, {"type": "dense", "units": 3}]},
    # numeric features and two id columns, each through its slice and embedding, as pgdl.pack's
    # categorical columns lay them out
    "categorical_slices": {"input": [5], "ids": {3: 6, 4: 4}, "loss": "mse", "layers": [
        {"type": "slice", "name": "numeric", "inputs": ["input"], "start": 0, "length": 3},
        {"type": "slice", "inputs": ["input"], "start": 3, "length": 1},
        {"type": "embedding", "vocab": 6, "dim": 3}, {"type": "flatten", "name": "city"},
        {"type": "slice", "inputs": ["input"], "start": 4, "length": 1},
        {"type": "embedding", "vocab": 4, "dim": 2}, {"type": "flatten", "name": "shop"},
        {"type": "concat", "inputs": ["numeric", "city", "shop"]}, {"type": "dense", "units": 2}]},
    # a flatten with steps: flat features as a sequence of 3 steps (ONNX's Reshape to [batch, 3, 4]), normalized
    # and softmaxed per step, into a GRU; an image's rows as steps, normalized each, flat again
    "flat_as_steps": {"input": [12], "loss": "mse", "layers": [
        {"type": "flatten", "steps": 3}, {"type": "layernorm"}, {"type": "softmax"}, {"type": "gru", "units": 4},
        {"type": "dense", "units": 2}]},
    # a slice of each step's features (ONNX's Slice along axis 2 of [batch, steps, features])
    "slice_per_step": {"input": [12], "loss": "mse", "layers": [
        {"type": "flatten", "steps": 4}, {"type": "slice", "start": 1, "length": 2}, {"type": "tanh"},
        {"type": "flatten"}, {"type": "dense", "units": 2}]},
    "image_rows_as_steps": {"input": [2, 3, 4], "layers": [
        {"type": "flatten", "steps": 6}, {"type": "layernorm", "eps": 0.01}, {"type": "flatten"},
        {"type": "dense", "units": 3}]},
    # softmax with log (LogSoftmax, axis -1) inside a network and per step
    "log_softmax": {"input": [12], "loss": "mse", "layers": [
        {"type": "dense", "units": 8}, {"type": "softmax", "log": True}, {"type": "flatten", "steps": 2},
        {"type": "softmax", "log": True}, {"type": "flatten"}, {"type": "dense", "units": 2}]},
    # GRUs: every step's state into a second GRU's last state; attention, causal and not, in an encoder
    # block (pgdl's transformer of training.md: add, layernorm, a dense per step, gelu)
    "gru": {"input": [6], "ids": 5, "loss": "mse", "layers": [
        {"type": "embedding", "vocab": 5, "dim": 4}, {"type": "gru", "units": 5, "return_sequences": True},
        {"type": "gru", "units": 3}, {"type": "dense", "units": 2}]},
    # every step's state as the output, nothing after it (no loss's softmax to flatten differences)
    "gru_steps": {"input": [4], "ids": 6, "loss": "mse", "layers": [
        {"type": "embedding", "vocab": 6, "dim": 3}, {"type": "gru", "units": 4, "return_sequences": True}]},
    "encoder": {"input": [5], "ids": 8, "loss": "mse", "layers": [
        {"type": "embedding", "vocab": 8, "dim": 8, "positions": True, "name": "tokens"},
        {"type": "attention", "heads": 2, "name": "attended"},
        {"type": "add", "inputs": ["tokens", "attended"]}, {"type": "layernorm", "name": "normed"},
        {"type": "dense", "units": 16, "per_step": True}, {"type": "gelu"},
        {"type": "dense", "units": 8, "per_step": True, "name": "fed"},
        {"type": "add", "inputs": ["normed", "fed"]}, {"type": "layernorm"},
        {"type": "attention", "heads": 4, "causal": True}, {"type": "global_avgpool"},
        {"type": "dense", "units": 3}]},
}

# the graph fitted on a standardized dataset: the file takes raw features
FITTED = {"input": [6], "layers": [
    {"type": "dense", "units": 8, "name": "stem"}, {"type": "gelu"}, {"type": "dense", "units": 8, "name": "f"},
    {"type": "add", "inputs": ["stem", "f"]}, {"type": "layernorm", "name": "n"},
    {"type": "slice", "inputs": ["input"], "start": 2, "length": 3, "name": "raw"},
    {"type": "concat", "inputs": ["n", "raw"]}, {"type": "dense", "units": 3}]}



def opset_of(model):
    return [(o.domain, o.version) for o in model.opset_import]


def check_file(what, onnx_bytes, spec, n_layers):
    model = onnx.load_from_string(onnx_bytes)
    try:
        onnx.checker.check_model(model, full_check=True)
        te.check(True, f"{what}: onnx.checker (full check) accepts it")
    except Exception as e:  # noqa: BLE001 -- whatever the checker says is the failure
        te.check(False, f"{what}: onnx.checker (full check) accepts it", e)
    has_ln = any(l["type"] == "layernorm" for l in spec["layers"])
    want = (8, [("", 17)]) if has_ln else (7, [("", 13)])
    te.check((model.ir_version, opset_of(model)) == want, f"{what}: IR and opset {want}",
             (model.ir_version, opset_of(model)))
    names = {n.name for n in model.graph.node}
    te.check(all(f"layer{i}" in names for i in range(n_layers)), f"{what}: a node layer<i> per layer",
             sorted(names))
    return model


def check_blob(conn, name, spec, rng, tmp, ort_ok):
    ids = spec.pop("ids", {})
    blob = bytes(conn.execute("SELECT pgdl.init_model(%s::jsonb, '{\"seed\": 5}')",
                              (json.dumps(spec),)).fetchone()[0])
    x = rng.normal(0, 1.5, (N, int(np.prod(spec["input"])))).astype(np.float32)
    # ids: whole numbers below the vocabulary, in every column (an int) or in the columns given
    for col, vocab in (ids.items() if isinstance(ids, dict) else ((c, ids) for c in range(x.shape[1]))):
        x[:, col] = rng.integers(0, vocab, N)
    onnx_bytes = bytes(conn.execute("SELECT pgdl.export_onnx(%s::bytea)", (blob,)).fetchone()[0])
    check_file(name, onnx_bytes, spec, len(spec["layers"]))
    want = te.pgdl_predict(conn, blob, x)
    if not ort_ok:
        te.check(False, f"{name}: onnxruntime-node runs it", "onnxruntime-node is not installed")
        return
    try:
        te.compare(f"{name}: onnxruntime-node", te.ort_run(onnx_bytes, x, tmp), want)
    except Exception as e:  # noqa: BLE001
        te.check(False, f"{name}: onnxruntime-node runs it", e)


def check_fitted(conn, rng, tmp, ort_ok):
    """A graph trained on standardized features, exported with its normalization: raw features in."""
    x = rng.normal(3, 2, (1200, 6)).astype(np.float32) * np.float32([1, 10, 100, 0.1, 1, 5])
    y = (x[:, 0] + x[:, 2] / 100 > 3).astype(int) + (x[:, 1] > 30).astype(int)
    conn.execute("CREATE TABLE g (id integer PRIMARY KEY, x real[], y text)")
    with conn.cursor().copy("COPY g (id, x, y) FROM STDIN") as copy:
        for i in range(len(x)):
            copy.write_row((i, [float(v) for v in x[i]], f"k{y[i]}"))
    conn.execute("SELECT pgdl.pack('g', 'x', 'y', 'g_std', standardize => true)")
    mid = conn.execute("SELECT pgdl.fit('g_std', %s::jsonb, '{\"optimizer\": \"adam\", \"lr\": 0.01, "
                       "\"batch_size\": 64, \"seed\": 1}'::jsonb, 2, name => 'fitted_graph')",
                       (json.dumps(FITTED),)).fetchone()[0]
    onnx_bytes = bytes(conn.execute("SELECT pgdl.export_onnx(%s::bigint)", (mid,)).fetchone()[0])
    model = check_file("fitted graph", onnx_bytes, FITTED, len(FITTED["layers"]))
    meta = {p.key: json.loads(p.value) for p in model.metadata_props}
    te.check([n.name for n in model.graph.node][:2] == ["pgdl_normalize_sub", "pgdl_normalize_div"]
             and "pgdl.normalization" in meta and meta.get("pgdl.classes") == ["k0", "k1", "k2"],
             "fitted graph: its normalization first, its classes in the metadata", meta)
    want = te.pgdl_predict(conn, mid, x[:N])
    if ort_ok:
        te.compare("fitted graph (raw features): onnxruntime-node", te.ort_run(onnx_bytes, x[:N], tmp), want)


def check_categorical(conn, rng, tmp, ort_ok):
    """A dataset of two categorical columns (text, integer), standardized numeric features: the file takes
    the numeric features then the ids (value i of pgdl.datasets.categorical is id i + 1, 0 unseen)."""
    cities, shops = ["Oslo", "Lima", "Pune", "Kyiv"], [10, 20, 30]
    n = 1200
    num = rng.normal(5, 3, (n, 2)).astype(np.float32)
    city = rng.integers(0, len(cities), n)
    shop = rng.integers(0, len(shops), n)
    y = (num[:, 0] + 2 * (city == 1) - (shop == 2) > 5).astype(int)
    conn.execute("CREATE TABLE cat (id integer PRIMARY KEY, x real[], city text, shop integer, y integer)")
    with conn.cursor().copy("COPY cat (id, x, city, shop, y) FROM STDIN") as copy:
        for i in range(n):
            copy.write_row((i, [float(v) for v in num[i]], cities[city[i]], shops[shop[i]], int(y[i])))
    conn.execute("SELECT pgdl.pack('cat', 'x', 'y', 'cat_std', standardize => true, categorical => 'city, shop')")
    spec = {"input": [4], "layers": [
        {"type": "slice", "name": "numeric", "inputs": ["input"], "start": 0, "length": 2},
        {"type": "slice", "inputs": ["input"], "start": 2, "length": 1},
        {"type": "embedding", "vocab": 5, "dim": 3}, {"type": "flatten", "name": "c"},
        {"type": "slice", "inputs": ["input"], "start": 3, "length": 1},
        {"type": "embedding", "vocab": 4, "dim": 2}, {"type": "flatten", "name": "s"},
        {"type": "concat", "inputs": ["numeric", "c", "s"]}, {"type": "dense", "units": 2}]}
    mid = conn.execute("SELECT pgdl.fit('cat_std', %s::jsonb, '{\"optimizer\": \"adam\", \"lr\": 0.05, "
                       "\"seed\": 2}'::jsonb, 2)", (json.dumps(spec),)).fetchone()[0]
    onnx_bytes = bytes(conn.execute("SELECT pgdl.export_onnx(%s::bigint)", (mid,)).fetchone()[0])
    model = check_file("categorical dataset", onnx_bytes, spec, len(spec["layers"]))
    vocab = conn.execute("SELECT d.categorical FROM pgdl.models m JOIN pgdl.datasets d ON d.id = m.dataset "
                         "WHERE m.id = %s", (mid,)).fetchone()[0]
    meta = {p.key: json.loads(p.value) for p in model.metadata_props}
    te.check(meta.get("pgdl.categorical") == vocab, "categorical dataset: its vocabularies in the metadata",
             json.dumps(meta)[:800])
    # rows of the table, and one with a city the vocabulary has not seen (id 0)
    rows = [(num[i], cities[city[i]], shops[shop[i]]) for i in range(N - 1)] + [(num[0], "Atlantis", 10)]
    ids = {c["column"]: {v: k + 1 for k, v in enumerate(c["values"])} for c in vocab}
    x = np.array([[r[0][0], r[0][1], ids["city"].get(r[1], 0), ids["shop"].get(str(r[2]), 0)] for r in rows],
                 dtype=np.float32)
    want = np.array([conn.execute("SELECT pgdl.predict(%s::bigint, %s::float8[], %s::text[])",
                                  (mid, [float(r[0][0]), float(r[0][1])], [r[1], str(r[2])])).fetchone()[0]
                     for r in rows], dtype=np.float32)
    if ort_ok:
        te.compare("categorical dataset (numeric features and ids): onnxruntime-node",
                   te.ort_run(onnx_bytes, x, tmp), want)


def main():
    conn = te.connect()
    conn.execute("CREATE EXTENSION pgdl")
    rng = np.random.default_rng(23)
    ort_ok = te.ort_installed()
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in BLOBS.items():
            check_blob(conn, name, spec, rng, tmp, ort_ok)
        check_fitted(conn, rng, tmp, ort_ok)
        check_categorical(conn, rng, tmp, ort_ok)
    conn.close()


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001 -- an unexpected error is a failure, and the count still ends the run
        te.check(False, "test_export_graph.py ran to its end", traceback.format_exc())
    print(f"{te.passed} passed, {te.failed} failed")
    sys.exit(1 if te.failed else 0)
