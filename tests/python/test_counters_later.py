"""Counters left for later (GradeOptions.counters "later"): the grading's
outputs are written again once they are read, none left pending; where no
GPU can be had then, the report says so instead of promising them still.
(On a GPU: tests/python_gpu/test_counters_gpu.py.)"""

import hashlib
import json
from pathlib import Path

import pytest

from tilelab.grading.counters_later import CHANGED, NO_GPU_LATER, NOT_READ
from tilelab.grading.model import GradeResult
from tilelab.grading.options import GradeOptions
from tilelab.grading.stages.speed import COUNTERS_LATER
from tilelab.operations.grading_run import (EXIT_GRADED, counters_not_read, counters_pending, read_counters_later,
                                           run_grading)
from tilelab.system.sandbox import Sandbox
from conftest import built_tree


def _graded_with_counters_pending(root: Path, submission: Path, out: Path) -> GradeOptions:
    """A grading of naive whose grade.json says its counters are to come, as
    one on a GPU with counters "later" writes it (here no part is timed)."""
    options = GradeOptions.for_tree(root, built_tree(), out, parts=("naive",), counters="later")
    assert run_grading(submission, options, echo=lambda m: None, sandbox=Sandbox()).code == EXIT_GRADED
    doc = json.loads((out / "grade.json").read_text())
    assert not counters_pending(out)
    (naive,) = doc["parts"]
    timed = hashlib.sha256((submission / "naive.cu").read_bytes()).hexdigest()
    naive.update(counters_later=timed, traffic_note=COUNTERS_LATER)
    (out / "grade.json").write_text(json.dumps(doc))
    assert counters_pending(out) and [p.id for p in GradeResult.from_dict(doc).parts if p.counters_later] == ["naive"]
    return options


def test_counters_read_later_without_a_gpu_say_so_and_are_no_longer_pending(root, tmp_path):
    out = tmp_path / "out"
    options = _graded_with_counters_pending(root, root / "solutions", out)
    before = json.loads((out / "grade.json").read_text())
    assert read_counters_later(root / "solutions", options, sandbox=Sandbox()) == ["naive"]
    after = json.loads((out / "grade.json").read_text())
    (naive,) = after["parts"]
    assert (naive["counters_later"], naive["traffic_note"], naive["traffic"]) == ("", NO_GPU_LATER, None)
    assert not counters_pending(out)
    # The same grading otherwise: its score, seed and stages.
    assert (after["score"], after["seed"]) == (before["score"], before["seed"])
    assert naive["stages"] == before["parts"][0]["stages"]
    assert NO_GPU_LATER in (out / "report.md").read_text() and COUNTERS_LATER not in (out / "report.md").read_text()
    assert read_counters_later(root / "solutions", options, sandbox=Sandbox()) == []  # nothing left to read


def test_counters_are_read_of_the_code_graded_or_not_at_all(root, tmp_path):
    hand_in, out = tmp_path / "hand-in", tmp_path / "out"
    hand_in.mkdir()
    (hand_in / "naive.cu").write_text((root / "solutions" / "naive.cu").read_text())
    options = _graded_with_counters_pending(root, hand_in, out)
    (hand_in / "naive.cu").write_text((root / "solutions" / "naive.cu").read_text() + "// edited since\n")
    assert read_counters_later(hand_in, options, sandbox=Sandbox()) == []
    (naive,) = json.loads((out / "grade.json").read_text())["parts"]
    assert (naive["counters_later"], naive["traffic_note"]) == ("", CHANGED)
    assert not counters_pending(out) and CHANGED in (out / "report.md").read_text()


def test_a_grading_says_when_its_counters_are_asked_for_in_words_it_knows():
    with pytest.raises(ValueError, match="counters must be one of"):
        GradeOptions.for_tree(Path("."), Path("."), Path("out"), counters="sometimes")


def test_counters_that_cannot_be_read_are_no_longer_promised(root, tmp_path):
    """What a batch or the service's task does where reading them failed: every output says so, the score stays."""
    out = tmp_path / "out"
    options = _graded_with_counters_pending(root, root / "solutions", out)
    before = json.loads((out / "grade.json").read_text())
    assert counters_not_read(options) == ["naive"]
    after = json.loads((out / "grade.json").read_text())
    (naive,) = after["parts"]
    assert (naive["counters_later"], naive["traffic_note"]) == ("", NOT_READ)
    assert not counters_pending(out) and after["score"] == before["score"]
    for written in ("report.md", "results.json"):
        assert COUNTERS_LATER not in (out / written).read_text()
    assert NOT_READ in (out / "report.md").read_text()
    assert counters_not_read(options) == []
