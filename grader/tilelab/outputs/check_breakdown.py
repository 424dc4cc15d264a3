"""Where a check's time went, for `tilelab check --verbose`.

From the grading's phase clock (GradeResult.spans: when each phase ran, from
the grading's start; phases overlap) and each part's stage seconds: the
compile and link of each part, each harness run, each compute-sanitizer run
(its start-up included), and the speed stage's timing run: its start,
first call and timed calls, and its counter profile (CUPTI's set-up
apart). The command adds its own figures: its start-up before the
grading, the reports and grade.json it wrote.
"""

from __future__ import annotations

from typing import Optional

from ..grading.model import GradeResult
from ..grading.sanitizer import CHECKED_TOGETHER

# The command's own figures (check_run.py), in the order they happen.
COMMAND_FIGURES = (("startup", "start-up (Python and the grader's imports)"),
                   ("key", "the check's key (its files, build and options read)"), ("grading", "the grading"),
                   ("reports", "report.md and report.html"), ("grade_json", "grade.json"))
# What a part's speed stage holds besides its counter profile.
_TIMING_RUN = "its run's start, first call and timed calls"
_MIN_SHOWN = 0.005  # seconds: a phase shorter than this ran, but is not worth a line of its own


def _s(seconds: float) -> str:
    return f"{seconds:.2f} s"


def _build(result: GradeResult) -> list:
    said = []
    for p in result.parts:
        st = p.stages["build"]
        if st.status == "passed" and "not compiled again" in st.summary:
            said.append(f"{p.id}: not compiled (unchanged since it was built)")
        elif st.status in ("passed", "failed"):
            said.append(f"{p.id} {_s(st.seconds)} (nvcc compile, then link)" if st.status == "passed"
                        else f"{p.id} {_s(st.seconds)} until it failed")
    return said


def _correctness(result: GradeResult) -> list:
    return [f"{p.id} {_s(p.stages['correctness'].seconds)} (its harness runs of the cases)"
            for p in result.parts if p.stages["correctness"].status in ("passed", "failed")]


def _sanitizers(result: GradeResult) -> list:
    said = []
    for p in result.parts:
        for tool in ("memcheck", "racecheck"):
            st = p.stages[tool]
            if st.status not in ("passed", "failed"):
                continue
            if st.details == CHECKED_TOGETHER:
                said.append(f"{p.id} {tool}: one run of the parts together, {_s(st.seconds)}")
            elif st.seconds:
                said.append(f"{p.id} {tool} {_s(st.seconds)} (compute-sanitizer's start-up included)")
            else:
                said.append(f"{p.id} {tool}: no run ({st.summary})")
    return said


def _speed(result: GradeResult) -> list:
    said = []
    for p in result.parts:
        st = p.stages["speed"]
        if st.status not in ("passed", "failed") or not st.seconds:
            continue
        t = p.traffic
        if t is not None and t.seconds:
            setup = f" (CUPTI's set-up {_s(t.setup_seconds)} of it)" if t.setup_seconds else ""
            if t.together > 1:
                setup = f", its share of one profile of {t.together} parts{setup}"
            # The stage's seconds are its timing run's: the launcher's start and first call are in them too.
            said.append(f"{p.id} {_s(st.seconds)}: {_TIMING_RUN} {_s(max(0.0, st.seconds - t.seconds))}, "
                        f"counter profile {_s(t.seconds)}{setup}")
        else:
            said.append(f"{p.id} {_s(st.seconds)} ({_TIMING_RUN}; no counter profile)")
    return said


_DETAILS = {"build": _build, "correctness": _correctness, "sanitizers": _sanitizers, "speed": _speed}


def breakdown_lines(result: GradeResult, command: Optional[dict] = None) -> list:
    """The breakdown as lines of text: a row per phase in the order they
    started (from -> to, seconds, what it was spent on), then the command's
    own figures (`command`: COMMAND_FIGURES name -> seconds, and "total")."""
    lines = ["where the time went (seconds from the grading's start; phases overlap):",
             f"  {'phase':<28}{'from':>6} -> {'to':<6}{'s':>7}  what"]
    rows = sorted(((phase, span[0], span[1]) for phase, span in result.spans.items()), key=lambda r: (r[1], r[2]))
    for phase, start, end in rows:
        # A wait's seconds are its waits summed (PhaseClock.waited), not the span from its first to its last.
        seconds = result.timings.get(phase, end - start)
        if seconds < _MIN_SHOWN and phase not in _DETAILS:
            continue
        details = _DETAILS.get(phase, lambda r: [])(result)
        first = details[0] if details else ""
        lines.append(f"  {phase:<28}{start:>6.2f} -> {end:<6.2f}{seconds:>7.2f}  {first}".rstrip())
        lines += [f"  {'':<54}{more}" for more in details[1:]]
    if command:
        figures = [f"{words} {_s(command[name])}" for name, words in COMMAND_FIGURES if command.get(name) is not None]
        if command.get("reports") is None:
            figures.append("no reports (--report writes them)")
        total = command.get("total")
        lines.append(("the command: " + (f"{_s(total)}: " if total is not None else "")) + ", ".join(figures))
    return lines
