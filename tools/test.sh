#!/usr/bin/env bash
# The test command (README.md): every target of the default CPU-only build, then every test target
# in it (the examples included), a user's program compiled in an outside workspace against
# @tessera//:tessera, training under Slurm on a one-node cluster started for the test (srun and
# sbatch), then, where the CUDA toolkit is installed (/usr/local/cuda), every target built with
# --config=cuda. So the CUDA code always compiles and links. With a GPU every test then runs again
# in that build; without one only the tests tagged "cuda" do (their CUDA paths skip, naming the
# reason): the other tests' code is the same CPU code in both builds, and running it twice took half
# of the test command's time. The --config=cuda build compiles only the CUDA code (nvcc and the few
# C++ files that include CUDA headers): every other object is the CPU build's, reused, since no
# compile command line changes (tools/cuda.bzl passes the CUDA libraries' link step alone to what
# depends on them); the test binaries are linked again.
set -uo pipefail
cd "$(dirname "$0")/.."

# Everything is built first, then the tests run. Interleaved, as `bazel test` alone does it,
# the multi-rank tests (up to 4 processes each) ran beside two compilers on two cores, and a
# cold run took 600 s against 525 s this way (tests 156 s of it, alone on the cores).
bazel build //... && bazel test //...
status=$?
# A user's program in a workspace of its own, analyzed and compiled against @tessera//:tessera
# (linked and run by //tests/tools:outside_workspace_program_test; --full does all of it there).
tools/outside_workspace_test.sh || status=1
# srun and sbatch of the train tool on a one-node Slurm cluster of its own (says SKIPPED where
# Slurm cannot run).
tools/slurm_test.sh || status=1
if [ -x /usr/local/cuda/bin/nvcc ]; then
  if nvidia-smi -L >/dev/null 2>&1; then
    bazel test --config=cuda //... || status=1
  else
    echo "tools/test.sh: no GPU (nvidia-smi -L): under --config=cuda every target is built and the tests tagged cuda run"
    bazel test --config=cuda --test_tag_filters=cuda //... || status=1
  fi
else
  echo "tools/test.sh: no /usr/local/cuda/bin/nvcc, so the --config=cuda build was not tested"
fi
exit "$status"
