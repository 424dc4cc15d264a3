"""A class made to test and time `tilelab similarity`: hand-ins written
from the solutions as different students would write them, copies of some
of them disguised the way copiers disguise code, and hand-ins that only
kept the starter.

- Honest: each line a student writes (the solutions' BEGIN/END SOLUTION
  regions) in a style of its own: operands of + and * in another order,
  `x += y` or `x = x + y`, `++i`, `i++` or `i += 1`, with or without
  `const`, conditions swapped, comments of their own or none. Two honest
  hand-ins then share the shape of a kernel, as real ones do, and few
  lines written the same way.
- Copied: another student's hand-in with every name they declared renamed,
  the tile and block widths changed (32 to 16, 16 to 32), independent
  neighbouring statements swapped, comments dropped and indentation
  changed.
- Starter only: the starter as handed out, or with its comments and
  indentation changed.
"""

from __future__ import annotations

import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tilelab.grading.answers_file import ANSWERS_FILE
from tilelab.spec.assignment import load_assignment
from tilelab.system.paths import ASSIGNMENT_FILE

_MARKER = re.compile(r"^\s*// (BEGIN SOLUTION|END SOLUTION|HINT:|STUB:)")
_DECLARED = re.compile(r"\b(?:int|float|size_t|dim3|bool|auto|float4)\b\s*\*?\s+(\w+)\s*(?:=|;|\(|\[)")
_WIDTHS = {"8": "16", "16": "32", "32": "16", "64": "32", "128": "64"}


@dataclass
class MadeClass:
    """Who is who in a class made by make_class."""

    folder: Path
    honest: list = field(default_factory=list)
    copies: list = field(default_factory=list)  # (original, copy) pairs of student names
    starter_only: list = field(default_factory=list)

    @property
    def students(self) -> list:
        return sorted(self.honest + [c for _, c in self.copies] + self.starter_only)


def _split_top(expr: str, sep: str) -> list:
    """`expr` split at `sep` where it is outside parentheses and brackets."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(expr):
        depth += 1 if expr[i] in "([" else -1 if expr[i] in ")]" else 0
        if depth == 0 and expr.startswith(sep, i):
            parts.append(expr[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    return parts + [expr[start:]]


def _shuffle_sum(expr: str, rng: random.Random) -> str:
    """The terms of a sum, and the factors of each plain product, in another order."""
    if any(len(_split_top(expr, op)) > 1 for op in ("?", "&&", "||", "<", ">", " / ", " % ", "<<")):
        return expr
    terms = _split_top(expr, " + ")
    for n, term in enumerate(terms):
        factors = _split_top(term, " * ")
        if len(factors) > 1 and len(_split_top(term, " - ")) == 1 and rng.random() < 0.5:
            terms[n] = " * ".join(reversed(factors))
    rng.shuffle(terms)
    # Subscripts are sums too: M[row * Width + t] or M[t + Width * row].
    return re.sub(r"\[([^\[\]]+)\]", lambda m: f"[{_shuffle_sum(m[1], rng)}]", " + ".join(terms))


def restyle_line(line: str, rng: random.Random) -> str:
    """One line of a solution as a student of their own style writes it."""
    code, comment = (line.split("//", 1) + [""])[:2] if "//" in line and '"' not in line else (line, "")
    if not code.strip():
        return "" if rng.random() < 0.5 else line
    code = code.rstrip()
    if code.lstrip().startswith("const ") and rng.random() < 0.5:
        code = code.replace("const ", "", 1)
    code = re.sub(r"\+\+(\w+)\)", lambda m: rng.choice([f"++{m[1]})", f"{m[1]}++)", f"{m[1]} += 1)"]), code)
    code = re.sub(r"\b0\.0f\b", lambda m: rng.choice(["0.0f", "0.f", "0.0", "0"]), code)
    code = re.sub(r"\((\w+) \+ (\w+) - 1\) / (\w+)",
                  lambda m: f"((({m[1]} - 1) / {m[3]}) + 1)" if m[2] == m[3] and rng.random() < 0.5 else m[0], code)
    condition = re.match(r"^(\s*if \()(.*)(\) \{)$", code)
    if condition and rng.random() < 0.5:
        code = condition[1] + " && ".join(reversed(_split_top(condition[2], " && "))) + condition[3]
    assign = re.match(r"^(\s*[^=]*?[\w\]]) (\+?=) (.*);$", code)
    if assign and "<<<" not in code and not code.lstrip().startswith(("for", "if", "while", "return")):
        target, op, value = assign.groups()
        target = re.sub(r"\[([^\[\]]+)\]", lambda m: f"[{_shuffle_sum(m[1], rng)}]", target)
        value = _shuffle_sum(value, rng)
        if op == "+=" and rng.random() < 0.5:
            op, value = "=", f"{target.strip()} + {value}"
        elif op == "=" and rng.random() < 0.25:
            value = f"({value})"
        code = f"{target} {op} {value};"
    if comment and rng.random() < 0.5:
        code += "  //" + comment
    return code


def solved(text: str, restyle=None) -> str:
    """A solution file as a student hands it in: the regions' markers and
    hints gone, and each line of a region passed through `restyle`."""
    out, inside = [], False
    for line in text.splitlines():
        marker = _MARKER.match(line)
        if marker:
            inside = {"BEGIN SOLUTION": True, "END SOLUTION": False}.get(marker[1], inside)
            continue
        out.append(restyle(line) if inside and restyle else line)
    return "\n".join(out) + "\n"


def _independent(first: str, second: str) -> bool:
    def simple(line: str) -> bool:  # one assignment or declaration: no call, block, comment or control flow
        return (line.rstrip().endswith(";") and not re.search(r"[{}]|//|<<<|\w\s*\(", line)
                and not re.match(r"\s*(for|if|while|return)\b", line))

    written = [re.match(r"^\s*(?:const\s+)?(?:\w+\s*\*?\s+)?(\w+)", s) for s in (first, second)]
    if not (simple(first) and simple(second) and all(written)):
        return False
    return not re.search(rf"\b{written[0][1]}\b", second) and not re.search(rf"\b{written[1][1]}\b", first)


def disguise(text: str, starter: str, rng: random.Random) -> str:
    """A copy of a hand-in as a copier would hide it."""
    lines = [line.split("//", 1)[0].rstrip() if "//" in line and '"' not in line else line.rstrip()
             for line in text.splitlines()]
    lines = [re.sub(r"(\bconstexpr int \w+ = |\bwidth < )(\d+)\b", lambda m: m[1] + _WIDTHS.get(m[2], m[2]), line)
             for line in lines]
    given = set(re.findall(r"\w+", re.sub(r"//.*", "", starter)))  # the starter's code: names every student has
    for name in sorted({m for line in lines for m in _DECLARED.findall(line)} - given):
        new = rng.choice(["my", "the", "cur", "v"]) + name[:1].upper() + name[1:]
        lines = [re.sub(rf"\b{name}\b", new, line) for line in lines]
    i = 0
    while i + 1 < len(lines):
        if _independent(lines[i], lines[i + 1]):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
            i += 2
        else:
            i += 1
    indent = rng.choice(["    ", "\t"])
    return "\n".join(re.sub(r"^( {2})+", lambda m: indent * (len(m[0]) // 2), line) for line in lines
                     if line.strip()) + "\n"


def starter_kept(starter: str, rng: random.Random) -> str:
    """The starter as handed out, or with its comments and indentation changed."""
    if rng.random() < 0.5:
        return starter
    lines = [line.split("//", 1)[0].rstrip() if line.lstrip().startswith("//") else line
             for line in starter.splitlines()]
    return "\n".join(re.sub(r"^ {2}", "    ", line) + ("  // not done yet" if line.endswith(";") else "")
                     for line in lines) + "\n"


def make_class(root: Path, folder: Path, *, honest: int, copies: int = 0, starter_only: int = 0,
               seed: int = 1) -> MadeClass:
    """A class under `folder` (emptied first): `honest` hand-ins, `copies`
    disguised copies of the first honest ones, and `starter_only`
    hand-ins; students are named s001, s002 ... in a shuffled order, so
    that a copy's name says nothing of its original. Every hand-in holds
    every part file and the answer key as its answers."""
    assignment = load_assignment(root / ASSIGNMENT_FILE)
    rng = random.Random(seed)
    total = honest + copies + starter_only
    if copies > honest:
        raise ValueError("every copy needs an honest hand-in to copy")
    names = [f"s{i:03d}" for i in range(1, total + 1)]
    rng.shuffle(names)
    made = MadeClass(Path(folder), honest=names[:honest], starter_only=names[honest + copies:])
    made.copies = list(zip(names[:copies], names[honest:honest + copies]))
    shutil.rmtree(folder, ignore_errors=True)
    for part in assignment.parts:
        solution = (root / "solutions" / part.file).read_text(encoding="utf-8")
        starter = (root / "starter" / part.file).read_text(encoding="utf-8")
        written = {}
        for name in made.honest:
            style = random.Random(f"{seed}-{name}-{part.id}")
            written[name] = solved(solution, lambda line, s=style: restyle_line(line, s))
        for original, copy in made.copies:
            written[copy] = disguise(written[original], starter, random.Random(f"{seed}-{copy}-{part.id}"))
        for name in made.starter_only:
            written[name] = starter_kept(starter, random.Random(f"{seed}-{name}-{part.id}"))
        for name, code in written.items():
            (folder / name).mkdir(parents=True, exist_ok=True)
            (folder / name / part.file).write_text(code, encoding="utf-8")
    for name in names:
        shutil.copyfile(root / "solutions" / ANSWERS_FILE, folder / name / ANSWERS_FILE)
    return made
