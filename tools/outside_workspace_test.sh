#!/usr/bin/env bash
# Builds and runs a user's program in a temporary workspace outside this repository, against
# @tessera//:tessera, exactly as README.md's "Use tessera in your own program" says: the user's
# WORKSPACE declares tessera and calls tessera_deps(); its BUILD depends on @tessera//:tessera.
# No file of tessera is edited. Part of tools/test.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/tessera-user.XXXXXX)
cleanup() {
  (cd "$work" && bazel clean --expunge >/dev/null 2>&1) || true
  rm -rf "$work"
}
trap cleanup EXIT

cp "$repo/tools/outside_workspace/main.cc" "$work/main.cc"
cat >"$work/WORKSPACE" <<WS
workspace(name = "my_project")

local_repository(name = "tessera", path = "$repo")

load("@tessera//:deps.bzl", "tessera_deps")

tessera_deps()
WS
cat >"$work/.bazelrc" <<'RC'
# tessera is C++17 (Bazel 4's default toolchain compiles C++11); optimized builds.
build --cxxopt=-std=c++17
build --compilation_mode=opt
RC
cat >"$work/BUILD" <<'BUILDFILE'
cc_binary(
    name = "my_program",
    srcs = ["main.cc"],
    deps = ["@tessera//:tessera"],
)
BUILDFILE

cd "$work"
start=$(date +%s)
# The user's .bazelrc asks for -c opt; this test checks the wiring, not speed, so it compiles
# without optimization (about half the time on CI's two cores).
bazel build --nosandbox_debug --compilation_mode=fastbuild \
  --disk_cache="$HOME/.cache/tessera-bazel-disk" //:my_program
bazel-bin/my_program
echo "outside_workspace_test: built and ran //:my_program against @tessera//:tessera in $(( $(date +%s) - start )) s"
