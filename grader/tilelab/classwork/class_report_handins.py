"""The hand-ins a class report is drawn from: each student's grading read
back whole, or the reason it is left out of the figures.

Two sources give the same list: a graded folder (`tilelab batch`'s OUT,
one OUT/<student>/grade.json each) and the service's latest grades (a
student's grade.json as the service stores it). A grading the report cannot
count alike with the rest (a grader error, a check, another assignment or
another version of this one) is kept with its reason, so that the report
says what is missing instead of quietly showing fewer students.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from ..errors import TilelabError
from ..grading.answers import AnswersResult, QuestionResult
from ..grading.model import STAGES, CaseResult, GradeResult, PartResult, Speed, Stage
from ..grading.traffic import Level, Traffic
from ..outputs.gradescope import is_error_results
from ..spec.assignment import Assignment
from ..system.atomic import read_json
from ..text.numbers import fmt_points

GRADE_FILE = "grade.json"
RESULTS_FILE = "results.json"
DONE_FILE = ".done"


class ClassReportError(TilelabError):
    """A class report cannot be drawn: no graded hand-in to draw it from."""


@dataclass
class HandIn:
    name: str  # the student's id: the folder's name, or the service's student
    result: Optional[GradeResult] = None  # None: left out, for `problem`
    problem: str = ""  # why it is not in the figures, in a few words


def version_problem(result: GradeResult, assignment: Assignment) -> str:
    """What makes `result` a grading of another assignment, or of another
    version of this one (other parts, points or questions), in a few words;
    "" when it was graded against this assignment.yaml. Its figures could
    not be counted with the others': a part worth other points, a question
    asked otherwise."""
    if result.assignment != assignment.name:
        return f"graded for another assignment ({result.assignment or 'unnamed'})"
    parts = {p.id: p for p in result.parts}
    wanted = [p.id for p in assignment.parts]
    if set(parts) < set(wanted):
        return f"graded for some parts only ({', '.join(parts)})"
    if sorted(parts) != sorted(wanted):
        return f"graded against another version of assignment.yaml (its parts: {', '.join(parts) or 'none'})"
    for part in assignment.parts:
        got = parts[part.id]
        here = (float(part.points["correctness"]), float(part.points["speed"]))
        if (round(got.correctness_max, 4), round(got.speed_max, 4)) != here:
            return (f"graded against another version of assignment.yaml ({part.id} worth "
                    f"{fmt_points(got.correctness_max)} + {fmt_points(got.speed_max)} points there, "
                    f"{fmt_points(here[0])} + {fmt_points(here[1])} here)")
    if result.answers is not None:
        asked = [q.id for q in result.answers.questions]
        if asked != [q.id for q in assignment.questions]:
            return "graded against another version of assignment.yaml (other questions)"
    return ""


@functools.lru_cache(maxsize=None)
def _fields(cls) -> frozenset:
    return frozenset(f.name for f in dataclasses.fields(cls))


def _known(cls, d: dict) -> dict:
    """The keys of `d` that are fields of `cls`: to_dict's derived scores are not."""
    names = _fields(cls)
    return {k: v for k, v in d.items() if k in names}


def _part_of(d: dict) -> PartResult:
    if set(STAGES) - set(d["stages"]):
        raise KeyError("a part without every stage")  # written by another grader: its verdicts read otherwise
    part = PartResult(**{**_known(PartResult, d), "traffic": None, "reference_traffic": None,
                         "stages": {name: Stage(**_known(Stage, s)) for name, s in d["stages"].items()},
                         "cases": [CaseResult(**_known(CaseResult, c)) for c in d.get("cases") or []],
                         "speed": Speed(**_known(Speed, d["speed"])) if d.get("speed") else None, "speeds": []})
    traffic = d.get("traffic")
    if isinstance(traffic, dict):
        levels = [Level(**_known(Level, lv)) for lv in traffic.get("levels") or []]
        part.traffic = Traffic(**{**_known(Traffic, traffic), "levels": levels})
    return part


def result_of(doc: dict) -> GradeResult:
    """What a class report reads of a grade.json (GradeResult.to_dict), as
    the result model: every part's stages, cases, headline speed and
    traffic, and the answers. GradeResult.from_dict rebuilds every record at
    every depth, led by type hints: over a class, an order of magnitude slower."""
    answers = doc.get("answers")
    if isinstance(answers, dict):
        questions = [QuestionResult(**_known(QuestionResult, q)) for q in answers.get("questions") or []]
        answers = AnswersResult(**{**_known(AnswersResult, answers), "questions": questions})
    return GradeResult(**{**_known(GradeResult, doc), "parts": [_part_of(p) for p in doc["parts"]],
                          "answers": answers})


def hand_in_of(name: str, doc, assignment: Assignment) -> HandIn:
    """One student's grade.json (GradeResult.to_dict, already parsed) as a
    HandIn: its result when the report can count it, else the reason."""
    if not isinstance(doc, dict):
        return HandIn(name, problem="grade.json is unreadable")
    try:
        result = result_of(doc)
    except (AttributeError, KeyError, TypeError, ValueError):
        return HandIn(name, problem="grade.json is not a grading this grader wrote")
    if result.mode != "grade":
        return HandIn(name, problem="only checked (public cases), not graded")
    problem = version_problem(result, assignment)
    return HandIn(name, None if problem else result, problem)


def hand_ins_of(docs: Iterable, assignment: Assignment) -> list:
    """HandIns of (name, grade.json as a dict, why there is none or "") triples, sorted by name."""
    found = [HandIn(name, problem=problem) if problem else hand_in_of(name, doc, assignment)
             for name, doc, problem in docs]
    return sorted(found, key=lambda h: h.name)


def read_graded_dir(graded_dir: Path, assignment: Assignment) -> list:
    """Every student folder of a graded class (`tilelab batch`'s OUT) as a
    HandIn. A folder counts when it holds what a grading writes (grade.json,
    results.json or the .done marker); batch's own folders and files, and
    hidden ones, are not students."""
    graded_dir = Path(graded_dir)
    if not graded_dir.is_dir():
        raise ClassReportError(f"{graded_dir} is not a directory: give the folder `tilelab batch` graded into "
                               "(its --out)")
    docs = []
    try:
        entries = sorted(graded_dir.iterdir(), key=lambda p: p.name)
    except OSError as e:
        raise ClassReportError(f"{graded_dir} cannot be read ({e.strerror or e})") from None
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir() or entry.is_symlink():
            continue
        grade, results = entry / GRADE_FILE, entry / RESULTS_FILE
        if not any(p.exists() for p in (grade, results, entry / DONE_FILE)):
            continue
        if grade.is_file():
            docs.append((entry.name, read_json(grade), ""))
        elif is_error_results(read_json(results)):
            docs.append((entry.name, None, "grader error (see its results.json)"))
        else:
            docs.append((entry.name, None, "no grade.json (an interrupted grading?)"))
    return hand_ins_of(docs, assignment)


NOTHING_GRADED = "holds no graded hand-in (no <student>/grade.json): grade the class with `tilelab batch` first"


def require_some(hand_ins: list, where: str, nothing: str = NOTHING_GRADED) -> None:
    """Stops with one line when no hand-in can be shown: nothing graded
    (`where` `nothing`), or every grading left out (the commonest reason named)."""
    if not hand_ins:
        raise ClassReportError(f"{where} {nothing}")
    if not any(h.result is not None for h in hand_ins):
        why, n = Counter(h.problem for h in hand_ins).most_common(1)[0]
        raise ClassReportError(f"none of the {len(hand_ins)} graded hand-ins in {where} can be shown ({n} of them: "
                               f"{why})")
