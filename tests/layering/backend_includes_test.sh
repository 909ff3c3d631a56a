#!/usr/bin/env bash
# The backend-include rule (check_backend_includes.sh): first on a small tree that breaks it and
# one that keeps it, so the checker is known to catch what it should; then on this repository.
# $1: the checker; $2: README.md at the root of the source tree (its real path locates the
# sources: the test reads them in place, so it sees every folder without listing them).
set -euo pipefail
check=$1
repo=$(dirname "$(readlink -f "$2")")
tmp=${TEST_TMPDIR:-$(mktemp -d)}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# dist/ reaching into tensor/cuda is caught, with the file, the line and the header named.
bad=$tmp/bad
mkdir -p "$bad/dist" "$bad/tensor/cuda"
printf '#include "dist/x.h"\n#include "tensor/cuda/runtime.h"\n' >"$bad/dist/x.cc"
if out=$("$check" "$bad"); then fail "dist/x.cc including tensor/cuda/runtime.h passed: $out"; fi
grep -qF 'dist/x.cc:2: includes "tensor/cuda/runtime.h", a file of the tensor/cuda backend' \
  <<<"$out" || fail "unexpected message: $out"

# A backend's own files, its sibling backend and the folder's tests may include it.
good=$tmp/good
mkdir -p "$good/tensor/cuda" "$good/tensor/cpu" "$good/tests/tensor"
echo '#include "tensor/cuda/runtime.h"' >"$good/tensor/cuda/a.cc"
echo '#include "tensor/cuda/runtime.h"' >"$good/tensor/cpu/b.cc"
echo '#include "tensor/cuda/runtime.h"' >"$good/tests/tensor/c_test.cc"
out=$("$check" "$good") || fail "allowed includes were rejected: $out"

# This repository.
out=$("$check" "$repo") || fail "backend files included from outside their folder:
$out"
echo "PASS: no folder includes another folder's cpu/ or cuda/ files ($repo)"
