"""The reference of assignment.yaml (docs/assignment-yaml.md), rendered from tilelab.spec.schema.

- `PYTHONPATH=grader python3 -m tilelab.spec.reference > docs/assignment-yaml.md`
  regenerates the page; tests/python/test_assignment_reference.py fails while
  the page differs from `render()`.
- One section per mapping of the file, in the order of the schema; a list of
  mappings (parts, questions) is written `parts[]`.
- Imports only the standard library and tilelab.spec.schema.
"""

from __future__ import annotations

import sys
from typing import Any, Iterator

from .schema import ASSIGNMENT, RECTANGULAR_CASE, SQUARE_CASE, Key

COMMAND = "PYTHONPATH=grader python3 -m tilelab.spec.reference > docs/assignment-yaml.md"

# (heading, the place its keys are under, the mapping): the file, then the
# two forms a case takes, which the parts' case sets hold.
SECTIONS = (
    ("Top level", "", ASSIGNMENT),
    ("A case of a square part", "parts[].cases.<set>[]", SQUARE_CASE),
    ("A case of a rectangular part", "parts[].cases.<set>[]", RECTANGULAR_CASE),
)

INTRO = f"""\
# assignment.yaml reference

<!-- Generated from grader/tilelab/spec/schema.py by `{COMMAND}`; edit the schema, not this page. -->

Every key of assignment.yaml: its type, whether it is required, its default,
the values it allows and what it means. The validator
(grader/tilelab/spec/assignment.py) takes each mapping's keys, defaults,
bounds and allowed values from the same description
(grader/tilelab/spec/schema.py) that this page is generated from, and
tests/python/test_assignment_reference.py fails when the page is out of date.
Regenerate it with

    {COMMAND}

`parts[]` stands for each entry of the list `parts`. Bounds include both ends.
Errors name the place of the mistake, e.g. `parts[2].cases.public[4]: ...`.
"""


def _bound(v: Any) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) >= 1000:
        v = int(v)
    if isinstance(v, int) and v >= 1024 and v & (v - 1) == 0:
        return f"2^{v.bit_length() - 1}"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _yaml(v: Any) -> str:
    if isinstance(v, bool):
        return "`true`" if v else "`false`"
    return f"`{v}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(key: Key) -> str:
    required = key.needed or ("yes" if key.required else "no")
    default = "" if key.default is None else _yaml(key.default)
    if key.allowed:
        allowed = ", ".join(_yaml(a) for a in key.allowed)
    elif key.bounds:
        allowed = f"{_bound(key.bounds[0])} to {_bound(key.bounds[1])}"
    else:
        allowed = key.hint
    cells = (f"`{key.name}`", key.type, required, default, allowed, key.meaning)
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _sections(heading: str, node: Key) -> Iterator[tuple]:
    """(heading, mapping) for node and every mapping below it, depth first."""
    yield heading, node
    for key in node.keys:
        if key.keys:
            where = f"{heading}.{key.name}" if heading else key.name
            yield from _sections(where + ("[]" if key.type.startswith("list") else ""), key)


def _table(heading: str, node: Key) -> str:
    lines = [f"## {heading}", "", _cell(node.meaning), "",
             "| Key | Type | Required | Default | Allowed | Meaning |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [_row(key) for key in node.keys]
    return "\n".join(lines) + "\n"


def render() -> str:
    """The whole page, as docs/assignment-yaml.md must hold it."""
    tables = []
    for title, place, root in SECTIONS:
        for where, node in _sections(place, root):
            tables.append(_table(title if node is root else f"`{where}`", node))
    return INTRO + "\n" + "\n".join(tables)


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
