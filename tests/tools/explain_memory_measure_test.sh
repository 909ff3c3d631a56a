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
expect_contains "$out" "pipeline            1  0.010 MB / 0.010 MB" "pipeline row of rank 1 (fc2's stage)"
expect_contains "$out" "tensor_parallel     1  0.407 MB / 0.407 MB" "tensor-parallel row of rank 1"
expect_contains "$("$EXPLAIN" memory --help)" "--measure" "--help"

# A GPT's pipeline: the last stage holds a copy of wte for the tied lm_head, so the stages hold
# psi + 256 x 32 parameters between them (gpt-tiny: 32 wide, the byte vocabulary of 256), and
# each stage's measured model states equal the formula for the parameters it holds.
"$MPI_RUN" 2 "$EXPLAIN" memory --measure --model=gpt-tiny --tokenizer=byte --batch=2 --seq-len=16 \
  --json > "$TMP/gpt.jsonl" 2> "$TMP/gpt.err" || { fail "explain memory --measure --model=gpt-tiny"; cat "$TMP/gpt.err"; }
if python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "\"pipeline\"" in l]
assert len(rows) == 2, rows
psi = rows[0]["psi"]
assert sum(r["stage_parameters"] for r in rows) == psi + 256 * 32, [r["stage_parameters"] for r in rows]
for r in rows:
    k = r["stage_parameters"]
    assert (r["parameters_bytes"], r["gradients_bytes"], r["optimizer_bytes"]) == (4 * k, 4 * k, 8 * k), r
    assert (r["predicted_parameters_bytes"], r["predicted_gradients_bytes"], r["predicted_optimizer_bytes"]) == (4 * k, 4 * k, 8 * k), r
' "$TMP/gpt.jsonl"; then pass; else fail "the GPT pipeline stages (tied copy of wte)"; fi

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
# A GPT's activations on one rank of a long-sequence layout (docs/SEQUENCE.md), measured on its
# 2 ranks: every row predicted = measured, and one block written out by hand. gpt-tiny at b = 2,
# s = 32 (h = 32, a = 2): under T = 2 with sequence parallelism s b h = 2048 elements, a block keeps
# (17 - 1) x 4 x 2048 / 2 (one head a rank: its output's two layouts are one tensor) + 16 x 64 / 2
# + 4 x 1 x 64 = 66,304 bytes; under C = 2 ring attention a rank's 16 tokens (s b h = 1024) keep
# (17 + 2) x 4 x 1024 (the last K/V block received) + 16 x 32 + 4 x 2 x 32 = 78,592.
for layout in "--tensor-parallel=2 --sequence-parallel:66304" "--context-parallel=2:78592"; do
  flags=${layout%%:*}
  "$MPI_RUN" 2 "$EXPLAIN" memory --model=gpt-tiny --tokenizer=byte --ranks=1 --batch=2 --seq-len=32 \
    $flags --json > "$TMP/layout.jsonl" 2> "$TMP/layout.err" || { fail "memory $flags"; cat "$TMP/layout.err"; }
  if python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "\"layer\"" in l]
assert len(rows) == 6, rows
for r in rows:
    assert r["activation_bytes"] == r["measured_activation_bytes"], r
assert [r["activation_bytes"] for r in rows if r["layer"] == "h0"] == [int(sys.argv[2])], rows
' "$TMP/layout.jsonl" "${layout##*:}"; then pass; else fail "memory $flags: activations"; fi
done
out=$("$EXPLAIN" memory --model=gpt-tiny --tokenizer=byte --ranks=1 --seq-len=32 --context-parallel=2 2>&1)
expect_contains "$out" "(measured: start it on the layout's 2 ranks, mpirun -np 2 explain memory ...)" "unmeasured layout"

expect_error "--plot=m.png: expected a file name ending in .svg" memory --measure --model=mlp --plot=m.png
expect_error "--ranks=4: --measure runs on the 1 rank it was started on" memory --measure --model=mlp --ranks=4
expect_error "unknown flag --stages" memory --measure --model=mlp --stages=2

finish
