"""Loading and checking assignment.yaml, the one description of the assignment.

Everything that needs to know the parts, their launchers, their cases or their
points reads it through `load_assignment`: the build (through
`tilelab.build_export`), the starter generator, the grader and the handouts.
Errors name the offending place ("parts[2].cases.public[4]: ...") so an
instructor can fix the file without reading this code.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Optional

import yaml

from .matmul import matmul_flop

SIGNATURES = {
    # signature kind -> the launcher's parameters after (M, N, P)
    "square": "int Width",
    "rectangular": "int j, int k, int l",
    "rectangular_props": "int j, int k, int l, const cudaDeviceProp& prop",
}
DISTRIBUTIONS = ("uniform", "small_int")
PROP_KEYS = ("sharedMemPerBlock", "maxThreadsPerBlock", "maxThreadsDim")
CASE_SETS = ("public", "hidden", "timing", "memcheck", "racecheck")
GRADED_SETS = ("public", "hidden")  # their case names share one namespace in reports
SHARED_MEMORY_POLICIES = ("any", "required", "dynamic_only")
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
STAGE_TIME_LIMITS = ("build", "correctness", "sanitizer", "speed")
MAX_DIMENSION = 1 << 20
QUESTION_KINDS = ("number", "choice", "text")
# A part's starter: a TODO stub that fails loudly until written, or a
# correct, slow kernel to improve (the challenge part).
STARTER_KINDS = ("todo", "working")
LEADERBOARD_NAMES = ("name", "alias")

_ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FILE_RE = re.compile(r"^[A-Za-z0-9_]+\.cu$")


class AssignmentError(ValueError):
    """assignment.yaml is missing, unreadable or breaks the schema."""


@dataclass(frozen=True)
class Case:
    """One problem size a part is run on."""

    name: str
    j: int
    k: int
    l: int
    distribution: str = "uniform"
    props: dict = field(default_factory=dict)

    @property
    def flop(self) -> float:
        return matmul_flop(self.j, self.k, self.l)

    def to_json(self) -> dict:
        out = {"name": self.name, "j": self.j, "k": self.k, "l": self.l, "distribution": self.distribution}
        if self.props:
            out["props"] = dict(self.props)
        return out


@dataclass(frozen=True)
class Part:
    id: str
    title: str
    file: str
    launcher: str
    signature: str
    teaches: str
    tolerance: dict
    points: dict
    cases: dict  # set name -> tuple of Case
    shared_memory: str  # one of SHARED_MEMORY_POLICIES
    versus_cublas: Optional["CublasRule"] = None  # scored against cuBLAS, not against its own reference
    starter: str = "todo"  # one of STARTER_KINDS
    extra_credit: bool = False  # its points are earned on top of the total, not part of it

    @property
    def counted_max(self) -> float:
        """What the part adds to the assignment's total: nothing when it is extra credit."""
        return 0.0 if self.extra_credit else self.points["correctness"] + self.points["speed"]

    @property
    def declaration(self) -> str:
        return f"void {self.launcher}(const float* M, const float* N, float* P, {SIGNATURES[self.signature]})"


@dataclass(frozen=True)
class Question:
    """An exercise question answered in answers.yaml."""

    id: str
    kind: str  # one of QUESTION_KINDS
    text: str
    points: float  # automatic points (0 for text questions)
    tolerance: float = 0.0  # relative, for number questions
    options: dict = field(default_factory=dict)  # option id -> text, for choice questions
    manual_points: float = 0.0  # suggested points a TA awards by hand (text questions)


@dataclass(frozen=True)
class SpeedRule:
    """How a part's speed is scored, for every part alike: against its
    reference solution timed on the same GPU (tilelab.grading.calibration)."""

    full_at: float  # full speed points from this fraction of the reference's GFLOP/s
    zero_at: float  # none at or below this fraction
    runs: int  # timed runs of each reference per calibration (median; their spread is reported)


@dataclass(frozen=True)
class CublasRule:
    """The speed rule of a part that goes beyond the textbook: full speed
    points from full_at x cuBLAS SGEMM (FP32) timed by the grader at the same
    size on the same GPU, none at or below the reference of the first part
    in zero_at_reference_of timed at that size (the textbook tiled kernel)."""

    full_at: float
    zero_at_reference_of: tuple  # part ids, tried in order for each timing size


@dataclass(frozen=True)
class Assignment:
    path: Path
    name: str
    title: str
    grading: dict  # time_limits, visibility, leaderboard_names
    timing: dict
    parts: tuple
    speed: SpeedRule
    questions: tuple = ()
    question_code: dict = field(default_factory=dict)  # name -> code shown with the questions

    def question(self, question_id: str) -> Question:
        for q in self.questions:
            if q.id == question_id:
                return q
        raise AssignmentError(f"no question named {question_id!r}")

    @property
    def uses_cublas(self) -> bool:
        """Whether some part's speed is scored against cuBLAS (the grader then times it)."""
        return any(p.versus_cublas for p in self.parts)

    def part(self, part_id: str) -> Part:
        for p in self.parts:
            if p.id == part_id:
                return p
        known = ", ".join(p.id for p in self.parts)
        raise AssignmentError(f"no part named {part_id!r} (parts: {known})")

    def part_named(self, name: str) -> Part:
        """The part a person names: its id ("naive") or its file, with or
        without a folder ("naive.cu", "starter/naive.cu"). The error suggests
        the closest name."""
        base = PurePath(name).name
        for p in self.parts:
            if name == p.id or base == p.file:
                return p
        names = [p.id for p in self.parts] + [p.file for p in self.parts]
        close = difflib.get_close_matches(base, names, n=1)
        known = ", ".join(p.id for p in self.parts)
        suggestion = f"; did you mean {close[0]}?" if close else ""
        raise AssignmentError(f"no part named {name!r} (parts: {known}, or their files{suggestion})")


def _fail(where: str, what: str) -> None:
    raise AssignmentError(f"{where}: {what}")


def _mapping(value: Any, where: str, required: tuple = (), optional: tuple = ()) -> dict:
    if not isinstance(value, dict):
        _fail(where, f"must be a mapping, got {type(value).__name__}")
    for key in required:
        if key not in value:
            _fail(where, f"missing required key {key!r}")
    known = set(required) | set(optional)
    for key in value:
        if key not in known:
            _fail(where, f"unknown key {key!r} (expected one of: {', '.join(sorted(known))})")
    return value


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    # bool is an int in Python; `width: yes` must not become 1.
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(where, f"must be an integer, got {value!r}")
    if not lo <= value <= hi:
        _fail(where, f"must be between {lo} and {hi}, got {value}")
    return value


def _number(value: Any, where: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(where, f"must be a number, got {value!r}")
    if not lo <= value <= hi:
        _fail(where, f"must be between {lo} and {hi}, got {value}")
    return float(value)


def _string(value: Any, where: str, pattern: Optional[re.Pattern] = None, hint: str = "") -> str:
    if not isinstance(value, str) or not value.strip():
        _fail(where, f"must be a non-empty string, got {value!r}")
    if pattern is not None and not pattern.match(value):
        _fail(where, f"{value!r} is not valid{(': ' + hint) if hint else ''}")
    return value


def _case_name(j: int, k: int, l: int, square: bool, distribution: str, props: dict) -> str:
    name = f"w{j}" if square else f"{j}x{k}x{l}"
    if distribution == "small_int":
        name += "-int"
    for key in PROP_KEYS:
        if key in props:
            short = {"sharedMemPerBlock": "smem", "maxThreadsPerBlock": "threads", "maxThreadsDim": "dim"}[key]
            value = props[key]
            name += f"-{short}{'x'.join(map(str, value)) if isinstance(value, list) else value}"
    return name


def _parse_case(raw: Any, where: str, signature: str) -> Case:
    square = signature == "square"
    distribution, props = "uniform", {}
    if square:
        if isinstance(raw, dict):
            raw = _mapping(raw, where, required=("width",), optional=("inputs",))
            width = _int(raw["width"], f"{where}.width", 1, MAX_DIMENSION)
            distribution = raw.get("inputs", "uniform")
        else:
            width = _int(raw, where, 1, MAX_DIMENSION)
        j = k = l = width
    else:
        if isinstance(raw, list):
            if len(raw) != 3:
                _fail(where, f"a rectangular case is [j, k, l], got {raw!r}")
            j, k, l = (_int(v, f"{where}[{i}]", 1, MAX_DIMENSION) for i, v in enumerate(raw))
        else:
            raw = _mapping(raw, where, required=("j", "k", "l"), optional=("inputs", "props"))
            j, k, l = (_int(raw[d], f"{where}.{d}", 1, MAX_DIMENSION) for d in "jkl")
            distribution = raw.get("inputs", "uniform")
            if "props" in raw:
                if signature != "rectangular_props":
                    _fail(f"{where}.props", "only a launcher that takes cudaDeviceProp can be given properties")
                props = dict(_mapping(raw["props"], f"{where}.props", optional=PROP_KEYS))
                for key, value in props.items():
                    if key == "sharedMemPerBlock" and value == "optin":
                        continue
                    if key == "maxThreadsDim":
                        if not isinstance(value, list) or len(value) != 3:
                            _fail(f"{where}.props.maxThreadsDim", f"must be [x, y, z], got {value!r}")
                        props[key] = [_int(v, f"{where}.props.maxThreadsDim[{i}]", 1, 1 << 20)
                                      for i, v in enumerate(value)]
                        continue
                    _int(value, f"{where}.props.{key}", 1, 1 << 30)
    if distribution not in DISTRIBUTIONS:
        _fail(f"{where}.inputs", f"must be one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}")
    for a, b in ((j, k), (k, l), (j, l)):
        if a * b > 1 << 30:
            _fail(where, "a matrix of this case has more than 2^30 elements")
    name = _case_name(j, k, l, square, distribution, props)
    return Case(name=name, j=j, k=k, l=l, distribution=distribution, props=props)


def _parse_part(raw: Any, where: str, defaults: dict) -> Part:
    if isinstance(raw, dict) and "speed" in raw:
        _fail(f"{where}.speed", "a part has no speed target of its own any more: every part is scored against "
                                "its reference solution on the grading GPU (grading.speed)")
    raw = _mapping(
        raw,
        where,
        required=("id", "title", "file", "launcher", "signature", "teaches", "points", "cases", "launch"),
        optional=("tolerance", "versus_cublas", "starter"),
    )
    part_id = _string(raw["id"], f"{where}.id", _ID_RE, "lower-case letters, digits and '_'")
    if part_id == "cublas":
        _fail(f"{where}.id", "'cublas' names the grader's cuBLAS baseline; give the part another id")
    file = _string(raw["file"], f"{where}.file", _FILE_RE, "a file name ending in .cu")
    launcher = _string(raw["launcher"], f"{where}.launcher", _IDENTIFIER_RE, "a C++ identifier")
    signature = raw["signature"]
    if signature not in SIGNATURES:
        _fail(f"{where}.signature", f"must be one of {', '.join(SIGNATURES)}, got {signature!r}")

    tolerance = dict(defaults.get("tolerance", {}))
    if "tolerance" in raw:
        tolerance.update(_mapping(raw["tolerance"], f"{where}.tolerance", optional=("sqrt_k_factor",)))
    tolerance["sqrt_k_factor"] = _number(
        tolerance.get("sqrt_k_factor"), f"{where}.tolerance.sqrt_k_factor", 0.0, 1e6
    )

    raw_points = _mapping(raw["points"], f"{where}.points", required=("correctness", "speed"),
                          optional=("extra_credit",))
    points = {key: _number(raw_points[key], f"{where}.points.{key}", 0, 1000) for key in ("correctness", "speed")}
    extra_credit = raw_points.get("extra_credit", False)
    if not isinstance(extra_credit, bool):
        _fail(f"{where}.points.extra_credit", f"must be true or false, got {extra_credit!r}")
    versus_cublas = None
    if "versus_cublas" in raw:
        if signature == "square":
            _fail(f"{where}.versus_cublas", "needs a rectangular launcher (cuBLAS is timed at j x k x l)")
        rule = _mapping(raw["versus_cublas"], f"{where}.versus_cublas", required=("full_at", "zero_at_reference_of"))
        floor = rule["zero_at_reference_of"]
        if not isinstance(floor, list) or not floor or not all(isinstance(f, str) for f in floor):
            _fail(f"{where}.versus_cublas.zero_at_reference_of", "must be a non-empty list of part ids")
        versus_cublas = CublasRule(_number(rule["full_at"], f"{where}.versus_cublas.full_at", 0.05, 2.0),
                                   tuple(floor))
    starter = raw.get("starter", "todo")
    if starter not in STARTER_KINDS:
        _fail(f"{where}.starter", f"must be one of {', '.join(STARTER_KINDS)}, got {starter!r}")

    raw_cases = _mapping(raw["cases"], f"{where}.cases", required=CASE_SETS)
    cases = {}
    graded_names = {}
    for set_name in CASE_SETS:
        entries = raw_cases[set_name]
        # Hidden cases may be absent (a student's copy has none); every other set is needed.
        if not isinstance(entries, list) or (not entries and set_name != "hidden"):
            _fail(f"{where}.cases.{set_name}", "must be a non-empty list" if set_name != "hidden" else "must be a list")
        parsed = []
        names = {}
        for i, entry in enumerate(entries):
            case = _parse_case(entry, f"{where}.cases.{set_name}[{i}]", signature)
            # Each set runs in its own harness run; public and hidden cases are
            # also reported side by side, so they share one namespace.
            seen = graded_names if set_name in GRADED_SETS else names
            if case.name in seen:
                _fail(f"{where}.cases.{set_name}[{i}]", f"case {case.name} is already listed in {seen[case.name]}")
            seen[case.name] = f"cases.{set_name}"
            parsed.append(case)
        cases[set_name] = tuple(parsed)

    launch = _mapping(raw["launch"], f"{where}.launch", required=("shared_memory",))
    if launch["shared_memory"] not in SHARED_MEMORY_POLICIES:
        _fail(f"{where}.launch.shared_memory", f"must be one of {', '.join(SHARED_MEMORY_POLICIES)}")
    if launch["shared_memory"] == "dynamic_only" and signature != "rectangular_props":
        _fail(f"{where}.launch.shared_memory", "dynamic_only needs a launcher that is given cudaDeviceProp")
    return Part(
        id=part_id,
        title=_string(raw["title"], f"{where}.title"),
        file=file,
        launcher=launcher,
        signature=signature,
        teaches=_string(raw["teaches"], f"{where}.teaches"),
        tolerance=tolerance,
        points=points,
        cases=cases,
        shared_memory=launch["shared_memory"],
        versus_cublas=versus_cublas,
        starter=starter,
        extra_credit=extra_credit,
    )


def _check_cublas_floors(parts: tuple) -> None:
    """Every timing size of a part scored against cuBLAS needs a part in its
    zero_at_reference_of timed at that same size: that reference sets its floor."""
    for i, p in enumerate(parts):
        if p.versus_cublas is None:
            continue
        where = f"parts[{i}].versus_cublas.zero_at_reference_of"
        by_id = {q.id: q for q in parts}
        for part_id in p.versus_cublas.zero_at_reference_of:
            if part_id not in by_id or part_id == p.id:
                _fail(where, f"{part_id!r} is not another part (parts: {', '.join(by_id)})")
        for case in p.cases["timing"]:
            size = (case.j, case.k, case.l)
            if not any(size in [(c.j, c.k, c.l) for c in by_id[f].cases["timing"]]
                       for f in p.versus_cublas.zero_at_reference_of):
                _fail(where, f"none of these parts is timed at {case.j}x{case.k}x{case.l}, the size of "
                             f"{p.id}'s timing case {case.name}")


_QUESTION_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _parse_question(raw: Any, where: str) -> Question:
    raw = _mapping(raw, where, required=("id", "kind", "text"),
                   optional=("points", "tolerance", "options", "manual_points"))
    qid = _string(raw["id"], f"{where}.id", _QUESTION_ID_RE, "lower-case letters, digits and '-'")
    kind = raw["kind"]
    if kind not in QUESTION_KINDS:
        _fail(f"{where}.kind", f"must be one of {', '.join(QUESTION_KINDS)}, got {kind!r}")
    text = _string(raw["text"], f"{where}.text")
    if kind == "text":
        if "points" in raw or "tolerance" in raw or "options" in raw:
            _fail(where, "a text question has manual_points only (a TA grades it)")
        manual = _number(raw.get("manual_points", 0), f"{where}.manual_points", 0, 1000)
        return Question(qid, kind, text, 0.0, manual_points=manual)
    if "manual_points" in raw:
        _fail(f"{where}.manual_points", "only text questions are graded by hand")
    points = _number(raw.get("points"), f"{where}.points", 0, 1000)
    if kind == "number":
        if "options" in raw:
            _fail(f"{where}.options", "a number question has no options")
        tolerance = _number(raw.get("tolerance"), f"{where}.tolerance", 0.0, 1.0)
        return Question(qid, kind, text, points, tolerance=tolerance)
    if "tolerance" in raw:
        _fail(f"{where}.tolerance", "a choice question has no tolerance")
    options = raw.get("options")
    if not isinstance(options, dict) or len(options) < 2:
        _fail(f"{where}.options", "a choice question needs at least two options (id: text)")
    for key, value in options.items():
        if not isinstance(key, str) or not _QUESTION_ID_RE.match(key):
            _fail(f"{where}.options", f"option id {key!r} must be a short lower-case string (quote yes/no)")
        _string(value, f"{where}.options.{key}")
    return Question(qid, kind, text, points, options=dict(options))


def _parse_questions(raw: Any, code: Any) -> tuple:
    if raw is None:
        return (), {}
    if not isinstance(raw, list):
        _fail("questions", "must be a list")
    questions = tuple(_parse_question(q, f"questions[{i}]") for i, q in enumerate(raw))
    ids = [q.id for q in questions]
    for qid in ids:
        if ids.count(qid) > 1:
            _fail("questions", f"two questions share the id {qid!r}")
    code = _mapping(code if code is not None else {}, "question_code",
                    optional=tuple(code.keys()) if isinstance(code, dict) else ())
    for name, text in code.items():
        _string(text, f"question_code.{name}")
    return questions, dict(code)


def _parse_grading(raw: Any) -> dict:
    raw = _mapping(raw, "grading", required=("time_limits", "visibility", "speed"), optional=("leaderboard",))
    limits = _mapping(raw["time_limits"], "grading.time_limits", required=STAGE_TIME_LIMITS)
    visibility = dict(_mapping(raw["visibility"], "grading.visibility", required=GRADED_SETS,
                               optional=("questions",)))
    # Answers seen at once could be found by resubmitting; by default they
    # show after the due date.
    visibility.setdefault("questions", "after_due_date")
    for key, value in visibility.items():
        if value not in VISIBILITIES:
            _fail(f"grading.visibility.{key}", f"must be one of {', '.join(VISIBILITIES)}, got {value!r}")
    leaderboard = _mapping(raw.get("leaderboard", {}), "grading.leaderboard", optional=("names",))
    names = leaderboard.get("names", "alias")
    if names not in LEADERBOARD_NAMES:
        _fail("grading.leaderboard.names", f"must be one of {', '.join(LEADERBOARD_NAMES)}, got {names!r}")
    return {
        "time_limits": {k: _number(limits[k], f"grading.time_limits.{k}", 1, 3600) for k in STAGE_TIME_LIMITS},
        "visibility": dict(visibility),
        "leaderboard_names": names,
    }


def _parse_speed_rule(raw: Any) -> SpeedRule:
    if isinstance(raw, dict) and ("ceiling" in raw or "zero_below" in raw):
        _fail("grading.speed", "targets are no longer fractions of the roofline: give full_at and zero_at, "
                               "fractions of the reference solution's GFLOP/s on the grading GPU")
    speed = _mapping(raw, "grading.speed", required=("full_at", "zero_at", "calibration_runs"))
    full_at = _number(speed["full_at"], "grading.speed.full_at", 0.05, 2.0)
    zero_at = _number(speed["zero_at"], "grading.speed.zero_at", 0.0, 2.0)
    if zero_at >= full_at:
        _fail("grading.speed.zero_at", f"must be below full_at ({full_at:g}), got {zero_at:g}")
    runs = speed["calibration_runs"]
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= 20:
        _fail("grading.speed.calibration_runs", f"must be a whole number from 1 to 20, got {runs!r}")
    return SpeedRule(full_at=full_at, zero_at=zero_at, runs=runs)


def parse_assignment(doc: Any, path: Path) -> Assignment:
    doc = _mapping(doc, "assignment.yaml", required=("name", "title", "defaults", "grading", "timing", "parts"),
                   optional=("questions", "question_code"))
    defaults = _mapping(doc["defaults"], "defaults", optional=("tolerance",))
    grading = _parse_grading(doc["grading"])
    timing = _mapping(
        doc["timing"],
        "timing",
        required=("repetitions", "warmup_calls", "warmup_ms", "input_sets", "samples"),
    )
    timing = {
        "repetitions": _int(timing["repetitions"], "timing.repetitions", 1, 10000),
        "warmup_calls": _int(timing["warmup_calls"], "timing.warmup_calls", 0, 10000),
        "warmup_ms": _number(timing["warmup_ms"], "timing.warmup_ms", 0, 60000),
        "input_sets": _int(timing["input_sets"], "timing.input_sets", 1, 64),
        "samples": _int(timing["samples"], "timing.samples", 4, 1 << 16),
    }
    if not isinstance(doc["parts"], list) or not doc["parts"]:
        _fail("parts", "must be a non-empty list")
    parts = tuple(_parse_part(p, f"parts[{i}]", defaults) for i, p in enumerate(doc["parts"]))
    for attr in ("id", "file", "launcher"):
        values = [getattr(p, attr) for p in parts]
        for v in values:
            if values.count(v) > 1:
                _fail("parts", f"two parts share the {attr} {v!r}")
    _check_cublas_floors(parts)
    questions, question_code = _parse_questions(doc.get("questions"), doc.get("question_code"))
    return Assignment(
        path=path,
        name=_string(doc["name"], "name", _ID_RE, "lower-case letters, digits and '_'"),
        title=_string(doc["title"], "title"),
        grading=grading,
        timing=timing,
        parts=parts,
        speed=_parse_speed_rule(doc["grading"]["speed"]),
        questions=questions,
        question_code=question_code,
    )


def load_assignment(path: Path | str) -> Assignment:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise AssignmentError(f"{path}: cannot read ({e.strerror})") from e
    try:
        # libyaml's loader where PyYAML has it: every command reads this file
        # first, and the pure-Python loader takes 0.1 s over it.
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise AssignmentError(f"{path}: not valid YAML: {e}") from e
    try:
        return parse_assignment(doc, path)
    except AssignmentError as e:
        raise AssignmentError(f"{path}: {e}") from None
