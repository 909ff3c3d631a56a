#!/usr/bin/env bash
# A model whose training state does not fit in this machine's memory, trained (issue 52): a GPT
# of LAYERS blocks of WIDTH (24 x 2560 with GPT-2's vocabulary: 2.02 billion parameters, whose f32
# parameters, gradients and Adam moments take 16 bytes each, 32.3 GB) under ZeRO-3 with
# --offload=all on 2 ranks, the model built without its values (materialized unit by unit).
# Reported, from the same run:
#  - the disk's bandwidth in DIR (dd with O_DIRECT, 2 GB written then read),
#  - each rank's peak resident set (/usr/bin/time's maximum RSS) and the counting allocator's
#    peak (the summary's peak_bytes_per_rank),
#  - every step's seconds and loss (--metrics), and the bytes each rank's stores moved,
#  - the I/O bound: bytes moved per step / the disk's bandwidth.
#
#   tools/bench/offload_big.sh [DIR=/tmp/tessera_big] [LAYERS=24] [WIDTH=2560] [HEADS=20] [STEPS=4]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-/tmp/tessera_big}
layers=${2:-24}
width=${3:-2560}
heads=${4:-20}
steps=${5:-4}
mkdir -p "$dir"
bazel build //tools:train >/dev/null 2>&1
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
echo "offload directory: $dir ($(df -hT "$dir" | awk 'NR==2 {print $2 " on " $1 ", " $5 " free"}'))"
write=$(dd if=/dev/zero of="$dir/bandwidth" bs=4M count=500 oflag=direct 2>&1 | tail -1)
read=$(dd if="$dir/bandwidth" of=/dev/null bs=4M iflag=direct 2>&1 | tail -1)
rm -f "$dir/bandwidth"
echo "disk write: $write"
echo "disk read:  $read"
metrics=$(mktemp)
log=$(mktemp)
# Two steps per epoch (4 windows of 64 tokens, one per rank per step); the second epoch sees the
# same windows again.
tools/mpi_run.sh 2 /usr/bin/time -f "rank max RSS %M KiB, %e s" bazel-bin/tools/train \
  --model=gpt2 --n-layer="$layers" --n-embd="$width" --n-head="$heads" --seq-len=64 \
  --batch-size=1 --train-limit=4 --val-limit=2 --epochs=$((steps / 2)) --strategy=zero3 \
  --offload=all --offload-dir="$dir" --optimizer=adamw --lr=3e-4 --threads=1 \
  --seed=1 --metrics="$metrics" >"$log" 2>&1 || { tail -30 "$log"; exit 1; }
grep -E "^model|epoch .*val_loss|max RSS" "$log"
python3 - "$metrics" "$log" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
previous = 0.0
for m in lines:
    if m.get("kind") == "step":
        print("step %d (epoch %d): loss %.4f, %.1f s" % (m["step"], m["epoch"], m["loss"],
                                                         m["elapsed_seconds"] - previous))
    previous = m["elapsed_seconds"]
for line in open(sys.argv[2]):
    if line.startswith("{"):
        r = json.loads(line)
        print("parameters %d, counting allocator's peak per rank %s bytes" %
              (r["parameters"], r["peak_bytes_per_rank"]))
        print("offload (rank 0's stores): %s" % json.dumps(r.get("offload", {})))
PY
rm -f "$metrics" "$log"
