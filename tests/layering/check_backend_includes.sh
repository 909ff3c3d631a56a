#!/usr/bin/env bash
# Checks DESIGN.md's layering rule for device backends: nobody includes another folder's cpu/ or
# cuda/ files. A source file may include X/cpu/... or X/cuda/... only when it lives in X/cpu/ or
# X/cuda/ itself (a backend, or its sibling backend), or in tests/X/ (X's own tests). Everything
# else goes through X's device-neutral headers (tensor/stream.h, tensor/accelerator.h, ...), so a
# CPU-only build never needs CUDA and dist/ never reaches into a backend.
#
# Bazel 4.2.3's layering_check needs clang module maps (this build uses gcc), so this stands in
# for it. Usage: check_backend_includes.sh ROOT. Prints every offending include as
# FILE:LINE and exits 1 if there is one; exits 0 otherwise.
set -euo pipefail
root=$1
cd "$root"

status=0
while IFS= read -r file; do
  file=${file#./}
  while IFS= read -r hit; do
    line=${hit%%:*}
    header=$(sed -E 's/^[^<"]*[<"]([^">]*)[">].*/\1/' <<<"${hit#*:}")
    backend=$(sed -E 's#^(.*/(cpu|cuda))/.*#\1#' <<<"$header")  # tensor/cuda
    owner=${backend%/*}                                          # tensor
    case "$file" in
      "$owner"/cpu/* | "$owner"/cuda/* | tests/"$owner"/*) continue ;;
    esac
    echo "$file:$line: includes \"$header\", a file of the $backend backend: only $owner/cpu/," \
      "$owner/cuda/ and tests/$owner/ may; use $owner's device-neutral headers instead"
    status=1
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^">]*/(cpu|cuda)/' "$file" || true)
done < <(find . \( -name 'bazel-*' -o -name third_party -o -name .git \) -prune -o -type f \
           \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print | sort)
exit "$status"
