"""The speed stage: a part's timing cases, timed by the trusted harness with the GPU to itself.

Each timing case has a time budget: twice the time of a call that earns no
speed points (scoring.give_up_ms). The harness stops timing a case once its
calls are over it, and ends a call still running far past it
(grader/harness/core/timing.h), so a part far slower than its reference
gives the GPU back within seconds. Such a part is scored by the speed rule on
the calls it made, which earn no points, and is told so; the values of those
calls are checked as any others, and a stop is never a wrong answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from typing import Callable, Iterator, Optional

from ...spec.matmul import matmul_flop
from .. import calibration, clocks, counter_availability, counter_hints
from ..context import Grading, PartState, private_name
from ..diagnose import STATUS_HINTS
from ..gpu_turn import LOOK_S, GpuTurnGate
from ..launch_checks import (HOST_WORK_HINT, check_first_timed_calls, check_timed_calls, shared_memory_untouched,
                             timed_printing)
from ..model import ESTIMATED_RULE, NO_CEILINGS, NO_TARGETS, WORK_ELSEWHERE, Speed
from ..runner import ended_well, result_seconds, run_harness, verify, write_cases
from ..scoring import CUBLAS, zero_line_ms
from .speed_rules import case_speed, give_up_budgets, slow_stop, stop_words

# The timing turn's waits, each a phase of the grading's clock (TimingTurn).
WAITING_FOR_TURN, TIMING_RUNS_STARTING, WAITING_FOR_GPU_ALONE = (
    "waiting for the timing turn", "timing runs starting", "waiting for the GPU alone")
# Why a timed part has no counters in its report, by GradeOptions.counters.
COUNTERS_LEFT_OUT = "this grading left the hardware counters out"
COUNTERS_LATER = ("they are read once the GPU is free, after the score; the grader's copy of this report is written "
                  "again then")
# The speed stage's details where a part was timed by one run with the others (_TimedTogether).
TIMED_TOGETHER = "timed by one launcher process with the other parts, their counters read in one profile"
FAR_PAST = "not read: a call ran far past the time at which speed earns no points"
SLOW_STOP_HINT = ("Timing stops as soon as the calls are too slow to earn any speed points, and a call far slower "
                  "than that is ended. Make each call faster than the time named above: is all of the work in your "
                  "kernel, and does each thread do only its share of it?")


def time_parts(g: Grading, runnable: list, ceilings, basis: Optional[calibration.Calibration],
               begun: Optional["TimingTurn"] = None) -> None:
    """The speed stage of every part that built, against the GPU's ceilings
    and speed basis: the parts' timing runs start side by side while the GPU
    is shared, and each is timed in turn with the GPU to itself (gpu_turn.py).
    `begun`: the turn timing_begun started beside the parts' cases."""
    if not g.options.timing:
        return
    if begun is None and ceilings is None:
        for s in runnable:
            s.skip_from("speed", NO_CEILINGS)
        return
    if begun is None and basis is None:
        for s in runnable:
            s.set("speed", "error", NO_TARGETS)
        return
    g.progress("speed")
    g.while_timing()
    if begun is not None:
        begun.time()
        return
    timed = [s for s in runnable if _may_be_timed(s)]
    if on_one_launcher(g, timed):
        with g.timed("speed"), TimingTurn(g, timed, ceilings, basis,
                                          one_run=_TimedTogether(g, timed, ceilings, basis)) as turn:
            turn.time()
        return
    at_once = g.trusted.at_once or len(timed)
    with g.timed("speed"):
        for first in range(0, len(timed), max(1, at_once)):
            with TimingTurn(g, timed[first:first + at_once], ceilings, basis) as turn:
                turn.time()


def times_together(g: Grading) -> bool:
    """Whether a grading's parts may be timed by one launcher process
    (tilelab-part-host --parts): it times several parts, with a tree that
    has the part host, so the build links each as a shared object too."""
    return g.options.timing and len(g.parts) > 1 and g.tools.part_host.is_file()


def on_one_launcher(g: Grading, parts: list) -> bool:
    """Whether these parts' timing runs are one: one process, one CUDA
    context, and one counter profile of all of them after their timed calls,
    whose passes' Start and Stop are paid once instead of once a part (the
    harness's profiles_together.h; docs/measurements.md, "CUPTI's set-up,
    and one process for a hand-in's parts", "One counter profile for a
    hand-in's parts")."""
    return times_together(g) and len(parts) > 1 and all(s.library is not None for s in parts)


@contextmanager
def timing_begun(g: Grading, runnable: list, ceilings, basis: Optional[calibration.Calibration]) \
        -> Iterator[Optional["TimingTurn"]]:
    """The parts' timing turn, begun now, before their cases run: in a check
    of a few parts (context.times_early) each timing run makes its launcher,
    inputs and first call while the cases and sanitizers share the GPU, not
    after them. None where speed will not be measured at all; time_parts
    then says why. A part that turns out not to be timeable is called off
    at its gate."""
    if not g.options.timing or ceilings is None or basis is None or not runnable:
        yield None
        return
    with g.timed("speed"), TimingTurn(g, runnable, ceilings, basis) as turn:
        yield turn


def _why_not_timed(s: PartState) -> Optional[str]:
    if not s.cases_all_passed:
        return "not run: speed is measured only when every case is correct"
    if s.work_elsewhere:
        return WORK_ELSEWHERE
    return None


def _may_be_timed(s: PartState) -> bool:
    """Whether the part's speed may be measured; if not, its stage says why."""
    why = _why_not_timed(s)
    if why is not None:
        s.set("speed", "not_run", why)
    return why is None


class TimingTurn:
    """One timing turn of the GPU for `parts`. Entered, it takes the GPU's
    turn and starts the parts' timing runs side by side on the shared GPU;
    each makes its launcher, inputs and first call and waits at its gate.
    time() then holds the GPU alone and lets them through one after another,
    each with its verdict, before it is let go. While the turn is held no
    other grading's timing run is alive (system/gpu_lock.py). Its waits
    are phases of their own: WAITING_FOR_TURN (another grading holds it),
    TIMING_RUNS_STARTING (until each is at its gate) and
    WAITING_FOR_GPU_ALONE (the runs beside them ending)."""

    def __init__(self, g: Grading, parts: list, ceilings, basis: calibration.Calibration,
                 run: Optional[Callable] = None, may_run: Optional[Callable] = None, one_run=None) -> None:
        """`run`: what each part's run does, run(g, part, ceilings, basis, gate, counters=image)
        (default: _time_part, its timing); `may_run(part)`: whether it may go through its gate
        after all, its stage saying why not (default: _may_be_timed). `one_run`: the parts, each
        one to go through, are served by one run on one launcher instead, which waits at one
        gate: its run(...) as `run`'s, for the first part, then judge(gate) with the GPU alone
        (_TimedTogether)."""
        self._g = g
        self._parts = parts
        self._ceilings, self._basis = ceilings, basis
        self._one_run = one_run
        self._run = one_run.run if one_run is not None else (run or _time_part)
        self._may_run = may_run or _may_be_timed
        self._gates = [GpuTurnGate() for _ in (parts[:1] if one_run is not None else parts)]
        self._pool = ThreadPoolExecutor(max_workers=len(self._gates), thread_name_prefix="tilelab-speed")
        self._runs: list = []
        self._at_gates: Future = Future()
        self._preparing: Optional[threading.Thread] = None
        self._held = ExitStack()

    def __enter__(self) -> "TimingTurn":
        g = self._g
        try:
            # The turn first: no other grading's timing run is alive while these wait at their gates.
            self._held.enter_context(g.held(g.gpu_lock.turn(owner=g), WAITING_FOR_TURN))
            # The runs prepare beside whatever this grading does meanwhile (its cases, in a check).
            self._preparing = threading.Thread(target=self._prepare, name="tilelab-speed-prepare", daemon=True)
            self._preparing.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _prepare(self) -> None:
        g = self._g
        try:
            with g.held(g.gpu_lock.shared(), "waiting to share the GPU"), g.timed(TIMING_RUNS_STARTING):
                image = _counter_image(g, self._ceilings, self._basis)
                self._runs = [self._pool.submit(self._run, g, s, self._ceilings, self._basis, gate, counters=image)
                              for s, gate in zip(self._parts, self._gates)]
                for gate, run in zip(self._gates, self._runs):
                    while not run.done() and not gate.wait_ready(LOOK_S):
                        if gate.called_off:  # the turn is over before this run was ready: it ends
                            wait([run])
            self._at_gates.set_result(None)
        except BaseException as e:  # noqa: BLE001 - raised again where the turn waits for its runs
            self._at_gates.set_exception(e)

    def time(self) -> None:
        """Calls off the runs of parts that may not be timed (their stage says
        why), then, with the GPU alone, lets the others through in turn."""
        g = self._g
        self._at_gates.result()
        if self._one_run is not None:
            with g.held(g.gpu_lock.exclusive(), WAITING_FOR_GPU_ALONE):
                self._gates[0].give()
                self._runs[0].result()
                self._one_run.judge(self._gates[0])
            return
        timed = []
        for s, gate, run in zip(self._parts, self._gates, self._runs):
            if self._may_run(s):
                timed.append((gate, run))
                continue
            gate.close()  # its run ends at its gate (gpu_turn.h), and _time_part leaves its stage alone
            run.result()
        if not timed:
            return
        with g.held(g.gpu_lock.exclusive(), WAITING_FOR_GPU_ALONE):
            for gate, run in timed:
                gate.give()
                run.result()  # its verdict, and any retiming, before the next goes

    def __exit__(self, *exc) -> None:
        try:
            for gate in self._gates:  # a run still at its gate ends there (gpu_turn.h)
                gate.close()
            if self._preparing is not None:
                self._preparing.join()  # every run started is over or was at its gate
            self._pool.shutdown(wait=True)
        finally:
            self._held.close()


def _counter_image(g: Grading, ceilings, basis: calibration.Calibration) -> Optional[str]:
    """The GPU's counter availability image, asked for at most once per GPU
    and calibration while this grading holds its timing turn (counter_availability.py)."""
    uuid = ceilings.device_uuid
    if g.options.counters != "inline" or not uuid or basis.device_uuid != uuid or not basis.fingerprint:
        return None
    return counter_availability.image_for(g.tools.harness, uuid, basis.fingerprint, g.sandbox.gpu_env)


def _may_use_shared_memory(s: PartState) -> bool:
    """Whether the part's kernels may use shared memory, for the counters of a call far over its budget: its
    contract asks for it, or its correctness runs, where they came first (not in a check's early timing), used it."""
    if s.part.shared_memory != "any":
        return True
    return bool(s.harness_result) and not shared_memory_untouched(s.harness_result, [])


def _time_part(g: Grading, s: PartState, ceilings, basis: calibration.Calibration,
               gate: Optional[GpuTurnGate] = None, retimed: bool = False,
               counters: Optional[str] = None) -> None:
    """Times the part with the trusted harness: its clock is the one scored.
    `gate`: where its timed calls wait for the GPU alone; without one the
    caller holds it already. `retimed`: timing it again, since the GPU
    throttled the first time or the first fell short of full speed points
    (_timed_again); a second timing is never timed again. `counters`: the
    GPU's counter availability image, with which the run makes its
    counters' setup before its turn."""
    case_file = _timing_cases(g, s, ceilings, basis, gate, counters)
    run = run_harness(s.binary, case_file, g.limits["speed"], g.sandbox, trusted=g.trusted, timed=True,
                      paused=gate.paused_s if gate else None)
    if gate is not None and gate.called_off:
        return  # the part may not be timed after all: TimingTurn.time says why
    seconds = run.seconds - (gate.paused_s() if gate else 0.0)  # not the wait at its gate
    _judge_timing(g, s, ceilings, basis, case_file, run, seconds, retimed, counters)


def _timing_cases(g: Grading, s: PartState, ceilings, basis: calibration.Calibration,
                  gate: Optional[GpuTurnGate], counters: Optional[str], folder: str = "timing"):
    """The part's timing case file, in a folder of its own named `folder`."""
    assignment = g.assignment
    entries = [(c.name, c) for c in s.part.cases["timing"]]
    return write_cases(s.part, entries, g.work / private_name(f"{s.part.id}-{folder}"), g.seed,
                       timing=assignment.timing, profile=g.options.counters == "inline",
                       profile_shared_memory=_may_use_shared_memory(s),
                       give_up_ms=give_up_budgets(s.part, assignment.speed, ceilings, basis),
                       gate=gate.path if gate else None, counter_availability=counters)


class OnOneLauncher:
    """Several parts' timed runs made one (tilelab-harness CASE_FILE... on
    tilelab-part-host --parts): their case files in turn, one gate before the
    first, one counter profile for all. A part whose run did not end well, and every
    part after it, which that run never began (a kernel's fault may leave the
    context unusable), is run again in a process of its own, as every part
    is where they cannot be together. A subclass says what each part's case
    file is and what each way its part can end means."""

    def __init__(self, g: Grading, parts: list) -> None:
        self._g, self._parts = g, parts
        self._files: list = []
        self._run = None
        self._counters: Optional[str] = None

    def run(self, g: Grading, _first: PartState, _ceilings, _basis, gate: GpuTurnGate,
            counters: Optional[str] = None) -> None:
        """The run, as TimingTurn starts each part's: it waits at `gate` once its first part is ready."""
        self._counters = counters
        self._files = [self._case_file(s, gate if i == 0 else None) for i, s in enumerate(self._parts)]
        host = [g.tools.part_host, "--parts", *(str(s.library) for s in self._parts)]
        self._run = run_harness(self._parts[0].binary, self._files, g.limits["speed"] * len(self._parts),
                                g.sandbox, trusted=g.trusted, timed=True, paused=gate.paused_s, launcher=host)

    def judge(self, gate: GpuTurnGate) -> None:
        """Each part's outcome, with the GPU still alone: from the run where
        it ended well, from a run of its own where it did not."""
        run = self._run
        if run is None or gate.called_off:
            return
        self._ran(run)
        alone = False
        for s, case_file, result in zip(self._parts, self._files, run.results or [None] * len(self._parts)):
            if not alone and not ended_well(result):
                alone = True
                if run.timed_out:  # it had at least its own time limit: the parts before it kept to theirs
                    self._cut_off(s, run)
                    continue
            if alone:
                self._alone(s)
            else:
                self._together(s, case_file, run, result, gate)

    def _case_file(self, s: PartState, gate: Optional[GpuTurnGate]):
        """The part's case file in the run, which waits at `gate` where given."""
        raise NotImplementedError

    def _ran(self, run) -> None:
        """What the run as a whole leaves behind, before its parts are judged."""

    def _cut_off(self, s: PartState, run) -> None:
        """The part the run's time limit ended."""
        raise NotImplementedError

    def _alone(self, s: PartState) -> None:
        """The part run again by a process of its own."""
        raise NotImplementedError

    def _together(self, s: PartState, case_file, run, result: dict, gate: GpuTurnGate) -> None:
        """The part from its `result` in the run."""
        raise NotImplementedError


class _TimedTogether(OnOneLauncher):
    """The timing of several parts by one run, the counters of all in one profile."""

    def __init__(self, g: Grading, parts: list, ceilings, basis: calibration.Calibration) -> None:
        super().__init__(g, parts)
        self._ceilings, self._basis = ceilings, basis

    def _case_file(self, s: PartState, gate: Optional[GpuTurnGate]):
        return _timing_cases(self._g, s, self._ceilings, self._basis, gate, self._counters, "timed-together")

    def _cut_off(self, s: PartState, run) -> None:
        limit = self._g.limits["speed"]
        s.set("speed", "failed", f"the timed calls did not finish within {limit:.0f} s", run.stderr.strip(), limit,
              [STATUS_HINTS["timeout"]])

    def _alone(self, s: PartState) -> None:
        _time_part(self._g, s, self._ceilings, self._basis, counters=self._counters)

    def _together(self, s: PartState, case_file, run, result: dict, gate: GpuTurnGate) -> None:
        seconds = result_seconds(result)
        if s is self._parts[0]:
            seconds = max(0.0, seconds - gate.paused_s())  # not the wait at its gate
        over = seconds > self._g.limits["speed"]  # timed alone, it would have been ended at its limit
        part_run = dataclasses.replace(run, timed_out=over, result=result, results=[result])
        _judge_timing(self._g, s, self._ceilings, self._basis, case_file, part_run, seconds, False, self._counters,
                      TIMED_TOGETHER)


def _judge_timing(g: Grading, s: PartState, ceilings, basis: calibration.Calibration, case_file, run,
                  seconds: float, retimed: bool, counters: Optional[str], details: str = "") -> None:
    """The part's speed stage from its timing run `run` on `case_file`;
    `details`: the stage's where it passes."""
    assignment = g.assignment
    limit = g.limits["speed"]
    if run.timed_out:
        s.set("speed", "failed", f"the timed calls did not finish within {limit:.0f} s", run.stderr.strip(),
              seconds, [STATUS_HINTS["timeout"]])
        return
    listed = (run.result or {}).get("cases")
    timings = [c.get("timing") for c in (listed if isinstance(listed, list) else []) if isinstance(c, dict)]
    host_work = check_first_timed_calls(listed) + [p for t in timings for p in check_timed_calls(t)]
    printing = [note for note in map(timed_printing, timings) if note]
    if host_work:
        # Seen only at the timing sizes: the launch checks fail, as they would have on a correctness case.
        s.set("launch", "failed", host_work[0], "\n".join(host_work), hints=[HOST_WORK_HINT])
        s.work_elsewhere = True
        s.set("speed", "not_run", WORK_ELSEWHERE, "", seconds)
        return
    verdict = verify(g.tools.verify, case_file)
    # A case not timed because an earlier one was stopped as too slow failed nothing.
    timed = [c for c in verdict["cases"] if "not_timed_after" not in c]
    failed = [c for c in timed if not c["passed"]]
    if failed:
        reasons = "; ".join(failed[0]["reasons"])
        s.set("speed", "failed", f"the timed calls were not all right: {reasons}", run.stderr.strip(), seconds,
              ["Each timed call gets new inputs: a kernel must compute every answer, never reuse an earlier one."])
        return
    readings = clocks.by_case(listed)
    stopped = [v for v in timed if slow_stop(v.get("timing"))]
    # A stopped case is slower than twice the time that earns nothing: no throttling explains that.
    if not retimed and not stopped and any(c.throttled for c in readings.values()):
        # A GPU at its power or thermal limit slows every kernel: time once more, from the start.
        _time_part(g, s, ceilings, basis, retimed=True, counters=counters)  # the GPU is this part's already
        return
    fractions, speeds, stopped_words = [], [], []
    for v in timed:
        target = basis.target(ceilings, s.part, assignment.speed, v["j"], v["k"], v["l"])
        if target is None:
            s.set("speed", "error", f"{NO_TARGETS} at {v['j']}x{v['k']}x{v['l']}", "", seconds)
            return
        full_at = s.part.versus_cublas.full_at if s.part.versus_cublas else assignment.speed.full_at
        speed, fraction = case_speed(v, target, ceilings, basis.rule, full_at, printing[:1])
        stop = slow_stop(v["timing"])
        if stop is not None:
            stopped_words.append(stop_words(speed.case, stop, zero_line_ms(matmul_flop(v["j"], v["k"], v["l"]),
                                                                           target.zero)))
        reading = readings.get(v["name"], clocks.read_clocks(None))
        if reading.throttled and not stopped:
            speed.flags.append(clocks.throttled_flag(reading, speed.case))
            if speeds:  # the headline is the first size's Speed: it shows every size's throttling
                speeds[0].flags.append(speed.flags[-1])
            g.staff_notes.append(clocks.staff_note(s.part.id, speed.case, reading))
        speed.clocks = dict(reading.to_dict(), retimed=retimed)
        fractions.append(fraction)
        speeds.append(speed)
    # Several timing cases combine by geometric mean, so one slow size is felt.
    fraction = math.prod(fractions) ** (1 / len(fractions)) if all(fractions) else 0.0
    # A part that earns none is far from its full points, and timing it again would cost the most.
    if not retimed and not stopped and 0 < fraction < 1:
        twice = _timed_again(g, s, ceilings, basis, counters, fraction)
        if twice is None:
            return
        details = "; ".join(filter(None, [details, twice]))
    s.result.speeds = speeds
    last = s.part.cases["timing"][-1]
    s.result.reference_traffic = basis.traffic_of(s.part.id, last.j, last.k, last.l)
    if g.options.counters == "inline":
        counter_hints.take_counters(s, run.result)
    elif g.options.counters == "off":
        s.result.traffic_note = COUNTERS_LEFT_OUT
    elif any(slow_stop(v["timing"]).rule != "median" for v in stopped):
        s.result.traffic_note = FAR_PAST  # as the harness says inline: its calls are not repeated for them
    else:
        s.result.counters_later = hashlib.sha256(s.source.read_bytes()).hexdigest()
        s.result.traffic_note = COUNTERS_LATER
    best = dataclasses.replace(speeds[0], fraction=round(fraction, 4))
    s.result.speed = best
    if stopped_words:
        left = [f"{c['j']}x{c['k']}x{c['l']}" for c in verdict["cases"] if "not_timed_after" in c]
        s.set("speed", "passed", f"{stopped_words[0]}; 0% of the speed points"
              + (f" ({', '.join(left)} not timed)" if left else ""), details, seconds, [SLOW_STOP_HINT])
        return
    estimated = " (estimated: no reference solutions on this machine)" if basis.rule == ESTIMATED_RULE else ""
    against = "cuBLAS SGEMM" if best.versus == CUBLAS else "the reference solution"
    s.set("speed", "passed",
          f"{best.gflops:.0f} GFLOP/s at {best.case}: {100 * fraction:.0f}% of the speed points "
          f"(full credit from {best.target_gflops:.0f} GFLOP/s = {100 * best.full_at:.0f}% of {against} "
          f"here{estimated})", details, seconds)


# What a part's timing run leaves on its result besides its speed.
_READ_BY_A_TIMING = ("traffic", "traffic_note", "traffic_hints", "counters_later", "reference_traffic")


def _timed_again(g: Grading, s: PartState, ceilings, basis: calibration.Calibration, counters: Optional[str],
                 first: float) -> Optional[str]:
    """Times a part short of its full speed points once more, with the GPU
    still alone: what shares the host (another GPU's gradings, through the
    driver) can slow a timed call but never speed it up, so the faster timing
    is the kernel's. None where the second timing's verdict stands: it was
    faster, or it found the calls wrong or their work elsewhere. Else the
    second leaves no trace, and what the first's stage details add: both
    timings' shares of the points."""
    notes = len(g.staff_notes)
    before = {name: getattr(s.result, name) for name in _READ_BY_A_TIMING}
    _time_part(g, s, ceilings, basis, retimed=True, counters=counters)
    again = s.result.speed
    if s.stage("speed").status != "passed" or s.work_elsewhere:
        return None
    if again is not None and again.fraction >= first:
        stage = s.stage("speed")
        s.result.stages["speed"] = dataclasses.replace(stage, details="; ".join(
            filter(None, [stage.details, timed_twice(first, again)])))
        return None
    del g.staff_notes[notes:]
    for name, value in before.items():  # the first's counters, not the second's, go with the first's timing
        setattr(s.result, name, value)
    return timed_twice(first, again)


def timed_twice(first: float, again: Optional[Speed]) -> str:
    """The speed stage's details where a part short of full speed points was timed twice."""
    second = again.fraction if again is not None else 0.0
    return (f"timed twice, since the first fell short of full speed points: {100 * first:.1f} % then "
            f"{100 * second:.1f} % of them; the faster is scored")
