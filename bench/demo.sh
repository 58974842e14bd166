#!/bin/bash
# bench/demo.sh -- pgdl's main job, from a fresh Debian 12 machine to trained models:
# installs the packages, builds and installs pgdl, starts a private PostgreSQL
# (unless PGHOST/PGDATABASE name one), loads Fashion-MNIST with COPY, sets a
# tenth of the training images aside for validation (pgdl.split), packs them,
# trains design.md's reference MLP (5 epochs) and CNN (2 epochs) with pgdl.fit,
# predicts a few test images, runs a small model selection (8 configurations at
# once on 2 background workers), trains 4 heads on the CNN's frozen convolutions
# through one feature cache (every choice on the validation images), exports the
# CNN as an ONNX file and imports an MLP trained in PyTorch, and scores the
# models on the 10,000 test images once, at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)

echo "== installing packages and pgdl"
bash .ci/install-deps
make -s -j"$(nproc)" >/dev/null
"${sudo[@]}" make -s install >/dev/null

# shellcheck source=bench/pg_private.sh
. bench/pg_private.sh
pg_private_start
psql() { command psql -qX -v ON_ERROR_STOP=1 "$@"; }

echo "== loading Fashion-MNIST with COPY"
start=$SECONDS
load_fmnist
psql -Atc "SELECT 'train: ' || count(*) FROM fmnist_train" -c "SELECT 'test:  ' || count(*) FROM fmnist_test"
echo "   ($((SECONDS - start)) s)"

echo "== a tenth of the training images for validation; packing (shuffled, 128-row buffers, 4 partitions, pixels scaled to [0, 1])"
psql <<'SQL'
CREATE EXTENSION IF NOT EXISTS pgdl;
-- a rerun starts over (dropping a packed table also drops its pgdl.datasets row and its feature caches)
DELETE FROM pgdl.models WHERE name IN ('fmnist_mlp', 'fmnist_cnn');
DELETE FROM pgdl.architectures WHERE name IN ('fmnist_mlp', 'fmnist_cnn');
DROP TABLE IF EXISTS fmnist_train_packed, fmnist_validation_packed, fmnist_test_packed CASCADE;
DROP TABLE IF EXISTS fmnist_split_train, fmnist_split_validation;
SELECT part, n_rows FROM pgdl.split('fmnist_train', 'fmnist_split', validation => 0.1, seed => 42, stratify => 'label');
\timing on
SELECT pgdl.pack('fmnist_split_train', 'image', 'label', 'fmnist_train_packed',
                 buffer_rows => 128, partitions => 4, seed => 42, scale => 1 / 255.0) AS train_dataset;
SELECT pgdl.pack('fmnist_split_validation', 'image', 'label', 'fmnist_validation_packed',
                 buffer_rows => 128, partitions => 1, reference => 'fmnist_train_packed') AS validation_dataset;
SELECT pgdl.pack('fmnist_test', 'image', 'label', 'fmnist_test_packed',
                 buffer_rows => 128, partitions => 1, reference => 'fmnist_train_packed') AS test_dataset;
SQL

echo "== training the reference MLP (784-512-256-10) for 5 epochs"
psql <<'SQL'
SELECT pgdl.add_architecture('fmnist_mlp', '{"input": [784], "layers": [
  {"type": "dense", "units": 512}, {"type": "relu"},
  {"type": "dense", "units": 256}, {"type": "relu"},
  {"type": "dense", "units": 10}], "loss": "cross_entropy"}') AS architecture;
\timing on
SELECT pgdl.fit('fmnist_train_packed', 'fmnist_mlp', '{"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "batch_size": 128}',
                epochs => 5, validation => 'fmnist_validation_packed', name => 'fmnist_mlp') AS model_id;
SQL

echo "== training the reference CNN (conv16-pool-conv32-pool-dense10) for 2 epochs"
psql <<'SQL'
SELECT pgdl.add_architecture('fmnist_cnn', '{"input": [1, 28, 28], "layers": [
  {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2},
  {"type": "flatten"}, {"type": "dense", "units": 10}], "loss": "cross_entropy"}') AS architecture;
\timing on
SELECT pgdl.fit('fmnist_train_packed', 'fmnist_cnn', '{"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "batch_size": 128}',
                epochs => 2, validation => 'fmnist_validation_packed', name => 'fmnist_cnn') AS model_id;
SQL

echo "== training curves (validation images)"
psql <<'SQL'
SELECT r.run, r.epoch, round(r.train_loss::numeric, 4) AS train_loss, round(r.validation_accuracy::numeric, 4) AS validation_accuracy,
       round(r.images_per_second) AS images_per_second
  FROM pgdl.run_metrics r JOIN pgdl.models m ON m.run = r.run
 WHERE m.name IN ('fmnist_mlp', 'fmnist_cnn') ORDER BY r.run, r.epoch;
SQL

echo "== a few predictions (0 T-shirt, 1 Trouser, 2 Pullover, 3 Dress, 4 Coat, 5 Sandal, 6 Shirt, 7 Sneaker, 8 Bag, 9 Ankle boot)"
psql <<'SQL'
SELECT id, label, pgdl.predict_class('fmnist_cnn', image) AS cnn_says, pgdl.predict_class('fmnist_mlp', image) AS mlp_says
  FROM fmnist_test ORDER BY id LIMIT 8;
SQL
echo "== model selection: 8 configurations of the MLP trained at once by 2 background workers (1 epoch)"
psql <<'SQL'
DELETE FROM pgdl.configs WHERE set_name = 'fmnist_demo';
SELECT pgdl.grid_search('fmnist_demo', ARRAY['fmnist_mlp'],
  '{"optimizer": ["sgd", "adam"], "lr": [0.001, 0.01], "batch_size": [64, 128], "momentum": 0.9}') AS configurations;
\timing on
SELECT rank, config_json->>'optimizer' AS optimizer, config_json->>'lr' AS lr, config_json->>'batch_size' AS batch,
       round(validation_loss::numeric, 4) AS validation_loss, round(validation_accuracy::numeric, 4) AS validation_accuracy
  FROM pgdl.fit_multiple('fmnist_train_packed', 'fmnist_demo', epochs => 1, validation => 'fmnist_validation_packed',
                         workers => 2);
SQL
echo "== transfer learning: 4 heads on the CNN's frozen convolutions, sharing one feature cache (2 epochs)"
psql <<'SQL'
DELETE FROM pgdl.configs WHERE set_name = 'fmnist_heads';
SELECT pgdl.grid_search('fmnist_heads', '{}', '{"base_model": "fmnist_cnn", "freeze": "flatten",
  "head": [[{"type": "dense", "units": 10}], [{"type": "dense", "units": 64}, {"type": "relu"}, {"type": "dense", "units": 10}]],
  "lr": [0.01, 0.05], "momentum": 0.9}') AS configurations;
SELECT "group", frozen_layers, configs, action, cache, round(storage_mb::numeric, 1) AS storage_mb,
       round(predicted_seconds::numeric, 1) AS predicted_seconds, reason
  FROM pgdl.explain_fit_multiple('fmnist_train_packed', 'fmnist_heads', 2, 'fmnist_validation_packed', workers => 2);
\timing on
SELECT rank, jsonb_array_length(config_json->'head') AS head_layers, config_json->>'lr' AS lr,
       round(validation_loss::numeric, 4) AS validation_loss, round(validation_accuracy::numeric, 4) AS validation_accuracy
  FROM pgdl.fit_multiple('fmnist_train_packed', 'fmnist_heads', epochs => 2, validation => 'fmnist_validation_packed',
                         workers => 2);
\timing off
SELECT view, rows, pg_size_pretty(bytes) AS size, valid FROM pgdl.feature_cache ORDER BY id;
SQL
echo "== models in and out: the CNN as an ONNX file, and an MLP trained in PyTorch brought in"
onnx_dir=$(mktemp -d)
psql -Atc "SELECT encode(pgdl.export_onnx('fmnist_cnn'), 'base64')" | base64 -d >"$onnx_dir/fmnist_cnn.onnx"
/usr/bin/python3 - "$onnx_dir/fmnist_cnn.onnx" <<'PY'
import sys
import onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m)
print(f"   fmnist_cnn.onnx: {len(m.graph.node)} nodes ({' '.join(n.op_type for n in m.graph.node)}), "
      "accepted by onnx.checker")
PY
/usr/bin/python3 bench/torch_mlp_onnx.py "$onnx_dir/torch_mlp.onnx"
psql -v file="$onnx_dir/torch_mlp.onnx" <<'SQL'
DELETE FROM pgdl.models WHERE name = 'torch_mlp';
\set onnx `base64 -w0 :file`
SELECT pgdl.import_onnx('torch_mlp', decode(:'onnx', 'base64'), dataset => 'fmnist_train_packed') AS imported;
SELECT round(accuracy::numeric, 4) AS test_accuracy_in_pgdl FROM pgdl.evaluate('torch_mlp', 'fmnist_test_packed');  -- PyTorch's own figure, above
SQL
rm -rf "$onnx_dir"
echo "== the test set, once, at the end: the models above on the 10,000 test images no choice looked at"
psql <<'SQL'
SELECT m.name AS model, round(e.loss::numeric, 4) AS test_loss, round(e.accuracy::numeric, 4) AS test_accuracy, e.n
  FROM pgdl.models m, LATERAL pgdl.evaluate(m.id, 'fmnist_test_packed') e
 WHERE m.name IN ('fmnist_mlp', 'fmnist_cnn') ORDER BY m.name DESC;
SQL
echo "== done"
