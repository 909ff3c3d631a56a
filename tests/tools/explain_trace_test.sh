#!/usr/bin/env bash
# train --trace on 2 ranks (MLP, 3 steps) read back: the file parses as JSON, holds both ranks'
# events and exactly the --trace-steps asked for, DDP's bucket all-reduces and ZeRO-3's unit
# gathers, frees and reduce-scatters per step are those the model's parameter sizes and the
# bucket caps imply (trace_check.py computes them), and explain ddp / explain zero3 --json print
# the figures the events imply. Args: EXPLAIN LIB MPI_RUN TRAIN CHECK.
source "$2"
MPI_RUN="$3"
TRAIN="$4"
CHECK="$5"
# 384 images over 2 ranks in batches of 64: 3 steps.
SHORT="--model=mlp --train-limit=384 --batch-size=64 --epochs=1 --threads=1 --seed=3"

# DDP, steps 2 and 3, two buckets: [fc2.bias fc2.weight fc1.bias] (first cap 0.01 MB) and [fc1.weight].
"$MPI_RUN" 2 "$TRAIN" $SHORT --strategy=ddp --first-bucket-mb=0.01 --bucket-cap-mb=0.5 \
  --trace="$TMP/ddp.json" --trace-steps=2:3 > "$TMP/ddp.out" 2>&1 || { fail "ddp run"; cat "$TMP/ddp.out"; }
expect_contains "$(cat "$TMP/ddp.out")" "trace: $TMP/ddp.json" "ddp run says where the trace is"
"$EXPLAIN" ddp --trace="$TMP/ddp.json" --json > "$TMP/ddp.jsonl" || fail "explain ddp --json"
if json_ok "$TMP/ddp.jsonl"; then pass; else fail "explain ddp --json does not parse"; fi
if python3 "$CHECK" ddp "$TMP/ddp.json" "$TMP/ddp.jsonl" 2,3 0.01 0.5; then pass; else fail "ddp trace"; fi
out=$("$EXPLAIN" ddp --trace="$TMP/ddp.json" --step=3)
expect_contains "$out" "DDP step 3, rank 0 of 2" "ddp table title"
expect_contains "$out" "all_reduce bucket 1" "ddp table rows"
expect_contains "$out" "hidden behind backward (overlap" "ddp overlap line"
"$EXPLAIN" ddp --trace="$TMP/ddp.json" --plot="$TMP/ddp.svg" > /dev/null 2>&1 || fail "explain ddp --plot"
if svg_ok "$TMP/ddp.svg"; then pass; else fail "ddp.svg is not SVG"; fi

# ZeRO-3, every step: each unit gathered twice, freed twice, reduce-scattered once per step.
"$MPI_RUN" 2 "$TRAIN" $SHORT --strategy=zero3 --trace="$TMP/zero3.json" --trace-steps=1:3 \
  > "$TMP/zero3.out" 2>&1 || { fail "zero3 run"; cat "$TMP/zero3.out"; }
"$EXPLAIN" zero3 --trace="$TMP/zero3.json" --json > "$TMP/zero3.jsonl" || fail "explain zero3 --json"
if json_ok "$TMP/zero3.jsonl"; then pass; else fail "explain zero3 --json does not parse"; fi
if python3 "$CHECK" zero3 "$TMP/zero3.json" "$TMP/zero3.jsonl" 1,2,3; then pass; else fail "zero3 trace"; fi
"$EXPLAIN" zero3 --trace="$TMP/zero3.json" --step=2 --plot="$TMP/zero3.svg" > "$TMP/zero3.txt" 2>&1 \
  || fail "explain zero3 --plot"
expect_contains "$(cat "$TMP/zero3.txt")" "2 units: 4 all-gathers" "zero3 table summary"
if svg_ok "$TMP/zero3.svg"; then pass; else fail "zero3.svg is not SVG"; fi

# The default: the last step only.
"$MPI_RUN" 2 "$TRAIN" $SHORT --strategy=ddp --trace="$TMP/last.json" > "$TMP/last.out" 2>&1 \
  || { fail "default trace-steps run"; cat "$TMP/last.out"; }
if python3 "$CHECK" steps "$TMP/last.json" 3; then pass; else fail "default --trace-steps"; fi

# Bad input names what was wrong.
err=$("$TRAIN" $SHORT --trace-steps=2 2>&1 >/dev/null); expect_contains "$err" "give --trace too" "--trace-steps alone"
err=$("$TRAIN" $SHORT --trace="$TMP/x.json" --trace-steps=0:2 2>&1 >/dev/null)
expect_contains "$err" "--trace-steps=0:2" "--trace-steps=0:2"
err=$("$TRAIN" $SHORT --trace="$TMP/x.json" --trace-steps=5:9 2>&1 >/dev/null)
expect_contains "$err" "selects steps 5 to 9, but this run trains steps 1 to 6" "steps past the run"
expect_error "has no DDP buckets" ddp --trace="$TMP/zero3.json"
expect_error "has no ZeRO-3 unit events" zero3 --trace="$TMP/ddp.json"
expect_error "--step=7: $TMP/ddp.json holds steps [2, 3]" ddp --trace="$TMP/ddp.json" --step=7
expect_error "--rank=2" ddp --trace="$TMP/ddp.json" --rank=2
expect_error "cannot read the file" ddp --trace="$TMP/none.json"
echo "not json" > "$TMP/bad.json"
expect_error "not a JSON file" zero3 --trace="$TMP/bad.json"
expect_error "--trace" ddp

finish
