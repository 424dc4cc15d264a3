"""The exercise questions as the handout shows them: each with its code
just before the first question that refers to it, its unit and tolerance,
and in the TA edition its answer and working."""

from __future__ import annotations

import re

from ..spec.assignment import Assignment, Question
from ..text.numbers import fmt_percent, fmt_points
from .handout_code import fitting_pt

KIND_WORDS = {"number": "number", "choice": "choice", "text": "written answer"}
# A number question ends with what to answer in: "(bytes)", "(a count)".
_UNIT_HINT = re.compile(r"\s*\(([^()]+)\)\s*$")
_KERNEL_DEFINITION = re.compile(r"__global__\s+void\s+([A-Za-z_]\w*)\s*\(")


def _code_references(question: Question, question_code: dict) -> list:
    """The question_code entries a question refers to: by the entry's name
    ("launch_bug") or by a kernel the code defines ("fooKernel")."""
    names = []
    for name, code in question_code.items():
        words = [name] + _KERNEL_DEFINITION.findall(code)
        if any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])", question.text) for w in words):
            names.append(name)
    return names


def _answer_words(question: Question, answer) -> str:
    if question.kind == "number":
        # Whole numbers in full: 17179869184, not 1.717986918e+10.
        return str(int(answer)) if float(answer).is_integer() and abs(answer) < 1e15 else f"{answer:.10g}"
    if question.kind == "choice":
        return f"{answer}: {question.options[answer]}"
    return str(answer)


def questions_view(assignment: Assignment, key: dict, working: dict, ta: bool) -> list:
    code = assignment.question_code
    references = {q.id: _code_references(q, code) for q in assignment.questions}
    referenced = {name for names in references.values() for name in names}
    # Code that no question names still belongs with the questions: it goes before the first.
    unreferenced = [name for name in code if name not in referenced]
    shown = set()
    views = []
    for number, q in enumerate(assignment.questions, start=1):
        code_before = []
        # Each block once, just before the first question that needs it.
        for name in (unreferenced if number == 1 else []) + references[q.id]:
            if name not in shown:
                shown.add(name)
                block = code[name].rstrip("\n")
                code_before.append({"name": name, "code": block, "font_pt": fitting_pt(block.split("\n"))})
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
            "code_before": code_before,
            "answer": _answer_words(q, key[q.id]) if ta else "",
            "working": working.get(q.id, "") if ta else "",
        })
    return views
