#!/usr/bin/env bash
# The flag fuzzer's longer sweep (issue 49): RUNS random picks from every flag's values, each
# run ending in exit 0 or 2 within its time limit, never exit 1, a crash or a hang. The same
# generator as //tests/tools:flag_fuzz_test (which runs a few under bazel test).
#   tools/bench/flag_fuzz.sh [RUNS=200] [SEED=7]
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-200}
seed=${2:-7}
bazel build //tools:train //tests/tools:flag_fuzz_test >/dev/null
FLAG_FUZZ_RUNS=$runs FLAG_FUZZ_SEED=$seed bazel-bin/tests/tools/flag_fuzz_test \
  "$PWD/tools/mpi_run.sh" "$PWD/bazel-bin/tools/train"
