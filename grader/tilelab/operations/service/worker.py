"""`tilelab worker`: grades the queue's submissions on one GPU (or none),
several in flight as `tilelab batch` grades them, through the one grading
entry. It reports its state, GPU, calibration and throughput in
tilelab_workers; a worker that dies has its jobs taken up again by another
(procrastinate's stalled jobs), and the results table takes each
submission's grade once.

It fails safe (worker_health.py): a worker whose environment cannot grade
(sandbox refused, a tool missing, the GPU gone, calibration failed) says it
is unhealthy and why, puts back the job that found it out, takes none until
it can grade again, and checks again every RETRY_S. Each grading runs as a
sandbox user this worker holds alone on the host (system/sandbox_users.py);
what a grading leaves running is ended before the next, and a slot whose
leftovers cannot be ended waits until they are gone.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import os
import queue
import shutil
import signal
import socket
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...grading.model import GradeResult
from ...grading.options import GradeOptions, build_jobs_each
from ...outputs import causes
from ...spec.assignment import load_assignment
from ...system import owned_dirs
from ...system.paths import ASSIGNMENT_FILE
from ...system.sandbox import sandbox_for_this_process
from ...system.sandbox_users import ended_leftovers, leftovers_words
from ..batch.scheduler import hold_slots, worker_slots
from ..grading_run import (EXIT_GRADED, Outputs, counters_not_read, counters_pending, read_counters_later,
                           run_grading)
from . import worker_health
from .publication import kept_answers, read_answers, unpublished_files
from .queue import COUNTERS_PRIORITY, COUNTERS_QUEUE, COUNTERS_TASK, QUEUE, TASK, make_app
from .worker_health import EnvironmentFault

HEARTBEAT_S = 10.0
PUT_BACK_S = 5  # a job put back waits this long, so that a worker that is stopping does not take it again
log = logging.getLogger("tilelab.worker")


@dataclass(frozen=True)
class WorkerSettings:
    root: Path
    build_dir: Path
    database_url: str
    gpu: Optional[str]  # a CUDA_VISIBLE_DEVICES value, or None: no GPU (the GPU stages are reported as not run)
    in_flight: Optional[int] = None  # default: batch's, as the sandbox users allow
    scratch: Optional[Path] = None  # where hand-ins are unpacked and graded (default: a temporary folder)
    stalled_after_s: float = 30.0
    worker_name: Optional[str] = None  # default: HOST:GPU (HOST:cpu without one)
    # GradeOptions.counters of a grading (not a check): "later" while other submissions wait in the queue,
    # then read by a task of the lowest priority (queue.COUNTERS_TASK); "inline" always.
    counters: str = "inline"

    @property
    def name(self) -> str:
        return self.worker_name or f"{socket.gethostname()}:{self.gpu if self.gpu is not None else 'cpu'}"


class Worker:
    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        # No GPU: whatever this host has, the worker does not use it.
        os.environ["CUDA_VISIBLE_DEVICES"] = settings.gpu if settings.gpu is not None else ""
        self.assignment = load_assignment(settings.root / ASSIGNMENT_FILE)
        self.in_flight = 1
        self.slots: "queue.Queue" = queue.Queue()
        self._held: list = []  # the sandbox users this worker holds, host-wide (empty until it first can grade)
        self._waiting: dict = {}  # slot -> the leftover processes it waits for
        self._note = ""  # for the staff beside a ready state (too few sandbox users, a slot waiting)
        owned_dirs.sweep()  # what a worker killed before it left behind
        self.scratch = Path(settings.scratch or owned_dirs.make(owned_dirs.WORKER))
        self.scratch.chmod(0o711)  # sandbox users pass through to the hand-in being graded, and list nothing
        self._stop = threading.Event()  # the worker is to end (a signal)
        self._problem: Optional[str] = None  # why the worker stopped taking jobs
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._unhealthy: Optional[asyncio.Event] = None
        self._started: dict = {}  # submission -> when this worker took it (time.monotonic), for its log line

    # ------------------------------------------------------------ lifecycle

    def run(self) -> None:
        """Registers, then grades until stopped (SIGINT, SIGTERM: the gradings
        under way finish first), unhealthy whenever its environment cannot grade."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self._stop.set())
        self._record("INSERT INTO tilelab_workers (name, host, gpu, state, in_flight) VALUES (%s, %s, %s, "
                     "'starting', %s) ON CONFLICT (name) DO UPDATE SET state = 'starting', reason = NULL, in_flight "
                     "= EXCLUDED.in_flight, started_at = now(), last_seen = now()",
                     (self.settings.name, socket.gethostname(), self.settings.gpu or "", 0))
        beat = threading.Thread(target=self._heartbeat, name="tilelab-worker-heartbeat", daemon=True)
        beat.start()
        from procrastinate import RetryStrategy

        app = make_app(self.settings.database_url)
        # Only a fault of this worker's environment puts a job back; a hand-in's own outcome is recorded.
        app.task(name=TASK, queue=QUEUE, retry=RetryStrategy(retry_exceptions=[EnvironmentFault],
                                                             wait=PUT_BACK_S))(self.grade)
        app.task(name=COUNTERS_TASK, queue=COUNTERS_QUEUE,
                 retry=RetryStrategy(retry_exceptions=[EnvironmentFault], wait=PUT_BACK_S))(self.read_counters)
        try:
            while not self._stop.is_set():
                health = self._check()
                if health.problem is not None:
                    self._record("UPDATE tilelab_workers SET state = 'unhealthy', reason = %s, last_seen = now() "
                                 "WHERE name = %s", (health.problem[:1000], self.settings.name))
                    log.warning("unhealthy, taking no jobs: %s (checking again in %.0f s)", health.problem,
                                worker_health.RETRY_S)
                    self._stop.wait(worker_health.RETRY_S)
                    continue
                facts = health.facts
                self._record("UPDATE tilelab_workers SET state = 'ready', reason = %s, in_flight = %s, gpu_name = %s, "
                             "gpu_uuid = %s, calibration = %s, last_seen = now() WHERE name = %s",
                             (self._note or None, self.in_flight, facts.get("gpu_name"), facts.get("gpu_uuid"),
                              facts.get("calibration"), self.settings.name))
                log.info("ready: %d in flight%s", self.in_flight,
                         f" on {facts['gpu_name']}" if facts.get("gpu_name") else " (no GPU)")
                self._problem = None
                try:
                    asyncio.run(self._serve(app))
                except Exception as e:  # noqa: BLE001 - the queue's database went away, say: not a reason to end
                    log.exception("the queue failed")
                    self._problem = f"its queue failed: {type(e).__name__}: {e}"
                    self._stop.wait(worker_health.RETRY_S)
                if self._problem is None:
                    break  # stopped by a signal
        finally:
            self._stop.set()
            self._record("UPDATE tilelab_workers SET state = 'stopped' WHERE name = %s", (self.settings.name,))
            for held in self._held:
                held.release()
            if self.settings.scratch is None:
                shutil.rmtree(self.scratch, ignore_errors=True)

    def _health(self) -> worker_health.Health:
        return worker_health.check(self.settings.root, self.settings.build_dir, self.assignment, self.settings.gpu,
                                   self.scratch)

    def _check(self) -> worker_health.Health:
        """The environment; the first time it can grade, the sandbox users this worker holds."""
        health = self._health()
        if health.problem is None and not self._held:
            gpus = [self.settings.gpu] if self.settings.gpu is not None else []
            try:
                sandbox = sandbox_for_this_process()
                self.in_flight, note, self._held = hold_slots(gpus, 1, sandbox, self.settings.in_flight)
            except Exception as e:  # noqa: BLE001 - a TilelabError names the fix; anything else is as much the host's
                return worker_health.Health(str(e))
            self._note = note or ""
            if note:
                log.warning(note)
            for slot in worker_slots(gpus, 1, sandbox, self.in_flight, users=[h.sandbox for h in self._held]):
                self.slots.put(slot)
        return health

    async def _serve(self, app) -> None:
        """Takes jobs until a signal stops the worker or a grading finds its environment broken."""
        self._loop = asyncio.get_running_loop()
        self._unhealthy = asyncio.Event()
        async with app.open_async():
            serving = asyncio.create_task(app.run_worker_async(
                # Counters need a GPU: a worker without one would only say that none could be had.
                queues=[QUEUE] + ([COUNTERS_QUEUE] if self.settings.gpu is not None else []),
                concurrency=self.in_flight, name=self.settings.name,
                stalled_worker_timeout=self.settings.stalled_after_s,
                update_heartbeat_interval=min(HEARTBEAT_S, self.settings.stalled_after_s / 3)))
            broken = asyncio.create_task(self._unhealthy.wait())
            await asyncio.wait({serving, broken}, return_when=asyncio.FIRST_COMPLETED)
            if broken.done():
                serving.cancel()  # a graceful stop: the gradings under way in other slots finish first
            else:
                broken.cancel()
            try:
                await serving
            except asyncio.CancelledError:
                pass

    def _fall_ill(self, problem: str) -> None:
        """From a grading's thread: stop taking jobs, and check again later."""
        self._problem = problem
        log.warning("unhealthy: %s", problem)
        if self._loop is not None and self._unhealthy is not None:
            self._loop.call_soon_threadsafe(self._unhealthy.set)

    def _record(self, sql: str, params: tuple) -> None:
        import psycopg

        with psycopg.connect(self.settings.database_url, autocommit=True) as conn:
            conn.execute(sql, params)

    def _heartbeat(self) -> None:
        """Says this worker is alive, gives the jobs of workers that are not
        (killed mid-grading, their host gone) back to the queue, and takes
        back a slot once its leftovers are gone."""
        while not self._stop.wait(min(HEARTBEAT_S, self.settings.stalled_after_s / 3)):
            try:
                self._release_cleared_slots()
                self._record("UPDATE tilelab_workers SET last_seen = now(), reason = CASE WHEN state = 'ready' "
                             "THEN %s ELSE reason END WHERE name = %s", (self._ready_note(), self.settings.name))
                asyncio.run(retry_stalled_jobs(self.settings.database_url, self.settings.stalled_after_s))
            except Exception as e:  # noqa: BLE001 - a database away for a moment: the next beat tries again
                log.warning("heartbeat: %s", e)

    def _ready_note(self) -> Optional[str]:
        notes = [self._note] + [leftovers_words(slot.sandbox, pids) for slot, pids in list(self._waiting.items())]
        return "; ".join(n for n in notes if n) or None

    def _release_cleared_slots(self) -> None:
        for slot in list(self._waiting):
            left = ended_leftovers(slot.sandbox)
            if left:
                self._waiting[slot] = left
            else:
                del self._waiting[slot]
                log.info("%s is clean again: its slot grades again", slot.sandbox.user)
                self.slots.put(slot)

    def _give_back(self, slot) -> None:
        """A slot after its grading: cleared of what the hand-in left running, or set aside until it is."""
        left = ended_leftovers(slot.sandbox)
        if not left:
            self.slots.put(slot)
            return
        self._waiting[slot] = left
        log.warning("%s", leftovers_words(slot.sandbox, left))

    # ------------------------------------------------------------ one job

    def grade(self, submission: str) -> None:
        """The task: grades one submission, unless it was cancelled, replaced
        or graded already; a second run of a job whose worker died grades it
        again and the results keep the first that is written. A grading
        that shows this worker's environment broken puts the job back
        (EnvironmentFault: the task's retry) instead of recording it."""
        import psycopg

        url = self.settings.database_url
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "UPDATE tilelab_submissions SET state = 'running', worker = %s, started_at = now(), "
                "attempts = attempts + 1, stage = '' WHERE id = %s AND state IN ('queued', 'running') "
                "RETURNING mode, seed, handin, student", (self.settings.name, submission)).fetchone()
            if row is None:
                return
            mode, seed, digest, student = row
            content, checksum = conn.execute("SELECT content, checksum FROM tilelab_handins WHERE digest = %s",
                                             (digest,)).fetchone()
            conn.execute("UPDATE tilelab_workers SET last_seen = now() WHERE name = %s", (self.settings.name,))
            # A deadline: others wait, and the counters (no points) are read once none does.
            waiting = conn.execute("SELECT EXISTS (SELECT 1 FROM tilelab_submissions WHERE state = 'queued')"
                                   ).fetchone()[0]
        counters = "later" if self.settings.counters == "later" and mode == "grade" and waiting else "inline"
        if hashlib.sha256(content).hexdigest() != checksum:
            self._finish(submission, error="the stored hand-in does not match its checksum")
            return
        slot = self.slots.get()
        self._started[submission] = time.monotonic()
        log.info("%s: taken (%s of %s)", submission, mode, student)
        try:
            with tempfile.TemporaryDirectory(dir=self.scratch) as tmp:
                outcome, files = self._grade_in(Path(tmp), submission, mode, seed, bytes(content), slot, counters)
            if worker_health.grader_failed(outcome, self.settings.gpu):
                self._unless_healthy(submission)
            if files is None:
                self._finish(submission, error=outcome.error or "the grader failed")
            else:
                self._finish(submission, results=files)
                if files["counters_pending"]:
                    self._defer_counters(submission)
        except EnvironmentFault:
            raise
        except Exception as e:  # noqa: BLE001 - the submission must not stay "running": staff see why it failed
            log.exception("grading %s failed", submission)
            self._unless_healthy(submission)
            self._finish(submission, error=f"the worker failed: {type(e).__name__}: {e}")
        finally:
            self._give_back(slot)

    def _unless_healthy(self, submission: str) -> None:
        """After a grading the grader failed: when the environment is to blame,
        the submission goes back to the queue and the worker stops taking jobs."""
        health = self._health()
        if health.problem is None:
            return
        self._record("UPDATE tilelab_submissions SET state = 'queued', worker = NULL, stage = '', started_at = NULL "
                     "WHERE id = %s AND state = 'running'", (submission,))
        self._started.pop(submission, None)
        log.warning("%s: put back in the queue: this worker cannot grade (%s)", submission, health.problem)
        self._fall_ill(health.problem)
        raise EnvironmentFault(health.problem)

    def _grade_in(self, tmp: Path, submission: str, mode: str, seed: int, content: bytes, slot,
                  counters: str = "inline") -> tuple:
        """(the grading's outcome, the files to record, or None where the grader failed)."""
        hand_in, out = self._unpacked(tmp, content), tmp / "out"
        options = self._options(out, mode, seed, counters)
        outcome = run_grading(hand_in, options, Outputs(), progress=lambda stage: self._stage(submission, stage),
                              echo=lambda line: None, sandbox=slot.sandbox, gpu_lock=slot.gpu_lock)
        if outcome.code != EXIT_GRADED:
            return outcome, None
        return outcome, self._files(outcome.result, out, hand_in, mode)

    @staticmethod
    def _unpacked(tmp: Path, content: bytes) -> Path:
        """The stored hand-in's files in tmp/hand-in, readable by the sandbox user."""
        hand_in = tmp / "hand-in"
        hand_in.mkdir()
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            for name in archive.namelist():  # written by uploads.HandIn.to_zip: plain, known names only
                (hand_in / Path(name).name).write_bytes(archive.read(name))
        for path in [tmp, hand_in, *hand_in.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)  # the sandbox user reads them
        return hand_in

    def _options(self, out: Path, mode: str, seed: int, counters: str = "inline") -> GradeOptions:
        # A check reads answers.yaml for form only, as a student's own copy does:
        # graded against the key, a check would tell a student which answers are right.
        key = None if mode == "grade" else self.scratch / "a-check-has-no-answer-key"
        return GradeOptions.for_tree(self.settings.root, self.settings.build_dir, out, mode=mode, seed=seed,
                                     jobs=build_jobs_each(self.in_flight), answer_key=key, counters=counters)

    def _files(self, result, out: Path, hand_in: Optional[Path], mode: str, kept_view: Optional[dict] = None) -> dict:
        """What a grading written in `out` records in tilelab_results. The
        view before publication shows the hand-in's answers as read: from
        `hand_in`, else from the view kept before (`kept_view`); where neither
        has them it is not written again (None)."""
        from ...outputs import prairielearn

        plot = out / "roofline.png"
        answers = None
        if result.answers is not None:
            answers = read_answers(hand_in, self.assignment) if hand_in is not None else kept_answers(kept_view)
        view = mode == "grade" and (result.answers is None or answers is not None)
        files = {
            "score": result.score, "max_score": result.max_score,
            "gpu": (result.gpu or {}).get("name"),
            "results_json": (out / "results.json").read_text(),
            "prairielearn": json.dumps(prairielearn.results(result, self.assignment, plot if plot.exists() else None)),
            "report_md": (out / "report.md").read_text(), "report_html": (out / "report.html").read_text(),
            "plot_png": plot.read_bytes() if plot.exists() else None,
            "grade_json": (out / "grade.json").read_text(),
            "unpublished": json.dumps(unpublished_files(result, answers, self.assignment,
                                                        plot if plot.exists() else None)) if view else None,
            "outcome": outcome_words(result),
            "counters_pending": counters_pending(out),
        }
        return files

    def _defer_counters(self, submission: str) -> None:
        """The task that reads the counters this grading left for later, below every submission."""
        app = make_app(self.settings.database_url, sync=True)
        with app.open():
            app.configure_task(name=COUNTERS_TASK, queue=COUNTERS_QUEUE, priority=COUNTERS_PRIORITY).defer(
                submission=submission)

    def read_counters(self, submission: str) -> None:
        """The task: the counters that the recorded grading of `submission`
        left for later, read now that no submission waits (its priority),
        and its recorded files written again with them. Its score stays.
        Where reading them fails, or the stored hand-in no longer matches its
        checksum, the files say they could not be read instead of promising
        them (grading_run.counters_not_read); the view a student reads before
        publication is written again from the answers as read that it kept."""
        import psycopg

        url = self.settings.database_url
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT s.mode, s.seed, h.content, h.checksum, r.grade_json, r.unpublished FROM tilelab_submissions s "
                "JOIN tilelab_handins h ON h.digest = s.handin JOIN tilelab_results r ON r.submission = s.id "
                "WHERE s.id = %s", (submission,)).fetchone()
        if row is None:
            return
        mode, seed, content, checksum, grade_json, kept_view = row
        damaged = hashlib.sha256(content).hexdigest() != checksum
        slot = None if damaged else self.slots.get()
        try:
            with tempfile.TemporaryDirectory(dir=self.scratch) as tmp:
                out = Path(tmp) / "out"
                out.mkdir()
                (out / "grade.json").write_text(json.dumps(grade_json))  # jsonb: read back as a dict
                if not counters_pending(out):
                    return  # read already (a job run twice)
                options = self._options(out, mode, seed)
                hand_in, read = None, []
                if damaged:
                    log.warning("%s: its counters are not read: the stored hand-in does not match its checksum",
                                submission)
                    counters_not_read(options, Outputs())
                else:
                    hand_in = self._unpacked(Path(tmp), bytes(content))
                    try:
                        read = read_counters_later(hand_in, options, Outputs(), sandbox=slot.sandbox,
                                                   gpu_lock=slot.gpu_lock)
                    except Exception:  # noqa: BLE001 - retried, it would fail the same: the record stops waiting
                        log.exception("%s: its counters could not be read", submission)
                        counters_not_read(options, Outputs())
                files = self._files(GradeResult.from_dict(json.loads((out / "grade.json").read_text())), out,
                                    hand_in, mode, kept_view)
            self._record("UPDATE tilelab_results SET results_json = %s, prairielearn = %s, report_md = %s, "
                         "report_html = %s, plot_png = %s, grade_json = %s, unpublished = COALESCE(%s, unpublished) "
                         "WHERE submission = %s",
                         (files["results_json"], files["prairielearn"], files["report_md"], files["report_html"],
                          files["plot_png"], files["grade_json"], files["unpublished"], submission))
            log.info("%s: counters read (%s)", submission, ", ".join(read) or "none could be")
        finally:
            if slot is not None:
                self._give_back(slot)

    def _stage(self, submission: str, stage: str) -> None:
        import psycopg

        log.info("%s: %s", submission, stage)
        with psycopg.connect(self.settings.database_url, autocommit=True) as conn:
            conn.execute("UPDATE tilelab_submissions SET stage = %s WHERE id = %s AND state = 'running'",
                         (stage[:200], submission))

    def _finish(self, submission: str, results: Optional[dict] = None, error: Optional[str] = None) -> None:
        """Records the outcome once: the first writer of a submission's results wins."""
        import psycopg

        started = self._started.pop(submission, None)
        took = f" in {time.monotonic() - started:.1f} s" if started is not None else ""
        if results is not None:
            log.info("%s: done%s, %.2f / %.2f%s", submission, took, results["score"], results["max_score"],
                     f" on {results['gpu']}" if results["gpu"] else " (no GPU)")
        else:
            log.warning("%s: failed%s: %s", submission, took, error)
        with psycopg.connect(self.settings.database_url) as conn:
            if results is not None:
                written = conn.execute(
                    "INSERT INTO tilelab_results (submission, score, max_score, gpu, results_json, prairielearn, "
                    "report_md, report_html, plot_png, grade_json, unpublished, outcome, graded_by) VALUES (%s, %s, "
                    "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (submission) DO NOTHING",
                    (submission, results["score"], results["max_score"], results["gpu"], results["results_json"],
                     results["prairielearn"], results["report_md"], results["report_html"], results["plot_png"],
                     results["grade_json"], results["unpublished"], results["outcome"],
                     self.settings.name)).rowcount
                conn.execute("UPDATE tilelab_submissions SET state = 'done', stage = '', finished_at = now() "
                             "WHERE id = %s AND state = 'running'", (submission,))
                conn.execute("UPDATE tilelab_workers SET graded = graded + %s, last_seen = now() WHERE name = %s",
                             (written, self.settings.name))
            else:
                conn.execute("UPDATE tilelab_submissions SET state = 'failed', stage = '', error = %s, "
                             "finished_at = now() WHERE id = %s AND state = 'running'", (error, submission))
                conn.execute("UPDATE tilelab_workers SET failed = failed + 1, last_seen = now() WHERE name = %s",
                             (self.settings.name,))


def outcome_words(result) -> str:
    """What ran, where the score would mislead the staff's dashboard: a check
    scores its public cases only, a grading without a GPU built the parts
    and ran none. "" for a grading on a GPU, whose score says it."""
    built = sum(causes.built(p) for p in result.parts)
    if not result.gpu:
        return f"no GPU: {built} of {len(result.parts)} parts built, none run" if result.parts else "no GPU"
    if result.mode == "check":
        public = [c for p in result.parts for c in p.cases if c.set == "public"]
        return f"check: {sum(c.passed for c in public)} of {len(public)} public cases passed"
    return ""


async def retry_stalled_jobs(url: str, stalled_after_s: float) -> int:
    """Jobs taken by a worker that stopped beating its heart go back to the queue."""
    async with make_app(url).open_async() as app:
        stalled = list(await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=stalled_after_s))
        for job in stalled:
            await app.job_manager.retry_job(job)
            log.warning("job %s of a stalled worker is queued again", job.id)
        return len(stalled)
