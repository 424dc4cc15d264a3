"""The benchmark's arithmetic and its table (bench/grading_bench.py), on the
phase timings of a real run: `scripts/bench` on the 2-core CPU machine
(no GPU), 40 hand-ins, 2 workers, 126.3 s wall, 2026-11-22."""

from pathlib import Path

from bench.grading_bench import BenchResult, covered, default_hand_ins, format_bench, timeline

ROOT = Path(__file__).resolve().parents[2]


def cpu_run() -> BenchResult:
    return BenchResult(hand_ins=40, graded=40, wall_seconds=126.3, workers=2,
                       phase_seconds={"gpu probe and ceilings": 0.2, "static checks": 0.1, "build": 235.5,
                                      "questions": 0.1},
                       per_hand_in={"reference-solutions": {"seconds": 15.0, "timings": {}},
                                    "wrong-signature": {"seconds": 3.7, "timings": {}}},
                       gpu_busy_seconds=0.2, gpu_exclusive_seconds=0.2, machine={"gpus": []})


def test_throughput_and_critical_path_follow_from_the_timings():
    result = cpu_run()
    assert round(result.per_hour) == 1140  # 40 hand-ins in 126.3 s
    phase, mean = result.critical_path()[0]
    assert phase == "build" and round(mean, 2) == 5.89
    assert result.to_dict()["critical_path"][0] == ["build", 5.888]  # 235.5 s / 40


def test_the_table_comes_last_and_says_when_there_was_no_gpu():
    text = format_bench(cpu_run())
    lines = text.splitlines()
    assert lines[0].startswith("the class, 1 hand-in(s) at a time") and lines[1].startswith("phase")
    assert lines[2].startswith("build") and "100%" in lines[2]
    assert "1140 hand-ins an hour" in text and text.endswith("no GPU: the phases that need one did not run")
    with_gpu = cpu_run()
    with_gpu.machine = {"gpus": ["NVIDIA H100 80GB HBM3"]}
    assert "GPU (NVIDIA H100 80GB HBM3) busy 0.2 s" in format_bench(with_gpu)


def test_the_set_is_the_references_the_starter_and_the_non_security_hand_ins():
    names = [name for name, _ in default_hand_ins(ROOT)]
    assert names[:2] == ["reference-solutions", "starter"]
    assert "good-tiled-16" in names and "naive-uncoalesced" in names
    assert not any(n.startswith("security-") or n.startswith("answers-") for n in names)


# When each phase of a grading of the references ran on the H100
# (scripts/gpu-suite, 2026-11-23, before phases overlapped): the probe, the
# build, then correctness, sanitizers and speed one after another.
H100_SEQUENTIAL = {"gpu probe and ceilings": [0.0, 0.4], "static checks": [0.4, 0.41], "build": [0.41, 3.21],
                   "correctness": [3.21, 9.31], "launch checks": [9.31, 9.31], "sanitizers": [9.31, 13.01],
                   "speed": [13.01, 18.51]}


def test_gpu_time_counts_overlapping_phases_once():
    gpu = ("gpu probe and ceilings", "correctness", "sanitizers", "speed")
    assert round(covered(H100_SEQUENTIAL, gpu), 2) == 15.7  # 0.4 + 6.1 + 3.7 + 5.5
    overlapping = dict(H100_SEQUENTIAL, sanitizers=[3.21, 6.91], speed=[9.31, 14.81])
    assert round(covered(overlapping, gpu), 2) == 0.4 + 6.1 + 5.5
    assert covered(overlapping, ("calibration",)) == 0.0


def test_the_timeline_lists_phases_by_start_and_leaves_out_instants():
    rows = timeline(dict(H100_SEQUENTIAL, build=[0.0, 2.8]))
    assert [r.split()[0] for r in rows] == ["gpu", "build", "static", "correctness", "sanitizers", "speed"]
    assert rows[1].strip() == "build                     0.00 ->   2.80 s (2.80 s)"
    assert not any("launch" in r for r in rows)
