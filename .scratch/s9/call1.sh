#!/usr/bin/env bash
# The GPU suite (no self-test, no service) at this tree.
set -u
export PATH=/opt/torch/.venv/bin:$PATH
nvidia-smi -L
python3 -c "import click, jinja2, yaml, rich; print('python ok')"
t0=$(date +%s)
scripts/gpu-suite --no-selftest --no-service --gradings 2 > "$OUT/suite.txt" 2>&1
echo "suite rc=$? in $(( $(date +%s) - t0 )) s"
tail -45 "$OUT/suite.txt"
