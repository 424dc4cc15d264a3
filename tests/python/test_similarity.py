"""`tilelab similarity` on a class made here (bench/similar_class.py): 30
hand-ins written from solutions/ in styles of their own, two of them copied
with names, tile widths, statement order, comments and indentation
changed, and four that only kept starter/. The copies must rank above
every honest pair in every part, and the starter alone pairs with no one;
the page must escape student code and read in Chromium."""

import csv
import os
import re
import shutil
from pathlib import Path

import pytest
from bench.similar_class import make_class
from click.testing import CliRunner

from tilelab.classwork import similarity as sim
from tilelab.classwork.similarity_normalise import normalise
from tilelab.classwork.similarity_page import CSV_HEADER, line_ranges, page_html, write
from tilelab.cli import main
from tilelab.operations.batch import find_students
from tilelab.spec.assignment import load_assignment

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = load_assignment(ROOT / "assignment.yaml")
SHOTS = ROOT / "docs" / "classwork"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_class(ROOT, tmp_path_factory.mktemp("similarity") / "class", honest=24, copies=2, starter_only=4,
                      seed=35)


@pytest.fixture(scope="module")
def ranking(made):
    """Every pair that shares anything, in every part."""
    return sim.compare_class(ASSIGNMENT, made.folder, find_students(made.folder), ROOT / "starter", top=10_000,
                             threshold=0.0)


def test_the_copies_are_disguised_as_the_issue_says(made):
    """The test's premise: each copy differs from its original in names,
    tile width and statement order, not in what it computes."""
    for original, copy in made.copies:
        mine = (made.folder / original / "tiled.cu").read_text()
        theirs = (made.folder / copy / "tiled.cu").read_text()
        assert "constexpr int TILE_WIDTH = 32;" in mine and "constexpr int TILE_WIDTH = 16;" in theirs
        declared = set(re.findall(r"\bint (\w+) =", mine)) - {"TILE_WIDTH"}
        assert declared and not declared & set(re.findall(r"\bint (\w+) =", theirs)), "every name renamed"
        order, copied = ([re.sub(r"\w+", "w", code) for line in text.splitlines()
                          if (code := re.sub(r"//.*", "", line).strip()).endswith(";")] for text in (mine, theirs))
        assert sorted(order) == sorted(copied) and order != copied, "the same statements, some in another order"


def test_the_copied_pairs_rank_above_every_honest_pair_in_every_part(made, ranking):
    copies = {tuple(sorted(pair)) for pair in made.copies}
    assert len(made.students) == 30 and len(copies) == 2
    for part in ASSIGNMENT.parts:
        pairs = [p for p in ranking.pairs if p.part == part.id]
        scores = {(p.a.student, p.b.student): p.score for p in pairs}
        honest = [s for (a, b), s in scores.items() if (a, b) not in copies]
        assert honest, part.id  # honest hand-ins share fragments: the ranking is not trivial
        assert min(scores[c] for c in copies) > max(honest), part.id
        assert min(scores[c] for c in copies) > 0.95, part.id
        assert {(p.a.student, p.b.student) for p in pairs[:2]} == copies, part.id


def test_hand_ins_that_only_kept_the_starter_pair_with_no_one(made, ranking):
    kept = set(made.starter_only)
    # Half of them changed the starter's comments and indentation: still nothing of their own.
    assert len({(made.folder / s / "tiled.cu").read_text() for s in kept}) > 1
    assert ranking.compared["tiled"] == 30
    assert not [p for p in ranking.pairs if {p.a.student, p.b.student} & kept]


def test_the_shared_lines_are_the_code_not_the_comments(made, ranking):
    original, copy = made.copies[0]
    pair = next(p for p in ranking.pairs if p.part == "tiled" and {p.a.student, p.b.student} == {original, copy})
    side = pair.a if pair.a.student == original else pair.b
    marked = {side.lines[n - 1].strip() for n in side.shared}
    assert "__syncthreads();" in marked and any(line.startswith("for (") for line in marked)
    assert not any(line.startswith("//") for line in marked)


@pytest.mark.parametrize("first, second", [
    # A tile width changed, as a constant and as a literal.
    ("constexpr int T = 32;\n__global__ void k(float* a) { a[threadIdx.x * 32] = 0.0f; }\n",
     "constexpr int T = 16;\n__global__ void k(float* a) { a[threadIdx.x * 16] = 0.0f; }\n"),
    # Independent statements swapped, and what depends on each with them.
    ("__global__ void k(float* P) {\n  int tx = threadIdx.x;\n  int ty = threadIdx.y;\n"
     "  int col = blockIdx.x * 16 + tx;\n  int row = blockIdx.y * 16 + ty;\n  P[row] = col;\n}\n",
     "__global__ void k(float* P) {\n  int ty = threadIdx.y;\n  int r = blockIdx.y * 16 + ty;\n"
     "  int tx = threadIdx.x;\n  int c = blockIdx.x * 16 + tx;\n  P[r] = c;\n}\n"),
    # A declaration of two names moved past one it does not touch.
    ("void f() { const int a = 1 / 2, b = 3; float s = 0.0f; }\n",
     "void f() { float s = 0.0f; const int a = 1 / 2, b = 3; }\n"),
])
def test_what_copying_changes_is_normalised_away(first, second):
    assert normalise(first).text == normalise(second).text


@pytest.mark.parametrize("first, second", [
    # A statement that reads another's result cannot move before it.
    ("void f() { int a = 1; int b = a * 2; }\n", "void f() { int b = a * 2; int a = 1; }\n"),
    # A barrier holds its place: loads after it are not loads before it.
    ("__global__ void k(float* s) { s[0] = 1.0f; __syncthreads(); s[1] = 2.0f; }\n",
     "__global__ void k(float* s) { s[1] = 2.0f; __syncthreads(); s[0] = 1.0f; }\n"),
    # 0 and 1 are part of a loop's shape; 0 and 2 are not the same start.
    ("void f() { for (int i = 0; i < 8; ++i) {} }\n", "void f() { for (int i = 2; i < 8; ++i) {} }\n"),
])
def test_what_changes_a_program_is_not(first, second):
    assert normalise(first).text != normalise(second).text


def test_each_normalised_character_knows_its_line():
    code = "// a comment\n__global__ void k(float* P) {\n  int b = 3;\n  int a = 7;\n}\n"
    normalised = normalise(code)
    assert len(normalised.lines) == len(normalised.text)
    at = {normalised.text[i]: int(normalised.lines[i]) for i in range(len(normalised.text)) if normalised.text[i]
          in "{}"}
    assert at == {"{": 2, "}": 5}
    assert set(normalised.lines.tolist()) == {2, 3, 4, 5}  # the comment is not code


def test_the_csv_ranks_every_listed_pair_most_alike_first(made, tmp_path):
    written = write(tmp_path / "out", sim.compare_class(ASSIGNMENT, made.folder, find_students(made.folder),
                                                        ROOT / "starter", top=3))
    with written[0].open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == CSV_HEADER
    assert len(rows) == 3 * len(ASSIGNMENT.parts)
    scores = [float(r["score"]) for r in rows]
    assert scores == sorted(scores, reverse=True) and scores[0] == pytest.approx(1.0, abs=0.05)
    copies = {tuple(sorted(pair)) for pair in made.copies}
    assert {(r["student A"], r["student B"]) for r in rows[:2 * len(ASSIGNMENT.parts)]} == copies
    assert all(int(r["shared lines"]) > 0 and r["lines in A"] for r in rows)
    assert line_ranges([3, 4, 5, 7, 9, 10]) == "3-5, 7, 9-10"


def _hostile_class(tmp_path: Path) -> Path:
    """Two hand-ins of the same tiled.cu whose comments and strings hold markup."""
    folder = tmp_path / "class"
    hostile = ("// </script><script>alert('x')</script> <b>bold</b> <!--\n"
               + (ROOT / "solutions" / "tiled.cu").read_text().replace("// BEGIN SOLUTION", "// <img src=x>"))
    for name in ("ann", "bob"):
        (folder / name).mkdir(parents=True)
        (folder / name / "tiled.cu").write_text(hostile)
    # A hand-in wrapped in a folder is compared as a grading finds it; a link is never followed.
    (folder / "cat" / "hw3").mkdir(parents=True)
    (folder / "cat" / "hw3" / "tiled.cu").write_text(hostile)
    (folder / "dan").mkdir()
    (folder / "dan" / "tiled.cu").symlink_to(folder / "ann" / "tiled.cu")
    return folder


def test_student_code_is_escaped_and_the_page_says_a_score_is_no_proof(tmp_path):
    folder = _hostile_class(tmp_path)
    ranking = sim.compare_class(ASSIGNMENT, folder, find_students(folder), ROOT / "starter")
    assert {(p.a.student, p.b.student) for p in ranking.pairs} == {("ann", "bob"), ("ann", "cat"), ("bob", "cat")}
    assert any("dan: tiled.cu is a symbolic link" in note for note in ranking.notes)
    page = page_html(ranking, "2026-01-01")
    assert "<script" not in page and "<img" not in page and "<b>bold" not in page and "<!--" not in page
    assert "&lt;/script&gt;&lt;script&gt;alert(" in page
    assert "A score is a reason to look, never proof." in page
    assert "http://" not in page and "https://" not in page


def test_the_page_reads_in_chromium(made, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="skipped: Playwright is not installed")
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        pytest.skip("skipped: no Chromium (apt install chromium)")
    folder = shutil.copytree(made.folder, tmp_path / "class")
    hostile = (_hostile_class(tmp_path / "hostile") / "ann" / "tiled.cu").read_text()
    for name in ("ann", "bob"):  # markup in two hand-ins that pair
        (folder / name).mkdir()
        (folder / name / "naive.cu").write_text(hostile)
    run = CliRunner().invoke(main, ["--root", str(ROOT), "similarity", str(folder), "--out", str(tmp_path / "out"),
                                    "--top", "5"])
    assert run.exit_code == 0, run.output
    assert "ann: no part file" not in run.output and "most alike" in run.output
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.on("dialog", lambda d: pytest.fail(f"student code ran: {d.message}"))
        page.goto((tmp_path / "out" / "similarity.html").as_uri())
        assert all(url.startswith("file:") for url in requests), requests
        assert page.eval_on_selector_all("script, img", "found => found.length") == 0
        assert "A score is a reason to look, never proof." in page.inner_text(".caution")
        original, copy = sorted(made.copies[0])
        pair = page.locator(f"[id='tiled--{original}--{copy}']")
        assert "100 %" in pair.locator("h3").inner_text()
        marked = pair.locator("tr.shared td.n").first.evaluate("td => getComputedStyle(td).backgroundColor")
        plain = pair.locator("tr:not(.shared) td.n").first.evaluate("td => getComputedStyle(td).backgroundColor")
        assert marked != plain
        assert "</script><script>alert('x')</script>" in page.inner_text("[id='naive--ann--bob']")
        if os.environ.get("TILELAB_SCREENSHOTS") == "1":
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.goto((tmp_path / "out" / "similarity.html").as_uri() + "#part-tiled")
            page.screenshot(path=str(SHOTS / "similarity.png"))
        browser.close()


@pytest.mark.parametrize("layout, message", [
    ("missing", "is not a folder"),
    ("empty", "holds no student folders"),
    ("no part files", "holds a part file"),
    ("a hand-in", "holds part files itself"),
    ("out inside", "is inside the class"),
])
def test_a_class_that_cannot_be_compared_is_one_line_and_exit_2(tmp_path, layout, message):
    folder = tmp_path / "class"
    out = tmp_path / "out"
    if layout != "missing":
        folder.mkdir()
    if layout == "no part files":
        (folder / "s001").mkdir()
        (folder / "s001" / "notes.txt").write_text("naive.cu is in my other folder")
    elif layout == "a hand-in":
        (folder / "naive.cu").write_text("// mine\n")
    elif layout == "out inside":
        (folder / "s001").mkdir()
        (folder / "s001" / "naive.cu").write_text("// mine\n")
        out = folder / "out"
    run = CliRunner().invoke(main, ["--root", str(ROOT), "similarity", str(folder), "--out", str(out)])
    assert run.exit_code == 2, run.output
    assert message in run.output and len(run.output.strip().splitlines()) == 1, run.output
    assert not out.exists()
