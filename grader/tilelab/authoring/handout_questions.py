"""The exercise questions as the handout shows them: each with its code
just before the first question that refers to it, its unit and tolerance,
and in the TA edition its answer and working."""

from __future__ import annotations

import re

from ..spec.assignment import Assignment, Question
from ..spec.question_code import code_before
from ..text.numbers import fmt_percent, fmt_points
from .handout_code import fitting_pt

KIND_WORDS = {"number": "number", "choice": "choice", "text": "written answer"}
# A number question ends with what to answer in: "(bytes)", "(a count)".
_UNIT_HINT = re.compile(r"\s*\(([^()]+)\)\s*$")


def _answer_words(question: Question, answer) -> str:
    if question.kind == "number":
        # Whole numbers in full: 17179869184, not 1.717986918e+10.
        return str(int(answer)) if float(answer).is_integer() and abs(answer) < 1e15 else f"{answer:.10g}"
    if question.kind == "choice":
        return f"{answer}: {question.options[answer]}"
    return str(answer)


def questions_view(assignment: Assignment, key: dict, working: dict, ta: bool) -> list:
    code = assignment.question_code
    placed = code_before(assignment)
    views = []
    for number, q in enumerate(assignment.questions, start=1):
        blocks = []
        for name in placed[q.id]:
            block = code[name].rstrip("\n")
            blocks.append({"name": name, "code": block, "font_pt": fitting_pt(block.split("\n"))})
        text, unit = q.text, ""
        if q.kind == "number":
            match = _UNIT_HINT.search(q.text)
            if match:
                text, unit = q.text[:match.start()], match.group(1)
        if q.kind == "text":
            worth = f"read by a TA, suggested {fmt_points(q.manual_points)} point{'s' if q.manual_points != 1 else ''}"
        else:
            worth = f"{fmt_points(q.points)} point{'s' if q.points != 1 else ''}, graded automatically"
        views.append({
            "number": number,
            "id": q.id,
            "kind": KIND_WORDS[q.kind],
            "worth": worth,
            "text": text,
            "unit": unit,
            "tolerance": (f"accepted within {fmt_percent(q.tolerance)} of the right value" if q.tolerance > 0
                          else "it must be exact") if q.kind == "number" else "",
            "options": [{"id": k, "text": v} for k, v in q.options.items()],
            "option_ids": ", ".join(q.options),
            "code_before": blocks,
            "answer": _answer_words(q, key[q.id]) if ta else "",
            "working": working.get(q.id, "") if ta else "",
        })
    return views
