"""PrairieLearn's external-grader results, from the same result model as Gradescope's.

PrairieLearn (docs/externalGrading.md, "Grading results") reads
/grade/results/results.json: TOP_LEVEL_FIELDS and TEST_FIELDS, at most
MAX_BYTES. Not gradable (no points given or taken, the attempt not used up):
a grader with no GPU, or a hand-in none of whose part files compiles. Tests
Gradescope would hide from students are left out.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Optional

from ..grading.model import GradeResult
from ..spec.assignment import Assignment
from . import causes
from .fields import field_problems
from .gradescope import graded_tests

MAX_BYTES = 1_000_000  # PrairieLearn refuses a larger results.json
MAX_OUTPUT_CHARS = 20_000  # per text field, so that many tests still fit
TOP_LEVEL_FIELDS = {"gradable": bool, "score": (int, float), "format_errors": (str, list), "message": str,
                    "output": str, "images": list, "tests": list}
TEST_FIELDS = {"name": str, "description": str, "points": (int, float), "max_points": (int, float),
               "message": str, "output": str, "images": list}


def _cut(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT_CHARS else text[:MAX_OUTPUT_CHARS] + "\n[... cut ...]"


def _image(path: Path, label: str) -> dict:
    return {"label": label, "url": "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")}


def _not_gradable(result: GradeResult) -> list:
    """Why nothing of this hand-in can be graded (empty: it can be). A
    compile error of every part counts, as in PrairieLearn's own C grader."""
    if causes.gpu_withheld(result):
        return ["The grading machine has no GPU, so no part could be run. This is not a problem with your "
                "work: tell the course staff."]
    uncompiled = [p for p in result.parts if p.stages["build"].status == "failed"]
    if uncompiled and not any(causes.built(p) for p in result.parts):
        return [f"{p.file}: {p.stages['build'].summary}" for p in uncompiled]
    return []


def results(result: GradeResult, assignment: Assignment, plot: Optional[Path] = None) -> dict:
    """The score is the points over GradeResult.max_score, which leaves extra
    credit out of the denominator. PrairieLearn takes a score in [0, 1]
    only, so extra credit past 1 is cut at 1 and the message says so (its
    own way to extra credit is the course's maxBonusPoints)."""
    # Without a GPU, as on Gradescope: each part's build, and no test for what did not run.
    tests = [t for t in graded_tests(result, assignment, causes.gpu_withheld(result)) if t["visibility"] != "hidden"]
    extra = sum(p.score for p in result.parts if p.extra_credit)
    message = f"{result.score:.2f} / {result.max_score:.2f} points"
    if any(p.extra_credit for p in result.parts):
        message += f" ({extra:.2f} of them extra credit, on top of the total)"
    fraction = result.score / result.max_score if result.max_score else 0.0
    if fraction > 1:
        message += "; PrairieLearn's score stops at 100 %"
    doc = {
        "message": message,
        "tests": [{"name": t["name"], "description": ", ".join(t.get("tags", [])), "points": t["score"],
                   "max_points": t["max_score"], "message": t["status"], "output": _cut(t["output"])}
                  for t in tests],
    }
    reasons = _not_gradable(result)
    if reasons:
        doc.update(gradable=False, format_errors=reasons, message="Not graded: " + reasons[0])
    else:
        doc.update(gradable=True, score=round(min(1.0, fraction), 6))
    if plot is not None and plot.is_file():
        doc["images"] = [_image(plot, "This submission on the GPU's roofline")]
    if len(json.dumps(doc)) > MAX_BYTES:
        doc.pop("images", None)
        for t in doc["tests"]:
            t["output"] = t["output"][:2000]
    return doc


def error_results(traceback_text: str) -> dict:
    """When the grader itself fails: not gradable, so the attempt is not lost."""
    return {"gradable": False, "format_errors": ["The autograder itself failed; your submission was not graded."],
            "message": "The autograder failed while grading this submission. This is not a problem with your work: "
                       "please tell your instructor or TA.",
            "output": _cut(traceback_text[-4000:])}


def spec_problems(doc) -> list:
    """What in a results.json breaks PrairieLearn's format (empty: nothing)."""
    if not isinstance(doc, dict):
        return ["results.json is not a JSON object"]
    problems = field_problems(doc, TOP_LEVEL_FIELDS)
    if doc.get("gradable", True) is not False:
        score = doc.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 <= score <= 1.0:
            problems.append(f"a gradable result needs a score in [0, 1], not {score!r}")
    for i, image in enumerate(doc.get("images", [])):
        if not (isinstance(image, dict) and str(image.get("url", "")).startswith("data:image/")):
            problems.append(f"images[{i}] is not a data URL")
    for i, test in enumerate(doc.get("tests", []) if isinstance(doc.get("tests"), list) else []):
        if not isinstance(test, dict) or "name" not in test:
            problems.append(f"tests[{i}] is not an object with a name")
            continue
        problems += field_problems(test, TEST_FIELDS, f"tests[{i}].")
    try:
        text = json.dumps(doc, allow_nan=False)
    except ValueError as e:
        return problems + [f"not valid JSON: {e}"]
    if len(text.encode()) > MAX_BYTES:
        problems.append(f"larger than PrairieLearn's 1 MB ({len(text.encode())} bytes)")
    return problems
