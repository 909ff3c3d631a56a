#!/usr/bin/env bash
# Repeatable what-if figures: explain scaling takes its layer times from the stored profile
# (cost/profiles/mlp-fashion-mnist.json, given as $3), so three runs with the same flags print
# byte-identical JSON, with or without --compute-ms; the times are the file's (scaled to the
# batch), the source line names the file, its machine and its date; --measure times the layers
# now and says so; explain profile writes a profile that reads back.
source "$2"
STORED="$3"

for run in 1 2 3; do
  "$EXPLAIN" scaling --model=mlp --strategy=ddp,zero3,pipeline --stages=2 --ranks=1,2,8,64 \
    --json > "$TMP/stored$run.jsonl" || fail "scaling run $run exited non-zero"
  "$EXPLAIN" scaling --model=mlp --strategy=pipeline --stages=2 --schedule=1f1b --ranks=2,8 \
    --compute-ms=160 --json > "$TMP/given$run.jsonl" || fail "scaling --compute-ms run $run"
done
for f in stored given; do
  if cmp -s "$TMP/${f}1.jsonl" "$TMP/${f}2.jsonl" && cmp -s "$TMP/${f}1.jsonl" "$TMP/${f}3.jsonl"; then
    pass
  else
    fail "$f: three runs with the same flags differ"; diff "$TMP/${f}1.jsonl" "$TMP/${f}2.jsonl" | head -5
  fi
done

# The figures are the file's: each layer's seconds at its batch (64, the MLP's default), its
# step overhead (same batch, same optimizer); --batch=16 scales them by 16/64 and drops the
# overhead; --compute-ms keeps the file's shares and sets their sum.
"$EXPLAIN" scaling --model=mlp --ranks=1 --batch=16 --json > "$TMP/b16.jsonl" || fail "--batch=16"
if python3 -c '
import json, sys
stored = json.load(open(sys.argv[1]))
times = [l["seconds"] for l in stored["layers"]]
head = json.loads(open(sys.argv[2]).readline())
src = "stored profile cost/profiles/mlp-fashion-mnist.json, measured on %s on %s at batch 64" % (stored["machine"], stored["date"])
assert head["times_source"] == src, (head["times_source"], src)
assert stored["batch"] == 64 and head["batch"] == 64
assert all(abs(a - b) <= 1e-9 * b for a, b in zip(head["layer_seconds"], times)), (head["layer_seconds"], times)
assert abs(head["step_overhead_seconds"] - stored["step_overhead_seconds"]) <= 1e-12
b16 = json.loads(open(sys.argv[3]).readline())
assert all(abs(a - b / 4) <= 1e-9 * b for a, b in zip(b16["layer_seconds"], times)), b16
assert b16["times_source"] == src + ", scaled to batch 16", b16["times_source"]
assert b16["step_overhead_seconds"] == 0, b16
given = json.loads(open(sys.argv[4]).readline())
assert abs(given["compute_seconds"] - 0.160) < 1e-12, given
shares = [t / sum(times) for t in times]
assert all(abs(g / 0.160 - s) < 1e-9 for g, s in zip(given["layer_seconds"], shares)), (given, shares)
assert given["step_overhead_seconds"] == 0
assert given["times_source"] == "given by --compute-ms, split as the " + src, given["times_source"]
' "$STORED" "$TMP/stored1.jsonl" "$TMP/b16.jsonl" "$TMP/given1.jsonl"; then pass; else fail "the stored profile's times"; fi

out=$("$EXPLAIN" scaling --model=mlp --ranks=1,2)
expect_contains "$out" "per-layer times: stored profile cost/profiles/mlp-fashion-mnist.json, measured on " "the source line"
out=$("$EXPLAIN" scaling --model=mlp --ranks=1,2 --measure --repeats=1)
expect_contains "$out" "per-layer times: measured now on " "--measure's source line"
expect_error "--repeats sets how the layers are measured: add --measure (without it their times are the stored profile cost/profiles/mlp-fashion-mnist.json's)" \
  scaling --model=mlp --repeats=3
expect_error "--layer-ms and --measure: give one of them" scaling --model=mlp --measure --layer-ms=1,1,1,1
# No profile stored for this input: measured now, saying which file would hold one.
out=$("$EXPLAIN" scaling --model=gpt-tiny --tokenizer=byte --seq-len=32 --ranks=1)
expect_contains "$out" "per-layer times: measured now on " "no stored profile: measured now"
expect_contains "$out" "(no stored profile of gpt-tiny on this input: explain profile measures one for cost/profiles/gpt-tiny-text-s32-v256.json)" "no stored profile"

# explain profile: a profile of this machine, today, that parses and names the model's layers.
"$EXPLAIN" profile --model=logistic --repeats=2 > "$TMP/logistic.json" 2> "$TMP/profile.err" \
  || fail "explain profile exited non-zero"
expect_contains "$(cat "$TMP/profile.err")" "keep it as cost/profiles/logistic-fashion-mnist.json" "explain profile's path"
if python3 -c '
import json, sys, datetime
p = json.load(open(sys.argv[1]))
cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
assert cpu and p["machine"].startswith(cpu[0] + " ("), (p["machine"], cpu)
assert p["date"] == datetime.datetime.utcnow().strftime("%Y-%m-%d"), p["date"]
assert p["model"] == "logistic" and p["batch"] == 64 and p["repeats"] == 2, p
assert [l["name"] for l in p["layers"]] == ["flatten", "fc"], p["layers"]
assert all(l["seconds"] > 0 for l in p["layers"] if l["name"] != "flatten"), p["layers"]
' "$TMP/logistic.json"; then pass; else fail "explain profile's JSON"; fi
finish
