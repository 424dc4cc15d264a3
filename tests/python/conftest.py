import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))


@pytest.fixture
def root() -> Path:
    return ROOT


def require_pdf_stack() -> None:
    """PDF rendering needs WeasyPrint (and Pango); where they are missing
    (the GPU machine has no network to install them) PDF tests say so and skip."""
    pytest.importorskip("weasyprint", reason="skipped: WeasyPrint is not installed (pip install weasyprint)")
