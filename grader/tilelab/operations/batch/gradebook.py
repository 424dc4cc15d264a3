"""Gradebook rows, the run's summary, OUT/gradebook.csv, the class leaderboards and the class report.

- OUT/gradebook.csv is rewritten whole after every submission, so an
  interruption loses nothing. After the columns courses' spreadsheets
  already read (their order is kept), a column per part gives its state
  (outputs/causes.py PART_STATES): a score alone hides a part that did not
  compile.
- For a part scored against cuBLAS, OUT/leaderboard.csv and .html rank the
  class once every submission is graded; keep OUT/.leaderboard-key, the
  secret the aliases are drawn with, and later runs give the same aliases.
- OUT/similarity.html and .csv, then OUT/class-report.html and the CSVs of
  its figures, are drawn once the class is graded (class_pages.py).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ...grading.model import ESTIMATED_RULE, PartResult, Stage
from ...outputs.causes import part_state
from ...outputs.gradescope import is_error_results
from ...outputs.leaderboard import class_board, leaderboard_key, leaderboard_parts, result_from_dict, write_board
from ...spec.assignment import Assignment
from ...system.atomic import read_json, write_atomically
from .class_pages import class_pages
from .students import GRADEBOOK_FILE, _assignment, _check_dirs, _marker, find_students


GRADED = "graded"
GRADER_ERROR = "grader error"
NOT_YET = "skipped: not graded yet"


@dataclass
class Row:
    """One line of the gradebook."""

    student: str
    status: str
    total: Optional[float] = None
    max: Optional[float] = None
    parts: dict = field(default_factory=dict)  # part id -> score
    questions: Optional[float] = None
    seed: Optional[int] = None
    seconds: Optional[float] = None
    gpu: str = ""  # the GPU that graded it
    targets: str = ""  # the full-credit speed targets there, GFLOP/s per part ("naive 4235; tiled 7353")
    answers_problem: str = ""  # why answers.yaml was not read (missing, not valid YAML...), in a few words
    states: dict = field(default_factory=dict)  # part id -> its state (causes.PART_STATES), for the parts graded
    detail: str = ""  # for the summary (a grader error's message); not in the CSV
    resumed: bool = False  # graded by an earlier run
    again: str = ""  # why an earlier run's grading was graded again (regrade_reason); not in the CSV


@dataclass
class BatchSummary:
    rows: list  # of Row, in directory order
    wall_seconds: float
    gradebook: Path
    workers: int = 0  # gradings at a time: GPUs x in_flight, or CPU workers without a GPU
    in_flight: int = 1  # gradings at a time on each GPU
    leaderboards: list = field(default_factory=list)  # the class leaderboards' files written, if any
    class_report: Optional[Path] = None  # OUT/class-report.html, when there was a grading to draw it from
    class_report_note: str = ""  # why there is none
    scored_seconds: Optional[float] = None  # when every hand-in was graded, before counters left for later were read

    @property
    def graded(self) -> int:
        """Graded in this run."""
        return sum(r.status == GRADED and not r.resumed for r in self.rows)

    @property
    def resumed(self) -> int:
        """Graded by an earlier run, not graded again."""
        return sum(r.resumed for r in self.rows)

    @property
    def again(self) -> Counter:
        """Graded again in this run, by reason."""
        return Counter(r.again for r in self.rows if r.again and r.status == GRADED)

    @property
    def errors(self) -> int:
        # Only a successful grading is ever resumed, so these are all from this run.
        return sum(r.status == GRADER_ERROR for r in self.rows)

    @property
    def skipped(self) -> int:
        """Refused (unsafe names) or not graded."""
        return sum(r.status.startswith("skipped") for r in self.rows)

    @property
    def ok(self) -> bool:
        return not self.errors

    def class_report_line(self) -> str:
        if self.class_report is None:
            return f"no class report: {self.class_report_note}"
        line = f"class report: {self.class_report} (for staff: it names students and shows the answer key)"
        return line + (f"\n{self.class_report_note}" if self.class_report_note else "")

    def line(self) -> str:
        ran = [r for r in self.rows if r.status in (GRADED, GRADER_ERROR) and r.seconds is not None
               and not r.resumed]
        text = f"{self.graded} graded"
        if self.again:
            text += f" ({_again_text(self.again, 'graded')})"
        if self.resumed:
            text += f", {self.resumed} already graded"
        if self.errors:
            text += f", {self.errors} grader error{'s' if self.errors != 1 else ''}"
        if self.skipped:
            text += f", {self.skipped} skipped"
        text += f" in {_duration(self.wall_seconds)} wall time"
        if ran:
            mean = sum(r.seconds for r in ran) / len(ran)
            text += (f"; {mean:.1f} s per submission on average, "
                     f"{self.wall_seconds / len(ran):.1f} s of wall time each on {self.workers} "
                     f"worker{'s' if self.workers != 1 else ''}")
        return text


def collect_row(student: str, out: Path, part_ids: list) -> Row:
    """The gradebook row of what OUT/<student>/ holds, whoever wrote it (this
    batch, an earlier one, `tilelab grade` in a Slurm task)."""
    if not (out / "results.json").is_file():
        return Row(student, "skipped: not graded (no results.json)")
    results = read_json(out / "results.json")
    if not isinstance(results, dict):
        return Row(student, "skipped: results.json is unreadable")
    if is_error_results(results):
        return Row(student, GRADER_ERROR)
    detailed = read_json(out / "grade.json")
    if not isinstance(detailed, dict):
        return Row(student, "skipped: grade.json is missing or unreadable (an interrupted grading?)")
    marker = _marker(out) or {}
    try:
        answers = detailed.get("answers")
        # Set where the file as a whole was not read: all question points lost to one typo or a missing file.
        problem = answers.get("status") not in (None, "read") if isinstance(answers, dict) else False
        return Row(
            student, GRADED,
            total=float(detailed["score"]), max=float(detailed["max_score"]),
            parts={p["id"]: float(p["score"]) for p in detailed["parts"] if p["id"] in part_ids},
            states={p["id"]: _state(p) for p in detailed["parts"] if p["id"] in part_ids},
            questions=float(answers["score"]) if isinstance(answers, dict) else None,
            seed=int(detailed["seed"]),
            seconds=float(marker.get("seconds", detailed.get("seconds", 0.0))),
            gpu=str((detailed.get("gpu") or {}).get("name", "")),
            targets=_targets_cell(detailed.get("calibration")),
            answers_problem=str(answers.get("summary") or answers["status"]) if problem else "",
        )
    except (KeyError, TypeError, ValueError):
        return Row(student, "skipped: grade.json is unreadable")


def _state(doc: dict) -> str:
    """A part's state from its record in grade.json; "" where the record
    lacks what part_state reads (a score alone still makes a row)."""
    try:
        stages = {name: Stage(name, st["status"], st.get("summary", "")) for name, st in doc["stages"].items()}
        return part_state(PartResult(id=doc["id"], title=doc.get("title", ""), file=doc["file"], stages=stages,
                                     not_written=list(doc.get("not_written") or [])))
    except (AttributeError, KeyError, TypeError):
        return ""


def _targets_cell(calibration) -> str:
    """The full-credit targets a grading used, as one cell; estimates are
    marked, and a part timed at several sizes names each size."""
    if not isinstance(calibration, dict) or not isinstance(calibration.get("full_credit_from"), dict):
        return ""
    mark = "~" if calibration.get("rule") == ESTIMATED_RULE else ""
    targets = calibration["full_credit_from"]
    sizes = Counter(name.split(" ")[0] for name in targets)
    return "; ".join(f"{name if sizes[name.split(' ')[0]] > 1 else name.split(' ')[0]} {mark}{float(value):.0f}"
                     for name, value in targets.items())


def _cell(x: Optional[float]) -> str:
    return "" if x is None else f"{round(x, 4):g}"


def _student_cell(name: str) -> str:
    # Refused names are written too, so a TA sees them; a leading = + - @
    # would make a spreadsheet read the cell as a formula.
    return "'" + name if name[:1] in ("=", "+", "-", "@") else name


def write_gradebook(path: Path, rows: list, part_ids: list) -> None:
    """Header first, one row per student; replaced whole, never half-written."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["student", "total", "max", *part_ids, "questions", "seed", "status", "seconds", "gpu",
                     "full-credit targets (GFLOP/s)", "answers problem", *(f"{p} state" for p in part_ids)])
    for r in rows:
        writer.writerow([_student_cell(r.student), _cell(r.total), _cell(r.max),
                         *(_cell(r.parts.get(p)) for p in part_ids), _cell(r.questions),
                         "" if r.seed is None else r.seed, r.status,
                         "" if r.seconds is None else f"{r.seconds:.1f}", r.gpu, r.targets, r.answers_problem,
                         *(r.states.get(p, "") for p in part_ids)])
    write_atomically(path, text.getvalue())


def _alias_key(assignment: Assignment, out_dir: Path) -> Optional[bytes]:
    """The aliases' secret, when a class leaderboard shows aliases."""
    if leaderboard_parts(assignment) and assignment.grading.get("leaderboard_names") == "alias":
        return leaderboard_key(out_dir)
    return None


def write_leaderboards(out_dir: Path, rows: list, assignment: Assignment) -> list:
    """The class leaderboard of each part scored against cuBLAS, from what
    OUT/<student>/grade.json holds: leaderboard.csv and leaderboard.html
    (a second such part's as leaderboard-<part>.*). Returns the files written."""
    parts = leaderboard_parts(assignment)
    if not parts:
        return []
    hand_ins = []
    for r in rows:
        result, why = None, r.status
        if r.status == GRADED:
            doc = read_json(out_dir / r.student / "grade.json")
            try:
                result = result_from_dict(doc)
            except (AttributeError, KeyError, TypeError, ValueError):
                why = "its grade.json is unreadable"
        hand_ins.append((r.student, result, why))
    key = _alias_key(assignment, out_dir)
    written = []
    for i, part in enumerate(parts):
        written += write_board(class_board(assignment, part, hand_ins, key), out_dir, f"-{part.id}" if i else "")
    return written


def gradebook_only(class_dir: Path, out_dir: Path, *, root: Path) -> BatchSummary:
    """Collects the results already in OUT into OUT/gradebook.csv (and the
    class leaderboard, when there is one); grades nothing."""
    clock = time.monotonic()
    class_dir, out_dir = _check_dirs(class_dir, out_dir)
    assignment = _assignment(root)
    part_ids = [p.id for p in assignment.parts]
    rows = [Row(s.name, s.problem) if s.problem else collect_row(s.name, out_dir / s.name, part_ids)
            for s in find_students(class_dir)]
    rows = [dataclasses.replace(r, resumed=r.status == GRADED) for r in rows]  # all graded by earlier runs
    out_dir.mkdir(parents=True, exist_ok=True)
    write_gradebook(out_dir / GRADEBOOK_FILE, rows, part_ids)
    leaderboards = write_leaderboards(out_dir, rows, assignment)
    report, note = class_pages(out_dir, assignment, class_dir, root)
    return BatchSummary(rows, wall_seconds=time.monotonic() - clock, gradebook=out_dir / GRADEBOOK_FILE,
                        leaderboards=leaderboards, class_report=report, class_report_note=note)


def _again_text(reasons: Counter, verb: str) -> str:
    """'3 graded again: graded before without a GPU', a clause per reason."""
    return "; ".join(f"{n} {verb} again: {why}" for why, n in reasons.items())


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"
