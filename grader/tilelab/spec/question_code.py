"""Where the code of assignment.yaml's question_code goes among the
questions: each block once, just before the first question that refers to
it, by the entry's name ("launch_bug") or by a kernel the code defines
("fooKernel"); code that no question names goes before the first. The
handout and starter/answers.yaml both place it so, which keeps a
question's "shown above" true wherever the question is read."""

from __future__ import annotations

import re

from .assignment import Assignment, Question

_KERNEL_DEFINITION = re.compile(r"__global__\s+void\s+([A-Za-z_]\w*)\s*\(")


def code_references(question: Question, question_code: dict) -> list:
    """The names of the question_code entries a question refers to."""
    names = []
    for name, code in question_code.items():
        words = [name] + _KERNEL_DEFINITION.findall(code)
        if any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])", question.text) for w in words):
            names.append(name)
    return names


def code_before(assignment: Assignment) -> dict:
    """{question id: [names of the code entries shown just before it]}, every
    question listed, each entry under one question only."""
    code = assignment.question_code
    references = {q.id: code_references(q, code) for q in assignment.questions}
    referenced = {name for names in references.values() for name in names}
    unreferenced = [name for name in code if name not in referenced]
    shown, placed = set(), {}
    for number, q in enumerate(assignment.questions, start=1):
        placed[q.id] = []
        for name in (unreferenced if number == 1 else []) + references[q.id]:
            if name not in shown:
                shown.add(name)
                placed[q.id].append(name)
    return placed
