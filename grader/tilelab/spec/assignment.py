"""Loading and checking assignment.yaml, the one description of the assignment.

- Everything that needs the parts, launchers, cases or points reads it
  through `load_assignment`: the build (tilelab.spec.build_export), the
  starter generator, the grader and the handouts.
- Keys, defaults, bounds and allowed values come from tilelab.spec.schema;
  the rules that tie keys together are checked here. Errors name the place
  ("parts[2].cases.public[4]: ...") so an instructor can fix the file.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Optional

import yaml

from . import schema
from .cases import Case, parse_case
from .checks import AssignmentError, fail, mapping, string, value
from .schema import CASE_SETS, GRADED_SETS, SIGNATURES

# What other modules import from here; some of it is defined in cases, checks and schema.
__all__ = ["Assignment", "AssignmentError", "CASE_SETS", "Case", "CublasRule", "Part", "Question", "SIGNATURES",
           "SpeedRule", "load_assignment", "parse_assignment"]


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


def _parse_cases(raw: Any, where: str, signature: str) -> dict:
    raw_cases = mapping(raw, where, schema.PART.key("cases"))
    cases = {}
    graded_names = {}
    for set_name in CASE_SETS:
        entries = raw_cases[set_name]
        # Hidden cases may be absent (a student's copy has none); every other set is needed.
        if not isinstance(entries, list) or (not entries and set_name != "hidden"):
            fail(f"{where}.{set_name}", "must be a non-empty list" if set_name != "hidden" else "must be a list")
        parsed = []
        names = {}
        for i, entry in enumerate(entries):
            case = parse_case(entry, f"{where}.{set_name}[{i}]", signature)
            # Public and hidden cases run in one harness run and are reported
            # side by side, so they share one namespace.
            seen = graded_names if set_name in GRADED_SETS else names
            if case.name in seen:
                fail(f"{where}.{set_name}[{i}]", f"case {case.name} is already listed in {seen[case.name]}")
            seen[case.name] = f"cases.{set_name}"
            parsed.append(case)
        cases[set_name] = tuple(parsed)
    return cases


def _parse_part(raw: Any, where: str, defaults: dict) -> Part:
    if isinstance(raw, dict) and "speed" in raw:
        fail(f"{where}.speed", "a part has no speed target of its own any more: every part is scored against "
                               "its reference solution on the grading GPU (grading.speed)")
    node = schema.PART
    raw = mapping(raw, where, node)
    part_id = value(raw, node, "id", where)
    if part_id == "cublas":
        fail(f"{where}.id", "'cublas' names the grader's cuBLAS baseline; give the part another id")
    file = value(raw, node, "file", where)
    launcher = value(raw, node, "launcher", where)
    signature = value(raw, node, "signature", where)

    tolerance = dict(defaults)
    if "tolerance" in raw:
        tolerance.update(mapping(raw["tolerance"], f"{where}.tolerance", node.key("tolerance")))
    tolerance["sqrt_k_factor"] = value(tolerance, node.key("tolerance"), "sqrt_k_factor", f"{where}.tolerance")

    points_node = node.key("points")
    raw_points = mapping(raw["points"], f"{where}.points", points_node)
    points = {key: value(raw_points, points_node, key, f"{where}.points") for key in ("correctness", "speed")}
    extra_credit = value(raw_points, points_node, "extra_credit", f"{where}.points")
    versus_cublas = None
    if "versus_cublas" in raw:
        if signature == "square":
            fail(f"{where}.versus_cublas", "needs a rectangular launcher (cuBLAS is timed at j x k x l)")
        rule_node = node.key("versus_cublas")
        rule = mapping(raw["versus_cublas"], f"{where}.versus_cublas", rule_node)
        floor = rule["zero_at_reference_of"]
        if not isinstance(floor, list) or not floor or not all(isinstance(f, str) for f in floor):
            fail(f"{where}.versus_cublas.zero_at_reference_of", "must be a non-empty list of part ids")
        versus_cublas = CublasRule(value(rule, rule_node, "full_at", f"{where}.versus_cublas"), tuple(floor))
    starter = value(raw, node, "starter", where)
    cases = _parse_cases(raw["cases"], f"{where}.cases", signature)

    launch_node = node.key("launch")
    launch = mapping(raw["launch"], f"{where}.launch", launch_node)
    policies = launch_node.key("shared_memory").allowed
    if launch["shared_memory"] not in policies:
        fail(f"{where}.launch.shared_memory", f"must be one of {', '.join(policies)}")
    if launch["shared_memory"] == "dynamic_only" and signature != "rectangular_props":
        fail(f"{where}.launch.shared_memory", "dynamic_only needs a launcher that is given cudaDeviceProp")
    return Part(
        id=part_id,
        title=value(raw, node, "title", where),
        file=file,
        launcher=launcher,
        signature=signature,
        teaches=value(raw, node, "teaches", where),
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
                fail(where, f"{part_id!r} is not another part (parts: {', '.join(by_id)})")
        for case in p.cases["timing"]:
            size = (case.j, case.k, case.l)
            if not any(size in [(c.j, c.k, c.l) for c in by_id[f].cases["timing"]]
                       for f in p.versus_cublas.zero_at_reference_of):
                fail(where, f"none of these parts is timed at {case.j}x{case.k}x{case.l}, the size of "
                            f"{p.id}'s timing case {case.name}")


def _parse_question(raw: Any, where: str) -> Question:
    node = schema.QUESTION
    raw = mapping(raw, where, node)
    qid = value(raw, node, "id", where)
    kind = value(raw, node, "kind", where)
    text = value(raw, node, "text", where)
    if kind == "text":
        if "points" in raw or "tolerance" in raw or "options" in raw:
            fail(where, "a text question has manual_points only (a TA grades it)")
        manual = value(raw, node, "manual_points", where)
        return Question(qid, kind, text, 0.0, manual_points=manual)
    if "manual_points" in raw:
        fail(f"{where}.manual_points", "only text questions are graded by hand")
    points = value(raw, node, "points", where)
    if kind == "number":
        if "options" in raw:
            fail(f"{where}.options", "a number question has no options")
        tolerance = value(raw, node, "tolerance", where)
        return Question(qid, kind, text, points, tolerance=tolerance)
    if "tolerance" in raw:
        fail(f"{where}.tolerance", "a choice question has no tolerance")
    options = raw.get("options")
    if not isinstance(options, dict) or len(options) < 2:
        fail(f"{where}.options", "a choice question needs at least two options (id: text)")
    for key, text_of in options.items():
        if not isinstance(key, str) or not schema.QUESTION_ID_RE.match(key):
            fail(f"{where}.options", f"option id {key!r} must be a short lower-case string (quote yes/no)")
        string(text_of, f"{where}.options.{key}")
    return Question(qid, kind, text, points, options=dict(options))


def _parse_questions(raw: Any, code: Any) -> tuple:
    if raw is None:
        return (), {}
    if not isinstance(raw, list):
        fail("questions", "must be a list")
    questions = tuple(_parse_question(q, f"questions[{i}]") for i, q in enumerate(raw))
    ids = [q.id for q in questions]
    for qid in ids:
        if ids.count(qid) > 1:
            fail("questions", f"two questions share the id {qid!r}")
    code = code if code is not None else {}
    if not isinstance(code, dict):  # its keys are any names the questions refer to
        fail("question_code", f"must be a mapping, got {type(code).__name__}")
    for name, text in code.items():
        string(text, f"question_code.{name}")
    return questions, dict(code)


def _parse_grading(raw: Any) -> dict:
    node = schema.GRADING
    raw = mapping(raw, "grading", node)
    limits_node, visibility_node = node.key("time_limits"), node.key("visibility")
    limits = mapping(raw["time_limits"], "grading.time_limits", limits_node)
    visibility = mapping(raw["visibility"], "grading.visibility", visibility_node)
    leaderboard_node = node.key("leaderboard")
    leaderboard = mapping(raw.get("leaderboard", {}), "grading.leaderboard", leaderboard_node)
    return {
        "time_limits": {k: value(limits, limits_node, k, "grading.time_limits") for k in limits_node.required_names},
        # Absent keys take their defaults: answers seen at once could be
        # found by resubmitting, so questions show after the due date.
        "visibility": {k.name: value(visibility, visibility_node, k.name, "grading.visibility")
                       for k in visibility_node.keys},
        "leaderboard_names": value(leaderboard, leaderboard_node, "names", "grading.leaderboard"),
    }


def _parse_speed_rule(raw: Any) -> SpeedRule:
    if isinstance(raw, dict) and ("ceiling" in raw or "zero_below" in raw):
        fail("grading.speed", "targets are no longer fractions of the roofline: give full_at and zero_at, "
                              "fractions of the reference solution's GFLOP/s on the grading GPU")
    node = schema.GRADING.key("speed")
    speed = mapping(raw, "grading.speed", node)
    full_at = value(speed, node, "full_at", "grading.speed")
    zero_at = value(speed, node, "zero_at", "grading.speed")
    if zero_at >= full_at:
        fail("grading.speed.zero_at", f"must be below full_at ({full_at:g}), got {zero_at:g}")
    runs = speed["calibration_runs"]
    lo, hi = node.key("calibration_runs").bounds
    if isinstance(runs, bool) or not isinstance(runs, int) or not lo <= runs <= hi:
        fail("grading.speed.calibration_runs", f"must be a whole number from {lo} to {hi}, got {runs!r}")
    return SpeedRule(full_at=full_at, zero_at=zero_at, runs=runs)


def parse_assignment(doc: Any, path: Path) -> Assignment:
    node = schema.ASSIGNMENT
    doc = mapping(doc, "assignment.yaml", node)
    defaults_node = node.key("defaults")
    defaults = mapping(doc["defaults"], "defaults", defaults_node)
    default_tolerance = mapping(defaults.get("tolerance", {}), "defaults.tolerance", defaults_node.key("tolerance"))
    grading = _parse_grading(doc["grading"])
    timing = mapping(doc["timing"], "timing", schema.TIMING)
    timing = {k.name: value(timing, schema.TIMING, k.name, "timing") for k in schema.TIMING.keys}
    if not isinstance(doc["parts"], list) or not doc["parts"]:
        fail("parts", "must be a non-empty list")
    parts = tuple(_parse_part(p, f"parts[{i}]", default_tolerance) for i, p in enumerate(doc["parts"]))
    for attr in ("id", "file", "launcher"):
        values = [getattr(p, attr) for p in parts]
        for v in values:
            if values.count(v) > 1:
                fail("parts", f"two parts share the {attr} {v!r}")
    _check_cublas_floors(parts)
    questions, question_code = _parse_questions(doc.get("questions"), doc.get("question_code"))
    return Assignment(
        path=path,
        name=value(doc, node, "name", ""),
        title=value(doc, node, "title", ""),
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
        # first, and libyaml parses it many times faster than pure Python.
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise AssignmentError(f"{path}: not valid YAML: {e}") from e
    try:
        return parse_assignment(doc, path)
    except AssignmentError as e:
        raise AssignmentError(f"{path}: {e}") from None
