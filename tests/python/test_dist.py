"""The bundles: what each holds and must never hold, and that one edit of
assignment.yaml reaches the handout, the grader and both bundles."""

import os
import re
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import require_pdf_stack

from tilelab.authoring.dist import DistError, autograder_bundle, check_student_bundle, student_bundle
from tilelab.authoring.handout import render_markdown, write_handouts
from tilelab.spec.assignment import load_assignment

# What a copy of the project needs to render, bundle and grade.
PROJECT_ENTRIES = ("assignment.yaml", "CMakeLists.txt", "cmake", "include", "grader", "starter", "solutions",
                   "handouts", "docs", "scripts", "docker")


def copy_project(root: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for entry in PROJECT_ENTRIES:
        src = root / entry
        if src.is_dir():
            shutil.copytree(src, dest / entry, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, dest / entry)
    return dest


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    require_pdf_stack()
    root = Path(__file__).resolve().parents[2]
    work = tmp_path_factory.mktemp("dist")
    handout_dir = work / "handout"
    write_handouts(load_assignment(root / "assignment.yaml"), root, handout_dir, variant="student")
    return (student_bundle(root, work / "student.tar.gz", handout_dir),
            autograder_bundle(root, work / "autograder.zip"))


def test_student_bundle_holds_starter_handout_and_public_cases_only(root, bundles):
    tarball, _ = bundles
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        shipped = yaml.safe_load(tar.extractfile("tilelab-tilelab_matmul/assignment.yaml"))
        answers = tar.extractfile("tilelab-tilelab_matmul/starter/answers.yaml").read().decode()
        bootstrap = tar.getmember("tilelab-tilelab_matmul/scripts/bootstrap")
        bootstrap_text = tar.extractfile(bootstrap).read().decode()
    prefix = "tilelab-tilelab_matmul/"
    for needed in ("README.md", "CMakeLists.txt", "starter/naive.cu", "starter/answers.yaml", "handout/handout.pdf",
                   "handout/handout.md", "grader/harness/part_main.cu", "grader/tilelab/grading/pipeline.py"):
        assert prefix + needed in names
    assert not any("/solutions/" in n or "/tests/" in n or "/key/" in n for n in names)
    assert bootstrap.mode & 0o111
    # Every script the student's one setup command runs is in the bundle.
    called = set(re.findall(r"\./(scripts/[\w.-]+)", bootstrap_text))
    assert "scripts/secure-checkout" in called
    for script in called:
        assert prefix + script in names, f"bootstrap runs {script}, which the bundle lacks"
    assert all(p["cases"]["hidden"] == [] for p in shipped["parts"])
    source = yaml.safe_load((root / "assignment.yaml").read_text())
    assert [p["cases"]["public"] for p in shipped["parts"]] == [p["cases"]["public"] for p in source["parts"]]
    assert "512000" not in answers and "388.75" not in answers


def test_student_bundle_check_catches_a_leak(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        data = b"// BEGIN SOLUTION\n"
        info = tarfile.TarInfo("tilelab-x/starter/naive.cu")
        info.size = len(data)
        import io
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(DistError, match="solution region"):
        check_student_bundle(bad)


def test_autograder_zip_has_entry_points_key_and_hidden_cases(root, bundles):
    _, zip_path = bundles
    with zipfile.ZipFile(zip_path) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "key/answers.yaml", "assignment.yaml"} <= names
        assert (z.getinfo("run_autograder").external_attr >> 16) & 0o111
        assert not any(n.startswith(("solutions/", "tests/")) for n in names)
        shipped = yaml.safe_load(z.read("assignment.yaml"))
        assert z.read("key/answers.yaml") == (root / "solutions" / "answers.yaml").read_bytes()
    assert any(p["cases"]["hidden"] for p in shipped["parts"])


def test_one_edit_of_assignment_yaml_reaches_handout_grader_and_bundles(root, tmp_path):
    """Change the naive part's correctness points and one public case size in
    assignment.yaml only; everything generated from it must follow."""
    require_pdf_stack()
    project = copy_project(root, tmp_path / "project")
    text = (project / "assignment.yaml").read_text()
    text = text.replace("points: {correctness: 10, speed: 5}", "points: {correctness: 12, speed: 5}", 1)
    text = text.replace("public: [1, 2, 3, 15, 16, 17, 31,", "public: [1, 2, 3, 15, 16, 19, 31,", 1)
    (project / "assignment.yaml").write_text(text)
    edited = load_assignment(project / "assignment.yaml")
    naive = edited.part("naive")
    assert naive.points["correctness"] == 12 and 19 in [c.j for c in naive.cases["public"]]

    handout = render_markdown(edited, project)
    assert "1, 2, 3, 15, 16, 19, 31" in handout
    assert "| naive: Naive kernel | 12 | 5 | 17 |" in handout

    handout_dir = tmp_path / "handout"
    write_handouts(edited, project, handout_dir, variant="student")
    with tarfile.open(student_bundle(project, tmp_path / "s.tar.gz", handout_dir)) as tar:
        shipped = yaml.safe_load(tar.extractfile("tilelab-tilelab_matmul/assignment.yaml"))
    assert shipped["parts"][0]["points"]["correctness"] == 12
    assert 19 in shipped["parts"][0]["cases"]["public"]
    with zipfile.ZipFile(autograder_bundle(project, tmp_path / "a.zip")) as z:
        assert yaml.safe_load(z.read("assignment.yaml"))["parts"][0]["points"]["correctness"] == 12

    build = os.environ.get("TILELAB_BUILD_DIR")
    if not build:
        pytest.skip("skipped: the grader half needs a built project (run through ctest)")
    from tilelab.grading.options import GradeOptions
    from tilelab.grading.pipeline import grade
    from tilelab.outputs.gradescope import graded_tests
    from tilelab.system.sandbox import Sandbox

    # This copy lives in pytest's private temporary directory, which a
    # sandbox user could not read: grade as the current user (the flow of the
    # edit is what is tested here, not the sandbox).
    result = grade(project / "solutions", GradeOptions.for_tree(project, Path(build), tmp_path / "graded",
                                                                parts=("naive",)), sandbox=Sandbox())
    tests = graded_tests(result, edited)
    public = next(t for t in tests if t["name"].startswith("Naive kernel: public cases"))
    hidden = next(t for t in tests if t["name"].startswith("Naive kernel: hidden cases"))
    assert public["max_score"] + hidden["max_score"] == pytest.approx(12)
    assert any(c.name == "w19" for c in result.parts[0].cases)


def test_a_solved_starter_is_refused_by_both_bundles_and_names_the_fix(root, tmp_path):
    """Staff who try the lab in their own checkout solve starter/naive.cu
    there: neither bundle may ship it, and nothing is written."""
    import subprocess
    import sys

    project = copy_project(root, tmp_path / "project")
    (project / "starter" / "naive.cu").write_text((project / "solutions" / "naive.cu").read_text())
    (project / "starter" / "notes.txt").write_text("my own notes\n")
    for bundle, build in (("student", student_bundle), ("autograder", autograder_bundle)):
        out = tmp_path / f"{bundle}.out"
        with pytest.raises(DistError) as refused:
            if bundle == "student":
                build(project, out, tmp_path / "no-handout-needed")
            else:
                build(project, out)
        message = str(refused.value)
        assert "starter/naive.cu (edited)" in message and "starter/notes.txt (not generated)" in message
        assert "tilelab starter" in message and "starter/tiled.cu" not in message
        assert not out.exists()

    cli = subprocess.run([sys.executable, "-m", "tilelab.cli", "--root", str(project), "dist", "student",
                          "--out", str(tmp_path / "dist")], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(root / "grader")})
    assert cli.returncode == 1, cli.stderr
    assert "starter/naive.cu (edited)" in cli.stderr and "Traceback" not in cli.stderr
    assert not (tmp_path / "dist").exists()  # neither the handout (which shows the starter) nor the bundle

    (project / "starter" / "notes.txt").unlink()
    (project / "starter" / "naive.cu").unlink()
    with pytest.raises(DistError, match=r"starter/naive.cu \(missing\)"):
        autograder_bundle(project, tmp_path / "a.zip")
