"""Running one part: write a case file, run its harness, judge the result.

The part's executable (untrusted: it links a student's part file) runs
through `process.run`, with its own process group, a time limit and bounded
output. For correctness and timing it serves only the launcher, to
tilelab-harness, which links no student code; the verdict comes from
`tilelab-verify`: Python never parses the harness's human-readable output.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from ..system import process
from . import traffic

if TYPE_CHECKING:
    import threading

    from ..system.sandbox import Sandbox
    from .trusted_harness import TrustedHarness
from ..spec.assignment import Case, Part


# Added to the environment of every run of a part's executable, and of the
# trusted services: one hardware work queue per CUDA context. A context
# makes its work queues (8 by default) as it starts, and contexts start one
# at a time on a GPU, so one queue makes every start cheaper, most of all
# when many runs start at once (measured: docs/measurements-archive.md,
# "Fast feedback: CUDA contexts made cheaper and earlier"). The contract has
# a part launch on the default stream, one stream, whose kernels run the
# same on one queue: only kernels overlapped across several streams would
# run differently.
ONE_WORK_QUEUE = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


@dataclass
class HarnessRun(process.Completed):
    result: Optional[dict] = None  # the harness's result JSON, if it wrote a readable one
    # Of a run of several case files on one launcher (run_harness), each file's result, in order.
    results: list = dataclasses.field(default_factory=list)


def case_entry(name: str, case: Case, part: Part, seed: int, workdir: Path, timing: Optional[dict],
               give_up_ms: Optional[float] = None, output: bool = True) -> dict:
    """One case of a case file (schema: grader/harness/core/case_file.h); a
    timing case with `give_up_ms` is timed only while its calls could earn
    speed points (scoring.give_up_ms). A case without timing writes its
    product for the verifier, unless `output` is off (its counters alone are read)."""
    entry = {
        "name": name,
        "j": case.j,
        "k": case.k,
        "l": case.l,
        "inputs": {"seed": seed, "distribution": case.distribution},
        "tolerance": {"sqrt_k_factor": part.tolerance["sqrt_k_factor"]},
    }
    if case.props:
        entry["props"] = dict(case.props)
    if timing is None:
        if output:
            entry["output"] = str(workdir / f"{name}.P.f32")
    else:
        entry["timing"] = dict(timing, seed=seed ^ 0x5EED)
        if give_up_ms:
            entry["timing"]["give_up_ms"] = round(give_up_ms, 3)
    return entry


def case_seed(seed: int, index: int) -> int:
    """A distinct input seed per case of a run; the run's seed decides them all."""
    return (seed * 1_000_003 + index * 7919 + 1) & 0xFFFFFFFFFFFF


def write_cases(
    part: Part,
    entries: list,
    workdir: Path,
    seed: int,
    timing: Optional[dict] = None,
    record_launches: bool = True,
    harness_id: Optional[str] = None,
    profile: bool = False,
    profile_shared_memory: bool = True,
    give_up_ms: Optional[dict] = None,
    gate: Optional[Path] = None,
    counter_availability: Optional[str] = None,
    output: bool = True,
    seeds: Optional[list] = None,
) -> Path:
    """Writes a case file for `entries`, a list of (name in the file, Case).
    `seeds`: each entry's input seed, where the entries come from case files
    of their own (default: case_seed(seed, i) for the i-th).
    The harness refuses a case file for another part than its own; one that
    runs the part's cases under another name (the cuBLAS baseline) is named
    by `harness_id`. With `profile`, the last case also reads the hardware
    counters of its calls (traffic.py), before the warm-up of its timing
    (grader/harness/core/timing.h), or after it with the other parts of a
    run of several (profiles_together.h); without `profile_shared_memory`, a call
    far over its budget has no shared-memory counters read.
    `give_up_ms`: the time budget of a timing case's call, by its name in
    the file (none for a case it does not name). `gate`: where the trusted
    harness waits for the GPU alone before its timed calls (gpu_turn.py);
    `counter_availability`: the GPU's image (hex), with which the counters'
    setup is made before the gate (counter_availability.py). Without
    `output`, cases without timing write no product (case_entry)."""
    workdir.mkdir(parents=True, exist_ok=True)
    budgets = give_up_ms or {}
    seeds = seeds if seeds is not None else [case_seed(seed, i) for i in range(len(entries))]
    cases = [case_entry(name, case, part, input_seed, workdir, timing, budgets.get(name), output)
             for (name, case), input_seed in zip(entries, seeds)]
    if profile and cases:
        cases[-1]["profile"] = traffic.profile_entry(profile_shared_memory)
    doc = {"version": 1, "part": harness_id or part.id, "result": str(workdir / "result.json"),
           "record_launches": record_launches, "cases": cases}
    if gate is not None:
        doc["gate"] = str(gate)
    if profile and counter_availability:
        doc["counter_availability"] = counter_availability
    path = workdir / "cases.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


def run_harness(binary: Path, case_file: "Path | list", timeout_s: float, sandbox: "Sandbox",
                wrapper: Sequence = (), cancel: Optional["threading.Event"] = None,
                trusted: Optional["TrustedHarness"] = None, timed: bool = False,
                paused: Optional[Callable[[], float]] = None, launcher: Sequence = ()) -> HarnessRun:
    """Runs a part's harness on a case file, or with `trusted` on several in
    turn, each in a folder of its own, on one launcher that serves their
    parts (`launcher`: tilelab-part-host --parts and their shared objects);
    the run's folder is the first's.

    With `trusted` (trusted_harness.py), tilelab-harness runs the cases and
    the part's executable serves only its launcher, in the sandbox, in a
    folder of its own ("launcher", below the case file's): the case file,
    the result and the outputs stay in the case file's folder, where the
    sandbox user cannot write (docs/security.md). Without it the part's
    executable runs the cases itself, in the sandbox, in the case file's
    folder; `wrapper` prefixes its command (compute-sanitizer). Either way
    the sandbox's folder is watched for its disk quota and taken back before
    the results are read. The part's executable runs with ONE_WORK_QUEUE;
    a run that is not `timed` runs in the background (process.run).
    `paused`: the time it has waited at its GPU turn, or for its part to be
    built, not held against `timeout_s` (gpu_turn.py, early_runs.py).
    `launcher`: the command that serves the part instead of its executable
    (tilelab-part-host --wait and the part's shared object)."""
    case_files = list(case_file) if isinstance(case_file, (list, tuple)) else [case_file]
    if trusted is None and len(case_files) != 1:
        raise ValueError("several case files run on the trusted harness only")
    work = case_files[0].parent
    result_paths = [f.parent / "result.json" for f in case_files]
    for result_path in result_paths:
        if result_path.exists():
            result_path.unlink()
    part = list(launcher) or [binary]
    if trusted is None:
        run_dir, command = work, [*wrapper, *part, case_files[0]]
    else:
        run_dir, command = work / "launcher", [*wrapper, *part]
    sandbox.own(run_dir)
    if trusted is not None and sandbox.switches_user:
        for f in case_files:
            f.parent.chmod(0o711)  # the launcher passes through to its folder, and can list nothing here
            f.chmod(0o600)
    if trusted is None:
        done = _run_sandboxed(command, run_dir, timeout_s, sandbox, cancel=cancel, background=not timed)
    else:
        with trusted.prefix(case_files) as lease:
            done = _run_sandboxed(command, run_dir, timeout_s, sandbox, cancel=cancel, outside=lease.outside,
                                  background=not timed, paused=paused)
            lease.ended(done)
    sandbox.reclaim(run_dir)
    results = [read_result(path) for path in result_paths]
    return HarnessRun(**dataclasses.asdict(done), result=results[0], results=results)


def run_parts_together(host: Path, parts: list, run_dir: Path, timeout_s: float, sandbox: "Sandbox",
                       wrapper: Sequence = (), cancel: Optional["threading.Event"] = None) -> process.Completed:
    """One run of several parts' case files in one process, in turn
    (`tilelab-part-host --each`; `parts`: each part's shared object and case
    file, the case files in folders below `run_dir`), in the sandbox, in
    the background, `wrapper` before it (compute-sanitizer). Each part's
    result is its case file's, read with read_result."""
    sandbox.own(run_dir)
    command = [*wrapper, host, "--each", *(str(path) for pair in parts for path in pair)]
    done = _run_sandboxed(command, run_dir, timeout_s, sandbox, cancel=cancel, background=True)
    sandbox.reclaim(run_dir)
    return done


def read_result(path: Path) -> Optional[dict]:
    """A harness result file, or None where there is none or it is no JSON
    object: written by the process that runs student code, it may be anything."""
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return result if isinstance(result, dict) else None


def ended_well(result: Optional[dict]) -> bool:
    """Whether a case file's result says its run finished with exit 0 (its
    cases may still have failed): the result is whole. The trusted harness
    writes it, and in a run of several case files, one for each."""
    return isinstance(result, dict) and result.get("state") == "finished" and result.get("exit_code") == 0


def result_seconds(result: Optional[dict]) -> float:
    """A case file's own share of a run of several, as its result says (0 where it says none)."""
    seconds = result.get("seconds") if isinstance(result, dict) else None
    return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else 0.0


def _run_sandboxed(command: list, run_dir: Path, timeout_s: float, sandbox: "Sandbox", **how) -> process.Completed:
    """A run of a part's code in the sandbox, in `run_dir`, watched for its
    disk quota, with one work queue (ONE_WORK_QUEUE)."""
    env = {**sandbox.env(run_dir), **ONE_WORK_QUEUE}
    return process.run(command, timeout_s, cwd=run_dir, env=env, sandbox=sandbox, watch_dir=run_dir, **how)


# Exit codes (include/tilelab/exit_codes.h) that a part's own code accounts
# for: ok (cases failing or not), no kernel, launch error, kernel fault, early
# exit, TODO stub. Any other ending (a crash, a signal, CUDA or CUPTI failing
# to start, the process not starting at all) may come from what ran beside
# it: runs of one sandbox user share its process limit, so a fork bomb in one
# part starves the others.
OWN_EXITS = frozenset({0, 10, 11, 12, 14, 15})


def may_be_disturbed(run: process.Completed, own_exits: frozenset = OWN_EXITS) -> bool:
    """Whether a run may have ended as it did because of other runs at the
    same time, so that running it again alone could end otherwise. A time
    limit or a called-off run is not (a hang hangs again)."""
    if run.timed_out or run.stopped == process.CANCELLED:
        return False
    return run.stopped is not None or run.exit_code not in own_exits


def verify(verify_binary: Path, case_file: Path) -> dict:
    """The trusted verdict on the last harness run in the case file's directory."""
    workdir = case_file.parent
    verdict_path = workdir / "verdict.json"
    proc = subprocess.run(
        [str(verify_binary), str(case_file), str(workdir / "result.json"), str(verdict_path)],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"tilelab-verify failed ({proc.returncode}): {proc.stderr.strip()}")
    return json.loads(verdict_path.read_text())


def exit_codes(verify_binary: Path) -> dict:
    """The harness exit-code table, read from the trusted verifier binary."""
    proc = subprocess.run([str(verify_binary), "--exit-codes"], capture_output=True, text=True, check=True)
    return {row["code"]: row for row in json.loads(proc.stdout)}
