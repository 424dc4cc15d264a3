"""Speed targets that hold on any GPU: the reference solutions, timed on the GPU that grades.

A fixed share of the FP32 roof does not carry from one GPU to another
(measured: docs/measurements-archive.md, "Speed targets from the reference
solutions"), so a part's targets are fractions of what its reference reaches
on this very GPU (assignment.yaml, grading.speed), timed as a student's part
is, `runs` times, the median kept. A calibration is cached per GPU while its
`fingerprint` holds; without one, speed is not scored (the grader's fault).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from ..errors import TilelabError
from ..spec.assignment import Assignment, Part
from ..spec.matmul import intensity, matmul_flop
from ..spec.reference_gpu import REFERENCE_GPU_PATH, published_gflops
from ..system.gpu_lock import GpuLock, visible_gpu_lock
from ..system.paths import tool_path
from ..system.sandbox import Sandbox
from . import gpu_cache, traffic
from .clocks import Clocks, by_case, read_clocks
from .model import ESTIMATED_RULE, MEASURED_RULE
from .runner import run_harness, verify, write_cases
from .scoring import CUBLAS, gflops, scored_time, speed_target
from .traffic import Traffic
from .trusted_harness import TrustedHarness

# Bump when the way references are timed changes: older caches then measure again.
# 2: timed by tilelab-harness's clock, the launcher in a process of its own; 3: each reference's counters
CALIBRATION_VERSION = 3
REFERENCE_DIR = "reference"  # build/<this>/<part>: cmake/reference/CMakeLists.txt
# A new calibration this far below the last one of the same GPU is not
# believed: a throttled or shared GPU, a broken toolkit. Staff look first.
DROP_LIMIT = 0.7
CALIBRATION_SEED = 0xCA11B  # the references always see the same inputs
TIME_LIMIT_S = 300


class CalibrationError(TilelabError):
    """The references could not be timed, or what they gave cannot be trusted."""


@dataclass(frozen=True)
class ReferenceSpeed:
    """One reference solution at one timing size."""

    part: str
    j: int
    k: int
    l: int
    runs: tuple  # GFLOP/s of each timed run (each the median of the timed calls)
    clocks: tuple = ()  # each run's GPU clocks (clocks.Clocks.to_dict); empty in older caches
    retimed: bool = False  # timed once more because the GPU throttled the first time
    # The counters of one call of the reference (traffic.py), for the
    # reports to set a part's traffic beside; empty for cuBLAS and estimates.
    counters: dict = dataclasses.field(default_factory=dict, hash=False, compare=False)

    @property
    def case(self) -> str:
        return f"{self.j}x{self.k}x{self.l}"

    @property
    def gflops(self) -> float:
        return statistics.median(self.runs)

    @property
    def spread(self) -> float:
        """(fastest - slowest run) / median: 0 for one run."""
        return (max(self.runs) - min(self.runs)) / self.gflops

    @property
    def throttled(self) -> Optional[Clocks]:
        """The clocks of the first run the GPU throttled, None when none was."""
        return next((c for c in map(read_clocks, self.clocks) if c.throttled), None)

    def to_dict(self) -> dict:
        return {"part": self.part, "j": self.j, "k": self.k, "l": self.l, "runs": list(self.runs),
                "clocks": list(self.clocks), "retimed": self.retimed, "counters": self.counters}


@dataclass(frozen=True)
class Calibration:
    """What each part's reference reaches on one GPU."""

    rule: str  # model.MEASURED_RULE or model.ESTIMATED_RULE
    device_uuid: str
    device_name: str
    fingerprint: str
    measured_at: str  # ISO 8601, UTC
    seconds: float  # how long the timing took
    speeds: tuple  # of ReferenceSpeed
    source: str = ""  # where an estimate's figures come from

    def traffic_of(self, part_id: str, j: int, k: int, l: int) -> Optional[Traffic]:
        """What one call of the part's reference moved at this size, None when not measured."""
        found = self.speed_of(part_id, j, k, l)
        return traffic.traffic_from(found.counters, j, k, l) if found and found.counters else None

    def speed_of(self, part_id: str, j: int, k: int, l: int) -> Optional[ReferenceSpeed]:
        return next((s for s in self.speeds if (s.part, s.j, s.k, s.l) == (part_id, j, k, l)), None)

    def gflops_of(self, name: str, j: int, k: int, l: int) -> Optional[float]:
        """GFLOP/s of a reference (part id) or of cuBLAS (scoring.CUBLAS) at this size; None if not timed."""
        found = self.speed_of(name, j, k, l)
        return found.gflops if found else None

    def target(self, ceilings, part: Part, rule, j: int, k: int, l: int):
        """The part's scoring.SpeedTarget at this size on this GPU, None without the figures it needs."""
        return speed_target(ceilings, part, rule, self.gflops_of, j, k, l)

    @property
    def throttled(self) -> list:
        """Each reference the GPU throttled when timed and again when timed once more, in words: its
        figure, and the targets it sets, may be low."""
        return [f"{s.part} at {s.case}: the GPU was {c.why} ({c.figures})" for s in self.speeds
                if (c := s.throttled)]

    def summary(self, assignment: Assignment, ceilings=None) -> dict:
        """What a grading records of the calibration its targets came from:
        each figure timed (references and cuBLAS) and the full-credit target
        of each part's timing size."""
        full = {}
        for part in assignment.parts:
            for c in part.cases["timing"]:
                if ceilings is not None and (t := self.target(ceilings, part, assignment.speed, c.j, c.k, c.l)):
                    full[f"{part.id} {c.j}x{c.k}x{c.l}"] = round(t.full, 1)
        return {"rule": self.rule, "device_name": self.device_name, "measured_at": self.measured_at,
                "fingerprint": self.fingerprint[:16], "source": self.source,
                "references": {f"{s.part} {s.case}": round(s.gflops, 1) for s in self.speeds},
                "full_credit_from": full, "throttled": self.throttled}

    def to_dict(self) -> dict:
        return {"version": CALIBRATION_VERSION, "rule": self.rule, "device_uuid": self.device_uuid,
                "device_name": self.device_name, "fingerprint": self.fingerprint,
                "measured_at": self.measured_at, "seconds": self.seconds,
                "speeds": [s.to_dict() for s in self.speeds]}

    @classmethod
    def from_dict(cls, data) -> "Calibration":
        """Inverse of to_dict; CalibrationError when `data` is not one."""
        try:
            if data["version"] != CALIBRATION_VERSION or data["rule"] != MEASURED_RULE:
                raise CalibrationError("a calibration of another version")
            speeds = tuple(
                ReferenceSpeed(str(s["part"]), int(s["j"]), int(s["k"]), int(s["l"]),
                               tuple(float(r) for r in s["runs"]),
                               _cached_clocks(s.get("clocks")), s.get("retimed") is True,
                               _cached_counters(s.get("counters")))
                for s in data["speeds"])
            calibration = cls(MEASURED_RULE, str(data["device_uuid"]), str(data["device_name"]),
                              str(data["fingerprint"]), str(data["measured_at"]), float(data["seconds"]), speeds)
        except (KeyError, TypeError, ValueError) as e:
            raise CalibrationError(f"not a calibration ({e})") from None
        if not speeds or any(not s.runs or min(s.runs) <= 0 for s in speeds):
            raise CalibrationError("a calibration without positive figures")
        return calibration


def _cached_counters(value) -> dict:
    """A cached ReferenceSpeed's counters: metric names and finite numbers only."""
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _cached_clocks(value) -> tuple:
    """A cached ReferenceSpeed's clocks, read again as the harness's are."""
    return tuple(read_clocks(c).to_dict() for c in value) if isinstance(value, list) else ()


def reference_binary(build_dir: Path, part_id: str) -> Path:
    """A part's reference executable, or (CUBLAS) cuBLAS SGEMM behind the same harness."""
    return Path(build_dir) / REFERENCE_DIR / part_id


def _timed_names(assignment: Assignment) -> list:
    """What a calibration times: every part's reference, and cuBLAS when a part is scored against it."""
    return [p.id for p in assignment.parts] + ([CUBLAS] if assignment.uses_cublas else [])


def has_references(build_dir: Path, assignment: Assignment) -> bool:
    """Whether this build holds a reference for every part, and cuBLAS where
    a part needs it (a checkout or the autograder; never the student bundle)."""
    return all(reference_binary(build_dir, name).is_file() for name in _timed_names(assignment))


def fingerprint(build_dir: Path, assignment: Assignment, device: dict) -> str:
    """A digest of everything a calibration depends on; unchanged while it holds."""
    settings = {
        "version": CALIBRATION_VERSION,
        "timing": assignment.timing,
        "runs": assignment.speed.runs,
        "parts": [[p.id, p.signature, [c.to_json() for c in p.cases["timing"]]] for p in assignment.parts],
        "device": _device_facts(device),
    }
    return _digest(settings, _harness(build_dir) + [(f"the reference of {n}", reference_binary(build_dir, n))
                                                   for n in _timed_names(assignment)])


def estimate_fingerprint(build_dir: Path, device: dict) -> str:
    """What an estimate's counter availability image is kept for (speed.py):
    the GPU, its driver and the trusted harness, as in `fingerprint`; a
    student's machine has no references to digest."""
    return _digest({"version": CALIBRATION_VERSION, "device": _device_facts(device)}, _harness(build_dir))


def _device_facts(device: dict) -> list:
    return [device.get(k) for k in ("name", "compute_capability", "driver_version", "runtime_version")]


def _harness(build_dir: Path) -> list:
    # The trusted harness times them all: a new build of it counts too.
    return [("the trusted harness", tool_path(build_dir, "tilelab-harness"))]


def _digest(settings: dict, binaries: list) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for what, binary in binaries:
        try:
            with open(binary, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        except OSError as e:
            raise CalibrationError(f"cannot read {what} ({binary}: {e.strerror})") from None
    return digest.hexdigest()


def _time_reference(name: str, part: Part, assignment: Assignment, build_dir: Path, verify_tool: Path, work: Path,
                    sandbox: Sandbox) -> list:
    """The part's reference (name = part.id), or cuBLAS (name = CUBLAS) at
    the sizes of a part scored against it, timed; a size the GPU throttled is
    timed once more, and its second figures kept (marked if it throttled again)."""
    speeds = _time_reference_once(name, part, assignment, build_dir, verify_tool, work, sandbox)
    if not any(s.throttled for s in speeds):
        return speeds
    # A throttled reference sets targets too easy to reach: its figure is not kept as it is.
    return retimed(speeds, _time_reference_once(name, part, assignment, build_dir, verify_tool, work, sandbox))


def retimed(first: list, again: list) -> list:
    """`first`'s ReferenceSpeeds, each size the GPU throttled replaced by
    that size's from `again` (the same reference timed once more), marked so."""
    second = {(s.part, s.case): s for s in again}
    return [dataclasses.replace(second[(s.part, s.case)], retimed=True)
            if s.throttled and (s.part, s.case) in second else s for s in first]


def _time_reference_once(name: str, part: Part, assignment: Assignment, build_dir: Path, verify_tool: Path,
                         work: Path, sandbox: Sandbox) -> list:
    """One harness process times each of the part's timing sizes `runs` times."""
    binary = reference_binary(build_dir, name)
    if not binary.is_file():
        raise CalibrationError(f"there is no reference build of {name} ({binary})")
    runs = assignment.speed.runs
    entries = [(f"{case.name}-run{r + 1}", case) for case in part.cases["timing"] for r in range(runs)]
    case_file = write_cases(part, entries, work / name, CALIBRATION_SEED, timing=assignment.timing, harness_id=name,
                            profile=name == part.id)
    # One-shot: calibration runs once per GPU, beside a grading's build.
    one_shot = TrustedHarness(tool_path(build_dir, "tilelab-harness"), services=0)
    run = run_harness(binary, case_file, TIME_LIMIT_S, sandbox, trusted=one_shot, timed=True)
    if run.timed_out or run.exit_code != 0:
        why = "took too long" if run.timed_out else f"ended with exit status {run.exit_code} (signal {run.signal})"
        raise CalibrationError(f"the reference of {name} {why} while it was timed: "
                               f"{run.stderr.strip()[-500:] or 'no message'}")
    verdict = {v["name"]: v for v in verify(verify_tool, case_file)["cases"]}
    listed = (run.result or {}).get("cases")
    readings = by_case(listed)
    profiled = traffic.profiled_case(listed[-1] if isinstance(listed, list) and listed else {})
    speeds = []
    for case in part.cases["timing"]:
        measured, clocks = [], []
        for entry in (f"{case.name}-run{r + 1}" for r in range(runs)):
            v = verdict.get(entry)
            if v is None:
                raise CalibrationError(f"the reference of {name} was not timed at {case.name}")
            if not v["passed"]:
                raise CalibrationError(f"the reference of {name} computed wrong answers while timed at "
                                       f"{case.name}: {'; '.join(v['reasons'])}")
            t = v["timing"]
            chosen = scored_time(t)
            measured.append(gflops(matmul_flop(case.j, case.k, case.l), chosen.ms))
            clocks.append(readings.get(entry, read_clocks(None)).to_dict())
        # The profiled call is the last case's: the last timing size's.
        counters = profiled.counters if profiled.traffic and case is part.cases["timing"][-1] else {}
        speeds.append(ReferenceSpeed(name, case.j, case.k, case.l, tuple(round(g, 1) for g in measured),
                                     tuple(clocks), counters=counters))
    return speeds


def measure(build_dir: Path, assignment: Assignment, device: dict, verify_tool: Path,
            sandbox: Optional[Sandbox] = None, digest: Optional[str] = None) -> Calibration:
    """Times every part's reference on the GPU `device` names (the caller
    holds it exclusively). The references are the grader's own code: they run
    as the grader, on the sandbox's GPU (its CUDA_VISIBLE_DEVICES)."""
    started = time.monotonic()
    digest = digest or fingerprint(build_dir, assignment, device)
    runner = Sandbox(extra_env=dict(sandbox.extra_env) if sandbox else {})
    speeds = []
    with tempfile.TemporaryDirectory(prefix="tilelab-calibrate-") as work:
        for part in assignment.parts:
            speeds += _time_reference(part.id, part, assignment, build_dir, verify_tool, Path(work), runner)
        timed = set()
        for part in assignment.parts:  # cuBLAS, once per size a part is scored against it at
            if part.versus_cublas is not None:
                sizes = {(c.j, c.k, c.l) for c in part.cases["timing"]} - timed
                if sizes:
                    speeds += _time_reference(CUBLAS, part, assignment, build_dir, verify_tool, Path(work), runner)
                    timed |= sizes
    return Calibration(MEASURED_RULE, str(device["uuid"]), str(device.get("name", "")), digest,
                       _now_utc(), round(time.monotonic() - started, 2), tuple(speeds))


def _now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


CACHE_KIND = "calibration"


def cache_file(uuid: str) -> Path:
    return gpu_cache.cache_file(CACHE_KIND, uuid)


def load_cached(uuid: str) -> Optional[Calibration]:
    """The last calibration of this GPU, whatever its fingerprint; None when there is none usable."""
    return gpu_cache.load(CACHE_KIND, uuid, Calibration.from_dict, (CalibrationError,))


def save(calibration: Calibration) -> Path:
    return gpu_cache.save(CACHE_KIND, calibration.device_uuid, calibration.to_dict())


def drops(new: Calibration, old: Optional[Calibration]) -> list:
    """Where `new` is far below `old` on the same GPU, in words (empty: nowhere)."""
    if old is None:
        return []
    found = []
    for s in new.speeds:
        before = old.speed_of(s.part, s.j, s.k, s.l)
        if before is not None and s.gflops < DROP_LIMIT * before.gflops:
            found.append(f"{s.part} at {s.case}: {s.gflops:,.0f} GFLOP/s against {before.gflops:,.0f} "
                         f"on {old.measured_at}")
    return found


def _device_uuid(device: dict) -> str:
    try:
        return gpu_cache.checked_uuid(str(device.get("uuid", "")))
    except ValueError as e:
        raise CalibrationError(str(e)) from None


def get_calibration(build_dir: Path, assignment: Assignment, device: dict, verify_tool: Path,
                    sandbox: Optional[Sandbox] = None, refresh: bool = False,
                    accept_drop: bool = False, gpu_lock: Optional[GpuLock] = None) -> tuple:
    """This GPU's calibration: (Calibration, measured_now). From the cache
    while its fingerprint holds; otherwise timed now, holding `gpu_lock`
    (default: that of the GPU this process's CUDA sees first) exclusively
    (gpu_cache.kept_or_measured), and cached. A new one far below the last
    one of the same GPU raises CalibrationError and is not kept, unless
    `accept_drop` (staff ran `tilelab calibrate` on purpose)."""
    uuid = _device_uuid(device)
    current = fingerprint(build_dir, assignment, device)

    def kept() -> Optional[tuple]:
        cached = load_cached(uuid)
        return (cached, False) if cached is not None and cached.fingerprint == current and not refresh else None

    def timed() -> tuple:
        calibration = measure(build_dir, assignment, device, verify_tool, sandbox, current)
        fallen = drops(calibration, load_cached(uuid))
        if fallen and not accept_drop:
            raise CalibrationError("the reference solutions ran far slower than at the last calibration of this GPU ("
                                   + "; ".join(fallen) + "): is the GPU throttled or shared? Speed is not scored "
                                   "until staff run `tilelab calibrate` on a healthy GPU")
        save(calibration)
        return calibration, True

    return gpu_cache.kept_or_measured(kept, timed, gpu_lock or visible_gpu_lock())


def recalibrate(build_dir: Path, assignment: Assignment, device: dict, verify_tool: Path,
                sandbox: Optional[Sandbox] = None, gpu_lock: Optional[GpuLock] = None) -> tuple:
    """Times the references now, holding `gpu_lock` as get_calibration does, and
    keeps the result whatever it is (staff asked for it): (Calibration, the
    drops against the last one, in words)."""
    with (gpu_lock or visible_gpu_lock()).exclusive():
        previous = load_cached(_device_uuid(device))
        calibration = measure(build_dir, assignment, device, verify_tool, sandbox)
        save(calibration)
    return calibration, drops(calibration, previous)


def estimate(assignment: Assignment, ceilings, device: dict, published: dict, build_dir: Optional[Path] = None) \
        -> Calibration:
    """Targets for a machine without references: each reference's share of
    the FP32 roof on the grading GPU (`published`, spec.reference_gpu),
    applied to this GPU's measured FP32 roof. Only as good as that share
    carries over from one GPU to another, which is why grading never uses it.
    With `build_dir`, its fingerprint is estimate_fingerprint's."""
    speeds = []
    for name in _timed_names(assignment):
        sizes = {(c.j, c.k, c.l) for p in assignment.parts if name in (p.id, CUBLAS) for c in p.cases["timing"]}
        for size in sorted(sizes):
            figure = published_gflops(published, name, size)
            if figure is None:
                continue  # a figure taken at another size says nothing about this one
            share = figure / published["fp32_fma_gflops"]
            speeds.append(ReferenceSpeed(name, *size, (round(share * ceilings.fp32_gflops, 1),)))
    source = f"{published['device']}, measured {published['measured']} ({REFERENCE_GPU_PATH})"
    digest = estimate_fingerprint(build_dir, device) if build_dir is not None else ""
    return Calibration(ESTIMATED_RULE, str(device.get("uuid", "")), str(device.get("name", "")), digest, "", 0.0,
                       tuple(speeds), source)


def ladder_rows(calibration: Calibration, ceilings, assignment: Assignment) -> list:
    """The ladder, one dict per reference and size: its GFLOP/s, its share of
    the FP32 roof and of the DRAM roof at its intensity, its spread, and the
    targets it sets."""
    rows = []
    for s in calibration.speeds:
        part = next((p for p in assignment.parts if p.id == s.part), None)
        target = calibration.target(ceilings, part, assignment.speed, s.j, s.k, s.l) if part else None
        rows.append({
            "part": s.part, "case": s.case, "gflops": s.gflops, "runs": len(s.runs), "spread": s.spread,
            "of_fp32": s.gflops / ceilings.fp32_gflops,
            "of_dram": s.gflops / (intensity(s.j, s.k, s.l) * ceilings.dram_gbps),
            "full": target.full if target else None, "zero": target.zero if target else None,
            "versus": target.versus if target else None,
        })
    return rows


def describe(calibration: Calibration, ceilings, assignment: Assignment) -> str:
    """The ladder as a table for the terminal (`tilelab calibrate`, `tilelab roofline`)."""
    rule = assignment.speed
    if calibration.rule == MEASURED_RULE:
        head = (f"Reference solutions timed on this GPU ({calibration.measured_at}, {calibration.seconds:.1f} s; "
                f"median of {rule.runs} run{'s' if rule.runs != 1 else ''} each)")
    else:
        head = (f"No reference solutions here: estimated from their share of the FP32 roof on "
                f"{calibration.source}")
    lines = [head, f"{'part':<14}{'timed at':<18}{'GFLOP/s':>9}{'% FP32':>8}{'% DRAM':>8}{'spread':>8}"
                   f"{'full from':>11}{'none at':>9}"]
    for r in ladder_rows(calibration, ceilings, assignment):
        spread = f"{100 * r['spread']:.1f}%" if r["runs"] > 1 else "-"
        full = f"{r['full']:>11,.0f}{r['zero']:>9,.0f}" if r["full"] is not None else f"{'-':>11}{'-':>9}"
        versus = " *" if r["versus"] == CUBLAS else ""
        lines.append(f"{r['part']:<14}{r['case']:<18}{r['gflops']:>9,.0f}{100 * r['of_fp32']:>7.1f}%"
                     f"{100 * r['of_dram']:>7.2f}%{spread:>8}{full}{versus}")
    lines.append(f"Targets: full speed points from {100 * rule.full_at:.0f} % of the reference, none at or below "
                 f"{100 * rule.zero_at:.0f} % (assignment.yaml, grading.speed); % DRAM is of the DRAM roof at "
                 "the size's intensity.")
    for part in assignment.parts:
        if part.versus_cublas is not None:
            lines.append(f"* {part.id} is scored against cuBLAS SGEMM (FP32), timed here: full points from "
                         f"{100 * part.versus_cublas.full_at:.0f} % of it, none at or below the reference of "
                         f"{' or '.join(part.versus_cublas.zero_at_reference_of)} at the same size.")
    for throttled in calibration.throttled:
        lines.append(f"Throttled: {throttled}, when timed and again when timed once more: its figure and the "
                     "targets it sets may be low. Recalibrate on a cool, idle GPU (`tilelab calibrate`).")
    if calibration.rule == MEASURED_RULE:
        lines.append(f"Cache: {cache_file(calibration.device_uuid)}")
    return "\n".join(lines)
