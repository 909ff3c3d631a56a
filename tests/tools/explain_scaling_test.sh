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

# A GPT: gpt-tiny (bytes; 5 layers: embed h0 h1 ln_f lm_head) at 1 ms a layer, 16 windows of 32
# tokens: one rank's step is 5 ms, so 16 x 32 / 5 ms = 102,400 tokens/s; N = 2 keeps the batch
# per rank (weak scaling): twice the tokens in a step no shorter.
"$EXPLAIN" scaling --model=gpt-tiny --tokenizer=byte --seq-len=32 --batch=16 --ranks=1,2 \
  --layer-ms=1,1,1,1,1 --json > "$TMP/gpt.jsonl" || fail "scaling --model=gpt-tiny exited non-zero"
if python3 -c '
import json, sys
head, *rows = [json.loads(l) for l in open(sys.argv[1])]
assert head["data"] == "text", head
n = {r["ranks"]: r for r in rows}
assert abs(n[1]["step_seconds"] - 5e-3) < 1e-12, n[1]
assert abs(n[1]["tokens_per_second"] - 102400) < 1e-6, n[1]
assert n[2]["step_seconds"] >= n[1]["step_seconds"]
assert abs(n[2]["tokens_per_second"] / (2 * 16 * 32 / n[2]["step_seconds"]) - 1) < 1e-8, n[2]
' "$TMP/gpt.jsonl"; then pass; else fail "gpt-tiny scaling figures"; fi

# A GPT's long-sequence strategies: strong scaling of one batch. gpt-tiny at 1 ms a layer under
# --strategy=tp on 2 ranks computes embed 1 + blocks 2/2 + ln_f 1 + lm_head 1/2 = 3.5 ms, and
# all-reduces 16 x 32 x 32 x 4 = 65,536 bytes 10 times (4 a block, the embedding's, the head's),
# each a ring's 2 (1/2) 65,536 B / 1 GB/s = 65.536 us: a step of 4.15536 ms.
"$EXPLAIN" scaling --model=gpt-tiny --tokenizer=byte --seq-len=32 --batch=16 --ranks=1,2 \
  --strategy=tp --latency-us=0 --bandwidth-gbps=8 --layer-ms=1,1,1,1,1 --json > "$TMP/tp.jsonl" \
  || fail "scaling --strategy=tp exited non-zero"
if python3 -c '
import json, sys
head, *rows = [json.loads(l) for l in open(sys.argv[1])]
assert head["strategy"] == "tp", head
assert any("strong scaling" in a for a in head["assumptions"]), head
n = {r["ranks"]: r for r in rows}
assert abs(n[1]["step_seconds"] - 5e-3) < 1e-12, n[1]
assert abs(n[2]["compute_seconds"] - 3.5e-3) < 1e-12, n[2]
assert abs(n[2]["step_seconds"] - 4.15536e-3) < 1e-12, n[2]
assert n[2]["collectives"] == 10 and n[2]["replicas"] == 1, n[2]
assert abs(n[2]["tokens_per_second"] / (16 * 32 / 4.15536e-3) - 1) < 1e-9, n[2]
' "$TMP/tp.jsonl"; then pass; else fail "tp strong-scaling figures"; fi
out=$("$EXPLAIN" scaling --model=gpt-tiny --tokenizer=byte --seq-len=32 --ranks=4 \
  --strategy=cp-ulysses --layer-ms=1,1,1,1,1 2>&1) && fail "ulysses over 4 ranks of 2 heads ran"
expect_contains "$out" "cp-ulysses on 4 ranks: 4 does not divide the 2 heads" "ulysses over more ranks than heads"
out=$("$EXPLAIN" scaling --model=mlp --strategy=cp-ring --layer-ms=0,1,0,0.3 2>&1) \
  && fail "cp-ring on the MLP ran"
expect_contains "$out" "--strategy=cp-ring is a GPT's long-sequence strategy" "cp-ring on the MLP"

# Forcing the ring at 4096 ranks pays 2 x 4095 latencies (41 ms) per all-reduce.
"$EXPLAIN" scaling --model=mlp --ranks=4096 --layer-ms=0,1,0,0.3 --topology=ring --json > "$TMP/ring.jsonl"
if python3 -c '
import json, sys
auto = [json.loads(l) for l in open(sys.argv[1])][-1]
ring = [json.loads(l) for l in open(sys.argv[2])][-1]
assert ring["step_seconds"] > 0.04 and auto["step_seconds"] < 0.002, (ring, auto)
' "$TMP/given.jsonl" "$TMP/ring.jsonl"; then pass; else fail "the picker does not avoid the ring's collapse"; fi

out=$("$EXPLAIN" scaling --model=mlp --strategy=zero3 --ranks=1,2,4 --topology=hierarchical --ranks-per-node=2 --measure)
expect_contains "$out" "measured now on " "measured times"
expect_contains "$out" "2 ranks per node" "hierarchical assumption"
out=$("$EXPLAIN" scaling --model=resnet20 --strategy=pipeline --ranks=1,4,8 --stages=4 --layer-ms=1,1,1,1,1,1,1,1,1,1,1)
expect_contains "$out" "pipeline: 1f1b, K = min(4, N) stages cut by time" "pipeline assumption"
# Every schedule priced: on 4 ranks (one replica), messages all but free, interleaving (v = 2)
# and zero bubble shrink the 1F1B bubble; GPipe's is no smaller. The same work everywhere.
for s in gpipe 1f1b interleaved zb-h1 zb-h2; do
  chunks=1; [ "$s" = interleaved ] && chunks=2
  "$EXPLAIN" scaling --model=resnet20 --strategy=pipeline --ranks=4 --stages=4 --schedule=$s \
    --chunks=$chunks --latency-us=0 --bandwidth-gbps=1e9 --layer-ms=1,1,1,1,1,1,1,1,1,1,1 --json | tail -1 > "$TMP/pipe_$s.json" \
    || fail "scaling --schedule=$s"
done
if python3 -c '
import json, sys
step = {s: json.load(open(sys.argv[1] + "/pipe_" + s + ".json")) for s in ("gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2")}
t = {s: p["step_seconds"] for s, p in step.items()}
assert t["gpipe"] >= t["1f1b"] - 1e-12, t  # equal for equal stages; 11 layers on 4 are not
assert t["interleaved"] < t["1f1b"] and t["zb-h1"] < t["1f1b"] and t["zb-h2"] <= t["zb-h1"], t
assert len({round(p["compute_seconds"], 9) for p in step.values()}) == 1, step
' "$TMP"; then pass; else fail "pipeline schedules priced"; fi
expect_contains "$("$EXPLAIN" scaling --model=mlp --strategy=pipeline --stages=2 --ranks=2 --schedule=zb-h1 --layer-ms=1,1,1,1)" \
  "zero bubble: each backward split into B (input gradient, 50% of it)" "zero-bubble assumption"
expect_error "--schedule is the pipeline's: give --strategy=pipeline" scaling --model=mlp --schedule=zb-h1 --layer-ms=1,1,1,1
expect_error "2 chunks per rank need the interleaved schedule, not 1f1b" scaling --model=mlp --strategy=pipeline --stages=2 --ranks=2 --chunks=2 --layer-ms=1,1,1,1

# Several strategies in one run: a series each, in the order given, each equal to its own run.
layers=--layer-ms=0,1,0,0.3
"$EXPLAIN" scaling --model=mlp --strategy=ddp,zero3,pipeline --stages=2 --ranks=1,2,8,64 $layers \
  --json > "$TMP/series.jsonl" || fail "scaling --strategy=ddp,zero3,pipeline"
for s in ddp zero3 pipeline; do
  "$EXPLAIN" scaling --model=mlp --strategy=$s --stages=2 --ranks=1,2,8,64 $layers --json > "$TMP/alone_$s.jsonl"
done
if python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/series.jsonl")]
heads = [l for l in lines if "assumptions" in l]
assert [h["strategy"] for h in heads] == ["ddp", "zero3", "pipeline"], heads
for s in ("ddp", "zero3", "pipeline"):
    alone = [json.loads(l) for l in open(sys.argv[1] + "/alone_" + s + ".jsonl")]
    mine = [l for l in lines if l["strategy"] == s]
    assert mine == alone, (s, mine, alone)
    assert [r["ranks"] for r in mine[1:]] == [1, 2, 8, 64]
e = {s: [l["efficiency"] for l in lines if l["strategy"] == s and "ranks" in l] for s in ("ddp", "zero3")}
assert e["ddp"][-1] > e["zero3"][-1], e  # ZeRO-3 pays its rings at 64 ranks
' "$TMP"; then pass; else fail "several strategies: series against their own runs"; fi
# DDP under compressors, a series each: the MLP's one bucket (814,120 f32 bytes) as fp16 is an
# all-reduce of 407,060 bytes, on the ring at N = 2: 2 (5 us) + 407,060 B / 12.5 GB/s = 42.5648
# us after backward ends, a step of 1.3425648 ms; plain DDP's series is plain DDP's run.
"$EXPLAIN" scaling --model=mlp --compression=none,fp16 --ranks=1,2 $layers --json > "$TMP/comp.jsonl" \
  || fail "scaling --compression=none,fp16"
if python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/comp.jsonl")]
assert [l["strategy"] for l in lines if "assumptions" in l] == ["ddp", "ddp+fp16"], lines
plain = [l for l in lines if l["strategy"] == "ddp"]
alone = [json.loads(l) for l in open(sys.argv[1] + "/alone_ddp.jsonl")]
assert [r for r in plain if r.get("ranks") in (1, 2)] == [r for r in alone if r.get("ranks") in (1, 2)]
fp16 = {l["ranks"]: l for l in lines if l["strategy"] == "ddp+fp16" and "ranks" in l}
assert abs(fp16[2]["step_seconds"] - 1.3425648e-3) < 1e-12, fp16[2]
assert fp16[1]["step_seconds"] == 1.3e-3, fp16[1]
head = [l for l in lines if l["strategy"] == "ddp+fp16" and "assumptions" in l][0]
assert any("gradient compression fp16" in a for a in head["assumptions"]), head
' "$TMP"; then pass; else fail "--compression: DDP series under fp16"; fi
expect_error "--compression compresses DDP's buckets: give --strategy=ddp" scaling --model=mlp --strategy=zero3 --compression=fp16 $layers
expect_error "--compression=foo: compression 'foo': expected none" scaling --model=mlp --compression=foo $layers
expect_error "--strategy=ddp,ddp: ddp is listed twice" scaling --model=mlp --strategy=ddp,ddp $layers
expect_error "--strategy=nccl: unknown strategy 'nccl'" scaling --model=mlp --strategy=ddp,nccl $layers

if have_gnuplot; then
  "$EXPLAIN" scaling --model=mlp --layer-ms=0,1,0,0.3 --plot="$TMP/scaling.svg" > /dev/null 2>&1 || fail "scaling --plot"
  if svg_ok "$TMP/scaling.svg"; then pass; else fail "scaling.svg is not SVG"; fi
  "$EXPLAIN" scaling --model=mlp --strategy=ddp,zero3,pipeline --stages=2 $layers --plot="$TMP/series.svg" > /dev/null 2>&1 \
    || fail "scaling --strategy=ddp,zero3,pipeline --plot"
  if svg_ok "$TMP/series.svg"; then pass; else fail "series.svg is not SVG"; fi
  # One legend entry per strategy and quantity (gnuplot writes each key's text once).
  for s in ddp zero3 pipeline; do
    for q in efficiency images/s; do
      expect_contains "$(cat "$TMP/series.svg")" ">$s $q<" "the legend of the series picture"
    done
  done
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
