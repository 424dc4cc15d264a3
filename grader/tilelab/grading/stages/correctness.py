"""A part's correctness runs: its public and hidden cases through the
harness, their verdicts from the trusted verifier, and what a student is
shown of them."""

from __future__ import annotations

from typing import Optional

from ...spec.assignment import Part
from ...system import process
from ..context import Grading, PartState, private_name
from ..diagnose import case_hints
from ..launch_checks import launch_rows
from ..model import CaseResult, ElementError
from ..runner import may_be_disturbed, run_harness, verify, write_cases


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


def run_correctness(g: Grading, s: PartState, exit_codes: dict) -> bool:
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
