"""The reference solutions compiled for the autograder bundle.

The grader times each part's reference on the GPU that grades to set its
speed targets (grading/calibration.py); the bundle carries no solution source
and is set up without a GPU, so it carries each reference compiled: machine
code for the portable architectures and PTX for newer GPUs (TILELAB_PORTABLE,
cmake/CudaArchitectures.cmake). They are built by the project's own CMake
with a part's very flags, so a part and its reference are compiled alike.
"""

from __future__ import annotations

import fcntl
import re
import sys
from pathlib import Path
from typing import Callable, Optional

from ..errors import TilelabError
from ..spec.assignment import Assignment
from ..system import process

BUILD_TIME_LIMIT = 1800
# A step of a CMake build as its Makefile generator ("[ 42%] Building CUDA
# object ...") or Ninja ("[12/80] Building ...") prints it.
_STEP = re.compile(r"^\[\s*(?:\d+%|\d+/\d+)\]\s*(?:Building|Linking)\b")


def cmake_progress(say: Callable[[str], None], label: str) -> Callable[[str], None]:
    """process.run's on_line for a build of the project's own: CMake's own
    progress, a line per step begun, under `label`."""
    def line(text: str) -> None:
        if _STEP.match(text):
            say(f"{label}: {re.sub(r'CMakeFiles/[^/ ]+[.]dir/', '', text.strip())}")
    return line


class ReferenceBuildError(TilelabError):
    """The references could not be compiled."""


def compile_references(root: Path, assignment: Assignment, tree: Path,
                       progress: Optional[Callable[[str], None]] = None) -> dict:
    """Compiles every part's reference into an object in `tree` (kept, so a
    second call recompiles only what changed): part id -> object path.
    `progress` hears each step, CMake's own lines included."""
    say = progress or (lambda message: None)
    tree.mkdir(parents=True, exist_ok=True)
    # Two bundles made at once (tests, gates) must not build one tree together.
    with open(tree / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another build of the references in {tree}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _compile(root, assignment, tree, say)


def _compile(root: Path, assignment: Assignment, tree: Path, say: Callable[[str], None]) -> dict:
    say("configuring the reference build (CMake)")
    configured = process.run(
        ["cmake", "-S", root, "-B", tree, "-DTILELAB_PORTABLE=ON", "-DTILELAB_BUILD_TESTS=OFF",
         "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}"], BUILD_TIME_LIMIT)
    if configured.exit_code != 0:
        raise ReferenceBuildError("configuring the reference build failed:\n" + configured.output[-3000:])
    targets = [f"reference_{p.id}_object" for p in assignment.parts]
    built = process.run(["cmake", "--build", tree, "-j", "--target", *targets], BUILD_TIME_LIMIT,
                        on_line=cmake_progress(say, "compiling the references"))
    if built.exit_code != 0:
        raise ReferenceBuildError("compiling the references failed:\n" + built.output[-3000:])
    objects = {}
    for p in assignment.parts:
        listing = tree / "reference" / f"{p.id}.objects"
        path = Path(listing.read_text().split(";")[0].strip())
        if not path.is_file():
            raise ReferenceBuildError(f"the reference of {p.id} compiled, but {path} is missing")
        objects[p.id] = path
    return objects
