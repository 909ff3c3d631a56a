#!/usr/bin/env bash
# explain scaling: the model's step time for given layer times against a hand computation, the
# picker against a forced ring at 4096 ranks, a measured run, JSON, picture, errors.
source "$2"

# MLP layers (flatten fc1 relu fc2) 0, 1, 0, 0.3 ms: its one bucket (814,120 bytes) is full only
# when backward ends, so the all-reduce is exposed: ring at N = 2, 5 us, 100 Gb/s:
# 2 (5 us + 407,060 B / 12.5 GB/s) = 75.1296 us; step 1.3751296 ms.
"$EXPLAIN" scaling --model=mlp --ranks=1,2,4096 --layer-ms=0,1,0,0.3 --json > "$TMP/given.jsonl" \
  || fail "scaling --json exited non-zero"
if json_ok "$TMP/given.jsonl"; then pass; else fail "scaling --json does not parse"; fi
if python3 -c '
import json, sys
head, *rows = [json.loads(l) for l in open(sys.argv[1])]
assert any("weak scaling" in a for a in head["assumptions"]), head
n = {r["ranks"]: r for r in rows}
assert n[1]["efficiency"] == 1 and n[1]["collectives"] == 0
assert abs(n[2]["step_seconds"] - 1.3751296e-3) < 1e-12, n[2]
assert n[2]["algorithm"] == "ring" and n[4096]["algorithm"] == "tree"
' "$TMP/given.jsonl"; then pass; else fail "scaling figures"; fi

# Forcing the ring at 4096 ranks pays 2 x 4095 latencies (41 ms) per all-reduce.
"$EXPLAIN" scaling --model=mlp --ranks=4096 --layer-ms=0,1,0,0.3 --topology=ring --json > "$TMP/ring.jsonl"
if python3 -c '
import json, sys
auto = [json.loads(l) for l in open(sys.argv[1])][-1]
ring = [json.loads(l) for l in open(sys.argv[2])][-1]
assert ring["step_seconds"] > 0.04 and auto["step_seconds"] < 0.002, (ring, auto)
' "$TMP/given.jsonl" "$TMP/ring.jsonl"; then pass; else fail "the picker does not avoid the ring's collapse"; fi

out=$("$EXPLAIN" scaling --model=mlp --strategy=zero3 --ranks=1,2,4 --topology=hierarchical --ranks-per-node=2)
expect_contains "$out" "measured on this machine, batch 64" "measured times"
expect_contains "$out" "2 ranks per node" "hierarchical assumption"
out=$("$EXPLAIN" scaling --model=resnet20 --strategy=pipeline --ranks=1,4,8 --stages=4 --layer-ms=1,1,1,1,1,1,1,1,1,1,1)
expect_contains "$out" "pipeline: 1F1B" "pipeline assumption"

if have_gnuplot; then
  "$EXPLAIN" scaling --model=mlp --layer-ms=0,1,0,0.3 --plot="$TMP/scaling.svg" > /dev/null 2>&1 || fail "scaling --plot"
  if svg_ok "$TMP/scaling.svg"; then pass; else fail "scaling.svg is not SVG"; fi
else
  echo "SKIPPED: scaling --plot (gnuplot is not installed: apt-get install gnuplot-nox)"
fi

expect_contains "$("$EXPLAIN" scaling --help)" "--compute-ms=T" "scaling --help"
expect_error "--topology=mesh: unknown collective algorithm 'mesh'" scaling --model=mlp --topology=mesh --layer-ms=1,1,1,1
expect_error "--ranks=1,x: expected a whole number" scaling --model=mlp --ranks=1,x --layer-ms=1,1,1,1
expect_error "--layer-ms: mlp has 4 layers, got 2 times" scaling --model=mlp --layer-ms=1,2
expect_error "--ranks=3: pipeline: 3 ranks are not a multiple of 2 stages" \
  scaling --model=mlp --strategy=pipeline --stages=2 --ranks=3 --layer-ms=1,1,1,1
expect_error "ranks per node (2) to divide the ranks (3)" \
  scaling --model=mlp --topology=hierarchical --ranks-per-node=2 --ranks=3 --layer-ms=1,1,1,1
finish
