#!/usr/bin/env bash
# The measured tables of docs/ALGORITHMS.md: synchronous (DDP), local SGD, gossip and
# asynchronous SGD side by side on this machine, as markdown.
#
#   tools/bench/algorithms_table.sh accuracy MODEL [FLAGS...]
#       DDP, local SGD H=4 and H=16, gossip (ring), async bound 0 and bound 4: test accuracy
#       after each epoch (--metrics), the largest gap to DDP, training and wall seconds, bytes/step
#   tools/bench/algorithms_table.sh latency LATENCY_US [N...]
#       ms per step of DDP, gossip (ring) and async (bound 0) on N workers at an emulated latency,
#       beside their formulas (logistic regression: latency is all there is)
#   [REPEATS=R] [CONFIGS="ddp ..."] tools/bench/algorithms_table.sh straggler MODEL EPOCHS [FLAGS...]
#       DDP, async bound none and bound 4 (fixed shards), async with shared batches (bound none),
#       each without and with --straggler=1:2, R rounds (3): medians (min-max) of epoch seconds
#       and accuracy, the straggler's sleep, pull and held time, and the straggler's share of
#       the batches under shared batches; CONFIGS picks some (ddp async-none async-b4
#       async-shared)
#
#   tools/bench/algorithms_table.sh accuracy logistic --epochs=5
#   tools/bench/algorithms_table.sh accuracy logistic --epochs=5 --optimizer=sgd --lr=0.1 --momentum=0
#   tools/bench/algorithms_table.sh accuracy resnet20 --train-limit=12000 --epochs=4
#   tools/bench/algorithms_table.sh latency 5000 2 4 6 8
#   REPEATS=6 tools/bench/algorithms_table.sh straggler mlp 2
#
# 4 data-parallel workers everywhere: DDP, local SGD and gossip on 4 ranks, asynchronous SGD on 5
# (rank 0 the parameter server, ranks 1..4 the workers); latency: N ranks, async N + 1. --seed=0
# unless FLAGS give one; --threads=1; every run under nice -n 5 (the machine is shared), one at a
# time. TRAIN=path uses that binary (default: builds //tools:train and uses bazel-bin's); every
# run's output and --metrics file stay in OUT (default /tmp/algorithms_table).
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:?accuracy, latency or straggler}
shift
out=${OUT:-/tmp/algorithms_table}
mkdir -p "$out"
if [ -z "${TRAIN:-}" ]; then
  bazel build -c opt //tools:train >/dev/null 2>&1
  TRAIN=bazel-bin/tools/train
fi
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"

# run NAME RANKS FLAGS...: one run under mpirun (niced: the machine is shared); output in OUT.
run() {
  local name=$1 ranks=$2
  shift 2
  rm -f "$out/$name.jsonl"
  local seed=(--seed=0)
  [[ " $* " != *" --seed="* ]] || seed=()
  nice -n 5 mpirun -np "$ranks" --oversubscribe --allow-run-as-root "$TRAIN" "${seed[@]}" --threads=1 \
    "$@" --metrics="$out/$name.jsonl" >"$out/$name.out" 2>&1 || {
    echo "$name failed:" >&2
    tail -5 "$out/$name.out" >&2
    return 1
  }
}

configurations=(
  "ddp|4|--strategy=ddp"
  "local-sgd-h4|4|--strategy=local-sgd --sync-period=4"
  "local-sgd-h16|4|--strategy=local-sgd --sync-period=16"
  "gossip-ring|4|--strategy=gossip --gossip-topology=ring"
  "async-b0|5|--strategy=async --servers=1 --staleness-bound=0"
  "async-b4|5|--strategy=async --servers=1 --staleness-bound=4"
)

case "$what" in
accuracy)
  model=${1:?MODEL}
  shift
  tag="accuracy-$model-$(echo "$*" | tr -c 'a-zA-Z0-9.=\n' '_' | tr -s '_')"
  names=()
  for c in "${configurations[@]}"; do
    IFS='|' read -r name ranks flags <<<"$c"
    # shellcheck disable=SC2086
    run "$tag-$name" "$ranks" --model="$model" $flags "$@"
    names+=("$tag-$name")
  done
  python3 - "$out" "${names[@]}" <<'EOF'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
labels = ["DDP", "local SGD H=4", "local SGD H=16", "gossip (ring)", "async bound 0", "async bound 4"]
runs = []
for n in names:
    epochs = [e for e in map(json.loads, open(f"{out}/{n}.jsonl")) if e.get("kind") != "step"]
    final = json.loads(open(f"{out}/{n}.out").read().strip().splitlines()[-1])
    runs.append((epochs, final))
ddp = runs[0][0]
E = len(ddp)
print("| configuration | ranks | " + " | ".join(f"epoch {i + 1}" for i in range(E)) +
      " | largest gap to DDP (points) | training s | wall s | bytes/step (rank 0) |")
print("| --- | --- |" + " --- |" * E + " --- | --- | --- | --- |")
for label, (epochs, final) in zip(labels, runs):
    acc = [e["test_accuracy"] for e in epochs]
    gaps = [100 * (a - d["test_accuracy"]) for a, d in zip(acc, ddp)]
    worst = max(gaps, key=abs)
    print(f"| {label} | {final['world_size']} | " + " | ".join(f"{a:.4f}" for a in acc) +
          f" | {worst:+.2f} | {sum(e['seconds'] for e in epochs):.1f} | {final['wall_seconds']:.1f}"
          f" | {final['comm_bytes_per_step']} |")
EOF
  ;;
latency)
  latency=${1:?LATENCY_US}
  shift
  sizes=("$@")
  [ ${#sizes[@]} -gt 0 ] || sizes=(2 4 6 8)
  steps=40  # per epoch and rank, whatever N: --train-limit = 64 N steps
  echo "logistic, batch 64 per rank (worker), $steps steps per epoch, 2 epochs; step time = epoch 2's"
  echo "seconds / $steps; L = $latency us per message, bandwidth unlimited. DDP pays its gradient all-reduce"
  echo "and the tool's per-step NaN-guard all-reduce, 2 (N-1) L each; gossip one exchange (L) and the"
  echo "guard; async (not lockstep: no guard) a pull's request and reply"
  echo "| N | DDP ms/step | 4 (N-1) L | gossip (ring) ms/step | L + 2 (N-1) L | async bound 0 (N workers + 1 server) ms/step | 2 L |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  for n in "${sizes[@]}"; do
    common=(--model=logistic --epochs=2 --batch-size=64 --train-limit=$((64 * n * steps))
            --net-latency-us="$latency")
    run "latency-$latency-n$n-ddp" "$n" "${common[@]}" --strategy=ddp
    run "latency-$latency-n$n-gossip" "$n" "${common[@]}" --strategy=gossip --gossip-topology=ring
    run "latency-$latency-n$n-async" $((n + 1)) "${common[@]}" --strategy=async --staleness-bound=0
    python3 - "$out" "$latency" "$n" "$steps" <<'EOF'
import json, sys
out, L, n, steps = sys.argv[1], float(sys.argv[2]) / 1000, int(sys.argv[3]), int(sys.argv[4])
def ms(kind):
    epochs = [e for e in map(json.loads, open(f"{out}/latency-{sys.argv[2]}-n{n}-{kind}.jsonl"))
              if e.get("kind") != "step"]
    return 1000 * epochs[-1]["seconds"] / steps
print(f"| {n} | {ms('ddp'):.1f} | {4 * (n - 1) * L:.0f} | {ms('gossip'):.1f} | {L + 2 * (n - 1) * L:.0f}"
      f" | {ms('async'):.1f} | {2 * L:.0f} |")
EOF
  done
  ;;
straggler)
  model=${1:?MODEL}
  epochs=${2:?EPOCHS}
  shift 2
  repeats=${REPEATS:-3}
  echo "$model, $epochs epoch(s), 4 workers, the straggler rank 1 (a worker in every configuration);"
  echo "median over $repeats rounds (min-max); epoch seconds: each run's mean over its epochs; slept, pull"
  echo "and held: seconds over the whole run (pull and held per worker); staleness: median of the"
  echo "mean / the largest max, in updates"
  all_names=(ddp async-none async-b4 async-shared)
  all_ranks=(4 5 5 5)
  all_flags=("--strategy=ddp" "--strategy=async --servers=1 --staleness-bound=none"
             "--strategy=async --servers=1 --staleness-bound=4"
             "--strategy=async --servers=1 --staleness-bound=none --batch-assignment=shared")
  names=() ranks_of=() flags_of=()
  for i in "${!all_names[@]}"; do
    if [[ " ${CONFIGS:-${all_names[*]}} " == *" ${all_names[$i]} "* ]]; then
      names+=("${all_names[$i]}") ranks_of+=("${all_ranks[$i]}") flags_of+=("${all_flags[$i]}")
    fi
  done
  for r in $(seq "$repeats"); do  # rounds interleave the configurations (the machine drifts)
    for i in "${!names[@]}"; do
      for s in none 1:2; do
        extra=()
        [ "$s" = none ] || extra=(--straggler="$s")
        # shellcheck disable=SC2086
        run "straggler-$model-${names[$i]}-${s/:/x}-r$r" "${ranks_of[$i]}" --model="$model" \
          --epochs="$epochs" ${flags_of[$i]} "${extra[@]}" "$@"
      done
    done
  done
  python3 - "$out" "$model" "$repeats" "${names[@]}" <<'EOF'
import json, statistics, sys
out, model, repeats, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
labels = {"ddp": "DDP (4 ranks)", "async-none": "async, bound none (1 server + 4 workers)",
          "async-b4": "async, bound 4 (1 server + 4 workers)",
          "async-shared": "async, shared batches, bound none (1 server + 4 workers)"}
print("| configuration | straggler | epoch seconds | test accuracy | slept s | pull s/worker | held s/worker | staleness mean / max | straggler's batches |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
md = statistics.median
for name in names:
    for s in ("none", "1x2"):
        secs, acc, slept, pull, held, smean, smax, share = [], [], [], [], [], [], [], []
        for r in range(1, repeats + 1):
            path = f"{out}/straggler-{model}-{name}-{s}-r{r}"
            epochs = [e for e in map(json.loads, open(path + ".jsonl")) if e.get("kind") != "step"]
            f = json.loads(open(path + ".out").read().strip().splitlines()[-1])
            secs.append(statistics.mean(e["seconds"] for e in epochs))
            acc.append(f["test_accuracy"])
            slept.append(f.get("straggler", {}).get("slept_seconds", 0))
            ps = f.get("parameter_server")
            if ps:
                pull.append(ps["pull_seconds_per_worker"])
                held.append(ps["held_seconds_per_worker"])
                if "batches_per_worker" in ps:  # worker 0 is rank 1, the straggler
                    share.append(ps["batches_per_worker"][0] / sum(ps["batches_per_worker"]))
            if "staleness" in f:
                smean.append(f["staleness"]["mean"])
                smax.append(f["staleness"]["max"])
        print(f"| {labels[name]} | {'1:2' if s == '1x2' else 'none'}"
              f" | {md(secs):.2f} ({min(secs):.2f}-{max(secs):.2f})"
              f" | {md(acc):.4f} ({min(acc):.4f}-{max(acc):.4f})"
              f" | {md(slept):.2f} | " + (f"{md(pull):.2f} | {md(held):.2f}" if pull else "- | -") +
              " | " + (f"{md(smean):.2f} / {max(smax)}" if smean else "-") +
              " | " + (f"{md(share):.1%} ({min(share):.1%}-{max(share):.1%})" if share else "-") + " |")
EOF
  ;;
*)
  echo "usage: $0 accuracy|latency|straggler ..." >&2
  exit 2
  ;;
esac
