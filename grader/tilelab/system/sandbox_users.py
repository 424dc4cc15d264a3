"""Sandbox users held by one grading slot each, host-wide.

Gradings side by side each run as a sandbox user of their own (sandbox.py):
the process limit is per user, so a fork bomb in one hand-in cannot starve
the hand-ins beside it, and what one leaves behind can be ended without
touching another's. That holds across every `tilelab worker` and `tilelab
batch` on a host only if no two of them take the same user, so a slot holds
its user by a lock file (flock) in paths.LOCK_DIR for as long as it lives; the
lock goes with the process that held it, however that process ends.

A slot's user runs nothing between two gradings. `ended_leftovers` ends
whatever a grading left (a process the run's container could not reach, or
one that outlived a grader that was killed) and says what could not be
ended: such a slot is not used again until it is clean.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import pwd
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Optional

from . import cpu_groups
from .paths import LOCK_DIR, open_lock_file
from .sandbox import Sandbox, slot_user

END_PATIENCE_S = 5.0  # a process holding a GPU context takes a moment to die


@dataclass
class HeldSandbox:
    """A sandbox whose user this process holds, host-wide, until release()."""

    sandbox: Sandbox
    _lock: Optional[IO] = None

    def release(self) -> None:
        if self._lock is not None:
            _let_go(self._lock)
            self._lock = None


def hold_users(base: Sandbox, count: int, lock_dir: Path = LOCK_DIR) -> list:
    """Up to `count` sandboxes like `base`, each with a user of its own that no
    other process on this host holds now (base's user, then <user>-2, -3, ...
    as far as they exist), each cleared of leftovers before it is handed out.
    A sandbox that does not switch users (not root) is itself, unheld."""
    if not base.switches_user:
        return [HeldSandbox(base)]
    held, index = [], 0
    while len(held) < count:
        name = slot_user(base.user, index)
        index += 1
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            break
        if entry.pw_uid == 0:
            break
        lock = _try_lock(lock_dir / f"{name}.lock")
        if lock is None:
            continue  # another grader holds it
        sandbox = dataclasses.replace(base, user=name, uid=entry.pw_uid, gid=entry.pw_gid,
                                      cpu_group=cpu_groups.group_of(name))
        if ended_leftovers(sandbox):
            _let_go(lock)  # a user whose processes cannot be ended is no slot's
            continue
        held.append(HeldSandbox(sandbox, lock))
    return held


def hold_one(base: Sandbox) -> Optional[HeldSandbox]:
    """The first of base's users that no other process holds, held, for a
    grading of its own (or a self-test); None where none is free or the lock
    folder cannot be used: it then runs as `base`, as a grader did before
    users were held."""
    try:
        found = hold_users(base, 1)
    except OSError:
        return None
    return found[0] if found else None


def hold_one_or_base(base: Sandbox, who: str) -> tuple:
    """(sandbox, its HeldSandbox or None, what to say or None): a user of
    base's that no other grader holds (hold_one), else `base` itself beside
    the graders that hold it, and why, in words whose subject is `who`
    ("this grading ran")."""
    held = hold_one(base)
    if held is not None:
        return held.sandbox, held, None
    return base, None, (f"no sandbox user of this host was free to hold (another grader holds each, or the lock "
                        f"folder cannot be written): {who} as {base.user}, which another grader may hold "
                        "(scripts/secure-checkout makes more users)")


def _let_go(lock: IO) -> None:
    """Unlocked before it is closed: a child forked meanwhile (a service starting) has a copy of the file until
    it runs its program, and a copy keeps a lock that is only closed."""
    fcntl.flock(lock, fcntl.LOCK_UN)
    lock.close()


def _try_lock(path: Path) -> Optional[IO]:
    lock = open_lock_file(path)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    return lock


def processes_of(uid: int) -> list:
    """The pids of the processes whose real user is `uid`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as status:
                for line in status:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            found.append(int(entry.name))
                        break
        except (OSError, ValueError, IndexError):
            continue  # gone while we looked
    return found


def ended_leftovers(sandbox: Sandbox, patience_s: float = END_PATIENCE_S) -> list:
    """Ends every process of the sandbox's user and waits for them to go;
    returns those still there after `patience_s` (empty: the user is clean).
    Only for a user this process holds, between two of its gradings."""
    if not sandbox.switches_user:
        return []
    deadline = time.monotonic() + patience_s
    while True:
        left = processes_of(sandbox.uid)
        if not left:
            return []
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _reap_ours(left)
        if time.monotonic() >= deadline:
            return processes_of(sandbox.uid)
        time.sleep(0.05)


def _reap_ours(pids: list) -> None:
    """Reaps those of `pids` that are this process's children (the grader is
    a child subreaper: orphans of its runs come here), so that they do not
    stay as zombies of the sandbox's user."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def leftovers_words(sandbox: Sandbox, pids: list) -> str:
    """For the staff: why a slot is not used."""
    shown = ", ".join(str(p) for p in pids[:8]) + (", ..." if len(pids) > 8 else "")
    return (f"sandbox user {sandbox.user} still runs {len(pids)} process{'es' if len(pids) != 1 else ''} (pid "
            f"{shown}) that could not be ended: its slot is not used until they are gone")
