"""Correctness and speed of a built set of parts (the solutions, by default).

Each part's public and hidden cases run through its harness and the trusted
verifier; then its timing cases, each timed call on fresh inputs and checked
through its samples. The table gives cases passed and GFLOP/s at the large
sizes, from the median CUDA-event time.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from .assignment import Assignment
from .runner import exit_codes, run_part

@dataclass
class BenchRow:
    part: str
    status: str  # "ok", "failed", "not built", "no GPU"
    cases_passed: int = 0
    cases_total: int = 0
    timing_size: str = ""
    timing_ok: Optional[bool] = None
    median_ms: Optional[float] = None
    cupti_ms: Optional[float] = None
    wall_ms: Optional[float] = None
    gflops: Optional[float] = None
    note: str = ""


def bench(
    assignment: Assignment,
    build_dir: Path,
    part_set: str,
    workdir: Path,
    seed: int = 1,
    timeout_s: float = 600,
    only: tuple = (),
) -> list:
    verify_binary = build_dir / "bin" / "tilelab-verify"
    codes = exit_codes(verify_binary)
    rows = []
    for part in assignment.parts:
        if only and part.id not in only:
            continue
        binary = build_dir / part_set / part.id
        if not binary.exists():
            rows.append(BenchRow(part.id, "not built", note=f"{binary} does not exist"))
            continue
        run = run_part(binary, verify_binary, part, assignment, ("public", "hidden"), workdir / part.id / "cases",
                       seed, timeout_s)
        code = run.harness.exit_code
        if code is not None and codes.get(code, {}).get("name") == "no_device":
            rows.append(BenchRow(part.id, "no GPU", note="no CUDA device: GPU stages not run"))
            continue
        row = BenchRow(part.id, "ok", run.cases_passed, run.cases_total)
        if run.cases_passed != run.cases_total:
            row.status = "failed"
            failed = [c for c in run.verdict["cases"] if not c["passed"]]
            row.note = f"{failed[0]['name']}: {'; '.join(failed[0]['reasons'])}"
        timed = run_part(binary, verify_binary, part, assignment, ("timing",), workdir / part.id / "timing", seed,
                         timeout_s, timed=True)
        case = timed.verdict["cases"][0]
        t = case.get("timing")
        row.timing_size = f"{case['j']}x{case['k']}x{case['l']}"
        row.timing_ok = bool(case["passed"])
        if t:
            row.median_ms, row.cupti_ms, row.wall_ms = t["median_event_ms"], t["median_cupti_span_ms"], t["median_wall_ms"]
            row.gflops = t["gflops"]
        if not case["passed"]:
            row.status = "failed"
            row.note = row.note or "; ".join(case["reasons"])
        rows.append(row)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "bench.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return rows


def format_table(rows: list) -> str:
    header = ("part", "status", "cases", "timing size", "median ms", "CUPTI ms", "wall ms", "GFLOP/s")
    lines = []
    for r in rows:
        def num(x, fmt):
            return fmt.format(x) if x is not None else "-"
        lines.append((
            r.part, r.status, f"{r.cases_passed}/{r.cases_total}" if r.cases_total else "-",
            r.timing_size or "-", num(r.median_ms, "{:.3f}"), num(r.cupti_ms, "{:.3f}"), num(r.wall_ms, "{:.3f}"),
            num(r.gflops, "{:.0f}"),
        ))
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    out.append("  ".join("-" * w for w in widths))
    out.extend("  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines)
    notes = [f"{r.part}: {r.note}" for r in rows if r.note]
    return "\n".join(out + notes)
