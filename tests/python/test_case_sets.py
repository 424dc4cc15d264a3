"""A part's public and hidden cases in one launcher process
(grading/stages/correctness.py): each set keeps the inputs and the time
limit a run of its own gives it. What needs a GPU (the runs themselves) is
in tests/python_gpu/test_case_sets_gpu.py."""

import json
import os
import time
from pathlib import Path

from tilelab.grading.runner import case_seed, write_cases
from tilelab.grading.stages.correctness import HiddenStart, hidden_began
from tilelab.spec.assignment import load_assignment

ROOT = Path(__file__).resolve().parents[2]


def test_cases_of_two_sets_in_one_file_keep_the_inputs_of_their_own_files(tmp_path):
    naive = load_assignment(ROOT / "assignment.yaml").part("naive")
    public, hidden = naive.cases["public"], naive.cases["hidden"]
    alone = json.loads(write_cases(naive, [(f"h{i}", c) for i, c in enumerate(hidden)], tmp_path / "hidden",
                                   107).read_text())
    seeds = [case_seed(100, i) for i in range(len(public))] + [case_seed(107, i) for i in range(len(hidden))]
    both = json.loads(write_cases(naive, [(c.name, c) for c in public] + [(f"h{i}", c) for i, c in enumerate(hidden)],
                                  tmp_path / "both", 100, seeds=seeds).read_text())
    assert [c["inputs"] for c in both["cases"][len(public):]] == [c["inputs"] for c in alone["cases"]]
    assert len({c["inputs"]["seed"] for c in both["cases"]}) == len(public) + len(hidden)


def test_a_result_shows_a_hidden_case_begun_by_its_current_case_or_its_cases():
    hidden = {"h01", "h02"}
    assert not hidden_began({"current_case": "w1", "cases": [{"name": "w1"}]}, hidden)
    assert hidden_began({"current_case": "h01", "cases": [{"name": "w1"}]}, hidden)
    assert hidden_began({"current_case": None, "cases": [{"name": "w1"}, {"name": "h02"}]}, hidden)
    for written in (None, [], "h01", {"current_case": ["h01"], "cases": "h01"}, {"cases": [None, 3]}):
        assert not hidden_began(written, hidden)  # anything else a file may hold


def _write(path: Path, doc) -> None:
    path.write_text(json.dumps(doc))
    os.utime(path, ns=(time.time_ns(), time.time_ns()))


def test_the_hidden_cases_time_limit_runs_from_when_the_first_of_them_begins(tmp_path):
    result = tmp_path / "result.json"
    clock = HiddenStart(result, {"h01"})
    assert clock() == 0.0  # no result written yet
    result.write_text('{"current_case": "h0')  # being written
    assert clock() == 0.0
    _write(result, {"current_case": "w1", "cases": []})
    assert clock() == 0.0
    time.sleep(0.3)
    _write(result, {"current_case": "h01", "cases": [{"name": "w1"}]})
    began = clock()
    assert began >= 0.3  # the public cases' time, given back to the hidden ones
    time.sleep(0.1)
    _write(result, {"current_case": None, "cases": [{"name": "w1"}, {"name": "h01"}]})
    assert clock() == began  # fixed once they began
