"""What the service's commands do: serve the gateway (with its database),
run a worker, and hand out tokens."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Callable, Optional

from ...errors import TilelabError
from .config import ServiceConfig
from .database import Database, migrate, open_database, url_of


def serve(config: ServiceConfig, root: Path, echo: Callable[[str], None]) -> None:
    """Runs the gateway until stopped (Ctrl-C, SIGTERM or SIGHUP); an embedded
    database stops with it however it stops."""
    import uvicorn

    from .gateway import create_app

    refuse_a_taken_port(config.host, config.port)
    database = open_database(config.data_dir, config.database_url, echo)
    try:
        echo(f"tilelab serve: http://{config.host}:{config.port}/api/v1 (the API: /docs); "
             f"database {'embedded under ' + str(config.data_dir / 'postgres') if database.embedded else 'given'}")
        server = uvicorn.Server(uvicorn.Config(create_app(config, database.url, root), host=config.host,
                                               port=config.port, log_config=LOG_CONFIG))
        # uvicorn stops gracefully on SIGINT and SIGTERM, then raises the signal
        # again: with these handlers that returns here instead of ending the
        # process before the database is stopped. SIGHUP (a closed terminal) likewise.
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, server.handle_exit)
        server.run()
        if not server.started:
            raise ServeError(f"the gateway did not start on {config.host}:{config.port} (its log above says why)")
    finally:
        database.stop()


class ServeError(TilelabError):
    """The gateway cannot start where it was asked to: the message says why and what to change."""


def refuse_a_taken_port(host: str, port: int) -> None:
    """Says, before anything starts, that the address is taken or cannot be used."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ServeError(f"{host} is not an address this machine can listen on ({e.strerror}): give --host") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise ServeError(f"port {port} on {host} is in use (another `tilelab serve`?): stop that one, or "
                                 "choose another with --port") from None
            raise ServeError(f"cannot listen on {host}:{port} ({e.strerror}): choose another --host or --port") \
                from None


# An access line per request, with its time, for the staff's terminal; uvicorn's own lines only when they warn.
LOG_CONFIG = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "access": {"()": "uvicorn.logging.AccessFormatter", "datefmt": "%Y-%m-%d %H:%M:%S", "use_colors": False,
                   "fmt": '%(asctime)s tilelab serve: %(client_addr)s "%(request_line)s" %(status_code)s'},
        "default": {"()": "uvicorn.logging.DefaultFormatter", "fmt": "tilelab serve: %(levelprefix)s %(message)s",
                    "use_colors": False},
    },
    "handlers": {
        "access": {"class": "logging.StreamHandler", "formatter": "access", "stream": "ext://sys.stdout"},
        "default": {"class": "logging.StreamHandler", "formatter": "default", "stream": "ext://sys.stderr"},
    },
    "loggers": {
        "uvicorn.error": {"handlers": ["default"], "level": "WARNING", "propagate": False},
        "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
    },
}


def work(root: Path, build_dir: Path, data_dir: Path, database_url: Optional[str], gpu: Optional[str],
         in_flight: Optional[int], stalled_after_s: float = 30.0, name: Optional[str] = None,
         counters: str = "inline") -> None:
    from .worker import Worker, WorkerSettings

    # A line per submission taken, each stage, and its end; the queue library's own lines only when they warn.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s tilelab worker: %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S")
    logging.getLogger("tilelab.worker").setLevel(logging.INFO)
    settings = WorkerSettings(root=root, build_dir=build_dir, database_url=url_of(data_dir, database_url), gpu=gpu,
                              in_flight=in_flight, scratch=None, stalled_after_s=stalled_after_s, worker_name=name,
                              counters=counters)
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
