"""Temporary folders that name the process that made them.

A grader's temporary folders hold hand-ins' code, builds and sockets, and
are removed when their grading ends. A grader killed mid-grading (SIGKILL,
an out-of-memory kill) cannot remove them, so each names its maker: the
process ID and the start time the kernel gives it, in the maker's PID
namespace. The next grader on the host (`sweep`, when a worker starts and
when a grading makes its work folder) removes the folders whose maker is
gone. A folder it cannot judge (another user's, another PID namespace's, no
owner file, no /proc) is left as it is.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

OWNER_FILE = ".tilelab-owner"
# The prefixes of every temporary folder a grader makes: a sweep looks at no other.
WORK = "tilelab-work-"  # a grading's builds and runs (grading/context.py)
WORKER = "tilelab-worker-"  # a service worker's unpacked hand-ins (operations/service/worker.py)
HARNESS = "tilelab-h-"  # the trusted harness's sockets (grading/trusted_harness.py)
TURN = "tilelab-t-"  # a timing run's gate (grading/gpu_turn.py)
PREFIXES = (WORK, WORKER, HARNESS, TURN)


def make(prefix: str) -> Path:
    """A new temporary folder (mode 0700, as mkdtemp makes it) that names this process."""
    if prefix not in PREFIXES:
        raise ValueError(f"{prefix!r} is not one of the grader's temporary folder prefixes")
    made = Path(tempfile.mkdtemp(prefix=prefix))
    (made / OWNER_FILE).write_text(json.dumps(_identity(os.getpid())))
    return made


def sweep(root: Optional[Path] = None) -> list:
    """Removes the grader's temporary folders in `root` (the temporary
    directory) whose maker is gone; returns them."""
    root = Path(root or tempfile.gettempdir())
    here = _namespace(os.getpid())
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIXES):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
            owner = json.loads((Path(entry.path) / OWNER_FILE).read_text())
            pid, started, namespace = int(owner["pid"]), owner.get("started"), owner.get("namespace")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if here is None or namespace != here or _alive(pid, started):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def _identity(pid: int) -> dict:
    return {"pid": pid, "started": _start_time(pid), "namespace": _namespace(pid)}


def _alive(pid: int, started) -> bool:
    """Whether `pid` is the process that made the folder: running, and
    started when the owner file says (a PID may be given again)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # running, as another user
    now = _start_time(pid)
    return started is None or now is None or now == started


def _start_time(pid: int) -> Optional[int]:
    """When the process started, in clock ticks since boot (/proc/PID/stat, field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _namespace(pid: int) -> Optional[str]:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None
