"""ONNX round trips (docs/reference/onnx.md): a model pgdl exports and imports again has the same weights,
bit for bit, and the same predictions; so does a model that went PyTorch -> pgdl -> ONNX -> pgdl.  Run by
regress/onnx/run.sh with PGHOST/PGPORT/PGUSER/PGDATABASE set; ends with "N passed, N failed"."""
import sys

import numpy as np
import psycopg
import torch

PASSED = 0
FAILED = 0


def check(name, ok, detail=""):
    global PASSED, FAILED
    if ok:
        PASSED += 1
        print(f"ok - {name}")
    else:
        FAILED += 1
        print(f"not ok - {name}{': ' + detail if detail else ''}")


def one(conn, sql, *args):
    return conn.execute(sql, args).fetchone()[0]


WEIGHTS = """SELECT md5(string_agg(array_send("values"), ''::bytea ORDER BY layer, name))
               FROM pgdl.model_weights(%s::bigint)"""
SIZES = """SELECT string_agg(name || ':' || array_length("values", 1), ' ' ORDER BY layer, name)
             FROM pgdl.model_weights(%s::bigint)"""


def setup(conn):
    conn.execute("CREATE EXTENSION IF NOT EXISTS pgdl")
    # 12 features over 3 classes, standardized by pack (mean/std normalization)
    conn.execute("""
        CREATE TABLE points AS
        SELECT i, ARRAY(SELECT (sin(i * k) * k + k)::real FROM generate_series(1, 12) k) AS x,
               (i % 3) AS label FROM generate_series(1, 600) i""")
    conn.execute("SELECT pgdl.pack('points', 'x', 'label', 'points_packed', buffer_rows => 50, partitions => 1, "
                 "seed => 1, standardize => true)")
    conn.execute("""
        CREATE TABLE images AS
        SELECT i, ARRAY(SELECT (random() * 255)::real FROM generate_series(1, 64)) AS x, (i % 4) AS label
          FROM generate_series(1, 256) i""")
    conn.execute("SELECT pgdl.pack('images', 'x', 'label', 'images_packed', buffer_rows => 64, partitions => 1, "
                 "seed => 1, scale => 1 / 255.0)")


SPECS = {
    "mlp": ("points_packed", '{"input": [12], "layers": [{"type": "dense", "units": 16}, {"type": "relu"}, '
                             '{"type": "batchnorm"}, {"type": "dropout", "rate": 0.2}, {"type": "dense", "units": 3}]}'),
    "cnn": ("images_packed", '{"input": [1, 8, 8], "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, '
                             '"padding": 1}, {"type": "batchnorm"}, {"type": "leaky_relu", "alpha": 0.1}, '
                             '{"type": "maxpool2d", "size": 2}, {"type": "conv2d", "filters": 6, "kernel": 3}, '
                             '{"type": "tanh"}, {"type": "flatten"}, {"type": "dense", "units": 4}]}'),
    # graphs (docs/reference/training.md): a residual add, slices of the input joined by a concat, and on
    # images a residual block beside a 1x1 convolution of the input, concatenated along channels
    "resmlp": ("points_packed", '{"input": [12], "layers": [{"type": "dense", "units": 16, "name": "d1"}, '
                                '{"type": "relu"}, {"type": "dense", "units": 16, "name": "d2"}, '
                                '{"type": "add", "inputs": ["d1", "d2"]}, {"type": "batchnorm"}, '
                                '{"type": "dense", "units": 3}]}'),
    "slices": ("points_packed", '{"input": [12], "layers": [{"type": "slice", "name": "s1", "inputs": ["input"], '
                                '"start": 0, "length": 5}, {"type": "slice", "name": "s2", "inputs": ["input"], '
                                '"start": 5, "length": 7}, {"type": "dense", "units": 8, "name": "d1", "inputs": ["s1"]}, '
                                '{"type": "dense", "units": 8, "name": "d2", "inputs": ["s2"]}, '
                                '{"type": "concat", "inputs": ["d1", "d2"]}, {"type": "tanh"}, {"type": "dense", "units": 3}]}'),
    "rescnn": ("images_packed", '{"input": [1, 8, 8], "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, '
                                '"padding": 1}, {"type": "relu", "name": "r1"}, {"type": "conv2d", "filters": 4, '
                                '"kernel": 3, "padding": 1}, {"type": "batchnorm", "name": "b2"}, '
                                '{"type": "add", "inputs": ["r1", "b2"], "name": "sum"}, {"type": "conv2d", "filters": 3, '
                                '"kernel": 1, "name": "c3", "inputs": ["input"]}, {"type": "concat", "inputs": ["sum", "c3"]}, '
                                '{"type": "maxpool2d", "size": 2}, {"type": "flatten"}, {"type": "dense", "units": 4}]}'),
    # gelu (its Erf subgraph) and layernorm (LayerNormalization: the file is opset 17)
    "gelu_norm": ("points_packed", '{"input": [12], "layers": [{"type": "dense", "units": 10}, {"type": "gelu"}, '
                                   '{"type": "layernorm", "eps": 0.001}, {"type": "dense", "units": 3}]}'),
    # an add of three: export writes a chain of two Adds, which come back as two add layers (same weights)
    "add3": ("points_packed", '{"input": [12], "layers": [{"type": "dense", "units": 6, "name": "a"}, '
                              '{"type": "dense", "units": 6, "name": "b", "inputs": ["input"]}, '
                              '{"type": "dense", "units": 6, "name": "c", "inputs": ["input"]}, '
                              '{"type": "add", "inputs": ["a", "b", "c"]}, {"type": "dense", "units": 3}]}'),
}
# the networks whose file written again from the import is the first one, node for node
SAME_NETWORK = {"mlp", "cnn", "resmlp", "slices", "rescnn", "gelu_norm"}


def round_trips(conn):
    for kind, (packed, spec) in SPECS.items():
        model = one(conn, f"SELECT pgdl.fit('{packed}', '{spec}'::jsonb, '{{\"lr\": 0.05, \"batch_size\": 32}}', "
                          f"epochs => 2, name => '{kind}')")
        source = packed.replace("_packed", "")
        # without normalization nodes: the network alone, then linked to the dataset on the way in
        blob = one(conn, "SELECT pgdl.export_onnx(%s::bigint, with_normalization => false)", model)
        back = one(conn, f"SELECT pgdl.import_onnx('{kind}_back', %s, dataset => '{packed}')", blob)
        check(f"{kind}: export -> import keeps every weight and running statistic, bit for bit",
              one(conn, WEIGHTS, model) == one(conn, WEIGHTS, back))
        check(f"{kind}: and every tensor's size", one(conn, SIZES, model) == one(conn, SIZES, back))
        same = one(conn, f"""
            SELECT bool_and(array_send(pgdl.predict(%s::bigint, x)) = array_send(pgdl.predict(%s::bigint, x)))
              FROM {source}""", model, back)
        check(f"{kind}: the imported model predicts the same bytes on every row", same)
        # with the dataset's normalization as leading nodes: recognized and dropped again
        blob = one(conn, "SELECT pgdl.export_onnx(%s::bigint)", model)
        back = one(conn, f"SELECT pgdl.import_onnx('{kind}_norm', %s, dataset => '{packed}')", blob)
        check(f"{kind}: the normalizing export comes back with the same weights",
              one(conn, WEIGHTS, model) == one(conn, WEIGHTS, back))
        # twice around: the second file is the first, byte for byte (names and metadata included)
        again = one(conn, "SELECT pgdl.export_onnx(%s::bigint, with_normalization => false)", back)
        first = one(conn, "SELECT pgdl.export_onnx(%s::bigint, with_normalization => false)", model)
        if kind in SAME_NETWORK:
            check(f"{kind}: exporting the imported model writes the same network", network_equal(first, again))
        else:
            check(f"{kind}: exporting the imported model writes a network of as many weights",
                  len(onnx_graph(first).initializer) == len(onnx_graph(again).initializer))


def onnx_graph(blob):
    import onnx
    return onnx.load_from_string(bytes(blob)).graph


def network_equal(a, b):
    import onnx
    ga, gb = onnx.load_from_string(bytes(a)).graph, onnx.load_from_string(bytes(b)).graph
    return ([(n.op_type, list(n.input), list(n.output), [str(x) for x in n.attribute]) for n in ga.node]
            == [(n.op_type, list(n.input), list(n.output), [str(x) for x in n.attribute]) for n in gb.node]
            and [i.SerializeToString() for i in ga.initializer] == [i.SerializeToString() for i in gb.initializer])


def from_pytorch(conn):
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(12, 20), torch.nn.ReLU(), torch.nn.Linear(20, 3)).eval()
    path = "/tmp/pgdl_roundtrip_torch.onnx"
    torch.onnx.export(net, torch.zeros(1, 12), path, opset_version=13,
                      dynamic_axes={"input": {0: "batch"}}, input_names=["input"])
    with open(path, "rb") as f:
        data = f.read()
    first = one(conn, "SELECT pgdl.import_onnx('torch_net', %s)", data)
    blob = one(conn, "SELECT pgdl.export_onnx(%s::bigint)", first)
    second = one(conn, "SELECT pgdl.import_onnx('torch_net_again', %s)", blob)
    check("PyTorch -> pgdl -> ONNX -> pgdl keeps the weights bit for bit",
          one(conn, WEIGHTS, first) == one(conn, WEIGHTS, second))
    x = np.random.default_rng(5).standard_normal((1000, 12)).astype(np.float32)
    with torch.no_grad():
        want = torch.softmax(net(torch.from_numpy(x)), 1).numpy()
    got = np.array([one(conn, "SELECT pgdl.predict(%s::bigint, %s::real[])", second, row.tolist()) for row in x],
                   dtype=np.float32)
    err = float(np.max(np.abs(got - want)))
    check("and predicts what PyTorch does within 1e-5 on 1,000 inputs", err <= 1e-5, f"max abs error {err:g}")


# sequences as pgdl's export writes them (Cast of the ids, Gather, Add of positions; Transposes around GRU,
# Squeeze of its state or of every step's; MatMul and Add per step, gelu, layernorm, ReduceMean over the steps), from blobs of pgdl.init_model: imported back, the same weights
SEQUENCES = {
    "gru_positions": '{"input": [6], "loss": "mse", "layers": [{"type": "embedding", "vocab": 9, "dim": 4, '
                     '"positions": true}, {"type": "gru", "units": 5}, {"type": "dense", "units": 3}]}',
    "seq_per_step": '{"input": [6], "loss": "mse", "layers": [{"type": "embedding", "vocab": 5, "dim": 4, '
                    '"positions": true}, {"type": "dense", "units": 5, "per_step": true}, {"type": "gelu"}, '
                    '{"type": "layernorm"}, {"type": "global_avgpool"}, {"type": "dense", "units": 2}]}',
    "gru_stacked": '{"input": [6], "loss": "mse", "layers": [{"type": "embedding", "vocab": 5, "dim": 4}, '
                   '{"type": "gru", "units": 5, "return_sequences": true}, {"type": "gru", "units": 3}, '
                   '{"type": "dense", "units": 2}]}',
}


def sequences(conn):
    ids = np.random.default_rng(8).integers(0, 5, (40, 6)).astype(np.float32)
    for kind, spec in SEQUENCES.items():
        blob = one(conn, "SELECT pgdl.init_model(%s::jsonb, '{\"seed\": 5}')", spec)
        back = one(conn, "SELECT pgdl.import_onnx(%s, pgdl.export_onnx(%s::bytea), loss => 'mse')", kind, blob)
        check(f"{kind}: export -> import keeps every weight, bit for bit",
              one(conn, WEIGHTS.replace("%s::bigint", "%s::bytea"), blob) == one(conn, WEIGHTS, back))
        got = np.array([one(conn, "SELECT pgdl.predict(%s::bigint, %s::real[])", back, r.tolist()) for r in ids])
        want = np.array([one(conn, "SELECT pgdl.predict(%s::bytea, %s::real[])", blob, r.tolist()) for r in ids])
        check(f"{kind}: pgdl's export of a sequence network comes back and predicts the same bytes",
              got.tobytes() == want.tobytes(), f"max abs difference {np.abs(got - want).max():g}")
        layers = one(conn, "SELECT jsonb_array_length(spec->'layers') FROM pgdl.models WHERE id = %s", back)
        check(f"{kind}: with its {layers} layers", layers == len(__import__("json").loads(spec)["layers"]))


def main():
    with psycopg.connect(autocommit=True) as conn:
        setup(conn)
        round_trips(conn)
        sequences(conn)
        from_pytorch(conn)
    print(f"{PASSED} passed, {FAILED} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
