"""compute-sanitizer on a real GPU: a daemon that a launcher leaves behind
does not hold the part's sanitizer runs, and the GPU's share they take, to
their time limit; a hand-in's parts are checked by one run of each tool, and
a part with an error is found by runs of each part alone (grading/sanitizer.py)."""

import shutil
from pathlib import Path

from tilelab.grading.options import GradeOptions
from tilelab.grading.sanitizer import CHECKED_TOGETHER, NO_SHARED_MEMORY, SANITIZER_ERROR_EXIT
from tilelab.grading.pipeline import grade
from tilelab.spec.assignment import load_assignment
from tilelab.system.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]


def test_a_daemon_left_behind_does_not_hold_the_sanitizers(build, device, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    limit = load_assignment(ROOT / "assignment.yaml").grading["time_limits"]["sanitizer"]
    options = GradeOptions.for_tree(ROOT, build, tmp_path / "out", parts=("naive",), questions=False, timing=False)
    # In pytest's private directory: graded as the current user (the sandbox is not what is tested here).
    result = grade(ROOT / "tests" / "submissions" / "naive-daemon-holds-pipes", options, sandbox=Sandbox())
    (naive,) = result.parts
    assert naive.stages["correctness"].status == "passed"
    assert naive.stages["launch"].status == "failed"  # the daemon is the launch checks' to judge
    for tool in ("memcheck", "racecheck"):
        stage = naive.stages[tool]
        # The part's own process is correct and ends at once: its sanitizer
        # runs end with it, not when the daemon is killed at the limit.
        assert stage.status == "passed", f"{tool}: {stage.status}: {stage.summary}"
        assert stage.seconds < limit / 4, f"{tool} took {stage.seconds} s"


def _grade(build, tmp_path, files: dict, parts: tuple):
    """A hand-in of `files` (part file name -> the file to copy), graded for
    `parts` with the sanitizers and without timing."""
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    for name, source in files.items():
        shutil.copy(source, hand_in / name)
    options = GradeOptions.for_tree(ROOT, build, tmp_path / "out", parts=parts, questions=False, timing=False)
    return grade(hand_in, options, sandbox=Sandbox()), tmp_path / "out" / "staff" / "logs"


def test_the_parts_of_a_hand_in_are_checked_by_one_run_of_each_tool(build, device, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    solutions = ROOT / "solutions"
    result, logs = _grade(build, tmp_path, {f: solutions / f for f in ("naive.cu", "tiled.cu", "boundary.cu")},
                          ("naive", "tiled", "boundary"))
    for part in result.parts:
        for tool in ("memcheck", "racecheck"):
            stage = part.stages[tool]
            assert stage.status == "passed", f"{part.id} {tool}: {stage.summary}"
            if not (part.id == "naive" and tool == "racecheck"):
                assert stage.details == CHECKED_TOGETHER, f"{part.id} {tool}: {stage.details}"
    # naive's launches had no shared memory: racecheck had nothing to look for, and says so.
    assert result.parts[0].stages["racecheck"].summary == NO_SHARED_MEMORY
    for tool in ("memcheck", "racecheck"):
        assert (logs / f"{tool}-together.log").read_text().startswith("exit 0 ")


def test_an_error_in_one_part_is_found_by_runs_of_each_part_alone(build, device, tmp_path, monkeypatch):
    """memcheck's run of the parts together reports the bad read: which part
    it was in is learnt from a run of each part alone, as without."""
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    bad = ROOT / "tests" / "submissions" / "boundary-oob-read-right-numbers" / "boundary.cu"
    result, logs = _grade(build, tmp_path, {"naive.cu": ROOT / "solutions" / "naive.cu", "boundary.cu": bad},
                          ("naive", "boundary"))
    naive, boundary = result.parts
    assert (logs / "memcheck-together.log").read_text().startswith(f"exit {SANITIZER_ERROR_EXIT} ")
    assert boundary.stages["memcheck"].status == "failed", boundary.stages["memcheck"].summary
    assert "Invalid __global__" in boundary.stages["memcheck"].details
    assert naive.stages["memcheck"].status == "passed" and naive.stages["memcheck"].details != CHECKED_TOGETHER
    assert boundary.stages["correctness"].status == "passed"
