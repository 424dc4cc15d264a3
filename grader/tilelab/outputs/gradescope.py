"""Gradescope's results.json, from a GradeResult.

- Fields and types follow Gradescope's autograder specification
  (gradescope-autograders.readthedocs.io, "specs"): TOP_LEVEL_FIELDS, TEST_FIELDS.
- Per part its stages' tests (part_tests), then one test per question
  (question_tests); what did not run is said once per part (outputs/causes.py).
- Without a GPU (causes.gpu_withheld) the score is withheld (graded_tests).
- A results.json is always written: a grader that fails writes error_results.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..grading.answers import AnswersResult
from ..grading.model import NO_DEVICE_NOTE, STAGE_TITLES, STAGES, GradeResult, PartResult
from ..grading.scoring import CUBLAS, case_points
from ..spec.assignment import Assignment
from ..system.atomic import write_atomically
from ..text.markdown import md_text
from . import causes
from .fields import field_problems
from .leaderboard import gradescope_entries
from .speed_words import cublas_speed_rows, full_credit_words, reference_words

# A grading without a GPU (causes.gpu_withheld): said once, at the top, to
# students; to the staff in a hidden test and in extra_data.
NO_GPU_SUMMARY = ("**Not graded: this grader has no GPU.** The GPU stages of each part (correctness, launch checks, "
                  "sanitizers, speed) could not run here. This is not a problem with your work, and the score of this "
                  "run is not yours: it is withheld until the submission is graded on a GPU. What did run is shown "
                  "below: each part's static checks and build (fix what they report), and the questions.")
NO_GPU_BUILT = "built; not run here (no GPU)"
NO_GPU_WITHHELD = "no GPU on this grader: the parts were built but not run"
NO_GPU_STAFF = ("This grader has no GPU: the parts were built but not run, so the score recorded for this submission "
                "(0) is withheld, not the student's. Grade the submission on a machine with a GPU (the autograder "
                "image, docs/ta.md \"Docker\") and enter that score. extra_data.tilelab.withheld marks every such "
                "submission.")
_MARK = {"passed": "passed", "failed": "FAILED", "not_run": "not run", "error": "grader error"}
_QUESTION_MARK = {"correct": "correct", "wrong": "WRONG", "unanswered": "no answer", "invalid": "NOT READABLE",
                  "collected": "collected for a TA", "not_graded": "not graded"}


def _round(x: float) -> float:
    return round(float(x), 4)


def _visible_status(result: PartResult, name: str) -> str:
    """A stage's status as students may see it before hidden results are
    published: correctness counts the public cases only."""
    st = result.stages[name]
    if name == "correctness" and st.status == "failed" and result.cases:
        public = [c for c in result.cases if c.set == "public"]
        return "passed" if public and all(c.passed for c in public) else "failed"
    return st.status


def _stage_line(result: PartResult, name: str) -> str:
    st = result.stages[name]
    status = _visible_status(result, name)
    summary = causes.bare(causes.stage_reason(result, st)) if status == "not_run" else st.summary
    return f"- **{STAGE_TITLES[name]}**: {_MARK[status]}{' — ' + summary if summary else ''}"


def _visible_problem(result: PartResult) -> str:
    headline = causes.not_run_headline(result)
    if headline:
        return headline
    for name in STAGES:
        if _visible_status(result, name) in ("failed", "error"):
            return f"{STAGE_TITLES[name]}: {result.stages[name].summary}"
    not_run = [STAGE_TITLES[n] for n in STAGES if result.stages[n].status == "not_run"]
    return "none so far; not run: " + ", ".join(not_run) if not_run else "none"


def _fenced(text: str, max_lines: int = 40) -> str:
    lines = text.splitlines()
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"[... {len(lines) - max_lines} more lines ...]"]
    body = "\n".join(lines).replace("```", "'''")
    return f"```\n{body}\n```"


def _stage_block(result: PartResult, names: tuple) -> str:
    out = []
    for name in names:
        st = result.stages[name]
        out.append(_stage_line(result, name))
        if st.status == "failed" and st.details:
            out.append(_fenced(st.details))
        for hint in st.hints:
            out.append(f"  - {hint}")
    return "\n".join(out)


def _public_output(result: PartResult) -> str:
    public = [c for c in result.cases if c.set == "public"]
    not_run = causes.cases_line(result, public, "public")
    if not_run:
        return not_run
    lines = [_stage_line(result, "correctness"), ""]
    if public:
        lines += ["| case | j x k x l | result |", "| --- | --- | --- |"]
        for c in public:
            verdict = "passed" if c.passed else ("not run" if not c.ran else "FAILED: " + "; ".join(c.reasons))
            lines.append(f"| {c.name} | {c.j} x {c.k} x {c.l} | {verdict.replace('|', '/')} |")
        failing = next((c for c in public if not c.passed and c.first_errors), None)
        if failing is not None:
            lines += ["", f"First wrong elements of {failing.name} (row, column: expected, got, allowed error):", ""]
            for e in failing.first_errors:
                allowed = "exact" if failing.exact else f"{e.allowed:.3g}"
                lines.append(f"- P[{e.row}][{e.col}]: expected {e.expected:.7g}, got {e.got}, allowed {allowed}")
    for hint in result.stages["correctness"].hints:
        lines.append(f"- {hint}")
    if result.hidden_total:
        lines += ["", f"This part is also graded on {result.hidden_total} hidden cases; their results appear "
                      "when grades are published."]
    return "\n".join(lines)


def _hidden_output(result: PartResult) -> str:
    hidden = [c for c in result.cases if c.set == "hidden"]
    not_run = causes.cases_line(result, hidden, "hidden", result.hidden_total)
    if not_run:
        return not_run
    passed = sum(c.passed for c in hidden)
    # Names and sizes of hidden cases stay hidden even after publication.
    return f"{passed} of {len(hidden)} hidden cases passed."


def _speed_output(result: PartResult) -> str:
    st = result.stages["speed"]
    lines = [_stage_line(result, "speed")]
    sp = result.speed
    if sp is not None and sp.versus == CUBLAS:
        lines += [""] + [f"- {label}: {value}" for label, value in cublas_speed_rows(result)]
    elif sp is not None:
        lines += [
            "",
            f"- achieved: {sp.gflops:.0f} GFLOP/s ({sp.time_ms:.3f} ms at {sp.case})",
            f"- full credit from {full_credit_words(sp)}; none at or below {sp.zero_gflops:.0f} GFLOP/s",
            f"- reference solution: {reference_words(sp)}",
            f"- roofline bound: {sp.bound_gflops:.0f} GFLOP/s, the FP32 FMA rate measured on this GPU; at "
            f"{sp.intensity:.0f} FLOP per byte of DRAM traffic the multiplication is compute-bound",
        ]
    if sp is not None:
        lines += [f"- note: {flag}" for flag in sp.flags]
        if st.status == "passed" and result.speed_score == 0 and sp.fraction > 0:
            lines.append("- no speed points: the part failed another stage")
    return "\n".join(lines)


def _test(name: str, number: str, score: float, max_score: float, output: str, tags: list,
          visibility: str = "visible", passed: bool = None) -> dict:
    if passed is None:
        passed = abs(score - max_score) < 1e-9
    return {
        "name": name,
        "name_format": "text",
        "number": number,
        "score": _round(score),
        "max_score": _round(max_score),
        "status": "passed" if passed else "failed",
        "output": output,
        "output_format": "md",
        "tags": tags,
        "visibility": visibility,
    }


def _no_gpu_line(result: PartResult) -> str:
    """What of a built part a grader without a GPU could not run."""
    counts = [causes.count_words(n, s) for n, s in ((sum(c.set == "public" for c in result.cases), "public"),
                                                    (result.hidden_total, "hidden")) if n]
    return f"Not run here (this grader has no GPU): {', '.join(counts + ['launch checks', 'sanitizers'])} and speed."


def part_tests(result: PartResult, index: int, visibility: dict, no_gpu: bool = False) -> list:
    """The part's tests, in order: build (0 points), public cases, hidden
    cases (visibility from assignment.yaml), memory safety and launch checks
    (0 points each: they gate the correctness points), speed. An extra-credit
    part's tests have a max_score of 0 and an explicit status, so its points
    count in the score without raising the total. With `no_gpu`
    (causes.gpu_withheld) only its build: the rest did not run, for no fault
    of the student's, and Gradescope draws every test passed or failed (one
    without a status reads as failed), so they are left out and the build's
    test says what did not run."""
    tags = [result.id]
    title = f"{result.title} (extra credit)" if result.extra_credit else result.title
    per_case = case_points(result.correctness_max, len(result.cases))
    public = [c for c in result.cases if c.set == "public"]
    hidden = [c for c in result.cases if c.set == "hidden"]
    withheld = bool(result.withheld_by)

    def scored(name: str, number: str, score: float, max_score: float, output: str, shown: str = "visible",
               passed: bool = None) -> dict:
        if passed is None:
            passed = abs(score - max_score) < 1e-9
        if result.extra_credit and max_score > 0:
            # Earned on top of the total: a max_score here would raise it.
            output += (f"\n\nExtra credit: {score:.2f} of up to {max_score:.2f} points, on top of the "
                       "assignment's total.")
            max_score = 0.0
        return _test(name, number, score, max_score, output, tags, shown, passed)

    build_output = _stage_block(result, ("static", "build"))
    if no_gpu and causes.built(result):
        build_output += "\n\n" + _no_gpu_line(result)
    tests = [_test(f"{title}: build", f"{index}.1", 0, 0, build_output, tags,
                   passed=result.stages["build"].status == "passed")]
    if no_gpu:
        return tests
    public_score = 0.0 if withheld else per_case * sum(c.passed for c in public)
    tests.append(scored(f"{title}: public cases ({len(public)})", f"{index}.2", public_score,
                        per_case * len(public), _public_output(result), visibility["public"],
                        passed=bool(public) and all(c.passed for c in public) and not withheld))
    if hidden:
        hidden_score = 0.0 if withheld else per_case * sum(c.passed for c in hidden)
        tests.append(scored(f"{title}: hidden cases ({len(hidden)})", f"{index}.3", hidden_score,
                            per_case * len(hidden), _hidden_output(result), visibility["hidden"],
                            passed=all(c.passed for c in hidden) and not withheld))
    tests.append(_test(f"{title}: memory safety and races", f"{index}.4", 0, 0,
                       _stage_block(result, ("memcheck", "racecheck")), tags,
                       passed=all(result.stages[n].status == "passed" for n in ("memcheck", "racecheck"))))
    tests.append(_test(f"{title}: launch checks", f"{index}.5", 0, 0, _stage_block(result, ("launch",)),
                       tags, passed=result.stages["launch"].status == "passed"))
    tests.append(scored(f"{title}: speed", f"{index}.6", result.speed_score, result.speed_max,
                        _speed_output(result)))
    return tests


def _answer_block(answer: str, kind: str) -> str:
    if not answer:
        return "Your answer: (none)"
    if kind == "text" or "\n" in answer:
        return "Your answer:\n\n" + _fenced(answer)
    return f"Your answer: `{answer.replace('`', chr(39))}`"


def question_tests(answers: AnswersResult, texts: dict, visibility: str = "visible") -> list:
    """One test per question (`texts`: question id -> its text), numbered Q.1,
    Q.2, ...: the answer as read and its result, never the key. A text
    question is worth 0 here, tagged "manual": a TA grades it."""
    tests = []
    for n, q in enumerate(answers.questions, start=1):
        lines = []
        if texts.get(q.id):
            lines += [f"> {md_text(texts[q.id])}", ""]
        lines += [_answer_block(q.answer, q.kind), "", f"**{_QUESTION_MARK.get(q.status, q.status)}**: {q.message}"]
        if q.kind == "text":
            lines += ["", "The 0 points here are not this answer's grade: a TA grades it by hand."]
            tests.append(_test(f"Question {q.id}", f"Q.{n}", 0, 0, "\n".join(lines), ["questions", "manual"],
                               visibility, passed=q.status == "collected"))
        else:
            tests.append(_test(f"Question {q.id}", f"Q.{n}", q.score, q.max_score, "\n".join(lines), ["questions"],
                               visibility, passed=q.status == "correct"))
    return tests


def _answers_summary(answers: AnswersResult, shown_when: str = "") -> list:
    """The questions' lines at the top of the page. With `shown_when` the
    results are not shown yet: only what is wrong with the file itself is."""
    auto = [q for q in answers.questions if q.kind != "text"]
    manual = [q for q in answers.questions if q.kind == "text"]
    if not answers.graded:
        line = f"Questions: {answers.not_graded_reason}."
    elif shown_when:
        # The counts the handout's rubric gives: the automatic ones, then the written ones apart.
        line = f"Questions: the results of the {len(auto)} questions graded automatically are shown {shown_when}."
        if manual:
            line += f" The other {len(manual)} are written answers, graded by hand by a TA."
    else:
        line = (f"Questions: {answers.score:g} / {answers.max_score:g} automatic points "
                f"({answers.count('correct')} of {len(auto)} right")
        for status, word in (("wrong", "wrong"), ("invalid", "not readable"), ("unanswered", "unanswered")):
            n = sum(1 for q in auto if q.status == status)
            if n:
                line += f", {n} {word}"
        line += ")."
    if manual and not shown_when:
        line += (f" {sum(q.status == 'collected' for q in manual)} of {len(manual)} written answers collected for a "
                 f"TA (up to {answers.manual_max:g} points, graded by hand).")
    lines = [line]
    if answers.status != "read" and answers.message:
        lines.append(f"- {answers.message}")
    lines += [f"- {note}" for note in answers.notes]
    return lines


def summary_output(result: GradeResult, tests: list, no_gpu: bool = False) -> str:
    """The top of the Gradescope page. Gradescope hides the total while any
    test is hidden, so this shows only what students may see now; with
    `no_gpu` (causes.gpu_withheld), that the score is withheld, and why."""
    if no_gpu:
        lines = [NO_GPU_SUMMARY]
    else:
        lines = _points_shown(result, tests)
    if result.gpu:
        lines.append(f"Graded on {result.gpu.get('name', 'a GPU')}.")
    # The headline says it for the whole grading; this note's "score nothing" would contradict it.
    lines += [f"- {n}" for n in result.notes if not (no_gpu and n == NO_DEVICE_NOTE)]
    if result.answers is not None:
        visibility = next((t["visibility"] for t in tests if "questions" in t.get("tags", [])), "visible")
        when = {"visible": "", "after_due_date": "after the due date", "after_published": "when grades are published",
                "hidden": "to the course staff only"}[visibility]
        lines += [""] + _answers_summary(result.answers, when)
    if result.parts:
        lines += ["", "| part | first problem |", "| --- | --- |"]
    for p in result.parts:
        # Without a GPU the headline gives the cause once; a row says what of the part is known.
        problem = NO_GPU_BUILT if no_gpu and causes.built(p) else _visible_problem(p)
        lines.append(f"| {p.title} | {problem.replace('|', '/')} |")
    return "\n".join(lines)


def _points_shown(result: GradeResult, tests: list) -> list:
    """The points students can see now, and what is still to come."""
    visible = [t for t in tests if t["visibility"] == "visible"]
    score = sum(t["score"] for t in visible)
    max_score = sum(t["max_score"] for t in visible)
    lines = [f"**{score:.2f} / {max_score:.2f}** points in the tests shown now"]
    for part in (p for p in result.parts if p.extra_credit):
        earned = sum(t["score"] for t in visible if part.id in t.get("tags", []))
        lines.append(f"Extra credit: {part.title}, worth up to {part.max_score:.2f} points on top of the total; "
                     f"{earned:.2f} of them in the tests shown now (counted above).")
    hidden = sum(p.hidden_total for p in result.parts)
    if hidden:
        lines.append(f"Hidden cases ({hidden} in all) are graded too; their results appear when grades are published.")
    return lines


def graded_tests(result: GradeResult, assignment: Assignment, no_gpu: bool = False) -> list:
    """Every test of a grading in Gradescope's form: each part's stages, each
    question, and (hidden) the staff's notes. PrairieLearn's results are made
    from the same list (prairielearn.py). With `no_gpu` (causes.gpu_withheld)
    each part has its build test only, and a hidden test tells the staff
    that the score is withheld: Gradescope records a score whatever it holds
    and has no "not graded" value, so the score is 0 as in error_results."""
    tests = []
    for i, part in enumerate(result.parts, start=1):
        tests += part_tests(part, i, assignment.grading["visibility"], no_gpu)
    if result.answers is not None:
        tests += question_tests(result.answers, {q.id: q.text for q in assignment.questions},
                                assignment.grading["visibility"]["questions"])
    if result.staff_notes:
        # What went wrong in the grader itself, for the staff's eyes only.
        tests.append(_test("Grader notes (staff only)", "S.1", 0, 0,
                           "\n".join(f"- {n}" for n in result.staff_notes), ["staff"], "hidden"))
    if no_gpu:
        # Hidden, it also keeps the recorded 0 from students: Gradescope shows no total while a test is hidden.
        tests.append(_test("Score withheld: no GPU (staff only)", f"S.{1 + bool(result.staff_notes)}", 0, 0,
                           NO_GPU_STAFF, ["staff"], "hidden", passed=False))
    return tests


def results_json(result: GradeResult, assignment: Assignment) -> dict:
    """The whole file. A part scored against cuBLAS adds the top-level
    "leaderboard" (outputs/leaderboard.py); extra_data.tilelab.withheld marks
    a result withheld for want of a GPU."""
    no_gpu = causes.gpu_withheld(result)
    tests = graded_tests(result, assignment, no_gpu)
    leaderboard = gradescope_entries(result, assignment)
    return {
        # Gradescope records this score whatever it is: withheld, it is the 0 an autograder error records too.
        "score": 0.0 if no_gpu else _round(sum(t["score"] for t in tests)),
        "execution_time": round(result.seconds, 2),
        "output": summary_output(result, tests, no_gpu),
        "output_format": "md",
        "test_output_format": "md",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {"tilelab": {"mode": result.mode, "seed": result.seed, "gpu": result.gpu,
                                   "ceilings": result.ceilings, "calibration": result.calibration,
                                   **({"withheld": NO_GPU_WITHHELD} if no_gpu else {})}},
        "tests": tests,
        **({"leaderboard": leaderboard} if leaderboard else {}),
    }


def error_results(traceback_text: str) -> dict:
    """What a student and a TA see when the grader itself fails."""
    return {
        "score": 0.0,
        "output": "The autograder failed while grading this submission. This is not a problem with your "
                  "work: please tell your instructor or TA.",
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [
            {"name": "Autograder error", "score": 0.0, "max_score": 0.0, "status": "failed",
             "output": "The autograder itself failed; your submission was not graded. Please tell your "
                       "instructor or TA.", "output_format": "text", "visibility": "visible"},
            {"name": "Autograder error: details for staff", "score": 0.0, "max_score": 0.0, "status": "failed",
             "output": traceback_text[-20000:], "output_format": "text", "visibility": "hidden"},
        ],
    }


# The first test of error_results's document: what tells it from a grading's.
_ERROR_TEST = error_results("")["tests"][0]["name"]


def is_error_results(doc) -> bool:
    """Whether a results.json is error_results's: the grader failed, the student is not to blame."""
    tests = doc.get("tests") if isinstance(doc, dict) else None
    return (isinstance(tests, list) and bool(tests) and isinstance(tests[0], dict)
            and tests[0].get("name") == _ERROR_TEST)


_NUMBER = (int, float)
# Gradescope's autograder specification, results.json: every field and its type.
TOP_LEVEL_FIELDS = {
    "score": _NUMBER, "execution_time": _NUMBER, "output": str, "output_format": str, "test_output_format": str,
    "test_name_format": str, "visibility": str, "stdout_visibility": str, "extra_data": dict, "tests": list,
    "leaderboard": list,
}
TEST_FIELDS = {
    "score": _NUMBER, "max_score": _NUMBER, "status": str, "name": str, "name_format": str, "number": str,
    "output": str, "output_format": str, "tags": list, "visibility": str, "extra_data": dict,
}
LEADERBOARD_FIELDS = {"name": str, "value": (int, float, str), "order": str}
LEADERBOARD_ORDERS = {"asc", "desc"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}


def spec_problems(doc) -> list:
    """What in a results.json breaks Gradescope's specification (empty: nothing)."""
    if not isinstance(doc, dict):
        return ["results.json is not a JSON object"]
    problems = field_problems(doc, TOP_LEVEL_FIELDS)
    if "score" not in doc and not all(isinstance(t, dict) and "score" in t for t in doc.get("tests", [])):
        problems.append("no top-level score and a test without one")
    for key in ("output_format", "test_output_format", "test_name_format"):
        if key in doc and doc[key] not in FORMATS:
            problems.append(f"{key} {doc[key]!r} is not a format")
    for key in ("visibility", "stdout_visibility"):
        if key in doc and doc[key] not in VISIBILITIES:
            problems.append(f"{key} {doc[key]!r} is not a visibility")
    for i, test in enumerate(doc.get("tests", []) if isinstance(doc.get("tests"), list) else []):
        if not isinstance(test, dict):
            problems.append(f"tests[{i}] is not an object")
            continue
        problems += field_problems(test, TEST_FIELDS, f"tests[{i}].")
        if test.get("status", "passed") not in ("passed", "failed"):
            problems.append(f"tests[{i}].status {test.get('status')!r}")
        if test.get("visibility", "visible") not in VISIBILITIES:
            problems.append(f"tests[{i}].visibility {test.get('visibility')!r}")
        if test.get("output_format", "text") not in FORMATS:
            problems.append(f"tests[{i}].output_format {test.get('output_format')!r}")
        if not all(isinstance(t, str) for t in test.get("tags", []) if isinstance(test.get("tags"), list)):
            problems.append(f"tests[{i}].tags holds a non-string")
    for i, entry in enumerate(doc.get("leaderboard", []) if isinstance(doc.get("leaderboard"), list) else []):
        if not isinstance(entry, dict):
            problems.append(f"leaderboard[{i}] is not an object")
            continue
        problems += field_problems(entry, LEADERBOARD_FIELDS, f"leaderboard[{i}].")
        for key in ("name", "value"):
            if key not in entry:
                problems.append(f"leaderboard[{i}] has no {key}")
        if "order" in entry and entry["order"] not in LEADERBOARD_ORDERS:
            problems.append(f"leaderboard[{i}].order {entry['order']!r} is not asc or desc")
    try:
        json.dumps(doc, allow_nan=False)
    except ValueError as e:
        problems.append(f"not valid JSON: {e}")
    return problems


def student_visible_text(doc: dict) -> str:
    """Everything in a results.json a student can see at some point without staff rights."""
    parts = [str(doc.get("output", ""))]
    for test in doc.get("tests", []):
        if test.get("visibility", doc.get("visibility", "visible")) != "hidden":
            parts += [str(test.get("name", "")), str(test.get("output", ""))]
    return "\n".join(parts)


def write_results(doc: dict, path: Path) -> None:
    """Writes the file whole or not at all (a half-written results.json reads as an autograder failure)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(doc, indent=2, allow_nan=False))
