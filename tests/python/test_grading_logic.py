"""Pure grading logic with real values: scoring, static checks, diagnosis
and the self-test's judge. The launch checks: test_launch_checks.py; the
GPU lock: test_gpu_lock.py; the process runner: test_process_run.py."""


import pytest
from grade_fixtures import failing_boundary, passing_tiled

from tilelab.grading.diagnose import case_hints
from tilelab.grading.model import CaseResult
from tilelab.grading.gpu_ceilings import Ceilings
from tilelab.grading.scoring import SpeedTarget, scoring_time, reference_target
from tilelab.grading.static_checks import check_source, kernel_names, strip_comments_and_strings
from tilelab.selftest.handins import Expectation, SelftestError, judge, load_hand_ins
from tilelab.spec.assignment import SpeedRule, load_assignment
from tilelab.spec.matmul import compulsory_bytes, intensity
from tilelab.system import process


@pytest.fixture
def parts(root):
    return {p.id: p for p in load_assignment(root / "assignment.yaml").parts}


# --- scoring ---------------------------------------------------------------

def test_intensity_of_the_timing_sizes():
    assert compulsory_bytes(4096, 4096, 4096) == 3 * 4 * 4096 * 4096
    assert intensity(4096, 4096, 4096) == pytest.approx(682.67, abs=0.01)
    assert intensity(2048, 4096, 8192) == pytest.approx(2 * 2048 * 4096 * 8192 / (4 * (2048 * 4096 + 4096 * 8192 + 2048 * 8192)))


def test_speed_fraction_is_linear_between_zero_and_target():
    # H100 figures (docs/measurements-archive.md): tiled reference 9191 GFLOP/s; full credit at 0.8 of it, none at 0.5.
    target = SpeedTarget(intensity=682.67, bound=65094.0, reference=9191.0, full=0.8 * 9191, zero=0.5 * 9191)
    assert target.fraction(9191) == 1.0
    assert target.fraction(5352) == pytest.approx((5352 - 4595.5) / (7352.8 - 4595.5))  # naive as tiled
    assert target.fraction(4000) == 0.0


def test_speed_target_is_a_share_of_the_reference_and_keeps_the_roofline():
    # Ceilings measured on the H100: 65094 GFLOP/s FP32, 3040 GB/s DRAM (ridge ~21 FLOP/byte).
    h100 = Ceilings(device_name="H100", device_uuid="", fp32_gflops=65094.0, dram_gbps=3040.0,
                    measured_at="2026-11-21T00:00:00Z", raw={})
    rule = SpeedRule(full_at=0.8, zero_at=0.5, runs=3)
    square = reference_target(h100, 4096, 4096, 4096, 9191.0, rule)  # compute-bound
    assert square.bound == 65094.0 and square.reference == 9191.0
    assert square.full == pytest.approx(7352.8) and square.zero == pytest.approx(4595.5)
    skinny = reference_target(h100, 4096, 1, 4096, 100.0, rule)  # k = 1: ~0.5 FLOP/byte, bandwidth-bound
    assert skinny.intensity == pytest.approx(intensity(4096, 1, 4096))
    assert skinny.bound == pytest.approx(skinny.intensity * 3040.0)
    assert skinny.full == pytest.approx(80.0) and skinny.zero == pytest.approx(50.0)
    with pytest.raises(ValueError, match="positive"):
        reference_target(h100, 4096, 4096, 4096, 0.0, rule)


def test_a_trusted_clock_is_scored_as_it_is():
    """tilelab-harness timing the tiled reference at 4096 with its launcher in
    a child (tests/bench/process_split_bench.cu, H100, 2026-11-23): 14.952 ms
    against 14.946 ms of events in-process. The child's kernel span cannot
    shorten it, and one longer than the trusted clock is flagged."""
    from tilelab.grading.scoring import scored_time
    trusted = {"clock": "trusted", "median_wall_ms": 14.952, "median_event_ms": 7.0, "median_cupti_span_ms": 14.940}
    assert (scored_time(trusted).ms, scored_time(trusted).flags) == (14.952, [])
    forged = dict(trusted, median_cupti_span_ms=20.0)
    assert scored_time(forged).ms == 14.952 and "cannot be right" in scored_time(forged).flags[0]
    in_process = {"median_event_ms": 14.951, "median_cupti_span_ms": 14.944, "median_wall_ms": 14.960}
    assert scored_time(in_process).ms == 14.951  # the harness's own tests: events, as before


def test_scoring_time_prefers_the_longest_honest_clock():
    honest = scoring_time(14.951, 14.944, 14.960)
    assert honest.ms == 14.951 and honest.flags == []
    side_stream = scoring_time(0.84, 0.80, 53.8)  # work hidden on another stream: 64x under-report
    assert side_stream.ms == 53.8 and "another stream" in side_stream.flags[0]
    late = scoring_time(10.0, 12.0, 12.1)
    assert late.ms == 12.0 and "kernel span" in late.flags[0]


# --- static checks -----------------------------------------------------------

def test_stripping_keeps_code_and_drops_comments_and_strings():
    code = strip_comments_and_strings('int a; // cublasSgemm\n/* cudnn */ f("cublas"); char c = \'"\';\n')
    assert "cublas" not in code and "cudnn" not in code
    assert "int a;" in code and code.count("\n") == 2


def test_kernel_names_handles_templates_and_launch_bounds():
    src = "template <int T> __global__ void __launch_bounds__(256) tiles(float* p) {}\n__global__ void plain() {}"
    assert kernel_names(src) == {"tiles", "plain"}


@pytest.mark.parametrize("source, message", [
    ('#include <cublas_v2.h>\nvoid launchNaive(const float*, const float*, float*, int) {}', "cublas"),
    ('__global__ void k(){}\nvoid launchNaive(const float*, const float*, float*, int) { dlopen("x", 0); }', "dlopen"),
    ('__global__ void k(){}\nint main() { return 0; }\nvoid launchNaive(const float*, const float*, float*, int) {}', "main()"),
    ('__global__ void k(){}\ncudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) { *ms = 1; return cudaSuccess; }\n'
     'void launchNaive(const float*, const float*, float*, int) {}', "cudaEventElapsedTime"),
    ('__global__ void k(){}\nvoid launchNaivety() {}', "does not define launchNaive"),
    ('void launchNaive(const float*, const float*, float*, int) {}', "no __global__ kernel"),
])
def test_static_checks_reject(tmp_path, parts, source, message):
    path = tmp_path / "naive.cu"
    path.write_text(source)
    found = check_source(path, parts["naive"])
    assert not found.ok and message in found.summary + found.details


def test_static_checks_accept_mentions_in_comments_and_calls_of_cuda(tmp_path, parts):
    path = tmp_path / "naive.cu"
    path.write_text('// unlike cublasSgemm, we write our own\n__global__ void k() {}\n'
                    'void launchNaive(const float*, const float*, float*, int) {\n'
                    '  if (cudaGetLastError() != cudaSuccess) { return; }\n  k<<<1, 1>>>();\n}\n')
    assert check_source(path, parts["naive"]).ok


def test_static_checks_on_files_that_are_not_sources(tmp_path, parts):
    p = parts["naive"]
    assert "missing" in check_source(tmp_path / "naive.cu", p).summary
    (tmp_path / "naive.cu").write_bytes(b"\x7fELF\x00\x01")
    assert "binary" in check_source(tmp_path / "naive.cu", p).summary
    (tmp_path / "naive.cu").unlink()
    (tmp_path / "elsewhere.cu").write_text("x")
    (tmp_path / "naive.cu").symlink_to(tmp_path / "elsewhere.cu")
    assert "symbolic link" in check_source(tmp_path / "naive.cu", p).summary


# --- diagnosis -------------------------------------------------------------------

def test_hints_name_the_boundary_mistake():
    cases = [CaseResult("w32", "public", 32, 32, 32, True), CaseResult("w64", "public", 64, 64, 64, True),
             CaseResult("w17", "public", 17, 17, 17, False, wrong=20),
             CaseResult("w33", "public", 33, 33, 33, False, unwritten=33)]
    hints = case_hints(cases)
    assert any("not a multiple of 32" in h for h in hints)
    assert any("never written" in h for h in hints)


def test_a_naive_part_failing_off_its_block_size_is_told_about_its_grid_not_tiles():
    # A naive kernel with 16 x 16 blocks and a grid of Width / 16 blocks (the
    # naive-ceil-int-division hand-in): the public sizes that are not a
    # multiple of 16 lose their last rows and columns.
    cases = [CaseResult(f"w{w}", "public", w, w, w, w % 16 == 0, unwritten=0 if w % 16 == 0 else 2 * w - 1)
             for w in (1, 2, 3, 15, 16, 17, 31, 32, 33, 100)]
    naive = case_hints(cases, tiled=False)
    assert any("not a multiple of 16 fail: the grid must cover every element of P" in h for h in naive)
    assert not any("tile" in h for h in naive)
    tiled = case_hints(cases, tiled=True)
    assert any("not a multiple of 16 fail: check the boundary handling" in h and "tile" in h for h in tiled)


def test_hints_name_the_stride_mistake_and_harness_statuses():
    cases = [CaseResult("64x64x64", "public", 64, 64, 64, True),
             CaseResult("17x33x65", "public", 17, 33, 65, False, wrong=500, exact=True),
             CaseResult("33x17x65", "public", 33, 17, 65, False, status="crash", ran=False)]
    hints = case_hints(cases)
    assert any("j, k and l all differ" in h for h in hints)
    assert any("small-integer" in h for h in hints)
    assert any("crashed on the host" in h for h in hints)


# --- self-test judge ---------------------------------------------------------------

def test_only_the_fork_bomb_is_graded_alone(root, parts):
    questions = {q.id for q in load_assignment(root / "assignment.yaml").questions}
    hand_ins = load_hand_ins(root / "tests" / "submissions", set(parts), questions)
    assert [h.name for h in hand_ins if h.runs_alone] == ["security-fork-bomb"]
    assert len(hand_ins) > 40


def test_runs_alone_must_be_a_boolean(tmp_path, parts):
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "expected.yaml").write_text("runs_alone: yes please\nparts: {naive: {verdict: pass}}\n")
    with pytest.raises(SelftestError, match="runs_alone must be true or false"):
        load_hand_ins(tmp_path, set(parts))


def test_judge_with_a_gpu():
    assert judge(passing_tiled(), Expectation("tiled", "pass"), gpu=True) == (True, "")
    ok, why = judge(failing_boundary(), Expectation("boundary", "pass"), gpu=True)
    assert not ok and "full marks" in why
    assert judge(failing_boundary(), Expectation("boundary", "fail", ["correctness"]), gpu=True)[0]
    ok, why = judge(failing_boundary(), Expectation("boundary", "fail", ["racecheck"]), gpu=True)
    assert not ok and "racecheck should fail" in why


def test_judge_of_a_slow_part_looks_for_its_reason_in_the_speed_stage():
    part = passing_tiled()
    part.speed_score = 0.0
    part.stages["speed"].summary = "timing stopped after 1 call at 4096x4096x4096: ...; 0% of the speed points"
    assert judge(part, Expectation("tiled", "slow", reason="Timing stopped"), gpu=True) == (True, "")
    ok, why = judge(part, Expectation("tiled", "slow", reason="throttled"), gpu=True)
    assert not ok and "does not mention 'throttled'" in why


def test_judge_without_a_gpu_never_accepts_a_passed_gpu_stage():
    part = passing_tiled()
    ok, why = judge(part, Expectation("tiled", "pass"), gpu=False)
    assert not ok and "must not pass" in why
    for name in ("correctness", "launch", "memcheck", "racecheck", "speed"):
        part.stages[name].status = "not_run"
    assert judge(part, Expectation("tiled", "pass"), gpu=False)[0]


# --- naming the student's file ---------------------------------------------


def test_sanitizer_lines_name_the_students_file_whichever_grading_compiled_it(parts, tmp_path):
    """A memcheck line as compute-sanitizer prints it (13.0, -lineinfo), for
    an executable the part cache kept from an earlier grading: its line
    tables name that grading's copy, in a work folder since removed."""
    from tilelab.grading.context import new_part_state
    from tilelab.grading.stages.finish import _name_the_students_file
    from tilelab.grading.model import Stage

    state = new_part_state(parts["boundary"], tmp_path / "hand-in", ("public",))
    earlier = "/tmp/tilelab-work-k2j4/submission-5f0c9e1d2b3a4c6d/sources/boundary.cu"
    state.result.stages["memcheck"] = Stage(
        "memcheck", "failed", "memcheck reported errors",
        "=========     at boundaryKernel(const float *, const float *, float *, int)+0x1b0 in "
        f"{earlier}:39\n=========     by thread (3,0,0) in block (1,0,0)")
    _name_the_students_file(state, "grade")
    details = state.result.stages["memcheck"].details
    assert " in boundary.cu:39\n" in details and "sources" not in details
    # Another part's file, or a file of the same name elsewhere, is left alone.
    other = f"in /home/ann/boundary.cu:39 and {earlier.replace('boundary.cu', 'tiled.cu')}:7"
    state.result.stages["memcheck"].details = other
    _name_the_students_file(state, "grade")
    assert state.result.stages["memcheck"].details == other


def test_only_endings_a_part_cannot_account_for_are_run_again_alone():
    """Exit codes from include/tilelab/exit_codes.h: the ones a part's own code
    causes stand; a crash, a signal, CUDA failing to start or a process that
    never started may come from a fork bomb beside it."""
    from tilelab.grading.runner import may_be_disturbed

    def ended(exit_code=None, signal=None, timed_out=False, stopped=None):
        return process.Completed(exit_code=exit_code, signal=signal, timed_out=timed_out, seconds=0.1, stdout="",
                                 stderr="", stdout_bytes=0, stderr_bytes=0, stopped=stopped)

    for own in (0, 10, 11, 12, 14, 15):  # ok, no kernel, launch error, kernel fault, early exit, TODO stub
        assert not may_be_disturbed(ended(own))
    for other in (5, 6, 7, 13, 126):  # no device, CUDA API error, CUPTI, crash; setpriv could not start it
        assert may_be_disturbed(ended(other))
    assert may_be_disturbed(ended(signal=9))
    assert not may_be_disturbed(ended(timed_out=True)) and not may_be_disturbed(ended(stopped=process.CANCELLED))


def test_the_self_test_refuses_a_name_it_has_no_hand_in_for(root, tmp_path):
    """`tilelab selftest naive-crash-host` (for naive-host-crash) grades nothing and says so."""
    from tilelab.selftest.handins import run_selftest

    with pytest.raises(SelftestError, match="no hand-in named naive-crash-host"):
        run_selftest(root, tmp_path / "build", tmp_path / "out", names=("naive-host-crash", "naive-crash-host"))


def test_a_phase_runs_from_its_first_start_to_its_last_end_and_a_wait_counts_what_was_waited():
    from tilelab.grading.context import PhaseClock
    clock = PhaseClock(zero=100.0)
    clock.record("correctness", 101.0, 103.0)
    clock.record("correctness", 102.0, 104.0)  # beside the first, in another thread
    clock.waited("waiting for the GPU alone", 101.0, 101.5)
    clock.waited("waiting for the GPU alone", 110.0, 110.25)  # another wait, long after
    assert clock.timings() == {"correctness": 3.0, "waiting for the GPU alone": 0.75}
    assert clock.spans()["waiting for the GPU alone"] == [1.0, 10.25]
