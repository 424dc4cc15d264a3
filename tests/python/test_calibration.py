"""Speed targets from the reference solutions (tilelab.grading.calibration):
the target arithmetic on measured ladders of more than one architecture,
the cache and its fingerprint, estimates for a machine without references,
and the rule in assignment.yaml.

The ladders are measurements, each with its source:
  H100  ours, docs/measurements-archive.md ("Calibration of the speed targets",
        tilelab selftest on an H100 80GB HBM3, 2026-11-21), 4096^3 (the
        rectangular and dynamic parts at 2048 x 4096 x 8192).
  H200  ours, docs/measurements-archive.md ("Speed targets from the reference
        solutions", scripts/gpu-suite on an H200, 2026-11-22).
  A6000 siboehm/SGEMM_CUDA, README.md (RTX A6000, 4092 x 4092, GFLOP/s):
        "1: Naive" 309, "2: GMEM Coalescing" 1986.5, "3: SMEM Caching"
        2980.3. Its kernel 1 maps x to the row (uncoalesced), kernel 2 is
        the coalesced naive kernel, kernel 3 the textbook 32 x 32 tiled one.
On each, under the rule of assignment.yaml, the reference gets full credit,
the coalesced naive kernel handed in as a tiled part gets less, and the
uncoalesced naive kernel gets none.
"""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tilelab.grading import calibration
from tilelab.grading.calibration import Calibration, CalibrationError, ReferenceSpeed
from tilelab.grading.model import ESTIMATED_RULE, MEASURED_RULE
from tilelab.grading.gpu_ceilings import Ceilings
from tilelab.grading.scoring import reference_target
from tilelab.spec.assignment import AssignmentError, parse_assignment
from tilelab.spec.reference_gpu import load_reference_gpu

ROOT = Path(__file__).resolve().parents[2]

H100_LADDER = {  # GFLOP/s; FP32 FMA ceiling 65,094, DRAM 3,040 GB/s
    "fp32": 65094.0, "dram": 3040.0, "size": (4096, 4096, 4096),
    "naive_uncoalesced": 498.0, "naive": 5294.0, "tiled": 9191.0,
    # honest variants of the technique (tests/submissions/good-*), each against its own part's reference
    "variants": {"good-tiled-16": (8253.0, "tiled"), "good-naive-32x8": (6196.0, "naive"),
                 "good-boundary-coarsened": (9190.0, "boundary"), "good-rectangular-1d-block": (8084.0, "rectangular"),
                 "good-dynamic-square-tiles": (6633.0, "dynamic_smem")},
    "references": {"naive": 5294.0, "tiled": 9191.0, "boundary": 8986.0, "rectangular": 9015.0,
                   "dynamic_smem": 5254.0},
    "naive_as_tiled": 5352.0,  # tests/submissions/naive-as-tiled, timed as the tiled part
}
H200_LADDER = {  # GFLOP/s; FP32 FMA ceiling 65,143, DRAM 4,067 GB/s
    "fp32": 65143.0, "dram": 4067.0, "size": (4096, 4096, 4096),
    "naive_uncoalesced": 498.0, "naive": 5141.0, "tiled": 9001.0,
}
A6000_LADDER = {  # FP32 peak about 38,700 GFLOP/s, 768 GB/s
    "fp32": 38700.0, "dram": 768.0, "size": (4092, 4092, 4092),
    "naive_uncoalesced": 309.0, "naive": 1986.5, "tiled": 2980.3,
}


def _ceilings(ladder) -> Ceilings:
    return Ceilings(device_name="gpu", device_uuid="GPU-0", fp32_gflops=ladder["fp32"], dram_gbps=ladder["dram"],
                    measured_at="2026-11-22T00:00:00Z", raw={})


@pytest.mark.parametrize("ladder", [H100_LADDER, H200_LADDER, A6000_LADDER], ids=["H100", "H200", "A6000"])
def test_on_each_ladder_the_reference_earns_full_credit_and_the_skipped_technique_does_not(ladder, assignment):
    ceilings, (j, k, l) = _ceilings(ladder), ladder["size"]
    tiled = reference_target(ceilings, j, k, l, ladder["tiled"], assignment.speed)
    naive = reference_target(ceilings, j, k, l, ladder["naive"], assignment.speed)
    assert tiled.fraction(ladder["tiled"]) == 1.0
    assert naive.fraction(ladder["naive"]) == 1.0
    # The coalesced naive kernel handed in as the tiled part: partial at most.
    assert tiled.fraction(ladder["naive"]) < 1.0
    # The uncoalesced naive kernel earns nothing, as the naive part or as the tiled one.
    assert naive.fraction(ladder["naive_uncoalesced"]) == 0.0
    assert tiled.fraction(ladder["naive_uncoalesced"]) == 0.0


def test_a_fixed_share_of_the_roof_would_not_carry_from_the_h100_to_the_a6000(assignment):
    """Why targets come from the reference: the tiled kernel's share of the
    FP32 roof is 14 % on the H100 and 7.7 % on the A6000, so the old fixed
    target (11 % of the roof) would have given the A6000's reference a
    quarter of its speed points."""
    h100_share = H100_LADDER["tiled"] / H100_LADDER["fp32"]
    a6000_share = A6000_LADDER["tiled"] / A6000_LADDER["fp32"]
    assert h100_share == pytest.approx(0.141, abs=0.001) and a6000_share == pytest.approx(0.077, abs=0.001)
    old_full, old_zero = 0.11 * A6000_LADDER["fp32"], 0.6 * 0.11 * A6000_LADDER["fp32"]
    assert (A6000_LADDER["tiled"] - old_zero) / (old_full - old_zero) == pytest.approx(0.25, abs=0.01)


@pytest.mark.parametrize("variant", sorted(H100_LADDER["variants"]))
def test_honest_variants_of_the_technique_keep_full_credit_on_the_h100(variant, assignment):
    gflops, part = H100_LADDER["variants"][variant]
    part_cases = assignment.part(part).cases["timing"]
    (case,) = part_cases
    target = reference_target(_ceilings(H100_LADDER), case.j, case.k, case.l, H100_LADDER["references"][part],
                          assignment.speed)
    assert target.fraction(gflops) == 1.0


def test_naive_as_tiled_on_the_h100_gets_a_share_between_nothing_and_full(assignment):
    target = reference_target(_ceilings(H100_LADDER), 4096, 4096, 4096, H100_LADDER["tiled"], assignment.speed)
    fraction = target.fraction(H100_LADDER["naive_as_tiled"])
    # 5352 / 9191 = 0.58 of the reference: (0.58 - 0.5) / (0.8 - 0.5)
    assert fraction == pytest.approx((5352 / 9191 - 0.5) / 0.3, abs=1e-3)
    assert 0 < fraction < 1


# --- the calibration record, its cache and its fingerprint ---------------------------------


def _calibration(uuid="GPU-6b1f", fingerprint="f" * 64, tiled=(9188.0, 9191.0, 9246.0)) -> Calibration:
    # Three runs of the tiled reference as two H100 suites measured them (docs/measurements-archive.md).
    return Calibration(MEASURED_RULE, uuid, "NVIDIA H100 80GB HBM3", fingerprint, "2026-11-22T10:00:00Z", 6.1,
                       (ReferenceSpeed("tiled", 4096, 4096, 4096, tiled),))


def test_a_reference_speed_is_the_median_of_its_runs_with_their_spread():
    speed = _calibration().speeds[0]
    assert speed.gflops == 9191.0
    assert speed.spread == pytest.approx((9246 - 9188) / 9191)
    assert ReferenceSpeed("naive", 1, 1, 1, (5294.0,)).spread == 0.0


def test_the_cache_keeps_a_calibration_per_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path))
    saved = _calibration()
    path = calibration.save(saved)
    assert path == tmp_path / "calibration-GPU-6b1f.json"
    assert calibration.load_cached("GPU-6b1f") == saved
    assert calibration.load_cached("GPU-other") is None
    # A file copied from another GPU's cache, or broken, is not used.
    (tmp_path / "calibration-GPU-other.json").write_text(path.read_text())
    assert calibration.load_cached("GPU-other") is None
    path.write_text("{not json")
    assert calibration.load_cached("GPU-6b1f") is None
    path.write_text(json.dumps({**saved.to_dict(), "speeds": [{"part": "tiled", "j": 1, "k": 1, "l": 1, "runs": [0]}]}))
    assert calibration.load_cached("GPU-6b1f") is None


def _fake_build(tmp_path: Path, assignment) -> Path:
    """A build tree's reference executables and trusted harness as files (the
    fingerprint reads their bytes; nothing runs them)."""
    build = tmp_path / "build"
    (build / calibration.REFERENCE_DIR).mkdir(parents=True)
    for name in [p.id for p in assignment.parts] + ["cublas"]:
        (build / calibration.REFERENCE_DIR / name).write_bytes(f"reference {name} v1".encode())
    (build / "bin").mkdir()
    (build / "bin" / "tilelab-harness").write_bytes(b"trusted harness v1")
    return build


H100_DEVICE = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-6b1f", "compute_capability": "9.0",
               "driver_version": 13000, "runtime_version": 13000}


def test_the_fingerprint_changes_with_a_reference_the_assignment_or_the_driver(tmp_path, assignment):
    build = _fake_build(tmp_path, assignment)
    first = calibration.fingerprint(build, assignment, H100_DEVICE)
    assert calibration.fingerprint(build, assignment, H100_DEVICE) == first
    assert calibration.fingerprint(build, assignment, {**H100_DEVICE, "driver_version": 13010}) != first
    (build / calibration.REFERENCE_DIR / "tiled").write_bytes(b"reference tiled v2")
    second = calibration.fingerprint(build, assignment, H100_DEVICE)
    assert second != first
    doc = yaml.safe_load((ROOT / "assignment.yaml").read_text())
    doc["timing"]["repetitions"] += 1
    assert calibration.fingerprint(build, parse_assignment(doc, ROOT / "assignment.yaml"), H100_DEVICE) != second
    # cuBLAS behind the harness is timed too (the challenge is scored against it): a new build of it counts.
    (build / calibration.REFERENCE_DIR / "cublas").write_bytes(b"reference cublas v2")
    assert calibration.fingerprint(build, assignment, H100_DEVICE) != second
    third = calibration.fingerprint(build, assignment, H100_DEVICE)
    # The trusted harness's clock is what the references are timed by: a new build of it counts too.
    (build / "bin" / "tilelab-harness").write_bytes(b"trusted harness v2")
    assert calibration.fingerprint(build, assignment, H100_DEVICE) != third
    (build / calibration.REFERENCE_DIR / "cublas").unlink()
    assert not calibration.has_references(build, assignment)
    (build / calibration.REFERENCE_DIR / "naive").unlink()
    assert not calibration.has_references(build, assignment)
    with pytest.raises(CalibrationError, match="reference of naive"):
        calibration.fingerprint(build, assignment, H100_DEVICE)


def test_a_cached_calibration_is_reused_while_its_fingerprint_holds(tmp_path, monkeypatch, assignment):
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    build = _fake_build(tmp_path, assignment)
    cached = _calibration(fingerprint=calibration.fingerprint(build, assignment, H100_DEVICE))
    calibration.save(cached)
    got, fresh = calibration.get_calibration(build, assignment, H100_DEVICE, tmp_path / "no-verifier")
    assert got == cached and not fresh
    # A changed reference must be timed again; these files cannot run, so that fails, and nothing is kept.
    (build / calibration.REFERENCE_DIR / "tiled").write_bytes(b"reference tiled v2")
    with pytest.raises(CalibrationError, match="reference of naive"):
        calibration.get_calibration(build, assignment, H100_DEVICE, tmp_path / "no-verifier")
    assert calibration.load_cached("GPU-6b1f") == cached


def test_a_calibration_far_below_the_last_one_of_the_same_gpu_is_named():
    before = _calibration()
    throttled = _calibration(tiled=(5200.0, 5210.0, 5190.0))  # 57 % of before: a throttled or shared GPU
    slower = _calibration(tiled=(7000.0, 7010.0, 6990.0))  # 76 %: within DROP_LIMIT
    assert calibration.drops(throttled, before) == [
        "tiled at 4096x4096x4096: 5,200 GFLOP/s against 9,191 on 2026-11-22T10:00:00Z"]
    assert calibration.drops(slower, before) == []
    assert calibration.drops(throttled, None) == []


def test_without_references_check_estimates_from_the_grading_gpus_published_share(assignment):
    """The H100's published figures (handouts/reference-gpu.yaml) on an A6000:
    each reference's share of the FP32 roof, times the A6000's roof."""
    published = load_reference_gpu(ROOT)
    a6000 = _ceilings(A6000_LADDER)
    estimate = calibration.estimate(assignment, a6000, {"name": "RTX A6000", "uuid": "GPU-a6"}, published)
    assert estimate.rule == ESTIMATED_RULE and "reference-gpu.yaml" in estimate.source
    tiled = estimate.speed_of("tiled", 4096, 4096, 4096)
    (figure,) = published["reference"]["tiled"]
    share = figure["gflops"] / published["fp32_fma_gflops"]
    assert tiled.gflops == pytest.approx(share * A6000_LADDER["fp32"], abs=0.1)
    assert {s.part for s in estimate.speeds} == {p.id for p in assignment.parts} | {"cublas"}
    # cuBLAS and the challenge at both of its timing sizes, so its targets can be estimated too.
    for size in ((4096, 4096, 4096), (2048, 4096, 8192)):
        assert estimate.target(a6000, assignment.part("challenge"), assignment.speed, *size) is not None
    # A figure measured at another size than the part's timing size is not used.
    moved = {**published, "reference": {**published["reference"],
                                        "tiled": [{"size": (2048, 2048, 2048), "gflops": 9000.0}]}}
    assert calibration.estimate(assignment, a6000, {}, moved).speed_of("tiled", 4096, 4096, 4096) is None


def test_an_estimate_is_fingerprinted_by_the_gpu_and_the_harness_so_its_counter_image_can_be_kept(tmp_path,
                                                                                                   assignment):
    """A student's machine has no references, yet its timing runs may take
    the kept counter availability image (speed.py), which is kept per fingerprint."""
    build = _fake_build(tmp_path, assignment)
    shutil.rmtree(build / calibration.REFERENCE_DIR)
    published = load_reference_gpu(ROOT)
    ceilings = _ceilings(H100_LADDER)
    first = calibration.estimate(assignment, ceilings, H100_DEVICE, published, build)
    assert first.rule == ESTIMATED_RULE and len(first.fingerprint) == 64
    assert calibration.estimate(assignment, ceilings, H100_DEVICE, published, build).fingerprint == first.fingerprint
    assert first.fingerprint != calibration.fingerprint(_fake_build(tmp_path / "full", assignment), assignment,
                                                        H100_DEVICE)
    newer_driver = calibration.estimate(assignment, ceilings, {**H100_DEVICE, "driver_version": 13010}, published,
                                        build)
    assert newer_driver.fingerprint != first.fingerprint
    (build / "bin" / "tilelab-harness").write_bytes(b"trusted harness v2")
    assert calibration.estimate(assignment, ceilings, H100_DEVICE, published, build).fingerprint != first.fingerprint
    # Without a build, no fingerprint: no image is taken.
    assert calibration.estimate(assignment, ceilings, H100_DEVICE, published).fingerprint == ""


def test_the_ladder_names_each_reference_its_share_of_the_roofs_and_its_targets(assignment):
    ceilings = _ceilings(H100_LADDER)
    rows = calibration.ladder_rows(_calibration(), ceilings, assignment)
    (tiled,) = rows
    assert tiled["of_fp32"] == pytest.approx(9191 / 65094)
    assert tiled["of_dram"] == pytest.approx(9191 / (682.67 * 3040), rel=1e-4)
    assert tiled["full"] == pytest.approx(7352.8) and tiled["zero"] == pytest.approx(4595.5)
    text = calibration.describe(_calibration(), ceilings, assignment)
    assert "tiled" in text and "9,191" in text and "7,353" in text and "0.6%" in text


# --- the rule in assignment.yaml --------------------------------------------------------------


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["grading"].update(speed={"ceiling": "fp32_fma", "zero_below": 0.6}), "full_at and zero_at"),
    (lambda d: d["grading"]["speed"].update(zero_at=0.9), "zero_at: must be below full_at"),
    (lambda d: d["grading"]["speed"].update(calibration_runs=0), "calibration_runs: must be a whole number"),
    (lambda d: d["grading"]["speed"].pop("full_at"), "missing required key 'full_at'"),
    (lambda d: d["parts"][1].update(speed={"target": 0.11}), "parts[1].speed: a part has no speed target"),
])
def test_the_speed_rule_is_checked_with_clear_errors(edit, message):
    doc = yaml.safe_load((ROOT / "assignment.yaml").read_text())
    edit(doc)
    with pytest.raises(AssignmentError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_assignment(doc, ROOT / "assignment.yaml")


# --- the challenge part: scored against cuBLAS -------------------------------------------------

# H100 80GB HBM3, 2026-11-22 (docs/measurements-archive.md, "Challenge part"): cuBLAS SGEMM (FP32)
# and the ladder's rungs at 4096^3; the tiled reference from the calibration of the same day.
H100_CHALLENGE = {"cublas": 51661.0, "tiled": 9256.0, "reference": 47670.0, "warp_tiling": 36843.0,
                  "register_tiling": 16222.0}


def test_the_challenge_earns_from_the_tiled_reference_up_to_a_share_of_cublas(assignment):
    part, f = assignment.part("challenge"), H100_CHALLENGE
    figures = {("cublas", 4096): f["cublas"], ("tiled", 4096): f["tiled"], ("challenge", 4096): f["reference"]}
    target = calibration.speed_target(_ceilings(H100_LADDER), part, assignment.speed,
                                      lambda name, j, k, l: figures.get((name, j)), 4096, 4096, 4096)
    assert target.versus == "cublas" and target.cublas == f["cublas"] and target.reference == f["reference"]
    assert target.full == pytest.approx(0.8 * 51661.0) and target.zero == 9256.0
    assert target.fraction(f["reference"]) == 1.0  # 92 % of cuBLAS
    assert target.fraction(f["tiled"]) == 0.0  # the textbook kernel earns nothing here
    assert target.fraction(f["warp_tiling"]) == pytest.approx((36843 - 9256) / (41328.8 - 9256))  # 0.86
    assert 0 < target.fraction(f["register_tiling"]) < 0.25
    # Without cuBLAS or the floor at this size there is no target, never a made-up one.
    assert calibration.speed_target(_ceilings(H100_LADDER), part, assignment.speed,
                                    lambda name, j, k, l: figures.get((name, j)), 2048, 4096, 8192) is None


def test_the_floor_of_the_non_square_size_is_the_rectangular_reference(assignment):
    part = assignment.part("challenge")
    # 2048 x 4096 x 8192: rectangular reference 9,076, cuBLAS 51,929 (docs/measurements-archive.md).
    figures = {"cublas": 51929.0, "rectangular": 9076.0}
    target = calibration.speed_target(_ceilings(H100_LADDER), part, assignment.speed,
                                      lambda name, j, k, l: figures.get(name), 2048, 4096, 8192)
    assert target.zero == 9076.0 and target.full == pytest.approx(0.8 * 51929.0) and target.reference is None
