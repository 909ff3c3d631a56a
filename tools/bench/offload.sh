#!/usr/bin/env bash
# What offloading ZeRO's optimizer state costs on this machine (issue 52), per tier:
#  1. offload_bench: one rank's shard of E elements stepped by Adam with its state in memory, in
#     host memory and on disk (median step), and in the same run the disk's bandwidth through
#     the same store, so the disk step can be read against max(in-memory step, I/O time).
#  2. The train tool on a model that fits, ZeRO-2 on 2 ranks, per tier: images/s and the
#     summary's "offload" (bytes offloaded, read and written per step).
#  3. The train tool on a GPT that fits, ZeRO-3 on 2 ranks with everything offloaded
#     (--offload=all) per tier against in memory: tokens/s and the shard stores' bytes.
#
#   tools/bench/offload.sh [DIR=/tmp] [ELEMENTS=16777216]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-/tmp}
elements=${2:-16777216}
bazel build //tools/bench:offload_bench //tools:train >/dev/null 2>&1
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores"
echo "offload directory: $dir ($(df -hT "$dir" | awk 'NR==2 {print $2 " on " $1}'))"
echo
bazel-bin/tools/bench/offload_bench --elements="$elements" --dir="$dir"
# One line per tier: the train tool with `flags` and --offload=$1 below the device, the summary's
# rate ($2) and "offload" fields ($3...).
per_tier() {
  local offload=$1 rate=$2
  shift 2
  for tier in device host disk; do
    extra=()
    if [ "$tier" != device ]; then extra=(--offload="$offload" --offload-tier="$tier" --offload-dir="$dir"); fi
    tools/mpi_run.sh 2 bazel-bin/tools/train "${flags[@]}" "${extra[@]}" 2>/dev/null | tail -1 |
      python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
o = r.get("offload", {})
print("%-8s %10.0f" % (sys.argv[1], r[sys.argv[2]]) + "".join(" %16s" % o.get(f, "-") for f in sys.argv[3:]))' \
        "$tier" "$rate" "$@"
  done
}

echo
echo "train: --model=mlp --strategy=zero2 --optimizer=adam on 2 ranks, 1 epoch of 1024 images"
printf '%-8s %10s %16s %16s %16s\n' tier "images/s" "offloaded bytes" "read B/step" "written B/step"
flags=(--model=mlp --strategy=zero2 --optimizer=adam --lr=1e-3 --epochs=1 --train-limit=1024
       --batch-size=32 --threads=1 --seed=1)
per_tier optimizer images_per_second offloaded_bytes step_read_bytes step_written_bytes
echo
echo "train: --model=gpt-nano --strategy=zero3 on 2 ranks, everything offloaded (--offload=all) against in memory"
printf '%-8s %10s %16s %16s %16s %16s\n' tier "tokens/s" "param bytes" "param read/run" "grad bytes" "grad read/run"
flags=(--model=gpt-nano --tokenizer=byte --seq-len=64 --batch-size=4 --train-limit=128 --val-limit=16
       --strategy=zero3 --epochs=1 --threads=1 --seed=1)
per_tier all tokens_per_second parameters_bytes parameters_read_bytes gradients_bytes gradients_read_bytes
