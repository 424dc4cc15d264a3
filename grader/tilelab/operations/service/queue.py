"""The queue: procrastinate's, in the service's PostgreSQL. One task, a
submission to grade; graded submissions carry a higher priority than checks,
and jobs of one priority go first come, first served."""

from __future__ import annotations

QUEUE = "gradings"
TASK = "tilelab_grade"


def make_app(url: str, sync: bool = False):
    """A procrastinate App on `url`: the async connector for the gateway and
    the worker, the sync one for one-off work (the schema)."""
    import procrastinate

    if sync:
        connector = procrastinate.SyncPsycopgConnector(conninfo=url)
    else:
        connector = procrastinate.PsycopgConnector(conninfo=url)
    return procrastinate.App(connector=connector)
