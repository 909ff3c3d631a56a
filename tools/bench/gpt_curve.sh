#!/usr/bin/env bash
# A GPT's validation curve in tessera (2 ranks, DDP) beside PyTorch's on the same tokens, the
# same initial weights and the same order (gpt_curve.cc, pytorch_gpt_curve.py); exits non-zero
# if any evaluation differs by more than 2%. Flags go to gpt_curve (--steps, --eval-every, ...).
#
#   tools/bench/gpt_curve.sh --steps=300 --eval-every=25
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build -c opt //tools/bench:gpt_curve
out=$(mktemp -d /tmp/gpt_curve.XXXXXX)
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
start=$(date +%s)
mpirun -np 2 --oversubscribe --allow-run-as-root bazel-bin/tools/bench/gpt_curve --out="$out" "$@"
echo "tessera: $(( $(date +%s) - start )) s"
start=$(date +%s)
/usr/bin/python3 tools/bench/pytorch_gpt_curve.py "$out"
echo "pytorch: $(( $(date +%s) - start )) s; files in $out"
