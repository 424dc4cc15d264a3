"""When a grading reads each timed part's hardware counters
(GradeOptions.counters): with its timed calls, left out (`tilelab grade
--no-counters`), or left for later and read in a turn of their own
(grading/counters_later.py). The points are the same each way; counters
read later are the ones read inline, and the outputs say which it was. A
hand-in's parts have their counters read later by one launcher, and a part
whose run fails then, and the parts after it, by runs of their own."""

import json
import shutil
from pathlib import Path

import pytest

from tilelab.grading.counters_later import TOGETHER_LOG
from tilelab.grading.options import GradeOptions
from tilelab.grading.stages.speed import COUNTERS_LATER, COUNTERS_LEFT_OUT
from tilelab.operations.grading_run import EXIT_GRADED, counters_pending, read_counters_later, run_grading
from tilelab.system.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _grade(build, out: Path, counters: str, parts: tuple = ("naive",), hand_in: Path = ROOT / "solutions"):
    """The options and the parts of a grading of `parts` of `hand_in`, each timed."""
    options = GradeOptions.for_tree(ROOT, build, out, parts=parts, questions=False, sanitizers=False,
                                    counters=counters)
    outcome = run_grading(hand_in, options, echo=lambda m: None, sandbox=Sandbox())
    assert outcome.code == EXIT_GRADED, outcome.error
    for part in outcome.result.parts:
        assert part.stages["speed"].status == "passed", f"{part.id}: {part.stages['speed'].summary}"
    return (options, *outcome.result.parts)


def _part(out: Path) -> dict:
    (naive,) = _parts(out)
    return naive


def _parts(out: Path) -> list:
    return json.loads((out / "grade.json").read_text())["parts"]


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


def test_the_counters_of_a_hand_ins_parts_read_later_are_read_by_one_launcher(build, device, cache, tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    parts = ("naive", "tiled", "challenge")
    _, *inline = _grade(build, tmp_path / "inline", "inline", parts)
    options, *later = _grade(build, tmp_path / "later", "later", parts)
    assert [p.counters_later != "" for p in later] == [True] * 3

    assert read_counters_later(ROOT / "solutions", options, sandbox=Sandbox()) == list(parts)
    logs = tmp_path / "later" / "staff" / "logs"
    assert (logs / TOGETHER_LOG).read_text().startswith("exit 0 ")
    assert not [p for p in parts if (logs / f"{p}-counters.log").exists()], "no part was read by a run of its own"
    assert not counters_pending(tmp_path / "later")
    for read, alone in zip(_parts(tmp_path / "later"), inline):
        assert read["counters_later"] == "" and read["traffic_note"] == "", f"{alone.id}: {read['traffic_note']}"
        assert read["traffic"]["passes"] == alone.traffic.passes, alone.id
        assert read["traffic"]["global_load_instructions"] == alone.traffic.global_load_instructions, alone.id
        assert read["traffic_hints"] == alone.traffic_hints, alone.id


def test_a_part_whose_run_fails_when_its_counters_are_read_is_read_alone_and_the_parts_after_it_too(
        build, device, cache, tmp_path, monkeypatch):
    """A hand-in may behave otherwise when its counters are read: the run of
    all its parts stops at the part that ends it, that part's counters are
    tried by a run of its own, and the part after it, which the run never
    began, has its counters read by a run of its own."""
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    marker = tmp_path / "fail-from-now-on"
    source = (ROOT / "solutions" / "naive.cu").read_text()
    launch = "naiveKernel<<<grid, block>>>(M, N, P, Width);"
    assert launch in source, "the premise: the naive solution's launch"
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    (hand_in / "naive.cu").write_text("#include <cstdlib>\n#include <unistd.h>\n" + source.replace(
        launch, f'if (access("{marker}", F_OK) == 0) abort();\n  ' + launch))
    shutil.copy(ROOT / "solutions" / "tiled.cu", hand_in / "tiled.cu")
    options, naive, tiled = _grade(build, tmp_path / "out", "later", ("naive", "tiled"), hand_in)
    assert naive.counters_later and tiled.counters_later

    marker.touch()
    assert read_counters_later(hand_in, options, sandbox=Sandbox()) == ["naive", "tiled"]
    logs = tmp_path / "out" / "staff" / "logs"
    assert not (logs / TOGETHER_LOG).read_text().startswith("exit 0 ")
    assert (logs / "naive-counters.log").exists() and (logs / "tiled-counters.log").exists()
    naive_read, tiled_read = _parts(tmp_path / "out")
    assert naive_read["traffic"] is None and naive_read["traffic_note"].startswith("not measured")
    assert tiled_read["traffic"] is not None and tiled_read["traffic_note"] == ""
    assert (naive_read["score"], tiled_read["score"]) == (naive.score, tiled.score)
    assert not counters_pending(tmp_path / "out")
