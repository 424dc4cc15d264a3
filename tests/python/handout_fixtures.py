"""What the handout tests share: the editions' PDFs rendered once per
variant, their text as pdftotext reads it and as a reader sees the HTML,
and the answers and hidden cases that must never reach a student."""

import functools
import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import require_pdf_stack

from tilelab.authoring.handout import render_html, render_pdf
from tilelab.spec.assignment import load_assignment


ANSWER_KEY = Path("solutions") / "answers.yaml"
# Answers that must never reach a student, and that the key is known to hold.
KNOWN_SECRET_ANSWERS = ("388.75", "512000")


def points_text(x: float) -> str:
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def points_with_unit(x: float) -> str:
    return points_text(x) + (" point" if points_text(x) == "1" else " points")


def folded(text: str) -> str:
    """Whitespace folded, so line wrapping in the PDF does not matter."""
    return " ".join(text.split())


def visible_html(page: str) -> str:
    """The HTML as a reader sees it: no tags, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@functools.lru_cache(maxsize=None)
def edition_pdf(root: Path, variant: str, tmp: Path) -> Path:
    """The edition's PDF, rendered once per variant."""
    require_pdf_stack()
    if shutil.which("pdftotext") is None:
        pytest.skip("skipped: pdftotext (poppler-utils) is not installed")
    assignment = load_assignment(root / "assignment.yaml")
    pdf = tmp / f"{variant}.pdf"
    render_pdf(render_html(assignment, root, variant), pdf)
    return pdf


@functools.lru_cache(maxsize=None)
def edition_pdf_text(root: Path, variant: str, tmp: Path, layout: bool = False) -> str:
    """The PDF's text, as pdftotext extracts it; with `layout`, each printed
    line on a line of its own, as it is on the page."""
    pdf = edition_pdf(root, variant, tmp)
    options = ["-layout"] if layout else []
    return subprocess.run(["pdftotext", *options, str(pdf), "-"], check=True, capture_output=True, text=True).stdout


def markdown_row(markdown: str, first_cell: str) -> list:
    """The cells of the Markdown table row whose first cell is `first_cell`."""
    for line in markdown.splitlines():
        if line.startswith(f"| {first_cell} |"):
            return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
    raise AssertionError(f"no table row starts with {first_cell!r}")


def part_section(markdown: str, assignment, part_id: str) -> str:
    """The Markdown of one part, from its heading to the next part's."""
    ids = [p.id for p in assignment.parts]
    number = ids.index(part_id) + 1
    start = markdown.index(f"### Part {number}: ")
    end = markdown.index(f"### Part {number + 1}: ") if number < len(ids) else markdown.index("## 3. Rubric")
    return markdown[start:end]


def secret_answers(root: Path) -> list:
    """Answers in the key distinctive enough to test for: at least four
    characters, and written nowhere a student may look (assignment.yaml, the
    starter files), so finding one in a handout means the key leaked."""
    key = yaml.safe_load((root / ANSWER_KEY).read_text(encoding="utf-8"))
    public_text = (root / "assignment.yaml").read_text(encoding="utf-8")
    public_text += "".join(p.read_text(encoding="utf-8") for p in sorted((root / "starter").iterdir()))
    return [str(v) for v in key.values() if len(str(v)) >= 4 and str(v) not in public_text]


def hidden_only(assignment) -> tuple:
    """Hidden case names and j x k x l sizes that no public or timing case of
    any part shares (a shared one is no secret)."""
    shown = [c for p in assignment.parts for s in ("public", "timing") for c in p.cases[s]]
    shown_names = {c.name for c in shown}
    shown_sizes = {(c.j, c.k, c.l) for c in shown}
    hidden = [c for p in assignment.parts for c in p.cases["hidden"]]
    names = sorted({c.name for c in hidden if c.name not in shown_names})
    sizes = sorted({f"{c.j} × {c.k} × {c.l}" for c in hidden if (c.j, c.k, c.l) not in shown_sizes})
    return names, sizes


def mentions_name(text: str, name: str) -> bool:
    # Case names are letters, digits and '-': w17 inside w170 is another name.
    return re.search(rf"(?<![A-Za-z0-9_-]){re.escape(name)}(?![A-Za-z0-9_-])", text) is not None


def edited_project(root: Path, tmp_path: Path, edit) -> Path:
    """A copy of the project's handout inputs with assignment.yaml edited by `edit(doc)`."""
    copy = tmp_path / "project"
    copy.mkdir()
    for folder in ("starter", "solutions", "handouts"):
        shutil.copytree(root / folder, copy / folder)
    doc = yaml.safe_load((root / "assignment.yaml").read_text(encoding="utf-8"))
    edit(doc)
    (copy / "assignment.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return copy
