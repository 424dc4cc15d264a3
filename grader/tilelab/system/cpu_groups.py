"""A share of the host's CPUs for each sandbox user's runs.

A run of student code may start as many processes as its user's limit
allows (Limits.processes), and a fork bomb's keep every CPU busy until its
run's time limit. Scheduled process by process, the runs of every other
grading on the host then get a few per cent of the CPUs, and a correct
part's run could be slowed past its own time limit. So each sandbox user's
runs share one CPU group (a cgroup), and the groups share the CPUs equally,
under one group of all of them ("tilelab") that weighs as one process at
the lowest priority (nice 19, as every run but a timed one had before:
process.BACKGROUND_PREFIX) against the grader's own and a timed run: a fork
bomb takes its user's share, no more (measured: docs/measurements.md, "A
fork bomb beside a correct hand-in, once more"). What joins is a run below
its container (process.run's `background` runs), so the bomb cannot starve
what ends it; a timed run stays outside and keeps its priority.

Only root may make the groups, and only where the host lets it (cgroup v1's
cpu controller, or cgroup v2's with the cpu controller to give to a group
of its own); elsewhere a run goes without, as before.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Optional

V1_CPU = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu hierarchy
V2_ROOT = Path("/sys/fs/cgroup")  # cgroup v2's unified hierarchy
GROUP = "tilelab"
# The weight of the group of all the sandbox users' groups: the kernel's weight of one process at nice 19, in
# cgroup v1's cpu.shares (a nice 0 process weighs 1024) and in v2's cpu.weight (100; the least it takes is 1).
LOWEST = {"cpu.shares": "15", "cpu.weight": "1"}

# The line a run's command starts with: it moves itself into its group (the file named by $0), then becomes the
# run. Where the move fails the run goes on without a group, as on a host without them.
JOIN = 'echo $$ > "$0" 2>/dev/null; exec "$@"'

_made: dict = {}
_lock = threading.Lock()


def group_of(user: str) -> Optional[Path]:
    """The cgroup.procs file of `user`'s CPU group, made on first use; None
    where this process cannot make one (not root, or the host has no CPU
    groups it may make)."""
    with _lock:
        if user not in _made:
            _made[user] = _make(user) if os.geteuid() == 0 and re.fullmatch(r"[\w.-]+", user) else None
        return _made[user]


def joined(argv: list, procs: Optional[Path]) -> list:
    """argv, first moving itself into the group whose cgroup.procs is `procs` (None: argv as it is)."""
    return argv if procs is None else ["sh", "-c", JOIN, str(procs), *argv]


def _make(user: str) -> Optional[Path]:
    try:
        if (V1_CPU / "cpu.shares").is_file():
            (V1_CPU / GROUP).mkdir(exist_ok=True)
            (V1_CPU / GROUP / "cpu.shares").write_text(LOWEST["cpu.shares"])
            group = V1_CPU / GROUP / user
            group.mkdir(exist_ok=True)
        elif "cpu" in (V2_ROOT / "cgroup.controllers").read_text().split():
            _give_cpu(V2_ROOT)
            (V2_ROOT / GROUP).mkdir(exist_ok=True)
            (V2_ROOT / GROUP / "cpu.weight").write_text(LOWEST["cpu.weight"])
            _give_cpu(V2_ROOT / GROUP)
            group = V2_ROOT / GROUP / user
            group.mkdir(exist_ok=True)
        else:
            return None
    except OSError:
        return None
    procs = group / "cgroup.procs"
    # A process of its own joins it once: where even that fails (a container that shows the groups but keeps
    # them), there is no group to give.
    tried = subprocess.run(["sh", "-c", 'echo $$ > "$0"', str(procs)], capture_output=True)
    return procs if tried.returncode == 0 else None


def _give_cpu(group: Path) -> None:
    """cgroup v2: the cpu controller handed down to `group`'s children."""
    control = group / "cgroup.subtree_control"
    if "cpu" not in control.read_text().split():
        control.write_text("+cpu")
