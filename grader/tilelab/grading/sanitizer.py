"""compute-sanitizer stages: memcheck (out-of-bounds and misaligned accesses)
and racecheck (shared-memory hazards such as a missing __syncthreads).

Both run the part's own harness on small cases named in assignment.yaml,
with launch recording off (CUPTI and the sanitizer do not share a process
well); a grading of several parts checks them all in one run of each tool
first (run_together). --error-exitcode is essential: without it
compute-sanitizer exits 0 even when it reports errors. The verdict comes
from that exit code; the report shows the sanitizer's own first lines,
unparsed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..system.process import CANCELLED, Completed, clip_lines
from .model import Stage
from .runner import OWN_EXITS, ended_well, may_be_disturbed, read_result, run_harness, run_parts_together

if TYPE_CHECKING:
    import threading

    from ..system.sandbox import Sandbox
    from .context import Grading

SANITIZER_ERROR_EXIT = 86  # any code the harness itself never uses
MAX_REPORT_LINES = 40
NOT_RUN_AFTER_TIMEOUT = "not run: the part did not finish its correctness run in time"
NO_SHARED_MEMORY = ("racecheck: nothing to check: no launch of this part had shared memory (its correctness runs' "
                    "launch records), and racecheck looks for shared-memory races only")


def sanitizer_path() -> str:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/compute-sanitizer")
    return str(default) if default.exists() else ""


def report_excerpt(output: str, max_lines: int = MAX_REPORT_LINES) -> str:
    """The sanitizer's report lines (they start with '========='), for showing."""
    lines = [line for line in output.splitlines() if line.startswith("=========")]
    if not lines:
        lines = output.splitlines()
    return "\n".join(clip_lines(lines, max_lines))


HINTS = {
    "memcheck": "An access outside an allocation: guard every load and store with its bound "
                "(row < rows, column < columns), even when the loaded value would be discarded.",
    "racecheck": "A shared-memory race: after storing their tile elements all threads must wait "
                 "(__syncthreads()) before any reads them, and again before the next phase overwrites them.",
}


def run_sanitizer(tool: str, binary: Path, case_file: Path, timeout_s: float, sandbox: "Sandbox",
                  cancel: Optional["threading.Event"] = None) -> tuple:
    """The part's `tool` stage (memcheck or racecheck), and whether the run
    may have been disturbed by runs beside it (runner.may_be_disturbed). It
    runs beside the part's correctness run; `cancel` stops it when that run
    shows the part hangs (a hanging kernel would otherwise hold it to its
    own, longer limit)."""
    exe = sanitizer_path()
    if not exe:
        return Stage(tool, "not_run", "compute-sanitizer is not installed here"), False
    run = run_harness(binary, case_file, timeout_s, sandbox, wrapper=_wrapper(exe, tool), cancel=cancel)
    return _stage_of(tool, run, timeout_s), may_be_disturbed(run, OWN_EXITS | {SANITIZER_ERROR_EXIT})


def _wrapper(exe: str, tool: str) -> list:
    # Only the part's own process: by default compute-sanitizer follows every
    # process it starts and waits for all of them, so a daemon the launcher
    # leaves behind held the run, and the GPU's share, to the time limit. A
    # part whose kernels run in another process fails its launch checks.
    wrapper = [exe, "--tool", tool, "--error-exitcode", str(SANITIZER_ERROR_EXIT), "--print-limit", "20",
               "--target-processes", "application-only"]
    if tool == "racecheck":
        wrapper += ["--racecheck-report", "analysis"]
    return wrapper


def sanitizes_together(g: "Grading") -> bool:
    """Whether a grading links its parts as shared objects too, to check them
    with one compute-sanitizer run per tool (run_together, where the host has
    compute-sanitizer): it grades several parts with the sanitizers, in a
    tree that has tilelab-part-host."""
    return g.options.sanitizers and len(g.parts) > 1 and g.tools.part_host.is_file()


def run_together(tool: str, host: Path, parts: list, run_dir: Path, timeout_s: float, sandbox: "Sandbox",
                 cancel: Optional["threading.Event"] = None) -> tuple:
    """One `tool` run for several parts, each loaded in turn by
    tilelab-part-host (`parts`: each one's shared object and case file, in
    folders below `run_dir`): eleven CUDA processes of a hand-in become two.
    Returns the run and whether it proved every part clean: compute-sanitizer
    reported nothing, and every part's cases ran to their end and ended well.
    A run that did not cannot say which part an error, a crash or a hang was
    in (the sanitizer's report is the process's, and its text could be any
    part's printing): each part is then checked by a run of its own."""
    exe = sanitizer_path()
    run = run_parts_together(host, parts, run_dir, timeout_s, sandbox, wrapper=_wrapper(exe, tool), cancel=cancel)
    return run, _clean(run) and all(ended_well(read_result(case_file.parent / "result.json"))
                                    for _, case_file in parts)


def _clean(run: Completed) -> bool:
    return run.exit_code == 0 and not run.timed_out and run.stopped is None


# A stage's details where one run checked the part with the hand-in's other parts (run_together).
CHECKED_TOGETHER = "checked in one compute-sanitizer run with the other parts"


def _stage_of(tool: str, run, timeout_s: float) -> Stage:
    seconds = round(run.seconds, 3)
    if run.stopped == CANCELLED:
        return Stage(tool, "not_run", NOT_RUN_AFTER_TIMEOUT, "", seconds)
    if run.timed_out:
        return Stage(tool, "not_run", f"{tool} did not finish within {timeout_s:.0f} s: not verified",
                     report_excerpt(run.output), seconds)
    if run.exit_code == SANITIZER_ERROR_EXIT:
        return Stage(tool, "failed", f"{tool} reported errors", report_excerpt(run.output), seconds, [HINTS[tool]])
    if run.exit_code == 0:
        return Stage(tool, "passed", f"{tool}: no errors", "", seconds)
    # The part failed in a way the sanitizer did not flag (a TODO stub, a
    # crash on the host): the run says nothing about memory safety.
    return Stage(tool, "not_run", f"{tool} could not check the part: the harness ended with exit "
                                  f"{run.exit_code if run.exit_code is not None else 'signal ' + str(run.signal)}",
                 report_excerpt(run.output), seconds)
