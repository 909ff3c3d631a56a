#!/bin/bash
# The pictures of docs/EXPLAIN.md, made again from this machine: the model-only ones (pipeline
# grids, the memory table, the bytes per step, the scaling curve) and the ones read from real
# runs (a DDP and a ZeRO-3 step traced on 2 ranks, two MLP runs' metrics). Writes
# docs/pictures/*.svg; each command is the one EXPLAIN.md shows beside its picture.
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

"$explain" pipeline --stages=4 --micro-batches=8 --backward-ratio=2 --plot="$out/1f1b.svg" >/dev/null
"$explain" pipeline --stages=4 --micro-batches=6 --schedule=zb-h1 --backward-ratio=2 \
  --plot="$out/zb.svg" >/dev/null
"$explain" memory --model=resnet50 --data=imagenet --ranks=64 --precision=mixed \
  --plot="$out/memory.svg" >/dev/null
"$explain" comm --model=resnet20 --ranks=4 --plot="$out/comm.svg" >/dev/null
"$explain" scaling --model=resnet50 --data=imagenet --batch=64 --compute-ms=160 \
  --plot="$out/scaling.svg" >/dev/null

"${mpi[@]}" "$train" --model=resnet20 --data=synthetic --synthetic-size=192 --batch-size=32 \
  --epochs=1 --threads=1 --seed=3 --strategy=ddp --first-bucket-mb=0.1 --bucket-cap-mb=0.25 \
  --trace="$tmp/ddp.json" >/dev/null
"$explain" ddp --trace="$tmp/ddp.json" --plot="$out/ddp.svg" >/dev/null
"${mpi[@]}" "$train" --model=mlp --train-limit=384 --batch-size=64 --epochs=1 --threads=1 \
  --seed=3 --strategy=zero3 --trace="$tmp/zero3.json" --trace-steps=2:3 >/dev/null
"$explain" zero3 --trace="$tmp/zero3.json" --step=3 --plot="$out/zero3.svg" >/dev/null

"$train" --model=mlp --epochs=2 --train-limit=6400 --threads=1 --metrics="$tmp/f32.jsonl" >/dev/null
"$train" --model=mlp --epochs=2 --train-limit=6400 --threads=1 --amp=fp16 \
  --metrics="$tmp/fp16.jsonl" >/dev/null
(cd "$tmp" && "$OLDPWD/$explain" curves --metrics=f32.jsonl,fp16.jsonl \
  --plot="$OLDPWD/$out/curves.svg" >/dev/null)
ls -l "$out"
