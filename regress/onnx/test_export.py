#!/usr/bin/env python3
"""pgdl.export_onnx (docs/reference/onnx.md), run by regress/onnx/run.sh.

Makes its own data (1,200 synthetic 784-feature rows of 10 classes, packed scaled and standardized),
trains four networks for one epoch with pgdl.fit (an MLP; a CNN 1x28x28 with conv/relu/maxpool/flatten/
dense; dense/batchnorm/leaky_relu/dropout; a CNN with stride, padding, batchnorm, tanh, avgpool, sigmoid,
global_avgpool and an implicit flatten) and builds two blobs with pgdl.model_from_weights (a
binary_cross_entropy MLP, an mse conv net whose output is [C, H, W]), and checks each export:

1. onnx.checker.check_model (Debian's python3-onnx, full check with shape inference) accepts it, and its
   opset, IR version, producer, input and output, node names and metadata are as documented;
2. onnxruntime-node (npm, pinned by package-lock.json) and PyTorch modules rebuilt from the exported
   initializers both reproduce pgdl.predict within 1e-5 on 1,000 inputs: raw features for a stored model
   exported with its normalization, features normalized here (float32, as pgdl does) for with_normalization => false
   and for the blob of the same model;
3. hostile input: NULLs, forged and truncated blobs, a model that does not exist, another role's model
   (not visible: "does not exist"; visible once granted).

Prints "ok - ..." / "not ok - ..." and ends with "N passed, M failed".
"""
import json
import os
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import onnx
import psycopg
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = 1e-5
N_INPUTS = 1000
CONFIG = '{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 64, "seed": 1}'
# class values with a quote, a double quote and a backslash: the metadata must stay valid JSON
CLASSES = ["T-shirt/top", "it's", 'say "7"', "back\\slash", "c4", "c5", "c6", "c7", "c8", "c9"]

passed = 0
failed = 0


def check(cond, what, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok - {what}")
    else:
        failed += 1
        print(f"not ok - {what}")
        if detail:
            for line in str(detail).splitlines()[:20]:
                print(f"#   {line}")
    sys.stdout.flush()
    return cond


def connect():
    return psycopg.connect(autocommit=True)


# ---- the data and the models ----

def make_data(conn):
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 10, 1200)
    x = rng.integers(0, 200, (1200, 784)).astype(np.float32)
    for i, c in enumerate(labels):
        x[i, c * 70:(c + 1) * 70] += 55  # a class shows in its own band of pixels
    conn.execute("CREATE TABLE syn (id integer PRIMARY KEY, image real[], label text)")
    with conn.cursor().copy("COPY syn (id, image, label) FROM STDIN") as copy:
        for i in range(1200):
            copy.write_row((i, [float(v) for v in x[i]], CLASSES[labels[i]]))
    conn.execute("SELECT pgdl.pack('syn', 'image', 'label', 'syn_scaled', scale => 1 / 255.0)")
    conn.execute("SELECT pgdl.pack('syn', 'image', 'label', 'syn_std', standardize => true)")
    return x


SPECS = {
    "mlp": ("syn_scaled", {"input": [784], "layers": [
        {"type": "dense", "units": 64}, {"type": "relu"}, {"type": "dense", "units": 10}]}),
    "cnn": ("syn_std", {"input": [1, 28, 28], "layers": [
        {"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1}, {"type": "relu"},
        {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"}, {"type": "dense", "units": 10}]}),
    "bn_dropout": ("syn_std", {"input": [784], "layers": [
        {"type": "dense", "units": 32}, {"type": "batchnorm"}, {"type": "leaky_relu", "alpha": 0.1},
        {"type": "dropout", "rate": 0.3}, {"type": "dense", "units": 10}]}),
    "cnn_more": ("syn_scaled", {"input": [1, 28, 28], "layers": [
        {"type": "conv2d", "filters": 3, "kernel": 5, "stride": 2, "padding": 2}, {"type": "batchnorm"},
        {"type": "tanh"}, {"type": "avgpool2d", "kernel": 2}, {"type": "sigmoid"},
        {"type": "conv2d", "filters": 4, "kernel": 3}, {"type": "global_avgpool"},
        {"type": "dense", "units": 10}]}),
}

BLOB_SPECS = {
    "bce_blob": {"input": [6], "loss": "binary_cross_entropy", "layers": [
        {"type": "dense", "units": 4}, {"type": "tanh"}, {"type": "dense", "units": 1}]},
    "bce_multi_blob": {"input": [5], "loss": "binary_cross_entropy", "layers": [
        {"type": "dense", "units": 3}]},
    "mse_blob": {"input": [1, 4, 4], "loss": "mse", "layers": [
        {"type": "conv2d", "filters": 2, "kernel": 3}, {"type": "relu"}]},
    # a softmax layer inside the network: ONNX's Softmax over the last axis
    "softmax_mid_blob": {"input": [6], "loss": "mse", "layers": [
        {"type": "dense", "units": 5}, {"type": "softmax"}, {"type": "dense", "units": 3}]},
    # pools with pads (which never win a max), ceil_mode's partial windows, count_include_pad either way
    "padded_pools_blob": {"input": [2, 8, 8], "loss": "mse", "layers": [
        {"type": "maxpool2d", "size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        {"type": "avgpool2d", "size": 2, "stride": 1, "padding": 1, "count_include_pad": False},
        {"type": "avgpool2d", "size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        {"type": "avgpool2d", "size": 2, "stride": 1, "padding": 1},
        {"type": "flatten"}, {"type": "dense", "units": 3}]},
}


def fit_models(conn):
    ids = {}
    for name, (packed, spec) in SPECS.items():
        ids[name] = conn.execute("SELECT pgdl.fit(%s, %s::jsonb, %s::jsonb, 1, name => %s)",
                                 (packed, json.dumps(spec), CONFIG, name)).fetchone()[0]
    return ids


def make_blobs(conn):
    """Blobs with He-initialized weights (pgdl.init_model) and 1,000 random inputs for each."""
    rng = np.random.default_rng(11)
    blobs = {}
    for name, spec in BLOB_SPECS.items():
        blob = conn.execute("SELECT pgdl.init_model(%s::jsonb, '{\"seed\": 3}')", (json.dumps(spec),)).fetchone()[0]
        x = rng.normal(0, 1, (N_INPUTS, int(np.prod(spec["input"])))).astype(np.float32)
        blobs[name] = (bytes(blob), spec, x)
    return blobs


# ---- references: pgdl itself, onnxruntime-node, PyTorch ----

def pgdl_predict(conn, model, x):
    """pgdl.predict of model (an id or a blob) for each row of x, through a table of the inputs."""
    conn.execute("DROP TABLE IF EXISTS inputs")
    conn.execute("CREATE TEMP TABLE inputs (i integer, x real[])")
    with conn.cursor().copy("COPY inputs (i, x) FROM STDIN") as copy:
        for i, row in enumerate(x):
            copy.write_row((i, [float(v) for v in row]))
    cast = "bigint" if isinstance(model, int) else "bytea"
    rows = conn.execute(f"SELECT pgdl.predict(%s::{cast}, x) FROM inputs ORDER BY i", (model,)).fetchall()
    return np.array([r[0] for r in rows], dtype=np.float32)


def normalized(x, norm):
    """What pgdl.pack (and pgdl.predict) do to raw features, in float32."""
    if "scale" in norm:
        return x * np.float32(norm["scale"])
    return (x - np.array(norm["mean"], dtype=np.float32)) / np.array(norm["std"], dtype=np.float32)


def ort_installed():
    if os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node")):
        return True				# already installed: nothing to check, no pass counted
    env = dict(os.environ, ONNXRUNTIME_NODE_INSTALL_CUDA="skip")
    try:
        r = subprocess.run(["npm", "ci", "--prefix", HERE, "--no-audit", "--no-fund"], env=env,
                           capture_output=True, text=True, timeout=600)
        ok, detail = r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, detail = False, str(e)
    return check(ok, "npm ci installs onnxruntime-node from package-lock.json", detail)


def input_shape(onnx_bytes, rows):
    """[rows, ...]: the graph input's shape, its batch dimension rows."""
    dims = onnx.load_from_string(onnx_bytes).graph.input[0].type.tensor_type.shape.dim
    return [rows] + [d.dim_value for d in dims[1:]]


def ort_run(onnx_bytes, x, tmp):
    """onnxruntime-node's outputs for the rows of x, fed as the graph input's shape."""
    model_path = os.path.join(tmp, "model.onnx")
    in_path = os.path.join(tmp, "input.f32")
    out_path = os.path.join(tmp, "output.f32")
    with open(model_path, "wb") as f:
        f.write(onnx_bytes)
    x.astype("<f4").tofile(in_path)
    r = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model_path, in_path,
                        ",".join(str(d) for d in input_shape(onnx_bytes, x.shape[0])), out_path], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("ort_run.js failed: " + r.stderr[-2000:])
    return np.fromfile(out_path, dtype="<f4").reshape(x.shape[0], -1)


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def torch_module(node, w, rank):
    """One ONNX node, reading a tensor of rank dimensions, as a torch.nn module; its weights from w."""
    a, op, nn = attrs(node), node.op_type, torch.nn
    if op == "Gemm":
        assert a.get("transB") == 1 and a.get("transA", 0) == 0
        m = nn.Linear(w[node.input[1]].shape[1], w[node.input[1]].shape[0])
        m.weight.data, m.bias.data = w[node.input[1]], w[node.input[2]]
        return m
    if op == "Conv":
        pads = a.get("pads", [0, 0, 0, 0])
        assert len(set(pads)) == 1 and a["kernel_shape"][0] == a["kernel_shape"][1]
        wt = w[node.input[1]]
        m = nn.Conv2d(wt.shape[1], wt.shape[0], a["kernel_shape"][0], stride=a["strides"][0], padding=pads[0])
        m.weight.data, m.bias.data = wt, w[node.input[2]]
        return m
    if op == "BatchNormalization":
        c = w[node.input[1]].shape[0]
        m = (nn.BatchNorm1d if rank == 2 else nn.BatchNorm2d)(c, eps=a["epsilon"])
        m.weight.data, m.bias.data = w[node.input[1]], w[node.input[2]]
        m.running_mean.data, m.running_var.data = w[node.input[3]], w[node.input[4]]
        return m
    pads = a.get("pads", [0, 0, 0, 0])
    if op in ("MaxPool", "AveragePool"):
        assert len(set(pads)) == 1, pads  # torch pads every side alike
    simple = {
        "MaxPool": lambda: nn.MaxPool2d(a["kernel_shape"][0], stride=a["strides"][0], padding=pads[0],
                                        ceil_mode=bool(a.get("ceil_mode", 0))),
        "AveragePool": lambda: nn.AvgPool2d(a["kernel_shape"][0], stride=a["strides"][0], padding=pads[0],
                                            ceil_mode=bool(a.get("ceil_mode", 0)),
                                            count_include_pad=bool(a.get("count_include_pad", 0))),
        "GlobalAveragePool": lambda: nn.AdaptiveAvgPool2d(1),
        "Flatten": lambda: nn.Flatten(a["axis"]),
        "Relu": nn.ReLU, "Sigmoid": nn.Sigmoid, "Tanh": nn.Tanh, "Identity": nn.Identity,
        "LeakyRelu": lambda: nn.LeakyReLU(a["alpha"]),
        "Softmax": lambda: nn.Softmax(a["axis"]),
        "Dropout": lambda: nn.Dropout(float(w[node.input[1]])),
    }
    if op in simple:
        return simple[op]()
    raise ValueError(f"no torch module for {op}")


class Elementwise(torch.nn.Module):
    def __init__(self, op, c):
        super().__init__()
        self.op, self.c = op, c

    def forward(self, x):
        return {"Mul": torch.mul, "Sub": torch.sub, "Div": torch.div}[self.op](x, self.c)


def torch_run(model, x):
    """The exported graph, a chain, rebuilt as torch modules from its initializers and run in eval mode."""
    w = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
    t = torch.from_numpy(x.reshape([x.shape[0]] + [d.dim_value for d in
                                                   model.graph.input[0].type.tensor_type.shape.dim[1:]]))
    prev = model.graph.input[0].name
    with torch.no_grad():
        for node in model.graph.node:
            assert node.input[0] == prev, f"{node.name} does not read {prev}"
            if node.op_type in ("Mul", "Sub", "Div"):
                m = Elementwise(node.op_type, w[node.input[1]])
            else:
                m = torch_module(node, w, t.dim())
            t = m.eval()(t)
            prev = node.output[0]
    return t.reshape(x.shape[0], -1).numpy()


def compare(what, got, want):
    """got within TOL of want, which must vary (all zeros would make any match vacuous)."""
    check(float(np.std(want)) > 1e-3, f"{what}: pgdl.predict's outputs vary (std {float(np.std(want)):.2e})")
    diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
    check(diff <= TOL, f"{what} within {TOL} of pgdl.predict (max difference {diff:.2e})",
          f"shapes {got.shape} and {want.shape}")


# ---- structure and metadata ----

def check_structure(what, onnx_bytes, spec, meta_want, normalize):
    model = onnx.load_from_string(onnx_bytes)
    try:
        onnx.checker.check_model(model, full_check=True)
        check(True, f"{what}: onnx.checker accepts it")
    except Exception as e:  # noqa: BLE001 -- whatever the checker says is the failure
        check(False, f"{what}: onnx.checker accepts it", e)
    check(model.ir_version == 7 and [(o.domain, o.version) for o in model.opset_import] == [("", 13)]
          and model.producer_name == "pgdl" and model.producer_version == "0.7.0",
          f"{what}: IR 7, opset 13, producer pgdl 0.7.0")
    dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    g = model.graph
    check(len(g.input) == 1 and g.input[0].name == "input" and dims(g.input[0]) == ["batch"] + spec["input"],
          f"{what}: input [batch, {spec['input']}]", dims(g.input[0]))
    check(len(g.output) == 1 and g.output[0].name == "output" and dims(g.output[0])[0] == "batch"
          and len(dims(g.output[0])) == 2, f"{what}: output [batch, outputs]", dims(g.output[0]))
    names = [n.name for n in g.node]
    lead = ["pgdl_normalize_mul"] if normalize == "scale" else \
        ["pgdl_normalize_sub", "pgdl_normalize_div"] if normalize == "standardize" else []
    check(names[:len(lead)] == lead and all(not n.startswith("pgdl_normalize") for n in names[len(lead):]),
          f"{what}: normalization nodes {lead}", names)
    layers = [n for n in names if n.startswith("layer") and "_" not in n]
    check(layers == [f"layer{i}" for i in range(len(spec["layers"]))], f"{what}: a node per layer", names)
    inits = {t.name for t in g.initializer}
    check(all(t.data_type == onnx.TensorProto.FLOAT and t.HasField("raw_data") for t in g.initializer)
          and ("layer0.weight" in inits or spec["layers"][0]["type"] not in ("dense", "conv2d")),
          f"{what}: float32 initializers in raw_data, named layer<i>.<tensor>", sorted(inits))
    meta = {p.key: json.loads(p.value) for p in model.metadata_props}
    check(meta == meta_want, f"{what}: metadata", json.dumps(meta)[:1500] + "\n" + json.dumps(meta_want)[:1500])
    return model


def dataset_of(conn, model_id):
    return conn.execute("SELECT d.classes, d.normalization FROM pgdl.models m JOIN pgdl.datasets d "
                        "ON d.id = m.dataset WHERE m.id = %s", (model_id,)).fetchone()


def check_stored(conn, name, model_id, x, tmp, ort_ok):
    spec = SPECS[name][1]
    classes, norm = dataset_of(conn, model_id)
    kind = "scale" if "scale" in norm else "standardize"
    base_meta = {"pgdl.classes": classes, "pgdl.loss": "cross_entropy"}
    want = pgdl_predict(conn, model_id, x)
    exports = {
        "with_normalization => true": (conn.execute("SELECT pgdl.export_onnx(%s::bigint)", (model_id,)).fetchone()[0],
                              kind, x, dict(base_meta, **{"pgdl.normalization": norm,
                                                          "pgdl.model": {"id": model_id, "name": name}})),
        "with_normalization => false": (conn.execute("SELECT pgdl.export_onnx(%s::text, false)", (name,)).fetchone()[0],
                               None, normalized(x, norm),
                               dict(base_meta, **{"pgdl.model": {"id": model_id, "name": name}})),
        "its blob": (conn.execute("SELECT pgdl.export_onnx(weights) FROM pgdl.models WHERE id = %s",
                                  (model_id,)).fetchone()[0], None, normalized(x, norm),
                     {"pgdl.classes": [str(i) for i in range(10)], "pgdl.loss": "cross_entropy"}),
    }
    by_name = conn.execute("SELECT pgdl.export_onnx(%s::text)", (name,)).fetchone()[0]
    check(bytes(by_name) == bytes(exports["with_normalization => true"][0]), f"{name}: by name and by id, the same file")
    for how, (blob, normalize, inputs, meta) in exports.items():
        what = f"{name} ({how})"
        model = check_structure(what, bytes(blob), spec, meta, normalize)
        if ort_ok:
            try:
                compare(f"{what}: onnxruntime-node", ort_run(bytes(blob), inputs, tmp), want)
            except Exception as e:  # noqa: BLE001
                check(False, f"{what}: onnxruntime-node runs it", e)
        else:
            check(False, f"{what}: onnxruntime-node runs it", "onnxruntime-node is not installed")
        try:
            compare(f"{what}: PyTorch from the initializers", torch_run(model, inputs), want)
        except Exception as e:  # noqa: BLE001
            check(False, f"{what}: PyTorch rebuilt from the initializers runs it", repr(e))


def check_blob(conn, name, blob, spec, x, tmp, ort_ok):
    loss = spec["loss"]
    onnx_bytes = bytes(conn.execute("SELECT pgdl.export_onnx(%s::bytea)", (blob,)).fetchone()[0])
    meta = {"pgdl.loss": loss}
    if loss == "binary_cross_entropy" and spec["layers"][-1]["units"] == 1:  # one label: classes 0 and 1
        meta["pgdl.classes"] = ["0", "1"]
    model = check_structure(name, onnx_bytes, spec, meta, None)
    want = pgdl_predict(conn, blob, x)
    if ort_ok:
        try:
            compare(f"{name}: onnxruntime-node", ort_run(onnx_bytes, x, tmp), want)
        except Exception as e:  # noqa: BLE001
            check(False, f"{name}: onnxruntime-node runs it", e)
    else:
        check(False, f"{name}: onnxruntime-node runs it", "onnxruntime-node is not installed")
    compare(f"{name}: PyTorch from the initializers", torch_run(model, x), want)


# ---- hostile input ----

def error_of(conn, sql, params=()):
    try:
        conn.execute(sql, params)
        return None
    except psycopg.Error as e:
        return (e.sqlstate, e.diag.message_primary)


def check_hostile(conn, model_id):
    for arg in ("NULL::bigint", "NULL::text", "NULL::bytea", f"{model_id}::bigint, NULL"):
        check(conn.execute(f"SELECT pgdl.export_onnx({arg}) IS NULL").fetchone()[0],
              f"export_onnx({arg}) is NULL")
    e = error_of(conn, "SELECT pgdl.export_onnx('\\x0102030405'::bytea)")
    check(e is not None and e[0] == "XX001" and e[1] == "invalid pgdl model", "a forged blob: invalid pgdl model", e)
    e = error_of(conn, "SELECT pgdl.export_onnx(substring(weights for length(weights) - 7)) FROM pgdl.models "
                 "WHERE id = %s", (model_id,))
    check(e is not None and e[0] == "XX001", "a truncated blob: invalid pgdl model", e)
    e = error_of(conn, "SELECT pgdl.export_onnx(-1::bigint)")
    check(e == ("42704", "model -1 does not exist"), "a model that does not exist", e)

    with conn.transaction(force_rollback=True):
        conn.execute("UPDATE pgdl.datasets d SET n_features = 100, normalization = '{\"scale\": 1}' "
                     "FROM pgdl.models m WHERE m.dataset = d.id AND m.id = %s", (model_id,))
        e = error_of(conn, "SELECT pgdl.export_onnx(%s::bigint)", (model_id,))
    check(e == ("42804", "model input does not match the dataset"),
          "a forged dataset row of another size: refused", e)

    conn.execute("CREATE ROLE onnx_alice; CREATE ROLE onnx_bob")
    conn.execute("GRANT CREATE ON SCHEMA public TO onnx_alice; GRANT SELECT ON syn TO onnx_alice")
    conn.execute("SET ROLE onnx_alice")
    conn.execute("CREATE TABLE alice_syn AS SELECT * FROM syn WHERE id < 128")
    conn.execute("SELECT pgdl.pack('alice_syn', 'image', 'label', 'alice_packed', partitions => 1, scale => 1 / 255.0)")
    alice = conn.execute("SELECT pgdl.fit('alice_packed', %s::jsonb, %s::jsonb, 1, name => 'alice_mlp')",
                         (json.dumps(SPECS["mlp"][1]), CONFIG)).fetchone()[0]
    conn.execute("SET ROLE onnx_bob")
    e = error_of(conn, "SELECT pgdl.export_onnx(%s::bigint)", (alice,))
    check(e == ("42704", f"model {alice} does not exist"), "another role's model by id: does not exist", e)
    e = error_of(conn, "SELECT pgdl.export_onnx('alice_mlp')")
    check(e == ("42704", 'model "alice_mlp" does not exist'), "another role's model by name: does not exist", e)
    conn.execute("RESET ROLE; SET ROLE onnx_alice")
    conn.execute("SELECT pgdl.grant_model(%s::bigint, 'onnx_bob')", (alice,))
    conn.execute("RESET ROLE; SET ROLE onnx_bob")
    blob = conn.execute("SELECT pgdl.export_onnx('alice_mlp')").fetchone()[0]
    meta = {p.key: json.loads(p.value) for p in onnx.load_from_string(bytes(blob)).metadata_props}
    check(meta.get("pgdl.model") == {"id": alice, "name": "alice_mlp"} and "pgdl.normalization" in meta,
          "another role's model once granted: exported with its dataset", meta)
    conn.execute("RESET ROLE")
    # roles outlive the database: leave none, so that the tests run again on the same server
    conn.execute("DELETE FROM pgdl.models WHERE owner = 'onnx_alice'::regrole")
    conn.execute("DELETE FROM pgdl.runs WHERE owner = 'onnx_alice'::regrole")
    conn.execute("DROP OWNED BY onnx_alice, onnx_bob")
    conn.execute("DROP ROLE onnx_alice, onnx_bob")


def main():
    conn = connect()
    conn.execute("CREATE EXTENSION pgdl")
    x = make_data(conn)
    ids = fit_models(conn)
    blobs = make_blobs(conn)
    ort_ok = ort_installed()
    with tempfile.TemporaryDirectory() as tmp:
        for name, model_id in ids.items():
            check_stored(conn, name, model_id, x[:N_INPUTS], tmp, ort_ok)
        for name, (blob, spec, bx) in blobs.items():
            check_blob(conn, name, blob, spec, bx, tmp, ort_ok)
    check_hostile(conn, ids["mlp"])
    conn.close()


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001 -- an unexpected error is a failure, and the count still ends the run
        check(False, "test_export.py ran to its end", traceback.format_exc())
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
