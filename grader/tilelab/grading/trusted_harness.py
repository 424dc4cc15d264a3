"""tilelab-harness, the trusted side of every correctness and timing run.

It runs a run's cases and links no student code; the part's executable
serves only its launcher, in a process of its own. CUDA contexts start one at
a time on a GPU (measured: docs/measurements-archive.md, "Fast feedback:
where a grading's time goes"), so a grading keeps a few services
(`--serve-jobs`) that make theirs while the parts build, and each run goes
through a relay (`--via`) that has none (grader/harness/core/harness_service.h).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from ..system import owned_dirs, process
from .runner import ONE_WORK_QUEUE

# Runs of a grading that may be in tilelab-harness at once: a grading's
# correctness runs go side by side, one per part at most. A run holds its
# service from before its launcher starts (making its CUDA context, slowest
# while the sanitizers make theirs) to its end, so a grading keeps one
# service per part: with fewer, parts' runs waited for a service while the
# GPU had room for them (measured: docs/measurements-archive.md, "Fast
# feedback: CUDA contexts made cheaper and earlier").
SERVICES = 6
# How long a new service may take to make its CUDA context and listen on its
# socket; one that takes longer is stopped, and its runs are one-shot.
LISTEN_WAIT_S = 30.0


@dataclass
class _Service:
    proc: subprocess.Popen
    socket: Path

    def alive(self) -> bool:
        return self.proc.poll() is None


class TrustedHarness:
    """The trusted harness of one grading: a one-shot tilelab-harness per run
    (`services=0`), or up to `services` long-lived ones shared by its runs.
    Close it when the grading is done.

    The relay is what `process.run` starts, limits and stops. A service runs
    one job at a time; a run waits for an idle one before its relay starts,
    so no time limit runs while it waits. A run stopped from outside (a time
    limit, a cancel) takes its service down: it is killed and waited for
    before the run's result is read, so nothing of that run is written after."""

    def __init__(self, tool: Path, services: int = SERVICES, log: Optional[Path] = None,
                 env: Optional[dict] = None,
                 gpu_shared: Callable[[], AbstractContextManager] = nullcontext):
        self.tool = Path(tool)
        # Held while services make and end their CUDA contexts (the grading's GpuLock.shared): a context
        # made or ended beside a timed part slows a launcher that calls the driver in its timed calls.
        self._gpu_shared = gpu_shared
        self._most = services
        self._log = log
        # The grading's GPU (CUDA_VISIBLE_DEVICES of a batch worker): a service keeps the run's buffers and
        # its clock, so it must be on the GPU the launcher runs on.
        self._env = dict(env or {})
        self._dir: Optional[Path] = None
        self._idle: list = []
        self._all: list = []
        self._starting = 0
        self._serial = 0
        self._cond = threading.Condition()
        self._closed = False

    def serves(self, tool: Path, env: dict, runs: int) -> bool:
        """Whether these services can be another grading's: the same tool, the
        same GPU and user's environment, and room for `runs` at once."""
        return not self._closed and self.tool == Path(tool) and self._env == env and self._most >= runs

    @property
    def at_once(self) -> Optional[int]:
        """How many runs may be in the trusted harness at once; None: any number (one-shot runs)."""
        return self._most or None

    def start_all(self, most: Optional[int] = None) -> None:
        """Starts every service now (or up to `most` of them), side by side,
        and returns once each listens: their CUDA contexts are made while the
        parts are checked and built, and no run waits for one. A service
        listens once its context is made, so the GPU is held shared until then.
        The others start as runs need them."""
        with self._cond:
            wanted = self._most if most is None else min(most, self._most)
            count = 0 if self._closed else max(0, wanted - len(self._all) - self._starting)
            self._starting += count

        def start() -> None:
            service = self._start()
            with self._cond:
                self._starting -= 1
                if service is not None:
                    self._idle.append(service)
                self._cond.notify_all()

        starting = [threading.Thread(target=start, name="tilelab-harness-start", daemon=True) for _ in range(count)]
        if not starting:
            return
        with self._gpu_shared():
            for thread in starting:
                thread.start()
            for thread in starting:
                thread.join()

    @contextmanager
    def prefix(self, case_files: list) -> Iterator["_Lease"]:
        """The command that runs `case_files` (one, or several in turn on one
        launcher of several parts: tilelab-part-host --parts) in the trusted
        harness, put in front of the launcher's command
        (`process.run(outside=...)`). Tell the lease how the run ended
        (`lease.ended`) before reading its results."""
        service = self._acquire() if self._most > 0 else None
        lease = _Lease(self, service, case_files)
        try:
            yield lease
        finally:
            lease.release()

    def close(self) -> None:
        """Ends every service: each ends when its standard input closes. The
        grading does not wait for that (a CUDA context is slow to go, and
        nothing of a service is read after its last run; measured:
        docs/measurements-archive.md, "Fast feedback, continued: fewer waits
        on the critical path"): a thread reaps them, and kills one still
        there after 5 s. The GPU is held shared while their contexts end."""
        with self._cond:
            self._closed = True
            services, self._all, self._idle = self._all, [], []
            self._cond.notify_all()
        if services:
            threading.Thread(target=self._end, args=(services,), name="tilelab-harness-reaper", daemon=True).start()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _end(self, services: list) -> None:
        with self._gpu_shared():
            for s in services:
                _close_input(s)
            for s in services:
                _stop(s, gently=True)

    def _start(self) -> Optional[_Service]:
        with self._cond:
            if self._dir is None:
                # Its own private folder (0700): the sandbox user cannot reach the
                # socket. Short, because a socket's path has at most 107 bytes.
                self._dir = owned_dirs.make(owned_dirs.HARNESS)
            self._serial += 1
            socket = self._dir / f"s{self._serial}"
        log = open(self._log, "ab") if self._log is not None else subprocess.DEVNULL
        process.no_core_dumps()
        try:
            proc = subprocess.Popen([str(self.tool), "--serve-jobs", str(socket)], stdin=subprocess.PIPE,
                                    stdout=log, stderr=log, start_new_session=True,
                                    env={**os.environ, **ONE_WORK_QUEUE, **self._env})
        except OSError:
            return None
        finally:
            if log is not subprocess.DEVNULL:
                log.close()
        service = _Service(proc, socket)
        deadline = time.monotonic() + LISTEN_WAIT_S
        while not socket.exists():
            if not service.alive() or time.monotonic() > deadline:
                _stop(service, gently=False)
                return None
            time.sleep(0.002)
        with self._cond:
            if self._closed:
                _stop(service, gently=True)
                return None
            self._all.append(service)
        return service

    def _acquire(self) -> Optional[_Service]:
        """An idle service, a new one while there are fewer than the most, or
        the next to be released. None if none can be started: the run is then
        one-shot."""
        with self._cond:
            while True:
                while self._idle:
                    service = self._idle.pop()
                    if service.alive():
                        return service
                    self._all.remove(service)
                if len(self._all) + self._starting < self._most or self._closed:
                    self._starting += 1
                    break
                self._cond.wait()
        service = None if self._closed else self._start()
        with self._cond:
            self._starting -= 1
            self._cond.notify_all()
        return service

    def _release(self, service: _Service, stopped: bool) -> None:
        if stopped or not service.alive():
            # Stopped from outside: it may still be in that run. Gone before the result is read.
            _stop(service, gently=False)
            with self._cond:
                if service in self._all:
                    self._all.remove(service)
                self._cond.notify_all()
            return
        with self._cond:
            if self._closed:
                _stop(service, gently=True)
            else:
                self._idle.append(service)
            self._cond.notify_all()


class _Lease:
    """One run's use of the trusted harness."""

    def __init__(self, owner: TrustedHarness, service: Optional[_Service], case_files: list):
        self._owner = owner
        self._service = service
        self._stopped = True  # until told otherwise: a run that raised may still be in the service
        self._released = False
        if service is None:
            self.outside = [owner.tool, *case_files, "--"]
        else:
            self.outside = [owner.tool, "--via", service.socket, *case_files, "--"]

    def ended(self, done: process.Completed) -> None:
        """How the run ended; a run stopped from outside takes its service with it, now."""
        self._stopped = done.timed_out or done.stopped is not None
        self.release()

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        if self._service is not None:
            self._owner._release(self._service, self._stopped)


def _close_input(service: _Service) -> None:
    """A service ends when its standard input closes."""
    if service.proc.stdin is not None:
        try:
            service.proc.stdin.close()
        except OSError:
            pass


def _stop(service: _Service, gently: bool) -> None:
    if gently and service.proc.stdin is not None:
        _close_input(service)
        try:
            service.proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            pass
    try:
        service.proc.kill()
    except OSError:
        pass
    service.proc.wait()
    _close_input(service)


class KeptServices:
    """Trusted-harness services kept from one check to the next by whoever
    checks one hand-in after another (`tilelab check --watch`): their CUDA
    contexts are made once, not once a save, and a grading that finds them
    (context.open_grading) uses them and leaves them running. A grading whose
    tool, environment or number of runs at once they do not fit makes new
    ones, which are kept instead. The services run no student code; one that
    a run took down is started again when a run needs it. Close it when done."""

    def __init__(self, gpu_lock) -> None:
        self.gpu_lock = gpu_lock  # the GpuLock every kept grading and its services share
        self._trusted: Optional[TrustedHarness] = None

    @property
    def harness(self) -> Optional[TrustedHarness]:
        """The services kept now, if any."""
        return self._trusted

    def for_grading(self, tool: Path, env: dict, runs: int, make: Callable[[], TrustedHarness]) -> TrustedHarness:
        """The kept services where they serve such a grading (TrustedHarness.serves),
        else new ones from `make`, kept from now on in place of the others, which end."""
        if self._trusted is not None and self._trusted.serves(tool, env, runs):
            return self._trusted
        self.close()
        self._trusted = make()
        return self._trusted

    def close(self) -> None:
        if self._trusted is not None:
            self._trusted.close()
            self._trusted = None
