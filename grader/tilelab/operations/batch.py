"""`tilelab batch`: a whole class graded on this machine's GPUs, or on a Slurm cluster.

DIR holds one directory per student, named by the student's id. Each is
graded as `tilelab grade` grades it, into OUT/<student>/. Each GPU has
`in_flight` workers, a pipeline: while one hand-in is timed, with the GPU to
itself, the others build on the CPU and then share the GPU for their cases
and sanitizers. A worker's processes see only its GPU (CUDA_VISIBLE_DEVICES
through the sandbox), and each GPU has its own GpuLock, so a timing run
never shares its GPU while other GPUs keep grading. Every hand-in's seed is
drawn before grading starts, so the verdicts do not depend on the order or
the overlap. Without a GPU, `jobs` workers grade everything that needs none
(static checks, build, questions).

A run can be stopped and started again: OUT/<student>/.done is written last,
after every output, and holds a digest of the submission's files, the seed
and what ran: the GPU stages or not, the GPU's name and UUID, the
calibration's fingerprint. A submission whose marker matches is not graded
again, unless it was graded without a GPU and this run has GPUs (--gpus,
CUDA_VISIBLE_DEVICES or `nvidia-smi -L`): a class graded on a CPU node gets
its GPU grades on a GPU node. Another GPU or calibration is no reason, since a
grading's targets are fractions of what the references reach on its own GPU
(the gradebook names both), and a rerun after an interruption grades only
what is left; --force grades everything again. An older marker, without
these fields, reads what ran from grade.json (gpu null: no GPU stages).
OUT/gradebook.csv is rewritten after every submission, so an interruption
loses nothing; its last column says when answers.yaml was missing or unreadable.

When a part is scored against cuBLAS, OUT/leaderboard.csv and
OUT/leaderboard.html rank the class on it (outputs/leaderboard.py), written
once every submission is graded (and by --gradebook-only). Where the board
shows aliases, OUT/.leaderboard-key holds the secret they are drawn with:
keep it, and every later run (and each student's report) gives the same
aliases.

With `--slurm` nothing is graded here: an sbatch array script (one task per
student, each running the grader's container on one GPU) is written instead,
and `--gradebook-only` collects what the tasks wrote.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import hashlib
import io
import json
import math
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..grading.options import build_jobs_each, fresh_seed
from ..grading.model import ESTIMATED_RULE
from ..outputs.gradescope import error_results
from ..outputs.leaderboard import (LEADERBOARD_FILES, alias, class_board, leaderboard_key, leaderboard_parts,
                                   result_from_dict, write_board)
from ..spec.assignment import Assignment, AssignmentError, load_assignment
from ..system.atomic import write_atomically
from ..system.cpu_share import gradings_at_once
from ..system.gpu_lock import GpuLock
from ..system.paths import ASSIGNMENT_FILE, unbuilt_reason
from ..system.sandbox import SANDBOX_USERS, Sandbox, SandboxError, sandbox_for_this_process, side_by_side

DONE_FILE = ".done"
GRADEBOOK_FILE = "gradebook.csv"
SLURM_LOGS = "slurm-logs"
# Where docker/Dockerfile installs the grader; the image sets TILELAB_ROOT beside it.
IMAGE_TILELAB = "/autograder/source/.venv/bin/tilelab"
# Hand-ins graded at once on each GPU. Timing takes the GPU alone and one
# hand-in at a time; while it runs, the others build (CPU) and wait to share
# the GPU for their cases and sanitizers: a pipeline, not a queue.
DEFAULT_IN_FLIGHT = 3
# A student id becomes a directory name, a CSV cell and a word in a shell
# script: letters, digits and . _ + @ - only, not starting with a dot or a
# dash (".", "..", hidden directories, options).
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+@-]{0,127}")
# Names of what batch itself writes into OUT: a student may not take them.
_RESERVED = {GRADEBOOK_FILE, SLURM_LOGS, *LEADERBOARD_FILES}
_GRADER_ERROR_TEST = error_results("")["tests"][0]["name"]
# Paths written into #SBATCH lines and apptainer --bind specs, where quoting
# does not help: ':' and ',' separate bind specs, whitespace ends a directive.
_SLURM_UNSAFE_PATH = re.compile(r"[\s:,'\"\\$`]")

GRADED = "graded"
WITHOUT_GPU = "graded before without a GPU"  # the one reason a matching marker is graded again
GRADER_ERROR = "grader error"
NOT_YET = "skipped: not graded yet"


class BatchError(ValueError):
    """The batch cannot start: bad arguments or a machine that cannot grade."""


@dataclass
class Student:
    name: str
    path: Path
    problem: Optional[str] = None  # why it is skipped, when it is


@dataclass
class Row:
    """One line of the gradebook."""

    student: str
    status: str
    total: Optional[float] = None
    max: Optional[float] = None
    parts: dict = field(default_factory=dict)  # part id -> score
    questions: Optional[float] = None
    seed: Optional[int] = None
    seconds: Optional[float] = None
    gpu: str = ""  # the GPU that graded it
    targets: str = ""  # the full-credit speed targets there, GFLOP/s per part ("naive 4235; tiled 7353")
    answers_problem: str = ""  # why answers.yaml was not read (missing, not valid YAML...), in a few words
    detail: str = ""  # for the summary (a grader error's message); not in the CSV
    resumed: bool = False  # graded by an earlier run
    again: str = ""  # why an earlier run's grading was graded again (regrade_reason); not in the CSV


@dataclass
class BatchSummary:
    rows: list  # of Row, in directory order
    wall_seconds: float
    gradebook: Path
    workers: int = 0  # gradings at a time: GPUs x in_flight, or CPU workers without a GPU
    in_flight: int = 1  # gradings at a time on each GPU
    leaderboards: list = field(default_factory=list)  # the class leaderboards' files written, if any

    @property
    def graded(self) -> int:
        """Graded in this run."""
        return sum(r.status == GRADED and not r.resumed for r in self.rows)

    @property
    def resumed(self) -> int:
        """Graded by an earlier run, not graded again."""
        return sum(r.resumed for r in self.rows)

    @property
    def again(self) -> Counter:
        """Graded again in this run, by reason."""
        return Counter(r.again for r in self.rows if r.again and r.status == GRADED)

    @property
    def errors(self) -> int:
        # Only a successful grading is ever resumed, so these are all from this run.
        return sum(r.status == GRADER_ERROR for r in self.rows)

    @property
    def skipped(self) -> int:
        """Refused (unsafe names) or not graded."""
        return sum(r.status.startswith("skipped") for r in self.rows)

    @property
    def ok(self) -> bool:
        return not self.errors

    def line(self) -> str:
        ran = [r for r in self.rows if r.status in (GRADED, GRADER_ERROR) and r.seconds is not None
               and not r.resumed]
        text = f"{self.graded} graded"
        if self.again:
            text += f" ({_again_text(self.again, 'graded')})"
        if self.resumed:
            text += f", {self.resumed} already graded"
        if self.errors:
            text += f", {self.errors} grader error{'s' if self.errors != 1 else ''}"
        if self.skipped:
            text += f", {self.skipped} skipped"
        text += f" in {_duration(self.wall_seconds)} wall time"
        if ran:
            mean = sum(r.seconds for r in ran) / len(ran)
            text += (f"; {mean:.1f} s per submission on average, "
                     f"{self.wall_seconds / len(ran):.1f} s of wall time each on {self.workers} "
                     f"worker{'s' if self.workers != 1 else ''}")
        return text


@dataclass
class _Worker:
    label: str  # "GPU 0" or "worker 1"
    sandbox: Sandbox
    gpu_lock: GpuLock


# ---------------------------------------------------------------- the class


def find_students(class_dir: Path) -> list:
    """Every subdirectory of DIR, sorted by name; those whose names are not
    safe carry the reason they are skipped. Plain files are not students
    (exports often hold a metadata file beside the submissions)."""
    students = []
    for entry in sorted(class_dir.iterdir(), key=lambda p: p.name):
        if not entry.is_dir():
            continue
        problem = None
        if not _SAFE_NAME.fullmatch(entry.name):
            problem = ("skipped: unsafe directory name (a student id may hold only letters, digits and . _ + @ -, "
                       "and may not start with . or -)")
        elif entry.name in _RESERVED:
            problem = f"skipped: {entry.name!r} is a name batch uses for its own files"
        students.append(Student(entry.name, entry, problem))
    return students


def submission_digest(path: Path) -> str:
    """A digest of every file name and content under `path`. The files are
    the student's: links are hashed as their targets (never followed) and
    FIFOs or devices by their names only (opening one could block)."""
    h = hashlib.sha256()

    def walk(directory: Path, rel: bytes) -> None:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            name = rel + os.fsencode(e.name)
            if e.is_symlink():
                h.update(b"L" + name + b"\0" + os.fsencode(os.readlink(e.path)) + b"\0")
            elif e.is_dir(follow_symlinks=False):
                h.update(b"D" + name + b"\0")
                walk(Path(e.path), name + b"/")
            elif e.is_file(follow_symlinks=False):
                content = hashlib.sha256()
                with open(e.path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        content.update(chunk)
                h.update(b"F" + name + b"\0" + content.digest())
            else:
                h.update(b"O" + name + b"\0")

    walk(path, b"")
    return h.hexdigest()


# ---------------------------------------------------------------- GPUs


def find_gpus(env: Optional[dict] = None) -> list:
    """The GPUs to grade on, as values for CUDA_VISIBLE_DEVICES: those
    CUDA_VISIBLE_DEVICES already names when it is set, else every GPU
    `nvidia-smi -L` lists; [] without a GPU or a driver."""
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        found = []
        for item in visible.split(","):
            item = item.strip()
            # CUDA ignores everything from the first invalid entry on ("-1" hides every GPU).
            if not item or item.startswith("-"):
                break
            found.append(item)
        return found
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    if listing.returncode != 0:
        return []
    # MIG instances are listed indented under their GPU; a worker takes a whole GPU.
    return [m.group(1) for m in re.finditer(r"^GPU (\d+):", listing.stdout, re.MULTILINE)]


def parse_gpus(text: str) -> list:
    """`--gpus 0,2` (indices or UUIDs, as nvidia-smi names them)."""
    gpus = [g.strip() for g in text.split(",")]
    if not gpus or any(not g or not re.fullmatch(r"[A-Za-z0-9_-]+", g) for g in gpus):
        raise BatchError(f"--gpus {text!r}: give GPU indices or UUIDs separated by commas, e.g. 0,2")
    if len(set(gpus)) != len(gpus):
        # Two workers on one GPU would time their runs while the other grades.
        raise BatchError(f"--gpus {text!r} names a GPU twice")
    return gpus


def _workers(gpus: list, jobs: int, sandbox: Sandbox, in_flight: int = 1) -> list:
    """With GPUs: `in_flight` workers per GPU, sharing its lock, each with a
    sandbox user of its own where there are enough (sandbox.side_by_side);
    without: `jobs` workers sharing one lock (should a GPU be there after
    all, with no nvidia-smi on the PATH)."""
    if gpus:
        users = side_by_side(sandbox, len(gpus) * in_flight)
        workers = []
        for i, g in enumerate(gpus):
            # The hand-ins in flight on one GPU share its lock: their correctness
            # and sanitizer runs share the GPU, their timing runs take it in turn.
            lock = GpuLock()
            for slot in range(in_flight):
                own = users[(i * in_flight + slot) % len(users)]
                gpu_sandbox = dataclasses.replace(own, extra_env={**own.extra_env, "CUDA_VISIBLE_DEVICES": g})
                workers.append(_Worker(f"GPU {g}" if in_flight == 1 else f"GPU {g}.{slot + 1}", gpu_sandbox, lock))
        return workers
    lock = GpuLock()
    return [_Worker(f"worker {i + 1}", sandbox, lock) for i in range(jobs)]


def in_flight_for(gpus: list, sandbox: Sandbox, asked: Optional[int]) -> tuple:
    """(hand-ins at a time on each GPU, a note or None). Gradings side by
    side need a sandbox user each, or a fork bomb in one starves the others:
    without enough users the default falls to what they allow; a number the
    TA asked for is kept, with a warning."""
    if not gpus:
        return 1, None
    wanted = asked or DEFAULT_IN_FLIGHT
    users = len(side_by_side(sandbox, len(gpus) * wanted))
    fits = max(1, users // len(gpus))
    if wanted <= fits:
        return wanted, None
    why = (f"{users} sandbox user{'s' if users != 1 else ''} for {len(gpus) * wanted} gradings side by side"
           if sandbox.switches_user else "not root: every grading runs as you, with one process limit")
    if asked is None:
        return fits, (f"grading {fits} hand-in{'s' if fits != 1 else ''} at a time on each GPU ({why}; "
                      f"./scripts/secure-checkout makes {SANDBOX_USERS} as root)")
    return asked, (f"warning: --in-flight {asked} with {why}: a hand-in that exhausts its processes (a fork "
                   "bomb) can make the hand-ins beside it fail to build or run")


# ---------------------------------------------------------------- one submission


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _marker(out: Path) -> Optional[dict]:
    doc = _read_json(out / DONE_FILE)
    return doc if isinstance(doc, dict) else None


def _what_ran(detailed) -> dict:
    """What ran, as a marker records it, from a grading's grade.json (all None, unknown, if it is unreadable)."""
    if not isinstance(detailed, dict):
        return dict.fromkeys(("gpu_stages", "gpu_name", "gpu_uuid", "calibration"))
    gpu, calibration = (detailed.get(k) if isinstance(detailed.get(k), dict) else {} for k in ("gpu", "calibration"))
    return {"gpu_stages": bool(gpu), "gpu_name": gpu.get("name"), "gpu_uuid": gpu.get("uuid"),
            "calibration": calibration.get("fingerprint")}


def regrade_reason(out: Path, gpus: list) -> Optional[str]:
    """Why a grading whose marker matches the files and the seed is graded
    again by a run on `gpus` (find_gpus, --gpus), or None; the module's
    docstring says why "graded before without a GPU" is the only reason."""
    ran = (_marker(out) or {}).get("gpu_stages")
    if not isinstance(ran, bool):  # a marker from before it was recorded
        ran = _what_ran(_read_json(out / "grade.json"))["gpu_stages"]
    return WITHOUT_GPU if ran is False and gpus else None


def _already_graded(out: Path, digest: str, seed: Optional[int]) -> bool:
    """Graded before from these very files, with the seed asked for now (any
    seed when none is asked for: that grading's fresh seed stands)."""
    marker = _marker(out)
    if marker is None or not (out / "results.json").is_file() or not (out / "grade.json").is_file():
        return False
    return marker.get("submission_sha256") == digest and (seed is None or marker.get("seed") == seed)


def collect_row(student: str, out: Path, part_ids: list) -> Row:
    """The gradebook row of what OUT/<student>/ holds, whoever wrote it (this
    batch, an earlier one, `tilelab grade` in a Slurm task)."""
    if not (out / "results.json").is_file():
        return Row(student, "skipped: not graded (no results.json)")
    results = _read_json(out / "results.json")
    if not isinstance(results, dict):
        return Row(student, "skipped: results.json is unreadable")
    tests = results.get("tests")
    if isinstance(tests, list) and tests and isinstance(tests[0], dict) and tests[0].get("name") == _GRADER_ERROR_TEST:
        return Row(student, GRADER_ERROR)
    detailed = _read_json(out / "grade.json")
    if not isinstance(detailed, dict):
        return Row(student, "skipped: grade.json is missing or unreadable (an interrupted grading?)")
    marker = _marker(out) or {}
    try:
        answers = detailed.get("answers")
        # Set where the file as a whole was not read: all question points lost to one typo or a missing file.
        problem = answers.get("status") not in (None, "read") if isinstance(answers, dict) else False
        return Row(
            student, GRADED,
            total=float(detailed["score"]), max=float(detailed["max_score"]),
            parts={p["id"]: float(p["score"]) for p in detailed["parts"] if p["id"] in part_ids},
            questions=float(answers["score"]) if isinstance(answers, dict) else None,
            seed=int(detailed["seed"]),
            seconds=float(marker.get("seconds", detailed.get("seconds", 0.0))),
            gpu=str((detailed.get("gpu") or {}).get("name", "")),
            targets=_targets_cell(detailed.get("calibration")),
            answers_problem=str(answers.get("summary") or answers["status"]) if problem else "",
        )
    except (KeyError, TypeError, ValueError):
        return Row(student, "skipped: grade.json is unreadable")


def _targets_cell(calibration) -> str:
    """The full-credit targets a grading used, as one cell; estimates are
    marked, and a part timed at several sizes names each size."""
    if not isinstance(calibration, dict) or not isinstance(calibration.get("full_credit_from"), dict):
        return ""
    mark = "~" if calibration.get("rule") == ESTIMATED_RULE else ""
    targets = calibration["full_credit_from"]
    sizes = Counter(name.split(" ")[0] for name in targets)
    return "; ".join(f"{name if sizes[name.split(' ')[0]] > 1 else name.split(' ')[0]} {mark}{float(value):.0f}"
                     for name, value in targets.items())


def _grade_one(student: Student, out: Path, seed: int, digest: str, worker: _Worker, ctx: dict,
               progress: Callable[[str], None]) -> Row:
    """One grading through grading_run.run_grading (what `tilelab grade` does),
    with the worker's sandbox and GPU lock: every output, and results.json in
    its autograder-error form when the grader itself fails."""
    from .grading_run import EXIT_GRADED, run_grading

    clock = time.monotonic()
    # What an interrupted or failed earlier grading left must not mix with this one.
    if out.is_symlink() or out.is_file():
        out.unlink()
    elif out.exists():
        shutil.rmtree(out)
    key = ctx.get("leaderboard_key")
    outcome = run_grading(student.path, root=ctx["root"], build_dir=str(ctx["build_dir"]), out_dir=out, seed=seed,
                       answer_key=ctx["answer_key"], echo=progress, gpu_lock=worker.gpu_lock,
                       sandbox=worker.sandbox, jobs=ctx["build_jobs"],
                       leaderboard_alias=alias(student.name, ctx["assignment_name"], key) if key else None)
    if outcome.code != EXIT_GRADED:
        return Row(student.name, GRADER_ERROR, seed=seed, seconds=round(time.monotonic() - clock, 1),
                   detail=outcome.error or "the grader failed")
    # The build trees of a grading that did not switch users: a class of them
    # is gigabytes, and staff/logs keeps what a TA needs.
    shutil.rmtree(out / "work", ignore_errors=True)
    seconds = round(time.monotonic() - clock, 1)
    marker = {"submission_sha256": digest, "seed": seed, "seconds": seconds,
              "graded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              **_what_ran(_read_json(out / "grade.json"))}
    # Last: the marker's presence means every output above is whole.
    write_atomically(out / DONE_FILE, json.dumps(marker, indent=2) + "\n")
    return collect_row(student.name, out, ctx["part_ids"])


# ---------------------------------------------------------------- gradebook


def _cell(x: Optional[float]) -> str:
    return "" if x is None else f"{round(x, 4):g}"


def _student_cell(name: str) -> str:
    # Refused names are written too, so a TA sees them; a leading = + - @
    # would make a spreadsheet read the cell as a formula.
    return "'" + name if name[:1] in ("=", "+", "-", "@") else name


def write_gradebook(path: Path, rows: list, part_ids: list) -> None:
    """Header first, one row per student; replaced whole, never half-written."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["student", "total", "max", *part_ids, "questions", "seed", "status", "seconds", "gpu",
                     "full-credit targets (GFLOP/s)", "answers problem"])
    for r in rows:
        writer.writerow([_student_cell(r.student), _cell(r.total), _cell(r.max),
                         *(_cell(r.parts.get(p)) for p in part_ids), _cell(r.questions),
                         "" if r.seed is None else r.seed, r.status,
                         "" if r.seconds is None else f"{r.seconds:.1f}", r.gpu, r.targets, r.answers_problem])
    write_atomically(path, text.getvalue())


def _alias_key(assignment: Assignment, out_dir: Path) -> Optional[bytes]:
    """The aliases' secret, when a class leaderboard shows aliases."""
    if leaderboard_parts(assignment) and assignment.grading.get("leaderboard_names") == "alias":
        return leaderboard_key(out_dir)
    return None


def write_leaderboards(out_dir: Path, rows: list, assignment: Assignment) -> list:
    """The class leaderboard of each part scored against cuBLAS, from what
    OUT/<student>/grade.json holds: leaderboard.csv and leaderboard.html
    (a second such part's as leaderboard-<part>.*). Returns the files written."""
    parts = leaderboard_parts(assignment)
    if not parts:
        return []
    hand_ins = []
    for r in rows:
        result, why = None, r.status
        if r.status == GRADED:
            doc = _read_json(out_dir / r.student / "grade.json")
            try:
                result = result_from_dict(doc)
            except (AttributeError, KeyError, TypeError, ValueError):
                why = "its grade.json is unreadable"
        hand_ins.append((r.student, result, why))
    key = _alias_key(assignment, out_dir)
    written = []
    for i, part in enumerate(parts):
        written += write_board(class_board(assignment, part, hand_ins, key), out_dir, f"-{part.id}" if i else "")
    return written


def gradebook_only(class_dir: Path, out_dir: Path, *, root: Path) -> BatchSummary:
    """Collects the results already in OUT into OUT/gradebook.csv (and the
    class leaderboard, when there is one); grades nothing."""
    clock = time.monotonic()
    class_dir, out_dir = _check_dirs(class_dir, out_dir)
    assignment = _assignment(root)
    part_ids = [p.id for p in assignment.parts]
    rows = [Row(s.name, s.problem) if s.problem else collect_row(s.name, out_dir / s.name, part_ids)
            for s in find_students(class_dir)]
    rows = [dataclasses.replace(r, resumed=r.status == GRADED) for r in rows]  # all graded by earlier runs
    out_dir.mkdir(parents=True, exist_ok=True)
    write_gradebook(out_dir / GRADEBOOK_FILE, rows, part_ids)
    return BatchSummary(rows, wall_seconds=time.monotonic() - clock, gradebook=out_dir / GRADEBOOK_FILE,
                        leaderboards=write_leaderboards(out_dir, rows, assignment))


# ---------------------------------------------------------------- progress


class _PlainProgress:
    """One line per event, for a log file or a pipe."""

    def __init__(self, total: int, log: Callable[[str], None]) -> None:
        self.total, self.done, self.log = total, 0, log

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def start(self, worker: _Worker, student: str) -> None:
        self.log(f"{worker.label}: grading {student}")

    def stage(self, worker: _Worker, student: str, stage: str) -> None:
        pass  # a line per stage and student would drown the results

    def finished(self, worker: _Worker, row: Row) -> None:
        self.done += 1
        self.log(f"[{self.done}/{self.total}] {row.student}: {_describe(row)} ({worker.label})")

    def idle(self, worker: _Worker) -> None:
        pass

    def note(self, text: str) -> None:
        self.log(text)


class _LiveProgress:
    """A rich progress bar (graded/total, elapsed) with each worker's current
    student and stage beneath it, redrawn in place on a terminal."""

    def __init__(self, total: int, workers: list, console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.text import Text

        lines = {w.label: "idle" for w in workers}
        self._lines = lines

        class _Board(Progress):
            def get_renderables(self):
                yield self.make_tasks_table(self.tasks)
                for label, text in list(lines.items()):
                    yield Text(f"  {label}: {text}", overflow="ellipsis", no_wrap=True)

        self._progress = _Board(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TextColumn("graded"),
                                TimeElapsedColumn(), console=console)
        self._task = self._progress.add_task("grading", total=total)

    def __enter__(self):
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def start(self, worker: _Worker, student: str) -> None:
        self._lines[worker.label] = student

    def stage(self, worker: _Worker, student: str, stage: str) -> None:
        self._lines[worker.label] = f"{student} ({stage})"

    def finished(self, worker: _Worker, row: Row) -> None:
        self._progress.advance(self._task)
        if row.status != GRADED:
            self._progress.console.print(f"{row.student}: {_describe(row)}")

    def idle(self, worker: _Worker) -> None:
        self._lines[worker.label] = "done"

    def note(self, text: str) -> None:
        self._progress.console.print(text)


def _describe(row: Row) -> str:
    if row.status == GRADED:
        text = f"{row.total:g}/{row.max:g} in {row.seconds:.1f} s"
    elif row.status == GRADER_ERROR:
        text = f"grader error ({row.detail})" if row.detail else "grader error"
    else:
        text = row.status
    return f"{text}, graded again: {row.again}" if row.again else text


def _again_text(reasons: Counter, verb: str) -> str:
    """'3 graded again: graded before without a GPU', a clause per reason."""
    return "; ".join(f"{n} {verb} again: {why}" for why, n in reasons.items())


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


# ---------------------------------------------------------------- the batch


def _assignment(root: Path) -> Assignment:
    try:
        return load_assignment(root / ASSIGNMENT_FILE)
    except (AssignmentError, OSError) as e:
        raise BatchError(str(e)) from None


def _check_dirs(class_dir: Path, out_dir: Path) -> tuple:
    class_dir, out_dir = Path(class_dir).resolve(), Path(out_dir).resolve()
    if not class_dir.is_dir():
        raise BatchError(f"{class_dir} is not a directory")
    # OUT inside DIR would be graded as a student, DIR inside OUT could be
    # wiped as one student's old results.
    if out_dir == class_dir or class_dir in out_dir.parents or out_dir in class_dir.parents:
        raise BatchError(f"the results ({out_dir}) and the submissions ({class_dir}) must not contain each other")
    return class_dir, out_dir


def run_batch(
    class_dir: Path,
    *,
    root: Path,
    build_dir: Path,
    out_dir: Path,
    seed: Optional[int] = None,
    gpus: Optional[list] = None,
    jobs: Optional[int] = None,
    in_flight: Optional[int] = None,
    force: bool = False,
    answer_key: Optional[Path] = None,
    sandbox: Optional[Sandbox] = None,
    live: Optional[bool] = None,
    log: Optional[Callable[[str], None]] = None,
) -> BatchSummary:
    """Grades every student of `class_dir` into `out_dir`.

    gpus: values for CUDA_VISIBLE_DEVICES, one worker each (default: find_gpus()).
    jobs: workers when there is no GPU.
    in_flight: hand-ins graded at once on each GPU (default: DEFAULT_IN_FLIGHT, fewer where there are
      not enough sandbox users; in_flight_for).
    sandbox: the sandbox the workers start from (default: sandbox_for_this_process());
      tests pass Sandbox() to grade as themselves. Not a command-line option.
    live: a rich progress display on stderr (default: when stderr is a terminal);
      otherwise plain lines go to `log` (default: stderr).
    """
    clock = time.monotonic()
    class_dir, out_dir = _check_dirs(class_dir, out_dir)
    root, build_dir = Path(root).resolve(), Path(build_dir).resolve()
    assignment = _assignment(root)
    unbuilt = unbuilt_reason(build_dir)
    if unbuilt:
        raise BatchError(unbuilt)
    jobs = gradings_at_once() if jobs is None else jobs
    if jobs < 1 or (in_flight is not None and in_flight < 1):
        raise BatchError("--jobs and --in-flight must be at least 1")
    if sandbox is None:
        try:
            sandbox = sandbox_for_this_process()
        except SandboxError as e:
            raise BatchError(str(e)) from None
    gpus = find_gpus() if gpus is None else list(gpus)
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    in_flight, note = in_flight_for(gpus, sandbox, in_flight)
    if note:
        log(note)
    workers = _workers(gpus, jobs, sandbox, in_flight)
    part_ids = [p.id for p in assignment.parts]
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = {"root": root, "build_dir": build_dir, "answer_key": Path(answer_key).resolve() if answer_key else None,
           "part_ids": part_ids,
           "build_jobs": build_jobs_each(len(workers)),
           "assignment_name": assignment.name,
           "leaderboard_key": _alias_key(assignment, out_dir)}
    gradebook = out_dir / GRADEBOOK_FILE

    students = find_students(class_dir)
    rows: dict = {}
    todo: "queue.Queue" = queue.Queue()
    for s in students:
        if s.problem:
            rows[s.name] = Row(s.name, s.problem)
            log(f"{s.name!r}: {s.problem}")
            continue
        try:
            digest = submission_digest(s.path)
        except OSError as e:
            rows[s.name] = Row(s.name, f"skipped: the submission cannot be read ({e.strerror or e})")
            log(f"{s.name}: {rows[s.name].status}")
            continue
        why = None
        if not force and _already_graded(out_dir / s.name, digest, seed):
            why = regrade_reason(out_dir / s.name, gpus)
            if why is None:
                rows[s.name] = dataclasses.replace(collect_row(s.name, out_dir / s.name, part_ids), resumed=True)
                continue
        rows[s.name] = Row(s.name, NOT_YET)
        # Without --seed every submission gets its own fresh seed, chosen here
        # so that the gradebook has it even when the grader fails.
        todo.put((s, digest, seed if seed is not None else fresh_seed(), why or ""))

    def book() -> None:
        write_gradebook(gradebook, [rows[s.name] for s in students], part_ids)

    book()
    total = todo.qsize()
    where = (", ".join(f"GPU {g}" for g in gpus) + (f" ({in_flight} hand-ins at a time on each)" if in_flight > 1
                                                       else "") if gpus else
             f"{len(workers)} worker{'s' if len(workers) != 1 else ''}, no GPU (GPU stages not run)")
    resumed = sum(r.resumed for r in rows.values())
    again = Counter(item[3] for item in todo.queue if item[3])
    again_text = f" ({_again_text(again, 'to grade')})" if again else ""
    log(f"tilelab batch: {total} to grade{again_text}, {resumed} already graded, on {where}")

    finished: "queue.Queue" = queue.Queue()
    stop = threading.Event()
    use_live = sys.stderr.isatty() if live is None else live
    if use_live:
        from rich.console import Console

        display = _LiveProgress(total, workers, Console(stderr=True))
    else:
        display = _PlainProgress(total, log)

    def work(worker: _Worker) -> None:
        while not stop.is_set():
            try:
                student, digest, student_seed, why = todo.get_nowait()
            except queue.Empty:
                break
            display.start(worker, student.name)
            try:
                row = _grade_one(student, out_dir / student.name, student_seed, digest, worker, ctx,
                                 lambda stage, name=student.name: display.stage(worker, name, stage))
            except Exception as e:  # noqa: BLE001 - e.g. OUT/<student> could not be made: one row, not the batch
                row = Row(student.name, GRADER_ERROR, seed=student_seed, detail=f"{type(e).__name__}: {e}")
            finished.put((worker, dataclasses.replace(row, again=why)))
        display.idle(worker)

    # Daemon threads: a second Ctrl-C leaves at once instead of waiting for them.
    threads = [threading.Thread(target=work, args=(w,), name=f"tilelab-batch {w.label}", daemon=True)
               for w in workers]

    def collect() -> None:
        """Waits for the workers, booking each row as it comes."""
        # A timeout, so that Ctrl-C reaches this thread while it waits.
        while any(t.is_alive() for t in threads) or not finished.empty():
            try:
                worker, row = finished.get(timeout=0.2)
            except queue.Empty:
                continue
            rows[row.student] = row
            display.finished(worker, row)
            book()

    with display:
        for t in threads:
            t.start()
        try:
            collect()
        except KeyboardInterrupt:
            stop.set()
            display.note("interrupted: finishing the gradings under way (Ctrl-C again to leave them unfinished; "
                         "they are graded again next time)")
            try:
                collect()
            except KeyboardInterrupt:
                pass
            book()
            raise

    done = [rows[s.name] for s in students]
    return BatchSummary(done, wall_seconds=time.monotonic() - clock, gradebook=gradebook, workers=len(workers),
                        in_flight=in_flight,
                        leaderboards=write_leaderboards(out_dir, done, assignment))


# ---------------------------------------------------------------- Slurm


def slurm_time_limit(assignment: Assignment) -> int:
    """Seconds one task may take: every time limit of assignment.yaml added up
    as if each part used all of its own (builds one after another, two
    correctness runs and two sanitizers, all run again alone once, the
    timing), plus the ceilings' measurement and starting the container."""
    limits = assignment.grading["time_limits"]
    runs = 2 * limits["correctness"] + 2 * limits["sanitizer"]
    per_part = limits["build"] + 2 * runs + limits["speed"]
    return len(assignment.parts) * per_part + 120 + 600


def _hms(seconds: int) -> str:
    minutes = math.ceil(seconds / 300) * 5  # whole five minutes
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def _image_uri(image: str) -> str:
    """--image as the container runtime takes it: a local .sif file as it is,
    anything with a scheme (docker://, oras://, library://) as it is, a bare
    name as a docker:// image."""
    if image.endswith(".sif"):
        return str(Path(image).resolve())
    return image if "://" in image else f"docker://{image}"


def write_slurm(class_dir: Path, out_dir: Path, script: Path, *, root: Path, image: str,
                seed: Optional[int] = None) -> tuple:
    """Writes the sbatch array script and its student list (next to it);
    returns (script, student list, students refused)."""
    class_dir, out_dir = _check_dirs(class_dir, out_dir)
    script = Path(script).resolve()
    if not image:
        raise BatchError("--slurm needs --image: the grader's container image (e.g. ghcr.io/course/tilelab:2026)")
    uri = _image_uri(image)
    for what, path in (("DIR", class_dir), ("--out", out_dir), ("--slurm", script)):
        if _SLURM_UNSAFE_PATH.search(str(path)):
            raise BatchError(f"{what} {path}: a path in an sbatch script may not hold spaces, quotes, $, ':' "
                             "or ','")
    if re.search(r"[\s'\"\\$`]", uri):
        raise BatchError(f"--image {image!r}: an image name holds no spaces, quotes or $")
    assignment = _assignment(root)
    students = find_students(class_dir)
    refused = [s for s in students if s.problem]
    names = [s.name for s in students if not s.problem]
    if not names:
        raise BatchError(f"{class_dir} holds no student directory to grade")
    student_list = script.with_name(script.stem + ".students.txt")
    script.parent.mkdir(parents=True, exist_ok=True)
    student_list.write_text("".join(f"{n}\n" for n in names))
    # Slurm does not create the directory of --output; a task without it fails unseen.
    (out_dir / SLURM_LOGS).mkdir(parents=True, exist_ok=True)
    seed_args = f" --seed {seed}" if seed is not None else ""
    q = shlex.quote
    text = f"""#!/bin/bash
# Grades the class in {class_dir} on a Slurm cluster: one array task per
# student (the list, one per line, in {student_list.name} next to this script;
# task i grades line i+1), each on one GPU, in the grader's container.
# Written by: tilelab batch {class_dir} --out {out_dir} --slurm {script} --image {image}{seed_args}
#
# Submit:        sbatch {script}
# Logs:          {out_dir / SLURM_LOGS}/<job>_<task>.log
# Results:       {out_dir}/<student>/ (results.json, report.md, report.html, staff/, grade.json)
# Then, on any machine that sees {out_dir}, collect the gradebook:
#                tilelab batch {class_dir} --out {out_dir} --gradebook-only
# Regrade one student: sbatch --array=<its line number - 1> {script}
#
# Each task runs `apptainer (or singularity) exec --nv` on {uri},
# binding only that student's submission (read-only) and results directory:
# no task sees another student's files.
#   --fakeroot  the grader must be root in the container: the image keeps the
#               answer key and the hidden cases from everyone but root, and
#               runs student code as its unprivileged user (tilelab-student).
#               This needs subordinate user ids for you on the nodes
#               (/etc/subuid; ask the cluster's admins); without them every
#               task ends in a grader error saying that user cannot be used.
#   --contain   the host's home and /tmp stay outside; the container's /tmp
#               (the builds) is a fresh directory under $TMPDIR, removed after.
# Each task measures its GPU's ceilings once (the measurement is limited to
# two minutes). A docker:// image is converted to a SIF file by every task:
# for a large class, `apptainer pull tilelab.sif {uri}` once, on shared
# storage, and write this script again with --image /path/to/tilelab.sif.
# {"Every task uses seed " + str(seed) + ", so a regrade reproduces the correctness verdicts."
   if seed is not None else "Each task draws a fresh seed, recorded in its grade.json and in the gradebook."}
# The time limit is every time limit of assignment.yaml added up (no grading
# can take longer); cpus and memory are defaults to adjust to the cluster.
# TILELAB is the grader's command inside the image (default: where
# docker/Dockerfile installs it), e.g. TILELAB="tilelab --root /src" sbatch {script}
#SBATCH --job-name=tilelab-{assignment.name}
#SBATCH --array=0-{len(names) - 1}
#SBATCH --gres=gpu:1
#SBATCH --time={_hms(slurm_time_limit(assignment))}
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --output={out_dir / SLURM_LOGS}/%A_%a.log
set -euo pipefail

class_dir={q(str(class_dir))}
out_dir={q(str(out_dir))}
students={q(str(student_list))}
image={q(uri)}
tilelab=${{TILELAB:-{IMAGE_TILELAB}}}

if [ -z "${{SLURM_ARRAY_TASK_ID:-}}" ]; then
  echo "submit this script with sbatch: SLURM_ARRAY_TASK_ID is not set" >&2
  exit 2
fi
student=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" "$students")
if [ -z "$student" ]; then
  echo "$students has no line $((SLURM_ARRAY_TASK_ID + 1))" >&2
  exit 2
fi
if command -v apptainer >/dev/null 2>&1; then
  runtime=apptainer
elif command -v singularity >/dev/null 2>&1; then
  runtime=singularity
else
  echo "neither apptainer nor singularity is installed on $(hostname)" >&2
  exit 2
fi
mkdir -p "$out_dir/$student"
workdir=$(mktemp -d "${{TMPDIR:-/tmp}}/tilelab-$student-XXXXXX")
trap 'rm -rf "$workdir" 2>/dev/null || true' EXIT
echo "task $SLURM_ARRAY_TASK_ID: grading $student on $(hostname), CUDA_VISIBLE_DEVICES=${{CUDA_VISIBLE_DEVICES:-}}"
# $tilelab is unquoted on purpose: it may be a command with arguments.
"$runtime" exec --nv --fakeroot --contain --workdir "$workdir" \\
  --bind "$class_dir/$student:$class_dir/$student:ro" \\
  --bind "$out_dir/$student:$out_dir/$student" \\
  "$image" $tilelab grade "$class_dir/$student" --out "$out_dir/$student"{seed_args}
"""
    script.write_text(text)
    script.chmod(0o755)
    return script, student_list, refused
