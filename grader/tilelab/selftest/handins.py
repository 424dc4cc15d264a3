"""The grader graded: known-good and known-bad hand-ins with the verdicts they must get.

tests/submissions/<name>/ holds part files and/or answers.yaml and
expected.yaml (tests/submissions/README.md); a few hand-ins that cannot live
in git are made on the fly (generated_hand_ins). The reference solutions must
get full marks, and their answers.yaml (the key) every automatic point.
Without a GPU only the stages that need none are judged (judge).
"""

from __future__ import annotations

import json
import random
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

import yaml

from ..errors import TilelabError
from ..grading.answers import QUESTION_STATUSES, AnswersResult
from ..grading.answers_file import FILE_STATUSES
from ..grading.model import STAGES, GradeResult, PartResult
from ..grading.options import GradeOptions, build_jobs_each
from ..operations.grading_run import Outputs, run_grading
from ..system.cpu_share import gradings_at_once
from ..system.gpu_lock import GpuLock, visible_gpu_lock
from ..system.paths import answer_key_path
from ..system.sandbox import sandbox_for_this_process
from ..system.sandbox_users import hold_one_or_base

VERDICTS = ("pass", "slow", "fail")
SPEEDS = ("full", "partial", "none")
GPU_FREE_STAGES = ("static", "build")


class SelftestError(TilelabError):
    """An expected.yaml is malformed."""


@dataclass
class Expectation:
    part: str
    verdict: str
    failing: list = field(default_factory=list)
    reason: Optional[str] = None
    speed: Optional[str] = None


@dataclass
class AnswersExpectation:
    score: Optional[object] = None  # automatic points expected, or "full"
    file: Optional[str] = None  # the file-level status (answers.FILE_STATUSES)
    message: Optional[str] = None  # a substring of the file-level message
    notes: list = field(default_factory=list)  # substrings each found in some note
    questions: dict = field(default_factory=dict)  # question id -> {"status": ..., "message": ...}
    others: Optional[str] = None  # the status of every question not listed


@dataclass
class HandIn:
    name: str
    path: Path
    description: str
    expectations: list  # of Expectation
    answers: Optional[AnswersExpectation] = None
    runs_alone: bool = False  # it holds something gradings beside it need (the sandbox user's process limit)


@dataclass
class Row:
    hand_in: str
    part: str
    expected: str
    got: str
    ok: bool
    why: str = ""
    points: str = ""
    speed: str = ""  # measured GFLOP/s and the share of speed points it earns


def _expectation(part: str, raw: dict, where: str, known_parts: set) -> Expectation:
    if part not in known_parts:
        raise SelftestError(f"{where}: unknown part {part!r}")
    if not isinstance(raw, dict) or raw.get("verdict") not in VERDICTS:
        raise SelftestError(f"{where}.verdict: must be one of {', '.join(VERDICTS)}")
    unknown = set(raw) - {"verdict", "failing", "reason", "speed"}
    if unknown:
        raise SelftestError(f"{where}: unknown keys {sorted(unknown)}")
    failing = raw.get("failing", [])
    if not isinstance(failing, list) or any(s not in STAGES for s in failing):
        raise SelftestError(f"{where}.failing: must list stages among {', '.join(STAGES)}")
    if raw["verdict"] == "fail" and not failing:
        raise SelftestError(f"{where}: a 'fail' verdict must name its failing stages")
    if raw.get("speed") not in (None, *SPEEDS):
        raise SelftestError(f"{where}.speed: must be one of {', '.join(SPEEDS)}")
    return Expectation(part, raw["verdict"], failing, raw.get("reason"), raw.get("speed"))


def _answers_expectation(raw, where: str, known_questions: set) -> AnswersExpectation:
    if not isinstance(raw, dict):
        raise SelftestError(f"{where}: must be a mapping")
    unknown = set(raw) - {"score", "file", "message", "notes", "questions", "others"}
    if unknown:
        raise SelftestError(f"{where}: unknown keys {sorted(unknown)}")
    score = raw.get("score")
    if score is not None and score != "full" and (isinstance(score, bool) or not isinstance(score, (int, float))):
        raise SelftestError(f"{where}.score: must be a number or 'full'")
    if raw.get("file") not in (None, *FILE_STATUSES):
        raise SelftestError(f"{where}.file: must be one of {', '.join(FILE_STATUSES)}")
    if raw.get("others") not in (None, *QUESTION_STATUSES):
        raise SelftestError(f"{where}.others: must be one of {', '.join(QUESTION_STATUSES)}")
    notes = raw.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise SelftestError(f"{where}.notes: must be a list of strings")
    questions = {}
    for qid, exp in (raw.get("questions") or {}).items():
        if qid not in known_questions:
            raise SelftestError(f"{where}.questions: unknown question {qid!r}")
        exp = {"status": exp} if isinstance(exp, str) else exp
        if not isinstance(exp, dict) or exp.get("status") not in QUESTION_STATUSES or set(exp) - {"status", "message"}:
            raise SelftestError(f"{where}.questions.{qid}: a status ({', '.join(QUESTION_STATUSES)}) or "
                                "{status:, message:}")
        questions[qid] = exp
    return AnswersExpectation(score, raw.get("file"), raw.get("message"), notes, questions, raw.get("others"))


def load_hand_ins(directory: Path, known_parts: set, known_questions: set = frozenset()) -> list:
    hand_ins = []
    for d in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")):
        spec = d / "expected.yaml"
        if not spec.exists():
            raise SelftestError(f"{d}: no expected.yaml")
        try:
            doc = yaml.safe_load(spec.read_text())
        except yaml.YAMLError as e:
            raise SelftestError(f"{spec}: not valid YAML: {e}") from None
        if not isinstance(doc, dict) or not (isinstance(doc.get("parts"), dict) and doc["parts"]
                                             or isinstance(doc.get("answers"), dict)):
            raise SelftestError(f"{spec}: needs a 'parts' mapping, an 'answers' mapping or both")
        exps = [_expectation(p, raw, f"{spec}: parts.{p}", known_parts) for p, raw in (doc.get("parts") or {}).items()]
        answers = (_answers_expectation(doc["answers"], f"{spec}: answers", known_questions)
                   if "answers" in doc else None)
        runs_alone = doc.get("runs_alone", False)
        if not isinstance(runs_alone, bool):
            raise SelftestError(f"{spec}: runs_alone must be true or false")
        hand_ins.append(HandIn(d.name, d, str(doc.get("description", "")), exps, answers, runs_alone))
    return hand_ins


def generated_hand_ins(work: Path, part_files: dict) -> list:
    """Hand-ins made here: they cannot be kept in git."""
    made = []
    empty = work / "generated-empty"
    empty.mkdir(parents=True, exist_ok=True)
    made.append(HandIn("generated-empty", empty, "An empty directory.",
                       [Expectation(p, "fail", ["static"], "missing") for p in part_files]))
    garbage = work / "generated-binary"
    garbage.mkdir(parents=True, exist_ok=True)
    (garbage / part_files["naive"]).write_bytes(random.Random(7).randbytes(4096) + b"\0")
    made.append(HandIn("generated-binary", garbage, "naive.cu holds random binary data.",
                       [Expectation("naive", "fail", ["static"], "binary")]))
    huge = work / "generated-50mb"
    huge.mkdir(parents=True, exist_ok=True)
    with (huge / part_files["naive"]).open("w") as f:
        line = "// " + "x" * 1021 + "\n"
        for _ in range(50 * 1024):
            f.write(line)
    made.append(HandIn("generated-50mb", huge, "naive.cu is a 50 MB file.",
                       [Expectation("naive", "fail", ["static"], "MB")]))
    oversized = work / "generated-answers-oversized"
    oversized.mkdir(parents=True, exist_ok=True)
    with (oversized / "answers.yaml").open("w") as f:
        f.write("tile32-reduction: 32\nmatadd-smem-why: |\n")
        for _ in range(1000):  # about 120 KB of explanation
            f.write("  " + "Each element is used once, so there is nothing to reuse. " * 2 + "\n")
    made.append(HandIn("generated-answers-oversized", oversized, "answers.yaml is about 120 KB of text.", [],
                       AnswersExpectation(score=0, file="too_large", message="64 KB", others="unanswered")))
    return made


def _speed_class(part: PartResult) -> str:
    if part.speed is None or part.speed.fraction <= 0:
        return "none"
    return "full" if part.speed.fraction >= 1 else "partial"


def _got(part: PartResult) -> str:
    failed = [n for n in STAGES if part.stages[n].status in ("failed", "error")]
    if failed:
        return "fail [" + ", ".join(failed) + "]"
    if any(part.stages[n].status == "not_run" for n in STAGES):
        not_run = [n for n in STAGES if part.stages[n].status == "not_run"]
        return "not run [" + ", ".join(not_run) + "]"
    return "pass" if part.speed_score >= part.speed_max else "slow"


def _failing_as_expected(part: PartResult, failing: list, reason: Optional[str]) -> Optional[str]:
    """Why the stages in `failing` are not all failed, one of them naming
    `reason`; None when they are."""
    st = part.stages
    for s in failing:
        if st[s].status != "failed":
            return f"{s} should fail, it is {st[s].status}: {st[s].summary}"
    if reason and not any(reason.lower() in " ".join([st[s].summary, st[s].details, *st[s].hints]).lower()
                          for s in failing):
        return f"no failing stage mentions {reason!r}"
    return None


def judge(part: PartResult, exp: Expectation, gpu: bool) -> tuple:
    """(ok, why) for one part of one hand-in. Without a GPU a hand-in
    expected to fail its static checks or build must fail there; any other
    must pass both, and its GPU stages must be reported as not run (never
    passed). Answers need no GPU: they are judged in full either way."""
    st = part.stages
    if not gpu:
        gpu_free_failing = [s for s in exp.failing if s in GPU_FREE_STAGES]
        if gpu_free_failing:
            why = _failing_as_expected(part, gpu_free_failing, exp.reason)
            return why is None, why or ""
        for s in GPU_FREE_STAGES:
            if st[s].status != "passed":
                return False, f"{s} should pass, it is {st[s].status}: {st[s].summary}"
        passed_gpu = [s for s in STAGES if s not in GPU_FREE_STAGES and st[s].status == "passed"]
        if passed_gpu:
            return False, f"without a GPU these stages must not pass: {passed_gpu}"
        return True, "GPU stages not run"
    if exp.verdict == "pass":
        if part.failed_stage or part.score < part.max_score - 1e-9:
            return False, f"expected full marks, got {part.score:g}/{part.max_score:g}"
    elif exp.verdict == "slow":
        if part.failed_stage:
            return False, f"expected a correct part, {part.failed_stage} failed: {st[part.failed_stage].summary}"
        if part.correctness_score < part.correctness_max - 1e-9 or part.speed_score >= part.speed_max:
            return False, f"expected full correctness and partial speed, got {part.correctness_score:g} and " \
                          f"{part.speed_score:g}/{part.speed_max:g}"
        speed = st["speed"]
        if exp.reason and exp.reason.lower() not in " ".join([speed.summary, speed.details, *speed.hints]).lower():
            return False, f"the speed stage does not mention {exp.reason!r}: {speed.summary}"
    else:
        why = _failing_as_expected(part, exp.failing, exp.reason)
        if why:
            return False, why
        if part.correctness_score >= part.correctness_max - 1e-9:
            return False, "expected lost correctness points, got them all"
    if exp.speed and _speed_class(part) != exp.speed:
        return False, f"expected speed {exp.speed}, measured {_speed_class(part)}"
    return True, ""


def judge_answers(answers: Optional[AnswersResult], exp: AnswersExpectation) -> tuple:
    """(ok, why) for the answers of one hand-in."""
    if answers is None:
        return False, "the answers were not graded (the assignment has no questions?)"
    if exp.file and answers.status != exp.file:
        return False, f"expected the file {exp.file}, it is {answers.status}: {answers.message}"
    if exp.message and exp.message.lower() not in answers.message.lower():
        return False, f"the file's message does not mention {exp.message!r}: {answers.message}"
    for text in exp.notes:
        if not any(text.lower() in note.lower() for note in answers.notes):
            return False, f"no note mentions {text!r} (notes: {answers.notes})"
    for q in answers.questions:
        want = exp.questions.get(q.id) or ({"status": exp.others} if exp.others else None)
        if want is None:
            continue
        if q.status != want["status"]:
            return False, f"{q.id}: expected {want['status']}, got {q.status}: {q.message}"
        if want.get("message") and want["message"].lower() not in q.message.lower():
            return False, f"{q.id}: the message does not mention {want['message']!r}: {q.message}"
    if exp.score == "full":
        short = [q.id for q in answers.questions if q.kind != "text" and q.status != "correct"]
        short += [q.id for q in answers.questions if q.kind == "text" and q.status != "collected"]
        if short or answers.score < answers.max_score - 1e-9:
            return False, f"expected every automatic point and every text collected; not: {', '.join(short)}"
    elif exp.score is not None and abs(answers.score - float(exp.score)) > 1e-6:
        return False, f"expected {exp.score:g} automatic points, got {answers.score:g}"
    return True, ""


def _describe_answers(exp: AnswersExpectation) -> str:
    text = f"score {exp.score}" if exp.score is not None else "answers"
    if exp.file:
        text += f", file {exp.file}"
    if exp.questions:
        text += f", {len(exp.questions)} questions"
    if exp.others:
        text += f", others {exp.others}"
    return text


def _got_answers(answers: Optional[AnswersResult]) -> str:
    if answers is None:
        return "not graded"
    counts = ", ".join(f"{answers.count(s)} {s}" for s in QUESTION_STATUSES if answers.count(s))
    return f"{answers.status} [{counts}]"


def _describe(exp: Expectation) -> str:
    text = exp.verdict
    if exp.failing:
        text += " [" + ", ".join(exp.failing) + "]"
    if exp.speed:
        text += f", speed {exp.speed}"
    return text


def run_selftest(
    root: Path,
    build_dir: Path,
    out_dir: Path,
    *,
    names: tuple = (),
    jobs: Optional[int] = None,
    echo: Callable[[str], None] = print,
) -> tuple:
    """Grades every hand-in, `jobs` at once (default: gradings_at_once()), and returns (rows, gpu_present)."""
    jobs = jobs or gradings_at_once()
    from ..spec.assignment import load_assignment
    from ..system.paths import ASSIGNMENT_FILE

    assignment = load_assignment(root / ASSIGNMENT_FILE)
    part_files = {p.id: p.file for p in assignment.parts}
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    hand_ins = [HandIn("reference-solutions", root / "solutions", "The reference solutions.",
                       [Expectation(p.id, "pass") for p in assignment.parts],
                       AnswersExpectation(score="full", file="read") if assignment.questions else None)]
    hand_ins += load_hand_ins(root / "tests" / "submissions", set(part_files), {q.id for q in assignment.questions})
    hand_ins += generated_hand_ins(out_dir / "generated", part_files)
    if names:
        unknown = sorted(set(names) - {h.name for h in hand_ins})
        if unknown:
            # A misspelt name would otherwise pass by, graded by nothing.
            raise SelftestError(f"no hand-in named {', '.join(unknown)} (tests/submissions holds them)")
        hand_ins = [h for h in hand_ins if h.name in names]
    lock = visible_gpu_lock()  # host-wide: a worker or a batch on this GPU times in turn with the self-test
    # A sandbox user no other grader on this host holds (a batch's or a worker's clean-up ends every process of
    # theirs), shared by the self-test's own gradings; where every one is held, the base user beside them.
    sandbox, held, note = hold_one_or_base(sandbox_for_this_process(), "the self-test's gradings run")
    if note:
        echo(note)
    try:
        return _run_hand_ins(hand_ins, sandbox, lock, root, build_dir, out_dir, jobs, assignment, echo)
    finally:
        if held is not None:
            held.release()


def _run_hand_ins(hand_ins: list, sandbox, lock: GpuLock, root: Path, build_dir: Path, out_dir: Path, jobs: int,
                  assignment, echo) -> tuple:

    base = GradeOptions.for_tree(root, build_dir, out_dir, seed=1, jobs=build_jobs_each(jobs))
    reports = Outputs(reports=("student",), results=None, detailed=False)

    def one(hand_in: HandIn) -> GradeResult:
        options = base.replace(out_dir=out_dir / hand_in.name, parts=tuple(e.part for e in hand_in.expectations),
                               answers_only=not hand_in.expectations)
        result = run_grading(hand_in.path, options, reports, sandbox=sandbox, gpu_lock=lock).result
        echo(f"graded {hand_in.name} in {result.seconds:.1f} s")
        return result

    # Hand-ins that hold what others need run one at a time after the rest;
    # the attacks are graded between the probes (canary file, listener).
    together = [h for h in hand_ins if not h.runs_alone]
    alone = [h for h in hand_ins if h.runs_alone]
    attacks = [h for h in hand_ins if h.name.startswith(SECURITY_PREFIX)]

    def grade_all() -> dict:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            graded = dict(zip([h.name for h in together], pool.map(one, together)))
        graded.update((h.name, one(h)) for h in alone)
        return graded

    results, security_rows = _graded_between_probes(grade_all, attacks, root, assignment, sandbox, echo)
    results = [results[h.name] for h in hand_ins]
    gpu = any(r.gpu for r in results)
    rows = []
    for hand_in, result in zip(hand_ins, results):
        by_id = {p.id: p for p in result.parts}
        for exp in hand_in.expectations:
            part = by_id[exp.part]
            ok, why = judge(part, exp, gpu)
            speed = f"{part.speed.gflops:.0f} ({100 * part.speed.fraction:.0f}%)" if part.speed else "-"
            rows.append(Row(hand_in.name, exp.part, _describe(exp), _got(part), ok, why,
                            f"{part.score:g}/{part.max_score:g}", speed))
        if hand_in.answers is not None:
            ok, why = judge_answers(result.answers, hand_in.answers)
            points = f"{result.answers.score:g}/{result.answers.max_score:g}" if result.answers else "-"
            rows.append(Row(hand_in.name, "answers", _describe_answers(hand_in.answers), _got_answers(result.answers),
                            ok, why, points, "-"))
    rows += security_rows
    (out_dir / "selftest.json").write_text(json.dumps({"gpu": gpu, "rows": [asdict(r) for r in rows]}, indent=2))
    return rows, gpu


SECURITY_PREFIX = "security-"


def _graded_between_probes(grade_all, attacks: list, root: Path, assignment, sandbox, echo) -> tuple:
    """Runs grade_all() while the probes are up and checks what students of
    the attack hand-ins would see: returns (results by name, security rows)."""
    from .security import LISTENER_PORT, Probes, check_hand_in, leak_markers

    if not attacks:
        return grade_all(), []
    if not sandbox.switches_user:
        echo("security checks not run: student code runs as this grader's own user (run as root to sandbox it)")
        return grade_all(), []
    rows = []
    with Probes() as probes:
        markers = leak_markers(root, assignment, answer_key_path(root), probes.token)
        results = grade_all()
        for h in attacks:
            problems = check_hand_in(results[h.name], assignment, markers)
            rows.append(Row(h.name, "security", "no secret shown, valid results.json",
                            "; ".join(problems) or "nothing leaked", not problems, "; ".join(problems[:3])))
        if probes.listening:
            got = [f"{peer[0]}: {data[:40]!r}" for peer, data in probes.connections]
            rows.append(Row("security-network", "security", "no connection reaches the listener",
                            "; ".join(got) or "no connection", not got, "; ".join(got)))
        else:
            echo(f"network check not run: port {LISTENER_PORT} is taken")
    return results, rows


def format_rows(rows: list, gpu: bool) -> str:
    header = ("hand-in", "part", "expected", "got", "points", "GFLOP/s", "ok")
    table = [(r.hand_in, r.part, r.expected, r.got, r.points, r.speed, "ok" if r.ok else "MISMATCH: " + r.why)
             for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(header)] if table else [len(h) for h in header]
    widths[-1] = len(header[-1])
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(t, widths)) for t in table]
    bad = sum(not r.ok for r in rows)
    lines.append(f"{len(rows) - bad}/{len(rows)} as expected"
                 + ("" if gpu else " (no GPU: static and build stages judged, and answers)"))
    return "\n".join(lines)
