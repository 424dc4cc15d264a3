"""The view of a whole report: what the Markdown and HTML templates show.

Everything is worded from a `GradeResult` alone (model.py), so the reports
cannot disagree with results.json, and the templates only lay the rows out.
Students see hidden cases only as a count ("12 hidden cases: 10 passed"),
never their names, sizes or errors (part_view.py), and grader errors without
the grader's output; staff see everything, the answer key included.
"""

from __future__ import annotations

from typing import Optional

from ..grading.answers import AnswersResult
from ..grading.model import GradeResult
from ..text.numbers import fmt_date, fmt_gflops, fmt_intensity, fmt_points, fmt_points_unit
from .part_view import STATUS_MARKERS, hidden_redactor, part_view
from .roofline_plot import roofline_of
from .speed_words import positive

AUDIENCES = ("student", "staff")
# Where a student reads a grading before the course staff publish it (GradeResult.published).
UNPUBLISHED = "shown when the course staff publish the grades"
AT_PUBLICATION = "shown at publication"  # the same, in a table's cell

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


def _questions_view(answers: Optional[AnswersResult], staff: bool, published: bool = True) -> Optional[dict]:
    if answers is None:
        return None
    rows = []
    for q in answers.questions:
        status = q.status if q.status in QUESTION_WORDS else "invalid"
        if q.kind == "text":
            points = f"graded by a TA (up to {fmt_points_unit(q.manual_points)})"
        elif not published:
            points = AT_PUBLICATION
        else:
            points = f"{fmt_points(q.score)} / {fmt_points(q.max_score)}"
        word = QUESTION_WORDS[status] if published or status != "not_graded" else "result at publication"
        row = {"id": q.id, "kind": q.kind, "answer": q.answer or "-", "status": status,
               "word": word, "marker": QUESTION_MARKERS[status], "badge": QUESTION_BADGES[status],
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
        right = "not graded here" if published else AT_PUBLICATION
    collected = (f"{sum(q.status == 'collected' for q in written)} of {len(written)} written answers collected "
                 f"for a TA (up to {fmt_points(answers.manual_max)} points, graded by hand)") if written else ""
    return {
        "file": answers.file,
        "score": fmt_points(answers.score),
        "max_score": fmt_points(answers.max_score),
        "points": f"{fmt_points(answers.score)} / {fmt_points(answers.max_score)}" if published else AT_PUBLICATION,
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
    roof = roofline_of(result)
    if roof is None:
        return ""
    fp32, dram = roof
    # The on-chip levels where this GPU's measurement has them (older results lack them).
    ceilings = result.ceilings or {}
    on_chip = "".join(f", {what} {fmt_gflops(ceilings[key])} GB/s"
                      for what, key in (("L2", "l2_gbps"), ("shared memory", "shared_gbps"))
                      if positive(ceilings.get(key)))
    return (f"Ceilings measured on this GPU: FP32 {fmt_gflops(fp32)} GFLOP/s, DRAM {fmt_gflops(dram)} GB/s"
            f"{on_chip}; "
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


def report_view(result: GradeResult, audience: str, leaderboard_alias: Optional[str] = None) -> dict:
    if audience not in AUDIENCES:
        raise ValueError(f"audience must be one of {AUDIENCES}, not {audience!r}")
    staff = audience == "staff"
    parts = [part_view(p, result, staff) for p in result.parts]
    notes = [str(n) for n in result.notes] + ([f"Staff: {n}" for n in result.staff_notes] if staff else [])
    if not staff:
        # Grading-wide notes are written without a part in mind; hide every
        # part's hidden cases in them.
        for part in result.parts:
            redact = hidden_redactor(part)
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
        "total": f"{fmt_points(result.score)} / {fmt_points(result.max_score)}" if result.published else UNPUBLISHED,
        "mode": MODE_WORDS.get(result.mode, result.mode),
        "gpu": _gpu_line(result),
        "date": fmt_date(result.started),
        "submission": result.submission,
        "seed": result.seed,
        "seconds": f"{result.seconds:.1f}",
        "notes": notes,
        "ceilings_line": _ceilings_line(result),
        "parts": parts,
        "questions": _questions_view(result.answers, staff, result.published),
        "timings": _timing_rows(result) if staff else [],
        "status_markers": STATUS_MARKERS,
        # Where the class leaderboard shows aliases (`tilelab batch`): this hand-in's, so its student finds it.
        "leaderboard_alias": leaderboard_alias or "",
    }
