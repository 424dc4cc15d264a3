"""Calibration on a real GPU: the references timed and cached, reused while
nothing changed; a reference that cannot run, or that times far below the
last calibration of the same GPU, leaves speed unscored and says why."""

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tilelab.grading import calibration
from tilelab.grading import gpu_ceilings as roofline
from tilelab.grading.model import NO_TARGETS, NO_TARGETS_NOTE
from tilelab.grading.options import GradeOptions
from tilelab.grading.pipeline import grade
from tilelab.outputs.gradescope import results_json, spec_problems, student_visible_text
from tilelab.spec.assignment import load_assignment
from tilelab.system.paths import tool_path
from tilelab.system.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def assignment():
    return load_assignment(ROOT / "assignment.yaml")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty calibration and ceilings cache, as on a fresh machine."""
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_references_are_timed_once_then_reused(build, device, assignment, cache):
    verify = tool_path(build, "tilelab-verify")
    started = time.monotonic()
    first, fresh = calibration.get_calibration(build, assignment, device, verify)
    took = time.monotonic() - started
    assert fresh and first.device_uuid == device["uuid"]
    timed = {(s.part, s.case) for s in first.speeds}
    sizes = {p.id: {f"{c.j}x{c.k}x{c.l}" for c in p.cases["timing"]} for p in assignment.parts}
    cublas = {("cublas", size) for p in assignment.parts if p.versus_cublas for size in sizes[p.id]}
    assert timed == {(part, size) for part, part_sizes in sizes.items() for size in part_sizes} | cublas
    for s in first.speeds:
        assert len(s.runs) == assignment.speed.runs and min(s.runs) > 0
        # Each reference is the median of its runs, so that one run disturbed
        # (or slow to start) moves nothing: two runs at least agree with it.
        near = [r for r in s.runs if abs(r - s.gflops) <= 0.05 * s.gflops]
        assert len(near) >= 2, f"{s.part} {s.case}: fewer than two of the runs {s.runs} within 5 % of their median"
    started = time.monotonic()
    again, fresh = calibration.get_calibration(build, assignment, device, verify)
    reuse = time.monotonic() - started
    assert not fresh and again == first
    assert reuse < 2.0, f"reusing a calibration took {reuse:.2f} s"
    print(f"calibration: {took:.1f} s to time; {reuse:.3f} s to reuse")
    print(calibration.describe(first, roofline.get_ceilings(tool_path(build, "tilelab-roofline"), device=device),
                               assignment))


def _tree_without_a_runnable_reference(build: Path, tmp: Path, part_id: str) -> Path:
    """The built project seen through links, but for its references: copies,
    one of which cannot be executed."""
    tree = tmp / "build"
    tree.mkdir()
    for entry in build.iterdir():
        if entry.name != calibration.REFERENCE_DIR:
            (tree / entry.name).symlink_to(entry)
    (tree / calibration.REFERENCE_DIR).mkdir()
    for p in (build / calibration.REFERENCE_DIR).iterdir():
        if p.is_file() and os.access(p, os.X_OK):
            shutil.copy2(p, tree / calibration.REFERENCE_DIR / p.name)
    (tree / calibration.REFERENCE_DIR / part_id).chmod(0o644)
    return tree


def test_a_reference_that_cannot_run_leaves_speed_unscored_and_blames_the_grader(build, device, assignment,
                                                                                   cache, tmp_path):
    tree = _tree_without_a_runnable_reference(build, tmp_path, "naive")
    # In pytest's private directory: graded as the current user (the sandbox is not what is tested here).
    result = grade(ROOT / "solutions", GradeOptions.for_tree(ROOT, tree, tmp_path / "out", parts=("naive",),
                                                             sanitizers=False), sandbox=Sandbox())
    (naive,) = result.parts
    assert naive.stages["correctness"].status == "passed" and naive.correctness_score == naive.correctness_max
    assert naive.stages["speed"].status == "error" and naive.stages["speed"].summary == NO_TARGETS
    assert naive.speed_score == 0 and naive.speed is None
    assert NO_TARGETS_NOTE in result.notes and result.calibration is None
    assert any("Calibration failed" in n and "naive" in n for n in result.staff_notes)
    doc = results_json(result, assignment)
    assert spec_problems(doc) == []
    assert "Calibration failed" not in student_visible_text(doc)
    assert "not in your code" in student_visible_text(doc)


def test_a_calibration_far_below_the_last_one_is_not_believed(build, device, assignment, cache):
    verify = tool_path(build, "tilelab-verify")
    # The last calibration of this GPU, as a healthy GPU never could have measured it (a million GFLOP/s).
    inflated = calibration.Calibration(
        "reference", device["uuid"], device["name"], "an older fingerprint", "2026-11-01T00:00:00Z", 5.0,
        tuple(calibration.ReferenceSpeed(p.id, c.j, c.k, c.l, (1e6,)) for p in assignment.parts
              for c in p.cases["timing"]))
    calibration.save(inflated)
    with pytest.raises(calibration.CalibrationError, match="far slower than at the last calibration"):
        calibration.get_calibration(build, assignment, device, verify)
    assert calibration.load_cached(device["uuid"]) == inflated  # the suspect figures were not kept
    # Staff may accept them on purpose: `tilelab calibrate` keeps them and names each drop.
    accepted, fallen = calibration.recalibrate(build, assignment, device, verify)
    # Every figure of the inflated calibration fell; cuBLAS, timed for the challenge part, was not in it.
    assert len(fallen) == len(inflated.speeds) < len(accepted.speeds)
    assert calibration.load_cached(device["uuid"]) == accepted
    cached = json.loads(calibration.cache_file(device["uuid"]).read_text())
    assert cached["fingerprint"] == calibration.fingerprint(build, assignment, device)
