"""A setup problem ends in one line that names the fix, for every command and
user, never in a traceback: no nvcc, a CUDA Toolkit too old, no WeasyPrint
for the PDF, no GPU, no built tree, the sandbox user missing when grading as
root, a folder the user may not write. Each runs the real command, with the
machine made to lack the one thing."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TILELAB = [sys.executable, "-m", "tilelab.cli", "--root", str(ROOT)]


def _env(**extra) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "grader"), **extra}
    return env


def _one_line_error(done: subprocess.CompletedProcess, *phrases: str) -> str:
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "Traceback" not in said, said
    for phrase in phrases:
        assert phrase in said, said
    return said


def _bootstrap_with(tmp_path: Path, nvcc_script: str = None) -> subprocess.CompletedProcess:
    """scripts/bootstrap with a PATH whose nvcc is `nvcc_script` (None: no nvcc at all)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if nvcc_script is not None:
        (bin_dir / "nvcc").write_text(nvcc_script)
        (bin_dir / "nvcc").chmod(0o755)
    path = ":".join([str(bin_dir)] + [d for d in os.environ["PATH"].split(":")
                                      if d and not (Path(d) / "nvcc").exists()])
    return subprocess.run([str(ROOT / "scripts" / "bootstrap")], env={**os.environ, "PATH": path,
                          "CUDA_HOME": str(tmp_path / "no-cuda")}, capture_output=True, text=True, timeout=120)


def test_bootstrap_without_nvcc_names_the_cuda_toolkit(tmp_path):
    said = _one_line_error(_bootstrap_with(tmp_path), "no nvcc: install the CUDA Toolkit")
    assert len(said.strip().splitlines()) == 1


def test_bootstrap_with_an_old_cuda_says_which_is_needed(tmp_path):
    old = "#!/bin/sh\necho 'Cuda compilation tools, release 11.8, V11.8.89'\n"
    said = _one_line_error(_bootstrap_with(tmp_path, old), "CUDA 11.8 is older than the 12.0 this build needs")
    assert len(said.strip().splitlines()) == 1


def test_the_handout_without_weasyprint_names_the_extra_to_install(tmp_path):
    # A weasyprint that cannot be imported, first on the path.
    (tmp_path / "weasyprint.py").write_text("raise ImportError('No module named weasyprint')\n")
    done = subprocess.run([*TILELAB, "handout", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          env=_env(PYTHONPATH=f"{tmp_path}:{ROOT / 'grader'}"))
    _one_line_error(done, "pip install 'tilelab[handout]'", "no PDF")
    assert (tmp_path / "out" / "handout.md").is_file() and not (tmp_path / "out" / "handout.pdf").exists()


def test_commands_that_need_a_build_say_how_to_make_one(tmp_path):
    done = subprocess.run([*TILELAB, "check", "naive", "--build", str(tmp_path)], capture_output=True, text=True,
                          env=_env())
    _one_line_error(done, "holds no built project", "./scripts/bootstrap")


def test_calibrating_without_a_gpu_says_so():
    build = os.environ.get("TILELAB_BUILD_DIR")
    if not build:
        pytest.skip("skipped: needs a built project (run through ctest)")
    if subprocess.run(["nvidia-smi"], capture_output=True).returncode == 0 if shutil.which("nvidia-smi") else False:
        pytest.skip("skipped: this machine has a GPU")
    done = subprocess.run([*TILELAB, "calibrate", "--build", build], capture_output=True, text=True, env=_env())
    _one_line_error(done, "no CUDA device")


def test_grading_as_root_without_the_sandbox_user_names_secure_checkout(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("skipped: only root switches to the sandbox user")
    build = os.environ.get("TILELAB_BUILD_DIR")
    if not build:
        pytest.skip("skipped: needs a built project (run through ctest)")
    # The course's checkout holds secrets: checking a part there needs the sandbox user too.
    done = subprocess.run([*TILELAB, "check", "naive", "--build", build], capture_output=True, text=True,
                          env=_env(TILELAB_SANDBOX_USER="tilelab-nobody-here"))
    _one_line_error(done, "'tilelab-nobody-here' does not exist", "./scripts/secure-checkout")


def test_a_folder_the_user_may_not_write_is_named():
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("skipped: needs root to run the command as another user")
    # A copy of the project everyone may read, in a folder only root may write.
    base = Path(tempfile.mkdtemp(prefix="tilelab-closed-"))
    try:
        base.chmod(0o755)
        for entry in ("assignment.yaml", "starter", "solutions", "handouts"):
            (shutil.copytree if (ROOT / entry).is_dir() else shutil.copy)(ROOT / entry, base / entry)
        subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", sys.executable,
                               "-m", "tilelab.cli", "--root", str(base), "handout", "--out", str(base / "handout")],
                              capture_output=True, text=True, env=_env(HOME=str(base)), cwd="/")
        said = _one_line_error(done)
        assert f"{base / 'handout'}: permission denied" in said, said
    finally:
        shutil.rmtree(base, ignore_errors=True)
