"""`scripts/bench-check`: the student's check loop, timed where a student runs it. A benchmark, not a test.

In a fresh student bundle (`tilelab dist student`, unpacked and set up with
its own scripts/bootstrap, offline from this Python's packages), it times
what a student types: `tilelab check naive` just after an edit, the same
with nothing changed, `--fast` after an edit, an uncoalesced naive
kernel (tests/submissions/naive-uncoalesced), and under `tilelab check
naive --watch` a save to its result on screen; each a few times, the median
kept. Beside them, nvcc alone compiling the part with the build's own
command: the floor of any check that compiles. Each figure is printed
against the goal of the student's loop; `--out` writes them as JSON for
`scripts/measurements --bench-check`. Without a GPU the checks run what
they can (static checks and build) and the GPU figures are said to be not
measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from tilelab.errors import TilelabError

ROOT = Path(__file__).resolve().parents[2]
UNCOALESCED = ROOT / "tests" / "submissions" / "naive-uncoalesced" / "naive.cu"
# Each figure: what is timed, the goal (seconds) and the figure before the loop was made fast (issue 34, H100).
FIGURES = {
    "edited": ("`tilelab check naive` after an edit", 2.5, 4.39),
    "unchanged": ("the same, nothing changed since", 1.0, 2.93),
    "fast": ("`tilelab check naive --fast` after an edit", 1.5, 2.80),
    "uncoalesced": ("an uncoalesced naive kernel, after an edit", 3.5, 6.38),
    "watch": ("under `tilelab check naive --watch`, a save to its result on screen", 2.5, None),
}
WATCH_SHOWN = "waiting for a save"  # the line the watch prints once a check's table is on screen (check_watch.py)
WATCH_LIMIT_S = 120  # a watched check not on screen by then is a failure of the bench
NVCC = "nvcc alone: compiling naive.cu with the build's own command (the floor)"
SAID = "what each check said of naive (its last run): "
# The checks timed that must leave a hint from the counters on a GPU: the uncoalesced kernel's.
HINTED = ("uncoalesced",)


class BenchCheckError(TilelabError):
    """The place to time the checks in could not be set up."""


@dataclass
class Place:
    """Where the checks run: a student bundle, or the project's own tree."""

    kind: str  # "bundle" or "tree"
    root: Path
    build: Path
    command: list  # the `tilelab` command there
    student: Path  # the folder whose naive.cu is edited
    out: Path  # where the checks write grade.json
    note: str = ""

    def check(self, *args) -> list:
        # In the bundle, exactly what a student types; in the tree, a folder and an out dir of the bench's own.
        folder = [] if self.kind == "bundle" else ["--dir", str(self.student), "--build", str(self.build), "--out",
                                                   str(self.out)]
        return [*self.command, "check", "naive", *folder, *args]


@dataclass
class BenchCheck:
    place: str
    note: str
    gpu: Optional[str]  # the GPU's name, None without one
    runs: int
    figures: dict = field(default_factory=dict)  # FIGURES name -> {"median", "runs", "goal", "before"}
    nvcc_seconds: Optional[float] = None
    breakdowns: dict = field(default_factory=dict)  # FIGURES name -> the --verbose lines of its last run
    said: dict = field(default_factory=dict)  # FIGURES name -> what its last check said of naive (verdict_of)
    date: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _student_env() -> dict:
    """This environment without this checkout's grader on PYTHONPATH: a bundle runs its own."""
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT / "grader"]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(kept))


def _python_first(folder: Path) -> dict:
    """An environment whose python3 is this one (bootstrap's offline .venv takes its packages)."""
    folder.mkdir(parents=True, exist_ok=True)
    # A script, not a link: a virtual environment's python finds its packages only under its own path.
    wrapper = folder / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    env = _student_env()
    return dict(env, PATH=f"{folder}{os.pathsep}{env.get('PATH', '')}", TILELAB_OFFLINE="1")


def _run(argv: list, **kw) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        raise BenchCheckError(f"{' '.join(map(str, argv[:4]))} ... failed (exit {done.returncode}):\n{tail}")


def fresh_bundle(work: Path, log: Callable[[str], None], tarball: Optional[Path] = None) -> Place:
    """The student bundle made (`tilelab dist student`) or given, unpacked into `work` and bootstrapped."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'grader'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    if tarball is None:
        log("bench-check: tilelab dist student")
        _run([sys.executable, "-m", "tilelab.cli", "--root", str(ROOT), "dist", "student", "--out",
              str(work / "dist")], env=env)
        tarball = next((work / "dist").glob("*-student.tar.gz"))
    with tarfile.open(tarball) as tar:
        try:
            tar.extractall(work / "unpacked", filter="data")
        except TypeError:  # a Python without extraction filters: the bundle is the course's own
            tar.extractall(work / "unpacked")
    root = next(p for p in (work / "unpacked").iterdir() if p.is_dir())
    log(f"bench-check: {root}/scripts/bootstrap (offline, this Python's packages; the build takes minutes)")
    clock = time.monotonic()
    _run(["./scripts/bootstrap"], cwd=root, env=_python_first(work / "python"))
    log(f"bench-check: bootstrapped in {time.monotonic() - clock:.0f} s")
    return bundle_place(root)


def bundle_place(root: Path) -> Place:
    root = root.resolve()
    if not (root / ".venv" / "bin" / "tilelab").is_file() or not (root / "build").is_dir():
        raise BenchCheckError(f"{root} is not a bootstrapped student bundle (no .venv/bin/tilelab or build/)")
    return Place("bundle", root, root / "build", [str(root / ".venv" / "bin" / "tilelab")], root / "starter",
                 root / "build" / "check")


def tree_place(work: Path, build: Path) -> Place:
    """The project's own tree: its built references make measured speed targets, not the bundle's estimates."""
    student = work / "student"
    shutil.copytree(ROOT / "starter", student)
    command = [sys.executable, "-m", "tilelab.cli", "--root", str(ROOT)]
    return Place("tree", ROOT, build, command, student, work / "out",
                 note="measured in the project's tree, not a student bundle: its speed targets come from its own "
                      "reference solutions, and as root student code runs as the sandbox user")


def _edit(place: Place, source: Path) -> None:
    """naive.cu as `source` with a line of its own: bytes no check or build has seen."""
    (place.student / "naive.cu").write_text(source.read_text() + f"\n// edited at {time.time_ns()}\n")


def _timed_check(place: Place, env: dict, *args) -> tuple:
    clock = time.monotonic()
    done = subprocess.run(place.check(*args, "-v"), capture_output=True, text=True, cwd=place.root, env=env)
    seconds = time.monotonic() - clock
    if "Traceback" in done.stderr or done.returncode not in (0, 1):
        raise BenchCheckError(f"{' '.join(place.check(*args))} failed (exit {done.returncode}): "
                              f"{done.stderr.strip()[-500:]}")
    return round(seconds, 3), done.stdout


def verdict_of(place: Place) -> dict:
    """What the last check said of naive, from its grade.json: its points, the stages it failed and the
    counters' hints."""
    try:
        graded = json.loads((place.out / "grade.json").read_text())
        part = next(p for p in graded["parts"] if p["id"] == "naive")
        failed = [name for name, stage in part["stages"].items() if stage["status"] in ("failed", "error")]
        return {"points": part["score"], "max": part["max_score"], "failed": failed,
                "hints": len(part.get("traffic_hints") or [])}
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as e:
        raise BenchCheckError(f"the check left no grade.json with the part naive in {place.out} ({e})") from None


def said(verdict: dict) -> str:
    """A verdict_of in words: "15 / 15, 1 hint"."""
    words = [f"{verdict['points']:g} / {verdict['max']:g}"]
    if verdict["failed"]:
        words.append("failed: " + ", ".join(verdict["failed"]))
    if verdict["hints"]:
        words.append(f"{verdict['hints']} hint{'s' if verdict['hints'] > 1 else ''}")
    return ", ".join(words)


def said_line(said: dict, what: Callable[[str], str]) -> str:
    """What each check said (BenchCheck.said) in one line; `what(name)`: the words of a figure's name."""
    return SAID + "; ".join(f"{what(name)}: {words}" for name, words in said.items())


def _expect_complete(name: str, verdict: dict) -> None:
    """On a GPU a timed check must be a whole one: a check that failed a stage ended early and measures
    nothing, and the uncoalesced kernel's counters must have given their hint."""
    if verdict["failed"] or (name in HINTED and not verdict["hints"]):
        raise BenchCheckError(f"{FIGURES[name][0]}: the check said {said(verdict)}, where every stage should "
                              f"pass{' and the counters give a hint' if name in HINTED else ''}; the bench times "
                              "whole checks only")


def _breakdown(stdout: str) -> list:
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(("where the time went", "nothing ran"))), None)
    if start is None:
        return []
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("the command:")), len(lines) - 1)
    return lines[start:end + 1]


def nvcc_seconds(place: Place, runs: int) -> Optional[float]:
    """The median of compiling naive.cu alone with the command the build compiles the part with, for this GPU."""
    from tilelab.grading import gpu_ceilings
    from tilelab.grading.build import RecipeError, load_recipes
    from tilelab.spec.assignment import load_assignment
    from tilelab.system.paths import ASSIGNMENT_FILE, tool_path

    naive = load_assignment(place.root / ASSIGNMENT_FILE).part("naive")
    try:
        capability = gpu_ceilings.device_info(tool_path(place.build, "tilelab-roofline"), 60).get("compute_capability")
    except gpu_ceilings.RooflineError:
        capability = None
    try:
        recipe = load_recipes(place.build, [naive], compute_capability=capability)[naive.id]
    except RecipeError:
        return None
    seconds = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(runs):
            clock = time.monotonic()
            done = subprocess.run(recipe.compile_command(place.student / "naive.cu", Path(tmp) / "naive.o"),
                                  capture_output=True, cwd=tmp)
            seconds.append(time.monotonic() - clock)
            if done.returncode != 0:
                return None
    return round(statistics.median(seconds), 3)


def _until_shown(lines: queue.Queue, argv: list, seen: list) -> str:
    """The watch's output read up to its next table on screen (WATCH_SHOWN); that line."""
    deadline = time.monotonic() + WATCH_LIMIT_S
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            tail = "".join(seen[-8:]).strip()
            raise BenchCheckError(f"{' '.join(argv)} showed no result within {WATCH_LIMIT_S} s or ended:\n{tail}")
        seen.append(line)
        if WATCH_SHOWN in line:
            return line.strip()


def watched_saves(place: Place, env: dict, source: Path, runs: int) -> tuple:
    """Under `tilelab check naive --watch`, the seconds from each save of new
    bytes to the watch's table of it on screen, and the watch's last status
    line. The watch prints to a pipe here, one table after another."""
    argv = place.check("--watch")
    watch = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, cwd=place.root, env=dict(env, PYTHONUNBUFFERED="1"))
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in watch.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list = []
    try:
        status = _until_shown(lines, argv, seen)  # the first check, of the file as the last figure left it
        seconds = []
        for _ in range(runs):
            _edit(place, source)
            clock = time.monotonic()
            status = _until_shown(lines, argv, seen)
            seconds.append(round(time.monotonic() - clock, 3))
        return seconds, status
    finally:
        watch.send_signal(signal.SIGINT)  # what a student's Ctrl-C sends
        try:
            watch.wait(10)
        except subprocess.TimeoutExpired:
            watch.kill()
            watch.wait()


def _figure(name: str, seconds: list) -> dict:
    """One FIGURES entry's runs, their median, its goal and the figure before."""
    what, goal, before = FIGURES[name]
    return {"what": what, "median": round(statistics.median(seconds), 3), "runs": seconds, "goal": goal,
            "before": before}


def run_bench_check(place: Place, runs: int, log: Callable[[str], None]) -> BenchCheck:
    env = dict(_student_env() if place.kind == "bundle" else os.environ, COLUMNS="160")
    solution = ROOT / "solutions" / "naive.cu"
    log("bench-check: a first check (a new GPU's ceilings are measured once, not timed)")
    _edit(place, solution)
    _timed_check(place, env)
    graded = json.loads((place.out / "grade.json").read_text())
    gpu = (graded.get("gpu") or {}).get("name")
    found = BenchCheck(place.kind, place.note, gpu, runs, date=datetime.date.today().isoformat())
    plan = (("edited", solution, ()), ("unchanged", None, ()), ("fast", solution, ("--fast",)),
            ("uncoalesced", UNCOALESCED, ()))
    for name, source, args in plan:
        log(f"bench-check: {FIGURES[name][0]} ({runs} times)")
        seconds, stdout = [], ""
        for _ in range(runs):
            if source is not None:
                _edit(place, source)  # else the last check's result was kept: nothing changed since
            took, stdout = _timed_check(place, env, *args)
            if name == "unchanged" and "unchanged since the check at" not in " ".join(stdout.split()):
                raise BenchCheckError("the unchanged check ran again instead of showing its last result: did a "
                                      "file of the grader or of the build change meanwhile?")
            seconds.append(took)
            verdict = verdict_of(place)
            if gpu:
                _expect_complete(name, verdict)
        found.figures[name] = _figure(name, seconds)
        found.breakdowns[name] = _breakdown(stdout)
        found.said[name] = said(verdict)
    log(f"bench-check: {FIGURES['watch'][0]} ({runs} times)")
    seconds, status = watched_saves(place, env, solution, runs)
    found.figures["watch"] = _figure("watch", seconds)
    found.breakdowns["watch"] = [status]
    log("bench-check: nvcc alone")
    _edit(place, solution)
    found.nvcc_seconds = nvcc_seconds(place, runs)
    return found


def format_bench_check(found: BenchCheck) -> str:
    lines = [f"bench-check in {'a fresh student bundle' if found.place == 'bundle' else 'the project tree'}, "
             f"on {found.gpu or 'no GPU'}; the median of {found.runs} runs"]
    if found.note:
        lines.append(f"note: {found.note}")
    if not found.gpu:
        lines.append("no CUDA device: the checks ran their static checks and build only, so the GPU figures were "
                     "not measured; the goals are for a GPU and are not compared")
    wide = max(len(what) for what, _, _ in FIGURES.values()) + 1
    lines.append(f"{'figure':<{wide}}{'s':>7}{'goal':>7}{'before':>8}")
    for name, (what, goal, before) in FIGURES.items():
        f = found.figures.get(name)
        if f is None:
            continue
        verdict = ("met" if f["median"] <= goal else "NOT met") if found.gpu else "no GPU"
        was = f"{before:>8.2f}" if before is not None else f"{'':>8}"
        lines.append(f"{what:<{wide}}{f['median']:>7.2f}{goal:>7.1f}{was}  {verdict}")
    lines.append(f"{NVCC}: " + (f"{found.nvcc_seconds:.2f} s" if found.nvcc_seconds is not None else "not measured"))
    if found.said:
        lines.append(said_line(found.said, lambda name: FIGURES[name][0]))
    for name, breakdown in found.breakdowns.items():
        if breakdown:
            lines += ["", f"{FIGURES[name][0]}, its last run:"] + [f"  {line}" for line in breakdown]
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-check", description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--bundle", type=Path, help="an unpacked, bootstrapped student bundle to time in")
    where.add_argument("--bundle-tar", type=Path, help="a student bundle (NAME-student.tar.gz) to unpack and set up")
    where.add_argument("--tree", action="store_true", help="time in the project's own tree instead of a bundle")
    parser.add_argument("--build", type=Path, default=ROOT / "build", help="with --tree: its built tree")
    parser.add_argument("--runs", type=int, default=3, help="times each figure is measured (the median is kept)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here (for scripts/measurements)")
    parser.add_argument("--keep", action="store_true", help="keep the unpacked bundle (its folder is printed)")
    args = parser.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    work = Path(tempfile.mkdtemp(prefix="tilelab-bench-check-"))
    try:
        if args.bundle:
            place = bundle_place(args.bundle)
        elif args.tree:
            place = tree_place(work, args.build.resolve())
        else:
            place = fresh_bundle(work, log, args.bundle_tar)
        found = run_bench_check(place, max(1, args.runs), log)
    except (BenchCheckError, OSError, StopIteration) as e:
        print(f"bench-check: {e or 'no student bundle was made'}"
              + ("" if args.tree else "; --tree times the checks in the project's tree instead"), file=sys.stderr)
        return 1
    finally:
        if args.keep:
            log(f"bench-check: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(found.to_dict(), indent=2) + "\n")
        print(f"wrote {args.out}")
    print(format_bench_check(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
