"""A part's speed in words: what it reached, what earns full credit and
nothing, against the reference solution or cuBLAS, and why.

Shared by the reports (part_view.py) and Gradescope's speed test
(gradescope.py), so the two explain a speed score alike.
"""

from __future__ import annotations

import math
from typing import Sequence

from ..grading.clocks import throttled_words
from ..grading.model import ESTIMATED_RULE, PartResult, Speed
from ..grading.scoring import CUBLAS
from ..text.numbers import fmt_gflops, fmt_intensity, fmt_ms, fmt_percent, fmt_points


def positive(x) -> bool:
    """A figure that was measured: a finite number above 0."""
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def full_credit_words(speed: Speed) -> str:
    """The full-credit target both ways: against the hardware and against
    what it is scored by on the same GPU (the reference solution, or cuBLAS)."""
    estimated = " (estimated)" if speed.rule == ESTIMATED_RULE else ""
    against = "cuBLAS SGEMM" if speed.versus == CUBLAS else "the reference solution"
    return (f"{fmt_gflops(speed.target_gflops)} GFLOP/s = {fmt_percent(speed.target_gflops / speed.ceiling_value)} "
            f"of this GPU's FP32 roof = {fmt_percent(speed.full_at)} of {against} here{estimated}")


def reference_words(speed: Speed) -> str:
    """Where the reference solution's figure comes from."""
    if not positive(speed.reference_gflops):
        return "not timed on this GPU"
    if speed.rule == ESTIMATED_RULE:
        return (f"about {fmt_gflops(speed.reference_gflops)} GFLOP/s: an estimate, since this machine has no "
                "reference solutions to time (its share of the FP32 roof on the course's grading GPU, applied to "
                "this one); the grader times the real reference on its own GPU")
    return f"{fmt_gflops(speed.reference_gflops)} GFLOP/s, timed by the grader on this GPU the same way"


def timed_sizes(part: PartResult) -> list:
    """Every timed size's Speed, each with its own share of the points
    (part.speed alone in a result written before sizes were kept apart)."""
    return list(part.speeds) or ([part.speed] if part.speed is not None else [])


def cublas_size_words(speed: Speed, with_time: bool = False) -> str:
    """One timed size of a part scored against cuBLAS: what it reached, what
    cuBLAS and the reference solution reach there."""
    estimated = " (estimated)" if speed.rule == ESTIMATED_RULE else ""
    text = f"{fmt_gflops(speed.gflops)} GFLOP/s"
    if with_time:
        text += f" ({fmt_ms(speed.time_ms)} ms per call)"
    if positive(speed.cublas_gflops):
        text += (f" = {fmt_percent(speed.of_cublas)} of cuBLAS SGEMM ({fmt_gflops(speed.cublas_gflops)} GFLOP/s"
                 f"{estimated}) at {speed.case}")
    else:
        text += f" at {speed.case}"
    if positive(speed.reference_gflops):
        share = (f", {fmt_percent(speed.reference_gflops / speed.cublas_gflops)} of cuBLAS"
                 if positive(speed.cublas_gflops) else "")
        text += f"; the reference solution reaches {fmt_gflops(speed.reference_gflops)}{estimated}{share}"
    else:
        text += "; the reference solution was not timed on this GPU"
    return text


def cublas_floor_words(sizes: list) -> str:
    """Where a part scored against cuBLAS earns nothing: the textbook tiled
    kernel's reference at each size (half the full-credit target where that
    is lower, on a GPU where the textbook kernel comes near cuBLAS)."""
    halves = all(abs(s.zero_gflops - 0.5 * s.target_gflops) < 0.1 for s in sizes)
    why = ("half the full-credit target" if halves else
           "the textbook tiled kernel's reference solution here: what the chapter already gives earns nothing")
    return ", ".join(f"≤ {fmt_gflops(s.zero_gflops)} GFLOP/s at {s.case}" for s in sizes) + f" ({why})"


def _earned_words(speed: Speed, part: PartResult, sizes: int) -> str:
    points = f"{fmt_points(part.speed_score)} / {fmt_points(part.speed_max)}"
    combined = " (the sizes' shares combined by geometric mean)" if sizes > 1 else ""
    if abs(part.speed_score - speed.fraction * part.speed_max) < 0.01:
        return f"{fmt_percent(speed.fraction)} of the speed points ({points}){combined}"
    # The points can be withheld after timing (a failed sanitizer, say).
    return (f"{points} speed points: the speed alone would earn {fmt_percent(speed.fraction)} of them{combined}, "
            f"but they were withheld")


def _roofline_words(speed: Speed) -> str:
    return (f"{fmt_gflops(speed.bound_gflops)} GFLOP/s at an intensity of {fmt_intensity(speed.intensity)} "
            f"FLOP/byte, set by the FP32 FMA rate measured on this GPU ({fmt_gflops(speed.ceiling_value)} GFLOP/s)")


def cublas_speed_rows(part: PartResult, staff: bool = False) -> list:
    """(label, value) rows of a part scored against cuBLAS: each timed size
    against cuBLAS and the reference, then what earns credit."""
    sizes = timed_sizes(part)
    speed = part.speed
    estimated = " (estimated)" if speed.rule == ESTIMATED_RULE else ""
    rows = []
    for s in sizes:
        share = f"; {fmt_percent(s.fraction)} of the speed points at this size" if len(sizes) > 1 else ""
        rows.append((f"at {s.case}", cublas_size_words(s, with_time=True) + share))
    rows += [
        ("full credit from", f"{fmt_percent(speed.full_at)} of cuBLAS SGEMM at each size: "
                             + ", ".join(f"{fmt_gflops(s.target_gflops)} GFLOP/s at {s.case}" for s in sizes)
                             + estimated),
        ("no credit at", cublas_floor_words(sizes)),
        ("roofline bound", _roofline_words(speed)),
        ("earned", _earned_words(speed, part, len(sizes))),
    ]
    if staff:
        rows += [(f"times at {s.case}", f"CUDA events {fmt_ms(s.event_ms)} ms, CUPTI {fmt_ms(s.cupti_ms)} ms, "
                                        f"wall clock {fmt_ms(s.wall_ms)} ms") for s in sizes]
    return rows


def speed_rows(speed: Speed, part: PartResult, staff: bool) -> list:
    """(label, value) rows: what was measured, what earns credit, and why."""
    if speed.versus == CUBLAS:
        return cublas_speed_rows(part, staff)
    rows = [
        ("timed case", speed.case),
        ("achieved", f"{fmt_gflops(speed.gflops)} GFLOP/s ({fmt_ms(speed.time_ms)} ms per call)"),
        ("full credit from", full_credit_words(speed)),
        ("no credit at", f"≤ {fmt_gflops(speed.zero_gflops)} GFLOP/s "
                         f"({fmt_percent(speed.zero_gflops / speed.reference_gflops)} of the reference solution)"),
        ("reference solution", reference_words(speed)),
        ("roofline bound", _roofline_words(speed)),
        ("earned", _earned_words(speed, part, 1)),
    ]
    if staff:
        rows.append(("times", f"CUDA events {fmt_ms(speed.event_ms)} ms, CUPTI {fmt_ms(speed.cupti_ms)} ms, "
                              f"wall clock {fmt_ms(speed.wall_ms)} ms"))
    return rows


def speed_verdict(speed: Speed, sizes: Sequence[Speed] = ()) -> str:
    """One sentence on where the kernel stands (`sizes`: every timed size's
    Speed). Follows the fraction, not the GFLOP/s alone: an implausible timing
    earns nothing however fast it looks, and one the GPU throttled twice is
    not called slow."""
    if speed.fraction <= 0 and speed.gflops > speed.zero_gflops:
        return "This timing earns no speed points: see the integrity notes."
    if speed.fraction >= 1:
        return "At or above the full-credit target."
    if throttled := throttled_words([speed.clocks] + [s.clocks for s in sizes]):
        return (f"Not judged here: the GPU was {throttled} while this part was timed, twice, so the time may "
                "understate your kernel. It is scored as measured for now, and a TA will look at it.")
    if speed.fraction <= 0:
        if speed.versus == CUBLAS:
            return ("At or below the no-credit threshold at some size: no faster there than the textbook tiled "
                    "kernel. The handout's part 6 shows the way up, starting with a tile of P per thread held in "
                    "registers.")
        return ("At or below the no-credit threshold: far slower than the reference solution on the same GPU. "
                "Look for the technique this part teaches (how the threads map to the matrix, what is staged in "
                "shared memory).")
    return "Between the no-credit threshold and the full-credit target: partial credit, in proportion."
