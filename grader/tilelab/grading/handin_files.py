"""Where a hand-in's files are: at the top of the folder handed in, or in
the one folder that wraps them.

Students zip a folder, and Gradescope unpacks a zip as it is, so the part
files often sit in `hw3/` below the folder graded. As the service's uploads
do (operations/service/uploads.py), the one folder that holds the hand-in's
files is graded, and a grading note says which. Several such folders are
not guessed between: the note lists them. A file the grading would miss
because it is deeper or named a little differently (`Naive.cu`,
`naive (1).cu`, `hw3/src/naive.cu`) is named in the hints of the part it
belongs to. Symbolic links are never followed, and the search is bounded in
depth and in entries, so a huge or hostile tree costs a few milliseconds.
"""

from __future__ import annotations

import os
import re
from itertools import islice
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 4  # folders below the hand-in searched for a misplaced file
MAX_ENTRIES = 2000  # entries looked at in all, folders and ignored ones included
MAX_SHOWN = 3  # files found elsewhere listed for one expected name

# What an editor or a download adds to a name: "naive (1)", "naive copy",
# "naive - Copy", "naive_copy2". The rest of the name must match exactly.
_COPY_SUFFIX = re.compile(r"(?:\s*\(\d+\)|[\s_-]*(?:-\s*)?copy(?:[\s_-]*\(?\d+\)?)?)$")


@dataclass(frozen=True)
class Located:
    """What `locate` found."""

    handed_in: Path  # the folder as given
    folder: Path  # the folder graded: handed_in, or the one folder inside it that holds the hand-in's files
    notes: tuple = ()  # for the grading's notes: which folder was graded, or why none inside was chosen
    elsewhere: dict = field(default_factory=dict)  # expected name -> files found instead, relative to handed_in

    @property
    def unwrapped(self) -> bool:
        return self.folder != self.handed_in

    def where(self, name: str) -> str:
        """Where `name` was expected, in words relative to the hand-in."""
        return f"{self.folder.name}/{name}" if self.unwrapped else f"{name} at the top of the hand-in"

    def hints(self, name: str) -> list:
        """What to do about `name`, when it was missing but something like it was found."""
        found = self.elsewhere.get(name)
        if not found:
            return []
        return [f"Expected {self.where(name)}; found {', '.join(found)} instead. The grader takes a file only "
                "under its exact name (capitals included) in the folder it grades: move or rename it."]


def ignored(name: str) -> bool:
    """macOS metadata that Finder and bsdtar add to students' archives unasked."""
    return name == "__MACOSX" or name.startswith("._") or name == ".DS_Store"


def plain_name(name: str) -> str:
    """The name as it was probably meant: lower case, without a copy's
    suffix, `.yml` as `.yaml`, without a `.txt` an editor added."""
    name = name.lower()
    if name.endswith(".txt") and "." in name[:-4]:
        name = name[:-4]
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    stem = _COPY_SUFFIX.sub("", stem).strip()
    ext = "yaml" if ext == "yml" else ext
    return f"{stem}.{ext}" if dot else stem


def _walk(top: Path) -> list:
    """The files below `top` as tuples of path parts, breadth first,
    never through a link, at most MAX_DEPTH folders down and MAX_ENTRIES
    entries in all; macOS metadata is skipped. A link counts as a file."""
    files, seen = [], 0
    level = [()]
    for _depth in range(MAX_DEPTH + 1):
        below = []
        for parts in level:
            try:
                with os.scandir(top.joinpath(*parts)) as it:
                    # Read no more than the bound allows, then sort: the walk is the same on every file system.
                    entries = sorted(islice(it, MAX_ENTRIES + 1 - seen), key=lambda e: e.name)
            except OSError:
                continue  # unreadable: what it holds cannot be graded either
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    return files
                if ignored(entry.name):
                    continue
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                (below if is_dir else files).append(parts + (entry.name,))
        level = below
    return files


def locate(handed_in: Path, names: tuple) -> Located:
    """The folder to grade in `handed_in` and the files of `names` (the
    assignment's part files and answers.yaml) found out of place."""
    handed_in = Path(handed_in)
    files = _walk(handed_in)
    top = {parts[0] for parts in files if len(parts) == 1}
    folder, notes = handed_in, []
    if not top & set(names):
        holding: dict = {}
        for parts in files:
            if len(parts) == 2 and parts[1] in names:
                holding.setdefault(parts[0], []).append(parts[1])
        if len(holding) == 1:
            wrapper = next(iter(holding))
            folder = handed_in / wrapper
            notes.append(f"The hand-in's files are in its folder {wrapper}/, not at its top: that folder was "
                         "graded.")
        elif holding:
            listed = "; ".join(f"{d}/ ({', '.join(held)})" for d, held in sorted(holding.items()))
            notes.append(f"The hand-in's files are not at its top but in {len(holding)} folders: {listed}. None of "
                         "them was graded: hand in one folder, or the files alone.")
    inside = folder.relative_to(handed_in).parts
    present = {parts[-1] for parts in files if parts[:-1] == inside}
    elsewhere = {}
    for name in names:
        if name in present:
            continue
        found = ["/".join(parts) for parts in files if plain_name(parts[-1]) == name.lower()]
        if found:
            elsewhere[name] = found[:MAX_SHOWN] + ([f"and {len(found) - MAX_SHOWN} more"]
                                                   if len(found) > MAX_SHOWN else [])
    return Located(handed_in, folder, tuple(notes), elsewhere)
