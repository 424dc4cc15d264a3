"""The speed stage: a part's timing cases, timed by the trusted harness with the GPU to itself."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from ...spec.matmul import matmul_flop
from .. import calibration, clocks, counter_hints, traffic
from ..context import Grading, PartState, private_name
from ..diagnose import STATUS_HINTS
from ..launch_checks import HOST_WORK_HINT, check_timed_calls, timed_printing
from ..model import ESTIMATED_RULE, NO_CEILINGS, NO_TARGETS, WORK_ELSEWHERE, Speed
from ..runner import run_harness, verify, write_cases
from ..scoring import CUBLAS, IMPOSSIBLE_FRACTION, gflops, scored_time


def time_parts(g: Grading, runnable: list, ceilings, basis: Optional[calibration.Calibration]) -> None:
    """The speed stage of every part that built, one part after another with
    the GPU to itself, against the GPU's ceilings and speed basis."""
    if not g.options.timing:
        return
    if ceilings is None:
        for s in runnable:
            s.skip_from("speed", NO_CEILINGS)
    elif basis is None:
        for s in runnable:
            s.set("speed", "error", NO_TARGETS)
    else:
        g.progress("speed")
        g.while_timing()
        with g.timed("speed"), g.gpu_lock.exclusive():
            for s in runnable:
                _time_part(g, s, ceilings, basis)


def _time_part(g: Grading, s: PartState, ceilings, basis: calibration.Calibration,
               retimed: bool = False) -> None:
    """Times the part with the trusted harness: its clock is the one scored.
    `retimed`: timing it again, since the GPU throttled the first time."""
    assignment = g.assignment
    if not s.cases_all_passed:
        s.set("speed", "not_run", "not run: speed is measured only when every case is correct")
        return
    if s.work_elsewhere:
        s.set("speed", "not_run", WORK_ELSEWHERE)
        return
    entries = [(c.name, c) for c in s.part.cases["timing"]]
    case_file = write_cases(s.part, entries, g.work / private_name(f"{s.part.id}-timing"), g.seed,
                            timing=assignment.timing, profile=True)
    limit = g.limits["speed"]
    run = run_harness(s.binary, case_file, limit, g.sandbox, trusted=g.trusted, timed=True)
    if run.timed_out:
        s.set("speed", "failed", f"the timed calls did not finish within {limit:.0f} s", run.stderr.strip(),
              run.seconds, [STATUS_HINTS["timeout"]])
        return
    listed = (run.result or {}).get("cases")
    timings = [c.get("timing") for c in (listed if isinstance(listed, list) else []) if isinstance(c, dict)]
    host_work = [p for t in timings for p in check_timed_calls(t)]
    printing = [note for note in map(timed_printing, timings) if note]
    if host_work:
        # Seen only at the timing sizes: the launch checks fail, as they would have on a correctness case.
        s.set("launch", "failed", host_work[0], "\n".join(host_work), hints=[HOST_WORK_HINT])
        s.work_elsewhere = True
        s.set("speed", "not_run", WORK_ELSEWHERE, "", run.seconds)
        return
    verdict = verify(g.tools.verify, case_file)
    failed = [c for c in verdict["cases"] if not c["passed"]]
    if failed:
        reasons = "; ".join(failed[0]["reasons"])
        s.set("speed", "failed", f"the timed calls were not all right: {reasons}", run.stderr.strip(), run.seconds,
              ["Each timed call gets new inputs: a kernel must compute every answer, never reuse an earlier one."])
        return
    readings = clocks.by_case(listed)
    if not retimed and any(c.throttled for c in readings.values()):
        # A GPU at its power or thermal limit slows every kernel: time once more, from the start.
        _time_part(g, s, ceilings, basis, retimed=True)
        return
    fractions, speeds = [], []
    for v in verdict["cases"]:
        target = basis.target(ceilings, s.part, assignment.speed, v["j"], v["k"], v["l"])
        if target is None:
            s.set("speed", "error", f"{NO_TARGETS} at {v['j']}x{v['k']}x{v['l']}", "", run.seconds)
            return
        t = v["timing"]
        choice = scored_time(t)
        achieved = gflops(matmul_flop(v["j"], v["k"], v["l"]), choice.ms)
        fraction = target.fraction(achieved)
        flags = list(choice.flags) + printing[:1]
        reading = readings.get(v["name"], clocks.read_clocks(None))
        if reading.throttled:
            flags.append(clocks.throttled_flag(reading, f"{v['j']}x{v['k']}x{v['l']}"))
            if speeds:  # the headline is the first size's Speed: it shows every size's throttling
                speeds[0].flags.append(flags[-1])
            g.staff_notes.append(clocks.staff_note(s.part.id, f"{v['j']}x{v['k']}x{v['l']}", reading))
        if achieved > IMPOSSIBLE_FRACTION * ceilings.fp32_gflops:
            flags.append(f"{achieved:.0f} GFLOP/s is above this GPU's measured FP32 peak: the timing cannot be "
                         "right, so it earns nothing; a TA will look at it")
            fraction = 0.0
        fractions.append(fraction)
        speeds.append(Speed(
            case=f"{v['j']}x{v['k']}x{v['l']}", gflops=round(achieved, 1), time_ms=round(choice.ms, 4),
            event_ms=t["median_event_ms"], cupti_ms=t["median_cupti_span_ms"], wall_ms=t["median_wall_ms"],
            ceiling_value=round(ceilings.fp32_gflops, 1), bound_gflops=round(target.bound, 1),
            intensity=round(target.intensity, 2),
            reference_gflops=round(target.reference, 1) if target.reference else None, rule=basis.rule,
            full_at=s.part.versus_cublas.full_at if s.part.versus_cublas else assignment.speed.full_at,
            target_gflops=round(target.full, 1), zero_gflops=round(target.zero, 1), fraction=round(fraction, 4),
            flags=flags, versus=target.versus, cublas_gflops=round(target.cublas, 1) if target.cublas else None,
            clocks=dict(reading.to_dict(), retimed=retimed),
        ))
    # Several timing cases combine by geometric mean, so one slow size is felt.
    fraction = math.prod(fractions) ** (1 / len(fractions)) if all(fractions) else 0.0
    s.result.speeds = speeds
    profiled = traffic.profiled_case(listed[-1] if isinstance(listed, list) and listed else {})
    s.result.traffic_note = profiled.note
    last = s.part.cases["timing"][-1]
    s.result.reference_traffic = basis.traffic_of(s.part.id, last.j, last.k, last.l)
    if profiled.traffic is not None:
        measured = listed[-1]  # the profiled case: its launches and the harness's device facts
        s.result.traffic = traffic.with_occupancy(profiled.traffic, measured.get("launches"),
                                                  run.result.get("device"))
        s.result.traffic_hints = counter_hints.hints_for(s.part.id, s.part.title, s.result.traffic,
                                                         s.result.reference_traffic)
    best = dataclasses.replace(speeds[0], fraction=round(fraction, 4))
    s.result.speed = best
    estimated = " (estimated: no reference solutions on this machine)" if basis.rule == ESTIMATED_RULE else ""
    against = "cuBLAS SGEMM" if best.versus == CUBLAS else "the reference solution"
    s.set("speed", "passed",
          f"{best.gflops:.0f} GFLOP/s at {best.case}: {100 * fraction:.0f}% of the speed points "
          f"(full credit from {best.target_gflops:.0f} GFLOP/s = {100 * best.full_at:.0f}% of {against} "
          f"here{estimated})", "", run.seconds)
