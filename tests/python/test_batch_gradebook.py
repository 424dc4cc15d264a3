"""The gradebook and the leaderboards of `tilelab batch`, from results written
here or collected again (gradebook-only): grader errors, the GPU and the
targets a class was graded with, the ranking, the names a student may not
take, every state a part can be in before a GPU runs it, and an answers.yaml
that could not be read."""

import csv
import json

from batch_fixtures import NO_GPU, ROOT, SUBMISSIONS, grade_class, read_book, student

from tilelab.operations import batch
from tilelab.operations.batch import GRADED, GRADER_ERROR
from tilelab.operations.batch.students import _what_ran
from tilelab.outputs.gradescope import error_results
from tilelab.spec.assignment import load_assignment


def test_the_gradebook_says_when_answers_yaml_could_not_be_read(tmp_path):
    """One unquoted ': ' in a text answer: every question scores 0, and the
    gradebook says it is the file, not the answers."""
    class_dir, out = tmp_path / "class", tmp_path / "out"
    student(class_dir, "ben", SUBMISSIONS / "answers-malformed")
    student(class_dir, "cal", SUBMISSIONS / "answers-partial")
    grade_class(class_dir, out, NO_GPU, gpus=[])
    book = {r["student"]: r for r in read_book(out)}
    assert book["ben"]["answers problem"] == "answers.yaml is not valid YAML (line 14)"
    assert float(book["ben"]["questions"]) == 0 and book["ben"]["status"] == GRADED
    assert book["cal"]["answers problem"] == "" and float(book["cal"]["questions"]) > 0
    batch.gradebook_only(class_dir, out, root=ROOT)  # collected again from grade.json: the same cells
    assert {r["student"]: r["answers problem"] for r in read_book(out)} == {
        "ben": "answers.yaml is not valid YAML (line 14)", "cal": ""}


def test_gradebook_only_counts_grader_errors(tmp_path):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    (class_dir / "eve").mkdir(parents=True)
    (out / "eve").mkdir(parents=True)
    (out / "eve" / "results.json").write_text(json.dumps(error_results("Traceback ...")))
    summary = batch.gradebook_only(class_dir, out, root=ROOT)
    assert [r.status for r in summary.rows] == [GRADER_ERROR] and not summary.ok


def test_the_gradebook_names_the_gpu_and_the_targets_it_graded_with(tmp_path):
    """A grading's grade.json as a GPU worker writes it (figures of the H100
    calibration in docs/measurements-archive.md, 2026-11-22; the challenge part's
    targets are 80 % of cuBLAS there); estimates are marked ~, and a part
    timed at two sizes names each."""
    class_dir, out = tmp_path / "class", tmp_path / "out"
    (class_dir / "ann").mkdir(parents=True)
    (out / "ann").mkdir(parents=True)
    (out / "ann" / "results.json").write_text(json.dumps({"score": 126.0, "tests": []}))
    calibration = {"rule": "reference", "device_name": "NVIDIA H100 80GB HBM3", "fingerprint": "0123456789abcdef",
                   "references": {"naive 4096x4096x4096": 5300.0, "tiled 4096x4096x4096": 9256.0,
                                  "cublas 4096x4096x4096": 51661.0, "cublas 2048x4096x8192": 51929.0},
                   "full_credit_from": {"naive 4096x4096x4096": 4240.0, "tiled 4096x4096x4096": 7404.8,
                                        "challenge 4096x4096x4096": 41328.8, "challenge 2048x4096x8192": 41543.2}}
    detailed = {"score": 126.0, "max_score": 126.0, "seed": 7, "seconds": 26.1, "answers": None,
                "gpu": {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0a1b"}, "calibration": calibration,
                "parts": [{"id": "naive", "score": 15.0}, {"id": "tiled", "score": 25.0}]}
    (out / "ann" / "grade.json").write_text(json.dumps(detailed))
    row = batch.collect_row("ann", out / "ann", ["naive", "tiled"])
    assert row.gpu == "NVIDIA H100 80GB HBM3"
    assert row.targets == "naive 4240; tiled 7405; challenge 4096x4096x4096 41329; challenge 2048x4096x8192 41543"
    # What such a grading's marker records: the GPU stages ran, on this GPU, against this calibration.
    assert _what_ran(detailed) == {"gpu_stages": True, "gpu_name": "NVIDIA H100 80GB HBM3",
                                   "gpu_uuid": "GPU-0a1b", "calibration": "0123456789abcdef"}
    assert batch.regrade_reason(out / "ann", ["0"]) is None  # no marker: as an older one, from grade.json
    (out / "ann" / "grade.json").write_text(json.dumps({**detailed, "calibration": {**calibration, "rule": "estimate"}}))
    assert batch.collect_row("ann", out / "ann", ["naive", "tiled"]).targets.startswith("naive ~4240; tiled ~7405")
    summary = batch.gradebook_only(class_dir, out, root=ROOT)
    (book,) = read_book(out)
    assert book["gpu"] == "NVIDIA H100 80GB HBM3" and book["full-credit targets (GFLOP/s)"].startswith("naive ~4240")
    assert book["challenge"] == ""  # not in this grading
    assert summary.ok


def test_gradebook_only_ranks_the_class_from_grade_json(tmp_path):
    """Gradings as GPU workers (or Slurm tasks) leave them: grade.json from
    GradeResult.to_dict(), with the H100 figures of docs/measurements-archive.md."""
    from grade_fixtures import LADDER_H100, challenge_result

    from tilelab.outputs.gradescope import results_json
    from tilelab.outputs.leaderboard import alias

    class_dir, out = tmp_path / "class", tmp_path / "out"
    assignment = load_assignment(ROOT / "assignment.yaml")
    for name, rung in (("ann", "warp tiling"), ("ben", "reference"), ("cat", "128-bit loads")):
        (class_dir / name).mkdir(parents=True)
        (out / name).mkdir(parents=True)
        result = challenge_result(LADDER_H100[rung])
        (out / name / "grade.json").write_text(json.dumps(result.to_dict()))
        (out / name / "results.json").write_text(json.dumps(results_json(result, assignment)))
    (class_dir / "dan").mkdir()  # not graded
    summary = batch.gradebook_only(class_dir, out, root=ROOT)
    assert summary.leaderboards == [out / "leaderboard.csv", out / "leaderboard.html"]
    key = bytes.fromhex((out / ".leaderboard-key").read_text())
    with (out / "leaderboard.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["rank"], r["alias"]) for r in rows[:3]] == [
        ("1", alias("ben", "tilelab_matmul", key)), ("2", alias("ann", "tilelab_matmul", key)),
        ("3", alias("cat", "tilelab_matmul", key))]
    assert rows[3]["rank"] == "" and rows[3]["verdict"] == "skipped: not graded (no results.json)"
    book = {r["student"]: r for r in read_book(out)}
    assert float(book["ben"]["max"]) == 25.0 and float(book["ben"]["total"]) == 45.0  # the challenge is extra credit
    # Collected again: the same key, the same aliases.
    batch.gradebook_only(class_dir, out, root=ROOT)
    with (out / "leaderboard.csv").open(newline="") as f:
        assert list(csv.DictReader(f)) == rows


def test_a_student_may_not_take_the_leaderboards_names(tmp_path):
    for name in ("leaderboard.csv", "leaderboard.html"):
        (tmp_path / name).mkdir()
    assert all("its own files" in s.problem for s in batch.find_students(tmp_path))


def test_every_state_a_part_can_be_in_before_a_gpu_runs_it():
    """causes.part_state, which the gradebook's state columns and the closing
    lines of grade and batch share: the first thing that stopped the part."""
    from tilelab.grading.model import STAGES, PartResult, Stage
    from tilelab.outputs.causes import PART_STATES, part_state, state_line

    def part(static="passed", build="passed", summary="", not_written=()):
        stages = {name: Stage(name, "not_run") for name in STAGES}
        stages["static"] = Stage("static", static, summary if static != "passed" else "")
        stages["build"] = Stage("build", build, summary if static == "passed" else "")
        return PartResult("tiled", "Tiled", "tiled.cu", stages, not_written=list(not_written))

    stub = ["launchTiled (line 40)"]
    seen = {
        "built": part(),
        "not written": part(not_written=stub),
        "failed to build": part(build="failed", summary="tiled.cu does not compile", not_written=stub),
        "missing": part(static="failed", build="not_run", summary="tiled.cu is missing"),
        "failed the static checks": part(static="failed", build="not_run",
                                         summary="tiled.cu uses cublasSgemm: library GEMM routines are not allowed"),
        "grader error": part(build="error", summary="the grader could not prepare the build (not your fault)"),
        "not built": part(build="not_run", summary="not run: switched off for this run"),
    }
    assert sorted(seen) == sorted(PART_STATES)
    for state, p in seen.items():
        assert part_state(p) == state
    assert state_line(seen["built"]) == ""
    assert state_line(seen["failed to build"]) == "tiled: failed to build (tiled.cu does not compile)"
    assert state_line(seen["missing"]) == "tiled: tiled.cu is missing"
    assert state_line(seen["not written"]) == "tiled: not written (the starter's stubs are left: launchTiled (line 40))"
    assert state_line(seen["failed the static checks"]).startswith("tiled: failed the static checks (tiled.cu uses")
    assert state_line(seen["not built"]) == "tiled: not built (switched off for this run)"
