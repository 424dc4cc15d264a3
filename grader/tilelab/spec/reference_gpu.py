"""The course's grading GPU, as published: handouts/reference-gpu.yaml.

What `tilelab calibrate` measured on the GPU the course grades on: its
ceilings and each reference solution's GFLOP/s at its timing size. The
handout shows these figures, and `tilelab check` on a student's machine,
which has no reference solutions to time, estimates its speed targets from
them. The grader itself never scores with them: it times the references on
the GPU it grades on.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Optional

import yaml

REFERENCE_GPU_PATH = "handouts/reference-gpu.yaml"  # under the project root


class ReferenceGpuError(ValueError):
    """reference-gpu.yaml is missing, unreadable or malformed."""


def _positive_number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise ReferenceGpuError(f"{where}: must be a positive number, got {value!r}")
    return float(value)


def load_reference_gpu(root: Path) -> dict:
    """{"device", "measured", "fp32_fma_gflops", "dram_gbps",
        "reference": {part id or "cublas": [{"size": (j, k, l), "gflops"}, ...]}}."""
    path = Path(root) / REFERENCE_GPU_PATH
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ReferenceGpuError(f"{path}: cannot read the grading GPU's figures ({e.strerror})") from e
    except yaml.YAMLError as e:
        raise ReferenceGpuError(f"{path}: the grading GPU's figures are not valid YAML: {e}") from e
    if not isinstance(doc, dict):
        raise ReferenceGpuError(f"{path}: must be a mapping")
    for key in ("device", "measured", "fp32_fma_gflops", "dram_gbps", "reference"):
        if key not in doc:
            raise ReferenceGpuError(f"{path}: missing {key!r}")
    measured = doc["measured"]
    # YAML reads an unquoted 2026-11-21 as a date.
    if isinstance(measured, (datetime.date, datetime.datetime)):
        measured = measured.isoformat()
    if not isinstance(doc["reference"], dict):
        raise ReferenceGpuError(f"{path}: reference must map part ids to {{size, gflops}}")
    reference = {}
    for part_id, entries in doc["reference"].items():
        where = f"{path}: reference.{part_id}"
        # One size, or a list of them (a part timed at several sizes).
        figures = []
        for i, entry in enumerate(entries if isinstance(entries, list) else [entries]):
            at = f"{where}[{i}]" if isinstance(entries, list) else where
            if not isinstance(entry, dict) or set(entry) != {"size", "gflops"}:
                raise ReferenceGpuError(f"{at}: must be {{size: [j, k, l], gflops: number}}")
            size = entry["size"]
            if not (isinstance(size, list) and len(size) == 3
                    and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in size)):
                raise ReferenceGpuError(f"{at}.size: must be [j, k, l], got {size!r}")
            figures.append({"size": tuple(size), "gflops": _positive_number(entry["gflops"], f"{at}.gflops")})
        reference[str(part_id)] = figures
    return {
        "device": str(doc["device"]),
        "measured": str(measured),
        "fp32_fma_gflops": _positive_number(doc["fp32_fma_gflops"], f"{path}: fp32_fma_gflops"),
        "dram_gbps": _positive_number(doc["dram_gbps"], f"{path}: dram_gbps"),
        "reference": reference,
    }


def published_gflops(published: dict, name: str, size: tuple) -> Optional[float]:
    """The published GFLOP/s of a reference (or of "cublas") at exactly this
    size, or None: a figure taken at another size says nothing about this one."""
    return next((f["gflops"] for f in published["reference"].get(name, []) if f["size"] == tuple(size)), None)
