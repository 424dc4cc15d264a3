"""assignment.yaml: the real file loads, and every kind of mistake an
instructor can make is reported with the place it was made."""

import copy

import pytest
import yaml

from tilelab.spec.assignment import AssignmentError, load_assignment, parse_assignment


@pytest.fixture
def doc(root):
    return yaml.safe_load((root / "assignment.yaml").read_text())


def error(doc) -> str:
    with pytest.raises(AssignmentError) as e:
        parse_assignment(doc, path=None)
    return str(e.value)


def test_the_real_assignment_loads(root):
    a = load_assignment(root / "assignment.yaml")
    assert [p.id for p in a.parts] == ["naive", "tiled", "boundary", "rectangular", "dynamic_smem", "challenge"]
    challenge = a.part("challenge")
    assert challenge.versus_cublas.zero_at_reference_of == ("tiled", "rectangular") and a.uses_cublas
    assert challenge.starter == "working" and challenge.extra_credit and challenge.counted_max == 0
    assert a.part("tiled").counted_max == 25 and not a.part("tiled").extra_credit
    assert a.grading["leaderboard_names"] in ("name", "alias")
    tiled = a.part("tiled")
    assert tiled.declaration == "void launchTiled(const float* M, const float* N, float* P, int Width)"
    assert a.part("dynamic_smem").declaration.endswith("int j, int k, int l, const cudaDeviceProp& prop)")
    assert tiled.tolerance == {"sqrt_k_factor": 16.0}
    assert all(c.j % 32 == 0 for s in ("public", "hidden") for c in tiled.cases[s])


def test_the_sizes_that_catch_classic_mistakes_are_there(root):
    a = load_assignment(root / "assignment.yaml")
    widths = {c.j for s in ("public", "hidden") for c in a.part("boundary").cases[s]}
    for w in (1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65):
        assert w in widths
    rect = [(c.j, c.k, c.l) for s in ("public", "hidden") for c in a.part("rectangular").cases[s]]
    assert {(17, 33, 65), (17, 65, 33), (33, 17, 65), (33, 65, 17), (65, 17, 33), (65, 33, 17)} <= set(rect)
    assert any(k == 1 for _, k, _ in rect) and any(j == 1 for j, _, _ in rect) and any(l == 1 for _, _, l in rect)
    smem = {c.props.get("sharedMemPerBlock") for s in ("public", "hidden") for c in a.part("dynamic_smem").cases[s]}
    assert {2048, 512, 128, "optin"} <= smem
    assert [c.j for c in a.part("naive").cases["timing"]] == [4096]


def test_the_challenge_is_scored_against_cublas_as_extra_credit(root):
    # assignment.yaml, part challenge: full speed points from 0.8 x cuBLAS, none at
    # or below the tiled (4096^3) or rectangular (2048 x 4096 x 8192) reference.
    a = load_assignment(root / "assignment.yaml")
    challenge = a.part("challenge")
    assert challenge.declaration == \
        "void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l)"
    assert challenge.versus_cublas.full_at == 0.8
    assert challenge.versus_cublas.zero_at_reference_of == ("tiled", "rectangular")
    assert challenge.starter == "working" and a.uses_cublas
    assert challenge.points == {"correctness": 5, "speed": 15} and challenge.extra_credit
    assert challenge.counted_max == 0 and a.part("tiled").counted_max == 25
    assert sum(p.counted_max for p in a.parts) == 100
    assert a.grading["leaderboard_names"] == "alias"


def test_case_shorthands_and_names(doc):
    a = parse_assignment(doc, path=None)
    naive = a.part("naive")
    assert naive.cases["public"][0].name == "w1"
    w64int = [c for c in naive.cases["public"] if c.distribution == "small_int"][0]
    assert (w64int.name, w64int.j, w64int.k, w64int.l) == ("w64-int", 64, 64, 64)
    dyn = a.part("dynamic_smem").cases["public"]
    assert "33x17x65-smem2048" in [c.name for c in dyn]
    assert a.part("rectangular").cases["timing"][0].flop == 2.0 * 2048 * 4096 * 8192


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["parts"][0].pop("launcher"), "parts[0]: missing required key 'launcher'"),
        (lambda d: d["parts"][0].update(signature="cube"), "parts[0].signature: must be one of"),
        (lambda d: d["parts"][1]["cases"]["public"].append(0), "parts[1].cases.public[5]: must be between 1"),
        (lambda d: d["parts"][1]["cases"]["public"].append(True), "parts[1].cases.public[5]: must be an integer"),
        (lambda d: d["parts"][3]["cases"]["public"].append([1, 2]), "a rectangular case is [j, k, l]"),
        (lambda d: d["parts"][3]["cases"]["public"].append({"j": 1, "k": 1, "l": 1, "props": {}}),
         "only a launcher that takes cudaDeviceProp"),
        (lambda d: d["parts"][4]["cases"]["public"].append({"j": 1, "k": 1, "l": 1, "props": {"sharedMem": 5}}),
         "unknown key 'sharedMem'"),
        (lambda d: d["parts"][0]["cases"]["hidden"].append(1), "case w1 is already listed in cases.public"),
        (lambda d: d["parts"][0]["cases"].update(timing=[]), "parts[0].cases.timing: must be a non-empty list"),
        (lambda d: d["parts"][0]["points"].update(speed=-1), "parts[0].points.speed: must be between 0"),
        (lambda d: d["parts"][1].update(file="naive.cu"), "two parts share the file 'naive.cu'"),
        (lambda d: d["parts"][0].update(file="../naive.cu"), "parts[0].file: '../naive.cu' is not valid"),
        (lambda d: d["parts"][0].update(id="Naive"), "parts[0].id: 'Naive' is not valid"),
        (lambda d: d["timing"].update(repetitions=0), "timing.repetitions: must be between 1"),
        (lambda d: d.update(extra=1), "unknown key 'extra'"),
        (lambda d: d["parts"][0]["cases"]["public"].append({"width": 3, "inputs": "normal"}),
         "parts[0].cases.public[11].inputs: must be one of uniform, small_int"),
        (lambda d: d["parts"][5]["points"].update(extra_credit="yes"), "parts[5].points.extra_credit: must be true"),
        (lambda d: d["parts"][5].update(starter="empty"), "parts[5].starter: must be one of todo, working"),
        (lambda d: d["parts"][5]["versus_cublas"].update(zero_at_reference_of=["nope"]),
         "parts[5].versus_cublas.zero_at_reference_of: 'nope' is not another part"),
        (lambda d: d["parts"][5]["versus_cublas"].update(zero_at_reference_of=["naive"]),
         "none of these parts is timed at 2048x4096x8192"),
        (lambda d: d["parts"][5]["versus_cublas"].pop("full_at"), "parts[5].versus_cublas: missing required key"),
        (lambda d: d["parts"][0].update(versus_cublas={"full_at": 0.8, "zero_at_reference_of": ["tiled"]}),
         "parts[0].versus_cublas: needs a rectangular launcher"),
        (lambda d: d["parts"][5].update(id="cublas"), "'cublas' names the grader's cuBLAS baseline"),
        (lambda d: d["grading"].update(leaderboard={"names": "nick"}), "grading.leaderboard.names: must be one of"),
    ],
)
def test_mistakes_are_reported_where_they_are(doc, mutate, message):
    d = copy.deepcopy(doc)
    mutate(d)
    assert message in error(d)


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(AssignmentError, match="cannot read"):
        load_assignment(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("parts: [unclosed\n")
    with pytest.raises(AssignmentError, match="not valid YAML"):
        load_assignment(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(AssignmentError, match="must be a mapping"):
        load_assignment(empty)
