"""How many gradings share this machine's CPUs by default."""

from __future__ import annotations

import os
from typing import Optional

GRADINGS_AT_ONCE_WORDS = "half the CPUs, 2 to 8"


def gradings_at_once(cpus: Optional[int] = None) -> int:
    """Hand-ins graded side by side by default, for every command that grades
    several: half the CPUs, since each grading compiles in parallel too, 2 to 8."""
    return max(2, min(8, (cpus or os.cpu_count() or 2) // 2))
