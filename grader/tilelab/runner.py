"""Running one part: write a case file, run its harness, judge the result.

The harness (untrusted: it links a student's part file) runs in its own
process group with a time limit; its stdout and stderr go to files, so a
flood cannot fill the grader's memory. The verdict comes from
`tilelab-verify`, which links no student code; Python never parses the
harness's human-readable output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .assignment import Assignment, Case, Part

# Kept from each end of a harness's stdout/stderr; the middle is dropped.
OUTPUT_KEEP_BYTES = 16 * 1024


@dataclass
class HarnessRun:
    exit_code: Optional[int]  # None when killed for the time limit
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str
    result: Optional[dict]  # the harness's result JSON, if it wrote a readable one


@dataclass
class PartRun:
    part: Part
    harness: HarnessRun
    verdict: dict

    @property
    def cases_passed(self) -> int:
        return int(self.verdict.get("cases_passed", 0))

    @property
    def cases_total(self) -> int:
        return int(self.verdict.get("cases_total", 0))


def case_entry(case: Case, part: Part, seed: int, workdir: Path, timing: Optional[dict]) -> dict:
    """One case of a case file (schema: grader/harness/core/case_file.h)."""
    entry = {
        "name": case.name,
        "j": case.j,
        "k": case.k,
        "l": case.l,
        "inputs": {"seed": seed, "distribution": case.distribution},
        "tolerance": {"sqrt_k_factor": part.tolerance["sqrt_k_factor"]},
    }
    if case.props:
        entry["props"] = dict(case.props)
    if timing is None:
        entry["output"] = str(workdir / f"{case.name}.P.f32")
    else:
        entry["timing"] = dict(timing, seed=seed ^ 0x5EED)
    return entry


def write_case_file(
    part: Part,
    assignment: Assignment,
    case_sets: tuple,
    workdir: Path,
    seed: int,
    timed: bool = False,
) -> Path:
    """Writes a case file for the given case sets of a part; seeds derive from `seed`."""
    workdir.mkdir(parents=True, exist_ok=True)
    cases = []
    for set_name in case_sets:
        for i, case in enumerate(part.cases[set_name]):
            case_seed = (seed * 1_000_003 + len(cases) * 7919 + i) & 0xFFFFFFFFFFFF
            timing = assignment.timing if timed and set_name == "timing" else None
            cases.append(case_entry(case, part, case_seed, workdir, timing))
    doc = {"version": 1, "part": part.id, "result": str(workdir / "result.json"), "cases": cases}
    path = workdir / "cases.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


def _read_capped(path: Path) -> str:
    size = path.stat().st_size
    with path.open("rb") as f:
        if size <= 2 * OUTPUT_KEEP_BYTES:
            data = f.read()
        else:
            head = f.read(OUTPUT_KEEP_BYTES)
            f.seek(size - OUTPUT_KEEP_BYTES)
            tail = f.read()
            data = head + f"\n[... {size - 2 * OUTPUT_KEEP_BYTES} bytes cut ...]\n".encode() + tail
    return data.decode("utf-8", errors="replace")


def run_harness(binary: Path, case_file: Path, timeout_s: float) -> HarnessRun:
    workdir = case_file.parent
    out_path, err_path = workdir / "harness.stdout", workdir / "harness.stderr"
    result_path = workdir / "result.json"
    if result_path.exists():
        result_path.unlink()
    start = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        # A new session makes the harness a process-group leader, so the time
        # limit kills everything it started, not only the harness itself.
        proc = subprocess.Popen(
            [str(binary), str(case_file)], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
            cwd=workdir, start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    seconds = time.monotonic() - start
    result = None
    if result_path.exists():
        try:
            result = json.loads(result_path.read_text())
        except (ValueError, UnicodeDecodeError):
            result = None
    return HarnessRun(
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        seconds=seconds,
        stdout=_read_capped(out_path),
        stderr=_read_capped(err_path),
        result=result,
    )


def verify(verify_binary: Path, case_file: Path) -> dict:
    """The trusted verdict on the last harness run in the case file's directory."""
    workdir = case_file.parent
    verdict_path = workdir / "verdict.json"
    proc = subprocess.run(
        [str(verify_binary), str(case_file), str(workdir / "result.json"), str(verdict_path)],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"tilelab-verify failed ({proc.returncode}): {proc.stderr.strip()}")
    return json.loads(verdict_path.read_text())


def exit_codes(verify_binary: Path) -> dict:
    """The harness exit-code table, read from the trusted verifier binary."""
    proc = subprocess.run([str(verify_binary), "--exit-codes"], capture_output=True, text=True, check=True)
    return {row["code"]: row for row in json.loads(proc.stdout)}


def run_part(
    binary: Path,
    verify_binary: Path,
    part: Part,
    assignment: Assignment,
    case_sets: tuple,
    workdir: Path,
    seed: int,
    timeout_s: float,
    timed: bool = False,
) -> PartRun:
    case_file = write_case_file(part, assignment, case_sets, workdir, seed, timed=timed)
    harness = run_harness(binary, case_file, timeout_s)
    return PartRun(part=part, harness=harness, verdict=verify(verify_binary, case_file))
