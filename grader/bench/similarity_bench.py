"""How long `tilelab similarity` takes on a class (docs/measurements.md,
"Similarity of a class"): N hand-ins made by similar_class.make_class (2 %
of them disguised copies, 1 % the starter alone, the rest honest), then the
command itself, timed from start to exit as a TA runs it. A benchmark: it
asserts no time.

    PYTHONPATH=grader .venv/bin/python -m bench.similarity_bench --hand-ins 400
"""

from __future__ import annotations

import csv
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import click

from tilelab.spec.assignment import load_assignment
from tilelab.system.paths import ASSIGNMENT_FILE, find_root

from .similar_class import make_class


@click.command()
@click.option("--hand-ins", "count", type=click.IntRange(min=2), default=400, show_default=True,
              help="Students in the class made.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Where the class and the command's files go (default: ROOT/build/similarity-bench).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the styles and the copies.")
def main(count: int, out_dir: str | None, seed: int) -> None:
    """Make a class of N hand-ins and time `tilelab similarity` on it."""
    root = find_root()
    out = Path(out_dir).resolve() if out_dir else root / "build" / "similarity-bench"
    copies, starter_only = max(1, count // 50), max(1, count // 100)
    made = make_class(root, out / "class", honest=count - copies - starter_only, copies=copies,
                      starter_only=starter_only, seed=seed)
    command = [sys.executable, "-m", "tilelab.cli", "--root", str(root), "similarity", str(made.folder), "--out",
               str(out / "similarity")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "grader"), os.environ.get("PYTHONPATH", "")])}
    started, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    wall, after = time.monotonic() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    # The CPU time of the command and of its worker processes: what a busy machine does not inflate.
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if run.returncode:
        raise click.ClickException(f"tilelab similarity exited {run.returncode}")
    with (out / "similarity" / "similarity.csv").open(newline="", encoding="utf-8") as f:
        listed = list(csv.DictReader(f))
    copied = {tuple(sorted(pair)) for pair in made.copies}
    caught = sum(1 for row in listed if (row["student A"], row["student B"]) in copied and float(row["score"]) >= 0.95)
    files = len(copied) * len(load_assignment(root / ASSIGNMENT_FILE).parts)
    click.echo(f"{count} hand-ins ({copies} copies, {starter_only} starter alone), {os.cpu_count()} CPUs: "
               f"tilelab similarity took {wall:.1f} s ({cpu:.1f} s of CPU time); {caught} of {files} copied files "
               "listed at 95 % or more")


if __name__ == "__main__":
    main()
