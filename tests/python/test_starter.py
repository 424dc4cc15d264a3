"""The starter is generated from the solutions, and starter/ must be what
generation gives today."""

import re

import pytest
from click.testing import CliRunner

from tilelab.authoring.starter import StarterError, starter_files, strip_solution
from tilelab.cli import main
from tilelab.spec.assignment import load_assignment

SOLVED = """\
// contract comment
int f(int x) {
  // BEGIN SOLUTION
  // HINT: Return twice x.
  // HINT: Use multiplication.
  return 2 * x;
  // END SOLUTION
  // STUB: TILELAB_TODO("f");
}
"""


def test_a_region_becomes_a_todo_with_its_hints_and_stub():
    assert strip_solution(SOLVED, "f.cu") == (
        "// contract comment\n"
        "int f(int x) {\n"
        "  // TODO(student): Return twice x.\n"
        "  //   Use multiplication.\n"
        '  TILELAB_TODO("f");\n'
        "}\n"
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("int x;\n", "no BEGIN SOLUTION region"),
        ("// BEGIN SOLUTION\n// HINT: h\ncode\n", "without a matching END SOLUTION"),
        ("// BEGIN SOLUTION\ncode\n// END SOLUTION\n// STUB: s\n", "must start with at least one '// HINT:'"),
        ("// BEGIN SOLUTION\n// HINT: h\ncode\n// END SOLUTION\n", "needs '// STUB:' lines"),
        ("// END SOLUTION\n", "outside a BEGIN SOLUTION region"),
        ("// BEGIN SOLUTION\n// HINT: h\n// BEGIN SOLUTION\n", "BEGIN SOLUTION inside the region opened at line 1"),
        ("// BEGIN SOLUTION\n// HINT: h\nx\n// STUB: s\n// END SOLUTION\n", "belong right after BEGIN / END"),
    ],
)
def test_malformed_markers_name_file_and_line(text, message):
    with pytest.raises(StarterError, match=message):
        strip_solution(text, "bad.cu")


def test_starter_directory_is_what_generation_gives(root):
    """Fails when someone edits solutions/ (or starter/) without regenerating."""
    files = starter_files(load_assignment(root / "assignment.yaml"), root / "solutions", root / "starter")
    stale = [str(f.path) for f in files if not f.up_to_date]
    assert not stale, f"starter/ is out of date; run `tilelab starter`: {stale}"


def test_every_starter_region_fails_loudly_unless_the_starter_is_working(root):
    assignment = load_assignment(root / "assignment.yaml")
    working = {assignment.part(p).file for p in ("challenge",)}
    assert all(p.starter == "todo" for p in assignment.parts if p.file not in working)
    for f in starter_files(assignment, root / "solutions", root / "starter"):
        if f.path.suffix != ".cu":
            continue
        assert "BEGIN SOLUTION" not in f.text
        todos = f.text.count("TODO(student):")
        stubs = f.text.count("TILELAB_TODO(") + f.text.count("TILELAB_DEVICE_TODO(")
        if f.path.name in working:
            # A correct, slow kernel with its TODO hints: nothing in it stops a run.
            assert todos >= 2 and stubs == 0, f.path
        else:
            assert todos >= 2 and stubs == todos, f.path


def test_a_multi_line_stub_keeps_its_indentation():
    text = ("void f() {\n  // BEGIN SOLUTION\n  // HINT: Steps:\n  // HINT:   1. first\n  solved();\n"
            "  // END SOLUTION\n  // STUB: for (;;) {\n  // STUB:   slow();\n  // STUB: }\n}\n")
    assert strip_solution(text, "x.cu") == ("void f() {\n  // TODO(student): Steps:\n  //     1. first\n"
                                            "  for (;;) {\n    slow();\n  }\n}\n")


def test_cli_check_reports_a_stale_starter(root, tmp_path):
    for name in ("assignment.yaml",):
        (tmp_path / name).write_text((root / name).read_text())
    (tmp_path / "solutions").mkdir()
    for src in (root / "solutions").glob("*.cu"):
        (tmp_path / "solutions" / src.name).write_text(src.read_text())
    runner = CliRunner()
    result = runner.invoke(main, ["--root", str(tmp_path), "starter", "--check"])
    assert result.exit_code == 1
    assert "out of date: starter/naive.cu" in result.output
    result = runner.invoke(main, ["--root", str(tmp_path), "starter"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "starter" / "tiled.cu").read_text() == (root / "starter" / "tiled.cu").read_text()
    result = runner.invoke(main, ["--root", str(tmp_path), "starter", "--check"])
    assert result.exit_code == 0 and "up to date" in result.output


def test_cli_reports_a_broken_solution(root, tmp_path):
    (tmp_path / "assignment.yaml").write_text((root / "assignment.yaml").read_text())
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "naive.cu").write_text("// BEGIN SOLUTION\n")
    result = CliRunner().invoke(main, ["--root", str(tmp_path), "starter"])
    assert result.exit_code == 1
    assert "naive.cu:1: a solution region must start with at least one '// HINT:' line" in result.output


def test_answers_template_lists_every_question_unanswered(root):
    import yaml

    assignment = load_assignment(root / "assignment.yaml")
    text = (root / "starter" / "answers.yaml").read_text()
    answers = yaml.safe_load(text)
    assert list(answers) == [q.id for q in assignment.questions]
    assert all(v is None for v in answers.values())
    assert "# occupancy (number): On that SM, a kernel uses blocks of 256 threads" in text
    assert "#   b: Width / TILE_WIDTH is an integer division" in text


def test_the_code_a_question_refers_to_is_shown_above_it_in_answers_yaml(root):
    """A question that speaks of code "shown above" (fooKernel, launch_bug)
    finds it above itself in starter/answers.yaml, as in the handout: each
    question_code entry, every line of it, as a comment before the first
    question that names it or a kernel it defines."""
    assignment = load_assignment(root / "assignment.yaml")
    lines = (root / "starter" / "answers.yaml").read_text().splitlines()
    # Where each question starts: the comment that asks it, above its `id:` line.
    asked_at = {q.id: next(i for i, line in enumerate(lines) if line.startswith(f"# {q.id} ("))
                for q in assignment.questions}
    assert assignment.question_code and any("shown above" in q.text for q in assignment.questions)
    for name, code in assignment.question_code.items():
        words = [name] + re.findall(r"__global__\s+void\s+(\w+)\s*\(", code)
        askers = [q for q in assignment.questions if any(re.search(rf"\b{re.escape(w)}\b", q.text) for w in words)]
        assert askers, f"no question refers to {name}"
        comments = [line[1:].strip() for line in lines[:min(asked_at[q.id] for q in askers)] if line.startswith("#")]
        for code_line in (c.strip() for c in code.splitlines() if c.strip()):
            assert code_line in comments, (name, code_line)
