"""Occupancy from a launch record (grading/occupancy.py) and the hints one call's counters give
(grading/counter_hints.py), checked on what the reference solutions measure.

Every figure below comes from tests/python/data/h100-reference-counters.json:
the counters of one call of each reference at 4096^3 on an H100, with the
device's properties and each kernel's launch record. Figures of kernels
that were not measured are derived from those, and each says how.
"""

import copy
import json
from pathlib import Path

import pytest

from tilelab.grading import counter_hints, occupancy, traffic
from tilelab.grading.counter_hints import hints_for

MEASURED = json.loads((Path(__file__).parent / "data" / "h100-reference-counters.json").read_text())
DEVICE = MEASURED["device"]
PARTS = MEASURED["parts"]
TITLES = {"naive": "Naive kernel", "tiled": "Tiled kernel", "boundary": "Boundary checks",
          "rectangular": "Rectangular matrices", "dynamic_smem": "Dynamic shared memory",
          "challenge": "Challenge: toward cuBLAS"}


def counters(part_id: str) -> dict:
    return dict(PARTS[part_id]["profile"]["metrics"])


def launches(part_id: str) -> list:
    return copy.deepcopy(PARTS[part_id]["launches"])


def measured(part_id: str, metrics: dict = None, launched: list = None) -> traffic.Traffic:
    """The part's traffic as the grader reads it: counters, then the launch record's occupancy."""
    part = PARTS[part_id]
    found = traffic.traffic_from(metrics or counters(part_id), part["j"], part["k"], part["l"])
    return traffic.with_occupancy(found, launches(part_id) if launched is None else launched, DEVICE)


def counters_only(part_id: str) -> traffic.Traffic:
    """A reference as calibration keeps it: counters, no launch record."""
    part = PARTS[part_id]
    return traffic.traffic_from(counters(part_id), part["j"], part["k"], part["l"])


# --- occupancy ---------------------------------------------------------------

# Nsight Compute's occupancy limits (blocks per SM) for the references at
# 1024^3 on the H100 (docs/measurements-archive.md, "Toward measured
# traffic"): registers, shared memory, warps. The launch records here are of
# 4096^3, but block, registers and shared memory do not depend on the size.
NCU_LIMITS = {"naive": (8, 32, 8), "tiled": (2, 3, 2), "dynamic_smem": (1, 1, 2)}


@pytest.mark.parametrize("part_id", sorted(NCU_LIMITS))
def test_the_occupancy_limits_are_the_ones_nsight_compute_measured(part_id):
    regs, shared, warps = NCU_LIMITS[part_id]
    found = occupancy.occupancy_of_launches(PARTS[part_id]["launches"], DEVICE)
    assert found.limits[occupancy.REGISTERS] == regs
    assert found.limits[occupancy.BLOCK_SIZE] == warps
    # ncu divides by the shared-memory carveout the driver chose for the
    # launch (32 KiB fits tiled's 3 blocks of 9 KiB), the calculator by the
    # SM's whole shared memory, the most a carveout can be: only a bound.
    assert found.limits[occupancy.SHARED_MEMORY] >= shared


@pytest.mark.parametrize("part_id", sorted(PARTS))
def test_each_reference_achieves_just_under_its_theoretical_occupancy(part_id):
    """Warps active on average (a counter) can't exceed what the resources allow, and the references'
    grids are large enough to come within a couple of percent of it."""
    found = measured(part_id)
    assert 0 <= found.theoretical_occupancy - found.achieved_occupancy < 2


def test_the_references_occupancies_and_limiters():
    found = {p: measured(p) for p in PARTS}
    assert {p: t.theoretical_occupancy for p, t in found.items()} == {
        "naive": 100.0, "tiled": 100.0, "boundary": 100.0, "rectangular": 100.0,
        "dynamic_smem": 50.0, "challenge": 12.5}
    # The challenge: 231 registers x 32 = 7,392, allocated as 7,424 a warp;
    # 16,384 registers per scheduler hold 2 warps, 8 in the SM: 2 blocks of 4.
    challenge = found["challenge"]
    assert challenge.occupancy_limiter == "registers"
    assert challenge.occupancy_limits == {"registers": 2, "shared memory": 13, "block size": 16, "blocks per SM": 32}
    assert challenge.occupancy_inputs == {"registers_per_thread": 231, "shared_bytes_per_block": 16640 + 1024,
                                          "threads_per_block": 128, "warps_per_sm": 64}
    assert found["dynamic_smem"].occupancy_limiter == "registers"


def test_registers_are_allocated_a_warp_at_a_time_in_units_of_256():
    """33 registers x 32 threads = 1,056, allocated as 1,280: 12 warps per scheduler, 48 in the SM, so 6 blocks
    of 256 threads (75 %); dividing the register file by 1,056 would wrongly allow 7."""
    launched = launches("naive")
    launched[0]["registers_per_thread"] = 33
    found = occupancy.occupancy_of_launches(launched, DEVICE)
    assert found.limits[occupancy.REGISTERS] == 6
    assert found.percent == 75.0


def test_the_launch_that_did_the_most_work_is_the_one_read():
    """A one-block helper kernel beside the product: the product's launch decides."""
    helper = {"name": "zero", "grid": [1, 1, 1], "block": [32, 1, 1], "registers_per_thread": 255,
              "static_shared_bytes": 0, "dynamic_shared_bytes": 0}
    found = measured("tiled", launched=[helper] + launches("tiled"))
    assert found.theoretical_occupancy == 100.0
    assert found.occupancy_inputs["threads_per_block"] == 1024


def _garbled(**changes) -> list:
    launched = launches("tiled")
    launched[0].update(changes)
    return launched


@pytest.mark.parametrize("launched", [
    None, "launches", [], ["launch"], [{}],
    _garbled(block="32x32"), _garbled(block=[32, 32, 0]), _garbled(block=[32, 32, 1, 1]),
    _garbled(registers_per_thread=True), _garbled(registers_per_thread=-1), _garbled(registers_per_thread=256),
    _garbled(registers_per_thread=32.0), _garbled(static_shared_bytes=-8192), _garbled(dynamic_shared_bytes=None),
    _garbled(block=[2048, 1, 1]),  # more threads than a block may have
    _garbled(registers_per_thread=255),  # 255 x 1024 registers: more than a block may have, it can't launch
    _garbled(dynamic_shared_bytes=232448),  # with the static 8 KiB, more than the opt-in maximum
    _garbled(grid=[2**40, 1, 1]),
], ids=repr)
def test_launch_records_that_cannot_be_read_leave_the_occupancy_empty(launched):
    found = traffic.with_occupancy(measured("tiled"), launched, DEVICE)
    assert (found.theoretical_occupancy, found.occupancy_limiter, found.occupancy_limits) == (None, None, {})
    assert found.achieved_occupancy == measured("tiled").achieved_occupancy  # the counters are kept


@pytest.mark.parametrize("device", [None, {}, {**DEVICE, "warpSize": 0}, {**DEVICE, "regsPerMultiprocessor": "64K"},
                                    {k: v for k, v in DEVICE.items() if k != "sharedMemPerMultiprocessor"}],
                         ids=repr)
def test_a_device_that_cannot_be_read_leaves_the_occupancy_empty(device):
    assert traffic.with_occupancy(counters_only("tiled"), launches("tiled"), device).theoretical_occupancy is None


# --- hints -------------------------------------------------------------------

@pytest.mark.parametrize("part_id", sorted(PARTS))
def test_no_reference_gets_a_hint(part_id):
    """Against itself, against its counters alone (as calibration keeps a reference), and with no reference:
    the challenge's low occupancy (12.5 %) is its design and must not be flagged either way."""
    found = measured(part_id)
    for reference in (found, counters_only(part_id), None):
        assert hints_for(part_id, TITLES[part_id], found, reference) == []


def test_scattered_global_loads_get_the_coalescing_hint():
    """The naive kernel with the row taken from threadIdx.x, in 32 x 32 blocks
    (tests/submissions/naive-uncoalesced): of the measured naive kernel's load
    requests, half are of M and half of N. A warp's 32 threads then read M
    Width floats apart, 32 sectors a request, and all read one element of N,
    1 sector: 16.5 sectors a request on average, where the measured kernel's
    are 2.0. L1 moves 32 bytes per sector."""
    metrics = counters("naive")
    requests = metrics[traffic.GLOBAL_LOAD_REQUESTS]
    assert metrics[traffic.GLOBAL_LOAD_SECTORS] / requests == 2.0
    metrics[traffic.GLOBAL_LOAD_SECTORS] = requests / 2 * 32 + requests / 2 * 1
    metrics[traffic.L1_LOAD_BYTES] = metrics[traffic.GLOBAL_LOAD_SECTORS] * 32
    hints = hints_for("naive", "Naive kernel", measured("naive", metrics), measured("naive"))
    assert len(hints) == 1
    assert hints[0].startswith("Naive kernel (naive): 16.5 sectors per global load request where a coalesced warp "
                               "of floats needs 4")
    assert "let threadIdx.x pick the column" in hints[0]
    assert "(4.1x; the reference 0.5x)" in hints[0]


def test_the_coalescing_threshold_sits_at_the_challenges_float4_loads():
    """16 sectors a request is a coalesced warp of float4 loads (the challenge measures exactly that)."""
    assert measured("challenge").sectors_per_request == counter_hints.UNCOALESCED_SECTORS


def test_bank_conflicts_on_every_shared_load_get_the_conflict_hint():
    """The tiled kernel reading a tile down a column (Bs[tx][k]): every warp's shared load hits one bank 32
    times, 31 extra passes. Built from the measured tiled kernel's shared loads; its stores keep their
    measured conflicts."""
    metrics = counters("tiled")
    reference = counter_hints.conflicts_per_instruction(measured("tiled"))
    assert reference < 0.01  # the tiled reference measures about 0.004
    metrics[traffic.SHARED_LOAD_CONFLICTS] = 31 * metrics[traffic.SHARED_LOAD_INSTRUCTIONS]
    conflicts = counter_hints.conflicts_per_instruction(measured("tiled", metrics))
    hints = hints_for("tiled", "Tiled kernel", measured("tiled", metrics), measured("tiled"))
    assert len(hints) == 1
    assert hints[0].startswith(f"Tiled kernel (tiled): {conflicts:.1f} bank conflicts per shared-memory load or store "
                               f"(the reference: {reference:.3f})")
    assert "As[ty][k], Bs[k][tx]" in hints[0] and "pad the tile" in hints[0]


def test_a_two_way_conflict_on_every_access_is_just_past_the_threshold():
    """Half the measured tiled loads and stores 2-way conflicted: 0.5 a instruction, no hint; every one
    2-way conflicted plus the measured conflicts: just above 1.0, a hint."""
    metrics = counters("tiled")
    shared = metrics[traffic.SHARED_LOAD_INSTRUCTIONS] + metrics[traffic.SHARED_STORE_INSTRUCTIONS]
    for extra, hinted in ((0.5, False), (1.0, True)):
        metrics[traffic.SHARED_LOAD_CONFLICTS] = counters("tiled")[traffic.SHARED_LOAD_CONFLICTS] + extra * shared
        assert bool(hints_for("tiled", "Tiled kernel", measured("tiled", metrics), None)) is hinted


def test_local_memory_traffic_gets_the_spill_hint():
    """The tiled kernel with its accumulator spilled: one float stored and reloaded per thread per tile
    phase, 4096^2 threads x 4096/32 phases x 8 bytes."""
    metrics = counters("tiled")
    assert metrics[traffic.LOCAL_LOAD_BYTES] == metrics[traffic.LOCAL_STORE_BYTES] == 0
    metrics[traffic.LOCAL_LOAD_BYTES] = metrics[traffic.LOCAL_STORE_BYTES] = 4096**2 * (4096 // 32) * 4
    hints = hints_for("tiled", "Tiled kernel", measured("tiled", metrics), measured("tiled"))
    assert len(hints) == 1
    assert hints[0].startswith("Tiled kernel (tiled): 17.2 GB of local-memory traffic per call")
    assert "-Xptxas -v" in hints[0] and "__launch_bounds__" in hints[0]


def test_registers_that_halve_occupancy_get_the_occupancy_hint():
    """The tiled kernel compiled to 40 registers a thread, as the dynamic_smem reference is with the same 32 x 32
    block: 1,280 registers a warp, 48 warps, one block of 32 warps, 50 % where the reference reaches 100 %."""
    launched = launches("tiled")
    launched[0]["registers_per_thread"] = launches("dynamic_smem")[0]["registers_per_thread"]
    found = measured("tiled", launched=launched)
    assert (found.theoretical_occupancy, found.occupancy_limiter) == (50.0, "registers")
    for reference, reaches in ((measured("tiled"), "100 %"), (counters_only("tiled"), "99.6 %")):
        hints = hints_for("tiled", "Tiled kernel", found, reference)
        assert len(hints) == 1
        assert hints[0].startswith(f"Tiled kernel (tiled): at most 50 % of an SM's warps can be resident where the "
                                   f"reference reaches {reaches}. The limit is registers: 40 registers per thread x "
                                   f"1024 threads leave room for 1 block per SM")
        assert "__launch_bounds__(1024, 2)" in hints[0]


def test_a_shared_memory_limit_is_named_with_its_bytes():
    """The tiled kernel with 256-thread blocks and a 64 KiB dynamic tile: 65,536 + 8,192 + 1,024 bytes a block,
    3 blocks of 8 warps in the SM's 228 KiB: 37.5 %."""
    launched = launches("tiled")
    launched[0].update(block=[16, 16, 1], dynamic_shared_bytes=65536)
    found = measured("tiled", launched=launched)
    assert (found.theoretical_occupancy, found.occupancy_limiter) == (37.5, "shared memory")
    hints = hints_for("tiled", "Tiled kernel", found, measured("tiled"))
    assert len(hints) == 1 and "74,752 bytes of shared memory per block" in hints[0]
    assert "smaller tile" in hints[0]


def test_without_a_reference_a_quarter_of_the_warps_is_the_bar():
    """The tiled kernel at 128 registers a thread in 256-thread blocks: 4,096 registers a warp, 16 warps, 2 blocks:
    25 %. Its warps wait as the measured tiled kernel's do (29 % of their cycles), so it is flagged; the
    challenge reference, at 12.5 % and waiting 10 %, is not (test_no_reference_gets_a_hint)."""
    launched = launches("tiled")
    launched[0].update(block=[16, 16, 1], registers_per_thread=128)
    found = measured("tiled", launched=launched)
    assert found.theoretical_occupancy == counter_hints.LOW_OCCUPANCY_PERCENT
    hints = hints_for("tiled", "Tiled kernel", found, None)
    assert len(hints) == 1 and "at most 25 % of an SM's warps" in hints[0] and "128 registers per thread" in hints[0]
    launched[0]["registers_per_thread"] = 64  # 2,048 a warp: 32 warps, 4 blocks: 50 %
    assert hints_for("tiled", "Tiled kernel", measured("tiled", launched=launched), None) == []


def test_a_challenge_kernel_is_measured_against_its_reference():
    """At the reference's 12.5 %, no hint: 255 registers (8,192 a warp) still fit 2 blocks of 128 threads, and
    256 threads a block at 231 registers fit 1 block of 8 warps. Below it, a hint: 100 KiB of dynamic shared
    memory beside the reference's 16,640 static bytes (120,064 a block) fit 1 block of 4 warps, 6.25 %."""
    reference = measured("challenge")
    for change in ({"registers_per_thread": 255}, {"block": [256, 1, 1]}):
        launched = launches("challenge")
        launched[0].update(change)
        found = measured("challenge", launched=launched)
        assert found.theoretical_occupancy == 12.5
        assert hints_for("challenge", TITLES["challenge"], found, reference) == []
    launched = launches("challenge")
    launched[0]["dynamic_shared_bytes"] = 100 * 1024
    found = measured("challenge", launched=launched)
    assert (found.theoretical_occupancy, found.occupancy_limiter) == (6.25, "shared memory")
    hints = hints_for("challenge", TITLES["challenge"], found, reference)
    assert len(hints) == 1 and "where the reference reaches 12.5 %. The limit is shared memory" in hints[0]


def test_a_block_that_no_sm_can_hold_gives_no_occupancy():
    """200 registers a thread: 6,400 a warp, 2 warps per scheduler, 8 in the SM. A 320-thread block (10 warps)
    stays within the 65,536 registers a block may have, yet no SM can hold it."""
    launched = launches("challenge")
    launched[0].update(block=[320, 1, 1], registers_per_thread=200)
    assert occupancy.occupancy_of_launches(launched, DEVICE) is None
    launched[0]["block"] = [256, 1, 1]
    assert occupancy.occupancy_of_launches(launched, DEVICE).percent == 12.5
