"""The class report on the staff dashboard (/staff/class-report): the page
`tilelab batch` writes for a graded folder, drawn from each student's
latest grading in the service's records.

A student counts with their latest grade-mode submission that has results;
one who has none yet (queued, running, or the grader failed) is listed as
left out, with why. The page names students and shows the answer key: the
dashboard serves it to a staff session only, like every /staff page.
"""

from __future__ import annotations

from typing import Optional

from ...classwork.class_report import class_report
from ...classwork.class_report_csv import CSV_FILES, csv_files
from ...classwork.class_report_handins import ClassReportError, hand_ins_of, require_some
from ...classwork.class_report_page import CSV_DIR, html_page
from ...spec.assignment import Assignment

# The page's own CSP: its figures are inline PNGs and its style inline; no
# script, frame or form. Not sandboxed, unlike a student's report: its links
# to the CSVs must carry the staff session, and all it shows is the
# grader's own text, autoescaped.
CLASS_REPORT_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; "
                    "frame-ancestors 'none'; base-uri 'none'")
_NOT_YET = {"queued": "not graded yet (queued)", "running": "not graded yet (being graded)",
            "failed": "grader error (see the student's page)", "done": "graded, but no results were recorded"}


def latest_gradings(conn) -> list:
    """(student, grade.json as a dict or None, why there is none or "") for
    every student with a grade-mode submission: their latest one that has
    results, else their latest one. A withdrawn or replaced submission
    stands for nothing."""
    rows = conn.execute(
        "SELECT DISTINCT ON (s.student) s.student, s.state, r.grade_json FROM tilelab_submissions s "
        "LEFT JOIN tilelab_results r ON r.submission = s.id WHERE s.mode = 'grade' "
        "AND s.state NOT IN ('cancelled', 'replaced') "
        "ORDER BY s.student, (r.submission IS NULL), s.created_at DESC").fetchall()
    return [(student, doc, "" if doc is not None else _NOT_YET.get(state, f"not graded ({state})"))
            for student, state, doc in rows]


def class_page(gradings: list, assignment: Assignment) -> tuple:
    """(the page's HTML, None) or (None, why there is none, in one line)."""
    hand_ins = hand_ins_of(gradings, assignment)
    try:
        require_some(hand_ins, "the service", "holds no grading yet: the page counts each student's latest "
                                              "grade-mode submission once a worker has graded it")
    except ClassReportError as e:
        return None, str(e)
    return html_page(class_report(hand_ins, assignment), csv_base=f"{CSV_DIR}/", home="/staff"), None


def class_csv(gradings: list, assignment: Assignment, name: str) -> Optional[str]:
    """One of the page's CSVs; None for a name it has not, or when nothing is graded."""
    if name not in CSV_FILES:
        return None
    hand_ins = hand_ins_of(gradings, assignment)
    if not any(h.result is not None for h in hand_ins):
        return None
    return csv_files(class_report(hand_ins, assignment))[name]
