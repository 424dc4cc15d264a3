"""Whether the GPU throttled while something was timed, and why, in words.

The trusted harness reads the GPU's clocks, power, temperature and NVML's
throttle reasons just before the first timed call and just after the last,
and writes them as the "clocks" object of each timing result
(grader/harness/core/gpu_clocks.h has the shape). A GPU held at its power
or thermal limit runs every kernel slower, so a throttled timing is taken
again, and one that throttles twice goes to staff instead of being called
slow. The object comes from a process that ran beside student code: any
field may be missing or of the wrong type, and what is not understood is
left out rather than believed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

# Every reason the harness names (gpu_clocks.cpp), in a student's words. All
# of them slow a kernel; idle, application and display clocks are never named.
REASON_WORDS = {
    "sw_power_cap": "held at its power limit",
    "hw_slowdown": "slowed down by the hardware",
    "sw_thermal_slowdown": "slowed down to stay cool",
    "hw_thermal_slowdown": "slowed down by the hardware for its temperature",
    "hw_power_brake_slowdown": "braked by the power supply",
    "power_violation": "held below its clocks by the power limit during the timed calls",
    "thermal_violation": "held below its clocks by its temperature during the timed calls",
}
# The figures of one reading that are kept, with what they may plausibly be:
# a value outside its range is a garbled field, not a measurement.
READING_RANGES = {
    "sm_mhz": (0.0, 10_000.0),
    "memory_mhz": (0.0, 50_000.0),
    "power_w": (0.0, 10_000.0),
    "temperature_c": (-50.0, 200.0),
}
MESSAGE_LIMIT = 300  # characters of the harness's "why not" kept


@dataclass(frozen=True)
class Clocks:
    """What one timing's "clocks" object says."""

    available: bool
    throttled: bool = False
    reasons: tuple = ()  # names from REASON_WORDS, in the harness's order
    before: dict = field(default_factory=dict)  # READING_RANGES name -> float, only the figures read
    after: dict = field(default_factory=dict)
    message: str = ""  # why there are no readings

    @property
    def why(self) -> str:
        """The reasons in words: "held at its power limit and slowed down to stay cool"."""
        words = [REASON_WORDS[r] for r in self.reasons]
        if not words:
            return "slowed down for a reason it did not name"
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]

    @property
    def figures(self) -> str:
        """Before -> after, for staff: "SM 1980 -> 1755 MHz, memory 2619 -> 2619 MHz, 118 -> 699 W, 45 -> 83 C"."""
        parts = []
        for name, label, unit in (("sm_mhz", "SM ", " MHz"), ("memory_mhz", "memory ", " MHz"),
                                  ("power_w", "", " W"), ("temperature_c", "", " C")):
            if name in self.before or name in self.after:
                parts.append(f"{label}{_figure(self.before.get(name))} -> {_figure(self.after.get(name))}{unit}")
        return ", ".join(parts) or "no figures read"

    def to_dict(self) -> dict:
        """The summary a Speed or a calibration keeps: read back by read_clocks."""
        if not self.available:
            return {"available": False, "message": self.message}
        return {"available": True, "throttled": self.throttled, "reasons": list(self.reasons),
                "before": dict(self.before), "after": dict(self.after)}


def _figure(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:.0f}"


def _reading(obj) -> dict:
    """The plausible figures of one reading; the rest left out."""
    if not isinstance(obj, dict):
        return {}
    kept = {}
    for name, (low, high) in READING_RANGES.items():
        value = obj.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and low <= value <= high:
            kept[name] = round(float(value), 1)
    return kept


def read_clocks(obj) -> Clocks:
    """A "clocks" object (the harness's, or a Clocks.to_dict summary) read
    defensively. Throttled when the harness says so or names a reason that
    slows a kernel; a reason it names that is not known is not believed."""
    if not isinstance(obj, dict):
        return Clocks(False, message="the harness reported no clock readings")
    if obj.get("available") is not True:
        message = obj.get("message")
        return Clocks(False, message=str(message)[:MESSAGE_LIMIT] if message else "the clocks could not be read")
    listed = obj.get("reasons")
    reasons = []
    for r in listed if isinstance(listed, list) else []:
        if isinstance(r, str) and r in REASON_WORDS and r not in reasons:
            reasons.append(r)
    throttled = obj.get("throttled") is True or bool(reasons)
    return Clocks(True, throttled, tuple(reasons), _reading(obj.get("before")), _reading(obj.get("after")))


def of_timing(timing) -> Clocks:
    """The clocks of one harness timing result (a case's "timing" object)."""
    return read_clocks(timing.get("clocks") if isinstance(timing, dict) else None)


def by_case(cases) -> dict:
    """The clocks of each timed case of a harness result's "cases", by case name."""
    found = {}
    for case in cases if isinstance(cases, list) else []:
        if isinstance(case, dict) and isinstance(case.get("name"), str):
            found[case["name"]] = of_timing(case.get("timing"))
    return found


def throttled_flag(clocks: Clocks, case: str) -> str:
    """A Speed's flag for a size that throttled when timed and again when timed once more."""
    return (f"At {case} the GPU was {clocks.why} while this part was timed, and again when it was timed a second "
            "time: the time may understate your kernel's speed. It is scored as measured, and a TA will look at it.")


def staff_note(part_id: str, case: str, clocks: Clocks) -> str:
    """What staff read of a part whose size throttled twice: why, and the figures."""
    return (f"{part_id} at {case}: the GPU was {clocks.why} ({clocks.figures}) when the part was timed, and again "
            "when it was timed once more. Its speed is scored as measured; look at it, and regrade on a cool, idle "
            "GPU if the score matters.")


def throttled_words(summaries) -> str:
    """Why timings throttled (Speeds' `clocks` summaries), in words; "" when none did."""
    for summary in summaries:
        clocks = read_clocks(summary)
        if clocks.throttled:
            return clocks.why
    return ""
