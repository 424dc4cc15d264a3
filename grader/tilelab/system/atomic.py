"""Writing a file so that readers never see half of it, and reading one back."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    """Replaces `path` whole: a reader (Gradescope, a TA's spreadsheet, a
    grading beside this one) sees the old file or the new one, never a part.
    The temporary name is unique, so writers of the same file do not collide,
    and the file gets the usual mode (umask), unlike mkstemp's 0600."""
    path = Path(path)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(temp, "x", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def read_json(path: Path):
    """What a JSON file holds, None where it is missing or not JSON (a
    grading interrupted before it wrote, or a file edited by hand)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
