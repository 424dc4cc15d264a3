"""What the batch tests share: the gradebook's columns, a class made of the
test hand-ins, and one batch run of it."""

import csv
import shutil
from pathlib import Path

from tilelab.operations.batch import run_batch
from tilelab.spec.assignment import load_assignment
from tilelab.system.sandbox import Sandbox
from conftest import built_tree

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"
# One column per part of assignment.yaml, in its order.
PART_IDS = [p.id for p in load_assignment(ROOT / "assignment.yaml").parts]
# The columns courses' spreadsheets read, in their order; each part's state comes after them.
FIRST_COLUMNS = ["student", "total", "max", *PART_IDS, "questions", "seed", "status", "seconds", "gpu",
                 "full-credit targets (GFLOP/s)", "answers problem"]
HEADER = FIRST_COLUMNS + [f"{p} state" for p in PART_IDS]


def build_dir() -> Path:
    return built_tree()


def grade_class(class_dir: Path, out: Path, sandbox: Sandbox = Sandbox(), **options) -> tuple:
    """(summary, progress lines) of one batch run."""
    lines = []
    # Sandbox(): grade as this process's user. The class and its results live
    # in pytest's private temp dir, and what is tested here is the batch, not
    # the sandbox user's permissions (the sandbox is tested elsewhere).
    summary = run_batch(class_dir, root=ROOT, build_dir=build_dir(), out_dir=out, sandbox=sandbox, live=False,
                        log=lines.append, **options)
    return summary, lines


def student(class_dir: Path, name: str, *sources: Path) -> Path:
    """A hand-in as a student hands it in: the files only, no expected.yaml."""
    d = class_dir / name
    d.mkdir(parents=True)
    for src in sources:
        for f in ([src] if src.is_file() else sorted(src.iterdir())):
            if f.name != "expected.yaml":
                shutil.copy(f, d / f.name)
    return d


def read_book(out: Path) -> list:
    with (out / "gradebook.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == HEADER
    return [dict(zip(HEADER, r)) for r in rows[1:]]


# A CPU node, even on a machine with a GPU: the GPU probe of a grading sees none.
NO_GPU = Sandbox(extra_env={"CUDA_VISIBLE_DEVICES": "-1"})
