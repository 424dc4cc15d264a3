"""The stages that share the GPU: every part's correctness cases, launch
checks and sanitizer runs at once; a part whose runs may have been
disturbed by runs beside it is run again alone."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..context import Grading, PartState, private_name
from ..launch_checks import check_launches, shared_memory_untouched
from ..model import Stage
from ..runner import exit_codes, write_cases
from ..sanitizer import (CHECKED_TOGETHER, NO_SHARED_MEMORY, NOT_RUN_AFTER_TIMEOUT, run_sanitizer, run_together,
                         sanitizer_path)
from .cases_together import correct_together, together_parts
from .correctness import run_correctness, write_staff_log


def run_cases(g: Grading, runnable: list) -> None:
    """The correctness, launch, memcheck and racecheck stages of every part that built."""
    g.progress("correctness" + (" and compute-sanitizer" if g.options.sanitizers else ""))
    codes = exit_codes(g.tools.verify)
    with g.held(g.gpu_lock.shared(cases_of=g), "waiting to share the GPU"):
        disturbed = _shared_gpu_runs(g, runnable, codes, g.options.jobs)
    if disturbed:
        # Crashed or could not start: perhaps starved by a run beside it (a
        # fork bomb in another part, or in another hand-in of the batch, holds
        # the sandbox user's process limit). Each such part is run again with
        # the GPU to itself, nothing of anybody else beside it, and that run
        # is its verdict.
        g.progress("running again alone: " + ", ".join(s.part.id for s in disturbed))
        with g.timed("runs again alone"), g.gpu_lock.exclusive():
            for s in disturbed:
                _shared_gpu_runs(g, [s], codes, 1)


def _shared_gpu_runs(g: Grading, runnable: list, codes: dict, workers: int) -> list:
    """Every part's correctness runs (then its launch checks) and sanitizer
    runs, `workers` at a time: they may share the GPU, and none waits for
    another. A part whose correctness run times out hangs: its sanitizer
    runs are called off (cancel) and reported not run. Returns the parts
    whose runs may have been disturbed by runs beside them (runner.
    may_be_disturbed): run_cases runs those again, alone. `codes`: the
    harness's exit codes (runner.exit_codes).

    Racecheck finds shared-memory hazards only: when the correctness runs
    show that no launch of the part had shared memory, on the racecheck
    cases' sizes among others, its run is called off and the stage passes
    for that reason (racecheck costs about twice the naive part's correctness
    run; measured: docs/measurements-archive.md, "Fast feedback, continued:
    fewer waits on the critical path").

    Where the parts were also linked as shared objects, their cases run on
    one launcher first (cases_together.py), and each tool checks them all in
    one run (sanitizer.run_together), called off if a part hangs; a run that
    does not prove a part right, or every part clean, is followed by a run
    of each such part's own, as without."""
    hangs = {s.part.id: threading.Event() for s in runnable}
    calls_off = {(s.part.id, tool): threading.Event() for s in runnable for tool in ("memcheck", "racecheck")}
    disturbed: set = set()
    no_shared_memory: set = set()
    # Linked as shared objects where the build was asked to (build_parts.py: sanitizes_together).
    together = [s for s in runnable if s.library is not None] if sanitizer_path() else []
    together = together if len(together) > 1 else []
    a_part_hangs = threading.Event()  # calls off the runs of the parts together

    def correctness(s: PartState) -> None:
        with g.timed("correctness"):
            if run_correctness(g, s, codes):
                disturbed.add(s.part.id)
        after_correctness(s)

    def after_correctness(s: PartState) -> None:
        """What the part's correctness verdict decides: a hang, its launch checks, racecheck's call-off."""
        if any(c.status == "timeout" for c in s.result.cases):
            hangs[s.part.id].set()
            a_part_hangs.set()
            for tool in ("memcheck", "racecheck"):
                calls_off[s.part.id, tool].set()
        with g.timed("launch checks"):
            _launch_checks(s)
        sizes = [(c.j, c.k, c.l) for c in s.part.cases["racecheck"]]
        if (s.stage("correctness").status == "passed" and s.stage("launch").status == "passed"
                and shared_memory_untouched(s.harness_result, sizes)):
            no_shared_memory.add(s.part.id)
            calls_off[s.part.id, "racecheck"].set()

    def correctness_together() -> None:
        with g.timed("correctness"):
            settled = correct_together(g, one_launcher, codes, a_part_hangs)
        for s in settled:
            after_correctness(s)
        rest = [s for s in one_launcher if s not in settled]
        with ThreadPoolExecutor(max_workers=max(1, min(len(rest), workers))) as each:
            for done in [each.submit(correctness, s) for s in rest]:
                done.result()

    def sanitizer_cases(s: PartState, tool: str, folder: Path) -> Path:
        entries = [(c.name, c) for c in s.part.cases[tool]]
        return write_cases(s.part, entries, folder, g.seed, record_launches=False)

    def sanitize(s: PartState, tool: str) -> None:
        if tool == "racecheck" and s.part.id in no_shared_memory:
            s.result.stages[tool] = Stage(tool, "passed", NO_SHARED_MEMORY)  # known before its turn came
            return
        case_file = sanitizer_cases(s, tool, g.work / private_name(f"{s.part.id}-{tool}"))
        with g.timed("sanitizers"):
            stage, maybe = run_sanitizer(tool, s.binary, case_file, limit, g.sandbox, calls_off[s.part.id, tool])
        s.result.stages[tool] = stage
        if maybe:
            disturbed.add(s.part.id)

    def sanitize_together(tool: str) -> None:
        folder = g.work / private_name(f"{tool}-together")
        parts = [(s.library, sanitizer_cases(s, tool, folder / s.part.id)) for s in together]
        with g.timed("sanitizers"):
            run, clean = run_together(tool, g.tools.part_host, parts, folder, limit, g.sandbox, a_part_hangs)
        write_staff_log(g, f"{tool}-together", run)
        if clean:
            for s in together:
                s.result.stages[tool] = Stage(tool, "passed", f"{tool}: no errors", CHECKED_TOGETHER,
                                              round(run.seconds, 3))
            return
        with ThreadPoolExecutor(max_workers=max(1, min(len(together), workers))) as each:
            for done in [each.submit(sanitize, s, tool) for s in together]:
                done.result()

    limit = g.limits["sanitizer"]
    one_launcher = together_parts(g, runnable)  # their cases in one run, where it proves them right
    jobs = [(correctness_together, ())] if one_launcher else []
    jobs += [(correctness, (s,)) for s in runnable if s not in one_launcher]
    if g.options.sanitizers:
        # The longer runs first, so that none of them is left to start last
        # when there are more runs than workers (a racecheck run takes about
        # twice a memcheck run; measured: docs/measurements-archive.md, "Fast
        # feedback: where a grading's time goes").
        for tool in ("racecheck", "memcheck"):
            if together:
                jobs.append((sanitize_together, (tool,)))
            jobs += [(sanitize, (s, tool)) for s in runnable if s not in together]
    # Correctness first: its verdicts are shown as soon as they are known.
    with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), workers))) as pool:
        for done in [pool.submit(fn, *args) for fn, args in jobs]:
            done.result()
    for s in runnable:
        if hangs[s.part.id].is_set():
            for tool in ("memcheck", "racecheck"):
                s.set(tool, "not_run", NOT_RUN_AFTER_TIMEOUT)
        elif g.options.sanitizers and s.part.id in no_shared_memory and s.stage("racecheck").status != "failed":
            s.result.stages["racecheck"] = Stage("racecheck", "passed", NO_SHARED_MEMORY, "",
                                                 s.stage("racecheck").seconds)
    return [s for s in runnable if s.part.id in disturbed and not hangs[s.part.id].is_set()]


def _launch_checks(s: PartState) -> None:
    try:
        # The limits each case lowered, by its name in the case file.
        opaque = s.case_file_names
        props = {opaque.get(c.name, c.name): dict(c.props) for name in ("public", "hidden")
                 for c in s.part.cases[name] if c.props}
        check = check_launches(s.harness_result, s.part.file, s.kernels, s.part.shared_memory, props)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        # The records come from the process that runs student code.
        s.set("launch", "failed", f"the launch records are malformed ({e})")
        return
    s.set("launch", check.status, check.summary, check.details, hints=check.hints)
    s.work_elsewhere = check.work_elsewhere
