"""The one entry to a grading: every command that grades (check, grade,
batch, selftest, gates, the benchmark) calls `run_grading`, and what each
writes is its `Outputs`.

Gradescope reads results.json alone and shows a missing or malformed one as
"the autograder failed to execute correctly", with no score: so where a
grading writes results.json, a failure of the grader itself still writes a
valid one before it is reported.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from ..grading.answers import problem_lines
from ..grading.model import NO_DEVICE_NOTE, GradeResult
from ..grading.options import GradeOptions
from ..outputs import causes, gradescope, prairielearn
from ..outputs.gradescope import write_results
from ..spec.assignment import load_assignment
from ..system.gpu_lock import GpuLock
from ..system.atomic import read_json
from ..system.paths import ASSIGNMENT_FILE
from ..system.sandbox import Sandbox

if TYPE_CHECKING:
    from ..grading.trusted_harness import KeptServices

EXIT_GRADED = 0
EXIT_GRADER_ERROR = 2
RESULTS_FORMATS = ("gradescope", "prairielearn")
AUDIENCES = ("student", "staff")


@dataclass(frozen=True)
class Outputs:
    """What a grading writes into its out_dir, chosen by the command."""

    reports: tuple = AUDIENCES  # report.md/.html for each (staff ones under staff/)
    results: Optional[str] = "gradescope"  # the form of results.json (RESULTS_FORMATS), or None for none
    detailed: bool = True  # grade.json: everything, with when each phase ran
    leaderboard_alias: Optional[str] = None  # the hand-in's alias on the class leaderboard (batch)

    def __post_init__(self) -> None:
        if self.results is not None and self.results not in RESULTS_FORMATS:
            raise ValueError(f"results must be one of {RESULTS_FORMATS} or None, not {self.results!r}")
        unknown = set(self.reports) - set(AUDIENCES)
        if unknown:
            raise ValueError(f"reports are for {AUDIENCES}, not {sorted(unknown)}")


GRADE = Outputs()  # tilelab grade, a batch's hand-in
NOTHING = Outputs(reports=(), results=None, detailed=False)  # the result alone (gates, the benchmark)


@dataclass(frozen=True)
class Outcome:
    code: int  # EXIT_GRADED or EXIT_GRADER_ERROR: the command's exit status
    error: Optional[str] = None  # what failed in the grader, if it did
    result: Optional[GradeResult] = None  # None when the grader failed


def run_grading(submission: Path, options: GradeOptions, outputs: Outputs = GRADE, *,
                progress: Optional[Callable[[str], None]] = None, echo: Optional[Callable[[str], None]] = None,
                sandbox: Optional[Sandbox] = None, gpu_lock: Optional[GpuLock] = None,
                kept: Optional[KeptServices] = None) -> Outcome:
    """Grades `submission` and writes `outputs` into options.out_dir.

    Where outputs.results is set, a failure of the grader is written there
    (a visible "Autograder error" test and a hidden traceback; PrairieLearn's
    form: not gradable) and returned (EXIT_GRADER_ERROR); otherwise it is raised. `progress` is
    told each stage; `echo` (results only) gets the closing lines.
    `sandbox` and `gpu_lock` are shared by gradings side by side (batch, selftest);
    `kept`: a watch's services, kept from one check to the next.
    """
    from ..system.warmup import prepare_in_background

    out_dir = options.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    # The reports' warm-up shortens a lone grading's end; beside other
    # gradings (a shared GPU lock) it would only take a core from a part
    # being timed.
    warm_up = prepare_in_background if outputs.reports and gpu_lock is None else None
    if outputs.results is None:
        result = _grade_and_write(submission, options, outputs, progress, sandbox, gpu_lock, warm_up, kept)
        return Outcome(EXIT_GRADED, result=result)
    error_results = prairielearn.error_results if outputs.results == "prairielearn" else gradescope.error_results
    results_path = out_dir / "results.json"
    echo = echo or print
    try:
        result = _grade_and_write(submission, options, outputs, progress, sandbox, gpu_lock, warm_up, kept)
    except BaseException as exc:  # noqa: BLE001 - the results file must exist whatever went wrong
        write_results(error_results(traceback.format_exc()), results_path)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        echo(f"tilelab grade: the grader failed ({type(exc).__name__}: {exc}); "
             f"{results_path} reports an autograder error")
        return Outcome(EXIT_GRADER_ERROR, f"{type(exc).__name__}: {exc}")
    for line in closing_lines(result, outputs.results, out_dir / "report.md"):
        echo(line)
    echo(f"graded in {result.seconds:.1f} s; wrote {results_path}, {out_dir / 'report.md'}, "
         f"{out_dir / 'report.html'}, {out_dir / 'grade.json'}")
    return Outcome(EXIT_GRADED, result=result)


def closing_lines(result: GradeResult, results_format: Optional[str], report: Path) -> list:
    """What a grading's terminal says before the files it wrote: the
    grading's notes (which folder was graded), each part that did not build,
    what in answers.yaml cannot be graded, and the score, with what
    results.json records when that differs (withheld without a GPU)."""
    lines = ["no CUDA device: the GPU stages did not run and scored nothing"] if result.gpu is None else []
    lines += [note for note in result.notes if note != NO_DEVICE_NOTE]
    lines += [f"{line}; see {report}" for line in map(causes.state_line, result.parts) if line]
    if result.answers is not None:
        lines += problem_lines(result.answers)
    score = f"score {result.score:.2f} / {result.max_score:.2f}"
    if results_format and causes.gpu_withheld(result):
        recorded = ("records 0 (withheld: no GPU ran the parts)" if results_format == "gradescope"
                    else "records no score (not gradable: no GPU ran the parts)")
        score += f" here; results.json {recorded}"
    return lines + [score]


def _grade_and_write(submission: Path, options: GradeOptions, outputs: Outputs, progress, sandbox, gpu_lock,
                     while_timing, kept) -> GradeResult:
    from ..grading.pipeline import grade

    # Read first: a broken assignment.yaml is a grader failure, written as such where results are.
    assignment = load_assignment(options.root / ASSIGNMENT_FILE) if outputs.results else None
    result = grade(submission, options, sandbox=sandbox, gpu_lock=gpu_lock, progress=progress,
                   while_timing=while_timing, kept=kept)
    _write(result, options.out_dir, outputs, assignment)
    return result


def _write(result: GradeResult, out_dir: Path, outputs: Outputs, assignment) -> None:
    from ..grading.pipeline import write_detailed_json
    from ..outputs.report import write_reports

    plot = None
    for audience in outputs.reports:
        written = write_reports(result, out_dir / ("staff" if audience == "staff" else ""),
                                audience=audience, leaderboard_alias=outputs.leaderboard_alias, plot_drawn=plot)
        plot = plot or written.get("plot")
    if outputs.detailed:
        write_detailed_json(result, out_dir / "grade.json")
    if outputs.results == "prairielearn":
        write_results(prairielearn.results(result, assignment, plot), out_dir / "results.json")
    elif outputs.results == "gradescope":
        write_results(gradescope.results_json(result, assignment), out_dir / "results.json")


def counters_pending(out_dir: Path) -> bool:
    """Whether the grading written in out_dir left counters to be read (its grade.json says so)."""
    return _pending(read_json(out_dir / "grade.json"))


def _pending(doc) -> bool:
    parts = doc.get("parts") if isinstance(doc, dict) else None
    return isinstance(parts, list) and any(isinstance(p, dict) and isinstance(p.get("counters_later"), str)
                                           and p["counters_later"] != "" for p in parts)


def read_counters_later(submission: Path, options: GradeOptions, outputs: Outputs = GRADE, *,
                        sandbox: Optional[Sandbox] = None, gpu_lock: Optional[GpuLock] = None) -> list:
    """Reads the counters that the grading of `submission` written in
    options.out_dir left for later (grading/counters_later.py) and writes
    its `outputs` again, the same but for the parts' traffic. Returns the
    ids of the parts read; [] where none was left."""
    from ..grading.counters_later import read_later

    return _counters_again(options, outputs, lambda result: read_later(submission, result, options, sandbox=sandbox,
                                                                       gpu_lock=gpu_lock))


def counters_not_read(options: GradeOptions, outputs: Outputs = GRADE) -> list:
    """Where the counters that the grading in options.out_dir left for later
    cannot be read (counters_later.give_up): its `outputs` written again,
    saying so instead of promising them. Returns the ids of those parts."""
    from ..grading.counters_later import give_up

    return _counters_again(options, outputs, give_up)


def _counters_again(options: GradeOptions, outputs: Outputs, change: Callable[[GradeResult], list]) -> list:
    """`change` made to the grading in options.out_dir, and its `outputs` written again; [] where it left no
    counters pending."""
    doc = read_json(options.out_dir / "grade.json")
    if not _pending(doc):
        return []
    result = GradeResult.from_dict(doc)
    assignment = load_assignment(options.root / ASSIGNMENT_FILE) if outputs.results else None
    changed = change(result)
    _write(result, options.out_dir, outputs, assignment)
    return changed
