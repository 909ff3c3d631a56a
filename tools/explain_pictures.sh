#!/bin/bash
# The pictures of docs/EXPLAIN.md, made again from this machine: the model-only ones (the ring
# all-reduce, pipeline grids, the memory table, the bytes per step with and without compression,
# the scaling curve) and the ones read from real runs (model states measured on 2 ranks; a DDP,
# a ZeRO-3, a tensor-parallel, a local-SGD, a gossip and a parameter-server step traced; the
# metrics of MLP runs in f32 and fp16, and under DDP, local SGD, gossip and asynchronous SGD; a
# run's report page). Writes docs/pictures/*.svg (and report.png, where chromium is installed);
# each command is the one EXPLAIN.md shows beside its picture.
#
#   tools/explain_pictures.sh        (builds //tools:train and //tools:explain first)
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt //tools:train //tools:explain >&2
train=bazel-bin/tools/train explain=bazel-bin/tools/explain out=docs/pictures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
mpi=(mpirun -np 2 --oversubscribe --allow-run-as-root)

"$explain" ring --ranks=4 --megabytes=100 --plot="$out/ring.svg" >/dev/null
"$explain" ring --ranks=4 --megabytes=100 --buffers="$out/ring_buffers.svg" >/dev/null
"$explain" pipeline --stages=4 --micro-batches=8 --backward-ratio=2 --plot="$out/1f1b.svg" >/dev/null
"$explain" pipeline --stages=4 --micro-batches=6 --schedule=zb-h1 --backward-ratio=2 \
  --plot="$out/zb.svg" >/dev/null
"$explain" memory --model=resnet50 --data=imagenet --ranks=64 --precision=mixed \
  --plot="$out/memory.svg" >/dev/null
"$explain" comm --model=resnet20 --ranks=4 --plot="$out/comm.svg" >/dev/null
"$explain" comm --model=resnet20 --ranks=4 --compression=all --plot="$out/compression.svg" >/dev/null
"$explain" scaling --model=resnet50 --data=imagenet --batch=64 --compute-ms=160 \
  --plot="$out/scaling.svg" >/dev/null
# Several series in one figure: strategies, schedules; the ZeRO paper's 7.5B parameters.
"$explain" scaling --model=resnet50 --data=imagenet --batch=64 --compute-ms=160 \
  --strategy=ddp,zero3,pipeline --plot="$out/scaling_strategies.svg" >/dev/null
"$explain" scaling --model=resnet50 --data=imagenet --batch=64 --compute-ms=160 --bandwidth-gbps=10 \
  --latency-us=50 --compression=none,fp16,topk:0.01,powersgd:4 --ranks=8,64,512 \
  --plot="$out/compression_scaling.svg" >/dev/null
"$explain" pipeline --stages=4 --micro-batches=8 --schedule=1f1b,zb-h1,zb-h2 --backward-ratio=2 \
  --plot="$out/schedules.svg" >/dev/null
"$explain" memory --params=7.5e9 --ranks=64 --precision=mixed --strategy=ddp,zero1,zero2,zero3 \
  --plot="$out/memory_paper.svg" >/dev/null

"${mpi[@]}" "$train" --model=resnet20 --data=synthetic --synthetic-size=192 --batch-size=32 \
  --epochs=1 --threads=1 --seed=3 --strategy=ddp --first-bucket-mb=0.1 --bucket-cap-mb=0.25 \
  --trace="$tmp/ddp.json" >/dev/null
"$explain" ddp --trace="$tmp/ddp.json" --plot="$out/ddp.svg" >/dev/null
"${mpi[@]}" "$train" --model=mlp --train-limit=384 --batch-size=64 --epochs=1 --threads=1 \
  --seed=3 --strategy=zero3 --trace="$tmp/zero3.json" --trace-steps=2:3 >/dev/null
"$explain" zero3 --trace="$tmp/zero3.json" --step=3 --plot="$out/zero3.svg" >/dev/null
"${mpi[@]}" "$explain" memory --measure --model=mlp --plot="$out/memory_measured.svg" >/dev/null

# One traced step of each of the other strategies, every rank's lanes (explain step).
short=(--model=mlp --train-limit=384 --batch-size=64 --epochs=1 --threads=1 --seed=3)
"${mpi[@]}" "$train" "${short[@]}" --tensor-parallel=2 --trace="$tmp/tp.json" >/dev/null
"$explain" step --trace="$tmp/tp.json" --plot="$out/tensor_parallel.svg" >/dev/null
"${mpi[@]}" "$train" "${short[@]}" --strategy=local-sgd --sync-period=3 --trace="$tmp/local.json" >/dev/null
"$explain" step --trace="$tmp/local.json" --plot="$out/local_sgd.svg" >/dev/null
"${mpi[@]}" "$train" "${short[@]}" --strategy=gossip --trace="$tmp/gossip.json" >/dev/null
"$explain" step --trace="$tmp/gossip.json" --plot="$out/gossip.svg" >/dev/null
mpirun -np 3 --oversubscribe --allow-run-as-root "$train" "${short[@]}" --strategy=async \
  --trace="$tmp/async.json" >/dev/null
"$explain" step --trace="$tmp/async.json" --plot="$out/async.svg" >/dev/null

"$train" --model=mlp --epochs=2 --train-limit=6400 --threads=1 --metrics="$tmp/f32.jsonl" >/dev/null
"$train" --model=mlp --epochs=2 --train-limit=6400 --threads=1 --amp=fp16 \
  --metrics="$tmp/fp16.jsonl" >/dev/null
(cd "$tmp" && "$OLDPWD/$explain" curves --metrics=f32.jsonl,fp16.jsonl \
  --plot="$OLDPWD/$out/curves.svg" >/dev/null)
# The lecture's algorithms on the same data: 2 workers each (the parameter server adds a server).
long=(--model=mlp --epochs=3 --train-limit=12800 --threads=1 --seed=3)
for s in ddp local-sgd gossip; do
  "${mpi[@]}" "$train" "${long[@]}" --strategy=$s --metrics="$tmp/$s.jsonl" >/dev/null
done
mpirun -np 3 --oversubscribe --allow-run-as-root "$train" "${long[@]}" --strategy=async \
  --metrics="$tmp/async.jsonl" >/dev/null
(cd "$tmp" && "$OLDPWD/$explain" curves --metrics=ddp.jsonl,local-sgd.jsonl,gossip.jsonl,async.jsonl \
  --plot="$OLDPWD/$out/algorithms.svg" >/dev/null)
# A run's page (explain report), photographed by headless Chromium where it is installed.
mkdir -p "$tmp/run"
"${mpi[@]}" "$train" --model=mlp --data=synthetic --epochs=2 --train-limit=640 --threads=1 --seed=3 \
  --strategy=zero2 --metrics="$tmp/run/metrics.jsonl" --trace="$tmp/run/trace.json" > "$tmp/run/stdout.txt"
echo "mpirun -np 2 train --model=mlp --data=synthetic --epochs=2 --train-limit=640 --threads=1 --seed=3 --strategy=zero2 --metrics=run/metrics.jsonl --trace=run/trace.json > run/stdout.txt" \
  > "$tmp/run/command.txt"
"$explain" report "$tmp/run" --html="$tmp/run.html" >/dev/null
if command -v chromium >/dev/null; then
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=5000 \
    --window-size=1200,2600 --screenshot="$out/report.png" "file://$tmp/run.html" >/dev/null 2>&1
else
  echo "chromium is not installed: docs/pictures/report.png not made again" >&2
fi
ls -l "$out"
