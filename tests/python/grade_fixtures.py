"""GradeResult objects for tests, with figures from a real H100 grading run
(the tiled reference's 9191 GFLOP/s: docs/measurements.md, 2026-11-21)."""

from pathlib import Path

from tilelab.grading.model import STAGES, CaseResult, ElementError, GradeResult, PartResult, Speed, Stage
from tilelab.spec.answers import grade_answers, load_key
from tilelab.spec.assignment import load_assignment

ROOT = Path(__file__).resolve().parents[2]

H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-6b1f", "compute_capability": "9.0", "multiprocessors": 132}
CEILINGS = {"device_name": "NVIDIA H100 80GB HBM3", "device_uuid": "GPU-6b1f", "fp32_gflops": 56000.0,
            "dram_gbps": 2900.0, "ridge": 19.31, "measured_at": "2026-11-21T19:40:00+00:00"}


def stages(**status):
    out = {}
    for name in STAGES:
        st = status.get(name, "passed")
        out[name] = Stage(name, st, f"{name} {st}")
    return out


def passing_tiled() -> PartResult:
    cases = [CaseResult("w32", "public", 32, 32, 32, True), CaseResult("w64", "public", 64, 64, 64, True),
             CaseResult("w160", "hidden", 160, 160, 160, True)]
    speed = Speed(case="4096x4096x4096", gflops=9193.0, time_ms=14.951, event_ms=14.951, cupti_ms=14.944,
                  wall_ms=14.960, ceiling_value=56000.0, bound_gflops=56000.0, intensity=682.67,
                  reference_gflops=9191.0, rule="reference", full_at=0.8, target_gflops=7352.8, zero_gflops=4595.5,
                  fraction=1.0)
    return PartResult(id="tiled", title="Tiled kernel with shared memory", file="tiled.cu", stages=stages(),
                      cases=cases, correctness_score=15.0, correctness_max=15.0, speed_score=10.0, speed_max=10.0,
                      speed=speed, hidden_total=1)


def failing_boundary() -> PartResult:
    cases = [
        CaseResult("w16", "public", 16, 16, 16, True),
        CaseResult("w17", "public", 17, 17, 17, False, reasons=["17 elements of P are never written"], unwritten=17,
                   first_errors=[ElementError(16, 0, 3.25, "unwritten", 1.2e-6)]),
        CaseResult("w48", "hidden", 48, 48, 48, True),
        CaseResult("w97", "hidden", 97, 97, 97, False, reasons=["97 elements of P are never written"], unwritten=97),
    ]
    st = stages(correctness="failed", speed="not_run")
    st["correctness"].summary = "1/2 public cases passed (failed: w17)"
    st["correctness"].hints = ["Only sizes that are not a multiple of 32 fail: check the boundary handling."]
    st["speed"].summary = "not run: speed is measured only when every case is correct"
    return PartResult(id="boundary", title="Boundary checks for any Width", file="boundary.cu", stages=st,
                      cases=cases, correctness_score=7.5, correctness_max=15.0, speed_score=0.0, speed_max=5.0,
                      hidden_total=2)


def grade_result(*parts) -> GradeResult:
    return GradeResult(assignment="tilelab_matmul", mode="grade", submission="/tmp/hand-in", seed=42, gpu=H100,
                       ceilings=CEILINGS, parts=list(parts), started="2026-11-21T20:00:00+00:00", seconds=31.5,
                       timings={"build": 6.1, "correctness": 2.0})


def graded_answers(hand_in: str = "answers-partial", key: bool = True):
    """The AnswersResult of one of tests/submissions' answers hand-ins, graded
    against the real key (or, with key=False, as in a student's copy)."""
    questions = load_assignment(ROOT / "assignment.yaml").questions
    answer_key = load_key(ROOT / "solutions" / "answers.yaml", questions) if key else None
    return grade_answers(ROOT / "tests" / "submissions" / hand_in / "answers.yaml", questions, answer_key)
