"""`scripts/bench --class N --starts-beside RATE`: the class on one GPU,
then again with CUDA processes started beside it, RATE a second: what one
more CUDA process costs a class.

Each process is a run a grading makes (the naive reference part's
executable on its 1x1 case, one hardware work queue) and holds the GPU's
lock shared, host-wide, as a grading's runs do: it never runs beside a
timed part, and a timing run waits for it. A class that slows by about
what the processes' contexts take is held by CUDA's start-ups (made one at
a time on a host), and fewer processes a hand-in would raise its rate; a
class that does not slow is held by something else.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Optional

from tilelab.system.gpu_lock import GpuLock

from .grading_bench import smallest_run
from .starts_bench import LIMIT_S, run_env

# At most this many at once: a rate the GPU's lock holds back is not made up later by a crowd.
MOST_AT_ONCE = 8


class StartsBeside:
    """A context manager: while it is entered, a CUDA process starts on
    `gpu` every 1/`rate` s (none while MOST_AT_ONCE still run), each
    holding the GPU's lock shared. Then `started`, `failed` and `skipped`
    (ticks with MOST_AT_ONCE running) say what happened."""

    def __init__(self, root: Path, build: Path, folder: Path, gpu: str, rate: float,
                 lock: Optional[GpuLock] = None) -> None:
        if rate <= 0:
            raise ValueError("the rate of starts beside a class must be above 0")
        runs = [smallest_run(root, build, folder / str(i)) for i in range(MOST_AT_ONCE)]
        self.binary = runs[0][0]
        self._free = [case_file for _, case_file in runs]  # one case file (and its result) per run at a time
        self._gpu, self._period = gpu, 1.0 / rate
        self._lock = lock if lock is not None else GpuLock(gpu)
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._ticker: Optional[threading.Thread] = None
        self._running: list = []
        self.started = self.failed = self.skipped = 0

    def __enter__(self) -> "StartsBeside":
        self._ticker = threading.Thread(target=self._tick, name="bench-starts-beside", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        for t in list(self._running):
            t.join()

    def _tick(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            with self._guard:
                case_file = self._free.pop() if self._free else None
                if case_file is None:
                    self.skipped += 1
            if case_file is not None:
                t = threading.Thread(target=self._one, args=(case_file,), daemon=True)
                self._running = [r for r in self._running if r.is_alive()] + [t]
                t.start()
            due += self._period
            self._stop.wait(max(0.0, due - time.monotonic()))

    def _one(self, case_file: Path) -> None:
        try:
            with self._lock.shared():
                done = subprocess.run([str(self.binary), str(case_file)], env=run_env(self._gpu),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=LIMIT_S,
                                      check=False)
            ok = done.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        with self._guard:
            self._free.append(case_file)
            self.started += 1
            self.failed += 0 if ok else 1

    def figures(self) -> dict:
        return {"rate": round(1.0 / self._period, 3), "started": self.started, "failed": self.failed,
                "skipped": self.skipped}


def cost_per_start(plain, beside) -> Optional[float]:
    """Seconds of the GPU one CUDA process started beside the class cost it:
    what a hand-in cost more with them, over how many more processes a hand-in
    that was (two ClassRun of one GPU; `beside.beside` its StartsBeside.figures()).
    None where either graded nothing or no process started."""
    started = beside.beside.get("started", 0) - beside.beside.get("failed", 0)
    if not plain.graded or not beside.graded or started <= 0:
        return None
    return (beside.cost - plain.cost) / (started / beside.graded)
