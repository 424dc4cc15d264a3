"""Grader tests that need a CUDA GPU and a built project (TILELAB_BUILD_DIR):
CTest runs them as gpu.grader. Without a GPU every test says
"skipped: no CUDA device" and CTest counts the entry as skipped."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))

from tilelab.grading import gpu_ceilings as roofline  # noqa: E402
from tilelab.system.paths import tool_path  # noqa: E402


@pytest.fixture(scope="session")
def build() -> Path:
    configured = os.environ.get("TILELAB_BUILD_DIR")
    if not configured:
        pytest.skip("skipped: TILELAB_BUILD_DIR names no built project (run through ctest)")
    return Path(configured)


@pytest.fixture(scope="session")
def device(build) -> dict:
    try:
        return roofline.device_info(tool_path(build, "tilelab-roofline"))
    except roofline.NoDevice:
        # On a line of its own (ctest runs pytest with -s), for scripts/test to show why.
        print("\nskipped: no CUDA device")
        pytest.skip("skipped: no CUDA device")
