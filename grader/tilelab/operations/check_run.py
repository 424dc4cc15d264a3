"""One `tilelab check` on this machine: the result kept for an unchanged
check, else a grading (run_grading); grade.json always, the reports when
asked; and what the terminal says.

A terminal user reads the table, not the reports: by default a check writes
grade.json alone (the reports' rendering and roofline plot cost time on
every check) and says in one line the command that writes them, which
reads the kept result instead of checking again when nothing changed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from rich.console import Console

from ..grading.model import GradeResult
from ..grading.options import GradeOptions
from ..outputs.check_breakdown import breakdown_lines
from ..outputs.check_view import check_passed, print_check
from ..outputs.rendering import REPORT_FILES
from ..system.atomic import write_atomically
from . import check_cache

if TYPE_CHECKING:
    from ..grading.trusted_harness import KeptServices

EXIT_PASSED, EXIT_TO_FIX = 0, 1
GRADE_JSON = "grade.json"


@dataclass
class CheckOutcome:
    result: GradeResult
    out_dir: Path
    unchanged_since: Optional[str] = None  # when the kept result was checked (HH:MM:SS); None: checked now
    figures: dict = field(default_factory=dict)  # this command's seconds (check_breakdown.COMMAND_FIGURES, total)
    earlier_figures: dict = field(default_factory=dict)  # for a kept result, those of the command that made it
    reports: bool = False  # report.md and report.html were written

    @property
    def code(self) -> int:
        return EXIT_PASSED if check_passed(self.result) else EXIT_TO_FIX


def process_age() -> Optional[float]:
    """Seconds since this process started (Linux), None where it cannot be told."""
    try:
        after_name = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - int(after_name[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def run_check(submission: Path, options: GradeOptions, *, again: bool = False, report: bool = False,
              warm_up: Callable[[], None] = lambda: None, progress: Optional[Callable[[str], None]] = None,
              startup: Optional[float] = None, kept_services: Optional[KeptServices] = None) -> CheckOutcome:
    """Checks `submission`: the kept result when its key was kept (unless
    `again`), else a grading, kept for next time. Writes grade.json into
    options.out_dir, and report.md and report.html when `report` (else
    removes those of an earlier check, which would not match this one).
    `warm_up` runs only before a grading: an unchanged check starts nothing.
    `startup`: the seconds before this call, for the breakdown; `kept_services`: a
    watch's trusted-harness services, kept from one check to the next."""
    # Imported before any clock starts: what a grading needs, and what writes the reports.
    from ..grading import pipeline  # noqa: F401
    from ..outputs.report import write_reports
    from .grading_run import Outputs, run_grading

    clock = time.monotonic()
    out = options.out_dir
    key = check_cache.check_key(submission, options)
    kept = None if again else check_cache.find(key)
    figures = {"startup": startup, "key": round(time.monotonic() - clock, 3)}
    if kept is not None:
        outcome = CheckOutcome(kept.result, out, unchanged_since=kept.checked_at or "an earlier check",
                               earlier_figures=kept.breakdown)
        out.mkdir(parents=True, exist_ok=True)
        data = kept.data
        if report:
            figures["reports"] = _timed(lambda: write_reports(kept.result, out, audience="student"))
    else:
        warm_up()
        started = time.monotonic()
        result = run_grading(submission, options, Outputs(reports=("student",) if report else (), results=None,
                                                          detailed=False), progress=progress, kept=kept_services).result
        wall = time.monotonic() - started
        # run_grading writes the reports after the grading itself (result.seconds).
        figures["grading"] = round(result.seconds if report else wall, 3)
        if report:
            figures["reports"] = round(max(0.0, wall - result.seconds), 3)
        outcome = CheckOutcome(result, out)
        data = result.to_dict()
    figures["grade_json"] = _timed(lambda: write_atomically(out / GRADE_JSON, json.dumps(data, indent=2)))
    if not report:
        for name in REPORT_FILES.values():
            (out / name).unlink(missing_ok=True)
    outcome.reports = report
    figures["total"] = round(time.monotonic() - clock + (startup or 0.0), 3)
    outcome.figures = {k: v for k, v in figures.items() if v is not None}
    if kept is None and check_cache.worth_keeping(outcome.result):
        check_cache.keep(key, outcome.result, outcome.figures)
    return outcome


def _timed(work: Callable[[], object]) -> float:
    clock = time.monotonic()
    work()
    return round(time.monotonic() - clock, 3)


def closing_lines(outcome: CheckOutcome, report_command: str) -> list:
    """What the terminal says after the table: whether the result is a kept
    one, and where the reports are or the one command that writes them
    (`report_command`; "" says nothing of it)."""
    lines = []
    if outcome.unchanged_since:
        lines.append(f"unchanged since the check at {outcome.unchanged_since} (the same files, build, GPU and "
                     "options): its result, nothing was run; add --again to run it again")
    if outcome.reports:
        lines.append(f"full report: {outcome.out_dir / REPORT_FILES['markdown']}")
    elif report_command:
        lines.append(f"report: `{report_command}` writes {outcome.out_dir / REPORT_FILES['markdown']} and "
                     f"{REPORT_FILES['html']} (an unchanged check is not run again)")
    return lines


def breakdown(outcome: CheckOutcome) -> list:
    """The --verbose breakdown: a kept result's is the one of the check that made it."""
    if outcome.unchanged_since:
        return ([f"nothing ran: this command took {outcome.figures.get('total', 0.0):.2f} s. The check at "
                 f"{outcome.unchanged_since} took:"]
                + breakdown_lines(outcome.result, outcome.earlier_figures))
    return breakdown_lines(outcome.result, outcome.figures)


def show(outcome: CheckOutcome, report_command: str, verbose: bool = False, console: Optional[Console] = None,
         where_to_run: bool = True) -> None:
    """The table, what to fix first, the closing lines and (verbose) where the time went."""
    console = console or Console()
    print_check(outcome.result, console, where_to_run=where_to_run)
    # Unwrapped: the breakdown's columns and the command to copy stay whole.
    for line in (breakdown(outcome) if verbose else []) + closing_lines(outcome, report_command):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
