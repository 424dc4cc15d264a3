"""`tilelab bench`: where the time of a grading goes. A benchmark, not a test.

It grades a fixed set of hand-ins the way a TA's class is graded (`tilelab
batch`, one worker per GPU) and reports, from each grading's own phase
timings (grade.json):

  - each phase's wall time, summed over the set and as a mean per hand-in;
  - the critical path of one grading: its phases run one after another, so
    its wall time is their sum, and the longest phases are where a faster
    grader must win;
  - how long the GPU was busy (shared: correctness runs and sanitizers;
    held exclusively: ceilings, calibration, timing);
  - the throughput: hand-ins per hour of wall time.

The set: the reference solutions, the untouched starter, and the self-test's
hand-ins that hold part files (tests/submissions), except the security ones,
which test the sandbox and are built to be slow. It writes
BUILD/bench/bench.json and prints a short table last. Nothing here asserts a
time: docs/measurements.md keeps the figures, with the machine and date.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..system.atomic import write_atomically
from .batch import run_batch

# Phases that hold the GPU: shared (gradings beside it may use it too) or alone.
SHARED_GPU_PHASES = ("correctness", "sanitizers")
EXCLUSIVE_GPU_PHASES = ("gpu probe and ceilings", "calibration", "speed")


class BenchError(ValueError):
    """The benchmark cannot start: no hand-ins, a bad folder."""


@dataclass
class BenchResult:
    hand_ins: int
    graded: int
    wall_seconds: float
    workers: int
    phase_seconds: dict  # phase -> seconds summed over the hand-ins
    per_hand_in: dict  # name -> {"seconds": ..., "timings": {...}}
    gpu_busy_seconds: float
    gpu_exclusive_seconds: float
    machine: dict = field(default_factory=dict)

    @property
    def per_hour(self) -> float:
        return 3600.0 * self.graded / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def critical_path(self) -> list:
        """(phase, mean seconds per grading), longest first: one grading runs them in turn."""
        n = max(1, self.graded)
        return sorted(((p, s / n) for p, s in self.phase_seconds.items()), key=lambda x: -x[1])

    def to_dict(self) -> dict:
        d = asdict(self)
        d["per_hour"] = round(self.per_hour, 1)
        d["critical_path"] = [[p, round(s, 3)] for p, s in self.critical_path()]
        return d


def default_hand_ins(root: Path) -> list:
    """(name, folder) of the benchmark's set, in a fixed order."""
    chosen = [("reference-solutions", root / "solutions"), ("starter", root / "starter")]
    for d in sorted((root / "tests" / "submissions").iterdir()):
        if d.is_dir() and not d.name.startswith("security-") and any(d.glob("*.cu")):
            chosen.append((d.name, d))
    return chosen


def _class_of(hand_ins: list, class_dir: Path) -> None:
    """One folder per hand-in, with its part files and answers only (as a student hands them in)."""
    shutil.rmtree(class_dir, ignore_errors=True)
    class_dir.mkdir(parents=True)
    for name, folder in hand_ins:
        dest = class_dir / name
        dest.mkdir()
        for f in sorted(folder.iterdir()):
            if f.is_file() and (f.suffix == ".cu" or f.name == "answers.yaml"):
                shutil.copyfile(f, dest / f.name)


def run_bench(root: Path, build_dir: Path, out_dir: Path, hand_ins: Optional[list] = None,
              gpus: Optional[list] = None, log: Optional[Callable[[str], None]] = None) -> BenchResult:
    hand_ins = hand_ins if hand_ins is not None else default_hand_ins(root)
    if not hand_ins:
        raise BenchError("no hand-ins to grade")
    class_dir, results = out_dir / "class", out_dir / "results"
    _class_of(hand_ins, class_dir)
    shutil.rmtree(results, ignore_errors=True)
    clock = time.monotonic()
    summary = run_batch(class_dir, root=root, build_dir=build_dir, out_dir=results, gpus=gpus, force=True,
                        live=False, log=log)
    wall = time.monotonic() - clock
    phases: dict = {}
    per_hand_in = {}
    for name, _ in hand_ins:
        try:
            detailed = json.loads((results / name / "grade.json").read_text())
        except (OSError, ValueError):
            continue  # a grader error: its row says so, it has no phases
        per_hand_in[name] = {"seconds": detailed.get("seconds", 0.0), "timings": detailed.get("timings", {})}
        for phase, seconds in per_hand_in[name]["timings"].items():
            phases[phase] = phases.get(phase, 0.0) + float(seconds)
    machine = {"gpus": [r.gpu for r in summary.rows if r.gpu][:1]}
    result = BenchResult(
        hand_ins=len(hand_ins), graded=len(per_hand_in), wall_seconds=round(wall, 2), workers=summary.workers,
        phase_seconds={p: round(s, 3) for p, s in phases.items()}, per_hand_in=per_hand_in,
        gpu_busy_seconds=round(sum(phases.get(p, 0.0) for p in SHARED_GPU_PHASES + EXCLUSIVE_GPU_PHASES), 3),
        gpu_exclusive_seconds=round(sum(phases.get(p, 0.0) for p in EXCLUSIVE_GPU_PHASES), 3),
        machine=machine,
    )
    write_atomically(out_dir / "bench.json", json.dumps(result.to_dict(), indent=2) + "\n")
    return result


def format_bench(result: BenchResult) -> str:
    """The short table a person reads: phases by cost, then the totals."""
    n = max(1, result.graded)
    walls = [h["seconds"] for h in result.per_hand_in.values()]
    lines = [f"{'phase':<24}{'total s':>9}{'per hand-in':>13}{'share':>7}"]
    total = sum(result.phase_seconds.values()) or 1.0
    for phase, mean in result.critical_path():
        seconds = result.phase_seconds[phase]
        lines.append(f"{phase:<24}{seconds:>9.1f}{mean:>12.2f}s{100 * seconds / total:>6.0f}%")
    lines += [
        f"graded {result.graded} of {result.hand_ins} hand-ins with {result.workers} worker(s) in "
        f"{result.wall_seconds:.1f} s wall: {result.per_hour:.0f} hand-ins an hour",
        f"one grading: median {statistics.median(walls) if walls else 0:.1f} s, slowest {max(walls, default=0):.1f} s",
    ]
    if result.machine.get("gpus"):
        lines.append(f"GPU ({result.machine['gpus'][0]}) busy {result.gpu_busy_seconds:.1f} s "
                     f"({result.gpu_busy_seconds / n:.2f} s per hand-in), of which held alone "
                     f"{result.gpu_exclusive_seconds:.1f} s")
    else:
        lines.append("no GPU: the phases that need one did not run")
    return "\n".join(lines)
