#!/usr/bin/env bash
# Ring attention at s = 4096 on 2 and 4 ranks (tools/bench/ring_attention_bench.cc): equality to
# one process, the exchange hidden behind compute under an emulated 10 Gb/s link, and the causal
# imbalance with and without head-tail order. Extra flags go to the bench.
#   tools/bench/ring_attention.sh [--heads=4 --head-dim=64 ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build -c opt //tools/bench:ring_attention_bench >/dev/null
for ranks in 2 4; do
  tools/mpi_run.sh "$ranks" bazel-bin/tools/bench/ring_attention_bench --seq=4096 "$@"
done
