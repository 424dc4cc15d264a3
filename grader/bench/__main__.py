"""`python -m bench` (what `scripts/bench` runs): grade a fixed set of
hand-ins as `tilelab batch` does and print where the time goes."""

from __future__ import annotations

import json

import click

from tilelab.errors import TilelabError
from tilelab.operations import batch as batch_mod
from tilelab.system.atomic import write_atomically

from .class_bench import WITHOUT, format_classes, format_stage_costs, run_classes, run_stage_costs, summarize
from .grading_bench import format_bench, run_bench
from .starts_bench import format_starts, run_starts
from .tree import built_tree, tree_options


@click.command()
@tree_options("bench", "the gradings and bench.json")
@click.option("--gpus", default=None, help="GPUs to grade on, as for `tilelab batch` (default: all).")
@click.option("--in-flight", type=click.IntRange(min=1), default=None,
              help="Hand-ins graded at once on each GPU, as for `tilelab batch` [default: 3].")
@click.option("--class", "class_size", type=click.IntRange(min=1), default=None,
              help="Only the deadline's load: N complete, distinct hand-ins through tilelab batch on one GPU, "
                   "then N per GPU on all of them (class.json).")
@click.option("--stage-costs", is_flag=True,
              help="With --class: the class on one GPU with every stage, then without the speed stage, without "
                   "compute-sanitizer and without both: what each stage costs a hand-in under that load.")
@click.option("--without", "left_out", type=click.Choice(sorted(WITHOUT)), multiple=True,
              help="With --class: every grading leaves this stage out (repeatable), to read what it costs a "
                   "class beside a run with it.")
@click.option("--counters", type=click.Choice(["inline", "later"]), default="inline", show_default=True,
              help="With --class: when the gradings read the hardware counters, as for `tilelab batch`.")
@click.option("--starts-beside", type=click.FloatRange(min=0, min_open=True, max=20), default=None,
              help="With --class: the class on one GPU, then again with this many CUDA processes a second (a "
                   "grading's runs) started beside it: what one more process costs a class.")
@click.option("--starts", type=click.IntRange(min=1, max=256), default=None,
              help="Only this: N CUDA processes (a grading's runs) started at once on one GPU, then spread over "
                   "every GPU, three rounds (starts.json).")
def main(root: str | None, build_dir: str | None, out_dir: str | None, gpus: str | None,
         in_flight: int | None, class_size: int | None, stage_costs: bool, left_out: tuple, counters: str,
         starts_beside: float | None, starts: int | None) -> None:
    """Phases, the critical path, GPU time and throughput of gradings."""
    if starts and (class_size or stage_costs or left_out):
        raise click.UsageError("--starts measures CUDA processes alone: give it without --class")
    if stage_costs and not class_size:
        raise click.UsageError("--stage-costs measures a class: give --class N too")
    if starts_beside and (not class_size or stage_costs):
        raise click.UsageError("--starts-beside measures a class beside CUDA processes: give --class N, and no "
                               "--stage-costs")
    if (left_out or counters != "inline") and (not class_size or stage_costs):
        raise click.UsageError("--without and --counters are for a class: give --class N, and no --stage-costs")
    if counters == "later" and "counters" in left_out:
        raise click.UsageError("--counters later reads the counters that --without counters leaves out: give one")
    try:
        chosen = batch_mod.parse_gpus(gpus) if gpus is not None else None
    except TilelabError as e:
        raise click.UsageError(str(e)) from None
    root_path, build, out = built_tree(root, build_dir, out_dir, "bench")
    if starts:
        try:
            found = run_starts(root_path, build, out, starts, chosen if chosen is not None else batch_mod.find_gpus(),
                               3, lambda m: click.echo(m, err=True))
        except TilelabError as e:
            raise click.ClickException(str(e)) from None
        write_atomically(out / "starts.json", json.dumps([vars(s) for s in found], indent=2) + "\n")
        click.echo(f"wrote {out / 'starts.json'}")
        click.echo(format_starts(found))
        return
    if class_size:
        log = lambda m: click.echo(m, err=True)  # noqa: E731
        describe = format_stage_costs if stage_costs else format_classes
        try:
            if stage_costs:
                runs = run_stage_costs(root_path, build, out, class_size, chosen, in_flight, log)
            else:
                runs = run_classes(root_path, build, out, class_size, chosen, in_flight, log,
                                   tuple(WITHOUT[word] for word in left_out), counters, starts_beside)
        except TilelabError as e:
            raise click.ClickException(str(e)) from None
        write_atomically(out / "class.json", json.dumps(summarize(runs), indent=2) + "\n")
        click.echo(f"wrote {out / 'class.json'}")
        click.echo(describe(runs))
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
