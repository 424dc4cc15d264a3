"""The autograder's entry points, docker/setup.sh and docker/run_autograder,
outside Docker: a directory laid out like Gradescope's /autograder
(TILELAB_AUTOGRADER_ROOT) gets the real autograder zip unpacked into source/,
setup.sh runs there in offline mode (it builds the harness: a minute or two,
once for the module), then run_autograder grades the reference solutions, an
empty hand-in, and runs once without the grader's virtual environment.

setup.sh must run as root (it creates the sandbox user and closes the key to
it), and the build needs nvcc: elsewhere these tests are skipped, never passed.
"""

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest
from test_gradescope import check_spec

from tilelab.authoring.dist import autograder_bundle
from tilelab.system.sandbox import sandbox_for_this_process

ROOT = Path(__file__).resolve().parents[2]
GPU_STAGES = ("correctness", "launch", "memcheck", "racecheck", "speed")
# Offline, setup.sh (scripts/python-env) makes a venv that uses the packages
# of the python3 it runs: the checkout's .venv, first on PATH, has them.
OFFLINE_PROBE = "import yaml, click, rich, jinja2, matplotlib"


def _env(base: Path) -> dict:
    """The environment Gradescope would give, offline: nothing that points
    Python at the checkout (ctest sets PYTHONPATH), the autograder root moved
    to `base`, and a python3 that holds the grader's packages (the
    checkout's .venv, as bootstrap made it)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "TILELAB_ROOT", "TILELAB_BUILD_DIR")}
    env["TILELAB_AUTOGRADER_ROOT"] = str(base)
    env["TILELAB_OFFLINE"] = "1"
    if (ROOT / ".venv" / "bin" / "python3").exists():
        env["PATH"] = f"{ROOT / '.venv' / 'bin'}:" + env.get("PATH", "")
    if shutil.which("nvcc", path=env.get("PATH")) is None:
        env["PATH"] = "/usr/local/cuda/bin:" + env.get("PATH", "")
    return env


def _cannot_run() -> str:
    if os.geteuid() != 0:
        return "skipped: setup.sh must run as root (it creates the sandbox user and closes the key to it)"
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        return "skipped: no nvcc (CUDA Toolkit): setup.sh cannot build the harness"
    missing = [t for t in ("cmake", "useradd", "prlimit", "setpriv", "unshare") if shutil.which(t) is None]
    if missing:
        return f"skipped: {', '.join(missing)} not installed"
    probe = subprocess.run(["python3", "-c", OFFLINE_PROBE], env=_env(Path("/nonexistent")), capture_output=True,
                           text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["python3 failed"])[-1]
        return f"skipped: python3 cannot set up the grader offline ({last})"
    return ""


def _unzip(zip_path: Path, dest: Path) -> None:
    """Unpacks keeping each file's mode, as unzip does."""
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            path = Path(z.extract(info, dest))
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                path.chmod(mode)


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """A directory laid out like /autograder, after setup.sh."""
    reason = _cannot_run()
    if reason:
        pytest.skip(reason)
    # The zip holds the key: it stays in pytest's own directory (mode 0700).
    zip_path = autograder_bundle(ROOT, tmp_path_factory.mktemp("zip") / "autograder.zip")
    # Not under pytest's directory: the sandbox user must reach source/.
    base = Path(tempfile.mkdtemp(prefix="tilelab-autograder-"))
    base.chmod(0o755)
    try:
        _unzip(zip_path, base / "source")
        shutil.copy2(base / "source" / "run_autograder", base / "run_autograder")  # as Gradescope does
        setup = subprocess.run(["bash", "setup.sh"], cwd=base / "source", env=_env(base), capture_output=True,
                               text=True, timeout=1800)
        assert setup.returncode == 0, f"setup.sh failed:\n{setup.stdout}\n{setup.stderr}"
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _old_cmake_first(tmp_path: Path, env: dict) -> dict:
    """`env` with a cmake 3.22 first on PATH, as apt gives on Ubuntu 22.04 (Gradescope's default image)."""
    bin_dir = tmp_path / "old-cmake"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text("#!/bin/sh\necho 'cmake version 3.22.1'\n")
    (bin_dir / "cmake").chmod(0o755)
    return {**env, "PATH": f"{bin_dir}:{env['PATH']}"}


def test_setup_offline_with_only_an_old_cmake_says_what_to_install(autograder, tmp_path):
    # Online it fetches CMake from PyPI into .venv (scripts/build-deps); offline it cannot.
    done = subprocess.run(["bash", "setup.sh", "python"], cwd=autograder / "source",
                          env=_old_cmake_first(tmp_path, _env(autograder)), capture_output=True, text=True,
                          timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert done.stderr.strip().splitlines()[-1] == (
        "setup.sh: CMake 3.24 or newer is needed (here: cmake version 3.22.1) and could not be fetched from PyPI: "
        "install it (pip install cmake)"), said


def test_without_nlohmann_json_offline_the_configure_says_what_to_install(autograder, tmp_path):
    """setup.sh's configure (scripts/build-deps) where neither the system nor
    the grader's Python has nlohmann/json: one line naming the fix, and none
    naming ./scripts/bootstrap, which the zip does not hold."""
    shadow = tmp_path / "no-nlohmann"
    shadow.mkdir()
    (shadow / "nlohmann_json.py").write_text("raise ImportError('No module named nlohmann_json')\n")
    configure = ('. scripts/build-deps; deps_configure "$1" -B "$2" -DTILELAB_BUILD_TESTS=OFF '
                 '-DPython3_EXECUTABLE="$PWD/.venv/bin/python"')
    log = tmp_path / "configure.log"
    done = subprocess.run(["bash", "-c", configure, "setup.sh", str(log), str(tmp_path / "build")],
                          cwd=autograder / "source", env={**_env(autograder), "PYTHONPATH": str(shadow)},
                          capture_output=True, text=True, timeout=300)
    if done.returncode == 0 and "nlohmann/json" in log.read_text() and "from the system" in log.read_text():
        pytest.skip("skipped: this machine has nlohmann/json installed, so nothing is missing")
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}\n{log.read_text()}"
    assert done.stderr.strip() == (
        "setup.sh: nlohmann/json is needed and could not be fetched from PyPI: install it (apt install "
        "nlohmann-json3-dev, or pip install nlohmann-json into .venv)")
    assert "bootstrap" not in done.stdout + done.stderr


def test_the_entry_points_call_only_scripts_the_zip_holds(autograder):
    source = autograder / "source"
    scripts = [source / n for n in ("setup.sh", "run_autograder", "run_prairielearn")] + \
        sorted((source / "scripts").iterdir())
    named = {(path.name, m) for path in scripts for line in path.read_text().splitlines()
             if not line.lstrip().startswith("#") for m in re.findall(r"scripts/[\w.-]+", line)}
    assert named  # setup.sh runs scripts/python-env and sources scripts/build-deps
    assert [(where, what) for where, what in sorted(named) if not (source / what).is_file()] == []


def run_autograder(base: Path, files=()) -> tuple:
    """run_autograder on a hand-in of `files`; its output and results.json (checked against the spec)."""
    submission, results = base / "submission", base / "results"
    for d in (submission, results):
        shutil.rmtree(d, ignore_errors=True)
    submission.mkdir()
    for f in files:
        shutil.copy(f, submission / f.name)
    done = subprocess.run([str(base / "run_autograder")], cwd=base, env=_env(base), capture_output=True,
                          text=True, timeout=1800)
    said = f"run_autograder said:\n{done.stdout}\n{done.stderr}"
    path = results / "results.json"
    assert path.is_file(), f"no results.json; {said}"
    doc = json.loads(path.read_text())
    check_spec(doc)
    return done, doc, said


@pytest.fixture(scope="module")
def graded_solutions(autograder):
    """The reference solutions and their answers, graded by run_autograder."""
    files = sorted((ROOT / "solutions").glob("*.cu")) + [ROOT / "solutions" / "answers.yaml"]
    done, doc, said = run_autograder(autograder, files)
    assert done.returncode == 0, said
    grade = json.loads((autograder / "results" / "grade.json").read_text())
    return doc, grade, done.stdout


def _open_to_others(top: Path):
    """Files under `top` that any user can read (through directories any user can enter)."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if os.stat(os.path.join(dirpath, d)).st_mode & 0o001]
        for name in filenames:
            path = Path(dirpath) / name
            if not path.is_symlink() and path.stat().st_mode & 0o004:
                yield path


def test_setup_makes_the_sandbox_user_and_closes_the_key_to_it(autograder, assignment):
    source = autograder / "source"
    for secret in (source / "key", source / "key" / "answers.yaml", source / "assignment.yaml"):
        assert secret.stat().st_mode & 0o007 == 0, f"{secret} is open to others"
    sandbox = sandbox_for_this_process()
    assert sandbox.switches_user
    for secret in ("key/answers.yaml", "assignment.yaml", "build/assignment.json"):
        assert not sandbox.can_read(source / secret), f"the sandbox user can read {secret}"
    # Nothing else that others can read names a hidden case (the longer
    # names only, which cannot turn up in a binary by chance).
    seen_elsewhere = {c.name for p in assignment.parts for s in ("public", "timing", "memcheck", "racecheck")
                      for c in p.cases[s]}
    hidden = {c.name.encode() for p in assignment.parts for c in p.cases["hidden"]
              if c.name not in seen_elsewhere and len(c.name) >= 8}
    assert hidden
    leaks = [(str(f.relative_to(source)), n.decode()) for f in _open_to_others(source) for n in hidden
             if n in f.read_bytes()]
    assert not leaks, f"readable by others: {leaks}"
    for needed in ("grader/harness/part_main.cu", "include/tilelab/part.h", "build/bin/tilelab-verify"):
        assert sandbox.can_read(source / needed), f"the sandbox user cannot read {needed}"
    assert (source / ".venv" / "bin" / "tilelab").exists()
    assert not (source / "solutions").exists()


def test_the_reference_solutions_build_and_the_gpu_stages_say_why_they_did_not_run(graded_solutions, assignment):
    doc, grade, stdout = graded_solutions
    builds = [t for t in doc["tests"] if t["name"].endswith(": build")]
    # An extra-credit part says so in its tests' names (its points are on top of the total).
    assert [t["name"] for t in builds] == [f"{p.title}{' (extra credit)' if p.extra_credit else ''}: build"
                                           for p in assignment.parts]
    assert all(t["status"] == "passed" for t in builds), [t["output"] for t in builds if t["status"] != "passed"]
    parts = {p["id"]: p for p in grade["parts"]}
    assert set(parts) == {p.id for p in assignment.parts}
    if grade["gpu"] is None:
        assert "no CUDA device" in stdout
        for part in parts.values():
            for stage in GPU_STAGES:
                st = part["stages"][stage]
                assert st["status"] == "not_run" and "no CUDA device" in st["summary"], (part["id"], stage, st)
        # Not the student's score: withheld, said once at the top, and no test for a stage that did not run.
        assert doc["score"] == 0 and "withheld" in doc["extra_data"]["tilelab"]
        assert "not a problem with your work" in doc["output"]
        assert not [t for t in doc["tests"] if ": public cases" in t["name"] or t["name"].endswith(": speed")]
        assert all("Not run here (this grader has no GPU)" in t["output"] for t in builds)
    else:  # a GPU machine: the reference solutions must also be right
        assert all(p["stages"]["correctness"]["status"] == "passed" for p in parts.values())


def test_the_questions_get_every_automatic_point_from_the_key_in_the_zip(graded_solutions, assignment):
    doc, _, _ = graded_solutions
    questions = [t for t in doc["tests"] if "questions" in t.get("tags", [])]
    assert [t["name"] for t in questions] == [f"Question {q.id}" for q in assignment.questions]
    auto = [t for t in questions if "manual" not in t["tags"]]
    assert len(auto) == sum(q.kind != "text" for q in assignment.questions) > 0
    for t in auto:
        assert t["max_score"] > 0 and t["score"] == t["max_score"], t
    assert all(t["status"] == "passed" for t in questions)  # the written answers are collected for a TA


def test_no_visible_test_names_a_hidden_case(graded_solutions, assignment):
    doc, _, _ = graded_solutions
    # Everything a student sees at some time: tests shown after publication too.
    visible = [t for t in doc["tests"] if t["visibility"] != "hidden"]
    public_names = {c.name for p in assignment.parts for s in ("public", "timing", "memcheck", "racecheck")
                    for c in p.cases[s]}

    def named(name: str, text: str) -> bool:
        return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None

    for part in assignment.parts:
        own = {c.name for s in ("public", "timing", "memcheck", "racecheck") for c in part.cases[s]}
        hidden = [c.name for c in part.cases["hidden"] if c.name not in own]
        assert hidden
        tests = [t for t in visible if part.id in t.get("tags", [])]
        # The text looked at does name cases: the public ones, each of them
        # (where they ran: without a GPU the part has its build test only).
        public = next((t for t in tests if ": public cases" in t["name"]), None)
        assert public is not None or "withheld" in doc["extra_data"]["tilelab"]
        assert public is None or all(named(c.name, public["output"]) for c in part.cases["public"])
        for t in tests:
            shown = [n for n in hidden if named(n, t["name"] + "\n" + t["output"])]
            assert not shown, f"{t['name']} names hidden cases {shown}"
    # Text about no part in particular may name a public case of any part, never a hidden one.
    hidden_only = {c.name for p in assignment.parts for c in p.cases["hidden"]} - public_names
    general = doc["output"] + "".join(t["output"] for t in visible if not set(t.get("tags", [])) & {
        p.id for p in assignment.parts})
    assert not [n for n in hidden_only if named(n, general)]


def test_an_empty_hand_in_still_gets_valid_results(autograder, assignment):
    done, doc, said = run_autograder(autograder)
    assert done.returncode == 0, said
    builds = [t for t in doc["tests"] if t["name"].endswith(": build")]
    assert len(builds) == len(assignment.parts)
    assert all(t["status"] == "failed" and "is missing" in t["output"] for t in builds)
    assert doc["score"] == 0


@contextlib.contextmanager
def _without_the_graders_venv(autograder: Path):
    """The grader cannot start: its virtual environment is gone (a broken setup)."""
    venv, away = autograder / "source" / ".venv", autograder / "source" / ".venv-away"
    venv.rename(away)
    try:
        yield
    finally:
        away.rename(venv)


def test_without_the_grader_run_autograder_writes_the_fallback_results(autograder):
    with _without_the_graders_venv(autograder):
        done, doc, said = run_autograder(autograder, [ROOT / "solutions" / "naive.cu"])
    assert done.returncode != 0, said
    assert "wrote no results.json" in done.stdout
    assert doc["score"] == 0
    assert doc["tests"][0]["name"] == "Autograder error" and doc["tests"][0]["visibility"] == "visible"
    assert doc["tests"][1]["visibility"] == "hidden" and "exit status 127" in doc["tests"][1]["output"]


def run_prairielearn(base: Path, files=()) -> tuple:
    """run_prairielearn on a hand-in of `files` in PrairieLearn's layout (/grade/student)."""
    from tilelab.outputs import prairielearn

    grade = base / "pl-grade"
    shutil.rmtree(grade, ignore_errors=True)
    (grade / "student").mkdir(parents=True)
    for f in files:
        shutil.copy(f, grade / "student" / f.name)
    env = {**_env(base), "TILELAB_PL_ROOT": str(grade)}
    done = subprocess.run([str(base / "source" / "run_prairielearn")], cwd=base, env=env, capture_output=True,
                          text=True, timeout=1800)
    said = f"run_prairielearn said:\n{done.stdout}\n{done.stderr}"
    path = grade / "results" / "results.json"
    assert path.is_file(), f"no results.json; {said}"
    doc = json.loads(path.read_text())
    assert prairielearn.spec_problems(doc) == [], said
    return done, doc, said


def test_run_prairielearn_grades_in_prairielearns_layout_and_form(autograder):
    files = sorted((ROOT / "solutions").glob("*.cu")) + [ROOT / "solutions" / "answers.yaml"]
    done, doc, said = run_prairielearn(autograder, files)
    assert done.returncode == 0, said
    if "no CUDA device" in done.stdout:
        # Nothing a student did can be judged without a GPU: not gradable, and not their fault.
        assert doc["gradable"] is False and "no GPU" in doc["format_errors"][0]
    else:
        assert doc["gradable"] is True and doc["score"] == 1.0, said


def test_run_prairielearn_answers_for_a_grader_that_cannot_start(autograder):
    with _without_the_graders_venv(autograder):
        done, doc, said = run_prairielearn(autograder, [ROOT / "solutions" / "naive.cu"])
    assert done.returncode != 0 and "wrote no results.json" in done.stdout, said
    assert doc["gradable"] is False and "exit status 127" in doc["output"]
