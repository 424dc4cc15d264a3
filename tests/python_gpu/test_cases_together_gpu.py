"""A grading's correctness runs of several parts on one launcher
(grading/stages/cases_together.py), on a real GPU: parts it proves right
are settled by it, and every other part, or every part of a run that left
something behind, by a run of its own, with the verdicts a run of its own
gives."""

import shutil
from pathlib import Path

from tilelab.grading.options import GradeOptions
from tilelab.grading.pipeline import grade
from tilelab.system.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"


def _grade(build, folder: Path, files: dict, parts: tuple):
    """A hand-in of `files` (part file name -> the file to copy), graded for
    `parts` with the sanitizers, which link the parts as shared objects too,
    and without timing; (its result, the names of its staff logs)."""
    hand_in = folder / "hand-in"
    hand_in.mkdir(parents=True)
    for name, source in files.items():
        shutil.copy(source, hand_in / name)
    options = GradeOptions.for_tree(ROOT, build, folder / "out", parts=parts, questions=False, timing=False)
    # In pytest's private directory: graded as the current user (the sandbox is not what is tested here).
    result = grade(hand_in, options, sandbox=Sandbox())
    return result, {p.stem for p in (folder / "out" / "staff" / "logs").glob("*.log")}


def test_parts_proven_right_by_one_run_are_settled_by_it(build, device, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    parts = ("naive", "tiled", "boundary")
    result, logs = _grade(build, tmp_path, {f"{p}.cu": ROOT / "solutions" / f"{p}.cu" for p in parts}, parts)
    assert (tmp_path / "out" / "staff" / "logs" / "cases-together.log").read_text().startswith("exit 0 ")
    for part in result.parts:
        assert part.stages["correctness"].status == "passed", f"{part.id}: {part.stages['correctness'].summary}"
        assert part.stages["launch"].status == "passed", f"{part.id}: {part.stages['launch'].summary}"
        # No run of its own (its logs would be <part>-cases, -hidden or -public: correctness.run_sets).
        assert not {f"{part.id}-{label}" for label in ("cases", "hidden", "public")} & logs, logs


def test_a_part_with_a_wrong_case_is_told_what_a_run_of_its_own_tells(build, device, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    wrong = SUBMISSIONS / "naive-transposed-index" / "naive.cu"
    together, logs = _grade(build, tmp_path / "together", {"naive.cu": wrong,
                                                            "tiled.cu": ROOT / "solutions" / "tiled.cu"},
                            ("naive", "tiled"))
    alone, _ = _grade(build, tmp_path / "alone", {"naive.cu": wrong}, ("naive",))
    naive, tiled = together.parts
    (naive_alone,) = alone.parts
    for stage in ("correctness", "launch"):
        assert (naive.stages[stage].status, naive.stages[stage].summary, naive.stages[stage].details) == \
            (naive_alone.stages[stage].status, naive_alone.stages[stage].summary, naive_alone.stages[stage].details)
    assert naive.stages["correctness"].status == "failed"
    assert [(c.name, c.status) for c in naive.cases] == [(c.name, c.status) for c in naive_alone.cases]
    assert tiled.stages["correctness"].status == "passed"
    assert "naive-cases" in logs and "tiled-cases" not in logs, logs  # naive ran again alone, tiled did not


def test_a_run_that_leaves_a_process_behind_settles_no_part(build, device, tmp_path, monkeypatch):
    """Whose the daemon was, only runs of their own can tell: each part runs
    alone, the daemon's part fails its launch checks, the other passes."""
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    daemon = SUBMISSIONS / "naive-daemon-holds-pipes" / "naive.cu"
    result, logs = _grade(build, tmp_path, {"naive.cu": daemon, "tiled.cu": ROOT / "solutions" / "tiled.cu"},
                          ("naive", "tiled"))
    naive, tiled = result.parts
    assert "cases-together" in logs and "naive-cases" in logs and "tiled-cases" in logs, logs
    assert naive.stages["launch"].status == "failed", naive.stages["launch"].summary
    assert tiled.stages["correctness"].status == "passed" and tiled.stages["launch"].status == "passed"
