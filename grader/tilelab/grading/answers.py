"""Grading the exercise answers a student writes into answers.yaml.

The questions come from assignment.yaml (`Assignment.questions`), the key
from solutions/answers.yaml (answer_key.load_key), the file through
answers_file.py. An unreadable file or an answer full of typos has a defined
outcome (QUESTION_STATUSES) and a message in the student's terms; none
raises. No message meant for a student holds the key: `QuestionResult.key`
keeps it for staff views only.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from yaml.nodes import ScalarNode, SequenceNode

from ..text.numbers import fmt_points_unit
from .answers_file import ANSWERS_FILE, FileProblem, cut, read_answers_file

TEXT_DISPLAY_CHARS = 2000  # a text answer is cut to this for display
SHORT_DISPLAY_CHARS = 200  # a number or choice answer, likewise
MAX_NOTES = 10  # unknown ids and such listed by name; the rest are counted

# correct, wrong, unanswered; invalid: cannot be read as what the question
# asks for; collected: a text answer, for a TA; not_graded: well-formed, but
# there is no key in this copy.
QUESTION_STATUSES = ("correct", "wrong", "unanswered", "invalid", "collected", "not_graded")
NO_KEY = "not graded here: the answer key is not in this copy (your answers are graded when you hand them in)"
# A check reads answers.yaml for form alone, wherever it runs: told so, and not that a key is missing.
FORM_ONLY = "not graded in a check, which reads your answers for form only: they are graded when you hand them in"
NOT_GRADED_HERE = "; not graded here."  # ends the message of an answer read without the key

_NULLS = {"", "~", "null", "Null", "NULL"}
_YAML_TRUE = {"yes", "true", "on", "y"}
_YAML_FALSE = {"no", "false", "off", "n"}
_NAN_INF = {"nan", ".nan", "inf", ".inf", "+inf", "+.inf", "-inf", "-.inf", "infinity", "+infinity", "-infinity"}

# The leading number of an answer. Thousands separators only in groups of
# three after a first group that does not start with 0 ("1,024", not
# "0,417", which is a decimal comma); '_' between digits as YAML allows.
_NUMBER = re.compile(
    r"""(?P<number>[+-]?
        (?: [1-9][0-9]{0,2}(?:,[0-9]{3})+(?:\.[0-9]*)?
          | [0-9]+(?:_[0-9]+)*(?:\.[0-9]*)?
          | \.[0-9]+ )
        (?:[eE][+-]?[0-9]+)?)""",
    re.X,
)


@dataclass
class QuestionResult:
    id: str
    kind: str  # number | choice | text
    status: str  # one of QUESTION_STATUSES
    score: float = 0.0
    max_score: float = 0.0  # automatic points; 0 for text questions
    manual_points: float = 0.0  # what a TA may award by hand (text questions)
    answer: str = ""  # the answer as handed in, cut for display; "" when there is none
    read: str = ""  # what the grader read it as: a number, an option id; "" when nothing
    message: str = ""  # for the student; never holds the key
    key: str = ""  # the key (a model answer for text questions): staff views only
    line: int = 0  # its line in answers.yaml, 0 when none


@dataclass
class AnswersResult:
    status: str  # one of answers_file.FILE_STATUSES
    message: str = ""  # about the file as a whole, for the student
    summary: str = ""  # the same in a few words ("answers.yaml is not valid YAML (line 3)"); "" when read
    questions: list[QuestionResult] = field(default_factory=list)  # in assignment order
    notes: list = field(default_factory=list)  # unknown ids, duplicates: reported, not graded
    graded: bool = True  # False: no key here, nothing scored
    not_graded_reason: str = ""
    staff_note: str = ""  # for staff views only (a broken key's error, say)
    file: str = ANSWERS_FILE

    @property
    def score(self) -> float:
        return round(sum(q.score for q in self.questions), 4)

    @property
    def max_score(self) -> float:
        return round(sum(q.max_score for q in self.questions), 4)

    @property
    def manual_max(self) -> float:
        return round(sum(q.manual_points for q in self.questions), 4)

    def count(self, *statuses: str) -> int:
        return sum(1 for q in self.questions if q.status in statuses)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["score"] = self.score
        d["max_score"] = self.max_score
        d["manual_max"] = self.manual_max
        return d


# --- reading one answer ------------------------------------------------------------


def _is_empty(node) -> bool:
    if isinstance(node, ScalarNode):
        if node.style is None and node.value.strip() in _NULLS:
            return True
        return not node.value.strip()
    return not node.value  # [] or {}


def _flatten(node, budget: int = TEXT_DISPLAY_CHARS + 1) -> str:
    """A list or mapping answer as one line of text, for display only."""
    if isinstance(node, ScalarNode):
        return node.value[:budget]
    parts, used = [], 0
    items = node.value if isinstance(node, SequenceNode) else [pair for pair in node.value]
    for item in items:
        if used > budget:
            break
        if isinstance(node, SequenceNode):
            text = _flatten(item, budget - used)
        else:
            text = f"{_flatten(item[0], 80)}: {_flatten(item[1], budget - used)}"
        parts.append(text)
        used += len(text) + 2
    joined = ", ".join(parts)
    return f"[{joined}]" if isinstance(node, SequenceNode) else f"{{{joined}}}"


def _number_text(x: float) -> str:
    return f"{x:.10g}"


def parse_number(text: str) -> tuple:
    """(value, unit, problem) for a number answer typed as text: the leading
    number when what follows is only a unit ("388.75 GFLOP/s", "62.5%",
    "1,024", "1e3"); otherwise value None and a problem for the student."""
    s = " ".join(text.split())
    if s.startswith(("~", "≈")):
        s = s[1:].lstrip()
    low = s.lower()
    if low in _YAML_TRUE | _YAML_FALSE:
        return None, "", f"'{s}' is a yes/no value, not a number"
    if low in _NAN_INF:
        return None, "", f"'{s}' is not a finite number"
    m = _NUMBER.match(s)
    if not m:
        return None, "", f"'{cut(s, 40)}' does not start with a number"
    number, rest = m.group("number"), s[m.end():].strip()
    if rest:
        if any(ch.isdigit() or ch.isnumeric() for ch in rest):
            if rest[0] == "," or (rest[0] == "." and rest[1:2].isdigit()):
                return None, "", (f"'{cut(s, 40)}' is not a single number: write the decimal point as '.', "
                                  "and ',' only between groups of three digits (1,024)")
            return None, "", (f"'{cut(s, 40)}' is not a single number: write one result, without expressions, "
                              "ranges or second values")
        if not (rest[0].isalpha() or rest[0] in "%×°µ"):
            return None, "", f"'{cut(s, 40)}' is not a single number: only a unit may follow the number"
    try:
        value = float(number.replace(",", "").replace("_", ""))
    except ValueError:  # the pattern admits only what float reads; kept for safety
        return None, "", f"'{cut(s, 40)}' is not a number"
    if not math.isfinite(value):
        return None, "", f"'{cut(s, 40)}' is too large to be an answer"
    return value, rest, ""


def _choice(text: str, options: dict) -> tuple:
    """(option id, problem)."""
    s = " ".join(text.split()).lower()
    m = re.fullmatch(r"\(?\s*([a-z0-9-]+)\s*[).]?", s)
    candidate = m.group(1) if m else s
    if candidate in options:
        return candidate, ""
    if set(options) == {"yes", "no"}:
        # YAML 1.1 reads unquoted yes/no/on/off/true/false as booleans; a
        # student who wrote any of them meant the option.
        if candidate in _YAML_TRUE:
            return "yes", ""
        if candidate in _YAML_FALSE:
            return "no", ""
    listed = ", ".join(options)
    return None, f"'{cut(' '.join(text.split()), 40)}' is not an option of this question (give one of: {listed})"


def _tolerance_words(tolerance: float) -> str:
    if tolerance <= 0:
        return "not the expected value (this question needs the exact value)"
    return f"not within {100 * tolerance:g} % of the expected value"


def _within(got: float, key: float, tolerance: float) -> bool:
    if tolerance <= 0:
        return got == key or abs(got - key) <= 1e-12 * abs(key)
    return abs(got - key) <= tolerance * abs(key) * (1 + 1e-9)

# --- grading -----------------------------------------------------------------------


def _grade_one(q, node, key, graded: bool, not_graded_tail: str = NOT_GRADED_HERE) -> QuestionResult:
    """One question's answer node (already known to be non-empty); an answer
    read without the key ends its message with `not_graded_tail`."""
    r = QuestionResult(id=q.id, kind=q.kind, status="invalid", max_score=q.points, manual_points=q.manual_points,
                       key="" if key is None else _key_text(q, key))
    r.line = node.start_mark.line + 1
    if not isinstance(node, ScalarNode):
        what = "a list" if isinstance(node, SequenceNode) else "a mapping"
        limit = TEXT_DISPLAY_CHARS if q.kind == "text" else SHORT_DISPLAY_CHARS
        r.answer = cut(_flatten(node), limit)
        single = {"number": "a single number", "choice": "a single option id",
                  "text": "one text (quote it, or write `|` and the text indented on the next lines)"}[q.kind]
        r.message = f"The answer is {what}; give {single}."
        return r
    raw = node.value
    if q.kind == "text":
        r.answer = cut(raw.strip(), TEXT_DISPLAY_CHARS)
        r.read = r.answer
        r.status = "collected"
        r.message = f"A TA grades this answer by hand (up to {fmt_points_unit(q.manual_points)})."
        return r
    r.answer = cut(" ".join(raw.split()), SHORT_DISPLAY_CHARS)
    if q.kind == "number":
        value, unit, problem = parse_number(raw)
        if value is None:
            r.message = f"{problem[0].upper()}{problem[1:]}."
            return r
        r.read = _number_text(value)
        read = f"Read as {r.read}" + (f"; the unit '{cut(unit, 30)}' was ignored" if unit else "")
        if not graded:
            r.status, r.message = "not_graded", f"{read}{not_graded_tail}"
        elif _within(value, float(key), q.tolerance):
            r.status, r.score, r.message = "correct", q.points, f"{read}."
        else:
            r.status, r.message = "wrong", f"{read}, which is {_tolerance_words(q.tolerance)}."
        return r
    option, problem = _choice(raw, q.options)
    if option is None:
        r.message = f"{problem[0].upper()}{problem[1:]}."
        return r
    r.read = option
    if not graded:
        r.status, r.message = "not_graded", f"Read as option {option}{not_graded_tail}"
    elif option == key:
        r.status, r.score, r.message = "correct", q.points, f"Read as option {option}."
    else:
        r.status, r.message = "wrong", f"Option {option} is not the right one."
    return r


def _key_text(q, key) -> str:
    if q.kind == "number":
        return f"{_number_text(float(key))} (± {100 * q.tolerance:g} %)" if q.tolerance else _number_text(float(key))
    return cut(str(key), TEXT_DISPLAY_CHARS)


def _unanswered(q, key, message: str) -> QuestionResult:
    return QuestionResult(id=q.id, kind=q.kind, status="unanswered", max_score=q.points,
                          manual_points=q.manual_points, message=message,
                          key="" if key is None else _key_text(q, key))


def _same_answer(a, b) -> bool:
    return (isinstance(a, ScalarNode) and isinstance(b, ScalarNode)
            and " ".join(a.value.split()) == " ".join(b.value.split()))


def grade_answers(path: Path, questions: tuple, key: Optional[dict], *,
                  not_graded_reason: str = NO_KEY, not_graded_tail: str = NOT_GRADED_HERE) -> AnswersResult:
    """Grades the answers file at `path` (which may not exist) against `key`
    (question id -> answer, from load_key). With key None the answers are
    read and checked for form but not scored, each answer's message ending
    with `not_graded_tail`."""
    path = Path(path)
    graded = key is not None
    key = key or {}
    name = path.name or ANSWERS_FILE
    notes: list = []
    try:
        entries = read_answers_file(path, name, notes=notes)
    except FileProblem as p:
        result = AnswersResult(status=p.status, message=p.message, summary=p.short, graded=graded, file=name,
                               not_graded_reason="" if graded else not_graded_reason)
        result.questions = [_unanswered(q, key.get(q.id), f"{p.short}.") for q in questions]
        return result

    by_id = {q.id: q for q in questions}
    given: dict = {}  # question id -> [(line, node)]
    unknown = []  # (text, line)
    for text, line, node in entries:
        if text is not None and text.strip() in by_id:
            given.setdefault(text.strip(), []).append((line, node))
        else:
            unknown.append((text, line))

    result = AnswersResult(status="read" if entries else "empty", graded=graded, file=name, notes=notes,
                           not_graded_reason="" if graded else not_graded_reason)
    if not entries:
        result.message = f"{name} holds no answers: every question counts as unanswered."
        result.summary = f"{name} holds no answers"

    near_miss = {}  # question id -> the unknown key that looks like it
    for text, line in unknown[:MAX_NOTES]:
        if text is None:
            result.notes.append(f"Line {line}: an entry whose key is not a question id was ignored.")
            continue
        shown = cut(" ".join(text.split()), 40)
        close = difflib.get_close_matches(text.strip().lower().replace("_", "-"), list(by_id), n=1, cutoff=0.75)
        if close:
            near_miss.setdefault(close[0], (shown, line))
            result.notes.append(f"Line {line}: '{shown}' is not a question id, so its answer was ignored "
                                f"(did you mean '{close[0]}'?).")
        else:
            result.notes.append(f"Line {line}: '{shown}' is not a question id, so its answer was ignored.")
    if len(unknown) > MAX_NOTES:
        result.notes.append(f"... and {len(unknown) - MAX_NOTES} more entries that are not question ids.")

    for q in questions:
        answers = given.get(q.id, [])
        filled = [(line, node) for line, node in answers if not _is_empty(node)]
        lines = ", ".join(str(line) for line, _ in answers)
        if len(answers) > 1:
            result.notes.append(f"'{q.id}' is given {len(answers)} times (lines {lines}).")
        if not filled:
            message = f"Left empty after '{q.id}:'." if answers else f"'{q.id}' is not in {name}."
            if q.id in near_miss:
                shown, line = near_miss[q.id]
                message = f"Nothing under '{q.id}'; the answer under '{shown}' (line {line}) was ignored."
            result.questions.append(_unanswered(q, key.get(q.id), message))
            continue
        if any(not _same_answer(filled[0][1], node) for _, node in filled[1:]):
            r = _unanswered(q, key.get(q.id), "")
            r.status, r.line = "invalid", filled[0][0]
            r.answer = " / ".join(cut(_flatten(node), 60) for _, node in filled)
            r.message = (f"Answered {len(filled)} times with different answers (lines "
                         f"{', '.join(str(line) for line, _ in filled)}), so none was graded: keep one.")
            result.questions.append(r)
            continue
        r = _grade_one(q, filled[0][1], key.get(q.id), graded, not_graded_tail)
        if len(answers) > 1:
            what = "only one holds an answer" if len(filled) == 1 else "each holds the same answer"
            r.message += f" ('{q.id}' appears on lines {lines}; {what}: keep one.)"
        result.questions.append(r)
    return result


def problem_lines(result: AnswersResult) -> list:
    """What in the answers cannot be graded, a line each, in the words above:
    the file as a whole first when it was not read; else each answer that
    cannot be read (its id, line and message); then the file's notes
    (duplicates, unknown ids). `tilelab check` and `tilelab grade` print
    these, so that a problem is not found only in the report."""
    if result.status != "read":
        # Its notes then say where a file by another name or deeper was found (stages/finish.py).
        return [result.message or result.summary] + list(result.notes)
    lines = [f"{result.file}" + (f" line {q.line}" if q.line else "") + f": '{q.id}': {q.message}"
             for q in result.questions if q.status == "invalid"]
    return lines + [f"{result.file}: {note}" for note in result.notes]


def answered(result: AnswersResult) -> int:
    """Questions with an answer that could be read: one that cannot is not answered."""
    return sum(q.status not in ("unanswered", "invalid") for q in result.questions)
