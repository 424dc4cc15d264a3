"""Why a part lost points, as a class report counts it: a few causes a TA
can teach to, read from the grading's stages and cases.

A part that lost points gets every cause that applies (a kernel can race
and miss its boundary guard), so the shares of a part's causes need not add
up to the share that lost points. The first causes are the part's state
before a GPU ran it (outputs/causes.py: missing, did not compile...); the
others are read from what the GPU stages found. The case patterns are those
grading/diagnose.py turns into hints for the student; here they are counted.
"""

from __future__ import annotations

from ..grading.diagnose import STOPPED_STATUSES, off_tile_width, only_distinct_dims_fail
from ..grading.model import NO_GPU, WORK_ELSEWHERE, PartResult
from ..outputs import causes as states

# Every cause, in the order a report lists them: (id, words).
CAUSES = (
    ("missing", "file not handed in"),
    ("not_written", "not written (the starter's stubs left)"),
    ("static", "refused by the static checks (a library GEMM, main(), ...)"),
    ("build", "does not compile"),
    ("no_gpu", "not run: graded without a GPU"),
    ("crash", "crash, hang or time-out"),
    ("boundary", "missing boundary guard (only sizes off the tile fail, or P not covered)"),
    ("stride", "wrong stride (only cases with j, k and l all different fail)"),
    ("wrong", "wrong results"),
    ("host_work", "work outside its own kernels (host work, copies, a library)"),
    ("launch", "launch rules broken (shared memory, the limits it was given)"),
    ("memory", "out-of-bounds access (memcheck)"),
    ("race", "race on shared memory (a missing barrier; racecheck)"),
    ("timed_wrong", "wrong results in the timed calls"),
    ("too_slow", "too slow (not every speed point)"),
    ("not_timed", "correct, but not timed (no speed targets here)"),
    ("not_run", "its GPU stages did not run"),
    ("grader_error", "grader error (not the student's fault)"),
)
CAUSE_WORDS = dict(CAUSES)

_BEFORE_GPU = {states.MISSING: "missing", states.NOT_WRITTEN: "not_written", states.STATIC_FAILED: "static",
               states.BUILD_FAILED: "build", states.GRADER_ERROR: "grader_error", states.NOT_BUILT: "grader_error"}


def lost_points(part: PartResult) -> bool:
    return part.score < part.max_score - 1e-9


def _boundary(failing: list, passing: list) -> bool:
    """Only sizes off a tile fail while sizes on it pass, or elements of P
    were left unwritten or written outside it: the guards or the grid's
    rounding."""
    return (off_tile_width(failing, passing) is not None or any(c.unwritten for c in failing)
            or any("outside P" in r for c in failing for r in c.reasons))


def _case_causes(part: PartResult) -> list:
    found = []
    failed = [c for c in part.cases if not c.passed and c.status != "not_run"]
    if any(c.status in STOPPED_STATUSES for c in failed):
        found.append("crash")
    if any(c.status == "not_implemented" for c in failed):
        found.append("not_written")
    numeric = [c for c in failed if c.status == "ok"]
    if numeric:
        passing = [c for c in part.cases if c.passed]
        rules = (("boundary", _boundary), ("stride", only_distinct_dims_fail))
        shaped = [name for name, rule in rules if rule(numeric, passing)]
        found += shaped or ["wrong"]
    return found


def causes_of(part: PartResult) -> list:
    """The ids of CAUSES that cost `part` points, in CAUSES order; [] when it lost none."""
    if not lost_points(part):
        return []
    before = _BEFORE_GPU.get(states.part_state(part))
    if before:
        return [before]
    stage = {name: s.status for name, s in part.stages.items()}
    found = _case_causes(part)
    if stage.get("correctness") == "failed" and not found:
        found.append("wrong")
    if stage.get("launch") == "failed":
        speed = part.stages.get("speed")
        found.append("host_work" if speed is not None and speed.summary == WORK_ELSEWHERE else "launch")
    for name, cause in (("memcheck", "memory"), ("racecheck", "race"), ("speed", "timed_wrong")):
        if stage.get(name) == "failed":
            found.append(cause)
    if "error" in stage.values():
        found.append("grader_error")
    if not found:
        found.append(_unfinished(part, stage))
    return [cause for cause, _ in CAUSES if cause in found]


def _unfinished(part: PartResult, stage: dict) -> str:
    """Nothing failed, and points were lost: it was too slow, or a stage did not run."""
    if stage.get("speed") == "passed" and part.speed is not None:
        return "too_slow"
    if stage.get("correctness") == "not_run":
        return "no_gpu" if part.stages["correctness"].summary == NO_GPU else "not_run"
    return "not_timed"
