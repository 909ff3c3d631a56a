#!/usr/bin/env bash
# Every compressor on 2 ranks at several emulated bandwidths: bytes per step (measured and
# formula), test accuracy and step time, as a markdown table (docs/COMPRESSION.md).
#
#   tools/bench/compression_table.sh [MODEL] [EPOCHS] [TRAIN_LIMIT] [BANDWIDTHS...]
#   tools/bench/compression_table.sh mlp 1 60000 off 10 1 0.1
#
# Latency 50 us whenever a bandwidth (Gb/s) is given; "off" is the machine's own shared memory.
# Builds //tools:train first. The same seed everywhere, so each row differs only in what is sent.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-mlp}
epochs=${2:-1}
limit=${3:-60000}
shift $(( $# < 3 ? $# : 3 ))
bandwidths=("$@")
[ ${#bandwidths[@]} -gt 0 ] || bandwidths=(off 10 1 0.1)
compressors=(none fp16 topk:0.01 randomk:0.01 qsgd:4 sign "powersgd:2")

bazel build -c opt //tools:train >/dev/null 2>&1
echo "model $model, $epochs epoch(s) of $limit images, 2 ranks, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
header="| compression | bytes/step | ratio (formula) | test accuracy |"
rule="| --- | --- | --- | --- |"
for b in "${bandwidths[@]}"; do header+=" s/step at ${b} Gb/s |"; rule+=" --- |"; done
echo "$header"
echo "$rule"
for c in "${compressors[@]}"; do
  row=""
  for b in "${bandwidths[@]}"; do
    net=()
    [ "$b" = off ] || net=(--net-latency-us=50 "--net-bandwidth-gbps=$b")
    extra=()
    [ "$c" = none ] || extra=("--compression=$c")
    [[ "$c" != powersgd* ]] || extra+=(--powersgd-start-iter=10)
    json=$(mpirun -np 2 --oversubscribe --allow-run-as-root bazel-bin/tools/train \
      --model="$model" --epochs="$epochs" --train-limit="$limit" --threads=1 --seed=0 --batch-size=64 \
      --strategy=ddp "${extra[@]}" "${net[@]}" 2>/dev/null | tail -1)
    cells=$(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
c = d.get("compression")
first = "%d | %s | %.4f" % (c["bytes_per_step"], "%.4f (%.4f)" % (c["ratio"], c["ratio_theory"]), d["test_accuracy"]) if c else "%d | 1 | %.4f" % (d["comm_bytes_per_step"], d["test_accuracy"])
print(first + "\t%.4f" % (2 * 64 / d["images_per_second"]))  # training steps only
' "$json")
    [ -n "$row" ] || row="| $c | ${cells%%$'\t'*} |"
    row+=" ${cells##*$'\t'} |"
  done
  echo "$row"
done
