"""The last result of each `tilelab check`, kept by everything that decides it.

A student runs `check` again and again, often on a file that has not
changed since. A key digests all that a check's result depends on: the part
files and answers.yaml checked (and where in the folder they were found),
assignment.yaml, the answer key and the grading GPU's published figures,
the built tree (the build's inputs, the harness and the tools), the grader's
own code, the options and the seed, and the GPUs this host shows with its
driver. A check whose key was kept returns that result without running
anything; `check --again` runs it all again and keeps the new result.

Results are kept in the user's own cache folder ($TILELAB_CACHE_DIR, else
~/.cache/tilelab, mode 0700): a shared build tree never serves one user's
result to another. Reading the key costs no CUDA process, so an unchanged
check starts no GPU work at all.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .. import __version__
from ..grading import gpu_cache
from ..grading.answers_file import ANSWERS_FILE
from ..grading.build_cache import CHECK_CACHE_DIR, CHECK_POLICY, BuildCache
from ..grading.calibration import REFERENCE_DIR
from ..grading.handin_files import locate
from ..grading.model import GradeResult
from ..grading.options import GradeOptions
from ..spec.assignment import load_assignment
from ..spec.reference_gpu import REFERENCE_GPU_PATH
from ..system.atomic import write_atomically
from ..system.paths import ANSWER_KEY_PLACES, ASSIGNMENT_FILE

RESULTS_DIR = "check-results"  # under gpu_cache.cache_dir()
KEPT = 64  # results kept, the most recently used
# Bumped when what a kept result holds changes shape.
_FORMAT = "check-result-1"
_GRADER = Path(__file__).resolve().parents[1]  # the tilelab package
_TOOLS = ("tilelab-verify", "tilelab-harness", "tilelab-roofline", "tilelab-contain")
_NVIDIA = Path("/proc/driver/nvidia")


@dataclass(frozen=True)
class Kept:
    """A result kept for a key, and when it was checked."""

    result: GradeResult
    data: dict  # the result as grade.json holds it
    checked_at: str  # local time, HH:MM:SS
    breakdown: dict  # the command's own figures of that run (check_run.py), for --verbose


class _Digest:
    def __init__(self) -> None:
        self._h = hashlib.sha256(_FORMAT.encode())

    def text(self, *values) -> None:
        for v in values:
            self._h.update(str(v).encode() + b"\0")

    def file(self, path: Path) -> None:
        """The bytes of a file, or that it is missing."""
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            self.text(path, "unreadable", type(e).__name__)
            return
        self.text(path, len(data))
        self._h.update(data)

    def stat(self, path: Path) -> None:
        """A large file's size and modification time, standing for its bytes."""
        try:
            st = Path(path).stat()
        except OSError:
            self.text(path, "missing")
            return
        self.text(path, st.st_size, st.st_mtime_ns)

    def tree(self, folder: Path, pattern: str = "*", stat: bool = False) -> None:
        for f in sorted(Path(folder).rglob(pattern)) if Path(folder).is_dir() else []:
            if f.is_file() and "__pycache__" not in f.parts:
                (self.stat if stat else self.file)(f)

    def hexdigest(self) -> str:
        return self._h.hexdigest()[:40]


def check_key(submission: Path, options: GradeOptions) -> str:
    """The key of a check of `submission` with `options`: equal keys, equal results."""
    d = _Digest()
    assignment = load_assignment(options.root / ASSIGNMENT_FILE)
    parts = [] if options.answers_only else [p for p in assignment.parts if not options.parts or p.id in options.parts]
    d.text("options", options.mode, options.parts, options.answers_only, options.questions, options.sanitizers,
           options.timing, options.counters, options.draw_seed(), os.getuid())
    # The folder graded and the notes and hints of where files were found depend on every file in it.
    located = locate(submission, tuple(p.file for p in assignment.parts) + (ANSWERS_FILE,))
    d.text("hand-in", located.handed_in.resolve(), located.folder.resolve(), located.notes,
           sorted(located.elsewhere.items()))
    for p in parts:
        d.file(located.folder / p.file)
    if options.questions or options.answers_only:
        d.file(located.folder / ANSWERS_FILE)
    d.text("assignment")
    d.file(options.root / ASSIGNMENT_FILE)
    d.file(options.root / REFERENCE_GPU_PATH)
    for key in [options.answer_key] if options.answer_key else [options.root / p for p in ANSWER_KEY_PLACES]:
        d.file(key)
    d.text("build", options.root, options.build_dir,
           BuildCache(options.root, options.build_dir, options.build_dir / CHECK_CACHE_DIR, CHECK_POLICY).base_digest)
    for tool in _TOOLS:
        d.stat(options.build_dir / "bin" / tool)
    d.tree(options.build_dir / REFERENCE_DIR, stat=True)  # the references timed for the speed targets
    d.text("grader", __version__)
    d.tree(_GRADER)
    d.text("gpu", socket.gethostname(), os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
    d.file(_NVIDIA / "version")
    d.tree(_NVIDIA / "gpus", "information")
    _gpu_figures(d)
    return d.hexdigest()


def _gpu_figures(d: _Digest) -> None:
    """The ceilings and calibrations measured on this machine's GPUs: new figures, new targets."""
    folder = gpu_cache.cache_dir()
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        d.stat(f)


def results_dir() -> Path:
    return gpu_cache.cache_dir() / RESULTS_DIR


def worth_keeping(result: GradeResult) -> bool:
    """Whether a result is the submission's and not the machine's: a stage
    the grader itself failed in, or a GPU the host shows that the check could
    not use, is tried again next time rather than kept."""
    if any(st.status == "error" for p in result.parts for st in p.stages.values()):
        return False
    return not (result.gpu is None and result.parts and any((_NVIDIA / "gpus").glob("*/information")))


def find(key: str) -> Optional[Kept]:
    """The result kept under `key`, or None (none kept, or unreadable: then the check runs)."""
    path = results_dir() / f"{key}.json"
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        result = GradeResult.from_dict(kept["result"])
        os.utime(path)  # recently used
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return Kept(result, kept["result"], str(kept.get("checked_at", "")), dict(kept.get("breakdown") or {}))


def keep(key: str, result: GradeResult, breakdown: Optional[dict] = None) -> None:
    """Keeps `result` under `key`; a cache folder that cannot be written keeps nothing."""
    folder = results_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
        write_atomically(folder / f"{key}.json", json.dumps(
            {"checked_at": dt.datetime.now().strftime("%H:%M:%S"), "breakdown": breakdown or {},
             "result": result.to_dict()}))
        _bound(folder)
    except OSError:
        return


def _bound(folder: Path) -> None:
    entries = []
    for f in folder.glob("*.json"):
        try:
            entries.append((f.stat().st_mtime, f))
        except FileNotFoundError:
            continue
    for _, f in sorted(entries, reverse=True)[KEPT:]:
        f.unlink(missing_ok=True)
