"""`tilelab worker`: grades the queue's submissions on one GPU (or none),
several in flight as `tilelab batch` grades them, through the one grading
entry. It calibrates its GPU as it starts and reports its state, GPU,
calibration and throughput in tilelab_workers; a worker that dies has its
jobs taken up again by another (procrastinate's stalled jobs), and the
results table takes each submission's grade once."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import os
import queue
import socket
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...grading.options import GradeOptions, build_jobs_each
from ...spec.assignment import load_assignment
from ...system.paths import ASSIGNMENT_FILE, tool_path
from ...system.sandbox import sandbox_for_this_process
from ..batch.scheduler import in_flight_for, worker_slots
from ..grading_run import EXIT_GRADED, Outputs, run_grading
from .queue import QUEUE, TASK, make_app

HEARTBEAT_S = 10.0
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

    @property
    def name(self) -> str:
        return f"{socket.gethostname()}:{self.gpu if self.gpu is not None else 'cpu'}"


class Worker:
    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        if settings.gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = settings.gpu
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = ""  # no GPU: whatever this host has, the worker does not use it
        self.assignment = load_assignment(settings.root / ASSIGNMENT_FILE)
        sandbox = sandbox_for_this_process()
        gpus = [settings.gpu] if settings.gpu is not None else []
        self.in_flight, note = in_flight_for(gpus, sandbox, settings.in_flight)
        if note:
            log.warning(note)
        slots = worker_slots(gpus, self.in_flight, sandbox, self.in_flight)
        self.slots: "queue.Queue" = queue.Queue()
        for slot in slots:
            self.slots.put(slot)
        self.scratch = Path(settings.scratch or tempfile.mkdtemp(prefix="tilelab-worker-"))
        self.scratch.chmod(0o711)  # sandbox users pass through to the hand-in being graded, and list nothing
        self._stop = threading.Event()

    # ------------------------------------------------------------ lifecycle

    def run(self) -> None:
        """Registers, calibrates, then grades until stopped (SIGINT/SIGTERM: the
        gradings under way finish first)."""
        import psycopg

        with psycopg.connect(self.settings.database_url, autocommit=True) as conn:
            conn.execute("INSERT INTO tilelab_workers (name, host, gpu, state, in_flight) VALUES (%s, %s, %s, "
                         "'starting', %s) ON CONFLICT (name) DO UPDATE SET state = 'starting', in_flight = "
                         "EXCLUDED.in_flight, started_at = now(), last_seen = now()",
                         (self.settings.name, socket.gethostname(), self.settings.gpu or "", self.in_flight))
            facts = self.calibrate()
            conn.execute("UPDATE tilelab_workers SET state = 'ready', gpu_name = %s, gpu_uuid = %s, calibration = %s, "
                         "last_seen = now() WHERE name = %s", (facts.get("gpu_name"), facts.get("gpu_uuid"),
                                                              facts.get("calibration"), self.settings.name))
        beat = threading.Thread(target=self._heartbeat, name="tilelab-worker-heartbeat", daemon=True)
        beat.start()
        app = make_app(self.settings.database_url)
        app.task(name=TASK, queue=QUEUE)(self.grade)
        try:
            app.run_worker(queues=[QUEUE], concurrency=self.in_flight, name=self.settings.name,
                           stalled_worker_timeout=self.settings.stalled_after_s,
                           update_heartbeat_interval=min(HEARTBEAT_S, self.settings.stalled_after_s / 3))
        finally:
            self._stop.set()
            with psycopg.connect(self.settings.database_url, autocommit=True) as conn:
                conn.execute("UPDATE tilelab_workers SET state = 'stopped' WHERE name = %s", (self.settings.name,))

    def calibrate(self) -> dict:
        """The GPU's facts and the fingerprint of its speed basis, measured now
        (cached per GPU); empty without a GPU."""
        from ...grading import calibration, gpu_ceilings

        if self.settings.gpu is None:
            return {}
        tool = tool_path(self.settings.build_dir, gpu_ceilings.TOOL_NAME)
        try:
            device = gpu_ceilings.device_info(tool)
            ceilings = gpu_ceilings.get_ceilings(tool, device=device)
        except gpu_ceilings.RooflineError as e:
            log.warning("no GPU to calibrate: %s", e)
            return {}
        facts = {"gpu_name": device.get("name"), "gpu_uuid": device.get("uuid")}
        if calibration.has_references(self.settings.build_dir, self.assignment):
            try:
                basis, _ = calibration.get_calibration(self.settings.build_dir, self.assignment, device,
                                                       tool_path(self.settings.build_dir, "tilelab-verify"))
                facts["calibration"] = basis.summary(self.assignment, ceilings).get("fingerprint")
            except calibration.CalibrationError as e:
                log.warning("calibration failed: %s", e)
        return facts

    def _heartbeat(self) -> None:
        """Says this worker is alive, and gives the jobs of workers that are
        not (killed mid-grading, their host gone) back to the queue."""
        import psycopg

        while not self._stop.wait(min(HEARTBEAT_S, self.settings.stalled_after_s / 3)):
            try:
                with psycopg.connect(self.settings.database_url, autocommit=True) as conn:
                    conn.execute("UPDATE tilelab_workers SET last_seen = now() WHERE name = %s",
                                 (self.settings.name,))
                asyncio.run(retry_stalled_jobs(self.settings.database_url, self.settings.stalled_after_s))
            except Exception as e:  # noqa: BLE001 - a database away for a moment: the next beat tries again
                log.warning("heartbeat: %s", e)

    # ------------------------------------------------------------ one job

    def grade(self, submission: str) -> None:
        """The task: grades one submission, unless it was cancelled, replaced
        or graded already; a second run of a job whose worker died grades it
        again and the results keep the first that is written."""
        import psycopg

        url = self.settings.database_url
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "UPDATE tilelab_submissions SET state = 'running', worker = %s, started_at = now(), "
                "attempts = attempts + 1, stage = '' WHERE id = %s AND state IN ('queued', 'running') "
                "RETURNING mode, seed, handin", (self.settings.name, submission)).fetchone()
            if row is None:
                return
            mode, seed, digest = row
            content, checksum = conn.execute("SELECT content, checksum FROM tilelab_handins WHERE digest = %s",
                                             (digest,)).fetchone()
            conn.execute("UPDATE tilelab_workers SET last_seen = now() WHERE name = %s", (self.settings.name,))
        if hashlib.sha256(content).hexdigest() != checksum:
            self._finish(submission, error="the stored hand-in does not match its checksum")
            return
        slot = self.slots.get()
        try:
            with tempfile.TemporaryDirectory(dir=self.scratch) as tmp:
                self._grade_in(Path(tmp), submission, mode, seed, bytes(content), slot)
        except Exception as e:  # noqa: BLE001 - the submission must not stay "running": staff see why it failed
            log.exception("grading %s failed", submission)
            self._finish(submission, error=f"the worker failed: {type(e).__name__}: {e}")
        finally:
            self.slots.put(slot)

    def _grade_in(self, tmp: Path, submission: str, mode: str, seed: int, content: bytes, slot) -> None:
        from ...outputs import prairielearn

        hand_in, out = tmp / "hand-in", tmp / "out"
        hand_in.mkdir()
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            for name in archive.namelist():  # written by uploads.HandIn.to_zip: plain, known names only
                (hand_in / Path(name).name).write_bytes(archive.read(name))
        for path in [tmp, hand_in, *hand_in.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)  # the sandbox user reads them
        # A check reads answers.yaml for form only, as a student's own copy does:
        # graded against the key, a check would tell a student which answers are right.
        key = None if mode == "grade" else self.scratch / "a-check-has-no-answer-key"
        options = GradeOptions.for_tree(self.settings.root, self.settings.build_dir, out, mode=mode, seed=seed,
                                        jobs=build_jobs_each(self.in_flight), answer_key=key)
        outcome = run_grading(hand_in, options, Outputs(), progress=lambda stage: self._stage(submission, stage),
                              echo=lambda line: None, sandbox=slot.sandbox, gpu_lock=slot.gpu_lock)
        if outcome.code != EXIT_GRADED:
            self._finish(submission, error=outcome.error or "the grader failed")
            return
        result = outcome.result
        plot = out / "roofline.png"
        files = {
            "score": result.score, "max_score": result.max_score,
            "gpu": (result.gpu or {}).get("name"),
            "results_json": (out / "results.json").read_text(),
            "prairielearn": json.dumps(prairielearn.results(result, self.assignment, plot if plot.exists() else None)),
            "report_md": (out / "report.md").read_text(), "report_html": (out / "report.html").read_text(),
            "plot_png": plot.read_bytes() if plot.exists() else None,
            "grade_json": (out / "grade.json").read_text(),
        }
        self._finish(submission, results=files)

    def _stage(self, submission: str, stage: str) -> None:
        import psycopg

        with psycopg.connect(self.settings.database_url, autocommit=True) as conn:
            conn.execute("UPDATE tilelab_submissions SET stage = %s WHERE id = %s AND state = 'running'",
                         (stage[:200], submission))

    def _finish(self, submission: str, results: Optional[dict] = None, error: Optional[str] = None) -> None:
        """Records the outcome once: the first writer of a submission's results wins."""
        import psycopg

        with psycopg.connect(self.settings.database_url) as conn:
            if results is not None:
                written = conn.execute(
                    "INSERT INTO tilelab_results (submission, score, max_score, gpu, results_json, prairielearn, "
                    "report_md, report_html, plot_png, grade_json, graded_by) VALUES (%s, %s, %s, %s, %s, %s, %s, "
                    "%s, %s, %s, %s) ON CONFLICT (submission) DO NOTHING",
                    (submission, results["score"], results["max_score"], results["gpu"], results["results_json"],
                     results["prairielearn"], results["report_md"], results["report_html"], results["plot_png"],
                     results["grade_json"], self.settings.name)).rowcount
                conn.execute("UPDATE tilelab_submissions SET state = 'done', stage = '', finished_at = now() "
                             "WHERE id = %s AND state = 'running'", (submission,))
                conn.execute("UPDATE tilelab_workers SET graded = graded + %s, last_seen = now() WHERE name = %s",
                             (written, self.settings.name))
            else:
                conn.execute("UPDATE tilelab_submissions SET state = 'failed', stage = '', error = %s, "
                             "finished_at = now() WHERE id = %s AND state = 'running'", (error, submission))
                conn.execute("UPDATE tilelab_workers SET failed = failed + 1, last_seen = now() WHERE name = %s",
                             (self.settings.name,))


async def retry_stalled_jobs(url: str, stalled_after_s: float) -> int:
    """Jobs taken by a worker that stopped beating its heart go back to the queue."""
    async with make_app(url).open_async() as app:
        stalled = list(await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=stalled_after_s))
        for job in stalled:
            await app.job_manager.retry_job(job)
            log.warning("job %s of a stalled worker is queued again", job.id)
        return len(stalled)
