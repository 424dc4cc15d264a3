#!/usr/bin/env bash
# A class of 12 on GPU 0 without the hardware counters, then with them on GPU 0 and on both GPUs.
set -u
export PATH=/opt/torch/.venv/bin:$PATH
./scripts/secure-checkout > /dev/null
t0=$(date +%s)
scripts/bench --build build-gpu --out /tmp/b-nocounters --class 12 --gpus 0 --without counters > "$OUT/b-nocounters.txt" 2>&1
echo "without counters rc=$? in $(( $(date +%s) - t0 )) s"
grep -v "^bench: \|^\.\.\. \|^  *GPU\|graded \|^GPU" "$OUT/b-nocounters.txt" | tail -12
cp /tmp/b-nocounters/class.json "$OUT/class-nocounters.json" 2>/dev/null
t1=$(date +%s)
timeout $(( 590 - (t1 - t0) )) scripts/bench --build build-gpu --out /tmp/b-x2 --class 12 --gpus 0,1 > "$OUT/b-x2.txt" 2>&1
echo "x2 rc=$? in $(( $(date +%s) - t1 )) s"
grep -v "^bench: \|^\.\.\. " "$OUT/b-x2.txt" | tail -14
cp /tmp/b-x2/class.json "$OUT/class-x2.json" 2>/dev/null
