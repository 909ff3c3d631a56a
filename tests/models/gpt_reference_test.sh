#!/usr/bin/env bash
# Regenerates the GPT fixture with PyTorch (tests/models/gpt_reference.py) and compares it with
# the committed one, which //tests/models:gpt_test checks tessera against. Where torch is not
# installed (Debian's python3-torch), says SKIPPED and passes: the committed fixture still holds.
set -euo pipefail
here="$TEST_SRCDIR/tessera/tests/models"
python=""
for candidate in /usr/bin/python3 python3; do  # Debian's, where python3-torch installs torch
  if "$candidate" -c 'import torch' 2>/dev/null; then python="$candidate"; break; fi
done
if [ -z "$python" ]; then
  echo "SKIPPED: PyTorch is not installed (apt-get install python3-torch); the committed fixture is checked by gpt_test"
  exit 0
fi
out="${TEST_TMPDIR:-/tmp}/gpt_reference.safetensors"
"$python" "$here/gpt_reference.py" "$out"
"$python" "$here/gpt_reference.py" --compare "$out" "$here/data/gpt_reference.safetensors"
