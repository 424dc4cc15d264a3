"""Points and speed arithmetic, kept apart so it can be read and tested alone.

Correctness: a part's correctness points are shared equally by the cases
graded (public and hidden in `grade`, public in `check`). A part that fails
its launch checks, a sanitizer or its timed calls loses them all: passing
cases by accident does not make a racy or out-of-bounds kernel correct.

Speed: only a part that passed everything earns speed points. The time used
is the median CUDA-event time of the timed calls, unless another clock says
the call took longer: the CUPTI kernel span (work left running after the end
event) or the host's wall clock up to a device-wide synchronize (work hidden
on another stream). The achieved GFLOP/s is compared with the part's
reference solution timed the same way on the same GPU (calibration.py):
full credit from full_at x the reference's GFLOP/s, none at or below
zero_at x it, linear in between (assignment.yaml: grading.speed). The
roofline bound of the timed case, min(FP32 rate, intensity x DRAM
bandwidth), where intensity counts each matrix crossing DRAM once, is shown
beside it: it says how far every kernel, the reference too, is from what the
hardware allows.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class SpeedTarget:
    """What one timed size is scored against, in GFLOP/s."""
    intensity: float  # FLOP per compulsory DRAM byte
    bound: float  # the roofline at that intensity (shown, not scored against)
    reference: float  # the part's reference solution at this size on this GPU
    full: float  # full speed points from here (full_at x reference)
    zero: float  # no speed points at or below this (zero_at x reference)

    def fraction(self, achieved: float) -> float:
        """The share of the speed points `achieved` GFLOP/s earns: 0 at or
        below `zero`, 1 at or above `full`, linear in between."""
        if achieved >= self.full:
            return 1.0
        if achieved <= self.zero:
            return 0.0
        return (achieved - self.zero) / (self.full - self.zero)


def speed_target(ceilings, j: int, k: int, l: int, reference_gflops: float, rule) -> SpeedTarget:
    """The targets of a j x k x l multiplication whose reference solution
    reaches `reference_gflops` on a GPU with these ceilings (anything with a
    roofline `bound(intensity)`), under `rule` (assignment.SpeedRule)."""
    if not reference_gflops > 0:
        raise ValueError(f"a reference speed must be positive, not {reference_gflops!r}")
    ai = intensity(j, k, l)
    return SpeedTarget(ai, ceilings.bound(ai), reference_gflops, rule.full_at * reference_gflops,
                       rule.zero_at * reference_gflops)


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


def gflops(flop: float, ms: float) -> float:
    return flop / (ms * 1e6) if ms > 0 else 0.0
