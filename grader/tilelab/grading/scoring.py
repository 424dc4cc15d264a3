"""Points and speed arithmetic, kept apart so it can be read and tested alone.

Correctness points are shared equally by the cases graded (case_points); a
part that fails its launch checks, a sanitizer or its timed calls loses them
all. Only a part that passed everything earns speed points: its median timed
call (scored_time) against its reference, or cuBLAS, timed the same way on
the same GPU (speed_target). The roofline bound is shown beside it, never
scored. Timing stops at a budget of twice the time that earns nothing (give_up_ms).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..spec.matmul import intensity

# Wall time may exceed the event time by launch and synchronization costs.
WALL_SLACK_FACTOR = 1.5
WALL_SLACK_MS = 0.2
# A kernel span this much longer than the events means work outlived the call.
SPAN_SLACK_FACTOR = 1.05
# Faster than this fraction of the measured FP32 peak is not physically possible.
IMPOSSIBLE_FRACTION = 1.05


def case_points(total: float, n_cases: int) -> float:
    """The points one graded case is worth: the part's correctness points, shared equally."""
    return total / n_cases if n_cases else 0.0


# What the grader times besides the references: cuBLAS SGEMM in FP32, the
# yardstick of a part that goes beyond the textbook (versus_cublas).
CUBLAS = "cublas"


@dataclass(frozen=True)
class SpeedTarget:
    """What one timed size is scored against, in GFLOP/s."""
    intensity: float  # FLOP per compulsory DRAM byte
    bound: float  # the roofline at that intensity (shown, not scored against)
    reference: Optional[float]  # the part's reference solution at this size on this GPU, if timed
    full: float  # full speed points from here
    zero: float  # no speed points at or below this
    versus: str = "reference"  # what `full` is a fraction of: "reference" or CUBLAS
    cublas: Optional[float] = None  # cuBLAS SGEMM at this size on this GPU, for a part scored against it

    def fraction(self, achieved: float) -> float:
        """The share of the speed points `achieved` GFLOP/s earns: 0 at or
        below `zero`, 1 at or above `full`, linear in between."""
        if achieved >= self.full:
            return 1.0
        if achieved <= self.zero:
            return 0.0
        return (achieved - self.zero) / (self.full - self.zero)


def reference_target(ceilings, j: int, k: int, l: int, reference_gflops: float, rule) -> SpeedTarget:
    """The targets of a j x k x l multiplication whose reference solution
    reaches `reference_gflops` on a GPU with these ceilings (anything with a
    roofline `bound(intensity)`), under `rule` (assignment.SpeedRule): full
    points from rule.full_at x the reference, none at or below rule.zero_at x it."""
    if not reference_gflops > 0:
        raise ValueError(f"a reference speed must be positive, not {reference_gflops!r}")
    ai = intensity(j, k, l)
    return SpeedTarget(ai, ceilings.bound(ai), reference_gflops, rule.full_at * reference_gflops,
                       rule.zero_at * reference_gflops)


def cublas_target(ceilings, j: int, k: int, l: int, cublas_gflops: float, floor_gflops: float, full_at: float,
                  reference_gflops: Optional[float] = None) -> SpeedTarget:
    """The targets of a part that goes beyond the textbook: full points from
    full_at x cuBLAS SGEMM at this size, none at or below `floor_gflops`, the
    textbook tiled kernel's reference at this size: what the chapter already
    gives earns nothing. (`reference_gflops`, the part's own reference, is
    shown beside them.)"""
    if not cublas_gflops > 0 or not floor_gflops > 0:
        raise ValueError(f"cuBLAS and floor speeds must be positive, not {cublas_gflops!r}, {floor_gflops!r}")
    ai = intensity(j, k, l)
    full = full_at * cublas_gflops
    # A GPU where the textbook kernel comes near cuBLAS still leaves a ramp.
    zero = min(floor_gflops, 0.5 * full)
    return SpeedTarget(ai, ceilings.bound(ai), reference_gflops, full, zero, CUBLAS, cublas_gflops)


def speed_target(ceilings, part, rule, gflops_of, j: int, k: int, l: int) -> Optional[SpeedTarget]:
    """The targets of `part` (assignment.Part) timed at j x k x l: against
    its own reference (reference_target), or against cuBLAS for a part with
    versus_cublas (cublas_target, the floor being the first reference of its
    zero_at_reference_of timed at this size). `gflops_of(name, j, k, l)`
    gives what the grader timed at that size on this GPU, a part's reference
    (by part id) or cuBLAS (CUBLAS); None without the figures needed."""
    reference = gflops_of(part.id, j, k, l)
    if part.versus_cublas is None:
        return reference_target(ceilings, j, k, l, reference, rule) if reference and reference > 0 else None
    cublas = gflops_of(CUBLAS, j, k, l)
    floor = next((g for g in (gflops_of(p, j, k, l) for p in part.versus_cublas.zero_at_reference_of)
                  if g and g > 0), None)
    if not cublas or not cublas > 0 or floor is None:
        return None
    return cublas_target(ceilings, j, k, l, cublas, floor, part.versus_cublas.full_at, reference)


@dataclass
class TimeChoice:
    ms: float
    flags: list


def scoring_time(event_ms: float, cupti_ms: float, wall_ms: float) -> TimeChoice:
    """The time a timed call is scored by, and why if it is not the event time."""
    flags = []
    ms = event_ms
    if cupti_ms > SPAN_SLACK_FACTOR * event_ms:
        flags.append(f"the kernels ran {cupti_ms:.3f} ms, longer than the {event_ms:.3f} ms between the "
                     "launcher's events: scored by the kernel span")
        ms = cupti_ms
    if wall_ms > WALL_SLACK_FACTOR * ms + WALL_SLACK_MS:
        flags.append(f"the call took {wall_ms:.3f} ms until the whole device was idle against {ms:.3f} ms "
                     "measured on the default stream (work on another stream?): scored by the wall clock")
        ms = wall_ms
    return TimeChoice(ms, flags)


def trusted_time(wall_ms: float, cupti_ms: float) -> TimeChoice:
    """The time of a call timed by tilelab-harness: its own clock, from the
    inputs ready to the launcher's process saying the launcher returned and
    its device work was done. The kernel span comes from the launcher's
    process: it cannot make the time shorter, and a span longer than the
    trusted clock cannot be right, so it is flagged for a TA."""
    flags = []
    if cupti_ms > SPAN_SLACK_FACTOR * wall_ms:
        flags.append(f"the launcher's process reported kernels running {cupti_ms:.3f} ms, longer than the "
                     f"{wall_ms:.3f} ms the trusted clock measured: its records cannot be right")
    return TimeChoice(wall_ms, flags)


def scored_time(timing: dict) -> TimeChoice:
    """The time of a timing case as tilelab-verify reports it (`timing`):
    the trusted clock where tilelab-harness timed it, the three clocks of
    the in-process harness otherwise."""
    if timing.get("clock") == "trusted":
        return trusted_time(timing["median_wall_ms"], timing["median_cupti_span_ms"])
    return scoring_time(timing["median_event_ms"], timing["median_cupti_span_ms"], timing["median_wall_ms"])


def gflops(flop: float, ms: float) -> float:
    return flop / (ms * 1e6) if ms > 0 else 0.0


# A timing case's time budget, in calls at its zero line: timing stops once
# the calls are over it (grader/harness/core/timing.h), so a part far slower
# than its reference gives the GPU back early. Twice the zero line leaves
# room for any noise: a call that could earn points takes half the budget.
GIVE_UP_FACTOR = 2.0


def zero_line_ms(flop: float, zero_gflops: float) -> float:
    """The time of one call at or above which it earns no speed points."""
    return flop / (zero_gflops * 1e6)


def give_up_ms(flop: float, zero_gflops: float) -> float:
    """The budget of one call of `flop` against a target whose zero line is `zero_gflops`."""
    return GIVE_UP_FACTOR * zero_line_ms(flop, zero_gflops)
