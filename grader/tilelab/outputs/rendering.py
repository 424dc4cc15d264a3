"""Pages from Jinja templates: the reports here, and through render_page the
leaderboard's and the handout's.

Markdown and HTML pages get the same filters (md, code, code_cell, fence,
from text/markdown.py), which quote untrusted text safely in Markdown; HTML
pages are also autoescaped. A misspelt field in a template fails loudly
(StrictUndefined), never as a blank.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..grading.model import GradeResult
from ..system.warmup import warm_up
from ..text.markdown import md_code, md_fence, md_text
from .report_view import report_view

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
REPORT_FILES = {"markdown": "report.md", "html": "report.html", "plot": "roofline.png"}
REPORT_TEMPLATES = {"markdown": "report.md.j2", "html": "report.html.j2"}

if TYPE_CHECKING:
    import jinja2


@functools.lru_cache(maxsize=None)
def _environment(template_dir: Path, html: bool) -> jinja2.Environment:
    """Jinja for Markdown and HTML pages with the filters that quote
    untrusted text safely in either. One per folder and kind, kept: it keeps
    the templates it compiled (a grading writes the student's and the
    staff's reports, and a batch many). Jinja is imported here, not with
    this module: a check that writes no report never needs it."""
    import jinja2

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
    return markdown_of(report_view(result, audience, leaderboard_alias))


def render_html(result: GradeResult, audience: str = "student", plot_file: Optional[str] = REPORT_FILES["plot"],
                leaderboard_alias: Optional[str] = None) -> str:
    """The report as one standalone HTML page; the roofline plot, when given,
    is referenced by its file name relative to the page."""
    return html_of(report_view(result, audience, leaderboard_alias), plot_file)


def markdown_of(view: dict) -> str:
    """The Markdown report of a view from report_view."""
    return render_page(TEMPLATE_DIR, REPORT_TEMPLATES["markdown"], False, view)


def html_of(view: dict, plot_file: Optional[str]) -> str:
    """The HTML report of a view from report_view, showing `plot_file` when given."""
    return render_page(TEMPLATE_DIR, REPORT_TEMPLATES["html"], True, {**view, "plot_file": plot_file})


@warm_up
def _compile_report_templates() -> None:
    """The report templates compiled while the GPU works, not when the
    reports are written (measured: docs/measurements-archive.md, "Fast
    feedback, continued: fewer waits on the critical path")."""
    _environment(TEMPLATE_DIR, False).get_template(REPORT_TEMPLATES["markdown"])
    _environment(TEMPLATE_DIR, True).get_template(REPORT_TEMPLATES["html"])
