"""The bundles: what each holds and must never hold, and that one edit of
assignment.yaml reaches the handout, the grader and both bundles."""

import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import require_pdf_stack

from tilelab.authoring.dist import (STUDENT_SERVICE_FILE, TOKEN_ENV, DistError, autograder_bundle, bundle_folder,
                                   bundle_name, check_student_bundle, student_bundle)
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
    prefix = bundle_folder(load_assignment(root / "assignment.yaml")) + "/"
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        shipped = yaml.safe_load(tar.extractfile(prefix + "assignment.yaml"))
        answers = tar.extractfile(prefix + "starter/answers.yaml").read().decode()
        bootstrap = tar.getmember(prefix + "scripts/bootstrap")
        bootstrap_text = tar.extractfile(bootstrap).read().decode()
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
        shipped = yaml.safe_load(tar.extractfile(f"{bundle_folder(edited)}/assignment.yaml"))
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


# --- names, setup and documentation ------------------------------------------------------------


def test_the_bundles_are_named_after_the_assignment_once(root, bundles):
    """NAME-student.tar.gz unpacking into NAME/, and NAME-autograder.zip: the
    assignment's name is not prefixed again (tilelab_matmul, not
    tilelab-tilelab_matmul), and every page or script that names a bundle
    says so."""
    assignment = load_assignment(root / "assignment.yaml")
    name = assignment.name
    assert bundle_name(assignment, "student") == f"{name}-student.tar.gz"
    assert bundle_name(assignment, "autograder") == f"{name}-autograder.zip"
    for bundle in ("student", "autograder"):
        # The tool's own name appears only as often as the assignment's name holds it.
        assert bundle_name(assignment, bundle).count("tilelab") == name.count("tilelab")
    tarball, _ = bundles
    with tarfile.open(tarball) as tar:
        assert {n.split("/", 1)[0] for n in tar.getnames()} == {bundle_folder(assignment)} == {name}
    # The old doubled names, in any place that tells a person or a script what to look for.
    doubled = re.compile(rf"tilelab-(NAME|\*|{re.escape(name)})\b|tilelab-\{{")
    places = [root / "docs" / p for p in ("instructor.md", "student.md", "ta.md", "colab.ipynb")]
    places += [root / "scripts" / "gpu-suite", root / "docker" / "Dockerfile", root / "grader" / "tilelab" / "cli.py",
               root / "grader" / "tilelab" / "authoring" / "dist.py"]
    for place in places:
        found = doubled.findall(place.read_text(encoding="utf-8"))
        assert not found, f"{place.relative_to(root)} still names a bundle tilelab-...: {found}"


def _python_env_list(folder: Path, *options: str) -> list:
    """The requirements scripts/python-env of `folder` installs there (--list fetches nothing)."""
    done = subprocess.run(["bash", "scripts/python-env", "--list", *options], cwd=folder, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0].lower()


def test_the_student_bundle_installs_only_what_a_students_check_needs(root, bundles, tmp_path):
    """The bundle's bootstrap installs the grader's own packages and no
    test tool or PDF stack (a student never runs pytest or renders the
    handout); a course checkout still installs the tests' and the service's."""
    tomllib = pytest.importorskip("tomllib", reason="skipped: reading pyproject.toml needs Python 3.11")
    pyproject = tomllib.loads((root / "grader" / "pyproject.toml").read_text())["project"]
    extras = pyproject["optional-dependencies"]
    tarball, _ = bundles
    with tarfile.open(tarball) as tar:
        tar.extractall(tmp_path, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    unpacked = tmp_path / bundle_folder(load_assignment(root / "assignment.yaml"))
    student = _python_env_list(unpacked)
    assert student == pyproject["dependencies"]
    for tool in ("pytest", "weasyprint", "playwright"):
        assert tool not in {_requirement_name(r) for r in student}
    # The script the bundle runs is the checkout's: the difference is the folder, which has no tests/.
    assert (unpacked / "scripts" / "python-env").read_bytes() == (root / "scripts" / "python-env").read_bytes()
    checkout = _python_env_list(root)
    assert set(checkout) == set(pyproject["dependencies"] + extras["test"] + extras["service"]
                                + extras["service-test"])
    assert {"pytest", "weasyprint"} <= {_requirement_name(r) for r in checkout}
    assert _python_env_list(root, "--no-test-tools") == pyproject["dependencies"]


def test_instructor_md_tells_how_the_student_bundle_gets_the_grading_service(root):
    """`check --remote` needs the service's URL in the bundle: the page that
    describes the student bundle says how it gets there, where each
    student's token goes, and links the service's page."""
    text = (root / "docs" / "instructor.md").read_text(encoding="utf-8")
    bundles = text.split("## Bundles", 1)[1].split("\n## ", 1)[0]
    flat = " ".join(bundles.split())
    assert "tilelab dist student --service" in flat
    assert STUDENT_SERVICE_FILE in flat and "tilelab check --remote" in flat
    assert TOKEN_ENV in flat and "`token:`" in flat
    assert "(service.md" in flat
