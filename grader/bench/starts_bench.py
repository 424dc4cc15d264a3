"""`scripts/bench --starts N`: N CUDA processes started at once, all on one GPU,
then spread over every GPU, and the time until the last has ended.

Each is a run a grading makes: the naive reference part's executable on its
1x1 case, with one hardware work queue (runner.ONE_WORK_QUEUE). A grading
starts about 35 such processes, and CUDA makes their contexts one at a time
on a host: whether a second GPU lets them start side by side is what decides
how far a host of N GPUs can grade N times as many hand-ins
(docs/measurements.md, "A deadline's load on one host of two GPUs").
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tilelab.errors import TilelabError
from tilelab.grading.runner import ONE_WORK_QUEUE

from .grading_bench import smallest_run

# A run that starts, makes its context and ends takes well under a second alone.
LIMIT_S = 120


@dataclass
class Starts:
    placement: str  # "one GPU" or "N GPUs"
    processes: int
    seconds: list  # each round's wall, until the last process ended

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def run_starts(root: Path, build: Path, out: Path, count: int, gpus: list, rounds: int,
               log: Callable[[str], None]) -> list:
    """`count` runs at once on gpus[0], then spread over all of `gpus` (where there are two or more), each
    `rounds` times in turn; TilelabError where a run fails or the reference part is not built."""
    if not gpus:
        raise TilelabError("no GPU to start CUDA processes on (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES "
                           "hides them)")
    runs = [smallest_run(root, build, out / "starts" / str(i)) for i in range(count)]
    binary, files = runs[0][0], [case_file for _, case_file in runs]
    if not binary.is_file():
        raise TilelabError(f"{binary} is not built: build the tree first")
    placements = [("one GPU", gpus[:1])] + ([(f"{len(gpus)} GPUs", gpus)] if len(gpus) > 1 else [])
    found = [Starts(name, count, []) for name, _ in placements]
    for r in range(rounds):
        for starts, (name, on) in zip(found, placements):
            seconds = _at_once(binary, files, on)
            starts.seconds.append(round(seconds, 3))
            log(f"bench: {count} CUDA processes at once on {name}, round {r + 1}: {seconds:.2f} s")
    return found


def run_env(gpu: str) -> dict:
    """The environment of a run started on `gpu`: one work queue, as a grading's runs have."""
    return {**os.environ, **ONE_WORK_QUEUE, "CUDA_VISIBLE_DEVICES": gpu}


def _at_once(binary: Path, files: list, gpus: list) -> float:
    clock = time.monotonic()
    runs = [subprocess.Popen([str(binary), str(f)], env=run_env(gpus[i % len(gpus)]),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for i, f in enumerate(files)]
    failed = []
    for run in runs:
        try:
            _, err = run.communicate(timeout=max(1.0, LIMIT_S - (time.monotonic() - clock)))
        except subprocess.TimeoutExpired:
            run.kill()
            _, err = run.communicate()
            failed.append(f"still running after {LIMIT_S} s")
            continue
        if run.returncode != 0:
            failed.append(f"exit {run.returncode}: {err.decode(errors='replace').strip()[-200:]}")
    seconds = time.monotonic() - clock
    if failed:
        raise TilelabError(f"{len(failed)} of {len(runs)} runs of {binary.name} failed: {failed[0]}")
    return seconds


def format_starts(found: list) -> str:
    lines = ["CUDA processes started at once (the naive reference on its 1x1 case, one work queue each), until "
             "the last ended:"]
    for s in found:
        each = ", ".join(f"{v:.2f}" for v in s.seconds)
        lines.append(f"- {s.processes} on {s.placement}: median {s.median:.2f} s ({each}); "
                     f"{s.median / s.processes * 1e3:.0f} ms a process")
    if len(found) > 1:
        lines.append(f"{found[1].placement} start them in {found[1].median / found[0].median:.2f} x the time of "
                     "one GPU (1.00: no faster; 0.50: side by side)")
    return "\n".join(lines)
