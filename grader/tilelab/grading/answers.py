"""Grading the exercise answers a student writes into answers.yaml.

The questions come from assignment.yaml (`Assignment.questions`), the key
from solutions/answers.yaml (`load_key`). The student's file is untrusted: it
may be missing, huge, binary, not YAML, not a mapping, full of typos, or
built to exhaust the parser. Each of those has a defined outcome and a
message in the student's terms; none of them raises.

How the file is read:
  - at most MAX_BYTES; a larger file is not parsed at all;
  - YAML is composed into nodes and never constructed: no Python object is
    made from it, every scalar keeps the text the student typed (so `no` stays
    "no", `1e3` and `0516` read as the numbers they look like, `1:30` is not
    sexagesimal 90), and duplicate keys are all seen;
  - aliases (`*name`) are refused, which makes "billion laughs" files fail
    fast instead of expanding.

Outcomes per question: correct, wrong, unanswered, invalid (an answer that
cannot be read as what the question asks for), collected (a text answer, for
a TA) and not_graded (well-formed, but there is no key in this copy). No
message meant for a student ever holds the key; `QuestionResult.key` keeps it
for staff views only.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import yaml
from yaml.composer import Composer
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

ANSWERS_FILE = "answers.yaml"
MAX_BYTES = 64 * 1024
TEXT_DISPLAY_CHARS = 2000  # a text answer is cut to this for display
SHORT_DISPLAY_CHARS = 200  # a number or choice answer, likewise
MAX_NOTES = 10  # unknown ids and such listed by name; the rest are counted

QUESTION_STATUSES = ("correct", "wrong", "unanswered", "invalid", "collected", "not_graded")
FILE_STATUSES = (
    "read",  # parsed; the questions say the rest
    "empty",  # no YAML document in it (blank, or comments only)
    "missing",  # not handed in
    "too_large",  # over MAX_BYTES, not parsed
    "not_text",  # binary, or not UTF-8
    "invalid_yaml",  # YAML could not parse it
    "not_a_mapping",  # a list or a single value at the top
    "rejected",  # a link, a device, aliases, nesting too deep
)
NO_KEY = "not graded here: the answer key is not in this copy (your answers are graded when you hand them in)"

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


class AnswerKeyError(ValueError):
    """solutions/answers.yaml is missing, unreadable or does not fit the questions."""


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
    status: str  # one of FILE_STATUSES
    message: str = ""  # about the file as a whole, for the student
    summary: str = ""  # the same in a few words ("answers.yaml is not valid YAML (line 3)"); "" when read
    questions: list = field(default_factory=list)  # of QuestionResult, in assignment order
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


# --- reading the file ------------------------------------------------------------


class _FileProblem(Exception):
    def __init__(self, status: str, message: str, short: str):
        super().__init__(message)
        self.status, self.message, self.short = status, message, short


class _AliasFound(Exception):
    def __init__(self, anchor: str, line: int):
        super().__init__(anchor)
        self.anchor, self.line = anchor, line


class _Loader(Reader, Scanner, Parser, Composer, BaseResolver):
    """Composes YAML into nodes, every scalar tagged as a plain string, and
    refuses aliases. Nothing is constructed from the nodes."""

    def __init__(self, stream):
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        BaseResolver.__init__(self)

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _AliasFound(event.anchor, event.start_mark.line + 1)
        return super().compose_node(parent, index)


def _read_bytes(path: Path, limit: int, name: str) -> bytes:
    """The file's bytes, refusing links, devices and pipes (which could
    block), and anything over `limit` bytes."""
    try:
        if path.is_symlink():
            raise _FileProblem("rejected", f"{name} is a symbolic link: hand in the file itself.",
                               f"{name} is a symbolic link")
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise _FileProblem("missing", f"{name} was not handed in: every question counts as unanswered.",
                           f"{name} was not handed in") from None
    except OSError as e:
        raise _FileProblem("rejected", f"{name} could not be opened ({e.strerror}).",
                           f"{name} could not be opened") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _FileProblem("rejected", f"{name} is not a regular file.", f"{name} is not a regular file")
        if info.st_size > limit:
            raise _FileProblem("too_large", _too_large(name, info.st_size, limit),
                               f"{name} is over {limit // 1024} KB and was not read")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as e:
        raise _FileProblem("rejected", f"{name} could not be read ({e.strerror}).",
                           f"{name} could not be read") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while being read
        raise _FileProblem("too_large", _too_large(name, len(data), limit),
                           f"{name} is over {limit // 1024} KB and was not read")
    return data


def _too_large(name: str, size: int, limit: int) -> str:
    return (f"{name} is {size / 1024:,.0f} KB, over the {limit // 1024} KB limit: it was not read, and every "
            f"question counts as unanswered. Answers are a few lines each.")


def _decode(data: bytes, name: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise _FileProblem("not_text", f"{name} is saved as UTF-16: save it as UTF-8 (plain text).",
                           f"{name} is not UTF-8 text")
    if b"\0" in data:
        raise _FileProblem("not_text", f"{name} is not a text file (it holds binary data).",
                           f"{name} is not a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise _FileProblem("not_text", f"{name} is not UTF-8 text (byte 0x{data[e.start]:02x} on line {line}): "
                                       "save it as UTF-8.", f"{name} is not UTF-8 text") from None


_YAML_HINTS = (
    ("mapping values are not allowed", "an answer that contains ': ' must be quoted, e.g. why: \"because: ...\""),
    ("could not find expected ':'", "each answer is one line `question-id: answer`; quote text that holds "
                                    "special characters, or use `|` for several lines"),
    ("found character '\\t'", "YAML does not allow tabs here: indent with spaces"),
    ("special characters are not allowed", "the file holds a control character: remove it"),
    ("expected a single document", "the file holds more than one YAML document (a second `---`)"),
)


def _yaml_problem(e: yaml.YAMLError, name: str) -> _FileProblem:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "somewhere"
    hint = next((h for needle, h in _YAML_HINTS if needle in str(e)), "")
    message = f"{name} is not valid YAML ({where}: {problem}); nothing in it was graded."
    if hint:
        message += f" Hint: {hint}."
    short = f"{name} is not valid YAML (line {mark.line + 1})" if mark is not None else f"{name} is not valid YAML"
    return _FileProblem("invalid_yaml", message, short)


def _compose(text: str, name: str):
    """The document's root node, or None for a file without one."""
    loader = None
    try:
        loader = _Loader(text)  # checks every character first
        return loader.get_single_node()
    except yaml.reader.ReaderError as e:
        line = text[: e.position].count("\n") + 1
        raise _FileProblem(
            "invalid_yaml", f"{name} holds a character YAML does not allow (#x{e.character:04x} on line {line}): "
                            "remove it; nothing in the file was graded.", f"{name} is not valid YAML (line {line})"
        ) from None
    except _AliasFound as e:
        raise _FileProblem(
            "rejected", f"{name} uses a YAML alias (*{e.anchor}, line {e.line}), which the grader does not "
                        "accept: write every answer out in full.", f"{name} uses YAML aliases") from None
    except yaml.YAMLError as e:
        raise _yaml_problem(e, name) from None
    except RecursionError:
        raise _FileProblem("rejected", f"{name} is nested too deeply to read: answers are single values.",
                           f"{name} is nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def _entries(root, name: str) -> list:
    """(key text or None, key line, value node) of the top-level mapping."""
    if not isinstance(root, MappingNode):
        what = "a list" if isinstance(root, SequenceNode) else f"the single value {_cut(root.value, 60)!r}"
        raise _FileProblem(
            "not_a_mapping", f"{name} must map question ids to answers, one per line (`tile32-reduction: 32`), "
                             f"but it holds {what}; nothing in it was graded.", f"{name} is not a mapping of answers")
    out = []
    for key_node, value_node in root.value:
        key = key_node.value if isinstance(key_node, ScalarNode) else None
        out.append((key, key_node.start_mark.line + 1, value_node))
    return out


def read_answers_file(path: Path, name: str = ANSWERS_FILE, limit: int = MAX_BYTES, notes: Optional[list] = None) -> list:
    """The entries of an answers file; raises _FileProblem, or returns [] for
    an empty one. YAML refuses a tab where it wants a space ("id:<tab>32");
    such a file is read again with its tabs as spaces, noted in `notes`."""
    text = _decode(_read_bytes(path, limit, name), name)
    try:
        root = _compose(text, name)
    except _FileProblem as p:
        if p.status != "invalid_yaml" or "'\\t'" not in p.message:
            raise
        try:
            root = _compose(text.replace("\t", " "), name)
        except _FileProblem:
            raise p from None
        if notes is not None:
            notes.append(f"{name} holds tabs, which YAML does not allow between an id and its answer: "
                         "they were read as spaces.")
    return [] if root is None else _entries(root, name)


# --- reading one answer ------------------------------------------------------------


def _cut(text: str, limit: int) -> str:
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]} … [{len(text) - limit} more characters cut]"


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
        return None, "", f"'{_cut(s, 40)}' does not start with a number"
    number, rest = m.group("number"), s[m.end():].strip()
    if rest:
        if any(ch.isdigit() or ch.isnumeric() for ch in rest):
            if rest[0] == "," or (rest[0] == "." and rest[1:2].isdigit()):
                return None, "", (f"'{_cut(s, 40)}' is not a single number: write the decimal point as '.', "
                                  "and ',' only between groups of three digits (1,024)")
            return None, "", (f"'{_cut(s, 40)}' is not a single number: write one result, without expressions, "
                              "ranges or second values")
        if not (rest[0].isalpha() or rest[0] in "%×°µ"):
            return None, "", f"'{_cut(s, 40)}' is not a single number: only a unit may follow the number"
    try:
        value = float(number.replace(",", "").replace("_", ""))
    except ValueError:  # the pattern admits only what float reads; kept for safety
        return None, "", f"'{_cut(s, 40)}' is not a number"
    if not math.isfinite(value):
        return None, "", f"'{_cut(s, 40)}' is too large to be an answer"
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
    return None, f"'{_cut(' '.join(text.split()), 40)}' is not an option of this question (give one of: {listed})"


def _tolerance_words(tolerance: float) -> str:
    if tolerance <= 0:
        return "not the expected value (this question needs the exact value)"
    return f"not within {100 * tolerance:g} % of the expected value"


def _within(got: float, key: float, tolerance: float) -> bool:
    if tolerance <= 0:
        return got == key or abs(got - key) <= 1e-12 * abs(key)
    return abs(got - key) <= tolerance * abs(key) * (1 + 1e-9)


# --- grading -----------------------------------------------------------------------


def _points(x: float) -> str:
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return f"{text} point" + ("" if text == "1" else "s")


def _grade_one(q, node, key, graded: bool) -> QuestionResult:
    """One question's answer node (already known to be non-empty)."""
    r = QuestionResult(id=q.id, kind=q.kind, status="invalid", max_score=q.points, manual_points=q.manual_points,
                       key="" if key is None else _key_text(q, key))
    r.line = node.start_mark.line + 1
    if not isinstance(node, ScalarNode):
        what = "a list" if isinstance(node, SequenceNode) else "a mapping"
        limit = TEXT_DISPLAY_CHARS if q.kind == "text" else SHORT_DISPLAY_CHARS
        r.answer = _cut(_flatten(node), limit)
        single = {"number": "a single number", "choice": "a single option id",
                  "text": "one text (quote it, or write `|` and the text indented on the next lines)"}[q.kind]
        r.message = f"The answer is {what}; give {single}."
        return r
    raw = node.value
    if q.kind == "text":
        r.answer = _cut(raw.strip(), TEXT_DISPLAY_CHARS)
        r.read = r.answer
        r.status = "collected"
        r.message = f"A TA grades this answer by hand (up to {_points(q.manual_points)})."
        return r
    r.answer = _cut(" ".join(raw.split()), SHORT_DISPLAY_CHARS)
    if q.kind == "number":
        value, unit, problem = parse_number(raw)
        if value is None:
            r.message = f"{problem[0].upper()}{problem[1:]}."
            return r
        r.read = _number_text(value)
        read = f"Read as {r.read}" + (f"; the unit '{_cut(unit, 30)}' was ignored" if unit else "")
        if not graded:
            r.status, r.message = "not_graded", f"{read}; not graded here."
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
        r.status, r.message = "not_graded", f"Read as option {option}; not graded here."
    elif option == key:
        r.status, r.score, r.message = "correct", q.points, f"Read as option {option}."
    else:
        r.status, r.message = "wrong", f"Option {option} is not the right one."
    return r


def _key_text(q, key) -> str:
    if q.kind == "number":
        return f"{_number_text(float(key))} (± {100 * q.tolerance:g} %)" if q.tolerance else _number_text(float(key))
    return _cut(str(key), TEXT_DISPLAY_CHARS)


def _unanswered(q, key, message: str) -> QuestionResult:
    return QuestionResult(id=q.id, kind=q.kind, status="unanswered", max_score=q.points,
                          manual_points=q.manual_points, message=message,
                          key="" if key is None else _key_text(q, key))


def _same_answer(a, b) -> bool:
    return (isinstance(a, ScalarNode) and isinstance(b, ScalarNode)
            and " ".join(a.value.split()) == " ".join(b.value.split()))


def grade_answers(path: Path, questions: tuple, key: Optional[dict], *,
                  not_graded_reason: str = NO_KEY) -> AnswersResult:
    """Grades the answers file at `path` (which may not exist) against `key`
    (question id -> answer, from load_key). With key None the answers are
    read and checked for form but not scored."""
    path = Path(path)
    graded = key is not None
    key = key or {}
    name = path.name or ANSWERS_FILE
    notes: list = []
    try:
        entries = read_answers_file(path, name, notes=notes)
    except _FileProblem as p:
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
        shown = _cut(" ".join(text.split()), 40)
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
            r.answer = " / ".join(_cut(_flatten(node), 60) for _, node in filled)
            r.message = (f"Answered {len(filled)} times with different answers (lines "
                         f"{', '.join(str(line) for line, _ in filled)}), so none was graded: keep one.")
            result.questions.append(r)
            continue
        r = _grade_one(q, filled[0][1], key.get(q.id), graded)
        if len(answers) > 1:
            what = "only one holds an answer" if len(filled) == 1 else "each holds the same answer"
            r.message += f" ('{q.id}' appears on lines {lines}; {what}: keep one.)"
        result.questions.append(r)
    return result


# --- the key -----------------------------------------------------------------------


def key_working(path: Path) -> dict:
    """The working written into the key: question id -> the comment lines
    just above its answer (from column 0, no blank line between), joined
    into one paragraph. Answers without such a comment are left out. Staff
    views only (the TA edition of the handout)."""
    path = Path(path)
    try:
        entries = read_answers_file(path, str(path), limit=16 * MAX_BYTES)
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except _FileProblem as p:
        raise AnswerKeyError(p.message) from None
    except OSError as e:
        raise AnswerKeyError(f"{path}: cannot read the answer key ({e.strerror})") from None
    working = {}
    for text, line, _ in entries:
        above = []
        i = line - 2  # the line before the answer's, counted from 0
        # A comment indented under an answer belongs to it, not to the next one.
        while i >= 0 and lines[i].startswith("#"):
            above.append(lines[i][1:].strip())
            i -= 1
        paragraph = " ".join(w for w in reversed(above) if w)
        if text is not None and paragraph:
            working[text] = paragraph
    return working


def load_key(path: Path, questions: tuple = ()) -> dict:
    """The answer key: question id -> a float (number questions), an option
    id (choice) or a model answer (text). With `questions`, every question
    must have a key of its kind and every key a question; a mistake raises
    AnswerKeyError naming it."""
    path = Path(path)
    try:
        entries = read_answers_file(path, str(path), limit=16 * MAX_BYTES)
    except _FileProblem as p:
        raise AnswerKeyError(p.message) from None
    raw: dict = {}
    for text, line, node in entries:
        if text is None:
            raise AnswerKeyError(f"{path}: line {line}: a key must be a question id")
        if text in raw:
            raise AnswerKeyError(f"{path}: line {line}: '{text}' is given twice")
        if not isinstance(node, ScalarNode):
            raise AnswerKeyError(f"{path}: line {line}: the key of '{text}' must be a single value")
        raw[text] = node.value.strip()
    if not questions:
        return raw
    by_id = {q.id: q for q in questions}
    unknown = [k for k in raw if k not in by_id]
    if unknown:
        raise AnswerKeyError(f"{path}: keys for questions that assignment.yaml does not have: {', '.join(unknown)}")
    missing = [q.id for q in questions if not raw.get(q.id)]
    if missing:
        raise AnswerKeyError(f"{path}: no key for: {', '.join(missing)}")
    key = {}
    for q in questions:
        value = raw[q.id]
        if q.kind == "number":
            number, unit, problem = parse_number(value)
            if number is None or unit:
                raise AnswerKeyError(f"{path}: the key of '{q.id}' must be a plain number, got {value!r}")
            key[q.id] = number
        elif q.kind == "choice":
            if value not in q.options:
                raise AnswerKeyError(f"{path}: the key of '{q.id}' must be one of its options "
                                     f"({', '.join(q.options)}), got {value!r}")
            key[q.id] = value
        else:
            key[q.id] = value
    return key
