"""The `tilelab` command: thin subcommands over the package's functions."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import starter as starter_mod
from .assignment import AssignmentError, load_assignment
from .paths import ASSIGNMENT_FILE, find_root


def _root(root: str | None) -> Path:
    try:
        return Path(root).resolve() if root else find_root()
    except FileNotFoundError as e:
        raise click.ClickException(str(e)) from None


@click.group()
@click.option("--root", type=click.Path(file_okay=False), help="Project root (default: found from the working directory).")
@click.pass_context
def main(ctx: click.Context, root: str | None) -> None:
    """tilelab: a CUDA matrix-multiplication lab and its autograder."""
    ctx.obj = {"root": root}


@main.command()
@click.option("--check", is_flag=True, help="Only report whether starter/ is up to date; change nothing.")
@click.pass_context
def starter(ctx: click.Context, check: bool) -> None:
    """Generate starter/ from the solution regions of solutions/."""
    root = _root(ctx.obj["root"])
    try:
        assignment = load_assignment(root / ASSIGNMENT_FILE)
        files = starter_mod.starter_files(assignment, root / "solutions", root / "starter")
    except (AssignmentError, starter_mod.StarterError) as e:
        raise click.ClickException(str(e)) from None
    stale = [f for f in files if not f.up_to_date]
    if check:
        for f in stale:
            click.echo(f"out of date: {f.path.relative_to(root)}", err=True)
        if stale:
            click.echo("run `tilelab starter` to regenerate it from solutions/", err=True)
            sys.exit(1)
        click.echo(f"starter/ is up to date ({len(files)} parts)")
        return
    for path in starter_mod.write_starter(files):
        click.echo(f"wrote {path.relative_to(root)}")
    click.echo(f"starter/ is up to date ({len(files)} parts)")


@main.command()
@click.option("--build", "build_dir", type=click.Path(file_okay=False), default="build", show_default=True,
              help="CMake build directory holding <set>/<part> harnesses and bin/tilelab-verify.")
@click.option("--set", "part_set", default="solution", show_default=True,
              help="Which built set to run: solution, starter or submission.")
@click.option("--part", "parts", multiple=True, help="Only this part (repeatable; default: every part).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Where case files, outputs and bench.json go (default: BUILD/bench-SET).")
@click.pass_context
def bench(ctx: click.Context, build_dir: str, part_set: str, parts: tuple, out_dir: str | None) -> None:
    """Run every part's cases and time it at its large sizes; print a table."""
    from .bench import bench as run_bench, format_table

    root = _root(ctx.obj["root"])
    build = Path(build_dir).resolve()
    if not (build / "bin" / "tilelab-verify").exists():
        raise click.ClickException(f"{build} holds no built project (cmake --build {build_dir} first)")
    try:
        assignment = load_assignment(root / ASSIGNMENT_FILE)
    except AssignmentError as e:
        raise click.ClickException(str(e)) from None
    for part_id in parts:
        try:
            assignment.part(part_id)
        except AssignmentError as e:
            raise click.ClickException(str(e)) from None
    out = Path(out_dir).resolve() if out_dir else build / f"bench-{part_set}"
    rows = run_bench(assignment, build, part_set, out, only=parts)
    click.echo(format_table(rows))
    if any(r.status == "no GPU" for r in rows):
        click.echo("GPU stages did not run: no CUDA device.")
    if any(r.status in ("failed", "not built") for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
