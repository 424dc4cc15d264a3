"""A check of one part on a real GPU begins the part's timing run beside its
cases (context.times_early, speed.timing_begun): a correct part is timed as
before, and the timing run of a part whose cases fail is called off at its
gate, the speed stage saying why."""

from pathlib import Path

import pytest

from tilelab.grading.options import GradeOptions
from tilelab.grading.pipeline import grade
from tilelab.system.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
NOT_TIMED = "not run: speed is measured only when every case is correct"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One cache for the module: the references are timed once, not for each test."""
    return tmp_path_factory.mktemp("cache")


def _check(build, tmp_path, submission: Path):
    options = GradeOptions.for_tree(ROOT, build, tmp_path / "out", parts=("naive",), questions=False, mode="check",
                                    sanitizers=True)
    # In pytest's private directory: checked as the current user (the sandbox is not what is tested here).
    return grade(submission, options, sandbox=Sandbox())


def test_a_correct_part_is_timed_from_a_run_begun_beside_its_cases(build, device, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    result = _check(build, tmp_path, ROOT / "solutions")
    (naive,) = result.parts
    assert naive.stages["correctness"].status == "passed"
    speed = naive.stages["speed"]
    assert speed.status == "passed", f"{speed.status}: {speed.summary}"
    assert naive.speed is not None and naive.speed.gflops > 0 and naive.traffic is not None
    # The speed stage began before the cases and sanitizers were over.
    assert result.spans["speed"][0] < min(result.spans["correctness"][1], result.spans["sanitizers"][1]), result.spans


def test_the_timing_run_of_a_part_whose_cases_fail_is_called_off(build, device, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    result = _check(build, tmp_path, ROOT / "tests" / "submissions" / "naive-transposed-index")
    (naive,) = result.parts
    assert naive.stages["correctness"].status == "failed"
    speed = naive.stages["speed"]
    assert (speed.status, speed.summary) == ("not_run", NOT_TIMED)
    assert naive.speed is None
    assert result.spans["speed"][0] < result.spans["correctness"][1], result.spans


def test_a_check_built_for_a_capability_remembered_wrongly_is_built_again_for_the_gpu(build, device, cache,
                                                                                      tmp_path, monkeypatch):
    # A host whose GPU was swapped since its last probe: the build takes the
    # capability remembered, and the pipeline builds again for the one probed.
    from tilelab.grading.remembered_capability import host_key, recall_capability, remember_capability
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    if host_key(()) is None:
        pytest.skip("skipped: the driver shows no GPUs in /proc/driver/nvidia, so nothing is remembered")
    real = device["compute_capability"]
    remember_capability((), "7.5" if real != "7.5" else "8.0")
    result = _check(build, tmp_path, ROOT / "solutions")
    (naive,) = result.parts
    assert naive.stages["build"].status == "passed"
    assert naive.stages["correctness"].status == "passed", naive.stages["correctness"].summary
    assert naive.stages["speed"].status == "passed", naive.stages["speed"].summary
    assert recall_capability(()) == real


def test_checks_one_after_another_keep_the_harness_services_and_their_verdicts(build, device, cache, tmp_path,
                                                                              monkeypatch):
    # What `tilelab check --watch` does between saves: the second check runs through the same
    # service processes as the first, is timed and judged as the first was, and the services end with the watch.
    from tilelab.grading.trusted_harness import KeptServices
    from tilelab.system.gpu_lock import visible_gpu_lock
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    kept = KeptServices(visible_gpu_lock())
    options = GradeOptions.for_tree(ROOT, build, tmp_path / "out", parts=("naive",), questions=False, mode="check",
                                    sanitizers=True)
    try:
        results, services = [], []
        for _ in range(2):
            results.append(grade(ROOT / "solutions", options, sandbox=Sandbox(), kept=kept))
            trusted = kept.harness
            services.append(sorted(s.proc.pid for s in trusted._all if s.alive()))
        assert services[0] and services[0] == services[1], services
        for result in results:
            (naive,) = result.parts
            stages = ("correctness", "launch", "memcheck", "racecheck", "speed")
            assert [naive.stages[s].status for s in stages] == ["passed"] * len(stages), \
                {s: naive.stages[s].summary for s in naive.stages}
            assert naive.speed.gflops > 0 and naive.traffic is not None
        processes = list(trusted._all)
    finally:
        kept.close()
    for s in processes:
        s.proc.wait(timeout=10)  # closed: each ends once its input closes
