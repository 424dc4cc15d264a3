"""A part's correctness runs: its public and hidden cases through the
harness, their verdicts from the trusted verifier, and what a student is
shown of them."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ...spec.assignment import Part
from ...system import process
from ..context import Grading, PartState, private_name
from ..diagnose import case_hints
from ..launch_checks import launch_rows
from ..model import CaseResult, ElementError
from ..runner import HarnessRun, case_seed, may_be_disturbed, run_harness, verify, write_cases

if TYPE_CHECKING:
    from .early_runs import EarlyStart

# What a part's runs may print before its summary says so (only the start and end are kept).
PRINTED_MOST = 10 * 1024 * 1024


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


def write_staff_log(g: Grading, name: str, run) -> None:
    """What a run printed and how it ended, for staff: `staff/logs/<name>.log`."""
    (g.logs / f"{name}.log").write_text(f"exit {run.exit_code} signal {run.signal} timed out {run.timed_out} "
                                      f"stopped {run.stopped} ({run.output_bytes} bytes printed)\n"
                                      f"--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}\n")


def run_correctness(g: Grading, s: PartState, exit_codes: dict) -> bool:
    """The part's public and hidden cases. What a part prints while it runs
    hidden cases (it is called with their sizes) goes to staff logs only;
    hidden cases get opaque names in their case file.

    Under the trusted harness both sets run in one launcher process, the
    public cases first: a CUDA process fewer a part, and each costs a GPU's
    gradings about as much as a tenth of a second of its time (measured:
    docs/measurements.md, "A class on one GPU: what holds it near 420 an
    hour"). Each set keeps its own inputs and its own time limit, the hidden
    cases' from when the first of them begins (PartStarts). A run that
    ends before the hidden cases begin, other than by its time limit, is
    followed by a run of the hidden cases alone, as a public run that ended
    so was; and where the hidden cases began in the run a student is shown,
    what the part printed is taken from a run of the public cases alone.
    Returns whether a run may have been disturbed by runs beside it."""
    limit = g.limits["correctness"]
    sets = part_sets(g, s)
    runs = []
    if g.trusted is not None and sets == ("public", "hidden"):
        runs.append(run_sets(g, s, sets, limit, exit_codes, "cases"))
        if not runs[0].hidden_began and _harness_failure(runs[0].run) != "timeout":
            runs.append(run_sets(g, s, ("hidden",), limit, exit_codes, "hidden"))
    else:
        for set_name in sets:
            # A check's public cases may have begun while the part compiled (early_runs.py).
            begun = g.early.take(s) if g.early is not None and set_name == "public" else None
            runs.append(begun or run_sets(g, s, (set_name,), limit, exit_codes, set_name))
            if _harness_failure(runs[-1].run) == "timeout":
                break  # a part that hangs would hang again: the other set is not run
    return settle_correctness(g, s, runs, sets, exit_codes)


def part_sets(g: Grading, s: PartState) -> tuple:
    """The case sets of the part that this grading runs (public, hidden), those it has cases in."""
    return tuple(name for name in g.sets if s.part.cases[name])


def settle_correctness(g: Grading, s: PartState, runs: list, sets: tuple, exit_codes: dict) -> bool:
    """The part's correctness stage, cases and launch records from its runs
    (SetsRun), what a student is shown of them, and whether a run may have
    been disturbed by runs beside it."""
    limit = g.limits["correctness"]
    cases: dict = {}
    for r in runs:
        cases.update((c.name, c) for c in r.cases)
    s.result.cases = list(cases.values()) + [c for c in s.result.cases if c.name not in cases]
    failure = next((f for f in map(_harness_failure, (r.run for r in runs)) if f), None)
    results = [r.run.result or {} for r in runs]
    listed = [r.get("cases") if isinstance(r.get("cases"), list) else [] for r in results]
    s.harness_result = {"cases": [c for cases_of_run in listed for c in cases_of_run],
                        "first_cases": [run_cases[0].get("name") for run_cases in listed
                                        if run_cases and isinstance(run_cases[0], dict)],
                        "cuda_in_use_at_start": any(r.get("cuda_in_use_at_start") is True for r in results),
                        "processes_left": sum(r.run.others for r in runs),
                        "processes_left_cpu_ms": round(sum(r.run.others_cpu_s for r in runs) * 1e3, 1)}
    summary = _case_list_summary(s.result.cases)
    if failure == "timeout":
        summary = f"the part did not finish within {limit:.0f} s; {summary}"
    elif failure:
        summary = f"the harness was stopped ({failure}); {summary}"
    printed = sum(r.run.output_bytes for r in runs)
    if printed > PRINTED_MOST:
        summary += f"; the part printed {printed / 1e6:.0f} MB (only the start and end are kept)"
    g.progress(f"{s.part.id}: {summary}")
    seconds = sum(r.run.seconds for r in runs)
    student_output = ""
    if not s.cases_all_passed and "public" in sets:
        shown = next((r for r in runs if not r.hidden_began), None)
        if shown is None:  # its verdicts are the run's above; only what it prints is read
            shown = run_sets(g, s, ("public",), limit, exit_codes, "public")
            seconds += shown.run.seconds
        student_output = _excerpt(shown.run.output)
    s.set("correctness", "passed" if s.cases_all_passed else "failed", summary, student_output, seconds,
          case_hints(s.result.cases, tiled=s.part.shared_memory != "any"))
    s.result.launches = launch_rows(results[0] if results else {})
    return any(may_be_disturbed(r.run) for r in runs)


@dataclass
class SetsRun:
    run: HarnessRun
    cases: list  # CaseResult of its cases; of the public ones only where it never began its hidden ones
    hidden_began: bool


def run_sets(g: Grading, s: PartState, sets: tuple, limit: float, exit_codes: dict, label: str,
              early: Optional[EarlyStart] = None) -> SetsRun:
    """One harness run of the part's cases of `sets`, each set with the inputs
    a run of its own gives it; its staff log is `<part>-<label>`. `early`: the
    run begins before the part is built (early_runs.py)."""
    case_file, hidden = sets_case_file(g, s, sets, label)
    watch = PartStarts([case_file.parent / "result.json"], [hidden]) if len(sets) > 1 and hidden else None
    if early is not None:
        run = run_harness(s.binary, case_file, limit, g.sandbox, trusted=g.trusted, paused=early.waited,
                          cancel=early.called_off, launcher=early.launcher)
        run = dataclasses.replace(run, seconds=max(0.0, run.seconds - early.waited()))  # its cases, not the build
    else:
        run = run_harness(s.binary, case_file, limit, g.sandbox, trusted=g.trusted, paused=watch)
    write_staff_log(g, f"{s.part.id}-{label}", run)
    return sets_run_of(g, s, sets, case_file, hidden, run, limit, exit_codes)


def sets_case_file(g: Grading, s: PartState, sets: tuple, label: str) -> tuple:
    """(the case file of the part's cases of `sets`, in a folder of its own
    named after `label`, each set with the inputs a run of its own gives it;
    the names its hidden cases have in it)."""
    reverse = s.case_file_names
    entries, seeds = [], []
    for set_name in sets:
        set_seed = g.seed + (7 if set_name == "hidden" else 0)
        for i, c in enumerate(s.part.cases[set_name]):
            entries.append((reverse.get(c.name, c.name), c))
            seeds.append(case_seed(set_seed, i))
    case_file = write_cases(s.part, entries, g.work / private_name(f"{s.part.id}-{label}"), g.seed, seeds=seeds)
    hidden = {reverse.get(c.name, c.name) for c in s.part.cases["hidden"]} if "hidden" in sets else set()
    return case_file, hidden


def sets_run_of(g: Grading, s: PartState, sets: tuple, case_file: Path, hidden: set, run: HarnessRun,
                limit: float, exit_codes: dict) -> SetsRun:
    """The trusted verdict on `run` of `case_file` (sets_case_file), as a SetsRun."""
    verdict = verify(g.tools.verify, case_file)
    cases = _case_results(verdict, sets, s.part, s.hidden_names)
    _mark_stopped_case(cases, run, limit, exit_codes)
    began = sets == ("hidden",) or (bool(hidden) and hidden_began(run.result, hidden))
    if not began:  # as a run of the public cases alone: the hidden ones are still to run, not stopped before
        cases = [c for c in cases if c.set != "hidden"]
    return SetsRun(run, cases, began)


def hidden_began(result, hidden: set) -> bool:
    """Whether a harness result (written as each case begins) shows a case
    named in `hidden` begun."""
    if not isinstance(result, dict):
        return False
    listed = result.get("cases")
    names = [c.get("name") for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
    current = result.get("current_case")
    return any(isinstance(n, str) and n in hidden for n in [current, *names])


class PartStarts:
    """A run's `paused` (process.run): the time the run took until the
    current part's cases began, or its hidden cases did, so that each part's
    cases, and its hidden ones from their start, have the whole time limit a
    run of their own gives them. `results`: the result file of each case
    file the run takes in turn (one, or several on one launcher:
    cases_together.py); `hidden`: each one's hidden case names. Read from
    the result files, which the trusted harness writes as each file's cases,
    and each case, begin."""

    def __init__(self, results: list, hidden: list) -> None:
        self._results, self._hidden = [Path(r) for r in results], hidden
        self._start = time.monotonic()
        self._current = 0  # the file whose cases run now, as far as seen
        self._hidden_seen = False
        self._seen: Optional[tuple] = None  # the current file's (mtime, size) when last read
        self._after = 0.0

    def __call__(self) -> float:
        while self._current + 1 < len(self._results) and self._results[self._current + 1].exists():
            self._current += 1
            self._hidden_seen, self._seen = False, None
            self._after = time.monotonic() - self._start
        if not self._hidden_seen and self._hidden[self._current]:
            result = self._results[self._current]
            try:
                seen = result.stat()
                if (seen.st_mtime_ns, seen.st_size) != self._seen:
                    began = hidden_began(json.loads(result.read_text()), self._hidden[self._current])
                    self._seen = (seen.st_mtime_ns, seen.st_size)
                    if began:
                        self._hidden_seen = True
                        self._after = time.monotonic() - self._start
            except (OSError, ValueError, UnicodeDecodeError):
                pass  # not written yet (it is replaced whole, by a rename): looked at again
        return self._after
