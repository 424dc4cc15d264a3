"""`tilelab grade` on inputs a student controls, and when the grader itself fails:
a valid results.json and a clear message every time."""

import json
import os
import random
import shutil
from pathlib import Path

from test_gradescope import check_spec

from tilelab.grading.options import GradeOptions
from tilelab.operations.grading_run import EXIT_GRADED, EXIT_GRADER_ERROR, run_grading
from conftest import built_tree


def build_dir() -> Path:
    return built_tree()


def grade(root, submission: Path, out: Path, parts=()) -> dict:
    outcome = run_grading(submission, GradeOptions.for_tree(root, build_dir(), out, parts=parts), echo=lambda m: None)
    assert outcome.code == EXIT_GRADED
    doc = json.loads((out / "results.json").read_text())
    check_spec(doc)
    return doc


def build_test(doc: dict, title_start: str) -> dict:
    return next(t for t in doc["tests"] if t["name"].startswith(title_start) and t["name"].endswith(": build"))


def test_a_grader_failure_still_writes_valid_results(root, tmp_path):
    empty_build = tmp_path / "not-a-build"
    empty_build.mkdir()
    outcome = run_grading(root / "solutions", GradeOptions.for_tree(root, empty_build, tmp_path / "out"),
                          echo=lambda m: None)
    assert outcome.code == EXIT_GRADER_ERROR and "tilelab-verify is missing" in outcome.error
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    check_spec(doc)
    assert doc["tests"][0]["name"] == "Autograder error" and doc["tests"][0]["visibility"] == "visible"
    assert "tilelab-verify is missing" in doc["tests"][1]["output"] and doc["tests"][1]["visibility"] == "hidden"


def test_empty_directory_reports_every_file_missing(root, tmp_path):
    (tmp_path / "hand-in").mkdir()
    doc = grade(root, tmp_path / "hand-in", tmp_path / "out")
    for title in ("Naive", "Tiled", "Boundary", "Rectangular", "Dynamic"):
        t = build_test(doc, title)
        assert t["status"] == "failed" and "is missing" in t["output"]
    assert doc["score"] == 0


def test_binary_huge_and_wrongly_declared_files_get_their_own_messages(root, tmp_path):
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    (hand_in / "naive.cu").write_bytes(random.Random(3).randbytes(2048) + b"\0")
    with (hand_in / "tiled.cu").open("w") as f:
        f.write(("// padding\n" * 5_000_000)[: 50 * 1024 * 1024])
    shutil.copy(root / "tests" / "submissions" / "wrong-signature" / "naive.cu", hand_in / "boundary.cu")
    doc = grade(root, hand_in, tmp_path / "out", parts=("naive", "tiled", "boundary"))
    assert "not a text file" in build_test(doc, "Naive")["output"]
    assert "50.0 MB" in build_test(doc, "Tiled")["output"]
    boundary = build_test(doc, "Boundary")["output"]
    assert "does not define launchBoundary" in boundary  # a naive.cu handed in under another part's name
    assert "void launchBoundary(const float* M, const float* N, float* P, int Width)" in boundary


def test_wrong_signature_fails_to_link_with_the_declaration_shown(root, tmp_path):
    doc = grade(root, root / "tests" / "submissions" / "wrong-signature", tmp_path / "out", parts=("naive",))
    out = build_test(doc, "Naive")["output"]
    assert "does not link" in out and "void launchNaive(const float* M, const float* N, float* P, int Width)" in out
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "staff" / "report.md").exists()


def test_a_compile_error_names_the_students_own_file_and_line(root, tmp_path, monkeypatch):
    """`tilelab check` from the student's folder: the message says
    hand-in/naive.cu(14), the file they edit, never the grader's copy."""
    from tilelab.grading.pipeline import grade as run_grade
    from tilelab.system.sandbox import Sandbox

    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    shutil.copy(root / "tests" / "submissions" / "naive-compile-error" / "naive.cu", hand_in / "naive.cu")
    monkeypatch.chdir(tmp_path)
    # In pytest's private directory: built as the current user (the sandbox is not what is tested here).
    result = run_grade(hand_in, GradeOptions.for_tree(root, build_dir(), tmp_path / "out", mode="check",
                                                      parts=("naive",)), sandbox=Sandbox())
    build = result.parts[0].stages["build"]
    assert build.status == "failed" and "hand-in/naive.cu(14): error" in build.details, build.details
    assert "sources" not in build.details and str(tmp_path / "out") not in build.details


def test_check_builds_a_part_again_only_when_its_file_changed(root, tmp_path, monkeypatch):
    from tilelab.grading.pipeline import grade as run_grade
    from tilelab.system.sandbox import Sandbox

    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    shutil.copy(root / "solutions" / "naive.cu", hand_in / "naive.cu")
    build = _private_build(tmp_path)

    def check():
        opt = GradeOptions.for_tree(root, build, tmp_path / "out", mode="check", parts=("naive",), sanitizers=False,
                                    timing=False)
        return run_grade(hand_in, opt, sandbox=Sandbox()).parts[0].stages["build"]

    first = check()
    assert first.status == "passed" and "compiled and linked" in first.summary
    again = check()
    assert again.status == "passed" and "unchanged since it was last built" in again.summary
    (hand_in / "naive.cu").write_text((hand_in / "naive.cu").read_text() + "\n// edited\n")
    edited = check()
    assert "compiled and linked" in edited.summary
    assert len(list((build / "check-cache").iterdir())) == 1  # only the part's latest build is kept


def test_a_part_builds_where_the_output_folder_has_a_space_in_its_path(root, tmp_path):
    """Run as the student's own user, the builds happen below the output
    folder ("My Drive" in Colab's mounted Drive), where nvcc cannot keep its
    own temporary files: the build gives it a folder of its own."""
    from tilelab.grading.pipeline import grade as run_grade
    from tilelab.system.sandbox import Sandbox

    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    shutil.copy(root / "solutions" / "naive.cu", hand_in / "naive.cu")
    (hand_in / "naive.cu").write_text((hand_in / "naive.cu").read_text() + "\n// built below a space\n")
    out = tmp_path / "My Drive" / "hw3 results"
    opt = GradeOptions.for_tree(root, _private_build(tmp_path), out, parts=("naive",), sanitizers=False,
                                timing=False)
    built = run_grade(hand_in, opt, sandbox=Sandbox()).parts[0].stages["build"]
    assert built.status == "passed", built.details
    assert built.seconds > 0  # compiled here, not found in a cache


def _private_build(tmp_path: Path) -> Path:
    """A build tree of the test's own, linking the real one's harness; its
    caches start empty."""
    build = tmp_path / "build"
    build.mkdir()
    for entry in build_dir().iterdir():
        if entry.name not in ("check-cache", "part-cache"):
            (build / entry.name).symlink_to(entry)
    return build


def test_a_part_file_handed_in_twice_is_compiled_once(root, tmp_path):
    from tilelab.grading.pipeline import grade as run_grade
    from tilelab.system.sandbox import Sandbox

    build = _private_build(tmp_path)
    first, second, edited = (tmp_path / name for name in ("alice", "bob", "carol"))
    for hand_in in (first, second, edited):
        hand_in.mkdir()
        shutil.copy(root / "solutions" / "naive.cu", hand_in / "naive.cu")
    (edited / "naive.cu").write_text((edited / "naive.cu").read_text() + "\n// carol's own line\n")

    def build_stage(hand_in: Path):
        opt = GradeOptions.for_tree(root, build, tmp_path / "out" / hand_in.name, parts=("naive",), sanitizers=False,
                                    timing=False)
        return run_grade(hand_in, opt, sandbox=Sandbox()).parts[0].stages["build"]

    built = build_stage(first)
    assert built.status == "passed" and built.seconds > 0
    again = build_stage(second)
    # Not compiled again, and the student is told nothing another student's hand-in could explain.
    assert again.status == "passed" and again.seconds == 0 and again.summary == built.summary
    assert build_stage(edited).seconds > 0
    kept = sorted(p.name for p in (build / "part-cache").iterdir())
    assert len(kept) == 2 and all(name.startswith("naive-") for name in kept)
    assert (build / "part-cache").stat().st_mode & 0o777 == 0o700


def test_a_hand_in_of_several_parts_keeps_each_parts_shared_object_for_its_sanitizers(root, tmp_path):
    """Graded with the sanitizers on a host whose GPU a probe found, a hand-in
    of several parts links each as a shared object too, for one
    compute-sanitizer run of them all; the part cache keeps it beside the
    executable, and a part found there has it."""
    from tilelab.grading.context import new_part_state, open_grading
    from tilelab.grading.stages.build_parts import build_parts, check_sources
    from tilelab.system.sandbox import Sandbox

    build = _private_build(tmp_path)
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    for name in ("naive.cu", "tiled.cu"):
        shutil.copy(root / "solutions" / name, hand_in / name)

    def built(out: str, capability="9.0", **choices) -> list:  # the GPU a probe found (None: none known)
        choices = {"parts": ("naive", "tiled"), **choices}
        opt = GradeOptions.for_tree(root, build, tmp_path / out, timing=False, **choices)
        g = open_grading(hand_in, opt, sandbox=Sandbox())
        try:
            states = [new_part_state(p, g.submission, g.sets) for p in g.parts]
            check_sources(g, states)
            build_parts(g, states, lambda: capability)
            return [(s.binary is not None, s.library is not None and s.library.is_file()) for s in states]
        finally:
            g.close()

    assert built("alone", parts=("naive",)) == [(True, False)]  # one part: no run of several, no shared object
    assert built("first") == [(True, True), (True, True)]  # naive built again, with its shared object
    kept = sorted(p.name for p in (build / "part-cache").iterdir())
    assert len(kept) == 4 and sum(name.endswith(".so") for name in kept) == 2
    assert built("again") == [(True, True), (True, True)]  # found in the cache, each with its shared object
    shutil.rmtree(build / "part-cache")
    assert built("unsanitized", sanitizers=False) == [(True, False), (True, False)]
    assert built("no-gpu", capability=None) == [(True, False), (True, False)]  # nothing here would load them


def test_the_part_cache_keeps_the_most_recently_used_within_its_bound(root, tmp_path):
    from tilelab.grading.build_cache import BuildCache, CachePolicy
    from tilelab.spec.assignment import load_assignment

    naive = load_assignment(root / "assignment.yaml").part("naive")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\0" * 1000)  # each entry is 1,000 bytes: room for two in 2,500
    cache = BuildCache(root, build_dir(), tmp_path / "cache", CachePolicy(one_per_part=False, max_bytes=2500))
    sources = []
    for i in range(3):
        sources.append(tmp_path / f"source{i}.cu")
        sources[-1].write_text(f"// {i}\n")
    keys = [cache.key(naive, source) for source in sources]
    assert len(set(keys)) == 3
    # A part built for one GPU alone is another executable than one built for every GPU.
    assert len({cache.key(naive, sources[0], capability) for capability in (None, "9.0", "8.0")}) == 3
    cache.keep(naive, keys[0], binary)
    cache.keep(naive, keys[1], binary)
    os.utime(tmp_path / "cache" / f"naive-{keys[1]}", (1, 1))  # the older of the two
    assert cache.find(naive, keys[0], tmp_path / "out" / "a") is not None  # now the newest
    cache.keep(naive, keys[2], binary)
    assert cache.find(naive, keys[1], tmp_path / "out" / "b") is None
    assert cache.find(naive, keys[0], tmp_path / "out" / "c").read_bytes() == binary.read_bytes()
    assert cache.find(naive, keys[2], tmp_path / "out" / "d") is not None
    assert cache.find_library(naive, keys[2], tmp_path / "out" / "e.so") is None  # none was kept with it


def test_a_part_kept_with_its_shared_object_is_found_with_it(root, tmp_path):
    from tilelab.grading.build_cache import CHECK_POLICY, BuildCache
    from tilelab.spec.assignment import load_assignment

    naive = load_assignment(root / "assignment.yaml").part("naive")
    binary, library = tmp_path / "binary", tmp_path / "library.so"
    binary.write_bytes(b"executable")
    library.write_bytes(b"shared object")
    cache = BuildCache(root, build_dir(), tmp_path / "cache", CHECK_POLICY)  # one part's latest alone
    source = tmp_path / "naive.cu"
    for text in ("// first\n", "// second\n"):
        source.write_text(text)
        key = cache.key(naive, source)
        cache.keep(naive, key, binary, library)
    assert len(list((tmp_path / "cache").iterdir())) == 2  # the second's executable and shared object
    assert cache.find(naive, key, tmp_path / "out" / "naive").read_bytes() == b"executable"
    assert cache.find_library(naive, key, tmp_path / "out" / "libnaive.so").read_bytes() == b"shared object"


def _grade_lines(root, submission: Path, out: Path, parts=(), results="gradescope") -> tuple:
    """(grade.json, results.json, the closing lines `tilelab grade` prints) of one grading."""
    from tilelab.operations.grading_run import Outputs

    lines = []
    outcome = run_grading(submission, GradeOptions.for_tree(root, build_dir(), out, parts=parts),
                          Outputs(results=results), echo=lines.append)
    assert outcome.code == EXIT_GRADED, lines
    return (json.loads((out / "grade.json").read_text()), json.loads((out / "results.json").read_text()), lines)


def _static(graded: dict, part: str) -> dict:
    return next(p for p in graded["parts"] if p["id"] == part)["stages"]["static"]


def test_a_hand_in_wrapped_in_one_folder_is_graded_as_if_unwrapped(root, tmp_path):
    """Students zip a folder: hw3/*.cu, with the metadata macOS adds, grades as the files themselves do."""
    wrapped = tmp_path / "hand-in" / "hw3"
    wrapped.mkdir(parents=True)
    for name in ("naive.cu", "tiled.cu", "answers.yaml"):
        shutil.copy(root / "solutions" / name, wrapped / name)
    (wrapped / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (tmp_path / "hand-in" / "__MACOSX" / "hw3").mkdir(parents=True)
    (tmp_path / "hand-in" / "__MACOSX" / "hw3" / "._naive.cu").write_bytes(b"\0\5\26\7")
    graded, results, lines = _grade_lines(root, tmp_path / "hand-in", tmp_path / "out", parts=("naive", "tiled"))
    flat, _, _ = _grade_lines(root, wrapped, tmp_path / "flat", parts=("naive", "tiled"))
    for part in ("naive", "tiled"):
        assert _static(graded, part)["status"] == "passed", _static(graded, part)
        stages = next(p for p in graded["parts"] if p["id"] == part)["stages"]
        assert {n: s["status"] for n, s in stages.items()} == \
            {n: s["status"] for n, s in next(p for p in flat["parts"] if p["id"] == part)["stages"].items()}
    assert graded["submission"] == str(wrapped)
    # Which folder was graded is said in the report, in results.json and in the terminal.
    note = next(n for n in graded["notes"] if "hw3/" in n)
    assert "was graded" in note and note in results["output"] and note in lines
    assert note in (tmp_path / "out" / "report.md").read_text()
    assert not any("hw3/" in n for n in flat["notes"])


def test_the_questions_of_a_wrapped_hand_in_are_read_from_its_folder(root, tmp_path):
    wrapped = tmp_path / "hand-in" / "Homework 3"
    wrapped.mkdir(parents=True)
    shutil.copy(root / "solutions" / "answers.yaml", wrapped / "answers.yaml")
    graded, _, _ = _grade_lines(root, tmp_path / "hand-in", tmp_path / "out")
    answers = graded["answers"]
    assert answers["status"] == "read" and answers["score"] == answers["max_score"] > 0


def test_files_found_deeper_or_misnamed_are_named_in_the_missing_parts_hints(root, tmp_path):
    hand_in = tmp_path / "hand-in"
    (hand_in / "hw3" / "src").mkdir(parents=True)
    shutil.copy(root / "solutions" / "rectangular.cu", hand_in / "hw3" / "rectangular.cu")
    shutil.copy(root / "solutions" / "naive.cu", hand_in / "hw3" / "Naive.cu")
    shutil.copy(root / "solutions" / "boundary.cu", hand_in / "hw3" / "boundary (1).cu")
    shutil.copy(root / "solutions" / "tiled.cu", hand_in / "hw3" / "src" / "tiled.cu")
    shutil.copy(root / "solutions" / "answers.yaml", hand_in / "hw3" / "src" / "answers.yml")
    graded, results, lines = _grade_lines(root, hand_in, tmp_path / "out",
                                          parts=("naive", "tiled", "boundary", "rectangular"))
    assert _static(graded, "rectangular")["status"] == "passed"  # hw3/ holds a part file under its name
    for part, found in (("naive", "hw3/Naive.cu"), ("tiled", "hw3/src/tiled.cu"),
                        ("boundary", "hw3/boundary (1).cu")):
        static = _static(graded, part)
        assert static["summary"] == f"{part}.cu is missing"
        hint = next(h for h in static["hints"] if found in h)
        assert f"Expected hw3/{part}.cu" in hint
        assert hint in next(t["output"] for t in results["tests"] if t["name"].endswith(": build")
                            and t["name"].startswith(next(p["title"] for p in graded["parts"] if p["id"] == part)))
    assert not any("Expected" in h for h in _static(graded, "rectangular")["hints"])
    # answers.yaml too: its notes in the report, and the terminal's closing lines.
    assert graded["answers"]["status"] == "missing"
    hint = next(n for n in graded["answers"]["notes"] if "hw3/src/answers.yml" in n)
    assert "Expected hw3/answers.yaml" in hint and hint in lines


def test_several_folders_holding_part_files_are_listed_not_guessed_between(root, tmp_path):
    hand_in = tmp_path / "hand-in"
    for folder in ("hw3", "hw3-old"):
        (hand_in / folder).mkdir(parents=True)
        shutil.copy(root / "solutions" / "naive.cu", hand_in / folder / "naive.cu")
    graded, _, lines = _grade_lines(root, hand_in, tmp_path / "out", parts=("naive",))
    static = _static(graded, "naive")
    assert static["summary"] == "naive.cu is missing"
    assert any("hw3/naive.cu" in h and "hw3-old/naive.cu" in h for h in static["hints"]), static["hints"]
    note = next(n for n in graded["notes"] if "2 folders" in n)
    assert "hw3/ (naive.cu)" in note and "hw3-old/ (naive.cu)" in note and "None of them was graded" in note
    assert note in lines


def test_a_link_out_of_the_hand_in_is_never_followed(root, tmp_path):
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    (hand_in / "hw3").symlink_to(root / "solutions", target_is_directory=True)
    graded, _, _ = _grade_lines(root, hand_in, tmp_path / "out", parts=("naive",))
    static = _static(graded, "naive")
    assert graded["submission"] == str(hand_in) and static["summary"] == "naive.cu is missing"
    assert not any("hw3" in h for h in static["hints"]) and not any("hw3" in n for n in graded["notes"])


def test_the_search_for_misplaced_files_is_bounded(tmp_path):
    from tilelab.grading.handin_files import MAX_DEPTH, MAX_ENTRIES, locate

    deep = tmp_path / "deep"
    below = deep.joinpath(*[f"d{i}" for i in range(MAX_DEPTH + 1)])
    below.mkdir(parents=True)
    (below / "naive.cu").write_text("// too deep to be looked for\n")
    (below.parent / "tiled.cu").write_text("// at the deepest level searched\n")
    found = locate(deep, ("naive.cu", "tiled.cu"))
    assert "naive.cu" not in found.elsewhere and found.elsewhere["tiled.cu"][0].endswith("/tiled.cu")
    crowded = tmp_path / "crowded"
    (crowded / "a").mkdir(parents=True)
    for i in range(MAX_ENTRIES):
        (crowded / "a" / f"f{i:05d}.txt").touch()
    (crowded / "z").mkdir()
    (crowded / "z" / "Naive.cu").touch()  # after the bound, in the walk's order
    assert locate(crowded, ("naive.cu",)).elsewhere == {}


def test_the_closing_lines_say_which_parts_did_not_build_and_what_results_json_records(root, tmp_path):
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    shutil.copy(root / "tests" / "submissions" / "naive-compile-error" / "naive.cu", hand_in / "naive.cu")
    shutil.copy(root / "solutions" / "rectangular.cu", hand_in / "rectangular.cu")
    shutil.copy(root / "starter" / "boundary.cu", hand_in / "boundary.cu")
    parts = ("naive", "tiled", "boundary", "rectangular")
    graded, results, lines = _grade_lines(root, hand_in, tmp_path / "out", parts=parts)
    report = tmp_path / "out" / "report.md"
    naive = next(p for p in graded["parts"] if p["id"] == "naive")
    assert f"naive: failed to build ({naive['stages']['build']['summary']}); see {report}" in lines
    assert f"tiled: tiled.cu is missing; see {report}" in lines
    assert any(line.startswith("boundary: not written (the starter's stubs are left: boundaryKernel (line ")
               for line in lines), lines
    assert not any(line.startswith("rectangular:") for line in lines)
    score = next(line for line in lines if line.startswith("score "))
    if graded["gpu"] is None:
        # Without a GPU results.json records 0 whatever was scored here: both are said, in one line.
        assert score == (f"score {graded['score']:.2f} / {graded['max_score']:.2f} here; results.json records "
                         f"{results['score']:g} (withheld: no GPU ran the parts)")
        _, pl_results, pl_lines = _grade_lines(root, hand_in, tmp_path / "pl", parts=parts, results="prairielearn")
        assert pl_results["gradable"] is False
        assert "here; results.json records no score (not gradable: no GPU ran the parts)" in \
            next(line for line in pl_lines if line.startswith("score "))
    else:
        assert score == f"score {graded['score']:.2f} / {graded['max_score']:.2f}"


def test_the_closing_lines_say_what_in_answers_yaml_cannot_be_graded(root, tmp_path):
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    text = (root / "solutions" / "answers.yaml").read_text()
    (hand_in / "answers.yaml").write_text(text + "\nlaunch-bug: e\nnot-a-question: 3\n")
    graded, _, lines = _grade_lines(root, hand_in, tmp_path / "out")
    invalid = [q for q in graded["answers"]["questions"] if q["status"] == "invalid"]
    assert [q["id"] for q in invalid] == ["launch-bug"]
    assert f"answers.yaml line {invalid[0]['line']}: 'launch-bug': {invalid[0]['message']}" in lines
    for note in graded["answers"]["notes"]:
        assert f"answers.yaml: {note}" in lines
    assert any("not-a-question" in n for n in graded["answers"]["notes"])
