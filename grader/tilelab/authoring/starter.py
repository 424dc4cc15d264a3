"""Generating the starter code from the solutions.

A solution file marks each piece students write with `// BEGIN SOLUTION`,
`// HINT: ...` lines, the solution code, `// END SOLUTION` and `// STUB: ...`
lines. In the starter the region becomes a TODO(student) comment of the hints
and the stub lines as code (strip_solution). Everything outside regions is
copied as it is, so the contract comments are the same in both files.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ..errors import TilelabError
from ..grading.answers_file import ANSWERS_FILE
from ..spec.assignment import Assignment
from ..spec.question_code import code_before

_BEGIN = re.compile(r"^(\s*)// BEGIN SOLUTION\s*$")
_END = re.compile(r"^\s*// END SOLUTION\s*$")
_HINT = re.compile(r"^\s*// HINT:(.*)$")
_STUB = re.compile(r"^\s*// STUB:(.*)$")


BEGIN_SOLUTION = _BEGIN


def region_marker(line: str) -> bool:
    """Whether a line of a solution file is a region's BEGIN, END or STUB marker, not code."""
    return bool(_BEGIN.match(line) or _END.match(line) or _STUB.match(line))


def solution_region_lines(text: str) -> list[str]:
    """The lines inside BEGIN/END SOLUTION regions, hints left out: what the
    starter never shows."""
    lines, inside = [], False
    for line in text.splitlines():
        if _BEGIN.match(line):
            inside = True
        elif _END.match(line):
            inside = False
        elif inside and not _HINT.match(line):
            lines.append(line)
    return lines


class StarterError(TilelabError):
    """A solution file's markers are malformed."""


def strip_solution(text: str, source: str) -> str:
    """Returns the starter version of one solution file's text. A stub must
    fail loudly when reached (TILELAB_TODO on the host, TILELAB_DEVICE_TODO
    in a kernel), so an unfinished part never passes a case by accident;
    except in a part whose starter is `working` (the challenge), where the
    stub is a correct, slow kernel that students make fast."""
    lines = text.splitlines()
    out: list[str] = []
    regions = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        begin = _BEGIN.match(line)
        if begin is None:
            if _END.match(line) or _STUB.match(line) or _HINT.match(line):
                raise StarterError(f"{source}:{i + 1}: {line.strip()!r} outside a BEGIN SOLUTION region")
            out.append(line)
            i += 1
            continue
        indent, start = begin.group(1), i + 1
        i += 1
        hints: list[str] = []
        while i < len(lines) and _HINT.match(lines[i]):
            hints.append(_HINT.match(lines[i]).group(1).removeprefix(" ").rstrip())
            i += 1
        if not hints:
            raise StarterError(f"{source}:{start}: a solution region must start with at least one '// HINT:' line")
        while i < len(lines) and not _END.match(lines[i]):
            if _BEGIN.match(lines[i]):
                raise StarterError(f"{source}:{i + 1}: BEGIN SOLUTION inside the region opened at line {start}")
            if _STUB.match(lines[i]) or _HINT.match(lines[i]):
                raise StarterError(f"{source}:{i + 1}: HINT and STUB lines belong right after BEGIN / END")
            i += 1
        if i == len(lines):
            raise StarterError(f"{source}:{start}: BEGIN SOLUTION without a matching END SOLUTION")
        i += 1  # the END line
        stubs: list[str] = []
        while i < len(lines) and _STUB.match(lines[i]):
            # Only the one space after "STUB:" goes, so a multi-line stub keeps its indentation.
            stubs.append(_STUB.match(lines[i]).group(1).removeprefix(" ").rstrip())
            i += 1
        if not stubs:
            raise StarterError(
                f"{source}:{start}: the region needs '// STUB:' lines after END SOLUTION "
                "(code that fails loudly, e.g. TILELAB_TODO(...))"
            )
        out.append(f"{indent}// TODO(student): {hints[0]}")
        out.extend(f"{indent}//   {h}" if h else f"{indent}//" for h in hints[1:])
        out.extend(f"{indent}{s}" for s in stubs)
        regions += 1
    if regions == 0:
        raise StarterError(f"{source}: no BEGIN SOLUTION region; the starter would be the solution")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class StarterFile:
    part_id: str
    path: Path
    text: str
    up_to_date: bool


def starter_files(assignment: Assignment, solutions_dir: Path, starter_dir: Path) -> list[StarterFile]:
    """The starter text for every part, and whether starter_dir already holds it."""
    files = []
    for part in assignment.parts:
        source = solutions_dir / part.file
        try:
            text = source.read_text(encoding="utf-8")
        except OSError as e:
            raise StarterError(f"{source}: cannot read the solution ({e.strerror})") from e
        starter = strip_solution(text, str(source))
        target = starter_dir / part.file
        current = target.read_text(encoding="utf-8") if target.exists() else None
        files.append(StarterFile(part.id, target, starter, current == starter))
    if assignment.questions:
        target = starter_dir / ANSWERS_FILE
        text = answers_template(assignment)
        current = target.read_text(encoding="utf-8") if target.exists() else None
        files.append(StarterFile("answers", target, text, current == text))
    return files


def answers_template(assignment: Assignment) -> str:
    """starter/answers.yaml: every question id with an empty answer, the
    question itself as a comment above it."""
    out = [
        "# Answers to the exercise questions of the handout. Write each answer after",
        "# its colon: a number without its unit (the question names the unit), the id",
        "# of one option, or a few sentences for the questions that ask you to explain",
        "# (quote text that contains a colon). Leave an answer empty to skip it.",
    ]
    placed = code_before(assignment)
    for q in assignment.questions:
        kind = {"number": "number", "choice": "choice: " + ", ".join(q.options), "text": "text"}[q.kind]
        # The code a question calls "shown above" is shown above it here too, as in the handout.
        for name in placed[q.id]:
            out += ["", f"# Code {name}, for the questions below that refer to it:", "#"]
            out += [f"#     {line}".rstrip() for line in assignment.question_code[name].rstrip("\n").split("\n")]
        out.append("")
        out += [f"# {line}" for line in textwrap.wrap(f"{q.id} ({kind}): {q.text}", width=96)]
        for option, text in q.options.items():
            out += [f"#   {line}" for line in textwrap.wrap(f"{option}: {text}", width=94, subsequent_indent="   ")]
        out.append(f"{q.id}:")
    return "\n".join(out) + "\n"


def write_starter(files: list[StarterFile]) -> list[Path]:
    """Writes the files that differ; returns their paths."""
    written = []
    for f in files:
        if not f.up_to_date:
            f.path.parent.mkdir(parents=True, exist_ok=True)
            f.path.write_text(f.text, encoding="utf-8")
            written.append(f.path)
    return written
