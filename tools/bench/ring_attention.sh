#!/usr/bin/env bash
# Ring attention at s = 4096 on 2 and 4 ranks (tools/bench/ring_attention_bench.cc): equality to
# one process, the exchange hidden behind compute under an emulated 10 Gb/s link, and the causal
# imbalance with and without head-tail order. Extra flags go to the bench.
#   tools/bench/ring_attention.sh [--heads=4 --head-dim=64 ...]
# mpirun as tools/mpi_run.sh starts it, but with Open MPI's single-copy transfers (CMA) unless
# SINGLE_COPY=none: a message then moves in one copy when the receiver's helper thread polls,
# instead of in fragments that need both ranks' helper threads scheduled beside their compute.
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build -c opt //tools/bench:ring_attention_bench >/dev/null 2>&1
export OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism="${SINGLE_COPY:-cma}"
for ranks in 2 4; do
  mpirun -np "$ranks" --oversubscribe --allow-run-as-root --bind-to none \
    bazel-bin/tools/bench/ring_attention_bench --seq=4096 "$@"
done
