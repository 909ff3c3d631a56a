#!/usr/bin/env bash
# explain report's page in a real browser: headless Chromium (Debian's chromium) loads it with no
# console message at all and screenshots it, and the screenshot shows the curves (report_check.py
# png: the curves' colour where they are drawn). The same console check on a page with a script
# error must see it, so that a silent browser is not mistaken for a clean page. Says SKIPPED where
# chromium is not installed (tools/setup.sh does not install it: apt-get install chromium).
source "$2"
MPI_RUN="$3"
TRAIN="$4"
CHECK="$5"

if ! command -v chromium > /dev/null 2>&1; then
  echo "SKIPPED: chromium is not installed (apt-get install chromium)"
  exit 0
fi
export HOME="$TMP"  # Chromium's profile

# chromium_load PAGE SHOT: loads the page, writes the screenshot, prints the console's lines.
chromium_load() {
  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --enable-logging=stderr --v=0 \
    --virtual-time-budget=5000 --window-size=1200,2600 --screenshot="$2" "file://$1" 2>&1 | grep ":CONSOLE" || true
}

RUN="$TMP/run"
mkdir -p "$RUN"
"$MPI_RUN" 2 "$TRAIN" --model=mlp --data=synthetic --epochs=2 --train-limit=640 --threads=1 --seed=3 \
  --strategy=zero2 --metrics="$RUN/metrics.jsonl" --trace="$RUN/trace.json" > "$RUN/stdout.txt" 2>&1 \
  || fail "the 2-rank run failed"
"$EXPLAIN" report "$RUN" --html="$TMP/run.html" > /dev/null || fail "explain report exited non-zero"

console=$(chromium_load "$TMP/run.html" "$TMP/run.png")
if [ -z "$console" ]; then pass; else fail "the page logged to the console: $console"; fi
if [ -s "$TMP/run.png" ] && python3 "$CHECK" png "$TMP/run.png"; then pass; else fail "the screenshot"; fi

echo '<!DOCTYPE html><html><body><p>x</p><script>not_a_function();</script></body></html>' > "$TMP/bad.html"
console=$(chromium_load "$TMP/bad.html" "$TMP/bad.png")
expect_contains "$console" "Uncaught ReferenceError: not_a_function is not defined" "the console check sees a script error"
if python3 "$CHECK" png "$TMP/bad.png" > /dev/null; then fail "a page without curves passed the screenshot check"; else pass; fi
finish
