#!/usr/bin/env bash
# The scaling model (cost/scaling.h, `explain scaling`) against measured runs of the train tool
# at N = 1, 2 and 4 ranks on this machine, with the emulated network (issue 26).
#
#   tools/bench/scaling_check.sh [LATENCY_US] [BANDWIDTH_GBPS] [MODELS] [STRATEGIES]
#   tools/bench/scaling_check.sh 50 1 "mlp resnet20" "ddp zero3"
#
# Per model: one rank trains first (--strategy=single); its step, less the layers' compute that
# explain measures, is the step overhead the model is given (--overhead-ms: the loss, the
# optimizer step, data loading, the tool's checks). Then per strategy and N = 2, 4: the measured
# step (global batch / the tool's training images per second) beside explain's prediction with
# the same network, a ring (the process group's collectives), --cores=$(nproc) (N ranks on
# this machine's cores: beyond them each rank computes N/C times as long) and
# --step-all-reduces=1 (the tool's NaN guard, an 8-byte all-reduce every step). Runs are one at
# a time under nice; the measured steps carry the machine's noise.
set -euo pipefail
cd "$(dirname "$0")/../.."
latency=${1:-50}
bandwidth=${2:-1}
read -r -a models <<< "${3:-mlp resnet20}"
read -r -a strategies <<< "${4:-ddp zero3}"
cores=$(nproc)
bazel build -c opt //tools:train //tools:explain >/dev/null 2>&1
dir=$(mktemp -d /tmp/scaling_check.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp bazel-bin/tools/train bazel-bin/tools/explain "$dir/"
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $cores cores; network ${latency} us, ${bandwidth} Gb/s"

# measured_ms MODEL N FLAGS...: ms per step of the tool's training (its last JSON line).
measured_ms() {
  local model=$1 n=$2
  shift 2
  local batch=64 limit
  [[ $model != resnet* ]] || batch=128
  limit=$(( n * batch * ${STEPS:-40} ))
  local cmd=("$dir/train")
  [ "$n" = 1 ] || cmd=(mpirun -np "$n" --oversubscribe --allow-run-as-root "$dir/train")
  nice -n 5 "${cmd[@]}" --model="$model" --epochs=1 --train-limit="$limit" --threads=1 --seed=0 \
    --net-latency-us="$latency" --net-bandwidth-gbps="$bandwidth" "$@" 2>/dev/null | tail -1 |
    python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(1000 * $batch * $n / d['images_per_second'])"
}

echo "| model | strategy | N | measured ms/step | predicted ms/step | predicted / measured |"
echo "| --- | --- | --- | --- | --- | --- |"
for model in "${models[@]}"; do
  one=$(measured_ms "$model" 1 --strategy=single)
  # explain measures on one thread, as the tool trains (--threads=1), and writes to a file
  # before anything reads it (a reader starting up beside it would share the cores).
  OMP_NUM_THREADS=1 "$dir/explain" scaling --model="$model" --ranks=1 --measure --repeats=30 --json > "$dir/one.json"
  layers=$(head -1 "$dir/one.json" | python3 -c "import json,sys; print(1000 * json.loads(sys.stdin.read())['compute_seconds'])")
  overhead=$(python3 -c "print(max(0.0, $one - $layers))")
  printf '| %s | single | 1 | %.2f | %.2f (layers) + %.2f (overhead) | calibration |\n' \
    "$model" "$one" "$layers" "$overhead"
  for strategy in "${strategies[@]}"; do
    for n in 2 4; do
      got=$(measured_ms "$model" "$n" --strategy="$strategy")
      OMP_NUM_THREADS=1 "$dir/explain" scaling --model="$model" --strategy="$strategy" --ranks="$n" \
        --latency-us="$latency" --bandwidth-gbps="$bandwidth" --topology=ring --cores="$cores" \
        --step-all-reduces=1 --measure --repeats=30 --overhead-ms="$overhead" --json > "$dir/n.json"
      want=$(tail -1 "$dir/n.json" | python3 -c "import json,sys; print(1000 * json.loads(sys.stdin.read())['step_seconds'])")
      printf '| %s | %s | %d | %.2f | %.2f | %.2f |\n' "$model" "$strategy" "$n" "$got" "$want" \
        "$(python3 -c "print($want / $got)")"
    done
  done
done
