"""The service's settings: one YAML file (`tilelab serve --config`), every
key optional, each with a default a one-box course can start from."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import yaml

from ...errors import TilelabError
from .queue import COUNTERS_PRIORITY


class ConfigError(TilelabError):
    """The service's config file cannot be used: the message names the key."""


@dataclass(frozen=True)
class Limits:
    """What one client may ask for."""

    max_upload_bytes: int = 2 * 1024 * 1024  # a request's body; larger is refused with 413
    submissions_per_hour: int = 30  # per token; more is refused with 429 and when to retry
    check_priority: int = 0  # a graded submission goes before any check
    grade_priority: int = 10


@dataclass(frozen=True)
class ServiceConfig:
    data_dir: Path  # the embedded database and the workers' scratch space
    database_url: Optional[str] = None  # None: an embedded PostgreSQL under data_dir/postgres
    host: str = "127.0.0.1"
    port: int = 8408
    limits: Limits = field(default_factory=Limits)
    # Seconds a worker may go without a heartbeat before its jobs are given
    # to another worker (procrastinate's stalled-job detection).
    stalled_after_s: float = 30.0
    # Whether a student's own token may ask for a grading (mode=grade), not
    # only a check. Off by default: the platforms' course token grades, and
    # a student who may grade at will learns nothing more before the staff
    # publish, but spends the GPUs' time.
    students_may_grade: bool = False


def load_config(path: Optional[Path], data_dir: Path) -> ServiceConfig:
    """The config at `path` (None: all defaults), with data_dir as the default data folder."""
    raw: dict = {}
    if path is not None:
        try:
            raw = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"{path}: cannot be read as YAML ({e})") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: must be a mapping of settings")
    _only_known(raw, ServiceConfig, "setting", path)
    limits_raw = raw.pop("limits", {}) or {}
    if not isinstance(limits_raw, dict):
        raise ConfigError(f"{path}: limits must be a mapping")
    _only_known(limits_raw, Limits, "limit", path)
    for name, value in limits_raw.items():
        if not isinstance(value, int) or isinstance(value, bool) or (value < 1 and not name.endswith("priority")):
            raise ConfigError(f"{path}: limits.{name} must be a whole number of at least 1, not {value!r}")
        if name.endswith("priority") and value <= COUNTERS_PRIORITY:
            raise ConfigError(f"{path}: limits.{name} must be above {COUNTERS_PRIORITY}, the priority of counters "
                              f"left for later, not {value!r}")
    if not isinstance(raw.get("students_may_grade", False), bool):
        raise ConfigError(f"{path}: students_may_grade must be true or false, not {raw['students_may_grade']!r}")
    data = Path(raw.pop("data_dir", data_dir)).expanduser().resolve()
    try:
        return ServiceConfig(data_dir=data, limits=Limits(**limits_raw), **raw)
    except TypeError as e:
        raise ConfigError(f"{path}: {e}") from None


def _only_known(raw: dict, kind, what: str, path) -> None:
    known = sorted(f.name for f in dataclasses.fields(kind))
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(f"{path}: unknown {what} {', '.join(unknown)} (known: {', '.join(known)})")
