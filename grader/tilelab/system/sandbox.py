"""Where and as whom student code runs.

Every process that compiles or runs student code goes through `Sandbox.wrap`:
as an unprivileged user (TILELAB_SANDBOX_USER) with no supplementary groups
when the grader is root, so it can neither read the key, the hidden cases or
the results nor write there; in a network namespace with no interfaces where
the kernel allows it; under prlimit; with a bare environment. Time limits,
process groups, capped output and disk quotas are process.run's job.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from .setup_errors import SetupError

DEFAULT_USER = "tilelab-student"


class SandboxError(SetupError):
    """Student code cannot be run safely here."""


@dataclass(frozen=True)
class Limits:
    processes: int = 512  # per user: threads count too (the CUDA runtime starts several)
    open_files: int = 1024
    file_bytes: int = 1 << 30  # the largest file one process may write
    dir_bytes: int = 2 << 30  # all files of one run's directory (checked while it runs)
    min_free_bytes: int = 128 << 20  # stop a run that leaves less than this free on its disk (the grader still writes)


@dataclass(frozen=True)
class Sandbox:
    user: Optional[str] = None  # None: stay the current user (not root)
    uid: int = -1
    gid: int = -1
    isolate_network: bool = False
    limits: Limits = field(default_factory=Limits)
    extra_env: dict = field(default_factory=dict)  # e.g. CUDA_VISIBLE_DEVICES of a batch worker's GPU
    # tilelab-contain of the build tree: every run in this sandbox ends whole with its leader
    # (process.run). None: a run is a process group, and a process that leaves it is not ended.
    contain: Optional[Path] = None
    # The cgroup.procs of this user's share of the host's CPUs (cpu_groups.py), which every run but a timed
    # one joins (process.run); None: the runs share the CPUs process by process.
    cpu_group: Optional[Path] = None

    @property
    def gpu_env(self) -> Optional[dict]:
        """The environment of this sandbox's GPU (extra_env), for the grader's own
        GPU tools; None where that is this process's own."""
        return {**os.environ, **self.extra_env} if self.extra_env else None

    @property
    def switches_user(self) -> bool:
        return self.user is not None

    def contained_by(self, tool: Path) -> "Sandbox":
        """This sandbox with its runs contained by `tool` (tilelab-contain), where it is built."""
        return replace(self, contain=Path(tool).resolve()) if Path(tool).is_file() else self

    def wrap(self, argv: list) -> list:
        """argv, prefixed so that it runs inside the sandbox: as its user
        (root's gradings; default tilelab-student), without a network (inside
        Docker, --network none does this job), with limits on processes (a
        fork bomb stops there), open files, file size and core dumps."""
        prefix = []
        if self.isolate_network:
            prefix += ["unshare", "--net", "--"]
        if self.user is not None:
            prefix += ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--"]
        lim = self.limits
        prefix += ["prlimit", f"--nproc={lim.processes}", f"--nofile={lim.open_files}",
                   f"--fsize={lim.file_bytes}", "--core=0", "--"]
        return prefix + [str(a) for a in argv]

    def env(self, home: Path) -> dict:
        """The environment of sandboxed code: enough to find CUDA, nothing else."""
        env = {
            "PATH": "/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "TMPDIR": str(home),
        }
        # CUDA_DEVICE_ORDER too: the trusted harness's services run with the grader's environment and share a
        # run's buffers with its launcher, so both must number the GPUs alike.
        for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH", "CUDA_HOME"):
            if os.environ.get(name):
                env[name] = os.environ[name]
        env.update(self.extra_env)
        return env

    def own(self, path: Path) -> None:
        """Gives the sandbox user a directory of its own to work in (mode 0700)."""
        path.mkdir(parents=True, exist_ok=True)
        if self.user is not None:
            for p in [path, *path.rglob("*")]:
                os.chown(p, self.uid, self.gid, follow_symlinks=False)
        path.chmod(0o700)

    def reclaim(self, path: Path) -> None:
        """Takes a directory back after the sandbox user worked in it, so
        nothing left running as that user can change what the grader reads
        next. The sandbox may still read and run what is there (the harness
        binaries of a build tree); the unlistable work dir above keeps other
        gradings from finding it."""
        if self.user is not None and path.exists():
            for p in [path, *path.rglob("*")]:
                os.chown(p, 0, 0, follow_symlinks=False)
                if p.is_symlink():
                    continue
                p.chmod(0o755 if p.is_dir() else p.stat().st_mode & 0o755)

    def can_read(self, path: Path) -> bool:
        """Whether sandboxed code could read `path` (for the preflight check)."""
        probe = subprocess.run(self.wrap(["test", "-r", str(path)]), env=self.env(Path("/")),
                               stdin=subprocess.DEVNULL, capture_output=True)
        return probe.returncode == 0


def _network_isolation_works() -> bool:
    try:
        return subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def sandbox_for_this_process(user: Optional[str] = None) -> Sandbox:
    """The sandbox student code gets here: a separate user when we are root."""
    for tool in ("prlimit", "setpriv", "unshare"):
        if shutil.which(tool) is None:
            raise SandboxError(f"{tool} is not installed, and student code cannot be run safely without it: "
                               "install util-linux (apt install util-linux)")
    if os.geteuid() != 0:
        return Sandbox()
    name = user or os.environ.get("TILELAB_SANDBOX_USER", DEFAULT_USER)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise SandboxError(
            f"running as root, student code must run as an unprivileged user, and {name!r} does not exist: "
            f"run ./scripts/secure-checkout (or useradd --system --no-create-home {name}), or name another user "
            "in TILELAB_SANDBOX_USER"
        ) from None
    if entry.pw_uid == 0:
        raise SandboxError(f"sandbox user {name!r} is root: name an unprivileged user in TILELAB_SANDBOX_USER")
    return Sandbox(user=name, uid=entry.pw_uid, gid=entry.pw_gid, isolate_network=_network_isolation_works())


# Gradings side by side each get a sandbox user of their own, held host-wide
# (sandbox_users.py): the first is the sandbox user itself, then <user>-2,
# <user>-3...; scripts/secure-checkout and docker/setup.sh make 3 per GPU and
# at least SANDBOX_USERS of them.
SANDBOX_USERS = 8


def slot_user(base: str, index: int) -> str:
    """The sandbox user of the index-th grading side by side (0-based)."""
    return base if index == 0 else f"{base}-{index + 1}"


def preflight(sandbox: Sandbox, secrets: list, needed: list) -> None:
    """Raises SandboxError when sandboxed code could read a secret file, or
    could not read what building and running a part needs."""
    if not sandbox.switches_user:
        return
    leaks = [p for p in secrets if p.exists() and sandbox.can_read(p)]
    if leaks:
        raise SandboxError(f"student code would run as {sandbox.user} and could read "
                           f"{', '.join(map(str, leaks))}: close them to others (scripts/secure-checkout)")
    blocked = [p for p in needed if not sandbox.can_read(p)]
    if blocked:
        raise SandboxError(f"student code runs as {sandbox.user}, who cannot read {', '.join(map(str, blocked))}: "
                           "the project and its build must be readable by others (a checkout under /root is not)")
