"""Checks a train --trace file and explain's --json reading of it against references computed
here, independently: DDP's buckets from the MLP's parameter sizes and the caps, ZeRO-3's units
from the MLP's layers, and explain's figures from the raw events.

  trace_check.py ddp TRACE EXPLAIN_JSONL STEPS FIRST_BUCKET_MB BUCKET_CAP_MB
  trace_check.py zero3 TRACE EXPLAIN_JSONL STEPS
  trace_check.py steps TRACE STEPS              (only these steps, from both ranks)

STEPS: comma-separated step numbers. Exits non-zero with a message on the first mismatch.
"""
import json
import sys

RANKS = 2
# models::MLP(784, 256, 10): fc1 (weight 256x784, bias 256), ReLU, fc2 (weight 10x256, bias 10),
# parameters in registration order.
MLP = [("fc1", 256 * 784), ("fc1", 256), ("fc2", 10 * 256), ("fc2", 10)]


def load(path):
    with open(path) as f:
        trace = json.load(f)  # the whole file must parse
    return [e for e in trace["traceEvents"] if e["ph"] != "M"]


def ddp_buckets(first_mb, cap_mb):
    """Elements per bucket: reverse registration order, a bucket closes at its cap (f32)."""
    buckets, current = [], 0
    for _, numel in reversed(MLP):
        current += numel
        cap = first_mb if not buckets else cap_mb
        if current * 4 >= cap * 1024 * 1024:
            buckets.append(current)
            current = 0
    if current:
        buckets.append(current)
    return buckets


def check(cond, *what):
    if not cond:
        sys.exit("trace_check: " + " ".join(str(w) for w in what))


def of(events, rank, step):
    return [e for e in events if e["pid"] == rank and e["args"]["step"] == step]


def overlap(a0, a1, b0, b1):
    return max(0.0, min(a1, b1) - max(a0, b0))


def close(a, b):
    return abs(a - b) <= 1e-6 + 1e-6 * abs(b)


def check_steps(events, steps):
    found = sorted({e["args"]["step"] for e in events})
    check(found == steps, "steps in the trace", found, "expected", steps)
    for r in range(RANKS):
        check(any(e["pid"] == r for e in events), "no events of rank", r)


def check_ddp(trace, explain, steps, first_mb, cap_mb):
    events = load(trace)
    check_steps(events, steps)
    expected = ddp_buckets(first_mb, cap_mb)
    check(len(expected) >= 2, "choose caps that make several buckets, got", expected)
    summaries = {s["step"]: s for s in map(json.loads, open(explain)) if s.get("summary") == "ddp"}
    for step in steps:
        for rank in range(RANKS):
            mine = of(events, rank, step)
            comm = sorted((e for e in mine if e["tid"] != 0 and e["cat"] == "all_reduce"
                           and "bucket" in e["args"]), key=lambda e: e["ts"])
            check([e["args"]["bucket"] for e in comm] == list(range(len(expected))),
                  "rank", rank, "step", step, "bucket all-reduces", [e["name"] for e in comm])
            check([e["args"]["elements"] for e in comm] == expected,
                  "rank", rank, "step", step, "bucket elements", [e["args"]["elements"] for e in comm],
                  "expected", expected)
            launches = [e for e in mine if e["cat"] == "launch"]
            check(len(launches) == len(expected), "launches", len(launches))
            layers = [e["args"]["layer"] for e in sorted(
                (e for e in mine if e["cat"] == "backward"), key=lambda e: e["ts"])]
            check(layers == ["fc2", "fc1"], "backward layers", layers)
        # explain's summary for rank 0, from the raw events.
        mine = of(events, 0, step)
        backward = [e for e in mine if e["cat"] == "backward"]
        b0 = min(e["ts"] for e in backward) / 1e3
        b1 = max(e["ts"] + e["dur"] for e in backward) / 1e3
        comm = [e for e in mine if e["tid"] != 0 and "bucket" in e["args"]]
        total = sum(e["dur"] for e in comm) / 1e3
        hidden = sum(overlap(e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3, b0, b1) for e in comm)
        exposed = sum(e["dur"] for e in mine if e["cat"] == "wait") / 1e3
        s = summaries.get(step)
        check(s is not None, "explain printed no summary for step", step)
        check(s["buckets"] == len(expected) and s["layers"] == 2, "explain summary", s)
        check(close(s["communication_ms"], total), "communication_ms", s["communication_ms"], total)
        check(close(s["hidden_ms"], hidden), "hidden_ms", s["hidden_ms"], hidden)
        check(close(s["exposed_ms"], exposed), "exposed_ms", s["exposed_ms"], exposed)
        check(close(s["backward_ms"], b1 - b0), "backward_ms", s["backward_ms"], b1 - b0)
        fraction = hidden / total if total > 0 else 0.0
        check(close(s["overlap_fraction"], fraction), "overlap_fraction", s["overlap_fraction"], fraction)


def check_zero3(trace, explain, steps):
    events = load(trace)
    check_steps(events, steps)
    # Every top-level child with parameters is a unit (--zero3-wrap=block): fc1 and fc2, each
    # flat and padded to a multiple of the ranks.
    units = {}
    for layer, numel in MLP:
        units[layer] = units.get(layer, 0) + numel
    padded = sorted(-(-n // RANKS) * RANKS for n in units.values())
    lines = [json.loads(l) for l in open(explain)]
    for step in steps:
        for rank in range(RANKS):
            mine = of(events, rank, step)
            count = lambda cat: len([e for e in mine if e["cat"] == cat and "unit" in e["args"]])
            # Gathered before its forward and again before its backward, freed after each,
            # reduce-scattered once.
            check(count("all_gather") == 2 * len(units), "rank", rank, "step", step, "all-gathers", count("all_gather"))
            check(count("free") == 2 * len(units), "frees", count("free"))
            check(count("reduce_scatter") == len(units), "reduce-scatters", count("reduce_scatter"))
            gathered = sorted({e["args"]["elements"] for e in mine if e["cat"] == "all_gather"})
            check(gathered == padded, "gathered elements", gathered, "expected", padded)
        mine = of(events, 0, step)
        s = [l for l in lines if l.get("summary") == "zero3" and l["step"] == step]
        check(len(s) == 1, "explain zero3 summaries for step", step, s)
        s = s[0]
        check(s["units"] == len(units) and s["all_gathers"] == 2 * len(units) and
              s["frees"] == 2 * len(units) and s["reduce_scatters"] == len(units), "explain summary", s)
        per_unit = [l for l in lines if l.get("step") == step and "all_gathers" in l and "summary" not in l]
        for u in per_unit:
            ms = sum(e["dur"] for e in mine if e["cat"] == "all_gather" and e["args"].get("unit") == u["unit"]) / 1e3
            check(close(u["all_gather_ms"], ms), "unit", u["unit"], "all_gather_ms", u["all_gather_ms"], ms)
        flow = [l for l in lines if l.get("step") == step and "kind" in l]
        raw = sorted((e for e in mine if "unit" in e["args"]), key=lambda e: e["ts"])
        check([l["event"] for l in flow] == [e["name"] for e in raw], "flow order",
              [l["event"] for l in flow], [e["name"] for e in raw])


def main():
    kind, trace = sys.argv[1], sys.argv[2]
    if kind == "steps":
        check_steps(load(trace), [int(s) for s in sys.argv[3].split(",")])
    elif kind == "ddp":
        check_ddp(trace, sys.argv[3], [int(s) for s in sys.argv[4].split(",")], float(sys.argv[5]),
                  float(sys.argv[6]))
    elif kind == "zero3":
        check_zero3(trace, sys.argv[3], [int(s) for s in sys.argv[4].split(",")])
    else:
        sys.exit("trace_check: unknown check " + kind)


main()
