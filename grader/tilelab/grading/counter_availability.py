"""Which hardware counters the grading GPU offers: CUPTI's counter
availability image, kept per GPU so that a timing run makes its counters'
setup before its GPU turn (grader/harness/core/counter_profile.h).

Asking the driver for the image holds the GPU's counters for a moment, so
a run that had to ask would do so in its turn, where it costs about a tenth
of a second a part. The trusted harness asks once per GPU
(`tilelab-harness --counter-availability`), while the grading holds the
GPU's timing turn and nobody's timed calls run; the image is cached beside
the GPU's ceilings and calibration (gpu_cache.py), for the calibration's
fingerprint (the driver, the harness's build) and with its SHA-256: CUPTI
reads the image without checking it, and one that is not the driver's own
may crash the launcher's process in the student's name. An image that is
missing or kept for another fingerprint is asked for again; without one the
run makes the whole setup in its turn, as before.
"""

from __future__ import annotations

import hashlib
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
    fingerprint: str  # the calibration's (calibration.fingerprint): the driver and the harness it was asked of
    chip: str
    image: str  # hex, two digits a byte, as the harness's case file takes it

    @classmethod
    def from_dict(cls, data) -> "CounterAvailability":
        if not isinstance(data, dict):
            raise ValueError("not an object")
        found = cls(str(data["device_uuid"]), str(data["fingerprint"]), str(data["chip"]), str(data["image"]))
        if len(found.image) > MAX_HEX_CHARS or not _HEX.match(found.image):
            raise ValueError("the image is not hex bytes")
        if data.get("sha256") != _sha256(found.image):
            raise ValueError("the image is not the one the harness gave")
        return found

    def to_dict(self) -> dict:
        return {"device_uuid": self.device_uuid, "fingerprint": self.fingerprint, "chip": self.chip,
                "image": self.image, "sha256": _sha256(self.image)}


def _sha256(image: str) -> str:
    return hashlib.sha256(image.encode()).hexdigest()


def image_for(harness: Path, uuid: str, fingerprint: str, env: Optional[dict] = None) -> Optional[str]:
    """The GPU's counter availability image (hex) for the calibration
    `fingerprint`: kept, or asked of the trusted harness and kept. None
    where it cannot be had; the caller must hold the GPU's timing turn
    (system/gpu_lock.py) when none is kept."""
    try:
        gpu_cache.checked_uuid(uuid)
    except ValueError:  # a UUID that cannot name a file: nothing can be kept for it
        return None
    kept = gpu_cache.load(CACHE_KIND, uuid, CounterAvailability.from_dict, (KeyError, TypeError))
    if kept is not None and kept.fingerprint == fingerprint:
        return kept.image
    asked = _ask(harness, uuid, fingerprint, env)
    if asked is None:
        return None
    gpu_cache.save(CACHE_KIND, uuid, asked.to_dict())
    return asked.image


def _ask(harness: Path, uuid: str, fingerprint: str, env: Optional[dict]) -> Optional[CounterAvailability]:
    try:
        proc = subprocess.run([str(harness), "--counter-availability"], capture_output=True, text=True,
                              timeout=TIMEOUT_S, env=env)
        said = json.loads(proc.stdout)
        if proc.returncode != 0 or said.get("status") != "measured":
            return None
        image = str(said["image"])
        return CounterAvailability.from_dict({"device_uuid": uuid, "fingerprint": fingerprint,
                                              "chip": said["chip"], "image": image, "sha256": _sha256(image)})
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError, AttributeError):
        return None
