"""Sharing one GPU between gradings that run at the same time.

Correctness runs and sanitizers may share the GPU; a timing run may not:
another kernel on the GPU would slow it down and make the speed score
depend on what else was graded. Timing takes the GPU exclusively and waits
until nothing else runs; while it waits, no new shared user starts, so a
stream of short runs cannot keep it waiting for ever.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager


class GpuLock:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sharing = 0
        self._exclusive = False
        self._waiting_exclusive = 0

    @contextmanager
    def shared(self):
        with self._cond:
            while self._exclusive or self._waiting_exclusive:
                self._cond.wait()
            self._sharing += 1
        try:
            yield
        finally:
            with self._cond:
                self._sharing -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self):
        with self._cond:
            self._waiting_exclusive += 1
            while self._exclusive or self._sharing:
                self._cond.wait()
            self._waiting_exclusive -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()
