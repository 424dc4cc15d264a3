"""What a batch shows while it grades: a line per event, or a live board on a terminal.

Both displays take the same calls (start, stage, finished, idle, note) from
run_batch's workers and its collecting thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ...outputs.causes import BUILT
from .gradebook import GRADED, GRADER_ERROR, Row

if TYPE_CHECKING:
    from .scheduler import _Worker


class _PlainProgress:
    """One line per event, for a log file or a pipe."""

    def __init__(self, total: int, log: Callable[[str], None]) -> None:
        self.total, self.done, self.log = total, 0, log

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def start(self, worker: _Worker, student: str) -> None:
        self.log(f"{worker.label}: grading {student}")

    def stage(self, worker: _Worker, student: str, stage: str) -> None:
        pass  # a line per stage and student would drown the results

    def finished(self, worker: _Worker, row: Row) -> None:
        self.done += 1
        self.log(f"[{self.done}/{self.total}] {row.student}: {_describe(row)} ({worker.label})")

    def idle(self, worker: _Worker) -> None:
        pass

    def note(self, text: str) -> None:
        self.log(text)


class _LiveProgress:
    """A rich progress bar (graded/total, elapsed) with each worker's current
    student and stage beneath it, redrawn in place on a terminal."""

    def __init__(self, total: int, workers: list, console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.text import Text

        lines = {w.label: "idle" for w in workers}
        self._lines = lines

        class _Board(Progress):
            def get_renderables(self):
                yield self.make_tasks_table(self.tasks)
                for label, text in list(lines.items()):
                    yield Text(f"  {label}: {text}", overflow="ellipsis", no_wrap=True)

        self._progress = _Board(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TextColumn("graded"),
                                TimeElapsedColumn(), console=console)
        self._task = self._progress.add_task("grading", total=total)

    def __enter__(self):
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def start(self, worker: _Worker, student: str) -> None:
        self._lines[worker.label] = student

    def stage(self, worker: _Worker, student: str, stage: str) -> None:
        self._lines[worker.label] = f"{student} ({stage})"

    def finished(self, worker: _Worker, row: Row) -> None:
        self._progress.advance(self._task)
        if row.status != GRADED or _parts_not_built(row):
            self._progress.console.print(f"{row.student}: {_describe(row)}")

    def idle(self, worker: _Worker) -> None:
        self._lines[worker.label] = "done"

    def note(self, text: str) -> None:
        self._progress.console.print(text)


def _parts_not_built(row: Row) -> str:
    """'failed to build: tiled; missing: naive, boundary': the parts of a
    graded hand-in that did not build, by state, in the assignment's order."""
    by_state: dict = {}
    for part, state in row.states.items():
        if state != BUILT:
            by_state.setdefault(state, []).append(part)
    return "; ".join(f"{state}: {', '.join(parts)}" for state, parts in by_state.items())


def _describe(row: Row) -> str:
    if row.status == GRADED:
        text = f"{row.total:g}/{row.max:g} in {row.seconds:.1f} s"
        problems = _parts_not_built(row)
        if problems:
            text += f"; {problems}"
    elif row.status == GRADER_ERROR:
        text = f"grader error ({row.detail})" if row.detail else "grader error"
    else:
        text = row.status
    return f"{text}, graded again: {row.again}" if row.again else text
