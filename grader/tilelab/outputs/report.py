"""Writes a grading's reports: report.md, report.html and roofline.png.

One call writes one audience's reports (student or staff: report_view.py)
into one folder; the second audience's may copy the first one's plot. The
pieces live beside this module: the views in report_view.py, part_view.py
and speed_words.py, the templates and Jinja in rendering.py, the plot in
roofline_plot.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from ..grading.model import GradeResult
from .rendering import REPORT_FILES, html_of, markdown_of
from .report_view import report_view
from .roofline_plot import plot_roofline


def write_reports(result: GradeResult, out_dir: Path, audience: str = "student",
                  leaderboard_alias: Optional[str] = None, plot_drawn: Optional[Path] = None) -> dict:
    """Writes report.md, report.html and (when there is something to plot)
    roofline.png into `out_dir`; returns {"markdown", "html"[, "plot"]} -> path.
    `leaderboard_alias`: the hand-in's alias on the class leaderboard, shown
    in the header (outputs/leaderboard.py). `plot_drawn`: this result's
    roofline.png, already drawn for the other audience: copied, not drawn
    again (measured: docs/measurements-archive.md, "Fast feedback, continued:
    fewer waits on the critical path")."""
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
    view = report_view(result, audience, leaderboard_alias)
    markdown_path = out_dir / REPORT_FILES["markdown"]
    markdown_path.write_text(markdown_of(view), encoding="utf-8")
    written["markdown"] = markdown_path
    html_path = out_dir / REPORT_FILES["html"]
    html_path.write_text(html_of(view, plot_path.name if plotted else None), encoding="utf-8")
    written["html"] = html_path
    return written
