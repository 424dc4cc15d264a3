"""The student's check loop: `tilelab check --watch` checks again on each
save and names the verdicts that changed, in a terminal (redrawn in place)
and in a pipe; Ctrl-C leaves with exit status 0. An unchanged check shows
its last result without running anything, and its key changes with
everything that decides the result. `--verbose` says where the time went."""

import fcntl
import json
import os
import pty
import queue
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from test_grading_run import build_dir

import grade_fixtures as fixtures
from tilelab.grading.options import GradeOptions
from tilelab.operations import check_cache
from tilelab.operations.check_watch import STOPPED, signature, watched_files
from tilelab.grading.sanitizer import CHECKED_TOGETHER
from tilelab.outputs.check_breakdown import breakdown_lines
from tilelab.outputs.check_changes import changes, changes_line
from traffic_fixtures import traffic_result

ROOT = Path(__file__).resolve().parents[2]
BROKEN = "\nint broken(\n"  # nvcc: "expected an expression"
STEP_S = 120  # the longest a step may take: a compile on a busy two-core machine


def _student_folder(tmp_path: Path) -> Path:
    """A student's folder whose naive.cu is correct (the solution)."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "starter", work)
    shutil.copy(ROOT / "solutions" / "naive.cu", work / "naive.cu")
    return work


def _env(tmp_path: Path) -> dict:
    return {"PATH": "/usr/bin:/bin:/usr/local/cuda/bin", "PYTHONPATH": str(ROOT / "grader"), "COLUMNS": "160",
            "PYTHONUNBUFFERED": "1", "TILELAB_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}


def _watch_command(work: Path, tmp_path: Path) -> list:
    return [sys.executable, "-m", "tilelab.cli", "--root", str(ROOT), "check", "--watch", "naive", "--fast",
            "--dir", str(work), "--build", str(build_dir()), "--out", str(tmp_path / "out")]


class _Output:
    """What a process printed, read as it comes."""

    def __init__(self, read) -> None:
        self.text = ""
        self._chunks: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(read,), daemon=True).start()

    def _pump(self, read) -> None:
        while True:
            try:
                chunk = read()
            except OSError:  # a pty whose other end closed
                chunk = b""
            self._chunks.put(chunk)
            if not chunk:
                return

    def wait_for(self, needle: str, count: int = 1, timeout: float = STEP_S) -> str:
        deadline = time.monotonic() + timeout
        while self.text.count(needle) < count:
            try:
                chunk = self._chunks.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                chunk = None
            if chunk:
                self.text += chunk.decode("utf-8", "replace")
            elif time.monotonic() > deadline or chunk == b"":
                raise AssertionError(f"no {needle!r} (x{count}) in the output:\n{self.text[-3000:]}")
        return self.text


def _watch_in_a_pipe(tmp_path: Path) -> tuple:
    """A watch of a student's folder (_student_folder) started in a session of its own, printing to a pipe:
    (the folder, the process, its _Output)."""
    work = _student_folder(tmp_path)
    proc = subprocess.Popen(_watch_command(work, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=_env(tmp_path), start_new_session=True)
    return work, proc, _Output(lambda: proc.stdout.read1(65536))


def test_watch_in_a_pipe_rechecks_each_save_names_the_changes_and_leaves_on_ctrl_c(tmp_path):
    work, proc, out = _watch_in_a_pipe(tmp_path)
    try:
        waiting = "waiting for a save"
        out.wait_for(waiting)
        good = (work / "naive.cu").read_text()
        (work / "naive.cu").write_text(good + BROKEN)
        out.wait_for("since the last save: naive build: ok -> FAIL")
        out.wait_for(waiting, 2)
        assert "naive.cu does not compile" in out.text
        (work / "naive.cu").write_text(good)
        text = out.wait_for("since the last save: naive build: FAIL -> ok")
        out.wait_for(waiting, 3)
        # A save of the same bytes (an editor's "save" without an edit) is shown at once, unchanged.
        (work / "naive.cu").write_text(good)
        text = out.wait_for("since the last save: no verdict changed")
        assert "unchanged since the check at" in text
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = out.wait_for(STOPPED)
    assert "Traceback" not in text
    if json.loads((tmp_path / "out" / "grade.json").read_text())["gpu"] is None:
        # Said once, not on every save.
        assert text.count("No CUDA device here: on each save the static checks and the build run") == 1


def _stat(pid) -> list:
    """/proc/PID/stat's fields after the command's name (state, parent, ...); [] once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _running(pid) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def _services_of(pid: int) -> list:
    """The trusted harness services (`tilelab-harness --serve-jobs`) that process `pid` started and that still run."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            serves = b"--serve-jobs" in (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = _stat(entry.name)
        if serves and fields and fields[0] != "Z" and int(fields[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def test_watch_keeps_the_harness_services_from_one_save_to_the_next_and_ends_them_on_ctrl_c(tmp_path):
    work, proc, out = _watch_in_a_pipe(tmp_path)
    try:
        waiting = "waiting for a save"
        out.wait_for(waiting)
        first = _services_of(proc.pid)
        assert first, "the check started no trusted harness service"
        (work / "naive.cu").write_text((work / "naive.cu").read_text() + "\n// saved again\n")
        out.wait_for(waiting, 2)
        assert "took" in out.text.rsplit("checked at", 1)[1]  # checked again, not shown as unchanged
        assert _services_of(proc.pid) == first
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(map(_running, first)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in first if _running(pid)]
    assert not left, f"services still running after the watch ended: {left}"


def test_watch_in_a_terminal_redraws_in_place_and_ctrl_c_leaves_cleanly(tmp_path):
    work = _student_folder(tmp_path)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))

    def controlling_terminal() -> None:  # the pty becomes the child's terminal, as a shell's is
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = dict(_env(tmp_path), TERM="xterm-256color")
    env.pop("COLUMNS")
    proc = subprocess.Popen(_watch_command(work, tmp_path), stdin=slave, stdout=slave, stderr=slave, env=env,
                            preexec_fn=controlling_terminal)
    os.close(slave)
    out = _Output(lambda: os.read(master, 65536))
    try:
        out.wait_for("waiting for a save")
        (work / "naive.cu").write_text((work / "naive.cu").read_text() + BROKEN)
        text = out.wait_for("naive build: ok -> FAIL")
        assert "\x1b[1A" in text  # the view is redrawn where it was (cursor up), not printed again below
        os.write(master, b"\x03")  # Ctrl-C, through the terminal
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in out.wait_for(STOPPED)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def _check(work: Path, tmp_path: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilelab.cli", "--root", str(ROOT), "check", "naive", "--fast",
                           "--dir", str(work), "--build", str(build_dir()), "--out", str(tmp_path / "out"), *extra],
                          capture_output=True, text=True, env=_env(tmp_path), timeout=STEP_S)


def _verdicts(out: Path) -> list:
    graded = json.loads((out / "grade.json").read_text())
    return [(p["id"], {n: s["status"] for n, s in p["stages"].items()}, [(c["name"], c["passed"]) for c in p["cases"]])
            for p in graded["parts"]]


def test_an_unchanged_check_shows_its_last_result_and_runs_nothing_until_asked_again(tmp_path):
    work = _student_folder(tmp_path)
    first = _check(work, tmp_path)
    assert "unchanged since" not in first.stdout and "Traceback" not in first.stderr
    verdicts = _verdicts(tmp_path / "out")
    started = "... static checks, then the build"  # what every grading of a part says first
    assert started in first.stderr
    second = _check(work, tmp_path)
    assert second.returncode == first.returncode
    assert "unchanged since the check at" in " ".join(second.stdout.split()) and "--again" in second.stdout
    assert _verdicts(tmp_path / "out") == verdicts and started not in second.stderr
    # The table is the same one.
    assert first.stdout.split("report:")[0] == second.stdout.split("unchanged since")[0]
    kept = tmp_path / "cache" / check_cache.RESULTS_DIR
    assert kept.stat().st_mode & 0o777 == 0o700 and len(list(kept.glob("*.json"))) == 1
    again = _check(work, tmp_path, "--again")
    assert "unchanged since" not in again.stdout and started in again.stderr
    assert _verdicts(tmp_path / "out") == verdicts
    # An edit is a new check.
    (work / "naive.cu").write_text((work / "naive.cu").read_text() + "// an edit\n")
    assert "unchanged since" not in _check(work, tmp_path).stdout


def test_the_checks_key_changes_with_what_decides_the_result_and_with_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    work = _student_folder(tmp_path)
    options = GradeOptions.for_tree(ROOT, build_dir(), tmp_path / "out", mode="check", parts=("naive",),
                                    questions=False)
    key = check_cache.check_key(work, options)
    assert check_cache.check_key(work, options.replace(out_dir=tmp_path / "elsewhere")) == key
    (work / "tiled.cu").write_text("// a part this check does not read\n")
    (work / "answers.yaml").write_text("# not read without the questions\n")
    assert check_cache.check_key(work, options) == key
    different = [options.replace(sanitizers=False), options.replace(timing=False), options.replace(counters="later"),
                 options.replace(seed=7), options.replace(parts=("naive", "tiled")), options.replace(questions=True)]
    assert len({key} | {check_cache.check_key(work, o) for o in different}) == len(different) + 1
    (work / "naive.cu").write_text((work / "naive.cu").read_text() + " ")
    edited = check_cache.check_key(work, options)
    assert edited != key
    # New measured figures of this machine's GPU (ceilings, a calibration) are new speed targets.
    (tmp_path / "cache").mkdir(exist_ok=True)
    (tmp_path / "cache" / "ceilings-GPU-1.json").write_text("{}")
    assert check_cache.check_key(work, options) != edited
    # Another folder with the same bytes is another hand-in: its notes name its folder.
    copy = tmp_path / "copy"
    shutil.copytree(work, copy)
    assert check_cache.check_key(copy, options) != check_cache.check_key(work, options)


def test_a_result_the_grader_failed_in_is_not_kept_and_a_kept_one_reads_back(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    result = fixtures.grade_result(fixtures.passing_tiled(), fixtures.failing_boundary())
    assert check_cache.worth_keeping(result)
    check_cache.keep("k1", result, {"total": 3.5})
    kept = check_cache.find("k1")
    assert kept.result.to_dict() == result.to_dict() and kept.breakdown == {"total": 3.5}
    assert check_cache.find("k2") is None
    (check_cache.results_dir() / "k3.json").write_text("{not json")
    assert check_cache.find("k3") is None  # unreadable: the check runs
    result.parts[0].stages["speed"].status = "error"
    assert not check_cache.worth_keeping(result)


def test_the_verdicts_that_changed_are_named():
    before = fixtures.grade_result(fixtures.passing_tiled(), fixtures.failing_boundary())
    after = fixtures.grade_result(fixtures.passing_tiled(), fixtures.failing_boundary())
    assert changes(before, after) == [] and changes_line(before, after) == "since the last save: no verdict changed"
    fixed = after.parts[1]
    fixed.cases[1].passed, fixed.stages["correctness"].status, fixed.correctness_score = True, "passed", 15.0
    broken = after.parts[0]
    broken.stages["build"].status = "failed"
    for case in broken.cases:  # behind a failed build: not run, which is no change of its own
        case.passed, case.status = False, "not_run"
    broken.stages["speed"].status, broken.speed_score = "not_run", 0.0
    assert changes(before, after) == ["tiled build: ok -> FAIL", "tiled points: 25/25 -> 15/25",
                                      "boundary case w17: FAIL -> ok", "boundary points: 7.5/20 -> 15/20"]
    assert changes_line(before, after).startswith("since the last save: tiled build: ok -> FAIL; tiled points")
    assert changes_line(None, after) == ""


def test_the_breakdown_names_each_runs_seconds_the_profile_and_the_commands_own():
    result = traffic_result("naive")
    part = result.parts[0]
    for name, seconds in (("build", 1.46), ("correctness", 0.41), ("memcheck", 0.93), ("speed", 1.31)):
        part.stages[name].seconds = seconds
    part.stages["racecheck"].summary = "no shared memory used: nothing to race on"
    part.traffic.seconds, part.traffic.setup_seconds = 0.62, 0.21
    result.spans = {"gpu probe": [0.0, 0.16], "build": [0.01, 1.5], "correctness": [1.6, 2.05],
                    "sanitizers": [1.6, 2.6], "speed": [2.7, 4.05], "waiting to share the GPU": [0.0, 2.7]}
    # Two short waits, at the probe and before the speed stage: their sum is shown, not the span between them.
    result.timings = {"waiting to share the GPU": 0.12}
    lines = breakdown_lines(result, {"startup": 0.3, "key": 0.04, "grading": 4.1, "grade_json": 0.01,
                                     "total": 4.45})
    text = "\n".join(lines)
    phases = [line.split()[0] for line in lines[2:-1] if not line.startswith(" " * 20)]
    assert phases == ["gpu", "waiting", "build", "correctness", "sanitizers", "speed"]
    assert any(line.split()[:5] == ["waiting", "to", "share", "the", "GPU"] and line.split()[-1] == "0.12"
               for line in lines)
    assert "naive 1.46 s (nvcc compile, then link)" in text
    assert "naive memcheck 0.93 s" in text and "naive racecheck: no run (no shared memory" in text
    assert ("naive 1.31 s: its run's start, first call and timed calls 0.69 s, counter profile 0.62 s "
            "(CUPTI's set-up 0.21 s of it)") in text
    assert lines[-1].startswith("the command: 4.45 s: start-up") and "no reports (--report writes them)" in lines[-1]
    # A run of the hand-in's parts together is said as one, not as the part's own.
    part.stages["memcheck"].details = CHECKED_TOGETHER
    text = "\n".join(breakdown_lines(result, {"total": 4.45}))
    assert "naive memcheck: one run of the parts together, 0.93 s" in text and "naive memcheck 0.93" not in text
    # Counters read in one profile with the run's other parts: the part's share of it.
    part.traffic.together = 6
    text = "\n".join(breakdown_lines(result, {"total": 4.45}))
    assert ("counter profile 0.62 s, its share of one profile of 6 parts (CUPTI's set-up 0.21 s of it)") in text


def test_the_watch_reads_the_files_a_check_reads(tmp_path):
    work = _student_folder(tmp_path)
    options = GradeOptions.for_tree(ROOT, ROOT / "build", tmp_path / "out", mode="check", parts=("naive",),
                                    questions=False)
    assert watched_files(work, options) == [work / "naive.cu"]
    everything = watched_files(work, options.replace(parts=(), questions=True))
    assert everything[-1] == work / "answers.yaml" and work / "tiled.cu" in everything
    before = signature([work / "naive.cu", work / "missing.cu"])
    assert before[1] is None
    # The same bytes saved again: a new modification time, so the check runs (and shows the kept result).
    os.utime(work / "naive.cu", ns=(time.time_ns(), (work / "naive.cu").stat().st_mtime_ns + 10**9))
    assert signature([work / "naive.cu", work / "missing.cu"]) != before
