"""results.json against Gradescope's published field list, and what students may see."""

import dataclasses
import functools
import json
import os
import tempfile
from pathlib import Path

import pytest
from grade_fixtures import LADDER_H100, challenge_result, failing_boundary, grade_result, graded_answers, passing_tiled

from tilelab.outputs.gradescope import error_results, results_json, spec_problems, student_visible_text, write_results
from tilelab.grading.answer_key import load_key
from tilelab.grading.answers import grade_answers


def check_spec(doc: dict) -> None:
    """Gradescope's field list and types (tilelab.outputs.gradescope.spec_problems holds them)."""
    assert spec_problems(doc) == []


def test_the_spec_check_catches_wrong_names_and_types():
    good = {"score": 1.0, "tests": [{"name": "t", "score": 1, "max_score": 1, "status": "passed"}]}
    assert spec_problems(good) == []
    assert spec_problems({**good, "scores": 1}) == ["unknown top-level field 'scores'"]
    assert spec_problems({**good, "execution_time": "12"}) == ["execution_time has type str"]
    bad_test = {"name": "t", "score": True, "visibility": "students", "tags": ["a", 1]}
    assert spec_problems({"tests": [bad_test]}) == [
        "tests[0].score has type bool", "tests[0].visibility 'students'", "tests[0].tags holds a non-string"]
    assert spec_problems({**good, "score": float("nan")})[0].startswith("not valid JSON")


def test_results_follow_the_spec_and_add_up(assignment):
    doc = results_json(grade_result(passing_tiled(), failing_boundary()), assignment)
    check_spec(doc)
    assert doc["score"] == pytest.approx(sum(t["score"] for t in doc["tests"]))
    assert doc["score"] == pytest.approx(25.0 + 7.5)
    assert sum(t["max_score"] for t in doc["tests"]) == pytest.approx(25.0 + 20.0)
    names = [t["name"] for t in doc["tests"]]
    assert "Tiled kernel with shared memory: speed" in names
    assert [t["number"] for t in doc["tests"][:3]] == ["1.1", "1.2", "1.3"]


def test_hidden_cases_are_hidden_and_announced(assignment):
    doc = results_json(grade_result(failing_boundary()), assignment)
    hidden = [t for t in doc["tests"] if "hidden cases" in t["name"]]
    assert len(hidden) == 1 and hidden[0]["visibility"] == "after_published"
    assert hidden[0]["output"] == "1 of 2 hidden cases passed."
    visible_text = doc["output"] + "".join(t["output"] for t in doc["tests"] if t["visibility"] == "visible")
    assert "w97" not in visible_text and "w48" not in visible_text
    assert "2 hidden cases" in visible_text
    # The total would reveal hidden results: the summary counts visible tests only.
    assert "3.75 / 12.50" in doc["output"]  # public cases 7.5 + speed 5


def test_public_failure_output_says_what_to_fix(assignment):
    doc = results_json(grade_result(failing_boundary()), assignment)
    public = next(t for t in doc["tests"] if "public cases" in t["name"])
    assert public["status"] == "failed" and public["score"] == pytest.approx(3.75)
    assert "| w17 | 17 x 17 x 17 | FAILED: 17 elements of P are never written |" in public["output"]
    assert "P[16][0]: expected 3.25, got unwritten" in public["output"]
    assert "not a multiple of 32" in public["output"]


def test_speed_output_shows_the_target_both_ways(assignment):
    doc = results_json(grade_result(passing_tiled()), assignment)
    speed = next(t for t in doc["tests"] if t["name"].endswith(": speed"))
    assert speed["score"] == 10.0 and speed["status"] == "passed"
    assert ("full credit from 7,353 GFLOP/s = 13.1 % of this GPU's FP32 roof = 80 % of the reference solution "
            "here") in speed["output"]
    assert "reference solution: 9,191 GFLOP/s, timed by the grader on this GPU" in speed["output"]
    assert "the FP32 FMA rate measured on this GPU" in speed["output"]


def test_staff_notes_go_to_a_hidden_test_only(assignment):
    result = grade_result(passing_tiled())
    result.staff_notes = ["Calibration failed: the reference of naive ended with exit status 126"]
    doc = results_json(result, assignment)
    (staff,) = [t for t in doc["tests"] if "staff" in t["tags"]]
    assert staff["visibility"] == "hidden" and "exit status 126" in staff["output"]
    assert "exit status 126" not in student_visible_text(doc)
    check_spec(doc)


def test_withheld_points_show_as_failed_public_cases(assignment):
    part = passing_tiled()
    part.stages["racecheck"].status = "failed"
    part.withheld_by = ["racecheck"]
    part.correctness_score = 0.0
    doc = results_json(grade_result(part), assignment)
    public = next(t for t in doc["tests"] if "public cases" in t["name"])
    assert public["score"] == 0 and public["status"] == "failed"


def test_error_results_are_valid_and_keep_the_traceback_from_students(tmp_path):
    doc = error_results("Traceback (most recent call last):\n  ...\nRuntimeError: boom")
    check_spec(doc)
    visible, hidden = doc["tests"]
    assert visible["visibility"] == "visible" and "not a problem with your work" in doc["output"]
    assert hidden["visibility"] == "hidden" and "RuntimeError: boom" in hidden["output"]
    path = tmp_path / "results" / "results.json"
    write_results(doc, path)
    assert json.loads(path.read_text()) == doc
    assert not list(path.parent.glob("*.tmp"))


def test_one_test_per_question_after_the_parts(assignment):
    result = grade_result(passing_tiled())
    result.answers = graded_answers("answers-partial")
    doc = results_json(result, assignment)
    check_spec(doc)
    questions = [t for t in doc["tests"] if t["number"].startswith("Q.")]
    assert [t["number"] for t in questions] == [f"Q.{n}" for n in range(1, 37)]
    assert doc["tests"][-36:] == questions  # after every part's tests
    assert questions[0]["name"] == "Question matadd-smem"
    assert doc["score"] == pytest.approx(25.0 + 25.0)
    assert sum(t["max_score"] for t in questions) == 34
    by_name = {t["name"]: t for t in questions}
    wrong = by_name["Question tile32-reduction"]
    assert (wrong["score"], wrong["max_score"], wrong["status"]) == (0, 1, "failed")
    assert "Your answer: `16`" in wrong["output"] and "not within 1 % of the expected value" in wrong["output"]
    assert "32" not in wrong["output"].replace("32 x 32", "")  # the question text says 32 x 32; the key is 32
    right = by_name["Question naive-roof"]
    assert (right["score"], right["status"]) == (1, "passed") and "Read as 388.75" in right["output"]
    empty = by_name["Question ridge"]
    assert empty["status"] == "failed" and "Left empty" in empty["output"]
    text = by_name["Question matadd-smem-why"]
    assert (text["score"], text["max_score"], text["status"]) == (0, 0, "passed")
    assert text["tags"] == ["questions", "manual"] and "a TA grades it by hand" in text["output"]
    assert "no reuse to capture" in text["output"]  # the student's own text
    # Question results are shown after the due date (assignment.yaml): the
    # summary says they are graded, not how they went.
    assert all(t["visibility"] == "after_due_date" for t in questions)
    assert "25 / 34" not in doc["output"] and "shown after the due date" in doc["output"]
    shown_now = dataclasses.replace(
        assignment, grading={**assignment.grading, "visibility": {**assignment.grading["visibility"],
                                                                  "questions": "visible"}})
    doc = results_json(result, shown_now)
    assert "Questions: 25 / 34 automatic points (25 of 34 right, 6 wrong, 3 unanswered)" in doc["output"]


def test_the_summary_counts_the_questions_as_the_handouts_rubric_does(assignment):
    """While the question results wait for the due date, the summary gives
    the handout's counts: the questions graded automatically, and the others
    as written answers a TA grades by hand, never all of them as "graded"."""
    automatic = [q for q in assignment.questions if q.kind != "text"]
    by_hand = [q for q in assignment.questions if q.kind == "text"]
    assert automatic and by_hand
    result = grade_result(passing_tiled())
    result.answers = graded_answers("answers-partial")
    summary = results_json(result, assignment)["output"]
    assert (f"Questions: the results of the {len(automatic)} questions graded automatically are shown after the "
            f"due date. The other {len(by_hand)} are written answers, graded by hand by a TA.") in summary
    assert f"{len(assignment.questions)} exercise questions" not in summary


def test_question_tests_never_show_the_key(assignment, root):
    result = grade_result(passing_tiled())
    result.answers = graded_answers("answers-partial")
    doc = results_json(result, assignment)
    text = json.dumps(doc)
    key = (root / "solutions" / "answers.yaml").read_text()
    for model_answer in ("there is no reuse for shared memory to capture", "most of each transferred segment"):
        assert model_answer in key and model_answer not in text
    occupancy = next(t for t in doc["tests"] if t["name"] == "Question occupancy")
    assert "62.5" not in occupancy["output"]


def test_a_missing_answers_file_is_named_in_the_summary_and_each_question(assignment, root, tmp_path):
    key = load_key(root / "solutions" / "answers.yaml", assignment.questions)
    result = grade_result(failing_boundary())
    result.answers = grade_answers(tmp_path / "answers.yaml", assignment.questions, key)
    doc = results_json(result, assignment)
    check_spec(doc)
    assert "- answers.yaml was not handed in: every question counts as unanswered." in doc["output"]
    questions = [t for t in doc["tests"] if t["number"].startswith("Q.")]
    assert all(t["score"] == 0 and "answers.yaml was not handed in." in t["output"] for t in questions)


def test_without_a_key_the_questions_say_they_were_not_graded(assignment):
    result = grade_result(passing_tiled())
    result.answers = graded_answers("answers-all-correct", key=False)
    doc = results_json(result, assignment)
    check_spec(doc)
    assert "Questions: not graded here: the answer key is not in this copy" in doc["output"]
    roof = next(t for t in doc["tests"] if t["name"] == "Question naive-roof")
    assert roof["score"] == 0 and "**not graded**: Read as 388.75" in roof["output"]


# The challenge part: extra credit, scored against cuBLAS (grade_fixtures: the H100
# figures of docs/measurements-archive.md, 2026-11-22).


def test_extra_credit_earns_points_without_raising_the_total(assignment):
    result = challenge_result(LADDER_H100["transposed tile"])  # 32,418 / 32,876 GFLOP/s: partial speed credit
    doc = results_json(result, assignment)
    assert spec_problems(doc) == []
    challenge = [t for t in doc["tests"] if "challenge" in t["tags"]]
    assert all(t["name"].startswith("Challenge: toward cuBLAS (extra credit): ") for t in challenge)
    assert all(t["max_score"] == 0 for t in challenge)
    # The tests' max_scores add up to the total, which leaves the extra credit out ...
    assert sum(t["max_score"] for t in doc["tests"]) == pytest.approx(result.max_score) == pytest.approx(25.0)
    # ... and the score counts it: tiled 25 + challenge 5 correctness + 15 x 0.7276 speed.
    challenge_part_result = result.parts[-1]
    assert challenge_part_result.speed_score == pytest.approx(15 * 0.7276, abs=1e-3)
    assert doc["score"] == pytest.approx(sum(t["score"] for t in doc["tests"]))
    assert doc["score"] == pytest.approx(25.0 + 5.0 + challenge_part_result.speed_score)
    by_name = {t["name"].split(": ")[-1]: t for t in challenge}
    # An explicit status: a max_score of 0 would make every earned test read as "passed" by default.
    assert by_name["public cases (1)"]["status"] == "passed" and by_name["public cases (1)"]["score"] == 2.5
    assert by_name["speed"]["status"] == "failed"  # partial credit, as for any part
    assert "10.91 of up to 15.00 points, on top of the assignment's total" in by_name["speed"]["output"]
    assert "Extra credit: Challenge: toward cuBLAS, worth up to 20.00 points on top of the total" in doc["output"]
    full = results_json(challenge_result(LADDER_H100["reference"]), assignment)
    speed = next(t for t in full["tests"] if t["name"].endswith("(extra credit): speed"))
    assert (speed["score"], speed["max_score"], speed["status"]) == (15.0, 0.0, "passed")


def test_the_speed_test_shows_every_size_against_cublas_and_the_reference(assignment):
    doc = results_json(challenge_result(LADDER_H100["transposed tile"]), assignment)
    speed = next(t for t in doc["tests"] if t["name"].endswith("(extra credit): speed"))["output"]
    assert ("- at 4096x4096x4096: 32,418 GFLOP/s (4.24 ms per call) = 62.8 % of cuBLAS SGEMM (51,661 GFLOP/s) at "
            "4096x4096x4096; the reference solution reaches 47,670, 92.3 % of cuBLAS") in speed
    assert "- at 2048x4096x8192: 32,876 GFLOP/s" in speed and "(51,929 GFLOP/s)" in speed
    assert "80 % of cuBLAS SGEMM at each size: 41,329 GFLOP/s at 4096x4096x4096" in speed
    assert "≤ 9,256 GFLOP/s at 4096x4096x4096, ≤ 9,076 GFLOP/s at 2048x4096x8192" in speed


# Real gradings on a machine that shows no GPU (CUDA_VISIBLE_DEVICES="" hides
# any there is): naive.cu alone (tests/submissions/missing-files), the
# reference solutions, and an empty hand-in. Shared with test_report.py and
# test_prairielearn.py; each is graded once per test process.

ROOT = Path(__file__).resolve().parents[2]
HAND_INS = {"missing-files": ROOT / "tests" / "submissions" / "missing-files", "solutions": ROOT / "solutions"}


@functools.lru_cache(maxsize=None)
def _graded(hand_in: str):
    from tilelab.grading.options import GradeOptions
    from tilelab.grading.pipeline import grade
    from tilelab.system.sandbox import Sandbox

    build = Path(os.environ.get("TILELAB_BUILD_DIR", "/nonexistent"))
    if not (build / "bin" / "tilelab-verify").exists():
        return None
    source = HAND_INS.get(hand_in) or Path(tempfile.mkdtemp(prefix="tilelab-empty-hand-in-"))
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        # As the current user: the sandbox is not what these tests are about.
        return grade(source, GradeOptions.for_tree(ROOT, build, Path(tempfile.mkdtemp())), sandbox=Sandbox())
    finally:
        if hidden is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = hidden


def graded_without_a_gpu(hand_in: str):
    """The GradeResult of a real grading of `hand_in` ("missing-files",
    "solutions" or "empty") with no GPU in sight."""
    result = _graded(hand_in)
    if result is None:
        pytest.skip("skipped: needs a built project (run through ctest, which sets TILELAB_BUILD_DIR)")
    if result.gpu is not None:
        pytest.skip("skipped: CUDA_VISIBLE_DEVICES did not hide this machine's GPU")
    return result


def visible_tests(doc: dict) -> list:
    return [t for t in doc["tests"] if t.get("visibility", doc.get("visibility", "visible")) != "hidden"]


def test_without_a_gpu_the_score_is_withheld_and_nothing_that_did_not_run_is_failed(assignment):
    result = graded_without_a_gpu("missing-files")
    doc = results_json(result, assignment)
    check_spec(doc)
    # Recorded 0, marked withheld for the staff, with a hidden test saying so (which also hides the total).
    assert doc["score"] == 0.0 and "no GPU" in doc["extra_data"]["tilelab"]["withheld"]
    (staff,) = [t for t in doc["tests"] if t["name"] == "Score withheld: no GPU (staff only)"]
    assert staff["visibility"] == "hidden" and "not the student's" in staff["output"]
    # Each part keeps its build test only; the GPU stages have no test to fail.
    part_tests = [t for t in doc["tests"] if set(t["tags"]) & {p.id for p in result.parts}]
    assert [t["name"].split(": ")[-1] for t in part_tests] == ["build"] * len(result.parts)
    naive, tiled = part_tests[0], part_tests[1]
    assert naive["status"] == "passed"
    assert ("Not run here (this grader has no GPU): 11 public cases, 12 hidden cases, launch checks, sanitizers "
            "and speed.") in naive["output"]
    # A missing file is the student's to fix: still a failed build test, naming the file.
    assert tiled["status"] == "failed" and "tiled.cu is missing" in tiled["output"]
    failed = [t["name"] for t in visible_tests(doc) if t["status"] == "failed"]
    assert all(n.endswith(": build") and "Naive" not in n or n.startswith("Question ") for n in failed), failed
    # Said once, at the top: not the student's fault, and the score is not theirs.
    shown = student_visible_text(doc)
    assert doc["output"].startswith("**Not graded: this grader has no GPU.**")
    assert shown.count("not a problem with your work") == 1 and "the score of this run is not yours" in shown
    assert "score nothing" not in shown and "points in the tests shown now" not in shown


def test_without_a_gpu_each_part_has_one_cause_in_the_summary(assignment):
    doc = results_json(graded_without_a_gpu("missing-files"), assignment)
    rows = dict(line.strip("| ").split(" | ") for line in doc["output"].splitlines()
                if line.startswith("| ") and not line.startswith(("| part", "| ---")))
    assert rows["Naive kernel"] == "built; not run here (no GPU)"
    assert rows["Tiled kernel with shared memory"] == "tiled.cu is missing"
    assert rows["Challenge: toward cuBLAS"] == "challenge.cu is missing"
    assert "static checks: " not in doc["output"]  # the cause, not the stage it was found in


def test_the_reference_solutions_without_a_gpu_build_and_fail_nothing(assignment):
    result = graded_without_a_gpu("solutions")
    doc = results_json(result, assignment)
    check_spec(doc)
    assert doc["score"] == 0.0 and "withheld" in doc["extra_data"]["tilelab"]
    builds = [t for t in doc["tests"] if t["name"].endswith(": build")]
    assert len(builds) == len(result.parts) and all(t["status"] == "passed" for t in builds)
    assert all("Not run here (this grader has no GPU)" in t["output"] for t in builds)
    # The questions need no GPU: graded as ever (the key gives every automatic point).
    questions = [t for t in doc["tests"] if "questions" in t["tags"]]
    assert questions and all(t["status"] == "passed" and t["score"] == t["max_score"] for t in questions)
    assert not [t["name"] for t in visible_tests(doc) if t["status"] == "failed"]


def test_a_hand_in_with_nothing_built_keeps_its_score_and_one_line_per_case_set(assignment):
    """Nothing built, nothing needed a GPU: the score (0) is the student's,
    and what did not run says why once per part and case set, never per case."""
    result = graded_without_a_gpu("empty")
    doc = results_json(result, assignment)
    check_spec(doc)
    assert doc["score"] == 0.0 and "withheld" not in doc["extra_data"]["tilelab"]
    assert "**0.00 / " in doc["output"] and "| Tiled kernel with shared memory | tiled.cu is missing |" in doc["output"]
    by_name = {t["name"]: t for t in doc["tests"]}
    public = by_name["Tiled kernel with shared memory: public cases (5)"]
    assert public["output"] == "5 public cases: not run: tiled.cu is missing" and public["status"] == "failed"
    assert by_name["Tiled kernel with shared memory: hidden cases (5)"]["output"] == \
        "5 hidden cases: not run: tiled.cu is missing"
    assert "- **speed**: not run — tiled.cu is missing" in by_name["Tiled kernel with shared memory: speed"]["output"]
    # No table of cases that did not run, in any test.
    assert not [t["name"] for t in doc["tests"] if "| case |" in t["output"]]
