"""The GPU lock: shared runs beside each other, a timing run alone, one timing turn at a time,
across the processes of a host, and a GPU's figures measured with the GPU to themselves."""

import os
import threading
import time
from pathlib import Path

import pytest

from tilelab.system.gpu_lock import GpuLock


def test_exclusive_waits_for_shared_users_and_blocks_new_ones():
    lock, events = GpuLock(), []

    def sharer(tag, hold):
        with lock.shared():
            events.append(f"{tag} in")
            time.sleep(hold)
            events.append(f"{tag} out")

    first = threading.Thread(target=sharer, args=("a", 0.2))
    first.start()
    time.sleep(0.05)

    def timer():
        with lock.exclusive():
            events.append("timing")

    t = threading.Thread(target=timer)
    t.start()
    time.sleep(0.05)
    late = threading.Thread(target=sharer, args=("b", 0))
    late.start()
    for th in (first, t, late):
        th.join()
    assert events == ["a in", "a out", "timing", "b in", "b out"]


def test_the_timing_turn_keeps_other_timing_out_but_lets_shared_runs_in():
    """A grading holds the turn while its timing runs prepare on the shared
    GPU, wait at their gates and are timed: another grading's exclusive()
    waits for the whole turn, a shared run does not, and the holder of the
    turn takes exclusive() itself without waiting for its own turn."""
    lock, events = GpuLock(), []
    preparing, shared_in, timed = threading.Event(), threading.Event(), threading.Event()

    def grading():
        with lock.turn():
            with lock.shared():
                events.append("prepared")
                preparing.set()
                shared_in.wait(5)  # a shared run of another grading gets in meanwhile
            with lock.exclusive():
                events.append("timed")
            time.sleep(0.2)  # the runs end, the turn is given back
            events.append("turn over")
        timed.set()

    def other_timing():
        with lock.exclusive():
            events.append("other timed")

    def sharer():
        with lock.shared():
            events.append("shared run")
            shared_in.set()

    first = threading.Thread(target=grading)
    first.start()
    assert preparing.wait(5)
    others = [threading.Thread(target=other_timing), threading.Thread(target=sharer)]
    for th in others:
        th.start()
    for th in [first, *others]:
        th.join(10)
    assert timed.is_set()
    assert events.index("shared run") < events.index("timed")  # it ran beside the preparing
    assert events.index("other timed") > events.index("turn over")


def test_a_gpus_lock_holds_across_the_processes_of_a_host(tmp_path):
    """Two graders on one host (two workers on one GPU): the other process's
    timing waits for this one's shared runs, and a timing run of this one
    keeps the other's shared runs out until it is done."""
    import subprocess
    import sys

    other = """
import sys, time
from pathlib import Path
from tilelab.system.gpu_lock import GpuLock
lock = GpuLock("0", Path(sys.argv[1]))
with getattr(lock, sys.argv[2])():
    print("in", flush=True)
    time.sleep(float(sys.argv[3]))
print("out", flush=True)
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "grader")}

    def hold(how: str, seconds: float) -> subprocess.Popen:
        started = subprocess.Popen([sys.executable, "-c", other, str(tmp_path), how, str(seconds)],
                                   stdout=subprocess.PIPE, text=True, env=env)
        assert started.stdout.readline().strip() == "in"
        return started

    mine = GpuLock("0", tmp_path)
    timing = hold("exclusive", 0.6)
    began = time.monotonic()
    with mine.shared():
        waited = time.monotonic() - began
    assert waited > 0.4, f"a shared run began {waited:.2f} s into another process's timing"
    assert timing.wait(timeout=10) == 0
    sharing = hold("shared", 0.6)
    began = time.monotonic()
    with mine.exclusive():
        waited = time.monotonic() - began
    assert waited > 0.4 and sharing.wait(timeout=10) == 0
    turn = hold("turn", 0.6)  # another process's timing runs prepare and wait at their gates
    began = time.monotonic()
    with mine.shared():
        assert time.monotonic() - began < 0.3
    with mine.exclusive():
        waited = time.monotonic() - began
    assert waited > 0.4 and turn.wait(timeout=10) == 0
    elsewhere = GpuLock("1", tmp_path)  # another GPU's lock is another lock
    sharing = hold("exclusive", 0.6)
    began = time.monotonic()
    with elsewhere.exclusive():
        assert time.monotonic() - began < 0.3
    sharing.wait(timeout=10)


# `nvidia-smi -L` on the two-H200 host of 2026-11-28, a MIG instance's line added as nvidia-smi indents one.
LISTING = """GPU 0: NVIDIA H200 (UUID: GPU-e4dc805d-6b94-d91d-c11c-e28f6e8c6530)
GPU 1: NVIDIA H200 (UUID: GPU-d575c926-1a16-291f-8fb1-cc519a642cb7)
  MIG 1g.18gb     Device  0: (UUID: MIG-5c4b3a29-1f0e-5d6c-8b7a-0f1e2d3c4b5a)
"""


def test_a_gpu_named_by_its_uuid_takes_the_lock_of_its_index():
    """A worker given a GPU's UUID and a grading on that GPU's index take one lock, whichever name each has."""
    from tilelab.system.gpu_lock import lock_name

    assert lock_name("GPU-d575c926-1a16-291f-8fb1-cc519a642cb7", LISTING) == "1"
    assert lock_name("gpu-E4DC805D", LISTING) == "0"  # a UUID's first characters, as CUDA takes them
    assert lock_name("GPU-", LISTING) == "GPU-"  # names both: neither
    assert lock_name("GPU-ffffffff", LISTING) == "GPU-ffffffff"  # not on this host
    assert lock_name("MIG-5c4b3a29-1f0e-5d6c-8b7a-0f1e2d3c4b5a", LISTING) == "MIG-5c4b3a29-1f0e-5d6c-8b7a-0f1e2d3c4b5a"
    assert lock_name(" 1", LISTING) == "1" and lock_name("0") == "0"


def test_no_sandbox_user_can_open_a_host_lock():
    """A student's process that could open a GPU's or a slot's lock file, even
    only to read, could flock it and hold every grader on the host: the files
    and their folder are the grader's alone, and a folder of another user's is
    not used (the lock is then the process's own)."""
    import pwd
    import shutil
    import subprocess
    import tempfile

    from tilelab.system import paths
    from tilelab.system.sandbox import Sandbox
    from tilelab.system.sandbox_users import hold_users

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv, to open the files as another user")

    def as_nobody(script: str, path: Path) -> subprocess.CompletedProcess:
        return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
                               "sh", "-c", script, "sh", str(path)], capture_output=True, text=True)

    top = Path(tempfile.mkdtemp(prefix="tilelab-locks-test-"))
    try:
        top.chmod(0o755)  # everybody may pass through to the lock folder: only its own modes keep them out
        locks = top / "locks"
        with GpuLock("0", locks).exclusive():
            pass
        try:  # a slot's lock too, where this host has the sandbox's users (scripts/secure-checkout)
            user = pwd.getpwnam("tilelab-student")
            held = hold_users(Sandbox(user=user.pw_name, uid=user.pw_uid, gid=user.pw_gid), 1, locks)
        except KeyError:
            held = []
        names = sorted(p.name for p in locks.iterdir())
        assert {"gpu-0.lock", "gpu-0.turnstile", "gpu-0.timing"} <= set(names)
        assert oct(locks.stat().st_mode & 0o777) == "0o700"
        assert all(oct((locks / n).stat().st_mode & 0o777) == "0o600" for n in names)
        assert as_nobody('test -x "$1"', top).returncode == 0
        for name in names:
            opened = as_nobody('exec 3<"$1"', locks / name)
            assert opened.returncode != 0 and "Permission denied" in opened.stderr, (name, opened.stderr)
        for h in held:
            h.release()
        theirs = top / "theirs"
        theirs.mkdir()
        os.chown(theirs, pwd.getpwnam("nobody").pw_uid, -1)
        with GpuLock("0", theirs).exclusive():  # this process's lock alone: nothing made in another's folder
            assert list(theirs.iterdir()) == []
        # Nor can a student make root's lock folder before root does, and own it: no folder on its way is
        # another user's, or one that others may write in (/run/lock and /tmp are).
        for folder in [f for f in paths._lock_dir().parents if f.exists()]:
            mode = folder.stat()
            assert mode.st_uid == 0 and not mode.st_mode & 0o022, f"{folder} lets others make root's lock folder"
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_gpus_figures_are_measured_with_the_gpu_to_themselves_once(tmp_path):
    """Ceilings and calibration (gpu_cache.kept_or_measured): two workers
    starting together on one GPU measured them side by side and kept figures
    far too low. Measured, they are timed holding the GPU's lock host-wide
    exclusively; kept, the GPU is not taken at all; and the cache is looked at
    again once the lock is held, so the second grader keeps the first's."""
    import fcntl

    from tilelab.grading.gpu_cache import kept_or_measured

    def held_by_another(kind: str) -> bool:  # as another process on the host finds the GPU's lock file
        with open(tmp_path / f"gpu-0.{kind}", "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
            return False

    lock, seen = GpuLock("0", tmp_path), []

    def measure():
        seen.append((held_by_another("lock"), held_by_another("timing")))
        return "measured"

    assert kept_or_measured(lambda: None, measure, lock) == "measured"
    assert seen == [(True, True)]
    assert not held_by_another("lock") and not held_by_another("timing")

    def never():
        raise AssertionError("measured although kept")

    # Kept: no measurement, and the GPU is not taken (a shared run of another process goes on meanwhile).
    with open(tmp_path / "gpu-0.lock", "a") as other:
        fcntl.flock(other, fcntl.LOCK_SH)
        done = []
        looking = threading.Thread(target=lambda: done.append(kept_or_measured(lambda: "kept", never, lock)))
        looking.start()
        looking.join(timeout=10)
        fcntl.flock(other, fcntl.LOCK_UN)
    assert done == ["kept"]
    # Another grader measured while this one waited for the lock: its figures, not a second measurement.
    looks = iter([None, "kept by the other"])
    assert kept_or_measured(lambda: next(looks), never, lock) == "kept by the other"


def test_a_turn_whose_host_lock_failed_leaves_the_next_turn_to_take_it(tmp_path):
    """Where taking the host's timing lock fails (here made to), the turn is
    given back whole: the next turn of the process takes the host's lock again."""
    import fcntl

    lock = GpuLock("0", tmp_path)
    take = lock._host.take_turn

    def refused() -> None:
        raise OSError("the lock file could not be locked")

    lock._host.take_turn = refused
    with pytest.raises(OSError):
        with lock.turn(owner="a"):
            pass
    lock._host.take_turn = take
    with lock.turn(owner="b"), open(next(tmp_path.glob("*.timing")), "a") as other:
        with pytest.raises(BlockingIOError):  # held by the turn, as another process would find it
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
