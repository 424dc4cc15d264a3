"""Why a part's stages and cases did not run: one cause per part, in words
every output shares (part_view.py, gradescope.py, prairielearn.py).

A part not handed in, or whose GPU stages could not run here, has up to six
stages and thirty cases that did not run for one reason. The outputs say it
once per part ("tiled.cu is missing", "11 public cases: not run: no CUDA
device on this machine"): a page of identical "not run" rows hides what to do.
"""

from __future__ import annotations

from typing import Optional

from ..grading.model import STAGE_TITLES, STAGES, GradeResult, PartResult, Stage
from ..grading.static_checks import missing_summary

NOT_RUN = "not run: "


def bare(summary: str) -> str:
    """A not-run stage's or case's reason without its "not run: "."""
    return summary[len(NOT_RUN):] if summary.lower().startswith(NOT_RUN) else summary


def missing(part: PartResult) -> bool:
    """The part's file was not handed in (static_checks.check_source's words)."""
    static = part.stages.get("static")
    return static is not None and static.status == "failed" and static.summary == missing_summary(part.file)


def stage_reason(part: PartResult, stage: Stage) -> str:
    """A not-run stage's summary, naming the missing file where that is why:
    "not run: the static checks failed" says less than "tiled.cu is missing"."""
    if stage.status == "not_run" and missing(part):
        return f"{NOT_RUN}{part.file} is missing"
    return stage.summary


def cases_cause(part: PartResult, cases: list) -> str:
    """Why none of `cases` ran, without "not run: ", when the part's
    correctness stage as a whole did not run (its summary is then every
    case's reason); "" when a case ran or the stage did (cases stopped one
    by one, by a crash or a timeout, keep a row each with its own reason)."""
    if any(c.ran for c in cases):
        return ""
    if missing(part):
        return f"{part.file} is missing"
    correctness = part.stages.get("correctness")
    if correctness is None or correctness.status != "not_run":
        return ""
    return bare(correctness.summary)


def count_words(n: int, set_name: str) -> str:
    return f"{n} {set_name} case{'' if n == 1 else 's'}"


def cases_line(part: PartResult, cases: list, set_name: str, total: Optional[int] = None) -> str:
    """"11 public cases: not run: no CUDA device on this machine", or "" when
    the cases need rows of their own (some ran)."""
    total = len(cases) if total is None else max(total, len(cases))
    cause = cases_cause(part, cases) if total else ""
    return f"{count_words(total, set_name)}: {NOT_RUN}{cause}" if cause else ""


def missing_line(part: PartResult, public: int, hidden: int) -> str:
    """Everything of a part whose file is missing, in one line."""
    counts = [count_words(n, s) for n, s in ((public, "public"), (hidden, "hidden")) if n]
    return f"{NOT_RUN}{part.file} is missing: its build, " + ", ".join(counts) + ", launch checks, sanitizers and speed"


def _one_reason(stages: list) -> str:
    """The summary the not-run stages share, when there are several (one
    cause that stopped them all), or "". A stage skipped alone is named by
    its title: its summary need not say which stage it is."""
    not_run = [s.summary for s in stages if s.status == "not_run"]
    return not_run[0] if len(not_run) > 1 and len(set(not_run)) == 1 else ""


def part_status(part: PartResult, stages: list) -> str:
    """The part's first problem in words (the summary tables' last column):
    a missing file by name; else the first failed stage; else, when every
    stage that did not run did so for one reason, that reason."""
    if missing(part):
        return f"{part.file} is missing"
    for stage in stages:
        title = STAGE_TITLES.get(stage.name, stage.name)
        if stage.status == "failed":
            return f"failed: {title}"
        if stage.status not in ("passed", "not_run"):
            return f"grader error: {title}"
    not_run = [s for s in stages if s.status == "not_run"]
    if not not_run:
        return "all passed"
    reason = _one_reason(not_run)
    if reason:
        return NOT_RUN + bare(reason)
    titles = [STAGE_TITLES.get(s.name, s.name) for s in not_run]
    if len(titles) > 2:
        return f"not run: {titles[0]} and {len(titles) - 1} later stages"
    return "not run: " + " and ".join(titles)


def not_run_headline(part: PartResult) -> str:
    """"tiled.cu is missing" or "not run: no CUDA device on this machine"
    when one cause stopped everything after the part's last passed stage;
    "" otherwise (a failure or several causes: the stages say)."""
    if missing(part):
        return f"{part.file} is missing"
    stages = [part.stages[n] for n in STAGES if n in part.stages]
    if any(s.status not in ("passed", "not_run") for s in stages):
        return ""
    reason = _one_reason(stages)
    return NOT_RUN + bare(reason) if reason else ""


def built(part: PartResult) -> bool:
    return part.stages["build"].status == "passed"


def gpu_withheld(result: GradeResult) -> bool:
    """A grading whose score is not the student's: graded (not checked) on
    a machine without a GPU, with a part built that a GPU would have run.
    When nothing built, nothing needed a GPU and the score stands."""
    return result.mode == "grade" and result.gpu is None and any(built(p) for p in result.parts)


# How far a part got before any GPU would run it: the gradebook's state
# columns and the closing lines of `tilelab grade` and `tilelab batch`. A
# score alone hides a part that did not compile among parts that ran.
BUILT = "built"
NOT_WRITTEN = "not written"  # it built, but the starter's TODO stubs are still in it
BUILD_FAILED = "failed to build"
MISSING = "missing"
STATIC_FAILED = "failed the static checks"
GRADER_ERROR = "grader error"  # the grader could not check or build it (not the student's fault)
NOT_BUILT = "not built"  # any other reason the build did not run
PART_STATES = (BUILT, NOT_WRITTEN, BUILD_FAILED, MISSING, STATIC_FAILED, GRADER_ERROR, NOT_BUILT)


def part_state(part: PartResult) -> str:
    """One of PART_STATES. A failure comes before the stubs left: a part that
    does not compile is that first, whatever it holds."""
    static, build = part.stages["static"], part.stages["build"]
    if missing(part):
        return MISSING
    if static.status == "failed":
        return STATIC_FAILED
    if build.status == "failed":
        return BUILD_FAILED
    if "error" in (static.status, build.status):
        return GRADER_ERROR
    if part.not_written:
        return NOT_WRITTEN
    return BUILT if build.status == "passed" else NOT_BUILT


def state_line(part: PartResult) -> str:
    """"tiled: failed to build (tiled.cu does not compile)" for a part that
    did not build or is not written yet; "" for one that built."""
    state = part_state(part)
    if state == BUILT:
        return ""
    if state == MISSING:
        return f"{part.id}: {part.file} is missing"
    if state == NOT_WRITTEN:
        return f"{part.id}: not written (the starter's stubs are left: {', '.join(part.not_written)})"
    stage = part.stages["static" if part.stages["static"].status in ("failed", "error") else "build"]
    return f"{part.id}: {state}" + (f" ({bare(stage.summary)})" if stage.summary else "")
