#!/usr/bin/env bash
# Korthikanti et al. 2022's Table 2 on this machine (docs/SEQUENCE.md): one transformer layer's
# activations per rank of gpt-nano (h = 128, a = 4, byte vocabulary) at b = 1, for each technique,
# tessera's formula (cost/activation_memory.h) beside the counting allocator's measurement
# (explain memory, on T (C) ranks under mpirun for the parallel rows) and the paper's 16-bit
# figure; then the same per sequence length, where the paper's 5 a s / h term grows with s and
# tessera's (FlashAttention's) does not.
#
#   tools/bench/activation_table.sh [SEQ_LEN=1024] [T=2]
set -euo pipefail
cd "$(dirname "$0")/../.."
s=${1:-1024}
t=${2:-2}
bazel build //tools:explain >/dev/null 2>&1
explain=bazel-bin/tools/explain
row() {  # label, ranks, flags...
  local label=$1 ranks=$2
  shift 2
  local cmd=("$explain" memory --model=gpt-nano --tokenizer=byte --ranks=1 --batch=1 --json "$@")
  if [ "$ranks" -gt 1 ]; then cmd=(tools/mpi_run.sh "$ranks" "${cmd[@]}"); fi
  "${cmd[@]}" 2>/dev/null | grep '"layer":"h0"' | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
p, m, q = r["activation_bytes"], r["measured_activation_bytes"], r["paper_16bit_bytes"]
print("%-34s %-34s %12d %12d %+7.2f%% %14.0f" % (sys.argv[1], r["formula"], p, m, 100.0 * (m - p) / p, q))
' "$label"
}
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "gpt-nano, s = $s (context $s), b = 1, f32; one layer (h0) per rank; T = $t"
printf '%-34s %-34s %12s %12s %8s %14s\n' technique formula predicted measured diff "paper 16-bit"
ctx=(--seq-len="$s" --context="$s")
row "none" 1 "${ctx[@]}"
row "tensor parallel" "$t" "${ctx[@]}" --tensor-parallel="$t"
row "tensor + sequence parallel" "$t" "${ctx[@]}" --tensor-parallel="$t" --sequence-parallel
row "selective (core_attn)" 1 "${ctx[@]}" --recompute=selective
row "selective (all three)" 1 "${ctx[@]}" --recompute=selective --recompute-modules=core_attn,layernorm,gelu
row "TP + SP + selective (core_attn)" "$t" "${ctx[@]}" --tensor-parallel="$t" --sequence-parallel --recompute=selective
row "full" 1 "${ctx[@]}" --recompute=full
row "context parallel (ring), C = $t" "$t" "${ctx[@]}" --context-parallel="$t"
row "context parallel + selective" "$t" "${ctx[@]}" --context-parallel="$t" --recompute=selective
echo
echo "per sequence length, one process, no recomputation:"
printf '%-34s %-34s %12s %12s %8s %14s\n' "s" formula predicted measured diff "paper 16-bit"
for len in 256 512 1024 2048; do
  row "s = $len" 1 --seq-len="$len" --context="$len"
done
