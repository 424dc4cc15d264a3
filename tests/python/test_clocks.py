"""The GPU's clocks around a timing (tilelab.grading.clocks): whether it
throttled and why, read from the "clocks" object tilelab-harness writes
(grader/harness/core/gpu_clocks.h), what a student and staff are told of a
part that throttled twice, and how a calibration keeps and reports it.

The readings below are shaped exactly as gpu_clocks.cpp writes them. Their
figures are provisional, made up to look like an H100 SXM (SM boost 1980 MHz,
HBM3 2619 MHz, 700 W board limit) until readings from a real one replace them.
"""

import copy
import json
import math
import re
from pathlib import Path

import pytest
from grade_fixtures import grade_result, passing_tiled

from tilelab.grading import calibration, clocks
from tilelab.grading.calibration import Calibration, ReferenceSpeed
from tilelab.grading.clocks import read_clocks
from tilelab.grading.gpu_ceilings import Ceilings
from tilelab.grading.model import MEASURED_RULE
from tilelab.outputs.gradescope import results_json
from tilelab.outputs.rendering import render_markdown
from tilelab.outputs.speed_words import speed_verdict
from tilelab.spec.assignment import load_assignment

ROOT = Path(__file__).resolve().parents[2]


def reading(sm, memory, power, temperature, reasons, power_ns=0, thermal_ns=0) -> dict:
    return {"sm_mhz": sm, "memory_mhz": memory, "power_w": power, "temperature_c": temperature,
            "event_reasons": reasons, "power_violation_ns": power_ns, "thermal_violation_ns": thermal_ns}


# Provisional figures (see the module's docstring).
STEADY = {
    "available": True, "pci_bus_id": "00000000:19:00.0", "elapsed_ms": 412.7,
    "before": reading(1980, 2619, 302.4, 44, 0x0, 7_000_000),
    "after": reading(1980, 2619, 611.9, 52, 0x1, 7_000_000),  # gpu_idle after the last call: no slowdown
    "violation_ms": {"power": 0.0, "thermal": 0.0}, "throttled": False, "reasons": [],
}
POWER_CAPPED = {
    "available": True, "pci_bus_id": "00000000:19:00.0", "elapsed_ms": 498.3,
    "before": reading(1980, 2619, 351.0, 61, 0x0, 7_000_000),
    "after": reading(1755, 2619, 699.2, 83, 0x4 | 0x40, 7_000_000 + 180_000_000),
    "violation_ms": {"power": 180.0, "thermal": 0.0}, "throttled": True,
    "reasons": ["sw_power_cap", "hw_thermal_slowdown", "power_violation"],
}
UNAVAILABLE = {"available": False, "message": "NVML (libnvidia-ml.so.1, part of the NVIDIA driver) could not be "
                                              "loaded: libnvidia-ml.so.1: cannot open shared object file"}


def test_a_steady_gpu_is_not_throttled_and_its_figures_are_kept():
    c = read_clocks(STEADY)
    assert c.available and not c.throttled and c.reasons == ()
    assert c.before == {"sm_mhz": 1980.0, "memory_mhz": 2619.0, "power_w": 302.4, "temperature_c": 44.0}
    assert c.figures == "SM 1980 -> 1980 MHz, memory 2619 -> 2619 MHz, 302 -> 612 W, 44 -> 52 C"


def test_a_power_capped_gpu_is_throttled_and_says_why():
    c = read_clocks(POWER_CAPPED)
    assert c.throttled and c.reasons == ("sw_power_cap", "hw_thermal_slowdown", "power_violation")
    assert c.why == ("held at its power limit, slowed down by the hardware for its temperature and held below its "
                     "clocks by the power limit during the timed calls")
    assert "SM 1980 -> 1755 MHz" in c.figures and "351 -> 699 W" in c.figures


def test_without_nvml_the_clocks_are_unavailable_and_nothing_is_throttled():
    c = read_clocks(UNAVAILABLE)
    assert not c.available and not c.throttled and "libnvidia-ml.so.1" in c.message
    assert not read_clocks(None).throttled and "no clock readings" in read_clocks(None).message
    # An older harness wrote no "clocks": its timing is read as not throttled.
    assert clocks.of_timing({"median_event_ms": 14.9}) == read_clocks(None)


@pytest.mark.parametrize("garbage", [
    {**POWER_CAPPED, "available": "true"},  # only true itself is believed
    {**POWER_CAPPED, "available": 1},
    [POWER_CAPPED], "throttled", 7, None,
])
def test_a_clocks_object_that_is_not_one_is_unavailable(garbage):
    c = read_clocks(garbage)
    assert not c.available and not c.throttled


def test_garbled_fields_are_left_out_never_believed_or_fatal():
    garbled = copy.deepcopy(POWER_CAPPED)
    garbled["before"] = {"sm_mhz": "1980", "memory_mhz": math.nan, "power_w": True, "temperature_c": [44]}
    garbled["after"] = {"sm_mhz": 1e30, "memory_mhz": -5, "power_w": math.inf, "temperature_c": 83}
    garbled["reasons"] = ["sw_power_cap", "sw_power_cap", "made_up", 4, None, {"x": 1}]
    garbled["throttled"] = "no"
    c = read_clocks(garbled)
    assert c.before == {} and c.after == {"temperature_c": 83.0}
    assert c.reasons == ("sw_power_cap",) and c.throttled  # a known reason throttles whatever "throttled" says
    assert read_clocks({**STEADY, "throttled": "yes"}).throttled is False
    assert read_clocks({**STEADY, "reasons": "sw_power_cap"}).throttled is False
    assert read_clocks({**STEADY, "before": "x", "after": None}).figures == "no figures read"


def test_throttled_with_no_reason_named_still_throttles():
    c = read_clocks({**STEADY, "throttled": True, "reasons": ["something_newer"]})
    assert c.throttled and c.reasons == () and c.why == "slowed down for a reason it did not name"


def test_a_summary_reads_back_as_what_it_summarises():
    for obj in (STEADY, POWER_CAPPED, UNAVAILABLE):
        c = read_clocks(obj)
        assert read_clocks(json.loads(json.dumps(c.to_dict()))) == c


def test_clocks_are_found_by_case_name_in_a_harness_result():
    cases = [{"name": "t4096", "timing": {"clocks": POWER_CAPPED}}, {"name": "t2048", "timing": {"clocks": STEADY}},
             {"name": "no-timing"}, {"timing": {"clocks": POWER_CAPPED}}, "junk", None]
    found = clocks.by_case(cases)
    assert set(found) == {"t4096", "t2048", "no-timing"}
    assert found["t4096"].throttled and not found["t2048"].throttled and not found["no-timing"].available
    assert clocks.by_case({"cases": cases}) == {} and clocks.by_case(None) == {}


def test_the_harness_names_exactly_the_reasons_that_have_words():
    """gpu_clocks.cpp's names and REASON_WORDS are one list in two languages."""
    source = (ROOT / "grader" / "harness" / "core" / "gpu_clocks.cpp").read_text()
    table = source.split("kSlowingReasons[] = {", 1)[1].split("};", 1)[0]
    named = re.findall(r'"(\w+)"', table) + re.findall(r'push_back\("(\w+)"\)', source)
    assert sorted(named) == sorted(clocks.REASON_WORDS)


# --- what a student and staff read of a part that throttled twice -------------------------


def _throttled_tiled(fraction: float, gflops: float):
    """The tiled part, timed twice with the GPU power-capped both times."""
    part = passing_tiled()
    c = read_clocks(POWER_CAPPED)
    speed = part.speed
    speed.gflops, speed.fraction = gflops, fraction
    speed.flags = [clocks.throttled_flag(c, speed.case)]
    speed.clocks = dict(c.to_dict(), retimed=True)
    part.speed_score = round(fraction * part.speed_max, 4)
    return part


def test_a_throttled_slow_timing_is_not_called_slow():
    part = _throttled_tiled(0.0, 4100.0)
    verdict = speed_verdict(part.speed, part.speeds)
    assert "slower" not in verdict and "no-credit threshold" not in verdict
    assert "held at its power limit" in verdict and "a TA will look at it" in verdict
    # The same figure on a GPU that did not throttle is judged as usual.
    part.speed.clocks = dict(read_clocks(STEADY).to_dict(), retimed=False)
    assert "far slower than the reference solution" in speed_verdict(part.speed, part.speeds)


def test_a_throttled_size_other_than_the_headline_one_also_holds_the_verdict():
    part = passing_tiled()
    part.speed.fraction, part.speed.gflops = 0.0, 4100.0
    second = copy.deepcopy(part.speed)
    part.speed.clocks = read_clocks(STEADY).to_dict()
    second.clocks = read_clocks(POWER_CAPPED).to_dict()
    assert "held at its power limit" in speed_verdict(part.speed, [part.speed, second])
    assert "far slower" in speed_verdict(part.speed, [part.speed])


def test_a_throttled_timing_that_reached_the_target_keeps_its_verdict():
    part = _throttled_tiled(1.0, 9300.0)
    assert speed_verdict(part.speed, part.speeds) == "At or above the full-credit target."


def test_the_report_and_gradescope_say_the_gpu_throttled():
    part = _throttled_tiled(0.0, 4100.0)
    md = render_markdown(grade_result(part)).split("### Speed", 1)[1]
    assert "far slower" not in md
    assert "the GPU was held at its power limit" in md and "a TA will look at it" in md
    doc = results_json(grade_result(part), load_assignment(ROOT / "assignment.yaml"))
    (speed_test,) = [t for t in doc["tests"] if t["name"].endswith(": speed")]
    assert "At 4096x4096x4096 the GPU was held at its power limit" in speed_test["output"]


def test_staff_read_the_reasons_and_the_figures():
    note = clocks.staff_note("tiled", "4096x4096x4096", read_clocks(POWER_CAPPED))
    assert note.startswith("tiled at 4096x4096x4096: the GPU was held at its power limit")
    assert "SM 1980 -> 1755 MHz" in note and "regrade" in note
    flag = clocks.throttled_flag(read_clocks(POWER_CAPPED), "2048x4096x8192")
    assert flag.startswith("At 2048x4096x8192 the GPU was") and "scored as measured" in flag


# --- calibration: the references' clocks, a retime, and a mark on what still throttled ------


def _reference(part="tiled", runs=(9188.0, 9191.0, 9246.0), clocks_of=(STEADY, STEADY, STEADY), retimed=False,
               size=(4096, 4096, 4096)):
    return ReferenceSpeed(part, *size, runs, tuple(read_clocks(c).to_dict() for c in clocks_of), retimed)


def _calibration(*speeds) -> Calibration:
    return Calibration(MEASURED_RULE, "GPU-6b1f", "NVIDIA H100 80GB HBM3", "f" * 64, "2026-11-22T10:00:00Z", 6.1,
                       tuple(speeds))


def test_a_reference_run_that_throttled_marks_its_size():
    assert _reference().throttled is None
    assert _reference(clocks_of=(STEADY, POWER_CAPPED, STEADY)).throttled == read_clocks(POWER_CAPPED)
    assert ReferenceSpeed("tiled", 1, 1, 1, (1.0,)).throttled is None  # an older cache: no clocks


def test_only_the_sizes_that_throttled_take_the_second_timing():
    square, wide = (4096, 4096, 4096), (2048, 4096, 8192)
    first = [_reference("cublas", (41000.0,) * 3, (STEADY, POWER_CAPPED, STEADY), size=square),
             _reference("cublas", (51929.0,) * 3, size=wide)]
    again = [_reference("cublas", (51661.0,) * 3, size=square), _reference("cublas", (50000.0,) * 3, size=wide)]
    kept = calibration.retimed(first, again)
    assert [(s.case, s.gflops, s.retimed) for s in kept] == [("4096x4096x4096", 51661.0, True),
                                                             ("2048x4096x8192", 51929.0, False)]
    assert kept[0].throttled is None
    # Timed again and throttled again: the second figure, still marked as throttled.
    twice = calibration.retimed(first, [_reference("cublas", (43000.0,) * 3, (POWER_CAPPED,) * 3, size=square)])
    assert twice[0].gflops == 43000.0 and twice[0].retimed and twice[0].throttled is not None


def test_a_calibration_that_still_throttled_says_so_and_keeps_it_in_its_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    still = _calibration(_reference(clocks_of=(POWER_CAPPED,) * 3, retimed=True), _reference("naive", (5294.0,) * 3))
    calibration.save(still)
    loaded = calibration.load_cached("GPU-6b1f")
    assert loaded == still and loaded.speeds[0].retimed
    assert still.throttled == [f"tiled at 4096x4096x4096: the GPU was {read_clocks(POWER_CAPPED).why} "
                               f"({read_clocks(POWER_CAPPED).figures})"]
    assignment = load_assignment(ROOT / "assignment.yaml")
    ceilings = Ceilings("gpu", "GPU-6b1f", 65094.0, 3040.0, "2026-11-22T00:00:00Z", {})
    assert still.summary(assignment, ceilings)["throttled"] == still.throttled
    assert "Throttled: tiled at 4096x4096x4096" in calibration.describe(still, ceilings, assignment)
    healthy = _calibration(_reference())
    assert healthy.throttled == [] and "Throttled" not in calibration.describe(healthy, ceilings, assignment)


def test_a_cache_with_garbled_clocks_still_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    path = calibration.save(_calibration(_reference()))
    data = json.loads(path.read_text())
    data["speeds"][0]["clocks"] = "garbled"
    data["speeds"][0]["retimed"] = "yes"
    path.write_text(json.dumps(data))
    loaded = calibration.load_cached("GPU-6b1f")
    assert loaded.speeds[0].clocks == () and loaded.speeds[0].retimed is False
