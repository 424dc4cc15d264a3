"""The grader's side of a timing run's GPU turn (grading/gpu_turn.py), the
time limit that does not run while a run waits at it (process.run), and
which gradings begin their timing runs beside their cases (context.times_early)."""

import socket
import sys
import time

from tilelab.grading.context import times_early
from tilelab.grading.gpu_turn import GpuTurnGate
from tilelab.grading.options import GradeOptions
from tilelab.spec.assignment import load_assignment
from tilelab.system import process


def _harness_at(gate: GpuTurnGate, says: bytes) -> socket.socket:
    """Connects as the trusted harness does (core/gpu_turn.cpp) and says `says`."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(gate.path))
    client.sendall(says)
    client.settimeout(5)
    return client


def test_a_ready_run_waits_until_it_is_given_the_gpu_and_its_wait_is_counted():
    gate = GpuTurnGate()
    try:
        assert not gate.wait_ready(0) and gate.paused_s() == 0.0
        client = _harness_at(gate, b"ready\n")
        assert gate.wait_ready(5)
        time.sleep(0.2)
        waited = gate.paused_s()
        assert waited >= 0.2
        gate.give()
        assert client.recv(16) == b"go\n"
        time.sleep(0.1)
        assert gate.paused_s() < waited + 0.1  # no longer waiting
        client.close()
    finally:
        gate.close()
    assert not gate.path.exists()


def test_anything_but_ready_is_not_a_run_at_its_gate():
    gate = GpuTurnGate()
    try:
        client = _harness_at(gate, b"go\n")
        assert not gate.wait_ready(0.3)
        assert client.recv(16) == b""  # closed: the harness ends the run (core/gpu_turn.h)
        gate.give()  # nobody ready: nothing happens
        assert gate.paused_s() == 0.0
    finally:
        gate.close()


def test_closing_the_gate_ends_the_wait_of_a_run_still_there():
    gate = GpuTurnGate()
    client = _harness_at(gate, b"ready\n")
    assert gate.wait_ready(5)
    gate.close()
    assert client.recv(16) == b""
    waited = gate.paused_s()
    time.sleep(0.1)
    assert gate.paused_s() == waited


def test_the_time_limit_does_not_run_while_a_run_waits_on_the_grader():
    sleeper = [sys.executable, "-c", "import time; time.sleep(1.0)"]
    limited = process.run(sleeper, 0.5)
    assert limited.timed_out
    started = time.monotonic()
    # As if it had waited at its gate from its start until now.
    waited = process.run(sleeper, 0.5, paused=lambda: time.monotonic() - started)
    assert not waited.timed_out and waited.exit_code == 0
    never_given = process.run([sys.executable, "-c", "import time; time.sleep(30)"], 0.5, paused=lambda: 0.0)
    assert never_given.timed_out and never_given.seconds < 5


def test_a_gate_closed_before_its_run_was_let_through_is_called_off():
    """speed.TimingTurn calls off the run of a part whose cases failed while
    its timing run waited; that run's stage is then left to the turn."""
    waiting = GpuTurnGate()
    client = _harness_at(waiting, b"ready\n")
    assert waiting.wait_ready(5) and not waiting.called_off
    waiting.close()
    assert waiting.called_off and client.recv(16) == b""
    never_came = GpuTurnGate()
    never_came.close()
    assert never_came.called_off
    let_through = GpuTurnGate()
    client = _harness_at(let_through, b"ready\n")
    assert let_through.wait_ready(5)
    let_through.give()
    assert client.recv(16) == b"go\n"
    let_through.close()
    assert not let_through.called_off
    let_through.close()  # closed twice: still not called off
    assert not let_through.called_off


def test_only_a_check_of_a_few_parts_begins_its_timing_beside_its_cases(root):
    parts = load_assignment(root / "assignment.yaml").parts
    check = GradeOptions.for_tree(root, root / "build", root / "out", mode="check")
    assert times_early(check, parts[:1]) and times_early(check, parts[:3])
    assert not times_early(check, parts)  # each waiting run holds a service: twelve contexts are too many
    assert not times_early(check.replace(timing=False), parts[:1])  # --fast times nothing
    assert not times_early(check.replace(mode="grade"), parts[:1])  # a grading leaves the turn to others meanwhile
    assert not times_early(check, [])
