"""How long `tilelab class-report` takes on a class (docs/measurements.md,
"After the deadline on a CPU"): one grading of the solutions made here
(`tilelab grade`, with a GPU or without), copied into N student folders,
then the command itself, timed from start to exit as a TA runs it. A
benchmark: it asserts no time.

    PYTHONPATH=grader .venv/bin/python -m bench.class_report_bench --hand-ins 400
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click

from tilelab.system.paths import find_root

# What a class report reads of a student's folder (classwork/class_report_handins.py).
GRADED_FILES = ("grade.json", "results.json")


@click.command()
@click.option("--hand-ins", "count", type=click.IntRange(min=1), default=400, show_default=True,
              help="Students in the class made.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Where the grading and the class go (default: ROOT/build/class-report-bench).")
def main(count: int, out_dir: str | None) -> None:
    """Grade the solutions once, copy the grading to N students, and time `tilelab class-report` on them."""
    try:
        root = find_root()
    except FileNotFoundError as e:
        raise click.ClickException(str(e)) from None
    out = Path(out_dir).resolve() if out_dir else root / "build" / "class-report-bench"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root / "grader"),
                                                                     os.environ.get("PYTHONPATH")]))}
    tilelab = [sys.executable, "-m", "tilelab.cli", "--root", str(root)]
    one = out / "one"
    if not all((one / name).is_file() for name in GRADED_FILES):
        graded = subprocess.run(tilelab + ["grade", str(root / "solutions"), "--out", str(one)], env=env,
                                capture_output=True, text=True)
        if graded.returncode != 0:
            raise click.ClickException(f"grading the solutions failed: {graded.stderr.strip()[-300:]}")
    graded_class = out / "class"
    shutil.rmtree(graded_class, ignore_errors=True)
    for i in range(count):
        folder = graded_class / f"s{i:03d}"
        folder.mkdir(parents=True)
        for name in GRADED_FILES:
            shutil.copy(one / name, folder / name)
    started = time.monotonic()
    run = subprocess.run(tilelab + ["class-report", str(graded_class)], env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    if run.returncode != 0:
        raise click.ClickException(f"tilelab class-report exited {run.returncode}: {run.stderr.strip()[-300:]}")
    size = sum(f.stat().st_size for f in graded_class.rglob("grade.json")) / 1e6
    click.echo(f"{count} graded hand-ins ({size:.0f} MB of grade.json), {os.cpu_count()} CPUs: tilelab class-report "
               f"took {wall:.1f} s")


if __name__ == "__main__":
    main()
