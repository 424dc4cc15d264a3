"""What to try next, read from one call's counters (traffic.py) and said for the part.

Each hint names the part, the figures that raised it and one change to
try. The thresholds sit far from what every reference solution measures
on an H100 (tests/python/data/h100-reference-counters.json), so a kernel
written the way the lecture writes it gets none. Like the counters they
read, hints give no points and take none away.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..text.numbers import fmt_gigabytes, fmt_percent
from .occupancy import BLOCK_SIZE, LIMITERS, REGISTERS, SHARED_MEMORY
from .traffic import GLOBAL, Traffic, profiled_case, with_occupancy

if TYPE_CHECKING:
    from .context import PartState

# A warp whose threads each load at most 16 bytes (a float4) asks for at
# most 512 bytes: 16 sectors when the addresses are contiguous. More
# sectors per request means the threads' addresses are scattered. The
# references measure 2 (naive), 4 (tiled) and 16 (challenge, float4).
UNCOALESCED_SECTORS = 16.0
# Beside the part's reference, a kernel whose loads take this many times the
# reference's sectors per request scatters them: the naive kernel with
# threadIdx.x picking the row in 16 x 16 blocks gives 8.5 against 2.
REFERENCE_SECTORS_FACTOR = 4.0
# A warp of contiguous floats: 128 bytes, four 32-byte sectors.
COALESCED_FLOAT_SECTORS = 4

# One extra shared-memory pass per load or store, on average: a 2-way
# conflict on every access, which doubles the time shared memory takes.
# The references measure under 0.01.
BANK_CONFLICTS_PER_INSTRUCTION = 1.0

# At or below a quarter of the SM's warps (four per scheduler) too few
# loads are in flight to hide memory's latency. Used only when the part's
# reference gives no figure: with one, the reference's own is the bar.
LOW_OCCUPANCY_PERCENT = 25.0
# Without a reference, a kernel whose warps seldom wait gains nothing from
# more of them: the register-tiled challenge reference waits 10 % of its
# warp cycles at 12.5 % occupancy, the one-output-per-thread references
# 27 % to 53 %.
WAITING_SHARE = 0.2
# The stall reasons (traffic.STALL_REASONS' words) that more resident warps would hide.
WAITS = ("waiting for global or local memory", "waiting for shared memory", "waiting at __syncthreads()")

# Every reference moves no local memory; any is a spill or an array the
# compiler could not keep in registers.
SPILL_BYTES = 0.0


def _l1_share(traffic: Optional[Traffic]) -> Optional[float]:
    """L1's bytes over the global loads the threads asked for (stores make it a little above 1 when coalesced)."""
    l1, asked = (traffic.level("L1"), traffic.level(GLOBAL)) if traffic is not None else (None, None)
    return l1.bytes / asked.bytes if l1 is not None and asked is not None and asked.bytes else None


def _pct(percent: float) -> str:
    return fmt_percent(percent / 100)


def _name(part_id: str, part_title: str) -> str:
    return f"{part_title} ({part_id})" if part_title and part_title != part_id else part_id


def coalescing_hint(name: str, traffic: Traffic, reference: Optional[Traffic]) -> Optional[str]:
    sectors = traffic.sectors_per_request
    against = reference.sectors_per_request if reference is not None else None
    scattered = sectors is not None and (sectors > UNCOALESCED_SECTORS
                                         or (against is not None and sectors > REFERENCE_SECTORS_FACTOR * against))
    if not scattered:
        return None
    text = (f"{name}: {sectors:.1f} sectors per global load request where a coalesced warp of floats needs "
            f"{COALESCED_FLOAT_SECTORS}: neighbouring threads (threadIdx.x) should read neighbouring addresses "
            f"— let threadIdx.x pick the column.")
    share, ref = _l1_share(traffic), _l1_share(reference)
    if share is not None:
        text += (f" L1 moved {fmt_gigabytes(traffic.level('L1').bytes)} for the {fmt_gigabytes(traffic.level(GLOBAL).bytes)} of "
                 f"loads your threads asked for ({share:.1f}x"
                 + (f"; the reference {ref:.1f}x" if ref is not None else "")
                 + "): a coalesced warp's loads move about as many bytes as they ask for, or fewer.")
    return text


def conflicts_per_instruction(traffic: Optional[Traffic]) -> Optional[float]:
    """Shared-memory bank conflicts per warp-level shared load or store; None without shared accesses."""
    if traffic is None or traffic.bank_conflicts is None or not traffic.shared_instructions:
        return None
    return traffic.bank_conflicts / traffic.shared_instructions


def bank_conflict_hint(name: str, traffic: Traffic, reference: Optional[Traffic]) -> Optional[str]:
    rate = conflicts_per_instruction(traffic)
    if rate is None or rate <= BANK_CONFLICTS_PER_INSTRUCTION:
        return None
    ref = conflicts_per_instruction(reference)
    against = f" (the reference: {ref:.3f})" if ref is not None else ""
    return (f"{name}: {rate:.1f} bank conflicts per shared-memory load or store{against}; each one is another "
            f"pass through shared memory. Let threadIdx.x run along a tile's row (As[ty][k], Bs[k][tx]) so the 32 "
            f"threads of a warp touch 32 different banks, or pad the tile (As[TILE][TILE + 1]) where a warp "
            f"must read down a column.")


def _reference_occupancy(reference: Optional[Traffic]) -> Optional[float]:
    """The reference's theoretical occupancy, else what it achieved (never above its theoretical one)."""
    if reference is None:
        return None
    return reference.theoretical_occupancy if reference.theoretical_occupancy is not None \
        else reference.achieved_occupancy


def _waiting_share(traffic: Traffic) -> Optional[float]:
    if not traffic.stalls:
        return None
    return sum(share for reason, share in traffic.stalls if reason in WAITS)


def _limited_by(traffic: Traffic) -> tuple:
    """The resources that allow the fewest blocks, and the fewest."""
    limits = traffic.occupancy_limits
    blocks = min(limits.values())
    return [name for name in LIMITERS if limits.get(name) == blocks], blocks


def _why(resource: str, blocks: int, inputs: dict) -> tuple:
    """What a resource's figures say, and what to try about it."""
    threads, regs = inputs.get("threads_per_block"), inputs.get("registers_per_thread")
    per = "block" if blocks == 1 else "blocks"
    if resource == REGISTERS:
        return (f"{regs} registers per thread x {threads} threads leave room for {blocks} {per} per SM",
                "use fewer registers per thread (fewer accumulators or values kept live at once), or ask the "
                f"compiler for {blocks + 1} blocks per SM with __launch_bounds__({threads}, {blocks + 1}) and check "
                "with -Xptxas -v that it did not spill")
    if resource == SHARED_MEMORY:
        return (f"{inputs.get('shared_bytes_per_block'):,} bytes of shared memory per block (with what the driver "
                f"reserves for each) leave room for {blocks} {per} per SM",
                "use a smaller tile, or fewer or smaller shared arrays")
    if resource == BLOCK_SIZE:
        slots = inputs.get("warps_per_sm", 0) * 32
        return (f"blocks of {threads} threads: {blocks} fit in the SM's {slots} thread slots",
                "use a block size that divides the SM's threads evenly, such as 256 or 512")
    return (f"blocks of {threads} threads, and an SM holds at most {blocks} blocks",
            "use larger blocks (more threads, each with the same work)")


def occupancy_hint(name: str, traffic: Traffic, reference: Optional[Traffic]) -> Optional[str]:
    occupancy = traffic.theoretical_occupancy
    if occupancy is None or not traffic.occupancy_limits:
        return None
    bar = _reference_occupancy(reference)
    if bar is not None:
        if occupancy >= bar:
            return None
        against = f" where the reference reaches {_pct(bar)}"
    else:
        waiting = _waiting_share(traffic)
        if occupancy > LOW_OCCUPANCY_PERCENT or (waiting is not None and waiting < WAITING_SHARE):
            return None
        against = ", too few to hide memory's latency"
        if waiting is not None:
            against += f" (its warps wait {_pct(100 * waiting)} of their cycles)"
    resources, blocks = _limited_by(traffic)
    reasons = [_why(resource, blocks, traffic.occupancy_inputs) for resource in resources]
    return (f"{name}: at most {_pct(occupancy)} of an SM's warps can be resident{against}. The limit is "
            f"{' and '.join(resources)}: {'; '.join(r[0] for r in reasons)}. To fit more, "
            f"{'; or '.join(r[1] for r in reasons)}.")


def spill_hint(name: str, traffic: Traffic) -> Optional[str]:
    if traffic.local_bytes <= SPILL_BYTES:
        return None
    return (f"{name}: {fmt_gigabytes(traffic.local_bytes)} of local-memory traffic per call: registers spilled to memory, "
            f"or an array indexed by a value only known at run time. Keep fewer accumulators per thread, index "
            f"per-thread arrays only by constants (fully unrolled loops), and if you set __launch_bounds__ with a "
            f"minimum of blocks per SM (or -maxrregcount), allow more registers; -Xptxas -v prints each kernel's "
            f"registers and spill bytes.")


def hints_for(part_id: str, part_title: str, traffic: Traffic, reference: Optional[Traffic]) -> list:
    """The hints one call's counters give for a part, most telling first; empty when none applies."""
    name = _name(part_id, part_title)
    found = [coalescing_hint(name, traffic, reference), bank_conflict_hint(name, traffic, reference),
             occupancy_hint(name, traffic, reference), spill_hint(name, traffic)]
    return [hint for hint in found if hint]


def take_counters(s: PartState, harness_result: Optional[dict]) -> None:
    """The part's traffic and its hints from the counters its run read of
    its last case (untrusted, any shape), or why there are none."""
    listed = (harness_result or {}).get("cases")
    last = listed[-1] if isinstance(listed, list) and listed and isinstance(listed[-1], dict) else {}
    profiled = profiled_case(last)
    s.result.traffic_note = profiled.note
    if profiled.traffic is not None:
        # The profiled case's launches and the harness's device facts.
        s.result.traffic = with_occupancy(profiled.traffic, last.get("launches"),
                                          (harness_result or {}).get("device"))
        s.result.traffic_hints = hints_for(s.part.id, s.part.title, s.result.traffic,
                                           s.result.reference_traffic)
