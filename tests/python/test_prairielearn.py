"""PrairieLearn's results form (tilelab.outputs.prairielearn), checked against
its documented format: PrairieLearn/PrairieLearn docs/externalGrading.md,
"Grading results" (score in [0, 1] when gradable; gradable false with
format_errors; message, output, images as {label, url} data URLs; tests with
name, description, points, max_points, message, output; at most 1 MB).
The gradings are the fixtures' figures from a real H100 run."""

import copy

import pytest
from grade_fixtures import failing_boundary, grade_result, passing_tiled

from tilelab.outputs import prairielearn
from tilelab.outputs.roofline_plot import plot_roofline


def test_a_graded_hand_in_scores_a_fraction_with_a_test_per_stage(assignment, tmp_path):
    result = grade_result(passing_tiled(), failing_boundary())
    plot = tmp_path / "roofline.png"
    assert plot_roofline(result, plot)
    doc = prairielearn.results(result, assignment, plot)
    assert prairielearn.spec_problems(doc) == []
    assert doc["gradable"] is True
    assert doc["score"] == pytest.approx(result.score / result.max_score)
    names = [t["name"] for t in doc["tests"]]
    assert "Tiled kernel with shared memory: speed" in names and "Boundary checks for any Width: build" in names
    speed = next(t for t in doc["tests"] if t["name"] == "Tiled kernel with shared memory: speed")
    assert (speed["points"], speed["max_points"]) == (10.0, 10.0)
    assert doc["images"][0]["url"].startswith("data:image/png;base64,")


def test_staff_notes_stay_out(assignment):
    result = grade_result(passing_tiled())
    result.staff_notes = ["Calibration failed: the reference of naive ended with exit status 126"]
    doc = prairielearn.results(result, assignment)
    assert "exit status 126" not in str(doc)


def test_without_a_gpu_nothing_is_gradable_and_the_student_is_not_blamed(assignment):
    result = grade_result(passing_tiled())
    result.gpu = None
    doc = prairielearn.results(result, assignment)
    assert prairielearn.spec_problems(doc) == []
    assert doc["gradable"] is False and "score" not in doc
    assert "not a problem with your work" in doc["format_errors"][0]


def test_a_hand_in_whose_parts_all_fail_to_compile_is_not_gradable(assignment):
    part = failing_boundary()
    part.stages["build"].status = "failed"
    part.stages["build"].summary = "boundary.cu does not compile"
    doc = prairielearn.results(grade_result(part), assignment)
    assert doc["gradable"] is False and doc["format_errors"] == ["boundary.cu: boundary.cu does not compile"]
    assert prairielearn.spec_problems(doc) == []


def test_a_grader_failure_is_not_gradable_and_valid():
    doc = prairielearn.error_results("Traceback (most recent call last): ...")
    assert prairielearn.spec_problems(doc) == [] and doc["gradable"] is False


def test_the_check_catches_what_prairielearn_refuses():
    assert prairielearn.spec_problems({"score": 1.5}) == ["a gradable result needs a score in [0, 1], not 1.5"]
    assert prairielearn.spec_problems({"gradable": False, "points": 3}) == ["unknown top-level field 'points'"]
    assert prairielearn.spec_problems({"score": 0.5, "images": ["http://example.com/a.png"]}) == [
        "images[0] is not a data URL"]
    assert prairielearn.spec_problems({"score": 0.5, "tests": [{"name": "t", "points": "3"}]}) == [
        "tests[0].points has type str"]
    assert prairielearn.spec_problems({"score": 0.5, "output": "x" * 1_100_000})[-1].startswith("larger than")


def test_long_outputs_are_cut_to_stay_under_one_megabyte(assignment):
    part = passing_tiled()
    part.stages["memcheck"].status = "failed"
    part.stages["memcheck"].details = "x" * 300_000  # one endless line of sanitizer output
    result = grade_result(*[copy.deepcopy(part) for _ in range(5)])
    doc = prairielearn.results(result, assignment)
    assert prairielearn.spec_problems(doc) == []
    assert any(t["output"].endswith("[... cut ...]") for t in doc["tests"])


def test_extra_credit_stays_out_of_the_denominator_and_the_score_stops_at_one(assignment):
    from grade_fixtures import LADDER_H100, challenge_result

    # A failing boundary part (7.5 / 20) and a challenge part at rung 1 of the
    # ladder (H100 figures: 16,101 and 15,803 GFLOP/s, 3.15 of 15 speed points).
    result = challenge_result(LADDER_H100["block tiling"], with_tiled=False)
    result.parts.insert(0, failing_boundary())
    doc = prairielearn.results(result, assignment)
    assert prairielearn.spec_problems(doc) == []
    assert result.max_score == 20.0 and result.parts[-1].speed_score == pytest.approx(3.15, abs=0.01)
    assert doc["score"] == pytest.approx((7.5 + 5.0 + result.parts[-1].speed_score) / 20.0)
    assert "of them extra credit, on top of the total" in doc["message"]
    challenge = [t for t in doc["tests"] if "(extra credit)" in t["name"]]
    assert challenge and all(t["max_points"] == 0 for t in challenge)
    # Full marks and the extra credit too: PrairieLearn takes no score above 1.
    full = challenge_result(LADDER_H100["reference"])
    doc = prairielearn.results(full, assignment)
    assert full.score / full.max_score > 1 and doc["score"] == 1.0
    assert "PrairieLearn's score stops at 100 %" in doc["message"] and prairielearn.spec_problems(doc) == []


def test_a_real_grading_without_a_gpu_shows_what_ran_and_no_test_for_what_did_not(assignment):
    from test_gradescope import graded_without_a_gpu

    result = graded_without_a_gpu("missing-files")
    doc = prairielearn.results(result, assignment)
    assert prairielearn.spec_problems(doc) == []
    assert doc["gradable"] is False and "no GPU" in doc["format_errors"][0]
    parts = [t for t in doc["tests"] if t["description"] in {p.id for p in result.parts}]
    # As on Gradescope: a build test per part, the GPU stages not one test each.
    assert [t["name"].split(": ")[-1] for t in parts] == ["build"] * len(result.parts)
    assert parts[0]["message"] == "passed" and "Not run here (this grader has no GPU)" in parts[0]["output"]
    assert parts[1]["message"] == "failed" and "tiled.cu is missing" in parts[1]["output"]
    assert "| case |" not in str(doc)
