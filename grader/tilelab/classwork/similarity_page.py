"""A similarity ranking as files: similarity.csv (every pair listed, most
alike first) and similarity.html (part by part, each pair side by side with
the lines in shared fragments marked).

The page is one file that works offline: no script, no asset, nothing
fetched. Every line of student code on it is untrusted and is escaped
(Jinja's autoescape), so a hand-in's `</script>` or HTML in a comment shows
as text. It says, above everything, that a score is a reason to look and
never proof.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from pathlib import Path

from ..outputs.rendering import render_page
from ..system.atomic import write_atomically
from ..text.numbers import fmt_percent
from .class_report_page import SIMILARITY_CSV as CSV_FILE
from .class_report_page import SIMILARITY_PAGE as PAGE_FILE
from .similarity import NOISE, Pair, Ranking

TEMPLATES = Path(__file__).resolve().parent / "templates"
CSV_HEADER = ["part", "student A", "student B", "score", "shared lines", "lines in A", "lines in B"]


def line_ranges(lines) -> str:
    """Sorted line numbers as ranges: 3-7, 10, 12-15."""
    runs: list = []
    for n in lines:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def shared_lines(pair: Pair) -> int:
    """The lines the shared fragments take, in the hand-in where they take more."""
    return max(len(pair.a.shared), len(pair.b.shared))


def csv_text(ranking: Ranking) -> str:
    """Every pair listed, most alike first over all parts (then in the parts' order, then by name)."""
    order = {part: n for n, (part, _) in enumerate(ranking.parts)}
    pairs = sorted(ranking.pairs, key=lambda p: (-p.score, order[p.part], p.a.student, p.b.student))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for p in pairs:
        writer.writerow([p.part, p.a.student, p.b.student, f"{p.score:.3f}", shared_lines(p),
                         line_ranges(p.a.shared), line_ranges(p.b.shared)])
    return out.getvalue()


def _anchor(pair: Pair) -> str:
    return f"{pair.part}--{pair.a.student}--{pair.b.student}"


def _side_view(side) -> dict:
    shared = set(side.shared)
    lines = list(side.lines)
    if lines and lines[-1] == "":
        lines.pop()  # the file's last newline
    return {"student": side.student, "shared": len(shared),
            "rows": [(n, text, n in shared) for n, text in enumerate(lines, 1)]}


def page_view(ranking: Ranking, generated: str) -> dict:
    parts = []
    for part, file in ranking.parts:
        pairs = [p for p in ranking.pairs if p.part == part]
        parts.append({
            "id": part, "file": file, "compared": ranking.compared.get(part, 0),
            "pairs": [{"anchor": _anchor(p), "a": _side_view(p.a), "b": _side_view(p.b),
                       "score": fmt_percent(p.score), "shared_lines": shared_lines(p)} for p in pairs],
        })
    return {"title": ranking.title, "generated": generated, "parts": parts, "notes": list(ranking.notes),
            "top": ranking.top, "threshold": fmt_percent(ranking.threshold), "noise": NOISE,
            "listed": len(ranking.pairs)}


def page_html(ranking: Ranking, generated: str = "") -> str:
    generated = generated or dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return render_page(TEMPLATES, "similarity.html.j2", True, page_view(ranking, generated))


def write(out_dir: Path, ranking: Ranking) -> tuple:
    """similarity.csv and similarity.html into `out_dir` (made if missing); their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = (out_dir / CSV_FILE, out_dir / PAGE_FILE)
    write_atomically(written[0], csv_text(ranking))
    write_atomically(written[1], page_html(ranking))
    return written
