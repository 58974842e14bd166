#!/bin/bash
# bench/resnet.sh -- a ResNet-style CNN (two residual blocks with batchnorm,
# the graph form's add) against the reference CNN on Fashion-MNIST, both
# through pgdl.fit with the same training configuration, compared at equal
# training time: the CNN trains CNN_EPOCHS epochs (default 30) in T seconds; the
# ResNet's test accuracy is taken after its last epoch that ends within T
# (RESNET_EPOCHS, default 12, take a little less).  CONFIG is both's training
# configuration without its seed; each seed of SEEDS (default "7 8") trains
# both once, with its own initialization and order of partitions.
#
# Both train on the 60,000 training images (LIMIT > 0: the first LIMIT) and
# are validated on the 10,000 test images after every epoch (pgdl.run_metrics:
# seconds and validation_accuracy of each epoch; the seconds are training time,
# without the validation pass).  One thread each.
#
# Usage: bench/resnet.sh   (make bench-resnet).  Needs pgdl installed; uses the
# server given by PGHOST/PGPORT/PGDATABASE, or starts a private one.  The last
# lines are, for each seed,
#   seed N: resnet X after K epochs in S s, cnn Y after M epochs in T s: R
# (R = X / Y), and then the lowest of the seeds' R:
#   resnet/cnn test accuracy at equal time = R (the lowest of seeds ...)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CNN_EPOCHS=${CNN_EPOCHS:-30}
RESNET_EPOCHS=${RESNET_EPOCHS:-12}
SEEDS=${SEEDS:-7 8}
# the same for both: AdamW with a cosine schedule over each one's epochs, label smoothing, no decay of
# biases and batchnorm's parameters
CONFIG=${CONFIG:-'"optimizer": "adamw", "lr": 0.002, "weight_decay": 0.1, "no_decay_bias_norm": true, "label_smoothing": 0.1, "batch_size": 128, "schedule": "cosine"'}
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

# One fit with the test set as validation (architecture, epochs, seed): its epochs as
# "epoch cumulative_seconds validation_accuracy".
fit()
{
	psql -At -F ' ' <<SQL
SET client_min_messages = warning;
SELECT pgdl.fit('bench_rn_train', '$1'::jsonb, '{$CONFIG, "seed": $3}', $2, 'bench_rn_test') AS model \gset
SELECT r.epoch, round(sum(r.seconds) OVER (ORDER BY r.epoch)::numeric, 2), round(r.validation_accuracy::numeric, 4)
  FROM pgdl.run_metrics r JOIN pgdl.models m ON m.run = r.run WHERE m.id = :model ORDER BY r.epoch;
SQL
}

results=()
for seed in $SEEDS; do
	cnn_epochs=$(fit "$cnn" "$CNN_EPOCHS" "$seed")
	echo "seed $seed, cnn, epoch / training seconds so far / test accuracy:"
	echo "$cnn_epochs"
	resnet_epochs=$(fit "$resnet" "$RESNET_EPOCHS" "$seed")
	echo "seed $seed, resnet, epoch / training seconds so far / test accuracy:"
	echo "$resnet_epochs"
	read -r n t y < <(tail -n 1 <<<"$cnn_epochs")
	# the ResNet's last epoch that ends within the CNN's time (its first if none does)
	read -r k s x < <(awk -v t="$t" 'NR == 1 || $2 <= t { line = $0 } END { print line }' <<<"$resnet_epochs")
	results+=("seed $seed: resnet $x after $k epochs in $s s, cnn $y after $n epochs in $t s: $(awk -v a="$x" -v b="$y" 'BEGIN { printf "%.4f", a / b }')")
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${results[@]}"
echo "resnet/cnn test accuracy at equal time = $(printf '%s\n' "${results[@]}" | awk '{ r = $NF; if (NR == 1 || r < m) m = r } END { printf "%.4f", m }') (the lowest of seeds $SEEDS)"
