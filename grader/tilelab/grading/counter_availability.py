"""Which hardware counters the grading GPU offers: CUPTI's counter
availability image, kept per GPU so that a timing run makes its counters'
setup before its GPU turn (grader/harness/core/counter_profile.h).

Asking the driver for the image holds the GPU's counters for a moment, so
a run that had to ask would do so in its turn, where it costs about a tenth
of a second a part. The trusted harness asks once per GPU
(`tilelab-harness --counter-availability`), while the grading holds the
GPU's timing turn and nobody's timed calls run; the image is cached beside
the GPU's ceilings and calibration (gpu_cache.py). An image that is missing,
unreadable or refused by CUPTI costs only time: the run then makes the whole
setup in its turn, as it would without one.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import gpu_cache

CACHE_KIND = "counters"
# A counter availability image is some kilobytes; the harness takes at most
# this many hex digits (grader/harness/core/case_file.cpp).
MAX_HEX_CHARS = 2 << 20
_HEX = re.compile(r"^(?:[0-9a-f]{2})+$")
# Starting CUDA and CUPTI in a fresh process takes about a second.
TIMEOUT_S = 60


@dataclass(frozen=True)
class CounterAvailability:
    device_uuid: str
    chip: str
    image: str  # hex, two digits a byte, as the harness's case file takes it

    @classmethod
    def from_dict(cls, data) -> "CounterAvailability":
        if not isinstance(data, dict):
            raise ValueError("not an object")
        found = cls(str(data["device_uuid"]), str(data["chip"]), str(data["image"]))
        if len(found.image) > MAX_HEX_CHARS or not _HEX.match(found.image):
            raise ValueError("the image is not hex bytes")
        return found

    def to_dict(self) -> dict:
        return {"device_uuid": self.device_uuid, "chip": self.chip, "image": self.image}


def image_for(harness: Path, uuid: str, env: Optional[dict] = None) -> Optional[str]:
    """The GPU's counter availability image (hex): cached, or asked of the
    trusted harness and cached. None where it cannot be had; the caller must
    hold the GPU's timing turn (system/gpu_lock.py) when none is cached."""
    try:
        cached = gpu_cache.load(CACHE_KIND, uuid, CounterAvailability.from_dict, (KeyError, TypeError))
    except ValueError:  # a UUID that cannot name a file
        return None
    if cached is not None:
        return cached.image
    asked = _ask(harness, uuid, env)
    if asked is None:
        return None
    gpu_cache.save(CACHE_KIND, uuid, asked.to_dict())
    return asked.image


def _ask(harness: Path, uuid: str, env: Optional[dict]) -> Optional[CounterAvailability]:
    try:
        proc = subprocess.run([str(harness), "--counter-availability"], capture_output=True, text=True,
                              timeout=TIMEOUT_S, env=env)
        said = json.loads(proc.stdout)
        if proc.returncode != 0 or said.get("status") != "measured":
            return None
        return CounterAvailability.from_dict({**said, "device_uuid": uuid})
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError, AttributeError):
        return None
