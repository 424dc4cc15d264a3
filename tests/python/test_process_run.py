"""The process runner (tilelab.system.process): a flood of output kept as its head and tail, the
whole process group ended on a time-out or when called off, nothing of a run left when it returns,
a trusted program in front of the sandbox."""

import os
import sys
import threading
import time

import pytest

from tilelab.system import process


def test_clip_lines_says_how_many_lines_it_left_out():
    lines = [f"error {i}" for i in range(50)]
    assert process.clip_lines(lines, 40) == lines[:40] + ["[... 10 more lines not shown ...]"]
    assert process.clip_lines(lines, 25, 10) == lines[:25] + ["[... 15 lines not shown ...]"] + lines[40:]
    assert process.clip_lines(lines[:35], 25, 10) == lines[:35]  # nothing to leave out


def test_process_run_keeps_head_and_tail_of_a_flood():
    flood = "import sys\nsys.stdout.write('START\\n' + 'x' * 5_000_000 + '\\nEND\\n')"
    done = process.run([sys.executable, "-c", flood], timeout_s=60)
    assert done.exit_code == 0 and done.stdout_bytes > 5_000_000
    assert done.stdout.startswith("START") and done.stdout.rstrip().endswith("END")
    assert len(done.stdout) < 3 * process.KEEP_BYTES and "bytes not shown" in done.stdout


def test_process_run_returns_only_when_nothing_of_the_run_is_left():
    # The leader leaves orphans behind and exits at once (as a fork bomb's
    # processes outlive its leader); killed or not, they must all be gone,
    # reaped too, when run returns: until then they count against the
    # sandbox user's process limit.
    script = ("import os, subprocess\n"
              "for _ in range(20): subprocess.Popen(['sleep', '30'])\n"
              "print(os.getpid())")
    done = process.run([sys.executable, "-c", script], timeout_s=20)
    assert done.exit_code == 0
    with pytest.raises(ProcessLookupError):
        os.killpg(int(done.stdout), 0)


def test_process_run_kills_the_whole_group_on_time_out():
    script = "import subprocess, time\nsubprocess.Popen(['sleep', '30'])\ntime.sleep(30)"
    start = time.monotonic()
    done = process.run([sys.executable, "-c", script], timeout_s=1)
    assert done.timed_out and done.exit_code is None
    assert time.monotonic() - start < 15  # the child sleep holds the pipe: it must have been killed too


def test_process_run_stops_when_another_thread_calls_it_off():
    """What a part's sanitizer runs get when its correctness run hangs."""
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    done = process.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=60, cancel=cancel)
    assert done.stopped == process.CANCELLED and not done.timed_out and done.exit_code is None
    assert done.seconds < 10


def test_process_run_puts_a_trusted_program_in_front_of_the_sandbox():
    """tilelab-harness runs outside the sandbox and starts the part's
    launcher inside it: process.run's `outside` goes before the sandbox's
    prefix (prlimit here: no sandbox user without root)."""
    from tilelab.system.sandbox import Sandbox
    show = "import sys, resource; print(sys.argv[1:], resource.getrlimit(resource.RLIMIT_NPROC)[0])"
    done = process.run(["sh", "-c", f"{sys.executable} -c '{show}' inside; echo launcher ran"], timeout_s=30,
                       sandbox=Sandbox(), outside=[sys.executable, "-c", "import os, sys; "
                                                   "print('trusted', sys.argv[1], flush=True); os.execvp(sys.argv[2], sys.argv[2:])",
                                                   "case.json"])
    lines = done.stdout.splitlines()
    assert done.exit_code == 0 and lines[0] == "trusted case.json" and lines[-1] == "launcher ran"
    assert lines[1] == f"['inside'] {Sandbox().limits.processes}"  # the launcher got the sandbox's limits
