#!/bin/bash
# tessera against PyTorch eager on the ImageNet-style ResNets' training step (issue 15),
# alternately in one run: for each round, model and thread count, train_bench then
# pytorch_cpu_reference.py on the same step, then the ratio of the medians (tessera / PyTorch:
# below 1 means tessera is faster). The machine is shared, so only figures taken side by side
# like this compare fairly; the load average is printed with each round.
#
#   tools/bench/side_by_side.sh [--models=resnet18,resnet50] [--threads=1,2] [--steps=10]
#                               [--rounds=2] [--tessera=path/to/train_bench]
#                               [--baseline=path/to/an/older/train_bench] [--amp=off,bf16]
#                               [--clock=wall|cpu] [--channels-last | --channels-blocked]
#
# --amp: f32 (off) and/or bf16 autocast, each timed in every round on both sides (issue 12:
# bf16 against f32 in one run); the models may include resnet20 (batch 128, 1x28x28).
#
# --clock=cpu: both sides time each step in the process's CPU time, not the wall clock. At one
# thread on a machine shared with other work (a build, another benchmark) this leaves out the
# slices each process spent waiting for a core; at two threads it also counts spinning at
# barriers, so use it at one thread only.
#
# Builds //tools/bench:train_bench with --config=native unless --tessera names a binary.
# --channels-last: both sides run channels-last activations (train_bench --channels-last;
# PyTorch's model and input .to(memory_format=torch.channels_last)); so does --baseline.
# --channels-blocked: tessera alone runs nChw16c activations (train_bench --channels-blocked;
# PyTorch has no such layout for training and stays NCHW); --baseline does not, so naming the
# same binary there times its NCHW step beside it.
# --baseline adds a third contender (say, the train_bench of the commit before a change), timed
# in the same rounds, with its own ratio to PyTorch.
# The GPTs (--models=gpt2 or gpt-nano; --batch=B --seq-len=T, default their own: 4 or 8 of 64
# tokens) are timed against tools/bench/pytorch_gpt_reference.py, the same step in PyTorch.
# Needs python3-torch, and python3-torchvision for the ResNets (apt-get install python3-torchvision).
set -euo pipefail
cd "$(dirname "$0")/../.."

models=resnet18,resnet50 threads=1,2 steps=10 rounds=2 tessera= baseline= amps=off clock=wall
shape=()  # the GPTs' --batch and --seq-len, on both sides
layout=()
ours=()
for arg in "$@"; do
  case "$arg" in
    --models=*) models=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --steps=*) steps=${arg#*=} ;;
    --rounds=*) rounds=${arg#*=} ;;
    --tessera=*) tessera=${arg#*=} ;;
    --baseline=*) baseline=${arg#*=} ;;
    --amp=*) amps=${arg#*=} ;;
    --clock=*) clock=${arg#*=} ;;
    --batch=*|--seq-len=*) shape+=("$arg") ;;
    --channels-last) layout=(--channels-last) ;;
    --channels-blocked) ours=(--channels-blocked) ;;
    *) echo "side_by_side.sh: unknown flag $arg" >&2; exit 2 ;;
  esac
done
if [[ -z "$tessera" ]]; then
  bazel build -c opt --config=native //tools/bench:train_bench >&2
  tessera=bazel-bin/tools/bench/train_bench
fi
# Debian's torch is for Debian's python, not for any other python3 earlier on PATH.
python=/usr/bin/python3
needs="torch"
[[ ",$models," =~ ,resnet ]] && needs="torch, torchvision"
"$python" -c "import $needs" 2>/dev/null || {
  echo "side_by_side.sh: $python cannot import $needs;" \
       "---> HINT: apt-get install python3-torch python3-torchvision" >&2
  exit 1
}

grep -m1 'model name' /proc/cpuinfo
# One timing: "median min" of the last line of a train_bench-format table.
median_min() { tail -1 | awk '{print $4, $5}'; }
ratio() { echo "$1 / $2" | bc -l | xargs printf '%.2f'; }
printf '%-9s %-7s %-4s %5s | %-20s | %-20s | %-7s' model threads amp round \
  "tessera median (min)" "PyTorch median (min)" "ratio"
[[ -n "$baseline" ]] && printf ' | %-20s | %s' "baseline median (min)" "ratio"
echo
for ((round = 1; round <= rounds; round++)); do
  echo "# round $round, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  for model in ${models//,/ }; do
    for t in ${threads//,/ }; do
      for amp in ${amps//,/ }; do
        # An older baseline binary may not know --amp: pass it only when it is not "off".
        amp_flag=()
        [[ "$amp" != off ]] && amp_flag=(--amp="$amp")
        [[ "$clock" != wall ]] && amp_flag+=(--clock="$clock")
        amp_flag+=("${layout[@]}")
        reference=tools/bench/pytorch_cpu_reference.py
        [[ "$model" == gpt* ]] && reference=tools/bench/pytorch_gpt_reference.py
        read -r our_med our_min < <("$tessera" --models="$model" --threads="$t" --steps="$steps" \
          "${amp_flag[@]}" "${ours[@]}" "${shape[@]}" | median_min)
        read -r their_med their_min < <("$python" "$reference" \
          --models="$model" --threads="$t" --steps="$steps" --amp="$amp" --clock="$clock" \
          "${layout[@]}" "${shape[@]}" | median_min)
        printf '%-9s %-7s %-4s %5s | %9.1f (%8.1f) | %9.1f (%8.1f) | %-7s' "$model" "$t" "$amp" \
          "$round" "$our_med" "$our_min" "$their_med" "$their_min" "$(ratio "$our_med" "$their_med")"
        if [[ -n "$baseline" ]]; then
          read -r base_med base_min < <("$baseline" --models="$model" --threads="$t" \
            --steps="$steps" "${amp_flag[@]}" | median_min)
          printf ' | %9.1f (%8.1f) | %s' "$base_med" "$base_min" "$(ratio "$base_med" "$their_med")"
        fi
        echo
      done
    done
  done
done
echo "# ratio: tessera (or baseline) median / PyTorch median; below 1, tessera is faster." \
  "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
