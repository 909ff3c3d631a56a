# Helpers for the explain tests (sourced): run the binary, check that its --json lines parse,
# that its pictures are SVG (XML whose root is <svg>), and that bad flags fail naming themselves.
# python3 parses the JSON and the XML; gnuplot draws the plots that are not written directly,
# and those checks skip, saying so, where gnuplot is missing.
set -u
EXPLAIN="$1"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
checks=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

pass() { checks=$((checks + 1)); }

# expect_contains TEXT PART DESCRIPTION
expect_contains() {
  if [[ "$1" == *"$2"* ]]; then pass; else fail "$3: no '$2' in:"; echo "$1" | head -20; fi
}

# json_ok FILE: every line is one JSON object.
json_ok() {
  python3 -c '
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
assert lines, "no lines"
for l in lines:
    assert isinstance(json.loads(l), dict), l
' "$1"
}

# svg_ok FILE: parses as XML, root <svg>.
svg_ok() {
  python3 -c '
import sys, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
assert root.tag.endswith("svg"), root.tag
' "$1"
}

# expect_error "PART" ARGS...: explain ARGS exits non-zero and says PART on stderr.
expect_error() {
  local part="$1"
  shift
  local err
  if err=$("$EXPLAIN" "$@" 2>&1 >/dev/null); then
    fail "explain $* succeeded; expected an error saying '$part'"
  else
    expect_contains "$err" "$part" "explain $*"
  fi
}

have_gnuplot() { command -v gnuplot >/dev/null 2>&1; }

finish() {
  echo "$checks passed, $failures failed"
  [ "$failures" -eq 0 ]
}
