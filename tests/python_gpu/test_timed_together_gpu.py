"""A grading of several parts times them by one run on one launcher process
(speed._TimedTogether: tilelab-harness CASE_FILE... on tilelab-part-host
--parts), with the verdicts each part gets timed alone, and reads their
counters in one profile, each part's as its own profile reads them; a part
whose timed calls are wrong is judged so from that run, and the others are
still timed by it."""

import re
import shutil
from pathlib import Path

import pytest

from tilelab.grading.options import GradeOptions
from tilelab.grading.pipeline import grade
from tilelab.grading.stages.speed import TIMED_TOGETHER
from tilelab.system.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("naive", "tiled", "challenge")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One cache for the module: the references are timed once, not for each test."""
    return tmp_path_factory.mktemp("cache")


def _grade(build, folder: Path, files: dict, parts: tuple):
    """A hand-in of `files` (part file name -> the file to copy), graded for `parts` without sanitizers."""
    hand_in = folder / "hand-in"
    hand_in.mkdir(parents=True)
    for name, source in files.items():
        shutil.copy(source, hand_in / name)
    options = GradeOptions.for_tree(ROOT, build, folder / "out", parts=parts, questions=False, sanitizers=False)
    # In pytest's private directory: graded as the current user (the sandbox is not what is tested here).
    return grade(hand_in, options, sandbox=Sandbox())


def test_the_parts_of_a_hand_in_are_timed_by_one_launcher(build, device, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    result = _grade(build, tmp_path, {f"{p}.cu": ROOT / "solutions" / f"{p}.cu" for p in PARTS}, PARTS)
    for part in result.parts:
        speed = part.stages["speed"]
        assert speed.status == "passed", f"{part.id}: {speed.status}: {speed.summary}"
        assert speed.details == TIMED_TOGETHER, f"{part.id}: {speed.details}"
        assert part.speed is not None and part.speed.fraction > 0.9, f"{part.id}: {part.speed}"
        assert part.traffic is not None, f"{part.id}: {part.traffic_note}"
        print(f"{part.id}: {part.speed.gflops:.0f} GFLOP/s, {100 * part.speed.fraction:.1f} % of the speed points, "
              f"stage {speed.seconds:.2f} s, counters' passes {part.traffic.seconds:.3f} s")


def test_the_counters_of_parts_timed_together_are_read_in_one_profile_as_each_alone(build, device, cache, tmp_path,
                                                                                     monkeypatch):
    """After the run's last timed call, one call of each part in a user range
    of its own in every pass (the harness's profiles_together.h)."""
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    files = {f"{p}.cu": ROOT / "solutions" / f"{p}.cu" for p in PARTS}
    together = _grade(build, tmp_path / "together", files, PARTS)
    for part in together.parts:
        (alone,) = _grade(build, tmp_path / part.id, {f"{part.id}.cu": files[f"{part.id}.cu"]}, (part.id,)).parts
        t, a = part.traffic, alone.traffic
        assert t is not None and a is not None, f"{part.id}: {part.traffic_note} / {alone.traffic_note}"
        assert (t.together, a.together) == (len(PARTS), 1), part.id
        assert t.passes == a.passes and t.global_load_instructions == a.global_load_instructions, part.id
        for level in ("L2", "DRAM"):
            assert t.level(level).bytes == pytest.approx(a.level(level).bytes, rel=0.1), (part.id, level)
        assert part.traffic_hints == alone.traffic_hints, part.id
        print(f"{part.id}: DRAM {t.level('DRAM').bytes / 1e6:.1f} MB together, {a.level('DRAM').bytes / 1e6:.1f} MB "
              f"alone; its share of the profile {t.seconds:.3f} s, alone {a.seconds:.3f} s")


def test_a_part_whose_timed_calls_are_wrong_is_judged_from_the_run_together(build, device, cache, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    replays = ROOT / "tests" / "submissions" / "naive-replays-answer" / "naive.cu"
    together = _grade(build, tmp_path / "together", {"naive.cu": replays, "tiled.cu": ROOT / "solutions" / "tiled.cu"},
                      ("naive", "tiled"))
    alone = _grade(build, tmp_path / "alone", {"naive.cu": replays}, ("naive",))
    naive, tiled = together.parts
    (naive_alone,) = alone.parts
    assert naive.stages["correctness"].status == "passed"
    assert (naive.stages["speed"].status, naive.stages["speed"].summary) == \
        (naive_alone.stages["speed"].status, naive_alone.stages["speed"].summary)
    assert naive.stages["speed"].status == "failed", naive.stages["speed"].summary
    assert tiled.stages["speed"].status == "passed" and tiled.stages["speed"].details == TIMED_TOGETHER


def test_a_part_that_faults_in_its_timed_calls_and_the_parts_after_it_are_timed_again_alone(
        build, device, cache, tmp_path, monkeypatch):
    """Its fault may leave the launcher's context unusable: the run stops
    there, the part is judged by a run of its own (as when timed alone), and
    the part after it, which the run never began, is timed by one of its own."""
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    source = (ROOT / "solutions" / "naive.cu").read_text()
    store = "P[row * Width + col] = sum;"
    assert store in source, "the premise: the naive solution's store"
    faults = tmp_path / "naive.cu"  # right at every case's size, a trap at the timing sizes
    faults.write_text(source.replace(store, "if (Width >= 4000) __trap();\n    " + store))
    together = _grade(build, tmp_path / "together", {"naive.cu": faults, "tiled.cu": ROOT / "solutions" / "tiled.cu"},
                      ("naive", "tiled"))
    alone = _grade(build, tmp_path / "alone", {"naive.cu": faults}, ("naive",))
    naive, tiled = together.parts
    (naive_alone,) = alone.parts
    assert naive.stages["correctness"].status == "passed", naive.stages["correctness"].summary
    assert naive.stages["speed"].status == "failed", naive.stages["speed"].summary
    assert (naive.stages["speed"].status, naive.stages["speed"].summary) == \
        (naive_alone.stages["speed"].status, naive_alone.stages["speed"].summary)
    speed = tiled.stages["speed"]
    assert speed.status == "passed" and speed.details != TIMED_TOGETHER, f"{speed.status}: {speed.details}"
    assert tiled.speed is not None and tiled.speed.fraction > 0.9


def test_a_part_short_of_full_speed_points_is_timed_twice_and_the_faster_scored(build, device, cache, tmp_path,
                                                                                monkeypatch):
    """A naive kernel handed in as tiled earns part of tiled's speed points:
    the run together times it once, a run of its own once more, and the
    faster of the two is the one scored (what shares the host can only slow
    a timed call)."""
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    slow = ROOT / "tests" / "submissions" / "naive-as-tiled" / "tiled.cu"
    result = _grade(build, tmp_path, {"naive.cu": ROOT / "solutions" / "naive.cu", "tiled.cu": slow},
                    ("naive", "tiled"))
    naive, tiled = result.parts
    assert naive.stages["speed"].details == TIMED_TOGETHER  # at full points: timed once
    speed = tiled.stages["speed"]
    assert speed.status == "passed", speed.summary
    assert 0 < tiled.speed.fraction < 1, tiled.speed
    twice = re.search(r"timed twice, since the first fell short of full speed points: ([\d.]+) % then ([\d.]+) %",
                      speed.details)
    assert twice, speed.details
    first, second = float(twice[1]), float(twice[2])
    assert abs(100 * tiled.speed.fraction - max(first, second)) < 0.06, (tiled.speed.fraction, first, second)
    if first != second:  # the details round to 0.1 %: equal there, either timing may be the faster
        assert tiled.speed.clocks.get("retimed") is (second > first)
    print(f"tiled, a naive kernel: {first} % then {second} % of the speed points, {tiled.speed.gflops:.0f} GFLOP/s")
