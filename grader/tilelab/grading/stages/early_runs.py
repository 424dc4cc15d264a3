"""Runs begun while their part compiles.

In a check, a part's public cases start as soon as its build begins: the
trusted harness's relay starts `tilelab-part-host --wait` on the shared
object the build will put in place (grader/harness/part_host_main.cu), so
that the launcher's process and its CUDA context are made beside the
compiler instead of after it, and the cases run the moment the part is
linked. The build puts the shared object in place only once the part has
passed its audit and linked (build.SubmissionBuild); a part that does not
build calls its run off. The time a run waits for its part is not held
against its time limit.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..context import Grading, PartState
from ..runner import exit_codes
from .correctness import run_sets, SetsRun

if TYPE_CHECKING:
    from .device import GpuSide


def begins_runs_early(g: Grading, gpu: "GpuSide") -> bool:
    """Whether this grading's parts begin their public cases as they compile:
    a check that asks for it (GradeOptions.early_runs), through the trusted
    harness, on a GPU a probe found here before, with a tree that has
    tilelab-part-host."""
    return (g.options.early_runs and g.options.mode == "check" and g.sets == ("public",) and g.trusted is not None
            and g.tools.part_host.is_file() and gpu.seen_before())


@dataclass
class EarlyStart:
    """How a run begun before its part is built starts and waits."""

    launcher: list  # tilelab-part-host --wait LIBRARY
    called_off: threading.Event = field(default_factory=threading.Event)  # the part did not build
    started: float = field(default_factory=time.monotonic)
    ready_at: Optional[float] = None  # when the build was over for this part

    def waited(self) -> float:
        """The time spent waiting for the part to be built (process.run's `paused`)."""
        return (self.ready_at or time.monotonic()) - self.started


class EarlyRuns:
    """The public-case runs of a check's parts, begun while they compile."""

    def __init__(self, g: Grading, host: Path) -> None:
        self._g, self._host = g, host
        self._runs: dict = {}  # part id -> (EarlyStart, Future of its SetsRun)
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(g.parts)), thread_name_prefix="tilelab-early")
        self._codes: Optional[dict] = None
        self._lock = threading.Lock()

    def begin(self, s: PartState, library: Path) -> None:
        """Starts the part's public cases on `library`, which its build puts in place."""
        start = EarlyStart([str(self._host), "--wait", str(library)])
        self._runs[s.part.id] = (start, self._pool.submit(self._run, s, start))

    def built(self, s: PartState, library_in_place: bool) -> None:
        """The part's build is over: its run goes on, or is called off."""
        entry = self._runs.get(s.part.id)
        if entry is None:
            return
        start, run = entry
        start.ready_at = time.monotonic()
        if not library_in_place:
            start.called_off.set()
            del self._runs[s.part.id]
            _quietly(run)

    def take(self, s: PartState) -> Optional[SetsRun]:
        """The part's run, once over; None where none was begun."""
        entry = self._runs.pop(s.part.id, None)
        return entry[1].result() if entry is not None else None

    def close(self) -> None:
        """Calls off every run not taken (its part was never run) and waits for them."""
        left, self._runs = list(self._runs.values()), {}
        for start, _ in left:
            start.ready_at = start.ready_at or time.monotonic()
            start.called_off.set()
        for _, run in left:
            _quietly(run)
        self._pool.shutdown(wait=True)

    def _run(self, s: PartState, start: EarlyStart) -> SetsRun:
        g = self._g
        with self._lock:
            if self._codes is None:
                self._codes = exit_codes(g.tools.verify)
        # Its CUDA context is made now: beside the other gradings' runs, never in a turn of the GPU alone.
        with g.gpu_lock.shared():
            return run_sets(g, s, ("public",), g.limits["correctness"], self._codes, "public", early=start)


def _quietly(run: Future) -> None:
    try:
        run.result()
    except Exception:  # noqa: BLE001 - a run called off has nothing to say
        pass
