"""The compute capability a GPU probe found last on this host, remembered
across processes: a one-shot `tilelab check` builds for it at once instead
of waiting for its own probe (stages/device.py), and the pipeline builds
again where the probe then finds another.

It is kept per host and GPU: the host's name, what the driver says of its
GPUs (/proc/driver/nvidia/gpus/*/information: model, UUID, bus) and the
grading's GPU (the sandbox's CUDA environment). While those are the same,
so is the capability. Where the driver says nothing (no NVIDIA driver, a
container without /proc/driver/nvidia), nothing is remembered. The file is
the grader's, in the GPU cache folder (gpu_cache.py); anything in it that
is not understood is ignored.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
from pathlib import Path
from typing import Optional

from ..system.atomic import write_atomically
from . import gpu_cache

NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")
FILE_NAME = "compute-capability.json"
MOST_REMEMBERED = 64  # hosts and GPUs kept; a shared home may serve many nodes
_CAPABILITY = re.compile(r"\d{1,2}\.\d{1,2}")


def host_key(gpu_key: tuple) -> Optional[str]:
    """Names this host's GPUs as the driver shows them, and the grading's
    GPU among them; None where the driver shows none."""
    digest = hashlib.sha256(f"{socket.gethostname()}\0{gpu_key!r}\0".encode())
    try:
        found = sorted(NVIDIA_GPUS.glob("*/information"))
        if not found:
            return None
        for info in found:
            digest.update(info.name.encode() + b"\0" + info.read_bytes() + b"\0")
    except OSError:
        return None
    return digest.hexdigest()


def _remembered() -> dict:
    try:
        found = json.loads((gpu_cache.cache_dir() / FILE_NAME).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str) and _CAPABILITY.fullmatch(v)}


def recall_capability(gpu_key: tuple) -> Optional[str]:
    """The capability remembered for this host and GPU, or None."""
    key = host_key(gpu_key)
    return _remembered().get(key) if key else None


def remember_capability(gpu_key: tuple, capability: str) -> None:
    """Keeps `capability` for this host and GPU, where it is new; a cache
    that cannot be written is left as it is (the next check waits for its
    probe, as without one)."""
    key = host_key(gpu_key)
    if key is None or not _CAPABILITY.fullmatch(capability):
        return
    known = _remembered()
    if known.get(key) == capability:
        return
    known.pop(key, None)
    known[key] = capability
    kept = dict(list(known.items())[-MOST_REMEMBERED:])
    try:
        path = gpu_cache.cache_dir() / FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(kept, indent=2) + "\n")
    except OSError:
        pass
