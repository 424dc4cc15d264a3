"""The terminal view of `tilelab check`: one table, then what to fix first."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..grading.model import ESTIMATED_RULE, STAGE_TITLES, GradeResult

_STYLE = {"passed": ("ok", "green"), "failed": ("FAIL", "bold red"), "not_run": ("-", "dim"),
          "error": ("grader error", "yellow")}


def _cell(status: str) -> str:
    text, style = _STYLE[status]
    return f"[{style}]{text}[/{style}]"


def print_check(result: GradeResult, console: Console = None) -> None:
    console = console or Console()
    gpu = result.gpu.get("name") if result.gpu else "no GPU: GPU stages not run"
    table = Table(title=f"tilelab check ({gpu})", title_justify="left")
    for column in ("part", "build", "public cases", "launch", "memcheck", "racecheck", "speed", "points"):
        table.add_column(column)
    for p in result.parts:
        public = [c for c in p.cases if c.set == "public"]
        ran = [c for c in public if c.ran or c.status != "not_run"]
        cases = f"{sum(c.passed for c in public)}/{len(public)}" if ran else _cell(p.stages["correctness"].status)
        if public and not all(c.passed for c in public):
            cases = f"[bold red]{cases}[/bold red]"
        speed = _cell(p.stages["speed"].status)
        if p.speed is not None:
            estimated = "~" if p.speed.rule == ESTIMATED_RULE else ""
            # Every timed size: a part scored against cuBLAS is timed at two.
            speed = "\n".join(f"{t.gflops:.0f} / {estimated}{t.target_gflops:.0f} GFLOP/s"
                               + (f" ({100 * t.of_cublas:.0f}% of cuBLAS)" if t.of_cublas is not None else "")
                               for t in (p.speeds or [p.speed]))
        build = _cell("failed" if "failed" in (p.stages["static"].status, p.stages["build"].status)
                      else p.stages["build"].status)
        table.add_row(p.id, build, cases, _cell(p.stages["launch"].status), _cell(p.stages["memcheck"].status),
                      _cell(p.stages["racecheck"].status), speed,
                      f"{p.score:.1f} / {p.max_score:.1f}" + (" extra" if p.extra_credit else ""))
    console.print(table)
    timed = [p.speed for p in result.parts if p.speed is not None]
    if any(s.rule == ESTIMATED_RULE for s in timed):
        console.print("Speed targets (~) are estimates: this machine has no reference solutions to time, so each "
                      "is the reference's share of the FP32 roof on the course's grading GPU, applied to this GPU. "
                      "The grader times the real references on its own GPU.")
    elif timed:
        console.print("Speed targets: a share of the reference solution's speed, timed on this GPU"
                      + ("; for a part scored against cuBLAS, a share of cuBLAS SGEMM (FP32) timed here."
                         if any(s.versus == "cublas" for s in timed) else "."))
    for note in result.notes:
        console.print(f"[yellow]{note}[/yellow]")
    for p in result.parts:
        failed = p.failed_stage
        if failed is None:
            continue
        st = p.stages[failed]
        console.print(f"[bold]{p.id}[/bold]: {STAGE_TITLES[failed]}: {st.summary}")
        detail_lines = st.details.splitlines()[:12]
        for line in detail_lines:
            console.print(f"    {line}", markup=False, highlight=False)
        for hint in st.hints:
            console.print(f"  [cyan]->[/cyan] {hint}")
