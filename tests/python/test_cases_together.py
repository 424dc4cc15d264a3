"""Every part's cases in one run on one launcher (grading/stages/cases_together.py):
each part's cases keep the time limit a run of their own gives them, and a
run that proves no part right settles none. What needs a GPU (the parts
proven right) is in tests/python_gpu/test_cases_together_gpu.py."""

import json
import os
import threading
import time
from pathlib import Path

from conftest import ROOT, built_tree
from tilelab.grading.stages.correctness import PartStarts


def _write(path: Path, doc) -> None:
    path.write_text(json.dumps(doc))
    os.utime(path, ns=(time.time_ns(), time.time_ns()))


def test_each_part_and_its_hidden_cases_have_the_time_limit_from_when_they_begin(tmp_path):
    first, second = tmp_path / "naive.json", tmp_path / "tiled.json"
    clock = PartStarts([first, second], [{"h01"}, set()])
    assert clock() == 0.0  # nothing written yet
    _write(first, {"current_case": "w1", "cases": []})
    time.sleep(0.2)
    assert clock() == 0.0  # the first part's public cases: from the run's start
    _write(first, {"current_case": "h01", "cases": [{"name": "w1"}]})
    hidden = clock()
    assert hidden >= 0.2  # its hidden cases: from when they began
    time.sleep(0.2)
    assert clock() == hidden
    second.write_text('{"current_case": "w')  # the next part has begun, its file half written
    began = clock()
    assert began >= hidden + 0.2
    time.sleep(0.1)
    _write(second, {"current_case": None, "cases": [{"name": "w1"}]})
    assert clock() == began  # a part without hidden cases has one start


def test_a_run_settles_the_parts_it_proves_right_and_without_a_gpu_none(tmp_path):
    """Both solutions' parts on one launcher: on a GPU each is proven right
    and settled; without one the first part's run ends at its start
    (no_device), neither is settled, and the second part's cases were never
    begun: their runs of their own say so."""
    from tilelab.grading.context import new_part_state, open_grading
    from tilelab.grading.options import GradeOptions
    from tilelab.grading.runner import exit_codes
    from tilelab.grading.stages.cases_together import correct_together, together_parts
    from tilelab.system.sandbox import Sandbox

    build = built_tree("reference/libtiled.so")
    options = GradeOptions.for_tree(ROOT, build, tmp_path / "out", parts=("naive", "tiled"), questions=False,
                                    sanitizers=False, timing=False)
    g = open_grading(ROOT / "solutions", options, sandbox=Sandbox())
    try:
        parts = [new_part_state(p, g.submission, g.sets) for p in g.parts]
        for s in parts:
            s.binary = build / "reference" / s.part.id
            s.library = build / "reference" / f"lib{s.part.id}.so"
        assert together_parts(g, parts) == parts
        assert together_parts(g, parts[:1]) == []  # one part runs on a launcher of its own
        hangs = threading.Event()
        settled = correct_together(g, parts, exit_codes(g.tools.verify), hangs)
        assert not hangs.is_set()
        log = (tmp_path / "out" / "staff" / "logs" / "cases-together.log").read_text()
        if log.startswith("exit 5 "):  # no_device, from the first part's run
            assert settled == []
            assert all(s.stage("correctness").status == "not_run" for s in parts)
            assert not list(g.work.glob("*tiled*/result.json"))  # the second part was never begun
        else:
            assert log.startswith("exit 0 "), log[:300]
            assert settled == parts
            assert all(s.stage("correctness").status == "passed" for s in parts)
    finally:
        g.close()


def test_a_parts_own_share_of_a_run_is_its_result_and_time_and_nothing_printed():
    from tilelab.grading.runner import HarnessRun
    from tilelab.grading.stages.cases_together import own_share

    first = {"state": "finished", "exit_code": 0, "seconds": 0.42, "cases": []}
    second = {"state": "finished", "exit_code": 12, "cases": []}
    run = HarnessRun(exit_code=12, signal=None, timed_out=False, seconds=3.5, stdout="naive printed this",
                     stderr="tilelab: case w1: kernel fault", stdout_bytes=18, stderr_bytes=30, others=0,
                     result=first, results=[first, second])
    own = own_share(run, first)
    assert (own.exit_code, own.signal, own.timed_out, own.stopped, own.seconds) == (0, None, False, None, 0.42)
    assert (own.output, own.output_bytes) == ("", 0)
    assert own.result is first and own.results == [first]
    assert own_share(run, {"state": "finished", "exit_code": 0, "seconds": "soon"}).seconds == 0.0
