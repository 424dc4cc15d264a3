"""The GPU's counter availability image (grading/counter_availability.py):
kept per GPU and calibration fingerprint with its checksum, asked of the
trusted harness only where none fits, and nothing kept where none could be
had. What the image does to a profile is tested on the GPU
(tests/cpp/harness_timing_gpu_tests.cpp, Counters.*)."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from tilelab.grading import counter_availability, gpu_cache
from tilelab.system.paths import tool_path

UUID = "GPU-0cd28d19-f803-5377-6c6b-607d9dccf6ec"
NO_TOOL = Path("/nonexistent/tilelab-harness")
FINGERPRINT = "f" * 64


def kept_as_the_harness_gave(image: str, fingerprint: str = FINGERPRINT) -> dict:
    return {"device_uuid": UUID, "fingerprint": fingerprint, "chip": "GH100", "image": image,
            "sha256": hashlib.sha256(image.encode()).hexdigest()}


def _keep(data) -> Path:
    path = gpu_cache.cache_file(counter_availability.CACHE_KIND, UUID)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_a_kept_image_is_given_without_asking(cache):
    _keep(kept_as_the_harness_gave("00ff7a10"))
    assert counter_availability.image_for(NO_TOOL, UUID, FINGERPRINT) == "00ff7a10"


@pytest.mark.parametrize("kept", [
    kept_as_the_harness_gave("00ff7a10", fingerprint="e" * 64),  # another driver or harness build
    {**kept_as_the_harness_gave("00ff7a10"), "image": "00ff7a11"},  # edited: not the image the harness gave
    {**kept_as_the_harness_gave("00ff7a10"), "sha256": None},
    kept_as_the_harness_gave("0A"),  # not the harness's lowercase hex
    kept_as_the_harness_gave("abc"),  # half a byte
    {**kept_as_the_harness_gave("00"), "device_uuid": "GPU-another"},  # copied from another GPU's cache
    {"device_uuid": UUID, "fingerprint": FINGERPRINT, "chip": "GH100"},
    ["00ff"],
])
def test_an_unusable_kept_image_is_asked_for_again(cache, kept):
    path = _keep(kept)
    # Asked of a harness that is not there: nothing comes back, and what was kept is not taken for an answer.
    assert counter_availability.image_for(NO_TOOL, UUID, FINGERPRINT) is None
    assert json.loads(path.read_text()) == kept


def test_without_a_gpu_the_harness_gives_none_and_nothing_is_kept(cache):
    build = os.environ.get("TILELAB_BUILD_DIR")
    if not build:
        pytest.skip("skipped: TILELAB_BUILD_DIR names no built project (run through ctest)")
    harness = tool_path(Path(build), "tilelab-harness")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no device, here or on a GPU machine
    assert counter_availability.image_for(harness, UUID, FINGERPRINT, env) is None
    assert not gpu_cache.cache_file(counter_availability.CACHE_KIND, UUID).exists()


def test_a_uuid_that_cannot_name_a_file_gets_none(cache):
    assert counter_availability.image_for(NO_TOOL, "../../etc/passwd", FINGERPRINT) is None
    assert not cache.exists()
