"""The report's roofline plot: each timed part against the GPU's measured ceilings.

Where a part's counters were read (grading/traffic.py) the plot is a
hierarchical roofline, one small panel per part: the part at its measured
intensity at each level of the memory hierarchy, its reference solution
beside it, under the FP32 roof and the slopes of every level measured
(traffic_plot.py). Without counters each part is one point at the product's
compulsory DRAM intensity.

The pieces serve every roofline plot of the project (the report's, the
leaderboard's); one_figure_at_a_time serves every figure (the handout's
too). matplotlib is imported inside the functions that draw, and through
Figure and the Agg canvas only, never pyplot, so importing this module
stays cheap and pyplot's global state stays with whoever imports us.
"""

from __future__ import annotations

import functools
import importlib
import math
import threading
from pathlib import Path
from typing import Callable, Optional

from ..grading.model import ESTIMATED_RULE, GradeResult, Speed
from ..grading.scoring import CUBLAS
from ..system.warmup import warm_up
from ..text.numbers import fmt_gflops, fmt_intensity
from .speed_words import positive
from .traffic_plot import draw_hierarchy, plain_ticks


def roofline_of(result: GradeResult) -> Optional[tuple]:
    """(FP32 GFLOP/s, DRAM GB/s) when the result has usable ceilings."""
    ceilings = result.ceilings or {}
    fp32, dram = ceilings.get("fp32_gflops"), ceilings.get("dram_gbps")
    if positive(fp32) and positive(dram):
        return float(fp32), float(dram)
    return None


def _plottable_parts(result: GradeResult) -> list:
    return [p for p in result.parts
            if p.speed is not None and positive(p.speed.intensity) and positive(p.speed.gflops)]


# matplotlib is not thread-safe: its mathtext parser keeps state, and two
# figures drawn at once fail with a ParseException. `tilelab batch` writes
# the reports of gradings side by side, in threads (seen in a batch:
# docs/measurements-archive.md, "tilelab-harness landed: every call's
# records taken after the last, events made once, one harness service per
# grading"). One figure at a time, in this process.
_ONE_FIGURE = threading.Lock()


@warm_up
def _import_matplotlib() -> None:
    """The plotting library imported while the GPU works, not when the
    first plot is drawn (measured: docs/measurements-archive.md, "Fast
    feedback: where a grading's time goes")."""
    for module in ("matplotlib.figure", "matplotlib.backends.backend_agg"):
        importlib.import_module(module)


def one_figure_at_a_time(draw: Callable) -> Callable:
    """Makes `draw` (a function that makes and saves a whole figure) wait for any other."""
    @functools.wraps(draw)
    def drawn_alone(*args, **kwargs):
        with _ONE_FIGURE:
            return draw(*args, **kwargs)
    return drawn_alone


def roofline_axes(fp32: float, dram: float, x_range: tuple, y_range: tuple, device: str, size: tuple = (10, 5)):
    """(figure, axes): a log-log roofline of a GPU with these ceilings (FP32
    GFLOP/s, DRAM GB/s) over x_range (FLOP/byte) and y_range (GFLOP/s), its
    two roofs and the ridge drawn and labelled. Every roofline plot of the
    project starts here (the report's, the leaderboard's)."""
    # Figure and the Agg canvas directly, not pyplot: pyplot keeps global
    # state (current figure, backend) that a program importing us may own.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    (x_low, x_high), (y_low, y_high) = x_range, y_range
    ridge = fp32 / dram
    figure = Figure(figsize=size, dpi=120)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.plot([x_low, ridge], [dram * x_low, fp32], color="#1f4e79", linewidth=2,
              label=f"DRAM roof: {fmt_gflops(dram)} GB/s × intensity")
    axes.plot([ridge, x_high], [fp32, fp32], color="#7a1f1f", linewidth=2,
              label=f"FP32 ceiling: {fmt_gflops(fp32)} GFLOP/s")
    axes.plot([ridge], [fp32], marker="D", color="black", markersize=6, linestyle="none")
    axes.annotate(f"ridge {fmt_intensity(ridge)} FLOP/B", (ridge, fp32), textcoords="offset points",
                  xytext=(-10, 10), ha="right", fontsize=9)
    axes.set_xlim(x_low, x_high)
    axes.set_ylim(y_low, y_high)
    axes.set_xlabel("arithmetic intensity (FLOP per byte of compulsory DRAM traffic)")
    axes.set_ylabel("GFLOP/s")
    axes.set_title(f"Roofline on {device}")
    axes.grid(True, which="major", linewidth=0.5, alpha=0.5)
    plain_ticks(axes)
    return figure, axes


def label_column(axes, points: list, label_x: float) -> None:
    """Labels (text, x, y, colour) for points that land almost on one spot
    (every timed size is near 600 FLOP/byte): in a column at label_x, top to
    bottom in GFLOP/s order, pushed apart where they would overlap, each with
    a thin line to its point."""
    y_low, y_high = axes.get_ylim()
    # One and a half lines of 9-point text, in decades of the axis.
    axes_inches = axes.get_position().height * axes.figure.get_figheight()
    min_gap = (math.log10(y_high) - math.log10(y_low)) * (1.5 * 9 / 72) / axes_inches
    previous = None
    for text, x, y, colour in sorted(points, key=lambda p: p[2], reverse=True):
        log_y = math.log10(y)
        if previous is not None and previous - log_y < min_gap:
            log_y = previous - min_gap
        previous = log_y
        axes.annotate(text, (x, y), xytext=(label_x, 10 ** log_y), va="center", fontsize=9, color=colour,
                      arrowprops={"arrowstyle": "-", "color": colour, "linewidth": 0.6, "shrinkB": 5})


def save_figure(figure, axes, target, image_format: str = "png", legend_below: bool = False) -> None:
    """The legend outside the axes, to the right (the points sit low and to
    the right, where a legend inside would cover them) or, for long labels,
    below; then the figure into `target` (a path or a binary file object)."""
    if legend_below:
        axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), borderaxespad=0.0, fontsize=8, ncol=2)
    else:
        axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8)
    figure.tight_layout()
    figure.savefig(target if hasattr(target, "write") else str(target), format=image_format)


def cublas_line(axes, gflops: float, x_from: float, x_to: float, label: str) -> None:
    """cuBLAS SGEMM's GFLOP/s, a dashed line across the compute-bound side,
    labelled in the legend."""
    axes.plot([x_from, x_to], [gflops, gflops], color="#555555", linestyle="--", linewidth=1.2, label=label)
    axes.annotate(f"cuBLAS SGEMM {fmt_gflops(gflops)}", (x_from, gflops), textcoords="offset points", xytext=(6, -11),
                  fontsize=8, color="#555555")


def cublas_label(speed: Speed) -> str:
    estimated = " (estimated)" if speed.rule == ESTIMATED_RULE else ""
    return f"cuBLAS SGEMM (FP32) at {speed.case}: {fmt_gflops(speed.cublas_gflops)} GFLOP/s{estimated}"


@one_figure_at_a_time
def plot_roofline(result: GradeResult, path: Path) -> bool:
    """Draws each timed part against the GPU's measured roofline into `path`
    (PNG). Returns False, writing nothing, when there are no ceilings or no
    part was timed."""
    roof = roofline_of(result)
    parts = _plottable_parts(result)
    if roof is None or not parts:
        return False
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if any(p.traffic is not None for p in parts):
        draw_hierarchy(result, parts, path, _device(result))
        return True
    fp32, dram = roof
    ridge = fp32 / dram
    intensities = [p.speed.intensity for p in parts] + [ridge]
    x_low = min(intensities) / 8
    x_high = max(intensities) * 12
    lowest = min([p.speed.gflops for p in parts]
                 + [p.speed.target_gflops for p in parts if positive(p.speed.target_gflops)])
    y_range = (min(lowest, dram * x_low) / 2, fp32 * 3)
    figure, axes = roofline_axes(fp32, dram, (x_low, x_high), y_range, _device(result))

    colours = ["#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]
    references = [p for p in parts if positive(p.speed.reference_gflops)]
    labels = []
    for i, part in enumerate(parts):
        speed = part.speed
        colour = colours[i % len(colours)]
        axes.plot([speed.intensity], [speed.gflops], marker="o", markersize=8, color=colour, linestyle="none",
                  label=f"{part.id}: {fmt_gflops(speed.gflops)} GFLOP/s")
        labels.append((part.id, speed.intensity, speed.gflops, colour))
        if positive(speed.target_gflops):
            axes.plot([speed.intensity], [speed.target_gflops], marker="_", markersize=18, markeredgewidth=2.5,
                      color=colour, linestyle="none")
            axes.plot([speed.intensity, speed.intensity], [speed.gflops, speed.target_gflops], color=colour,
                      linestyle=":", linewidth=1)
        if positive(speed.reference_gflops):
            axes.plot([speed.intensity], [speed.reference_gflops], marker="*", markersize=11, color=colour,
                      markeredgecolor="black", markeredgewidth=0.5, linestyle="none")
        if speed.versus == CUBLAS and positive(speed.cublas_gflops):
            cublas_line(axes, speed.cublas_gflops, ridge, x_high, cublas_label(speed))
    label_column(axes, labels, max(p.speed.intensity for p in parts) * 2.5)
    # One legend entry explains every target bar, one every reference star.
    axes.plot([], [], marker="_", markersize=14, markeredgewidth=2.5, color="#444444", linestyle="none",
              label="full-credit target (same colour as its part)")
    if references:
        estimated = any(p.speed.rule == ESTIMATED_RULE for p in references)
        axes.plot([], [], marker="*", markersize=11, color="#444444", markeredgecolor="black",
                  markeredgewidth=0.5, linestyle="none",
                  label="reference solution, estimated" if estimated else "reference solution on this GPU")
    save_figure(figure, axes, path)
    return True


def _device(result: GradeResult) -> str:
    return (result.ceilings or {}).get("device_name") or (result.gpu or {}).get("name") or "this GPU"
