"""The GPU's counter availability image asked of the trusted harness once,
kept, and given again without asking (grading/counter_availability.py)."""

from pathlib import Path

from tilelab.grading import counter_availability, gpu_cache
from tilelab.system.paths import tool_path


def test_the_image_is_asked_for_once_and_kept(build, device, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    uuid = device["uuid"]
    image = counter_availability.image_for(tool_path(build, "tilelab-harness"), uuid)
    assert image and len(image) % 2 == 0 and set(image) <= set("0123456789abcdef")
    assert gpu_cache.cache_file(counter_availability.CACHE_KIND, uuid).is_file()
    assert counter_availability.image_for(Path("/nonexistent/tilelab-harness"), uuid) == image
