"""`tilelab grade`: one grading, with every output written, whatever happens.

Gradescope reads results.json and nothing else, and a missing or malformed
file shows as "the autograder failed to execute correctly" with no score.
So any failure of the grader itself still writes a valid results.json (a
visible "Autograder error" test and a hidden traceback) before the command
reports it. With `results_format="prairielearn"` results.json takes
PrairieLearn's form instead (a grader failure: not gradable, no attempt lost).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..outputs import gradescope, prairielearn
from ..outputs.gradescope import write_results
from ..spec.assignment import load_assignment
from ..system.paths import ASSIGNMENT_FILE

EXIT_GRADED = 0
EXIT_GRADER_ERROR = 2
RESULTS_FORMATS = ("gradescope", "prairielearn")


@dataclass(frozen=True)
class Outcome:
    code: int  # EXIT_GRADED or EXIT_GRADER_ERROR: the command's exit status
    error: Optional[str] = None  # what failed in the grader, if it did


def run_grading(
    submission: Path,
    *,
    root: Path,
    build_dir: Optional[str],
    out_dir: Path,
    seed: Optional[int] = None,
    parts: tuple = (),
    sanitizers: bool = True,
    echo: Callable[[str], None] = print,
    answer_key: Optional[Path] = None,
    results_format: str = "gradescope",
    leaderboard_alias: Optional[str] = None,
    **options,
) -> "Outcome":
    """`options` go to GradeOptions as they are (sandbox, gpu_lock, jobs... for batch grading).
    `leaderboard_alias`: the hand-in's alias on the class leaderboard, for its reports (batch)."""
    if results_format not in RESULTS_FORMATS:
        raise ValueError(f"results_format must be one of {RESULTS_FORMATS}, not {results_format!r}")
    error_results = prairielearn.error_results if results_format == "prairielearn" else gradescope.error_results
    out_dir.mkdir(parents=True, exist_ok=True)
    results_path = out_dir / "results.json"
    try:
        from ..grading.options import GradeOptions
        from ..grading.pipeline import grade, write_detailed_json
        from ..outputs.report import write_reports
        from ..system.warmup import prepare_in_background

        assignment = load_assignment(root / ASSIGNMENT_FILE)
        build = Path(build_dir).resolve() if build_dir else root / "build"
        opt = GradeOptions(root=root, build_dir=build, out_dir=out_dir, mode="grade", seed=seed, parts=parts,
                           sanitizers=sanitizers, answer_key=answer_key, progress=lambda m: echo(f"... {m}"),
                           while_timing=prepare_in_background, **options)
        result = grade(submission, opt)
        written = write_reports(result, out_dir, audience="student", leaderboard_alias=leaderboard_alias)
        write_reports(result, out_dir / "staff", audience="staff", leaderboard_alias=leaderboard_alias,
                      plot_drawn=written.get("plot"))
        write_detailed_json(result, out_dir / "grade.json")
        if results_format == "prairielearn":
            write_results(prairielearn.results(result, assignment, written.get("plot")), results_path)
        else:
            write_results(gradescope.results_json(result, assignment), results_path)
    except BaseException as exc:  # noqa: BLE001 - the results file must exist whatever went wrong
        write_results(error_results(traceback.format_exc()), results_path)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        echo(f"tilelab grade: the grader failed ({type(exc).__name__}: {exc}); "
             f"{results_path} reports an autograder error")
        return Outcome(EXIT_GRADER_ERROR, f"{type(exc).__name__}: {exc}")
    if result.gpu is None:
        echo("no CUDA device: the GPU stages did not run and scored nothing")
    echo(f"score {result.score:.2f} / {result.max_score:.2f} in {result.seconds:.1f} s; "
         f"wrote {results_path}, {out_dir / 'report.md'}, {out_dir / 'report.html'}, {out_dir / 'grade.json'}")
    return Outcome(EXIT_GRADED)
