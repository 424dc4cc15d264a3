import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def assignment():
    """The project's assignment.yaml, loaded once for every test (its dataclasses are frozen)."""
    from tilelab.spec.assignment import load_assignment

    return load_assignment(ROOT / "assignment.yaml")


@pytest.fixture
def result():
    """A grading's result as the report tests read it (report_fixtures.make_result): made anew for each test, which may change it."""
    from report_fixtures import make_result

    return make_result()


def require_pdf_stack() -> None:
    """PDF rendering needs WeasyPrint (and Pango); where they are missing
    (the GPU machine has no network to install them) PDF tests say so and skip."""
    pytest.importorskip("weasyprint", reason="skipped: WeasyPrint is not installed (pip install weasyprint)")


def built_tree(needed: str = "bin/tilelab-verify") -> Path:
    """The built project that ctest names in TILELAB_BUILD_DIR, holding
    `needed`; without one the test says so and skips."""
    path = os.environ.get("TILELAB_BUILD_DIR")
    if not path or not (Path(path) / needed).exists():
        pytest.skip("skipped: needs a built project (run through ctest, which sets TILELAB_BUILD_DIR)")
    return Path(path)


@pytest.fixture(scope="session")
def pdf_dir(tmp_path_factory) -> Path:
    """Where the handout tests render each edition's PDF, once a session (handout_fixtures.edition_pdf)."""
    return tmp_path_factory.mktemp("handout-pdf")
