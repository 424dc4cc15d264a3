"""What each edition of the handout holds: everything a student needs in
every format; in the student edition no answer, no hidden case and no
solution code, in the TA edition all of them; each part's starter code and
the questions' code, no line of it broken in the PDF."""

import html
import re
from pathlib import Path

import pytest
from handout_fixtures import (KNOWN_SECRET_ANSWERS, edited_project, edition_pdf_text, folded, hidden_only,
                              mentions_name, part_section, secret_answers, visible_html)

from tilelab.authoring.handout import HandoutError, render_html, render_markdown
from tilelab.authoring.handout_code import CODE_PT, CODE_WIDTH_PT, MONO_ADVANCE_EM, CodeError, fitting_pt, part_excerpts
from tilelab.authoring.starter import solution_region_lines
from tilelab.text.markdown import md_text


# --- everything a student needs is in every format ---------------------------------------------


def _required_texts(assignment) -> list:
    texts = []
    for part in assignment.parts:
        texts += [part.id, part.title, part.declaration]
    texts += [q.id for q in assignment.questions]
    return texts


@pytest.mark.parametrize("variant", ["student", "ta"])
def test_every_part_declaration_and_question_is_in_markdown_and_html(root, assignment, variant):
    markdown = render_markdown(assignment, root, variant)
    page = folded(visible_html(render_html(assignment, root, variant)))
    for text in _required_texts(assignment):
        assert text in markdown, text
        assert folded(text) in page, text


@pytest.mark.parametrize("variant", ["student", "ta"])
def test_every_part_declaration_and_question_is_in_the_pdf(root, assignment, pdf_dir, variant):
    text = folded(edition_pdf_text(root, variant, pdf_dir))
    for expected in _required_texts(assignment):
        assert folded(expected) in text, expected


# --- no answer and no hidden case reaches a student ----------------------------------------------


def test_the_answer_key_has_distinctive_answers_to_look_for(root):
    secrets = secret_answers(root)
    for answer in KNOWN_SECRET_ANSWERS:
        assert answer in secrets
    assert len(secrets) >= 5


def test_the_student_edition_holds_no_answer_and_no_hidden_case(root, assignment, pdf_dir):
    names, sizes = hidden_only(assignment)
    assert names and sizes
    outputs = {
        "markdown": render_markdown(assignment, root, "student"),
        "html": visible_html(render_html(assignment, root, "student")),
        "pdf": edition_pdf_text(root, "student", pdf_dir),
    }
    for fmt, text in outputs.items():
        flat = folded(text)
        assert "Answer key" not in text, fmt
        for answer in secret_answers(root):
            assert folded(answer) not in flat and folded(md_text(answer)) not in flat, (fmt, answer)
        for name in names:
            assert not mentions_name(text, name), (fmt, name)
        for size in sizes:
            assert size not in flat, (fmt, size)


def test_the_ta_edition_holds_every_answer_and_every_hidden_case(root, assignment, pdf_dir):
    names, sizes = hidden_only(assignment)
    markdown = render_markdown(assignment, root, "ta")
    page = folded(visible_html(render_html(assignment, root, "ta")))
    pdf = folded(edition_pdf_text(root, "ta", pdf_dir))
    for answer in secret_answers(root):
        assert folded(md_text(answer)) in folded(markdown), answer
        assert folded(answer) in page, answer
    for answer in KNOWN_SECRET_ANSWERS:
        assert answer in pdf
    for part in assignment.parts:
        for case in part.cases["hidden"]:
            assert mentions_name(markdown, case.name) and mentions_name(page, case.name), case.name
    for size in sizes:
        assert size in folded(markdown) and size in page
    # Each sanitizer set is a list item of its own.
    assert not re.search(r"\S- \*compute-sanitizer", markdown)


def test_the_student_edition_says_how_many_hidden_cases_each_part_has(root, assignment):
    markdown = render_markdown(assignment, root)
    for part in assignment.parts:
        section = part_section(markdown, assignment, part.id)
        assert f"**Hidden cases:** {len(part.cases['hidden'])} more" in section
        public = [str(c.j) if part.signature == "square" else f"{c.j} × {c.k} × {c.l}"
                  for c in part.cases["public"]]
        listed = [size for line in section.splitlines() if line.startswith("- ")
                  for size in line.split(": ", 1)[1].split(", ")]
        assert sorted(listed) == sorted(public), part.id


# --- the starter code and the question code ---------------------------------------------------


def _fenced_blocks(markdown: str) -> list:
    """The code of every ```cuda block, as lists of lines."""
    return [block.split("\n") for block in re.findall(r"^```cuda\n(.*?)\n```$", markdown, re.M | re.S)]


def _is_run_of(block: list, lines: list) -> bool:
    """Whether `block` is a run of consecutive lines of `lines`."""
    return any(lines[i:i + len(block)] == block for i in range(len(lines) - len(block) + 1))


def test_each_part_shows_the_functions_that_hold_its_todos_not_the_whole_file(root, assignment):
    markdown = render_markdown(assignment, root)
    page = html.unescape(render_html(assignment, root))
    for part in assignment.parts:
        lines = (root / "starter" / part.file).read_text(encoding="utf-8").splitlines()
        section = part_section(markdown, assignment, part.id)
        blocks = [b for b in _fenced_blocks(section) if b != [part.declaration]]
        assert blocks, part.id
        for block in blocks:
            assert _is_run_of(block, lines), (part.id, block[0])
            assert "\n".join(block) in page, (part.id, block[0])
        shown = [line for block in blocks for line in block]
        # Every TODO and the launcher are there; the contract comment at the top is not.
        for line in lines:
            if "TODO(student)" in line or line.startswith(f"void {part.launcher}("):
                assert line in shown, (part.id, line)
        assert lines[0] not in shown and len(shown) < len(lines), part.id
        assert f"is `starter/{part.file}`." in folded(section), part.id


def _distinctive_solution_lines(root: Path, part) -> list:
    """Lines of a part's solution regions that no starter file and not
    assignment.yaml holds: finding one in a handout means it shows the solution."""
    public = set()
    for path in sorted((root / "starter").iterdir()):
        public |= {line.strip() for line in path.read_text(encoding="utf-8").splitlines()}
    yaml_text = (root / "assignment.yaml").read_text(encoding="utf-8")
    region = solution_region_lines((root / "solutions" / part.file).read_text(encoding="utf-8"))
    return [line.strip() for line in region
            if len(line.strip()) >= 12 and line.strip() not in public and line.strip() not in yaml_text]


def test_the_student_edition_holds_no_solution_code_and_the_ta_edition_all_of_it(root, assignment):
    student = render_markdown(assignment, root, "student")
    student_page = html.unescape(render_html(assignment, root, "student"))
    ta = render_markdown(assignment, root, "ta")
    ta_page = html.unescape(render_html(assignment, root, "ta"))
    total = 0
    for part in assignment.parts:
        lines = _distinctive_solution_lines(root, part)
        assert lines, part.id
        total += len(lines)
        for line in lines:
            assert line not in student and line not in student_page, (part.id, line)
            assert line in ta and line in ta_page, (part.id, line)
        section = part_section(ta, assignment, part.id)
        assert f"solutions/{part.file}, lines " in section and "// BEGIN SOLUTION" not in section, part.id
    assert total > 150  # the challenge's reference alone is longer


def test_the_pdfs_hold_the_solution_code_of_their_edition_only(root, assignment, pdf_dir):
    # -layout: a printed line stays one line; without it pdftotext may set a
    # line's trailing comment apart as a block of its own, wherever it lands on the page.
    student = folded(edition_pdf_text(root, "student", pdf_dir, layout=True))
    ta = folded(edition_pdf_text(root, "ta", pdf_dir, layout=True))
    for part in assignment.parts:
        for line in _distinctive_solution_lines(root, part):
            assert folded(line) not in student, (part.id, line)
            assert folded(line) in ta, (part.id, line)


def _shown_code_lines(root: Path, assignment, variant: str) -> list:
    """Every line of code the edition prints in a code block."""
    lines = [part.declaration for part in assignment.parts]
    for part in assignment.parts:
        for excerpt in part_excerpts(root, part, variant == "ta"):
            lines += excerpt.lines
    for code in assignment.question_code.values():
        lines += code.splitlines()
    return [line for line in lines if line.strip()]


@pytest.mark.parametrize("variant", ["student", "ta"])
def test_no_code_line_breaks_in_the_pdf(root, assignment, pdf_dir, variant):
    # pdftotext -layout keeps each printed line a line: a code line that
    # wrapped would be found only in two pieces. Spaces are left out of the
    # comparison, since pdftotext spaces monospaced text as it likes.
    printed = {re.sub(r"\s+", "", line) for line in edition_pdf_text(root, variant, pdf_dir, layout=True).splitlines()}
    printed_text = "\n".join(printed)
    for line in _shown_code_lines(root, assignment, variant):
        squeezed = re.sub(r"\s+", "", line)
        assert any(squeezed in p for p in printed if len(p) >= len(squeezed)), line
    # The longest shown line is there whole too (the check above would find nothing to split in short ones).
    longest = max(_shown_code_lines(root, assignment, variant), key=len)
    assert len(longest) > 100 and re.sub(r"\s+", "", longest) in printed_text


def test_a_code_block_is_set_small_enough_for_its_longest_line():
    assert fitting_pt(["x" * 60]) == CODE_PT
    for length in (110, 122, 130):
        size = fitting_pt(["x" * length])
        assert size < CODE_PT and length * MONO_ADVANCE_EM * size <= CODE_WIDTH_PT
    with pytest.raises(CodeError, match="200 characters"):
        fitting_pt(["x" * 200], where="starter/naive.cu")


def test_a_code_line_too_long_to_print_is_named(root, tmp_path, assignment):
    project = edited_project(root, tmp_path, lambda doc: None)
    path = project / "starter" / "naive.cu"
    long_line = "  // " + "a very long comment " * 10
    path.write_text(path.read_text().replace("  TILELAB_TODO(", long_line + "\n  TILELAB_TODO(", 1))
    with pytest.raises(HandoutError, match=r"starter/naive\.cu, lines 31–37: a line of 205 characters"):
        render_markdown(assignment, project)


def test_the_tiled_todo_lines_appear_verbatim_in_every_format(root, assignment, pdf_dir):
    lines = (root / "starter" / "tiled.cu").read_text(encoding="utf-8").splitlines()
    todo = [line for line in lines if "TODO(student)" in line]
    assert todo
    markdown = render_markdown(assignment, root)
    page = html.unescape(render_html(assignment, root))
    pdf = folded(edition_pdf_text(root, "student", pdf_dir))
    for line in todo:
        assert line in markdown.splitlines()
        assert line in page.splitlines()
        assert folded(line) in pdf


def test_question_code_comes_just_before_the_first_question_that_refers_to_it(root, assignment):
    markdown = render_markdown(assignment, root)
    question_at = {q.id: markdown.index(f"**{n}. `{q.id}`**")
                   for n, q in enumerate(assignment.questions, start=1)}
    first_reference = {"foo": "foo-i", "launch_bug": "launch-bug", "dyn_offset": "dyn-offset-bug"}
    assert set(first_reference) == set(assignment.question_code)
    ids = [q.id for q in assignment.questions]
    for name, qid in first_reference.items():
        block = markdown.index(f"Code `{name}`:")
        previous = ids[ids.index(qid) - 1]
        assert question_at[previous] < block < question_at[qid], name
        first_line = assignment.question_code[name].splitlines()[0]
        assert markdown.count(first_line) == 1  # shown once, not before every question


def test_choice_questions_list_their_options(root, assignment):
    markdown = render_markdown(assignment, root)
    for q in assignment.questions:
        for option_id, text in q.options.items():
            assert f"- `{option_id}`: {md_text(text)}" in markdown
