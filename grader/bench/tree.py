"""The project tree and build a benchmark runs on, or why it cannot run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from tilelab.system.paths import find_root, unbuilt_reason


def built_tree(root: Optional[str], build_dir: Optional[str]) -> tuple:
    """(root, build) as absolute paths: the root given or found from the
    working directory, the build given or ROOT/build. A ClickException, in
    one line, where either is missing or the build is unfinished."""
    try:
        root_path = Path(root).resolve() if root else find_root()
    except FileNotFoundError as e:
        raise click.ClickException(str(e)) from None
    build = Path(build_dir).resolve() if build_dir else root_path / "build"
    unbuilt = unbuilt_reason(build)
    if unbuilt:
        raise click.ClickException(f"{unbuilt}: run ./scripts/bootstrap, or cmake --build {build}")
    return root_path, build
