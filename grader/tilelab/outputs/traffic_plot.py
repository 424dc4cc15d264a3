"""The hierarchical roofline of a grading whose parts' counters were read.

One small panel per timed part, all on the same log-log axes: the FP32 roof,
a slope for DRAM and for each on-chip level the GPU's measurement has (L2,
shared memory), and the part at its achieved GFLOP/s placed at its measured
intensity at each level (traffic_view.py reads the same figures into the
report's table). A level's marker has its roof's colour, so a point is read
against the slope of its colour; the reference solution's points are the
hollow ones. One panel per part because six parts' five levels each, with
their references, overlap past reading in a single panel (the textbook
parts all sit near 9,000 GFLOP/s at the same intensities).

Called by roofline_plot.plot_roofline, which holds the one-figure lock.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..grading.model import GradeResult
from ..grading.traffic import GLOBAL, LEVELS
from ..text.numbers import fmt_flop_per_byte, fmt_gflops
from .speed_words import positive
from .traffic_view import profiled_speed

# level -> (marker, colour, words in the legend). DRAM, L2 and shared share
# their roof's colour; global loads and L1 have no measured roof.
LEVEL_STYLE = {
    "shared": ("s", "#1b9e77", "shared memory"),
    GLOBAL: ("o", "#111111", "global loads (the lecture's count)"),
    "L1": ("^", "#9a9a9a", "L1"),
    "L2": ("D", "#d95f02", "L2"),
    "DRAM": ("v", "#1f4e79", "DRAM"),
}
# Ceilings.summary()'s key of each level's bandwidth, in GB/s.
ROOF_KEYS = (("DRAM", "dram_gbps"), ("L2", "l2_gbps"), ("shared", "shared_gbps"))
FP32_COLOUR = "#7a1f1f"
COMPULSORY_COLOUR = "#666666"
COLUMNS = 3
# The legend's levels as a kernel's data travels: asked for, L1, L2, DRAM; shared memory beside them.
LEGEND_ORDER = (GLOBAL, "L1", "L2", "DRAM", "shared")


def plain_ticks(axes) -> None:
    """Plain numbers on the decades (0.1, 10, 1,000, not 10^3) and no minor
    ticks: a log axis's own labels are mathtext, whose first use in a
    process is as slow as the rest of the plot (measured:
    docs/measurements-archive.md, "Fast feedback, continued: fewer waits on
    the critical path")."""
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _: f"{value:,.0f}" if value >= 1 else f"{value:g}")
    axes.xaxis.set_major_formatter(plain)
    axes.yaxis.set_major_formatter(plain)
    axes.minorticks_off()


def memory_roofs(result: GradeResult) -> list:
    """(level, GB/s) of every level this GPU's ceilings measured."""
    ceilings = result.ceilings or {}
    return [(level, float(ceilings[key])) for level, key in ROOF_KEYS if positive(ceilings.get(key))]


def _points(traffic) -> list:
    """(level, intensity) of the levels that moved something, in LEVELS order."""
    if traffic is None:
        return []
    return [(lv.name, lv.intensity) for name in LEVELS if (lv := traffic.level(name)) and positive(lv.intensity)]


def _ranges(result: GradeResult, parts: list, fp32: float, roofs: list) -> tuple:
    xs, ys = [], []
    for part in parts:
        speed = profiled_speed(part)
        xs += [speed.intensity] + [x for _, x in _points(part.traffic) + _points(part.reference_traffic)]
        ys += [speed.gflops] + ([speed.reference_gflops] if positive(speed.reference_gflops) else [])
    xs += [fp32 / gbps for _, gbps in roofs]
    # The left edge on a decade, so that the intensities below 1 FLOP/B have a labelled tick (0.1) to be read by.
    return (10 ** math.floor(math.log10(min(xs) / 1.3)), max(xs) * 1.8), (min(ys) / 2.5, fp32 * 1.7)


def _roofs(axes, fp32: float, roofs: list, x_range: tuple) -> None:
    x_low, x_high = x_range
    start = min(fp32 / gbps for _, gbps in roofs)
    axes.plot([start, x_high], [fp32, fp32], color=FP32_COLOUR, linewidth=2,
              label=f"FP32 roof: {fmt_gflops(fp32)} GFLOP/s")
    for level, gbps in roofs:
        _, colour, words = LEVEL_STYLE[level]
        axes.plot([x_low, fp32 / gbps], [gbps * x_low, fp32], color=colour, linewidth=1.4, alpha=0.8,
                  label=f"{words} roof: {fmt_gflops(gbps)} GB/s × FLOP/B")


def _level_row(axes, points: list, gflops: float, hollow: bool) -> None:
    """One kernel's levels at its GFLOP/s, joined by a thin line; hollow
    (the reference) a little larger, so that a part on its reference's
    points shows as a ring around each."""
    xs = [x for _, x in points]
    axes.plot([min(xs), max(xs)], [gflops, gflops], color="#444444", linewidth=0.7,
              linestyle=(0, (3, 2)) if hollow else "-", zorder=2)
    for level, x in points:
        marker, colour, _ = LEVEL_STYLE[level]
        if hollow:
            axes.plot([x], [gflops], marker=marker, markersize=10, markerfacecolor="white", markeredgecolor=colour,
                      markeredgewidth=1.4, linestyle="none", zorder=3)
        else:
            axes.plot([x], [gflops], marker=marker, markersize=7, color=colour, linestyle="none", zorder=4)


def _panel(axes, part) -> None:
    speed = profiled_speed(part)
    axes.axvline(speed.intensity, color=COMPULSORY_COLOUR, linestyle="--", linewidth=1)
    reference = speed.reference_gflops if positive(speed.reference_gflops) else None
    title = f"{part.id}: {fmt_gflops(speed.gflops)} GFLOP/s"
    if reference is not None:
        title += f" (reference {fmt_gflops(reference)})"
    axes.set_title(title, fontsize=11, loc="left")
    if speed.versus == "cublas" and positive(speed.cublas_gflops):
        axes.axhline(speed.cublas_gflops, color="#555555", linestyle=":", linewidth=1)
        axes.annotate(f"cuBLAS {fmt_gflops(speed.cublas_gflops)}", (0.02, speed.cublas_gflops),
                      xycoords=("axes fraction", "data"), textcoords="offset points", xytext=(0, 3), fontsize=8,
                      color="#555555")
    mine, theirs = _points(part.traffic), _points(part.reference_traffic)
    if theirs and reference is not None:
        _level_row(axes, theirs, reference, hollow=True)
    if mine:
        _level_row(axes, mine, speed.gflops, hollow=False)
        global_loads = dict(mine).get(GLOBAL)
        if global_loads is not None:
            axes.annotate(f"{fmt_flop_per_byte(global_loads)} FLOP/B", (global_loads, speed.gflops),
                          textcoords="offset points", xytext=(-5, -17), ha="left", fontsize=9)
        return
    # Counters not read: today's single point at the product's compulsory intensity.
    axes.plot([speed.intensity], [speed.gflops], marker="o", markersize=8, color="#111111", linestyle="none")
    if reference is not None:
        axes.plot([speed.intensity], [reference], marker="*", markersize=11, color="#999999",
                  markeredgecolor="black", markeredgewidth=0.5, linestyle="none")
    axes.text(0.03, 0.05, "counters not read: one point at the\ncompulsory DRAM intensity", fontsize=8,
              transform=axes.transAxes, color="#555555")


def _legend(figure, roofs_axes, any_reference: bool) -> int:
    """The roofs, the levels' markers and the lines, once for every panel,
    below them; returns its number of rows."""
    handles, labels = roofs_axes.get_legend_handles_labels()
    from matplotlib.lines import Line2D

    for level in LEGEND_ORDER:
        marker, colour, words = LEVEL_STYLE[level]
        handles.append(Line2D([], [], marker=marker, color=colour, markersize=7, linestyle="none"))
        labels.append(words)
    if any_reference:
        handles.append(Line2D([], [], marker="o", markersize=9, markerfacecolor="white", markeredgecolor="#111111",
                              markeredgewidth=1.4, linestyle=(0, (3, 2)), color="#444444", linewidth=0.7))
        labels.append("hollow: the reference solution, at its GFLOP/s")
    handles.append(Line2D([], [], color=COMPULSORY_COLOUR, linestyle="--", linewidth=1))
    labels.append("compulsory DRAM intensity of the product")
    ncol = 3
    figure.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=9.5, frameon=False)
    return math.ceil(len(labels) / ncol)


def draw_hierarchy(result: GradeResult, parts: list, path: Path, device: str) -> None:
    """Draws the panels of `parts` (each timed; some with counters) into `path` (PNG)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogLocator

    fp32 = float(result.ceilings["fp32_gflops"])
    roofs = memory_roofs(result)
    x_range, y_range = _ranges(result, parts, fp32, roofs)
    columns = min(COLUMNS, len(parts))
    rows = math.ceil(len(parts) / columns)
    # Never narrower than the title and the legend need, however few the parts.
    figure = Figure(figsize=(max(8.5, 3.9 * columns + 0.9), (2.9 if rows > 1 else 3.4) * rows + 1.5), dpi=120)
    FigureCanvasAgg(figure)
    grid = figure.subplots(rows, columns, sharex=True, sharey=True, squeeze=False)
    for i, axes in enumerate(grid.flat):
        if i >= len(parts):
            axes.set_visible(False)
            continue
        axes.set_xscale("log")
        axes.set_yscale("log")
        _roofs(axes, fp32, roofs, x_range)
        _panel(axes, parts[i])
        axes.set_xlim(*x_range)
        axes.set_ylim(*y_range)
        axes.grid(True, which="major", linewidth=0.5, alpha=0.4)
        plain_ticks(axes)
        axes.tick_params(labelsize=9.5)
        # GFLOP/s labelled at 2 and 5 too: the parts span one decade or two, and a reader needs figures inside it.
        axes.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        if i >= len(parts) - columns:  # the lowest panel of its column
            axes.set_xlabel("FLOP per byte moved at the level", fontsize=10)
            axes.tick_params(labelbottom=True)
        if i % columns == 0:
            axes.set_ylabel("GFLOP/s", fontsize=10)
    figure.suptitle(f"Hierarchical roofline on {device}: each part at its FLOP per byte at every level",
                    fontsize=12)
    legend_rows = _legend(figure, grid.flat[0], any(p.reference_traffic is not None for p in parts))
    legend_inches = 0.21 * legend_rows + 0.15
    figure.tight_layout(rect=(0, legend_inches / figure.get_figheight(), 1, 1))
    figure.savefig(str(path), format="png")
