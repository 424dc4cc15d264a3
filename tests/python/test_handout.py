"""The handout is generated from assignment.yaml, the starter files,
handouts/reference-gpu.yaml and (TA edition) the answer key and the
solutions: its numbers must be theirs, an edit to assignment.yaml must show
with no other edit, the student edition must give away no answer, no hidden
case and no solution code, its figures must be drawn from the assignment's
numbers, and no code line may break in the PDF."""

import base64
import functools
import html
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import require_pdf_stack

from tilelab.authoring.handout import (HandoutError, reference_gpu, render_html, render_markdown, render_pdf,
                                       write_handouts)
from tilelab.authoring.handout_code import CODE_PT, CODE_WIDTH_PT, MONO_ADVANCE_EM, CodeError, fitting_pt, part_excerpts
from tilelab.authoring.handout_figures import (boundary_grid_spec, dynamic_tiles_spec, handout_figures, png,
                                               tile_phases_spec)
from tilelab.authoring.starter import solution_region_lines
from tilelab.text.markdown import md_text
from tilelab.text.numbers import fmt_intensity, fmt_percent
from tilelab.grading.answer_key import key_working
from tilelab.spec.assignment import load_assignment
from tilelab.spec.reference_gpu import published_gflops

ANSWER_KEY = Path("solutions") / "answers.yaml"
# Answers that must never reach a student, and that the key is known to hold.
KNOWN_SECRET_ANSWERS = ("388.75", "512000")


def _points(x: float) -> str:
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def _points_unit(x: float) -> str:
    return _points(x) + (" point" if _points(x) == "1" else " points")


def _flat(text: str) -> str:
    """Whitespace folded, so line wrapping in the PDF does not matter."""
    return " ".join(text.split())


def _visible_html(page: str) -> str:
    """The HTML as a reader sees it: no tags, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@functools.lru_cache(maxsize=None)
def _pdf(root: Path, variant: str, tmp: Path) -> Path:
    """The edition's PDF, rendered once per variant."""
    require_pdf_stack()
    if shutil.which("pdftotext") is None:
        pytest.skip("skipped: pdftotext (poppler-utils) is not installed")
    assignment = load_assignment(root / "assignment.yaml")
    pdf = tmp / f"{variant}.pdf"
    render_pdf(render_html(assignment, root, variant), pdf)
    return pdf


@functools.lru_cache(maxsize=None)
def _pdf_text(root: Path, variant: str, tmp: Path, layout: bool = False) -> str:
    """The PDF's text, as pdftotext extracts it; with `layout`, each printed
    line on a line of its own, as it is on the page."""
    pdf = _pdf(root, variant, tmp)
    options = ["-layout"] if layout else []
    return subprocess.run(["pdftotext", *options, str(pdf), "-"], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="session")
def pdf_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("handout-pdf")


@pytest.fixture
def assignment(root):
    return load_assignment(root / "assignment.yaml")


def _markdown_row(markdown: str, first_cell: str) -> list:
    """The cells of the Markdown table row whose first cell is `first_cell`."""
    for line in markdown.splitlines():
        if line.startswith(f"| {first_cell} |"):
            return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
    raise AssertionError(f"no table row starts with {first_cell!r}")


def _part_section(markdown: str, assignment, part_id: str) -> str:
    """The Markdown of one part, from its heading to the next part's."""
    ids = [p.id for p in assignment.parts]
    number = ids.index(part_id) + 1
    start = markdown.index(f"### Part {number}: ")
    end = markdown.index(f"### Part {number + 1}: ") if number < len(ids) else markdown.index("## 3. Rubric")
    return markdown[start:end]


def _secret_answers(root: Path) -> list:
    """Answers in the key distinctive enough to test for: at least four
    characters, and written nowhere a student may look (assignment.yaml, the
    starter files), so finding one in a handout means the key leaked."""
    key = yaml.safe_load((root / ANSWER_KEY).read_text(encoding="utf-8"))
    public_text = (root / "assignment.yaml").read_text(encoding="utf-8")
    public_text += "".join(p.read_text(encoding="utf-8") for p in sorted((root / "starter").iterdir()))
    return [str(v) for v in key.values() if len(str(v)) >= 4 and str(v) not in public_text]


def _hidden_only(assignment) -> tuple:
    """Hidden case names and j x k x l sizes that no public or timing case of
    any part shares (a shared one is no secret)."""
    shown = [c for p in assignment.parts for s in ("public", "timing") for c in p.cases[s]]
    shown_names = {c.name for c in shown}
    shown_sizes = {(c.j, c.k, c.l) for c in shown}
    hidden = [c for p in assignment.parts for c in p.cases["hidden"]]
    names = sorted({c.name for c in hidden if c.name not in shown_names})
    sizes = sorted({f"{c.j} × {c.k} × {c.l}" for c in hidden if (c.j, c.k, c.l) not in shown_sizes})
    return names, sizes


def _mentions(text: str, name: str) -> bool:
    # Case names are letters, digits and '-': w17 inside w170 is another name.
    return re.search(rf"(?<![A-Za-z0-9_-]){re.escape(name)}(?![A-Za-z0-9_-])", text) is not None


# --- the rubric ------------------------------------------------------------------------


def test_the_rubric_has_the_points_of_assignment_yaml(root, assignment):
    markdown = render_markdown(assignment, root)
    for part in assignment.parts:
        correctness, speed = part.points["correctness"], part.points["speed"]
        if part.extra_credit:
            row = _markdown_row(markdown, md_text(f"{part.id}: {part.title} (extra credit)"))
            assert row[1:] == [_points(correctness), _points(speed), f"+{_points(correctness + speed)}"]
        else:
            row = _markdown_row(markdown, md_text(f"{part.id}: {part.title}"))
            assert row[1:] == [_points(correctness), _points(speed), _points(correctness + speed)]
    # An extra-credit part is shown, but its points are not in the total (Part.counted_max).
    counted = [p for p in assignment.parts if not p.extra_credit]
    parts_total = sum(p.counted_max for p in assignment.parts)
    automatic = [q for q in assignment.questions if q.kind != "text"]
    questions_total = sum(q.points for q in automatic)
    assert _markdown_row(markdown, "all parts")[1:] == [_points(sum(p.points["correctness"] for p in counted)),
                                                        _points(sum(p.points["speed"] for p in counted)),
                                                        _points(parts_total)]
    assert _markdown_row(markdown, f"exercise questions graded automatically ({len(automatic)} of "
                                   f"{len(assignment.questions)})")[3] == _points(questions_total)
    assert _markdown_row(markdown, "**total**")[3] == f"**{_points(parts_total + questions_total)}**"

    page = _visible_html(render_html(assignment, root))
    assert _flat(f"total {_points(parts_total + questions_total)}") in _flat(page)


def test_the_real_rubric_keeps_the_challenge_out_of_its_total(root, assignment):
    # assignment.yaml: parts 1 to 5 are worth 15 + 25 + 20 + 20 + 20 = 100, the 34
    # automatic questions 1 each; the challenge's 5 + 15 are extra credit.
    markdown = render_markdown(assignment, root)
    assert _markdown_row(markdown, "all parts")[1:] == ["70", "30", "100"]
    assert _markdown_row(markdown, "**total**")[3] == "**134**"
    assert _markdown_row(markdown, "challenge: Challenge: toward cuBLAS (extra credit)")[1:] == ["5", "15", "+20"]
    assert "Part 6 (`challenge`) is extra credit: its 20 points come on top of the total of 134" in markdown
    page = _flat(_visible_html(render_html(assignment, root)))
    assert "challenge: Challenge: toward cuBLAS (extra credit) 5 15 +20" in page
    assert "is extra credit: its 20 points come on top of the total of 134" in page


def _timing_rows(markdown: str, part_id: str) -> list:
    """The cells of every speed-table row of a part, in the order printed."""
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in markdown.splitlines()
            if line.startswith(f"| {md_text(part_id)} | ")]


def test_the_speed_targets_come_from_assignment_yaml_and_the_reference_gpu(root, assignment):
    gpu = reference_gpu(root)
    assert set(gpu["reference"]) == {p.id for p in assignment.parts} | {"cublas"}
    markdown = render_markdown(assignment, root)
    rule = assignment.speed
    for part in assignment.parts:
        rows = _timing_rows(markdown, part.id)
        assert [row[1] for row in rows] == [f"{c.j} × {c.k} × {c.l}" for c in part.cases["timing"]], part.id
        for case, row in zip(part.cases["timing"], rows):
            size = (case.j, case.k, case.l)
            reference = published_gflops(gpu, part.id, size)
            if part.versus_cublas is None:
                assert row[4] == f"{reference:,.0f}"
                assert row[5] == fmt_percent(reference / gpu["fp32_fma_gflops"])
                assert row[6] == f"{rule.full_at * reference:,.0f}"
                assert row[7] == f"{rule.zero_at * reference:,.0f}"
                continue
            # Against cuBLAS: from full_at x cuBLAS, none at or below the first
            # reference of zero_at_reference_of timed at this size.
            cublas = published_gflops(gpu, "cublas", size)
            floor = next(p for p in part.versus_cublas.zero_at_reference_of if published_gflops(gpu, p, size))
            assert row[2] == f"{cublas:,.0f}"
            assert row[3] == fmt_percent(cublas / gpu["fp32_fma_gflops"])
            assert row[4] == f"{part.versus_cublas.full_at * cublas:,.0f}"
            assert row[5] == f"{published_gflops(gpu, floor, size):,.0f}"
            assert row[6] == f"`{floor}`"
            assert row[7] == f"{reference:,.0f} ({fmt_percent(reference / cublas)})"
    assert f"{gpu['fp32_fma_gflops']:,.0f} GFLOP/s" in markdown
    assert f"from {100 * rule.full_at:.0f} % of the reference's rate" in markdown


def test_the_challenge_rows_are_scored_against_cublas_not_its_reference(root, assignment):
    # handouts/reference-gpu.yaml (H100, 2026-11-22): cuBLAS 51,661 and 51,929 GFLOP/s,
    # tiled 9,256, rectangular 9,076, the challenge reference 47,670 and 47,833;
    # assignment.yaml: full credit from 0.8 x cuBLAS.
    markdown = render_markdown(assignment, root)
    assert _timing_rows(markdown, "challenge") == [
        ["challenge", "4096 × 4096 × 4096", "51,661", "78.7 %", "41,329", "9,256", "`tiled`", "47,670 (92.3 %)"],
        ["challenge", "2048 × 4096 × 8192", "51,929", "79.1 %", "41,543", "9,076", "`rectangular`",
         "47,833 (92.1 %)"],
    ]
    page = _flat(_visible_html(render_html(assignment, root)))
    assert "challenge 4096 × 4096 × 4096 51,661 78.7 % 41,329 9,256 tiled 47,670 (92.3 %)" in page
    assert "challenge 2048 × 4096 × 8192 51,929 79.1 % 41,543 9,076 rectangular 47,833 (92.1 %)" in page


# Each level's row of the roofline table, nearest the threads first, and the key of its bandwidth.
LEVEL_ROWS = (("shared memory, all SMs together", "shared_gbps"), ("L2 cache", "l2_gbps"), ("DRAM", "dram_gbps"))


def test_the_roofline_shows_each_level_of_the_reference_gpu_with_its_ridge_point(root, assignment):
    # handouts/reference-gpu.yaml: FP32 65,637 GFLOP/s; tilelab-roofline on an
    # H100 80GB HBM3: shared memory 32,911 GB/s, L2 7,307; DRAM 3,036.
    gpu = reference_gpu(root)
    markdown = render_markdown(assignment, root)
    assert _markdown_row(markdown, "FP32 arithmetic (FMA)") == ["FP32 arithmetic (FMA)", "65,637 GFLOP/s", ""]
    assert [_markdown_row(markdown, label)[1:] for label, _ in LEVEL_ROWS] == \
        [["32,911 GB/s", "1.99"], ["7,307 GB/s", "8.98"], ["3,036 GB/s", "21.6"]]
    for label, key in LEVEL_ROWS:
        assert _markdown_row(markdown, label)[2] == fmt_intensity(gpu["fp32_fma_gflops"] / gpu[key])
    # Nearest the threads first, as the report's traffic figures are.
    rows = [markdown.index(f"| {label} |") for label in ["FP32 arithmetic (FMA)"] + [l for l, _ in LEVEL_ROWS]]
    assert rows == sorted(rows)
    page = _flat(_visible_html(render_html(assignment, root)))
    assert "FP32 arithmetic (FMA) 65,637 GFLOP/s shared memory, all SMs together 32,911 GB/s 1.99 L2 cache " \
           "7,307 GB/s 8.98 DRAM 3,036 GB/s 21.6" in page
    # Which level the lecture's figures belong to.
    sentence = ("The lecture's 0.25 FLOP/B for the naive kernel, and T/4 with T × T tiles, count global loads as "
                "the threads ask for them")
    assert sentence in markdown and sentence in page
    assert "so each bound is the FP32 rate itself. The reference solutions and the targets" in _flat(page)


def test_the_on_chip_bandwidths_come_from_the_reference_gpu_file(root, tmp_path, assignment):
    project = _edited_project(root, tmp_path, lambda doc: None)
    path = project / "handouts" / "reference-gpu.yaml"
    text = path.read_text()
    path.write_text(text.replace("\nl2_gbps: 7307\n", "\nl2_gbps: 6000\n"))
    assert _markdown_row(render_markdown(assignment, project), "L2 cache") == ["L2 cache", "6,000 GB/s", "10.9"]
    path.write_text(text.replace("\nshared_gbps: 32911\n", "\n"))
    with pytest.raises(HandoutError, match=r"reference-gpu\.yaml: missing 'shared_gbps'"):
        render_markdown(assignment, project)
    path.write_text(text.replace("\nl2_gbps: 7307\n", "\nl2_gbps: fast\n"))
    with pytest.raises(HandoutError, match=r"l2_gbps: must be a positive number, got 'fast'"):
        render_markdown(assignment, project)


# --- an edit to assignment.yaml shows with no other edit -----------------------------------


def _edited_project(root: Path, tmp_path: Path, edit) -> Path:
    """A copy of the project's handout inputs with assignment.yaml edited by `edit(doc)`."""
    copy = tmp_path / "project"
    copy.mkdir()
    for folder in ("starter", "solutions", "handouts"):
        shutil.copytree(root / folder, copy / folder)
    doc = yaml.safe_load((root / "assignment.yaml").read_text(encoding="utf-8"))
    edit(doc)
    (copy / "assignment.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return copy


def test_changed_points_and_sizes_in_assignment_yaml_change_the_handout(root, assignment, tmp_path):
    naive = assignment.part("naive")
    old_public = [c.j for c in naive.cases["public"] if c.distribution == "uniform"]
    replaced, replacement = old_public[-1], old_public[-1] + 1  # a size the naive part does not list
    assert replacement not in [c.j for c in naive.cases["public"]]

    def edit(doc):
        part = next(p for p in doc["parts"] if p["id"] == "naive")
        part["points"]["correctness"] += 3
        part["cases"]["public"] = [replacement if c == replaced else c for c in part["cases"]["public"]]
        doc["grading"]["speed"]["full_at"] = 0.85

    project = _edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    before, after = render_markdown(assignment, root), render_markdown(edited, project)

    label = md_text(f"naive: {naive.title}")
    old_row, new_row = _markdown_row(before, label), _markdown_row(after, label)
    assert float(new_row[1]) == float(old_row[1]) + 3
    assert float(new_row[3]) == float(old_row[3]) + 3
    assert float(_markdown_row(after, "all parts")[3]) == float(_markdown_row(before, "all parts")[3]) + 3

    uniform_line = next(line for line in _part_section(after, edited, "naive").splitlines()
                        if line.startswith("- uniform inputs"))
    sizes = uniform_line.split(": ", 1)[1].split(", ")
    assert str(replacement) in sizes and str(replaced) not in sizes

    gpu = reference_gpu(project)
    new_target = 0.85 * published_gflops(gpu, "tiled", (4096, 4096, 4096))
    assert _markdown_row(after, "tiled")[6] == f"{new_target:,.0f}"

    page = _visible_html(render_html(edited, project))
    assert str(replacement) in page and _flat(f"{new_row[1]} for correctness") in _flat(page)


def test_the_challenge_rule_and_standing_in_assignment_yaml_change_the_handout(root, tmp_path):
    def edit(doc):
        part = next(p for p in doc["parts"] if p["id"] == "challenge")
        part["versus_cublas"]["full_at"] = 0.9
        part["points"]["extra_credit"] = False
        doc["grading"]["leaderboard"]["names"] = "name"

    project = _edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    markdown = render_markdown(edited, project)
    # 0.9 x cuBLAS 51,661 (reference-gpu.yaml)
    assert _timing_rows(markdown, "challenge")[0][4] == f"{0.9 * 51661:,.0f}"
    assert "All the speed points from 90 % of cuBLAS's rate" in markdown
    # Counted now: in the total, and no longer called extra credit.
    assert _markdown_row(markdown, "challenge: Challenge: toward cuBLAS")[1:] == ["5", "15", "20"]
    assert _markdown_row(markdown, "all parts")[3] == "120"
    assert "extra credit" not in markdown
    assert "lists each hand-in under the name it was handed in as" in markdown


@pytest.mark.parametrize("extra_credit", [True, False])
def test_a_challenge_without_points_is_on_the_leaderboard_only(root, tmp_path, extra_credit):
    def edit(doc):
        part = next(p for p in doc["parts"] if p["id"] == "challenge")
        part["points"] = {"correctness": 0, "speed": 0, "extra_credit": extra_credit}

    project = _edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    markdown = render_markdown(edited, project)
    assert "**Points:** none; this part counts for the leaderboard only." in markdown
    assert _markdown_row(markdown, "challenge: Challenge: toward cuBLAS (leaderboard only)")[1:] == ["0", "0", "0"]
    assert "| challenge: Challenge: toward cuBLAS |" not in markdown
    assert "Part 6 (`challenge`) earns no points: it is there for the leaderboard." in markdown
    assert "extra credit" not in markdown
    assert _markdown_row(markdown, "all parts")[3] == "100"
    assert "for the leaderboard only." in _flat(_visible_html(render_html(edited, project)))


def test_text_from_assignment_yaml_is_escaped_in_tables_and_html(root, tmp_path):
    def edit(doc):
        doc["parts"][0]["title"] = "Naive | <b>kernel</b>"

    project = _edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    markdown = render_markdown(edited, project)
    row = _markdown_row(markdown, md_text(f"{edited.parts[0].id}: Naive | <b>kernel</b>"))
    assert len(row) == 4  # the '|' of the title did not split the row
    page = render_html(edited, project)
    assert "<b>kernel</b>" not in page and "&lt;b&gt;kernel&lt;/b&gt;" in page


def test_a_copy_without_hidden_cases_says_so(root, tmp_path):
    # The student bundle's assignment.yaml lists no hidden cases.
    def edit(doc):
        for part in doc["parts"]:
            part["cases"]["hidden"] = []

    project = _edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    for variant in ("student", "ta"):
        markdown = render_markdown(edited, project, variant)
        assert markdown.count("**Hidden cases:** none") == len(edited.parts)
        assert "| hidden case |" not in markdown
    naive = edited.part("naive")
    per_case = _points_unit(naive.points["correctness"] / len(naive.cases["public"]))
    assert (f"Each public case is worth {per_case} of the part's {_points(naive.points['correctness'])} correctness "
            "points.") in render_markdown(edited, project)


# --- everything a student needs is in every format ---------------------------------------------


def _required_texts(assignment) -> list:
    texts = []
    for part in assignment.parts:
        texts += [part.id, part.title, part.declaration]
    texts += [q.id for q in assignment.questions]
    return texts


@pytest.mark.parametrize("variant", ["student", "ta"])
def test_every_part_declaration_and_question_is_in_markdown_and_html(root, assignment, variant):
    markdown = render_markdown(assignment, root, variant)
    page = _flat(_visible_html(render_html(assignment, root, variant)))
    for text in _required_texts(assignment):
        assert text in markdown, text
        assert _flat(text) in page, text


@pytest.mark.parametrize("variant", ["student", "ta"])
def test_every_part_declaration_and_question_is_in_the_pdf(root, assignment, pdf_dir, variant):
    text = _flat(_pdf_text(root, variant, pdf_dir))
    for expected in _required_texts(assignment):
        assert _flat(expected) in text, expected


# --- no answer and no hidden case reaches a student ----------------------------------------------


def test_the_answer_key_has_distinctive_answers_to_look_for(root):
    secrets = _secret_answers(root)
    for answer in KNOWN_SECRET_ANSWERS:
        assert answer in secrets
    assert len(secrets) >= 5


def test_the_student_edition_holds_no_answer_and_no_hidden_case(root, assignment, pdf_dir):
    names, sizes = _hidden_only(assignment)
    assert names and sizes
    outputs = {
        "markdown": render_markdown(assignment, root, "student"),
        "html": _visible_html(render_html(assignment, root, "student")),
        "pdf": _pdf_text(root, "student", pdf_dir),
    }
    for fmt, text in outputs.items():
        flat = _flat(text)
        assert "Answer key" not in text, fmt
        for answer in _secret_answers(root):
            assert _flat(answer) not in flat and _flat(md_text(answer)) not in flat, (fmt, answer)
        for name in names:
            assert not _mentions(text, name), (fmt, name)
        for size in sizes:
            assert size not in flat, (fmt, size)


def test_the_ta_edition_holds_every_answer_and_every_hidden_case(root, assignment, pdf_dir):
    names, sizes = _hidden_only(assignment)
    markdown = render_markdown(assignment, root, "ta")
    page = _flat(_visible_html(render_html(assignment, root, "ta")))
    pdf = _flat(_pdf_text(root, "ta", pdf_dir))
    for answer in _secret_answers(root):
        assert _flat(md_text(answer)) in _flat(markdown), answer
        assert _flat(answer) in page, answer
    for answer in KNOWN_SECRET_ANSWERS:
        assert answer in pdf
    for part in assignment.parts:
        for case in part.cases["hidden"]:
            assert _mentions(markdown, case.name) and _mentions(page, case.name), case.name
    for size in sizes:
        assert size in _flat(markdown) and size in page
    # Each sanitizer set is a list item of its own.
    assert not re.search(r"\S- \*compute-sanitizer", markdown)


def test_the_student_edition_says_how_many_hidden_cases_each_part_has(root, assignment):
    markdown = render_markdown(assignment, root)
    for part in assignment.parts:
        section = _part_section(markdown, assignment, part.id)
        assert f"**Hidden cases:** {len(part.cases['hidden'])} more" in section
        public = [str(c.j) if part.signature == "square" else f"{c.j} × {c.k} × {c.l}"
                  for c in part.cases["public"]]
        listed = [size for line in section.splitlines() if line.startswith("- ")
                  for size in line.split(": ", 1)[1].split(", ")]
        assert sorted(listed) == sorted(public), part.id


# --- the challenge part ---------------------------------------------------------------------------


def test_the_challenge_section_says_how_it_is_scored_and_what_standing_it_has(root, assignment):
    markdown = render_markdown(assignment, root)
    section = _flat(_part_section(markdown, assignment, "challenge"))
    page = _flat(_visible_html(render_html(assignment, root)))
    sentences = [
        "**Points:** 5 for correctness, 15 for speed, as extra credit: they come on top of the total in section 3",
        "not compared with its reference solution but with cuBLAS SGEMM in FP32 (no TF32), which the grader times "
        "at the same sizes on the grading GPU",
        "All the speed points from 80 % of cuBLAS's rate; none at or below the rate of the reference solution of "
        "`tiled` or `rectangular` at that size (whichever is timed there)",
        "Timed at several sizes, the part gets the geometric mean of its fractions.",
        "**The starter works:** unlike the other parts, `starter/challenge.cu` is a correct kernel",
        "Gradescope asks for a pseudonym when you hand in",
        "The class leaderboard that the course staff make with `tilelab batch` lists each hand-in under a stable "
        "alias, never a name (your report tells you yours).",
    ]
    for sentence in sentences:
        assert sentence in section, sentence
        # The HTML says the same; its markup shows as spaces around code.
        words = sentence.replace("**", "").replace("`", "").replace("(", "( ").replace(")", " )")
        assert _flat(words) in _flat(page.replace("(", "( ").replace(")", " )")), sentence
    assert "Part 6 (`challenge`) then goes past the textbook toward the speed of cuBLAS, for extra credit." \
        in markdown


def test_the_ladder_shows_each_rung_as_a_share_of_cublas(root, assignment):
    # handouts/reference-gpu.yaml, from docs/measurements-archive.md ("Challenge part", H100,
    # 4096^3): the tiled reference, rungs 1 to 6 and the challenge reference against
    # cuBLAS SGEMM's 51,661 GFLOP/s.
    gpu = reference_gpu(root)
    ladder = gpu["ladder"]["challenge"]
    assert ladder["size"] == (4096, 4096, 4096) and published_gflops(gpu, "cublas", ladder["size"]) == 51661
    section = _part_section(render_markdown(assignment, root), assignment, "challenge")
    steps = ["start", "1", "2", "3", "4", "5", "6", "reference"]
    rows = [line.split(" | ") for line in section.splitlines()
            if line.startswith("| ") and line.split(" | ")[0][2:] in steps]
    assert [row[0][2:] for row in rows] == steps
    assert [row[2] for row in rows] == ["9,256", "16,101", "16,222", "23,355", "32,418", "35,467", "36,843", "47,670"]
    assert [row[3].rstrip(" |") for row in rows] == \
        ["17.9 %", "31.2 %", "31.4 %", "45.2 %", "62.8 %", "68.7 %", "71.3 %", "92.3 %"]
    assert [row[1] for row in rows[1:-1]] == [md_text(r["technique"]) for r in ladder["rungs"]]
    assert "solutions/" not in section  # students have no solutions/


def test_the_ta_edition_names_each_rungs_kernel(root, assignment):
    ladder = reference_gpu(root)["ladder"]["challenge"]
    section = _part_section(render_markdown(assignment, root, "ta"), assignment, "challenge")
    for rung in ladder["rungs"]:
        assert (root / rung["file"]).is_file(), rung["file"]
        assert f"`{rung['file']}`" in section
    assert "`solutions/tiled.cu`" in section and "`solutions/challenge.cu`" in section
    page = _flat(_visible_html(render_html(assignment, root, "ta")))
    assert all(rung["file"] in page for rung in ladder["rungs"])


def test_a_broken_ladder_is_named(root, tmp_path, assignment):
    project = _edited_project(root, tmp_path, lambda doc: None)
    path = project / "handouts" / "reference-gpu.yaml"
    path.write_text(path.read_text().replace("        gflops: 16101\n", ""))
    with pytest.raises(HandoutError, match=r"ladder\.challenge\.rungs\[0\]: must be \{technique"):
        render_markdown(assignment, project)


# --- the TA edition's key --------------------------------------------------------------------------


def test_the_ta_edition_gives_the_working_under_each_answer(root, assignment):
    working = key_working(root / ANSWER_KEY)
    markdown = render_markdown(assignment, root, "ta")
    page = _flat(_visible_html(render_html(assignment, root, "ta")))
    for qid, text in working.items():
        assert f"> *Working:* {md_text(text)}" in markdown, qid
        assert _flat(f"Working: {text}") in page, qid
    # The answer first, then how it comes; whole numbers in full.
    ids = [q.id for q in assignment.questions]
    for qid, answer, working_text in [("naive-roof", "388.75", "0.25 FLOP/B x 1555 GB/s = 388.75 GFLOP/s"),
                                      ("regtile-global", "1073741824", "2 N^3 / L = 2^37 / 2^7 = 2^30")]:
        block = markdown[markdown.index(f"**{ids.index(qid) + 1}. `{qid}`**"):]
        assert block.index(f"> **Answer key:** {answer}\n") < block.index(working_text), qid
    student = render_markdown(assignment, root)
    assert "Working" not in student and "0.25 FLOP/B x 1555 GB/s" not in student
    assert "2^30 = 1,073,741,824" not in student


# --- the starter code and the question code ---------------------------------------------------


def _fenced_blocks(markdown: str) -> list:
    """The code of every ```cuda block, as lists of lines."""
    return [block.split("\n") for block in re.findall(r"^```cuda\n(.*?)\n```$", markdown, re.M | re.S)]


def _is_run_of(block: list, lines: list) -> bool:
    """Whether `block` is a run of consecutive lines of `lines`."""
    return any(lines[i:i + len(block)] == block for i in range(len(lines) - len(block) + 1))


def test_each_part_shows_the_functions_that_hold_its_todos_not_the_whole_file(root, assignment):
    markdown = render_markdown(assignment, root)
    page = html.unescape(render_html(assignment, root))
    for part in assignment.parts:
        lines = (root / "starter" / part.file).read_text(encoding="utf-8").splitlines()
        section = _part_section(markdown, assignment, part.id)
        blocks = [b for b in _fenced_blocks(section) if b != [part.declaration]]
        assert blocks, part.id
        for block in blocks:
            assert _is_run_of(block, lines), (part.id, block[0])
            assert "\n".join(block) in page, (part.id, block[0])
        shown = [line for block in blocks for line in block]
        # Every TODO and the launcher are there; the contract comment at the top is not.
        for line in lines:
            if "TODO(student)" in line or line.startswith(f"void {part.launcher}("):
                assert line in shown, (part.id, line)
        assert lines[0] not in shown and len(shown) < len(lines), part.id
        assert f"is `starter/{part.file}`." in _flat(section), part.id


def _distinctive_solution_lines(root: Path, part) -> list:
    """Lines of a part's solution regions that no starter file and not
    assignment.yaml holds: finding one in a handout means it shows the solution."""
    public = set()
    for path in sorted((root / "starter").iterdir()):
        public |= {line.strip() for line in path.read_text(encoding="utf-8").splitlines()}
    yaml_text = (root / "assignment.yaml").read_text(encoding="utf-8")
    region = solution_region_lines((root / "solutions" / part.file).read_text(encoding="utf-8"))
    return [line.strip() for line in region
            if len(line.strip()) >= 12 and line.strip() not in public and line.strip() not in yaml_text]


def test_the_student_edition_holds_no_solution_code_and_the_ta_edition_all_of_it(root, assignment):
    student = render_markdown(assignment, root, "student")
    student_page = html.unescape(render_html(assignment, root, "student"))
    ta = render_markdown(assignment, root, "ta")
    ta_page = html.unescape(render_html(assignment, root, "ta"))
    total = 0
    for part in assignment.parts:
        lines = _distinctive_solution_lines(root, part)
        assert lines, part.id
        total += len(lines)
        for line in lines:
            assert line not in student and line not in student_page, (part.id, line)
            assert line in ta and line in ta_page, (part.id, line)
        section = _part_section(ta, assignment, part.id)
        assert f"solutions/{part.file}, lines " in section and "// BEGIN SOLUTION" not in section, part.id
    assert total > 150  # the challenge's reference alone is longer


def test_the_pdfs_hold_the_solution_code_of_their_edition_only(root, assignment, pdf_dir):
    # -layout: a printed line stays one line; without it pdftotext may set a
    # line's trailing comment apart as a block of its own, wherever it lands on the page.
    student = _flat(_pdf_text(root, "student", pdf_dir, layout=True))
    ta = _flat(_pdf_text(root, "ta", pdf_dir, layout=True))
    for part in assignment.parts:
        for line in _distinctive_solution_lines(root, part):
            assert _flat(line) not in student, (part.id, line)
            assert _flat(line) in ta, (part.id, line)


def _shown_code_lines(root: Path, assignment, variant: str) -> list:
    """Every line of code the edition prints in a code block."""
    lines = [part.declaration for part in assignment.parts]
    for part in assignment.parts:
        for excerpt in part_excerpts(root, part, variant == "ta"):
            lines += excerpt.lines
    for code in assignment.question_code.values():
        lines += code.splitlines()
    return [line for line in lines if line.strip()]


@pytest.mark.parametrize("variant", ["student", "ta"])
def test_no_code_line_breaks_in_the_pdf(root, assignment, pdf_dir, variant):
    # pdftotext -layout keeps each printed line a line: a code line that
    # wrapped would be found only in two pieces. Spaces are left out of the
    # comparison, since pdftotext spaces monospaced text as it likes.
    printed = {re.sub(r"\s+", "", line) for line in _pdf_text(root, variant, pdf_dir, layout=True).splitlines()}
    printed_text = "\n".join(printed)
    for line in _shown_code_lines(root, assignment, variant):
        squeezed = re.sub(r"\s+", "", line)
        assert any(squeezed in p for p in printed if len(p) >= len(squeezed)), line
    # The longest shown line is there whole too (the check above would find nothing to split in short ones).
    longest = max(_shown_code_lines(root, assignment, variant), key=len)
    assert len(longest) > 100 and re.sub(r"\s+", "", longest) in printed_text


def test_a_code_block_is_set_small_enough_for_its_longest_line():
    assert fitting_pt(["x" * 60]) == CODE_PT
    for length in (110, 122, 130):
        size = fitting_pt(["x" * length])
        assert size < CODE_PT and length * MONO_ADVANCE_EM * size <= CODE_WIDTH_PT
    with pytest.raises(CodeError, match="200 characters"):
        fitting_pt(["x" * 200], where="starter/naive.cu")


def test_a_code_line_too_long_to_print_is_named(root, tmp_path, assignment):
    project = _edited_project(root, tmp_path, lambda doc: None)
    path = project / "starter" / "naive.cu"
    long_line = "  // " + "a very long comment " * 10
    path.write_text(path.read_text().replace("  TILELAB_TODO(", long_line + "\n  TILELAB_TODO(", 1))
    with pytest.raises(HandoutError, match=r"starter/naive\.cu, lines 31–37: a line of 205 characters"):
        render_markdown(assignment, project)


def test_the_tiled_todo_lines_appear_verbatim_in_every_format(root, assignment, pdf_dir):
    lines = (root / "starter" / "tiled.cu").read_text(encoding="utf-8").splitlines()
    todo = [line for line in lines if "TODO(student)" in line]
    assert todo
    markdown = render_markdown(assignment, root)
    page = html.unescape(render_html(assignment, root))
    pdf = _flat(_pdf_text(root, "student", pdf_dir))
    for line in todo:
        assert line in markdown.splitlines()
        assert line in page.splitlines()
        assert _flat(line) in pdf


def test_question_code_comes_just_before_the_first_question_that_refers_to_it(root, assignment):
    markdown = render_markdown(assignment, root)
    question_at = {q.id: markdown.index(f"**{n}. `{q.id}`**")
                   for n, q in enumerate(assignment.questions, start=1)}
    first_reference = {"foo": "foo-i", "launch_bug": "launch-bug", "dyn_offset": "dyn-offset-bug"}
    assert set(first_reference) == set(assignment.question_code)
    ids = [q.id for q in assignment.questions]
    for name, qid in first_reference.items():
        block = markdown.index(f"Code `{name}`:")
        previous = ids[ids.index(qid) - 1]
        assert question_at[previous] < block < question_at[qid], name
        first_line = assignment.question_code[name].splitlines()[0]
        assert markdown.count(first_line) == 1  # shown once, not before every question


def test_choice_questions_list_their_options(root, assignment):
    markdown = render_markdown(assignment, root)
    for q in assignment.questions:
        for option_id, text in q.options.items():
            assert f"- `{option_id}`: {md_text(text)}" in markdown


# --- files and variants --------------------------------------------------------------------------


def test_write_handouts_writes_the_three_files_of_each_edition(root, assignment, tmp_path):
    require_pdf_stack()
    student = write_handouts(assignment, root, tmp_path)
    figures = ("tile-phases", "boundary-grid", "dynamic-tiles")
    assert {k: p.name for k, p in student.items()} == \
        {"markdown": "handout.md", "html": "handout.html", "pdf": "handout.pdf",
         **{f"figure {name}": f"handout.{name}.png" for name in figures}}
    ta = write_handouts(assignment, root, tmp_path, variant="ta")
    assert {k: p.name for k, p in ta.items()} == \
        {"markdown": "handout-ta.md", "html": "handout-ta.html", "pdf": "handout-ta.pdf",
         **{f"figure {name}": f"handout-ta.{name}.png" for name in figures}}
    for path in [*student.values(), *ta.values()]:
        assert path.stat().st_size > 0
    assert student["pdf"].read_bytes().startswith(b"%PDF")
    assert "Answer key" not in student["markdown"].read_text(encoding="utf-8")
    assert "Answer key" in ta["markdown"].read_text(encoding="utf-8")


def test_an_unknown_variant_is_refused(root, assignment, tmp_path):
    with pytest.raises(ValueError, match="variant"):
        render_markdown(assignment, root, "staff")
    with pytest.raises(ValueError, match="variant"):
        write_handouts(assignment, root, tmp_path, variant="staff")
    assert not any(tmp_path.iterdir())


# --- the figures ----------------------------------------------------------------------------------


def _tile_width(root: Path, part) -> int:
    text = (root / "starter" / part.file).read_text(encoding="utf-8")
    return int(re.search(r"^constexpr int TILE_WIDTH = (\d+);", text, re.M).group(1))


def test_the_figures_are_files_beside_the_markdown_and_data_in_the_html(root, assignment, tmp_path):
    require_pdf_stack()
    for variant, stem in (("student", "handout"), ("ta", "handout-ta")):
        written = write_handouts(assignment, root, tmp_path, variant=variant)
        markdown = written["markdown"].read_text(encoding="utf-8")
        page = written["html"].read_text(encoding="utf-8")
        embedded = [base64.b64decode(data) for data in re.findall(r'<img src="data:image/png;base64,([^"]+)"', page)]
        figures = [k for k in written if k.startswith("figure ")]
        assert len(figures) == 3 and len(embedded) == 3, variant
        for number, key in enumerate(figures, start=1):
            path = written[key]
            assert path.parent == written["markdown"].parent and path.name.startswith(f"{stem}.")
            data = path.read_bytes()
            assert data.startswith(b"\x89PNG") and data == embedded[number - 1]
            # The Markdown links the file by its name beside it, then numbers and explains it.
            link = markdown.index(f"]({path.name})")
            assert markdown.index(f"*Figure {number}.*", link) - link < 40
            assert f"<strong>Figure {number}.</strong>" in page


def test_each_figure_sits_in_the_part_it_illustrates(root, assignment):
    markdown = render_markdown(assignment, root)
    for name, part_id in (("tile-phases", "tiled"), ("boundary-grid", "boundary"), ("dynamic-tiles", "dynamic_smem")):
        assert f"](handout.{name}.png)" in _part_section(markdown, assignment, part_id), name


def test_the_phase_figure_is_a_public_size_of_the_tiled_part(root, assignment):
    spec = tile_phases_spec(assignment, root)
    tiled = assignment.part("tiled")
    assert spec.part == "tiled" and spec.tile == _tile_width(root, tiled) == 32
    assert spec.width in [c.j for c in tiled.cases["public"]] and spec.width % spec.tile == 0
    # The largest public Width of a few phases: 128 = 4 tiles of 32.
    assert (spec.width, spec.phases) == (128, 4)
    assert 0 <= spec.bx < spec.phases and 0 <= spec.by < spec.phases
    section = _flat(_part_section(render_markdown(assignment, root), assignment, "tiled"))
    assert "in 128 / 32 = 4 phases: in phase p every thread copies one element of M's tile (1, p) into Mds" in section


def test_the_grid_figure_counts_the_blocks_of_a_public_size_that_is_not_whole_tiles(root, assignment):
    spec = boundary_grid_spec(assignment, root)
    boundary = assignment.part("boundary")
    t, w = spec.tile, spec.width
    assert spec.part == "boundary" and t == _tile_width(root, boundary)
    assert w in [c.j for c in boundary.cases["public"]] and w % t != 0
    n = math.ceil(w / t)
    assert spec.blocks_per_side == n and spec.blocks == n * n
    # The boundary blocks, counted one by one: those that reach past P's last row or column.
    reaching = [(bx, by) for bx in range(n) for by in range(n) if (bx + 1) * t > w or (by + 1) * t > w]
    assert spec.boundary_blocks == len(reaching)
    assert spec.threads == (n * t) ** 2 and spec.guarded == (n * t) ** 2 - w * w
    # assignment.yaml's public 47 with 32-wide tiles: 2 x 2 blocks, 3 of them at the boundary.
    assert (w, n, spec.boundary_blocks, spec.guarded, spec.last_tile_inside) == (47, 2, 3, 1887, 15)
    section = _flat(_part_section(render_markdown(assignment, root), assignment, "boundary"))
    assert ("(47 + 32 − 1) / 32 = 2 blocks per side, a 2 × 2 grid of 4 blocks, 4,096 threads for 2,209 elements "
            "of P. The 3 boundary blocks") in section


def test_the_grid_figure_follows_an_edit_of_the_public_sizes(root, tmp_path):
    def edit(doc):
        part = next(p for p in doc["parts"] if p["id"] == "boundary")
        part["cases"]["public"] = [1, 16, 32, 64, 80]

    project = _edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    spec = boundary_grid_spec(edited, project)
    assert (spec.width, spec.blocks_per_side, spec.boundary_blocks) == (80, 3, 5)
    assert "a 3 × 3 grid of 9 blocks" in render_markdown(edited, project)


def _dynamic_rows(markdown: str) -> list:
    """The limits column of the dynamic figure's table."""
    return [row.split(" | ")[0][2:] for row in markdown.splitlines()
            if re.match(r"\| (\d[\d,]* bytes|\d+ KiB)(, the device's own)? \|", row)]


def test_the_dynamic_figure_fits_a_tile_to_each_limit_of_the_cases(root, assignment):
    part = assignment.part("dynamic_smem")
    limits = {"public": set(), "all": set()}
    for name in ("public", "hidden", "memcheck", "racecheck"):
        for case in part.cases[name]:
            if isinstance(case.props.get("sharedMemPerBlock"), int):
                limits["all"].add(case.props["sharedMemPerBlock"])
                if name == "public":
                    limits["public"].add(case.props["sharedMemPerBlock"])
    default = 48 * 1024  # DEFAULT_DYNAMIC_SMEM_LIMIT of starter/dynamic_smem.cu
    student, ta = dynamic_tiles_spec(assignment, root, ta=False), dynamic_tiles_spec(assignment, root, ta=True)
    assert {s.limit for s in student.shapes} == limits["public"] | {default}
    assert {s.limit for s in ta.shapes} == limits["all"] | {default}
    for shape in ta.shapes:
        t, depth, limit = shape.width, shape.depth, shape.limit
        slice_bytes = 2 * t * t * 4
        assert shape.bytes == 2 * t * depth * 4 <= limit and depth % t == 0
        # The largest tile: one more row and column would break the shared memory or the thread limit.
        assert t == 32 or 2 * (t + 1) ** 2 * 4 > limit or (t + 1) ** 2 > shape.max_threads
        # As deep as fits, or as deep as k needs.
        assert depth // t == math.ceil(shape.k / t) or shape.bytes + slice_bytes > limit
    assert {s.limit: s.width for s in ta.shapes} == {49152: 32, 2048: 16, 512: 8, 128: 4}
    # A hidden limit is the grader's to keep: the student edition draws the public ones only.
    own = "48 KiB, the device's own"
    assert _dynamic_rows(render_markdown(assignment, root)) == [own, own, "2,048 bytes", "512 bytes"]
    assert _dynamic_rows(render_markdown(assignment, root, "ta")) == [own, own, "2,048 bytes", "512 bytes", "128 bytes"]


def test_a_figure_is_the_same_png_each_time_and_another_for_other_numbers(root, assignment):
    figures = handout_figures(assignment, root, ta=False)
    first = [png(f.spec) for f in figures]
    png.cache_clear()
    assert [png(f.spec) for f in figures] == first
    spec = boundary_grid_spec(assignment, root)
    assert png(type(spec)(spec.part, spec.tile, spec.width + 2)) != png(spec)


def test_the_pdf_embeds_each_figure(root, pdf_dir):
    if shutil.which("pdfimages") is None:
        pytest.skip("skipped: pdfimages (poppler-utils) is not installed")
    pdf = _pdf(root, "student", pdf_dir)
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], check=True, capture_output=True, text=True).stdout
    images = [line for line in listing.splitlines()[2:] if line.split()[2] == "image"]
    assert len(images) == 3


# --- what the text says about its figures, its points and its commands -----------------------------


def _figure_numbers(markdown: str) -> list:
    return [int(n) for n in re.findall(r"^\*Figure (\d+)\.\*", markdown, re.M)]


@pytest.mark.parametrize("variant", ["student", "ta"])
def test_every_figure_is_referred_to_by_its_number_in_the_text_just_before_it(root, assignment, variant):
    """A figure is read where the text sends the reader to it: each is
    numbered in order, and the part that holds it says "Figure N shows ..."
    (a sentence of the text, not its caption) right before it."""
    markdown = render_markdown(assignment, root, variant)
    numbers = _figure_numbers(markdown)
    assert numbers == list(range(1, len(handout_figures(assignment, root, variant == "ta")) + 1)) and numbers
    for n in numbers:
        caption = markdown.index(f"*Figure {n}.*")
        image = markdown.rindex("![", 0, caption)
        # A mention is "Figure n" followed by anything but the caption's period.
        mentions = [m.start() for m in re.finditer(rf"(?<!\*)Figure {n}(?![.\d])", markdown)]
        assert mentions, f"the text never refers to Figure {n}"
        before = [m for m in mentions if m < image]
        assert before and image - max(before) < 600, f"Figure {n} is not referred to just before it"
        # In the same part as the figure: no heading between the mention and the figure.
        assert "\n### " not in markdown[max(before):image]
    page = _flat(_visible_html(render_html(assignment, root, variant)))
    for n in numbers:
        assert page.index(f"Figure {n} shows") < page.index(f"Figure {n}. ")


@pytest.mark.parametrize("variant", ["student", "ta"])
def test_each_figure_and_the_sentence_that_refers_to_it_share_a_page_of_the_pdf(root, assignment, pdf_dir,
                                                                                  variant):
    pages = [_flat(page) for page in _pdf_text(root, variant, pdf_dir).split("\f")]
    numbers = _figure_numbers(render_markdown(assignment, root, variant))
    for n in numbers:
        holding = [i for i, page in enumerate(pages) if f"Figure {n}. " in page]
        assert len(holding) == 1, f"Figure {n}'s caption is on pages {holding}"
        page = pages[holding[0]]
        assert f"Figure {n} shows" in page and page.index(f"Figure {n} shows") < page.index(f"Figure {n}. ")


def test_a_cases_worth_is_said_in_points_of_the_parts_correctness_points(root, assignment):
    """"worth 0.43 of the correctness points" reads as a fraction of them:
    each part says how many points one case is worth and of how many."""
    markdown = render_markdown(assignment, root)
    page = _flat(_visible_html(render_html(assignment, root)))
    for part in assignment.parts:
        correctness = part.points["correctness"]
        # Shared equally by the graded cases, as section 1 says.
        per_case = correctness / (len(part.cases["public"]) + len(part.cases["hidden"]))
        sentence = (f"Each graded case is worth {_points_unit(per_case)} of the part's {_points(correctness)} "
                    f"correctness point{'' if _points(correctness) == '1' else 's'}.")
        assert sentence in _flat(_part_section(markdown, assignment, part.id)), part.id
        assert sentence in page, part.id
    assert "of the correctness points" not in markdown and "of the correctness points" not in page


def test_the_question_counts_agree_and_say_who_grades_the_others(root, assignment):
    """The rubric's count of questions graded automatically, the others
    (graded by hand by a TA) and the number of questions in section 5 all
    come from assignment.yaml's one list, and add up."""
    automatic = [q for q in assignment.questions if q.kind != "text"]
    by_hand = [q for q in assignment.questions if q.kind == "text"]
    total = len(assignment.questions)
    assert automatic and by_hand and len(automatic) + len(by_hand) == total
    markdown = render_markdown(assignment, root)
    page = _flat(_visible_html(render_html(assignment, root)))
    row = _markdown_row(markdown, f"exercise questions graded automatically ({len(automatic)} of {total})")
    assert row[3] == _points(sum(q.points for q in automatic))
    others = f"The other {len(by_hand)} of the {total} questions ("
    assert others in markdown and others in page
    rubric = _flat(markdown.split("## 3. Rubric", 1)[1].split("## 4.", 1)[0])
    assert "a TA grades them by hand" in rubric and all(f"`{q.id}`" in rubric for q in by_hand)
    intro = (f"There are {total} questions: {len(automatic)} graded automatically and {len(by_hand)} written "
             "answers that a TA grades by hand.")
    assert intro in _flat(markdown) and intro in page
    questions = markdown.split("## 5. Questions", 1)[1]
    assert len(re.findall(r"^\*\*\d+\. `", questions, re.M)) == total
    # Every count the text gives of the questions is one of these three.
    for count in re.findall(r"(\d+) (?:exercise )?questions", _flat(markdown)):
        assert int(count) in (total, len(automatic), len(by_hand)), count


def _check_options(text: str) -> set:
    """The options given to `tilelab check` in a page's commands and prose."""
    return set(re.findall(r"tilelab check[^\n`#]*?(--[a-z-]+)", text)) | set(re.findall(r"`(--[a-z-]+)`", text))


def test_getting_started_gives_the_quick_check_option_the_readme_gives(root, assignment):
    """The handout's "Getting started" and the bundle's README (docs/student.md)
    tell a student the same way to a quicker answer, and only options that
    `tilelab check` has."""
    from tilelab.cli import check

    markdown = render_markdown(assignment, root)
    section = markdown.split("## 1. Getting started", 1)[1].split("\n### ", 1)[0]
    readme = (root / "docs" / "student.md").read_text(encoding="utf-8")
    quick = re.search(r"tilelab check \w+ (--[a-z-]+) +#[^\n]*quickest", readme).group(1)
    handout_options = _check_options(section)
    assert quick in handout_options and re.search(rf"tilelab check \w+ {quick} +#[^\n]*quickest", section)
    assert handout_options <= _check_options(readme), handout_options - _check_options(readme)
    assert handout_options <= {opt for param in check.params for opt in param.opts}
    html_section = _visible_html(render_html(assignment, root)).split("1. Getting started", 2)[2]
    html_section = html_section.split("Rules for every part", 1)[0]
    assert f"{quick} " in html_section and "--no-sanitizers" not in html_section


def _warp_tile(path: Path) -> tuple:
    """(rows, columns) of a warp's tile of P, as the kernel in `path` declares them."""
    match = re.search(r"constexpr int kWM\d*\s*=\s*(\d+),\s*kWN\d*\s*=\s*(\d+);", path.read_text(encoding="utf-8"))
    return int(match.group(1)), int(match.group(2))


def test_the_challenges_warp_tile_is_the_same_in_the_handout_and_the_starters_hint(root, assignment):
    """solutions/challenge.cu says what the reference's warp tile is (kWM x
    kWN), the ladder's rung files what each rung's is: the handout's ladder
    and the starter's hint give each the tile its own kernel has."""
    part = next(p for p in assignment.parts if p.versus_cublas is not None)
    wm, wn = _warp_tile(root / "solutions" / part.file)
    assert (wm, wn) == _warp_tile(root / "starter" / part.file)
    rungs = reference_gpu(root)["ladder"][part.id]["rungs"]
    warp_rung = next(n for n, r in enumerate(rungs, start=1) if r["technique"].startswith("warp tiling"))
    rung_wm, rung_wn = _warp_tile(root / rungs[warp_rung - 1]["file"])

    section = _part_section(render_markdown(assignment, root), assignment, part.id)
    rung_row = _markdown_row(section, str(warp_rung))
    assert f"each warp owns a {rung_wm} × {rung_wn} tile of P" in rung_row[1]
    reference_row = _markdown_row(section, "reference")
    assert f"each warp a {wm} × {wn} tile of P (kWM × kWN in starter/{part.file})" in reference_row[1]

    starter = (root / "starter" / part.file).read_text(encoding="utf-8")
    hint = " ".join(line.strip().lstrip("/").strip() for line in starter.splitlines() if line.strip().startswith("//"))
    item = hint.split(f"{warp_rung}. warp tiling:", 1)[1].split("instead of conflicting", 1)[0]
    assert f"kWM x kWN tile of P ({wm} x {wn}" in item
    assert f"rung {warp_rung} used {rung_wm} x {rung_wn}" in item
    # Whatever else the hint or the handout says of "a warp's tile", its size is one of these two.
    for text in (hint, section):
        for rows, cols in re.findall(r"warp (?:owns )?an? (\d+) [x×] (\d+)", text):
            assert (int(rows), int(cols)) in ((wm, wn), (rung_wm, rung_wn))
