"""The self-test's security checks: hand-ins that attack the grader.

The security-* hand-ins forge results, call or replace the harness's own
functions, read secrets, fork without end, fill the disk, reach the network,
run for ever. Besides their expected.yaml, each must leave results.json valid
and nothing a student sees holding a secret (check_hand_in), and the network
listener must receive nothing. The checks mean something only where student
code runs as another user (the grader as root); elsewhere they are not run.
"""

from __future__ import annotations

import secrets
import socket
import threading
from pathlib import Path

from ..authoring.starter import solution_region_lines
from ..grading.answer_key import load_key
from ..grading.model import GradeResult
from ..outputs.gradescope import results_json, spec_problems, student_visible_text
from ..outputs.rendering import render_html, render_markdown
from ..spec.assignment import CASE_SETS, Assignment
from ..spec.public import public_assignment_text

CANARY_PATH = Path("/tmp/tilelab-security-canary.txt")
LISTENER_PORT = 47321  # the port security-network/naive.cu aims at


class Probes:
    """The canary file and the network listener, for the length of the checks."""

    def __init__(self) -> None:
        self.token = "CANARY-" + secrets.token_hex(12)
        self.connections: list = []
        self.listening = False
        self._server = None
        self._thread = None

    def __enter__(self) -> "Probes":
        CANARY_PATH.unlink(missing_ok=True)
        CANARY_PATH.write_text(self.token + "\n")
        CANARY_PATH.chmod(0o600)
        try:
            self._server = socket.create_server(("127.0.0.1", LISTENER_PORT))
            self._server.settimeout(0.5)
            self.listening = True
            self._thread = threading.Thread(target=self._accept, daemon=True)
            self._thread.start()
        except OSError:
            self._server = None  # the port is taken: the network check is reported as not run
        return self

    def _accept(self) -> None:
        while self._server is not None:
            try:
                conn, peer = self._server.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(2)
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
            self.connections.append((peer, data))

    def __exit__(self, *exc) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        CANARY_PATH.unlink(missing_ok=True)


def leak_markers(root: Path, assignment: Assignment, key_path: Path, canary: str) -> dict:
    """Strings that must never reach a student, each with what it would reveal."""
    markers = {canary: "the canary planted for this run",
               # printed by security-read-secrets when it could read a compiled reference
               "READ-COMPILED-REFERENCE": "a compiled reference solution"}
    public_text = public_assignment_text(root) + "".join(
        p.read_text(errors="replace") for p in (root / "starter").glob("*"))
    if key_path.exists():
        for qid, answer in load_key(key_path).items():  # raw text, as the key file spells it
            text = answer[:48]
            if len(text) >= 5 and text not in public_text:
                markers[text] = f"the key's answer to {qid}"
    public_names = {c.name for p in assignment.parts for s in CASE_SETS if s != "hidden" for c in p.cases[s]}
    for p in assignment.parts:
        for c in p.cases["hidden"]:
            if c.name not in public_names and len(c.name) >= 4:
                markers[c.name] = f"the hidden case {c.name} of {p.id}"
    starter_lines = {line.strip() for f in (root / "starter").glob("*.cu") for line in f.read_text().splitlines()}
    for f in sorted((root / "solutions").glob("*.cu")):
        for line in solution_region_lines(f.read_text()):
            stripped = line.strip()
            if stripped.startswith("//") and len(stripped) >= 40 and stripped not in starter_lines:
                markers[stripped[3:]] = f"a comment inside the solution of {f.name}"
    return markers


def check_hand_in(result: GradeResult, assignment: Assignment, markers: dict) -> list:
    """Problems found in what a student would see of this grading (empty:
    none): results.json against Gradescope's field list and types, and any
    secret in its non-hidden tests or the student report (the run's canary,
    an answer of the key, a hidden case's name, solution-region text)."""
    doc = results_json(result, assignment)
    problems = [f"results.json: {p}" for p in spec_problems(doc)]
    seen = "\n".join([student_visible_text(doc), render_markdown(result, audience="student"),
                      render_html(result, audience="student", plot_file=None)])
    for marker, what in markers.items():
        if marker in seen:
            problems.append(f"a student could see {what}")
    return problems
