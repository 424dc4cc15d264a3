"""Where the project's files are."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

ASSIGNMENT_FILE = "assignment.yaml"
STARTER_DIR = "starter"  # under the project root: what students edit, generated from solutions/
# The answer key: under solutions/ in the checkout, under key/ in the
# autograder bundle (which has no solutions/).
ANSWER_KEY_FILE = "solutions/answers.yaml"
BUNDLED_ANSWER_KEY_FILE = "key/answers.yaml"
ANSWER_KEY_PLACES = (ANSWER_KEY_FILE, BUNDLED_ANSWER_KEY_FILE)
# The autograder bundle's reference solutions, compiled (<part>.o): it carries
# no solution source. cmake/reference/CMakeLists.txt links them.
COMPILED_REFERENCES_DIR = "references"


def _lock_dir() -> Path:
    """Root's graders keep their locks where only root may make a folder
    (/run): in a folder anybody may make (/run/lock, /tmp), a student who made
    it first would own it. Other users' are their own (a student's checks)."""
    uid = os.geteuid()
    if uid == 0 and Path("/run").is_dir():
        return Path("/run/tilelab/locks")
    return Path("/run/lock" if Path("/run/lock").is_dir() else "/tmp") / f"tilelab-locks-{uid}"


# Host-wide locks, shared by every grader process of one user on this host: the
# sandbox users each grading slot holds (sandbox_users.py) and each GPU's timing turn (gpu_lock.py).
LOCK_DIR = Path(os.environ.get("TILELAB_LOCK_DIR") or _lock_dir())


def open_lock_file(path: Path) -> IO:
    """A host-wide lock file, opened for flock, in a folder and a file of this
    user's alone (0700, 0600): a sandbox user who could open one, even only to
    read, could flock it and hold every grader on the host for as long as its
    run lasts; one who owned the folder could swap the files. OSError where
    the folder is another user's or the file cannot be opened: the caller
    then does without the host-wide lock."""
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.stat().st_uid != os.geteuid():
        raise PermissionError(f"{folder} belongs to another user")
    folder.chmod(0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)  # made by an older grader with the umask's mode
    return os.fdopen(fd, "a")

# The grader's own programs, which every grading needs, under <build>/bin.
GRADER_TOOLS = ("tilelab-verify", "tilelab-roofline", "tilelab-harness", "tilelab-contain")


def tool_path(build_dir: Path, name: str) -> Path:
    return Path(build_dir) / "bin" / name


def missing_tools(build_dir: Path) -> list[str]:
    """The grader programs a build tree lacks (empty: it can grade)."""
    return [t for t in GRADER_TOOLS if not tool_path(build_dir, t).exists()]


def unbuilt_reason(build_dir: Path) -> str | None:
    """Why `build_dir` cannot grade, or None when it can."""
    missing = missing_tools(build_dir)
    return f"{build_dir} holds no built project ({missing[0]} is missing)" if missing else None


def answer_key_path(root: Path, override: Path | None = None) -> Path:
    """The key to grade with: `override`, else the first of ANSWER_KEY_PLACES
    under root that exists, else where a checkout keeps it."""
    if override is not None:
        return Path(override)
    return next((root / p for p in ANSWER_KEY_PLACES if (root / p).is_file()), root / ANSWER_KEY_FILE)


def find_root(start: Path | None = None) -> Path:
    """The project root: $TILELAB_ROOT, else the nearest directory upwards
    from `start` (default: the working directory) holding assignment.yaml,
    else the checkout this package was loaded from."""
    env = os.environ.get("TILELAB_ROOT")
    if env:
        return Path(env).resolve()
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / ASSIGNMENT_FILE).is_file():
            return d
    package_checkout = Path(__file__).resolve().parents[3]
    if (package_checkout / ASSIGNMENT_FILE).is_file():
        return package_checkout
    raise FileNotFoundError(
        f"no {ASSIGNMENT_FILE} found above {here}; run from the project or set TILELAB_ROOT"
    )
