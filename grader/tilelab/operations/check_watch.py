"""`tilelab check --watch [PART]`: check again each time a file is saved.

The files are polled (size, modification time, inode) every POLL_S seconds:
no package, no inotify, nothing a student's machine or a cluster's shared
folder may lack. Editors save in several writes (a temporary file renamed,
a truncate then a write), so a change is checked once the files have stayed
the same for SETTLE_S; a save during a check is checked after it.

The process stays up between saves, so each check skips Python's start and
the grader's imports; the build tree and its kept parts are reused, and a
save that changed no byte shows the kept result at once (check_cache.py).
The trusted harness's services, and their CUDA contexts, are kept from one
save to the next (trusted_harness.KeptServices) and end with the watch.
In a terminal the table is redrawn in place (rich's Live); elsewhere (a
pipe, a log) each check's table is printed after the last. Each check
names the verdicts that changed since the one before. Ctrl-C ends the
watch with exit status 0.
"""

from __future__ import annotations

import datetime as dt
import io
import time
from pathlib import Path
from typing import Callable, Optional

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from ..grading.answers_file import ANSWERS_FILE
from ..grading.handin_files import locate
from ..grading.options import GradeOptions
from ..grading.trusted_harness import KeptServices
from ..outputs.check_changes import changes_line
from ..outputs.check_view import WHERE_TO_RUN
from ..spec.assignment import load_assignment
from ..system.gpu_lock import visible_gpu_lock
from ..system.paths import ASSIGNMENT_FILE
from .check_run import CheckOutcome, run_check, show

POLL_S = 0.1
SETTLE_S = 0.1
NO_GPU_ONCE = ("No CUDA device here: on each save the static checks and the build run, and the table says what they "
               "found; the cases, compute-sanitizer and the timing need a GPU. ")
STOPPED = "stopped watching"


def watched_files(submission: Path, options: GradeOptions) -> list:
    """The files a check of `options` reads, in the folder it grades."""
    assignment = load_assignment(options.root / ASSIGNMENT_FILE)
    folder = locate(submission, tuple(p.file for p in assignment.parts) + (ANSWERS_FILE,)).folder
    parts = [] if options.answers_only else [p for p in assignment.parts if not options.parts or p.id in options.parts]
    files = [folder / p.file for p in parts]
    return files + ([folder / ANSWERS_FILE] if options.questions or options.answers_only else [])


def signature(files: list) -> tuple:
    """What changes when a file is saved: its size, modification time and inode (None: missing)."""
    found = []
    for f in files:
        try:
            st = f.stat()
            found.append((st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            found.append(None)
    return tuple(found)


def settled(files: list, seen: tuple) -> tuple:
    """The files' signature once it has stayed the same for SETTLE_S (an editor done writing)."""
    while True:
        time.sleep(SETTLE_S)
        now = signature(files)
        if now == seen:
            return now
        seen = now


class _View:
    """Where the watch draws: in place in a terminal, one check after another elsewhere."""

    def __init__(self, console: Console, header: str, verbose: bool):
        self.console = console
        self.header = header
        self.verbose = verbose
        self.live = Live(console=console, auto_refresh=False, vertical_overflow="visible") \
            if console.is_terminal else None
        self.body = Text()
        self.note = ""  # said once: what the watch can do without a GPU
        self.changed = ""
        self.status = ""

    def start(self) -> None:
        if self.live is not None:
            self.live.start()
        else:
            self.console.print(self.header, markup=False, highlight=False)
        self._draw()

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()

    def say(self, status: str) -> None:
        """A line about what the watch is doing now (checking, a stage begun)."""
        self.status = status
        if self.live is None:
            self.console.print(status, markup=False, highlight=False)
        else:
            self._draw()

    def show(self, outcome: CheckOutcome, changed: str, status: str, note: str = "") -> None:
        if note:
            self.note = note
        self.status = status
        if self.live is None:
            if note:
                self.console.print(note, markup=False, highlight=False)
            show(outcome, "", self.verbose, self.console, where_to_run=False)
            for line in (changed, status):
                if line:
                    self.console.print(line, markup=False, highlight=False, soft_wrap=True)
            return
        buffer = io.StringIO()
        drawn = Console(file=buffer, width=self.console.width, force_terminal=True,
                        color_system=self.console.color_system or "standard")
        show(outcome, "", self.verbose, drawn, where_to_run=False)
        self.body = Text.from_ansi(buffer.getvalue())
        self.changed = changed
        self._draw()

    def _draw(self) -> None:
        if self.live is None:
            return
        lines = [Text(self.header, style="bold")]
        if self.note:
            lines.append(Text(self.note, style="yellow"))
        lines.append(self.body)
        if self.changed:
            lines.append(Text(self.changed, style="cyan"))
        if self.status:
            lines.append(Text(self.status, style="dim"))
        self.live.update(Group(*lines), refresh=True)


def watch_checks(submission: Path, options: GradeOptions, *, again: bool = False, report: bool = False,
                 verbose: bool = False, warm_up: Callable[[], None] = lambda: None, report_command: str = "",
                 console: Optional[Console] = None) -> int:
    """Checks `submission` now and after every save until Ctrl-C; returns the exit status (0)."""
    console = console or Console()
    files = watched_files(submission, options)
    names = ", ".join(f.name for f in files)
    reports = "" if report else f"; reports: {report_command}" if report_command else ""
    view = _View(console, f"watching {names} in {files[0].parent if files else submission} (checked again on each "
                          f"save; Ctrl-C stops){reports}", verbose)
    before = None
    told_no_gpu = False
    kept = KeptServices(visible_gpu_lock())
    view.start()
    try:
        seen = signature(files)
        while True:
            view.say(f"checking {names} ...")
            clock = time.monotonic()
            outcome = run_check(submission, options, again=again, report=report, warm_up=warm_up,
                                progress=lambda m: view.say(f"checking {names}: {m}"), kept_services=kept)
            again = False  # --again: the first check only; later ones are of new bytes, or shown as unchanged
            note = ""
            if outcome.result.gpu is None and outcome.result.parts and not told_no_gpu:
                note, told_no_gpu = NO_GPU_ONCE + WHERE_TO_RUN, True
            when = dt.datetime.now().strftime("%H:%M:%S")
            took = "shown at once: unchanged" if outcome.unchanged_since else \
                f"took {time.monotonic() - clock:.1f} s"
            view.show(outcome, changes_line(before, outcome.result),
                      f"checked at {when} ({took}); waiting for a save (Ctrl-C stops)", note)
            before = outcome.result
            while signature(files) == seen:
                time.sleep(POLL_S)
            seen = settled(files, signature(files))
    except KeyboardInterrupt:
        view.stop()
        console.print(STOPPED, markup=False, highlight=False)
        return 0
    finally:
        view.stop()
        kept.close()
