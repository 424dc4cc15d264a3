"""One grading's context: what the run discovers (its tools, sandbox, work
folder, seed, trusted harness, clock, notes and GPU lock) and the working
state of each part, handed to every stage."""

from __future__ import annotations

import datetime as dt
import functools
import secrets
import shutil
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from ..spec.assignment import Assignment, Part, load_assignment
from ..system import owned_dirs
from ..system.gpu_lock import GpuLock, visible_gpu_lock
from ..system.paths import ANSWER_KEY_PLACES, ASSIGNMENT_FILE, COMPILED_REFERENCES_DIR, tool_path, unbuilt_reason
from ..system.sandbox import Sandbox, preflight, sandbox_for_this_process
from ..system.sandbox_users import HeldSandbox, hold_one_or_base
from ..system.setup_errors import SetupError
from . import calibration
from .answers_file import ANSWERS_FILE
from .handin_files import Located, locate
from .model import STAGES, CaseResult, PartResult, Stage
from .options import GradeOptions
from .trusted_harness import SERVICES, KeptServices, TrustedHarness

if TYPE_CHECKING:
    from .stages.early_runs import EarlyRuns


def times_early(opt: GradeOptions, parts: list) -> bool:
    """Whether the parts' timing runs begin beside their cases (speed.timing_begun):
    in a check of at most half as many parts as a grading's trusted-harness
    services, the student's loop, where each waiting timing run holds a
    service of its own. A grading keeps the GPU's turn free for the
    gradings beside it until its cases are over."""
    return opt.mode == "check" and opt.timing and 0 < 2 * len(parts) <= SERVICES


@dataclass(frozen=True)
class Tools:
    """The built tree's programs a grading runs."""

    verify: Path  # compares a run's outputs with the float64 reference
    probe: Path  # tilelab-roofline: the GPU's properties and its measured ceilings
    harness: Path  # the trusted harness: the clock that is scored
    contain: Path  # tilelab-contain: what a run starts ends with it
    part_host: Path  # tilelab-part-host: a part built as a shared object, loaded (absent from older trees)

    @classmethod
    def of(cls, build_dir: Path) -> "Tools":
        return cls(tool_path(build_dir, "tilelab-verify"), tool_path(build_dir, "tilelab-roofline"),
                   tool_path(build_dir, "tilelab-harness"), tool_path(build_dir, "tilelab-contain"),
                   tool_path(build_dir, "tilelab-part-host"))


@dataclass
class Grading:
    """One grading under way: made by `open_grading`, passed to every stage, closed at the end."""

    options: GradeOptions
    assignment: Assignment
    submission: Path  # the folder graded: the one handed in, or the one folder in it that holds its files
    parts: list  # the assignment's Parts this grading grades
    seed: int
    tools: Tools
    sandbox: Sandbox
    work: Path  # where builds and runs happen (work_dir)
    logs: Path  # staff/logs of the results
    trusted: TrustedHarness
    gpu_lock: GpuLock  # shared with gradings running beside this one
    clock: "PhaseClock"
    started: str  # when, in UTC, for the results
    progress: Callable[[str], None] = lambda message: None
    while_timing: Callable[[], None] = lambda: None  # work for the grader's CPU while the GPU times parts
    notes: list = field(default_factory=list)  # for the student
    staff_notes: list = field(default_factory=list)
    located: Optional[Located] = None  # where the hand-in's files were found (handin_files.locate)
    held_user: Optional[HeldSandbox] = None  # the sandbox user this grading holds host-wide (_held_sandbox)
    owns_trusted: bool = True  # False: `trusted` is kept for the next check (KeptServices), not closed here
    early: Optional["EarlyRuns"] = None  # a check's runs begun while their parts compile (stages/early_runs.py)

    def misplaced_hints(self, name: str) -> list:
        """Where a file expected as `name` was found instead, when it was missing."""
        return self.located.hints(name) if self.located else []

    @property
    def sets(self) -> tuple:
        return self.options.case_sets

    @property
    def limits(self) -> dict:
        """assignment.yaml's time limits, by stage."""
        return self.assignment.grading["time_limits"]

    def timed(self, phase: str):
        return self.clock.timed(phase)

    @contextmanager
    def held(self, lock, waiting: str):
        """Holds `lock` (a GpuLock's shared() or exclusive()), the time it
        took to get counted as the phase `waiting`: what gradings side by
        side make each other wait."""
        asked = time.monotonic()
        with lock:
            self.clock.waited(waiting, asked, time.monotonic())
            yield

    def close(self) -> None:
        if self.owns_trusted:
            self.trusted.close()
        if self.sandbox.switches_user:
            shutil.rmtree(self.work, ignore_errors=True)
        if self.held_user is not None:
            self.held_user.release()


def open_grading(submission: Path, opt: GradeOptions, *, sandbox: Optional[Sandbox] = None,
                 gpu_lock: Optional[GpuLock] = None, progress: Optional[Callable[[str], None]] = None,
                 while_timing: Optional[Callable[[], None]] = None, kept: Optional[KeptServices] = None) -> Grading:
    """Everything a grading needs before its first stage: the assignment, the
    folder of the hand-in to grade (handin_files.locate: every command grades
    through here, so a hand-in wrapped in a folder is graded alike by all),
    the seed, the tools, the sandbox (default: _sandbox_for), a work folder
    student code may use, and the trusted harness, whose CUDA contexts start
    in the background while the parts are checked and built. `kept`: the
    services (and GPU lock) of a watch, used where they fit and left running."""
    clock = PhaseClock(time.monotonic())
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    assignment = load_assignment(opt.root / ASSIGNMENT_FILE)
    parts = [] if opt.answers_only else [p for p in assignment.parts if not opt.parts or p.id in opt.parts]
    unbuilt = unbuilt_reason(opt.build_dir)
    if unbuilt:
        raise SetupError(f"{unbuilt}: build the project first (cmake --build {opt.build_dir})")
    tools = Tools.of(opt.build_dir)
    # Every part's file, not only those graded: the folder chosen must not depend on --part.
    located = locate(submission, tuple(p.file for p in assignment.parts) + (ANSWERS_FILE,))
    held, staff_notes = None, []
    if sandbox is None:
        sandbox, held, staff_notes = _held_sandbox(_sandbox_for(opt, assignment))
    try:
        # Every run of student code in this grading ends whole with its run (system/process.py).
        sandbox = sandbox.contained_by(tools.contain)
        check_sandbox(opt, sandbox)
        work = work_dir(opt, sandbox)
        logs = opt.out_dir / "staff" / "logs"
        logs.mkdir(parents=True, exist_ok=True)
    except BaseException:
        if held is not None:
            held.release()
        raise
    gpu_lock = gpu_lock or (kept.gpu_lock if kept is not None else visible_gpu_lock())
    # A timing run that waits at its gate holds a service: one begun beside the cases needs one more per part.
    services = min(SERVICES, max(1, len(parts)) * (2 if times_early(opt, parts) else 1))
    make = functools.partial(TrustedHarness, tools.harness, services=services, log=logs / "harness-service.log",
                             env=sandbox.extra_env, gpu_shared=gpu_lock.shared)
    trusted = kept.for_grading(tools.harness, sandbox.extra_env, services, make) if kept is not None else make()
    if parts:
        # A grading of several parts runs their cases, then times them, each on one launcher, through one
        # service (stages/cases_together.py, speed.py): one context made ahead, more only for a run of a part's own.
        ahead = 1 if opt.mode != "check" and len(parts) > 1 and tools.part_host.is_file() else services
        threading.Thread(target=trusted.start_all, args=(ahead,), name="tilelab-harness-services",
                         daemon=True).start()
    return Grading(options=opt, assignment=assignment, submission=located.folder, parts=parts,
                   seed=opt.draw_seed(), tools=tools, sandbox=sandbox, work=work, logs=logs, trusted=trusted,
                   gpu_lock=gpu_lock, clock=clock, started=started,
                   progress=progress or (lambda message: None), while_timing=while_timing or (lambda: None),
                   notes=list(located.notes), staff_notes=staff_notes, located=located, held_user=held,
                   owns_trusted=kept is None)


def _held_sandbox(base: Sandbox) -> tuple:
    """(sandbox, its HeldSandbox or None, staff notes) for a grading that
    was given no sandbox (`tilelab grade`, a platform's `run_autograder`):
    a sandbox user no other grader on this host holds, as each slot of a
    batch or a worker has (system/sandbox_users.py). Their clean-up between
    two gradings ends every process of their users, so a grading that ran
    as one of them would lose its runs. Where every user is held, the
    grading runs as `base` beside them, and says so. A `base` that switches
    no user comes back as it is (hold_users)."""
    sandbox, held, note = hold_one_or_base(base, "this grading ran")
    return sandbox, held, [note] if note else []


@dataclass
class PartState:
    """Working state of one part while it is graded."""

    part: Part
    result: PartResult
    source: Path
    kernels: set = field(default_factory=set)
    binary: Optional[Path] = None
    library: Optional[Path] = None  # the part as a shared object too, where its build linked one
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


class PhaseClock:
    """When each phase of a grading ran. Phases may run beside each other, and
    one phase may run in several threads at once (the correctness runs of all
    parts): a phase's time is from its first start to its last end. A wait
    (waited()) counts what was waited, summed: the waits of one phase lie
    apart, with other phases between them."""

    def __init__(self, zero: float):
        self.zero = zero
        self._lock = threading.Lock()
        self._spans: dict = {}
        self._waited: dict = {}  # phase -> seconds waited, over all its waits

    @contextmanager
    def timed(self, phase: str):
        start = time.monotonic()
        try:
            yield
        finally:
            self.record(phase, start, time.monotonic())

    def record(self, phase: str, start: float, end: float) -> None:
        """A span of `phase` that ran from `start` to `end` (time.monotonic())."""
        with self._lock:
            first, last = self._spans.get(phase, (start - self.zero, end - self.zero))
            self._spans[phase] = (min(first, start - self.zero), max(last, end - self.zero))

    def waited(self, phase: str, start: float, end: float) -> None:
        """A wait of `phase` from `start` to `end` (time.monotonic())."""
        self.record(phase, start, end)
        with self._lock:
            self._waited[phase] = self._waited.get(phase, 0.0) + (end - start)

    def timings(self) -> dict:
        return {phase: round(self._waited.get(phase, end - start), 3)
                for phase, (start, end) in self._spans.items()}

    def spans(self) -> dict:
        return {phase: [round(start, 3), round(end, 3)] for phase, (start, end) in self._spans.items()}


def check_sandbox(opt: GradeOptions, sandbox: Sandbox) -> None:
    """Raises SandboxError when student code in `sandbox` could read a secret
    of this tree, or could not read what building and running a part needs."""
    preflight(sandbox, secret_paths(opt),
              [opt.root / "grader" / "harness" / "part_main.cu", opt.root / "include" / "tilelab" / "part.h",
               opt.build_dir / "grader" / "harness" / "libtilelab_harness.a"])


def sandbox_problem(opt: GradeOptions, sandbox: Sandbox) -> Optional[str]:
    """What check_sandbox would raise, in words, or None: a worker's health."""
    try:
        check_sandbox(opt, sandbox)
    except SetupError as e:
        return str(e)
    return None


def secret_paths(opt: GradeOptions) -> list:
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
    secret = [p for p in secret_paths(opt) if p.exists() and (p.name != ASSIGNMENT_FILE or hidden)]
    if opt.mode == "check" and not secret:
        return Sandbox()
    return sandbox_for_this_process()


def private_name(name: str) -> str:
    """A directory name below the work dir that code of other gradings,
    running as the same sandbox user, cannot guess (it can pass through the
    work dir, mode 0711, but not list it)."""
    return f"{name}-{secrets.token_hex(8)}"


def work_dir(opt: GradeOptions, sandbox: Sandbox) -> Path:
    """Where builds and runs happen. For a sandboxed user it is a fresh
    directory outside the results (which stay the grader's alone, mode 0700),
    that the sandbox user may only pass through (0711). Folders of graders
    killed before their end go first (owned_dirs.py)."""
    owned_dirs.sweep()
    if sandbox.switches_user:
        opt.out_dir.mkdir(parents=True, exist_ok=True)
        opt.out_dir.chmod(0o700)
        work = owned_dirs.make(owned_dirs.WORK)
        work.chmod(0o711)
        return work
    work = opt.out_dir / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return work


def new_part_state(part: Part, submission: Path, sets: tuple) -> PartState:
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
    state = PartState(part, result, submission / part.file)
    state.hidden_names = {f"h{i + 1:02d}": c.name for i, c in enumerate(part.cases["hidden"])} if "hidden" in sets else {}
    return state
