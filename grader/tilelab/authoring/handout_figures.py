"""The handout's figures, drawn from the assignment's own numbers.

tile-phases    one tile of P, the strips of M and N it needs, and its phases;
boundary-grid  the blocks and guarded threads over P when the tile does not divide it;
dynamic-tiles  the tile that fits each shared-memory limit of the dynamic part.
Each is a frozen spec of numbers (assignment.yaml, the starter's constants)
and a drawing of it: the tests check the numbers, and the same spec always
gives the same PNG bytes.
"""

from __future__ import annotations

import base64
import functools
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..outputs.roofline_plot import one_figure_at_a_time
from ..spec.assignment import Assignment, Case, Part
from .handout_code import starter_constants

FLOAT_BYTES = 4
# cudaDeviceProp on every GPU since compute capability 2.0: what a case that
# lowers only sharedMemPerBlock leaves of the other two limits.
DEVICE_MAX_THREADS = 1024
DEVICE_MAX_DIM = (1024, 1024)
# chooseTileShape in solutions/dynamic_smem.cu stops at T = 32 (its hint says "at most 32").
DYNAMIC_MAX_TILE = 32
# More phases or blocks than this and the drawing's tiles get too small to label.
MOST_PHASES_DRAWN = 6
MOST_BLOCKS_DRAWN = 4
DPI = 200
PHASE_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2")



@dataclass(frozen=True)
class TilePhases:
    """Block (bx, by) of a Width x Width product with T x T tiles."""
    part: str
    tile: int
    width: int
    bx: int
    by: int

    @property
    def phases(self) -> int:
        return self.width // self.tile


@dataclass(frozen=True)
class BoundaryGrid:
    """The grid of T x T blocks over a Width x Width P, Width not a multiple of T."""
    part: str
    tile: int
    width: int

    @property
    def blocks_per_side(self) -> int:
        return -(-self.width // self.tile)

    @property
    def blocks(self) -> int:
        return self.blocks_per_side ** 2

    @property
    def boundary_blocks(self) -> int:
        """Blocks in the last row or column of the grid, which reach past P's edge."""
        return 2 * self.blocks_per_side - 1 if self.width % self.tile else 0

    @property
    def threads(self) -> int:
        return (self.blocks_per_side * self.tile) ** 2

    @property
    def guarded(self) -> int:
        """Threads with no element of P: they must not store."""
        return self.threads - self.width ** 2

    @property
    def last_tile_inside(self) -> int:
        """Columns of M (rows of N) inside the matrix in the last phase's tile."""
        return self.width - (self.blocks_per_side - 1) * self.tile


@dataclass(frozen=True)
class TileShape:
    """The tile chooseTileShape picks for one set of limits and one k."""
    limit: int      # prop.sharedMemPerBlock, bytes
    case: str       # the case it is drawn for: "33 × 17 × 65"
    k: int
    width: int      # T
    depth: int      # S
    device: bool = False  # the limit is the device's own, not one a case lowers it to
    max_threads: int = DEVICE_MAX_THREADS

    @property
    def mds_bytes(self) -> int:
        return self.width * self.depth * FLOAT_BYTES

    @property
    def nds_bytes(self) -> int:
        return self.depth * self.width * FLOAT_BYTES

    @property
    def bytes(self) -> int:
        return self.mds_bytes + self.nds_bytes


@dataclass(frozen=True)
class DynamicTiles:
    part: str
    shapes: tuple


@dataclass(frozen=True)
class Figure:
    name: str      # the file's middle name: handout.<name>.png
    part: str      # the part it illustrates
    alt: str
    caption: str
    spec: object
    shows: str  # what the text just before it says of it: "Figure 2 shows <shows>."

    def file_name(self, stem: str) -> str:
        return f"{stem}.{self.name}.png"


# --- the numbers ----------------------------------------------------------------------


def tile_shape(limit: int, k: int, case: str, device: bool = False, max_threads: int = DEVICE_MAX_THREADS,
               max_dim: tuple = DEVICE_MAX_DIM) -> TileShape:
    """The rule of the reference chooseTileShape: the largest T (at most 32)
    whose T x T block and pair of T x T tiles fit the limits, then as many
    T-wide slices per phase as the shared memory holds and k needs."""
    def fits(t: int) -> bool:
        return t * t <= max_threads and t <= min(max_dim) and 2 * t * t * FLOAT_BYTES <= limit

    width = 1
    while width < DYNAMIC_MAX_TILE and fits(width + 1):
        width += 1
    slice_bytes = 2 * width * width * FLOAT_BYTES
    slices = min(limit // slice_bytes, -(-k // width))
    return TileShape(limit, case, k, width, slices * width, device, max_threads)


def _widths(part: Part) -> list:
    return [c.j for c in part.cases["public"]]


def _size(case: Case) -> str:
    return f"{case.j} × {case.k} × {case.l}"


def tile_phases_spec(assignment: Assignment, root: Path) -> Optional[TilePhases]:
    """The first square part with shared-memory tiles whose public sizes are
    all whole tiles, at its largest public Width of a few phases."""
    for part in assignment.parts:
        tile = starter_constants(root, part).get("TILE_WIDTH") if part.signature == "square" else None
        if not tile or part.shared_memory != "required" or any(w % tile for w in _widths(part)):
            continue
        widths = [w for w in _widths(part) if 2 <= w // tile <= MOST_PHASES_DRAWN]
        if widths:
            n = max(widths) // tile
            return TilePhases(part.id, tile, max(widths), bx=min(2, n - 1), by=min(1, n - 1))
    return None


def boundary_grid_spec(assignment: Assignment, root: Path) -> Optional[BoundaryGrid]:
    """The first square part with tiles and a public Width that is not a
    multiple of them, at the size whose last block is nearest half inside P
    (both kinds of thread show there), the larger on a tie."""
    for part in assignment.parts:
        tile = starter_constants(root, part).get("TILE_WIDTH") if part.signature == "square" else None
        if not tile:
            continue
        widths = [w for w in _widths(part) if w > tile and w % tile and -(-w // tile) <= MOST_BLOCKS_DRAWN]
        if widths:
            best = min(widths, key=lambda w: (abs(w % tile / tile - 0.5), -w))
            return BoundaryGrid(part.id, tile, best)
    return None


def dynamic_tiles_spec(assignment: Assignment, root: Path, ta: bool) -> Optional[DynamicTiles]:
    """The dynamic part's tile at the device's own limit (for its largest
    timed k) and at each sharedMemPerBlock its cases lower to: public cases
    only in the student edition, every case set in the TA edition."""
    part = next((p for p in assignment.parts if p.shared_memory == "dynamic_only"), None)
    # The starter's DEFAULT_DYNAMIC_SMEM_LIMIT, 48 KiB: what every current GPU reports as sharedMemPerBlock.
    default = starter_constants(root, part).get("DEFAULT_DYNAMIC_SMEM_LIMIT") if part else None
    if part is None or default is None:
        return None
    timed = max(part.cases["timing"], key=lambda c: c.k, default=None)
    shapes = []
    # At the device's own limit, once for a k that fills the buffer and once
    # for the first public case's, which shows S stopping where k does.
    if timed is not None:
        shapes.append(tile_shape(default, timed.k, f"{_size(timed)}, timed", device=True))
    plain = next((c for c in part.cases["public"] if not c.props), None)
    if plain is not None:
        shapes.append(tile_shape(default, plain.k, _size(plain), device=True))
    seen = set()
    for name in ("public", "hidden", "memcheck", "racecheck") if ta else ("public",):
        for case in part.cases[name]:
            limit = case.props.get("sharedMemPerBlock")
            # Only a byte count: "optin" is whatever the grading GPU allows.
            if isinstance(limit, int) and set(case.props) == {"sharedMemPerBlock"} and limit not in seen:
                seen.add(limit)
                shapes.append(tile_shape(limit, case.k, _size(case)))
    shapes.sort(key=lambda s: -s.limit)  # stable: the device's own rows stay in the order above
    return DynamicTiles(part.id, tuple(shapes)) if shapes else None


def _bytes(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 8192 and n % 1024 == 0 else f"{n:,} bytes"


def handout_figures(assignment: Assignment, root: Path, ta: bool) -> list:
    """The figures of an edition, in the order of the parts they illustrate."""
    figures = []
    phases = tile_phases_spec(assignment, root)
    if phases:
        t, w, n = phases.tile, phases.width, phases.phases
        figures.append(Figure(
            "tile-phases", phases.part,
            f"One {t} × {t} tile of P, the strips of M and N it needs, and the {n} phases that load them",
            f"Width = {w}, TILE_WIDTH = {t}. Block ({phases.bx}, {phases.by}) computes the {t} × {t} tile of P in "
            f"rows {phases.by * t}–{phases.by * t + t - 1} and columns {phases.bx * t}–{phases.bx * t + t - 1}. It "
            f"needs the {t} rows of M and the {t} columns of N through that tile, and takes them one tile at a "
            f"time, in {w} / {t} = {n} phases: in phase p every thread copies one element of M's tile "
            f"({phases.by}, p) into Mds and one of N's tile (p, {phases.bx}) into Nds (tiles counted as (row, "
            f"column)), the block waits at "
            f"a barrier, each thread adds its {t} products, and the block waits again before the next phase "
            f"overwrites the tiles. Each element loaded from global memory serves {t} threads.",
            phases, shows=f"how one block computes its {t} × {t} tile of P at Width = {w}: the strips of M and N "
                          f"it needs, and the {n} phases in which it stages them in Mds and Nds, one tile of "
                          f"each at a time"))
    grid = boundary_grid_spec(assignment, root)
    if grid:
        t, w, n = grid.tile, grid.width, grid.blocks_per_side
        figures.append(Figure(
            "boundary-grid", grid.part,
            f"A {n} × {n} grid of {t} × {t} blocks over a {w} × {w} P, with its boundary blocks and guarded threads",
            f"Width = {w}, TILE_WIDTH = {t}: ({w} + {t} − 1) / {t} = {n} blocks per side, a {n} × {n} grid of "
            f"{grid.blocks} blocks, {grid.threads:,} threads for {w * w:,} elements of P. The {grid.boundary_blocks} "
            f"boundary blocks reach past P's edge; in them {grid.guarded:,} threads have no element of P. They "
            f"still take part in every phase and barrier, load 0.0f where their element of M or N lies outside "
            f"the matrix, and store nothing. There are {n} phases, and in the last one only {grid.last_tile_inside} "
            f"of the tile's {t} columns of M (rows of N) lie inside.",
            grid, shows=f"what changes when Width = {w} is not a multiple of TILE_WIDTH = {t}: the blocks at the "
                        f"edge reach past P, and their threads outside it must load 0.0f and store nothing"))
    dynamic = dynamic_tiles_spec(assignment, root, ta)
    if dynamic:
        figures.append(Figure(
            "dynamic-tiles", dynamic.part,
            "The tile that fits each shared-memory limit, and Mds and Nds in the one buffer",
            f"The tile chooseTileShape picks for each limit of prop.sharedMemPerBlock "
            f"({'every case' if ta else 'the public cases'}, and the device's own): the largest T up to "
            f"{DYNAMIC_MAX_TILE} whose T × T block fits prop.maxThreadsPerBlock ({DEVICE_MAX_THREADS} here) and "
            f"whose pair of T × T tiles fits the limit, then S = T × slices, as many slices as fit and k needs. "
            f"Mds (T × S floats) starts at the buffer; Nds (S × T floats) starts T × S floats after it.",
            dynamic, shows="the tile that fits each limit of prop.sharedMemPerBlock the cases give, and how Mds "
                           "and Nds share the one dynamic buffer; the table under it gives the same numbers"))
    return figures


def _limit_words(shape: TileShape) -> str:
    return _bytes(shape.limit) + (", the device's own" if shape.device else "")


def figure_view(figure: Figure, number: int, stem: str) -> dict:
    """What the templates show of a figure; the dynamic one's numbers also as
    table rows, so the text says what the picture shows."""
    rows = shape_rows(figure.spec) if isinstance(figure.spec, DynamicTiles) else []
    return {"number": number, "name": figure.name, "part": figure.part, "file": figure.file_name(stem),
            "alt": figure.alt, "caption": figure.caption, "rows": rows,
            # The text refers to each figure by its number, just before it.
            "mention": f"Figure {number} shows {figure.shows}."}


def shape_rows(spec: DynamicTiles) -> list:
    return [{"limit": _limit_words(s), "case": s.case, "k": s.k, "width": s.width, "depth": s.depth,
             "mds": f"{s.mds_bytes:,}", "nds": f"{s.nds_bytes:,}", "free": f"{s.limit - s.bytes:,}"}
            for s in spec.shapes]


# --- the drawings ---------------------------------------------------------------------


def _new_figure(width_in: float, height_in: float):
    # Figure and the Agg canvas directly, not pyplot, as in outputs/roofline_plot.py.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    figure = MplFigure(figsize=(width_in, height_in), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def _box(axes, x, y, w, h, **style):
    from matplotlib.patches import Rectangle

    axes.add_patch(Rectangle((x, y), w, h, **style))


def _draw_tile_phases(spec: TilePhases):
    t, w, n, bx, by = spec.tile, spec.width, spec.phases, spec.bx, spec.by
    gap = 0.22 * w
    figure = _new_figure(5.6, 5.85)
    axes = figure.add_axes((0.01, 0.01, 0.98, 0.98))
    axes.set_xlim(-0.06 * w, 2 * w + gap + 0.04 * w)
    axes.set_ylim(2 * w + gap + 0.1 * w, -0.1 * w)  # rows grow downward, as in the matrices
    axes.set_aspect("equal")
    axes.axis("off")
    lower = w + gap
    origins = {"N": (lower, 0), "M": (0, lower), "P": (lower, lower)}
    for name, (x0, y0) in origins.items():
        _box(axes, x0, y0, w, w, facecolor="#f7f7f7", edgecolor="#333333", linewidth=1.2)
        for i in range(1, n):
            axes.plot([x0 + i * t] * 2, [y0, y0 + w], color="#bbbbbb", linewidth=0.6)
            axes.plot([x0, x0 + w], [y0 + i * t] * 2, color="#bbbbbb", linewidth=0.6)
    for p in range(n):
        colour = PHASE_COLOURS[p % len(PHASE_COLOURS)]
        for name, (col, row) in (("M", (p, by)), ("N", (bx, p))):
            x0, y0 = origins[name]
            _box(axes, x0 + col * t, y0 + row * t, t, t, facecolor=colour, alpha=0.8, edgecolor="white")
            axes.text(x0 + (col + 0.5) * t, y0 + (row + 0.5) * t, f"phase\n{p}", ha="center", va="center",
                      fontsize=8.5, color="white", fontweight="bold")
    _box(axes, lower + bx * t, lower + by * t, t, t, facecolor="#222222", edgecolor="white")
    axes.text(lower + (bx + 0.5) * t, lower + (by + 0.5) * t, f"block\n({bx}, {by})", ha="center", va="center",
              fontsize=8.5, color="white", fontweight="bold")
    axes.text(w / 2, lower + w + 0.05 * w, f"M   ({w} × {w})", ha="center", va="top", fontsize=10)
    axes.text(lower + w / 2, -0.03 * w, f"N   ({w} × {w})", ha="center", va="bottom", fontsize=10)
    axes.text(lower + w / 2, lower + w + 0.05 * w, f"P = M N   ({w} × {w})", ha="center", va="top", fontsize=10)
    lines = [f"TILE_WIDTH = {t}: {n} phases", f"for block ({bx}, {by})", "block: (blockIdx.x, blockIdx.y)",
             "tile: (row, column), in tiles"]
    axes.text(0, 0, "\n".join(lines), ha="left", va="top", fontsize=9.5)
    step = min(0.13 * w, 0.68 * w / n)
    for p in range(n):
        loads = f"phase {p}: Mds ← tile ({by}, {p}) of M\n             Nds ← tile ({p}, {bx}) of N"
        axes.text(0, 0.32 * w + p * step, loads, ha="left", va="top", fontsize=8.5,
                  color=PHASE_COLOURS[p % len(PHASE_COLOURS)])
    return figure


def _draw_boundary_grid(spec: BoundaryGrid):
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    t, w, n = spec.tile, spec.width, spec.blocks_per_side
    side = n * t
    index = np.arange(side)
    inside = (index[:, None] < w) & (index[None, :] < w)
    boundary_block = ((index[:, None] // t) == n - 1) | ((index[None, :] // t) == n - 1)
    kinds = np.where(inside, np.where(boundary_block, 1, 0), 2)
    colours = ("#9ecae1", "#fdae6b", "#e8e8e8")
    # Column numbers and their label both above the grid, where blockIdx.x counts
    # along them; nothing below it, so the figure ends where the grid does.
    figure = _new_figure(6.2, 4.3)
    axes = figure.add_axes((0.1, 0.03, 0.56, 0.82))
    axes.imshow(kinds, cmap=ListedColormap(colours), vmin=0, vmax=2, extent=(0, side, side, 0),
                interpolation="nearest")
    for i in range(n + 1):
        axes.plot([i * t] * 2, [0, side], color="#222222", linewidth=1.6)
        axes.plot([0, side], [i * t] * 2, color="#222222", linewidth=1.6)
    axes.plot([w, w, 0], [0, w, w], color="#08306b", linewidth=2.2)
    for by in range(n):
        for bx in range(n):
            axes.text(bx * t + 0.04 * t, by * t + 0.04 * t, f"block ({bx}, {by})", ha="left", va="top",
                      fontsize=7.5, color="#222222")
    ticks = sorted({i * t for i in range(n + 1)} | {w})
    axes.set_xticks(ticks)
    axes.set_yticks(ticks)
    axes.tick_params(labelsize=7.5)
    axes.set_xlim(0, side)
    axes.set_ylim(side, 0)
    axes.xaxis.tick_top()
    axes.xaxis.set_label_position("top")
    axes.set_xlabel("column of P (blockIdx.x × TILE_WIDTH + threadIdx.x)", fontsize=7.5)
    axes.set_ylabel("row of P (blockIdx.y × TILE_WIDTH + threadIdx.y)", fontsize=7.5)
    axes.set_title(f"Width = {w}, TILE_WIDTH = {t}: {n} × {n} blocks", fontsize=9, pad=8)
    handles = [Patch(facecolor=colours[0], edgecolor="#666666", label="in P, interior block"),
               Patch(facecolor=colours[1], edgecolor="#666666", label="in P, boundary block"),
               Patch(facecolor=colours[2], edgecolor="#666666", label="outside P: no element,\nmust not store"),
               Patch(facecolor="none", edgecolor="#08306b", linewidth=2.2, label=f"edge of P ({w} × {w})")]
    figure.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.69, 0.86), fontsize=7.5, frameon=False)
    last = (n - 1) * t
    summary = (f"{spec.blocks} blocks, {spec.boundary_blocks} at the boundary\n{spec.threads:,} threads:\n"
               f"  {w * w:,} compute an element of P\n  {spec.guarded:,} must not store\n\n"
               f"Last of {n} phases: a tile covers\ncolumns {last}–{last + t - 1} of M (rows of N);\n"
               f"{last + spec.last_tile_inside}–{last + t - 1} lie outside, so those\nloads give 0.0f instead")
    figure.text(0.69, 0.42, summary, ha="left", va="top", fontsize=7.5)
    return figure


def _draw_dynamic_tiles(spec: DynamicTiles):
    rows = len(spec.shapes)
    figure = _new_figure(7.0, 1.05 * rows + 0.1)
    largest = max(s.width for s in spec.shapes)
    height = 1.0 / rows
    for r, s in enumerate(spec.shapes):
        top = 1.0 - r * height
        # The block: T x T threads, to one scale for every row.
        block = figure.add_axes((0.01, top - height * 0.9, 0.1, height * 0.78))
        block.set_xlim(0, largest)
        block.set_ylim(largest, 0)
        block.set_aspect("equal")
        block.axis("off")
        _box(block, 0, 0, largest, largest, facecolor="none", edgecolor="#bbbbbb", linestyle="--", linewidth=0.8)
        _box(block, 0, 0, s.width, s.width, facecolor="#4e79a7", edgecolor="#222222", linewidth=0.8)
        block.text(largest / 2, largest * 1.03, f"T = {s.width}", ha="center", va="top", fontsize=7.5)
        # The buffer: the limit in bytes, Mds then Nds, then what is left.
        bar = figure.add_axes((0.15, top - height * 0.8, 0.82, height * 0.26))
        bar.set_xlim(0, s.limit)
        bar.set_ylim(0, 1)
        bar.set_yticks([])
        for spine in ("top", "right", "left"):
            bar.spines[spine].set_visible(False)
        _box(bar, 0, 0, s.mds_bytes, 1, facecolor="#4e79a7", edgecolor="white")
        _box(bar, s.mds_bytes, 0, s.nds_bytes, 1, facecolor="#f28e2b", edgecolor="white")
        if s.bytes < s.limit:
            _box(bar, s.bytes, 0, s.limit - s.bytes, 1, facecolor="#f4f4f4", edgecolor="#bbbbbb", hatch="///")
            bar.text((s.bytes + s.limit) / 2, 0.5, f"unused: {s.limit - s.bytes:,} bytes", ha="center",
                     va="center", fontsize=7, color="#444444",
                     bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5})
        for x0, size, label in ((0, s.mds_bytes, f"Mds: {s.width} × {s.depth}"),
                                (s.mds_bytes, s.nds_bytes, f"Nds: {s.depth} × {s.width}")):
            bar.text(x0 + size / 2, 0.5, label, ha="center", va="center", fontsize=7, color="white",
                     fontweight="bold", clip_on=True)
        ticks = sorted({0, s.mds_bytes, s.bytes, s.limit})
        bar.set_xticks(ticks)
        bar.set_xticklabels([f"{x:,}" for x in ticks], fontsize=6.5)
        figure.text(0.15, top - height * 0.08, f"sharedMemPerBlock = {_limit_words(s)} (case {s.case}, k = {s.k})",
                    ha="left", va="top", fontsize=7.5, fontweight="bold")
        figure.text(0.15, top - height * 0.3,
                    f"T = {s.width}, S = {s.depth}: Mds + Nds = {s.bytes:,} bytes (floats, 4 bytes each); "
                    f"Nds = tiles + {s.width * s.depth:,} floats",
                    ha="left", va="top", fontsize=7.5)
    return figure


_DRAWINGS = {TilePhases: _draw_tile_phases, BoundaryGrid: _draw_boundary_grid, DynamicTiles: _draw_dynamic_tiles}


@functools.lru_cache(maxsize=None)
@one_figure_at_a_time
def png(spec) -> bytes:
    """The PNG of a figure's spec; the same spec always gives the same bytes."""
    figure = _DRAWINGS[type(spec)](spec)
    out = io.BytesIO()
    # No "Software" entry: the file's bytes then depend on the drawing alone.
    figure.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
    return out.getvalue()


def data_uri(figure: Figure) -> str:
    return "data:image/png;base64," + base64.b64encode(png(figure.spec)).decode("ascii")
