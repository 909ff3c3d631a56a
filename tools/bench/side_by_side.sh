#!/bin/bash
# tessera against PyTorch eager on the ImageNet-style ResNets' training step (issue 15),
# alternately in one run: for each round, model and thread count, train_bench then
# pytorch_cpu_reference.py on the same step, then the ratio of the medians (tessera / PyTorch:
# below 1 means tessera is faster). The machine is shared, so only figures taken side by side
# like this compare fairly; the load average is printed with each round.
#
#   tools/bench/side_by_side.sh [--models=resnet18,resnet50] [--threads=1,2] [--steps=10]
#                               [--rounds=2] [--tessera=path/to/train_bench]
#
# Builds //tools/bench:train_bench with --config=native unless --tessera names a binary.
# Needs python3-torch and python3-torchvision (apt-get install python3-torchvision).
set -euo pipefail
cd "$(dirname "$0")/../.."

models=resnet18,resnet50 threads=1,2 steps=10 rounds=2 tessera=
for arg in "$@"; do
  case "$arg" in
    --models=*) models=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --steps=*) steps=${arg#*=} ;;
    --rounds=*) rounds=${arg#*=} ;;
    --tessera=*) tessera=${arg#*=} ;;
    *) echo "side_by_side.sh: unknown flag $arg" >&2; exit 2 ;;
  esac
done
if [[ -z "$tessera" ]]; then
  bazel build -c opt --config=native //tools/bench:train_bench >&2
  tessera=bazel-bin/tools/bench/train_bench
fi
# Debian's torch is for Debian's python, not for any other python3 earlier on PATH.
python=/usr/bin/python3
"$python" -c 'import torch, torchvision' 2>/dev/null || {
  echo "side_by_side.sh: $python cannot import torch and torchvision;" \
       "---> HINT: apt-get install python3-torch python3-torchvision" >&2
  exit 1
}

grep -m1 'model name' /proc/cpuinfo
printf '%-9s %-8s %7s | %-22s | %-22s | %s\n' model threads round \
  "tessera median (min)" "PyTorch median (min)" "tessera / PyTorch"
for ((round = 1; round <= rounds; round++)); do
  echo "# round $round, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  for model in ${models//,/ }; do
    for t in ${threads//,/ }; do
      ours=$("$tessera" --models="$model" --threads="$t" --steps="$steps" | tail -1)
      theirs=$("$python" tools/bench/pytorch_cpu_reference.py --models="$model" \
        --threads="$t" --steps="$steps" | tail -1)
      read -r _ _ _ our_med our_min <<<"$ours"
      read -r _ _ _ their_med their_min <<<"$theirs"
      printf '%-9s %-8s %7s | %10.1f (%7.1f) | %10.1f (%7.1f) | %.2f\n' "$model" "$t" "$round" \
        "$our_med" "$our_min" "$their_med" "$their_min" \
        "$(echo "$our_med / $their_med" | bc -l)"
    done
  done
done
