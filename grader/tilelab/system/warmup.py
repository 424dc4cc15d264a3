"""The grader's speed plumbing: work started early so that a command's user waits less.

A module with something slow to get ready (templates, a library to import)
registers a step with `warm_up` when it is imported (outputs/rendering.py,
outputs/roofline_plot.py); `prepare_in_background` runs every step once per
process, in a daemon thread, while the GPU times the parts. A step that fails
is skipped: the code that needs its work meets the failure in the main thread.
The GPU probe is started even earlier (start_early, gpu_ceilings.probe_early).
"""

from __future__ import annotations

import atexit
import gc
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Optional

_STEPS: list = []
_PREPARED = threading.Event()


def warm_up(step: Callable[[], None]) -> Callable[[], None]:
    """Registers `step` (no arguments, its result ignored) for
    prepare_in_background; steps run in the order they were registered.
    Returns `step`, so it serves as a decorator."""
    _STEPS.append(step)
    return step


def prepare_in_background() -> None:
    """Runs the registered steps in a thread, once per process: work that
    the command would otherwise do at its end, on its critical path. Called
    as the GPU times the parts (the grading's while_timing, grading/context.py),
    not earlier: a thread that imports holds Python's lock most of the time,
    and the grading's own start is Python too."""
    if _PREPARED.is_set():
        return
    _PREPARED.set()
    steps = list(_STEPS)

    def prepare() -> None:
        for step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - whoever needs the step meets the same failure, in the main thread
                pass

    threading.Thread(target=prepare, name="tilelab-warmup", daemon=True).start()


_EARLY: dict = {}  # key -> the Future of work started early, for its first asker


def start_early(key, work: Callable, *args) -> None:
    """Starts `work(*args)` now, in a thread of its own, for whoever first
    asks for `key` (take_early): a command starts what every grading waits
    for (the GPU probe) before it imports the grader."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tilelab-early")
    _EARLY[key] = pool.submit(work, *args)
    pool.shutdown(wait=False)


def take_early(key) -> Optional[Future]:
    """The work started early for `key`, once; None if none was started."""
    return _EARLY.pop(key, None)


def leave_objects_to_exit() -> None:
    """At exit Python runs its cycle collector over every object still alive
    before it tears its modules down, a cost at the end of every command once
    the plotting library is loaded; frozen, they are left to the process's
    end, which frees them all at once (measured: docs/measurements-archive.md,
    "Fast feedback: CUDA contexts made cheaper and earlier")."""
    atexit.register(gc.freeze)
