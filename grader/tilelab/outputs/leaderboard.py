"""The leaderboards of a part scored against cuBLAS (versus_cublas): Gradescope's and the class's.

Gradescope's are columns of results.json (gradescope_entries); `tilelab
batch` writes the class's beside its gradebook, as leaderboard.csv and
leaderboard.html with its roofline plot inlined. Only a hand-in whose part
passed every stage and was timed at every size ranks (standing), by the
geometric mean of its share of cuBLAS. Names are the hand-ins' or aliases.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import hashlib
import hmac
import io
import math
import os
import secrets
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..grading.model import STAGE_TITLES, STAGES, GradeResult, PartResult, Speed, Stage
from ..grading.scoring import CUBLAS, IMPOSSIBLE_FRACTION
from ..spec.assignment import Assignment, Part
from ..spec.matmul import intensity
from ..system.atomic import write_atomically
from ..text.numbers import fmt_gflops, fmt_percent, fmt_points
from .rendering import TEMPLATE_DIR, render_page
from .roofline_plot import cublas_line, label_column, one_figure_at_a_time, roofline_axes, save_figure

LEADERBOARD_FILES = ("leaderboard.csv", "leaderboard.html")
KEY_FILE = ".leaderboard-key"
# Hand-ins named on the plot; the rest of the ranking are grey points.
PLOT_LABELS = 10

_ADJECTIVES = (
    "amber", "azure", "bold", "brisk", "calm", "clever", "coral", "crisp", "dapper", "eager", "fleet", "frosty",
    "gentle", "gilded", "glad", "golden", "hardy", "hazel", "humble", "ivory", "jade", "jolly", "keen", "kind",
    "lively", "lucid", "lunar", "mellow", "merry", "mint", "misty", "noble", "ochre", "olive", "placid", "plucky",
    "polar", "proud", "quick", "quiet", "rapid", "rosy", "ruby", "rustic", "sage", "scarlet", "serene", "sharp",
    "silver", "sleek", "snowy", "solar", "spry", "steady", "sunny", "swift", "tawny", "teal", "tidy", "vivid",
    "witty", "zany", "zesty", "nimble",
)
_ANIMALS = (
    "badger", "bison", "bobcat", "condor", "coyote", "crane", "dingo", "dolphin", "eagle", "falcon", "ferret",
    "finch", "gecko", "gibbon", "hawk", "heron", "ibis", "jackal", "kestrel", "koala", "lemur", "lynx", "magpie",
    "marten", "mink", "moose", "narwhal", "ocelot", "orca", "osprey", "otter", "panda", "pelican", "puffin", "quail",
    "raven", "robin", "salmon", "seal", "sparrow", "swallow", "tapir", "tern", "thrush", "tiger", "toucan", "walrus",
    "wombat", "yak", "zebra", "beaver", "bittern", "cheetah", "cougar", "egret", "gazelle", "hare", "impala",
    "kiwi", "llama", "marmot", "newt", "oriole", "weasel",
)


# ---------------------------------------------------------------- who ranks


@dataclass
class Standing:
    """Where one hand-in's part stands on a leaderboard."""

    ranked: bool
    reason: str = ""  # why it does not rank ("" when it does)
    sizes: list = field(default_factory=list)  # of Speed: every timing size, as measured (empty: not timed)
    share: Optional[float] = None  # geometric mean of the sizes' shares of cuBLAS: what ranks it
    speed_score: float = 0.0
    speed_max: float = 0.0

    def size(self, case: str) -> Optional[Speed]:
        return next((s for s in self.sizes if s.case == case), None)


def leaderboard_parts(assignment: Assignment) -> list:
    """The parts that go on a leaderboard: those scored against cuBLAS."""
    return [p for p in assignment.parts if p.versus_cublas is not None]


def timing_sizes(part: Part) -> list:
    """The part's timing sizes as Speed.case names them ("4096x4096x4096")."""
    return [f"{c.j}x{c.k}x{c.l}" for c in part.cases["timing"]]


def _implausible(speed: Speed) -> bool:
    return speed.gflops > IMPOSSIBLE_FRACTION * speed.ceiling_value


def standing(part: Optional[PartResult]) -> Standing:
    """Whether `part` (None: not graded) ranks, and on what. It ranks when it
    passed every stage and was timed at every timing size, believably and
    with a cuBLAS figure: speed alone never ranks a wrong kernel. The reason
    it does not names only the stage (its text may name a hidden case, and
    the board may be shown to the class). The share of cuBLAS, timed on the
    GPU that graded it, stays comparable across a batch's GPUs, where
    GFLOP/s would not; the sizes combine as their speed points do."""
    if part is None:
        return Standing(False, "not graded")
    sizes = list(part.speeds) or ([part.speed] if part.speed is not None else [])
    points = {"sizes": sizes, "speed_score": part.speed_score, "speed_max": part.speed_max}
    for name in STAGES:
        stage = part.stages.get(name)
        if stage is not None and stage.status in ("failed", "error"):
            what = "failed" if stage.status == "failed" else "grader error in"
            return Standing(False, f"{what} {STAGE_TITLES.get(name, name)}", **points)
    if not sizes:
        stage = part.stages.get("speed")
        why = stage.summary.removeprefix("not run: ") if stage is not None and stage.summary else ""
        return Standing(False, f"not timed{': ' + why if why else ''}", **points)
    if any(_implausible(s) for s in sizes):
        return Standing(False, "timed above the GPU's FP32 peak, which cannot be right: a TA will look at it", **points)
    if any(s.of_cublas is None for s in sizes):
        return Standing(False, "no cuBLAS figure to compare with", **points)
    share = math.prod(s.of_cublas for s in sizes) ** (1 / len(sizes))
    return Standing(True, "", share=share, **points)


def _part_of(result: Optional[GradeResult], part_id: str) -> Optional[PartResult]:
    if result is None:
        return None
    return next((p for p in result.parts if p.id == part_id), None)


# ---------------------------------------------------------------- Gradescope


def gradescope_entries(result: GradeResult, assignment: Assignment) -> list:
    """results.json's top-level "leaderboard": per leaderboard part, its
    GFLOP/s at each timing size, then its share of cuBLAS at each, in
    percent ([] when no part is scored against cuBLAS), all numbers, higher
    first (Gradescope's default order; students pick their own pseudonyms
    there). A part that does not rank gets 0 everywhere, so its student stays
    on the board, at the bottom, and the report says why."""
    parts = leaderboard_parts(assignment)
    entries = []
    for part in parts:
        prefix = f"{part.id}: " if len(parts) > 1 else ""
        place = standing(_part_of(result, part.id))
        for case in timing_sizes(part):
            speed = place.size(case) if place.ranked else None
            entries.append({"name": f"{prefix}GFLOP/s {case}", "value": round(speed.gflops) if speed else 0})
        for case in timing_sizes(part):
            speed = place.size(case) if place.ranked else None
            entries.append({"name": f"{prefix}% of cuBLAS {case}",
                            "value": round(100 * speed.of_cublas, 1) if speed else 0})
    return entries


# ---------------------------------------------------------------- aliases


def leaderboard_key(out_dir: Path) -> bytes:
    """The batch's secret for aliases, OUT/.leaderboard-key: read, or made
    (random, readable by its owner only) on the first run. The grader's code
    ships to students, so without a secret anyone could work out a
    classmate's alias from their id. An alias is stable while the file is
    kept (grading.leaderboard.names chooses aliases or the hand-ins' names)."""
    path = Path(out_dir) / KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text(encoding="ascii").strip()
        return bytes.fromhex(text)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secrets.token_hex(32) + "\n")
    return leaderboard_key(out_dir)


def alias(hand_in: str, assignment_name: str, key: bytes) -> str:
    """A hand-in's stable alias, e.g. "amber-falcon-3f9a". There are 2^28 of
    them: two hand-ins of a class of 300 share one about once in 6,000 classes."""
    digest = hmac.new(key, f"{assignment_name}\0{hand_in}".encode(), hashlib.sha256).digest()
    return f"{_ADJECTIVES[digest[0] % len(_ADJECTIVES)]}-{_ANIMALS[digest[1] % len(_ANIMALS)]}-{digest[2:4].hex()}"


# ---------------------------------------------------------------- the class board


@dataclass
class Line:
    """One hand-in on the class leaderboard."""

    hand_in: str  # its name (directory)
    shown: str  # what the board calls it: the name or its alias
    standing: Standing
    gpu: str = ""
    result: Optional[GradeResult] = None  # its grading (None: none could be read)
    rank: Optional[int] = None


@dataclass
class Board:
    title: str  # the assignment's title
    part: Part
    names: str  # "alias" or "name"
    sizes: list  # timing sizes, "4096x4096x4096"
    ranked: list  # of Line, best first
    unranked: list  # of Line, by name


def class_board(assignment: Assignment, part: Part, hand_ins: list, key: Optional[bytes] = None) -> Board:
    """The class leaderboard of `part` from `hand_ins`: (name, GradeResult or
    None when it was not graded, why not when it was not). `key`: the alias
    key (leaderboard_key), needed when the board shows aliases."""
    names = assignment.grading.get("leaderboard_names", "alias")
    if names == "alias" and key is None:
        raise ValueError("a board of aliases needs the alias key")
    lines = []
    for hand_in, result, why_not in hand_ins:
        shown = alias(hand_in, assignment.name, key) if names == "alias" else hand_in
        graded = _part_of(result, part.id)
        if result is None:
            place = Standing(False, why_not or "not graded")
        else:
            place = standing(graded) if graded is not None else Standing(False, "the part was not graded")
        gpu = str((result.gpu or {}).get("name", "")) if result is not None else ""
        lines.append(Line(hand_in, shown, place, gpu, result))
    ranked = sorted((line for line in lines if line.standing.ranked), key=lambda x: (-x.standing.share, x.shown))
    for i, line in enumerate(ranked, start=1):
        line.rank = i
    unranked = sorted((line for line in lines if not line.standing.ranked), key=lambda x: x.shown)
    return Board(assignment.title, part, names, timing_sizes(part), ranked, unranked)


def csv_header(board: Board) -> list:
    return (["rank", board.names]
            + [f"GFLOP/s {c}" for c in board.sizes] + [f"% of cuBLAS {c}" for c in board.sizes]
            + ["% of cuBLAS, geometric mean", "verdict", f"speed points (of {fmt_points(board.part.points['speed'])})",
               "gpu"])


def _csv_cell(text: str) -> str:
    # A leading = + - @ would make a spreadsheet read the cell as a formula.
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _verdict(line: Line) -> str:
    return "correct" if line.standing.ranked else line.standing.reason


def csv_text(board: Board) -> str:
    """Ranked hand-ins first, best first; then those not ranked, with why."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(csv_header(board))
    for line in board.ranked + board.unranked:
        place = line.standing
        speeds = [place.size(c) for c in board.sizes]
        writer.writerow(
            ["" if line.rank is None else line.rank, _csv_cell(line.shown)]
            + ["" if s is None else f"{s.gflops:.0f}" for s in speeds]
            + ["" if s is None or s.of_cublas is None else f"{100 * s.of_cublas:.1f}" for s in speeds]
            + ["" if place.share is None else f"{100 * place.share:.1f}", _verdict(line),
               f"{round(place.speed_score, 2):g}" if line.result is not None else "", line.gpu])
    return out.getvalue()


# ---------------------------------------------------------------- the page


def _plotted(board: Board) -> tuple:
    """(GPU name, ranked lines graded on it, one of their results): the plot
    shows one GPU's roofline, the one most of the ranking was graded on."""
    if not board.ranked:
        return "", [], None
    gpu = Counter(line.gpu for line in board.ranked).most_common(1)[0][0]
    lines = [line for line in board.ranked if line.gpu == gpu]
    with_ceilings = [line for line in lines if _ceilings(line.result)]
    return gpu, lines, with_ceilings[0].result if with_ceilings else None


def _ceilings(result: Optional[GradeResult]) -> Optional[tuple]:
    ceilings = (result.ceilings or {}) if result is not None else {}
    fp32, dram = ceilings.get("fp32_gflops"), ceilings.get("dram_gbps")
    ok = all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in (fp32, dram))
    return (float(fp32), float(dram)) if ok else None


def references(board: Board, result: GradeResult) -> list:
    """Per timing size, what the grader timed on that GPU (its calibration
    summary): cuBLAS, the part's reference, the textbook reference that sets
    the floor, as {"size", "cublas", "reference", "floor", "floor_part"}."""
    timed = ((result.calibration or {}).get("references") or {}) if result is not None else {}
    rows = []
    for case in board.sizes:
        floor_part = next((p for p in board.part.versus_cublas.zero_at_reference_of if f"{p} {case}" in timed), None)
        rows.append({"size": case, "cublas": timed.get(f"{CUBLAS} {case}"),
                     "reference": timed.get(f"{board.part.id} {case}"),
                     "floor": timed.get(f"{floor_part} {case}") if floor_part else None, "floor_part": floor_part})
    return rows


_RANK_COLOURS = ["#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#1f78b4",
                 "#b15928", "#6a3d9a"]
_SIZE_MARKERS = ["o", "s", "^", "D"]


@one_figure_at_a_time
def plot_board(board: Board, image_format: str = "png") -> Optional[bytes]:
    """The ranking on the roofline of the GPU most of it was graded on: each
    hand-in a point per timing size (the first PLOT_LABELS named), cuBLAS a
    dashed line, the references stars. None without a ranking or ceilings."""
    gpu, lines, basis = _plotted(board)
    roof = _ceilings(basis)
    if roof is None:
        return None
    fp32, dram = roof
    ridge = fp32 / dram
    x_of = {f"{c.j}x{c.k}x{c.l}": intensity(c.j, c.k, c.l) for c in board.part.cases["timing"]}
    x_low = min(list(x_of.values()) + [ridge]) / 8
    x_high = max(x_of.values()) * 12
    figures = references(board, basis)
    lowest = min([s.gflops for line in lines for s in line.standing.sizes]
                 + [r["floor"] for r in figures if r["floor"]])
    figure, axes = roofline_axes(fp32, dram, (x_low, x_high), (min(lowest, dram * x_low) / 2, fp32 * 3),
                                 (basis.ceilings or {}).get("device_name") or gpu or "this GPU", size=(10, 6.5))

    # The other sizes' figures are in the page's table; the legend names the first size's.
    first = figures[0]
    if first["cublas"]:
        cublas_line(axes, first["cublas"], ridge, x_high,
                    f"cuBLAS SGEMM (FP32): {fmt_gflops(first['cublas'])} GFLOP/s at {first['size']}")
    for key, colour, what in (("reference", "#222222", f"{board.part.id} reference solution"),
                              ("floor", "#999999", "textbook reference: no speed points at or below")):
        points = [(x_of[r["size"]], r[key]) for r in figures if r[key]]
        if points:
            # Hollow and on top: a hand-in as fast as a reference still shows beneath its star.
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="*", markersize=17, color=colour,
                      markerfacecolor="none", markeredgewidth=1.3, linestyle="none", zorder=4,
                      label=f"{what} ({fmt_gflops(first[key])} at {first['size']})" if first[key] else what)

    labels = []
    for line in lines:
        named = line.rank <= PLOT_LABELS
        colour = _RANK_COLOURS[(line.rank - 1) % len(_RANK_COLOURS)] if named else "#b0b0b0"
        for i, case in enumerate(board.sizes):
            speed = line.standing.size(case)
            if speed is not None:
                axes.plot([x_of[case]], [speed.gflops], marker=_SIZE_MARKERS[i % len(_SIZE_MARKERS)], markersize=7,
                          color=colour, markeredgecolor="white" if named else colour, markeredgewidth=0.5,
                          linestyle="none", zorder=3 if named else 2)
        if named:
            head = line.standing.size(board.sizes[0])
            if head is not None:
                labels.append((f"{line.rank}. {line.shown}", x_of[board.sizes[0]], head.gflops, colour))
    for i, case in enumerate(board.sizes):
        axes.plot([], [], marker=_SIZE_MARKERS[i % len(_SIZE_MARKERS)], markersize=7, color="#666666",
                  linestyle="none", label=f"a hand-in at {case}")
    label_column(axes, labels, max(x_of.values()) * 2.5)
    image = io.BytesIO()
    save_figure(figure, axes, image, image_format, legend_below=True)
    return image.getvalue()


def _percent(fraction: float) -> str:
    """One decimal always, so that a column of them lines up."""
    return f"{100 * fraction:.1f} %"


def _page_view(board: Board, plot: Optional[bytes]) -> dict:
    gpu, plotted, basis = _plotted(board)
    gpus = Counter(line.gpu for line in board.ranked + board.unranked if line.gpu)
    rows = []
    for line in board.ranked + board.unranked:
        place = line.standing
        speeds = [place.size(c) for c in board.sizes]
        rows.append({
            "rank": "" if line.rank is None else str(line.rank),
            "shown": line.shown,
            "gflops": ["-" if s is None else fmt_gflops(s.gflops) for s in speeds],
            "of_cublas": ["-" if s is None or s.of_cublas is None else _percent(s.of_cublas) for s in speeds],
            "share": "-" if place.share is None else _percent(place.share),
            "verdict": _verdict(line),
            "points": (f"{fmt_points(place.speed_score)} / {fmt_points(place.speed_max)}"
                       if line.result is not None else "-"),
            "gpu": line.gpu or "-",
            "ranked": place.ranked,
        })
    figures = []
    for r in references(board, basis):
        figures.append({
            "size": r["size"],
            "cublas": fmt_gflops(r["cublas"]) if r["cublas"] else "-",
            "full": fmt_gflops(board.part.versus_cublas.full_at * r["cublas"]) if r["cublas"] else "-",
            "reference": (f"{fmt_gflops(r['reference'])} ({fmt_percent(r['reference'] / r['cublas'])} of cuBLAS)"
                          if r["reference"] and r["cublas"] else "-"),
            "floor": f"{fmt_gflops(r['floor'])} ({r['floor_part']})" if r["floor"] else "-",
        })
    left_off = len(board.ranked) - len(plotted)
    return {
        "title": board.title,
        "part": board.part,
        "names": board.names,
        "sizes": board.sizes,
        "full_at": fmt_percent(board.part.versus_cublas.full_at),
        "gpus": ", ".join(f"{name} ({n})" for name, n in gpus.most_common()) or "none",
        "gpu_column": len(gpus) > 1,
        "plot_gpu": gpu,
        "figures": figures,
        "ranked": [r for r in rows if r["ranked"]],
        "unranked": [r for r in rows if not r["ranked"]],
        "plot": base64.b64encode(plot).decode("ascii") if plot else "",
        "plot_note": (f"{left_off} ranked hand-in{'s' if left_off != 1 else ''} graded on other GPUs "
                      f"{'are' if left_off != 1 else 'is'} left off the plot." if left_off else ""),
        "labelled": PLOT_LABELS,
    }


def html_page(board: Board) -> str:
    """One HTML file: the ranking, those not ranked and why, and the plot
    inlined as a PNG."""
    return render_page(TEMPLATE_DIR, "leaderboard.html.j2", True, _page_view(board, plot_board(board)))


def write_board(board: Board, out_dir: Path, suffix: str = "") -> list:
    """Writes leaderboard{suffix}.csv and .html into out_dir, each whole or not at all; returns their paths."""
    csv_path, html_path = (Path(out_dir) / name.replace(".", f"{suffix}.", 1) for name in LEADERBOARD_FILES)
    write_atomically(csv_path, csv_text(board))
    write_atomically(html_path, html_page(board))
    return [csv_path, html_path]


# ---------------------------------------------------------------- reading a grading back


def _known(cls, d: dict) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def part_from_dict(d: dict) -> PartResult:
    """What a leaderboard needs of a part from its grade.json entry
    (GradeResult.to_dict): stages, speeds and points; not the cases."""
    stages = {name: Stage(**_known(Stage, st)) for name, st in (d.get("stages") or {}).items()}
    speed = Speed(**_known(Speed, d["speed"])) if isinstance(d.get("speed"), dict) else None
    return PartResult(id=d["id"], title=d.get("title", d["id"]), file=d.get("file", ""), stages=stages,
                      speed_score=float(d.get("speed_score", 0.0)), speed_max=float(d.get("speed_max", 0.0)),
                      speed=speed, speeds=[Speed(**_known(Speed, s)) for s in d.get("speeds") or []],
                      extra_credit=bool(d.get("extra_credit", False)), withheld_by=list(d.get("withheld_by") or []))


def result_from_dict(d: dict) -> GradeResult:
    """A grade.json read back, as far as a leaderboard needs it."""
    return GradeResult(assignment=d.get("assignment", ""), mode=d.get("mode", "grade"),
                       submission=d.get("submission", ""), seed=int(d.get("seed", 0)), gpu=d.get("gpu"),
                       ceilings=d.get("ceilings"), parts=[part_from_dict(p) for p in d["parts"]],
                       started=d.get("started", ""), title=d.get("title", ""), calibration=d.get("calibration"))
