"""What one call of a part moved: its hardware counters, read as the lecture reads a kernel.

Just before a part's timed calls, the harness profiles one call of it at
the timing size (grader/harness/core/counter_profile.h, timing.h): untimed,
no points. The counters come from the launcher's process, so they are only
as honest as the student's code, and nothing here changes a score.

The lecture's measure of a kernel is its FLOPs per byte of global memory
that its threads ask for: 0.25 FLOP/B for the naive kernel (two 4-byte
loads per multiply-add), T/4 with T x T tiles in shared memory. Each level
below the threads (L1, L2, DRAM) moves fewer bytes than were asked for, and
its intensity is the product's FLOPs over what that level moved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional

from ..spec.matmul import matmul_flop
from .occupancy import occupancy_of_launches

# The counters asked for, each named once; the harness reads them for one
# call. All are hardware counters: the smsp__sass_* family needs CUPTI's
# instrumenting API, reads 0 in the range profiler and costs a pass each.
GLOBAL_LOAD_INSTRUCTIONS = "smsp__inst_executed_op_global_ld.sum"  # warp-level
GLOBAL_STORE_INSTRUCTIONS = "smsp__inst_executed_op_global_st.sum"
GLOBAL_LOAD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
GLOBAL_LOAD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
L1_LOAD_BYTES = "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"
L1_STORE_BYTES = "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum"
L2_BYTES = "lts__t_bytes.sum"
DRAM_READ_BYTES = "dram__bytes_read.sum"
DRAM_WRITE_BYTES = "dram__bytes_write.sum"
SHARED_LOAD_INSTRUCTIONS = "smsp__inst_executed_op_shared_ld.sum"
SHARED_STORE_INSTRUCTIONS = "smsp__inst_executed_op_shared_st.sum"
SHARED_LOAD_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
SHARED_STORE_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
LOCAL_LOAD_BYTES = "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"
LOCAL_STORE_BYTES = "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"
WARPS_ACTIVE_PCT = "sm__warps_active.avg.pct_of_peak_sustained_active"
FMA_PIPE_INSTRUCTIONS = "smsp__inst_executed_pipe_fma.sum"  # FFMA, FADD, FMUL and IMAD
INSTRUCTIONS = "smsp__inst_executed.sum"
WARP_CYCLES_ACTIVE = "smsp__warps_active.sum"
STALL_REASONS = {  # counter suffix -> what it means, in a student's words
    "long_scoreboard": "waiting for global or local memory",
    "barrier": "waiting at __syncthreads()",
    "mio_throttle": "shared-memory instruction queue full",
    "lg_throttle": "global-memory instruction queue full",
    "short_scoreboard": "waiting for shared memory",
    "math_pipe_throttle": "arithmetic pipe busy",
}
STALL_COUNTER = "smsp__warps_issue_stalled_{}.sum"

# What a call far over its time budget has read instead (the harness's
# far-over metrics, grader/harness/core/timing.h), since each pass is one
# more call that earns no speed points: the memory traffic at each level and
# the loads' sectors per request (2 passes on an H100, of METRICS' 4), and
# for a kernel that uses shared memory its accesses and bank conflicts too
# (3 passes).
TRAFFIC_METRICS = (
    GLOBAL_LOAD_INSTRUCTIONS, GLOBAL_STORE_INSTRUCTIONS, GLOBAL_LOAD_REQUESTS, GLOBAL_LOAD_SECTORS,
    L1_LOAD_BYTES, L1_STORE_BYTES, L2_BYTES, DRAM_READ_BYTES, DRAM_WRITE_BYTES,
)
SHARED_METRICS = (SHARED_LOAD_INSTRUCTIONS, SHARED_STORE_INSTRUCTIONS, SHARED_LOAD_CONFLICTS, SHARED_STORE_CONFLICTS)
METRICS = (
    *TRAFFIC_METRICS, *SHARED_METRICS,
    LOCAL_LOAD_BYTES, LOCAL_STORE_BYTES, WARPS_ACTIVE_PCT, FMA_PIPE_INSTRUCTIONS, INSTRUCTIONS, WARP_CYCLES_ACTIVE,
    *(STALL_COUNTER.format(reason) for reason in STALL_REASONS),
)

# The lecture counts a thread's load as one float: a warp-level instruction
# asks for 32 x 4 bytes. A kernel that loads float4 asks for four times that
# per instruction, so its "global loads" level reads four times too high.
WARP_FLOAT_BYTES = 32 * 4

# The levels of the hierarchical roofline, nearest the threads first.
GLOBAL = "global"  # what the threads ask for: the lecture's measure
LEVELS = ("shared", GLOBAL, "L1", "L2", "DRAM")
LEVEL_TITLES = {
    "shared": "shared memory, loads and stores as the threads ask for them",
    GLOBAL: "global loads, as the threads ask for them (the lecture's count)",
    "L1": "L1/TEX (global sectors)",
    "L2": "L2",
    "DRAM": "DRAM",
}

# How the harness says it measured; anything else leaves only a message.
MEASURED = "measured"
# No counter of one call comes near this: a larger figure is garbage.
_MAX_VALUE = 1e18
# The most calls the harness reads in one profile (counter_profile.h, kMaxProfileRanges).
MAX_TOGETHER = 16


@dataclass
class Level:
    name: str  # one of LEVELS
    bytes: float
    intensity: Optional[float]  # FLOP per byte; None when the level moved nothing


@dataclass
class Traffic:
    """One call's counters, as figures a student can read."""

    case: str  # "4096x4096x4096"
    flop: float  # the product's FLOPs, 2jkl
    levels: list[Level]  # in LEVELS order (levels without figures left out)
    global_load_instructions: Optional[float] = None  # warp-level
    sectors_per_request: Optional[float] = None  # global loads: 4 is a coalesced warp of floats, 32 the worst
    shared_instructions: Optional[float] = None  # warp-level loads and stores
    bank_conflicts: Optional[float] = None  # shared loads and stores, extra wavefronts
    local_bytes: float = 0.0  # local memory (register spills, arrays indexed at run time)
    achieved_occupancy: Optional[float] = None  # % of the SM's warps, over the active cycles
    # From the launch record, not the counters (with_occupancy): what the
    # kernel's resources allow at most, and which resource allows the least.
    theoretical_occupancy: Optional[float] = None  # % of the SM's warps
    occupancy_limiter: Optional[str] = None  # one of occupancy.LIMITERS
    occupancy_limits: dict = field(default_factory=dict)  # resource -> blocks per SM it allows
    occupancy_inputs: dict = field(default_factory=dict)  # the launch's figures the limits come from
    fma_share: Optional[float] = None  # FMA-pipe instructions among all executed (FFMA, and IMAD for addresses)
    stalls: list = field(default_factory=list)  # [[reason, share of active warp cycles]], largest first
    passes: int = 0
    far_over: bool = False  # only the far-over metrics were read (profile_entry): its calls earn no speed points
    seconds: float = 0.0  # the whole profile of the call, CUPTI's set-up included
    setup_seconds: float = 0.0  # CUPTI's set-up, before the first pass
    # The parts whose calls were read in the same passes, this one among them (the harness's
    # profiles_together.h): its seconds are then its share of their profile.
    together: int = 1

    def level(self, name: str) -> Optional[Level]:
        return next((lv for lv in self.levels if lv.name == name), None)


@dataclass
class Profiled:
    """The outcome of profiling a part: figures, or one line saying why there are none."""

    traffic: Optional[Traffic] = None
    note: str = ""
    counters: dict = field(default_factory=dict)  # the raw figures the traffic was read from


def _value(metrics: dict, name: str) -> Optional[float]:
    v = metrics.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= _MAX_VALUE:
        return None
    return float(v)


def _sum(metrics: dict, *names: str) -> Optional[float]:
    values = [_value(metrics, n) for n in names]
    return None if any(v is None for v in values) else sum(values)


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def traffic_from(metrics: dict, j: int, k: int, l: int, passes: int = 0, seconds: float = 0.0,
                 setup_seconds: float = 0.0, far_over: bool = False, together: int = 1) -> Traffic:
    """The figures of one profiled call of a j x k x l product."""
    flop = float(matmul_flop(j, k, l))
    global_loads = _value(metrics, GLOBAL_LOAD_INSTRUCTIONS)
    shared = _sum(metrics, SHARED_LOAD_INSTRUCTIONS, SHARED_STORE_INSTRUCTIONS)
    moved = {
        "shared": shared * WARP_FLOAT_BYTES if shared is not None else None,
        GLOBAL: global_loads * WARP_FLOAT_BYTES if global_loads is not None else None,
        "L1": _sum(metrics, L1_LOAD_BYTES, L1_STORE_BYTES),
        "L2": _value(metrics, L2_BYTES),
        "DRAM": _sum(metrics, DRAM_READ_BYTES, DRAM_WRITE_BYTES),
    }
    levels = [Level(name, moved[name], flop / moved[name] if moved[name] else None)
              for name in LEVELS if moved[name] is not None]
    active = _value(metrics, WARP_CYCLES_ACTIVE)
    stalls = []
    for reason, words in STALL_REASONS.items():
        share = _ratio(_value(metrics, STALL_COUNTER.format(reason)), active)
        if share is not None:
            stalls.append([words, round(share, 4)])
    stalls.sort(key=lambda s: -s[1])
    return Traffic(
        case=f"{j}x{k}x{l}", flop=flop, levels=levels,
        global_load_instructions=global_loads,
        sectors_per_request=_ratio(_value(metrics, GLOBAL_LOAD_SECTORS), _value(metrics, GLOBAL_LOAD_REQUESTS)),
        shared_instructions=shared,
        bank_conflicts=_sum(metrics, SHARED_LOAD_CONFLICTS, SHARED_STORE_CONFLICTS),
        local_bytes=_sum(metrics, LOCAL_LOAD_BYTES, LOCAL_STORE_BYTES) or 0.0,
        achieved_occupancy=_value(metrics, WARPS_ACTIVE_PCT),
        fma_share=_ratio(_value(metrics, FMA_PIPE_INSTRUCTIONS), _value(metrics, INSTRUCTIONS)),
        stalls=stalls[:3], passes=passes, far_over=far_over, seconds=round(seconds, 3),
        setup_seconds=round(setup_seconds, 3), together=together,
    )


def profiled_case(case: dict) -> Profiled:
    """Reads the "profile" of a harness result's case (untrusted: any shape)."""
    profile = case.get("profile") if isinstance(case, dict) else None
    if not isinstance(profile, dict):
        return Profiled(note="not measured: the harness gave no counters")
    status, message = profile.get("status"), profile.get("message")
    message = message.strip()[:300] if isinstance(message, str) else ""
    if status != MEASURED:
        why = {"not_allowed": "not allowed here", "unsupported": "not supported here",
               "skipped": "not read"}.get(status, "not measured")
        return Profiled(note=f"{why}: {message}" if message else why)
    metrics = profile.get("metrics")
    dims = [case.get(d) for d in "jkl"]
    if not isinstance(metrics, dict) or not all(isinstance(d, int) and d > 0 for d in dims):
        return Profiled(note="not measured: the harness's counters could not be read")
    passes = profile.get("passes") if isinstance(profile.get("passes"), int) else 0
    ranges = profile.get("ranges")
    together = min(ranges, MAX_TOGETHER) if type(ranges) is int and ranges > 1 else 1
    seconds, setup = (_seconds(profile.get(name)) for name in ("seconds", "setup_seconds"))
    counters = {str(k): float(v) for k, v in metrics.items() if _value(metrics, k) is not None}
    return Profiled(traffic=traffic_from(counters, *dims, passes=passes, seconds=seconds, setup_seconds=setup,
                                         far_over=profile.get("far_over") is True, together=together),
                    counters=counters)


def _seconds(value) -> float:
    """A duration the harness reported (untrusted): 0 unless a finite, non-negative number."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return float(value) if ok else 0.0


def with_occupancy(traffic: Traffic, launches, device) -> Traffic:
    """The traffic with the theoretical occupancy of the call's largest launch (occupancy.py); the
    occupancy fields empty when the launch records or the device (both untrusted) can't be read."""
    found = occupancy_of_launches(launches, device)
    if found is None:
        return replace(traffic, theoretical_occupancy=None, occupancy_limiter=None,
                       occupancy_limits={}, occupancy_inputs={})
    inputs = {"registers_per_thread": found.registers_per_thread,
              "shared_bytes_per_block": found.shared_bytes_per_block,
              "threads_per_block": found.threads_per_block, "warps_per_sm": found.warps_per_sm}
    return replace(traffic, theoretical_occupancy=found.percent, occupancy_limiter=found.limiter,
                   occupancy_limits=dict(found.limits), occupancy_inputs=inputs)


def profile_entry(shared_memory: bool = True) -> dict:
    """What a case file asks of the harness to profile a case (case_file.h);
    without `shared_memory`, a call far over its budget has no shared-memory
    counters read (a kernel that uses none)."""
    return {"metrics": list(METRICS),
            "far_over_metrics": list(TRAFFIC_METRICS + (SHARED_METRICS if shared_memory else ()))}
