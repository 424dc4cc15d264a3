"""`tilelab batch`: a small class graded for real (without a GPU here, so the
GPU stages are not run; static checks, builds and questions are), its
gradebook, resuming, grading again what ran without a GPU, seeds, refused
names, grader failures and collecting a gradebook from results already
written. The gradebook's columns and the leaderboards from results written
here: test_batch_gradebook.py. The Slurm script, the GPUs and the sandbox
users: test_batch_placement.py."""

import csv
import json
import shutil
from pathlib import Path

import pytest
from batch_fixtures import NO_GPU, PART_IDS, ROOT, SUBMISSIONS, build_dir, grade_class, read_book, student
from click.testing import CliRunner
from test_gradescope import check_spec

import tilelab.grading.pipeline
from tilelab.cli import main
from tilelab.operations import batch
from tilelab.operations.batch import GRADED, GRADER_ERROR, BatchError, run_batch

OUTPUTS = ("results.json", "report.md", "report.html", "grade.json", "staff", ".done")


def mtimes(out: Path, names) -> dict:
    return {n: (out / n / "results.json").stat().st_mtime_ns for n in names}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """alice: a correct naive part and every answer right; bob: a naive part
    that does not compile; carol: an empty directory."""
    build_dir()
    base = tmp_path_factory.mktemp("class")
    class_dir = base / "class"
    student(class_dir, "alice", SUBMISSIONS / "good-naive-32x8", SUBMISSIONS / "answers-all-correct")
    student(class_dir, "bob", SUBMISSIONS / "naive-compile-error")
    student(class_dir, "carol")
    summary, lines = grade_class(class_dir, base / "out")
    return class_dir, base / "out", summary, lines


def test_every_student_gets_every_output_and_a_row(graded):
    class_dir, out, summary, lines = graded
    assert (summary.graded, summary.resumed, summary.errors, summary.skipped) == (3, 0, 0, 0) and summary.ok
    assert summary.line().startswith("3 graded in ") and "per submission" in summary.line()
    assert sum(line.startswith("[") and "/3] " in line for line in lines) == 3
    book = read_book(out)
    assert [r["student"] for r in book] == ["alice", "bob", "carol"]
    for row in book:
        d = out / row["student"]
        assert all((d / name).exists() for name in OUTPUTS) and (d / "staff" / "report.md").is_file()
        assert not (d / "work").exists()
        check_spec(json.loads((d / "results.json").read_text()))
        detail = json.loads((d / "grade.json").read_text())
        assert row["status"] == GRADED
        assert float(row["total"]) == pytest.approx(detail["score"])
        assert float(row["max"]) == pytest.approx(detail["max_score"])
        assert int(row["seed"]) == detail["seed"]
        parts = sum(float(row[p]) for p in PART_IDS)
        assert float(row["total"]) == pytest.approx(parts + float(row["questions"]))
        # How long the student's turn took, to a tenth of a second (a hand-in with every part missing may
        # take less): the grading and the writing of its outputs.
        assert row["seconds"] and float(row["seconds"]) >= detail["seconds"] - 0.051
    stages = {r["student"]: json.loads((out / r["student"] / "grade.json").read_text())["parts"][0]["stages"]
              for r in book}
    assert stages["alice"]["build"]["status"] == "passed"
    assert stages["bob"]["build"]["status"] == "failed"
    assert stages["carol"]["static"]["status"] == "failed"
    by_name = {r["student"]: r for r in book}
    assert float(by_name["alice"]["questions"]) > 0 and float(by_name["carol"]["questions"]) == 0
    assert [r["answers problem"] for r in book] == ["", "answers.yaml was not handed in",
                                                     "answers.yaml was not handed in"]
    # No --seed: each submission its own fresh seed.
    assert len({r["seed"] for r in book}) == 3


def test_a_rerun_grades_nothing_and_a_missing_marker_regrades_only_that_one(graded, tmp_path):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    shutil.copytree(graded[0], class_dir, symlinks=True)
    shutil.copytree(graded[1], out, symlinks=True)
    before = mtimes(out, ["alice", "bob", "carol"])
    book_before = read_book(out)

    summary, _ = grade_class(class_dir, out)
    assert (summary.graded, summary.resumed) == (0, 3) and summary.ok
    assert mtimes(out, ["alice", "bob", "carol"]) == before
    assert read_book(out) == book_before

    (out / "bob" / ".done").unlink()  # as if interrupted before the marker
    summary, lines = grade_class(class_dir, out)
    assert (summary.graded, summary.resumed) == (1, 2)
    assert [line for line in lines if line.startswith("[")] == [lines[-1]] and "bob" in lines[-1]
    after = mtimes(out, ["alice", "bob", "carol"])
    assert after["alice"] == before["alice"] and after["carol"] == before["carol"] and after["bob"] != before["bob"]
    assert [r["status"] for r in read_book(out)] == [GRADED] * 3

    (class_dir / "carol" / "notes.txt").write_text("handed in late\n")  # the submission changed
    summary, _ = grade_class(class_dir, out)
    assert (summary.graded, summary.resumed) == (1, 2)
    assert mtimes(out, ["alice", "carol"])["alice"] == before["alice"]


def test_the_marker_records_what_ran_and_a_gpu_grades_again_what_ran_without(tmp_path):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    student(class_dir, "ann", SUBMISSIONS / "good-naive-32x8", SUBMISSIONS / "answers-all-correct")
    student(class_dir, "ben", SUBMISSIONS / "answers-malformed")
    summary, _ = grade_class(class_dir, out, NO_GPU, gpus=[])
    assert (summary.graded, summary.again) == (2, {})
    markers = {n: json.loads((out / n / ".done").read_text()) for n in ("ann", "ben")}
    for name, marker in markers.items():
        assert json.loads((out / name / "grade.json").read_text())["gpu"] is None
        assert {k: marker[k] for k in ("gpu_stages", "gpu_name", "gpu_uuid", "calibration")} == {
            "gpu_stages": False, "gpu_name": None, "gpu_uuid": None, "calibration": None}
        assert marker["submission_sha256"] == batch.submission_digest(class_dir / name)
        assert batch.regrade_reason(out / name, []) is None
        assert batch.regrade_reason(out / name, ["0"]) == "graded before without a GPU"
    before = mtimes(out, ["ann", "ben"])

    # Another run on the CPU node (an interruption, say) grades nothing again.
    summary, lines = grade_class(class_dir, out, NO_GPU, gpus=[])
    assert (summary.graded, summary.resumed) == (0, 2) and mtimes(out, ["ann", "ben"]) == before
    assert "again" not in summary.line() and not any("again" in line for line in lines)

    # A marker of an older version, without what ran: grade.json says (gpu null: no GPU stages).
    old = {k: markers["ben"][k] for k in ("submission_sha256", "seed", "seconds", "graded_at")}
    (out / "ben" / ".done").write_text(json.dumps(old))
    assert batch.regrade_reason(out / "ben", ["0"]) == "graded before without a GPU"
    assert batch.regrade_reason(out / "ben", []) is None
    graded_on_gpu = tmp_path / "ben-on-a-gpu"
    shutil.copytree(out / "ben", graded_on_gpu)
    detail = json.loads((graded_on_gpu / "grade.json").read_text())
    gpu = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0a1b2c3d-0000-1111-2222-333344445555"}
    (graded_on_gpu / "grade.json").write_text(json.dumps({**detail, "gpu": gpu}))
    assert batch.regrade_reason(graded_on_gpu, ["0"]) is None

    # ann's marker as a grading on another GPU, against another calibration,
    # leaves it: those grades stand wherever this run grades.
    (out / "ann" / ".done").write_text(json.dumps({**markers["ann"], "gpu_stages": True, "gpu_name": gpu["name"],
                                                  "gpu_uuid": gpu["uuid"], "calibration": "0123456789abcdef"}))
    assert batch.regrade_reason(out / "ann", ["0"]) is None

    # A run that has a GPU (here only listed: the grading finds none, and says so) grades ben again.
    summary, lines = grade_class(class_dir, out, NO_GPU, gpus=["0"])
    assert (summary.graded, summary.resumed, summary.again) == (1, 1, {"graded before without a GPU": 1})
    assert summary.line().startswith("1 graded (1 graded again: graded before without a GPU), 1 already graded in ")
    assert any(line.startswith("tilelab batch: 1 to grade (1 to grade again: graded before without a GPU), "
                               "1 already graded, on GPU 0") for line in lines)
    (progress,) = [line for line in lines if line.startswith("[")]
    assert progress.startswith("[1/1] ben: ") and progress.endswith(", graded again: graded before without a GPU (GPU 0)")
    after = mtimes(out, ["ann", "ben"])
    assert after["ann"] == before["ann"] and after["ben"] != before["ben"]
    assert set(json.loads((out / "ben" / ".done").read_text())) >= {"gpu_stages", "gpu_uuid", "calibration"}


def test_one_seed_for_every_submission_and_every_rerun(tmp_path):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    for name in ("ann", "ben"):
        student(class_dir, name)
    summary, _ = grade_class(class_dir, out, seed=123)
    assert summary.graded == 2
    assert [r["seed"] for r in read_book(out)] == ["123", "123"]
    assert [json.loads((out / n / "grade.json").read_text())["seed"] for n in ("ann", "ben")] == [123, 123]
    verdicts = {n: [(t["name"], t["status"], t["score"]) for t in json.loads((out / n / "results.json").read_text())["tests"]]
                for n in ("ann", "ben")}

    assert grade_class(class_dir, out, seed=123)[0].graded == 0  # same inputs: nothing to do
    assert grade_class(class_dir, out)[0].graded == 0  # no seed asked for: the recorded one stands
    summary, _ = grade_class(class_dir, out, seed=124)  # another seed: graded again
    assert summary.graded == 2 and [r["seed"] for r in read_book(out)] == ["124", "124"]
    summary, _ = grade_class(class_dir, out, seed=123, force=True)
    assert summary.graded == 2
    again = {n: [(t["name"], t["status"], t["score"]) for t in json.loads((out / n / "results.json").read_text())["tests"]]
             for n in ("ann", "ben")}
    assert again == verdicts


def test_unsafe_names_are_refused_with_a_reason_and_the_rest_graded(tmp_path):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    names = ["ok.student-1", "bad name", ".hidden", "-rf", "gradebook.csv", "naïve", "=cmd()"]
    for name in names:
        (class_dir / name).mkdir(parents=True)
    (class_dir / "submission_metadata.yml").write_text("not a student\n")
    summary, lines = grade_class(class_dir, out)
    assert (summary.graded, summary.skipped) == (1, 6) and summary.ok
    book = read_book(out)
    assert [r["student"] for r in book] == ["'-rf", ".hidden", "'=cmd()", "bad name", "gradebook.csv", "naïve",
                                            "ok.student-1"]
    for row in book:
        if row["student"] == "ok.student-1":
            assert row["status"] == GRADED
        else:
            assert row["status"].startswith("skipped: ") and row["total"] == row["seed"] == ""
    assert "unsafe directory name" in next(r["status"] for r in book if r["student"] == "bad name")
    assert "its own files" in next(r["status"] for r in book if r["student"] == "gradebook.csv")
    assert sum("skipped: " in line for line in lines) == 6
    assert sorted(p.name for p in out.iterdir()) == [".leaderboard-key", "class-report", "class-report.html",
                                                     "gradebook.csv", "leaderboard.csv", "leaderboard.html",
                                                     "ok.student-1"]
    assert "no similarity ranking" in summary.class_report_note and "nothing to compare" in summary.class_report_note


def test_a_grader_crash_is_a_grader_error_row_with_a_valid_results_json(tmp_path, monkeypatch):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    for name in ("amy", "bob"):
        student(class_dir, name)
    real_grade = tilelab.grading.pipeline.grade

    def crashes_on_bob(submission, opt, **context):
        if submission.name == "bob":
            raise RuntimeError("the grader tripped over bob")
        return real_grade(submission, opt, **context)

    monkeypatch.setattr(tilelab.grading.pipeline, "grade", crashes_on_bob)
    summary, lines = grade_class(class_dir, out, seed=5)
    assert (summary.graded, summary.errors) == (1, 1) and not summary.ok
    book = {r["student"]: r for r in read_book(out)}
    assert book["amy"]["status"] == GRADED
    assert book["bob"]["status"] == GRADER_ERROR and book["bob"]["seed"] == "5" and book["bob"]["total"] == ""
    doc = json.loads((out / "bob" / "results.json").read_text())
    check_spec(doc)
    assert doc["tests"][0]["name"] == "Autograder error" and "tripped over bob" in doc["tests"][1]["output"]
    assert not (out / "bob" / ".done").exists()
    assert any("grader error (RuntimeError: the grader tripped over bob)" in line for line in lines)

    monkeypatch.setattr(tilelab.grading.pipeline, "grade", real_grade)
    summary, _ = grade_class(class_dir, out, seed=5)
    assert (summary.graded, summary.resumed, summary.errors) == (1, 1, 0) and summary.ok
    assert [r["status"] for r in read_book(out)] == [GRADED, GRADED]


def test_gradebook_only_rebuilds_the_csv_from_results(graded, tmp_path):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    shutil.copytree(graded[0], class_dir, symlinks=True)
    shutil.copytree(graded[1], out, symlinks=True)
    original = read_book(out)
    (out / "gradebook.csv").unlink()
    for name in ("alice", "bob", "carol"):
        (out / name / ".done").unlink()  # results as a Slurm task leaves them: no marker
    (class_dir / "dave").mkdir()  # not graded yet
    result = CliRunner().invoke(main, ["--root", str(ROOT), "batch", str(class_dir), "--out", str(out),
                                       "--gradebook-only"])
    assert result.exit_code == 0, result.output
    assert "3 graded, 0 grader errors, 1 without results" in result.output
    book = read_book(out)
    assert [r["student"] for r in book] == ["alice", "bob", "carol", "dave"]
    for old, new in zip(original, book):
        assert {k: v for k, v in old.items() if k != "seconds"} == {k: v for k, v in new.items() if k != "seconds"}
    assert book[3]["status"] == "skipped: not graded (no results.json)"


def test_results_and_submissions_may_not_contain_each_other(tmp_path):
    (tmp_path / "class" / "alice").mkdir(parents=True)
    for out in (tmp_path / "class", tmp_path / "class" / "results", tmp_path):
        with pytest.raises(BatchError, match="must not contain each other"):
            batch.gradebook_only(tmp_path / "class", out, root=ROOT)


def test_the_class_leaderboard_names_each_hand_in_by_the_alias_its_report_shows(graded):
    """Nobody here handed in challenge.cu, so nobody ranks; each report shows the student's alias."""
    from tilelab.outputs.leaderboard import alias

    class_dir, out, summary, _ = graded
    assert summary.leaderboards == [out / "leaderboard.csv", out / "leaderboard.html"]
    key = bytes.fromhex((out / ".leaderboard-key").read_text())
    aliases = {name: alias(name, "tilelab_matmul", key) for name in ("alice", "bob", "carol")}
    for name, shown in aliases.items():
        assert f"you appear as `{shown}` on the class leaderboard" in (out / name / "report.md").read_text()
        assert shown in (out / name / "staff" / "report.md").read_text()
    with (out / "leaderboard.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["alias"] for r in rows) == sorted(aliases.values()) and all(r["rank"] == "" for r in rows)
    assert {r["verdict"] for r in rows} == {"failed static checks"}
    challenge = next(p for p in json.loads((out / "alice" / "grade.json").read_text())["parts"]
                     if p["id"] == "challenge")
    assert "challenge.cu" in challenge["stages"]["static"]["summary"]
    page = (out / "leaderboard.html").read_text()
    assert "No hand-in ranks yet." in page and "alice" not in page


def test_the_batch_help_states_the_defaults_it_uses():
    from click.testing import CliRunner

    from tilelab.cli import main

    from tilelab.system.cpu_share import GRADINGS_AT_ONCE_WORDS, gradings_at_once

    text = " ".join(CliRunner().invoke(main, ["batch", "--help"]).output.split())
    assert f"[default: {GRADINGS_AT_ONCE_WORDS}]" in text and f"[default: {batch.DEFAULT_IN_FLIGHT}," in text
    # What the words say, on machines from a laptop to a GPU node.
    assert [gradings_at_once(cpus) for cpus in (1, 2, 4, 6, 8, 16, 128)] == [2, 2, 2, 3, 4, 8, 8]


def test_the_gradebook_and_the_console_say_which_parts_did_not_build(graded):
    """A score hides a part that did not compile: the gradebook's state
    columns and each hand-in's progress line say it."""
    class_dir, out, summary, lines = graded
    book = {r["student"]: r for r in read_book(out)}
    others = PART_IDS[1:]
    assert PART_IDS[0] == "naive"
    assert book["alice"]["naive state"] == "built"
    assert book["bob"]["naive state"] == "failed to build"
    assert [book["carol"][f"{p} state"] for p in PART_IDS] == ["missing"] * len(PART_IDS)
    assert all(book[s][f"{p} state"] == "missing" for s in ("alice", "bob") for p in others)
    said = {line.split(": ", 1)[0].split("] ")[1]: line for line in lines if line.startswith("[")}
    assert f"; failed to build: naive; missing: {', '.join(others)} (" in said["bob"]
    assert f"; missing: {', '.join(PART_IDS)} (" in said["carol"]
    assert f"; missing: {', '.join(others)} (" in said["alice"] and "naive" not in said["alice"].split("; ", 1)[1]


def test_a_hand_in_wrapped_in_a_folder_is_graded_and_stubs_left_are_a_state(tmp_path):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    wrapped = class_dir / "dave" / "hw3"
    wrapped.mkdir(parents=True)
    shutil.copy(SUBMISSIONS / "good-naive-32x8" / "naive.cu", wrapped / "naive.cu")
    shutil.copy(ROOT / "starter" / "tiled.cu", wrapped / "tiled.cu")
    shutil.copy(SUBMISSIONS / "answers-all-correct" / "answers.yaml", wrapped / "answers.yaml")
    (class_dir / "dave" / "__MACOSX" / "hw3").mkdir(parents=True)
    (class_dir / "dave" / "__MACOSX" / "hw3" / "._naive.cu").write_bytes(b"\0\5\26\7")
    summary, lines = grade_class(class_dir, out, NO_GPU, gpus=[])
    (row,) = read_book(out)
    assert row["status"] == GRADED and row["answers problem"] == "" and float(row["questions"]) > 0
    assert (row["naive state"], row["tiled state"]) == ("built", "not written")
    assert [row[f"{p} state"] for p in PART_IDS[2:]] == ["missing"] * len(PART_IDS[2:])
    graded = json.loads((out / "dave" / "grade.json").read_text())
    assert any("hw3/" in note and "was graded" in note for note in graded["notes"])
    (progress,) = [line for line in lines if line.startswith("[")]
    assert f"; not written: tiled; missing: {', '.join(PART_IDS[2:])} (" in progress


def test_a_graded_class_is_ranked_by_likeness_and_its_report_lists_the_pairs(tmp_path):
    """batch writes similarity.csv and .html into OUT, then the class report,
    which lists the most alike pairs and says a score only asks for a look;
    no student may take those names."""
    class_dir, out = tmp_path / "class", tmp_path / "out"
    student(class_dir, "amy", ROOT / "solutions" / "naive.cu")
    student(class_dir, "bob", ROOT / "solutions" / "naive.cu")
    student(class_dir, "cat", ROOT / "starter" / "naive.cu")
    student(class_dir, "similarity.html", ROOT / "solutions" / "naive.cu")
    summary, _ = grade_class(class_dir, out)
    with (out / "similarity.csv").open(newline="", encoding="utf-8") as f:
        pairs = [(r["part"], r["student A"], r["student B"]) for r in csv.DictReader(f)]
    assert pairs == [("naive", "amy", "bob")]  # the starter's copy pairs with no one
    page = (out / "class-report.html").read_text()
    assert "Similar hand-ins" in page and "never proof" in page and 'href="similarity.html"' in page
    assert (out / "similarity.html").is_file()
    assert "its own files" in next(r.status for r in summary.rows if r.student == "similarity.html")


def test_a_batch_that_leaves_stages_out_grades_everyone_again(tmp_path):
    """Such a grading (scripts/bench --class N --stage-costs) must not stand
    for a whole one in a later batch, which keeps what it graded before."""
    for left_out in ({"sanitizers": False}, {"timing": False}):
        with pytest.raises(ValueError, match="grades every student again"):
            run_batch(tmp_path / "class", root=ROOT, build_dir=tmp_path / "build", out_dir=tmp_path / "out",
                      **left_out)
    assert not any(tmp_path.iterdir())
