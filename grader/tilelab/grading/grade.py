"""One grading of one hand-in: the pipeline behind `tilelab grade` and `tilelab check`.

Per part: static checks -> build -> correctness -> launch checks ->
memcheck -> racecheck -> speed. No phase waits for one it does not need:
the GPU is probed first (its properties, no context: 0.15 s), all parts
build at once for that GPU alone, every part's correctness runs and
sanitizer runs share the GPU at once while the speed targets are found
beside them, and last each part is timed alone on the GPU, one after
another. Racecheck is called off for a part none of whose launches had
shared memory (it looks for shared-memory races only). Every run has a
time limit; a part that fails, hangs or crashes costs only itself. Without
a GPU every GPU stage is reported as not run.

`check` is the same pipeline on the public cases with a fixed seed.

The exercise answers (answers.yaml) are graded too when the assignment has
questions and the answer key is at hand; a student's copy has no key, so
there they are read and checked for form only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..grading.answers import ANSWERS_FILE, NO_KEY, AnswerKeyError, AnswersResult, grade_answers, load_key
from ..spec.assignment import Assignment, Part, load_assignment
from ..spec.matmul import matmul_flop
from ..spec.reference_gpu import ReferenceGpuError, load_reference_gpu
from ..system import process
from ..system.atomic import write_atomically
from ..system.gpu_lock import GpuLock
from ..system.paths import (ANSWER_KEY_PLACES, ASSIGNMENT_FILE, COMPILED_REFERENCES_DIR, answer_key_path, tool_path,
                            unbuilt_reason)
from ..system.sandbox import Sandbox, preflight, sandbox_for_this_process
from . import calibration, gpu_ceilings
from .build import RecipeError, SubmissionBuild
from .build_cache import CHECK_POLICY, GRADE_POLICY, BuildCache
from .diagnose import STATUS_HINTS, case_hints
from .launch_checks import (HOST_WORK_HINT, check_launches, check_timed_calls, launch_rows, shared_memory_untouched,
                            timed_printing)
from .model import (ESTIMATED_RULE, NO_DEVICE_NOTE, STAGES, CaseResult, ElementError, GradeResult, PartResult, Speed,
                    Stage)
from .runner import exit_codes, may_be_disturbed, run_harness, verify, write_cases
from .sanitizer import NO_SHARED_MEMORY, NOT_RUN_AFTER_TIMEOUT, run_sanitizer
from .scoring import CUBLAS, IMPOSSIBLE_FRACTION, case_points, gflops, scored_time
from .static_checks import check_source
from .trusted_harness import SERVICES, TrustedHarness

CHECK_SEED = 20261121  # `check` repeats itself exactly; `grade` draws a fresh seed
CHECK_CACHE_DIR = "check-cache"  # under the build tree: the parts `check` built last (build_cache.py)
PART_CACHE_DIR = "part-cache"  # under the build tree: the parts gradings built, by content (build_cache.py)
PROBE_WAIT_FOR_BUILD_S = 5.0  # the build waits this long for the GPU probe, then builds for every GPU
NO_GPU = "not run: no CUDA device on this machine"
NO_CEILINGS = "not run: the GPU's ceilings could not be measured (see the notes)"
WORK_ELSEWHERE = "not run: the launch checks found work done outside the part's own kernels"
NO_TARGETS = ("not scored: the grader could not time its reference solutions on this GPU, so it has no speed "
              "targets")
NO_TARGETS_NOTE = ("Speed was not scored: the grader could not time its reference solutions on this GPU, so it "
                   "has no speed targets. This is a problem in the grader, not in your code; the course staff "
                   "can see why and will regrade.")


def fresh_seed() -> int:
    """A new input seed for an autograder grading."""
    return secrets.randbits(40)


def build_jobs_each(gradings: int) -> int:
    """Compiler jobs each of `gradings` side-by-side gradings gets: a share of the CPUs."""
    return max(1, (os.cpu_count() or 2) // gradings)


@dataclass
class GradeOptions:
    root: Path
    build_dir: Path  # a configured and built tree of this project (harness libraries, tools)
    out_dir: Path
    mode: str = "grade"  # "grade" or "check"
    seed: Optional[int] = None
    parts: tuple = ()  # only these parts (default: all)
    sanitizers: bool = True
    timing: bool = True
    jobs: int = field(default_factory=lambda: build_jobs_each(1))
    refresh_roofline: bool = False
    progress: Callable[[str], None] = field(default=lambda message: None)
    gpu_lock: GpuLock = field(default_factory=GpuLock)  # shared with gradings running beside this one
    sandbox: Optional[Sandbox] = None  # default: sandbox_for_this_process() (another user when root)
    answer_key: Optional[Path] = None  # default: the first of ANSWER_KEY_PLACES under root that exists
    answers_only: bool = False  # grade answers.yaml and no part (the self-test's answers hand-ins)
    questions: bool = True  # grade answers.yaml too (off where a command checks some parts only)
    trusted: Optional[TrustedHarness] = None  # set by grade(): the trusted harness of its runs
    # Called as the speed stage starts: work for the grader's own CPU while the
    # GPU times one part after another and the grader mostly waits (the
    # commands get their reports ready then: outputs/report.py).
    while_timing: Callable[[], None] = field(default=lambda: None)
    # The GPU probe (gpu_ceilings.device_info_started), started by a command with
    # this process's environment before it imported the grader. Used only
    # where the sandbox adds nothing to the environment (a batch's sandboxes
    # choose their GPU): None, or any other sandbox, and grade() probes.
    device_probe: Optional[Future] = None


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


def grade(submission: Path, opt: GradeOptions) -> GradeResult:
    clock = time.monotonic()
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    assignment = load_assignment(opt.root / ASSIGNMENT_FILE)
    parts = [] if opt.answers_only else [p for p in assignment.parts if not opt.parts or p.id in opt.parts]
    seed = opt.seed if opt.seed is not None else (CHECK_SEED if opt.mode == "check" else fresh_seed())
    sets = ("public", "hidden") if opt.mode == "grade" else ("public",)
    unbuilt = unbuilt_reason(opt.build_dir)
    if unbuilt:
        raise FileNotFoundError(f"{unbuilt}: build the project first (cmake --build {opt.build_dir})")
    verify_tool = tool_path(opt.build_dir, "tilelab-verify")
    roofline_tool = tool_path(opt.build_dir, "tilelab-roofline")
    sandbox = opt.sandbox if opt.sandbox is not None else _sandbox_for(opt, assignment)
    opt = dataclasses.replace(opt, sandbox=sandbox)
    preflight(sandbox, _secrets(opt, assignment),
              [opt.root / "grader" / "harness" / "part_main.cu", opt.root / "include" / "tilelab" / "part.h",
               opt.build_dir / "grader" / "harness" / "libtilelab_harness.a"])
    work = _work_dir(opt, sandbox)
    logs = opt.out_dir / "staff" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    trusted = TrustedHarness(tool_path(opt.build_dir, "tilelab-harness"), services=min(SERVICES, max(1, len(parts))),
                             log=logs / "harness-service.log")
    if parts:
        # Their CUDA contexts are made while the parts are checked and built.
        threading.Thread(target=trusted.start_all, name="tilelab-harness-services", daemon=True).start()
    opt = dataclasses.replace(opt, trusted=trusted)
    try:
        clock_of = _PhaseClock(clock)
        timed = clock_of.timed
        notes: list = []
        staff_notes: list = []
        states = [_new_state(p, submission, sets) for p in parts]

        # The GPU is probed (its properties only, about 0.15 s), then the speed
        # targets are found, while the parts are checked, built and run: only
        # the build waits for the probe (to compile for this GPU alone), and
        # only speed for the targets.
        beside = ThreadPoolExecutor(max_workers=1)
        device_known: Future = Future()
        gpu_side = beside.submit(_gpu_and_targets, opt, assignment, roofline_tool, verify_tool, notes, staff_notes,
                                 timed, device_known) if states else None
        beside.shutdown(wait=False)

        if states:
            opt.progress("static checks, then the build")
        with timed("static checks"):
            for s in states:
                found = check_source(s.source, s.part)
                s.set("static", "passed" if found.ok else "failed", found.summary, found.details, hints=found.hints)
                if found.ok:
                    s.kernels = found.kernels
                    s.result.not_written = [str(t) for t in found.todos]
                else:
                    s.skip_from("build", "not run: the static checks failed")

        with timed("build"):
            _build(states, opt, assignment, work, lambda: _compute_capability(device_known))
        gpu = device_known.result() if gpu_side else None

        runnable = [s for s in states if s.binary is not None]
        ceilings, basis = None, None
        if gpu is None:
            for s in runnable:
                s.skip_from("correctness", NO_GPU)
        else:
            opt.progress("correctness" + (" and compute-sanitizer" if opt.sanitizers else ""))
            codes = exit_codes(verify_tool)
            with opt.gpu_lock.shared():
                disturbed = _shared_gpu_runs(runnable, sets, seed, work, assignment, verify_tool, codes, opt, timed,
                                             opt.jobs)
            if disturbed:
                # Crashed or could not start: perhaps starved by a run beside it
                # (a fork bomb in another part, or in another hand-in of the
                # batch, holds the sandbox user's process limit). Each such part
                # is run again alone, with the GPU to itself, so nothing of
                # anybody else runs beside it, and that run is its verdict.
                opt.progress("running again alone: " + ", ".join(s.part.id for s in disturbed))
                with timed("runs again alone"), opt.gpu_lock.exclusive():
                    for s in disturbed:
                        _shared_gpu_runs([s], sets, seed, work, assignment, verify_tool, codes, opt, timed, 1)
            ceilings, basis = gpu_side.result()
            if opt.timing and ceilings is None:
                for s in runnable:
                    s.skip_from("speed", NO_CEILINGS)
            elif opt.timing and basis is None:
                for s in runnable:
                    s.set("speed", "error", NO_TARGETS)
            elif opt.timing:
                opt.progress("speed")
                opt.while_timing()
                with timed("speed"), opt.gpu_lock.exclusive():
                    for s in runnable:
                        _speed(s, seed, work, assignment, verify_tool, ceilings, basis, opt.sandbox, opt.trusted)

        for s in states:
            _name_the_students_file(s, opt.mode)
            # anything still unset was skipped on purpose
            s.skip_from(STAGES[0], "not run: switched off for this run" if gpu else NO_GPU)
            for c in s.result.cases:
                if not c.ran and c.reasons == ["not run"]:
                    c.reasons = [s.stage("correctness").summary]
            _score(s)

        answers = None
        if assignment.questions and (opt.questions or opt.answers_only):
            opt.progress("questions")
            with timed("questions"):
                answers = _answers(submission, assignment, opt)

        if sandbox.switches_user:
            shutil.rmtree(work, ignore_errors=True)
        return GradeResult(
            assignment=assignment.name,
            mode=opt.mode,
            submission=str(submission),
            seed=seed,
            gpu=gpu,
            ceilings=ceilings.summary() if ceilings else None,
            parts=[s.result for s in states],
            started=started,
            seconds=round(time.monotonic() - clock, 3),
            timings=clock_of.timings(),
            spans=clock_of.spans(),
            notes=notes,
            title=assignment.title,
            answers=answers,
            calibration=basis.summary(assignment, ceilings) if basis else None,
            staff_notes=staff_notes,
        )
    finally:
        trusted.close()


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


def _compute_capability(device_known: Future) -> Optional[str]:
    """The probed GPU's compute capability, for the build; None (build for
    every GPU the tree builds for) without a GPU, or if the probe is slow."""
    try:
        gpu = device_known.result(timeout=PROBE_WAIT_FOR_BUILD_S)
    except Exception:  # noqa: BLE001 - a probe that failed or is slow: grade() hears of it where it waits
        return None
    return gpu.get("compute_capability") if isinstance(gpu, dict) else None


def _gpu_and_targets(opt: "GradeOptions", assignment: Assignment, roofline_tool: Path, verify_tool: Path, notes: list,
                     staff_notes: list, timed, device_known: Future) -> tuple:
    """(ceilings, speed basis), each None where it could not be had (the
    notes say why): what the speed stage waits for. The device (None without
    a usable GPU), which every GPU stage waits for, goes to `device_known`
    as soon as it is known, before the ceilings and the calibration."""
    try:
        with timed("gpu probe"):
            gpu = _probe_device(roofline_tool, opt, notes)
    except BaseException as e:
        device_known.set_exception(e)
        raise
    device_known.set_result(gpu)
    if gpu is None:
        return None, None
    with timed("ceilings"):
        ceilings = _ceilings(roofline_tool, gpu, opt, notes)
    basis = None
    if ceilings is not None and opt.timing:
        with timed("calibration"):
            basis = _speed_basis(opt, assignment, gpu, ceilings, verify_tool, notes, staff_notes)
    return ceilings, basis


def _shared_gpu_runs(runnable: list, sets: tuple, seed: int, work: Path, assignment: Assignment, verify_tool: Path,
                     codes: dict, opt: "GradeOptions", timed, workers: int) -> list:
    """Every part's correctness runs (then its launch checks) and sanitizer
    runs, `workers` at a time: they may share the GPU, and none waits for
    another. A part whose correctness run times out hangs: its sanitizer
    runs are called off (cancel) and reported not run. Returns the parts
    whose runs may have been disturbed by runs beside them (runner.
    may_be_disturbed): grade() runs those again, alone. `codes`: the
    harness's exit codes (runner.exit_codes).

    Racecheck finds shared-memory hazards only: when the correctness runs
    show that no launch of the part had shared memory, on the racecheck
    cases' sizes among others, its run is called off and the stage passes
    for that reason (the naive part: racecheck took 1.2 s of a 0.6 s
    correctness run on the H100)."""
    hangs = {s.part.id: threading.Event() for s in runnable}
    calls_off = {(s.part.id, tool): threading.Event() for s in runnable for tool in ("memcheck", "racecheck")}
    disturbed: set = set()
    no_shared_memory: set = set()

    def correctness(s: _Part) -> None:
        with timed("correctness"):
            if _correctness(s, sets, seed, work, assignment, verify_tool, codes, opt):
                disturbed.add(s.part.id)
        if any(c.status == "timeout" for c in s.result.cases):
            hangs[s.part.id].set()
            for tool in ("memcheck", "racecheck"):
                calls_off[s.part.id, tool].set()
        with timed("launch checks"):
            _launch_checks(s)
        sizes = [(c.j, c.k, c.l) for c in s.part.cases["racecheck"]]
        if (s.stage("correctness").status == "passed" and s.stage("launch").status == "passed"
                and shared_memory_untouched(s.harness_result, sizes)):
            no_shared_memory.add(s.part.id)
            calls_off[s.part.id, "racecheck"].set()

    def sanitize(s: _Part, tool: str, case_file: Path) -> None:
        if tool == "racecheck" and s.part.id in no_shared_memory:
            s.result.stages[tool] = Stage(tool, "passed", NO_SHARED_MEMORY)  # known before its turn came
            return
        with timed("sanitizers"):
            stage, maybe = run_sanitizer(tool, s.binary, case_file, limit, opt.sandbox, calls_off[s.part.id, tool])
        if tool == "racecheck" and s.part.id in no_shared_memory and stage.status != "failed":
            stage = Stage(tool, "passed", NO_SHARED_MEMORY, "", stage.seconds)
        s.result.stages[tool] = stage
        if maybe:
            disturbed.add(s.part.id)

    limit = assignment.grading["time_limits"]["sanitizer"]
    jobs = [(correctness, (s,)) for s in runnable]
    if opt.sanitizers:
        # The longer runs first, so that none of them is left to start last
        # when there are more runs than workers: beside the others on the
        # H100, a racecheck run took 3.5-3.9 s and a memcheck run 1.5-1.9 s.
        for tool in ("racecheck", "memcheck"):
            for s in runnable:
                entries = [(c.name, c) for c in s.part.cases[tool]]
                case_file = write_cases(s.part, entries, work / _private_name(f"{s.part.id}-{tool}"), seed,
                                        record_launches=False)
                jobs.append((sanitize, (s, tool, case_file)))
    # Correctness first: its verdicts are shown as soon as they are known.
    with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), workers))) as pool:
        for done in [pool.submit(fn, *args) for fn, args in jobs]:
            done.result()
    for s in runnable:
        if hangs[s.part.id].is_set():
            for tool in ("memcheck", "racecheck"):
                s.set(tool, "not_run", NOT_RUN_AFTER_TIMEOUT)
    return [s for s in runnable if s.part.id in disturbed and not hangs[s.part.id].is_set()]


def _answers(submission: Path, assignment: Assignment, opt: GradeOptions) -> AnswersResult:
    """answers.yaml graded against the key; without a key (a student's copy)
    read and checked for form, scoring nothing."""
    key_path = answer_key_path(opt.root, opt.answer_key)
    answers_path = submission / ANSWERS_FILE
    if not key_path.is_file():
        result = grade_answers(answers_path, assignment.questions, None, not_graded_reason=NO_KEY)
        result.staff_note = f"no answer key at {key_path}"
        return result
    try:
        key = load_key(key_path, assignment.questions)
    except AnswerKeyError as e:
        # The key is the course's, not the student's: they are told only that
        # the grader could not grade; the error (which may quote the key) is for staff.
        result = grade_answers(answers_path, assignment.questions, None,
                               not_graded_reason="not graded: the grader's answer key is broken (not your fault; "
                                                 "tell the course staff)")
        result.staff_note = str(e)
        return result
    return grade_answers(answers_path, assignment.questions, key)


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


def _probe_device(tool: Path, opt: GradeOptions, notes: list) -> Optional[dict]:
    """The device facts, or None (with a note) without a usable GPU."""
    try:
        if opt.device_probe is not None and not opt.sandbox.extra_env:
            return opt.device_probe.result()
        return gpu_ceilings.device_info(tool, 60, _probe_env(opt))
    except gpu_ceilings.NoDevice:
        notes.append(NO_DEVICE_NOTE)
    except gpu_ceilings.RooflineError as e:
        notes.append(f"The GPU probe failed ({e}): the GPU stages did not run.")
    return None


def _ceilings(tool: Path, gpu: dict, opt: GradeOptions, notes: list):
    """The GPU's measured ceilings, or None (with a note) when they could not be had."""
    try:
        # Measured (once per GPU, then cached) with the GPU to itself.
        ceilings = None if opt.refresh_roofline else gpu_ceilings.cached_ceilings(gpu)
        if ceilings is None:
            with opt.gpu_lock.exclusive():
                ceilings = gpu_ceilings.get_ceilings(tool, refresh=opt.refresh_roofline, env=_probe_env(opt), device=gpu)
    except gpu_ceilings.RooflineError as e:
        notes.append(f"The GPU's ceilings could not be measured ({e}): speed was not measured.")
        return None
    return ceilings


def _probe_env(opt: GradeOptions) -> dict:
    """The probe asks about the GPU the sandboxed runs will use (Sandbox.extra_env)."""
    return {**os.environ, **opt.sandbox.extra_env}


def _speed_basis(opt: GradeOptions, assignment: Assignment, gpu: dict, ceilings, verify_tool: Path, notes: list,
                 staff_notes: list) -> Optional[calibration.Calibration]:
    """What the speed targets are fractions of: the reference solutions timed
    on this GPU (cached per GPU), or, in `check` on a machine without them (a
    student's), an estimate from the grading GPU's published figures. None,
    with a note, when there is neither: speed is then not scored."""
    if calibration.has_references(opt.build_dir, assignment):
        try:
            # The references are timed with the GPU to themselves, as a part is.
            basis = calibration.cached_calibration(opt.build_dir, assignment, gpu)
            if basis is None:
                with opt.gpu_lock.exclusive():
                    basis, _ = calibration.get_calibration(opt.build_dir, assignment, gpu, verify_tool, opt.sandbox)
        except calibration.CalibrationError as e:
            notes.append(NO_TARGETS_NOTE)
            staff_notes.append(f"Calibration failed: {e}")
            return None
        return basis
    if opt.mode == "check":
        try:
            return calibration.estimate(assignment, ceilings, gpu, load_reference_gpu(opt.root))
        except ReferenceGpuError as e:
            notes.append(f"Speed is not scored here: there are no reference solutions to time and no figures "
                         f"from the grading GPU to estimate from ({e}).")
            return None
    notes.append(NO_TARGETS_NOTE)
    staff_notes.append(f"{opt.build_dir} holds no reference solutions ({calibration.REFERENCE_DIR}/<part>): build "
                       "the checkout, or the autograder bundle with its references/")
    return None


def _copy_pattern(file: str) -> "re.Pattern":
    """Any copy of `file` the grader compiled: SubmissionBuild's sources
    folder in a private work folder. An executable taken from the part
    cache was compiled from an earlier grading's copy, and its line tables
    (which compute-sanitizer reads) name that one."""
    return re.compile(r"/[^\s'\"()<>]*/submission-[0-9a-f]{16}/sources/" + re.escape(file) + r"\b")


def _name_the_students_file(s: _Part, mode: str) -> None:
    """The compiler, compute-sanitizer and the harness name the copy of the
    part file the grader built; say the student's own instead: the path
    they typed from (`tilelab check`: starter/boundary.cu:39), or the file
    name alone where it was uploaded (boundary.cu:39)."""
    own = s.part.file
    if mode == "check":
        try:
            own = os.path.relpath(s.source)
        except ValueError:
            own = str(s.source)
    pattern = _copy_pattern(s.part.file)
    for stage in s.result.stages.values():
        stage.summary = pattern.sub(lambda _: own, stage.summary)
        stage.details = pattern.sub(lambda _: own, stage.details)


def _build(states: list, opt: GradeOptions, assignment: Assignment, work: Path,
           probed_capability: Callable[[], Optional[str]]) -> None:
    """Builds every part that passed its static checks, for the probed GPU
    alone when its compute capability is known (PartRecipe.for_device). A
    part file built before with the same bytes for the same GPU (by this
    student or another) is not compiled again (build_cache.py)."""
    todo = [s for s in states if s.stage("static").status == "passed"]
    if not todo:
        return
    capability = probed_capability()
    cache = (BuildCache(opt.root, opt.build_dir, opt.build_dir / CHECK_CACHE_DIR, CHECK_POLICY) if opt.mode == "check"
             else BuildCache(opt.root, opt.build_dir, opt.build_dir / PART_CACHE_DIR, GRADE_POLICY))
    keys = {s.part.id: cache.key(s.part, s.source, capability) for s in todo}
    cached_dir = work / _private_name("cached")
    for s in list(todo):
        s.binary = cache.find(s.part, keys[s.part.id], cached_dir / s.part.id)
        if s.binary is not None:
            # In a grading the summary is the same as for a fresh build: it
            # must not tell a student that someone handed in the same file.
            s.set("build", "passed", f"{s.part.file} is unchanged since it was last built: not compiled again"
                  if opt.mode == "check" else f"{s.part.file} compiled and linked")
            todo.remove(s)
    if cached_dir.exists():
        cached_dir.chmod(0o711)
    if not todo:
        return
    submission_dir = work / _private_name("submission")
    submission_dir.mkdir(parents=True, exist_ok=True)
    submission_dir.chmod(0o711)
    builder = SubmissionBuild(opt.build_dir, submission_dir, sandbox=opt.sandbox)
    builder.copy_sources([s.source for s in todo])
    limit = assignment.grading["time_limits"]["build"]
    try:
        builder.prepare([s.part for s in todo], capability)
    except RecipeError as e:
        for s in todo:
            s.set("build", "error", "the grader could not prepare the build (not your fault)", str(e))
            s.skip_from("correctness", "not run: the build could not be prepared")
        return
    with ThreadPoolExecutor(max_workers=min(len(todo), opt.jobs)) as pool:
        builds = list(pool.map(lambda s: builder.build_part(s.part, limit), todo))
    builder.seal()
    for s, b in zip(todo, builds):
        if b.failed_step == "audit":
            s.set("static", "failed", b.summary, b.details)
            s.set("build", "not_run", "not run: the compiled part failed the static checks")
        elif not b.ok:
            hints = [f"The launcher must be declared exactly as: {s.part.declaration}"] if b.failed_step == "link" else []
            s.set("build", "failed", b.summary, b.details, b.seconds, hints)
        else:
            s.set("build", "passed", b.summary, "", b.seconds)
            s.binary = b.binary
            cache.keep(s.part, keys[s.part.id], b.binary)
        if s.binary is None:
            s.skip_from("correctness", "not run: the part did not build")


def _harness_failure(run) -> Optional[str]:
    """Why a harness run ended abnormally, in words, or None."""
    if run.timed_out:
        return "timeout"
    if run.stopped:
        return run.stopped
    if run.exit_code is None and run.signal is not None:
        return f"signal {run.signal}"
    return None


def _mark_stopped_case(cases: list, run, limit: float, exit_codes: dict) -> None:
    """Names what ended the harness in the case it was running: the verifier
    only knows the process stopped there."""
    stuck = [c for c in cases if not c.ran and c.reasons and "while running" in c.reasons[0]]
    for c in stuck:
        if run.timed_out:
            c.status, c.reasons = "timeout", [f"did not finish within {limit:.0f} s"]
        elif run.stopped:
            c.status, c.reasons = "crash", [f"stopped by the grader: the part {run.stopped}"]
        elif run.exit_code in exit_codes:
            info = exit_codes[run.exit_code]
            c.status, c.reasons = info["name"], [info["meaning"]]
        elif run.signal is not None:
            c.status, c.reasons = "crash", [f"the process was killed by signal {run.signal}"]


def _case_results(verdict: dict, sets: tuple, part: Part, hidden_names: dict) -> list:
    set_of = {c.name: name for name in sets for c in part.cases[name]}
    results = []
    for v in verdict.get("cases", []):
        name = hidden_names.get(v["name"], v["name"])
        comparison = v.get("comparison", {})
        errors = [
            ElementError(e["row"], e["col"], e["expected"],
                         e["fault"] if e["fault"] in ("nan", "unwritten") else str(e["got"]), e["allowed"])
            for e in comparison.get("first", [])
        ]
        results.append(CaseResult(
            name=name, set=set_of.get(name, "public"), j=v["j"], k=v["k"], l=v["l"],
            passed=bool(v["passed"]), ran=bool(v.get("ran", False)), status=v.get("status", "not_run"),
            reasons=list(v.get("reasons", [])), wrong=comparison.get("wrong", 0), nan=comparison.get("nan", 0),
            unwritten=comparison.get("unwritten", 0), exact=bool(v.get("exact", False)), first_errors=errors,
        ))
    return results


def _case_list_summary(cases: list) -> str:
    """Public cases only: the summary is shown to students before hidden
    results are published (the hidden count lives in the cases themselves)."""
    public = [c for c in cases if c.set == "public"]
    text = f"{sum(c.passed for c in public)}/{len(public)} public cases passed"
    failed = [c.name for c in public if not c.passed]
    if failed:
        text += " (failed: " + ", ".join(failed[:6]) + (", ..." if len(failed) > 6 else "") + ")"
    return text


def _excerpt(text: str, head: int = 25, tail: int = 10) -> str:
    """A short piece of a run's output for a student; staff logs keep all that was captured."""
    return "\n".join(process.clip_lines(text.strip().splitlines(), head, tail))


def _staff_log(opt: GradeOptions, name: str, run) -> None:
    logs = opt.out_dir / "staff" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"{name}.log").write_text(f"exit {run.exit_code} signal {run.signal} timed out {run.timed_out} "
                                      f"stopped {run.stopped} ({run.output_bytes} bytes printed)\n"
                                      f"--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}\n")


def _correctness(s: _Part, sets: tuple, seed: int, work: Path, assignment: Assignment, verify_tool: Path,
                 exit_codes: dict, opt: GradeOptions) -> bool:
    """Public and hidden cases run in separate processes: what a part prints
    while it runs hidden cases (it is called with their sizes) goes to staff
    logs only. Hidden cases also get opaque names in their case file.
    Returns whether a run may have been disturbed by runs beside it."""
    limit = assignment.grading["time_limits"]["correctness"]
    reverse = s.case_file_names
    cases, results, student_output, failure, seconds, printed = [], [], "", None, 0.0, 0
    disturbed = False
    for set_name in sets:
        entries = [(reverse.get(c.name, c.name), c) for c in s.part.cases[set_name]]
        if not entries:
            continue
        case_file = write_cases(s.part, entries, work / _private_name(f"{s.part.id}-{set_name}"),
                                seed + (7 if set_name == "hidden" else 0))
        run = run_harness(s.binary, case_file, limit, opt.sandbox, trusted=opt.trusted)
        disturbed = disturbed or may_be_disturbed(run)
        _staff_log(opt, f"{s.part.id}-{set_name}", run)
        verdict = verify(verify_tool, case_file)
        set_cases = _case_results(verdict, (set_name,), s.part, s.hidden_names)
        _mark_stopped_case(set_cases, run, limit, exit_codes)
        cases += set_cases
        results.append(run.result or {})
        failure = failure or _harness_failure(run)
        seconds += run.seconds
        printed += run.output_bytes
        if set_name == "public":
            student_output = _excerpt(run.output)
        if failure == "timeout":
            break  # a part that hangs would hang again: the other set is not run
    ran = {c.name for c in cases}
    s.result.cases = cases + [c for c in s.result.cases if c.name not in ran]
    listed = [r.get("cases") if isinstance(r.get("cases"), list) else [] for r in results]
    s.harness_result = {"cases": [c for cases_of_run in listed for c in cases_of_run],
                        "first_cases": [run_cases[0].get("name") for run_cases in listed
                                        if run_cases and isinstance(run_cases[0], dict)],
                        "cuda_in_use_at_start": any(r.get("cuda_in_use_at_start") is True for r in results)}
    summary = _case_list_summary(s.result.cases)
    if failure == "timeout":
        summary = f"the part did not finish within {limit:.0f} s; {summary}"
    elif failure:
        summary = f"the harness was stopped ({failure}); {summary}"
    if printed > 10 * 1024 * 1024:
        summary += f"; the part printed {printed / 1e6:.0f} MB (only the start and end are kept)"
    opt.progress(f"{s.part.id}: {summary}")
    s.set("correctness", "passed" if s.cases_all_passed else "failed", summary,
          student_output if not s.cases_all_passed else "", seconds,
          case_hints(s.result.cases, tiled=s.part.shared_memory != "any"))
    s.result.launches = launch_rows(results[0] if results else {})
    return disturbed


def _launch_checks(s: _Part) -> None:
    try:
        # The limits each case lowered, by its name in the case file.
        opaque = s.case_file_names
        props = {opaque.get(c.name, c.name): dict(c.props) for name in ("public", "hidden")
                 for c in s.part.cases[name] if c.props}
        check = check_launches(s.harness_result, s.part.file, s.kernels, s.part.shared_memory, props)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        # The records come from the process that runs student code.
        s.set("launch", "failed", f"the launch records are malformed ({e})")
        return
    s.set("launch", check.status, check.summary, check.details, hints=check.hints)
    s.work_elsewhere = check.work_elsewhere


def _speed(s: _Part, seed: int, work: Path, assignment: Assignment, verify_tool: Path, ceilings,
           basis: calibration.Calibration, sandbox: Sandbox, trusted: TrustedHarness) -> None:
    """Times the part with tilelab-harness (`trusted`): its clock is the one scored."""
    if not s.cases_all_passed:
        s.set("speed", "not_run", "not run: speed is measured only when every case is correct")
        return
    if s.work_elsewhere:
        s.set("speed", "not_run", WORK_ELSEWHERE)
        return
    entries = [(c.name, c) for c in s.part.cases["timing"]]
    case_file = write_cases(s.part, entries, work / _private_name(f"{s.part.id}-timing"), seed,
                            timing=assignment.timing)
    limit = assignment.grading["time_limits"]["speed"]
    run = run_harness(s.binary, case_file, limit, sandbox, trusted=trusted, timed=True)
    if run.timed_out:
        s.set("speed", "failed", f"the timed calls did not finish within {limit:.0f} s", run.stderr.strip(),
              run.seconds, [STATUS_HINTS["timeout"]])
        return
    listed = (run.result or {}).get("cases")
    timings = [c.get("timing") for c in (listed if isinstance(listed, list) else []) if isinstance(c, dict)]
    host_work = [p for t in timings for p in check_timed_calls(t)]
    printing = [note for note in map(timed_printing, timings) if note]
    if host_work:
        # Seen only at the timing sizes: the launch checks fail, as they would have on a correctness case.
        s.set("launch", "failed", host_work[0], "\n".join(host_work), hints=[HOST_WORK_HINT])
        s.work_elsewhere = True
        s.set("speed", "not_run", WORK_ELSEWHERE, "", run.seconds)
        return
    verdict = verify(verify_tool, case_file)
    failed = [c for c in verdict["cases"] if not c["passed"]]
    if failed:
        reasons = "; ".join(failed[0]["reasons"])
        s.set("speed", "failed", f"the timed calls were not all right: {reasons}", run.stderr.strip(), run.seconds,
              ["Each timed call gets new inputs: a kernel must compute every answer, never reuse an earlier one."])
        return
    fractions, speeds = [], []
    for v in verdict["cases"]:
        target = basis.target(ceilings, s.part, assignment.speed, v["j"], v["k"], v["l"])
        if target is None:
            s.set("speed", "error", f"{NO_TARGETS} at {v['j']}x{v['k']}x{v['l']}", "", run.seconds)
            return
        t = v["timing"]
        choice = scored_time(t)
        achieved = gflops(matmul_flop(v["j"], v["k"], v["l"]), choice.ms)
        fraction = target.fraction(achieved)
        flags = list(choice.flags) + printing[:1]
        if achieved > IMPOSSIBLE_FRACTION * ceilings.fp32_gflops:
            flags.append(f"{achieved:.0f} GFLOP/s is above this GPU's measured FP32 peak: the timing cannot be "
                         "right, so it earns nothing; a TA will look at it")
            fraction = 0.0
        fractions.append(fraction)
        speeds.append(Speed(
            case=f"{v['j']}x{v['k']}x{v['l']}", gflops=round(achieved, 1), time_ms=round(choice.ms, 4),
            event_ms=t["median_event_ms"], cupti_ms=t["median_cupti_span_ms"], wall_ms=t["median_wall_ms"],
            ceiling_value=round(ceilings.fp32_gflops, 1), bound_gflops=round(target.bound, 1),
            intensity=round(target.intensity, 2),
            reference_gflops=round(target.reference, 1) if target.reference else None, rule=basis.rule,
            full_at=s.part.versus_cublas.full_at if s.part.versus_cublas else assignment.speed.full_at,
            target_gflops=round(target.full, 1), zero_gflops=round(target.zero, 1), fraction=round(fraction, 4),
            flags=flags, versus=target.versus, cublas_gflops=round(target.cublas, 1) if target.cublas else None,
        ))
    # Several timing cases combine by geometric mean, so one slow size is felt.
    fraction = math.prod(fractions) ** (1 / len(fractions)) if all(fractions) else 0.0
    s.result.speeds = speeds
    best = dataclasses.replace(speeds[0], fraction=round(fraction, 4))
    s.result.speed = best
    estimated = " (estimated: no reference solutions on this machine)" if basis.rule == ESTIMATED_RULE else ""
    against = "cuBLAS SGEMM" if best.versus == CUBLAS else "the reference solution"
    s.set("speed", "passed",
          f"{best.gflops:.0f} GFLOP/s at {best.case}: {100 * fraction:.0f}% of the speed points "
          f"(full credit from {best.target_gflops:.0f} GFLOP/s = {100 * best.full_at:.0f}% of {against} "
          f"here{estimated})", "", run.seconds)


def _score(s: _Part) -> None:
    r = s.result
    per_case = case_points(r.correctness_max, len(r.cases))
    withheld = [name for name in ("launch", "memcheck", "racecheck", "speed") if s.stage(name).status == "failed"]
    r.withheld_by = withheld
    if withheld:
        r.correctness_score = 0.0
        st = s.stage("correctness")
        titles = {"launch": "launch checks", "memcheck": "memcheck", "racecheck": "racecheck",
                  "speed": "the timed calls"}
        st.summary += f" — correctness points withheld: the part failed {', '.join(titles[w] for w in withheld)}"
    else:
        r.correctness_score = round(per_case * sum(c.passed for c in r.cases), 4)
    eligible = not withheld and s.stage("speed").status == "passed" and r.speed is not None
    r.speed_score = round(r.speed_max * r.speed.fraction, 4) if eligible else 0.0


def write_detailed_json(result: GradeResult, path: Path) -> None:
    write_atomically(path, json.dumps(result.to_dict(), indent=2))
