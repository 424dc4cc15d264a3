"""The code the handout shows: each part's functions that hold work to do,
not whole files, and a type size at which no line of it wraps in the PDF.

The student edition shows, from starter/<file>, every function that holds a
TODO(student) comment; the TA edition shows the same functions from
solutions/<file>, reference code in place of the TODO, with the region
markers left out. Neither edition shows code from the other's file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import TilelabError
from ..spec.assignment import Part
from ..system.paths import STARTER_DIR
from .starter import BEGIN_SOLUTION, region_marker

SOLUTIONS_DIR = "solutions"

_TODO = re.compile(r"//\s*TODO\(student\)")

# The width a code block has on an A4 page of handout.html.j2 (180 mm between
# the margins, less the block's padding and border), in points, and the
# advance of one DejaVu Sans Mono character in ems (1233 / 2048, rounded up a
# little so that a line that fits by the sum does fit on the page).
CODE_WIDTH_PT = 510.2 - 2 * 6.0 - 2 * 0.75
MONO_ADVANCE_EM = 0.61
CODE_PT = 7.6  # the type size of code where every line fits at it
DECLARATION_PT = 8.6
# Below this a printed line is hard to read: a longer line is an error in the
# source to fix (about 135 characters), not something to shrink further.
SMALLEST_CODE_PT = 6.0


class CodeError(TilelabError):
    """A part file cannot be shown: missing, without work marked, or with a line too long to print."""


@dataclass(frozen=True)
class Excerpt:
    path: str    # relative to the project root: "starter/tiled.cu"
    first: int   # 1-based line numbers in that file, inclusive
    last: int
    lines: tuple  # the lines shown, verbatim from the file

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def fitting_pt(lines, largest: float = CODE_PT, where: str = "") -> float:
    """The type size, at most `largest`, at which the longest of `lines`
    fits the page's code width, rounded down to a tenth of a point."""
    longest = max((len(line.expandtabs(4)) for line in lines), default=0)
    if longest == 0:
        return largest
    size = min(largest, int(CODE_WIDTH_PT / (MONO_ADVANCE_EM * longest) * 10) / 10)
    if size < SMALLEST_CODE_PT:
        raise CodeError(f"{where or 'code'}: a line of {longest} characters does not fit the handout's page at "
                        f"{SMALLEST_CODE_PT} pt; break it in the source")
    return size


def _read(root: Path, rel: str) -> list:
    try:
        return (Path(root) / rel).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise CodeError(f"{Path(root) / rel}: cannot read it ({e.strerror})") from e


def _starts_a_head(line: str) -> bool:
    # A function's head starts in column 0 (a continued parameter list is
    # indented); so do comments, closing braces and #pragma, which are not heads.
    return bool(line[:1].strip()) and not line.startswith(("//", "}", "#"))


def _function_around(lines: list, at: int) -> tuple:
    """(first, last) 0-based of the function that holds line `at`: from the
    comment and template lines right above its head to its closing brace."""
    head = at
    while head > 0 and not _starts_a_head(lines[head]):
        head -= 1
    while head > 0 and lines[head - 1].strip():
        head -= 1
    last = at
    while last < len(lines) - 1 and not lines[last].startswith("}"):
        last += 1
    return head, last


def _windows(lines: list, marked) -> list:
    """The functions holding a marked line, overlapping ones merged, in file order."""
    windows = []
    for at, line in enumerate(lines):
        if marked.search(line):
            first, last = _function_around(lines, at)
            if windows and first <= windows[-1][1]:
                windows[-1] = (windows[-1][0], max(last, windows[-1][1]))
            else:
                windows.append((first, last))
    return windows


def part_excerpts(root: Path, part: Part, ta: bool) -> list:
    """The excerpts of a part's file that an edition shows."""
    rel = f"{SOLUTIONS_DIR if ta else STARTER_DIR}/{part.file}"
    lines = _read(root, rel)
    windows = _windows(lines, BEGIN_SOLUTION if ta else _TODO)
    if not windows:
        raise CodeError(f"{rel}: no {'BEGIN SOLUTION' if ta else 'TODO(student)'} line, so nothing to show "
                        f"of part {part.id}")
    excerpts = []
    for first, last in windows:
        # The region markers are not code: they go from the TA edition's excerpts.
        shown = tuple(line for line in lines[first:last + 1] if not (ta and region_marker(line)))
        excerpts.append(Excerpt(rel, first + 1, last + 1, shown))
    return excerpts


_CONSTANTS = re.compile(r"^constexpr\s+(?:int|size_t)\s+(.*);", re.M)
_DECLARATOR = re.compile(r"^\s*(\w+)\s*=\s*(\d+(?:\s*\*\s*\d+)*)\s*$")


def starter_constants(root: Path, part: Part) -> dict:
    """{name: value} of the `constexpr int` and `constexpr size_t` constants of
    starter/<file> set to a number or a product of numbers (`constexpr int
    kWM = 64, kWN = 64;`, `48 * 1024`). They lie outside the solution regions,
    so the starter and the solution agree on them, the student edition needs
    nothing from solutions/, and the text about them can be read from the
    code rather than written again."""
    try:
        text = (Path(root) / STARTER_DIR / part.file).read_text(encoding="utf-8")
    except OSError:
        return {}
    found = {}
    for declaration in _CONSTANTS.findall(text):
        for declarator in declaration.split("//")[0].split(","):
            match = _DECLARATOR.match(declarator)
            if match:
                found[match.group(1)] = math.prod(int(f) for f in match.group(2).split("*"))
    return found


def excerpt_views(root: Path, part: Part, ta: bool) -> list:
    """[{"label", "code", "font_pt"}] for the templates."""
    views = []
    for e in part_excerpts(root, part, ta):
        label = f"{e.path}, lines {e.first}–{e.last}"
        views.append({"label": label + (", without the region markers" if ta else ""), "code": e.text,
                      "font_pt": fitting_pt(e.lines, where=label)})
    return views
