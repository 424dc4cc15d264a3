"""A class of graded hand-ins for the class report's tests: each part of
the real assignment.yaml, with its real cases and points, as the grader
leaves it after a known mistake (scored as grading/stages/finish.py scores
it), the answers graded against the real key, written as `tilelab batch`
writes a grading. The H100 figures are those of grade_fixtures.py."""

import json
from pathlib import Path

import yaml
from grade_fixtures import CEILINGS, H100, LADDER_H100, challenge_part

from tilelab.grading.answer_key import load_key
from tilelab.grading.answers import grade_answers
from tilelab.grading.model import NO_GPU, STAGES, WORK_ELSEWHERE, CaseResult, GradeResult, PartResult, Speed, Stage
from tilelab.grading.static_checks import missing_summary
from tilelab.outputs.gradescope import error_results, results_json
from tilelab.spec.assignment import load_assignment

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = load_assignment(ROOT / "assignment.yaml")
KEY = load_key(ROOT / "solutions" / "answers.yaml", ASSIGNMENT.questions)
# The references' GFLOP/s at the timing size on the H100 (tests/submissions/README.md: full points from 0.8 x).
REFERENCE = {"naive": 5271.3, "tiled": 9256.0, "boundary": 9000.0, "rectangular": 9076.0, "dynamic_smem": 5250.0}

# What each regular hand-in did in each part: a cycle per part, of different lengths, so that the class mixes them.
PLANS = {
    "naive": ["pass", "pass", "slow", "boundary", "pass", "host", "missing"],
    "tiled": ["pass", "race", "slow", "pass", "build"],
    "boundary": ["pass", "boundary", "boundary", "crash", "pass", "slow", "missing", "pass"],
    "rectangular": ["pass", "stride", "pass", "boundary", "slow", "build"],
    "dynamic_smem": ["pass", "missing", "slow"],
    "challenge": ["missing", "missing", "pass", "missing"],
}
# A mistake and the cause the report must give it.
CAUSE_OF = {"slow": "too_slow", "boundary": "boundary", "host": "host_work", "missing": "missing", "race": "race",
            "build": "build", "crash": "crash", "stride": "stride"}
# Answers: each regular hand-in gives the value at its index (None: leaves it out); every fifth hands in no file.
ANSWERS = {
    "tile32-reduction": [32, 16, 32, "thirty-two", 32, 16, None],
    "smem-vs-regs": ["b", "a", "b", "b", "c", None],
    "local-versions": [512000, 512000, 1000, 512000],
    "ridge": [12.5, 12.54, 13, None, 12.5],
}
REGULAR = 30


def _stages(**status) -> dict:
    return {name: Stage(name, status.get(name, "passed"), f"{name} {status.get(name, 'passed')}") for name in STAGES}


def _speed(part_id: str, share: float) -> Speed:
    spec = ASSIGNMENT.part(part_id)
    case = spec.cases["timing"][0]
    reference = REFERENCE[part_id]
    fraction = max(0.0, min(1.0, (share - 0.5) / (0.8 - 0.5)))
    return Speed(case=f"{case.j}x{case.k}x{case.l}", gflops=share * reference, time_ms=20.0, event_ms=20.0,
                 cupti_ms=20.0, wall_ms=20.0, ceiling_value=CEILINGS["fp32_gflops"],
                 bound_gflops=CEILINGS["fp32_gflops"], intensity=682.67, reference_gflops=reference, rule="reference",
                 full_at=0.8, target_gflops=0.8 * reference, zero_gflops=0.5 * reference, fraction=round(fraction, 4))


def make_part(part_id: str, mistake: str, gpu: bool = True) -> PartResult:
    """One part as the grader leaves it after `mistake`, scored as stages/finish.py scores it."""
    spec = ASSIGNMENT.part(part_id)
    if part_id == "challenge" and mistake == "pass" and gpu:
        return challenge_part(LADDER_H100["warp tiling"])
    cases = [CaseResult(c.name, s, c.j, c.k, c.l, True) for s in ("public", "hidden") for c in spec.cases[s]]
    part = PartResult(id=part_id, title=spec.title, file=spec.file, stages=_stages(), cases=cases,
                      correctness_max=spec.points["correctness"], speed_max=spec.points["speed"],
                      extra_credit=spec.extra_credit, hidden_total=len(spec.cases["hidden"]))
    st = part.stages
    if mistake in ("missing", "build"):
        first = "static" if mistake == "missing" else "build"
        st[first] = Stage(first, "failed", missing_summary(spec.file) if mistake == "missing" else "does not compile")
        for name in STAGES[STAGES.index(first) + 1:]:
            st[name] = Stage(name, "not_run", f"not run: the {first} stage failed")
        for c in cases:
            c.passed, c.ran, c.status = False, False, "not_run"
        return part
    if not gpu:
        for name in STAGES[2:]:
            st[name] = Stage(name, "not_run", NO_GPU)
        for c in cases:
            c.passed, c.ran, c.status = False, False, "not_run"
        return part
    for c in cases:
        off = any(d % 16 for d in (c.j, c.k, c.l))
        if mistake == "boundary" and off:
            c.passed, c.unwritten = False, c.j
        elif mistake == "stride" and len({c.j, c.k, c.l}) == 3:
            c.passed, c.wrong = False, c.j * c.l
        elif mistake == "crash" and c.j in (1, 17):
            c.passed, c.ran, c.status = False, False, "crash"
    if any(not c.passed for c in cases):
        st["correctness"].status = "failed"
        st["speed"] = Stage("speed", "not_run", "not run: speed is measured only when every case is correct")
    elif mistake == "host":
        st["launch"].status = "failed"
        st["speed"] = Stage("speed", "not_run", WORK_ELSEWHERE)
    else:
        st["racecheck"].status = "failed" if mistake == "race" else "passed"
        part.speed = _speed(part_id, 0.65 if mistake == "slow" else 1.05)
    part.withheld_by = [n for n in ("launch", "memcheck", "racecheck", "speed") if st[n].status == "failed"]
    per_case = part.correctness_max / len(cases)
    part.correctness_score = 0.0 if part.withheld_by else round(per_case * sum(c.passed for c in cases), 4)
    if part.speed is not None and not part.withheld_by:
        part.speed_score = round(part.speed_max * part.speed.fraction, 4)
    return part


def answers_of(i: int):
    """The i-th regular hand-in's answers.yaml (None: not handed in)."""
    if i % 5 == 4:
        return None
    chosen = {q: values[i % len(values)] for q, values in ANSWERS.items() if values[i % len(values)] is not None}
    return chosen


def make_result(parts: list, answers, tmp: Path, name: str, gpu: bool = True) -> GradeResult:
    path = tmp / name / "answers.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    if answers is not None:
        path.write_text(yaml.safe_dump(answers))
    result = GradeResult(assignment=ASSIGNMENT.name, mode="grade", submission=f"/hand-ins/{name}", seed=7,
                         gpu=H100 if gpu else None, ceilings=CEILINGS if gpu else None, parts=parts,
                         started="2026-11-21T20:00:00+00:00", title=ASSIGNMENT.title,
                         answers=grade_answers(path, ASSIGNMENT.questions, KEY))
    return result


def write_graded(out: Path, name: str, result: GradeResult) -> None:
    """What `tilelab batch` leaves of one grading: grade.json, results.json and the marker."""
    folder = out / name
    folder.mkdir(parents=True)
    (folder / "grade.json").write_text(json.dumps(result.to_dict()))
    (folder / "results.json").write_text(json.dumps(results_json(result, ASSIGNMENT)))
    (folder / ".done").write_text(json.dumps({"seed": result.seed}))


def make_class(out: Path, tmp: Path) -> dict:
    """The class: REGULAR hand-ins following PLANS and ANSWERS, one graded
    without a GPU, and six the report must leave out; batch's own files
    beside them. Returns what was made: name -> (plan, answers, result)."""
    made = {}
    for i in range(REGULAR):
        name = f"s{i:02d}"
        plan = {part: mistakes[i % len(mistakes)] for part, mistakes in PLANS.items()}
        result = make_result([make_part(p, plan[p]) for p in PLANS], answers_of(i), tmp, name)
        write_graded(out, name, result)
        made[name] = (plan, answers_of(i), result)
    plan = dict.fromkeys(PLANS, "built")
    result = make_result([make_part(p, "pass", gpu=False) for p in PLANS], {"smem-vs-regs": "b"}, tmp, "nogpu", False)
    write_graded(out, "nogpu", result)
    made["nogpu"] = (plan, {"smem-vs-regs": "b"}, result)

    check = make_result([make_part(p, "pass") for p in PLANS], None, tmp, "checked")
    check.mode = "check"
    write_graded(out, "checked", check)
    older = make_result([make_part(p, "pass") for p in PLANS], None, tmp, "older")
    older.parts[1].correctness_max = 20.0  # tiled was worth 20 + 10 then
    write_graded(out, "older", older)
    other = make_result([make_part(p, "pass") for p in PLANS], None, tmp, "other")
    other.assignment = "another_lab"
    write_graded(out, "other", other)
    write_graded(out, "partial", make_result([make_part("naive", "pass")], None, tmp, "partial"))
    (out / "crashed").mkdir()
    (out / "crashed" / "results.json").write_text(json.dumps(error_results("Traceback: ...")))
    (out / "torn").mkdir()
    (out / "torn" / "grade.json").write_text('{"parts": [')
    (out / "gradebook.csv").write_text("student,total\n")
    (out / "slurm-logs").mkdir()
    (out / ".leaderboard-key").write_text("00")
    return made


LEFT_OUT = {"checked": "only checked", "older": "another version of assignment.yaml (tiled worth 20 + 10",
            "other": "another assignment (another_lab)", "crashed": "grader error", "torn": "grade.json is unreadable",
            "partial": "graded for some parts only (naive"}
