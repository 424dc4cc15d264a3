"""`scripts/bench`: where the time of a grading goes. A benchmark, not a test.

Every measurement is of what a user runs (run_bench): the references graded
alone, from nothing built and with every part built; that build stage against
a bare parallel `nvcc -c`; a CUDA process's start; the student's `tilelab
check naive` loop; a class graded with `tilelab batch`. It writes bench.json
and prints a short table; it asserts no time (the figures: docs/measurements.md).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

from tilelab.errors import TilelabError
from tilelab.grading.build import RecipeError, load_recipes
from tilelab.grading.build_cache import PART_CACHE_DIR
from tilelab.grading.options import GradeOptions
from tilelab.operations.batch import run_batch
from tilelab.operations.grading_run import NOTHING, run_grading
from tilelab.spec.assignment import load_assignment
from tilelab.system.atomic import write_atomically
from tilelab.system.paths import ASSIGNMENT_FILE

# Phases that hold the GPU: shared (gradings beside it may use it too) or alone.
SHARED_GPU_PHASES = ("correctness", "sanitizers")
EXCLUSIVE_GPU_PHASES = ("gpu probe", "ceilings", "calibration", "runs again alone", "speed")


class BenchError(TilelabError):
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
    in_flight: int = 1
    # The references graded alone: {"cold" | "warm": {"seconds", "timings", "spans"}}.
    references: dict = field(default_factory=dict)
    bare_compile_seconds: Optional[float] = None  # the same part files, plain nvcc -c in parallel
    student_loop: dict = field(default_factory=dict)  # "edited" | "unchanged" | "fast" -> seconds
    student_loop_spans: dict = field(default_factory=dict)  # the same -> when each phase of the check ran
    startup: dict = field(default_factory=dict)  # "probe" | "harness" -> seconds of a run that does ~nothing

    @property
    def per_hour(self) -> float:
        return 3600.0 * self.graded / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def critical_path(self) -> list:
        """(phase, mean seconds per grading), longest first: where the time goes.
        Phases of one grading may overlap (grade.json's spans), so this ranks
        them; timeline() shows which of them one grading waits for."""
        n = max(1, self.graded)
        return sorted(((p, s / n) for p, s in self.phase_seconds.items()), key=lambda x: -x[1])

    def to_dict(self) -> dict:
        d = asdict(self)
        d["per_hour"] = round(self.per_hour, 1)
        d["critical_path"] = [[p, round(s, 3)] for p, s in self.critical_path()]
        return d


def covered(spans: dict, phases: tuple) -> float:
    """Seconds during which at least one of `phases` ran (their spans may overlap)."""
    intervals = sorted(tuple(spans[p]) for p in phases if p in spans)
    total, reach = 0.0, None
    for start, end in intervals:
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def default_hand_ins(root: Path) -> list:
    """(name, folder) of the benchmark's set, in a fixed order: the
    references, the starter, and the self-test's hand-ins that hold part
    files, except the security ones (they test the sandbox and are slow)."""
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


def _grade_references(root: Path, build_dir: Path, out_dir: Path, fresh_build: bool) -> dict:
    """The references graded alone, as `tilelab grade solutions` grades them."""
    if fresh_build:
        shutil.rmtree(build_dir / PART_CACHE_DIR, ignore_errors=True)
    out = out_dir / "references"
    shutil.rmtree(out, ignore_errors=True)
    clock = time.monotonic()
    result = run_grading(root / "solutions", GradeOptions.for_tree(root, build_dir, out), NOTHING).result
    return {"seconds": round(time.monotonic() - clock, 2), "timings": result.timings, "spans": result.spans,
            "score": result.score, "max_score": result.max_score}


def bare_compile_seconds(root: Path, build_dir: Path, compute_capability: Optional[str] = None) -> Optional[float]:
    """Wall time of compiling the reference part files, all at once, with the
    prebuilt tree's own commands and nothing else, for the same GPUs as a
    grading on this machine (this one's alone, when it has one): the floor a
    build stage can reach (None when the tree cannot say how it builds)."""
    parts = list(load_assignment(root / ASSIGNMENT_FILE).parts)
    try:
        recipes = load_recipes(build_dir, parts, compute_capability=compute_capability)
    except RecipeError:
        return None
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=len(parts)) as pool:
        clock = time.monotonic()
        runs = list(pool.map(lambda p: subprocess.run(
            recipes[p.id].compile_command(root / "solutions" / p.file, Path(tmp) / f"{p.id}.o"),
            capture_output=True, cwd=tmp), parts))
        seconds = time.monotonic() - clock
    return round(seconds, 2) if all(r.returncode == 0 for r in runs) else None


def smallest_run(root: Path, build_dir: Path, folder: Path) -> tuple:
    """(the naive reference part's executable, a case file of its 1x1 case in `folder`): a run that does
    almost nothing but start, as every run a grading makes does."""
    from tilelab.grading.calibration import REFERENCE_DIR
    from tilelab.grading.runner import write_cases

    naive = load_assignment(root / ASSIGNMENT_FILE).part("naive")
    return build_dir / REFERENCE_DIR / naive.id, write_cases(naive, [("one", naive.cases["public"][0])], folder, 1)


def startup_seconds(root: Path, build_dir: Path, out_dir: Path) -> dict:
    """What starting a CUDA process costs, the floor of every run a grading
    makes: the GPU probe (`tilelab-roofline --device`) and a harness run of
    the naive reference on its 1x1 case (medians of 3). Empty without a GPU."""
    from tilelab.grading import gpu_ceilings
    from tilelab.grading.runner import run_harness
    from tilelab.system.paths import tool_path
    from tilelab.system.sandbox import Sandbox

    probe, harness = [], []
    for i in range(3):
        clock = time.monotonic()
        try:
            gpu_ceilings.device_info(tool_path(build_dir, "tilelab-roofline"), 60)
        except gpu_ceilings.RooflineError:
            return {}
        probe.append(time.monotonic() - clock)
        binary, case_file = smallest_run(root, build_dir, out_dir / f"startup-{i}")
        if binary.is_file():
            harness.append(run_harness(binary, case_file, 60, Sandbox()).seconds)
    found = {"probe": round(statistics.median(probe), 3)}
    if harness:
        found["harness"] = round(statistics.median(harness), 3)
    return found


def _compute_capability(build_dir: Path) -> Optional[str]:
    """This machine's GPU's, as a grading probes it; None without one."""
    from tilelab.grading import gpu_ceilings
    from tilelab.system.paths import tool_path

    try:
        return gpu_ceilings.device_info(tool_path(build_dir, "tilelab-roofline"), 60).get("compute_capability")
    except gpu_ceilings.RooflineError:
        return None


def student_loop(root: Path, build_dir: Path, out_dir: Path) -> tuple:
    """`tilelab check naive` as a student runs it, in a folder of their own
    with a correct naive.cu: just edited, unchanged, and with --fast.
    Returns ({run: wall seconds}, {run: when each phase of it ran})."""
    student = out_dir / "student"
    shutil.rmtree(student, ignore_errors=True)
    student.mkdir(parents=True)
    source = (root / "solutions" / "naive.cu").read_text()
    (student / "naive.cu").write_text(f"{source}\n// edited at {time.time_ns()}\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    seconds, spans = {}, {}
    for name, extra in (("edited", []), ("unchanged", []), ("fast", ["--fast"])):
        clock = time.monotonic()
        subprocess.run([sys.executable, "-m", "tilelab.cli", "--root", str(root), "check", "naive", "--dir",
                        str(student), "--build", str(build_dir), *extra], capture_output=True, env=env)
        seconds[name] = round(time.monotonic() - clock, 2)
        try:
            # When each phase ran, inside the command's wall time.
            spans[name] = json.loads((build_dir / "check" / "grade.json").read_text())["spans"]
        except (OSError, ValueError, KeyError):
            pass
    return seconds, spans


def run_bench(root: Path, build_dir: Path, out_dir: Path, hand_ins: Optional[list] = None,
              gpus: Optional[list] = None, log: Optional[Callable[[str], None]] = None,
              in_flight: Optional[int] = None) -> BenchResult:
    """Every measurement, written to OUT/bench.json. The part cache is
    emptied before the references' gradings from nothing built and before
    the class, so every distinct file is compiled once there. The GPU's busy
    time counts the phases that share it and those that hold it alone
    (SHARED_GPU_PHASES, EXCLUSIVE_GPU_PHASES)."""
    hand_ins = hand_ins if hand_ins is not None else default_hand_ins(root)
    if not hand_ins:
        raise BenchError("no hand-ins to grade")
    log = log or (lambda m: None)
    log("bench: the references graded alone (twice from nothing built, once with every part built)")
    _grade_references(root, build_dir, out_dir, fresh_build=True)  # on a fresh GPU it calibrates, too
    references = {"cold": _grade_references(root, build_dir, out_dir, fresh_build=True),
                  "warm": _grade_references(root, build_dir, out_dir, fresh_build=False)}
    log("bench: a bare parallel nvcc -c of the same files")
    bare = bare_compile_seconds(root, build_dir, _compute_capability(build_dir))
    log("bench: what starting a CUDA process costs")
    startup = startup_seconds(root, build_dir, out_dir)
    log("bench: tilelab check naive, as a student runs it")
    loop, loop_spans = student_loop(root, build_dir, out_dir)
    class_dir, results = out_dir / "class", out_dir / "results"
    _class_of(hand_ins, class_dir)
    shutil.rmtree(results, ignore_errors=True)
    shutil.rmtree(build_dir / PART_CACHE_DIR, ignore_errors=True)
    clock = time.monotonic()
    summary = run_batch(class_dir, root=root, build_dir=build_dir, out_dir=results, gpus=gpus, force=True,
                        live=False, log=log, in_flight=in_flight)
    wall = time.monotonic() - clock
    phases: dict = {}
    per_hand_in = {}
    busy = alone = 0.0
    for name, _ in hand_ins:
        try:
            detailed = json.loads((results / name / "grade.json").read_text())
        except (OSError, ValueError):
            continue  # a grader error: its row says so, it has no phases
        per_hand_in[name] = {"seconds": detailed.get("seconds", 0.0), "timings": detailed.get("timings", {}),
                             "spans": detailed.get("spans", {})}
        for phase, seconds in per_hand_in[name]["timings"].items():
            phases[phase] = phases.get(phase, 0.0) + float(seconds)
        busy += covered(per_hand_in[name]["spans"], SHARED_GPU_PHASES + EXCLUSIVE_GPU_PHASES)
        alone += covered(per_hand_in[name]["spans"], EXCLUSIVE_GPU_PHASES)
    machine = {"gpus": [r.gpu for r in summary.rows if r.gpu][:1]}
    result = BenchResult(
        hand_ins=len(hand_ins), graded=len(per_hand_in), wall_seconds=round(wall, 2), workers=summary.workers,
        phase_seconds={p: round(s, 3) for p, s in phases.items()}, per_hand_in=per_hand_in,
        gpu_busy_seconds=round(busy, 3), gpu_exclusive_seconds=round(alone, 3),
        machine=machine, in_flight=summary.in_flight, references=references, bare_compile_seconds=bare,
        student_loop=loop, student_loop_spans=loop_spans, startup=startup,
    )
    write_atomically(out_dir / "bench.json", json.dumps(result.to_dict(), indent=2) + "\n")
    return result


def timeline(spans: dict) -> list:
    """One grading's phases in the order they started, with when they ran."""
    rows = sorted(((p, s[0], s[1]) for p, s in spans.items() if s[1] - s[0] >= 0.005), key=lambda r: (r[1], r[2]))
    return [f"  {phase:<24}{start:>6.2f} -> {end:>6.2f} s ({end - start:.2f} s)" for phase, start, end in rows]


def format_single(result: BenchResult) -> list:
    """The references graded alone, the build against bare nvcc, the student's loop."""
    lines = []
    cold, warm = result.references.get("cold"), result.references.get("warm")
    if cold and warm:
        lines.append(f"the references graded alone: {cold['seconds']:.1f} s wall with every part compiled, "
                     f"{warm['seconds']:.1f} s with every part built before ({cold['score']:g} / "
                     f"{cold['max_score']:g} points); when each phase ran, compiled:")
        lines += timeline(cold["spans"])
        build = cold["timings"].get("build")
        if build and result.bare_compile_seconds:
            lines.append(f"build stage {build:.2f} s against a bare parallel nvcc -c of the same files "
                         f"{result.bare_compile_seconds:.2f} s: {build / result.bare_compile_seconds:.2f} x")
    if result.startup:
        lines.append("starting a CUDA process: the GPU probe " + f"{result.startup['probe']:.2f} s" +
                     (f", a harness run of one 1x1 case {result.startup['harness']:.2f} s"
                      if "harness" in result.startup else ""))
    if result.student_loop:
        loop = result.student_loop
        lines.append(f"tilelab check naive (a correct file): just edited {loop['edited']:.1f} s, unchanged "
                     f"{loop['unchanged']:.1f} s, --fast {loop['fast']:.1f} s")
    return lines


def format_bench(result: BenchResult) -> str:
    """The short table a person reads: the single gradings, then the class's
    phases by cost, then the totals."""
    n = max(1, result.graded)
    walls = [h["seconds"] for h in result.per_hand_in.values()]
    lines = format_single(result)
    if lines:
        lines.append("")
    lines.append(f"the class, {result.in_flight} hand-in(s) at a time on each GPU (phases overlap: their times add "
                 "up to more than the wall time)")
    lines.append(f"{'phase':<24}{'total s':>9}{'per hand-in':>13}{'share':>7}")
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
