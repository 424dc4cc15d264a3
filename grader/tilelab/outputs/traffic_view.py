"""What one call of a part moved, worded for the reports and `tilelab check`.

The counters (grading/traffic.py) become rows of already-formatted text:
per level of the memory hierarchy the bytes of one call and their FLOP/B
beside the reference solution's, then the few figures that say why a kernel
moves what it moves. The Markdown and HTML reports lay out the same rows, and
the roofline plot places the same levels, so the three cannot disagree.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..grading.model import PartResult, Speed
from ..grading.traffic import GLOBAL, LEVEL_TITLES, LEVELS, Traffic
from ..text.numbers import fmt_flop_per_byte, fmt_gigabytes, fmt_percent
from .speed_words import positive, timed_sizes

# The level whose intensity the lecture teaches (0.25 naive, T/4 tiled).
LECTURE_LEVEL = GLOBAL
NONE = "-"


def profiled_speed(part: PartResult) -> Optional[Speed]:
    """The timed size whose call was profiled (the harness profiles the last
    timing size), so a point is placed at that size's GFLOP/s."""
    case = part.traffic.case if part.traffic is not None else None
    return next((s for s in timed_sizes(part) if s.case == case), part.speed)


def intensity_of(traffic: Optional[Traffic], level: str) -> Optional[float]:
    found = traffic.level(level) if traffic is not None else None
    return found.intensity if found is not None and positive(found.intensity) else None


def loads_per_fma(intensity: float) -> str:
    """The lecture's reading of a global-load intensity: each FMA (2 FLOP)
    takes one float of each operand, so at I FLOP/B one 4-byte load of an
    operand serves 4 x I FMAs (1 for the naive kernel, T for T x T tiles)."""
    reuse = 4 * intensity
    if 0.75 <= reuse < 1.5:
        return "one 4-byte load per FMA per operand"
    if reuse < 0.75:
        return f"{1 / reuse:.2g} 4-byte loads per FMA per operand"
    return f"one 4-byte load per {reuse:.2g} FMAs per operand" if reuse < 10 else \
        f"one 4-byte load per {reuse:,.0f} FMAs per operand"


def lecture_sentence(traffic: Traffic, reference: Optional[Traffic]) -> str:
    """One line in the lecture's terms: the global-load intensity and what it
    means per FMA, beside the reference solution's."""
    mine = intensity_of(traffic, LECTURE_LEVEL)
    if mine is None:
        return ""
    text = f"Global loads: {fmt_flop_per_byte(mine)} FLOP/B, {loads_per_fma(mine)}"
    theirs = intensity_of(reference, LECTURE_LEVEL)
    if theirs is None:
        return text + "; the reference solution's counters were not read on this GPU."
    if fmt_flop_per_byte(theirs) == fmt_flop_per_byte(mine):
        return text + f"; the reference: {fmt_flop_per_byte(theirs)} FLOP/B, the same."
    reuse = loads_per_fma(theirs).replace("4-byte load", "load").replace(" per operand", "")
    return text + f"; the reference: {fmt_flop_per_byte(theirs)} FLOP/B, {reuse}."


def wide_load_note(traffic: Traffic) -> str:
    """The global-load level counts a warp's load instruction as 32 floats;
    float4 loads ask for four times that, which shows as far fewer bytes
    asked for than L1 moved. Scattered loads of single floats move more
    than they ask for too, but their sectors per request are not a whole
    multiple of a coalesced warp's (8 for float2, 16 for float4)."""
    asked, moved = intensity_of(traffic, LECTURE_LEVEL), intensity_of(traffic, "L1")
    sectors = traffic.sectors_per_request
    if asked is None or moved is None or asked < 2 * moved or sectors not in (8.0, 16.0):
        return ""
    return ("This kernel loads more than one float per instruction (float4, for instance): the global-load line "
            "counts each instruction as 32 floats, so it reads up to four times high; L1 shows the bytes moved.")


def _level_rows(traffic: Traffic, reference: Optional[Traffic]) -> list:
    rows = []
    for name in LEVELS:
        level = traffic.level(name)
        if level is None:
            continue
        theirs = intensity_of(reference, name)
        rows.append({
            "level": name,
            "title": LEVEL_TITLES[name],
            "bytes": fmt_gigabytes(level.bytes),
            "intensity": fmt_flop_per_byte(level.intensity) if positive(level.intensity) else NONE,
            "reference": fmt_flop_per_byte(theirs) if theirs is not None else NONE,
            "lecture": name == LECTURE_LEVEL,
        })
    return rows


def _per_shared_instruction(traffic: Optional[Traffic]) -> str:
    if traffic is None or traffic.bank_conflicts is None or traffic.shared_instructions is None:
        return NONE
    if not traffic.shared_instructions:
        return "no shared memory"
    return f"{traffic.bank_conflicts / traffic.shared_instructions:.2g}"


def _occupancy(traffic: Optional[Traffic]) -> str:
    """Achieved occupancy, and the theoretical one with what limits it where
    the counters had them (both in % of the SM's warps)."""
    if traffic is None or traffic.achieved_occupancy is None:
        return NONE
    text = fmt_percent(traffic.achieved_occupancy / 100)
    theoretical, limiter = getattr(traffic, "theoretical_occupancy", None), getattr(traffic, "occupancy_limiter", "")
    if positive(theoretical):
        # At 100 % every resource leaves room for all the warps: none limits.
        limited = f", limited by {limiter}" if limiter and theoretical < 100 else ""
        text += f" (theoretical {fmt_percent(theoretical / 100)}{limited})"
    return text


def _stalls(traffic: Optional[Traffic]) -> str:
    if traffic is None or not traffic.stalls:
        return NONE
    # A no-break space inside "52.6 %", so that a narrow column never parts a figure from its unit.
    return "; ".join(f"{reason} {fmt_percent(share)}".replace(" %", "\u00a0%") for reason, share in traffic.stalls)


# Why a part's table lacks the SM's figures (traffic.TRAFFIC_METRICS).
FAR_OVER_NOTE = ("Only the memory traffic was read: this kernel's calls take too long to earn speed points, and each "
                 "further pass of the counters would be one more such call.")


def _fact_rows(traffic: Traffic, reference: Optional[Traffic]) -> list:
    """(what, this part, the reference) for the figures that say why."""
    def both(read: Callable) -> tuple:
        return read(traffic), read(reference) if reference is not None else NONE

    def number(value, digits: str = ".1f") -> str:
        return format(value, digits) if value is not None else NONE

    rows = [
        ("global-load sectors per request (4: a warp's 32 floats side by side; up to 32 when scattered)",
         *both(lambda t: number(t.sectors_per_request))),
        ("bank conflicts per shared-memory instruction (extra passes; 0 is none)", *both(_per_shared_instruction)),
        ("achieved occupancy (active warps, % of the SM's maximum)", *both(_occupancy)),
        ("FMA-pipe share of instructions (FFMA, and IMAD for addresses)",
         *both(lambda t: fmt_percent(t.fma_share) if t.fma_share is not None else NONE)),
        ("top stall reasons (share of the warps' active cycles)", *both(_stalls)),
    ]
    if traffic.local_bytes or (reference is not None and reference.local_bytes):
        rows.append(("local memory (register spills, arrays indexed at run time)",
                     *both(lambda t: fmt_gigabytes(t.local_bytes))))
    return rows


def traffic_hints(part: PartResult) -> list:
    """Hints read from the counters, where the grading made any."""
    return [str(h) for h in getattr(part, "traffic_hints", None) or []]


def traffic_view(part: PartResult, redact: Callable[[str], str] = lambda text: text) -> dict:
    """What the report shows of a part's counters: "shown" False leaves the
    section out (a part not timed, as with `check --fast`); a part timed
    without counters gets one line saying why ("note")."""
    traffic, reference = part.traffic, part.reference_traffic
    view = {"shown": False, "note": "", "case": "", "sentence": "", "wide_loads": "", "far_over": "", "levels": [],
            "facts": [], "hints": [], "has_reference": reference is not None}
    if traffic is None:
        if part.traffic_note:
            view.update(shown=True, note=redact(f"Counters were not read for this part: {part.traffic_note}."))
        return view
    view.update(
        shown=True, case=redact(traffic.case), sentence=lecture_sentence(traffic, reference),
        wide_loads=wide_load_note(traffic), far_over=FAR_OVER_NOTE if traffic.far_over else "",
        levels=_level_rows(traffic, reference),
        facts=[list(row) for row in _fact_rows(traffic, reference)],
        hints=[redact(h) for h in traffic_hints(part)],
    )
    return view


def check_row(part: PartResult) -> Optional[list]:
    """`tilelab check`'s line of a part's counters: global loads and DRAM
    FLOP/B beside the reference's, and the hints; None where nothing was
    profiled (check --fast times nothing, so reads no counters)."""
    traffic, reference = part.traffic, part.reference_traffic
    if traffic is None:
        # The why goes in the last column, the one that wraps.
        return [part.id, NONE, NONE, f"counters not read: {part.traffic_note}"] if part.traffic_note else None

    def versus(level: str) -> str:
        mine, theirs = intensity_of(traffic, level), intensity_of(reference, level)
        text = fmt_flop_per_byte(mine) if mine is not None else NONE
        return text + (f" (ref {fmt_flop_per_byte(theirs)})" if theirs is not None else "")

    hints = traffic_hints(part)
    first = hints[0] + (f" (+{len(hints) - 1} more in the report)" if len(hints) > 1 else "") if hints else ""
    return [part.id, versus(LECTURE_LEVEL), versus("DRAM"), first]
