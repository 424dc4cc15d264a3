"""The grader's side of a timing run's GPU turn (grader/harness/core/gpu_turn.h).

A timing run starts its launcher, makes its buffers and makes the case's
first call while other gradings share the GPU; then the trusted harness says
"ready" on the run's gate and waits. The speed stage starts every part's
timing run at once under the GPU's shared lock, waits until each is ready
(or over), takes the GPU exclusively, and answers "go" to one run at a time:
the GPU is held alone only for the warm-up, the timed calls and the counters.

The time a run waits at its gate is not held against its time limit
(`paused_s`, given to process.run).
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from typing import Optional

from ..system import owned_dirs

READY = b"ready\n"
GO = b"go\n"
# How often the thread that listens looks whether the gate was closed.
LOOK_S = 0.05


class GpuTurnGate:
    """One run's gate: a Unix socket in a folder of the grader's alone
    (0700), so neither the sandbox user nor another grading can reach it."""

    def __init__(self) -> None:
        # Short and private: a socket's path has at most 107 bytes.
        self._dir = owned_dirs.make(owned_dirs.TURN)
        self.path = self._dir / "gate"
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(1)
        self._server.settimeout(LOOK_S)
        self._conn: Optional[socket.socket] = None
        self._cond = threading.Condition()
        self._ready_at: Optional[float] = None
        self._given_at: Optional[float] = None
        self._closed = False
        self._called_off = False
        self._listener = threading.Thread(target=self._listen, name="tilelab-gpu-turn", daemon=True)
        self._listener.start()

    def wait_ready(self, timeout_s: float) -> bool:
        """Whether the run says it is ready for the GPU alone, waiting up to `timeout_s` for it."""
        with self._cond:
            self._cond.wait_for(lambda: self._ready_at is not None or self._closed, timeout_s)
            return self._ready_at is not None

    def give(self) -> None:
        """Answers "go": the caller holds the GPU alone. A run gone by then is no matter."""
        with self._cond:
            if self._ready_at is None or self._given_at is not None:
                return
            self._given_at = time.monotonic()
            conn = self._conn
        try:
            conn.sendall(GO)
        except OSError:
            pass

    def paused_s(self) -> float:
        """How long the run has waited at the gate so far."""
        with self._cond:
            if self._ready_at is None:
                return 0.0
            return (self._given_at or time.monotonic()) - self._ready_at

    @property
    def called_off(self) -> bool:
        """Whether the gate was closed before its run was let through: the run ends there."""
        with self._cond:
            return self._called_off

    def close(self) -> None:
        with self._cond:
            if not self._closed:
                self._called_off = self._given_at is None
            self._closed = True
            if self._ready_at is not None and self._given_at is None:
                self._given_at = time.monotonic()  # no longer waiting: its time limit runs again
            self._cond.notify_all()
            conn, self._conn = self._conn, None
        self._listener.join()
        for s in (conn, self._server):
            if s is not None:
                s.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _listen(self) -> None:
        conn = None
        while conn is None:
            with self._cond:
                if self._closed:
                    return
            try:
                conn, _ = self._server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
        conn.settimeout(LOOK_S)
        said = b""
        while not said.endswith(b"\n") and len(said) < len(READY):
            with self._cond:
                if self._closed:
                    conn.close()
                    return
            try:
                chunk = conn.recv(len(READY) - len(said))
            except socket.timeout:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                break
            said += chunk
        with self._cond:
            if said == READY and not self._closed:
                self._conn = conn
                self._ready_at = time.monotonic()
                self._cond.notify_all()
                return
        conn.close()  # not the harness's word: the run ends at its gate (gpu_turn.h)
