"""What a person chose for one grading, frozen: every command states its
choices here, and what the run discovers lives in context.Grading."""

from __future__ import annotations

import dataclasses
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

CHECK_SEED = 20261121  # `check` repeats itself exactly; `grade` draws a fresh seed
MODES = ("grade", "check")
# Each timed part's hardware counters (traffic.py), which change no points: read with the GPU alone
# just before its timed calls ("inline"); left for a turn of the GPU of their own once no grading
# waits for it, after which the outputs are written again ("later": grading/counters_later.py); or
# not read at all ("off").
COUNTERS = ("inline", "later", "off")


def fresh_seed() -> int:
    """A new input seed for an autograder grading."""
    return secrets.randbits(40)


def build_jobs_each(gradings: int) -> int:
    """Compiler jobs each of `gradings` side-by-side gradings gets: a share of the CPUs."""
    return max(1, (os.cpu_count() or 2) // gradings)


@dataclass(frozen=True)
class GradeOptions:
    root: Path
    build_dir: Path  # a configured and built tree of this project (harness libraries, tools)
    out_dir: Path
    mode: str = "grade"  # "grade": public and hidden cases, a fresh seed; "check": public cases, CHECK_SEED
    seed: Optional[int] = None  # None: the mode's seed
    parts: tuple = ()  # part ids to grade (default: all)
    questions: bool = True  # grade answers.yaml too (off where a command checks some parts only)
    answers_only: bool = False  # grade answers.yaml and no part
    sanitizers: bool = True
    timing: bool = True
    counters: str = "inline"  # COUNTERS: when each timed part's hardware counters are read
    jobs: int = field(default_factory=lambda: build_jobs_each(1))  # compiler jobs of this grading
    answer_key: Optional[Path] = None  # default: the first of ANSWER_KEY_PLACES under root that exists
    # A check on the student's own GPU: each part's runs begin while it compiles (stages/early_runs.py).
    # Off where gradings share the GPU (a worker, a batch): a run begun early holds the GPU shared
    # through its part's build, and would hold off their timing turns that long.
    early_runs: bool = False

    @classmethod
    def for_tree(cls, root: Path, build_dir: Path, out_dir: Path, **choices) -> "GradeOptions":
        """The one way options are made: the tree's paths resolved (sandboxed
        runs start elsewhere), the choices checked."""
        made = cls(root=Path(root).resolve(), build_dir=Path(build_dir).resolve(), out_dir=Path(out_dir), **choices)
        if made.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {made.mode!r}")
        if made.counters not in COUNTERS:
            raise ValueError(f"counters must be one of {COUNTERS}, not {made.counters!r}")
        return made

    def replace(self, **changes) -> "GradeOptions":
        """These options with some choices changed (a field's name, checked)."""
        return dataclasses.replace(self, **changes)

    def draw_seed(self) -> int:
        """The seed of a grading's inputs: the chosen one, else the mode's
        (a fresh one each call in grade mode)."""
        if self.seed is not None:
            return self.seed
        return CHECK_SEED if self.mode == "check" else fresh_seed()

    @property
    def case_sets(self) -> tuple:
        return ("public", "hidden") if self.mode == "grade" else ("public",)
