"""The time budget of a timing case: a part far slower than its reference
gives the GPU back early (grader/harness/core/timing.h, grading/stages/speed.py).

The grader writes each timing case's budget from the calibration: twice the
time of a call that earns no speed points. The harness stops timing once the
calls are over it; what it then writes is judged here by the real
tilelab-verify (host only, no GPU needed) and scored by the speed stage's
own arithmetic: no speed points, said in words, and no wrong answer. The
harness's side of it runs in the GPU tests (tests/cpp/harness_timing_gpu_tests.cpp,
TimeBudget) and in the self-test (tests/submissions/naive-slow-host-multiply).

Reference figures: the H100 ladder of test_calibration.py (naive 5,294
GFLOP/s at 4096^3; the uncoalesced naive kernel 498) and the challenge's
cuBLAS, reference and floors (the tiled and rectangular references) of
grade_fixtures.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grade_fixtures import CHALLENGE_REFERENCE_H100, CUBLAS_H100, FLOOR_H100
from tilelab.grading.calibration import Calibration, ReferenceSpeed
from tilelab.grading.gpu_ceilings import Ceilings
from tilelab.grading.launch_checks import check_first_timed_calls
from tilelab.grading.model import MEASURED_RULE
from tilelab.grading.runner import verify, write_cases
from tilelab.grading.scoring import CUBLAS, GIVE_UP_FACTOR, zero_line_ms
from tilelab.grading.stages.speed_rules import SlowStop, case_speed, give_up_budgets, slow_stop, stop_words
from tilelab.spec.matmul import matmul_flop
from tilelab.system.paths import tool_path

ROOT = Path(__file__).resolve().parents[2]
FLOP_4096 = matmul_flop(4096, 4096, 4096)
H100 = Ceilings(device_name="NVIDIA H100 80GB HBM3", device_uuid="GPU-0", fp32_gflops=65094.0, dram_gbps=3040.0,
                measured_at="2026-11-22T00:00:00Z", raw={})


def part(assignment, part_id: str):
    return next(p for p in assignment.parts if p.id == part_id)


def h100_calibration() -> Calibration:
    speeds = [ReferenceSpeed("naive", 4096, 4096, 4096, (5294.0,)),
              ReferenceSpeed("tiled", 4096, 4096, 4096, (FLOOR_H100["4096x4096x4096"][1],))]
    for case, gflops in CUBLAS_H100.items():
        speeds.append(ReferenceSpeed(CUBLAS, *map(int, case.split("x")), (gflops,)))
        speeds.append(ReferenceSpeed("challenge", *map(int, case.split("x")), (CHALLENGE_REFERENCE_H100[case],)))
        floor_part, floor = FLOOR_H100[case]
        if floor_part != "tiled":
            speeds.append(ReferenceSpeed(floor_part, *map(int, case.split("x")), (floor,)))
    return Calibration(MEASURED_RULE, "GPU-0", "NVIDIA H100 80GB HBM3", "f" * 64, "2026-11-22T00:00:00Z", 1.0,
                       tuple(speeds))


def verify_tool() -> Path:
    build = os.environ.get("TILELAB_BUILD_DIR")
    if not build or not tool_path(Path(build), "tilelab-verify").exists():
        pytest.skip("skipped: needs a built project (run through ctest, which sets TILELAB_BUILD_DIR)")
    return tool_path(Path(build), "tilelab-verify")


def test_the_budget_is_twice_the_time_that_earns_nothing_and_far_above_the_references(assignment):
    calibration = h100_calibration()
    naive = give_up_budgets(part(assignment, "naive"), assignment.speed, H100, calibration)
    # Nothing at or below half the naive reference's 5,294 GFLOP/s: 51.9 ms a call, so a budget of 103.8 ms.
    assert naive == {"w4096": pytest.approx(GIVE_UP_FACTOR * FLOP_4096 / (0.5 * 5294.0e6))}
    assert naive["w4096"] == pytest.approx(103.8, abs=0.05)
    reference_ms, uncoalesced_ms = FLOP_4096 / 5294.0e6, FLOP_4096 / 498.0e6
    # The reference's calls (26 ms) are a quarter of the budget; the uncoalesced kernel's (276 ms) are over it.
    assert reference_ms < naive["w4096"] / 3 and uncoalesced_ms > naive["w4096"]

    # The challenge is scored against cuBLAS with the tiled reference as its floor at 4096^3,
    # the rectangular one at 2048 x 4096 x 8192: its own reference runs far under either budget.
    challenge = give_up_budgets(part(assignment, "challenge"), assignment.speed, H100, calibration)
    assert set(challenge) == {"4096x4096x4096", "2048x4096x8192"}
    for case, budget in challenge.items():
        j, k, l = map(int, case.split("x"))
        floor = FLOOR_H100[case][1]
        assert budget == pytest.approx(GIVE_UP_FACTOR * zero_line_ms(matmul_flop(j, k, l), floor))
        assert matmul_flop(j, k, l) / (CHALLENGE_REFERENCE_H100[case] * 1e6) < budget / 10

    # A part the calibration has no figure for gets no budget: it is timed in full (and not scored).
    assert give_up_budgets(part(assignment, "boundary"), assignment.speed, H100, calibration) == {}


def test_each_timing_case_carries_its_own_budget_and_no_other_case_does(tmp_path, assignment):
    challenge = part(assignment, "challenge")
    entries = [(c.name, c) for c in challenge.cases["timing"]]
    doc = json.loads(write_cases(challenge, entries, tmp_path, 1, timing=assignment.timing,
                                 give_up_ms={"4096x4096x4096": 29.6543, "elsewhere": 5.0}).read_text())
    first, second = doc["cases"]
    assert first["timing"] == dict(assignment.timing, seed=first["timing"]["seed"], give_up_ms=29.654)
    assert "give_up_ms" not in second["timing"]
    plain = json.loads(write_cases(challenge, entries, tmp_path / "plain", 1, timing=assignment.timing).read_text())
    # The calibration writes none: the references are never stopped.
    assert all("give_up_ms" not in c["timing"] for c in plain["cases"])
    correctness = json.loads(write_cases(challenge, [("small", challenge.cases["public"][0])], tmp_path / "c", 1,
                                         give_up_ms={"small": 5.0}).read_text())
    assert "timing" not in correctness["cases"][0]  # a correctness case is never timed, budget or not


def _stopped_run(case_file: Path, name: str, j: int, k: int, l: int, stop: dict) -> None:
    """The result the trusted harness writes for a timing case it stopped
    before any call was timed (timing.h), and for nothing after it."""
    timing = {"seed": 1, "warmup_calls": 0, "repetitions": 0, "input_sets": 3, "flush_bytes": 0, "samples": 64,
              "median_event_ms": 0.0, "median_wall_ms": 0.0, "median_cupti_span_ms": 0.0, "calls": [],
              "api_calls": {}, "api_calls_outside_call": {}, "clock": "trusted",
              "clocks": {"available": False, "message": "no call was timed"},
              "give_up_ms": 103.8, "stopped_slow": True, "stop": stop}
    result = {"version": 1, "part": "challenge", "state": "finished", "current_case": None, "exit_code": 0,
              "launcher_process": True, "stopped_slow": name,
              "cases": [{"name": name, "j": j, "k": k, "l": l, "status": "ok", "exit_code": 0, "message": "",
                         "event_ms": 0.0, "wall_ms": stop["ms"], "timing": timing}]}
    (case_file.parent / "result.json").write_text(json.dumps(result))


def test_a_stopped_timing_earns_no_speed_points_is_told_in_words_and_is_no_wrong_answer(tmp_path, assignment):
    challenge = part(assignment, "challenge")
    budgets = give_up_budgets(challenge, assignment.speed, H100, h100_calibration())
    case_file = write_cases(challenge, [(c.name, c) for c in challenge.cases["timing"]], tmp_path, 7,
                            timing=assignment.timing, give_up_ms=budgets)
    # The first call at 4096^3 was still running at the call limit (two seconds) and was ended.
    _stopped_run(case_file, "4096x4096x4096", 4096, 4096, 4096,
                 {"rule": "call_limit", "ms": 2003.4, "calls": 1, "call_limit_ms": 2000.0})
    verdict = verify(verify_tool(), case_file)
    stopped, later = verdict["cases"]
    assert stopped["passed"], stopped["reasons"]  # nothing it computed was wrong: it computed nothing
    assert stopped["timing"]["stopped_slow"] is True and stopped["timing"]["calls"] == 0
    assert not later["passed"] and later["not_timed_after"] == "4096x4096x4096"
    assert "too slow to earn speed points" in later["reasons"][0]

    target = h100_calibration().target(H100, challenge, assignment.speed, 4096, 4096, 4096)
    speed, fraction = case_speed(stopped, target, H100, MEASURED_RULE, 0.8)
    assert fraction == 0.0 and speed.fraction == 0.0
    assert speed.time_ms == 2003.4 and speed.gflops == pytest.approx(FLOP_4096 / 2003.4e6, abs=0.1)
    zero_ms = zero_line_ms(FLOP_4096, FLOOR_H100["4096x4096x4096"][1])
    assert speed.flags == [f"timing stopped after 1 call at 4096x4096x4096: a call was still running after 2.0 s "
                           f"and was ended, slower than the {zero_ms:.2f} ms at which speed earns no points"]


def test_a_size_stopped_by_its_calls_is_scored_by_the_time_that_stopped_it(tmp_path, assignment):
    """Stopped by one warm-up call far over the budget: no call was timed,
    and the size earns nothing whatever the targets."""
    naive = part(assignment, "naive")
    case_file = write_cases(naive, [("w4096", naive.cases["timing"][0])], tmp_path, 3, timing=assignment.timing,
                            give_up_ms={"w4096": 103.8})
    _stopped_run(case_file, "w4096", 4096, 4096, 4096,
                 {"rule": "one_call", "ms": 812.5, "calls": 2, "call_limit_ms": 2000.0})
    [v] = verify(verify_tool(), case_file)["cases"]
    assert v["passed"] and v["timing"]["stop"]["rule"] == "one_call"
    target = h100_calibration().target(H100, naive, assignment.speed, 4096, 4096, 4096)
    speed, fraction = case_speed(v, target, H100, MEASURED_RULE, 0.8)
    assert (fraction, speed.time_ms) == (0.0, 812.5)
    assert speed.flags[-1].startswith("timing stopped after 2 calls at 4096x4096x4096: one took 812.5 ms, slower "
                                      "than the 51.92 ms")


def test_the_words_of_each_stop():
    zero = 51.92
    assert stop_words("4096x4096x4096", SlowStop("median", 275.93, 6), zero) == (
        "timing stopped after 6 calls at 4096x4096x4096: each took about 275.9 ms, slower than the 51.92 ms at which "
        "speed earns no points")
    assert stop_words("w", SlowStop("call_limit", 2500.0, 4), zero).startswith(
        "timing stopped after 4 calls at w: the last was still running after 2.5 s and was ended")
    assert stop_words("w", SlowStop("one_call", 9.5, 0), zero).startswith("timing stopped at w: one took 9.50 ms")


def test_a_stop_is_read_defensively():
    """The stop comes from the harness's result, written beside student code."""
    assert slow_stop({"stopped_slow": False, "stop": {"rule": "median"}}) is None
    assert slow_stop({"stopped_slow": "yes"}) is None
    assert slow_stop(None) is None
    assert slow_stop({"stopped_slow": True}) == SlowStop("median", 0.0, 0)
    assert slow_stop({"stopped_slow": True, "stop": {"rule": "rm -rf", "ms": float("nan"), "calls": True}}) == \
        SlowStop("median", 0.0, 0)
    assert slow_stop({"stopped_slow": True, "stop": {"rule": "call_limit", "ms": 2001, "calls": 3}}) == \
        SlowStop("call_limit", 2001.0, 3)


def _first_call(name, j, k, l, memory=(), host_cpu_ms=0.1, kernel_ms=25.0, api_calls=None):
    return {"name": name, "j": j, "k": k, "l": l, "launches_recorded": True,
            "launches": [{"name": "naiveKernel", "duration_ms": kernel_ms}], "memory_operations": list(memory),
            "host_cpu_ms": host_cpu_ms, "printed_bytes": 0, "print_calls": 0, "api_calls": api_calls or {}}


def test_the_first_call_at_each_timing_size_is_held_to_the_host_work_checks():
    """The untimed call the timed ones follow: host copies and refused calls
    in any of them, host CPU time in all but the run's first; a call ended
    unfinished left no records to hold to anything."""
    copies = [{"kind": "DtoH", "api": "cudaMemcpy_v3020", "bytes": 67108864},
              {"kind": "HtoD", "api": "cudaMemcpy_v3020", "bytes": 67108864}]
    problems = check_first_timed_calls([_first_call("a", 4096, 4096, 4096, copies, host_cpu_ms=900.0)])
    assert problems == ["the first call at 4096x4096x4096: the launcher copied 134217728 bytes between host and "
                        "device (DtoH, HtoD) with cudaMemcpy: computing on the host is not allowed"]
    # One-time host work goes in the run's first call; a second size's first call is held to the floor.
    honest = _first_call("a", 4096, 4096, 4096, host_cpu_ms=400.0)
    assert check_first_timed_calls([honest]) == []
    second = check_first_timed_calls([honest, _first_call("b", 2048, 4096, 8192, host_cpu_ms=400.0)])
    assert len(second) == 1 and second[0].startswith("the first call at 2048x4096x8192: the launcher used 400.0 ms")
    refused = _first_call("a", 4096, 4096, 4096, api_calls={"cudaHostAlloc_v3020": 1})
    assert "cudaHostAlloc" in check_first_timed_calls([refused])[0]
    ended = {"name": "a", "j": 4096, "k": 4096, "l": 4096, "status": "ok", "timing": {"stopped_slow": True}}
    assert check_first_timed_calls([ended]) == []
    assert check_first_timed_calls(None) == [] and check_first_timed_calls(["garbage", 7]) == []
