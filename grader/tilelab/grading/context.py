"""One grading's working state: the parts as they are graded, the phase clock, the work folder and the sandbox."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..spec.assignment import Assignment, Part
from ..system.paths import ANSWER_KEY_PLACES, ASSIGNMENT_FILE, COMPILED_REFERENCES_DIR
from ..system.sandbox import Sandbox, sandbox_for_this_process
from . import calibration
from .model import STAGES, CaseResult, PartResult, Stage
from .options import GradeOptions


@dataclass
class _Part:
    """Working state of one part while it is graded."""

    part: Part
    result: PartResult
    source: Path
    kernels: set = field(default_factory=set)
    binary: Optional[Path] = None
    harness_result: dict = field(default_factory=dict)  # the launch records of the correctness runs
    work_elsewhere: bool = False  # the launch checks found work done outside the part's kernels
    hidden_names: dict = field(default_factory=dict)  # name in the case file -> real case name

    @property
    def case_file_names(self) -> dict:
        """Real case name -> its name in the case file (hidden cases have opaque ones)."""
        return {real: opaque for opaque, real in self.hidden_names.items()}

    @property
    def cases_all_passed(self) -> bool:
        return all(c.passed for c in self.result.cases)

    def stage(self, name: str) -> Stage:
        return self.result.stages[name]

    def set(self, name: str, status: str, summary: str, details: str = "", seconds: float = 0.0,
            hints: Optional[list] = None) -> None:
        self.result.stages[name] = Stage(name, status, summary, details, round(seconds, 3), list(hints or []))

    def skip_from(self, first: str, summary: str) -> None:
        """Marks `first` and every later stage not run, with the reason."""
        for name in STAGES[STAGES.index(first):]:
            if self.stage(name).status == "not_run" and not self.stage(name).summary:
                self.set(name, "not_run", summary)


class _PhaseClock:
    """When each phase of a grading ran. Phases may run beside each other, and
    one phase may run in several threads at once (the correctness runs of all
    parts): a phase's time is from its first start to its last end."""

    def __init__(self, zero: float):
        self._zero = zero
        self._lock = threading.Lock()
        self._spans: dict = {}

    @contextmanager
    def timed(self, phase: str):
        start = time.monotonic() - self._zero
        try:
            yield
        finally:
            end = time.monotonic() - self._zero
            with self._lock:
                first, last = self._spans.get(phase, (start, end))
                self._spans[phase] = (min(first, start), max(last, end))

    def timings(self) -> dict:
        return {phase: round(end - start, 3) for phase, (start, end) in self._spans.items()}

    def spans(self) -> dict:
        return {phase: [round(start, 3), round(end, 3)] for phase, (start, end) in self._spans.items()}


def _secrets(opt: GradeOptions, assignment: Assignment) -> list:
    """Files student code must not read: the key, the full assignment, the
    solutions, and the reference solutions compiled (the autograder bundle's
    objects, and the built references of any tree)."""
    paths = [opt.root / ASSIGNMENT_FILE, opt.root / "solutions", opt.root / COMPILED_REFERENCES_DIR,
             opt.build_dir / calibration.REFERENCE_DIR]
    paths += [opt.answer_key] if opt.answer_key else [opt.root / place for place in ANSWER_KEY_PLACES]
    return paths


def _sandbox_for(opt: GradeOptions, assignment: Assignment) -> Sandbox:
    """Where student code runs. A student's own checkout (`check` with no
    key, no solutions, no references and no hidden cases) holds nothing to
    protect: the code runs as whoever runs `check`, root too (Colab, a
    container), with no sandbox user. Everywhere else sandbox_for_this_process
    decides (another user when root)."""
    hidden = any(p.cases["hidden"] for p in assignment.parts)
    secret = [p for p in _secrets(opt, assignment) if p.exists() and (p.name != ASSIGNMENT_FILE or hidden)]
    if opt.mode == "check" and not secret:
        return Sandbox()
    return sandbox_for_this_process()


def _private_name(name: str) -> str:
    """A directory name below the work dir that code of other gradings,
    running as the same sandbox user, cannot guess (it can pass through the
    work dir, mode 0711, but not list it)."""
    return f"{name}-{secrets.token_hex(8)}"


def _work_dir(opt: GradeOptions, sandbox: Sandbox) -> Path:
    """Where builds and runs happen. For a sandboxed user it is a fresh
    directory outside the results (which stay the grader's alone, mode 0700),
    that the sandbox user may only pass through (0711)."""
    if sandbox.switches_user:
        opt.out_dir.mkdir(parents=True, exist_ok=True)
        opt.out_dir.chmod(0o700)
        work = Path(tempfile.mkdtemp(prefix="tilelab-work-"))
        work.chmod(0o711)
        return work
    work = opt.out_dir / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return work


def _new_state(part: Part, submission: Path, sets: tuple) -> _Part:
    result = PartResult(
        id=part.id,
        title=part.title,
        file=part.file,
        stages={name: Stage(name, "not_run") for name in STAGES},
        correctness_max=part.points["correctness"],
        speed_max=part.points["speed"],
        extra_credit=part.extra_credit,
        hidden_total=len(part.cases["hidden"]) if "hidden" in sets else 0,
    )
    # Every graded case is listed from the start, as not run; the
    # correctness stage replaces them with what really happened.
    result.cases = [CaseResult(name=c.name, set=set_name, j=c.j, k=c.k, l=c.l, passed=False, ran=False,
                               status="not_run", reasons=["not run"])
                    for set_name in sets for c in part.cases[set_name]]
    state = _Part(part, result, submission / part.file)
    state.hidden_names = {f"h{i + 1:02d}": c.name for i, c in enumerate(part.cases["hidden"])} if "hidden" in sets else {}
    return state
