"""`python -m bench` (what `scripts/bench` runs): grade a fixed set of
hand-ins as `tilelab batch` does and print where the time goes."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tilelab.errors import TilelabError
from tilelab.operations import batch as batch_mod
from tilelab.system.atomic import write_atomically

from .class_bench import format_classes, run_classes, summarize
from .grading_bench import format_bench, run_bench
from .tree import built_tree


@click.command()
@click.option("--root", type=click.Path(file_okay=False), default=None,
              help="Project root (default: found from the working directory).")
@click.option("--build", "build_dir", type=click.Path(file_okay=False), default=None,
              help="Built project tree (default: ROOT/build).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Where the gradings and bench.json go (default: BUILD/bench).")
@click.option("--gpus", default=None, help="GPUs to grade on, as for `tilelab batch` (default: all).")
@click.option("--in-flight", type=click.IntRange(min=1), default=None,
              help="Hand-ins graded at once on each GPU, as for `tilelab batch` [default: 3].")
@click.option("--class", "class_size", type=click.IntRange(min=1), default=None,
              help="Only the deadline's load: N complete, distinct hand-ins through tilelab batch on one GPU, "
                   "then N per GPU on all of them (class.json).")
def main(root: str | None, build_dir: str | None, out_dir: str | None, gpus: str | None,
         in_flight: int | None, class_size: int | None) -> None:
    """Phases, the critical path, GPU time and throughput of gradings."""
    root_path, build = built_tree(root, build_dir)
    out = Path(out_dir).resolve() if out_dir else build / "bench"
    chosen = batch_mod.parse_gpus(gpus) if gpus is not None else None
    if class_size:
        try:
            runs = run_classes(root_path, build, out, class_size, chosen, in_flight,
                               lambda m: click.echo(m, err=True))
        except TilelabError as e:
            raise click.ClickException(str(e)) from None
        write_atomically(out / "class.json", json.dumps(summarize(runs), indent=2) + "\n")
        click.echo(f"wrote {out / 'class.json'}")
        click.echo(format_classes(runs))
        return
    try:
        result = run_bench(root_path, build, out, gpus=chosen,
                           log=lambda m: click.echo(m, err=True), in_flight=in_flight)
    except TilelabError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {out / 'bench.json'}")
    click.echo(format_bench(result))


if __name__ == "__main__":
    main()
