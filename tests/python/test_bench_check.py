"""`scripts/bench-check`'s figure of the watch (bench/check_bench.py): the
time from a save to the watch's table of it, taken from a real `tilelab
check --watch` in the project's tree. Without a GPU each save runs the
static checks and the build; the figure is the same measurement."""

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
