"""GradeResult objects for tests, with figures from a real H100 grading run
(the tiled reference's 9191 GFLOP/s: docs/measurements-archive.md, 2026-11-21)."""

from pathlib import Path

from tilelab.grading.model import STAGES, CaseResult, ElementError, GradeResult, PartResult, Speed, Stage
from tilelab.grading.answer_key import load_key
from tilelab.grading.answers import grade_answers
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


# The challenge part on the H100 (docs/measurements-archive.md, "Challenge part: the
# ladder toward cuBLAS", 2026-11-22, first pass): cuBLAS SGEMM and the
# challenge reference at both timing sizes; the textbook references that set
# the floor, tiled at 4096^3 and rectangular at 2048 x 4096 x 8192 (the
# calibration ladder of 2026-11-22).
CUBLAS_H100 = {"4096x4096x4096": 51661.0, "2048x4096x8192": 51929.0}
CHALLENGE_REFERENCE_H100 = {"4096x4096x4096": 47670.0, "2048x4096x8192": 47833.0}
FLOOR_H100 = {"4096x4096x4096": ("tiled", 9256.0), "2048x4096x8192": ("rectangular", 9076.0)}
# Rungs of the handout's ladder at (4096^3, 2048 x 4096 x 8192), same table.
LADDER_H100 = {
    "block tiling": (16101.0, 15803.0), "register tiling": (16222.0, 16159.0), "128-bit loads": (23355.0, 23615.0),
    "transposed tile": (32418.0, 32876.0), "double buffering": (35467.0, 36009.0),
    "warp tiling": (36843.0, 36827.0), "reference": (47670.0, 47833.0), "reference kBK 16": (47767.0, 48101.0),
}


# The H100's ceilings as tilelab-roofline measures them (docs/measurements-archive.md,
# "Ceilings measured by tilelab-roofline": 65,081 to 65,121 GFLOP/s, 3,035 to
# 3,046 GB/s on three machines).
H100_MEASURED = {**CEILINGS, "fp32_gflops": 65100.0, "dram_gbps": 3040.0, "ridge": 21.41}


def calibration_summary() -> dict:
    """What GradeResult.calibration holds after an H100 grading (Calibration.summary)."""
    references = {"tiled 4096x4096x4096": 9256.0, "rectangular 2048x4096x8192": 9076.0}
    references.update({f"challenge {case}": g for case, g in CHALLENGE_REFERENCE_H100.items()})
    references.update({f"cublas {case}": g for case, g in CUBLAS_H100.items()})
    return {"rule": "reference", "device_name": H100["name"], "measured_at": "2026-11-22T10:00:00+00:00",
            "fingerprint": "3f9a2c", "source": "", "references": references,
            "full_credit_from": {f"challenge {case}": round(0.8 * g, 1) for case, g in CUBLAS_H100.items()}}


def challenge_part(gflops: tuple, speed_max: float = 15.0, correctness_max: float = 5.0) -> PartResult:
    """The challenge part timed at (4096^3, 2048 x 4096 x 8192) at these
    GFLOP/s, scored as the grader scores it (scoring.cublas_target, the
    sizes' shares combined by geometric mean), every stage passed."""
    import math

    from tilelab.grading.gpu_ceilings import Ceilings
    from tilelab.grading.scoring import cublas_target

    ceilings = Ceilings(H100_MEASURED["device_name"], H100_MEASURED["device_uuid"], H100_MEASURED["fp32_gflops"],
                        H100_MEASURED["dram_gbps"], H100_MEASURED["measured_at"], {})
    speeds = []
    for (case, achieved) in zip(CUBLAS_H100, gflops):
        j, k, l = (int(n) for n in case.split("x"))
        target = cublas_target(ceilings, j, k, l, CUBLAS_H100[case], FLOOR_H100[case][1], 0.8,
                               CHALLENGE_REFERENCE_H100[case])
        ms = 2.0 * j * k * l / achieved / 1e6
        speeds.append(Speed(case=case, gflops=achieved, time_ms=round(ms, 4), event_ms=ms, cupti_ms=ms, wall_ms=ms,
                            ceiling_value=H100_MEASURED["fp32_gflops"], bound_gflops=round(target.bound, 1),
                            intensity=round(target.intensity, 2), reference_gflops=target.reference,
                            rule="reference", full_at=0.8, target_gflops=round(target.full, 1),
                            zero_gflops=round(target.zero, 1), fraction=round(target.fraction(achieved), 4),
                            versus="cublas", cublas_gflops=target.cublas))
    fractions = [s.fraction for s in speeds]
    combined = math.prod(fractions) ** (1 / len(fractions)) if all(fractions) else 0.0
    headline = Speed(**{**speeds[0].__dict__, "fraction": round(combined, 4)})
    cases = [CaseResult("17x33x65", "public", 17, 33, 65, True), CaseResult("15x32x63", "hidden", 15, 32, 63, True)]
    return PartResult(id="challenge", title="Challenge: toward cuBLAS", file="challenge.cu", stages=stages(),
                      cases=cases, correctness_score=correctness_max, correctness_max=correctness_max,
                      speed_score=round(speed_max * combined, 4), speed_max=speed_max, speed=headline, speeds=speeds,
                      extra_credit=True, hidden_total=1)


def challenge_result(gflops: tuple, with_tiled: bool = True) -> GradeResult:
    """An H100 grading whose challenge part reached these GFLOP/s (and whose
    tiled part is the fixture's), with the H100's measured ceilings and its
    calibration summary."""
    parts = [challenge_part(gflops)]
    if with_tiled:
        tiled = passing_tiled()
        tiled.speed.ceiling_value = tiled.speed.bound_gflops = H100_MEASURED["fp32_gflops"]
        parts.insert(0, tiled)
    result = grade_result(*parts)
    result.ceilings = dict(H100_MEASURED)
    result.calibration = calibration_summary()
    return result
