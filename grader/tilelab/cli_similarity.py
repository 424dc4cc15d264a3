"""`tilelab similarity`: which hand-ins of a class look alike
(classwork/similarity.py), added to the `tilelab` command by cli.py."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from .cli_options import BUILD_OPTION, build_path, root_of


@click.command()
@click.argument("class_dir", metavar="DIR")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Where similarity.csv and similarity.html go (default: BUILD/similarity).")
@BUILD_OPTION
@click.option("--top", type=click.IntRange(min=1), default=None, help="Pairs listed per part file [default: 25].")
@click.option("--threshold", type=click.FloatRange(0.0, 1.0), default=None,
              help="The lowest score listed, 0 to 1; it only cuts the list, it accuses no one [default: 0.33].")
@click.option("--starter", "starter_dir", type=click.Path(file_okay=False), default=None,
              help="The starter every student was given, taken out as boilerplate (default: ROOT/starter).")
@click.pass_context
def similarity(ctx: click.Context, class_dir: str, out_dir: str | None, build_dir: str | None, top: int | None,
               threshold: float | None, starter_dir: str | None) -> None:
    """Which hand-ins look alike: per part file, the pairs of DIR's hand-ins (one folder per student, as for
    batch) ranked by the code they share beyond the starter. Needs no GPU and no grading."""
    from .operations.batch import find_students
    try:
        from .classwork import similarity as sim
        from .classwork.similarity_page import write
    except ModuleNotFoundError as e:  # a machine set up offline, with the system's packages
        raise click.ClickException(f"tilelab similarity needs the Python package {e.name}: pip install copydetect, "
                                   "or run scripts/python-env where there is network") from None
    from .spec.assignment import load_assignment
    from .system.paths import ASSIGNMENT_FILE, STARTER_DIR

    started = time.monotonic()
    root = root_of(ctx.obj["root"])
    out = Path(out_dir).resolve() if out_dir else build_path(root, build_dir) / "similarity"
    assignment = load_assignment(root / ASSIGNMENT_FILE)
    try:
        folder = sim.check_dirs(Path(class_dir), out, assignment)
        ranking = sim.compare_class(assignment, folder, find_students(folder),
                                    Path(starter_dir) if starter_dir else root / STARTER_DIR,
                                    top=top or sim.TOP, threshold=sim.THRESHOLD if threshold is None else threshold,
                                    workers=sim.WORKERS)
    except sim.SimilarityError as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(2)  # what was asked cannot be done: a usage error, as click's own
    for note in ranking.notes:
        click.echo(f"not compared: {note}", err=True)
    for part, file in ranking.parts:
        pairs = [p for p in ranking.pairs if p.part == part]
        most = f"most alike {pairs[0].a.student} and {pairs[0].b.student} ({pairs[0].score:.0%})" if pairs else \
            "no pair listed"
        click.echo(f"{file}: {ranking.compared[part]} hand-ins, {len(pairs)} pairs listed; {most}")
    written = write(out, ranking)
    click.echo(f"wrote {written[0]} and {written[1]} in {time.monotonic() - started:.1f} s; a score is a reason "
               "to look, never proof")


COMMANDS = (similarity,)
