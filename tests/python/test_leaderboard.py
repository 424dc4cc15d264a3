"""The challenge part's leaderboards (tilelab.outputs.leaderboard): Gradescope's
entries against its specification (gradescope/autograder_samples
docs/leaderboards.md: "name", "value", optional "order" asc|desc, desc by
default), the aliases, who ranks and in what order, the CSV and the HTML page.

The gradings are built here with the H100 figures of docs/measurements-archive.md
(2026-11-22): cuBLAS SGEMM 51,661 GFLOP/s at 4096^3 and 51,929 at 2048 x 4096
x 8192, the challenge reference 47,670 and 47,833, the tiled reference 9,256
(grade_fixtures.LADDER_H100 holds the handout's rungs)."""

import base64
import csv
import dataclasses
import io
import json
import re
import stat

import pytest
from grade_fixtures import (CUBLAS_H100, LADDER_H100, challenge_part, challenge_result, grade_result, passing_tiled,
                            stages)

from tilelab.outputs import leaderboard
from tilelab.outputs.gradescope import results_json, spec_problems
from tilelab.outputs.leaderboard import alias, class_board, csv_text, html_page, standing

KEY = bytes.fromhex("6b" * 32)
SIZES = list(CUBLAS_H100)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ENTRY_NAMES = ["GFLOP/s 4096x4096x4096", "GFLOP/s 2048x4096x8192", "% of cuBLAS 4096x4096x4096",
               "% of cuBLAS 2048x4096x8192"]


@pytest.fixture
def part(assignment):
    (challenge,) = leaderboard.leaderboard_parts(assignment)
    return challenge


def failed_correctness(gflops=(30000.0, 30100.0)):
    """A fast kernel that is wrong at some sizes: its speed is never measured."""
    result = challenge_result(gflops)
    p = result.parts[-1]
    p.stages = stages(correctness="failed", speed="not_run")
    p.stages["speed"].summary = "not run: speed is measured only when every case is correct"
    p.speed, p.speeds, p.speed_score = None, [], 0.0
    return result


# ---------------------------------------------------------------- Gradescope


def test_gradescope_entries_follow_the_spec(assignment):
    doc = results_json(challenge_result(LADDER_H100["double buffering"]), assignment)
    assert spec_problems(doc) == []
    entries = doc["leaderboard"]
    assert [e["name"] for e in entries] == ENTRY_NAMES
    assert all(set(e) == {"name", "value"} for e in entries)  # no order: higher is better, Gradescope's default
    assert all(isinstance(e["value"], (int, float)) and not isinstance(e["value"], bool) for e in entries)
    # 35,467 and 36,009 GFLOP/s are 68.7 % and 69.3 % of cuBLAS there.
    assert [e["value"] for e in entries] == [35467, 36009, 68.7, 69.3]


def no_gpu():
    """A grading on a machine without a GPU: built and checked, nothing run."""
    result = failed_correctness()
    result.gpu = result.ceilings = None
    result.parts[-1].stages = stages(**{n: "not_run" for n in ("correctness", "launch", "memcheck", "racecheck",
                                                               "speed")})
    return result


def test_a_part_that_does_not_rank_shows_zero_under_the_same_names(assignment):
    for result in (failed_correctness(), no_gpu()):
        doc = results_json(result, assignment)
        assert spec_problems(doc) == []
        assert doc["leaderboard"] == [{"name": name, "value": 0} for name in ENTRY_NAMES]


def test_no_leaderboard_without_a_part_scored_against_cublas(assignment):
    textbook = dataclasses.replace(assignment, parts=tuple(p for p in assignment.parts if p.versus_cublas is None))
    doc = results_json(grade_result(passing_tiled()), textbook)
    assert "leaderboard" not in doc and spec_problems(doc) == []


def test_the_spec_check_reads_leaderboard_entries():
    base = {"score": 1.0, "tests": []}
    good = [{"name": "GFLOP/s 4096x4096x4096", "value": 32418}, {"name": "Time", "value": 15.1, "order": "asc"},
            {"name": "Stars", "value": "*****"}]
    assert spec_problems({**base, "leaderboard": good}) == []
    assert spec_problems({**base, "leaderboard": [{"name": "x", "value": 1, "order": "up"}]}) == [
        "leaderboard[0].order 'up' is not asc or desc"]
    assert spec_problems({**base, "leaderboard": [{"name": "x", "value": True}]}) == [
        "leaderboard[0].value has type bool"]
    assert spec_problems({**base, "leaderboard": [{"value": 1}, "x", {"name": 3, "value": 1, "rank": 1}]}) == [
        "leaderboard[0] has no name", "leaderboard[1] is not an object", "leaderboard[2].name has type int",
        "leaderboard[2]: unknown field 'rank'"]
    assert spec_problems({**base, "leaderboard": {"name": "x"}}) == ["leaderboard has type dict"]


# ---------------------------------------------------------------- aliases


def test_an_alias_is_stable_and_differs_between_names_assignments_and_keys():
    first = alias("jdoe42", "tilelab_matmul", KEY)
    assert re.fullmatch(r"[a-z]+-[a-z]+-[0-9a-f]{4}", first)
    assert alias("jdoe42", "tilelab_matmul", KEY) == first
    assert alias("jdoe43", "tilelab_matmul", KEY) != first
    assert alias("jdoe42", "tilelab_matmul_2027", KEY) != first
    assert alias("jdoe42", "tilelab_matmul", bytes(32)) != first  # nobody without the key can work it out
    class_of_300 = {alias(f"student{i:03d}", "tilelab_matmul", KEY) for i in range(300)}
    assert len(class_of_300) == 300


def test_the_key_is_made_once_readable_by_its_owner_only(tmp_path):
    key = leaderboard.leaderboard_key(tmp_path)
    path = tmp_path / leaderboard.KEY_FILE
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert leaderboard.leaderboard_key(tmp_path) == key
    assert leaderboard.leaderboard_key(tmp_path / ".." / tmp_path.name) == key


# ---------------------------------------------------------------- who ranks, in what order


def class_of(ladder=("warp tiling", "reference", "block tiling", "double buffering")) -> list:
    hand_ins = [(f"s-{rung.replace(' ', '-')}", challenge_result(LADDER_H100[rung]), None) for rung in ladder]
    return hand_ins + [("s-wrong", failed_correctness(), None), ("s-crashed", None, "grader error")]


def test_the_ranking_follows_the_geometric_mean_of_the_shares_of_cublas(assignment, part):
    board = class_board(assignment, part, class_of(), KEY)
    assert [line.hand_in for line in board.ranked] == ["s-reference", "s-warp-tiling", "s-double-buffering",
                                                       "s-block-tiling"]
    assert [line.rank for line in board.ranked] == [1, 2, 3, 4]
    best = board.ranked[0].standing
    # sqrt(47,670 / 51,661 x 47,833 / 51,929)
    assert best.share == pytest.approx(((47670 / 51661) * (47833 / 51929)) ** 0.5)
    assert [line.hand_in for line in board.unranked] == sorted(["s-wrong", "s-crashed"],
                                                               key=lambda h: alias(h, assignment.name, KEY))
    reasons = {line.hand_in: line.standing.reason for line in board.unranked}
    assert reasons == {"s-wrong": "failed correctness", "s-crashed": "grader error"}
    assert all(line.shown == alias(line.hand_in, assignment.name, KEY) for line in board.ranked)


def test_a_kernel_that_fails_a_later_check_or_times_implausibly_does_not_rank():
    racy = challenge_part(LADDER_H100["reference"])
    racy.stages["racecheck"].status = "failed"
    racy.stages["racecheck"].summary = "a race on the hidden case w49"
    place = standing(racy)
    assert not place.ranked and place.reason == "failed shared-memory races (compute-sanitizer racecheck)"
    assert "w49" not in place.reason  # the board may be shown to the class
    # Faster than the GPU's FP32 roof (65,100 GFLOP/s measured on the H100): the timing cannot be right.
    impossible = challenge_part((80000.0, 47833.0))
    assert standing(impossible).reason.startswith("timed above the GPU's FP32 peak")
    assert standing(None).reason == "not graded"
    not_timed = failed_correctness().parts[-1]
    not_timed.stages = stages(speed="not_run")
    not_timed.stages["speed"].summary = "not run: no CUDA device on this machine"
    assert standing(not_timed).reason == "not timed: no CUDA device on this machine"


def test_a_board_of_names_shows_the_hand_ins_names(assignment, part):
    named = dataclasses.replace(assignment, grading={**assignment.grading, "leaderboard_names": "name"})
    board = class_board(named, part, class_of(), None)
    assert [line.shown for line in board.ranked][:2] == ["s-reference", "s-warp-tiling"]
    with pytest.raises(ValueError, match="alias key"):
        class_board(assignment, part, class_of(), None)


# ---------------------------------------------------------------- the CSV and the page


def test_the_csv_has_a_column_per_figure_and_the_unranked_below(assignment, part):
    board = class_board(assignment, part, class_of(), KEY)
    rows = list(csv.reader(io.StringIO(csv_text(board))))
    assert rows[0] == ["rank", "alias", "GFLOP/s 4096x4096x4096", "GFLOP/s 2048x4096x8192",
                       "% of cuBLAS 4096x4096x4096", "% of cuBLAS 2048x4096x8192", "% of cuBLAS, geometric mean",
                       "verdict", "speed points (of 15)", "gpu"]
    first = dict(zip(rows[0], rows[1]))
    assert first == {"rank": "1", "alias": alias("s-reference", assignment.name, KEY),
                     "GFLOP/s 4096x4096x4096": "47670", "GFLOP/s 2048x4096x8192": "47833",
                     "% of cuBLAS 4096x4096x4096": "92.3", "% of cuBLAS 2048x4096x8192": "92.1",
                     "% of cuBLAS, geometric mean": "92.2", "verdict": "correct", "speed points (of 15)": "15",
                     "gpu": "NVIDIA H100 80GB HBM3"}
    # Rung 1, 16,101 and 15,803 GFLOP/s: 3.15 of the 15 speed points.
    assert rows[4][0] == "4" and rows[4][8] == "3.15"
    unranked = [dict(zip(rows[0], r)) for r in rows[5:]]
    assert {r["verdict"] for r in unranked} == {"failed correctness", "grader error"}
    assert all(r["rank"] == "" and r["GFLOP/s 4096x4096x4096"] == "" for r in unranked)


def test_the_page_holds_the_ranking_the_reasons_and_the_plot_inline(assignment, part, root):
    named = dataclasses.replace(assignment, grading={**assignment.grading, "leaderboard_names": "name"})
    hand_ins = class_of() + [("<b>bold</b>", failed_correctness(), None)]
    page = html_page(class_board(named, part, hand_ins, None))
    images = re.findall(r'<img class="roofline" src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 1 and base64.b64decode(images[0])[:8] == PNG_MAGIC
    assert "<link" not in page and "<script" not in page and 'src="http' not in page  # one file
    ranking = page.split("<h2>Ranking</h2>", 1)[1].split("<h2>Not ranked</h2>", 1)[0]
    order = [ranking.index(f"<code>{name}</code>") for name in ("s-reference", "s-warp-tiling",
                                                                  "s-double-buffering", "s-block-tiling")]
    assert order == sorted(order)
    assert "47,670" in ranking and "92.3 %" in ranking and "92.2 %" in ranking
    unranked = page.split("<h2>Not ranked</h2>", 1)[1]
    assert "failed correctness" in unranked and "grader error" in unranked
    assert "&lt;b&gt;bold&lt;/b&gt;" in unranked and "<b>bold</b>" not in page
    # What the grader timed: cuBLAS, its full-credit target, the references.
    assert "51,661" in page and "41,329" in page and "9,256 (tiled)" in page and "9,076 (rectangular)" in page


def test_no_plot_without_a_ranked_hand_in(assignment, part):
    board = class_board(assignment, part, [("s-wrong", failed_correctness(), None)], KEY)
    assert leaderboard.plot_board(board) is None
    page = html_page(board)
    assert "<img" not in page and "No hand-in ranks yet." in page


def test_a_grading_read_back_from_its_json_stands_where_it_stood(assignment, part):
    for result in (challenge_result(LADDER_H100["warp tiling"]), failed_correctness()):
        again = leaderboard.result_from_dict(json.loads(json.dumps(result.to_dict())))
        mine, theirs = standing(result.parts[-1]), standing(again.parts[-1])
        assert (theirs.ranked, theirs.reason, theirs.share) == (mine.ranked, mine.reason, mine.share)
        assert [s.of_cublas for s in theirs.sizes] == [s.of_cublas for s in mine.sizes]
        assert again.calibration == result.calibration and again.ceilings == result.ceilings
