#!/usr/bin/env bash
# Runs one example binary with its arguments; its exit code is the test's.
set -euo pipefail
exec "$@"
