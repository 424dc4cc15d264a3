"""The GPU's counter availability image asked of the trusted harness once,
kept, given again without asking, and asked again for another calibration
fingerprint (grading/counter_availability.py)."""

from pathlib import Path

from tilelab.grading import counter_availability, gpu_cache
from tilelab.system.paths import tool_path


def test_the_image_is_asked_for_once_and_kept(build, device, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    uuid = device["uuid"]
    harness = tool_path(build, "tilelab-harness")
    image = counter_availability.image_for(harness, uuid, "a" * 64)
    assert image and len(image) % 2 == 0 and set(image) <= set("0123456789abcdef")
    assert gpu_cache.cache_file(counter_availability.CACHE_KIND, uuid).is_file()
    assert counter_availability.image_for(Path("/nonexistent/tilelab-harness"), uuid, "a" * 64) == image
    assert counter_availability.image_for(Path("/nonexistent/tilelab-harness"), uuid, "b" * 64) is None
    assert counter_availability.image_for(harness, uuid, "b" * 64) == image


def test_a_uuid_that_cannot_name_a_file_is_not_asked_for(build, device, tmp_path, monkeypatch):
    # The harness would answer here; nothing could be kept under such a name, so it is not asked.
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    assert counter_availability.image_for(tool_path(build, "tilelab-harness"), "../x", "a" * 64) is None
    assert not (tmp_path / "cache").exists()
