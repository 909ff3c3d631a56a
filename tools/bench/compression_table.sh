#!/usr/bin/env bash
# Every compressor on 2 ranks: bytes per step (measured and formula), test accuracy and step time
# at several emulated bandwidths, as a markdown table (docs/COMPRESSION.md).
#
#   tools/bench/compression_table.sh [MODEL] [EPOCHS] [TRAIN_LIMIT] [BANDWIDTHS...]
#   tools/bench/compression_table.sh mlp 1 30000 off 1 0.1
#   TIME_LIMIT=6400 ROUNDS=2 tools/bench/compression_table.sh resnet20 5 60000 off 10 1 0.1
#
# Latency 50 us whenever a bandwidth (Gb/s) is given; "off" is the machine's own shared memory.
# The same seed everywhere, so each row differs only in what is sent. The emulation changes
# only time, never what is computed, so accuracy and bytes come from one run per compressor
# without emulation (EPOCHS epochs of TRAIN_LIMIT images) and step times from the same run at
# each bandwidth, or, with TIME_LIMIT set, from ROUNDS short runs of one epoch of TIME_LIMIT
# images per bandwidth (every bandwidth and compressor once per round; the cell shows the
# fastest and slowest round). PowerSGD starts at step 10 (2 in the short runs).
# The model's default batch size; s/step = global batch / the tool's training images per second.
# Builds //tools:train first and runs a copy of it (a rebuild cannot change it mid-table).
# COMPRESSORS="none topk:0.01" overrides the list.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-mlp}
epochs=${2:-1}
limit=${3:-60000}
shift $(( $# < 3 ? $# : 3 ))
bandwidths=("$@")
[ ${#bandwidths[@]} -gt 0 ] || bandwidths=(off 10 1 0.1)
read -r -a compressors <<< "${COMPRESSORS:-none fp16 topk:0.01 randomk:0.01 qsgd:4 sign powersgd:2}"
time_limit=${TIME_LIMIT:-}
rounds=${ROUNDS:-1}

bazel build -c opt //tools:train >/dev/null 2>&1
bin=$(mktemp /tmp/compression_table_train.XXXXXX)
trap 'rm -f "$bin"' EXIT
cp bazel-bin/tools/train "$bin"

# run COMPRESSOR BANDWIDTH EPOCHS LIMIT START_ITER: the tool's final JSON line.
run() {
  local extra=() net=()
  [ "$1" = none ] || extra=("--compression=$1")
  [[ "$1" != powersgd* ]] || extra+=("--powersgd-start-iter=$5")
  [ "$2" = off ] || net=(--net-latency-us=50 "--net-bandwidth-gbps=$2")
  mpirun -np 2 --oversubscribe --allow-run-as-root "$bin" --model="$model" --epochs="$3" \
    --train-limit="$4" --threads=1 --seed=0 --strategy=ddp "${extra[@]}" "${net[@]}" \
    2>/dev/null | tail -1 || true
}

# first columns (bytes, ratio, accuracy) and s/step of one JSON line, tab-separated; a run that
# stopped (a diverged loss ends the tool with an error, no JSON) gives "stopped" and "-".
cells() {
  python3 -c '
import json, sys
try:
    d = json.loads(sys.argv[1])
except ValueError:
    print("- | - | stopped\t-")
    sys.exit()
c = d.get("compression")
first = "%d | %.4f (%.4f) | %.4f" % (c["bytes_per_step"], c["ratio"], c["ratio_theory"], d["test_accuracy"]) if c else "%d | 1 | %.4f" % (d["comm_bytes_per_step"], d["test_accuracy"])
print(first + "\t%.4f" % (2 * int(sys.argv[2]) / d["images_per_second"]))  # training steps only
' "$1" "$2"
}

# the train tool's default batch per rank
case $model in resnet*) batch=128 ;; *) batch=64 ;; esac
echo "model $model, $epochs epoch(s) of $limit images, 2 ranks x batch $batch, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
header="| compression | bytes/step | ratio (formula) | test accuracy |"
rule="| --- | --- | --- | --- |"
for b in "${bandwidths[@]}"; do header+=" s/step at ${b} Gb/s |"; rule+=" --- |"; done

declare -A first step_min step_max
for c in "${compressors[@]}"; do
  json=$(run "$c" off "$epochs" "$limit" 10)
  out=$(cells "$json" "$batch")
  first[$c]=${out%%$'\t'*}
  [ -n "$time_limit" ] || step_min[$c,off]=${out##*$'\t'}
done
for b in "${bandwidths[@]}"; do
  for c in "${compressors[@]}"; do
    if [ -z "$time_limit" ] && [ "$b" != off ]; then
      out=$(cells "$(run "$c" "$b" "$epochs" "$limit" 10)" "$batch")
      step_min[$c,$b]=${out##*$'\t'}
    fi
  done
done
if [ -n "$time_limit" ]; then
  for r in $(seq "$rounds"); do
    for b in "${bandwidths[@]}"; do
      for c in "${compressors[@]}"; do
        out=$(cells "$(run "$c" "$b" 1 "$time_limit" 2)" "$batch")
        s=${out##*$'\t'}
        lo=${step_min[$c,$b]:-$s} hi=${step_max[$c,$b]:-$s}
        step_min[$c,$b]=$(python3 -c "import sys; v=[x for x in sys.argv[1:] if x != '-']; print(min(v, key=float) if v else '-')" "$lo" "$s")
        step_max[$c,$b]=$(python3 -c "import sys; v=[x for x in sys.argv[1:] if x != '-']; print(max(v, key=float) if v else '-')" "$hi" "$s")
      done
    done
  done
fi
echo "$header"
echo "$rule"
for c in "${compressors[@]}"; do
  row="| $c | ${first[$c]} |"
  for b in "${bandwidths[@]}"; do
    if [ -n "$time_limit" ] && [ "$rounds" -gt 1 ]; then
      row+=" ${step_min[$c,$b]}-${step_max[$c,$b]} |"
    else
      row+=" ${step_min[$c,$b]} |"
    fi
  done
  echo "$row"
done
