"""The reports' speed sections: the rule a target comes from, the reference and
the ceiling, and the challenge part scored against cuBLAS at each size."""

from report_fixtures import PNG_MAGIC, section

from tilelab.outputs.rendering import render_html, render_markdown
from tilelab.outputs.report import write_reports
from tilelab.outputs.roofline_plot import plot_roofline


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
