"""A part's public and hidden cases in one launcher process
(grading/stages/correctness.py): each set keeps the inputs and the time
limit a run of its own gives it. What needs a GPU (the runs themselves) is
in tests/python_gpu/test_case_sets_gpu.py."""

import json
import os
import time
from pathlib import Path

import pytest
from tilelab.grading.runner import case_seed, write_cases
from tilelab.grading.stages.correctness import PartStarts, hidden_began
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
    clock = PartStarts([result], [{"h01"}])
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


def _correctness_without_gpu(tmp_path: Path, mode: str):
    from conftest import built_tree
    from tilelab.grading.context import new_part_state, open_grading
    from tilelab.grading.options import GradeOptions
    from tilelab.grading.runner import exit_codes
    from tilelab.grading.stages.correctness import run_correctness
    from tilelab.system.sandbox import Sandbox

    build = built_tree("reference/naive")
    options = GradeOptions.for_tree(ROOT, build, tmp_path / "out", parts=("naive",), questions=False, mode=mode,
                                    sanitizers=False, timing=False)
    g = open_grading(ROOT / "solutions", options, sandbox=Sandbox())
    try:
        s = new_part_state(g.parts[0], g.submission, g.sets)
        s.binary = build / "reference" / "naive"
        run_correctness(g, s, exit_codes(g.tools.verify))
    finally:
        g.close()
    return s, {p.stem for p in (tmp_path / "out" / "staff" / "logs").glob("naive-*.log")}


def test_a_run_that_ends_before_the_hidden_cases_begin_is_followed_by_a_run_of_theirs(tmp_path):
    # The real harness on a machine without a GPU: every run ends at its start (no_device), so the run of
    # both sets ends before any hidden case begins, and the hidden cases get a run of their own.
    s, logs = _correctness_without_gpu(tmp_path, "grade")
    if s.stage("correctness").status == "passed":
        pytest.skip("skipped: a CUDA device is here (tests/python_gpu/test_case_sets_gpu.py runs on it)")
    assert logs == {"naive-cases", "naive-hidden"}
    names = [c.name for c in s.result.cases]
    assert len(names) == len(set(names)) == 23  # 11 public, 12 hidden (assignment.yaml), each once
    assert [c.set for c in s.result.cases] == ["public"] * 11 + ["hidden"] * 12
    assert all(not c.ran and c.reasons == ["not run: the harness stopped before this case"] for c in s.result.cases)
    assert "no_device" in s.stage("correctness").details  # what the run printed, none of it in a hidden case


def test_a_check_runs_its_public_cases_alone(tmp_path):
    s, logs = _correctness_without_gpu(tmp_path, "check")
    if s.stage("correctness").status == "passed":
        pytest.skip("skipped: a CUDA device is here (tests/python_gpu/test_case_sets_gpu.py runs on it)")
    assert logs == {"naive-public"} and {c.set for c in s.result.cases} == {"public"}
