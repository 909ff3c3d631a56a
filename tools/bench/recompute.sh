#!/usr/bin/env bash
# Activation recomputation's price and gain (docs/SEQUENCE.md): the train tool on gpt-nano at a
# long window, --recompute=none, selective (the attention core; then every selective op) and
# full, each run REPEATS times in turn (interleaved, so the machine's drift touches all alike):
# tokens per second (median and spread) and the counting allocator's peak per step.
#
#   tools/bench/recompute.sh [SEQ_LEN=1024] [BATCH=4] [STEPS=12] [REPEATS=3]
set -euo pipefail
cd "$(dirname "$0")/../.."
seq_len=${1:-1024}
batch=${2:-4}
steps=${3:-12}
repeats=${4:-3}
bazel build -c opt //tools:train >/dev/null 2>&1
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "gpt-nano, byte tokens, s = $seq_len, b = $batch, $steps steps, --threads=2, $repeats runs each"
choices=("none" "selective --recompute-modules=core_attn" \
         "selective --recompute-modules=core_attn,layernorm,gelu" "full")
declare -A rates peaks
for r in $(seq "$repeats"); do
  for i in "${!choices[@]}"; do
    line=$(bazel-bin/tools/train --model=gpt-nano --tokenizer=byte --seq-len="$seq_len" \
           --context="$seq_len" --batch-size="$batch" --train-limit=$((batch * steps)) --epochs=1 \
           --val-limit=1 --threads=2 --recompute=${choices[$i]} 2>&1 | tail -1)
    rate=$(grep -o '"tokens_per_second": [0-9.]*' <<<"$line" | cut -d' ' -f2)
    peak=$(grep -o '"peak_bytes": [0-9]*' <<<"$line" | head -1 | cut -d' ' -f2)
    rates[$i]="${rates[$i]:-} $rate"
    peaks[$i]=$peak
  done
done
printf '%-58s %12s %22s %12s\n' "--recompute" "tokens/s" "(runs)" "peak MB"
for i in "${!choices[@]}"; do
  median=$(tr ' ' '\n' <<<"${rates[$i]}" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%-58s %12s %22s %12.1f\n' "${choices[$i]}" "$median" "(${rates[$i]# })" \
         "$(awk -v p="${peaks[$i]}" 'BEGIN {print p / 1e6}')"
done
