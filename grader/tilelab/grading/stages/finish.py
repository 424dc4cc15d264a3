"""What ends a grading: each part's messages naming the student's own
file, its points, and the questions."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from ...grading.answer_key import AnswerKeyError, load_key
from ...grading.answers import FORM_ONLY, NO_KEY, AnswersResult, grade_answers
from ...grading.answers_file import ANSWERS_FILE
from ...spec.assignment import Assignment
from ...system.paths import answer_key_path
from ..context import Grading, PartState
from ..model import NO_GPU, STAGES
from ..scoring import case_points


def _copy_pattern(file: str) -> "re.Pattern":
    """Any copy of `file` the grader compiled: SubmissionBuild's sources
    folder in a private work folder. An executable taken from the part
    cache was compiled from an earlier grading's copy, and its line tables
    (which compute-sanitizer reads) name that one."""
    return re.compile(r"/[^\s'\"()<>]*/submission-[0-9a-f]{16}/sources/" + re.escape(file) + r"\b")


def finish_parts(g: Grading, states: list, gpu: Optional[dict]) -> None:
    """Every stage still unset was skipped on purpose; then each part is scored."""
    for s in states:
        _name_the_students_file(s, g.options.mode)
        s.skip_from(STAGES[0], "not run: switched off for this run" if gpu else NO_GPU)
        for c in s.result.cases:
            if not c.ran and c.reasons == ["not run"]:
                c.reasons = [s.stage("correctness").summary]
        _score(s)


def grade_questions(g: Grading) -> Optional[AnswersResult]:
    """The questions stage, where the assignment has questions and the options ask for them."""
    opt = g.options
    if not g.assignment.questions or not (opt.questions or opt.answers_only):
        return None
    g.progress("questions")
    with g.timed("questions"):
        result = questions_result(g.submission, g.assignment, opt.root, opt.answer_key,
                                  FORM_ONLY if opt.mode == "check" else NO_KEY)
    if result.status == "missing":
        result.notes += g.misplaced_hints(ANSWERS_FILE)  # handed in deeper or misnamed
    return result


def _name_the_students_file(s: PartState, mode: str) -> None:
    """The compiler, compute-sanitizer and the harness name the copy of the
    part file the grader built; say the student's own instead: the path
    they typed from (`tilelab check`: starter/boundary.cu:39), or the file
    name alone where it was uploaded (boundary.cu:39)."""
    own = s.part.file
    if mode == "check":
        try:
            own = os.path.relpath(s.source)
        except ValueError:
            own = str(s.source)
    pattern = _copy_pattern(s.part.file)
    for stage in s.result.stages.values():
        stage.summary = pattern.sub(lambda _: own, stage.summary)
        stage.details = pattern.sub(lambda _: own, stage.details)


def _score(s: PartState) -> None:
    r = s.result
    per_case = case_points(r.correctness_max, len(r.cases))
    withheld = [name for name in ("launch", "memcheck", "racecheck", "speed") if s.stage(name).status == "failed"]
    r.withheld_by = withheld
    if withheld:
        r.correctness_score = 0.0
        st = s.stage("correctness")
        titles = {"launch": "launch checks", "memcheck": "memcheck", "racecheck": "racecheck",
                  "speed": "the timed calls"}
        st.summary += f" — correctness points withheld: the part failed {', '.join(titles[w] for w in withheld)}"
    else:
        r.correctness_score = round(per_case * sum(c.passed for c in r.cases), 4)
    eligible = not withheld and s.stage("speed").status == "passed" and r.speed is not None
    r.speed_score = round(r.speed_max * r.speed.fraction, 4) if eligible else 0.0


def questions_result(submission: Path, assignment: Assignment, root: Path,
                     answer_key: Optional[Path] = None, without_key: str = NO_KEY) -> AnswersResult:
    """answers.yaml graded against the key; without a key (a student's copy)
    read and checked for form, scoring nothing."""
    key_path = answer_key_path(root, answer_key)
    answers_path = submission / ANSWERS_FILE
    if not key_path.is_file():
        result = grade_answers(answers_path, assignment.questions, None, not_graded_reason=without_key)
        result.staff_note = f"no answer key at {key_path}"
        return result
    try:
        key = load_key(key_path, assignment.questions)
    except AnswerKeyError as e:
        # The key is the course's, not the student's: they are told only that
        # the grader could not grade; the error (which may quote the key) is for staff.
        result = grade_answers(answers_path, assignment.questions, None,
                               not_graded_reason="not graded: the grader's answer key is broken (not your fault; "
                                                 "tell the course staff)")
        result.staff_note = str(e)
        return result
    return grade_answers(answers_path, assignment.questions, key)
