"""The project tree, build and output folder a benchmark runs on, or why it cannot run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from tilelab.system.paths import find_root, unbuilt_reason


def tree_options(out_default: str, out_holds: str):
    """--root, --build and --out of a benchmark command: its output folder
    is BUILD/`out_default` unless given, and holds `out_holds`."""
    def add(command):
        command = click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
                               help=f"Where {out_holds} go (default: BUILD/{out_default}).")(command)
        command = click.option("--build", "build_dir", type=click.Path(file_okay=False), default=None,
                               help="Built project tree (default: ROOT/build).")(command)
        return click.option("--root", type=click.Path(file_okay=False), default=None,
                            help="Project root (default: found from the working directory).")(command)
    return add


def built_tree(root: Optional[str], build_dir: Optional[str], out_dir: Optional[str], out_default: str) -> tuple:
    """(root, build, out) as absolute paths: the root given or found from the
    working directory, the build given or ROOT/build, the output folder given
    or BUILD/`out_default`. A ClickException, in one line, where the root or
    the build is missing or the build is unfinished."""
    try:
        root_path = Path(root).resolve() if root else find_root()
    except FileNotFoundError as e:
        raise click.ClickException(str(e)) from None
    build = Path(build_dir).resolve() if build_dir else root_path / "build"
    unbuilt = unbuilt_reason(build)
    if unbuilt:
        raise click.ClickException(f"{unbuilt}: run ./scripts/bootstrap, or cmake --build {build}")
    return root_path, build, Path(out_dir).resolve() if out_dir else build / out_default
