"""The roofline's Python side: parsing the tool's report, the roofline
arithmetic, the per-GPU cache, and how failures of the tool are reported.

No GPU is needed. Where a test must run the tool, it runs a stand-in: a small
script that keeps the tool's command-line contract (`--device`, `--runs N`,
JSON on stdout, exit status 5 without a device) and prints fixed figures."""

import json
import os
import math
import stat
import sys
from pathlib import Path

import pytest

from tilelab.grading import gpu_cache
from tilelab.grading import gpu_ceilings as roofline
from tilelab.grading.gpu_ceilings import Ceilings, RooflineError

H100_UUID = "5a3c1e2f-0b7d-4c9e-8f21-6d4b3a2c1e0f"

# What tilelab-roofline printed on an H100 80GB HBM3 (132 SMs, 8 blocks of 256
# threads per SM, 4 waves, 1024 x 16 x 8 FMAs per thread; two 1 GiB buffers
# copied four times per run), with the figures rounded. The "l2" and "shared"
# sections have the sizes the tool works out for that GPU (one resident wave
# of 8 x 256 threads per SM; a 12.4 MiB buffer read 993 x 4 float4s per
# thread; 1986 x 8 float4s per thread from shared memory) and bandwidths of
# the size expected there, not yet measured.
H100_REPORT = {
    "version": 2,
    "tool": "tilelab-roofline",
    "device": {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": H100_UUID,
        "compute_capability": "9.0",
        "multiprocessors": 132,
        "l2_bytes": 52428800,
        "memory_bytes": 85017493504,
    },
    "fp32_fma": {"gflops_median": 65100.0, "gflops_max": 65200.0, "runs": 20, "flop_per_run": 283467841536.0},
    "dram": {"gbps_median": 3000.0, "gbps_max": 3020.0, "runs": 20, "bytes_per_run": 8589934592.0,
             "buffer_bytes": 1073741824},
    "l2": {"gbps_median": 6500.0, "gbps_max": 6600.0, "runs": 20, "bytes_per_run": 17180393472.0,
           "buffer_bytes": 12976128},
    "shared": {"gbps_median": 30000.0, "gbps_max": 30200.0, "runs": 20, "bytes_per_run": 68721573888.0},
}

MEASURED_AT = "2026-11-21T09:30:00Z"
DELETE = object()  # as a value in h100_report(): remove the key


def h100_report(**changes) -> dict:
    """A deep copy of H100_REPORT; changes are 'section.key' (or 'key') -> value."""
    report = json.loads(json.dumps(H100_REPORT))
    for dotted, value in changes.items():
        *sections, key = dotted.split(".")
        target = report
        for s in sections:
            target = target[s]
        if value is DELETE:
            del target[key]
        else:
            target[key] = value
    return report


@pytest.fixture
def h100() -> Ceilings:
    return roofline.ceilings_from_report(h100_report(), MEASURED_AT)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(directory))
    return directory


def stand_in_tool(tmp_path: Path, body: str) -> Path:
    """An executable that stands in for tilelab-roofline; each call's arguments go to calls.log."""
    script = tmp_path / "tilelab-roofline-stand-in"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, time\n"
        f"with open({str(tmp_path / 'calls.log')!r}, 'a') as log:\n"
        "    log.write(' '.join(sys.argv[1:]) + '\\n')\n"
        + body
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def printing_tool(tmp_path: Path, report: dict) -> Path:
    return stand_in_tool(
        tmp_path,
        f"REPORT = json.loads({json.dumps(json.dumps(report))})\n"
        "print(json.dumps(REPORT['device'] if sys.argv[1:] == ['--device'] else REPORT, indent=2))\n",
    )


def calls(tmp_path: Path) -> list:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


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


# --- cache -------------------------------------------------------------------

def test_cache_dir_follows_the_environment(cache, tmp_path, monkeypatch):
    assert gpu_cache.cache_dir() == cache and roofline.cache_file(H100_UUID).parent == cache
    monkeypatch.delenv("TILELAB_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert gpu_cache.cache_dir() == tmp_path / "home" / ".cache" / "tilelab"


def test_cache_round_trip(h100, cache):
    assert roofline.load_cached(H100_UUID) is None
    path = roofline.save(h100)
    assert path == cache / f"roofline-{H100_UUID}.json"
    assert roofline.load_cached(H100_UUID) == h100
    assert [p.name for p in cache.iterdir()] == [path.name]  # no temporary file left behind


def test_saving_again_replaces_the_file(h100, cache):
    roofline.save(h100)
    newer = roofline.ceilings_from_report(h100_report(**{"dram.gbps_median": 2950.0}), "2026-11-22T08:00:00Z")
    roofline.save(newer)
    assert roofline.load_cached(H100_UUID) == newer


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"[]",
        b'{"device_uuid": "5a3c1e2f-0b7d-4c9e-8f21-6d4b3a2c1e0f"}',
        b"\xff\xfe",  # not UTF-8
    ],
)
def test_a_corrupt_cache_file_is_ignored(cache, content):
    cache.mkdir(parents=True)
    (cache / f"roofline-{H100_UUID}.json").write_bytes(content)
    assert roofline.load_cached(H100_UUID) is None


def test_a_cache_file_of_another_gpu_is_ignored(h100, cache):
    cache.mkdir(parents=True)
    other_uuid = "00000000-1111-2222-3333-444444444444"
    (cache / f"roofline-{other_uuid}.json").write_text(json.dumps(h100.to_dict()))
    assert roofline.load_cached(other_uuid) is None


# What the cache held before the tool measured L2 and shared memory: no
# version, no on-chip levels, a version-1 report.
OLD_CACHE = {
    "device_name": "NVIDIA H100 80GB HBM3", "device_uuid": H100_UUID, "fp32_gflops": 65100.0, "dram_gbps": 3000.0,
    "measured_at": MEASURED_AT,
    "raw": {key: value for key, value in h100_report(version=1).items() if key not in ("l2", "shared")},
}


def test_a_cache_from_before_the_on_chip_levels_is_measured_again(tmp_path, cache):
    cache.mkdir(parents=True)
    (cache / f"roofline-{H100_UUID}.json").write_text(json.dumps(OLD_CACHE))
    assert roofline.load_cached(H100_UUID) is None
    tool = printing_tool(tmp_path, H100_REPORT)
    ceilings = roofline.get_ceilings(tool)
    assert calls(tmp_path) == ["--device", "--runs 20"]
    assert (ceilings.l2_gbps, ceilings.shared_gbps) == (6500.0, 30000.0)
    cached = json.loads((cache / f"roofline-{H100_UUID}.json").read_text())
    assert cached["version"] == roofline.REPORT_VERSION and cached["l2_gbps"] == 6500.0
    assert roofline.get_ceilings(tool) == ceilings  # and kept: the next grading measures nothing
    assert calls(tmp_path) == ["--device", "--runs 20", "--device"]


def test_cache_file_refuses_a_uuid_that_is_not_a_file_name(cache):
    with pytest.raises(ValueError, match="not a plain hex UUID"):
        roofline.cache_file("../escape")


# --- running the tool ----------------------------------------------------------

def test_measure_without_the_tool_says_so(tmp_path):
    with pytest.raises(RooflineError, match="not found"):
        roofline.measure(tmp_path / "no-such-tilelab-roofline")


def test_measure_runs_the_tool_and_parses_its_report(tmp_path):
    tool = printing_tool(tmp_path, H100_REPORT)
    ceilings = roofline.measure(tool, runs=7)
    assert (ceilings.fp32_gflops, ceilings.dram_gbps) == (65100.0, 3000.0)
    assert ceilings.raw == H100_REPORT
    assert calls(tmp_path) == ["--runs 7"]


def test_measure_without_a_device_says_so(tmp_path):
    tool = stand_in_tool(
        tmp_path,
        "print('tilelab-roofline: no CUDA device: none found [exit 5: no_device]', file=sys.stderr)\n"
        "sys.exit(5)\n",
    )
    with pytest.raises(RooflineError, match="no CUDA device"):
        roofline.measure(tool)


def test_a_failing_tool_reports_its_status_and_stderr(tmp_path):
    tool = stand_in_tool(tmp_path, "print('tilelab: CUDA error cudaErrorMemoryAllocation', file=sys.stderr)\nsys.exit(6)\n")
    with pytest.raises(RooflineError, match="exit status 6.*cudaErrorMemoryAllocation"):
        roofline.measure(tool)


def test_a_tool_that_hangs_is_stopped(tmp_path):
    tool = stand_in_tool(tmp_path, "time.sleep(60)\n")
    with pytest.raises(RooflineError, match="longer than 0.5 s"):
        roofline.measure(tool, timeout_s=0.5)


def test_a_probe_started_early_gives_what_device_info_gives(tmp_path):
    """probe_early (the commands start it before importing the grader): the
    next device_info of that tool, with this process's environment, takes
    its device or its error; the one after probes again."""
    tool = printing_tool(tmp_path, H100_REPORT)
    roofline.probe_early(tool)
    early = roofline.device_info(tool)
    assert early == roofline.device_info(tool) and early["uuid"] == H100_UUID
    assert calls(tmp_path) == ["--device", "--device"]
    roofline.probe_early(tool)
    roofline.device_info(tool, env=dict(os.environ))  # an environment of its own: not the early probe's
    assert roofline.device_info(tool) == early  # the early probe's, waited for
    assert calls(tmp_path) == ["--device"] * 4
    roofline.probe_early(tmp_path / "no-such-tilelab-roofline")  # nothing to start
    with pytest.raises(RooflineError, match="not found"):
        roofline.device_info(tmp_path / "no-such-tilelab-roofline")
    none = stand_in_tool(tmp_path, "print('tilelab-roofline: no CUDA device', file=sys.stderr)\nsys.exit(5)\n")
    roofline.probe_early(none)
    with pytest.raises(roofline.NoDevice):
        roofline.device_info(none)


def test_implausible_figures_from_the_tool_are_rejected(tmp_path):
    tool = printing_tool(tmp_path, h100_report(**{"dram.gbps_median": 0.0}))
    with pytest.raises(RooflineError, match="implausible DRAM"):
        roofline.measure(tool)


def test_get_ceilings_measures_once_per_gpu(tmp_path, cache):
    tool = printing_tool(tmp_path, H100_REPORT)
    first = roofline.get_ceilings(tool)
    assert calls(tmp_path) == ["--device", "--runs 20"]
    assert (cache / f"roofline-{H100_UUID}.json").is_file()

    again = roofline.get_ceilings(tool)
    assert again == first
    assert calls(tmp_path) == ["--device", "--runs 20", "--device"]  # named the GPU, measured nothing

    roofline.get_ceilings(tool, refresh=True)
    assert calls(tmp_path)[-2:] == ["--device", "--runs 20"]


def test_the_report_names_the_on_chip_levels_where_measured(h100):
    from tilelab.grading.model import GradeResult
    from tilelab.outputs.report_view import report_view

    def line(ceilings: dict) -> str:
        result = GradeResult(assignment="tilelab_matmul", mode="grade", submission="s", seed=1,
                             gpu=dict(H100_REPORT["device"]), ceilings=ceilings, parts=[], started=MEASURED_AT)
        return report_view(result, "student")["ceilings_line"]

    text = line(h100.summary())
    assert "FP32 65,100 GFLOP/s, DRAM 3,000 GB/s, L2 6,500 GB/s, shared memory 30,000 GB/s;" in text
    older = {key: value for key, value in h100.summary().items() if key not in ("l2_gbps", "shared_gbps")}
    assert "FP32 65,100 GFLOP/s, DRAM 3,000 GB/s;" in line(older)
    unmeasured = roofline.ceilings_from_report(h100_report(shared=None), MEASURED_AT).summary()
    assert "L2 6,500 GB/s;" in line(unmeasured) and "shared memory" not in line(unmeasured)


def test_get_ceilings_measures_again_over_a_corrupt_cache(tmp_path, cache):
    cache.mkdir(parents=True)
    (cache / f"roofline-{H100_UUID}.json").write_text("{truncated")
    tool = printing_tool(tmp_path, H100_REPORT)
    assert roofline.get_ceilings(tool).dram_gbps == 3000.0
    assert calls(tmp_path) == ["--device", "--runs 20"]
    assert roofline.load_cached(H100_UUID) is not None


def test_get_ceilings_without_a_device_says_so(tmp_path, cache):
    tool = stand_in_tool(tmp_path, "print('tilelab-roofline: no CUDA device', file=sys.stderr)\nsys.exit(5)\n")
    with pytest.raises(roofline.NoDevice, match="no CUDA device"):
        roofline.get_ceilings(tool)
    assert not cache.exists()


def test_get_ceilings_does_not_ask_again_for_a_device_it_is_given(tmp_path, cache):
    tool = printing_tool(tmp_path, H100_REPORT)
    device = roofline.device_info(tool)
    assert roofline.get_ceilings(tool, device=device).device_uuid == H100_UUID
    assert calls(tmp_path) == ["--device", "--runs 20"]


def test_a_grading_goes_on_without_speed_when_the_ceilings_cannot_be_measured(tmp_path, cache):
    # The tool names the GPU but its measurement fails: the GPU stages still
    # run (the device is known), speed is not scored, and a note says why.
    from types import SimpleNamespace

    from tilelab.grading.stages.device import measured_ceilings, probe_device
    from tilelab.system.gpu_lock import GpuLock
    from tilelab.system.sandbox import Sandbox

    tool = stand_in_tool(tmp_path, (
        f"if sys.argv[1:] == ['--device']: print(json.dumps({H100_REPORT['device']!r}))\n"
        "else: print('tilelab-roofline: the FMA kernel failed', file=sys.stderr); sys.exit(3)\n"))
    # The part of a grading's context these stages read.
    grading = SimpleNamespace(tools=SimpleNamespace(probe=tool), sandbox=Sandbox(), gpu_lock=GpuLock(), notes=[])
    gpu = probe_device(grading)
    ceilings = measured_ceilings(grading, gpu)
    notes = grading.notes
    assert gpu["uuid"] == H100_UUID and ceilings is None
    assert len(notes) == 1 and "ceilings could not be measured" in notes[0] and "FMA kernel failed" in notes[0]


def test_the_gpu_probe_waits_while_another_grading_holds_the_gpu_alone(tmp_path, cache):
    # Starting CUDA beside a timed part slows a launcher that calls the driver in its timed calls. The
    # build meanwhile takes the capability the last probe of the same GPU found, when there was one.
    import threading
    import time
    from contextlib import nullcontext
    from types import SimpleNamespace

    from tilelab.grading.stages.device import GpuSide
    from tilelab.system.gpu_lock import GpuLock
    from tilelab.system.sandbox import Sandbox

    tool = stand_in_tool(tmp_path, f"print(json.dumps({H100_REPORT['device']!r}))\n")
    lock = GpuLock()

    def grading(gpu: str) -> SimpleNamespace:
        return SimpleNamespace(tools=SimpleNamespace(probe=tool),
                               sandbox=Sandbox(extra_env={"CUDA_VISIBLE_DEVICES": gpu}), gpu_lock=lock, notes=[], timed=lambda phase: nullcontext(),
                               held=lambda held, waiting: held)

    with lock.exclusive():
        first = GpuSide(grading("7"))
        time.sleep(0.5)
        assert not first._device.done()
    assert first.device()["uuid"] == H100_UUID and first.capability() == "9.0"
    with lock.exclusive():
        again, other = GpuSide(grading("7")), GpuSide(grading("8"))
        assert again.capability() == "9.0"  # known from the first, while this probe waits
        asked = threading.Thread(target=other.capability)
        asked.start()
        asked.join(0.5)
        assert asked.is_alive()  # another GPU: nothing known, so the build waits for its probe
    asked.join(30)
    assert again.device()["uuid"] == H100_UUID and other.capability() == "9.0"


# --- the contract between the tool and this module --------------------------------

def test_the_tool_prints_every_key_the_parser_reads(root):
    tool = root / "grader" / "roofline"
    sources = "".join(path.read_text() for path in sorted(tool.iterdir()) if path.suffix in (".cu", ".h"))
    for key in ("version", "tool", "device", "name", "uuid", "fp32_fma", "gflops_median", "gflops_max",
                "flop_per_run", "dram", "gbps_median", "gbps_max", "bytes_per_run", "runs", "l2", "shared"):
        assert f'"{key}"' in sources, key
    assert f'{{"version", {roofline.REPORT_VERSION}}}' in (tool / "roofline.cu").read_text()  # the one read here
    assert f"kNoDevice = {roofline.EXIT_NO_DEVICE}" in (root / "include" / "tilelab" / "exit_codes.h").read_text()
