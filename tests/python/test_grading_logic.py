"""Pure grading logic with real values: scoring, static checks, launch checks,
diagnosis and the self-test's judge. The GPU lock: test_gpu_lock.py; the
process runner: test_process_run.py."""


import pytest
from grade_fixtures import failing_boundary, passing_tiled

from tilelab.grading.diagnose import case_hints
from tilelab.grading.launch_checks import check_launches, kernel_base_name, shared_memory_untouched
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


# --- launch checks -------------------------------------------------------------

def kernel(name, static=0, dynamic=0):
    return {"name": name, "grid": [2, 2, 1], "block": [32, 32, 1], "static_shared_bytes": static,
            "dynamic_shared_bytes": dynamic, "registers_per_thread": 40, "duration_ms": 0.01}


def case(name, launches, memory=(), props=None):
    c = {"name": name, "status": "ok", "launches_recorded": True, "launches": list(launches),
         "memory_operations": list(memory), "launches_outside_call": []}
    if props:
        c["props_given"] = props
    return c


def test_kernel_base_name_from_cupti_names():
    assert kernel_base_name("tiledKernel(float const*, float const*, float*, int)") == "tiledKernel"
    assert kernel_base_name("void ns::tiles<32, (bool)1>(float*)") == "tiles"


def test_launch_checks_pass_the_reference_records():
    result = {"cases": [case("w64", [kernel("tiledKernel(float const*, float const*, float*, int)", static=8192)])]}
    assert check_launches(result, "tiled.cu", {"tiledKernel"}, "required").status == "passed"


def test_launch_checks_catch_host_computing_foreign_kernels_and_missing_shared_memory():
    copied = {"cases": [case("w17", [kernel("dummy()")], memory=[{"kind": "DtoH", "bytes": 2312},
                                                                 {"kind": "HtoD", "bytes": 1156}])]}
    found = check_launches(copied, "naive.cu", {"dummy"}, "any")
    assert found.status == "failed" and "3468 bytes between host and device" in found.summary
    foreign = {"cases": [case("w17", [kernel("sm90_xmma_gemm_f32f32_tf32f32(Params)")])]}
    assert "sm90_xmma_gemm_f32f32_tf32f32" in check_launches(foreign, "naive.cu", {"k"}, "any").summary
    no_smem = {"cases": [case("w64", [kernel("naiveKernel(float const*)")])]}
    assert "uses no shared memory" in check_launches(no_smem, "tiled.cu", {"naiveKernel"}, "required").summary


def test_launch_checks_of_the_dynamic_part():
    ok = {"cases": [case("c", [kernel("dyn(float*)", dynamic=2048)])]}
    assert check_launches(ok, "dynamic_smem.cu", {"dyn"}, "dynamic_only",
                          {"c": {"sharedMemPerBlock": 2048}}).status == "passed"
    static = {"cases": [case("c", [kernel("dyn(float*)", static=8192)])]}
    assert "8192 bytes of static __shared__" in check_launches(static, "d.cu", {"dyn"}, "dynamic_only").details
    greedy = {"cases": [case("c", [kernel("dyn(float*)", dynamic=8192)])]}
    found = check_launches(greedy, "d.cu", {"dyn"}, "dynamic_only", {"c": {"sharedMemPerBlock": 512}})
    assert found.status == "failed" and "8192 bytes" in found.summary and "limit of 512" in found.summary


def test_every_lowered_limit_is_held_to_whatever_the_harness_says_it_gave():
    """The dynamic part's hidden cases of assignment.yaml lower maxThreadsPerBlock
    to 256 and maxThreadsDim to [8, 8, 64]; the reference launches 16 x 16 and
    8 x 8 blocks there. The harness's own props_given (written in the process
    that runs student code) is not what the check reads."""
    from tilelab.grading.launch_checks import over_limits

    lowered = {"threads": {"maxThreadsPerBlock": 256}, "dims": {"maxThreadsDim": [8, 8, 64]}}
    big = dict(kernel("dyn(float*)", dynamic=2048), block=[32, 32, 1])
    forged = {"cases": [case("threads", [big], props={"maxThreadsPerBlock": 1024}),
                        case("dims", [big], props={"maxThreadsDim": [1024, 1024, 64]})]}
    found = check_launches(forged, "dynamic_smem.cu", {"dyn"}, "dynamic_only", lowered)
    assert found.status == "failed" and not found.work_elsewhere
    assert "threads: dyn ran blocks of 32 x 32 x 1 = 1024 threads, more than the 256" in found.details
    assert "along x, more than the 8 it was given (prop.maxThreadsDim[0])" in found.details
    assert "along y" in found.details and "maxThreadsDim" in found.hints[0]
    fits = [dict(kernel("dyn(float*)", dynamic=2048), block=[16, 16, 1]), dict(kernel("dyn(float*)"), block=[8, 8, 1])]
    assert over_limits(fits[0], lowered["threads"]) == [] and over_limits(fits[1], lowered["dims"]) == []
    # Shared memory counts static and dynamic together, for any part whose case lowers it.
    assert over_limits(kernel("k()", static=256, dynamic=384), {"sharedMemPerBlock": 512}) == [
        "k asked for 640 bytes of shared memory but was given a limit of 512 (prop.sharedMemPerBlock)"]
    assert over_limits({"block": "x"}, lowered["threads"]) == []  # garbage from the harness: nothing to compare


# CUPTI's names for API calls, as cuptiGetCallbackName gives them: the
# CUPTI_RUNTIME_TRACE_CBID_* and CUPTI_DRIVER_TRACE_CBID_* ids of
# cupti_runtime_cbid.h and cupti_driver_cbid.h (CUDA 13.0).
def test_api_names_lose_their_version_and_stream_suffixes():
    from tilelab.grading.launch_checks import api_name
    assert api_name("cudaHostAlloc_v3020") == "cudaHostAlloc"
    assert api_name("cudaLaunchHostFunc_ptsz_v10000") == "cudaLaunchHostFunc"
    assert api_name("cuMemHostRegister_v2") == "cuMemHostRegister"
    assert api_name("cudaMemcpy2DAsync_ptsz_v7000") == "cudaMemcpy2DAsync"
    assert api_name("cudaMalloc") == "cudaMalloc"


def test_launch_checks_name_each_refused_call_from_any_thread():
    allowed = {"cudaLaunchKernel_v7000": 2, "cudaMallocAsync_v11020": 1, "cudaGraphLaunch_v10000": 1,
               "cudaFuncSetAttribute_v3020": 1, "cudaStreamCreateWithFlags_v5000": 1, "cudaEventRecord_v3020": 1,
               "cudaDeviceGetAttribute_v5000": 1, "cudaMemcpyAsync_v3020": 1}
    ok = case("w17", [kernel("k()")])
    ok.update(launches_recorded=True, api_calls=allowed, api_calls_outside_call={}, host_cpu_ms=0.04)
    assert check_launches({"cases": [ok]}, "naive.cu", {"k"}, "any").status == "passed"

    mapped = dict(ok, api_calls=dict(allowed, cudaHostAlloc_v3020=1, cudaFreeHost_v3020=1))
    found = check_launches({"cases": [mapped]}, "naive.cu", {"k"}, "any")
    assert found.status == "failed" and found.work_elsewhere
    assert found.summary == ("the launcher called cudaHostAlloc (host memory that kernels can reach) (case w17)")
    by_thread = dict(ok, api_calls_outside_call={"cuMemHostRegister_v2": 1, "cuMemHostGetDevicePointer_v2": 1})
    found = check_launches({"cases": [by_thread]}, "naive.cu", {"k"}, "any")
    assert "cuMemHostGetDevicePointer (host memory that kernels can reach), cuMemHostRegister (host memory " \
           "that kernels can reach) from another thread" in found.summary
    managed_host_func = dict(ok, api_calls={"cudaMallocManaged_v6000": 1, "cudaLaunchHostFunc_ptsz_v10000": 1})
    found = check_launches({"cases": [managed_host_func]}, "naive.cu", {"k"}, "any")
    assert "cudaLaunchHostFunc (host code run in the GPU's stream order)" in found.summary
    assert "cudaMallocManaged (managed memory, which the host can reach)" in found.summary


def test_launch_checks_name_the_call_behind_a_host_copy():
    copied = case("w17", [kernel("naiveKernel()")], memory=[
        {"kind": "DtoH", "api": "cudaMemcpy2DAsync_v3020", "bytes": 1156},
        {"kind": "HtoD", "api": "cudaMemcpy2DAsync_v3020", "bytes": 1156},
        {"kind": "DtoD", "api": "cudaMemcpyAsync_v3020", "bytes": 1156}])
    found = check_launches({"cases": [copied]}, "naive.cu", {"naiveKernel"}, "any")
    assert found.summary.startswith("the launcher copied 2312 bytes between host and device (DtoH, HtoD) "
                                    "with cudaMemcpy2DAsync: computing on the host is not allowed")


def test_host_cpu_time_outside_cuda_calls_is_held_to_the_floor_plus_a_share_of_the_kernels():
    from tilelab.grading.launch_checks import HOST_CPU_FLOOR_MS, HOST_CPU_SHARE, check_timed_calls, host_cpu_excess
    assert (HOST_CPU_FLOOR_MS, HOST_CPU_SHARE) == (2.0, 0.05)
    assert host_cpu_excess(0.05, 0.01) is None
    assert host_cpu_excess(2.0, 0.0) is None  # exactly the floor
    # naive-host-thread-work: a 30 ms host thread beside a 0.01 ms kernel.
    assert "used 30.2 ms of host CPU time outside CUDA calls while its kernels ran 0.010 ms (allowed: 2.0 ms)" \
        in host_cpu_excess(30.2, 0.01)
    # The floor grows by 5 % of the kernels' time: 26 ms of naive at 4096 allows 3.3 ms.
    assert host_cpu_excess(3.2, 26.0) is None and host_cpu_excess(3.4, 26.0) is not None
    assert host_cpu_excess("lots", float("nan")) is None  # garbage from the harness reads as nothing

    slow = case("w17", [kernel("k()")])
    slow.update(launches_recorded=True, api_calls={}, host_cpu_ms=30.2)
    found = check_launches({"cases": [slow]}, "naive.cu", {"k"}, "any")
    assert found.status == "failed" and found.work_elsewhere and "host CPU time" in found.summary
    # The first call of a run may do one-time work: naive-floods-stdout prints 100 MB there (H100,
    # 2026-11-23: that call alone went over the floor). Host arithmetic shows in every other call.
    first = dict(slow, name="w1")
    assert check_launches({"cases": [first], "first_cases": ["w1"]}, "naive.cu", {"k"}, "any").status == "passed"
    found = check_launches({"cases": [first, slow], "first_cases": ["w1"]}, "naive.cu", {"k"}, "any")
    assert found.status == "failed" and "(case w17)" in found.summary
    timing = {"api_calls": {"cudaLaunchKernel_v7000": 13}, "api_calls_outside_call": {},
              "calls": [{"call": 3, "host_cpu_ms": 0.03, "cupti_kernel_ms": 26.1},
                        {"call": 4, "host_cpu_ms": 900.0, "cupti_kernel_ms": 0.01}]}
    assert check_timed_calls(timing) == [
        "timed call 4: the launcher used 900.0 ms of host CPU time outside CUDA calls while its kernels ran "
        "0.010 ms (allowed: 2.0 ms): the host did work that belongs in a kernel"]
    timing["api_calls"]["cudaHostRegister_v4000"] = 1
    assert check_timed_calls(timing)[0] == "the timed calls called cudaHostRegister (host memory that kernels can reach)"
    assert check_timed_calls(None) == []


def test_printing_explains_host_time_and_keeps_the_points_but_arithmetic_does_not():
    """Printing is not computing: a launcher that prints 120 MB a call used
    180 ms of host CPU time per call on the H100, and naive-prints-every-call's
    7.8 MB a call 39 to 58 ms in a check and a grading there (docs/measurements-archive.md)."""
    from tilelab.grading.launch_checks import (PRINT_NS_PER_BYTE, PRINT_US_PER_WRITE, PRINTING_HINT,
                                               check_timed_calls, host_cpu_excess, host_time, timed_printing)
    assert (PRINT_NS_PER_BYTE, PRINT_US_PER_WRITE) == (40.0, 5.0)
    flood = host_time(180.0, 26.0, 120_000_000, 29_297)
    assert flood.printing and not flood.excess and host_cpu_excess(180.0, 26.0, 120_000_000, 29_297) is None
    # 4,800 ms for the bytes, 146 ms for the write calls, on top of the floor.
    assert round(flood.print_ms) == 4946 and flood.limit_ms == 2.0 + 0.05 * 26.0
    measured = host_time(58.0, 26.0, 7_800_000, 1_905)  # the worst call seen, in a grading
    assert measured.printing and measured.cpu_ms * 5 < measured.limit_ms + measured.print_ms
    # The same host time with nothing printed, or beyond what the printing explains, is host arithmetic.
    assert host_cpu_excess(180.0, 26.0) is not None and host_cpu_excess(180.0, 26.0, -1, -1) is not None
    assert "and printed 1000 bytes while its kernels ran 0.010 ms (allowed: 2.0 ms, and 0.1 ms for its printing)" \
        in host_cpu_excess(900.0, 0.01, 1000, 10)
    assert host_cpu_excess(180.0, 26.0, "lots", None) is not None  # garbage buys no allowance

    noisy = case("w17", [kernel("k()")])
    noisy.update(launches_recorded=True, api_calls={}, host_cpu_ms=180.0, printed_bytes=120_000_000,
                 print_calls=29_297)
    found = check_launches({"cases": [noisy]}, "naive.cu", {"k"}, "any")
    assert found.status == "passed" and not found.work_elsewhere and found.hints == [PRINTING_HINT]
    assert "used 180.0 ms of host CPU time outside CUDA calls and printed 120.0 MB in one call" in found.summary
    assert "printing is not computing, so it costs no points" in found.summary

    timing = {"api_calls": {}, "api_calls_outside_call": {},
              "calls": [{"call": 3, "host_cpu_ms": 175.0, "cupti_kernel_ms": 26.1, "printed_bytes": 120_000_000,
                         "print_calls": 29_297},
                        {"call": 4, "host_cpu_ms": 0.04, "cupti_kernel_ms": 26.1, "printed_bytes": 0,
                         "print_calls": 0}]}
    assert check_timed_calls(timing) == []
    assert timed_printing(timing) == ("the launcher printed in 1 of 2 timed calls (up to 120.0 MB, 175 ms of host "
                                      "CPU time in one call): that time is part of the part's time")
    assert timed_printing({"calls": [{"host_cpu_ms": 0.04}]}) is None and timed_printing(None) is None


def test_cuda_in_use_before_the_harness_started_fails_the_part():
    result = {"cases": [case("w17", [kernel("k()")])], "cuda_in_use_at_start": True}
    found = check_launches(result, "naive.cu", {"k"}, "any")
    assert found.status == "failed" and "ran before main() (a global constructor" in found.summary


def test_processes_the_launcher_left_behind_fail_the_part():
    """tilelab-contain's count of what a correctness run left running (a daemon), with its CPU time."""
    clean = {"cases": [case("w17", [kernel("k()")])], "processes_left": 0, "processes_left_cpu_ms": 0.0}
    assert check_launches(clean, "naive.cu", {"k"}, "any").status == "passed"
    left = {**clean, "processes_left": 2, "processes_left_cpu_ms": 412.3}
    found = check_launches(left, "naive.cu", {"k"}, "any")
    assert found.status == "failed" and found.work_elsewhere
    assert "started 2 processes that it never waited for (a daemon, say), which used 412 ms of CPU time" in (
        found.summary + found.details)
    assert check_launches({**clean, "processes_left": "many"}, "naive.cu", {"k"}, "any").status == "passed"


def test_launch_checks_survive_garbage_from_the_harness():
    garbage = {"cases": [case("c", [{"name": 5, "static_shared_bytes": "lots"}], memory=["x"])], "extra": None}
    assert check_launches(garbage, "tiled.cu", {"k"}, "required").status == "failed"
    assert check_launches({"cases": "nope"}, "tiled.cu", {"k"}, "required").status == "not_run"


# --- diagnosis -------------------------------------------------------------------

def test_racecheck_has_nothing_to_find_only_when_no_launch_had_shared_memory_on_its_sizes():
    # The naive reference's launch as CUPTI recorded it on the H100 (2026-11-21):
    # 16x16 blocks, no shared memory. Racecheck runs the naive part at 17.
    naive = {"name": "naiveKernel(const float*, const float*, float*, int)", "grid": [2, 2, 1], "block": [16, 16, 1],
             "static_shared_bytes": 0, "dynamic_shared_bytes": 0, "registers_per_thread": 38, "duration_ms": 0.004}

    def sized(width, launches, **fields):
        return {**case(f"w{width}", launches), "j": width, "k": width, "l": width, **fields}

    at_17 = [(17, 17, 17)]
    assert shared_memory_untouched({"cases": [sized(16, [naive]), sized(17, [naive])]}, at_17)
    assert not shared_memory_untouched({"cases": [sized(16, [naive])]}, at_17)  # its size never ran
    # Any launch of the part with shared memory, on any case, static or dynamic, in the call or outside it.
    assert not shared_memory_untouched({"cases": [sized(17, [naive]), sized(64, [kernel("t", static=8192)])]}, at_17)
    assert not shared_memory_untouched({"cases": [sized(17, [naive, kernel("d", dynamic=1024)])]}, at_17)
    assert not shared_memory_untouched({"cases": [sized(17, [naive], launches_outside_call=[kernel("t", static=4)])]},
                                       at_17)
    # Records that do not say so for certain: not recorded, a case without records, malformed counts.
    assert not shared_memory_untouched({"cases": [sized(17, [naive], launches_recorded=False)]}, at_17)
    assert not shared_memory_untouched({"cases": [sized(17, [naive]), {"name": "w18", "status": "timeout"}]}, at_17)
    for forged in ("0", False, None, 0.0):
        assert not shared_memory_untouched({"cases": [sized(17, [dict(naive, static_shared_bytes=forged)])]}, at_17)
    assert not shared_memory_untouched({}, at_17)


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
