"""GradeResults whose parts carry the counters of a real H100 run
(data/h100-reference-counters.json: each reference solution profiled at its
4096^3 timing case), with that GPU's measured ceilings and the reference
solutions' speeds there.

The hand-in they describe is the reference solutions, except two parts: its
tiled part is the naive kernel handed in again, which shows what the lab
teaches (0.25 FLOP/B of global loads against the reference's 8.0), and its
boundary part is the dynamic_smem kernel, whose 40 registers per thread in
blocks of 1024 leave room for half the SM's warps (a hint says so). Every
figure is measured; the hints and the theoretical occupancy are worked out
from them as a grading does (stages/speed.py).
"""

import json
from pathlib import Path

from grade_fixtures import CUBLAS_H100, H100, stages

from tilelab.grading.counter_hints import hints_for
from tilelab.grading.model import CaseResult, GradeResult, PartResult, Speed
from tilelab.grading.traffic import Traffic, traffic_from, with_occupancy

DATA = Path(__file__).resolve().parent / "data" / "h100-reference-counters.json"
CASE = "4096x4096x4096"
# 2 x 4096^3 FLOP over A, B read once and C written once, in floats.
COMPULSORY = 2 * 4096 ** 3 / (3 * 4096 ** 2 * 4)

# tilelab-roofline on the same H100 (Ceilings.summary()).
CEILINGS = {"device_name": H100["name"], "device_uuid": H100["uuid"], "fp32_gflops": 65135.0, "dram_gbps": 3038.0,
            "l2_gbps": 7307.0, "shared_gbps": 32911.0, "ridge": 21.44, "measured_at": "2026-11-25T09:00:00+00:00"}
# The reference solutions timed at 4096^3 on that GPU, GFLOP/s.
REFERENCE_GFLOPS = {"naive": 5295.0, "tiled": 9186.0, "boundary": 9002.0, "rectangular": 9027.0,
                    "dynamic_smem": 5269.0, "challenge": 47377.0}
PARTS = {  # id -> (title, file, correctness points, speed points)
    "naive": ("Naive kernel", "naive.cu", 10, 5),
    "tiled": ("Tiled kernel with shared memory", "tiled.cu", 15, 10),
    "boundary": ("Boundary checks for any Width", "boundary.cu", 15, 5),
    "rectangular": ("Rectangular matrices j x k x l", "rectangular.cu", 15, 5),
    "dynamic_smem": ("Dynamic shared memory sized at run time", "dynamic_smem.cu", 15, 5),
    "challenge": ("Challenge: toward cuBLAS", "challenge.cu", 5, 15),
}
# The parts handed in as another part's reference solution.
HANDED_IN = {"tiled": "naive", "boundary": "dynamic_smem"}


def measured_traffic(kernel: str, occupancy: bool = False) -> Traffic:
    """The counters of one reference solution's profiled call; with
    `occupancy`, and its theoretical occupancy, as a graded part's counters
    get it from their launch record (a reference's get none)."""
    data = json.loads(DATA.read_text())
    part = data["parts"][kernel]
    profile = part["profile"]
    found = traffic_from(profile["metrics"], part["j"], part["k"], part["l"], passes=profile.get("passes", 0))
    return with_occupancy(found, part["launches"], data["device"]) if occupancy else found


def timed_part(part_id: str, kernel: str = "") -> PartResult:
    """`part_id` graded with every stage passed and timed at 4096^3; its
    code is the reference solution of `kernel` (its own by default): that
    reference's speed and counters, beside part_id's reference."""
    kernel = kernel or part_id
    title, file, correctness, speed_points = PARTS[part_id]
    reference = REFERENCE_GFLOPS[part_id]
    gflops = REFERENCE_GFLOPS[kernel]
    if part_id == "challenge":
        cublas = CUBLAS_H100[CASE]
        target, zero, versus = 0.8 * cublas, 9256.0, "cublas"
    else:
        cublas, target, zero, versus = None, 0.8 * reference, 0.5 * reference, "reference"
    fraction = max(0.0, min(1.0, (gflops - zero) / (target - zero)))
    ms = 2 * 4096 ** 3 / gflops / 1e6
    speed = Speed(case=CASE, gflops=gflops, time_ms=round(ms, 3), event_ms=ms, cupti_ms=ms, wall_ms=ms,
                  ceiling_value=CEILINGS["fp32_gflops"], bound_gflops=CEILINGS["fp32_gflops"],
                  intensity=round(COMPULSORY, 2), reference_gflops=reference, rule="reference", full_at=0.8,
                  target_gflops=round(target, 1), zero_gflops=round(zero, 1), fraction=round(fraction, 4),
                  versus=versus, cublas_gflops=cublas)
    traffic, reference = measured_traffic(kernel, occupancy=True), measured_traffic(part_id)
    return PartResult(id=part_id, title=title, file=file, stages=stages(),
                      cases=[CaseResult("w32", "public", 32, 32, 32, True)], correctness_score=correctness,
                      correctness_max=correctness, speed_score=round(speed_points * fraction, 2),
                      speed_max=speed_points, speed=speed, speeds=[speed], extra_credit=part_id == "challenge",
                      traffic=traffic, reference_traffic=reference,
                      traffic_hints=hints_for(part_id, title, traffic, reference))


def traffic_result(*part_ids: str) -> GradeResult:
    """An H100 grading of the parts named (all six by default), two of them
    another part's kernel (HANDED_IN)."""
    parts = [timed_part(part_id, HANDED_IN.get(part_id, "")) for part_id in part_ids or tuple(PARTS)]
    return GradeResult(assignment="tilelab_matmul", mode="grade", submission="/tmp/hand-in", seed=42, gpu=dict(H100),
                       ceilings=dict(CEILINGS), parts=parts, started="2026-11-25T09:30:00+00:00", seconds=48.0,
                       title="Tiled matrix multiplication in CUDA")
