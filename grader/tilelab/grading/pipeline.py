"""One grading of one hand-in: the stages, in order."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..spec.assignment import load_assignment
from ..system.atomic import write_atomically
from ..system.paths import ASSIGNMENT_FILE, tool_path, unbuilt_reason
from ..system.sandbox import preflight
from .context import _new_state, _PhaseClock, _sandbox_for, _secrets, _work_dir
from .model import NO_CEILINGS, NO_GPU, NO_TARGETS, STAGES, GradeResult
from .options import CHECK_SEED, GradeOptions, fresh_seed
from .runner import exit_codes
from .stages.build_parts import _build
from .stages.cases import _shared_gpu_runs
from .stages.device import _compute_capability, _gpu_and_targets
from .stages.finish import _answers, _name_the_students_file, _score
from .stages.speed import _speed
from .static_checks import check_source
from .trusted_harness import SERVICES, TrustedHarness


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


def write_detailed_json(result: GradeResult, path: Path) -> None:
    write_atomically(path, json.dumps(result.to_dict(), indent=2))
