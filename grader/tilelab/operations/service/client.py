"""A client of the grading service's HTTP API (/api/v1), standard library only.

- ServiceClient(url, token): submit a hand-in, read its state, wait until it
  is finished, read its results. Every way of not getting an answer raises
  ServiceUnavailable, whose one-line message says what happened, and whose
  `kind` says which of KINDS it was.
- A hand-in's files are zipped deterministically (zip_files): the same files
  give the same bytes, whatever their order or the clock.
- Each submission carries an Idempotency-Key (one per hand-in, made here
  unless given), so a retry after a network error gets the same job.
  Connection failures, timeouts and 502/503/504 are retried with backoff,
  within the deadline; any other answer is final.
- A deadline is a time.monotonic() instant; None: none.
"""

from __future__ import annotations

import io
import json
import math
import stat
import time
import urllib.parse
import zipfile
from typing import Callable, Mapping, Optional, Union

from ...errors import TilelabError

API = "/api/v1"
FINISHED = ("done", "failed", "cancelled", "replaced")
# How often a running submission is asked after: its result is seen within this of being recorded. Only the
# submissions being graded are asked this often, as many as the workers' slots; a queued one is asked less and
# less often (wait's poll_s, growing to max_poll_s).
RUNNING_POLL_S = 0.2
RETRIED = (502, 503, 504)  # a proxy or the gateway restarting: the next try may get through
# What went wrong, for callers that answer each differently (the forwarders' words, check's fix).
KINDS = ("unreachable", "timeout", "server_error", "refused", "deadline", "bad_answer")


class ServiceUnavailable(TilelabError):
    """The service gave no usable answer. `kind`: one of KINDS; `status`
    and `code`: the HTTP status and the service's error code, where it
    answered; `retry_after`: seconds, where it said."""

    def __init__(self, message: str, kind: str, status: Optional[int] = None, code: Optional[str] = None,
                 retry_after: Optional[int] = None) -> None:
        super().__init__(message)
        self.kind, self.status, self.code, self.retry_after = kind, status, code, retry_after


def zip_files(files: Mapping[str, bytes]) -> bytes:
    """The files as a zip whose bytes depend on their names and contents alone."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.create_system = 3  # unix, so that the mode below is read as one
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name], compresslevel=9)
    return buffer.getvalue()


class ServiceClient:
    """One service and one token. `timeout`: seconds for one request;
    `attempts`: tries of a request that fails in passing; `backoff_s`: the
    first wait between them, doubled each time."""

    def __init__(self, url: str, token: str, timeout: float = 30.0, attempts: int = 4,
                 backoff_s: float = 1.0) -> None:
        parsed = urllib.parse.urlparse((url or "").strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ServiceUnavailable(f"{url!r} is not a grading service URL (http://HOST:PORT or https://HOST)",
                                     "unreachable")
        self.url = parsed._replace(path=parsed.path.rstrip("/").removesuffix(API), query="",
                                   fragment="").geturl()
        self.token, self.timeout, self.attempts, self.backoff_s = token, timeout, max(1, attempts), backoff_s

    # ------------------------------------------------------------ the API

    def submit(self, hand_in: Union[Mapping[str, bytes], bytes], mode: str = "check", student: Optional[str] = None,
               idempotency_key: Optional[str] = None, filename: Optional[str] = None,
               deadline: Optional[float] = None) -> dict:
        """Submits the files (name -> bytes, zipped here) or an archive's
        bytes; returns the submission's state, with "idempotency_key" and
        "repeated" (True: the key was seen before, and this is that job)."""
        import uuid

        body = hand_in if isinstance(hand_in, (bytes, bytearray)) else zip_files(hand_in)
        key = idempotency_key or uuid.uuid4().hex
        query = {"mode": mode, **({"student": student} if student else {}),
                 **({"filename": filename} if filename else {})}
        status, data = self._call("POST", "/submissions?" + urllib.parse.urlencode(query), bytes(body),
                                  {"Idempotency-Key": key, "Content-Type": "application/octet-stream"}, deadline)
        return {**self._json(data), "idempotency_key": key, "repeated": status == 200}

    def status(self, submission_id: str, deadline: Optional[float] = None) -> dict:
        return self._json(self._call("GET", f"/submissions/{_quoted(submission_id)}", None, {}, deadline)[1])

    def cancel(self, submission_id: str, deadline: Optional[float] = None) -> dict:
        """Cancels a queued submission; returns its state afterwards."""
        return self._json(self._call("DELETE", f"/submissions/{_quoted(submission_id)}", None, {}, deadline)[1])

    def result(self, submission_id: str, name: str, deadline: Optional[float] = None) -> bytes:
        """One of a finished submission's files: results.json, prairielearn.json, report.md, ..."""
        return self._call("GET", f"/submissions/{_quoted(submission_id)}/{_quoted(name)}", None, {}, deadline)[1]

    def wait(self, submission_id: str, on_update: Optional[Callable[[dict], None]] = None,
             deadline: Optional[float] = None, poll_s: float = 1.0, max_poll_s: float = 5.0) -> dict:
        """Polls until the submission is finished (FINISHED) and returns its
        state; `on_update` hears each state whose state, position or stage
        changed. A running submission is asked after every RUNNING_POLL_S.
        Past the deadline: ServiceUnavailable (kind "deadline")."""
        last, wait_s = None, poll_s
        while True:
            found = self.status(submission_id, deadline)
            eta = found.get("eta_s")
            # A new line when the ETA moves by a tenth or more, not at every second's drift.
            seen = (found.get("state"), found.get("position"), found.get("stage"), found.get("no_worker"),
                    round(math.log(eta) * 10) if eta else None)
            if seen != last:
                last, wait_s = seen, poll_s
                if on_update is not None:
                    on_update(found)
            if found.get("state") in FINISHED:
                return found
            running = found.get("state") == "running"
            pause = min(RUNNING_POLL_S, wait_s) if running else wait_s
            if deadline is not None and time.monotonic() + pause > deadline:
                raise ServiceUnavailable(f"the grading service at {self.url} did not finish submission "
                                         f"{submission_id} in time (still {_state_words(found)})", "deadline")
            time.sleep(pause)
            if not running:
                wait_s = min(max_poll_s, wait_s * 1.5)  # a long queue needs no second-by-second polling

    # ------------------------------------------------------------ one request

    def _call(self, method: str, path: str, body: Optional[bytes], headers: dict,
              deadline: Optional[float]) -> tuple:
        """(status, bytes) of the answer, retrying what may pass."""
        # Here, not at the top: `tilelab check` imports this module and, without --remote, needs none of them.
        import http.client
        import urllib.error
        import urllib.request

        request_headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **headers}
        for attempt in range(self.attempts):
            timeout = self.timeout
            if deadline is not None:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout <= 0:
                    raise ServiceUnavailable(f"the grading service at {self.url} did not answer before the "
                                             "deadline", "deadline")
            request = urllib.request.Request(self.url + API + path, data=body, method=method,
                                             headers=request_headers)
            try:
                with urllib.request.urlopen(request, timeout=timeout) as answer:
                    return answer.status, answer.read()
            except urllib.error.HTTPError as e:
                error = self._http_error(e)
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                error = self._network_error(e, timeout)
            if error.kind not in ("unreachable", "timeout") and error.status not in RETRIED:
                raise error
            pause = self.backoff_s * 2 ** attempt
            if attempt + 1 == self.attempts or (deadline is not None and time.monotonic() + pause >= deadline):
                raise error
            time.sleep(pause)
        raise AssertionError("not reached: the loop returns or raises")

    def _http_error(self, e) -> ServiceUnavailable:
        raw = e.read()
        try:
            said = json.loads(raw)
        except ValueError:
            said = {}
        said = said if isinstance(said, dict) else {}
        message = " ".join(str(said.get("message") or raw[:200].decode("utf-8", "replace") or e.reason).split())
        code = said.get("error")
        retry = e.headers.get("Retry-After") if e.headers else None
        retry_after = int(retry) if retry and retry.isdigit() else None
        if e.code >= 500:
            return ServiceUnavailable(f"the grading service at {self.url} failed (HTTP {e.code}: {message})",
                                      "server_error", e.code, code, retry_after)
        return ServiceUnavailable(f"the grading service refused: {message} (HTTP {e.code}"
                                  f"{', ' + code if code else ''})", "refused", e.code, code, retry_after)

    def _network_error(self, e: Exception, timeout: float) -> ServiceUnavailable:
        import socket

        reason = getattr(e, "reason", e)  # a URLError's cause, else the error itself
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return ServiceUnavailable(f"the grading service at {self.url} did not answer within {timeout:.0f} s",
                                      "timeout")
        words = {ConnectionRefusedError: "connection refused", socket.gaierror: "host not found",
                 ConnectionResetError: "connection reset"}
        why = next((w for cls, w in words.items() if isinstance(reason, cls)), None)
        why = why or " ".join(str(getattr(reason, "strerror", None) or reason).split()) or type(reason).__name__
        return ServiceUnavailable(f"the grading service at {self.url} cannot be reached ({why})", "unreachable")

    def _json(self, data: bytes) -> dict:
        try:
            found = json.loads(data)
        except ValueError:
            found = None
        if not isinstance(found, dict):
            raise ServiceUnavailable(f"the grading service at {self.url} answered with something that is not "
                                     "its JSON (is the URL the service's?)", "bad_answer")
        return found


def _quoted(part: str) -> str:
    return urllib.parse.quote(str(part), safe="")


def _state_words(found: dict) -> str:
    """"queued, number 3 in line" or "running: build"."""
    state = found.get("state", "unknown")
    if state == "queued" and found.get("position"):
        return f"queued, number {found['position']} in line"
    return f"{state}: {found['stage']}" if found.get("stage") else state
