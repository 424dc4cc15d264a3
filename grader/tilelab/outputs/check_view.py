"""The terminal view of `tilelab check`: one table, then what to fix first.

The table fits the terminal: a cell wraps inside its column rather than
being cut. Without a GPU it shows what the static checks can tell (the
starter's stubs not written yet) and where the GPU stages can run.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..grading.answers import answered, problem_lines
from ..grading.model import ESTIMATED_RULE, NO_DEVICE_NOTE, STAGE_TITLES, STAGES, GradeResult
from .traffic_view import check_row

_FOUND = "what can be told without a GPU"
_HINT = "what the counters suggest"
_STYLE = {"passed": ("ok", "green"), "failed": ("FAIL", "bold red"), "not_run": ("-", "dim"),
          "error": ("grader error", "yellow")}
# Where a student without a GPU of their own gets the GPU stages run.
# A service whose worker has no GPU: the course's to fix, not the student's.
NO_GPU_THERE = ("The grading service checked this on a worker without a GPU: tell your course staff, and check again "
                "once it has one (or on a machine with an NVIDIA GPU).")
WHERE_TO_RUN = ("To run the cases, the checks and the timing, use a machine with an NVIDIA GPU: the Colab notebook "
                "docs/colab.ipynb (a free GPU in the browser; see README.md), a GPU machine of your own or your "
                "course's, or your course's grading service if it runs one.")


def _cell(status: str) -> str:
    text, style = _STYLE[status]
    return f"[{style}]{text}[/{style}]"


def _table(title: str, columns: tuple) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for column in columns:
        # Short cells never break; a long one (what was found) wraps, never cut.
        table.add_column(column, overflow="fold", no_wrap=column not in (_FOUND, _HINT))
    return table


def _build_cell(p) -> str:
    return _cell("failed" if "failed" in (p.stages["static"].status, p.stages["build"].status)
                 else p.stages["build"].status)


def _points(p) -> str:
    return f"{p.score:g}/{p.max_score:g}" + ("*" if p.extra_credit else "")


def _without_gpu(result: GradeResult, console: Console, where: str = "") -> None:
    title = (f"tilelab check at {where}: its worker has no GPU, so only the static checks and the build ran" if where
             else "tilelab check: no CUDA device here, so only the static checks and the build ran")
    table = _table(title, ("part", "build", _FOUND))
    for p in result.parts:
        if p.not_written:
            found = "not written yet: " + ", ".join(p.not_written)
        elif p.failed_stage in ("static", "build"):
            found = f"{STAGE_TITLES[p.failed_stage]}: {p.stages[p.failed_stage].summary}"
        else:
            found = "no TODO stub left: the cases need a GPU"
        table.add_row(p.id, _build_cell(p), found)
    console.print(table)


def _with_gpu(result: GradeResult, console: Console, where: str = "") -> None:
    table = _table(f"tilelab check on {result.gpu.get('name', 'this GPU')}" + (f" at {where}" if where else ""),
                   ("part", "build", "cases", "launch", "memcheck", "racecheck", "GFLOP/s", "points"))
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
            speed = "\n".join(f"{t.gflops:.0f}/{estimated}{t.target_gflops:.0f}" for t in (p.speeds or [p.speed]))
        table.add_row(p.id, _build_cell(p), cases, _cell(p.stages["launch"].status),
                      _cell(p.stages["memcheck"].status), _cell(p.stages["racecheck"].status), speed, _points(p))
    console.print(table)
    timed = [p.speed for p in result.parts if p.speed is not None]
    for p in result.parts:
        shares = [f"{100 * t.of_cublas:.0f}% at {t.case}" for t in (p.speeds or []) if t.of_cublas is not None]
        if shares:
            console.print(f"{p.id}: {', '.join(shares)} of cuBLAS SGEMM's speed here")
        if p.extra_credit:
            console.print(f"{p.id}*: extra credit, on top of the total")
    if any(s.rule == ESTIMATED_RULE for s in timed):
        console.print("GFLOP/s: achieved / full speed points from. Targets marked ~ are estimates: "
                      "this machine has no reference solutions to time, so each is the reference's share of the "
                      "FP32 roof on the course's grading GPU, applied to this GPU. The grader times the real "
                      "references on its own GPU.")
    elif timed:
        console.print("GFLOP/s: achieved / full speed points from, a share of the reference solution's speed "
                      "timed on this GPU"
                      + ("; for a part scored against cuBLAS, a share of cuBLAS SGEMM (FP32) timed here."
                         if any(s.versus == "cublas" for s in timed) else "."))
    _traffic(result, console)


def _traffic(result: GradeResult, console: Console) -> None:
    """The counters of each profiled part in one small table: nothing when
    no part was timed (`check --fast`), so nothing was profiled."""
    rows = [row for row in (check_row(p) for p in result.parts) if row is not None]
    if not rows:
        return
    table = _table("What one call moved, in FLOP/B (hardware counters; no points)",
                   ("part", "global loads", "DRAM", _HINT))
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # as text: a hint may hold M[i], which is not markup
    console.print(table)


def _answers_line(result: GradeResult) -> str:
    """answers.yaml in one line: an unreadable file costs every question's
    points, so it is said here, not only in the report; what in a read file
    cannot be graded follows it (_print_answers)."""
    answers = result.answers
    if answers is None:
        return ""
    if answers.status != "read":
        message = answers.message or answers.summary
        return f"[bold red]{message}[/bold red]" if message.startswith(answers.file) else \
            f"[bold red]{answers.file}[/bold red]: {message}"
    auto = [q for q in answers.questions if q.kind != "text"]
    done = f"{answered(answers)} of {len(answers.questions)} questions answered"
    unreadable = answers.count("invalid")
    if not answers.graded:
        return (f"{answers.file}: read; {done}" + (f", [bold red]{unreadable} not readable[/bold red]"
                                                   if unreadable else "") + f"; {answers.not_graded_reason}")
    wrong = answers.count("wrong", "invalid")
    return (f"{answers.file}: {answers.score:g} / {answers.max_score:g} points, {answers.count('correct')} of "
            f"{len(auto)} automatic answers right" + (f", [bold red]{wrong} wrong or unreadable[/bold red]"
                                                     if wrong else "")
            + f"; {done}")


def _print_answers(result: GradeResult, console: Console) -> None:
    line = _answers_line(result)
    if not line:
        return
    console.print(line)
    problems = problem_lines(result.answers)
    # An unread file's problem is the line above; what follows it is where its notes say it was found.
    for problem in problems if result.answers.status == "read" else problems[1:]:
        # As text: a list answer shows as [a, b], which is not markup.
        console.print(Text(f"  {problem}", style="yellow"))


def check_passed(result: GradeResult) -> bool:
    """Whether `check` found nothing to fix: every part checked passed on a
    GPU, and answers.yaml (when checked) could be read, every answer in it too."""
    parts_ok = all(p.failed_stage is None for p in result.parts) and (bool(result.gpu) or not result.parts)
    answers = result.answers
    return parts_ok and (answers is None or (answers.status == "read" and not answers.count("invalid")))


def print_check(result: GradeResult, console: Console = None, where: str = "", where_to_run: bool = True) -> None:
    """The check's table and what to fix first. `where`: the grading
    service that ran it (`check --remote`), when it did not run here.
    `where_to_run`: without a GPU, say where the GPU stages can run (`check
    --watch` says it once, not on every save)."""
    console = console or Console()
    if result.parts:
        if result.gpu:
            _with_gpu(result, console, where)
        else:
            _without_gpu(result, console, where)
    for note in result.notes:
        if note != NO_DEVICE_NOTE:  # the table's title says so
            console.print(f"[yellow]{note}[/yellow]")
    if result.parts and not result.gpu and where_to_run:
        console.print(NO_GPU_THERE if where else WHERE_TO_RUN)
    _print_answers(result, console)
    for p in result.parts:
        # What to fix first; where nothing failed, advice a passing stage gave (printing slows every call).
        shown = [p.failed_stage] if p.failed_stage else [n for n in STAGES if p.stages[n].hints]
        for name in shown:
            st = p.stages[name]
            console.print(f"[bold]{p.id}[/bold]: {STAGE_TITLES[name]}: {st.summary}")
            for line in st.details.splitlines()[:12] if name == p.failed_stage else []:
                console.print(f"    {line}", markup=False, highlight=False)
            for hint in st.hints:
                console.print(f"  [cyan]->[/cyan] {hint}")
