"""compute-sanitizer on a real GPU: a daemon that a launcher leaves behind
does not hold the part's sanitizer runs, and the GPU's share they take, to
their time limit (grading/sanitizer.py)."""

from pathlib import Path

from tilelab.grading.options import GradeOptions
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
