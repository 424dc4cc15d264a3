"""Release gates: the checks that make the starter, the handout, the bundles
and the autograder agree with each other before anything is handed out.

starter, student-bundle and autograder-bundle need no GPU; solutions,
starter-untouched and <prev>-as-<next> grade on one (each gate's function
says what it checks). Without a GPU the GPU gates are reported as not run,
never as passed, and gates_outcome says what that makes of the exit status.
"""

from __future__ import annotations

import re
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

from ..outputs.gradescope import results_json
from ..spec.assignment import load_assignment
from ..system import process
from ..system.paths import ASSIGNMENT_FILE, missing_tools, tool_path
from .compiled_references import cmake_progress
from .dist import DistError, autograder_bundle, student_bundle
from .starter import StarterError, starter_files

BUILD_TIME_LIMIT = 1800
# The exit status of `tilelab gates` when a gate failed, and when GPU gates
# were asked for alone and this machine has no CUDA device: the harness's
# ExitCode::kNoDevice (include/tilelab/exit_codes.h).
EXIT_FAILED = 1
EXIT_NO_DEVICE = 5


@dataclass
class Gate:
    name: str
    status: str  # "passed", "failed", "not_run"
    detail: str


def _starter_gate(root: Path) -> Gate:
    """starter/ is exactly what generation from solutions/ gives."""
    try:
        files = starter_files(load_assignment(root / ASSIGNMENT_FILE), root / "solutions", root / "starter")
    except StarterError as e:
        return Gate("starter", "failed", str(e))
    stale = [str(f.path.relative_to(root)) for f in files if not f.up_to_date]
    if stale:
        return Gate("starter", "failed", "out of date (run `tilelab starter`): " + ", ".join(stale))
    return Gate("starter", "passed", f"{len(files)} files match generation from solutions/")


def _student_gate(root: Path, work: Path, progress: Callable) -> Gate:
    """The student tarball holds nothing it must not, unpacks into an empty
    directory and builds there."""
    from .handout import write_handouts

    handout_dir = work / "handout"
    progress("student bundle: the handout")
    write_handouts(load_assignment(root / ASSIGNMENT_FILE), root, handout_dir, variant="student")
    try:
        progress("student bundle: packing it and unpacking it into an empty directory")
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
    # The build from scratch is most of the gates' time without a GPU
    # (measured: docs/measurements-archive.md, "Gates, bundles and
    # handouts"): its own progress, condensed, shows it moving.
    progress("student bundle: configuring (CMake)")
    configured = process.run(["cmake", "-S", tree, "-B", build, f"-DPython3_EXECUTABLE={sys.executable}"],
                             BUILD_TIME_LIMIT)
    if configured.exit_code != 0:
        return Gate("student-bundle", "failed", "configure failed:\n" + configured.output[-3000:])
    built = process.run(["cmake", "--build", build, "-j"], BUILD_TIME_LIMIT,
                        on_line=cmake_progress(progress, "student bundle"))
    if built.exit_code != 0:
        return Gate("student-bundle", "failed", "build failed:\n" + built.output[-3000:])
    missing = missing_tools(build) + ([] if (build / "starter" / "naive").exists() else ["starter/naive"])
    if missing:
        return Gate("student-bundle", "failed", f"built, but without {', '.join(missing)}")
    size = tarball.stat().st_size / 1e6
    return Gate("student-bundle", "passed",
                f"{tarball.name} ({size:.1f} MB) unpacked into an empty directory and built in "
                f"{configured.seconds + built.seconds:.0f} s")


def _autograder_gate(root: Path, work: Path, progress: Callable) -> Gate:
    """The autograder zip has its entry points and key, and no solution source."""
    try:
        z = autograder_bundle(root, work / "autograder.zip", progress=lambda m: progress(f"autograder bundle: {m}"))
    except DistError as e:
        return Gate("autograder-bundle", "failed", str(e))
    return Gate("autograder-bundle", "passed", f"{z.name} ({z.stat().st_size / 1e6:.1f} MB): entry points, "
                                               "key and hidden cases in, no solution source")


# A working starter is a place to start from: it may earn this much of its speed points, no more.
WORKING_STARTER_SPEED_LIMIT = 0.25


def _scores(result) -> list:
    """(item, score, max) for each part and each automatically graded question."""
    items = [(f"{p.id}", p.score, p.max_score) for p in result.parts]
    if result.answers is not None:
        items += [(f"question {q.id}", q.score, q.max_score) for q in result.answers.questions if q.max_score > 0]
    return items


def _starter_problems(result, assignment) -> list:
    """What the untouched starter earned that it must not."""
    problems = []
    for part in result.parts:
        if assignment.part(part.id).starter == "working":
            if part.correctness_score < part.correctness_max - 1e-9 or part.failed_stage:
                problems.append(f"{part.id} (a working starter) did not pass: "
                                f"{part.failed_stage or 'correctness'} {part.correctness_score:g}/{part.correctness_max:g}")
            elif part.speed_max > 0 and part.speed_score > WORKING_STARTER_SPEED_LIMIT * part.speed_max:
                problems.append(f"{part.id} (a working starter) earned {part.speed_score:g}/{part.speed_max:g} "
                                "speed points")
        elif part.score > 0:
            problems.append(f"{part.id} {part.score:g}")
    if result.answers is not None:
        problems += [f"question {q.id} {q.score:g}" for q in result.answers.questions if q.score > 0]
    return problems


_GRADING_GATES = ("solutions", "starter-untouched")


def _grading_gates(root: Path, build_dir: Path, work: Path, progress: Callable) -> list:
    """solutions: the references and the key get full marks on every graded
    item, extra credit included. starter-untouched: the untouched starter
    gets zero on every part it leaves as a TODO; a working starter (the
    challenge) passes correctness and earns at most
    WORKING_STARTER_SPEED_LIMIT of its speed points."""
    from ..grading.model import NO_GPU
    from ..grading.options import GradeOptions
    from ..operations.grading_run import NOTHING, run_grading

    assignment = load_assignment(root / ASSIGNMENT_FILE)
    gates = []
    for name, submission in zip(_GRADING_GATES, (root / "solutions", root / "starter")):
        progress(f"{name}: grading {submission.name}/")
        result = run_grading(submission, GradeOptions.for_tree(root, build_dir, work / name), NOTHING,
                             progress=lambda m, name=name: progress(f"{name}: {m}")).result
        if result.gpu is None:
            gates.append(Gate(name, "not_run", NO_GPU))
            continue
        # results.json must be writable from it, whatever the gate decides.
        results_json(result, assignment)
        items = _scores(result)
        if name == "solutions":
            short = [f"{item} {score:g}/{top:g}" for item, score, top in items if score < top - 1e-9]
            ok = not short
            detail = f"{len(items)} graded items, all full marks" if ok else "not full: " + "; ".join(short)
        else:
            problems = _starter_problems(result, assignment)
            ok = not problems
            working = [p for p in result.parts if assignment.part(p.id).starter == "working"]
            detail = (f"{len(items)} graded items: zero on every TODO part and question"
                      + "".join(f"; {p.id} (working starter) passes, {p.speed_score:g}/{p.speed_max:g} speed points"
                                + (f" at {p.speed.gflops:,.0f} GFLOP/s" if p.speed else "") for p in working)
                      if ok else "scored: " + "; ".join(problems))
        gates.append(Gate(name, "passed" if ok else "failed", detail))
    return gates


def _previous_part_pairs(assignment) -> list:
    """(earlier part, part) for each part that has an earlier part of the
    same launcher signature: the nearest such one."""
    pairs = []
    for i, part in enumerate(assignment.parts):
        before = next((b for b in reversed(assignment.parts[:i]) if b.signature == part.signature), None)
        if before is not None:
            pairs.append((before, part))
    return pairs


def _previous_part_gates(root: Path, build_dir: Path, work: Path, progress: Callable) -> list:
    """The reference of each part handed in as the next part (where both
    have the same launcher signature), graded on that part alone: it must
    stay below full speed credit, so the targets tell the technique a part
    teaches from the one before it, on whatever GPU runs the gates."""
    from ..grading.model import NO_GPU
    from ..grading.options import GradeOptions
    from ..operations.grading_run import NOTHING, run_grading

    assignment = load_assignment(root / ASSIGNMENT_FILE)
    gates = []
    for before, part in _previous_part_pairs(assignment):
        name = f"{before.id}-as-{part.id}"
        progress(f"{name}: grading {before.file} handed in as {part.file}")
        hand_in = work / name
        hand_in.mkdir(parents=True)
        source = (root / "solutions" / before.file).read_text()
        (hand_in / part.file).write_text(re.sub(rf"\b{before.launcher}\b", part.launcher, source))
        options = GradeOptions.for_tree(root, build_dir, work / f"{name}-results", parts=(part.id,), sanitizers=False)
        result = run_grading(hand_in, options, NOTHING, progress=lambda m, name=name: progress(f"{name}: {m}")).result
        if result.gpu is None:
            gates.append(Gate(name, "not_run", NO_GPU))
            continue
        (graded,) = result.parts
        speed = graded.speed
        if speed is None:
            stage = graded.failed_stage or "speed"
            gates.append(Gate(name, "passed", f"not timed ({graded.stages[stage].summary}): no speed credit"))
            continue
        if speed.of_cublas is not None:
            versus = f"{100 * speed.of_cublas:.0f}% of cuBLAS"
        else:
            versus = f"{100 * speed.gflops / speed.reference_gflops:.0f}% of {part.id}'s reference"
        detail = f"{speed.gflops:,.0f} GFLOP/s = {versus}: {100 * speed.fraction:.0f}% of the speed points"
        gates.append(Gate(name, "passed" if speed.fraction < 1 else "failed",
                          detail if speed.fraction < 1 else "full speed credit: " + detail))
    return gates


def _no_device(build_dir: Path) -> bool:
    """Whether this machine has no CUDA device, as the grader's own probe
    finds. Asked before any GPU gate starts: each gate's grading would build
    every part it grades only to run none of them. Where the probe cannot
    tell (no probe built, or it fails otherwise), the gradings go ahead and
    say why themselves."""
    from ..grading import gpu_ceilings

    tool = tool_path(build_dir, gpu_ceilings.TOOL_NAME)
    if not tool.is_file():
        return False
    try:
        gpu_ceilings.device_info(tool, 60)
    except gpu_ceilings.NoDevice:
        return True
    except gpu_ceilings.RooflineError:
        return False
    return False


def run_gates(root: Path, build_dir: Path, work: Path, which: str = "all",
              progress: Callable = lambda m: None) -> list:
    """which: "cpu" (the gates CI runs), "gpu" (the grading gates) or "all"."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    gates = []
    if which in ("cpu", "all"):
        progress("starter: generated from solutions/ and compared")
        gates.append(_starter_gate(root))
        progress("student bundle: built from scratch")
        gates.append(_student_gate(root, work, progress))
        progress("autograder bundle: the references compiled, the zip packed and checked")
        gates.append(_autograder_gate(root, work, progress))
    if which in ("gpu", "all"):
        progress("GPU gates: looking for a CUDA device")
        if _no_device(build_dir):
            from ..grading.model import NO_GPU

            names = list(_GRADING_GATES) + [f"{b.id}-as-{p.id}" for b, p in
                                            _previous_part_pairs(load_assignment(root / ASSIGNMENT_FILE))]
            return gates + [Gate(name, "not_run", NO_GPU) for name in names]
        gates += _grading_gates(root, build_dir, work, progress)
        gates += _previous_part_gates(root, build_dir, work, progress)
    return gates


class Outcome(NamedTuple):
    exit_code: int  # 0, EXIT_FAILED or EXIT_NO_DEVICE
    summary: str  # the command's closing line


def gates_outcome(which: str, gates: list) -> Outcome:
    """What `tilelab gates --which WHICH` ends with. A failed gate fails the
    command. A gate that could not run (a GPU gate without a CUDA device)
    fails it where GPU gates were asked for alone (--which gpu: a GPU job
    must not pass without them); with --which all the CPU gates decide, as
    on a machine without a GPU they are all it can run, and the closing line
    says plainly that only they ran."""
    failed = [g.name for g in gates if g.status == "failed"]
    not_run = [g.name for g in gates if g.status == "not_run"]
    waiting = f"{len(not_run)} GPU gates need a CUDA device ({', '.join(not_run)})"
    if failed:
        return Outcome(EXIT_FAILED, f"{len(failed)} of {len(gates)} gates FAILED: {', '.join(failed)}"
                                    + (f"; {waiting}" if not_run else ""))
    if not_run and which == "gpu":
        return Outcome(EXIT_NO_DEVICE, f"the GPU gates did not run: {waiting}")
    if not_run:
        return Outcome(0, f"only the CPU gates ran, and passed: {waiting}")
    return Outcome(0, f"all {len(gates)} gates passed")


def format_gates(gates: list) -> str:
    width = max(len(g.name) for g in gates)
    mark = {"passed": "passed ", "failed": "FAILED ", "not_run": "not run"}
    lines = []
    for g in gates:
        first, *rest = g.detail.splitlines() or [""]
        lines.append(f"{g.name.ljust(width)}  {mark[g.status]}  {first}")
        lines += [" " * (width + 11) + line for line in rest[:20]]
    return "\n".join(lines)
