#!/usr/bin/env bash
# Packs the GPU programs for a lent GPU machine (which has no Bazel): builds them here with
# --config=cuda, statically linked against tessera's own libraries, strips them, and packs them
# with the Debian libraries they need (OpenBLAS, gfortran, gomp) into device_bin/pack.tar.xz
# (~10 MB; device_bin/ is git-ignored; carry it). run.sh unpacks it once on the GPU machine.
#
#   tools/pack_for_device.sh
#   (on the GPU machine)  device_bin/run.sh cuda_ops_test
#                         device_bin/run.sh gpu_bench --batches=64,128
#
# run.sh takes the CUDA libraries (cudart, cuBLAS, cuDNN, NCCL) from the PyTorch virtual
# environment's nvidia packages there; the binaries need their CUDA 13 sonames (ldd shows any
# that are missing).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(
  //tools/bench:gpu_bench
  //tests/tensor:cuda_ops_test
  //tests/tensor:cuda_runtime_test
  //tests/nn:cuda_layers_test
  //tests/models:cuda_training_test
)
bazel build --config=cuda --dynamic_mode=off "${targets[@]}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
for t in "${targets[@]}"; do
  path=${t#//}
  cp "bazel-bin/${path%%:*}/${path##*:}" "$stage/"
  chmod u+w "$stage/${path##*:}"
  strip "$stage/${path##*:}"
done
for lib in /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0 \
           /lib/x86_64-linux-gnu/libgfortran.so.5 /lib/x86_64-linux-gnu/libquadmath.so.0 \
           /lib/x86_64-linux-gnu/libgomp.so.1; do
  cp -L "$lib" "$stage/lib/"
done
rm -rf device_bin
mkdir -p device_bin
tar -C "$stage" -cJf device_bin/pack.tar.xz .

cat > device_bin/run.sh <<'RUN'
#!/usr/bin/env bash
# device_bin/run.sh PROGRAM [ARGS...]: unpacks pack.tar.xz (once) and runs a packed program
# with the CUDA libraries of the PyTorch virtual environment.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=/tmp/tessera_device
if [ ! -e "$dir/.unpacked" ] || [ "$here/pack.tar.xz" -nt "$dir/.unpacked" ]; then
  rm -rf "$dir" && mkdir -p "$dir" && tar -C "$dir" -xJf "$here/pack.tar.xz" && touch "$dir/.unpacked"
fi
# The CUDA libraries: the PyTorch venv's nvidia packages, else a local toolkit.
if nvidia=$(python3 -c "import nvidia, os; print(os.path.dirname(nvidia.__file__))" 2>/dev/null); then
  libs=$(find "$nvidia" -name "lib*.so*" -printf "%h\n" | sort -u | tr '\n' ':')
else
  libs=/usr/local/cuda/lib64:
fi
export LD_LIBRARY_PATH="$dir/lib:${libs}${LD_LIBRARY_PATH:-}"
if ldd "$dir/$1" | grep -q "not found"; then
  echo "run.sh: missing libraries for $1:" >&2
  ldd "$dir/$1" | grep "not found" >&2
  exit 127
fi
exec "$dir/$1" "${@:2}"
RUN
chmod +x device_bin/run.sh
du -sh device_bin/pack.tar.xz
