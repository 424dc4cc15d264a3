"""What the service's tests share: `tilelab serve` and `tilelab worker` as
real processes, an HTTP client, and a gateway with its embedded PostgreSQL
and tokens (serving; conftest.py's `service` fixture starts one a module)."""

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from conftest import built_tree

ROOT = Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    return built_tree()


def tilelab(*args, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "grader")}
    return subprocess.run([sys.executable, "-m", "tilelab.cli", "--root", str(ROOT), *args], capture_output=True,
                          text=True, env=env, timeout=120, **kwargs)


def start(*args) -> subprocess.Popen:
    """A service process whose output goes to a file: a pipe nobody reads
    until the end fills up, and the process then hangs in its next write."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "grader")}
    log = tempfile.TemporaryFile("w+")
    process = subprocess.Popen([sys.executable, "-m", "tilelab.cli", "--root", str(ROOT), *args],
                               stdout=log, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    process.log = log
    return process


def output(process: subprocess.Popen) -> str:
    """What a process from `start` has written so far."""
    process.log.seek(0)
    return process.log.read()


def stop(process: subprocess.Popen, sig=signal.SIGINT) -> str:
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return output(process)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    def __init__(self, base: str) -> None:
        self.base = base

    def call(self, method: str, path: str, token=None, body: bytes = None, headers=None) -> tuple:
        request = urllib.request.Request(self.base + path, data=body, method=method, headers=dict(headers or {}))
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, answer.read(), dict(answer.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    def json(self, method: str, path: str, token=None, body: bytes = None, headers=None) -> tuple:
        status, data, _ = self.call(method, path, token, body, headers)
        return status, json.loads(data)

    def submit(self, token, files: dict, mode="check", student=None, key=None) -> tuple:
        query = f"?mode={mode}" + (f"&student={student}" if student else "")
        return self.json("POST", "/api/v1/submissions" + query, token, zip_of(files),
                         {"Idempotency-Key": key} if key else None)

    def wait(self, token, submission: str, seconds: float = 240) -> dict:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            status, found = self.json("GET", f"/api/v1/submissions/{submission}", token)
            assert status == 200, found
            if found["state"] in ("done", "failed", "cancelled", "replaced"):
                return found
            time.sleep(0.5)
        raise AssertionError(f"{submission} still {found} after {seconds} s")


def zip_of(files: dict) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(name, text)
    return out.getvalue()


NAIVE = (ROOT / "solutions" / "naive.cu").read_text()


def serving(data: Path, config_text: str):
    """A gateway with its embedded database under `data`, its settings
    `config_text`, and tokens; no worker yet. Yields what the tests use."""
    build = build_dir()
    data.mkdir(parents=True, exist_ok=True)
    config = data / "service.yaml"
    config.write_text(config_text)
    port = free_port()
    gateway = start("serve", "--build", str(build), "--data-dir", str(data), "--port", str(port),
                    "--config", str(config))
    client = Client(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 90
    while True:
        try:
            if client.call("GET", "/api/v1/health")[0] in (200, 503):  # 503: up, with no worker yet
                break
        except OSError:
            pass
        if gateway.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"tilelab serve did not start: {stop(gateway)}")
        time.sleep(0.3)
    tokens = {}
    for name, args in (("alice", ("student", "alice")), ("bob", ("student", "bob")), ("carol", ("student", "carol")),
                       ("course", ("course",)), ("staff", ("staff",))):
        made = tilelab("token", *args, "--build", str(build), "--data-dir", str(data))
        assert made.returncode == 0, made.stderr
        tokens[name] = made.stdout.strip()
    yield {"client": client, "tokens": tokens, "data": data, "build": build, "gateway": gateway}
    stop(gateway)


def database(service):
    import psycopg

    return psycopg.connect((service["data"] / "database-url").read_text().strip(), autocommit=True)
