"""The checks assignment.yaml's values go through, each failing with the place it failed.

- Every error is an AssignmentError "where: what", where being the key's place
  in the file ("parts[2].cases.public[4]"), so an instructor can fix the file
  without reading the code.
- `mapping` and `value` take the keys, defaults, bounds and allowed values
  from a tilelab.spec.schema Key: what the reference documents is what is checked.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn, Optional

from .schema import Key
from ..errors import TilelabError


class AssignmentError(TilelabError):
    """assignment.yaml is missing, unreadable or breaks the schema."""


def fail(where: str, what: str) -> NoReturn:
    raise AssignmentError(f"{where}: {what}")


def mapping(value: Any, where: str, node: Key) -> dict:
    """`value` as the mapping `node` describes: its required keys there and no unknown ones."""
    if not isinstance(value, dict):
        fail(where, f"must be a mapping, got {type(value).__name__}")
    for key in node.required_names:
        if key not in value:
            fail(where, f"missing required key {key!r}")
    known = {k.name for k in node.keys}
    for key in value:
        if key not in known:
            fail(where, f"unknown key {key!r} (expected one of: {', '.join(sorted(known))})")
    return value


def integer(value: Any, where: str, lo: int, hi: int) -> int:
    # bool is an int in Python; `width: yes` must not become 1.
    if isinstance(value, bool) or not isinstance(value, int):
        fail(where, f"must be an integer, got {value!r}")
    if not lo <= value <= hi:
        fail(where, f"must be between {lo} and {hi}, got {value}")
    return value


def number(value: Any, where: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(where, f"must be a number, got {value!r}")
    if not lo <= value <= hi:
        fail(where, f"must be between {lo} and {hi}, got {value}")
    return float(value)


def string(value: Any, where: str, pattern: Optional[re.Pattern] = None, hint: str = "") -> str:
    if not isinstance(value, str) or not value.strip():
        fail(where, f"must be a non-empty string, got {value!r}")
    if pattern is not None and not pattern.match(value):
        fail(where, f"{value!r} is not valid{(': ' + hint) if hint else ''}")
    return value


def value(raw: dict, node: Key, name: str, where: str) -> Any:
    """raw[name] (the key's default where it is absent) checked as node's key
    `name` says: one of its allowed values, or its type within its bounds.
    `where` is the place of raw itself ("" for the file's top level)."""
    key = node.key(name)
    got = raw.get(name, key.default)
    at = f"{where}.{name}" if where else name
    if key.allowed:
        if got not in key.allowed:
            fail(at, f"must be one of {', '.join(key.allowed)}, got {got!r}")
        return got
    if key.type == "integer":
        return integer(got, at, *key.bounds)
    if key.type == "number":
        return number(got, at, *key.bounds)
    if key.type == "boolean":
        if not isinstance(got, bool):
            fail(at, f"must be true or false, got {got!r}")
        return got
    if key.type == "string":
        return string(got, at, key.pattern, key.hint)
    raise TypeError(f"{at}: a {key.type} is checked by its parser, not by value()")
