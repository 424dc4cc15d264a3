"""The command line as a user meets it: one convention for options, parts
named by id or file, errors for unknown names, --version, and what `check`
tells a student on a machine without a GPU."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from rich.console import Console
from test_grading_run import build_dir

import grade_fixtures as fixtures
from tilelab import __version__
from tilelab.cli import main
from tilelab.outputs.check_view import WHERE_TO_RUN, print_check
from tilelab.spec.assignment import AssignmentError, load_assignment

ROOT = Path(__file__).resolve().parents[2]


def tilelab(*args, cwd=None) -> subprocess.CompletedProcess:
    """The command as a user runs it, in a process of its own, 100 columns wide."""
    return subprocess.run([sys.executable, "-m", "tilelab.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "grader"), "COLUMNS": "100"})


def test_version_is_the_package_version():
    pyproject = (ROOT / "grader" / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"$', pyproject, re.M).group(1) == __version__
    run = tilelab("--version")
    assert run.returncode == 0 and run.stdout.strip() == f"tilelab, version {__version__}"


def test_every_out_and_jobs_option_follows_one_convention():
    commands = {name: command for name, command in main.commands.items()}
    with_out = {name for name, c in commands.items() if any(p.name == "out_dir" for p in c.params)}
    # Every command that writes files takes --out DIR, by default BUILD/<command>.
    assert with_out == {"grade", "batch", "check", "selftest", "handout", "dist", "gates", "similarity"}
    for name in with_out:
        out = next(p for p in commands[name].params if p.name == "out_dir")
        assert out.opts == ["--out"] and f"(default: BUILD/{name})" in out.help, name
        assert isinstance(out.type, click.Path) and not out.type.file_okay, name
    jobs = {name: next(p for p in c.params if p.name == "jobs") for name, c in commands.items()
            if any(p.name == "jobs" for p in c.params)}
    assert set(jobs) == {"batch", "selftest"}
    assert len({j.help.rsplit("[", 1)[1] for j in jobs.values()}) == 1


def test_parts_are_named_by_id_or_file_and_the_error_suggests_the_closest():
    assignment = load_assignment(ROOT / "assignment.yaml")
    for name in ("naive", "naive.cu", "starter/naive.cu", str(ROOT / "starter" / "naive.cu")):
        assert assignment.part_named(name).id == "naive"
    with pytest.raises(AssignmentError, match="did you mean tiled"):
        assignment.part_named("tiledd")
    with pytest.raises(AssignmentError, match="did you mean naive.cu"):
        assignment.part_named("naive.cc")


def test_an_unknown_part_is_a_usage_error_and_grades_nothing(tmp_path):
    for args in (["grade", str(ROOT / "solutions"), "--part", "tiledd", "--out", str(tmp_path / "out")],
                 ["check", "tiledd"]):
        run = tilelab("--root", str(ROOT), *args)
        assert run.returncode == 2, run.stderr
        assert "no part named 'tiledd'" in run.stderr and "did you mean tiled?" in run.stderr
        assert "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()


def test_the_check_table_fits_the_terminal_and_cuts_no_word():
    parts = [fixtures.passing_tiled(), fixtures.failing_boundary(), fixtures.challenge_part((47155.0, 47549.0))]
    parts[0].id = "dynamic_smem"  # the longest part id
    for width in (80, 100):
        console = Console(width=width, record=True)
        print_check(fixtures.grade_result(*parts), console)
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= width
        assert "…" not in text
        for header in ("part", "build", "cases", "launch", "memcheck", "racecheck", "GFLOP/s", "points"):
            assert re.search(rf"\b{header}(\s|$)", text), header
        assert "47155/41329" in text and "91% at 4096x4096x4096" in text


def _checkout_copy(tmp_path: Path) -> Path:
    """A student's folder: a copy of the starter files, which a test may then edit."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "starter", work)
    return work


def test_check_without_a_gpu_names_the_stubs_left_and_where_to_run(tmp_path):
    build = build_dir()
    work = _checkout_copy(tmp_path)
    shutil.copy(ROOT / "solutions" / "tiled.cu", work / "tiled.cu")
    run = tilelab("--root", str(ROOT), "check", "--build", str(build), "--dir", str(work), "--fast",
                  "--out", str(tmp_path / "out"), "--report")
    if json.loads((tmp_path / "out" / "grade.json").read_text())["gpu"]:
        pytest.skip("skipped: this machine has a GPU (the view without one is what is tested)")
    assert run.returncode == 1, run.stderr
    text = " ".join(run.stdout.split())
    assert "naive not written yet: naiveKernel (line 28), launchNaive (line 35)" in text.replace("ok ", "")
    assert "tiled ok no TODO stub left: the cases need a GPU" in text
    assert " ".join(WHERE_TO_RUN.split()) in text
    # The static stage of the report says the same.
    assert "not written yet: naiveKernel (line 28), launchNaive (line 35)" in (tmp_path / "out" /
                                                                                 "report.md").read_text()


def test_check_takes_a_part_by_its_file_and_scores_only_that_part(tmp_path):
    build = build_dir()
    work = _checkout_copy(tmp_path)
    run = tilelab("--root", str(ROOT), "check", str(work / "naive.cu"), "--build", str(build), "--fast",
                  "--out", str(tmp_path / "out"), "--report")
    assert run.returncode in (0, 1) and "Traceback" not in run.stderr
    graded = json.loads((tmp_path / "out" / "grade.json").read_text())
    assert [p["id"] for p in graded["parts"]] == ["naive"] and graded["submission"] == str(work)
    # The headline counts what this command checked: the part, not the questions.
    assert graded["answers"] is None and graded["max_score"] == 15
    assert "**Score: 0 / 15**" in (tmp_path / "out" / "report.md").read_text()


def test_check_writes_the_reports_only_when_asked_and_says_the_command_that_does(tmp_path):
    """grade.json alone by default, and one line with the command that
    writes the reports; --report writes them as before; a later check
    without it removes them, since they would not match its table."""
    build, work, out = build_dir(), _checkout_copy(tmp_path), tmp_path / "out"
    args = ("--root", str(ROOT), "check", "naive", "--dir", str(work), "--build", str(build), "--fast", "--out",
            str(out))
    plain = tilelab(*args)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    assert (out / "grade.json").is_file() and not (out / "report.md").exists() and not (out / "report.html").exists()
    assert f"report: `tilelab {' '.join(args)} --report` writes {out / 'report.md'} and report.html" in plain.stdout
    reported = tilelab(*args, "--report")
    assert reported.returncode == 1 and f"full report: {out / 'report.md'}" in reported.stdout
    assert "**Score: 0 / 15**" in (out / "report.md").read_text() and (out / "report.html").is_file()
    # The same table: the report came from the same result.
    assert plain.stdout.split("report:")[0] in reported.stdout
    tilelab(*args)
    assert not (out / "report.md").exists() and not (out / "report.html").exists()


def test_check_verbose_says_where_the_time_went(tmp_path):
    build, work = build_dir(), _checkout_copy(tmp_path)
    # Bytes never built before: the part is compiled, not taken from the kept builds.
    (work / "naive.cu").write_text((ROOT / "solutions" / "naive.cu").read_text() + f"// {tmp_path}\n")
    run = tilelab("--root", str(ROOT), "check", "naive", "--dir", str(work), "--build", str(build), "--fast", "-v",
                  "--out", str(tmp_path / "out"))
    assert "Traceback" not in run.stderr and "where the time went" in run.stdout
    rows = {line.split()[0]: line for line in run.stdout.splitlines() if line.startswith("  ") and line.split()}
    assert "naive" in rows["build"] and "(nvcc compile, then link)" in rows["build"]
    graded = json.loads((tmp_path / "out" / "grade.json").read_text())
    start, end = graded["spans"]["build"]
    assert f"{start:.2f} -> {end:.2f}" in rows["build"]
    total = re.search(r"^the command: ([\d.]+) s: start-up .* the grading ([\d.]+) s", run.stdout, re.M)
    assert total and float(total[1]) >= float(total[2]) > 0


def test_check_says_in_the_terminal_when_answers_yaml_cannot_be_read(tmp_path):
    build = build_dir()
    hand_in = ROOT / "tests" / "submissions" / "answers-malformed"
    run = tilelab("--root", str(ROOT), "check", "answers.yaml", "--build", str(build), "--dir", str(hand_in),
                  "--out", str(tmp_path / "out"))
    assert run.returncode == 1, run.stderr
    text = " ".join(run.stdout.split())
    assert "answers.yaml is not valid YAML (line 14" in text and "must be quoted" in text
    graded = json.loads((tmp_path / "out" / "grade.json").read_text())
    assert graded["parts"] == [] and graded["answers"]["status"] != "read"
    readable = tilelab("--root", str(ROOT), "check", "answers", "--build", str(build), "--dir",
                       str(ROOT / "tests" / "submissions" / "answers-all-correct"), "--out", str(tmp_path / "ok"))
    assert readable.returncode == 0, readable.stdout + readable.stderr
    assert re.search(r"answers\.yaml: [\d.]+ / [\d.]+ points, (\d+) of \1 automatic answers right",
                     " ".join(readable.stdout.split()))


def _students_copy(tmp_path: Path) -> tuple:
    """(root, build) as a student has them: the public assignment.yaml and no
    answer key beside it, a build tree without the compiled references."""
    from tilelab.spec.public import public_assignment_text

    copy = tmp_path / "student-copy"
    copy.mkdir()
    (copy / "assignment.yaml").write_text(public_assignment_text(ROOT))
    build = tmp_path / "student-build"
    build.mkdir()
    for entry in build_dir().iterdir():
        if entry.name not in ("reference", "check-cache", "part-cache"):
            (build / entry.name).symlink_to(entry)
    return copy, build


def test_check_says_each_answer_that_cannot_be_read_and_fails(tmp_path):
    """A choice that is not an option, a list, a key given twice with two
    answers: each is said in the terminal with its id and line, none counts
    as answered, and check exits 1, in a student's copy (no key) as where the key is."""
    copy, build = _students_copy(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    text = (ROOT / "starter" / "answers.yaml").read_text()
    for empty, given in (("matadd-smem:\n", "matadd-smem: e\n"),
                         ("tile32-reduction:\n", "tile32-reduction: [32, 64]\n"),
                         ("local-versions:\n", "local-versions: 512000\n"),
                         ("shared-versions:\n", "shared-versions: 1000\nshared-versions: 2000\n")):
        assert empty in text
        text = text.replace(empty, given, 1)
    (work / "answers.yaml").write_text(text + "\nfoo-z: 3\n")
    # Where the key is, so are the compiled references: the real build tree, and student code's sandbox.
    for root, build, out in ((copy, build, tmp_path / "out"), (ROOT, build_dir(), tmp_path / "keyed")):
        run = tilelab("--root", str(root), "check", "answers.yaml", "--dir", str(work), "--build", str(build),
                      "--out", str(out))
        assert run.returncode == 1, run.stdout + run.stderr
        said = " ".join(run.stdout.split())
        answers = json.loads((out / "grade.json").read_text())["answers"]
        assert answers["graded"] == (root == ROOT)
        invalid = {q["id"]: q for q in answers["questions"] if q["status"] == "invalid"}
        assert sorted(invalid) == ["matadd-smem", "shared-versions", "tile32-reduction"]
        for q in invalid.values():
            assert " ".join(f"answers.yaml line {q['line']}: '{q['id']}': {q['message']}".split()) in said
        for note in answers["notes"]:
            assert " ".join(f"answers.yaml: {note}".split()) in said
        assert any("'foo-z' is not a question id" in note for note in answers["notes"])
        # Only local-versions was answered in a form that can be graded.
        assert "1 of 36 questions answered" in said
        if root == copy:
            assert "3 not readable" in said and " ".join(answers["not_graded_reason"].split()) in said
