"""What a person chose for one grading: frozen, and the same for every command."""

from __future__ import annotations

import os
import secrets
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..system.gpu_lock import GpuLock
from ..system.sandbox import Sandbox
from .trusted_harness import TrustedHarness

CHECK_SEED = 20261121  # `check` repeats itself exactly; `grade` draws a fresh seed


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
