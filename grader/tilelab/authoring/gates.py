"""Release gates: the checks that make the starter, the handout, the bundles
and the autograder agree with each other before anything is handed out.

  starter            starter/ is exactly what generation from solutions/ gives
  student-bundle     the student tarball holds nothing it must not, unpacks
                     into an empty directory and builds there
  autograder-bundle  the autograder zip has its entry points and key, and no
                     solution source
  solutions          (GPU) the reference solutions and the key get full marks
                     on every graded item
  starter-scores-0   (GPU) the untouched starter gets zero on every graded item
  <prev>-as-<next>   (GPU) each part's reference kernel, handed in as the
                     next part of the same signature, stays below full speed
                     credit: the targets tell the technique a part teaches
                     from the one before it, on whatever GPU runs the gates

Without a GPU the GPU gates are reported as not run, never as passed.
"""

from __future__ import annotations

import re
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..outputs.gradescope import results_json
from ..spec.assignment import load_assignment
from ..system import process
from ..system.paths import ASSIGNMENT_FILE, missing_tools
from .dist import DistError, autograder_bundle, student_bundle
from .starter import StarterError, starter_files

BUILD_TIME_LIMIT = 1800


@dataclass
class Gate:
    name: str
    status: str  # "passed", "failed", "not_run"
    detail: str


def _starter_gate(root: Path) -> Gate:
    try:
        files = starter_files(load_assignment(root / ASSIGNMENT_FILE), root / "solutions", root / "starter")
    except StarterError as e:
        return Gate("starter", "failed", str(e))
    stale = [str(f.path.relative_to(root)) for f in files if not f.up_to_date]
    if stale:
        return Gate("starter", "failed", "out of date (run `tilelab starter`): " + ", ".join(stale))
    return Gate("starter", "passed", f"{len(files)} files match generation from solutions/")


def _student_gate(root: Path, work: Path) -> Gate:
    from .handout import write_handouts

    handout_dir = work / "handout"
    write_handouts(load_assignment(root / ASSIGNMENT_FILE), root, handout_dir, variant="student")
    try:
        tarball = student_bundle(root, work / "student.tar.gz", handout_dir)
    except DistError as e:
        return Gate("student-bundle", "failed", str(e))
    unpacked = work / "student-unpacked"
    shutil.rmtree(unpacked, ignore_errors=True)
    unpacked.mkdir()
    with tarfile.open(tarball) as tar:
        # The "data" filter (Python 3.12, backported to 3.9.17+) refuses links
        # and paths outside the target; our own tarball holds plain files anyway.
        if hasattr(tarfile, "data_filter"):
            tar.extractall(unpacked, filter="data")
        else:
            tar.extractall(unpacked)
    (tree,) = list(unpacked.iterdir())
    build = tree / "build"
    configured = process.run(["cmake", "-S", tree, "-B", build, f"-DPython3_EXECUTABLE={sys.executable}"],
                             BUILD_TIME_LIMIT)
    if configured.exit_code != 0:
        return Gate("student-bundle", "failed", "configure failed:\n" + configured.output[-3000:])
    built = process.run(["cmake", "--build", build, "-j"], BUILD_TIME_LIMIT)
    if built.exit_code != 0:
        return Gate("student-bundle", "failed", "build failed:\n" + built.output[-3000:])
    missing = missing_tools(build) + ([] if (build / "starter" / "naive").exists() else ["starter/naive"])
    if missing:
        return Gate("student-bundle", "failed", f"built, but without {', '.join(missing)}")
    size = tarball.stat().st_size / 1e6
    return Gate("student-bundle", "passed",
                f"{tarball.name} ({size:.1f} MB) unpacked into an empty directory and built in "
                f"{configured.seconds + built.seconds:.0f} s")


def _autograder_gate(root: Path, work: Path) -> Gate:
    try:
        z = autograder_bundle(root, work / "autograder.zip")
    except DistError as e:
        return Gate("autograder-bundle", "failed", str(e))
    return Gate("autograder-bundle", "passed", f"{z.name} ({z.stat().st_size / 1e6:.1f} MB): entry points, "
                                               "key and hidden cases in, no solution source")


def _grading_gates(root: Path, build_dir: Path, work: Path, progress: Callable) -> list:
    from ..grading.grade import NO_GPU, GradeOptions, grade

    assignment = load_assignment(root / ASSIGNMENT_FILE)
    gates = []
    for name, submission, want_full in (("solutions", root / "solutions", True),
                                        ("starter-scores-0", root / "starter", False)):
        progress(f"grading {submission.name}/")
        result = grade(submission, GradeOptions(root=root, build_dir=build_dir, out_dir=work / name, mode="grade"))
        if result.gpu is None:
            gates.append(Gate(name, "not_run", NO_GPU))
            continue
        tests = results_json(result, assignment)["tests"]
        graded = [t for t in tests if t["max_score"] > 0]
        if want_full:
            short = [f"{t['name']} {t['score']:g}/{t['max_score']:g}" for t in graded if t["score"] < t["max_score"]]
            ok = not short
            detail = f"{len(graded)} graded items, all full marks" if ok else "not full: " + "; ".join(short)
        else:
            scored = [f"{t['name']} {t['score']:g}" for t in graded if t["score"] > 0]
            ok = not scored
            detail = f"{len(graded)} graded items, all zero" if ok else "scored: " + "; ".join(scored)
        gates.append(Gate(name, "passed" if ok else "failed", detail))
    return gates


def _previous_part_gates(root: Path, build_dir: Path, work: Path, progress: Callable) -> list:
    """The reference of each part handed in as the next part (where both
    have the same launcher signature), graded on that part alone."""
    from ..grading.grade import NO_GPU, GradeOptions, grade

    assignment = load_assignment(root / ASSIGNMENT_FILE)
    gates = []
    for before, part in zip(assignment.parts, assignment.parts[1:]):
        if before.signature != part.signature:
            continue
        name = f"{before.id}-as-{part.id}"
        progress(f"grading {before.file} handed in as {part.file}")
        hand_in = work / name
        hand_in.mkdir(parents=True)
        source = (root / "solutions" / before.file).read_text()
        (hand_in / part.file).write_text(re.sub(rf"\b{before.launcher}\b", part.launcher, source))
        result = grade(hand_in, GradeOptions(root=root, build_dir=build_dir, out_dir=work / f"{name}-results",
                                             mode="grade", parts=(part.id,), sanitizers=False))
        if result.gpu is None:
            gates.append(Gate(name, "not_run", NO_GPU))
            continue
        (graded,) = result.parts
        speed = graded.speed
        if speed is None:
            stage = graded.failed_stage or "speed"
            gates.append(Gate(name, "passed", f"not timed ({graded.stages[stage].summary}): no speed credit"))
            continue
        detail = (f"{speed.gflops:,.0f} GFLOP/s = {100 * speed.gflops / speed.reference_gflops:.0f}% of "
                  f"{part.id}'s reference: {100 * speed.fraction:.0f}% of the speed points")
        gates.append(Gate(name, "passed" if speed.fraction < 1 else "failed",
                          detail if speed.fraction < 1 else "full speed credit: " + detail))
    return gates


def run_gates(root: Path, build_dir: Path, work: Path, which: str = "all",
              progress: Callable = lambda m: None) -> list:
    """which: "cpu" (the gates CI runs), "gpu" (the grading gates) or "all"."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    gates = []
    if which in ("cpu", "all"):
        progress("starter")
        gates.append(_starter_gate(root))
        progress("student bundle (build from scratch)")
        gates.append(_student_gate(root, work))
        progress("autograder bundle")
        gates.append(_autograder_gate(root, work))
    if which in ("gpu", "all"):
        gates += _grading_gates(root, build_dir, work, progress)
        gates += _previous_part_gates(root, build_dir, work, progress)
    return gates


def format_gates(gates: list) -> str:
    width = max(len(g.name) for g in gates)
    mark = {"passed": "passed ", "failed": "FAILED ", "not_run": "not run"}
    lines = []
    for g in gates:
        first, *rest = g.detail.splitlines() or [""]
        lines.append(f"{g.name.ljust(width)}  {mark[g.status]}  {first}")
        lines += [" " * (width + 11) + line for line in rest[:20]]
    return "\n".join(lines)
