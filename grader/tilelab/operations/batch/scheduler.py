"""Grading a class on this machine: workers per GPU, hand-ins in flight, run_batch.

- Each GPU has `in_flight` workers: while one hand-in is timed, alone on the
  GPU, the others build and then share the GPU for cases and sanitizers.
- A worker's processes see only its GPU, which has its own GpuLock.
- Every seed is drawn before grading starts: verdicts do not depend on order.
- Without a GPU, `jobs` workers grade what needs none (static checks, build,
  questions).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import queue
import re
import shutil
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ...grading.options import GradeOptions, build_jobs_each, fresh_seed
from ...outputs.leaderboard import alias
from ...system.atomic import read_json, write_atomically
from ...system.cpu_share import gradings_at_once
from ...system.gpu_lock import GpuLock, listed_gpus
from ...system.paths import unbuilt_reason
from ...system.sandbox import Sandbox, SandboxError, sandbox_for_this_process
from ...system.sandbox_users import ended_leftovers, hold_users, leftovers_words
from .class_pages import class_pages
from .gradebook import (GRADED, GRADER_ERROR, NOT_YET, BatchSummary, Row, _again_text, _alias_key, collect_row,
                        write_gradebook, write_leaderboards)
from .progress import _LiveProgress, _PlainProgress
from .students import (DONE_FILE, GRADEBOOK_FILE, BatchError, Student, _already_graded, _assignment, _check_dirs,
                       _what_ran, find_students, regrade_reason, submission_digest)

# Hand-ins graded at once on each GPU. Timing takes the GPU alone and one
# hand-in at a time; while it runs, the others build (CPU) and wait to share
# the GPU for their cases and sanitizers: a pipeline, not a queue.
DEFAULT_IN_FLIGHT = 3


@dataclass
class _Worker:
    label: str  # "GPU 0" or "worker 1"
    sandbox: Sandbox
    gpu_lock: GpuLock


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
    return [index for index, _ in listed_gpus()]  # a worker takes a whole GPU


def parse_gpus(text: str) -> list:
    """`--gpus 0,2` (indices or UUIDs, as nvidia-smi names them)."""
    gpus = [g.strip() for g in text.split(",")]
    if not gpus or any(not g or not re.fullmatch(r"[A-Za-z0-9_-]+", g) for g in gpus):
        raise BatchError(f"--gpus {text!r}: give GPU indices or UUIDs separated by commas, e.g. 0,2")
    if len(set(gpus)) != len(gpus):
        # Two workers on one GPU would time their runs while the other grades.
        raise BatchError(f"--gpus {text!r} names a GPU twice")
    return gpus


def worker_slots(gpus: list, jobs: int, sandbox: Sandbox, in_flight: int = 1, users: Optional[list] = None) -> list:
    """With GPUs: `in_flight` workers per GPU, sharing its lock; without:
    `jobs` workers sharing one lock (should a GPU be there after all, with no
    nvidia-smi on the PATH). Each worker runs as one of `users` (the
    sandboxes whose users this process holds: hold_slots), a user of its own
    where there are enough; default: `sandbox` for all."""
    users = users or [sandbox]
    if gpus:
        workers = []
        for i, g in enumerate(gpus):
            # The hand-ins in flight on one GPU share its lock: their correctness
            # and sanitizer runs share the GPU, their timing runs take it in turn.
            lock = GpuLock(g)  # host-wide: another worker or batch on this GPU times in turn with these
            for slot in range(in_flight):
                own = users[(i * in_flight + slot) % len(users)]
                gpu_sandbox = dataclasses.replace(own, extra_env={**own.extra_env, "CUDA_VISIBLE_DEVICES": g})
                workers.append(_Worker(f"GPU {g}" if in_flight == 1 else f"GPU {g}.{slot + 1}", gpu_sandbox, lock))
        return workers
    lock = GpuLock()
    return [_Worker(f"worker {i + 1}", users[i % len(users)], lock) for i in range(jobs)]


def hold_slots(gpus: list, jobs: int, sandbox: Sandbox, asked: Optional[int]) -> tuple:
    """(hand-ins at a time on each GPU, a note or None, the held sandboxes):
    one sandbox user per grading side by side, held host-wide for as long as
    this process grades (system/sandbox_users.py), so that no other worker or
    batch on the host grades as the same user."""
    wanted = (asked or DEFAULT_IN_FLIGHT) * len(gpus) if gpus else jobs
    held = hold_users(sandbox, wanted)
    if not held:
        raise BatchError(f"every sandbox user ({sandbox.user}, {sandbox.user}-2, ...) is held by another grader on "
                         "this host, or runs processes that cannot be ended: stop one, or make more users (as root: "
                         "TILELAB_SANDBOX_USERS=N ./scripts/secure-checkout)")
    in_flight, note = in_flight_for(gpus, sandbox, asked, available=len(held))
    return in_flight, note, held


def in_flight_for(gpus: list, sandbox: Sandbox, asked: Optional[int], available: Optional[int] = None) -> tuple:
    """(hand-ins at a time on each GPU, a note or None). Gradings side by
    side need a sandbox user each, or a fork bomb in one starves the others:
    without enough users (`available`: those free on this host) the default
    falls to what they allow; a number the TA asked for is kept, with a warning."""
    if not gpus:
        return 1, None
    wanted = asked or DEFAULT_IN_FLIGHT
    users = available if available is not None else len(hold_users(sandbox, len(gpus) * wanted))
    fits = max(1, users // len(gpus))
    if wanted <= fits:
        return wanted, None
    why = (f"{users} free sandbox user{'s' if users != 1 else ''} for {len(gpus) * wanted} gradings side by side"
           if sandbox.switches_user else "not root: every grading runs as you, with one process limit")
    more = (" (as root, TILELAB_SANDBOX_USERS=N ./scripts/secure-checkout makes N; other graders on this host hold "
            "theirs)" if sandbox.switches_user else "")
    if asked is None:
        return fits, f"grading {fits} hand-in{'s' if fits != 1 else ''} at a time on each GPU ({why}{more})"
    return asked, (f"warning: --in-flight {asked} with {why}: a hand-in that exhausts its processes (a fork "
                   f"bomb) can make the hand-ins beside it fail to build or run{more}")


@dataclass(frozen=True)
class _ClassGrading:
    """What every hand-in of the class shares."""

    options: GradeOptions  # each hand-in's differ only in out_dir and seed
    part_ids: list
    assignment_name: str
    leaderboard_key: Optional[bytes]  # the aliases' secret, where the board shows aliases

    def outputs_of(self, student: Student):
        """What a hand-in's grading writes: tilelab grade's outputs, with its alias on the class board."""
        from ..grading_run import Outputs

        key = self.leaderboard_key
        return Outputs(leaderboard_alias=alias(student.name, self.assignment_name, key) if key else None)


def _grade_one(student: Student, out: Path, seed: int, digest: str, worker: _Worker, ctx: _ClassGrading,
               progress: Callable[[str], None]) -> Row:
    """One grading as `tilelab grade` does it, with the worker's sandbox and
    GPU lock: every output, and results.json in its autograder-error form
    when the grader itself fails."""
    from ..grading_run import EXIT_GRADED, run_grading

    clock = time.monotonic()
    # What an interrupted or failed earlier grading left must not mix with this one.
    if out.is_symlink() or out.is_file():
        out.unlink()
    elif out.exists():
        shutil.rmtree(out)
    outcome = run_grading(student.path, ctx.options.replace(out_dir=out, seed=seed), ctx.outputs_of(student),
                          progress=lambda m: progress(f"... {m}"), echo=progress, sandbox=worker.sandbox,
                          gpu_lock=worker.gpu_lock)
    if outcome.code != EXIT_GRADED:
        return Row(student.name, GRADER_ERROR, seed=seed, seconds=round(time.monotonic() - clock, 1),
                   detail=outcome.error or "the grader failed")
    # The build trees of a grading that did not switch users: a class of them
    # is gigabytes, and staff/logs keeps what a TA needs.
    shutil.rmtree(out / "work", ignore_errors=True)
    seconds = round(time.monotonic() - clock, 1)
    marker = {"submission_sha256": digest, "seed": seed, "seconds": seconds,
              "graded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              **_what_ran(read_json(out / "grade.json"))}
    # Last: the marker's presence means every output above is whole.
    write_atomically(out / DONE_FILE, json.dumps(marker, indent=2) + "\n")
    return collect_row(student.name, out, ctx.part_ids)


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
    sanitizers: bool = True,
    timing: bool = True,
    counters: str = "inline",
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
    sanitizers, timing: whether those stages run (off, they show as not run):
      what a class costs without them (scripts/bench --class N --stage-costs, --without).
      Only with force: such a grading must not stand for a whole one later.
    counters: GradeOptions.counters; "later": every hand-in is graded first, then each
      hand-in's counters are read and its outputs written again ("off" only with force).
    """
    if not (sanitizers and timing and counters != "off") and not force:
        raise ValueError("a batch that leaves stages out grades every student again (force=True)")
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
    in_flight, note, held = hold_slots(gpus, jobs, sandbox, in_flight)
    if note:
        log(note)
    workers = worker_slots(gpus, jobs, sandbox, in_flight, users=[h.sandbox for h in held])
    shared = Counter(w.sandbox.user for w in workers)
    part_ids = [p.id for p in assignment.parts]
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = _ClassGrading(
        options=GradeOptions.for_tree(root, build_dir, out_dir, jobs=build_jobs_each(len(workers)),
                                      answer_key=Path(answer_key).resolve() if answer_key else None,
                                      sanitizers=sanitizers, timing=timing, counters=counters),
        part_ids=part_ids, assignment_name=assignment.name, leaderboard_key=_alias_key(assignment, out_dir))
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
            # Nothing of a hand-in may run on into the next one's grading as the same user.
            left = ended_leftovers(worker.sandbox) if shared[worker.sandbox.user] == 1 else []
            if left:
                display.note(f"{worker.label}: {leftovers_words(worker.sandbox, left)}; the others grade on")
                break
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

    scored_seconds = time.monotonic() - clock
    if gpus and not stop.is_set():  # this run's counters left for later, and an interrupted run's
        _read_counters_later(students, rows, out_dir, workers, ctx, log, shared)
    for slot in held:
        slot.release()
    done = [rows[s.name] for s in students]
    leaderboards = write_leaderboards(out_dir, done, assignment)
    report, note = class_pages(out_dir, assignment, class_dir, root)
    return BatchSummary(done, wall_seconds=time.monotonic() - clock, gradebook=gradebook, workers=len(workers),
                        in_flight=in_flight, leaderboards=leaderboards, class_report=report, class_report_note=note,
                        scored_seconds=scored_seconds)


def _read_counters_later(students: list, rows: dict, out_dir: Path, workers: list, ctx: _ClassGrading,
                         log: Callable[[str], None], shared: Counter) -> None:
    """Once every hand-in is graded, the counters their gradings left for
    later (grading/counters_later.py), read by the same workers, each hand-in's
    outputs written again; a hand-in an earlier run graded this way too."""
    from ..grading_run import counters_not_read, counters_pending, read_counters_later

    todo: "queue.Queue" = queue.Queue()
    for s in students:
        if rows[s.name].status == GRADED and counters_pending(out_dir / s.name):
            todo.put(s)
    if todo.empty():
        return
    log(f"tilelab batch: every hand-in graded; reading the counters of {todo.qsize()} left for later")

    def work(worker: _Worker) -> None:
        while True:
            try:
                student = todo.get_nowait()
            except queue.Empty:
                return
            options = ctx.options.replace(out_dir=out_dir / student.name)
            try:
                read_counters_later(student.path, options, ctx.outputs_of(student), sandbox=worker.sandbox,
                                    gpu_lock=worker.gpu_lock)
            except Exception as e:  # noqa: BLE001 - one hand-in's counters, not the batch; its report says so
                log(f"{student.name}: its counters could not be read ({type(e).__name__}: {e})")
                counters_not_read(options, ctx.outputs_of(student))
            shutil.rmtree(out_dir / student.name / "work", ignore_errors=True)
            # As between gradings: nothing of one hand-in's runs may run on into the next one's.
            left = ended_leftovers(worker.sandbox) if shared[worker.sandbox.user] == 1 else []
            if left:
                log(f"{worker.label}: {leftovers_words(worker.sandbox, left)}; the others read on")
                return

    threads = [threading.Thread(target=work, args=(w,), name=f"tilelab-batch counters {w.label}", daemon=True)
               for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
