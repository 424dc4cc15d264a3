"""The reports a student (or the course staff) reads: Markdown, HTML, roofline plot.

Everything here is rendered from a `GradeResult` and nothing else (model.py),
so the reports cannot disagree with results.json. The Python side turns the
result into rows of already-worded text (`_report_view`); the templates in
templates/ only lay those rows out, one for Markdown and one for HTML, so the
two formats always say the same thing.

Two audiences:
  student  hidden cases appear only as a count ("12 hidden cases: 10 passed");
           their names, sizes and errors never reach the page, and a hidden
           case's name or size that slipped into a stage's text is replaced.
           Grader errors are reported without the grader's own output.
  staff    everything: hidden cases like public ones, every stage's details,
           launch records with grids, where the time went.

The exercise questions get a section of their own: each answer as read and
its result. The key is shown next to the answer to staff only; nothing of it
reaches the student view.
"""

from __future__ import annotations

import functools
import importlib
import math
import re
import shutil
import threading
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional

import jinja2

from ..grading.model import ESTIMATED_RULE, STAGE_TITLES, STAGES, CaseResult, GradeResult, PartResult, Speed, Stage
from ..grading.scoring import CUBLAS
from ..grading.answers import AnswersResult
from . import causes

AUDIENCES = ("student", "staff")

# A failed stage's details (compiler or sanitizer output) are cut to this many
# lines: the first errors are the ones to fix, and a page of template
# instantiation noise hides them.
DETAIL_LINE_CAP = 40
# One line of output can be enormous (a macro expansion, a minified dump).
DETAIL_LINE_WIDTH_CAP = 400
# Tables of first wrong elements per case set: the first failing cases say
# what is wrong; ten more tables of the same mistake bury the hints.
ERROR_TABLE_CAP = 3

STATUS_WORDS = {"passed": "passed", "failed": "failed", "not_run": "not run", "error": "grader error"}
# Markdown has no colour, so each status gets its own symbol next to its word;
# "not run" must never look like a pass.
STATUS_MARKERS = {"passed": "✅", "failed": "❌", "not_run": "⚪", "error": "⚠️"}

MODE_WORDS = {
    "grade": "grade (public and hidden cases, fresh inputs)",
    "check": "check (public cases only, fixed inputs; hidden cases run when grading)",
}

QUESTION_WORDS = {"correct": "correct", "wrong": "wrong", "unanswered": "no answer", "invalid": "not readable",
                  "collected": "collected for a TA", "not_graded": "not graded here"}
QUESTION_MARKERS = {"correct": "✅", "wrong": "❌", "invalid": "❌", "unanswered": "⚪", "collected": "📝",
                    "not_graded": "⚪"}
# The HTML badge class of each question status (the stage classes, plus one).
QUESTION_BADGES = {"correct": "passed", "wrong": "failed", "invalid": "failed", "unanswered": "not_run",
                   "collected": "collected", "not_graded": "not_run"}

HIDDEN_PLACEHOLDER = "(a hidden case)"
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
REPORT_FILES = {"markdown": "report.md", "html": "report.html", "plot": "roofline.png"}


# --- number and text formatting ------------------------------------------------


def fmt_points(x: float) -> str:
    """Points as a person writes them: 10, 7.5, 3.33."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt_gflops(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _ms(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 100:
        return f"{x:,.1f}"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.3g}"


def fmt_intensity(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    return f"{x:,.1f}" if abs(x) >= 10 else f"{x:.3g}"


def fmt_percent(fraction: float) -> str:
    return f"{100 * fraction:.1f}".rstrip("0").rstrip(".") + " %"


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


def _bytes(n) -> str:
    try:
        return f"{int(n):,} B"
    except (TypeError, ValueError):
        return str(n)


def _date(iso: str) -> str:
    """The grading's start as 'YYYY-MM-DD HH:MM UTC'; the text as given if it
    does not parse (Python 3.9's fromisoformat does not read a 'Z')."""
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return str(iso)
    if when.tzinfo is None:
        return when.strftime("%Y-%m-%d %H:%M")
    if when.utcoffset().total_seconds() == 0:
        return when.strftime("%Y-%m-%d %H:%M UTC")
    return when.strftime("%Y-%m-%d %H:%M UTC%z")


def cap_lines(text: str, max_lines: int = DETAIL_LINE_CAP, max_width: int = DETAIL_LINE_WIDTH_CAP) -> tuple:
    """The first `max_lines` lines of `text` (each cut to `max_width`
    characters) and how many lines were left out."""
    lines = text.rstrip().splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    kept = []
    for line in lines[:max_lines]:
        line = line.rstrip()
        if len(line) > max_width:
            line = f"{line[:max_width]} … [{len(line) - max_width} characters cut]"
        kept.append(line)
    return kept, max(0, len(lines) - max_lines)


# --- Markdown escaping ---------------------------------------------------------

# Characters that start Markdown syntax inline. '|' is among them so that any
# text is also safe inside a table cell ('\|' renders as '|' everywhere).
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|~])")
# '_' only opens emphasis at a word's edge; 'sharedMemPerBlock_x' stays readable.
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_MD_ENTITY = re.compile(r"&(?=#?\w+;)")


def md_text(value) -> str:
    """Plain text made safe for a Markdown paragraph or table cell."""
    text = " ".join(str(value).split())  # a newline would end a table row
    text = _MD_ENTITY.sub("&amp;", text)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return _MD_UNDERSCORE.sub(r"\\_", text)


def md_code(value, cell: bool = False) -> str:
    """Text as an inline code span, fenced with more backticks than it holds."""
    text = " ".join(str(value).split())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    if text.startswith("`") or text.endswith("`"):
        text = f" {text} "
    span = f"{fence}{text}{fence}"
    # GFM splits table cells on '|' even inside code spans; '\|' is its escape.
    return span.replace("|", "\\|") if cell else span


def md_fence(lines, info: str = "text") -> str:
    """Lines (a list, or one string) as a fenced code block whose fence no
    line can close."""
    if isinstance(lines, str):
        lines = lines.split("\n")
    longest = max((len(run) for line in lines for run in re.findall(r"`{3,}", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + info, *lines, fence])


# --- keeping hidden cases hidden -------------------------------------------------


def _hidden_redactor(part: PartResult) -> Callable[[str], str]:
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


def full_credit_words(speed: Speed) -> str:
    """The full-credit target both ways: against the hardware and against
    what it is scored by on the same GPU (the reference solution, or cuBLAS)."""
    estimated = " (estimated)" if speed.rule == ESTIMATED_RULE else ""
    against = "cuBLAS SGEMM" if speed.versus == CUBLAS else "the reference solution"
    return (f"{fmt_gflops(speed.target_gflops)} GFLOP/s = {fmt_percent(speed.target_gflops / speed.ceiling_value)} "
            f"of this GPU's FP32 roof = {fmt_percent(speed.full_at)} of {against} here{estimated}")


def reference_words(speed: Speed) -> str:
    """Where the reference solution's figure comes from."""
    if not _positive(speed.reference_gflops):
        return "not timed on this GPU"
    if speed.rule == ESTIMATED_RULE:
        return (f"about {fmt_gflops(speed.reference_gflops)} GFLOP/s: an estimate, since this machine has no "
                "reference solutions to time (its share of the FP32 roof on the course's grading GPU, applied to "
                "this one); the grader times the real reference on its own GPU")
    return f"{fmt_gflops(speed.reference_gflops)} GFLOP/s, timed by the grader on this GPU the same way"


def timed_sizes(part: PartResult) -> list:
    """Every timed size's Speed, each with its own share of the points
    (part.speed alone in a result written before sizes were kept apart)."""
    return list(part.speeds) or ([part.speed] if part.speed is not None else [])


def cublas_size_words(speed: Speed, with_time: bool = False) -> str:
    """One timed size of a part scored against cuBLAS: what it reached, what
    cuBLAS and the reference solution reach there."""
    estimated = " (estimated)" if speed.rule == ESTIMATED_RULE else ""
    text = f"{fmt_gflops(speed.gflops)} GFLOP/s"
    if with_time:
        text += f" ({_ms(speed.time_ms)} ms per call)"
    if _positive(speed.cublas_gflops):
        text += (f" = {fmt_percent(speed.of_cublas)} of cuBLAS SGEMM ({fmt_gflops(speed.cublas_gflops)} GFLOP/s"
                 f"{estimated}) at {speed.case}")
    else:
        text += f" at {speed.case}"
    if _positive(speed.reference_gflops):
        share = (f", {fmt_percent(speed.reference_gflops / speed.cublas_gflops)} of cuBLAS"
                 if _positive(speed.cublas_gflops) else "")
        text += f"; the reference solution reaches {fmt_gflops(speed.reference_gflops)}{estimated}{share}"
    else:
        text += "; the reference solution was not timed on this GPU"
    return text


def cublas_floor_words(sizes: list) -> str:
    """Where a part scored against cuBLAS earns nothing: the textbook tiled
    kernel's reference at each size (half the full-credit target where that
    is lower, on a GPU where the textbook kernel comes near cuBLAS)."""
    halves = all(abs(s.zero_gflops - 0.5 * s.target_gflops) < 0.1 for s in sizes)
    why = ("half the full-credit target" if halves else
           "the textbook tiled kernel's reference solution here: what the chapter already gives earns nothing")
    return ", ".join(f"≤ {fmt_gflops(s.zero_gflops)} GFLOP/s at {s.case}" for s in sizes) + f" ({why})"


def _earned_words(speed: Speed, part: PartResult, sizes: int) -> str:
    points = f"{fmt_points(part.speed_score)} / {fmt_points(part.speed_max)}"
    combined = " (the sizes' shares combined by geometric mean)" if sizes > 1 else ""
    if abs(part.speed_score - speed.fraction * part.speed_max) < 0.01:
        return f"{fmt_percent(speed.fraction)} of the speed points ({points}){combined}"
    # The points can be withheld after timing (a failed sanitizer, say).
    return (f"{points} speed points: the speed alone would earn {fmt_percent(speed.fraction)} of them{combined}, "
            f"but they were withheld")


def _roofline_words(speed: Speed) -> str:
    return (f"{fmt_gflops(speed.bound_gflops)} GFLOP/s at an intensity of {fmt_intensity(speed.intensity)} "
            f"FLOP/byte, set by the FP32 FMA rate measured on this GPU ({fmt_gflops(speed.ceiling_value)} GFLOP/s)")


def cublas_speed_rows(part: PartResult, staff: bool = False) -> list:
    """(label, value) rows of a part scored against cuBLAS: each timed size
    against cuBLAS and the reference, then what earns credit."""
    sizes = timed_sizes(part)
    speed = part.speed
    estimated = " (estimated)" if speed.rule == ESTIMATED_RULE else ""
    rows = []
    for s in sizes:
        share = f"; {fmt_percent(s.fraction)} of the speed points at this size" if len(sizes) > 1 else ""
        rows.append((f"at {s.case}", cublas_size_words(s, with_time=True) + share))
    rows += [
        ("full credit from", f"{fmt_percent(speed.full_at)} of cuBLAS SGEMM at each size: "
                             + ", ".join(f"{fmt_gflops(s.target_gflops)} GFLOP/s at {s.case}" for s in sizes)
                             + estimated),
        ("no credit at", cublas_floor_words(sizes)),
        ("roofline bound", _roofline_words(speed)),
        ("earned", _earned_words(speed, part, len(sizes))),
    ]
    if staff:
        rows += [(f"times at {s.case}", f"CUDA events {_ms(s.event_ms)} ms, CUPTI {_ms(s.cupti_ms)} ms, "
                                        f"wall clock {_ms(s.wall_ms)} ms") for s in sizes]
    return rows


def _speed_rows(speed: Speed, part: PartResult, staff: bool) -> list:
    """(label, value) rows: what was measured, what earns credit, and why."""
    if speed.versus == CUBLAS:
        return cublas_speed_rows(part, staff)
    rows = [
        ("timed case", speed.case),
        ("achieved", f"{fmt_gflops(speed.gflops)} GFLOP/s ({_ms(speed.time_ms)} ms per call)"),
        ("full credit from", full_credit_words(speed)),
        ("no credit at", f"≤ {fmt_gflops(speed.zero_gflops)} GFLOP/s "
                         f"({fmt_percent(speed.zero_gflops / speed.reference_gflops)} of the reference solution)"),
        ("reference solution", reference_words(speed)),
        ("roofline bound", _roofline_words(speed)),
        ("earned", _earned_words(speed, part, 1)),
    ]
    if staff:
        rows.append(("times", f"CUDA events {_ms(speed.event_ms)} ms, CUPTI {_ms(speed.cupti_ms)} ms, "
                              f"wall clock {_ms(speed.wall_ms)} ms"))
    return rows


def _speed_verdict(speed: Speed) -> str:
    """One sentence on where the kernel stands. Follows the fraction, not the
    GFLOP/s alone: an implausible timing earns nothing however fast it looks."""
    if speed.fraction <= 0 and speed.gflops > speed.zero_gflops:
        return "This timing earns no speed points: see the integrity notes."
    if speed.fraction >= 1:
        return "At or above the full-credit target."
    if speed.fraction <= 0:
        if speed.versus == CUBLAS:
            return ("At or below the no-credit threshold at some size: no faster there than the textbook tiled "
                    "kernel. The handout's part 6 shows the way up, starting with a tile of P per thread held in "
                    "registers.")
        return ("At or below the no-credit threshold: far slower than the reference solution on the same GPU. "
                "Look for the technique this part teaches (how the threads map to the matrix, what is staged in "
                "shared memory).")
    return "Between the no-credit threshold and the full-credit target: partial credit, in proportion."


def _launch_rows(launches: list) -> list:
    rows = []
    for launch in launches:
        rows.append({
            "name": str(launch.get("name", "?")),
            "grid": _dim3(launch.get("grid", "?")),
            "block": _dim3(launch.get("block", "?")),
            "static_shared": _bytes(launch.get("static_shared_bytes", 0)),
            "dynamic_shared": _bytes(launch.get("dynamic_shared_bytes", 0)),
            "registers": str(launch.get("registers_per_thread", "?")),
            "duration": f"{_ms(float(launch['duration_ms']))} ms" if launch.get("duration_ms") is not None else "-",
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


def _part_view(part: PartResult, result: GradeResult, staff: bool) -> dict:
    redact = (lambda text: text) if staff else _hidden_redactor(part)
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
        "speed_rows": _speed_rows(part.speed, part, staff) if part.speed is not None else [],
        "speed_verdict": _speed_verdict(part.speed) if part.speed is not None else "",
        "speed_flags": [redact(str(f)) for f in part.speed.flags] if part.speed is not None else [],
        "launches": _launch_rows(part.launches) if staff else [],
        "launch_line": _launch_line(part.launches),
    }


def _questions_view(answers: Optional[AnswersResult], staff: bool) -> Optional[dict]:
    if answers is None:
        return None
    rows = []
    for q in answers.questions:
        status = q.status if q.status in QUESTION_WORDS else "invalid"
        if q.kind == "text":
            unit = "point" if fmt_points(q.manual_points) == "1" else "points"
            points = f"graded by a TA (up to {fmt_points(q.manual_points)} {unit})"
        else:
            points = f"{fmt_points(q.score)} / {fmt_points(q.max_score)}"
        row = {"id": q.id, "kind": q.kind, "answer": q.answer or "-", "status": status,
               "word": QUESTION_WORDS[status], "marker": QUESTION_MARKERS[status], "badge": QUESTION_BADGES[status],
               "message": q.message, "points": points}
        if staff:  # the key never enters the student view, so no template can show it
            row["key"] = q.key or "-"
        rows.append(row)
    auto = [q for q in answers.questions if q.kind != "text"]
    written = [q for q in answers.questions if q.kind == "text"]
    counts = [f"{sum(q.status == s for q in auto)} {QUESTION_WORDS[s]}" for s in ("wrong", "invalid", "unanswered")
              if any(q.status == s for q in auto)]
    if answers.summary:
        first_problem = answers.summary
    elif not answers.graded:
        first_problem = answers.not_graded_reason
    else:
        first_problem = ", ".join(counts) if counts else "all automatic questions right"
    if answers.graded:
        right = f"{sum(q.status == 'correct' for q in auto)} of {len(auto)} right"
    else:
        right = "not graded here"
    collected = (f"{sum(q.status == 'collected' for q in written)} of {len(written)} written answers collected "
                 f"for a TA (up to {fmt_points(answers.manual_max)} points, graded by hand)") if written else ""
    return {
        "file": answers.file,
        "score": fmt_points(answers.score),
        "max_score": fmt_points(answers.max_score),
        "right": right,
        "collected": collected,
        "first_problem": first_problem,
        "file_message": answers.message if answers.status != "read" else "",
        "not_graded": answers.not_graded_reason if not answers.graded else "",
        "notes": [str(n) for n in answers.notes],
        "staff_note": answers.staff_note if staff else "",
        "rows": rows,
    }


def _gpu_line(result: GradeResult) -> str:
    if not result.gpu:
        return "no GPU: GPU stages did not run"
    name = result.gpu.get("name") or (result.ceilings or {}).get("device_name") or "unnamed GPU"
    capability = result.gpu.get("compute_capability")
    return f"{name} (compute capability {capability})" if capability else str(name)


def _ceilings_line(result: GradeResult) -> str:
    roof = _roofline(result)
    if roof is None:
        return ""
    fp32, dram = roof
    return (f"Ceilings measured on this GPU: FP32 {fmt_gflops(fp32)} GFLOP/s, DRAM {fmt_gflops(dram)} GB/s; "
            f"a kernel needs more than {fmt_intensity(fp32 / dram)} FLOP per byte of DRAM traffic "
            f"(the ridge point) to be limited by arithmetic rather than memory.")


def _timing_rows(result: GradeResult) -> list:
    total = sum(float(v) for v in result.timings.values())
    rows = []
    for phase, seconds in result.timings.items():
        seconds = float(seconds)
        share = f"{100 * seconds / total:.0f} %" if total > 0 else "-"
        rows.append({"phase": str(phase), "seconds": f"{seconds:.1f}", "share": share})
    return rows


def _report_view(result: GradeResult, audience: str, leaderboard_alias: Optional[str] = None) -> dict:
    if audience not in AUDIENCES:
        raise ValueError(f"audience must be one of {AUDIENCES}, not {audience!r}")
    staff = audience == "staff"
    parts = [_part_view(p, result, staff) for p in result.parts]
    notes = [str(n) for n in result.notes] + ([f"Staff: {n}" for n in result.staff_notes] if staff else [])
    if not staff:
        # Grading-wide notes are written without a part in mind; hide every
        # part's hidden cases in them.
        for part in result.parts:
            redact = _hidden_redactor(part)
            notes = [redact(n) for n in notes]
    extra = [p for p in result.parts if p.extra_credit]
    extra_credit_line = ""
    if extra:
        names = "; ".join(f"{p.id}, up to {fmt_points(p.max_score)} points" for p in extra)
        earned = sum(p.score for p in extra)
        extra_credit_line = (f"Extra credit: {names}. They count in the score ({fmt_points(earned)} earned here) "
                             "but not in the total.")
    return {
        "staff": staff,
        "audience": audience,
        "extra_credit_line": extra_credit_line,
        "assignment": result.title or result.assignment,
        "score": fmt_points(result.score),
        "max_score": fmt_points(result.max_score),
        "mode": MODE_WORDS.get(result.mode, result.mode),
        "gpu": _gpu_line(result),
        "date": _date(result.started),
        "submission": result.submission,
        "seed": result.seed,
        "seconds": f"{result.seconds:.1f}",
        "notes": notes,
        "ceilings_line": _ceilings_line(result),
        "parts": parts,
        "questions": _questions_view(result.answers, staff),
        "timings": _timing_rows(result) if staff else [],
        "status_markers": STATUS_MARKERS,
        # Where the class leaderboard shows aliases (`tilelab batch`): this hand-in's, so its student finds it.
        "leaderboard_alias": leaderboard_alias or "",
    }


# --- rendering -----------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _environment(template_dir: Path, html: bool) -> jinja2.Environment:
    """Jinja for Markdown and HTML pages with the filters that quote
    untrusted text safely in either. One per folder and kind, kept: it keeps
    the templates it compiled (a grading writes the student's and the
    staff's reports, and a batch many)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        autoescape=html,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,  # a misspelt field fails loudly, not as a blank
    )
    env.filters["md"] = md_text
    env.filters["code"] = md_code
    env.filters["code_cell"] = lambda value: md_code(value, cell=True)
    env.filters["fence"] = md_fence
    return env


def render_page(template_dir: Path, template: str, html: bool, view: dict) -> str:
    """A Markdown or HTML page (a report, a handout) from its template."""
    text = _environment(template_dir, html).get_template(template).render(**view)
    if html:
        return text
    # Template control blocks leave runs of blank lines; one is enough.
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def render_markdown(result: GradeResult, audience: str = "student", leaderboard_alias: Optional[str] = None) -> str:
    """The report as Markdown (GitHub and Gradescope flavour)."""
    return _markdown_of(_report_view(result, audience, leaderboard_alias))


def render_html(result: GradeResult, audience: str = "student", plot_file: Optional[str] = REPORT_FILES["plot"],
                leaderboard_alias: Optional[str] = None) -> str:
    """The report as one standalone HTML page; the roofline plot, when given,
    is referenced by its file name relative to the page."""
    return _html_of(_report_view(result, audience, leaderboard_alias), plot_file)


def _markdown_of(view: dict) -> str:
    return render_page(TEMPLATE_DIR, "report.md.j2", False, view)


def _html_of(view: dict, plot_file: Optional[str]) -> str:
    return render_page(TEMPLATE_DIR, "report.html.j2", True, {**view, "plot_file": plot_file})


# --- roofline plot ---------------------------------------------------------------


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _roofline(result: GradeResult) -> Optional[tuple]:
    """(FP32 GFLOP/s, DRAM GB/s) when the result has usable ceilings."""
    ceilings = result.ceilings or {}
    fp32, dram = ceilings.get("fp32_gflops"), ceilings.get("dram_gbps")
    if _positive(fp32) and _positive(dram):
        return float(fp32), float(dram)
    return None


def _plottable_parts(result: GradeResult) -> list:
    return [p for p in result.parts
            if p.speed is not None and _positive(p.speed.intensity) and _positive(p.speed.gflops)]


# matplotlib is not thread-safe: its mathtext parser keeps state, and two
# figures drawn at once fail with a ParseException. `tilelab batch` writes
# the reports of gradings side by side, in threads (two of eight failed so
# on the H100, 2026-11-23). One figure at a time, in this process.
_ONE_FIGURE = threading.Lock()


def one_figure_at_a_time(draw: Callable) -> Callable:
    """Makes `draw` (a function that makes and saves a whole figure) wait for any other."""
    @functools.wraps(draw)
    def drawn_alone(*args, **kwargs):
        with _ONE_FIGURE:
            return draw(*args, **kwargs)
    return drawn_alone


def roofline_axes(fp32: float, dram: float, x_range: tuple, y_range: tuple, device: str, size: tuple = (10, 5)):
    """(figure, axes): a log-log roofline of a GPU with these ceilings (FP32
    GFLOP/s, DRAM GB/s) over x_range (FLOP/byte) and y_range (GFLOP/s), its
    two roofs and the ridge drawn and labelled. Every roofline plot of the
    project starts here (the report's, the leaderboard's)."""
    # Figure and the Agg canvas directly, not pyplot: pyplot keeps global
    # state (current figure, backend) that a program importing us may own.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    (x_low, x_high), (y_low, y_high) = x_range, y_range
    ridge = fp32 / dram
    figure = Figure(figsize=size, dpi=120)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.plot([x_low, ridge], [dram * x_low, fp32], color="#1f4e79", linewidth=2,
              label=f"DRAM roof: {fmt_gflops(dram)} GB/s × intensity")
    axes.plot([ridge, x_high], [fp32, fp32], color="#7a1f1f", linewidth=2,
              label=f"FP32 ceiling: {fmt_gflops(fp32)} GFLOP/s")
    axes.plot([ridge], [fp32], marker="D", color="black", markersize=6, linestyle="none")
    axes.annotate(f"ridge {fmt_intensity(ridge)} FLOP/B", (ridge, fp32), textcoords="offset points",
                  xytext=(-10, 10), ha="right", fontsize=9)
    axes.set_xlim(x_low, x_high)
    axes.set_ylim(y_low, y_high)
    axes.set_xlabel("arithmetic intensity (FLOP per byte of compulsory DRAM traffic)")
    axes.set_ylabel("GFLOP/s")
    axes.set_title(f"Roofline on {device}")
    axes.grid(True, which="major", linewidth=0.5, alpha=0.5)
    # Plain numbers on the decades (1,000 and 10,000, not 10^3 and 10^4) and
    # no minor ticks: a log axis's own labels are mathtext, whose first use
    # in a process costs about half a second, as much as the rest of the plot.
    plain = FuncFormatter(lambda value, _: f"{value:,.0f}" if value >= 1 else f"{value:g}")
    axes.xaxis.set_major_formatter(plain)
    axes.yaxis.set_major_formatter(plain)
    axes.minorticks_off()
    return figure, axes


def label_column(axes, points: list, label_x: float) -> None:
    """Labels (text, x, y, colour) for points that land almost on one spot
    (every timed size is near 600 FLOP/byte): in a column at label_x, top to
    bottom in GFLOP/s order, pushed apart where they would overlap, each with
    a thin line to its point."""
    y_low, y_high = axes.get_ylim()
    # One and a half lines of 9-point text, in decades of the axis.
    axes_inches = axes.get_position().height * axes.figure.get_figheight()
    min_gap = (math.log10(y_high) - math.log10(y_low)) * (1.5 * 9 / 72) / axes_inches
    previous = None
    for text, x, y, colour in sorted(points, key=lambda p: p[2], reverse=True):
        log_y = math.log10(y)
        if previous is not None and previous - log_y < min_gap:
            log_y = previous - min_gap
        previous = log_y
        axes.annotate(text, (x, y), xytext=(label_x, 10 ** log_y), va="center", fontsize=9, color=colour,
                      arrowprops={"arrowstyle": "-", "color": colour, "linewidth": 0.6, "shrinkB": 5})


def save_figure(figure, axes, target, image_format: str = "png", legend_below: bool = False) -> None:
    """The legend outside the axes, to the right (the points sit low and to
    the right, where a legend inside would cover them) or, for long labels,
    below; then the figure into `target` (a path or a binary file object)."""
    if legend_below:
        axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), borderaxespad=0.0, fontsize=8, ncol=2)
    else:
        axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8)
    figure.tight_layout()
    figure.savefig(target if hasattr(target, "write") else str(target), format=image_format)


def cublas_line(axes, gflops: float, x_from: float, x_to: float, label: str) -> None:
    """cuBLAS SGEMM's GFLOP/s, a dashed line across the compute-bound side,
    labelled in the legend."""
    axes.plot([x_from, x_to], [gflops, gflops], color="#555555", linestyle="--", linewidth=1.2, label=label)
    axes.annotate(f"cuBLAS SGEMM {fmt_gflops(gflops)}", (x_from, gflops), textcoords="offset points", xytext=(6, -11),
                  fontsize=8, color="#555555")


def cublas_label(speed: Speed) -> str:
    estimated = " (estimated)" if speed.rule == ESTIMATED_RULE else ""
    return f"cuBLAS SGEMM (FP32) at {speed.case}: {fmt_gflops(speed.cublas_gflops)} GFLOP/s{estimated}"


@one_figure_at_a_time
def plot_roofline(result: GradeResult, path: Path) -> bool:
    """Draws each timed part against the GPU's measured roofline into `path`
    (PNG). Returns False, writing nothing, when there are no ceilings or no
    part was timed."""
    roof = _roofline(result)
    parts = _plottable_parts(result)
    if roof is None or not parts:
        return False
    fp32, dram = roof
    ridge = fp32 / dram
    intensities = [p.speed.intensity for p in parts] + [ridge]
    x_low = min(intensities) / 8
    x_high = max(intensities) * 12
    lowest = min([p.speed.gflops for p in parts]
                 + [p.speed.target_gflops for p in parts if _positive(p.speed.target_gflops)])
    y_range = (min(lowest, dram * x_low) / 2, fp32 * 3)
    device = (result.ceilings or {}).get("device_name") or (result.gpu or {}).get("name") or "this GPU"
    figure, axes = roofline_axes(fp32, dram, (x_low, x_high), y_range, device)

    colours = ["#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]
    references = [p for p in parts if _positive(p.speed.reference_gflops)]
    labels = []
    for i, part in enumerate(parts):
        speed = part.speed
        colour = colours[i % len(colours)]
        axes.plot([speed.intensity], [speed.gflops], marker="o", markersize=8, color=colour, linestyle="none",
                  label=f"{part.id}: {fmt_gflops(speed.gflops)} GFLOP/s")
        labels.append((part.id, speed.intensity, speed.gflops, colour))
        if _positive(speed.target_gflops):
            axes.plot([speed.intensity], [speed.target_gflops], marker="_", markersize=18, markeredgewidth=2.5,
                      color=colour, linestyle="none")
            axes.plot([speed.intensity, speed.intensity], [speed.gflops, speed.target_gflops], color=colour,
                      linestyle=":", linewidth=1)
        if _positive(speed.reference_gflops):
            axes.plot([speed.intensity], [speed.reference_gflops], marker="*", markersize=11, color=colour,
                      markeredgecolor="black", markeredgewidth=0.5, linestyle="none")
        if speed.versus == CUBLAS and _positive(speed.cublas_gflops):
            cublas_line(axes, speed.cublas_gflops, ridge, x_high, cublas_label(speed))
    label_column(axes, labels, max(p.speed.intensity for p in parts) * 2.5)
    # One legend entry explains every target bar, one every reference star.
    axes.plot([], [], marker="_", markersize=14, markeredgewidth=2.5, color="#444444", linestyle="none",
              label="full-credit target (same colour as its part)")
    if references:
        estimated = any(p.speed.rule == ESTIMATED_RULE for p in references)
        axes.plot([], [], marker="*", markersize=11, color="#444444", markeredgecolor="black",
                  markeredgewidth=0.5, linestyle="none",
                  label="reference solution, estimated" if estimated else "reference solution on this GPU")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(figure, axes, path)
    return True


_PREPARED = threading.Event()


def prepare_in_background() -> None:
    """Gets the reports ready in a thread while the GPU times the parts
    (GradeOptions.while_timing): the templates compiled (0.1-0.2 s) and the
    plotting library imported (about a second on the CPU machine), which
    write_reports would otherwise do at the end, on the command's critical
    path. Not earlier: a thread that imports holds Python's lock most of
    the time, and the grading's own start (static checks, the build,
    starting its runs) is Python too. Once per process; failures here are
    left for write_reports to meet and report."""
    if _PREPARED.is_set():
        return
    _PREPARED.set()

    def prepare() -> None:
        try:
            for html, template in ((False, "report.md.j2"), (True, "report.html.j2")):
                _environment(TEMPLATE_DIR, html).get_template(template)
            for module in ("matplotlib.figure", "matplotlib.backends.backend_agg"):
                importlib.import_module(module)
        except Exception:  # noqa: BLE001 - write_reports meets the same failure, in the main thread
            pass

    threading.Thread(target=prepare, name="tilelab-report-prepare", daemon=True).start()


def write_reports(result: GradeResult, out_dir: Path, audience: str = "student",
                  leaderboard_alias: Optional[str] = None, plot_drawn: Optional[Path] = None) -> dict:
    """Writes report.md, report.html and (when there is something to plot)
    roofline.png into `out_dir`; returns {"markdown", "html"[, "plot"]} -> path.
    `leaderboard_alias`: the hand-in's alias on the class leaderboard, shown
    in the header (outputs/leaderboard.py). `plot_drawn`: this result's
    roofline.png, already drawn for the other audience: copied, not drawn
    again (a quarter of a second)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    plot_path = out_dir / REPORT_FILES["plot"]
    # The plot first: the page refers to it only when it was drawn.
    if plot_drawn is not None:
        shutil.copyfile(plot_drawn, plot_path)
        plotted = True
    else:
        plotted = plot_roofline(result, plot_path)
    if plotted:
        written["plot"] = plot_path
    view = _report_view(result, audience, leaderboard_alias)
    markdown_path = out_dir / REPORT_FILES["markdown"]
    markdown_path.write_text(_markdown_of(view), encoding="utf-8")
    written["markdown"] = markdown_path
    html_path = out_dir / REPORT_FILES["html"]
    html_path.write_text(_html_of(view, plot_path.name if plotted else None), encoding="utf-8")
    written["html"] = html_path
    return written
