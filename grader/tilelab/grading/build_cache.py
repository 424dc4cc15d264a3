"""Parts already built, kept for the student's edit loop.

`tilelab check` is run again and again while a student edits one file; a
part whose file has not changed since it was last built need not be
compiled again. The key is a digest of all a part's executable is made of:
the part file's bytes, the part's launcher and signature, the harness
libraries and sources it links, and the build's settings. One executable is
kept per part, the last one built.

Only `check` uses it: a student's own files on the student's own machine.
The grader builds every hand-in afresh.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Optional

from ..spec.assignment import Part

# What every part's executable links or is compiled with, besides the part file.
_BUILD_INPUTS = ("CMakeCache.txt", "grader/harness/libtilelab_harness.a", "grader/harness/libtilelab_check.a")
_SOURCE_INPUTS = ("grader/harness/part_main.cu", "include/tilelab")


def _feed(digest, path: Path) -> None:
    for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
        if f.is_file():
            digest.update(f.name.encode())
            digest.update(f.read_bytes())


class BuildCache:
    def __init__(self, root: Path, build_dir: Path, folder: Path):
        self.folder = folder
        base = hashlib.sha256()
        for rel in _BUILD_INPUTS:
            _feed(base, build_dir / rel)
        for rel in _SOURCE_INPUTS:
            _feed(base, root / rel)
        self._base = base.hexdigest()

    def key(self, part: Part, source: Path) -> str:
        digest = hashlib.sha256(self._base.encode())
        digest.update(f"{part.id}\0{part.launcher}\0{part.signature}\0".encode())
        digest.update(source.read_bytes())
        return digest.hexdigest()[:24]

    def _place(self, part: Part, key: str) -> Path:
        return self.folder / f"{part.id}-{key}" / part.id

    def find(self, part: Part, key: str) -> Optional[Path]:
        binary = self._place(part, key)
        return binary if binary.is_file() else None

    def keep(self, part: Part, key: str, binary: Path) -> Path:
        """Copies a freshly built executable in, in place of the part's older one."""
        for old in self.folder.glob(f"{part.id}-*"):
            shutil.rmtree(old, ignore_errors=True)
        kept = self._place(part, key)
        kept.parent.mkdir(parents=True)
        shutil.copy2(binary, kept)
        return kept
