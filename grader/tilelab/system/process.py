"""Running a child process that may misbehave.

Every command the grader runs on a student's behalf (the compiler, the
harness, compute-sanitizer) goes through `run`. With a sandbox
(tilelab.system.sandbox) it runs as the sandbox's user, within its limits,
and inside the sandbox's container (tilelab-contain, Sandbox.contain): a
child subreaper that ends every process of the run, however it detached
(setsid, a double fork, daemon()), when the run ends or its time is up, and
counts the CPU time of those its parents never waited for. Without one it
runs in a process group of its own, killed whole. Either way `run` returns
once all of it is reaped; its output is drained by threads, keeping only
head and tail, so printing gigabytes costs CPU time, not memory or disk.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from . import cpu_groups

if TYPE_CHECKING:
    from .sandbox import Sandbox

KEEP_BYTES = 32 * 1024  # kept from each end of each stream
GROUP_END_PATIENCE_S = 30.0  # how long to wait for a killed run's processes to be gone
# How long a container told to stop may take to end its run: it kills and
# reaps for up to 5 s (a process with a GPU context dies slowly), then reports.
CONTAIN_PATIENCE_S = 8.0
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
CANCELLED = "cancelled"  # Completed.stopped of a run another thread called off
# How often a run's folder is measured against the sandbox's disk limits
# (a walk of the folder), and how often a run that may be called off looks
# whether it was: a called-off run holds up whatever waits for it until it
# looks, so it looks often (measured: docs/measurements-archive.md, "Fast
# feedback: CUDA contexts made cheaper and earlier").
DISK_LOOK_S = 0.25
CANCEL_LOOK_S = 0.02
# How often a run's deadline is moved by the time it has waited on the grader.
PAUSED_LOOK_S = 0.1
# Gradings side by side (a batch, the self-test) share the host's CPUs, and
# the GPU is held alone only while a part is timed: a launcher with host work
# in every call (a CUDA graph made and launched per call) lost speed to the
# other gradings' compilers and sanitizers (measured:
# docs/measurements-archive.md, "Fast feedback: CUDA contexts made cheaper
# and earlier"). Everything but a timed run runs at the lowest priority, and
# takes only the CPU time a timed run leaves.
BACKGROUND_PREFIX = ["nice", "-n", "19"]


@dataclass
class Completed:
    exit_code: Optional[int]  # None when killed for the time limit
    signal: Optional[int]  # the signal that ended it, if any (other than our kill)
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str
    stdout_bytes: int  # how much it really printed
    stderr_bytes: int
    stopped: Optional[str] = None  # why the grader stopped it early, other than the time limit
    # What the container saw (contained runs only): processes of the run its
    # parents never waited for, their CPU time, and any still there at its end.
    others: int = 0
    others_cpu_s: float = 0.0
    left: int = 0

    @property
    def output_bytes(self) -> int:
        """All it printed, on both streams."""
        return self.stdout_bytes + self.stderr_bytes

    @property
    def output(self) -> str:
        """stdout and stderr together, for showing."""
        parts = [p for p in (self.stdout.rstrip(), self.stderr.rstrip()) if p]
        return "\n".join(parts)


class _Capture:
    """Keeps the first and last KEEP_BYTES of a stream and counts the rest;
    with `on_line`, also hands it each line as it comes (a build's progress)."""

    def __init__(self, stream, on_line: Optional[Callable[[str], None]] = None) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._on_line = on_line
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream) -> None:
        # read1: what the pipe holds now, so that lines are handed on as they come.
        read = stream.read1 if self._on_line is not None else stream.read
        pending = b""
        while True:
            chunk = read(65536)
            if not chunk:
                break
            if self._on_line is not None:
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self._on_line(line.decode("utf-8", errors="replace"))
            self.total += len(chunk)
            room = KEEP_BYTES - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > KEEP_BYTES:
                    del self.tail[: len(self.tail) - KEEP_BYTES]
        if self._on_line is not None and pending:
            self._on_line(pending.decode("utf-8", errors="replace"))
        stream.close()

    def text(self) -> str:
        self._thread.join(timeout=10)
        cut = self.total - len(self.head) - len(self.tail)
        data = bytes(self.head)
        if cut > 0:
            data += f"\n[... {cut} bytes not shown ...]\n".encode()
        data += bytes(self.tail)
        return data.decode("utf-8", errors="replace")


def clip_lines(lines: list, head: int, tail: int = 0) -> list:
    """The first `head` and last `tail` lines, with a line saying how many
    were left out between them."""
    cut = len(lines) - head - tail
    if cut <= 0:
        return list(lines)
    return lines[:head] + [f"[... {cut} {'more ' if not tail else ''}lines not shown ...]"] + lines[len(lines) - tail:]


def no_core_dumps() -> None:
    """Core dumps off, hard limit too, for this process and so for every
    process it starts: a core dump of a CUDA process can be gigabytes. Set
    in the grader once rather than in each child between fork and exec: a
    preexec_fn makes subprocess fork the whole threaded grader, which is
    unsafe beside its threads and far slower than the vfork it uses
    otherwise. (A sandbox sets its limits, file size included, with prlimit.)"""
    if resource.getrlimit(resource.RLIMIT_CORE) != (0, 0):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _dir_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass  # removed while we looked
    return total


def _over_disk_limits(watch_dir: Path, dir_bytes: int, min_free_bytes: int) -> Optional[str]:
    used = _dir_bytes(watch_dir)
    if used > dir_bytes:
        return f"wrote {used / 2**20:.0f} MB of files, more than the {dir_bytes / 2**20:.0f} MB allowed"
    st = os.statvfs(watch_dir)
    if st.f_bavail * st.f_frsize < min_free_bytes:
        return "left the disk almost full"
    return None


def _become_subreaper() -> None:
    """Orphans of the runs (a fork bomb's processes, once their parent is
    killed) become this process's children, so `_end_group` can reap them
    rather than wait for an init that may never do it (a container's PID 1
    is often not one)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the system's init reaps them


def _end_group(pgid: int) -> None:
    """Kills what is left of a run's process group and reaps it, until none
    of it exists (zombies included) or the patience runs out. Only that group
    is reaped: other runs' processes are waited for by their own callers."""
    deadline = time.monotonic() + GROUP_END_PATIENCE_S
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        try:
            while os.waitid(os.P_PGID, pgid, os.WEXITED | os.WNOHANG) is not None:
                pass
        except ChildProcessError:
            pass  # not our children: the system's init reaps them
        if time.monotonic() >= deadline:
            return
        time.sleep(0.02)


_become_subreaper()


class _EndWatch:
    """Waits for a process to end, and hears of it at once: through a pidfd
    where the system has them (Linux 5.3), else with Popen.wait, whose
    sleeps grow to 50 ms between looks, time lost by every run of a grading
    (measured: docs/measurements-archive.md, "Fast feedback, continued:
    fewer waits on the critical path")."""

    def __init__(self, proc: subprocess.Popen):
        self._proc = proc
        try:
            self._fd: Optional[int] = os.pidfd_open(proc.pid)
            self._poll = select.poll()
            self._poll.register(self._fd, select.POLLIN)
        except (AttributeError, OSError):
            self._fd = None

    def wait(self, timeout_s: float) -> None:
        """Returns once the process ended; raises subprocess.TimeoutExpired after `timeout_s`."""
        if self._fd is None:
            self._proc.wait(timeout=timeout_s)
            return
        if not self._poll.poll(max(0, int(timeout_s * 1000) + 1)):
            raise subprocess.TimeoutExpired(self._proc.args, timeout_s)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def run(
    argv: Sequence,
    timeout_s: float,
    cwd: Optional[Path] = None,
    env: Optional[dict] = None,
    sandbox: "Optional[Sandbox]" = None,
    watch_dir: Optional[Path] = None,
    cancel: Optional[threading.Event] = None,
    outside: Sequence = (),
    background: bool = False,
    on_line: Optional[Callable[[str], None]] = None,
    paused: Optional[Callable[[], float]] = None,
) -> Completed:
    """Runs argv in a process group of its own until it ends, `timeout_s`
    passes (timed_out), its watched folder outgrows the sandbox's limits or
    leaves too little free space on the disk, or `cancel` is set by another
    thread (stopped: "cancelled"). Whatever it started is killed with it and
    reaped before it returns (killed processes count against the sandbox
    user's process limit until then). `outside`: a trusted program that runs
    argv itself, put in front of the sandbox's prefix, so that only argv runs
    in the sandbox (tilelab-harness and a part's launcher process).
    `background`: at the lowest CPU priority (BACKGROUND_PREFIX), for work
    that may share the machine with another grading's timed calls.
    `on_line`: called from a reader thread with each line of stdout as it
    comes (the project's own builds, to show their progress).
    `paused`: how long the run has waited on the grader so far (a timing
    run at its GPU turn, grading/gpu_turn.py), added to its time limit."""
    argv = [str(a) for a in argv]
    if sandbox is not None:
        argv = sandbox.wrap(argv)
        env = env if env is not None else sandbox.env(Path(cwd) if cwd else Path("/tmp"))
    argv = [str(a) for a in outside] + argv
    if background and sandbox is not None:
        # The run joins its sandbox user's CPU group, and a fork bomb takes that user's share alone; its
        # container stays outside, so that the bomb cannot starve what ends it.
        argv = cpu_groups.joined(argv, sandbox.cpu_group)
    report = None
    if sandbox is not None and sandbox.contain is not None:
        report = os.pipe()
        argv = [str(sandbox.contain), "--report-fd", str(report[1]), "--"] + argv
    argv = (BACKGROUND_PREFIX if background else []) + argv
    no_core_dumps()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=report[1:] if report else (),
        )
    except OSError as e:  # the program cannot be run at all: as a shell says it
        message = f"cannot run {argv[0]}: {e.strerror}\n"
        return Completed(127, None, False, time.monotonic() - start, "", message, 0, len(message))
    finally:
        if report:
            os.close(report[1])
    out, err = _Capture(proc.stdout, on_line), _Capture(proc.stderr)
    timed_out = False
    stopped = None
    def deadline() -> float:  # moved on by whatever time the run waited on the grader
        return start + timeout_s + (paused() if paused is not None else 0.0)

    ended = _EndWatch(proc)
    watch_disk = watch_dir is not None and sandbox is not None
    next_disk_look = start + DISK_LOOK_S
    while True:
        now = time.monotonic()
        wait_s = deadline() - now
        if paused is not None:
            wait_s = min(wait_s, PAUSED_LOOK_S)
        if watch_disk:
            wait_s = min(wait_s, next_disk_look - now)
        if cancel is not None:
            wait_s = min(wait_s, CANCEL_LOOK_S)
        try:
            ended.wait(max(0.0, wait_s))
            break
        except subprocess.TimeoutExpired:
            now = time.monotonic()
            if now >= deadline():
                timed_out = True
                break
            if watch_disk and now >= next_disk_look:
                next_disk_look = now + DISK_LOOK_S
                stopped = _over_disk_limits(watch_dir, sandbox.limits.dir_bytes, sandbox.limits.min_free_bytes)
                if stopped:
                    break
            if cancel is not None and cancel.is_set():
                stopped = CANCELLED
                break
    if report and (timed_out or stopped is not None):
        # The container ends the run, and reports, before it ends itself.
        try:
            proc.send_signal(signal.SIGTERM)
            ended.wait(CONTAIN_PATIENCE_S)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    ended.close()
    # Whatever the leader did, nothing it started may outlive it.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    seconds = time.monotonic() - start
    _end_group(proc.pid)
    seen = _read_report(report[0]) if report else {}
    code = proc.returncode
    killed_by_us = timed_out or stopped is not None
    return Completed(
        exit_code=None if killed_by_us else (code if code >= 0 else None),
        signal=-code if (code is not None and code < 0 and not killed_by_us) else None,
        timed_out=timed_out,
        seconds=seconds,
        stdout=out.text(),
        stderr=err.text(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        stopped=stopped,
        others=seen.get("others", 0),
        others_cpu_s=seen.get("others_cpu_ms", 0.0) / 1e3,
        left=seen.get("left", 0),
    )


def _read_report(fd: int) -> dict:
    """The container's one line (tilelab-contain --report-fd), or {} when it
    wrote none (it was killed): its figures are then unknown, not zero."""
    try:
        with os.fdopen(fd, "rb") as pipe:
            found = json.loads(pipe.read(4096) or b"{}")
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if k in ("others", "others_cpu_ms", "left")
            and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0}
