"""The benchmark's arithmetic and its table (bench/grading_bench.py), on the
phase timings of a real run: `scripts/bench` on the 2-core CPU machine
(no GPU), 40 hand-ins, 2 workers, 126.3 s wall, 2026-11-22."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_the_deadlines_hand_ins_are_complete_distinct_and_the_solutions_code(tmp_path):
    """What a benchmark's class is made of: every part file and the answers in each, every file different."""
    from bench.handins import distinct_hand_ins

    from tilelab.spec.assignment import load_assignment

    parts = load_assignment(ROOT / "assignment.yaml").parts
    made = distinct_hand_ins(ROOT, 3, tmp_path / "class", tag="run-a")
    assert [f.name for f in made] == ["s001", "s002", "s003"]
    for part in parts:
        texts = [(f / part.file).read_text() for f in made]
        assert len(set(texts)) == 3, part.file
        solution = (ROOT / "solutions" / part.file).read_text().rstrip()
        assert all(t.startswith(solution) and t.count("\n") == solution.count("\n") + 2 for t in texts)
    assert (made[0] / "answers.yaml").read_text() == (ROOT / "solutions" / "answers.yaml").read_text()
    first = (made[0] / parts[0].file).read_text()
    again = distinct_hand_ins(ROOT, 1, tmp_path / "class", tag="run-b")  # a second run shares no file
    assert (again[0] / parts[0].file).read_text() != first


def test_a_class_runs_figures_follow_from_its_gradings():
    from bench.class_bench import ClassRun, format_classes, summarize

    one = ClassRun(gpus=["0"], in_flight=3, hand_ins=6, graded=6, wall_seconds=60.0,
                   gradings=[20.0, 21.0, 22.0, 23.0, 24.0, 40.0], phases={"speed": 7.0, "build": 3.0},
                   load={"cpu_busy": 0.95, "cpu_saturated": 0.8, "gpu_busy": {"0": 0.4}})
    two = ClassRun(gpus=["0", "1"], in_flight=3, hand_ins=12, graded=12, wall_seconds=66.0, gradings=[25.0] * 12,
                   phases={"speed": 8.0}, load={"cpu_busy": 1.0, "gpu_busy": {"0": 0.3, "1": 0.3}})
    assert one.per_hour == 360.0 and one.percentile(0.5) == 23.0 and one.percentile(0.95) == 40.0
    assert round(two.per_hour_per_gpu) == 327
    text = format_classes([one, two])
    assert "6 of 6 graded in 60.0 s = 360 an hour" in text and "CPUs busy 95 % (saturated 80 % of the time)" in text
    assert "2 GPUs grade 1.82 x one GPU" in text
    assert summarize([one, two])["ratio_to_one_gpu"] == 1.818
    assert "timing turn" not in text  # the runs above took none


def test_a_class_steady_rate_counts_the_results_while_every_slot_was_busy():
    """A class of 12, 3 in flight, whose first results came late (the
    pipeline filling) and whose last came close together (emptying): the
    steady rate is taken between the 3rd and the 9th result."""
    from bench.class_bench import ClassRun, format_classes

    ends = [10.0, 11.0, 12.0, 15.0, 18.0, 21.0, 24.0, 27.0, 30.0, 31.0, 31.5, 32.0]
    run = ClassRun(gpus=["0"], in_flight=3, hand_ins=12, graded=12, wall_seconds=32.0, gradings=[10.0] * 12,
                   phases={}, results_at=ends)
    rate, first, last = run.steady
    assert (first, last) == (3, 9) and rate == 3600.0 * 6 / (30.0 - 12.0)
    assert "between result 3 and result 9, every slot busy: 1,200 an hour" in format_classes([run])
    assert run.to_dict()["steady_per_hour"] == 1200.0
    small = ClassRun(**{**vars(run), "results_at": ends[:7]})
    assert small.steady is None and "every slot busy" not in format_classes([small])
    # Counters read later write each result again: its time is no longer when it was scored.
    later = ClassRun(**{**vars(run), "counters": "later"})
    assert later.steady is None and "every slot busy" not in format_classes([later])


def test_a_gradings_timing_turn_is_read_from_its_phases():
    """A class's grade.json (the spans of a grading in a class of 12 on the
    H100): the turn is held from its timing runs' start to the speed stage's
    end, and the bench sets that against what each hand-in cost the GPU."""
    from bench.class_bench import ClassRun, format_classes, turn_figures

    grade = {"timings": {"build": 3.85, "correctness": 4.731, "waiting for the timing turn": 0.5,
                         "timing runs starting": 4.109, "waiting for the GPU alone": 0.017, "speed": 7.809},
             "spans": {"timing runs starting": [9.434, 13.543], "waiting for the GPU alone": [13.544, 13.561],
                       "speed": [9.429, 17.238]}}
    turn = turn_figures(grade)
    assert turn["waiting for the timing turn"] == 0.5 and turn["timing runs starting"] == 4.109
    assert round(turn["the GPU alone"], 3) == 3.677 and round(turn["held"], 3) == 7.803
    untimed = {"timings": {"build": 3.0, "correctness": 1.0}, "spans": {"build": [0.1, 3.1]}}
    assert turn_figures(untimed) is None  # no part was timed: no turn
    run = ClassRun(gpus=["0"], in_flight=3, hand_ins=12, graded=12, wall_seconds=100.8, gradings=[22.0] * 12,
                   phases={"speed": 10.9}, turn=turn)
    text = format_classes([run])
    assert "held 7.80 s of the 8.40 s each hand-in cost its GPU" in text
    assert "waiting for it 0.50 s" in text


def test_what_each_stage_costs_a_hand_in_follows_from_the_classes_without_it():
    """The class of 12 on the H100 with every stage, without the speed
    stage, without compute-sanitizer and without both (their wall times)."""
    from bench.class_bench import SANITIZERS, SPEED, ClassRun, format_stage_costs, stage_costs, summarize

    def run(wall: float, *without: str) -> ClassRun:
        return ClassRun(gpus=["0"], in_flight=3, hand_ins=12, graded=12, wall_seconds=wall, gradings=[20.0] * 12,
                        phases={"build": 4.0}, without=list(without), short=[] if without else ["s001: naive 0/15"])

    runs = [run(107.8), run(59.1, SPEED), run(90.5, SANITIZERS), run(43.3, SPEED, SANITIZERS)]
    costs = stage_costs(runs)
    assert costs == {SPEED: 4.058, SANITIZERS: 1.441, "the rest": 3.608, "every stage": 8.983}
    text = format_stage_costs(runs)
    assert "(3 in flight each, without the speed stage, without compute-sanitizer): 12 of 12" in text
    assert "the speed stage 4.06 s, compute-sanitizer 1.44 s, the rest 3.61 s; with every stage 8.98 s" in text
    assert "x one GPU" not in text  # the four ran on the same GPU
    assert summarize(runs)["stage_costs"][SPEED] == 4.058 and "ratio_to_one_gpu" not in summarize(runs)
    assert stage_costs(runs[:1])[SPEED] is None and "the speed stage -," in format_stage_costs(runs[:1])


def test_a_class_without_the_counters_still_earns_every_point_and_is_no_stage_cost():
    from bench.class_bench import COUNTERS, LEFT_OUT, WITHOUT, ClassRun, format_classes, summarize

    assert WITHOUT["counters"] == COUNTERS and COUNTERS not in LEFT_OUT
    run = ClassRun(gpus=["0"], in_flight=3, hand_ins=12, graded=12, wall_seconds=90.0, gradings=[20.0] * 12,
                   phases={"build": 4.0}, without=[COUNTERS], short=["s001: naive 14/15"])
    text = format_classes([run])
    assert "(3 in flight each, without the hardware counters): 12 of 12 graded in 90.0 s = 480 an hour" in text
    assert "points lost by a copy of the solutions: s001: naive 14/15" in text
    assert "stage_costs" not in summarize([run])


def test_the_points_a_copy_of_the_solutions_lost_say_which_part_and_what_its_stage_said():
    from bench.class_bench import points_lost

    def part(pid, score, most, **stages):
        return {"id": pid, "score": score, "max_score": most,
                "stages": {name: {"name": name, "status": status, "summary": summary}
                           for name, (status, summary) in stages.items()}}

    grade = {"parts": [
        part("naive", 15, 15, speed=("passed", "5120 GFLOP/s: 100% of the speed points")),
        part("tiled", 23.625, 25, correctness=("passed", "13/13"),
             speed=("passed", "6900 GFLOP/s at 4096x4096x4096: 86% of the speed points")),
        part("boundary", 2, 20, speed=("not_run", "not run"), correctness=("failed", "2/13 public cases passed")),
        part("rectangular", 0, 20),
        "not a part", {"id": "odd", "score": 1, "max_score": 2, "stages": "not stages"}]}
    assert points_lost(grade) == ("tiled 23.625/25 (speed: 6900 GFLOP/s at 4096x4096x4096: 86% of the speed points); "
                                  "boundary 2/20 (correctness: 2/13 public cases passed); rectangular 0/20; odd 1/2")
    assert points_lost({"parts": [grade["parts"][0]]}) == "" and points_lost({}) == ""


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", "--root", str(ROOT), *args], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "grader")))


def test_stage_costs_are_asked_for_with_a_class_and_bad_gpus_are_said_plainly(tmp_path):
    result = bench("--build", str(tmp_path), "--stage-costs")
    assert result.returncode == 2 and "--stage-costs measures a class: give --class N too" in result.stderr
    assert "Traceback" not in result.stderr
    for asked in (("--without", "counters"), ("--class", "1", "--stage-costs", "--without", "counters")):
        result = bench("--build", str(tmp_path), *asked)
        assert result.returncode == 2 and "--without and --counters are for a class" in result.stderr
    result = bench("--build", str(tmp_path), "--class", "1", "--counters", "later", "--without", "counters")
    assert result.returncode == 2 and "give one" in result.stderr
    result = bench("--build", str(tmp_path), "--class", "1", "--without", "questions")
    assert result.returncode == 2 and "Invalid value for '--without'" in result.stderr
    result = bench("--build", str(tmp_path), "--gpus", "0,0", "--class", "1")
    assert result.returncode == 2 and "--gpus '0,0' names a GPU twice" in result.stderr
    assert "Traceback" not in result.stderr


def test_stage_costs_need_a_gpu(tmp_path):
    from bench.class_bench import run_stage_costs
    from tilelab.errors import TilelabError

    with pytest.raises(TilelabError, match="measures what the stages cost a GPU, and this machine has none"):
        run_stage_costs(ROOT, ROOT / "build", tmp_path, 1, [], None, print)
    assert not any(tmp_path.iterdir())  # nothing was graded


def test_starts_are_asked_for_alone_and_say_plainly_what_they_lack(tmp_path):
    from conftest import built_tree

    result = bench("--build", str(tmp_path), "--starts", "4", "--class", "2")
    assert result.returncode == 2 and "--starts measures CUDA processes alone" in result.stderr
    result = bench("--build", str(tmp_path), "--starts", "0")
    assert result.returncode == 2 and "Invalid value for '--starts'" in result.stderr
    build = built_tree("reference/naive")
    result = bench("--build", str(build), "--out", str(tmp_path / "none"), "--starts", "2", "--gpus", "0")
    if result.returncode == 0:
        pytest.skip("skipped: a CUDA device is here (scripts/bench --starts measures it)")
    assert result.returncode == 1 and "runs of naive failed" in result.stderr and "Traceback" not in result.stderr


def test_starts_say_how_much_longer_a_process_waits_beside_others():
    from bench.starts_bench import Starts, format_starts

    text = format_starts([Starts("one GPU", 16, [1.30, 1.25, 1.32]), Starts("2 GPUs", 16, [1.74, 1.81, 1.78])])
    assert "- 16 on one GPU: median 1.30 s (1.30, 1.25, 1.32); 81 ms a process" in text
    assert text.endswith("2 GPUs start them in 1.37 x the time of one GPU (1.00: no faster; 0.50: side by side)")


def test_the_load_says_how_many_cores_the_benchmarks_own_process_used():
    from bench.machine_load import MachineLoad

    def spin(seconds: float) -> None:
        import time
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    import time
    with MachineLoad() as idle:
        time.sleep(1.2)
    with MachineLoad() as busy:
        spin(1.2)
    assert idle.figures()["own_cores"] < 0.3
    assert busy.figures()["own_cores"] > 0.5  # 1.2 s of this process's CPU in at least 1.2 s
    assert 0 <= busy.figures()["own_saturated"] <= 1


def test_what_a_cuda_process_beside_the_class_cost_follows_from_the_two_classes():
    from bench.class_bench import ClassRun, format_classes, summarize
    from bench.starts_beside import cost_per_start

    plain = ClassRun(gpus=["0"], in_flight=3, hand_ins=12, graded=12, wall_seconds=120.0, gradings=[25.0] * 12,
                     phases={})
    beside = ClassRun(gpus=["0"], in_flight=3, hand_ins=12, graded=12, wall_seconds=150.0, gradings=[30.0] * 12,
                      phases={}, beside={"rate": 2.0, "started": 300, "failed": 0, "skipped": 0})
    # 10 s a hand-in alone, 12.5 s with 25 processes more each: 0.1 s a process.
    assert cost_per_start(plain, beside) == pytest.approx(0.1)
    text = format_classes([plain, beside])
    assert "2 CUDA processes a second started beside it: 300 started, 0 failed" in text
    assert text.splitlines()[-1].startswith("each CUDA process started beside the class cost it 100 ms")
    assert summarize([plain, beside])["cost_per_start_s"] == pytest.approx(0.1)
    failed = ClassRun(**{**vars(beside), "beside": {"rate": 2.0, "started": 5, "failed": 5, "skipped": 0}})
    assert cost_per_start(plain, failed) is None and "cost it" not in format_classes([plain, failed])


def test_starts_beside_are_asked_for_with_a_class_on_a_gpu(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "grader"), "CUDA_VISIBLE_DEVICES": ""}
    alone = subprocess.run([sys.executable, "-m", "bench", "--root", str(ROOT), "--out", str(tmp_path),
                            "--starts-beside", "2"], env=env, capture_output=True, text=True)
    assert alone.returncode == 2 and "give --class N" in alone.stderr
    zero = subprocess.run([sys.executable, "-m", "bench", "--root", str(ROOT), "--out", str(tmp_path), "--class", "2",
                           "--starts-beside", "0"], env=env, capture_output=True, text=True)
    assert zero.returncode == 2 and "--starts-beside" in zero.stderr and "Traceback" not in zero.stderr


def test_processes_started_beside_a_class_hold_the_gpu_shared_and_wait_for_a_timed_part(tmp_path):
    import threading
    import time

    from conftest import built_tree
    from bench.starts_beside import MOST_AT_ONCE, StartsBeside
    from tilelab.system.gpu_lock import GpuLock

    build = built_tree("reference/naive")
    lock = GpuLock()
    timed = lock.exclusive()
    timed.__enter__()  # a timed part holds the GPU alone
    beside = StartsBeside(ROOT, build, tmp_path, "0", 20.0, lock=lock)
    with beside:
        time.sleep(0.6)
        assert beside.started == 0  # every start waits to share the GPU
        assert beside.skipped > 0  # and no more than MOST_AT_ONCE wait at once
        timed.__exit__(None, None, None)
        time.sleep(0.6)
    assert beside.started >= MOST_AT_ONCE  # those that waited, then more
    got = threading.Event()
    threading.Thread(target=lambda: (lock.exclusive().__enter__(), got.set()), daemon=True).start()
    assert got.wait(5), "every start gave the GPU's lock back"
    figures = beside.figures()
    assert figures["rate"] == 20.0 and figures["started"] == beside.started
    assert 0 <= figures["failed"] <= figures["started"]  # without a GPU each run fails, with one none should


def test_starts_beside_need_a_gpu(tmp_path):
    from bench.class_bench import run_classes
    from tilelab.errors import TilelabError

    with pytest.raises(TilelabError, match="--starts-beside starts CUDA processes beside a class on a GPU"):
        run_classes(ROOT, ROOT / "build", tmp_path, 1, [], None, print, starts_beside=2.0)
    assert not any(tmp_path.iterdir())
