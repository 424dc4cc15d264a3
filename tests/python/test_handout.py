"""The handout is generated from assignment.yaml, the starter files,
handouts/reference-gpu.yaml and (TA edition) the answer key and the
solutions: its numbers must be theirs, and an edit to assignment.yaml must
show with no other edit. What each edition holds: test_handout_editions.py;
its figures: test_handout_figures.py."""

import re
from pathlib import Path

import pytest
from conftest import require_pdf_stack
from handout_fixtures import (ANSWER_KEY, edited_project, folded, markdown_row, part_section, points_text,
                              points_with_unit, visible_html)

from tilelab.authoring.handout import HandoutError, reference_gpu, render_html, render_markdown, write_handouts
from tilelab.text.markdown import md_text
from tilelab.text.numbers import fmt_intensity, fmt_percent
from tilelab.grading.answer_key import key_working
from tilelab.spec.assignment import load_assignment
from tilelab.spec.reference_gpu import published_gflops


# --- the rubric ------------------------------------------------------------------------


def test_the_rubric_has_the_points_of_assignment_yaml(root, assignment):
    markdown = render_markdown(assignment, root)
    for part in assignment.parts:
        correctness, speed = part.points["correctness"], part.points["speed"]
        if part.extra_credit:
            row = markdown_row(markdown, md_text(f"{part.id}: {part.title} (extra credit)"))
            assert row[1:] == [points_text(correctness), points_text(speed), f"+{points_text(correctness + speed)}"]
        else:
            row = markdown_row(markdown, md_text(f"{part.id}: {part.title}"))
            assert row[1:] == [points_text(correctness), points_text(speed), points_text(correctness + speed)]
    # An extra-credit part is shown, but its points are not in the total (Part.counted_max).
    counted = [p for p in assignment.parts if not p.extra_credit]
    parts_total = sum(p.counted_max for p in assignment.parts)
    automatic = [q for q in assignment.questions if q.kind != "text"]
    questions_total = sum(q.points for q in automatic)
    assert markdown_row(markdown, "all parts")[1:] == [points_text(sum(p.points["correctness"] for p in counted)),
                                                        points_text(sum(p.points["speed"] for p in counted)),
                                                        points_text(parts_total)]
    assert markdown_row(markdown, f"exercise questions graded automatically ({len(automatic)} of "
                                   f"{len(assignment.questions)})")[3] == points_text(questions_total)
    assert markdown_row(markdown, "**total**")[3] == f"**{points_text(parts_total + questions_total)}**"

    page = visible_html(render_html(assignment, root))
    assert folded(f"total {points_text(parts_total + questions_total)}") in folded(page)


def test_the_real_rubric_keeps_the_challenge_out_of_its_total(root, assignment):
    # assignment.yaml: parts 1 to 5 are worth 15 + 25 + 20 + 20 + 20 = 100, the 34
    # automatic questions 1 each; the challenge's 5 + 15 are extra credit.
    markdown = render_markdown(assignment, root)
    assert markdown_row(markdown, "all parts")[1:] == ["70", "30", "100"]
    assert markdown_row(markdown, "**total**")[3] == "**134**"
    assert markdown_row(markdown, "challenge: Challenge: toward cuBLAS (extra credit)")[1:] == ["5", "15", "+20"]
    assert "Part 6 (`challenge`) is extra credit: its 20 points come on top of the total of 134" in markdown
    page = folded(visible_html(render_html(assignment, root)))
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
    page = folded(visible_html(render_html(assignment, root)))
    assert "challenge 4096 × 4096 × 4096 51,661 78.7 % 41,329 9,256 tiled 47,670 (92.3 %)" in page
    assert "challenge 2048 × 4096 × 8192 51,929 79.1 % 41,543 9,076 rectangular 47,833 (92.1 %)" in page


# Each level's row of the roofline table, nearest the threads first, and the key of its bandwidth.
LEVEL_ROWS = (("shared memory, all SMs together", "shared_gbps"), ("L2 cache", "l2_gbps"), ("DRAM", "dram_gbps"))


def test_the_roofline_shows_each_level_of_the_reference_gpu_with_its_ridge_point(root, assignment):
    # handouts/reference-gpu.yaml: FP32 65,637 GFLOP/s; tilelab-roofline on an
    # H100 80GB HBM3: shared memory 32,911 GB/s, L2 7,307; DRAM 3,036.
    gpu = reference_gpu(root)
    markdown = render_markdown(assignment, root)
    assert markdown_row(markdown, "FP32 arithmetic (FMA)") == ["FP32 arithmetic (FMA)", "65,637 GFLOP/s", ""]
    assert [markdown_row(markdown, label)[1:] for label, _ in LEVEL_ROWS] == \
        [["32,911 GB/s", "1.99"], ["7,307 GB/s", "8.98"], ["3,036 GB/s", "21.6"]]
    for label, key in LEVEL_ROWS:
        assert markdown_row(markdown, label)[2] == fmt_intensity(gpu["fp32_fma_gflops"] / gpu[key])
    # Nearest the threads first, as the report's traffic figures are.
    rows = [markdown.index(f"| {label} |") for label in ["FP32 arithmetic (FMA)"] + [l for l, _ in LEVEL_ROWS]]
    assert rows == sorted(rows)
    page = folded(visible_html(render_html(assignment, root)))
    assert "FP32 arithmetic (FMA) 65,637 GFLOP/s shared memory, all SMs together 32,911 GB/s 1.99 L2 cache " \
           "7,307 GB/s 8.98 DRAM 3,036 GB/s 21.6" in page
    # Which level the lecture's figures belong to.
    sentence = ("The lecture's 0.25 FLOP/B for the naive kernel, and T/4 with T × T tiles, count global loads as "
                "the threads ask for them")
    assert sentence in markdown and sentence in page
    assert "so each bound is the FP32 rate itself. The reference solutions and the targets" in folded(page)


def test_the_on_chip_bandwidths_come_from_the_reference_gpu_file(root, tmp_path, assignment):
    project = edited_project(root, tmp_path, lambda doc: None)
    path = project / "handouts" / "reference-gpu.yaml"
    text = path.read_text()
    path.write_text(text.replace("\nl2_gbps: 7307\n", "\nl2_gbps: 6000\n"))
    assert markdown_row(render_markdown(assignment, project), "L2 cache") == ["L2 cache", "6,000 GB/s", "10.9"]
    path.write_text(text.replace("\nshared_gbps: 32911\n", "\n"))
    with pytest.raises(HandoutError, match=r"reference-gpu\.yaml: missing 'shared_gbps'"):
        render_markdown(assignment, project)
    path.write_text(text.replace("\nl2_gbps: 7307\n", "\nl2_gbps: fast\n"))
    with pytest.raises(HandoutError, match=r"l2_gbps: must be a positive number, got 'fast'"):
        render_markdown(assignment, project)


# --- an edit to assignment.yaml shows with no other edit -----------------------------------


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

    project = edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    before, after = render_markdown(assignment, root), render_markdown(edited, project)

    label = md_text(f"naive: {naive.title}")
    old_row, new_row = markdown_row(before, label), markdown_row(after, label)
    assert float(new_row[1]) == float(old_row[1]) + 3
    assert float(new_row[3]) == float(old_row[3]) + 3
    assert float(markdown_row(after, "all parts")[3]) == float(markdown_row(before, "all parts")[3]) + 3

    uniform_line = next(line for line in part_section(after, edited, "naive").splitlines()
                        if line.startswith("- uniform inputs"))
    sizes = uniform_line.split(": ", 1)[1].split(", ")
    assert str(replacement) in sizes and str(replaced) not in sizes

    gpu = reference_gpu(project)
    new_target = 0.85 * published_gflops(gpu, "tiled", (4096, 4096, 4096))
    assert markdown_row(after, "tiled")[6] == f"{new_target:,.0f}"

    page = visible_html(render_html(edited, project))
    assert str(replacement) in page and folded(f"{new_row[1]} for correctness") in folded(page)


def test_the_challenge_rule_and_standing_in_assignment_yaml_change_the_handout(root, tmp_path):
    def edit(doc):
        part = next(p for p in doc["parts"] if p["id"] == "challenge")
        part["versus_cublas"]["full_at"] = 0.9
        part["points"]["extra_credit"] = False
        doc["grading"]["leaderboard"]["names"] = "name"

    project = edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    markdown = render_markdown(edited, project)
    # 0.9 x cuBLAS 51,661 (reference-gpu.yaml)
    assert _timing_rows(markdown, "challenge")[0][4] == f"{0.9 * 51661:,.0f}"
    assert "All the speed points from 90 % of cuBLAS's rate" in markdown
    # Counted now: in the total, and no longer called extra credit.
    assert markdown_row(markdown, "challenge: Challenge: toward cuBLAS")[1:] == ["5", "15", "20"]
    assert markdown_row(markdown, "all parts")[3] == "120"
    assert "extra credit" not in markdown
    assert "lists each hand-in under the name it was handed in as" in markdown


@pytest.mark.parametrize("extra_credit", [True, False])
def test_a_challenge_without_points_is_on_the_leaderboard_only(root, tmp_path, extra_credit):
    def edit(doc):
        part = next(p for p in doc["parts"] if p["id"] == "challenge")
        part["points"] = {"correctness": 0, "speed": 0, "extra_credit": extra_credit}

    project = edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    markdown = render_markdown(edited, project)
    assert "**Points:** none; this part counts for the leaderboard only." in markdown
    assert markdown_row(markdown, "challenge: Challenge: toward cuBLAS (leaderboard only)")[1:] == ["0", "0", "0"]
    assert "| challenge: Challenge: toward cuBLAS |" not in markdown
    assert "Part 6 (`challenge`) earns no points: it is there for the leaderboard." in markdown
    assert "extra credit" not in markdown
    assert markdown_row(markdown, "all parts")[3] == "100"
    assert "for the leaderboard only." in folded(visible_html(render_html(edited, project)))


def test_text_from_assignment_yaml_is_escaped_in_tables_and_html(root, tmp_path):
    def edit(doc):
        doc["parts"][0]["title"] = "Naive | <b>kernel</b>"

    project = edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    markdown = render_markdown(edited, project)
    row = markdown_row(markdown, md_text(f"{edited.parts[0].id}: Naive | <b>kernel</b>"))
    assert len(row) == 4  # the '|' of the title did not split the row
    page = render_html(edited, project)
    assert "<b>kernel</b>" not in page and "&lt;b&gt;kernel&lt;/b&gt;" in page


def test_a_copy_without_hidden_cases_says_so(root, tmp_path):
    # The student bundle's assignment.yaml lists no hidden cases.
    def edit(doc):
        for part in doc["parts"]:
            part["cases"]["hidden"] = []

    project = edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    for variant in ("student", "ta"):
        markdown = render_markdown(edited, project, variant)
        assert markdown.count("**Hidden cases:** none") == len(edited.parts)
        assert "| hidden case |" not in markdown
    naive = edited.part("naive")
    per_case = points_with_unit(naive.points["correctness"] / len(naive.cases["public"]))
    assert (f"Each public case is worth {per_case} of the part's {points_text(naive.points['correctness'])} correctness "
            "points.") in render_markdown(edited, project)


# --- the challenge part ---------------------------------------------------------------------------


def test_the_challenge_section_says_how_it_is_scored_and_what_standing_it_has(root, assignment):
    markdown = render_markdown(assignment, root)
    section = folded(part_section(markdown, assignment, "challenge"))
    page = folded(visible_html(render_html(assignment, root)))
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
        assert folded(words) in folded(page.replace("(", "( ").replace(")", " )")), sentence
    assert "Part 6 (`challenge`) then goes past the textbook toward the speed of cuBLAS, for extra credit." \
        in markdown


def test_the_ladder_shows_each_rung_as_a_share_of_cublas(root, assignment):
    # handouts/reference-gpu.yaml, from docs/measurements-archive.md ("Challenge part", H100,
    # 4096^3): the tiled reference, rungs 1 to 6 and the challenge reference against
    # cuBLAS SGEMM's 51,661 GFLOP/s.
    gpu = reference_gpu(root)
    ladder = gpu["ladder"]["challenge"]
    assert ladder["size"] == (4096, 4096, 4096) and published_gflops(gpu, "cublas", ladder["size"]) == 51661
    section = part_section(render_markdown(assignment, root), assignment, "challenge")
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
    section = part_section(render_markdown(assignment, root, "ta"), assignment, "challenge")
    for rung in ladder["rungs"]:
        assert (root / rung["file"]).is_file(), rung["file"]
        assert f"`{rung['file']}`" in section
    assert "`solutions/tiled.cu`" in section and "`solutions/challenge.cu`" in section
    page = folded(visible_html(render_html(assignment, root, "ta")))
    assert all(rung["file"] in page for rung in ladder["rungs"])


def test_a_broken_ladder_is_named(root, tmp_path, assignment):
    project = edited_project(root, tmp_path, lambda doc: None)
    path = project / "handouts" / "reference-gpu.yaml"
    path.write_text(path.read_text().replace("        gflops: 16101\n", ""))
    with pytest.raises(HandoutError, match=r"ladder\.challenge\.rungs\[0\]: must be \{technique"):
        render_markdown(assignment, project)


# --- the TA edition's key --------------------------------------------------------------------------


def test_the_ta_edition_gives_the_working_under_each_answer(root, assignment):
    working = key_working(root / ANSWER_KEY)
    markdown = render_markdown(assignment, root, "ta")
    page = folded(visible_html(render_html(assignment, root, "ta")))
    for qid, text in working.items():
        assert f"> *Working:* {md_text(text)}" in markdown, qid
        assert folded(f"Working: {text}") in page, qid
    # The answer first, then how it comes; whole numbers in full.
    ids = [q.id for q in assignment.questions]
    for qid, answer, working_text in [("naive-roof", "388.75", "0.25 FLOP/B x 1555 GB/s = 388.75 GFLOP/s"),
                                      ("regtile-global", "1073741824", "2 N^3 / L = 2^37 / 2^7 = 2^30")]:
        block = markdown[markdown.index(f"**{ids.index(qid) + 1}. `{qid}`**"):]
        assert block.index(f"> **Answer key:** {answer}\n") < block.index(working_text), qid
    student = render_markdown(assignment, root)
    assert "Working" not in student and "0.25 FLOP/B x 1555 GB/s" not in student
    assert "2^30 = 1,073,741,824" not in student


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


# --- what the text says about its points and its commands ------------------------------------------


def test_a_cases_worth_is_said_in_points_of_the_parts_correctness_points(root, assignment):
    """"worth 0.43 of the correctness points" reads as a fraction of them:
    each part says how many points one case is worth and of how many."""
    markdown = render_markdown(assignment, root)
    page = folded(visible_html(render_html(assignment, root)))
    for part in assignment.parts:
        correctness = part.points["correctness"]
        # Shared equally by the graded cases, as section 1 says.
        per_case = correctness / (len(part.cases["public"]) + len(part.cases["hidden"]))
        sentence = (f"Each graded case is worth {points_with_unit(per_case)} of the part's {points_text(correctness)} "
                    f"correctness point{'' if points_text(correctness) == '1' else 's'}.")
        assert sentence in folded(part_section(markdown, assignment, part.id)), part.id
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
    page = folded(visible_html(render_html(assignment, root)))
    row = markdown_row(markdown, f"exercise questions graded automatically ({len(automatic)} of {total})")
    assert row[3] == points_text(sum(q.points for q in automatic))
    others = f"The other {len(by_hand)} of the {total} questions ("
    assert others in markdown and others in page
    rubric = folded(markdown.split("## 3. Rubric", 1)[1].split("## 4.", 1)[0])
    assert "a TA grades them by hand" in rubric and all(f"`{q.id}`" in rubric for q in by_hand)
    intro = (f"There are {total} questions: {len(automatic)} graded automatically and {len(by_hand)} written "
             "answers that a TA grades by hand.")
    assert intro in folded(markdown) and intro in page
    questions = markdown.split("## 5. Questions", 1)[1]
    assert len(re.findall(r"^\*\*\d+\. `", questions, re.M)) == total
    # Every count the text gives of the questions is one of these three.
    for count in re.findall(r"(\d+) (?:exercise )?questions", folded(markdown)):
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
    html_section = visible_html(render_html(assignment, root)).split("1. Getting started", 2)[2]
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

    section = part_section(render_markdown(assignment, root), assignment, part.id)
    rung_row = markdown_row(section, str(warp_rung))
    assert f"each warp owns a {rung_wm} × {rung_wn} tile of P" in rung_row[1]
    reference_row = markdown_row(section, "reference")
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
