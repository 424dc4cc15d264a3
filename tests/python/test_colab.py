"""docs/colab.ipynb, the student's Colab notebook, run as a script: its code
cells (shell commands only: `!command` and `%cd folder`) unpack a freshly
made student bundle, bootstrap it and check a part, as root (Colab's user)
and as a user without root. Without a GPU the check answers with its GPU
stages reported as not run."""

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import require_pdf_stack

from tilelab.authoring.dist import bundle_folder, bundle_name, student_bundle
from tilelab.authoring.handout import write_handouts
from tilelab.spec.assignment import load_assignment

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "colab.ipynb"


def notebook_script() -> str:
    """The code cells as one bash script, in order."""
    lines = []
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        for line in "".join(cell["source"]).splitlines():
            if line.startswith("!"):
                lines.append(line[1:])
            elif line.startswith("%cd "):
                lines.append(f"cd {line[4:]}")
            elif line.strip():
                raise AssertionError(f"a notebook cell holds more than shell commands: {line!r}")
    return "\n".join(lines) + "\n"


def test_the_notebook_is_valid_and_names_the_bundle_dist_makes():
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["nbformat"] == 4 and all("source" in c and "cell_type" in c for c in nb["cells"])
    assignment = load_assignment(ROOT / "assignment.yaml")
    script = notebook_script()
    assert f"tar xzf {bundle_name(assignment, 'student')}" in script and f"cd {bundle_folder(assignment)}\n" in script
    assert re.search(r"^\./scripts/bootstrap$", script, re.M) and "tilelab check naive" in script


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    require_pdf_stack()
    work = tmp_path_factory.mktemp("bundle")
    assignment = load_assignment(ROOT / "assignment.yaml")
    write_handouts(assignment, ROOT, work / "handout", variant="student")
    return student_bundle(ROOT, work / bundle_name(assignment, "student"), work / "handout")


def _run_notebook(bundle: Path, as_user=None) -> str:
    """The notebook's cells in a folder holding only the uploaded bundle, as Colab's /content would."""
    content = Path(tempfile.mkdtemp(prefix="tilelab-colab-"))
    try:
        shutil.copy(bundle, content / bundle.name)
        prefix, env = [], {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV",
                                                                            "TILELAB_ROOT", "TILELAB_BUILD_DIR")}
        if as_user is not None:
            os.chown(content, as_user, as_user)
            os.chown(content / bundle.name, as_user, as_user)
            prefix = ["setpriv", f"--reuid={as_user}", f"--regid={as_user}", "--clear-groups", "--"]
            env["HOME"] = str(content)
        done = subprocess.run([*prefix, "bash", "-c", notebook_script()], cwd=content, env=env, capture_output=True,
                              text=True, timeout=1500)
        return done.stdout + done.stderr
    finally:
        shutil.rmtree(content, ignore_errors=True)


def _check_answered(said: str) -> None:
    assert "bootstrap: built into build/" in said, said
    assert "Traceback" not in said, said
    assert "tilelab check" in said and "naive" in said, said
    if shutil.which("nvidia-smi") is None:
        # Without a GPU: the stubs the starter leaves, and where to run the cases.
        assert "no CUDA device here" in said and "not written yet: naiveKernel" in said, said


def test_the_cells_set_up_and_check_a_part_as_colab_does(bundle):
    _check_answered(_run_notebook(bundle))


def test_a_student_without_root_sets_up_and_checks_the_same_way(bundle):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("skipped: needs root to run the notebook as another user")
    _check_answered(_run_notebook(bundle, as_user=65534))
