"""Turning failed cases into advice a student can act on.

The verifier says which elements of which case are wrong; these rules look
at the pattern across cases (only sizes that are not multiples of the tile
fail, only cases with j, k and l all different fail, elements never
written...) and name the likely mistake in the terms of the lab.
"""

from __future__ import annotations

from typing import Optional

from .model import CaseResult

STATUS_HINTS = {
    "no_kernel": "Your launcher returned without launching a kernel: launch it with kernel<<<grid, block>>>(...).",
    "launch_error": "A kernel launch was rejected: check the block size (at most 1024 threads in all), the grid, "
                    "and the shared memory the launch asks for.",
    "kernel_fault": "A kernel crashed on the GPU (for example an illegal memory access): an index runs past an "
                    "array. The memcheck stage below shows the kernel, the access and the thread.",
    "crash": "The process crashed on the host (segmentation fault or abort) inside your launcher: host code "
             "must never dereference the device pointers M, N or P.",
    "early_exit": "Your code called exit(): a launcher must return normally, every time it is called.",
    "not_implemented": "A TODO(student) stub was reached: this part is not written yet.",
    "timeout": "The part did not finish in time: a kernel that never ends (a loop whose condition never "
               "changes?) or one that is far too slow.",
}


# Statuses of a run that stopped: the kernel crashed, hung or exited.
STOPPED_STATUSES = frozenset(STATUS_HINTS) - {"not_implemented"}
TILE_WIDTHS = (32, 16)  # the tile widths students pick; a size off both is where a missing guard shows


def _not_multiple(case: CaseResult, tile: int) -> bool:
    return any(d % tile for d in (case.j, case.k, case.l))


def off_tile_width(failing: list, passing: list) -> Optional[int]:
    """The tile width (TILE_WIDTHS) at which only the sizes off it fail while
    the sizes on it pass, or None: a boundary guard or the grid's rounding."""
    if not passing:
        return None
    for tile in TILE_WIDTHS:
        if all(_not_multiple(c, tile) for c in failing) and not any(_not_multiple(c, tile) for c in passing):
            return tile
    return None


def only_distinct_dims_fail(failing: list, passing: list) -> bool:
    """Only cases whose j, k and l all differ fail: an index uses the wrong dimension."""
    return (bool(failing) and all(len({c.j, c.k, c.l}) == 3 for c in failing)
            and any(len({c.j, c.k, c.l}) < 3 for c in passing))


def _boundary_hint(tile: int, tiled: bool) -> str:
    if tiled:
        return (f"Only sizes that are not a multiple of {tile} fail: check the boundary handling. Every load "
                "outside M or N must store 0 in the tile, the store to P needs its own bounds check, and the "
                "grid and the number of phases must be rounded up ((n + T - 1) / T, not n / T).")
    # A part without tiles fails at the edge of its blocks, not of tiles.
    return (f"Only sizes that are not a multiple of {tile} fail: the grid must cover every element of P. Round "
            "the number of blocks up ((Width + BLOCK - 1) / BLOCK, not Width / BLOCK, which drops the last, "
            "partial block), and let each thread compute and store only when its row and column are inside P.")


def case_hints(cases: list, tiled: bool = True) -> list:
    """Hints from the pattern of failing and passing cases that ran; `tiled`:
    the part stages tiles in shared memory (the naive part does not)."""
    hints = []
    ran = [c for c in cases if c.ran]
    failing = [c for c in ran if not c.passed]
    passing = [c for c in ran if c.passed]
    # A case the harness died in never "ran" to completion, but its status
    # (crash, timeout, early exit...) is the most useful thing to say.
    for status in dict.fromkeys(c.status for c in cases if not c.passed):
        if status in STATUS_HINTS:
            hints.append(STATUS_HINTS[status])
    numeric = [c for c in failing if c.status == "ok"]
    if not numeric:
        return hints
    tile = off_tile_width(numeric, passing)
    if tile is not None:
        hints.append(_boundary_hint(tile, tiled))
    if only_distinct_dims_fail(numeric, passing):
        hints.append(
            "Only cases whose j, k and l all differ fail: check which dimension each index uses. M is j x k "
            "(row stride k), N is k x l (row stride l), P is j x l (row stride l); rows are bounded by j, "
            "columns by l and the dot product by k."
        )
    if any(c.unwritten for c in numeric):
        hints.append(
            "Some elements of P were never written: does the grid cover all of P (round the block count up), "
            "and does every thread inside P reach its store?"
        )
    if any(c.nan for c in numeric):
        hints.append("NaN in P: the kernel used values that were never written, such as tile elements left "
                     "unset in shared memory or reads past the end of an input.")
    if any("outside P" in r for c in numeric for r in c.reasons):
        hints.append("The kernel wrote outside P: guard the store with row < rows && col < columns.")
    if any("changed its input" in r for c in numeric for r in c.reasons):
        hints.append("The kernel wrote into M or N: the inputs are read-only.")
    if any(c.exact and c.wrong for c in numeric):
        hints.append("Even a small-integer case is wrong, where every summation order is exact: an index or a "
                     "bound is wrong, not the rounding.")
    if not passing and numeric and all(c.wrong for c in numeric):
        hints.append("Every case is wrong: check the index formulas. Element (r, c) of a row-major matrix "
                     "with C columns is at r * C + c.")
    return hints
