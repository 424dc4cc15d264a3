"""How many blocks of a kernel fit on one SM at once, from its launch record.

The same arithmetic as CUDA's occupancy calculator (cuda_occupancy.h): each
resource of the SM (registers, shared memory, warp slots, block slots)
allows some number of resident blocks, and the fewest wins. Launch records
come from the process that runs the student's code, so every figure is
checked before it is used; a record that cannot be read gives None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# Resource names, in the order that breaks a tie for the limiter: the ones
# a student sets directly in the kernel come before the launch's shape.
REGISTERS = "registers"
SHARED_MEMORY = "shared memory"
BLOCK_SIZE = "block size"
BLOCKS_PER_SM = "blocks per SM"
LIMITERS = (REGISTERS, SHARED_MEMORY, BLOCK_SIZE, BLOCKS_PER_SM)

# Registers are handed to a warp in units of 256 (32 threads x 8), on every
# GPU since Kepler.
REGISTER_UNIT = 256
# The register file is split among the SM's four schedulers and a warp's
# registers come from one of them, so warps are counted in fours (the
# calculator's "warp allocation granularity"; 4 since Maxwell).
WARP_GRANULARITY = 4
# Shared memory is handed to a block in units of 128 bytes (Volta onwards).
SHARED_UNIT = 128
# Beyond any GPU's figure: a larger value in a record is garbage.
_MAX_INT = 2**31 - 1
_MAX_REGISTERS_PER_THREAD = 255

DEVICE_KEYS = ("regsPerMultiprocessor", "maxThreadsPerMultiProcessor", "maxBlocksPerMultiProcessor",
               "sharedMemPerMultiprocessor", "reservedSharedMemPerBlock", "warpSize", "sharedMemPerBlockOptin")


@dataclass(frozen=True)
class Occupancy:
    """One launch's theoretical occupancy and what limits it."""

    percent: float  # resident warps over the SM's warp slots, x 100
    limiter: str  # one of LIMITERS: the resource allowing the fewest blocks
    limits: dict  # resource -> blocks per SM it allows
    registers_per_thread: int
    shared_bytes_per_block: int  # static + dynamic + the driver's reserve, rounded up as allocated
    threads_per_block: int
    warps_per_sm: int  # the SM's warp slots


def _int(value, low: int, high: int = _MAX_INT) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def _dims(value) -> Optional[list]:
    if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 3:
        return None
    dims = [_int(v, 1) for v in value]
    return None if None in dims else dims


def _product(dims: list) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def _device(device) -> Optional[dict]:
    if not isinstance(device, dict):
        return None
    found = {key: _int(device.get(key), 0 if key == "reservedSharedMemPerBlock" else 1) for key in DEVICE_KEYS}
    if None in found.values() or found["maxThreadsPerMultiProcessor"] < found["warpSize"]:
        return None
    return found


def occupancy_of(launch, device) -> Optional[Occupancy]:
    """The occupancy of one launch record on the device the harness described; None if either can't be read
    or the launch could not run (more registers or shared memory per block than the device has)."""
    dev = _device(device)
    if dev is None or not isinstance(launch, dict):
        return None
    block = _dims(launch.get("block"))
    regs = _int(launch.get("registers_per_thread"), 0, _MAX_REGISTERS_PER_THREAD)
    static = _int(launch.get("static_shared_bytes"), 0)
    dynamic = _int(launch.get("dynamic_shared_bytes"), 0)
    if block is None or regs is None or static is None or dynamic is None:
        return None
    threads = _product(block)
    warp_slots = dev["maxThreadsPerMultiProcessor"] // dev["warpSize"]
    warps = -(-threads // dev["warpSize"])
    most_threads = _int(device.get("maxThreadsPerBlock"), 1)
    if warps > warp_slots or (most_threads and threads > most_threads) \
            or static + dynamic > dev["sharedMemPerBlockOptin"]:
        return None

    limits = {}
    regs_per_warp = _round_up(regs * dev["warpSize"], REGISTER_UNIT)
    if regs_per_warp:
        if regs_per_warp * warps > dev["regsPerMultiprocessor"]:
            return None
        warps_by_regs = dev["regsPerMultiprocessor"] // regs_per_warp // WARP_GRANULARITY * WARP_GRANULARITY
        limits[REGISTERS] = warps_by_regs // warps
    shared = _round_up(static + dynamic + dev["reservedSharedMemPerBlock"], SHARED_UNIT)
    limits[SHARED_MEMORY] = dev["sharedMemPerMultiprocessor"] // shared if shared else dev["maxBlocksPerMultiProcessor"]
    limits[BLOCK_SIZE] = warp_slots // warps
    limits[BLOCKS_PER_SM] = dev["maxBlocksPerMultiProcessor"]

    blocks = min(limits.values())
    if blocks == 0:  # a block needs more of a resource than an SM has free: the launch fails
        return None
    limiter = next(name for name in LIMITERS if limits.get(name) == blocks)
    return Occupancy(percent=100.0 * blocks * warps / warp_slots, limiter=limiter, limits=limits,
                     registers_per_thread=regs, shared_bytes_per_block=shared, threads_per_block=threads,
                     warps_per_sm=warp_slots)


def largest_launch(launches) -> Optional[dict]:
    """The launch that did the most work (grid size x block size), the first of equals; None if none can be read."""
    best, best_work = None, 0
    for launch in launches if isinstance(launches, list) else []:
        if not isinstance(launch, dict):
            continue
        grid, block = _dims(launch.get("grid")), _dims(launch.get("block"))
        work = _product(grid) * _product(block) if grid and block else 0
        if work > best_work:
            best, best_work = launch, work
    return best


def occupancy_of_launches(launches, device) -> Optional[Occupancy]:
    """The occupancy of a call's kernel that did the most work; None when it can't be told."""
    launch = largest_launch(launches)
    return occupancy_of(launch, device) if launch is not None else None
