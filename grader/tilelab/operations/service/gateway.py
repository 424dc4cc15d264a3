"""`tilelab serve`: the HTTP API of the grading service (FastAPI on uvicorn,
its OpenAPI schema at /openapi.json). A submission's body is the hand-in
itself (a zip or tar, or one part file); every answer that refuses says why
in JSON: {"error": code, "message": ...}."""

from __future__ import annotations

import json
import re
from contextlib import asynccontextmanager
from typing import Optional

from fastapi import FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from psycopg_pool import ConnectionPool

from ...grading.options import CHECK_SEED, fresh_seed
from ...spec.assignment import load_assignment
from ...system.paths import ASSIGNMENT_FILE
from . import records
from .config import ServiceConfig
from .dashboard import add_dashboard
from .queue import make_app
from .uploads import UploadLimits, UploadRefused, read_upload

API = "/api/v1"
MODES = ("check", "grade")
RESULT_FILES = {
    "results.json": ("results_json", "application/json"),
    "prairielearn.json": ("prairielearn", "application/json"),
    "report.md": ("report_md", "text/markdown; charset=utf-8"),
    "report.html": ("report_html", "text/html; charset=utf-8"),
    "roofline.png": ("plot_png", "image/png"),
    "grade.json": ("grade_json", "application/json"),
}
STUDENT_ID = re.compile(r"[^\x00-\x1f\x7f]{1,200}")
HIDDEN_NOTE = ("Some tests, and the total, are shown here once the course staff publish the grades (the "
               "dashboard's Publish); the course staff see them now.")


def for_student(results_json: str) -> str:
    """Gradescope's results as a student may read them before grades are
    published: the tests marked visible, without the total they would give away."""
    doc = json.loads(results_json)
    tests = doc.get("tests", [])
    shown = [t for t in tests if t.get("visibility", doc.get("visibility", "visible")) == "visible"]
    if len(shown) == len(tests):
        return results_json
    kept = {k: v for k, v in doc.items() if k not in ("score", "tests", "leaderboard")}
    kept["tests"] = shown
    kept["output"] = (str(doc.get("output", "")) + "\n\n" + HIDDEN_NOTE).strip()
    return json.dumps(kept)


def grade_json_for_student(grade_json: str) -> str:
    """A check's grade.json without what is staff's: the answer key and staff notes."""
    doc = json.loads(grade_json)
    doc.pop("staff_notes", None)
    answers = doc.get("answers")
    if isinstance(answers, dict):
        answers.pop("staff_note", None)
        for question in answers.get("questions", []):
            if isinstance(question, dict):
                question["key"] = ""
    return json.dumps(doc)


def create_app(config: ServiceConfig, database_url: str, root):
    """The ASGI app. `root`: the course's checkout, whose assignment.yaml names the part files."""
    assignment = load_assignment(root / ASSIGNMENT_FILE)
    limits = config.limits
    upload_limits = UploadLimits(max_upload_bytes=limits.max_upload_bytes)
    state: dict = {}

    @asynccontextmanager
    async def lifespan(_app):
        state["pool"] = ConnectionPool(database_url, min_size=1, max_size=8, open=True)
        state["queue"] = make_app(database_url, sync=True).open()
        try:
            yield
        finally:
            state["queue"].close()
            state["pool"].close()

    app = FastAPI(title="tilelab grading service", version="1", lifespan=lifespan,
                  description="Submit a hand-in to be checked (public cases) or graded on a GPU; read its state "
                              "and its results.")

    def refuse(status: int, code: str, message: str, headers: Optional[dict] = None):
        raise HTTPException(status, detail={"error": code, "message": message}, headers=headers)

    @app.exception_handler(HTTPException)
    async def _as_json(_request, exc: HTTPException):
        detail = exc.detail if isinstance(exc.detail, dict) else {"error": "http", "message": str(exc.detail)}
        return JSONResponse(detail, status_code=exc.status_code, headers=exc.headers)

    def caller(conn, authorization: Optional[str]) -> records.Caller:
        if not authorization or not authorization.startswith("Bearer "):
            refuse(401, "no_token", "send your token as 'Authorization: Bearer TOKEN' (the course staff give it)")
        found = records.caller_of(conn, authorization[len("Bearer "):].strip())
        if found is None:
            refuse(401, "bad_token", "this token is not known or was revoked: ask the course staff for yours")
        return found

    def readable(conn, who: records.Caller, submission_id: str) -> dict:
        row = records.submission_row(conn, submission_id)
        # Another student's submission reads as one that does not exist.
        if row is None or not who.may_read(row["student"]):
            refuse(404, "no_such_submission", f"no submission {submission_id} of yours")
        return row

    def view(conn, row: dict) -> dict:
        sid = str(row["id"])
        found = {"id": sid, "student": row["student"], "mode": row["mode"], "state": row["state"],
                 "stage": row["stage"], "created_at": row["created_at"].isoformat(),
                 "finished_at": row["finished_at"].isoformat() if row["finished_at"] else None}
        if row["state"] == "queued":
            position = records.queue_position(conn, sid)
            each = records.seconds_per_grading(conn)
            found.update(position=position, eta_s=round(position * each, 1) if position and each else None)
        if row["state"] == "failed":
            found["message"] = ("the grader could not grade this submission: not a problem with your work; "
                                "the course staff can see why")
        if row["state"] == "done":
            found["results"] = {name: f"{API}/submissions/{sid}/{name}" for name in RESULT_FILES}
        return found

    @app.get(f"{API}/health")
    def health() -> dict:
        with state["pool"].connection() as conn:
            conn.execute("SELECT 1")
        return {"ok": True, "assignment": assignment.name}

    @app.post(f"{API}/submissions", status_code=202)
    async def submit(request: Request, mode: str = Query("check"), student: Optional[str] = Query(None),
                     filename: str = Query("hand-in.zip"), authorization: Optional[str] = Header(None),
                     idempotency_key: Optional[str] = Header(None)):
        """Submit a hand-in (the request's body) to be checked or graded."""
        if mode not in MODES:
            refuse(400, "bad_mode", f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limits.max_upload_bytes:
            refuse(413, "too_large", f"the upload is {int(declared):,} bytes; at most {limits.max_upload_bytes:,}")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limits.max_upload_bytes:
                refuse(413, "too_large", f"the upload is over {limits.max_upload_bytes:,} bytes")
        if idempotency_key is not None and not (0 < len(idempotency_key) <= 200):
            refuse(400, "bad_idempotency_key", "an Idempotency-Key has 1 to 200 characters")
        return _accept(bytes(body), mode, student, filename, authorization, idempotency_key)

    def _accept(body: bytes, mode: str, student: Optional[str], filename: str, authorization: Optional[str],
                idempotency_key: Optional[str]):
        with state["pool"].connection() as conn:
            who = caller(conn, authorization)
            if who.role == "student":
                if student not in (None, who.student):
                    refuse(403, "not_yours", "a student token submits for its own student only")
                student = who.student
            elif not student:
                refuse(400, "no_student", "a course or staff token names the student: ?student=ID")
            if not STUDENT_ID.fullmatch(student):
                refuse(400, "bad_student", "a student ID has 1 to 200 printable characters")
            count, retry = records.submissions_in_the_last_hour(conn, who.token_hash)
            if count >= limits.submissions_per_hour and who.role == "student":
                refuse(429, "rate_limited", f"{count} submissions in the last hour, the most a student may send; "
                                            f"try again in {retry} s", headers={"Retry-After": str(retry)})
            try:
                hand_in = read_upload(body, filename, assignment, upload_limits)
            except UploadRefused as e:
                refuse(e.status, e.code, str(e))
            priority = limits.grade_priority if mode == "grade" else limits.check_priority
            with conn.transaction():
                accepted = records.accept(conn, state["queue"], who, student, mode, hand_in,
                                          fresh_seed() if mode == "grade" else CHECK_SEED, idempotency_key,
                                          priority)
            records.replace_older(conn, state["queue"], accepted.replaced)
            found = view(conn, records.submission_row(conn, accepted.id))
        return JSONResponse(found, status_code=202 if accepted.created else 200)

    @app.get(f"{API}/submissions/{{submission_id}}")
    def status(submission_id: str, authorization: Optional[str] = Header(None)) -> dict:
        with state["pool"].connection() as conn:
            return view(conn, readable(conn, caller(conn, authorization), submission_id))

    @app.delete(f"{API}/submissions/{{submission_id}}")
    def cancel(submission_id: str, authorization: Optional[str] = Header(None)) -> dict:
        with state["pool"].connection() as conn:
            readable(conn, caller(conn, authorization), submission_id)
            records.cancel(conn, state["queue"], submission_id)
            return view(conn, records.submission_row(conn, submission_id))

    @app.get(f"{API}/submissions/{{submission_id}}/{{name}}")
    def result_file(submission_id: str, name: str, authorization: Optional[str] = Header(None)):
        if name not in RESULT_FILES:
            refuse(404, "no_such_file", f"results are {', '.join(RESULT_FILES)}")
        with state["pool"].connection() as conn:
            who = caller(conn, authorization)
            row = readable(conn, who, submission_id)
            result = records.result_row(conn, submission_id)
            published = records.published(conn)
        # grade.json holds every case, the hidden ones too: a student reads it of a check only.
        if name == "grade.json" and who.role == "student" and row["mode"] != "check":
            refuse(404, "no_such_file", "grade.json of a graded submission is for the course staff")
        if result is None:
            refuse(409, "not_graded_yet", f"submission {submission_id} is {row['state']}: no results yet")
        column, media = RESULT_FILES[name]
        value = result[column]
        if value is None:
            refuse(404, "no_such_file", f"this grading has no {name}")
        if media == "application/json" and not isinstance(value, (str, bytes)):
            value = json.dumps(value)
        if name == "results.json" and who.role == "student" and not published:
            value = for_student(value)
        if name == "grade.json" and who.role == "student":
            value = grade_json_for_student(value)
        return Response(value if isinstance(value, (bytes, str)) else bytes(value), media_type=media)

    add_dashboard(app, state, database_url, limits)  # the staff's HTML pages under /staff
    return app
