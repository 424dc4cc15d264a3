"""`tilelab serve`: the HTTP API of the grading service (FastAPI on uvicorn,
its OpenAPI schema at /openapi.json). A submission's body is the hand-in
itself (a zip or tar, or one part file, named by ?filename=, a
Content-Disposition header or a multipart form's file field); every answer
that refuses says why in JSON: {"error": code, "message": ...}.

Before the course staff publish the grades, a student reads of a graded
submission only what publication.py made for that (no answer key, no hidden
case); a student token asks for a check, and for a grading only where the
course allows it (students_may_grade)."""

from __future__ import annotations

import json
import re
from contextlib import asynccontextmanager
from email.message import Message
from typing import Optional

from fastapi import FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from psycopg_pool import ConnectionPool
from starlette.formparsers import MultiPartParser

from ...grading.options import CHECK_SEED, fresh_seed
from ...spec.assignment import load_assignment
from ...system.paths import ASSIGNMENT_FILE
from . import records
from .config import ServiceConfig
from .dashboard import add_dashboard, duration
from ...outputs.report_view import UNPUBLISHED
from .publication import visible_tests
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
DEFAULT_FILENAME = "hand-in.zip"  # an upload without a name: told by its bytes (uploads.py)


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

    def view(conn, row: dict, who: records.Caller) -> dict:
        sid = str(row["id"])
        unpublished = who.role == "student" and row["mode"] == "grade"
        stage = row["stage"]
        if unpublished:
            stage = stage.split(":", 1)[0]  # the part's name; what its cases did is for publication
        found = {"id": sid, "student": row["student"], "mode": row["mode"], "state": row["state"],
                 "stage": stage, "created_at": row["created_at"].isoformat(),
                 "finished_at": row["finished_at"].isoformat() if row["finished_at"] else None}
        if row["state"] == "queued":
            position = records.queue_position(conn, sid)
            each = records.seconds_per_grading(conn)
            found.update(position=position, eta_s=round(position * each, 1) if position and each else None)
            found.update(waiting_for_workers(records.workers(conn)))
        if row["state"] == "failed":
            found["message"] = ("the grader could not grade this submission: not a problem with your work; "
                                "the course staff can see why")
        if row["state"] == "done":
            result = records.result_row(conn, sid) or {}
            hidden = unpublished and not records.published(conn)
            found["results"] = {name: f"{API}/submissions/{sid}/{name}" for name in RESULT_FILES
                                if readable_file(name, row, result, who, hidden)}
        return found

    @app.get(f"{API}/health")
    def health():
        """Whether the service can grade: its database, the workers with their
        states, and the queue's age. 503 when it cannot grade at all, so a
        monitor can alert; `ok` is false, with the problems, whenever one
        needs the staff (an unhealthy worker too)."""
        try:
            with state["pool"].connection() as conn:
                fleet, queue = records.workers(conn), records.queue_age(conn)
        except Exception as e:  # noqa: BLE001 - a pool timeout or a database error: either is "cannot grade"
            return JSONResponse({"ok": False, "assignment": assignment.name,
                                 "problems": [f"the database cannot be reached ({type(e).__name__})"]},
                                status_code=503)
        can_grade = any(w["live"] for w in fleet)
        problems = ([] if can_grade else [no_worker_words(fleet)]) + [
            f"worker {w['name']} is unhealthy: {w['reason']}" for w in fleet
            if w["state"] == "unhealthy" and w["silent_s"] < records.SILENT_AFTER_S]
        return JSONResponse({"ok": not problems, "assignment": assignment.name, "problems": problems,
                             "workers": fleet, "queue": queue}, status_code=200 if can_grade else 503)

    @app.post(f"{API}/submissions", status_code=202)
    async def submit(request: Request, mode: str = Query("check"), student: Optional[str] = Query(None),
                     filename: Optional[str] = Query(None), authorization: Optional[str] = Header(None),
                     idempotency_key: Optional[str] = Header(None)):
        """Submit a hand-in to be checked or graded: the request's body (named by
        ?filename= or a Content-Disposition header), or the `file` field of a
        multipart/form-data body (named by its file name)."""
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
        content, named = await upload_of(request, bytes(body))
        return _accept(content, mode, student, filename or named or DEFAULT_FILENAME, authorization,
                       idempotency_key)

    async def upload_of(request: Request, body: bytes) -> tuple:
        """(the hand-in's bytes, its name or None) from the body as it came."""
        kind = request.headers.get("content-type", "")
        if kind.split(";", 1)[0].strip().lower() != "multipart/form-data":
            return body, header_filename(request.headers.get("content-disposition"))
        async def read_already():  # the body, read and bounded above, is all the parser gets
            yield body

        try:
            form = await MultiPartParser(request.headers, read_already(), max_files=1, max_fields=5).parse()
        except Exception as e:  # noqa: BLE001 - the parser's errors for a malformed form
            refuse(400, "bad_form", f"the multipart form cannot be read ({' '.join(str(e).split())[:200]})")
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            refuse(400, "bad_form", "a multipart form sends the hand-in as the file field named `file`")
        return await upload.read(), upload.filename

    def _accept(body: bytes, mode: str, student: Optional[str], filename: str, authorization: Optional[str],
                idempotency_key: Optional[str]):
        with state["pool"].connection() as conn:
            who = caller(conn, authorization)
            if who.role == "student":
                if student not in (None, who.student):
                    refuse(403, "not_yours", "a student token submits for its own student only")
                if mode == "grade" and not config.students_may_grade:
                    refuse(403, "grade_not_allowed", "a student token asks for checks (mode=check); gradings come "
                                                     "from your course's platform when you hand in")
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
            found = view(conn, records.submission_row(conn, accepted.id), who)
        return JSONResponse(found, status_code=202 if accepted.created else 200)

    @app.get(f"{API}/submissions/{{submission_id}}")
    def status(submission_id: str, authorization: Optional[str] = Header(None)) -> dict:
        with state["pool"].connection() as conn:
            who = caller(conn, authorization)
            return view(conn, readable(conn, who, submission_id), who)

    @app.delete(f"{API}/submissions/{{submission_id}}")
    def cancel(submission_id: str, authorization: Optional[str] = Header(None)) -> dict:
        with state["pool"].connection() as conn:
            who = caller(conn, authorization)
            readable(conn, who, submission_id)
            records.cancel(conn, state["queue"], submission_id)
            return view(conn, records.submission_row(conn, submission_id), who)

    @app.get(f"{API}/submissions/{{submission_id}}/{{name}}")
    def result_file(submission_id: str, name: str, authorization: Optional[str] = Header(None)):
        if name not in RESULT_FILES:
            refuse(404, "no_such_file", f"results are {', '.join(RESULT_FILES)}")
        with state["pool"].connection() as conn:
            who = caller(conn, authorization)
            row = readable(conn, who, submission_id)
            result = records.result_row(conn, submission_id)
            unpublished = who.role == "student" and row["mode"] == "grade" and not records.published(conn)
        if result is None:
            refuse(409, "not_graded_yet", f"submission {submission_id} is {row['state']}: no results yet")
        if not readable_file(name, row, result, who, unpublished):
            refuse(404, "no_such_file", f"this grading has no {name} for you"
                   + (f" ({UNPUBLISHED})" if unpublished else ""))
        column, media = RESULT_FILES[name]
        # Until publication a student reads a grading as publication.py made it for them.
        kept = (result["unpublished"] or {}).get(column) if unpublished else None
        value = kept if kept is not None else result[column]
        if media == "application/json" and not isinstance(value, (str, bytes)):
            value = json.dumps(value)
        if name == "results.json" and unpublished:
            value = visible_tests(value)
        if name == "grade.json" and who.role == "student":
            value = grade_json_for_student(value)
        return Response(value if isinstance(value, (bytes, str)) else bytes(value), media_type=media)

    add_dashboard(app, state, database_url, limits, assignment)  # the staff's HTML pages under /staff
    return app


def readable_file(name: str, row: dict, result: dict, who: records.Caller, unpublished: bool) -> bool:
    """Whether this grading has `name` for this caller: the plot only where one
    was drawn; grade.json (every case, the key) for a student of a check only;
    before publication, only what publication.py made for the student."""
    column, _ = RESULT_FILES[name]
    if result.get(column) is None:
        return False
    if name == "grade.json":
        return who.role != "student" or row["mode"] == "check"
    if unpublished and column != "plot_png":
        # A grading recorded before these files were kept: its visible tests only (result_file).
        return bool((result.get("unpublished") or {}).get(column)) or name == "results.json"
    return True


def waiting_for_workers(fleet: list) -> dict:
    """What a queued submission's state says of the workers: how many can grade now, and, where none can, why."""
    ready = sum(1 for w in fleet if w["live"])
    return {"workers_ready": ready, **({"no_worker": no_worker_words(fleet)} if not ready else {})}


def no_worker_words(fleet: list) -> str:
    """"no worker is ready to grade: the last was heard from 12 min ago" and the like."""
    heard = [w["silent_s"] for w in fleet]
    if not heard:
        return "no worker has connected to the grading service yet"
    return f"no worker is ready to grade: the last was heard from {duration(min(heard))} ago"


def header_filename(disposition: Optional[str]) -> Optional[str]:
    """The file name a Content-Disposition header gives (RFC 6266, filename* too), or None."""
    if not disposition:
        return None
    header = Message()
    header["content-disposition"] = disposition
    name = header.get_filename()
    return str(name) if name else None
