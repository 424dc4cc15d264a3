"""The answer key: the real key against the real questions of
assignment.yaml, a broken or missing key, a key that never reaches a
student, and answers checked where no key is to be had."""

import json
import re
from pathlib import Path

import pytest
from answers_fixtures import AUTOMATIC_POINTS, auto_ids, by_id

from tilelab.grading.stages.finish import questions_result
from tilelab.grading.answer_key import AnswerKeyError, key_working, load_key
from tilelab.grading.answers import NO_KEY, grade_answers


# --- the key --------------------------------------------------------------------


def test_the_real_key_covers_every_question(questions, key):
    assert set(key) == {q.id for q in questions}
    assert key["naive-roof"] == 388.75 and key["occupancy"] == 62.5
    assert key["matadd-smem"] == "no"  # quoted in the key, so not YAML's False
    assert key["smem-vs-regs"] == "b"
    assert key["coalescing-why"].startswith("With the column taken from x")


def test_grading_the_key_itself_gives_every_automatic_point(questions, key, root):
    result = grade_answers(root / "solutions" / "answers.yaml", questions, key)
    assert result.status == "read" and result.graded
    assert result.score == result.max_score == AUTOMATIC_POINTS
    assert result.count("correct") == len(auto_ids(questions))
    assert [q.id for q in result.questions if q.status == "collected"] == ["matadd-smem-why", "coalescing-why"]
    assert result.manual_max == 3
    assert result.notes == []


def test_the_register_tiling_answers_follow_from_the_traffic_formulas(key):
    """Seed 003: with L x L block tiles an N x N x N product reads 2 N^3 / L
    floats from global memory (N^2 / L^2 blocks of 2 L N each), and with
    V x V tiles per thread 2 N^3 / V from shared memory (N^2 / V^2 threads of
    2 V N each). The questions take N = 4096, L = 128, V = 8."""
    n, l, v = 4096, 128, 8
    assert key["regtile-global"] == 2 * n**3 / l == (n * n // (l * l)) * 2 * l * n == 1_073_741_824
    assert key["regtile-shared"] == 2 * n**3 / v == (n * n // (v * v)) * 2 * v * n == 17_179_869_184
    assert key["regtile-flop-per-read"] == (2 * v * v) / (2 * v) == v  # per step of k: V^2 multiply-adds, 2 V reads
    assert key["regtile-registers"] == v * v + v + v == 80  # running sums, then one step's operands
    assert key["warp-tile"] == "b"


def _reference_traffic(part_id: str):
    """The traffic of one reference solution's call at its timing size, from
    the counters of a real H100 run (data/h100-reference-counters.json)."""
    from tilelab.grading.traffic import traffic_from
    data = json.loads((Path(__file__).resolve().parent / "data" / "h100-reference-counters.json").read_text())
    part = data["parts"][part_id]
    return traffic_from(part["profile"]["metrics"], part["j"], part["k"], part["l"])


def test_the_traffic_answers_are_what_the_reports_of_the_references_show(questions, key):
    """The traffic questions ask for figures of the student's own report:
    the reference solutions' measured figures must earn the points (the
    tiled reference uses the starter's 32 x 32 tiles), and the premise of
    traffic-dram must hold for the naive one."""
    by_id = {q.id: q for q in questions}
    naive, tiled = _reference_traffic("naive"), _reference_traffic("tiled")
    for qid, measured in (("traffic-naive-global", naive), ("traffic-tiled-global", tiled)):
        figure = measured.level("global").intensity
        assert abs(figure - key[qid]) <= by_id[qid].tolerance * key[qid], (qid, figure)
    assert key["traffic-naive-global"] == 2 / (2 * 4)  # one multiply-add per float of M and of N
    assert key["traffic-tiled-global"] == 32 / 4 == key["tile32-reduction"] * key["traffic-naive-global"]
    assert naive.level("DRAM").intensity > 10 * naive.level("global").intensity
    assert key["traffic-dram"] == "c" and "caches serve" in by_id["traffic-dram"].options["c"]


def test_the_key_holds_the_working_of_every_automatic_answer(root, questions):
    working = key_working(root / "solutions" / "answers.yaml")
    # A text question's key is a model answer, its own explanation.
    assert set(working) == set(auto_ids(questions))
    assert "2^30 = 1,073,741,824" in working["regtile-global"]
    assert "2^34 = 17,179,869,184" in working["regtile-shared"]
    assert "64 + 8 + 8 = 80" in working["regtile-registers"]
    assert working["naive-roof"].startswith("0.25 FLOP/B x 1555 GB/s = 388.75 GFLOP/s")
    assert working["occupancy"].endswith("5 x 256 = 1280 of 2048 threads: 62.5 %.")
    assert not any("Ships only" in text for text in working.values())  # the header stays apart


def test_the_working_is_the_comment_right_above_an_answer(tmp_path):
    path = tmp_path / "answers.yaml"
    path.write_text("# A header.\n\n# 2 x 3\n#\n# = 6\na: 6\nb: |\n  # part of b's text\n  more\n"
                    "# c's working\nc: 1\nd: 2\n\n# e's is apart\n\ne: 3\n")
    assert key_working(path) == {"a": "2 x 3 = 6", "c": "c's working"}
    with pytest.raises(AnswerKeyError):
        key_working(tmp_path / "nope.yaml")


@pytest.mark.parametrize("text, message", [
    ("foo-i: 1024\n", "no key for: matadd-smem, matadd-smem-why"),
    (None, "keys for questions that assignment.yaml does not have: bogus"),
    ("ridge: about 12\n", "the key of 'ridge' must be a plain number"),
    ("launch-bug: e\n", "the key of 'launch-bug' must be one of its options (a, b, c, d)"),
    ("foo-i: 1024\nfoo-i: 1025\n", "'foo-i' is given twice"),
])
def test_a_broken_key_says_what_is_wrong(tmp_path, root, questions, text, message):
    full = (root / "solutions" / "answers.yaml").read_text()
    if text is None:
        text = full + "bogus: 1\n"
    elif not text.startswith("foo-i"):
        qid = text.split(":")[0]
        text = re.sub(rf"(?m)^{qid}:.*$", text.strip(), full)
    path = tmp_path / "answers.yaml"
    path.write_text(text)
    with pytest.raises(AnswerKeyError) as e:
        load_key(path, questions)
    assert message in str(e.value)


def test_a_missing_key_file_raises(tmp_path, questions):
    with pytest.raises(AnswerKeyError, match="was not handed in|could not"):
        load_key(tmp_path / "nope.yaml", questions)


# --- the key stays secret -----------------------------------------------------------------------


def _wrong_answer(q, key) -> str:
    if q.kind == "number":
        return f"{key[q.id] * 1.5 + 1:g}"
    return next(option for option in q.options if option != key[q.id])


def test_no_message_for_a_wrong_answer_holds_the_key(grade, questions, key):
    text = "".join(f"{q.id}: {_wrong_answer(q, key)}\n" for q in questions if q.kind != "text")
    result = grade(text)
    for q in result.questions:
        if q.kind == "text":
            continue
        assert q.status == "wrong", (q.id, q.message)
        secret = f"{key[q.id]:g}" if isinstance(key[q.id], float) else key[q.id]
        pattern = rf"(?<![\w.]){re.escape(secret)}(?![\w.]|\.\d)"
        for text in (q.message, q.answer, q.read, *result.notes, result.message):
            assert not re.search(pattern, text), (q.id, secret, text)


def test_invalid_and_unanswered_messages_never_hold_the_key(grade, key):
    result = grade("foo-smem: about five hundred\nlaunch-bug: e\n")
    for q in result.questions:
        if q.kind == "text":
            assert key[q.id] not in q.message
        elif isinstance(key[q.id], float):
            assert not re.search(rf"(?<![\w.]){key[q.id]:g}(?![\w.])", q.message), q.message
    assert by_id(result)["foo-smem"].status == "invalid"


def test_the_key_is_kept_for_staff_only_in_its_own_field(grade):
    q = by_id(grade("naive-roof: 400\n"))["naive-roof"]
    assert q.status == "wrong" and q.key == "388.75 (± 1 %)"


# --- without a key ----------------------------------------------------------------------------


def test_without_a_key_answers_are_checked_but_not_scored(grade):
    result = grade("naive-roof: 388.75 GFLOP/s\nlaunch-bug: B\nfoo-i: lots\nmatadd-smem-why: once\n", answer_key=None)
    assert not result.graded and result.not_graded_reason == NO_KEY and result.score == 0
    q = by_id(result)
    assert q["naive-roof"].status == "not_graded" and "Read as 388.75" in q["naive-roof"].message
    assert q["naive-roof"].message == "Read as 388.75; the unit 'GFLOP/s' was ignored; not graded here."
    assert q["launch-bug"].status == "not_graded" and q["launch-bug"].read == "b"
    assert q["foo-i"].status == "invalid"  # a malformed answer is worth knowing about before handing in
    assert q["matadd-smem-why"].status == "collected"
    assert all(q.key == "" for q in result.questions)


def test_grade_finds_the_key_or_says_it_is_not_there(tmp_path, root, assignment):
    hand_in = root / "tests" / "submissions" / "answers-all-correct"
    assert questions_result(hand_in, assignment, root).score == AUTOMATIC_POINTS
    # A student's copy: no solutions/, no key/.
    result = questions_result(hand_in, assignment, tmp_path)
    assert not result.graded and result.score == 0 and result.count("not_graded") == AUTOMATIC_POINTS
    # The autograder zip keeps the key under key/.
    (tmp_path / "key").mkdir()
    (tmp_path / "key" / "answers.yaml").write_bytes((root / "solutions" / "answers.yaml").read_bytes())
    assert questions_result(hand_in, assignment, tmp_path).score == AUTOMATIC_POINTS
    # An explicit key wins; a broken one grades nothing and tells staff why, not students.
    broken = tmp_path / "broken.yaml"
    broken.write_text("ridge: twelve\n")
    result = questions_result(hand_in, assignment, root, answer_key=broken)
    assert not result.graded and result.score == 0
    assert "tell the course staff" in result.not_graded_reason and "no key for" in result.staff_note
    assert "twelve" not in result.not_graded_reason
