"""A part's public and hidden cases in one launcher process on a real GPU
(grading/stages/correctness.py): one run where the public cases end well,
a run of the hidden cases alone after a run that ended before them, and
nothing a student is shown printed while hidden cases ran."""

from pathlib import Path

import pytest

from tilelab.grading.options import GradeOptions
from tilelab.grading.pipeline import grade
from tilelab.system.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch) -> None:
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def _graded(build, out: Path, submission: Path):
    options = GradeOptions.for_tree(ROOT, build, out, parts=("naive",), questions=False, mode="grade",
                                    sanitizers=False, timing=False)
    (naive,) = grade(submission, options, sandbox=Sandbox()).parts
    logs = {p.stem for p in (out / "staff" / "logs").glob("naive-*.log")}
    return naive, logs


def _by_set(naive) -> dict:
    return {name: [c.passed for c in naive.cases if c.set == name] for name in ("public", "hidden")}


def test_a_correct_part_runs_both_sets_in_one_launcher_process(build, device, tmp_path):
    naive, logs = _graded(build, tmp_path / "out", ROOT / "solutions")
    assert logs == {"naive-cases"}
    passed = _by_set(naive)
    assert all(passed["public"]) and all(passed["hidden"]) and len(passed["hidden"]) == 12
    assert all(c.ran for c in naive.cases) and naive.stages["correctness"].status == "passed"


def test_a_run_that_ends_before_the_hidden_cases_is_followed_by_theirs_alone(build, device, tmp_path):
    # exit(0) on the launcher's third call: two cases of each set pass, as when each set had a process.
    naive, logs = _graded(build, tmp_path / "out", SUBMISSIONS / "naive-exits-early")
    assert logs == {"naive-cases", "naive-hidden"}
    passed = _by_set(naive)
    assert passed["public"][:3] == [True, True, False] and sum(passed["public"]) == 2
    assert passed["hidden"][:3] == [True, True, False] and sum(passed["hidden"]) == 2


def test_what_a_failing_part_printed_is_shown_from_its_public_cases_alone(build, device, tmp_path):
    wrong = (SUBMISSIONS / "naive-transposed-index" / "naive.cu").read_text()
    launcher = "void launchNaive(const float* M, const float* N, float* P, int Width) {\n"
    assert launcher in wrong
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    (hand_in / "naive.cu").write_text("#include <cstdio>\n" + wrong.replace(
        launcher, launcher + '  std::printf("called with Width=%d.\\n", Width);\n  std::fflush(stdout);\n'))
    naive, logs = _graded(build, tmp_path / "out", hand_in)
    assert logs == {"naive-cases", "naive-public"}  # both sets in one run, then the public ones for what they print
    assert not any(_by_set(naive)["hidden"]) and naive.stages["correctness"].status == "failed"
    shown = naive.stages["correctness"].details
    assert "called with Width=17." in shown and "called with Width=100." in shown
    for width in (5, 7, 63, 65, 127, 128, 129, 255, 257, 500):  # the hidden widths (assignment.yaml)
        assert f"called with Width={width}." not in shown
    staff = (tmp_path / "out" / "staff" / "logs" / "naive-cases.log").read_text()
    assert "called with Width=500." in staff  # the hidden cases ran there, and printed to staff alone


def test_the_sets_of_a_check_run_as_before(build, device, tmp_path):
    options = GradeOptions.for_tree(ROOT, build, tmp_path / "out", parts=("naive",), questions=False,
                                    mode="check", sanitizers=False, timing=False)
    (naive,) = grade(ROOT / "solutions", options, sandbox=Sandbox()).parts
    assert {p.stem for p in (tmp_path / "out" / "staff" / "logs").glob("naive-*.log")} == {"naive-public"}
    assert naive.stages["correctness"].status == "passed"
