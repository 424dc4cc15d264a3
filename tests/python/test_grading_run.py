"""`tilelab grade` on inputs a student controls, and when the grader itself fails:
a valid results.json and a clear message every time."""

import json
import os
import random
import shutil
from pathlib import Path

import pytest
from test_gradescope import check_spec

from tilelab.grading.options import GradeOptions
from tilelab.operations.grading_run import EXIT_GRADED, EXIT_GRADER_ERROR, run_grading


def build_dir() -> Path:
    path = os.environ.get("TILELAB_BUILD_DIR")
    if not path or not (Path(path) / "bin" / "tilelab-verify").exists():
        pytest.skip("skipped: needs a built project (run through ctest, which sets TILELAB_BUILD_DIR)")
    return Path(path)


def grade(root, submission: Path, out: Path, parts=()) -> dict:
    outcome = run_grading(submission, GradeOptions.for_tree(root, build_dir(), out, parts=parts), echo=lambda m: None)
    assert outcome.code == EXIT_GRADED
    doc = json.loads((out / "results.json").read_text())
    check_spec(doc)
    return doc


def build_test(doc: dict, title_start: str) -> dict:
    return next(t for t in doc["tests"] if t["name"].startswith(title_start) and t["name"].endswith(": build"))


def test_a_grader_failure_still_writes_valid_results(root, tmp_path):
    empty_build = tmp_path / "not-a-build"
    empty_build.mkdir()
    outcome = run_grading(root / "solutions", GradeOptions.for_tree(root, empty_build, tmp_path / "out"),
                          echo=lambda m: None)
    assert outcome.code == EXIT_GRADER_ERROR and "tilelab-verify is missing" in outcome.error
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    check_spec(doc)
    assert doc["tests"][0]["name"] == "Autograder error" and doc["tests"][0]["visibility"] == "visible"
    assert "tilelab-verify is missing" in doc["tests"][1]["output"] and doc["tests"][1]["visibility"] == "hidden"


def test_empty_directory_reports_every_file_missing(root, tmp_path):
    (tmp_path / "hand-in").mkdir()
    doc = grade(root, tmp_path / "hand-in", tmp_path / "out")
    for title in ("Naive", "Tiled", "Boundary", "Rectangular", "Dynamic"):
        t = build_test(doc, title)
        assert t["status"] == "failed" and "is missing" in t["output"]
    assert doc["score"] == 0


def test_binary_huge_and_wrongly_declared_files_get_their_own_messages(root, tmp_path):
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    (hand_in / "naive.cu").write_bytes(random.Random(3).randbytes(2048) + b"\0")
    with (hand_in / "tiled.cu").open("w") as f:
        f.write(("// padding\n" * 5_000_000)[: 50 * 1024 * 1024])
    shutil.copy(root / "tests" / "submissions" / "wrong-signature" / "naive.cu", hand_in / "boundary.cu")
    doc = grade(root, hand_in, tmp_path / "out", parts=("naive", "tiled", "boundary"))
    assert "not a text file" in build_test(doc, "Naive")["output"]
    assert "50.0 MB" in build_test(doc, "Tiled")["output"]
    boundary = build_test(doc, "Boundary")["output"]
    assert "does not define launchBoundary" in boundary  # a naive.cu handed in under another part's name
    assert "void launchBoundary(const float* M, const float* N, float* P, int Width)" in boundary


def test_wrong_signature_fails_to_link_with_the_declaration_shown(root, tmp_path):
    doc = grade(root, root / "tests" / "submissions" / "wrong-signature", tmp_path / "out", parts=("naive",))
    out = build_test(doc, "Naive")["output"]
    assert "does not link" in out and "void launchNaive(const float* M, const float* N, float* P, int Width)" in out
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "staff" / "report.md").exists()


def test_a_compile_error_names_the_students_own_file_and_line(root, tmp_path, monkeypatch):
    """`tilelab check` from the student's folder: the message says
    hand-in/naive.cu(14), the file they edit, never the grader's copy."""
    from tilelab.grading.pipeline import grade as run_grade
    from tilelab.system.sandbox import Sandbox

    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    shutil.copy(root / "tests" / "submissions" / "naive-compile-error" / "naive.cu", hand_in / "naive.cu")
    monkeypatch.chdir(tmp_path)
    # In pytest's private directory: built as the current user (the sandbox is not what is tested here).
    result = run_grade(hand_in, GradeOptions.for_tree(root, build_dir(), tmp_path / "out", mode="check",
                                                      parts=("naive",)), sandbox=Sandbox())
    build = result.parts[0].stages["build"]
    assert build.status == "failed" and "hand-in/naive.cu(14): error" in build.details, build.details
    assert "sources" not in build.details and str(tmp_path / "out") not in build.details


def test_check_builds_a_part_again_only_when_its_file_changed(root, tmp_path, monkeypatch):
    from tilelab.grading.pipeline import grade as run_grade
    from tilelab.system.sandbox import Sandbox

    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    shutil.copy(root / "solutions" / "naive.cu", hand_in / "naive.cu")
    build = _private_build(tmp_path)

    def check():
        opt = GradeOptions.for_tree(root, build, tmp_path / "out", mode="check", parts=("naive",), sanitizers=False,
                                    timing=False)
        return run_grade(hand_in, opt, sandbox=Sandbox()).parts[0].stages["build"]

    first = check()
    assert first.status == "passed" and "compiled and linked" in first.summary
    again = check()
    assert again.status == "passed" and "unchanged since it was last built" in again.summary
    (hand_in / "naive.cu").write_text((hand_in / "naive.cu").read_text() + "\n// edited\n")
    edited = check()
    assert "compiled and linked" in edited.summary
    assert len(list((build / "check-cache").iterdir())) == 1  # only the part's latest build is kept


def _private_build(tmp_path: Path) -> Path:
    """A build tree of the test's own, linking the real one's harness; its
    caches start empty."""
    build = tmp_path / "build"
    build.mkdir()
    for entry in build_dir().iterdir():
        if entry.name not in ("check-cache", "part-cache"):
            (build / entry.name).symlink_to(entry)
    return build


def test_a_part_file_handed_in_twice_is_compiled_once(root, tmp_path):
    from tilelab.grading.pipeline import grade as run_grade
    from tilelab.system.sandbox import Sandbox

    build = _private_build(tmp_path)
    first, second, edited = (tmp_path / name for name in ("alice", "bob", "carol"))
    for hand_in in (first, second, edited):
        hand_in.mkdir()
        shutil.copy(root / "solutions" / "naive.cu", hand_in / "naive.cu")
    (edited / "naive.cu").write_text((edited / "naive.cu").read_text() + "\n// carol's own line\n")

    def build_stage(hand_in: Path):
        opt = GradeOptions.for_tree(root, build, tmp_path / "out" / hand_in.name, parts=("naive",), sanitizers=False,
                                    timing=False)
        return run_grade(hand_in, opt, sandbox=Sandbox()).parts[0].stages["build"]

    built = build_stage(first)
    assert built.status == "passed" and built.seconds > 0
    again = build_stage(second)
    # Not compiled again, and the student is told nothing another student's hand-in could explain.
    assert again.status == "passed" and again.seconds == 0 and again.summary == built.summary
    assert build_stage(edited).seconds > 0
    kept = sorted(p.name for p in (build / "part-cache").iterdir())
    assert len(kept) == 2 and all(name.startswith("naive-") for name in kept)
    assert (build / "part-cache").stat().st_mode & 0o777 == 0o700


def test_the_part_cache_keeps_the_most_recently_used_within_its_bound(root, tmp_path):
    from tilelab.grading.build_cache import BuildCache, CachePolicy
    from tilelab.spec.assignment import load_assignment

    naive = load_assignment(root / "assignment.yaml").part("naive")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\0" * 1000)  # each entry is 1,000 bytes: room for two in 2,500
    cache = BuildCache(root, build_dir(), tmp_path / "cache", CachePolicy(one_per_part=False, max_bytes=2500))
    sources = []
    for i in range(3):
        sources.append(tmp_path / f"source{i}.cu")
        sources[-1].write_text(f"// {i}\n")
    keys = [cache.key(naive, source) for source in sources]
    assert len(set(keys)) == 3
    # A part built for one GPU alone is another executable than one built for every GPU.
    assert len({cache.key(naive, sources[0], capability) for capability in (None, "9.0", "8.0")}) == 3
    cache.keep(naive, keys[0], binary)
    cache.keep(naive, keys[1], binary)
    os.utime(tmp_path / "cache" / f"naive-{keys[1]}", (1, 1))  # the older of the two
    assert cache.find(naive, keys[0], tmp_path / "out" / "a") is not None  # now the newest
    cache.keep(naive, keys[2], binary)
    assert cache.find(naive, keys[1], tmp_path / "out" / "b") is None
    assert cache.find(naive, keys[0], tmp_path / "out" / "c").read_bytes() == binary.read_bytes()
    assert cache.find(naive, keys[2], tmp_path / "out" / "d") is not None
