"""The course's grading GPU, as published: handouts/reference-gpu.yaml.

What `tilelab calibrate` measured on the GPU the course grades on: its
ceilings, each reference's GFLOP/s at its timing sizes (and cuBLAS's, for a
part scored against it), and the ladder of a part beyond the textbook. The
handout shows them, and `tilelab check` on a student's machine estimates its
targets from them; grading never scores with them.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Optional

import yaml

from ..errors import TilelabError

REFERENCE_GPU_PATH = "handouts/reference-gpu.yaml"  # under the project root


class ReferenceGpuError(TilelabError):
    """reference-gpu.yaml is missing, unreadable or malformed."""


def _positive_number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise ReferenceGpuError(f"{where}: must be a positive number, got {value!r}")
    return float(value)


def _size(value, where: str) -> tuple:
    if not (isinstance(value, list) and len(value) == 3
            and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in value)):
        raise ReferenceGpuError(f"{where}: must be [j, k, l], got {value!r}")
    return tuple(value)


def _ladders(raw, where: str) -> dict:
    """ladder: {part id: {size: [j, k, l], rungs: [{technique, file, gflops}, ...]}}."""
    if not isinstance(raw, dict):
        raise ReferenceGpuError(f"{where}: must map part ids to {{size, rungs}}")
    ladders = {}
    for part_id, ladder in raw.items():
        at = f"{where}.{part_id}"
        if not isinstance(ladder, dict) or set(ladder) != {"size", "rungs"}:
            raise ReferenceGpuError(f"{at}: must be {{size: [j, k, l], rungs: [...]}}")
        if not isinstance(ladder["rungs"], list) or not ladder["rungs"]:
            raise ReferenceGpuError(f"{at}.rungs: must be a non-empty list")
        rungs = []
        for i, rung in enumerate(ladder["rungs"]):
            if not isinstance(rung, dict) or set(rung) != {"technique", "file", "gflops"}:
                raise ReferenceGpuError(f"{at}.rungs[{i}]: must be {{technique: text, file: name, gflops: number}}")
            for key in ("technique", "file"):
                if not isinstance(rung[key], str) or not rung[key].strip():
                    raise ReferenceGpuError(f"{at}.rungs[{i}].{key}: must be a non-empty text")
            rungs.append({"technique": rung["technique"].strip(), "file": rung["file"].strip(),
                          "gflops": _positive_number(rung["gflops"], f"{at}.rungs[{i}].gflops")})
        ladders[str(part_id)] = {"size": _size(ladder["size"], f"{at}.size"), "rungs": rungs}
    return ladders


def load_reference_gpu(root: Path) -> dict:
    """{"device", "measured", "fp32_fma_gflops", "dram_gbps", "l2_gbps", "shared_gbps",
        "reference": {part id or "cublas": [{"size": (j, k, l), "gflops"}, ...]},
        "ladder": {part id: {"size": (j, k, l), "rungs": [{"technique", "file", "gflops"}, ...]}}}
    (ladder is optional in the file, {} without it)."""
    path = Path(root) / REFERENCE_GPU_PATH
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ReferenceGpuError(f"{path}: cannot read the grading GPU's figures ({e.strerror})") from e
    except yaml.YAMLError as e:
        raise ReferenceGpuError(f"{path}: the grading GPU's figures are not valid YAML: {e}") from e
    if not isinstance(doc, dict):
        raise ReferenceGpuError(f"{path}: must be a mapping")
    for key in ("device", "measured", "fp32_fma_gflops", "dram_gbps", "l2_gbps", "shared_gbps", "reference"):
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
            figures.append({"size": _size(entry["size"], f"{at}.size"),
                            "gflops": _positive_number(entry["gflops"], f"{at}.gflops")})
        reference[str(part_id)] = figures
    return {
        "device": str(doc["device"]),
        "measured": str(measured),
        "fp32_fma_gflops": _positive_number(doc["fp32_fma_gflops"], f"{path}: fp32_fma_gflops"),
        "dram_gbps": _positive_number(doc["dram_gbps"], f"{path}: dram_gbps"),
        "l2_gbps": _positive_number(doc["l2_gbps"], f"{path}: l2_gbps"),
        "shared_gbps": _positive_number(doc["shared_gbps"], f"{path}: shared_gbps"),
        "reference": reference,
        "ladder": _ladders(doc.get("ladder", {}), f"{path}: ladder"),
    }


def published_gflops(published: dict, name: str, size: tuple) -> Optional[float]:
    """The published GFLOP/s of a reference (or of "cublas") at exactly this
    size, or None: a figure taken at another size says nothing about this one."""
    return next((f["gflops"] for f in published["reference"].get(name, []) if f["size"] == tuple(size)), None)
