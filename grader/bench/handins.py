"""The load a deadline brings, for the benchmarks: complete, distinct
hand-ins (every part written, every file different), made from the
reference solutions by edits that keep them correct and defeat every cache
the grader keeps (the build cache and the check cache are keyed on a part
file's bytes). A hand-in that fails early measures nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from tilelab.grading.answers_file import ANSWERS_FILE
from tilelab.spec.assignment import load_assignment
from tilelab.system.paths import ASSIGNMENT_FILE


def distinct_hand_ins(root: Path, count: int, class_dir: Path, tag: str = "") -> list:
    """`count` folders under `class_dir` (emptied first), one per student
    (s001, s002, ...), each the reference solutions with a line of its own
    in every part file and the key as its answers; returns their paths.
    `tag`: a word in that line, so that two runs of a benchmark share no file
    either (a fresh build cache is not needed then)."""
    assignment = load_assignment(root / ASSIGNMENT_FILE)
    shutil.rmtree(class_dir, ignore_errors=True)
    class_dir.mkdir(parents=True)
    made = []
    for i in range(1, count + 1):
        folder = class_dir / f"s{i:03d}"
        folder.mkdir()
        for part in assignment.parts:
            source = (root / "solutions" / part.file).read_text()
            # A line of its own, at the end: the code and its line numbers stay as they are.
            (folder / part.file).write_text(f"{source.rstrip()}\n// hand-in {i}{' ' + tag if tag else ''}\n")
        shutil.copyfile(root / "solutions" / ANSWERS_FILE, folder / ANSWERS_FILE)
        made.append(folder)
    return made
