#!/usr/bin/python3
"""pgdl.import_onnx of what torch.onnx.export (torch 1.13) writes for real networks (issue 40).

1. torchvision's resnet18 (random weights, torch.manual_seed(0), num_classes 10, eval mode), input
   [batch, 3, 32, 32], exported at opset 13 and 17 with torch's defaults (do_constant_folding: each
   BatchNorm2d folded into the Conv before it) and with training=TrainingMode.PRESERVE and do_constant_folding=False
   (BatchNormalization nodes kept): pgdl.predict matches torch's logits within 1e-4 on 20 random inputs (loss => 'mse'), and
   their softmax with the default loss.
2. The imported ResNet trains further: warm_start copies every layer with weights, and it is a base model
   for transfer learning, frozen through its flatten; a cut inside a residual block is refused (22023).
3. A GRU classifier over embeddings (int64 ids in, its last state through a Linear), opset 13 and 17, its
   state taken as h[-1] or h.squeeze(0): pgdl.predict matches torch within 1e-4 on 50 id sequences; ids
   read by anything but an embedding's Gather are refused with 0A000.
4. nn.LayerNorm and nn.GELU as torch writes them (LayerNorm decomposed into ReduceMean, Sub, Pow, Sqrt, Div,
   Mul, Add at opset 13, LayerNormalization at 17; GELU as Div, Erf, Add, Mul, Mul) in an MLP and on each
   step of a sequence: pgdl's layernorm and gelu, matching torch within 1e-4.
5. nn.TransformerEncoderLayer (dropout 0, batch_first, relu or gelu) over embeddings, at opset 13 and 17: its
   multi-head attention, residual adds, LayerNorms and feed-forward come in as pgdl's encoder block and match
   torch within 1e-4; an attention broken midway is refused with 0A000 naming the node.

Prints "ok - ..." / "not ok - ..." lines and ends with "N passed, M failed".
"""
import collections
import sys
import warnings

import numpy as np
import onnx
import psycopg
import torch
import torchvision

TOL = 1e-4
warnings.filterwarnings("ignore")
passed = 0
failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok - {name}")
    else:
        failed += 1
        print(f"not ok - {name}" + (f": {detail}" if detail else ""))


conn = psycopg.connect(autocommit=True)
conn.execute("SET client_min_messages = warning")
conn.execute("CREATE EXTENSION IF NOT EXISTS pgdl")


def one(query, *args):
    return conn.execute(query, args).fetchone()[0]


def predict(model_id, x):
    return np.array([one("SELECT pgdl.predict(%s::bigint, %s::real[])", model_id, row.ravel().tolist()) for row in x],
                    np.float32)


def export(net, opset, **kw):
    """The file as a user writes it: a dynamic batch, the input named input."""
    path = f"/tmp/pgdl_onnx_resnet{opset}.onnx"
    torch.onnx.export(net, torch.zeros(1, 3, 32, 32), path, opset_version=opset, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **kw)
    with open(path, "rb") as f:
        data = f.read()
    return data, collections.Counter(n.op_type for n in onnx.load_from_string(data).graph.node)


torch.manual_seed(0)
resnet = torchvision.models.resnet18(weights=None, num_classes=10).eval()
# running statistics and affine parameters of a trained network, not the identity of a fresh BatchNorm
with torch.no_grad():
    for m in resnet.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_(0, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.normal_(1, 0.1)
            m.bias.normal_(0, 0.1)
x = torch.randn(20, 3, 32, 32)
with torch.no_grad():
    logits = resnet(x).numpy()
probs = torch.softmax(torch.from_numpy(logits), 1).numpy()

# ---- 1. the file torch writes, BatchNorm folded or kept ----
ids = {}
for opset in (13, 17):
    for how, kw in (("folded", {}), ("kept", {"training": torch.onnx.TrainingMode.PRESERVE, "do_constant_folding": False})):
        data, ops = export(resnet, opset, **kw)
        check(f"resnet18 opset {opset}, BatchNorm {how}: torch writes {ops['BatchNormalization']} BatchNormalization "
              f"nodes and a MaxPool with pads", (ops["BatchNormalization"] == 0) == (how == "folded") and
              ops["MaxPool"] == 1 and ops["Add"] == 8, str(ops))
        mid = one("SELECT pgdl.import_onnx(%s, %s, loss => 'mse')", f"resnet{opset}_{how}", data)
        err = float(np.abs(predict(mid, x.numpy()) - logits).max())
        check(f"resnet18 opset {opset}, BatchNorm {how}: pgdl.predict equals torch's logits within 1e-4",
              err <= TOL, f"max abs error {err:g}")
        ids[(opset, how)] = mid
        n_bn = one("SELECT count(*) FROM jsonb_array_elements((SELECT spec->'layers' FROM pgdl.models WHERE id = %s)) l "
                   "WHERE l->>'type' = 'batchnorm'", mid)
        check(f"resnet18 opset {opset}, BatchNorm {how}: {n_bn} batchnorm layers", n_bn == (0 if how == "folded" else 20))

data, _ = export(resnet, 13)
ce = one("SELECT pgdl.import_onnx('resnet_ce', %s)", data)
err = float(np.abs(predict(ce, x.numpy()) - probs).max())
check("resnet18 with the default loss (cross_entropy, no trailing Softmax): pgdl.predict is the softmax of the logits",
      err <= TOL, f"max abs error {err:g}")

# ---- 2. trained further ----
conn.execute("""CREATE TABLE rn_images AS
                SELECT i, ARRAY(SELECT (sin(i * 7 + k) * 2)::real FROM generate_series(1, 3072) k) AS x, i % 10 AS label
                  FROM generate_series(1, 40) i""")
conn.execute("SELECT pgdl.pack('rn_images', 'x', 'label', 'rn_images_p', buffer_rows => 20, partitions => 1, seed => 1)")
warm = one("""SELECT pgdl.fit('rn_images_p', (SELECT spec FROM pgdl.models WHERE id = %s),
                              jsonb_build_object('lr', 1e-7, 'batch_size', 20, 'warm_start', %s::bigint),
                              epochs => 1, name => 'resnet_warm')""", ce, ce)
copied = one("SELECT origin->'layers_copied' FROM pgdl.models WHERE id = %s", warm)
with_weights = one("SELECT array_agg(DISTINCT layer ORDER BY layer) FROM pgdl.model_weights(%s::bigint)", ce)
check("warm_start from the imported resnet copies every layer with weights", copied == with_weights,
      f"{copied} vs {with_weights}")
rows = np.array([r[0] for r in conn.execute("SELECT x FROM rn_images ORDER BY i").fetchall()], np.float32)
err = float(np.abs(predict(warm, rows) - predict(ce, rows)).max())
check("and after an epoch at lr 1e-7 predicts as the import did, within 1e-4", err <= TOL, f"max abs error {err:g}")

one("""SELECT pgdl.grid_search('rn_heads', '{}', '{"base_model": "resnet_ce", "freeze": "flatten",
                                                  "head": [[{"type": "dense", "units": 10}]], "lr": 0.01}')""")
row = conn.execute("SELECT model, train_loss FROM pgdl.fit_multiple('rn_images_p', 'rn_heads', epochs => 1)").fetchone()
check("the imported resnet is a base model: a head trained on it frozen through its flatten",
      row is not None and row[0] is not None and np.isfinite(row[1]), str(row))
try:
    one("""SELECT pgdl.grid_search('rn_inside', '{}', '{"base_model": "resnet_ce", "freeze": 5, "lr": 0.01}')""")
    check("a cut inside a residual block is refused", False, "accepted")
except psycopg.Error as e:
    check("a cut inside a residual block is refused with 22023, saying why", e.sqlstate == "22023" and
          "several tensors crossing" in (e.diag.message_detail or ""), f"{e.sqlstate}: {e.diag.message_detail}")

# ---- 3. a GRU classifier over embeddings ----
# the export recipe: batch_first GRU of one layer, eval mode, int64 ids [batch, steps] with a dynamic batch;
# torch writes Gather (the embedding), Transpose to time first, Shape/Gather/Unsqueeze/Concat/ConstantOfShape
# for the zero initial state, GRU (linear_before_reset 1), then Gather (h[-1]) or Squeeze (h.squeeze(0)) of Y_h


class GruClassifier(torch.nn.Module):
    def __init__(self, take):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 8)
        self.gru = torch.nn.GRU(8, 6, batch_first=True)
        self.fc = torch.nn.Linear(6, 3)
        self.take = take

    def forward(self, ids):
        _, h = self.gru(self.emb(ids))
        return self.fc(h[-1] if self.take == "gather" else h.squeeze(0))


ids = torch.randint(0, 20, (50, 7), generator=torch.Generator().manual_seed(1))
for opset in (13, 17):
    for take in ("gather", "squeeze"):
        torch.manual_seed(2)
        gru = GruClassifier(take).eval()
        path = f"/tmp/pgdl_onnx_gru{opset}.onnx"
        torch.onnx.export(gru, torch.zeros(1, 7, dtype=torch.long), path, opset_version=opset, input_names=["ids"],
                          output_names=["logits"], dynamic_axes={"ids": {0: "batch"}, "logits": {0: "batch"}})
        with open(path, "rb") as f:
            data = f.read()
        ops = collections.Counter(n.op_type for n in onnx.load_from_string(data).graph.node)
        with torch.no_grad():
            want = gru(ids).numpy()
        mid = one("SELECT pgdl.import_onnx(%s, %s, loss => 'mse')", f"gru_{opset}_{take}", data)
        err = float(np.abs(predict(mid, ids.numpy().astype(np.float32)) - want).max())
        check(f"GRU classifier opset {opset} ({take} of Y_h; {ops['GRU']} GRU, {ops['ConstantOfShape']} "
              f"ConstantOfShape): pgdl.predict equals torch within 1e-4", err <= TOL, f"max abs error {err:g}")
        layers = one("SELECT string_agg(l->>'type', ' ') FROM jsonb_array_elements("
                     "(SELECT spec->'layers' FROM pgdl.models WHERE id = %s)) l", mid)
        check(f"GRU classifier opset {opset} ({take}): the layers are embedding gru dense", layers == "embedding gru dense",
              layers)

# the ids go only into an embedding: anything else on them is refused, naming the node
bad = onnx.helper.make_model(onnx.helper.make_graph(
    [onnx.helper.make_node("Relu", ["ids"], ["y"], name="on_ids")], "g",
    [onnx.helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, ["batch", 4])],
    [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT64, ["batch", 4])]),
    opset_imports=[onnx.helper.make_opsetid("", 13)]).SerializeToString()
try:
    one("SELECT pgdl.import_onnx('bad_ids', %s)", bad)
    check("a Relu of int64 ids is refused", False, "accepted")
except psycopg.Error as e:
    check("a Relu of int64 ids is refused with 0A000 naming the node", e.sqlstate == "0A000" and
          '"on_ids" (Relu)' in e.diag.message_primary, f"{e.sqlstate}: {e.diag.message_primary}")

# ---- 4. LayerNorm and GELU as torch writes them: decomposed below opset 17, GELU as Erf before opset 20 ----


class SeqNorm(torch.nn.Module):
    """ids -> Embedding -> LayerNorm and GELU on each step -> GRU -> Linear: the norm over each step's features."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(12, 8)
        self.norm = torch.nn.LayerNorm(8, eps=1e-4)
        self.gru = torch.nn.GRU(8, 5, batch_first=True)
        self.fc = torch.nn.Linear(5, 2)

    def forward(self, ids):
        _, h = self.gru(torch.nn.functional.gelu(self.norm(self.emb(ids))))
        return self.fc(h[-1])


torch.manual_seed(3)
mlp = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 3)).eval()
seq = SeqNorm().eval()
with torch.no_grad():
    for norm in (mlp[1], seq.norm):
        norm.weight.normal_(1, 0.2)
        norm.bias.normal_(0, 0.2)
xs = {"mlp": torch.randn(40, 10), "seq": torch.randint(0, 12, (40, 6), generator=torch.Generator().manual_seed(4))}
for what, net, dummy in (("mlp", mlp, torch.zeros(1, 10)), ("seq", seq, torch.zeros(1, 6, dtype=torch.long))):
    for opset in (13, 17):
        path = f"/tmp/pgdl_onnx_norm_{what}{opset}.onnx"
        torch.onnx.export(net, dummy, path, opset_version=opset, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        with open(path, "rb") as f:
            data = f.read()
        ops = collections.Counter(n.op_type for n in onnx.load_from_string(data).graph.node)
        with torch.no_grad():
            want = net(xs[what]).numpy()
        mid = one("SELECT pgdl.import_onnx(%s, %s, loss => 'mse')", f"norm_{what}{opset}", data)
        err = float(np.abs(predict(mid, xs[what].numpy().astype(np.float32)) - want).max())
        layers = one("SELECT string_agg(l->>'type', ' ') FROM jsonb_array_elements("
                     "(SELECT spec->'layers' FROM pgdl.models WHERE id = %s)) l", mid)
        check(f"LayerNorm and GELU ({what}) at opset {opset} ({ops['LayerNormalization']} LayerNormalization, "
              f"{ops['ReduceMean']} ReduceMean, {ops['Erf']} Erf) come in as layernorm and gelu: {layers}",
              "layernorm gelu" in layers and "mean" not in layers, layers)
        check(f"LayerNorm and GELU ({what}) at opset {opset}: pgdl.predict equals torch within 1e-4", err <= TOL,
              f"max abs error {err:g}")

# ---- 5. nn.TransformerEncoderLayer over embeddings ----
# the export recipe: Embedding(11, 8), TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
# batch_first=True, activation relu or gelu) in eval mode (dropout 0: no Dropout nodes), the mean over the steps,
# Linear(8, 3); int64 ids [batch, 5], a dynamic batch. torch 1.13 writes the attention with Shape/Gather/Concat
# reshapes, LayerNorm decomposed, GELU as Erf


class Encoder(torch.nn.Module):
    def __init__(self, act):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 8)
        self.enc = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
                                                    batch_first=True, activation=act)
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, ids):
        return self.fc(self.enc(self.emb(ids)).mean(1))


ids = torch.randint(0, 11, (50, 5), generator=torch.Generator().manual_seed(6))
for act in ("relu", "gelu"):
    torch.manual_seed(7)
    enc = Encoder(act).eval()
    with torch.no_grad():
        want = enc(ids).numpy()
    for opset in (13, 17):
        path = f"/tmp/pgdl_onnx_encoder_{act}{opset}.onnx"
        torch.onnx.export(enc, torch.zeros(1, 5, dtype=torch.long), path, opset_version=opset, input_names=["ids"],
                          output_names=["logits"], dynamic_axes={"ids": {0: "batch"}, "logits": {0: "batch"}})
        with open(path, "rb") as f:
            data = f.read()
        ops = collections.Counter(n.op_type for n in onnx.load_from_string(data).graph.node)
        mid = one("SELECT pgdl.import_onnx(%s, %s, loss => 'mse')", f"encoder_{act}{opset}", data)
        err = float(np.abs(predict(mid, ids.numpy().astype(np.float32)) - want).max())
        layers = one("SELECT string_agg(l->>'type', ' ') FROM jsonb_array_elements("
                     "(SELECT spec->'layers' FROM pgdl.models WHERE id = %s)) l", mid)
        check(f"encoder layer ({act}, opset {opset}, {sum(ops.values())} nodes): pgdl.predict equals torch within "
              f"1e-4", err <= TOL, f"max abs error {err:g}")
        check(f"encoder layer ({act}, opset {opset}): its layers are pgdl's encoder block",
              layers == f"embedding attention add layernorm dense {act} dense add layernorm global_avgpool dense", layers)

# a graph that leaves torch's attention midway is refused, naming the node: q k' without the scaling
data = onnx.load(f"/tmp/pgdl_onnx_encoder_relu13.onnx")
for n in data.graph.node:
    if n.op_type == "Div" and n.output[0].endswith("Div_2_output_0"):
        n.input[1] = n.input[0]  # q / q: not a scaling by a constant
try:
    one("SELECT pgdl.import_onnx('encoder_broken', %s, loss => 'mse')", data.SerializeToString())
    check("an attention without its scaling is refused", False, "accepted")
except psycopg.Error as e:
    check("an attention without its scaling is refused with 0A000 naming the node", e.sqlstate == "0A000" and
          "(Div)" in e.diag.message_primary, f"{e.sqlstate}: {e.diag.message_primary}: {e.diag.message_detail}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
