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

# A GPT: model states and activations per layer. gpt-tiny with the byte tokenizer (V = 256,
# h = 32, a = 2, 2 blocks) at b = 3, s = 16, by hand: a block keeps 17 s b h elements of p bytes,
# 2 x 8 s b of LayerNorm statistics and 4 a s b of logsumexp; lm_head and the loss s b V each.
# The measurement (the counting allocator, a forward here) must equal the formula.
for precision in f32 mixed; do
  "$EXPLAIN" memory --model=gpt-tiny --tokenizer=byte --seq-len=16 --batch=3 --ranks=2 \
    --precision=$precision --json > "$TMP/gpt_$precision.jsonl" || fail "memory gpt-tiny --json ($precision)"
  if python3 -c '
import json, sys
p = 4 if sys.argv[2] == "f32" else 2
lines = [json.loads(l) for l in open(sys.argv[1])]
layers = {r["layer"]: r for r in lines if "layer" in r}
s, b, h, a, V = 16, 3, 32, 2, 256
want = {"embed": s*b*h*p + 8*s, "h0": 17*s*b*h*p + 16*s*b + 4*a*s*b, "h1": 17*s*b*h*p + 16*s*b + 4*a*s*b,
        "ln_f": s*b*h*p + 8*s*b, "lm_head": s*b*V*p, "loss": s*b*V*p + 8*s*b + p}
assert list(layers) == list(want), list(layers)
for name, bytes_ in want.items():
    assert layers[name]["activation_bytes"] == bytes_, (name, layers[name], bytes_)
    assert layers[name]["measured_activation_bytes"] == bytes_, (name, layers[name], bytes_)
assert layers["h0"]["paper_16bit_bytes"] == s*b*h*(34 + 5*a*s/h)
' "$TMP/gpt_$precision.jsonl" "$precision"; then pass; else fail "gpt-tiny activations ($precision)"; fi
done
out=$("$EXPLAIN" memory --model=gpt-nano --ranks=2 --batch=1 --seq-len=8)
expect_contains "$out" "psi = 7,265,024 parameters" "gpt-nano psi (its vocabulary padded to 50304)"
expect_contains "$out" "h0       68 sbh + 16 sb + 4 asb" "gpt-nano's block formula"
expect_error "gpt-nano is a language model: it reads text (--data=text), not fashion-mnist" \
  memory --model=gpt-nano --data=fashion-mnist --ranks=2
expect_error "mlp reads images (--data=fashion-mnist or imagenet), not text" memory --model=mlp --data=text --ranks=2
expect_error "gpt-tiny's context is 64 positions; a window of 65 tokens does not fit" \
  memory --model=gpt-tiny --seq-len=65 --ranks=2

# --params: the ZeRO paper's 7.5B parameters on 64 GPUs, mixed-precision Adam (K = 12): its
# figure 1 says 120 GB, 31.4 GB, 16.6 GB and 1.9 GB per device.
"$EXPLAIN" memory --params=7.5e9 --ranks=64 --precision=mixed --optimizer=adam --json > "$TMP/paper.jsonl" \
  || fail "memory --params=7.5e9 exited non-zero"
if python3 -c '
import json, sys
rows = {r["strategy"]: r for r in map(json.loads, open(sys.argv[1]))}
assert list(rows) == ["ddp", "zero1", "zero2", "zero3", "pipeline"], list(rows)
for s, gb in (("ddp", 120), ("zero1", 31.4), ("zero2", 16.6), ("zero3", 1.9)):
    assert round(rows[s]["total_bytes"] / 1e9, 1) == gb, (s, rows[s])
    assert rows[s]["psi"] == 7500000000 and rows[s]["model"] == "-"
assert rows["ddp"]["total_bytes"] == 16 * 7500000000
assert rows["zero2"]["formula"] == "2 psi + (2 + 12) psi/N", rows["zero2"]
' "$TMP/paper.jsonl"; then pass; else fail "memory --params: the ZeRO paper's figures"; fi
out=$("$EXPLAIN" memory --params=7.5e9 --ranks=64 --precision=mixed --strategy=zero1,zero3)
expect_contains "$out" "zero1       64   15.000 GB  15.000 GB   1.406 GB  31.406 GB  2 psi + 2 psi + 12 psi/N" "the filtered table in GB"
if [[ "$out" == *ddp* || "$out" == *zero2* ]]; then fail "--strategy=zero1,zero3 printed other rows"; else pass; fi
if python3 -c '
import json, sys
rows = [json.loads(l)["strategy"] for l in sys.stdin]
assert rows == ["ddp", "zero3"], rows
' < <("$EXPLAIN" memory --model=mlp --ranks=4 --strategy=zero3,ddp --json); then pass; else fail "--strategy filter on a model's rows"; fi
expect_error "--strategy=zero4: not a row of this table (ddp, zero1, zero2, zero3, pipeline, or all)" \
  memory --params=1e6 --ranks=4 --strategy=zero4
expect_error "--params=1e6 and --model=mlp: give one of them" memory --params=1e6 --model=mlp --ranks=4
expect_error "--params=x: expected a number" memory --params=x --ranks=4
if have_gnuplot; then
  "$EXPLAIN" memory --params=7.5e9 --ranks=64 --precision=mixed --strategy=ddp,zero1,zero2,zero3 \
    --plot="$TMP/paper.svg" > /dev/null 2>&1 || fail "memory --params --plot"
  if svg_ok "$TMP/paper.svg"; then pass; else fail "paper.svg is not SVG"; fi
  # Values on the bars: each total above its bar, and the legend outside the plot's right edge.
  svg=$(cat "$TMP/paper.svg")
  for v in "120 GB" "31.4 GB" "16.6 GB" "1.88 GB"; do expect_contains "$svg" ">$v<" "the total on its bar"; done
  if python3 -c '
import re, sys, xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
root = E.parse(sys.argv[1]).getroot()
def x_of(label):
    for g in root.iter(ns + "g"):
        t = g.find(ns + "text")
        if t is not None and "".join(t.itertext()).strip() == label:
            return float(re.search(r"translate\(([0-9.]+)", g.get("transform")).group(1))
    for t in root.iter(ns + "text"):
        if "".join(t.itertext()).strip() == label:
            return float(t.get("x"))
    raise AssertionError("no text " + label)
# The legend entry starts right of the right-most bar label (zero3'"'"'s total).
assert x_of("parameters") > x_of("1.88 GB") + 50, (x_of("parameters"), x_of("1.88 GB"))
' "$TMP/paper.svg"; then pass; else fail "the legend is not outside the bars"; fi
else
  echo "SKIPPED: memory --params --plot (gnuplot is not installed: apt-get install gnuplot-nox)"
fi

expect_contains "$("$EXPLAIN" memory --help)" "--optimizer=O" "memory --help"
# --offload, the MLP (psi = 203,530) on N = 2, f32 Adam (m = 8), formulas written out by hand:
# optimizer: 8 psi/N offloaded, read and written per step (ZeRO-1/2/3); all (ZeRO-3): 16 psi/N
# offloaded, none resident, read 3 x 4 + 4 + 8 = 24 psi/N, written 16 psi/N. The train tool
# measured the same (3 parameter-shard reads and 1 write a step, 1 gradient read and write, the
# optimizer state once each way), its shards padded: 2,482,176 bytes read, 1,654,784 written.
"$EXPLAIN" memory --model=mlp --ranks=2 --optimizer=adam --offload=all --json > "$TMP/offload.jsonl" ||
  fail "memory --offload=all exited non-zero"
"$EXPLAIN" memory --model=mlp --ranks=2 --optimizer=adam --offload=optimizer --json >> "$TMP/offload.jsonl" ||
  fail "memory --offload=optimizer exited non-zero"
if python3 -c '
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "offload" in r]
half = (203530 + 1) // 2
by = {(r["offload"], r["strategy"]): r for r in rows}
assert sorted(by) == [("all", "zero3"), ("optimizer", "zero1"), ("optimizer", "zero2"), ("optimizer", "zero3")], sorted(by)
a = by[("all", "zero3")]
assert (a["resident_bytes"], a["offloaded_bytes"]) == (0, 16 * 203530 // 2), a
assert (a["read_bytes_per_step"], a["written_bytes_per_step"]) == (24 * 203530 // 2, 16 * 203530 // 2), a
for s in ("zero1", "zero2", "zero3"):
    o = by[("optimizer", s)]
    assert o["offloaded_bytes"] == o["read_bytes_per_step"] == o["written_bytes_per_step"] == 8 * 203530 // 2, o
assert by[("optimizer", "zero2")]["resident_bytes"] == 4 * 203530 + 4 * 203530 // 2 + 4 * 203530 // 2
measured_read, measured_written = 2482176, 1654784
assert 1 <= measured_read / a["read_bytes_per_step"] < 1.02 and 1 <= measured_written / a["written_bytes_per_step"] < 1.02
' "$TMP/offload.jsonl"; then pass; else fail "offload figures"; fi
expect_error "--offload=bogus: expected optimizer or all" memory --model=mlp --ranks=2 --offload=bogus

expect_error "--ranks=0: must be at least 1" memory --model=mlp --ranks=0
expect_error "--ranks is required" memory --model=mlp
expect_error "--precision=f16: unknown precision 'f16'" memory --model=mlp --ranks=2 --precision=f16
expect_error "--model=vgg16: unknown model 'vgg16'" memory --model=vgg16 --ranks=2
finish
