"""One grading of one hand-in: the stages, in order.

Per part: static checks -> build -> correctness -> launch checks -> memcheck
-> racecheck -> speed, then the questions. No stage waits for one it does not
need: the GPU probe runs beside the static checks and the build, the parts'
cases and sanitizers share the GPU while the targets are found, and each part
is timed alone last (in a check of a few parts its timing run begins beside
its cases: context.times_early). Every run has a time limit; a part that
fails, hangs or crashes costs only itself. Without a GPU each GPU stage is
reported as not run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Optional

from ..system.atomic import write_atomically
from ..system.gpu_lock import GpuLock
from ..system.sandbox import Sandbox
from .context import Grading, new_part_state, open_grading, times_early
from .model import NO_GPU, GradeResult
from .options import GradeOptions
from .stages.build_parts import build_parts, check_sources
from .stages.cases import run_cases
from .stages.device import GpuSide
from .stages.early_runs import EarlyRuns, begins_runs_early
from .stages.finish import finish_parts, grade_questions
from .stages.speed import time_parts, timing_begun
from .trusted_harness import KeptServices


def grade(submission: Path, options: GradeOptions, *, sandbox: Optional[Sandbox] = None,
          gpu_lock: Optional[GpuLock] = None, progress: Optional[Callable[[str], None]] = None,
          while_timing: Optional[Callable[[], None]] = None, kept: Optional[KeptServices] = None) -> GradeResult:
    """Grades `submission` (a folder of part files and answers.yaml).

    sandbox: where student code runs (default: chosen for the options; context._sandbox_for).
    gpu_lock: shared with the gradings beside this one on the same GPU.
    progress: told each stage as it starts. while_timing: called as the
    speed stage starts, work for the grader's CPU while the GPU times parts.
    kept: a watch's services, kept from one check to the next (trusted_harness.KeptServices).
    """
    g = open_grading(submission, options, sandbox=sandbox, gpu_lock=gpu_lock, progress=progress,
                     while_timing=while_timing, kept=kept)
    try:
        return _stages(g)
    finally:
        g.close()


def _stages(g: Grading) -> GradeResult:
    try:
        return _stages_in_order(g)
    finally:
        if g.early is not None:
            g.early.close()


def _stages_in_order(g: Grading) -> GradeResult:
    states = [new_part_state(p, g.submission, g.sets) for p in g.parts]
    gpu_side = GpuSide(g) if states else None
    if states:
        g.progress("static checks, then the build")
    with g.timed("static checks"):
        check_sources(g, states)
    if gpu_side is not None and begins_runs_early(g, gpu_side):
        g.early = EarlyRuns(g, g.tools.part_host)
    with g.timed("build"):
        built_for = build_parts(g, states, gpu_side.capability if gpu_side else lambda: None)
    gpu = gpu_side.device() if gpu_side else None
    probed = gpu.get("compute_capability") if isinstance(gpu, dict) else None
    if built_for is not None and probed is not None and built_for != probed:
        # Built for the capability a probe found on this host before (stages/device.py), and the GPU is
        # another now: every part from the start, for the GPU probed.
        if g.early is not None:
            g.early.close()  # they wait for shared objects built for the other GPU
            g.early = None
        states = [new_part_state(p, g.submission, g.sets) for p in g.parts]
        with g.timed("static checks"):
            check_sources(g, states)
        with g.timed("build"):
            build_parts(g, states, lambda: probed)
    runnable = [s for s in states if s.binary is not None]
    ceilings = basis = None
    if gpu is None:
        for s in runnable:
            s.skip_from("correctness", NO_GPU)
    elif times_early(g.options, g.parts):
        ceilings, basis = gpu_side.targets()
        with timing_begun(g, runnable, ceilings, basis) as turn:
            run_cases(g, runnable)
            time_parts(g, runnable, ceilings, basis, turn)
    else:
        run_cases(g, runnable)
        ceilings, basis = gpu_side.targets()
        time_parts(g, runnable, ceilings, basis)
    finish_parts(g, states, gpu)
    answers = grade_questions(g)
    return GradeResult(
        assignment=g.assignment.name,
        mode=g.options.mode,
        submission=str(g.submission),
        seed=g.seed,
        gpu=gpu,
        ceilings=ceilings.summary() if ceilings else None,
        parts=[s.result for s in states],
        started=g.started,
        seconds=round(time.monotonic() - g.clock.zero, 3),
        timings=g.clock.timings(),
        spans=g.clock.spans(),
        notes=g.notes,
        title=g.assignment.title,
        answers=answers,
        calibration=basis.summary(g.assignment, ceilings) if basis else None,
        staff_notes=g.staff_notes,
    )


def write_detailed_json(result: GradeResult, path: Path) -> None:
    write_atomically(path, json.dumps(result.to_dict(), indent=2))
