"""The view of one part: its stages, cases, first wrong elements, speed
and launches, as rows of already-worded text for the report templates.

Student views never show a hidden case: hidden cases appear only as a count,
and a hidden case's name or size that slipped into a stage's text, a hint or
a speed flag is replaced by HIDDEN_PLACEHOLDER (hidden_redactor). Grader
errors reach students without the grader's own output. Staff views show
everything, launch records with their grids included.
"""

from __future__ import annotations

import math
import re
from typing import Callable

from ..grading.model import STAGE_TITLES, STAGES, CaseResult, GradeResult, PartResult, Stage
from ..text.markdown import cap_lines
from ..text.numbers import fmt_bytes, fmt_gflops, fmt_ms, fmt_percent, fmt_points
from . import causes
from .speed_words import speed_rows, speed_verdict, timed_sizes
from .traffic_view import traffic_view

# Tables of first wrong elements per case set: the first failing cases say
# what is wrong; ten more tables of the same mistake bury the hints.
ERROR_TABLE_CAP = 3

STATUS_WORDS = {"passed": "passed", "failed": "failed", "not_run": "not run", "error": "grader error"}
# Markdown has no colour, so each status gets its own symbol next to its word;
# "not run" must never look like a pass.
STATUS_MARKERS = {"passed": "✅", "failed": "❌", "not_run": "⚪", "error": "⚠️"}

HIDDEN_PLACEHOLDER = "(a hidden case)"


def _element_value(x) -> str:
    """An element of P: enough digits to see a last-bit difference."""
    try:
        value = float(x)
    except (TypeError, ValueError):
        return str(x)  # "nan", "unwritten" and such stay words
    if not math.isfinite(value):
        return str(x)
    return f"{value:.9g}"


def _difference(expected: float, got: str) -> str:
    try:
        value = float(got)
    except (TypeError, ValueError):
        return "-"
    if not (math.isfinite(value) and math.isfinite(expected)):
        return "-"
    return f"{abs(value - expected):.3g}"


def _size(case: CaseResult) -> str:
    return f"{case.j} × {case.k} × {case.l}"


def _dim3(value) -> str:
    """A CUDA grid or block as 'x × y × z' (the records hold a list of three)."""
    if isinstance(value, dict):
        value = [value.get(axis, 1) for axis in ("x", "y", "z")]
    if isinstance(value, (list, tuple)):
        return " × ".join(str(v) for v in value)
    return str(value)


# --- keeping hidden cases hidden -------------------------------------------------


def hidden_redactor(part: PartResult) -> Callable[[str], str]:
    """Replaces, in text meant for students, the names and sizes of a part's
    hidden cases. Stage summaries and details are written by other code and
    may mention the case that failed; this is the last place to catch it.
    Sizes that a public case shares stay: they are no secret."""
    public = [c for c in part.cases if c.set != "hidden"]
    hidden = [c for c in part.cases if c.set == "hidden"]
    public_names = {c.name for c in public}
    public_sizes = {(c.j, c.k, c.l) for c in public}
    tokens = set()
    for case in hidden:
        if case.name not in public_names:
            tokens.add(case.name)
        if (case.j, case.k, case.l) not in public_sizes:
            for sep in ("x", " x ", "×", " × ", "*", " * "):
                tokens.add(sep.join(str(n) for n in (case.j, case.k, case.l)))
    if not tokens:
        return lambda text: text
    alternatives = "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True))
    # Case names are made of letters, digits and '-'; a token inside a longer
    # word (w17 inside w170) is another name, not this one.
    pattern = re.compile(rf"(?<![A-Za-z0-9_-])(?:{alternatives})(?![A-Za-z0-9_-])")
    return lambda text: pattern.sub(HIDDEN_PLACEHOLDER, text)

# --- the view: what the templates show -------------------------------------------


def _stage_view(stage: Stage, staff: bool, redact: Callable[[str], str]) -> dict:
    title = STAGE_TITLES.get(stage.name, stage.name)
    status = stage.status if stage.status in STATUS_WORDS else "error"
    summary = redact(stage.summary or "")
    # Students see the details of what their code did wrong; a grader error's
    # details are the grader's own output, useful to staff only.
    show_details = bool(stage.details) and (staff or status == "failed")
    lines, cut = cap_lines(redact(stage.details)) if show_details else ([], 0)
    if status == "error" and not staff:
        blame = "This is a problem in the grader, not in your code: tell the course staff."
        summary = f"{summary} {blame}" if summary else blame
    # One line for places that show no status column ("not run: the build failed").
    headline = summary if summary.lower().startswith(STATUS_WORDS[status]) else f"{STATUS_WORDS[status]}: {summary}"
    return {
        "name": stage.name,
        "title": title,
        "headline": headline.rstrip(": "),
        "status": status,
        "status_word": STATUS_WORDS[status],
        "marker": STATUS_MARKERS[status],
        "summary": summary,
        "detail_lines": lines,
        "detail_cut": cut,
        "detail_total": len(lines) + cut,
        "hints": [redact(str(h)) for h in stage.hints],
        "seconds": f"{stage.seconds:.1f} s",
    }


def _stages_in_order(part: PartResult) -> list:
    """The part's stages in running order; a stage with no record reads as not run."""
    names = list(STAGES) + [n for n in part.stages if n not in STAGES]
    stages = []
    for name in names:
        stage = part.stages.get(name)
        if stage is None:
            stage = Stage(name=name, status="not_run", summary="no record of this stage")
        stages.append(stage)
    return stages


def _case_reason(case: CaseResult) -> str:
    if not case.ran:
        return "; ".join(case.reasons) or "did not run"
    if case.reasons:
        return "; ".join(case.reasons)
    if case.passed:
        return ""
    counts = [(case.wrong, "wrong"), (case.nan, "NaN"), (case.unwritten, "unwritten")]
    return ", ".join(f"{n} {word}" for n, word in counts if n) or "failed"


def _case_view(case: CaseResult) -> dict:
    if not case.ran:
        result = "not run"
    else:
        result = "passed" if case.passed else "failed"
    return {
        "name": case.name,
        "size": _size(case),
        "result": result,
        "marker": {"passed": "✅", "failed": "❌", "not run": "⚪"}[result],
        "reason": _case_reason(case),
        "exact": case.exact,
    }


def _first_errors_view(case: CaseResult) -> dict:
    rows = []
    for e in case.first_errors:
        rows.append({
            "row": e.row,
            "col": e.col,
            "expected": _element_value(e.expected),
            "got": _element_value(e.got),
            "difference": _difference(e.expected, e.got),
            "allowed": "exact (no error allowed)" if case.exact else f"{e.allowed:.3g}",
        })
    bad = case.wrong + case.nan + case.unwritten
    return {
        "case": case.name,
        "size": _size(case),
        "exact": case.exact,
        "rows": rows,
        "shown": len(rows),
        "bad_total": max(bad, len(rows)),
    }


def _error_tables(cases: list) -> tuple:
    """(tables, note): first-wrong-element tables of the first
    ERROR_TABLE_CAP failing cases, keeping the first failing exact
    (small-integer) case among them, whose mismatches are an index or a
    bound, never rounding; the note says how many were left out."""
    failing = [c for c in cases if not c.passed and c.first_errors]
    shown = failing[:ERROR_TABLE_CAP]
    exact = next((c for c in failing if c.exact), None)
    if exact is not None and exact not in shown:
        shown[-1] = exact
    left_out = len(failing) - len(shown)
    note = (f"The wrong elements of {left_out} more failing case{'s are' if left_out > 1 else ' is'} left out "
            "here: these tables show what to fix first." if left_out else "")
    return [_first_errors_view(c) for c in shown], note


def _cases_view(cases: list, total: int = 0, not_run_line: str = "") -> dict:
    """Rows and counts of one case set. `total` may exceed the rows: cases
    that never ran (no GPU, a crash before them) may have no record.
    `not_run_line` (causes.cases_line) stands for rows that all say one thing."""
    total = max(total, len(cases))
    ran = [c for c in cases if c.ran]
    passed = sum(1 for c in ran if c.passed)
    not_run = total - len(ran)
    did_not_run = f", {not_run} did not run" if not_run else ""
    if not_run == total:
        counts = short_counts = "not run"
    else:
        counts = f"{passed} of {total} passed{did_not_run}"
        short_counts = f"{passed} passed{did_not_run}"  # after "N hidden cases: "
    errors, errors_note = _error_tables(cases)
    return {
        "rows": [] if not_run_line else [_case_view(c) for c in cases],
        "not_run_line": not_run_line,
        "errors": errors,
        "errors_note": errors_note,
        "total": total,
        "passed": passed,
        "failed": len(ran) - passed,
        "not_run": not_run,
        "counts": counts,
        "short_counts": short_counts,
        # In the summary table: "2/4", or "not run".
        "fraction": "not run" if not_run == total else f"{passed}/{total}",
    }
def _launch_rows(launches: list) -> list:
    rows = []
    for launch in launches:
        rows.append({
            "name": str(launch.get("name", "?")),
            "grid": _dim3(launch.get("grid", "?")),
            "block": _dim3(launch.get("block", "?")),
            "static_shared": fmt_bytes(launch.get("static_shared_bytes", 0)),
            "dynamic_shared": fmt_bytes(launch.get("dynamic_shared_bytes", 0)),
            "registers": str(launch.get("registers_per_thread", "?")),
            "duration": f"{fmt_ms(float(launch['duration_ms']))} ms" if launch.get("duration_ms") is not None else "-",
        })
    return rows


def _launch_line(launches: list) -> str:
    """What a student sees of the launch records. The grid is left out: the
    records come from one correctness call, and its case may be hidden."""
    if not launches:
        return ""
    kernels = []
    for row in _launch_rows(launches):
        kernels.append(f"{row['name']} (block {row['block']}, shared memory {row['static_shared']} static + "
                       f"{row['dynamic_shared']} dynamic, {row['registers']} registers per thread)")
    count = f"{len(launches)} kernel launch{'es' if len(launches) != 1 else ''}"
    return f"{count} in one correctness call: " + "; ".join(kernels)


def part_view(part: PartResult, result: GradeResult, staff: bool) -> dict:
    redact = (lambda text: text) if staff else hidden_redactor(part)
    stages = _stages_in_order(part)
    stage_views = [_stage_view(s, staff, redact) for s in stages]
    by_name = {s["name"]: s for s in stage_views}

    public_cases = [c for c in part.cases if c.set != "hidden"]
    public = _cases_view(public_cases, 0, redact(causes.cases_line(part, public_cases, "public")))
    # hidden_total counts the hidden cases to grade, the list holds those
    # with a record; without a GPU the list is empty and the count is not.
    hidden_cases = [c for c in part.cases if c.set == "hidden"]
    hidden = _cases_view(hidden_cases, part.hidden_total,
                         redact(causes.cases_line(part, hidden_cases, "hidden", part.hidden_total)))

    correctness_words = []
    if public["total"]:
        correctness_words.append(f"public {public['fraction']}")
    if hidden["total"]:
        correctness_words.append(f"hidden {hidden['fraction']}")
    correctness_ran = any(c.ran for c in part.cases)
    correctness_note = ", ".join(correctness_words) if correctness_ran and correctness_words else "not run"
    correctness_cell = f"{fmt_points(part.correctness_score)} / {fmt_points(part.correctness_max)} ({correctness_note})"

    if part.speed is not None:
        speed_note = f"{fmt_gflops(part.speed.gflops)} GFLOP/s"
        if part.speed.of_cublas is not None:
            speed_note += f", {fmt_percent(part.speed.of_cublas)} of cuBLAS"
    else:
        speed_note = by_name["speed"]["status_word"]
    speed_cell = f"{fmt_points(part.speed_score)} / {fmt_points(part.speed_max)} ({speed_note})"

    # Public all pass, hidden some fail: the student cannot see which, so say
    # what kind of sizes the hidden set holds instead.
    hidden_advice = ""
    if hidden["failed"] and public["total"] and public["passed"] == public["total"]:
        hidden_advice = ("Every public case passes but some hidden ones do not. The hidden cases are other sizes of "
                         "the same kind (one below, at and above the tile sizes, other shapes): try your kernel on "
                         "more sizes around your tile width.")

    # Correctness points are withheld when a later check fails even though
    # every case passed; without this line the score looks like a bug.
    withheld = [STAGE_TITLES.get(name, name) for name in part.withheld_by]
    withheld_line = ("Correctness points are withheld because this part failed: " + ", ".join(withheld) + "."
                     if withheld else "")

    return {
        "id": part.id,
        "title": part.title,
        "withheld_line": withheld_line,
        "file": part.file,
        "score": fmt_points(part.score),
        "max_score": fmt_points(part.max_score) + (" (extra credit)" if part.extra_credit else ""),
        "correctness_cell": correctness_cell,
        "speed_cell": speed_cell,
        "status": causes.part_status(part, stages),
        # A missing file: one line for all that did not run, in place of the stages and cases.
        "missing_line": causes.missing_line(part, public["total"], hidden["total"]) if causes.missing(part) else "",
        "stages": stage_views,
        "problem_stages": [s for s in stage_views if s["detail_lines"] or s["hints"]],
        "public": public,
        "hidden": hidden,
        "hidden_advice": hidden_advice,
        "check_mode": result.mode == "check",
        "speed_stage": by_name["speed"],
        "speed_rows": speed_rows(part.speed, part, staff) if part.speed is not None else [],
        "speed_verdict": speed_verdict(part.speed, timed_sizes(part)) if part.speed is not None else "",
        "speed_flags": [redact(str(f)) for f in part.speed.flags] if part.speed is not None else [],
        "traffic": traffic_view(part, redact),
        "launches": _launch_rows(part.launches) if staff else [],
        "launch_line": _launch_line(part.launches),
    }
