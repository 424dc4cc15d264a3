"""The class report: what a class did, part by part and question by question.

`class_report(hand_ins, assignment)` counts; the page and its CSVs are drawn
from what it returns and from nothing else (class_report_page.py), so the
figures, the tables and the CSVs cannot disagree. Per part: the score
distribution, the share that lost points to each cause
(class_report_causes.py), the cases most often failed, and each timed
hand-in's speed against its reference solution and the GPU's roofline. Per
question: how many answered what, and the commonest wrong answer.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from ..grading.model import GradeResult, PartResult
from ..grading.scoring import CUBLAS
from ..outputs.causes import built
from ..outputs.speed_words import positive
from ..spec.assignment import Assignment
from .class_report_causes import CAUSE_WORDS, CAUSES, causes_of

MOST_FAILED = 8  # cases listed per part
MOST_ANSWERS = 6  # distinct answers listed per question; the rest are counted together
# Score bins: nothing, tenths of the points, and full marks (or more, with extra credit) on its own.
TENTHS = 10
QUESTION_STATUSES = ("correct", "wrong", "invalid", "unanswered", "collected", "not_graded")


@dataclass
class Bin:
    label: str  # in points: "0", "2.5–5", "25"
    low: float  # points
    high: float
    count: int = 0


@dataclass
class CaseCount:
    name: str
    set: str  # public or hidden
    size: str  # "17x17x17"
    failed: int
    ran: int  # hand-ins whose part ran this case


@dataclass
class SpeedPoint:
    """One hand-in's timed part: the figures its speed histogram and the class roofline show."""

    student: str
    gpu: str
    case: str
    gflops: float
    versus: str  # "reference" or "cublas"
    basis: Optional[float]  # the reference's (or cuBLAS's) GFLOP/s on the same GPU
    share: Optional[float]  # gflops / basis
    full_at: float  # the share that earns every speed point
    zero_at: Optional[float]  # the share at or below which none is earned
    bound: float  # the roofline's bound at this size's compulsory intensity
    intensity: float  # FLOP per byte: measured DRAM traffic where counters were read, else compulsory
    measured: bool  # intensity from the counters


@dataclass
class PartSummary:
    id: str
    title: str
    max_score: float
    extra_credit: bool
    graded: int  # hand-ins shown
    scores: list = field(default_factory=list)  # each hand-in's points
    bins: list = field(default_factory=list)  # of Bin
    built: int = 0
    full_marks: int = 0
    lost: int = 0  # hand-ins that lost points on it
    causes: list = field(default_factory=list)  # (id, words, hand-ins), most common first; only those seen
    cases: list = field(default_factory=list)  # of CaseCount, most failed first
    speeds: list = field(default_factory=list)  # of SpeedPoint

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores) if self.scores else 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.scores) if self.scores else 0.0


@dataclass
class QuestionSummary:
    id: str
    kind: str
    text: str
    key: str  # the answer key as the grading shows it (staff only); "" without one
    points: float
    statuses: dict  # QUESTION_STATUSES -> hand-ins
    answers: list = field(default_factory=list)  # (answer, hand-ins, its status), commonest first
    other_answers: int = 0  # hand-ins whose answer is not among those listed
    top_wrong: Optional[tuple] = None  # (answer, hand-ins) of the commonest wrong answer

    @property
    def asked(self) -> int:
        return sum(self.statuses.values())


@dataclass
class ClassReport:
    title: str
    assignment: str
    hand_ins: list  # every HandIn, shown or not
    max_score: float
    totals: list  # each shown hand-in's total
    total_bins: list  # of Bin
    parts: list  # of PartSummary
    questions: list  # of QuestionSummary
    gpus: Counter  # GPU name -> hand-ins ("" for none)
    ceilings: Optional[dict]  # the roofline of the GPU most hand-ins were graded on
    roofline_gpu: str
    without_answers: Counter = field(default_factory=Counter)  # why answers.yaml was not read -> hand-ins
    unkeyed: int = 0  # hand-ins whose answers were read without the key (nothing graded)

    @property
    def shown(self) -> list:
        return [h for h in self.hand_ins if h.result is not None]

    @property
    def left_out(self) -> list:
        return [h for h in self.hand_ins if h.result is None]

    @property
    def without_gpu(self) -> int:
        return self.gpus.get("", 0)


def score_bins(scores: list, max_score: float) -> list:
    """Nothing, each tenth of max_score, and full marks, counted."""
    step = max_score / TENTHS if max_score > 0 else 0.0
    bins = [Bin("0", 0.0, 0.0)]
    for i in range(TENTHS):
        low, high = step * i, step * (i + 1)
        bins.append(Bin(f"{_num(low)}–{_num(high)}", low, high))
    bins.append(Bin(_num(max_score), max_score, max_score))
    for score in scores:
        if score <= 0 or max_score <= 0:
            index = 0 if score <= 0 else len(bins) - 1
        elif score >= max_score - 1e-9:
            index = len(bins) - 1
        else:
            index = 1 + min(TENTHS - 1, int(score / step))
        bins[index].count += 1
    return bins


def _num(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _part(result: GradeResult, part_id: str) -> Optional[PartResult]:
    return next((p for p in result.parts if p.id == part_id), None)


def _speed_point(student: str, result: GradeResult, part: PartResult) -> Optional[SpeedPoint]:
    """The part's headline timing, when it was timed believably."""
    speed = part.speed
    if speed is None or not positive(speed.gflops) or not positive(speed.intensity):
        return None
    cublas = speed.versus == CUBLAS
    basis = speed.cublas_gflops if cublas else speed.reference_gflops
    basis = float(basis) if positive(basis) else None
    zero = speed.zero_gflops / basis if basis and positive(speed.zero_gflops) else None
    intensity, measured = speed.intensity, False
    dram = part.traffic.level("DRAM") if part.traffic is not None else None
    if dram is not None and positive(dram.intensity):
        intensity, measured = dram.intensity, True
    return SpeedPoint(student=student, gpu=(result.gpu or {}).get("name", ""), case=speed.case, gflops=speed.gflops,
                      versus=speed.versus, basis=basis, share=speed.gflops / basis if basis else None,
                      full_at=speed.full_at, zero_at=zero, bound=speed.bound_gflops, intensity=intensity,
                      measured=measured)


def _summarize_part(spec, shown: list) -> PartSummary:
    summary = PartSummary(id=spec.id, title=spec.title, max_score=spec.points["correctness"] + spec.points["speed"],
                          extra_credit=spec.extra_credit, graded=len(shown))
    causes: Counter = Counter()
    failed: Counter = Counter()
    ran: Counter = Counter()
    cases = {}
    for hand_in in shown:
        part = _part(hand_in.result, spec.id)
        summary.scores.append(part.score)
        summary.built += built(part)
        summary.full_marks += part.score >= part.max_score - 1e-9
        lost = causes_of(part)
        summary.lost += bool(lost)
        causes.update(lost)
        for case in part.cases:
            if case.status == "not_run" and not case.ran:
                continue
            cases.setdefault(case.name, case)
            ran[case.name] += 1
            failed[case.name] += not case.passed
        point = _speed_point(hand_in.name, hand_in.result, part)
        if point is not None:
            summary.speeds.append(point)
    summary.bins = score_bins(summary.scores, summary.max_score)
    order = [cause for cause, _ in CAUSES]
    summary.causes = [(cause, CAUSE_WORDS[cause], n) for cause, n in
                      sorted(causes.items(), key=lambda item: (-item[1], order.index(item[0])))]
    worst = sorted((name for name in failed if failed[name]), key=lambda name: (-failed[name], name))[:MOST_FAILED]
    summary.cases = [CaseCount(name, cases[name].set, f"{cases[name].j}x{cases[name].k}x{cases[name].l}",
                               failed[name], ran[name]) for name in worst]
    return summary


def _answer_of(question) -> str:
    """What a hand-in answered, as the grader read it (a number, an option), or as written when unreadable."""
    return question.read or question.answer


def _summarize_question(spec, answered: list) -> QuestionSummary:
    """`answered`: the QuestionResult of each hand-in whose answers were graded."""
    statuses = Counter(q.status for q in answered)
    keys = Counter(q.key for q in answered if q.key)
    summary = QuestionSummary(id=spec.id, kind=spec.kind, text=spec.text, points=spec.points,
                              key=keys.most_common(1)[0][0] if keys else "",
                              statuses={s: statuses.get(s, 0) for s in QUESTION_STATUSES})
    if spec.kind == "text":
        return summary  # free text: read by a TA, not counted
    given = [q for q in answered if q.status not in ("unanswered", "collected")]
    counts = Counter(_answer_of(q) for q in given)
    verdicts = {}
    for q in given:
        verdicts.setdefault(_answer_of(q), q.status)
    top = counts.most_common(MOST_ANSWERS)
    summary.answers = [(answer, n, verdicts[answer]) for answer, n in top]
    summary.other_answers = len(given) - sum(n for _, n in top)
    wrong = Counter(_answer_of(q) for q in given if q.status == "wrong")
    summary.top_wrong = wrong.most_common(1)[0] if wrong else None
    return summary


def _roofline(shown: list) -> tuple:
    """(ceilings, GPU name) of the GPU most of the class was graded on, where it measured them."""
    gpus = Counter((h.result.gpu or {}).get("name", "") for h in shown if h.result.gpu)
    for name, _ in gpus.most_common():
        for h in shown:
            ceilings = h.result.ceilings or {}
            if (h.result.gpu or {}).get("name") == name and positive(ceilings.get("fp32_gflops")) \
                    and positive(ceilings.get("dram_gbps")):
                return ceilings, name
    return None, ""


def class_report(hand_ins: list, assignment: Assignment) -> ClassReport:
    """Counts what `hand_ins` (class_report_handins: every one graded against
    `assignment`, or left out with its reason) did."""
    shown = [h for h in hand_ins if h.result is not None]
    totals = [h.result.score for h in shown]
    max_score = sum(p.counted_max for p in assignment.parts) + sum(q.points for q in assignment.questions)
    with_answers = [h.result.answers for h in shown if h.result.answers is not None]
    # version_problem left out every grading whose questions differ: the i-th is the same question in each.
    questions = [_summarize_question(spec, [a.questions[i] for a in with_answers])
                 for i, spec in enumerate(assignment.questions)]
    without_answers = Counter(a.summary or a.status for a in with_answers if a.status != "read")
    if len(shown) > len(with_answers):  # graded without its questions (the options asked for none)
        without_answers["no questions graded"] = len(shown) - len(with_answers)
    ceilings, gpu = _roofline(shown)
    return ClassReport(
        title=assignment.title, assignment=assignment.name, hand_ins=list(hand_ins), max_score=max_score,
        totals=totals, total_bins=score_bins(totals, max_score),
        parts=[_summarize_part(spec, shown) for spec in assignment.parts], questions=questions,
        gpus=Counter((h.result.gpu or {}).get("name", "") for h in shown), ceilings=ceilings, roofline_gpu=gpu,
        without_answers=without_answers, unkeyed=sum(not a.graded for a in with_answers),
    )
