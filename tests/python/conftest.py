import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))


@pytest.fixture
def root() -> Path:
    return ROOT
