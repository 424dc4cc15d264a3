"""What every `tilelab` command module shares: where the project and its
build are, and the --build option."""

from __future__ import annotations

from pathlib import Path

import click

from .system.paths import find_root, unbuilt_reason


def root_of(root: str | None) -> Path:
    """The project's root: the one named (--root), else found from the working directory."""
    try:
        return Path(root).resolve() if root else find_root()
    except FileNotFoundError as e:
        raise click.ClickException(str(e)) from None


def build_path(root: Path, build_dir: str | None) -> Path:
    """The build tree named (--build), else ROOT/build."""
    return Path(build_dir).resolve() if build_dir else root / "build"


def built_dir(root: Path, build_dir: str | None) -> Path:
    """build_path, which must hold a built project."""
    build = build_path(root, build_dir)
    unbuilt = unbuilt_reason(build)
    if unbuilt:
        raise click.ClickException(f"{unbuilt}: run ./scripts/bootstrap, or cmake --build {build}")
    return build


BUILD_OPTION = click.option("--build", "build_dir", type=click.Path(file_okay=False), default=None,
                            help="Built project tree (default: ROOT/build).")
