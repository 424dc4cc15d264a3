"""Grading answers.yaml: every kind of file and answer a student can hand in,
against the real questions of assignment.yaml and the real key. The key
itself, and what of it a student may see: test_answer_key.py."""

import os
import time
from dataclasses import replace

import pytest
from answers_fixtures import AUTOMATIC_POINTS, by_id
from grade_fixtures import graded_answers

from tilelab.selftest.handins import AnswersExpectation, SelftestError, judge_answers, load_hand_ins
from tilelab.grading.answers import QUESTION_STATUSES, TEXT_DISPLAY_CHARS, grade_answers, parse_number
from tilelab.grading.answers_file import MAX_BYTES
from tilelab.spec.assignment import load_assignment


# --- whole-file outcomes ----------------------------------------------------------


def test_missing_file_leaves_every_question_unanswered(tmp_path, questions, key):
    result = grade_answers(tmp_path / "answers.yaml", questions, key)
    assert result.status == "missing" and result.score == 0 and result.max_score == AUTOMATIC_POINTS
    assert "answers.yaml was not handed in" in result.message
    assert all(q.status == "unanswered" and q.message == "answers.yaml was not handed in." for q in result.questions)


def test_a_file_over_64_kb_is_not_parsed(grade):
    text = "tile32-reduction: 32\n" + "# padding\n" * (MAX_BYTES // 10)
    assert len(text) > MAX_BYTES
    result = grade(text)
    assert result.status == "too_large" and result.score == 0
    assert "over the 64 KB limit" in result.message and "was not read" in result.message
    assert by_id(result)["tile32-reduction"].status == "unanswered"
    assert "over 64 KB" in by_id(result)["tile32-reduction"].message


@pytest.mark.parametrize("data, message", [
    (b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)), "not a text file"),
    ("tile32-reduction: 32\nmatadd-smem-why: caf\xe9\n".encode("latin-1"), "not UTF-8 text (byte 0xe9 on line 2)"),
    ("tile32-reduction: 32\n".encode("utf-16"), "saved as UTF-16"),
])
def test_binary_and_other_encodings_are_named(grade, data, message):
    result = grade(data)
    assert result.status == "not_text" and message in result.message
    assert all(q.status == "unanswered" for q in result.questions)


def test_a_utf8_byte_order_mark_is_fine(grade):
    result = grade("\ufefftile32-reduction: 32\n".encode("utf-8"))
    assert by_id(result)["tile32-reduction"].status == "correct"


@pytest.mark.parametrize("text, line, hint", [
    ("tile32-reduction: 32\nmatadd-smem-why: No: each element is used once\n", "line 2", "must be quoted"),
    ("tile32-reduction: 32\nfoo-i: [1024\nfoo-x: 1\n", "line 3", ""),
    ('tile32-reduction: "32\n', "line 2", ""),
    ("foo-i: 1\n---\nfoo-x: 2\n", "line 2", "more than one YAML document"),
])
def test_invalid_yaml_names_the_line(grade, text, line, hint):
    result = grade(text)
    assert result.status == "invalid_yaml" and result.score == 0
    assert f"not valid YAML ({line}" in result.message and hint in result.message
    assert all(q.status == "unanswered" and line in q.message for q in result.questions)


@pytest.mark.parametrize("text, what", [
    ("- 32\n- 512000\n", "a list"),
    ("32\n", "the single value '32'"),
    ("just some words\n", "the single value 'just some words'"),
])
def test_a_file_that_is_not_a_mapping(grade, text, what):
    result = grade(text)
    assert result.status == "not_a_mapping" and what in result.message
    assert all(q.status == "unanswered" for q in result.questions)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_an_empty_file_is_read_as_no_answers(grade, text):
    result = grade(text)
    assert result.status == "empty" and "holds no answers" in result.message
    assert all(q.status == "unanswered" for q in result.questions)


def test_the_unchanged_starter_template_answers_nothing(root, questions, key):
    result = grade_answers(root / "starter" / "answers.yaml", questions, key)
    assert result.status == "read" and result.notes == []
    assert result.count("unanswered") == len(questions)
    assert by_id(result)["ridge"].message == "Left empty after 'ridge:'."


def test_billion_laughs_is_refused_at_once(grade):
    lines = ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    lines.append("tile32-reduction: *l9")
    start = time.monotonic()
    result = grade("\n".join(lines) + "\n")
    assert time.monotonic() - start < 1.0
    assert result.status == "rejected" and "YAML alias (*l0, line 2)" in result.message
    assert all(q.status == "unanswered" for q in result.questions)


def test_a_harmless_alias_is_refused_too(grade):
    result = grade("foo-i: &n 1024\nfoo-x: *n\n")
    assert result.status == "rejected" and "write every answer out in full" in result.message


def test_deep_nesting_is_refused_quickly(grade):
    start = time.monotonic()
    result = grade("foo-i: " + "[" * 30000 + "]" * 30000 + "\n")
    assert time.monotonic() - start < 5.0
    assert result.status == "rejected" and "nested too deeply" in result.message


def test_a_link_to_the_key_is_not_followed(tmp_path, root, questions, key):
    (tmp_path / "answers.yaml").symlink_to(root / "solutions" / "answers.yaml")
    result = grade_answers(tmp_path / "answers.yaml", questions, key)
    assert result.status == "rejected" and "symbolic link" in result.message and result.score == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_does_not_block(tmp_path, questions, key):
    os.mkfifo(tmp_path / "answers.yaml")
    result = grade_answers(tmp_path / "answers.yaml", questions, key)
    assert result.status == "rejected" and "not a regular file" in result.message


def test_tabs_between_id_and_answer_are_read_as_spaces(grade):
    result = grade("tile32-reduction:\t32\nfoo-i: 1024\t# copies\n")
    assert result.status == "read"
    assert by_id(result)["tile32-reduction"].status == "correct" and by_id(result)["foo-i"].status == "correct"
    assert any("tabs" in n for n in result.notes)


# --- ids: unknown, duplicated, missing ---------------------------------------------------


def test_unknown_ids_are_reported_and_ignored(grade):
    result = grade("foo_i: 1024\nFoo-X: 1024\nbonus: 7\ntile32-reduction: 32\n")
    assert result.status == "read" and result.score == 1
    notes = "\n".join(result.notes)
    assert "Line 1: 'foo_i' is not a question id, so its answer was ignored (did you mean 'foo-i'?)" in notes
    assert "did you mean 'foo-x'?" in notes
    assert "Line 3: 'bonus' is not a question id" in notes
    assert by_id(result)["foo-i"].status == "unanswered"
    assert "the answer under 'foo_i' (line 1) was ignored" in by_id(result)["foo-i"].message
    assert by_id(result)["ridge"].message == "'ridge' is not in answers.yaml."


def test_thousands_of_unknown_ids_are_summed_up(grade):
    result = grade("".join(f"q{i}: {i}\n" for i in range(3000)))
    assert len(result.notes) == 11 and "2990 more entries" in result.notes[-1]


def test_duplicate_keys_are_detected(grade):
    result = grade("foo-i: 1024\nfoo-x: 1024\nfoo-i: 512\nfoo-x: 1024\nridge:\nridge: 12.54\n")
    q = by_id(result)
    assert q["foo-i"].status == "invalid" and "different answers (lines 1, 3)" in q["foo-i"].message
    assert q["foo-i"].answer == "1024 / 512"
    assert q["foo-x"].status == "correct" and "lines 2, 4; each holds the same answer" in q["foo-x"].message
    assert q["ridge"].status == "correct" and "only one holds an answer" in q["ridge"].message
    assert "'foo-i' is given 2 times (lines 1, 3)." in result.notes


@pytest.mark.parametrize("value", ["", "~", "null", '""', "'   '", "[]", "{}"])
def test_empty_answers_are_unanswered(grade, value):
    result = grade(f"tile32-reduction: {value}\nsmem-vs-regs: {value}\nmatadd-smem-why: {value}\n")
    for qid in ("tile32-reduction", "smem-vs-regs", "matadd-smem-why"):
        assert by_id(result)[qid].status == "unanswered", (qid, value)
        assert by_id(result)[qid].score == 0


# --- number answers ------------------------------------------------------------------------


@pytest.mark.parametrize("qid, answer, read", [
    ("naive-roof", "388.75 GFLOP/s", "388.75"),
    ("naive-roof", '"388.75 GFLOP/s"', "388.75"),
    ("occupancy", "62.5%", "62.5"),
    ("occupancy", "62.5 %", "62.5"),
    ("requests-untiled", '"1,024"', "1024"),
    ("requests-untiled", "1,024", "1024"),
    ("local-versions", "512_000", "512000"),
    ("shared-versions", "1e3", "1000"),
    ("shared-versions", "1.0E+3", "1000"),
    ("tile16-roof", "6.22e3 GFLOP/s", "6220"),
    ("foo-smem", "0516", "516"),  # YAML 1.1 would read octal 334
    ("foo-opb", ".4167", "0.4167"),
    ("foo-opb", "0.41 FLOP/byte", "0.41"),  # inside the 2 % tolerance
    ("tile32-reduction", "32x", "32"),
    ("tile32-reduction", "~32", "32"),
    ("ridge", "12.54 FLOP per byte", "12.54"),
])
def test_numbers_with_units_and_separators_are_read(grade, qid, answer, read):
    q = by_id(grade(f"{qid}: {answer}\n"))[qid]
    assert q.status == "correct", q.message
    assert q.read == read and q.score == 1


@pytest.mark.parametrize("answer, problem", [
    ("1024 * 1024", "is not a single number"),
    ("1024 or 1025", "is not a single number"),
    ("5/12", "is not a single number"),
    ("1:30", "is not a single number"),  # YAML 1.1 would read 90
    ("0x400", "is not a single number"),
    ("0,4167", "decimal point as '.'"),
    ("1.024.000", "decimal point as '.'"),
    ("1024²", "is not a single number"),
    ("1024 (= 32 * 32)", "is not a single number"),
    ("about 1024", "does not start with a number"),
    ("many", "does not start with a number"),
    ("nan", "not a finite number"),
    (".NaN", "not a finite number"),
    (".inf", "not a finite number"),
    ("-.inf", "not a finite number"),
    ("1e999", "too large"),
    ("yes", "a yes/no value, not a number"),
    ("true", "a yes/no value, not a number"),
    ("Off", "a yes/no value, not a number"),
    ("[1024]", "The answer is a list; give a single number."),
    ("{copies: 1024}", "The answer is a mapping; give a single number."),
])
def test_ambiguous_numbers_are_invalid_with_a_reason(grade, answer, problem):
    q = by_id(grade(f"foo-i: {answer}\n"))["foo-i"]
    assert q.status == "invalid" and q.score == 0
    assert problem in q.message


def test_parse_number_returns_value_unit_and_problem():
    assert parse_number("388.75 GFLOP/s") == (388.75, "GFLOP/s", "")
    assert parse_number("-2.5e-3") == (-0.0025, "", "")
    value, unit, problem = parse_number("12 + 0.54")
    assert value is None and "single number" in problem


def test_relative_tolerance_bounds(grade, key):
    # tile32-reduction: 32 within 1 %; local-versions: 512000 within 0.1 %.
    q = by_id(grade("tile32-reduction: 32.32\nlocal-versions: 512512\nrequests-tiled: 64.07\n"))
    assert q["tile32-reduction"].status == "correct"
    assert q["local-versions"].status == "correct"
    assert q["requests-tiled"].status == "wrong"  # 0.11 % off, tolerance 0.1 %
    q = by_id(grade("tile32-reduction: 31.67\nlocal-versions: 511487\n"))
    assert q["tile32-reduction"].status == "wrong" and q["local-versions"].status == "wrong"
    assert "not within 1 % of the expected value" in q["tile32-reduction"].message


def test_tolerance_zero_means_exact(tmp_path, questions, key):
    exact = tuple(replace(q, tolerance=0.0) if q.id == "foo-smem" else q for q in questions)
    path = tmp_path / "answers.yaml"
    path.write_text("foo-smem: 516.0\n")
    assert by_id(grade_answers(path, exact, key))["foo-smem"].status == "correct"
    path.write_text("foo-smem: 516.001\n")
    q = by_id(grade_answers(path, exact, key))["foo-smem"]
    assert q.status == "wrong" and "needs the exact value" in q.message


# --- choice and text answers -------------------------------------------------------------------------


@pytest.mark.parametrize("answer, status", [
    ("no", "correct"), ("No", "correct"), ("NO", "correct"), ('"no"', "correct"), ("false", "correct"),
    ("False", "correct"), ("off", "correct"), ("yes", "wrong"), ("True", "wrong"), ("on", "wrong"),
    ("maybe", "invalid"), ("[no]", "invalid"), ("{no: 1}", "invalid"),
])
def test_yes_no_choice_survives_yaml_booleans(grade, answer, status):
    q = by_id(grade(f"matadd-smem: {answer}\n"))["matadd-smem"]
    assert q.status == status, q.message
    if status != "invalid":
        assert q.read in ("yes", "no")


@pytest.mark.parametrize("answer, status", [
    ("b", "correct"), ("B", "correct"), ("(b)", "correct"), ("b)", "correct"), ("B.", "correct"), (" b ", "correct"),
    ("a", "wrong"), ("D", "wrong"), ("e", "invalid"), ("b, c", "invalid"), ("2", "invalid"), ("true", "invalid"),
    ("[b]", "invalid"),
])
def test_choice_option_ids_are_case_insensitive(grade, answer, status):
    q = by_id(grade(f"launch-bug: {answer}\n"))["launch-bug"]
    assert q.status == status, q.message
    if status == "invalid" and not answer.startswith("["):
        assert "is not an option of this question (give one of: a, b, c, d)" in q.message


@pytest.mark.parametrize("answer, shown", [
    ("Because each element is read once.", "Because each element is read once."),
    ("42", "42"),
    ("no", "no"),
    ("1.50", "1.50"),  # the text as typed, not the float 1.5
    ("|\n  Line one.\n  Line two.", "Line one.\nLine two."),
])
def test_text_answers_are_collected_as_typed(grade, answer, shown):
    q = by_id(grade(f"matadd-smem-why: {answer}\n"))["matadd-smem-why"]
    assert q.status == "collected" and q.answer == shown
    assert q.score == 0 and q.max_score == 0 and q.manual_points == 1
    assert "A TA grades this answer by hand (up to 1 point)" in q.message


def test_long_text_answers_are_cut_for_display(grade):
    q = by_id(grade('coalescing-why: "' + "x" * 5000 + '"\n'))["coalescing-why"]
    assert q.status == "collected"
    assert q.answer.startswith("x" * TEXT_DISPLAY_CHARS) and q.answer.endswith("[3000 more characters cut]")


def test_a_text_answer_given_as_a_list_is_invalid_but_shown(grade):
    q = by_id(grade("coalescing-why:\n  - warps read far apart\n  - one transaction each\n"))["coalescing-why"]
    assert q.status == "invalid" and "give one text" in q.message
    assert q.answer == "[warps read far apart, one transaction each]"


# --- the hand-ins and the self-test --------------------------------------------------------------


def test_the_answers_hand_ins_are_judged_as_expected(root, questions):
    # load_hand_ins reads every hand-in, so it needs every part id.
    parts = {p.id for p in load_assignment(root / "assignment.yaml").parts}
    hand_ins = [h for h in load_hand_ins(root / "tests" / "submissions", parts, {q.id for q in questions})
                if h.name.startswith("answers-")]
    assert {h.name for h in hand_ins} >= {"answers-all-correct", "answers-partial", "answers-malformed",
                                          "answers-not-a-mapping", "answers-units-and-typos"}
    for h in hand_ins:
        assert h.expectations == [] and h.answers is not None
        assert judge_answers(graded_answers(h.name), h.answers) == (True, ""), h.name


def test_judge_answers_reports_a_mismatch():
    result = graded_answers("answers-partial")
    ok, why = judge_answers(result, AnswersExpectation(score="full"))
    assert not ok and "matadd-smem" in why
    ok, why = judge_answers(result, AnswersExpectation(questions={"ridge": {"status": "correct"}}))
    assert not ok and why.startswith("ridge: expected correct, got unanswered")


def test_a_malformed_answers_expectation_is_refused(tmp_path):
    d = tmp_path / "answers-x"
    d.mkdir()
    (d / "expected.yaml").write_text("answers: {questions: {no-such-question: correct}}\n")
    with pytest.raises(SelftestError, match="unknown question 'no-such-question'"):
        load_hand_ins(tmp_path, set(), {"foo-i"})
    (d / "expected.yaml").write_text("answers: {questions: {foo-i: right}}\n")
    with pytest.raises(SelftestError, match="foo-i"):
        load_hand_ins(tmp_path, set(), {"foo-i"})
    (d / "expected.yaml").write_text("description: nothing to judge\n")
    with pytest.raises(SelftestError, match="needs a 'parts' mapping, an 'answers' mapping or both"):
        load_hand_ins(tmp_path, set(), {"foo-i"})


def test_statuses_are_all_known():
    for name in ("answers-partial", "answers-units-and-typos", "answers-malformed"):
        assert {q.status for q in graded_answers(name).questions} <= set(QUESTION_STATUSES)


def test_the_detailed_json_holds_the_answers():
    from grade_fixtures import grade_result, passing_tiled
    result = grade_result(passing_tiled())
    assert "answers" in result.to_dict() and result.to_dict()["answers"] is None
    result.answers = graded_answers("answers-partial")
    d = result.to_dict()
    assert d["answers"]["score"] == 25 and d["answers"]["max_score"] == AUTOMATIC_POINTS
    assert d["answers"]["manual_max"] == 3
    assert d["score"] == 25 + 25 and d["max_score"] == 25 + AUTOMATIC_POINTS
    assert d["answers"]["questions"][3]["id"] == "tile32-reduction"


def test_a_control_character_is_reported_with_its_line(grade):
    result = grade(b"foo-x: 1024\nfoo-i: 10\x0724\n")
    assert result.status == "invalid_yaml"
    assert "a character YAML does not allow (#x0007 on line 2)" in result.message
    assert by_id(result)["foo-x"].message == "answers.yaml is not valid YAML (line 2)."


def test_a_directory_named_answers_yaml_is_refused(tmp_path, questions, key):
    (tmp_path / "answers.yaml").mkdir()
    result = grade_answers(tmp_path / "answers.yaml", questions, key)
    assert result.status == "rejected" and "not a regular file" in result.message
