"""Checking a results file's fields against a platform's documented list."""

from __future__ import annotations


def field_problems(obj: dict, fields: dict, where: str = "") -> list:
    """Fields of `obj` that `fields` (name -> type or tuple of types) does not
    name, or whose value has another type. A bool is no number: JSON's true
    is not 1, so it passes only where bool itself is the type."""
    problems = []
    for key, value in obj.items():
        kind = fields.get(key)
        if kind is None:
            problems.append(f"{where.rstrip('.')}: unknown field {key!r}" if where else f"unknown top-level field {key!r}")
        elif isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
            problems.append(f"{where}{key} has type {type(value).__name__}")
    return problems
