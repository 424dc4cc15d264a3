"""What changed verdict between two checks of the same files, for `tilelab check --watch`.

A verdict is what the check's table shows a student: each part's build,
each public case, the launch checks, the sanitizers, the speed stage and
the points, and each answer of answers.yaml as read. After a save, the
watch names those that changed since the check before it. A verdict that
did not run on one side (a case behind a build that failed) is no change of
its own: the build's line says it.
"""

from __future__ import annotations

from typing import Optional

from ..grading.model import GradeResult

_WORDS = {"passed": "ok", "failed": "FAIL", "not_run": "not run", "error": "grader error"}
_STAGES = ("launch", "memcheck", "racecheck", "speed")
SHOWN = 8  # changes named one by one; the rest are counted
_NOT_RUN = _WORDS["not_run"]


def verdicts(result: GradeResult) -> dict:
    """Name -> verdict in the table's words, in the table's order."""
    found = {}
    for p in result.parts:
        static, build = p.stages["static"].status, p.stages["build"].status
        found[f"{p.id} build"] = _WORDS["failed" if "failed" in (static, build) else build]
        for c in p.cases:
            if c.set == "public":
                found[f"{p.id} case {c.name}"] = "ok" if c.passed else ("not run" if c.status == "not_run" else "FAIL")
        for name in _STAGES:
            found[f"{p.id} {name}"] = _WORDS.get(p.stages[name].status, p.stages[name].status)
        found[f"{p.id} points"] = f"{p.score:g}/{p.max_score:g}"
    if result.answers is not None:
        found["answers.yaml"] = "read" if result.answers.status == "read" else "not readable"
        for q in result.answers.questions:
            found[f"answer {q.id}"] = q.status
    return found


def changes(before: Optional[GradeResult], after: GradeResult) -> list:
    """'naive build: FAIL -> ok' for each verdict that changed; [] when none did (or no check came before)."""
    if before is None:
        return []
    old, new = verdicts(before), verdicts(after)
    return [f"{name}: {old[name]} -> {verdict}" for name, verdict in new.items()
            if name in old and old[name] != verdict and _NOT_RUN not in (old[name], verdict)]


def changes_line(before: Optional[GradeResult], after: GradeResult) -> str:
    """The changes in one line, the first SHOWN by name."""
    if before is None:
        return ""
    found = changes(before, after)
    if not found:
        return "since the last save: no verdict changed"
    more = f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return "since the last save: " + "; ".join(found[:SHOWN]) + more
