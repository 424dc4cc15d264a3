"""The class: its students, their submissions' digests, and which of them to grade again.

- A student is a directory of DIR whose name is safe and not one of batch's
  own files; DIR and OUT may not contain each other.
- OUT/<student>/.done, written last, holds the submission's digest, the seed
  and what ran (the GPU stages or not, the GPU, the calibration's
  fingerprint); an older marker reads what ran from grade.json.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...classwork.class_report_page import NAMES as CLASS_REPORT_NAMES
from ...classwork.class_report_page import SIMILARITY_CSV, SIMILARITY_PAGE
from ...errors import TilelabError
from ...outputs.leaderboard import LEADERBOARD_FILES
from ...spec.assignment import Assignment, AssignmentError, load_assignment
from ...system.atomic import read_json
from ...system.paths import ASSIGNMENT_FILE

# GRADEBOOK_FILE and SLURM_LOGS are named here because _RESERVED keeps students from taking them.
DONE_FILE = ".done"
GRADEBOOK_FILE = "gradebook.csv"
SLURM_LOGS = "slurm-logs"
# A student id becomes a directory name, a CSV cell and a word in a shell
# script: letters, digits and . _ + @ - only, not starting with a dot or a
# dash (".", "..", hidden directories, options).
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+@-]{0,127}")
# Names of what batch itself writes into OUT: a student may not take them.
_RESERVED = {GRADEBOOK_FILE, SLURM_LOGS, *LEADERBOARD_FILES, *CLASS_REPORT_NAMES, SIMILARITY_CSV, SIMILARITY_PAGE}

WITHOUT_GPU = "graded before without a GPU"  # the one reason a matching marker is graded again


class BatchError(TilelabError):
    """The batch cannot start: bad arguments or a machine that cannot grade."""


@dataclass
class Student:
    name: str
    path: Path
    problem: Optional[str] = None  # why it is skipped, when it is


def find_students(class_dir: Path) -> list:
    """Every subdirectory of DIR, sorted by name; those whose names are not
    safe carry the reason they are skipped. Plain files are not students
    (exports often hold a metadata file beside the submissions)."""
    students = []
    for entry in sorted(class_dir.iterdir(), key=lambda p: p.name):
        if not entry.is_dir():
            continue
        problem = None
        if not _SAFE_NAME.fullmatch(entry.name):
            problem = ("skipped: unsafe directory name (a student id may hold only letters, digits and . _ + @ -, "
                       "and may not start with . or -)")
        elif entry.name in _RESERVED:
            problem = f"skipped: {entry.name!r} is a name batch uses for its own files"
        students.append(Student(entry.name, entry, problem))
    return students


def submission_digest(path: Path) -> str:
    """A digest of every file name and content under `path`. The files are
    the student's: links are hashed as their targets (never followed) and
    FIFOs or devices by their names only (opening one could block)."""
    h = hashlib.sha256()

    def walk(directory: Path, rel: bytes) -> None:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            name = rel + os.fsencode(e.name)
            if e.is_symlink():
                h.update(b"L" + name + b"\0" + os.fsencode(os.readlink(e.path)) + b"\0")
            elif e.is_dir(follow_symlinks=False):
                h.update(b"D" + name + b"\0")
                walk(Path(e.path), name + b"/")
            elif e.is_file(follow_symlinks=False):
                content = hashlib.sha256()
                with open(e.path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        content.update(chunk)
                h.update(b"F" + name + b"\0" + content.digest())
            else:
                h.update(b"O" + name + b"\0")

    walk(path, b"")
    return h.hexdigest()


def _marker(out: Path) -> Optional[dict]:
    doc = read_json(out / DONE_FILE)
    return doc if isinstance(doc, dict) else None


def _what_ran(detailed) -> dict:
    """What ran, as a marker records it, from a grading's grade.json (all None, unknown, if it is unreadable)."""
    if not isinstance(detailed, dict):
        return dict.fromkeys(("gpu_stages", "gpu_name", "gpu_uuid", "calibration"))
    gpu, calibration = (detailed.get(k) if isinstance(detailed.get(k), dict) else {} for k in ("gpu", "calibration"))
    return {"gpu_stages": bool(gpu), "gpu_name": gpu.get("name"), "gpu_uuid": gpu.get("uuid"),
            "calibration": calibration.get("fingerprint")}


def regrade_reason(out: Path, gpus: list) -> Optional[str]:
    """Why a grading whose marker matches the files and the seed is graded
    again by a run on `gpus` (find_gpus, --gpus), or None. "Graded before
    without a GPU" is the only reason: a grading's targets are fractions of
    what the references reach on its own GPU, so another GPU or calibration
    is none."""
    ran = (_marker(out) or {}).get("gpu_stages")
    if not isinstance(ran, bool):  # a marker from before it was recorded
        ran = _what_ran(read_json(out / "grade.json"))["gpu_stages"]
    return WITHOUT_GPU if ran is False and gpus else None


def _already_graded(out: Path, digest: str, seed: Optional[int]) -> bool:
    """Graded before from these very files, with the seed asked for now (any
    seed when none is asked for: that grading's fresh seed stands)."""
    marker = _marker(out)
    if marker is None or not (out / "results.json").is_file() or not (out / "grade.json").is_file():
        return False
    return marker.get("submission_sha256") == digest and (seed is None or marker.get("seed") == seed)


def _assignment(root: Path) -> Assignment:
    try:
        return load_assignment(root / ASSIGNMENT_FILE)
    except (AssignmentError, OSError) as e:
        raise BatchError(str(e)) from None


def _check_dirs(class_dir: Path, out_dir: Path) -> tuple:
    class_dir, out_dir = Path(class_dir).resolve(), Path(out_dir).resolve()
    if not class_dir.is_dir():
        raise BatchError(f"{class_dir} is not a directory")
    # OUT inside DIR would be graded as a student, DIR inside OUT could be
    # wiped as one student's old results.
    if out_dir == class_dir or class_dir in out_dir.parents or out_dir in class_dir.parents:
        raise BatchError(f"the results ({out_dir}) and the submissions ({class_dir}) must not contain each other")
    return class_dir, out_dir
