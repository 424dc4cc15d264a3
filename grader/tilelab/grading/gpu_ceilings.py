"""The grading GPU's roofline: its measured FP32 FMA rate and DRAM bandwidth,
and the L2 and shared-memory bandwidth of a hierarchical roofline.

`tilelab-roofline` (grader/roofline/) measures them and prints them as JSON.
A measurement takes a few seconds and belongs to one physical GPU, so it is
cached per device UUID (`--device` names the GPU without measuring). The
roofline bounds a kernel of arithmetic intensity I (FLOP per byte of DRAM
traffic) by min(FP32 rate, I * bandwidth); the on-chip levels bound it the
same way with I counted in bytes moved from L2 or from shared memory.
"""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from ..errors import TilelabError
from ..system import warmup
from ..system.gpu_lock import GpuLock, visible_gpu_lock
from . import gpu_cache

TOOL_NAME = "tilelab-roofline"
# Version 2 added the "l2" and "shared" sections. The cache records it too, so
# ceilings cached from another version's report are measured again.
REPORT_VERSION = 2
# The tool's exit status when no CUDA device is visible (ExitCode::kNoDevice,
# include/tilelab/exit_codes.h).
EXIT_NO_DEVICE = 5

# Beyond these no single GPU goes today, by two orders of magnitude and more
# (measured: docs/measurements-archive.md, "Ceilings measured by
# tilelab-roofline"); a figure above them is a timing or counting fault, not
# a fast GPU.
MAX_PLAUSIBLE_FP32_GFLOPS = 10_000_000.0
MAX_PLAUSIBLE_DRAM_GBPS = 1_000_000.0
# The on-chip levels move up to some ten times what DRAM does, so their
# limits are ten times DRAM's: the same margin above any GPU.
MAX_PLAUSIBLE_L2_GBPS = 10_000_000.0
MAX_PLAUSIBLE_SHARED_GBPS = 10_000_000.0

# Kept from the end of the tool's stderr for an error message.
_STDERR_TAIL_CHARS = 2000


class RooflineError(TilelabError):
    """The ceilings could not be measured, or what came back cannot be trusted."""


class NoDevice(RooflineError):
    """The tool sees no CUDA device."""


@dataclass(frozen=True)
class Ceilings:
    device_name: str
    device_uuid: str
    fp32_gflops: float  # median of the timed runs
    dram_gbps: float  # median; bytes read + bytes written, 1 GB = 1e9 bytes
    measured_at: str  # ISO 8601, UTC
    raw: dict = field(repr=False)  # the tool's report, as printed
    # Medians in GB/s as dram_gbps, bytes read; None where the report has no
    # such level (the tool could not measure it, or the figures were given by
    # hand, as the handout's are).
    l2_gbps: Optional[float] = None
    shared_gbps: Optional[float] = None  # every SM's loads together

    @property
    def ridge(self) -> float:
        """FLOP per byte at which a kernel stops being bandwidth-bound."""
        return self.fp32_gflops / self.dram_gbps

    def bound(self, intensity: float) -> float:
        """The fastest GFLOP/s a kernel doing `intensity` FLOP per DRAM byte can reach."""
        if not intensity >= 0:
            raise ValueError(f"arithmetic intensity must be a non-negative number, not {intensity!r}")
        return min(self.fp32_gflops, intensity * self.dram_gbps)

    def summary(self) -> dict:
        """What a grading records of the ceilings it was scored against."""
        return {"device_name": self.device_name, "device_uuid": self.device_uuid,
                "fp32_gflops": round(self.fp32_gflops, 1), "dram_gbps": round(self.dram_gbps, 1),
                "l2_gbps": _rounded(self.l2_gbps), "shared_gbps": _rounded(self.shared_gbps),
                "ridge": round(self.ridge, 2), "measured_at": self.measured_at}

    def to_dict(self) -> dict:
        return {
            "version": REPORT_VERSION,
            "device_name": self.device_name,
            "device_uuid": self.device_uuid,
            "fp32_gflops": self.fp32_gflops,
            "dram_gbps": self.dram_gbps,
            "l2_gbps": self.l2_gbps,
            "shared_gbps": self.shared_gbps,
            "measured_at": self.measured_at,
            "raw": self.raw,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Ceilings":
        """Inverse of to_dict; raises RooflineError when `data` is not one,
        or is one of another version (the cache then measures again)."""
        if not isinstance(data, dict):
            raise RooflineError(f"expected a JSON object, got {type(data).__name__}")
        if data.get("version") != REPORT_VERSION:
            raise RooflineError(f"ceilings of version {data.get('version')!r}, not {REPORT_VERSION}")
        try:
            ceilings = cls(
                device_name=_string(data, "device_name"),
                device_uuid=_string(data, "device_uuid"),
                fp32_gflops=_number(data, "fp32_gflops"),
                dram_gbps=_number(data, "dram_gbps"),
                measured_at=_string(data, "measured_at"),
                raw=data["raw"],
                l2_gbps=_optional_number(data, "l2_gbps"),
                shared_gbps=_optional_number(data, "shared_gbps"),
            )
        except KeyError as e:
            raise RooflineError(f"missing key {e}") from None
        if not isinstance(ceilings.raw, dict):
            raise RooflineError("'raw' is not a JSON object")
        _checked_uuid(ceilings.device_uuid)
        _check_plausible(ceilings.fp32_gflops, ceilings.dram_gbps)
        _check_plausible_level("l2", ceilings.l2_gbps)
        _check_plausible_level("shared", ceilings.shared_gbps)
        try:
            datetime.fromisoformat(ceilings.measured_at.replace("Z", "+00:00"))
        except ValueError:
            raise RooflineError(f"'measured_at' is not an ISO 8601 time: {ceilings.measured_at!r}") from None
        return ceilings


def _string(data: dict, key: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value:
        raise RooflineError(f"'{key}' must be a non-empty string, not {value!r}")
    return value


def _number(data: dict, key: str) -> float:
    value = data[key]
    # bool is an int in Python; true is no measurement.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RooflineError(f"'{key}' must be a number, not {value!r}")
    return float(value)


def _optional_number(data: dict, key: str) -> Optional[float]:
    """A number, or None where the key is absent or null (a level not measured)."""
    return None if data.get(key) is None else _number(data, key)


def _rounded(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 1)


def _checked_uuid(uuid: str) -> str:
    try:
        return gpu_cache.checked_uuid(uuid)
    except ValueError as e:
        raise RooflineError(str(e)) from None


def _check_plausible(fp32_gflops: float, dram_gbps: float) -> None:
    _check_figures((
        ("FP32 FMA rate", fp32_gflops, MAX_PLAUSIBLE_FP32_GFLOPS, "GFLOP/s"),
        ("DRAM bandwidth", dram_gbps, MAX_PLAUSIBLE_DRAM_GBPS, "GB/s"),
    ))


# The on-chip levels: the report's section, its name in messages, its limit.
_ON_CHIP_LEVELS = {"l2": ("L2 bandwidth", MAX_PLAUSIBLE_L2_GBPS),
                   "shared": ("shared-memory bandwidth", MAX_PLAUSIBLE_SHARED_GBPS)}


def _check_plausible_level(section: str, gbps: Optional[float]) -> None:
    """An on-chip level's figure, where there is one (None is no figure, not a bad one)."""
    if gbps is not None:
        what, limit = _ON_CHIP_LEVELS[section]
        _check_figures(((what, gbps, limit, "GB/s"),))


def _check_figures(figures: tuple) -> None:
    for what, value, limit, unit in figures:
        if not math.isfinite(value) or value <= 0:
            raise RooflineError(f"implausible {what}: {value} {unit} (must be positive and finite)")
        if value > limit:
            raise RooflineError(f"implausible {what}: {value:.0f} {unit} (more than {limit:.0f} {unit})")


def _section(report: dict, name: str) -> dict:
    section = report.get(name)
    if not isinstance(section, dict):
        raise RooflineError(f"{TOOL_NAME} report has no '{name}' object")
    return section


def _now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _device_uuid(device: dict) -> str:
    try:
        uuid = _string(device, "uuid")
    except KeyError:
        raise RooflineError(f"{TOOL_NAME} device object has no 'uuid'") from None
    return _checked_uuid(uuid)


def ceilings_from_report(report: dict, measured_at: Optional[str] = None) -> Ceilings:
    """Checks the tool's report and takes the median rates from it."""
    if not isinstance(report, dict):
        raise RooflineError(f"{TOOL_NAME} printed JSON that is not an object")
    if report.get("tool") != TOOL_NAME or report.get("version") != REPORT_VERSION:
        raise RooflineError(
            f"not a version-{REPORT_VERSION} {TOOL_NAME} report "
            f"(tool={report.get('tool')!r}, version={report.get('version')!r})"
        )
    device, fma, dram = _section(report, "device"), _section(report, "fp32_fma"), _section(report, "dram")
    try:
        name = _string(device, "name")
        fp32_median, fp32_max = _number(fma, "gflops_median"), _number(fma, "gflops_max")
        dram_median, dram_max = _number(dram, "gbps_median"), _number(dram, "gbps_max")
        fma_runs, dram_runs = _number(fma, "runs"), _number(dram, "runs")
        flop_per_run, bytes_per_run = _number(fma, "flop_per_run"), _number(dram, "bytes_per_run")
    except KeyError as e:
        raise RooflineError(f"{TOOL_NAME} report lacks {e}") from None
    uuid = _device_uuid(device)
    _check_plausible(fp32_median, dram_median)
    _check_plausible(fp32_max, dram_max)
    if fp32_max < fp32_median or dram_max < dram_median:
        raise RooflineError(f"{TOOL_NAME} report has a maximum below its median")
    if fma_runs < 1 or dram_runs < 1 or flop_per_run <= 0 or bytes_per_run <= 0:
        raise RooflineError(f"{TOOL_NAME} report counts no runs, FLOPs or bytes")
    return Ceilings(
        device_name=name,
        device_uuid=uuid,
        fp32_gflops=fp32_median,
        dram_gbps=dram_median,
        measured_at=measured_at or _now_utc(),
        raw=report,
        l2_gbps=_on_chip_median(report, "l2"),
        shared_gbps=_on_chip_median(report, "shared"),
    )


def _on_chip_median(report: dict, name: str) -> Optional[float]:
    """The median GB/s of the report's "l2" or "shared" section, checked as
    the DRAM one is; None where the tool printed null (it could not measure
    that level on this GPU) or no section at all."""
    if report.get(name) is None:
        return None
    section = _section(report, name)
    try:
        median, best = _number(section, "gbps_median"), _number(section, "gbps_max")
        runs, bytes_per_run = _number(section, "runs"), _number(section, "bytes_per_run")
    except KeyError as e:
        raise RooflineError(f"{TOOL_NAME} report's '{name}' lacks {e}") from None
    _check_plausible_level(name, median)
    _check_plausible_level(name, best)
    if best < median:
        raise RooflineError(f"{TOOL_NAME} report's '{name}' has a maximum below its median")
    if runs < 1 or bytes_per_run <= 0:
        raise RooflineError(f"{TOOL_NAME} report's '{name}' counts no runs or bytes")
    return median


def parse_report(text: str, measured_at: Optional[str] = None) -> Ceilings:
    """Ceilings from the tool's stdout."""
    try:
        report = json.loads(text)
    except ValueError as e:
        raise RooflineError(f"{TOOL_NAME} printed no valid JSON ({e}): {text[:200]!r}") from None
    return ceilings_from_report(report, measured_at)


def _run_tool(tool: Path, args: list, timeout_s: float, env: Optional[dict] = None) -> str:
    """The tool's stdout; RooflineError for every way it can fail."""
    if not tool.is_file():
        raise RooflineError(f"{TOOL_NAME} not found at {tool}; build it first (cmake --build build --target {TOOL_NAME})")
    try:
        proc = subprocess.run(
            [str(tool), *args], capture_output=True, text=True, errors="replace",
            stdin=subprocess.DEVNULL, timeout=timeout_s, env=env,
        )
    except subprocess.TimeoutExpired:
        raise RooflineError(f"{tool} {' '.join(args)} took longer than {timeout_s:g} s and was stopped") from None
    except OSError as e:
        raise RooflineError(f"cannot run {tool}: {e}") from None
    stderr = proc.stderr.strip()[-_STDERR_TAIL_CHARS:]
    if proc.returncode == EXIT_NO_DEVICE:
        raise NoDevice(f"no CUDA device: the GPU ceilings cannot be measured here ({stderr or 'no message'})")
    if proc.returncode != 0:
        raise RooflineError(f"{tool} {' '.join(args)} failed with exit status {proc.returncode}: {stderr or 'no message'}")
    return proc.stdout


def measure(tool: Path, timeout_s: float = 120, runs: int = 20, env: Optional[dict] = None) -> Ceilings:
    """Runs the tool once: both ceilings of the GPU it sees, measured now.
    `env` (e.g. with CUDA_VISIBLE_DEVICES) chooses which GPU that is."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, not {runs}")
    return parse_report(_run_tool(Path(tool), ["--runs", str(runs)], timeout_s, env))


def probe_early(tool: Path, timeout_s: float = 60) -> None:
    """Starts the device probe now, with this process's environment: the next
    device_info of `tool` without an env of its own takes its answer. CUDA's
    start, which every GPU stage waits for, then goes on beside the grader's
    imports."""
    if Path(tool).is_file():
        warmup.start_early(("device", Path(tool)), _device_info_now, Path(tool), timeout_s, None)


def device_info(tool: Path, timeout_s: float = 120, env: Optional[dict] = None) -> dict:
    """The tool's device object (name, uuid, ...), measuring nothing."""
    early = warmup.take_early(("device", Path(tool))) if env is None else None
    if early is not None:
        return early.result()
    return _device_info_now(Path(tool), timeout_s, env)


def _device_info_now(tool: Path, timeout_s: float, env: Optional[dict]) -> dict:
    text = _run_tool(tool, ["--device"], timeout_s, env)
    try:
        device = json.loads(text)
    except ValueError as e:
        raise RooflineError(f"{TOOL_NAME} --device printed no valid JSON ({e}): {text[:200]!r}") from None
    if not isinstance(device, dict):
        raise RooflineError(f"{TOOL_NAME} --device printed JSON that is not an object")
    _device_uuid(device)
    return device


CACHE_KIND = "roofline"


def cache_file(uuid: str) -> Path:
    return gpu_cache.cache_file(CACHE_KIND, uuid)


def load_cached(uuid: str) -> Optional[Ceilings]:
    """The cached ceilings of this GPU; None when there are none or the file is unusable."""
    return gpu_cache.load(CACHE_KIND, uuid, Ceilings.from_dict, (RooflineError,))


def save(ceilings: Ceilings) -> Path:
    return gpu_cache.save(CACHE_KIND, ceilings.device_uuid, ceilings.to_dict())


def get_ceilings(tool: Path, refresh: bool = False, timeout_s: float = 120, env: Optional[dict] = None,
                 device: Optional[dict] = None, gpu_lock: Optional[GpuLock] = None) -> Ceilings:
    """This GPU's ceilings: from the cache, or measured (and cached) when there are none or on refresh,
    holding `gpu_lock` (default: that of the GPU this process's CUDA sees first) exclusively
    (gpu_cache.kept_or_measured). `device` is what device_info returned, when the caller has already asked."""
    uuid = _device_uuid(device if device is not None else device_info(tool, timeout_s, env))

    def measured() -> Ceilings:
        ceilings = measure(tool, timeout_s, env=env)
        if ceilings.device_uuid != uuid:
            # CUDA_VISIBLE_DEVICES or the hardware changed between the two runs.
            raise RooflineError(f"{TOOL_NAME} named GPU {uuid} but then measured GPU {ceilings.device_uuid}")
        save(ceilings)
        return ceilings

    return gpu_cache.kept_or_measured(lambda: None if refresh else load_cached(uuid), measured,
                                      gpu_lock or visible_gpu_lock())


def describe(ceilings: Ceilings) -> str:
    """A few lines for the terminal."""
    def best(name: str, key: str) -> str:
        section = ceilings.raw.get(name) or {}
        value = section.get(key)
        runs = section.get("runs")
        if isinstance(value, (int, float)) and isinstance(runs, int):
            return f" (median of {runs} runs; best {value:,.0f})"
        return ""

    def level(gbps: Optional[float], name: str, where: str = "") -> str:
        return f"{gbps:,.0f} GB/s{where}{best(name, 'gbps_max')}" if gbps is not None else "not measured"

    return "\n".join([
        f"GPU:            {ceilings.device_name} ({ceilings.device_uuid})",
        f"FP32 FMA rate:  {ceilings.fp32_gflops:,.0f} GFLOP/s{best('fp32_fma', 'gflops_max')}",
        f"DRAM bandwidth: {ceilings.dram_gbps:,.0f} GB/s{best('dram', 'gbps_max')}",
        f"L2 bandwidth:   {level(ceilings.l2_gbps, 'l2')}",
        f"Shared memory:  {level(ceilings.shared_gbps, 'shared', ' across all SMs')}",
        f"Ridge point:    {ceilings.ridge:.1f} FLOP/B of DRAM traffic",
        f"Measured:       {ceilings.measured_at}",
        f"Cache:          {cache_file(ceilings.device_uuid)}",
    ])
