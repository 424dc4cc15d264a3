"""The roofline's Python side: parsing the tool's report and the roofline
arithmetic, on the figures tilelab-roofline printed on an H100
(roofline_fixtures.py). No GPU is needed. The per-GPU cache and how the tool
is run and its failures reported: test_roofline_tool.py."""

import json
import math

import pytest
from roofline_fixtures import DELETE, H100_REPORT, H100_UUID, MEASURED_AT, h100_report

from tilelab.grading import gpu_ceilings as roofline
from tilelab.grading.gpu_ceilings import Ceilings, RooflineError


# --- parsing and arithmetic --------------------------------------------------

def test_the_report_gives_the_median_rates(h100):
    assert h100.device_name == "NVIDIA H100 80GB HBM3"
    assert h100.device_uuid == H100_UUID
    assert h100.fp32_gflops == 65100.0
    assert h100.dram_gbps == 3000.0
    assert h100.l2_gbps == 6500.0
    assert h100.shared_gbps == 30000.0
    assert h100.measured_at == MEASURED_AT
    assert h100.raw == H100_REPORT


def test_parse_report_reads_the_tools_stdout():
    ceilings = roofline.parse_report(json.dumps(H100_REPORT, indent=2) + "\n", MEASURED_AT)
    assert ceilings == roofline.ceilings_from_report(h100_report(), MEASURED_AT)


def test_measured_at_defaults_to_now_in_utc():
    ceilings = roofline.ceilings_from_report(h100_report())
    assert ceilings.measured_at.endswith("Z")
    assert len(ceilings.measured_at) == len("2026-11-21T09:30:00Z")


def test_ridge_point(h100):
    assert h100.ridge == pytest.approx(21.7)
    assert h100.bound(h100.ridge) == pytest.approx(65100.0)


@pytest.mark.parametrize(
    "intensity, gflops",
    [
        (0.25, 750.0),  # naive matmul's textbook intensity: bandwidth-bound
        (8.0, 24000.0),  # a 32 x 32 shared-memory tile: still below the ridge
        (683.0, 65100.0),  # compulsory traffic of a 4096^3 product: compute-bound
    ],
)
def test_bound_is_the_roofline(h100, intensity, gflops):
    assert h100.bound(intensity) == pytest.approx(gflops)


@pytest.mark.parametrize("intensity", [-1.0, math.nan])
def test_bound_rejects_a_meaningless_intensity(h100, intensity):
    with pytest.raises(ValueError):
        h100.bound(intensity)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"fp32_fma.gflops_median": 0.0}, "implausible FP32"),
        ({"fp32_fma.gflops_median": -65100.0}, "implausible FP32"),
        ({"fp32_fma.gflops_median": math.nan}, "implausible FP32"),
        ({"fp32_fma.gflops_median": 5.6e9, "fp32_fma.gflops_max": 5.7e9}, "implausible FP32"),
        ({"dram.gbps_median": 0.0}, "implausible DRAM"),
        ({"dram.gbps_median": math.inf, "dram.gbps_max": math.inf}, "implausible DRAM"),
        ({"dram.gbps_max": -1.0}, "implausible DRAM"),
        ({"dram.gbps_median": "3000"}, "must be a number"),
        ({"dram.gbps_median": True}, "must be a number"),
        ({"fp32_fma.gflops_max": 60000.0}, "maximum below its median"),
        ({"fp32_fma.runs": 0}, "no runs"),
        ({"dram.bytes_per_run": 0}, "no runs"),
        ({"dram.gbps_median": DELETE}, "lacks 'gbps_median'"),
        ({"device.uuid": DELETE}, "no 'uuid'"),
        ({"device.uuid": "../../home/x"}, "not a plain hex UUID"),
        ({"dram": DELETE}, "no 'dram' object"),
        ({"tool": "something-else"}, "not a version-2 tilelab-roofline report"),
        ({"version": 1}, "not a version-2 tilelab-roofline report"),  # a tool built before L2 and shared
        ({"version": 3}, "not a version-2 tilelab-roofline report"),
        # The on-chip levels are checked as DRAM is.
        ({"l2.gbps_median": 0.0}, "implausible L2"),
        ({"l2.gbps_median": -6500.0}, "implausible L2"),
        ({"l2.gbps_median": math.nan}, "implausible L2"),
        ({"l2.gbps_median": math.inf, "l2.gbps_max": math.inf}, "implausible L2"),
        ({"l2.gbps_median": 6.5e9, "l2.gbps_max": 6.6e9}, "implausible L2"),
        ({"l2.gbps_max": -1.0}, "implausible L2"),
        ({"l2.gbps_max": 6000.0}, "'l2' has a maximum below its median"),
        ({"l2.runs": 0}, "'l2' counts no runs"),
        ({"l2.bytes_per_run": 0}, "'l2' counts no runs"),
        ({"l2.gbps_median": DELETE}, "'l2' lacks 'gbps_median'"),
        ({"l2.gbps_median": "6500"}, "must be a number"),
        ({"l2": [6500.0]}, "no 'l2' object"),
        ({"shared.gbps_median": 0.0}, "implausible shared-memory"),
        ({"shared.gbps_median": -30000.0}, "implausible shared-memory"),
        ({"shared.gbps_median": math.nan}, "implausible shared-memory"),
        ({"shared.gbps_median": 3e9, "shared.gbps_max": 3.1e9}, "implausible shared-memory"),
        ({"shared.gbps_max": math.nan}, "implausible shared-memory"),
        ({"shared.gbps_max": 29000.0}, "'shared' has a maximum below its median"),
        ({"shared.runs": 0}, "'shared' counts no runs"),
        ({"shared.bytes_per_run": -1.0}, "'shared' counts no runs"),
        ({"shared.gbps_max": DELETE}, "'shared' lacks 'gbps_max'"),
        ({"shared.gbps_median": True}, "must be a number"),
    ],
)
def test_implausible_or_malformed_reports_are_rejected(changes, message):
    with pytest.raises(RooflineError, match=message):
        roofline.ceilings_from_report(h100_report(**changes), MEASURED_AT)


def test_the_on_chip_limits_are_two_orders_of_magnitude_above_the_figures_expected():
    # An H100 is expected at some 6.5 TB/s from L2 and 30 TB/s from shared
    # memory: both accepted, and a figure 100 times either still is.
    for section, median in (("l2", 6500.0), ("shared", 30000.0)):
        fast = roofline.ceilings_from_report(
            h100_report(**{f"{section}.gbps_median": 100 * median, f"{section}.gbps_max": 100 * median}))
        assert getattr(fast, f"{section}_gbps") == 100 * median


@pytest.mark.parametrize("missing", [None, DELETE])
def test_a_level_the_tool_could_not_measure_is_none(missing):
    # The tool prints null for a level it cannot measure on its GPU; a report
    # without the section reads the same. The other ceilings stand.
    ceilings = roofline.ceilings_from_report(h100_report(l2=missing), MEASURED_AT)
    assert ceilings.l2_gbps is None and ceilings.shared_gbps == 30000.0
    assert (ceilings.fp32_gflops, ceilings.dram_gbps) == (65100.0, 3000.0)
    assert Ceilings.from_dict(json.loads(json.dumps(ceilings.to_dict()))) == ceilings
    assert ceilings.summary()["l2_gbps"] is None
    assert "L2 bandwidth:   not measured" in roofline.describe(ceilings)


@pytest.mark.parametrize("text", ["", "tilelab-roofline: warming up\n", "[1, 2]", '{"version": 1'])
def test_output_that_is_not_a_report_is_rejected(text):
    with pytest.raises(RooflineError):
        roofline.parse_report(text)


def test_to_dict_and_from_dict_round_trip(h100):
    data = json.loads(json.dumps(h100.to_dict()))
    assert (data["version"], data["l2_gbps"], data["shared_gbps"]) == (roofline.REPORT_VERSION, 6500.0, 30000.0)
    assert Ceilings.from_dict(data) == h100


def test_figures_given_by_hand_leave_the_on_chip_levels_out():
    # As the handout and the tests build them: positional, without L2 or shared.
    given = Ceilings("NVIDIA H100 80GB HBM3", H100_UUID, 65100.0, 3000.0, MEASURED_AT, {})
    assert given.l2_gbps is None and given.shared_gbps is None
    assert Ceilings.from_dict(json.loads(json.dumps(given.to_dict()))) == given


def test_summary_records_every_level(h100):
    summary = h100.summary()
    assert (summary["fp32_gflops"], summary["dram_gbps"]) == (65100.0, 3000.0)
    assert (summary["l2_gbps"], summary["shared_gbps"]) == (6500.0, 30000.0)


@pytest.mark.parametrize(
    "changes",
    [{"measured_at": "yesterday"}, {"fp32_gflops": -1.0}, {"raw": []}, {"device_uuid": ""}, {"dram_gbps": None},
     {"l2_gbps": -1.0}, {"l2_gbps": math.nan}, {"l2_gbps": 1e12}, {"l2_gbps": "fast"}, {"shared_gbps": 0.0},
     {"shared_gbps": math.inf}, {"shared_gbps": True}, {"version": 1}, {"version": None}],
)
def test_from_dict_rejects_bad_fields(h100, changes):
    with pytest.raises(RooflineError):
        Ceilings.from_dict(dict(h100.to_dict(), **changes))


def test_from_dict_rejects_a_missing_field(h100):
    data = h100.to_dict()
    del data["dram_gbps"]
    with pytest.raises(RooflineError, match="missing key"):
        Ceilings.from_dict(data)


def test_describe_names_the_figures_and_the_cache(h100, cache):
    text = roofline.describe(h100)
    assert "NVIDIA H100 80GB HBM3" in text
    assert "65,100 GFLOP/s" in text and "best 65,200" in text
    assert "3,000 GB/s" in text and "best 3,020" in text
    assert "L2 bandwidth:   6,500 GB/s (median of 20 runs; best 6,600)" in text
    assert "Shared memory:  30,000 GB/s across all SMs (median of 20 runs; best 30,200)" in text
    assert "21.7 FLOP/B" in text
    assert MEASURED_AT in text
    assert str(cache / f"roofline-{H100_UUID}.json") in text

