#!/usr/bin/env bash
# A user's program (tools/outside_workspace/main.cc) in a temporary workspace outside this
# repository, against @tessera//:tessera, exactly as README.md's "Use tessera in your own
# program" says: the user's WORKSPACE declares tessera and calls tessera_deps(); its BUILD
# depends on @tessera//:tessera. No file of tessera is edited. Part of tools/test.sh.
#
#   tools/outside_workspace_test.sh          what CI runs: Bazel loads and analyzes the user's
#                                            workspace (the WORKSPACE lines, deps.bzl, every
#                                            label and visibility under @tessera//:tessera) and
#                                            compiles main.cc against tessera's headers there
#   tools/outside_workspace_test.sh --full   builds all of @tessera//:tessera in that workspace,
#                                            links the program and runs it
#
# The same main.cc is linked against the same library and run inside this workspace by
# //tests/tools:outside_workspace_program_test. What only --full adds is compiling tessera's own
# .cc files under external/tessera/ paths (their includes resolve there as tessera.h's do, and
# no BUILD file passes an include path or a relative link path): on a machine with an empty
# disk cache that was about 120 s of CI's two cores, for files the main build compiles anyway.
set -euo pipefail
full=0
case "${1:-}" in
  "") ;;
  --full) full=1 ;;
  *) echo "outside_workspace_test: unknown argument '$1' (none, or --full)" >&2; exit 2 ;;
esac
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
# Debian's /etc/bazel/bazelrc turns on --sandbox_debug: about 975 lines of sandbox output.
build --nosandbox_debug
# Objects kept across clean builds and workspaces.
build --disk_cache=~/.cache/tessera-bazel-disk
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
# The user's .bazelrc asks for -c opt; CI checks the wiring, not speed, so it compiles without
# optimization (about half the time on CI's two cores). --full builds as the user does, then
# builds again after a change to main.cc.
flags=(--compilation_mode=fastbuild)
if [ "$full" = 1 ]; then
  bazel build //:my_program
  bazel-bin/my_program
  first=$(($(date +%s) - start))
  echo "// changed" >>main.cc
  start=$(date +%s)
  bazel build //:my_program
  echo "outside_workspace_test: built and ran //:my_program against @tessera//:tessera" \
    "in ${first} s; after a change to main.cc, built again in $(($(date +%s) - start)) s"
else
  bazel build "${flags[@]}" --output_groups=compilation_outputs //:my_program
  test -f bazel-bin/_objs/my_program/main.pic.o || test -f bazel-bin/_objs/my_program/main.o
  echo "outside_workspace_test: analyzed //:my_program and compiled main.cc against" \
    "@tessera//:tessera in $(($(date +%s) - start)) s (--full also builds the library there," \
    "links and runs the program)"
fi
