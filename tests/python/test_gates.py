"""The release gates' verdict and the progress of their long steps: what
`tilelab gates` exits with when a gate failed or could not run, and that a
build run for a gate or a bundle says how far it is while it runs."""

import os
import time
from pathlib import Path

import pytest

from tilelab.authoring.compiled_references import cmake_progress, compile_references
from tilelab.authoring.gates import EXIT_FAILED, EXIT_NO_DEVICE, Gate, gates_outcome, run_gates
from tilelab.spec.assignment import load_assignment

ROOT = Path(__file__).resolve().parents[2]
CPU = [Gate("starter", "passed", ""), Gate("student-bundle", "passed", ""), Gate("autograder-bundle", "passed", "")]
NO_GPU = [Gate("solutions", "not_run", "no GPU"), Gate("naive-as-tiled", "not_run", "no GPU")]


def test_cpu_gates_that_pass_exit_zero():
    assert gates_outcome("cpu", CPU) == (0, "all 3 gates passed")


def test_all_without_a_gpu_passes_on_the_cpu_gates_and_says_only_they_ran():
    code, summary = gates_outcome("all", CPU + NO_GPU)
    assert code == 0
    assert summary.startswith("only the CPU gates ran, and passed: 2 GPU gates need a CUDA device")
    assert "solutions, naive-as-tiled" in summary


def test_gpu_gates_asked_for_on_a_machine_without_a_gpu_fail_the_command():
    code, summary = gates_outcome("gpu", NO_GPU)
    assert code == EXIT_NO_DEVICE != 0
    assert "did not run" in summary and "2 GPU gates need a CUDA device" in summary


def test_a_failed_gate_fails_the_command_whatever_else_did_not_run():
    failed = [Gate("starter", "failed", "out of date")] + CPU[1:]
    for which, gates in (("cpu", failed), ("all", failed + NO_GPU), ("gpu", NO_GPU + [Gate("x", "failed", "")])):
        code, summary = gates_outcome(which, gates)
        assert code == EXIT_FAILED and "FAILED" in summary, (which, summary)
    assert "need a CUDA device" in gates_outcome("all", failed + NO_GPU).summary


def test_cmake_progress_passes_on_each_step_begun_and_nothing_else():
    said = []
    line = cmake_progress(said.append, "building")
    for text in ("-- Configuring done",
                 "[  3%] Building CUDA object starter/CMakeFiles/starter_naive_object.dir/naive.cu.o",
                 "[ 35%] Built target tilelab_check",
                 "[40/80] Linking CXX executable bin/tilelab-verify",
                 "nvcc warning : something"):
        line(text)
    assert said == ["building: [  3%] Building CUDA object starter/naive.cu.o",
                    "building: [40/80] Linking CXX executable bin/tilelab-verify"]


def test_a_run_hands_over_each_line_as_it_comes_and_keeps_the_output():
    from tilelab.system import process

    lines, started = [], time.monotonic()
    done = process.run(["bash", "-c", "echo '[ 10%] one'; sleep 2.5; printf '[100%%] two'; exit 3"], 30,
                       on_line=lambda text: lines.append((time.monotonic() - started, text)))
    assert done.exit_code == 3 and not done.timed_out
    (first_at, first), (_, second) = lines
    assert (first, second) == ("[ 10%] one", "[100%] two")  # the last one without its newline too
    assert first_at < 1.5 < done.seconds  # the first line came before the command ended
    assert "[ 10%] one" in done.stdout and "[100%] two" in done.stdout


def test_compile_references_reports_what_it_does(tmp_path):
    """In the tree autograder_bundle keeps by default (built once, then up to date)."""
    assignment = load_assignment(ROOT / "assignment.yaml")
    said = []
    objects = compile_references(ROOT, assignment, ROOT / "build" / "dist" / "reference-objects", progress=said.append)
    assert set(objects) == {p.id for p in assignment.parts}
    assert said[0] == "configuring the reference build (CMake)"
    assert all(m.startswith("compiling the references: [") for m in said[1:]), said


def test_gpu_gates_on_a_machine_without_a_gpu_are_not_run_without_grading_anything(tmp_path):
    build = os.environ.get("TILELAB_BUILD_DIR")
    if not build:
        pytest.skip("skipped: needs a built project (run through ctest, which sets TILELAB_BUILD_DIR)")
    from tilelab.grading import gpu_ceilings as roofline
    from tilelab.system.paths import tool_path

    try:
        roofline.device_info(tool_path(Path(build), roofline.TOOL_NAME), 60)
        pytest.skip("skipped: this machine has a CUDA device (scripts/gpu-suite runs the GPU gates)")
    except roofline.NoDevice:
        pass
    said = []
    started = time.monotonic()
    gates = run_gates(ROOT, Path(build), tmp_path / "gates", which="gpu", progress=said.append)
    assert time.monotonic() - started < 30  # no grading built anything
    assert [g.name for g in gates][:2] == ["solutions", "starter-untouched"]
    assert "naive-as-tiled" in [g.name for g in gates]
    assert all(g.status == "not_run" for g in gates)
    assert gates_outcome("gpu", gates).exit_code == EXIT_NO_DEVICE
    assert said == ["GPU gates: looking for a CUDA device"]
