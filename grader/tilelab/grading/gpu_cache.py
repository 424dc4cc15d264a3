"""What is measured once per GPU and kept: its ceilings (gpu_ceilings.py) and
its timed reference solutions (calibration.py). One JSON file per kind and
GPU, named by the GPU's UUID, in $TILELAB_CACHE_DIR (default
~/.cache/tilelab); readers never see half a file.

Both are measured with the GPU to themselves (kept_or_measured): figures
timed beside another grader's runs, or beside another grader measuring
them too, would be kept and score every hand-in after them."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable, Optional, TypeVar

from ..system.atomic import write_atomically

# The UUID becomes part of a file name, so it may hold nothing else.
_UUID_PATTERN = re.compile(r"^[0-9A-Za-z][0-9A-Za-z-]{0,127}$")


def checked_uuid(uuid: str) -> str:
    """`uuid` when it is a plain hex UUID; ValueError otherwise."""
    if not _UUID_PATTERN.match(uuid):
        raise ValueError(f"device UUID {uuid!r} is not a plain hex UUID")
    return uuid


def cache_dir() -> Path:
    configured = os.environ.get("TILELAB_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "tilelab"


def cache_file(kind: str, uuid: str) -> Path:
    return cache_dir() / f"{kind}-{checked_uuid(uuid)}.json"


def load(kind: str, uuid: str, parse: Callable[[object], object], errors: tuple) -> Optional[object]:
    """What `parse` makes of the GPU's `kind` file; None when there is none
    or it is unusable (`parse` raised one of `errors`), or when it names
    another GPU (a file copied from another machine's cache)."""
    try:
        found = parse(json.loads(cache_file(kind, uuid).read_text()))
    except (OSError, ValueError, *errors):
        # Missing, unreadable, half-written by an older version or edited by
        # hand: in every case the cure is to measure again.
        return None
    return found if getattr(found, "device_uuid", None) == uuid else None


T = TypeVar("T")


def kept_or_measured(kept: Callable[[], Optional[T]], measure: Callable[[], T], gpu_lock) -> T:
    """What the cache keeps (`kept`, a look that needs no GPU), or else
    `measure()` holding `gpu_lock` (system/gpu_lock.py) exclusively. The cache
    is looked at again once the lock is held: another grader on this GPU may
    have measured meanwhile."""
    found = kept()
    if found is not None:
        return found
    with gpu_lock.exclusive():
        found = kept()
        return found if found is not None else measure()


def save(kind: str, uuid: str, data: dict) -> Path:
    path = cache_file(kind, uuid)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(data, indent=2) + "\n")
    return path
