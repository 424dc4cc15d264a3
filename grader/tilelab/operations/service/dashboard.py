"""The staff dashboard: HTML pages under /staff on the gateway, for a staff
token's holder. Plain HTML and CSS from Jinja templates, no JavaScript.

- Login takes a staff token once and keeps a session: a random id in an
  HttpOnly, SameSite=Strict cookie, stored only as its sha256 (as tokens are)
  in tilelab_staff_sessions, beside its expiry, its staff token and its CSRF
  token; add_dashboard makes that table (if missing) as the gateway starts.
  Held server-side so that logging out, or revoking the staff token, ends it
  at once, and so that no signing key has to be kept on disk.
- Every form that changes something carries the session's CSRF token; the
  login form, with no session yet, carries one that must match a cookie.
- Everything shown that a client could have sent (student names, errors) is
  autoescaped; the pages' CSP forbids scripts, frames and foreign forms.
- A regrade is a new grade-mode submission of a stored hand-in, queued in
  the transaction that records it, as records.accept queues an upload.
- The class report (/staff/class-report) is the page `tilelab batch` writes,
  drawn from each student's latest grading (class_pages.py).
"""

from __future__ import annotations

import base64
import secrets
from datetime import timezone
from pathlib import Path
from typing import Optional
from urllib.parse import parse_qs, quote

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from ...grading.options import fresh_seed
from ...spec.assignment import Assignment
from . import class_pages, records
from .config import Limits

TEMPLATES = Path(__file__).resolve().parent / "templates"
SESSION_COOKIE = "tilelab_staff"
LOGIN_COOKIE = "tilelab_staff_login"  # the login form's CSRF token, before there is a session
SESSION_HOURS = 12
RECENT = 20
FAILURES = 10
MAX_FORM_BYTES = 16 * 1024  # the dashboard's forms hold a token and a few words
MAX_STUDENT = 200  # as the API allows
PAGE_HEADERS = {
    "Cache-Control": "no-store",  # pages name students and their scores: no shared cache keeps them
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
# A report is the grader's page about a student's code: shown sandboxed (an
# origin of its own, no scripts), so that nothing in it can act as staff.
REPORT_CSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"

SESSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS tilelab_staff_sessions (
    session_hash text PRIMARY KEY,                 -- sha256 of the cookie's session id
    token_hash   text NOT NULL REFERENCES tilelab_tokens (token_hash),
    csrf         text NOT NULL,                    -- what the session's forms must send back
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
)"""


def add_dashboard(app, state: dict, database_url: str, limits: Limits, assignment: Assignment) -> None:
    """Adds the /staff pages to `app`; state["pool"] and state["queue"] are
    the gateway's, open while it serves."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(SESSIONS_TABLE)
    pages = _environment()
    css = pages.get_template("dashboard.css.j2").render()

    def page(template: str, status: int = 200, **view) -> HTMLResponse:
        return HTMLResponse(pages.get_template(template).render(**view), status_code=status, headers=PAGE_HEADERS)

    def message(status: int, title: str, text: str, session: Optional[dict] = None) -> HTMLResponse:
        return page("message.html.j2", status, title=title, text=text, session=session)

    def to_login() -> RedirectResponse:
        return RedirectResponse("/staff/login", status_code=303, headers=PAGE_HEADERS)

    def session_of(conn, request) -> Optional[dict]:
        value = request.cookies.get(SESSION_COOKIE)
        if not value or len(value) > 100:
            return None
        row = conn.execute(
            "SELECT s.token_hash, s.csrf FROM tilelab_staff_sessions s JOIN tilelab_tokens t USING (token_hash) "
            "WHERE s.session_hash = %s AND s.expires_at > now() AND t.revoked_at IS NULL AND t.role = 'staff'",
            (records.hash_token(value),)).fetchone()
        return {"token_hash": row[0], "csrf": row[1]} if row else None

    async def form_of(request) -> Optional[dict]:
        """The urlencoded form, one value per name; None when it is not one."""
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                return None
        try:
            fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=20)
        except ValueError:
            return None
        return {name: values[0] for name, values in fields.items()}

    def csrf_ok(session: dict, form: Optional[dict]) -> bool:
        sent = (form or {}).get("csrf", "")
        return bool(sent) and secrets.compare_digest(sent.encode(), session["csrf"].encode())

    def refused_form(session: dict) -> HTMLResponse:
        return message(403, "Refused", "This form did not come from this dashboard's page (its CSRF token is "
                                       "missing or stale): reload the page and try again.", session)

    # ------------------------------------------------------------ login

    @app.get("/staff/dashboard.css", include_in_schema=False)
    def stylesheet():
        return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=300"})

    def login_page(status: int = 200, error: str = "") -> HTMLResponse:
        csrf = secrets.token_urlsafe(24)
        answer = page("login.html.j2", status, csrf=csrf, error=error, session=None)
        answer.set_cookie(LOGIN_COOKIE, csrf, max_age=3600, path="/staff/login", httponly=True,
                          samesite="strict")
        return answer

    @app.get("/staff/login", include_in_schema=False)
    def login_form():
        return login_page()

    @app.post("/staff/login", include_in_schema=False)
    async def login(request: Request):
        form = await form_of(request)
        expected = request.cookies.get(LOGIN_COOKIE, "")
        if form is None or not expected or not secrets.compare_digest(form.get("csrf", "").encode(),
                                                                     expected.encode()):
            return login_page(403, "This login form was stale or not from this page: sign in again.")
        token = form.get("token", "").strip()
        if not token:
            return login_page(400, "Paste your staff token.")
        value, found = await run_in_threadpool(_new_session, state["pool"], token)
        if found is None:
            return login_page(401, "This token is not known or was revoked.")
        if value is None:
            return login_page(403, f"This is a {found.role} token: the dashboard takes a staff token "
                                   "(made by `tilelab token staff`).")
        answer = RedirectResponse("/staff", status_code=303, headers=PAGE_HEADERS)
        answer.set_cookie(SESSION_COOKIE, value, max_age=SESSION_HOURS * 3600, path="/staff", httponly=True,
                          samesite="strict", secure=request.url.scheme == "https")
        answer.delete_cookie(LOGIN_COOKIE, path="/staff/login", httponly=True, samesite="strict")
        return answer

    @app.post("/staff/logout", include_in_schema=False)
    async def logout(request: Request):
        form = await form_of(request)

        def end():
            with state["pool"].connection() as conn:
                session = session_of(conn, request)
                if session is None or not csrf_ok(session, form):
                    return session
                conn.execute("DELETE FROM tilelab_staff_sessions WHERE session_hash = %s",
                             (records.hash_token(request.cookies[SESSION_COOKIE]),))
                return None

        refused = await run_in_threadpool(end)
        if refused is not None:
            return refused_form(refused)
        answer = to_login()
        answer.delete_cookie(SESSION_COOKIE, path="/staff", httponly=True, samesite="strict")
        return answer

    async def staff_form(request: Request, act):
        """A staff form's POST: the session and its CSRF token checked, then
        act(conn, session, form) answers, in a worker thread."""
        form = await form_of(request)

        def work():
            with state["pool"].connection() as conn:
                session = session_of(conn, request)
                if session is None:
                    return to_login()
                if not csrf_ok(session, form):
                    return refused_form(session)
                return act(conn, session, form)

        return await run_in_threadpool(work)

    @app.post("/staff/publish", include_in_schema=False)
    async def publish(request: Request):
        """Publishes the hidden results to students, or withdraws them (form field publish=yes|no)."""
        def act(conn, session, form):
            records.publish(conn, session["token_hash"], form.get("publish") == "yes")
            return RedirectResponse("/staff", status_code=303, headers=PAGE_HEADERS)

        return await staff_form(request, act)

    # ------------------------------------------------------------ pages

    def staff_page(request: Request, read, show):
        """A staff page: read(conn) with the session checked, then show(session,
        what it read) once the connection is back in the pool."""
        with state["pool"].connection() as conn:
            session = session_of(conn, request)
            if session is None:
                return to_login()
            found = read(conn)
        return show(session, found)

    @app.get("/staff", include_in_schema=False)
    def overview(request: Request):
        return staff_page(request, overview_of, lambda session, view: page(
            "overview.html.j2", session=session, silent_after_s=records.SILENT_AFTER_S, **view))

    @app.get("/staff/students", include_in_schema=False)
    def find_student(request: Request):
        student = request.query_params.get("student", "").strip()
        return RedirectResponse(student_url(student) if student else "/staff", status_code=303,
                                headers=PAGE_HEADERS)

    @app.get("/staff/students/{student:path}", include_in_schema=False)
    def student_page(request: Request, student: str):
        def show(session, rows):
            if rows is None:
                return message(404, "No such student", "A student ID has 1 to 200 characters, and no NUL.", session)
            return page("student.html.j2", session=session, student=student, submissions=rows)

        return staff_page(request, lambda conn: submissions_of(conn, student) if plausible_student(student) else None,
                          show)

    @app.get("/staff/submissions/{submission_id}/report.html", include_in_schema=False)
    def report(request: Request, submission_id: str):
        def read(conn):
            return records.result_row(conn, submission_id) if records.submission_row(conn, submission_id) else None

        def show(session, result):
            if result is None:
                return message(404, "No report", f"Submission {submission_id} has no report (not graded, or no "
                                                 "such submission).", session)
            text = result["report_html"]
            if result["plot_png"] is not None:
                # The page names its plot by a relative file name; inlined, the sandboxed page needs no request.
                plot = base64.b64encode(bytes(result["plot_png"])).decode()
                text = text.replace('src="roofline.png"', f'src="data:image/png;base64,{plot}"', 1)
            return HTMLResponse(text, headers={**PAGE_HEADERS, "Content-Security-Policy": REPORT_CSP})

        return staff_page(request, read, show)

    @app.get("/staff/class-report", include_in_schema=False)
    def class_report(request: Request):
        """What the class did, from each student's latest grading (class_pages.py)."""
        def show(session, gradings):
            text, missing = class_pages.class_page(gradings, assignment)
            if text is None:
                return message(404, "No class report", f"{missing[:1].upper()}{missing[1:]}.", session)
            return HTMLResponse(text, headers={**PAGE_HEADERS,
                                               "Content-Security-Policy": class_pages.CLASS_REPORT_CSP})

        return staff_page(request, class_pages.latest_gradings, show)

    @app.get("/staff/class-report/{name}", include_in_schema=False)
    def class_report_csv(request: Request, name: str):
        def show(session, gradings):
            text = class_pages.class_csv(gradings, assignment, name)
            if text is None:
                return message(404, "No such file", "The class report has no such CSV, or nothing is graded yet.",
                               session)
            return Response(text, media_type="text/csv", headers={
                **PAGE_HEADERS, "Content-Disposition": f'attachment; filename="{name}"'})

        return staff_page(request, class_pages.latest_gradings, show)

    # ------------------------------------------------------------ regrades

    async def regrade(request: Request, chosen):
        """Queues the submissions `chosen(conn, form)` returns, with the seed the form chose."""
        def act(conn, session, form):
            seed = form.get("seed")
            if seed not in ("same", "new"):
                return message(400, "Which seed?", "Choose 'same seed' or 'new seed'.", session)
            sources, priority, problem = chosen(conn, form)
            if problem:
                return message(problem[0], problem[1], problem[2], session)
            queued, replaced = [], []
            for source in sources:
                new = records.queue_submission(conn, state["queue"], source["student"], "grade",
                                               source["handin"], session["token_hash"],
                                               source["seed"] if seed == "same" else fresh_seed(), priority)
                queued.append({**source, "new": new.id})
                replaced += new.replaced
            conn.commit()  # the new submissions and their jobs, before older queued ones are cancelled
            records.replace_older(conn, state["queue"], tuple(replaced))
            return page("regraded.html.j2", session=session, queued=queued, seed=seed)

        return await staff_form(request, act)

    @app.post("/staff/submissions/{submission_id}/regrade", include_in_schema=False)
    async def regrade_one(request: Request, submission_id: str):
        def chosen(conn, _form):
            row = records.submission_row(conn, submission_id)
            if row is None:
                return [], 0, (404, "No such submission", f"There is no submission {submission_id}.")
            return [row], limits.grade_priority, None

        return await regrade(request, chosen)

    @app.post("/staff/regrade", include_in_schema=False)
    async def regrade_class(request: Request):
        def chosen(conn, form):
            if form.get("confirm") != "class":
                return [], 0, (400, "Not confirmed", "Tick the box to regrade every student: it queues one "
                                                     "grading per student.")
            # Behind any student's own grade-mode submission sent meanwhile, still ahead of checks.
            return latest_grades(conn), limits.grade_priority - 1, None

        return await regrade(request, chosen)


# ---------------------------------------------------------------- records


def _new_session(pool, token: str) -> tuple:
    """(the new session's cookie value or None, the token's Caller or None)."""
    with pool.connection() as conn:
        found = records.caller_of(conn, token) if len(token) <= 200 else None
        if found is None or found.role != "staff":
            return None, found
        value = secrets.token_urlsafe(32)
        conn.execute("DELETE FROM tilelab_staff_sessions WHERE expires_at < now()")
        conn.execute("INSERT INTO tilelab_staff_sessions (session_hash, token_hash, csrf, expires_at) "
                     "VALUES (%s, %s, %s, now() + make_interval(hours => %s))",
                     (records.hash_token(value), found.token_hash, secrets.token_urlsafe(24), SESSION_HOURS))
    return value, found


def latest_grades(conn) -> list:
    """Each student's latest grade-mode submission; one cancelled (withdrawn) or
    replaced stands for nothing, so the one before it counts."""
    return _dicts(conn.execute(
        "SELECT DISTINCT ON (student) id, student, handin, seed FROM tilelab_submissions WHERE mode = 'grade' "
        "AND state NOT IN ('cancelled', 'replaced') ORDER BY student, created_at DESC"))


def overview_of(conn) -> dict:
    """What the overview shows: the queue, the workers, failures, recent submissions."""
    queue = {mode: {"mode": mode, "queued": 0, "running": 0, "oldest_s": None} for mode in ("grade", "check")}
    for row in _dicts(conn.execute(
            "SELECT mode, count(*) FILTER (WHERE state = 'queued') AS queued, "
            "count(*) FILTER (WHERE state = 'running') AS running, "
            "extract(epoch FROM now() - min(created_at) FILTER (WHERE state = 'queued')) AS oldest_s "
            "FROM tilelab_submissions WHERE state IN ('queued', 'running') GROUP BY mode")):
        queue[row["mode"]] = row
    workers = _dicts(conn.execute(
        "SELECT name, gpu_name, state, reason, in_flight, graded, failed, calibration, last_seen, "
        "extract(epoch FROM now() - last_seen) AS silent_s FROM tilelab_workers ORDER BY state = 'stopped', name"))
    failures = _dicts(conn.execute(
        "SELECT id, student, mode, worker, error, finished_at, extract(epoch FROM now() - finished_at) AS age_s "
        "FROM tilelab_submissions WHERE state = 'failed' ORDER BY finished_at DESC NULLS LAST LIMIT %s",
        (FAILURES,)))
    recent = _dicts(conn.execute(
        "SELECT s.id, s.student, s.mode, s.state, s.stage, s.created_at, extract(epoch FROM now() - s.created_at) "
        "AS age_s, r.score, r.max_score, r.outcome FROM tilelab_submissions s LEFT JOIN tilelab_results r "
        "ON r.submission = s.id ORDER BY s.created_at DESC LIMIT %s", (RECENT,)))
    return {"queue": list(queue.values()), "workers": workers, "failures": failures, "recent": recent,
            "published": records.published(conn)}


def submissions_of(conn, student: str) -> list:
    return _dicts(conn.execute(
        "SELECT s.id, s.mode, s.state, s.stage, s.seed, s.worker, s.attempts, s.error, s.created_at, "
        "extract(epoch FROM now() - s.created_at) AS age_s, "
        "extract(epoch FROM s.finished_at - s.started_at) AS took_s, r.score, r.max_score, r.outcome, "
        "(t.role = 'staff') AS by_staff FROM tilelab_submissions s LEFT JOIN tilelab_results r "
        "ON r.submission = s.id LEFT JOIN tilelab_tokens t ON t.token_hash = s.token_hash "
        "WHERE s.student = %s ORDER BY s.created_at DESC", (student,)))


def _dicts(cur) -> list:
    names = [c.name for c in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


# ---------------------------------------------------------------- pages


def plausible_student(student: str) -> bool:
    """A name the API could have stored (PostgreSQL text holds no NUL)."""
    return 0 < len(student) <= MAX_STUDENT and "\x00" not in student


def student_url(student: str) -> str:
    # Every character quoted, "/" too: the route takes the rest of the path as the name.
    return "/staff/students/" + quote(student, safe="")


def duration(seconds) -> str:
    """'0.4 s', '42 s', '7 min', '3 h 05 min', '2 d 4 h'."""
    if seconds is None:
        return "–"
    if seconds < 9.95:
        return f"{max(0.0, float(seconds)):.1f} s"
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def number(value) -> str:
    return "–" if value is None else f"{float(value):.4g}"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(duration=duration, number=number, student_url=student_url,
                       utc=lambda t: t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if t else "")
    return env
