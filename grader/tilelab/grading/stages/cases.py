"""The stages that share the GPU: every part's correctness cases, launch
checks and sanitizer runs at once; a part whose runs may have been
disturbed by runs beside it is run again alone."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

from ...spec.assignment import Part
from ...system import process
from ..context import Grading, PartState, private_name
from ..diagnose import case_hints
from ..launch_checks import check_launches, launch_rows, shared_memory_untouched
from ..model import CaseResult, ElementError, Stage
from ..runner import exit_codes, may_be_disturbed, run_harness, verify, write_cases
from ..sanitizer import NO_SHARED_MEMORY, NOT_RUN_AFTER_TIMEOUT, run_sanitizer


def run_cases(g: Grading, runnable: list) -> None:
    """The correctness, launch, memcheck and racecheck stages of every part that built."""
    g.progress("correctness" + (" and compute-sanitizer" if g.options.sanitizers else ""))
    codes = exit_codes(g.tools.verify)
    with g.held(g.gpu_lock.shared(), "waiting to share the GPU"):
        disturbed = _shared_gpu_runs(g, runnable, codes, g.options.jobs)
    if disturbed:
        # Crashed or could not start: perhaps starved by a run beside it (a
        # fork bomb in another part, or in another hand-in of the batch, holds
        # the sandbox user's process limit). Each such part is run again with
        # the GPU to itself, nothing of anybody else beside it, and that run
        # is its verdict.
        g.progress("running again alone: " + ", ".join(s.part.id for s in disturbed))
        with g.timed("runs again alone"), g.gpu_lock.exclusive():
            for s in disturbed:
                _shared_gpu_runs(g, [s], codes, 1)


def _shared_gpu_runs(g: Grading, runnable: list, codes: dict, workers: int) -> list:
    """Every part's correctness runs (then its launch checks) and sanitizer
    runs, `workers` at a time: they may share the GPU, and none waits for
    another. A part whose correctness run times out hangs: its sanitizer
    runs are called off (cancel) and reported not run. Returns the parts
    whose runs may have been disturbed by runs beside them (runner.
    may_be_disturbed): run_cases runs those again, alone. `codes`: the
    harness's exit codes (runner.exit_codes).

    Racecheck finds shared-memory hazards only: when the correctness runs
    show that no launch of the part had shared memory, on the racecheck
    cases' sizes among others, its run is called off and the stage passes
    for that reason (racecheck costs about twice the naive part's correctness
    run; measured: docs/measurements-archive.md, "Fast feedback, continued:
    fewer waits on the critical path")."""
    hangs = {s.part.id: threading.Event() for s in runnable}
    calls_off = {(s.part.id, tool): threading.Event() for s in runnable for tool in ("memcheck", "racecheck")}
    disturbed: set = set()
    no_shared_memory: set = set()

    def correctness(s: PartState) -> None:
        with g.timed("correctness"):
            if _correctness(g, s, codes):
                disturbed.add(s.part.id)
        if any(c.status == "timeout" for c in s.result.cases):
            hangs[s.part.id].set()
            for tool in ("memcheck", "racecheck"):
                calls_off[s.part.id, tool].set()
        with g.timed("launch checks"):
            _launch_checks(s)
        sizes = [(c.j, c.k, c.l) for c in s.part.cases["racecheck"]]
        if (s.stage("correctness").status == "passed" and s.stage("launch").status == "passed"
                and shared_memory_untouched(s.harness_result, sizes)):
            no_shared_memory.add(s.part.id)
            calls_off[s.part.id, "racecheck"].set()

    def sanitize(s: PartState, tool: str, case_file: Path) -> None:
        if tool == "racecheck" and s.part.id in no_shared_memory:
            s.result.stages[tool] = Stage(tool, "passed", NO_SHARED_MEMORY)  # known before its turn came
            return
        with g.timed("sanitizers"):
            stage, maybe = run_sanitizer(tool, s.binary, case_file, limit, g.sandbox, calls_off[s.part.id, tool])
        if tool == "racecheck" and s.part.id in no_shared_memory and stage.status != "failed":
            stage = Stage(tool, "passed", NO_SHARED_MEMORY, "", stage.seconds)
        s.result.stages[tool] = stage
        if maybe:
            disturbed.add(s.part.id)

    limit = g.limits["sanitizer"]
    jobs = [(correctness, (s,)) for s in runnable]
    if g.options.sanitizers:
        # The longer runs first, so that none of them is left to start last
        # when there are more runs than workers (a racecheck run takes about
        # twice a memcheck run; measured: docs/measurements-archive.md, "Fast
        # feedback: where a grading's time goes").
        for tool in ("racecheck", "memcheck"):
            for s in runnable:
                entries = [(c.name, c) for c in s.part.cases[tool]]
                case_file = write_cases(s.part, entries, g.work / private_name(f"{s.part.id}-{tool}"), g.seed,
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


def _staff_log(g: Grading, name: str, run) -> None:
    (g.logs / f"{name}.log").write_text(f"exit {run.exit_code} signal {run.signal} timed out {run.timed_out} "
                                      f"stopped {run.stopped} ({run.output_bytes} bytes printed)\n"
                                      f"--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}\n")


def _correctness(g: Grading, s: PartState, exit_codes: dict) -> bool:
    """Public and hidden cases run in separate processes: what a part prints
    while it runs hidden cases (it is called with their sizes) goes to staff
    logs only. Hidden cases also get opaque names in their case file.
    Returns whether a run may have been disturbed by runs beside it."""
    limit = g.limits["correctness"]
    reverse = s.case_file_names
    cases, results, student_output, failure, seconds, printed = [], [], "", None, 0.0, 0
    left, left_cpu_s = 0, 0.0  # processes the launcher started and never waited for (tilelab-contain)
    disturbed = False
    for set_name in g.sets:
        entries = [(reverse.get(c.name, c.name), c) for c in s.part.cases[set_name]]
        if not entries:
            continue
        case_file = write_cases(s.part, entries, g.work / private_name(f"{s.part.id}-{set_name}"),
                                g.seed + (7 if set_name == "hidden" else 0))
        run = run_harness(s.binary, case_file, limit, g.sandbox, trusted=g.trusted)
        disturbed = disturbed or may_be_disturbed(run)
        _staff_log(g, f"{s.part.id}-{set_name}", run)
        verdict = verify(g.tools.verify, case_file)
        set_cases = _case_results(verdict, (set_name,), s.part, s.hidden_names)
        _mark_stopped_case(set_cases, run, limit, exit_codes)
        cases += set_cases
        results.append(run.result or {})
        failure = failure or _harness_failure(run)
        seconds += run.seconds
        printed += run.output_bytes
        left, left_cpu_s = left + run.others, left_cpu_s + run.others_cpu_s
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
                        "cuda_in_use_at_start": any(r.get("cuda_in_use_at_start") is True for r in results),
                        "processes_left": left, "processes_left_cpu_ms": round(left_cpu_s * 1e3, 1)}
    summary = _case_list_summary(s.result.cases)
    if failure == "timeout":
        summary = f"the part did not finish within {limit:.0f} s; {summary}"
    elif failure:
        summary = f"the harness was stopped ({failure}); {summary}"
    if printed > 10 * 1024 * 1024:
        summary += f"; the part printed {printed / 1e6:.0f} MB (only the start and end are kept)"
    g.progress(f"{s.part.id}: {summary}")
    s.set("correctness", "passed" if s.cases_all_passed else "failed", summary,
          student_output if not s.cases_all_passed else "", seconds,
          case_hints(s.result.cases, tiled=s.part.shared_memory != "any"))
    s.result.launches = launch_rows(results[0] if results else {})
    return disturbed


def _launch_checks(s: PartState) -> None:
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
