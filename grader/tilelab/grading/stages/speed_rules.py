"""How a timed size is scored and told: its time budget, the harness's stop
when the calls are too slow to earn speed points, and its Speed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ...spec.matmul import matmul_flop
from ...text.numbers import fmt_ms
from .. import calibration
from ..model import Speed
from ..scoring import IMPOSSIBLE_FRACTION, give_up_ms, gflops, scored_time, zero_line_ms

STOP_RULES = ("median", "one_call", "call_limit")  # grader/harness/core/timing.h


def give_up_budgets(part, rule, ceilings, basis: calibration.Calibration) -> dict:
    """The time budget of one call at each of the part's timing sizes, by
    case name (scoring.give_up_ms); a size without a target has none."""
    budgets = {}
    for case in part.cases["timing"]:
        target = basis.target(ceilings, part, rule, case.j, case.k, case.l)
        if target is not None and target.zero > 0:
            budgets[case.name] = give_up_ms(matmul_flop(case.j, case.k, case.l), target.zero)
    return budgets


@dataclass(frozen=True)
class SlowStop:
    """Why the harness stopped timing a case (its result's "stop")."""

    rule: str  # one of STOP_RULES
    ms: float  # the median of the timed calls, the one call, or the time a call was waited for
    calls: int  # every call at the case's size, its first and the one ended included


def slow_stop(timing) -> Optional[SlowStop]:
    """The stop of a timing verdict (tilelab-verify passes the harness's
    through), None where timing was not stopped. Read defensively: the
    result comes from a process that ran beside student code."""
    if not isinstance(timing, dict) or timing.get("stopped_slow") is not True:
        return None
    stop = timing.get("stop") if isinstance(timing.get("stop"), dict) else {}
    ms, calls = stop.get("ms"), stop.get("calls")
    return SlowStop(stop.get("rule") if stop.get("rule") in STOP_RULES else "median",
                    float(ms) if _number(ms) and math.isfinite(ms) and ms > 0 else 0.0,
                    calls if isinstance(calls, int) and not isinstance(calls, bool) and calls > 0 else 0)


def _number(value) -> bool:
    """A JSON number, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def stop_words(case: str, stop: SlowStop, zero_ms: float) -> str:
    """What a student reads of a stopped case: after how many calls, how
    long they took, and the time of a call that earns no points."""
    after = f"after {stop.calls} call{'s' if stop.calls != 1 else ''} " if stop.calls else ""
    if stop.rule == "call_limit":
        which = "the last" if stop.calls > 1 else "a call"
        took = f"{which} was still running after {stop.ms / 1000:.1f} s and was ended"
    elif stop.rule == "one_call":
        took = f"one took {fmt_ms(stop.ms)} ms"
    else:
        took = f"each took about {fmt_ms(stop.ms)} ms"
    return (f"timing stopped {after}at {case}: {took}, slower than the {fmt_ms(zero_ms)} ms at which speed earns "
            "no points")


def case_speed(v: dict, target, ceilings, rule: str, full_at: float, flags: list = ()) -> tuple:
    """(Speed, fraction of the speed points) of one timed size, from
    tilelab-verify's verdict `v` on it: its median timed call against
    `target` (scoring.SpeedTarget), or, where the harness stopped timing it
    as too slow, the time that stopped it, for no points and said so."""
    t = v["timing"]
    case = f"{v['j']}x{v['k']}x{v['l']}"
    flop = matmul_flop(v["j"], v["k"], v["l"])
    choice = scored_time(t)
    flags = list(choice.flags) + list(flags)
    ms = choice.ms
    stop = slow_stop(t)
    if stop is not None:
        ms = stop.ms or ms
        flags.append(stop_words(case, stop, zero_line_ms(flop, target.zero)))
    achieved = gflops(flop, ms)
    fraction = 0.0 if stop is not None else target.fraction(achieved)
    if achieved > IMPOSSIBLE_FRACTION * ceilings.fp32_gflops:
        flags.append(f"{achieved:.0f} GFLOP/s is above this GPU's measured FP32 peak: the timing cannot be "
                     "right, so it earns nothing; a TA will look at it")
        fraction = 0.0
    return Speed(
        case=case, gflops=round(achieved, 1), time_ms=round(ms, 4),
        event_ms=t["median_event_ms"], cupti_ms=t["median_cupti_span_ms"], wall_ms=t["median_wall_ms"],
        ceiling_value=round(ceilings.fp32_gflops, 1), bound_gflops=round(target.bound, 1),
        intensity=round(target.intensity, 2),
        reference_gflops=round(target.reference, 1) if target.reference else None, rule=rule,
        full_at=full_at, target_gflops=round(target.full, 1), zero_gflops=round(target.zero, 1),
        fraction=round(fraction, 4), flags=flags, versus=target.versus,
        cublas_gflops=round(target.cublas, 1) if target.cublas else None,
    ), fraction
