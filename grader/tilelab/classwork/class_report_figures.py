"""The class report's pictures, as PNG bytes for the page to inline: the
total's histogram, each part's scores and speeds, the class on the
roofline, and the questions at a glance.

Drawn from a ClassReport alone, with matplotlib's Figure and Agg canvas
(never pyplot: its global state belongs to whoever imports us), one figure
at a time in this process (roofline_plot.one_figure_at_a_time).
"""

from __future__ import annotations

import io
import math
import statistics
from typing import Optional

from ..outputs.roofline_plot import one_figure_at_a_time, roofline_axes
from ..text.numbers import fmt_percent
from .class_report import ClassReport, PartSummary

BAR = "#4c72b0"
FULL = "#1b9e77"
ZERO = "#c44e52"
PART_COLOURS = ["#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]
STATUS_COLOURS = {"correct": "#1b9e77", "wrong": "#c44e52", "invalid": "#e6ab02", "unanswered": "#bbbbbb",
                  "collected": "#4c72b0", "not_graded": "#8c8c8c"}
SHARE_STEP = 0.1  # speed histograms: bins a tenth of the reference wide


def _figure(width: float, height: float, panels: int = 1):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure, [figure.add_subplot(1, panels, i + 1) for i in range(panels)]


def _png(figure) -> bytes:
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png")
    return image.getvalue()


def _score_bars(axes, bins: list, what: str) -> None:
    positions = range(len(bins))
    colours = [ZERO if i == 0 else FULL if i == len(bins) - 1 else BAR for i in positions]
    axes.bar(positions, [b.count for b in bins], color=colours, width=0.8)
    axes.set_xticks(list(positions))
    axes.set_xticklabels([b.label for b in bins], rotation=45, ha="right", fontsize=7)
    axes.set_xlabel(what)
    axes.set_ylabel("hand-ins")
    axes.yaxis.get_major_locator().set_params(integer=True)


@one_figure_at_a_time
def totals_png(report: ClassReport) -> bytes:
    figure, (axes,) = _figure(8, 3.2)
    _score_bars(axes, report.total_bins, f"total points (of {report.max_score:g}; 0 in red, full marks in green)")
    axes.set_title(f"Totals of {len(report.totals)} hand-ins")
    return _png(figure)


def _step(top: float) -> float:
    """A round bin width that cuts 0..top into about a dozen bins."""
    scale = 10 ** math.floor(math.log10(top / 12))
    return next(m * scale for m in (1, 2, 2.5, 5, 10) if top / (m * scale) <= 12)


def _share_bars(axes, shares: list, full_at: Optional[float], zero_at: Optional[float], what: str) -> None:
    """A histogram of shares (of the reference, of the roofline), with the
    lines where speed points start and where they are all earned. Against
    the reference, bins are a tenth of it wide up to it at least; against
    the roofline the shares are small (a tiled kernel reaches a sixth of
    FP32), so the bins follow the data."""
    shares = [s for s in shares if s is not None]
    if full_at:
        top, step = max([1.0, full_at] + shares), SHARE_STEP
    else:
        top = max(shares + [1e-3]) * 1.1
        step = _step(top)
    edges = [i * step for i in range(int(top / step) + 2)]
    axes.hist(shares, bins=edges, color=BAR, edgecolor="white")
    if zero_at:
        axes.axvline(zero_at, color=ZERO, linestyle="--", linewidth=1.2,
                     label=f"no points at or below {fmt_percent(zero_at)}")
    if full_at:
        axes.axvline(full_at, color=FULL, linestyle="--", linewidth=1.2,
                     label=f"every point from {fmt_percent(full_at)}")
    if zero_at or full_at:
        axes.legend(fontsize=7, loc="upper left")
    axes.xaxis.set_major_formatter(_percent_ticks())
    axes.set_xlabel(what)
    axes.set_ylabel("hand-ins")
    axes.yaxis.get_major_locator().set_params(integer=True)


def _percent_ticks():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{100 * value:.0f} %")


@one_figure_at_a_time
def part_png(part: PartSummary) -> bytes:
    """Three panels: the part's points, its speed against the reference (or
    cuBLAS) and against the roofline's bound; the first alone when no
    hand-in was timed."""
    timed = part.speeds
    figure, panels = _figure(12 if timed else 5, 3.2, 3 if timed else 1)
    _score_bars(panels[0], part.bins, f"points (of {part.max_score:g})")
    panels[0].set_title(f"{part.id}: points of {part.graded} hand-ins", fontsize=10)
    if timed:
        against = "cuBLAS SGEMM" if any(p.versus == "cublas" for p in timed) else "the reference solution"
        zero = [p.zero_at for p in timed if p.zero_at]
        _share_bars(panels[1], [p.share for p in timed], statistics.median(p.full_at for p in timed),
                    statistics.median(zero) if zero else None, f"share of {against} on the same GPU")
        panels[1].set_title(f"{part.id}: speed of {len(timed)} timed at {timed[0].case}", fontsize=10)
        _share_bars(panels[2], [p.gflops / p.bound for p in timed if p.bound], None, None,
                    "share of the roofline's bound (FP32 or DRAM)")
        panels[2].set_title(f"{part.id}: against the roofline", fontsize=10)
    return _png(figure)


@one_figure_at_a_time
def roofline_png(report: ClassReport) -> Optional[bytes]:
    """Every timed hand-in of every part on the roofline of the GPU most of
    the class was graded on; None without its ceilings or a timed hand-in."""
    ceilings = report.ceilings
    points = [(i, p) for i, part in enumerate(report.parts) for p in part.speeds if p.gpu == report.roofline_gpu]
    if ceilings is None or not points:
        return None
    fp32, dram = float(ceilings["fp32_gflops"]), float(ceilings["dram_gbps"])
    ridge = fp32 / dram
    xs = [p.intensity for _, p in points] + [ridge]
    ys = [p.gflops for _, p in points]
    x_range = (min(xs) / 4, max(xs) * 6)
    figure, axes = roofline_axes(fp32, dram, x_range, (min(min(ys), dram * x_range[0]) / 2, fp32 * 3),
                                 ceilings.get("device_name") or report.roofline_gpu, size=(10, 5.5))
    measured = any(p.measured for _, p in points)
    for i, part in enumerate(report.parts):
        mine = [p for j, p in points if j == i]
        if mine:
            axes.plot([p.intensity for p in mine], [p.gflops for p in mine], marker="o", markersize=5, alpha=0.6,
                      linestyle="none", color=PART_COLOURS[i % len(PART_COLOURS)],
                      label=f"{part.id} ({len(mine)} hand-in{'s' if len(mine) != 1 else ''})")
    if measured:
        axes.set_xlabel("arithmetic intensity (FLOP per byte of DRAM traffic, measured where the counters were read)")
    axes.set_title(f"The class on the roofline of {ceilings.get('device_name') or report.roofline_gpu}")
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8)
    return _png(figure)


@one_figure_at_a_time
def questions_png(report: ClassReport) -> Optional[bytes]:
    """One bar per question, split by what its answers were; None without questions answered."""
    asked = [q for q in report.questions if q.asked]
    if not asked:
        return None
    figure, (axes,) = _figure(9, 0.28 * len(asked) + 1.4)
    rows = list(range(len(asked)))[::-1]
    left = [0] * len(asked)
    for status, colour in STATUS_COLOURS.items():
        counts = [q.statuses.get(status, 0) for q in asked]
        if any(counts):
            axes.barh(rows, counts, left=left, color=colour, label=status.replace("_", " "), height=0.75)
            left = [a + b for a, b in zip(left, counts)]
    axes.set_yticks(rows)
    axes.set_yticklabels([q.id for q in asked], fontsize=8)
    axes.set_xlabel("hand-ins")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0.0)
    axes.set_title("The questions: what the class answered")
    return _png(figure)
