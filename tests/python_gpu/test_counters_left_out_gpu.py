"""A grading that leaves the hardware counters out (GradeOptions.counters,
`tilelab grade --no-counters`) times its parts as before and scores them
the same: the counters change no points, and the report says they were
left out instead of giving traffic."""

from pathlib import Path

import pytest

from tilelab.grading.options import GradeOptions
from tilelab.grading.pipeline import grade
from tilelab.grading.stages.speed import COUNTERS_LEFT_OUT
from tilelab.system.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _grade(build, tmp_path, counters: bool):
    options = GradeOptions.for_tree(ROOT, build, tmp_path / f"out-{counters}", parts=("naive",), questions=False,
                                    sanitizers=False, counters=counters)
    return grade(ROOT / "solutions", options, sandbox=Sandbox())


def test_a_grading_without_counters_scores_as_one_with_them(build, device, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    (with_counters,) = _grade(build, tmp_path, True).parts
    (without,) = _grade(build, tmp_path, False).parts
    assert with_counters.stages["speed"].status == "passed", with_counters.stages["speed"].summary
    assert with_counters.traffic is not None and with_counters.traffic_note == ""
    speed = without.stages["speed"]
    assert speed.status == "passed", f"{speed.status}: {speed.summary}"
    assert without.traffic is None and without.traffic_hints == []
    assert without.traffic_note == COUNTERS_LEFT_OUT
    assert (without.score, without.max_score) == (with_counters.score, with_counters.max_score)
