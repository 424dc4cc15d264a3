"""A grading's counters, read after it: at a deadline a grading may leave
each timed part's hardware counters for later (GradeOptions.counters
"later"), so that its turn with the GPU alone holds only the timed calls.
Once no grading waits for the GPU, read_later builds the parts again (the
build cache has them) and reads their counters in a timing turn of their
own: a run makes the first part's first call at its last timing size while
the GPU is shared, then waits at its gate and reads the counters with the
GPU alone (grader/harness/core/harness.cu). Where the hand-in's parts can
be timed by one launcher, one run reads them all, its CUPTI session paying
its set-up once (_ReadTogether); else each part has a run of its own. The
counters change no points: only the parts' traffic, its hints and the note
that it was still to come change."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Optional

from ..system.gpu_lock import GpuLock
from ..system.sandbox import Sandbox
from .context import Grading, PartState, new_part_state, open_grading, private_name
from .counter_hints import take_counters
from .gpu_turn import GpuTurnGate
from .model import GradeResult
from .options import GradeOptions
from .runner import run_harness, write_cases
from .stages.build_parts import build_parts, check_sources
from .stages.device import GpuSide
from .stages.speed import OnOneLauncher, TimingTurn, on_one_launcher

NOT_BUILT_AGAIN = "the part did not build again when they were to be read"
CHANGED = "the part file changed after it was graded"
NO_GPU_LATER = "no GPU could be had when they were to be read"
NOT_READ = "the grader could not read them after the grading"
# The staff log of a run that read several parts' counters (_ReadTogether).
TOGETHER_LOG = "counters-together.log"


def give_up(result: GradeResult, why: str = NOT_READ) -> list:
    """Leaves none of `result`'s counters pending without reading them: each
    part that waited for its counters says `why` there are none instead (its
    report no longer promises them). Returns the ids of those parts."""
    waiting = [p for p in result.parts if p.counters_later]
    for part in waiting:
        part.counters_later, part.traffic_note = "", why
    return [p.id for p in waiting]


def read_later(submission: Path, result: GradeResult, options: GradeOptions, *,
               sandbox: Optional[Sandbox] = None, gpu_lock: Optional[GpuLock] = None) -> list:
    """Reads into `result` the counters of its parts that were left for
    later, each part's traffic and hints, or a note saying why there are
    none; none of them is left pending. `options`: the grading's (its
    out_dir gets the staff logs). Returns the ids of the parts read."""
    waiting = {p.id: p for p in result.parts if p.counters_later}
    if not waiting:
        return []
    opt = options.replace(mode=result.mode, seed=result.seed, parts=tuple(waiting), questions=False,
                          answers_only=False, counters="inline")
    g = open_grading(submission, opt, sandbox=sandbox, gpu_lock=gpu_lock)
    try:
        states = []
        for p in g.parts:
            # Counters of the code graded, or none: the file may have changed since, or be gone.
            if _digest(g.submission / p.file) == waiting[p.id].counters_later:
                states.append(new_part_state(p, g.submission, g.sets))
            else:
                changed = waiting.pop(p.id)
                changed.counters_later, changed.traffic_note = "", CHANGED
        gpu_side = GpuSide(g)
        check_sources(g, states)
        build_parts(g, states, gpu_side.capability)
        ceilings, basis = gpu_side.targets() if gpu_side.device() else (None, None)
        built = [s for s in states if s.binary is not None]
        for s in built:
            s.result.reference_traffic = waiting[s.part.id].reference_traffic
        on_gpu = bool(built) and ceilings is not None and basis is not None
        if on_gpu:
            one_run = _ReadTogether(g, built) if on_one_launcher(g, built) else None
            with g.timed("counters"), TimingTurn(g, built, ceilings, basis, run=_read_counters,
                                                 may_run=lambda s: True, one_run=one_run) as turn:
                turn.time()
        for s in states:
            part = waiting[s.part.id]
            part.counters_later = ""
            if s.binary is None:
                part.traffic_note = NOT_BUILT_AGAIN
            elif not on_gpu:
                part.traffic_note = NO_GPU_LATER
            else:
                part.traffic, part.traffic_hints, part.traffic_note = (s.result.traffic, s.result.traffic_hints,
                                                                       s.result.traffic_note)
        return [s.part.id for s in built]
    finally:
        g.close()


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _counter_cases(g: Grading, s: PartState, gate: Optional[GpuTurnGate], counters: Optional[str],
                   folder: str = "counters") -> Path:
    """The case file that reads the part's counters at its last timing size,
    in a folder of its own named `folder`; its run waits at `gate` if given."""
    last = s.part.cases["timing"][-1]
    return write_cases(s.part, [(last.name, last)], g.work / private_name(f"{s.part.id}-{folder}"), g.seed,
                       profile=True, gate=gate.path if gate else None, counter_availability=counters, output=False)


def _read_counters(g: Grading, s: PartState, ceilings, basis, gate: Optional[GpuTurnGate],
                   counters: Optional[str] = None) -> None:
    """One part's counters at its last timing size, read by a run of its own
    with the GPU alone once `gate` gives it (without one, the caller holds it
    already); `counters`: the GPU's counter availability image (speed._time_part
    reads them the same way, before its timed calls)."""
    case_file = _counter_cases(g, s, gate, counters)
    run = run_harness(s.binary, case_file, g.limits["speed"], g.sandbox, trusted=g.trusted, timed=True,
                      paused=gate.paused_s if gate else None)
    if gate is not None and gate.called_off:
        return
    _log(g, f"{s.part.id}-counters.log", run)
    if run.timed_out:
        s.result.traffic_note = _did_not_finish(g)
        return
    take_counters(s, run.result)


class _ReadTogether(OnOneLauncher):
    """The counters of several parts read by one run, as speed._TimedTogether times them."""

    def _case_file(self, s: PartState, gate: Optional[GpuTurnGate]) -> Path:
        return _counter_cases(self._g, s, gate, self._counters, "counters-together")

    def _ran(self, run) -> None:
        _log(self._g, TOGETHER_LOG, run)

    def _cut_off(self, s: PartState, run) -> None:
        s.result.traffic_note = _did_not_finish(self._g)

    def _alone(self, s: PartState) -> None:
        _read_counters(self._g, s, None, None, None, counters=self._counters)

    def _together(self, s: PartState, case_file, run, result: dict, gate: GpuTurnGate) -> None:
        take_counters(s, result)


def _did_not_finish(g: Grading) -> str:
    return f"the part's call did not finish within {g.limits['speed']:.0f} s"


def _log(g: Grading, name: str, run) -> None:
    (g.logs / name).write_text(f"exit {run.exit_code} signal {run.signal} timed out {run.timed_out}\n"
                               f"--- stderr\n{run.stderr}\n")
