#!/usr/bin/env bash
# explain report: a 2-rank ZeRO-2 run of the train tool writes its --metrics, --trace and
# standard output into a directory; the page made from it is checked against those files by
# report_check.py (self-contained, every picture well-formed, the loss curve a point per step,
# each rank's lane, memory and bytes tables equal to the final JSON, every setting, the command).
# A directory with less in it gets a page that says what is missing; bad input is named.
source "$2"
MPI_RUN="$3"
TRAIN="$4"
CHECK="$5"

RUN="$TMP/run"
mkdir -p "$RUN"
command=(--model=mlp --data=synthetic --epochs=2 --train-limit=640 --threads=1 --seed=3 --strategy=zero2
         --metrics="$RUN/metrics.jsonl" --trace="$RUN/trace.json")
"$MPI_RUN" 2 "$TRAIN" "${command[@]}" > "$RUN/stdout.txt" 2>&1 || fail "the 2-rank run failed"
echo "mpirun -np 2 train ${command[*]}" > "$RUN/command.txt"

"$EXPLAIN" report "$RUN" --html="$TMP/run.html" --json > "$TMP/report.json" || fail "explain report exited non-zero"
if python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
run = sys.argv[2]
assert r["metrics"] == [run + "/metrics.jsonl"] and r["traces"] == [run + "/trace.json"], r
assert r["summary"] == run + "/stdout.txt" and r["command"].startswith("mpirun -np 2 train"), r
' "$TMP/report.json" "$RUN"; then pass; else fail "report --json: the files found"; fi
if python3 "$CHECK" page "$RUN" "$TMP/run.html"; then pass; else fail "the page against the run's files"; fi

# train --report: the same page written by the run itself when it ends. Given --metrics but not
# --trace, the trace goes to a temporary directory of its own (under TMPDIR), gone afterwards.
DIRECT="$TMP/direct"
mkdir -p "$DIRECT" "$TMP/tmpdir"
direct=(--model=mlp --data=synthetic --epochs=2 --train-limit=640 --threads=1 --seed=3 --strategy=zero2
        --metrics="$DIRECT/metrics.jsonl" --report="$TMP/direct.html")
TMPDIR="$TMP/tmpdir" "$MPI_RUN" 2 "$TRAIN" "${direct[@]}" > "$DIRECT/stdout.txt" 2>&1 || fail "the 2-rank run with --report failed"
printf "%s %s" "$TRAIN" "${direct[*]}" > "$DIRECT/command.txt"  # the page shows the command line as run
if python3 "$CHECK" page "$DIRECT" "$TMP/direct.html"; then pass; else fail "train --report's page against the run's files"; fi
out=$(cat "$DIRECT/stdout.txt")
expect_contains "$out" "report: $TMP/direct.html (" "train says where the page went"
[ "$(tail -n 1 "$DIRECT/stdout.txt" | cut -c1-10)" = '{"model": ' ] && pass || fail "the final JSON is no longer stdout's last line"
[ -z "$(ls -A "$TMP/tmpdir")" ] && pass || fail "the temporary trace was left: $(ls "$TMP/tmpdir")"
case "$out" in *"trace: "*) fail "a temporary trace was announced as the user's";; *) pass;; esac
# Every kind of strategy writes its page and ends with exit 0, whatever its rank 0 records: the
# parameter server of shared asynchronous SGD trains no batch, so its page says there is no curve.
for strategy in "--strategy=pipeline" "--strategy=zero3" "--strategy=gossip" "--strategy=local-sgd" \
                "--strategy=ddp --tensor-parallel=2" "--strategy=async --batch-assignment=shared"; do
  rm -f "$TMP/each.html"
  # shellcheck disable=SC2086
  out=$(TMPDIR="$TMP/tmpdir" "$MPI_RUN" 2 "$TRAIN" --model=mlp --data=synthetic --epochs=1 --train-limit=256 \
        --threads=1 $strategy --report="$TMP/each.html" 2>&1) || fail "train $strategy --report exited non-zero: $(echo "$out" | tail -3)"
  grep -q "<svg " "$TMP/each.html" 2>/dev/null && pass || fail "train $strategy --report: no page with pictures"
done
expect_contains "$(cat "$TMP/each.html")" "no step lines" "the server's page says why it has no curve"
[ -z "$(ls -A "$TMP/tmpdir")" ] && pass || fail "temporary files left: $(ls "$TMP/tmpdir")"
bad=$("$TRAIN" --model=mlp --report="$TMP/page.txt" 2>&1) && fail "--report=page.txt accepted"
expect_contains "$bad" "--report=$TMP/page.txt: expected a file name ending in .html" "--report's name checked"
bad=$("$TRAIN" --model=mlp --report="$TMP/nowhere/page.html" 2>&1) && fail "--report into a missing directory accepted"
expect_contains "$bad" "--report=$TMP/nowhere/page.html: the directory '$TMP/nowhere' does not exist" "--report's directory checked"

# Only a metrics file: the other sections say which flag would have written what they show.
mkdir -p "$TMP/partial"
cp "$RUN/metrics.jsonl" "$TMP/partial/"
"$EXPLAIN" report --run="$TMP/partial" --html="$TMP/partial.html" > /dev/null || fail "a metrics-only report"
page=$(cat "$TMP/partial.html")
expect_contains "$page" "No trace in this run (train --trace=RUN/trace.json records one)." "the missing trace named"
expect_contains "$page" "No final JSON line" "the missing summary named"
expect_contains "$page" "<polyline" "the curves of a metrics-only run"

mkdir -p "$TMP/empty"
expect_error "$TMP/empty: no --metrics file, trace or train output found" report "$TMP/empty" --html="$TMP/x.html"
expect_error "$TMP/nowhere: not a directory" report "$TMP/nowhere" --html="$TMP/x.html"
expect_error "--html=page.txt: expected a file name ending in .html" report "$RUN" --html=page.txt
expect_error "--html is required" report "$RUN"
expect_contains "$("$EXPLAIN" report --help)" "--html=FILE.html" "report --help"
finish
