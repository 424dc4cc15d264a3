"""The reports students read: built from GradeResults made here, with the
values a real grading produces (H100 ceilings, 4096^3 timing, a boundary bug
at Width 17, a build that does not compile)."""

import re
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from grade_fixtures import graded_answers

from tilelab.grading.model import STAGE_TITLES, STAGES, CaseResult, ElementError, GradeResult, PartResult, Speed, Stage
from tilelab.outputs.rendering import render_html, render_markdown
from tilelab.outputs.report import write_reports
from tilelab.outputs.roofline_plot import plot_roofline
from tilelab.text.markdown import DETAIL_LINE_CAP

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
H100_GPU = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "multiprocessors": 132}
H100_CEILINGS = {"fp32_gflops": 56000.0, "dram_gbps": 2830.0, "device_name": "NVIDIA H100 80GB HBM3"}

# The failing part's hidden cases: none of these names or sizes may reach a student.
HIDDEN_FAILING = ("w49", "w129-int")
HIDDEN_PASSING = ("w5", "w96")


def stages(**overrides) -> dict:
    """Every stage passed unless overridden with (status, summary[, details, hints])."""
    result = {}
    for name in STAGES:
        status, summary, details, hints = "passed", f"{STAGE_TITLES[name]}: nothing wrong found", "", []
        if name in overrides:
            spec = overrides[name]
            status, summary = spec[0], spec[1]
            details = spec[2] if len(spec) > 2 else ""
            hints = spec[3] if len(spec) > 3 else []
        result[name] = Stage(name=name, status=status, summary=summary, details=details, seconds=1.5, hints=hints)
    return result


def square_case(width, set_name="public", passed=True, **kw) -> CaseResult:
    name = kw.pop("name", f"w{width}")
    return CaseResult(name=name, set=set_name, j=width, k=width, l=width, passed=passed, **kw)


def naive_part() -> PartResult:
    speed = Speed(
        case="4096x4096x4096", gflops=5278.0, time_ms=26.04, event_ms=26.04, cupti_ms=26.03, wall_ms=26.10,
        ceiling_value=65094.0, bound_gflops=65094.0, intensity=682.67, reference_gflops=5294.0,
        rule="reference", full_at=0.8, target_gflops=4235.2, zero_gflops=2647.0, fraction=1.0,
        flags=["timed by CUDA events; CUPTI span agrees within 0.1 %"],
    )
    return PartResult(
        id="naive", title="Naive kernel", file="naive.cu",
        stages=stages(racecheck=("not_run", "racecheck skipped: this part uses no shared memory")),
        cases=[square_case(w) for w in (1, 2, 3, 16, 17, 33)] + [square_case(64, name="w64-int", exact=True)]
        + [square_case(w, "hidden") for w in (7, 63, 65)],
        correctness_score=10, correctness_max=10, speed_score=5, speed_max=5, speed=speed, hidden_total=3,
        launches=[{"name": "naiveKernel(const float*, const float*, float*, int)", "grid": [2, 2, 1],
                   "block": [16, 16, 1], "static_shared_bytes": 0, "dynamic_shared_bytes": 0,
                   "registers_per_thread": 38, "duration_ms": 0.004}],
    )


def boundary_part() -> PartResult:
    w17 = square_case(
        17, passed=False, wrong=33, reasons=["33 of 289 elements wrong (max |got - expected| = 3.1)"],
        first_errors=[
            ElementError(row=0, col=16, expected=4.123456789, got="1.0625", allowed=2.5e-6),
            ElementError(row=16, col=0, expected=-2.75, got="unwritten", allowed=2.1e-6),
        ],
    )
    w47 = square_case(
        47, name="w47-int", passed=False, exact=True, wrong=47, reasons=["47 elements wrong"],
        first_errors=[ElementError(row=46, col=3, expected=112.0, got="104", allowed=0.0)],
    )
    hidden = [
        square_case(49, "hidden", passed=False, wrong=97, reasons=["97 elements wrong"],
                    first_errors=[ElementError(row=48, col=1, expected=7.3125, got="0", allowed=3e-6)]),
        square_case(129, "hidden", name="w129-int", passed=False, exact=True, wrong=257, reasons=["257 wrong"],
                    first_errors=[ElementError(row=128, col=2, expected=12.0, got="nan", allowed=0.0)]),
        square_case(5, "hidden"),
        square_case(96, "hidden"),
    ]
    return PartResult(
        id="boundary", title="Boundary checks for any Width", file="boundary.cu",
        stages=stages(
            correctness=(
                "failed", "2 of 4 public cases failed; hidden w49 and w129-int failed too",
                "w17: 33 elements wrong\nw47-int: 47 elements wrong\nhidden case w49 (49x49x49): 97 wrong",
                ["Width 17 is one above a 16-wide tile: the last tile's loads must read 0.0 outside the matrix",
                 "Check that the number of phases is ceil(Width / TILE), computed in integers"],
            ),
            speed=("not_run", "not run: speed is measured only when every correctness case passes"),
        ),
        cases=[square_case(16), w17, square_case(32), w47] + hidden,
        correctness_score=7.5, correctness_max=15, speed_score=0, speed_max=5, hidden_total=4,
    )


COMPILER_OUTPUT = "\n".join(
    ["tiled.cu(41): error: identifier \"__synchthreads\" is undefined <script>alert('x')</script>"]
    + [f"tiled.cu({50 + i}): note: template instantiation step {i} | detail" for i in range(70)]
)


def tiled_part() -> PartResult:
    not_run = {n: ("not_run", "skipped because the build failed") for n in STAGES if n not in ("static", "build")}
    return PartResult(
        id="tiled", title="Tiled kernel with shared memory", file="tiled.cu",
        stages=stages(
            build=("failed", "nvcc could not compile tiled.cu (1 error)", COMPILER_OUTPUT,
                   ["A barrier is spelt __syncthreads()"]),
            **not_run,
        ),
        cases=[], correctness_score=0, correctness_max=15, speed_score=0, speed_max=10,
    )


def make_result(**kw) -> GradeResult:
    fields = dict(
        assignment="tilelab_matmul", mode="grade", submission="/autograder/submission", seed=424242,
        gpu=dict(H100_GPU), ceilings=dict(H100_CEILINGS), parts=[naive_part(), boundary_part(), tiled_part()],
        started="2026-11-21T14:03:00+00:00", seconds=212.4,
        timings={"build": 95.0, "correctness": 61.2, "sanitizers": 40.1, "speed": 16.1},
        notes=["graded on the course H100; timings are comparable with the published targets"],
    )
    fields.update(kw)
    return GradeResult(**fields)


def section(markdown: str, part_id: str) -> str:
    """The Markdown of one part, from its heading to the next part's."""
    match = re.search(rf"^## {re.escape(part_id)}:.*?(?=^## |\Z)", markdown, re.S | re.M)
    assert match, f"no section for {part_id}"
    return match.group(0)


def stage_row(part_markdown: str, stage: str) -> str:
    rows = [line for line in part_markdown.splitlines()
            if line.startswith("|") and f"| {STAGE_TITLES[stage]} |" in line.replace("\\", "")]
    assert len(rows) == 1, rows
    return rows[0]


def unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


@pytest.fixture
def result() -> GradeResult:
    return make_result()


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


def test_speed_section_names_the_reference_the_ceiling_and_thresholds(result):
    md = section(render_markdown(result), "naive")
    speed = md.split("### Speed", 1)[1]
    assert "5,278 GFLOP/s (26.04 ms per call)" in speed
    assert "4,235 GFLOP/s = 6.5 % of this GPU's FP32 roof = 80 % of the reference solution here" in speed
    assert "≤ 2,647 GFLOP/s (50 % of the reference solution)" in speed
    assert "5,294 GFLOP/s, timed by the grader on this GPU the same way" in speed
    assert "set by the FP32 FMA rate measured on this GPU (65,094 GFLOP/s)" in speed
    assert "682.7 FLOP/byte" in speed
    assert "100 % of the speed points (5 / 5)" in speed
    assert "CUPTI span agrees" in speed


def test_an_estimated_target_says_so(result):
    result.parts[0].speed.rule = "estimate"
    md = section(render_markdown(result), "naive").split("### Speed", 1)[1]
    assert "of the reference solution here (estimated)" in md
    assert "an estimate, since this machine has no reference solutions to time" in md


def test_implausible_speed_says_it_earns_nothing(result):
    speed = result.parts[0].speed
    speed.gflops, speed.fraction = 80000.0, 0.0
    speed.flags = ["80000 GFLOP/s is above this GPU's measured FP32 peak: the timing cannot be right"]
    result.parts[0].speed_score = 0.0
    md = section(render_markdown(result), "naive").split("### Speed", 1)[1]
    assert "This timing earns no speed points: see the integrity notes." in md
    assert "At or above the full-credit target" not in md
    assert "above this GPU's measured FP32 peak" in md


def test_no_gpu_result_says_so_and_plots_nothing(tmp_path):
    part = boundary_part()
    part.cases = []  # nothing ran, though 4 hidden cases were due
    part.stages = stages(**{n: ("not_run", "not run: no CUDA device on this machine")
                            for n in STAGES if n not in ("static", "build")})
    result = make_result(gpu=None, ceilings=None, parts=[part], notes=["no GPU: GPU stages did not run"])
    md = render_markdown(result)
    assert "| GPU | no GPU: GPU stages did not run |" in md
    assert "all passed" not in md
    # One cause for the part, and one line for the hidden cases it has no record of.
    assert "| not run: no CUDA device on this machine |" in md
    assert "⚪ 4 hidden cases: not run: no CUDA device on this machine" in md and "0 passed" not in md
    assert "4 hidden cases: not run: no CUDA device on this machine" in render_markdown(result, "staff")
    assert not plot_roofline(result, tmp_path / "roofline.png")
    assert not (tmp_path / "roofline.png").exists()


def test_plot_is_a_png_without_touching_pyplot(result, tmp_path):
    pyplot_loaded_before = "matplotlib.pyplot" in sys.modules
    path = tmp_path / "roofline.png"
    assert plot_roofline(result, path)
    assert path.read_bytes()[:8] == PNG_MAGIC
    if not pyplot_loaded_before:
        assert "matplotlib.pyplot" not in sys.modules


def test_no_plot_when_no_part_was_timed(result, tmp_path):
    for part in result.parts:
        part.speed = None
    path = tmp_path / "roofline.png"
    assert not plot_roofline(result, path)
    assert not path.exists()


def test_write_reports_writes_all_files(result, tmp_path):
    out = tmp_path / "out"
    written = write_reports(result, out)
    assert set(written) == {"markdown", "html", "plot"}
    assert written["markdown"].read_text(encoding="utf-8").startswith("# tilelab")
    assert 'src="roofline.png"' in written["html"].read_text(encoding="utf-8")
    assert written["plot"].read_bytes()[:8] == PNG_MAGIC


def test_the_staff_reports_take_the_plot_the_students_got(result, tmp_path, monkeypatch):
    student = write_reports(result, tmp_path / "student")
    import tilelab.outputs.report as report
    monkeypatch.setattr(report, "plot_roofline", lambda *args: pytest.fail("drawn twice"))
    staff = write_reports(result, tmp_path / "staff", audience="staff", plot_drawn=student["plot"])
    assert staff["plot"].read_bytes() == student["plot"].read_bytes()
    assert 'src="roofline.png"' in staff["html"].read_text(encoding="utf-8")


def test_the_roofline_axes_are_labelled_in_plain_numbers(result, tmp_path):
    # A log axis labels itself in mathtext (10^4), whose parser is slow to
    # start and not thread-safe; the plot says 10,000.
    from tilelab.outputs.roofline_plot import roofline_axes
    figure, axes = roofline_axes(56000.0, 2900.0, (2.4, 8000.0), (3600.0, 168000.0), "NVIDIA H100 80GB HBM3")
    figure.canvas.draw()
    labels = [t.get_text() for t in axes.get_yticklabels() if t.get_text()]
    assert "10,000" in labels and "100,000" in labels and not any("$" in t for t in labels)
    x_labels = [t.get_text() for t in axes.get_xticklabels()]
    assert "10" in x_labels and "1,000" in x_labels


def test_write_reports_without_ceilings_leaves_the_plot_out(result, tmp_path):
    result.ceilings = None
    written = write_reports(result, tmp_path, audience="staff")
    assert "plot" not in written and not (tmp_path / "roofline.png").exists()
    assert "<img" not in written["html"].read_text(encoding="utf-8")


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


def test_check_names_the_rule_its_targets_come_from(result):
    from rich.console import Console

    from tilelab.outputs.check_view import print_check

    def printed() -> str:
        console = Console(record=True, width=160)
        print_check(result, console)
        return console.export_text()

    assert "a share of the reference solution's speed timed on this GPU" in printed()
    result.parts[0].speed.rule = "estimate"
    text = printed()
    assert "5278/~4235" in text
    assert "Targets marked ~ are estimates: this machine has no reference solutions to time" in text


def test_check_shows_each_size_of_the_challenge_against_cublas():
    from rich.console import Console

    from grade_fixtures import LADDER_H100, challenge_result
    from tilelab.outputs.check_view import print_check

    result = challenge_result(LADDER_H100["transposed tile"])  # 32,418 and 32,876 GFLOP/s
    console = Console(record=True, width=200)
    print_check(result, console)
    text = console.export_text()
    # Full credit from 0.8 x cuBLAS: 41,329 at 4096^3 (cuBLAS 51,661), 41,543 at 2048 x 4096 x 8192 (51,929).
    assert "32418/41329" in text and "32876/41543" in text
    assert "63% at 4096x4096x4096, 63% at 2048x4096x8192 of cuBLAS SGEMM's speed here" in text
    assert "a share of cuBLAS SGEMM (FP32) timed here" in text and "extra credit" in text


# The challenge part, scored against cuBLAS (grade_fixtures: the H100 figures
# of docs/measurements-archive.md, 2026-11-22).


def test_the_challenge_speed_shows_every_size_against_cublas_and_the_references():
    from grade_fixtures import LADDER_H100, challenge_result

    result = challenge_result(LADDER_H100["transposed tile"])  # 32,418 and 32,876 GFLOP/s
    md = section(render_markdown(result), "challenge")
    speed = md.split("### Speed", 1)[1]
    assert ("| at 4096x4096x4096 | 32,418 GFLOP/s (4.24 ms per call) = 62.8 % of cuBLAS SGEMM (51,661 GFLOP/s) at "
            "4096x4096x4096; the reference solution reaches 47,670, 92.3 % of cuBLAS; 72.2 % of the speed points "
            "at this size |") in speed
    assert ("| at 2048x4096x8192 | 32,876 GFLOP/s (4.18 ms per call) = 63.3 % of cuBLAS SGEMM (51,929 GFLOP/s) at "
            "2048x4096x8192; the reference solution reaches 47,833, 92.1 % of cuBLAS") in speed
    assert "80 % of cuBLAS SGEMM at each size: 41,329 GFLOP/s at 4096x4096x4096, 41,543 GFLOP/s at 2048x4096x8192" \
        in speed
    assert ("≤ 9,256 GFLOP/s at 4096x4096x4096, ≤ 9,076 GFLOP/s at 2048x4096x8192 (the textbook tiled "
            "kernel") in speed
    assert "72.8 % of the speed points (10.91 / 15) (the sizes' shares combined by geometric mean)" in speed
    assert "62.8 % of cuBLAS" in render_html(result)
    summary = render_markdown(result).split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert "10.91 / 15 (32,418 GFLOP/s, 62.8 % of cuBLAS)" in summary
    # The other parts keep their wording.
    tiled = section(render_markdown(result), "tiled").split("### Speed", 1)[1]
    assert "| timed case | 4096x4096x4096 |" in tiled and "cuBLAS" not in tiled


def test_a_reference_not_timed_on_this_gpu_is_said_so(tmp_path):
    from grade_fixtures import LADDER_H100, challenge_result

    result = challenge_result(LADDER_H100["warp tiling"])
    part = result.parts[-1]
    for speed in [part.speed, *part.speeds]:
        speed.reference_gflops = None
    md = section(render_markdown(result), "challenge")
    assert md.count("the reference solution was not timed on this GPU") == 2
    assert "36,843 GFLOP/s (3.73 ms per call) = 71.3 % of cuBLAS SGEMM" in md
    assert "not timed on this GPU" in render_html(result, "staff")
    assert plot_roofline(result, tmp_path / "roofline.png")


def test_extra_credit_and_the_leaderboard_alias_head_the_report(tmp_path):
    from grade_fixtures import LADDER_H100, challenge_result

    result = challenge_result(LADDER_H100["reference"])
    md = render_markdown(result, leaderboard_alias="amber-falcon-3f9a")
    # The total leaves the extra credit out; the score counts it (tiled 25, challenge 20).
    assert "**Score: 45 / 25**" in md
    assert "Extra credit: challenge, up to 20 points. They count in the score (20 earned here) but not in the total." \
        in md
    assert "## challenge: Challenge: toward cuBLAS (`challenge.cu`), 20 / 20 (extra credit)" in md
    assert "| leaderboard | you appear as `amber-falcon-3f9a` on the class leaderboard |" in md
    assert "leaderboard" not in render_markdown(result).split("## Summary", 1)[0]
    written = write_reports(result, tmp_path, leaderboard_alias="amber-falcon-3f9a")
    assert "<code>amber-falcon-3f9a</code> on the class leaderboard" in written["html"].read_text(encoding="utf-8")
    assert written["plot"].read_bytes()[:8] == PNG_MAGIC


def test_rooflines_drawn_in_many_threads_at_once_all_come_out(result, tmp_path):
    """`tilelab batch` writes the reports of gradings side by side, in
    threads; matplotlib's text layout is not thread-safe, and two figures
    drawn at once failed with a ParseException (H100, 2026-11-23; without
    the lock this test failed three times out of three here)."""
    paths = [tmp_path / f"roofline-{i}.png" for i in range(24)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        drawn = list(pool.map(lambda p: plot_roofline(result, p), paths))
    assert all(drawn)
    assert all(p.read_bytes()[:8] == PNG_MAGIC for p in paths)


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


def test_a_grading_without_counters_keeps_the_one_panel_plot_and_no_traffic_section(result, tmp_path):
    # Results written before counters were read (and parts timed without them) read as before.
    import struct

    md = render_markdown(result)
    assert "What one call moved" not in md and "traffic-section" not in render_html(result)
    path = tmp_path / "roofline.png"
    assert plot_roofline(result, path)
    assert struct.unpack(">II", path.read_bytes()[16:24]) == (1200, 600)  # one 10 x 5 inch panel at 120 dpi
