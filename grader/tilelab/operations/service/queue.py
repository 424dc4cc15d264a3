"""The queue: procrastinate's, in the service's PostgreSQL. Two tasks: a
submission to grade, graded submissions at a higher priority than checks,
and the counters a grading left for later (`tilelab worker --counters
later`), below both, so that they are read only while no submission waits;
they have a queue of their own, which only the workers with a GPU take
from. Jobs of one priority go first come, first served."""

from __future__ import annotations

QUEUE = "gradings"
TASK = "tilelab_grade"
COUNTERS_QUEUE = "counters"
COUNTERS_TASK = "tilelab_counters"
COUNTERS_PRIORITY = -1000  # below every check and grade (config.Limits keeps their priorities above it)


def make_app(url: str, sync: bool = False):
    """A procrastinate App on `url`: the async connector for the gateway and
    the worker, the sync one for one-off work (the schema)."""
    import procrastinate

    if sync:
        connector = procrastinate.SyncPsycopgConnector(conninfo=url)
    else:
        connector = procrastinate.PsycopgConnector(conninfo=url)
    return procrastinate.App(connector=connector)
