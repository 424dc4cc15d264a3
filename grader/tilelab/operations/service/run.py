"""What the service's commands do: serve the gateway (with its database),
run a worker, and hand out tokens."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Optional

from .config import ServiceConfig
from .database import Database, migrate, open_database, url_of


def serve(config: ServiceConfig, root: Path, echo: Callable[[str], None]) -> None:
    """Runs the gateway until stopped; an embedded database stops with it."""
    import uvicorn

    from .gateway import create_app

    database = open_database(config.data_dir, config.database_url)
    try:
        echo(f"tilelab serve: http://{config.host}:{config.port}/api/v1 (the API: /docs); "
             f"database {'embedded under ' + str(config.data_dir / 'postgres') if database.embedded else 'given'}")
        uvicorn.run(create_app(config, database.url, root), host=config.host, port=config.port,
                    log_level="warning")
    finally:
        database.stop()


def work(root: Path, build_dir: Path, data_dir: Path, database_url: Optional[str], gpu: Optional[str],
         in_flight: Optional[int], stalled_after_s: float = 30.0) -> None:
    from .worker import Worker, WorkerSettings

    logging.basicConfig(level=logging.WARNING, format="tilelab worker: %(message)s")
    settings = WorkerSettings(root=root, build_dir=build_dir, database_url=url_of(data_dir, database_url), gpu=gpu,
                              in_flight=in_flight, scratch=None, stalled_after_s=stalled_after_s)
    Worker(settings).run()


def new_token(data_dir: Path, database_url: Optional[str], role: str, student: Optional[str], label: str) -> str:
    """A token for a student, a course (its platforms' forwarders) or staff; stored hashed, shown once."""
    import psycopg

    from . import records

    url = url_of(data_dir, database_url)
    migrate(url)
    with psycopg.connect(url) as conn:
        return records.add_token(conn, role, student, label)


__all__ = ["Database", "new_token", "serve", "work"]
