#!/usr/bin/env bash
# explain memory --measure on the MLP (Adam): on 2 ranks under mpirun and on 1 without, every
# rank's measured parameters, gradients and optimizer state per strategy equal the ZeRO formula
# memory_measure_check.py computes, to the byte (f32, and mixed precision on 2 ranks), and on 2
# ranks the train tool's own counting-allocator figures (its final JSON's memory.per_rank) for
# DDP and ZeRO-1/2/3; the pipeline's stages hold their layers' parameters and each
# tensor-parallel rank its slices; the picture parses; bad flags are named. Args: EXPLAIN LIB MPI_RUN TRAIN CHECK.
source "$2"
MPI_RUN="$3"
TRAIN="$4"
CHECK="$5"

"$MPI_RUN" 2 "$EXPLAIN" memory --measure --model=mlp --json > "$TMP/two.jsonl" 2> "$TMP/two.err" \
  || { fail "explain memory --measure on 2 ranks"; cat "$TMP/two.err"; }
if json_ok "$TMP/two.jsonl"; then pass; else fail "--measure --json does not parse"; fi
# The train tool measures the same model states its own way (tools/train/memory_report.h).
for s in ddp zero1 zero2 zero3; do
  "$MPI_RUN" 2 "$TRAIN" --model=mlp --data=synthetic --synthetic-size=256 --batch-size=64 --epochs=1 \
    --threads=1 --strategy=$s > "$TMP/$s.out" 2>&1 || { fail "train --strategy=$s"; cat "$TMP/$s.out"; }
  tail -1 "$TMP/$s.out" > "$TMP/$s.json"
done
if python3 "$CHECK" "$TMP/two.jsonl" 2 "$TMP"; then pass; else fail "2-rank figures"; fi

"$EXPLAIN" memory --measure --model=mlp --json > "$TMP/one.jsonl" 2> "$TMP/one.err" \
  || { fail "explain memory --measure on 1 rank"; cat "$TMP/one.err"; }
if python3 "$CHECK" "$TMP/one.jsonl" 1; then pass; else fail "1-rank figures"; fi

out=$("$MPI_RUN" 2 "$EXPLAIN" memory --measure --model=mlp 2>&1)
expect_contains "$out" "model states per rank on N = 2 ranks, measured" "table title"
expect_contains "$out" "zero3               1  0.407 MB / 0.407 MB" "zero3 row of rank 1"
expect_contains "$out" "pipeline            1  0.010 MB / 0.407 MB" "pipeline row of rank 1 (fc2's stage)"
expect_contains "$out" "tensor_parallel     1  0.407 MB / 0.407 MB" "tensor-parallel row of rank 1"
expect_contains "$("$EXPLAIN" memory --help)" "--measure" "--help"

# Mixed precision (bf16 parameters, f32 masters) on 2 ranks, and the picture.
"$MPI_RUN" 2 "$EXPLAIN" memory --measure --model=mlp --precision=mixed --json > "$TMP/mixed.jsonl" \
  2> "$TMP/mixed.err" || { fail "explain memory --measure --precision=mixed"; cat "$TMP/mixed.err"; }
if python3 "$CHECK" "$TMP/mixed.jsonl" 2; then pass; else fail "2-rank mixed-precision figures"; fi
if have_gnuplot; then
  "$EXPLAIN" memory --measure --model=mlp --plot="$TMP/m.svg" > /dev/null 2>&1 || fail "--measure --plot"
  if svg_ok "$TMP/m.svg"; then pass; else fail "--measure picture is not SVG"; fi
else
  echo "SKIPPED: memory --measure --plot (gnuplot is not installed: apt-get install gnuplot-nox)"
fi
expect_error "--plot=m.png: expected a file name ending in .svg" memory --measure --model=mlp --plot=m.png
expect_error "--ranks=4: --measure runs on the 1 rank it was started on" memory --measure --model=mlp --ranks=4
expect_error "unknown flag --stages" memory --measure --model=mlp --stages=2

finish
