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

# explain comm --run: the same two runs' byte ledgers beside the formulas. ZeRO-3's gathers and
# reduce-scatters are the formula's to the byte; DDP's all-reduces are its two buckets plus the
# NaN guard's one f64 scalar per step (2 (N-1)/N x 8 = 8 bytes on 2 ranks), which ZeRO-3 shows
# as an all-reduce no formula predicts.
"$EXPLAIN" comm --model=mlp --first-bucket-mb=0.01 --bucket-cap-mb=0.5 --run="$TMP/ddp.out" --json \
  > "$TMP/comm_ddp.jsonl" || fail "explain comm --run (ddp)"
"$EXPLAIN" comm --model=mlp --run="$TMP/zero3.out" --json > "$TMP/comm_zero3.jsonl" \
  || fail "explain comm --run (zero3)"
if python3 -c '
import json, sys
ddp = {r["collective"]: r for r in map(json.loads, open(sys.argv[1]))}
z3 = {r["collective"]: r for r in map(json.loads, open(sys.argv[2]))}
psi, P = 203530, 200960 + 2570  # on 2 ranks neither unit is padded
r = ddp["all_reduce"]
assert r["calls"] == 2 and r["bytes"] == 4 * psi, r
assert r["measured_calls"] == 3 and r["measured_bytes"] == 4 * psi + 8, r
for c, calls, b in (("all_gather", 4, 4 * P), ("reduce_scatter", 2, 2 * P)):
    assert z3[c]["calls"] == calls == z3[c]["measured_calls"], z3[c]
    assert z3[c]["bytes"] == b == z3[c]["measured_bytes"], z3[c]
assert z3["all_reduce"]["formula"] == "none" and z3["all_reduce"]["measured_calls"] == 1, z3
' "$TMP/comm_ddp.jsonl" "$TMP/comm_zero3.jsonl"; then pass; else fail "explain comm --run figures"; fi
# A compressed run (sign, error feedback on): its all-gather is the formula's to the byte,
# 4 + ceil(n/8) per rank, the compressor read from the run.
"$MPI_RUN" 2 "$TRAIN" $SHORT --strategy=ddp --compression=sign > "$TMP/sign.out" 2>&1 \
  || { fail "sign run"; cat "$TMP/sign.out"; }
"$EXPLAIN" comm --model=mlp --run="$TMP/sign.out" --json > "$TMP/comm_sign.jsonl" \
  || fail "explain comm --run (sign)"
if python3 -c '
import json, sys
rows = {r["collective"]: r for r in map(json.loads, open(sys.argv[1]))}
g = rows["all_gather"]
assert g["compression"] == "sign" and g["calls"] == 1 == g["measured_calls"], g
assert g["bytes"] == 4 + (203530 + 7) // 8 == g["measured_bytes"], g
' "$TMP/comm_sign.jsonl"; then pass; else fail "explain comm --run figures (sign)"; fi
expect_error "trained with --compression=sign; leave --compression out" comm --model=mlp --run="$TMP/sign.out" --compression=fp16
# Giving the run's own compressor is the same as leaving it out: one row, not two.
rows=$("$EXPLAIN" comm --model=mlp --run="$TMP/sign.out" --compression=sign --json | grep -c '"collective":"all_gather"')
if [ "$rows" = 1 ]; then pass; else fail "comm --run --compression=sign printed $rows all_gather rows"; fi
out=$("$EXPLAIN" comm --model=mlp --run="$TMP/zero3.out")
expect_contains "$out" "zero3 on 2 ranks, bytes rank 0 sent per training step" "comm --run title"
expect_error "--ranks=4 but the run in '$TMP/zero3.out' had 2 ranks" comm --model=mlp --ranks=4 --run="$TMP/zero3.out"
expect_error "--model=resnet20 but the run in '$TMP/zero3.out' trained mlp" comm --model=resnet20 --run="$TMP/zero3.out"
expect_error "has no line of the train tool's final JSON" comm --model=mlp --run="$TMP/zero3.jsonl"

# explain step: any strategy's step. DDP's from the file above; local SGD averaging every step
# (its all-reduces named, the train_step span the tool adds for a strategy that records no
# computation itself); tensor parallelism's collectives named by what they are.
"$EXPLAIN" step --trace="$TMP/ddp.json" --json > "$TMP/step_ddp.jsonl" || fail "explain step --json (ddp)"
if json_ok "$TMP/step_ddp.jsonl"; then pass; else fail "explain step --json does not parse"; fi
"$MPI_RUN" 2 "$TRAIN" $SHORT --strategy=local-sgd --sync-period=1 --trace="$TMP/local.json" \
  --trace-steps=2 > "$TMP/local.out" 2>&1 || { fail "local-sgd run"; cat "$TMP/local.out"; }
"$MPI_RUN" 2 "$TRAIN" $SHORT --tensor-parallel=2 --trace="$TMP/tp.json" --trace-steps=2 \
  > "$TMP/tp.out" 2>&1 || { fail "tensor-parallel run"; cat "$TMP/tp.out"; }
"$EXPLAIN" step --trace="$TMP/local.json" --rank=1 --json > "$TMP/step_local.jsonl" || fail "explain step (local-sgd)"
"$EXPLAIN" step --trace="$TMP/tp.json" --json > "$TMP/step_tp.jsonl" || fail "explain step (tp)"
if python3 -c '
import json, sys
ddp = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in ddp if r.get("summary") == "step"]
assert [r["step"] for r in steps] == [2, 3], steps
kinds = {(r["step"], r["kind"]): r["events"] for r in ddp if r.get("summary") == "kind"}
assert kinds[(3, "all_reduce")] >= 2 and kinds[(3, "backward")] == 2, kinds
local = [json.loads(l) for l in open(sys.argv[2])]
names = [(r["track"], r["event"]) for r in local if "event" in r]
assert ("compute", "train_step") in names, names
assert any(t.startswith("comm thread 1 (ranks 0-1, world)") and e == "all_reduce model average" for t, e in names), names
s = [r for r in local if r.get("summary") == "step"][0]
assert s["communication_ms"] > 0 and s["compute_ms"] > 0, s
tp = [r["event"] for r in map(json.loads, open(sys.argv[3])) if "event" in r]
assert "tp all_reduce g (forward)" in tp, tp  # the MLP block: g after fc2
' "$TMP/step_ddp.jsonl" "$TMP/step_local.jsonl" "$TMP/step_tp.jsonl"; then pass; else fail "explain step figures"; fi
"$EXPLAIN" step --trace="$TMP/tp.json" --plot="$TMP/tp.svg" > /dev/null 2>&1 || fail "explain step --plot"
if svg_ok "$TMP/tp.svg"; then pass; else fail "tp.svg is not SVG"; fi

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
