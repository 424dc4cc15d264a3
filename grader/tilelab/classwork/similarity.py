"""Which hand-ins look alike: per part file, the pairs of a class ranked by
how much code they share once the starter is taken out.

copydetect does the detection, as MOSS does it: k-grams of the normalised
code hashed and winnowed (CodeFingerprint), the starter's fingerprints
dropped as boilerplate, and the shared code of a pair found and marked
(compare_files). The normalised code is copydetect's own filtered form of
pygments' tokens (names, strings, comments and whitespace taken out),
written by similarity_normalise.py, which also takes out what copying CUDA
changes: tile widths and the order of independent statements. Comparing
every pair through copydetect would be 79,800 comparisons a part for 400
students; instead a matrix product over the fingerprints counts what every
pair shares, and compare_files marks the code of the pairs listed.

A score is the share of fingerprints the two hand-ins have in common,
2 x shared / (A's + B's), as Dolos defines it: 1 for two files that are the
same after normalising, 0 for two that share nothing beyond the starter. It
ranks; it never decides. Students solve the same small problem from the
same lectures, and honest pairs share fragments too.

The class is what `tilelab batch` grades: one folder per student (found by
operations.batch.find_students, which the caller passes in: that layer sits
above this one), each hand-in's folder found as a grading finds it
(grading.handin_files.locate). No GPU and no grading is needed.
"""

from __future__ import annotations

import os
import io
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect import defaults as copydetect_defaults

from ..errors import TilelabError
from ..grading.answers_file import ANSWERS_FILE
from ..grading.handin_files import locate
from ..spec.assignment import Assignment
from .similarity_normalise import Normalised, normalise, source_lines

# copydetect's own defaults: fragments shorter than NOISE characters of
# normalised code are never matched, and every fragment of GUARANTEE
# characters or more is.
NOISE = copydetect_defaults.NOISE_THRESHOLD
WINDOW = copydetect_defaults.GUARANTEE_THRESHOLD - NOISE + 1
THRESHOLD = copydetect_defaults.DISPLAY_THRESHOLD  # pairs below it are not listed
# Processes that lex a large class: a laptop's cores; more gain little.
WORKERS = min(8, os.cpu_count() or 1)
TOP = 25  # pairs listed per part
SLICE = 4096  # fingerprints per matrix product: 6.5 MB for 400 hand-ins
PARALLEL_FROM = 200  # files: below this a pool of processes costs more than it saves
MAX_BYTES = 256 * 1024  # a part file larger than this is not a hand-written kernel: not compared


class SimilarityError(TilelabError):
    """The class cannot be compared: no such folder, no students, no part files."""


@dataclass(frozen=True)
class Side:
    """One hand-in of a pair: its file as handed in, and the lines in fragments it shares with the other."""

    student: str
    lines: tuple  # the file's lines
    shared: tuple  # 1-based numbers of the lines in shared fragments, sorted


@dataclass(frozen=True)
class Pair:
    part: str  # the part's id
    file: str  # its file name
    a: Side  # the student whose name sorts first
    b: Side
    score: float  # 2 x shared fingerprints / (A's + B's), in 0..1


@dataclass(frozen=True)
class Ranking:
    """What `compare_class` found: the pairs listed, part by part in the
    assignment's order and most alike first, and how it was done."""

    pairs: tuple
    compared: dict  # part id -> hand-ins that hold its file
    parts: tuple  # (id, file) of every part, in the assignment's order
    notes: tuple = ()  # students or files left out, and why
    top: int = TOP
    threshold: float = THRESHOLD
    title: str = ""


@dataclass
class _HandIn:
    student: str
    code: str
    normalised: Normalised = field(repr=False, default=None)
    fingerprint: CodeFingerprint = field(repr=False, default=None)


def check_class_dir(class_dir: Path, assignment: Assignment) -> Path:
    """The class folder, or a one-line error: it must exist, and hold
    folders of students rather than a hand-in's own files."""
    class_dir = Path(class_dir)
    if not class_dir.is_dir():
        raise SimilarityError(f"{class_dir} is not a folder: give the folder that holds one folder per student")
    own = sorted(p.file for p in assignment.parts if (class_dir / p.file).is_file())
    if own:
        raise SimilarityError(f"{class_dir} holds part files itself ({', '.join(own)}): give the folder that holds "
                              "one folder per student, as for tilelab batch")
    return class_dir.resolve()


def check_dirs(class_dir: Path, out_dir: Path, assignment: Assignment) -> Path:
    """check_class_dir, and the output folder outside it: inside, the next
    run would take it for a student."""
    class_dir = check_class_dir(class_dir, assignment)
    out_dir = Path(out_dir).resolve()
    if out_dir == class_dir or class_dir in out_dir.parents:
        raise SimilarityError(f"the output folder {out_dir} is inside the class {class_dir}: choose another --out")
    return class_dir


def _read(path: Path) -> tuple:
    """(text, None) or (None, why not). Links are not followed: a hand-in's
    link could name any file of the machine."""
    if path.is_symlink():
        return None, "is a symbolic link"
    if not path.is_file():
        return None, None
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            return None, f"is {size // 1024} KB, over the {MAX_BYTES // 1024} KB compared"
        return path.read_bytes().decode("utf-8", errors="replace"), None
    except OSError as e:
        return None, f"cannot be read ({e.strerror or e})"


def read_hand_ins(assignment: Assignment, students: Sequence) -> tuple:
    """({part id: {student: code}}, notes) for `students` as
    operations.batch.find_students gives them (name, path, problem)."""
    names = tuple(p.file for p in assignment.parts) + (ANSWERS_FILE,)
    codes = {p.id: {} for p in assignment.parts}
    notes = []
    for student in students:
        if student.problem:
            notes.append(f"{student.name}: {student.problem}")
            continue
        folder = locate(student.path, names).folder
        found = 0
        for part in assignment.parts:
            code, why = _read(folder / part.file)
            if code is not None:
                codes[part.id][student.name] = code
                found += 1
            elif why:
                notes.append(f"{student.name}: {part.file} {why}: not compared")
        if not found:
            notes.append(f"{student.name}: no part file ({', '.join(p.file for p in assignment.parts)}): "
                         "not compared")
    return codes, notes


def _normalised(codes: list, workers: int) -> list:
    """similarity_normalise.normalise of every code, in `workers` processes
    for a large class: lexing is most of the time, and each file is lexed
    alone. (Only the normalised text crosses processes: copydetect's hashes
    are Python's, which differ from one process to another.)"""
    if workers > 1 and len(codes) >= PARALLEL_FROM:
        with ProcessPoolExecutor(workers) as pool:
            return list(pool.map(normalise, codes, chunksize=max(1, len(codes) // (8 * workers))))
    return [normalise(code) for code in codes]


def _fingerprint(name: str, normalised: Normalised, boilerplate: np.ndarray) -> CodeFingerprint:
    # Already in copydetect's filtered form (similarity_normalise): filter=False keeps copydetect from lexing it again.
    return CodeFingerprint(name, NOISE, WINDOW, boilerplate=boilerplate, filter=False,
                           fp=io.StringIO(normalised.text))


def _boilerplate(name: str, starter) -> np.ndarray:
    """The fingerprints of the part's starter file: code every student was given."""
    if starter is None:
        return np.array([], dtype=np.int64)
    return np.array(sorted(_fingerprint(name, starter, np.array([], dtype=np.int64)).hashes), dtype=np.int64)


def _shared_counts(hand_ins: list) -> np.ndarray:
    """For every two hand-ins, how many fingerprints they share: a matrix
    product over the fingerprints that more than one hand-in holds, a slice
    of them at a time (large files have hundreds of thousands)."""
    owners: dict = {}
    for i, h in enumerate(hand_ins):
        for value in h.fingerprint.hashes:
            owners.setdefault(value, []).append(i)
    held_by = [o for o in owners.values() if len(o) > 1]
    shared = np.zeros((len(hand_ins), len(hand_ins)), dtype=np.float32)
    for first in range(0, len(held_by), SLICE):
        held = np.zeros((len(hand_ins), min(SLICE, len(held_by) - first)), dtype=np.float32)
        for col, rows in enumerate(held_by[first:first + SLICE]):
            held[rows, col] = 1.0
        # Exact: float32 holds whole numbers up to 2**24, far above a file's fingerprints.
        shared += held @ held.T
    return shared


def _ranked(hand_ins: list, top: int, threshold: float) -> list:
    """(score, i, j) of the `top` pairs most alike that share something and reach `threshold`."""
    if len(hand_ins) < 2:
        return []
    shared = _shared_counts(hand_ins)
    sizes = np.array([len(h.fingerprint.hashes) for h in hand_ins], dtype=np.float64)
    i, j = np.triu_indices(len(hand_ins), 1)
    together = sizes[i] + sizes[j]
    scores = np.divide(2 * shared[i, j], together, out=np.zeros(len(i)), where=together > 0)
    keep = (shared[i, j] > 0) & (scores >= threshold)
    i, j, scores = i[keep], j[keep], scores[keep]
    order = np.lexsort((j, i, -scores))[:top]  # ties: by the students' names, as the hand-ins are sorted
    return [(float(scores[k]), int(i[k]), int(j[k])) for k in order]


def _side(hand_in: _HandIn, slices: np.ndarray) -> Side:
    lines = set()
    for start, end in zip(*slices) if len(slices) and len(slices[0]) else ():
        lines.update(hand_in.normalised.lines[int(start):int(end)].tolist())
    return Side(hand_in.student, tuple(source_lines(hand_in.code)), tuple(sorted(lines)))


def _pair(part, a: _HandIn, b: _HandIn, score: float) -> Pair:
    _, _, (slices_a, slices_b) = compare_files(a.fingerprint, b.fingerprint)
    return Pair(part.id, part.file, _side(a, slices_a), _side(b, slices_b), score)


def compare_class(assignment: Assignment, class_dir: Path, students: Sequence, starter_dir: Path, *,
                  top: int = TOP, threshold: float = THRESHOLD, workers: int = 1) -> Ranking:
    """Every part's `top` most alike pairs of hand-ins scoring `threshold` or
    more. `students`: operations.batch.find_students(class_dir);
    `starter_dir`: the starter (ROOT/starter), taken out as boilerplate;
    `workers`: processes that lex the files of a large class."""
    class_dir = check_class_dir(class_dir, assignment)
    if not students:
        raise SimilarityError(f"{class_dir} holds no student folders: give the folder that holds one folder per "
                              "student, as for tilelab batch")
    codes, notes = read_hand_ins(assignment, students)
    if not any(codes.values()):
        files = ", ".join(p.file for p in assignment.parts)
        raise SimilarityError(f"no student folder of {class_dir} holds a part file ({files}): nothing to compare")
    hand_ins = {p.id: [_HandIn(student, code) for student, code in sorted(codes[p.id].items())]
                for p in assignment.parts}
    starters = {p.id: _read(Path(starter_dir) / p.file)[0] for p in assignment.parts}
    given = [p.id for p in assignment.parts if starters[p.id] is not None]
    every = [h for p in assignment.parts for h in hand_ins[p.id]]
    normalised = iter(_normalised([h.code for h in every] + [starters[part] for part in given], workers))
    for h in every:
        h.normalised = next(normalised)
    starter_forms = {part: next(normalised) for part in given}
    pairs = []
    for part in assignment.parts:
        boilerplate = _boilerplate(part.file, starter_forms.get(part.id))
        for h in hand_ins[part.id]:
            h.fingerprint = _fingerprint(f"{h.student}/{part.file}", h.normalised, boilerplate)
        ranked = _ranked(hand_ins[part.id], top, threshold)
        pairs += [_pair(part, hand_ins[part.id][i], hand_ins[part.id][j], score) for score, i, j in ranked]
    return Ranking(tuple(pairs), {p.id: len(codes[p.id]) for p in assignment.parts},
                   tuple((p.id, p.file) for p in assignment.parts), tuple(notes), top, threshold, assignment.title)
