"""Running a child process that may misbehave.

Every command the grader runs on a student's behalf (the compiler, the
harness, compute-sanitizer) goes through `run`: it gets its own process
group, so the time limit kills everything it started; its stdout and stderr
are drained by threads as they come, keeping only the head and the tail, so
a part that prints gigabytes costs CPU time, not memory or disk.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

KEEP_BYTES = 32 * 1024  # kept from each end of each stream


@dataclass
class Completed:
    argv: list
    exit_code: Optional[int]  # None when killed for the time limit
    signal: Optional[int]  # the signal that ended it, if any (other than our kill)
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str
    stdout_bytes: int  # how much it really printed
    stderr_bytes: int

    @property
    def output(self) -> str:
        """stdout and stderr together, for showing."""
        parts = [p for p in (self.stdout.rstrip(), self.stderr.rstrip()) if p]
        return "\n".join(parts)


class _Capture:
    """Keeps the first and last KEEP_BYTES of a stream and counts the rest."""

    def __init__(self, stream) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream) -> None:
        while True:
            chunk = stream.read(65536)
            if not chunk:
                break
            self.total += len(chunk)
            room = KEEP_BYTES - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > KEEP_BYTES:
                    del self.tail[: len(self.tail) - KEEP_BYTES]
        stream.close()

    def text(self) -> str:
        self._thread.join(timeout=10)
        cut = self.total - len(self.head) - len(self.tail)
        data = bytes(self.head)
        if cut > 0:
            data += f"\n[... {cut} bytes not shown ...]\n".encode()
        data += bytes(self.tail)
        return data.decode("utf-8", errors="replace")


def _child_limits(file_size_limit: Optional[int]) -> None:
    # Runs in the child between fork and exec: no core dumps (they can be
    # gigabytes for a CUDA process), and optionally a cap on file sizes.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if file_size_limit is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))


def run(
    argv: Sequence,
    timeout_s: float,
    cwd: Optional[Path] = None,
    env: Optional[dict] = None,
    file_size_limit: Optional[int] = None,
) -> Completed:
    argv = [str(a) for a in argv]
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: _child_limits(file_size_limit),
    )
    out, err = _Capture(proc.stdout), _Capture(proc.stderr)
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    # Whatever the leader did, nothing it started may outlive it.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    seconds = time.monotonic() - start
    code = proc.returncode
    return Completed(
        argv=argv,
        exit_code=None if timed_out else (code if code >= 0 else None),
        signal=-code if (code is not None and code < 0 and not timed_out) else None,
        timed_out=timed_out,
        seconds=seconds,
        stdout=out.text(),
        stderr=err.text(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
    )
