#!/bin/bash
# bench/resnet.sh -- a ResNet-style CNN (two residual blocks with batchnorm,
# the graph form's add) against the reference CNN on Fashion-MNIST, both
# through pgdl.fit with the same optimizer, compared at equal training time:
# the CNN trains CNN_EPOCHS epochs (default 24) in T seconds; the ResNet's test
# accuracy is taken after its last epoch that ends within T (RESNET_EPOCHS,
# default 10, take a little less).  CONFIG is both's training configuration.
#
# Both train on the 60,000 training images (LIMIT > 0: the first LIMIT) and
# are validated on the 10,000 test images after every epoch (pgdl.run_metrics:
# seconds and validation_accuracy of each epoch; the seconds are training time,
# without the validation pass).  One thread each.
#
# Usage: bench/resnet.sh   (make bench-resnet).  Needs pgdl installed; uses the
# server given by PGHOST/PGPORT/PGDATABASE, or starts a private one.  The last
# lines are always
#   resnet: test accuracy X after K epochs in S s
#   cnn: test accuracy Y after N epochs in T s
#   resnet/cnn test accuracy at equal time = R
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CNN_EPOCHS=${CNN_EPOCHS:-24}
RESNET_EPOCHS=${RESNET_EPOCHS:-10}
# the same for both: Adam with a cosine schedule over each one's epochs
CONFIG=${CONFIG:-'{"optimizer": "adam", "lr": 0.002, "batch_size": 128, "seed": 7, "schedule": "cosine"}'}
export LIMIT=${LIMIT:-0}

# shellcheck source=bench/pg_private.sh
. "$HERE/pg_private.sh"
bench_start resnet
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
psql -c "CREATE EXTENSION IF NOT EXISTS pgdl" -c "DROP TABLE IF EXISTS bench_rn_train, bench_rn_test"
psql -c "SELECT pgdl.pack('$train', 'image', 'label', 'bench_rn_train', buffer_rows => 128, partitions => 4,
                          seed => 42, scale => 1 / 255.0) IS NOT NULL AS packed" >/dev/null
psql -c "SELECT pgdl.pack('fmnist_test', 'image', 'label', 'bench_rn_test', buffer_rows => 500, partitions => 1,
                          seed => 42, reference => 'bench_rn_train') IS NOT NULL AS packed" >/dev/null
echo "packed $n_train training and 10000 test images"

cnn='{"input": [1, 28, 28], "layers": [{"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2}, {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "size": 2}, {"type": "flatten"}, {"type": "dense", "units": 10}]}'
# A stem as the CNN's first stage (conv, relu, pool to 14x14: no batchnorm at 28x28, where it would
# cost a pass over the largest activations and the fused conv-relu-pool); block 1 at 16 channels,
# its input as the shortcut; pool to 7x7; block 2 widens to 32 channels, its shortcut a 1x1
# convolution with batchnorm (ResNet's projection); a dense head.  Each block: conv-bn-relu-conv-bn,
# plus the shortcut, relu.
resnet='{"input": [1, 28, 28], "layers": [
  {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"},
  {"type": "maxpool2d", "size": 2, "name": "stem"},
  {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "batchnorm"}, {"type": "relu"},
  {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "batchnorm", "name": "b1"},
  {"type": "add", "inputs": ["b1", "stem"]}, {"type": "relu"},
  {"type": "maxpool2d", "size": 2, "name": "pool2"},
  {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "batchnorm"}, {"type": "relu"},
  {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "batchnorm", "name": "b2"},
  {"type": "conv2d", "filters": 32, "kernel": 1, "inputs": ["pool2"]}, {"type": "batchnorm", "name": "short"},
  {"type": "add", "inputs": ["b2", "short"]}, {"type": "relu"},
  {"type": "flatten"}, {"type": "dense", "units": 10}]}'

# One fit with the test set as validation: its epochs as "epoch cumulative_seconds validation_accuracy".
fit()
{
	psql -At -F ' ' <<SQL
SET client_min_messages = warning;
SELECT pgdl.fit('bench_rn_train', '$1'::jsonb, '$CONFIG', $2, 'bench_rn_test') AS model \gset
SELECT r.epoch, round(sum(r.seconds) OVER (ORDER BY r.epoch)::numeric, 2), round(r.validation_accuracy::numeric, 4)
  FROM pgdl.run_metrics r JOIN pgdl.models m ON m.run = r.run WHERE m.id = :model ORDER BY r.epoch;
SQL
}

cnn_epochs=$(fit "$cnn" "$CNN_EPOCHS")
echo "cnn, epoch / training seconds so far / test accuracy:"
echo "$cnn_epochs"
resnet_epochs=$(fit "$resnet" "$RESNET_EPOCHS")
echo "resnet, epoch / training seconds so far / test accuracy:"
echo "$resnet_epochs"

read -r n t y < <(tail -n 1 <<<"$cnn_epochs")
# the ResNet's last epoch that ends within the CNN's time (its first if none does)
read -r k s x < <(awk -v t="$t" 'NR == 1 || $2 <= t { line = $0 } END { print line }' <<<"$resnet_epochs")
echo "resnet: test accuracy $x after $k epochs in $s s"
echo "cnn: test accuracy $y after $n epochs in $t s"
echo "resnet/cnn test accuracy at equal time = $(awk -v a="$x" -v b="$y" 'BEGIN { printf "%.4f", a / b }')"
