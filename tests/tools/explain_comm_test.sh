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

# Compressors, by hand: the MLP's one bucket of n = 203,530 f32 elements on N = 4 ranks.
"$EXPLAIN" comm --model=mlp --ranks=4 --compression=all --json > "$TMP/compressed.jsonl" \
  || fail "comm --compression=all exited non-zero"
if python3 -c '
import json, math, sys
rows = {r["strategy"]: r for r in map(json.loads, open(sys.argv[1])) if "+" in r["strategy"]}
n, N = 203530, 4
k = math.ceil(0.01 * n)                                    # 2036 entries kept
expect = {
    "ddp+fp16": ("all_reduce", 1, 2 * (N - 1) / N * 2 * n),
    "ddp+bf16": ("all_reduce", 1, 2 * (N - 1) / N * 2 * n),
    "ddp+randomk:0.01": ("all_reduce", 1, 2 * (N - 1) / N * 4 * k),    # values only
    "ddp+topk:0.01": ("all_gather", 1, (N - 1) * 8 * k),              # index + value
    "ddp+qsgd:16": ("all_gather", 1, (N - 1) * (4 * math.ceil(n / 512) + math.ceil(6 * n / 8))),  # a norm per 512 entries; 1 + ceil(log2 17) bits
    "ddp+sign": ("all_gather", 1, (N - 1) * (4 + math.ceil(n / 8))),
    # PowerSGD rank 4: fc2.weight [10, 256] and fc1.weight [256, 784] compressed (4 (r + c) x 2 <
    # r c), the biases not: U = 10 + 256, P = 4 (10 + 256), Q = 4 (256 + 784); three all-reduces.
    "ddp+powersgd:4": ("all_reduce", 3, 2 * (N - 1) / N * 4 * (266 + 4 * 266 + 4 * 1040)),
}
assert set(rows) == set(expect), sorted(rows)
for s, (collective, calls, b) in expect.items():
    r = rows[s]
    assert (r["collective"], r["calls"]) == (collective, calls), r
    assert abs(r["bytes"] - b) < 1e-6, (s, r["bytes"], b)
' "$TMP/compressed.jsonl"; then pass; else fail "comm --compression figures"; fi
expect_error "--compression=topk:2: " comm --model=mlp --ranks=2 --compression=topk:2

# A network given: each row's step time, scaling's model at N (the MLP at 1 ms + 0.3 ms a step,
# N = 2, 5 us, 100 Gb/s: DDP's exposed all-reduce of 814,120 bytes, 1.3751296 ms; fp16's of
# 407,060, 1.3425648 ms, as explain_scaling_test works them out), null where not modelled.
"$EXPLAIN" comm --model=mlp --ranks=2 --compression=fp16 --layer-ms=0,1,0,0.3 --bandwidth-gbps=100 \
  --latency-us=5 --json > "$TMP/timed.jsonl" || fail "comm --bandwidth-gbps"
if python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
step = {r["strategy"]: r["step_seconds"] for r in rows}
assert abs(step["ddp"] - 1.3751296e-3) < 1e-12, step
assert abs(step["ddp+fp16"] - 1.3425648e-3) < 1e-12, step
assert step["zero3"] > step["ddp"], step
for s in ("zero1", "zero2", "pipeline", "tensor_parallel"):
    assert step[s] is None, (s, step[s])
' "$TMP/timed.jsonl"; then pass; else fail "comm --bandwidth-gbps: step times"; fi
out=$("$EXPLAIN" comm --model=mlp --ranks=2 --layer-ms=0,1,0,0.3 --bandwidth-gbps=100)
expect_contains "$out" "ddp              all_reduce          1  0.814 MB    1.375" "the step column"
if [[ "$("$EXPLAIN" comm --model=mlp --ranks=2)" == *"step ms"* ]]; then fail "a step column without a network"; else pass; fi

# The picture (written directly): a group per strategy, a bar per collective it sends, each bar
# labelled with the bytes --json reports, every group's name shown (long ones turned, not cut).
"$EXPLAIN" comm --model=resnet20 --ranks=8 --compression=all --plot="$TMP/comm.svg" > /dev/null 2>&1 || fail "comm --plot"
"$EXPLAIN" comm --model=resnet20 --ranks=8 --compression=all --json > "$TMP/comm_all.jsonl"
if svg_ok "$TMP/comm.svg"; then pass; else fail "comm.svg is not SVG"; fi
if python3 -c '
import json, sys, xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
root = E.parse(sys.argv[1]).getroot()
texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
rows = [json.loads(l) for l in open(sys.argv[2]) if "collective" in l]
sent = {}
for r in rows:
    sent[(r["strategy"], r["collective"])] = sent.get((r["strategy"], r["collective"]), 0) + r["bytes"]
for strategy in {s for s, _ in sent}:
    assert strategy in texts, (strategy, texts)
labels = [t for t in texts if t.endswith(" MB")]
assert sorted(labels) == sorted("%.3f MB" % (b / 1e6) for b in sent.values()), (labels, sent)
bars = [r for r in root.iter(ns + "rect") if r.get("width") not in (None, "100%", "12")]
assert len(bars) == len(sent), (len(bars), len(sent))
assert "log scale" in texts[0], texts[0]
' "$TMP/comm.svg" "$TMP/comm_all.jsonl"; then pass; else fail "comm --plot: a bar per strategy and collective"; fi

# A GPT's bytes per transformer layer (cost/sequence_traffic.h): GPT-2's h = 768 at b = 1,
# s = 1024, f32 (s b h p = 3,145,728 bytes): sequence parallelism on T = 4 sends (8 + 2) x 3/4 of
# it over the rank's s/C tokens, plus the LayerNorms' and biases' gradient sums; ring attention
# on C = 2, over s b (h/T), 6 x 1/2 of it; Ulysses 8 x 1/2 / 2 of it.
"$EXPLAIN" comm --model=gpt2 --ranks=2 --seq-len=1024 --batch=1 --tensor-parallel=4 \
  --sequence-parallel --context-parallel=2 --json > "$TMP/sequence.jsonl" 2>&1 || fail "comm sequence"
if python3 -c '
import json, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "technique" in r: rows[r["technique"]] = r["bytes_per_layer"]
sbhp = 1024 * 768 * 4
assert set(rows) == {"sequence parallelism", "ring attention", "ulysses"}, rows
assert abs(rows["sequence parallelism"] - (7.5 * sbhp / 2 + 1.5 * 6 * 768 * 4)) < 1e-3, rows
assert abs(rows["ring attention"] - 6 * 0.5 * sbhp / 4) < 1e-3, rows
assert abs(rows["ulysses"] - 8 * 0.5 / 2 * sbhp / 4) < 1e-3, rows
' "$TMP/sequence.jsonl"; then pass; else fail "comm sequence figures"; fi
expect_error "--sequence-parallel and --context-parallel are a GPT's" comm --model=mlp --ranks=2 --context-parallel=2

expect_contains "$("$EXPLAIN" comm --help)" "--tensor-parallel=T" "comm --help"
expect_error "--bucket-cap-mb=big: expected a number" comm --model=mlp --ranks=2 --bucket-cap-mb=big
expect_error "--data=cifar: unknown input 'cifar'" comm --model=mlp --ranks=2 --data=cifar
finish
