"""Where the project's files are."""

from __future__ import annotations

import os
from pathlib import Path

ASSIGNMENT_FILE = "assignment.yaml"


def find_root(start: Path | None = None) -> Path:
    """The project root: $TILELAB_ROOT, else the nearest directory upwards
    from `start` (default: the working directory) holding assignment.yaml,
    else the checkout this package was loaded from."""
    env = os.environ.get("TILELAB_ROOT")
    if env:
        return Path(env).resolve()
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / ASSIGNMENT_FILE).is_file():
            return d
    package_checkout = Path(__file__).resolve().parents[2]
    if (package_checkout / ASSIGNMENT_FILE).is_file():
        return package_checkout
    raise FileNotFoundError(
        f"no {ASSIGNMENT_FILE} found above {here}; run from the project or set TILELAB_ROOT"
    )
