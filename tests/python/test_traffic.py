"""The traffic arithmetic on counters measured on the device, and untrusted profiles read safely.

Counter values: tests/python/data/h100-reference-counters.json, each reference
solution's timing case (4096^3) profiled by tilelab-harness on an NVIDIA H100
80GB HBM3 (its "source" field says how and when).
"""

import json
import math
from pathlib import Path

import pytest

from tilelab.grading import traffic
from tilelab.grading.runner import write_cases
from tilelab.spec.assignment import load_assignment

ROOT = Path(__file__).resolve().parents[2]
MEASURED = json.loads((Path(__file__).parent / "data" / "h100-reference-counters.json").read_text())


def measured(part: str) -> traffic.Traffic:
    return traffic.traffic_from(MEASURED["parts"][part]["profile"]["metrics"], 4096, 4096, 4096)


def test_the_data_names_its_source():
    assert "H100" in MEASURED["source"] and "4096" in MEASURED["source"]


def test_naive_global_loads_are_the_lectures_quarter_flop_per_byte():
    naive = measured("naive")
    assert naive.level(traffic.GLOBAL).intensity == pytest.approx(0.25, rel=0.10)
    # Two 4-byte loads per multiply-add: 2 FLOP per 8 bytes, and 2 j k l of them.
    assert naive.level(traffic.GLOBAL).bytes == pytest.approx(4 * naive.flop, rel=0.01)


@pytest.mark.parametrize("part", ["tiled", "boundary", "rectangular"])
def test_tiled_global_loads_are_t_over_four(part):
    tile = 32  # the references' T
    assert measured(part).level(traffic.GLOBAL).intensity == pytest.approx(tile / 4, rel=0.10)


def test_each_level_below_the_threads_moves_fewer_bytes_for_tiles():
    tiled = measured("tiled")
    assert tiled.level("DRAM").intensity > tiled.level("L1").intensity
    # DRAM reads at least the compulsory bytes: M and N once, and P written once.
    assert tiled.level("DRAM").bytes >= 3 * 4096 * 4096 * 4 * 0.99


def test_coalescing_figures():
    assert measured("naive").sectors_per_request == 2.0
    assert measured("tiled").sectors_per_request == 4.0
    assert measured("challenge").sectors_per_request == 16.0


def test_stalls_are_shares_of_active_warp_cycles_largest_first():
    stalls = measured("tiled").stalls
    assert len(stalls) == 3 and all(0 <= share <= 1 for _, share in stalls)
    assert [s for _, s in stalls] == sorted((s for _, s in stalls), reverse=True)


def test_a_measured_profile_is_read_from_a_harness_case():
    case = {"j": 4096, "k": 4096, "l": 4096,
            "profile": dict(MEASURED["parts"]["naive"]["profile"], seconds=0.6, message="")}
    got = traffic.profiled_case(case)
    assert got.note == "" and got.traffic.level(traffic.GLOBAL).intensity == pytest.approx(0.25)
    assert got.traffic.passes == MEASURED["parts"]["naive"]["profile"]["passes"]


def test_a_profile_read_with_other_parts_says_how_many_untrusted_counts_read_as_alone():
    # The harness reads the counters of a run's parts in one profile (grader/harness/core/profiles_together.h).
    case = {"j": 4096, "k": 4096, "l": 4096,
            "profile": dict(MEASURED["parts"]["naive"]["profile"], seconds=0.1, message="", ranges=6)}
    assert traffic.profiled_case(case).traffic.together == 6
    untrusted = ((1, 1), (0, 1), (-3, 1), (True, 1), ("6", 1), (6.0, 1), (None, 1), (10**9, traffic.MAX_TOGETHER))
    for said, read in untrusted:
        case["profile"]["ranges"] = said
        assert traffic.profiled_case(case).traffic.together == read, said
    del case["profile"]["ranges"]  # a profile of its part alone
    assert traffic.profiled_case(case).traffic.together == 1


@pytest.mark.parametrize("case, note", [
    (None, "not measured: the harness gave no counters"),
    ({"profile": "yes"}, "not measured: the harness gave no counters"),
    ({"profile": {"status": "not_allowed", "message": "admins only"}}, "not allowed here: admins only"),
    ({"profile": {"status": "skipped", "message": "one call takes 900 ms"}}, "not read: one call takes 900 ms"),
    ({"profile": {"status": "measured", "metrics": []}, "j": 4, "k": 4, "l": 4},
     "not measured: the harness's counters could not be read"),
    ({"profile": {"status": "measured", "metrics": {}}, "j": 0, "k": 4, "l": 4},
     "not measured: the harness's counters could not be read"),
    ({"profile": {"status": 7, "message": ["x"]}}, "not measured"),
])
def test_an_untrusted_profile_that_is_not_one_leaves_a_note(case, note):
    got = traffic.profiled_case(case)
    assert got.traffic is None and got.note == note


def test_garbage_counter_values_are_dropped_not_trusted():
    metrics = dict(MEASURED["parts"]["naive"]["profile"]["metrics"])
    metrics[traffic.DRAM_READ_BYTES] = float("nan")
    metrics[traffic.L2_BYTES] = -5
    metrics[traffic.GLOBAL_LOAD_SECTORS] = True
    t = traffic.profiled_case({"j": 4096, "k": 4096, "l": 4096,
                               "profile": {"status": "measured", "metrics": metrics}}).traffic
    assert t.level("DRAM") is None and t.level("L2") is None and t.sectors_per_request is None
    assert t.level(traffic.GLOBAL).intensity == pytest.approx(0.25)
    assert all(math.isfinite(v) for v in traffic.profiled_case(
        {"j": 1, "k": 1, "l": 1, "profile": {"status": "measured", "metrics": metrics}}).counters.values())


def test_the_case_file_asks_for_the_counters_on_the_last_case_only(tmp_path):
    assignment = load_assignment(ROOT / "assignment.yaml")
    part = assignment.part("naive")
    entries = [(c.name, c) for c in part.cases["public"][:3]]
    doc = json.loads(write_cases(part, entries, tmp_path, 1, profile=True).read_text())
    assert [("profile" in c) for c in doc["cases"]] == [False, False, True]
    assert doc["cases"][-1]["profile"]["metrics"] == list(traffic.METRICS)
    assert doc["cases"][-1]["profile"]["far_over_metrics"] == list(traffic.TRAFFIC_METRICS + traffic.SHARED_METRICS)
    without = json.loads(write_cases(part, entries, tmp_path / "no-shared", 1, profile=True,
                                     profile_shared_memory=False).read_text())
    assert without["cases"][-1]["profile"]["far_over_metrics"] == list(traffic.TRAFFIC_METRICS)
    plain = json.loads(write_cases(part, entries, tmp_path / "plain", 1).read_text())
    assert not any("profile" in c for c in plain["cases"])


def test_the_counter_availability_image_goes_only_with_a_profile(tmp_path):
    part = load_assignment(ROOT / "assignment.yaml").part("naive")
    entries = [(c.name, c) for c in part.cases["public"][:1]]
    profiled = json.loads(write_cases(part, entries, tmp_path / "p", 1, profile=True,
                                      counter_availability="00ff").read_text())
    assert profiled["counter_availability"] == "00ff"
    plain = json.loads(write_cases(part, entries, tmp_path / "q", 1, counter_availability="00ff").read_text())
    assert "counter_availability" not in plain


def test_a_profile_of_the_far_over_metrics_reads_the_traffic_and_says_so():
    # What the harness reads of a call far over its budget (grader/harness/core/timing.h): the traffic alone.
    every = MEASURED["parts"]["naive"]["profile"]["metrics"]
    read = {name: every[name] for name in traffic.TRAFFIC_METRICS}
    case = {"j": 4096, "k": 4096, "l": 4096, "profile": {"status": "measured", "metrics": read, "far_over": True}}
    got = traffic.profiled_case(case).traffic
    assert got.far_over
    assert got.level(traffic.GLOBAL).intensity == pytest.approx(0.25) and got.level("DRAM") is not None
    assert got.sectors_per_request == 2.0
    assert got.achieved_occupancy is None and got.fma_share is None and got.stalls == []
    assert set(traffic.TRAFFIC_METRICS) < set(traffic.METRICS)
    for said in (False, "true", 1, None):
        case["profile"]["far_over"] = said
        assert not traffic.profiled_case(case).traffic.far_over


def test_a_far_over_call_reads_shared_memory_where_its_kernels_may_use_it(tmp_path):
    """The contract asks for shared memory, or the part's correctness runs used it; not where they came after
    (a check's timing begins beside its cases) for a part that may do without."""
    from tilelab.grading.context import new_part_state
    from tilelab.grading.stages.speed import _may_use_shared_memory

    assignment = load_assignment(ROOT / "assignment.yaml")
    tiled, naive = (new_part_state(assignment.part(p), tmp_path, ("public",)) for p in ("tiled", "naive"))
    assert _may_use_shared_memory(tiled) and not _may_use_shared_memory(naive)

    def ran(shared_bytes: int) -> dict:
        launch = {"static_shared_bytes": shared_bytes, "dynamic_shared_bytes": 0}
        return {"cases": [{"j": 17, "k": 17, "l": 17, "launches_recorded": True, "launches": [launch]}]}

    naive.harness_result = ran(0)
    assert not _may_use_shared_memory(naive)
    naive.harness_result = ran(2048)
    assert _may_use_shared_memory(naive)
    naive.harness_result = {"cases": "garbage"}  # records that say nothing for certain
    assert _may_use_shared_memory(naive)
