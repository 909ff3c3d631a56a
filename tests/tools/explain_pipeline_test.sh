#!/usr/bin/env bash
# explain pipeline: the text grid as before, --json (each computation on the timing model's clock,
# the summary's makespan equal to play_timed's), and the SVG grid with B twice as wide as F.
source "$2"

out=$("$EXPLAIN" pipeline --stages=2 --micro-batches=4 --schedule=1f1b)
expected="1f1b  K=2 M=4
slot      0   1   2   3   4   5   6   7   8   9
stage 0   F0  F1  .   B0  F2  B1  F3  B2  .   B3
stage 1   .   F0  B0  F1  B1  F2  B2  F3  B3  ."
if [[ "$out" == "$expected"* ]]; then pass; else fail "text grid changed:"; echo "$out"; fi
expect_contains "$out" "bubble: theory (K-1)/(vM+K-1) = 1/5 = 0.200, simulated 0.200" "text bubble"

for schedule in gpipe 1f1b interleaved zb-h1 zb-h2; do
  "$EXPLAIN" pipeline --stages=4 --micro-batches=8 --schedule="$schedule" --backward-ratio=2 --json \
    > "$TMP/$schedule.jsonl" || fail "$schedule --json exited non-zero"
  if json_ok "$TMP/$schedule.jsonl"; then pass; else fail "$schedule --json does not parse"; fi
  # The summary's makespan (the grid's clock) equals the timing model's; every F lasts 1 and,
  # without W, every B lasts 2.
  if python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
summary, cells = rows[-1], rows[:-1]
assert abs(summary["makespan"] - summary["timing_model_makespan"]) < 1e-9, summary
assert all(c["duration"] == 1 for c in cells if c["action"] == "F")
has_w = any(c["action"] == "W" for c in cells)
assert has_w or all(c["duration"] == 2 for c in cells if c["action"] == "B")
assert len([c for c in cells if c["action"] == "F"]) == 4 * 8 * summary["chunks"], len(cells)
' "$TMP/$schedule.jsonl"; then pass; else fail "$schedule: JSON timeline"; fi
done

# The picture: B boxes twice as wide as F boxes at --backward-ratio=2.
"$EXPLAIN" pipeline --stages=4 --micro-batches=8 --backward-ratio=2 --plot="$TMP/grid.svg" > /dev/null 2>&1 \
  || fail "--plot exited non-zero"
if svg_ok "$TMP/grid.svg"; then pass; else fail "grid.svg is not SVG"; fi
if python3 -c '
import sys, xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
widths = {}
for r in E.parse(sys.argv[1]).getroot().iter(ns + "rect"):
    if r.get("rx"):
        widths.setdefault(r.get("fill"), set()).add(float(r.get("width")) + 2)
f, b = widths["#4e79a7"], widths["#59a14f"]
assert len(f) == 1 and len(b) == 1 and max(b) == 2 * max(f), widths
' "$TMP/grid.svg"; then pass; else fail "B is not twice as wide as F in the SVG"; fi

# Several schedules in one run: each one's lines equal its own run's (each cell naming its
# schedule), and one picture stacks a panel per schedule, in order, titled with the bubble its
# summary reports, every panel drawn to one scale.
"$EXPLAIN" pipeline --stages=4 --micro-batches=8 --schedule=1f1b,zb-h1,zb-h2 --backward-ratio=2 \
  --json > "$TMP/stacked.jsonl" || fail "--schedule=1f1b,zb-h1,zb-h2 --json"
for s in 1f1b zb-h1 zb-h2; do
  "$EXPLAIN" pipeline --stages=4 --micro-batches=8 --schedule=$s --backward-ratio=2 --json > "$TMP/alone_$s.jsonl"
done
"$EXPLAIN" pipeline --stages=4 --micro-batches=8 --schedule=1f1b,zb-h1,zb-h2 --backward-ratio=2 \
  --plot="$TMP/stacked.svg" > "$TMP/stacked.txt" 2>&1 || fail "--schedule=1f1b,zb-h1,zb-h2 --plot"
if svg_ok "$TMP/stacked.svg"; then pass; else fail "stacked.svg is not SVG"; fi
if python3 -c '
import json, re, sys, xml.etree.ElementTree as E
d = sys.argv[1]
lines = [json.loads(l) for l in open(d + "/stacked.jsonl")]
summaries = {}
for s in ("1f1b", "zb-h1", "zb-h2"):
    alone = [json.loads(l) for l in open(d + "/alone_" + s + ".jsonl")]
    mine = [l for l in lines if l["schedule"] == s]
    assert mine == alone, s
    summaries[s] = alone[-1]
ns = "{http://www.w3.org/2000/svg}"
root = E.parse(d + "/stacked.svg").getroot()
titles = [t.text for t in root.iter(ns + "text") if t.get("font-size") == "13"]
assert [t.split()[0] for t in titles] == ["1f1b", "zb-h1", "zb-h2"], titles
for t in titles:
    bubble = float(re.search(r"bubble ([0-9.]+)$", t).group(1))
    assert abs(bubble - summaries[t.split()[0]]["bubble_timed"]) < 5e-4, (t, summaries)
assert abs(summaries["1f1b"]["bubble_timed"] - 3 / 11) < 1e-9 and summaries["zb-h1"]["bubble_timed"] < 3 / 11
# One clock: an F is as wide in every panel, and the panels do not overlap.
f = {float(r.get("width")) for r in root.iter(ns + "rect") if r.get("fill") == "#4e79a7"}
assert len(f) == 1, f
ys = [float(t.get("y")) for t in root.iter(ns + "text") if t.get("font-size") == "13"]
assert ys == sorted(ys) and min(b - a for a, b in zip(ys, ys[1:])) >= 4 * 30, ys
' "$TMP"; then pass; else fail "several schedules: JSON and stacked picture"; fi
expect_error "--schedule=zb-h3: pipeline schedule 'zb-h3' is not one of" pipeline --schedule=1f1b,zb-h3

help=$("$EXPLAIN" pipeline --help)
expect_contains "$help" "--plot=FILE.svg" "pipeline --help"
expect_error "--stages=x: expected a whole number" pipeline --stages=x
expect_error "unknown flag --stage " pipeline --stage=2
expect_error "--plot=grid.png: expected a file name ending in .svg" pipeline --plot=grid.png
expect_error "unknown subcommand 'pipelines'" pipelines
finish
