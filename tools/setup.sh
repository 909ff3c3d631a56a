#!/usr/bin/env bash
# Installs every Debian package tessera needs (build, tests, data), as root on Debian 12.
# Idempotent: when everything is already installed it only checks and returns.
set -euo pipefail

packages=(
  bazel-bootstrap bazel-rules-java        # Bazel 4.2.3 and the rules_java it needs offline
  g++ libeigen3-dev                       # CPU kernels: Eigen types
  libopenblas-openmp-dev                  # OpenBLAS sgemm/dgemm on OpenMP threads
  libdnnl-dev                             # oneDNN: bf16 GEMM on CPUs with AVX-512 BF16
  libopenmpi-dev openmpi-bin              # multi-process training under mpirun
  slurm-wlm munge libpmix-dev             # Slurm (tools/slurm_test.sh): srun --mpi=pmix loads libpmix.so
  libgtest-dev libbenchmark-dev           # GoogleTest suites, Google Benchmark
  zlib1g-dev                              # gzip'd IDX files
  dataset-fashion-mnist                   # the real Fashion-MNIST, under /usr/share/datasets
  gnuplot-nox python3                     # explain --plot's pictures; tests parse its JSON and SVG
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}; run this script as root" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
