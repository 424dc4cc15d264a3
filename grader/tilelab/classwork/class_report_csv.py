"""A CSV of every figure and table of the class report, made from the same
ClassReport as the page: what a TA opens in a spreadsheet to look further.

Every file has a header row; a cell a spreadsheet would read as a formula
(= + - @ first) is quoted with a leading apostrophe, since student ids and
answers are the students' own text.
"""

from __future__ import annotations

import csv
import io

from .class_report import QUESTION_STATUSES, ClassReport

# name -> what it holds, in the order the page lists them
CSV_FILES = {
    "totals.csv": "the histogram of the totals",
    "scores.csv": "each part's histogram of points",
    "causes.csv": "each part's causes of lost points",
    "cases.csv": "each part's cases most often failed",
    "speed.csv": "each timed hand-in's speed against its reference and the roofline",
    "questions.csv": "each question's answers by verdict, and the commonest wrong answer",
    "answers.csv": "each question's commonest answers",
    "hand-ins.csv": "every hand-in, its total, and why it is left out if it is",
}


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{round(value, 4):g}"
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _table(header: list, rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    for row in rows:
        writer.writerow([_cell(v) for v in row])
    return out.getvalue()


def _bins(part: str, bins: list) -> list:
    return [(part, b.label, b.low, b.high, b.count) for b in bins]


def csv_files(report: ClassReport) -> dict:
    """File name -> its text, for every name in CSV_FILES."""
    bins_header = ["part", "points", "from", "to", "hand-ins"]
    return {
        "totals.csv": _table(bins_header, _bins("total", report.total_bins)),
        "scores.csv": _table(bins_header, [row for p in report.parts for row in _bins(p.id, p.bins)]),
        "causes.csv": _table(["part", "cause", "words", "hand-ins", "share"],
                             [(p.id, cause, words, n, n / p.graded if p.graded else None)
                              for p in report.parts for cause, words, n in p.causes]),
        "cases.csv": _table(["part", "case", "set", "size", "failed", "ran", "share failed"],
                            [(p.id, c.name, c.set, c.size, c.failed, c.ran, c.failed / c.ran if c.ran else None)
                             for p in report.parts for c in p.cases]),
        "speed.csv": _table(["part", "student", "gpu", "size", "GFLOP/s", "versus", "its GFLOP/s", "share",
                             "full points from", "no points at or below", "roofline bound GFLOP/s",
                             "share of the bound", "intensity FLOP/B", "intensity measured"],
                            [(p.id, s.student, s.gpu, s.case, s.gflops, s.versus, s.basis, s.share, s.full_at,
                              s.zero_at, s.bound, s.gflops / s.bound if s.bound else None, s.intensity,
                              "yes" if s.measured else "no") for p in report.parts for s in p.speeds]),
        "questions.csv": _table(["question", "kind", "key", *QUESTION_STATUSES, "commonest wrong answer",
                                 "its hand-ins"],
                                [(q.id, q.kind, q.key, *(q.statuses[s] for s in QUESTION_STATUSES),
                                  *(q.top_wrong or ("", None))) for q in report.questions]),
        "answers.csv": _table(["question", "answer", "hand-ins", "verdict"],
                              [(q.id, answer, n, status) for q in report.questions for answer, n, status in q.answers]
                              + [(q.id, "(other answers)", q.other_answers, "") for q in report.questions
                                 if q.other_answers]),
        "hand-ins.csv": _table(["student", "total", "max", "gpu", "left out because"],
                               [(h.name, h.result.score if h.result else None,
                                 h.result.max_score if h.result else None,
                                 (h.result.gpu or {}).get("name", "") if h.result else "", h.problem)
                                for h in report.hand_ins]),
    }
