"""`scripts/bench-check` (bench/check_bench.py): its figure of the watch, the
time from a save to the watch's table of it, taken from a real `tilelab
check --watch` in the project's tree (without a GPU each save runs the
static checks and the build; the figure is the same measurement), and what
each timed check said, read from its grade.json: a check that failed a
stage on a GPU measured nothing, and stops the bench."""

import os
import sys
from pathlib import Path

import pytest
from test_grading_run import build_dir

from bench import check_bench

ROOT = Path(__file__).resolve().parents[2]


def test_the_watch_figure_times_each_save_of_new_bytes_to_its_table(tmp_path):
    place = check_bench.tree_place(tmp_path, build_dir().resolve())
    env = dict(os.environ, PYTHONPATH=str(ROOT / "grader"), COLUMNS="160")
    seconds, status = check_bench.watched_saves(place, env, ROOT / "solutions" / "naive.cu", 2)
    assert len(seconds) == 2 and all(0 < s < check_bench.WATCH_LIMIT_S for s in seconds), seconds
    # Each save was new bytes, checked again, not the kept result of the last.
    assert check_bench.WATCH_SHOWN in status and "took" in status, status


def test_a_watch_that_ends_before_its_table_is_a_failure_of_the_bench_with_its_output(tmp_path):
    student = tmp_path / "student"
    student.mkdir()
    gone = check_bench.Place("tree", ROOT, tmp_path / "build", [sys.executable, "-c", "print('no such watch')"],
                             student, tmp_path / "out")
    with pytest.raises(check_bench.BenchCheckError, match="showed no result within .* or ended:\n.*no such watch"):
        check_bench.watched_saves(gone, dict(os.environ), ROOT / "solutions" / "naive.cu", 1)


def _checked(tmp_path, source: str) -> dict:
    """verdict_of a real `tilelab check naive` of `source` in the project's tree (no GPU here: static checks
    and the build)."""
    place = check_bench.tree_place(tmp_path, build_dir().resolve())
    (place.student / "naive.cu").write_text(source)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "grader"), TILELAB_CACHE_DIR=str(tmp_path / "cache"))
    check_bench._timed_check(place, env)
    return check_bench.verdict_of(place)


def test_what_a_check_said_is_read_from_its_grade_json(tmp_path):
    built = _checked(tmp_path / "built", (ROOT / "solutions" / "naive.cu").read_text())
    assert built["max"] == 15 and built["failed"] == [] and built["hints"] == 0
    assert check_bench.said(built) == f"{built['points']:g} / 15"
    broken = _checked(tmp_path / "broken", (ROOT / "solutions" / "naive.cu").read_text() + "\nnot C++ at all\n")
    assert "build" in broken["failed"] and broken["points"] == 0
    assert check_bench.said(broken).startswith("0 / 15, failed: ") and "build" in check_bench.said(broken)
    with pytest.raises(check_bench.BenchCheckError, match="after an edit: the check said 0 / 15, failed: .*build"):
        check_bench._expect_complete("edited", broken)


def test_a_check_without_its_hint_or_its_grade_json_stops_the_bench(tmp_path):
    whole = {"points": 15.0, "max": 15.0, "failed": [], "hints": 0}
    check_bench._expect_complete("edited", whole)
    with pytest.raises(check_bench.BenchCheckError, match="uncoalesced .* and the counters give a hint"):
        check_bench._expect_complete("uncoalesced", whole)
    check_bench._expect_complete("uncoalesced", dict(whole, hints=1))
    nowhere = check_bench.Place("tree", ROOT, tmp_path / "build", [], tmp_path, tmp_path / "out")
    with pytest.raises(check_bench.BenchCheckError, match="no grade.json with the part naive"):
        check_bench.verdict_of(nowhere)
