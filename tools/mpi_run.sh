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
# A waiting rank yields its core. Open MPI spins when it believes each rank has a core of its own
# (as many slots as ranks: a hostfile's, or 2 ranks on 2 cores), and Bazel runs two tests at once
# here: 16 ranks started from a hostfile of 16 slots took 17.7 s spinning, 2.7 s yielding.
export OMPI_MCA_mpi_yield_when_idle=1
# When a rank exits non-zero, mpirun sends the others SIGTERM and then waits this many seconds
# before SIGKILL; its default (1) made every refused or failed launch take a second longer
# (several of the tests launch dozens). Test ranks hold nothing that needs the grace period.
export OMPI_MCA_odls_base_sigkill_timeout=0
exec mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none "$@"
