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
#  - the I/O bound: bytes moved per step / the disk's bandwidth (both ranks share the disk), the
#    bytes those of a step's transfers (3 reads of each rank's parameter shards and 1 write, 1
#    read and write of its gradients and of its optimizer state: cost/offload.h, checked against
#    the stores' counts by tests/tools/explain_memory_test), at the stores' padded sizes,
#  - the median step, the seconds of it rank 0 spent blocked on transfers (io_wait), the compute
#    (the rest), and the step against max(compute, I/O bound): the overlap's target is 1.3.
#
#   tools/bench/offload_big.sh [DIR=/tmp/tessera_big] [LAYERS=24] [WIDTH=2560] [HEADS=20] [STEPS=3]
#                              [LR=5e-5]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-/tmp/tessera_big}
layers=${2:-24}
width=${3:-2560}
heads=${4:-20}
steps=${5:-3}
lr=${6:-5e-5}
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
# One step per epoch (2 windows of 64 tokens, one per rank), so every step sees the same batch
# and its loss falls step by step; the validation loss of 2 other windows after each.
tools/mpi_run.sh 2 /usr/bin/time -f "rank max RSS %M KiB, %e s" bazel-bin/tools/train \
  --model=gpt2 --n-layer="$layers" --n-embd="$width" --n-head="$heads" --seq-len=64 \
  --batch-size=1 --train-limit=2 --val-limit=2 --epochs="$steps" --strategy=zero3 \
  --offload=all --offload-dir="$dir" --optimizer=adamw --lr="$lr" --threads=1 \
  --seed=1 --metrics="$metrics" >"$log" 2>&1 || { tail -30 "$log"; exit 1; }
grep -E "^model|epoch .*val_loss|max RSS" "$log"
python3 - "$metrics" "$log" "$write" "$read" <<'PY'
import json, re, sys
def bandwidth(dd):  # "2097152000 bytes (2.1 GB, 2.0 GiB) copied, 1.9 s, 1.1 GB/s"
    m = re.search(r"^(\d+) bytes.*copied, ([0-9.]+) s", dd)
    return int(m.group(1)) / float(m.group(2))
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
        o = r.get("offload", {})
        print("offload (rank 0's stores): %s" % json.dumps(o))
        p, g, opt = o["parameters_bytes"], o["gradients_bytes"], o["offloaded_bytes"]
        reads, writes = 3 * p + g + opt, p + g + opt
        io = 2 * (reads / bandwidth(sys.argv[4]) + writes / bandwidth(sys.argv[3]))
        step = r["seconds_per_step"]["median"]
        wait = r["io_wait_seconds_per_step"]
        compute = step - wait
        print("per step: %.2f GB read, %.2f GB written per rank; I/O bound (2 ranks, one disk) "
              "%.1f s; median step %.1f s, blocked on I/O %.1f s, compute %.1f s; step / "
              "max(compute, I/O bound) = %.2f" % (reads / 1e9, writes / 1e9, io, step, wait,
                                                  compute, step / max(compute, io)))
PY
rm -f "$metrics" "$log"
