#!/usr/bin/env bash
# explain comm: bytes per step per strategy against the formulas, JSON, picture, errors.
source "$2"

out=$("$EXPLAIN" comm --model=mlp --ranks=4)
expect_contains "$out" "zero3 1.832 MB (1.50x ddp)" "ZeRO-3 is 1.5x DDP"

"$EXPLAIN" comm --model=mlp --ranks=4 --json > "$TMP/comm.jsonl" || fail "comm --json exited non-zero"
if json_ok "$TMP/comm.jsonl"; then pass; else fail "comm --json does not parse"; fi
# DDP: 2 (N-1)/N x 4 psi; ZeRO-1: half of that each way; ZeRO-3: units fc1 (200,960) and fc2
# (2,570, padded to 2,572): 2 gathers + 1 scatter of 3/4 x 4 P.
if python3 -c '
import json, sys
rows = {(r["strategy"], r["collective"]): r for r in map(json.loads, open(sys.argv[1]))}
psi = 203530
assert rows[("ddp", "all_reduce")]["bytes"] == 2 * 3 * 4 * psi // 4
assert rows[("zero1", "reduce_scatter")]["bytes"] == 3 * 4 * psi // 4
P = 200960 + 2572
assert rows[("zero3", "all_gather")]["bytes"] == 2 * 3 * 4 * P / 4
assert rows[("zero3", "reduce_scatter")]["bytes"] == 3 * 4 * P / 4
assert rows[("zero3", "all_gather")]["calls"] == 4
# pipeline K=2 M=4 batch 64: cut after fc1 (256 per example), 16 examples a micro-batch, f32
assert rows[("pipeline", "send")]["bytes"] == 4 * (256 * 16 * 4 + 96), rows[("pipeline", "send")]
' "$TMP/comm.jsonl"; then pass; else fail "comm figures"; fi

if have_gnuplot; then
  "$EXPLAIN" comm --model=resnet20 --ranks=8 --plot="$TMP/comm.svg" > /dev/null 2>&1 || fail "comm --plot"
  if svg_ok "$TMP/comm.svg"; then pass; else fail "comm.svg is not SVG"; fi
else
  echo "SKIPPED: comm --plot (gnuplot is not installed: apt-get install gnuplot-nox)"
fi

expect_contains "$("$EXPLAIN" comm --help)" "--tensor-parallel=T" "comm --help"
expect_error "--bucket-cap-mb=big: expected a number" comm --model=mlp --ranks=2 --bucket-cap-mb=big
expect_error "--data=cifar: unknown input 'cifar'" comm --model=mlp --ranks=2 --data=cifar
finish
