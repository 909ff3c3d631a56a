#!/usr/bin/env bash
# train --metrics read back by explain curves: two short MLP runs on synthetic data (8 steps of
# 32 images an epoch; one f32 for 1 epoch, one fp16 with its loss scale for 2), their files
# against what the tool printed, explain curves --json against curves_check.py's figures from the
# files, the picture as SVG, and bad input named by file, line and value.
# Args: EXPLAIN LIB TRAIN CHECK.
source "$2"
TRAIN="$3"
CHECK="$4"
SHORT="--model=mlp --data=synthetic --synthetic-size=256 --batch-size=32 --threads=1 --seed=3"

A="$TMP/f32.jsonl"
B="$TMP/fp16.jsonl"
rm -f "$A" "$B"
"$TRAIN" $SHORT --epochs=1 --metrics="$A" > "$TMP/f32.out" 2>&1 || { fail "f32 run"; cat "$TMP/f32.out"; }
"$TRAIN" $SHORT --epochs=2 --amp=fp16 --metrics="$B" > "$TMP/fp16.out" 2>&1 || { fail "fp16 run"; cat "$TMP/fp16.out"; }
if python3 "$CHECK" metrics "$A" "$TMP/f32.out" 8 1; then pass; else fail "f32 metrics file"; fi
if python3 "$CHECK" metrics "$B" "$TMP/fp16.out" 8 2; then pass; else fail "fp16 metrics file"; fi
if grep -q '"loss_scale"' "$A"; then fail "an f32 run wrote a loss scale"; else pass; fi
if [ "$(grep -c '"loss_scale": ' "$B")" -eq 18 ]; then pass; else fail "fp16 lines without a loss_scale"; fi

# The table and --json, against the files.
"$EXPLAIN" curves --metrics="$A,$B" --json > "$TMP/curves.jsonl" || fail "explain curves --json"
if json_ok "$TMP/curves.jsonl"; then pass; else fail "explain curves --json does not parse"; fi
if python3 "$CHECK" summary "$TMP/curves.jsonl" "$A" "$B"; then pass; else fail "curves figures"; fi
out=$("$EXPLAIN" curves --metrics="$A,$B")
expect_contains "$out" "best accuracy" "table header"
expect_contains "$out" "$B" "table row of the fp16 run"
expect_contains "$("$EXPLAIN" curves --help)" "--x=step|time" "--help"

# Pictures: every panel against steps, and against time with the loss scale of the fp16 run.
if have_gnuplot; then
  "$EXPLAIN" curves --metrics="$A,$B" --plot="$TMP/curves.svg" > /dev/null 2>&1 || fail "explain curves --plot"
  if svg_ok "$TMP/curves.svg"; then pass; else fail "curves.svg is not SVG"; fi
  "$EXPLAIN" curves --metrics="$B" --x=time --show=loss,loss-scale --plot="$TMP/time.svg" > /dev/null 2>&1 \
    || fail "explain curves --x=time --plot"
  if svg_ok "$TMP/time.svg"; then pass; else fail "time.svg is not SVG"; fi
else
  echo "SKIP: gnuplot is not installed; explain curves --plot not checked"
fi

# Without gnuplot (none on the PATH) the picture is written directly: a polyline per run and
# panel, with a point per step line (8 and 16) or epoch line (1 and 2).
PATH=/nonexistent "$EXPLAIN" curves --metrics="$A,$B" --show=loss,accuracy,throughput \
  --plot="$TMP/direct.svg" > /dev/null 2> "$TMP/direct.err" || fail "explain curves --plot without gnuplot"
expect_contains "$(cat "$TMP/direct.err")" "gnuplot is not installed: written directly" "direct SVG said so"
if svg_ok "$TMP/direct.svg"; then pass; else fail "direct.svg is not SVG"; fi
if python3 -c '
import sys, xml.etree.ElementTree as E
lines = E.parse(sys.argv[1]).getroot().findall("{http://www.w3.org/2000/svg}polyline")
points = [len(l.get("points").split()) for l in lines]
assert points == [8, 16, 1, 2, 8, 16], points
' "$TMP/direct.svg"; then pass; else fail "direct.svg's polylines"; fi

# Bad input names the file, the line and the value.
expect_error "$TMP/none.jsonl: cannot read the file" curves --metrics="$TMP/none.jsonl"
{ head -2 "$A"; echo "loss 0.5"; } > "$TMP/text.jsonl"
expect_error "$TMP/text.jsonl:3: not a JSON object" curves --metrics="$A,$TMP/text.jsonl"
expect_error "'loss 0.5'" curves --metrics="$TMP/text.jsonl"
{ head -1 "$A"; sed -n 2p "$A" | sed 's/"loss": [0-9.e-]*/"loss": null/'; } > "$TMP/null.jsonl"
expect_error "$TMP/null.jsonl:2: \"loss\" is null, expected a number" curves --metrics="$TMP/null.jsonl"
echo '{"epoch": 1, "train_loss": 0.5}' > "$TMP/old.jsonl"
expect_error "$TMP/old.jsonl:1: \"kind\" is missing" curves --metrics="$TMP/old.jsonl"
: > "$TMP/empty.jsonl"
expect_error "$TMP/empty.jsonl: no step lines" curves --metrics="$TMP/empty.jsonl"
expect_error "--show=loss-scale: $A has no loss scale" curves --metrics="$A,$B" --show=loss-scale
expect_error "--show=loss,speed: expected loss, accuracy, loss-scale or throughput, got 'speed'" \
  curves --metrics="$A" --show=loss,speed
# --label: the runs' names in the table, the JSON and the legend (the SVG written directly here).
"$EXPLAIN" curves --metrics="$A,$B" --label=f32-run,fp16-run --json > "$TMP/labels.jsonl" || fail "--label --json"
if python3 -c '
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
assert [r["label"] for r in runs] == ["f32-run", "fp16-run"], runs
assert [r["run"] for r in runs] == [sys.argv[2], sys.argv[3]], runs
' "$TMP/labels.jsonl" "$A" "$B"; then pass; else fail "--label in the JSON"; fi
expect_contains "$("$EXPLAIN" curves --metrics="$A,$B" --label=f32-run,fp16-run)" "fp16-run " "--label in the table"
PATH=/nonexistent "$EXPLAIN" curves --metrics="$A,$B" --label=f32-run,fp16-run --plot="$TMP/labels.svg" > /dev/null 2>&1 \
  || fail "--label --plot"
expect_contains "$(cat "$TMP/labels.svg")" ">fp16-run<" "--label in the legend"
expect_error "--label=one: 1 label(s) for 2 run(s) of --metrics=" curves --metrics="$A,$B" --label=one
expect_error "--x=epoch: expected step or time" curves --metrics="$A" --x=epoch
expect_error "--metrics is required" curves
expect_error "unknown flag --metric " curves --metrics="$A" --metric="$A"

finish
