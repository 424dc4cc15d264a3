"""Every part's public and hidden cases in one run of the trusted harness,
on one launcher process that serves all of them (tilelab-part-host
--parts): a hand-in's correctness with one CUDA context instead of one a
part, and one trusted-harness service busy instead of six.

A part's verdicts are taken from that run only where it proves the part
right: its cases ran to their end and every one passed, no CUDA was in use
before its launcher was called, the run left no process behind and printed
no more than a run may. Every other part, and every part of a run that
did not end so, is run as before, in a process of its own: what a part is
told of a failing case, a crash or a hang, and what it printed, is what a
run of its own tells, and a part whose code disturbs the run is found
there. So a hand-in with a part that fails pays for its cases twice, and
one with a part that hangs waits for that part's time limit twice."""

from __future__ import annotations

import dataclasses
import threading

from ..context import Grading
from ..runner import HarnessRun, ended_well, result_seconds, run_harness
from .correctness import (PRINTED_MOST, PartStarts, part_sets, sets_case_file, sets_run_of, settle_correctness,
                          write_staff_log)


def together_parts(g: Grading, runnable: list) -> list:
    """The parts whose cases run on one launcher: two or more, each linked
    as a shared object too, graded through the trusted harness (no check
    whose cases begin while its parts compile, early_runs.py)."""
    parts = [s for s in runnable if s.library is not None]
    if g.trusted is None or g.early is not None or len(parts) < 2 or not g.tools.part_host.is_file():
        return []
    return parts


def correct_together(g: Grading, parts: list, exit_codes: dict, hangs: threading.Event) -> list:
    """One run of every part's cases of this grading's sets, the parts in
    turn on one launcher. Returns the parts whose correctness stage it
    settled; a run that a run beside it disturbed settles none it did not
    prove right, and their runs of their own say so. `hangs` is set where a
    part's cases ran past their time limit: the runs that check the parts
    together under compute-sanitizer would hang on it too."""
    limit = g.limits["correctness"]
    sets = [part_sets(g, s) for s in parts]
    files = [sets_case_file(g, s, part_sets_, "cases-together") for s, part_sets_ in zip(parts, sets)]
    starts = PartStarts([case_file.parent / "result.json" for case_file, _ in files], [h for _, h in files])
    host = [g.tools.part_host, "--parts", *(str(s.library) for s in parts)]
    run = run_harness(parts[0].binary, [case_file for case_file, _ in files], limit, g.sandbox, trusted=g.trusted,
                      paused=starts, launcher=host)
    write_staff_log(g, "cases-together", run)
    if run.timed_out:
        hangs.set()
    if run.stopped is not None or run.others or run.output_bytes > PRINTED_MOST:
        return []  # whose it was, only runs of their own can tell
    settled = []
    for s, part_sets_, (case_file, hidden), result in zip(parts, sets, files, run.results):
        if not ended_well(result) or result.get("cuda_in_use_at_start") is not False:
            continue
        sets_run = sets_run_of(g, s, part_sets_, case_file, hidden, own_share(run, result), limit, exit_codes)
        every = sum(len(s.part.cases[name]) for name in part_sets_)
        if len(sets_run.cases) == every and all(c.passed for c in sets_run.cases):
            settle_correctness(g, s, [sets_run], part_sets_, exit_codes)
            settled.append(s)
    return settled


def own_share(run: HarnessRun, result: dict) -> HarnessRun:
    """A part's own share of a run of several (`result`: its case file's,
    which ended well): its exit status and time, its result; nothing it
    printed (a student is shown output only of a part that fails, from a
    run of its own), and nothing left behind (the run left nothing)."""
    return dataclasses.replace(run, exit_code=0, signal=None, timed_out=False, stopped=None, result=result,
                               results=[result], stdout="", stderr="", stdout_bytes=0, stderr_bytes=0,
                               seconds=result_seconds(result))
