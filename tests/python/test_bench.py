"""The benchmark's arithmetic and its table (tilelab.operations.bench), on the
phase timings of a real run: `scripts/bench` on the 2-core CPU machine
(no GPU), 40 hand-ins, 2 workers, 126.3 s wall, 2026-11-22."""

from pathlib import Path

from tilelab.operations.bench import BenchResult, default_hand_ins, format_bench

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
    assert text.splitlines()[1].startswith("build") and "100%" in text.splitlines()[1]
    assert "1140 hand-ins an hour" in text and text.endswith("no GPU: the phases that need one did not run")
    with_gpu = cpu_run()
    with_gpu.machine = {"gpus": ["NVIDIA H100 80GB HBM3"]}
    assert "GPU (NVIDIA H100 80GB HBM3) busy 0.2 s" in format_bench(with_gpu)


def test_the_set_is_the_references_the_starter_and_the_non_security_hand_ins():
    names = [name for name, _ in default_hand_ins(ROOT)]
    assert names[:2] == ["reference-solutions", "starter"]
    assert "good-tiled-16" in names and "naive-uncoalesced" in names
    assert not any(n.startswith("security-") or n.startswith("answers-") for n in names)
