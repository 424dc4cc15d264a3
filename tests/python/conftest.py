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
    """A grading's result as the report tests read it (report_fixtures.make_result),
    made anew for each test, which may change it."""
    from report_fixtures import make_result

    return make_result()


@pytest.fixture(scope="module")
def questions(assignment):
    """assignment.yaml's questions, as the answers tests grade them."""
    return assignment.questions


@pytest.fixture(scope="module")
def key(questions):
    """The real answer key, solutions/answers.yaml."""
    from tilelab.grading.answer_key import load_key

    return load_key(ROOT / "solutions" / "answers.yaml", questions)


@pytest.fixture
def grade(tmp_path, questions, key):
    """Grades answers.yaml written with `content` (str or bytes)."""
    from tilelab.grading.answers import grade_answers

    def run(content, answer_key=key):
        path = tmp_path / "answers.yaml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return grade_answers(path, questions, answer_key)

    return run


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A GPU cache folder of the test's own (TILELAB_CACHE_DIR), not yet made."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def h100():
    """The ceilings of the H100 whose report roofline_fixtures.py holds."""
    from roofline_fixtures import MEASURED_AT, h100_report

    from tilelab.grading.gpu_ceilings import ceilings_from_report

    return ceilings_from_report(h100_report(), MEASURED_AT)



@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """A gateway as a course starts it (a student may check, not grade), with
    a low hourly limit, its embedded PostgreSQL and tokens; no worker
    (service_fixtures.serving). One a test module."""
    from service_fixtures import serving

    yield from serving(tmp_path_factory.mktemp("service"), "limits:\n  submissions_per_hour: 8\n")


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
