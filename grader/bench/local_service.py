"""The grading service on this host, as a course runs it on one box:
`tilelab serve` with its embedded PostgreSQL and one `tilelab worker` per
GPU (or several on one), as real processes; tokens made with `tilelab
token`; hand-ins through the HTTP API. For the GPU suite's service check and
the service benchmark, never for tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Optional

from tilelab.operations.service.client import ServiceClient, ServiceUnavailable

from .class_bench import points_lost

START_S = 120.0  # a gateway whose database is made from nothing, on a loaded machine


class LocalService:
    """A gateway under `data`, its workers, and an HTTP client for its API."""

    def __init__(self, root: Path, build: Path, data: Path, log_dir: Path) -> None:
        self.root, self.build, self.data, self.log_dir = root, build, data, log_dir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.processes: dict = {}  # name -> Popen
        self.tokens: dict = {}

    # ------------------------------------------------------------ processes

    def _tilelab(self, name: str, *args, env: Optional[dict] = None) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "w")
        process = subprocess.Popen([sys.executable, "-m", "tilelab.cli", "--root", str(self.root), *args],
                                   stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                   start_new_session=True)
        log.close()
        self.processes[name] = process
        return process

    def start(self) -> None:
        gateway = self._tilelab("gateway", "serve", "--build", str(self.build), "--data-dir", str(self.data),
                                "--port", str(self.port))
        deadline = time.monotonic() + START_S
        while self.call("GET", "/api/v1/health")[0] not in (200, 503):
            if gateway.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tilelab serve did not start: {(self.log_dir / 'gateway.log').read_text()}")
            time.sleep(0.3)

    def token(self, role: str, student: Optional[str] = None) -> str:
        made = subprocess.run([sys.executable, "-m", "tilelab.cli", "--root", str(self.root), "token", role,
                               *([student] if student else []), "--build", str(self.build), "--data-dir",
                               str(self.data)], capture_output=True, text=True, check=True)
        return made.stdout.strip()

    def add_worker(self, name: str, gpu: Optional[str], in_flight: Optional[int] = None,
                   stalled_after: Optional[float] = None, counters: str = "inline") -> None:
        args = ["worker", "--build", str(self.build), "--data-dir", str(self.data), "--name", name,
                "--counters", counters]
        args += ["--gpu", gpu] if gpu is not None else []
        args += ["--in-flight", str(in_flight)] if in_flight else []
        args += ["--stalled-after", f"{stalled_after:g}"] if stalled_after else []
        self._tilelab(f"worker-{name}", *args)

    def kill_worker(self, name: str) -> None:
        """SIGKILL to the worker and everything it started, as a host that dies would end them."""
        process = self.processes[f"worker-{name}"]
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def wait_ready(self, names: list, seconds: float = 600) -> dict:
        """The workers' rows in /api/v1/health once every one named is ready (they calibrate first)."""
        deadline = time.monotonic() + seconds
        while True:
            workers = {w["name"]: w for w in self.call_json("GET", "/api/v1/health")[1].get("workers", [])}
            if all(workers.get(n, {}).get("state") == "ready" for n in names):
                return workers
            if time.monotonic() > deadline:
                raise RuntimeError(f"workers not ready after {seconds:.0f} s: {workers}")
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM to every worker (they finish what they grade), then to the gateway, which stops its database."""
        ordered = [n for n in self.processes if n != "gateway"] + [n for n in self.processes if n == "gateway"]
        for name in ordered:
            process = self.processes[name]
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()

    # ------------------------------------------------------------ the API

    def call(self, method: str, path: str, token: Optional[str] = None, body: Optional[bytes] = None,
             headers: Optional[dict] = None) -> tuple:
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=dict(headers or {}))
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except OSError:
            return 0, b""

    def call_json(self, method: str, path: str, token: Optional[str] = None, body: Optional[bytes] = None,
                  headers: Optional[dict] = None) -> tuple:
        status, data = self.call(method, path, token, body, headers)
        try:
            return status, json.loads(data or b"{}")
        except ValueError:
            return status, {}

    def client(self, token: str) -> ServiceClient:
        """The API as `tilelab check --remote` and the platforms' forwarders use it."""
        return ServiceClient(self.url, token, timeout=60.0)

    def submit(self, token: str, files: dict, mode: str = "check", student: Optional[str] = None) -> dict:
        try:
            return self.client(token).submit(files, mode=mode, student=student)
        except ServiceUnavailable as e:
            raise RuntimeError(str(e)) from None

    def wait(self, token: str, submission: str, seconds: float = 1800) -> dict:
        """Its final state, looked at every half second while it is queued and every
        RUNNING_POLL_S while it runs: a submit-to-result time is what the service took."""
        try:
            return self.client(token).wait(submission, deadline=time.monotonic() + seconds, poll_s=0.5,
                                           max_poll_s=0.5)
        except ServiceUnavailable as e:
            raise RuntimeError(str(e)) from None

    def scores(self) -> dict:
        """How many recorded gradings (mode grade) earned each score
        (tally_scores): what shows that a benchmark's hand-ins were graded
        whole, not failed early."""
        with self._database() as conn:
            return tally_scores(conn.execute(
                "SELECT r.score, r.max_score FROM tilelab_results r JOIN tilelab_submissions s "
                "ON s.id = r.submission WHERE s.mode = 'grade'").fetchall())

    def short(self) -> list:
        """Each recorded grading (mode grade) that earned less than its
        maximum, as "student: the parts short and why" (class_bench.points_lost)."""
        with self._database() as conn:
            rows = conn.execute(
                "SELECT s.student, r.grade_json FROM tilelab_results r JOIN tilelab_submissions s "
                "ON s.id = r.submission WHERE s.mode = 'grade' AND r.score < r.max_score ORDER BY s.created_at"
            ).fetchall()
        return [f"{student}: {points_lost(grade)}" for student, grade in rows]

    def counters_to_come(self) -> int:
        """Recorded gradings whose counters are still to be read (tilelab worker --counters later)."""
        from tilelab.operations.service.records import counters_to_come

        with self._database() as conn:
            return counters_to_come(conn)

    def _database(self):
        """A connection to the service's own database."""
        import psycopg

        return psycopg.connect((self.data / "database-url").read_text().strip())


def tally_scores(rows) -> dict:
    """How many of the (score, max) `rows` read each "score / max", the most common first."""
    counted = Counter(f"{score:g} / {most:g}" for score, most in rows)
    return dict(counted.most_common())


def sandbox_processes_left(prefix: str = "tilelab-student") -> list:
    """`user pid command` of every process on the host whose user's name starts with `prefix`."""
    shown = subprocess.run(["ps", "-e", "-o", "user:32=,pid=,args="], capture_output=True, text=True).stdout
    return [line.strip() for line in shown.splitlines() if line.strip().startswith(prefix)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
