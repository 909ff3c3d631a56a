#!/usr/bin/env bash
# explain ring: the schedule ProcessGroupMPI runs, played here with sets: after the reduce-scatter
# steps rank k holds chunk k summed over every rank, after the all-gather steps every rank holds
# every sum; each rank sends one chunk a step to its right; the time is 2 (N-1) (a + M/(N b)).
source "$2"

for n in 2 3 4 7; do
  "$EXPLAIN" ring --ranks=$n --megabytes=8 --latency-us=5 --bandwidth-gbps=100 --json \
    > "$TMP/ring$n.jsonl" || fail "ring --ranks=$n --json exited non-zero"
  if json_ok "$TMP/ring$n.jsonl"; then pass; else fail "ring --ranks=$n --json does not parse"; fi
  if python3 -c '
import json, sys
n = int(sys.argv[2])
rows = [json.loads(l) for l in open(sys.argv[1])]
summary = rows.pop()
# holds[r][c]: the ranks whose contribution to chunk c rank r holds
holds = [[{r} for c in range(n)] for r in range(n)]
for step in range(2 * (n - 1)):
    now = [r for r in rows if r["step"] == step]
    assert sorted(r["rank"] for r in now) == list(range(n)), now
    sent = {r["rank"]: set(holds[r["rank"]][r["sends_chunk"]]) for r in now}
    for r in now:
        assert r["to"] == (r["rank"] + 1) % n and r["from"] == (r["rank"] - 1) % n, r
        src, c = r["from"], r["receives_chunk"]
        assert c == now[src]["sends_chunk"], (step, r)  # what arrives is what the left sent
        if r["pass"] == "reduce_scatter":
            assert not (holds[r["rank"]][c] & sent[src]), (step, r)  # nothing counted twice
            holds[r["rank"]][c] = holds[r["rank"]][c] | sent[src]
        else:
            holds[r["rank"]][c] = set(sent[src])
    if step == n - 2:
        for k in range(n):
            assert holds[k][k] == set(range(n)), (k, holds[k])
assert all(h == set(range(n)) for row in holds for h in row), holds
a, b, m = 5e-6, 100e9 / 8, 8e6
close = lambda x, y: abs(x - y) <= 1e-8 * y  # JSON keeps 10 significant digits
assert close(summary["seconds"], 2 * (n - 1) * (a + m / n / b)), summary
assert close(summary["bytes_sent_per_rank"], 2 * (n - 1) / n * m), summary
' "$TMP/ring$n.jsonl" $n; then pass; else fail "ring --ranks=$n schedule"; fi
done

out=$("$EXPLAIN" ring --ranks=3 --megabytes=3)
expect_contains "$out" "   0  reduce-scatter                c2 / c1 +                c0 / c2 +                c1 / c0 +" "step 0 row"
expect_contains "$out" "each rank sends 2 (N-1)/N x 3 MB = 4.000 MB" "bytes per rank"
"$EXPLAIN" ring --ranks=4 --plot="$TMP/ring.svg" > /dev/null 2>&1 || fail "ring --plot"
if svg_ok "$TMP/ring.svg"; then pass; else fail "ring.svg is not SVG"; fi
# --buffers: every rank's buffer after each step, against this test's own play of the printed
# schedule (--json's sends and receives): what each chunk holds, an arrow per chunk sent.
for n in 2 3 5; do
  "$EXPLAIN" ring --ranks=$n --json > "$TMP/ringb$n.jsonl"
  "$EXPLAIN" ring --ranks=$n --buffers="$TMP/buffers$n.svg" > /dev/null 2>&1 || fail "ring --buffers ($n)"
  if python3 -c '
import json, sys, xml.etree.ElementTree as E
steps = [j for j in map(json.loads, open(sys.argv[1])) if "rank" in j]
n = int(sys.argv[3])
ns = "{http://www.w3.org/2000/svg}"
root = E.parse(sys.argv[2]).getroot()
drawn = {}
for r in root.iter(ns + "rect"):
    if r.get("data-state") is not None:
        holds = set(map(int, r.get("data-holds").split(",")))
        drawn[(int(r.get("data-state")), int(r.get("data-rank")), int(r.get("data-chunk")))] = holds
arrows = [(int(a.get("data-step")), int(a.get("data-from")), int(a.get("data-to")), int(a.get("data-chunk")))
          for a in root.iter(ns + "line") if a.get("data-step") is not None]
state = [[{r} for k in range(n)] for r in range(n)]
for k in range(n):
    for r in range(n):
        assert drawn[(0, r, k)] == {r}
want_arrows = []
for s in range(2 * (n - 1)):
    now = [[set(c) for c in row] for row in state]
    for e in (e for e in steps if e["step"] == s):
        to, c = e["to"], e["sends_chunk"]
        receiver = [x for x in steps if x["step"] == s and x["rank"] == to][0]
        assert receiver["receives_chunk"] == c and receiver["from"] == e["rank"]
        now[to][c] = state[to][c] | state[e["rank"]][c] if e["pass"] == "reduce_scatter" else set(state[e["rank"]][c])
        want_arrows.append((s, e["rank"], to, c))
    state = now
    for r in range(n):
        for k in range(n):
            assert drawn[(s + 1, r, k)] == state[r][k], (s, r, k, drawn[(s + 1, r, k)], state[r][k])
assert sorted(arrows) == sorted(want_arrows), (arrows, want_arrows)
assert all(drawn[(2 * (n - 1), r, k)] == set(range(n)) for r in range(n) for k in range(n))
assert all(drawn[(n - 1, k, k)] == set(range(n)) for k in range(n))  # rank k holds chunk k summed
' "$TMP/ringb$n.jsonl" "$TMP/buffers$n.svg" $n; then pass; else fail "ring --buffers ($n): the buffers drawn"; fi
done
expect_error "--buffers=b.svg: draws at most 8 ranks' buffers, not --ranks=9" ring --ranks=9 --buffers=b.svg
expect_error "--ranks=1: must be at least 2" ring --ranks=1
expect_error "unknown flag --rank" ring --rank=2
finish
