#!/usr/bin/env bash
# Lines of code of each example beside its PyTorch twin in examples/pytorch/ (issue 30's measure):
# blank lines and comments not counted (// and /* */ in C++, # and docstrings in Python); a
# shared file (examples/net.h, examples/pytorch/net.py) counted with every program that
# includes it. Exits 1, naming them, when an example has no twin or is over 1.3x its twin's
# lines (issue 30's target).
#
#   tools/example_lines.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import os, re, sys

def cpp_lines(path):
    text = open(path).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    n = 0
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("//"):
            n += 1
    return n

def py_lines(path):
    text = open(path).read()
    text = re.sub(r'"""(.*?)"""', "", text, flags=re.S)
    n = 0
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            n += 1
    return n

over = []
print("| example | tessera (C++) | PyTorch (Python) | ratio |")
print("| --- | --- | --- | --- |")
for name in sorted(f[:-3] for f in os.listdir("examples") if f.endswith(".cc")):
    cc = f"examples/{name}.cc"
    n = cpp_lines(cc)
    if '#include "examples/net.h"' in open(cc).read():
        n += cpp_lines("examples/net.h")
    py = f"examples/pytorch/{name}.py"
    if os.path.exists(py):
        m = py_lines(py)
        if re.search(r"^from net import", open(py).read(), flags=re.M):
            m += py_lines("examples/pytorch/net.py")
        print(f"| {name} | {n} | {m} | {n / m:.2f}x |")
        if n > 1.3 * m:
            over.append(f"{name} is {n / m:.2f}x its twin's lines (target: at most 1.3x)")
    else:
        print(f"| {name} | {n} | - | - |")
        over.append(f"{name} has no PyTorch twin (expected {py})")
for problem in over:
    print(f"example_lines: {problem}", file=sys.stderr)
sys.exit(1 if over else 0)
PY
