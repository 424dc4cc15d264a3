"""Nothing a run starts outlives it: small C programs that misbehave as
hand-ins do, run through the same sandbox and process runner that run
student code (process.run in the sandbox, with tilelab-contain), as the
sandbox user when the tests run as root. Each ends within its limit, none of
its processes is left, and the CPU time of what it left running is counted.
Also: sandbox users held by one grader are not taken by another."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tilelab.system import process
from tilelab.system.paths import LOCK_DIR
from tilelab.system.sandbox import Sandbox, sandbox_for_this_process
from tilelab.system.sandbox_users import ended_leftovers, hold_users, processes_of
from conftest import built_tree

ROOT = Path(__file__).resolve().parents[2]

PROGRAMS = {
    # A daemon that keeps the run's stdout and stderr open, printing forever.
    "daemon": """
        int main(void) {
            if (fork() == 0) {
                setsid();
                if (fork() == 0) { for (;;) { printf("still here\\n"); fflush(stdout); usleep(100000); } }
                _exit(0);
            }
            printf("launcher done\\n");
            return 0;
        }""",
    # A grandchild re-parented away from its parent, in the run's own group.
    "double_fork": """
        int main(void) {
            if (fork() == 0) { if (fork() == 0) { for (;;) pause(); } _exit(0); }
            wait(NULL);
            return 0;
        }""",
    # As many processes as the limit allows, each trying for more.
    "fork_bomb": """
        int main(void) {
            for (;;) { fork(); }
        }""",
    # The same, each child a session of its own: out of the run's process group, and, where the kernel
    # groups processes by session for the CPUs, each with a share of them as large as the container's.
    "session_bomb": """
        int main(void) {
            for (;;) { if (fork() == 0) setsid(); }
        }""",
    # Host work handed to a child the launcher never waits for.
    "cpu_child": """
        int main(void) {
            if (fork() == 0) {
                struct timespec t0, t;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                volatile unsigned long x = 0;
                do { for (int i = 0; i < 1000000; ++i) x += i; clock_gettime(CLOCK_MONOTONIC, &t); }
                while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 600);
                _exit(0);
            }
            sleep(1);
            return 0;
        }""",
}
HEADERS = "#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\n#include <unistd.h>\n#include <sys/wait.h>\n"


def build_dir() -> Path:
    return built_tree("bin/tilelab-contain")


@pytest.fixture(scope="module")
def place():
    """A folder the sandbox user can pass through (a test's own tmp_path is its owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="tilelab-containment-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def programs(place) -> dict:
    folder = place / "programs"
    folder.mkdir(mode=0o755)
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("c++")
    made = {}
    for name, body in PROGRAMS.items():
        source = folder / f"{name}.c"
        source.write_text(HEADERS + textwrap.dedent(body))
        language = ["-x", "c"] if compiler.endswith("c++") else []
        subprocess.run([compiler, *language, "-O1", "-o", str(folder / name), str(source)], check=True)
        made[name] = folder / name
    return made


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    """The sandbox student code runs in here, held as a grading slot holds it."""
    base = sandbox_for_this_process().contained_by(build_dir() / "bin" / "tilelab-contain")
    held = hold_users(base, 1)
    assert held, "no sandbox user free"
    yield held[0].sandbox
    held[0].release()


def running(program: Path) -> list:
    """Pids of processes running `program` (their /proc/PID/exe)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.readlink(f"/proc/{entry.name}/exe") == str(program):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def contained_run(program: Path, sandbox: Sandbox, limit: float, place: Path) -> tuple:
    work = Path(tempfile.mkdtemp(dir=place))
    sandbox.own(work)
    started = time.monotonic()
    done = process.run([program], limit, cwd=work, sandbox=sandbox, watch_dir=work)
    return done, time.monotonic() - started


def test_a_daemon_holding_the_pipes_ends_with_its_run(programs, sandbox, place):
    done, took = contained_run(programs["daemon"], sandbox, 10, place)
    assert done.exit_code == 0 and "launcher done" in done.stdout and not done.timed_out
    assert took < 5, f"the run waited {took:.1f} s for a daemon that held its pipes"
    assert done.others >= 1 and done.left == 0
    assert running(programs["daemon"]) == []


def test_a_double_forked_grandchild_ends_with_its_run(programs, sandbox, place):
    done, took = contained_run(programs["double_fork"], sandbox, 10, place)
    assert done.exit_code == 0 and took < 5 and done.others >= 1
    assert running(programs["double_fork"]) == []


def test_a_fork_bomb_ends_at_its_time_limit_and_leaves_nothing(programs, sandbox, place):
    done, took = contained_run(programs["fork_bomb"], sandbox, 2, place)
    assert done.timed_out and took < 2 + process.CONTAIN_PATIENCE_S + 2, took
    assert running(programs["fork_bomb"]) == []
    if sandbox.switches_user:
        assert processes_of(sandbox.uid) == [] and ended_leftovers(sandbox) == []


def test_a_fork_bomb_of_sessions_ends_at_its_time_limit_and_leaves_nothing(programs, sandbox, place):
    done, took = contained_run(programs["session_bomb"], sandbox, 2, place)
    assert done.timed_out and took < 2 + process.CONTAIN_PATIENCE_S + 2, took
    assert done.left == 0 and running(programs["session_bomb"]) == []
    if sandbox.switches_user:
        assert processes_of(sandbox.uid) == [] and ended_leftovers(sandbox) == []


def test_the_cpu_time_of_a_child_never_waited_for_is_counted(programs, sandbox, place):
    done, _ = contained_run(programs["cpu_child"], sandbox, 10, place)
    assert done.exit_code == 0 and done.others == 1
    assert done.others_cpu_s > 0.3, done  # it computed for 0.6 s, on a core it may share
    assert running(programs["cpu_child"]) == []


def test_a_run_stopped_from_outside_ends_whole(programs, sandbox, place):
    import threading

    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()  # while its child computes and the launcher sleeps
    work = Path(tempfile.mkdtemp(dir=place))
    sandbox.own(work)
    done = process.run([programs["cpu_child"]], 30, cwd=work, sandbox=sandbox, cancel=cancel)
    assert done.stopped == process.CANCELLED and running(programs["cpu_child"]) == []


def test_no_run_can_dump_core(sandbox, place):
    """A core dump of a CUDA process can be gigabytes: every run starts with
    core dumps off, the hard limit too, so that it cannot turn them on again,
    whether it runs in the sandbox, with a trusted program in front, or alone."""
    work = Path(tempfile.mkdtemp(dir=place))
    sandbox.own(work)
    limits = ["sh", "-c", "ulimit -c; ulimit -H -c"]
    for kind, kwargs in (("sandboxed", {"sandbox": sandbox}), ("outside", {"sandbox": sandbox, "outside": ["env"]}),
                         ("alone", {})):
        done = process.run(limits, 10, cwd=work, **kwargs)
        assert done.exit_code == 0 and done.stdout.split() == ["0", "0"], (kind, done)


def test_a_grader_does_not_take_a_sandbox_user_another_holds(tmp_path):
    base = sandbox_for_this_process()
    if not base.switches_user:
        pytest.skip("skipped: not root, so gradings run as this user and hold none")
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from tilelab.system.sandbox import sandbox_for_this_process; "
         "from tilelab.system.sandbox_users import hold_users; "
         "held = hold_users(sandbox_for_this_process(), 1, Path(sys.argv[1])); "
         "print(held[0].sandbox.user, flush=True); time.sleep(60)", str(tmp_path)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "grader")})
    try:
        theirs = other.stdout.readline().strip()
        mine = hold_users(base, 2, tmp_path)
        assert theirs and len(mine) == 2 and theirs not in {h.sandbox.user for h in mine}
        for held in mine:
            held.release()
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()
    # Its holder gone, the user is free again.
    again = hold_users(base, 1, tmp_path)
    assert again and again[0].sandbox.user == theirs
    again[0].release()


@contextmanager
def grading_of_the_solutions(tmp_path):
    """A grading opened as `tilelab grade` opens one, with no sandbox given; closed at the end."""
    from tilelab.grading.context import open_grading
    from tilelab.grading.options import GradeOptions

    g = open_grading(ROOT / "solutions", GradeOptions.for_tree(ROOT, built_tree(), tmp_path / "out"))
    try:
        yield g
    finally:
        g.close()


def root_sandbox():
    base = sandbox_for_this_process()
    if not base.switches_user:
        pytest.skip("skipped: not root, so gradings run as this user and hold none")
    return base


def test_a_grading_given_no_sandbox_holds_a_user_no_other_grader_holds(tmp_path):
    """`tilelab grade` (and a platform's grading) runs as a sandbox user it
    holds host-wide, as a batch's and a worker's slots do: their clean-up
    between two gradings ends every process of their users. The hold goes
    with the grading's end."""
    other = subprocess.Popen(  # another grader on this host, holding the first free user (the real lock folder)
        [sys.executable, "-c", "import time; from tilelab.system.sandbox import sandbox_for_this_process; "
         "from tilelab.system.sandbox_users import hold_users; "
         "held = hold_users(sandbox_for_this_process(), 1); print(held[0].sandbox.user if held else '', flush=True); "
         "time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "grader")})
    try:
        theirs = other.stdout.readline().strip()
        if not theirs:
            pytest.skip("skipped: every sandbox user of this host is held by another grader")
        with grading_of_the_solutions(tmp_path) as g:
            mine = g.sandbox.user
            assert g.held_user is not None and mine != theirs
            assert _flocked_by_this_process(LOCK_DIR / f"{mine}.lock")
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()
    # The grading over, this process holds its user no longer (another grader on the host may take it at once,
    # so the lock table says so, not a try to take it).
    assert not _flocked_by_this_process(LOCK_DIR / f"{mine}.lock")


def test_a_released_user_is_free_though_a_child_forked_while_it_was_held_lives_on(tmp_path):
    """A child forked while the user was held (a trusted harness service starting beside the grading's end)
    has a copy of the lock file until it runs its program: the hold still ends with release()."""
    base = root_sandbox()
    held = hold_users(base, 1)
    if not held:
        pytest.skip("skipped: every sandbox user of this host is held by another grader")
    user = held[0].sandbox.user
    child = os.fork()
    if child == 0:
        time.sleep(30)
        os._exit(0)
    try:
        held[0].release()
        assert not _flocked_by_this_process(LOCK_DIR / f"{user}.lock")
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def _flocked_by_this_process(path: Path) -> bool:
    """Whether /proc/locks lists a flock of this process on `path` (an open file of any child counts too)."""
    inode = os.stat(path).st_ino
    for line in Path("/proc/locks").read_text().split("\n"):
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[4] == str(os.getpid()) \
                and fields[5].rsplit(":", 1)[-1] == str(inode):
            return True
    return False


def test_a_grading_that_finds_every_user_held_runs_as_the_first_and_says_so(tmp_path):
    base = root_sandbox()
    every = hold_users(base, 10_000)  # as other graders would
    try:
        with grading_of_the_solutions(tmp_path) as g:
            assert g.held_user is None and g.sandbox.user == base.user
            assert any("no sandbox user of this host was free to hold" in note for note in g.staff_notes)
    finally:
        for held in every:
            held.release()


def test_a_self_test_that_finds_every_user_held_says_so(tmp_path):
    """Its gradings then run as the first user, beside the graders that hold it."""
    from tilelab.selftest.handins import run_selftest

    base = root_sandbox()
    every = hold_users(base, 10_000)  # as other graders would
    said = []
    try:
        rows, _ = run_selftest(ROOT, built_tree(), tmp_path / "out", names=("answers-all-correct",), jobs=1,
                               echo=said.append)
    finally:
        for held in every:
            held.release()
    assert any("no sandbox user of this host was free to hold" in line
               and f"the self-test's gradings run as {base.user}" in line for line in said), said
    assert rows and all(row.ok for row in rows)


def test_a_held_users_leftovers_are_ended_before_it_grades(tmp_path):
    base = sandbox_for_this_process()
    if not base.switches_user:
        pytest.skip("skipped: not root, so there is no sandbox user to clear")
    held = hold_users(base, 1, tmp_path)[0]
    sandbox = held.sandbox
    left = subprocess.Popen(["setpriv", f"--reuid={sandbox.uid}", f"--regid={sandbox.gid}", "--clear-groups", "--",
                             "sleep", "600"], start_new_session=True)
    deadline = time.monotonic() + 5
    while left.pid not in processes_of(sandbox.uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left.pid in processes_of(sandbox.uid)
    assert ended_leftovers(sandbox) == []
    assert processes_of(sandbox.uid) == [] and not Path(f"/proc/{left.pid}").exists()  # killed, and reaped
    left.poll()
    held.release()


def test_every_run_but_a_timed_one_takes_its_users_share_of_the_cpus(sandbox, place):
    """A fork bomb's processes hold every CPU they can until their run ends: each sandbox user's runs, their
    container and all, join that user's CPU group (system/cpu_groups.py), so the bomb takes its user's share and
    the other slots keep theirs. A timed run stays outside, with the priority it had."""
    from tilelab.system import cpu_groups

    if sandbox.cpu_group is None:
        pytest.skip("skipped: no CPU group here (not root, or the host lets root make none)")
    group = f"/{cpu_groups.GROUP}/{sandbox.user}"

    def groups_of_a_run(background: bool) -> list:
        work = Path(tempfile.mkdtemp(dir=place))
        sandbox.own(work)
        done = process.run(["cat", "/proc/self/cgroup"], 10, cwd=work, sandbox=sandbox, background=background)
        assert done.exit_code == 0, done
        return [line.split(":", 2)[2] for line in done.stdout.splitlines() if line.count(":") >= 2]

    assert group in groups_of_a_run(background=True)
    assert group not in groups_of_a_run(background=False)
    # All of them together weigh as one process at the lowest priority, as each background run did alone
    # (nice 19): a timed run outside keeps its priority over them.
    weights = {name: (sandbox.cpu_group.parent.parent / name) for name in cpu_groups.LOWEST}
    (name, path), = [(n, p) for n, p in weights.items() if p.is_file()]
    assert path.read_text().strip() == cpu_groups.LOWEST[name]
