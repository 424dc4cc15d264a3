"""The answer key, solutions/answers.yaml: each question's answer, and the
working written above it for the TA edition of the handout.

The key is read like a student's file (answers_file.py), with a larger size
limit, and checked against assignment.yaml's questions: a mistake in it
raises AnswerKeyError naming the question, never a wrong grade.
"""

from __future__ import annotations

from pathlib import Path

from yaml.nodes import ScalarNode

from .answers import parse_number
from .answers_file import MAX_BYTES, FileProblem, read_answers_file
from ..errors import TilelabError


class AnswerKeyError(TilelabError):
    """solutions/answers.yaml is missing, unreadable or does not fit the questions."""


def key_working(path: Path) -> dict:
    """The working written into the key: question id -> the comment lines
    just above its answer (from column 0, no blank line between), joined
    into one paragraph. Answers without such a comment are left out. Staff
    views only (the TA edition of the handout)."""
    path = Path(path)
    try:
        entries = read_answers_file(path, str(path), limit=16 * MAX_BYTES)
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except FileProblem as p:
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
    except FileProblem as p:
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
