"""Checks on how a part launched its work, from the harness's CUPTI records.

The harness records every kernel and memory operation each launcher call
started. From those, per correctness case:
  - the work ran in kernels the part file defines (not a library's);
  - nothing was copied between host and device inside the call (which is
    how a launcher computes on the host and hands the answer over);
  - no kernel was launched outside the call (another thread, left running);
  - shared memory is used as the part requires: "required" (some kernel of
    each call uses it), "dynamic_only" (no static __shared__, some dynamic);
  - every launch keeps within each limit its case lowered in the
    cudaDeviceProp the launcher was given (threads per block, block
    dimensions, shared memory per block). The limits come from the case
    itself (assignment.yaml), not from what the harness wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

HOST_COPY_KINDS = ("HtoD", "DtoH", "HtoH")


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
    """`case_props`: name in the case file -> the props the case lowers."""
    case_props = case_props or {}
    listed = harness_result.get("cases")
    cases = [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
    recorded = [c for c in cases if c.get("launches_recorded") is True and isinstance(c.get("launches"), list)]
    if not recorded:
        return LaunchCheck("not_run", "no launch records: the part did not get through a case")
    problems = []  # (case name, message)
    hints = []
    elsewhere = False
    for case in recorded:
        name = case.get("name", "?")
        launches = [k for k in case["launches"] if isinstance(k, dict)]
        operations = case.get("memory_operations")
        copies = [m for m in operations if isinstance(m, dict) and m.get("kind") in HOST_COPY_KINDS] \
            if isinstance(operations, list) else []
        if copies:
            total = sum(_n(m.get("bytes")) for m in copies)
            kinds = ", ".join(sorted({str(m.get("kind")) for m in copies}))
            problems.append((name, f"the launcher copied {total} bytes between host and device ({kinds}): "
                                   "computing on the host is not allowed"))
            elsewhere = True
            hints.append("Do the multiplication in your kernel; the launcher only chooses the grid and launches.")
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
                                     + ("" if policy == "any" else ", shared memory as required"))
    first_case, first = problems[0]
    lines = [f"{case}: {message}" for case, message in problems[:12]]
    if len(problems) > 12:
        lines.append(f"... and {len(problems) - 12} more")
    return LaunchCheck("failed", f"{first} (case {first_case})", "\n".join(lines), list(dict.fromkeys(hints)),
                       elsewhere)


def _n(value) -> int:
    """A count from the harness's JSON: written by the process that runs
    student code, so anything but an integer counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _shared(kernel: dict) -> int:
    return _n(kernel.get("static_shared_bytes")) + _n(kernel.get("dynamic_shared_bytes"))


def launch_rows(harness_result: dict) -> list:
    """The launches of the first case that has any, for the report."""
    listed = harness_result.get("cases")
    for case in listed if isinstance(listed, list) else []:
        if isinstance(case, dict) and isinstance(case.get("launches"), list) and case["launches"]:
            return [k for k in case["launches"] if isinstance(k, dict)]
    return []

