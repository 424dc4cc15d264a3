"""Checks on how a part launched its work, from the harness's CUPTI records.

Per correctness case (check_launches): the work ran in the part file's own
kernels, with no host copy, no CUDA call that gives kernels host memory
(REFUSED_CALLS) and no host arithmetic beyond HOST_CPU_FLOOR_MS (printing
apart) inside the call, and no kernel outside it; shared memory is used as
the part requires; every launch keeps within the cudaDeviceProp limits its
case lowered (as assignment.yaml says, not as the harness wrote).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

HOST_COPY_KINDS = ("HtoD", "DtoH", "HtoH")

# CUDA calls that put memory both the host and kernels can reach in a
# launcher's hands, or run host code in the GPU's stream order: the routes by
# which host arithmetic reaches P without a copy. Runtime and driver names as
# CUPTI gives them, without version suffixes (api_name). The same names are
# refused in the compiled part's symbol table (static_checks.py). Allowed:
# device memory (cudaMalloc, cudaMallocAsync, cudaMallocPitch, ...), streams,
# events, graphs without host nodes, cudaFuncSetAttribute, device queries,
# copies and memsets between device buffers (docs/security.md).
REFUSED_CALLS = {
    **dict.fromkeys(("cudaMallocHost", "cudaHostAlloc", "cudaHostRegister", "cudaHostGetDevicePointer",
                     "cuMemAllocHost", "cuMemHostAlloc", "cu64MemHostAlloc", "cuMemHostRegister",
                     "cuMemHostGetDevicePointer", "cu64MemHostGetDevicePointer"),
                    "host memory that kernels can reach"),
    **dict.fromkeys(("cudaMallocManaged", "cuMemAllocManaged", "cu64MemAllocManaged", "cudaLibraryGetManaged",
                     "cuLibraryGetManaged", "__cudaRegisterManagedVar"),
                    "managed memory, which the host can reach"),
    **dict.fromkeys(("cudaMemPoolCreate", "cuMemPoolCreate", "cuMemCreate", "cuMemImportFromShareableHandle"),
                    "memory that may be placed on the host"),
    **dict.fromkeys(("cudaLaunchHostFunc", "cuLaunchHostFunc", "cudaStreamAddCallback", "cuStreamAddCallback",
                     "cudaGraphAddHostNode", "cuGraphAddHostNode"),
                    "host code run in the GPU's stream order"),
    **dict.fromkeys(("cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion", "cuGetProcAddress",
                     "__cudaGetProcAddress"),
                    "CUDA functions looked up by name, out of the checks' sight"),
    **dict.fromkeys(("cuMemcpyDtoH", "cuMemcpyDtoHAsync", "cuMemcpyAtoH", "cuMemcpyAtoHAsync"),
                    "a copy from the device to the host"),
}

# A launcher chooses a grid and launches: tens of microseconds of host CPU
# outside CUDA calls. More than the floor (plus a share of the time its
# kernels ran, for noise that grows with the call) is host arithmetic.
HOST_CPU_FLOOR_MS = 2.0
HOST_CPU_SHARE = 0.05
# Printing costs host CPU time too (formatting, and the write calls), and it
# is not arithmetic: a call may spend this much more per byte and per write
# call it made: about five times what printing to a pipe costs a launcher in
# a grading (measured: docs/measurements-archive.md, "A new user's first
# hour", under "Printing from a launcher").
PRINT_NS_PER_BYTE = 40.0
PRINT_US_PER_WRITE = 5.0


def api_name(cupti_name: str) -> str:
    """'cudaLaunchHostFunc_ptsz_v10000' -> 'cudaLaunchHostFunc'."""
    return re.sub(r"(?:_(?:v\d+|ptsz|ptds))+$", "", str(cupti_name))


def refused_calls(counts) -> list:
    """'name (why)' for each refused call in a {CUPTI name: count} record."""
    if not isinstance(counts, dict):
        return []
    found = {api_name(n) for n, c in counts.items() if _n(c) > 0 and api_name(n) in REFUSED_CALLS}
    return [f"{name} ({REFUSED_CALLS[name]})" for name in sorted(found)]


@dataclass(frozen=True)
class HostTime:
    """A call's host CPU time outside CUDA calls, judged."""

    cpu_ms: float
    gpu_ms: float  # the call's kernels
    limit_ms: float  # what a launcher needs, printing aside
    printed_bytes: int  # written during the call (0 where not known)
    print_ms: float  # what that printing may cost

    @property
    def excess(self) -> bool:
        return self.cpu_ms > self.limit_ms + self.print_ms

    @property
    def printing(self) -> bool:
        """More than a launcher needs, and explained by what it printed."""
        return self.limit_ms < self.cpu_ms and not self.excess

    def words(self) -> str:
        printed = f" and printed {_bytes(self.printed_bytes)}" if self.printed_bytes > 0 else ""
        return f"the launcher used {self.cpu_ms:.1f} ms of host CPU time outside CUDA calls{printed}"


def host_time(host_cpu_ms, gpu_ms, printed_bytes=None, write_calls=None) -> HostTime:
    """One call's figures, as the harness recorded them (printed_bytes and
    write_calls are -1 or missing where the kernel did not tell: no allowance)."""
    printed, writes = max(_n(printed_bytes), 0), max(_n(write_calls), 0)
    return HostTime(_ms(host_cpu_ms), _ms(gpu_ms), HOST_CPU_FLOOR_MS + HOST_CPU_SHARE * _ms(gpu_ms), printed,
                    (printed * PRINT_NS_PER_BYTE + writes * PRINT_US_PER_WRITE * 1e3) * 1e-6)


def host_cpu_excess(host_cpu_ms, gpu_ms, printed_bytes=None, write_calls=None) -> Optional[str]:
    """A message if a call's host CPU time outside CUDA calls is more than a
    launcher needs next to `gpu_ms` of kernel time and what it printed; None otherwise."""
    t = host_time(host_cpu_ms, gpu_ms, printed_bytes, write_calls)
    return excess_words(t) if t.excess else None


def excess_words(t: HostTime) -> str:
    allowed = f"{t.limit_ms:.1f} ms" + (f", and {t.print_ms:.1f} ms for its printing" if t.print_ms else "")
    return (f"{t.words()} while its kernels ran {t.gpu_ms:.3f} ms (allowed: {allowed}): the host did work "
            "that belongs in a kernel")


def printing_note(t: HostTime) -> str:
    return (f"{t.words()} in one call: printing is not computing, so it costs no points here, but it costs host "
            "time in every call, the timed ones too")


PRINTING_HINT = ("Remove debug printing from the launcher (or print only when something goes wrong): it slows "
                 "every call.")


def _bytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n} bytes"


HOST_WORK_HINT = ("Do the multiplication in your kernel; the launcher only chooses the grid and launches. "
                  "Host memory that kernels can reach, copies to the host and host threads doing arithmetic "
                  "are all refused.")


def _refused_in(record: dict, who: str) -> list:
    """'<who> called cudaHostAlloc (...)' for the refused calls a record
    lists: made during the call, and by other threads outside it."""
    found = []
    for where, key in (("", "api_calls"), (" from another thread", "api_calls_outside_call")):
        refused = refused_calls(record.get(key))
        if refused:
            found.append(f"{who} called {', '.join(refused)}{where}")
    return found


def check_timed_calls(timing: dict) -> list:
    """Problems with the timed calls' records (the harness's `timing` of a
    case): refused calls, calls by threads outside a call, host CPU time."""
    if not isinstance(timing, dict):
        return []
    problems = _refused_in(timing, "the timed calls")
    calls = timing.get("calls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict):
            excess = host_cpu_excess(call.get("host_cpu_ms"), call.get("cupti_kernel_ms"), call.get("printed_bytes"),
                                     call.get("print_calls"))
            if excess:
                problems.append(f"timed call {_n(call.get('call'))}: {excess}")
                break
    return problems


def timed_printing(timing: dict) -> Optional[str]:
    """A note when the timed calls printed enough to cost host time (their
    time includes it), else None."""
    calls = timing.get("calls") if isinstance(timing, dict) else None
    times = [host_time(c.get("host_cpu_ms"), c.get("cupti_kernel_ms"), c.get("printed_bytes"), c.get("print_calls"))
             for c in (calls if isinstance(calls, list) else []) if isinstance(c, dict)]
    printing = [t for t in times if t.printing]
    if not printing:
        return None
    most = max(printing, key=lambda t: t.cpu_ms)
    return (f"the launcher printed in {len(printing)} of {len(times)} timed calls (up to {_bytes(most.printed_bytes)}, "
            f"{most.cpu_ms:.0f} ms of host CPU time in one call): that time is part of the part's time")


@dataclass
class LaunchCheck:
    status: str  # "passed", "failed" or "not_run"
    summary: str
    details: str = ""
    hints: list = field(default_factory=list)
    # The work may not have run in the part's kernels at all (host copies,
    # foreign kernels, launches outside the call): timing it would measure
    # something else, so the speed stage does not run.
    work_elsewhere: bool = False


def kernel_base_name(cupti_name: str) -> str:
    """'void ns::tiledKernel<32>(float const*, ...)' -> 'tiledKernel'."""
    name = cupti_name.split("(", 1)[0].strip()
    depth, out = 0, []
    for ch in name:  # drop template arguments, which may nest
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    name = name.split()[-1] if name.split() else name  # drop a return type
    return name.split("::")[-1]


def over_limits(kernel: dict, props: dict) -> list:
    """How one recorded launch broke the limits its case lowered (`props`,
    a case's props in assignment.yaml): one message per limit."""
    kname = kernel_base_name(str(kernel.get("name", "")))
    found = []
    block = kernel.get("block")
    dims = [_n(d) for d in block] if isinstance(block, list) and len(block) == 3 else None
    threads = props.get("maxThreadsPerBlock")
    if isinstance(threads, int) and dims and dims[0] * dims[1] * dims[2] > threads:
        found.append(f"{kname} ran blocks of {dims[0]} x {dims[1]} x {dims[2]} = {dims[0] * dims[1] * dims[2]} "
                     f"threads, more than the {threads} it was given (prop.maxThreadsPerBlock)")
    most = props.get("maxThreadsDim")
    if isinstance(most, list) and len(most) == 3 and dims:
        for axis, (size, limit) in enumerate(zip(dims, most)):
            if size > limit:
                found.append(f"{kname} ran blocks {size} threads wide along {'xyz'[axis]}, more than the {limit} "
                             f"it was given (prop.maxThreadsDim[{axis}])")
    smem = props.get("sharedMemPerBlock")
    if isinstance(smem, int) and _shared(kernel) > smem:
        found.append(f"{kname} asked for {_shared(kernel)} bytes of shared memory but was given a limit of {smem} "
                     "(prop.sharedMemPerBlock)")
    return found


LIMIT_HINT = ("Read every limit from the cudaDeviceProp the launcher is given (maxThreadsPerBlock, "
              "maxThreadsDim, sharedMemPerBlock) and size the block and the tiles to fit all of them: the "
              "grader lowers them to stand for other GPUs.")


def check_launches(harness_result: dict, part_file: str, kernels_defined: set, policy: str,
                   case_props: Optional[dict] = None) -> LaunchCheck:
    """`case_props`: name in the case file -> the props the case lowers.
    `harness_result["first_cases"]`: the grader's list of the cases each
    harness run began with (their host CPU time is not held to the floor:
    one-time host work goes there, and a launcher that computes on the host
    does so in every call). CUDA in use before the harness began (a global
    constructor) fails the check too."""
    case_props = case_props or {}
    listed = harness_result.get("cases")
    cases = [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
    recorded = [c for c in cases if c.get("launches_recorded") is True and isinstance(c.get("launches"), list)]
    if not recorded:
        return LaunchCheck("not_run", "no launch records: the part did not get through a case")
    problems = []  # (case name, message)
    hints = []
    elsewhere = False
    printing: Optional[HostTime] = None  # the call whose printing cost the most host time
    began = harness_result.get("first_cases")
    first_cases = set(n for n in began if isinstance(n, str)) if isinstance(began, list) else set()
    left = harness_result.get("processes_left")
    if isinstance(left, int) and not isinstance(left, bool) and left > 0:
        cpu = harness_result.get("processes_left_cpu_ms")
        spent = f", which used {cpu:.0f} ms of CPU time" if isinstance(cpu, (int, float)) and cpu >= 1 else ""
        problems.append(("(run)", f"the launcher started {left} process{'es' if left != 1 else ''} that it never "
                                  f"waited for (a daemon, say){spent}; they were ended with the run"))
        elsewhere = True
        hints.append("A launcher starts no process: it launches its kernels and returns.")
    if harness_result.get("cuda_in_use_at_start") is True:
        problems.append(("(start)", "CUDA was already in use when the harness started: code in "
                                    f"{part_file} ran before main() (a global constructor or static "
                                    "initializer), where no check can see it"))
        elsewhere = True
        hints.append("Do all CUDA work inside the launcher, when it is called.")
    for case in recorded:
        name = case.get("name", "?")
        launches = [k for k in case["launches"] if isinstance(k, dict)]
        copied = _host_copies(case)
        if copied:
            problems.append((name, copied))
            elsewhere = True
            hints.append(HOST_WORK_HINT)
        for message in _refused_in(case, "the launcher"):
            problems.append((name, message))
            elsewhere = True
            hints.append(HOST_WORK_HINT)
        if case.get("launches_recorded") is True and name not in first_cases:
            t = host_time(case.get("host_cpu_ms"), sum(_ms(k.get("duration_ms")) for k in launches),
                          case.get("printed_bytes"), case.get("print_calls"))
            if t.excess:
                problems.append((name, excess_words(t)))
                elsewhere = True
                hints.append(HOST_WORK_HINT)
            elif t.printing and (printing is None or t.cpu_ms > printing.cpu_ms):
                printing = t
        outside = case.get("launches_outside_call")
        if isinstance(outside, list) and outside:
            problems.append((name, f"{len(outside)} kernel(s) ran outside the launcher call "
                                   "(launched from another thread, or still running after it returned)"))
            elsewhere = True
        foreign = sorted({kernel_base_name(str(k.get("name", ""))) for k in launches}
                         - set(kernels_defined))
        if foreign:
            problems.append((name, f"kernels not defined in {part_file} did work: {', '.join(foreign)}"))
            elsewhere = True
        if not launches:
            continue  # the correctness stage reports "no kernel"
        if policy == "required":
            if not any(_shared(k) > 0 for k in launches):
                names = ", ".join(sorted({kernel_base_name(str(k.get('name', ''))) for k in launches}))
                problems.append((name, f"{names} uses no shared memory"))
                hints.append("This part is about staging tiles of M and N in shared memory (__shared__) "
                             "and computing from there.")
        elif policy == "dynamic_only":
            for k in launches:
                static = _n(k.get("static_shared_bytes"))
                if static > 0:
                    problems.append((name, f"{kernel_base_name(str(k.get('name', '')))} uses {static} bytes of "
                                           "static __shared__ memory"))
                    hints.append("Use one extern __shared__ buffer, sized by the third launch parameter, "
                                 "and carve Mds and Nds out of it.")
            if not any(_n(k.get("dynamic_shared_bytes")) > 0 for k in launches):
                problems.append((name, "no kernel used dynamic shared memory"))
        for k in launches:
            broken = over_limits(k, case_props.get(name, {}))
            problems += [(name, message) for message in broken]
            if broken:
                hints.append(LIMIT_HINT)
    if not problems:
        return LaunchCheck("passed", f"{len(recorded)} calls: work done in {part_file}'s own kernels"
                                     + ("" if policy == "any" else ", shared memory as required")
                                     + (f"; {printing_note(printing)}" if printing else ""),
                           hints=[PRINTING_HINT] if printing else [])
    first_case, first = problems[0]
    lines = [f"{case}: {message}" for case, message in problems[:12]]
    if len(problems) > 12:
        lines.append(f"... and {len(problems) - 12} more")
    return LaunchCheck("failed", f"{first} (case {first_case})", "\n".join(lines), list(dict.fromkeys(hints)),
                       elsewhere)


def _host_copies(case: dict) -> Optional[str]:
    """The copies between host and device a case's call made, in words; None when it made none."""
    operations = case.get("memory_operations")
    copies = [m for m in operations if isinstance(m, dict) and m.get("kind") in HOST_COPY_KINDS] \
        if isinstance(operations, list) else []
    if not copies:
        return None
    total = sum(_n(m.get("bytes")) for m in copies)
    kinds = ", ".join(sorted({str(m.get("kind")) for m in copies}))
    calls = sorted({api_name(m["api"]) for m in copies if isinstance(m.get("api"), str) and m["api"]})
    by = f" with {', '.join(calls)}" if calls else ""
    return (f"the launcher copied {total} bytes between host and device ({kinds}){by}: computing on the host is "
            "not allowed")


def check_first_timed_calls(cases) -> list:
    """Host work in the first call at each timing size: the untimed call the
    timed ones follow, recorded as a correctness case is (the harness's
    `cases` of a timing run). Host copies and refused calls count in every
    such call, host CPU time in all but the run's first (where one-time host
    work goes, as in check_launches). A call the harness ended unfinished
    (its time budget, grader/harness/core/timing.h) left no records."""
    listed = [c for c in cases if isinstance(c, dict)] if isinstance(cases, list) else []
    problems = []
    for i, case in enumerate(listed):
        found = [m for m in [_host_copies(case)] if m] + _refused_in(case, "the launcher")
        launches = case.get("launches")
        if i > 0 and case.get("launches_recorded") is True and isinstance(launches, list):
            gpu_ms = sum(_ms(k.get("duration_ms")) for k in launches if isinstance(k, dict))
            t = host_time(case.get("host_cpu_ms"), gpu_ms, case.get("printed_bytes"), case.get("print_calls"))
            if t.excess:
                found.append(excess_words(t))
        size = f"{_n(case.get('j'))}x{_n(case.get('k'))}x{_n(case.get('l'))}"
        problems += [f"the first call at {size}: {message}" for message in found]
    return problems


def _n(value) -> int:
    """A count from the harness's JSON: written by the process that runs
    student code, so anything but an integer counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _ms(value) -> float:
    """A duration from the harness's JSON; anything but a finite number >= 0 counts as 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
        return 0.0
    return float(value)


def _shared(kernel: dict) -> int:
    return _n(kernel.get("static_shared_bytes")) + _n(kernel.get("dynamic_shared_bytes"))


def shared_memory_untouched(harness_result: dict, sizes: list) -> bool:
    """Whether the correctness runs' launch records show that no kernel
    launch of the part had shared memory (static or dynamic) on cases of
    every one of `sizes` ((j, k, l)): then compute-sanitizer racecheck,
    which looks for shared-memory hazards only, has nothing to find on
    those sizes. False wherever the records do not say so for certain."""
    listed = harness_result.get("cases")
    cases = [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
    recorded = [c for c in cases if c.get("launches_recorded") is True and isinstance(c.get("launches"), list)
                and isinstance(c.get("launches_outside_call", []), list)]
    if not recorded or len(recorded) != len(cases):
        return False
    seen = {(c.get("j"), c.get("k"), c.get("l")) for c in recorded}
    if not all(tuple(size) in seen for size in sizes):
        return False
    launches = [k for c in recorded for k in c["launches"] + c.get("launches_outside_call", [])]
    return all(isinstance(k, dict) and all(type(k.get(key)) is int and k[key] == 0
                                           for key in ("static_shared_bytes", "dynamic_shared_bytes"))
               for k in launches)


def launch_rows(harness_result: dict) -> list:
    """The launches of the first case that has any, for the report."""
    listed = harness_result.get("cases")
    for case in listed if isinstance(listed, list) else []:
        if isinstance(case, dict) and isinstance(case.get("launches"), list) and case["launches"]:
            return [k for k in case["launches"] if isinstance(k, dict)]
    return []

