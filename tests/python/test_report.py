"""The reports students read: built from GradeResults made here
(report_fixtures.py), their summary, cases, stages and questions, and what
never reaches a student. Their speed sections: test_report_speed.py; their
plot and files: test_report_plots.py."""

import re

import pytest
from grade_fixtures import graded_answers
from report_fixtures import (
    COMPILER_OUTPUT, HIDDEN_FAILING, HIDDEN_PASSING, boundary_part, make_result, naive_part, section, square_case,
    stage_row, stages, unescaped_pipes,
)

from tilelab.grading.model import ElementError, Stage
from tilelab.outputs.rendering import render_html, render_markdown
from tilelab.text.markdown import DETAIL_LINE_CAP


def test_header_has_score_mode_gpu_and_date(result):
    md = render_markdown(result)
    assert "tilelab\\_matmul" in md or "tilelab_matmul" in md
    assert "**Score: 22.5 / 60**" in md
    assert "grade (public and hidden cases" in md
    assert "NVIDIA H100 80GB HBM3" in md
    assert "2026-11-21 14:03 UTC" in md
    assert "graded on the course H100" in md


def test_summary_names_the_first_problem_in_words(result):
    md = render_markdown(result)
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().split(":")[0]: line for line in summary.splitlines()
            if line.startswith("| ") and "---" not in line and not line.startswith("| part")}
    assert "failed: build" in rows["tiled"]
    assert "failed: correctness" in rows["boundary"]
    # racecheck did not run for naive: that is not "all passed".
    assert "all passed" not in rows["naive"]
    assert "not run: shared-memory races" in rows["naive"]
    assert "15 / 15" in rows["naive"] and "5,278 GFLOP/s" in rows["naive"]


def test_all_passed_only_when_every_stage_passed():
    part = naive_part()
    part.stages = stages()
    md = render_markdown(make_result(parts=[part]))
    assert "| all passed |" in md


def test_failing_report_names_the_case_values_and_hint(result):
    md = section(render_markdown(result), "boundary")
    assert "`w17`" in md
    assert "First wrong elements of `w17`" in md
    assert "4.12345679" in md and "1.0625" in md  # expected and got
    assert "unwritten" in md
    assert "What to look at" in md
    assert "last tile's loads must read 0.0 outside the matrix" in md
    # The exact case says so instead of printing an allowed error of 0.
    exact_table = md.split("First wrong elements of `w47-int`", 1)[1]
    assert "exact (no error allowed)" in exact_table.split("\n\n", 2)[1]
    html = render_html(result)
    assert "w17" in html and "4.12345679" in html and "exact (no error allowed)" in html


def test_many_failing_cases_get_few_tables_and_the_exact_one_is_kept():
    # A boundary kernel that fails every non-multiple of its tile (as a real
    # one does): tables for the first failing cases and the exact case only.
    part = boundary_part()
    widths = (1, 2, 3, 15, 17, 31, 33, 63, 65)
    part.cases = [square_case(w, passed=False, wrong=w * w, reasons=[f"{w * w} elements wrong"],
                              first_errors=[ElementError(row=0, col=0, expected=1.5, got="0", allowed=1e-6)])
                  for w in widths] + [
        square_case(47, name="w47-int", passed=False, exact=True, wrong=2204, reasons=["2204 elements wrong"],
                    first_errors=[ElementError(row=46, col=3, expected=112.0, got="104", allowed=0.0)])]
    result = make_result(parts=[part])
    md = section(render_markdown(result), "boundary")
    tabled = re.findall(r"First wrong elements of `([\w-]+)`", md)
    assert tabled == ["w1", "w2", "w47-int"]
    assert "The wrong elements of 7 more failing cases are left out here" in md
    html = render_html(result)
    assert re.findall(r"First wrong elements of <code>([\w-]+)</code>", html) == tabled
    assert "7 more failing cases are left out" in html


def test_few_failing_cases_leave_nothing_out(result):
    md = section(render_markdown(result), "boundary")
    assert re.findall(r"First wrong elements of `([\w-]+)`", md) == ["w17", "w47-int"]
    assert "left out here" not in md


def test_student_reports_never_show_hidden_cases(result):
    for text in (render_markdown(result, "student"), render_html(result, "student")):
        for name in HIDDEN_FAILING + HIDDEN_PASSING + ("w7", "w63", "w65"):
            assert not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), name
        for size in ("49x49x49", "49 × 49 × 49", "129 × 129 × 129"):
            assert size not in text
        assert "4 hidden cases: 2 passed" in text
        assert "3 hidden cases: 3 passed" in text
        # The hidden case's wrong values stay hidden too.
        assert "7.3125" not in text


def test_staff_reports_show_hidden_cases(result):
    md = render_markdown(result, "staff")
    html = render_html(result, "staff")
    for text in (md, html):
        for name in HIDDEN_FAILING + HIDDEN_PASSING:
            assert name in text
    assert "First wrong elements of hidden `w49`" in md
    assert "Where the time went" in md and "| build | 95.0 |" in md
    # Launch records with the grid are for staff; students get one line without it.
    assert "| 2 × 2 × 1 | 16 × 16 × 1 |" in md
    student = render_markdown(result, "student")
    assert "2 × 2 × 1" not in student and "block 16 × 16 × 1" in student


def test_not_run_stages_are_never_shown_as_passed(result):
    md = render_markdown(result)
    tiled = section(md, "tiled")
    for stage in ("correctness", "launch", "memcheck", "racecheck", "speed"):
        row = stage_row(tiled, stage)
        assert "not run" in row and "passed" not in row and "✅" not in row
    racecheck = stage_row(section(md, "naive"), "racecheck")
    assert "⚪ not run" in racecheck
    html = render_html(result)
    assert html.count('<span class="badge not_run">not run</span>') >= 7
    speed = section(md, "boundary").split("### Speed", 1)[1]
    assert "⚪ not run: speed is measured only when every correctness case passes" in speed
    assert "not run: not run" not in speed


def test_long_details_are_cut_with_a_note(result):
    md = section(render_markdown(result), "tiled")
    block = re.search(r"```text\n(.*?)\n```", md, re.S).group(1)
    assert len(block.splitlines()) == DETAIL_LINE_CAP
    assert "__synchthreads" in block  # the first error is the one kept
    total = len(COMPILER_OUTPUT.splitlines())
    assert f"Only the first {DETAIL_LINE_CAP} of {total} lines are shown; {total - DETAIL_LINE_CAP} more were cut" in md


def test_html_escapes_compiler_output(result):
    html = render_html(result)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(" in html


def test_markdown_table_cells_escape_pipes(result):
    md = section(render_markdown(result), "boundary")
    row = next(line for line in md.splitlines() if line.startswith("| `w17`"))
    assert unescaped_pipes(row) == 5  # four columns
    assert "\\|got - expected\\|" in row


def test_check_mode_says_hidden_cases_were_not_run():
    part = boundary_part()
    part.cases = [c for c in part.cases if c.set == "public"]
    part.hidden_total = 0
    md = render_markdown(make_result(mode="check", parts=[part]))
    assert "check (public cases only" in md
    assert "Hidden cases run only when grading" in md


def test_grader_error_blames_the_grader_and_keeps_its_output_for_staff():
    part = naive_part()
    part.stages = stages(memcheck=("error", "compute-sanitizer did not start",
                                   "Traceback (most recent call last):\n  RuntimeError: sanitizer missing"))
    result = make_result(parts=[part])
    student = render_markdown(result)
    row = stage_row(section(student, "naive"), "memcheck")
    assert "⚠️ grader error" in row and "not in your code" in row
    assert "Traceback" not in student
    assert "| grader error: memory safety" in student
    assert "Traceback" in render_markdown(result, "staff")


def test_withheld_correctness_points_are_explained(result):
    part = result.parts[0]
    part.stages["memcheck"] = Stage("memcheck", "failed", "out-of-bounds global write in naiveKernel")
    part.correctness_score = part.speed_score = 0.0
    part.withheld_by = ["memcheck"]  # set by the grader, not a model field
    md = section(render_markdown(result), "naive")
    assert "Correctness points are withheld because this part failed: memory safety" in md
    assert "0 / 5 speed points: the speed alone would earn 100 % of them, but they were withheld" in md


def test_unknown_audience_is_refused(result):
    with pytest.raises(ValueError):
        render_markdown(result, "teacher")


def questions_section(markdown: str) -> str:
    match = re.search(r"^## Questions.*?(?=^## |\Z)", markdown, re.S | re.M)
    assert match, "no Questions section"
    return match.group(0)


def test_questions_section_shows_answers_results_and_points(result):
    result.answers = graded_answers("answers-units-and-typos")
    md = render_markdown(result)
    assert "**Score: 48.5 / 94**" in md  # 22.5 / 60 from the parts, 26 / 34 from the questions
    assert "| questions (answers.yaml) | 26 / 34 | 26 of 34 right | - | 1 wrong, 6 not readable, 1 no answer |" in md
    section = questions_section(md)
    assert section.startswith("## Questions (`answers.yaml`), 26 / 34")
    assert "| question | kind | your answer | result | points |" in section
    row = next(line for line in section.splitlines() if line.startswith("| `naive-roof`"))
    assert row == ("| `naive-roof` | number | 388.75 GFLOP/s | ✅ correct: Read as 388.75; the unit 'GFLOP/s' was "
                   "ignored. | 1 / 1 |")
    row = next(line for line in section.splitlines() if line.startswith("| `dyn-bytes`"))
    assert "❌ wrong" in row and "2048" not in row
    assert "did you mean 'foo-i'?" in section
    assert "| `coalescing-why` | text | 12 | 📝 collected for a TA" in section
    assert "graded by a TA (up to 2 points)" in section
    html = render_html(result)
    assert '<section id="questions">' in html and '<span class="badge collected">' in html


def test_student_reports_never_show_the_key_and_staff_reports_do(result):
    result.answers = graded_answers("answers-partial")
    model_answer = "most of each transferred segment is wasted"
    for text in (render_markdown(result, "student"), render_html(result, "student")):
        assert model_answer not in text and "(± 1 %)" not in text
        assert "| key |" not in text and "<th>key</th>" not in text
    staff = questions_section(render_markdown(result, "staff"))
    assert "| question | kind | your answer | key | result | points |" in staff
    row = next(line for line in staff.splitlines() if line.startswith("| `tile32-reduction`"))
    assert "| 16 | 32 (± 1 %) | ❌ wrong" in row
    assert model_answer in staff
    assert model_answer in render_html(result, "staff")


def test_a_file_level_problem_heads_the_questions_section(result):
    result.answers = graded_answers("answers-malformed")
    md = render_markdown(result)
    section = questions_section(md)
    assert "**answers.yaml is not valid YAML (line 14, column" in section
    assert "| questions (answers.yaml) | 0 / 34 | 0 of 34 right | - | answers.yaml is not valid YAML (line 14) |" in md


def test_without_questions_there_is_no_questions_section(result):
    assert result.answers is None
    assert "## Questions" not in render_markdown(result) and 'id="questions"' not in render_html(result)


# Real gradings with no GPU in sight (test_gradescope.graded_without_a_gpu).


def test_a_missing_file_is_the_parts_one_line_not_a_row_per_stage_or_case():
    from test_gradescope import graded_without_a_gpu

    result = graded_without_a_gpu("missing-files")
    for audience in ("student", "staff"):
        md = render_markdown(result, audience)
        summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
        assert "| tiled.cu is missing |" in summary and "failed: static checks" not in summary
        tiled = section(md, "tiled")
        assert ("⚪ not run: tiled.cu is missing: its build, 5 public cases, 5 hidden cases, launch checks, "
                "sanitizers and speed") in tiled
        assert "Hand in tiled.cu (the file name must match exactly) with launchTiled in it." in tiled
        # No stage table, no case rows, no empty Speed and Launches sections.
        assert not [line for line in tiled.splitlines() if line.startswith("|")], tiled
        assert "### " not in tiled
        html = render_html(result, audience)
        assert "tiled.cu is missing: its build, 5 public cases" in html and "<code>w96</code>" not in html


def test_without_a_gpu_the_cases_are_one_line_per_set():
    from test_gradescope import graded_without_a_gpu

    result = graded_without_a_gpu("missing-files")
    for audience in ("student", "staff"):
        naive = section(render_markdown(result, audience), "naive")
        assert "**not run: no CUDA device on this machine**" in naive
        cases = naive.split("### Cases", 1)[1].split("### Speed", 1)[0]
        assert cases.split() == ("⚪ 11 public cases: not run: no CUDA device on this machine "
                                 "⚪ 12 hidden cases: not run: no CUDA device on this machine").split()
    # The reference solutions: no part lists a case, in either report.
    solutions = graded_without_a_gpu("solutions")
    for audience in ("student", "staff"):
        md = render_markdown(solutions, audience)
        assert "| case |" not in md and "Public cases:" not in md
        assert md.count("public cases: not run: no CUDA device on this machine") == len(solutions.parts)
        html = render_html(solutions, audience)
        assert "<th>case</th>" not in html
        assert html.count("public cases: not run: no CUDA device on this machine") == len(solutions.parts)


