"""Parts already built, kept by the content they were built from.

A key digests everything a part's executable depends on (the part file, its
launcher and signature, the build it links into, the symbol audit's rules),
so an executable found under it is the one a new build would make. Only
executables that built, passed the audit and linked are kept, in a folder of
the grader's own (0700), and copied out before they run: code under test
never sees the folder, and nothing it writes reaches it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..spec.assignment import Part
from . import static_checks

# What every part's executable links or is compiled with, besides the part file.
_BUILD_INPUTS = ("CMakeCache.txt", "compile_commands.json", "grader/harness/libtilelab_harness.a",
                 "grader/harness/libtilelab_check.a")
_SOURCE_INPUTS = ("grader/harness/part_main.cu", "grader/harness/part_binding.h", "include/tilelab")


@dataclass(frozen=True)
class CachePolicy:
    one_per_part: bool  # keep only the part's latest executable
    max_bytes: int  # then drop the least recently used


# `tilelab check`: a student checks one file again and again; a part whose
# file has not changed is not compiled again.
CHECK_POLICY = CachePolicy(one_per_part=True, max_bytes=1 << 30)
# `tilelab grade` and `batch`: a class hands in many identical files (an
# untouched starter part, a file graded again); each is compiled once.
GRADE_POLICY = CachePolicy(one_per_part=False, max_bytes=1 << 30)  # about 1,800 executables of 0.6 MB
CHECK_CACHE_DIR = "check-cache"  # under the build tree: the parts `check` built last
PART_CACHE_DIR = "part-cache"  # under the build tree: the parts gradings built, by content


def _feed(digest, path: Path) -> None:
    for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
        if f.is_file():
            digest.update(f.name.encode())
            digest.update(f.read_bytes())


class BuildCache:
    def __init__(self, root: Path, build_dir: Path, folder: Path, policy: CachePolicy):
        self.folder = folder
        self.policy = policy
        base = hashlib.sha256()
        for rel in _BUILD_INPUTS:
            _feed(base, build_dir / rel)
        for rel in _SOURCE_INPUTS:
            _feed(base, root / rel)
        # Only executables that passed the symbol audit are kept: the audit's
        # rules are part of what a kept executable stands for.
        _feed(base, Path(static_checks.__file__))
        self._base = base.hexdigest()

    @property
    def base_digest(self) -> str:
        """The digest of what every part's executable depends on besides its
        own file: the build, the harness and the audit's rules."""
        return self._base

    def key(self, part: Part, source: Path, compute_capability: Optional[str] = None) -> str:
        """`compute_capability`: the GPU the part was built for alone (None: every GPU of the build)."""
        digest = hashlib.sha256(self._base.encode())
        digest.update(f"{part.id}\0{part.launcher}\0{part.signature}\0{compute_capability or 'all'}\0".encode())
        digest.update(source.read_bytes())
        return digest.hexdigest()[:32]

    def _place(self, part: Part, key: str) -> Path:
        return self.folder / f"{part.id}-{key}"

    def find(self, part: Part, key: str, dest: Path) -> Optional[Path]:
        """A copy at `dest` of the executable kept under `key`, or None."""
        return self._copy_out(self._place(part, key), dest)

    def find_library(self, part: Part, key: str, dest: Path) -> Optional[Path]:
        """A copy at `dest` of the part's shared object kept under `key`, or
        None (kept only where a grading linked one)."""
        return self._copy_out(_library_of(self._place(part, key)), dest)

    def _copy_out(self, kept: Path, dest: Path) -> Optional[Path]:
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(kept, dest)
            os.utime(kept)  # recently used
        except FileNotFoundError:
            return None  # not kept, or dropped while this looked
        except OSError:
            return None  # a cache that cannot be read is no cache: build
        return dest

    def keep(self, part: Part, key: str, binary: Path, library: Optional[Path] = None) -> None:
        """Keeps a copy of a freshly built executable, and of its shared
        object where one was linked (the library first: an executable found
        has its library beside it if one was kept). Gradings running beside
        each other may keep the same key at once: each writes a file of its
        own and renames it into place. A build tree the grader may not write
        to (shared read-only) keeps nothing."""
        place = self._place(part, key)
        if library is not None and not self._put(library, _library_of(place)):
            return
        if not self._put(binary, place):
            return
        if self.policy.one_per_part:
            for old in self.folder.glob(f"{part.id}-*"):
                if old.name not in (place.name, _library_of(place).name):
                    _remove(old)
        self._bound()

    def _put(self, built: Path, place: Path) -> bool:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.folder.chmod(0o700)
            handle, temp = tempfile.mkstemp(dir=self.folder, prefix=".new-")
        except OSError:
            return False
        os.close(handle)
        try:
            shutil.copy2(built, temp)
            os.replace(temp, place)
        except OSError:
            Path(temp).unlink(missing_ok=True)  # a full disk: the build itself is kept in its work folder
            return False
        return True

    def _bound(self) -> None:
        entries = []
        for f in self.folder.iterdir():
            try:
                st = f.stat()
            except FileNotFoundError:
                continue
            entries.append((st.st_mtime, st.st_size, f))
        total = sum(size for _, size, _ in entries)
        for _, size, f in sorted(entries, key=lambda e: e[0]):
            if total <= self.policy.max_bytes:
                break
            _remove(f)
            total -= size


def _library_of(place: Path) -> Path:
    return place.with_name(place.name + ".so")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)  # an entry of the older layout: a folder per part
    else:
        path.unlink(missing_ok=True)
