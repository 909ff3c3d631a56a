#!/usr/bin/env bash
# explain memory: the ZeRO paper's table for the MLP written out by hand, JSON, picture, errors.
source "$2"

out=$("$EXPLAIN" memory --model=resnet20 --ranks=4)
expect_contains "$out" "psi = 269,434 parameters" "resnet20 psi"
expect_contains "$out" "zero3               4    0.269 MB   0.269 MB   0.269 MB  0.808 MB  (4 + 4 + 4) psi/N" "zero3 row"

# MLP, psi = 203,530, f32 Adam (4 + 4 + 8), N = 4: DDP 16 psi; ZeRO-1 8 psi + 12 psi/4;
# ZeRO-2 4 psi + 16 psi/4; ZeRO-3 16 psi/4.
"$EXPLAIN" memory --model=mlp --ranks=4 --json > "$TMP/memory.jsonl" || fail "memory --json exited non-zero"
if json_ok "$TMP/memory.jsonl"; then pass; else fail "memory --json does not parse"; fi
if python3 -c '
import json, sys
rows = {r["strategy"]: r for r in map(json.loads, open(sys.argv[1]))}
psi = 203530
assert rows["ddp"]["total_bytes"] == 16 * psi
assert rows["zero1"]["total_bytes"] == 8 * psi + 12 * psi // 4
assert rows["zero2"]["total_bytes"] == 4 * psi + 4 * psi // 4 + 12 * psi // 4
assert rows["zero3"]["total_bytes"] == 16 * psi // 4
assert rows["pipeline"]["parameters_bytes"] == 4 * (psi // 2 + psi % 2)
assert rows["tensor_parallel"]["parameters_bytes"] == 4 * (10 + (psi - 10) // 2)
' "$TMP/memory.jsonl"; then pass; else fail "memory figures"; fi

"$EXPLAIN" memory --model=mlp --ranks=8 --precision=mixed --optimizer=adam --json > "$TMP/mixed.jsonl"
if python3 -c '
import json, sys
rows = {r["strategy"]: r for r in map(json.loads, open(sys.argv[1]))}
assert rows["ddp"]["formula"] == "(2 + 2 + 12) psi", rows["ddp"]
assert rows["ddp"]["total_bytes"] == 16 * 203530
' "$TMP/mixed.jsonl"; then pass; else fail "mixed precision Adam is not 2 + 2 + 12"; fi

if have_gnuplot; then
  "$EXPLAIN" memory --model=mlp --ranks=4 --plot="$TMP/memory.svg" > /dev/null 2>&1 || fail "memory --plot"
  if svg_ok "$TMP/memory.svg"; then pass; else fail "memory.svg is not SVG"; fi
else
  echo "SKIPPED: memory --plot (gnuplot is not installed: apt-get install gnuplot-nox)"
fi

expect_contains "$("$EXPLAIN" memory --help)" "--optimizer=O" "memory --help"
expect_error "--ranks=0: must be at least 1" memory --model=mlp --ranks=0
expect_error "--ranks is required" memory --model=mlp
expect_error "--precision=f16: unknown precision 'f16'" memory --model=mlp --ranks=2 --precision=f16
expect_error "--model=vgg16: unknown model 'vgg16'" memory --model=vgg16 --ranks=2
finish
