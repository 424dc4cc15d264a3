"""The grading service's commands (docs/service.md): `tilelab serve`,
`tilelab worker` and `tilelab token`, added to the `tilelab` command by cli.py."""

from __future__ import annotations

from pathlib import Path

import click

from .cli_options import BUILD_OPTION, build_path, built_dir, root_of

_SERVICE_DATA = click.option("--data-dir", type=click.Path(file_okay=False), default=None,
                             help="The service's folder: the embedded database, scratch (default: BUILD/service).")
_DATABASE_URL = click.option("--database-url", envvar="TILELAB_DATABASE_URL", default=None,
                             help="The course's PostgreSQL [env TILELAB_DATABASE_URL] (default: the embedded one "
                                  "`tilelab serve` started in --data-dir).")


@click.command()
@BUILD_OPTION
@_SERVICE_DATA
@_DATABASE_URL
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The service's settings (YAML): limits, host, port, database_url.")
@click.option("--host", default=None, help="Address to listen on [default: 127.0.0.1].")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port [default: 8408].")
@click.pass_context
def serve(ctx: click.Context, build_dir: str | None, data_dir: str | None, database_url: str | None,
          config_file: str | None, host: str | None, port: int | None) -> None:
    """Run the grading service's gateway: the HTTP API and the queue in PostgreSQL."""
    import dataclasses

    from .operations.service import run as service
    from .operations.service.config import load_config

    root = root_of(ctx.obj["root"])
    config = load_config(Path(config_file) if config_file else None,
                         Path(data_dir) if data_dir else build_path(root, build_dir) / "service")
    changes = {k: v for k, v in (("host", host), ("port", port), ("database_url", database_url)) if v is not None}
    service.serve(dataclasses.replace(config, **changes), root, click.echo)


@click.command()
@BUILD_OPTION
@_SERVICE_DATA
@_DATABASE_URL
@click.option("--gpu", default=None, help="The GPU to grade on, as CUDA_VISIBLE_DEVICES names it (default: none: "
                                          "the GPU stages are reported as not run).")
@click.option("--in-flight", type=click.IntRange(min=1), default=None,
              help="Submissions graded at once on the GPU, as for `tilelab batch` [default: 3].")
@click.option("--stalled-after", type=click.FloatRange(min=1), default=30.0, show_default=True,
              help="Seconds without a heartbeat after which another worker's jobs are taken up again.")
@click.option("--name", default=None, help="The worker's name on the dashboard [default: HOST:GPU].")
@click.option("--counters", type=click.Choice(["inline", "later"]), default="inline", show_default=True,
              help="later: while other submissions wait, a grading leaves its hardware counters (no points) to be "
                   "read once none waits, and its report is written again then; the score comes sooner.")
@click.pass_context
def worker(ctx: click.Context, build_dir: str | None, data_dir: str | None, database_url: str | None,
           gpu: str | None, in_flight: int | None, stalled_after: float, name: str | None, counters: str) -> None:
    """Grade the service's queue on one GPU (start one per GPU, on any host)."""
    from .operations.service import run as service

    root = root_of(ctx.obj["root"])
    build = built_dir(root, build_dir)
    service.work(root, build, Path(data_dir) if data_dir else build / "service", database_url, gpu, in_flight,
                 stalled_after, name, counters)


@click.command()
@BUILD_OPTION
@_SERVICE_DATA
@_DATABASE_URL
@click.argument("role", type=click.Choice(["student", "course", "staff"]))
@click.argument("student", required=False)
@click.option("--label", default="", help="A note for staff (who it was given to).")
@click.pass_context
def token(ctx: click.Context, build_dir: str | None, data_dir: str | None, database_url: str | None, role: str,
          student: str | None, label: str) -> None:
    """Make a service token: `student ID`, `course` (the platforms' forwarders) or `staff`; printed once."""
    from .operations.service import run as service

    if (role == "student") != bool(student):
        raise click.UsageError("a student token names its student (token student ID); the others name none")
    root = root_of(ctx.obj["root"])
    folder = Path(data_dir) if data_dir else build_path(root, build_dir) / "service"
    click.echo(service.new_token(folder, database_url, role, student, label))


COMMANDS = (serve, worker, token)
