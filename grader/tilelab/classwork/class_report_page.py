"""The class report as files: one HTML page that works offline (its
pictures inlined as PNG data) and a CSV of every figure beside it.

`tilelab batch` writes them into its OUT once a class is graded, `tilelab
class-report OUT` draws them again, and the service's dashboard shows the
same page for its latest grades. They name students and show the answer
key: they go into OUT itself, never into a student's folder, and the
dashboard serves them to staff only.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
from collections import defaultdict
from pathlib import Path
from typing import Optional

from ..outputs.rendering import render_page
from ..spec.assignment import Assignment
from ..system.atomic import write_atomically
from ..text.numbers import fmt_percent, fmt_points
from . import class_report_figures as figures
from .class_report import ClassReport, class_report
from .class_report_csv import CSV_FILES, csv_files
from .class_report_handins import read_graded_dir, require_some

TEMPLATES = Path(__file__).resolve().parent / "templates"
PAGE_FILE = "class-report.html"
CSV_DIR = "class-report"  # beside the page: its CSVs
# What `tilelab similarity --out OUT` leaves in the graded folder (similarity_page.py): the page shows its
# first pairs. Read as plain CSV, not through that module, whose detector's libraries the report needs not.
SIMILARITY_CSV = "similarity.csv"
SIMILARITY_PAGE = "similarity.html"
SIMILAR_PAIRS = 10
NAMES = ("class-report.html", "class-report")  # what the report takes in OUT: no student may be named so


def similarity_of(graded_dir: Path) -> Optional[dict]:
    """The first rows of the graded folder's similarity.csv, as written, and
    whether its page is there; None when there is none or it cannot be read."""
    path = Path(graded_dir) / SIMILARITY_CSV
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if not rows:
        return None
    return {"header": rows[0], "rows": rows[1:SIMILAR_PAIRS + 1], "total": len(rows) - 1,
            "page": SIMILARITY_PAGE if (Path(graded_dir) / SIMILARITY_PAGE).is_file() else ""}


def _inline(png: Optional[bytes]) -> str:
    return base64.b64encode(png).decode("ascii") if png else ""


def _share(n: int, of: int) -> str:
    return fmt_percent(n / of) if of else "–"


def _width(n: int, of: int) -> str:
    """A bar's width, in percent of its cell."""
    return f"{100 * n / of:.1f}" if of else "0"


def _left_out(report: ClassReport) -> list:
    """(why, the names) of the hand-ins not in the figures, the commonest reason first."""
    by_reason = defaultdict(list)
    for h in report.left_out:
        by_reason[h.problem].append(h.name)
    return sorted(by_reason.items(), key=lambda item: -len(item[1]))


def _part_view(part, png: bytes) -> dict:
    timed = part.speeds
    shares = sorted(s.share for s in timed if s.share is not None)
    full = sum(s.share is not None and s.share >= s.full_at - 1e-9 for s in timed)
    return {
        "id": part.id, "title": part.title, "max": fmt_points(part.max_score), "extra_credit": part.extra_credit,
        "graded": part.graded, "mean": fmt_points(part.mean), "median": fmt_points(part.median),
        "full_marks": part.full_marks, "built": part.built, "lost": part.lost,
        "top_cause": part.causes[0][1] if part.causes else "–",
        "causes": [{"words": words, "n": n, "share": _share(n, part.graded), "width": _width(n, part.graded)}
                   for _, words, n in part.causes],
        "cases": [{"name": c.name, "set": c.set, "size": c.size, "failed": c.failed, "ran": c.ran,
                   "share": _share(c.failed, c.ran), "width": _width(c.failed, c.ran)} for c in part.cases],
        "timed": len(timed), "case": timed[0].case if timed else "",
        "against": "cuBLAS SGEMM" if any(s.versus == "cublas" for s in timed) else "its reference solution",
        "median_share": fmt_percent(shares[len(shares) // 2]) if shares else "–",
        "full_speed": full, "png": _inline(png),
    }


def _question_view(q) -> dict:
    given = sum(n for _, n, _ in q.answers) + q.other_answers
    return {
        "id": q.id, "kind": q.kind, "text": q.text, "key": q.key or "–", "points": fmt_points(q.points),
        "asked": q.asked, "statuses": q.statuses,
        "correct": _share(q.statuses["correct"], q.asked),
        "answers": [{"answer": answer, "n": n, "status": status, "width": _width(n, given)}
                    for answer, n, status in q.answers],
        "other": q.other_answers, "top_wrong": q.top_wrong,
    }


def page_view(report: ClassReport, csv_base: str = CSV_DIR + "/", similarity: Optional[dict] = None,
              home: str = "") -> dict:
    """What the template shows; csv_base is where the page finds its CSVs,
    home a page to go back to (the dashboard's overview), if any."""
    shown = report.shown
    gpus = ", ".join(f"{name or 'no GPU'} ({n})" for name, n in report.gpus.most_common())
    parts = [_part_view(p, figures.part_png(p)) for p in report.parts]
    other_gpus = sum(len(p.speeds) for p in report.parts) - sum(
        s.gpu == report.roofline_gpu for p in report.parts for s in p.speeds)
    return {
        "title": report.title, "assignment": report.assignment,
        "made": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "hand_ins": len(report.hand_ins), "shown": len(shown), "left_out": _left_out(report), "gpus": gpus or "none",
        "without_gpu": report.without_gpu, "without_answers": report.without_answers.most_common(),
        "unkeyed": report.unkeyed, "max": fmt_points(report.max_score),
        "mean": fmt_points(sum(report.totals) / len(report.totals)) if report.totals else "–",
        "median": fmt_points(sorted(report.totals)[len(report.totals) // 2]) if report.totals else "–",
        "totals_png": _inline(figures.totals_png(report)), "parts": parts,
        "roofline_png": _inline(figures.roofline_png(report)), "roofline_gpu": report.roofline_gpu,
        "other_gpus": other_gpus,
        "questions": [_question_view(q) for q in report.questions],
        "questions_png": _inline(figures.questions_png(report)),
        "csv_base": csv_base, "csv_files": CSV_FILES, "similarity": similarity, "home": home,
    }


def html_page(report: ClassReport, csv_base: str = CSV_DIR + "/", similarity: Optional[dict] = None,
              home: str = "") -> str:
    return render_page(TEMPLATES, "class_report.html.j2", True, page_view(report, csv_base, similarity, home))


def write_class_report(graded_dir: Path, assignment: Assignment) -> list:
    """Reads every grading in graded_dir, writes class-report.html and its
    CSVs there, and returns their paths; ClassReportError (one line) when
    there is nothing to draw."""
    graded_dir = Path(graded_dir)
    hand_ins = read_graded_dir(graded_dir, assignment)
    require_some(hand_ins, str(graded_dir))
    report = class_report(hand_ins, assignment)
    folder = graded_dir / CSV_DIR
    folder.mkdir(exist_ok=True)
    written = []
    for name, text in csv_files(report).items():
        write_atomically(folder / name, text)
        written.append(folder / name)
    page = graded_dir / PAGE_FILE
    write_atomically(page, html_page(report, similarity=similarity_of(graded_dir)))
    return [page, *written]
