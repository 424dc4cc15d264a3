"""A check's runs begun while their part compiles (grading/stages/early_runs.py),
with the real trusted harness and tilelab-part-host: a run waits for its part's
shared object, goes on once the object is put in place, and is called off when
the part does not build. Without a GPU every run ends at its start (no_device)."""

import shutil
import time
from pathlib import Path

from conftest import ROOT, built_tree


def _check(tmp_path: Path):
    from tilelab.grading.context import new_part_state, open_grading
    from tilelab.grading.options import GradeOptions
    from tilelab.system.sandbox import Sandbox

    build = built_tree("reference/libnaive.so")
    options = GradeOptions.for_tree(ROOT, build, tmp_path / "out", parts=("naive",), questions=False, mode="check",
                                    sanitizers=False, timing=False)
    g = open_grading(ROOT / "solutions", options, sandbox=Sandbox())
    return g, new_part_state(g.parts[0], g.submission, g.sets), build / "reference" / "libnaive.so"


def test_a_run_begun_early_waits_for_its_part_and_runs_it_once_in_place(tmp_path):
    from tilelab.grading.stages.early_runs import EarlyRuns

    g, s, built = _check(tmp_path)
    try:
        early = EarlyRuns(g, g.tools.part_host)
        library = tmp_path / "build" / "libnaive.so"
        library.parent.mkdir()
        early.begin(s, library)
        time.sleep(1.5)  # as a part compiles
        partial = library.with_name("libnaive.so.partial")
        shutil.copyfile(built, partial)
        partial.rename(library)
        early.built(s, True)
        begun = early.take(s)
        early.close()
        assert begun is not None and not begun.run.timed_out and begun.run.stopped is None
        codes = {0, 5}  # every case run, or no_device where there is no GPU
        assert begun.run.exit_code in codes, begun.run.stderr
        assert begun.run.seconds < 1.5  # the time its cases took, not its wait for the part
        if begun.run.exit_code == 0:
            assert all(c.passed for c in begun.cases) and begun.run.result["cuda_in_use_at_start"] is False
        else:
            assert "no CUDA device" in begun.run.stderr
        assert (tmp_path / "out" / "staff" / "logs" / "naive-public.log").is_file()
        assert early.take(s) is None  # taken once
    finally:
        g.close()


def test_a_part_that_does_not_build_calls_its_run_off(tmp_path):
    from tilelab.grading.stages.early_runs import EarlyRuns

    g, s, _ = _check(tmp_path)
    try:
        early = EarlyRuns(g, g.tools.part_host)
        early.begin(s, tmp_path / "libnaive.so")  # never put in place
        time.sleep(1.0)
        t0 = time.monotonic()
        early.built(s, False)
        assert time.monotonic() - t0 < 20
        assert early.take(s) is None
        early.close()
    finally:
        g.close()


def test_a_check_where_a_gpu_was_seen_before_begins_early_and_ends_well_without_one(tmp_path, monkeypatch):
    """The driver lists a GPU that a probe found before, and CUDA cannot use it
    now (say, a driver updated without a reboot): the check begins its part's
    run as the part compiles, the build puts the shared object in place, the
    run ends at its start, and the check says there is no GPU."""
    from tilelab.grading import remembered_capability as remembered
    from tilelab.grading.model import NO_GPU
    from tilelab.grading.options import GradeOptions
    from tilelab.grading.pipeline import grade
    from tilelab.system.sandbox import Sandbox

    build = built_tree("bin/tilelab-part-host")
    gpus = tmp_path / "gpus"
    (gpus / "0000:01:00.0").mkdir(parents=True)
    (gpus / "0000:01:00.0" / "information").write_text("Model: \t NVIDIA H100 80GB HBM3\nBus Location: 0000:01:00.0\n")
    monkeypatch.setattr(remembered, "NVIDIA_GPUS", gpus)
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    sandbox = Sandbox()
    remembered.remember_capability(tuple(sorted(sandbox.extra_env.items())), "9.0")
    options = GradeOptions.for_tree(ROOT, build, tmp_path / "out", mode="check", parts=("naive",), questions=False,
                                    sanitizers=False, timing=False, early_runs=True)
    hand_in = tmp_path / "hand-in"  # a file no check built before: it compiles, so its run begins early
    hand_in.mkdir()
    (hand_in / "naive.cu").write_text((ROOT / "solutions" / "naive.cu").read_text() + f"\n// {tmp_path}\n")
    result = grade(hand_in, options, sandbox=sandbox)
    naive = result.parts[0]
    if result.gpu is not None:
        import pytest
        pytest.skip("skipped: a CUDA device is here; this test is about a GPU seen before and gone")
    assert naive.stages["build"].status == "passed"
    assert naive.stages["correctness"].status == "not_run" and naive.stages["correctness"].summary == NO_GPU
    # Begun early: it ended no_device, or was called off as the check ended first (nothing takes it without a GPU).
    log = tmp_path / "out" / "staff" / "logs" / "naive-public.log"
    assert log.is_file()
    first = log.read_text().splitlines()[0]
    assert first.startswith("exit 5 ") or " stopped cancelled " in first, first
