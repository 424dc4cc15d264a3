"""What one grading found: the data every output is made from.

`pipeline.grade()` fills a `GradeResult`; results.json (Gradescope), the
Markdown and HTML reports and the detailed JSON (`GradeResult.to_dict()`) are
all rendered from it and from nothing else, so they cannot disagree.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import asdict, dataclass, field
from typing import Optional

from .answers import AnswersResult
from .traffic import Traffic

# The stages of a part, in the order they run.
STAGES = ("static", "build", "correctness", "launch", "memcheck", "racecheck", "speed")
STAGE_TITLES = {
    "static": "static checks",
    "build": "build",
    "correctness": "correctness",
    "launch": "launch checks",
    "memcheck": "memory safety (compute-sanitizer memcheck)",
    "racecheck": "shared-memory races (compute-sanitizer racecheck)",
    "speed": "speed",
}
# A stage's status: passed (it ran and found nothing wrong), failed (it
# found a fault in the submission), not_run (it could not run: no GPU, an
# earlier stage failed; never a pass), error (the grader itself failed in
# it: not the student's fault).
STATUSES = ("passed", "failed", "not_run", "error")
NO_DEVICE_NOTE = ("No CUDA device was found: the GPU stages (correctness, launch checks, sanitizers, speed) did "
                  "not run, and score nothing.")
# Where a speed target's reference figure comes from (calibration.py).
MEASURED_RULE = "reference"  # the reference solution, timed on this GPU
ESTIMATED_RULE = "estimate"  # no reference here: scaled from the grading GPU's published figures


@dataclass
class Stage:
    name: str  # one of STAGES
    status: str  # one of STATUSES
    summary: str = ""  # one line a student reads first
    details: str = ""  # longer text: compiler or sanitizer output, the reason in full
    seconds: float = 0.0
    hints: list[str] = field(default_factory=list)  # what to look at, in the student's terms


@dataclass
class ElementError:
    row: int
    col: int
    expected: float
    got: str  # as text: also "nan" or "unwritten"
    allowed: float


@dataclass
class CaseResult:
    name: str  # e.g. "w17", "33x17x65-smem2048"
    set: str  # "public" or "hidden"
    j: int
    k: int
    l: int
    passed: bool
    ran: bool = True
    status: str = "ok"  # the harness's status for the case (see tilelab/exit_codes.h), "not_run" if it never ran
    reasons: list = field(default_factory=list)
    wrong: int = 0
    nan: int = 0
    unwritten: int = 0
    exact: bool = False  # small-integer inputs: no tolerance at all
    first_errors: list[ElementError] = field(default_factory=list)


@dataclass
class Speed:
    case: str  # the timed case, e.g. "4096x4096x4096"
    gflops: float  # achieved, from the time used for scoring
    time_ms: float  # the time used for scoring
    event_ms: float
    cupti_ms: float
    wall_ms: float
    ceiling_value: float  # the GPU's measured FP32 FMA rate, GFLOP/s
    bound_gflops: float  # roofline bound at this case's intensity
    intensity: float  # FLOP per byte of compulsory DRAM traffic
    reference_gflops: Optional[float]  # the part's reference solution at this size on this GPU (None: not timed)
    rule: str  # MEASURED_RULE or ESTIMATED_RULE
    full_at: float  # full credit from this fraction of the reference (of cuBLAS when versus is "cublas")
    target_gflops: float  # = full_at x reference_gflops (or x cublas_gflops)
    zero_gflops: float  # no credit at or below this
    fraction: float  # of the speed points earned, 0..1 (the headline Speed: all sizes combined)
    flags: list = field(default_factory=list)  # integrity notes (e.g. wall clock used instead of events)
    versus: str = "reference"  # what full_at is a fraction of: "reference" or "cublas"
    cublas_gflops: Optional[float] = None  # cuBLAS SGEMM (FP32) at this size on this GPU, when versus is "cublas"
    # The GPU's clocks around the timed calls (grading/clocks.py, Clocks.to_dict) and whether this size was
    # timed twice because the first timing throttled; None in results written before clocks were read.
    clocks: Optional[dict] = None

    @property
    def of_cublas(self) -> Optional[float]:
        """The share of cuBLAS reached, when cuBLAS was timed."""
        return self.gflops / self.cublas_gflops if self.cublas_gflops else None


@dataclass
class PartResult:
    id: str
    title: str
    file: str
    stages: dict[str, Stage]  # by stage name
    cases: list[CaseResult] = field(default_factory=list)
    correctness_score: float = 0.0
    correctness_max: float = 0.0
    speed_score: float = 0.0
    speed_max: float = 0.0
    speed: Optional[Speed] = None  # the first timed size, with the fraction of all sizes combined
    speeds: list[Speed] = field(default_factory=list)  # every timed size, each with its own fraction
    extra_credit: bool = False  # its points come on top of the total (max_score still shows what it is worth)
    launches: list = field(default_factory=list)  # CUPTI records of one correctness call, for the report
    hidden_total: int = 0  # hidden cases graded (their names stay hidden in student views)
    withheld_by: list = field(default_factory=list)  # stages whose failure took the correctness points
    not_written: list = field(default_factory=list)  # the starter's TODO stubs left: "launchNaive (line 35)"
    traffic: Optional[Traffic] = None  # counters of one call at the timing size (traffic.py); no points
    traffic_note: str = ""  # why there are none, when the part was timed
    reference_traffic: Optional[Traffic] = None  # the part's reference solution's, on this GPU
    traffic_hints: list = field(default_factory=list)  # what the counters suggest trying (counter_hints.py)
    # Timed with its counters still to be read (grading/counters_later.py): the SHA-256 of the part file
    # timed, so that they are read of the same code; "" once read, or never left for later.
    counters_later: str = ""

    @property
    def score(self) -> float:
        return self.correctness_score + self.speed_score

    @property
    def max_score(self) -> float:
        return self.correctness_max + self.speed_max

    @property
    def failed_stage(self) -> Optional[str]:
        for name in STAGES:
            if self.stages[name].status in ("failed", "error"):
                return name
        return None


@dataclass
class GradeResult:
    assignment: str  # the assignment's name in assignment.yaml
    mode: str  # "grade" (all cases, fresh seed) or "check" (public cases, fixed seed)
    submission: str
    seed: int
    gpu: Optional[dict]  # device facts, None without a GPU
    ceilings: Optional[dict]  # measured roofline ceilings, None without a GPU
    parts: list[PartResult]
    started: str  # ISO 8601
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)  # where the time went, seconds per phase
    # When each phase ran, [first start, last end] in seconds from the grading's
    # start: phases overlap (the GPU probe beside the build, sanitizers beside
    # correctness), so their timings add up to more than the wall time.
    spans: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)  # grading-wide notes ("no GPU: ...")
    title: str = ""  # the assignment's title, for headings
    answers: Optional[AnswersResult] = None  # the exercise questions (answers.py); None when there are none
    calibration: Optional[dict] = None  # where the speed targets came from (Calibration.summary), None without
    staff_notes: list = field(default_factory=list)  # for the course staff only (why the grader failed a stage)
    # False: the grading as a student reads it before the course staff publish the grades, without the
    # hidden cases, the answers' results or the total (operations/service/publication.py).
    published: bool = True

    @property
    def score(self) -> float:
        return sum(p.score for p in self.parts) + (self.answers.score if self.answers else 0.0)

    @property
    def max_score(self) -> float:
        """The total: an extra-credit part's points are not in it, though it can earn them."""
        return (sum(p.max_score for p in self.parts if not p.extra_credit)
                + (self.answers.max_score if self.answers else 0.0))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["score"] = round(self.score, 4)
        d["max_score"] = round(self.max_score, 4)
        for part, pd in zip(self.parts, d["parts"]):
            pd["score"] = round(part.score, 4)
            pd["max_score"] = round(part.max_score, 4)
            pd["failed_stage"] = part.failed_stage
        if self.answers is not None:
            d["answers"] = self.answers.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "GradeResult":
        """A grade.json (to_dict) read back whole, every nested record as its
        own class again: what a client of the service renders its views from."""
        return rebuilt(cls, d)


def rebuilt(cls, data: dict):
    """A dataclass from its asdict() form, led by the fields' annotations:
    nested records, lists and dicts of them are rebuilt at every depth, and
    keys the class does not know (to_dict's derived scores) are left out."""
    hints = _hints(cls)
    return cls(**{f.name: _as(hints[f.name], data[f.name]) for f in dataclasses.fields(cls) if f.name in data})


@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict:
    """The field annotations of a record class, resolved once: resolving them is most of a read's time."""
    return typing.get_type_hints(cls)


def _as(kind, value):
    if value is None:
        return None
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union:  # Optional[X]
        return _as(next(a for a in args if a is not type(None)), value)
    if dataclasses.is_dataclass(kind):
        return rebuilt(kind, value)
    if origin is list and args:
        return [_as(args[0], v) for v in value]
    if origin is dict and len(args) == 2:
        return {k: _as(args[1], v) for k, v in value.items()}
    return value


NO_GPU = "not run: no CUDA device on this machine"
NO_CEILINGS = "not run: the GPU's ceilings could not be measured (see the notes)"
WORK_ELSEWHERE = "not run: the launch checks found work done outside the part's own kernels"
NO_TARGETS = ("not scored: the grader could not time its reference solutions on this GPU, so it has no speed "
              "targets")
NO_TARGETS_NOTE = ("Speed was not scored: the grader could not time its reference solutions on this GPU, so it "
                   "has no speed targets. This is a problem in the grader, not in your code; the course staff "
                   "can see why and will regrade.")
