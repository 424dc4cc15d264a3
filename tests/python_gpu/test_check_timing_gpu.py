"""A check of one part on a real GPU begins the part's timing run beside its
cases (context.times_early, speed.timing_begun): a correct part is timed as
before, and the timing run of a part whose cases fail is called off at its
gate, the speed stage saying why."""

from pathlib import Path

import pytest

from tilelab.grading.options import GradeOptions
from tilelab.grading.pipeline import grade
from tilelab.system.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
NOT_TIMED = "not run: speed is measured only when every case is correct"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One cache for the module: the references are timed once, not for each test."""
    return tmp_path_factory.mktemp("cache")


def _check(build, tmp_path, submission: Path):
    options = GradeOptions.for_tree(ROOT, build, tmp_path / "out", parts=("naive",), questions=False, mode="check",
                                    sanitizers=True)
    # In pytest's private directory: checked as the current user (the sandbox is not what is tested here).
    return grade(submission, options, sandbox=Sandbox())


def test_a_correct_part_is_timed_from_a_run_begun_beside_its_cases(build, device, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    result = _check(build, tmp_path, ROOT / "solutions")
    (naive,) = result.parts
    assert naive.stages["correctness"].status == "passed"
    speed = naive.stages["speed"]
    assert speed.status == "passed", f"{speed.status}: {speed.summary}"
    assert naive.speed is not None and naive.speed.gflops > 0 and naive.traffic is not None
    # The speed stage began before the cases and sanitizers were over.
    assert result.spans["speed"][0] < min(result.spans["correctness"][1], result.spans["sanitizers"][1]), result.spans


def test_the_timing_run_of_a_part_whose_cases_fail_is_called_off(build, device, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    result = _check(build, tmp_path, ROOT / "tests" / "submissions" / "naive-transposed-index")
    (naive,) = result.parts
    assert naive.stages["correctness"].status == "failed"
    speed = naive.stages["speed"]
    assert (speed.status, speed.summary) == ("not_run", NOT_TIMED)
    assert naive.speed is None
    assert result.spans["speed"][0] < result.spans["correctness"][1], result.spans
