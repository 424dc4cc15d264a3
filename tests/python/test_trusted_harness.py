"""The trusted harness of a grading (tilelab/grading/trusted_harness.py):
long-lived services shared by its runs, one relay per run, and a run
stopped from outside taking its service down with it. These run the real
tilelab-harness of the build tree; without a GPU every run ends with
no_device (exit 5, include/tilelab/exit_codes.h), which is enough to see
who ran it."""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import nullcontext
from pathlib import Path

import pytest
from tilelab.grading.trusted_harness import TrustedHarness
from tilelab.system import process
from tilelab.system.gpu_lock import GpuLock
from tilelab.system.paths import tool_path
from conftest import built_tree

NO_DEVICE = 5
OK = 0


def build_dir() -> Path:
    return built_tree("bin/tilelab-harness")


def case_file(tmp_path: Path) -> Path:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"version": 1, "part": "naive", "result": str(tmp_path / "result.json"),
                                "cases": [{"name": "a", "j": 4, "k": 4, "l": 4, "inputs": {"seed": 1}}]}))
    return path


@pytest.fixture
def harnesses():
    """Makes TrustedHarness objects and closes each at the end, passed or not."""
    made = []

    def make(services: int, log=None, env=None, gpu_shared=nullcontext) -> TrustedHarness:
        made.append(TrustedHarness(tool_path(build_dir(), "tilelab-harness"), services=services, log=log, env=env,
                                   gpu_shared=gpu_shared))
        return made[-1]

    yield make
    for trusted in made:
        trusted.close()


def run(trusted: TrustedHarness, cases: Path, launcher: list, timeout_s: float = 60) -> process.Completed:
    with trusted.prefix([cases]) as lease:
        done = process.run(launcher, timeout_s, outside=lease.outside)
        lease.ended(done)
    return done


def expected_ok() -> int:
    # A run of the naive reference: right on a GPU, no_device without one.
    return OK if os.path.exists("/dev/nvidia0") else NO_DEVICE


def test_runs_share_one_service_and_it_ends_when_the_grading_does(tmp_path, harnesses):
    build = build_dir()
    naive = build / "reference" / "naive"
    trusted = harnesses(3, log=tmp_path / "service.log")
    trusted.start_all()
    assert len(trusted._all) == 3 and len(trusted._idle) == 3
    cases = case_file(tmp_path)
    with trusted.prefix([cases]) as lease:
        assert lease.outside[1] == "--via"
        socket = Path(lease.outside[2])
        done = process.run([naive], 60, outside=lease.outside)
        lease.ended(done)
    assert done.exit_code == expected_ok(), done.stderr
    # Runs one after another reuse the same service.
    for _ in range(2):
        with trusted.prefix([cases]) as lease:
            assert Path(lease.outside[2]) == socket
            done = process.run([naive], 60, outside=lease.outside)
            lease.ended(done)
        assert done.exit_code == expected_ok(), done.stderr
    folder = socket.parent
    assert oct(folder.stat().st_mode & 0o777) == "0o700"  # the sandbox user cannot reach the socket
    services = [s.proc for s in trusted._all]
    assert len(services) == 3
    trusted.close()
    assert not folder.exists()
    # close() does not wait for the services, but they end on their own: their input closed.
    deadline = time.monotonic() + 10
    while any(s.poll() is None for s in services) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [s.returncode for s in services] == [0, 0, 0]


def test_a_run_stopped_by_its_time_limit_takes_its_service_down(tmp_path, harnesses):
    """The relay is killed with its launcher; the service that ran its case
    file is killed and waited for before the result is read, and the next
    run gets a new one."""
    build = build_dir()
    trusted = harnesses(1)
    cases = case_file(tmp_path)
    with trusted.prefix([cases]) as lease:
        first = lease.outside[2]
        done = process.run(["/bin/sh", "-c", "sleep 30"], 1.0, outside=lease.outside)
        lease.ended(done)
    assert done.timed_out
    with trusted.prefix([cases]) as lease:
        assert lease.outside[2] != first
        done = process.run([build / "reference" / "naive"], 60, outside=lease.outside)
        lease.ended(done)
    assert done.exit_code == expected_ok(), done.stderr


def test_services_make_and_end_their_contexts_only_while_the_gpu_is_shared(harnesses):
    # A context made or ended beside a timed part slows a launcher that calls the driver in its timed calls:
    # while another grading holds the GPU alone, no service starts or ends.
    lock = GpuLock()
    trusted = harnesses(2, gpu_shared=lock.shared)
    with lock.exclusive():
        starting = threading.Thread(target=trusted.start_all)
        starting.start()
        starting.join(0.5)
        assert starting.is_alive() and not trusted._all
    starting.join(30)
    assert not starting.is_alive() and len(trusted._all) == 2
    services = [s.proc for s in trusted._all]
    with lock.exclusive():
        trusted.close()
        time.sleep(0.5)
        assert all(proc.poll() is None for proc in services)
    for proc in services:
        assert proc.wait(timeout=30) == OK


def test_without_services_each_run_is_one_shot(tmp_path, harnesses):
    build = build_dir()
    trusted = harnesses(0)
    cases = case_file(tmp_path)
    done = run(trusted, cases, [build / "reference" / "naive"])
    assert done.exit_code == expected_ok(), done.stderr
    with trusted.prefix([cases]) as lease:
        assert lease.outside == [tool_path(build, "tilelab-harness"), cases, "--"]


def test_a_launcher_that_cannot_start_is_reported_and_the_service_goes_on(tmp_path, harnesses):
    build = build_dir()
    trusted = harnesses(1)
    cases = case_file(tmp_path)
    done = run(trusted, cases, [tmp_path / "no-such-launcher"])
    assert done.exit_code == 2 and "the launcher did not start" in done.stderr  # usage
    done = run(trusted, cases, [build / "reference" / "naive"])
    assert done.exit_code == expected_ok(), done.stderr


def test_services_start_with_one_work_queue(harnesses):
    """A trusted service checks answers only: its context makes one hardware
    work queue (runner.ONE_WORK_QUEUE), which starts faster beside others."""
    trusted = harnesses(1)
    trusted.start_all()
    [service] = trusted._all
    environ = Path(f"/proc/{service.proc.pid}/environ").read_bytes().split(b"\0")
    assert b"CUDA_DEVICE_MAX_CONNECTIONS=1" in environ


def test_services_run_on_the_grading_gpu(harnesses):
    """A batch worker's grading on its GPU: the service that keeps the run's
    buffers and clock sees that GPU, as the launcher does (the sandbox's
    CUDA_VISIBLE_DEVICES), not the first of the host."""
    trusted = harnesses(1, env={"CUDA_VISIBLE_DEVICES": "1"})
    trusted.start_all()
    [service] = trusted._all
    environ = Path(f"/proc/{service.proc.pid}/environ").read_bytes().split(b"\0")
    assert b"CUDA_VISIBLE_DEVICES=1" in environ


def test_a_parts_executable_runs_with_one_work_queue_and_only_timed_runs_in_the_foreground(tmp_path):
    """Every run of a part's executable adds ONE_WORK_QUEUE to the sandbox's
    environment, and every run but a timed one runs at the lowest CPU
    priority (process.BACKGROUND_PREFIX). The program stands in for a part's
    executable: it writes the variable and the niceness it got as its
    result."""
    from tilelab.grading.runner import run_harness
    from tilelab.system.sandbox import Sandbox

    program = tmp_path / "part"
    program.write_text('#!/bin/sh\nprintf \'{"queues": "%s", "nice": %s}\' "$CUDA_DEVICE_MAX_CONNECTIONS" "$(nice)"'
                       ' > result.json\n')
    program.chmod(0o755)
    ours = os.nice(0)
    got = run_harness(program, case_file(tmp_path), 30, Sandbox())
    assert got.exit_code == 0, got.stderr
    assert got.result == {"queues": "1", "nice": 19}
    assert run_harness(program, case_file(tmp_path), 30, Sandbox(), timed=True).result == {"queues": "1", "nice": ours}


def test_kept_services_serve_the_gradings_they_fit_and_end_when_replaced_or_closed(harnesses):
    # A watch's services (KeptServices): the same ones for every grading they fit; one that needs more runs
    # at once, or another GPU's environment, gets new ones, and the old ones end.
    from tilelab.grading.trusted_harness import KeptServices

    tool = tool_path(build_dir(), "tilelab-harness")
    kept = KeptServices(GpuLock())
    first = kept.for_grading(tool, {}, 2, lambda: harnesses(2))
    assert kept.for_grading(tool, {}, 1, lambda: harnesses(2)) is first
    assert kept.for_grading(tool, {}, 2, lambda: harnesses(2)) is first
    more = kept.for_grading(tool, {}, 3, lambda: harnesses(3))
    assert more is not first and first._closed and not more._closed
    elsewhere = kept.for_grading(tool, {"CUDA_VISIBLE_DEVICES": "1"}, 1,
                                 lambda: harnesses(3, env={"CUDA_VISIBLE_DEVICES": "1"}))
    assert elsewhere is not more and more._closed and kept.harness is elsewhere
    kept.close()
    assert elsewhere._closed and kept.harness is None
