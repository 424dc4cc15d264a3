"""When a grading reads each timed part's hardware counters
(GradeOptions.counters): with its timed calls, left out (`tilelab grade
--no-counters`), or left for later and read in a turn of their own
(grading/counters_later.py). The points are the same each way; counters
read later are the ones read inline, and the outputs say which it was."""

import json
from pathlib import Path

import pytest

from tilelab.grading.options import GradeOptions
from tilelab.grading.stages.speed import COUNTERS_LATER, COUNTERS_LEFT_OUT
from tilelab.operations.grading_run import EXIT_GRADED, counters_pending, read_counters_later, run_grading
from tilelab.system.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _grade(build, out: Path, counters: str) -> tuple:
    options = GradeOptions.for_tree(ROOT, build, out, parts=("naive",), questions=False, sanitizers=False,
                                    counters=counters)
    outcome = run_grading(ROOT / "solutions", options, echo=lambda m: None, sandbox=Sandbox())
    assert outcome.code == EXIT_GRADED, outcome.error
    (naive,) = outcome.result.parts
    assert naive.stages["speed"].status == "passed", naive.stages["speed"].summary
    return options, naive


def _part(out: Path) -> dict:
    (naive,) = json.loads((out / "grade.json").read_text())["parts"]
    return naive


def test_counters_inline_left_out_or_read_later_score_the_same(build, device, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    _, inline = _grade(build, tmp_path / "inline", "inline")
    assert inline.traffic is not None and inline.traffic_note == "" and not inline.counters_later

    _, off = _grade(build, tmp_path / "off", "off")
    assert (off.traffic, off.traffic_hints, off.traffic_note) == (None, [], COUNTERS_LEFT_OUT)
    assert not counters_pending(tmp_path / "off")

    options, later = _grade(build, tmp_path / "later", "later")
    assert (later.traffic, later.traffic_note) == (None, COUNTERS_LATER) and counters_pending(tmp_path / "later")
    assert COUNTERS_LATER in (tmp_path / "later" / "report.md").read_text()
    assert (off.score, later.score) == (inline.score, inline.score)

    assert read_counters_later(ROOT / "solutions", options, sandbox=Sandbox()) == ["naive"]
    read = _part(tmp_path / "later")
    assert read["counters_later"] == "" and read["traffic_note"] == "" and not counters_pending(tmp_path / "later")
    assert read["score"] == inline.score and read["stages"]["speed"]["summary"] == later.stages["speed"].summary
    # The same call's counters as inline: its instructions and passes exactly, what it moved from DRAM nearly.
    traffic = read["traffic"]
    assert traffic["passes"] == inline.traffic.passes
    assert traffic["global_load_instructions"] == inline.traffic.global_load_instructions
    assert traffic["sectors_per_request"] == pytest.approx(inline.traffic.sectors_per_request)
    dram = {lv["name"]: lv for lv in traffic["levels"]}["DRAM"]
    assert dram["bytes"] == pytest.approx(inline.traffic.level("DRAM").bytes, rel=0.1)
    assert read["traffic_hints"] == inline.traffic_hints
    assert COUNTERS_LATER not in (tmp_path / "later" / "report.md").read_text()
