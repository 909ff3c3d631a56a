#!/usr/bin/env bash
# Runs a test binary on N ranks under mpirun: oversubscribed (CI has 2 cores), allowed as root,
# shared-memory transport on one machine. Usage: mpi_run.sh N BINARY [ARGS...]
set -euo pipefail
np=$1
shift
# Bazel's per-test files would be written by every rank at once; mpirun's exit code is the result.
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE
export OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # no ptrace-based copies in sandboxes
export OMPI_MCA_rmaps_base_oversubscribe=1
# When a rank exits non-zero, mpirun sends the others SIGTERM and then waits this many seconds
# before SIGKILL; its default (1) made every refused or failed launch take a second longer
# (several of the tests launch dozens). Test ranks hold nothing that needs the grace period.
export OMPI_MCA_odls_base_sigkill_timeout=0
exec mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none "$@"
