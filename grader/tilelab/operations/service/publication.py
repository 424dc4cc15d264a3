"""What a student may read of a grading before the course staff publish the
grades (the dashboard's Publish): nothing that depends on the answer key or
on the hidden cases beyond what Gradescope shows of its visible tests.

A worker that grades a submission (mode grade) keeps, beside the full
results, the files a student reads until publication (unpublished_files),
all made from one redacted result (before_publication):
- the public cases only, their points and the part's checks and speed, as
  Gradescope's visible tests show them; no hidden case, not even its count
  passed, and no correctness summary a hidden run could have written;
- the answers read for form only, as a check reads them: each answer as
  read, never right or wrong, and no points;
- no total, no time taken and no staff notes.
A student who probes the key by submitting each choice in turn reads the
same pages for every choice (tests/python/test_service_publication.py).
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Optional

from ...grading.answers import AnswersResult, grade_answers
from ...grading.answers_file import ANSWERS_FILE
from ...grading.model import GradeResult, PartResult, rebuilt
from ...grading.scoring import case_points
from ...outputs import gradescope, prairielearn
from ...outputs.report import write_reports
from ...outputs.report_view import UNPUBLISHED
from ...spec.assignment import Assignment

WHEN = UNPUBLISHED.removeprefix("shown ")  # the reports' words (outputs/report_view.py)
ANSWERS_LATER = f"your answers are graded; whether each is right, and its points, are shown {WHEN}"
NOTE = (f"This is your grading as it stands before the course staff publish the grades: the public cases, the "
        f"checks and the speed of each part, and your answers as they were read. The hidden cases, your answers' "
        f"results and your score are shown {WHEN}.")
# The files a student reads until publication, by the results table's column names.
FILES = ("report_md", "report_html", "results_json", "prairielearn")
# Kept beside them, never served: the answers as read for form (no key), so that the files can be
# written again without the hand-in (the counters read later of a hand-in that fails its checksum).
ANSWERS_READ = "answers_read"


def before_publication(result: GradeResult, answers_read: Optional[AnswersResult]) -> GradeResult:
    """The grading as a student may read it before publication (see the
    module's note); `answers_read`: the hand-in's answers as read_answers
    reads them, where the grading has answers."""
    shown = copy.deepcopy(result)
    shown.published = False
    shown.seconds, shown.timings, shown.spans, shown.staff_notes = 0.0, {}, {}, []
    shown.notes = [NOTE, *shown.notes]
    for part in shown.parts:
        _public_only(part)
    if shown.answers is not None:
        shown.answers = answers_read
    return shown


def _public_only(part: PartResult) -> None:
    """The part's public cases and the points they are worth, as if it had no hidden ones."""
    per_case = case_points(part.correctness_max, len(part.cases))
    public = [c for c in part.cases if c.set == "public"]
    part.cases, part.hidden_total = public, 0
    part.correctness_max = round(per_case * len(public), 4)
    part.correctness_score = 0.0 if part.withheld_by else round(per_case * sum(c.passed for c in public), 4)
    correctness = part.stages["correctness"]
    if correctness.status in ("passed", "failed") and public:
        failed = [c.name for c in public if not c.passed]
        correctness.status = "failed" if failed else "passed"
        # Its summary and output may come from the hidden run (a hang, a crash): said again from the public cases.
        correctness.summary = (f"{len(public) - len(failed)}/{len(public)} public cases passed"
                               + (f" (failed: {', '.join(failed[:6])}{', ...' if len(failed) > 6 else ''})"
                                  if failed else ""))
        correctness.details = correctness.details if failed else ""


def read_answers(hand_in: Path, assignment: Assignment) -> AnswersResult:
    """The hand-in's answers.yaml read as a check reads it: the answers without the key."""
    answers = grade_answers(hand_in / ANSWERS_FILE, assignment.questions, None, not_graded_reason=ANSWERS_LATER,
                            not_graded_tail=".")
    for question in answers.questions:
        question.max_score = 0.0  # what each is worth counts in the total, shown at publication
    return answers


def unpublished_files(result: GradeResult, answers_read: Optional[AnswersResult], assignment: Assignment,
                      plot_drawn: Optional[Path] = None) -> dict:
    """The files a student reads until publication: FILES -> text, and
    ANSWERS_READ -> `answers_read` (read_answers) as a dict, to write them
    again from. `plot_drawn`: the grading's roofline.png, which publication
    changes nothing of (speeds, traffic, ceilings): copied, not drawn again."""
    shown = before_publication(result, answers_read)
    with tempfile.TemporaryDirectory(prefix="tilelab-unpublished-") as tmp:
        written = write_reports(shown, Path(tmp), audience="student", plot_drawn=plot_drawn)
        return {
            "report_md": written["markdown"].read_text(encoding="utf-8"),
            "report_html": written["html"].read_text(encoding="utf-8"),
            "results_json": visible_tests(json.dumps(gradescope.results_json(shown, assignment))),
            "prairielearn": json.dumps(prairielearn.results(shown, assignment, written.get("plot"))),
            ANSWERS_READ: answers_read.to_dict() if answers_read is not None else None,
        }


def kept_answers(unpublished: Optional[dict]) -> Optional[AnswersResult]:
    """The answers as read that unpublished_files kept beside its files, None where there are none."""
    kept = (unpublished or {}).get(ANSWERS_READ)
    return rebuilt(AnswersResult, kept) if isinstance(kept, dict) else None


HIDDEN_NOTE = (f"Some tests, and the total, are shown {WHEN} (the dashboard's Publish); the course staff see them "
               "now.")


def visible_tests(results_json: str) -> str:
    """Gradescope's results as a student may read them before publication:
    the tests marked visible, without the total they would give away."""
    doc = json.loads(results_json)
    tests = doc.get("tests", [])
    shown = [t for t in tests if t.get("visibility", doc.get("visibility", "visible")) == "visible"]
    if len(shown) == len(tests):
        return results_json
    kept = {k: v for k, v in doc.items() if k not in ("score", "tests", "leaderboard")}
    kept["tests"] = shown
    kept["output"] = (str(doc.get("output", "")) + "\n\n" + HIDDEN_NOTE).strip()
    return json.dumps(kept)
