"""The launch checks on harness records of real shape: which kernels a
part launched and how, its launcher's API calls and the host time outside
them, what the harness found at the start and left behind, and when
racecheck has nothing to find."""


from tilelab.grading.launch_checks import check_launches, kernel_base_name, shared_memory_untouched


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
