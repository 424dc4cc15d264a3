"""The service's records in PostgreSQL (schema.sql): tokens, hand-ins,
submissions and their results. Accepting a submission stores its bytes and
its job in one transaction; a token is stored only as its sha256."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from typing import Optional

from .queue import QUEUE, TASK
from .uploads import HandIn

ROLES = ("student", "course", "staff")
FINISHED = ("done", "failed", "cancelled", "replaced")
THROUGHPUT_WINDOW = 20  # the last gradings whose times give an ETA
# A worker beats its heart every few seconds: two minutes without a beat is a worker gone, not a hiccup.
SILENT_AFTER_S = 120


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Caller:
    """Who a token belongs to."""

    token_hash: str
    role: str
    student: Optional[str]  # a student token's student

    def may_read(self, submission_student: str) -> bool:
        return self.role in ("course", "staff") or self.student == submission_student


def add_token(conn, role: str, student: Optional[str] = None, label: str = "") -> str:
    """A new token (shown once, stored hashed)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}")
    token = secrets.token_urlsafe(32)
    conn.execute("INSERT INTO tilelab_tokens (token_hash, role, student, label) VALUES (%s, %s, %s, %s)",
                 (hash_token(token), role, student if role == "student" else None, label))
    return token


def caller_of(conn, token: str) -> Optional[Caller]:
    row = conn.execute("SELECT token_hash, role, student FROM tilelab_tokens WHERE token_hash = %s "
                       "AND revoked_at IS NULL", (hash_token(token),)).fetchone()
    return Caller(*row) if row else None


def submissions_in_the_last_hour(conn, token_hash: str) -> tuple:
    """(how many, seconds until the oldest of them leaves the hour)."""
    count, oldest = conn.execute(
        "SELECT count(*), extract(epoch FROM min(created_at) + interval '1 hour' - now()) FROM tilelab_submissions "
        "WHERE token_hash = %s AND created_at > now() - interval '1 hour'", (token_hash,)).fetchone()
    return count, max(1, int(oldest or 1))


@dataclass(frozen=True)
class Accepted:
    id: str
    created: bool  # False: the same idempotency key was seen before, and this is that submission
    replaced: tuple = ()  # the queued submissions of the same student and mode this one replaces


def accept(conn, app, caller: Caller, student: str, mode: str, hand_in: HandIn, seed: int,
           idempotency_key: Optional[str], priority: int) -> Accepted:
    """Stores the hand-in's bytes and the submission's job in one transaction
    (the caller commits), so that an accepted submission is never lost."""
    if idempotency_key:
        row = conn.execute("SELECT id FROM tilelab_submissions WHERE token_hash = %s AND idempotency_key = %s",
                           (caller.token_hash, idempotency_key)).fetchone()
        if row:
            return Accepted(str(row[0]), created=False)
    content = hand_in.to_zip()
    conn.execute("INSERT INTO tilelab_handins (digest, content, checksum, size) VALUES (%s, %s, %s, %s) "
                 "ON CONFLICT (digest) DO NOTHING",
                 (hand_in.digest, content, hashlib.sha256(content).hexdigest(), len(content)))
    return queue_submission(conn, app, student, mode, hand_in.digest, caller.token_hash, seed, priority,
                            idempotency_key)


def queue_submission(conn, app, student: str, mode: str, digest: str, token_hash: str, seed: int, priority: int,
                     idempotency_key: Optional[str] = None) -> Accepted:
    """A submission of a stored hand-in and its job, in the caller's
    transaction; with the older queued submissions of the same student and
    mode, for replace_older once it is committed."""
    submission = uuid.uuid4()
    conn.execute("INSERT INTO tilelab_submissions (id, student, mode, handin, token_hash, idempotency_key, seed, "
                 "state) VALUES (%s, %s, %s, %s, %s, %s, %s, 'queued')",
                 (submission, student, mode, digest, token_hash, idempotency_key, seed))
    job_id = app.configure_task(name=TASK, queue=QUEUE, priority=priority, connection=conn).defer(
        submission=str(submission))
    conn.execute("UPDATE tilelab_submissions SET job_id = %s WHERE id = %s", (job_id, submission))
    older = conn.execute("SELECT id, job_id FROM tilelab_submissions WHERE student = %s AND mode = %s "
                         "AND state = 'queued' AND id <> %s", (student, mode, submission)).fetchall()
    return Accepted(str(submission), created=True, replaced=tuple((str(i), j) for i, j in older))


def replace_older(conn, app, replaced: tuple) -> None:
    """After the new submission is committed: the older queued ones of the
    same student and mode are cancelled where no worker has taken them yet."""
    for submission, job_id in replaced:
        if job_id is not None and app.job_manager.cancel_job_by_id(job_id):
            conn.execute("UPDATE tilelab_submissions SET state = 'replaced', finished_at = now() "
                         "WHERE id = %s AND state = 'queued'", (submission,))


def submission_row(conn, submission_id: str) -> Optional[dict]:
    try:
        uuid.UUID(submission_id)
    except ValueError:
        return None
    cur = conn.execute("SELECT id, student, mode, state, stage, worker, attempts, error, created_at, started_at, "
                       "finished_at, job_id, seed, handin FROM tilelab_submissions WHERE id = %s", (submission_id,))
    row = cur.fetchone()
    if row is None:
        return None
    return dict(zip([c.name for c in cur.description], row))


def queue_position(conn, submission_id: str) -> Optional[int]:
    """1 for the next to be graded; None when it is not queued."""
    row = conn.execute(
        "SELECT count(*) FROM procrastinate_jobs j, procrastinate_jobs mine "
        "WHERE mine.id = (SELECT job_id FROM tilelab_submissions WHERE id = %s AND state = 'queued') "
        "AND j.queue_name = mine.queue_name AND j.status = 'todo' "
        "AND (j.priority > mine.priority OR (j.priority = mine.priority AND j.id <= mine.id))",
        (submission_id,)).fetchone()
    return row[0] or None


def seconds_per_grading(conn) -> Optional[float]:
    """The median wall time of the last gradings, over the workers ready now: an ETA's unit."""
    row = conn.execute(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)) "
        "FROM (SELECT finished_at, started_at FROM tilelab_submissions WHERE state = 'done' "
        "ORDER BY finished_at DESC LIMIT %s) recent", (THROUGHPUT_WINDOW,)).fetchone()
    slots = conn.execute("SELECT coalesce(sum(greatest(in_flight, 1)), 0) FROM tilelab_workers "
                         "WHERE state = 'ready' AND last_seen > now() - interval '2 minutes'").fetchone()[0]
    if row[0] is None or not slots:
        return None
    return float(row[0]) / slots


def result_row(conn, submission_id: str) -> Optional[dict]:
    cur = conn.execute("SELECT * FROM tilelab_results WHERE submission = %s", (submission_id,))
    row = cur.fetchone()
    return dict(zip([c.name for c in cur.description], row)) if row else None


def cancel(conn, app, submission_id: str) -> str:
    """Cancels a queued submission; returns its state afterwards."""
    row = submission_row(conn, submission_id)
    if row["state"] == "queued" and row["job_id"] is not None and app.job_manager.cancel_job_by_id(row["job_id"]):
        conn.execute("UPDATE tilelab_submissions SET state = 'cancelled', finished_at = now() "
                     "WHERE id = %s AND state = 'queued'", (submission_id,))
        return "cancelled"
    return submission_row(conn, submission_id)["state"]


def published(conn) -> bool:
    """Whether staff published the hidden results to students."""
    return conn.execute("SELECT count(*) FROM tilelab_publication").fetchone()[0] > 0


def publish(conn, token_hash: str, on: bool) -> None:
    """Publishes the hidden results to students (on), or withdraws them."""
    if on:
        conn.execute("INSERT INTO tilelab_publication (token_hash) VALUES (%s) ON CONFLICT (only_row) DO NOTHING",
                     (token_hash,))
    else:
        conn.execute("DELETE FROM tilelab_publication")


def workers(conn) -> list:
    """Every worker the service has seen: name, GPU, state, reason (why it is
    unhealthy, or a note beside ready), submissions in flight, seconds since
    its last heartbeat, and whether it can take a submission now (ready, and
    heard from lately)."""
    cur = conn.execute(
        "SELECT name, gpu_name, state, reason, in_flight, extract(epoch FROM now() - last_seen)::float AS silent_s "
        "FROM tilelab_workers ORDER BY name")
    names = [c.name for c in cur.description]
    rows = [dict(zip(names, row)) for row in cur.fetchall()]
    for row in rows:
        row["silent_s"] = round(row["silent_s"], 1)
        row["live"] = row["state"] == "ready" and row["silent_s"] < SILENT_AFTER_S
    return rows


def queue_age(conn) -> dict:
    """How many submissions wait and run, and how long the oldest has waited (seconds, None: none waits)."""
    queued, running, oldest = conn.execute(
        "SELECT count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running'), "
        "extract(epoch FROM now() - min(created_at) FILTER (WHERE state = 'queued'))::float "
        "FROM tilelab_submissions WHERE state IN ('queued', 'running')").fetchone()
    return {"queued": queued, "running": running, "oldest_queued_s": round(oldest, 1) if oldest is not None else None}


def counters_to_come(conn) -> int:
    """Recorded gradings with counters still to be read (`tilelab worker --counters later`)."""
    return conn.execute("SELECT count(*) FROM tilelab_results WHERE jsonb_path_exists(grade_json, "
                        "'$.parts[*] ? (@.counters_later != \"\")')").fetchone()[0]
