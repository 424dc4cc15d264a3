"""The roofline's per-GPU cache, and running tilelab-roofline.

No GPU is needed: where a test must run the tool, it runs a stand-in
(roofline_fixtures.py), a small script that keeps the tool's command-line
contract (`--device`, `--runs N`, JSON on stdout, exit status 5 without a
device) and prints fixed figures."""

import json
import os

import pytest
from roofline_fixtures import H100_REPORT, H100_UUID, MEASURED_AT, calls, h100_report, printing_tool, stand_in_tool

from tilelab.grading import gpu_cache
from tilelab.grading import gpu_ceilings as roofline
from tilelab.grading.gpu_ceilings import RooflineError


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
