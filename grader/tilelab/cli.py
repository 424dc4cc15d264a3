"""The `tilelab` command: thin subcommands over the package's functions."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__
from .cli_options import BUILD_OPTION, build_path, built_dir, root_of
from .cli_service import COMMANDS
from .cli_similarity import COMMANDS as SIMILARITY_COMMANDS
from .errors import TilelabError
from .grading.answers_file import ANSWERS_FILE
from .spec.assignment import Assignment, AssignmentError, load_assignment
from .system.cpu_share import GRADINGS_AT_ONCE_WORDS
from .system.paths import ASSIGNMENT_FILE, tool_path


class _Commands(click.Group):
    """Every command ends what a user can cause (a missing tool, package, GPU,
    user or permission, a broken file) with one line that names the fix,
    never a traceback: errors.TilelabError, caught here once."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TilelabError as e:
            raise click.ClickException(str(e)) from None
        except PermissionError as e:
            where = e.filename or "a file it needs"
            raise click.ClickException(f"{where}: permission denied: run as a user who may write there, or "
                                       "choose another place (--out, --build)") from None


@click.group(cls=_Commands)
@click.option("--root", type=click.Path(file_okay=False), help="Project root (default: found from the working directory).")
@click.version_option(__version__, prog_name="tilelab")
@click.pass_context
def main(ctx: click.Context, root: str | None) -> None:
    """tilelab: a CUDA matrix-multiplication lab and its autograder.

    Every command that writes files takes --out DIR, by default BUILD/<command>
    (BUILD: --build, else ROOT/build); every command that grades several
    hand-ins at once takes --jobs N."""
    ctx.obj = {"root": root}


@main.command()
@click.option("--check", is_flag=True, help="Only report whether starter/ is up to date; change nothing.")
@click.pass_context
def starter(ctx: click.Context, check: bool) -> None:
    """Generate starter/ from the solution regions of solutions/."""
    from .authoring import starter as starter_mod

    root = root_of(ctx.obj["root"])
    assignment = load_assignment(root / ASSIGNMENT_FILE)
    files = starter_mod.starter_files(assignment, root / "solutions", root / "starter")
    stale = [f for f in files if not f.up_to_date]
    if check:
        for f in stale:
            click.echo(f"out of date: {f.path.relative_to(root)}", err=True)
        if stale:
            click.echo("run `tilelab starter` to regenerate it from solutions/", err=True)
            sys.exit(1)
        click.echo(f"starter/ is up to date ({len(files)} files)")
        return
    for path in starter_mod.write_starter(files):
        click.echo(f"wrote {path.relative_to(root)}")
    click.echo(f"starter/ is up to date ({len(files)} files)")


def _load(root: Path):
    return load_assignment(root / ASSIGNMENT_FILE)


def _out_path(out_dir: str | None, build: Path, command: str) -> Path:
    """The one convention for where a command writes: --out, else BUILD/<command>."""
    return Path(out_dir).resolve() if out_dir else build / command


def _out_option(what: str, command: str):
    return click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
                        help=f"Where {what} go (default: BUILD/{command}).")


def _jobs_option(what: str = "Hand-ins graded at once"):
    return click.option("--jobs", type=click.IntRange(min=1), default=None,
                        help=f"{what} [default: {GRADINGS_AT_ONCE_WORDS}].")


def _part_ids(assignment: Assignment, names: tuple) -> tuple:
    """The ids of the parts a person named (by id or by file); an unknown name is a usage error."""
    try:
        return tuple(dict.fromkeys(assignment.part_named(n).id for n in names))
    except AssignmentError as e:
        raise click.BadParameter(str(e), param_hint="'--part'") from None


@main.command()
@click.argument("submission", type=click.Path(exists=True, file_okay=False))
@_out_option("results.json and the reports", "grade")
@BUILD_OPTION
@click.option("--seed", type=int, default=None, help="Input seed (default: a fresh one; give one to regrade identically).")
@click.option("--part", "parts", multiple=True,
              help="Grade only this part, by id or file (repeatable); the questions are graded only without --part.")
@click.option("--no-sanitizers", is_flag=True, help="Skip compute-sanitizer (faster; those stages show as not run).")
@click.option("--no-counters", is_flag=True,
              help="Skip the hardware counters of the timed parts (faster; the report has no measured traffic).")
@click.option("--answer-key", type=click.Path(dir_okay=False), default=None,
              help="The answer key (default: ROOT/solutions/answers.yaml, or ROOT/key/answers.yaml).")
@click.option("--format", "results_format", type=click.Choice(["gradescope", "prairielearn"]), default="gradescope",
              show_default=True, help="The form of results.json: Gradescope's, or PrairieLearn's external grader's.")
@click.pass_context
def grade(ctx: click.Context, submission: str, out_dir: str | None, build_dir: str | None, seed: int | None,
          parts: tuple, no_sanitizers: bool, no_counters: bool, answer_key: str | None,
          results_format: str) -> None:
    """Grade a directory of part files and answers.yaml: results.json, reports, detailed JSON."""
    root = root_of(ctx.obj["root"])
    build = build_path(root, build_dir)
    _warm_up(build)
    # Only to check the names: a broken assignment.yaml is reported in results.json itself.
    parts = _part_ids(_load(root), parts) if parts else ()
    from .grading.options import GradeOptions
    from .operations.grading_run import Outputs, run_grading

    options = GradeOptions.for_tree(root, build, _out_path(out_dir, build, "grade"), parts=parts, seed=seed,
                                    questions=not parts, sanitizers=not no_sanitizers,
                                    counters="off" if no_counters else "inline",
                                    answer_key=Path(answer_key).resolve() if answer_key else None)
    outcome = run_grading(Path(submission).resolve(), options, Outputs(results=results_format),
                          progress=lambda m: click.echo(f"... {m}"), echo=click.echo)
    sys.exit(outcome.code)


@main.command()
@click.argument("class_dir", metavar="DIR", type=click.Path(exists=True, file_okay=False))
@_out_option("OUT/<student>/ and gradebook.csv", "batch")
@BUILD_OPTION
@click.option("--seed", type=int, default=None,
              help="One input seed for every submission and every rerun (default: a fresh one each).")
@click.option("--gpus", default=None, help="GPUs to grade on, e.g. 0,2 (default: CUDA_VISIBLE_DEVICES, else all "
                                           "that nvidia-smi -L lists); one worker each.")
@_jobs_option("Hand-ins graded at once where there is no GPU (with GPUs: --in-flight)")
@click.option("--in-flight", type=click.IntRange(min=1), default=None,
              help="Hand-ins graded at once on each GPU: while one is timed, with the GPU to itself, the others "
                   "build and run their cases; each needs a sandbox user of its own when root [default: 3, fewer "
                   "where there are fewer users].")
@click.option("--force", is_flag=True, help="Grade again what an earlier run already graded.")
@click.option("--answer-key", type=click.Path(dir_okay=False), default=None,
              help="The answer key (default: ROOT/solutions/answers.yaml, or ROOT/key/answers.yaml).")
@click.option("--slurm", "slurm_script", type=click.Path(dir_okay=False), default=None,
              help="Grade nothing: write this sbatch array script (one task per student) instead.")
@click.option("--image", default=None, help="With --slurm: the grader's container image (docker:// name or .sif).")
@click.option("--gradebook-only", is_flag=True, help="Grade nothing: collect the results in OUT into gradebook.csv.")
@click.option("--counters", type=click.Choice(["inline", "later"]), default="inline", show_default=True,
              help="When each timed part's hardware counters are read: with its timed calls, or once every hand-in "
                   "is graded (every score sooner, the class later; each report is written again with its counters).")
@click.pass_context
def batch(ctx: click.Context, class_dir: str, out_dir: str | None, build_dir: str | None, seed: int | None,
          gpus: str | None, jobs: int | None, in_flight: int | None, force: bool, answer_key: str | None,
          slurm_script: str | None, image: str | None, gradebook_only: bool, counters: str) -> None:
    """Grade a class: DIR holds one directory per student, named by the student's id."""
    from .operations import batch as batch_mod

    root = root_of(ctx.obj["root"])
    out = _out_path(out_dir, build_path(root, build_dir), "batch")
    try:
        if slurm_script:
            script, student_list, refused = batch_mod.write_slurm(Path(class_dir), out, Path(slurm_script), root=root,
                                                                  image=image or "", seed=seed)
            for s in refused:
                click.echo(f"{s.name!r}: {s.problem}", err=True)
            click.echo(f"wrote {script} and {student_list}; submit with: sbatch {script}")
            click.echo(f"afterwards: tilelab batch {class_dir} --out {out} --gradebook-only")
            return
        if gradebook_only:
            summary = batch_mod.gradebook_only(Path(class_dir), out, root=root)
            click.echo(f"{summary.resumed} graded, {summary.errors} grader errors, {summary.skipped} without "
                       f"results; wrote {', '.join(str(p) for p in [summary.gradebook, *summary.leaderboards])}")
            click.echo(summary.class_report_line())
            sys.exit(0 if summary.ok else 2)
        build = built_dir(root, build_dir)
        summary = batch_mod.run_batch(Path(class_dir), root=root, build_dir=build, out_dir=out, seed=seed,
                                      gpus=batch_mod.parse_gpus(gpus) if gpus is not None else None,
                                      jobs=jobs,
                                      in_flight=in_flight, force=force, counters=counters,
                                      answer_key=Path(answer_key).resolve() if answer_key else None)
    except KeyboardInterrupt:
        click.echo(f"interrupted; {out / batch_mod.GRADEBOOK_FILE} holds what was graded; run the same command "
                   "again to go on", err=True)
        sys.exit(130)
    for row in summary.rows:
        if row.status == batch_mod.GRADER_ERROR:
            click.echo(f"grader error: {row.student}: {row.detail or 'see its results.json'}", err=True)
    click.echo(summary.line())
    click.echo(f"gradebook: {summary.gradebook}")
    for path in summary.leaderboards:
        click.echo(f"leaderboard: {path}")
    click.echo(summary.class_report_line())
    sys.exit(0 if summary.ok else 2)


@main.command()
@click.argument("part", required=False)
@click.option("--dir", "work_dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="Directory holding your part files (default: ROOT/starter, or the folder of the file named).")
@BUILD_OPTION
@_out_option("grade.json (and, with --report, report.md and report.html)", "check")
@click.option("--no-sanitizers", is_flag=True, help="Skip compute-sanitizer for a faster answer.")
@click.option("--fast", is_flag=True, help="Only build and run the public cases: no compute-sanitizer, no timing "
                                           "(the quickest answer while you edit; those stages show as not run).")
@click.option("--remote", is_flag=True, help="Check on the grading service (tilelab-service.yaml, TILELAB_SERVICE_*).")
@click.option("--report", is_flag=True, help="Also write report.md and report.html into --out (by default a check "
                                             "writes grade.json alone).")
@click.option("--again", is_flag=True, help="Run the check even when nothing changed since the last one (by default "
                                            "an unchanged check shows its last result at once).")
@click.option("--verbose", "-v", is_flag=True, help="Also say where the check's time went.")
@click.option("--watch", is_flag=True, help="Stay running and check PART again each time its file is saved "
                                            "(Ctrl-C stops).")
@click.pass_context
def check(ctx: click.Context, part: str | None, work_dir: str | None, build_dir: str | None, out_dir: str | None,
          no_sanitizers: bool, fast: bool, remote: bool, report: bool, again: bool, verbose: bool,
          watch: bool) -> None:
    """Run the public cases of PART (naive, naive.cu, answers.yaml; default: all) on this GPU, or on the service."""
    startup = None
    if not remote:
        from .operations.check_run import process_age

        startup = process_age()
    root = root_of(ctx.obj["root"])
    build = build_path(root, build_dir) if remote else built_dir(root, build_dir)
    assignment = _load(root)
    part_ids, answers_only, file_dir = _check_target(assignment, part)
    from .grading.options import GradeOptions

    if work_dir and file_dir and Path(work_dir).resolve() != file_dir:
        raise click.UsageError(f"{part} is not in --dir {work_dir}: name the part alone, or drop --dir")
    submission = Path(work_dir).resolve() if work_dir else file_dir or root / "starter"
    out = _out_path(out_dir, build, "check")
    if remote:
        if watch:
            raise click.UsageError("--watch checks on this machine: drop --remote")
        from .operations.service.forward import remote_check

        sys.exit(remote_check(root, submission, out, part_ids, answers_only))
    options = GradeOptions.for_tree(root, build, out, mode="check", parts=part_ids, answers_only=answers_only,
                                    questions=part is None, sanitizers=not (no_sanitizers or fast), timing=not fast,
                                    early_runs=True)
    warm_up = (lambda: None) if answers_only else (lambda: _warm_up(build))
    if watch:
        from .operations.check_watch import watch_checks

        sys.exit(watch_checks(submission, options, again=again, report=report, verbose=verbose, warm_up=warm_up,
                              report_command=_report_command()))
    from .operations.check_run import run_check, show

    outcome = run_check(submission, options, again=again, report=report, warm_up=warm_up, startup=startup,
                        progress=lambda m: click.echo(f"... {m}", err=True))
    show(outcome, _report_command(), verbose=verbose)
    sys.exit(outcome.code)


def _report_command() -> str:
    """This command as typed, with --report: what writes the reports of the same check."""
    import shlex

    prog = sys.argv[0] if Path(sys.argv[0]).name == "tilelab" else "tilelab"
    dropped = ("--again", "--verbose", "-v", "--watch")
    return shlex.join([prog, *(a for a in sys.argv[1:] if a not in dropped), "--report"])


def _check_target(assignment: Assignment, name: str | None) -> tuple:
    """(part ids, answers.yaml alone?, the folder of a file named by its path or None) for `check`."""
    if name is None:
        return (), False, None
    path = Path(name)
    if path.name in (ANSWERS_FILE, Path(ANSWERS_FILE).stem):
        return (), True, path.resolve().parent if path.is_file() else None
    try:
        part = assignment.part_named(name)
    except AssignmentError as e:
        raise click.BadParameter(str(e), param_hint="'PART'") from None
    return (part.id,), False, path.resolve().parent if path.name == part.file and path.is_file() else None


def _warm_up(build: Path) -> None:
    """What a grading command starts before it imports the grader (system/warmup.py)."""
    from .grading import gpu_ceilings
    from .system import warmup

    warmup.leave_objects_to_exit()
    gpu_ceilings.probe_early(tool_path(build, gpu_ceilings.TOOL_NAME))


def _gpu(build: Path, refresh: bool = False):
    """This machine's GPU and its measured ceilings (with the GPU to themselves: get_ceilings), or a
    one-line error."""
    from .grading import gpu_ceilings as rl

    tool = tool_path(build, "tilelab-roofline")
    device = rl.device_info(tool)
    return device, rl.get_ceilings(tool, refresh=refresh, device=device)


@main.command()
@BUILD_OPTION
@click.option("--refresh", is_flag=True, help="Measure again instead of using the cached figures.")
@click.pass_context
def roofline(ctx: click.Context, build_dir: str | None, refresh: bool) -> None:
    """Print this GPU's ceilings (measured once per GPU, then cached) and the
    reference solutions' ladder under them, with each part's speed targets."""
    from .grading import calibration
    from .grading import gpu_ceilings as rl
    from .spec.reference_gpu import ReferenceGpuError, load_reference_gpu

    root = root_of(ctx.obj["root"])
    assignment = _load(root)
    build = built_dir(root, build_dir)
    device, ceilings = _gpu(build, refresh)
    click.echo(rl.describe(ceilings))
    click.echo()
    try:
        if calibration.has_references(build, assignment):
            ladder, _ = calibration.get_calibration(build, assignment, device, tool_path(build, "tilelab-verify"))
        else:
            ladder = calibration.estimate(assignment, ceilings, device, load_reference_gpu(root))
    except (calibration.CalibrationError, ReferenceGpuError) as e:
        raise click.ClickException(f"no speed targets on this GPU: {e}") from None
    click.echo(calibration.describe(ladder, ceilings, assignment))


@main.command()
@BUILD_OPTION
@click.pass_context
def calibrate(ctx: click.Context, build_dir: str | None) -> None:
    """Time the reference solutions on this GPU now, keep the figures as the
    basis of its speed targets, and print the ladder (gradings reuse it until
    the references, assignment.yaml, the toolkit or the driver change)."""
    from .grading import calibration
    from .grading import gpu_ceilings as rl
    root = root_of(ctx.obj["root"])
    assignment = _load(root)
    build = built_dir(root, build_dir)
    if not calibration.has_references(build, assignment):
        raise click.ClickException(
            f"{build} holds no reference solutions to time ({calibration.REFERENCE_DIR}/<part>): calibrate from "
            "the course's checkout (solutions/) or the autograder bundle (references/), not a student's copy")
    device, ceilings = _gpu(build)
    ladder, fallen = calibration.recalibrate(build, assignment, device, tool_path(build, "tilelab-verify"))
    click.echo(rl.describe(ceilings))
    click.echo()
    click.echo(calibration.describe(ladder, ceilings, assignment))
    for drop in fallen:
        click.echo(f"warning: far below the last calibration of this GPU: {drop}", err=True)


@main.command()
@click.argument("names", nargs=-1)
@BUILD_OPTION
@_out_option("the gradings", "selftest")
@_jobs_option()
@click.pass_context
def selftest(ctx: click.Context, names: tuple, build_dir: str | None, out_dir: str | None, jobs: int) -> None:
    """Grade the known-good and known-bad hand-ins of tests/submissions and
    compare with their expected verdicts (NAMES: only these hand-ins)."""
    from .selftest.handins import format_rows, run_selftest

    root = root_of(ctx.obj["root"])
    build = built_dir(root, build_dir)
    out = _out_path(out_dir, build, "selftest")
    rows, gpu = run_selftest(root, build, out, names=names, jobs=jobs, echo=lambda m: click.echo(m, err=True))
    click.echo(format_rows(rows, gpu))
    if not rows or not all(r.ok for r in rows):
        sys.exit(1)


@main.command()
@click.option("--variant", type=click.Choice(["student", "ta"]), default="student", show_default=True,
              help="The TA variant adds the answer key and the hidden cases.")
@BUILD_OPTION
@_out_option("handout.md, .html and .pdf", "handout")
@click.pass_context
def handout(ctx: click.Context, variant: str, build_dir: str | None, out_dir: str | None) -> None:
    """Render the handout from assignment.yaml, the starter files and the questions."""
    from .authoring.handout import write_handouts

    root = root_of(ctx.obj["root"])
    out = _out_path(out_dir, build_path(root, build_dir), "handout")
    for path in write_handouts(_load(root), root, out, variant=variant).values():
        click.echo(f"wrote {path}")


@main.command()
@click.argument("bundle", type=click.Choice(["student", "autograder"]))
@BUILD_OPTION
@_out_option("the bundle (NAME-student.tar.gz or NAME-autograder.zip, NAME the assignment's name)", "dist")
@click.option("--service", "service_url", default=None, help="The grading service's URL, for the bundle to use.")
@click.option("--service-token-file", default=None, help="The course token (autograder) [env TILELAB_SERVICE_TOKEN].")
@click.pass_context
def dist(ctx: click.Context, bundle: str, build_dir: str | None, out_dir: str | None, **service: str | None) -> None:
    """Build the student tarball or the Gradescope autograder zip."""
    from .authoring.dist import autograder_bundle, bundle_name, refuse_edited_starter, student_bundle

    root = root_of(ctx.obj["root"])
    assignment = _load(root)
    build = build_path(root, build_dir)
    out = _out_path(out_dir, build, "dist")
    refuse_edited_starter(root, assignment)  # before the handout, which shows the starter's code
    if bundle == "student":
        from .authoring.handout import write_handouts

        click.echo("... the handout (Markdown, HTML, PDF)", err=True)
        write_handouts(assignment, root, out / "handout", variant="student")
        made = student_bundle(root, out / bundle_name(assignment, bundle), out / "handout", **service)
    else:
        made = autograder_bundle(root, out / bundle_name(assignment, bundle),
                                 objects_tree=build / "dist" / "reference-objects",
                                 progress=lambda m: click.echo(f"... {m}", err=True), **service)
    click.echo(f"wrote {made} ({made.stat().st_size / 1e6:.1f} MB)")


@main.command()
@BUILD_OPTION
@_out_option("the bundles and gradings of the gates", "gates")
@click.option("--which", type=click.Choice(["all", "cpu", "gpu"]), default="all", show_default=True,
              help="cpu: starter and bundles (what CI runs); gpu: the grading gates (exit 5 without a CUDA "
                   "device); all: both, and without a GPU the CPU gates decide.")
@click.pass_context
def gates(ctx: click.Context, build_dir: str | None, out_dir: str | None, which: str) -> None:
    """Check that starter, handout, bundles and autograder agree (GPU gates run where a GPU is)."""
    from .authoring.gates import format_gates, gates_outcome, run_gates

    root = root_of(ctx.obj["root"])
    build = built_dir(root, build_dir)
    results = run_gates(root, build, _out_path(out_dir, build, "gates"), which=which,
                        progress=lambda m: click.echo(f"... {m}", err=True))
    click.echo(format_gates(results))
    outcome = gates_outcome(which, results)
    click.echo(outcome.summary)
    sys.exit(outcome.exit_code)


@main.command("class-report")
@click.argument("graded_dir", metavar="GRADED_DIR", type=click.Path(exists=True, file_okay=False))
@click.pass_context
def class_report(ctx: click.Context, graded_dir: str) -> None:
    """Draw the class report of a graded class again (`tilelab batch` writes it): GRADED_DIR/class-report.html
    and a CSV of every figure in GRADED_DIR/class-report/. For staff: it names students and shows the key."""
    from .classwork.class_report_page import write_class_report

    written = write_class_report(Path(graded_dir).resolve(), _load(root_of(ctx.obj["root"])))
    click.echo(f"wrote {written[0]} and {len(written) - 1} CSV files in {written[1].parent}")


for _command in COMMANDS + SIMILARITY_COMMANDS:  # beside this file: cli_service.py, cli_similarity.py
    main.add_command(_command)


if __name__ == "__main__":
    main()
